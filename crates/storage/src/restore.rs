//! RESTORE DATABASE from a full backup set (see `backup` and FORMAT.md, "Backup file").
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

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use extentdb_format::backup::{
    payload_crc, BackupType, BlockHeader, BlockKind, SetHeader, BLOCK_HEADER_SIZE,
};
use extentdb_format::boot::BootPage;
use extentdb_format::file_header::FileType;
use extentdb_format::layout::{BOOT_MIRROR_PAGE, BOOT_PAGE};
use extentdb_format::{FileId, Page, PageId, PAGE_SIZE};
use extentdb_io::DbFile;

use crate::backup::{read_backup_sets, SetInfo};
use crate::database::{sync_parent, OpContext};
use crate::file_init::{self, SpaceKind};
use crate::instance::{Instance, FIRST_USER_ID};
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
        let (_, sets) = read_backup_sets(req.path)?;
        let set = sets
            .into_iter()
            .find(|s| s.header.position == req.position)
            .ok_or_else(|| StorageError::BackupSetNotFound {
                position: req.position,
                path: req.path.display().to_string(),
            })?;
        let h = &set.header;
        if h.backup_type != BackupType::Database {
            return Err(StorageError::RestoreKind {
                position: req.position,
            });
        }

        // Step 1: the database being replaced, and the target paths.
        let existing = self.database_by_name(&req.database);
        if let Some((id, db)) = &existing {
            if *id < FIRST_USER_ID {
                return Err(StorageError::SystemDatabase(req.database.clone()));
            }
            if !req.replace {
                let guid = db.lock().unwrap().boot.database_guid;
                return Err(StorageError::RestoreOverExisting {
                    database: req.database.clone(),
                    same: guid == h.database_guid,
                });
            }
        }
        if self.suspect_by_name(&req.database).is_some() {
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
        let replaced: Vec<PathBuf> = existing
            .as_ref()
            .map(|(_, d)| d.lock().unwrap().physical_names())
            .unwrap_or_default();
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
        settle_boot(files[&FileId::PRIMARY.0].as_ref(), h)?;
        for f in files.values() {
            f.sync_data()?;
        }

        // Step 4: swap in, open (recovery), register.
        if existing.is_some() {
            self.drop_database(&req.database)?;
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
        let database_id = self.next_database_id();
        let db = Database::open_restored(ctx.fs, &targets, &req.database, database_id)?;
        self.register_database(db, database_id)?;
        cleanup.paths.clear();
        let names = h
            .files
            .iter()
            .map(|f| {
                let pages = written.get(&f.file_id).copied().unwrap_or(0);
                (f.name.clone(), pages.div_ceil(PAGE_SIZE as u64))
            })
            .collect();
        Ok(RestoreOutcome {
            database_id,
            position: req.position,
            files: names,
            bytes: written.values().sum(),
            elapsed: started.elapsed(),
        })
    }
}

/// Points the restored boot page's recovery at the copied log: the pages are the database
/// at the backup's instant, every logged change up to `last_lsn` already in them, so redo
/// starts at `last_lsn` (nothing to redo: no page is ever set back to an older image), and
/// analysis at `first_lsn`, where every transaction open at that instant had begun; those
/// are rolled back.
fn settle_boot(primary: &dyn DbFile, h: &SetHeader) -> Result<(), StorageError> {
    for at in [BOOT_PAGE, BOOT_MIRROR_PAGE] {
        let pid = PageId {
            file: FileId::PRIMARY,
            page: at,
        };
        let mut b = vec![0u8; PAGE_SIZE];
        primary.read_at(&mut b, at.offset())?;
        let mut boot = BootPage::decode(&Page::from_bytes(&b)?, pid)?;
        boot.checkpoint_lsn = h.last_lsn;
        boot.oldest_active_lsn = h.first_lsn;
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
    let mut f = File::open(path).map_err(|e| StorageError::BackupDevice {
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
