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
//!    after the database's lock is released, so committers in other sessions share it.
//! 4. A statement's writes go through storage's `SharedDatabase::run`, which chooses how
//!    the database is held: shared for each row operation beside other sessions', held
//!    exclusively only while a change of its structure is made for a row (storage's
//!    access.rs); either way they are one statement in one transaction. This layer never
//!    holds a database exclusively itself (`exec/structure.rs`).
//! 5. A table variable's writes are in none of these transactions: each statement's are
//!    a tempdb transaction of their own (`write_table_variable`), ended with the
//!    statement (table_variables.rs invariant 3), so ROLLBACK leaves them.
//!
//! CREATE and DROP TABLE inside a transaction belong to it (`ddl_xact`; storage's ddl.rs):
//! its ROLLBACK takes them back. TRUNCATE and ALTER TABLE are refused there (table_ddl.rs).
//!
//! Not here yet: SAVE TRANSACTION and ROLLBACK to a savepoint name, XACT_ABORT. Row locks
//! are the session's `Locker` (locking.rs), released here when the transaction ends.

use std::sync::Arc;

use extentdb_storage::SharedDatabase;

use extentdb_storage::access::{Held, Step};

use super::errors;
use super::tables::TableRef;
use super::{EnvChange, Out, Output, Session};
use crate::messages::{msg, SqlError};

impl Session {
    pub(super) fn begin_transaction(&mut self, out: &mut Out) {
        self.trancount += 1;
        if self.trancount == 1 {
            self.descriptor = self
                .engine
                .next_descriptor
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            out.push(Output::EnvChange(EnvChange::BeginTransaction(
                self.descriptor,
            )));
            let info = &self.info;
            info.transaction_descriptor
                .store(self.descriptor, std::sync::atomic::Ordering::Release);
            info.transaction_begin_us
                .store(super::unix_us(), std::sync::atomic::Ordering::Release);
        }
        self.publish_trancount();
    }

    /// Shows other sessions this session's @@TRANCOUNT (sys.dm_tran_session_transactions).
    fn publish_trancount(&self) {
        use std::sync::atomic::Ordering;
        self.info
            .open_transaction_count
            .store(self.trancount, Ordering::Release);
        if self.trancount == 0 {
            self.info.transaction_begin_us.store(0, Ordering::Release);
            self.info.transaction_descriptor.store(0, Ordering::Release);
        }
    }

    /// BEGIN TRANSACTION as a client's transaction-manager request (TDS TM_BEGIN_XACT).
    pub fn begin_transaction_request(&mut self) -> Vec<Output> {
        super::output::collect(|out| self.begin_transaction(out))
    }

    /// COMMIT or ROLLBACK as a transaction-manager request; with `begin_again`, a new
    /// transaction begins right after (TDS's fBeginXact). It is a task of the session: a
    /// DROP of a temporary table it commits, or a CREATE it rolls back, frees tempdb pages
    /// charged to the session (space_usage.rs).
    pub fn end_transaction_request(&mut self, commit: bool, begin_again: bool) -> Vec<Output> {
        self.as_task(|s| {
            super::output::collect(|out| {
                let result = if commit {
                    s.commit_transaction(out)
                } else {
                    s.rollback_transaction(out)
                };
                match result {
                    Ok(()) if begin_again => s.begin_transaction(out),
                    Ok(()) => {}
                    Err(errors) => out.extend(errors.into_iter().map(Output::Error)),
                }
            })
        })
    }

    pub(super) fn commit_transaction(&mut self, out: &mut Out) -> Result<(), Vec<SqlError>> {
        if self.trancount == 0 {
            return Err(vec![msg(3902, &[])]);
        }
        self.trancount -= 1;
        self.publish_trancount();
        if self.trancount > 0 {
            return Ok(());
        }
        out.push(Output::EnvChange(EnvChange::CommitTransaction(
            std::mem::take(&mut self.descriptor),
        )));
        self.commit_xacts()
    }

    /// Commits every storage transaction of the session (trancount already 0), then lets
    /// its locks go.
    fn commit_xacts(&mut self) -> Result<(), Vec<SqlError>> {
        let mut failures = Vec::new();
        let xacts = std::mem::take(&mut self.xacts);
        for (db_id, x) in xacts {
            let Some(db) = self.engine.instance.database(db_id) else {
                continue;
            };
            if let Err(e) = commit(&db, x) {
                failures.extend(e);
            }
        }
        self.publish_xacts();
        self.temporary_xact_ended(true);
        // After every commit is durable (locking.rs invariant 2).
        self.release_locks();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures)
        }
    }

    pub(super) fn rollback_transaction(&mut self, out: &mut Out) -> Result<(), Vec<SqlError>> {
        if self.trancount == 0 {
            return Err(vec![msg(3903, &[])]);
        }
        out.push(Output::EnvChange(EnvChange::RollbackTransaction(
            self.descriptor,
        )));
        let failed = self.rollback_all();
        if failed.is_empty() {
            return Ok(());
        }
        Err(failed)
    }

    /// Rolls back every open storage transaction and ends the explicit transaction. A
    /// failed rollback poisons its database (storage's rule: recovery finishes the undo
    /// when it is reopened); it is reported (3314) and written to the error log, never
    /// passed over in silence.
    pub(super) fn rollback_all(&mut self) -> Vec<SqlError> {
        self.trancount = 0;
        self.descriptor = 0;
        self.publish_trancount();
        let mut failed = Vec::new();
        let xacts = std::mem::take(&mut self.xacts);
        for (db_id, x) in xacts {
            let Some(db) = self.engine.instance.database(db_id) else {
                continue;
            };
            if let Err(e) = db.rollback(x) {
                let name = db.read().unwrap().name.clone();
                self.engine.instance.errorlog.write(
                    &format!("spid{}", self.spid),
                    &format!("The rollback of a transaction in database '{name}' failed: {e}. The database needs a reopen; recovery will finish the undo."),
                );
                failed.push(msg(3314, &[&name, &"(0:0:0)"]));
            }
        }
        self.publish_xacts();
        self.temporary_xact_ended(false);
        // After the undo (locking.rs invariant 2).
        self.release_locks();
        failed
    }

    /// Shows other sessions which databases this session's transaction holds
    /// (`SessionInfo::xact_databases`), once its commits or rollbacks there are done.
    fn publish_xacts(&self) {
        *self.info.xact_databases.lock().unwrap() = self.xacts.keys().copied().collect();
    }

    /// Runs `f`, one statement made of several writes (a data modification and its OUTPUT
    /// ... INTO's insert), as one statement (invariant 2): in autocommit, all of it in one
    /// transaction per database, committed only when all of `f` succeeded (the session
    /// counts as inside a transaction meanwhile, without telling the client); inside a
    /// transaction, rolled back to where it first wrote in each database when `f` fails.
    pub(super) fn as_one_statement(
        &mut self,
        f: impl FnOnce(&mut Session) -> Result<(), Vec<SqlError>>,
    ) -> Result<(), Vec<SqlError>> {
        assert!(
            self.statement_marks.is_none(),
            "statements of writes do not nest"
        );
        let autocommit = self.trancount == 0;
        if autocommit {
            self.trancount = 1;
        }
        self.statement_marks = Some(Vec::new());
        let result = f(self);
        let marks = self.statement_marks.take().unwrap_or_default();
        // Its table-variable writes, in a transaction of their own (table_variables.rs
        // invariant 3), end with it: committed when all of it succeeded.
        let result = match result {
            Ok(()) => self.end_table_variable_writes(true),
            Err(mut e) => {
                e.extend(
                    self.end_table_variable_writes(false)
                        .err()
                        .unwrap_or_default(),
                );
                Err(e)
            }
        };
        match (result, autocommit) {
            (Ok(()), true) => {
                self.trancount = 0;
                self.commit_xacts()
            }
            (Ok(()), false) => Ok(()),
            (Err(mut e), true) => {
                e.extend(self.rollback_all());
                Err(e)
            }
            (Err(mut e), false) => {
                for (db_id, x, savepoint) in marks {
                    let Some(db) = self.engine.instance.database(db_id) else {
                        continue;
                    };
                    if let Err(re) = db.rollback_to(x, savepoint) {
                        e.extend(errors::map(&re, errors::Context::Other));
                    }
                }
                Err(e)
            }
        }
    }

    /// The storage transaction a statement writes to database `db_id` in, and the savepoint
    /// its failure rolls back to: the session's (invariant 1), begun if need be, or a new
    /// one of its own in autocommit.
    fn xact_for_write(&mut self, db_id: u16, db: &SharedDatabase) -> (u64, usize) {
        let open = self
            .xacts
            .get(&db_id)
            .copied()
            .filter(|_| self.trancount > 0);
        let (x, savepoint) = db.begin(open);
        if let Some(marks) = &mut self.statement_marks {
            if !marks.iter().any(|&(d, ..)| d == db_id) {
                marks.push((db_id, x, savepoint));
            }
        }
        if self.trancount > 0 && self.xacts.insert(db_id, x).is_none() {
            self.publish_xacts();
        }
        (x, savepoint)
    }

    /// The transaction CREATE or DROP TABLE in database `db_id` belongs to: the session's
    /// inside a transaction (its ROLLBACK takes the change back: storage's ddl.rs), none
    /// in autocommit, where the change is made at once.
    pub(super) fn ddl_xact(&mut self, db_id: u16, db: &SharedDatabase) -> Option<u64> {
        (self.trancount > 0).then(|| self.xact_for_write(db_id, db).0)
    }

    /// Runs one statement's writes to database `db_id` inside the session's transaction
    /// (invariants 1 to 4): `step` gets the database and the transaction to write in, and
    /// runs as storage's `SharedDatabase::run` says (access.rs): sharing the database, and holding
    /// it exclusively only after a change of its structure a row needed, until it says it
    /// may share it again (`Needs::Share`). Each call goes on from where the last stopped.
    /// The transaction begins, and commits, with the database shared (its commit record is
    /// one append); a failure's rollback holds it exclusively.
    pub(super) fn write_in_xact(
        &mut self,
        t: &TableRef,
        step: impl FnMut(Held<'_>, u64) -> Result<Step<()>, Vec<SqlError>>,
    ) -> Result<(), Vec<SqlError>> {
        self.write_in_xact_waiting(t, step, || Ok(false))
    }

    /// `write_in_xact` for a step that can stop for a lock (an INSERT's key range,
    /// locking.rs invariant 5): each time `step` is done, `wait` waits for what it stopped
    /// for with no database held (locking.rs invariant 1) and says whether `step` must go
    /// on; all of it in one transaction, committed (autocommit) or rolled back once.
    pub(super) fn write_in_xact_waiting(
        &mut self,
        t: &TableRef,
        step: impl FnMut(Held<'_>, u64) -> Result<Step<()>, Vec<SqlError>>,
        wait: impl FnMut() -> Result<bool, Vec<SqlError>>,
    ) -> Result<(), Vec<SqlError>> {
        if self.is_table_variable(t) {
            return self.write_table_variable(&t.db, step, wait);
        }
        let (db_id, db) = (t.db_id, &t.db);
        let (x, savepoint) = self.xact_for_write(db_id, db);
        let autocommit = self.trancount == 0;
        let result = self.run_steps(db, x, step, wait);
        match result {
            Ok(()) if autocommit => commit(db, x),
            Ok(()) => Ok(()),
            Err(mut e) => {
                let undone = match autocommit {
                    true => db.rollback(x),
                    false => db.rollback_to(x, savepoint),
                };
                if let Err(re) = undone {
                    e.extend(errors::map(&re, errors::Context::Other));
                }
                Err(e)
            }
        }
    }
}

impl Session {
    /// `step` (then `wait`) run in transaction `x` of `db` until done, as
    /// `write_in_xact_waiting` describes.
    fn run_steps(
        &self,
        db: &Arc<SharedDatabase>,
        x: u64,
        mut step: impl FnMut(Held<'_>, u64) -> Result<Step<()>, Vec<SqlError>>,
        mut wait: impl FnMut() -> Result<bool, Vec<SqlError>>,
    ) -> Result<(), Vec<SqlError>> {
        let name = db.read().unwrap().name.clone();
        let map = |e: extentdb_storage::StorageError| errors::map_data(&e, &name);
        let env = self.growth_env();
        loop {
            match db.run(&env, map, |db| step(db, x)).and_then(|()| wait()) {
                Ok(true) => continue,
                Ok(false) => break Ok(()),
                Err(e) => break Err(e),
            }
        }
    }

    /// A statement's writes to a table variable (table_variables.rs invariant 3): in the
    /// statement's own transaction in tempdb, never the session's; committed here unless
    /// the statement is one of several writes (`as_one_statement`, which ends it), and
    /// rolled back whole when they fail.
    fn write_table_variable(
        &mut self,
        db: &Arc<SharedDatabase>,
        step: impl FnMut(Held<'_>, u64) -> Result<Step<()>, Vec<SqlError>>,
        wait: impl FnMut() -> Result<bool, Vec<SqlError>>,
    ) -> Result<(), Vec<SqlError>> {
        let (x, _) = db.begin(self.table_vars.xact);
        self.table_vars.xact = Some(x);
        let result = self.run_steps(db, x, step, wait);
        match (result, self.statement_marks.is_some()) {
            (Ok(()), true) => Ok(()),
            (Ok(()), false) => self.end_table_variable_writes(true),
            (Err(mut e), _) => {
                e.extend(
                    self.end_table_variable_writes(false)
                        .err()
                        .unwrap_or_default(),
                );
                Err(e)
            }
        }
    }
}

/// Commits `x` and waits for its commit record to be durable (storage's transaction.rs
/// flushes outside the database's lock: invariant 3).
pub(super) fn commit(db: &Arc<SharedDatabase>, x: u64) -> Result<(), Vec<SqlError>> {
    db.commit(x).map_err(|e| match e {
        extentdb_storage::StorageError::LogFailed => {
            vec![msg(9001, &[&db.read().unwrap().name])]
        }
        e => errors::map(&e, errors::Context::Other),
    })
}
