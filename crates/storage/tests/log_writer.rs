//! The log writer and reader: records read back with the LSNs append gave, across VLFs; a
//! seeded crash loop (unsynced writes dropped or torn per sector) in which every flushed
//! record survives and what survives is always a prefix of what was appended; log full and
//! reuse after truncation with flipped parity; group commit under concurrent committers.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use extentdb_format::Lsn;
use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_io::{AllocateMode, DbFile, FileSystem};
use extentdb_storage::log_file;
use extentdb_storage::log_writer::{read_log, LogWriter};
use extentdb_storage::StorageError;

type Files = BTreeMap<u16, Arc<dyn DbFile>>;

fn new_log(fs: &SimFileSystem, pages: u32, vlfs: u32) -> Files {
    let f = fs.create_new(Path::new("/sim/log.ldf")).unwrap();
    f.allocate(0, pages as u64 * 8192, AllocateMode::WriteZeroes)
        .unwrap();
    log_file::format_new(f.as_ref(), [7; 16], 2, pages, vlfs, true).unwrap();
    BTreeMap::from([(2u16, f)])
}

fn open(files: &BTreeMap<u16, Arc<dyn DbFile>>) -> (LogWriter, Vec<(Lsn, Vec<u8>)>) {
    let vlfs = log_file::read_vlfs(files[&2].as_ref(), 2).unwrap();
    let (records, end) = read_log(files, &vlfs, 1).unwrap();
    let w = LogWriter::open(files.clone(), vlfs, end, 1).unwrap();
    (w, records.into_iter().map(|r| (r.lsn, r.bytes)).collect())
}

fn record(x: &mut u64) -> Vec<u8> {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    let len = (*x % 700) as usize;
    (0..len).map(|i| (*x >> (i % 56)) as u8).collect()
}

/// Proves records come back in order with exactly the LSNs append returned, across VLFs.
#[test]
fn records_read_back_across_vlfs() {
    let fs = SimFileSystem::new(1, Faults::default());
    let files = new_log(&fs, 1024, 4);
    let (w, existing) = open(&files);
    assert!(existing.is_empty());
    let mut x = 99;
    let mut appended = Vec::new();
    for _ in 0..12_000 {
        let r = record(&mut x);
        appended.push((w.append(&r).unwrap(), r));
    }
    w.flush(appended.last().unwrap().0).unwrap();
    assert!(
        appended.windows(2).all(|p| p[0].0 < p[1].0),
        "LSNs increase"
    );
    let vlfs_used = appended.iter().map(|a| a.0.vlf_sequence).max().unwrap();
    assert!(vlfs_used >= 3, "the test must cross VLFs");
    let (_, back) = open(&files);
    assert_eq!(back, appended);
}

/// The seeded crash loop: appends with flushes at random points, crashes that drop or tear
/// unsynced writes, recovery, more appends. Every flushed record survives, and what survives
/// is exactly a prefix of what was appended. A failing seed replays exactly.
#[test]
fn crash_loop_keeps_every_flushed_record() {
    let seeds: u64 = std::env::var("XDB_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let (mut rounds_with_loss, mut rounds_with_tail) = (0, 0);
    for seed in 0..seeds {
        let fs = SimFileSystem::new(seed + 1, Faults::default());
        // Odd seeds use sixteen 256 KiB VLFs, so unsynced writes at a crash span several.
        let files = if seed % 2 == 0 {
            new_log(&fs, 768, 4)
        } else {
            new_log(&fs, 512, 16)
        };
        let mut model: Vec<(Lsn, Vec<u8>)> = Vec::new();
        let mut acked = 0usize;
        let mut x = seed * 7919 + 1;
        for round in 0..4 {
            let (w, recovered) = open(&files);
            assert!(
                recovered.len() >= acked,
                "seed {seed} round {round}: lost acknowledged records"
            );
            assert_eq!(
                recovered[..],
                model[..recovered.len()],
                "seed {seed} round {round}: not a prefix"
            );
            rounds_with_loss += (recovered.len() < model.len()) as u32;
            rounds_with_tail += (recovered.len() > acked) as u32;
            model.truncate(recovered.len());
            acked = recovered.len();
            for _ in 0..(200 + x % 400) {
                let r = record(&mut x);
                let lsn = match w.append(&r) {
                    Ok(l) => l,
                    Err(StorageError::LogFull(_)) => break,
                    Err(e) => panic!("seed {seed}: {e}"),
                };
                model.push((lsn, r));
                // Frequent flushes, and rare ones that leave full blocks written but unsynced.
                if x % [3, 9, 60, 500][seed as usize % 4] == 0 {
                    w.flush(lsn).unwrap();
                    acked = model.len();
                }
            }
            drop(w);
            fs.crash();
        }
    }
    // The loop must really lose unflushed records sometimes, and keep some beyond the last
    // flush sometimes (written and not torn), or it proves nothing.
    assert!(
        rounds_with_loss > 0 && rounds_with_tail > 0,
        "loss {rounds_with_loss}, tail {rounds_with_tail}"
    );
}

/// Proves a log with no truncation fills (LogFull), and after truncation reuses the first
/// VLF with a new FSeqNo and the other parity, readable from the oldest needed FSeqNo.
#[test]
fn log_full_then_reuse_after_truncation() {
    let fs = SimFileSystem::new(3, Faults::default());
    let files = new_log(&fs, 128, 4);
    let (w, _) = open(&files);
    let rec = vec![0xABu8; 2000];
    let mut last = None;
    let err = loop {
        match w.append(&rec) {
            Ok(l) => last = Some(l),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, StorageError::LogFull(_)), "{err}");
    w.flush(last.unwrap()).unwrap();
    w.truncate_before(3);
    let lsn = w.append(b"after wrap").unwrap();
    w.flush(lsn).unwrap();
    assert_eq!(lsn.vlf_sequence, 5, "the first VLF is reused as FSeqNo 5");
    let vlfs = log_file::read_vlfs(files[&2].as_ref(), 2).unwrap();
    assert_eq!(
        (vlfs[0].sequence, vlfs[0].parity),
        (5, 0x80),
        "parity flipped on reuse"
    );
    let (records, _) = read_log(&files, &vlfs, 3).unwrap();
    assert_eq!(records.last().unwrap().bytes, b"after wrap");
    assert_eq!(records.first().unwrap().lsn.vlf_sequence, 3);
}

/// Proves concurrent committers share flushes: 8 threads x 200 commits need far fewer syncs.
#[test]
fn group_commit_shares_syncs() {
    let fs = SimFileSystem::new(4, Faults::default());
    let files = new_log(&fs, 4096, 4);
    let (w, _) = open(&files);
    let w = Arc::new(w);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let w = w.clone();
            std::thread::spawn(move || {
                for i in 0..200u32 {
                    let lsn = w.append(&[t as u8; 64]).unwrap();
                    w.flush(lsn).unwrap();
                    let _ = i;
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let syncs = w.syncs();
    assert!(syncs < 1600, "{syncs} syncs for 1600 commits");
    let (records, _) = read_log(
        &files,
        &log_file::read_vlfs(files[&2].as_ref(), 2).unwrap(),
        1,
    )
    .unwrap();
    assert_eq!(records.len(), 1600);
    eprintln!("group commit: {syncs} syncs for 1600 commits");
}

/// Appends ~5 MB of records to a log of four 2 MB VLFs, flushed; returns them.
fn filled_log(fs: &SimFileSystem) -> (Files, Vec<(Lsn, Vec<u8>)>) {
    let files = new_log(fs, 1024, 4);
    let (w, _) = open(&files);
    let mut appended = Vec::new();
    let mut x = 7;
    while appended.len() < 10_000 {
        let mut r = record(&mut x);
        r.resize(500, 1);
        appended.push((w.append(&r).unwrap(), r));
    }
    w.flush(appended.last().unwrap().0).unwrap();
    (files, appended)
}

/// Flips one byte inside the block holding `lsn`.
fn damage_block(files: &Files, lsn: Lsn) {
    let vlfs = log_file::read_vlfs(files[&2].as_ref(), 2).unwrap();
    let v = vlfs
        .iter()
        .find(|v| v.sequence == lsn.vlf_sequence)
        .unwrap();
    let at = v.start_offset + lsn.block as u64 * 512 + 200;
    let mut b = [0u8; 1];
    files[&2].read_at(&mut b, at).unwrap();
    b[0] ^= 0x5a;
    files[&2].write_at(&b, at).unwrap();
    files[&2].sync_data().unwrap();
}

/// Proves a damaged block inside the durable log stops recovery with LogDamaged instead of
/// silently ending the log there: deep inside a VLF, at the end of a VLF, and near the tail
/// (within a torn tail's reach: its sector's own check tells a flipped byte from a torn
/// write; log_end.rs has the whole decision table).
#[test]
fn damage_inside_the_durable_log_is_not_taken_for_a_torn_tail() {
    for (case, frac) in [("mid-VLF", 0.05), ("end of a VLF", 0.3), ("tail", 0.995)] {
        let fs = SimFileSystem::new(3, Faults::default());
        let (files, appended) = filled_log(&fs);
        let victim = appended[(appended.len() as f64 * frac) as usize].0;
        damage_block(&files, victim);
        let vlfs = log_file::read_vlfs(files[&2].as_ref(), 2).unwrap();
        match read_log(&files, &vlfs, 1) {
            Err(StorageError::LogDamaged(text)) => assert!(text.contains("damaged"), "{text}"),
            other => panic!(
                "{case} ({victim}): expected LogDamaged, got {:?}",
                other.map(|(r, e)| (r.len(), e))
            ),
        }
    }
}
