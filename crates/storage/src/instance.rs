//! The instance: the data directory, its configuration, the error log, global trace flags,
//! and the registry of databases (master, tempdb, model, user databases).
//!
//! Layout of DIR: `instance.conf`, `log/ERRORLOG*`, `data/` (the default data root, holding
//! master.mdf, mastlog.ldf, model.mdf, modellog.ldf, tempdb files).
//!
//! Invariants:
//! 1. master's catalog lists every database but master itself; a database is visible only
//!    after master's catalog that lists it is durable.
//! 2. Every file of every database lies under a data root (checked by `resolve_path`
//!    before any file is created), so no client can create or overwrite an arbitrary file.
//! 3. tempdb's files are deleted and created anew at every start.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use extentdb_format::catalog::{DatabaseEntry, RecoveryModel};
use extentdb_format::file_header::FileType;
use extentdb_io::FileSystem;

use crate::config::InstanceConfig;
use crate::configurations::MAX_SERVER_MEMORY;
use crate::database::{Database, NewDatabase, NewFile, OpContext};
use crate::errorlog::ErrorLog;
use crate::file_init::{InitLog, InitPolicy};
use crate::StorageError;

pub const MASTER_ID: u16 = 1;
pub const TEMPDB_ID: u16 = 2;
pub const MODEL_ID: u16 = 3;
/// msdb: the backup and restore history (backupset, backupmediaset, backupmediafamily,
/// restorehistory), written by the sql crate after each BACKUP and RESTORE.
pub const MSDB_ID: u16 = 4;
/// The first id given to a user database.
pub const FIRST_USER_ID: u16 = 5;
/// The version string logged at start-up and returned by @@VERSION.
pub const VERSION: &str = concat!("extentdb ", env!("CARGO_PKG_VERSION"));
/// Trace flag: disable instant file initialization.
pub const TF_NO_IFI: u32 = 1806;
/// Trace flag: report file zeroing.
pub const TF_ZEROING: u32 = 3004;
/// Trace flag: send trace output to the error log.
pub const TF_TO_ERRORLOG: u32 = 3605;
/// Trace flag 1165: proportional fill recalculations to the error log (with 3605).
pub const TF_PROPORTIONAL_FILL: u32 = 1165;
/// Trace flag 1222: deadlocks' participants and resources to the error log.
pub const TF_DEADLOCK_GRAPH: u32 = 1222;
/// Trace flag 2549: DBCC CHECKDB reads each data file as if it were its own drive
/// (check_db.rs `RunQueue`).
pub const TF_CHECKDB_PER_FILE: u32 = 2549;
/// Trace flag 2562: DBCC CHECKDB checks the whole database in one batch, which is how
/// extentdb always checks (check_db.rs: one pass, no batches of indexes).
pub const TF_CHECKDB_ONE_BATCH: u32 = 2562;
/// Trace flag 3213: a backup's buffer configuration (sql backup_media.rs), with 3604 or
/// 3605.
pub const TF_BACKUP_BUFFERS: u32 = 3213;
/// Trace flag 3604: DBCC's printed output to the client.
pub const TF_TO_CLIENT: u32 = 3604;
/// The trace flags extentdb builds, each doing what its SQL Server namesake does; any
/// other is refused (DBCC TRACEON, startup -T), never set and ignored.
pub const BUILT_TRACE_FLAGS: &[u32] = &[
    TF_PROPORTIONAL_FILL,
    TF_DEADLOCK_GRAPH,
    TF_NO_IFI,
    TF_CHECKDB_PER_FILE,
    TF_CHECKDB_ONE_BATCH,
    TF_ZEROING,
    TF_BACKUP_BUFFERS,
    TF_TO_CLIENT,
    TF_TO_ERRORLOG,
];

/// Options of `extentdb setup`.
#[derive(Debug, Clone)]
pub struct SetupOptions {
    pub config: InstanceConfig,
    pub sa_password: Option<String>,
}

pub type DbHandle = Arc<crate::shared::SharedDatabase>;

/// A long-running request as sys.dm_exec_requests shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestProgress {
    pub session_id: u16,
    pub database_id: u16,
    pub command: String,
    pub start_unix_us: i64,
    pub percent_complete: f32,
}

/// SQL Server's "SQLServer:SQL Statistics" counters, cumulative since the instance started
/// (sys.dm_os_performance_counters, as its per-second counters are): counted by the SQL
/// layer, kept here so every session adds to one count.
#[derive(Debug, Default)]
pub struct SqlStatistics {
    /// "Batch Requests/sec": batches run (a SQL batch, or one RPC call's text).
    pub batch_requests: std::sync::atomic::AtomicU64,
    /// "SQL Compilations/sec": batches parsed; a batch a session's cache of parsed batches
    /// answers is not compiled again.
    pub compilations: std::sync::atomic::AtomicU64,
}

/// A connected session as sys.dm_exec_sessions shows it; the flags let KILL reach it.
#[derive(Debug)]
pub struct SessionInfo {
    pub session_id: u16,
    pub login_unix_us: i64,
    pub login_name: String,
    pub host_name: String,
    pub program_name: String,
    pub client_interface_name: String,
    /// The current database (updated on USE).
    pub database_id: std::sync::atomic::AtomicU16,
    /// True while a request runs ('running'), else 'sleeping'.
    pub running: std::sync::atomic::AtomicBool,
    /// Unix microseconds of the last request's start.
    pub last_request_start_us: std::sync::atomic::AtomicI64,
    /// The running statement's command as sys.dm_exec_requests names it (SELECT, INSERT,
    /// DBCC ...), while a request runs.
    pub command: Mutex<&'static str>,
    /// Set by KILL: the session's connection closes and its transaction rolls back.
    pub killed: std::sync::atomic::AtomicBool,
    /// The session's cancel flag (KILL also cancels the running batch).
    pub cancel: Arc<std::sync::atomic::AtomicBool>,
    /// The databases the session's explicit transaction has written to (ALTER DATABASE ...
    /// SET OFFLINE waits for them, or rolls them back WITH ROLLBACK).
    pub xact_databases: Mutex<BTreeSet<u16>>,
    /// The lock owner of the session's current transaction, while it has one
    /// (sys.dm_exec_requests' wait columns, blocking_session_id).
    pub lock_owner: Mutex<Option<Arc<extentdb_lock::Owner>>>,
    /// SET TRANSACTION ISOLATION LEVEL as sys.dm_exec_sessions.transaction_isolation_level
    /// numbers it (1 READ UNCOMMITTED ... 5 SNAPSHOT).
    pub transaction_isolation_level: std::sync::atomic::AtomicI16,
    /// SET LOCK_TIMEOUT (ms, -1 for ever) and SET DEADLOCK_PRIORITY, for
    /// sys.dm_exec_sessions.
    pub lock_timeout_ms: std::sync::atomic::AtomicI32,
    pub deadlock_priority: std::sync::atomic::AtomicI32,
    /// The explicit transaction (@@TRANCOUNT > 0): its nesting depth, its descriptor and
    /// when it began (Unix microseconds), for sys.dm_tran_session_transactions,
    /// sys.dm_tran_active_transactions and DBCC OPENTRAN; 0 when there is none.
    pub open_transaction_count: std::sync::atomic::AtomicU32,
    pub transaction_descriptor: std::sync::atomic::AtomicU64,
    pub transaction_begin_us: std::sync::atomic::AtomicI64,
    /// The session's tempdb space, by its completed tasks and its running one
    /// (sys.dm_db_session_space_usage, sys.dm_db_task_space_usage).
    pub space: crate::task_space::SessionSpace,
    /// What KILL does beside setting the flags: the TDS server shuts the connection's
    /// socket down, so a thread blocked reading a request the client never finished wakes.
    pub kill_hook: KillHook,
    /// The session's TDS connection (sys.dm_exec_connections); None for a session no
    /// client connected for (`extentdb exec`, the engine's own).
    pub connection: Option<ConnectionInfo>,
}

/// A TDS connection as sys.dm_exec_connections shows it, fixed at login.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionInfo {
    pub client_net_address: String,
    pub client_tcp_port: u16,
    pub local_net_address: String,
    pub local_tcp_port: u16,
    /// Every message after the login goes through TLS (not the login alone).
    pub encrypted: bool,
    /// The TDS version LOGINACK answered (0x74000004 for 7.4).
    pub protocol_version: u32,
    pub net_packet_size: u32,
}

/// A session's way to be woken by KILL (`SessionInfo::kill`).
#[derive(Default)]
pub struct KillHook(Mutex<Option<Box<dyn Fn() + Send + Sync>>>);

impl std::fmt::Debug for KillHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KillHook")
    }
}

impl KillHook {
    pub fn set(&self, hook: Box<dyn Fn() + Send + Sync>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(hook);
    }
}

impl SessionInfo {
    /// KILL: the running batch is cancelled, the connection closes (its hook wakes a thread
    /// blocked on the client) and its transaction rolls back when its thread drops it.
    pub fn kill(&self) {
        use std::sync::atomic::Ordering;
        self.killed.store(true, Ordering::Release);
        self.cancel.store(true, Ordering::Release);
        if let Some(hook) = self
            .kill_hook
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            hook();
        }
    }
}

/// Why a database listed in master is not online (sys.databases.state_desc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnopenedState {
    /// A file could not be found or opened: recovery could not start (state 3, Msg 945).
    RecoveryPending,
    /// Recovery found damage: a page, the catalog or the log (state 4, Msg 926).
    Suspect,
    /// Restored WITH NORECOVERY: waiting for RESTORE LOG or a differential, or for RESTORE
    /// ... WITH RECOVERY (state 1, Msg 927).
    Restoring,
    /// ALTER DATABASE ... SET OFFLINE: closed, its files released, recorded in master so a
    /// restart leaves it closed (state 6, Msg 942).
    Offline,
    /// Being opened through recovery by ALTER DATABASE ... SET ONLINE (state 2, Msg 922).
    Recovering,
}

impl UnopenedState {
    pub fn state(self) -> (u8, &'static str) {
        match self {
            UnopenedState::RecoveryPending => (3, "RECOVERY_PENDING"),
            UnopenedState::Suspect => (4, "SUSPECT"),
            UnopenedState::Restoring => (1, "RESTORING"),
            UnopenedState::Offline => (6, "OFFLINE"),
            UnopenedState::Recovering => (2, "RECOVERING"),
        }
    }
}

/// Why a file name is refused by `in_roots`.
enum RootError {
    /// Outside every root, or with `..`.
    Outside,
    /// Its directory does not exist.
    NoDirectory,
}

/// `filename` as a path inside one of `roots`: a name without a directory goes to the
/// first root; the directory must exist and lie inside a root once links are resolved.
fn in_roots(filename: &str, roots: &[PathBuf]) -> Result<PathBuf, RootError> {
    let raw = Path::new(filename);
    let joined = if raw.is_absolute() {
        raw.to_path_buf()
    } else {
        roots[0].join(raw)
    };
    let (parent, name) = match (joined.parent(), joined.file_name()) {
        (Some(p), Some(n)) if !joined.components().any(|c| c == Component::ParentDir) => (p, n),
        _ => return Err(RootError::Outside),
    };
    let parent = parent.canonicalize().map_err(|_| RootError::NoDirectory)?;
    let inside = roots
        .iter()
        .any(|r| r.canonicalize().is_ok_and(|r| parent.starts_with(&r)) || parent.starts_with(r));
    if !inside {
        return Err(RootError::Outside);
    }
    // A symbolic link as the final component could point anywhere: refused here, and the
    // backup file is opened with O_NOFOLLOW so a link made after this check fails too.
    let path = parent.join(name);
    if path
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(RootError::Outside);
    }
    Ok(path)
}

/// How often a long recovery writes its progress to the error log.
const RECOVERY_PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

pub struct Instance {
    pub dir: PathBuf,
    pub config: InstanceConfig,
    pub fs: Arc<dyn FileSystem>,
    pub errorlog: Arc<ErrorLog>,
    /// The memory all databases' buffer pools share ('max server memory').
    pub pool_budget: Arc<crate::buffer_pool::PoolBudget>,
    /// Global trace flags (DBCC TRACEON (n, -1) and -T): they last until the process ends.
    pub trace_flags: Mutex<BTreeSet<u32>>,
    pub(crate) databases: Mutex<BTreeMap<u16, DbHandle>>,
    /// The background checkpoint thread of every database opened, with the database it
    /// serves (a thread ends when its database is dropped or closed; the rest stop when the
    /// instance does).
    checkpointers: Mutex<
        Vec<(
            std::sync::Weak<crate::shared::SharedDatabase>,
            crate::checkpoint::Checkpointer,
        )>,
    >,
    /// Startup option -E: a file with skip target 1 takes 64 consecutive extents.
    startup_e: std::sync::atomic::AtomicBool,
    /// Long-running requests by session id, with their progress (sys.dm_exec_requests).
    pub requests: Mutex<BTreeMap<u16, RequestProgress>>,
    /// Connected sessions by session id (sys.dm_exec_sessions, KILL).
    pub sessions: Mutex<BTreeMap<u16, Arc<SessionInfo>>>,
    /// SQL logins (sa and those CREATE LOGIN made).
    pub logins: crate::logins::Logins,
    /// The server configuration options (sys.configurations, sp_configure, RECONFIGURE).
    pub configurations: crate::configurations::Configurations,
    /// Databases listed in master that could not be opened, with the reason (SUSPECT).
    pub suspect: Mutex<BTreeMap<u16, (DatabaseEntry, String, UnopenedState)>>,
    /// Taken by each change of a database's state (SET OFFLINE, SET ONLINE) and by DROP
    /// DATABASE, so they take turns (db_state.rs invariant 1).
    pub(crate) state_change: Mutex<()>,
    /// Held while a session checks who is in a SINGLE_USER database and enters it, and
    /// while ALTER DATABASE makes a database SINGLE_USER (db_state.rs invariant 5).
    pub access_turn: Mutex<()>,
    /// The lock manager every session's transactions lock rows and tables through.
    pub locks: Arc<extentdb_lock::LockManager>,
    /// The SQL layer's request counters (sys.dm_os_performance_counters' SQL Statistics).
    pub sql_statistics: SqlStatistics,
    /// This process's hold on the directory (instance_lock.rs), for the instance's life.
    _lock: crate::instance_lock::InstanceLock,
}

/// The error log as the sink of initialization messages, under a given source.
pub struct LogSink<'a> {
    pub log: &'a ErrorLog,
    pub source: String,
}

impl InitLog for LogSink<'_> {
    fn log(&self, text: &str) {
        self.log.write(&self.source, text);
    }
    fn log_once(&self, key: &str, text: &str) {
        self.log.write_once(key, &self.source, text);
    }
}

impl Instance {
    pub fn config_path(dir: &Path) -> PathBuf {
        dir.join("instance.conf")
    }

    pub fn exists(dir: &Path) -> bool {
        Self::config_path(dir).exists()
    }

    /// Sets up a new instance in `dir`: configuration, error log, master and model.
    pub fn setup(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        opts: SetupOptions,
    ) -> Result<(), StorageError> {
        let _lock = crate::instance_lock::InstanceLock::acquire(dir)?;
        if Self::exists(dir) {
            return Err(StorageError::Instance(
                dir.to_path_buf(),
                "an instance already exists here".into(),
            ));
        }
        let err = |e: std::io::Error| StorageError::Instance(dir.to_path_buf(), e.to_string());
        crate::instance_lock::create_private_dir(dir).map_err(err)?;
        let mut config = opts.config.clone();
        for r in &config.data_roots {
            crate::instance_lock::create_private_dir(r).map_err(err)?;
        }
        config.data_roots = config
            .data_roots
            .iter()
            .map(|r| r.canonicalize())
            .collect::<Result<_, _>>()
            .map_err(err)?;
        if let Some(pw) = &opts.sa_password {
            config.sa_password_hash = crate::config::hash_password(pw);
        }
        let errorlog = ErrorLog::open(&dir.join("log")).map_err(err)?;
        errorlog.write(
            "Setup",
            &format!("{VERSION}: setting up a new instance in {}.", dir.display()),
        );
        let root = config.data_roots[0].clone();
        let ctx = OpContext {
            fs: fs.as_ref(),
            policy: InitPolicy {
                instant: config.instant_file_init,
                trace_zeroing: false,
            },
            log: &LogSink {
                log: &errorlog,
                source: "Setup".into(),
            },
        };
        let mut master = Database::create(&ctx, &system_db("master", MASTER_ID, &root))?;
        let model = Database::create(&ctx, &system_db("model", MODEL_ID, &root))?;
        master.catalog.databases.push(entry_of(&model, MODEL_ID));
        let msdb = Database::create(&ctx, &system_db("msdb", MSDB_ID, &root))?;
        master.catalog.databases.push(entry_of(&msdb, MSDB_ID));
        master.save_catalog()?;
        write_durably(&Self::config_path(dir), config.render().as_bytes()).map_err(err)?;
        errorlog.write(
            "Setup",
            "Setup completed: master, model and msdb created; tempdb is created at every start.",
        );
        Ok(())
    }

    /// Sets the sa login's password of the (stopped) instance in `dir`: stored as a salted
    /// hash in its configuration, written durably.
    pub fn set_sa_password(dir: &Path, password: &str) -> Result<(), StorageError> {
        let _lock = crate::instance_lock::InstanceLock::acquire(dir)?;
        let err = |e: std::io::Error| StorageError::Instance(dir.to_path_buf(), e.to_string());
        let text = std::fs::read_to_string(Self::config_path(dir)).map_err(err)?;
        let mut config = InstanceConfig::parse(dir, &text)?;
        config.sa_password_hash = crate::config::hash_password(password);
        write_durably(&Self::config_path(dir), config.render().as_bytes()).map_err(err)?;
        // A password ALTER LOGIN gave sa lives in the logins file, which would win.
        if dir.join("logins").exists() {
            let logins = crate::logins::Logins::load(dir, &config.sa_password_hash).map_err(err)?;
            logins
                .alter("sa", Some(password), Some(true), None)
                .map_err(|e| StorageError::Instance(dir.to_path_buf(), format!("{e:?}")))?;
        }
        Ok(())
    }

    /// Starts the instance in `dir`: opens master and every database, re-creates tempdb.
    pub fn start(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        startup_flags: &[u32],
    ) -> Result<Instance, StorageError> {
        let lock = crate::instance_lock::InstanceLock::acquire(dir)?;
        let err = |e: std::io::Error| StorageError::Instance(dir.to_path_buf(), e.to_string());
        let text = std::fs::read_to_string(Self::config_path(dir)).map_err(err)?;
        let config = InstanceConfig::parse(dir, &text)?;
        let configurations = crate::configurations::Configurations::load(
            dir,
            &[(
                MAX_SERVER_MEMORY,
                config.max_server_memory_mb.min(i32::MAX as u32) as i32,
            )],
        )
        .map_err(err)?;
        let pool_pages = pool_pages_of(configurations.get(MAX_SERVER_MEMORY).value_in_use);
        let errorlog = ErrorLog::open(&dir.join("log")).map_err(err)?;
        let logins = crate::logins::Logins::load(dir, &config.sa_password_hash).map_err(err)?;
        let inst = Instance {
            dir: dir.to_path_buf(),
            config,
            fs,
            errorlog: Arc::new(errorlog),
            pool_budget: crate::buffer_pool::PoolBudget::new(pool_pages),
            trace_flags: Mutex::new(startup_flags.iter().copied().collect()),
            databases: Mutex::new(BTreeMap::new()),
            checkpointers: Mutex::new(Vec::new()),
            startup_e: Default::default(),
            requests: Mutex::new(BTreeMap::new()),
            sessions: Mutex::new(BTreeMap::new()),
            logins,
            configurations,
            suspect: Mutex::new(BTreeMap::new()),
            state_change: Mutex::new(()),
            access_turn: Mutex::new(()),
            locks: extentdb_lock::LockManager::new(),
            sql_statistics: SqlStatistics::default(),
            _lock: lock,
        };
        inst.log_startup();
        let master = Database::open_in_budget(
            inst.fs.as_ref(),
            &inst.config.data_roots[0].join("master.mdf"),
            None,
            inst.pool_budget.clone(),
        )?;
        inst.errorlog
            .write("spid7s", "Starting up database 'master'.");
        inst.log_trimmed(&master);
        inst.log_last_good_check(&master);
        let entries = master.catalog.databases.clone();
        inst.databases
            .lock()
            .unwrap()
            .insert(MASTER_ID, inst.handle(master));
        for e in entries.iter().filter(|e| e.database_id != TEMPDB_ID) {
            if e.restoring.is_some() {
                // Its log still waits for RESTORE LOG: recovery would end the sequence.
                inst.errorlog.write("spid7s", &format!("The database '{}' is marked RESTORING and is in a state that does not allow recovery to be run.", e.name));
                inst.list_restoring(e.clone());
                continue;
            }
            if e.offline {
                // SET OFFLINE lasts until SET ONLINE: the database is not opened.
                inst.list_unopened(e.clone(), UnopenedState::Offline);
                continue;
            }
            // One damaged database must not keep the instance from starting.
            let _ = inst.open_listed(e);
        }
        inst.recreate_tempdb()?;
        if !entries.iter().any(|e| e.database_id == MSDB_ID) {
            inst.create_msdb()?;
        }
        inst.errorlog.write("spid7s", "Recovery is complete. This is an informational message only. No user action is required.");
        Ok(inst)
    }

    /// SQL Server's start-up line for a database whose last CHECKDB found nothing (17573).
    fn log_last_good_check(&self, db: &Database) {
        if db.boot.last_checkdb_us != 0 {
            self.errorlog.write(
                "spid7s",
                &format!(
                    "CHECKDB for database '{}' finished without errors on {} (local time). This is an informational message only; no user action is required.",
                    db.name,
                    crate::errorlog::local_time(db.boot.last_checkdb_us)
                ),
            );
        }
    }

    /// Opens database `e` of master's list through recovery, as at start-up (`Starting up
    /// database`, recovery's progress and result in the ERRORLOG) and serves it. A database
    /// that cannot be opened is listed SUSPECT or RECOVERY_PENDING, with the reason logged,
    /// and the error returned.
    pub(crate) fn open_listed(&self, e: &DatabaseEntry) -> Result<(), StorageError> {
        debug_assert!(e.restoring.is_none() && !e.offline);
        self.errorlog
            .write("spid7s", &format!("Starting up database '{}'.", e.name));
        let log = self.errorlog.clone();
        let (name, id) = (e.name.clone(), e.database_id);
        let report = move |percent: u32, left: u64, phase: u8| {
            log.write("spid7s", &format!("Recovery of database '{name}' ({id}) is {percent}% complete (approximately {left} seconds remain). Phase {phase} of 3. This is an informational message only. No user action is required."));
        };
        let progress = crate::recovery::RecoveryProgress {
            every: RECOVERY_PROGRESS_EVERY,
            report: &report,
        };
        let opened = Database::open_in_budget(
            self.fs.as_ref(),
            Path::new(&e.primary_file),
            Some(&progress),
            self.pool_budget.clone(),
        );
        let db = match opened {
            Ok(db) => db,
            Err(err) => {
                let state = self.log_open_failure(e, &err);
                self.suspect
                    .lock()
                    .unwrap()
                    .insert(e.database_id, (e.clone(), err.to_string(), state));
                return Err(err);
            }
        };
        self.log_trimmed(&db);
        self.log_recovery(&db, e.database_id);
        self.log_damaged_chains(&db, e.database_id);
        self.log_last_good_check(&db);
        let h = self.handle(db);
        self.databases.lock().unwrap().insert(e.database_id, h);
        self.suspect.lock().unwrap().remove(&e.database_id);
        Ok(())
    }

    /// A database as the instance keeps it: its buffer pool on the instance's budget, and a
    /// background checkpoint thread.
    fn handle(&self, mut db: Database) -> DbHandle {
        if !Arc::ptr_eq(db.pool_budget(), &self.pool_budget) {
            if let Err(e) = db.set_pool_budget(self.pool_budget.clone()) {
                // The database keeps its own pool; it is still right, only not capped.
                self.errorlog.write(
                    "spid7s",
                    &format!(
                        "Database '{}' could not join the buffer pool's budget: {e}.",
                        db.name
                    ),
                );
            }
        }
        let h = Arc::new(crate::shared::SharedDatabase::new(db));
        self.spawn_checkpointer(&h);
        h
    }

    pub(crate) fn spawn_checkpointer(&self, h: &DbHandle) {
        let log = self.errorlog.clone();
        let cp = crate::checkpoint::Checkpointer::spawn(h, move |name, e| {
            log.write(
                "spid9s",
                &format!("Checkpoint of database '{name}' failed: {e}. The database will be recovered when it is next opened."),
            )
        });
        let mut all = self.checkpointers.lock().unwrap();
        all.retain(|(_, c)| !c.finished());
        all.push((Arc::downgrade(h), cp));
    }

    /// Stops the background checkpoint thread of `h`, waiting for a checkpoint it is running
    /// (so call it holding no lock on the database).
    pub(crate) fn stop_checkpointer(&self, h: &DbHandle) {
        let stopped: Vec<_> = {
            let mut all = self.checkpointers.lock().unwrap();
            let (mine, rest) = std::mem::take(&mut *all)
                .into_iter()
                .partition(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(h)));
            *all = rest;
            mine
        };
        drop(stopped);
    }

    /// Logs why a database could not be opened at start-up and says which state that
    /// leaves it in: RECOVERY_PENDING when a file is missing or cannot be opened, SUSPECT
    /// when recovery found damage (with SQL Server's 9004 for a damaged log).
    fn log_open_failure(&self, e: &DatabaseEntry, err: &StorageError) -> UnopenedState {
        let missing = matches!(err, StorageError::Io(io) if matches!(io.errno(), Some(libc::ENOENT) | Some(libc::EACCES)));
        if let StorageError::LogDamaged(_) = err {
            self.errorlog
                .write("spid7s", "Error: 9004, Severity: 21, State: 1.");
            self.errorlog.write("spid7s", &format!("An error occurred while processing the log for database '{}'. If possible, restore from backup. If a backup is not available, it might be necessary to rebuild the log.", e.name));
        }
        if missing {
            self.errorlog.write("spid7s", &format!("Database '{}' cannot be opened: {err}. It is in RECOVERY_PENDING state: put the file back and restart, or restore the database from a backup.", e.name));
            UnopenedState::RecoveryPending
        } else {
            self.errorlog.write("spid7s", &format!("Database '{}' cannot be opened: {err}. It has been marked SUSPECT; restore it from a backup or drop it.", e.name));
            UnopenedState::Suspect
        }
    }

    /// One line per file open cut back to its catalog size (`trim_to_catalog`).
    fn log_trimmed(&self, db: &Database) {
        for t in db.recovery_stats().map_or(&[][..], |r| &r.trimmed[..]) {
            self.errorlog.write("spid7s", &format!(
                "File '{}' of database '{}' was {} pages past its catalog size after a crash during a growth; trimmed to {} pages.",
                t.name, db.name, t.past_pages, t.size_pages
            ));
        }
    }

    /// One line per user allocation unit whose IAM chain open found damaged (allocation.rs
    /// invariant 8): the database is online, that table is not.
    fn log_damaged_chains(&self, db: &Database, id: u16) {
        for d in db.damaged_iam_chains() {
            let owner = d
                .object_id
                .map_or("no table (an orphan unit)".to_string(), |o| {
                    format!("object ID {o}")
                });
            self.errorlog.write("spid7s", &format!(
                "Database '{}' ({id}): the IAM chain of alloc unit ID {} ({owner}) is damaged at page {}: {}. Reads and changes of it fail with Msg 824 and nothing it may own is freed; the other tables are online. Run DBCC CHECKDB and restore from a backup.",
                db.name, d.allocation_unit_id, d.page, d.reason
            ));
        }
        if db.recovery_stats().is_some_and(|r| r.unowned_sweep_skipped) {
            self.errorlog.write("spid7s", &format!(
                "Recovery of database '{}' ({id}) did not free extents allocated in a GAM page but owned by no IAM page: with an IAM chain damaged, the extents it owns cannot be told from them.",
                db.name
            ));
        }
    }

    /// SQL Server's recovery messages for a database whose log held work to redo or undo.
    fn log_recovery(&self, db: &Database, id: u16) {
        let Some(st) = db.recovery_stats() else {
            return;
        };
        if st.redone == 0 && st.rolled_back == 0 && st.unowned_extents_freed == 0 {
            return;
        }
        let log = |t: &str| self.errorlog.write("spid7s", t);
        log(&format!(
            "Recovery of database '{}' ({id}) is 0% complete (approximately 0 seconds remain). Phase 1 of 3. This is an informational message only. No user action is required.",
            db.name
        ));
        log(&format!(
            "{} transactions rolled forward in database '{}' ({id}): {} log records ({} bytes), {} redone. This is an informational message only. No user action is required.",
            st.committed, db.name, st.records, st.log_bytes, st.redone
        ));
        log(&format!(
            "{} transactions rolled back in database '{}' ({id}). This is an informational message only. No user action is required.",
            st.rolled_back, db.name
        ));
        if st.unowned_extents_freed > 0 {
            log(&format!(
                "Recovery of database '{}' ({id}) freed {} extent(s) that were allocated in a GAM page but owned by no IAM page: allocations the interruption cut between their two logged steps. This is an informational message only. No user action is required.",
                db.name, st.unowned_extents_freed
            ));
        }
        log(&format!(
            "Recovery completed for database {} (database ID {id}) in {} second(s) (analysis and redo {} ms, undo {} ms.) This is an informational message only. No user action is required.",
            db.name,
            (st.analysis_redo_ms + st.undo_ms) / 1000,
            st.analysis_redo_ms,
            st.undo_ms
        ));
    }

    fn log_startup(&self) {
        let log = |t: &str| self.errorlog.write("Server", t);
        log(&format!(
            "{VERSION} (data file format 1; database version {}) on Linux.",
            extentdb_format::boot::DATABASE_VERSION
        ));
        log(&format!("Process ID is {}.", std::process::id()));
        log(&format!(
            "Logging SQL Server messages in file '{}'.",
            self.errorlog.dir().join("ERRORLOG").display()
        ));
        let flags = self.trace_flags.lock().unwrap().clone();
        if !flags.is_empty() {
            let list: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
            log(&format!("Startup trace flags: {}.", list.join(", ")));
        }
        if self.config.instant_file_init {
            log("Database Instant File Initialization: enabled. Data files gain space through fallocate, which reads back as zeros on Linux, so no stale disk bytes are ever exposed; log files are always initialized.");
        } else {
            log("Database Instant File Initialization: disabled. Data files are physically zeroed when created or grown; log files are always initialized.");
        }
        for root in &self.config.data_roots {
            log(&format!(
                "Data root '{}': {}",
                root.display(),
                probe_fallocate(root)
            ));
        }
    }

    /// Deletes tempdb's files and creates them anew from the configuration.
    /// Creates msdb in an instance set up before msdb existed (setup creates it with master
    /// and model).
    fn create_msdb(&self) -> Result<(), StorageError> {
        self.errorlog.write(
            "spid7s",
            "Creating database 'msdb' (the backup and restore history).",
        );
        let sink = LogSink {
            log: &self.errorlog,
            source: "spid7s".into(),
        };
        let ctx = OpContext {
            fs: self.fs.as_ref(),
            policy: self.init_policy(&BTreeSet::new()),
            log: &sink,
        };
        let spec = system_db("msdb", MSDB_ID, &self.config.data_roots[0]);
        self.create_database(&ctx, &spec)
    }

    fn recreate_tempdb(&self) -> Result<(), StorageError> {
        self.errorlog.write("spid7s", "Clearing tempdb database.");
        let root = &self.config.data_roots[0];
        let mut files = vec![data_file(
            "tempdev",
            &root.join("tempdb.mdf"),
            self.config.tempdb_file_size_pages,
        )];
        files.push(log_file_spec("templog", &root.join("templog.ldf"), 1024));
        for i in 2..=self.config.tempdb_files.max(1) {
            let mut f = data_file(
                &format!("temp{i}"),
                &root.join(format!("tempdb_mssql_{i}.ndf")),
                self.config.tempdb_file_size_pages,
            );
            f.filegroup = "PRIMARY".into();
            files.push(f);
        }
        for f in &files {
            if self.fs.exists(&f.physical_name) {
                self.fs.remove(&f.physical_name)?;
            }
        }
        let spec = NewDatabase {
            name: "tempdb".into(),
            database_id: TEMPDB_ID,
            recovery_model: RecoveryModel::Simple,
            files,
            filegroups: vec![],
        };
        let sink = LogSink {
            log: &self.errorlog,
            source: "spid7s".into(),
        };
        let mut db = Database::create(
            &OpContext {
                fs: self.fs.as_ref(),
                policy: self.init_policy(&BTreeSet::new()),
                log: &sink,
            },
            &spec,
        )?;
        db.set_counts_task_space(true);
        self.errorlog
            .write("spid7s", "Starting up database 'tempdb'.");
        self.databases
            .lock()
            .unwrap()
            .insert(TEMPDB_ID, self.handle(db));
        Ok(())
    }

    /// The initialization policy for a session with `session_flags` besides global ones.
    /// How a database's growths initialize space and report, for a session's flags.
    pub fn growth_env(&self, session_flags: &BTreeSet<u32>) -> crate::log_growth::GrowthEnv {
        let global = self.trace_flags.lock().unwrap().clone();
        let on = |f: u32| global.contains(&f) || session_flags.contains(&f);
        crate::log_growth::GrowthEnv {
            policy: self.init_policy(session_flags),
            errorlog: Some(self.errorlog.clone()),
            source: "spid7s".into(),
            prepare_ahead: true,
            trace_fill: on(TF_PROPORTIONAL_FILL) && on(TF_TO_ERRORLOG),
            e_extents: if self.startup_e.load(std::sync::atomic::Ordering::Relaxed) {
                crate::proportional_fill::E_EXTENTS
            } else {
                1
            },
        }
    }

    pub fn init_policy(&self, session_flags: &BTreeSet<u32>) -> InitPolicy {
        let global = self.trace_flags.lock().unwrap();
        let on = |f: u32| global.contains(&f) || session_flags.contains(&f);
        InitPolicy {
            instant: self.config.instant_file_init && !on(TF_NO_IFI),
            trace_zeroing: on(TF_ZEROING) && on(TF_TO_ERRORLOG),
        }
    }

    /// Startup option -E (set once, right after start).
    pub fn set_startup_e(&self, on: bool) {
        self.startup_e
            .store(on, std::sync::atomic::Ordering::Relaxed);
        if on {
            self.errorlog
                .write("Server", "Command Line Startup Parameters:");
            self.errorlog.write("Server", "\t -E");
        }
    }

    pub fn master(&self) -> DbHandle {
        self.databases.lock().unwrap()[&MASTER_ID].clone()
    }

    /// All databases by id.
    /// Clean shutdown: checkpoints every database (as SQL Server does), so the next start
    /// has nothing to redo. A database that cannot checkpoint is left to recovery.
    pub fn shutdown(&self) {
        for (_, db) in self.databases() {
            let mut db = db.lock().unwrap();
            if !db.is_poisoned() {
                if let Err(e) = db.checkpoint_for_close() {
                    self.errorlog.write(
                        "spid7s",
                        &format!(
                            "Checkpoint of database '{}' at shutdown failed: {e}.",
                            db.name
                        ),
                    );
                }
            }
        }
    }

    pub fn databases(&self) -> Vec<(u16, DbHandle)> {
        self.databases
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect()
    }

    /// RECONFIGURE: installs the dynamic options' configured values and applies the one
    /// storage acts on, 'max server memory (MB)' (the buffer pools' shared cap: a lower
    /// cap is reached as pools next take a frame). Returns the options installed.
    pub fn reconfigure(&self) -> Vec<(i32, i32)> {
        self.configurations.install(|id, value| {
            if id == MAX_SERVER_MEMORY {
                self.pool_budget.set_cap_pages(pool_pages_of(value));
            }
        })
    }

    pub fn database(&self, id: u16) -> Option<DbHandle> {
        self.databases.lock().unwrap().get(&id).cloned()
    }

    /// Looks a database up by name, case-insensitively.
    pub fn database_by_name(&self, name: &str) -> Option<(u16, DbHandle)> {
        self.databases()
            .into_iter()
            .find(|(_, d)| d.lock().unwrap().name.eq_ignore_ascii_case(name))
    }

    /// Resolves a FILENAME to a path under a data root (invariant 2). Relative names are
    /// taken relative to the first data root.
    pub fn resolve_path(&self, filename: &str) -> Result<PathBuf, StorageError> {
        in_roots(filename, &self.config.data_roots).map_err(|e| match e {
            RootError::Outside => StorageError::OutsideDataRoots(filename.to_string()),
            RootError::NoDirectory => StorageError::DirectoryNotFound(filename.to_string()),
        })
    }

    /// Where a backup file named in BACKUP or RESTORE is: a name without a directory goes to
    /// the first backup root (created on first use). A path outside every backup root, or
    /// with `..`, is refused as SQL Server refuses a path it may not open (Msg 3201 with
    /// "Access is denied").
    pub fn resolve_backup_path(&self, filename: &str) -> Result<PathBuf, StorageError> {
        let roots = &self.config.backup_roots;
        if !Path::new(filename).is_absolute() {
            let _ = crate::instance_lock::create_private_dir(&roots[0]);
        }
        in_roots(filename, roots).map_err(|e| StorageError::BackupDevice {
            path: filename.to_string(),
            reason: match e {
                RootError::Outside => "5(Access is denied.)",
                RootError::NoDirectory => "3(The system cannot find the path specified.)",
            }
            .into(),
        })
    }

    /// Checks that `path` is used by no database and does not exist on disk.
    pub fn check_new_path(&self, path: &Path) -> Result<(), StorageError> {
        for (_, db) in self.databases() {
            let db = db.lock().unwrap();
            if db
                .catalog
                .files
                .iter()
                .any(|f| Path::new(&f.physical_name) == path)
            {
                return Err(StorageError::PhysicalNameInUse {
                    path: path.display().to_string(),
                    database: db.name.clone(),
                });
            }
        }
        if self.fs.exists(path) || path.symlink_metadata().is_ok() {
            return Err(StorageError::FileExists(path.display().to_string()));
        }
        Ok(())
    }

    /// The next free database id.
    pub fn next_database_id(&self) -> u16 {
        let mut used: BTreeSet<u16> = self.databases.lock().unwrap().keys().copied().collect();
        used.extend(self.suspect.lock().unwrap().keys().copied());
        (FIRST_USER_ID..)
            .find(|i| !used.contains(i))
            .expect("database ids exhausted")
    }

    /// Creates a database and registers it in master (invariant 1).
    pub fn create_database(
        &self,
        ctx: &OpContext<'_>,
        spec: &NewDatabase,
    ) -> Result<(), StorageError> {
        let master = self.master();
        let mut master = master.lock().unwrap();
        if self.database_by_name_locked(&master, &spec.name)
            || self.suspect_by_name(&spec.name).is_some()
        {
            return Err(StorageError::DatabaseExists(spec.name.clone()));
        }
        let db = Database::create(ctx, spec)?;
        self.register_locked(&mut master, db, spec.database_id)
    }

    /// Lists a database just opened (a restore) in master under `id` and serves it; on
    /// failure its files are removed (unless master is poisoned: then they are kept).
    pub fn register_database(&self, db: Database, id: u16) -> Result<(), StorageError> {
        let master = self.master();
        let mut master = master.lock().unwrap();
        if self.database_by_name_locked(&master, &db.name) {
            return Err(StorageError::DatabaseExists(db.name.clone()));
        }
        self.register_locked(&mut master, db, id)
    }

    fn register_locked(
        &self,
        master: &mut crate::shared::DbGuard<'_>,
        db: Database,
        id: u16,
    ) -> Result<(), StorageError> {
        master.catalog.databases.push(entry_of(&db, id));
        if let Err(e) = master.save_catalog() {
            master.catalog.databases.retain(|d| d.database_id != id);
            // Once master is poisoned its durable catalog may list the database: keep the files.
            if !master.is_poisoned() {
                for p in db.physical_names() {
                    let _ = self.fs.remove(&p);
                }
            }
            return Err(e);
        }
        self.databases.lock().unwrap().insert(id, self.handle(db));
        Ok(())
    }

    fn database_by_name_locked(&self, master: &crate::shared::DbGuard<'_>, name: &str) -> bool {
        master.name.eq_ignore_ascii_case(name)
            || self.databases.lock().unwrap().iter().any(|(id, d)| {
                *id != MASTER_ID && d.lock().unwrap().name.eq_ignore_ascii_case(name)
            })
    }

    /// Drops a user database: unregisters it from master, then removes its files.
    pub fn drop_database(&self, name: &str) -> Result<(), StorageError> {
        let _turn = self.state_change.lock().unwrap();
        if let Some(id) = self.suspect_by_name(name) {
            return self.drop_suspect(id);
        }
        let (id, db) = self
            .database_by_name(name)
            .ok_or_else(|| StorageError::DatabaseNotFound(name.to_string()))?;
        if id < FIRST_USER_ID {
            return Err(StorageError::SystemDatabase(
                db.lock().unwrap().name.clone(),
            ));
        }
        self.drop_database_files(id, &db)
    }

    /// Unregisters database `id` and removes its files: DROP DATABASE, and RESTORE ... WITH
    /// REPLACE (which may replace model and msdb too).
    pub(crate) fn drop_database_files(&self, id: u16, db: &DbHandle) -> Result<(), StorageError> {
        self.unregister(id)?;
        self.databases.lock().unwrap().remove(&id);
        let paths = db.lock().unwrap().physical_names();
        for p in &paths {
            self.fs.remove(p)?;
        }
        for p in &paths {
            crate::database::sync_parent(self.fs.as_ref(), p)?;
        }
        Ok(())
    }

    /// Removes database `id` from master's catalog (invariant 1), or changes nothing.
    fn unregister(&self, id: u16) -> Result<(), StorageError> {
        let master = self.master();
        let mut master = master.lock().unwrap();
        master.change_catalog(|c| {
            c.databases.retain(|d| d.database_id != id);
            Ok(())
        })
    }

    /// The state of a database listed in master that could not be opened, by name.
    pub fn unopened_state(&self, name: &str) -> Option<UnopenedState> {
        let id = self.suspect_by_name(name)?;
        self.suspect.lock().unwrap().get(&id).map(|s| s.2)
    }

    pub fn suspect_by_name(&self, name: &str) -> Option<u16> {
        self.suspect
            .lock()
            .unwrap()
            .iter()
            .find(|(_, (e, _, _))| e.name.eq_ignore_ascii_case(name))
            .map(|(id, _)| *id)
    }

    /// Drops a database that could not be opened: master forgets it and its primary file,
    /// the only file it can name without the database's own catalog, is removed (every
    /// file of a RESTORING one, whose paths master lists).
    fn drop_suspect(&self, id: u16) -> Result<(), StorageError> {
        self.unregister(id)?;
        let removed = self.suspect.lock().unwrap().remove(&id);
        if let Some((entry, _, UnopenedState::Offline)) = removed {
            // As SQL Server does: dropping an OFFLINE database leaves its files on disk.
            self.errorlog.write("spid7s", &format!(
                "Database '{}' was dropped while OFFLINE: its files were not deleted (primary file '{}'), as SQL Server leaves an offline database's files. Remove them by hand when they are no longer needed.",
                entry.name, entry.primary_file
            ));
            return Ok(());
        }
        if let Some((entry, _, _)) = removed {
            let _ = self.fs.remove(Path::new(&entry.primary_file));
            for (_, p) in entry.restoring.iter().flatten() {
                let _ = self.fs.remove(Path::new(p));
            }
            let kept = crate::restore::kept_catalog_path(Path::new(&entry.primary_file));
            let _ = self.fs.remove(&kept);
        }
        Ok(())
    }

    /// The master entry of a RESTORING database called `name` (SUSPECT when a restore of
    /// it failed part-way: `restore_failed`).
    pub fn restoring_entry(&self, name: &str) -> Option<DatabaseEntry> {
        self.suspect
            .lock()
            .unwrap()
            .values()
            .find(|(e, _, _)| e.restoring.is_some() && e.name.eq_ignore_ascii_case(name))
            .map(|(e, _, _)| e.clone())
    }

    /// Lists database `entry` (its `restoring` paths set) in master as RESTORING, or
    /// records its new paths when it is already listed so.
    pub(crate) fn register_restoring(&self, entry: DatabaseEntry) -> Result<(), StorageError> {
        debug_assert!(entry.restoring.is_some());
        let master = self.master();
        let mut master = master.lock().unwrap();
        let id = entry.database_id;
        master.change_catalog(|c| {
            c.databases.retain(|d| d.database_id != id);
            c.databases.push(entry.clone());
            Ok(())
        })?;
        self.list_restoring(entry);
        Ok(())
    }

    /// Lists a database master marks RESTORING among those not online: SUSPECT when a
    /// restore step of it was cut short (`restore_failed`), else RESTORING.
    fn list_restoring(&self, entry: DatabaseEntry) {
        let state = if entry.restore_failed {
            UnopenedState::Suspect
        } else {
            UnopenedState::Restoring
        };
        self.list_unopened(entry, state);
    }

    /// Lists a database of master among those not online, in `state`.
    pub(crate) fn list_unopened(&self, entry: DatabaseEntry, state: UnopenedState) {
        let reason = state.state().1.to_string();
        self.suspect
            .lock()
            .unwrap()
            .insert(entry.database_id, (entry, reason, state));
    }

    /// After BACKUP LOG ... WITH NORECOVERY (a tail-log backup): the database, its log
    /// backed up to the end, is checkpointed, closed to changes and listed as RESTORING,
    /// ready for a restore sequence that ends with that backup.
    pub fn set_restoring(&self, id: u16) -> Result<(), StorageError> {
        let db = self
            .database(id)
            .ok_or_else(|| StorageError::DatabaseNotFound(id.to_string()))?;
        let entry = {
            let mut g = db.lock().unwrap();
            g.checkpoint()?;
            // A session that looked the database up before it left the list can change
            // nothing any more.
            g.poison();
            let paths: BTreeMap<u16, PathBuf> = g
                .catalog
                .files
                .iter()
                .map(|f| (f.file_id, PathBuf::from(&f.physical_name)))
                .collect();
            crate::restore::restoring_entry(id, &g.name, g.boot.created_us, &paths)
        };
        self.databases.lock().unwrap().remove(&id);
        self.register_restoring(entry)
    }

    /// Brings a RESTORING database online: it was opened (recovered) by the caller; master
    /// lists it as online, and it is served.
    pub(crate) fn register_recovered(&self, db: Database, id: u16) -> Result<(), StorageError> {
        let master = self.master();
        let mut master = master.lock().unwrap();
        let entry = entry_of(&db, id);
        master.change_catalog(|c| {
            c.databases.retain(|d| d.database_id != id);
            c.databases.push(entry);
            Ok(())
        })?;
        self.suspect.lock().unwrap().remove(&id);
        self.databases.lock().unwrap().insert(id, self.handle(db));
        Ok(())
    }

    /// Renames a database (ALTER DATABASE ... MODIFY NAME).
    pub fn rename_database(&self, id: u16, new_name: &str) -> Result<(), StorageError> {
        if self.database_by_name(new_name).is_some() {
            return Err(StorageError::DatabaseExists(new_name.to_string()));
        }
        let db = self
            .database(id)
            .ok_or_else(|| StorageError::DatabaseNotFound(new_name.to_string()))?;
        db.lock().unwrap().rename(new_name)?;
        if id != MASTER_ID {
            let master = self.master();
            let mut master = master.lock().unwrap();
            if let Some(e) = master
                .catalog
                .databases
                .iter_mut()
                .find(|d| d.database_id == id)
            {
                e.name = new_name.to_string();
            }
            master.save_catalog()?;
        }
        Ok(())
    }

    /// The files of model, whose sizes and growth are the defaults of CREATE DATABASE.
    pub fn model_defaults(&self) -> (NewFile, NewFile) {
        let model = self.database(MODEL_ID).expect("model exists");
        let model = model.lock().unwrap();
        let to_new = |t: FileType| {
            let f = model
                .catalog
                .files
                .iter()
                .find(|f| f.file_type == t)
                .expect("model has the file");
            NewFile {
                name: String::new(),
                physical_name: PathBuf::new(),
                file_type: t,
                filegroup: "PRIMARY".into(),
                size_pages: f.size_pages,
                max_size_pages: f.max_size_pages,
                growth: f.growth,
                is_percent_growth: f.is_percent_growth,
            }
        };
        (to_new(FileType::Rows), to_new(FileType::Log))
    }
}

/// Writes a file so that a crash leaves either the old content or the new: a temporary
/// file made durable, renamed over the target, then the directory made durable.
/// The buffer pool pages of `mb` megabytes ('max server memory (MB)').
pub fn pool_pages_of(mb: i32) -> usize {
    (mb.max(1) as usize).saturating_mul(extentdb_format::PAGES_PER_MB as usize)
}

pub fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    // A temporary file a crash left keeps its old mode through `mode` below: start afresh.
    let _ = std::fs::remove_file(&tmp);
    // Owner-only: these files hold password hashes and keys.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(path.parent().unwrap_or(Path::new(".")))?.sync_all()
}

fn entry_of(db: &Database, id: u16) -> DatabaseEntry {
    DatabaseEntry {
        database_id: id,
        name: db.name.clone(),
        primary_file: db.catalog.files[0].physical_name.clone(),
        created_us: db.boot.created_us,
        restoring: None,
        restore_failed: false,
        offline: false,
        user_access: Default::default(),
    }
}

/// 8 MB data and log growing 64 MB: model's defaults (and master's), with SQL Server's
/// file names (master.mdf and mastlog.ldf, model.mdf and modellog.ldf) in `root`.
fn system_db(name: &str, id: u16, root: &Path) -> NewDatabase {
    // SQL Server's logical and physical names.
    let (data_name, log_name, data_file_name, log_file) = match name {
        "master" => (
            "master".into(),
            "mastlog".into(),
            "master.mdf".into(),
            "mastlog.ldf".into(),
        ),
        "msdb" => (
            "MSDBData".into(),
            "MSDBLog".into(),
            "MSDBData.mdf".into(),
            "MSDBLog.ldf".into(),
        ),
        _ => (
            format!("{name}dev"),
            format!("{name}log"),
            format!("{name}.mdf"),
            format!("{name}log.ldf"),
        ),
    };
    NewDatabase {
        name: name.into(),
        database_id: id,
        recovery_model: if name == "model" {
            RecoveryModel::Full
        } else {
            RecoveryModel::Simple
        },
        files: vec![
            data_file(&data_name, &root.join(data_file_name), 1024),
            log_file_spec(&log_name, &root.join(log_file), 1024),
        ],
        filegroups: vec![],
    }
}

fn data_file(name: &str, path: &Path, size_pages: u32) -> NewFile {
    NewFile {
        name: name.into(),
        physical_name: path.to_path_buf(),
        file_type: FileType::Rows,
        filegroup: "PRIMARY".into(),
        size_pages,
        max_size_pages: -1,
        growth: 8192,
        is_percent_growth: false,
    }
}

fn log_file_spec(name: &str, path: &Path, size_pages: u32) -> NewFile {
    NewFile {
        name: name.into(),
        physical_name: path.to_path_buf(),
        file_type: FileType::Log,
        filegroup: String::new(),
        size_pages,
        max_size_pages: 268_435_456,
        growth: 8192,
        is_percent_growth: false,
    }
}

/// Says how a data root initializes data files: fallocate, or zero-writing where refused.
fn probe_fallocate(root: &Path) -> String {
    let probe = root.join(format!(".extentdb-probe-{}", std::process::id()));
    let result = (|| -> std::io::Result<()> {
        use std::os::unix::io::AsRawFd;
        let f = std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&probe)?;
        // SAFETY: fallocate reads only its integer arguments on an fd we own.
        let rc = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, 65536) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&probe);
    match result {
        Ok(()) => "data files are initialized with fallocate.".into(),
        Err(e) => format!("data files are initialized by zero-writing (fallocate refused: {e})."),
    }
}
