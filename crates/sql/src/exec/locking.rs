//! How a session's transactions lock (issue 21): the session's `Locker` (its transaction's
//! locks in the instance's lock manager), SET TRANSACTION ISOLATION LEVEL, SET LOCK_TIMEOUT
//! and SET DEADLOCK_PRIORITY, and the messages of a lock that is not granted (1222, 1205).
//!
//! Invariants:
//! 1. A lock is waited for only while the session holds no database (`SharedDatabase`):
//!    a session holding a database while it waits for a row would stop the holder of that
//!    row from ever finishing. Under a database guard locks are only *tried* (`try_row`); a
//!    row that would wait is waited for after the guard is gone (`wait_row`) and read again.
//! 2. Locks last until the transaction ends: an autocommit statement's at the statement's
//!    end (after its commit is durable), an explicit transaction's at COMMIT (after the
//!    log flush) or ROLLBACK (after the undo). Nobody can see or change a row before the
//!    change that locked it is durable or undone.
//! 3. A deadlock victim's whole transaction is rolled back and the batch ends (Msg 1205);
//!    a lock timeout ends the statement only (Msg 1222), as in SQL Server.
//! 4. Schema locks, on the table's OBJECT resource: a statement that changes a table's
//!    definition, drops it or empties it holds Sch-M, taken before the database is held
//!    and kept to its transaction's end (invariant 2); a read that locks no rows
//!    (NOLOCK, READ UNCOMMITTED) holds Sch-S for the statement, and every other read
//!    its table's intent lock from before its first row (for the statement under READ
//!    COMMITTED, else to the transaction's end). Sch-M waits for every other
//!    transaction's lock on the table (the intent locks every write takes), so no table
//!    is dropped or emptied under an open transaction that changed it (storage's xact.rs
//!    invariant 5), under a running read, or under a repeatable read's transaction, rows
//!    or none.
//! 5. Key ranges (SERIALIZABLE and HOLDLOCK on a clustered index; a heap locks its table):
//!    a read locks every key it reads, every ghost inside its range and the first live key
//!    past it (or the end of the index) in RangeS-S (RangeS-U for UPDATE, DELETE and
//!    UPDLOCK), kept to the transaction's end, each under its leaf's latch (storage's
//!    access.rs invariant 6); every INSERT into a clustered index tests RangeI-N on the
//!    first live key after its own for an instant under the same latch. A range lock that
//!    must wait is waited for with no database held (invariant 1) and the range is read
//!    again from before it, so a key another session put in meanwhile is seen, locked.
//! 6. A locked read (READ COMMITTED and above, on a clustered index) never skips a ghost
//!    another open transaction left: a delete not yet committed may be rolled back, and
//!    a reader that skipped its row would have read an aborted transaction's change
//!    (G1a). Storage passes each ghost inside the range through the gate
//!    (`Gate::ghosts`); its key is locked in the row mode, waited for like a row's when
//!    held, and the range is read again from before it: the row is back (rolled back) or
//!    still a ghost whose lock is now free (committed), skipped. Under READ COMMITTED the
//!    lock goes at once, as a row's does once read.
//! 7. A table variable is locked by nobody (`LockPlan::PRIVATE`): only its session's
//!    batch can name it (table_variables.rs invariant 4).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use extentdb_storage::lock::{Escalation, LockError, LockMode, Locker, Resource};

use super::lower::not_yet;
use super::Session;
use crate::messages::{msg, SqlError};
use crate::types::Value;

/// An integer setting's value; anything else is refused (40517, naming `what`).
fn integer(v: &Value, what: &str) -> Result<i64, Vec<SqlError>> {
    match *v {
        Value::TinyInt(i) => Ok(i as i64),
        Value::SmallInt(i) => Ok(i as i64),
        Value::Int(i) => Ok(i as i64),
        Value::BigInt(i) => Ok(i),
        _ => Err(vec![not_yet(what)]),
    }
}

/// SET TRANSACTION ISOLATION LEVEL.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Isolation {
    ReadUncommitted,
    ReadCommitted,
    RepeatableRead,
    Serializable,
    Snapshot,
}

impl Isolation {
    pub fn parse(level: &str) -> Option<Isolation> {
        Some(match level {
            "READ UNCOMMITTED" => Isolation::ReadUncommitted,
            "READ COMMITTED" => Isolation::ReadCommitted,
            "REPEATABLE READ" => Isolation::RepeatableRead,
            "SERIALIZABLE" => Isolation::Serializable,
            "SNAPSHOT" => Isolation::Snapshot,
            _ => return None,
        })
    }

    /// sys.dm_exec_sessions.transaction_isolation_level.
    pub fn level(self) -> i16 {
        match self {
            Isolation::ReadUncommitted => 1,
            Isolation::ReadCommitted => 2,
            Isolation::RepeatableRead => 3,
            Isolation::Serializable => 4,
            Isolation::Snapshot => 5,
        }
    }
}

/// A session's locking settings and its transaction's locks.
pub(super) struct SessionLocks {
    /// Shared with the row sources of a running statement (`RowLocking`), which lock rows
    /// while the session is busy evaluating them.
    locker: Option<Arc<Mutex<Locker>>>,
    /// SET LOCK_TIMEOUT in ms; -1 (the default) waits for ever.
    pub timeout_ms: i64,
    /// SET DEADLOCK_PRIORITY, -10 to 10.
    pub deadlock_priority: i32,
    pub isolation: Isolation,
    /// The table locks this statement took for itself only (invariant 4: Sch-S, a READ
    /// COMMITTED read's intent lock), and their modes: let go at its end.
    statement_schema: Vec<(Resource, LockMode)>,
}

impl Default for SessionLocks {
    fn default() -> SessionLocks {
        SessionLocks {
            locker: None,
            timeout_ms: -1,
            deadlock_priority: 0,
            isolation: Isolation::ReadCommitted,
            statement_schema: Vec::new(),
        }
    }
}

/// Why a row lock was not taken, as the executor reports it.
pub(super) fn lock_error(e: LockError, spid: u16) -> Vec<SqlError> {
    match e {
        LockError::Timeout => vec![msg(1222, &[])],
        LockError::Deadlock => vec![msg(1205, &[&spid.to_string(), &"lock"])],
        // An attention or KILL: nothing to report, the batch ends with DONE and ATTN.
        LockError::Cancelled => Vec::new(),
    }
}

/// Whether errors are a deadlock victim's (its transaction must be rolled back).
pub(super) fn is_deadlock(errors: &[SqlError]) -> bool {
    errors.iter().any(|e| e.number == 1205)
}

impl Session {
    /// The current transaction's locks, begun at first use.
    pub(super) fn locker(&mut self) -> Arc<Mutex<Locker>> {
        if self.locks.locker.is_none() {
            let mut l = Locker::new(
                self.engine.instance.locks.clone(),
                self.spid,
                self.cancel.clone(),
            );
            l.timeout = self.lock_wait_timeout();
            l.owner()
                .set_deadlock_priority(self.locks.deadlock_priority);
            *self.info.lock_owner.lock().unwrap() = Some(l.owner().clone());
            self.locks.locker = Some(Arc::new(Mutex::new(l)));
        }
        self.locks.locker.clone().expect("set above")
    }

    /// How a statement's reads of `t` lock its rows: `write` for UPDATE and DELETE (X on
    /// every row read, kept on the rows they change), else the isolation level's read
    /// locks as the table hints change them (`hint_locking`). A table lock the hints or
    /// SERIALIZABLE ask for is taken here, before any read: the caller holds no database.
    /// Whether a read or write of `t` with these hints locks key ranges (its `RowLocking`'s
    /// `key_ranges`), decided as `row_locking` decides it but taking no lock.
    pub(super) fn locks_key_ranges(
        &self,
        t: &super::tables::TableRef,
        write: bool,
        hints: &[String],
    ) -> Result<bool, Vec<SqlError>> {
        let heap = t.entry.index_id != 1;
        Ok(hint_locking(self.locks.isolation, write, hints, heap)?.ranges)
    }

    pub(super) fn row_locking(
        &mut self,
        t: &super::tables::TableRef,
        write: bool,
        hints: &[String],
    ) -> Result<RowLocking, Vec<SqlError>> {
        if self.locks.isolation == Isolation::Snapshot {
            // ALLOW_SNAPSHOT_ISOLATION cannot be ON until row versioning (issue 25).
            return Err(vec![msg(3952, &[&t.db_name])]);
        }
        let heap = t.entry.index_id != 1;
        let plan = hint_locking(self.locks.isolation, write, hints, heap)?;
        let locker = self.locker();
        let names = extentdb_storage::row_lock::RowNames::of(t.db_id, &t.entry);
        if self.is_table_variable(t) {
            // No other session reaches it (table_variables.rs invariant 4): nothing is
            // locked, as if the statement held the whole table already.
            return Ok(RowLocking {
                locker,
                names,
                plan: LockPlan::PRIVATE,
                spid: self.spid,
                escalation: Escalation::Disable,
            });
        }
        self.other_database_lock(&locker, t.db_id)?;
        if let Some(mode) = plan.table {
            let mut l = locker.lock().unwrap();
            let timeout = plan.nowait.then_some(Duration::ZERO).or(l.timeout);
            let saved = std::mem::replace(&mut l.timeout, timeout);
            let got = l.lock(names.table(), mode);
            l.timeout = saved;
            got.map_err(|e| lock_error(e, self.spid))?;
        }
        match (plan.mode, plan.table) {
            (None, None) => self.statement_table_lock(&locker, names.table(), LockMode::SchS)?,
            (Some(row), None) if plan.keep => {
                let mut l = locker.lock().unwrap();
                l.lock(names.table(), row.intent())
                    .map_err(|e| lock_error(e, self.spid))?;
            }
            (Some(row), None) => self.statement_table_lock(&locker, names.table(), row.intent())?,
            (_, Some(_)) => {}
        }
        use extentdb_format::catalog::LockEscalation;
        let escalation = match t.entry.lock_escalation {
            LockEscalation::Disable => Escalation::Disable,
            LockEscalation::Auto => Escalation::Auto,
            LockEscalation::Table => Escalation::Table,
        };
        Ok(RowLocking {
            locker,
            names,
            plan,
            spid: self.spid,
            escalation,
        })
    }

    /// S DATABASE on `db` for the transaction when it is not the session's own database
    /// (a three-part name): held to the transaction's end, so the database is not dropped,
    /// restored over or taken offline under the statement (database_lock.rs); the session's own
    /// database is held by its workspace already.
    fn other_database_lock(
        &mut self,
        locker: &Arc<Mutex<Locker>>,
        db: u16,
    ) -> Result<(), Vec<SqlError>> {
        // The workspace's lock there covers it: S on the current database, or the X an
        // operation of this session holds while it runs (database_lock.rs).
        let workspace_holds = self.workspace.held(&Resource::Database { db }).is_some();
        if db == self.database_id || workspace_holds {
            return Ok(());
        }
        let mut l = locker.lock().unwrap();
        l.lock(Resource::Database { db }, LockMode::S)
            .map_err(|e| lock_error(e, self.spid))
    }

    /// `mode` on `table` for this statement only (invariant 4): Sch-S for a read that
    /// locks no rows, which keeps the table from being dropped or emptied under it; the
    /// intent lock of a read whose row locks go as each row is read (READ COMMITTED), taken
    /// before the first row as SQL Server does, so a table without rows is held too. A
    /// lock the transaction holds on the table already covers it.
    fn statement_table_lock(
        &mut self,
        locker: &Arc<Mutex<Locker>>,
        table: Resource,
        mode: LockMode,
    ) -> Result<(), Vec<SqlError>> {
        let mut l = locker.lock().unwrap();
        if l.held(&table).is_some() {
            return Ok(());
        }
        l.lock(table, mode).map_err(|e| lock_error(e, self.spid))?;
        self.locks.statement_schema.push((table, mode));
        Ok(())
    }

    /// `mode` on `object` of database `db_id` for this statement (invariant 4): EXEC's
    /// Sch-S on the procedure it reads.
    pub(super) fn statement_object_lock(
        &mut self,
        db_id: u16,
        object: Resource,
        mode: LockMode,
    ) -> Result<(), Vec<SqlError>> {
        let locker = self.locker();
        self.other_database_lock(&locker, db_id)?;
        self.statement_table_lock(&locker, object, mode)
    }

    /// Sch-M on table `t` (invariant 4), waited for with no database held (invariant 1)
    /// as any lock is: SET LOCK_TIMEOUT (1222), deadlock victims (1205), attention and
    /// KILL. Held to the transaction's end. A lock the session's own transaction holds
    /// on the table (an intent lock of its DML) converts.
    pub(super) fn schema_modification(
        &mut self,
        t: &super::tables::TableRef,
    ) -> Result<(), Vec<SqlError>> {
        self.lock_new_table(t.db_id, &t.entry)
    }

    /// Sch-S on table `t` for this statement (invariant 4): a statistics build's scan,
    /// which locks no rows and keeps the table from being dropped, emptied or altered.
    pub(super) fn schema_stability(
        &mut self,
        t: &super::tables::TableRef,
    ) -> Result<(), Vec<SqlError>> {
        let table = extentdb_storage::row_lock::RowNames::of(t.db_id, &t.entry).table();
        let locker = self.locker();
        self.other_database_lock(&locker, t.db_id)?;
        self.statement_table_lock(&locker, table, LockMode::SchS)
    }

    /// X on database `db_id`'s METADATA (`database_id = db_id`), held to the transaction's
    /// end: ALTER TABLE ... ADD FOREIGN KEY with a cascading action takes it before it
    /// reads the catalog for 1785, so two such ALTERs on disjoint tables (whose Sch-M
    /// locks do not meet) see each other's key and cannot make a cycle or a second
    /// cascade path together. Waited for as `schema_modification` is.
    pub(super) fn lock_cascade_paths(&mut self, db_id: u16) -> Result<(), Vec<SqlError>> {
        use extentdb_storage::lock::MetadataClass;
        let locker = self.locker();
        let mut l = locker.lock().unwrap();
        let paths = Resource::Metadata {
            db: db_id,
            class: MetadataClass::Database,
            id: u32::from(db_id),
        };
        l.lock(paths, LockMode::X)
            .map_err(|e| lock_error(e, self.spid))
    }

    /// Sch-M on table `entry` of database `db_id`, as `schema_modification`; for CREATE
    /// TABLE inside a transaction, taken before the table exists (table_ddl.rs).
    pub(super) fn lock_new_table(
        &mut self,
        db_id: u16,
        entry: &extentdb_format::catalog::TableEntry,
    ) -> Result<(), Vec<SqlError>> {
        let table = extentdb_storage::row_lock::RowNames::of(db_id, entry).table();
        let locker = self.locker();
        self.other_database_lock(&locker, db_id)?;
        let mut l = locker.lock().unwrap();
        l.lock(table, LockMode::SchM)
            .map_err(|e| lock_error(e, self.spid))?;
        debug_assert_eq!(l.held(&table), Some(LockMode::SchM));
        Ok(())
    }

    /// The transaction ended (or the autocommit statement did): every lock goes
    /// (invariant 2).
    pub(super) fn release_locks(&mut self) {
        self.locks.statement_schema.clear();
        if let Some(l) = self.locks.locker.take() {
            l.lock().unwrap().release_all();
            *self.info.lock_owner.lock().unwrap() = None;
        }
    }

    /// A new statement: escalation counts per table start again; outside a transaction
    /// the previous statement's locks are gone already.
    pub(super) fn statement_locks_start(&mut self) {
        if let Some(l) = self.locks.locker.as_ref() {
            l.lock().unwrap().statement_start();
        }
    }

    /// A statement ended inside a transaction: the table locks it took for itself go
    /// (invariant 4), unless the transaction has since taken more on the table (a Sch-S or
    /// IS converted to IX by a write in the same statement is the transaction's to keep).
    pub(super) fn statement_locks_end(&mut self) {
        let taken = std::mem::take(&mut self.locks.statement_schema);
        let Some(l) = self.locks.locker.as_ref() else {
            return;
        };
        let mut l = l.lock().unwrap();
        for (r, mode) in taken {
            if l.held(&r) == Some(mode) {
                l.unlock(r);
            }
        }
    }

    /// SET LOCK_TIMEOUT n (ms; -1 for ever).
    pub(super) fn set_lock_timeout(&mut self, ms: i64) -> Result<(), Vec<SqlError>> {
        if ms < -1 {
            return Err(vec![not_yet("SET LOCK_TIMEOUT below -1")]);
        }
        self.locks.timeout_ms = ms;
        self.info
            .lock_timeout_ms
            .store(ms as i32, std::sync::atomic::Ordering::Release);
        if let Some(l) = self.locks.locker.as_ref() {
            l.lock().unwrap().timeout = (ms >= 0).then(|| Duration::from_millis(ms as u64));
        }
        Ok(())
    }
}

impl Session {
    /// A deadlock victim's explicit transaction is rolled back and the batch ends (an
    /// autocommit statement was rolled back by its own failure). Always true: abort.
    pub(super) fn end_victim(&mut self, out: &mut super::Out) -> bool {
        if self.trancount > 0 {
            if let Err(errors) = self.rollback_transaction(out) {
                out.extend(errors.into_iter().map(super::Output::Error));
            }
        }
        self.release_locks();
        true
    }

    /// How long a lock request waits (SET LOCK_TIMEOUT): None for ever.
    pub(super) fn lock_wait_timeout(&self) -> Option<Duration> {
        (self.locks.timeout_ms >= 0).then(|| Duration::from_millis(self.locks.timeout_ms as u64))
    }

    /// @@LOCK_TIMEOUT.
    pub(super) fn lock_timeout_ms(&self) -> i64 {
        self.locks.timeout_ms
    }

    /// SET TRANSACTION ISOLATION LEVEL, SET LOCK_TIMEOUT and SET DEADLOCK_PRIORITY; false
    /// for any other option.
    pub(super) fn set_locking_option(
        &mut self,
        options: &[String],
        value: &crate::ast::SetValue,
    ) -> Result<bool, Vec<SqlError>> {
        use crate::ast::SetValue;
        let [option] = options else {
            return Ok(false);
        };
        match (option.as_str(), value) {
            ("TRANSACTION ISOLATION LEVEL", SetValue::Word(level)) => {
                let level = Isolation::parse(level).expect("the parser names a level");
                self.locks.isolation = level;
                self.info
                    .transaction_isolation_level
                    .store(level.level(), std::sync::atomic::Ordering::Release);
            }
            ("LOCK_TIMEOUT", SetValue::Expr(e)) => {
                let ms = self.eval(e, None).map_err(|e| vec![e])?;
                self.set_lock_timeout(integer(&ms, "SET LOCK_TIMEOUT")?)?;
            }
            ("DEADLOCK_PRIORITY", v) => {
                const WHAT: &str =
                    "SET DEADLOCK_PRIORITY other than LOW, NORMAL, HIGH or -10 to 10";
                let p = match v {
                    SetValue::Word(w) => match w.to_ascii_uppercase().as_str() {
                        "LOW" => -5,
                        "NORMAL" => 0,
                        "HIGH" => 5,
                        _ => return Err(vec![not_yet(WHAT)]),
                    },
                    SetValue::Expr(e) => {
                        let p = self.eval(e, None).map_err(|e| vec![e])?;
                        integer(&p, WHAT)?
                    }
                    _ => return Err(vec![not_yet(WHAT)]),
                };
                if !(-10..=10).contains(&p) {
                    return Err(vec![not_yet(WHAT)]);
                }
                self.locks.deadlock_priority = p as i32;
                self.info
                    .deadlock_priority
                    .store(p as i32, std::sync::atomic::Ordering::Release);
                if let Some(l) = self.locks.locker.as_ref() {
                    l.lock().unwrap().owner().set_deadlock_priority(p as i32);
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// How one statement's reads of one table lock the rows they read (invariant 1): each
/// row is locked while the chunk that holds it is read, with the database held, if that
/// needs no wait; the rest are waited for once the database is let go, then read again.
pub(super) struct RowLocking {
    locker: Arc<Mutex<Locker>>,
    names: extentdb_storage::row_lock::RowNames,
    plan: LockPlan,
    spid: u16,
    /// The table's LOCK_ESCALATION.
    escalation: Escalation,
}

/// The statements that resolve their table through `write_target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Writer {
    Insert,
    Update,
}

impl Writer {
    /// The permission it needs on the table.
    pub(super) fn permission(self) -> &'static str {
        match self {
            Writer::Insert => "INSERT",
            Writer::Update => "UPDATE",
        }
    }
}

/// How a write phase (`insert_rows`) comes by its table's locks.
pub(super) enum WriteLock<'a> {
    /// `write_target` took them and met invariant 5; nothing ran statements since.
    Held(&'a RowLocking),
    /// Taken here with these table hints; a table whose constraints changed before is
    /// refused (40517). SELECT INTO's new table, OUTPUT INTO's, MERGE's inserts (its
    /// target locked by `merge_target` already).
    Take(&'a [String]),
}

/// What one statement locks in one table (`hint_locking`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct LockPlan {
    /// Each row's lock; None for no row locks (READ UNCOMMITTED, NOLOCK, or a table lock
    /// that covers them).
    pub mode: Option<LockMode>,
    /// UPDATE and DELETE: the rows they read are locked U (RangeS-U under SERIALIZABLE, the
    /// table U on a heap), which readers' S locks let in, and each row WHERE keeps goes to X
    /// before it changes (`RowLocking::changes`), as SQL Server's update locks do: two
    /// writers of one row queue at its U instead of both converting a read lock to X.
    pub changes_to_x: bool,
    /// Keep row locks to the transaction's end (writes, REPEATABLE READ, SERIALIZABLE,
    /// HOLDLOCK, UPDLOCK, XLOCK); else let go once the row is read (READ COMMITTED).
    pub keep: bool,
    /// A lock on the whole table first (TABLOCK, TABLOCKX, SERIALIZABLE on a heap, which
    /// has no keys to lock ranges of).
    pub table: Option<LockMode>,
    /// Key-range locks (SERIALIZABLE on a clustered index, invariant 5): `mode` is a range
    /// mode, and the keys that bound the ranges read are locked too.
    pub ranges: bool,
    /// READPAST: rows locked by others are skipped, not waited for.
    pub readpast: bool,
    /// NOWAIT: a lock that would wait fails at once (1222).
    pub nowait: bool,
}

impl LockPlan {
    /// A table only this session can reach (a table variable): no lock at all. `table`
    /// stands for the session's sole use of it, so no row, key or range is locked.
    const PRIVATE: LockPlan = LockPlan {
        mode: None,
        changes_to_x: false,
        keep: false,
        table: Some(LockMode::X),
        ranges: false,
        readpast: false,
        nowait: false,
    };
}

/// The locking of a read or write of one table (a `heap`, or a clustered index) under
/// `isolation` with these table hints (upper-cased, as the parser keeps them). Hints that
/// are not about locking, or whose locking is not built (PAGLOCK: there are no page
/// locks), are refused (40517); NOLOCK on the target of a write is SQL Server's 1065.
pub(super) fn hint_locking(
    isolation: Isolation,
    write: bool,
    hints: &[String],
    heap: bool,
) -> Result<LockPlan, Vec<SqlError>> {
    let mut level = isolation;
    let (mut updlock, mut xlock, mut table, mut readpast, mut nowait) =
        (false, false, None, false, false);
    for h in hints {
        match h.as_str() {
            "NOLOCK" | "READUNCOMMITTED" if write => return Err(vec![msg(1065, &[])]),
            "NOLOCK" | "READUNCOMMITTED" => level = Isolation::ReadUncommitted,
            "READCOMMITTED" | "READCOMMITTEDLOCK" => level = Isolation::ReadCommitted,
            "REPEATABLEREAD" => level = Isolation::RepeatableRead,
            "HOLDLOCK" | "SERIALIZABLE" => level = Isolation::Serializable,
            "UPDLOCK" => updlock = true,
            "XLOCK" => xlock = true,
            "TABLOCK" => table = Some(table.unwrap_or(LockMode::S)),
            "TABLOCKX" => table = Some(LockMode::X),
            "ROWLOCK" => {}
            "READPAST" => readpast = true,
            "NOWAIT" => nowait = true,
            other => return Err(vec![not_yet(&format!("the table hint {other}"))]),
        }
    }
    if level == Isolation::Snapshot {
        return Err(vec![not_yet(
            "SNAPSHOT isolation (row versioning, issue 25)",
        )]);
    }
    if readpast && !matches!(level, Isolation::ReadCommitted | Isolation::RepeatableRead) {
        // Skipping locked rows is no read at SERIALIZABLE (a range would hide them) nor
        // at READ UNCOMMITTED (which skips no lock).
        return Err(vec![msg(650, &[])]);
    }
    let mut row_mode = if xlock {
        LockMode::X
    } else if write || updlock {
        LockMode::U
    } else {
        LockMode::S
    };
    if table == Some(LockMode::S) && (write || xlock) {
        table = Some(LockMode::X);
    } else if table == Some(LockMode::S) && updlock {
        table = Some(LockMode::U);
    }
    let ranges = level == Isolation::Serializable && table.is_none() && !heap;
    if level == Isolation::Serializable && table.is_none() && heap {
        table = Some(row_mode);
    }
    if ranges {
        row_mode = match row_mode {
            LockMode::X => LockMode::RangeXX,
            LockMode::U => LockMode::RangeSU,
            _ => LockMode::RangeSS,
        };
    }
    let unlocked = level == Isolation::ReadUncommitted && !write && !updlock && !xlock;
    Ok(LockPlan {
        mode: (!unlocked && table.is_none()).then_some(row_mode),
        changes_to_x: write && !xlock,
        keep: write || updlock || xlock || level != Isolation::ReadCommitted,
        table: if unlocked { None } else { table },
        ranges,
        readpast,
        nowait,
    })
}

/// The lock of a row a point seek found (SQL Server's singleton fetch on a unique index):
/// the key alone (S, U, X), not its range; any other read locks in `mode`.
fn point_mode(mode: LockMode, point: bool) -> LockMode {
    match point {
        true => mode.key_part(),
        false => mode,
    }
}

/// A gate's answer to storage for a key-range test (`RowLocking::try_key_range`,
/// `try_insert_range`): true to go on; else false, with the lock to wait for once the
/// database is let go in `pending`, or the failure in `failure`.
pub(super) fn range_answer(
    got: Result<Option<Resource>, Vec<SqlError>>,
    pending: &mut Option<Resource>,
    failure: &mut Option<Vec<SqlError>>,
) -> bool {
    match got {
        Ok(None) => true,
        Ok(Some(r)) => {
            *pending = Some(r);
            false
        }
        Err(e) => {
            *failure = Some(e);
            false
        }
    }
}

/// How far a chunk's rows are locked (`RowLocking::try_rows`): rows before `locked` are
/// (or, under READ COMMITTED, were while read); `fresh` says, per row, whether this
/// statement took its lock (only such a lock may be let go early: a lock the transaction
/// held before is its own to keep).
#[derive(Default)]
pub(super) struct ChunkLocks {
    pub locked: usize,
    pub fresh: Vec<bool>,
    /// The chunk reads one whole key of a clustered index (a point seek): under key-range
    /// locking the row it finds is locked without its range (`point_mode`).
    pub point: bool,
}

impl RowLocking {
    /// Whether reads lock rows (not NOLOCK / READ UNCOMMITTED).
    pub fn locks_rows(&self) -> bool {
        self.plan.mode.is_some()
    }

    /// Whether reads lock key ranges (invariant 5).
    pub fn key_ranges(&self) -> bool {
        self.plan.ranges
    }

    /// The KEY resource of the key `next` names, or of the end of the index (None).
    fn range_name(
        &self,
        next: Option<(extentdb_storage::table::Rid, &[u8])>,
    ) -> Result<Resource, Vec<SqlError>> {
        match next {
            Some((rid, rec)) => self.name(rid, rec),
            None => Ok(self
                .names
                .end_of_index()
                .expect("ranges of a clustered index")),
        }
    }

    /// Locks the range a read's key bounds (a ghost inside the range, the first live key
    /// past it, the end of the index: storage's `Gate::key_range`) in the plan's range
    /// mode without waiting, under its leaf's latch. Some(resource) when it would wait.
    pub fn try_key_range(
        &self,
        next: Option<(extentdb_storage::table::Rid, &[u8])>,
    ) -> Result<Option<Resource>, Vec<SqlError>> {
        let mode = self.plan.mode.expect("key ranges lock rows");
        let r = self.range_name(next)?;
        let mut l = self.locker.lock().unwrap();
        let fresh = l.held(&r).is_none();
        match l.try_lock_row(r, mode, self.escalation) {
            Ok(true) => {
                self.let_go_unless_kept(&mut l, r, fresh);
                Ok(None)
            }
            Ok(false) => Ok(Some(r)),
            Err(e) => Err(lock_error(e, self.spid)),
        }
    }

    /// Under READ COMMITTED a ghost's lock only waits for its deleter (invariant 6): a
    /// fresh one goes at once, as a row's does once read.
    fn let_go_unless_kept(&self, l: &mut Locker, r: Resource, fresh: bool) {
        if fresh && !self.plan.keep {
            l.unlock(r);
        }
    }

    /// Waits for the range lock `try_key_range` could not take; the caller holds no
    /// database (invariant 1) and reads the range again from before the key.
    pub fn wait_key_range(&self, r: Resource) -> Result<(), Vec<SqlError>> {
        let mode = self.plan.mode.expect("key ranges lock rows");
        if self.plan.nowait {
            return Err(vec![msg(1222, &[])]);
        }
        let mut l = self.locker.lock().unwrap();
        let fresh = l.held(&r).is_none();
        l.lock_row(r, mode, self.escalation)
            .map_err(|e| lock_error(e, self.spid))?;
        self.let_go_unless_kept(&mut l, r, fresh);
        Ok(())
    }

    /// An INSERT's test of the range its key falls in (invariant 5): RangeI-N on the first
    /// live key after it, or the end of the index, for an instant, under the leaf's latch.
    /// Some(resource) when a key-range lock of another transaction is in the way. A table
    /// lock of this statement leaves no other transaction a lock there to test.
    pub fn try_insert_range(
        &self,
        next: Option<(extentdb_storage::table::Rid, &[u8])>,
    ) -> Result<Option<Resource>, Vec<SqlError>> {
        if self.plan.table.is_some() {
            return Ok(None);
        }
        let r = self.range_name(next)?;
        let mut l = self.locker.lock().unwrap();
        match l.try_instant(r, LockMode::RangeIN) {
            Ok(true) => Ok(None),
            Ok(false) => Ok(Some(r)),
            Err(e) => Err(lock_error(e, self.spid)),
        }
    }

    /// Waits for the RangeI-N `try_insert_range` could not have, with no database held
    /// (invariant 1), and gives it up at once: the INSERT then finds its next key again.
    pub fn wait_insert_range(&self, r: Resource) -> Result<(), Vec<SqlError>> {
        let mut l = self.locker.lock().unwrap();
        l.instant(r, LockMode::RangeIN)
            .map_err(|e| lock_error(e, self.spid))
    }

    /// Whether the INSERT's new rows test key ranges: a clustered index's do.
    pub fn insert_ranges(&self) -> bool {
        self.names.by_key()
    }

    /// Locks one row a chunk read, without waiting: storage calls it under the row's page
    /// latch (its `RowGate`), so the row is read and locked as one step. Rows are locked in
    /// scan order, as SQL Server's scans take them, so two scans of one table never hold
    /// each other's rows while waiting (no deadlock between them). False when the lock
    /// would wait. Under READ COMMITTED a fresh lock goes at once.
    pub fn try_row(
        &self,
        rid: extentdb_storage::table::Rid,
        rec: &[u8],
        locks: &mut ChunkLocks,
    ) -> Result<bool, Vec<SqlError>> {
        if let Some(mode) = self.plan.mode {
            let mode = point_mode(mode, locks.point);
            let r = self.name(rid, rec)?;
            let mut l = self.locker.lock().unwrap();
            let fresh = l.held(&r).is_none();
            match l.try_lock_row(r, mode, self.escalation) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(e) => return Err(lock_error(e, self.spid)),
            }
            if fresh && !self.plan.keep {
                l.unlock(r);
            }
            locks.fresh.push(fresh);
        } else {
            locks.fresh.push(false);
        }
        locks.locked += 1;
        Ok(true)
    }

    /// Waits for the lock of the row `try_row` could not lock; the caller holds no
    /// database (invariant 1). Ok(false) for READPAST (skip the row); NOWAIT gives 1222.
    /// Returns whether the lock is this statement's (fresh).
    pub fn wait_row(
        &self,
        rid: extentdb_storage::table::Rid,
        rec: &[u8],
        point: bool,
    ) -> Result<Option<bool>, Vec<SqlError>> {
        let mode = point_mode(self.plan.mode.expect("only locked reads wait"), point);
        if self.plan.readpast {
            return Ok(None);
        }
        if self.plan.nowait {
            return Err(vec![msg(1222, &[])]);
        }
        let r = self.name(rid, rec)?;
        let mut l = self.locker.lock().unwrap();
        let fresh = l.held(&r).is_none();
        l.lock_row(r, mode, self.escalation)
            .map_err(|e| lock_error(e, self.spid))?;
        Ok(Some(fresh))
    }

    /// After a waited-for row was read again: a fresh read lock under READ COMMITTED goes,
    /// and so does the fresh lock of a row that is no longer there.
    pub fn read_done(
        &self,
        rid: extentdb_storage::table::Rid,
        rec: &[u8],
        fresh: bool,
        gone: bool,
    ) -> Result<(), Vec<SqlError>> {
        if fresh && (!self.plan.keep || gone) {
            let r = self.name(rid, rec)?;
            self.locker.lock().unwrap().unlock(r);
        }
        Ok(())
    }

    /// Lets go of the lock of a row the statement found it does not change (an UPDATE's
    /// row WHERE rejects), if this statement took it (`fresh`).
    pub fn not_needed(
        &self,
        rid: extentdb_storage::table::Rid,
        rec: &[u8],
        fresh: bool,
    ) -> Result<(), Vec<SqlError>> {
        // A key range read stays locked (invariant 5): it bounds the range WHERE read.
        if self.plan.mode.is_some() && fresh && !self.plan.ranges {
            let r = self.name(rid, rec)?;
            self.locker.lock().unwrap().unlock(r);
        }
        Ok(())
    }

    /// Locks a row the statement itself just wrote at a new place (a heap row that grew,
    /// an inserted row): nobody else can hold a lock on it yet.
    pub fn own_new_row(
        &self,
        rid: extentdb_storage::table::Rid,
        rec: &[u8],
    ) -> Result<(), Vec<SqlError>> {
        if self.plan.table.is_some() {
            return Ok(());
        }
        let r = self.name(rid, rec)?;
        let mut l = self.locker.lock().unwrap();
        match l.try_lock_row(r, LockMode::X, self.escalation) {
            Ok(true) => Ok(()),
            // Only a key another open transaction deleted can be held already; INSERT
            // waits for it beforehand (`lock_new_key`) except from a spool, which cannot
            // wait with the database held and reports the conflict instead.
            Ok(false) => Err(vec![msg(1222, &[])]),
            Err(e) => Err(lock_error(e, self.spid)),
        }
    }

    /// The table's intent lock for a statement that writes rows (IX), taken before the
    /// database is held: a SERIALIZABLE reader's table lock on a heap makes it wait here.
    /// Under SERIALIZABLE on a heap the plan's table U becomes X: an INSERT reads no rows.
    pub fn table_intent(&self) -> Result<(), Vec<SqlError>> {
        let mode = match self.plan.table {
            None => LockMode::IX,
            Some(LockMode::U) => LockMode::X,
            Some(_) => return Ok(()),
        };
        let mut l = self.locker.lock().unwrap();
        l.lock(self.names.table(), mode)
            .map_err(|e| lock_error(e, self.spid))
    }

    /// A row UPDATE or DELETE read and WHERE kept: its U lock (or the table's, under
    /// SERIALIZABLE) goes to X before the row changes, waiting with no database held
    /// (invariant 1). Nobody changed the row meanwhile: U excludes other writers.
    pub fn changes(
        &self,
        rid: extentdb_storage::table::Rid,
        rec: &[u8],
        point: bool,
    ) -> Result<(), Vec<SqlError>> {
        if !self.plan.changes_to_x {
            return Ok(());
        }
        let mut l = self.locker.lock().unwrap();
        let got = match (self.plan.table, self.plan.mode) {
            (Some(LockMode::U), _) => l.lock(self.names.table(), LockMode::X),
            (None, Some(_)) => {
                let r = self.name(rid, rec)?;
                let x = match self.plan.ranges {
                    true => point_mode(LockMode::RangeXX, point),
                    false => LockMode::X,
                };
                l.lock_row(r, x, self.escalation)
            }
            _ => Ok(()),
        };
        got.map_err(|e| lock_error(e, self.spid))
    }

    /// X on the key a new clustered row will have, waited for before the database is held
    /// (another open transaction may have deleted that key).
    pub fn lock_new_key(&self, rec: &[u8]) -> Result<(), Vec<SqlError>> {
        if self.plan.table.is_some() {
            return Ok(());
        }
        // A clustered row is named by its key alone: the RID does not enter the name.
        let r = self.name((extentdb_format::PageId::NULL, 0), rec)?;
        let mut l = self.locker.lock().unwrap();
        l.lock_row(r, LockMode::X, self.escalation)
            .map_err(|e| lock_error(e, self.spid))
    }

    fn name(
        &self,
        rid: extentdb_storage::table::Rid,
        rec: &[u8],
    ) -> Result<Resource, Vec<SqlError>> {
        self.names
            .resource(rid, rec)
            .map_err(|e| vec![super::tables::corrupt(&e.to_string())])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(level: Isolation, write: bool, hints: &[&str]) -> Result<LockPlan, Vec<i32>> {
        plan_of(level, write, hints, false)
    }

    fn plan_of(
        level: Isolation,
        write: bool,
        hints: &[&str],
        heap: bool,
    ) -> Result<LockPlan, Vec<i32>> {
        let hints: Vec<String> = hints.iter().map(|h| h.to_string()).collect();
        hint_locking(level, write, &hints, heap).map_err(|e| e.iter().map(|e| e.number).collect())
    }

    /// Proves the isolation levels and table hints lock as SQL Server's do (rows S and let
    /// go under READ COMMITTED, kept above it, X for writes), and that hints not built are
    /// refused instead of ignored.
    #[test]
    fn hints_and_levels() {
        use Isolation::*;
        let p = plan(ReadCommitted, false, &[]).unwrap();
        assert_eq!((p.mode, p.keep, p.table), (Some(LockMode::S), false, None));
        let p = plan(ReadCommitted, false, &["NOLOCK"]).unwrap();
        assert_eq!((p.mode, p.table), (None, None));
        assert_eq!(
            plan(ReadUncommitted, false, &["READCOMMITTEDLOCK"])
                .unwrap()
                .mode,
            Some(LockMode::S)
        );
        let p = plan(RepeatableRead, false, &[]).unwrap();
        assert_eq!((p.mode, p.keep), (Some(LockMode::S), true));
        let p = plan(ReadCommitted, false, &["HOLDLOCK"]).unwrap();
        assert_eq!(
            (p.mode, p.table, p.ranges, p.keep),
            (Some(LockMode::RangeSS), None, true, true),
            "HOLDLOCK on a clustered index: key ranges, no table lock"
        );
        let p = plan_of(ReadCommitted, false, &["HOLDLOCK"], true).unwrap();
        assert_eq!(
            (p.mode, p.table, p.ranges),
            (None, Some(LockMode::S), false),
            "a heap has no keys: its table is locked"
        );
        let p = plan(Serializable, false, &[]).unwrap();
        assert_eq!((p.mode, p.table), (Some(LockMode::RangeSS), None));
        let p = plan(Serializable, false, &["UPDLOCK"]).unwrap();
        assert_eq!(p.mode, Some(LockMode::RangeSU));
        let p = plan(Serializable, false, &["TABLOCK"]).unwrap();
        assert_eq!(
            (p.mode, p.table, p.ranges),
            (None, Some(LockMode::S), false)
        );
        let p = plan(ReadCommitted, false, &["UPDLOCK", "ROWLOCK"]).unwrap();
        assert_eq!((p.mode, p.keep), (Some(LockMode::U), true));
        let p = plan(ReadUncommitted, true, &[]).unwrap();
        assert_eq!(
            (p.mode, p.keep, p.changes_to_x),
            (Some(LockMode::U), true, true),
            "writes lock at any level: U, then X on the rows they change"
        );
        let p = plan(Serializable, true, &[]).unwrap();
        assert_eq!(
            (p.mode, p.table, p.ranges, p.changes_to_x),
            (Some(LockMode::RangeSU), None, true, true),
            "UPDATE and DELETE: RangeS-U on what they read, RangeX-X on what they change"
        );
        let p = plan_of(Serializable, true, &[], true).unwrap();
        assert_eq!((p.mode, p.table), (None, Some(LockMode::U)));
        let p = plan(ReadCommitted, true, &["XLOCK"]).unwrap();
        assert_eq!((p.mode, p.changes_to_x), (Some(LockMode::X), false));
        assert_eq!(
            plan(ReadCommitted, true, &["TABLOCK"]).unwrap().table,
            Some(LockMode::X)
        );
        assert_eq!(
            plan(ReadCommitted, false, &["TABLOCKX"]).unwrap().table,
            Some(LockMode::X)
        );
        assert!(plan(ReadCommitted, false, &["READPAST", "NOWAIT"])
            .is_ok_and(|p| p.readpast && p.nowait));
        assert_eq!(plan(Serializable, false, &["READPAST"]), Err(vec![650]));
        assert_eq!(
            plan(ReadCommitted, true, &["READPAST", "HOLDLOCK"]),
            Err(vec![650])
        );
        assert_eq!(
            plan(ReadCommitted, false, &["READPAST", "NOLOCK"]),
            Err(vec![650])
        );
        assert!(plan(RepeatableRead, false, &["READPAST"]).is_ok());
        assert_eq!(plan(ReadCommitted, true, &["NOLOCK"]), Err(vec![1065]));
        assert_eq!(plan(ReadCommitted, false, &["PAGLOCK"]), Err(vec![40517]));
        assert_eq!(plan(ReadCommitted, false, &["INDEX(1)"]), Err(vec![40517]));
        assert_eq!(plan(Snapshot, false, &[]), Err(vec![40517]));
    }
}
