//! One process per instance directory: `serve`, `exec`, `setup` and the offline tools
//! (`checkdb`, `inspect`) take an exclusive `flock` on `instance.lock` before they read or
//! write anything else in the directory.
//!
//! Invariants:
//! 1. While a process holds the lock, no other process opens, recovers, re-creates or
//!    rewrites anything of the instance (tempdb, the configuration, the logins, the files):
//!    a second one fails at `acquire` with `StorageError::InstanceInUse` before touching it.
//! 2. The lock is the kernel's: it ends with the process however the process ends
//!    (`kill -9` included), so a crash never leaves a stale lock behind. The pid written in
//!    the file only names the holder in the message.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::StorageError;

/// The lock file's name inside the instance directory.
pub const LOCK_FILE: &str = "instance.lock";

/// Held for the life of the process's use of the instance; dropping it releases the lock.
#[derive(Debug)]
pub struct InstanceLock {
    _file: File,
}

impl InstanceLock {
    /// Creates `dir` (owner-only) if needed and takes its lock, or says who holds it.
    pub fn acquire(dir: &Path) -> Result<InstanceLock, StorageError> {
        let err = |e: std::io::Error| StorageError::Instance(dir.to_path_buf(), e.to_string());
        create_private_dir(dir).map_err(err)?;
        // An instance set up before this rule: owner-only from now on.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(dir.join(LOCK_FILE))
            .map_err(err)?;
        // SAFETY: flock on a descriptor this function owns; no memory is involved.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(err(e));
            }
            return Err(StorageError::InstanceInUse {
                dir: dir.to_path_buf(),
                holder: holder_pid(&mut file),
            });
        }
        file.set_len(0).map_err(err)?;
        file.seek(SeekFrom::Start(0)).map_err(err)?;
        file.write_all(format!("{}\n", std::process::id()).as_bytes())
            .map_err(err)?;
        Ok(InstanceLock { _file: file })
    }
}

/// The pid the holder wrote, when readable.
fn holder_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// The message of `StorageError::InstanceInUse`.
pub fn in_use_text(dir: &Path, holder: Option<u32>) -> String {
    let who = holder.map_or_else(|| "another process".to_string(), |p| format!("process {p}"));
    format!(
        "the instance in {} is in use by {who} (extentdb serve or exec); stop it first, or use another --data-dir",
        dir.display()
    )
}

/// Creates `dir` and any missing parents owner-only (0700); an existing directory keeps
/// its mode (a data or backup root a DBA made is theirs to set).
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}
