//! The buffer pool: data and index pages cached in memory under a page-count cap, changed
//! there, and written back write-ahead (the log is flushed up to a page's LSN first).
//!
//! Allocation-map pages (GAM, SGAM, PFS, IAM), the catalog and the boot pages do not pass
//! through here: they have their own write protocols (see `data_file` and `database`).
//!
//! Frame life: absent -> reading (a miss inserted it, latched EX by the reader) -> clean
//! (read, or installed when formatted) -> dirty (changed; carries the LSN of the last
//! change) -> writing (an eviction's victim, latched SH by its writer) -> clean or absent
//! (evicted). A read that fails takes its frame out again. Eviction takes the oldest
//! unfixed, unreferenced frame (second chance / clock). The frame itself, its latch and
//! its fixes are `buffer_frame`'s.
//!
//! Latches: the map (page id -> frame, the clock) is behind one short latch, held only to
//! look up, insert or remove frames and to pick a victim, never across I/O or while
//! waiting for a frame; each frame has its own reader-writer latch over its page. So a
//! page read from disk, and a dirty victim's write-back with the log flush before it, hold
//! only that frame's latch: other sessions go on with other pages. Order: a frame latch,
//! then the map latch (the reader of a page whose read failed takes its frame out holding
//! its latch); the map latch is never held while waiting for a frame latch (only `try`
//! there), and a thread waits for a frame latch holding no other (buffer_frame.rs
//! invariant 1). A path holding the pool
//! exclusively (`&mut self`: open, recovery, DDL) reaches pages with no latch at all.
//!
//! Every database has its own pool; all pools of an instance draw on one `PoolBudget`
//! (the instance's `max server memory`): a pool evicts its own pages while the instance
//! is over budget, down to a floor of `MIN_FRAMES` frames, so the instance exceeds the
//! budget by at most `MIN_FRAMES` pages per database (and by invariant 2's exception).
//!
//! Invariants:
//! 1. A dirty page is written only after the log is durable up to the page's LSN.
//! 2. A frame is inserted only after evicting until the pool holds fewer than
//!    `capacity_pages` frames, and fewer than `MIN_FRAMES` or the instance is within its
//!    budget; except when every frame the pool holds is fixed (each session inside the
//!    pool fixes at most one frame at a time, buffer_frame.rs invariant 4), so the pool
//!    exceeds that by at most the number of sessions inside it at once. Asserted where it
//!    goes over: the fixes held when the look for a victim began are at least the frames
//!    held.
//! 3. A page read from disk has passed `Page::verify` (checksum and its own page id);
//!    sessions that waited for a read that failed get its error (buffer_frame.rs
//!    invariant 2), and the frame leaves the map before its latch is released.
//! 4. Writes of one page reach the file in LSN order: every write of a pool page passes the
//!    pool's `WriteGate`, and while an online checkpoint runs (it writes copies outside the
//!    database's lock, see `checkpoint`) the gate drops a copy older than one already
//!    written. An eviction writes a page holding its latch SH, so no change comes between
//!    the copy written and the page marked clean.
//! 5. The pool holds no page of a free extent, and no write of a page reaches the file
//!    after its extent was freed (until the page's next owner changes it): freeing an
//!    extent forgets its frames, dirty or not (`forget_freed`), waits for a write-back in
//!    progress on them (it takes their latches EX after taking them out of the map), and
//!    the gate drops the copies an online checkpoint took of them before. A freed extent
//!    may come back as system pages (IAM, catalog) written without the pool; a former
//!    owner's data page written there later would destroy them (CHECKDB 8946, found by the
//!    SQL fuzz test).
//! 6. The clock holds the page id of every frame in the map once, except the victims being
//!    written back (`writing` of them): `clock.len() + writing == frames.len()`.
//! 7. A frame in the map with no fix is latched by nobody: fixes grow only under the map
//!    latch, and a session latches a frame only while it holds a fix on it. So a victim
//!    chosen unfixed under the map latch is in nobody's hands.
//! 8. `budget.used` counts the frames in the maps of the pools drawing on it: whoever
//!    takes a frame out of the map (eviction, a failed read, a forget) subtracts it, once.
//! 9. A victim written back is removed only if nobody fixed it meanwhile (it is clean,
//!    invariant 4, and stays cached for its new user otherwise).
//!
//! Not done here: read-ahead, and waiting for a free frame (invariant 2 goes over instead).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use extentdb_format::{Lsn, Page, PageId, PageNo};

use crate::buffer_frame::{Fix, Frame, PageMut, IO_NONE, IO_READ, IO_WRITE};
use crate::data_file::DataFile;
use crate::log_writer::LogWriter;
use crate::StorageError;

/// Default cap: 256 MB of pages.
pub const DEFAULT_CAPACITY_PAGES: usize = 32_768;
/// Frames a pool keeps whatever the instance's budget says.
pub const MIN_FRAMES: usize = 8;

/// The pages all pools of an instance may cache together, and how many they hold.
#[derive(Debug)]
pub struct PoolBudget {
    /// The cap, changed by RECONFIGURE of 'max server memory (MB)': pools drawing on the
    /// budget evict down to a lower cap as they next take a frame (invariant 2).
    cap_pages: AtomicUsize,
    used: AtomicUsize,
}

impl PoolBudget {
    pub fn new(cap_pages: usize) -> Arc<PoolBudget> {
        Arc::new(PoolBudget {
            cap_pages: AtomicUsize::new(cap_pages.max(MIN_FRAMES)),
            used: AtomicUsize::new(0),
        })
    }

    /// The pages all pools may cache together now.
    pub fn cap_pages(&self) -> usize {
        self.cap_pages.load(Ordering::Relaxed)
    }

    /// A new cap (at least `MIN_FRAMES`).
    pub fn set_cap_pages(&self, cap_pages: usize) {
        self.cap_pages
            .store(cap_pages.max(MIN_FRAMES), Ordering::Relaxed);
    }

    /// Pages cached by all pools.
    pub fn used_pages(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn over(&self) -> bool {
        self.used_pages() >= self.cap_pages()
    }
}

/// Orders the writes of pool pages (invariant 4). Inactive, it only serializes them;
/// active (during an online checkpoint), it remembers the newest LSN written per page, and
/// the pages forgotten because their extent was freed (invariant 5). It also counts the
/// writes begun and ended, so that a read of an uncached page can tell whether a write may
/// have overlapped it (`peek`).
#[derive(Default)]
pub struct WriteGate {
    written: Mutex<Option<GateState>>,
    begun: AtomicU64,
    ended: AtomicU64,
}

#[derive(Default)]
struct GateState {
    /// The newest LSN written per page since the gate started.
    written: HashMap<PageId, Lsn>,
    /// Pages of freed extents, with the end of the log at the free: a copy of such a page
    /// older than that is a former owner's and is never written.
    forgotten: HashMap<PageId, Lsn>,
}

impl WriteGate {
    pub(crate) fn start(&self) {
        *self.written.lock().unwrap() = Some(GateState::default());
    }

    pub(crate) fn stop(&self) {
        *self.written.lock().unwrap() = None;
    }

    /// The number of writes begun when none is in progress (else None): a read that
    /// starts then and finds the same number when it ends overlapped no write.
    fn quiet(&self) -> Option<u64> {
        let ended = self.ended.load(Ordering::SeqCst);
        let begun = self.begun.load(Ordering::SeqCst);
        (begun == ended).then_some(begun)
    }

    /// Whether a write began since `quiet` returned `mark`.
    fn wrote_since(&self, mark: Option<u64>) -> bool {
        mark != Some(self.begun.load(Ordering::SeqCst))
    }

    /// Records that `pid`'s extent was freed when the log ended at `end`: copies of the
    /// page taken before (an online checkpoint's) are dropped (invariant 5).
    fn forget(&self, pid: PageId, end: Lsn) {
        if let Some(g) = self.written.lock().unwrap().as_mut() {
            let e = g.forgotten.entry(pid).or_insert(end);
            *e = (*e).max(end);
        }
    }

    /// Runs `write` (one page's write) under the gate and records its LSN. With
    /// `only_if_newer`, skips the write (returns false) when a version at least as new was
    /// written since the gate started, or the copy is older than the free of the page's
    /// extent.
    pub(crate) fn write(
        &self,
        pid: PageId,
        lsn: Lsn,
        only_if_newer: bool,
        write: impl FnOnce() -> Result<(), StorageError>,
    ) -> Result<bool, StorageError> {
        let mut g = self.written.lock().unwrap();
        if only_if_newer {
            if let Some(g) = g.as_ref() {
                if g.written.get(&pid).is_some_and(|done| *done >= lsn)
                    || g.forgotten.get(&pid).is_some_and(|end| lsn < *end)
                {
                    return Ok(false);
                }
            }
        }
        self.begun.fetch_add(1, Ordering::SeqCst);
        let done = write();
        self.ended.fetch_add(1, Ordering::SeqCst);
        done?;
        if let Some(g) = g.as_mut() {
            let e = g.written.entry(pid).or_insert(lsn);
            *e = (*e).max(lsn);
        }
        Ok(true)
    }
}

/// What the map latch guards: the frames by page, and the clock over them (invariant 6).
#[derive(Default)]
struct FrameMap {
    frames: HashMap<PageId, Arc<Frame>>,
    clock: VecDeque<PageId>,
    /// Victims being written back: in `frames`, out of `clock`.
    writing: usize,
}

/// A test's hook, called at the start of every page read from disk (outside every latch
/// but the reading frame's).
pub type ReadHook = Arc<dyn Fn(PageId) + Send + Sync>;

pub struct BufferPool {
    map: Mutex<FrameMap>,
    capacity_pages: usize,
    budget: Arc<PoolBudget>,
    gate: Arc<WriteGate>,
    /// Pages written back by eviction (not by checkpoints), for tests and DMVs.
    evictions: AtomicU64,
    /// Fixes held now, on all frames (buffer_frame.rs invariant 4).
    fixes_held: AtomicUsize,
    read_hook: Option<ReadHook>,
}

/// A page's place in the pool, looked up with room made for it when absent.
enum Slot<'a> {
    Cached(Fix<'a>),
    /// Not cached; the map latch is held and a frame may be inserted (invariant 2).
    Vacant(MutexGuard<'a, FrameMap>),
}

/// What one look at the clock found.
enum Victim<'a> {
    /// A clean frame, already out of the map.
    Evicted,
    /// A dirty frame, fixed by the evictor and out of the clock, to write back.
    Dirty(Fix<'a>),
    /// Every frame is fixed.
    None,
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        let held = self
            .map
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .frames
            .len();
        self.budget.used.fetch_sub(held, Ordering::Relaxed);
    }
}

impl BufferPool {
    /// A pool of its own budget (tests, tools).
    pub fn new(capacity_pages: usize) -> BufferPool {
        BufferPool::with_budget(capacity_pages, PoolBudget::new(capacity_pages))
    }

    /// A pool drawing on an instance's budget.
    pub fn with_budget(capacity_pages: usize, budget: Arc<PoolBudget>) -> BufferPool {
        assert!(
            capacity_pages >= MIN_FRAMES,
            "a pool needs room for a few pages"
        );
        BufferPool {
            map: Mutex::default(),
            capacity_pages,
            budget,
            gate: Arc::default(),
            evictions: AtomicU64::new(0),
            fixes_held: AtomicUsize::new(0),
            read_hook: None,
        }
    }

    #[doc(hidden)]
    pub fn set_read_hook(&mut self, hook: Option<ReadHook>) {
        self.read_hook = hook;
    }

    /// The pool's own cap, and never more than its budget's cap now.
    pub fn capacity_pages(&self) -> usize {
        self.capacity_pages.min(self.budget.cap_pages())
    }

    /// The budget this pool draws on.
    pub fn budget(&self) -> &Arc<PoolBudget> {
        &self.budget
    }

    /// Pages written back by eviction.
    pub fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }

    /// The map, latched: briefly, never across I/O (module docs).
    fn map(&self) -> MutexGuard<'_, FrameMap> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The map, for a path holding the pool exclusively.
    fn map_mut(&mut self) -> &mut FrameMap {
        self.map.get_mut().unwrap_or_else(|e| e.into_inner())
    }

    pub fn len(&self) -> usize {
        self.map().frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn dirty_pages(&self) -> usize {
        let map = self.map();
        map.frames
            .values()
            .filter(|f| f.dirty.load(Ordering::Acquire))
            .count()
    }

    pub fn contains(&self, pid: PageId) -> bool {
        self.map().frames.contains_key(&pid)
    }

    /// Sessions using page `pid`'s frame now (None when it is not cached): for tests that
    /// hold a read and wait for others to queue behind it.
    #[doc(hidden)]
    pub fn fixes(&self, pid: PageId) -> Option<usize> {
        let map = self.map();
        map.frames
            .get(&pid)
            .map(|f| f.fixes.load(Ordering::Acquire))
    }

    /// Asserts invariants 6, 7 and 8 (the last for a pool alone on its budget).
    pub fn check_invariants(&self) {
        let map = self.map();
        assert_eq!(
            map.clock.len() + map.writing,
            map.frames.len(),
            "invariant 6: the clock and the victims being written cover the map"
        );
        for pid in &map.clock {
            let f = map
                .frames
                .get(pid)
                .expect("invariant 6: a clock entry is cached");
            if f.fixes.load(Ordering::Acquire) == 0 {
                assert!(
                    !f.is_latched(),
                    "invariant 7: unfixed frame {pid} is latched"
                );
            }
        }
        assert!(
            self.budget.used_pages() >= map.frames.len(),
            "invariant 8: the budget counts every frame"
        );
    }

    /// `f` of the page, latched SH, read from its file if it is not cached (a miss).
    /// Unformatted pages come back zero. `f` must not use the pool.
    pub fn with_page<R>(
        &self,
        files: &BTreeMap<u16, DataFile>,
        wal: Option<&LogWriter>,
        pid: PageId,
        f: impl FnOnce(&Page) -> R,
    ) -> Result<R, StorageError> {
        let fix = self.fix(files, wal, pid)?;
        let page = fix.sh()?;
        Ok(f(&page))
    }

    /// `f` of the page, latched EX, read from its file if it is not cached; `f` marks it
    /// dirty when it changes it. `f` must not use the pool.
    pub fn with_page_mut<R>(
        &self,
        files: &BTreeMap<u16, DataFile>,
        wal: Option<&LogWriter>,
        pid: PageId,
        f: impl FnOnce(&mut PageMut<'_>) -> Result<R, StorageError>,
    ) -> Result<R, StorageError> {
        let fix = self.fix(files, wal, pid)?;
        let mut page = fix.ex()?;
        f(&mut PageMut::new(&mut page, &fix.frame().dirty))
    }

    /// The page, read from its file if it is not cached, for a path holding the pool
    /// exclusively: no latch taken on a hit.
    pub fn page(
        &mut self,
        files: &BTreeMap<u16, DataFile>,
        wal: Option<&LogWriter>,
        pid: PageId,
    ) -> Result<&mut Page, StorageError> {
        if !self.map_mut().frames.contains_key(&pid) {
            drop(self.fix(files, wal, pid)?);
        }
        let f = self.frame_mut(pid).expect("just cached");
        *f.referenced.get_mut() = true;
        Ok(f.page_mut())
    }

    /// Page `pid`'s frame, for a path holding the pool exclusively.
    fn frame_mut(&mut self, pid: PageId) -> Option<&mut Frame> {
        let arc = self.map_mut().frames.get_mut(&pid)?;
        Some(
            Arc::get_mut(arc).expect("no session fixes a frame while the pool is held exclusively"),
        )
    }

    /// Marks a cached page changed, holding the pool exclusively; its header LSN must
    /// already be the change's LSN.
    pub fn mark_dirty(&mut self, pid: PageId) {
        let f = self
            .frame_mut(pid)
            .expect("a page is changed only while cached");
        *f.dirty.get_mut() = true;
    }

    /// A copy of the page; read without caching it when it is not cached already (scans
    /// of cold data would otherwise push out the working set).
    ///
    /// Such a read holds no latch, so the page may be cached, changed, evicted and written
    /// back while it runs: a read that fails verification while a write may have
    /// overlapped it (a torn read of a page being written) looks again, a few times.
    pub fn peek(&self, files: &BTreeMap<u16, DataFile>, pid: PageId) -> Result<Page, StorageError> {
        let mut tries = 0;
        loop {
            let fix = self
                .map()
                .frames
                .get(&pid)
                .map(|f| Fix::take(f, &self.fixes_held));
            if let Some(fix) = fix {
                return Ok(fix.sh()?.clone());
            }
            let quiet = self.gate.quiet();
            let read = self.read(files, pid);
            tries += 1;
            match read {
                Err(StorageError::Format(_)) if tries < 4 && self.gate.wrote_since(quiet) => {}
                read => return read,
            }
        }
    }

    /// A fix of the page's frame if it is cached; never reads the disk.
    fn fix_cached(&self, pid: PageId) -> Option<Fix<'_>> {
        self.map()
            .frames
            .get(&pid)
            .map(|f| Fix::take(f, &self.fixes_held))
    }

    /// A copy of the page if it is cached, and whether it is dirty; never reads the disk.
    pub fn cached(&self, pid: PageId) -> Option<(Page, bool)> {
        let fix = self.fix_cached(pid)?;
        let page = fix.sh().ok()?;
        Some((page.clone(), fix.frame().dirty.load(Ordering::Acquire)))
    }

    /// Puts a page whose whole content is known (newly formatted, or a logged image) into
    /// the pool without reading the disk, dirty.
    pub fn install(
        &self,
        files: &BTreeMap<u16, DataFile>,
        wal: Option<&LogWriter>,
        pid: PageId,
        page: Page,
    ) -> Result<(), StorageError> {
        loop {
            match self.slot(files, wal, pid)? {
                Slot::Cached(fix) => {
                    // A frame whose read failed is out of the map: look again.
                    let Ok(mut p) = fix.ex() else { continue };
                    *p = page;
                    fix.frame().dirty.store(true, Ordering::Release);
                    return Ok(());
                }
                Slot::Vacant(mut map) => {
                    let frame = Frame::new(pid, page, true, IO_NONE);
                    self.insert(&mut map, Arc::new(frame));
                    return Ok(());
                }
            }
        }
    }

    /// A fix on page `pid`'s frame, reading the page on a miss: the new frame goes into
    /// the map latched EX, and the read happens with only that latch held.
    fn fix(
        &self,
        files: &BTreeMap<u16, DataFile>,
        wal: Option<&LogWriter>,
        pid: PageId,
    ) -> Result<Fix<'_>, StorageError> {
        let mut map = match self.slot(files, wal, pid)? {
            Slot::Cached(fix) => return Ok(fix),
            Slot::Vacant(map) => map,
        };
        let frame = Arc::new(Frame::new(pid, Page::zeroed(), false, IO_READ));
        let mut latched = frame.ex_new();
        let fix = Fix::take(&frame, &self.fixes_held);
        self.insert(&mut map, frame.clone());
        drop(map);
        match self.read(files, pid) {
            Ok(page) => {
                *latched = page;
                frame.io.store(IO_NONE, Ordering::Release);
                Ok(fix)
            }
            Err(e) => {
                // Invariant 3: out of the map, the error left for the waiters, then
                // the latch released.
                frame.fail(&e);
                self.remove_if_mapped(&mut self.map(), &frame);
                frame.io.store(IO_NONE, Ordering::Release);
                drop(latched);
                Err(e)
            }
        }
    }

    /// Page `pid`'s frame fixed if cached, else the map latched with room made for one
    /// more frame (invariant 2).
    fn slot(
        &self,
        files: &BTreeMap<u16, DataFile>,
        wal: Option<&LogWriter>,
        pid: PageId,
    ) -> Result<Slot<'_>, StorageError> {
        if !files.contains_key(&pid.file.0) {
            return Err(StorageError::FileNotFound(pid.file.0.to_string()));
        }
        let mut map = self.map();
        loop {
            if let Some(f) = map.frames.get(&pid) {
                return Ok(Slot::Cached(Fix::take(f, &self.fixes_held)));
            }
            if !self.over(&map) {
                return Ok(Slot::Vacant(map));
            }
            match self.pick_victim(&mut map) {
                Victim::Evicted => {}
                Victim::None => return Ok(Slot::Vacant(map)),
                Victim::Dirty(victim) => {
                    drop(map);
                    let written = self.write_victim(files, wal, &victim);
                    map = self.map();
                    self.end_write(&mut map, victim, written.is_ok());
                    written?;
                }
            }
        }
    }

    /// Whether one more frame would put the pool over its cap or its instance over budget.
    fn over(&self, map: &FrameMap) -> bool {
        map.frames.len() >= self.capacity_pages()
            || (self.budget.over() && map.frames.len() >= MIN_FRAMES)
    }

    fn insert(&self, map: &mut FrameMap, frame: Arc<Frame>) {
        let pid = frame.pid;
        self.budget.used.fetch_add(1, Ordering::Relaxed);
        map.clock.push_back(pid);
        let old = map.frames.insert(pid, frame);
        assert!(old.is_none(), "frame {pid} inserted twice");
    }

    /// The clock's next victim: an unfixed frame (so unlatched, invariant 7) not
    /// referenced since the clock last passed it. A clean one is evicted at once. None
    /// when every frame is fixed (invariant 2).
    fn pick_victim(&self, map: &mut FrameMap) -> Victim<'_> {
        // Fixes held when the look starts: no fix is added meanwhile (the map latch).
        let held = self.fixes_held.load(Ordering::Acquire);
        // Two rounds: the first clears the references, the second finds a victim unless
        // each frame is fixed when it is passed (and so was when the look started).
        for _ in 0..2 * map.clock.len() {
            let pid = map.clock.pop_front().expect("counted");
            let f = map.frames.get(&pid).expect("invariant 6");
            let fixed = f.fixes.load(Ordering::Acquire) > 0;
            let referenced = f.referenced.swap(false, Ordering::Relaxed);
            if fixed || referenced {
                map.clock.push_back(pid);
                continue;
            }
            assert!(
                !f.is_latched(),
                "invariant 7: unfixed frame {pid} is latched"
            );
            if f.dirty.load(Ordering::Acquire) {
                let fix = Fix::take(f, &self.fixes_held);
                map.writing += 1;
                return Victim::Dirty(fix);
            }
            map.frames.remove(&pid);
            self.budget.used.fetch_sub(1, Ordering::Relaxed);
            return Victim::Evicted;
        }
        assert!(
            held >= map.frames.len(),
            "invariant 2: over the cap with {} frames and {held} fixes",
            map.frames.len()
        );
        Victim::None
    }

    /// Writes a dirty victim back (write-ahead, through the gate) holding its latch SH,
    /// then marks it clean (invariant 4). Holds no map latch.
    fn write_victim(
        &self,
        files: &BTreeMap<u16, DataFile>,
        wal: Option<&LogWriter>,
        victim: &Fix,
    ) -> Result<(), StorageError> {
        let frame = victim.frame();
        let page = victim.sh()?;
        frame.io.store(IO_WRITE, Ordering::Release);
        if !frame.dirty.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut copy = page.clone();
        write_back(files, wal, &self.gate, frame.pid, &mut copy)?;
        frame.dirty.store(false, Ordering::Release);
        self.evictions.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Ends a victim's write-back under the map latch: removed when it was written and
    /// nobody fixed it meanwhile (invariant 9), else back on the clock (unless a forget
    /// took it out of the map meanwhile).
    fn end_write(&self, map: &mut FrameMap, victim: Fix<'_>, written: bool) {
        map.writing -= 1;
        let frame = victim.frame().clone();
        frame.io.store(IO_NONE, Ordering::Release);
        let mapped = map
            .frames
            .get(&frame.pid)
            .is_some_and(|f| Arc::ptr_eq(f, &frame));
        if !mapped {
            return;
        }
        let alone = frame.fixes.load(Ordering::Acquire) == 1;
        if written && alone && !frame.dirty.load(Ordering::Acquire) {
            map.frames.remove(&frame.pid);
            self.budget.used.fetch_sub(1, Ordering::Relaxed);
        } else {
            map.clock.push_back(frame.pid);
        }
        drop(victim);
    }

    /// Takes `frame` out of the map if it is still there (a failed read).
    fn remove_if_mapped(&self, map: &mut FrameMap, frame: &Arc<Frame>) {
        if map
            .frames
            .get(&frame.pid)
            .is_some_and(|f| Arc::ptr_eq(f, frame))
        {
            map.frames.remove(&frame.pid);
            map.clock.retain(|p| *p != frame.pid);
            self.budget.used.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Reads a page from its file (a PAGEIOLATCH_SH wait for the reader, waits.rs).
    fn read(&self, files: &BTreeMap<u16, DataFile>, pid: PageId) -> Result<Page, StorageError> {
        let file = files
            .get(&pid.file.0)
            .ok_or_else(|| StorageError::FileNotFound(pid.file.0.to_string()))?;
        if let Some(hook) = &self.read_hook {
            hook(pid);
        }
        crate::waits::timed(crate::waits::WaitType::PageIoLatchSh, || {
            file.read_page(pid.page)
        })
    }

    /// Writes every dirty page back (write-ahead) without syncing the files; the caller
    /// syncs. Used by checkpoints, holding the pool exclusively.
    pub fn flush_all(
        &mut self,
        files: &BTreeMap<u16, DataFile>,
        wal: Option<&LogWriter>,
    ) -> Result<(), StorageError> {
        let dirty = self.dirty_pids();
        let max_lsn = dirty
            .iter()
            .filter_map(|pid| {
                self.frame_mut(*pid)?
                    .page_mut()
                    .header()
                    .ok()
                    .map(|h| h.lsn)
            })
            .max();
        if let (Some(w), Some(lsn)) = (wal, max_lsn) {
            if lsn > Lsn::ZERO {
                w.flush(lsn)?;
            }
        }
        let gate = self.gate.clone();
        for pid in dirty {
            let f = self.frame_mut(pid).expect("listed");
            write_back(files, None, &gate, pid, f.page_mut())?;
            *f.dirty.get_mut() = false;
        }
        Ok(())
    }

    /// The gate every write of this pool's pages passes (invariant 4).
    pub(crate) fn gate(&self) -> Arc<WriteGate> {
        self.gate.clone()
    }

    /// The dirty pages, in page order (an online checkpoint's work list).
    pub(crate) fn dirty_pids(&self) -> Vec<PageId> {
        let mut v: Vec<PageId> = self
            .map()
            .frames
            .values()
            .filter(|f| f.dirty.load(Ordering::Acquire))
            .map(|f| f.pid)
            .collect();
        v.sort();
        v
    }

    /// A sealed copy of a cached dirty page and its LSN, for writing outside the lock.
    pub(crate) fn dirty_copy(&self, pid: PageId) -> Option<(Page, Lsn)> {
        let fix = self.fix_cached(pid)?;
        let page = fix.sh().ok()?;
        if !fix.frame().dirty.load(Ordering::Acquire) {
            return None;
        }
        let mut p = page.clone();
        let lsn = p.header().ok()?.lsn;
        p.seal();
        Some((p, lsn))
    }

    /// Marks a page clean after a copy with `lsn` was written, unless it changed since
    /// (holding the latch SH: no change comes meanwhile).
    pub(crate) fn mark_clean_if(&self, pid: PageId, lsn: Lsn) {
        let Some(fix) = self
            .map()
            .frames
            .get(&pid)
            .map(|f| Fix::take(f, &self.fixes_held))
        else {
            return;
        };
        let Ok(page) = fix.sh() else { return };
        if page.header().ok().map(|h| h.lsn) == Some(lsn) {
            fix.frame().dirty.store(false, Ordering::Release);
        }
    }

    /// Forgets the cached pages of a file about to be removed (clean after a checkpoint).
    pub(crate) fn forget_file(&mut self, file_id: u16) {
        self.forget_file_from(file_id, 0);
    }

    /// Forgets the cached pages of a file from page `from` on (the file is being cut back
    /// there; clean after a checkpoint).
    pub(crate) fn forget_file_from(&mut self, file_id: u16, from: u32) {
        let gone = |pid: &PageId| pid.file.0 == file_id && pid.page.0 >= from;
        let map = self.map.get_mut().unwrap_or_else(|e| e.into_inner());
        let before = map.frames.len();
        map.frames.retain(|pid, f| {
            debug_assert!(
                !gone(pid) || !f.dirty.load(Ordering::Relaxed),
                "a dirty page of space being removed"
            );
            !gone(pid)
        });
        map.clock.retain(|pid| !gone(pid));
        let removed = before - map.frames.len();
        self.budget.used.fetch_sub(removed, Ordering::Relaxed);
    }

    /// Forgets the cached pages `first..first + count` of file `file_id`, dirty or not: their
    /// extent was just freed, when the log ended at `end` (invariant 5). The gate drops
    /// copies of them an online checkpoint took before; a write-back of one in progress
    /// ends before this returns.
    pub(crate) fn forget_freed(&self, file_id: u16, first: u32, count: u32, end: Lsn) {
        for page in first..first + count {
            self.gate.forget(PageId::new(file_id, page), end);
        }
        let mut gone = Vec::new();
        {
            let mut map = self.map();
            for page in first..first + count {
                if let Some(f) = map.frames.remove(&PageId::new(file_id, page)) {
                    gone.push(f);
                }
            }
            if !gone.is_empty() {
                map.clock.retain(|pid| !gone.iter().any(|f| f.pid == *pid));
                self.budget.used.fetch_sub(gone.len(), Ordering::Relaxed);
            }
        }
        // Out of the map, each is waited for: an evictor writing it holds its latch.
        for f in gone {
            drop(Fix::take(&f, &self.fixes_held).ex());
        }
    }

    /// Forgets every cached page (after a failed write the pool may not match the disk).
    pub fn clear(&mut self) {
        let map = self.map.get_mut().unwrap_or_else(|e| e.into_inner());
        self.budget
            .used
            .fetch_sub(map.frames.len(), Ordering::Relaxed);
        map.frames.clear();
        map.clock.clear();
        assert_eq!(map.writing, 0, "no write-back while held exclusively");
    }
}

/// Writes one page in place, the log first (invariant 1), through the gate (invariant 4).
fn write_back(
    files: &BTreeMap<u16, DataFile>,
    wal: Option<&LogWriter>,
    gate: &WriteGate,
    pid: PageId,
    page: &mut Page,
) -> Result<(), StorageError> {
    let lsn = page.header()?.lsn;
    if let Some(w) = wal {
        if lsn > Lsn::ZERO {
            w.flush(lsn)?;
        }
    }
    let file = files
        .get(&pid.file.0)
        .ok_or_else(|| StorageError::FileNotFound(pid.file.0.to_string()))?;
    gate.write(pid, lsn, false, || {
        file.write_page_unlogged(PageNo(pid.page.0), page)
    })?;
    Ok(())
}
