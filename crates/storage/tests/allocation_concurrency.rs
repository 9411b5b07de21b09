//! Concurrent extent allocation through proportional fill, on the real file system.
//!
//! Four threads share one database as the instance shares it (`Arc<extentdb_storage::shared::SharedDatabase>`), each
//! with its own allocation unit in PRIMARY, and allocate extents at once through
//! `allocate_extent_by_fill`, now and then deallocating one of their own extents so that
//! freed extents are reused. PRIMARY has three data files of unequal sizes (skip targets
//! above 1) with FILEGROWTH 1 MB, far too small for the run, so the filegroup autogrows
//! many times while the threads allocate.
//!
//! Proves, by reading the allocation maps back (IAM chains and GAM pages, not the
//! threads' bookkeeping), after the threads join and again after a reopen:
//! (a) no extent is owned by two allocation units (each (file, extent) appears once over
//!     every unit's IAM chain, the catalog's own unit included);
//! (b) every owned extent is allocated in its file's GAM, and conversely every GAM-allocated
//!     extent has an owner (no extent leaked; data_file.rs invariant 2);
//! (c) each allocation unit owns exactly the extents its thread believes it holds;
//! (d) (a)-(c) hold after a clean close (checkpoint) and `Database::open`, and, after a
//!     second concurrent round on the reopened database, after a close without a checkpoint
//!     once the log is flushed (the allocation pages come back through redo).
//!
//! The database's background checkpoint thread runs during the rounds, as in the instance,
//! so online checkpoints write the cached allocation pages between allocations.
//!
//! `the_check_catches_broken_maps` proves the check can fail: it breaks the maps in each
//! way the check looks for, through the public page API, and expects each reported.

mod common;
use common::{ctx, file, Quiet};

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

use extentdb_format::catalog::{RecoveryModel, CATALOG_ALLOCATION_UNIT};
use extentdb_format::file_header::FileType;
use extentdb_format::{bitmap, iam, ExtentNo, PageId, GAM_INTERVAL_EXTENTS};
use extentdb_io::os::OsFileSystem;
use extentdb_storage::check_alloc::{AllocError, Claimant};
use extentdb_storage::checkpoint::Checkpointer;
use extentdb_storage::shared::SharedDatabase;
use extentdb_storage::{proportional_fill, Database, NewDatabase};

const THREADS: usize = 4;
/// Extent allocations per thread in each concurrent round (fewer in a debug build, which
/// allocates about ten times slower).
const ALLOCATIONS_PER_ROUND: usize = if cfg!(debug_assertions) { 1000 } else { 3000 };
/// One iteration in this many also deallocates one of the thread's extents.
const DEALLOCATE_EVERY: u64 = 5;
/// Data file sizes in pages: PRIMARY's mdf and two ndf files, unequal (5, 1 and 3 MB).
const DATA_FILE_PAGES: [u32; 3] = [640, 128, 384];

/// A directory under the system temp dir, removed when dropped (also when a check fails).
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

/// Database `Fill` in `root`: PRIMARY with three data files of `DATA_FILE_PAGES`, each
/// FILEGROWTH 1 MB without MAXSIZE, and a 4 MB log; SIMPLE recovery, so checkpoints
/// truncate the log the allocation pages' images fill.
fn spec(root: &Path) -> NewDatabase {
    let [mdf, ndf1, ndf2] = DATA_FILE_PAGES;
    NewDatabase {
        name: "Fill".into(),
        database_id: 5,
        recovery_model: RecoveryModel::Simple,
        files: vec![
            file("Fill_data", root.join("Fill.mdf"), FileType::Rows, mdf),
            file("Fill_log", root.join("Fill_log.ldf"), FileType::Log, 512),
            file("Fill_2", root.join("Fill_2.ndf"), FileType::Rows, ndf1),
            file("Fill_3", root.join("Fill_3.ndf"), FileType::Rows, ndf2),
        ],
        filegroups: vec![],
    }
}

/// One thread's allocation unit and the extents it believes it holds.
struct Unit {
    au: u64,
    held: Vec<(u16, ExtentNo)>,
}

/// What a round of concurrent allocation did.
#[derive(Default, Debug)]
struct RoundStats {
    allocations: usize,
    deallocations: usize,
    /// Times the database lock passed from one thread to another between allocations.
    handoffs: usize,
    /// Checkpoints completed during the round (online ones by the background thread, or
    /// under the lock when the log was about to fill).
    checkpoints: u64,
    /// Allocations that returned an extent deallocated earlier in the round, and those of
    /// them whose extent another unit had held.
    reused: usize,
    reused_from_other_unit: usize,
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// Runs one concurrent round: each unit's thread allocates `ALLOCATIONS_PER_ROUND` extents
/// by proportional fill from PRIMARY, deallocating one of its own extents about every
/// `DEALLOCATE_EVERY` iterations. Takes the lock per operation, as sessions do.
fn concurrent_round(
    db: &Arc<extentdb_storage::shared::SharedDatabase>,
    units: Vec<Unit>,
    seed: u64,
) -> (Vec<Unit>, RoundStats) {
    // The background checkpoint thread, as the instance gives every database: online
    // checkpoints write the cached allocation pages between the threads' allocations.
    let checkpoint_errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let errors = checkpoint_errors.clone();
    let checkpointer = Checkpointer::spawn(db, move |name, e| {
        errors
            .lock()
            .unwrap()
            .push(format!("checkpoint of {name}: {e}"))
    });
    let checkpoints_before = db.lock_for_tests().checkpoints_completed();
    let start = Arc::new(Barrier::new(units.len()));
    // The thread that allocated last, updated under the database lock.
    let last = Arc::new(AtomicUsize::new(usize::MAX));
    let handoffs = Arc::new(AtomicUsize::new(0));
    // Extents deallocated in the round and the unit that held them, and the reuses seen
    // (reused, from another unit); changed under the database lock.
    let freed_by = Arc::new(Mutex::new((HashMap::<(u16, u32), u64>::new(), 0, 0)));
    let threads: Vec<_> = units
        .into_iter()
        .enumerate()
        .map(|(me, mut unit)| {
            let (db, start, last, handoffs, freed_by) = (
                db.clone(),
                start.clone(),
                last.clone(),
                handoffs.clone(),
                freed_by.clone(),
            );
            std::thread::spawn(move || {
                let mut rng = seed ^ (0x9E37_79B9_7F4A_7C15u64.wrapping_mul(me as u64 + 1));
                let mut freed = 0;
                start.wait();
                for i in 0..ALLOCATIONS_PER_ROUND {
                    {
                        let mut g = db.lock_for_tests();
                        if last.swap(me, Ordering::Relaxed) != me {
                            handoffs.fetch_add(1, Ordering::Relaxed);
                        }
                        let x = match g.allocate_extent_by_fill(unit.au, 1) {
                            Ok(Some(x)) => x,
                            Ok(None) => panic!("unit {}: PRIMARY could not grow (1105)", unit.au),
                            Err(e) => panic!("unit {}: allocation {i}: {e}", unit.au),
                        };
                        let mut reuse = freed_by.lock().unwrap();
                        if let Some(prev) = reuse.0.remove(&(x.0, x.1 .0)) {
                            reuse.1 += 1;
                            reuse.2 += usize::from(prev != unit.au);
                        }
                        unit.held.push(x);
                    }
                    if xorshift(&mut rng).is_multiple_of(DEALLOCATE_EVERY) {
                        let k = (xorshift(&mut rng) % unit.held.len() as u64) as usize;
                        let (f, e) = unit.held.swap_remove(k);
                        let mut g = db.lock_for_tests();
                        g.deallocate_extent(unit.au, f, e).unwrap_or_else(|err| {
                            panic!("unit {}: deallocate {f}:{}: {err}", unit.au, e.0)
                        });
                        freed_by.lock().unwrap().0.insert((f, e.0), unit.au);
                        freed += 1;
                    }
                }
                (unit, freed)
            })
        })
        .collect();
    let mut stats = RoundStats::default();
    let mut units = Vec::new();
    for t in threads {
        let (unit, freed) = t.join().expect("an allocating thread panicked");
        stats.allocations += ALLOCATIONS_PER_ROUND;
        stats.deallocations += freed;
        units.push(unit);
    }
    drop(checkpointer);
    let errors = checkpoint_errors.lock().unwrap();
    assert!(
        errors.is_empty(),
        "background checkpoints failed: {errors:?}"
    );
    let reuse = freed_by.lock().unwrap();
    (stats.reused, stats.reused_from_other_unit) = (reuse.1, reuse.2);
    stats.handoffs = handoffs.load(Ordering::Relaxed);
    stats.checkpoints = db.lock_for_tests().checkpoints_completed() - checkpoints_before;
    (units, stats)
}

/// What the maps showed when every check passed.
#[derive(Debug)]
struct MapSummary {
    /// Extents owned by the threads' units, per file.
    owned_by_file: BTreeMap<u16, usize>,
    /// Size of each data file in extents.
    extents_by_file: BTreeMap<u16, u32>,
}

/// Checks (a), (b) and (c) of the module docs against the maps as the database reads them;
/// the first violation found is the error.
fn check_maps(db: &Database, units: &[Unit]) -> Result<MapSummary, String> {
    // (a) and (b), read back from the maps by the library's CHECKALLOC: (a) an extent
    // claimed by two IAM pages; (b) any other disagreement of GAM, SGAM and IAM pages.
    let report = db.check_alloc().map_err(|e| format!("check_alloc: {e}"))?;
    if let Some(err) = report.errors.first() {
        let two_units = matches!(err, AllocError::MultipleClaims { claimants, .. }
            if claimants.iter().filter(|c| matches!(c, Claimant::Unit(_))).count() >= 2);
        let tag = if two_units { "(a)" } else { "(b)" };
        return Err(format!("{tag} {err:?} ({} errors)", report.errors.len()));
    }
    let mut owned_by_file = BTreeMap::new();
    for entry in &db.catalog.allocation_units {
        let au = entry.allocation_unit_id;
        if au == CATALOG_ALLOCATION_UNIT {
            continue;
        }
        let extents = db
            .extents_of(au)
            .map_err(|e| format!("extents_of({au}): {e}"))?;
        for (f, e) in extents {
            let in_filegroup = db
                .catalog
                .files
                .iter()
                .any(|x| x.file_id == f && x.data_space_id == entry.data_space_id);
            if !in_filegroup {
                return Err(format!("unit {au} owns {f}:{} outside its filegroup", e.0));
            }
            *owned_by_file.entry(f).or_insert(0) += 1;
        }
    }
    let extents_by_file: BTreeMap<u16, u32> = db
        .data_files
        .iter()
        .map(|(&f, df)| (f, df.usable_extents()))
        .collect();
    for entry in &db.catalog.allocation_units {
        let extents = db.extents_of(entry.allocation_unit_id).unwrap_or_default();
        if let Some((f, e)) = extents
            .iter()
            .find(|(f, e)| extents_by_file.get(f).is_none_or(|&n| e.0 >= n))
        {
            return Err(format!("(b) owned extent {f}:{} lies beyond its file", e.0));
        }
    }
    // (c) Each unit owns exactly what its thread holds.
    for u in units {
        let mut believed: Vec<(u16, u32)> = u.held.iter().map(|(f, e)| (*f, e.0)).collect();
        let mut owned: Vec<(u16, u32)> = db
            .extents_of(u.au)
            .map_err(|e| format!("extents_of({}): {e}", u.au))?
            .into_iter()
            .map(|(f, e)| (f, e.0))
            .collect();
        if believed.len() != owned.len() {
            return Err(format!(
                "(c) unit {}'s thread holds {} extents, its IAM chain maps {}",
                u.au,
                believed.len(),
                owned.len()
            ));
        }
        believed.sort_unstable();
        owned.sort_unstable();
        if believed != owned {
            let diff = believed.iter().zip(&owned).find(|(a, b)| a != b);
            return Err(format!(
                "(c) unit {}'s thread and IAM chain differ, first at {diff:?}",
                u.au
            ));
        }
    }
    Ok(MapSummary {
        owned_by_file,
        extents_by_file,
    })
}

fn size_pages(db: &Database) -> Vec<(u16, u32)> {
    db.catalog
        .files
        .iter()
        .filter(|f| f.file_type == FileType::Rows)
        .map(|f| (f.file_id, f.size_pages))
        .collect()
}

fn into_database(db: Arc<extentdb_storage::shared::SharedDatabase>) -> Database {
    Arc::into_inner(db).expect("threads joined").into_inner()
}

/// Proves (a)-(d) of the module docs with four threads allocating from one autogrowing
/// filegroup of three unequal files.
#[test]
fn concurrent_allocation_keeps_the_maps_consistent() {
    let started = Instant::now();
    let dir = TempDir::new("alloc-concurrency");
    let fs = OsFileSystem::new();
    let mdf = dir.0.join("Fill.mdf");
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &spec(&dir.0)).unwrap();
    let sizes_before = size_pages(&db);
    let units: Vec<Unit> = (0..THREADS)
        .map(|_| Unit {
            au: common::unit(&mut db, 1),
            held: Vec::new(),
        })
        .collect();
    let targets: Vec<u32> = {
        db.recalculate_proportional_fill().unwrap();
        let fill = db.proportional_fill(1).unwrap();
        fill.files.iter().map(|f| f.skip_target).collect()
    };
    assert!(
        targets.iter().any(|&t| t > 1),
        "unequal files give skip targets above 1: {targets:?}"
    );

    // Round 1 on the new database.
    let shared = Arc::new(extentdb_storage::shared::SharedDatabase::new(db));
    let (units, stats) = concurrent_round(&shared, units, 0x5eed_0001);
    let mut db = into_database(shared);
    let summary = check_maps(&db, &units).unwrap_or_else(|e| panic!("after round 1: {e}"));
    let sizes_after = size_pages(&db);
    let grown = sizes_before
        .iter()
        .zip(&sizes_after)
        .filter(|(a, b)| b.1 > a.1)
        .count();
    assert!(
        grown >= 2,
        "PRIMARY grew during the round: {sizes_before:?} -> {sizes_after:?}"
    );
    assert!(
        stats.handoffs >= THREADS * 10,
        "the threads interleaved their allocations: {stats:?}"
    );
    assert!(
        stats.reused_from_other_unit > 0,
        "extents freed by one unit went to another: {stats:?}"
    );
    for u in &units {
        let files: std::collections::BTreeSet<u16> = u.held.iter().map(|x| x.0).collect();
        assert_eq!(files.len(), 3, "unit {} got extents from every file", u.au);
    }
    eprintln!(
        "round 1: {stats:?}; sizes {sizes_before:?} -> {sizes_after:?}; owned {:?} of {:?}",
        summary.owned_by_file, summary.extents_by_file
    );

    // (d) A clean close, as at shutdown: checkpoint, drop, open.
    db.checkpoint().unwrap();
    drop(db);
    let db = Database::open(fs.as_ref(), &mdf).unwrap();
    check_maps(&db, &units).unwrap_or_else(|e| panic!("after a clean reopen: {e}"));
    assert_eq!(size_pages(&db), sizes_after, "the grown sizes are durable");

    // Round 2 on the reopened database: freed extents are reused, the filegroup grows on.
    let shared = Arc::new(extentdb_storage::shared::SharedDatabase::new(db));
    let (units, stats) = concurrent_round(&shared, units, 0x5eed_0002);
    let db = into_database(shared);
    let summary = check_maps(&db, &units).unwrap_or_else(|e| panic!("after round 2: {e}"));
    eprintln!(
        "round 2: {stats:?}; sizes {:?}; owned {:?}",
        size_pages(&db),
        summary.owned_by_file
    );

    // (d) A close without a checkpoint once the log is flushed: the allocation pages
    // changed since the last checkpoint return through redo.
    let sizes = size_pages(&db);
    let wal = db.wal().expect("a log writer");
    wal.flush(wal.end_lsn()).unwrap();
    drop(wal);
    drop(db);
    let db = Database::open(fs.as_ref(), &mdf).unwrap();
    check_maps(&db, &units).unwrap_or_else(|e| panic!("after recovery: {e}"));
    assert_eq!(size_pages(&db), sizes);
    drop(db);
    eprintln!("took {:.1} s", started.elapsed().as_secs_f64());
}

/// Proves the check is not vacuous: starting from consistent maps, (a) an extent given to a
/// second unit's IAM page, (b) an owned extent freed in the GAM, (b) an extent taken in the
/// GAM with no owner, and (c) a thread's list missing an extent are each reported.
#[test]
fn the_check_catches_broken_maps() {
    let dir = TempDir::new("alloc-check");
    let fs = OsFileSystem::new();
    let make = || {
        let _ = std::fs::remove_dir_all(&dir.0);
        std::fs::create_dir_all(&dir.0).unwrap();
        let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &spec(&dir.0)).unwrap();
        let units: Vec<Unit> = (0..2)
            .map(|_| {
                let au = common::unit(&mut db, 1);
                let held = (0..6)
                    .map(|_| db.allocate_extent_by_fill(au, 1).unwrap().unwrap())
                    .collect();
                Unit { au, held }
            })
            .collect();
        check_maps(&db, &units).expect("consistent to begin with");
        (db, units)
    };
    let expect = |db: &Database, units: &[Unit], what: &str| match check_maps(db, units) {
        Err(e) => assert!(e.starts_with(what), "{what} expected, got {e}"),
        Ok(_) => panic!("{what}: the check passed broken maps"),
    };

    // (a) Unit B's IAM page for A's extent's file also maps that extent.
    let (db, units) = make();
    let b_iams: Vec<(u16, PageId)> = db
        .iam_chain(units[1].au)
        .unwrap()
        .into_iter()
        .map(|at| {
            let p = db.primary().read_page(at.page).unwrap();
            (iam::start_page(&p).file.0, at)
        })
        .collect();
    let (e, b_iam) = units[0]
        .held
        .iter()
        .find_map(|(f, e)| b_iams.iter().find(|b| b.0 == *f).map(|b| (*e, b.1)))
        .expect("units A and B share a file");
    let mut p = db.primary().read_page(b_iam.page).unwrap();
    bitmap::set_bit(&mut p, e.0 % GAM_INTERVAL_EXTENTS, true);
    db.primary().write_page(b_iam.page, &mut p).unwrap();
    expect(&db, &units, "(a)");
    drop(db);

    // (b) An owned extent freed in the GAM behind its owner's back.
    let (db, units) = make();
    let (f, e) = units[1].held[2];
    db.data_files[&f].release_extent(e).unwrap();
    expect(&db, &units, "(b)");
    drop(db);

    // (b) A free extent taken in the GAM that no IAM page records (a leak).
    let (db, units) = make();
    let df = &db.data_files[&3];
    df.claim_extent(df.find_free_extent().unwrap().unwrap())
        .unwrap();
    expect(&db, &units, "(b)");
    drop(db);

    // (c) A thread that lost track of one of its extents.
    let (db, mut units) = make();
    units[0].held.pop();
    expect(&db, &units, "(c)");
}

// ---- Sessions sharing the database: allocation without the database lock ----

/// What a round of shared allocation did.
#[derive(Default, Debug)]
struct SharedRoundStats {
    allocations: usize,
    /// Allocations served by `allocate_by_fill` (no exclusive access).
    shared: usize,
    /// Allocations that needed the database to itself (growth, a new IAM page, the log).
    exclusive: usize,
    deallocations: usize,
    /// Most threads inside `allocate_by_fill` at one moment.
    most_at_once: usize,
    /// FGCB_PRP_FILL during the round (differences of the counters).
    prp_fill: extentdb_storage::proportional_fill::PrpFillStats,
}

/// Runs one round in which each unit's thread allocates `ALLOCATIONS_PER_ROUND` extents of
/// filegroup `ds` as a session sharing the database would: under a read lock of
/// `SharedDatabase` through `allocate_by_fill`, so threads allocate at once, and
/// only when that returns None under the write lock through `allocate_extent_by_fill`.
/// About every `DEALLOCATE_EVERY` iterations a thread frees one of its extents (under the
/// write lock).
fn shared_round(
    db: &Arc<SharedDatabase>,
    units: Vec<Unit>,
    ds: u16,
    seed: u64,
) -> (Vec<Unit>, SharedRoundStats) {
    let before = db.read().unwrap().prp_fill_stats(ds).unwrap().0;
    let start = Arc::new(Barrier::new(units.len()));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = units
        .into_iter()
        .enumerate()
        .map(|(me, mut unit)| {
            let (db, start, in_flight, most) =
                (db.clone(), start.clone(), in_flight.clone(), most.clone());
            std::thread::spawn(move || {
                let mut rng = seed ^ (0x9E37_79B9_7F4A_7C15u64.wrapping_mul(me as u64 + 1));
                let (mut shared, mut exclusive, mut freed) = (0, 0, 0);
                start.wait();
                for i in 0..ALLOCATIONS_PER_ROUND {
                    let got = {
                        let g = db.read().unwrap();
                        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        let got = common::shared_extent(&g, unit.au, ds);
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        got.unwrap_or_else(|e| panic!("unit {}: allocation {i}: {e}", unit.au))
                    };
                    let x = match got {
                        Some(x) => {
                            shared += 1;
                            x
                        }
                        None => {
                            exclusive += 1;
                            let mut g = db.lock_for_tests();
                            match g.allocate_extent_by_fill(unit.au, ds) {
                                Ok(Some(x)) => x,
                                Ok(None) => panic!("unit {}: no growth possible (1105)", unit.au),
                                Err(e) => panic!("unit {}: allocation {i}: {e}", unit.au),
                            }
                        }
                    };
                    unit.held.push(x);
                    if xorshift(&mut rng).is_multiple_of(DEALLOCATE_EVERY) {
                        let k = (xorshift(&mut rng) % unit.held.len() as u64) as usize;
                        let (f, e) = unit.held.swap_remove(k);
                        db.lock_for_tests()
                            .deallocate_extent(unit.au, f, e)
                            .unwrap_or_else(|err| {
                                panic!("unit {}: deallocate {f}:{}: {err}", unit.au, e.0)
                            });
                        freed += 1;
                    }
                }
                (unit, shared, exclusive, freed)
            })
        })
        .collect();
    let mut stats = SharedRoundStats::default();
    let mut units = Vec::new();
    for t in threads {
        let (unit, shared, exclusive, freed) = t.join().expect("an allocating thread panicked");
        stats.allocations += ALLOCATIONS_PER_ROUND;
        stats.shared += shared;
        stats.exclusive += exclusive;
        stats.deallocations += freed;
        units.push(unit);
    }
    stats.most_at_once = most.load(Ordering::SeqCst);
    let after = db.read().unwrap().prp_fill_stats(ds).unwrap().0;
    stats.prp_fill = extentdb_storage::proportional_fill::PrpFillStats {
        acquisitions: after.acquisitions - before.acquisitions,
        recalculations: after.recalculations - before.recalculations,
        collisions: after.collisions - before.collisions,
        spins: after.spins - before.spins,
        backoffs: after.backoffs - before.backoffs,
        sleep_time_us: after.sleep_time_us - before.sleep_time_us,
        lock_free_picks: after.lock_free_picks - before.lock_free_picks,
    };
    (units, stats)
}

/// A database of three data files in PRIMARY of `sizes_pages` (FILEGROWTH 1 MB), with a
/// 4 MB log, and one allocation unit per thread.
fn shared_database(root: &Path, sizes_pages: [u32; 3]) -> (Database, Vec<Unit>) {
    let mut s = spec(root);
    for (f, pages) in s
        .files
        .iter_mut()
        .filter(|f| f.file_type == FileType::Rows)
        .zip(sizes_pages)
    {
        f.size_pages = pages;
    }
    let fs = OsFileSystem::new();
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &s).unwrap();
    let units = (0..THREADS)
        .map(|_| Unit {
            au: common::unit(&mut db, 1),
            held: Vec::new(),
        })
        .collect();
    db.recalculate_proportional_fill().unwrap();
    (db, units)
}

fn into_owned(db: Arc<SharedDatabase>) -> Database {
    Arc::into_inner(db).expect("threads joined").into_inner()
}

/// Proves seed 004's FGCB_PRP_FILL point with sessions allocating at once (issue 4, item 6):
/// with equal files (every skip target 1) the threads allocate under a shared lock and
/// choose their files without taking the filegroup's FGCB_PRP_FILL lock at all (only the
/// recalculation at 8,192 allocations takes it); with unequal files every allocation takes
/// it. In both, no two units receive the same extent and the maps stay consistent ((a)-(c)
/// of the module docs), also after a reopen; the unequal files grow many times meanwhile,
/// through the exclusive path.
#[test]
fn shared_allocation_takes_no_filegroup_lock_when_every_skip_target_is_one() {
    let fs = OsFileSystem::new();
    // Equal: three files of 5,000 extents (40,000 pages), large enough that nothing grows.
    let dir = TempDir::new("alloc-shared-equal");
    let (db, units) = shared_database(&dir.0, [40_000; 3]);
    let (stats, lock_free) = db.prp_fill_stats(1).unwrap();
    assert!(
        lock_free,
        "equal files choose without FGCB_PRP_FILL: {stats:?}"
    );
    let sizes = size_pages(&db);
    let shared = Arc::new(SharedDatabase::new(db));
    let (units, stats) = shared_round(&shared, units, 1, 0x5eed_0011);
    let db = into_owned(shared);
    eprintln!("equal files: {stats:?}");
    check_maps(&db, &units).unwrap_or_else(|e| panic!("equal files: {e}"));
    assert_eq!(size_pages(&db), sizes, "nothing grew");
    assert!(
        stats.shared * 10 >= stats.allocations * 9,
        "most allocations shared the database: {stats:?}"
    );
    assert!(
        stats.most_at_once >= 2,
        "threads allocated at the same moment: {stats:?}"
    );
    // Every allocation chose its file lock-free (a shared attempt that then needed the
    // exclusive path, for a new IAM page, chose twice).
    assert!(
        stats.prp_fill.lock_free_picks as usize >= stats.allocations,
        "every choice of file was lock-free: {stats:?}"
    );
    // FGCB_PRP_FILL is taken only to recalculate (and, rarely, to note a file found full).
    assert!(
        stats.prp_fill.acquisitions <= stats.prp_fill.recalculations + 8,
        "no FGCB_PRP_FILL per allocation: {stats:?}"
    );
    let mdf = dir.0.join("Fill.mdf");
    let wal = db.wal().expect("a log writer");
    wal.flush(wal.end_lsn()).unwrap();
    drop((wal, db));
    let db = Database::open(fs.as_ref(), &mdf).unwrap();
    check_maps(&db, &units).unwrap_or_else(|e| panic!("equal files, after recovery: {e}"));
    drop(db);

    // Unequal (5, 1 and 3 MB growing 1 MB): FGCB_PRP_FILL on every allocation, and the
    // filegroup grows under the exclusive path while the others allocate shared.
    let dir = TempDir::new("alloc-shared-unequal");
    let (db, units) = shared_database(&dir.0, DATA_FILE_PAGES);
    let (stats, lock_free) = db.prp_fill_stats(1).unwrap();
    assert!(!lock_free, "unequal files take FGCB_PRP_FILL: {stats:?}");
    let sizes = size_pages(&db);
    let shared = Arc::new(SharedDatabase::new(db));
    let (units, stats) = shared_round(&shared, units, 1, 0x5eed_0012);
    let mut db = into_owned(shared);
    eprintln!("unequal files: {stats:?}");
    check_maps(&db, &units).unwrap_or_else(|e| panic!("unequal files: {e}"));
    assert!(size_pages(&db) != sizes, "PRIMARY grew");
    assert!(
        stats.exclusive > 0 && stats.shared > stats.allocations / 2,
        "{stats:?}"
    );
    // Until the first recalculation (after 8,192 allocations) every allocation takes
    // FGCB_PRP_FILL twice: to choose its file and to record the extent.
    let locked = stats
        .allocations
        .min(proportional_fill::RECALCULATE_EVERY as usize);
    assert!(
        stats.prp_fill.acquisitions as usize >= 2 * locked,
        "FGCB_PRP_FILL on every allocation: {stats:?}"
    );
    db.checkpoint().unwrap();
    drop(db);
    let db = Database::open(fs.as_ref(), &dir.0.join("Fill.mdf")).unwrap();
    check_maps(&db, &units).unwrap_or_else(|e| panic!("unequal files, after reopen: {e}"));
}

/// Proves a growth in one filegroup does not block allocation in another (issue 4, item
/// 6). Filegroup A has one 1 MB file growing 64 MB with IFI off (the growth writes 64 MB
/// of zeros); filegroup B two equal 320 MB files that never grow. One thread fills A: when its
/// shared allocation finds A full, it initializes A's growth under A's growth lock while
/// sharing the database (`initialize_filegroup_growth`), then commits it exclusively.
/// Two threads allocate in B throughout, under the shared lock. Counted from the engine's
/// own state: B allocations that began and ended while A's growth was being initialized.
#[test]
fn a_growth_in_one_filegroup_does_not_block_allocation_in_another() {
    const GROWTHS: u32 = 3;
    let dir = TempDir::new("alloc-shared-growth");
    let fs = OsFileSystem::new();
    let mb = 128;
    let mut a_file = file("A_1", dir.0.join("A_1.ndf"), FileType::Rows, mb);
    a_file.filegroup = "A".into();
    a_file.growth = 64 * mb;
    let b_files: Vec<_> = (1..=2)
        .map(|i| {
            let mut f = file(
                &format!("B_{i}"),
                dir.0.join(format!("B_{i}.ndf")),
                FileType::Rows,
                320 * mb,
            );
            f.filegroup = "B".into();
            f.growth = 0;
            f
        })
        .collect();
    let mut s = spec(&dir.0);
    s.files.truncate(2);
    s.files.push(a_file);
    s.files.extend(b_files);
    s.filegroups = vec![("A".into(), false), ("B".into(), false)];
    // Created with IFI (B's 640 MB need no zeros); A's growths run with IFI off.
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &s).unwrap();
    db.set_growth_env(extentdb_storage::log_growth::GrowthEnv {
        policy: extentdb_storage::file_init::InitPolicy {
            instant: false,
            trace_zeroing: false,
        },
        prepare_ahead: false,
        ..Default::default()
    });
    let ds = |db: &Database, n: &str| db.filegroup_by_name(n).unwrap().data_space_id;
    let (ds_a, ds_b) = (ds(&db, "A"), ds(&db, "B"));
    let au_a = common::unit(&mut db, ds_a);
    let units_b: Vec<Unit> = (0..2)
        .map(|_| Unit {
            au: common::unit(&mut db, ds_b),
            held: Vec::new(),
        })
        .collect();
    db.recalculate_proportional_fill().unwrap();
    let a_pages = |db: &Database| db.data_files[&3].size_pages;
    let a_before = a_pages(&db);

    let db = Arc::new(SharedDatabase::new(db));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let grower = {
        let (db, done) = (db.clone(), done.clone());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            let mut prepared = 0;
            while a_pages(&db.read().unwrap()) < a_before + GROWTHS * 64 * mb {
                let got = common::shared_extent(&db.read().unwrap(), au_a, ds_a).unwrap();
                let x = match got {
                    Some(x) => x,
                    None => {
                        // Full (or a first IAM page): initialize A's growth sharing the
                        // database, then commit whatever is needed exclusively.
                        let full = db
                            .read()
                            .unwrap()
                            .proportional_fill(ds_a)
                            .unwrap()
                            .files
                            .iter()
                            .all(|f| f.free == 0);
                        if full {
                            let g = db.read().unwrap();
                            prepared += g.initialize_filegroup_growth(ds_a).unwrap().len();
                        }
                        let mut g = db.lock_for_tests();
                        g.allocate_extent_by_fill(au_a, ds_a)
                            .unwrap()
                            .expect("A grows")
                    }
                };
                held.push(x);
            }
            done.store(true, Ordering::SeqCst);
            (held, prepared)
        })
    };
    let b_threads: Vec<_> = units_b
        .into_iter()
        .map(|mut unit| {
            let (db, done) = (db.clone(), done.clone());
            std::thread::spawn(move || {
                let mut during = 0usize;
                // Paced (about 5,000 a second each), so B's files last beyond A's growths.
                while !done.load(Ordering::SeqCst) && unit.held.len() < 4_000 {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                    let g = db.read().unwrap();
                    let before = g.filegroup_growth_in_progress(ds_a);
                    let got = common::shared_extent(&g, unit.au, ds_b).unwrap();
                    let after = g.filegroup_growth_in_progress(ds_a);
                    drop(g);
                    let x = match got {
                        Some(x) => {
                            during += usize::from(before && after);
                            x
                        }
                        None => db
                            .lock_for_tests()
                            .allocate_extent_by_fill(unit.au, ds_b)
                            .unwrap()
                            .expect("B has room"),
                    };
                    unit.held.push(x);
                }
                (unit, during)
            })
        })
        .collect();
    let (a_held, prepared) = grower.join().expect("the grower panicked");
    let mut units = Vec::new();
    let mut during = Vec::new();
    for t in b_threads {
        let (u, d) = t.join().expect("a B thread panicked");
        units.push(u);
        during.push(d);
    }
    let db = into_owned(db);
    eprintln!(
        "A grew {} -> {} pages ({} extents held, {prepared} preparations, {} committed); B allocations during A's growths {during:?} of {:?}",
        a_before,
        a_pages(&db),
        a_held.len(),
        db.shared_growths_committed(),
        units.iter().map(|u| u.held.len()).collect::<Vec<_>>()
    );
    assert!(
        db.shared_growths_committed() >= GROWTHS as u64,
        "A's growths were initialized outside the exclusive lock"
    );
    assert!(
        during.iter().sum::<usize>() > 0,
        "B allocated while A's growth was being initialized: {during:?}"
    );
    units.push(Unit {
        au: au_a,
        held: a_held,
    });
    check_maps(&db, &units).unwrap_or_else(|e| panic!("after the growths: {e}"));
}
