//! Benchmark (not a test): does a data-file growth in one filegroup block allocation in
//! another? With instant file initialization off, a growth writes zeros; SQL Server's
//! allocations wait behind it. extentdb initializes the next growth in the background when
//! a filegroup runs low (`GrowthEnv::prepare_ahead`), outside the database's lock.
//!
//! A database on the real file system with IFI off has filegroup A (one 8 MB file growing
//! by `--growth-mb`, default 256) and filegroup B (one large file, no growth). Thread A
//! allocates `--a-rate` extents per second in A (default 1,000: 64 MB/s of new data), so A
//! grows; thread B allocates one extent in B every 2 ms and times each allocation
//! including the wait for the database's lock.
//! Each mode runs until A has grown `--growths` times (default 2): growths prepared in the
//! background, and on demand (zeroed while the allocation that needs the space holds the
//! lock, as SQL Server does). The baseline in the same run is the disk's time to write the
//! same zeros (8 MiB writes, one fdatasync).
//!
//! Usage: cargo run --release -p extentdb-storage --example filegroup_growth --
//!        [DIR (default bench/tmp)] [--growth-mb 256] [--growths 2] [--rounds 2]
//!        [--a-rate 1000]
//! Writes bench/results/<date>-<host>-filegroup-growth.json.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{median, new_file, Quiet};
use extentdb_format::catalog::RecoveryModel;
use extentdb_format::file_header::FileType;
use extentdb_format::PAGES_PER_MB;
use extentdb_io::os::OsFileSystem;
use extentdb_io::{write_zeros, FileSystem};
use extentdb_storage::database::OpContext;
use extentdb_storage::file_init::InitPolicy;
use extentdb_storage::log_growth::GrowthEnv;
use extentdb_storage::{Database, NewDatabase};

struct Args {
    dir: PathBuf,
    growth_mb: u32,
    growths: u32,
    rounds: u32,
    a_rate: u32,
}

fn parse_args() -> Args {
    let mut a = Args {
        dir: PathBuf::from("bench/tmp"),
        growth_mb: 256,
        growths: 2,
        rounds: 2,
        a_rate: 1000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(s) = it.next() {
        let mut num = |name: &str| -> u32 { common::number(&mut it, name) };
        match s.as_str() {
            "--growth-mb" => a.growth_mb = num("--growth-mb"),
            "--growths" => a.growths = num("--growths"),
            "--rounds" => a.rounds = num("--rounds"),
            "--a-rate" => a.a_rate = num("--a-rate").max(1),
            _ if s.starts_with("--") => panic!("unknown option {s}"),
            _ => a.dir = PathBuf::from(s),
        }
    }
    a
}

const IFI_OFF: InitPolicy = InitPolicy {
    instant: false,
    trace_zeroing: false,
};

fn create_db(fs: &OsFileSystem, dir: &Path, a: &Args) -> Database {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let mb = PAGES_PER_MB;
    let mut fa = new_file(
        "A1",
        dir.join("A1.ndf"),
        FileType::Rows,
        8 * mb,
        a.growth_mb * mb,
    );
    fa.filegroup = "A".into();
    // B holds every extent thread B takes in a round, without growing.
    let mut fb = new_file("B1", dir.join("B1.ndf"), FileType::Rows, 512 * mb, 0);
    fb.filegroup = "B".into();
    let spec = NewDatabase {
        name: "Growth".into(),
        database_id: 5,
        recovery_model: RecoveryModel::Simple,
        files: vec![
            new_file(
                "Growth_data",
                dir.join("Growth.mdf"),
                FileType::Rows,
                8 * mb,
                0,
            ),
            new_file(
                "Growth_log",
                dir.join("Growth_log.ldf"),
                FileType::Log,
                64 * mb,
                0,
            ),
            fa,
            fb,
        ],
        filegroups: vec![("A".into(), false), ("B".into(), false)],
    };
    let ctx = OpContext {
        fs,
        policy: IFI_OFF,
        log: &Quiet,
    };
    Database::create(&ctx, &spec).unwrap()
}

struct Run {
    prepare_ahead: bool,
    growths: u64,
    b_allocations: usize,
    b_p50_us: f64,
    b_p99_us: f64,
    b_max_ms: f64,
    /// Longest an allocation in A waited for a prepared growth (ms).
    a_longest_wait_ms: f64,
    seconds: f64,
}

fn run_mode(fs: &OsFileSystem, a: &Args, prepare_ahead: bool) -> Run {
    let dir = a.dir.join("filegroup-growth");
    let mut db = create_db(fs, &dir, a);
    db.set_growth_env(GrowthEnv {
        policy: IFI_OFF,
        prepare_ahead,
        ..GrowthEnv::default()
    });
    let ds = |db: &Database, name: &str| db.filegroup_by_name(name).unwrap().data_space_id;
    let (ds_a, ds_b) = (ds(&db, "A"), ds(&db, "B"));
    let (au_a, au_b) = (
        db.create_allocation_unit(ds_a).unwrap(),
        db.create_allocation_unit(ds_b).unwrap(),
    );
    let start_pages = 8 * PAGES_PER_MB;
    let target_pages = start_pages + a.growths * a.growth_mb * PAGES_PER_MB;
    let db = Arc::new(extentdb_storage::shared::SharedDatabase::new(db));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let pause = Duration::from_secs_f64(1.0 / a.a_rate as f64);
    let a_thread = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(pause);
                let mut g = db.lock_for_tests();
                g.allocate_extent_by_fill(au_a, ds_a)
                    .unwrap()
                    .expect("A grows");
                let size = g.file_by_name("A1").unwrap().size_pages;
                drop(g);
                if size >= target_pages {
                    stop.store(true, Ordering::Relaxed);
                }
            }
        })
    };
    let mut lat_us = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        db.lock_for_tests()
            .allocate_extent_by_fill(au_b, ds_b)
            .unwrap()
            .expect("B has room");
        lat_us.push(t.elapsed().as_secs_f64() * 1e6);
        std::thread::sleep(Duration::from_millis(2));
        if started.elapsed() > Duration::from_secs(300) {
            stop.store(true, Ordering::Relaxed);
        }
    }
    a_thread.join().unwrap();
    let seconds = started.elapsed().as_secs_f64();
    let db = Arc::into_inner(db).unwrap().into_inner();
    let size = db.file_by_name("A1").unwrap().size_pages;
    let (_, wait_us) = db.data_growth_stats();
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    lat_us.sort_by(|x, y| x.total_cmp(y));
    let pct = |p: f64| lat_us[((lat_us.len() as f64 * p) as usize).min(lat_us.len() - 1)];
    Run {
        prepare_ahead,
        growths: ((size - start_pages) / (a.growth_mb * PAGES_PER_MB)) as u64,
        b_allocations: lat_us.len(),
        b_p50_us: pct(0.5),
        b_p99_us: pct(0.99),
        b_max_ms: lat_us.last().copied().unwrap_or(0.0) / 1000.0,
        a_longest_wait_ms: wait_us as f64 / 1000.0,
        seconds,
    }
}

/// The disk's time to write one growth's zeros in a new file (8 MiB writes, one fdatasync).
fn baseline_zero_ms(fs: &OsFileSystem, dir: &Path, bytes: u64) -> f64 {
    let path = dir.join("baseline_zero.tmp");
    let _ = std::fs::remove_file(&path);
    let f = fs.create_new(&path).unwrap();
    let t = Instant::now();
    write_zeros(f.as_ref(), 0, bytes).unwrap();
    f.sync_data().unwrap();
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    drop(f);
    let _ = std::fs::remove_file(&path);
    ms
}

fn main() {
    let a = parse_args();
    std::fs::create_dir_all(&a.dir).unwrap();
    let fs = OsFileSystem::new();
    let mut runs = Vec::new();
    let mut baselines = Vec::new();
    for round in 1..=a.rounds {
        baselines.push(baseline_zero_ms(
            &fs,
            &a.dir,
            a.growth_mb as u64 * PAGES_PER_MB as u64 * 8192,
        ));
        for prepare_ahead in [true, false] {
            let r = run_mode(&fs, &a, prepare_ahead);
            eprintln!(
                "round {round} {}: A grew {} times in {:.1} s; B: {} allocations, p50 {:.0} us, p99 {:.0} us, max {:.1} ms; A's longest wait for a prepared growth {:.1} ms",
                if prepare_ahead { "prepared" } else { "on demand" },
                r.growths,
                r.seconds,
                r.b_allocations,
                r.b_p50_us,
                r.b_p99_us,
                r.b_max_ms,
                r.a_longest_wait_ms
            );
            runs.push((round, r));
        }
    }
    let max_of = |ahead: bool| {
        median(
            &runs
                .iter()
                .filter(|(_, r)| r.prepare_ahead == ahead)
                .map(|(_, r)| r.b_max_ms)
                .collect::<Vec<_>>(),
        )
    };
    let (on, off, base) = (max_of(true), max_of(false), median(&baselines));
    println!(
        "worst allocation in filegroup B while A grows by {} MB with IFI off: prepared {on:.1} ms, on demand {off:.1} ms; the disk zeroes one growth in {base:.0} ms",
        a.growth_mb
    );
    let runs_json: Vec<String> = runs
        .iter()
        .map(|(round, r)| {
            format!(
                "    {{\"round\": {round}, \"mode\": \"{}\", \"growths\": {}, \"seconds\": {:.1}, \"b_allocations\": {}, \"b_p50_us\": {:.0}, \"b_p99_us\": {:.0}, \"b_max_ms\": {:.1}, \"a_longest_wait_for_prepared_ms\": {:.1}}}",
                if r.prepare_ahead { "prepared" } else { "on_demand" },
                r.growths, r.seconds, r.b_allocations, r.b_p50_us, r.b_p99_us, r.b_max_ms, r.a_longest_wait_ms
            )
        })
        .collect();
    let json = format!(
        "{{\n  \"benchmark\": \"filegroup_growth\",\n  \"a_extents_per_s\": {},\n  \"growth_mb\": {},\n  \"growths\": {},\n  \"baseline_zero_growth_ms\": [{}],\n  \"runs\": [\n{}\n  ],\n  \"median_b_max_ms_prepared\": {on:.1},\n  \"median_b_max_ms_on_demand\": {off:.1},\n  \"median_baseline_zero_ms\": {base:.0},\n  \"ratio_b_max_prepared_vs_zeroing\": {:.4}\n}}\n",
        a.a_rate,
        a.growth_mb,
        a.growths,
        baselines.iter().map(|b| format!("{b:.0}")).collect::<Vec<_>>().join(", "),
        runs_json.join(",\n"),
        on / base.max(1e-9)
    );
    print!("{json}");
    println!("wrote {}", common::write_results("filegroup-growth", &json));
}
