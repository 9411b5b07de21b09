//! IDENTITY values kept in the catalog (identity.rs): a clean close continues exactly and
//! the first value after open reads no table (`full_scans` stays 0); a power cut at a
//! seeded I/O never makes a value come back, and skips at most one block; a database whose
//! catalog is version 5 (no identity values kept) opens, finds its value once by a scan and
//! keeps it from then on.

mod common;
use common::{ctx, spec, Quiet};

use std::collections::BTreeSet;
use std::path::Path;

use extentdb_format::catalog::{self, ColumnEntry, IdentityLast, TableEntry};
use extentdb_format::record::{self, ColumnLayout};
use extentdb_format::{FileId, PageId};
use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_storage::access::Step;
use extentdb_storage::{Database, StorageError};

const LAYOUT: [ColumnLayout; 2] = [ColumnLayout::Fixed(2), ColumnLayout::Variable];

/// A heap (id SMALLINT IDENTITY(seed, inc), v VARBINARY(8000)) named `name`.
fn identity_table(name: &str, seed: i64, inc: i64) -> TableEntry {
    let mut t = common::table_entry(false);
    t.name = name.into();
    t.columns[0] = ColumnEntry {
        name: "id".into(),
        system_type_id: 52,
        max_length: 2,
        precision: 5,
        identity: Some((seed, inc)),
        ..t.columns[0].clone()
    };
    t
}

fn record(id: i64, v: &[u8]) -> Vec<u8> {
    let id = (id as i16).to_le_bytes();
    record::encode(&LAYOUT, &[Some(&id), Some(v)]).unwrap()
}

/// The identity values stored in table `oid`.
fn stored(db: &mut Database, oid: u32) -> Vec<i64> {
    db.scan_rows(oid)
        .unwrap()
        .iter()
        .map(|(_, r)| {
            let cols = record::decode(&LAYOUT, r).unwrap();
            i16::from_le_bytes(cols[0].unwrap().try_into().unwrap()) as i64
        })
        .collect()
}

/// A value as the SQL layer takes it: shared when the bound covers it, else after the
/// block is reserved holding the database.
fn take(db: &mut Database, oid: u32) -> Result<i64, StorageError> {
    db.now(|d| d.next_identity(oid))
}

/// A value taken by a session sharing the database: None when it needs the database held
/// (a block to reserve).
fn shared(db: &Database, oid: u32) -> Option<i64> {
    match db.next_identity(oid).unwrap() {
        Step::Done(v) => Some(v),
        Step::Needs(_) => None,
    }
}

/// Inserts `n` rows with generated values in one committed transaction; returns them.
fn insert(db: &mut Database, oid: u32, n: usize) -> Result<Vec<i64>, StorageError> {
    let x = db.begin_xact();
    let mut values = Vec::new();
    for _ in 0..n {
        let v = take(db, oid)?;
        values.push(v);
        db.now(|d| d.insert_row(x, oid, (&record(v, b"row"), d.growth_env()), None))?;
    }
    if let Some(lsn) = db.commit_xact(x)? {
        db.wal().unwrap().flush(lsn)?;
    }
    Ok(values)
}

fn reopen(fs: &SimFileSystem) -> Database {
    Database::open(fs, &Path::new("/sim").join("Id.mdf")).unwrap()
}

/// Proves a clean close keeps the exact value: after 250 values (past two blocks of 100)
/// and a reopen the next is 251, taken with the database shared and without reading the
/// table; a negative increment, IDENTITY_INSERT past the value and TRUNCATE TABLE continue
/// the same way.
#[test]
fn clean_close_continues_exactly_without_reading_the_table() {
    let fs = SimFileSystem::new(1, Faults::default());
    let mut db = Database::create(&ctx(&fs, true, &Quiet), &spec("Id", Path::new("/sim"))).unwrap();
    let up = db.create_table(identity_table("Up", 1, 1)).unwrap();
    let down = db.create_table(identity_table("Down", 0, -3)).unwrap();
    let trunc = db.create_table(identity_table("Trunc", 10, 5)).unwrap();
    assert_eq!(
        insert(&mut db, up, 250).unwrap(),
        (1..=250).collect::<Vec<_>>()
    );
    assert_eq!(insert(&mut db, down, 3).unwrap(), vec![0, -3, -6]);
    insert(&mut db, trunc, 4).unwrap();
    // IDENTITY_INSERT: a value below the current one changes nothing, one past it moves it.
    db.now(|d| d.note_identity(down, -2)).unwrap();
    db.now(|d| d.note_identity(down, -700)).unwrap();
    db.truncate_table(trunc).unwrap();
    assert_eq!(insert(&mut db, trunc, 2).unwrap(), vec![10, 15]);
    db.checkpoint_for_close().unwrap();
    assert_eq!(
        db.catalog.tables[0].identity_last,
        IdentityLast::Through(250)
    );
    drop(db);

    let mut db = reopen(&fs);
    assert_eq!(db.full_scans(), 0);
    assert_eq!(shared(&db, up), Some(251));
    assert_eq!(shared(&db, down), Some(-703));
    assert_eq!(db.now(|d| d.next_identity(trunc)).unwrap(), 20);
    assert_eq!(db.current_identity(up).unwrap(), Some(251));
    assert_eq!(
        db.full_scans(),
        0,
        "no table was read for its identity value"
    );
}

/// The bound of each table after a crash must lie past every value handed out, by at most
/// one block (100 for smallint): values handed out are tracked, the power is cut at a
/// seeded I/O (unsynced writes dropped or torn), and after recovery the next values are
/// new and the first of them skips at most a block.
#[test]
fn crash_never_repeats_a_value() {
    let seeds: u64 = std::env::var("XDB_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let (mut cut_mid, mut skipped_max) = (0, 0);
    for seed in 0..seeds {
        let fs = SimFileSystem::new(seed + 1, Faults::default());
        let mut db =
            Database::create(&ctx(&fs, true, &Quiet), &spec("Id", Path::new("/sim"))).unwrap();
        let tables = [
            (db.create_table(identity_table("Up", 1, 1)).unwrap(), 1),
            (db.create_table(identity_table("Down", 0, -3)).unwrap(), -3),
        ];
        let mut handed: Vec<BTreeSet<i64>> = vec![BTreeSet::new(), BTreeSet::new()];
        let cut = fs.io_count() + 1 + (seed * 13) % 300;
        fs.set_faults(Faults {
            fail_io_at: Some((cut, libc::EIO)),
            ..Default::default()
        });
        let mut failed_note = [None, None];
        let failed = workload(&mut db, seed, &tables, &mut handed, &mut failed_note);
        cut_mid += failed as u32;
        drop(db);
        fs.set_faults(Faults::default());
        fs.crash();
        let mut db = reopen(&fs);
        for (i, &(oid, inc)) in tables.iter().enumerate() {
            let rows = stored(&mut db, oid);
            assert!(
                rows.iter().all(|v| handed[i].contains(v)),
                "seed {seed}: a stored value was never handed out"
            );
            let next = db.now(|d| d.next_identity(oid)).unwrap();
            assert!(
                !handed[i].contains(&next),
                "seed {seed}: value {next} handed out again after the crash"
            );
            let last = if inc > 0 {
                handed[i].last()
            } else {
                handed[i].first()
            };
            if let Some(&last) = last {
                let skipped = (next - last) / inc - 1;
                let after_note = failed_note[i].is_some_and(|v| next == v + inc);
                assert!(
                    (0..=100).contains(&skipped) || after_note,
                    "seed {seed}: {skipped} values skipped after {last} (next {next})"
                );
                if !after_note {
                    skipped_max = skipped_max.max(skipped);
                }
            }
        }
    }
    eprintln!(
        "{cut_mid} of {seeds} cuts inside the workload; at most {skipped_max} values skipped"
    );
    assert!(cut_mid > 0, "no cut landed inside the workload");
    assert!(
        skipped_max > 0,
        "no crash skipped values: the bound was never exercised"
    );
}

/// Transactions inserting 1 to 60 rows into either table, some storing a value past the
/// current one (IDENTITY_INSERT), until the cut fails an I/O (true) or 12 are done. A
/// value is counted as handed out once `take` returns it or `note_identity` accepts it.
fn workload(
    db: &mut Database,
    seed: u64,
    tables: &[(u32, i64); 2],
    handed: &mut [BTreeSet<i64>],
    failed_note: &mut [Option<i64>; 2],
) -> bool {
    let mut r = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        r
    };
    for _ in 0..12 {
        let i = (next() % 2) as usize;
        let (oid, inc) = tables[i];
        let x = db.begin_xact();
        for _ in 0..1 + next() % 60 {
            let v = if next() % 50 == 0 {
                let cur = db.current_identity(oid).unwrap().unwrap_or(0);
                let v = cur + inc * (1 + (next() % 150) as i64);
                if db.now(|d| d.note_identity(oid, v)).is_err() {
                    // It may have become durable: the next value may follow it.
                    failed_note[i] = Some(v);
                    return true;
                }
                v
            } else {
                match take(db, oid) {
                    Ok(v) => v,
                    Err(_) => return true,
                }
            };
            handed[i].insert(v);
            if db
                .now(|d| d.insert_row(x, oid, (&record(v, b"row"), d.growth_env()), None))
                .is_err()
            {
                return true;
            }
        }
        let committed = db
            .commit_xact(x)
            .and_then(|l| l.map_or(Ok(()), |l| db.wal().unwrap().flush(l)));
        if committed.is_err() {
            return true;
        }
    }
    false
}

/// Proves a version 5 database (its catalog rewritten as version 5 wrote it) opens, its
/// value `Unknown`; the first value reads the table once (one full scan) and continues
/// from the largest stored; the bound is then kept (version 6), so the next open reads
/// nothing.
#[test]
fn version_5_catalog_finds_its_value_once() {
    let fs = SimFileSystem::new(7, Faults::default());
    let mut db = Database::create(&ctx(&fs, true, &Quiet), &spec("Id", Path::new("/sim"))).unwrap();
    let oid = db.create_table(identity_table("Old", 1, 1)).unwrap();
    insert(&mut db, oid, 40).unwrap();
    db.checkpoint_for_close().unwrap();
    rewrite_catalog_as_version_5(&mut db);
    drop(db);

    let mut db = reopen(&fs);
    assert_eq!(db.catalog.tables[0].identity_last, IdentityLast::Unknown);
    assert_eq!(shared(&db, oid), None);
    assert_eq!(db.full_scans(), 0);
    assert_eq!(db.now(|d| d.next_identity(oid)).unwrap(), 41);
    assert_eq!(db.full_scans(), 1, "the value was found by one scan");
    assert_eq!(shared(&db, oid), Some(42));
    assert_eq!(db.now(|d| d.next_identity(oid)).unwrap(), 43);
    assert_eq!(db.full_scans(), 1, "and only once");
    db.checkpoint_for_close().unwrap();
    drop(db);

    let mut db = reopen(&fs);
    assert_eq!(shared(&db, oid), Some(44));
    assert_eq!(db.full_scans(), 0);
    let mut values = stored(&mut db, oid);
    values.sort();
    assert_eq!(values, (1..=40).collect::<Vec<_>>());
}

/// Writes the database's catalog as catalog version 5 (no identity values) in place and
/// points both boot pages at it, as a database written before version 6 holds it.
fn rewrite_catalog_as_version_5(db: &mut Database) {
    let blob = db.catalog.encode_version(5);
    assert_eq!(catalog::pages_needed(blob.len()), 1);
    let at = db.boot.catalog_first_page;
    let mut boot = db.boot.clone();
    boot.generation += 1;
    boot.catalog_bytes = blob.len() as u32;
    boot.catalog_crc = crc32c::crc32c(&blob);
    let primary = db.primary();
    let mut page = catalog::to_pages(&blob, &[at]).remove(0);
    primary.write_page_unlogged(at.page, &mut page).unwrap();
    for n in [9, 10] {
        let id = PageId::new(FileId::PRIMARY.0, n);
        let mut p = boot.encode(id).unwrap();
        primary.write_page_unlogged(id.page, &mut p).unwrap();
    }
    primary.file.sync_data().unwrap();
}
