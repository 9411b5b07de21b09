//! The transaction API a session sees of one database: a statement's writes go into a
//! transaction begun or continued here (`begin`), row by row through `SharedDatabase::run`
//! (access.rs); `commit` acknowledges it once durable; `rollback` and `rollback_to` undo
//! it, or a failed statement's part of it.
//!
//! Invariants:
//! 1. `commit` returns Ok only once the log is durable up to the transaction's commit
//!    record. The record is appended with the database shared and the flush waits holding
//!    nothing of it, so committers of many sessions share one flush (group commit) and a
//!    flush never holds up a session that wants the database exclusively.
//! 2. A rollback shares the database with other sessions (xact.rs invariant 7), taking it
//!    again every `UNDO_STEPS_PER_SHARE` compensations, so a long rollback never keeps
//!    out a session that needs the database exclusively (a split, a log growth) for
//!    longer than those steps.

use std::time::Instant;

use extentdb_format::log_record::XactId;

use crate::log_writer::RecordsByLsn;
use crate::shared::SharedDatabase;
use crate::waits::{self, WaitType};
use crate::StorageError;

/// Compensations a rollback makes per taking of the database (invariant 2).
const UNDO_STEPS_PER_SHARE: usize = 64;

impl SharedDatabase {
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
        if self.read().unwrap().has_pending_ddl(x) {
            return self.commit_settling(x);
        }
        let (lsn, wal) = {
            let db = self.read().unwrap();
            (db.commit_xact(x)?, db.wal())
        };
        let (Some(lsn), Some(wal)) = (lsn, wal) else {
            return Ok(());
        };
        // A commit another's flush already covered does not wait (no WRITELOG).
        let started = Instant::now();
        if wal.flush_waited(lsn)? {
            waits::record(WaitType::WriteLog, started.elapsed());
        }
        Ok(())
    }

    /// Commits `x`, which created or dropped tables, and settles them in one exclusive hold
    /// (ddl.rs invariant 2); the flush is this hold's, shared with no other committer.
    fn commit_settling(&self, x: XactId) -> Result<(), StorageError> {
        let mut db = self.lock().unwrap();
        if let (Some(lsn), Some(wal)) = (db.commit_xact(x)?, db.wal()) {
            wal.flush(lsn)?;
        }
        db.settle_ddl(x, true)
    }

    /// Rolls `x` back whole (invariant 2); then the tables it created go and the ones it
    /// dropped come back, in the hold that ends it (ddl.rs invariant 2).
    pub fn rollback(&self, x: XactId) -> Result<(), StorageError> {
        self.rollback_to(x, 0)?;
        if !self.read().unwrap().has_pending_ddl(x) {
            return self.read().unwrap().end_rolled_back(x);
        }
        let mut db = self.lock().unwrap();
        db.end_rolled_back(x)?;
        db.settle_ddl(x, false)
    }

    /// Rolls `x` back to `savepoint` (a failed statement's changes), leaving it active.
    pub fn rollback_to(&self, x: XactId, savepoint: usize) -> Result<(), StorageError> {
        let mut log = RecordsByLsn::default();
        loop {
            let db = self.read().unwrap();
            for _ in 0..UNDO_STEPS_PER_SHARE {
                if !db.rollback_step(x, savepoint, &mut log)? {
                    return Ok(());
                }
            }
        }
    }
}
