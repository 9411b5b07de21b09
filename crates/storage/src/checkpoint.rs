//! Checkpoints: every change before a chosen LSN made durable in the data files, so redo
//! may start there and older VLFs may be reused.
//!
//! Two ways, one rule. `Database::checkpoint` works under the database's lock from start to
//! end (recovery, shutdown, a log about to fill). `checkpoint_online` is the one sessions
//! meet: it takes the lock only for short steps, and writes pages and syncs files outside
//! it, so committers go on while a checkpoint of any size runs (SQL Server's checkpoint
//! also runs beside the workload; a checkpoint holding the lock for the whole flush is what
//! stalled commits for 300 ms in the log-growth benchmark). The background `Checkpointer`
//! runs it when the log asks for one (`log_growth::ensure_log_space`).
//!
//! An online checkpoint, step by step (L = holding the database exclusively, S = sharing
//! it, U = not holding it):
//! 1. L `checkpoint_begin`: cp := end of log. The dirty pages now are the work list; the
//!    pool's write gate starts recording; from now on a page's first change logs its image
//!    when its LSN is below cp (torn-page protection for the redo start cp).
//! 2. For each batch of the list: S copy the pages still dirty (with their LSNs); U flush
//!    the log to the batch's highest LSN, write the copies through the gate (a copy older
//!    than a version already written, by an eviction meanwhile, is dropped); S mark clean
//!    the pages unchanged since their copy. (S = with the database shared: a copy and a
//!    mark are each made under the page's frame latch, SH, and every page change is
//!    applied under it, EX, so a batch never waits for, or stops, the sessions changing
//!    rows.)
//! 3. L write each file's cached allocation pages (log first); U fsync every data file.
//! 4. L `checkpoint_end`: the log is kept from min(cp, oldest active BEGIN); the boot page
//!    records cp (unless a newer checkpoint already did) and is saved.
//!
//! Why it is correct: every change with LSN < cp was, at step 1, in a page that was clean
//! (already written) or dirty (in the list). A listed page is written in step 2 in a
//! version at least as new as at step 1, or by an eviction (also before the fsync of
//! step 3), or it was written and evicted before its batch. Writes of one page reach the
//! file in LSN order (the gate), so no older copy overwrites a newer version. Changes after
//! cp are redone from the log. A page torn by a crash during steps 2-3 is repaired from
//! the old redo start, whose image rule still holds; one changed after step 1 logs an image
//! against cp, so it is repaired from cp too.
//!
//! Invariants:
//! 1. At most one online checkpoint runs per database (`CheckpointState::running`).
//! 2. The boot page's checkpoint LSN never moves backwards.

use crate::shared::SharedDatabase;
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use extentdb_format::{Lsn, Page, PageId, PageNo};
use extentdb_io::DbFile;

use crate::buffer_pool::WriteGate;
use crate::log_writer::LogWriter;
use crate::{Database, StorageError};

/// Pages copied per lock hold (512 KB).
const BATCH_PAGES: usize = 64;
/// Pages an online checkpoint writes between syncs (4 MB).
const SYNC_EVERY_PAGES: usize = 512;

/// A database's checkpoint bookkeeping.
#[derive(Default)]
pub(crate) struct CheckpointState {
    /// An online checkpoint is between its begin and end (invariant 1).
    pub(crate) running: bool,
    /// The redo start of the checkpoint being taken: pages older than it log an image on
    /// their first change.
    pub(crate) pending_lsn: Lsn,
    /// Set when a background checkpointer serves this database.
    pub(crate) request: Option<Arc<CheckpointRequest>>,
    /// Checkpoints completed since open.
    pub(crate) completed: u64,
}

/// An online checkpoint in progress (steps 1-4 of the module docs).
pub struct CheckpointRun {
    cp: Lsn,
    pending: Vec<PageId>,
    next: usize,
    gate: Arc<WriteGate>,
    wal: Arc<LogWriter>,
}

/// Copies to write outside the lock.
pub struct CheckpointBatch {
    pages: Vec<(PageId, Page, Lsn)>,
    files: BTreeMap<u16, Arc<dyn DbFile>>,
}

impl Database {
    /// The checkpoint of a clean close (SHUTDOWN, SET OFFLINE): the identity values'
    /// reserved blocks are released first (identity.rs), so the next open continues each
    /// from its last value, then `checkpoint`.
    pub fn checkpoint_for_close(&mut self) -> Result<(), StorageError> {
        self.release_identity_blocks()?;
        self.checkpoint()
    }

    /// Checkpoint under the lock: writes every dirty page of the buffer pool (write-ahead),
    /// makes every data file durable, and records where redo starts in the boot page.
    pub fn checkpoint(&mut self) -> Result<(), StorageError> {
        self.check_writable()?;
        let Some(wal) = self.wal.clone() else {
            return Ok(());
        };
        if let Err(e) = self.data.pool.flush_all(&self.data_files, Some(&wal)) {
            self.poison();
            return Err(e);
        }
        for df in self.data_files.values() {
            df.sync()?;
        }
        let cp = wal.end_lsn();
        self.data.checkpoint.pending_lsn = self.data.checkpoint.pending_lsn.max(cp);
        self.checkpoint_record(&wal, cp)
    }

    /// Step 4's bookkeeping, shared by both ways: keeps the log from the oldest active
    /// transaction's redo floor (recovery reads from there: xact.rs invariant 10) or cp,
    /// and publishes both in the boot page.
    fn checkpoint_record(&mut self, wal: &LogWriter, cp: Lsn) -> Result<(), StorageError> {
        let oldest = self.data.xacts.get_mut().oldest_redo_floor();
        let mut keep = oldest.map_or(cp, |o| o.min(cp));
        // Under FULL recovery the log chain keeps what the next BACKUP LOG copies.
        if let Some(chain) = self.log_chain_start() {
            keep = keep.min(chain);
        }
        // Every page is durable up to cp, so older VLFs may be reused even before the boot
        // page says so (the reader starts at the lowest FSeqNo left): the save below may
        // need them.
        wal.truncate_before(keep.vlf_sequence);
        if cp < self.boot.checkpoint_lsn {
            // A newer checkpoint finished meanwhile (invariant 2).
            return Ok(());
        }
        self.boot.checkpoint_lsn = cp;
        self.boot.min_recovery_lsn = oldest.unwrap_or(Lsn::ZERO);
        self.save_catalog()?;
        self.data.checkpoint.completed += 1;
        Ok(())
    }

    /// Checkpoints completed since the database was opened.
    pub fn checkpoints_completed(&self) -> u64 {
        self.data.checkpoint.completed
    }

    /// The LSN below which a page logs its image on its next change (see `image_if_needed`).
    pub(crate) fn image_floor(&self) -> Lsn {
        self.boot
            .checkpoint_lsn
            .max(self.data.checkpoint.pending_lsn)
    }

    /// Step 1 of an online checkpoint; None when there is no log or one is running.
    pub fn checkpoint_begin(&mut self) -> Result<Option<CheckpointRun>, StorageError> {
        self.check_writable()?;
        let Some(wal) = self.wal.clone() else {
            return Ok(None);
        };
        if self.data.checkpoint.running {
            return Ok(None);
        }
        let cp = wal.end_lsn();
        self.data.checkpoint.running = true;
        self.data.checkpoint.pending_lsn = self.data.checkpoint.pending_lsn.max(cp);
        let gate = self.data.pool.gate();
        gate.start();
        Ok(Some(CheckpointRun {
            cp,
            pending: self.data.pool.dirty_pids(),
            next: 0,
            gate,
            wal,
        }))
    }

    /// Step 2, shared half: copies the next batch; None when the list is done. On an error
    /// (the database no longer writable) the caller abandons the run
    /// (`checkpoint_abandon`).
    pub fn checkpoint_next_batch(
        &self,
        run: &mut CheckpointRun,
    ) -> Result<Option<CheckpointBatch>, StorageError> {
        self.check_writable()?;
        let mut pages = Vec::new();
        while pages.len() < BATCH_PAGES && run.next < run.pending.len() {
            let pid = run.pending[run.next];
            run.next += 1;
            if let Some((p, lsn)) = self.data.pool.dirty_copy(pid) {
                pages.push((pid, p, lsn));
            }
        }
        if pages.is_empty() {
            return Ok(None);
        }
        Ok(Some(CheckpointBatch {
            pages,
            files: self.file_handles(),
        }))
    }

    /// Step 2, second shared half: pages unchanged since their copy are clean.
    pub fn checkpoint_batch_written(&self, batch: &CheckpointBatch) {
        let pool = &self.data.pool;
        for (pid, _, lsn) in &batch.pages {
            pool.mark_clean_if(*pid, *lsn);
        }
    }

    /// Step 3, locked half: allocation pages written; returns the files to sync.
    pub fn checkpoint_write_allocation(
        &mut self,
        run: &CheckpointRun,
    ) -> Result<Vec<Arc<dyn DbFile>>, StorageError> {
        self.checkpoint_check(run)?;
        for df in self.data_files.values() {
            if let Err(e) = df.write_back() {
                self.poison();
                return Err(e);
            }
        }
        Ok(self.file_handles().into_values().collect())
    }

    /// Step 4.
    pub fn checkpoint_end(&mut self, run: CheckpointRun) -> Result<(), StorageError> {
        self.checkpoint_check(&run)?;
        let result = self.checkpoint_record(&run.wal, run.cp);
        self.checkpoint_abandon(&run);
        result
    }

    /// Ends a run that failed: the database is poisoned (memory and disk may differ).
    pub fn checkpoint_failed(&mut self, run: &CheckpointRun) {
        self.poison();
        self.checkpoint_abandon(run);
    }

    fn checkpoint_abandon(&mut self, run: &CheckpointRun) {
        run.gate.stop();
        self.data.checkpoint.running = false;
    }

    fn checkpoint_check(&mut self, run: &CheckpointRun) -> Result<(), StorageError> {
        if let Err(e) = self.check_writable() {
            self.checkpoint_abandon(run);
            return Err(e);
        }
        Ok(())
    }

    fn file_handles(&self) -> BTreeMap<u16, Arc<dyn DbFile>> {
        self.data_files
            .iter()
            .map(|(id, df)| (*id, df.file.clone()))
            .collect()
    }
}

impl CheckpointBatch {
    /// Step 2, unlocked half: the log first (write-ahead), then each copy through the gate.
    pub fn write(&self, run: &CheckpointRun) -> Result<(), StorageError> {
        if let Some(max) = self.pages.iter().map(|(_, _, l)| *l).max() {
            if max > Lsn::ZERO {
                run.wal.flush(max)?;
            }
        }
        for (pid, page, lsn) in &self.pages {
            let file = self
                .files
                .get(&pid.file.0)
                .ok_or_else(|| StorageError::FileNotFound(pid.file.0.to_string()))?;
            run.gate.write(*pid, *lsn, true, || {
                file.write_at(page.bytes(), PageNo(pid.page.0).offset())?;
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Syncs the files this batch wrote to.
    pub fn sync(&self) -> Result<(), StorageError> {
        let used: std::collections::BTreeSet<u16> =
            self.pages.iter().map(|(p, _, _)| p.file.0).collect();
        for id in used {
            if let Some(f) = self.files.get(&id) {
                f.sync_data()?;
            }
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.pages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }
}

/// An online checkpoint of a shared database (steps 1-4), the lock taken per step.
/// Returns false when the database has no log.
/// Waits for one already running to finish first.
pub fn checkpoint_online(db: &SharedDatabase) -> Result<bool, StorageError> {
    let mut run = loop {
        let mut g = db.lock().unwrap();
        if g.wal.is_none() {
            return Ok(false);
        }
        if let Some(run) = g.checkpoint_begin()? {
            break run;
        }
        drop(g);
        std::thread::sleep(Duration::from_millis(5));
    };
    let fail = |run: &CheckpointRun, e: StorageError| {
        db.lock().unwrap().checkpoint_failed(run);
        Err(e)
    };
    let mut unsynced = 0usize;
    loop {
        let batch = db.read().unwrap().checkpoint_next_batch(&mut run);
        let batch = match batch {
            Ok(b) => b,
            Err(e) => {
                db.lock().unwrap().checkpoint_abandon(&run);
                return Err(e);
            }
        };
        let Some(batch) = batch else { break };
        if let Err(e) = batch.write(&run) {
            return fail(&run, e);
        }
        db.read().unwrap().checkpoint_batch_written(&batch);
        // Paced: a commit's log flush shares the device with these writes, and a cache
        // flush waits for every write queued before it; a sync every few MB keeps that
        // queue short (SQL Server throttles checkpoint I/O by its latency for the same
        // reason).
        unsynced += batch.len();
        if unsynced >= SYNC_EVERY_PAGES {
            unsynced = 0;
            if let Err(e) = batch.sync() {
                return fail(&run, e);
            }
        }
    }
    let files = db.lock().unwrap().checkpoint_write_allocation(&run)?;
    for f in &files {
        if let Err(e) = f.sync_data() {
            return fail(&run, e.into());
        }
    }
    db.lock().unwrap().checkpoint_end(run)?;
    Ok(true)
}

/// A request for a checkpoint, from the log to the background checkpointer.
#[derive(Default)]
pub(crate) struct CheckpointRequest {
    state: Mutex<RequestState>,
    cv: Condvar,
}

#[derive(Default)]
struct RequestState {
    wanted: bool,
    stop: bool,
}

impl CheckpointRequest {
    pub(crate) fn ask(&self) {
        self.state.lock().unwrap().wanted = true;
        self.cv.notify_all();
    }
}

/// A database's background checkpoint thread (SQL Server's CHECKPOINT task): runs an online
/// checkpoint whenever the log asks for one. Drop it without holding the database's lock
/// (the drop waits for a running checkpoint, which needs that lock).
pub struct Checkpointer {
    request: Arc<CheckpointRequest>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the thread and tells the database to ask it for checkpoints. `on_error`
    /// reports a failed checkpoint (the database is then poisoned and needs a reopen).
    pub fn spawn(
        db: &Arc<SharedDatabase>,
        on_error: impl Fn(&str, &StorageError) + Send + 'static,
    ) -> Checkpointer {
        let request = Arc::new(CheckpointRequest::default());
        db.lock().unwrap().data.checkpoint.request = Some(request.clone());
        let weak: Weak<SharedDatabase> = Arc::downgrade(db);
        let req = request.clone();
        let thread = std::thread::Builder::new()
            .name("checkpoint".into())
            .spawn(move || loop {
                {
                    let mut st = req.state.lock().unwrap();
                    while !st.wanted && !st.stop {
                        st = req.cv.wait_timeout(st, Duration::from_secs(1)).unwrap().0;
                        if weak.strong_count() == 0 {
                            return;
                        }
                    }
                    if st.stop {
                        return;
                    }
                    st.wanted = false;
                }
                let Some(db) = weak.upgrade() else { return };
                if let Err(e) = checkpoint_online(&db) {
                    let name = db.lock().unwrap().name.clone();
                    on_error(&name, &e);
                }
            })
            .expect("spawn checkpoint thread");
        Checkpointer {
            request,
            thread: Some(thread),
        }
    }
}

impl Checkpointer {
    /// True once the thread has ended (its database is gone).
    pub fn finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.request.state.lock().unwrap().stop = true;
        self.request.cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
