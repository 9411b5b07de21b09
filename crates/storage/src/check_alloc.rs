//! DBCC CHECKALLOC, the allocation half of CHECKDB: reads every data file's GAM and SGAM
//! pages and every allocation unit's IAM chain (the catalog's own at (1:8) included) and
//! cross-checks them, extent by extent. Pure reading: nothing here writes.
//!
//! The model: each usable extent (all 8 pages inside its file) must have exactly one
//! *claimant* among
//! - the GAM, when its bit says free;
//! - the SGAM, when its bit is set (a mixed extent with a free page; extentdb makes none);
//! - the system, when the extent holds fixed pages (`layout::is_reserved_extent`: extent 0
//!   of every file, extent 1 of file 1, PFS extents, the first extent of each GAM interval
//!   above 0), which the GAM keeps allocated and no IAM maps;
//! - each IAM page that marks it.
//!
//! No claimant is SQL Server's Msg 8905 (allocated in the GAM, owned by no SGAM or IAM).
//! Exactly GAM and SGAM is Msg 8903. Any other two or more is Msg 8904 (allocated by more
//! than one allocation object), followed by one Msg 8913 per claimant, as SQL Server does
//! when, e.g., an IAM owns an extent the GAM calls free ('GAM' is one of the claimants).
//! An allocation page with a wrong header (type, allocation unit, interval) is Msg 8946;
//! its bits are then not used. Page reads verify checksums and page ids: a page failing
//! them ends the check with that read error (SQL Server would report it and go on).
//!
//! Not checked yet: PFS bytes against IAM ownership (8948, 8914), IAM chain links
//! (2575/2576: previous links, sequence numbers, loops are cut short silently), IAM bits
//! for extents beyond the end of their file, IAM pages in the wrong filegroup, DCM/BCM.
//!
//! Consistency: the caller holds the database (the instance's per-database lock, or owns
//! it) for the whole check, so it sees one state of the maps; allocation pages are read
//! through the file's allocation cache, so changes not yet written back are seen. The online
//! snapshot of issue 6 replaces holding the lock later.

use std::collections::{BTreeMap, HashSet};

use extentdb_format::catalog::CATALOG_ALLOCATION_UNIT;
use extentdb_format::layout::{self, BitmapKind, CATALOG_IAM_PAGE};
use extentdb_format::{bitmap, iam, FileId, PageId, PageType, GAM_INTERVAL_EXTENTS};
use extentdb_format::{GAM_INTERVAL_PAGES, PAGES_PER_EXTENT};

use crate::{Database, StorageError};

/// Who claims an extent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Claimant {
    /// The GAM bit says the extent is free.
    Gam,
    /// The SGAM bit says the extent is mixed with a free page.
    Sgam,
    /// The extent holds fixed pages (file header, PFS, GAM, SGAM, DCM, BCM, boot).
    System,
    /// An IAM page of this allocation unit marks it.
    Unit(u64),
}

/// One allocation error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllocError {
    /// Msg 8904 (and 8913 per claimant): `extent` (its first page) has these claimants.
    MultipleClaims {
        extent: PageId,
        claimants: Vec<Claimant>,
    },
    /// Msg 8905: `extent` is allocated in the GAM and claimed by nothing.
    Unclaimed { extent: PageId },
    /// Msg 8903: `extent` is free in the GAM at `gam` and mixed in the SGAM at `sgam`.
    GamAndSgam {
        extent: PageId,
        gam: PageId,
        sgam: PageId,
    },
    /// Msg 8946: the allocation page at `page` (of kind "GAM", "SGAM" or "IAM") has a bad
    /// header: its type is `page_type`, or its allocation unit or interval is wrong.
    BadAllocationPage {
        page: PageId,
        kind: &'static str,
        page_type: u8,
    },
}

/// What one allocation unit's IAM chain holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitAllocation {
    pub allocation_unit_id: u64,
    pub iam_pages: u32,
    pub extents: u64,
}

/// The result of a CHECKALLOC run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckAllocReport {
    /// In (file, extent) order, bad pages first.
    pub errors: Vec<AllocError>,
    /// Every allocation unit, the catalog's (1) first.
    pub units: Vec<UnitAllocation>,
    /// Data files checked and extents examined.
    pub files: u32,
    pub extents: u64,
}

impl Database {
    /// Runs the allocation checks of the module docs over every data file.
    pub fn check_alloc(&self) -> Result<CheckAllocReport, StorageError> {
        let mut report = CheckAllocReport::default();
        // Claimants from the IAM chains, keyed by (file, extent).
        let mut claims: BTreeMap<(u16, u32), Vec<Claimant>> = BTreeMap::new();
        let mut units: Vec<(u64, PageId)> = vec![(
            CATALOG_ALLOCATION_UNIT,
            PageId {
                file: FileId::PRIMARY,
                page: CATALOG_IAM_PAGE,
            },
        )];
        units.extend(
            self.catalog
                .allocation_units
                .iter()
                .filter(|a| a.allocation_unit_id != CATALOG_ALLOCATION_UNIT)
                .map(|a| (a.allocation_unit_id, a.first_iam_page)),
        );
        for (au, first) in units {
            let mut unit = UnitAllocation {
                allocation_unit_id: au,
                iam_pages: 0,
                extents: 0,
            };
            let mut seen = HashSet::new();
            let mut at = first;
            while !at.is_null() && seen.insert(at) {
                let Some(p) = self.read_iam(at, au, &mut report.errors)? else {
                    break;
                };
                unit.iam_pages += 1;
                let start = iam::start_page(&p);
                let first_extent = start.page.0 / PAGES_PER_EXTENT;
                let mut i = 0;
                while let Some(bit) = bitmap::next_set(&p, i, GAM_INTERVAL_EXTENTS) {
                    claims
                        .entry((start.file.0, first_extent + bit))
                        .or_default()
                        .push(Claimant::Unit(au));
                    unit.extents += 1;
                    i = bit + 1;
                }
                at = p.header()?.next_page;
            }
            report.units.push(unit);
        }

        let mut extent_errors = Vec::new();
        for (&file_id, df) in &self.data_files {
            report.files += 1;
            let usable = df.usable_extents();
            for interval in 0..usable.div_ceil(GAM_INTERVAL_EXTENTS) {
                let gam_no = layout::bitmap_page(BitmapKind::Gam, interval);
                let sgam_no = layout::bitmap_page(BitmapKind::Sgam, interval);
                let gam_at = PageId::new(file_id, gam_no.0);
                let sgam_at = PageId::new(file_id, sgam_no.0);
                let gam = df.read_page(gam_no)?;
                let gam = match check_bitmap_header(&gam, PageType::Gam, false) {
                    true => Some(gam),
                    false => {
                        report.errors.push(bad_page(gam_at, "GAM", &gam));
                        None
                    }
                };
                let sgam = df.read_page(sgam_no)?;
                let sgam = match check_bitmap_header(&sgam, PageType::Sgam, true) {
                    true => Some(sgam),
                    false => {
                        report.errors.push(bad_page(sgam_at, "SGAM", &sgam));
                        None
                    }
                };
                let base = interval * GAM_INTERVAL_EXTENTS;
                let end = usable.min(base + GAM_INTERVAL_EXTENTS);
                for e in base..end {
                    report.extents += 1;
                    let mut who = claims.remove(&(file_id, e)).unwrap_or_default();
                    let bit = e - base;
                    let gam_free = gam.as_ref().map(|g| bitmap::get_bit(g, bit));
                    let sgam_set = sgam.as_ref().is_some_and(|s| bitmap::get_bit(s, bit));
                    if gam_free == Some(true) {
                        who.push(Claimant::Gam);
                    }
                    if sgam_set {
                        who.push(Claimant::Sgam);
                    }
                    if layout::is_reserved_extent(extentdb_format::ExtentNo(e), df.is_primary()) {
                        who.push(Claimant::System);
                    }
                    who.sort_unstable();
                    let extent = PageId::new(file_id, e * PAGES_PER_EXTENT);
                    match who.as_slice() {
                        // An unreadable GAM: nothing to say about unclaimed extents.
                        [] if gam.is_none() => {}
                        [] => extent_errors.push(AllocError::Unclaimed { extent }),
                        [_] => {}
                        [Claimant::Gam, Claimant::Sgam] => {
                            extent_errors.push(AllocError::GamAndSgam {
                                extent,
                                gam: gam_at,
                                sgam: sgam_at,
                            })
                        }
                        _ => extent_errors.push(AllocError::MultipleClaims {
                            extent,
                            claimants: who,
                        }),
                    }
                }
            }
        }
        report.errors.extend(extent_errors);
        Ok(report)
    }

    /// Reads IAM page `at` of unit `au`; a page that is not a valid IAM page of `au`
    /// mapping an interval of an existing data file is recorded as Msg 8946 and skipped.
    fn read_iam(
        &self,
        at: PageId,
        au: u64,
        errors: &mut Vec<AllocError>,
    ) -> Result<Option<extentdb_format::Page>, StorageError> {
        let Some(file) = self.data_files.get(&at.file.0) else {
            errors.push(AllocError::BadAllocationPage {
                page: at,
                kind: "IAM",
                page_type: 0,
            });
            return Ok(None);
        };
        let p = file.read_page(at.page)?;
        let start = iam::start_page(&p);
        let ok = !p.is_unformatted()
            && iam::validate(&p, at).is_ok()
            && p.header()?.allocation_unit_id == au
            && self.data_files.contains_key(&start.file.0)
            && start.page.0.is_multiple_of(GAM_INTERVAL_PAGES);
        if ok {
            Ok(Some(p))
        } else {
            errors.push(bad_page(at, "IAM", &p));
            Ok(None)
        }
    }
}

/// True when a GAM or SGAM page is the right type and owned by no unit; an unformatted
/// page is right only where that is the page's empty state (SGAM).
fn check_bitmap_header(p: &extentdb_format::Page, t: PageType, may_be_unformatted: bool) -> bool {
    if p.is_unformatted() {
        return may_be_unformatted;
    }
    p.header()
        .is_ok_and(|h| h.page_type == t && h.allocation_unit_id == 0)
}

fn bad_page(page: PageId, kind: &'static str, p: &extentdb_format::Page) -> AllocError {
    AllocError::BadAllocationPage {
        page,
        kind,
        page_type: p.raw_header().page_type,
    }
}
