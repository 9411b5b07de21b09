//! A database: its files, filegroups and catalog, and the file-level DDL (create, add,
//! grow, modify, remove, drop).
//!
//! Catalog persistence (until the transaction log takes it over): the catalog blob is
//! written copy-on-write into free pages of the catalog allocation unit (extents owned by
//! the IAM page at (1:8)), made durable, and only then published by writing the boot page
//! and its mirror, each made durable in turn. A crash before the boot pages leaves the old
//! catalog in force; pages the crash left marked allocated are swept at open.
//!
//! Invariants:
//! 1. `catalog.check_invariants()` holds before every save.
//! 2. Every file in `catalog.files` is open in `data_files` or `log_files`, at the size the
//!    catalog records.
//! 3. A failed create or growth leaves no new file and no catalog change behind.
//! 4. Every IAM page of every allocation unit's chain maps a data file the catalog has.
//!    REMOVE FILE keeps it through the catalog's copy-on-write save: the chains that hold
//!    pages of the (empty) file are copied without them into new IAM pages, made durable,
//!    and published with the catalog that drops the file (each unit's first IAM page);
//!    only then are the old pages freed. A crash before the boot pages leaves the old
//!    chains and catalog in force and the copies unreachable, after them the old pages
//!    unreachable: the sweep at open frees either. `remove_file` asserts the invariant.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use extentdb_format::boot::{BootPage, DATABASE_VERSION};
use extentdb_format::catalog::{self, Catalog, FileEntry, FilegroupEntry, RecoveryModel};
use extentdb_format::file_header::{FileHeader, FileType};
use extentdb_format::layout::{self, BOOT_MIRROR_PAGE, BOOT_PAGE, CATALOG_IAM_PAGE};
use extentdb_format::{bitmap, iam, pfs, FileId, Lsn, PageId, PageNo, PAGES_PER_EXTENT, PAGE_SIZE};
use extentdb_io::{DbFile, FileSystem};

use crate::data_file::DataFile;
use crate::file_init::{self, InitLog, InitPolicy, SpaceKind};
use crate::log_writer::LogWriter;
use crate::now_us;
use crate::{log_file, StorageError};

/// Smallest file extentdb creates: 512 KB, SQL Server's minimum log size.
pub const MIN_FILE_PAGES: u32 = 64;

/// A file to create.
#[derive(Debug, Clone)]
pub struct NewFile {
    pub name: String,
    pub physical_name: PathBuf,
    pub file_type: FileType,
    /// Filegroup name for ROWS files (ignored for LOG).
    pub filegroup: String,
    pub size_pages: u32,
    pub max_size_pages: i32,
    pub growth: u32,
    pub is_percent_growth: bool,
}

/// A database to create: files in statement order, filegroups besides PRIMARY.
#[derive(Debug, Clone)]
pub struct NewDatabase {
    pub name: String,
    pub database_id: u16,
    pub recovery_model: RecoveryModel,
    pub files: Vec<NewFile>,
    /// (name, is_default) of filegroups other than PRIMARY, in statement order.
    pub filegroups: Vec<(String, bool)>,
}

/// How space is initialized and where initialization is reported.
pub struct OpContext<'a> {
    pub fs: &'a dyn FileSystem,
    pub policy: InitPolicy,
    pub log: &'a dyn InitLog,
}

pub struct Database {
    pub name: String,
    pub boot: BootPage,
    pub catalog: Catalog,
    pub data_files: BTreeMap<u16, DataFile>,
    pub log_files: BTreeMap<u16, Arc<dyn DbFile>>,
    catalog_chain: Vec<PageId>,
    /// Pages of the previous catalog chain, still marked allocated, reused by the next save.
    spare_catalog_pages: Vec<PageId>,
    /// The write-ahead log, attached once the database exists on disk (see `attach_wal`).
    pub(crate) wal: Option<Arc<LogWriter>>,
    /// Set after a write or sync failed part-way through a change: memory may no longer match
    /// disk, so every further change is refused until the database is reopened.
    poisoned: std::sync::atomic::AtomicBool,
    /// Buffer pool, active transactions and heap cursors (see `table` and `xact`).
    pub(crate) data: crate::table::DataPath,
    /// Copy-on-write views of the data files for the checkers (see `snapshot`); every data
    /// file is wrapped by them (`Database::wrap_files`).
    pub(crate) snapshots: Arc<crate::snapshot::SnapshotHooks>,
    /// Rows each table's row operations changed since the database opened, and the count
    /// each statistics object was built at (statistics.rs invariant 4; in memory only).
    pub modifications: crate::statistics::ModificationCounters,
    /// CRC and first page of the last catalog logged (`log_catalog`): a save that changes
    /// neither the catalog nor where it lies logs nothing.
    logged_catalog: (u32, PageId),
    /// Set while file 1 grows to make room for system pages (`grow_primary_for_system_pages`),
    /// whose catalog save must not start another such growth.
    growing_for_system_pages: bool,
    /// Counts page moves (SHRINKFILE, REBALANCE): a scan in chunks that began before a move
    /// cannot go on by page (`table::scan_chunk`, Msg 601).
    pub(crate) page_moves: u64,
    /// User allocation units whose IAM chains were found damaged at open (allocation.rs
    /// invariant 8): nothing they might own is freed.
    pub(crate) damaged_chains: Vec<crate::allocation::DamagedChain>,
    /// True while nothing else runs in the database (access.rs): set by `SharedDatabase` while it
    /// is held exclusively, and for a database no `SharedDatabase` shares. Written only through
    /// `&mut`, so a session sharing the database reads false.
    pub(crate) held_exclusively: bool,
    /// Set once the log's checkpoint or growth ahead of need was seen to in this
    /// exclusive hold (`Needs::LogSpace`); false again when the hold ends (`DbGuard`).
    pub(crate) log_attended: bool,
    /// Names this state of `catalog` (`catalog_version`): taken afresh from a process-wide
    /// count when the database is made or opened, at every catalog save, and whenever the
    /// catalog is put back or replaced, so no two states of any database's catalog in the
    /// process share a number.
    catalog_version: u64,
}

/// The process-wide count `Database::catalog_version` numbers take from.
static CATALOG_VERSIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn fresh_catalog_version() -> u64 {
    CATALOG_VERSIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn new_guid(fs: &dyn FileSystem) -> [u8; 16] {
    let mut g = [0u8; 16];
    fs.fill_random(&mut g);
    g[6] = (g[6] & 0x0f) | 0x40;
    g[8] = (g[8] & 0x3f) | 0x80;
    g
}

/// Creates one file and initializes its space; on failure removes it again.
fn create_file(ctx: &OpContext<'_>, f: &NewFile) -> Result<Arc<dyn DbFile>, StorageError> {
    let path = f.physical_name.display().to_string();
    let file = ctx
        .fs
        .create_new(&f.physical_name)
        .map_err(|source| StorageError::FileCreate {
            path: path.clone(),
            source,
        })?;
    let kind = if f.file_type == FileType::Log {
        SpaceKind::Log
    } else {
        SpaceKind::Data
    };
    if let Err(e) = file_init::initialize(file.as_ref(), kind, 0, f.size_pages, ctx.policy, ctx.log)
    {
        let _ = ctx.fs.remove(&f.physical_name);
        return Err(match e {
            StorageError::Io(source) => StorageError::FileCreate { path, source },
            other => other,
        });
    }
    // The new directory entry must survive a crash as the file's contents do.
    sync_parent(ctx.fs, &f.physical_name)?;
    Ok(file)
}

impl Database {
    /// Creates every file, formats them, writes the catalog and boot pages. On any failure
    /// every file created so far is removed (invariant 3).
    pub fn create(ctx: &OpContext<'_>, spec: &NewDatabase) -> Result<Database, StorageError> {
        let mut created: Vec<PathBuf> = Vec::new();
        let result = Self::create_inner(ctx, spec, &mut created);
        if result.is_err() {
            for p in &created {
                let _ = ctx.fs.remove(p);
            }
        }
        result
    }

    fn create_inner(
        ctx: &OpContext<'_>,
        spec: &NewDatabase,
        created: &mut Vec<PathBuf>,
    ) -> Result<Database, StorageError> {
        let guid = new_guid(ctx.fs);
        let created_us = now_us();
        let catalog = initial_catalog(spec);
        catalog
            .check_invariants()
            .map_err(|e| StorageError::Instance(PathBuf::new(), e))?;
        let mut data_files = BTreeMap::new();
        let mut log_files = BTreeMap::new();
        for entry in &catalog.files {
            let spec_file = spec
                .files
                .iter()
                .find(|f| f.name == entry.name)
                .expect("catalog built from spec");
            let file = create_file(ctx, spec_file)?;
            created.push(spec_file.physical_name.clone());
            if entry.file_type == FileType::Log {
                let vlfs =
                    log_file::vlf_count_for_create(entry.size_pages as u64 * PAGE_SIZE as u64);
                log_file::format_new(
                    file.as_ref(),
                    guid,
                    entry.file_id,
                    entry.size_pages,
                    vlfs,
                    entry.file_id == 2,
                )?;
                log_files.insert(entry.file_id, file);
            } else {
                let df = DataFile {
                    file_id: FileId(entry.file_id),
                    file,
                    size_pages: entry.size_pages,
                    wal: None,
                    cache: Default::default(),
                    database_id: 0,
                };
                df.write_file_header(guid, created_us)?;
                df.format_new_space(0)?;
                data_files.insert(entry.file_id, df);
            }
        }
        let boot = BootPage {
            generation: 0,
            database_guid: guid,
            database_version: DATABASE_VERSION,
            name: spec.name.clone(),
            created_us,
            checkpoint_lsn: Lsn::ZERO,
            last_checkdb_us: 0,
            catalog_first_page: PageId::NULL,
            catalog_bytes: 0,
            catalog_crc: 0,
            min_recovery_lsn: Lsn::ZERO,
            log_backup_lsn: Lsn::ZERO,
            differential_base_lsn: Lsn::ZERO,
            differential_base_guid: [0; 16],
        };
        let mut db = Database {
            name: spec.name.clone(),
            boot,
            catalog,
            data_files,
            log_files,
            catalog_chain: Vec::new(),
            spare_catalog_pages: Vec::new(),
            wal: None,
            poisoned: Default::default(),
            data: crate::table::DataPath::default(),
            snapshots: Default::default(),
            modifications: Default::default(),
            logged_catalog: (0, PageId::NULL),
            catalog_version: fresh_catalog_version(),
            growing_for_system_pages: false,
            page_moves: 0,
            damaged_chains: Vec::new(),
            held_exclusively: true,
            log_attended: false,
        };
        db.wrap_files();
        db.format_catalog_unit()?;
        db.save_catalog()?;
        for f in db.data_files.values() {
            f.sync()?;
        }
        db.attach_wal(true, None)?;
        Ok(db)
    }

    /// Formats the catalog allocation unit's IAM page (1:8) and gives it its first extent.
    fn format_catalog_unit(&mut self) -> Result<(), StorageError> {
        let primary = self.primary();
        let at = PageId {
            file: FileId::PRIMARY,
            page: CATALOG_IAM_PAGE,
        };
        let mut p = iam::new_iam_page(at, catalog::CATALOG_ALLOCATION_UNIT, 0, PageId::new(1, 0));
        primary.write_page(CATALOG_IAM_PAGE, &mut p)?;
        primary.set_pfs(CATALOG_IAM_PAGE, pfs::ALLOCATED | pfs::IAM_PAGE)?;
        for page in [BOOT_PAGE, BOOT_MIRROR_PAGE] {
            primary.set_pfs(page, pfs::ALLOCATED)?;
        }
        match primary.find_free_extent()? {
            Some(e) => {
                primary.claim_extent(e)?;
                self.set_iam_bit(at, e, true)
            }
            None => Err(StorageError::TooSmall {
                name: self.catalog.files[0].name.clone(),
                size_kb: primary.size_pages as u64 * 8,
                min_kb: MIN_FILE_PAGES as u64 * 8,
            }),
        }
    }

    /// Bytes of all log files together, as the catalog records them.
    pub fn log_bytes(&self) -> u64 {
        self.catalog
            .files
            .iter()
            .filter(|f| f.file_type == FileType::Log)
            .map(|f| f.size_pages as u64 * PAGE_SIZE as u64)
            .sum()
    }

    /// The VLFs of every log file, in file id order, read from their headers.
    pub fn vlfs(&self) -> Result<Vec<extentdb_format::log::VlfHeader>, StorageError> {
        let mut out = Vec::new();
        for (id, f) in &self.log_files {
            let limit = self
                .catalog
                .files
                .iter()
                .find(|e| e.file_id == *id)
                .map(|e| e.size_pages as u64 * PAGE_SIZE as u64)
                .unwrap_or(u64::MAX);
            out.extend(log_file::read_vlfs_upto(f.as_ref(), *id, limit)?);
        }
        Ok(out)
    }

    pub fn primary(&self) -> &DataFile {
        &self.data_files[&1]
    }

    /// Opens a database from its primary file; the other files come from its catalog.
    pub fn open(fs: &dyn FileSystem, primary_path: &Path) -> Result<Database, StorageError> {
        Database::open_reporting(fs, primary_path, None)
    }

    /// `open`, reporting the progress of a long recovery.
    pub fn open_reporting(
        fs: &dyn FileSystem,
        primary_path: &Path,
        progress: Option<&crate::recovery::RecoveryProgress<'_>>,
    ) -> Result<Database, StorageError> {
        Database::open_at(fs, primary_path, None, progress, true, None)
    }

    /// `open_reporting` with the buffer pool drawing on an instance's budget from the
    /// start, so recovery's redo stays inside `max server memory` too.
    pub fn open_in_budget(
        fs: &dyn FileSystem,
        primary_path: &Path,
        progress: Option<&crate::recovery::RecoveryProgress<'_>>,
        budget: std::sync::Arc<crate::buffer_pool::PoolBudget>,
    ) -> Result<Database, StorageError> {
        Database::open_at(fs, primary_path, None, progress, true, Some(budget))
    }

    /// A database restored from a backup (`restore`), whose files may lie elsewhere than its
    /// catalog says (RESTORE ... WITH MOVE) and which may take another name and id: opens
    /// the files at `paths` (file id -> path), recovers, then records the paths, the name
    /// and the id in the catalog and boot page.
    pub fn open_restored(
        fs: &dyn FileSystem,
        paths: &BTreeMap<u16, PathBuf>,
        name: &str,
        database_id: u16,
    ) -> Result<Database, StorageError> {
        let primary = paths
            .get(&FileId::PRIMARY.0)
            .ok_or_else(|| StorageError::FileNotFound("1".into()))?;
        // No sweep of unowned extents after a restore's roll forward (allocation.rs
        // invariant 4: the failure this was made for came from a growth's GAM redo,
        // data_file.rs invariant 5; the sweep here has not been tried again since).
        let mut db = Database::open_at(fs, primary, Some(paths), None, false, None)?;
        db.name = name.to_string();
        db.catalog.database_id = database_id;
        for df in db.data_files.values_mut() {
            df.database_id = database_id;
        }
        for f in &mut db.catalog.files {
            if let Some(p) = paths.get(&f.file_id) {
                f.physical_name = p.display().to_string();
            }
        }
        db.save_catalog()?;
        Ok(db)
    }

    /// A RESTORING database's files opened for RESTORE LOG's roll forward: no log writer,
    /// no recovery (`Database::roll_forward` redoes; the log stays the backups').
    /// `catalog`, when given, is the catalog as of the boot page's checkpoint, kept aside
    /// by the restore (its pages may have been overwritten by a roll forward cut short).
    pub(crate) fn open_restoring(
        fs: &dyn FileSystem,
        paths: &BTreeMap<u16, PathBuf>,
        catalog: Option<Catalog>,
    ) -> Result<Database, StorageError> {
        let primary = paths
            .get(&FileId::PRIMARY.0)
            .ok_or_else(|| StorageError::FileNotFound("1".into()))?;
        let files = open_files(fs, primary, false, Some(paths), catalog)?;
        Ok(Database::from_files(files))
    }

    /// A database of opened files, without its log writer yet; every data file wrapped for
    /// the checkers' views.
    fn from_files(files: OpenedFiles) -> Database {
        let mut db = Database {
            name: files.boot.name.clone(),
            logged_catalog: (files.boot.catalog_crc, files.boot.catalog_first_page),
            growing_for_system_pages: false,
            page_moves: 0,
            damaged_chains: Vec::new(),
            held_exclusively: true,
            log_attended: false,
            boot: files.boot,
            catalog: files.catalog,
            data_files: files.data_files,
            log_files: files.log_files,
            catalog_chain: files.chain,
            spare_catalog_pages: Vec::new(),
            wal: None,
            poisoned: Default::default(),
            data: crate::table::DataPath::default(),
            snapshots: Default::default(),
            modifications: Default::default(),
            catalog_version: fresh_catalog_version(),
        };
        db.wrap_files();
        db
    }

    fn open_at(
        fs: &dyn FileSystem,
        primary_path: &Path,
        paths: Option<&BTreeMap<u16, PathBuf>>,
        progress: Option<&crate::recovery::RecoveryProgress<'_>>,
        sweep_unowned: bool,
        budget: Option<std::sync::Arc<crate::buffer_pool::PoolBudget>>,
    ) -> Result<Database, StorageError> {
        let files = open_files(fs, primary_path, false, paths, None)?;
        let trimmed = trim_to_catalog(&files)?;
        let mut db = Database::from_files(files);
        if let Some(b) = budget {
            db.set_pool_budget(b)?;
        }
        db.attach_wal(false, progress)?;
        if !trimmed.is_empty() {
            db.data
                .recovery
                .get_or_insert_with(Default::default)
                .trimmed = trimmed;
        }
        // The log may have been nearly full at the crash; the sweep writes logged pages.
        db.ensure_log_space()?;
        // A user table's damaged IAM chain leaves the database open (allocation.rs
        // invariant 8); the sweeps below then free nothing the chain might own.
        db.damaged_chains = db.find_damaged_chains()?;
        db.free_orphan_units()?;
        db.sweep_catalog_pages()?;
        if sweep_unowned {
            db.sweep_after_crash()?;
        }
        db.reserve_identity_blocks()?;
        // Proportional fill's round robin is counted now, so a filegroup's first new extent
        // after open is taken sharing the database. A map that cannot be read leaves it to
        // the first allocation, which reports the damage (allocate_extent_by_fill).
        if db.recalculate_proportional_fill().is_err() {
            db.data.fill.clear();
        }
        Ok(db)
    }

    /// Frees the extents a crash left allocated in a GAM but owned by no IAM page
    /// (allocation.rs invariant 4). Only after a crash whose log held page images: damage
    /// found in a database that was shut down cleanly is CHECKALLOC's to report (Msg 8905),
    /// not ours to hide. Nor with a damaged IAM chain (invariant 8): the extents its lost
    /// pages mapped would look unowned.
    fn sweep_after_crash(&mut self) -> Result<(), StorageError> {
        let Some(r) = self.data.recovery.as_mut().filter(|r| r.page_images > 0) else {
            return Ok(());
        };
        if !self.damaged_chains.is_empty() {
            r.unowned_sweep_skipped = true;
            return Ok(());
        }
        let freed = self.sweep_unowned_extents()?;
        if let Some(r) = self.data.recovery.as_mut() {
            r.unowned_extents_freed = freed;
        }
        Ok(())
    }

    /// The page's current content, unverified (DBCC PAGE): the buffer pool's copy when
    /// it is cached (so a dirty page shows its change), else the file's bytes. The flag
    /// says whether the page was a dirty buffer.
    pub fn read_page_current(
        &self,
        pid: PageId,
    ) -> Result<(extentdb_format::Page, bool), StorageError> {
        if let Some(c) = self.data.pool.cached(pid) {
            return Ok(c);
        }
        let file = self
            .data_files
            .get(&pid.file.0)
            .ok_or_else(|| StorageError::FileNotFound(pid.file.0.to_string()))?;
        Ok((file.read_page_raw(pid.page)?, false))
    }

    /// Marks the database as needing a reopen (recovery) before further changes.
    /// A session panicked while it held or shared the database (`SharedDatabase`), perhaps half
    /// way through a change: the database refuses further changes until it is reopened, as
    /// it does after a failed write, and recovery settles what was done.
    pub fn poison_after_panic(&self) {
        self.poison();
    }

    pub(crate) fn poison(&self) {
        self.poisoned
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The log writer, for flushing a commit outside the database's lock.
    pub fn wal(&self) -> Option<Arc<LogWriter>> {
        self.wal.clone()
    }

    /// (total log bytes, bytes still needed) for DBCC SQLPERF(LOGSPACE) and the log views.
    pub fn log_space(&self) -> (u64, u64) {
        let used = self.wal.as_ref().map(|w| w.used_bytes()).unwrap_or(0);
        (self.log_bytes(), used)
    }

    /// (log flushes, flush waits) since the database was opened: syncs of the log by
    /// `LogWriter::flush`, and callers (commits, mostly) that waited for one. SQL Server's
    /// Databases counters "Log Flushes/sec" and "Log Flush Waits/sec", cumulative.
    pub fn log_flush_counts(&self) -> (u64, u64) {
        self.wal
            .as_ref()
            .map_or((0, 0), |w| (w.syncs(), w.flush_waits()))
    }

    /// True once a failed write left memory and disk possibly apart (see `check_writable`).
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(std::sync::atomic::Ordering::Relaxed)
            || self.wal.as_ref().is_some_and(|w| w.has_failed())
    }

    /// Refuses changes once a failed write left memory and disk possibly apart.
    pub(crate) fn check_writable(&self) -> Result<(), StorageError> {
        if self.is_poisoned() {
            return Err(StorageError::NeedsReopen(self.name.clone()));
        }
        Ok(())
    }

    /// Writes the catalog copy-on-write and publishes it through both boot pages. A failure
    /// may come after the first boot page made the change durable, so any failure poisons
    /// the database: its outcome is settled only by reopening.
    pub fn save_catalog(&mut self) -> Result<(), StorageError> {
        // The catalog in memory changed before this save; whatever it comes to, it is a
        // new state (failed saves put the old one back, a new state again).
        self.catalog_changed();
        self.check_writable()?;
        crate::statistics::reconcile(&mut self.catalog);
        // Before anything is written, so a refusal leaves the database writable.
        self.catalog
            .check_lengths()
            .map_err(StorageError::TooLong)?;
        let result = self.save_catalog_inner();
        if result.is_err() {
            self.poison();
        }
        result
    }

    fn save_catalog_inner(&mut self) -> Result<(), StorageError> {
        self.catalog
            .check_invariants()
            .map_err(|e| StorageError::Instance(PathBuf::new(), e))?;
        let blob = self.catalog.encode();
        // An unchanged catalog (a checkpoint's save, a rename aside) stays where it is: only
        // the boot page is written. Nothing is logged then, so a checkpoint needs no log
        // space, and RESTORE LOG has no move to follow.
        let unchanged = !self.catalog_chain.is_empty()
            && self.boot.catalog_bytes as usize == blob.len()
            && self.boot.catalog_crc == crc32c::crc32c(&blob);
        if unchanged {
            let mut boot = self.boot.clone();
            boot.generation += 1;
            boot.name = self.name.clone();
            write_boot_pages(self.primary(), &boot)?;
            self.boot = boot;
            return Ok(());
        }
        // Reuse the previous chain's pages (still marked allocated): saves ping-pong between
        // two page sets and change no PFS byte in the steady state.
        let needed = catalog::pages_needed(blob.len());
        let mut pages: Vec<PageId> = self
            .spare_catalog_pages
            .iter()
            .take(needed)
            .copied()
            .collect();
        if pages.len() < needed {
            pages.extend(self.allocate_system_pages(needed - pages.len(), pfs::ALLOCATED)?);
        }
        let primary = self.primary();
        for (i, mut p) in catalog::to_pages(&blob, &pages).into_iter().enumerate() {
            primary.write_page_unlogged(pages[i].page, &mut p)?;
        }
        primary.sync()?;
        let mut boot = self.boot.clone();
        boot.generation += 1;
        boot.name = self.name.clone();
        boot.catalog_first_page = pages[0];
        boot.catalog_bytes = blob.len() as u32;
        boot.catalog_crc = crc32c::crc32c(&blob);
        write_boot_pages(primary, &boot)?;
        self.boot = boot;
        let reused = self
            .spare_catalog_pages
            .iter()
            .filter(|p| pages.contains(p))
            .count();
        let mut spare: Vec<PageId> = self
            .spare_catalog_pages
            .split_off(reused.min(self.spare_catalog_pages.len()));
        spare.retain(|p| !pages.contains(p));
        let old = std::mem::replace(&mut self.catalog_chain, pages);
        spare.extend(old);
        // Keep at most a chain's worth of spares; free the rest.
        let keep = self.catalog_chain.len();
        for page in spare.split_off(keep.min(spare.len())) {
            self.primary().set_pfs(page.page, 0)?;
        }
        self.spare_catalog_pages = spare;
        // A save moves the catalog to other pages even when it is unchanged (a checkpoint's):
        // RESTORE LOG must follow it there, since the pages it left may be reused.
        let now = (self.boot.catalog_crc, self.boot.catalog_first_page);
        if now == self.logged_catalog {
            return Ok(());
        }
        match self.log_catalog(&blob) {
            Ok(()) => {
                self.logged_catalog = now;
                Ok(())
            }
            // The change is durable but the log had no room to say so: a log backup would
            // miss it, so the log chain ends here (BACKUP LOG needs a full backup again,
            // Msg 4214), and the change stands.
            Err(StorageError::LogFull(_)) => {
                self.boot.log_backup_lsn = Lsn::ZERO;
                let mut boot = self.boot.clone();
                boot.generation += 1;
                write_boot_pages(self.primary(), &boot)?;
                self.boot = boot;
                self.logged_catalog = now;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Writes the boot page (both copies, one after the other, each synced) as it is in
    /// memory, with the next generation: for RESTORE LOG's roll forward, which has no log
    /// writer and must not allocate catalog pages of its own.
    pub(crate) fn write_boot_unlogged(&mut self) -> Result<(), StorageError> {
        self.boot.generation += 1;
        write_boot_pages(self.primary(), &self.boot)
    }

    /// Logs the catalog just saved, in pieces (`LogRecordBody::CatalogImage`), and makes
    /// them durable: a log backup then holds every catalog change in its place among the
    /// changes to pages, however the database stops afterwards.
    fn log_catalog(&self, blob: &[u8]) -> Result<(), StorageError> {
        /// Bytes of the blob per record, well inside a log block.
        const PIECE: usize = 40 * 1024;
        let Some(wal) = &self.wal else {
            return Ok(());
        };
        let mut offset = 0usize;
        loop {
            let end = (offset + PIECE).min(blob.len());
            let record = extentdb_format::log_record::LogRecordBody::CatalogImage {
                pages: self.catalog_chain.clone(),
                total: blob.len() as u32,
                offset: offset as u32,
                bytes: blob[offset..end].to_vec(),
            };
            let lsn = wal.append(&extentdb_format::log_record::compact(record.encode()))?;
            offset = end;
            if offset >= blob.len() {
                return wal.flush(lsn);
            }
        }
    }

    /// Finds `n` pages not in use inside the catalog's extents, adding extents as needed,
    /// and marks them allocated with PFS byte `pfs_value` (catalog pages and IAM pages live
    /// there: extentdb allocates no mixed extents).
    pub(crate) fn allocate_system_pages(
        &mut self,
        n: usize,
        pfs_value: u8,
    ) -> Result<Vec<PageId>, StorageError> {
        let iam_at = PageId {
            file: FileId::PRIMARY,
            page: CATALOG_IAM_PAGE,
        };
        let mut found = Vec::new();
        loop {
            let primary = self.primary();
            for extent in self.iam_page_extents(iam_at)? {
                for page in extent.first_page().0..extent.first_page().0 + PAGES_PER_EXTENT {
                    if found.len() < n && primary.pfs(PageNo(page))? & pfs::ALLOCATED == 0 {
                        found.push(PageId {
                            file: FileId::PRIMARY,
                            page: PageNo(page),
                        });
                    }
                }
            }
            if found.len() >= n {
                break;
            }
            found.clear();
            // The catalog IAM page maps the first GAM interval of file 1 only.
            let extent = primary
                .find_free_extent()?
                .filter(|e| e.0 < extentdb_format::GAM_INTERVAL_EXTENTS);
            if let Some(e) = extent {
                primary.claim_extent(e)?;
                self.set_iam_bit(iam_at, e, true)?;
            } else {
                let size_pages = primary.size_pages as u64;
                if !self.grow_primary_for_system_pages()? {
                    return Err(StorageError::TooSmall {
                        name: self.catalog.files[0].name.clone(),
                        size_kb: size_pages * 8,
                        min_kb: (size_pages + 64) * 8,
                    });
                }
            }
        }
        for p in &found {
            // Written without the pool: no stale pool page may overwrite it (allocation.rs
            // invariant 6).
            assert!(
                !self.data.pool.contains(*p),
                "system page {p} handed out while the buffer pool caches it"
            );
            self.primary().set_pfs(p.page, pfs_value)?;
        }
        Ok(found)
    }

    /// Grows file 1 by its FILEGROWTH when system pages (catalog and IAM pages, which live in
    /// its first GAM interval) find no room in it: a filegroup grows only once every file is
    /// full, so file 1 can fill while others still have room, and then a unit's first
    /// extent in another file would find no place for its IAM page. False when file 1 may
    /// not grow (FILEGROWTH 0, MAXSIZE, or already past its first interval), or when this
    /// is the growth's own catalog save (it finds room in the new space).
    fn grow_primary_for_system_pages(&mut self) -> Result<bool, StorageError> {
        let entry = self.catalog.files[0].clone();
        debug_assert_eq!(entry.file_id, 1);
        let to = crate::log_growth::growth_target(&entry, PAGES_PER_EXTENT)
            .filter(|&to| to >= entry.size_pages + PAGES_PER_EXTENT);
        let (Some(to), false) = (to, self.growing_for_system_pages) else {
            return Ok(false);
        };
        if entry.size_pages / PAGES_PER_EXTENT >= extentdb_format::GAM_INTERVAL_EXTENTS {
            return Ok(false);
        }
        let env = self.data.growth.env.clone();
        let sink = crate::log_growth::EnvSink::new(&env);
        let started = std::time::Instant::now();
        self.growing_for_system_pages = true;
        let grown = self.grow_file_with(env.policy, &sink, 1, to);
        self.growing_for_system_pages = false;
        grown?;
        self.log_data_autogrow(&sink, &entry.name, started.elapsed(), "");
        Ok(true)
    }

    /// Frees system pages that a crash left allocated but that nothing uses: pages of no
    /// published catalog chain and IAM pages that no allocation unit's chain reaches.
    fn sweep_catalog_pages(&mut self) -> Result<(), StorageError> {
        let iam_at = PageId {
            file: FileId::PRIMARY,
            page: CATALOG_IAM_PAGE,
        };
        // The spare pages of a save made during this open (recovery's checkpoint) stay
        // marked: the next save reuses them without marking them again.
        let mut in_use: std::collections::HashSet<PageId> = self
            .catalog_chain
            .iter()
            .chain(&self.spare_catalog_pages)
            .copied()
            .collect();
        for au in self.catalog.allocation_units.clone() {
            let id = au.allocation_unit_id;
            match self
                .damaged_chains
                .iter()
                .find(|d| d.allocation_unit_id == id)
            {
                Some(d) => in_use.extend(d.readable.iter().chain([&d.page])),
                None => in_use.extend(self.iam_chain(id)?),
            }
        }
        // Past a damaged chain's bad page its IAM pages cannot be told from unlinked ones:
        // with any chain damaged, no IAM page is freed (allocation.rs invariant 8).
        let keep = if self.damaged_chains.is_empty() {
            0
        } else {
            pfs::IAM_PAGE
        };
        let primary = self.primary();
        for extent in self.iam_page_extents(iam_at)? {
            for page in extent.first_page().0..extent.first_page().0 + PAGES_PER_EXTENT {
                let pid = PageId {
                    file: FileId::PRIMARY,
                    page: PageNo(page),
                };
                let byte = primary.pfs(pid.page)?;
                if byte & pfs::ALLOCATED != 0 && byte & keep == 0 && !in_use.contains(&pid) {
                    primary.set_pfs(pid.page, 0)?;
                }
            }
        }
        primary.sync()
    }

    pub fn file_by_name(&self, name: &str) -> Option<&FileEntry> {
        self.catalog
            .files
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
    }

    pub fn filegroup_by_name(&self, name: &str) -> Option<&FilegroupEntry> {
        self.catalog
            .filegroups
            .iter()
            .find(|g| g.name.eq_ignore_ascii_case(name))
    }

    /// Adds files (ROWS to `filegroup`, or LOG). Validation of names and paths is the
    /// instance's; this creates, formats and publishes, or changes nothing.
    pub fn add_files(
        &mut self,
        ctx: &OpContext<'_>,
        files: &[NewFile],
    ) -> Result<(), StorageError> {
        self.check_writable()?;
        self.ensure_log_space()?;
        let mut added: Vec<(u16, NewFile, Arc<dyn DbFile>)> = Vec::new();
        let mut next_id = self
            .catalog
            .files
            .iter()
            .map(|f| f.file_id)
            .max()
            .unwrap_or(2)
            + 1;
        let result = (|| {
            for f in files {
                let data_space_id = match f.file_type {
                    FileType::Log => 0,
                    FileType::Rows => {
                        self.filegroup_by_name(&f.filegroup)
                            .ok_or_else(|| StorageError::FilegroupNotFound(f.filegroup.clone()))?
                            .data_space_id
                    }
                };
                let file = create_file(ctx, f)?;
                added.push((next_id, f.clone(), file.clone()));
                if f.file_type == FileType::Log {
                    let bytes = f.size_pages as u64 * PAGE_SIZE as u64;
                    let vlfs = log_file::vlf_count_for_growth(bytes, self.log_bytes());
                    log_file::format_new(
                        file.as_ref(),
                        self.boot.database_guid,
                        next_id,
                        f.size_pages,
                        vlfs,
                        false,
                    )?;
                } else {
                    let df = DataFile {
                        file_id: FileId(next_id),
                        file,
                        size_pages: f.size_pages,
                        wal: self.wal.clone(),
                        cache: Default::default(),
                        database_id: self.catalog.database_id,
                    };
                    df.write_file_header(self.boot.database_guid, now_us())?;
                    df.format_new_space(0)?;
                    df.sync()?;
                }
                self.catalog
                    .files
                    .push(entry_for(next_id, data_space_id, f));
                next_id += 1;
            }
            self.save_catalog()
        })();
        if let Err(e) = result {
            let ids: Vec<u16> = added.iter().map(|a| a.0).collect();
            self.catalog.files.retain(|f| !ids.contains(&f.file_id));
            self.catalog_changed();
            // Once poisoned, the durable catalog may list these files: keep them for reopening.
            if !self.is_poisoned() {
                for (_, f, _) in &added {
                    let _ = ctx.fs.remove(&f.physical_name);
                }
            }
            return Err(e);
        }
        for (id, f, file) in added {
            if f.file_type == FileType::Log {
                self.log_files.insert(id, file);
            } else {
                self.data_files.insert(
                    id,
                    DataFile {
                        file_id: FileId(id),
                        file: self.snapshots.wrap(id, file),
                        size_pages: f.size_pages,
                        wal: self.wal.clone(),
                        cache: Default::default(),
                        database_id: self.catalog.database_id,
                    },
                );
            }
        }
        // A file added to a filegroup recalculates its skip targets (seed 004).
        let mut groups: Vec<u16> = files
            .iter()
            .filter(|f| f.file_type == FileType::Rows)
            .filter_map(|f| {
                self.filegroup_by_name(&f.filegroup)
                    .map(|g| g.data_space_id)
            })
            .collect();
        groups.dedup();
        for ds in groups {
            // The files are added durably by now: a failure here must not read as "not
            // added", so the database waits for a reopen (which recalculates).
            if let Err(e) = self.recalculate_fill(ds) {
                self.poison();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Grows file `file_id` to `new_pages` through the one initialization mechanism. On
    /// failure the file is truncated back and the catalog is unchanged.
    pub fn grow_file(
        &mut self,
        ctx: &OpContext<'_>,
        file_id: u16,
        new_pages: u32,
    ) -> Result<(), StorageError> {
        self.grow_file_with(ctx.policy, ctx.log, file_id, new_pages)
    }

    /// `grow_file` with the initialization settings given directly (autogrowth has no
    /// statement context).
    pub(crate) fn grow_file_with(
        &mut self,
        policy: file_init::InitPolicy,
        log: &dyn InitLog,
        file_id: u16,
        new_pages: u32,
    ) -> Result<(), StorageError> {
        self.grow_file_inner(Some((policy, log)), file_id, new_pages)
    }

    /// Commits a data-file growth whose space a background thread already initialized
    /// (`proportional_fill`'s prepared growth): the growth without the initialization.
    pub(crate) fn grow_file_initialized(
        &mut self,
        file_id: u16,
        new_pages: u32,
    ) -> Result<(), StorageError> {
        self.grow_file_inner(None, file_id, new_pages)
    }

    fn grow_file_inner(
        &mut self,
        init: Option<(file_init::InitPolicy, &dyn InitLog)>,
        file_id: u16,
        new_pages: u32,
    ) -> Result<(), StorageError> {
        self.check_writable()?;
        self.ensure_log_space()?;
        let idx = self
            .catalog
            .files
            .iter()
            .position(|f| f.file_id == file_id)
            .expect("file exists");
        let entry = self.catalog.files[idx].clone();
        assert!(new_pages > entry.size_pages, "grow_file must grow");
        if entry.file_type == FileType::Log {
            self.discard_prepared_growth();
        } else {
            self.drop_prepared_data_growth(file_id);
        }
        let file = self.file_handle(file_id);
        let kind = if entry.file_type == FileType::Log {
            SpaceKind::Log
        } else {
            SpaceKind::Data
        };
        let old_pages = entry.size_pages;
        let result = (|| {
            if let Some((policy, log)) = init {
                file_init::initialize(file.as_ref(), kind, old_pages, new_pages, policy, log)
                    .map_err(|e| match e {
                        StorageError::Io(source) => StorageError::FileExpand {
                            path: entry.physical_name.clone(),
                            source,
                        },
                        other => other,
                    })?;
            }
            if let Some(df) = self.data_files.get_mut(&file_id) {
                df.size_pages = new_pages;
                df.format_new_space(old_pages)?;
                df.sync()?;
            } else {
                let (from, to) = (
                    old_pages as u64 * PAGE_SIZE as u64,
                    new_pages as u64 * PAGE_SIZE as u64,
                );
                let vlfs = log_file::vlf_count_for_growth(to - from, self.log_bytes());
                log_file::write_vlf_headers(
                    file.as_ref(),
                    file_id,
                    &log_file::layout(from, to, vlfs),
                    false,
                )?;
                file.sync_data()?;
            }
            self.catalog.files[idx].size_pages = new_pages;
            self.save_catalog()?;
            if entry.file_type == FileType::Log {
                self.attach_log_growth(file_id, old_pages, new_pages)?;
            }
            Ok(())
        })();
        if let Err(e) = &result {
            // A failure after the space was initialized may have reached the disk in part.
            if !matches!(e, StorageError::FileExpand { .. }) {
                self.poison();
            }
            self.catalog.files[idx].size_pages = old_pages;
            // Once poisoned, the durable catalog may record the larger size: cut nothing.
            if !self.is_poisoned() {
                if let Some(df) = self.data_files.get_mut(&file_id) {
                    df.size_pages = old_pages;
                    // Undo the GAM bits the growth set; pages beyond the old size are cut away.
                    let _ = df.clear_gam_beyond_size(old_pages);
                }
                let _ = file.set_len(old_pages as u64 * PAGE_SIZE as u64);
                let _ = file.sync_data();
            }
        }
        result
    }

    fn file_handle(&self, file_id: u16) -> Arc<dyn DbFile> {
        match self.data_files.get(&file_id) {
            Some(df) => df.file.clone(),
            None => self.log_files[&file_id].clone(),
        }
    }

    /// Changes a file's catalog properties (MAXSIZE, FILEGROWTH, NEWNAME) and saves.
    pub fn update_file_entry(
        &mut self,
        file_id: u16,
        change: impl FnOnce(&mut FileEntry),
    ) -> Result<(), StorageError> {
        self.check_writable()?;
        self.ensure_log_space()?;
        let before = self.catalog.clone();
        let entry = self
            .catalog
            .files
            .iter_mut()
            .find(|f| f.file_id == file_id)
            .expect("file exists");
        change(entry);
        if let Err(e) = self.save_catalog() {
            self.catalog = before;
            self.catalog_changed();
            return Err(e);
        }
        Ok(())
    }

    /// True if no extent of the data file is allocated (every usable extent GAM-free).
    pub fn is_file_empty(&self, file_id: u16) -> Result<bool, StorageError> {
        match self.data_files.get(&file_id) {
            Some(df) => Ok(df.free_extents()? == df.allocatable_extents()),
            // A secondary log file is empty until the log uses it (the log arrives later).
            None => Ok(true),
        }
    }

    /// Removes an empty secondary file: catalog first, then the file itself.
    pub fn remove_file(&mut self, fs: &dyn FileSystem, name: &str) -> Result<(), StorageError> {
        self.check_writable()?;
        self.ensure_log_space()?;
        let entry = self
            .file_by_name(name)
            .ok_or_else(|| StorageError::FileNotFound(name.to_string()))?
            .clone();
        if entry.file_id <= 2 {
            return Err(StorageError::CannotRemovePrimary);
        }
        if !self.is_file_empty(entry.file_id)? {
            return Err(StorageError::FileNotEmpty(entry.name));
        }
        // Pages an EMPTYFILE left behind may still be cached, and the log may describe
        // them: a checkpoint writes them, and redo then starts past every such record.
        self.drop_prepared_data_growth(entry.file_id);
        self.checkpoint()?;
        self.data.pool.forget_file(entry.file_id);
        self.data.emptying.remove(&entry.file_id);
        // Invariant 4: the chains without the file's IAM pages, published with the catalog.
        let relinked = match entry.file_type {
            FileType::Rows => self.copy_chains_without(entry.file_id)?,
            FileType::Log => Vec::new(),
        };
        let before = self.catalog.clone();
        self.catalog.files.retain(|f| f.file_id != entry.file_id);
        for r in &relinked {
            let unit = self
                .catalog
                .allocation_units
                .iter_mut()
                .find(|a| a.allocation_unit_id == r.au)
                .expect("unit exists");
            unit.first_iam_page = r.new.first().copied().unwrap_or(PageId::NULL);
        }
        if let Err(e) = self.save_catalog() {
            self.catalog = before;
            self.catalog_changed();
            // The copies stay marked: a save that failed after its boot pages may have
            // published them. The sweep at open frees whichever chain nothing reaches.
            return Err(e);
        }
        self.data_files.remove(&entry.file_id);
        self.log_files.remove(&entry.file_id);
        // The old chains' pages, unreachable now (a crash first: the sweep at open).
        if !relinked.is_empty() {
            let primary = self.primary();
            for p in relinked.iter().flat_map(|r| &r.old) {
                primary.set_pfs(p.page, 0)?;
            }
            primary.sync()?;
        }
        self.assert_chains_name_catalog_files()?;
        fs.remove(Path::new(&entry.physical_name))?;
        sync_parent(fs, Path::new(&entry.physical_name))?;
        if entry.file_type == FileType::Rows {
            self.recalculate_fill(entry.data_space_id)?;
        }
        Ok(())
    }

    /// Writes a copy of every allocation unit's IAM chain that holds a page mapping file
    /// `file_id` (empty: its IAM bits were cleared before its extents were freed), without
    /// those pages: the pages that stay are copied in order into new system pages with new
    /// links and sequence numbers 0, 1, ..., made durable, and nothing links to them yet
    /// (REMOVE FILE's catalog save does; a crash first leaves them to the sweep at open).
    fn copy_chains_without(&mut self, file_id: u16) -> Result<Vec<Relinked>, StorageError> {
        // (unit, its chain now, the pages that stay)
        let mut plans: Vec<(u64, Vec<PageId>, Vec<PageId>)> = Vec::new();
        for au in self.catalog.allocation_units.clone() {
            if au.allocation_unit_id == catalog::CATALOG_ALLOCATION_UNIT {
                continue;
            }
            let chain = self.iam_chain(au.allocation_unit_id)?;
            let mut keep = Vec::new();
            for &at in &chain {
                let p = self.primary().read_page(at.page)?;
                if iam::start_page(&p).file.0 == file_id {
                    assert!(
                        self.iam_page_extents(at)?.is_empty(),
                        "IAM page {at} of an empty file {file_id} owns extents"
                    );
                } else {
                    keep.push(at);
                }
            }
            if keep.len() < chain.len() {
                plans.push((au.allocation_unit_id, chain, keep));
            }
        }
        let n: usize = plans.iter().map(|(_, _, keep)| keep.len()).sum();
        let fresh = if n == 0 {
            Vec::new()
        } else {
            self.allocate_system_pages(n, pfs::ALLOCATED | pfs::IAM_PAGE)?
        };
        let written = (|| {
            let primary = self.primary();
            let mut fresh = fresh.iter().copied();
            let mut out = Vec::new();
            for (au, old, keep) in plans {
                let new: Vec<PageId> = fresh.by_ref().take(keep.len()).collect();
                for (i, at) in keep.iter().enumerate() {
                    let from = primary.read_page(at.page)?;
                    let mut page = iam::new_iam_page(new[i], au, i as u32, iam::start_page(&from));
                    let mut h = page.header()?;
                    h.prev_page = if i == 0 { PageId::NULL } else { new[i - 1] };
                    h.next_page = new.get(i + 1).copied().unwrap_or(PageId::NULL);
                    page.set_header(&h);
                    let mut bit = 0;
                    while let Some(b) =
                        bitmap::next_set(&from, bit, extentdb_format::GAM_INTERVAL_EXTENTS)
                    {
                        bitmap::set_bit(&mut page, b, true);
                        bit = b + 1;
                    }
                    primary.write_page(new[i].page, &mut page)?;
                }
                out.push(Relinked { au, old, new });
            }
            primary.sync()?;
            Ok(out)
        })();
        if written.is_err() {
            // Best effort: the sweep at open frees what this leaves marked.
            for p in &fresh {
                let _ = self.primary().set_pfs(p.page, 0);
            }
        }
        written
    }

    /// Invariant 4: every IAM page of every allocation unit's chain maps a data file the
    /// catalog has.
    fn assert_chains_name_catalog_files(&self) -> Result<(), StorageError> {
        for au in &self.catalog.allocation_units {
            for at in self.iam_chain(au.allocation_unit_id)? {
                let file = iam::start_page(&self.primary().read_page(at.page)?).file.0;
                assert!(
                    self.catalog.files.iter().any(|f| f.file_id == file),
                    "IAM page {at} of allocation unit {} maps file {file}, not in the catalog",
                    au.allocation_unit_id
                );
            }
        }
        Ok(())
    }

    /// Applies a catalog-only change (filegroups, recovery model) and saves, or changes
    /// nothing if the change or the save fails.
    /// The number of the catalog's present state: equal numbers, read from any of the
    /// process's databases, mean the same catalog unchanged (the SQL layer's sessions keep
    /// the tables they resolved under it).
    pub fn catalog_version(&self) -> u64 {
        self.catalog_version
    }

    /// Gives the catalog's new state a number no other state had.
    pub(crate) fn catalog_changed(&mut self) {
        self.catalog_version = fresh_catalog_version();
    }

    pub fn change_catalog(
        &mut self,
        change: impl FnOnce(&mut Catalog) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        self.check_writable()?;
        self.ensure_log_space()?;
        let before = self.catalog.clone();
        let result = change(&mut self.catalog).and_then(|_| self.save_catalog());
        if result.is_err() {
            self.catalog = before;
            self.catalog_changed();
        }
        result
    }

    /// Renames the database (the boot page carries the name).
    pub fn rename(&mut self, new_name: &str) -> Result<(), StorageError> {
        self.check_writable()?;
        self.ensure_log_space()?;
        let old = std::mem::replace(&mut self.name, new_name.to_string());
        if let Err(e) = self.save_catalog() {
            self.name = old;
            return Err(e);
        }
        Ok(())
    }

    /// Paths of all files, for DROP DATABASE.
    pub fn physical_names(&self) -> Vec<PathBuf> {
        self.catalog
            .files
            .iter()
            .map(|f| PathBuf::from(&f.physical_name))
            .collect()
    }
}

impl DataFile {
    /// Clears GAM bits of extents in `[old_pages, new_pages)` after a failed growth so the
    /// maps never offer space the file no longer has.
    pub fn clear_gam_beyond_size(&self, old_pages: u32) -> Result<(), StorageError> {
        let size = self.size_pages;
        // Only GAM pages inside the old size survive the truncation; clear bits past it.
        let usable = size / PAGES_PER_EXTENT;
        let interval = usable / extentdb_format::GAM_INTERVAL_EXTENTS;
        let gam_no = layout::bitmap_page(layout::BitmapKind::Gam, interval);
        if gam_no.0 >= old_pages {
            return Ok(());
        }
        let mut gam = self.read_page(gam_no)?;
        for bit in
            (usable % extentdb_format::GAM_INTERVAL_EXTENTS)..extentdb_format::GAM_INTERVAL_EXTENTS
        {
            extentdb_format::bitmap::set_bit(&mut gam, bit, false);
        }
        self.write_page(gam_no, &mut gam)?;
        self.sync()
    }
}

/// An allocation unit's IAM chain copied without a removed file's IAM pages: the pages of
/// the chain before, and the copies that replace it once the catalog names the first.
struct Relinked {
    au: u64,
    old: Vec<PageId>,
    new: Vec<PageId>,
}

/// Writes both boot page copies, one after the other, each synced (boot.rs invariant 1).
fn write_boot_pages(primary: &DataFile, boot: &BootPage) -> Result<(), StorageError> {
    for at in [BOOT_PAGE, BOOT_MIRROR_PAGE] {
        let mut p = boot.encode(PageId {
            file: FileId::PRIMARY,
            page: at,
        })?;
        primary.write_page_unlogged(at, &mut p)?;
        primary.sync()?;
    }
    Ok(())
}

/// Makes the directory entry of `path` (created or removed) durable.
pub fn sync_parent(fs: &dyn FileSystem, path: &Path) -> Result<(), StorageError> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => Ok(fs.sync_dir(dir)?),
        _ => Ok(()),
    }
}

fn entry_for(file_id: u16, data_space_id: u16, f: &NewFile) -> FileEntry {
    FileEntry {
        file_id,
        file_type: f.file_type,
        data_space_id,
        name: f.name.clone(),
        physical_name: f.physical_name.display().to_string(),
        size_pages: f.size_pages,
        max_size_pages: f.max_size_pages,
        growth: f.growth,
        is_percent_growth: f.is_percent_growth,
    }
}

/// The catalog of a new database: PRIMARY (1) and the named filegroups (2, 3, ...); file
/// ids 1 for the first ROWS file, 2 for the first LOG file, then 3, 4, ... in order.
fn initial_catalog(spec: &NewDatabase) -> Catalog {
    let any_default = spec.filegroups.iter().any(|g| g.1);
    let mut filegroups = vec![FilegroupEntry {
        data_space_id: 1,
        name: "PRIMARY".into(),
        is_default: !any_default,
        is_autogrow_all_files: false,
        is_read_only: false,
    }];
    for (i, (name, is_default)) in spec.filegroups.iter().enumerate() {
        filegroups.push(FilegroupEntry {
            data_space_id: 2 + i as u16,
            name: name.clone(),
            is_default: *is_default,
            is_autogrow_all_files: false,
            is_read_only: false,
        });
    }
    let primary = spec
        .files
        .iter()
        .position(|f| f.file_type == FileType::Rows)
        .expect("a primary file");
    let log = spec
        .files
        .iter()
        .position(|f| f.file_type == FileType::Log)
        .expect("a log file");
    let mut order = vec![(1u16, primary), (2u16, log)];
    let mut next = 3;
    for i in 0..spec.files.len() {
        if i != primary && i != log {
            order.push((next, i));
            next += 1;
        }
    }
    let files = order
        .into_iter()
        .map(|(id, i)| {
            let f = &spec.files[i];
            let ds = match f.file_type {
                FileType::Log => 0,
                FileType::Rows => filegroups
                    .iter()
                    .find(|g| g.name.eq_ignore_ascii_case(&f.filegroup))
                    .map(|g| g.data_space_id)
                    .unwrap_or(1),
            };
            entry_for(id, ds, f)
        })
        .collect();
    Catalog {
        database_id: spec.database_id,
        recovery_model: spec.recovery_model,
        filegroups,
        files,
        allocation_units: Vec::new(),
        next_allocation_unit_id: 72_057_594_037_927_936,
        databases: Vec::new(),
        next_object_id: catalog::FIRST_USER_OBJECT_ID,
        tables: Vec::new(),
        security: Default::default(),
        statistics: Vec::new(),
        modules: Vec::new(),
    }
}

/// A database's files as a stopped instance left them, opened for reading only: the boot
/// page, the catalog and the data files (`extentdb inspect`). Nothing is recovered or
/// written.
pub struct OfflineDatabase {
    pub boot: BootPage,
    pub catalog: Catalog,
    pub data_files: BTreeMap<u16, DataFile>,
}

/// Opens a database's files for reading (see [`OfflineDatabase`]).
pub fn open_offline(
    fs: &dyn FileSystem,
    primary_path: &Path,
) -> Result<OfflineDatabase, StorageError> {
    let files = open_files(fs, primary_path, true, None, None)?;
    Ok(OfflineDatabase {
        boot: files.boot,
        catalog: files.catalog,
        data_files: files.data_files,
    })
}

/// A database's files as its catalog lists them.
struct OpenedFiles {
    boot: BootPage,
    catalog: Catalog,
    chain: Vec<PageId>,
    data_files: BTreeMap<u16, DataFile>,
    log_files: BTreeMap<u16, Arc<dyn DbFile>>,
}

/// Opens the primary file, reads the boot page and catalog, and opens the other files.
/// `offline` (reading a stopped instance's files, `extentdb inspect`): file headers are
/// not checked, log files are not opened, and a data file's size is what the file holds.
fn open_files(
    fs: &dyn FileSystem,
    primary_path: &Path,
    offline: bool,
    paths: Option<&BTreeMap<u16, PathBuf>>,
    catalog: Option<Catalog>,
) -> Result<OpenedFiles, StorageError> {
    let file = fs.open(primary_path)?;
    let size_pages = (file.len()? / PAGE_SIZE as u64) as u32;
    let primary = DataFile {
        file_id: FileId::PRIMARY,
        file,
        size_pages,
        wal: None,
        cache: Default::default(),
        database_id: 0,
    };
    let boot = read_boot(&primary)?;
    let (catalog, chain) = match catalog {
        Some(c) => (c, Vec::new()),
        None => read_catalog(&primary, &boot)?,
    };
    let mut data_files = BTreeMap::new();
    let mut log_files = BTreeMap::new();
    for entry in &catalog.files {
        if offline && entry.file_type == FileType::Log {
            continue;
        }
        let file = if entry.file_id == 1 {
            primary.file.clone()
        } else {
            match paths.and_then(|p| p.get(&entry.file_id)) {
                Some(p) => fs.open(p)?,
                None => fs.open(Path::new(&entry.physical_name))?,
            }
        };
        if !offline {
            check_file_header(file.as_ref(), entry, &boot)?;
        }
        if entry.file_type == FileType::Log {
            log_files.insert(entry.file_id, file);
            continue;
        }
        let size_pages = if offline {
            entry
                .size_pages
                .min((file.len()? / PAGE_SIZE as u64) as u32)
        } else {
            entry.size_pages
        };
        data_files.insert(
            entry.file_id,
            DataFile {
                file_id: FileId(entry.file_id),
                file,
                size_pages,
                wal: None,
                cache: Default::default(),
                database_id: 0,
            },
        );
    }
    Ok(OpenedFiles {
        boot,
        catalog,
        chain,
        data_files,
        log_files,
    })
}

/// Cuts every data and log file longer than its catalog size back to that size, before
/// recovery reads anything. Invariant: space past a file's catalog size was never
/// published (a growth commits by saving the catalog; until then a crash "changes
/// nothing", proportional_fill.rs and log_growth.rs): no page the log or the catalog
/// refers to lies there, so cutting it loses nothing, and afterwards every file's length
/// is its catalog size, as if the interrupted growth had failed cleanly.
fn trim_to_catalog(files: &OpenedFiles) -> Result<Vec<crate::recovery::TrimmedFile>, StorageError> {
    let mut trimmed = Vec::new();
    for entry in &files.catalog.files {
        let file = match files.data_files.get(&entry.file_id) {
            Some(df) => df.file.clone(),
            None => files.log_files[&entry.file_id].clone(),
        };
        let want = entry.size_pages as u64 * PAGE_SIZE as u64;
        let len = file.len()?;
        if len <= want {
            continue;
        }
        file.set_len(want)?;
        file.sync_data()?;
        debug_assert_eq!(file.len()?, want);
        trimmed.push(crate::recovery::TrimmedFile {
            name: entry.name.clone(),
            past_pages: (len - want).div_ceil(PAGE_SIZE as u64),
            size_pages: entry.size_pages,
        });
    }
    Ok(trimmed)
}

/// Reads both boot pages and returns the valid one with the higher generation.
fn read_boot(primary: &DataFile) -> Result<BootPage, StorageError> {
    let mut best: Option<BootPage> = None;
    let mut last_err = None;
    for at in [BOOT_PAGE, BOOT_MIRROR_PAGE] {
        let pid = PageId {
            file: FileId::PRIMARY,
            page: at,
        };
        match primary
            .read_page(at)
            .and_then(|p| Ok(BootPage::decode(&p, pid)?))
        {
            Ok(b) if best.as_ref().is_none_or(|x| b.generation > x.generation) => best = Some(b),
            Ok(_) => {}
            Err(e) => last_err = Some(e),
        }
    }
    best.ok_or_else(|| {
        last_err.unwrap_or_else(|| StorageError::Instance(PathBuf::new(), "no boot page".into()))
    })
}

/// Reads the catalog chain the boot page names and checks its length and CRC.
fn read_catalog(
    primary: &DataFile,
    boot: &BootPage,
) -> Result<(Catalog, Vec<PageId>), StorageError> {
    let mut blob = Vec::with_capacity(boot.catalog_bytes as usize);
    let mut chain = Vec::new();
    let mut at = boot.catalog_first_page;
    while !at.is_null() {
        if chain.len() > 1 + boot.catalog_bytes as usize / catalog::CATALOG_PAGE_PAYLOAD
            || at.file != FileId::PRIMARY
        {
            return Err(
                extentdb_format::corrupt(at, "catalog chain is longer than the catalog").into(),
            );
        }
        let p = primary.read_page(at.page)?;
        let (payload, next) = catalog::page_payload(&p, at)?;
        blob.extend_from_slice(payload);
        chain.push(at);
        at = next;
    }
    if blob.len() != boot.catalog_bytes as usize || crc32c::crc32c(&blob) != boot.catalog_crc {
        return Err(extentdb_format::corrupt(
            boot.catalog_first_page,
            "catalog length or CRC does not match the boot page",
        )
        .into());
    }
    Ok((Catalog::decode(&blob, boot.catalog_first_page)?, chain))
}

/// Verifies that a file belongs to this database and is the file the catalog says.
fn check_file_header(
    file: &dyn DbFile,
    entry: &FileEntry,
    boot: &BootPage,
) -> Result<(), StorageError> {
    let mut buf = vec![0u8; PAGE_SIZE];
    file.read_at(&mut buf, 0)?;
    let at = PageId::new(entry.file_id, 0);
    let page = extentdb_format::Page::from_bytes(&buf)?;
    page.verify(at)?;
    let h = FileHeader::decode(&page, at)?;
    if h.database_guid != boot.database_guid || h.file_type != entry.file_type {
        return Err(extentdb_format::corrupt(
            at,
            format!(
                "file {} belongs to another database or has the wrong type",
                entry.physical_name
            ),
        )
        .into());
    }
    Ok(())
}
