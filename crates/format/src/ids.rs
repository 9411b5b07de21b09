//! Newtypes that keep file ids, page numbers, extent numbers and LSNs apart.
//! See FORMAT.md, "Identifiers".

use std::fmt;

use crate::PAGES_PER_EXTENT;

/// A file's id within its database: 1 is the primary data file, 2 the first log file,
/// 3 and up further files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FileId(pub u16);

impl FileId {
    pub const PRIMARY: FileId = FileId(1);
    pub const FIRST_LOG: FileId = FileId(2);
}

/// A page's number within its file (byte offset / 8192).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PageNo(pub u32);

impl PageNo {
    /// The extent this page belongs to.
    pub fn extent(self) -> ExtentNo {
        ExtentNo(self.0 / PAGES_PER_EXTENT)
    }
    /// Byte offset of the page in its file.
    pub fn offset(self) -> u64 {
        self.0 as u64 * crate::PAGE_SIZE as u64
    }
}

/// An extent's number within its file (first page / 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ExtentNo(pub u32);

impl ExtentNo {
    /// The extent's first page.
    pub fn first_page(self) -> PageNo {
        PageNo(self.0 * PAGES_PER_EXTENT)
    }
}

/// A page's address in a database: (file, page), printed as SQL Server does, `(1:9)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PageId {
    pub file: FileId,
    pub page: PageNo,
}

impl PageId {
    pub const NULL: PageId = PageId {
        file: FileId(0),
        page: PageNo(0),
    };
    pub fn new(file: u16, page: u32) -> PageId {
        PageId {
            file: FileId(file),
            page: PageNo(page),
        }
    }
    pub fn is_null(self) -> bool {
        self == PageId::NULL
    }
}

impl fmt::Display for PageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}:{})", self.file.0, self.page.0)
    }
}

/// A log sequence number: (VLF sequence : block : slot), printed as SQL Server prints it,
/// `00000025:00000190:0001`. Ordered lexicographically by its three parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn {
    pub vlf_sequence: u32,
    pub block: u32,
    pub slot: u16,
}

impl Lsn {
    pub const ZERO: Lsn = Lsn {
        vlf_sequence: 0,
        block: 0,
        slot: 0,
    };
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:08x}:{:08x}:{:04x}",
            self.vlf_sequence, self.block, self.slot
        )
    }
}
