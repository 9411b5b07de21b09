//! Transactions as a session sees them: BEGIN/COMMIT/ROLLBACK TRANSACTION, @@TRANCOUNT,
//! autocommit and statement atomicity.
//!
//! Session transaction state:
//!
//! ```text
//!   autocommit (trancount 0) --BEGIN TRAN--> explicit (trancount n >= 1)
//!   explicit --BEGIN TRAN--> trancount n+1 ; --COMMIT--> n-1 (commits every storage
//!   transaction when it reaches 0) ; --ROLLBACK--> rolls every one back, trancount 0
//! ```
//!
//! Invariants:
//! 1. `xacts` is empty while `trancount` is 0: outside an explicit transaction each write
//!    statement runs in its own storage transaction, committed when the statement ends.
//! 2. A statement that fails inside an explicit transaction leaves no change behind: it
//!    rolls back to the savepoint taken when it started writing, and the transaction stays
//!    open (SQL Server with XACT_ABORT OFF).
//! 3. A commit is acknowledged only after the log is flushed to its LSN; the flush happens
//!    after the database mutex is released, so committers in other sessions share it.
//!
//! Not here yet: SAVE TRANSACTION and ROLLBACK to a savepoint name, XACT_ABORT, DDL inside
//! a transaction being rolled back (the catalog changes of CREATE/DROP/TRUNCATE TABLE are
//! immediate), and locks (the database mutex serializes statements, nothing more).

use std::sync::Arc;

use extentdb_storage::db_lock::DbLock;

use extentdb_storage::Database;

use super::errors;
use super::{EnvChange, Output, Session};
use crate::messages::{msg, SqlError};

impl Session {
    pub(super) fn begin_transaction(&mut self, out: &mut Vec<Output>) {
        self.trancount += 1;
        if self.trancount == 1 {
            self.descriptor = self
                .engine
                .next_descriptor
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            out.push(Output::EnvChange(EnvChange::BeginTransaction(
                self.descriptor,
            )));
        }
    }

    /// BEGIN TRANSACTION as a client's transaction-manager request (TDS TM_BEGIN_XACT).
    pub fn begin_transaction_request(&mut self) -> Vec<Output> {
        let mut out = Vec::new();
        self.begin_transaction(&mut out);
        out
    }

    /// COMMIT or ROLLBACK as a transaction-manager request; with `begin_again`, a new
    /// transaction begins right after (TDS's fBeginXact).
    pub fn end_transaction_request(&mut self, commit: bool, begin_again: bool) -> Vec<Output> {
        let mut out = Vec::new();
        let result = if commit {
            self.commit_transaction(&mut out)
        } else {
            self.rollback_transaction(&mut out)
        };
        match result {
            Ok(()) if begin_again => self.begin_transaction(&mut out),
            Ok(()) => {}
            Err(errors) => out.extend(errors.into_iter().map(Output::Error)),
        }
        out
    }

    pub(super) fn commit_transaction(
        &mut self,
        out: &mut Vec<Output>,
    ) -> Result<(), Vec<SqlError>> {
        if self.trancount == 0 {
            return Err(vec![msg(3902, &[])]);
        }
        self.trancount -= 1;
        if self.trancount > 0 {
            return Ok(());
        }
        out.push(Output::EnvChange(EnvChange::CommitTransaction(
            std::mem::take(&mut self.descriptor),
        )));
        let mut failures = Vec::new();
        for (db_id, x) in std::mem::take(&mut self.xacts) {
            let Some(db) = self.engine.instance.database(db_id) else {
                continue;
            };
            if let Err(e) = commit(&db, x) {
                failures.extend(e);
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures)
        }
    }

    pub(super) fn rollback_transaction(
        &mut self,
        out: &mut Vec<Output>,
    ) -> Result<(), Vec<SqlError>> {
        if self.trancount == 0 {
            return Err(vec![msg(3903, &[])]);
        }
        out.push(Output::EnvChange(EnvChange::RollbackTransaction(
            self.descriptor,
        )));
        self.rollback_all();
        Ok(())
    }

    /// Rolls back every open storage transaction and ends the explicit transaction.
    pub(super) fn rollback_all(&mut self) {
        self.trancount = 0;
        self.descriptor = 0;
        for (db_id, x) in std::mem::take(&mut self.xacts) {
            if let Some(db) = self.engine.instance.database(db_id) {
                // A failed rollback poisons the database (storage's rule): recovery finishes
                // the undo when it is reopened, so there is nothing more to do here.
                let _ = db.lock().unwrap().rollback_xact(x);
            }
        }
    }

    /// Runs one statement's writes to database `db_id` inside the session's transaction
    /// (invariants 1 to 3): `f` gets the locked database and the transaction to write in.
    pub(super) fn write_in_xact<T>(
        &mut self,
        db_id: u16,
        db: &Arc<DbLock>,
        f: impl FnOnce(&mut Database, u64) -> Result<T, Vec<SqlError>>,
    ) -> Result<T, Vec<SqlError>> {
        let mut guard = db.lock().unwrap();
        // Autogrowth during this statement initializes and reports as this session would.
        guard.set_growth_env(self.growth_env());
        if self.trancount > 0 {
            let x = match self.xacts.get(&db_id) {
                Some(x) if guard.is_active(*x) => *x,
                _ => {
                    let x = guard.begin_xact();
                    self.xacts.insert(db_id, x);
                    x
                }
            };
            let savepoint = guard.savepoint(x);
            return match f(&mut guard, x) {
                Ok(v) => Ok(v),
                Err(mut e) => {
                    if let Err(re) = guard.rollback_to(x, savepoint) {
                        e.extend(errors::map(&re, errors::Context::Other));
                    }
                    Err(e)
                }
            };
        }
        let x = guard.begin_xact();
        match f(&mut guard, x) {
            Ok(v) => {
                drop(guard);
                commit(db, x)?;
                Ok(v)
            }
            Err(mut e) => {
                if let Err(re) = guard.rollback_xact(x) {
                    e.extend(errors::map(&re, errors::Context::Other));
                }
                Err(e)
            }
        }
    }
}

/// Commits `x` and waits for its commit record to be durable, flushing outside the lock
/// (invariant 3).
fn commit(db: &Arc<DbLock>, x: u64) -> Result<(), Vec<SqlError>> {
    let map = |e: &extentdb_storage::StorageError| errors::map(e, errors::Context::Other);
    let (lsn, wal) = {
        let mut guard = db.lock().unwrap();
        let lsn = guard.commit_xact(x).map_err(|e| map(&e))?;
        (lsn, guard.wal())
    };
    if let (Some(lsn), Some(wal)) = (lsn, wal) {
        wal.flush(lsn).map_err(|e| map(&e))?;
    }
    Ok(())
}
