//! DBCC SHRINKFILE: moving pages between files (EMPTYFILE), and giving back free space at
//! the end of a file (a target size).
//!
//! A page moves by one `PageImages` record, so a move is in the log whole or not at all:
//! the copy at its new place (its header names the new page id), every page that refers to
//! it with the reference rewritten (a B-tree page's siblings' prev/next links and its
//! parent's separator record), and the old page emptied (an unformatted page of no
//! allocation unit, which heap scans skip). A clustered index's root is named by the
//! catalog, so it moves in three steps: the copy (logged), the catalog naming the copy
//! (saved durably), the old page emptied. An extent is moved page by page into an extent
//! allocated by proportional fill in another file of the filegroup, then given back.
//!
//! A crash between the moves of one extent leaves both extents owned by the unit, the old
//! one partly emptied: nothing is lost or seen twice, and running EMPTYFILE again finishes
//! the work. A crash in a root move before the catalog names the copy leaves the copy
//! unreferenced (an extent leaked until the file is emptied again).
//!
//! Invariants:
//! 1. A file being emptied takes no new extent (proportional fill and autogrowth skip it)
//!    until it is removed or the database reopened.
//! 2. No page of an allocation unit an open transaction has changed moves: heap rows are
//!    undone by page and slot, which a move would invalidate. EMPTYFILE and REBALANCE move
//!    the other units' pages beside such transactions and wait for them for the rest
//!    (`StorageError::ActiveTransactions`, `Ok(None)`: the caller retries outside the lock).

use extentdb_format::catalog::{FileEntry, TableEntry};
use extentdb_format::{data_page, ExtentNo, Page, PageHeader, PageId, PageType, PAGES_PER_EXTENT};

use crate::btree::KeyInfo;
use crate::{Database, StorageError};

/// What an EMPTYFILE moved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EmptyFileStats {
    pub extents_moved: u64,
    pub pages_moved: u64,
}

impl Database {
    /// The catalog's entry of file `file_id`.
    fn file_entry(&self, file_id: u16) -> Result<FileEntry, StorageError> {
        self.catalog
            .files
            .iter()
            .find(|f| f.file_id == file_id)
            .cloned()
            .ok_or_else(|| StorageError::FileNotFound(file_id.to_string()))
    }

    /// DBCC SHRINKFILE (file, EMPTYFILE): moves every page of data file `file_id` to the
    /// other files of its filegroup, so that REMOVE FILE can drop it.
    pub fn empty_file(&mut self, file_id: u16) -> Result<EmptyFileStats, StorageError> {
        self.check_writable()?;
        let entry = self.file_entry(file_id)?;
        if entry.file_type != extentdb_format::file_header::FileType::Rows || file_id == 1 {
            return Err(StorageError::CannotEmptyFile(entry.name));
        }
        self.data.emptying.insert(file_id);
        // Heap cursors may point into the file: rebuilt on next use from the unit's extents.
        self.data.cursors.get_mut().clear();
        self.recalculate_fill(entry.data_space_id)?;
        let tables: Vec<TableEntry> = self
            .catalog
            .tables
            .iter()
            .filter(|t| t.data_space_id == entry.data_space_id)
            .cloned()
            .collect();
        let mut stats = EmptyFileStats::default();
        let busy = self.units_in_open_xacts();
        let mut waiting = false;
        for t in tables {
            let extents: Vec<ExtentNo> = self
                .extents_of(t.allocation_unit_id)?
                .into_iter()
                .filter(|(f, _)| *f == file_id)
                .map(|(_, e)| e)
                .collect();
            if !extents.is_empty() && busy.contains(&t.allocation_unit_id) {
                waiting = true;
                continue;
            }
            for e in extents {
                assert!(!busy.contains(&t.allocation_unit_id), "invariant 2");
                stats.pages_moved += self.move_extent(t.object_id, file_id, e)?;
                stats.extents_moved += 1;
            }
        }
        self.data.cursors.get_mut().clear();
        self.flush_log()?;
        if waiting {
            return Err(StorageError::ActiveTransactions(self.name.clone()));
        }
        Ok(stats)
    }

    /// DBCC SHRINKFILE (file, target): cuts data file `file_id` back to `target_pages`, or
    /// to the end of its last extent in use if that is further (free space at the end is
    /// given back; nothing moves). The catalog records the new size before the file is
    /// cut, and a checkpoint first puts every logged change of the cut pages on disk, so
    /// redo never reaches past the end (it skips pages beyond the catalog's size anyway).
    /// Returns the new size in pages.
    pub fn shrink_file(&mut self, file_id: u16, target_pages: u32) -> Result<u32, StorageError> {
        self.check_writable()?;
        let entry = self.file_entry(file_id)?;
        let df = self
            .data_files
            .get(&file_id)
            .ok_or(StorageError::CannotEmptyFile(entry.name.clone()))?;
        let in_use = df.extents_in_use_prefix()? * PAGES_PER_EXTENT;
        let new_pages = target_pages
            .div_ceil(PAGES_PER_EXTENT)
            .saturating_mul(PAGES_PER_EXTENT)
            .max(in_use)
            .max(PAGES_PER_EXTENT);
        if new_pages >= entry.size_pages {
            return Ok(entry.size_pages);
        }
        self.drop_prepared_data_growth(file_id);
        self.checkpoint()?;
        self.data.pool.forget_file_from(file_id, new_pages);
        self.update_file_entry(file_id, |f| f.size_pages = new_pages)?;
        let df = self.data_files.get_mut(&file_id).expect("data file");
        df.size_pages = new_pages;
        df.file
            .set_len(new_pages as u64 * extentdb_format::PAGE_SIZE as u64)?;
        df.file.sync_data()?;
        self.recalculate_fill(entry.data_space_id)?;
        Ok(new_pages)
    }

    /// Moves the pages of one extent of a table to an extent elsewhere in its filegroup and
    /// gives the extent back; returns the pages moved.
    fn move_extent(
        &mut self,
        object_id: u32,
        file_id: u16,
        e: ExtentNo,
    ) -> Result<u64, StorageError> {
        self.move_extent_to(object_id, file_id, e, None)
    }

    /// `move_extent` into file `dest` when given (REBALANCE), else where proportional fill
    /// puts it.
    fn move_extent_to(
        &mut self,
        object_id: u32,
        file_id: u16,
        e: ExtentNo,
        dest: Option<u16>,
    ) -> Result<u64, StorageError> {
        let t = self.table_entry(object_id)?;
        let target = match dest {
            Some(d) => self
                .allocate_extent_lazy(t.allocation_unit_id, d)?
                .map(|x| (d, x)),
            None => self.allocate_extent_by_fill(t.allocation_unit_id, t.data_space_id)?,
        };
        let Some((to_file, to)) = target else {
            return Err(self.filegroup_full(&t));
        };
        let mut moved = 0;
        for i in 0..PAGES_PER_EXTENT {
            let old = PageId::new(file_id, e.first_page().0 + i);
            let p = self.data.pool.peek(&self.data_files, old)?;
            if !crate::table::is_unit_page(&p, t.allocation_unit_id) {
                continue;
            }
            let new = PageId::new(to_file, to.first_page().0 + i);
            // The table is read again each time: a root move changes its entry.
            let t = self.table_entry(object_id)?;
            self.move_page(&t, old, new)?;
            moved += 1;
        }
        self.deallocate_extent_lazy(t.allocation_unit_id, file_id, e)?;
        Ok(moved)
    }

    /// The data files of filegroup `ds` with (used extents, usable extents) each: usable
    /// counts the extents that can hold data (not the fixed pages' extents).
    pub fn filegroup_usage(&self, ds: u16) -> Result<Vec<FileUsage>, StorageError> {
        let mut out = Vec::new();
        for f in self.catalog.files.iter().filter(|f| f.data_space_id == ds) {
            let Some(df) = self.data_files.get(&f.file_id) else {
                continue;
            };
            let usable = df.allocatable_extents();
            let free = df.free_extents()?;
            let growth = crate::log_growth::growth_target(f, PAGES_PER_EXTENT)
                .map_or(PAGES_PER_EXTENT, |to| {
                    to.saturating_sub(f.size_pages).max(PAGES_PER_EXTENT)
                });
            out.push(FileUsage {
                file_id: f.file_id,
                used: usable.saturating_sub(free),
                usable,
                growth_extents: growth / PAGES_PER_EXTENT,
            });
        }
        Ok(out)
    }

    /// One step of ALTER DATABASE ... MODIFY FILEGROUP ... REBALANCE: moves one extent from
    /// the file whose used fraction is highest to the one whose fraction is lowest, unless
    /// they are already within one growth increment of each other (the larger of the two
    /// files' FILEGROWTH, as a fraction of its size). Returns the extents still to move by
    /// the same measure (0 when balanced). Call it repeatedly, releasing the database's
    /// lock between steps, so other sessions read and write meanwhile; it refuses (`Ok(None)`)
    /// while every extent left to move belongs to a unit an open transaction changed
    /// (invariant 2), and the caller retries.
    pub fn rebalance_step(&mut self, ds: u16) -> Result<Option<u64>, StorageError> {
        self.check_writable()?;
        let busy = self.units_in_open_xacts();
        let usage = self.filegroup_usage(ds)?;
        let Some(plan) = rebalance_plan(&usage) else {
            return Ok(Some(0));
        };
        // An extent of the fullest file: the highest-numbered of any table of the filegroup.
        let mut candidate: Option<(u32, ExtentNo)> = None;
        let mut waiting = false;
        let tables: Vec<(u32, u64)> = self
            .catalog
            .tables
            .iter()
            .filter(|t| t.data_space_id == ds)
            .map(|t| (t.object_id, t.allocation_unit_id))
            .collect();
        for (object_id, au) in tables {
            for (f, e) in self.extents_of(au)? {
                if f != plan.from {
                    continue;
                }
                if busy.contains(&au) {
                    waiting = true;
                } else if candidate.is_none_or(|c| e.0 > c.1 .0) {
                    candidate = Some((object_id, e));
                }
            }
        }
        let Some((object_id, e)) = candidate else {
            return Ok(if waiting { None } else { Some(0) });
        };
        self.data.cursors.get_mut().clear();
        self.move_extent_to(object_id, plan.from, e, Some(plan.to))?;
        self.flush_log()?;
        Ok(Some(plan.remaining.saturating_sub(1)))
    }

    fn table_entry(&self, object_id: u32) -> Result<TableEntry, StorageError> {
        self.catalog
            .tables
            .iter()
            .find(|t| t.object_id == object_id)
            .cloned()
            .ok_or(StorageError::TableNotFound(object_id))
    }

    /// Moves page `old` of table `t` to `new` (see the module docs).
    fn move_page(&mut self, t: &TableEntry, old: PageId, new: PageId) -> Result<(), StorageError> {
        self.page_moves += 1;
        let page = self.data.pool.peek(&self.data_files, old)?;
        let h = page.header()?;
        let mut copy = page.clone();
        let mut ch = copy.header()?;
        ch.this_page = new;
        copy.set_header(&ch);
        let mut images = vec![(new, copy)];
        if t.index_id == 1 {
            for (sibling, is_prev) in [(h.prev_page, true), (h.next_page, false)] {
                if sibling.is_null() {
                    continue;
                }
                let mut s = self.data.pool.peek(&self.data_files, sibling)?;
                let mut sh = s.header()?;
                if is_prev {
                    sh.next_page = new;
                } else {
                    sh.prev_page = new;
                }
                s.set_header(&sh);
                images.push((sibling, s));
            }
            if old == t.root_page {
                // The catalog names the root: the copy and the emptied page in one record,
                // durable before the catalog points at the copy; recovery finishes the
                // catalog's part if a crash comes between (recovery.rs invariant 5).
                assert_eq!(images.len(), 1, "a root has no siblings");
                images.push((old, emptied(old)?));
                self.log_root_move(t.object_id, old, new, images)?;
                self.mark_page_allocated(new, t.allocation_unit_id)?;
                self.flush_log()?;
                let object_id = t.object_id;
                self.change_catalog(|c| {
                    let entry = c
                        .tables
                        .iter_mut()
                        .find(|x| x.object_id == object_id)
                        .expect("table exists");
                    entry.root_page = new;
                    Ok(())
                })?;
                return self.mark_page_free(old);
            }
            let (parent, slot) = self.find_parent(t, old, h.level)?;
            let mut pp = self.data.pool.peek(&self.data_files, parent)?;
            let ki = KeyInfo::of(t);
            let rec = data_page::record(&pp, slot)?
                .ok_or_else(|| extentdb_format::corrupt(parent, "separator slot is empty"))?
                .to_vec();
            let (key, child) = ki.separator(&rec)?;
            debug_assert_eq!(child, old);
            let rewritten = ki.separator_record(&key, new)?;
            data_page::replace(&mut pp, slot, &rewritten)?;
            images.push((parent, pp));
        }
        images.push((old, emptied(old)?));
        self.log_images(images)?;
        // After the images (allocation.rs invariant 5).
        self.mark_page_allocated(new, t.allocation_unit_id)?;
        self.mark_page_free(old)
    }

    /// The index page holding the separator that points to `child` (a page of `level`),
    /// and its slot: the level above is walked along its chain from its leftmost page.
    fn find_parent(
        &mut self,
        t: &TableEntry,
        child: PageId,
        level: u8,
    ) -> Result<(PageId, u16), StorageError> {
        let ki = KeyInfo::of(t);
        let mut at = t.root_page;
        loop {
            let p = self.data.pool.peek(&self.data_files, at)?;
            let h = p.header()?;
            if h.level == level + 1 {
                break;
            }
            if h.level <= level {
                return Err(
                    extentdb_format::corrupt(child, "no parent level above the page").into(),
                );
            }
            let first = data_page::record(&p, 0)?
                .ok_or_else(|| extentdb_format::corrupt(at, "empty index page"))?;
            at = ki.separator(first)?.1;
        }
        while !at.is_null() {
            let p = self.data.pool.peek(&self.data_files, at)?;
            for (slot, r) in data_page::records(&p) {
                if ki.separator(r?)?.1 == child {
                    return Ok((at, slot));
                }
            }
            at = p.header()?.next_page;
        }
        Err(extentdb_format::corrupt(child, "no separator points to the page").into())
    }
}

/// A data file's use, for REBALANCE and its progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileUsage {
    pub file_id: u16,
    pub used: u32,
    pub usable: u32,
    /// One FILEGROWTH of the file, in extents (at least 1).
    pub growth_extents: u32,
}

/// The next REBALANCE move: from the file with the highest used fraction to the one with
/// the lowest, with the moves still needed to bring them within one growth increment;
/// None when balanced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RebalancePlan {
    pub from: u16,
    pub to: u16,
    pub remaining: u64,
}

pub fn rebalance_plan(usage: &[FileUsage]) -> Option<RebalancePlan> {
    let frac = |u: &FileUsage| u.used as f64 / u.usable.max(1) as f64;
    let from = usage
        .iter()
        .filter(|u| u.used > 0)
        .max_by(|a, b| frac(a).total_cmp(&frac(b)))?;
    let to = usage
        .iter()
        .filter(|u| u.used < u.usable && u.file_id != from.file_id)
        .min_by(|a, b| frac(a).total_cmp(&frac(b)))?;
    let tolerance = (from.growth_extents as f64 / from.usable.max(1) as f64)
        .max(to.growth_extents as f64 / to.usable.max(1) as f64);
    let gap = frac(from) - frac(to);
    if gap <= tolerance {
        return None;
    }
    // Moving k extents narrows the gap by k/usable_from + k/usable_to.
    let per_move = 1.0 / from.usable.max(1) as f64 + 1.0 / to.usable.max(1) as f64;
    let remaining = ((gap - tolerance) / per_move).ceil().max(1.0) as u64;
    Some(RebalancePlan {
        from: from.file_id,
        to: to.file_id,
        remaining,
    })
}

/// An empty, unowned page at `pid` (what a moved page leaves behind).
fn emptied(pid: PageId) -> Result<Page, StorageError> {
    Ok(Page::new(&PageHeader::new(PageType::Unformatted, pid)))
}
