//! Allocation units and their extents: the IAM chain of each allocation unit, with one IAM
//! page per (file, GAM interval) in which the unit owns extents, created on first use.
//!
//! IAM pages are system pages: they live in the catalog's extents in file 1 (extentdb has
//! no mixed extents), marked `ALLOCATED | IAM_PAGE` in the PFS. The chain starts at the
//! catalog's `first_iam_page` and runs through the page headers' next links; a new page is
//! appended at the end with the next sequence number.
//!
//! Invariants:
//! 1. An allocation unit's extents lie only in files of its filegroup (data space).
//! 2. At most one IAM page of a chain maps a given (file, interval).
//!    Every IAM page of a chain maps a data file the catalog has: REMOVE FILE copies the
//!    chains without the removed file's pages and publishes the copies with its catalog
//!    save (database.rs invariant 4).
//! 3. Order of writes without the log: the new IAM page is durable before anything links
//!    to it; an unlinked IAM page is freed by the sweep at open.
//! 4. An extent changes owner in two logged steps: allocation marks the GAM, then the IAM
//!    page; deallocation clears the IAM bit, then frees the GAM's. A crash between the two
//!    (another session's commit may flush the first alone) leaves an extent allocated that
//!    no IAM page owns; after such a crash (the log held page images past the redo start;
//!    both steps lie past it, as a checkpoint begins only between allocations) the sweep at
//!    open (`sweep_unowned_extents`) frees it and the error log says how many. Nothing can
//!    refer to such an extent: pages are reached through IAM pages, and any record naming
//!    one of its pages follows the IAM page's change in the log. A database shut down
//!    cleanly is not swept: an unowned extent there is damage for CHECKALLOC to report.
//!    Nor is a restored database recovered after its roll forward (`open_restored`). That
//!    restriction was made for a failure later traced elsewhere and seen without the sweep
//!    too: a RESTORE LOG taken again after a kill set a growth's GAM bits free again over
//!    later allocations (8904/8913, 'GAM' and an IAM page; data_file.rs invariant 5). The
//!    sweep there has not been tried again since.
//! 5. A data or index page is in use exactly when its PFS byte has the allocated bit, and
//!    the bit is set only after the page's content is logged (its `FormatPage` record, or
//!    the page images of a B-tree split or a page move), never before: redo replays the log
//!    in order, so after any crash a page the PFS calls allocated is formatted. A page taken
//!    whose format never reached the log (a full log, a crash) stays zero and free in the
//!    PFS, which is no damage; a zero page the PFS calls allocated is (CHECKDB 8909/8928,
//!    reads Msg 824). A page's content logged without its bit (a crash between the two)
//!    leaves a formatted page the PFS calls free, which reads still count. Freeing an
//!    extent clears its pages' bytes (`DataFile::release_extent`); a move clears the page
//!    it emptied. `mark_page_allocated` asserts the page is formatted in the buffer pool.
//! 6. A free extent has no page in the buffer pool, and no former owner's page is written
//!    into it after the free (buffer_pool.rs invariant 5): freeing an extent forgets its
//!    pages there, dirty ones too (their changes no longer matter), and fences the copies
//!    an online checkpoint already took. Otherwise a dropped or truncated table's dirty
//!    page, written back by a checkpoint or an eviction after the extent came back as
//!    system pages (IAM and catalog pages are written without the pool), destroyed an IAM
//!    page (CHECKDB 8946 and 8905). `allocate_system_pages` asserts the pool caches none
//!    of the pages it hands out.
//! 7. Every allocation unit but the catalog's belongs to a table. DROP and TRUNCATE give
//!    theirs back whole (table.rs `free_allocation_unit`: extents, then the catalog row as
//!    the commit point, then the IAM pages); a unit that no table names after a crash is
//!    such a change, or a CREATE or TRUNCATE's new unit, cut short, and is freed at open
//!    (`free_orphan_units`), its unreachable IAM pages with it (`sweep_catalog_pages`).
//!    A unit whose chain is damaged (invariant 8) is not freed.
//! 8. A user allocation unit whose IAM chain is damaged (a page of it fails its audit:
//!    zeros, another page's id, a bad checksum or header, a broken link) does not keep the
//!    database from opening, as SQL Server's does not. Open lists such units
//!    (`find_damaged_chains`, the error log names each) and, since the extents the lost
//!    pages mapped cannot be told, frees nothing the chain might own: no orphan freeing of
//!    the unit, no sweep of unowned extents, and the sweep of catalog pages keeps every
//!    page the PFS marks as an IAM page. The extents stay allocated in the GAM, so no other
//!    unit is given them. Every read or change of the unit that reaches its chain fails
//!    with the page's error (Msg 824 naming the page); DROP and TRUNCATE TABLE read the
//!    chain whole before changing anything. Damage to the catalog's own chain, at the
//!    fixed page (1:8), still fails the open (SUSPECT).

use extentdb_format::catalog::AllocationUnitEntry;
use extentdb_format::{
    bitmap, iam, pfs, ExtentNo, FormatError, Page, PageId, GAM_INTERVAL_EXTENTS,
    GAM_INTERVAL_PAGES, PAGES_PER_EXTENT,
};

use crate::data_file::DataFile;
use crate::{Database, StorageError};

/// An allocation unit whose IAM chain could not be followed to its end at open
/// (invariant 8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedChain {
    pub allocation_unit_id: u64,
    /// The table that names the unit (None: an orphan unit, invariant 7).
    pub object_id: Option<u32>,
    /// The chain's pages before the damage, read whole.
    pub readable: Vec<PageId>,
    /// The first page that failed: the catalog's first IAM page or a next pointer's target.
    pub page: PageId,
    /// Why it failed (its audit).
    pub reason: String,
}

/// A chain followed as far as its pages hold.
struct ChainWalk {
    pages: Vec<PageId>,
    /// The first page that failed its audit, and the failure.
    damage: Option<(PageId, StorageError)>,
}

/// True for a failure that is the page's own damage found by its audit (a wrong page id,
/// a bad checksum or header, a link out of the file), not the I/O's.
pub(crate) fn is_page_damage(e: &StorageError) -> bool {
    matches!(
        e,
        StorageError::IncorrectPageId { .. }
            | StorageError::Format(FormatError::Corrupt { .. })
            | StorageError::PageOutOfRange { .. }
    )
}

/// What a claim of an extent in one file found.
pub(crate) enum Claim {
    Extent(ExtentNo),
    /// The file has no free extent.
    Full,
    /// The unit has no IAM page for this GAM interval of the file (that of the free
    /// extent found) yet.
    NeedsIam(u32),
}

impl Database {
    /// Creates an empty allocation unit in filegroup `data_space_id`; returns its id.
    pub fn create_allocation_unit(&mut self, data_space_id: u16) -> Result<u64, StorageError> {
        self.check_writable()?;
        self.ensure_log_space()?;
        if !self
            .catalog
            .filegroups
            .iter()
            .any(|g| g.data_space_id == data_space_id)
        {
            return Err(StorageError::FilegroupNotFound(data_space_id.to_string()));
        }
        let mut id = 0;
        self.change_catalog(|c| {
            id = c.next_allocation_unit_id;
            c.next_allocation_unit_id += 1;
            c.allocation_units.push(AllocationUnitEntry {
                allocation_unit_id: id,
                data_space_id,
                first_iam_page: PageId::NULL,
            });
            Ok(())
        })?;
        Ok(id)
    }

    fn allocation_unit(&self, au: u64) -> Result<AllocationUnitEntry, StorageError> {
        self.catalog
            .allocation_units
            .iter()
            .find(|a| a.allocation_unit_id == au)
            .cloned()
            .ok_or(StorageError::AllocationUnitNotFound(au))
    }

    /// The IAM pages of an allocation unit, in chain order; a damaged chain is the error
    /// of its first bad page (Msg 824 for a page naming another, zeros naming (0:0)).
    pub fn iam_chain(&self, au: u64) -> Result<Vec<PageId>, StorageError> {
        let walk = self.walk_iam_chain(au)?;
        match walk.damage {
            Some((_, e)) => Err(e),
            None => Ok(walk.pages),
        }
    }

    /// Follows `au`'s chain from the catalog as far as its pages hold (invariant 8): the
    /// pages read whole, then the first page that failed its audit, if any. An I/O
    /// failure is no damage found: it is the error.
    fn walk_iam_chain(&self, au: u64) -> Result<ChainWalk, StorageError> {
        let entry = self.allocation_unit(au)?;
        let mut pages = Vec::new();
        let mut at = entry.first_iam_page;
        while !at.is_null() {
            let next = self.primary().read_page(at.page).and_then(|p| {
                self.audit_iam(&p, at)?;
                if p.header()?.allocation_unit_id != au || pages.contains(&at) {
                    return Err(extentdb_format::corrupt(
                        at,
                        format!("IAM chain of allocation unit {au} is broken"),
                    )
                    .into());
                }
                Ok(p.header()?.next_page)
            });
            match next {
                Ok(next) => {
                    pages.push(at);
                    at = next;
                }
                Err(e) if is_page_damage(&e) => {
                    return Ok(ChainWalk {
                        pages,
                        damage: Some((at, e)),
                    })
                }
                Err(e) => return Err(e),
            }
        }
        Ok(ChainWalk {
            pages,
            damage: None,
        })
    }

    /// Audits IAM page `at` as read: a page that names another page (all zeros name
    /// (0:0)) is Msg 824's incorrect pageid; any other wrong header is corruption.
    fn audit_iam(&self, p: &Page, at: PageId) -> Result<(), StorageError> {
        let named = p.raw_header().this_page;
        if named != at {
            return Err(self.incorrect_page_id(at, named));
        }
        Ok(iam::validate(p, at)?)
    }

    /// Every user allocation unit whose IAM chain cannot be followed to its end, found at
    /// open (invariant 8). The catalog's own unit is not among them: damage there fails
    /// the open.
    pub(crate) fn find_damaged_chains(&self) -> Result<Vec<DamagedChain>, StorageError> {
        let mut out = Vec::new();
        for au in &self.catalog.allocation_units {
            let id = au.allocation_unit_id;
            if id == extentdb_format::catalog::CATALOG_ALLOCATION_UNIT {
                continue;
            }
            let walk = self.walk_iam_chain(id)?;
            if let Some((page, e)) = walk.damage {
                out.push(DamagedChain {
                    allocation_unit_id: id,
                    object_id: self
                        .catalog
                        .tables
                        .iter()
                        .find(|t| t.allocation_unit_id == id)
                        .map(|t| t.object_id),
                    readable: walk.pages,
                    page,
                    reason: e.to_string(),
                });
            }
        }
        Ok(out)
    }

    /// The units whose IAM chains were found damaged at open (invariant 8).
    pub fn damaged_iam_chains(&self) -> &[DamagedChain] {
        &self.damaged_chains
    }

    /// The IAM page mapping (file, interval) for `au`, if the chain has one. Walks the
    /// chain as `iam_chain` does, reading each page's header in place (this is on every
    /// allocation's path, and sessions allocating at once share file 1's cache).
    fn find_iam(
        &self,
        au: u64,
        file_id: u16,
        interval: u32,
    ) -> Result<Option<PageId>, StorageError> {
        let start = PageId::new(file_id, interval * GAM_INTERVAL_PAGES);
        let mut seen: Vec<PageId> = Vec::new();
        let mut at = self.allocation_unit(au)?.first_iam_page;
        while !at.is_null() {
            let (owner, next, maps) = self.primary().with_page(at.page, |p| {
                self.audit_iam(p, at)?;
                let h = p.header()?;
                Ok((h.allocation_unit_id, h.next_page, iam::start_page(p)))
            })?;
            if owner != au || seen.contains(&at) {
                return Err(extentdb_format::corrupt(
                    at,
                    format!("IAM chain of allocation unit {au} is broken"),
                )
                .into());
            }
            if maps == start {
                return Ok(Some(at));
            }
            seen.push(at);
            at = next;
        }
        Ok(None)
    }

    /// Finds or appends the IAM page mapping (file, interval) for `au` (invariants 2, 3).
    fn ensure_iam(&mut self, au: u64, file_id: u16, interval: u32) -> Result<PageId, StorageError> {
        if let Some(at) = self.find_iam(au, file_id, interval)? {
            return Ok(at);
        }
        let chain = self.iam_chain(au)?;
        let at = self.allocate_system_pages(1, pfs::ALLOCATED | pfs::IAM_PAGE)?[0];
        let start = PageId::new(file_id, interval * GAM_INTERVAL_PAGES);
        let mut page = iam::new_iam_page(at, au, chain.len() as u32, start);
        let mut h = page.header()?;
        h.prev_page = chain.last().copied().unwrap_or(PageId::NULL);
        page.set_header(&h);
        let primary = self.primary();
        primary.write_page(at.page, &mut page)?;
        primary.sync()?;
        match chain.last() {
            Some(last) => {
                let mut p = primary.read_page(last.page)?;
                let mut h = p.header()?;
                h.next_page = at;
                p.set_header(&h);
                primary.write_page(last.page, &mut p)?;
                primary.sync()?;
            }
            None => self.change_catalog(|c| {
                let entry = c
                    .allocation_units
                    .iter_mut()
                    .find(|a| a.allocation_unit_id == au)
                    .expect("unit exists");
                entry.first_iam_page = at;
                Ok(())
            })?,
        }
        Ok(at)
    }

    /// Data file `file_id`, which must belong to allocation unit `au`'s filegroup
    /// (invariant 1).
    fn unit_file(&self, au: u64, file_id: u16) -> Result<&DataFile, StorageError> {
        let entry = self.allocation_unit(au)?;
        let file = self
            .data_files
            .get(&file_id)
            .ok_or_else(|| StorageError::FileNotFound(file_id.to_string()))?;
        assert!(
            self.catalog
                .files
                .iter()
                .any(|f| f.file_id == file_id && f.data_space_id == entry.data_space_id),
            "file {file_id} is not in allocation unit {au}'s filegroup"
        );
        Ok(file)
    }

    /// Claims a free extent of file `file_id` for `au` under the file's allocation lock,
    /// beside other sessions claiming at once (`&self`); the unit's IAM page for the
    /// extent's interval must exist already (creating one changes the chain or the
    /// catalog, which needs the database to itself: `allocate_extent_lazy`).
    pub(crate) fn claim_extent(&self, au: u64, file_id: u16) -> Result<Claim, StorageError> {
        self.check_writable()?;
        let file = self.unit_file(au, file_id)?;
        let _allocation = file.cache.allocation_lock();
        let Some(extent) = file.find_free_extent()? else {
            return Ok(Claim::Full);
        };
        let interval = extent.0 / GAM_INTERVAL_EXTENTS;
        let Some(iam_at) = self.find_iam(au, file_id, interval)? else {
            return Ok(Claim::NeedsIam(interval));
        };
        file.claim_extent(extent)?;
        self.set_iam_bit(iam_at, extent, true)?;
        if self.data.counts_task_space {
            crate::task_space::charge_user_extent(true);
        }
        Ok(Claim::Extent(extent))
    }

    /// Allocates one extent of file `file_id` to `au` and makes it durable; None when the
    /// file is full.
    pub fn allocate_extent(
        &mut self,
        au: u64,
        file_id: u16,
    ) -> Result<Option<ExtentNo>, StorageError> {
        let e = self.allocate_extent_lazy(au, file_id)?;
        self.flush_log()?;
        Ok(e)
    }

    /// Makes everything logged so far durable.
    pub(crate) fn flush_log(&self) -> Result<(), StorageError> {
        match &self.wal {
            Some(w) => w.flush(w.end_lsn()),
            None => Ok(()),
        }
    }

    /// `allocate_extent` without the log flush: the extent becomes durable with the next
    /// flush, at the latest the commit of the transaction that uses it (redo rebuilds the
    /// allocation pages from their logged images).
    pub(crate) fn allocate_extent_lazy(
        &mut self,
        au: u64,
        file_id: u16,
    ) -> Result<Option<ExtentNo>, StorageError> {
        self.check_writable()?;
        self.ensure_log_space()?;
        loop {
            match self.claim_extent(au, file_id)? {
                Claim::Extent(e) => return Ok(Some(e)),
                Claim::Full => return Ok(None),
                // A new IAM page may take an extent of file 1 for system pages, perhaps
                // the one just found: the claim looks again once the page exists (each
                // round makes the page of another interval, so this ends).
                Claim::NeedsIam(interval) => {
                    self.ensure_iam(au, file_id, interval)?;
                }
            }
        }
    }

    /// Returns an extent of `au` in file `file_id` to the file's free space, durably.
    pub fn deallocate_extent(
        &mut self,
        au: u64,
        file_id: u16,
        extent: ExtentNo,
    ) -> Result<(), StorageError> {
        self.deallocate_extent_lazy(au, file_id, extent)?;
        self.flush_log()
    }

    /// `deallocate_extent` without the log flush.
    pub(crate) fn deallocate_extent_lazy(
        &mut self,
        au: u64,
        file_id: u16,
        extent: ExtentNo,
    ) -> Result<(), StorageError> {
        self.check_writable()?;
        self.ensure_log_space()?;
        let iam_at = self
            .find_iam(au, file_id, extent.0 / GAM_INTERVAL_EXTENTS)?
            .ok_or(StorageError::ExtentNotOwned {
                allocation_unit: au,
                file_id,
                extent: extent.0,
            })?;
        if !self.data_files.contains_key(&file_id) {
            return Err(StorageError::FileNotFound(file_id.to_string()));
        }
        if !self.iam_page_extents(iam_at)?.contains(&extent) {
            return Err(StorageError::ExtentNotOwned {
                allocation_unit: au,
                file_id,
                extent: extent.0,
            });
        }
        self.set_iam_bit(iam_at, extent, false)?;
        self.release_extent(file_id, extent)?;
        if self.data.counts_task_space {
            crate::task_space::charge_user_extent(false);
        }
        Ok(())
    }

    /// Returns an extent no IAM page owns any more to its file's GAM, after forgetting its
    /// pages in the buffer pool (invariant 6).
    fn release_extent(&self, file_id: u16, extent: ExtentNo) -> Result<(), StorageError> {
        let end = self
            .wal
            .as_ref()
            .map_or(extentdb_format::Lsn::ZERO, |w| w.end_lsn());
        self.data
            .pool
            .forget_freed(file_id, extent.first_page().0, PAGES_PER_EXTENT, end);
        self.data_files[&file_id].release_extent(extent)
    }

    /// Frees the extents a crash left allocated in a GAM but owned by no IAM page
    /// (invariant 4); returns how many.
    pub(crate) fn sweep_unowned_extents(&mut self) -> Result<usize, StorageError> {
        assert!(
            self.damaged_chains.is_empty(),
            "sweep of unowned extents with a damaged IAM chain (invariant 8)"
        );
        let catalog_iam = PageId {
            file: extentdb_format::FileId::PRIMARY,
            page: extentdb_format::layout::CATALOG_IAM_PAGE,
        };
        let mut owned: std::collections::HashSet<(u16, u32)> = self
            .iam_page_extents(catalog_iam)?
            .into_iter()
            .map(|e| (extentdb_format::FileId::PRIMARY.0, e.0))
            .collect();
        for au in &self.catalog.allocation_units {
            if au.allocation_unit_id == extentdb_format::catalog::CATALOG_ALLOCATION_UNIT {
                continue;
            }
            owned.extend(
                self.extents_of(au.allocation_unit_id)?
                    .into_iter()
                    .map(|(f, e)| (f, e.0)),
            );
        }
        let mut freed = 0;
        for (&file_id, df) in &self.data_files {
            for e in df.allocated_extents()? {
                if !owned.contains(&(file_id, e.0)) {
                    self.release_extent(file_id, e)?;
                    freed += 1;
                }
            }
        }
        if freed > 0 {
            self.flush_log()?;
        }
        Ok(freed)
    }

    /// Every extent `au` owns, as (file id, extent), in chain order.
    pub fn extents_of(&self, au: u64) -> Result<Vec<(u16, ExtentNo)>, StorageError> {
        let mut out = Vec::new();
        for at in self.iam_chain(au)? {
            let file_id = iam::start_page(&self.primary().read_page(at.page)?).file.0;
            out.extend(self.iam_page_extents(at)?.into_iter().map(|e| (file_id, e)));
        }
        Ok(out)
    }

    /// How many extents `au`'s IAM chain owns: each IAM page's bits counted, no list
    /// built (a plan's tipping point asks this per statement).
    pub fn extent_count(&self, au: u64) -> Result<u64, StorageError> {
        let mut n = 0u64;
        for at in self.iam_chain(au)? {
            let p = self.primary().read_page(at.page)?;
            n += u64::from(bitmap::count_set(&p, GAM_INTERVAL_EXTENTS));
        }
        Ok(n)
    }

    /// Sets or clears the bit of `extent` in the IAM page at `iam_at` (in file 1).
    pub(crate) fn set_iam_bit(
        &self,
        iam_at: PageId,
        extent: ExtentNo,
        owned: bool,
    ) -> Result<(), StorageError> {
        assert_eq!(
            iam_at.file,
            extentdb_format::FileId::PRIMARY,
            "IAM pages live in file 1"
        );
        let primary = self.primary();
        let mut p = primary.read_page(iam_at.page)?;
        self.audit_iam(&p, iam_at)?;
        let first = iam::start_page(&p).page.0 / PAGES_PER_EXTENT;
        assert!(
            extent.0 >= first && extent.0 < first + GAM_INTERVAL_EXTENTS,
            "extent outside the IAM interval"
        );
        bitmap::set_bit(&mut p, extent.0 - first, owned);
        primary.write_page(iam_at.page, &mut p)
    }

    /// The extents an IAM page (in file 1) marks as owned, in the file it maps.
    pub(crate) fn iam_page_extents(&self, iam_at: PageId) -> Result<Vec<ExtentNo>, StorageError> {
        let p = self.primary().read_page(iam_at.page)?;
        self.audit_iam(&p, iam_at)?;
        let first = iam::start_page(&p).page.0 / PAGES_PER_EXTENT;
        let mut out = Vec::new();
        let mut i = 0;
        while let Some(bit) = bitmap::next_set(&p, i, GAM_INTERVAL_EXTENTS) {
            out.push(ExtentNo(first + bit));
            i = bit + 1;
        }
        Ok(out)
    }

    /// Sets the PFS allocated bit of `pid`, a data or index page of `au` whose content was
    /// just logged and installed in the buffer pool (invariant 5), under its file's
    /// allocation lock.
    pub(crate) fn mark_page_allocated(&self, pid: PageId, au: u64) -> Result<(), StorageError> {
        let formatted =
            self.data
                .pool
                .with_page(&self.data_files, self.wal.as_deref(), pid, |p| {
                    crate::table::is_unit_page(p, au)
                })?;
        assert!(
            formatted,
            "page {pid} of allocation unit {au} marked allocated before its format was logged"
        );
        self.set_page_pfs(pid, pfs::ALLOCATED)
    }

    /// Clears the PFS byte of `pid`, a page a move emptied (invariant 5).
    pub(crate) fn mark_page_free(&self, pid: PageId) -> Result<(), StorageError> {
        self.set_page_pfs(pid, 0)
    }

    fn set_page_pfs(&self, pid: PageId, value: u8) -> Result<(), StorageError> {
        let file = self
            .data_files
            .get(&pid.file.0)
            .ok_or_else(|| StorageError::FileNotFound(pid.file.0.to_string()))?;
        let _allocation = file.cache.allocation_lock();
        file.set_pfs(pid.page, value)
    }

    /// True when the PFS marks `pid` allocated (in use by its extent's owner).
    pub(crate) fn page_allocated(&self, pid: PageId) -> Result<bool, StorageError> {
        let file = self
            .data_files
            .get(&pid.file.0)
            .ok_or_else(|| StorageError::FileNotFound(pid.file.0.to_string()))?;
        Ok(file.pfs(pid.page)? & pfs::ALLOCATED != 0)
    }

    /// Msg 824 for page `pid`, which the maps or a link say is in use and reads as `actual`
    /// (zeros: page (0:0)).
    pub(crate) fn incorrect_page_id(&self, pid: PageId, actual: PageId) -> StorageError {
        let file = self
            .catalog
            .files
            .iter()
            .find(|f| f.file_id == pid.file.0)
            .map(|f| f.physical_name.clone())
            .unwrap_or_default();
        StorageError::IncorrectPageId {
            page: pid,
            actual,
            database_id: self.catalog.database_id,
            file,
        }
    }
}
