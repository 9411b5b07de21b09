//! Index Allocation Map pages. See FORMAT.md, "IAM page".
//!
//! An IAM page maps the extents one allocation unit owns in one GAM interval of one file.
//! The pages of an allocation unit form a chain through the header's next/prev links, in
//! the order they were created; the first is named in the catalog.
//!
//! Body after the 96-byte header: sequence number u32 at 96, start page (the first page of
//! the mapped interval: page u32, file u16) at 100, 8 single-page slots of 6 bytes at 108
//! (unused: uniform extents only), and the extent bitmap at 194.

use crate::codec::{get_u16, get_u32, put_u16, put_u32};
use crate::{corrupt, FileId, FormatError, Page, PageHeader, PageId, PageNo, PageType};

const OFF_SEQUENCE: usize = 96;
const OFF_START_PAGE: usize = 100;
const OFF_START_FILE: usize = 104;

/// Formats an empty IAM page at `at` for `allocation_unit_id`, mapping the interval that
/// starts at `start`.
pub fn new_iam_page(at: PageId, allocation_unit_id: u64, sequence: u32, start: PageId) -> Page {
    let mut h = PageHeader::new(PageType::Iam, at);
    h.allocation_unit_id = allocation_unit_id;
    let mut p = Page::new(&h);
    let b = p.bytes_mut();
    put_u32(b, OFF_SEQUENCE, sequence);
    put_u32(b, OFF_START_PAGE, start.page.0);
    put_u16(b, OFF_START_FILE, start.file.0);
    p
}

/// The interval an IAM page maps: its first page.
pub fn start_page(p: &Page) -> PageId {
    let b = p.bytes();
    PageId {
        page: PageNo(get_u32(b, OFF_START_PAGE)),
        file: FileId(get_u16(b, OFF_START_FILE)),
    }
}

/// The IAM page's position in its chain.
pub fn sequence(p: &Page) -> u32 {
    get_u32(p.bytes(), OFF_SEQUENCE)
}

/// Validates an IAM page's fixed fields beyond the common header checks.
pub fn validate(p: &Page, at: PageId) -> Result<(), FormatError> {
    let h = p.header()?;
    if h.page_type != PageType::Iam {
        return Err(corrupt(
            at,
            format!("expected an IAM page, found type {}", h.page_type as u8),
        ));
    }
    let start = start_page(p);
    if !start.page.0.is_multiple_of(crate::GAM_INTERVAL_PAGES) {
        return Err(corrupt(
            at,
            format!("IAM start page {start} is not an interval start"),
        ));
    }
    Ok(())
}
