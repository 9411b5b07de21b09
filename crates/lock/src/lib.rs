//! SQL Server's lock manager: what a transaction locks, in which mode, who waits for whom.
//!
//! - `mode`: the lock modes, their compatibility and conversions (SQL Server's tables).
//! - `resource`: what can be locked (DATABASE, OBJECT, HOBT, ALLOCATION_UNIT, PAGE, KEY,
//!   RID, EXTENT, METADATA, FILE) as sys.dm_tran_locks names it.
//! - `manager`: the lock table (grants and first-come-first-served queues, in shards),
//!   waits with SET LOCK_TIMEOUT and cancellation, sys.dm_tran_locks and the LCK_M_* waits.
//! - `deadlock`: the wait-for graph, victims by DEADLOCK_PRIORITY then log used.
//! - `locker`: one transaction's locks (or a session's workspace: its S DATABASE lock):
//!   intent locks, escalation, release.
//!
//! This crate knows nothing of pages or tables beyond their ids: it depends on nothing in
//! extentdb, and storage and sql use it. It does not decide *what* to lock for a statement
//! (the isolation level's rules live with the access methods) and it does not latch pages
//! (latches protect memory for instructions; locks protect rows for a transaction).

mod deadlock;
mod locker;
mod manager;
mod mode;
mod owner;
mod resource;

pub use deadlock::{DeadlockReport, Observer};
pub use locker::{Escalation, Locker, ESCALATION_RETRY, ESCALATION_THRESHOLD};
pub use manager::{LockManager, LockRow, WaitPolicy, WaitStat};
pub use mode::{LockMode, ALL_MODES};
pub use owner::{Owner, OwnerId, WaitInfo};
pub use resource::{key_hash, MetadataClass, Resource, KEY_HASH_MASK};

/// Why a lock request was not granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LockError {
    /// SET LOCK_TIMEOUT (or NOWAIT) ran out: Msg 1222.
    #[error("lock request time out period exceeded")]
    Timeout,
    /// Chosen as a deadlock victim: Msg 1205.
    #[error("chosen as deadlock victim")]
    Deadlock,
    /// The session's attention or KILL ended the wait.
    #[error("lock wait cancelled")]
    Cancelled,
}

/// A fast hasher for lock resources (the std SipHash costs more than a whole uncontended
/// lock should): multiply-rotate over the resource's words.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(b));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}
