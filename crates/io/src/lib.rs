//! The file layer: every byte extentdb reads or writes goes through `FileSystem` and
//! `DbFile`, so tests can swap the operating system for a simulation that injects faults.
//!
//! Two implementations:
//! - `os::OsFileSystem`: real files with `pread`/`pwrite`/`fdatasync`, `fallocate` for
//!   instant file initialization and `FALLOC_FL_WRITE_ZEROES` (probed) for the log.
//! - `sim::SimFileSystem`: in-memory files that keep a durable image beside unsynced writes,
//!   drop or tear (at 512-byte granularity) unsynced writes on `crash`, and fail chosen I/Os
//!   with chosen errno values (ENOSPC, EACCES, EIO), all driven by a seed.
//!
//! Invariants:
//! 1. A write is durable only after `sync_data` returns Ok on its file.
//! 2. After any failed write or sync the caller must treat the file as suspect (the storage
//!    layer refuses further writes until reopened); this layer never retries.
//!
//! Deliberately absent: caching and page knowledge (see `storage`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub mod os;
pub mod sim;

/// How new space at the end of a file is given its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocateMode {
    /// `fallocate(0)`: reserved blocks recorded as unwritten extents; reads return zeros.
    Unwritten,
    /// `fallocate(FALLOC_FL_WRITE_ZEROES)`: written extents whose content is zero, so later
    /// overwrites and fdatasync need no extent conversion (Linux 6.17+).
    WriteZeroes,
}

/// An I/O failure with the OS error number kept, so SQL messages can quote it.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error("{op} {path}: {source}")]
    Os {
        op: &'static str,
        path: PathBuf,
        /// The byte offset a read or write started at (823's offset), when there is one.
        offset: Option<u64>,
        #[source]
        source: std::io::Error,
    },
    /// The simulated file layer was told to crash; nothing after this point reached disk.
    #[error("simulated crash")]
    Crashed,
}

impl IoError {
    pub fn os(op: &'static str, path: &Path, source: std::io::Error) -> IoError {
        IoError::Os {
            op,
            path: path.to_path_buf(),
            offset: None,
            source,
        }
    }
    /// The same error, saying the read or write started at byte `at`.
    pub fn at(self, at: u64) -> IoError {
        match self {
            IoError::Os {
                op, path, source, ..
            } => IoError::Os {
                op,
                path,
                offset: Some(at),
                source,
            },
            other => other,
        }
    }
    /// The file the failed operation was on.
    pub fn path(&self) -> Option<&Path> {
        match self {
            IoError::Os { path, .. } => Some(path),
            IoError::Crashed => None,
        }
    }
    /// The byte offset a failed read or write started at.
    pub fn offset(&self) -> Option<u64> {
        match self {
            IoError::Os { offset, .. } => *offset,
            IoError::Crashed => None,
        }
    }
    /// "read", "write", "fdatasync" ...: the operation that failed.
    pub fn op(&self) -> &'static str {
        match self {
            IoError::Os { op, .. } => op,
            IoError::Crashed => "io",
        }
    }
    /// The errno, when there is one (EOPNOTSUPP, ENOSPC, EACCES ...).
    pub fn errno(&self) -> Option<i32> {
        match self {
            IoError::Os { source, .. } => source.raw_os_error(),
            IoError::Crashed => None,
        }
    }
    pub fn is_unsupported(&self) -> bool {
        matches!(
            self.errno(),
            Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) | Some(libc::ENOSYS)
        )
    }
}

pub type Result<T> = std::result::Result<T, IoError>;

/// One open file.
pub trait DbFile: Send + Sync {
    fn path(&self) -> &Path;
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()>;
    /// Makes every completed write durable (fdatasync).
    fn sync_data(&self) -> Result<()>;
    fn len(&self) -> Result<u64>;
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Shrinks or extends the file without writing (ftruncate): used only to undo a growth
    /// that failed half-way, never to add space a reader could see.
    fn set_len(&self, len: u64) -> Result<()>;
    /// Adds `[offset, offset+len)` with `mode`, extending the file.
    fn allocate(&self, offset: u64, len: u64, mode: AllocateMode) -> Result<()>;
    /// Reads consecutive bytes from `offset` into each buffer in turn (one `preadv` on a real
    /// file, so a run of pages lands in separate page buffers without a copy).
    fn read_vectored_at(&self, bufs: &mut [&mut [u8]], offset: u64) -> Result<()> {
        let mut at = offset;
        for b in bufs.iter_mut() {
            self.read_at(b, at)?;
            at += b.len() as u64;
        }
        Ok(())
    }
    /// Read-ahead: `[offset, offset+len)` will be read soon, so the OS may start reading it
    /// now (posix_fadvise WILLNEED). Only a hint: the default does nothing.
    fn will_need(&self, _offset: u64, _len: u64) {}
    /// Reads from `offset` into the buffers only what the page cache holds, without waiting
    /// for the device (preadv2 with RWF_NOWAIT): returns the bytes read, a prefix of the
    /// range. 0 when the first bytes are not cached, on any error (the caller's ordinary
    /// read reports it), and for files that cannot tell (the default).
    fn read_cached_vectored_at(&self, _bufs: &mut [&mut [u8]], _offset: u64) -> usize {
        0
    }
}

/// The directory operations the engine needs.
pub trait FileSystem: Send + Sync {
    /// Creates a file that must not exist yet (O_CREAT | O_EXCL).
    fn create_new(&self, path: &Path) -> Result<Arc<dyn DbFile>>;
    fn open(&self, path: &Path) -> Result<Arc<dyn DbFile>>;
    fn remove(&self, path: &Path) -> Result<()>;
    fn exists(&self, path: &Path) -> bool;
    fn create_dir_all(&self, path: &Path) -> Result<()>;
    /// Makes the directory's entries (creates, removes, renames) durable.
    fn sync_dir(&self, path: &Path) -> Result<()>;
    /// Random bytes for identifiers (database GUIDs): the OS's, or the simulation's seeded
    /// generator, so that a failing seed replays byte for byte.
    fn fill_random(&self, buf: &mut [u8]) {
        if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
            use std::io::Read;
            let _ = f.read_exact(buf);
        }
    }
}

/// Writes zeros over `[offset, offset+len)` with large aligned writes, then nothing else:
/// the caller syncs. Used when IFI is off and wherever fallocate is refused.
pub fn write_zeros(file: &dyn DbFile, offset: u64, len: u64) -> Result<()> {
    const CHUNK: usize = 8 << 20;
    let zeros = vec![0u8; CHUNK.min(len as usize).max(1)];
    let mut at = offset;
    let end = offset + len;
    while at < end {
        let n = ((end - at) as usize).min(zeros.len());
        file.write_at(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
}
