//! File initialization: the one mechanism every path that adds file space goes through
//! (create database, add file, grow, later autogrow and restore).
//!
//! - Data files with instant file initialization (IFI) on: `fallocate` adds the space as
//!   unwritten extents, which read back as zeros, so no stale disk bytes are ever exposed
//!   (seed 003's lab cannot happen on Linux). Where the file system refuses fallocate, the
//!   space is written with zeros instead and that is logged once per file.
//! - Data files with IFI off (setup option, or trace flag 1806): zeros written with large
//!   sequential writes, then fdatasync: close to the device's sequential write speed.
//! - Log files, always: the log's sector parity needs known content. First choice is
//!   `FALLOC_FL_WRITE_ZEROES` (written, zeroed extents: later commits' fdatasync journals no
//!   extent conversion); where the kernel or device refuses it, written zeros. Plain
//!   fallocate is never used for the log: its unwritten extents make every first write
//!   into them a metadata change that the commit's fdatasync must journal.
//!
//! With trace flags 3004 and 3605 on, every initialization that writes zeros logs
//! `Zeroing <path> from page A to B (0x.. to 0x..)` and `Zeroing completed on <path>
//! (elapsed = N ms)`, as SQL Server does; instant initialization logs nothing.

use std::time::Instant;

use extentdb_format::PAGE_SIZE;
use extentdb_io::{write_zeros, AllocateMode, DbFile};

use crate::StorageError;

/// What the new space is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpaceKind {
    Data,
    Log,
}

/// How the space was initialized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitMethod {
    /// fallocate, unwritten extents (instant).
    Fallocate,
    /// FALLOC_FL_WRITE_ZEROES.
    WriteZeroes,
    /// Zeros written through pwrite.
    ZeroWrite,
}

/// The settings that decide how space is initialized and what is logged.
#[derive(Debug, Clone, Copy)]
pub struct InitPolicy {
    /// Instant file initialization for data files (setup option and not trace flag 1806).
    pub instant: bool,
    /// Trace flags 3004 and 3605 both on.
    pub trace_zeroing: bool,
}

/// Where initialization messages go.
pub trait InitLog {
    fn log(&self, text: &str);
    /// Logs `text` only the first time `key` is seen by this sink's owner (the instance
    /// keeps the set, so a file whose file system refuses fallocate is reported once).
    fn log_once(&self, key: &str, text: &str) {
        let _ = key;
        self.log(text);
    }
}

/// Adds `[from_pages, to_pages)` pages to `file` and makes the space durable.
///
/// Postcondition on Ok: the file is `to_pages` pages long, every new byte reads as zero,
/// and the new length survives a crash. On Err the caller removes or truncates the file.
pub fn initialize(
    file: &dyn DbFile,
    kind: SpaceKind,
    from_pages: u32,
    to_pages: u32,
    policy: InitPolicy,
    log: &dyn InitLog,
) -> Result<InitMethod, StorageError> {
    initialize_paced(file, kind, from_pages, to_pages, policy, log, None)
}

/// Writing zeros `bytes` at a time with a sync after each, stopping early once `cancel` is
/// set (the space is then not initialized: the caller discards it).
#[derive(Clone, Copy)]
pub struct Pace<'a> {
    pub bytes: u64,
    pub cancel: &'a std::sync::atomic::AtomicBool,
    /// Asked after each step with the bytes still to zero and the step's time: true to
    /// rest as long as the step took, so that the zeros take at most half of the device's
    /// time while there is no hurry.
    pub may_rest: &'a dyn Fn(u64, std::time::Duration) -> bool,
}

/// `initialize`, writing zeros (where zeros are written) at `pace`: used while the file is
/// in use (a log growth prepared in the background), so that a concurrent commit's
/// fdatasync of the same file never waits for more than one chunk's writeback.
pub fn initialize_paced(
    file: &dyn DbFile,
    kind: SpaceKind,
    from_pages: u32,
    to_pages: u32,
    policy: InitPolicy,
    log: &dyn InitLog,
    pace: Option<Pace<'_>>,
) -> Result<InitMethod, StorageError> {
    assert!(to_pages > from_pages, "initialize needs new space");
    let (from, len) = (
        from_pages as u64 * PAGE_SIZE as u64,
        (to_pages - from_pages) as u64 * PAGE_SIZE as u64,
    );
    let path = file.path().display().to_string();
    let instant = kind == SpaceKind::Data && policy.instant;
    let started = Instant::now();
    if instant {
        match file.allocate(from, len, AllocateMode::Unwritten) {
            Ok(()) => {
                file.sync_data()?;
                return Ok(InitMethod::Fallocate);
            }
            Err(e) if e.is_unsupported() => log.log_once(&path, &format!(
                "Instant file initialization is not available for {path}: the file system refused fallocate ({e}); writing zeros instead."
            )),
            Err(e) => return Err(e.into()),
        }
    }
    if policy.trace_zeroing {
        log.log(&format!(
            "Zeroing {path} from page {from_pages} to {to_pages} (0x{from:x} to 0x{:x})",
            from + len
        ));
    }
    let method = if kind == SpaceKind::Log {
        match file.allocate(from, len, AllocateMode::WriteZeroes) {
            Ok(()) => InitMethod::WriteZeroes,
            Err(e) if e.is_unsupported() => {
                zero_range(file, from, len, pace)?;
                InitMethod::ZeroWrite
            }
            Err(e) => return Err(e.into()),
        }
    } else {
        // Reserve the blocks first where possible so ENOSPC surfaces before any write.
        match file.allocate(from, len, AllocateMode::Unwritten) {
            Ok(()) => {}
            Err(e) if e.is_unsupported() => {}
            Err(e) => return Err(e.into()),
        }
        zero_range(file, from, len, pace)?;
        InitMethod::ZeroWrite
    };
    file.sync_data()?;
    if policy.trace_zeroing {
        log.log(&format!(
            "Zeroing completed on {path} (elapsed = {} ms)",
            started.elapsed().as_millis()
        ));
    }
    Ok(method)
}

/// Writes zeros over `len` bytes at `from`: at once, or at `pace` (synced steps, stopping
/// when cancelled, resting when the pace allows).
fn zero_range(
    file: &dyn DbFile,
    from: u64,
    len: u64,
    pace: Option<Pace<'_>>,
) -> Result<(), StorageError> {
    let Some(p) = pace else {
        write_zeros(file, from, len)?;
        return Ok(());
    };
    let mut at = from;
    while at < from + len {
        if p.cancel.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(StorageError::Cancelled);
        }
        let n = p.bytes.min(from + len - at);
        let step = Instant::now();
        write_zeros(file, at, n)?;
        file.sync_data()?;
        at += n;
        let took = step.elapsed();
        if (p.may_rest)(from + len - at, took) {
            std::thread::sleep(took);
        }
    }
    Ok(())
}
