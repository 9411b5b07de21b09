//! Log space: a transaction that outgrows the log grows it by FILEGROWTH (prepared in the
//! background) up to MAXSIZE, then gets "log full" (9002 upstream) while rollback, commit
//! and recovery still find the space they need.

mod common;
use common::{ctx, file, spec, Quiet};

use std::path::Path;

use extentdb_format::catalog::{ColumnEntry, TableEntry};
use extentdb_format::file_header::FileType;
use extentdb_format::record::{self, ColumnLayout};
use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_storage::{Database, StorageError};

fn table() -> TableEntry {
    TableEntry {
        object_id: 0,
        schema_name: "dbo".into(),
        name: "Big".into(),
        created_us: 0,
        data_space_id: 1,
        allocation_unit_id: 0,
        index_id: 0,
        root_page: extentdb_format::PageId::NULL,
        primary_key: None,
        columns: vec![ColumnEntry {
            column_id: 1,
            name: "c".into(),
            system_type_id: 175,
            max_length: 4000,
            precision: 0,
            scale: 0,
            is_nullable: false,
            identity: None,
            default_sql: String::new(),
            computed: None,
        }],
        identity_last: Default::default(),
        lock_escalation: Default::default(),
        pending_ddl: None,
        index_of: None,
        checks: Vec::new(),
        foreign_keys: Vec::new(),
        is_disabled: false,
    }
}

/// A 4,000-byte row of noise (so the log cannot compress it away) led by its number.
fn row(i: u32) -> Vec<u8> {
    let mut x = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut v: Vec<u8> = (0..4000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    v[..4].copy_from_slice(&i.to_le_bytes());
    record::encode(&[ColumnLayout::Fixed(4000)], &[Some(&v)]).unwrap()
}

/// A 1 MB log growing by 1 MB up to `max_pages`, and a 40 MB data file.
fn db(fs: &SimFileSystem, growth: u32, max_pages: i32) -> Database {
    let root = Path::new("/sim");
    let mut s = spec("Grow", root);
    s.files[0].size_pages = 5120;
    let mut log = file("Grow_log", root.join("Grow_log.ldf"), FileType::Log, 128);
    log.growth = growth;
    log.max_size_pages = max_pages;
    s.files[1] = log;
    Database::create(&ctx(fs, true, &Quiet), &s).unwrap()
}

/// Inserts rows in one transaction until the log is full; returns how many went in.
fn fill(db: &mut Database, t: u32, x: u64, limit: u32) -> Result<u32, StorageError> {
    for i in 0..limit {
        match db.now(|d| d.insert_row(x, t, (&row(i), d.growth_env()), None)) {
            Ok(_) => {}
            Err(StorageError::LogFull(_)) => return Ok(i),
            Err(e) => return Err(e),
        }
    }
    Ok(limit)
}

/// Proves a log with FILEGROWTH 0 gives "log full", and the transaction still rolls back
/// and the database reopens clean.
#[test]
fn full_log_without_growth_still_rolls_back() {
    let fs = SimFileSystem::new(3, Faults::default());
    let mut db = db(&fs, 0, -1);
    let t = db.create_table(table()).unwrap();
    let x = db.begin_xact();
    let n = fill(&mut db, t, x, 10_000).unwrap();
    assert!(n > 10 && n < 10_000, "{n} rows before the log filled");
    db.rollback_xact(x).unwrap();
    assert!(db.scan_rows(t).unwrap().is_empty());
    // The log is reusable again after a checkpoint.
    db.checkpoint().unwrap();
    let x = db.begin_xact();
    db.now(|d| d.insert_row(x, t, (&row(1), d.growth_env()), None))
        .unwrap();
    let lsn = db.commit_xact(x).unwrap().unwrap();
    db.wal().unwrap().flush(lsn).unwrap();
    drop(db);
    fs.crash();
    let db = Database::open(&fs, Path::new("/sim/Grow.mdf")).unwrap();
    assert_eq!(db.scan_rows(t).unwrap().len(), 1);
}

/// Proves the log grows by FILEGROWTH up to MAXSIZE for a long transaction, the growth
/// survives a crash with the catalog and the file agreeing, and the committed rows are there.
#[test]
fn long_transaction_grows_the_log_to_maxsize() {
    let fs = SimFileSystem::new(4, Faults::default());
    let mut db = db(&fs, 128, 128 * 6);
    let t = db.create_table(table()).unwrap();
    let x = db.begin_xact();
    let n = fill(&mut db, t, x, 10_000).unwrap();
    let (growths, _) = db.log_growth_stats();
    assert_eq!(growths, 5, "1 MB -> 6 MB in 1 MB steps");
    let log = db.catalog.files.iter().find(|f| f.file_id == 2).unwrap();
    assert_eq!(log.size_pages, 128 * 6);
    assert!(n > 1000, "{n} rows of 4 KB in a 6 MB log");
    let lsn = db.commit_xact(x).unwrap().unwrap();
    db.wal().unwrap().flush(lsn).unwrap();
    drop(db);
    fs.crash();
    let db = Database::open(&fs, Path::new("/sim/Grow.mdf")).unwrap();
    assert_eq!(db.scan_rows(t).unwrap().len() as u32, n);
    let vlf_bytes: u64 = db.vlfs().unwrap().iter().map(|v| v.size).sum();
    assert_eq!(vlf_bytes + 8192, 128 * 6 * 8192, "VLFs tile the grown file");
}

/// Proves an open transaction that grew the log is undone by recovery after a crash.
#[test]
fn crash_after_growth_with_open_transaction() {
    let fs = SimFileSystem::new(5, Faults::default());
    let mut db = db(&fs, 128, -1);
    let t = db.create_table(table()).unwrap();
    let x = db.begin_xact();
    for i in 0..600 {
        db.now(|d| d.insert_row(x, t, (&row(i), d.growth_env()), None))
            .unwrap();
    }
    assert!(db.log_growth_stats().0 >= 1);
    db.checkpoint().unwrap();
    drop(db);
    fs.crash();
    let db = Database::open(&fs, Path::new("/sim/Grow.mdf")).unwrap();
    assert_eq!(db.recovery_stats().unwrap().rolled_back, 1);
    assert!(db.scan_rows(t).unwrap().is_empty());
}

/// Proves a full data file grows by FILEGROWTH up to MAXSIZE for inserts, then the insert
/// fails with "filegroup full" (1105 upstream), and the rows survive a crash.
#[test]
fn data_file_autogrows_to_maxsize() {
    let fs = SimFileSystem::new(6, Faults::default());
    let root = Path::new("/sim");
    let mut s = spec("Data", root);
    s.files[0].size_pages = 256;
    s.files[0].growth = 128;
    s.files[0].max_size_pages = 640;
    s.files[1] = file("Data_log", root.join("Data_log.ldf"), FileType::Log, 1024);
    let mut db = Database::create(&ctx(&fs, true, &Quiet), &s).unwrap();
    let t = db.create_table(table()).unwrap();
    let mut n = 0;
    let err = loop {
        let x = db.begin_xact();
        match db.now(|d| d.insert_row(x, t, (&row(n), d.growth_env()), None)) {
            Ok(_) => {
                let lsn = db.commit_xact(x).unwrap().unwrap();
                db.wal().unwrap().flush(lsn).unwrap();
                n += 1;
            }
            Err(e) => {
                db.rollback_xact(x).unwrap();
                break e;
            }
        }
    };
    assert!(matches!(err, StorageError::FilegroupFull { .. }), "{err}");
    assert_eq!(db.catalog.files[0].size_pages, 640);
    // 640 pages less the reserved extents hold two 4 KB rows a page.
    assert!(n > 1000, "{n} rows");
    drop(db);
    fs.crash();
    let db = Database::open(&fs, &root.join("Data.mdf")).unwrap();
    assert_eq!(db.scan_rows(t).unwrap().len() as u32, n);
    assert_eq!(db.catalog.files[0].size_pages, 640);
}

/// Proves data-file growth with IFI off is prepared in the background: growths are
/// committed from preparations (no session zeroed under the lock), every row is there after
/// a crash, and a power cut at a seeded I/O while preparations run loses no committed row.
#[test]
fn data_file_growth_prepared_in_the_background_with_ifi_off() {
    use extentdb_storage::file_init::InitPolicy;
    use extentdb_storage::log_growth::GrowthEnv;
    for seed in 0..3u64 {
        let fs = SimFileSystem::new(seed + 40, Faults::default());
        let root = Path::new("/sim");
        let mut s = spec("Grow", root);
        s.files[0].size_pages = 640;
        s.files[1].size_pages = 4096;
        let mut db = Database::create(&ctx(&fs, false, &Quiet), &s).unwrap();
        db.set_growth_env(GrowthEnv {
            policy: InitPolicy {
                instant: false,
                trace_zeroing: false,
            },
            ..GrowthEnv::default()
        });
        let t = db.create_table(common::table_entry(false)).unwrap();
        if seed > 0 {
            fs.set_faults(Faults {
                fail_io_at: Some((fs.io_count() + 300 + seed * 1297, libc::EIO)),
                ..Default::default()
            });
        }
        let mut committed = 0u32;
        let result: Result<(), StorageError> = (|| {
            // 8 MB of rows into a 5 MB file growing by 1 MB, 20 rows a transaction.
            for batch in 0..130u32 {
                let x = db.begin_xact();
                for k in batch * 20..(batch + 1) * 20 {
                    db.now(|d| {
                        d.insert_row(x, t, (&common::row(k, &[7; 3000]), d.growth_env()), None)
                    })?;
                }
                let lsn = db.commit_xact(x)?.unwrap();
                db.wal().unwrap().flush(lsn)?;
                committed = (batch + 1) * 20;
            }
            Ok(())
        })();
        let failed = result.is_err();
        if seed == 0 {
            result.unwrap();
            let (prepared, _) = db.data_growth_stats();
            assert!(
                prepared >= 3,
                "growths committed from preparations: {prepared}"
            );
        }
        drop(db);
        fs.set_faults(Faults::default());
        fs.crash();
        let db = Database::open(&fs, &root.join("Grow.mdf")).unwrap();
        let n = db.scan_rows(t).unwrap().len() as u32;
        assert!(
            n == committed || (failed && n == committed + 20),
            "seed {seed}: {n} rows, {committed} committed"
        );
    }
}
