//! SQL Server's DATABASE lock. A session holds S on the database it uses, owned by its
//! workspace (sys.dm_tran_locks.request_owner_type SHARED_TRANSACTION_WORKSPACE), from the
//! moment it enters (login, USE, sp_reset_connection) until it leaves or ends. What needs
//! a database to itself holds X on it while it changes the database's state: DROP
//! DATABASE, RESTORE over it, a tail-log backup, and SET OFFLINE (or SET ONLINE of a
//! database a failed write closed). A session that tries to enter meanwhile waits as SET
//! LOCK_TIMEOUT says (LCK_M_S, 1222), and finds the database as the change left it (911,
//! 927, 942). SET SINGLE_USER keeps others out by its own turn (db_state.rs).
//!
//! A statement that reaches another database by a three-part name takes S DATABASE there
//! for its transaction (locking.rs `other_database_lock`), so those operations are refused
//! while it runs or its transaction is open.
//!
//! Invariants:
//! 1. A session holds S (or, during a state change it makes, X) DATABASE on its current
//!    database (`Session::database_id`) and on no other: the lock where it goes is taken
//!    before `database_id` changes, the one where it was let go after.
//! 2. X DATABASE is asked for without waiting, after the operation's own check that no
//!    other session is in the database (db_state.rs, the 3101 / 3702 checks): a session
//!    that entered since holds S, and the operation is refused as if it had been seen.
//! 3. The X is given up (back to S when its session is in that database) when the
//!    operation ends, whatever its outcome (`ExclusiveDatabase`'s end).

use extentdb_storage::lock::{LockMode, Resource};

use super::locking::lock_error;
use super::Session;
use crate::messages::SqlError;

fn database(db: u16) -> Resource {
    Resource::Database { db }
}

impl Session {
    /// Takes S DATABASE on `id` for the session to enter it, waiting as SET LOCK_TIMEOUT
    /// says; `moved_into` completes the move.
    pub(super) fn lock_database(&mut self, id: u16) -> Result<(), Vec<SqlError>> {
        if self.workspace.held(&database(id)).is_some() {
            return Ok(());
        }
        self.workspace.timeout = self.lock_wait_timeout();
        self.workspace
            .lock(database(id), LockMode::S)
            .map_err(|e| lock_error(e, self.spid))
    }

    /// Gives up the S `lock_database` took on `id` for an entry that was then refused.
    pub(super) fn unlock_database(&mut self, id: u16) {
        if id != self.database_id {
            self.workspace.unlock(database(id));
        }
    }

    /// The session is now in `id` (locked by `lock_database`): the database it left is let go
    /// (invariant 1).
    pub(super) fn moved_into(&mut self, id: u16) {
        assert!(
            self.workspace.held(&database(id)).is_some(),
            "database_lock.rs invariant 1: a session enters a database it holds S on"
        );
        let old = std::mem::replace(&mut self.database_id, id);
        self.info
            .database_id
            .store(id, std::sync::atomic::Ordering::Release);
        if old != id {
            self.workspace.unlock(database(old));
        }
    }

    /// `lock_database` then `moved_into`.
    pub(super) fn enter_database(&mut self, id: u16) -> Result<(), Vec<SqlError>> {
        self.lock_database(id)?;
        self.moved_into(id);
        Ok(())
    }

    /// X DATABASE on `id` for a change of its state, without waiting (invariant 2): false
    /// when another session holds the database.
    pub(super) fn hold_database_exclusively(&mut self, id: u16) -> Result<bool, Vec<SqlError>> {
        self.workspace
            .try_lock(database(id), LockMode::X)
            .map_err(|e| lock_error(e, self.spid))
    }

    /// Ends `hold_database_exclusively`'s X (invariant 3).
    pub(super) fn end_exclusive_hold(&mut self, id: u16) {
        match self.workspace.held(&database(id)) {
            Some(LockMode::X) if self.database_id == id => {
                self.workspace.downgrade(database(id), LockMode::S)
            }
            Some(_) if self.database_id == id => {}
            Some(_) => self.workspace.unlock(database(id)),
            None => {}
        }
    }
}
