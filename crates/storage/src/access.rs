//! The access methods' row operations, one path each: `insert_row`, `update_row_at`,
//! `delete_row_at` (heap.rs's and btree.rs's halves behind them) and `next_identity`.
//!
//! Every row operation takes `&self`, so a session sharing the database (`SharedDatabase::read`)
//! runs it beside other sessions, a clustered index's leaf split included (btree.rs,
//! tree_change.rs). When the row cannot go in without a change to the database's
//! structure (a split or a heap page that needs a new IAM page or a growth, a heap's
//! first page, a log checkpoint or growth, an identity block saved in the catalog), the
//! operation changes nothing and says what it needs (`Needs`). The caller then holds the database exclusively, has the
//! structure changed (`Database::provide`) and runs the same operation again, still holding
//! it: `SharedDatabase::run` for sessions, `Database::now` for a caller that already holds it.
//!
//! Invariants:
//! 1. An operation that returns `Step::Needs` has logged no change of the row (a heap page
//!    it formatted for the row stays, empty, as its heap's current page), or, on a table
//!    with nonclustered indexes, only changes its transaction's kept progress records, which
//!    the same operation run again goes on from (index.rs invariant 1).
//! 2. A shared operation changes a page only while holding that page's latch
//!    (`PageLatches::hold`, SQL Server's PAGELATCH_EX), which it takes after its heap's
//!    insert lock and before any other latch, and never holds two page latches at once
//!    but in a walk left to right along a leaf chain (invariant 6), which waits for the
//!    second latch only when its stripe is above the first's and otherwise only tries it
//!    (`PageLatches::hold_next`): whoever waits for a latch holds only lower stripes.
//!    Readers copy pages under their buffer frame's latch (SH), and every change is
//!    applied under it (EX), so a reader sees a page before or after a change, never
//!    inside it.
//! 3. A change that moves a row (a clustered key or length change, a heap row that grew)
//!    is two changes, made sharing the database; everything the second needs is had
//!    before the first is made: its log room, kept reserved (xact.rs invariant 8), and
//!    its page room: a heap's or a new key's insert goes first, and a clustered row that
//!    keeps its key changes within its leaf, which has room for the new record, in one
//!    hold of the leaf's latch.
//! 4. Holding the database exclusively, an operation run again after `provide` does not
//!    need the same thing for the same table or index twice in a row (`Database::now`
//!    asserts it): each provision makes the room it was asked for, so a session always
//!    progresses. A row operation may need room in its table's tree, then room in one of
//!    its indexes' (index.rs invariant 1): those are two objects.
//!
//! 5. A reader with a row gate reads a page (a copy; a point read under its buffer
//!    frame's latch, btree.rs `read_leaf`) and passes its rows through the gate under
//!    the page's latch, and a writer places a new row only after its gate, under the same
//!    latch: a row is read and locked, or placed and locked, as one step against other
//!    sessions' changes, so a reader never takes a row's lock having read a value that
//!    another session changed (and committed) since, nor reads a new row before its
//!    writer's lock covers it.
//!
//! 6. Key ranges (SERIALIZABLE, `Gate::key_ranges`) are bounded by live keys: a range read
//!    passes the ghosts inside its range and the first *live* key past it (or the end of
//!    the index) through `Gate::key_range`, and an insert of key k the first live key
//!    after k (or the end), each under the latch of the leaf holding it; a ghost past a
//!    range is skipped by both. So the key an insert tests is the one a reader locked for
//!    the gap the new key falls in, whatever ghosts lie between, and a ghost inside a
//!    range (a delete not yet committed) is locked by the reader, who waits for the
//!    deleter: its rollback cannot bring a row back into the range unseen. A read walks
//!    from a leaf to the next holding the first's latch until it has the second's
//!    (`PageLatches::hold_next`), and an insert holds its leaf's latch while it reads the
//!    leaves right of it: a reader that has passed the insert's leaf cannot lock the
//!    next key before the insert has tested it, nor after the row is in, unseen.
//!
//! Lock order inside a database (docs/ARCHITECTURE.md): the database (`SharedDatabase`), a
//! tree's change mutex (a split, tree_change.rs), a heap's insert lock, one page latch
//! (a split's two, invariant 2's walk; then the clustered unit's insert lock for its pages), then the transaction table's latch or one buffer
//! frame's latch (buffer_pool.rs), then the log's; the pool's map latch is taken after a
//! frame latch or alone. A gate's row locks (the lock manager's own mutexes, which wait
//! for nothing of storage's) may be tried under a page latch and a frame latch.

use std::sync::{Mutex, MutexGuard};

use extentdb_format::catalog::TableEntry;
use extentdb_format::log_record::XactId;
use extentdb_format::PageId;

use crate::index::RowOp;
use crate::log_growth::GrowthEnv;
use crate::proportional_fill::GrowthPreparation;
use crate::table::Rid;
use crate::{Database, StorageError};

/// The database as a caller of row operations holds it (`SharedDatabase::run`): shared with other
/// sessions, or exclusively, for a caller whose statement must hold it throughout.
pub enum Held<'a> {
    Shared(&'a Database),
    Exclusive(&'a mut Database),
}

impl std::ops::Deref for Held<'_> {
    type Target = Database;
    fn deref(&self) -> &Database {
        match self {
            Held::Shared(db) => db,
            Held::Exclusive(db) => db,
        }
    }
}

/// What a caller does with a row under its page's latch (access.rs invariant 5): the SQL
/// layer's row lock, taken without waiting. A reader's gate says whether it may take a row
/// it read (false ends its chunk at that row: `ScanChunk::refused`); a writer's, called
/// before a new row becomes visible, whether it may place it (false fails the operation,
/// `StorageError::RowRefused`, with nothing changed, the caller knowing why). A closure
/// `FnMut(Rid, &[u8]) -> bool` is a gate of rows only.
pub type RowGate<'a, 'g> = Option<&'a mut (dyn Gate + 'g)>;

/// A row gate (`RowGate`), and for key-range locking (invariant 6) the keys that bound the
/// ranges a clustered read or insert covers.
pub trait Gate {
    /// A row read, or placed: whether the caller may take it.
    fn row(&mut self, rid: Rid, rec: &[u8]) -> bool;

    /// Whether the caller locks key ranges: storage then passes the keys that bound them
    /// through `key_range` (which costs a walk to the next leaf at a range's end).
    fn key_ranges(&self) -> bool {
        false
    }

    /// Whether the caller waits for the ghosts a read meets inside its range (rows deleted,
    /// perhaps by a transaction still open whose rollback brings them back): storage then
    /// passes each through `key_range` as well, and a locked read never skips a row whose
    /// delete is not yet committed. Every gate that locks key ranges does.
    fn ghosts(&self) -> bool {
        self.key_ranges()
    }

    /// A key whose range the caller locks without taking a row, under the latch of the
    /// leaf that holds it (`None`: the end of the index): the first live key past a
    /// range read, a ghost inside it, the first live key after an insert's. False stops
    /// the operation with nothing taken or changed: a read's chunk ends where it can be
    /// resumed before the key (`ScanChunk::next`), an insert fails with `RowRefused`.
    fn key_range(&mut self, _next: Option<(Rid, &[u8])>) -> bool {
        true
    }
}

impl<F: FnMut(Rid, &[u8]) -> bool> Gate for F {
    fn row(&mut self, rid: Rid, rec: &[u8]) -> bool {
        self(rid, rec)
    }
}

/// A gate's rows without its key ranges: the second change of a row move, whose range was
/// tested before its first (invariant 3).
pub(crate) struct RowsOnly<'a, 'g>(pub &'a mut (dyn Gate + 'g));

impl Gate for RowsOnly<'_, '_> {
    fn row(&mut self, rid: Rid, rec: &[u8]) -> bool {
        self.0.row(rid, rec)
    }
}

/// What a row operation did: done, or nothing yet because it needs something first.
#[must_use]
#[derive(Debug)]
pub enum Step<T> {
    Done(T),
    Needs(Needs),
}

/// What a row operation needs before it can be done (invariant 1: it changed nothing).
#[derive(Debug)]
pub enum Needs {
    /// The log checkpointed or grown ahead of need (`ensure_log_space`).
    LogSpace,
    /// The log grown now: a change's record and the rollback reservations do not fit.
    LogGrowth,
    /// A page of heap `object_id` with room for a record of `len` bytes as its insert
    /// cursor's page, holding the database: a new page that takes a new IAM page or a
    /// filegroup's growth (a session sharing the database rebuilds a cursor after open,
    /// and takes pages and extents, itself).
    HeapRoom { object_id: u32, len: usize },
    /// The leaf of clustered index `object_id` for record `record` split (its ghosts
    /// cleaned first) until it has room for it, holding the database: a split that lacked
    /// a page only a new IAM page or a growth gives, or log room past the reservations (a
    /// session sharing the database splits itself otherwise), or a row's move.
    LeafRoom { object_id: u32, record: Vec<u8> },
    /// A block of identity values for table `object_id` saved in the catalog, past its
    /// last value (found by a scan when no catalog keeps it).
    IdentityBlock { object_id: u32 },
    /// Identity value `value` stored explicitly (IDENTITY_INSERT) made the table's bound.
    IdentityBound { object_id: u32, value: i64 },
    /// Nothing to change: the operation only has to run with the database held
    /// exclusively (invariant 3).
    Exclusive,
    /// A filegroup's growth to initialize holding no lock on the database (with instant
    /// file initialization off, zeros take long enough to keep out of every lock); then
    /// the operation runs again, shared.
    Growth(GrowthPreparation),
    /// From a caller's batch of operations, run holding the database exclusively after a
    /// provision: one row went in, and the rest may share the database again.
    Share,
}

/// A need without its payload but with the object it is for (invariant 4's check).
pub(crate) type NeedKind = (std::mem::Discriminant<Needs>, Option<u32>);

impl Needs {
    /// The need without its payload, and the table or index it is for: one row operation
    /// may need room in its table's tree, then in an index's (index.rs invariant 1).
    pub(crate) fn kind(&self) -> NeedKind {
        let object = match self {
            Needs::HeapRoom { object_id, .. }
            | Needs::LeafRoom { object_id, .. }
            | Needs::IdentityBlock { object_id }
            | Needs::IdentityBound { object_id, .. } => Some(*object_id),
            _ => None,
        };
        (std::mem::discriminant(self), object)
    }
}

/// Page latches: one mutex per stripe of page ids, so memory stays fixed whatever the
/// database's size; two pages in one stripe only wait for each other (invariant 2 keeps
/// that from deadlocking: no one holds two).
pub(crate) struct PageLatches(Vec<Mutex<()>>);

/// Stripes of page latches per database.
const PAGE_LATCH_STRIPES: usize = 1024;

impl Default for PageLatches {
    fn default() -> Self {
        PageLatches((0..PAGE_LATCH_STRIPES).map(|_| Mutex::new(())).collect())
    }
}

/// The next page's latch in a walk left to right (`PageLatches::hold_next`).
pub(crate) enum NextLatch<'a> {
    /// Its stripe is the held page's: held already.
    Same,
    Held(MutexGuard<'a, ()>),
    /// Its stripe is below the held page's and another session holds it: the walker lets
    /// go of its latches, waits for this page's (`hold` and drop) and starts again.
    Busy,
}

impl PageLatches {
    fn stripe(pid: PageId) -> usize {
        let h = (pid.file.0 as usize).wrapping_mul(0x9E37_79B9) ^ pid.page.0 as usize;
        h % PAGE_LATCH_STRIPES
    }

    /// Page `next`'s latch for a session that holds `held`'s (invariant 2's walk): waited
    /// for when its stripe is above `held`'s, else only tried.
    pub(crate) fn hold_next(&self, held: PageId, next: PageId) -> NextLatch<'_> {
        let (a, b) = (Self::stripe(held), Self::stripe(next));
        if a == b {
            return NextLatch::Same;
        }
        if b > a {
            return NextLatch::Held(self.hold(next));
        }
        match self.0[b].try_lock() {
            Ok(g) => NextLatch::Held(g),
            Err(std::sync::TryLockError::Poisoned(e)) => NextLatch::Held(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => NextLatch::Busy,
        }
    }

    /// Holds page `pid`'s latch exclusively until the guard drops.
    pub(crate) fn hold(&self, pid: PageId) -> MutexGuard<'_, ()> {
        let m = &self.0[Self::stripe(pid)];
        match m.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            // Another session holds it: a PAGELATCH_EX wait (waits.rs).
            Err(std::sync::TryLockError::WouldBlock) => {
                crate::waits::timed(crate::waits::WaitType::PageLatchEx, || {
                    m.lock().unwrap_or_else(|e| e.into_inner())
                })
            }
        }
    }
}

impl Database {
    /// Runs row operation `op` on table `object_id` (clustered or not), once the database
    /// takes changes and the log needs nothing first (else `Needs::LogSpace`).
    fn on_table<T>(
        &self,
        object_id: u32,
        op: impl FnOnce(&TableEntry, bool) -> Result<Step<T>, StorageError>,
    ) -> Result<Step<T>, StorageError> {
        self.check_writable()?;
        let t = self.table_for_rows(object_id)?;
        match self.log_wants_space() {
            true => Ok(Step::Needs(Needs::LogSpace)),
            false => op(t, t.index_id == 1),
        }
    }

    /// Inserts record `rec` into table `object_id` within `xact`: into its clustered
    /// index's leaf, or its heap's current page. `env` is the inserting session's (how a
    /// growth it causes initializes and reports); the new row passes `gate` before other
    /// sessions' gated readers can see it (invariant 5).
    pub fn insert_row(
        &self,
        xact: XactId,
        object_id: u32,
        (rec, env): (&[u8], &GrowthEnv),
        gate: RowGate<'_, '_>,
    ) -> Result<Step<Rid>, StorageError> {
        let done = self.on_table(object_id, |t, clustered| {
            let base = |gate| match clustered {
                true => self.btree_insert(xact, t, (rec, 0), gate),
                false => self.heap_insert(xact, t, rec, (env, 0), gate),
            };
            if !self.has_indexes(object_id) {
                return base(gate);
            }
            let op = RowOp::Insert(rec.to_vec());
            let (rid, steps) = match self.take_progress(xact, &op) {
                Some(p) => (p.base, p.steps),
                None => match base(gate)? {
                    Step::Done(rid) => (rid, 0),
                    Step::Needs(n) => return Ok(Step::Needs(n)),
                },
            };
            Ok(
                match self.maintain_indexes(xact, t, (op, steps), (rid, rid))? {
                    Step::Done(()) => Step::Done(rid),
                    Step::Needs(n) => Step::Needs(n),
                },
            )
        });
        self.counted(object_id, done)
    }

    /// Replaces the row `old` that a scan found at `rid` by `new`; gives its position
    /// afterwards. By key in a clustered index (where rows move between pages as pages
    /// split), by RID in a heap. A row that moves passes `gate` at its new place.
    pub fn update_row_at(
        &self,
        xact: XactId,
        object_id: u32,
        (rid, old): (Rid, &[u8]),
        (new, env): (&[u8], &GrowthEnv),
        gate: RowGate<'_, '_>,
    ) -> Result<Step<Rid>, StorageError> {
        let done = self.on_table(object_id, |t, clustered| {
            let base = |gate| match clustered {
                true => self.btree_update(xact, t, (old, new), gate),
                false => self.heap_update(xact, t, rid, new, env, gate),
            };
            if !self.has_indexes(object_id) {
                return base(gate);
            }
            let op = RowOp::Update(old.to_vec(), new.to_vec());
            let (moved, steps) = match self.take_progress(xact, &op) {
                Some(p) => (p.base, p.steps),
                None => match base(gate)? {
                    Step::Done(at) => (at, 0),
                    Step::Needs(n) => return Ok(Step::Needs(n)),
                },
            };
            Ok(
                match self.maintain_indexes(xact, t, (op, steps), (rid, moved))? {
                    Step::Done(()) => Step::Done(moved),
                    Step::Needs(n) => Step::Needs(n),
                },
            )
        });
        self.counted(object_id, done)
    }

    /// Deletes the row `old` that a scan found at `rid` (it becomes a ghost until its
    /// transaction ends): by key in a clustered index, by RID in a heap.
    pub fn delete_row_at(
        &self,
        xact: XactId,
        object_id: u32,
        (rid, old): (Rid, &[u8]),
    ) -> Result<Step<()>, StorageError> {
        let done = self.on_table(object_id, |t, clustered| {
            let base = || match clustered {
                true => self.btree_delete(xact, t, old, 0),
                false => self.heap_delete(xact, t, rid),
            };
            if !self.has_indexes(object_id) {
                return base();
            }
            let op = RowOp::Delete(old.to_vec());
            let steps = match self.take_progress(xact, &op) {
                Some(p) => p.steps,
                None => match base()? {
                    Step::Done(()) => 0,
                    Step::Needs(n) => return Ok(Step::Needs(n)),
                },
            };
            self.maintain_indexes(xact, t, (op, steps), (rid, rid))
        });
        self.counted(object_id, done)
    }

    /// `done`, the row of table `object_id` counted as changed when it was (storage's
    /// statistics.rs invariant 4).
    fn counted<T>(
        &self,
        object_id: u32,
        done: Result<Step<T>, StorageError>,
    ) -> Result<Step<T>, StorageError> {
        if let Ok(Step::Done(_)) = &done {
            self.modifications.count(object_id);
        }
        done
    }

    /// The error for a row move whose second change found it needs something (access.rs
    /// invariant 3 checked what it needs before the first): a log that filled meanwhile.
    /// The statement's rollback undoes the first change.
    pub(crate) fn second_change_failed(&self, needs: Needs) -> StorageError {
        match needs {
            Needs::LogGrowth | Needs::LogSpace => StorageError::LogFull(self.log_full_reason()),
            other => unreachable!("invariant 3: a row move's second change needs {other:?}"),
        }
    }

    /// True while nothing else runs in this database: held through `SharedDatabase::lock`, or not
    /// shared at all (open, recovery, tools, tests).
    pub fn held_exclusively(&self) -> bool {
        self.held_exclusively
    }

    /// For a batch of row operations run by `SharedDatabase::run`: `Needs::Share` once `done` rows
    /// went in while the database is held exclusively (after a provision, one row, then
    /// the rest share it again); None while the batch may go on.
    pub fn share_again<T>(&self, done: usize) -> Option<Step<T>> {
        (self.held_exclusively && done > 0).then_some(Step::Needs(Needs::Share))
    }

    /// The growth environment the database's own operations use (`set_growth_env`).
    pub fn growth_env(&self) -> &GrowthEnv {
        &self.data.growth.env
    }

    /// Whether an operation sharing the database must first have the log seen to: a
    /// checkpoint or growth ahead of need, done once per exclusive hold.
    pub(crate) fn log_wants_space(&self) -> bool {
        !self.log_attended && self.log_needs_attention()
    }

    /// Makes what `needs` asks for, holding the database exclusively. A need that only
    /// asks for the database (`Exclusive`, `Share`) or a growth a session could not
    /// prepare (`Growth`: the operation, run again here, asks for the room itself)
    /// changes nothing.
    pub fn provide(&mut self, needs: Needs) -> Result<(), StorageError> {
        match needs {
            Needs::LogSpace => {
                self.ensure_log_space()?;
                self.log_attended = true;
            }
            Needs::LogGrowth => {
                if !self.grow_log_now()? {
                    return Err(StorageError::LogFull(self.log_full_reason()));
                }
            }
            Needs::HeapRoom { object_id, len } => {
                let t = self.table_or_err(object_id)?.clone();
                self.insert_target(&t, len)?;
            }
            Needs::LeafRoom { object_id, record } => {
                let t = self.table_or_err(object_id)?.clone();
                self.provide_leaf_room(&t, &record)?;
            }
            Needs::IdentityBlock { object_id } => self.reserve_identity_block(object_id)?,
            Needs::IdentityBound { object_id, value } => {
                self.raise_identity_bound(object_id, value)?
            }
            Needs::Exclusive | Needs::Growth(_) | Needs::Share => {}
        }
        Ok(())
    }

    /// Runs row operation `op` with the database held (`&mut self`): what it needs is
    /// provided and it runs again, until done (invariant 4).
    pub fn now<T>(
        &mut self,
        mut op: impl FnMut(&Database) -> Result<Step<T>, StorageError>,
    ) -> Result<T, StorageError> {
        self.log_attended = false;
        let mut last = None;
        loop {
            match op(self)? {
                Step::Done(t) => return Ok(t),
                Step::Needs(n) => {
                    let kind = n.kind();
                    assert_ne!(last, Some(kind), "invariant 4: {n:?} needed twice");
                    last = Some(kind);
                    self.provide(n)?;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two pages whose latch stripes are `a` below `b`.
    fn ordered_pair() -> (PageId, PageId) {
        let pages: Vec<PageId> = (0..64).map(|p| PageId::new(1, p)).collect();
        let (mut lo, mut hi) = (pages[0], pages[1]);
        if PageLatches::stripe(lo) > PageLatches::stripe(hi) {
            std::mem::swap(&mut lo, &mut hi);
        }
        assert_ne!(PageLatches::stripe(lo), PageLatches::stripe(hi));
        (lo, hi)
    }

    /// Proves invariant 2's walk: the next page's latch is waited for only up the stripes
    /// (held), only tried down them (busy while another holds it, held once free), and
    /// not taken twice for one stripe.
    #[test]
    fn a_walk_waits_only_up_the_stripes() {
        let latches = PageLatches::default();
        let (lo, hi) = ordered_pair();
        let _held = latches.hold(lo);
        assert!(matches!(latches.hold_next(lo, lo), NextLatch::Same));
        assert!(matches!(latches.hold_next(lo, hi), NextLatch::Held(_)));
        drop(_held);
        let other = latches.hold(lo);
        std::thread::scope(|s| {
            s.spawn(|| {
                let _mine = latches.hold(hi);
                assert!(matches!(latches.hold_next(hi, lo), NextLatch::Busy));
            });
        });
        drop(other);
        let _mine = latches.hold(hi);
        assert!(matches!(latches.hold_next(hi, lo), NextLatch::Held(_)));
    }
}
