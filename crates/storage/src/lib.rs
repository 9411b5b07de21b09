//! The storage engine: data and log files, allocation maps, databases and their catalogs,
//! the instance (master, model, tempdb), file initialization and the error log.
//!
//! Reading order: `file_init` (the one way space is added), `data_file` (pages and
//! allocation maps), `log_file`, `database` (files, filegroups, catalog persistence),
//! `instance` (setup, start-up, the database registry), `errorlog`.
//!
//! Errors are `StorageError`, typed so the `sql` crate maps each to one SQL Server message.

use std::path::PathBuf;

pub use extentdb_lock as lock;

pub mod access;
pub mod allocation;
pub mod backup;
pub mod backup_transfer;
pub mod btree;
pub(crate) mod buffer_frame;
pub mod buffer_pool;
pub mod check_alloc;
pub mod check_db;
pub mod checkpoint;
pub mod computed_values;
pub mod config;
pub mod configurations;
pub mod constraint;
pub mod data_file;
pub mod database;
pub mod db_state;
pub mod ddl;
pub mod errorlog;
pub mod file_init;
pub mod identity;
pub mod index;
pub mod instance;
pub mod instance_lock;
pub mod latch;
pub mod log_file;
pub mod log_growth;
pub mod log_writer;
pub mod logins;
pub mod lookup;
pub mod module;
pub mod page_move;
pub mod physical_stats;
pub mod proportional_fill;
pub mod recovery;
pub mod restore;
pub mod row_lock;
pub mod scan;
pub mod shared;
pub mod snapshot;
pub mod space;
pub mod statistics;
pub mod structure;
pub mod table;
pub mod task_space;
pub mod transaction;
pub(crate) mod tree_change;
pub mod waits;
pub mod xact;

pub use database::{Database, NewDatabase, NewFile};

/// Now, in µs since the Unix epoch (the time stamps of boot pages, log headers, commit
/// records and backup sets).
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}
pub use instance::Instance;
pub use shared::SharedDatabase;

/// The constraint a unique index enforces, as Msg 2627 names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyConstraint {
    /// A heap's PRIMARY KEY NONCLUSTERED (catalog invariant 11).
    PrimaryKey,
    /// A UNIQUE constraint.
    Unique,
}

impl KeyConstraint {
    /// The constraint's kind as Msg 2627 prints it.
    pub fn kind(self) -> &'static str {
        match self {
            KeyConstraint::PrimaryKey => "PRIMARY KEY",
            KeyConstraint::Unique => "UNIQUE KEY",
        }
    }
}

/// Every failure of the storage engine, with the context the SQL layer needs.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A row gate refused a row (access.rs `RowGate`): nothing was changed.
    #[error("the row was refused by its lock")]
    RowRefused,
    #[error(transparent)]
    Io(#[from] extentdb_io::IoError),
    #[error(transparent)]
    Format(#[from] extentdb_format::FormatError),
    #[error("log damaged: {0}")]
    LogDamaged(String),
    /// The check's copy-on-write view could not keep a page (its side file failed).
    #[error("database snapshot for the check failed: {0}")]
    Snapshot(String),
    #[error("cannot move all contents of file '{0}' to other places")]
    CannotEmptyFile(String),
    #[error("database '{0}' has active transactions")]
    ActiveTransactions(String),
    #[error("page {page} is beyond the file's {size_pages} pages")]
    PageOutOfRange {
        page: extentdb_format::PageId,
        size_pages: u32,
    },
    #[error("database '{0}' already exists")]
    DatabaseExists(String),
    #[error("database '{0}' does not exist")]
    DatabaseNotFound(String),
    #[error("database '{0}' is a system database")]
    SystemDatabase(String),
    #[error("database '{0}' is in use")]
    DatabaseInUse(String),
    /// A change of state (OFFLINE, ONLINE) found the database in use: a transaction open
    /// in it, or a reference it could not wait out.
    #[error("a lock could not be placed on database '{0}'")]
    DatabaseLocked(String),
    #[error("logical file name '{0}' is already in use")]
    LogicalNameInUse(String),
    #[error("file '{path}' is used by database '{database}'")]
    PhysicalNameInUse { path: String, database: String },
    #[error("file '{0}' already exists")]
    FileExists(String),
    #[error("'{0}' is outside the instance's data roots")]
    OutsideDataRoots(String),
    #[error("directory of '{0}' does not exist")]
    DirectoryNotFound(String),
    #[error("creating '{path}': {source}")]
    FileCreate {
        path: String,
        source: extentdb_io::IoError,
    },
    #[error("expanding '{path}': {source}")]
    FileExpand {
        path: String,
        source: extentdb_io::IoError,
    },
    #[error("file '{0}': size is greater than MAXSIZE")]
    SizeGreaterThanMax(String),
    #[error("file '{0}': new size is not larger than the current size")]
    NotLarger(String),
    #[error("file '{name}': size {size_kb} KB is below the minimum of {min_kb} KB")]
    TooSmall {
        name: String,
        size_kb: u64,
        min_kb: u64,
    },
    #[error("file '{0}' does not exist")]
    FileNotFound(String),
    #[error("file '{0}' is not empty")]
    FileNotEmpty(String),
    #[error("the primary data or log file cannot be removed")]
    CannotRemovePrimary,
    #[error("filegroup '{0}' does not exist")]
    FilegroupNotFound(String),
    #[error("filegroup '{0}' already exists")]
    FilegroupExists(String),
    #[error("filegroup '{0}' is not empty")]
    FilegroupNotEmpty(String),
    #[error("the primary filegroup cannot be removed")]
    CannotRemovePrimaryFilegroup,
    #[error("invalid name '{0}'")]
    InvalidName(String),
    #[error("database '{0}' had a failed write and must be reopened before further changes")]
    NeedsReopen(String),
    #[error("allocation unit {0} does not exist")]
    AllocationUnitNotFound(u64),
    #[error("extent {extent} of file {file_id} is not owned by allocation unit {allocation_unit}")]
    ExtentNotOwned {
        allocation_unit: u64,
        file_id: u16,
        extent: u32,
    },
    #[error("table {0} does not exist")]
    TableNotFound(u32),
    #[error("there is already an object named '{0}' in the database")]
    TableExists(String),
    /// A drop of a table another table's FOREIGN KEY references (constraint.rs
    /// invariant 4; SQL Server's Msg 3726); nothing was changed.
    #[error("could not drop table {0}: it is referenced by a FOREIGN KEY constraint")]
    ReferencedByForeignKey(u32),
    /// A name whose table an open transaction dropped, taken again before that transaction
    /// ends (ddl.rs invariant 5).
    #[error("table '{0}' was dropped by a transaction that has not ended")]
    DropPending(String),
    /// Another process holds the instance directory's lock (instance_lock.rs).
    #[error("{}", crate::instance_lock::in_use_text(dir, *holder))]
    InstanceInUse { dir: PathBuf, holder: Option<u32> },
    /// A name or text longer than the catalog stores (Msg 103); nothing was written.
    #[error("the {} that starts with '{}' is too long (at most {})", .0.what, .0.value.chars().take(128).collect::<String>(), .0.max)]
    TooLong(extentdb_format::catalog::TooLong),
    /// A scan in chunks cannot go on where it stopped: the table's pages moved or its
    /// rows were truncated meanwhile (SQL Server's Msg 601, data movement).
    #[error("could not continue scan due to data movement")]
    ScanMoved,
    /// A read or row operation on a table whose clustered index is disabled (index.rs
    /// invariant 10; SQL Server's Msg 8655): the index's and the table's names; nothing was
    /// read or changed.
    #[error("the index '{index}' on table '{table}' is disabled")]
    ClusteredIndexDisabled { index: String, table: String },
    #[error("no row at page {page} slot {slot}")]
    RowNotFound {
        page: extentdb_format::PageId,
        slot: u16,
    },
    /// A page the allocation maps (PFS allocated bit) or a B-tree link say is in use reads
    /// as another page; all zeros read as page (0:0). SQL Server's Msg 824 (incorrect
    /// pageid), raised by a read: the scan stops rather than return fewer rows.
    #[error("incorrect pageid (expected {}:{}; actual {}:{})", .page.file.0, .page.page.0, .actual.file.0, .actual.page.0)]
    IncorrectPageId {
        page: extentdb_format::PageId,
        actual: extentdb_format::PageId,
        database_id: u16,
        /// The data file's physical name.
        file: String,
    },
    #[error("could not allocate space for object '{object}': filegroup '{filegroup}' is full")]
    FilegroupFull { object: String, filegroup: String },
    #[error("violation of PRIMARY KEY constraint '{constraint}': duplicate key in '{table}'")]
    DuplicateKey { table: String, constraint: String },
    /// A duplicate key in a unique nonclustered index (index.rs): the key's stored values.
    #[error("duplicate key in unique index '{index}'")]
    DuplicateIndexKey {
        /// The table, `schema.name`.
        table: String,
        index: String,
        /// The constraint the index enforces, if any (Msg 2627 rather than 2601).
        constraint: Option<KeyConstraint>,
        /// The key's columns and stored values.
        key: Vec<(extentdb_format::catalog::ColumnEntry, Option<Vec<u8>>)>,
    },
    #[error("an index named '{0}' already exists on the table")]
    IndexExists(String),
    #[error("index '{0}' does not exist")]
    IndexNotFound(String),
    /// A leaf of clustered index `table` holds only versions of the key being inserted
    /// (a live row and ghosts that open transactions may still turn live): it cannot split
    /// without parting one key's records (btree.rs invariant 1).
    #[error("the versions of one key that open transactions still need fill a page of '{table}'; commit or roll back first")]
    KeyVersionsFillPage { table: String },
    #[error("arithmetic overflow generating an identity value")]
    IdentityOverflow,
    #[error("the operation was cancelled")]
    Cancelled,
    /// A computed column an index holds could not be computed from its row
    /// (computed_values.rs).
    #[error("computed column {column_id} of '{table}' could not be computed: {reason}")]
    ComputedValue {
        table: String,
        column_id: u16,
        reason: String,
    },
    /// A structure change validated against one catalog state found another when it held
    /// the database (structure.rs invariant 2): nothing changed; validate again.
    #[error("the catalog changed since the change was validated")]
    CatalogChanged,
    /// The log cannot take the change (Msg 9002); the reason is log_reuse_wait_desc's
    /// word for what holds it (ACTIVE_TRANSACTION, LOG_BACKUP ...).
    #[error("the transaction log is full due to '{0}': no inactive VLF can be reused")]
    LogFull(&'static str),
    #[error("an earlier log write or sync failed; the database must be reopened")]
    LogFailed,
    #[error("instance at {0}: {1}")]
    Instance(PathBuf, String),
    /// The backup file cannot be opened or written (SQL Server's Msg 3201).
    #[error("cannot open backup device '{path}': {reason}")]
    BackupDevice { path: String, reason: String },
    /// The backup file is not a well-formed backup (Msg 3241), damaged or cut short.
    #[error("the media family on device '{path}' is incorrectly formed: {reason}")]
    BackupMedia { path: String, reason: String },
    /// BACKUP WITH INIT over a set whose EXPIREDATE / RETAINDAYS has not passed, without
    /// SKIP (Msg 4030); `expires_us` is the first such set's date.
    #[error("the medium on device '{path}' expires at {expires_us} us and cannot be overwritten")]
    BackupMediaNotExpired { path: String, expires_us: i64 },
    /// BACKUP WITH MEDIANAME onto media formatted with another name (Msg 4037).
    #[error("MEDIANAME '{given}' does not match '{found}' of device '{path}'")]
    BackupMediaName {
        given: String,
        found: String,
        path: String,
    },
    /// The backup file's writer thread failed or could not be started (Msg 3202).
    #[error("write on '{path}' failed: {reason}")]
    BackupWrite { path: String, reason: String },
    /// RESTORE ... WITH FILE = n names no backup set of the file (Msg 4038).
    #[error("cannot find file ID {position} on device '{path}'")]
    BackupSetNotFound { position: u32, path: String },
    /// RESTORE DATABASE from a log backup set, or RESTORE LOG from a database backup set
    /// (Msg 3135); `created_by` names the statement that wrote the set.
    #[error("backup set {position} in '{path}' was created by {created_by}")]
    RestoreKind {
        position: u32,
        path: String,
        created_by: &'static str,
    },
    /// RESTORE over an existing database without REPLACE: Msg 3154 when the backup is of
    /// another database, 3159 when it is of this one (its log tail would be lost).
    #[error("database '{database}' exists; RESTORE needs WITH REPLACE")]
    RestoreOverExisting { database: String, same: bool },
    /// WITH MOVE names a logical file the backup does not hold (Msg 3234).
    #[error("logical file '{logical}' is not part of database '{database}'")]
    RestoreLogicalName { logical: String, database: String },
    /// A target path belongs to another database (Msg 1834, then 3156).
    #[error("the file '{path}' is used by database '{database}'")]
    RestoreFileInUse {
        path: String,
        database: String,
        logical: String,
    },
    /// RESTORE WITH CHECKSUM read a page that fails its audit (Msg 3183).
    #[error("RESTORE detected an error on page {page} in database '{database}'")]
    RestorePageError {
        database: String,
        page: extentdb_format::PageId,
    },
    /// RESTORE over master (Msg 3108: it needs a single-user instance) or tempdb, or a
    /// system database WITH NORECOVERY.
    #[error("database '{0}' cannot be restored on a running instance")]
    RestoreSystemDatabase(String),
    /// BACKUP LOG of a database under SIMPLE recovery (Msg 4208).
    #[error("BACKUP LOG is not allowed while the recovery model of '{0}' is SIMPLE")]
    LogBackupSimple(String),
    /// BACKUP LOG with no full backup starting the log chain (Msg 4214).
    #[error("BACKUP LOG of '{0}' needs a full database backup first")]
    NoCurrentBackup(String),
    /// A differential backup with no full backup to build on (Msg 3035).
    #[error("database '{0}' has no full backup a differential backup could build on")]
    NoDifferentialBase(String),
    /// RESTORE LOG, a differential restore or RESTORE ... WITH RECOVERY of a database
    /// that is not RESTORING (Msg 3117).
    #[error("database '{0}' is not in the RESTORING state")]
    NotRestoring(String),
    /// The log backup starts after the point the database was restored to (Msg 4305).
    #[error("the log backup begins at LSN {first}, after LSN {needed} the database needs next")]
    LogTooRecent {
        first: extentdb_format::Lsn,
        needed: extentdb_format::Lsn,
    },
    /// The log backup ends before the point the database was restored to (Msg 4326).
    #[error("the log backup ends at LSN {last}, before LSN {needed} the database is at")]
    LogTooEarly {
        last: extentdb_format::Lsn,
        needed: extentdb_format::Lsn,
    },
    /// A differential backup whose base is not the full backup restored (Msg 3136).
    #[error(
        "the differential backup's base is not the full backup the database was restored from"
    )]
    DifferentialBaseMismatch,
    /// BACKUP WITH CHECKSUM read a page that fails its audit (Msg 3043).
    #[error("BACKUP '{database}' detected an error on page {page} in file '{file}'")]
    BackupPageError {
        database: String,
        page: extentdb_format::PageId,
        file: String,
    },
}
