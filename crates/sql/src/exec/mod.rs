//! The executor: runs parsed batches for a session against the instance and produces the
//! outputs a client shows (result sets, row counts, informational messages, errors).
//!
//! Batch semantics (as SQL Server): a syntax error stops the whole batch before anything
//! runs; errors of name resolution (137, 207, 208) stop the rest of the batch; other errors
//! end only their statement and the batch goes on.
//!
//! Session state: current database, session trace flags, variables of the current batch
//! (they end with the batch, as in T-SQL), SET NOCOUNT, @@ROWCOUNT, the open transaction
//! (see `xact`), SET IDENTITY_INSERT and the last identity value inserted.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;

use extentdb_storage::instance::{SessionInfo, MASTER_ID};
use extentdb_storage::Instance;

use crate::ast::{Statement, StatementKind};
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value};
pub use output::{Collect, Out, OutputSink};

mod admin;
mod aggregate;
mod alter_index;
mod backup;
mod backup_media;
mod batch_cache;
mod cardinality;
mod catalog_procedures;
mod check_constraints;
pub mod checkdb;
mod column_views;
mod computed_columns;
pub mod computed_values;
mod configuration;
mod constraint_state;
mod constraint_views;
mod cte;
mod database_lock;
mod datatype_info;
mod db_state;
pub mod ddl;
mod dml;
mod dml_from;
mod dml_output;
mod errors;
mod eval;
mod executesql;
mod expr_text;
mod file_system;
mod foreign_keys;
mod grouping_sets;
mod helpdb;
mod history;
mod host_views;
mod index_ddl;
mod index_seek;
mod index_usage;
mod information_schema;
mod join;
mod join_hash;
mod lock_views;
mod locking;
mod logins;
mod lower;
mod merge;
pub mod output;
mod physical_stats;
mod principal_views;
mod procedure_calls;
mod procedure_views;
mod procedures;
mod referential_actions;
mod schemas;
mod security;
mod security_ddl;
mod seek;
mod select;
mod select_into;
mod server_properties;
mod set_ops;
mod set_options;
mod show_statistics;
mod showplan;
mod shrink;
mod space;
mod space_usage;
mod spill;
mod statistics;
mod statistics_time;
mod stream;
mod structure;
mod subquery;
mod system_views;
mod table_cache;
mod table_ddl;
mod table_functions;
mod table_variables;
mod tables;
mod temp_tables;
mod tran_views;
mod type_views;
mod unique;
pub mod views;
mod window_functions;
mod xact;

/// One thing a batch produced, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// A whole result set (what is small by construction: a system view, a report).
    Rows {
        columns: Vec<(String, SqlType)>,
        rows: Vec<Vec<Value>>,
    },
    /// A result set streamed as it is produced: its columns, then each `Row` (see
    /// `output` invariant 1). `Collect` turns them into `Rows`.
    Columns(Vec<(String, SqlType)>),
    Row(Vec<Value>),
    RowsAffected(u64),
    /// Severity <= 10 messages and PRINT (number 0): shown as plain text.
    Info(SqlError),
    Error(SqlError),
    /// A change of session state a client tracks (TDS sends it as ENVCHANGE).
    EnvChange(EnvChange),
    /// A statement ended that reported something (rows, a count, an error) or is DDL, whose
    /// update count clients take as 0 (TDS sends a DONE with the statement's command).
    StatementEnd(StatementCommand),
}

/// What kind of statement ended (TDS's DONE CurCmd).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatementCommand {
    Select,
    Insert,
    Update,
    Delete,
    Merge,
    CreateTable,
    DropTable,
    CreateIndex,
    DropIndex,
    /// ALTER INDEX: its own name in sys.dm_exec_requests, otherwise as `Other`.
    AlterIndex,
    CreateDatabase,
    DropDatabase,
    AlterDatabase,
    Dbcc,
    Execute,
    CreateLogin,
    AlterLogin,
    DropLogin,
    /// Any other statement that reported something.
    Other,
}

/// Whether a statement only reads, as the EXEC of INSERT ... EXEC may (dml.rs): queries
/// without INTO, EXEC, DBCC, and what runs no statement of its own (control flow,
/// variables, SET options, PRINT); not transaction statements.
fn reads_only(kind: &StatementKind) -> bool {
    use StatementKind as K;
    match kind {
        K::Select(q) => !matches!(&q.body, crate::ast::QueryBody::Select(s) if s.into.is_some()),
        K::BeginTransaction { .. }
        | K::Commit { .. }
        | K::Rollback { .. }
        | K::SaveTransaction { .. } => false,
        K::Insert(i) => matches!(i.source, crate::ast::InsertSource::Execute(_)),
        // WAITFOR DELAY / TIME only waits.
        K::WaitFor { .. } => true,
        other => matches!(
            StatementCommand::of(other),
            None | Some(StatementCommand::Execute | StatementCommand::Dbcc)
        ),
    }
}

impl StatementCommand {
    /// The command of a statement that gets a DONE of its own, None for control flow,
    /// variables, SET options, USE, PRINT and transaction statements (the batch's final
    /// DONE covers them).
    fn of(kind: &StatementKind) -> Option<StatementCommand> {
        use StatementCommand as C;
        use StatementKind as K;
        Some(match kind {
            K::Select(_) => C::Select,
            K::Insert(_) => C::Insert,
            K::Update(_) => C::Update,
            K::Delete(_) => C::Delete,
            K::Merge(_) => C::Merge,
            K::CreateTable(_) => C::CreateTable,
            K::DropTable { .. } => C::DropTable,
            K::CreateIndex(_) => C::CreateIndex,
            K::DropIndex { .. } => C::DropIndex,
            K::AlterIndex(_) => C::AlterIndex,
            K::CreateDatabase(_) => C::CreateDatabase,
            K::DropDatabase { .. } => C::DropDatabase,
            K::AlterDatabase { .. } => C::AlterDatabase,
            K::Dbcc(_) => C::Dbcc,
            K::Execute(_) => C::Execute,
            K::CreateLogin { .. } => C::CreateLogin,
            K::AlterLogin { .. } => C::AlterLogin,
            K::DropLogin { .. } => C::DropLogin,
            K::Block(_)
            | K::If { .. }
            | K::While { .. }
            | K::TryCatch { .. }
            | K::Break
            | K::Continue
            | K::Return(_)
            | K::Declare(_)
            | K::SetVariable { .. }
            | K::SetOption { .. }
            | K::Use { .. }
            | K::Print(_)
            | K::BeginTransaction { .. }
            | K::Commit { .. }
            | K::Rollback { .. }
            | K::SaveTransaction { .. } => return None,
            _ => C::Other,
        })
    }

    /// The name sys.dm_exec_requests.command gives a running statement of this kind.
    pub fn request_command(self) -> &'static str {
        use StatementCommand as C;
        match self {
            C::Select => "SELECT",
            C::Insert => "INSERT",
            C::Update => "UPDATE",
            C::Delete => "DELETE",
            C::Merge => "MERGE",
            C::CreateTable => "CREATE TABLE",
            C::DropTable => "DROP TABLE",
            C::CreateIndex => "CREATE INDEX",
            C::DropIndex => "DROP INDEX",
            C::AlterIndex => "ALTER INDEX",
            C::CreateDatabase => "CREATE DATABASE",
            C::DropDatabase => "DROP DATABASE",
            C::AlterDatabase => "ALTER DATABASE",
            C::Dbcc => "DBCC",
            C::Execute => "EXECUTE",
            C::CreateLogin | C::AlterLogin | C::DropLogin => "LOGIN",
            C::Other => "UNKNOWN",
        }
    }

    /// True for DDL: a DONE is sent even when the statement reported nothing.
    pub fn is_ddl(self) -> bool {
        use StatementCommand as C;
        matches!(
            self,
            C::CreateTable
                | C::DropTable
                | C::CreateIndex
                | C::DropIndex
                | C::CreateDatabase
                | C::DropDatabase
                | C::AlterDatabase
                | C::CreateLogin
                | C::AlterLogin
                | C::DropLogin
        )
    }
}

/// Session state changes that clients are told of as they happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvChange {
    /// USE: the current database's old and new names.
    Database { old: String, new: String },
    /// The session's explicit transaction began (@@TRANCOUNT 0 to 1); its descriptor.
    BeginTransaction(u64),
    /// It committed (@@TRANCOUNT to 0).
    CommitTransaction(u64),
    /// It rolled back.
    RollbackTransaction(u64),
}

/// The shared engine: the instance and session numbering.
pub struct Engine {
    pub instance: Arc<Instance>,
    next_spid: AtomicU16,
    /// Transaction descriptors handed to clients (ENVCHANGE), unique in the process.
    next_descriptor: AtomicU64,
    /// The numbers of temporary tables' stored names (`temp_tables.rs`).
    temp_counter: temp_tables::TempCounter,
    /// sys.dm_db_index_usage_stats' counters (`index_usage.rs`).
    index_usage: index_usage::IndexUsage,
}

impl Engine {
    pub fn new(instance: Arc<Instance>) -> Arc<Engine> {
        let removed = spill::remove_leftover_work_files(&stream::spill_dir(&instance));
        if removed > 0 {
            instance.errorlog.write(
                "spid7s",
                &format!("Removed {removed} sort work file(s) a previous run left in tempdb's directory."),
            );
        }
        lock_views::log_deadlocks(&instance);
        computed_values::register();
        let engine = Arc::new(Engine {
            instance,
            next_spid: AtomicU16::new(51),
            next_descriptor: AtomicU64::new(1),
            temp_counter: Default::default(),
            index_usage: Default::default(),
        });
        history::ensure_tables(&engine);
        engine
    }

    /// A new session in master, with the next spid (user sessions start at 51), as the
    /// in-process `exec` runs it.
    pub fn session(self: &Arc<Engine>) -> Session {
        self.session_for(ClientInfo {
            login_name: "sa".into(),
            host_name: String::new(),
            program_name: "extentdb exec".into(),
            client_interface_name: "extentdb".into(),
            connection: None,
        })
    }

    /// A new session for a connected client, listed in sys.dm_exec_sessions until it ends.
    pub fn session_for(self: &Arc<Engine>, client: ClientInfo) -> Session {
        let spid = self.next_spid.fetch_add(1, Ordering::Relaxed);
        self.session_with_spid(spid, client)
    }

    /// A session with system spid `spid` (below 51, as SQL Server's own tasks have): the
    /// engine's start-up work, which takes no user session's number.
    fn system_session(self: &Arc<Engine>, spid: u16, client: ClientInfo) -> Session {
        assert!(spid < 51, "system spids are below the users'");
        self.session_with_spid(spid, client)
    }

    fn session_with_spid(self: &Arc<Engine>, spid: u16, client: ClientInfo) -> Session {
        let cancel = Arc::new(AtomicBool::new(false));
        let info = Arc::new(SessionInfo {
            session_id: spid,
            login_unix_us: unix_us(),
            login_name: client.login_name,
            host_name: client.host_name,
            program_name: client.program_name,
            client_interface_name: client.client_interface_name,
            database_id: AtomicU16::new(MASTER_ID),
            running: AtomicBool::new(false),
            last_request_start_us: std::sync::atomic::AtomicI64::new(unix_us()),
            command: std::sync::Mutex::new("AWAITING COMMAND"),
            killed: AtomicBool::new(false),
            cancel: cancel.clone(),
            xact_databases: Default::default(),
            lock_owner: Default::default(),
            transaction_isolation_level: std::sync::atomic::AtomicI16::new(2),
            lock_timeout_ms: std::sync::atomic::AtomicI32::new(-1),
            deadlock_priority: std::sync::atomic::AtomicI32::new(0),
            open_transaction_count: Default::default(),
            transaction_descriptor: Default::default(),
            transaction_begin_us: Default::default(),
            kill_hook: Default::default(),
            space: Default::default(),
            connection: client.connection,
        });
        self.instance
            .sessions
            .lock()
            .unwrap()
            .insert(spid, info.clone());
        let mut workspace = extentdb_storage::lock::Locker::new_workspace(
            self.instance.locks.clone(),
            spid,
            cancel.clone(),
        );
        // Nothing holds master exclusively (database_lock.rs): granted at once.
        workspace
            .lock(
                extentdb_storage::lock::Resource::Database { db: MASTER_ID },
                extentdb_storage::lock::LockMode::S,
            )
            .expect("S DATABASE on master");
        Session {
            engine: self.clone(),
            spid,
            info,
            database_id: MASTER_ID,
            flags: BTreeSet::new(),
            vars: HashMap::new(),
            declared_by: HashMap::new(),
            procedures: Vec::new(),
            return_status: None,
            procedure_aborted: false,
            nocount: false,
            statistics_io: false,
            implicit_transactions: false,
            options: Default::default(),
            batch_text: String::new(),
            showplan_statement: 0,
            rowcount: 0,
            trancount: 0,
            xacts: BTreeMap::new(),
            statement_marks: None,
            in_insert_exec: false,
            identity_insert: None,
            last_identity: None,
            descriptor: 0,
            cancel,
            locks: Default::default(),
            workspace,
            batches: Default::default(),
            tables: Default::default(),
            check_cache: Default::default(),
            fk_cache: Default::default(),
            index_uses: Default::default(),
            engine_reads: 0,
            cascade_depth: 0,
            deferred_self_references: None,
            temp_tables: Default::default(),
            table_vars: Default::default(),
            scopes: Default::default(),
        }
    }
}

/// Who a session is for (sys.dm_exec_sessions).
#[derive(Debug, Clone, Default)]
pub struct ClientInfo {
    pub login_name: String,
    pub host_name: String,
    pub program_name: String,
    pub client_interface_name: String,
    /// The TDS connection, when a client connected (sys.dm_exec_connections).
    pub connection: Option<extentdb_storage::instance::ConnectionInfo>,
}

fn unix_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

pub struct Session {
    pub engine: Arc<Engine>,
    pub spid: u16,
    /// This session's row in the instance's session list (shared with KILL).
    info: Arc<SessionInfo>,
    pub database_id: u16,
    /// Session trace flags (DBCC TRACEON without -1).
    pub flags: BTreeSet<u32>,
    /// Variables of the running batch, by lower-cased name (with the `@`).
    vars: HashMap<String, (SqlType, Value)>,
    /// Which DECLARE statement (its address in the batch's tree) declared each variable: run
    /// again (a loop) it is no redeclaration, as in SQL Server.
    declared_by: HashMap<String, usize>,
    /// The user procedures running, outermost first (object id, name): @@NESTLEVEL,
    /// @@PROCID and the ProcName of their errors (procedure_calls.rs).
    procedures: Vec<(u32, String)>,
    /// The innermost running procedure's RETURN status, once it returned one.
    return_status: Option<i32>,
    /// Set when a procedure's body ended the batch, for its EXEC to end the caller's.
    procedure_aborted: bool,
    pub nocount: bool,
    /// SET STATISTICS IO ON: each statement that reads a user table reports its reads
    /// (Msg 3615) after it.
    statistics_io: bool,
    /// SET IMPLICIT_TRANSACTIONS ON: with @@TRANCOUNT 0, a statement that reads or writes
    /// a table begins a transaction first (mssql-jdbc's setAutoCommit(false)).
    implicit_transactions: bool,
    /// XACT_ABORT, TEXTSIZE and the other SET options set_options.rs keeps.
    options: set_options::SessionOptions,
    /// The running batch's text while SHOWPLAN_TEXT or SHOWPLAN_ALL is on (its statements'
    /// StmtText), else empty.
    batch_text: String,
    /// Under SHOWPLAN, the number in its batch of the statement running (SHOWPLAN_ALL's
    /// StmtId), from 1.
    showplan_statement: i32,
    rowcount: i64,
    /// @@TRANCOUNT: nesting depth of BEGIN TRANSACTION.
    trancount: u32,
    /// The explicit transaction's storage transaction in each database it wrote to, begun
    /// lazily on the first write there.
    xacts: BTreeMap<u16, u64>,
    /// While a statement of several writes runs as one (`as_one_statement`): where each
    /// database's storage transaction stood when the statement first wrote there
    /// (database id, transaction, savepoint).
    statement_marks: Option<Vec<(u16, u64, usize)>>,
    /// While INSERT ... EXEC runs its EXEC (dml.rs): statements that change anything are
    /// refused, and another INSERT ... EXEC is 8164.
    in_insert_exec: bool,
    /// SET IDENTITY_INSERT ... ON: (database id, object id) of the one table it is on for.
    identity_insert: Option<(u16, u32)>,
    /// SCOPE_IDENTITY() and @@IDENTITY: the last identity value this session inserted.
    last_identity: Option<i64>,
    /// The explicit transaction's descriptor while @@TRANCOUNT > 0, else 0.
    descriptor: u64,
    /// Set from another thread to cancel the running batch (a TDS attention): the batch
    /// stops before its next statement or loop iteration.
    cancel: Arc<AtomicBool>,
    /// The transaction's locks and the session's locking settings (`locking.rs`).
    locks: locking::SessionLocks,
    /// The session's own locks outside transactions: S DATABASE on the database it uses
    /// (`database_lock.rs`).
    workspace: extentdb_storage::lock::Locker,
    /// The batches this session parsed, by text (`batch_cache.rs`).
    batches: batch_cache::BatchCache,
    /// The tables this session resolved, by name and catalog state (`table_cache.rs`).
    tables: std::cell::RefCell<table_cache::TableCache>,
    /// The CHECK constraints this session parsed, by table entry (`check_constraints.rs`).
    check_cache: std::cell::RefCell<check_constraints::CheckCache>,
    /// The FOREIGN KEY lookups this session generated, by table entry (`foreign_keys.rs`).
    fk_cache: std::cell::RefCell<foreign_keys::LookupCache>,
    /// The running statement's index uses (`index_usage.rs` invariant 1).
    index_uses: index_usage::StatementUses,
    /// Depth of reads the engine makes for itself (FOREIGN KEY lookups): tables resolved
    /// meanwhile note no index use (`index_usage.rs` invariant 2).
    engine_reads: u32,
    /// How many cascading referential actions the running statement is inside
    /// (`referential_actions.rs` invariant 4).
    cascade_depth: u32,
    /// The running INSERT's table (object id) and its rows whose self-referencing FOREIGN
    /// KEY found no parent before the statement's rows went in, checked again after
    /// (`foreign_keys.rs` invariant 6); None outside such an INSERT.
    deferred_self_references: Option<(u32, spill::SortSpill)>,
    /// Its temporary tables (`temp_tables.rs`).
    temp_tables: temp_tables::TempTables,
    /// The running batch's table variables (`table_variables.rs`).
    table_vars: table_variables::TableVariables,
    /// The running statement's enclosing rows, CTEs and subquery results (`subquery.rs`).
    scopes: subquery::Scopes,
}

impl Drop for Session {
    /// A session that ends inside a transaction rolls it back, as SQL Server does when a
    /// connection closes.
    fn drop(&mut self) {
        // The session's last task: its drops are its own deallocations (space_usage.rs).
        let _task = self.info.space.begin_task();
        // No client is left to tell: a failed rollback goes to the error log.
        for e in self.rollback_all() {
            self.log_event(&e);
        }
        self.drop_table_variables();
        self.drop_temporary_tables();
        self.info.space.end_task();
        self.engine
            .instance
            .sessions
            .lock()
            .unwrap()
            .remove(&self.spid);
    }
}

/// How a statement ended, for control flow.
enum Flow {
    Normal,
    Break,
    Continue,
    Return,
    /// The rest of the batch is skipped.
    AbortBatch,
}

/// A syntax error as the message clients see.
fn parse_error(e: crate::parser::ParseError) -> SqlError {
    e.into()
}

/// The statements that begin a transaction under SET IMPLICIT_TRANSACTIONS ON when none is
/// open (SQL Server's list: SELECT from a table, INSERT, UPDATE, DELETE, CREATE/DROP/
/// TRUNCATE TABLE, BEGIN TRANSACTION, which then makes @@TRANCOUNT 2). A SELECT without
/// FROM (`SELECT @@TRANCOUNT`) does not.
fn starts_implicit_transaction(kind: &StatementKind) -> bool {
    use StatementKind as K;
    match kind {
        K::Select(q) => match &q.body {
            crate::ast::QueryBody::Select(s) => !s.from.is_empty(),
            _ => true,
        },
        K::Insert(_)
        | K::Update(_)
        | K::Delete(_)
        | K::Merge(_)
        | K::CreateTable(_)
        | K::DropTable { .. }
        | K::TruncateTable { .. }
        | K::BeginTransaction { .. } => true,
        _ => false,
    }
}

/// Errors that SQL Server raises while compiling a batch: they end the batch.
fn aborts_batch(e: &SqlError) -> bool {
    matches!(e.number, 137 | 207 | 208 | 102 | 156 | 1087 | 2715) || e.severity >= 20
}

impl Session {
    /// Parses and runs one batch, collecting its outputs.
    pub fn execute(&mut self, batch: &str) -> Vec<Output> {
        self.execute_with_parameters(batch, Vec::new())
    }

    /// `execute_streaming` into a `Collect`.
    pub fn execute_with_parameters(
        &mut self,
        batch: &str,
        parameters: Vec<(String, SqlType, Value)>,
    ) -> Vec<Output> {
        let mut c = Collect::default();
        self.execute_streaming(batch, parameters, &mut c);
        c.outputs
    }

    /// Runs one batch with parameters already declared as variables (sp_executesql and
    /// the prepared-statement RPCs): `(name with @, type, value)`. Outputs go to `sink` as
    /// they are produced.
    pub fn execute_streaming(
        &mut self,
        batch: &str,
        parameters: Vec<(String, SqlType, Value)>,
        sink: &mut dyn OutputSink,
    ) {
        self.vars.clear();
        self.declared_by.clear();
        for (name, t, v) in parameters {
            self.vars.insert(name.to_lowercase(), (t, v));
        }
        *self.info.command.lock().unwrap() = "EXECUTE";
        // The request is a task: its tempdb pages are charged to it (space_usage.rs).
        let _task = self.info.space.begin_task();
        self.info.running.store(true, Ordering::Release);
        self.info
            .last_request_start_us
            .store(unix_us(), Ordering::Release);
        let mut out = Out::new(sink);
        out.textsize = self.options.textsize;
        let stats = &self.engine.instance.sql_statistics;
        stats.batch_requests.fetch_add(1, Ordering::Relaxed);
        let watch = self
            .options
            .statistics_time
            .then(statistics_time::Stopwatch::start);
        self.batch_text.clear();
        self.showplan_statement = 0;
        if self.options.showplan.is_some() {
            self.batch_text.push_str(batch);
        }
        match self.batches.parse(batch, &stats.compilations) {
            Err(e) => out.push(Output::Error(parse_error(e))),
            Ok(statements) if showplan::alone_in_batch(&statements).is_err() => {
                // showplan.rs invariant 2: a compile error, so nothing of the batch runs.
                let e = showplan::alone_in_batch(&statements).unwrap_err();
                let line = statements.first().map_or(1, |s| s.line);
                out.push(Output::Error(e.with_line(line)));
            }
            Ok(statements) => {
                if let (Some(w), Some(last)) = (watch, statements.last()) {
                    let t = statistics_time::parse_and_compile_time(w.stop());
                    out.push(Output::Info(t.with_line(last.line)));
                }
                self.run_block(&statements, &mut out);
            }
        }
        // The batch's table variables end with it (table_variables.rs invariant 2).
        self.drop_table_variables();
        self.info.space.end_task();
        self.info.running.store(false, Ordering::Release);
        *self.info.command.lock().unwrap() = "AWAITING COMMAND";
    }

    fn run_block(&mut self, statements: &[Statement], out: &mut Out) -> Flow {
        for s in statements {
            match self.run_statement(s, out) {
                Flow::Normal => {}
                other => return other,
            }
        }
        Flow::Normal
    }

    /// sp_reset_connection (a pooled connection handed to a new user): the open transaction
    /// rolls back, the session returns to `database_id`, and its SET options, session trace
    /// flags and identity state are cleared.
    pub fn reset_connection(&mut self, database_id: u16) {
        // A task of the session: what it drops is the session's deallocation.
        let _task = self.info.space.begin_task();
        // The new user starts clean; a failed rollback goes to the error log.
        for e in self.rollback_all() {
            self.log_event(&e);
        }
        self.drop_temporary_tables();
        self.info.space.end_task();
        // The login's database again; one being dropped or restored meanwhile leaves the
        // session where it is, as a USE that times out would.
        if let Err(errors) = self.enter_database(database_id) {
            for e in errors {
                self.log_event(&e);
            }
        }
        self.flags.clear();
        self.vars.clear();
        self.declared_by.clear();
        self.nocount = false;
        self.statistics_io = false;
        self.implicit_transactions = false;
        self.options = Default::default();
        self.rowcount = 0;
        self.identity_insert = None;
        self.last_identity = None;
    }

    /// The login this session runs as.
    pub fn login_name(&self) -> &str {
        &self.info.login_name
    }

    /// True once KILL named this session: its connection should close.
    pub fn killed(&self) -> bool {
        self.info.killed.load(Ordering::Acquire)
    }

    /// The flag another thread sets to cancel this session's running batch.
    /// WAITFOR DELAY 'hh:mm[:ss[.fff]]' (that long) or WAITFOR TIME 'hh:mm[:ss]' (until
    /// that local time of day, tomorrow's if it has passed), holding no lock; an attention
    /// or KILL ends it. A bad time string is Msg 148.
    fn waitfor(&mut self, delay: bool, value: &crate::ast::Expr) -> Result<(), Vec<SqlError>> {
        use crate::types::TICKS_PER_DAY;
        let text = eval::to_text(&self.eval(value, None).map_err(|e| vec![e])?);
        let day_start = crate::convert::DAYS_TO_1900 as i64 * TICKS_PER_DAY;
        let ticks = crate::convert::parse_datetime_text(&text)
            .map(|p| p.ticks - day_start)
            .filter(|t| (0..TICKS_PER_DAY).contains(t) && text.contains(':'))
            .ok_or_else(|| vec![msg(148, &[&text])])?;
        let wait_ticks = if delay {
            ticks
        } else {
            use crate::functions::Clock;
            let now = crate::functions::SystemClock
                .now_ticks_local()
                .rem_euclid(TICKS_PER_DAY);
            (ticks - now).rem_euclid(TICKS_PER_DAY)
        };
        let until =
            std::time::Instant::now() + std::time::Duration::from_nanos(wait_ticks as u64 * 100);
        while !self.cancelled() {
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(std::time::Duration::from_millis(20)));
        }
        Ok(())
    }

    /// What KILL does to this session's connection besides cancelling its batch
    /// (`SessionInfo::kill`).
    pub fn set_kill_hook(&self, hook: Box<dyn Fn() + Send + Sync>) {
        self.info.kill_hook.set(hook);
    }

    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        self.cancel.clone()
    }

    /// True once the running batch was cancelled (the flag stays set until the caller
    /// clears it with `take_cancel`).
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Acquire)
    }

    /// Clears the cancel flag; true if it was set.
    pub fn take_cancel(&self) -> bool {
        self.cancel.swap(false, Ordering::AcqRel)
    }

    /// The value of a variable of the last batch (an OUTPUT parameter after the batch).
    pub fn variable(&self, name: &str) -> Option<(SqlType, Value)> {
        self.vars.get(&name.to_lowercase()).cloned()
    }

    /// @@TRANCOUNT.
    pub fn trancount(&self) -> u32 {
        self.trancount
    }

    /// The open explicit transaction's descriptor, 0 outside one.
    pub fn transaction_descriptor(&self) -> u64 {
        self.descriptor
    }

    fn run_statement(&mut self, s: &Statement, out: &mut Out) -> Flow {
        if self.cancelled() || out.gone() {
            return Flow::AbortBatch;
        }
        let before = out.reported();
        let command = StatementCommand::of(&s.kind);
        if let Some(c) = command {
            *self.info.command.lock().unwrap() = c.request_command();
        }
        let flow = self.run_statement_inner(s, out);
        if let Some(command) = command {
            if out.reported() > before || command.is_ddl() {
                out.push(Output::StatementEnd(command));
            }
        }
        flow
    }

    fn run_statement_inner(&mut self, s: &Statement, out: &mut Out) -> Flow {
        if self.options.showplan.is_some() {
            self.showplan_statement += 1;
        }
        let showplan = (self.options.showplan).filter(|_| !showplan::runs_under_showplan(s));
        let watch = (self.options.statistics_time
            && showplan.is_none()
            && statistics_time::reports_execution_time(&s.kind))
        .then(statistics_time::Stopwatch::start);
        self.statement_locks_start();
        self.scopes.statement_start();
        let result = match showplan {
            Some(form) => self.show_plan(s, form, out),
            None => self.statement(s, out),
        };
        // Before the statement's locks go, so a DROP waiting for them removes its
        // counters after (index_usage.rs invariants 1 and 3).
        self.flush_index_usage();
        self.scopes.statement_start();
        out.extend(std::mem::take(&mut self.scopes.deferred));
        // Outside a transaction a statement's locks end with it (locking.rs invariant 2);
        // inside one, its Sch-S locks do (invariant 4).
        if self.trancount == 0 {
            self.release_locks();
        } else {
            self.statement_locks_end();
        }
        // Reported only when the option is still on (the SET turning it off reports none).
        let mut times = watch
            .filter(|_| self.options.statistics_time)
            .map(|w| Output::Info(statistics_time::execution_times(w.stop()).with_line(s.line)));
        match result {
            Ok(flow) => {
                out.extend(times);
                flow
            }
            Err(errors) => {
                // A deadlock victim's transaction is rolled back whole (invariant 3), and
                // so is any transaction under SET XACT_ABORT ON once a statement fails.
                let failed = errors.iter().any(|e| !e.is_info());
                let mut abort = (locking::is_deadlock(&errors)
                    || (failed && self.options.xact_abort))
                    && self.end_victim(out);
                for e in errors {
                    if e.number == 3621 {
                        // SQL Server sends a failed statement's times ahead of 3621.
                        out.extend(times.take());
                    }
                    abort |= aborts_batch(&e);
                    self.log_event(&e);
                    let e = if e.line == 0 { e.with_line(s.line) } else { e };
                    // procedure_calls.rs invariant 6.
                    let e = match (&e.procedure, self.procedures.last()) {
                        (None, Some((_, name))) => {
                            let line = e.line;
                            e.in_procedure(name, line)
                        }
                        _ => e,
                    };
                    out.push(if e.is_info() {
                        Output::Info(e)
                    } else {
                        Output::Error(e)
                    });
                }
                out.extend(times);
                if abort {
                    Flow::AbortBatch
                } else {
                    Flow::Normal
                }
            }
        }
    }

    /// Writes an error SQL Server also logs (`messages::is_event_logged`) to the ERRORLOG.
    fn log_event(&self, e: &SqlError) {
        if crate::messages::is_event_logged(e) {
            self.engine.instance.errorlog.write(
                &format!("spid{}", self.spid),
                &format!(
                    "Error: {}, Severity: {}, State: {}.\n{}",
                    e.number, e.severity, e.state, e.text
                ),
            );
        }
    }

    fn statement(&mut self, s: &Statement, out: &mut Out) -> Result<Flow, Vec<SqlError>> {
        use StatementKind as K;
        // Only the EXEC whose procedure set it reads it (procedure_calls.rs invariant 8).
        self.procedure_aborted = false;
        if self.implicit_transactions && self.trancount == 0 && starts_implicit_transaction(&s.kind)
        {
            self.begin_transaction(out);
        }
        if self.in_insert_exec && !reads_only(&s.kind) {
            return Err(vec![lower::not_yet(
                "a statement that changes data, definitions or the transaction inside INSERT ... EXEC",
            )]);
        }
        match &s.kind {
            K::Block(body) => return Ok(self.run_block(body, out)),
            K::If {
                condition,
                then_branch,
                else_branch,
            } => {
                if self.timed_condition(condition, s.line, out)? == Some(true) {
                    return Ok(self.run_statement(then_branch, out));
                } else if let Some(e) = else_branch {
                    return Ok(self.run_statement(e, out));
                }
            }
            K::While { condition, body } => {
                while !self.cancelled()
                    && self.timed_condition(condition, s.line, out)? == Some(true)
                {
                    match self.run_statement(body, out) {
                        Flow::Break => break,
                        Flow::Return => return Ok(Flow::Return),
                        Flow::AbortBatch => return Ok(Flow::AbortBatch),
                        Flow::Normal | Flow::Continue => {}
                    }
                }
            }
            K::Break => return Ok(Flow::Break),
            K::Continue => return Ok(Flow::Continue),
            K::Return(value) => {
                self.return_value(value.as_ref())?;
                return Ok(Flow::Return);
            }
            K::Print(e) => {
                let v = self.eval(e, None).map_err(|e| vec![e])?;
                out.push(Output::Info(SqlError::print(eval::to_text(&v))));
            }
            K::WaitFor { delay, value } => self.waitfor(*delay, value)?,
            K::Declare(decls) => self.declare(decls)?,
            K::SetVariable { name, op, value } => self.set_variable(name, *op, value)?,
            K::SetOption { options, value } => {
                self.set_option(options, value)?;
                out.textsize = self.options.textsize;
            }
            K::Use { database } => {
                if let Some(e) = self.unopened_error(database) {
                    return Err(vec![e]);
                }
                let (id, db) = self
                    .engine
                    .instance
                    .database_by_name(database)
                    .ok_or_else(|| vec![msg(911, &[database])])?;
                self.require_db_access(id, &db.read().unwrap())?;
                let old = self.current_db_name();
                let name = db.read().unwrap().name.clone();
                drop(db);
                // S DATABASE first: a DROP, RESTORE or state change holding it is waited
                // out (database_lock.rs), and the database is then looked at again.
                self.lock_database(id)?;
                // Checked and entered in one turn, so two sessions never both get into a
                // SINGLE_USER database (db_state.rs).
                let inst = self.engine.instance.clone();
                let turn = inst.access_turn.lock().unwrap();
                let refusal = match self.engine.instance.database_by_name(database) {
                    Some((now, _)) if now == id => self.single_user_refusal(id, &name),
                    _ => Some(
                        self.unopened_error(database)
                            .unwrap_or_else(|| msg(911, &[database])),
                    ),
                };
                if let Some(e) = refusal {
                    drop(turn);
                    self.unlock_database(id);
                    return Err(vec![e]);
                }
                self.moved_into(id);
                drop(turn);
                out.push(Output::EnvChange(EnvChange::Database {
                    old,
                    new: name.clone(),
                }));
                out.push(Output::Info(msg(5701, &[&name])));
            }
            K::Select(q) => self.select(q, out)?,
            K::CreateTable(c) => self.create_table(c)?,
            K::DropTable { if_exists, names } => self.drop_tables(*if_exists, names)?,
            K::TruncateTable { name } => self.truncate_table(name)?,
            K::CreateIndex(c) => self.create_index(c)?,
            K::CreateStatistics {
                name,
                table,
                columns,
                options,
            } => self.create_statistics(name, table, columns, options)?,
            K::DropStatistics { names } => self.drop_statistics(names)?,
            K::CreateProcedure(d) => self.create_procedure(d)?,
            K::DropProcedure { if_exists, names } => self.drop_procedures(*if_exists, names)?,
            K::UpdateStatistics {
                table,
                names,
                options,
            } => self.update_statistics(table, names, options)?,
            K::DropIndex { if_exists, indexes } => self.drop_indexes(*if_exists, indexes)?,
            K::AlterIndex(a) => self.alter_index(a, out)?,
            K::Insert(i) => self.insert(i, out)?,
            K::Update(u) => self.update(u, out)?,
            K::Delete(d) => self.delete(d, out)?,
            K::Merge(m) => self.merge(m, out)?,
            K::SetIdentityInsert { table, on } => self.set_identity_insert(table, *on)?,
            K::AlterTableLockEscalation {
                table,
                lock_escalation,
            } => self.alter_table_lock_escalation(table, lock_escalation)?,
            K::AlterTableAddCheck {
                table,
                check_existing,
                check,
            } => self.alter_table_add_check(table, *check_existing, check)?,
            K::AlterTableAddForeignKey {
                table,
                check_existing,
                key,
            } => self.alter_table_add_foreign_key(table, *check_existing, key)?,
            K::AlterTableDropConstraint {
                table,
                if_exists,
                names,
            } => self.alter_table_drop_constraints(table, *if_exists, names)?,
            K::AlterTableConstraintState {
                table,
                check_existing,
                enable,
                names,
            } => self.alter_table_constraint_state(
                table,
                *check_existing,
                *enable,
                names.as_deref(),
            )?,
            K::BeginTransaction { .. } => self.begin_transaction(out),
            K::Commit { .. } => self.commit_transaction(out)?,
            K::Rollback { .. } => self.rollback_transaction(out)?,
            K::Dbcc(d) => self.dbcc(d, out)?,
            K::Execute(e) => {
                let result = self.execute_proc(e, out);
                // A procedure whose body ended the batch (a deadlock victim, XACT_ABORT)
                // ends its caller's too (procedure_calls.rs invariant 8).
                let aborted = std::mem::take(&mut self.procedure_aborted);
                result?;
                if aborted {
                    return Ok(Flow::AbortBatch);
                }
            }
            _ => return self.lowered(s, out),
        }
        Ok(Flow::Normal)
    }

    /// IF's or WHILE's condition, reporting its execution times under SET STATISTICS TIME
    /// ON as a statement of its own (statistics_time.rs).
    fn timed_condition(
        &mut self,
        condition: &crate::ast::Expr,
        line: u32,
        out: &mut Out,
    ) -> Result<Option<bool>, Vec<SqlError>> {
        let watch = self
            .options
            .statistics_time
            .then(statistics_time::Stopwatch::start);
        let r = self.condition(condition)?;
        if let Some(w) = watch {
            let t = statistics_time::execution_times(w.stop()).with_line(line);
            out.push(Output::Info(t));
        }
        Ok(r)
    }

    fn set_option(
        &mut self,
        options: &[String],
        value: &crate::ast::SetValue,
    ) -> Result<(), Vec<SqlError>> {
        if self.set_locking_option(options, value)? {
            return Ok(());
        }
        self.set_session_option(options, value)
    }

    /// SET STATISTICS IO's report of a statement's reads of table `t` (Msg 3615). Only
    /// data pages exist: no page servers, no read-ahead, no LOB pages, so those are 0.
    fn report_io(&self, t: &tables::TableRef, out: &mut Out) {
        if let Some(line) = self.io_line(t) {
            out.push(line);
        }
    }

    /// `report_io`'s line, None with SET STATISTICS IO OFF.
    fn io_line(&self, t: &tables::TableRef) -> Option<Output> {
        if !self.statistics_io {
            return None;
        }
        let io = t.io.get();
        let (scans, logical, physical) = (io.scans, io.reads.logical, io.reads.physical);
        Some(Output::Info(msg(
            3615,
            &[
                &t.entry.name,
                &scans,
                &logical,
                &physical,
                &0,
                &0,
                &0,
                &0,
                &0,
                &0,
                &0,
                &0,
            ],
        )))
    }

    /// Reports rows affected unless SET NOCOUNT ON, and sets @@ROWCOUNT.
    fn rows_affected(&mut self, n: u64, out: &mut Out) {
        self.rowcount = n as i64;
        if !self.nocount {
            out.push(Output::RowsAffected(n));
        }
    }

    /// Sends a result set, then `(n rows affected)` unless SET NOCOUNT ON.
    fn send_rowset(&mut self, r: views::Rowset, out: &mut Out) {
        let n = r.rows.len() as u64;
        out.push(r.into());
        self.rows_affected(n, out);
    }

    /// The current database's name.
    fn current_db_name(&self) -> String {
        self.engine
            .instance
            .database(self.database_id)
            .map(|d| d.read().unwrap().name.clone())
            .unwrap_or_default()
    }
}
