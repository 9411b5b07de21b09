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

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

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
            evictions: 0,
        }
    }

    pub fn capacity_pages(&self) -> usize {
        self.capacity_pages
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
            let page = file.read_page(pid.page)?;
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
        file.read_page(pid.page)
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
                write_back(files, wal, pid, &mut f.page)?;
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
            write_back(files, None, pid, &mut f.page)?;
            f.dirty = false;
        }
        Ok(())
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

/// Writes one page in place, the log first (invariant 1).
fn write_back(
    files: &BTreeMap<u16, DataFile>,
    wal: Option<&LogWriter>,
    pid: PageId,
    page: &mut Page,
) -> Result<(), StorageError> {
    if let Some(w) = wal {
        let lsn = page.header()?.lsn;
        if lsn > Lsn::ZERO {
            w.flush(lsn)?;
        }
    }
    let file = files
        .get(&pid.file.0)
        .ok_or_else(|| StorageError::FileNotFound(pid.file.0.to_string()))?;
    file.write_page_unlogged(PageNo(pid.page.0), page)
}
