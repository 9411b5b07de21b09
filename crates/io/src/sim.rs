//! A simulated file system for fault injection. Seeded, so a failing run replays exactly.
//!
//! Each file keeps the durable image (what survives a crash) and the current image (what
//! reads see), plus the list of writes since the last `sync_data`. `crash()` builds new
//! durable images: each unsynced write is dropped, kept, or torn at 512-byte granularity,
//! chosen by the seeded generator. Faults: fail the N-th I/O with an errno, run out of
//! space past a byte budget (ENOSPC), deny creation under a path prefix (EACCES), refuse
//! fallocate (EOPNOTSUPP).
//!
//! Simplification, stated: directory operations (create, remove) are durable at once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use crate::{AllocateMode, DbFile, FileSystem, IoError, Result};

const SECTOR: usize = 512;

/// The faults to inject. All optional; the default injects nothing.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Fail the I/O with this ordinal (1-based, counting reads, writes, syncs, allocates)
    /// with the given errno.
    pub fail_io_at: Option<(u64, i32)>,
    /// Total bytes all files may occupy; growing past it fails with ENOSPC.
    pub capacity_bytes: Option<u64>,
    /// Creating a file under this prefix fails with EACCES.
    pub deny_create_under: Option<PathBuf>,
    /// fallocate fails with EOPNOTSUPP, as on file systems without it.
    pub refuse_fallocate: bool,
    /// The next fdatasync of any file fails with this errno (once; then cleared).
    pub fail_next_sync: Option<i32>,
}

struct Shared {
    faults: Faults,
    io_count: u64,
    rng: u64,
}

impl Shared {
    fn next_random(&mut self) -> u64 {
        // xorshift64*: small, seeded, reproducible.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn tick(&mut self, path: &Path, op: &'static str) -> Result<()> {
        self.io_count += 1;
        if op == "fdatasync" {
            if let Some(errno) = self.faults.fail_next_sync.take() {
                return Err(IoError::os(
                    op,
                    path,
                    std::io::Error::from_raw_os_error(errno),
                ));
            }
        }
        if let Some((n, errno)) = self.faults.fail_io_at {
            if self.io_count == n {
                return Err(IoError::os(
                    op,
                    path,
                    std::io::Error::from_raw_os_error(errno),
                ));
            }
        }
        Ok(())
    }
}

struct SimData {
    durable: Vec<u8>,
    current: Vec<u8>,
    unsynced: Vec<(u64, usize)>,
}

pub struct SimFile {
    path: PathBuf,
    data: Mutex<SimData>,
    /// Weak: the file system owns its files, so a strong link back would be a cycle and
    /// every simulated file system would leak its files.
    fs: Weak<SimInner>,
}

impl SimFile {
    /// The file system this file belongs to; an I/O error once it is gone.
    fn fs(&self) -> Result<Arc<SimInner>> {
        self.fs.upgrade().ok_or_else(|| {
            IoError::os(
                "io",
                &self.path,
                std::io::Error::from_raw_os_error(libc::ENODEV),
            )
        })
    }
}

struct SimInner {
    shared: Mutex<Shared>,
    files: Mutex<HashMap<PathBuf, Arc<SimFile>>>,
}

impl SimInner {
    fn used_bytes(&self, except: &Path) -> u64 {
        let files = self.files.lock().unwrap();
        files
            .iter()
            .filter(|(p, _)| p.as_path() != except)
            .map(|(_, f)| f.data.lock().unwrap().current.len() as u64)
            .sum()
    }
    fn check_space(&self, path: &Path, new_len: u64) -> Result<()> {
        let cap = self.shared.lock().unwrap().faults.capacity_bytes;
        if let Some(cap) = cap {
            if self.used_bytes(path) + new_len > cap {
                return Err(IoError::os(
                    "write",
                    path,
                    std::io::Error::from_raw_os_error(libc::ENOSPC),
                ));
            }
        }
        Ok(())
    }
}

impl DbFile for SimFile {
    fn path(&self) -> &Path {
        &self.path
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let at = |e: IoError| e.at(offset);
        self.fs()?
            .shared
            .lock()
            .unwrap()
            .tick(&self.path, "read")
            .map_err(at)?;
        let d = self.data.lock().unwrap();
        let end = offset as usize + buf.len();
        if end > d.current.len() {
            let e = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
            return Err(IoError::os("read", &self.path, e).at(offset));
        }
        buf.copy_from_slice(&d.current[offset as usize..end]);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.fs()?
            .shared
            .lock()
            .unwrap()
            .tick(&self.path, "write")
            .map_err(|e| e.at(offset))?;
        let end = offset as usize + buf.len();
        let cur_len = self.data.lock().unwrap().current.len();
        if end > cur_len {
            self.fs()?
                .check_space(&self.path, end as u64)
                .map_err(|e| e.at(offset))?;
        }
        let mut d = self.data.lock().unwrap();
        if end > d.current.len() {
            d.current.resize(end, 0);
        }
        d.current[offset as usize..end].copy_from_slice(buf);
        d.unsynced.push((offset, buf.len()));
        Ok(())
    }
    fn sync_data(&self) -> Result<()> {
        self.fs()?
            .shared
            .lock()
            .unwrap()
            .tick(&self.path, "fdatasync")?;
        let mut d = self.data.lock().unwrap();
        d.durable = d.current.clone();
        d.unsynced.clear();
        Ok(())
    }
    fn len(&self) -> Result<u64> {
        Ok(self.data.lock().unwrap().current.len() as u64)
    }
    fn set_len(&self, len: u64) -> Result<()> {
        let mut d = self.data.lock().unwrap();
        d.current.resize(len as usize, 0);
        // Truncation is metadata: make it durable at once, like the directory operations.
        d.durable.resize(len as usize, 0);
        Ok(())
    }
    fn allocate(&self, offset: u64, len: u64, _mode: AllocateMode) -> Result<()> {
        {
            let fs = self.fs()?;
            let mut s = fs.shared.lock().unwrap();
            s.tick(&self.path, "fallocate")?;
            if s.faults.refuse_fallocate {
                let e = std::io::Error::from_raw_os_error(libc::EOPNOTSUPP);
                return Err(IoError::os("fallocate", &self.path, e));
            }
        }
        let end = offset + len;
        self.fs()?.check_space(&self.path, end)?;
        let mut d = self.data.lock().unwrap();
        if end as usize > d.current.len() {
            d.current.resize(end as usize, 0);
            // Allocated space reads as zeros whether or not a crash follows: metadata only.
            if d.durable.len() < end as usize {
                d.durable.resize(end as usize, 0);
            }
        }
        Ok(())
    }
}

/// The simulated file system. Cloning shares the same files.
#[derive(Clone)]
pub struct SimFileSystem {
    inner: Arc<SimInner>,
}

impl SimFileSystem {
    pub fn new(seed: u64, faults: Faults) -> SimFileSystem {
        SimFileSystem {
            inner: Arc::new(SimInner {
                shared: Mutex::new(Shared {
                    faults,
                    io_count: 0,
                    rng: seed | 1,
                }),
                files: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Replaces the fault plan (for example: no faults while setting up, then faults).
    pub fn set_faults(&self, faults: Faults) {
        self.inner.shared.lock().unwrap().faults = faults;
    }

    /// I/Os performed so far (to aim `fail_io_at`).
    pub fn io_count(&self) -> u64 {
        self.inner.shared.lock().unwrap().io_count
    }

    /// Simulates power loss: every unsynced write is dropped, kept or torn per sector.
    pub fn crash(&self) {
        let files: Vec<Arc<SimFile>> = self.inner.files.lock().unwrap().values().cloned().collect();
        let mut shared = self.inner.shared.lock().unwrap();
        for f in files {
            let mut d = f.data.lock().unwrap();
            let mut image = d.durable.clone();
            let writes = std::mem::take(&mut d.unsynced);
            for (offset, len) in writes {
                apply_unsynced(&mut image, &d.current, offset as usize, len, &mut shared);
            }
            d.current = image.clone();
            d.durable = image;
        }
    }

    /// Reads `buf.len()` bytes at `offset` of the durable image of the file at `path`: what
    /// every crash keeps. False when the file or that range is not there. Tests use it to
    /// check that a write was synced at the moment a caller was told it was durable.
    pub fn read_durable(&self, path: &Path, buf: &mut [u8], offset: u64) -> bool {
        let Some(f) = self.inner.files.lock().unwrap().get(path).cloned() else {
            return false;
        };
        let d = f.data.lock().unwrap();
        let end = offset as usize + buf.len();
        if end > d.durable.len() {
            return false;
        }
        buf.copy_from_slice(&d.durable[offset as usize..end]);
        true
    }

    /// The paths of all files, sorted.
    pub fn paths(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.inner.files.lock().unwrap().keys().cloned().collect();
        v.sort();
        v
    }
}

/// Applies one unsynced write to a crash image: dropped, kept whole, or torn per sector.
/// The bytes come from `current`, which holds the latest content of every written range.
fn apply_unsynced(image: &mut Vec<u8>, current: &[u8], offset: usize, len: usize, s: &mut Shared) {
    let end = (offset + len).min(current.len());
    match s.next_random() % 3 {
        0 => {}
        1 => copy_range(image, current, offset, end),
        _ => {
            let mut at = offset;
            while at < end {
                let next = ((at / SECTOR) + 1) * SECTOR;
                let stop = next.min(end);
                if s.next_random().is_multiple_of(2) {
                    copy_range(image, current, at, stop);
                }
                at = stop;
            }
        }
    }
}

fn copy_range(image: &mut Vec<u8>, current: &[u8], from: usize, to: usize) {
    if image.len() < to {
        image.resize(to, 0);
    }
    image[from..to].copy_from_slice(&current[from..to]);
}

impl FileSystem for SimFileSystem {
    fn fill_random(&self, buf: &mut [u8]) {
        let mut s = self.inner.shared.lock().unwrap();
        for chunk in buf.chunks_mut(8) {
            let r = s.next_random().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
    }

    fn create_new(&self, path: &Path) -> Result<Arc<dyn DbFile>> {
        {
            let mut s = self.inner.shared.lock().unwrap();
            s.tick(path, "create")?;
            if let Some(prefix) = &s.faults.deny_create_under {
                if path.starts_with(prefix) {
                    let e = std::io::Error::from_raw_os_error(libc::EACCES);
                    return Err(IoError::os("create", path, e));
                }
            }
        }
        let mut files = self.inner.files.lock().unwrap();
        if files.contains_key(path) {
            let e = std::io::Error::from_raw_os_error(libc::EEXIST);
            return Err(IoError::os("create", path, e));
        }
        let f = Arc::new(SimFile {
            path: path.to_path_buf(),
            data: Mutex::new(SimData {
                durable: Vec::new(),
                current: Vec::new(),
                unsynced: Vec::new(),
            }),
            fs: Arc::downgrade(&self.inner),
        });
        files.insert(path.to_path_buf(), f.clone());
        Ok(f)
    }
    fn open(&self, path: &Path) -> Result<Arc<dyn DbFile>> {
        self.inner.shared.lock().unwrap().tick(path, "open")?;
        match self.inner.files.lock().unwrap().get(path) {
            Some(f) => Ok(f.clone()),
            None => Err(IoError::os(
                "open",
                path,
                std::io::Error::from_raw_os_error(libc::ENOENT),
            )),
        }
    }
    fn remove(&self, path: &Path) -> Result<()> {
        match self.inner.files.lock().unwrap().remove(path) {
            Some(_) => Ok(()),
            None => Err(IoError::os(
                "unlink",
                path,
                std::io::Error::from_raw_os_error(libc::ENOENT),
            )),
        }
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.files.lock().unwrap().contains_key(path)
    }
    fn create_dir_all(&self, _path: &Path) -> Result<()> {
        Ok(())
    }
    fn sync_dir(&self, _path: &Path) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves synced bytes survive a crash and unsynced bytes are dropped or torn only at
    /// sector boundaries, reproducibly for a seed.
    #[test]
    fn crash_keeps_synced_and_tears_by_sector() {
        for seed in 1..50u64 {
            let fs = SimFileSystem::new(seed, Faults::default());
            let f = fs.create_new(Path::new("/d/a")).unwrap();
            f.write_at(&[1u8; 4096], 0).unwrap();
            f.sync_data().unwrap();
            f.write_at(&[2u8; 4096], 0).unwrap();
            fs.crash();
            let mut buf = vec![0u8; 4096];
            f.read_at(&mut buf, 0).unwrap();
            for sector in buf.chunks(SECTOR) {
                assert!(
                    sector.iter().all(|&b| b == sector[0]),
                    "torn inside a sector"
                );
                assert!(sector[0] == 1 || sector[0] == 2);
            }
        }
    }

    /// Proves the N-th I/O fails with the chosen errno and the capacity gives ENOSPC.
    #[test]
    fn injected_faults() {
        let fs = SimFileSystem::new(
            7,
            Faults {
                capacity_bytes: Some(8192),
                ..Default::default()
            },
        );
        let f = fs.create_new(Path::new("/d/b")).unwrap();
        let err = f.allocate(0, 16384, AllocateMode::Unwritten).unwrap_err();
        assert_eq!(err.errno(), Some(libc::ENOSPC));
        let n = fs.io_count();
        fs.set_faults(Faults {
            fail_io_at: Some((n + 2, libc::EIO)),
            ..Default::default()
        });
        f.write_at(&[0u8; 10], 0).unwrap();
        assert_eq!(f.sync_data().unwrap_err().errno(), Some(libc::EIO));
    }
}
