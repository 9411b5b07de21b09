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
//! its bits are then not used. An IAM page that reads as zeros is 8946 (type 0) and 8909
//! (its header names page (0:0)), and its unit's chain is damaged (`chain_damaged`): the
//! table cannot be checked (7965, `check_db`). Page reads verify checksums and page ids: a page failing them
//! is reported (8939) and its bits are not used, and the check goes on.
//!
//! Each IAM chain is followed from the catalog's first page: a next pointer to a page that
//! is not an IAM page of the unit, or back into the chain, is Msg 2575; a previous pointer
//! that is not the page the chain came from ((0:0) for the first) is Msg 2576; a sequence
//! number that is not one more than its predecessor's is Msg 2577. The PFS must mark each
//! IAM page (0x50) and each catalog page (0x40), Msg 8948; IAM bits for extents past the
//! end of their file are reported (8939).
//!
//! Not checked: PFS free-space bytes of data pages (8914; the engine does not keep them),
//! IAM pages in the wrong filegroup, DCM/BCM (the engine has neither yet).
//!
//! Consistency: the check reads a `CheckSource`, a view of the files as they were at one
//! instant that stays exact while other sessions write (`snapshot`).

use std::collections::{BTreeMap, HashSet};

use extentdb_format::catalog::CATALOG_ALLOCATION_UNIT;
use extentdb_format::layout::{self, BitmapKind, CATALOG_IAM_PAGE};
use extentdb_format::{bitmap, iam, FileId, PageId, PageType, GAM_INTERVAL_EXTENTS};
use extentdb_format::{GAM_INTERVAL_PAGES, PAGES_PER_EXTENT};

use extentdb_format::{pfs, Page};

use crate::snapshot::CheckSource;
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
    /// An allocation page failed its page audit (checksum, or its own page id): Msg 8939
    /// (its bits are not used; SQL Server adds 8998 for the range it could not check).
    PageAudit {
        page: PageId,
        reason: String,
        checksum: bool,
    },
    /// An allocation page could not be read (Msg 823).
    Unreadable { page: PageId, reason: String },
    /// Msg 8948: page `page` (an IAM or catalog page in use) is marked `actual` in the PFS
    /// page `pfs`, where `expected` (0x50 for an IAM page, 0x40 for a catalog page) is due.
    PfsWrongType {
        page: PageId,
        pfs: PageId,
        actual: u8,
        expected: u8,
    },
    /// An IAM page of `allocation_unit_id` maps `extent`, which lies past the end of its
    /// file or in no file (Msg 8904 family: SQL Server's 2576 / 8906 would name it).
    BeyondFile {
        extent: PageId,
        allocation_unit_id: u64,
    },
    /// Msg 2575: the next pointer of IAM page `from` names `page`, which is not the next
    /// IAM page of the unit's chain (not an IAM page of the unit, or one already in the
    /// chain: a loop).
    IamNextNotDetected {
        page: PageId,
        from: PageId,
        allocation_unit_id: u64,
    },
    /// Msg 2576: the previous pointer of IAM page `from` names `page`, where the chain
    /// reached `from` from another page ((0:0) for the first page, from the catalog).
    IamPrevNotDetected {
        page: PageId,
        from: PageId,
        allocation_unit_id: u64,
    },
    /// Msg 8909 (object unknown): the allocation page at `page` names `actual` in its
    /// header; a page of zeros names (0:0).
    WrongPageId { page: PageId, actual: PageId },
    /// Msg 2577: IAM page `from` with sequence number `from_sequence` points to `page`
    /// with `sequence`, which is not one more.
    IamSequence {
        allocation_unit_id: u64,
        from: PageId,
        from_sequence: u32,
        page: PageId,
        sequence: u32,
    },
}

/// What one allocation unit's IAM chain holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitAllocation {
    pub allocation_unit_id: u64,
    pub iam_pages: u32,
    pub extents: u64,
    /// The chain could not be followed to its end (a page of it unusable, or a next
    /// pointer out of the chain): the unit's extents are not known, and its table cannot
    /// be checked (Msg 7965).
    pub chain_damaged: bool,
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
    /// Runs the allocation checks of the module docs over every data file, on a view of the
    /// database as it is now (call under the database's lock; see `snapshot`).
    pub fn check_alloc(&self) -> Result<CheckAllocReport, StorageError> {
        let src = self.check_source()?;
        Ok(check_allocation(&src)?.0)
    }
}

/// Which allocation unit owns each extent mapped by an IAM page: (file, extent) -> unit,
/// the first claimant when several IAM pages claim one extent (8904 reports that).
pub type Ownership = BTreeMap<(u16, u32), u64>;

/// The allocation checks of the module docs on a view, with who owns each extent.
pub fn check_allocation(src: &CheckSource) -> Result<(CheckAllocReport, Ownership), StorageError> {
    let mut report = CheckAllocReport::default();
    // Claimants from the IAM chains, keyed by (file, extent).
    let mut claims: BTreeMap<(u16, u32), Vec<Claimant>> = BTreeMap::new();
    let mut owners = Ownership::new();
    // Pages in use the PFS must mark: IAM pages (0x50) and the catalog chain (0x40).
    let mut marked: Vec<(PageId, u8)> = Vec::new();
    let mut units: Vec<(u64, PageId)> = vec![(
        CATALOG_ALLOCATION_UNIT,
        PageId {
            file: FileId::PRIMARY,
            page: CATALOG_IAM_PAGE,
        },
    )];
    units.extend(
        src.catalog
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
            chain_damaged: false,
        };
        let mut seen = HashSet::new();
        let mut at = first;
        // The page the chain came from, and its sequence number.
        let mut from: Option<(PageId, u32)> = None;
        while !at.is_null() {
            let next_not_detected = |from: Option<(PageId, u32)>| {
                from.map(|(f, _)| AllocError::IamNextNotDetected {
                    page: at,
                    from: f,
                    allocation_unit_id: au,
                })
            };
            if !seen.insert(at) {
                report.errors.extend(next_not_detected(from));
                unit.chain_damaged = true;
                break;
            }
            let Some(p) = read_iam(src, at, au, &mut report.errors)? else {
                report.errors.extend(next_not_detected(from));
                unit.chain_damaged = true;
                break;
            };
            let prev = p.raw_header().prev_page;
            let expected_prev = from.map_or(PageId::NULL, |(f, _)| f);
            if prev != expected_prev {
                report.errors.push(AllocError::IamPrevNotDetected {
                    page: prev,
                    from: at,
                    allocation_unit_id: au,
                });
            }
            let sequence = iam::sequence(&p);
            if let Some((f, fs)) = from {
                if fs.checked_add(1) != Some(sequence) {
                    report.errors.push(AllocError::IamSequence {
                        allocation_unit_id: au,
                        from: f,
                        from_sequence: fs,
                        page: at,
                        sequence,
                    });
                }
            }
            from = Some((at, sequence));
            marked.push((at, pfs::ALLOCATED | pfs::IAM_PAGE));
            unit.iam_pages += 1;
            let start = iam::start_page(&p);
            let first_extent = start.page.0 / PAGES_PER_EXTENT;
            let mut i = 0;
            while let Some(bit) = bitmap::next_set(&p, i, GAM_INTERVAL_EXTENTS) {
                let key = (start.file.0, first_extent + bit);
                claims.entry(key).or_default().push(Claimant::Unit(au));
                owners.entry(key).or_insert(au);
                unit.extents += 1;
                i = bit + 1;
            }
            at = p.raw_header().next_page;
        }
        report.units.push(unit);
    }

    // The catalog chain, from the boot page.
    let mut seen = HashSet::new();
    let mut at = src.boot.catalog_first_page;
    while !at.is_null() && at.file == FileId::PRIMARY && seen.insert(at) {
        let Some(p) = read_checked(src, at, &mut report.errors)? else {
            break;
        };
        marked.push((at, pfs::ALLOCATED));
        at = p.raw_header().next_page;
    }
    check_pfs(src, &marked, &mut report.errors)?;

    let mut extent_errors = Vec::new();
    for (&file_id, f) in &src.files {
        report.files += 1;
        let usable = f.size_pages / PAGES_PER_EXTENT;
        let primary = file_id == FileId::PRIMARY.0;
        for interval in 0..usable.div_ceil(GAM_INTERVAL_EXTENTS) {
            let gam_at = PageId::new(file_id, layout::bitmap_page(BitmapKind::Gam, interval).0);
            let sgam_at = PageId::new(file_id, layout::bitmap_page(BitmapKind::Sgam, interval).0);
            let gam = read_bitmap(src, gam_at, PageType::Gam, "GAM", &mut report.errors)?;
            let sgam = read_bitmap(src, sgam_at, PageType::Sgam, "SGAM", &mut report.errors)?;
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
                if layout::is_reserved_extent(extentdb_format::ExtentNo(e), primary) {
                    who.push(Claimant::System);
                }
                who.sort_unstable();
                let extent = PageId::new(file_id, e * PAGES_PER_EXTENT);
                match who.as_slice() {
                    // An unreadable GAM: nothing to say about unclaimed extents.
                    [] if gam.is_none() => {}
                    [] => extent_errors.push(AllocError::Unclaimed { extent }),
                    [_] => {}
                    [Claimant::Gam, Claimant::Sgam] => extent_errors.push(AllocError::GamAndSgam {
                        extent,
                        gam: gam_at,
                        sgam: sgam_at,
                    }),
                    _ => extent_errors.push(AllocError::MultipleClaims {
                        extent,
                        claimants: who,
                    }),
                }
            }
        }
    }
    // IAM bits for extents no data file has (beyond a file's end, or of no file).
    for ((file, e), who) in claims {
        let units: Vec<u64> = who
            .iter()
            .filter_map(|c| match c {
                Claimant::Unit(u) => Some(*u),
                _ => None,
            })
            .collect();
        for u in units {
            extent_errors.push(AllocError::BeyondFile {
                extent: PageId::new(file, e * PAGES_PER_EXTENT),
                allocation_unit_id: u,
            });
        }
    }
    report.errors.extend(extent_errors);
    Ok((report, owners))
}

/// Each page of `marked` must carry its PFS value (8948); a PFS page failing its audit is
/// reported once and its pages are not judged.
fn check_pfs(
    src: &CheckSource,
    marked: &[(PageId, u8)],
    errors: &mut Vec<AllocError>,
) -> Result<(), StorageError> {
    let mut pfs_pages: BTreeMap<PageId, Option<Page>> = BTreeMap::new();
    for &(page, expected) in marked {
        let pfs_no = layout::pfs_page_for(page.page);
        let pfs_at = PageId::new(page.file.0, pfs_no.0);
        if let std::collections::btree_map::Entry::Vacant(e) = pfs_pages.entry(pfs_at) {
            e.insert(read_checked(src, pfs_at, errors)?);
        }
        let actual = match &pfs_pages[&pfs_at] {
            Some(p) if p.is_unformatted() => 0,
            Some(p) if p.raw_header().page_type == PageType::Pfs as u8 => {
                pfs::get(p, pfs_no, page.page)
            }
            Some(_) | None => continue,
        };
        if actual & (pfs::ALLOCATED | pfs::IAM_PAGE) != expected {
            errors.push(AllocError::PfsWrongType {
                page,
                pfs: pfs_at,
                actual,
                expected,
            });
        }
    }
    Ok(())
}

/// Reads a page and checks it as a page (checksum, its own id); a failure is recorded as
/// `PageAudit` and gives None.
fn read_checked(
    src: &CheckSource,
    at: PageId,
    errors: &mut Vec<AllocError>,
) -> Result<Option<Page>, StorageError> {
    let p = match src.read_page(at) {
        Ok(p) => p,
        Err(StorageError::Io(e)) => {
            errors.push(AllocError::Unreadable {
                page: at,
                reason: e.to_string(),
            });
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    match p.verify(at) {
        Ok(_) => Ok(Some(p)),
        Err(e) => {
            errors.push(AllocError::PageAudit {
                page: at,
                reason: e.to_string(),
                checksum: p.raw_header().checksum != p.compute_checksum(),
            });
            Ok(None)
        }
    }
}

/// Reads a GAM or SGAM page; a bad one is recorded and gives None.
fn read_bitmap(
    src: &CheckSource,
    at: PageId,
    t: PageType,
    kind: &'static str,
    errors: &mut Vec<AllocError>,
) -> Result<Option<Page>, StorageError> {
    let Some(p) = read_checked(src, at, errors)? else {
        return Ok(None);
    };
    if check_bitmap_header(&p, t, t == PageType::Sgam) {
        Ok(Some(p))
    } else {
        errors.push(bad_page(at, kind, &p));
        Ok(None)
    }
}

/// Reads IAM page `at` of unit `au`; a page that is not a valid IAM page of `au` mapping an
/// interval of an existing data file is recorded as Msg 8946 and skipped.
fn read_iam(
    src: &CheckSource,
    at: PageId,
    au: u64,
    errors: &mut Vec<AllocError>,
) -> Result<Option<Page>, StorageError> {
    let in_range = src
        .files
        .get(&at.file.0)
        .is_some_and(|f| at.page.0 < f.size_pages);
    if !in_range {
        errors.push(AllocError::BadAllocationPage {
            page: at,
            kind: "IAM",
            page_type: 0,
        });
        return Ok(None);
    }
    let Some(p) = read_checked(src, at, errors)? else {
        return Ok(None);
    };
    let start = iam::start_page(&p);
    let ok = !p.is_unformatted()
        && iam::validate(&p, at).is_ok()
        && p.raw_header().allocation_unit_id == au
        && src.files.contains_key(&start.file.0)
        && start.page.0.is_multiple_of(GAM_INTERVAL_PAGES);
    if ok {
        return Ok(Some(p));
    }
    errors.push(bad_page(at, "IAM", &p));
    // A page of zeros passes the page audit (space never written) but, where an IAM page
    // is due, names no page: (0:0), as SQL Server's 8909 says.
    let actual = p.raw_header().this_page;
    if actual != at {
        errors.push(AllocError::WrongPageId { page: at, actual });
    }
    Ok(None)
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
