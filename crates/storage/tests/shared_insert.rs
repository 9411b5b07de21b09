//! Heap INSERT by sessions sharing a database: each session holds the database shared
//! (`SharedDatabase::read`) while `insert_row` places its row, as storage's `SharedDatabase::run` does for
//! the SQL layer, and inserts the row with the database held exclusively (`Database::now`)
//! when it needs something first (a new IAM page, a growth, the log).
//! Transactions begin and commit with the database shared; one in eight rolls back
//! (exclusively). Five sessions: two share heap A, three have their own (B; C and D), in
//! two filegroups: PRIMARY (A, B) of three equal files (every skip target 1: lock-free
//! allocation) and FG2 (C, D) of two unequal files (FGCB_PRP_FILL taken), all autogrowing.
//!
//! `sessions_insert_at_once_and_lose_nothing` (real file system, background checkpoints):
//! afterwards, and again after a close without a checkpoint and a reopen (redo), every
//! table holds exactly the rows of its committed transactions with the values written,
//! CHECKALLOC and CHECKDB find nothing, both paths were taken, and sessions were inside
//! `insert_row` at once.
//!
//! `shared_inserts_survive_crashes` (simulated file system, a buffer pool of a few pages so
//! pages are evicted while others insert): the power is cut at a
//! seeded I/O while the sessions run; after recovery every acknowledged commit is present,
//! nothing rolled back or never committed is, and a transaction whose commit was in flight
//! is there entirely or not at all. The threads interleave differently on each run, so a
//! seed fixes the cut and the workload, not the schedule; `XDB_SHARED_CRASH_SEEDS=N` runs
//! a longer loop.
//!
//! `a_heap_scan_beside_the_format_of_its_next_page_reads_no_damage`: a scan's read of the
//! heap's next page, which missed the pool, is held while an insert formats the page and
//! commits a row on it; the scan returns both rows (scan.rs invariant 6), no Msg 824.

mod common;
use common::{
    all_succeeded, checkpointer_collecting, close_without_checkpoint, crash_and_reopen, cut_after,
    fresh_dir,
};
use common::{
    assert_checkdb_clean, ctx, file, row, seed_count, table_entry, table_rows, Quiet, Rng,
};

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use extentdb_format::catalog::RecoveryModel;
use extentdb_format::file_header::FileType;
use extentdb_format::PageId;
use extentdb_io::os::OsFileSystem;
use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_storage::access::{Held, Needs, Step};
use extentdb_storage::checkpoint::Checkpointer;
use extentdb_storage::log_growth::GrowthEnv;
use extentdb_storage::shared::SharedDatabase;
use extentdb_storage::{Database, NewDatabase, NewFile, StorageError};

/// Database `Ins` in `root`: PRIMARY with three equal 2 MB files, FG2 with a 1 MB and a
/// 3 MB file, every data file growing 1 MB; a log of `log_pages` growing 1 MB; SIMPLE, so
/// checkpoints truncate the log.
fn spec(root: &Path, log_pages: u32) -> NewDatabase {
    let in_fg2 = |mut f: NewFile| {
        f.filegroup = "FG2".into();
        f
    };
    NewDatabase {
        name: "Ins".into(),
        database_id: 5,
        recovery_model: RecoveryModel::Simple,
        files: vec![
            file("Ins", root.join("Ins.mdf"), FileType::Rows, 256),
            file(
                "Ins_log",
                root.join("Ins_log.ldf"),
                FileType::Log,
                log_pages,
            ),
            file("Ins_2", root.join("Ins_2.ndf"), FileType::Rows, 256),
            file("Ins_3", root.join("Ins_3.ndf"), FileType::Rows, 256),
            in_fg2(file("Ins_4", root.join("Ins_4.ndf"), FileType::Rows, 128)),
            in_fg2(file("Ins_5", root.join("Ins_5.ndf"), FileType::Rows, 384)),
        ],
        filegroups: vec![("FG2".into(), false)],
    }
}

/// Heaps `A` and `B` in PRIMARY, `C` and `D` in FG2; returns their object ids.
fn create_tables(db: &mut Database) -> [u32; 4] {
    let fg2 = db
        .catalog
        .filegroups
        .iter()
        .find(|g| g.name == "FG2")
        .expect("FG2")
        .data_space_id;
    let mut make = |name: &str, ds: u16| {
        let mut t = table_entry(false);
        t.name = name.into();
        t.data_space_id = ds;
        db.create_table(t).unwrap()
    };
    [make("A", 1), make("B", 1), make("C", fg2), make("D", fg2)]
}

/// The value stored with key `k`: 40 to 700 bytes, derived from `k` alone.
fn payload(k: u32) -> Vec<u8> {
    let len = 40 + (k.wrapping_mul(2_654_435_761) % 661) as usize;
    (0..len).map(|i| (k as usize + i) as u8).collect()
}

/// How the sessions' rows went in.
#[derive(Default)]
struct Counters {
    shared: AtomicU64,
    exclusive: AtomicU64,
    /// Growths the sessions initialized holding no database lock (IFI off).
    grown: AtomicU64,
    /// Sessions inside a shared `insert_row` now, and the most at once.
    inside: AtomicUsize,
    peak: AtomicUsize,
}

/// What one session did: keys of committed transactions, and of the transaction whose
/// commit was in flight when an error stopped it (present entirely or not at all).
#[derive(Default, Debug)]
struct Outcome {
    committed: Vec<u32>,
    in_doubt: Vec<u32>,
}

/// One session: `transactions` transactions of 1 to 16 rows into `table`, keys
/// `me * 1_000_000 + n`; stops at the first error (a cut power), returning it.
fn session(
    db: &SharedDatabase,
    env: &GrowthEnv,
    table: u32,
    me: u32,
    transactions: u32,
    seed: u64,
    c: &Counters,
) -> (Outcome, Option<StorageError>) {
    let mut rng = Rng(seed ^ (0x9E37_79B9_7F4A_7C15u64.wrapping_mul(me as u64 + 1)) | 1);
    let mut out = Outcome::default();
    let mut next = me * 1_000_000;
    for _ in 0..transactions {
        let x = db.read().unwrap().begin_xact();
        let mut keys = Vec::new();
        for _ in 0..1 + rng.below(16) {
            let k = next;
            next += 1;
            let rec = row(k, &payload(k));
            // The row shared; a growth's preparation (IFI off) holding no lock, then the
            // row again; needing anything else, the row exclusively once it is provided.
            loop {
                let placed = {
                    let g = db.read().unwrap();
                    let now = c.inside.fetch_add(1, Ordering::SeqCst) + 1;
                    c.peak.fetch_max(now, Ordering::SeqCst);
                    let r = g.insert_row(x, table, (&rec, env), None);
                    c.inside.fetch_sub(1, Ordering::SeqCst);
                    r
                };
                match placed {
                    Ok(Step::Done(_)) => {
                        c.shared.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Step::Needs(Needs::Growth(p))) => {
                        if let Err(e) = p.run() {
                            return (out, Some(e));
                        }
                        c.grown.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    Ok(Step::Needs(_)) => {
                        let mut g = db.lock_for_tests();
                        if let Err(e) = g.now(|d| d.insert_row(x, table, (&rec, env), None)) {
                            return (out, Some(e));
                        }
                        c.exclusive.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => return (out, Some(e)),
                }
                break;
            }
            keys.push(k);
        }
        if rng.below(8) == 0 {
            if let Err(e) = db.lock_for_tests().rollback_xact(x) {
                return (out, Some(e));
            }
            continue;
        }
        let (committed, wal) = {
            let g = db.read().unwrap();
            (g.commit_xact(x), g.wal())
        };
        let flushed = match committed {
            Ok(Some(lsn)) => wal.expect("a log").flush(lsn),
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = flushed {
            out.in_doubt = keys;
            return (out, Some(e));
        }
        out.committed.extend(keys);
    }
    (out, None)
}

/// Runs `tables.len()` sessions at once, session i into `tables[i]`.
fn run_sessions(
    db: &Arc<SharedDatabase>,
    instant: bool,
    tables: &[u32],
    transactions: u32,
    seed: u64,
    c: &Arc<Counters>,
) -> Vec<(Outcome, Option<StorageError>)> {
    let start = Arc::new(Barrier::new(tables.len()));
    let threads: Vec<_> = tables
        .iter()
        .enumerate()
        .map(|(me, &table)| {
            let (db, c, start) = (db.clone(), c.clone(), start.clone());
            std::thread::spawn(move || {
                let mut env = GrowthEnv::default();
                env.policy.instant = instant;
                start.wait();
                session(&db, &env, table, me as u32, transactions, seed, &c)
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("a session panicked"))
        .collect()
}

/// The sessions' tables: sessions 0 and 1 share A, sessions 2, 3 and 4 have B, C and D.
fn session_tables(t: [u32; 4]) -> [u32; 5] {
    [t[0], t[0], t[1], t[2], t[3]]
}

/// Every table holds exactly its sessions' committed rows, with their values.
fn assert_exactly_committed(db: &Database, tables: &[u32], outcomes: &[Outcome], when: &str) {
    let mut want: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for (t, o) in tables.iter().zip(outcomes) {
        want.entry(*t).or_default().extend(&o.committed);
    }
    for (t, keys) in want {
        let got = table_rows(db, t);
        let got_keys: BTreeSet<u32> = got.keys().copied().collect();
        assert_eq!(
            got_keys.len(),
            keys.len(),
            "{when}: table {t} holds {} rows, its committed transactions {}",
            got_keys.len(),
            keys.len()
        );
        assert_eq!(got_keys, keys, "{when}: table {t}'s keys");
        for (k, v) in got {
            assert_eq!(v, payload(k), "{when}: table {t} key {k}'s value");
        }
    }
}

#[test]
fn sessions_insert_at_once_and_lose_nothing() {
    let dir = fresh_dir("shared-insert");
    let fs = OsFileSystem::new();
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &spec(&dir, 1024)).unwrap();
    let tables = session_tables(create_tables(&mut db));
    let db = Arc::new(SharedDatabase::new(db));
    let (checkpointer, errors) = checkpointer_collecting(&db);
    let c = Arc::new(Counters::default());
    let transactions = if cfg!(debug_assertions) { 100 } else { 1000 };
    // IFI off: growths are zeroed, by the sessions holding no database lock.
    let results = run_sessions(&db, false, &tables, transactions, 0x5eed_1234, &c);
    drop(checkpointer);
    assert!(errors.lock().unwrap().is_empty(), "{:?}", errors.lock());
    let outcomes = all_succeeded(results);
    let (shared, exclusive) = (
        c.shared.load(Ordering::Relaxed),
        c.exclusive.load(Ordering::Relaxed),
    );
    let peak = c.peak.load(Ordering::Relaxed);
    let grown = c.grown.load(Ordering::Relaxed);
    let db = Arc::into_inner(db).expect("sessions joined").into_inner();
    let fills: Vec<_> = [1u16, 2]
        .iter()
        .map(|&ds| db.prp_fill_stats(ds).expect("a filegroup"))
        .collect();
    eprintln!(
        "rows shared {shared}, exclusive {exclusive}; {grown} growths initialized by sessions \
         holding no lock; peak {peak} sessions inside at once; \
         PRIMARY {:?}; FG2 {:?}; sizes {:?}",
        fills[0],
        fills[1],
        db.catalog
            .files
            .iter()
            .map(|f| (f.file_id, f.size_pages))
            .collect::<Vec<_>>()
    );
    assert!(
        shared > 4 * exclusive && exclusive > 0,
        "most rows go in shared, some exclusively (new IAM pages, growths): {shared} / {exclusive}"
    );
    assert!(
        peak >= 2,
        "sessions were never inside a shared insert_row at once"
    );
    assert!(
        grown > 0,
        "no growth was initialized outside the database's lock"
    );
    assert!(
        fills[0].0.lock_free_picks > 0 && fills[0].1,
        "PRIMARY's equal files allocate lock-free: {:?}",
        fills[0]
    );
    assert!(
        fills[1].0.acquisitions > 0 && !fills[1].1,
        "FG2's unequal files take FGCB_PRP_FILL: {:?}",
        fills[1]
    );
    assert!(
        db.catalog.files.iter().any(|f| f.size_pages > 384),
        "the filegroups grew while sessions inserted"
    );
    assert_exactly_committed(&db, &tables, &outcomes, "after the sessions");
    assert_checkdb_clean(&db, "after the sessions");

    // A close without a checkpoint once the log is flushed: the rows come back by redo.
    close_without_checkpoint(db);
    let db = Database::open(fs.as_ref(), &dir.join("Ins.mdf")).unwrap();
    assert_exactly_committed(&db, &tables, &outcomes, "after recovery");
    assert_checkdb_clean(&db, "after recovery");
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shared_inserts_survive_crashes() {
    let seeds = seed_count("XDB_SHARED_CRASH_SEEDS", 8, 100);
    let root = Path::new("/sim");
    let (mut cut_while_running, mut committed_rows, mut shared_rows) = (0, 0, 0);
    // Extents the sweep at open freed (allocations cut between their two steps).
    let mut swept = 0;
    for seed in 0..seeds {
        let fs = SimFileSystem::new(seed + 1, Faults::default());
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut db = Database::create(&ctx(&fs, true, &Quiet), &spec(root, 512)).unwrap();
        db.set_buffer_pool_pages(8 + rng.below(24) as usize);
        let tables = session_tables(create_tables(&mut db));
        let db = Arc::new(SharedDatabase::new(db));
        let checkpointer = Checkpointer::spawn(&db, |_, _| {});
        cut_after(&fs, 10 + rng.below(260));
        let c = Arc::new(Counters::default());
        let results = run_sessions(&db, seed % 2 == 0, &tables, 40, seed, &c);
        drop(checkpointer);
        cut_while_running += usize::from(results.iter().any(|r| r.1.is_some()));
        committed_rows += results.iter().map(|r| r.0.committed.len()).sum::<usize>();
        shared_rows += c.shared.load(Ordering::Relaxed);
        let db = crash_and_reopen(db, &fs, &root.join("Ins.mdf"), seed);
        swept += db.recovery_stats().map_or(0, |r| r.unowned_extents_freed);
        let mut by_table: BTreeMap<u32, Vec<&Outcome>> = BTreeMap::new();
        for (t, (o, _)) in tables.iter().zip(&results) {
            by_table.entry(*t).or_default().push(o);
        }
        for (t, outcomes) in by_table {
            let got = table_rows(&db, t);
            for (k, v) in &got {
                assert_eq!(v, &payload(*k), "seed {seed}: table {t} key {k}'s value");
            }
            for o in &outcomes {
                for k in &o.committed {
                    assert!(
                        got.contains_key(k),
                        "seed {seed}: table {t} lost committed key {k} ({} rows, shared {})",
                        got.len(),
                        c.shared.load(Ordering::Relaxed)
                    );
                }
                let present = o.in_doubt.iter().filter(|k| got.contains_key(k)).count();
                assert!(
                    present == 0 || present == o.in_doubt.len(),
                    "seed {seed}: table {t} holds {present} of the {} rows of the transaction \
                     whose commit was in flight",
                    o.in_doubt.len()
                );
            }
            // Nothing rolled back or never committed is present.
            let allowed: BTreeSet<u32> = outcomes
                .iter()
                .flat_map(|o| o.committed.iter().chain(&o.in_doubt))
                .copied()
                .collect();
            if let Some(extra) = got.keys().find(|k| !allowed.contains(k)) {
                panic!("seed {seed}: table {t} holds key {extra}, never committed");
            }
        }
        let alloc = db.check_alloc().unwrap();
        assert!(alloc.errors.is_empty(), "seed {seed}: {:?}", alloc.errors);
    }
    eprintln!(
        "{seeds} seeds: cut while sessions ran in {cut_while_running}; {committed_rows} rows \
         committed before the cuts, {shared_rows} rows placed shared; {swept} half-allocated \
         extents freed at open"
    );
    assert!(
        committed_rows > 0 && shared_rows > 0,
        "nothing was committed before a cut"
    );
    assert!(
        cut_while_running * 2 >= seeds as usize,
        "the power was cut while sessions ran in only {cut_while_running} of {seeds} seeds"
    );
}

/// Heap rows that grow move beside other sessions (storage's access.rs invariant 3): four
/// sessions share heap A, each inserting 50 rows of its own and then, in three
/// transactions, updating each to a longer value, every update a move (the new copy goes
/// in first, then the old one is deleted, the delete's log room kept meanwhile), all
/// through `SharedDatabase::run`. The moves are made sharing the database (a move took it
/// exclusively before, `Needs::Exclusive`, so none was shared; how many sessions were
/// inside moves at once is printed, not asserted: the moves are too quick to be sure of it);
/// the heap then holds exactly each row's last value, after the run and after redo, and
/// CHECKALLOC and CHECKDB are clean.
#[test]
fn heap_rows_that_grow_move_sharing_the_database() {
    const SESSIONS: u32 = 4;
    let dir = fresh_dir("shared-heap-moves");
    let fs = OsFileSystem::new();
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &spec(&dir, 2048)).unwrap();
    let heap = create_tables(&mut db)[0];
    let db = Arc::new(SharedDatabase::new(db));
    let value = |k: u32, round: u32| vec![(k + round) as u8; 40 + 150 * round as usize];
    let (shared, exclusive, peak, inside) = (
        AtomicU64::new(0),
        AtomicU64::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    );
    let start = Barrier::new(SESSIONS as usize);
    std::thread::scope(|s| {
        for me in 0..SESSIONS {
            let (db, start) = (&db, &start);
            let (shared, exclusive, peak, inside) = (&shared, &exclusive, &peak, &inside);
            s.spawn(move || {
                let env = GrowthEnv::default();
                let commit = |x| {
                    let lsn = db.read().unwrap().commit_xact(x).unwrap();
                    let wal = db.read().unwrap().wal().unwrap();
                    if let Some(l) = lsn {
                        wal.flush(l).unwrap();
                    }
                };
                let keys: Vec<u32> = (0..50).map(|i| me * 1_000 + i).collect();
                let x = db.read().unwrap().begin_xact();
                let mut rids = BTreeMap::new();
                for &k in &keys {
                    let rec = row(k, &value(k, 0));
                    let rid = db
                        .run(&env, |e| e, |d| d.insert_row(x, heap, (&rec, &env), None))
                        .unwrap();
                    rids.insert(k, rid);
                }
                commit(x);
                start.wait();
                for round in 1..=3 {
                    let x = db.read().unwrap().begin_xact();
                    for &k in &keys {
                        let (old, new) = (row(k, &value(k, round - 1)), row(k, &value(k, round)));
                        let at = rids[&k];
                        let rid = db
                            .run(
                                &env,
                                |e| e,
                                |held| {
                                    let is_shared = matches!(held, Held::Shared(_));
                                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                                    peak.fetch_max(now, Ordering::SeqCst);
                                    let step =
                                        held.update_row_at(x, heap, (at, &old), (&new, &env), None);
                                    inside.fetch_sub(1, Ordering::SeqCst);
                                    if let Ok(Step::Done(_)) = step {
                                        let done = if is_shared { shared } else { exclusive };
                                        done.fetch_add(1, Ordering::Relaxed);
                                    }
                                    step
                                },
                            )
                            .unwrap();
                        rids.insert(k, rid);
                    }
                    commit(x);
                }
            });
        }
    });
    let (shared, exclusive) = (shared.into_inner(), exclusive.into_inner());
    eprintln!(
        "moves: {shared} sharing the database, {exclusive} holding it; peak {} at once",
        peak.load(Ordering::Relaxed)
    );
    assert!(
        shared > 10 * exclusive && shared + exclusive == 600,
        "heap moves share the database: {shared} shared, {exclusive} exclusive"
    );
    let want: BTreeMap<u32, Vec<u8>> = (0..SESSIONS)
        .flat_map(|me| (0..50).map(move |i| me * 1_000 + i))
        .map(|k| (k, value(k, 3)))
        .collect();
    let db = Arc::into_inner(db).expect("sessions joined").into_inner();
    assert_eq!(table_rows(&db, heap), want, "after the moves");
    assert_checkdb_clean(&db, "after the moves");
    close_without_checkpoint(db);
    let db = Database::open(fs.as_ref(), &dir.join("Ins.mdf")).unwrap();
    assert_eq!(table_rows(&db, heap), want, "after redo");
    assert_checkdb_clean(&db, "after redo");
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proves a heap scan reading a page from disk beside an insert that formats that page
/// (its first row there) reads no damage: the scan's read of the page is held (the pool's
/// test hook) after the page missed the pool, the insert formats it (logged, installed in
/// the pool, marked allocated in the PFS) and commits a row on it, and the read goes on.
/// It finds the zeros the file still holds where the PFS now says allocated, which alone
/// is damage (table.rs invariant 4); the scan reads the page again after the PFS and finds
/// the format (allocation.rs invariant 5). Failed with Msg 824 for the page, (0:0), as
/// `SELECT COUNT(*)` did beside INSERTs over TDS (iam_damage.rs, now and then under load).
#[test]
fn a_heap_scan_beside_the_format_of_its_next_page_reads_no_damage() {
    let dir = fresh_dir("shared-insert-format");
    let fs = OsFileSystem::new();
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &spec(&dir, 1024)).unwrap();
    let heap = create_tables(&mut db)[0];
    // One row of 5,000 bytes: the first page of the heap's extent is formatted, the next
    // one (where the next such row goes) is not, and the pool does not cache it.
    let big = |k: u32| row(k, &vec![k as u8; 5_000]);
    let x = db.begin_xact();
    let (first, _) = db
        .now(|d| d.insert_row(x, heap, (&big(1), d.growth_env()), None))
        .unwrap();
    let lsn = db.commit_xact(x).unwrap().unwrap();
    db.wal().unwrap().flush(lsn).unwrap();
    let next = PageId::new(first.file.0, first.page.0 + 1);
    assert_ne!(
        next.page.0 % 8,
        0,
        "the next page is in the first one's extent"
    );
    let (entered_tx, entered) = std::sync::mpsc::channel::<()>();
    let (release_tx, release) = std::sync::mpsc::channel::<()>();
    let (entered_tx, release) = (
        std::sync::Mutex::new(entered_tx),
        std::sync::Mutex::new(release),
    );
    let held = std::sync::atomic::AtomicBool::new(false);
    // Holds the scan's first read of `next` from disk, once.
    db.set_pool_read_hook(Some(Arc::new(move |pid| {
        let scan = std::thread::current().name() == Some("scan");
        if pid == next && scan && !held.swap(true, Ordering::SeqCst) {
            entered_tx.lock().unwrap().send(()).unwrap();
            let _ = release.lock().unwrap().recv();
        }
    })));
    let db = Arc::new(SharedDatabase::new(db));
    let scan = std::thread::Builder::new()
        .name("scan".into())
        .spawn({
            let db = db.clone();
            move || db.read().unwrap().scan_rows(heap)
        })
        .unwrap();
    entered.recv().unwrap();
    // The scan's read of `next` missed the pool and waits; the insert formats `next`.
    let env = GrowthEnv::default();
    let x = db.read().unwrap().begin_xact();
    let (placed, _) = db
        .run(
            &env,
            |e| e,
            |d| d.insert_row(x, heap, (&big(2), &env), None),
        )
        .unwrap();
    assert_eq!(
        placed, next,
        "the second row formatted the page the scan reads"
    );
    let lsn = db.read().unwrap().commit_xact(x).unwrap().unwrap();
    db.read().unwrap().wal().unwrap().flush(lsn).unwrap();
    release_tx.send(()).unwrap();
    let rows = scan
        .join()
        .unwrap()
        .expect("no damage: the page was being formatted");
    let pages: Vec<PageId> = rows.iter().map(|((p, _), _)| *p).collect();
    assert_eq!(
        pages,
        vec![first, next],
        "the scan read the first row and, read again, the page formatted beside it"
    );
    let db = Arc::into_inner(db).expect("scan joined").into_inner();
    assert_checkdb_clean(&db, "after the scan");
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}
