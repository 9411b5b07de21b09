//! Crash recovery at open: analysis, redo, undo (see docs/RECOVERY.md).
//!
//! 1. Analysis and redo, in one pass over the log from the boot page's MinLSN (else its
//!    checkpoint LSN; xact.rs invariant 10) to
//!    the end the reader found from parity and checksums in its own first pass (so damage
//!    stops recovery before anything is redone), the records taken one at a time from the
//!    reader's second pass (`Redo::step`): every record is redone where its page is older
//!    (page LSN below the record's LSN) — page images, page formats, row changes and
//!    compensations alike ("repeating history") — while a table of transactions follows
//!    BEGIN, COMMIT and ABORT. Those still open at the end are losers.
//! 2. Undo, once the log writer is attached: each loser's changes are undone newest first
//!    by following its chain of `prev` LSNs, each undo logged as a compensation record;
//!    compensations met on the way jump to their `undo_next`, so a rollback cut short by a
//!    crash (during normal work or during an earlier recovery) is resumed, never repeated.
//!    An ABORT record ends each loser.
//! 3. A checkpoint makes the result durable and moves the redo start.
//!
//! Invariants:
//! 1. Redo is idempotent: a record is applied only to a page whose LSN is older, and the
//!    page then carries the record's LSN.
//! 2. The first record touching a page in the redo window restores its whole content (a
//!    page image or a format, see `xact`), so a page torn on disk is never read for redo.
//! 3. A record of a loser that is not in the log (no valid block of its VLF's use there, or
//!    not a record of that transaction) means the log was truncated under an active
//!    transaction: recovery fails (the database is marked SUSPECT) instead of guessing.
//! 4. Recovery's memory does not grow with the log: the log is read twice (log_writer.rs
//!    invariant 6), the first pass finding the end and counting the records (the progress
//!    meter's total, `RecoveryStats::records` and `log_bytes`), the second handing each
//!    record to `Redo::step`; the analysis keeps each open transaction's BEGIN and last
//!    LSN only, and undo reads a loser's records back from the log by LSN
//!    (`LogWriter::block_at`), one block at a time. What stays is bounded by the buffer
//!    pool's cap and by the number of transactions open at the crash, not by the log or
//!    by their size.
//!    (An instance opens its databases in its pool budget, `Database::open_in_budget`, so
//!    the cap holds during recovery too.)
//! 5. A clustered index root's move is whole or not at all: its log record
//!    (`LogRecordBody::RootMove`) carries both pages' images, and the catalog's root
//!    pointer (saved outside the log, after the record is durable) is put right after redo
//!    when a crash came between the two (`finish_root_moves`).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use extentdb_format::log_record::{LogRecordBody, XactId};
use extentdb_format::{Lsn, Page, PageId, PageNo};

use crate::log_writer::{find_log_end, for_each_record, LogExtent, LogWriter, RecordsByLsn, Step};
use crate::table::formatted_page;
use crate::xact::{apply_action, set_lsn, undo_record, UndoStep};
use crate::{Database, StorageError};

/// What recovery did, for the error log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryStats {
    pub records: usize,
    pub redone: usize,
    /// Page images at or after the redo start (allocation pages among them): the log held
    /// changes the crash may have left half done.
    pub page_images: usize,
    /// Extents the sweep after redo freed: marked in a GAM, owned by no IAM page (an
    /// allocation or deallocation the crash cut between its two steps).
    pub unowned_extents_freed: usize,
    /// The sweep of unowned extents did not run: a user table's IAM chain is damaged, so
    /// the extents it owns cannot be told from unowned ones (allocation.rs invariant 8).
    pub unowned_sweep_skipped: bool,
    pub committed: usize,
    pub rolled_back: usize,
    pub log_bytes: u64,
    pub analysis_redo_ms: u64,
    pub undo_ms: u64,
    /// Files found longer than their catalog size at open and cut back to it
    /// (`database::trim_to_catalog`): space a growth added that no catalog published.
    pub trimmed: Vec<TrimmedFile>,
}

/// A data or log file cut back to its catalog size at open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrimmedFile {
    /// The file's logical name.
    pub name: String,
    /// Whole or part pages the file held past its catalog size.
    pub past_pages: u64,
    /// The catalog's size it was cut to.
    pub size_pages: u32,
}

/// Where a long recovery reports its progress: `report(percent, seconds_left, phase)` at
/// most once per `every` (phases as SQL Server numbers them: 1 analysis, 2 redo, 3 undo;
/// analysis and redo share one pass here, reported as phase 2).
pub struct RecoveryProgress<'a> {
    pub every: Duration,
    pub report: &'a dyn Fn(u32, u64, u8),
}

/// Progress through recovery's work: records to redo, then loser records to undo.
struct Meter<'a> {
    progress: Option<&'a RecoveryProgress<'a>>,
    started: Instant,
    last: Instant,
    total: u64,
    done: u64,
    /// The highest percentage reported: the undo phase's work is known only after redo,
    /// and the figure never goes back.
    shown: u32,
}

impl<'a> Meter<'a> {
    fn new(progress: Option<&'a RecoveryProgress<'a>>, total: u64) -> Meter<'a> {
        let now = Instant::now();
        Meter {
            progress,
            started: now,
            last: now,
            total: total.max(1),
            done: 0,
            shown: 0,
        }
    }

    fn tick(&mut self, phase: u8) {
        self.done += 1;
        let Some(p) = self.progress else { return };
        if self.last.elapsed() < p.every {
            return;
        }
        self.last = Instant::now();
        let done = self.done.min(self.total);
        let percent = ((done * 100 / self.total) as u32).max(self.shown);
        self.shown = percent;
        let spent = self.started.elapsed().as_secs_f64();
        let left = spent * (self.total - done) as f64 / done.max(1) as f64;
        (p.report)(percent, left.ceil() as u64, phase);
    }
}

impl Database {
    /// Names the log file a LogDamaged report points into (the reader knows only its id),
    /// so the error log says where the damage is.
    fn name_log_file(&self, e: StorageError) -> StorageError {
        let StorageError::LogDamaged(text) = e else {
            return e;
        };
        let named = self.catalog.files.iter().fold(text, |t, f| {
            t.replace(
                &format!("log file {} offset", f.file_id),
                &format!("log file {} '{}' offset", f.file_id, f.physical_name),
            )
        });
        StorageError::LogDamaged(named)
    }
}

/// The transaction table analysis builds: each open transaction's BEGIN and where its
/// chain ends (undo reads the chain back from the log).
#[derive(Default)]
pub(crate) struct Analysis {
    open: BTreeMap<XactId, Lsn>,
    /// The BEGIN of each transaction still open.
    pub(crate) begins: BTreeMap<XactId, Lsn>,
    /// Records of transactions seen (BEGIN and changes): the undo phase's work as the
    /// progress meter counts it (an estimate: most of them commit). Undo reads a loser's
    /// records back from the log by LSN (invariant 4), so none is kept here.
    tracked: usize,
    committed: usize,
    max_xact: XactId,
    /// The root moves redone, in log order, for `finish_root_moves` (few: one per root a
    /// SHRINKFILE or REBALANCE moved since the checkpoint).
    root_moves: Vec<RootMoved>,
    /// The transactions the catalog's pending-DDL marks name, and those of them whose
    /// COMMIT analysis met (ddl.rs invariant 3).
    ddl_watch: BTreeSet<XactId>,
    ddl_committed: BTreeSet<XactId>,
}

impl Database {
    /// Reads the log from the checkpoint, redoes it, attaches the log writer at the end of
    /// the log, undoes the transactions the crash left open and checkpoints.
    pub(crate) fn attach_wal(
        &mut self,
        fresh: bool,
        progress: Option<&RecoveryProgress<'_>>,
    ) -> Result<(), StorageError> {
        let started = Instant::now();
        let vlfs = self.vlfs()?;
        let from = self.analysis_start().vlf_sequence.max(1);
        // Pass 1 finds and decides the end of the log (damage stops here, before any redo);
        // pass 2 hands the records to redo one at a time (invariant 4).
        let extent =
            find_log_end(&self.log_files, &vlfs, from).map_err(|e| self.name_log_file(e))?;
        let end = extent.end;
        let mut stats = RecoveryStats {
            records: extent.records as usize,
            log_bytes: extent.record_bytes,
            ..RecoveryStats::default()
        };
        let mut meter = Meter::new(progress, extent.records);
        let analysis = self
            .redo(&vlfs, &extent, &mut stats, &mut meter, None)
            .map_err(|e| self.name_log_file(e))?;
        stats.analysis_redo_ms = started.elapsed().as_millis() as u64;
        let writer = if fresh {
            LogWriter::open_fresh(self.log_files.clone(), vlfs, end)?
        } else {
            LogWriter::open(self.log_files.clone(), vlfs, end, from)?
        };
        let writer = Arc::new(writer);
        for df in self.data_files.values_mut() {
            df.wal = Some(writer.clone());
            df.database_id = self.catalog.database_id;
        }
        self.wal = Some(writer.clone());
        self.data.xacts.get_mut().next_id = analysis.max_xact + 1;
        // Before undo, which may read the moved trees by key.
        self.finish_root_moves(&analysis.root_moves)?;
        let undo_started = Instant::now();
        stats.committed = analysis.committed;
        stats.rolled_back = analysis.open.len();
        // The undo phase's work: the losers' records still to undo (an estimate: compensated
        // stretches are skipped).
        meter.total += analysis.tracked as u64;
        self.undo_losers(&analysis, &mut meter)?;
        self.settle_recovered(&analysis.ddl_committed)?;
        if stats.redone > 0 || stats.rolled_back > 0 {
            self.checkpoint()?;
        }
        stats.undo_ms = undo_started.elapsed().as_millis() as u64;
        self.data.recovery = Some(stats);
        Ok(())
    }

    /// RESTORE LOG's roll forward: analysis and redo of the log from the restored
    /// checkpoint over the VLFs `vlfs` (the backup's layout), applying the catalog as it
    /// was logged and stopping before the first commit after `rf.stop_at_us`; the pages
    /// are then written and synced. Returns the BEGIN of the oldest transaction left open.
    pub(crate) fn roll_forward(
        &mut self,
        vlfs: &[extentdb_format::log::VlfHeader],
        rf: &mut crate::restore::RollForward<'_>,
    ) -> Result<Option<Lsn>, StorageError> {
        let from = self.analysis_start().vlf_sequence.max(1);
        let extent = find_log_end(&self.log_files, vlfs, from)?;
        let mut stats = RecoveryStats::default();
        let mut meter = Meter::new(None, extent.records);
        let a = self.redo(vlfs, &extent, &mut stats, &mut meter, Some(rf))?;
        rf.redone = stats.redone;
        rf.committed = a.committed;
        // The pages to disk: the log they follow is the backup's, durable already.
        self.data.pool.flush_all(&self.data_files, None)?;
        for df in self.data_files.values() {
            df.sync()?;
        }
        Ok(a.begins.values().min().copied())
    }

    /// Analysis and redo (phase 1) over the log up to `extent`'s end, the records handed
    /// over one at a time by the reader's second pass; with `rf`, RESTORE LOG's roll forward.
    fn redo(
        &mut self,
        vlfs: &[extentdb_format::log::VlfHeader],
        extent: &LogExtent,
        stats: &mut RecoveryStats,
        meter: &mut Meter<'_>,
        rf: Option<&mut crate::restore::RollForward<'_>>,
    ) -> Result<Analysis, StorageError> {
        // Crash recovery redoes from MinLSN (xact.rs invariant 10); RESTORE LOG's roll
        // forward from the backup's last LSN, its pages being as they were there.
        let redo_from = match rf {
            Some(_) => self.boot.checkpoint_lsn,
            None => self.analysis_start(),
        };
        let mut redo = Redo {
            analysis: Analysis {
                ddl_watch: self.marking_xacts(),
                ..Analysis::default()
            },
            touched: BTreeSet::new(),
            stats,
            meter,
            rf,
            redo_from,
            analysis_from: self.analysis_start(),
        };
        // The reader borrows the log files while each step changes the database.
        let log_files = self.log_files.clone();
        for_each_record(&log_files, vlfs, extent, &mut |lsn, bytes| {
            redo.step(self, lsn, bytes)
        })?;
        for id in std::mem::take(&mut redo.touched) {
            self.data_files[&id].sync()?;
        }
        Ok(redo.analysis)
    }

    /// Redoes a page image: into the pool when the page is cached there, else in place on
    /// disk where the page there is torn, unformatted or older. Images of pages beyond a
    /// file's catalog size belong to a growth that never committed.
    fn redo_image(
        &mut self,
        lsn: Lsn,
        file_id: u16,
        page: u32,
        image: &[u8],
        touched: &mut BTreeSet<u16>,
    ) -> Result<bool, StorageError> {
        let Some(df) = self.data_files.get(&file_id) else {
            return Ok(false);
        };
        if page >= df.size_pages {
            return Ok(false);
        }
        let pid = PageId::new(file_id, page);
        let mut p = Page::from_bytes(image)?;
        set_lsn(&mut p, lsn)?;
        if self.data.pool.contains(pid) {
            let cached = self.data.pool.page(&self.data_files, None, pid)?;
            if cached.header()?.lsn >= lsn {
                return Ok(false);
            }
            self.data.pool.install(&self.data_files, None, pid, p)?;
            return Ok(true);
        }
        let on_disk = df.read_page(PageNo(page)).and_then(|p| Ok(p.header()?.lsn));
        if matches!(on_disk, Ok(l) if l >= lsn) {
            return Ok(false);
        }
        df.write_page_unlogged(PageNo(page), &mut p)?;
        touched.insert(file_id);
        Ok(true)
    }

    /// Redoes one record of the data path (invariant 1).
    fn redo_record(&mut self, lsn: Lsn, body: &LogRecordBody) -> Result<bool, StorageError> {
        match body {
            LogRecordBody::FormatPage { page, .. } => {
                if !self.redo_reaches(*page) {
                    return Ok(false);
                }
                // A torn copy on disk is simply replaced (invariant 2).
                let current = self
                    .data
                    .pool
                    .peek(&self.data_files, *page)
                    .ok()
                    .and_then(|p| p.header().ok().map(|h| h.lsn));
                if current.is_some_and(|l| l >= lsn) {
                    return Ok(false);
                }
                let p = formatted_page(body, lsn)?;
                self.data.pool.install(&self.data_files, None, *page, p)?;
                Ok(true)
            }
            LogRecordBody::PageImages { images } | LogRecordBody::RootMove { images, .. } => {
                let mut any = false;
                for (pid, bytes) in images {
                    if !self.redo_reaches(*pid) {
                        continue;
                    }
                    let current = self
                        .data
                        .pool
                        .peek(&self.data_files, *pid)
                        .ok()
                        .and_then(|p| p.header().ok().map(|h| h.lsn));
                    if current.is_some_and(|l| l >= lsn) {
                        continue;
                    }
                    let mut p = Page::from_bytes(bytes)?;
                    set_lsn(&mut p, lsn)?;
                    self.data.pool.install(&self.data_files, None, *pid, p)?;
                    any = true;
                }
                Ok(any)
            }
            LogRecordBody::RowChange { page, redo, .. }
            | LogRecordBody::IndexChange { page, redo, .. }
            | LogRecordBody::Compensation { page, redo, .. } => {
                if !self.redo_reaches(*page) {
                    return Ok(false);
                }
                let p = self.data.pool.page(&self.data_files, None, *page)?;
                if p.header()?.lsn >= lsn {
                    return Ok(false);
                }
                apply_action(p, redo)?;
                set_lsn(p, lsn)?;
                self.data.pool.mark_dirty(*page);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Whether redo applies records to `page`: a page of a file the catalog no longer
    /// has, or beyond its file's catalog size (a SHRINKFILE cut it off after the record,
    /// or a growth that never committed added it), holds nothing recovery keeps.
    fn redo_reaches(&self, page: PageId) -> bool {
        self.data_files
            .get(&page.file.0)
            .is_some_and(|df| page.page.0 < df.size_pages)
    }

    /// Completes the root moves whose catalog change a crash cut off (invariant 5): a
    /// table whose catalog entry still names the old root gets the new one (which holds
    /// the root's copy: the record's images were redone); the new root is marked allocated
    /// and the old page, while it still holds the record's emptied image, free. A move
    /// whose table is gone or whose pages changed since leaves nothing to do.
    fn finish_root_moves(&mut self, moves: &[RootMoved]) -> Result<(), StorageError> {
        for m in moves {
            let Some(t) = self.table_by_id(m.object_id).cloned() else {
                continue;
            };
            if t.root_page == m.from && self.page_lsn(m.to)? == Some(m.lsn) {
                self.change_catalog(|c| {
                    let e = c
                        .tables
                        .iter_mut()
                        .find(|x| x.object_id == m.object_id)
                        .expect("found above");
                    e.root_page = m.to;
                    Ok(())
                })?;
            }
            if self.table_by_id(m.object_id).map(|t| t.root_page) == Some(m.to) {
                self.mark_page_allocated(m.to, t.allocation_unit_id)?;
                if self.page_lsn(m.from)? == Some(m.lsn) && self.page_allocated(m.from)? {
                    self.mark_page_free(m.from)?;
                }
            }
        }
        Ok(())
    }

    /// The LSN in a page's header (the pool's copy if cached); None for a page of no file.
    fn page_lsn(&mut self, pid: PageId) -> Result<Option<Lsn>, StorageError> {
        if !self.data_files.contains_key(&pid.file.0) {
            return Ok(None);
        }
        let p = self.data.pool.peek(&self.data_files, pid)?;
        Ok(Some(p.header()?.lsn))
    }

    /// Undo (phase 2): rolls every loser back through its chain, logging compensations,
    /// each record read back from the log by LSN (invariant 4), one block held at a time.
    fn undo_losers(&mut self, a: &Analysis, meter: &mut Meter<'_>) -> Result<(), StorageError> {
        let wal = self.wal.clone().expect("attached");
        let mut log = RecordsByLsn::default();
        for (&xact, &last) in &a.open {
            let mut at = last;
            let mut prev = last;
            loop {
                meter.tick(3);
                match undo_record(&wal, &mut log, xact, at)? {
                    UndoStep::Change(before, undo) => {
                        prev = self.compensate(xact, prev, before, &undo)?;
                        at = before;
                    }
                    UndoStep::Jump(undo_next) => at = undo_next,
                    UndoStep::Begin => break,
                }
            }
            let abort = LogRecordBody::AbortXact { xact, prev };
            let lsn = wal.append(&abort.encode())?;
            wal.flush(lsn)?;
        }
        Ok(())
    }

    /// Where analysis starts, and crash recovery's redo (SQL Server's MinLSN): the lowest
    /// image floor a transaction active at the last checkpoint began under (at or before
    /// its BEGIN; xact.rs invariant 10), else the checkpoint LSN itself.
    pub(crate) fn analysis_start(&self) -> Lsn {
        let o = self.boot.min_recovery_lsn;
        if o == Lsn::ZERO {
            self.boot.checkpoint_lsn
        } else {
            o.min(self.boot.checkpoint_lsn)
        }
    }

    /// What the last open's recovery did.
    pub fn recovery_stats(&self) -> Option<&RecoveryStats> {
        self.data.recovery.as_ref()
    }
}

/// Analysis and redo as a step per record (`Database::redo` drives it from the log
/// reader's second pass): the transaction table so far, the data files written in place,
/// what was done, and RESTORE LOG's roll-forward state.
struct Redo<'s, 'm, 'f> {
    analysis: Analysis,
    /// Data files a page image was written to in place: synced at the end.
    touched: BTreeSet<u16>,
    stats: &'s mut RecoveryStats,
    meter: &'s mut Meter<'m>,
    rf: Option<&'s mut crate::restore::RollForward<'f>>,
    /// Records before it are in the data files already: analysed (their transactions may
    /// still be open) but not redone. Crash recovery redoes from `analysis_from` (MinLSN,
    /// so a page an active transaction's compensation changes is rebuilt from its image
    /// even when the checkpoint came after the change: xact.rs invariant 10); RESTORE LOG
    /// from the backup's last LSN. Before `analysis_from`, nothing matters any more.
    redo_from: Lsn,
    analysis_from: Lsn,
}

/// A clustered index root's move as its log record gave it (`LogRecordBody::RootMove`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RootMoved {
    lsn: Lsn,
    object_id: u32,
    from: PageId,
    to: PageId,
}

impl Redo<'_, '_, '_> {
    /// Analyses and redoes the record at `lsn`; breaks where RESTORE LOG's STOPAT stops
    /// (before the first commit after it, which is not applied).
    fn step(&mut self, db: &mut Database, lsn: Lsn, record: &[u8]) -> Step {
        self.meter.tick(2);
        if lsn < self.analysis_from {
            return Ok(ControlFlow::Continue(()));
        }
        let bytes = extentdb_format::log_record::expand(record)?;
        if lsn < self.redo_from {
            if let Some(body) = LogRecordBody::decode(&bytes)? {
                track(&mut self.analysis, lsn, body);
            }
            return Ok(ControlFlow::Continue(()));
        }
        if let Some((file_id, page, image)) = extentdb_format::log::decode_page_image(&bytes) {
            self.stats.page_images += 1;
            if db.redo_image(lsn, file_id, page, image, &mut self.touched)? {
                self.stats.redone += 1;
            }
            return Ok(ControlFlow::Continue(()));
        }
        let Some(body) = LogRecordBody::decode(&bytes)? else {
            return Ok(ControlFlow::Continue(()));
        };
        if let Some(rf) = self.rf.as_deref_mut() {
            match &body {
                LogRecordBody::CommitXact { time_us, .. } => {
                    if rf.stop_at_us.is_some_and(|t| *time_us > t) {
                        rf.stopped = Some(lsn);
                        return Ok(ControlFlow::Break(()));
                    }
                    rf.last_commit_us = rf.last_commit_us.max(*time_us);
                }
                LogRecordBody::CatalogImage {
                    pages,
                    total,
                    offset,
                    bytes,
                } => {
                    db.roll_catalog(rf, lsn, pages, *total, *offset, bytes)?;
                    return Ok(ControlFlow::Continue(()));
                }
                _ => {}
            }
        }
        if db.redo_record(lsn, &body)? {
            self.stats.redone += 1;
        }
        if let LogRecordBody::RootMove {
            object_id,
            from,
            to,
            ..
        } = &body
        {
            self.analysis.root_moves.push(RootMoved {
                lsn,
                object_id: *object_id,
                from: *from,
                to: *to,
            });
        }
        track(&mut self.analysis, lsn, body);
        Ok(ControlFlow::Continue(()))
    }
}

/// Analysis of one record: the transaction table and the records undo may need.
fn track(a: &mut Analysis, lsn: Lsn, body: LogRecordBody) {
    let Some(x) = body.xact() else {
        return;
    };
    a.max_xact = a.max_xact.max(x);
    match body {
        LogRecordBody::CommitXact { .. } => {
            a.committed += 1;
            if a.ddl_watch.contains(&x) {
                a.ddl_committed.insert(x);
            }
            forget(a, x);
        }
        LogRecordBody::AbortXact { .. } => forget(a, x),
        other => {
            if matches!(other, LogRecordBody::BeginXact { .. }) {
                a.begins.insert(x, lsn);
            }
            a.open.insert(x, lsn);
            a.tracked += 1;
        }
    }
}

/// A transaction ended (committed or rolled back): undo will never need its records.
fn forget(a: &mut Analysis, x: XactId) {
    a.open.remove(&x);
    a.begins.remove(&x);
}
