//! Benchmark (not a test): commit latency while the log autogrows, with the growth prepared in
//! the background (extentdb) against initialized on demand while the committer waits (SQL
//! Server's autogrowth; `GrowthEnv::prepare_ahead = false`), and against a control in which
//! the log is created large enough for the whole run, so that nothing grows: its worst commit
//! is what the disk and the workload give without any growth.
//!
//! Each round creates a fresh database for each mode on the real file system: a 64 MB log
//! with FILEGROWTH G and no MAXSIZE (the control: 64 MB + 2 G from the start), and a data
//! file sized (instantly, by fallocate) so that no data-file growth disturbs the figures.
//! Thread A opens a transaction, inserts one small row and keeps it open, so no checkpoint
//! can free the log: it must grow. Thread B runs autocommit transactions of one ~4 KB row,
//! flushing each commit outside the database lock, and times each from begin to flush
//! returned, until the log has grown twice (or a time cap). The database's background
//! checkpoint thread runs as in the instance. A baseline measured in the same round gives
//! the disk's own time to zero G bytes (one pass of 8 MiB writes, one fdatasync).
//!
//! Usage: cargo run --release -p extentdb-storage --example log_growth_latency --
//!        DIR [--growth-mb 1024] [--rounds 3] [--max-secs 60] [--growths 2]
//!        [--modes all|both|ahead|demand|none]
//! Writes bench/results/<date>-<host>-log-growth-latency.json.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{column, median, new_file, table, Quiet};
use extentdb_format::catalog::RecoveryModel;
use extentdb_format::file_header::FileType;
use extentdb_format::record::{self, ColumnLayout};
use extentdb_format::PAGE_SIZE;
use extentdb_io::os::OsFileSystem;
use extentdb_io::{write_zeros, FileSystem};
use extentdb_storage::checkpoint::Checkpointer;
use extentdb_storage::database::OpContext;
use extentdb_storage::errorlog::ErrorLog;
use extentdb_storage::file_init::InitPolicy;
use extentdb_storage::log_growth::GrowthEnv;
use extentdb_storage::{Database, NewDatabase};

const MB: u64 = 1 << 20;
const LOG_START_PAGES: u32 = (64 * MB / PAGE_SIZE as u64) as u32;
const ROW_BYTES: usize = 4000;
/// A commit making no progress this long is reported as a hang.
const STALL_LIMIT: Duration = Duration::from_secs(180);

struct Args {
    dir: PathBuf,
    growth_mb: u64,
    rounds: u32,
    max_secs: u64,
    growths: u64,
    /// Modes to run in each round, in order.
    modes: Vec<Mode>,
}

fn parse_args() -> Args {
    let mut a = Args {
        dir: std::env::temp_dir(),
        growth_mb: 1024,
        rounds: 3,
        max_secs: 60,
        growths: 2,
        modes: vec![Mode::PrepareAhead, Mode::OnDemand, Mode::NoGrowth],
    };
    let mut it = std::env::args().skip(1);
    while let Some(s) = it.next() {
        let mut num = |name: &str| -> u64 { common::number(&mut it, name) };
        match s.as_str() {
            "--growth-mb" => a.growth_mb = num("--growth-mb"),
            "--rounds" => a.rounds = num("--rounds") as u32,
            "--max-secs" => a.max_secs = num("--max-secs"),
            "--growths" => a.growths = num("--growths"),
            "--modes" => {
                a.modes = match it.next().as_deref() {
                    Some("all") => vec![Mode::PrepareAhead, Mode::OnDemand, Mode::NoGrowth],
                    Some("both") => vec![Mode::PrepareAhead, Mode::OnDemand],
                    Some("ahead") => vec![Mode::PrepareAhead],
                    Some("demand") => vec![Mode::OnDemand],
                    Some("none") => vec![Mode::NoGrowth],
                    m => panic!("--modes all|both|ahead|demand|none, not {m:?}"),
                }
            }
            _ if s.starts_with("--") => panic!("unknown option {s}"),
            _ => a.dir = PathBuf::from(s),
        }
    }
    assert!(a.growth_mb >= 1 && a.growths >= 1 && a.rounds >= 1);
    a
}

/// A char(4000) row numbered `i`.
fn big_row(i: u64) -> Vec<u8> {
    let mut v = vec![b' '; ROW_BYTES];
    v[..8].copy_from_slice(&i.to_le_bytes());
    record::encode(&[ColumnLayout::Fixed(ROW_BYTES as u16)], &[Some(&v)]).unwrap()
}

fn small_row() -> Vec<u8> {
    record::encode(&[ColumnLayout::Fixed(4)], &[Some(&7i32.to_le_bytes())]).unwrap()
}

fn paths(dir: &Path) -> (PathBuf, PathBuf) {
    (dir.join("LogGrowth.mdf"), dir.join("LogGrowth_log.ldf"))
}

/// A fresh database in `dir`: a 64 MB log growing by `growth_pages`, no MAXSIZE, and a data
/// file large enough for every row the run can insert (2 rows a page hold about as many
/// bytes as their log records, so 64 MB + `growths` growths, with room to spare).
fn create_db(fs: &OsFileSystem, a: &Args, growth_pages: u32, mode: Mode) -> Database {
    let (mdf, ldf) = paths(&a.dir);
    let _ = std::fs::remove_file(&mdf);
    let _ = std::fs::remove_file(&ldf);
    let data_pages = (LOG_START_PAGES as u64 + (a.growths + 1) * growth_pages as u64) as u32;
    let spec = NewDatabase {
        name: "LogGrowth".into(),
        database_id: 5,
        recovery_model: RecoveryModel::Full,
        files: vec![
            new_file("LogGrowth_data", mdf, FileType::Rows, data_pages, 32768),
            new_file(
                "LogGrowth_log",
                ldf,
                FileType::Log,
                if mode == Mode::NoGrowth {
                    // Room for the whole run from the start: the control without growth.
                    (LOG_START_PAGES as u64 + a.growths * growth_pages as u64) as u32
                } else {
                    LOG_START_PAGES
                },
                growth_pages,
            ),
        ],
        filegroups: vec![],
    };
    let ctx = OpContext {
        fs,
        policy: InitPolicy {
            instant: true,
            trace_zeroing: false,
        },
        log: &Quiet,
    };
    Database::create(&ctx, &spec).unwrap()
}

/// How the log gets its space during a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Mode {
    /// extentdb: growth prepared in the background.
    #[default]
    PrepareAhead,
    /// SQL Server's autogrowth: initialized while the change waits.
    OnDemand,
    /// The control: a log created large enough for the whole run, so nothing grows; its
    /// latencies are the disk's and the workload's own.
    NoGrowth,
}

/// What one mode's run measured.
#[derive(Default, Clone)]
struct Run {
    mode: Mode,
    commits: u64,
    growths: u64,
    elapsed_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    over_10ms: u64,
    over_100ms: u64,
    longest_wait_ms: f64,
    /// Longest time one commit held the database lock (a growth is waited for in there) and
    /// longest log flush outside it (the disk, shared with whatever else runs).
    max_locked_ms: f64,
    max_flush_ms: f64,
    /// Latency of the commit whose insert committed each growth, and when (s into the run).
    growth_commit_ms: Vec<f64>,
    growth_at_s: Vec<f64>,
    /// Commits finished in each second of the run.
    per_second: Vec<u64>,
    /// Initialization time of each growth as the engine logged it ("took N milliseconds").
    init_ms: Vec<u64>,
    /// Checkpoints completed (online, by the background checkpointer, or under the lock
    /// when the log was about to fill).
    checkpoints: u64,
    /// What went wrong, if anything (commit error, panic).
    failure: Option<String>,
}

/// Thread A: one open transaction holding the log until `stop`, then rolled back.
fn holder(
    db: Arc<extentdb_storage::shared::SharedDatabase>,
    t: u32,
    stop: Arc<AtomicBool>,
    ready: mpsc::Sender<Result<(), String>>,
) -> JoinHandle<Result<(), String>> {
    std::thread::spawn(move || {
        let x = {
            let mut g = db.lock_for_tests();
            let x = g.begin_xact();
            if let Err(e) = g.now(|d| d.insert_row(x, t, (&small_row(), d.growth_env()), None)) {
                let _ = ready.send(Err(format!("holder insert: {e}")));
                return Err(format!("holder insert: {e}"));
            }
            x
        };
        ready.send(Ok(())).unwrap();
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
        db.lock_for_tests()
            .rollback_xact(x)
            .map_err(|e| format!("holder rollback: {e}"))
    })
}

/// What thread B hands back: each commit's latency (µs) and end (µs into the run); the
/// latency of each commit that committed a growth; the longest time (µs) spent holding the
/// database lock and in the log flush outside it; any error.
type Committed = (Vec<(u64, u64)>, Vec<(u64, u64)>, (u64, u64), Option<String>);

/// Records how long the database lock was held when dropped (declared after the guard, so
/// dropped before it).
struct Held<'a>(Instant, &'a mut u64);
impl Drop for Held<'_> {
    fn drop(&mut self) {
        *self.1 = (*self.1).max(self.0.elapsed().as_micros() as u64);
    }
}

/// Thread B: autocommit inserts of one 4 KB row until `growths` growths or `cap`.
fn committer(
    db: Arc<extentdb_storage::shared::SharedDatabase>,
    t: u32,
    growths: u64,
    cap: Duration,
    progress: Arc<AtomicU64>,
) -> JoinHandle<Committed> {
    std::thread::spawn(move || {
        let wal = db.lock_for_tests().wal().expect("a log writer");
        let (mut lat, mut at_growth) = (Vec::with_capacity(1 << 18), Vec::new());
        let (started, mut seen, mut worst) = (Instant::now(), 0, (0u64, 0u64));
        let row = big_row(0);
        while started.elapsed() < cap {
            let t0 = Instant::now();
            let step = {
                let mut g = db.lock_for_tests();
                let _held = Held(Instant::now(), &mut worst.0);
                let x = g.begin_xact();
                match g.now(|d| d.insert_row(x, t, (&row, d.growth_env()), None)) {
                    Ok(_) => g
                        .commit_xact(x)
                        .map(|l| (l, g.log_growth_stats().0))
                        .map_err(|e| e.to_string()),
                    Err(e) => {
                        let rb = g.rollback_xact(x).err();
                        Err(format!("insert: {e} (rollback: {rb:?})"))
                    }
                }
            };
            let (lsn, now_growths) = match step {
                Ok((Some(l), n)) => (l, n),
                Ok((None, _)) => {
                    return (lat, at_growth, worst, Some("commit logged nothing".into()))
                }
                Err(e) => {
                    let msg = format!("commit {}: {e}", lat.len());
                    return (lat, at_growth, worst, Some(msg));
                }
            };
            let flushing = Instant::now();
            let flushed = wal.flush(lsn);
            worst.1 = worst.1.max(flushing.elapsed().as_micros() as u64);
            if let Err(e) = flushed {
                let msg = format!("flush {}: {e}", lat.len());
                return (lat, at_growth, worst, Some(msg));
            }
            let timed = (
                t0.elapsed().as_micros() as u64,
                started.elapsed().as_micros() as u64,
            );
            lat.push(timed);
            progress.fetch_add(1, Ordering::Relaxed);
            if now_growths > seen {
                seen = now_growths;
                at_growth.push(timed);
            }
            if seen >= growths {
                break;
            }
        }
        (lat, at_growth, worst, None)
    })
}

/// Waits for thread B, reporting a hang (no commit for STALL_LIMIT) by exiting the process.
fn await_committer(b: JoinHandle<Committed>, progress: &AtomicU64) -> Result<Committed, String> {
    let (mut last, mut since) = (0, Instant::now());
    while !b.is_finished() {
        std::thread::sleep(Duration::from_millis(100));
        let now = progress.load(Ordering::Relaxed);
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() > STALL_LIMIT {
            eprintln!(
                "HANG: no commit finished for {} s after commit {now}; exiting",
                STALL_LIMIT.as_secs()
            );
            std::process::exit(2);
        }
    }
    b.join()
        .map_err(|p| format!("committer panicked: {}", panic_text(&p)))
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(no message)".into())
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i] as f64 / 1000.0
}

/// One mode's run on a fresh database.
fn run_mode(fs: &OsFileSystem, a: &Args, mode: Mode, round: u32) -> Run {
    let prepare_ahead = mode != Mode::OnDemand;
    let growth_pages = (a.growth_mb * MB / PAGE_SIZE as u64) as u32;
    let mut db = create_db(fs, a, growth_pages, mode);
    let errdir = a.dir.join(format!("errorlog-r{round}-{}", mode_name(mode)));
    let _ = std::fs::remove_dir_all(&errdir);
    let errorlog = Arc::new(ErrorLog::open(&errdir).unwrap());
    db.set_growth_env(GrowthEnv {
        errorlog: Some(errorlog.clone()),
        prepare_ahead,
        ..GrowthEnv::default()
    });
    let big = db
        .create_table(table("Big", vec![column("c", 175, ROW_BYTES as i16)]))
        .unwrap();
    let small = db
        .create_table(table("Holder", vec![column("i", 56, 4)]))
        .unwrap();
    let db = Arc::new(extentdb_storage::shared::SharedDatabase::new(db));
    // The background checkpoint thread, as the instance gives every database.
    let checkpointer =
        Checkpointer::spawn(&db, |name, e| panic!("checkpoint of {name} failed: {e}"));
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let a_thread = holder(db.clone(), small, stop.clone(), tx);
    let mut run = Run {
        mode,
        ..Run::default()
    };
    if let Err(e) = rx.recv().unwrap() {
        run.failure = Some(e);
    }
    let progress = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let cap = Duration::from_secs(a.max_secs);
    let b = committer(db.clone(), big, a.growths, cap, progress.clone());
    let committed = await_committer(b, &progress);
    run.elapsed_s = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    match a_thread.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => run.failure = Some(e),
        Err(p) => run.failure = Some(format!("holder panicked: {}", panic_text(&p))),
    }
    match committed {
        Ok((timed, at_growth, worst, err)) => {
            (run.max_locked_ms, run.max_flush_ms) = (worst.0 as f64 / 1e3, worst.1 as f64 / 1e3);
            for &(_, end_us) in &timed {
                let sec = (end_us / 1_000_000) as usize;
                if run.per_second.len() <= sec {
                    run.per_second.resize(sec + 1, 0);
                }
                run.per_second[sec] += 1;
            }
            let mut lat: Vec<u64> = timed.iter().map(|t| t.0).collect();
            lat.sort_unstable();
            run.commits = lat.len() as u64;
            run.p50_ms = percentile(&lat, 0.50);
            run.p99_ms = percentile(&lat, 0.99);
            run.max_ms = lat.last().copied().unwrap_or(0) as f64 / 1000.0;
            run.over_10ms = lat.iter().filter(|&&u| u > 10_000).count() as u64;
            run.over_100ms = lat.iter().filter(|&&u| u > 100_000).count() as u64;
            run.growth_commit_ms = at_growth.iter().map(|g| g.0 as f64 / 1000.0).collect();
            run.growth_at_s = at_growth.iter().map(|g| g.1 as f64 / 1e6).collect();
            run.failure = err.or(run.failure.take());
        }
        Err(e) => run.failure = Some(e),
    }
    drop(checkpointer);
    let (growths, wait_us) = db.lock_for_tests().log_growth_stats();
    run.checkpoints = db.lock_for_tests().checkpoints_completed();
    (run.growths, run.longest_wait_ms) = (growths, wait_us as f64 / 1000.0);
    run.init_ms = logged_init_ms(&errorlog);
    close(db, a);
    let _ = std::fs::remove_dir_all(&errdir);
    run
}

/// The "took N milliseconds" of each autogrowth line the engine logged.
fn logged_init_ms(log: &ErrorLog) -> Vec<u64> {
    log.read(0)
        .unwrap_or_default()
        .iter()
        .filter_map(|l| {
            let rest = l.text.strip_prefix("Autogrow of file ")?;
            let took = rest.split(" took ").nth(1)?;
            took.split(' ').next()?.parse().ok()
        })
        .collect()
}

/// Drops the database and removes its files. A growth may still be prepared in the
/// background (the next one starts as soon as the last is committed), and the database has
/// no call that waits for it on close: wait until the log file has stopped growing, so its
/// zeros do not share the disk with the next run.
fn close(db: Arc<extentdb_storage::shared::SharedDatabase>, a: &Args) {
    let db = Arc::into_inner(db).expect("threads joined").into_inner();
    drop(db);
    let (mdf, ldf) = paths(&a.dir);
    let len = || std::fs::metadata(&ldf).map(|m| m.len()).unwrap_or(0);
    let (mut last, t) = (len(), Instant::now());
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = len();
        if now == last || t.elapsed() > Duration::from_secs(120) {
            break;
        }
        last = now;
    }
    std::fs::remove_file(mdf).unwrap();
    std::fs::remove_file(ldf).unwrap();
}

/// The disk's own time to zero `bytes` in a new file: 8 MiB writes and one fdatasync.
fn baseline_zero_ms(fs: &OsFileSystem, dir: &Path, bytes: u64) -> f64 {
    let path = dir.join("baseline_zero.tmp");
    let _ = std::fs::remove_file(&path);
    let f = fs.create_new(&path).unwrap();
    let t = Instant::now();
    write_zeros(f.as_ref(), 0, bytes).unwrap();
    f.sync_data().unwrap();
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    drop(f);
    std::fs::remove_file(&path).unwrap();
    ms
}

fn mode_name(mode: Mode) -> &'static str {
    if mode == Mode::NoGrowth {
        "no_growth"
    } else if mode == Mode::PrepareAhead {
        "prepare_ahead"
    } else {
        "on_demand"
    }
}

fn list<T: std::fmt::Display>(v: &[T]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn run_json(r: &Run, round: u32) -> String {
    format!(
        "    {{\"round\": {round}, \"mode\": \"{}\", \"commits\": {}, \"growths\": {}, \"elapsed_s\": {:.1}, \"commits_per_s\": {:.0}, \"p50_ms\": {:.3}, \"p99_ms\": {:.3}, \"max_ms\": {:.1}, \"commits_over_10ms\": {}, \"commits_over_100ms\": {}, \"longest_growth_wait_ms\": {:.1}, \"max_locked_ms\": {:.1}, \"max_flush_ms\": {:.1}, \"growth_commit_ms\": [{}], \"growth_at_s\": [{}], \"commits_per_second\": [{}], \"logged_growth_init_ms\": [{}], \"checkpoints\": {}, \"failure\": {}}}",
        mode_name(r.mode),
        r.commits,
        r.growths,
        r.elapsed_s,
        r.commits as f64 / r.elapsed_s.max(1e-9),
        r.p50_ms,
        r.p99_ms,
        r.max_ms,
        r.over_10ms,
        r.over_100ms,
        r.longest_wait_ms,
        r.max_locked_ms,
        r.max_flush_ms,
        list(&r.growth_commit_ms.iter().map(|m| format!("{m:.1}")).collect::<Vec<_>>()),
        list(&r.growth_at_s.iter().map(|t| format!("{t:.2}")).collect::<Vec<_>>()),
        list(&r.per_second),
        list(&r.init_ms),
        r.checkpoints,
        r.failure.as_ref().map_or("null".into(), |f| format!("{f:?}")),
    )
}

fn print_table(runs: &[(u32, Run)], baselines: &[f64]) {
    println!(
        "\n{:<5} {:<14} {:>8} {:>7} {:>8} {:>8} {:>9} {:>6} {:>10} {:>14} {:>8} {:>9} {:>4}  failure",
        "round",
        "mode",
        "commits",
        "growths",
        "p50 ms",
        "p99 ms",
        "max ms",
        ">10ms",
        "wait ms",
        "init ms (log)",
        "lock ms",
        "flush ms",
        "ckpt"
    );
    for (round, r) in runs {
        println!(
            "{:<5} {:<14} {:>8} {:>7} {:>8.3} {:>8.3} {:>9.1} {:>6} {:>10.1} {:>14} {:>8.1} {:>9.1} {:>4}  {}",
            round,
            mode_name(r.mode),
            r.commits,
            r.growths,
            r.p50_ms,
            r.p99_ms,
            r.max_ms,
            r.over_10ms,
            r.longest_wait_ms,
            list(&r.init_ms),
            r.max_locked_ms,
            r.max_flush_ms,
            r.checkpoints,
            r.failure.as_deref().unwrap_or("-")
        );
    }
    println!(
        "baseline zeroing of one growth (ms, per round): {}",
        list(
            &baselines
                .iter()
                .map(|m| format!("{m:.0}"))
                .collect::<Vec<_>>()
        )
    );
}

fn main() {
    let a = parse_args();
    std::fs::create_dir_all(&a.dir).unwrap();
    let fs = OsFileSystem::new();
    let (mut runs, mut baselines) = (Vec::new(), Vec::new());
    for round in 1..=a.rounds {
        baselines.push(baseline_zero_ms(&fs, &a.dir, a.growth_mb * MB));
        for &mode in &a.modes {
            let r = run_mode(&fs, &a, mode, round);
            eprintln!(
                "round {round} {}: {} commits, {} growths in {:.1} s, max {:.1} ms, wait {:.1} ms{}",
                mode_name(mode),
                r.commits,
                r.growths,
                r.elapsed_s,
                r.max_ms,
                r.longest_wait_ms,
                r.failure.as_ref().map_or(String::new(), |f| format!(", FAILURE: {f}"))
            );
            eprintln!(
                "  commits per second: {}; growths committed at s: {}",
                list(&r.per_second),
                list(
                    &r.growth_at_s
                        .iter()
                        .map(|t| format!("{t:.2}"))
                        .collect::<Vec<_>>()
                )
            );
            runs.push((round, r));
        }
    }
    print_table(&runs, &baselines);
    let of = |mode: Mode, f: fn(&Run) -> f64| -> f64 {
        median(
            &runs
                .iter()
                // Only runs in which the log grew measure a growth; the table shows all.
                .filter(|(_, r)| r.mode == mode && (r.growths > 0 || mode == Mode::NoGrowth))
                .map(|(_, r)| f(r))
                .collect::<Vec<_>>(),
        )
    };
    use Mode::{NoGrowth, OnDemand, PrepareAhead};
    let (max_on, max_off) = (of(PrepareAhead, |r| r.max_ms), of(OnDemand, |r| r.max_ms));
    let (p99_on, p99_off) = (of(PrepareAhead, |r| r.p99_ms), of(OnDemand, |r| r.p99_ms));
    let wait_on = of(PrepareAhead, |r| r.longest_wait_ms);
    let (locked_on, locked_off) = (
        of(PrepareAhead, |r| r.max_locked_ms),
        of(OnDemand, |r| r.max_locked_ms),
    );
    let stall = of(OnDemand, |r| r.longest_wait_ms);
    let (max_none, p99_none, locked_none) = (
        of(NoGrowth, |r| r.max_ms),
        of(NoGrowth, |r| r.p99_ms),
        of(NoGrowth, |r| r.max_locked_ms),
    );
    let init_off: Vec<f64> = runs
        .iter()
        .filter(|(_, r)| r.mode == OnDemand)
        .flat_map(|(_, r)| r.init_ms.iter().map(|&m| m as f64))
        .collect();
    let init_on: Vec<f64> = runs
        .iter()
        .filter(|(_, r)| r.mode == PrepareAhead)
        .flat_map(|(_, r)| r.init_ms.iter().map(|&m| m as f64))
        .collect();
    let base = median(&baselines);
    let (date, host) = common::date_and_host();
    let json = format!(
        "{{\n  \"benchmark\": \"log_growth_latency\",\n  \"date\": \"{date}\",\n  \"host\": \"{host}\",\n  \"dir\": \"{}\",\n  \"log_start_mb\": 64,\n  \"growth_mb\": {},\n  \"row_bytes\": {ROW_BYTES},\n  \"rounds\": {},\n  \"max_secs_per_mode\": {},\n  \"target_growths\": {},\n  \"baseline_zero_growth_ms\": [{}],\n  \"runs\": [\n{}\n  ],\n  \"median_max_ms_prepare_ahead\": {max_on:.1},\n  \"median_max_ms_on_demand\": {max_off:.1},\n  \"ratio_max_latency_prepare_ahead_vs_on_demand\": {:.4},\n  \"median_p99_ms_prepare_ahead\": {p99_on:.3},\n  \"median_p99_ms_on_demand\": {p99_off:.3},\n  \"medians_over\": \"runs with at least one growth\",\n  \"median_max_locked_ms_prepare_ahead\": {locked_on:.1},\n  \"median_max_locked_ms_on_demand\": {locked_off:.1},\n  \"median_longest_growth_wait_ms_prepare_ahead\": {wait_on:.1},\n  \"median_on_demand_stall_ms\": {stall:.1},\n  \"median_logged_growth_init_ms_on_demand\": {:.0},\n  \"median_logged_growth_init_ms_prepare_ahead\": {:.0},\n  \"median_baseline_zero_growth_ms\": {base:.0},\n  \"ratio_on_demand_stall_vs_baseline_zero\": {:.3},\n  \"median_max_ms_no_growth\": {max_none:.1},\n  \"median_p99_ms_no_growth\": {p99_none:.3},\n  \"median_max_locked_ms_no_growth\": {locked_none:.1},\n  \"ratio_max_latency_prepare_ahead_vs_no_growth\": {:.3}\n}}\n",
        a.dir.display(),
        a.growth_mb,
        a.rounds,
        a.max_secs,
        a.growths,
        list(&baselines.iter().map(|m| format!("{m:.0}")).collect::<Vec<_>>()),
        runs.iter().map(|(n, r)| run_json(r, *n)).collect::<Vec<_>>().join(",\n"),
        max_on / max_off.max(1e-9),
        median(&init_off),
        median(&init_on),
        stall / base.max(1e-9),
        max_on / max_none.max(1e-9),
    );
    println!(
        "\n(medians over runs whose log grew) longest lock hold: prepare_ahead {locked_on:.1} ms vs on_demand {locked_off:.1} ms\nmax commit latency: prepare_ahead {max_on:.1} ms vs on_demand {max_off:.1} ms (ratio {:.4}); on-demand stall {stall:.0} ms; control without growth: max {max_none:.1} ms, p99 {p99_none:.3} ms, longest lock hold {locked_none:.1} ms; engine-logged init of one {} MB growth {:.0} ms (on demand) / {:.0} ms (background); disk zeroing baseline {base:.0} ms",
        max_on / max_off.max(1e-9),
        a.growth_mb,
        median(&init_off),
        median(&init_on),
    );
    print!("{json}");
    let suffix = if a.growth_mb == 1024 {
        String::new()
    } else {
        format!("-{}mb", a.growth_mb)
    };
    println!(
        "wrote {}",
        common::write_results(&format!("log-growth-latency{suffix}"), &json)
    );
}
