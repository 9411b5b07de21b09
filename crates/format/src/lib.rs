//! The on-disk format of extentdb, as pure encode/decode with no I/O.
//!
//! This crate is the executable twin of `docs/FORMAT.md`: every structure here names the
//! section of that document that specifies it, sizes are pinned by compile-time asserts,
//! and the fixture tests in `tests/` decode golden bytes. There is no third copy of the
//! layout anywhere else.
//!
//! Invariants:
//! 1. Decoding bytes read from disk never panics: it returns `FormatError::Corrupt`.
//! 2. Every formatted page carries its own id and a CRC-32C checksum; an all-zero page is
//!    "unformatted" (space added by instant file initialization that nothing wrote yet).
//! 3. `PAGES_PER_EXTENT * PAGE_SIZE == EXTENT_SIZE` and the other constant relations below
//!    hold at compile time.
//!
//! Deliberately absent: anything that reads or writes a file (see the `io` crate), and any
//! policy about which page to allocate (see `storage`).

pub mod backup;
pub mod bitmap;
pub mod boot;
pub mod catalog;
pub mod codec;
pub mod collation;
pub mod data_page;
pub mod file_header;
pub mod iam;
pub mod ids;
pub mod key;
pub mod layout;
pub mod log;
pub mod log_record;
pub mod module;
pub mod page;
pub mod pfs;
pub mod principals;
pub mod record;
pub mod statistics;

pub use ids::{ExtentNo, FileId, Lsn, PageId, PageNo};
pub use page::{Page, PageHeader, PageType, PageView};

/// Bytes in a page.
pub const PAGE_SIZE: usize = 8192;
/// Bytes in the page header that starts every formatted page.
pub const PAGE_HEADER_SIZE: usize = 96;
/// Pages in an extent.
pub const PAGES_PER_EXTENT: u32 = 8;
/// Bytes in an extent.
pub const EXTENT_SIZE: u64 = 65_536;
/// The disk's atomic write unit that the format assumes (see FORMAT.md, "Assumptions").
pub const SECTOR_SIZE: usize = 512;
/// Pages covered by one PFS page.
pub const PFS_INTERVAL_PAGES: u32 = 8088;
/// Extents covered by one GAM, SGAM, DCM or BCM page (and one IAM page).
pub const GAM_INTERVAL_EXTENTS: u32 = 63_904;
/// Pages covered by one GAM interval.
pub const GAM_INTERVAL_PAGES: u32 = GAM_INTERVAL_EXTENTS * PAGES_PER_EXTENT;
/// Pages in one megabyte.
pub const PAGES_PER_MB: u32 = 128;

const _: () = assert!(PAGES_PER_EXTENT as u64 * PAGE_SIZE as u64 == EXTENT_SIZE);
const _: () = assert!(PAGE_SIZE.is_multiple_of(SECTOR_SIZE));
const _: () = assert!(GAM_INTERVAL_PAGES == 511_232);
const _: () = assert!(PAGES_PER_MB as usize * PAGE_SIZE == 1 << 20);
const _: () = assert!(PAGE_HEADER_SIZE + PFS_INTERVAL_PAGES as usize <= PAGE_SIZE);
const _: () =
    assert!(bitmap::BITMAP_OFFSET + (GAM_INTERVAL_EXTENTS as usize).div_ceil(8) <= PAGE_SIZE);

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The bytes are not a valid structure of the expected kind.
    #[error("page {page}: {reason}")]
    Corrupt { page: PageId, reason: String },
    /// A value does not fit the on-disk field that must hold it.
    #[error("{what} does not fit: {detail}")]
    TooLarge { what: &'static str, detail: String },
}

/// Shorthand for a corruption error.
pub fn corrupt(page: PageId, reason: impl Into<String>) -> FormatError {
    FormatError::Corrupt {
        page,
        reason: reason.into(),
    }
}
