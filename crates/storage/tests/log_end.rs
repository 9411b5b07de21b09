//! The end of the log is decided, never guessed (RECOVERY.md, "The end of the log"): one
//! test per row of the decision table, a seeded test flipping bytes of the last synced MiB
//! (each must be reported as damage) against torn unsynced tails (each must recover every
//! acknowledged commit), all on the simulated file system with the real writer and reader.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use extentdb_format::log::{encode_block, PARITY_SECOND};
use extentdb_format::Lsn;
use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_io::{AllocateMode, DbFile, FileSystem};
use extentdb_storage::log_file;
use extentdb_storage::log_writer::{read_log, LogWriter, FIXUP_BYTES};
use extentdb_storage::StorageError;

type Files = BTreeMap<u16, Arc<dyn DbFile>>;
type Appended = Vec<(Lsn, Vec<u8>)>;

/// A log of `pages` pages and `vlfs` VLFs on the simulated file system.
fn new_log(fs: &SimFileSystem, pages: u32, vlfs: u32) -> Files {
    let f = fs.create_new(Path::new("/sim/log.ldf")).unwrap();
    f.allocate(0, pages as u64 * 8192, AllocateMode::WriteZeroes)
        .unwrap();
    log_file::format_new(f.as_ref(), [7; 16], 2, pages, vlfs, true).unwrap();
    BTreeMap::from([(2u16, f)])
}

fn writer(files: &Files) -> LogWriter {
    let vlfs = log_file::read_vlfs(files[&2].as_ref(), 2).unwrap();
    let (_, end) = read_log(files, &vlfs, 1).unwrap();
    LogWriter::open(files.clone(), vlfs, end, 1).unwrap()
}

/// Recovery's view: the records read back, or the error.
fn recover(files: &Files) -> Result<Vec<(Lsn, Vec<u8>)>, StorageError> {
    let vlfs = log_file::read_vlfs(files[&2].as_ref(), 2).unwrap();
    let (records, _) = read_log(files, &vlfs, 1)?;
    Ok(records.into_iter().map(|r| (r.lsn, r.bytes)).collect())
}

/// A 600-byte record (a two-sector block on its own), distinct per `n`.
fn record(n: usize) -> Vec<u8> {
    (0..600).map(|i| (n * 31 + i * 7) as u8).collect()
}

/// Appends `n` records, each flushed (a commit acknowledged after its sync), or none
/// flushed when `sync` is false (full blocks written, never synced).
fn append(w: &LogWriter, out: &mut Appended, n: usize, sync: bool) {
    for _ in 0..n {
        let r = record(out.len());
        let lsn = w.append(&r).unwrap();
        if sync {
            w.flush(lsn).unwrap();
        }
        out.push((lsn, r));
    }
}

/// Byte offset in the log file of the block holding `lsn`.
fn block_at(files: &Files, lsn: Lsn) -> u64 {
    let vlfs = log_file::read_vlfs(files[&2].as_ref(), 2).unwrap();
    let v = vlfs
        .iter()
        .find(|v| v.sequence == lsn.vlf_sequence)
        .unwrap();
    v.start_offset + lsn.block as u64 * 512
}

fn write(files: &Files, at: u64, bytes: &[u8]) {
    files[&2].write_at(bytes, at).unwrap();
    files[&2].sync_data().unwrap();
}

fn flip(files: &Files, at: u64) {
    let mut b = [0u8; 1];
    files[&2].read_at(&mut b, at).unwrap();
    write(files, at, &[b[0] ^ 0x10]);
}

/// Asserts recovery stops with LogDamaged naming `offset` of the log file.
fn assert_damaged(files: &Files, offset: u64, row: &str) {
    match recover(files) {
        Err(StorageError::LogDamaged(text)) => assert!(
            text.contains(&format!("offset {offset} ")),
            "{row}: the report must say where ({offset}): {text}"
        ),
        other => panic!(
            "{row}: expected LogDamaged at {offset}, got {:?}",
            other.map(|r| r.len())
        ),
    }
}

/// Asserts recovery ends the log before `first_lost`: exactly the records before it.
fn assert_end(files: &Files, appended: &Appended, first_lost: usize, row: &str) {
    match recover(files) {
        Ok(back) => assert_eq!(back[..], appended[..first_lost], "{row}: the prefix"),
        Err(e) => panic!("{row}: expected the end of the log, got {e}"),
    }
}

/// 40 synced commits in a log of four 2 MB VLFs.
fn synced_log(seed: u64) -> (SimFileSystem, Files, LogWriter, Appended) {
    let fs = SimFileSystem::new(seed, Faults::default());
    let files = new_log(&fs, 1024, 4);
    let w = writer(&files);
    let mut appended = Vec::new();
    append(&w, &mut appended, 40, true);
    (fs, files, w, appended)
}

/// Row 1: unwritten space where the blocks stop and nothing after it: the end of the log.
#[test]
fn row1_unwritten_then_nothing_is_the_end() {
    let (_fs, files, w, appended) = synced_log(1);
    drop(w);
    assert_end(&files, &appended, appended.len(), "row 1");
}

/// Row 2: a damaged sector (a flipped byte) is corruption whatever follows: in the last
/// synced block (nothing follows), in a middle block, and in an unsynced block.
#[test]
fn row2_a_damaged_sector_is_corruption() {
    for (case, victim, byte) in [("last", 39, 100), ("middle", 20, 700), ("header", 39, 5)] {
        let (_fs, files, w, appended) = synced_log(2);
        drop(w);
        let at = block_at(&files, appended[victim].0);
        flip(&files, at + byte);
        assert_damaged(&files, at + byte / 512 * 512, &format!("row 2 {case}"));
    }
}

/// Row 3: whole sectors that make no valid block (a torn unsynced write: one sector still
/// zeros) with valid blocks after it that claim no more than what precedes it: a torn
/// tail, the end of the log.
#[test]
fn row3_torn_unsynced_block_then_unclaiming_blocks_is_the_end() {
    let (_fs, files, w, mut appended) = synced_log(3);
    append(&w, &mut appended, 400, false); // ~240 KB: several full blocks, none synced
    let victim = 45;
    let first_lost = appended
        .iter()
        .position(|a| a.0.block == appended[victim].0.block);
    let at = block_at(&files, appended[victim].0);
    assert!(
        appended.last().unwrap().0.block > appended[victim].0.block + 130,
        "blocks follow"
    );
    drop(w);
    write(&files, at + 512, &[0u8; 512]);
    assert_end(&files, &appended, first_lost.unwrap(), "row 3");
}

/// Row 4: a durable block lost whole (zeros, or whole sectors of an older use) before the
/// durable end a later valid block claims: corruption, though no sector is damaged.
#[test]
fn row4_bad_block_before_a_claimed_durable_end_is_corruption() {
    for case in ["zeros", "older use"] {
        let (_fs, files, w, appended) = synced_log(4);
        drop(w);
        let lsn = appended[30].0;
        let at = block_at(&files, lsn);
        let old = match case {
            "zeros" => vec![0u8; 1024],
            _ => encode_block(&[&record(0)], lsn.vlf_sequence, lsn.block, PARITY_SECOND),
        };
        write(&files, at, &old);
        assert_damaged(&files, at, &format!("row 4 {case}"));
    }
}

/// Row 5: a valid block of this use further past the end than a torn tail reaches is
/// corruption even if it claims nothing; one within reach claiming nothing is not.
#[test]
fn row5_a_valid_block_beyond_the_reach_is_corruption() {
    for (case, distance, damaged) in [
        ("beyond", FIXUP_BYTES + 4096, true),
        ("within", 65536, false),
    ] {
        let (_fs, files, w, appended) = synced_log(5);
        drop(w);
        let last = appended.last().unwrap().0;
        let end = last.block + 2;
        let far = end + (distance / 512) as u32;
        let block = encode_block(&[b"stray"], last.vlf_sequence, far, 0x40);
        let end_at = block_at(&files, Lsn { block: end, ..last });
        write(&files, block_at(&files, Lsn { block: far, ..last }), &block);
        if damaged {
            assert_damaged(&files, end_at, &format!("row 5 {case}"));
        } else {
            assert_end(&files, &appended, appended.len(), &format!("row 5 {case}"));
        }
    }
}

/// Appends synced records until VLF 1 has under 100 KB left, then `n` more (synced or not)
/// that cross into VLF 2; returns the records, the index of the first record of VLF 1's
/// last block (its end marker, holding none, or the block that fills it exactly) and that
/// block's file offset.
fn across_vlfs(files: &Files, n: usize, synced: bool) -> (Appended, usize, u64) {
    let w = writer(files);
    let vlf1 = log_file::read_vlfs(files[&2].as_ref(), 2).unwrap()[0];
    let mut appended = Vec::new();
    while appended
        .last()
        .map_or(0, |a: &(Lsn, Vec<u8>)| a.0.block as u64 * 512)
        < vlf1.size - 100_000
    {
        append(&w, &mut appended, 1, true);
    }
    append(&w, &mut appended, n, synced);
    w.flush(appended.last().unwrap().0).unwrap_or(());
    drop(w);
    let first = appended.iter().position(|a| a.0.vlf_sequence == 2).unwrap();
    let mut image = vec![0u8; vlf1.size as usize];
    files[&2].read_at(&mut image, vlf1.start_offset).unwrap();
    let blocks = extentdb_format::log::scan_vlf(&image, 1, 0x40);
    let last = blocks.last().unwrap();
    let closes = last.flags == extentdb_format::log::FLAG_VLF_END
        || (last.offset + last.sectors) as u64 * 512 == vlf1.size;
    assert!(closes, "VLF 1's last block closes it");
    let last_at = vlf1.start_offset + last.offset as u64 * 512;
    (appended, first - last.records.len(), last_at)
}

/// Row 6: the end at the close of a VLF (its last block, the end marker or the block
/// filling it, bad) with blocks in the next VLF: corruption if one claims that block
/// durable, the end of the log if none does (it and VLF 2's blocks were unsynced; the page
/// cache wrote them out of order).
#[test]
fn row6_the_next_vlf_decides_a_bad_end_marker() {
    for synced in [true, false] {
        let fs = SimFileSystem::new(6, Faults::default());
        let files = new_log(&fs, 1024, 4);
        let (appended, lost, marker) = across_vlfs(&files, 250, synced);
        write(&files, marker, &[0u8; 512]);
        let row = format!("row 6 (synced {synced})");
        if synced {
            assert_damaged(&files, marker, &row);
        } else {
            // The final flush synced VLF 2's blocks, but none of them claims it.
            assert_end(&files, &appended, lost, &row);
        }
    }
}

/// Row 7: blocks of an earlier use after the end (the other parity, or the same parity and
/// an older FSeqNo) are not this use's: not even one beyond a torn tail's reach is damage.
#[test]
fn row7_stale_blocks_of_an_earlier_use_are_not_followers() {
    let fs = SimFileSystem::new(7, Faults::default());
    let files = new_log(&fs, 1024, 4);
    let w = writer(&files);
    let mut appended = Vec::new();
    while let Ok(lsn) = w.append(&record(appended.len())) {
        appended.push((lsn, record(appended.len())));
    }
    w.flush(appended.last().unwrap().0).unwrap();
    w.truncate_before(3);
    append(&w, &mut appended, 40, true); // VLF 1 again, as FSeqNo 5, parity 0x80
    drop(w);
    let last = appended.last().unwrap().0;
    assert_eq!(last.vlf_sequence, 5);
    let far = last.block + 2 + (FIXUP_BYTES / 512) as u32 + 8;
    let stale = encode_block(&[b"old"], 3, far, PARITY_SECOND);
    write(&files, block_at(&files, Lsn { block: far, ..last }), &stale);
    // FSeqNo 1's blocks (parity 0x40) fill the rest of VLF 1, far beyond the reach too.
    let back = recover(&files).unwrap();
    assert_eq!(
        back.last(),
        appended.last(),
        "row 7: the log ends at FSeqNo 5's last block"
    );
}

/// Row 8: a VLF closed by its end marker and no VLF with the next FSeqNo (its header write
/// was lost with its blocks): the end of the log is the close.
#[test]
fn row8_a_closed_vlf_without_a_next_one_is_the_end() {
    let fs = SimFileSystem::new(8, Faults::default());
    let files = new_log(&fs, 1024, 4);
    let (appended, lost, _) = across_vlfs(&files, 250, false);
    let first = appended.iter().position(|a| a.0.vlf_sequence == 2).unwrap();
    assert!(lost <= first);
    let vlf2 = log_file::read_vlfs(files[&2].as_ref(), 2).unwrap()[1];
    let unused = extentdb_format::log::VlfHeader {
        sequence: 0,
        parity: 0,
        ..vlf2
    };
    write(&files, vlf2.start_offset, &vec![0u8; vlf2.size as usize]);
    write(&files, vlf2.start_offset, &unused.encode());
    assert_end(&files, &appended, first, "row 8");
}

/// The seeded flip test: ~1.5 MB of small commits, each synced; then one byte of the last
/// synced MiB flipped at a time (and put back): recovery must report damage every time,
/// never a shorter log. No byte there is exempt: every byte of a written block lies in a
/// sector with its own check. 300 sampled offsets; `XDB_LOG_FLIP_ALL=1` tries every byte.
#[test]
fn every_flipped_byte_of_the_last_synced_mib_is_damage() {
    let fs = SimFileSystem::new(11, Faults::default());
    let files = new_log(&fs, 1024, 4);
    let w = writer(&files);
    let mut appended = Vec::new();
    append(&w, &mut appended, 1500, true);
    drop(w);
    let last = appended.last().unwrap().0;
    assert_eq!(
        last.vlf_sequence, 1,
        "the last synced MiB lies in VLF 1's blocks"
    );
    let end = block_at(&files, last) + 1024;
    let from = end - (1 << 20);
    assert!(from > 16384, "blocks only: past VLF 1's header area");
    let offsets: Vec<u64> = if std::env::var("XDB_LOG_FLIP_ALL").is_ok_and(|v| v == "1") {
        (from..end).collect()
    } else {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..300)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                from + x % (end - from)
            })
            .collect()
    };
    let (mut tried, mut caught) = (0u64, 0u64);
    for &at in &offsets {
        let mut b = [0u8; 1];
        files[&2].read_at(&mut b, at).unwrap();
        files[&2].write_at(&[b[0] ^ 0x01 << (at % 8)], at).unwrap();
        tried += 1;
        match recover(&files) {
            Err(StorageError::LogDamaged(text)) => {
                caught += 1;
                assert!(
                    text.contains(&format!("offset {} ", at / 512 * 512)),
                    "{text}"
                );
            }
            Ok(back) => eprintln!("byte {at}: a log of {} records, not damage", back.len()),
            Err(e) => panic!("byte {at}: {e}"),
        }
        files[&2].write_at(&b, at).unwrap();
    }
    eprintln!("flip test: {tried} cases tried, {caught} cases caught");
    assert_eq!(caught, tried, "every flipped byte is reported as damage");
    assert_eq!(
        recover(&files).unwrap(),
        appended,
        "put back, the log is whole"
    );
}

/// The other side: synced commits, then unsynced ones (full blocks written, a crash tearing
/// or dropping each unsynced write per sector): recovery never reports damage and keeps
/// every acknowledged commit, and what it keeps is a prefix of what was appended.
#[test]
fn a_torn_unsynced_tail_recovers_every_acknowledged_commit() {
    let (mut lost_some, mut kept_some) = (0, 0);
    for seed in 1..=40u64 {
        let fs = SimFileSystem::new(seed, Faults::default());
        let files = new_log(&fs, 1024, 4);
        let w = writer(&files);
        let mut appended = Vec::new();
        append(&w, &mut appended, 300 + seed as usize * 37, true);
        let acked = appended.len();
        append(&w, &mut appended, 200 + seed as usize * 13, false);
        drop(w);
        fs.crash();
        let back = recover(&files).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(
            back.len() >= acked,
            "seed {seed}: lost acknowledged commits"
        );
        assert_eq!(back[..], appended[..back.len()], "seed {seed}: a prefix");
        lost_some += (back.len() < appended.len()) as u32;
        kept_some += (back.len() > acked) as u32;
    }
    eprintln!("torn tails: {lost_some} seeds lost unsynced records, {kept_some} kept some");
    assert!(
        lost_some > 0 && kept_some > 0,
        "the crashes must really tear"
    );
}
