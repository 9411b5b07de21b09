//! Space accounting, read-only: what each data file has allocated (its GAM) and what each
//! allocation unit holds (its extents, and its pages by kind), the figures behind
//! FILEPROPERTY(..., 'SpaceUsed'), sys.dm_db_file_space_usage, DBCC SHOWFILESTATS and
//! sp_spaceused.
//!
//! Definitions, in 8 KB pages, as SQL Server counts them where extentdb has the same thing:
//! - A data file's *allocated extents* are its usable extents that are not GAM-free. The
//!   extents that hold fixed pages (file header, PFS, GAM, SGAM, DCM, BCM; in file 1 the
//!   boot pages and the catalog's IAM page) are never free, so they count as allocated, as
//!   extent 0 does in SQL Server. A partial extent at the end of a file (a size that is not a
//!   multiple of 8 pages) is neither allocated nor free.
//! - An allocation unit *reserves* the pages of the extents its IAM pages mark (8 per
//!   extent). Its IAM pages are not inside those extents: extentdb has no mixed extents and
//!   keeps every IAM page in the catalog's extents (see `allocation`).
//! - Its *data pages* are its formatted data pages: a heap's pages, or a clustered index's
//!   leaf level. Its *index pages* are its formatted index pages (the levels above the
//!   leaves). Its *used pages* are data + index + IAM pages, as `used_pages` in
//!   sys.allocation_units counts them.
//! - The *system* space is the catalog allocation unit: it reserves the catalog's extents in
//!   file 1 and uses the pages the PFS marks allocated there that are not IAM pages (the
//!   catalog's own pages; the IAM pages are used pages of the units they map).
//!
//! Invariant (checked by `tests/space.rs`): summed over a database, the pages the units and
//! the system reserve plus the fixed extents' pages equal the data files' allocated extents
//! times 8; and every used page lies inside some reserved extent.
//!
//! Nothing here writes; pages are read through the buffer pool so that changes not yet
//! written back are counted.

use std::collections::BTreeMap;

use extentdb_format::layout::CATALOG_IAM_PAGE;
use extentdb_format::{data_page, pfs, record, FileId, Page, PageId, PageNo, PageType};
use extentdb_format::{PAGES_PER_EXTENT, PAGE_SIZE};

use crate::{Database, StorageError};

/// The space of one data file, in extents (SQL Server's DBCC SHOWFILESTATS unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileSpace {
    pub file_id: u16,
    pub data_space_id: u16,
    pub size_pages: u32,
    /// Extents whose 8 pages lie inside the file.
    pub total_extents: u32,
    /// Usable extents not GAM-free (fixed-page extents included).
    pub allocated_extents: u32,
    /// GAM-free extents.
    pub free_extents: u32,
    /// Extents of the file owned by user tables' allocation units.
    pub user_object_extents: u32,
}

/// What one allocation unit (or the catalog, for the system space) holds, in pages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnitSpace {
    pub reserved_pages: u64,
    pub data_pages: u64,
    pub index_pages: u64,
    pub iam_pages: u64,
    /// Live (non-ghost) rows on the data pages.
    pub rows: u64,
}

impl UnitSpace {
    /// Data, index and IAM pages: what sys.allocation_units calls `used_pages`.
    pub fn used_pages(&self) -> u64 {
        self.data_pages + self.index_pages + self.iam_pages
    }

    /// Adds another unit's figures (sp_spaceused sums a table's units and a database's).
    pub fn add(&mut self, other: &UnitSpace) {
        self.reserved_pages += other.reserved_pages;
        self.data_pages += other.data_pages;
        self.index_pages += other.index_pages;
        self.iam_pages += other.iam_pages;
        self.rows += other.rows;
    }
}

/// The catalog allocation unit's IAM page.
const CATALOG_IAM: PageId = PageId {
    file: FileId::PRIMARY,
    page: CATALOG_IAM_PAGE,
};

impl Database {
    /// The space of every data file, in file id order.
    pub fn data_file_space(&self) -> Result<Vec<FileSpace>, StorageError> {
        let user = self.user_object_extents()?;
        let mut out = Vec::new();
        for entry in &self.catalog.files {
            let Some(file) = self.data_files.get(&entry.file_id) else {
                continue;
            };
            let free = file.free_extents()?;
            out.push(FileSpace {
                file_id: entry.file_id,
                data_space_id: entry.data_space_id,
                size_pages: file.size_pages,
                total_extents: file.usable_extents(),
                allocated_extents: file.usable_extents() - free,
                free_extents: free,
                user_object_extents: user.get(&entry.file_id).copied().unwrap_or(0),
            });
        }
        out.sort_by_key(|f| f.file_id);
        Ok(out)
    }

    /// Extents owned by the user tables' allocation units, per file.
    fn user_object_extents(&self) -> Result<BTreeMap<u16, u32>, StorageError> {
        let mut per_file = BTreeMap::new();
        for t in &self.catalog.tables {
            for (file, _) in self.extents_of(t.allocation_unit_id)? {
                *per_file.entry(file).or_insert(0) += 1;
            }
        }
        Ok(per_file)
    }

    /// The pages of the fixed-page extents of every data file (allocated, owned by no unit).
    pub fn fixed_extent_pages(&self) -> u64 {
        let fixed =
            |f: &crate::data_file::DataFile| (f.usable_extents() - f.allocatable_extents()) as u64;
        self.data_files.values().map(fixed).sum::<u64>() * PAGES_PER_EXTENT as u64
    }

    /// What allocation unit `au` reserves and holds, read from its pages.
    pub fn unit_space(&self, au: u64) -> Result<UnitSpace, StorageError> {
        let extents = self.extents_of(au)?;
        let mut space = UnitSpace {
            reserved_pages: extents.len() as u64 * PAGES_PER_EXTENT as u64,
            iam_pages: self.iam_chain(au)?.len() as u64,
            ..UnitSpace::default()
        };
        for (file, extent) in extents {
            for i in 0..PAGES_PER_EXTENT {
                let pid = PageId::new(file, extent.first_page().0 + i);
                let page = self.data.pool.peek(&self.data_files, pid)?;
                count_page(&page, au, &mut space)?;
            }
        }
        Ok(space)
    }

    /// The system space: the catalog unit's extents and the catalog pages in use there.
    pub fn system_space(&self) -> Result<UnitSpace, StorageError> {
        let primary = self.primary();
        let mut space = UnitSpace::default();
        for extent in self.iam_page_extents(CATALOG_IAM)? {
            space.reserved_pages += PAGES_PER_EXTENT as u64;
            for page in extent.first_page().0..extent.first_page().0 + PAGES_PER_EXTENT {
                let flags = primary.pfs(PageNo(page))?;
                if flags & pfs::ALLOCATED != 0 && flags & pfs::IAM_PAGE == 0 {
                    space.data_pages += 1;
                }
            }
        }
        Ok(space)
    }

    /// Pages of log in use in each log file: whole VLFs from the oldest active one up to
    /// the current one, and the current one up to the end of the log (`log_space`). The
    /// log reports only its total, so it is laid over the VLFs backwards from the current
    /// one: older VLFs whole, the rest in the current VLF. With one log file that is exact.
    pub fn log_file_used_pages(&self) -> Result<BTreeMap<u16, u64>, StorageError> {
        let (_, mut left) = self.log_space();
        let mut vlfs: Vec<_> = self
            .vlfs()?
            .into_iter()
            .filter(|v| v.sequence != 0)
            .collect();
        vlfs.sort_by_key(|v| std::cmp::Reverse(v.sequence));
        let mut bytes: BTreeMap<u16, u64> = self.log_files.keys().map(|&f| (f, 0)).collect();
        if let Some((current, older)) = vlfs.split_first() {
            for v in older {
                if v.size > left {
                    break;
                }
                *bytes.entry(v.file_id).or_default() += v.size;
                left -= v.size;
            }
            *bytes.entry(current.file_id).or_default() += left;
        }
        Ok(bytes
            .into_iter()
            .map(|(f, b)| (f, b.div_ceil(PAGE_SIZE as u64)))
            .collect())
    }
}

/// Adds one page of unit `au` to its figures: a data page (heap page or B-tree leaf) with
/// its live rows, or an index page. Unformatted pages and pages a former owner formatted
/// in a reused extent (another unit's id) do not count.
fn count_page(page: &Page, au: u64, space: &mut UnitSpace) -> Result<(), StorageError> {
    if page.is_unformatted() {
        return Ok(());
    }
    let h = page.header()?;
    if h.allocation_unit_id != au {
        return Ok(());
    }
    match h.page_type {
        PageType::Data => {
            space.data_pages += 1;
            for (_, rec) in data_page::records(page) {
                space.rows += !record::is_ghost(rec?) as u64;
            }
        }
        PageType::Index => space.index_pages += 1,
        _ => {}
    }
    Ok(())
}
