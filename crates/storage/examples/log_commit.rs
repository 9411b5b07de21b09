//! Benchmark (not a test): commits per second of the log writer against the disk's own limit,
//! measured in the same run on the same file system.
//!
//! - baseline_written: a bare loop of pwrite(4 KiB) + fdatasync on an already-written file;
//! - baseline_unwritten: the same loop on a fallocated, never-written range (each first write
//!   converts an extent, which the fdatasync must journal: why the log is initialized);
//! - log_1_session: append one 100-byte record + flush, one thread;
//! - log_8_sessions: the same from 8 threads at once (group commit);
//! - log_stream: 8,000-byte records of noise (nothing to compress) appended as fast as the
//!   writer takes them, flushed once at the end, MB/s against a sequential write of the same
//!   bytes in 1 MiB pwrites + one fdatasync (what `dd bs=1M conv=fdatasync` does).
//!
//! Usage: cargo run --release -p extentdb-storage --example log_commit [DIR] [COMMITS]
//! Writes bench/results/<date>-<host>-log-commit.json.

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use extentdb_io::os::OsFileSystem;
use extentdb_io::{write_zeros, DbFile, FileSystem};
use extentdb_storage::log_file;
use extentdb_storage::log_writer::{find_log_end, LogWriter};

const LOG_BYTES: u64 = 256 << 20;

fn baseline(path: &Path, commits: u32, written: bool) -> f64 {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    if written {
        f.write_all_at(&vec![0u8; 64 << 20], 0).unwrap();
    } else {
        use std::os::unix::io::AsRawFd;
        // SAFETY: fallocate reads its integer arguments only, on an fd we own.
        assert_eq!(unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, 64 << 20) }, 0);
    }
    f.sync_all().unwrap();
    let buf = vec![7u8; 4096];
    let t = Instant::now();
    for i in 0..commits as u64 {
        f.write_all_at(&buf, (i * 4096) % (64 << 20)).unwrap();
        f.sync_data().unwrap();
    }
    let rate = commits as f64 / t.elapsed().as_secs_f64();
    std::fs::remove_file(path).unwrap();
    rate
}

fn new_log(dir: &Path) -> BTreeMap<u16, Arc<dyn DbFile>> {
    let fs = OsFileSystem::new();
    let path = dir.join("bench_log.ldf");
    let _ = std::fs::remove_file(&path);
    let f = fs.create_new(&path).unwrap();
    write_zeros(f.as_ref(), 0, LOG_BYTES).unwrap();
    let pages = (LOG_BYTES / 8192) as u32;
    log_file::format_new(
        f.as_ref(),
        [1; 16],
        2,
        pages,
        log_file::vlf_count_for_create(LOG_BYTES),
        true,
    )
    .unwrap();
    BTreeMap::from([(2u16, f)])
}

fn open(files: &BTreeMap<u16, Arc<dyn DbFile>>) -> LogWriter {
    let vlfs = log_file::read_vlfs(files[&2].as_ref(), 2).unwrap();
    let end = find_log_end(files, &vlfs, 1).unwrap().end;
    LogWriter::open(files.clone(), vlfs, end, 1).unwrap()
}

fn log_sessions(dir: &Path, sessions: u32, commits_each: u32) -> (f64, u64) {
    let files = new_log(dir);
    let w = Arc::new(open(&files));
    let t = Instant::now();
    let threads: Vec<_> = (0..sessions)
        .map(|s| {
            let w = w.clone();
            std::thread::spawn(move || {
                let rec = [s as u8; 100];
                for _ in 0..commits_each {
                    let lsn = w.append(&rec).unwrap();
                    w.flush(lsn).unwrap();
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    let rate = (sessions * commits_each) as f64 / t.elapsed().as_secs_f64();
    let syncs = w.syncs();
    std::fs::remove_file(dir.join("bench_log.ldf")).unwrap();
    (rate, syncs)
}

/// Bytes the streaming measurement writes (fits the 256 MB log without truncation).
const STREAM_BYTES: u64 = 160 << 20;

fn seq_write_baseline(path: &Path) -> f64 {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(path)
        .unwrap();
    let buf = vec![0x5au8; 1 << 20];
    let t = Instant::now();
    for i in 0..STREAM_BYTES >> 20 {
        f.write_all_at(&buf, i << 20).unwrap();
    }
    f.sync_data().unwrap();
    let rate = STREAM_BYTES as f64 / (1 << 20) as f64 / t.elapsed().as_secs_f64();
    std::fs::remove_file(path).unwrap();
    rate
}

fn log_stream(dir: &Path) -> f64 {
    let files = new_log(dir);
    let w = open(&files);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rec = vec![0u8; 8000];
    let t = Instant::now();
    let mut written = 0u64;
    let mut last = None;
    while written < STREAM_BYTES {
        for b in rec.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        last = Some(w.append(&rec).unwrap());
        written += rec.len() as u64;
    }
    w.flush(last.unwrap()).unwrap();
    let rate = written as f64 / (1 << 20) as f64 / t.elapsed().as_secs_f64();
    std::fs::remove_file(dir.join("bench_log.ldf")).unwrap();
    rate
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = PathBuf::from(
        args.get(1)
            .cloned()
            .unwrap_or_else(|| std::env::temp_dir().display().to_string()),
    );
    let commits: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(4000);
    // The disk's rate drifts between runs on a shared machine, so the figures are medians of
    // rounds that interleave the baselines with the log writer.
    let (mut w, mut u, mut o, mut e) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut one_syncs, mut eight_syncs) = (0, 0);
    let (mut stream, mut seq) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        seq.push(seq_write_baseline(&dir.join("bench_seq")));
        stream.push(log_stream(&dir));
        w.push(baseline(&dir.join("bench_written"), commits, true));
        let (r, s) = log_sessions(&dir, 1, commits);
        o.push(r);
        one_syncs = s;
        u.push(baseline(&dir.join("bench_unwritten"), commits, false));
        let (r, s) = log_sessions(&dir, 8, commits / 2);
        e.push(r);
        eight_syncs = s;
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let (written, unwritten, one, eight) = (
        median(&mut w),
        median(&mut u),
        median(&mut o),
        median(&mut e),
    );
    let (stream, seq) = (median(&mut stream), median(&mut seq));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .to_string();
    let json = format!(
        "{{\n  \"benchmark\": \"log_commit\",\n  \"host\": \"{host}\",\n  \"dir\": \"{}\",\n  \"commits\": {commits},\n  \"baseline_written_commits_per_s\": {written:.0},\n  \"baseline_unwritten_commits_per_s\": {unwritten:.0},\n  \"log_1_session_commits_per_s\": {one:.0},\n  \"log_1_session_syncs\": {one_syncs},\n  \"log_8_sessions_commits_per_s\": {eight:.0},\n  \"log_8_sessions_syncs\": {eight_syncs},\n  \"ratio_1_session_vs_baseline\": {:.3},\n  \"ratio_unwritten_vs_written_baseline\": {:.3},\n  \"ratio_8_sessions_vs_1\": {:.3},\n  \"log_stream_mb_per_s\": {stream:.1},\n  \"baseline_sequential_write_mb_per_s\": {seq:.1},\n  \"ratio_log_stream_vs_sequential_write\": {:.3},\n  \"goals\": {{\"one_session_vs_baseline_min\": 0.7}}\n}}\n",
        dir.display(),
        one / written,
        unwritten / written,
        eight / one,
        stream / seq
    );
    print!("{json}");
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/results");
    let date = std::process::Command::new("date")
        .arg("+%F")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join(format!("{date}-{host}-log-commit.json")), json).unwrap();
}
