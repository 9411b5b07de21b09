//! The buffer pool's frames under sessions sharing a database (`SharedDatabase::read`), on real
//! files: each frame has its own latch, and the pool's map is latched only to look up,
//! insert or remove a frame, never across I/O (buffer_pool.rs invariants 6-9).
//!
//! `a_page_read_does_not_block_cached_reads`: one session's page read from disk is held
//! (the pool's test hook waits inside it) while three others read cached pages (copies,
//! and seeks that descend through cached pages); they complete reads meanwhile. With one
//! latch over the whole pool they all waited behind the read.
//!
//! `a_failed_read_fails_its_waiters`: sessions that wait for a page another session is
//! reading (PAGEIOLATCH_SH) get the read's error when it fails (a damaged checksum), never
//! the frame's empty page, and the page is not cached.
//!
//! `a_pool_whose_frames_are_all_fixed_goes_over_its_cap`: nine sessions each hold a read of
//! a different page in a pool of eight frames: the ninth miss finds every frame fixed and
//! goes one frame over the cap instead of waiting (buffer_pool.rs invariant 2), and the
//! next miss evicts back under it.
//!
//! `sessions_read_and_change_a_table_larger_than_the_pool`: four sessions read and change
//! rows of a table several times the pool's size (every page read evicts another, dirty
//! ones written back beside the other sessions); afterwards every committed row is there
//! with its value, and CHECKALLOC and CHECKDB find nothing.

mod common;
use common::{assert_checkdb_clean, checkpointer_collecting, ctx, file, fresh_dir, row};
use common::{table_entry, table_rows, Quiet, Rng};

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use extentdb_format::catalog::RecoveryModel;
use extentdb_format::file_header::FileType;
use extentdb_format::PageId;
use extentdb_io::os::OsFileSystem;
use extentdb_storage::access::Step;
use extentdb_storage::log_growth::GrowthEnv;
use extentdb_storage::scan::{KeyRange, ScanPosition, StoredRow};
use extentdb_storage::shared::SharedDatabase;
use extentdb_storage::{Database, NewDatabase, StorageError};

/// Database `Frames` in `root`: an 8 MB data file and a 16 MB log, SIMPLE.
fn spec(root: &Path) -> NewDatabase {
    NewDatabase {
        name: "Frames".into(),
        database_id: 5,
        recovery_model: RecoveryModel::Simple,
        files: vec![
            file("Frames", root.join("Frames.mdf"), FileType::Rows, 1024),
            file(
                "Frames_log",
                root.join("Frames_log.ldf"),
                FileType::Log,
                2048,
            ),
        ],
        filegroups: vec![],
    }
}

/// A clustered table `name` with keys `0..rows`, values of 300 bytes, committed.
fn filled_table(db: &mut Database, name: &str, rows: u32) -> u32 {
    let mut e = table_entry(true);
    e.name = name.into();
    let t = db.create_table(e).unwrap();
    let x = db.begin_xact();
    for k in 0..rows {
        let v = vec![(k % 251) as u8; 300];
        db.now(|d| d.insert_row(x, t, (&row(k, &v), d.growth_env()), None))
            .unwrap();
    }
    let lsn = db.commit_xact(x).unwrap().unwrap();
    db.wal().unwrap().flush(lsn).unwrap();
    t
}

/// A hook that holds the first page read of the thread named `holder` (of page `target`
/// when given) until released, telling `entered` which page it holds; it counts the reads
/// of `target` by every thread.
#[derive(Default)]
struct HeldRead {
    released: Mutex<bool>,
    wake: Condvar,
    target_reads: AtomicU64,
}

impl HeldRead {
    fn hook(
        self: &Arc<Self>,
        (holder, target): (&'static str, Option<PageId>),
        entered: mpsc::Sender<PageId>,
    ) -> extentdb_storage::buffer_pool::ReadHook {
        let (me, fired, entered) = (self.clone(), AtomicBool::new(false), Mutex::new(entered));
        Arc::new(move |pid| {
            if target == Some(pid) {
                me.target_reads.fetch_add(1, Ordering::SeqCst);
            }
            if std::thread::current().name() != Some(holder)
                || target.is_some_and(|t| t != pid)
                || fired.swap(true, Ordering::SeqCst)
            {
                return;
            }
            entered.lock().unwrap().send(pid).unwrap();
            let mut r = me.released.lock().unwrap();
            while !*r {
                r = me.wake.wait(r).unwrap();
            }
        })
    }

    fn release(&self) {
        *self.released.lock().unwrap() = true;
        self.wake.notify_all();
    }
}

#[test]
fn a_page_read_does_not_block_cached_reads() {
    let dir = fresh_dir("frames-miss");
    let fs = OsFileSystem::new();
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &spec(&dir)).unwrap();
    let cold = filled_table(&mut db, "Cold", 300);
    db.checkpoint().unwrap();
    drop(db);
    // Reopened, the pool caches no page of Cold; Hot's pages are cached (and dirty).
    let mut db = Database::open(fs.as_ref(), &dir.join("Frames.mdf")).unwrap();
    let hot = filled_table(&mut db, "Hot", 300);
    let hot_pages: Vec<PageId> = {
        let rows = db.scan_rows(hot).unwrap();
        let mut v: Vec<PageId> = rows.iter().map(|(rid, _)| rid.0).collect();
        v.dedup();
        v
    };
    assert!(hot_pages.len() >= 8, "Hot spans {} pages", hot_pages.len());
    let held = Arc::new(HeldRead::default());
    let (entered_tx, entered) = mpsc::channel();
    db.set_pool_read_hook(Some(held.hook(("miss", None), entered_tx)));
    let db = Arc::new(SharedDatabase::new(db));

    let miss = {
        let db = db.clone();
        std::thread::Builder::new()
            .name("miss".into())
            .spawn(move || db.read().unwrap().scan_rows(cold).unwrap().len())
            .unwrap()
    };
    let at = entered
        .recv_timeout(Duration::from_secs(60))
        .expect("the scan of Cold read a page from disk");
    let (stop, reads) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let readers: Vec<_> = (0..3)
        .map(|i| {
            let (db, stop, reads, pages) =
                (db.clone(), stop.clone(), reads.clone(), hot_pages.clone());
            std::thread::spawn(move || {
                let mut n = i;
                while !stop.load(Ordering::SeqCst) {
                    // A cached page's copy (DBCC PAGE's read), then a seek of Hot (a
                    // descent of cached pages), alternately.
                    let g = db.read().unwrap();
                    if n % 2 == 0 {
                        let (page, dirty) = g.read_page_current(pages[n % pages.len()]).unwrap();
                        assert!(dirty && !page.is_unformatted(), "a cached page");
                    } else {
                        let k = (n * 7 % 300) as u32;
                        let (rows, physical) = seek_counted(&g, hot, k).unwrap();
                        assert_eq!((rows.len(), physical), (1, 0), "key {k} found in cache");
                    }
                    reads.fetch_add(1, Ordering::SeqCst);
                    n += 1;
                }
            })
        })
        .collect();
    // Cached reads complete while the read of `at` is held: wait for 300 of them, at most
    // ten seconds (with one latch over the pool, none completes).
    let deadline = Instant::now() + Duration::from_secs(10);
    while reads.load(Ordering::SeqCst) < 300 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let while_held = reads.load(Ordering::SeqCst);
    held.release();
    stop.store(true, Ordering::SeqCst);
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(miss.join().unwrap(), 300, "the scan of Cold read every row");
    assert!(
        while_held >= 300,
        "{while_held} cached reads completed while the read of page {at} was held"
    );
    let db = Arc::into_inner(db).unwrap().into_inner();
    assert_eq!(table_rows(&db, hot).len(), 300);
    assert_checkdb_clean(&db, "after the reads");
}

/// The rows of `table` whose key is `k`, by a seek (which caches the pages it reads).
fn seek(db: &Database, table: u32, k: u32) -> Result<Vec<StoredRow>, StorageError> {
    Ok(seek_counted(db, table, k)?.0)
}

/// `seek`'s rows, and how many pages it read from disk.
fn seek_counted(db: &Database, table: u32, k: u32) -> Result<(Vec<StoredRow>, u64), StorageError> {
    let key = vec![Some(k.to_le_bytes().to_vec())];
    let range = KeyRange {
        lower: Bound::Included(key.clone()),
        upper: Bound::Included(key),
    };
    let origin = db.scan_origin(table)?;
    let chunk = db.seek_chunk(
        table,
        origin,
        (&range, &ScanPosition::Start),
        usize::MAX,
        None,
    )?;
    Ok((chunk.rows, chunk.reads.physical))
}

/// Damages page `pid` of the file at `path` in place (its checksum no longer matches).
fn damage(path: &Path, pid: PageId) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    let at = pid.page.0 as u64 * extentdb_format::PAGE_SIZE as u64 + 4000;
    f.write_all_at(&[0xA5; 64], at).unwrap();
    f.sync_all().unwrap();
}

#[test]
fn a_failed_read_fails_its_waiters() {
    let dir = fresh_dir("frames-failed-read");
    let fs = OsFileSystem::new();
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &spec(&dir)).unwrap();
    let t = filled_table(&mut db, "Damaged", 300);
    let leaf = seek(&db, t, 150).unwrap()[0].0 .0;
    db.checkpoint().unwrap();
    drop(db);
    damage(&dir.join("Frames.mdf"), leaf);
    let mut db = Database::open(fs.as_ref(), &dir.join("Frames.mdf")).unwrap();
    let held = Arc::new(HeldRead::default());
    let (entered_tx, entered) = mpsc::channel();
    db.set_pool_read_hook(Some(held.hook(("reader", Some(leaf)), entered_tx)));
    let db = Arc::new(SharedDatabase::new(db));

    let seeker = |name: &str| {
        let db = db.clone();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || seek(&db.read().unwrap(), t, 150).map(|r| r.len()))
            .unwrap()
    };
    let reader = seeker("reader");
    entered
        .recv_timeout(Duration::from_secs(60))
        .expect("the seek read the damaged leaf from disk");
    // Three more sessions want the leaf: they fix its frame and wait for its latch.
    let waiters: Vec<_> = (0..3).map(|_| seeker("waiter")).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while db.read().unwrap().pool_fixes(leaf) != Some(4) {
        assert!(
            Instant::now() < deadline,
            "the waiters queue on the leaf's frame"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    held.release();
    let failed = reader
        .join()
        .unwrap()
        .expect_err("the damaged leaf fails its read");
    assert!(matches!(failed, StorageError::Format(_)), "{failed:?}");
    for w in waiters {
        let e = w
            .join()
            .unwrap()
            .expect_err("a waiter gets the read's error");
        assert!(matches!(e, StorageError::Format(_)), "a waiter saw {e:?}");
        assert_eq!(e.to_string(), failed.to_string());
    }
    assert_eq!(
        held.target_reads.load(Ordering::SeqCst),
        1,
        "only the first session read the leaf from disk"
    );
    let db = Arc::into_inner(db).unwrap().into_inner();
    assert_eq!(db.pool_fixes(leaf), None, "the failed frame left the pool");
    db.check_pool_invariants();
}

/// Holds every read of the pages in `held` until released, counting the reads held.
#[derive(Default)]
struct HeldReads {
    entered: AtomicU64,
    released: Mutex<bool>,
    wake: Condvar,
}

impl HeldReads {
    fn hook(self: &Arc<Self>, held: Vec<PageId>) -> extentdb_storage::buffer_pool::ReadHook {
        let me = self.clone();
        Arc::new(move |pid| {
            if !held.contains(&pid) {
                return;
            }
            me.entered.fetch_add(1, Ordering::SeqCst);
            let mut r = me.released.lock().unwrap();
            while !*r {
                r = me.wake.wait(r).unwrap();
            }
        })
    }
}

#[test]
fn a_pool_whose_frames_are_all_fixed_goes_over_its_cap() {
    let dir = fresh_dir("frames-over");
    let fs = OsFileSystem::new();
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &spec(&dir)).unwrap();
    let t = filled_table(&mut db, "Wide", 400);
    // The first key of each of nine leaves.
    let mut firsts: Vec<(PageId, u32)> = Vec::new();
    for (rid, rec) in db.scan_rows(t).unwrap() {
        if firsts.last().is_none_or(|(leaf, _)| *leaf != rid.0) {
            let cols = extentdb_format::record::decode(&common::LAYOUT, &rec).unwrap();
            firsts.push((
                rid.0,
                u32::from_le_bytes(cols[0].unwrap().try_into().unwrap()),
            ));
        }
    }
    firsts.truncate(9);
    assert_eq!(firsts.len(), 9, "the table spans nine leaves");
    db.checkpoint().unwrap();
    drop(db);
    let mut db = Database::open(fs.as_ref(), &dir.join("Frames.mdf")).unwrap();
    let cap = extentdb_storage::buffer_pool::MIN_FRAMES;
    db.set_buffer_pool_pages(cap);
    assert_eq!(db.buffer_pool_usage().2, cap, "the pool was empty");
    let held = Arc::new(HeldReads::default());
    db.set_pool_read_hook(Some(held.hook(firsts.iter().map(|(p, _)| *p).collect())));
    let db = Arc::new(SharedDatabase::new(db));
    // Nine sessions each read one leaf, held: eight frames fixed fill the pool, and the
    // ninth miss finds no frame to evict.
    let seekers: Vec<_> = firsts
        .iter()
        .map(|&(_, k)| {
            let db = db.clone();
            std::thread::spawn(move || seek(&db.read().unwrap(), t, k).map(|r| r.len()))
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while held.entered.load(Ordering::SeqCst) < 9 {
        assert!(
            Instant::now() < deadline,
            "{} of nine reads began: a miss waited for a frame",
            held.entered.load(Ordering::SeqCst)
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let cached = db.read().unwrap().buffer_pool_usage().0;
    *held.released.lock().unwrap() = true;
    held.wake.notify_all();
    for s in seekers {
        assert_eq!(s.join().unwrap().unwrap(), 1, "each seek finds its key");
    }
    assert_eq!(
        cached, 9,
        "one frame over the cap of {cap}, for the ninth session"
    );
    let db = Arc::into_inner(db).unwrap().into_inner();
    db.check_pool_invariants();
    // The next miss evicts back under the cap.
    assert_eq!(seek(&db, t, 399).unwrap().len(), 1);
    let (cached, _, _) = db.buffer_pool_usage();
    assert!(
        cached <= cap,
        "{cached} pages cached after a miss, cap {cap}"
    );
}

/// Sessions of the stress test, and their keys: `k % SESSIONS == me`.
const SESSIONS: u32 = 4;
/// The table's rows at the start: about 80 leaves, five times the pool.
const START_ROWS: u32 = 2000;
const POOL_PAGES: usize = 16;

/// One session's view of its own keys, and what it did.
struct Worker<'a> {
    db: &'a SharedDatabase,
    table: u32,
    me: u32,
    rng: Rng,
    rows: BTreeMap<u32, Vec<u8>>,
    physical_reads: u64,
}

impl Worker<'_> {
    fn value(&mut self) -> Vec<u8> {
        vec![self.rng.below(256) as u8; 300]
    }

    /// One of its keys (present or not).
    fn key(&mut self) -> u32 {
        let ordinal = self.rng.below(((START_ROWS + 400) / SESSIONS) as u64) as u32;
        ordinal * SESSIONS + self.me
    }

    /// A seek of one of its keys finds exactly what it last committed.
    fn read_own(&mut self) -> Result<(), StorageError> {
        let k = self.key();
        let g = self.db.read().unwrap();
        let key = vec![Some(k.to_le_bytes().to_vec())];
        let range = KeyRange {
            lower: Bound::Included(key.clone()),
            upper: Bound::Included(key),
        };
        let chunk = g.seek_chunk(
            self.table,
            g.scan_origin(self.table)?,
            (&range, &ScanPosition::Start),
            usize::MAX,
            None,
        )?;
        self.physical_reads += chunk.reads.physical;
        let want = self.rows.get(&k).map(|v| row(k, v));
        let got = chunk.rows.first().map(|(_, r)| r.clone());
        assert_eq!(got, want, "session {}: key {k}", self.me);
        Ok(())
    }

    /// A chunk of a full scan (pages copied without caching them): keys ascend.
    fn scan_some(&mut self) -> Result<(), StorageError> {
        let g = self.db.read().unwrap();
        let origin = g.scan_origin(self.table)?;
        let chunk = g.scan_chunk(self.table, origin, &ScanPosition::Start, 64 << 10, None)?;
        self.physical_reads += chunk.reads.physical;
        let keys: Vec<u32> = chunk
            .rows
            .iter()
            .map(|(_, r)| {
                let cols = extentdb_format::record::decode(&common::LAYOUT, r).unwrap();
                u32::from_le_bytes(cols[0].unwrap().try_into().unwrap())
            })
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "a scan's keys ascend");
        Ok(())
    }

    /// Inserts, updates in place or deletes one of its keys, committed.
    fn change_own(&mut self) -> Result<(), StorageError> {
        let k = self.key();
        let new = self.value();
        let old = self.rows.get(&k).map(|v| row(k, v));
        let delete = old.is_some() && self.rng.below(3) == 0;
        let (x, _) = self.db.begin(None);
        let env = GrowthEnv::default();
        let (db, t, rec) = (self.db, self.table, row(k, &new));
        db.run(
            &env,
            |e| e,
            |held| match (&old, delete) {
                (None, _) => Ok(match held.insert_row(x, t, (&rec, &env), None)? {
                    Step::Done(_) => Step::Done(()),
                    Step::Needs(n) => Step::Needs(n),
                }),
                (Some(old), false) => {
                    let rid = (PageId::NULL, 0);
                    Ok(
                        match held.update_row_at(x, t, (rid, old), (&rec, &env), None)? {
                            Step::Done(_) => Step::Done(()),
                            Step::Needs(n) => Step::Needs(n),
                        },
                    )
                }
                (Some(old), true) => held.delete_row_at(x, t, ((PageId::NULL, 0), old)),
            },
        )?;
        db.commit(x)?;
        match delete {
            true => self.rows.remove(&k),
            false => self.rows.insert(k, new),
        };
        Ok(())
    }
}

#[test]
fn sessions_read_and_change_a_table_larger_than_the_pool() {
    let dir = fresh_dir("frames-stress");
    let fs = OsFileSystem::new();
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &spec(&dir)).unwrap();
    let t = filled_table(&mut db, "Stress", START_ROWS);
    db.checkpoint().unwrap();
    drop(db);
    let mut db = Database::open(fs.as_ref(), &dir.join("Frames.mdf")).unwrap();
    db.set_buffer_pool_pages(POOL_PAGES);
    assert_eq!(db.buffer_pool_usage().2, POOL_PAGES, "the pool was empty");
    let start: BTreeMap<u32, Vec<u8>> = (0..START_ROWS)
        .map(|k| (k, vec![(k % 251) as u8; 300]))
        .collect();
    let db = Arc::new(SharedDatabase::new(db));
    let (checkpointer, errors) = checkpointer_collecting(&db);
    let ops = if cfg!(debug_assertions) { 100 } else { 600 };
    let threads: Vec<_> = (0..SESSIONS)
        .map(|me| {
            let (db, start) = (db.clone(), start.clone());
            std::thread::spawn(move || {
                let mut w = Worker {
                    db: &db,
                    table: t,
                    me,
                    rng: Rng(0x5eed_f4a3 ^ ((u64::from(me) + 1) * 0x9E37_79B9)),
                    rows: start
                        .into_iter()
                        .filter(|(k, _)| k % SESSIONS == me)
                        .collect(),
                    physical_reads: 0,
                };
                for _ in 0..ops {
                    match w.rng.below(4) {
                        0 => w.read_own().unwrap(),
                        1 => w.scan_some().unwrap(),
                        _ => w.change_own().unwrap(),
                    }
                }
                (w.rows, w.physical_reads)
            })
        })
        .collect();
    let mut want = BTreeMap::new();
    let mut physical = 0;
    for th in threads {
        let (rows, reads) = th.join().expect("a session panicked");
        want.extend(rows);
        physical += reads;
    }
    drop(checkpointer);
    assert!(errors.lock().unwrap().is_empty(), "{:?}", errors.lock());
    let db = Arc::into_inner(db).unwrap().into_inner();
    db.check_pool_invariants();
    let (cached, _, cap) = db.buffer_pool_usage();
    eprintln!(
        "{} rows at the end; {physical} pages read from disk by the sessions' reads; \
         {cached} of {cap} pages cached",
        want.len()
    );
    assert!(cached <= cap, "{cached} pages cached in a pool of {cap}");
    assert!(
        physical > 100,
        "the sessions read pages from disk: {physical}"
    );
    assert_eq!(
        table_rows(&db, t),
        want,
        "every committed row, with its value"
    );
    assert_checkdb_clean(&db, "after the sessions");
}
