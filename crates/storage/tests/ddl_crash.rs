//! Crash atomicity of file-level DDL: a seeded loop runs catalog changes on the simulated
//! file system, fails the N-th I/O (the "power cut"), drops or tears every unsynced write, and
//! reopens. The catalog must be exactly the one before or after the interrupted change, and
//! the allocation maps it relies on must still open. A failing seed replays exactly.

mod common;
use common::{ctx, file, spec, Quiet};

use std::path::Path;

use extentdb_format::file_header::FileType;
use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_io::FileSystem;
use extentdb_storage::Database;

/// One DDL step of the workload, chosen by the step number.
fn step(
    db: &mut Database,
    fs: &SimFileSystem,
    i: u32,
) -> Result<(), extentdb_storage::StorageError> {
    let c = ctx(fs, i.is_multiple_of(2), &Quiet);
    match i % 4 {
        0 => db.update_file_entry(1, |f| f.growth = 100 + i),
        1 => {
            let size = db.catalog.files[0].size_pages + 64;
            db.grow_file(&c, 1, size)
        }
        2 => db.add_files(
            &c,
            &[file(
                &format!("f{i}"),
                Path::new(&format!("/sim/f{i}.ndf")),
                FileType::Rows,
                128,
            )],
        ),
        _ => db.change_catalog(|cat| {
            cat.filegroups[0].is_autogrow_all_files = !cat.filegroups[0].is_autogrow_all_files;
            Ok(())
        }),
    }
}

/// For a failed step the in-memory catalog was rolled back, so "after" is rebuilt from
/// `before` and the exact change step `i` makes.
fn differs_only_by_step(
    before: &extentdb_format::catalog::Catalog,
    got: &extentdb_format::catalog::Catalog,
    i: u32,
) -> bool {
    let mut want = before.clone();
    match i % 4 {
        0 => want.files[0].growth = 100 + i,
        1 => want.files[0].size_pages += 64,
        2 => match got.files.last() {
            Some(f)
                if got.files.len() == before.files.len() + 1
                    && f.name == format!("f{i}")
                    && f.size_pages == 128 =>
            {
                want.files.push(f.clone())
            }
            _ => return false,
        },
        _ => want.filegroups[0].is_autogrow_all_files = !want.filegroups[0].is_autogrow_all_files,
    }
    &want == got
}

/// Proves every interrupted DDL statement leaves the catalog as before or as after it.
#[test]
fn ddl_is_crash_atomic() {
    let seeds: u64 = std::env::var("XDB_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150);
    let (mut before_seen, mut after_seen) = (0, 0);
    for seed in 0..seeds {
        let fs = SimFileSystem::new(seed + 1, Faults::default());
        let root = Path::new("/sim");
        let mut db = Database::create(&ctx(&fs, true, &Quiet), &spec("Crash", root)).unwrap();
        for i in 0..(seed % 5) as u32 {
            step(&mut db, &fs, i).unwrap();
        }
        let before = db.catalog.clone();
        let i = (seed % 5) as u32;
        // Measure the step's I/O count on a copy-free dry run is impossible here, so cut at a
        // seeded point within a generous window; a cut past the step's end changes nothing.
        let cut = fs.io_count() + 1 + (seed * 7) % 40;
        fs.set_faults(Faults {
            fail_io_at: Some((cut, libc::EIO)),
            ..Default::default()
        });
        let result = step(&mut db, &fs, i);
        let after = db.catalog.clone();
        let poisoned = db.is_poisoned();
        if poisoned {
            assert!(
                step(&mut db, &fs, i + 1).is_err(),
                "seed {seed}: a poisoned database accepted a change"
            );
        }
        drop(db);
        fs.set_faults(Faults::default());
        fs.crash();
        let reopened = Database::open(&fs, &root.join("Crash.mdf"))
            .unwrap_or_else(|e| panic!("seed {seed}: reopen failed: {e}"));
        let landed_before = reopened.catalog == before;
        let landed_after = reopened.catalog == after
            || result.is_err() && differs_only_by_step(&before, &reopened.catalog, i);
        match (&result, landed_before, landed_after) {
            // A change reported done is durable; a failed one may have landed either way.
            (Ok(()), _, true) => after_seen += 1,
            (Err(_), true, _) => before_seen += 1,
            // Only a failure that may have passed the commit point (poisoned) can land after.
            (Err(_), false, true) if poisoned => after_seen += 1,
            _ => panic!("seed {seed} ({result:?}): catalog after crash is neither the old nor the new one:\n{:?}\nbefore {:?}", reopened.catalog, before),
        }
        for f in reopened.data_files.values() {
            f.free_extents()
                .unwrap_or_else(|e| panic!("seed {seed}: GAM unreadable: {e}"));
        }
    }
    assert!(
        before_seen > 0 && after_seen > 0,
        "before {before_seen}, after {after_seen}: the cuts must land on both sides"
    );
}

/// Checks the allocation maps of a reopened database: each usable extent is reserved,
/// GAM-free, or owned by exactly one IAM page (catalog unit included), never two of those.
fn check_maps(db: &Database, units: &[u64], seed: u64) {
    use extentdb_format::layout::is_reserved_extent;
    let mut owned = std::collections::HashSet::new();
    let catalog_iam = extentdb_format::PageId::new(1, 8);
    let _ = catalog_iam;
    for &au in units {
        for e in db.extents_of(au).unwrap() {
            assert!(owned.insert(e), "seed {seed}: extent {e:?} owned twice");
        }
    }
    for (id, df) in &db.data_files {
        let usable = df.usable_extents();
        let reserved = (0..usable)
            .filter(|&e| is_reserved_extent(extentdb_format::ExtentNo(e), *id == 1))
            .count() as u32;
        let mine = owned.iter().filter(|(f, _)| f == id).count() as u32;
        // The catalog unit's extents are in file 1: count them as GAM-allocated, not free.
        let free = df.free_extents().unwrap();
        assert!(
            free + mine + reserved <= usable,
            "seed {seed}: file {id}: free {free} + owned {mine} + reserved {reserved} > {usable}"
        );
        for &(f, e) in owned.iter().filter(|(f, _)| f == id) {
            let gam = df
                .read_page(extentdb_format::layout::bitmap_page(
                    extentdb_format::layout::BitmapKind::Gam,
                    0,
                ))
                .unwrap();
            assert!(
                !extentdb_format::bitmap::get_bit(&gam, e.0),
                "seed {seed}: extent {e:?} of file {f} free in the GAM yet owned"
            );
        }
    }
}

/// Proves extent allocation survives power cuts that tear in-place GAM, IAM and PFS writes:
/// redo at open repairs them, every acknowledged allocation is there, and the maps agree.
#[test]
fn allocation_survives_torn_writes() {
    let seeds: u64 = std::env::var("XDB_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150);
    let mut cut_inside = 0;
    for seed in 0..seeds {
        let fs = SimFileSystem::new(seed + 1, Faults::default());
        let root = Path::new("/sim");
        let mut db = Database::create(&ctx(&fs, true, &Quiet), &spec("Alloc", root)).unwrap();
        db.add_files(
            &ctx(&fs, true, &Quiet),
            &[file("a3", Path::new("/sim/a3.ndf"), FileType::Rows, 640)],
        )
        .unwrap();
        let au = common::unit(&mut db, 1);
        let mut acked: Vec<(u16, extentdb_format::ExtentNo)> = Vec::new();
        let mut x = seed * 31 + 7;
        // The extent of the operation the cut interrupts: its outcome may be either.
        let mut in_flight: Option<(u16, extentdb_format::ExtentNo)> = None;
        let cut = fs.io_count() + 2 + (seed * 13) % 150;
        fs.set_faults(Faults {
            fail_io_at: Some((cut, libc::EIO)),
            ..Default::default()
        });
        for _ in 0..60 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let f = if x % 2 == 0 { 1 } else { 3 };
            let r = if x % 5 == 0 && !acked.is_empty() {
                let (ff, e) = acked[(x as usize / 5) % acked.len()];
                in_flight = Some((ff, e));
                db.deallocate_extent(au, ff, e)
                    .map(|_| acked.retain(|a| *a != (ff, e)))
            } else {
                in_flight = None;
                db.allocate_extent(au, f)
                    .map(|e| acked.extend(e.map(|e| (f, e))))
            };
            if r.is_err() {
                cut_inside += 1;
                break;
            }
        }
        drop(db);
        fs.set_faults(Faults::default());
        fs.crash();
        let db = Database::open(&fs, &root.join("Alloc.mdf"))
            .unwrap_or_else(|e| panic!("seed {seed}: reopen failed: {e}"));
        let owned: std::collections::HashSet<_> = db.extents_of(au).unwrap().into_iter().collect();
        for a in acked.iter().filter(|a| Some(**a) != in_flight) {
            assert!(
                owned.contains(a),
                "seed {seed}: acknowledged allocation {a:?} lost"
            );
        }
        check_maps(&db, &[au], seed);
    }
    assert!(
        cut_inside > seeds / 2,
        "most cuts must land inside the workload ({cut_inside} of {seeds})"
    );
}

/// Proves a growth cut by a power failure never leaves a file longer than its catalog size
/// after the next open: the space no catalog published is cut away before recovery, and
/// each cut is reported (`RecoveryStats::trimmed`, the ERRORLOG line at start-up) with the
/// pages it removed. Data-file growths with and without IFI and log growths, at 60 seeded
/// cut points; the database opens and its maps read every time.
#[test]
fn growth_cut_by_a_crash_is_trimmed_to_the_catalog_at_open() {
    let mut trims_seen = 0;
    for seed in 0..60u64 {
        let fs = SimFileSystem::new(seed + 1, Faults::default());
        let root = Path::new("/sim");
        let instant = seed % 2 == 0;
        let mut db = Database::create(&ctx(&fs, instant, &Quiet), &spec("Trim", root)).unwrap();
        let file_id = if seed % 3 == 2 { 2 } else { 1 };
        let to = db.catalog.files[file_id as usize - 1].size_pages + 256;
        let cut = fs.io_count() + 1 + (seed * 5) % 30;
        fs.set_faults(Faults {
            fail_io_at: Some((cut, libc::EIO)),
            ..Default::default()
        });
        let _ = db.grow_file(&ctx(&fs, instant, &Quiet), file_id, to);
        drop(db);
        fs.set_faults(Faults::default());
        fs.crash();
        let len = |p: &str| fs.open(Path::new(p)).unwrap().len().unwrap();
        let before: Vec<u64> = ["/sim/Trim.mdf", "/sim/Trim_log.ldf"]
            .iter()
            .map(|p| len(p))
            .collect();
        let db = Database::open(&fs, &root.join("Trim.mdf"))
            .unwrap_or_else(|e| panic!("seed {seed}: reopen failed: {e}"));
        let reported = db
            .recovery_stats()
            .map(|r| r.trimmed.clone())
            .unwrap_or_default();
        let mut expected = Vec::new();
        for (f, was) in db.catalog.files.iter().zip(&before) {
            let size = f.size_pages as u64 * 8192;
            assert_eq!(
                len(&f.physical_name),
                size,
                "seed {seed}: {} not trimmed",
                f.name
            );
            if *was > size {
                expected.push((f.name.clone(), (was - size).div_ceil(8192), f.size_pages));
            }
        }
        let got: Vec<_> = reported
            .iter()
            .map(|t| (t.name.clone(), t.past_pages, t.size_pages))
            .collect();
        assert_eq!(got, expected, "seed {seed}");
        trims_seen += got.len();
        for f in db.data_files.values() {
            f.free_extents()
                .unwrap_or_else(|e| panic!("seed {seed}: GAM unreadable: {e}"));
        }
    }
    assert!(trims_seen > 0, "no cut left a file past its catalog size");
}
