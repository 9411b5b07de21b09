//! A data file: page I/O with verification, formatting of new space (file header, PFS,
//! GAM, SGAM, DCM, BCM), and extent allocation and deallocation through GAM and IAM.
//!
//! Invariants:
//! 1. An extent is usable only when all 8 of its pages lie inside the file and it holds no
//!    fixed page (`layout::is_reserved_extent`).
//! 2. A usable extent is GAM-free (bit 1) or owned by exactly one IAM page; never both.
//! 3. Allocation order without the log: GAM is written before IAM, so a crash in between
//!    leaks an extent (CHECKDB 8905) but can never hand one extent out twice.
//! 4. With the database shared (`&self`), a file's GAM bits, PFS bytes and the IAM bits of
//!    its extents change only under the file's allocation lock (`AllocCache::allocation_lock`);
//!    with it held exclusively (`&mut`) no lock is needed. A cached allocation page is never
//!    replaced by an older copy (a read racing a change keeps the change; write-backs of one
//!    file run one at a time).
//! 5. RESTORE LOG's roll forward formats a growth's new space as redo (`format_new_space_redo`,
//!    recovery.rs invariant 1): a GAM page is changed only when older than the catalog
//!    record that grew the file, and then carries that record's LSN. A roll forward killed
//!    part-way and taken again finds GAM pages on disk already carrying later images (later
//!    allocations among them); setting the growth's free bits again on such a page, while
//!    it kept its later LSN, undid those allocations for good, as redo then skipped every
//!    image up to that LSN (CHECKDB 8904/8913: an extent free in the GAM that an IAM page
//!    owns). `write_page_redo` asserts the page it replaces is older.
//! 6. The primary file's first PFS page never reads as zeros once the log is attached
//!    (`audit_pfs`): such a page is damage (Msg 824), never "every page free".
//!
//! Allocation-map pages (GAM, SGAM, PFS, IAM, DCM, BCM) changed through `write_page` are
//! logged (a page image) and kept in a small write-back cache (`AllocCache`) instead of
//! being written at once: reads see the cached copy, and `sync` (checkpoints, growths,
//! catalog saves) flushes the log, writes them and syncs the file. So allocating an extent
//! costs no fsync of its own; its durability comes with the log flush of the transaction
//! that used it (redo rebuilds the pages from their images). Data and index pages live in
//! the buffer pool instead (`buffer_pool`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use extentdb_format::bitmap::{self, new_bitmap_page};
use extentdb_format::file_header::{FileHeader, FileType};
use extentdb_format::layout::{self, BitmapKind, FixedPage};
use extentdb_format::pfs;
use extentdb_format::{
    ExtentNo, FileId, Lsn, Page, PageId, PageNo, PageType, GAM_INTERVAL_EXTENTS,
};
use extentdb_format::{PAGES_PER_EXTENT, PAGE_SIZE};
use extentdb_io::DbFile;

use crate::StorageError;

pub struct DataFile {
    pub file_id: FileId,
    pub file: Arc<dyn DbFile>,
    /// Size in pages as the catalog records it.
    pub size_pages: u32,
    /// The database's write-ahead log, once attached: in-place page writes log the page's
    /// image and make it durable before the page itself is written.
    pub wal: Option<Arc<crate::log_writer::LogWriter>>,
    /// Allocation pages changed since they were last written, and clean copies of
    /// allocation pages read (see the module docs).
    pub cache: AllocCache,
    /// The database's id, set with `wal` (for Msg 824's text).
    pub database_id: u16,
}

/// Allocation-map pages of one file kept in memory: (page, dirty); and the locks of the
/// file's allocation state.
#[derive(Default)]
pub struct AllocCache {
    pages: Mutex<BTreeMap<u32, (Page, bool)>>,
    /// Held while the cached dirty pages are written back: two write-backs at once could
    /// otherwise write an older copy of a page after a newer one and mark it clean.
    write_back: Mutex<()>,
    /// The file's allocation lock: sessions sharing the database (`&self`) claim and
    /// release the file's extents under it (GAM bits, PFS bytes, and the IAM bits of this
    /// file's extents, which no other file's allocations touch). Paths holding the whole
    /// database (`&mut`) need it not and take it not.
    allocation: Mutex<()>,
}

impl AllocCache {
    /// Takes the file's allocation lock (see `allocation`).
    pub(crate) fn allocation_lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.allocation.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Dirty allocation pages a file keeps before writing them back unasked.
const ALLOC_CACHE_DIRTY_LIMIT: usize = 256;
/// Allocation pages a file keeps cached at most (clean ones are dropped beyond it).
const ALLOC_CACHE_LIMIT: usize = 4096;

fn is_allocation_page(t: PageType) -> bool {
    matches!(
        t,
        PageType::Gam
            | PageType::Sgam
            | PageType::Pfs
            | PageType::Iam
            | PageType::Dcm
            | PageType::Bcm
    )
}

impl DataFile {
    pub fn is_primary(&self) -> bool {
        self.file_id == FileId::PRIMARY
    }

    /// Extents whose 8 pages all lie inside the file.
    pub fn usable_extents(&self) -> u32 {
        self.size_pages / PAGES_PER_EXTENT
    }

    /// A page's bytes, in range: the allocation cache's copy (true) or the file's (false).
    fn read_page_bytes(&self, page: PageNo) -> Result<(Page, bool), StorageError> {
        if page.0 >= self.size_pages {
            return Err(StorageError::PageOutOfRange {
                page: PageId {
                    file: self.file_id,
                    page,
                },
                size_pages: self.size_pages,
            });
        }
        if let Some((p, _)) = self.cache.pages.lock().unwrap().get(&page.0) {
            return Ok((p.clone(), true));
        }
        let mut buf = vec![0u8; PAGE_SIZE];
        self.file.read_at(&mut buf, page.offset())?;
        Ok((Page::from_bytes(&buf)?, false))
    }

    /// Reads and verifies one page; unformatted pages come back as zero pages.
    pub fn read_page(&self, page: PageNo) -> Result<Page, StorageError> {
        let (p, cached) = self.read_page_bytes(page)?;
        if cached {
            return Ok(p);
        }
        let t = p.verify(PageId {
            file: self.file_id,
            page,
        })?;
        if is_allocation_page(t) {
            let mut c = self.cache.pages.lock().unwrap();
            if c.len() >= ALLOC_CACHE_LIMIT {
                c.retain(|_, (_, dirty)| *dirty);
            }
            // A session may have cached a newer copy since this one was read from the file.
            return Ok(c.entry(page.0).or_insert((p, false)).0.clone());
        }
        Ok(p)
    }

    /// Runs `f` on one verified page without copying it when the allocation cache holds it
    /// (under the cache's lock, so `f` must be short: a header or a few bits).
    pub(crate) fn with_page<R>(
        &self,
        page: PageNo,
        f: impl FnOnce(&Page) -> Result<R, StorageError>,
    ) -> Result<R, StorageError> {
        {
            let c = self.cache.pages.lock().unwrap();
            if let Some((p, _)) = c.get(&page.0) {
                return f(p);
            }
        }
        f(&self.read_page(page)?)
    }

    /// Reads one page as it is, without verifying it (DBCC PAGE, `extentdb inspect`): a
    /// changed allocation page comes from the cache, anything else from the file, whatever
    /// it holds (zeros, a stale page, a torn one). Out-of-range pages are refused.
    pub fn read_page_raw(&self, page: PageNo) -> Result<Page, StorageError> {
        Ok(self.read_page_bytes(page)?.0)
    }

    /// Changes one page write-ahead: with a log attached, the page's image is logged, the
    /// page carries that record's LSN and waits in the cache until `sync` (or the cache's
    /// limit) flushes the log and writes it. Without a log (a database being created) the
    /// page is written at once. Durable only after `sync`.
    pub fn write_page(&self, page: PageNo, p: &mut Page) -> Result<(), StorageError> {
        let Some(wal) = &self.wal else {
            return self.write_page_unlogged(page, p);
        };
        let lsn = wal.append(&extentdb_format::log_record::compact(
            extentdb_format::log::encode_page_image(self.file_id.0, page.0, p.bytes()),
        ))?;
        let mut h = p.header()?;
        h.lsn = lsn;
        p.set_header(&h);
        p.seal();
        let dirty = {
            let mut c = self.cache.pages.lock().unwrap();
            c.insert(page.0, (p.clone(), true));
            c.values().filter(|(_, d)| *d).count()
        };
        if dirty > ALLOC_CACHE_DIRTY_LIMIT {
            self.write_back()?;
        }
        Ok(())
    }

    /// Writes the cached dirty allocation pages, the log first (write-ahead).
    pub(crate) fn write_back(&self) -> Result<(), StorageError> {
        let _one_at_a_time = self
            .cache
            .write_back
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let dirty: Vec<(u32, Page)> = self
            .cache
            .pages
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, (_, d))| *d)
            .map(|(n, (p, _))| (*n, p.clone()))
            .collect();
        if dirty.is_empty() {
            return Ok(());
        }
        if let Some(wal) = &self.wal {
            let max = dirty
                .iter()
                .filter_map(|(_, p)| p.header().ok().map(|h| h.lsn))
                .max();
            if let Some(lsn) = max {
                wal.flush(lsn)?;
            }
        }
        for (n, p) in &dirty {
            self.file.write_at(p.bytes(), PageNo(*n).offset())?;
        }
        let mut c = self.cache.pages.lock().unwrap();
        for (n, p) in dirty {
            // Clean unless changed again meanwhile (the same LSN means the same page).
            if let Some((cached, d)) = c.get_mut(&n) {
                if cached.header().ok().map(|h| h.lsn) == p.header().ok().map(|h| h.lsn) {
                    *d = false;
                }
            }
        }
        Ok(())
    }

    /// Seals and writes one page without logging: only for pages no durable structure
    /// refers to yet (new space before its catalog commit) and for the catalog and boot
    /// pages, which have their own crash protocol.
    pub fn write_page_unlogged(&self, page: PageNo, p: &mut Page) -> Result<(), StorageError> {
        debug_assert_eq!(
            p.header().map(|h| h.this_page).ok(),
            Some(PageId {
                file: self.file_id,
                page
            })
        );
        p.seal();
        self.file.write_at(p.bytes(), page.offset())?;
        let mut c = self.cache.pages.lock().unwrap();
        if c.contains_key(&page.0) {
            c.insert(page.0, (p.clone(), false));
        }
        Ok(())
    }

    /// Makes every change durable: cached allocation pages written (log first), then the
    /// file synced.
    pub fn sync(&self) -> Result<(), StorageError> {
        self.write_back()?;
        Ok(self.file.sync_data()?)
    }

    /// Copies of the cached allocation pages not yet written back (a check's snapshot).
    pub(crate) fn dirty_cached_pages(&self) -> Vec<(PageId, Page)> {
        self.cache
            .pages
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, (_, d))| *d)
            .map(|(n, (p, _))| (self.pid(PageNo(*n)), p.clone()))
            .collect()
    }

    /// Invariant 6: the primary file's first PFS page is formatted when the database is
    /// created (it marks the catalog's first pages) and never reads as zeros once the log is
    /// attached. Zeros there are damage: read as "every page free" they handed out the
    /// catalog's and IAM pages in use as new system pages (a checkpoint's catalog save
    /// overwrote IAM pages); formatted anew they said the same. Msg 824 instead. Other PFS
    /// pages are left zero until their first change (their empty state), so zeros there
    /// cannot be told from damage.
    fn audit_pfs(&self, at: PageNo, p: &Page) -> Result<(), StorageError> {
        if self.is_primary()
            && at == layout::FIRST_PFS_PAGE
            && self.wal.is_some()
            && p.is_unformatted()
        {
            return Err(StorageError::IncorrectPageId {
                page: self.pid(at),
                actual: PageId::NULL,
                database_id: self.database_id,
                file: self.file.path().display().to_string(),
            });
        }
        Ok(())
    }

    /// Forgets cached pages (after a failure, memory may not match the disk).
    pub fn forget_cache(&self) {
        self.cache.pages.lock().unwrap().clear();
    }

    fn pid(&self, page: PageNo) -> PageId {
        PageId {
            file: self.file_id,
            page,
        }
    }

    /// Writes the file header page.
    pub fn write_file_header(
        &self,
        database_guid: [u8; 16],
        created_us: i64,
    ) -> Result<(), StorageError> {
        let h = FileHeader {
            database_guid,
            file_id: self.file_id.0,
            file_type: FileType::Rows,
            created_us,
        };
        let mut p = h.encode();
        self.write_page_unlogged(layout::FILE_HEADER_PAGE, &mut p)
    }

    /// Formats the fixed pages of `[from_pages, self.size_pages)` and marks the extents that
    /// became usable as free in the GAM. The space itself was initialized before.
    pub fn format_new_space(&self, from_pages: u32) -> Result<(), StorageError> {
        self.format_new_space_at(from_pages, None)
    }

    /// `format_new_space` as redo of the catalog record at `lsn` that grew the file
    /// (RESTORE LOG's roll forward, invariant 5): each GAM page is changed only when older
    /// than `lsn`, and then carries `lsn`; one already as new holds the growth and may hold
    /// later allocations, and is left as it is.
    pub fn format_new_space_redo(&self, from_pages: u32, lsn: Lsn) -> Result<(), StorageError> {
        self.format_new_space_at(from_pages, Some(lsn))
    }

    /// The LSN of a page as it is now (the allocation cache's copy, else the file's); a page
    /// that does not verify (torn, never written) counts as older than anything.
    fn current_lsn(&self, page: PageNo) -> Lsn {
        self.read_page(page)
            .and_then(|p| Ok(p.header()?.lsn))
            .unwrap_or(Lsn::ZERO)
    }

    /// Writes `p` as the redo of the record at `lsn`: the page carries `lsn`, and the copy it
    /// replaces must be older (invariant 5; recovery.rs invariant 1).
    fn write_page_redo(&self, page: PageNo, p: &mut Page, lsn: Lsn) -> Result<(), StorageError> {
        let was = self.current_lsn(page);
        assert!(
            was < lsn,
            "redo at {lsn} would overwrite {:?} page {} of LSN {was}",
            self.file_id,
            page.0
        );
        let mut h = p.header()?;
        h.lsn = lsn;
        p.set_header(&h);
        self.write_page_unlogged(page, p)
    }

    fn format_new_space_at(&self, from_pages: u32, redo: Option<Lsn>) -> Result<(), StorageError> {
        let from_extent = from_pages / PAGES_PER_EXTENT;
        let to_extent = self.size_pages.div_ceil(PAGES_PER_EXTENT);
        let old_usable = from_pages / PAGES_PER_EXTENT;
        for (page, kind) in layout::fixed_pages(from_extent, to_extent) {
            if page.0 < from_pages || page.0 >= self.size_pages || kind != FixedPage::Gam {
                // PFS, SGAM, DCM and BCM pages are formatted on first change: all zeros is
                // already their empty state (FORMAT.md), and writing hundreds of them into
                // fallocated space would cost instant initialization its speed.
                continue;
            }
            // A GAM page in the new space is written whole, its free bits set, unlogged: no
            // durable structure refers to this space until the catalog commits it.
            let interval = page.0 / extentdb_format::GAM_INTERVAL_PAGES;
            let mut gam = new_bitmap_page(PageType::Gam, self.pid(page));
            let first = interval * GAM_INTERVAL_EXTENTS;
            let end = self.usable_extents().min(first + GAM_INTERVAL_EXTENTS);
            for e in first.max(old_usable)..end {
                if !layout::is_reserved_extent(ExtentNo(e), self.is_primary()) {
                    bitmap::set_bit(&mut gam, e - first, true);
                }
            }
            match redo {
                None => self.write_page_unlogged(page, &mut gam)?,
                // The file may still hold this page from an attempt cut short.
                Some(lsn) if self.current_lsn(page) < lsn => {
                    self.write_page_redo(page, &mut gam, lsn)?
                }
                Some(_) => {}
            }
        }
        // The GAM page of the old space's last interval gains the extents that became usable.
        let last_old_interval = old_usable / GAM_INTERVAL_EXTENTS;
        if from_pages > 0 && layout::bitmap_page(BitmapKind::Gam, last_old_interval).0 < from_pages
        {
            let end = self
                .usable_extents()
                .min((last_old_interval + 1) * GAM_INTERVAL_EXTENTS);
            if end > old_usable {
                match redo {
                    None => self.set_gam_range(old_usable, end, true)?,
                    Some(lsn) => {
                        let gam_no = layout::bitmap_page(BitmapKind::Gam, last_old_interval);
                        if self.current_lsn(gam_no) < lsn {
                            let mut gam = self.read_page(gam_no)?;
                            for x in old_usable..end {
                                if !layout::is_reserved_extent(ExtentNo(x), self.is_primary()) {
                                    bitmap::set_bit(&mut gam, x % GAM_INTERVAL_EXTENTS, true);
                                }
                            }
                            self.write_page_redo(gam_no, &mut gam, lsn)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Sets the GAM bit of every non-reserved extent in `[from, to)` to `free`.
    fn set_gam_range(&self, from: u32, to: u32, free: bool) -> Result<(), StorageError> {
        let mut e = from;
        while e < to {
            let interval = e / GAM_INTERVAL_EXTENTS;
            let gam_no = layout::bitmap_page(BitmapKind::Gam, interval);
            let mut gam = self.read_page(gam_no)?;
            let end = to.min((interval + 1) * GAM_INTERVAL_EXTENTS);
            for x in e..end {
                if !layout::is_reserved_extent(ExtentNo(x), self.is_primary()) {
                    bitmap::set_bit(&mut gam, x % GAM_INTERVAL_EXTENTS, free);
                }
            }
            self.write_page(gam_no, &mut gam)?;
            e = end;
        }
        Ok(())
    }

    /// Free (GAM-free) extents in the file.
    pub fn free_extents(&self) -> Result<u32, StorageError> {
        let usable = self.usable_extents();
        let mut total = 0;
        for interval in 0..usable.div_ceil(GAM_INTERVAL_EXTENTS) {
            let gam = self.read_page(layout::bitmap_page(BitmapKind::Gam, interval))?;
            let limit = usable - interval * GAM_INTERVAL_EXTENTS;
            total += bitmap::count_set(&gam, limit);
        }
        Ok(total)
    }

    /// Usable extents that can hold data (not the extents of fixed pages).
    pub fn allocatable_extents(&self) -> u32 {
        (0..self.usable_extents())
            .filter(|&e| !layout::is_reserved_extent(ExtentNo(e), self.is_primary()))
            .count() as u32
    }

    /// The number of extents up to and including the last one in use (allocated or
    /// holding fixed pages): the file cannot shrink below this many extents.
    pub fn extents_in_use_prefix(&self) -> Result<u32, StorageError> {
        let usable = self.usable_extents();
        let mut last = 0;
        for interval in 0..usable.div_ceil(GAM_INTERVAL_EXTENTS) {
            let gam = self.read_page(layout::bitmap_page(BitmapKind::Gam, interval))?;
            let limit = (usable - interval * GAM_INTERVAL_EXTENTS).min(GAM_INTERVAL_EXTENTS);
            for bit in 0..limit {
                let e = interval * GAM_INTERVAL_EXTENTS + bit;
                if !bitmap::get_bit(&gam, bit)
                    || layout::is_reserved_extent(ExtentNo(e), self.is_primary())
                {
                    last = e + 1;
                }
            }
        }
        Ok(last)
    }

    /// The extents the GAM marks allocated, besides the extents of fixed pages.
    pub fn allocated_extents(&self) -> Result<Vec<ExtentNo>, StorageError> {
        let usable = self.usable_extents();
        let mut out = Vec::new();
        for interval in 0..usable.div_ceil(GAM_INTERVAL_EXTENTS) {
            let gam = self.read_page(layout::bitmap_page(BitmapKind::Gam, interval))?;
            let limit = (usable - interval * GAM_INTERVAL_EXTENTS).min(GAM_INTERVAL_EXTENTS);
            out.extend(
                (0..limit)
                    .filter(|&bit| !bitmap::get_bit(&gam, bit))
                    .map(|bit| ExtentNo(interval * GAM_INTERVAL_EXTENTS + bit))
                    .filter(|&e| !layout::is_reserved_extent(e, self.is_primary())),
            );
        }
        Ok(out)
    }

    /// The first GAM-free extent of the file, lowest first; None when the file is full.
    pub fn find_free_extent(&self) -> Result<Option<ExtentNo>, StorageError> {
        let usable = self.usable_extents();
        for interval in 0..usable.div_ceil(GAM_INTERVAL_EXTENTS) {
            let gam = self.read_page(layout::bitmap_page(BitmapKind::Gam, interval))?;
            let limit = usable - interval * GAM_INTERVAL_EXTENTS;
            if let Some(bit) = bitmap::next_set(&gam, 0, limit) {
                let extent = ExtentNo(interval * GAM_INTERVAL_EXTENTS + bit);
                assert!(
                    !layout::is_reserved_extent(extent, self.is_primary()),
                    "GAM offers reserved extent {}",
                    extent.0
                );
                return Ok(Some(extent));
            }
        }
        Ok(None)
    }

    /// Marks a free extent allocated in the GAM. The caller records the owner in an IAM
    /// page afterwards (GAM first: invariant 3).
    pub fn claim_extent(&self, extent: ExtentNo) -> Result<(), StorageError> {
        self.set_gam_bit(extent, false)
    }

    /// Returns an extent to the GAM after clearing its pages' PFS bytes. The caller has
    /// cleared the owner's IAM bit before.
    pub fn release_extent(&self, extent: ExtentNo) -> Result<(), StorageError> {
        for page in extent.first_page().0..extent.first_page().0 + PAGES_PER_EXTENT {
            self.set_pfs(PageNo(page), 0)?;
        }
        self.set_gam_bit(extent, true)
    }

    /// Flips an extent's GAM bit, asserting it changes (never freed or taken twice).
    fn set_gam_bit(&self, extent: ExtentNo, free: bool) -> Result<(), StorageError> {
        assert!(
            extent.0 < self.usable_extents(),
            "extent {} beyond the file",
            extent.0
        );
        assert!(
            !layout::is_reserved_extent(extent, self.is_primary()),
            "extent {} is reserved",
            extent.0
        );
        let gam_no = layout::bitmap_page(BitmapKind::Gam, extent.0 / GAM_INTERVAL_EXTENTS);
        let mut gam = self.read_page(gam_no)?;
        let bit = extent.0 % GAM_INTERVAL_EXTENTS;
        assert_ne!(
            bitmap::get_bit(&gam, bit),
            free,
            "extent {} is already {}",
            extent.0,
            if free { "free" } else { "allocated" }
        );
        bitmap::set_bit(&mut gam, bit, free);
        self.write_page(gam_no, &mut gam)
    }

    pub fn pfs(&self, page: PageNo) -> Result<u8, StorageError> {
        let at = layout::pfs_page_for(page);
        let p = self.read_page(at)?;
        self.audit_pfs(at, &p)?;
        Ok(pfs::get(&p, at, page))
    }

    pub fn set_pfs(&self, page: PageNo, value: u8) -> Result<(), StorageError> {
        let at = layout::pfs_page_for(page);
        let mut p = self.read_page(at)?;
        self.audit_pfs(at, &p)?;
        if p.is_unformatted() {
            p = pfs::new_pfs_page(self.pid(at));
        }
        pfs::set(&mut p, at, page, value);
        self.write_page(at, &mut p)
    }
}
