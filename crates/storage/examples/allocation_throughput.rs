//! Benchmark (not a test): extent allocations per second through proportional fill
//! (`Database::allocate_extent_by_fill`), and what proportional fill itself costs.
//!
//! Each measurement runs on a fresh database on the real file system (in DIR), whose
//! PRIMARY filegroup has four data files large enough that nothing grows:
//! - `equal`: four files of the same size (every skip target 1, plain round robin);
//! - `unequal`: files sized 1:2:4:8 (skip targets 8, 4, 2, 1).
//!
//! With 1 and 2 threads (each with its own allocation unit, the database shared as
//! `Arc<SharedDatabase>`, the exclusive lock taken per allocation as the instance's mutex is,
//! except on the shared path) it measures four paths:
//! - `fill`: `allocate_extent_by_fill`, the path a transaction takes (the allocation pages'
//!   log records become durable with the transaction's commit, not here);
//! - `fill+flush`: the same followed by a log flush under the lock, which is the durability
//!   `allocate_extent` gives each extent;
//! - `direct`: `allocate_extent(au, file_id)` with the thread choosing files round robin
//!   itself, no proportional fill (it flushes the log per extent).
//! - `shared`: `allocate_by_fill` under a read lock of `SharedDatabase`, as
//!   sessions sharing the database allocate: two threads allocate at once, choosing their
//!   file without any filegroup-wide lock when every skip target is 1 (`equal`) and under
//!   FGCB_PRP_FILL otherwise (`unequal`), whose acquisitions and collisions are reported.
//!   Its rate against `fill` (the same work under the database lock) is the gain of
//!   allocating without that lock.
//!
//! `fill+flush` against `direct` (same durability, same log flush per extent) is the cost
//! of proportional fill in an allocation, compared by rate and by the median time one
//! allocation holds the database lock (robust to the flush's jitter, and free of the wait
//! for the other thread). Two in-memory rates from the same run put it in scale:
//! a plain round robin over four files doing nothing else, and the fill's own decision
//! (`FilegroupFill::next_file` and `allocated`, recalculating every 8,192 allocations)
//! without any I/O; the latter's share of a `fill` allocation is printed too.
//!
//! Last, seed 004's point about adding a file to a filegroup whose files are full (or
//! nearly): the new, empty file gets skip target 1 and the old ones a skip target of (its
//! free extents) / (theirs), so the new file takes all (or nearly all) of the next
//! allocations, a hot spot on one file. Reported as extents per file, without and after
//! extentdb's REBALANCE (which first evens out the files' used fractions, so the next
//! allocations spread in proportion to free space).
//!
//! Usage: cargo run --release -p extentdb-storage --example allocation_throughput --
//!        [DIR (default bench/tmp)] [--rounds 3] [--extents 20000] [--flushed-extents 1000]
//!        [--new-file-extents 500]
//! Writes bench/results/<date>-<host>-allocation.json.

mod common;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use extentdb_storage::proportional_fill::Allocation;
use extentdb_storage::shared::SharedDatabase;
use std::time::Instant;

use extentdb_format::catalog::RecoveryModel;
use extentdb_format::file_header::FileType;
use extentdb_format::PAGES_PER_EXTENT;
use extentdb_io::os::OsFileSystem;
use extentdb_storage::database::OpContext;
use extentdb_storage::file_init::InitPolicy;
use extentdb_storage::proportional_fill::FilegroupFill;
use extentdb_storage::{Database, NewDatabase};

use common::{median, new_file, Quiet};

/// Data files of each layout, in extents (file 1 first).
const EQUAL: [u32; 4] = [8000; 4];
const UNEQUAL: [u32; 4] = [2000, 4000, 8000, 16000];
/// Log: 64 MB growing 64 MB (SIMPLE recovery: checkpoints truncate it).
const LOG_PAGES: u32 = 8192;

struct Args {
    dir: PathBuf,
    rounds: u32,
    /// Extents per measurement of `fill` (all threads together).
    extents: usize,
    /// Extents per measurement of the paths that flush the log per extent.
    flushed_extents: usize,
    /// Extents allocated after a file is added to a full filegroup.
    new_file_extents: usize,
}

fn parse_args() -> Args {
    let mut a = Args {
        dir: PathBuf::from("bench/tmp"),
        rounds: 3,
        extents: 20_000,
        flushed_extents: 1_000,
        new_file_extents: 500,
    };
    let mut it = std::env::args().skip(1);
    while let Some(s) = it.next() {
        let mut num = |name: &str| -> usize { common::number(&mut it, name) };
        match s.as_str() {
            "--rounds" => a.rounds = num("--rounds") as u32,
            "--extents" => a.extents = num("--extents"),
            "--flushed-extents" => a.flushed_extents = num("--flushed-extents"),
            "--new-file-extents" => a.new_file_extents = num("--new-file-extents"),
            _ if s.starts_with("--") => panic!("unknown option {s}"),
            _ => a.dir = PathBuf::from(s),
        }
    }
    assert!(a.rounds >= 1 && a.extents >= 2 && a.flushed_extents >= 2);
    // Every layout must take the run without growing: the fill gives the smallest file of
    // `unequal` about 1/15 of the extents (a third more allowed for), round robin 1/4.
    assert!(a.extents <= 3 * EQUAL.iter().sum::<u32>() as usize / 4);
    assert!(a.extents * 4 / 45 < UNEQUAL[0] as usize);
    assert!(a.flushed_extents / 4 < UNEQUAL[0] as usize);
    a
}

fn ctx(fs: &OsFileSystem) -> OpContext<'_> {
    OpContext {
        fs,
        policy: InitPolicy {
            instant: true,
            trace_zeroing: false,
        },
        log: &Quiet,
    }
}

/// A fresh database `Alloc` in `dir` whose PRIMARY holds data files of `extents` (file 1
/// first), none of them growing (FILEGROWTH 0), and a 64 MB log.
fn create_db(fs: &OsFileSystem, dir: &Path, extents: &[u32]) -> Database {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let mut files = vec![
        new_file(
            "Alloc_data",
            dir.join("Alloc.mdf"),
            FileType::Rows,
            extents[0] * PAGES_PER_EXTENT,
            0,
        ),
        new_file(
            "Alloc_log",
            dir.join("Alloc_log.ldf"),
            FileType::Log,
            LOG_PAGES,
            LOG_PAGES,
        ),
    ];
    for (k, &x) in extents.iter().enumerate().skip(1) {
        files.push(new_file(
            &format!("Alloc_{}", k + 1),
            dir.join(format!("Alloc_{}.ndf", k + 1)),
            FileType::Rows,
            x * PAGES_PER_EXTENT,
            0,
        ));
    }
    let spec = NewDatabase {
        name: "Alloc".into(),
        database_id: 5,
        recovery_model: RecoveryModel::Simple,
        files,
        filegroups: vec![],
    };
    Database::create(&ctx(fs), &spec).unwrap()
}

/// How a measurement allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AllocPath {
    /// `allocate_extent_by_fill`, durable with a later log flush.
    Fill,
    /// `allocate_extent_by_fill` and a log flush, under the lock.
    FillFlush,
    /// `allocate_extent` on files chosen round robin by the thread (flushes per extent).
    Direct,
    /// `allocate_by_fill` under a read lock of `SharedDatabase`, as sessions
    /// sharing the database allocate (threads at once; FGCB_PRP_FILL only while some skip
    /// target is above 1), `allocate_extent_by_fill` under the write lock when it needs
    /// the database to itself.
    Shared,
}

fn path_name(p: AllocPath) -> &'static str {
    match p {
        AllocPath::Fill => "fill",
        AllocPath::FillFlush => "fill+flush",
        AllocPath::Direct => "direct",
        AllocPath::Shared => "shared",
    }
}

/// One measurement.
#[derive(Clone)]
struct Measured {
    layout: &'static str,
    threads: usize,
    path: AllocPath,
    round: u32,
    extents: usize,
    seconds: f64,
    /// Extents that went to each file.
    per_file: BTreeMap<u16, usize>,
    /// Checkpoints the log asked for during the measurement (taken under the lock).
    checkpoints: u64,
    /// Time one extent held the database lock (the allocation itself, not the wait for the
    /// lock), µs: median and 99th percentile.
    p50_us: f64,
    p99_us: f64,
    /// FGCB_PRP_FILL during the measurement: acquisitions and collisions.
    prp_acquisitions: u64,
    prp_collisions: u64,
}

impl Measured {
    fn rate(&self) -> f64 {
        self.extents as f64 / self.seconds.max(1e-9)
    }
}

/// Allocates `extents` extents over `threads` threads on a fresh database of `layout`.
fn measure(
    fs: &OsFileSystem,
    dir: &Path,
    (layout, sizes): (&'static str, &[u32]),
    threads: usize,
    path: AllocPath,
    extents: usize,
    round: u32,
) -> Measured {
    let mut db = create_db(fs, dir, sizes);
    let units: Vec<u64> = (0..threads)
        .map(|_| db.create_allocation_unit(1).unwrap())
        .collect();
    let files: Vec<u16> = db.data_files.keys().copied().collect();
    // One extent of every file per unit before the clock starts, so the units' IAM pages
    // exist and the measured allocations are the steady state.
    for &f in &files {
        for &au in &units {
            db.allocate_extent(au, f).unwrap().expect("room");
        }
    }
    db.recalculate_proportional_fill().unwrap();
    let checkpoints_before = db.checkpoints_completed();
    let wal = db.wal().expect("a log writer");
    let prp_before = db.prp_fill_stats(1).unwrap().0;
    let db = Arc::new(SharedDatabase::new(db));
    let start = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = units
        .iter()
        .enumerate()
        .map(|(t, &au)| {
            let (db, start, files, wal) = (db.clone(), start.clone(), files.clone(), wal.clone());
            let n = extents / threads + usize::from(t < extents % threads);
            std::thread::spawn(move || {
                let mut per_file = BTreeMap::new();
                let mut lat_ns = Vec::with_capacity(n);
                let mut next = t % files.len();
                start.wait();
                for _ in 0..n {
                    if path == AllocPath::Shared {
                        let g = db.read().unwrap();
                        let t0 = Instant::now();
                        let got = g.allocate_by_fill(au, 1, g.growth_env()).unwrap();
                        let file_id = match got {
                            Allocation::Extent(f, _) => {
                                lat_ns.push(t0.elapsed().as_nanos() as u64);
                                f
                            }
                            _ => {
                                drop(g);
                                let mut g = db.lock_for_tests();
                                let t0 = Instant::now();
                                let (f, _) = g
                                    .allocate_extent_by_fill(au, 1)
                                    .unwrap()
                                    .expect("no growth needed");
                                lat_ns.push(t0.elapsed().as_nanos() as u64);
                                f
                            }
                        };
                        *per_file.entry(file_id).or_insert(0) += 1;
                        continue;
                    }
                    let mut g = db.lock_for_tests();
                    let t0 = Instant::now();
                    let file_id = match path {
                        AllocPath::Fill | AllocPath::FillFlush => {
                            let (f, _) = g
                                .allocate_extent_by_fill(au, 1)
                                .unwrap()
                                .expect("no growth needed");
                            if path == AllocPath::FillFlush {
                                wal.flush(wal.end_lsn()).unwrap();
                            }
                            f
                        }
                        AllocPath::Shared => unreachable!("allocated above"),
                        AllocPath::Direct => {
                            let f = files[next];
                            next = (next + 1) % files.len();
                            g.allocate_extent(au, f).unwrap().expect("room");
                            f
                        }
                    };
                    drop(g);
                    lat_ns.push(t0.elapsed().as_nanos() as u64);
                    *per_file.entry(file_id).or_insert(0) += 1;
                }
                (per_file, lat_ns)
            })
        })
        .collect();
    start.wait();
    let t0 = Instant::now();
    let mut per_file = BTreeMap::new();
    let mut lat_ns = Vec::with_capacity(extents);
    for h in handles {
        let (files, lat) = h.join().expect("allocating thread");
        for (f, n) in files {
            *per_file.entry(f).or_insert(0) += n;
        }
        lat_ns.extend(lat);
    }
    let seconds = t0.elapsed().as_secs_f64();
    lat_ns.sort_unstable();
    let db = Arc::into_inner(db).unwrap().into_inner();
    let checkpoints = db.checkpoints_completed() - checkpoints_before;
    let prp = db.prp_fill_stats(1).unwrap().0;
    drop(wal);
    drop(db);
    std::fs::remove_dir_all(dir).unwrap();
    Measured {
        layout,
        threads,
        path,
        round,
        extents,
        seconds,
        per_file,
        checkpoints,
        p50_us: percentile(&lat_ns, 0.50),
        p99_us: percentile(&lat_ns, 0.99),
        prp_acquisitions: prp.acquisitions - prp_before.acquisitions,
        prp_collisions: prp.collisions - prp_before.collisions,
    }
}

/// The `p` percentile of sorted nanoseconds, in µs.
fn percentile(sorted_ns: &[u64], p: f64) -> f64 {
    if sorted_ns.is_empty() {
        return 0.0;
    }
    let i = ((sorted_ns.len() as f64 * p).ceil() as usize).clamp(1, sorted_ns.len()) - 1;
    sorted_ns[i] as f64 / 1000.0
}

/// Choices per second of a plain in-memory round robin over `n` files, doing nothing else.
fn plain_round_robin_rate(n: usize, choices: u64) -> f64 {
    let mut counts = vec![0u64; n];
    let mut next = 0;
    let t = Instant::now();
    for _ in 0..choices {
        let f = black_box(next);
        next = if next + 1 == n { 0 } else { next + 1 };
        counts[f] += 1;
    }
    let s = t.elapsed().as_secs_f64();
    black_box(&counts);
    assert_eq!(counts.iter().sum::<u64>(), choices);
    choices as f64 / s.max(1e-9)
}

/// Choices per second of the fill's own decision in memory: `next_file` and `allocated`,
/// recalculating from the believed free counts every 8,192 allocations, as the engine does.
fn fill_decision_rate(sizes: &[u32], choices: u64) -> f64 {
    // Free counts large enough that no file runs out during the run.
    let free: Vec<(u16, u32)> = sizes
        .iter()
        .enumerate()
        .map(|(k, &x)| (if k == 0 { 1 } else { k as u16 + 2 }, x * 1000))
        .collect();
    let mut g = FilegroupFill::default();
    g.recalculate(&free);
    let t = Instant::now();
    for _ in 0..choices {
        if g.due() {
            let now: Vec<(u16, u32)> = g.files.iter().map(|f| (f.file_id, f.free)).collect();
            g.recalculate(&now);
        }
        let f = g.next_file(1).expect("free extents");
        g.allocated(black_box(f));
    }
    let s = t.elapsed().as_secs_f64();
    black_box(&g);
    choices as f64 / s.max(1e-9)
}

/// What the fill did right after a file was added to a full (or nearly full) filegroup.
struct NewFileRun {
    /// Free space left in each old file when the new one was added.
    old_free_percent: u32,
    /// Whether ALTER DATABASE ... REBALANCE ran after the addition (extents it moved).
    rebalanced: Option<u64>,
    /// (file id, free extents, skip target) after the recalculation the addition triggers.
    targets: Vec<(u16, u32, u32)>,
    /// Extents per file of the allocations that followed.
    per_file: BTreeMap<u16, usize>,
}

/// Extents per file when `extents` are allocated by the fill right after a 64 MB file is
/// added to a filegroup of three 4 MB files with `old_free_percent` of their space left.
fn new_file_distribution(
    fs: &OsFileSystem,
    dir: &Path,
    old_free_percent: u32,
    extents: usize,
    rebalance: bool,
) -> NewFileRun {
    let mut db = create_db(fs, dir, &[64, 64, 64]);
    // A table's unit (REBALANCE moves the extents of tables).
    let t = db
        .create_table(common::table("Alloc", vec![common::column("c", 56, 4)]))
        .unwrap();
    let au = db
        .catalog
        .tables
        .iter()
        .find(|x| x.object_id == t)
        .unwrap()
        .allocation_unit_id;
    let old: Vec<u16> = db.data_files.keys().copied().collect();
    // The unit's IAM pages in the old files.
    for &f in &old {
        db.allocate_extent(au, f).unwrap().expect("room");
    }
    for &f in &old {
        let usable = db.data_files[&f].usable_extents();
        let keep = usable * old_free_percent / 100;
        while db.data_files[&f].free_extents().unwrap() > keep {
            db.allocate_extent(au, f).unwrap().expect("room");
        }
    }
    // The catalog's extent must hold the unit's IAM page for the new file: with file 1
    // full, there is nowhere else for it (IAM pages live in file 1).
    db.add_files(
        &ctx(fs),
        &[new_file(
            "Alloc_new",
            dir.join("Alloc_new.ndf"),
            FileType::Rows,
            1024 * PAGES_PER_EXTENT,
            0,
        )],
    )
    .unwrap();
    let rebalanced = rebalance.then(|| {
        let mut moved = 0;
        while db.rebalance_step(1).unwrap().is_some_and(|left| left > 0) {
            moved += 1;
        }
        db.recalculate_proportional_fill().unwrap();
        moved
    });
    let targets = db
        .proportional_fill(1)
        .unwrap()
        .files
        .iter()
        .map(|f| (f.file_id, f.free, f.skip_target))
        .collect();
    let mut per_file: BTreeMap<u16, usize> = db.data_files.keys().map(|&f| (f, 0)).collect();
    for _ in 0..extents {
        let (f, _) = db
            .allocate_extent_by_fill(au, 1)
            .unwrap()
            .expect("the new file has room");
        *per_file.get_mut(&f).unwrap() += 1;
    }
    drop(db);
    std::fs::remove_dir_all(dir).unwrap();
    NewFileRun {
        old_free_percent,
        rebalanced,
        targets,
        per_file,
    }
}

fn map_text(m: &BTreeMap<u16, usize>) -> String {
    m.iter()
        .map(|(f, n)| format!("{f}:{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn map_json(m: &BTreeMap<u16, usize>) -> String {
    let items: Vec<String> = m.iter().map(|(f, n)| format!("\"{f}\": {n}")).collect();
    format!("{{{}}}", items.join(", "))
}

fn main() {
    let a = parse_args();
    let work = a
        .dir
        .join(format!("allocation-throughput-{}", std::process::id()));
    let fs = OsFileSystem::new();
    let layouts: [(&'static str, &[u32]); 2] = [("equal", &EQUAL), ("unequal", &UNEQUAL)];

    // In-memory baselines.
    const CHOICES: u64 = 20_000_000;
    let plain_rr = median(
        &(0..a.rounds)
            .map(|_| plain_round_robin_rate(4, CHOICES))
            .collect::<Vec<_>>(),
    );
    let decision: BTreeMap<&str, f64> = layouts
        .iter()
        .map(|(name, sizes)| {
            let r = (0..a.rounds)
                .map(|_| fill_decision_rate(sizes, CHOICES))
                .collect::<Vec<_>>();
            (*name, median(&r))
        })
        .collect();

    // The engine's paths. The two flushing paths alternate their order from round to round,
    // so that a drift of the disk's flush latency does not favour one.
    let mut runs: Vec<Measured> = Vec::new();
    for round in 1..=a.rounds {
        for &(layout, sizes) in &layouts {
            for threads in [1, 2] {
                let mut paths = [
                    AllocPath::Fill,
                    AllocPath::Shared,
                    AllocPath::FillFlush,
                    AllocPath::Direct,
                ];
                if round % 2 == 0 {
                    paths.swap(0, 1);
                    paths.swap(2, 3);
                }
                for path in paths {
                    let n = if matches!(path, AllocPath::Fill | AllocPath::Shared) {
                        a.extents
                    } else {
                        a.flushed_extents
                    };
                    let m = measure(&fs, &work, (layout, sizes), threads, path, n, round);
                    eprintln!(
                        "round {round} {layout} {threads} thread(s) {}: {} extents in {:.3} s, {:.0}/s, p50 {:.1} us, p99 {:.1} us; FGCB_PRP_FILL {} acquisitions, {} collisions; per file {}",
                        path_name(path),
                        m.extents,
                        m.seconds,
                        m.rate(),
                        m.p50_us,
                        m.p99_us,
                        m.prp_acquisitions,
                        m.prp_collisions,
                        map_text(&m.per_file)
                    );
                    runs.push(m);
                }
            }
        }
    }
    // The median over rounds of one figure of one (layout, threads, path).
    let med = |layout: &str, threads: usize, path: AllocPath, f: fn(&Measured) -> f64| -> f64 {
        median(
            &runs
                .iter()
                .filter(|m| m.layout == layout && m.threads == threads && m.path == path)
                .map(f)
                .collect::<Vec<_>>(),
        )
    };

    // Adding a file to a full (and a nearly full) filegroup.
    let added: Vec<NewFileRun> = [(0u32, false), (10, false), (0, true), (10, true)]
        .iter()
        .map(|&(pct, rb)| new_file_distribution(&fs, &work, pct, a.new_file_extents, rb))
        .collect();
    let _ = std::fs::remove_dir_all(&work);

    // Table.
    println!(
        "\nmedians of {} round(s); rate = extents per second of all threads together; p50 = \
         median time one extent holds the database lock (no wait for it)",
        a.rounds
    );
    println!(
        "{:<8} {:>3} | {:>9} {:>8} | {:>10} {:>8} | {:>9} {:>8} | {:>13} {:>13} | {:>12}",
        "layout",
        "thr",
        "fill/s",
        "p50 us",
        "fill+fl/s",
        "p50 us",
        "direct/s",
        "p50 us",
        "(fill+fl)/dir",
        "(fill+fl)/dir",
        "fill/mem rr"
    );
    println!(
        "{:<8} {:>3} | {:>9} {:>8} | {:>10} {:>8} | {:>9} {:>8} | {:>13} {:>13} | {:>12}",
        "", "", "", "", "", "", "", "", "p50 held", "rate", "rate"
    );
    let mut summary = Vec::new();
    let mut shared_lines = Vec::new();
    for &(layout, _) in &layouts {
        for threads in [1, 2] {
            use AllocPath::{Direct, Fill, FillFlush};
            let rate = |p| med(layout, threads, p, Measured::rate);
            let p50 = |p| med(layout, threads, p, |m| m.p50_us);
            let (fill, flush, direct) = (rate(Fill), rate(FillFlush), rate(Direct));
            let (fill_p50, flush_p50, direct_p50) = (p50(Fill), p50(FillFlush), p50(Direct));
            let p50_ratio = flush_p50 / direct_p50.max(1e-9);
            let rate_ratio = flush / direct.max(1e-9);
            println!(
                "{:<8} {:>3} | {:>9.0} {:>8.2} | {:>10.0} {:>8.1} | {:>9.0} {:>8.1} | {:>13.3} {:>13.3} | {:>12.2e}",
                layout,
                threads,
                fill,
                fill_p50,
                flush,
                flush_p50,
                direct,
                direct_p50,
                p50_ratio,
                rate_ratio,
                fill / plain_rr
            );
            let shared = rate(AllocPath::Shared);
            let shared_acq = med(layout, threads, AllocPath::Shared, |m| {
                m.prp_acquisitions as f64 / m.extents as f64
            });
            let shared_coll = med(layout, threads, AllocPath::Shared, |m| {
                m.prp_collisions as f64
            });
            shared_lines.push(format!(
                "{layout} {threads} thread(s): shared {shared:.0}/s, {:.2}x the rate under the database lock (fill); FGCB_PRP_FILL {shared_acq:.3} acquisitions per extent, {shared_coll:.0} collisions",
                shared / fill.max(1e-9)
            ));
            summary.push(format!(
                "    {{\"layout\": \"{layout}\", \"threads\": {threads}, \"shared_per_s\": {shared:.0}, \"ratio_shared_vs_fill_rate\": {:.3}, \"shared_prp_fill_acquisitions_per_extent\": {shared_acq:.4}, \"shared_prp_fill_collisions\": {shared_coll:.0}, \"fill_per_s\": {fill:.0}, \"fill_p50_held_us\": {fill_p50:.2}, \"fill_flush_per_s\": {flush:.0}, \"fill_flush_p50_held_us\": {flush_p50:.1}, \"direct_per_s\": {direct:.0}, \"direct_p50_held_us\": {direct_p50:.1}, \"ratio_fill_flush_vs_direct_p50_held\": {p50_ratio:.4}, \"ratio_fill_flush_vs_direct_rate\": {rate_ratio:.4}, \"ratio_fill_vs_in_memory_round_robin_rate\": {:.3e}, \"fill_decision_share_of_fill_time\": {:.5}}}",
                shared / fill.max(1e-9),
                fill / plain_rr,
                fill / decision[layout],
            ));
        }
    }
    println!(
        "\nin memory, 4 files: plain round robin {:.0} choices/s ({:.2} ns each); the fill's \
         decision (next_file + allocated): equal {:.0}/s ({:.2} ns), unequal {:.0}/s ({:.2} ns)",
        plain_rr,
        1e9 / plain_rr,
        decision["equal"],
        1e9 / decision["equal"],
        decision["unequal"],
        1e9 / decision["unequal"],
    );
    for &(layout, _) in &layouts {
        let fill1 = med(layout, 1, AllocPath::Fill, Measured::rate);
        let fill2 = med(layout, 2, AllocPath::Fill, Measured::rate);
        println!(
            "{layout}: fill {:.2} us per extent (1 thread), of which the fill's decision {:.4} us \
             ({:.3}%); rate with 2 threads / 1 thread: {:.3}",
            1e6 / fill1,
            1e6 / decision[layout],
            100.0 * fill1 / decision[layout],
            fill2 / fill1.max(1e-9)
        );
    }
    for l in &shared_lines {
        println!("{l}");
    }
    let fill_share = |layout: &str| -> String {
        let m = runs
            .iter()
            .find(|m| m.layout == layout && m.path == AllocPath::Fill && m.threads == 1)
            .unwrap();
        map_text(&m.per_file)
    };
    println!(
        "extents per file, fill, 1 thread, round 1: equal {}; unequal {}",
        fill_share("equal"),
        fill_share("unequal")
    );
    for NewFileRun {
        old_free_percent: pct,
        rebalanced,
        targets,
        per_file: dist,
    } in &added
    {
        let new_id = *dist.keys().max().unwrap();
        let rb = rebalanced.map_or("no REBALANCE".to_string(), |m| {
            format!("after REBALANCE ({m} extents moved)")
        });
        println!(
            "new 64 MB file {new_id} added to 3 files of 4 MB with {pct}% free, {rb}: (file, free, skip \
             target) {targets:?}; next {} extents per file: {} ({:.1}% to the new file)",
            a.new_file_extents,
            map_text(dist),
            100.0 * dist[&new_id] as f64 / a.new_file_extents as f64
        );
    }

    // JSON.
    let (date, host) = common::date_and_host();
    let runs_json: Vec<String> = runs
        .iter()
        .map(|m| {
            format!(
                "    {{\"round\": {}, \"layout\": \"{}\", \"threads\": {}, \"path\": \"{}\", \"extents\": {}, \"seconds\": {:.4}, \"per_s\": {:.0}, \"p50_held_us\": {:.2}, \"p99_held_us\": {:.2}, \"checkpoints\": {}, \"prp_fill_acquisitions\": {}, \"prp_fill_collisions\": {}, \"per_file\": {}}}",
                m.round,
                m.layout,
                m.threads,
                path_name(m.path),
                m.extents,
                m.seconds,
                m.rate(),
                m.p50_us,
                m.p99_us,
                m.checkpoints,
                m.prp_acquisitions,
                m.prp_collisions,
                map_json(&m.per_file)
            )
        })
        .collect();
    let added_json: Vec<String> = added
        .iter()
        .map(|r| {
            let (pct, targets, dist) = (r.old_free_percent, &r.targets, &r.per_file);
            let rb = r.rebalanced.map_or("null".to_string(), |m| m.to_string());
            let t: Vec<String> = targets
                .iter()
                .map(|(f, free, k)| {
                    format!("{{\"file_id\": {f}, \"free_extents\": {free}, \"skip_target\": {k}}}")
                })
                .collect();
            format!(
                "    {{\"old_files_free_percent\": {pct}, \"rebalance_extents_moved\": {rb}, \"old_files_mb\": 4, \"new_file_mb\": 64, \"skip_targets\": [{}], \"extents\": {}, \"per_file\": {}}}",
                t.join(", "),
                a.new_file_extents,
                map_json(dist)
            )
        })
        .collect();
    let sizes_json = |s: &[u32]| {
        s.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let json = format!(
        "{{\n  \"benchmark\": \"allocation_throughput\",\n  \"date\": \"{date}\",\n  \"host\": \"{host}\",\n  \"dir\": \"{}\",\n  \"rounds\": {},\n  \"equal_file_extents\": [{}],\n  \"unequal_file_extents\": [{}],\n  \"in_memory_plain_round_robin_per_s\": {plain_rr:.0},\n  \"in_memory_fill_decision_per_s\": {{\"equal\": {:.0}, \"unequal\": {:.0}}},\n  \"summary\": [\n{}\n  ],\n  \"runs\": [\n{}\n  ],\n  \"new_file_in_full_filegroup\": [\n{}\n  ]\n}}\n",
        a.dir.display(),
        a.rounds,
        sizes_json(&EQUAL),
        sizes_json(&UNEQUAL),
        decision["equal"],
        decision["unequal"],
        summary.join(",\n"),
        runs_json.join(",\n"),
        added_json.join(",\n"),
    );
    println!("wrote {}", common::write_results("allocation", &json));
}
