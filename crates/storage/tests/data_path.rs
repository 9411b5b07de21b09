//! The data path under crashes: tables, transactions, the buffer pool, write-ahead logging
//! and recovery. A seeded loop runs random transactions (inserts, deletes, updates; commit,
//! rollback, statement-level rollback, checkpoints) on the simulated file system with a
//! buffer pool of a few pages (so dirty pages are evicted mid-transaction), cuts the power
//! at a seeded I/O, drops or tears every unsynced write, sometimes crashes recovery itself,
//! and reopens. The table must then equal an in-memory model of the committed transactions
//! exactly: every acknowledged commit present, nothing uncommitted visible, and CHECKDB
//! clean (no page the PFS calls allocated left unformatted). Odd seeds keep almost no undo
//! action in memory, so rollbacks read their changes back from the log. A failing seed
//! replays exactly; `XDB_CRASH_SEEDS=2000` runs a longer loop (`XDB_PROGRESS=1` shows it).

mod common;
use common::{ctx, file, row, spec, table_entry, Quiet, LAYOUT};

use std::collections::BTreeMap;
use std::path::Path;

use extentdb_format::file_header::FileType;
use extentdb_format::record;
use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_storage::check_db::{check_database, CheckOptions};
use extentdb_storage::checkpoint::{CheckpointBatch, CheckpointRun};
use extentdb_storage::table::Rid;
use extentdb_storage::{Database, StorageError};

/// The table's rows as key -> value, asserting keys are unique.
fn contents(db: &mut Database, t: u32) -> Result<BTreeMap<u32, Vec<u8>>, StorageError> {
    let mut out = BTreeMap::new();
    for (_, rec) in db.scan_rows(t)? {
        let cols = record::decode(&LAYOUT, &rec)?;
        let k = u32::from_le_bytes(cols[0].unwrap().try_into().unwrap());
        let v = cols[1].unwrap().to_vec();
        assert!(out.insert(k, v).is_none(), "key {k} appears twice");
    }
    Ok(out)
}

/// The row with key `k`: its position and record.
fn find(db: &mut Database, t: u32, k: u32) -> Result<Option<(Rid, Vec<u8>)>, StorageError> {
    for (rid, rec) in db.scan_rows(t)? {
        let cols = record::decode(&LAYOUT, &rec)?;
        if u32::from_le_bytes(cols[0].unwrap().try_into().unwrap()) == k {
            return Ok(Some((rid, rec)));
        }
    }
    Ok(None)
}

/// A value of 1-1,500 bytes: constant (compresses in the log) or noise (does not), alike.
fn payload(rng: &mut Rng, k: u32) -> Vec<u8> {
    let len = 1 + rng.below(1500) as usize;
    if rng.below(2) == 0 {
        vec![(k % 251) as u8; len]
    } else {
        (0..len).map(|_| rng.next() as u8).collect()
    }
}

/// Keys in a scrambled order (a permutation), so B-tree inserts land anywhere.
fn scramble(n: u32) -> u32 {
    ((n as u64 * 7919) % 1_000_003) as u32
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn new_db(fs: &SimFileSystem, root: &Path) -> Database {
    let mut s = spec("Rows", root);
    s.files[1] = file("Rows_log", root.join("Rows_log.ldf"), FileType::Log, 1024);
    Database::create(&ctx(fs, true, &Quiet), &s).unwrap()
}

/// One transaction's changes applied to a copy of the model.
type Model = BTreeMap<u32, Vec<u8>>;

/// Runs one random transaction; returns the model as it would be if it commits.
fn transaction(
    db: &mut Database,
    t: u32,
    rng: &mut Rng,
    model: &Model,
    next_key: &mut u32,
) -> Result<(u64, Model), StorageError> {
    let x = db.begin_xact();
    let mut after = model.clone();
    for _ in 0..1 + rng.below(6) {
        let sp = db.savepoint(x);
        let mut trial = after.clone();
        match rng.below(10) {
            0..=4 => {
                let k = scramble(*next_key);
                *next_key += 1;
                let v = payload(rng, k);
                if std::env::var("XDB_TRACE").is_ok() {
                    eprintln!("x{x} insert {k} -> {}x{}", v.len(), v[0]);
                }
                db.now(|d| d.insert_row(x, t, (&row(k, &v), d.growth_env()), None))?;
                trial.insert(k, v);
            }
            5..=6 if !after.is_empty() => {
                let k = *after
                    .keys()
                    .nth(rng.below(after.len() as u64) as usize)
                    .unwrap();
                let (rid, old) = find(db, t, k)?.expect("model row present");
                if std::env::var("XDB_TRACE").is_ok() {
                    eprintln!("x{x} delete {k}");
                }
                db.now(|d| d.delete_row_at(x, t, (rid, &old)))?;
                trial.remove(&k);
            }
            7..=8 if !after.is_empty() => {
                let k = *after
                    .keys()
                    .nth(rng.below(after.len() as u64) as usize)
                    .unwrap();
                let (rid, old) = find(db, t, k)?.expect("model row present");
                let v = payload(rng, k ^ 0x5555);
                if std::env::var("XDB_TRACE").is_ok() {
                    eprintln!(
                        "x{x} update {k} -> {}x{} (old {})",
                        v.len(),
                        v[0],
                        old.len()
                    );
                }
                db.now(|d| {
                    d.update_row_at(x, t, (rid, &old), (&row(k, &v), d.growth_env()), None)
                })?;
                trial.insert(k, v);
            }
            _ => {}
        }
        // A statement that fails is rolled back to its savepoint; simulate some.
        if rng.below(8) == 0 {
            if std::env::var("XDB_TRACE").is_ok() {
                eprintln!("x{x} rollback_to {sp}");
            }
            db.rollback_to(x, sp)?;
        } else {
            after = trial;
        }
    }
    Ok((x, after))
}

/// Proves committed transactions survive any crash and uncommitted ones vanish, in a heap.
#[test]
fn transactions_survive_crashes() {
    crash_loop(false, false);
}

/// The same for a clustered index (B-tree), whose pages split under the workload.
#[test]
fn clustered_index_transactions_survive_crashes() {
    crash_loop(true, false);
}

/// The same with online checkpoints whose steps interleave with the transactions: pages
/// copied, then changed, evicted or checkpointed under the lock before the copy is written
/// (the write gate must drop the stale copy), crashes between any two steps.
#[test]
fn online_checkpoints_interleaved_with_transactions_survive_crashes() {
    crash_loop(false, true);
    crash_loop(true, true);
}

/// An online checkpoint driven one step at a time from the test's single thread.
struct Online {
    run: CheckpointRun,
    batch: Option<CheckpointBatch>,
    copied_all: bool,
}

impl Online {
    /// One step: copy a batch, or write the batch copied last time, or (at the end) write
    /// the allocation pages, sync, and record. Some(true) when the checkpoint completed.
    fn step(&mut self, db: &mut Database) -> Result<bool, StorageError> {
        if let Some(b) = self.batch.take() {
            b.write(&self.run)?;
            db.checkpoint_batch_written(&b);
            return Ok(false);
        }
        if !self.copied_all {
            self.batch = db.checkpoint_next_batch(&mut self.run)?;
            self.copied_all = self.batch.is_none();
            return Ok(false);
        }
        for f in db.checkpoint_write_allocation(&self.run)? {
            f.sync_data()?;
        }
        Ok(true)
    }
}

fn crash_loop(clustered: bool, online: bool) {
    let seeds: u64 = std::env::var("XDB_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150);
    let root = Path::new("/sim");
    // XDB_SEED=N replays one seed.
    let only: Option<u64> = std::env::var("XDB_SEED").ok().and_then(|s| s.parse().ok());
    for seed in only.map_or(0..seeds, |s| s..s + 1) {
        // XDB_PROGRESS=1 prints each seed with the process's memory (/proc/self/statm), which
        // found a leak once: a long run must stay flat.
        if std::env::var("XDB_PROGRESS").is_ok() {
            let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
            eprintln!("seed {seed} statm {}", statm.trim());
        }
        let fs = SimFileSystem::new(seed + 1, Faults::default());
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut db = new_db(&fs, root);
        db.set_buffer_pool_pages(8 + rng.below(24) as usize);
        // Odd seeds keep at most 0-1,200 bytes of undo actions in memory, so their rollbacks
        // (whole and to savepoints) read most changes back from the log (xact.rs invariant 2).
        if seed % 2 == 1 {
            db.set_undo_memory_bytes((seed as usize / 2 % 5) * 300);
        }
        let t = db.create_table(table_entry(clustered)).unwrap();
        let mut model = Model::new();
        let mut in_doubt: Option<Model> = None;
        let mut next_key = 1;
        let cut = fs.io_count() + 50 + rng.below(1500);
        fs.set_faults(Faults {
            fail_io_at: Some((cut, libc::EIO)),
            ..Default::default()
        });
        let mut cp: Option<Online> = None;
        for _ in 0..60 {
            if online {
                if cp.is_none() && rng.below(3) == 0 {
                    match db.checkpoint_begin() {
                        Ok(run) => {
                            cp = run.map(|run| Online {
                                run,
                                batch: None,
                                copied_all: false,
                            })
                        }
                        Err(_) => break,
                    }
                }
                if let Some(mut c) = cp.take() {
                    match c.step(&mut db) {
                        Ok(false) => cp = Some(c),
                        Ok(true) => {
                            if db.checkpoint_end(c.run).is_err() {
                                break;
                            }
                        }
                        Err(_) => {
                            db.checkpoint_failed(&c.run);
                            break;
                        }
                    }
                }
            }
            let (x, after) = match transaction(&mut db, t, &mut rng, &model, &mut next_key) {
                Ok(v) => v,
                Err(_) => break,
            };
            let outcome = match rng.below(10) {
                0..=1 => db.rollback_xact(x).map(|_| None),
                // A checkpoint while the transaction is open writes its uncommitted
                // changes to the data files: recovery must undo them if it never commits.
                2 => db.checkpoint().and_then(|_| db.commit_xact(x)).map(Some),
                _ => db.commit_xact(x).map(Some),
            };
            if std::env::var("XDB_TRACE").is_ok() {
                eprintln!("x{x} outcome {outcome:?}");
            }
            match outcome {
                Ok(None) => {}
                Ok(Some(lsn)) => {
                    let flushed = match lsn {
                        Some(l) => db.wal().unwrap().flush(l),
                        None => Ok(()),
                    };
                    if flushed.is_err() {
                        in_doubt = Some(after);
                        break;
                    }
                    model = after;
                    if std::env::var("XDB_TRACE").is_ok() {
                        // (A fault injected meanwhile may fail the scan: nothing to compare.)
                        let now = contents(&mut db, t).unwrap_or_else(|_| model.clone());
                        if now != model {
                            eprintln!("x{x}: diverged after commit");
                            for k in now.keys().chain(model.keys()) {
                                if now.get(k) != model.get(k) {
                                    eprintln!(
                                        "  key {k}: db {:?} model {:?}",
                                        now.get(k).map(|v| (v.len(), v[0])),
                                        model.get(k).map(|v| (v.len(), v[0]))
                                    );
                                }
                            }
                        }
                    }
                }
                Err(_) => break,
            }
        }
        if std::env::var("XDB_TRACE").is_ok() {
            let pre = contents(&mut db, t);
            eprintln!(
                "seed {seed}: before crash matches model: {:?}",
                pre.map(|p| p == model || in_doubt.as_ref() == Some(&p))
            );
        }
        drop(db);
        fs.set_faults(Faults::default());
        fs.crash();
        // Some seeds crash recovery itself part-way, then recover again.
        if rng.below(3) == 0 && std::env::var("XDB_NO_RCRASH").is_err() {
            if std::env::var("XDB_TRACE").is_ok() {
                eprintln!("crash during recovery");
            }
            fs.set_faults(Faults {
                fail_io_at: Some((fs.io_count() + 5 + rng.below(200), libc::EIO)),
                ..Default::default()
            });
            let _ = Database::open(&fs, &root.join("Rows.mdf"));
            fs.set_faults(Faults::default());
            fs.crash();
        }
        let mut db = Database::open(&fs, &root.join("Rows.mdf"))
            .unwrap_or_else(|e| panic!("seed {seed}: reopen failed: {e}"));
        let got = contents(&mut db, t).unwrap_or_else(|e| panic!("seed {seed}: scan: {e}"));
        if clustered {
            let keys: Vec<u32> = db
                .scan_rows(t)
                .unwrap()
                .iter()
                .map(|(_, r)| {
                    let c = record::decode(&LAYOUT, r).unwrap();
                    u32::from_le_bytes(c[0].unwrap().try_into().unwrap())
                })
                .collect();
            assert!(
                keys.windows(2).all(|w| w[0] < w[1]),
                "seed {seed}: clustered scan out of key order"
            );
        }
        let ok = got == model || in_doubt.as_ref() == Some(&got);
        if !ok {
            eprintln!("seed {seed}: stats {:?}", db.recovery_stats());
            for (k, v) in &got {
                if model.get(k) != Some(v) {
                    eprintln!(
                        "differs: {k} got {}x{} want {:?} in_doubt {:?}",
                        v.len(),
                        v.first().unwrap_or(&0),
                        model.get(k).map(|m| (m.len(), m[0])),
                        in_doubt.as_ref().map(|d| d.get(k).map(|m| (m.len(), m[0])))
                    );
                }
            }
        }
        assert!(
            ok,
            "seed {seed}: after the crash the table holds {} rows, the model {} (keys {:?} vs {:?})",
            got.len(),
            model.len(),
            got.keys().collect::<Vec<_>>(),
            model.keys().collect::<Vec<_>>()
        );
        // No page the PFS calls allocated lost its format in the crash (allocation.rs
        // invariant 5), and nothing else is damaged.
        let check = check_database(
            &db.check_source().unwrap(),
            &CheckOptions {
                maxdop: 1,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(
            check.findings.is_empty(),
            "seed {seed}: CHECKDB after recovery: {:?}",
            check.findings
        );
        // The recovered database takes new work and recovers it again.
        let x = db.begin_xact();
        db.now(|d| d.insert_row(x, t, (&row(1_000_000, b"after"), d.growth_env()), None))
            .unwrap();
        let lsn = db.commit_xact(x).unwrap().unwrap();
        db.wal().unwrap().flush(lsn).unwrap();
        drop(db);
        fs.crash();
        let mut db = Database::open(&fs, &root.join("Rows.mdf")).unwrap();
        let again = contents(&mut db, t).unwrap();
        assert_eq!(again.len(), got.len() + 1, "seed {seed}: second recovery");
    }
}

/// Proves rollback restores rows, commit keeps them across a clean reopen, and a
/// transaction still open at a crash is undone by recovery.
#[test]
fn commit_rollback_and_open_transaction_at_crash() {
    let fs = SimFileSystem::new(7, Faults::default());
    let root = Path::new("/sim");
    let mut db = new_db(&fs, root);
    let t = db.create_table(table_entry(false)).unwrap();
    let x = db.begin_xact();
    for k in 0..100 {
        db.now(|d| d.insert_row(x, t, (&row(k, &[k as u8; 300]), d.growth_env()), None))
            .unwrap();
    }
    let lsn = db.commit_xact(x).unwrap().unwrap();
    db.wal().unwrap().flush(lsn).unwrap();
    let x = db.begin_xact();
    let (rid, old) = find(&mut db, t, 5).unwrap().unwrap();
    db.now(|d| d.delete_row_at(x, t, (rid, &old))).unwrap();
    db.now(|d| d.insert_row(x, t, (&row(500, b"gone"), d.growth_env()), None))
        .unwrap();
    db.rollback_xact(x).unwrap();
    assert_eq!(contents(&mut db, t).unwrap().len(), 100);
    // An open transaction whose changes reach the disk (checkpoint) before the crash.
    let x = db.begin_xact();
    let (rid, old) = find(&mut db, t, 7).unwrap().unwrap();
    db.now(|d| {
        d.update_row_at(
            x,
            t,
            (rid, &old),
            (&row(7, b"uncommitted"), d.growth_env()),
            None,
        )
    })
    .unwrap();
    db.now(|d| d.insert_row(x, t, (&row(900, b"uncommitted"), d.growth_env()), None))
        .unwrap();
    db.checkpoint().unwrap();
    drop(db);
    fs.crash();
    let mut db = Database::open(&fs, &root.join("Rows.mdf")).unwrap();
    let stats = db.recovery_stats().unwrap().clone();
    assert_eq!(stats.rolled_back, 1, "{stats:?}");
    let got = contents(&mut db, t).unwrap();
    assert_eq!(got.len(), 100);
    assert_eq!(got[&7], vec![7u8; 300]);
    assert!(!got.contains_key(&900));
}

/// Proves two databases sharing one buffer budget stay within it (plus each pool's floor of
/// frames) while writing far more pages than it holds, and every row reads back.
#[test]
fn buffer_pools_share_the_instance_budget() {
    use extentdb_storage::buffer_pool::{PoolBudget, MIN_FRAMES};
    let fs = SimFileSystem::new(11, Faults::default());
    let budget = PoolBudget::new(64);
    let mut dbs = Vec::new();
    for name in ["A", "B"] {
        let root = Path::new("/sim");
        let mut s = spec(name, root);
        s.files[0].size_pages = 2048;
        s.files[1] = file(
            &format!("{name}_log"),
            root.join(format!("{name}_log.ldf")),
            FileType::Log,
            512,
        );
        let mut db = Database::create(&ctx(&fs, true, &Quiet), &s).unwrap();
        db.set_pool_budget(budget.clone()).unwrap();
        let t = db.create_table(table_entry(name == "B")).unwrap();
        dbs.push((db, t));
    }
    for k in 0..300u32 {
        for (db, t) in dbs.iter_mut() {
            let x = db.begin_xact();
            db.now(|d| {
                d.insert_row(
                    x,
                    *t,
                    (&row(scramble(k), &[7u8; 3000]), d.growth_env()),
                    None,
                )
            })
            .unwrap();
            let lsn = db.commit_xact(x).unwrap().unwrap();
            db.wal().unwrap().flush(lsn).unwrap();
            assert!(
                budget.used_pages() <= 64 + 2 * MIN_FRAMES,
                "{} pages cached against a budget of 64",
                budget.used_pages()
            );
        }
    }
    for (db, t) in dbs.iter_mut() {
        assert_eq!(contents(db, *t).unwrap().len(), 300);
    }
}

/// Proves a budget's cap changed while pools hold pages (RECONFIGURE of 'max server memory
/// (MB)') binds at once: raised, the pool caches past the old cap; lowered, it evicts down
/// to the new cap (plus its floor) as it next takes frames, and every row reads back.
#[test]
fn a_changed_budget_cap_binds_the_pools_drawing_on_it() {
    use extentdb_storage::buffer_pool::{PoolBudget, MIN_FRAMES};
    let fs = SimFileSystem::new(12, Faults::default());
    let budget = PoolBudget::new(64);
    let root = Path::new("/sim");
    let mut s = spec("cap", root);
    s.files[0].size_pages = 2048;
    let mut db = Database::create(&ctx(&fs, true, &Quiet), &s).unwrap();
    db.set_pool_budget(budget.clone()).unwrap();
    let t = db.create_table(table_entry(false)).unwrap();
    let insert = |db: &mut Database, from: u32, to: u32, cap: usize| {
        for k in from..to {
            let x = db.begin_xact();
            db.now(|d| d.insert_row(x, t, (&row(k, &[5u8; 3000]), d.growth_env()), None))
                .unwrap();
            let lsn = db.commit_xact(x).unwrap().unwrap();
            db.wal().unwrap().flush(lsn).unwrap();
            assert!(
                budget.used_pages() <= cap.saturating_add(MIN_FRAMES),
                "{} cached, cap {cap}",
                budget.used_pages()
            );
        }
    };
    insert(&mut db, 0, 200, 64);
    assert!(budget.used_pages() >= 60, "the pool fills its cap");
    budget.set_cap_pages(256);
    insert(&mut db, 200, 500, 256);
    assert!(
        budget.used_pages() > 64 + MIN_FRAMES,
        "raised: past the old cap ({})",
        budget.used_pages()
    );
    budget.set_cap_pages(32);
    insert(&mut db, 500, 520, usize::MAX);
    assert!(
        budget.used_pages() <= 32 + MIN_FRAMES,
        "lowered: down to the new cap ({})",
        budget.used_pages()
    );
    assert_eq!(contents(&mut db, t).unwrap().len(), 520);
}

/// A long recovery reports its progress: redo (phase 2) then undo (phase 3), percentages
/// rising to at most 100, and the estimate of what remains.
#[test]
fn recovery_reports_progress_by_phase() {
    use extentdb_storage::recovery::RecoveryProgress;
    use std::sync::Mutex;
    let fs = SimFileSystem::new(11, Faults::default());
    let root = Path::new("/sim");
    let mut db = new_db(&fs, root);
    let t = db.create_table(table_entry(false)).unwrap();
    let x = db.begin_xact();
    for k in 0..400 {
        db.now(|d| d.insert_row(x, t, (&row(k, &[1; 40]), d.growth_env()), None))
            .unwrap();
    }
    let lsn = db.commit_xact(x).unwrap().unwrap();
    db.wal().unwrap().flush(lsn).unwrap();
    let loser = db.begin_xact();
    for k in 1000..1300 {
        db.now(|d| d.insert_row(loser, t, (&row(k, &[2; 40]), d.growth_env()), None))
            .unwrap();
    }
    let probe = db.begin_xact();
    db.now(|d| d.insert_row(probe, t, (&row(5000, b"flush"), d.growth_env()), None))
        .unwrap();
    let lsn = db.commit_xact(probe).unwrap().unwrap();
    db.wal().unwrap().flush(lsn).unwrap();
    drop(db);
    fs.crash();
    let seen = Mutex::new(Vec::new());
    let report =
        |percent: u32, left: u64, phase: u8| seen.lock().unwrap().push((percent, left, phase));
    let progress = RecoveryProgress {
        every: std::time::Duration::ZERO,
        report: &report,
    };
    let mut db = Database::open_reporting(&fs, &root.join("Rows.mdf"), Some(&progress)).unwrap();
    assert_eq!(contents(&mut db, t).unwrap().len(), 401);
    let seen = seen.into_inner().unwrap();
    assert!(seen.iter().any(|s| s.2 == 2), "redo reported");
    let undo: Vec<_> = seen.iter().filter(|s| s.2 == 3).collect();
    assert!(
        undo.len() >= 300,
        "each undone record reported: {}",
        undo.len()
    );
    assert!(seen
        .windows(2)
        .all(|w| w[0].0 <= w[1].0 && w[0].2 <= w[1].2));
    assert!(seen.iter().all(|s| s.0 <= 100));
    assert!(
        seen.last().unwrap().0 >= 99,
        "ends near 100%: {:?}",
        seen.last()
    );
}
