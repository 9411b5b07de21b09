//! BACKUP DATABASE and the readers of backup files (RESTORE HEADERONLY, FILELISTONLY,
//! VERIFYONLY). The file format is `extentdb_format::backup` (FORMAT.md, "Backup file").
//!
//! A full backup runs online, beside writers:
//! 1. Under the database's lock (milliseconds): a copy-on-write view of the data files is
//!    taken (`snapshot`, the same view CHECKDB reads), the log is flushed, and the range of
//!    the log from the older of the last checkpoint and the oldest active transaction's
//!    BEGIN to the end is pinned, so no VLF of it is reused while it is copied.
//! 2. Outside the lock: every extent the GAM marks allocated is copied from the view, in
//!    (file, extent) order, in blocks of up to 1 MB; then the pinned log bytes, VLF by VLF.
//!    Free extents are not copied.
//! 3. An end block closes the set; the file is synced.
//!
//! The view is the database as it was at the instant of step 1, and the log copied holds
//! every record of every transaction active then, from its BEGIN: restoring the pages and
//! replaying that log (redo finds every page already current; undo rolls the open
//! transactions back) gives the database as of that instant, transactionally consistent.
//!
//! Invariants:
//! 1. A set is complete only once its end block is written and synced; readers treat a set
//!    without one as damaged, and a later NOINIT backup overwrites it.
//! 2. A backup changes nothing in the database (the pin aside, which it always releases).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use extentdb_format::backup::{
    aligned, pack_payload, payload_crc, BackupType, BlockHeader, BlockKind, MediaHeader, SetHeader,
    SetTrailer, BLOCK_HEADER_SIZE, FLAG_CHECKSUM, FLAG_COMPRESSED, FLAG_COPY_ONLY,
    MAX_BLOCK_PAYLOAD, MEDIA_HEADER_SIZE,
};
use extentdb_format::catalog::RecoveryModel;
use extentdb_format::file_header::FileType;
use extentdb_format::layout::{self, BitmapKind};
use extentdb_format::{
    bitmap, Lsn, Page, PageId, PageType, GAM_INTERVAL_EXTENTS, PAGES_PER_EXTENT, PAGE_SIZE,
};

use crate::backup_transfer::{Transfer, TransferSettings};
use crate::log_writer::LogWriter;
use crate::now_us;
use crate::snapshot::CheckSource;
use crate::{Database, StorageError};

/// Extents per data block (1 MB).
const BLOCK_EXTENTS: u32 = (MAX_BLOCK_PAYLOAD / PAGE_SIZE) as u32 / PAGES_PER_EXTENT;

/// What BACKUP DATABASE was asked to do.
pub struct BackupRequest<'a> {
    /// Database (full), Differential (the extents changed since the last full backup) or
    /// Log (the log since the last log backup).
    pub kind: BackupType,
    pub path: &'a Path,
    /// INIT: the file's earlier sets are overwritten. FORMAT: also a new media header.
    pub init: bool,
    pub format: bool,
    /// CHECKSUM: every page's checksum is verified as it is read (Msg 3043 on failure).
    pub checksum: bool,
    pub copy_only: bool,
    /// WITH COMPRESSION: blocks LZ4-compressed where that saves space.
    pub compression: bool,
    pub name: String,
    pub description: String,
    pub server_name: String,
    pub user_name: String,
    /// BUFFERCOUNT and MAXTRANSFERSIZE (backup_transfer.rs).
    pub transfer: TransferSettings,
    /// For new media (FORMAT, or a new file): BLOCKSIZE (0 when not given), MEDIANAME and
    /// MEDIADESCRIPTION. An existing media set keeps its own.
    pub block_size: u32,
    pub media_name: Option<String>,
    pub media_description: String,
    /// EXPIREDATE / RETAINDAYS of the new set (µs since the Unix epoch, 0 for none).
    pub expires_us: i64,
    /// SKIP: INIT overwrites unexpired sets, and MEDIANAME is not checked.
    pub skip: bool,
    /// Called with (bytes done, bytes in all) as blocks are written.
    pub progress: Option<&'a (dyn Fn(u64, u64) + Sync)>,
    pub cancel: Option<&'a AtomicBool>,
}

/// What a backup wrote.
#[derive(Debug, Clone)]
pub struct BackupOutcome {
    /// The set's position in the file (1-based).
    pub position: u32,
    /// Pages copied per file, in file id order: (logical name, pages); for a log file, its
    /// bytes in 8 KB pages, rounded up.
    pub files: Vec<(String, u64)>,
    pub bytes: u64,
    pub elapsed: Duration,
}

/// One backup set of a file, as the readers list it.
#[derive(Debug, Clone)]
pub struct SetInfo {
    pub header: SetHeader,
    /// Byte offset of the set header in the file.
    pub offset: u64,
    /// Bytes of the whole set (header to end block included).
    pub size: u64,
    pub trailer: SetTrailer,
    /// Payload bytes per file id.
    pub file_bytes: std::collections::BTreeMap<u16, u64>,
}

/// The log pin of a running backup, released however the backup ends.
struct Pin {
    wal: Arc<LogWriter>,
    from: u32,
}

impl Drop for Pin {
    fn drop(&mut self) {
        self.wal.unpin(self.from);
    }
}

fn device_error(path: &Path, e: std::io::Error) -> StorageError {
    StorageError::BackupDevice {
        path: path.display().to_string(),
        reason: os_error_text(&e),
    }
}

/// An OS error as SQL Server words it in Msg 3201: "5(Access is denied.)".
pub fn os_error_text(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "2(The system cannot find the file specified.)".into(),
        std::io::ErrorKind::PermissionDenied => "5(Access is denied.)".into(),
        _ => format!("{}({e})", e.raw_os_error().unwrap_or(0)),
    }
}

fn media_error(path: &Path, reason: impl Into<String>) -> StorageError {
    StorageError::BackupMedia {
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

/// The extents of a data file the GAM marks allocated, as runs of (first extent, extents)
/// of at most one block each. An interval whose GAM page cannot be read is copied whole.
fn allocated_runs(src: &CheckSource, file: u16, size_pages: u32) -> Vec<(u32, u32)> {
    let usable = size_pages / PAGES_PER_EXTENT;
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for interval in 0..usable.div_ceil(GAM_INTERVAL_EXTENTS) {
        let gam_at = PageId::new(file, layout::bitmap_page(BitmapKind::Gam, interval).0);
        let gam = src
            .read_page(gam_at)
            .ok()
            .filter(|p| p.verify(gam_at) == Ok(PageType::Gam));
        let base = interval * GAM_INTERVAL_EXTENTS;
        let end = usable.min(base + GAM_INTERVAL_EXTENTS);
        for e in base..end {
            let free = gam.as_ref().is_some_and(|g| bitmap::get_bit(g, e - base));
            if free {
                continue;
            }
            match runs.last_mut() {
                Some((first, n)) if *first + *n == e && *n < BLOCK_EXTENTS => *n += 1,
                _ => runs.push((e, 1)),
            }
        }
    }
    runs
}

/// Writes one block (header, payload compressed when `compress` and worth it, padding)
/// at the file's current position; returns the bytes written.
fn write_block(
    out: &mut impl Write,
    kind: BlockKind,
    (file_id, start, count): (u16, u64, u32),
    payload: &[u8],
    compress: bool,
) -> std::io::Result<u64> {
    let (stored, raw_length) = pack_payload(payload, compress);
    let h = BlockHeader {
        kind,
        file_id,
        start,
        count,
        length: stored.len() as u32,
        payload_crc: payload_crc(&stored),
        raw_length,
    };
    out.write_all(&h.encode())?;
    out.write_all(&stored)?;
    let pad = h.stored_len() as usize - BLOCK_HEADER_SIZE - stored.len();
    out.write_all(&vec![0u8; pad])?;
    Ok(h.stored_len())
}

/// The extents of one run a differential backup copies (indexes into the run): those
/// holding a page changed at or after the base LSN, and those holding pages written
/// outside the log (file header, allocation maps, boot and catalog pages), whose LSN says
/// nothing about when they changed.
fn changed_extents(pages: &[Page], base: Lsn) -> Vec<usize> {
    pages
        .chunks(PAGES_PER_EXTENT as usize)
        .enumerate()
        .filter(|(_, ext)| {
            ext.iter().any(|p| match p.header() {
                Ok(h) => {
                    h.lsn >= base
                        || !matches!(
                            h.page_type,
                            PageType::Data
                                | PageType::Index
                                | PageType::TextMix
                                | PageType::TextTree
                                | PageType::Unformatted
                        )
                }
                Err(_) => true,
            })
        })
        .map(|(i, _)| i)
        .collect()
}

impl Database {
    /// Where the log chain starts: under FULL or BULK_LOGGED recovery, once a full backup
    /// began the chain, the log is kept from here for the next BACKUP LOG; None otherwise
    /// (the log truncates at checkpoints, as under SIMPLE).
    pub fn log_chain_start(&self) -> Option<Lsn> {
        let chained = self.catalog.recovery_model != RecoveryModel::Simple
            && self.boot.log_backup_lsn != Lsn::ZERO;
        chained.then_some(self.boot.log_backup_lsn)
    }

    /// ALTER DATABASE ... SET RECOVERY: SIMPLE breaks the log chain (a BACKUP LOG then
    /// needs a new full backup first, Msg 4214).
    pub fn set_recovery_model(&mut self, model: RecoveryModel) -> Result<(), StorageError> {
        let before = self.boot.log_backup_lsn;
        if model == RecoveryModel::Simple {
            self.boot.log_backup_lsn = Lsn::ZERO;
        }
        let result = self.change_catalog(|c| {
            c.recovery_model = model;
            Ok(())
        });
        if result.is_err() {
            self.boot.log_backup_lsn = before;
        }
        result
    }
}

/// BACKUP DATABASE (full or differential) and BACKUP LOG: see the module docs.
pub fn backup_database(
    db: &crate::shared::SharedDatabase,
    req: &BackupRequest<'_>,
) -> Result<BackupOutcome, StorageError> {
    let started = Instant::now();
    // Step 1, under the lock.
    let (src, mut header, copy, pin, log_files, log_names) = {
        let g = db.lock().unwrap();
        let wal = g
            .wal()
            .ok_or_else(|| StorageError::Snapshot("the database has no log writer".into()))?;
        let boot = &g.boot;
        let (src, from) = match req.kind {
            BackupType::Log => {
                if g.catalog.recovery_model == RecoveryModel::Simple {
                    return Err(StorageError::LogBackupSimple(g.name.clone()));
                }
                let from = g
                    .log_chain_start()
                    .ok_or_else(|| StorageError::NoCurrentBackup(g.name.clone()))?;
                (None, from)
            }
            kind => {
                if kind == BackupType::Differential && boot.differential_base_lsn == Lsn::ZERO {
                    return Err(StorageError::NoDifferentialBase(g.name.clone()));
                }
                let from = match boot.min_recovery_lsn {
                    o if o != Lsn::ZERO => o.min(boot.checkpoint_lsn),
                    _ => boot.checkpoint_lsn,
                };
                (Some(g.check_source()?), from)
            }
        };
        let from_seq = from.vlf_sequence.max(1);
        // A database never checkpointed has a zero checkpoint LSN: its log starts at the
        // first VLF's first block (a zero LSN would read as "no log chain").
        let from = if from == Lsn::ZERO {
            Lsn {
                vlf_sequence: from_seq,
                block: 0,
                slot: 0,
            }
        } else {
            from
        };
        let copy = wal.backup_snapshot(from_seq)?;
        let pin = Pin {
            wal: wal.clone(),
            from: from_seq,
        };
        let based = req.kind != BackupType::Database;
        let header = SetHeader {
            position: 1,
            backup_type: req.kind,
            flags: if req.checksum { FLAG_CHECKSUM } else { 0 }
                | if req.copy_only { FLAG_COPY_ONLY } else { 0 }
                | if req.compression { FLAG_COMPRESSED } else { 0 },
            name: req.name.clone(),
            description: req.description.clone(),
            server_name: req.server_name.clone(),
            user_name: req.user_name.clone(),
            database_name: g.name.clone(),
            database_guid: boot.database_guid,
            database_version: boot.database_version,
            database_created_us: boot.created_us,
            recovery_model: g.catalog.recovery_model as u8,
            first_lsn: from,
            last_lsn: copy.end,
            checkpoint_lsn: boot.checkpoint_lsn,
            database_backup_lsn: if based {
                boot.differential_base_lsn
            } else {
                Lsn::ZERO
            },
            started_us: now_us(),
            files: g.catalog.files.clone(),
            filegroups: g
                .catalog
                .filegroups
                .iter()
                .map(|f| (f.data_space_id, f.name.clone()))
                .collect(),
            vlfs: copy.vlfs.clone(),
            differential_base_guid: if based {
                boot.differential_base_guid
            } else {
                [0; 16]
            },
            expires_us: req.expires_us,
        };
        let log_names = g
            .catalog
            .files
            .iter()
            .filter(|f| f.file_type == FileType::Log)
            .map(|f| (f.file_id, f.name.clone()))
            .collect::<Vec<_>>();
        (src, header, copy, pin, g.log_files.clone(), log_names)
    };

    // Where the set goes.
    let (mut file, set_offset, position, media_guid) = open_for_backup(req)?;
    header.position = position;
    let dev = |e| device_error(req.path, e);
    file.seek(SeekFrom::Start(set_offset)).map_err(dev)?;
    file.set_len(set_offset).map_err(dev)?;
    let mut out = Transfer::start(file, req.transfer).map_err(|e| write_error(req.path, e))?;

    // Steps 2 and 3. A backup that fails or is cancelled takes its partial set back off the
    // file, so the sets before it stay readable (invariant 1).
    let diff_base = (req.kind == BackupType::Differential).then_some(header.database_backup_lsn);
    let written = write_set(
        req,
        src.as_ref(),
        diff_base,
        &header,
        &copy,
        &log_files,
        log_names,
        &mut out,
    );
    let (file, flushed) = out.finish();
    let written = written.and_then(|w| flushed.map(|_| w).map_err(|e| write_error(req.path, e)));
    let (files_out, total) = match (written, file) {
        (Ok(w), Some(f)) => {
            sync_backup_file(&f, req.path).map_err(dev)?;
            w
        }
        (result, file) => {
            take_back_partial_set(file, req.path, set_offset);
            return Err(result.err().unwrap_or_else(|| {
                write_error(req.path, std::io::Error::other("the writer stopped"))
            }));
        }
    };
    // Step 4, while the pin still holds the log from `first_lsn`: the chain moves on.
    db.lock()
        .unwrap()
        .backup_completed(&header, &media_guid, req.copy_only, &pin)?;
    drop(pin);
    Ok(BackupOutcome {
        position,
        files: files_out,
        bytes: total,
        elapsed: started.elapsed(),
    })
}

impl Database {
    /// Step 4: a full backup (not COPY_ONLY) becomes the differential base and, under FULL
    /// recovery without a log chain, starts one at its first LSN (the pin keeps the log
    /// from there until the chain holds it); a log backup moves the chain to its last LSN.
    fn backup_completed(
        &mut self,
        h: &SetHeader,
        media_guid: &[u8; 16],
        copy_only: bool,
        pin: &Pin,
    ) -> Result<(), StorageError> {
        if copy_only {
            return Ok(());
        }
        let before = self.boot.clone();
        match h.backup_type {
            BackupType::Database => {
                self.boot.differential_base_lsn = h.last_lsn;
                self.boot.differential_base_guid = h.set_guid(media_guid);
                if self.catalog.recovery_model != RecoveryModel::Simple
                    && self.boot.log_backup_lsn == Lsn::ZERO
                {
                    pin.wal.retain_from(pin.from);
                    self.boot.log_backup_lsn = h.first_lsn;
                }
            }
            BackupType::Log => self.boot.log_backup_lsn = h.last_lsn,
            BackupType::Differential => return Ok(()),
        }
        let result = self.save_catalog();
        if result.is_err() {
            self.boot = before;
        }
        result
    }
}

/// Steps 2 and 3 of the module docs: the set header, the allocated extents, the log, the
/// end block, synced. Returns the pages per file and the bytes copied.
#[allow(clippy::too_many_arguments)]
fn write_set(
    req: &BackupRequest<'_>,
    src: Option<&CheckSource>,
    diff_base: Option<Lsn>,
    header: &SetHeader,
    copy: &crate::log_writer::LogCopy,
    log_files: &BTreeMap<u16, Arc<dyn extentdb_io::DbFile>>,
    log_names: Vec<(u16, String)>,
    out: &mut Transfer,
) -> Result<(Vec<(String, u64)>, u64), StorageError> {
    let dev = |e| write_error(req.path, e);
    // Step 2: the allocated extents, then the log.
    let plan: Vec<(u16, Vec<(u32, u32)>)> = src
        .map(|src| {
            src.files
                .iter()
                .map(|(&id, f)| (id, allocated_runs(src, id, f.size_pages)))
                .collect()
        })
        .unwrap_or_default();
    let data_bytes: u64 = plan
        .iter()
        .flat_map(|(_, r)| r.iter())
        .map(|&(_, n)| (n * PAGES_PER_EXTENT) as u64 * PAGE_SIZE as u64)
        .sum();
    let log_bytes: u64 = copy.ranges.iter().map(|r| r.2).sum();
    let total = data_bytes + log_bytes;
    out.write_all(&header.encode()).map_err(dev)?;

    let mut trailer = SetTrailer::default();
    let mut done = 0u64;
    let mut files_out: Vec<(String, u64)> = Vec::new();
    let mut pages = Vec::new();
    let mut payload = Vec::with_capacity(MAX_BLOCK_PAYLOAD);
    let cancelled = || req.cancel.is_some_and(|c| c.load(Ordering::Relaxed));
    for (file, runs) in &plan {
        let Some(src) = src else { break };
        let sf = &src.files[file];
        let mut copied = 0u64;
        for &(first_extent, extents) in runs {
            if cancelled() {
                return Err(StorageError::Cancelled);
            }
            let first = first_extent * PAGES_PER_EXTENT;
            let count = extents * PAGES_PER_EXTENT;
            pages.resize_with(count as usize, Page::zeroed);
            src.read_pages(*file, first, &mut pages)?;
            for (i, p) in pages.iter().enumerate() {
                let pid = PageId::new(*file, first + i as u32);
                if req.checksum && !p.is_unformatted() && p.verify(pid).is_err() {
                    return Err(StorageError::BackupPageError {
                        database: header.database_name.clone(),
                        page: pid,
                        file: sf.physical_name.clone(),
                    });
                }
            }
            let keep: Vec<usize> = match diff_base {
                Some(base) => changed_extents(&pages, base),
                None => (0..extents as usize).collect(),
            };
            // Runs of consecutive extents kept, a block each.
            let mut k = 0;
            while k < keep.len() {
                let mut n = 1;
                while k + n < keep.len() && keep[k + n] == keep[k] + n {
                    n += 1;
                }
                let at = keep[k] * PAGES_PER_EXTENT as usize;
                let pcount = n * PAGES_PER_EXTENT as usize;
                payload.clear();
                for p in &pages[at..at + pcount] {
                    payload.extend_from_slice(p.bytes());
                }
                let place = (*file, (first as usize + at) as u64, pcount as u32);
                write_block(out, BlockKind::Pages, place, &payload, req.compression)
                    .map_err(dev)?;
                trailer.blocks += 1;
                trailer.data_pages += pcount as u64;
                copied += pcount as u64;
                k += n;
            }
            done += count as u64 * PAGE_SIZE as u64;
            if let Some(p) = req.progress {
                p(done, total);
            }
        }
        files_out.push((sf.logical_name.clone(), copied));
    }
    let mut log_pages: Vec<(u16, u64)> = Vec::new();
    for &(file, offset, len) in &copy.ranges {
        let f = log_files
            .get(&file)
            .ok_or_else(|| StorageError::FileNotFound(file.to_string()))?;
        let mut at = 0u64;
        while at < len {
            if cancelled() {
                return Err(StorageError::Cancelled);
            }
            let n = (len - at).min(MAX_BLOCK_PAYLOAD as u64) as usize;
            payload.resize(n, 0);
            f.read_at(&mut payload, offset + at)?;
            write_block(
                out,
                BlockKind::Log,
                (file, offset + at, 0),
                &payload,
                req.compression,
            )
            .map_err(dev)?;
            trailer.blocks += 1;
            trailer.log_bytes += n as u64;
            done += n as u64;
            at += n as u64;
            if let Some(p) = req.progress {
                p(done, total);
            }
        }
        match log_pages.iter_mut().find(|(id, _)| *id == file) {
            Some((_, b)) => *b += len,
            None => log_pages.push((file, len)),
        }
    }
    for (id, name) in log_names {
        let bytes = log_pages.iter().find(|(f, _)| *f == id).map_or(0, |p| p.1);
        files_out.push((name, bytes.div_ceil(PAGE_SIZE as u64)));
    }

    // Step 3: the end block, then durability (invariant 1).
    trailer.blocks += 1;
    trailer.finished_us = now_us();
    write_block(out, BlockKind::End, (0, 0, 0), &trailer.encode(), false).map_err(dev)?;
    Ok((files_out, total))
}

/// Msg 3202's error: a write to the backup file failed.
fn write_error(path: &Path, e: std::io::Error) -> StorageError {
    StorageError::BackupWrite {
        path: path.display().to_string(),
        reason: os_error_text(&e),
    }
}

/// Step 3's durability: the file, then its directory (invariant 1).
fn sync_backup_file(f: &File, path: &Path) -> std::io::Result<()> {
    f.sync_all()?;
    if let Some(dir) = path.parent() {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// A failed or cancelled backup's partial set comes off the file (invariant 1), through
/// the file handed back by the writer, or the path if the writer kept it.
fn take_back_partial_set(file: Option<File>, path: &Path, set_offset: u64) {
    let file = file.or_else(|| OpenOptions::new().write(true).open(path).ok());
    if let Some(f) = file {
        let _ = f.set_len(set_offset);
        let _ = f.sync_all();
    }
}

/// Opens the backup file for a new set: (file, offset of the new set, its position). INIT
/// and FORMAT start after the media header (FORMAT with a new one); otherwise the set goes
/// after the last complete one (an incomplete tail is overwritten, invariant 1).
fn open_for_backup(req: &BackupRequest<'_>) -> Result<(File, u64, u32, [u8; 16]), StorageError> {
    let dev = |e| device_error(req.path, e);
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(req.path)
        .map_err(dev)?;
    let len = f.metadata().map_err(dev)?.len();
    let existing = if len >= MEDIA_HEADER_SIZE as u64 {
        let mut b = vec![0u8; MEDIA_HEADER_SIZE];
        f.read_exact(&mut b).map_err(dev)?;
        MediaHeader::decode(&b).ok()
    } else {
        None
    };
    let fresh = |f: &mut File, media: MediaHeader| -> Result<(u64, u32, [u8; 16]), StorageError> {
        f.set_len(0).map_err(dev)?;
        f.seek(SeekFrom::Start(0)).map_err(dev)?;
        f.write_all(&media.encode()).map_err(dev)?;
        Ok((MEDIA_HEADER_SIZE as u64, 1, media.media_guid))
    };
    let new_media = || {
        let mut guid = [0u8; 16];
        if let Ok(mut r) = File::open("/dev/urandom") {
            let _ = r.read_exact(&mut guid);
        }
        MediaHeader {
            media_guid: guid,
            created_us: now_us(),
            block_size: req.block_size,
            media_name: req.media_name.clone().unwrap_or_default(),
            media_description: req.media_description.clone(),
        }
    };
    let (offset, position, guid) = match existing {
        Some(m) if !req.format && !req.init => {
            check_media_name(req, &m)?;
            let sets = scan_sets(&mut f, req.path, len, false)?;
            match sets.last() {
                Some(s) => (s.offset + s.size, s.header.position + 1, m.media_guid),
                None => (MEDIA_HEADER_SIZE as u64, 1, m.media_guid),
            }
        }
        Some(m) if !req.format => {
            check_media_name(req, &m)?;
            if !req.skip {
                let sets = scan_sets(&mut f, req.path, len, false)?;
                check_expired(req.path, &sets)?;
            }
            fresh(&mut f, m)?
        }
        _ if len > 0 && !req.format && !req.init => {
            // Something that is not a backup: appending to it would corrupt it.
            return Err(media_error(req.path, "the file is not a backup file"));
        }
        _ => fresh(&mut f, new_media())?,
    };
    Ok((f, offset, position, guid))
}

/// MEDIANAME given without SKIP must be the existing media's name (Msg 4037; SQL Server
/// compares names as its default collation does, case-insensitively).
fn check_media_name(req: &BackupRequest<'_>, m: &MediaHeader) -> Result<(), StorageError> {
    match &req.media_name {
        Some(given) if !req.skip && !given.eq_ignore_ascii_case(&m.media_name) => {
            Err(StorageError::BackupMediaName {
                given: given.clone(),
                found: m.media_name.clone(),
                path: req.path.display().to_string(),
            })
        }
        _ => Ok(()),
    }
}

/// INIT without SKIP overwrites no set before its expiration date (Msg 4030).
fn check_expired(path: &Path, sets: &[SetInfo]) -> Result<(), StorageError> {
    let now = now_us();
    match sets.iter().find(|s| s.header.expires_us > now) {
        Some(s) => Err(StorageError::BackupMediaNotExpired {
            path: path.display().to_string(),
            expires_us: s.header.expires_us,
        }),
        None => Ok(()),
    }
}

/// Reads the backup sets of an open file by their headers and block headers (payloads are
/// skipped, not read). With `strict`, an incomplete or damaged set is an error; without,
/// the scan stops before it (where the next backup may overwrite it).
fn scan_sets(
    f: &mut File,
    path: &Path,
    len: u64,
    strict: bool,
) -> Result<Vec<SetInfo>, StorageError> {
    let dev = |e| device_error(path, e);
    let mut sets = Vec::new();
    let mut at = MEDIA_HEADER_SIZE as u64;
    let mut first = vec![0u8; 4096];
    'sets: while at < len {
        let fail =
            |what: String| -> Result<Vec<SetInfo>, StorageError> { Err(media_error(path, what)) };
        f.seek(SeekFrom::Start(at)).map_err(dev)?;
        if f.read_exact(&mut first).is_err() {
            break;
        }
        let hlen = match SetHeader::stored_len(&first) {
            Ok(n) if at + n <= len => n,
            Ok(_) | Err(_) if !strict => break,
            Ok(_) => return fail(format!("backup set at byte {at} is cut short")),
            Err(e) => return fail(e.to_string()),
        };
        let mut hb = vec![0u8; hlen as usize];
        f.seek(SeekFrom::Start(at)).map_err(dev)?;
        f.read_exact(&mut hb).map_err(dev)?;
        let header = match SetHeader::decode(&hb) {
            Ok(h) => h,
            Err(_) if !strict => break,
            Err(e) => return fail(e.to_string()),
        };
        let mut pos = at + hlen;
        let mut bh = [0u8; BLOCK_HEADER_SIZE];
        let mut file_bytes = std::collections::BTreeMap::new();
        loop {
            let read = f
                .seek(SeekFrom::Start(pos))
                .and_then(|_| f.read_exact(&mut bh));
            let h = match read.map(|_| BlockHeader::decode(&bh)) {
                Ok(Ok(h)) if pos + h.stored_len() <= len => h,
                _ if !strict => break 'sets,
                _ => {
                    return fail(format!(
                        "backup set {} has no valid block at byte {pos} (damaged or incomplete)",
                        header.position
                    ))
                }
            };
            if h.kind == BlockKind::End {
                let mut tb = vec![0u8; h.length as usize];
                f.read_exact(&mut tb).map_err(dev)?;
                let trailer = match SetTrailer::decode(&tb) {
                    Ok(t) if payload_crc(&tb) == h.payload_crc => t,
                    _ if !strict => break 'sets,
                    _ => return fail("end block checksum".into()),
                };
                let size = pos + h.stored_len() - at;
                sets.push(SetInfo {
                    header,
                    offset: at,
                    size,
                    trailer,
                    file_bytes,
                });
                at += size;
                break;
            }
            *file_bytes.entry(h.file_id).or_insert(0u64) += h.length as u64;
            pos += h.stored_len();
        }
    }
    Ok(sets)
}

/// Opens a backup file for reading; a symbolic link as the final component is refused
/// (ELOOP), so no link inside a backup root leads a RESTORE outside it.
pub fn open_backup_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// The media header and every complete backup set of a file (RESTORE HEADERONLY,
/// FILELISTONLY). A file that is not a backup, or whose sets are damaged, is an error.
pub fn read_backup_sets(path: &Path) -> Result<(MediaHeader, Vec<SetInfo>), StorageError> {
    let mut f = open_backup_file(path).map_err(|e| device_error(path, e))?;
    let len = f.metadata().map_err(|e| device_error(path, e))?.len();
    let mut b = vec![0u8; MEDIA_HEADER_SIZE];
    f.read_exact(&mut b)
        .map_err(|_| media_error(path, "the file is shorter than a media header"))?;
    let media = MediaHeader::decode(&b).map_err(|e| media_error(path, e.to_string()))?;
    let sets = scan_sets(&mut f, path, len, true)?;
    Ok((media, sets))
}

/// RESTORE VERIFYONLY: reads set `position` whole, checking every block's checksum and,
/// when `checksum` (or the set was made WITH CHECKSUM), every page's own checksum and id.
/// Returns the set on success.
pub fn verify_backup_set(
    path: &Path,
    position: u32,
    checksum: bool,
) -> Result<SetInfo, StorageError> {
    let (_, sets) = read_backup_sets(path)?;
    let set = sets
        .into_iter()
        .find(|s| s.header.position == position)
        .ok_or_else(|| StorageError::BackupSetNotFound {
            position,
            path: path.display().to_string(),
        })?;
    let check_pages = checksum || set.header.flags & FLAG_CHECKSUM != 0;
    let mut f = open_backup_file(path).map_err(|e| device_error(path, e))?;
    let end = set.offset + set.size;
    let mut pos = set.offset + SetHeader::stored_len(&read_at(&mut f, path, set.offset, 4096)?)?;
    let mut blocks = 0u64;
    let mut data_pages = 0u64;
    let mut log_bytes = 0u64;
    while pos < end {
        let h = BlockHeader::decode(&read_at(&mut f, path, pos, BLOCK_HEADER_SIZE)?)
            .map_err(|e| media_error(path, e.to_string()))?;
        let payload = read_at(
            &mut f,
            path,
            pos + BLOCK_HEADER_SIZE as u64,
            h.length as usize,
        )?;
        if payload_crc(&payload) != h.payload_crc {
            return Err(media_error(
                path,
                format!("block at byte {pos} fails its checksum"),
            ));
        }
        let payload = h
            .expand(&payload)
            .map_err(|e| media_error(path, e.to_string()))?;
        blocks += 1;
        match h.kind {
            BlockKind::Pages => {
                data_pages += h.count as u64;
                if check_pages {
                    for (i, b) in payload.chunks(PAGE_SIZE).enumerate() {
                        let pid = PageId::new(h.file_id, h.start as u32 + i as u32);
                        let p = Page::from_bytes(b)?;
                        if !p.is_unformatted() && p.verify(pid).is_err() {
                            return Err(StorageError::BackupPageError {
                                database: set.header.database_name.clone(),
                                page: pid,
                                file: set
                                    .header
                                    .files
                                    .iter()
                                    .find(|f| f.file_id == h.file_id)
                                    .map_or_else(String::new, |f| f.name.clone()),
                            });
                        }
                    }
                }
            }
            BlockKind::Log => log_bytes += payload.len() as u64,
            BlockKind::End => {}
        }
        pos += aligned((BLOCK_HEADER_SIZE + h.length as usize) as u64);
    }
    let t = set.trailer;
    if t.blocks != blocks || t.data_pages != data_pages || t.log_bytes != log_bytes {
        return Err(media_error(
            path,
            "the set's blocks do not add up to its end block",
        ));
    }
    Ok(set)
}

fn read_at(f: &mut File, path: &Path, at: u64, n: usize) -> Result<Vec<u8>, StorageError> {
    let mut b = vec![0u8; n];
    f.seek(SeekFrom::Start(at))
        .and_then(|_| f.read_exact(&mut b))
        .map_err(|_| media_error(path, format!("cut short at byte {at}")))?;
    Ok(b)
}
