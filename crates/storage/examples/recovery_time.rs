//! Benchmark (not a test): crash recovery time per GB of log, beside the disk's own time to
//! read the same bytes in the same run.
//!
//! A fresh database on the real file system (1 GB log, so nothing grows) takes committed
//! transactions of 50 incompressible 4,000-byte rows until the active log holds `--log-mb`
//! (default 240: below the 256 MB after which an automatic checkpoint bounds redo), then
//! an open transaction of `--open-rows` rows, and "crashes": the database is dropped
//! without a checkpoint, so its buffer pool's dirty pages are lost and only the log and
//! the pages evicted so far are on disk, as after SIGKILL. Reopening runs analysis, redo
//! and undo; the benchmark times it and divides by the log bytes recovery read. The
//! baseline is a sequential read of the same number of bytes from the log file. Each
//! round runs warm (the files in the page cache, as after SIGKILL of the process) and,
//! where the kernel lets us drop caches (root), cold.
//!
//! Usage: cargo run --release -p extentdb-storage --example recovery_time --
//!        [DIR] [--log-mb 240] [--open-rows 2000] [--rounds 3]
//! Writes bench/results/<date>-<host>-recovery-time.json.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use common::{column, median, new_file, table, Quiet};
use extentdb_format::catalog::RecoveryModel;
use extentdb_format::file_header::FileType;
use extentdb_format::record::{self, ColumnLayout};
use extentdb_io::os::OsFileSystem;
use extentdb_storage::database::OpContext;
use extentdb_storage::file_init::InitPolicy;
use extentdb_storage::{Database, NewDatabase};

const ROW_BYTES: usize = 4000;
const MB: u64 = 1 << 20;

struct Args {
    dir: PathBuf,
    log_mb: u64,
    open_rows: u32,
    rounds: u32,
}

fn parse_args() -> Args {
    let mut a = Args {
        dir: PathBuf::from("bench/tmp"),
        log_mb: 240,
        open_rows: 2000,
        rounds: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(s) = it.next() {
        let mut num = |name: &str| -> u64 { common::number(&mut it, name) };
        match s.as_str() {
            "--log-mb" => a.log_mb = num("--log-mb"),
            "--open-rows" => a.open_rows = num("--open-rows") as u32,
            "--rounds" => a.rounds = num("--rounds") as u32,
            _ if s.starts_with("--") => panic!("unknown option {s}"),
            _ => a.dir = PathBuf::from(s),
        }
    }
    a
}

/// Incompressible row bytes from a xorshift generator.
fn random_row(x: &mut u64) -> Vec<u8> {
    let v: Vec<u8> = (0..ROW_BYTES)
        .map(|_| {
            *x ^= *x << 13;
            *x ^= *x >> 7;
            *x ^= *x << 17;
            *x as u8
        })
        .collect();
    record::encode(&[ColumnLayout::Fixed(ROW_BYTES as u16)], &[Some(&v)]).unwrap()
}

fn paths(dir: &Path) -> (PathBuf, PathBuf) {
    (dir.join("Recovery.mdf"), dir.join("Recovery_log.ldf"))
}

/// Builds the crashed database; returns (committed rows, open rows).
fn load_and_crash(fs: &OsFileSystem, a: &Args) -> (u64, u32) {
    let (mdf, ldf) = paths(&a.dir);
    common::remove(&mdf);
    common::remove(&ldf);
    let spec = NewDatabase {
        name: "Recovery".into(),
        database_id: 5,
        recovery_model: RecoveryModel::Simple,
        files: vec![
            new_file("Recovery_data", mdf, FileType::Rows, 2 * 131_072, 0),
            new_file("Recovery_log", ldf, FileType::Log, 131_072, 0),
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
    let mut db = Database::create(&ctx, &spec).unwrap();
    let t = db
        .create_table(table("R", vec![column("v", 173, ROW_BYTES as i16)]))
        .unwrap();
    db.checkpoint().unwrap();
    let wal = db.wal().unwrap();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut committed = 0u64;
    while wal.used_bytes() < a.log_mb * MB {
        let xact = db.begin_xact();
        for _ in 0..50 {
            db.now(|d| d.insert_row(xact, t, (&random_row(&mut x), d.growth_env()), None))
                .unwrap();
        }
        let lsn = db.commit_xact(xact).unwrap().unwrap();
        wal.flush(lsn).unwrap();
        committed += 50;
    }
    let open = db.begin_xact();
    for _ in 0..a.open_rows {
        db.now(|d| d.insert_row(open, t, (&random_row(&mut x), d.growth_env()), None))
            .unwrap();
    }
    wal.flush(wal.end_lsn()).unwrap();
    drop(wal);
    drop(db);
    (committed, a.open_rows)
}

/// Drops the page cache (needs root); false when not allowed.
fn drop_caches() -> bool {
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

/// Seconds to read `bytes` sequentially from the start of `path` in 1 MiB reads.
fn read_seconds(path: &Path, bytes: u64) -> f64 {
    let mut f = std::fs::File::open(path).unwrap();
    let mut buf = vec![0u8; MB as usize];
    let started = Instant::now();
    let mut left = bytes;
    while left > 0 {
        let n = f.read(&mut buf[..left.min(MB) as usize]).unwrap();
        if n == 0 {
            break;
        }
        left -= n as u64;
    }
    started.elapsed().as_secs_f64()
}

struct Measure {
    cache: &'static str,
    recovery_s: f64,
    read_s: f64,
    log_bytes: u64,
    records: usize,
    redone: usize,
    rolled_back: usize,
    analysis_redo_ms: u64,
    undo_ms: u64,
}

fn measure(fs: &OsFileSystem, a: &Args, cold: bool) -> Option<Measure> {
    let (mdf, ldf) = paths(&a.dir);
    load_and_crash(fs, a);
    if cold && !drop_caches() {
        return None;
    }
    let started = Instant::now();
    let db = Database::open(fs, &mdf).unwrap();
    let recovery_s = started.elapsed().as_secs_f64();
    let st = db.recovery_stats().cloned().unwrap_or_default();
    drop(db);
    if cold && !drop_caches() {
        return None;
    }
    let read_s = read_seconds(&ldf, st.log_bytes);
    Some(Measure {
        cache: if cold { "cold" } else { "warm" },
        recovery_s,
        read_s,
        log_bytes: st.log_bytes,
        records: st.records,
        redone: st.redone,
        rolled_back: st.rolled_back,
        analysis_redo_ms: st.analysis_redo_ms,
        undo_ms: st.undo_ms,
    })
}

fn main() {
    let a = parse_args();
    std::fs::create_dir_all(&a.dir).unwrap();
    let fs = OsFileSystem::new();
    let mut runs = Vec::new();
    for round in 1..=a.rounds {
        for cold in [false, true] {
            let Some(m) = measure(&fs, &a, cold) else {
                eprintln!("round {round}: cannot drop the page cache (not root); warm only");
                continue;
            };
            let gb = m.log_bytes as f64 / 1e9;
            eprintln!(
                "round {round} {}: recovered {:.0} MB of log ({} records, {} redone, {} rolled back) in {:.2} s ({:.0} ms redo, {:.0} ms undo): {:.2} s per GB; reading the same bytes {:.2} s ({:.2} s per GB)",
                m.cache,
                m.log_bytes as f64 / 1e6,
                m.records,
                m.redone,
                m.rolled_back,
                m.recovery_s,
                m.analysis_redo_ms,
                m.undo_ms,
                m.recovery_s / gb,
                m.read_s,
                m.read_s / gb
            );
            runs.push((round, m));
        }
    }
    let per_gb = |cache: &str, f: fn(&Measure) -> f64| {
        median(
            &runs
                .iter()
                .filter(|(_, m)| m.cache == cache)
                .map(|(_, m)| f(m) / (m.log_bytes as f64 / 1e9))
                .collect::<Vec<_>>(),
        )
    };
    let mut summary = Vec::new();
    for cache in ["warm", "cold"] {
        let (rec, read) = (per_gb(cache, |m| m.recovery_s), per_gb(cache, |m| m.read_s));
        if rec > 0.0 {
            println!(
                "{cache}: recovery {rec:.2} s per GB of log, sequential read {read:.2} s per GB: recovery at {:.2}x the read speed",
                read / rec
            );
            summary.push(format!(
                "  \"median_recovery_s_per_gb_{cache}\": {rec:.3},\n  \"median_read_s_per_gb_{cache}\": {read:.3},\n  \"ratio_read_vs_recovery_{cache}\": {:.3}",
                read / rec
            ));
        }
    }
    let run_json: Vec<String> = runs
        .iter()
        .map(|(round, m)| {
            format!(
                "    {{\"round\": {round}, \"cache\": \"{}\", \"log_bytes\": {}, \"records\": {}, \"redone\": {}, \"rolled_back\": {}, \"recovery_s\": {:.3}, \"analysis_redo_ms\": {}, \"undo_ms\": {}, \"read_s\": {:.3}}}",
                m.cache, m.log_bytes, m.records, m.redone, m.rolled_back, m.recovery_s, m.analysis_redo_ms, m.undo_ms, m.read_s
            )
        })
        .collect();
    let json = format!(
        "{{\n  \"benchmark\": \"recovery_time\",\n  \"log_mb\": {},\n  \"open_rows\": {},\n  \"row_bytes\": {ROW_BYTES},\n  \"runs\": [\n{}\n  ],\n{}\n}}\n",
        a.log_mb,
        a.open_rows,
        run_json.join(",\n"),
        summary.join(",\n")
    );
    print!("{json}");
    println!("wrote {}", common::write_results("recovery-time", &json));
    let (mdf, ldf) = paths(&a.dir);
    common::remove(&mdf);
    common::remove(&ldf);
}
