//! Who holds and waits for locks: a transaction (SQL Server's lock owner), with what the
//! deadlock monitor needs to choose a victim and what sys.dm_exec_requests shows of its
//! wait.

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use crate::{LockMode, Resource};

/// A lock owner's id, unique in the manager (a transaction's, or a session's for the
/// locks it holds outside a transaction).
pub type OwnerId = u64;

/// A lock owner.
pub struct Owner {
    pub id: OwnerId,
    /// The session it belongs to (sys.dm_tran_locks.request_session_id).
    pub session_id: u16,
    /// SQL Server's SHARED_TRANSACTION_WORKSPACE: the session's own owner of the shared
    /// DATABASE lock it holds while it uses a database, outside any transaction (else a
    /// transaction, TRANSACTION in sys.dm_tran_locks.request_owner_type).
    pub workspace: bool,
    /// SET DEADLOCK_PRIORITY: the lowest in a cycle is chosen as its victim.
    deadlock_priority: AtomicI32,
    /// Bytes of log the transaction has written: among equal priorities the cheapest to
    /// roll back is the victim.
    log_used: AtomicU64,
    pub(crate) waiting: Mutex<Option<Waiting>>,
}

/// What an owner waits for.
#[derive(Clone)]
pub(crate) struct Waiting {
    pub resource: Resource,
    pub mode: LockMode,
    pub since: Instant,
    pub slot: Arc<WaitSlot>,
}

/// The wait of one request, which the granting thread ends.
pub(crate) struct WaitSlot {
    pub state: Mutex<WaitState>,
    pub wake: Condvar,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum WaitState {
    Waiting,
    Granted,
    /// Chosen as a deadlock's victim: its request was taken out of the queue.
    Victim,
}

impl WaitSlot {
    pub fn new() -> Arc<WaitSlot> {
        Arc::new(WaitSlot {
            state: Mutex::new(WaitState::Waiting),
            wake: Condvar::new(),
        })
    }

    /// Ends the wait (the caller holds the resource's shard).
    pub fn finish(&self, state: WaitState) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = state;
        self.wake.notify_all();
    }

    pub fn state(&self) -> WaitState {
        *self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What sys.dm_exec_requests shows of a waiting owner.
#[derive(Clone, Debug)]
pub struct WaitInfo {
    pub resource: Resource,
    pub mode: LockMode,
    pub waited_ms: u64,
}

impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owner")
            .field("id", &self.id)
            .field("session_id", &self.session_id)
            .finish()
    }
}

impl Owner {
    pub fn new(id: OwnerId, session_id: u16) -> Arc<Owner> {
        Owner::of_kind(id, session_id, false)
    }

    /// A new owner, a session's workspace or a transaction (`workspace`).
    pub fn of_kind(id: OwnerId, session_id: u16, workspace: bool) -> Arc<Owner> {
        Arc::new(Owner {
            id,
            session_id,
            workspace,
            deadlock_priority: AtomicI32::new(0),
            log_used: AtomicU64::new(0),
            waiting: Mutex::new(None),
        })
    }

    pub fn set_deadlock_priority(&self, p: i32) {
        self.deadlock_priority.store(p, Ordering::Relaxed);
    }

    pub fn deadlock_priority(&self) -> i32 {
        self.deadlock_priority.load(Ordering::Relaxed)
    }

    pub fn set_log_used(&self, bytes: u64) {
        self.log_used.store(bytes, Ordering::Relaxed);
    }

    pub fn log_used(&self) -> u64 {
        self.log_used.load(Ordering::Relaxed)
    }

    pub(crate) fn waiting(&self) -> Option<Waiting> {
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn set_waiting(&self, w: Option<Waiting>) {
        *self.waiting.lock().unwrap_or_else(|e| e.into_inner()) = w;
    }

    /// sys.dm_tran_locks.request_owner_type.
    pub fn owner_type(&self) -> &'static str {
        if self.workspace {
            "SHARED_TRANSACTION_WORKSPACE"
        } else {
            "TRANSACTION"
        }
    }

    /// The lock request this owner waits on, if any.
    pub fn wait_info(&self) -> Option<WaitInfo> {
        self.waiting().map(|w| WaitInfo {
            resource: w.resource,
            mode: w.mode,
            waited_ms: w.since.elapsed().as_millis() as u64,
        })
    }
}
