//! Log space: checkpoints that truncate, log autogrowth by FILEGROWTH up to MAXSIZE, and
//! growth prepared in the background so that no committer waits for initialization.
//!
//! SQL Server grows a full log while the transaction that needs the space waits for the new
//! space to be zeroed (2022 skips that only for autogrowths up to 64 MB). extentdb watches
//! the log instead: when a checkpoint cannot free enough of it (a long transaction holds it),
//! a background thread extends the log file by the next growth and initializes it (zeros in
//! 1 MiB steps, each synced, so a concurrent commit's fdatasync waits for one step at most)
//! and writes the new VLFs' headers. When the log is then really short of space, the
//! growth is committed in a few milliseconds: the catalog records the new size and the log
//! writer takes the new VLFs. Only if the log fills before the preparation finished does a
//! change wait for it.
//!
//! State: Idle --log half held--> Preparing --thread done--> Ready --log short--> Idle
//! (committed); Preparing --log short--> (wait) --> Ready --> Idle.
//!
//! Invariants:
//! 1. Space past the catalog's size is not part of the log (`Database::vlfs` reads only up
//!    to it), so a crash while a growth is prepared, or before it is committed, changes
//!    nothing.
//! 2. A growth never passes MAXSIZE; FILEGROWTH 0 means never.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use extentdb_format::file_header::FileType;
use extentdb_format::{Lsn, PAGE_SIZE};
use extentdb_io::DbFile;

use crate::errorlog::ErrorLog;
use crate::file_init::{self, InitLog, InitPolicy, SpaceKind};
use crate::log_file;
use crate::{Database, StorageError};

/// Log written since the last checkpoint that triggers an automatic one (redo then reads
/// at most about this much).
const RECOVERY_INTERVAL_BYTES: u64 = 256 << 20;

/// Zero-writing step of a background preparation.
const PACE_BYTES: u64 = 256 << 10;

/// How growths initialize space and where they report (set by the SQL layer per statement
/// from the instance's setting and the session's trace flags).
#[derive(Clone)]
pub struct GrowthEnv {
    pub policy: InitPolicy,
    pub errorlog: Option<Arc<ErrorLog>>,
    pub source: String,
    /// Prepare log growths (and, with IFI off, data-file growths) in the background ahead
    /// of need (extentdb's default). Off, a growth is initialized when the space is needed,
    /// while the change waits, as SQL Server does: the benchmarks measure both.
    pub prepare_ahead: bool,
    /// Trace flags 1165 and 3605: proportional fill recalculations go to the error log.
    pub trace_fill: bool,
    /// Consecutive extents a file with skip target 1 takes: 1, or 64 under -E.
    pub e_extents: u32,
}

impl Default for GrowthEnv {
    fn default() -> Self {
        GrowthEnv {
            policy: InitPolicy {
                instant: true,
                trace_zeroing: false,
            },
            errorlog: None,
            source: "spid7s".into(),
            prepare_ahead: true,
            trace_fill: false,
            e_extents: 1,
        }
    }
}

/// The size a file grows to automatically: by FILEGROWTH (pages, or percent of its size,
/// at least `min_pages`), capped by MAXSIZE; None when FILEGROWTH is 0 (invariant 2).
pub(crate) fn growth_target(
    f: &extentdb_format::catalog::FileEntry,
    min_pages: u32,
) -> Option<u32> {
    if f.growth == 0 {
        return None;
    }
    let by = if f.is_percent_growth {
        ((f.size_pages as u64 * f.growth as u64) / 100).max(min_pages as u64) as u32
    } else {
        f.growth
    };
    let mut to = f.size_pages.saturating_add(by);
    if f.max_size_pages > 0 {
        to = to.min(f.max_size_pages as u32);
    }
    Some(to)
}

/// A growth environment as an initialization log.
pub(crate) struct EnvSink(Option<Arc<ErrorLog>>, String);
impl EnvSink {
    pub fn new(env: &GrowthEnv) -> EnvSink {
        EnvSink(env.errorlog.clone(), env.source.clone())
    }
}
impl InitLog for EnvSink {
    fn log(&self, text: &str) {
        if let Some(l) = &self.0 {
            l.write(&self.1, text);
        }
    }
}

/// A growth prepared (or being prepared) past the catalog's size.
struct Prepared {
    file_id: u16,
    from_pages: u32,
    to_pages: u32,
}

#[derive(Default)]
pub(crate) struct LogGrowth {
    pub env: GrowthEnv,
    preparing: Option<(Prepared, JoinHandle<Result<u64, StorageError>>)>,
    /// Set to stop a preparation early (database closed or dropped).
    cancel: Arc<AtomicBool>,
    /// Log autogrowths committed since open, and the longest wait a change had for one.
    pub growths: u64,
    pub longest_wait_us: u64,
}

impl Drop for LogGrowth {
    /// A database closing stops its preparation within one step and waits for it, so no
    /// thread writes into a file that is about to be closed or removed.
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        if let Some((_, handle)) = self.preparing.take() {
            let _ = handle.join();
        }
    }
}

impl Database {
    /// Sets how growths initialize space and where they report.
    pub fn set_growth_env(&mut self, env: GrowthEnv) {
        let e_changed = env.e_extents != self.data.growth.env.e_extents;
        self.data.growth.env = env;
        // The round robin counted at open took the default; -E changes how it runs.
        if e_changed && !self.data.fill.is_empty() && self.recalculate_proportional_fill().is_err()
        {
            self.data.fill.clear();
        }
    }

    /// (log autogrowths since open, longest wait for one in µs).
    pub fn log_growth_stats(&self) -> (u64, u64) {
        (self.data.growth.growths, self.data.growth.longest_wait_us)
    }

    /// True when `ensure_log_space` has something to do: a checkpoint to bound recovery,
    /// or fewer than half the VLFs (at least two) free. A session sharing the database
    /// leaves that to one holding it exclusively.
    pub(crate) fn log_needs_attention(&self) -> bool {
        let Some(wal) = &self.wal else {
            return false;
        };
        let space = wal.space();
        (space.used_bytes > RECOVERY_INTERVAL_BYTES && self.checkpoint_would_truncate())
            || space.free_vlfs < 2usize.max(space.vlf_count / 2)
    }

    /// Makes room in the log before a change: checkpoints when a checkpoint can free a VLF,
    /// prepares a growth in the background when the log stays half held, and commits a
    /// growth when fewer than two VLFs are free. With no growth possible the change goes on
    /// and finds the log full (error 9002).
    pub(crate) fn ensure_log_space(&mut self) -> Result<(), StorageError> {
        let Some(wal) = self.wal.clone() else {
            return Ok(());
        };
        if !self.log_needs_attention() {
            return Ok(());
        }
        // Indirect checkpoint: bound the log redo must read after a crash, whatever the
        // log's size (SQL Server bounds it by a target recovery time).
        if wal.used_bytes() > RECOVERY_INTERVAL_BYTES && self.checkpoint_would_truncate() {
            self.checkpoint_soon(false)?;
        }
        let vlfs = wal.vlf_count();
        let low = 2usize.max(vlfs / 2);
        if wal.free_vlfs() >= low {
            return Ok(());
        }
        // When a background checkpoint will free the log, no growth for now.
        if self.checkpoint_would_truncate() && !self.checkpoint_soon(wal.free_vlfs() < 2)? {
            return Ok(());
        }
        if wal.free_vlfs() >= low {
            return Ok(());
        }
        let short = wal.free_vlfs() < 2;
        if self.data.growth.preparing.is_none() && (self.data.growth.env.prepare_ahead || short) {
            if let Some((file_id, from, to)) = self.next_log_growth() {
                self.start_preparing(file_id, from, to)?;
            }
        }
        if wal.free_vlfs() < 2 && self.data.growth.preparing.is_some() {
            self.commit_prepared_growth()?;
        }
        Ok(())
    }

    /// Asks the background checkpointer for a checkpoint, or takes one now when there is
    /// none or `now` (the log is about to fill). True when a checkpoint was taken here.
    fn checkpoint_soon(&mut self, now: bool) -> Result<bool, StorageError> {
        let st = &self.data.checkpoint;
        if let (Some(req), false) = (&st.request, now) {
            if !st.running {
                req.ask();
            }
            return Ok(false);
        }
        self.checkpoint()?;
        Ok(true)
    }

    /// Commits the growth being prepared, or prepares one and commits it (the change waits);
    /// false when the log may not grow any more.
    pub(crate) fn grow_log_now(&mut self) -> Result<bool, StorageError> {
        if self.data.growth.preparing.is_none() {
            let Some((file_id, from, to)) = self.next_log_growth() else {
                return Ok(false);
            };
            self.start_preparing(file_id, from, to)?;
        }
        let before = self.log_bytes();
        self.commit_prepared_growth()?;
        Ok(self.log_bytes() > before)
    }

    /// sys.databases.log_reuse_wait and _desc: what keeps the oldest needed VLF from being
    /// reused. A FULL-recovery database behaves as SIMPLE until its first full backup (as
    /// in SQL Server); after it, the log waits for BACKUP LOG (LOG_BACKUP).
    pub fn log_reuse_wait(&self) -> (u8, &'static str) {
        let Some(wal) = &self.wal else {
            return (0, "NOTHING");
        };
        let current = wal.current_sequence();
        let oldest = self.data.xacts.lock().oldest_redo_floor();
        if let Some(chain) = self.log_chain_start() {
            let before_oldest = oldest.is_none_or(|o| chain < o);
            if chain.vlf_sequence < current && before_oldest {
                return (2, "LOG_BACKUP");
            }
        }
        match oldest {
            Some(oldest) if oldest.vlf_sequence < current => (4, "ACTIVE_TRANSACTION"),
            _ if wal.free_vlfs() < 2 && self.checkpoint_would_truncate() => (1, "CHECKPOINT"),
            _ => (0, "NOTHING"),
        }
    }

    /// True when a checkpoint would move the redo start (so it could free VLFs).
    fn checkpoint_would_truncate(&self) -> bool {
        let Some(wal) = &self.wal else {
            return false;
        };
        let mut keep = wal.end_lsn();
        if let Some(oldest) = self.data.xacts.lock().oldest_redo_floor() {
            keep = keep.min(oldest);
        }
        if let Some(chain) = self.log_chain_start() {
            keep = keep.min(chain);
        }
        let kept = match self.boot.min_recovery_lsn {
            Lsn::ZERO => self.boot.checkpoint_lsn,
            o => o.min(self.boot.checkpoint_lsn),
        };
        keep.vlf_sequence > kept.vlf_sequence
    }

    /// The next autogrowth of the log: the first log file that may grow, by its FILEGROWTH
    /// (pages or percent of its size), capped by MAXSIZE (invariant 2).
    fn next_log_growth(&self) -> Option<(u16, u32, u32)> {
        self.catalog
            .files
            .iter()
            .filter(|f| f.file_type == FileType::Log)
            .find_map(|f| {
                growth_target(f, 64)
                    .filter(|&to| to > f.size_pages)
                    .map(|to| (f.file_id, f.size_pages, to))
            })
    }

    fn start_preparing(&mut self, file_id: u16, from: u32, to: u32) -> Result<(), StorageError> {
        let file: Arc<dyn DbFile> = self.log_files[&file_id].clone();
        let env = self.data.growth.env.clone();
        let vlfs =
            log_file::vlf_count_for_growth((to - from) as u64 * PAGE_SIZE as u64, self.log_bytes());
        let cancel = self.data.growth.cancel.clone();
        let wal = self.wal.clone();
        // The growth is needed when fewer than two VLFs are free (`ensure_log_space`).
        let reserve =
            2 * self.log_bytes() / wal.as_ref().map_or(1, |w| w.vlf_count().max(1)) as u64;
        let handle = std::thread::spawn(move || {
            // Rest while, at half speed, the growth would still be ready long before the
            // log fills at its current rate (a moving average).
            let seen = std::cell::Cell::new((
                Instant::now(),
                wal.as_ref().map_or(0, |w| w.free_bytes()),
                0f64,
            ));
            let may_rest = |left: u64, took: std::time::Duration| {
                let Some(w) = &wal else { return false };
                let free = w.free_bytes();
                let (t0, f0, rate) = seen.get();
                let dt = t0.elapsed().as_secs_f64().max(1e-6);
                let sample = f0.saturating_sub(free) as f64 / dt;
                let rate = 0.9 * rate + 0.1 * sample;
                seen.set((Instant::now(), free, rate));
                let zero_rate = PACE_BYTES as f64 / took.as_secs_f64().max(1e-6);
                let finish_resting_s = 2.0 * left as f64 / zero_rate;
                let full_in_s = if rate > 0.0 {
                    free.saturating_sub(reserve) as f64 / rate
                } else {
                    f64::INFINITY
                };
                2.0 * finish_resting_s < full_in_s
            };
            let started = Instant::now();
            let sink = EnvSink::new(&env);
            file_init::initialize_paced(
                file.as_ref(),
                SpaceKind::Log,
                from,
                to,
                env.policy,
                &sink,
                Some(file_init::Pace {
                    bytes: PACE_BYTES,
                    cancel: &cancel,
                    may_rest: &may_rest,
                }),
            )?;
            let (a, b) = (from as u64 * PAGE_SIZE as u64, to as u64 * PAGE_SIZE as u64);
            log_file::write_vlf_headers(
                file.as_ref(),
                file_id,
                &log_file::layout(a, b, vlfs),
                false,
            )?;
            file.sync_data()?;
            Ok(started.elapsed().as_millis() as u64)
        });
        self.data.growth.preparing = Some((
            Prepared {
                file_id,
                from_pages: from,
                to_pages: to,
            },
            handle,
        ));
        Ok(())
    }

    /// Waits for the prepared growth (normally finished long before) and commits it.
    fn commit_prepared_growth(&mut self) -> Result<(), StorageError> {
        let Some((p, handle)) = self.data.growth.preparing.take() else {
            return Ok(());
        };
        let waited = Instant::now();
        let prepared = handle.join().unwrap_or(Err(StorageError::LogFailed));
        let wait_us = waited.elapsed().as_micros() as u64;
        let prepare_ms = match prepared {
            Ok(ms) => ms,
            Err(StorageError::Io(source)) => return self.log_growth_refused(&p, &source),
            Err(e) => return Err(e),
        };
        let idx = self
            .catalog
            .files
            .iter()
            .position(|f| f.file_id == p.file_id)
            .expect("log file exists");
        if self.catalog.files[idx].size_pages != p.from_pages {
            // A manual growth came first; this preparation is stale.
            return Ok(());
        }
        self.catalog.files[idx].size_pages = p.to_pages;
        if let Err(e) = self.save_catalog() {
            self.catalog.files[idx].size_pages = p.from_pages;
            return Err(e);
        }
        self.attach_log_growth(p.file_id, p.from_pages, p.to_pages)?;
        let g = &mut self.data.growth;
        g.growths += 1;
        g.longest_wait_us = g.longest_wait_us.max(wait_us);
        let name = self.catalog.files[idx].name.clone();
        EnvSink::new(&g.env).log(&format!(
            "Autogrow of file '{name}' in database '{}' took {} milliseconds (prepared in the background; the log waited {} ms).",
            self.name,
            prepare_ms,
            wait_us / 1000
        ));
        Ok(())
    }

    /// The disk refused a log growth's space (ENOSPC ...): the space lay past the catalog's
    /// size, never published, so it is cut away and the log simply did not grow; the change
    /// that needed it finds the log full (9002). The ERRORLOG says why (5149).
    fn log_growth_refused(
        &mut self,
        p: &Prepared,
        source: &extentdb_io::IoError,
    ) -> Result<(), StorageError> {
        let file = self.log_files[&p.file_id].clone();
        let path = file.path().display().to_string();
        EnvSink::new(&self.data.growth.env)
            .log(&crate::proportional_fill::expand_failed_text(&path, source));
        file.set_len(p.from_pages as u64 * PAGE_SIZE as u64)?;
        file.sync_data()?;
        Ok(())
    }

    /// Waits for a growth being prepared and forgets it (a manual growth takes its place).
    pub(crate) fn discard_prepared_growth(&mut self) {
        let g = &mut self.data.growth;
        if let Some((_, handle)) = g.preparing.take() {
            g.cancel.store(true, Ordering::Relaxed);
            let _ = handle.join();
            g.cancel = Arc::new(AtomicBool::new(false));
        }
    }

    /// Gives the log writer the VLFs a committed growth of `file_id` wrote.
    pub(crate) fn attach_log_growth(
        &mut self,
        file_id: u16,
        from_pages: u32,
        to_pages: u32,
    ) -> Result<(), StorageError> {
        let Some(wal) = self.wal.clone() else {
            return Ok(());
        };
        let file = self.log_files[&file_id].clone();
        let from = from_pages as u64 * PAGE_SIZE as u64;
        let new: Vec<_> =
            log_file::read_vlfs_upto(file.as_ref(), file_id, to_pages as u64 * PAGE_SIZE as u64)?
                .into_iter()
                .filter(|v| v.start_offset >= from)
                .collect();
        wal.add_vlfs(&new);
        Ok(())
    }
}
