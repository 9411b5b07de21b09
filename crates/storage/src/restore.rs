//! RESTORE DATABASE from a full backup set (see `backup` and FORMAT.md, "Backup file"),
//! and the restore sequence that follows one restored WITH NORECOVERY: a differential set,
//! RESTORE LOG (with STOPAT) and RESTORE DATABASE ... WITH RECOVERY (`restore_onto`,
//! docs/BACKUP.md "Restore sequences").
//!
//! 1. The set is found and every target path decided: WITH MOVE's, else the file's
//!    original path; each must lie in a data root and belong to no other database.
//! 2. The files are created under staging names (`<path>.xdbrestore`) at the source's
//!    sizes: data files through the one initialization mechanism (instant with IFI: the
//!    space is never written, and reads as zeros), log files zeroed. Each log file gets its
//!    header page and every VLF header of the source's layout, so that LSNs, which are
//!    positions in the log, mean the same in the copy.
//! 3. The set's blocks are read in order, each checked against its CRC (and with CHECKSUM
//!    each page against its own), and written at their pages or log offsets. Only the
//!    allocated extents and the log are written; the rest of a data file stays as the
//!    initialization left it.
//! 4. Once every file is synced, a database being replaced is dropped, the staged files
//!    take their final names, and the database is opened: recovery redoes the copied log
//!    (every page is already current) and rolls back the transactions that were open at
//!    the backup's instant. It is then registered in master under its new name and id.
//!
//! Invariants:
//! 1. Nothing becomes visible before step 4: a damaged or truncated backup, a cancel or an
//!    I/O error leaves no database and no file behind (the staged files are removed), and
//!    a database being replaced is untouched.
//! 2. A restored database is online only after recovery succeeded; if it fails, its files
//!    are removed and the error returned.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use extentdb_format::backup::{
    payload_crc, BackupType, BlockHeader, BlockKind, SetHeader, BLOCK_HEADER_SIZE,
};
use extentdb_format::boot::BootPage;
use extentdb_format::catalog::{self, Catalog, DatabaseEntry};
use extentdb_format::file_header::FileType;
use extentdb_format::layout::{BOOT_MIRROR_PAGE, BOOT_PAGE};
use extentdb_format::{FileId, Lsn, Page, PageId, PAGE_SIZE};
use extentdb_io::DbFile;

use crate::backup::{read_backup_sets, SetInfo};
use crate::data_file::DataFile;
use crate::database::{sync_parent, OpContext};
use crate::file_init::{self, SpaceKind};
use crate::instance::{Instance, FIRST_USER_ID, MASTER_ID, TEMPDB_ID};
use crate::{Database, StorageError};

/// What RESTORE DATABASE was asked to do.
pub struct RestoreRequest<'a> {
    pub path: &'a Path,
    /// The set (WITH FILE = n).
    pub position: u32,
    /// The name the restored database takes.
    pub database: String,
    /// WITH MOVE: logical file name (case-insensitive) -> physical path.
    pub moves: Vec<(String, String)>,
    pub replace: bool,
    pub checksum: bool,
    /// RECOVERY (the default): the database comes online; NORECOVERY: it stays RESTORING
    /// for a differential or log backup to follow.
    pub recovery: bool,
    /// RESTORE LOG ... WITH STOPAT: µs since the Unix epoch; transactions that committed
    /// later are not restored.
    pub stop_at_us: Option<i64>,
    /// Called with (bytes done, bytes in all).
    pub progress: Option<&'a (dyn Fn(u64, u64) + Sync)>,
    pub cancel: Option<&'a AtomicBool>,
}

/// What a restore did.
#[derive(Debug, Clone)]
pub struct RestoreOutcome {
    pub database_id: u16,
    pub position: u32,
    /// Pages written per file: (logical name, pages).
    pub files: Vec<(String, u64)>,
    pub bytes: u64,
    pub elapsed: Duration,
    /// The database is RESTORING afterwards (NORECOVERY, or a STOPAT later than the log
    /// backup holds: Msg 4322).
    pub restoring: bool,
    /// A STOPAT later than the log backup holds: the database stays RESTORING.
    pub stop_at_beyond: bool,
    /// msdb.dbo.restorehistory.restore_type: D database, I differential, L log.
    pub restore_type: char,
}

/// Removes files on drop unless disarmed (invariants 1 and 2).
struct Cleanup<'a> {
    fs: &'a dyn extentdb_io::FileSystem,
    paths: Vec<PathBuf>,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        for p in &self.paths {
            let _ = self.fs.remove(p);
        }
    }
}

fn staged(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".xdbrestore");
    PathBuf::from(s)
}

impl Instance {
    /// RESTORE DATABASE: see the module docs.
    pub fn restore_database(
        &self,
        ctx: &OpContext<'_>,
        req: &RestoreRequest<'_>,
    ) -> Result<RestoreOutcome, StorageError> {
        let started = Instant::now();
        let (set, media_guid) = find_set(req)?;
        let h = &set.header;
        match h.backup_type {
            BackupType::Database => {}
            BackupType::Differential => return self.restore_onto(ctx, req, &set),
            BackupType::Log => {
                return Err(StorageError::RestoreKind {
                    position: req.position,
                    path: req.path.display().to_string(),
                    created_by: "BACKUP LOG",
                })
            }
        }
        // A full restore starts a sequence over: a RESTORING database of that name is
        // replaced without REPLACE, as SQL Server allows.
        let restoring = self.restoring_entry(&req.database);

        // Step 1: the database being replaced, and the target paths.
        let existing = self.database_by_name(&req.database);
        if let Some((id, db)) = &existing {
            // master needs a single-user instance (Msg 3108); tempdb is never restored
            // (3147, refused above); model and msdb may be replaced, keeping their ids.
            if *id == MASTER_ID || *id == TEMPDB_ID || (*id < FIRST_USER_ID && !req.recovery) {
                return Err(StorageError::RestoreSystemDatabase(req.database.clone()));
            }
            if !req.replace {
                let guid = db.lock().unwrap().boot.database_guid;
                return Err(StorageError::RestoreOverExisting {
                    database: req.database.clone(),
                    same: guid == h.database_guid,
                });
            }
        }
        if restoring.is_none() && self.suspect_by_name(&req.database).is_some() {
            return Err(StorageError::DatabaseExists(req.database.clone()));
        }
        for (logical, _) in &req.moves {
            if !h.files.iter().any(|f| f.name.eq_ignore_ascii_case(logical)) {
                return Err(StorageError::RestoreLogicalName {
                    logical: logical.clone(),
                    database: h.database_name.clone(),
                });
            }
        }
        let mut replaced: Vec<PathBuf> = existing
            .as_ref()
            .map(|(_, d)| d.lock().unwrap().physical_names())
            .unwrap_or_default();
        if let Some(e) = &restoring {
            replaced.extend(e.restoring.iter().flatten().map(|(_, p)| PathBuf::from(p)));
        }
        let mut targets: BTreeMap<u16, PathBuf> = BTreeMap::new();
        for f in &h.files {
            let wanted = req
                .moves
                .iter()
                .find(|(l, _)| l.eq_ignore_ascii_case(&f.name))
                .map_or(f.physical_name.as_str(), |(_, p)| p.as_str());
            let path = self.resolve_path(wanted)?;
            if targets.values().any(|t| *t == path) {
                return Err(StorageError::FileExists(path.display().to_string()));
            }
            for (id, db) in self.databases() {
                if existing.as_ref().is_some_and(|(e, _)| *e == id) {
                    continue;
                }
                let db = db.lock().unwrap();
                if db.physical_names().contains(&path) {
                    return Err(StorageError::RestoreFileInUse {
                        path: path.display().to_string(),
                        database: db.name.clone(),
                        logical: f.name.clone(),
                    });
                }
            }
            if path.exists() && !replaced.contains(&path) && !req.replace {
                return Err(StorageError::FileExists(path.display().to_string()));
            }
            targets.insert(f.file_id, path);
        }

        // Step 2: the staged files.
        let mut cleanup = Cleanup {
            fs: ctx.fs,
            paths: Vec::new(),
        };
        let mut files: BTreeMap<u16, Arc<dyn DbFile>> = BTreeMap::new();
        for f in &h.files {
            let path = staged(&targets[&f.file_id]);
            let _ = ctx.fs.remove(&path);
            let file = ctx
                .fs
                .create_new(&path)
                .map_err(|source| StorageError::FileCreate {
                    path: path.display().to_string(),
                    source,
                })?;
            cleanup.paths.push(path);
            let kind = if f.file_type == FileType::Log {
                SpaceKind::Log
            } else {
                SpaceKind::Data
            };
            file_init::initialize(file.as_ref(), kind, 0, f.size_pages, ctx.policy, ctx.log)?;
            if f.file_type == FileType::Log {
                crate::log_file::write_header(
                    file.as_ref(),
                    h.database_guid,
                    f.file_id,
                    h.database_created_us,
                )?;
                for v in h.vlfs.iter().filter(|v| v.file_id == f.file_id) {
                    file.write_at(&v.encode(), v.start_offset)?;
                }
            }
            files.insert(f.file_id, file);
        }

        // Step 3: the blocks.
        let written = copy_blocks(req, &set, &files)?;
        settle_boot(files[&FileId::PRIMARY.0].as_ref(), h, Some(&media_guid))?;
        for f in files.values() {
            f.sync_data()?;
        }

        // Step 4: swap in, open (recovery), register.
        let system_id = existing
            .as_ref()
            .map(|(id, _)| *id)
            .filter(|&id| id < FIRST_USER_ID);
        match &existing {
            Some((id, db)) => self.drop_database_files(*id, db)?,
            None if restoring.is_some() => self.drop_database(&req.database)?,
            None => {}
        }
        drop(files);
        let mut finals = Vec::new();
        for target in targets.values() {
            std::fs::rename(staged(target), target)
                .map_err(|e| StorageError::Io(extentdb_io::IoError::os("rename", target, e)))?;
            finals.push(target.clone());
        }
        cleanup.paths = finals;
        for target in targets.values() {
            sync_parent(ctx.fs, target)?;
        }
        let database_id = system_id.unwrap_or_else(|| self.next_database_id());
        if req.recovery {
            let db = Database::open_restored(ctx.fs, &targets, &req.database, database_id)?;
            self.register_database(db, database_id)?;
        } else {
            if self.database_by_name(&req.database).is_some() {
                return Err(StorageError::DatabaseExists(req.database.clone()));
            }
            self.register_restoring(restoring_entry(
                database_id,
                &req.database,
                h.database_created_us,
                &targets,
            ))?;
        }
        cleanup.paths.clear();
        let names = pages_per_file(h, &written);
        Ok(RestoreOutcome {
            database_id,
            position: req.position,
            files: names,
            bytes: written.values().sum(),
            elapsed: started.elapsed(),
            restoring: !req.recovery,
            stop_at_beyond: false,
            restore_type: 'D',
        })
    }

    /// RESTORE LOG: the log backup set `req.position` applied to the RESTORING database
    /// `req.database` (see `restore_onto`).
    pub fn restore_log(
        &self,
        ctx: &OpContext<'_>,
        req: &RestoreRequest<'_>,
    ) -> Result<RestoreOutcome, StorageError> {
        let (set, _) = find_set(req)?;
        if set.header.backup_type != BackupType::Log {
            return Err(StorageError::RestoreKind {
                position: req.position,
                path: req.path.display().to_string(),
                created_by: "BACKUP DATABASE",
            });
        }
        self.restore_onto(ctx, req, &set)
    }

    /// A differential or log backup applied to a RESTORING database:
    /// 1. Checks: the database is RESTORING (Msg 3117); a differential's base is the full
    ///    backup restored (3136); a log backup holds the LSN the database is at (4305 when
    ///    it starts later, 4326 when it ends earlier).
    /// 2. Files the backup lists and the database lacks are created beside its primary
    ///    file, log files grown to the backup's sizes, and every VLF header of the backup's
    ///    layout written, so LSNs keep meaning the same positions.
    /// 3. The blocks are written: a differential's changed extents and log; a log backup's
    ///    VLFs.
    /// 4. A differential points the boot page at its log as a full restore does. A log
    ///    backup is rolled forward: redo from the restored checkpoint, the catalog applied
    ///    as logged (tables, files added, grown, removed), stopping before the first commit
    ///    after STOPAT, where the log is cut; the pages are written and the boot page
    ///    records how far the database is restored.
    /// 5. With RECOVERY the database is opened (undo of what was open at that point) and
    ///    comes online; else it stays RESTORING, its paths in master.
    fn restore_onto(
        &self,
        ctx: &OpContext<'_>,
        req: &RestoreRequest<'_>,
        set: &SetInfo,
    ) -> Result<RestoreOutcome, StorageError> {
        let started = Instant::now();
        let h = &set.header;
        // A database whose last restore step failed part-way may take that step again
        // (the boot page still says where it was, and redo is idempotent).
        let entry = self
            .restoring_entry(&req.database)
            .ok_or_else(|| StorageError::NotRestoring(req.database.clone()))?;
        let mut paths: BTreeMap<u16, PathBuf> = entry
            .restoring
            .iter()
            .flatten()
            .map(|(id, p)| (*id, PathBuf::from(p)))
            .collect();
        // Step 1.
        let primary = ctx.fs.open(&paths[&FileId::PRIMARY.0])?;
        let boot = read_boot_of(primary.as_ref())?;
        drop(primary);
        let at = boot.checkpoint_lsn;
        if h.database_guid != boot.database_guid {
            return Err(StorageError::RestoreOverExisting {
                database: req.database.clone(),
                same: false,
            });
        }
        match h.backup_type {
            BackupType::Differential => {
                if h.differential_base_guid != boot.differential_base_guid || h.last_lsn < at {
                    return Err(StorageError::DifferentialBaseMismatch);
                }
            }
            _ => {
                if h.first_lsn > at {
                    return Err(StorageError::LogTooRecent {
                        first: h.first_lsn,
                        needed: at,
                    });
                }
                // One ending where the database is adds nothing and is applied as a no-op
                // (a log backup taken right after a differential one ends where it does).
                if h.last_lsn < at {
                    return Err(StorageError::LogTooEarly {
                        last: h.last_lsn,
                        needed: at,
                    });
                }
            }
        }
        // Where files the database lacks go, decided before anything is written: WITH
        // MOVE's path, else beside the primary file under the source's file name.
        for (logical, _) in &req.moves {
            if !h.files.iter().any(|f| f.name.eq_ignore_ascii_case(logical)) {
                return Err(StorageError::RestoreLogicalName {
                    logical: logical.clone(),
                    database: h.database_name.clone(),
                });
            }
        }
        let dir = paths[&FileId::PRIMARY.0]
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let mut added: BTreeMap<u16, PathBuf> = BTreeMap::new();
        for f in h.files.iter().filter(|f| !paths.contains_key(&f.file_id)) {
            let path = match req
                .moves
                .iter()
                .find(|(l, _)| l.eq_ignore_ascii_case(&f.name))
            {
                Some((_, p)) => self.resolve_path(p)?,
                None => new_file_path(&dir, &f.physical_name)?,
            };
            if path.exists() || added.values().any(|p| *p == path) {
                return Err(StorageError::FileExists(path.display().to_string()));
            }
            added.insert(f.file_id, path);
        }
        // Steps 2 to 4. From the first write until the step completes the files may hold
        // part of this backup, so master marks the database first (durably, with the paths
        // of the files it will create): a failure or a crash meanwhile leaves it SUSPECT,
        // where RECOVERY is refused (recovery would replay half a log without its catalog)
        // but the same step may be taken again, or a full restore or DROP DATABASE follow.
        let kept = kept_catalog_path(&paths[&FileId::PRIMARY.0]);
        // After a step cut short only that kind of step may follow (the kept catalog marks
        // a log step): a log rolled forward over half a differential would lose changes.
        if entry.restore_failed && (h.backup_type == BackupType::Log) != kept.exists() {
            return Err(StorageError::NotRestoring(req.database.clone()));
        }
        if h.backup_type == BackupType::Log && !entry.restore_failed {
            // The catalog as of the restored point, kept aside: a roll forward cut short
            // may overwrite its pages (the source reused them later), and taking the step
            // again starts from it.
            let db = Database::open_restoring(ctx.fs, &paths, None)?;
            write_synced(ctx.fs, &kept, &db.catalog.encode())?;
        }
        let mut marked = paths.clone();
        marked.extend(added.iter().map(|(id, p)| (*id, p.clone())));
        let mut in_progress =
            restoring_entry(entry.database_id, &req.database, entry.created_us, &marked);
        in_progress.restore_failed = true;
        self.register_restoring(in_progress)?;
        let owned = marked.values().cloned().collect();
        let applied = apply_onto(ctx, req, set, &mut paths, added, owned, dir);
        let (written, stop_at_beyond) = match applied {
            Ok(a) => a,
            Err(e) => {
                let mut failed =
                    restoring_entry(entry.database_id, &req.database, entry.created_us, &paths);
                failed.restore_failed = true;
                let _ = self.register_restoring(failed);
                self.errorlog.write("spid7s", &format!("The restore of database '{}' failed part-way ({e}). The database is marked SUSPECT: take the same restore step again, restore it from a full backup, or drop it.", req.database));
                return Err(e);
            }
        };
        let _ = ctx.fs.remove(&kept);
        // Step 5.
        let recover = req.recovery && !stop_at_beyond;
        let id = entry.database_id;
        if recover {
            let db = Database::open_restored(ctx.fs, &paths, &req.database, id)?;
            self.register_recovered(db, id)?;
        } else {
            self.register_restoring(restoring_entry(id, &req.database, entry.created_us, &paths))?;
        }
        let names = pages_per_file(h, &written);
        Ok(RestoreOutcome {
            database_id: id,
            position: req.position,
            files: names,
            bytes: written.values().sum(),
            elapsed: started.elapsed(),
            restoring: !recover,
            stop_at_beyond,
            restore_type: if h.backup_type == BackupType::Log {
                'L'
            } else {
                'I'
            },
        })
    }

    /// RESTORE DATABASE db WITH RECOVERY (no backup named): recovers a RESTORING database
    /// at the point it was restored to and brings it online.
    pub fn recover_restoring(&self, ctx: &OpContext<'_>, name: &str) -> Result<u16, StorageError> {
        let entry = self
            .restoring_entry(name)
            .filter(|e| !e.restore_failed)
            .ok_or_else(|| StorageError::NotRestoring(name.to_string()))?;
        let paths: BTreeMap<u16, PathBuf> = entry
            .restoring
            .iter()
            .flatten()
            .map(|(id, p)| (*id, PathBuf::from(p)))
            .collect();
        let db = Database::open_restored(ctx.fs, &paths, &entry.name, entry.database_id)?;
        self.register_recovered(db, entry.database_id)?;
        Ok(entry.database_id)
    }
}

/// Steps 2 to 4 of `restore_onto`: the files the backup lists made ready (created at
/// `added`'s paths, grown, the log given the backup's VLF layout), the blocks written, then
/// a differential's boot page settled or a log backup rolled forward. Returns the bytes
/// written per file and whether a STOPAT lies beyond the log backup.
fn apply_onto(
    ctx: &OpContext<'_>,
    req: &RestoreRequest<'_>,
    set: &SetInfo,
    paths: &mut BTreeMap<u16, PathBuf>,
    mut added: BTreeMap<u16, PathBuf>,
    owned: BTreeSet<PathBuf>,
    dir: PathBuf,
) -> Result<(BTreeMap<u16, u64>, bool), StorageError> {
    let h = &set.header;
    // Step 2.
    let mut files: BTreeMap<u16, Arc<dyn DbFile>> = BTreeMap::new();
    for f in &h.files {
        let log = f.file_type == FileType::Log;
        if !log && h.backup_type == BackupType::Log {
            continue; // data files follow the catalog as the log is rolled forward
        }
        let kind = if log { SpaceKind::Log } else { SpaceKind::Data };
        let file = match paths.get(&f.file_id) {
            Some(p) => ctx.fs.open(p)?,
            None => {
                let path = added.remove(&f.file_id).expect("decided in step 1");
                let file = create_new(ctx, &path)?;
                paths.insert(f.file_id, path);
                if log {
                    crate::log_file::write_header(
                        file.as_ref(),
                        h.database_guid,
                        f.file_id,
                        h.database_created_us,
                    )?;
                }
                file
            }
        };
        let have = (file.len()? / PAGE_SIZE as u64) as u32;
        if f.size_pages > have {
            file_init::initialize(file.as_ref(), kind, have, f.size_pages, ctx.policy, ctx.log)?;
        } else if !log && f.size_pages < have {
            file.set_len(f.size_pages as u64 * PAGE_SIZE as u64)?;
        }
        if log {
            for v in h.vlfs.iter().filter(|v| v.file_id == f.file_id) {
                file.write_at(&v.encode(), v.start_offset)?;
            }
        }
        files.insert(f.file_id, file);
    }
    // Step 3.
    let written = copy_blocks(req, set, &files)?;
    for f in files.values() {
        f.sync_data()?;
    }
    drop(files);
    // Step 4.
    if h.backup_type == BackupType::Differential {
        let primary = ctx.fs.open(&paths[&FileId::PRIMARY.0])?;
        settle_boot(primary.as_ref(), h, None)?;
        primary.sync_data()?;
        return Ok((written, false));
    }
    let kept = kept_catalog_path(&paths[&FileId::PRIMARY.0]);
    let catalog = match read_all(ctx.fs, &kept) {
        Some(blob) => Some(Catalog::decode(&blob, PageId::NULL)?),
        None => None,
    };
    let mut db = Database::open_restoring(ctx.fs, paths, catalog)?;
    let mut rf = RollForward {
        stop_at_us: req.stop_at_us,
        stopped: None,
        last_commit_us: 0,
        piece: Vec::new(),
        ctx,
        dir,
        added,
        owned,
        paths,
        redone: 0,
        committed: 0,
    };
    let oldest = db.roll_forward(&h.vlfs, &mut rf)?;
    let reached = match rf.stopped {
        Some(stop) => {
            crate::log_file::cut_log(&db.log_files, &h.vlfs, stop)?;
            stop
        }
        None => h.last_lsn,
    };
    let beyond =
        rf.stopped.is_none() && req.stop_at_us.is_some_and(|t| t >= set.trailer.finished_us);
    db.boot.checkpoint_lsn = reached;
    db.boot.min_recovery_lsn = oldest.unwrap_or(Lsn::ZERO);
    db.write_boot_unlogged()?;
    Ok((written, beyond))
}

/// State of RESTORE LOG's roll forward (`Database::roll_forward`).
pub(crate) struct RollForward<'a> {
    pub stop_at_us: Option<i64>,
    /// The commit where STOPAT stopped the roll forward (not applied).
    pub stopped: Option<Lsn>,
    pub last_commit_us: i64,
    /// The logged catalog being put back together.
    piece: Vec<u8>,
    ctx: &'a OpContext<'a>,
    /// Where files added by the log go: `added`'s path (decided before the restore wrote
    /// anything), else beside the primary file.
    dir: PathBuf,
    added: BTreeMap<u16, PathBuf>,
    /// Paths this restore step creates (master lists them while it runs): a file left at
    /// one by an attempt cut short is replaced.
    owned: BTreeSet<PathBuf>,
    paths: &'a mut BTreeMap<u16, PathBuf>,
    pub redone: usize,
    pub committed: usize,
}

impl Database {
    /// A piece of a logged catalog (`LogRecordBody::CatalogImage`, at `lsn`); the whole one
    /// makes the files match it (created, grown, shrunk, removed, as the source did) and is
    /// written where the source wrote it, outside the log as `save_catalog` does. A growth's
    /// GAM changes are redone as of the last piece's `lsn` (data_file.rs invariant 5).
    pub(crate) fn roll_catalog(
        &mut self,
        rf: &mut RollForward<'_>,
        lsn: Lsn,
        pages: &[PageId],
        total: u32,
        offset: u32,
        bytes: &[u8],
    ) -> Result<(), StorageError> {
        if offset == 0 {
            rf.piece.clear();
        }
        if offset as usize != rf.piece.len() || pages.is_empty() {
            return Err(extentdb_format::corrupt(
                PageId::NULL,
                "logged catalog pieces out of order",
            )
            .into());
        }
        rf.piece.extend_from_slice(bytes);
        if rf.piece.len() < total as usize {
            return Ok(());
        }
        let blob = std::mem::take(&mut rf.piece);
        let new = Catalog::decode(&blob, pages[0])?;
        self.follow_files(&new, rf, lsn)?;
        let primary = self.primary();
        for (i, mut p) in catalog::to_pages(&blob, pages).into_iter().enumerate() {
            primary.write_page_unlogged(pages[i].page, &mut p)?;
        }
        self.boot.catalog_first_page = pages[0];
        self.boot.catalog_bytes = blob.len() as u32;
        self.boot.catalog_crc = crc32c::crc32c(&blob);
        self.catalog = new;
        self.catalog_changed();
        Ok(())
    }

    /// The data files made to match catalog `new` (log files came with the backup).
    fn follow_files(
        &mut self,
        new: &Catalog,
        rf: &mut RollForward<'_>,
        lsn: Lsn,
    ) -> Result<(), StorageError> {
        let ctx = rf.ctx;
        for f in new.files.iter().filter(|f| f.file_type != FileType::Log) {
            let old = self.catalog.files.iter().find(|o| o.file_id == f.file_id);
            match old.map(|o| o.size_pages) {
                None => {
                    let known = rf
                        .added
                        .remove(&f.file_id)
                        .or_else(|| rf.paths.get(&f.file_id).cloned());
                    let path = match known {
                        Some(p) => p,
                        None => new_file_path(&rf.dir, &f.physical_name)?,
                    };
                    if rf.owned.contains(&path) {
                        let _ = ctx.fs.remove(&path);
                    }
                    let file = create_new(ctx, &path)?;
                    rf.paths.insert(f.file_id, path);
                    file_init::initialize(
                        file.as_ref(),
                        SpaceKind::Data,
                        0,
                        f.size_pages,
                        ctx.policy,
                        ctx.log,
                    )?;
                    let df = DataFile {
                        file_id: FileId(f.file_id),
                        file,
                        size_pages: f.size_pages,
                        wal: None,
                        cache: Default::default(),
                        database_id: 0,
                    };
                    df.write_file_header(self.boot.database_guid, crate::now_us())?;
                    df.format_new_space(0)?;
                    df.sync()?;
                    self.data_files.insert(f.file_id, df);
                }
                Some(size) if f.size_pages > size => {
                    let df = self.data_files.get_mut(&f.file_id).expect("listed");
                    file_init::initialize(
                        df.file.as_ref(),
                        SpaceKind::Data,
                        size,
                        f.size_pages,
                        ctx.policy,
                        ctx.log,
                    )?;
                    df.size_pages = f.size_pages;
                    // As redo: a roll forward taken again finds this file's GAM pages
                    // carrying later allocations (data_file.rs invariant 5).
                    df.format_new_space_redo(size, lsn)?;
                    df.sync()?;
                }
                Some(size) if f.size_pages < size => {
                    self.data.pool.flush_all(&self.data_files, None)?;
                    let df = self.data_files.get_mut(&f.file_id).expect("listed");
                    df.sync()?;
                    df.file.set_len(f.size_pages as u64 * PAGE_SIZE as u64)?;
                    df.size_pages = f.size_pages;
                    df.forget_cache();
                }
                Some(_) => {}
            }
        }
        let gone: Vec<u16> = self
            .catalog
            .files
            .iter()
            .filter(|o| !new.files.iter().any(|f| f.file_id == o.file_id))
            .map(|o| o.file_id)
            .collect();
        for id in gone {
            self.data.pool.flush_all(&self.data_files, None)?;
            self.data_files.remove(&id);
            self.log_files.remove(&id);
            if let Some(p) = rf.paths.remove(&id) {
                ctx.fs.remove(&p)?;
            }
        }
        Ok(())
    }
}

/// Where a log restore keeps the catalog of the point it starts from, beside the primary
/// file, until the step completes.
pub(crate) fn kept_catalog_path(primary: &Path) -> PathBuf {
    let mut s = primary.as_os_str().to_owned();
    s.push(".xdbcatalog");
    PathBuf::from(s)
}

fn write_synced(
    fs: &dyn extentdb_io::FileSystem,
    path: &Path,
    bytes: &[u8],
) -> Result<(), StorageError> {
    let _ = fs.remove(path);
    let f = fs
        .create_new(path)
        .map_err(|source| StorageError::FileCreate {
            path: path.display().to_string(),
            source,
        })?;
    f.write_at(&(bytes.len() as u64).to_le_bytes(), 0)?;
    f.write_at(bytes, 8)?;
    f.sync_data()?;
    sync_parent(fs, path)
}

/// The bytes `write_synced` wrote, if the file is there whole.
fn read_all(fs: &dyn extentdb_io::FileSystem, path: &Path) -> Option<Vec<u8>> {
    let f = fs.open(path).ok()?;
    let mut n = [0u8; 8];
    f.read_at(&mut n, 0).ok()?;
    let n = u64::from_le_bytes(n);
    if n + 8 > f.len().ok()? {
        return None;
    }
    let mut b = vec![0u8; n as usize];
    f.read_at(&mut b, 8).ok()?;
    Some(b)
}

/// RESTORE's 4035 lines: (logical name, 8 KB pages written) for each file of the set.
fn pages_per_file(h: &SetHeader, written: &BTreeMap<u16, u64>) -> Vec<(String, u64)> {
    h.files
        .iter()
        .map(|f| {
            let bytes = written.get(&f.file_id).copied().unwrap_or(0);
            (f.name.clone(), bytes.div_ceil(PAGE_SIZE as u64))
        })
        .collect()
}

/// The set `req` names, and its file's media GUID.
fn find_set(req: &RestoreRequest<'_>) -> Result<(SetInfo, [u8; 16]), StorageError> {
    let (media, sets) = read_backup_sets(req.path)?;
    let set = sets
        .into_iter()
        .find(|s| s.header.position == req.position)
        .ok_or_else(|| StorageError::BackupSetNotFound {
            position: req.position,
            path: req.path.display().to_string(),
        })?;
    Ok((set, media.media_guid))
}

/// Master's entry of a RESTORING database with files at `paths`.
pub(crate) fn restoring_entry(
    id: u16,
    name: &str,
    created_us: i64,
    paths: &BTreeMap<u16, PathBuf>,
) -> DatabaseEntry {
    DatabaseEntry {
        database_id: id,
        name: name.to_string(),
        primary_file: paths[&FileId::PRIMARY.0].display().to_string(),
        created_us,
        restoring: Some(
            paths
                .iter()
                .map(|(id, p)| (*id, p.display().to_string()))
                .collect(),
        ),
        restore_failed: false,
        offline: false,
        user_access: Default::default(),
    }
}

/// Where a file a log or differential backup adds goes: beside the primary file, under
/// the name it had at the source; an existing file is never overwritten.
fn new_file_path(dir: &Path, source: &str) -> Result<PathBuf, StorageError> {
    let name = Path::new(source)
        .file_name()
        .ok_or_else(|| StorageError::FileNotFound(source.to_string()))?;
    let path = dir.join(name);
    if path.exists() {
        return Err(StorageError::FileExists(path.display().to_string()));
    }
    Ok(path)
}

fn create_new(ctx: &OpContext<'_>, path: &Path) -> Result<Arc<dyn DbFile>, StorageError> {
    let file = ctx
        .fs
        .create_new(path)
        .map_err(|source| StorageError::FileCreate {
            path: path.display().to_string(),
            source,
        })?;
    sync_parent(ctx.fs, path)?;
    Ok(file)
}

/// One copy of the boot page (page 9, or its mirror at 10) of a primary file.
fn boot_copy(
    primary: &dyn DbFile,
    at: extentdb_format::PageNo,
) -> Result<(PageId, BootPage), StorageError> {
    let pid = PageId {
        file: FileId::PRIMARY,
        page: at,
    };
    let mut b = vec![0u8; PAGE_SIZE];
    primary.read_at(&mut b, at.offset())?;
    Ok((pid, BootPage::decode(&Page::from_bytes(&b)?, pid)?))
}

/// The valid boot page of a primary file (the copy with the higher generation).
fn read_boot_of(primary: &dyn DbFile) -> Result<BootPage, StorageError> {
    let mut best: Option<BootPage> = None;
    for at in [BOOT_PAGE, BOOT_MIRROR_PAGE] {
        if let Ok((_, boot)) = boot_copy(primary, at) {
            if best.as_ref().is_none_or(|x| boot.generation > x.generation) {
                best = Some(boot);
            }
        }
    }
    best.ok_or_else(|| {
        extentdb_format::corrupt(PageId::new(1, BOOT_PAGE.0), "no valid boot page").into()
    })
}

/// Points the restored boot page's recovery at the copied log: the pages are the database
/// at the backup's instant, every logged change up to `last_lsn` already in them, so redo
/// starts at `last_lsn` (nothing to redo: no page is ever set back to an older image), and
/// analysis at `first_lsn`, where every transaction open at that instant had begun; those
/// are rolled back.
///
/// A restored database starts no log chain of its own (its first full backup does); a
/// full backup restored becomes its differential base (`media_guid` given), as a
/// differential restored keeps the base it names.
fn settle_boot(
    primary: &dyn DbFile,
    h: &SetHeader,
    media_guid: Option<&[u8; 16]>,
) -> Result<(), StorageError> {
    for at in [BOOT_PAGE, BOOT_MIRROR_PAGE] {
        let (pid, mut boot) = boot_copy(primary, at)?;
        boot.checkpoint_lsn = h.last_lsn;
        boot.min_recovery_lsn = h.first_lsn;
        boot.log_backup_lsn = Lsn::ZERO;
        if let Some(g) = media_guid {
            boot.differential_base_lsn = h.last_lsn;
            boot.differential_base_guid = h.set_guid(g);
        }
        let mut p = boot.encode(pid)?;
        p.seal();
        primary.write_at(p.bytes(), at.offset())?;
    }
    Ok(())
}

/// Step 3: reads the set's blocks in order, checks each, and writes it into the staged
/// files. Returns the bytes written per file id.
fn copy_blocks(
    req: &RestoreRequest<'_>,
    set: &SetInfo,
    files: &BTreeMap<u16, Arc<dyn DbFile>>,
) -> Result<BTreeMap<u16, u64>, StorageError> {
    let path = req.path;
    let media = |reason: String| StorageError::BackupMedia {
        path: path.display().to_string(),
        reason,
    };
    let mut f = crate::backup::open_backup_file(path).map_err(|e| StorageError::BackupDevice {
        path: path.display().to_string(),
        reason: crate::backup::os_error_text(&e),
    })?;
    let mut first = vec![0u8; 4096];
    f.seek(SeekFrom::Start(set.offset))
        .and_then(|_| f.read_exact(&mut first))
        .map_err(|e| media(e.to_string()))?;
    let mut pos = set.offset + SetHeader::stored_len(&first)?;
    let end = set.offset + set.size;
    let total = set.trailer.data_pages * PAGE_SIZE as u64 + set.trailer.log_bytes;
    let mut done = 0u64;
    let mut written: BTreeMap<u16, u64> = BTreeMap::new();
    let mut bh = [0u8; BLOCK_HEADER_SIZE];
    let mut payload = Vec::new();
    while pos < end {
        if req.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(StorageError::Cancelled);
        }
        f.seek(SeekFrom::Start(pos))
            .and_then(|_| f.read_exact(&mut bh))
            .map_err(|_| media(format!("cut short at byte {pos}")))?;
        let h = BlockHeader::decode(&bh).map_err(|e| media(e.to_string()))?;
        payload.resize(h.length as usize, 0);
        f.read_exact(&mut payload)
            .map_err(|_| media(format!("cut short at byte {pos}")))?;
        if payload_crc(&payload) != h.payload_crc {
            return Err(media(format!("block at byte {pos} fails its checksum")));
        }
        let payload = h.expand(&payload).map_err(|e| media(e.to_string()))?;
        match h.kind {
            BlockKind::Pages | BlockKind::Log => {
                let file = files.get(&h.file_id).ok_or_else(|| {
                    media(format!(
                        "block for file {} the set does not list",
                        h.file_id
                    ))
                })?;
                let offset = if h.kind == BlockKind::Pages {
                    if req.checksum {
                        for (i, b) in payload.chunks(PAGE_SIZE).enumerate() {
                            let pid = PageId::new(h.file_id, h.start as u32 + i as u32);
                            let p = Page::from_bytes(b)?;
                            if !p.is_unformatted() && p.verify(pid).is_err() {
                                return Err(StorageError::RestorePageError {
                                    database: req.database.clone(),
                                    page: pid,
                                });
                            }
                        }
                    }
                    h.start * PAGE_SIZE as u64
                } else {
                    h.start
                };
                file.write_at(&payload, offset)?;
                *written.entry(h.file_id).or_default() += payload.len() as u64;
                done += payload.len() as u64;
                if let Some(p) = req.progress {
                    p(done, total);
                }
            }
            BlockKind::End => break,
        }
        pos += h.stored_len();
    }
    Ok(written)
}
