//! Allocation units through GAM, IAM and PFS: extents across files and GAM intervals,
//! deallocation, reopening, and the effect of allocated extents on REMOVE FILE.

mod common;
use common::{ctx, file, Quiet};
use std::path::Path;

use extentdb_format::catalog::RecoveryModel;
use extentdb_format::file_header::FileType;
use extentdb_format::{pfs, PageNo, GAM_INTERVAL_EXTENTS};
use extentdb_io::os::OsFileSystem;
use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_storage::{Database, NewDatabase, StorageError};

fn three_file_db(root: &Path, secondary_pages: u32) -> NewDatabase {
    NewDatabase {
        name: "Alloc".into(),
        database_id: 5,
        recovery_model: RecoveryModel::Simple,
        files: vec![
            file("a1", root.join("a1.mdf"), FileType::Rows, 640),
            file("alog", root.join("alog.ldf"), FileType::Log, 128),
            file("a3", root.join("a3.ndf"), FileType::Rows, secondary_pages),
            file("a4", root.join("a4.ndf"), FileType::Rows, 640),
        ],
        filegroups: vec![],
    }
}

/// Proves extents allocated to two units across three files are recorded once each in
/// IAM pages (one per unit and file), leave the GAM, come back on deallocation, survive a
/// reopen, and make a file non-removable while it holds any.
#[test]
fn extents_across_files() {
    let fs = SimFileSystem::new(11, Faults::default());
    let root = Path::new("/sim");
    let ctx = ctx(&fs, true, &Quiet);
    let mut db = Database::create(&ctx, &three_file_db(root, 640)).unwrap();
    let free = |db: &Database| [1u16, 3, 4].map(|f| db.data_files[&f].free_extents().unwrap());
    let before = free(&db);
    let (t1, t2) = (common::unit(&mut db, 1), common::unit(&mut db, 1));
    let mut got = Vec::new();
    for i in 0..30 {
        let f = [1u16, 3, 4][i % 3];
        let au = if i % 2 == 0 { t1 } else { t2 };
        got.push((au, f, db.allocate_extent(au, f).unwrap().unwrap()));
    }
    let after = free(&db);
    assert_eq!(before.iter().sum::<u32>() - after.iter().sum::<u32>(), 30);
    assert_eq!(db.iam_chain(t1).unwrap().len(), 3, "one IAM page per file");
    for p in db.iam_chain(t1).unwrap() {
        assert_eq!(
            db.primary().pfs(p.page).unwrap(),
            pfs::ALLOCATED | pfs::IAM_PAGE
        );
    }
    let mut owned: Vec<_> = db
        .extents_of(t1)
        .unwrap()
        .into_iter()
        .chain(db.extents_of(t2).unwrap())
        .collect();
    owned.sort();
    let mut expected: Vec<_> = got.iter().map(|(_, f, e)| (*f, *e)).collect();
    expected.sort();
    assert_eq!(owned, expected, "every extent owned exactly once");
    assert!(matches!(
        db.remove_file(&fs, "a4"),
        Err(StorageError::FileNotEmpty(_))
    ));
    // A clean close: the allocation pages still cached are written.
    db.checkpoint().unwrap();
    drop(db);
    let mut db = Database::open(&fs, &root.join("a1.mdf")).unwrap();
    assert_eq!(
        db.extents_of(t1).unwrap().len(),
        15,
        "chains survive reopen and the sweep"
    );
    for (au, f, e) in got {
        db.deallocate_extent(au, f, e).unwrap();
    }
    assert_eq!(free(&db), before);
    assert!(db.extents_of(t2).unwrap().is_empty());
    db.remove_file(&fs, "a4").unwrap();
}

/// Proves a unit's IAM chain gains a page for the second GAM interval of a file once the
/// first interval is full (a file over 3.9 GB, instant to create with fallocate).
#[test]
fn iam_chain_spans_gam_intervals() {
    let dir = std::env::temp_dir().join(format!("xdb-alloc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fs = OsFileSystem::new();
    let ctx = ctx(fs.as_ref(), true, &Quiet);
    let pages = (GAM_INTERVAL_EXTENTS + 16) * 8;
    let mut db = Database::create(&ctx, &three_file_db(&dir, pages)).unwrap();
    let au = common::unit(&mut db, 1);
    let free = db.data_files[&3].free_extents().unwrap();
    let mut last = None;
    for _ in 0..free {
        last = db.allocate_extent(au, 3).unwrap();
    }
    assert!(
        db.allocate_extent(au, 3).unwrap().is_none(),
        "file 3 is full"
    );
    assert!(
        last.unwrap().0 > GAM_INTERVAL_EXTENTS,
        "the last extent lies in interval 1"
    );
    assert_eq!(
        db.iam_chain(au).unwrap().len(),
        2,
        "one IAM page per GAM interval"
    );
    assert_eq!(db.extents_of(au).unwrap().len() as u32, free);
    // The second interval's GAM page sits at its first page, formatted when the space came.
    assert!(db.data_files[&3]
        .read_page(PageNo(GAM_INTERVAL_EXTENTS * 8))
        .is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Proves a unit's first extent in another file finds room for its IAM page when file 1 is
/// full but others are not (the filegroup does not grow then): file 1 grows by its
/// FILEGROWTH for the system page. Before, this failed with TooSmall (seen once in
/// allocation_concurrency.rs under CI, when the fill gave file 1's last extents away
/// before a thread's first extent in file 3).
#[test]
fn a_full_file_1_grows_for_a_new_iam_page() {
    let fs = SimFileSystem::new(12, Faults::default());
    let root = Path::new("/sim");
    let mut db = Database::create(&ctx(&fs, true, &Quiet), &three_file_db(root, 640)).unwrap();
    let filler = common::unit(&mut db, 1);
    while db.allocate_extent(filler, 1).unwrap().is_some() {}
    let size_before = db.data_files[&1].size_pages;
    // Units whose first extents lie in files 3 and 4 need IAM pages until the spare pages
    // of the system extents run out.
    let units: Vec<u64> = (0..24)
        .map(|_| {
            let au = common::unit(&mut db, 1);
            for f in [3u16, 4] {
                db.allocate_extent(au, f).unwrap().expect("file has room");
            }
            au
        })
        .collect();
    assert!(
        db.data_files[&1].size_pages > size_before,
        "file 1 grew for system pages"
    );
    for au in units {
        assert_eq!(
            db.iam_chain(au).unwrap().len(),
            2,
            "an IAM page for each file"
        );
    }
    let report = db.check_alloc().unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    eprintln!(
        "file 1: {size_before} -> {} pages",
        db.data_files[&1].size_pages
    );
}

/// Proves the sweep at open (allocation.rs invariant 4): an extent a crash left marked in
/// the GAM with no IAM page owning it (the first of an allocation's two logged steps
/// durable, the second lost) is free again after the reopen, and CHECKALLOC finds nothing;
/// an owned extent stays owned. The same damage in a database with nothing to redo is not
/// swept: CHECKALLOC reports it.
#[test]
fn an_extent_no_iam_page_owns_is_freed_at_open() {
    let fs = SimFileSystem::new(12, Faults::default());
    let root = Path::new("/sim");
    let mut db = Database::create(&ctx(&fs, true, &Quiet), &three_file_db(root, 640)).unwrap();
    let au = common::unit(&mut db, 1);
    let owned = db.allocate_extent(au, 3).unwrap().unwrap();
    let free_before = db.data_files[&3].free_extents().unwrap();
    // The GAM step of an allocation, logged and flushed, without its IAM step.
    let df = &db.data_files[&3];
    let leaked = df.find_free_extent().unwrap().unwrap();
    df.claim_extent(leaked).unwrap();
    let wal = db.wal().unwrap();
    wal.flush(wal.end_lsn()).unwrap();
    drop(wal);
    let report = db.check_alloc().unwrap();
    assert_eq!(
        report.errors.len(),
        1,
        "the leak is what CHECKALLOC reports: {:?}",
        report.errors
    );
    drop(db);
    fs.crash();
    let db = Database::open(&fs, &root.join("a1.mdf")).unwrap();
    let report = db.check_alloc().unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(db.data_files[&3].free_extents().unwrap(), free_before);
    assert_eq!(db.extents_of(au).unwrap(), vec![(3, owned)]);
    assert_eq!(db.recovery_stats().unwrap().unowned_extents_freed, 1);
    // The same damage in a database checkpointed before it stopped (nothing to redo) is
    // left for CHECKALLOC to report: written straight into the GAM, no log record.
    let mut db = db;
    db.checkpoint().unwrap();
    let damaged = db.data_files[&3].find_free_extent().unwrap().unwrap();
    let mut gam = db.data_files[&3].read_page(PageNo(2)).unwrap();
    extentdb_format::bitmap::set_bit(&mut gam, damaged.0, false);
    db.data_files[&3]
        .write_page_unlogged(PageNo(2), &mut gam)
        .unwrap();
    drop(db);
    let db = Database::open(&fs, &root.join("a1.mdf")).unwrap();
    assert_eq!(
        db.recovery_stats().map_or(0, |r| r.unowned_extents_freed),
        0
    );
    let report = db.check_alloc().unwrap();
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
}
