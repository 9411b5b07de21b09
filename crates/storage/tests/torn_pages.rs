//! Torn-page protection of compensations (xact.rs invariant 10, RECOVERY.md "Write-ahead
//! logging"): a compensation record (CLR) may be the first change to its page after a
//! checkpoint. It logs no image of the page; instead crash recovery redoes from MinLSN (the
//! checkpoint before the oldest active transaction's BEGIN), where the page's image or
//! format lies, so a power cut that tears the page's next write leaves redo a whole page to
//! rebuild it from.
//!
//! Each test commits rows, checkpoints, changes a row in a transaction and checkpoints
//! again, so the change is on disk and older than the redo start; the compensation is then
//! the first change to the page after the checkpoint. The page's next write is left
//! unsynced (a data file's fdatasync fails) and the power is cut on the simulated file
//! system, which tears unsynced writes per sector as its seed decides: several seeds, each
//! replaying exactly, and the test asserts that some of them tore the page. The reopen must
//! recover exactly the committed rows, CHECKDB clean.
//! - `a_rollback_compensating_first_after_a_checkpoint_survives_a_torn_page`: the
//!   transaction's own rollback writes the CLR (a heap and a clustered index).
//! - `recovery_undo_compensating_first_after_a_checkpoint_survives_a_torn_page`: a crash
//!   leaves the transaction open, and recovery's undo writes the CLR; the power is cut at
//!   each I/O of that recovery in turn, and the next recovery redoes over the torn page.

mod common;
use common::{assert_checkdb_clean, ctx, file, row, table_entry, table_rows, Quiet};

use std::collections::BTreeMap;
use std::path::Path;

use extentdb_format::catalog::RecoveryModel;
use extentdb_format::file_header::FileType;
use extentdb_format::PageId;
use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_io::FileSystem;
use extentdb_storage::table::Rid;
use extentdb_storage::{Database, NewDatabase};

const PAGE_BYTES: usize = 8192;
/// Seeds (crash images) each test tries.
const SEEDS: u64 = 12;

/// Database `Torn` in `root`: a 2 MB data file and a 4 MB log, SIMPLE.
fn spec(root: &Path) -> NewDatabase {
    NewDatabase {
        name: "Torn".into(),
        database_id: 5,
        recovery_model: RecoveryModel::Simple,
        files: vec![
            file("Torn", root.join("Torn.mdf"), FileType::Rows, 256),
            file("Torn_log", root.join("Torn_log.ldf"), FileType::Log, 512),
        ],
        filegroups: vec![],
    }
}

/// A table of 60 committed rows of 600 bytes (several pages), checkpointed.
fn committed_table(db: &mut Database, clustered: bool) -> (u32, BTreeMap<u32, Vec<u8>>) {
    let table = db.create_table(table_entry(clustered)).unwrap();
    let x = db.begin_xact();
    let mut rows = BTreeMap::new();
    for k in 0..60u32 {
        let v = vec![k as u8; 600];
        db.now(|d| d.insert_row(x, table, (&row(k, &v), d.growth_env()), None))
            .unwrap();
        rows.insert(k, v);
    }
    let lsn = db.commit_xact(x).unwrap().unwrap();
    db.wal().unwrap().flush(lsn).unwrap();
    db.checkpoint().unwrap();
    (table, rows)
}

/// Opens transaction x, updates row 30 in place (same length) and checkpoints, so the
/// change is on disk and older than the redo start; returns x and the row's page.
fn change_then_checkpoint(db: &mut Database, table: u32) -> (u64, PageId) {
    let (rid, old): (Rid, Vec<u8>) = db
        .scan_rows(table)
        .unwrap()
        .into_iter()
        .find(|(_, rec)| rec == &row(30, &[30u8; 600]))
        .expect("row 30");
    let x = db.begin_xact();
    let new = row(30, &[0xEE; 600]);
    db.now(|d| d.update_row_at(x, table, (rid, &old), (&new, d.growth_env()), None))
        .unwrap();
    db.checkpoint().unwrap();
    (x, rid.0)
}

/// The page's bytes in the data file: as the next crash keeps them if it drops every
/// unsynced write (durable), and as they are now (current).
fn page_versions(fs: &SimFileSystem, mdf: &Path, page: PageId) -> (Vec<u8>, Vec<u8>) {
    let offset = page.page.0 as u64 * PAGE_BYTES as u64;
    let mut durable = vec![0u8; PAGE_BYTES];
    assert!(fs.read_durable(mdf, &mut durable, offset));
    let mut current = vec![0u8; PAGE_BYTES];
    fs.open(mdf).unwrap().read_at(&mut current, offset).unwrap();
    (durable, current)
}

/// Cuts the power and says whether the page's write was torn: its bytes now are neither
/// the durable version nor the one written since.
fn crash_tearing(fs: &SimFileSystem, mdf: &Path, page: PageId) -> bool {
    let (durable, current) = page_versions(fs, mdf, page);
    fs.set_faults(Faults::default());
    fs.crash();
    let (after, _) = page_versions(fs, mdf, page);
    durable != current && after != durable && after != current
}

/// Proves a rollback's CLR on a page last changed before the checkpoint is redone over the
/// page's image: with the page's write torn by a power cut, the reopen recovers the
/// committed rows (before the fix: the reopen failed, the torn page's audit failing under
/// redo).
#[test]
fn a_rollback_compensating_first_after_a_checkpoint_survives_a_torn_page() {
    let root = Path::new("/sim");
    let mdf = root.join("Torn.mdf");
    for clustered in [false, true] {
        let mut torn = 0;
        for seed in 1..=SEEDS {
            let fs = SimFileSystem::new(seed, Faults::default());
            let mut db = Database::create(&ctx(&fs, true, &Quiet), &spec(root)).unwrap();
            let (table, committed) = committed_table(&mut db, clustered);
            let (x, page) = change_then_checkpoint(&mut db, table);
            db.rollback_xact(x).unwrap();
            let wal = db.wal().unwrap();
            wal.flush(wal.end_lsn()).unwrap();
            // The page is written and the data file's sync fails: the write is unsynced.
            fs.set_faults(Faults {
                fail_next_sync: Some(libc::EIO),
                ..Default::default()
            });
            assert!(
                db.checkpoint().is_err(),
                "seed {seed}: the sync did not fail"
            );
            drop((wal, db));
            torn += usize::from(crash_tearing(&fs, &mdf, page));
            let db = Database::open(&fs, &mdf)
                .unwrap_or_else(|e| panic!("clustered {clustered}, seed {seed}: reopen: {e}"));
            let when = format!("clustered {clustered}, seed {seed}");
            assert_eq!(table_rows(&db, table), committed, "{when}: rows");
            assert_checkdb_clean(&db, &when);
        }
        eprintln!("clustered {clustered}: the page was torn in {torn} of {SEEDS} seeds");
        assert!(torn > 0, "clustered {clustered}: no seed tore the page");
    }
}

/// Proves recovery's undo is safe when a CLR is the page's first change after the
/// checkpoint: transaction x is left open by a crash, the reopen's undo
/// compensates it and the power is cut at each I/O of that recovery in turn (its last
/// checkpoint writing the page unsynced among them); the next reopen recovers the
/// committed rows whether the page was torn or not (before the fix: it failed on the torn
/// page).
#[test]
fn recovery_undo_compensating_first_after_a_checkpoint_survives_a_torn_page() {
    let root = Path::new("/sim");
    let mdf = root.join("Torn.mdf");
    let mut torn = 0;
    let mut cut = 0;
    for nth in 1..=200u64 {
        let fs = SimFileSystem::new(nth, Faults::default());
        let mut db = Database::create(&ctx(&fs, true, &Quiet), &spec(root)).unwrap();
        let (table, committed) = committed_table(&mut db, false);
        let (_x, page) = change_then_checkpoint(&mut db, table);
        drop(db);
        fs.crash();
        let fault_at = fs.io_count() + nth;
        common::cut_after(&fs, nth);
        if let Ok(db) = Database::open(&fs, &mdf) {
            let past_recovery = fs.io_count() < fault_at;
            fs.set_faults(Faults::default());
            assert_eq!(table_rows(&db, table), committed, "I/O {nth}: rows");
            if past_recovery {
                // Recovery's I/Os all done before the fault: every one was cut in turn.
                break;
            }
            // The failed I/O was a read the open does without (a copy of the boot page,
            // the free space proportional fill weighs files by).
            continue;
        }
        cut += 1;
        torn += usize::from(crash_tearing(&fs, &mdf, page));
        let db = Database::open(&fs, &mdf)
            .unwrap_or_else(|e| panic!("I/O {nth} of recovery failed: reopen: {e}"));
        let when = format!("I/O {nth} of recovery failed");
        assert_eq!(table_rows(&db, table), committed, "{when}: rows");
        assert_checkdb_clean(&db, &when);
    }
    eprintln!("recovery cut at {cut} I/Os in turn: the page was torn in {torn}");
    assert!(torn > 0, "no cut tore the page");
}
