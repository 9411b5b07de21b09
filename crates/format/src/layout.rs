//! Where the fixed pages of a data file live. See FORMAT.md, "Data file layout".
//!
//! Interval 0 of every data file: page 0 file header, 1 PFS, 2 GAM, 3 SGAM, 6 DCM, 7 BCM.
//! GAM interval k > 0 starts at page k * 511,232 with GAM, SGAM at +1, DCM at +6, BCM at +7.
//! PFS pages sit at every multiple of 8,088 pages (page 1 for the first).
//! File 1 also holds the boot page (9), its mirror (10) and the catalog IAM page (8).
//!
//! Because extentdb allocates uniform extents only, an extent that holds any of these
//! fixed pages is reserved whole and never allocated: "free" means GAM-free.

use crate::PFS_INTERVAL_PAGES;
use crate::{ExtentNo, PageNo, GAM_INTERVAL_EXTENTS, GAM_INTERVAL_PAGES, PAGES_PER_EXTENT};

pub const FILE_HEADER_PAGE: PageNo = PageNo(0);
pub const FIRST_PFS_PAGE: PageNo = PageNo(1);
/// The catalog allocation unit's first IAM page, in file 1.
pub const CATALOG_IAM_PAGE: PageNo = PageNo(8);
/// The database boot page, in file 1.
pub const BOOT_PAGE: PageNo = PageNo(9);
/// The boot page's mirror, in file 1 (extentdb keeps two; see FORMAT.md, "Boot page").
pub const BOOT_MIRROR_PAGE: PageNo = PageNo(10);
/// Extents 0 and 1 of file 1 hold system pages; extent 0 only in other data files.
pub const PRIMARY_SYSTEM_EXTENTS: u32 = 2;

/// The kind of allocation bitmap page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitmapKind {
    Gam,
    Sgam,
    Dcm,
    Bcm,
}

/// The GAM interval an extent falls in.
pub fn gam_interval(extent: ExtentNo) -> u32 {
    extent.0 / GAM_INTERVAL_EXTENTS
}

/// The page of the `kind` bitmap of GAM interval `interval`.
pub fn bitmap_page(kind: BitmapKind, interval: u32) -> PageNo {
    let base = interval * GAM_INTERVAL_PAGES;
    let first = match kind {
        BitmapKind::Gam if interval == 0 => 2,
        BitmapKind::Gam => 0,
        BitmapKind::Sgam if interval == 0 => 3,
        BitmapKind::Sgam => 1,
        BitmapKind::Dcm => 6,
        BitmapKind::Bcm => 7,
    };
    PageNo(base + first)
}

/// The PFS page that covers `page`.
pub fn pfs_page_for(page: PageNo) -> PageNo {
    let interval = page.0 / PFS_INTERVAL_PAGES;
    if interval == 0 {
        FIRST_PFS_PAGE
    } else {
        PageNo(interval * PFS_INTERVAL_PAGES)
    }
}

/// True if the extent holds a fixed page (file header, PFS, GAM, SGAM, DCM, BCM, and in
/// file 1 the boot pages and catalog IAM), so it is never allocated.
pub fn is_reserved_extent(extent: ExtentNo, primary: bool) -> bool {
    if primary && extent.0 < PRIMARY_SYSTEM_EXTENTS {
        return true;
    }
    if extent.0.is_multiple_of(GAM_INTERVAL_EXTENTS) {
        return true;
    }
    let first = extent.0 * PAGES_PER_EXTENT;
    let last = first + PAGES_PER_EXTENT - 1;
    // A PFS page lies in this extent if a multiple of the PFS interval falls in [first, last].
    last / PFS_INTERVAL_PAGES != (first.saturating_sub(1)) / PFS_INTERVAL_PAGES || first == 0
}

/// The fixed pages inside extents `[0, extents)` of a data file, for formatting new space.
pub fn fixed_pages(from_extent: u32, to_extent: u32) -> Vec<(PageNo, FixedPage)> {
    let mut out = Vec::new();
    let (from_page, to_page) = (from_extent * PAGES_PER_EXTENT, to_extent * PAGES_PER_EXTENT);
    let first_interval = from_extent / GAM_INTERVAL_EXTENTS;
    let last_interval = to_extent.saturating_sub(1) / GAM_INTERVAL_EXTENTS;
    for k in first_interval..=last_interval {
        for (kind, fp) in [
            (BitmapKind::Gam, FixedPage::Gam),
            (BitmapKind::Sgam, FixedPage::Sgam),
            (BitmapKind::Dcm, FixedPage::Dcm),
            (BitmapKind::Bcm, FixedPage::Bcm),
        ] {
            let p = bitmap_page(kind, k);
            if p.0 >= from_page && p.0 < to_page {
                out.push((p, fp));
            }
        }
    }
    let mut pfs = pfs_page_for(PageNo(from_page));
    if pfs.0 < from_page {
        pfs = PageNo(if pfs.0 == 1 {
            PFS_INTERVAL_PAGES
        } else {
            pfs.0 + PFS_INTERVAL_PAGES
        });
    }
    while pfs.0 < to_page {
        out.push((pfs, FixedPage::Pfs));
        pfs = PageNo(if pfs.0 == 1 {
            PFS_INTERVAL_PAGES
        } else {
            pfs.0 + PFS_INTERVAL_PAGES
        });
    }
    out.sort_by_key(|(p, _)| *p);
    out
}

/// What a fixed page is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixedPage {
    Pfs,
    Gam,
    Sgam,
    Dcm,
    Bcm,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pins the free-extent arithmetic of REFERENCE.md: a 5 MB secondary file has 79
    /// allocatable extents and a 250 MB one 3,996 (extent 0 and the PFS extents reserved).
    #[test]
    fn reserved_extents_match_reference_arithmetic() {
        let free = |extents: u32| {
            (0..extents)
                .filter(|&e| !is_reserved_extent(ExtentNo(e), false))
                .count()
        };
        assert_eq!(free(80), 79);
        assert_eq!(free(4000), 3996);
        assert!(is_reserved_extent(ExtentNo(1011), false)); // holds PFS page 8088
        assert!(!is_reserved_extent(ExtentNo(1010), false));
        assert!(is_reserved_extent(ExtentNo(1), true));
        assert!(is_reserved_extent(ExtentNo(GAM_INTERVAL_EXTENTS), false));
    }

    /// Pins the fixed page positions of interval 0 and 1.
    #[test]
    fn fixed_page_positions() {
        assert_eq!(bitmap_page(BitmapKind::Gam, 0), PageNo(2));
        assert_eq!(bitmap_page(BitmapKind::Sgam, 1), PageNo(511_233));
        assert_eq!(bitmap_page(BitmapKind::Dcm, 1), PageNo(511_238));
        assert_eq!(pfs_page_for(PageNo(8087)), PageNo(1));
        assert_eq!(pfs_page_for(PageNo(8088)), PageNo(8088));
        let f = fixed_pages(0, 2100);
        let pages: Vec<u32> = f.iter().map(|(p, _)| p.0).collect();
        assert_eq!(pages, vec![1, 2, 3, 6, 7, 8088, 16176]);
        let g = fixed_pages(1011, 1012);
        assert_eq!(g, vec![(PageNo(8088), FixedPage::Pfs)]);
    }
}
