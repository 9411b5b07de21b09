//! Point-in-time views of a database's data files for DBCC CHECKDB, CHECKALLOC and
//! CHECKTABLE, taken while other sessions go on writing (SQL Server's internal database
//! snapshot, done as copy-on-write of pages).
//!
//! Every data file of an open database is wrapped in a `CowFile` sharing the database's
//! `SnapshotHooks`. A view (`CheckSource`) is made in one step under the database's lock
//! (`Database::check_source`): the pages that differ between memory and disk at that
//! instant (dirty buffer-pool frames and dirty allocation-cache pages) are copied into the
//! view's `SnapshotStore`, and the store is registered with the hooks. From then on, before
//! any write (or truncation) reaches a page the view covers, the `CowFile` copies the page's
//! current disk image into the store unless the store already holds the page. A reader of
//! the view reads the file *first* and consults the store *afterwards*, replacing any page
//! the store holds.
//!
//! Why the view is exact: call the registration instant T. A page the store holds was either
//! copied at T (its in-memory version at T) or copied from disk just before the first write
//! after T, when the disk still held its version at T (no write to it happened between T and
//! that copy: the copy precedes every write). A page the store does not hold when the reader
//! looks had no write begin since T, because a write inserts the copy before it starts; as
//! the reader looks after its read completes, the bytes it read were the disk's version at T,
//! which equals the in-memory version (the page was clean at T, or was dirty and so is in
//! the store). In-flight checkpoint writes at T are of pages still dirty in the pool (a page
//! is marked clean only after its write completes), so they are in the store.
//!
//! The store keeps its pages in an anonymous temporary file next to the primary data file
//! (or in the temporary directory), so a long check beside heavy writes costs disk, not
//! memory: 8 bytes of index per page copied. Readers take no lock on the file reads; the
//! index is split into shards so that writers and the check's workers rarely meet.
//!
//! Invariants:
//! 1. A page of the view is copied at most once, and before any write to it after T.
//! 2. The hooks' `active` count equals the number of registered stores; with none, a write
//!    costs one atomic load.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use extentdb_format::boot::BootPage;
use extentdb_format::catalog::Catalog;
use extentdb_format::{Page, PageId, PAGE_SIZE};
use extentdb_io::{AllocateMode, DbFile, IoError};

use crate::StorageError;

const SHARDS: usize = 64;

/// The views registered on one database's files.
#[derive(Default)]
pub struct SnapshotHooks {
    active: AtomicUsize,
    stores: Mutex<Vec<Arc<SnapshotStore>>>,
}

impl SnapshotHooks {
    /// Wraps a data file so that its writes keep registered views exact.
    pub(crate) fn wrap(self: &Arc<Self>, file_id: u16, inner: Arc<dyn DbFile>) -> Arc<dyn DbFile> {
        Arc::new(CowFile {
            inner,
            file_id,
            hooks: self.clone(),
        })
    }

    fn register(&self, store: Arc<SnapshotStore>) {
        let mut g = self.stores.lock().unwrap();
        g.push(store);
        self.active.store(g.len(), Ordering::SeqCst);
    }

    fn unregister(&self, store: &Arc<SnapshotStore>) {
        let mut g = self.stores.lock().unwrap();
        g.retain(|s| !Arc::ptr_eq(s, store));
        self.active.store(g.len(), Ordering::SeqCst);
    }

    /// Before bytes `[offset, offset + len)` of `file_id` change: every registered view
    /// copies the pages it covers and does not hold yet.
    fn before_change(&self, file_id: u16, inner: &dyn DbFile, offset: u64, len: u64) {
        if self.active.load(Ordering::SeqCst) == 0 || len == 0 {
            return;
        }
        let stores: Vec<Arc<SnapshotStore>> = self.stores.lock().unwrap().clone();
        let first = (offset / PAGE_SIZE as u64) as u32;
        let last = ((offset + len - 1) / PAGE_SIZE as u64) as u32;
        for s in stores {
            s.preserve(file_id, inner, first, last);
        }
    }

    /// Registered views (tests).
    pub fn active(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }
}

/// A data file whose writes first preserve the pages registered views still need.
struct CowFile {
    inner: Arc<dyn DbFile>,
    file_id: u16,
    hooks: Arc<SnapshotHooks>,
}

impl DbFile for CowFile {
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> extentdb_io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> extentdb_io::Result<()> {
        self.hooks
            .before_change(self.file_id, self.inner.as_ref(), offset, buf.len() as u64);
        self.inner.write_at(buf, offset)
    }
    fn sync_data(&self) -> extentdb_io::Result<()> {
        self.inner.sync_data()
    }
    fn len(&self) -> extentdb_io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> extentdb_io::Result<()> {
        let old = self.inner.len()?;
        if len < old {
            self.hooks
                .before_change(self.file_id, self.inner.as_ref(), len, old - len);
        }
        self.inner.set_len(len)
    }
    fn will_need(&self, offset: u64, len: u64) {
        self.inner.will_need(offset, len)
    }
    fn read_cached_vectored_at(&self, bufs: &mut [&mut [u8]], offset: u64) -> usize {
        self.inner.read_cached_vectored_at(bufs, offset)
    }
    fn read_vectored_at(&self, bufs: &mut [&mut [u8]], offset: u64) -> extentdb_io::Result<()> {
        self.inner.read_vectored_at(bufs, offset)
    }
    fn allocate(&self, offset: u64, len: u64, mode: AllocateMode) -> extentdb_io::Result<()> {
        // Adds space past the end only (see DbFile): nothing a view covers changes.
        self.inner.allocate(offset, len, mode)
    }
}

/// The pages one view copied: an index per shard, the images in a side file.
pub struct SnapshotStore {
    /// File sizes in pages at T: pages at or beyond them are not part of the view.
    sizes: BTreeMap<u16, u32>,
    shards: Vec<Mutex<HashMap<(u16, u32), u64>>>,
    side: std::fs::File,
    next_slot: AtomicU64,
    /// Pages copied because a write came (not counting those taken at T).
    pub copied_on_write: AtomicU64,
    /// The first failure to keep a copy; the view is then unusable (the check reports it).
    failed: Mutex<Option<String>>,
}

impl SnapshotStore {
    fn new(dir: &Path, sizes: BTreeMap<u16, u32>) -> Result<SnapshotStore, StorageError> {
        let side = anonymous_file(dir)?;
        Ok(SnapshotStore {
            sizes,
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            side,
            next_slot: AtomicU64::new(0),
            copied_on_write: AtomicU64::new(0),
            failed: Mutex::new(None),
        })
    }

    fn shard(&self, file: u16, page: u32) -> &Mutex<HashMap<(u16, u32), u64>> {
        let h = (page as usize).wrapping_mul(0x9E37_79B9) ^ file as usize;
        &self.shards[(h >> 7) % SHARDS]
    }

    fn put(&self, bytes: &[u8]) -> std::io::Result<u64> {
        let slot = self.next_slot.fetch_add(1, Ordering::Relaxed);
        self.side.write_all_at(bytes, slot * PAGE_SIZE as u64)?;
        Ok(slot)
    }

    /// Stores the image of a page as it is at T (registration only).
    fn insert(&self, pid: PageId, page: &Page) -> Result<(), StorageError> {
        let slot = self.put(page.bytes()).map_err(side_error)?;
        self.shard(pid.file.0, pid.page.0)
            .lock()
            .unwrap()
            .insert((pid.file.0, pid.page.0), slot);
        Ok(())
    }

    fn preserve(&self, file: u16, inner: &dyn DbFile, first: u32, last: u32) {
        let Some(&size) = self.sizes.get(&file) else {
            return;
        };
        for page in first..=last.min(size.saturating_sub(1)) {
            if page >= size {
                break;
            }
            let mut shard = self.shard(file, page).lock().unwrap();
            if shard.contains_key(&(file, page)) {
                continue;
            }
            let mut buf = vec![0u8; PAGE_SIZE];
            // Bytes past the end of the file (a shorter file) read as zeros.
            let r = read_or_zeros(inner, &mut buf, page as u64 * PAGE_SIZE as u64)
                .map_err(|e| e.to_string())
                .and_then(|_| self.put(&buf).map_err(|e| e.to_string()));
            match r {
                Ok(slot) => {
                    shard.insert((file, page), slot);
                    self.copied_on_write.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    let mut f = self.failed.lock().unwrap();
                    f.get_or_insert(e);
                }
            }
        }
    }

    /// The copy of `(file, page)`, if the view holds one.
    fn get(&self, file: u16, page: u32, buf: &mut [u8]) -> Result<bool, StorageError> {
        let slot = self
            .shard(file, page)
            .lock()
            .unwrap()
            .get(&(file, page))
            .copied();
        match slot {
            Some(s) => {
                self.side
                    .read_exact_at(buf, s * PAGE_SIZE as u64)
                    .map_err(side_error)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn check_failed(&self) -> Result<(), StorageError> {
        match self.failed.lock().unwrap().as_ref() {
            Some(e) => Err(StorageError::Snapshot(e.clone())),
            None => Ok(()),
        }
    }
}

fn side_error(e: std::io::Error) -> StorageError {
    StorageError::Snapshot(format!("the check's snapshot file: {e}"))
}

/// Reads `buf` at `offset`; what lies past the end of the file reads as zeros.
fn read_or_zeros(f: &dyn DbFile, buf: &mut [u8], offset: u64) -> Result<(), IoError> {
    let len = f.len()?;
    let n = (len.saturating_sub(offset) as usize).min(buf.len());
    buf[n..].fill(0);
    f.read_at(&mut buf[..n], offset)
}

static SIDE_FILES: AtomicU64 = AtomicU64::new(0);

/// A read-write file with no name: created in `dir` (or the temporary directory when `dir`
/// is not a real directory, as under the simulated file system) and unlinked at once.
fn anonymous_file(dir: &Path) -> Result<std::fs::File, StorageError> {
    let base: PathBuf = if dir.is_dir() {
        dir.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let n = SIDE_FILES.fetch_add(1, Ordering::Relaxed);
    let path = base.join(format!(".xdb-check-{}-{n}.snap", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(side_error)?;
    let _ = std::fs::remove_file(&path);
    Ok(f)
}

/// One data file as a view sees it.
#[derive(Clone)]
pub struct SourceFile {
    pub file: Arc<dyn DbFile>,
    /// Pages of the file at T.
    pub size_pages: u32,
    pub data_space_id: u16,
    pub logical_name: String,
    pub physical_name: String,
}

/// A consistent view of a database's data files, catalog and boot page for the checkers.
/// Dropping it unregisters its store.
pub struct CheckSource {
    pub name: String,
    pub boot: BootPage,
    pub catalog: Catalog,
    pub files: BTreeMap<u16, SourceFile>,
    store: Option<Arc<SnapshotStore>>,
    hooks: Option<Arc<SnapshotHooks>>,
}

impl Drop for CheckSource {
    fn drop(&mut self) {
        if let (Some(h), Some(s)) = (&self.hooks, &self.store) {
            h.unregister(s);
        }
    }
}

impl CheckSource {
    /// A view over files nothing else writes (a stopped instance's, or a database the caller
    /// holds): reads go straight to the files.
    pub fn unshared(
        name: String,
        boot: BootPage,
        catalog: Catalog,
        files: BTreeMap<u16, SourceFile>,
    ) -> CheckSource {
        CheckSource {
            name,
            boot,
            catalog,
            files,
            store: None,
            hooks: None,
        }
    }

    /// Registers a copy-on-write view on `hooks`, seeded with `pages` (the in-memory versions
    /// at T). Call under the database's lock.
    pub(crate) fn registered(
        mut base: CheckSource,
        hooks: &Arc<SnapshotHooks>,
        pages: Vec<(PageId, Page)>,
        side_dir: &Path,
    ) -> Result<CheckSource, StorageError> {
        let sizes = base
            .files
            .iter()
            .map(|(id, f)| (*id, f.size_pages))
            .collect();
        let store = Arc::new(SnapshotStore::new(side_dir, sizes)?);
        for (pid, p) in &pages {
            store.insert(*pid, p)?;
        }
        hooks.register(store.clone());
        base.store = Some(store);
        base.hooks = Some(hooks.clone());
        Ok(base)
    }

    /// Reads pages of `file` from `first` into `pages` (one per buffer, with one vectored
    /// read), as they were at the view's instant. Pages past the end of the file read as
    /// zeros; an I/O error is returned as is (the caller retries page by page to find which
    /// one failed). Returns true when every page came from the page cache without waiting
    /// for the device (the reader then needs no read-ahead hints).
    pub fn read_pages(
        &self,
        file: u16,
        first: u32,
        pages: &mut [Page],
    ) -> Result<bool, StorageError> {
        let f = self
            .files
            .get(&file)
            .ok_or_else(|| StorageError::FileNotFound(file.to_string()))?;
        let offset = first as u64 * PAGE_SIZE as u64;
        let in_file = (f.file.len()?.saturating_sub(offset) / PAGE_SIZE as u64)
            .min(pages.len() as u64) as usize;
        let (present, past) = pages.split_at_mut(in_file);
        for p in past {
            p.bytes_mut().fill(0);
        }
        let mut bufs: Vec<&mut [u8]> = present.iter_mut().map(|p| &mut p.bytes_mut()[..]).collect();
        // What the page cache holds first, without waiting; then the rest from the device
        // (from the first page not read whole).
        let cached = f.file.read_cached_vectored_at(&mut bufs, offset) / PAGE_SIZE;
        let cached = cached.min(in_file);
        if cached < in_file {
            let at = offset + (cached * PAGE_SIZE) as u64;
            f.file.read_vectored_at(&mut bufs[cached..], at)?;
        }
        if let Some(store) = &self.store {
            for (i, p) in pages.iter_mut().enumerate() {
                store.get(file, first + i as u32, p.bytes_mut())?;
            }
            store.check_failed()?;
        }
        Ok(cached == in_file)
    }

    /// Read-ahead hint for `count` pages of `file` from `first` (see `DbFile::will_need`).
    pub fn will_need(&self, file: u16, first: u32, count: u32) {
        if let Some(f) = self.files.get(&file) {
            f.file.will_need(
                first as u64 * PAGE_SIZE as u64,
                count as u64 * PAGE_SIZE as u64,
            );
        }
    }

    /// One page as it was at the view's instant, unverified.
    pub fn read_page(&self, pid: PageId) -> Result<Page, StorageError> {
        let mut p = [Page::zeroed()];
        self.read_pages(pid.file.0, pid.page.0, &mut p)?;
        let [p] = p;
        Ok(p)
    }

    /// Pages copied because writers came during the view's life.
    pub fn copied_on_write(&self) -> u64 {
        self.store
            .as_ref()
            .map_or(0, |s| s.copied_on_write.load(Ordering::Relaxed))
    }
}

impl crate::Database {
    /// Wraps every data file in the database's copy-on-write hooks (at open and create).
    pub(crate) fn wrap_files(&mut self) {
        for (id, df) in self.data_files.iter_mut() {
            df.file = self.snapshots.wrap(*id, df.file.clone());
        }
    }

    /// The database's files, catalog and boot page as one view, without registering it: for
    /// a database nothing else writes (an offline one, or one the caller owns).
    pub fn unshared_source(&self) -> CheckSource {
        CheckSource::unshared(
            self.name.clone(),
            self.boot.clone(),
            self.catalog.clone(),
            source_files(&self.catalog, &self.data_files),
        )
    }

    /// A view of the database as it is now that stays exact while other sessions write
    /// (module docs). Call with the database held exclusively (no shared insert may be
    /// half done); the lock may be released at once.
    pub fn check_source(&self) -> Result<CheckSource, StorageError> {
        let mut pages: Vec<(PageId, Page)> = Vec::new();
        // Held exclusively, no session is inside the pool: no frame changes or is
        // written back between these copies and the registration below.
        assert!(
            self.held_exclusively,
            "a check's view is taken holding the database exclusively"
        );
        let pool = &self.data.pool;
        for pid in pool.dirty_pids() {
            if let Some((mut p, _)) = pool.dirty_copy(pid) {
                p.seal();
                pages.push((pid, p));
            }
        }
        for df in self.data_files.values() {
            pages.extend(df.dirty_cached_pages());
        }
        let dir = self
            .primary()
            .file
            .path()
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        CheckSource::registered(self.unshared_source(), &self.snapshots, pages, &dir)
    }
}

impl crate::database::OfflineDatabase {
    /// The stopped database's files as a view (`extentdb checkdb`).
    pub fn source(&self) -> CheckSource {
        CheckSource::unshared(
            self.boot.name.clone(),
            self.boot.clone(),
            self.catalog.clone(),
            source_files(&self.catalog, &self.data_files),
        )
    }
}

fn source_files(
    catalog: &Catalog,
    data_files: &BTreeMap<u16, crate::data_file::DataFile>,
) -> BTreeMap<u16, SourceFile> {
    data_files
        .iter()
        .map(|(id, df)| {
            let entry = catalog.files.iter().find(|f| f.file_id == *id);
            (
                *id,
                SourceFile {
                    file: df.file.clone(),
                    size_pages: df.size_pages,
                    data_space_id: entry.map_or(1, |e| e.data_space_id),
                    logical_name: entry.map(|e| e.name.clone()).unwrap_or_default(),
                    physical_name: entry.map(|e| e.physical_name.clone()).unwrap_or_default(),
                },
            )
        })
        .collect()
}
