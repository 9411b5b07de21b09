//! DROP TABLE and TRUNCATE TABLE give back their allocation unit whole: its extents, its
//! sys.allocation_units row and its IAM pages. Before, every drop or truncate left its
//! unit's row and IAM pages behind for good, so a workload that creates and drops tables
//! grew the catalog and leaked a page each time; and a crash part-way through leaves no
//! unit that no table names.

use std::path::Path;

mod common;
use common::{assert_checkdb_clean, ctx, row, spec, table_entry, Quiet};

use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_storage::Database;

/// Allocation units the catalog lists, and pages allocated in the primary file.
fn footprint(db: &Database) -> (usize, u32) {
    let units = db.catalog.allocation_units.len();
    let primary = db.data_files.get(&1).unwrap();
    let size = db
        .catalog
        .files
        .iter()
        .find(|f| f.file_id == 1)
        .unwrap()
        .size_pages;
    let mut allocated = 0;
    for p in 0..size {
        if primary.pfs(extentdb_format::PageNo(p)).unwrap() & 0x40 != 0 {
            allocated += 1;
        }
    }
    (units, allocated)
}

/// A table of either kind with a few extents of rows.
fn filled(db: &mut Database, name: &str, clustered: bool) -> u32 {
    let mut e = table_entry(clustered);
    e.name = name.into();
    let t = db.create_table(e).unwrap();
    let x = db.begin_xact();
    for k in 0..300u32 {
        db.now(|d| d.insert_row(x, t, (&row(k, &[5u8; 700]), d.growth_env()), None))
            .unwrap();
    }
    let lsn = db.commit_xact(x).unwrap().unwrap();
    db.wal().unwrap().flush(lsn).unwrap();
    t
}

#[test]
fn drop_and_truncate_give_back_the_unit_its_row_and_its_iam_pages() {
    let fs = SimFileSystem::new(31, Faults::default());
    let root = Path::new("/sim");
    let mut db = Database::create(&ctx(&fs, true, &Quiet), &spec("Units", root)).unwrap();
    let keep = filled(&mut db, "Keep", false);
    let before = footprint(&db);
    for i in 0..40 {
        let t = filled(&mut db, "Gone", i % 2 == 0);
        if i % 4 < 2 {
            db.truncate_table(t).unwrap();
        }
        db.drop_table(t).unwrap();
        db.truncate_table(keep).unwrap();
        let x = db.begin_xact();
        db.now(|d| d.insert_row(x, keep, (&row(i, &[1u8; 700]), d.growth_env()), None))
            .unwrap();
        db.commit_xact(x).unwrap();
    }
    let after = footprint(&db);
    assert_eq!(after.0, before.0, "sys.allocation_units rows");
    assert!(
        after.1 <= before.1 + 8,
        "pages allocated in the primary file: {} before, {} after 40 drops and truncates",
        before.1,
        after.1
    );
    assert_checkdb_clean(&db, "after the drops");
    drop(db);
    let db = Database::open(&fs, &root.join("Units.mdf")).unwrap();
    assert_eq!(footprint(&db).0, before.0);
    assert_checkdb_clean(&db, "after reopening");
}

#[test]
fn a_drop_cut_short_by_a_crash_leaves_no_unit_behind() {
    let seeds: u64 = std::env::var("XDB_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(12, |n: u64| n / 10);
    for seed in 0..seeds {
        let fs = SimFileSystem::new(seed + 400, Faults::default());
        let root = Path::new("/sim");
        let mut db = Database::create(&ctx(&fs, true, &Quiet), &spec("Units", root)).unwrap();
        let base = footprint(&db).0;
        let t = filled(&mut db, "Gone", seed % 2 == 0);
        let cut = fs.io_count() + 1 + (seed * 7) % 40;
        fs.set_faults(Faults {
            fail_io_at: Some((cut, libc::EIO)),
            ..Default::default()
        });
        let dropped = if seed % 3 == 0 {
            db.truncate_table(t).is_ok()
        } else {
            db.drop_table(t).is_ok()
        };
        drop(db);
        fs.set_faults(Faults::default());
        fs.crash();
        let db = Database::open(&fs, &root.join("Units.mdf"))
            .unwrap_or_else(|e| panic!("seed {seed}: reopen: {e}"));
        let tables = db.catalog.tables.len();
        // Every unit left is one a table names (plus the catalog's own).
        assert_eq!(
            footprint(&db).0,
            base + tables,
            "seed {seed} (the statement {}): units {:?}",
            if dropped { "completed" } else { "failed" },
            db.catalog.allocation_units
        );
        assert_checkdb_clean(&db, &format!("seed {seed}"));
    }
}

/// xact.rs invariant 5 is asserted, not only kept by the SQL layer's Sch-M lock: dropping
/// or emptying a table an open transaction has changed panics before anything changes
/// (a rollback would otherwise compensate into pages the table no longer owns).
#[test]
fn a_table_an_open_transaction_changed_is_not_dropped_or_emptied() {
    for truncate in [false, true] {
        let fs = SimFileSystem::new(77, Faults::default());
        let root = Path::new("/sim");
        let mut db = Database::create(&ctx(&fs, true, &Quiet), &spec("Open", root)).unwrap();
        let t = filled(&mut db, "Busy", truncate);
        let x = db.begin_xact();
        db.now(|d| d.insert_row(x, t, (&row(9_999, &[7u8; 70]), d.growth_env()), None))
            .unwrap();
        let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if truncate {
                db.truncate_table(t)
            } else {
                db.drop_table(t)
            }
        }));
        let message = dropped
            .expect_err("the drop went ahead of the open transaction")
            .downcast::<String>()
            .map(|m| *m)
            .unwrap_or_default();
        assert!(message.contains("xact.rs invariant 5"), "{message}");
    }
}
