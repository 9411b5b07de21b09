//! A transaction keeps a bounded amount of undo actions in memory (xact.rs invariant 2): the
//! rest of its changes are read back from the log by LSN when it rolls back, whole or to a
//! savepoint, and recovery's undo reads a loser's changes from the log too. With the bound
//! lowered to 16 KB, transactions of ~1.2 MB of undo actions on a heap and a clustered
//! index roll back to exactly the rows they started from (every row compared) with CHECKDB
//! clean, and a crash at a seeded I/O during such a rollback (simulated file system)
//! recovers to the rows from before the transaction.

mod common;
use common::{assert_checkdb_clean, ctx, file, heap_and_tree, insert_scrambled, row, spec, Quiet};

use std::path::Path;

use extentdb_format::file_header::FileType;
use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_storage::{Database, StorageError};

/// Bytes of undo actions the tests let a transaction keep in memory.
const BOUND: usize = 16 << 10;
/// The shortest value the tests write.
const MIN_ROW: usize = 300;

fn new_db(fs: &SimFileSystem, root: &Path) -> Database {
    let mut s = spec("Undo", root);
    s.files[1] = file("Undo_log", root.join("Undo_log.ldf"), FileType::Log, 1024);
    let db = Database::create(&ctx(fs, true, &Quiet), &s).unwrap();
    db.set_undo_memory_bytes(BOUND);
    db
}

/// Every table's records, sorted: what a rollback must give back exactly.
fn snapshot(db: &mut Database, tables: &[u32]) -> Vec<Vec<Vec<u8>>> {
    tables
        .iter()
        .map(|&t| {
            let mut rows: Vec<Vec<u8>> = db
                .scan_rows(t)
                .unwrap()
                .into_iter()
                .map(|(_, r)| r)
                .collect();
            rows.sort();
            rows
        })
        .collect()
}

/// One statement-sized batch of changes to every table: each row updated to a value of
/// another length (`round` varies it), every `del`th row deleted, and `inserts` new rows.
fn changes(
    db: &mut Database,
    x: u64,
    tables: &[u32],
    round: u32,
    del: usize,
    inserts: u32,
) -> Result<(), StorageError> {
    for &t in tables {
        let rows = db.scan_rows(t)?;
        for (i, (rid, old)) in rows.into_iter().enumerate() {
            let key = u32::from_le_bytes(old[4..8].try_into().unwrap());
            if i % del == del - 1 {
                db.now(|d| d.delete_row_at(x, t, (rid, &old)))?;
            } else {
                let len = MIN_ROW + (key as usize * 13 + round as usize * 101) % 500;
                let v = vec![(key % 241) as u8 ^ round as u8; len];
                db.now(|d| {
                    d.update_row_at(x, t, (rid, &old), (&row(key, &v), d.growth_env()), None)
                })?;
            }
        }
        for k in 0..inserts {
            let key = 2_000_000 + round * 10_000 + k;
            db.now(|d| {
                d.insert_row(
                    x,
                    t,
                    (
                        &row(key, &vec![round as u8; MIN_ROW + k as usize]),
                        d.growth_env(),
                    ),
                    None,
                )
            })?;
        }
    }
    Ok(())
}

/// The undo actions of `x` kept in memory fit the bound while far more changes are
/// undoable.
fn assert_bounded(db: &Database, x: u64, when: &str) {
    let (in_memory, bytes, undoable) = db.undo_changes_in_memory(x);
    assert!(
        bytes <= BOUND,
        "{when}: {in_memory} of {undoable} changes kept in memory, {bytes} bytes, past the \
         {BOUND}-byte bound"
    );
    assert!(
        undoable > 4 * in_memory.max(1),
        "{when}: {in_memory} of {undoable} changes kept in memory"
    );
}

/// A transaction far past the bound rolled back to a savepoint in its middle, then whole:
/// the rows at the savepoint, then the rows from before it, exactly; CHECKDB clean, and
/// still so after a reopen.
#[test]
fn large_transaction_rolls_back_from_the_log() {
    let fs = SimFileSystem::new(11, Faults::default());
    let root = Path::new("/sim");
    let mut db = new_db(&fs, root);
    let tables = heap_and_tree(&mut db);
    insert_scrambled(&mut db, &tables, 600);
    let before = snapshot(&mut db, &tables);

    let x = db.begin_xact();
    changes(&mut db, x, &tables, 1, 7, 50).unwrap();
    assert_bounded(&db, x, "after the first batch");
    let sp = db.savepoint(x);
    let at_savepoint = snapshot(&mut db, &tables);
    changes(&mut db, x, &tables, 2, 5, 80).unwrap();
    assert_bounded(&db, x, "after the second batch");
    db.rollback_to(x, sp).unwrap();
    assert!(
        snapshot(&mut db, &tables) == at_savepoint,
        "rolled back to the savepoint, the rows differ from the savepoint's"
    );
    assert_eq!(db.savepoint(x), sp);
    // Changes after a rollback to a savepoint chain through its compensations.
    changes(&mut db, x, &tables, 3, 3, 20).unwrap();
    db.rollback_xact(x).unwrap();
    assert!(
        snapshot(&mut db, &tables) == before,
        "rolled back whole, the rows differ from before the transaction"
    );
    assert_checkdb_clean(&db, "after the rollbacks");
    drop(db);
    let mut db = Database::open(&fs, &root.join("Undo.mdf")).unwrap();
    assert!(snapshot(&mut db, &tables) == before, "after a clean reopen");
    assert_checkdb_clean(&db, "after a reopen");
}

/// A crash at a seeded I/O during the rollback (whole, or to a savepoint) of a transaction
/// far past the bound: recovery finishes the rollback from the log (its compensations say
/// where the interrupted one stopped) and the rows are those from before the transaction.
#[test]
fn crash_during_rollback_from_the_log_recovers() {
    let root = Path::new("/sim");
    let seeds: u64 = std::env::var("XDB_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    let mut cut_short = 0;
    for seed in 0..seeds {
        let fs = SimFileSystem::new(seed + 1, Faults::default());
        let mut db = new_db(&fs, root);
        db.set_buffer_pool_pages(16 + (seed as usize % 3) * 16);
        let tables = heap_and_tree(&mut db);
        insert_scrambled(&mut db, &tables, 300);
        db.checkpoint().unwrap();
        let before = snapshot(&mut db, &tables);
        let x = db.begin_xact();
        changes(&mut db, x, &tables, 1, 7, 30).unwrap();
        let sp = db.savepoint(x);
        changes(&mut db, x, &tables, 2, 4, 30).unwrap();
        assert_bounded(&db, x, &format!("seed {seed}"));
        // The rollback writes a few hundred I/Os (log blocks, evicted pages): cut in them.
        let cut = fs.io_count() + 1 + (seed * 7919) % 120;
        fs.set_faults(Faults {
            fail_io_at: Some((cut, libc::EIO)),
            ..Default::default()
        });
        let rolled = if seed % 2 == 0 {
            db.rollback_xact(x)
        } else {
            db.rollback_to(x, sp).and_then(|_| db.rollback_xact(x))
        };
        cut_short += rolled.is_err() as u32;
        drop(db);
        fs.set_faults(Faults::default());
        fs.crash();
        let mut db = Database::open(&fs, &root.join("Undo.mdf"))
            .unwrap_or_else(|e| panic!("seed {seed}: reopen failed: {e}"));
        assert!(
            snapshot(&mut db, &tables) == before,
            "seed {seed}: after recovery the rows differ from before the transaction"
        );
        assert_checkdb_clean(&db, &format!("seed {seed}: after recovery"));
    }
    assert!(
        cut_short as u64 * 2 >= seeds,
        "only {cut_short} of {seeds} crashes fell inside the rollback"
    );
}
