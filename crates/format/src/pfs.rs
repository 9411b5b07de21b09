//! Page Free Space pages. See FORMAT.md, "PFS page".
//!
//! One byte per page for 8,088 pages, starting right after the page header:
//! bits 0-2 fullness of heap pages (0 empty, 1 up to 50%, 2 up to 80%, 3 up to 95%,
//! 4 over 95%), 0x08 has ghost records, 0x10 IAM page, 0x20 mixed extent, 0x40 allocated.

use crate::{Page, PageHeader, PageId, PageNo, PageType, PAGE_HEADER_SIZE, PFS_INTERVAL_PAGES};

pub const ALLOCATED: u8 = 0x40;
pub const MIXED_EXTENT: u8 = 0x20;
pub const IAM_PAGE: u8 = 0x10;
pub const GHOST_RECORDS: u8 = 0x08;
pub const FULLNESS_MASK: u8 = 0x07;

/// Formats an empty PFS page at `at`.
pub fn new_pfs_page(at: PageId) -> Page {
    Page::new(&PageHeader::new(PageType::Pfs, at))
}

/// The first page covered by the PFS page at `pfs`.
pub fn first_covered(pfs: PageNo) -> PageNo {
    if pfs.0 == 1 {
        PageNo(0)
    } else {
        pfs
    }
}

/// Byte offset of `page`'s entry in the PFS page `pfs` that covers it.
fn entry_offset(pfs: PageNo, page: PageNo) -> usize {
    let index = page.0 - first_covered(pfs).0;
    assert!(
        index < PFS_INTERVAL_PAGES,
        "page {} not covered by PFS {}",
        page.0,
        pfs.0
    );
    PAGE_HEADER_SIZE + index as usize
}

/// Reads `page`'s PFS byte from the PFS page `pfs_page` (located at `pfs`).
pub fn get(pfs_page: &Page, pfs: PageNo, page: PageNo) -> u8 {
    pfs_page.bytes()[entry_offset(pfs, page)]
}

/// Writes `page`'s PFS byte.
pub fn set(pfs_page: &mut Page, pfs: PageNo, page: PageNo, value: u8) {
    pfs_page.bytes_mut()[entry_offset(pfs, page)] = value;
}

/// Renders a PFS byte as DBCC PAGE does: `0x40 ALLOCATED   0_PCT_FULL`.
pub fn describe(value: u8) -> String {
    let alloc = if value & ALLOCATED != 0 {
        "ALLOCATED"
    } else {
        "NOT ALLOCATED"
    };
    let pct = match value & FULLNESS_MASK {
        0 => "0_PCT_FULL",
        1 => "50_PCT_FULL",
        2 => "80_PCT_FULL",
        3 => "95_PCT_FULL",
        _ => "100_PCT_FULL",
    };
    let mut s = format!("0x{value:02x} {alloc}   {pct}");
    if value & IAM_PAGE != 0 {
        s.push_str(" IAM Page");
    }
    if value & MIXED_EXTENT != 0 {
        s.push_str(" Mixed Ext");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves the first PFS page covers pages 0..8088 and the second starts at itself.
    #[test]
    fn coverage() {
        let mut p = new_pfs_page(PageId::new(1, 1));
        set(&mut p, PageNo(1), PageNo(8087), ALLOCATED);
        assert_eq!(get(&p, PageNo(1), PageNo(8087)), ALLOCATED);
        assert_eq!(first_covered(PageNo(8088)), PageNo(8088));
        assert_eq!(describe(0x40), "0x40 ALLOCATED   0_PCT_FULL");
    }
}
