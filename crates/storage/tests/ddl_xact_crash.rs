//! CREATE and DROP TABLE inside a transaction (ddl.rs) under power cuts: a seeded loop
//! commits (even seeds) or rolls back (odd seeds) a transaction that created table `New`
//! with rows, added a row to table `Old` and dropped `Old`, failing the N-th I/O of that
//! end (the "power cut", N from the seed) and dropping or tearing every unsynced write
//! before the reopen. The database must come back as the transaction's end left it or as
//! if it never happened, never in between: `New` with its rows and no `Old`, or no `New`
//! and `Old` with exactly its committed rows; a commit reported done is the first, a
//! rollback always the second; CHECKDB is clean. A failing seed replays exactly.

mod common;
use common::{assert_checkdb_clean, ctx, row, spec, table_entry, table_rows, Quiet};

use std::collections::BTreeMap;
use std::path::Path;

use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_storage::shared::SharedDatabase;
use extentdb_storage::{Database, StorageError};

/// `Old`: 20 committed rows, checkpointed. Returns its id and rows.
fn old_table(db: &mut Database) -> (u32, BTreeMap<u32, Vec<u8>>) {
    let mut e = table_entry(true);
    e.name = "Old".into();
    let t = db.create_table(e).unwrap();
    let x = db.begin_xact();
    for k in 0..20u32 {
        db.now(|d| d.insert_row(x, t, (&row(k, &[k as u8; 300]), d.growth_env()), None))
            .unwrap();
    }
    let lsn = db.commit_xact(x).unwrap().unwrap();
    db.wal().unwrap().flush(lsn).unwrap();
    db.checkpoint().unwrap();
    let rows = table_rows(db, t);
    (t, rows)
}

/// Transaction x: creates `New` (heap) with 30 rows, adds row 99 to `Old`, drops `Old`.
fn ddl_transaction(shared: &SharedDatabase, old: u32) -> (u64, u32) {
    let (x, _) = shared.begin(None);
    let mut e = table_entry(false);
    e.name = "New".into();
    let version = shared.read().unwrap().catalog_version();
    let new = shared.create_table(version, e, Some(x)).unwrap();
    let mut db = shared.lock_for_tests();
    for k in 0..30u32 {
        db.now(|d| d.insert_row(x, new, (&row(k, &[7; 200]), d.growth_env()), None))
            .unwrap();
    }
    db.now(|d| d.insert_row(x, old, (&row(99, &[9; 100]), d.growth_env()), None))
        .unwrap();
    drop(db);
    shared.drop_table(old, Some(x)).unwrap();
    (x, new)
}

#[test]
fn ddl_inside_a_transaction_survives_power_cuts() {
    let seeds: u64 = std::env::var("XDB_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(80);
    let (mut kept, mut undone) = (0, 0);
    for seed in 0..seeds {
        let fs = SimFileSystem::new(seed + 1, Faults::default());
        let root = Path::new("/sim");
        let mut db = Database::create(&ctx(&fs, true, &Quiet), &spec("Xddl", root)).unwrap();
        let (old, old_rows) = old_table(&mut db);
        let shared = SharedDatabase::new(db);
        let (x, _) = ddl_transaction(&shared, old);
        let commit = seed % 2 == 0;
        let cut = fs.io_count() + 1 + (seed * 5) % 30;
        fs.set_faults(Faults {
            fail_io_at: Some((cut, libc::EIO)),
            ..Default::default()
        });
        let result: Result<(), StorageError> = match commit {
            true => shared.commit(x),
            false => shared.rollback(x),
        };
        drop(shared);
        fs.set_faults(Faults::default());
        fs.crash();
        let db = Database::open(&fs, &root.join("Xddl.mdf"))
            .unwrap_or_else(|e| panic!("seed {seed}: reopen failed: {e}"));
        let new = db.table("dbo", "New").map(|t| t.object_id);
        let old_now = db.table("dbo", "Old").map(|t| t.object_id);
        assert!(
            db.catalog.tables.iter().all(|t| t.pending_ddl.is_none()),
            "seed {seed}: recovery left a mark"
        );
        match (new, old_now) {
            (Some(n), None) => {
                assert!(commit, "seed {seed}: a rollback kept New");
                assert_eq!(table_rows(&db, n).len(), 30, "seed {seed}");
                kept += 1;
            }
            (None, Some(o)) => {
                assert!(
                    !(commit && result.is_ok()),
                    "seed {seed}: an acknowledged commit was lost"
                );
                assert_eq!(table_rows(&db, o), old_rows, "seed {seed}: Old's rows");
                undone += 1;
            }
            other => panic!("seed {seed} ({result:?}): New and Old are {other:?}"),
        }
        assert_checkdb_clean(&db, &format!("seed {seed}"));
    }
    assert!(
        kept > 0 && undone > 0,
        "kept {kept}, undone {undone}: the cuts must land on both sides"
    );
}
