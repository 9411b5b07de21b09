//! Real files on Linux. See the crate docs for the contract.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::{AllocateMode, DbFile, FileSystem, IoError, Result};

/// `FALLOC_FL_WRITE_ZEROES` from linux/falloc.h (Linux 6.17+); older kernels refuse it.
const FALLOC_FL_WRITE_ZEROES: i32 = 0x80;

pub struct OsFile {
    file: File,
    path: PathBuf,
}

/// One iovec per buffer, for preadv and preadv2.
fn iovecs(bufs: &mut [&mut [u8]]) -> Vec<libc::iovec> {
    bufs.iter_mut()
        .map(|b| libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        })
        .collect()
}

impl DbFile for OsFile {
    fn path(&self) -> &Path {
        &self.path
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| IoError::os("read", &self.path, e).at(offset))
    }
    fn read_vectored_at(&self, bufs: &mut [&mut [u8]], offset: u64) -> Result<()> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let iov = iovecs(bufs);
        // SAFETY: every iovec points into a buffer borrowed mutably for this call, with its
        // own length; the kernel writes at most that much into each.
        let n = unsafe {
            libc::preadv(
                self.file.as_raw_fd(),
                iov.as_ptr(),
                iov.len() as libc::c_int,
                offset as libc::off_t,
            )
        };
        if n < 0 {
            return Err(
                IoError::os("read", &self.path, std::io::Error::last_os_error()).at(offset),
            );
        }
        // A short read (a signal, the end of the file): the rest buffer by buffer, which
        // reports the end of the file as an error as read_at does.
        let mut done = n as usize;
        if done == total {
            return Ok(());
        }
        let mut at = offset;
        for b in bufs.iter_mut() {
            let len = b.len();
            if done >= len {
                done -= len;
            } else {
                self.read_at(&mut b[done..], at + done as u64)?;
                done = 0;
            }
            at += len as u64;
        }
        Ok(())
    }
    fn read_cached_vectored_at(&self, bufs: &mut [&mut [u8]], offset: u64) -> usize {
        let iov = iovecs(bufs);
        // SAFETY: as in read_vectored_at: every iovec points into a buffer borrowed mutably
        // for this call, with its own length.
        let n = unsafe {
            libc::preadv2(
                self.file.as_raw_fd(),
                iov.as_ptr(),
                iov.len() as libc::c_int,
                offset as libc::off_t,
                libc::RWF_NOWAIT,
            )
        };
        n.max(0) as usize
    }
    fn will_need(&self, offset: u64, len: u64) {
        use std::os::fd::AsRawFd;
        // SAFETY: a hint on a descriptor this file owns; no memory is passed.
        unsafe {
            libc::posix_fadvise(
                self.file.as_raw_fd(),
                offset as libc::off_t,
                len as libc::off_t,
                libc::POSIX_FADV_WILLNEED,
            );
        }
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| IoError::os("write", &self.path, e).at(offset))
    }
    fn sync_data(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| IoError::os("fdatasync", &self.path, e))
    }
    fn len(&self) -> Result<u64> {
        Ok(self
            .file
            .metadata()
            .map_err(|e| IoError::os("stat", &self.path, e))?
            .len())
    }
    fn set_len(&self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .map_err(|e| IoError::os("ftruncate", &self.path, e))
    }
    fn allocate(&self, offset: u64, len: u64, mode: AllocateMode) -> Result<()> {
        let flags = match mode {
            AllocateMode::Unwritten => 0,
            AllocateMode::WriteZeroes => FALLOC_FL_WRITE_ZEROES,
        };
        // SAFETY: fallocate only reads its integer arguments; the fd is owned by self.file.
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                flags,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(IoError::os(
                "fallocate",
                &self.path,
                std::io::Error::last_os_error(),
            ))
        }
    }
}

/// The operating system's file system.
#[derive(Default)]
pub struct OsFileSystem;

impl OsFileSystem {
    pub fn new() -> Arc<OsFileSystem> {
        Arc::new(OsFileSystem)
    }
}

impl FileSystem for OsFileSystem {
    fn create_new(&self, path: &Path) -> Result<Arc<dyn DbFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| IoError::os("create", path, e))?;
        Ok(Arc::new(OsFile {
            file,
            path: path.to_path_buf(),
        }))
    }
    fn open(&self, path: &Path) -> Result<Arc<dyn DbFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| IoError::os("open", path, e))?;
        Ok(Arc::new(OsFile {
            file,
            path: path.to_path_buf(),
        }))
    }
    fn remove(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| IoError::os("unlink", path, e))
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        std::fs::create_dir_all(path).map_err(|e| IoError::os("mkdir", path, e))
    }
    fn sync_dir(&self, path: &Path) -> Result<()> {
        let d = File::open(path).map_err(|e| IoError::os("open dir", path, e))?;
        d.sync_all().map_err(|e| IoError::os("fsync dir", path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves a vectored read fills each buffer with the next bytes of the file, and that a
    /// read past the end of the file fails as `read_at` does.
    #[test]
    fn read_vectored_at_fills_buffers_in_order() {
        let path = std::env::temp_dir().join(format!("xdb-preadv-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let f = OsFileSystem::new().create_new(&path).unwrap();
        let data: Vec<u8> = (0..3 * 8192).map(|i| (i % 251) as u8).collect();
        f.write_at(&data, 0).unwrap();
        let (mut a, mut b) = (vec![0u8; 8192], vec![0u8; 8192]);
        f.read_vectored_at(&mut [&mut a[..], &mut b[..]], 8192)
            .unwrap();
        assert_eq!(a, data[8192..16384]);
        assert_eq!(b, data[16384..]);
        let (mut c, mut d) = (vec![0u8; 8192], vec![0u8; 8192]);
        assert!(f
            .read_vectored_at(&mut [&mut c[..], &mut d[..]], 16384)
            .is_err());
        std::fs::remove_file(&path).unwrap();
    }

    /// Proves a read without waiting returns the cached prefix exactly: all of a file just
    /// written (its pages are in the cache), and after the cache is dropped no more than
    /// the file and only its true bytes.
    #[test]
    fn read_cached_vectored_at_reads_a_cached_prefix() {
        let path = std::env::temp_dir().join(format!("xdb-nowait-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let f = OsFileSystem::new().create_new(&path).unwrap();
        let data: Vec<u8> = (0..4 * 8192).map(|i| (i % 253) as u8).collect();
        f.write_at(&data, 0).unwrap();
        let mut bufs = vec![vec![0u8; 8192]; 4];
        let mut slices: Vec<&mut [u8]> = bufs.iter_mut().map(|b| &mut b[..]).collect();
        assert_eq!(f.read_cached_vectored_at(&mut slices, 0), data.len());
        assert_eq!(bufs.concat(), data);

        f.sync_data().unwrap();
        let raw = std::fs::File::open(&path).unwrap();
        // SAFETY: a hint on a descriptor this test owns.
        unsafe { libc::posix_fadvise(raw.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        let mut bufs = vec![vec![0u8; 8192]; 4];
        let mut slices: Vec<&mut [u8]> = bufs.iter_mut().map(|b| &mut b[..]).collect();
        let n = f.read_cached_vectored_at(&mut slices, 0);
        assert!(n <= data.len());
        assert_eq!(bufs.concat()[..n], data[..n]);
        std::fs::remove_file(&path).unwrap();
    }
}
