//! The log writer and the log reader: appending log records into blocks of the active VLF,
//! group commit, moving on to the next VLF, and finding the end of the log after a crash.
//!
//! Writer (`LogWriter`):
//! - `append` places a record in the pending block and returns its final LSN: a block that
//!   would not fit the VLF is written out first and the record goes to the next block or
//!   VLF, so an LSN never changes once given.
//! - `flush(lsn)` makes every record up to `lsn` durable. One caller at a time writes the
//!   pending block and syncs the files, outside the lock; others append meanwhile and wait
//!   for the flush that covers them (group commit: one fdatasync serves many commits). The
//!   flush's leader wakes only the waiters its sync covered, and hands the lead to one it
//!   did not, which starts the next sync at once (invariant 7).
//! - Moving on from a VLF writes a one-sector block flagged `FLAG_VLF_END` (unless the VLF
//!   is exactly full), then activates the next VLF: FSeqNo = the current one + 1 (no gaps:
//!   the reader stops at one), parity 0x40 on first use, else the other parity. A header
//!   whose FSeqNo lies beyond the end of the log is a leftover of lost writes: free.
//!
//! Reader, in two passes. Pass 1 (`find_log_end`) walks VLFs in FSeqNo order from a
//! starting FSeqNo, each VLF's blocks until the first invalid one, and moves on only after a
//! VLF closed by the end flag or filled exactly; so a torn block is never skipped. Where the
//! blocks stop is decided, not guessed (`decide_end`, RECOVERY.md "The end of the log"): a
//! damaged sector there, or a valid block further on that claims that point durable
//! (invariant 5) or lies beyond any torn tail's reach, is damage (LogDamaged); anything else
//! is the end of the log. It counts the records on the way. Pass 2 (`for_each_record`) reads
//! the same blocks again up to that end and hands each record to a callback. Reading twice
//! costs a second read of the log since the checkpoint (usually small); in exchange the end
//! is decided before anything is redone and no record is held (invariant 6). `read_log`
//! collects both passes' result for tests and tools over small logs.
//!
//! Invariants:
//! 1. Written-but-unsynced log bytes never exceed `MAX_UNSYNCED` (the writer syncs first).
//! 2. After recovery the writer zeroes `MAX_UNSYNCED + 60 KiB` of block space past the end
//!    of the log, across the VLFs it will activate next (SQL Server's FixupLogTail), so a
//!    stale block written before the crash can never line up behind a new one.
//! 3. After a failed write or sync the writer refuses all further work (never retries).
//! 4. A VLF whose FSeqNo is still needed (at or after `min_active`) is never reused: the log
//!    is full instead (error 9002 upstream) until truncation or growth frees one.
//! 5. Every block records the durable end of the log when it was written: an LSN before
//!    which every block was written before a sync that has completed (at open: the end of
//!    the log read back, synced). It never claims more (it is raised only after a sync, to
//!    where the log was written when the sync began) and never passes the block itself
//!    (asserted in `write_block` and by the encoder). So at recovery a bad block before the
//!    durable end a later valid block claims was durable: damage, not a torn tail.
//! 6. The reader's memory does not grow with the log: it holds one scan chunk
//!    (`SCAN_CHUNK`, plus a block of overlap) and one decoded block at a time, handing blocks
//!    to a callback (`scan_vlf_streaming`) and records to the caller's (`for_each_record`);
//!    never a VLF's or the log's records. Only `read_log` collects, and recovery and roll
//!    forward never call it.
//! 7. Group commit: a `flush` caller returns Ok only once `durable` is at or past its LSN,
//!    that is after a sync that began once its records were written (asserted for a leader
//!    in `lead`; a waiter is answered DURABLE only under that test, in `answer_waiters`).
//!    At most one caller owns the flush (`flushing`). Waiters queue only while a flush is
//!    owned, and the owner, when its sync ends, answers every queued waiter under the lock:
//!    DURABLE if covered, FAILED if the log failed, and LEAD to the first one left, for
//!    which it keeps `flushing` set; so no waiter is left without a flush coming, and a
//!    waiter never takes the lock to learn its answer. The state of one flush:
//!    `idle --flush--> owned by a leader --sync ends--> idle | owned by the waiter handed
//!    the lead`.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use extentdb_format::log::{
    self, block_sectors, encode_block_flags, VlfHeader, FLAG_VLF_END, MAX_BLOCK_PAYLOAD,
    PARITY_FIRST, VLF_HEADER_AREA,
};
use extentdb_format::{Lsn, SECTOR_SIZE};
use extentdb_io::DbFile;

use crate::StorageError;

/// Most log bytes written but not yet synced (invariant 1).
pub const MAX_UNSYNCED: u64 = 1 << 20;
/// Bytes zeroed past the end of the log at open (invariant 2).
pub const FIXUP_BYTES: u64 = MAX_UNSYNCED + (log::MAX_BLOCK_SECTORS * SECTOR_SIZE) as u64;

/// One record read back, with its LSN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    pub lsn: Lsn,
    pub bytes: Vec<u8>,
}

/// The log as a backup copies it (`LogWriter::backup_snapshot`).
#[derive(Debug, Clone)]
pub struct LogCopy {
    /// Every VLF of every log file, in physical order.
    pub vlfs: Vec<VlfHeader>,
    /// (log file id, byte offset, length) in FSeqNo order: whole VLFs (header area
    /// included), the current one up to where the next block goes.
    pub ranges: Vec<(u16, u64, u64)>,
    /// Above every record the ranges hold.
    pub end: Lsn,
}

/// Where the log ends: the VLF (index into the physical list) and byte offset in it where
/// the next block goes, and whether that VLF is closed (the next block opens a new VLF).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogEnd {
    pub vlf: usize,
    pub pos: u64,
    pub closed: bool,
}

type Files = BTreeMap<u16, Arc<dyn DbFile>>;

fn io_file(files: &Files, id: u16) -> Result<&Arc<dyn DbFile>, StorageError> {
    files
        .get(&id)
        .ok_or_else(|| StorageError::FileNotFound(id.to_string()))
}

/// A reader's callback answer: read on, or stop here (or the callback's error).
pub type Step = Result<ControlFlow<()>, StorageError>;

/// What the first pass over the log found (`find_log_end`): where it ends, what lies
/// before it, and the VLFs the second pass (`for_each_record`) reads again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogExtent {
    pub end: LogEnd,
    /// Records before the end.
    pub records: u64,
    /// Their bytes, each with its 4-byte length as a block holds it.
    pub record_bytes: u64,
    /// The VLFs read (index into the physical list) in FSeqNo order, each with the byte
    /// offset where its valid blocks stopped.
    vlfs: Vec<(usize, u64)>,
}

/// Pass 1 of reading the log: walks it from the VLF with FSeqNo `from_seq` to its end,
/// counting the records, and decides that end (`decide_end`) before anything is redone.
/// Holds one scan chunk and one block at a time (invariant 6).
pub fn find_log_end(
    files: &Files,
    vlfs: &[VlfHeader],
    from_seq: u32,
) -> Result<LogExtent, StorageError> {
    let mut order: Vec<usize> = (0..vlfs.len())
        .filter(|&i| vlfs[i].sequence >= from_seq && vlfs[i].sequence > 0)
        .collect();
    order.sort_by_key(|&i| vlfs[i].sequence);
    let first = order.first().copied().unwrap_or(0);
    let mut extent = LogExtent {
        end: LogEnd {
            vlf: first,
            pos: VLF_HEADER_AREA,
            closed: false,
        },
        records: 0,
        record_bytes: 0,
        vlfs: Vec::new(),
    };
    // Start at the lowest FSeqNo present at or after `from_seq`: VLFs between the boot page's
    // checkpoint and a newer one may already be reused, which a checkpoint allows only after
    // the data files are durable. From there FSeqNos must follow one another: a gap ends it.
    let start = order.first().map(|&i| vlfs[i].sequence).unwrap_or(from_seq);
    for (expected, i) in (start..).zip(order) {
        let v = &vlfs[i];
        if v.sequence != expected {
            break;
        }
        let mut closed = false;
        let file = io_file(files, v.file_id)?.as_ref();
        let pos = scan_vlf_streaming(file, *v, &mut |b| {
            extent.records += b.records.len() as u64;
            extent.record_bytes += b.records.iter().map(|r| r.len() as u64 + 4).sum::<u64>();
            closed |= b.flags & FLAG_VLF_END != 0;
            Ok(ControlFlow::Continue(()))
        })?;
        closed |= pos == v.size;
        extent.vlfs.push((i, pos));
        extent.end = LogEnd {
            vlf: i,
            pos,
            closed,
        };
        if !closed {
            break;
        }
    }
    decide_end(files, vlfs, extent.end)?;
    Ok(extent)
}

/// Pass 2 of reading the log: reads again the blocks pass 1 found, up to its end, and calls
/// `f(lsn, record)` for each record in LSN order until `f` breaks. Holds one scan chunk and
/// one block at a time (invariant 6). Nothing writes the log between the passes (recovery
/// and roll forward run before the writer opens); blocks that no longer read as pass 1
/// found them are damage (LogDamaged), never a shorter log.
pub fn for_each_record(
    files: &Files,
    vlfs: &[VlfHeader],
    extent: &LogExtent,
    f: &mut dyn FnMut(Lsn, &[u8]) -> Step,
) -> Result<(), StorageError> {
    for &(i, stop) in &extent.vlfs {
        let v = vlfs[i];
        if stop <= VLF_HEADER_AREA {
            continue;
        }
        let file = io_file(files, v.file_id)?.as_ref();
        let mut broke = false;
        let pos = scan_vlf_streaming(file, v, &mut |b| {
            for (slot, r) in b.records.iter().enumerate() {
                let lsn = Lsn {
                    vlf_sequence: v.sequence,
                    block: b.offset,
                    slot: slot as u16,
                };
                if f(lsn, r)?.is_break() {
                    broke = true;
                    return Ok(ControlFlow::Break(()));
                }
            }
            let next = (b.offset as u64 + b.sectors as u64) * SECTOR_SIZE as u64;
            Ok(if next >= stop {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        })?;
        if broke {
            return Ok(());
        }
        if pos != stop {
            return Err(damaged(
                v,
                pos.min(stop),
                format!("the blocks read again stop at offset {pos}, not at {stop} as before"),
            ));
        }
    }
    Ok(())
}

/// Reads the log from the VLF with FSeqNo `from_seq` to its end and collects every record:
/// memory grows with the log, so recovery and roll forward never call it (they take the
/// two passes above). Kept for tests and tools over logs bounded by their own size.
pub fn read_log(
    files: &Files,
    vlfs: &[VlfHeader],
    from_seq: u32,
) -> Result<(Vec<LogRecord>, LogEnd), StorageError> {
    let extent = find_log_end(files, vlfs, from_seq)?;
    let mut records = Vec::with_capacity(extent.records as usize);
    for_each_record(files, vlfs, &extent, &mut |lsn, bytes| {
        records.push(LogRecord {
            lsn,
            bytes: bytes.to_vec(),
        });
        Ok(ControlFlow::Continue(()))
    })?;
    Ok((records, extent.end))
}

/// Decides whether the point where the blocks stopped is the end of the log or damage
/// (RECOVERY.md, "The end of the log", whose rows the comments name):
/// - a damaged sector in the block there (row 2): corruption, whatever follows;
/// - a valid block of this use or the next further on that claims the log durable past
///   that point (rows 4, 6): the block there was durable, so it is damaged;
/// - a valid block of this use or the next beyond any torn tail's reach (`FIXUP_BYTES`,
///   invariants 1 and 2; rows 5, 6): damaged;
/// - otherwise the end of the log (rows 1, 3, 7, 8): a torn or lost unsynced write.
///
/// Damage stops recovery (error 9004 upstream) instead of opening the database without the
/// committed work behind it.
fn decide_end(files: &Files, vlfs: &[VlfHeader], end: LogEnd) -> Result<(), StorageError> {
    let Some(v) = vlfs.get(end.vlf).copied() else {
        return Ok(());
    };
    if v.sequence == 0 {
        return Ok(());
    }
    let end_lsn = Lsn {
        vlf_sequence: v.sequence,
        block: (end.pos / SECTOR_SIZE as u64) as u32,
        slot: 0,
    };
    // A closed VLF with no next one is the end: the next VLF's header was never durable.
    if end.closed {
        return Ok(());
    }
    let file = io_file(files, v.file_id)?.as_ref();
    if let log::Ending::Damaged { sector } = ending_at(file, v, end.pos)? {
        let at = end.pos + (sector * SECTOR_SIZE) as u64;
        return Err(damaged(v, at, "its sector check fails".into()));
    }
    let mut proof = later_valid_block(file, v, end.pos, end.pos + FIXUP_BYTES, end_lsn)?;
    if let (None, Some(next)) = (&proof, vlfs.iter().find(|n| n.sequence == v.sequence + 1)) {
        let reach = FIXUP_BYTES.saturating_sub(v.size - end.pos);
        let file = io_file(files, next.file_id)?.as_ref();
        proof = later_valid_block(
            file,
            *next,
            VLF_HEADER_AREA,
            VLF_HEADER_AREA + reach,
            end_lsn,
        )?;
    }
    match proof {
        Some(why) => Err(damaged(
            v,
            end.pos,
            format!("the block there is not valid, {why}"),
        )),
        None => Ok(()),
    }
}

/// What lies at `pos` of `v`, where its valid blocks stopped.
fn ending_at(file: &dyn DbFile, v: VlfHeader, pos: u64) -> Result<log::Ending, StorageError> {
    let len = (log::MAX_BLOCK_SECTORS * SECTOR_SIZE) as u64;
    let mut buf = vec![0u8; len.min(v.size - pos) as usize];
    file.read_at(&mut buf, v.start_offset + pos)?;
    let offset = (pos / SECTOR_SIZE as u64) as u32;
    Ok(log::classify_ending(&buf, v.sequence, offset, v.parity))
}

/// Why the end of the log at `end` cannot be a torn tail, if a valid block of `v`'s
/// current use at or after `from` proves it: one at or beyond `reach`, or one claiming the
/// log durable past `end`.
fn later_valid_block(
    file: &dyn DbFile,
    v: VlfHeader,
    from: u64,
    reach: u64,
    end: Lsn,
) -> Result<Option<String>, StorageError> {
    let mut proof = None;
    for_each_valid_block(file, v, from, &mut |at, b| {
        let lsn = Lsn {
            vlf_sequence: v.sequence,
            block: (at / SECTOR_SIZE as u64) as u32,
            slot: 0,
        };
        if at >= reach {
            proof = Some(format!(
                "yet the valid block at {lsn} lies further than a torn tail reaches"
            ));
        } else if b.durable > end {
            proof = Some(format!(
                "yet the valid block at {lsn} was written when the log was durable up to {}",
                b.durable
            ));
        }
        proof.is_none()
    })?;
    Ok(proof)
}

fn damaged(v: VlfHeader, at: u64, why: String) -> StorageError {
    StorageError::LogDamaged(format!(
        "log file {} offset {} (VLF with FSeqNo {}, block offset {}): {why}; a durable part of the log is damaged",
        v.file_id,
        v.start_offset + at,
        v.sequence,
        at / SECTOR_SIZE as u64
    ))
}

/// Calls `f(offset, block)` for each valid block of `v`'s current use at or after `from`,
/// trying every sector not inside a block already found (reads in bounded chunks), until
/// `f` returns false.
fn for_each_valid_block(
    file: &dyn DbFile,
    v: VlfHeader,
    from: u64,
    f: &mut dyn FnMut(u64, &log::Block) -> bool,
) -> Result<(), StorageError> {
    let sector = SECTOR_SIZE as u64;
    let mut pos = from.div_ceil(sector) * sector;
    let max_block = (log::MAX_BLOCK_SECTORS * SECTOR_SIZE) as u64;
    while pos + sector <= v.size {
        let len = (SCAN_CHUNK + max_block).min(v.size - pos);
        let mut buf = vec![0u8; len as usize];
        file.read_at(&mut buf, v.start_offset + pos)?;
        let mut off = 0u64;
        // Blocks starting in the first SCAN_CHUNK bytes; the rest is overlap for their tails.
        while off < SCAN_CHUNK.min(len) && off + sector <= len {
            let offset = ((pos + off) / sector) as u32;
            match log::decode_block(&buf[off as usize..], v.sequence, offset, v.parity) {
                Some(b) if !f(pos + off, &b) => return Ok(()),
                Some(b) => off += b.sectors as u64 * sector,
                None => off += sector,
            }
        }
        pos += off;
    }
    Ok(())
}

/// Bytes read at a time while scanning a VLF: VLFs of large logs are gigabytes, so the scan
/// never holds a whole one in memory.
const SCAN_CHUNK: u64 = 4 << 20;

/// `log::scan_vlf` over a VLF read in bounded chunks (each holding at least one whole
/// block), a block at a time: calls `f` with each valid block from the VLF's start until the
/// first block that does not decode, or until `f` breaks. Returns the byte offset after the
/// last block passed to `f`. Holds one chunk and one decoded block (invariant 6).
fn scan_vlf_streaming(
    file: &dyn DbFile,
    v: VlfHeader,
    f: &mut dyn FnMut(log::Block) -> Step,
) -> Result<u64, StorageError> {
    let max_block = (log::MAX_BLOCK_SECTORS * SECTOR_SIZE) as u64;
    let (mut buf, mut buf_start) = (Vec::new(), 0u64);
    let mut pos = VLF_HEADER_AREA;
    while pos + SECTOR_SIZE as u64 <= v.size {
        let need_end = (pos + max_block).min(v.size);
        if pos < buf_start || need_end > buf_start + buf.len() as u64 {
            let len = SCAN_CHUNK.max(max_block).min(v.size - pos);
            // The old chunk goes before the new one is allocated: one chunk at a time.
            drop(std::mem::take(&mut buf));
            buf = vec![0u8; len as usize];
            file.read_at(&mut buf, v.start_offset + pos)?;
            buf_start = pos;
        }
        let offset = (pos / SECTOR_SIZE as u64) as u32;
        let Some(b) = log::decode_block(
            &buf[(pos - buf_start) as usize..],
            v.sequence,
            offset,
            v.parity,
        ) else {
            break;
        };
        pos += b.sectors as u64 * SECTOR_SIZE as u64;
        if f(b)?.is_break() {
            break;
        }
    }
    Ok(pos)
}

/// Reads records by LSN (`LogWriter::block_at`) keeping the last block read, as rollback and
/// recovery's undo walk a transaction's chain newest first (its records mostly share
/// blocks): one block held at a time. A block's records never change once appended, so a
/// cached block serves every slot it holds.
#[derive(Default)]
pub struct RecordsByLsn {
    block: Option<(u32, u32)>,
    records: Vec<Vec<u8>>,
}

impl RecordsByLsn {
    /// The record at `lsn`, as appended (possibly compressed).
    pub fn get(&mut self, wal: &LogWriter, lsn: Lsn) -> Result<&[u8], StorageError> {
        let key = Some((lsn.vlf_sequence, lsn.block));
        if self.block != key || lsn.slot as usize >= self.records.len() {
            self.block = None;
            self.records = wal.block_at(lsn)?;
            self.block = key;
        }
        Ok(&self.records[lsn.slot as usize])
    }
}

struct State {
    files: Files,
    vlfs: Vec<VlfHeader>,
    cur: usize,
    pos: u64,
    closed: bool,
    /// Records of the block being filled, and the LSN of its first record.
    pending: Vec<Vec<u8>>,
    pending_payload: usize,
    /// Lowest FSeqNo still needed (invariant 4).
    min_active: u32,
    /// FSeqNos from which running backups are copying the log: those VLFs are needed too.
    pins: Vec<u32>,
    /// Last LSN handed out, last LSN written to a file, last LSN durable.
    last: Option<Lsn>,
    written: Option<Lsn>,
    durable: Option<Lsn>,
    unsynced: u64,
    /// Just after the last block written, and the durable end: every block before it was
    /// written before a sync that completed (invariant 5). Both slot 0.
    written_end: Lsn,
    durable_end: Lsn,
    /// File ids written since the last sync, in write order.
    dirty: Vec<u16>,
    /// A caller owns the flush (`LogWriter::lead`); `waiters` wait for it (invariant 7).
    flushing: bool,
    waiters: Vec<Arc<Waiter>>,
    /// Shared with `LogWriter`, so `has_failed` reads it without the lock (invariant 3).
    failed: Arc<AtomicBool>,
    syncs: u64,
    /// Block space still to zero in the VLFs activated next after an open (invariant 2).
    fixup_remaining: u64,
}

/// The log's space as one reading (`LogWriter::space`).
#[derive(Clone, Copy, Debug)]
pub struct LogSpace {
    pub used_bytes: u64,
    pub free_vlfs: usize,
    pub vlf_count: usize,
}

pub struct LogWriter {
    state: Mutex<State>,
    failed: Arc<AtomicBool>,
    /// `flush` callers that waited for a sync (led one or were answered by one).
    flush_waits: AtomicU64,
}

/// A waiter's answer: still waiting, its records are durable, it now leads the next flush,
/// or the log failed.
const WAITING: u8 = 0;
const DURABLE: u8 = 1;
const LEAD: u8 = 2;
const FAILED: u8 = 3;

/// A caller of `flush` waiting for the flush another leads: the LSN it needs durable, its
/// thread (unparked once answered) and the answer, set once under the state lock.
struct Waiter {
    upto: Lsn,
    thread: std::thread::Thread,
    answer: AtomicU8,
}

impl Waiter {
    /// Parks until answered (a park may return early: the answer decides).
    fn wait(&self) -> u8 {
        loop {
            let answer = self.answer.load(Ordering::Acquire);
            if answer != WAITING {
                return answer;
            }
            std::thread::park();
        }
    }

    fn answer(&self, answer: u8) {
        let was = self.answer.swap(answer, Ordering::AcqRel);
        assert_eq!(was, WAITING, "a waiter is answered once");
    }
}

impl LogWriter {
    /// Opens the writer at the end found by `find_log_end`, zeroing the tail (invariant 2).
    pub fn open(
        files: Files,
        vlfs: Vec<VlfHeader>,
        end: LogEnd,
        min_active: u32,
    ) -> Result<LogWriter, StorageError> {
        Self::open_with(files, vlfs, end, min_active, true)
    }

    /// `open` for a log initialized a moment ago (zeros past its headers): no tail to fix.
    pub fn open_fresh(
        files: Files,
        vlfs: Vec<VlfHeader>,
        end: LogEnd,
    ) -> Result<LogWriter, StorageError> {
        Self::open_with(files, vlfs, end, 1, false)
    }

    fn open_with(
        files: Files,
        vlfs: Vec<VlfHeader>,
        end: LogEnd,
        min_active: u32,
        fixup: bool,
    ) -> Result<LogWriter, StorageError> {
        let v = vlfs[end.vlf];
        let fixup_remaining = if fixup && v.sequence > 0 {
            FIXUP_BYTES - fixup_tail(&files, &vlfs, end)?
        } else {
            0
        };
        // The log read back may sit in the page cache only (a killed process): make it
        // durable, so the durable end the next blocks claim is true (invariant 5).
        for f in files.values() {
            f.sync_data()?;
        }
        let end_lsn = if v.sequence > 0 {
            Lsn {
                vlf_sequence: v.sequence,
                block: (end.pos / SECTOR_SIZE as u64) as u32,
                slot: 0,
            }
        } else {
            Lsn::ZERO
        };
        let failed = Arc::new(AtomicBool::new(false));
        let state = State {
            files,
            vlfs,
            cur: end.vlf,
            pos: end.pos,
            closed: end.closed || v.sequence == 0,
            pending: Vec::new(),
            pending_payload: 0,
            min_active,
            pins: Vec::new(),
            last: None,
            written: None,
            durable: None,
            unsynced: 0,
            written_end: end_lsn,
            durable_end: end_lsn,
            dirty: Vec::new(),
            flushing: false,
            waiters: Vec::new(),
            failed: failed.clone(),
            syncs: 0,
            fixup_remaining,
        };
        Ok(LogWriter {
            state: Mutex::new(state),
            failed,
            flush_waits: AtomicU64::new(0),
        })
    }

    /// Appends one record and returns its LSN; not durable until `flush`.
    pub fn append(&self, record: &[u8]) -> Result<Lsn, StorageError> {
        assert!(
            record.len() + 4 <= MAX_BLOCK_PAYLOAD,
            "log record of {} bytes",
            record.len()
        );
        let mut st = self.state.lock().unwrap();
        if st.failed.load(Ordering::Acquire) {
            return Err(StorageError::LogFailed);
        }
        let grown = st.pending_payload + 4 + record.len();
        if st.closed || !st.fits(grown) {
            st.write_pending()?;
            if st.closed || !st.fits(4 + record.len()) {
                st.next_vlf()?;
            }
        }
        let v = st.vlfs[st.cur];
        let lsn = Lsn {
            vlf_sequence: v.sequence,
            block: (st.pos / SECTOR_SIZE as u64) as u32,
            slot: st.pending.len() as u16,
        };
        st.pending.push(record.to_vec());
        st.pending_payload += 4 + record.len();
        st.last = Some(lsn);
        Ok(lsn)
    }

    /// The records of the block holding `lsn` (as appended: possibly compressed), for
    /// rollback reading a transaction's changes back (xact.rs invariant 2): the pending
    /// block's from memory, a written one read back from its VLF (written blocks never
    /// change, and the VLF of an active transaction's records is not reused, invariant 4).
    /// `LogDamaged` when no valid block of that VLF use lies there or it lacks the slot.
    pub fn block_at(&self, lsn: Lsn) -> Result<Vec<Vec<u8>>, StorageError> {
        let missing = |why: &str| StorageError::LogDamaged(format!("log record {lsn}: {why}"));
        let (file, v) = {
            let st = self.state.lock().unwrap();
            let cur = st.vlfs[st.cur];
            let here = (st.pos / SECTOR_SIZE as u64) as u32;
            if lsn.vlf_sequence == cur.sequence && lsn.block == here && !st.pending.is_empty() {
                return Ok(st.pending.clone());
            }
            let Some(v) = st
                .vlfs
                .iter()
                .find(|v| v.sequence == lsn.vlf_sequence)
                .copied()
            else {
                return Err(missing("its VLF is no longer in the log"));
            };
            (io_file(&st.files, v.file_id)?.clone(), v)
        };
        let at = lsn.block as u64 * SECTOR_SIZE as u64;
        if at < VLF_HEADER_AREA || at + SECTOR_SIZE as u64 > v.size {
            return Err(missing("outside its VLF"));
        }
        let len = ((log::MAX_BLOCK_SECTORS * SECTOR_SIZE) as u64).min(v.size - at);
        let mut buf = vec![0u8; len as usize];
        file.read_at(&mut buf, v.start_offset + at)?;
        let b = log::decode_block(&buf, v.sequence, lsn.block, v.parity)
            .ok_or_else(|| missing("no valid block there"))?;
        if lsn.slot as usize >= b.records.len() {
            return Err(missing("its block has no such slot"));
        }
        Ok(b.records)
    }

    /// Makes every record up to `upto` durable (group commit, invariant 7).
    pub fn flush(&self, upto: Lsn) -> Result<(), StorageError> {
        self.flush_waited(upto).map(|_| ())
    }

    /// `flush`, saying whether the caller waited (led a flush or waited for one) rather
    /// than finding `upto` durable already: a commit counts a WRITELOG wait only then.
    ///
    /// A caller that finds no flush running leads one (`lead`). One that finds a flush
    /// running queues a `Waiter` and parks; the leader, once its sync is done, answers
    /// each waiter it covered and hands the lead to the first one it did not, so that one
    /// starts the next sync at once and no waiter retakes the state lock to learn its fate.
    pub fn flush_waited(&self, upto: Lsn) -> Result<bool, StorageError> {
        let mut st = self.state.lock().unwrap();
        // Records from before this writer opened were read back from disk: durable. An LSN
        // past the last one handed out (a page stamped by an earlier open) needs no more
        // than everything appended so far.
        let upto = match st.last {
            None => return Ok(false),
            Some(last) => upto.min(last),
        };
        if st.failed.load(Ordering::Acquire) {
            return Err(StorageError::LogFailed);
        }
        if st.durable.is_some_and(|d| d >= upto) {
            return Ok(false);
        }
        self.flush_waits.fetch_add(1, Ordering::Relaxed);
        if st.flushing {
            let me = Arc::new(Waiter {
                upto,
                thread: std::thread::current(),
                answer: AtomicU8::new(WAITING),
            });
            st.waiters.push(me.clone());
            drop(st);
            match me.wait() {
                DURABLE => return Ok(true),
                FAILED => return Err(StorageError::LogFailed),
                answer => assert_eq!(answer, LEAD, "a waiter's answer"),
            }
            st = self.state.lock().unwrap();
            assert!(st.flushing, "a waiter handed the lead owns the flush");
        } else {
            st.flushing = true;
        }
        self.lead(st, upto)?;
        Ok(true)
    }

    /// Writes the pending block and syncs the dirty files outside the lock, then answers
    /// the waiters (invariant 7). The caller owns the flush (`flushing`, set for it).
    fn lead(&self, mut st: MutexGuard<'_, State>, upto: Lsn) -> Result<(), StorageError> {
        assert!(st.flushing, "only the flush's owner leads it");
        let result = st.write_pending();
        let target = st.written;
        let target_end = st.written_end;
        let covered = st.unsynced;
        let dirty = std::mem::take(&mut st.dirty);
        let files: Vec<Arc<dyn DbFile>> = dirty
            .iter()
            .filter_map(|id| st.files.get(id).cloned())
            .collect();
        drop(st);
        let synced = result.and_then(|_| {
            files
                .iter()
                .try_for_each(|f| f.sync_data())
                .map_err(StorageError::from)
        });
        let mut st = self.state.lock().unwrap();
        st.flushing = false;
        st.syncs += 1;
        let failure = match synced {
            Ok(()) => {
                st.durable = target.max(st.durable);
                st.durable_end = target_end.max(st.durable_end);
                st.unsynced = st.unsynced.saturating_sub(covered);
                None
            }
            Err(e) => {
                st.failed.store(true, Ordering::Release);
                Some(e)
            }
        };
        let woken = st.answer_waiters();
        let failed = st.failed.load(Ordering::Acquire);
        assert!(
            failed || st.durable.is_some_and(|d| d >= upto),
            "a leader's own records are covered by its sync"
        );
        drop(st);
        for w in woken {
            w.thread.unpark();
        }
        match failure {
            // The flush that failed reports the OS error (823); later ones, LogFailed.
            Some(e) => Err(e),
            None if failed => Err(StorageError::LogFailed),
            None => Ok(()),
        }
    }

    /// True once a write or sync of the log failed (invariant 3): the database must be
    /// reopened.
    pub fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// The number of flushes that synced files, for group-commit measurements.
    pub fn syncs(&self) -> u64 {
        self.state.lock().unwrap().syncs
    }

    /// The number of `flush` callers that waited for a sync rather than finding their
    /// records durable: with `syncs`, how many commits one sync serves.
    pub fn flush_waits(&self) -> u64 {
        self.flush_waits.load(Ordering::Relaxed)
    }

    /// The last LSN made durable.
    pub fn durable_lsn(&self) -> Option<Lsn> {
        self.state.lock().unwrap().durable
    }

    /// An LSN above every record appended so far and at or below the next one's: where a
    /// checkpoint taken now lets redo start.
    pub fn end_lsn(&self) -> Lsn {
        self.state.lock().unwrap().end()
    }

    /// FSeqNo of the VLF being written (0 before the first record of a fresh log).
    pub fn current_sequence(&self) -> u32 {
        let st = self.state.lock().unwrap();
        st.vlfs[st.cur].sequence
    }

    /// VLFs that could take new log records: never used, or below the oldest one needed.
    pub fn free_vlfs(&self) -> usize {
        self.state.lock().unwrap().free_vlfs()
    }

    /// Used bytes, free VLFs and VLF count read in one hold of the writer's lock (the
    /// check every statement makes before it changes rows).
    pub fn space(&self) -> LogSpace {
        let st = self.state.lock().unwrap();
        LogSpace {
            used_bytes: st.used_bytes(),
            free_vlfs: st.free_vlfs(),
            vlf_count: st.vlfs.len(),
        }
    }

    /// Bytes of log still needed: whole VLFs from the oldest needed FSeqNo up to the current
    /// one, plus the current VLF up to the write position (pending records included).
    pub fn used_bytes(&self) -> u64 {
        self.state.lock().unwrap().used_bytes()
    }

    /// Adds the VLFs a growth of one log file wrote (after their headers are durable),
    /// placed after that file's last VLF in physical order.
    pub fn add_vlfs(&self, new: &[VlfHeader]) {
        let Some(first) = new.first() else {
            return;
        };
        let mut st = self.state.lock().unwrap();
        let pos = st
            .vlfs
            .iter()
            .rposition(|v| v.file_id == first.file_id)
            .map(|i| i + 1)
            .unwrap_or(st.vlfs.len());
        for (k, h) in new.iter().enumerate() {
            assert_eq!(h.sequence, 0, "a new VLF is unused");
            st.vlfs.insert(pos + k, *h);
        }
        if pos <= st.cur {
            st.cur += new.len();
        }
    }

    /// Number of VLFs.
    pub fn vlf_count(&self) -> usize {
        self.state.lock().unwrap().vlfs.len()
    }

    /// Block space left for records without waiting for truncation or growth: the rest of
    /// the current VLF and the block areas of the free VLFs.
    pub fn free_bytes(&self) -> u64 {
        let st = self.state.lock().unwrap();
        let v = st.vlfs[st.cur];
        let here = if v.sequence == 0 || st.closed {
            0
        } else {
            v.size.saturating_sub(st.pos)
        };
        let current = v.sequence;
        here + (0..st.vlfs.len())
            .filter(|&i| st.is_free(i, current))
            .map(|i| st.vlfs[i].size.saturating_sub(VLF_HEADER_AREA))
            .sum::<u64>()
    }

    /// Bytes of all VLFs.
    pub fn total_bytes(&self) -> u64 {
        self.state.lock().unwrap().vlfs.iter().map(|v| v.size).sum()
    }

    /// Makes every record durable and says what a backup must copy to hold the log from
    /// FSeqNo `from` to its end; the VLFs from `from` on are not reused until
    /// `unpin(from)` (the backup reads them meanwhile).
    pub fn backup_snapshot(&self, from: u32) -> Result<LogCopy, StorageError> {
        let last = self.state.lock().unwrap().last;
        if let Some(l) = last {
            self.flush(l)?;
        }
        let mut st = self.state.lock().unwrap();
        st.pins.push(from);
        let current = st.vlfs[st.cur].sequence;
        let mut order: Vec<usize> = (0..st.vlfs.len())
            .filter(|&i| {
                let s = st.vlfs[i].sequence;
                s != 0 && s >= from && s <= current
            })
            .collect();
        order.sort_by_key(|&i| st.vlfs[i].sequence);
        let ranges = order
            .into_iter()
            .map(|i| {
                let v = st.vlfs[i];
                let len = if i == st.cur { st.pos } else { v.size };
                (v.file_id, v.start_offset, len)
            })
            .collect();
        let end = st.end();
        Ok(LogCopy {
            vlfs: st.vlfs.clone(),
            ranges,
            end,
        })
    }

    /// Ends the pin one `backup_snapshot(from)` took.
    pub fn unpin(&self, from: u32) {
        let mut st = self.state.lock().unwrap();
        if let Some(i) = st.pins.iter().position(|&p| p == from) {
            st.pins.swap_remove(i);
        }
    }

    /// Keeps the VLFs from FSeqNo `seq` on from reuse again, as a log chain starting there
    /// needs: only while a backup's pin from `seq` (or older) holds them, so none was
    /// reused meanwhile.
    pub fn retain_from(&self, seq: u32) {
        let mut st = self.state.lock().unwrap();
        debug_assert!(st.pins.iter().any(|&p| p <= seq), "retain_from needs a pin");
        st.min_active = st.min_active.min(seq);
    }

    /// Lets VLFs below FSeqNo `seq` be reused (log truncation).
    pub fn truncate_before(&self, seq: u32) {
        let mut st = self.state.lock().unwrap();
        st.min_active = st.min_active.max(seq);
    }
}

/// FixupLogTail, first part: zeroes up to `FIXUP_BYTES` of the current VLF's tail past the
/// end of the log; returns the bytes zeroed. The rest of the budget is zeroed in each VLF
/// the writer activates next, just before its header is written (`next_vlf`), whichever
/// VLF that is and whatever its header said (a lost header write can leave an old one above
/// blocks of the lost use). No stale block can then follow a new one (invariant 2).
fn fixup_tail(files: &Files, vlfs: &[VlfHeader], end: LogEnd) -> Result<u64, StorageError> {
    let v = vlfs[end.vlf];
    let from = if end.closed { v.size } else { end.pos };
    let len = v.size.saturating_sub(from).min(FIXUP_BYTES);
    if len > 0 {
        let file = io_file(files, v.file_id)?;
        extentdb_io::write_zeros(file.as_ref(), v.start_offset + from, len)?;
        file.sync_data()?;
    }
    Ok(len)
}

impl State {
    /// Stops the writer for good (invariant 3).
    fn fail(&self) {
        self.failed.store(true, Ordering::Release);
    }

    /// After a flush: answers every waiter its sync covered (all of them, failed, once the
    /// log failed) and hands the lead to the first one left, owning the flush for it
    /// (invariant 7). Returns the waiters to unpark once the lock is released, the new
    /// leader first, so the next sync starts before the covered waiters run.
    fn answer_waiters(&mut self) -> Vec<Arc<Waiter>> {
        assert!(!self.flushing, "waiters are answered when a flush ends");
        let mut woken = std::mem::take(&mut self.waiters);
        if self.failed.load(Ordering::Acquire) {
            woken.iter().for_each(|w| w.answer(FAILED));
            return woken;
        }
        let durable = self.durable;
        let mut lead = None;
        woken.retain(|w| {
            if durable.is_some_and(|d| d >= w.upto) {
                w.answer(DURABLE);
                return true;
            }
            match lead {
                None => lead = Some(w.clone()),
                Some(_) => self.waiters.push(w.clone()),
            }
            false
        });
        if let Some(next) = lead {
            self.flushing = true;
            next.answer(LEAD);
            woken.insert(0, next);
        }
        woken
    }

    /// True if VLF `i` may be activated after the VLF with FSeqNo `current`: never used,
    /// truncated, or a header beyond the end of the log (a leftover of writes lost in a
    /// crash, whose blocks were zeroed at open).
    /// Above every record appended: after the last one, or, when none was appended since
    /// the writer opened, where the next block goes (the records read back at open lie
    /// before it).
    fn end(&self) -> Lsn {
        match self.last {
            Some(l) => Lsn {
                slot: l.slot.saturating_add(1),
                ..l
            },
            None => Lsn {
                vlf_sequence: self.vlfs[self.cur].sequence,
                block: (self.pos / SECTOR_SIZE as u64) as u32,
                slot: 0,
            },
        }
    }

    /// Bytes of log still needed (`LogWriter::used_bytes`).
    fn used_bytes(&self) -> u64 {
        let current = self.vlfs[self.cur].sequence;
        let before: u64 = self
            .vlfs
            .iter()
            .filter(|v| v.sequence != 0 && v.sequence >= self.min_active && v.sequence < current)
            .map(|v| v.size)
            .sum();
        let pending = (block_sectors(self.pending_payload) * SECTOR_SIZE) as u64
            * (!self.pending.is_empty()) as u64;
        before + if current > 0 { self.pos + pending } else { 0 }
    }

    /// VLFs that could take new log records (`LogWriter::free_vlfs`).
    fn free_vlfs(&self) -> usize {
        let current = self.vlfs[self.cur].sequence;
        (0..self.vlfs.len())
            .filter(|&i| self.is_free(i, current))
            .count()
    }

    fn is_free(&self, i: usize, current: u32) -> bool {
        let s = self.vlfs[i].sequence;
        let needed_from = self.pins.iter().fold(self.min_active, |m, &p| m.min(p));
        i != self.cur && (s == 0 || s < needed_from || s > current)
    }

    /// True if a block with `payload` bytes fits at `pos` leaving room for the end flag.
    fn fits(&self, payload: usize) -> bool {
        let size = self.vlfs[self.cur].size;
        let bytes = (block_sectors(payload) * SECTOR_SIZE) as u64;
        payload <= MAX_BLOCK_PAYLOAD
            && (self.pos + bytes == size || self.pos + bytes + SECTOR_SIZE as u64 <= size)
    }

    /// Writes `bytes` at `pos` of the current VLF, syncing first if the cap would be passed.
    fn write_at_pos(&mut self, bytes: &[u8]) -> Result<(), StorageError> {
        let v = self.vlfs[self.cur];
        let file = io_file(&self.files, v.file_id)?.clone();
        if self.unsynced + bytes.len() as u64 > MAX_UNSYNCED {
            // Every file, not just `dirty`: a flusher may hold some of them mid-sync.
            self.dirty.clear();
            for f in self.files.values() {
                f.sync_data().inspect_err(|_| self.fail())?;
            }
            self.unsynced = 0;
            self.durable = self.written.max(self.durable);
            self.durable_end = self.written_end;
        }
        file.write_at(bytes, v.start_offset + self.pos)
            .inspect_err(|_| self.fail())?;
        if !self.dirty.contains(&v.file_id) {
            self.dirty.push(v.file_id);
        }
        self.unsynced += bytes.len() as u64;
        self.pos += bytes.len() as u64;
        Ok(())
    }

    /// Writes one encoded block at `pos` and moves the written end past it (invariant 5).
    fn write_block(&mut self, block: &[u8]) -> Result<(), StorageError> {
        self.write_at_pos(block)?;
        self.written_end = Lsn {
            vlf_sequence: self.vlfs[self.cur].sequence,
            block: (self.pos / SECTOR_SIZE as u64) as u32,
            slot: 0,
        };
        assert!(
            self.durable_end <= self.written_end,
            "durable end {} past the written end {}",
            self.durable_end,
            self.written_end
        );
        Ok(())
    }

    /// Writes the pending block, if any.
    fn write_pending(&mut self) -> Result<(), StorageError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let v = self.vlfs[self.cur];
        let refs: Vec<&[u8]> = self.pending.iter().map(|r| r.as_slice()).collect();
        let block = encode_block_flags(
            &refs,
            v.sequence,
            (self.pos / SECTOR_SIZE as u64) as u32,
            v.parity,
            0,
            self.durable_end,
        );
        self.write_block(&block)?;
        self.pending.clear();
        self.pending_payload = 0;
        self.written = self.last;
        Ok(())
    }

    /// Closes the current VLF and activates the next one in physical order (invariant 4).
    fn next_vlf(&mut self) -> Result<(), StorageError> {
        let v = self.vlfs[self.cur];
        if !self.closed && v.sequence > 0 && self.pos < v.size {
            let marker = encode_block_flags(
                &[],
                v.sequence,
                (self.pos / SECTOR_SIZE as u64) as u32,
                v.parity,
                FLAG_VLF_END,
                self.durable_end,
            );
            self.write_block(&marker)?;
        }
        // The next VLF in physical order, or else the first free one after it: the reader
        // follows FSeqNos, not positions, so space a growth added behind a wrapped log is
        // usable at once (SQL Server waits for the log to wrap around to it). A stale block
        // in a VLF activated out of order carries another FSeqNo and is never read.
        let n = self.vlfs.len();
        let next = if v.sequence == 0 {
            Some(self.cur)
        } else {
            (1..n)
                .map(|k| (self.cur + k) % n)
                .find(|&i| self.is_free(i, v.sequence))
        };
        let Some(next) = next else {
            return Err(StorageError::LogFull("ACTIVE_TRANSACTION"));
        };
        let old = self.vlfs[next];
        if self.fixup_remaining > 0 {
            let len = old
                .size
                .saturating_sub(VLF_HEADER_AREA)
                .min(self.fixup_remaining);
            let file = io_file(&self.files, old.file_id)?.clone();
            extentdb_io::write_zeros(file.as_ref(), old.start_offset + VLF_HEADER_AREA, len)
                .and_then(|_| file.sync_data())
                .inspect_err(|_| self.fail())?;
            self.fixup_remaining -= len;
        }
        // FSeqNos continue from the end of the log without a gap: the reader stops at a gap.
        let header = VlfHeader {
            sequence: v.sequence + 1,
            parity: if old.parity == 0 {
                PARITY_FIRST
            } else {
                log::flip(old.parity)
            },
            ..old
        };
        self.cur = next;
        self.pos = 0;
        self.write_at_pos(&header.encode())?;
        self.vlfs[next] = header;
        self.pos = VLF_HEADER_AREA;
        self.closed = false;
        Ok(())
    }
}
