//! DBCC CHECKALLOC (`Database::check_alloc`): zero errors on healthy databases (new; after
//! inserts spread over several autogrowing files; after SHRINKFILE EMPTYFILE, REBALANCE
//! and a crash), and each kind of map corruption found, with the extent it names, when
//! written straight into the files of a stopped database (checksums fixed up, so they are
//! not read errors).

mod common;
use common::{ctx, file, heap_and_tree, insert_scrambled, spec, Quiet};

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use extentdb_format::file_header::FileType;
use extentdb_format::layout::{self, BitmapKind};
use extentdb_format::{bitmap, iam, Page, PageId, PageType, GAM_INTERVAL_EXTENTS};
use extentdb_format::{PAGES_PER_EXTENT, PAGE_SIZE};
use extentdb_io::os::OsFileSystem;
use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_io::FileSystem;
use extentdb_storage::check_alloc::{AllocError, Claimant};
use extentdb_storage::check_db::{check_database, CheckOptions};
use extentdb_storage::Database;

/// Asserts CHECKALLOC finds nothing and the catalog unit plus every table's unit is listed.
fn assert_clean(db: &Database, what: &str) {
    let r = db.check_alloc().unwrap();
    assert!(r.errors.is_empty(), "{what}: {:?}", r.errors);
    assert_eq!(
        r.units.len(),
        1 + db.catalog.allocation_units.len(),
        "{what}"
    );
    assert_eq!(r.files as usize, db.data_files.len(), "{what}");
    // The whole of CHECKDB, physical and logical, on two workers.
    let src = db.check_source().unwrap();
    for physical_only in [false, true] {
        let opts = CheckOptions {
            physical_only,
            maxdop: 2,
            ..Default::default()
        };
        let report = check_database(&src, &opts).unwrap();
        assert!(report.findings.is_empty(), "{what}: {:#?}", report.findings);
        assert_eq!(report.objects.len(), db.catalog.tables.len(), "{what}");
        // Both tables take the same rows (`insert_scrambled`).
        let rows: Vec<u64> = report.objects.iter().map(|o| o.rows).collect();
        assert!(rows.windows(2).all(|w| w[0] == w[1]), "{what}: {rows:?}");
    }
}

/// Database `Chk` in `root` with data files 3 and 4 (512 KB, growing 1 MB) beside a 2 MB
/// primary, a heap and a clustered table filled with `rows` rows each; returns how many
/// data files grew.
fn loaded(fs: &dyn FileSystem, root: &Path, rows: u32) -> (Database, Vec<u32>, usize) {
    let mut s = spec("Chk", root);
    s.files[0].size_pages = 8 * 32;
    s.files[1].size_pages = 4096;
    let mut db = Database::create(&ctx(fs, true, &Quiet), &s).unwrap();
    assert_clean(&db, "new database");
    let more = vec![
        file("F3", root.join("f3.ndf"), FileType::Rows, 8 * 8),
        file("F4", root.join("f4.ndf"), FileType::Rows, 8 * 8),
    ];
    db.add_files(&ctx(fs, true, &Quiet), &more).unwrap();
    let sizes =
        |db: &Database| -> Vec<u32> { db.data_files.values().map(|f| f.size_pages).collect() };
    let before = sizes(&db);
    let tables = heap_and_tree(&mut db);
    insert_scrambled(&mut db, &tables, rows);
    let after = sizes(&db);
    let grown = before.iter().zip(&after).filter(|(a, b)| b > a).count();
    (db, tables, grown)
}

/// Proves a new database, a busy one, one after EMPTYFILE, after REBALANCE and after a
/// crash and recovery all check clean.
#[test]
fn healthy_databases_have_no_allocation_errors() {
    let fs = SimFileSystem::new(41, Faults::default());
    let root = Path::new("/sim");
    let (mut db, _, grown) = loaded(&fs, root, 3000);
    assert!(grown >= 2, "the files autogrew");
    assert_clean(&db, "after inserts with autogrowth");
    db.checkpoint().unwrap();
    assert_clean(&db, "after a checkpoint");

    // Room for the moves (EMPTYFILE does not grow the other files), then an empty file
    // for REBALANCE to fill.
    for (name, path) in [("F5", "f5.ndf"), ("F6", "f6.ndf")] {
        if name == "F6" {
            db.empty_file(3).unwrap();
            assert_clean(&db, "after EMPTYFILE of file 3");
        }
        let mut extra = file(name, root.join(path), FileType::Rows, 8 * 200);
        extra.growth = 0;
        db.add_files(&ctx(&fs, true, &Quiet), &[extra]).unwrap();
        assert_clean(&db, "after adding an empty file");
    }
    let mut steps = 0;
    while db.rebalance_step(1).unwrap().is_some_and(|left| left > 0) {
        steps += 1;
        assert!(steps < 10_000, "rebalance ends");
    }
    assert!(steps > 0, "rebalance moved something");
    assert_clean(&db, "after REBALANCE");

    // A crash without a checkpoint: the maps come back through redo.
    let wal = db.wal().unwrap();
    wal.flush(wal.end_lsn()).unwrap();
    drop(wal);
    drop(db);
    fs.crash();
    let db = Database::open(&fs, &root.join("Chk.mdf")).unwrap();
    assert_clean(&db, "after crash recovery");
}

/// A directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("xdb-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Reads page `page` of the file at `path`, lets `change` edit it, seals it (a valid
/// checksum) and writes it back.
fn patch_page(path: &Path, page: u32, change: impl FnOnce(&mut Page)) {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut buf = vec![0u8; PAGE_SIZE];
    f.seek(SeekFrom::Start(page as u64 * PAGE_SIZE as u64))
        .unwrap();
    f.read_exact(&mut buf).unwrap();
    let mut p = Page::from_bytes(&buf).unwrap();
    change(&mut p);
    p.seal();
    f.seek(SeekFrom::Start(page as u64 * PAGE_SIZE as u64))
        .unwrap();
    f.write_all(p.bytes()).unwrap();
    f.sync_all().unwrap();
}

/// Proves each corruption is reported, naming the extent: an owned extent freed in the GAM
/// (8904: GAM and the table), a free extent marked allocated (8905), an extent of one table
/// also set in the other's IAM page (8904: both tables), and a GAM page of the wrong type
/// (8946).
#[test]
fn corrupt_maps_are_reported() {
    let dir = TempDir::new("check-alloc");
    let fs = OsFileSystem::new();
    let (mut db, tables, _) = loaded(fs.as_ref(), &dir.0, 1000);
    let au = |db: &Database, t: u32| {
        db.catalog
            .tables
            .iter()
            .find(|x| x.object_id == t)
            .unwrap()
            .allocation_unit_id
    };
    let (heap, tree) = (au(&db, tables[0]), au(&db, tables[1]));
    let heap_extents = db.extents_of(heap).unwrap();
    let tree_extents = db.extents_of(tree).unwrap();
    // An extent of either table in file 3 (to flip in the GAM: which table's depends on
    // how the tree's splits spread its pages), a tree extent in file 4 and the heap's IAM
    // page for file 4 (to claim it twice), and a free extent of file 4.
    let (owner, owned) = [(heap, &heap_extents), (tree, &tree_extents)]
        .into_iter()
        .find_map(|(u, ex)| ex.iter().find(|(f, _)| *f == 3).map(|&(_, e)| (u, e)))
        .expect("a table's extent in file 3");
    let (_, stolen) = *tree_extents.iter().find(|(f, _)| *f == 4).unwrap();
    let heap_iam_4 = db
        .iam_chain(heap)
        .unwrap()
        .into_iter()
        .find(|at| {
            iam::start_page(&db.primary().read_page(at.page).unwrap())
                .file
                .0
                == 4
        })
        .unwrap();
    let free = db.data_files[&4].find_free_extent().unwrap().unwrap();
    assert_clean(&db, "before the corruption");
    db.checkpoint().unwrap();
    drop(db);

    let path = |id: u16| match id {
        1 => dir.0.join("Chk.mdf"),
        n => dir.0.join(format!("f{n}.ndf")),
    };
    let gam = |e: u32| layout::bitmap_page(BitmapKind::Gam, e / GAM_INTERVAL_EXTENTS).0;
    patch_page(&path(3), gam(owned.0), |p| {
        bitmap::set_bit(p, owned.0 % GAM_INTERVAL_EXTENTS, true)
    });
    patch_page(&path(4), gam(free.0), |p| {
        bitmap::set_bit(p, free.0 % GAM_INTERVAL_EXTENTS, false)
    });
    patch_page(&path(1), heap_iam_4.page.0, |p| {
        bitmap::set_bit(p, stolen.0 % GAM_INTERVAL_EXTENTS, true)
    });

    let db = Database::open(fs.as_ref(), &path(1)).unwrap();
    let r = db.check_alloc().unwrap();
    let at = |f: u16, e: u32| PageId::new(f, e * PAGES_PER_EXTENT);
    assert_eq!(
        r.errors,
        vec![
            AllocError::MultipleClaims {
                extent: at(3, owned.0),
                claimants: vec![Claimant::Gam, Claimant::Unit(owner)],
            },
            AllocError::MultipleClaims {
                extent: at(4, stolen.0),
                claimants: vec![Claimant::Unit(heap), Claimant::Unit(tree)],
            },
            AllocError::Unclaimed {
                extent: at(4, free.0)
            },
        ]
        .into_iter()
        .collect::<Vec<_>>()
        .tap_sort(),
        "extents {owned:?} (3), {stolen:?} and {free:?} (4)"
    );
    drop(db);

    // A GAM page whose header says SGAM: 8946, and its bits are not used.
    patch_page(&path(3), 2, |p| {
        let mut h = p.header().unwrap();
        h.page_type = PageType::Sgam;
        p.set_header(&h);
    });
    let db = Database::open(fs.as_ref(), &path(1)).unwrap();
    let r = db.check_alloc().unwrap();
    assert_eq!(
        r.errors.first(),
        Some(&AllocError::BadAllocationPage {
            page: PageId::new(3, 2),
            kind: "GAM",
            page_type: PageType::Sgam as u8,
        }),
        "{:?}",
        r.errors
    );
    assert!(
        !r.errors
            .iter()
            .any(|e| matches!(e, AllocError::MultipleClaims { extent, .. } if extent.file.0 == 3)),
        "no claims from the bad GAM page: {:?}",
        r.errors
    );
}

/// Sorting in an expression: errors come in (file, extent) order.
trait TapSort {
    fn tap_sort(self) -> Self;
}
impl TapSort for Vec<AllocError> {
    fn tap_sort(mut self) -> Self {
        let key = |e: &AllocError| match e {
            AllocError::MultipleClaims { extent, .. }
            | AllocError::Unclaimed { extent }
            | AllocError::GamAndSgam { extent, .. }
            | AllocError::BeyondFile { extent, .. } => (extent.file.0, extent.page.0),
            AllocError::BadAllocationPage { page, .. }
            | AllocError::PageAudit { page, .. }
            | AllocError::Unreadable { page, .. }
            | AllocError::WrongPageId { page, .. }
            | AllocError::PfsWrongType { page, .. }
            | AllocError::IamNextNotDetected { page, .. }
            | AllocError::IamPrevNotDetected { page, .. }
            | AllocError::IamSequence { page, .. } => (page.file.0, page.page.0),
        };
        self.sort_by_key(key);
        self
    }
}
