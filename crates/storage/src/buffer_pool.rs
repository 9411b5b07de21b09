//! The buffer pool: data and index pages cached in memory under a page-count cap, changed
//! there, and written back write-ahead (the log is flushed up to a page's LSN first).
//!
//! Allocation-map pages (GAM, SGAM, PFS, IAM), the catalog and the boot pages do not pass
//! through here: they have their own write protocols (see `data_file` and `database`).
//!
//! Frame life: absent -> clean (read from disk, or installed when formatted) -> dirty
//! (changed; carries the LSN of the last change) -> clean (written back) -> absent
//! (evicted). Eviction takes the oldest unreferenced frame (second chance / clock).
//!
//! Every database has its own pool; all pools of an instance draw on one `PoolBudget`
//! (the instance's `max server memory`): a pool evicts its own pages while the instance
//! is over budget, down to a floor of `MIN_FRAMES` frames, so the instance exceeds the
//! budget by at most `MIN_FRAMES` pages per database.
//!
//! Invariants:
//! 1. A dirty page is written only after the log is durable up to the page's LSN.
//! 2. After `make_room` the pool holds fewer than `capacity_pages` frames, and fewer than
//!    `MIN_FRAMES` or the instance is within its budget.
//! 3. A page read from disk has passed `Page::verify` (checksum and its own page id).
//! 4. Writes of one page reach the file in LSN order: every write of a pool page passes the
//!    pool's `WriteGate`, and while an online checkpoint runs (it writes copies outside the
//!    database's lock, see `checkpoint`) the gate drops a copy older than one already
//!    written.
//! 5. The pool holds no page of a free extent, and no write of a page reaches the file
//!    after its extent was freed (until the page's next owner changes it): freeing an
//!    extent forgets its frames, dirty or not (`forget_freed`), and the gate drops the
//!    copies an online checkpoint took of them before. A freed extent may come back as
//!    system pages (IAM, catalog) written without the pool; a former owner's data page
//!    written there later would destroy them (CHECKDB 8946, found by the SQL fuzz test).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use extentdb_format::{Lsn, Page, PageId, PageNo};

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
    pub cap_pages: usize,
    used: AtomicUsize,
}

impl PoolBudget {
    pub fn new(cap_pages: usize) -> Arc<PoolBudget> {
        Arc::new(PoolBudget {
            cap_pages: cap_pages.max(MIN_FRAMES),
            used: AtomicUsize::new(0),
        })
    }

    /// Pages cached by all pools.
    pub fn used_pages(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn over(&self) -> bool {
        self.used_pages() >= self.cap_pages
    }
}

/// Orders the writes of pool pages (invariant 4). Inactive, it only serializes them;
/// active (during an online checkpoint), it remembers the newest LSN written per page, and
/// the pages forgotten because their extent was freed (invariant 5).
#[derive(Default)]
pub struct WriteGate {
    written: Mutex<Option<GateState>>,
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
        write()?;
        if let Some(g) = g.as_mut() {
            let e = g.written.entry(pid).or_insert(lsn);
            *e = (*e).max(lsn);
        }
        Ok(true)
    }
}

struct Frame {
    page: Page,
    dirty: bool,
    referenced: bool,
}

pub struct BufferPool {
    frames: HashMap<PageId, Frame>,
    clock: VecDeque<PageId>,
    capacity_pages: usize,
    budget: Arc<PoolBudget>,
    gate: Arc<WriteGate>,
    /// Pages written back by eviction (not by checkpoints), for tests and DMVs.
    pub evictions: u64,
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        self.budget
            .used
            .fetch_sub(self.frames.len(), Ordering::Relaxed);
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
            frames: HashMap::new(),
            clock: VecDeque::new(),
            capacity_pages,
            budget,
            gate: Arc::default(),
            evictions: 0,
        }
    }

    pub fn capacity_pages(&self) -> usize {
        self.capacity_pages
    }

    /// The budget this pool draws on.
    pub fn budget(&self) -> &Arc<PoolBudget> {
        &self.budget
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    pub fn dirty_pages(&self) -> usize {
        self.frames.values().filter(|f| f.dirty).count()
    }

    pub fn contains(&self, pid: PageId) -> bool {
        self.frames.contains_key(&pid)
    }

    /// The page, read from its file if it is not cached. Unformatted pages come back zero.
    pub fn page(
        &mut self,
        files: &BTreeMap<u16, DataFile>,
        wal: Option<&LogWriter>,
        pid: PageId,
    ) -> Result<&mut Page, StorageError> {
        if !self.frames.contains_key(&pid) {
            let file = files
                .get(&pid.file.0)
                .ok_or_else(|| StorageError::FileNotFound(pid.file.0.to_string()))?;
            let page = read_page(file, pid)?;
            self.make_room(files, wal)?;
            self.insert(pid, page);
        }
        let f = self.frames.get_mut(&pid).expect("just ensured");
        f.referenced = true;
        Ok(&mut f.page)
    }

    /// Reads a page without caching it when it is not cached already (scans of cold data
    /// would otherwise push out the working set). Returns a copy.
    pub fn peek(
        &mut self,
        files: &BTreeMap<u16, DataFile>,
        pid: PageId,
    ) -> Result<Page, StorageError> {
        if let Some(f) = self.frames.get(&pid) {
            return Ok(f.page.clone());
        }
        let file = files
            .get(&pid.file.0)
            .ok_or_else(|| StorageError::FileNotFound(pid.file.0.to_string()))?;
        read_page(file, pid)
    }

    /// A copy of the page if it is cached, and whether it is dirty; never reads the disk.
    pub fn cached(&self, pid: PageId) -> Option<(Page, bool)> {
        self.frames.get(&pid).map(|f| (f.page.clone(), f.dirty))
    }

    /// Puts a page whose whole content is known (newly formatted, or a logged image) into
    /// the pool without reading the disk, dirty.
    pub fn install(
        &mut self,
        files: &BTreeMap<u16, DataFile>,
        wal: Option<&LogWriter>,
        pid: PageId,
        page: Page,
    ) -> Result<(), StorageError> {
        if let Some(f) = self.frames.get_mut(&pid) {
            f.page = page;
            f.dirty = true;
            f.referenced = true;
            return Ok(());
        }
        self.make_room(files, wal)?;
        self.insert(pid, page);
        self.frames.get_mut(&pid).expect("inserted").dirty = true;
        Ok(())
    }

    /// Marks a cached page changed; its header LSN must already be the change's LSN.
    pub fn mark_dirty(&mut self, pid: PageId) {
        let f = self
            .frames
            .get_mut(&pid)
            .expect("a page is changed only while cached");
        f.dirty = true;
    }

    fn insert(&mut self, pid: PageId, page: Page) {
        self.budget.used.fetch_add(1, Ordering::Relaxed);
        self.frames.insert(
            pid,
            Frame {
                page,
                dirty: false,
                referenced: true,
            },
        );
        self.clock.push_back(pid);
    }

    /// Evicts until one more frame fits under the cap (invariant 2).
    fn make_room(
        &mut self,
        files: &BTreeMap<u16, DataFile>,
        wal: Option<&LogWriter>,
    ) -> Result<(), StorageError> {
        let mut spins = 0usize;
        while self.frames.len() >= self.capacity_pages
            || (self.budget.over() && self.frames.len() >= MIN_FRAMES)
        {
            let Some(pid) = self.clock.pop_front() else {
                break;
            };
            let Some(f) = self.frames.get_mut(&pid) else {
                continue;
            };
            if f.referenced && spins < 2 * self.capacity_pages {
                f.referenced = false;
                spins += 1;
                self.clock.push_back(pid);
                continue;
            }
            if f.dirty {
                write_back(files, wal, &self.gate, pid, &mut f.page)?;
                self.evictions += 1;
            }
            self.frames.remove(&pid);
            self.budget.used.fetch_sub(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Writes every dirty page back (write-ahead) without syncing the files; the caller
    /// syncs. Used by checkpoints.
    pub fn flush_all(
        &mut self,
        files: &BTreeMap<u16, DataFile>,
        wal: Option<&LogWriter>,
    ) -> Result<(), StorageError> {
        let max_lsn = self
            .frames
            .values()
            .filter(|f| f.dirty)
            .filter_map(|f| f.page.header().ok().map(|h| h.lsn))
            .max();
        if let (Some(w), Some(lsn)) = (wal, max_lsn) {
            if lsn > Lsn::ZERO {
                w.flush(lsn)?;
            }
        }
        let mut dirty: Vec<PageId> = self
            .frames
            .iter()
            .filter(|(_, f)| f.dirty)
            .map(|(p, _)| *p)
            .collect();
        dirty.sort();
        for pid in dirty {
            let f = self.frames.get_mut(&pid).expect("listed");
            write_back(files, None, &self.gate, pid, &mut f.page)?;
            f.dirty = false;
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
            .frames
            .iter()
            .filter(|(_, f)| f.dirty)
            .map(|(p, _)| *p)
            .collect();
        v.sort();
        v
    }

    /// A sealed copy of a cached dirty page and its LSN, for writing outside the lock.
    pub(crate) fn dirty_copy(&self, pid: PageId) -> Option<(Page, Lsn)> {
        let f = self.frames.get(&pid).filter(|f| f.dirty)?;
        let mut p = f.page.clone();
        let lsn = p.header().ok()?.lsn;
        p.seal();
        Some((p, lsn))
    }

    /// Marks a page clean after a copy with `lsn` was written, unless it changed since.
    pub(crate) fn mark_clean_if(&mut self, pid: PageId, lsn: Lsn) {
        if let Some(f) = self.frames.get_mut(&pid) {
            if f.dirty && f.page.header().ok().map(|h| h.lsn) == Some(lsn) {
                f.dirty = false;
            }
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
        let before = self.frames.len();
        self.frames.retain(|pid, f| {
            debug_assert!(
                !gone(pid) || !f.dirty,
                "a dirty page of space being removed"
            );
            !gone(pid)
        });
        self.clock.retain(|pid| !gone(pid));
        self.budget
            .used
            .fetch_sub(before - self.frames.len(), Ordering::Relaxed);
    }

    /// Forgets the cached pages `first..first + count` of file `file_id`, dirty or not: their
    /// extent was just freed, when the log ended at `end` (invariant 5). The gate drops
    /// copies of them an online checkpoint took before.
    pub(crate) fn forget_freed(&mut self, file_id: u16, first: u32, count: u32, end: Lsn) {
        let gone =
            |pid: &PageId| pid.file.0 == file_id && (first..first + count).contains(&pid.page.0);
        for page in first..first + count {
            self.gate.forget(PageId::new(file_id, page), end);
        }
        let before = self.frames.len();
        self.frames.retain(|pid, _| !gone(pid));
        if self.frames.len() != before {
            self.clock.retain(|pid| !gone(pid));
            self.budget
                .used
                .fetch_sub(before - self.frames.len(), Ordering::Relaxed);
        }
    }

    /// Forgets every cached page (after a failed write the pool may not match the disk).
    pub fn clear(&mut self) {
        self.budget
            .used
            .fetch_sub(self.frames.len(), Ordering::Relaxed);
        self.frames.clear();
        self.clock.clear();
    }
}

/// Writes one page in place, the log first (invariant 1), through the gate (invariant 4).
/// A page read from its file: a PAGEIOLATCH_SH wait (waits.rs).
fn read_page(file: &DataFile, pid: PageId) -> Result<Page, StorageError> {
    crate::waits::timed(crate::waits::WaitType::PageIoLatchSh, || {
        file.read_page(pid.page)
    })
}

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
