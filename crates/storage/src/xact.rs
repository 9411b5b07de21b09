//! Transactions: their log chains, the changes they made (for rollback), commit and
//! rollback, and the write-ahead path every page change takes.
//!
//! A transaction logs BEGIN with its first change (read-only transactions log nothing).
//! Every change appends one `RowChange` record carrying redo and undo actions, applies the
//! redo action to the cached page and stamps the page with the record's LSN. Rollback
//! walks the changes backwards and, for each, logs a compensation record (CLR) and applies
//! its undo action; a CLR's `undo_next` is the change's `prev`, so an interrupted rollback
//! (or recovery) never undoes anything twice.
//!
//! Transaction life: (none) --first change--> active --COMMIT--> committed (durable once the
//! log is flushed to the commit LSN, which the caller does outside the database lock, so
//! concurrent committers share a flush) ; active --ROLLBACK--> CLRs + ABORT --> ended.
//!
//! Torn-page protection: the first change to a page whose LSN is older than the image
//! floor (the last checkpoint's LSN, or the one being taken) logs the page's whole image
//! first, so redo never needs the on-disk copy of a page that a crash may have torn
//! mid-write. Compensations log no image: redo starts early enough for them (invariant 10).
//!
//! Invariants:
//! 1. A change is logged before the page is changed, and the page carries its LSN.
//! 2. A transaction's undoable changes (logged, not yet compensated) number `undoable`; a
//!    savepoint is such a count. The oldest of them are kept in `changes`, in LSN order,
//!    while their undo actions fit `UNDO_MEMORY_BYTES`; the rest, newer, are only in the
//!    log: the newest at `undo_next`, each reaching the next older through its `prev`
//!    (a compensation met on the way jumps to its `undo_next`), so rollback reads them back
//!    by LSN (`LogWriter::block_at`), newest first, the last one's `prev` leading to the
//!    newest change of `changes`. A change goes to `changes` only while none is in the log
//!    alone. A transaction's memory for undo is so bounded, whatever its size.
//! 3. The checkpoint never lets the log be reused past the first LSN of the oldest active
//!    transaction (see `Database::checkpoint`).
//! 4. A change is refused (log full, error 9002) unless the log's free space also covers
//!    the compensation records that rolling back every active transaction would write, so
//!    a rollback, or the undo phase of recovery, never finds the log full.
//! 5. A table an open transaction has changed is not dropped or truncated before that
//!    transaction ends, so a rollback never compensates into pages that have changed
//!    owner (asserted by `drop_table` and `truncate_table`: `assert_no_open_changes`).
//!    The SQL layer keeps it true with the table's Sch-M lock, which waits for every
//!    other transaction's lock on the table (each change is made under one), and by
//!    refusing (226) DDL on a table the session's own transaction changed.
//! 6. A page change that is logged is in the pool, or the database is poisoned (refuses
//!    changes until reopened and recovered): a change logged but not applied, and a logged
//!    whole page (a split's images, a format) the pool failed to install (the eviction
//!    making room for it could not write its victim), poison it. Otherwise other sessions
//!    would go on from the stale copy and log it: a later split logging a parent without
//!    the separator of the split before it (an orphaned leaf, CHECKDB 8977 and 8981).
//! 7. Undo runs sharing the database beside other sessions' row operations: a
//!    compensation holds its page's latch from finding the slot (a B-tree row by key,
//!    in a leaf found by a descent no split crossed, tree_change.rs invariant 2: other
//!    sessions' inserts into the leaf move slots, and their splits move rows) to applying
//!    its logged CLR, and a transaction is undone by its own session only. A change stays
//!    among the transaction's changes until its compensation is applied, so a ghost
//!    cleanup beside it keeps the ghost the compensation turns live again.
//! 8. A row move is two changes made sharing the database (access.rs invariant 3): the
//!    first is logged only if the log also has room for the second (`also`), and that
//!    room stays reserved for the transaction (`held_for_next`) until its next change,
//!    which spends it: other sessions' changes meanwhile cannot take it, so the second
//!    change never finds the log full.
//! 9. Nothing computed from a page in the pool is logged once the database is poisoned:
//!    a page's copy there may be stale (invariant 6), and a record found on it (a
//!    compensation's slot) would not fit the page as the log has it, so recovery could not
//!    redo it ("slot N is beyond the slot count M"). Every such record is logged after
//!    `check_writable`, under the latch of its page (a row change's, `try_log_change`; a
//!    compensation's, `compensate`; a split's or ghost cleanup's, `log_system_images`),
//!    and whatever leaves a page stale poisons the database before letting that latch go.
//!    So a rollback on a poisoned database stops, its transaction left to recovery.
//! 10. A compensation never needs its page's image: crash recovery redoes from MinLSN, the
//!     lowest image floor an active transaction began under (`redo_floor`, taken when its
//!     BEGIN is logged; the checkpoint records it in the boot page, `min_recovery_lsn`,
//!     and keeps the log from it). Every page a transaction changes (or a split moves its
//!     rows to) has an LSN past its BEGIN, every change at or after a floor was made under
//!     that floor or a later one, and so a page's first change after MinLSN logged its
//!     image (or formatted it): redo rebuilds the page whole before it meets the
//!     compensation, even when a power cut tore the page's write after a rollback whose
//!     compensation was its first change since the last checkpoint. Asserted before each
//!     compensation is logged (`assert_compensation_floor`). The cost is redo work, not
//!     log: a transaction open across checkpoints makes recovery redo from the checkpoint
//!     before its BEGIN.

use std::collections::{BTreeMap, BTreeSet};

use extentdb_format::catalog::TableEntry;
use extentdb_format::log_record::{self, KeyedUndo, LogRecordBody, SlotAction, XactId};
use extentdb_format::{data_page, Lsn, Page, PageId, PageType};

use crate::log_writer::{LogWriter, RecordsByLsn};
use crate::{Database, StorageError};

/// Bytes of undo actions one transaction keeps in memory (invariant 2): its changes past
/// them are read back from the log when it rolls back. 4 MiB, as a 256 MB instance can
/// give each of dozens of sessions.
pub const UNDO_MEMORY_BYTES: usize = 4 << 20;

/// How one change is undone: on its page and slot (heaps), or found again by key in a
/// clustered index of allocation unit `.0` (rows move between pages there).
#[derive(Debug, Clone)]
pub(crate) enum Undo {
    Slot(PageId, SlotAction),
    Keyed(u64, KeyedUndo),
}

/// One undoable change of a transaction.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub prev: Lsn,
    pub undo: Undo,
}

/// Memory a change undone by `undo` takes in `XactState::changes` (invariant 2).
fn change_bytes(undo: &Undo) -> usize {
    let record = match undo {
        Undo::Slot(_, SlotAction::Insert { record, .. })
        | Undo::Slot(_, SlotAction::Replace { record, .. }) => record.len(),
        Undo::Slot(..) => 0,
        Undo::Keyed(_, k) => k.record().len(),
    };
    std::mem::size_of::<Change>() + record
}

#[derive(Debug, Default)]
pub(crate) struct XactState {
    /// LSN of BEGIN, once the first change logged it.
    pub first_lsn: Option<Lsn>,
    /// The image floor when BEGIN was logged (invariant 10): no checkpoint records a redo
    /// start past it while the transaction is active, so its compensations need no image.
    redo_floor: Lsn,
    pub last_lsn: Lsn,
    /// The oldest undoable changes, while they fit the bound (invariant 2), and their bytes.
    pub changes: Vec<Change>,
    change_bytes: usize,
    /// Undoable changes: those of `changes`, then those only in the log (invariant 2).
    undoable: usize,
    /// The newest undoable change's LSN (where rollback reads while `undoable` exceeds
    /// `changes.len()`).
    undo_next: Lsn,
    /// The clustered indexes (allocation units) of changes kept only in the log: ghost
    /// cleanup keeps all their ghosts, not knowing which of them undo needs.
    spilled_units: BTreeSet<u64>,
    /// Log bytes kept free for the compensation records a rollback of this transaction
    /// would write (invariant 4), and `held_for_next`.
    pub reserved_bytes: u64,
    /// Of `reserved_bytes`, what the last change kept for the next (a row move's second
    /// change, invariant 8): that change spends it.
    held_for_next: u64,
    /// The allocation units this transaction changed: DDL on their tables waits for it to
    /// end (invariant 5).
    pub units: BTreeSet<u64>,
    /// It marked a table's CREATE or DROP in the catalog: its end settles them (ddl.rs).
    pub marked_ddl: bool,
    /// A row operation that needed something after its base change (index.rs invariant
    /// 1): how far it got.
    pub(crate) row_progress: Option<crate::index::RowProgress>,
}

impl XactState {
    /// Records a change logged at `lsn`: kept in `changes` while nothing is in the log
    /// alone and it fits `limit` bytes, else only counted (invariant 2).
    fn add_change(&mut self, lsn: Lsn, prev: Lsn, undo: &Undo, limit: usize) {
        let size = change_bytes(undo);
        if self.changes.len() == self.undoable && self.change_bytes + size <= limit {
            self.change_bytes += size;
            self.changes.push(Change {
                prev,
                undo: undo.clone(),
            });
        } else if let Undo::Keyed(au, _) = undo {
            self.spilled_units.insert(*au);
        }
        self.undoable += 1;
        self.undo_next = lsn;
    }

    /// The newest undoable change if `changes` holds it (a copy: it stays there until
    /// compensated, `compensated`); else the LSN of the log record to read it from.
    fn next_undo(&self) -> Result<Change, Lsn> {
        debug_assert!(self.undoable >= self.changes.len(), "invariant 2");
        if self.undoable > self.changes.len() {
            return Err(self.undo_next);
        }
        Ok(self.changes.last().expect("an undoable change").clone())
    }

    /// The newest undoable change compensated by the CLR at `lsn`, its `prev` the next to
    /// undo: taken out of `changes` when they held it. Only now, so that ghost cleanup
    /// (`Database::ghosts_needed`) keeps the ghost a B-tree compensation unghosts until
    /// the compensation is applied (btree.rs invariant 4).
    fn compensated(&mut self, lsn: Lsn, undo_next: Lsn) {
        if self.undoable == self.changes.len() {
            let c = self.changes.pop().expect("an undoable change");
            self.change_bytes -= change_bytes(&c.undo);
        }
        self.last_lsn = lsn;
        self.undoable -= 1;
        self.undo_next = undo_next;
    }
}

/// The active transactions of one database.
#[derive(Debug, Default)]
pub(crate) struct XactTable {
    pub next_id: XactId,
    pub active: BTreeMap<XactId, XactState>,
    /// Bytes of undo actions a transaction keeps in memory: `UNDO_MEMORY_BYTES` unless a
    /// test lowered it (`Database::set_undo_memory_bytes`).
    undo_memory_bytes: Option<usize>,
}

impl XactTable {
    /// Whether `bytes` more log leave every active transaction's rollback reservation free
    /// besides the margin, and for each transaction what its session may append unchecked
    /// before its next change (a page image, a page format, an allocation's two map
    /// images) while sharing the database (invariant 4). Checked under the table's latch,
    /// with the append that follows, so two sessions never pass it on the same space.
    ///
    /// A change that spends `held` bytes its transaction's last change kept for it
    /// (invariant 8) counts the reservations without them, and the margin without the
    /// sessions' unchecked allowance: the first change's check left both free for it.
    fn log_keeps_reservations(&self, wal: &LogWriter, bytes: u64, held: u64) -> bool {
        let reserved: u64 = self.active.values().map(|x| x.reserved_bytes).sum();
        let unchecked = match held {
            0 => UNCHECKED_BYTES_PER_XACT * self.active.len() as u64,
            _ => 0,
        };
        wal.free_bytes() >= bytes + (reserved - held) + LOG_MARGIN_BYTES + unchecked
    }

    /// The first LSN of the oldest active transaction that has logged anything.
    pub fn oldest_first_lsn(&self) -> Option<Lsn> {
        self.active.values().filter_map(|x| x.first_lsn).min()
    }

    /// Where redo must start for the active transactions' compensations to need no page
    /// image (invariant 10): the lowest image floor any of them began under (at or before
    /// its BEGIN). None when no active transaction has logged anything.
    pub fn oldest_redo_floor(&self) -> Option<Lsn> {
        self.active
            .values()
            .filter(|x| x.first_lsn.is_some())
            .map(|x| x.redo_floor)
            .min()
    }
}

/// The lowest LSN a record can have (VLF sequence numbers start at 1): the redo floor of a
/// transaction that began before any checkpoint (invariant 10), and never zero, which the
/// boot page's MinLSN field reads as "no transaction was active".
const LOG_FIRST_LSN: Lsn = Lsn {
    vlf_sequence: 1,
    block: 0,
    slot: 0,
};

/// Log space kept free besides reservations: block headers, sector padding, VLF end
/// markers and ABORT records.
const LOG_MARGIN_BYTES: u64 = 128 << 10;
/// Log a session sharing the database may append between two reservation checks without a
/// check of its own: a page's image (torn-page protection), a page format and the two
/// allocation-page images of a new extent, each at most a page.
const UNCHECKED_BYTES_PER_XACT: u64 = 4 * (8 << 10);

/// Log bytes at most of one change of a record of `record_len` bytes and of its
/// compensation's reservation: what a row move's first change keeps free in the log for
/// its second (access.rs invariant 3).
pub(crate) fn change_bytes_bound(record_len: usize) -> u64 {
    2 * (record_len as u64 + 64 + 512)
}

/// Log bytes a compensation record for `undo` may take, padding to a sector included.
fn clr_reservation(undo: &SlotAction) -> u64 {
    let record = match undo {
        SlotAction::Insert { record, .. } | SlotAction::Replace { record, .. } => record.len(),
        _ => 0,
    };
    (record + 64 + 512) as u64
}

/// Applies one slot action to a page (redo of a change or of a CLR).
pub(crate) fn apply_action(page: &mut Page, action: &SlotAction) -> Result<(), StorageError> {
    // B-tree pages (index id > 0) keep slots in key order; heap pages keep slot numbers.
    let sorted = {
        let h = page.header()?;
        h.index_id > 0 || h.page_type == PageType::Index
    };
    match action {
        SlotAction::Insert { slot, record } => {
            if sorted {
                data_page::insert_shifted(page, *slot, record)?
            } else {
                data_page::insert_at(page, *slot, record)?
            }
        }
        SlotAction::Remove { slot } => {
            if sorted {
                data_page::delete_shifted(page, *slot)?;
            } else {
                data_page::delete_at(page, *slot)?;
            }
        }
        SlotAction::Ghost { slot } => data_page::set_ghost(page, *slot, true)?,
        SlotAction::Unghost { slot } => data_page::set_ghost(page, *slot, false)?,
        SlotAction::Replace { slot, record } => data_page::replace(page, *slot, record)?,
    }
    Ok(())
}

pub(crate) fn set_lsn(page: &mut Page, lsn: Lsn) -> Result<(), StorageError> {
    let mut h = page.header()?;
    h.lsn = lsn;
    page.set_header(&h);
    Ok(())
}

impl Database {
    /// A new transaction id; nothing is logged until its first change.
    pub fn begin_xact(&self) -> XactId {
        let mut t = self.data.xacts.lock();
        t.next_id = t.next_id.max(1);
        let id = t.next_id;
        t.next_id += 1;
        t.active.insert(id, XactState::default());
        id
    }

    /// True while `xact` is active in this database.
    /// The BEGIN LSN of the oldest active transaction that has logged a change (DBCC
    /// OPENTRAN).
    pub fn oldest_active_lsn(&self) -> Option<Lsn> {
        self.data.xacts.lock().oldest_first_lsn()
    }

    pub fn is_active(&self, xact: XactId) -> bool {
        self.data.xacts.lock().active.contains_key(&xact)
    }

    /// Number of active transactions (sys.dm_tran_active_transactions, log_reuse_wait).
    pub fn active_xacts(&self) -> usize {
        self.data
            .xacts
            .lock()
            .active
            .values()
            .filter(|x| x.first_lsn.is_some())
            .count()
    }

    /// Appends one record. Never called holding the transaction table's latch: a full log's
    /// reason (`log_full_reason`) reads that table.
    fn log(&self, body: &LogRecordBody) -> Result<Lsn, StorageError> {
        let wal = self.wal.as_ref().ok_or(StorageError::LogFailed)?;
        wal.append(&log_record::compact(body.encode()))
            .map_err(|e| self.log_error(e))
    }

    /// A failed append's error, a full log carrying what holds it (error 9002's reason).
    fn log_error(&self, e: StorageError) -> StorageError {
        match e {
            StorageError::LogFull(_) => StorageError::LogFull(self.log_full_reason()),
            other => other,
        }
    }

    /// Msg 9002's reason: what log_reuse_wait_desc says holds the log, or the active
    /// transactions' reservations when nothing else does.
    pub(crate) fn log_full_reason(&self) -> &'static str {
        match self.log_reuse_wait().1 {
            "NOTHING" => "ACTIVE_TRANSACTION",
            other => other,
        }
    }

    /// Logs BEGIN for `xact` if this is its first change.
    pub(crate) fn ensure_begun(&self, xact: XactId) -> Result<(), StorageError> {
        let wal = self.wal.as_ref().ok_or(StorageError::LogFailed)?;
        let mut t = self.data.xacts.lock();
        let x = t.active.get_mut(&xact).expect("an active transaction");
        if x.first_lsn.is_some() {
            return Ok(());
        }
        match wal.append(&log_record::compact(
            LogRecordBody::BeginXact { xact }.encode(),
        )) {
            Ok(lsn) => {
                // Constant while the database is shared: a checkpoint moves it holding the
                // database exclusively (checkpoint.rs step 1). A database never
                // checkpointed has no floor: redo starts at the log's first LSN.
                x.redo_floor = self.image_floor().max(LOG_FIRST_LSN);
                debug_assert!(x.redo_floor <= lsn, "a floor is a past end of the log");
                x.first_lsn = Some(lsn);
                x.last_lsn = lsn;
                Ok(())
            }
            Err(e) => {
                drop(t);
                Err(self.log_error(e))
            }
        }
    }

    /// Logs and applies one change of `xact` to a heap page (invariant 1), undone by slot.
    /// False, with nothing logged, when the log must grow first (`Needs::LogGrowth`) or
    /// hold `also` more bytes after this record.
    pub(crate) fn change_page(
        &self,
        xact: XactId,
        au: u64,
        page: PageId,
        redo: SlotAction,
        undo: SlotAction,
        also: u64,
    ) -> Result<bool, StorageError> {
        let reserve = clr_reservation(&undo);
        let undo = Undo::Slot(page, undo);
        self.try_log_change(xact, au, page, &redo, &undo, (reserve, also))
    }

    /// Logs and applies one change of `xact` to a page of clustered index `t`, undone by
    /// key; false as `change_page` says.
    pub(crate) fn index_change(
        &self,
        xact: XactId,
        t: &TableEntry,
        page: PageId,
        redo: SlotAction,
        undo: KeyedUndo,
        also: u64,
    ) -> Result<bool, StorageError> {
        let reserve = (undo.record().len() + 64 + 512) as u64;
        let au = t.allocation_unit_id;
        let undo = Undo::Keyed(au, undo);
        self.try_log_change(xact, au, page, &redo, &undo, (reserve, also))
    }

    /// The write-ahead path of every change, whether the database is held exclusively or
    /// shared: BEGIN with the first change, the page imaged first when it was last changed
    /// before the checkpoint, the record logged (if the log also holds every rollback,
    /// invariant 4; else false, the change not logged), then the page changed and stamped.
    ///
    /// The reservation check, the append and the transaction's bookkeeping happen under
    /// the transaction table's latch, so concurrent sessions never both pass the check on
    /// the same free space. The page is changed after the latch is released: only the
    /// change's own session changes a page between its logging and its application (it
    /// holds the page's latch, access.rs invariant 2, or the database exclusively).
    fn try_log_change(
        &self,
        xact: XactId,
        au: u64,
        page: PageId,
        redo: &SlotAction,
        undo: &Undo,
        (reserve, also): (u64, u64),
    ) -> Result<bool, StorageError> {
        self.check_writable()?;
        self.ensure_begun(xact)?;
        self.image_if_needed(page)?;
        let wal = self.wal.as_ref().ok_or(StorageError::LogFailed)?;
        let appended = {
            let mut t = self.data.xacts.lock();
            let limit = t.undo_memory_bytes.unwrap_or(UNDO_MEMORY_BYTES);
            let x = t.active.get_mut(&xact).expect("an active transaction");
            let prev = x.last_lsn;
            let body = match undo {
                Undo::Slot(_, u) => LogRecordBody::RowChange {
                    xact,
                    prev,
                    page,
                    redo: redo.clone(),
                    undo: u.clone(),
                },
                Undo::Keyed(au, u) => LogRecordBody::IndexChange {
                    xact,
                    prev,
                    page,
                    allocation_unit_id: *au,
                    redo: redo.clone(),
                    undo: u.clone(),
                },
            };
            let bytes = log_record::compact(body.encode());
            let held = t.active[&xact].held_for_next;
            if !t.log_keeps_reservations(wal, bytes.len() as u64 + reserve + also, held) {
                return Ok(false);
            }
            let x = t.active.get_mut(&xact).expect("an active transaction");
            let appended = wal.append(&bytes);
            if let Ok(lsn) = appended {
                x.last_lsn = lsn;
                // The next change's bytes kept, this one's spent (invariant 8).
                x.reserved_bytes = x.reserved_bytes - held + reserve + also;
                x.held_for_next = also;
                x.units.insert(au);
                x.add_change(lsn, prev, undo, limit);
            }
            appended
        };
        let lsn = appended.map_err(|e| self.log_error(e))?;
        if let Err(e) = self.apply_logged(page, redo, lsn) {
            // Logged but not applied: memory and the log disagree until recovery
            // (invariant 6).
            self.poison();
            return Err(e);
        }
        Ok(true)
    }

    /// Appends system record `bytes` (a split's or a ghost cleanup's pages) for a session
    /// sharing the database, only when the log keeps every reservation after it
    /// (`XactTable::log_keeps_reservations`): its LSN, or None with nothing appended.
    pub(crate) fn append_checked(&self, bytes: &[u8]) -> Result<Option<Lsn>, StorageError> {
        let wal = self.wal.as_ref().ok_or(StorageError::LogFailed)?;
        let t = self.data.xacts.lock();
        if !t.log_keeps_reservations(wal, bytes.len() as u64, 0) {
            return Ok(None);
        }
        wal.append(bytes).map(Some).map_err(|e| self.log_error(e))
    }

    /// Applies an already-logged action to the cached page and stamps its LSN.
    pub(crate) fn apply_logged(
        &self,
        page: PageId,
        action: &SlotAction,
        lsn: Lsn,
    ) -> Result<(), StorageError> {
        let pool = &self.data.pool;
        pool.with_page_mut(&self.data_files, self.wal.as_deref(), page, |p| {
            apply_action(p, action)?;
            set_lsn(p, lsn)?;
            p.mark_dirty();
            Ok(())
        })
    }

    /// Puts whole pages that the record at `lsn` logged (a split's images, a format) in
    /// the pool, stamped with `lsn`; any failure poisons the database (invariant 6).
    pub(crate) fn install_logged(
        &self,
        lsn: Lsn,
        images: Vec<(PageId, Page)>,
    ) -> Result<(), StorageError> {
        let installed = images.into_iter().try_for_each(|(pid, mut page)| {
            set_lsn(&mut page, lsn)?;
            let pool = &self.data.pool;
            pool.install(&self.data_files, self.wal.as_deref(), pid, page)
        });
        if installed.is_err() {
            self.poison();
        }
        installed
    }

    /// Logs the page's whole image when its LSN is older than the redo start (or the redo
    /// start of a checkpoint being taken).
    pub(crate) fn image_if_needed(&self, page: PageId) -> Result<(), StorageError> {
        let redo_start = self.image_floor();
        let pool = &self.data.pool;
        // Under the frame's EX latch: no change comes between the image and its stamp.
        pool.with_page_mut(&self.data_files, self.wal.as_deref(), page, |p| {
            if p.header()?.lsn >= redo_start {
                return Ok(());
            }
            let wal = self.wal.as_ref().ok_or(StorageError::LogFailed)?;
            let lsn = wal.append(&log_record::compact(
                extentdb_format::log::encode_page_image(page.file.0, page.page.0, p.bytes()),
            ))?;
            set_lsn(p, lsn)?;
            p.mark_dirty();
            Ok(())
        })
    }

    /// Invariant 5: no open transaction has changed table `object_id`, which is about to
    /// be dropped or emptied.
    pub(crate) fn assert_no_open_changes(&self, object_id: u32) {
        let changers = self.changers_of(object_id);
        assert!(
            changers.is_empty(),
            "table {object_id} dropped or emptied while open transactions {changers:?} \
             have changed it (xact.rs invariant 5)"
        );
    }

    /// True if transaction `xact` has changed table `object_id` (its allocation unit).
    pub fn table_changed_by(&self, object_id: u32, xact: XactId) -> bool {
        self.changers_of(object_id).contains(&xact)
    }

    /// The allocation units the open transactions have changed (page_move.rs invariant 2).
    pub fn units_in_open_xacts(&self) -> std::collections::BTreeSet<u64> {
        let xacts = self.data.xacts.lock();
        xacts
            .active
            .values()
            .flat_map(|x| x.units.iter().copied())
            .collect()
    }

    /// The open transactions that have changed table `object_id`.
    fn changers_of(&self, object_id: u32) -> Vec<XactId> {
        let Some(t) = self.table_by_id(object_id) else {
            return Vec::new();
        };
        let au = t.allocation_unit_id;
        let xacts = self.data.xacts.lock();
        xacts
            .active
            .iter()
            .filter(|(_, x)| x.units.contains(&au))
            .map(|(id, _)| *id)
            .collect()
    }

    /// The records whose ghosts an active transaction's undo may turn live again in the
    /// clustered index of allocation unit `au` (its `KeyedUndo::Unghost`s): the ghosts that
    /// ghost cleanup must keep (btree.rs invariant 4). Every other ghost of the unit is a
    /// committed delete's, or an ended transaction's earlier version, that nothing reads.
    /// None when a transaction has changes of the unit only in the log (invariant 2): then
    /// every ghost of the unit is kept until it ends.
    pub(crate) fn ghosts_needed(&self, au: u64) -> Option<Vec<Vec<u8>>> {
        let xacts = self.data.xacts.lock();
        if xacts.active.values().any(|x| x.spilled_units.contains(&au)) {
            return None;
        }
        let needed = xacts
            .active
            .values()
            .flat_map(|x| x.changes.iter())
            .filter_map(|c| match &c.undo {
                Undo::Keyed(unit, KeyedUndo::Unghost { record }) if *unit == au => {
                    Some(record.clone())
                }
                _ => None,
            })
            .collect();
        Some(needed)
    }

    /// A savepoint: the position to which `rollback_to` returns (a count of undoable
    /// changes, invariant 2).
    pub fn savepoint(&self, xact: XactId) -> usize {
        self.data
            .xacts
            .lock()
            .active
            .get(&xact)
            .map(|x| x.undoable)
            .unwrap_or(0)
    }

    /// Lowers (or restores) the bytes of undo actions a transaction keeps in memory
    /// (`UNDO_MEMORY_BYTES`), so tests reach the log-read path with small transactions.
    pub fn set_undo_memory_bytes(&self, bytes: usize) {
        self.data.xacts.lock().undo_memory_bytes = Some(bytes);
    }

    /// The changes of `xact` whose undo actions are kept in memory (invariant 2), their
    /// bytes, and all its undoable changes.
    pub fn undo_changes_in_memory(&self, xact: XactId) -> (usize, usize, usize) {
        let t = self.data.xacts.lock();
        t.active
            .get(&xact)
            .map(|x| (x.changes.len(), x.change_bytes, x.undoable))
            .unwrap_or((0, 0, 0))
    }

    /// Undoes the changes of `xact` made after `savepoint`, newest first, logging a CLR for
    /// each; the transaction stays active. Changes not kept in memory are read back from
    /// the log (invariant 2), one block held at a time. Runs sharing the database
    /// (invariant 7).
    pub fn rollback_to(&self, xact: XactId, savepoint: usize) -> Result<(), StorageError> {
        let mut log = RecordsByLsn::default();
        while self.rollback_step(xact, savepoint, &mut log)? {}
        Ok(())
    }

    /// Compensates the newest change of `xact` made after `savepoint`; false when none is
    /// left. `log` keeps the log block last read back between steps.
    pub(crate) fn rollback_step(
        &self,
        xact: XactId,
        savepoint: usize,
        log: &mut RecordsByLsn,
    ) -> Result<bool, StorageError> {
        let (prev, next) = {
            let mut t = self.data.xacts.lock();
            let Some(x) = t.active.get_mut(&xact) else {
                return Ok(false);
            };
            // index.rs invariant 1: the operation it kept is being undone.
            x.row_progress = None;
            if x.undoable <= savepoint {
                return Ok(false);
            }
            (x.last_lsn, x.next_undo())
        };
        let result = match next {
            Ok(c) => self
                .compensate(xact, prev, c.prev, &c.undo)
                .map(|lsn| (lsn, c.prev)),
            Err(at) => self.compensate_logged(xact, prev, at, log),
        };
        match result {
            Ok((lsn, undo_next)) => {
                let mut t = self.data.xacts.lock();
                let x = t.active.get_mut(&xact).expect("active");
                x.compensated(lsn, undo_next);
                Ok(true)
            }
            Err(e) => {
                // Memory and the log may now disagree about what is undone: only
                // recovery can settle it.
                self.poison();
                Err(e)
            }
        }
    }

    /// Compensates the newest undoable change of `xact` at or before `at` in its chain, read
    /// back from the log (compensations met on the way jump to their `undo_next`); returns
    /// the CLR's LSN and the change's `prev`.
    fn compensate_logged(
        &self,
        xact: XactId,
        prev: Lsn,
        mut at: Lsn,
        log: &mut RecordsByLsn,
    ) -> Result<(Lsn, Lsn), StorageError> {
        let wal = self.wal.clone().ok_or(StorageError::LogFailed)?;
        loop {
            match undo_record(&wal, log, xact, at)? {
                UndoStep::Change(before, undo) => {
                    let lsn = self.compensate(xact, prev, before, &undo)?;
                    return Ok((lsn, before));
                }
                UndoStep::Jump(next) => at = next,
                UndoStep::Begin => return Err(missing_for_undo(xact, at)),
            }
        }
    }

    /// Logs and applies the compensation of one change; returns the CLR's LSN.
    /// The page's latch is held from finding the change's slot to applying its CLR
    /// (invariant 7); nothing is logged on a poisoned database (invariant 9).
    pub(crate) fn compensate(
        &self,
        xact: XactId,
        prev: Lsn,
        undo_next: Lsn,
        undo: &Undo,
    ) -> Result<Lsn, StorageError> {
        let (page, action, _latch) = match undo {
            Undo::Slot(page, action) => (*page, action.clone(), self.data.page_latches.hold(*page)),
            Undo::Keyed(au, k) => self.btree_undo_target(*au, k)?,
        };
        // Under the page's latch (invariant 9): a split or ghost cleanup of this page
        // that logged its images and failed to install them poisoned the database before
        // letting the latch go, and the slot was then found in the stale copy.
        self.check_writable()?;
        self.assert_compensation_floor(xact, page)?;
        let body = LogRecordBody::Compensation {
            xact,
            prev,
            undo_next,
            page,
            redo: action.clone(),
        };
        let lsn = self.log(&body)?;
        if let Err(e) = self.apply_logged(page, &action, lsn) {
            // Logged but not applied: poisoned before the latch is let go (invariant 6).
            self.poison();
            return Err(e);
        }
        Ok(lsn)
    }

    /// Invariant 10: the page a compensation of `xact` changes is at or past where redo
    /// would start after a crash (the transaction's redo floor; for a loser recovery
    /// undoes, where this recovery redid from), so redo meets the page's image before the
    /// compensation and never reads a copy a crash tore. Page LSNs only grow, so the check
    /// holds from here to the compensation's apply.
    fn assert_compensation_floor(&self, xact: XactId, page: PageId) -> Result<(), StorageError> {
        let floor = {
            let t = self.data.xacts.lock();
            let active = t.active.get(&xact).filter(|x| x.first_lsn.is_some());
            active.map(|x| x.redo_floor)
        }
        .unwrap_or_else(|| self.analysis_start());
        let wal = self.wal.as_deref();
        let lsn = self
            .data
            .pool
            .with_page(&self.data_files, wal, page, |p| p.header().map(|h| h.lsn))??;
        assert!(
            lsn >= floor,
            "page {page} compensated by transaction {xact} below its redo floor {floor} \
             (page LSN {lsn}; xact.rs invariant 10)"
        );
        Ok(())
    }

    /// Rolls `xact` back completely and ends it.
    pub fn rollback_xact(&self, xact: XactId) -> Result<(), StorageError> {
        self.rollback_to(xact, 0)?;
        self.end_rolled_back(xact)
    }

    /// Ends `xact`, every change of which is compensated, with its ABORT record.
    pub(crate) fn end_rolled_back(&self, xact: XactId) -> Result<(), StorageError> {
        let removed = self.data.xacts.lock().active.remove(&xact);
        if let Some(x) = removed {
            debug_assert_eq!(
                x.undoable, 0,
                "a transaction ends rolled back only when undone"
            );
            if x.first_lsn.is_some() {
                self.log(&LogRecordBody::AbortXact {
                    xact,
                    prev: x.last_lsn,
                })?;
            }
        }
        Ok(())
    }

    /// Ends `xact` with a COMMIT record and returns its LSN, which the caller must flush
    /// (`LogWriter::flush`) before acknowledging the commit; None for a transaction that
    /// changed nothing. Runs with the database shared (`&self`): the record is one append.
    ///
    /// The COMMIT is appended before the transaction leaves the table, under its latch: a
    /// ghost cleanup beside it (btree.rs invariant 4), which reads the table under that
    /// latch, drops the transaction's ghosts only in an image logged after its COMMIT, so
    /// a crash never leaves a transaction to undo whose ghosts are gone.
    pub fn commit_xact(&self, xact: XactId) -> Result<Option<Lsn>, StorageError> {
        let mut t = self.data.xacts.lock();
        let Some(x) = t.active.get(&xact) else {
            return Ok(None);
        };
        if x.first_lsn.is_none() {
            t.active.remove(&xact);
            return Ok(None);
        }
        let lsn = self.log(&LogRecordBody::CommitXact {
            xact,
            prev: x.last_lsn,
            time_us: crate::now_us(),
        });
        t.active.remove(&xact);
        drop(t);
        match lsn {
            Ok(l) => Ok(Some(l)),
            Err(e) => {
                self.poison();
                Err(e)
            }
        }
    }
}

/// One step of walking a transaction's chain back for undo.
pub(crate) enum UndoStep {
    /// A change to undo: its `prev`, and how.
    Change(Lsn, Undo),
    /// A compensation: go on from its `undo_next`.
    Jump(Lsn),
    /// The transaction's BEGIN: nothing before it.
    Begin,
}

/// The record of `xact` at `at`, read back from the log, as an undo step; corruption when it
/// is no record of `xact`'s chain (the log lost it).
pub(crate) fn undo_record(
    wal: &crate::log_writer::LogWriter,
    log: &mut RecordsByLsn,
    xact: XactId,
    at: Lsn,
) -> Result<UndoStep, StorageError> {
    let bytes = log_record::expand(log.get(wal, at)?)?;
    let step = match LogRecordBody::decode(&bytes)? {
        Some(LogRecordBody::RowChange {
            xact: x,
            prev,
            page,
            undo,
            ..
        }) if x == xact => UndoStep::Change(prev, Undo::Slot(page, undo)),
        Some(LogRecordBody::IndexChange {
            xact: x,
            prev,
            allocation_unit_id,
            undo,
            ..
        }) if x == xact => UndoStep::Change(prev, Undo::Keyed(allocation_unit_id, undo)),
        Some(LogRecordBody::Compensation {
            xact: x, undo_next, ..
        }) if x == xact => UndoStep::Jump(undo_next),
        Some(LogRecordBody::BeginXact { xact: x }) if x == xact => UndoStep::Begin,
        _ => return Err(missing_for_undo(xact, at)),
    };
    Ok(step)
}

/// A record of `xact`'s chain that undo needs is not in the log.
pub(crate) fn missing_for_undo(xact: XactId, at: Lsn) -> StorageError {
    extentdb_format::corrupt(
        PageId::NULL,
        format!("transaction {xact}: log record {at} needed for undo is missing"),
    )
    .into()
}
