//! The transaction API a session sees of one database: a statement's writes go into a
//! transaction begun or continued here (`begin`), row by row through `DbLock::run`
//! (access.rs); `commit` acknowledges it once durable; `rollback` and `rollback_to` undo
//! it, or a failed statement's part of it.
//!
//! Invariants:
//! 1. `commit` returns Ok only once the log is durable up to the transaction's commit
//!    record. The record is appended with the database shared and the flush waits holding
//!    nothing of it, so committers of many sessions share one flush (group commit) and a
//!    flush never holds up a session that wants the database exclusively.
//! 2. A rollback holds the database exclusively while it compensates (its undo finds rows
//!    by key in B-trees whose shape only an exclusive holder changes).

use extentdb_format::log_record::XactId;

use crate::db_lock::DbLock;
use crate::StorageError;

impl DbLock {
    /// The transaction a statement writes in, and the savepoint its failure rolls back to:
    /// `open` (the session's transaction in this database) while it is active, else a new
    /// one.
    pub fn begin(&self, open: Option<XactId>) -> (XactId, usize) {
        let db = self.read().unwrap();
        let x = match open {
            Some(x) if db.is_active(x) => x,
            _ => db.begin_xact(),
        };
        (x, db.savepoint(x))
    }

    /// Commits `x` and returns once its commit record is durable (invariant 1).
    pub fn commit(&self, x: XactId) -> Result<(), StorageError> {
        let (lsn, wal) = {
            let db = self.read().unwrap();
            (db.commit_xact(x)?, db.wal())
        };
        match (lsn, wal) {
            (Some(lsn), Some(wal)) => wal.flush(lsn),
            _ => Ok(()),
        }
    }

    /// Rolls `x` back whole (invariant 2).
    pub fn rollback(&self, x: XactId) -> Result<(), StorageError> {
        self.lock().unwrap().rollback_xact(x)
    }

    /// Rolls `x` back to `savepoint` (a failed statement's changes), leaving it active.
    pub fn rollback_to(&self, x: XactId, savepoint: usize) -> Result<(), StorageError> {
        self.lock().unwrap().rollback_to(x, savepoint)
    }
}
