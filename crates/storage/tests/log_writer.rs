//! The log writer and reader: records read back with the LSNs append gave, across VLFs; a
//! seeded crash loop (unsynced writes dropped or torn per sector) in which every flushed
//! record survives and what survives is always a prefix of what was appended; log full and
//! reuse after truncation with flipped parity; group commit under concurrent committers, each
//! answered only once its record is durable, and all of them answered when a sync fails.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use extentdb_format::log::{self, VlfHeader};
use extentdb_format::{Lsn, SECTOR_SIZE};
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

/// The records of the block at `lsn` as the durable image holds it at this moment (what any
/// crash keeps), in a fresh log whose VLF with FSeqNo s is the s-th in physical order on its
/// first use; None when no valid block is durable there.
fn durable_block(fs: &SimFileSystem, vlfs: &[VlfHeader], lsn: Lsn) -> Option<Vec<Vec<u8>>> {
    let v = vlfs[lsn.vlf_sequence as usize - 1];
    let at = lsn.block as u64 * SECTOR_SIZE as u64;
    let len = ((log::MAX_BLOCK_SECTORS * SECTOR_SIZE) as u64).min(v.size - at);
    let mut buf = vec![0u8; len as usize];
    if !fs.read_durable(Path::new("/sim/log.ldf"), &mut buf, v.start_offset + at) {
        return None;
    }
    log::decode_block(&buf, lsn.vlf_sequence, lsn.block, log::PARITY_FIRST).map(|b| b.records)
}

/// Commits from `threads` threads until `stop` says so or the log fails: each appends a
/// record, flushes it, and the moment `flush` returns Ok looks the record up in the durable
/// image (`SimFileSystem::read_durable`). Returns (commits acknowledged, acknowledged ones
/// not durable when answered, flushes that failed).
fn commit_and_check(
    fs: &SimFileSystem,
    files: &Files,
    w: &Arc<LogWriter>,
    threads: u8,
    stop: impl Fn(usize) -> bool + Sync,
) -> (usize, usize, usize) {
    let vlfs = log_file::read_vlfs(files[&2].as_ref(), 2).unwrap();
    let acked = AtomicUsize::new(0);
    let early = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (vlfs, acked, early, failed, stop) = (&vlfs, &acked, &early, &failed, &stop);
            s.spawn(move || {
                let mut x = 1 + t as u64;
                for i in 0u32.. {
                    if stop(acked.load(Ordering::Relaxed)) {
                        break;
                    }
                    let mut r = record(&mut x);
                    r.splice(0..0, [t].into_iter().chain(i.to_le_bytes()));
                    let Ok(lsn) = w.append(&r) else { break };
                    if w.flush(lsn).is_err() {
                        failed.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    let block = durable_block(fs, vlfs, lsn);
                    if block.and_then(|b| b.get(lsn.slot as usize).cloned()) != Some(r) {
                        early.fetch_add(1, Ordering::Relaxed);
                    }
                    acked.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    (acked.into_inner(), early.into_inner(), failed.into_inner())
}

/// Proves group commit answers no committer before its record is durable: 8 threads commit
/// 2,400 records, sharing syncs, and each checks its record in the durable image the moment
/// its flush returns (fails if a waiter is answered by a sync that did not cover it).
#[test]
fn every_committer_is_durable_when_answered() {
    let fs = SimFileSystem::new(5, Faults::default());
    let files = new_log(&fs, 256, 4);
    let w = Arc::new(open(&files).0);
    let (acked, early, failed) = commit_and_check(&fs, &files, &w, 8, |n| n >= 2400);
    assert_eq!(failed, 0);
    assert!(acked >= 2400, "{acked} commits");
    assert_eq!(
        early, 0,
        "{early} of {acked} commits answered before they were durable"
    );
    let syncs = w.syncs() as usize;
    assert!(
        syncs < acked,
        "no flush was shared: {syncs} syncs for {acked} commits"
    );
}

/// Proves a failed sync answers every committer: waiters are told the log failed (none hangs,
/// none is told its record is durable unless it is), and nothing is acknowledged after it.
#[test]
fn a_failed_sync_answers_every_waiter() {
    let fs = SimFileSystem::new(6, Faults::default());
    let files = new_log(&fs, 256, 4);
    let w = Arc::new(open(&files).0);
    let armed = std::sync::Once::new();
    let (acked, early, failed) = commit_and_check(&fs, &files, &w, 8, |n| {
        if n >= 500 {
            armed.call_once(|| {
                fs.set_faults(Faults {
                    fail_next_sync: Some(5),
                    ..Faults::default()
                })
            });
        }
        false
    });
    assert!(
        w.has_failed(),
        "the injected sync failure stopped the writer"
    );
    assert_eq!(
        early, 0,
        "{early} of {acked} commits answered before they were durable"
    );
    assert!(
        failed >= 1 && acked >= 500,
        "{failed} failed, {acked} acknowledged"
    );
    assert!(matches!(w.flush(w.end_lsn()), Err(StorageError::LogFailed)));
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
