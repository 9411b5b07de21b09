//! INSERT, UPDATE and DELETE of a clustered table by sessions sharing a database: every row
//! change goes through `SharedDatabase::run`, as the SQL layer's statements do, sharing the
//! database for row changes, leaf splits (tree_change.rs) and rows that move (a length
//! change), and holding it exclusively only for what needs it (`Needs::LeafRoom` for a split
//! short of a page or log room, the log, growths). Five sessions, each in its own transactions of one to three statements (one
//! statement in ten rolled back to its savepoint, one transaction in six rolled back whole),
//! change keys `i * SESSIONS + me`: their keys interleave, so they land in the same leaves
//! and split them, while no two sessions touch one key (the SQL layer's row locks guarantee
//! that; storage has none). Each session keeps a model of its keys; every new row passes the
//! session's row gate exactly once, under its leaf's latch (access.rs invariant 5).
//!
//! `sessions_change_one_clustered_table_at_once` (real file system, background checkpoints):
//! afterwards, and again after a close without a checkpoint and a reopen (redo), the table
//! holds exactly the committed rows with their last committed values, CHECKALLOC and CHECKDB
//! find nothing, sessions were inside shared row operations at once, and leaves split.
//!
//! `concurrent_row_changes_survive_crashes` (simulated file system, a buffer pool of 8 to 31
//! pages so pages are evicted while other sessions change rows): the power is cut at a
//! seeded I/O; after recovery each session's keys hold exactly its last acknowledged commit's
//! values, or, when a commit was in flight, that commit's values entire; CHECKDB is clean. A
//! seed fixes the cut and the workload, not the threads' schedule; `XDB_CRASH_SEEDS=N` runs
//! a longer loop.

mod common;
use common::{
    all_succeeded, checkpointer_collecting, close_without_checkpoint, crash_and_reopen, cut_after,
    fresh_dir,
};
use common::{assert_checkdb_clean, ctx, file, row, seed_count, table_entry, table_rows};
use common::{Quiet, Rng};

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use extentdb_format::catalog::RecoveryModel;
use extentdb_format::file_header::FileType;
use extentdb_format::log_record::XactId;
use extentdb_format::PageId;
use extentdb_io::os::OsFileSystem;
use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_storage::access::{Held, Needs, Step};
use extentdb_storage::checkpoint::Checkpointer;
use extentdb_storage::log_growth::GrowthEnv;
use extentdb_storage::shared::SharedDatabase;
use extentdb_storage::table::Rid;
use extentdb_storage::{Database, NewDatabase, StorageError};

/// Sessions changing the table at once; session `me` owns the keys `k % SESSIONS == me`.
const SESSIONS: u32 = 5;

/// Database `Rows` in `root`: a 2 MB data file and a log of `log_pages`, each growing 1 MB;
/// SIMPLE, so checkpoints truncate the log.
fn spec(root: &Path, log_pages: u32) -> NewDatabase {
    NewDatabase {
        name: "Rows".into(),
        database_id: 5,
        recovery_model: RecoveryModel::Simple,
        files: vec![
            file("Rows", root.join("Rows.mdf"), FileType::Rows, 256),
            file(
                "Rows_log",
                root.join("Rows_log.ldf"),
                FileType::Log,
                log_pages,
            ),
        ],
        filegroups: vec![],
    }
}

/// How the sessions' row operations went, counted across sessions.
#[derive(Default)]
struct Counters {
    /// Sessions inside a shared row operation now, the most at once, and how many
    /// operations began while another session was inside one.
    inside: AtomicUsize,
    peak: AtomicUsize,
    together: AtomicU64,
    /// Operations done sharing the database, and done holding it exclusively.
    shared: AtomicU64,
    exclusive: AtomicU64,
    /// `Needs::LeafRoom` (a split holding the database) returned; rows moved (a length
    /// change) sharing the database.
    leaf_room: AtomicU64,
    moves: AtomicU64,
    /// Transactions committed, rolled back whole; statements rolled back to a savepoint.
    commits: AtomicU64,
    rollbacks: AtomicU64,
    statement_rollbacks: AtomicU64,
}

impl Counters {
    /// Counts what an operation returned; `shared` says how the database was held.
    fn note<T>(&self, step: &Step<T>, shared: bool) {
        let counter = match step {
            Step::Done(_) if shared => &self.shared,
            Step::Done(_) => &self.exclusive,
            Step::Needs(Needs::LeafRoom { .. }) => &self.leaf_room,
            Step::Needs(_) => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

/// A session inside a shared row operation, counted in `Counters::inside` until dropped.
struct Inside<'a>(&'a Counters);

impl<'a> Inside<'a> {
    fn enter(c: &'a Counters) -> Inside<'a> {
        let now = c.inside.fetch_add(1, Ordering::SeqCst) + 1;
        c.peak.fetch_max(now, Ordering::SeqCst);
        if now > 1 {
            c.together.fetch_add(1, Ordering::Relaxed);
        }
        Inside(c)
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        self.0.inside.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One change a session makes to one of its own keys.
#[derive(Debug)]
enum Change {
    Insert { key: u32, value: Vec<u8> },
    Update { key: u32, value: Vec<u8> },
    Delete { key: u32 },
}

impl Change {
    fn key(&self) -> u32 {
        match self {
            Change::Insert { key, .. } | Change::Update { key, .. } | Change::Delete { key } => {
                *key
            }
        }
    }
}

/// What one session's keys hold: after its last acknowledged commit, and, when an error
/// stopped it during a commit, after that commit (present entirely or not at all).
#[derive(Default, Debug)]
struct Outcome {
    committed: BTreeMap<u32, Vec<u8>>,
    in_doubt: Option<BTreeMap<u32, Vec<u8>>>,
}

/// A session changing its own keys of one clustered table.
struct Session<'a> {
    db: &'a SharedDatabase,
    env: GrowthEnv,
    table: u32,
    me: u32,
    rng: Rng,
    c: &'a Counters,
    /// Its keys' values as its open transaction sees them.
    rows: BTreeMap<u32, Vec<u8>>,
    /// Where each of its keys was last placed: the RID a scan would have found (the
    /// clustered index finds a row by key, so a RID a split made stale is harmless).
    rids: BTreeMap<u32, Rid>,
    /// The next fresh key's ordinal: key `next * SESSIONS + me`.
    next: u32,
    out: Outcome,
}

impl Session<'_> {
    /// `len` bytes of a new value, never equal to `not` (the value it replaces).
    fn value(&mut self, len: usize, not: Option<&[u8]>) -> Vec<u8> {
        let start = self.rng.below(256) as u8;
        let step = 1 + self.rng.below(7) as u8;
        let mut v: Vec<u8> = (0..len)
            .map(|i| start.wrapping_add(step * i as u8))
            .collect();
        if not == Some(&v[..]) {
            v[0] = v[0].wrapping_add(1);
        }
        v
    }

    /// A length for a value: 40 to 700 bytes, so a leaf holds a dozen to a hundred rows.
    fn length(&mut self) -> usize {
        40 + self.rng.below(661) as usize
    }

    /// The next change: an insert (a fresh key, or one of its keys that is absent now),
    /// an in-place update, an update that changes the length (the row moves), a delete.
    fn choose(&mut self) -> Change {
        let pick = self.rng.below(10);
        if pick < 4 || self.rows.is_empty() {
            let ordinal = match self.rng.below(8) == 0 && self.next > 0 {
                true => self.rng.below(self.next as u64) as u32,
                false => self.next,
            };
            let mut key = ordinal * SESSIONS + self.me;
            if self.rows.contains_key(&key) || ordinal == self.next {
                key = self.next * SESSIONS + self.me;
                self.next += 1;
            }
            let len = self.length();
            let value = self.value(len, None);
            return Change::Insert { key, value };
        }
        let nth = self.rng.below(self.rows.len() as u64) as usize;
        let (&key, old) = self.rows.iter().nth(nth).expect("a row");
        let old = old.clone();
        match pick {
            4 | 5 => Change::Update {
                key,
                value: self.value(old.len(), Some(&old)),
            },
            6 | 7 => {
                let mut len = self.length();
                if len == old.len() {
                    len += 1;
                }
                let value = self.value(len, None);
                Change::Update { key, value }
            }
            _ => Change::Delete { key },
        }
    }

    /// Makes `change` in transaction `x` through `SharedDatabase::run`, counting how the database
    /// was held; the new row (an insert's, a moved row's) passes the row gate exactly once,
    /// where it was placed.
    fn apply(&mut self, x: XactId, change: &Change) -> Result<(), StorageError> {
        let (c, t, env) = (self.c, self.table, &self.env);
        let key = change.key();
        let old = self.rows.get(&key).map(|v| row(key, v));
        let rid = self.rids.get(&key).copied();
        let new = match change {
            Change::Insert { value, .. } | Change::Update { value, .. } => Some(row(key, value)),
            Change::Delete { .. } => None,
        };
        let moves = matches!(change, Change::Update { .. })
            && old.as_ref().map(Vec::len) != new.as_ref().map(Vec::len);
        let mut gated: Vec<Rid> = Vec::new();
        let placed = self.db.run(
            env,
            |e| e,
            |held| {
                let shared = matches!(held, Held::Shared(_));
                let _inside = shared.then(|| Inside::enter(c));
                let mut gate = |at: Rid, rec: &[u8]| {
                    assert_eq!(Some(rec), new.as_deref(), "the gate sees the row placed");
                    gated.push(at);
                    true
                };
                let step = match (change, &old, &new) {
                    (Change::Insert { .. }, None, Some(new)) => {
                        let s = held.insert_row(x, t, (new, env), Some(&mut gate))?;
                        placed_at(s)
                    }
                    (Change::Update { .. }, Some(old), Some(new)) => {
                        let at = rid.expect("an updated key was placed");
                        let s = held.update_row_at(x, t, (at, old), (new, env), Some(&mut gate))?;
                        placed_at(s)
                    }
                    (Change::Delete { .. }, Some(old), None) => {
                        let at = rid.expect("a deleted key was placed");
                        match held.delete_row_at(x, t, (at, old))? {
                            Step::Done(()) => Step::Done(None),
                            Step::Needs(n) => Step::Needs(n),
                        }
                    }
                    other => panic!("{change:?} does not fit the session's rows: {other:?}"),
                };
                c.note(&step, shared);
                if moves && shared && matches!(step, Step::Done(_)) {
                    c.moves.fetch_add(1, Ordering::Relaxed);
                }
                Ok(step)
            },
        )?;
        let gates_expected = usize::from(matches!(change, Change::Insert { .. }) || moves);
        assert_eq!(gated.len(), gates_expected, "{change:?}: row gate calls");
        if let Some(at) = placed {
            assert!(
                gated.is_empty() || gated == [at],
                "the gate saw {gated:?}, not {at:?}"
            );
            self.rids.insert(key, at);
        }
        match change {
            Change::Insert { value, .. } | Change::Update { value, .. } => {
                self.rows.insert(key, value.clone())
            }
            Change::Delete { .. } => self.rows.remove(&key),
        };
        Ok(())
    }

    /// One statement of 1 to 6 changes in `x`; one in ten is rolled back to its savepoint.
    fn statement(&mut self, x: XactId) -> Result<(), StorageError> {
        let (same, savepoint) = self.db.begin(Some(x));
        assert_eq!(same, x, "a statement continues its open transaction");
        let before = self.rows.clone();
        for _ in 0..1 + self.rng.below(6) {
            let change = self.choose();
            self.apply(x, &change)?;
        }
        if self.rng.below(10) == 0 {
            self.db.rollback_to(x, savepoint)?;
            self.rows = before;
            self.c.statement_rollbacks.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// One transaction of 1 to 3 statements; one in six is rolled back, the rest commit.
    fn transaction(&mut self) -> Result<(), StorageError> {
        let (x, _) = self.db.begin(None);
        for _ in 0..1 + self.rng.below(3) {
            self.statement(x)?;
        }
        if self.rng.below(6) == 0 {
            self.db.rollback(x)?;
            self.rows = self.out.committed.clone();
            self.c.rollbacks.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        if let Err(e) = self.db.commit(x) {
            self.out.in_doubt = Some(self.rows.clone());
            return Err(e);
        }
        self.out.committed = self.rows.clone();
        self.c.commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// An insert's or update's step with the row's place.
fn placed_at(step: Step<Rid>) -> Step<Option<Rid>> {
    match step {
        Step::Done(at) => Step::Done(Some(at)),
        Step::Needs(n) => Step::Needs(n),
    }
}

/// Runs `SESSIONS` sessions of `transactions` transactions each on `table` at once; each
/// stops at its first error (a cut power), which it returns beside what it committed.
fn run_sessions(
    db: &Arc<SharedDatabase>,
    (table, instant): (u32, bool),
    transactions: u32,
    seed: u64,
    c: &Arc<Counters>,
) -> Vec<(Outcome, Option<StorageError>)> {
    let start = Arc::new(Barrier::new(SESSIONS as usize));
    let threads: Vec<_> = (0..SESSIONS)
        .map(|me| {
            let (db, c, start) = (db.clone(), c.clone(), start.clone());
            std::thread::spawn(move || {
                let mut env = GrowthEnv::default();
                env.policy.instant = instant;
                let mix = 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(me as u64 + 1);
                let mut s = Session {
                    db: &db,
                    env,
                    table,
                    me,
                    rng: Rng((seed ^ mix) | 1),
                    c: &c,
                    rows: BTreeMap::new(),
                    rids: BTreeMap::new(),
                    next: 0,
                    out: Outcome::default(),
                };
                start.wait();
                let stopped = (0..transactions).find_map(|_| s.transaction().err());
                (s.out, stopped)
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("a session panicked"))
        .collect()
}

/// Session `me`'s keys among `rows`.
fn keys_of(rows: &BTreeMap<u32, Vec<u8>>, me: u32) -> BTreeMap<u32, Vec<u8>> {
    rows.iter()
        .filter(|(k, _)| *k % SESSIONS == me)
        .map(|(k, v)| (*k, v.clone()))
        .collect()
}

/// `got` equals `want`, told key by key when it does not.
fn assert_rows(got: &BTreeMap<u32, Vec<u8>>, want: &BTreeMap<u32, Vec<u8>>, when: &str) {
    let missing: Vec<_> = want.keys().filter(|k| !got.contains_key(k)).collect();
    let extra: Vec<_> = got.keys().filter(|k| !want.contains_key(k)).collect();
    let wrong: Vec<_> = want
        .iter()
        .filter(|(k, v)| got.get(k).is_some_and(|g| g != *v))
        .map(|(k, _)| k)
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty() && wrong.is_empty(),
        "{when}: {} rows, committed {}; missing {missing:?}, never committed {extra:?}, \
         wrong values {wrong:?}",
        got.len(),
        want.len()
    );
}

/// The table holds exactly every session's committed rows with their values.
fn assert_exactly_committed(db: &Database, table: u32, outcomes: &[Outcome], when: &str) {
    let want: BTreeMap<u32, Vec<u8>> = outcomes.iter().flat_map(|o| o.committed.clone()).collect();
    assert_rows(&table_rows(db, table), &want, when);
}

/// The distinct leaves the table's rows are on.
fn leaves(db: &Database, table: u32) -> usize {
    let rows = db.scan_rows(table).unwrap();
    let pages: std::collections::BTreeSet<PageId> = rows.iter().map(|(rid, _)| rid.0).collect();
    pages.len()
}

#[test]
fn sessions_change_one_clustered_table_at_once() {
    let dir = fresh_dir("shared-rows");
    let fs = OsFileSystem::new();
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &spec(&dir, 1024)).unwrap();
    let table = db.create_table(table_entry(true)).unwrap();
    let db = Arc::new(SharedDatabase::new(db));
    let (checkpointer, errors) = checkpointer_collecting(&db);
    let c = Arc::new(Counters::default());
    let transactions = if cfg!(debug_assertions) { 40 } else { 300 };
    // IFI off: the data file's growths are zeroed by sessions holding no database lock.
    let results = run_sessions(&db, (table, false), transactions, 0x5eed_0c1a, &c);
    drop(checkpointer);
    assert!(errors.lock().unwrap().is_empty(), "{:?}", errors.lock());
    let outcomes = all_succeeded(results);
    let db = Arc::into_inner(db).expect("sessions joined").into_inner();
    let leaf_count = leaves(&db, table);
    let splits = db.page_splits();
    let get = Counters::get;
    eprintln!(
        "operations shared {}, exclusive {}; {splits} splits, {} of them asked for holding \
         the database, {} rows moved sharing it; \
         {} operations began beside another, peak {} at once; {} commits, {} rollbacks, \
         {} statement rollbacks; {} rows on {leaf_count} leaves",
        get(&c.shared),
        get(&c.exclusive),
        get(&c.leaf_room),
        get(&c.moves),
        get(&c.together),
        c.peak.load(Ordering::Relaxed),
        get(&c.commits),
        get(&c.rollbacks),
        get(&c.statement_rollbacks),
        db.scan_rows(table).unwrap().len(),
    );
    assert!(
        c.peak.load(Ordering::Relaxed) >= 2 && get(&c.together) > 0,
        "sessions were never inside shared row operations at once"
    );
    assert!(
        splits > 0 && leaf_count >= 8 && get(&c.leaf_room) < splits,
        "leaves split, mostly sharing the database: {splits} splits, {} asked for holding \
         it, {leaf_count} leaves",
        get(&c.leaf_room)
    );
    assert!(
        get(&c.moves) > 0 && get(&c.shared) > 10 * get(&c.exclusive),
        "rows moved sharing the database, almost every operation shared it"
    );
    assert!(
        get(&c.rollbacks) > 0 && get(&c.statement_rollbacks) > 0 && get(&c.commits) > 0,
        "transactions committed and rolled back, statements rolled back"
    );
    assert_exactly_committed(&db, table, &outcomes, "after the sessions");
    assert_checkdb_clean(&db, "after the sessions");

    // A close without a checkpoint once the log is flushed: the rows come back by redo.
    close_without_checkpoint(db);
    let db = Database::open(fs.as_ref(), &dir.join("Rows.mdf")).unwrap();
    assert_exactly_committed(&db, table, &outcomes, "after recovery");
    assert_checkdb_clean(&db, "after recovery");
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}

/// After a crash: session `me`'s keys hold its last acknowledged commit's values, or all
/// of the commit that was in flight.
fn assert_session_survived(got: &BTreeMap<u32, Vec<u8>>, me: u32, o: &Outcome, when: &str) {
    let mine = keys_of(got, me);
    if o.in_doubt.as_ref().is_some_and(|d| *d == mine) {
        return;
    }
    assert_rows(&mine, &o.committed, &format!("{when}: session {me}"));
}

#[test]
fn concurrent_row_changes_survive_crashes() {
    let seeds = seed_count("XDB_CRASH_SEEDS", 4, 24);
    let root = Path::new("/sim");
    let (mut cut_while_running, mut in_doubt, mut committed_rows) = (0, 0, 0);
    // XDB_SEED=N runs seed N alone (its workload and cut; the schedule varies).
    let only: Option<u64> = std::env::var("XDB_SEED").ok().and_then(|s| s.parse().ok());
    for seed in only.map_or(0..seeds, |s| s..s + 1) {
        let fs = SimFileSystem::new(seed + 1, Faults::default());
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut db = Database::create(&ctx(&fs, true, &Quiet), &spec(root, 512)).unwrap();
        db.set_buffer_pool_pages(8 + rng.below(24) as usize);
        let table = db.create_table(table_entry(true)).unwrap();
        let db = Arc::new(SharedDatabase::new(db));
        let checkpointer = Checkpointer::spawn(&db, |_, _| {});
        cut_after(&fs, 10 + rng.below(400));
        let c = Arc::new(Counters::default());
        let results = run_sessions(&db, (table, seed % 2 == 0), 60, seed, &c);
        drop(checkpointer);
        cut_while_running += usize::from(results.iter().any(|r| r.1.is_some()));
        in_doubt += results.iter().filter(|r| r.0.in_doubt.is_some()).count();
        committed_rows += results.iter().map(|r| r.0.committed.len()).sum::<usize>();
        let db = crash_and_reopen(db, &fs, &root.join("Rows.mdf"), seed);
        let got = table_rows(&db, table);
        for (me, (o, _)) in results.iter().enumerate() {
            assert_session_survived(&got, me as u32, o, &format!("seed {seed}"));
        }
        assert_checkdb_clean(&db, &format!("seed {seed}"));
    }
    eprintln!(
        "{seeds} seeds: cut while sessions ran in {cut_while_running}; {in_doubt} commits in \
         flight at the cut; {committed_rows} rows committed before the cuts"
    );
    assert!(committed_rows > 0, "nothing was committed before a cut");
    assert!(
        only.is_some() || cut_while_running * 2 >= seeds as usize,
        "the power was cut while sessions ran in only {cut_while_running} of {seeds} seeds"
    );
}

/// Inserts rows `keys` (600-byte values derived from the key) in one transaction through
/// `Database::now` and commits it; gives the rows once the commit is durable, else the error.
fn insert_committed(
    db: &mut Database,
    table: u32,
    keys: impl Iterator<Item = u32>,
) -> Result<BTreeMap<u32, Vec<u8>>, StorageError> {
    let x = db.begin_xact();
    let mut rows = BTreeMap::new();
    for k in keys {
        let v = vec![k as u8; 600];
        db.now(|d| d.insert_row(x, table, (&row(k, &v), d.growth_env()), None))?;
        rows.insert(k, v);
    }
    if let Some(lsn) = db.commit_xact(x)? {
        db.wal().expect("a log").flush(lsn)?;
    }
    Ok(rows)
}

/// A leaf split whose I/O fails, at each I/O of the split and its commit in turn (the
/// first is the eviction making room for the split's pages in a pool of 8), and the database going
/// on as other sessions go on after one session's error: the split's pages are all in the
/// pool or the database refuses changes (xact.rs invariant 6). Before that rule, an
/// eviction that failed while a split's images were installed left the parent's old copy
/// in the pool, and the next split logged it without the first split's separator (after a
/// crash, CHECKDB 8977 and 8981: a leaf in the chain that no parent names).
#[test]
fn a_split_cut_short_leaves_no_stale_page() {
    let root = Path::new("/sim");
    let (mut poisoned, mut failed) = (0, 0);
    for nth in 1..=6u64 {
        let fs = SimFileSystem::new(nth, Faults::default());
        let mut db = Database::create(&ctx(&fs, true, &Quiet), &spec(root, 512)).unwrap();
        db.set_buffer_pool_pages(8);
        let table = db.create_table(table_entry(true)).unwrap();
        // Even keys in ascending order fill whole leaves (a split at the end).
        let mut committed = insert_committed(&mut db, table, (0..120).map(|i| i * 2)).unwrap();
        cut_after(&fs, nth);
        let cut_short = insert_committed(&mut db, table, [121].into_iter());
        fs.set_faults(Faults::default());
        failed += usize::from(cut_short.is_err());
        committed.extend(cut_short.unwrap_or_default());
        if db.is_poisoned() {
            poisoned += 1;
        } else {
            // Odd keys between them split the other leaves, changing their parent.
            for i in 0..60 {
                match insert_committed(&mut db, table, [i * 2 + 1].into_iter()) {
                    Ok(rows) => committed.extend(rows),
                    Err(_) => break,
                }
            }
        }
        drop(db);
        fs.crash();
        let db = Database::open(&fs, &root.join("Rows.mdf"))
            .unwrap_or_else(|e| panic!("I/O {nth} failed: reopen failed: {e}"));
        let got = table_rows(&db, table);
        assert!(
            committed.iter().all(|(k, v)| got.get(k) == Some(v)),
            "I/O {nth} failed: committed rows lost"
        );
        assert_checkdb_clean(&db, &format!("I/O {nth} of a split failed"));
    }
    eprintln!(
        "6 I/Os failed in turn: {failed} failed the insert, {poisoned} poisoned the database"
    );
    assert!(failed > 0, "no failed I/O failed the split's insert");
}

/// The key of a row `scan_rows` gave.
fn key_of(rec: &[u8]) -> u32 {
    let cols = extentdb_format::record::decode(&common::LAYOUT, rec).unwrap();
    u32::from_le_bytes(cols[0].unwrap().try_into().unwrap())
}

/// A rollback on a database a split cut short poisoned compensates nothing (xact.rs
/// invariants 6 and 9): the split's images are in the log, but the pool kept the leaf's
/// old copy, and a compensation found there named the slot of a row the logged image had
/// moved to the new page. Recovery then failed ("slot N is beyond the slot count M"), as
/// the concurrent crash loop found once in a few thousand seeds. Here, at each I/O of the
/// split in turn: transaction x inserts a row near the end of the first leaf, another
/// transaction's row splits that leaf, the I/O fails, x is rolled back, the log is
/// flushed and the power cut; the reopen must recover the committed rows, CHECKDB clean.
#[test]
fn a_rollback_after_a_split_cut_short_compensates_nothing() {
    let root = Path::new("/sim");
    let (mut poisoned, mut refused, mut failed) = (0, 0, 0);
    for nth in 1..=8u64 {
        let fs = SimFileSystem::new(nth, Faults::default());
        let mut db = Database::create(&ctx(&fs, true, &Quiet), &spec(root, 512)).unwrap();
        db.set_buffer_pool_pages(8);
        let table = db.create_table(table_entry(true)).unwrap();
        // Even keys in ascending order fill whole leaves (a split at the end).
        let committed = insert_committed(&mut db, table, (0..120).map(|i| i * 2)).unwrap();
        let rows = db.scan_rows(table).unwrap();
        let first_leaf = rows[0].0 .0;
        let last_key = rows
            .iter()
            .filter(|(rid, _)| rid.0 == first_leaf)
            .map(|(_, rec)| key_of(rec))
            .max()
            .unwrap();
        // x's small row goes in beside the leaf's last row: the right half of its split.
        let x = db.begin_xact();
        let mine = row(last_key - 1, b"x");
        db.now(|d| d.insert_row(x, table, (&mine, d.growth_env()), None))
            .unwrap();
        cut_after(&fs, nth);
        // A 600-byte row at the leaf's start does not fit: the leaf splits.
        let y = db.begin_xact();
        let splitter = row(1, &[1u8; 600]);
        let split = db.now(|d| d.insert_row(y, table, (&splitter, d.growth_env()), None));
        fs.set_faults(Faults::default());
        poisoned += usize::from(db.is_poisoned());
        failed += usize::from(split.is_err());
        let rolled_back = db.rollback_xact(x);
        refused += usize::from(rolled_back.is_err());
        let refused_when_poisoned = rolled_back.is_err() == db.is_poisoned();
        // Whatever was logged reaches the disk, as another session's commit would take it.
        let wal = db.wal().unwrap();
        wal.flush(wal.end_lsn()).unwrap();
        drop(db);
        fs.crash();
        let db = Database::open(&fs, &root.join("Rows.mdf"))
            .unwrap_or_else(|e| panic!("I/O {nth} failed: reopen failed: {e}"));
        assert_rows(&table_rows(&db, table), &committed, &format!("I/O {nth}"));
        assert_checkdb_clean(&db, &format!("I/O {nth} of a split failed"));
        assert!(
            refused_when_poisoned,
            "I/O {nth}: a rollback is refused exactly when the database is poisoned"
        );
    }
    eprintln!(
        "8 I/Os failed in turn: {failed} failed the split's insert, {poisoned} poisoned the \
         database, {refused} rollbacks refused"
    );
    assert!(poisoned > 0, "no failed I/O cut a split short");
}

/// A rollback shares the database (xact.rs invariant 7, transaction.rs invariant 2):
/// while one session undoes a transaction of many rows, another session inserts rows into
/// the same leaves and sees the rollback half done, which a rollback holding the database
/// exclusively would never let it see. Afterwards the table holds exactly the second
/// session's rows, and CHECKDB is clean.
#[test]
fn a_rollback_runs_beside_other_sessions_row_changes() {
    let dir = fresh_dir("shared-rollback");
    let fs = OsFileSystem::new();
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &spec(&dir, 4096)).unwrap();
    let table = db.create_table(table_entry(true)).unwrap();
    // The transaction to roll back: even keys, small rows, so its undo stays in memory.
    let undone = db.begin_xact();
    const ROWS: u32 = 6_000;
    for k in 0..ROWS {
        db.now(|d| {
            d.insert_row(
                undone,
                table,
                (&row(2 * k, b"undo me"), d.growth_env()),
                None,
            )
        })
        .unwrap();
    }
    let db = Arc::new(SharedDatabase::new(db));
    let undoable = |db: &SharedDatabase| db.read().unwrap().undo_changes_in_memory(undone).2;
    assert_eq!(undoable(&db), ROWS as usize);
    let started = Arc::new(Barrier::new(2));
    let roller = {
        let (db, started) = (db.clone(), started.clone());
        std::thread::spawn(move || {
            started.wait();
            db.rollback(undone).unwrap();
        })
    };
    // The other session: odd keys, in the same leaves, until the rollback is over.
    started.wait();
    let (x, _) = db.begin(None);
    let (mut mine, mut seen_half_done) = (BTreeMap::new(), 0);
    let env = GrowthEnv::default();
    for k in 0.. {
        let left = undoable(&db);
        if left == 0 && roller.is_finished() {
            break;
        }
        let value = vec![k as u8; 40];
        db.run(
            &env,
            |e| e,
            |h| h.insert_row(x, table, (&row(2 * k + 1, &value), &env), None),
        )
        .unwrap();
        mine.insert(2 * k + 1, value);
        if left > 0 && left < ROWS as usize && undoable(&db) > 0 {
            seen_half_done += 1;
        }
    }
    roller.join().unwrap();
    db.commit(x).unwrap();
    assert!(
        seen_half_done > 0,
        "no row change ran while the rollback was half done ({} rows inserted)",
        mine.len()
    );
    let db = Arc::into_inner(db).expect("sessions joined").into_inner();
    assert_rows(&table_rows(&db, table), &mine, "after the rollback");
    assert_checkdb_clean(&db, "after the rollback");
}

/// Leaf splits, and the splits of index pages and of the root above them, share the
/// database (tree_change.rs): a reader session holds the database shared from start to end
/// while a writer inserts rows through `SharedDatabase::run` into an empty table, in an
/// order that splits leaves in the middle, and enough of them that the root, a leaf at
/// first, then its index page split too. When a split
/// needed the database exclusively, the writer's first split waited for the reader for
/// good. Meanwhile the reader scans the table and looks rows up by key again and again
/// (row operations and splits of other sessions crossing its descents): it never misses a
/// committed row. Afterwards the table holds every row and CHECKDB is clean.
#[test]
fn leaf_splits_share_the_database() {
    let dir = fresh_dir("shared-splits");
    let fs = OsFileSystem::new();
    let mut spec = spec(&dir, 8192);
    spec.files[0].size_pages = 2048;
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &spec).unwrap();
    let table = db.create_table(table_entry(true)).unwrap();
    let value = |k: u32| vec![(k % 251) as u8; 300];
    // The table's first page came from its unit's first extent (its cursor known): every
    // split from the first, the root's included, shares the database.
    let mut keys: Vec<u32> = (0..20_000).map(|i| i * 7 + 1).collect();
    let mut rng = Rng(0x5eed_5911);
    for i in (1..keys.len()).rev() {
        keys.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let splits_before = db.page_splits();
    let db = Arc::new(SharedDatabase::new(db));
    let done = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = {
        let (db, done, keys) = (db.clone(), done.clone(), keys.clone());
        std::thread::spawn(move || {
            let env = GrowthEnv::default();
            for batch in keys.chunks(50) {
                let x = db.read().unwrap().begin_xact();
                for &k in batch {
                    let rec = row(k, &value(k));
                    db.run(&env, |e| e, |d| d.insert_row(x, table, (&rec, &env), None))
                        .unwrap();
                }
                let lsn = db.read().unwrap().commit_xact(x).unwrap();
                if let Some(lsn) = lsn {
                    db.read().unwrap().wal().unwrap().flush(lsn).unwrap();
                }
                done.fetch_add(batch.len(), Ordering::Release);
            }
            tx.send(()).unwrap();
        })
    };
    let (mut scans, mut lookups) = (0, 0);
    {
        let reader = db.read().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
        while rx.try_recv().is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer waited for the reader's shared hold: a split held the database"
            );
            let committed = done.load(Ordering::Acquire);
            let got: BTreeMap<u32, Vec<u8>> = table_rows(&reader, table);
            for &k in &keys[..committed] {
                assert_eq!(
                    got.get(&k),
                    Some(&value(k)),
                    "a scan missed committed key {k}"
                );
            }
            scans += 1;
            for _ in 0..50.min(committed) {
                let k = keys[rng.below(committed as u64) as usize];
                let found = reader
                    .current_row(table, (PageId::NULL, 0), &row(k, &[]))
                    .unwrap();
                assert!(found.is_some(), "a lookup missed committed key {k}");
                lookups += 1;
            }
        }
    }
    writer.join().unwrap();
    let db = Arc::into_inner(db).expect("writer joined").into_inner();
    let splits = db.page_splits() - splits_before;
    let leaf_count = leaves(&db, table);
    eprintln!(
        "{splits} splits beside the reader ({scans} scans, {lookups} lookups); {leaf_count} leaves"
    );
    // A root index page holds under 500 separators of an int key: with 600 leaves or
    // more, index pages split under the root.
    assert!(leaf_count >= 600, "{leaf_count} leaves");
    assert!(splits as usize >= leaf_count / 2, "{splits} splits");
    let want: BTreeMap<u32, Vec<u8>> = keys.iter().map(|&k| (k, value(k))).collect();
    assert_rows(&table_rows(&db, table), &want, "after the writer");
    assert_checkdb_clean(&db, "after splits beside a reader");
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The first rows after open share the database: a heap's and a clustered index's page
/// cursor, not known after open, is rebuilt under the unit's insert lock by the session
/// that needs it (table.rs `unit_cursor`), and proportional fill's round robin is counted
/// at open (database.rs `open_at`), so the filegroup's first new extent after open is
/// taken sharing it too. A reader holds the reopened database shared throughout while a
/// writer inserts `AFTER_OPEN` rows into a heap and into a clustered table, splitting its
/// leaves and filling the units' mixed pages, so each takes a uniform extent; before,
/// the first row of each (and then the first new extent) asked for the database held
/// exclusively and waited for the reader for good. Afterwards both tables hold every row
/// and CHECKDB is clean.
#[test]
fn first_rows_after_open_share_the_database() {
    // 200-byte rows, about 35 a page: past the 8 mixed pages of each table.
    const AFTER_OPEN: u32 = 400;
    let dir = fresh_dir("shared-after-open");
    let fs = OsFileSystem::new();
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &spec(&dir, 2048)).unwrap();
    let tree = db.create_table(table_entry(true)).unwrap();
    let mut h = table_entry(false);
    h.name = "H".into();
    let heap = db.create_table(h).unwrap();
    let value = |k: u32| vec![(k % 253) as u8; 200];
    let x = db.begin_xact();
    for k in 0..100u32 {
        let rec = row(k * 2, &value(k * 2));
        for t in [tree, heap] {
            db.now(|d| d.insert_row(x, t, (&rec, d.growth_env()), None))
                .unwrap();
        }
    }
    db.commit_xact(x).unwrap();
    db.checkpoint().unwrap();
    drop(db);
    let db = Database::open(fs.as_ref(), &dir.join("Rows.mdf")).unwrap();
    let db = Arc::new(SharedDatabase::new(db));
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            let env = GrowthEnv::default();
            let x = db.read().unwrap().begin_xact();
            for k in 0..AFTER_OPEN {
                let rec = row(k * 2 + 1, &value(k * 2 + 1));
                for t in [heap, tree] {
                    db.run(&env, |e| e, |d| d.insert_row(x, t, (&rec, &env), None))
                        .unwrap();
                }
            }
            let lsn = db.read().unwrap().commit_xact(x).unwrap();
            let wal = db.read().unwrap().wal().unwrap();
            if let Some(l) = lsn {
                wal.flush(l).unwrap();
            }
            tx.send(()).unwrap();
        })
    };
    {
        let _reader = db.read().unwrap();
        let waited = rx.recv_timeout(std::time::Duration::from_secs(120));
        assert!(
            waited.is_ok(),
            "the writer waited for the reader's shared hold: a first row after open held the database"
        );
    }
    writer.join().unwrap();
    let db = Arc::into_inner(db).expect("writer joined").into_inner();
    let want: BTreeMap<u32, Vec<u8>> = (0..100u32)
        .map(|k| k * 2)
        .chain((0..AFTER_OPEN).map(|k| k * 2 + 1))
        .map(|k| (k, value(k)))
        .collect();
    assert_rows(&table_rows(&db, tree), &want, "the clustered table");
    assert_rows(&table_rows(&db, heap), &want, "the heap");
    assert!(db.page_splits() > 0, "the clustered table split");
    assert_checkdb_clean(&db, "after the first rows after open");
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}
