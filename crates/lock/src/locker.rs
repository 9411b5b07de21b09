//! A transaction's side of locking: what it holds (so a request it already covers never
//! reaches the shared table), intent locks on the table above a row or page, lock
//! escalation, and release at the end.
//!
//! Escalation (SQL Server's rule): when one statement holds 5,000 row and page locks on one
//! table, the transaction asks for the table in S (reads) or X (anything else) without
//! waiting; granted, it lets go of that table's row and page locks and takes no more there.
//! Refused (another transaction's lock is in the way), it goes on with row locks and tries
//! again after every further 1,250. ALTER TABLE ... SET (LOCK_ESCALATION = DISABLE) turns
//! it off for a table; AUTO and TABLE both escalate to the table here (there are no
//! partitions).
//!
//! Invariants:
//! 1. `held` is exactly what the manager grants this owner (checked by the tests through
//!    `LockManager::locks`).
//! 2. A row or page lock is taken only under its table's intent lock (or a table lock that
//!    covers it after escalation).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use crate::manager::{LockManager, WaitPolicy};
use crate::owner::Owner;
use crate::{FxHasher, LockError, LockMode, Resource};

/// Row and page locks one statement holds on one table before it escalates.
pub const ESCALATION_THRESHOLD: u32 = 5_000;
/// Further locks between attempts after a refused escalation.
pub const ESCALATION_RETRY: u32 = 1_250;

/// ALTER TABLE ... SET (LOCK_ESCALATION = ...).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Escalation {
    Table,
    Auto,
    Disable,
}

/// A transaction's locks.
pub struct Locker {
    mgr: Arc<LockManager>,
    owner: Arc<Owner>,
    held: HashMap<Resource, LockMode, BuildHasherDefault<FxHasher>>,
    /// This statement's row and page locks per (database, table).
    statement_locks: HashMap<(u16, u32), u32, BuildHasherDefault<FxHasher>>,
    /// Tables this transaction escalated, with the table lock's mode.
    escalated: HashMap<(u16, u32), LockMode, BuildHasherDefault<FxHasher>>,
    /// SET LOCK_TIMEOUT: None waits for ever (-1).
    pub timeout: Option<Duration>,
    cancel: Arc<AtomicBool>,
}

impl Locker {
    pub fn new(mgr: Arc<LockManager>, session_id: u16, cancel: Arc<AtomicBool>) -> Locker {
        let owner = mgr.new_owner(session_id);
        Locker::of(mgr, owner, cancel)
    }

    /// A session's workspace locks (SHARED_TRANSACTION_WORKSPACE): the DATABASE lock of the
    /// database it uses, held across its transactions.
    pub fn new_workspace(
        mgr: Arc<LockManager>,
        session_id: u16,
        cancel: Arc<AtomicBool>,
    ) -> Locker {
        let owner = mgr.new_workspace_owner(session_id);
        Locker::of(mgr, owner, cancel)
    }

    fn of(mgr: Arc<LockManager>, owner: Arc<Owner>, cancel: Arc<AtomicBool>) -> Locker {
        Locker {
            mgr,
            owner,
            held: HashMap::default(),
            statement_locks: HashMap::default(),
            escalated: HashMap::default(),
            timeout: None,
            cancel,
        }
    }

    pub fn owner(&self) -> &Arc<Owner> {
        &self.owner
    }

    /// The mode held on `r`, if any.
    pub fn held(&self, r: &Resource) -> Option<LockMode> {
        self.held.get(r).copied()
    }

    /// Number of locks held.
    pub fn count(&self) -> usize {
        self.held.len()
    }

    /// Locks `r` in `mode` (or converts what is held), waiting as SET LOCK_TIMEOUT says.
    pub fn lock(&mut self, r: Resource, mode: LockMode) -> Result<(), LockError> {
        self.lock_waiting(r, mode, self.timeout)
    }

    /// Locks `r` only if that needs no wait: Ok(false) when it would wait (READPAST, the
    /// escalation attempt).
    pub fn try_lock(&mut self, r: Resource, mode: LockMode) -> Result<bool, LockError> {
        match self.lock_waiting(r, mode, Some(Duration::ZERO)) {
            Ok(()) => Ok(true),
            Err(LockError::Timeout) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn lock_waiting(
        &mut self,
        r: Resource,
        mode: LockMode,
        timeout: Option<Duration>,
    ) -> Result<(), LockError> {
        let held = self.held.get(&r).copied();
        if held.is_some_and(|h| h.covers(mode)) {
            return Ok(());
        }
        let policy = WaitPolicy {
            timeout,
            cancel: Some(&self.cancel),
        };
        let got = self.mgr.acquire(&self.owner, r, mode, held, policy)?;
        self.held.insert(r, got);
        Ok(())
    }

    /// An instant-duration lock (SQL Server's, as an INSERT's RangeI-N on the key after
    /// its own): granted and given up at once, without waiting; Ok(false) when it would
    /// wait. A lock the transaction holds on `r` is left as it was. Nothing is recorded
    /// when it is granted: the uncontended case is one look-up in the lock table.
    pub fn try_instant(&mut self, r: Resource, mode: LockMode) -> Result<bool, LockError> {
        let held = self.held.get(&r).copied();
        if held.is_some_and(|h| h.covers(mode)) {
            return Ok(true);
        }
        Ok(self.mgr.would_grant(&self.owner, r, mode, held))
    }

    /// `try_instant` that waits as SET LOCK_TIMEOUT says (queued as any request, so
    /// sys.dm_tran_locks shows it WAIT and the deadlock monitor sees it), then gives the
    /// lock up again: let go, or put back to what the transaction held there before.
    pub fn instant(&mut self, r: Resource, mode: LockMode) -> Result<(), LockError> {
        let held = self.held.get(&r).copied();
        if held.is_some_and(|h| h.covers(mode)) {
            return Ok(());
        }
        let policy = WaitPolicy {
            timeout: self.timeout,
            cancel: Some(&self.cancel),
        };
        self.mgr.acquire(&self.owner, r, mode, held, policy)?;
        match held {
            None => self.mgr.release(&self.owner, r),
            Some(h) => self.mgr.restore(&self.owner, r, h),
        }
        Ok(())
    }

    /// Locks a row or page (`r` names its table) in `mode` under an intent lock on the
    /// table, counting it toward escalation; waits as SET LOCK_TIMEOUT says.
    pub fn lock_row(
        &mut self,
        r: Resource,
        mode: LockMode,
        escalation: Escalation,
    ) -> Result<(), LockError> {
        self.row_lock(r, mode, escalation, self.timeout)
    }

    /// `lock_row` only if that needs no wait: Ok(false) when the table's intent lock or
    /// the row's lock would wait (nothing is waited for; an intent lock granted stays).
    pub fn try_lock_row(
        &mut self,
        r: Resource,
        mode: LockMode,
        escalation: Escalation,
    ) -> Result<bool, LockError> {
        match self.row_lock(r, mode, escalation, Some(Duration::ZERO)) {
            Ok(()) => Ok(true),
            Err(LockError::Timeout) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn row_lock(
        &mut self,
        r: Resource,
        mode: LockMode,
        escalation: Escalation,
        timeout: Option<Duration>,
    ) -> Result<(), LockError> {
        let object = r.object().expect("a row or page lock names its table");
        let table_key = (r.database_id(), object);
        if self
            .escalated
            .get(&table_key)
            .is_some_and(|m| m.covers(mode.key_part()))
        {
            return Ok(());
        }
        let table = Resource::Object {
            db: table_key.0,
            object,
        };
        self.lock_waiting(table, mode.intent(), timeout)?;
        if self.held.contains_key(&r) {
            return self.lock_waiting(r, mode, timeout);
        }
        self.lock_waiting(r, mode, timeout)?;
        let n = self.statement_locks.entry(table_key).or_insert(0);
        *n += 1;
        let n = *n;
        if escalation != Escalation::Disable
            && n >= ESCALATION_THRESHOLD
            && (n - ESCALATION_THRESHOLD).is_multiple_of(ESCALATION_RETRY)
        {
            self.escalate(table_key)?;
        }
        Ok(())
    }

    /// Tries to take the whole table in place of its row and page locks.
    fn escalate(&mut self, (db, object): (u16, u32)) -> Result<bool, LockError> {
        let reads_only = self
            .held
            .iter()
            .filter(|(r, _)| r.database_id() == db && r.object() == Some(object))
            .all(|(_, m)| matches!(m, LockMode::S | LockMode::RangeSS));
        let mode = if reads_only { LockMode::S } else { LockMode::X };
        if !self.try_lock(Resource::Object { db, object }, mode)? {
            return Ok(false);
        }
        let below: Vec<Resource> = self
            .held
            .keys()
            .filter(|r| r.database_id() == db && r.object() == Some(object))
            .copied()
            .collect();
        for r in below {
            self.unlock(r);
        }
        self.escalated.insert((db, object), mode);
        Ok(true)
    }

    /// Lets go of one lock before the transaction ends (READ COMMITTED's S locks). A row
    /// lock let go no longer counts toward escalation: the statement's count is of the
    /// locks it holds, so a scan that lets go of each row never escalates.
    pub fn unlock(&mut self, r: Resource) {
        if self.held.remove(&r).is_some() {
            self.mgr.release(&self.owner, r);
            if let Some(object) = r.object() {
                if let Some(n) = self.statement_locks.get_mut(&(r.database_id(), object)) {
                    *n = n.saturating_sub(1);
                }
            }
        }
    }

    /// Puts the lock held on `r` back to `mode`, weaker than it (an X DATABASE taken for a
    /// change of the database's state, back to the S its session holds while in it), and
    /// grants what waited for the stronger mode to go.
    pub fn downgrade(&mut self, r: Resource, mode: LockMode) {
        let held = self.held.get_mut(&r).expect("a downgrade of a lock held");
        assert!(held.covers(mode), "a downgrade to a weaker mode");
        *held = mode;
        self.mgr.restore(&self.owner, r, mode);
    }

    /// A new statement: escalation counts start again.
    pub fn statement_start(&mut self) {
        self.statement_locks.clear();
    }

    /// Whether the transaction escalated to a lock on this table.
    pub fn escalated(&self, db: u16, object: u32) -> Option<LockMode> {
        self.escalated.get(&(db, object)).copied()
    }

    /// Commit or rollback: every lock goes.
    pub fn release_all(&mut self) {
        for (r, _) in self.held.drain() {
            self.mgr.release(&self.owner, r);
        }
        self.statement_locks.clear();
        self.escalated.clear();
    }
}

impl Drop for Locker {
    fn drop(&mut self) {
        self.release_all();
    }
}
