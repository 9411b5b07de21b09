//! System views over the instance: sys.dm_server_services, sys.databases,
//! sys.database_files, sys.master_files, sys.filegroups, and over a database's tables
//! sys.tables, sys.columns, sys.indexes, sys.partitions, sys.allocation_units (space views,
//! sys.dm_db_file_space_usage among them, are in `space`; sys.check_constraints and
//! sys.objects in `check_constraints`, sys.foreign_keys and sys.foreign_key_columns in
//! `foreign_keys`, tempdb's space by session and task in `space_usage`, sys.system_views in
//! `system_views`, sys.types in `type_views`, sys.identity_columns and
//! sys.extended_properties in `column_views` (sys.default_constraints too, answered from
//! `select.rs` as it may refuse), the INFORMATION_SCHEMA constraint views in
//! `constraint_views`), with SQL Server's column names,
//! types and units (sizes in 8 KB pages). Page counts follow the definitions of
//! `extentdb_storage::space`.
//!
//! A heap has one partition and one in-row allocation unit; partition_id and hobt_id are
//! the allocation unit's id (SQL Server's are distinct numbers, equal in value for a heap's
//! in-row unit only by coincidence).
//!
//! Views are computed from the live catalogs on each query; nothing is cached, so a view
//! can never disagree with the catalog it shows.

use extentdb_format::catalog::{ColumnEntry, FileEntry, FilegroupEntry, UserAccess};
use extentdb_format::file_header::FileType;
use extentdb_storage::instance::Instance;
use extentdb_storage::{Database, StorageError};

use super::lower::SERVER_COLLATION;
use crate::types::{SqlType, Value};
use std::collections::BTreeMap;

/// A computed rowset: column names and types, and rows.
#[derive(Debug, Clone, Default)]
pub struct Rowset {
    pub columns: Vec<(String, SqlType)>,
    pub rows: Vec<Vec<Value>>,
}

/// A rowset sent to the client as a result set.
impl From<Rowset> for super::Output {
    fn from(r: Rowset) -> Self {
        super::Output::Rows {
            columns: r.columns,
            rows: r.rows,
        }
    }
}

pub(super) const SYSNAME: SqlType = SqlType::NVarChar(128);

pub(super) fn cols(spec: &[(&str, SqlType)]) -> Vec<(String, SqlType)> {
    spec.iter().map(|(n, t)| (n.to_string(), *t)).collect()
}

/// The columns every object view begins with, sys.objects' own, in its order: a view of
/// one kind of object (sys.procedures, sys.foreign_keys, ...) adds its columns after them.
pub(super) fn object_columns(more: &[(&str, SqlType)]) -> Vec<(String, SqlType)> {
    let mut c = cols(&[
        ("name", SYSNAME),
        ("object_id", SqlType::Int),
        ("principal_id", SqlType::Int),
        ("schema_id", SqlType::Int),
        ("parent_object_id", SqlType::Int),
        ("type", SqlType::Char(2)),
        ("type_desc", SqlType::NVarChar(60)),
        ("create_date", SqlType::DateTime),
        ("modify_date", SqlType::DateTime),
        ("is_ms_shipped", SqlType::Bit),
        ("is_published", SqlType::Bit),
        ("is_schema_published", SqlType::Bit),
    ]);
    c.extend(cols(more));
    c
}

pub(super) fn text(s: &str) -> Value {
    Value::Text(s.to_string())
}

fn bit(b: bool) -> Value {
    Value::Bit(b)
}

/// Ticks (100 ns since 0001-01-01) of a Unix-epoch microsecond timestamp, in local time.
pub fn ticks_from_unix_us(us: i64) -> i64 {
    const UNIX_EPOCH_TICKS: i64 = 621_355_968_000_000_000;
    let offset_s = local_offset_seconds(us / 1_000_000);
    UNIX_EPOCH_TICKS + us * 10 + offset_s * 10_000_000
}

/// The Unix-epoch microsecond timestamp of local-time ticks (STOPAT = '...').
pub fn unix_us_from_ticks(ticks: i64) -> i64 {
    const UNIX_EPOCH_TICKS: i64 = 621_355_968_000_000_000;
    let naive_us = (ticks - UNIX_EPOCH_TICKS) / 10;
    // The offset in force at that local time (near enough across a DST change).
    let offset_s = local_offset_seconds(naive_us / 1_000_000);
    naive_us - offset_s * 1_000_000
}

fn local_offset_seconds(unix_s: i64) -> i64 {
    let t = unix_s as libc::time_t;
    // SAFETY: localtime_r writes only into the tm we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&t, &mut tm) };
    tm.tm_gmtoff
}

/// Looks a view up by its (lower-cased, schema-qualified) name: None when no view has that
/// name (or its database is gone); an error when reading the pages behind it failed.
pub fn view(inst: &Instance, current_db: u16, name: &str) -> Option<Result<Rowset, StorageError>> {
    if name == "sys.dm_db_file_space_usage" {
        let db = inst.database(current_db)?;
        let db = db.read().unwrap();
        return Some(super::space::file_space_usage(&db, current_db));
    }
    Some(Ok(match name {
        "sys.dm_server_services" => server_services(inst),
        "sys.databases" => databases(inst),
        "sys.database_files" => {
            let db = inst.database(current_db)?;
            let db = db.read().unwrap();
            database_files(&db, None)
        }
        "sys.master_files" => master_files(inst),
        "sys.dm_exec_requests" => exec_requests(inst),
        "sys.dm_exec_sessions" => exec_sessions(inst),
        "sys.dm_exec_connections" => super::host_views::exec_connections(inst),
        "sys.dm_os_sys_info" => super::host_views::os_sys_info(inst),
        "sys.dm_os_host_info" => super::host_views::os_host_info(),
        "sys.configurations" => super::configuration::sys_configurations(inst),
        "sys.dm_db_session_space_usage" => super::space_usage::session_space_usage(inst),
        "sys.dm_db_task_space_usage" => super::space_usage::task_space_usage(inst),
        "sys.dm_tran_locks" => super::lock_views::tran_locks(inst),
        "sys.dm_os_wait_stats" => super::lock_views::wait_stats(inst),
        "sys.dm_os_waiting_tasks" => super::lock_views::waiting_tasks(inst),
        "sys.dm_tran_session_transactions" => super::tran_views::session_transactions(inst),
        "sys.dm_tran_active_transactions" => super::tran_views::active_transactions(inst),
        "sys.dm_os_spinlock_stats" => spinlock_stats(inst),
        "sys.dm_os_performance_counters" => performance_counters(inst),
        "sys.server_principals" => super::principal_views::server_principals(inst, true),
        "sys.sql_logins" => super::principal_views::server_principals(inst, false),
        "sys.server_role_members" => super::principal_views::server_role_members(inst),
        "sys.database_principals" => {
            super::principal_views::database_principals(&inst.database(current_db)?.read().unwrap())
        }
        "sys.database_role_members" => super::principal_views::database_role_members(
            &inst.database(current_db)?.read().unwrap(),
        ),
        "sys.dm_db_log_space_usage" => {
            let db = inst.database(current_db)?;
            let (total, used) = db.read().unwrap().log_space();
            Rowset {
                columns: cols(&[
                    ("database_id", SqlType::Int),
                    ("total_log_size_in_bytes", SqlType::BigInt),
                    ("used_log_space_in_bytes", SqlType::BigInt),
                    ("used_log_space_in_percent", SqlType::Real),
                    ("log_space_in_bytes_since_last_backup", SqlType::BigInt),
                ]),
                rows: vec![vec![
                    Value::Int(current_db as i32),
                    Value::BigInt(total as i64),
                    Value::BigInt(used as i64),
                    Value::Real(used as f32 * 100.0 / total.max(1) as f32),
                    Value::BigInt(used as i64),
                ]],
            }
        }
        "sys.tables"
        | "sys.columns"
        | "sys.computed_columns"
        | "sys.indexes"
        | "sys.index_columns"
        | "sys.partitions"
        | "sys.allocation_units" => {
            let db = inst.database(current_db)?;
            let db = db.read().unwrap();
            match name {
                "sys.tables" => tables(&db),
                "sys.columns" => columns(&db),
                "sys.computed_columns" => computed_columns(&db),
                "sys.indexes" => indexes(&db),
                "sys.index_columns" => index_columns(&db),
                "sys.partitions" => return Some(partitions(&db)),
                _ => return Some(allocation_units(&db)),
            }
        }
        "sys.stats" | "sys.stats_columns" => {
            let db = inst.database(current_db)?;
            let db = db.read().unwrap();
            match name {
                "sys.stats" => super::show_statistics::stats_view(&db),
                _ => super::show_statistics::stats_columns_view(&db),
            }
        }
        "sys.check_constraints"
        | "sys.objects"
        | "sys.foreign_keys"
        | "sys.foreign_key_columns" => {
            let db = inst.database(current_db)?;
            let db = db.read().unwrap();
            match name {
                "sys.check_constraints" => super::check_constraints::check_constraints_view(&db),
                "sys.foreign_keys" => super::foreign_keys::foreign_keys_view(&db),
                "sys.foreign_key_columns" => super::foreign_keys::foreign_key_columns_view(&db),
                _ => super::check_constraints::objects_view(&db),
            }
        }
        "sys.procedures" | "sys.sql_modules" | "sys.parameters" => {
            let db = inst.database(current_db)?;
            let db = db.read().unwrap();
            match name {
                "sys.procedures" => super::procedure_views::procedures_view(&db),
                "sys.sql_modules" => super::procedure_views::sql_modules_view(&db),
                _ => super::procedure_views::parameters_view(&db),
            }
        }
        "sys.schemas" => super::schemas::schemas_view(),
        "sys.types" => super::type_views::types_view(),
        "sys.system_views" => super::system_views::system_views(inst),
        "sys.extended_properties" => super::column_views::extended_properties(),
        "sys.identity_columns" => {
            let db = inst.database(current_db)?;
            let db = db.read().unwrap();
            super::column_views::identity_columns(&db)
        }
        "information_schema.table_constraints"
        | "information_schema.key_column_usage"
        | "information_schema.referential_constraints"
        | "information_schema.constraint_column_usage" => {
            let db = inst.database(current_db)?;
            let db = db.read().unwrap();
            super::constraint_views::view(&db, name)
        }
        "information_schema.schemata"
        | "information_schema.tables"
        | "information_schema.columns"
        | "information_schema.routines"
        | "information_schema.parameters" => {
            let db = inst.database(current_db)?;
            let db = db.read().unwrap();
            let db_name = db.name.clone();
            match name {
                "information_schema.schemata" => super::information_schema::schemata(&db_name),
                "information_schema.tables" => super::information_schema::tables(&db, &db_name),
                "information_schema.routines" => super::information_schema::routines(&db, &db_name),
                "information_schema.parameters" => {
                    super::information_schema::parameters(&db, &db_name)
                }
                _ => super::information_schema::columns(&db, &db_name),
            }
        }
        "sys.filegroups" => {
            let db = inst.database(current_db)?;
            let db = db.read().unwrap();
            filegroups(&db.catalog.filegroups)
        }
        _ => return None,
    }))
}

fn server_services(inst: &Instance) -> Rowset {
    let account = std::env::var("USER").unwrap_or_else(|_| "root".into());
    let ifi = if inst.config.instant_file_init {
        "Y"
    } else {
        "N"
    };
    Rowset {
        columns: cols(&[
            ("servicename", SqlType::NVarChar(256)),
            ("startup_type", SqlType::Int),
            ("startup_type_desc", SqlType::NVarChar(256)),
            ("status", SqlType::Int),
            ("status_desc", SqlType::NVarChar(256)),
            ("process_id", SqlType::Int),
            ("service_account", SqlType::NVarChar(256)),
            ("filename", SqlType::NVarChar(256)),
            ("is_clustered", SqlType::NVarChar(1)),
            ("instant_file_initialization_enabled", SqlType::NVarChar(1)),
        ]),
        rows: vec![vec![
            text("SQL Server (MSSQLSERVER)"),
            Value::Int(2),
            text("Automatic"),
            Value::Int(4),
            text("Running"),
            Value::Int(std::process::id() as i32),
            text(&account),
            text(
                &std::env::current_exe()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            ),
            text("N"),
            text(ifi),
        ]],
    }
}

fn databases(inst: &Instance) -> Rowset {
    let columns = cols(&[
        ("name", SYSNAME),
        ("database_id", SqlType::Int),
        ("create_date", SqlType::DateTime),
        ("compatibility_level", SqlType::TinyInt),
        ("collation_name", SYSNAME),
        ("user_access", SqlType::TinyInt),
        ("user_access_desc", SqlType::NVarChar(60)),
        ("is_read_only", SqlType::Bit),
        ("state", SqlType::TinyInt),
        ("state_desc", SqlType::NVarChar(60)),
        ("recovery_model", SqlType::TinyInt),
        ("recovery_model_desc", SqlType::NVarChar(60)),
        ("page_verify_option", SqlType::TinyInt),
        ("page_verify_option_desc", SqlType::NVarChar(60)),
        ("log_reuse_wait", SqlType::TinyInt),
        ("log_reuse_wait_desc", SqlType::NVarChar(60)),
        ("is_auto_close_on", SqlType::Bit),
        ("is_auto_shrink_on", SqlType::Bit),
        ("is_auto_create_stats_on", SqlType::Bit),
        ("is_auto_update_stats_on", SqlType::Bit),
        ("is_auto_update_stats_async_on", SqlType::Bit),
        ("snapshot_isolation_state", SqlType::TinyInt),
        ("snapshot_isolation_state_desc", SqlType::NVarChar(60)),
        ("is_read_committed_snapshot_on", SqlType::Bit),
        ("is_trustworthy_on", SqlType::Bit),
    ]);
    // Read before any database is locked below (master among them).
    let access: BTreeMap<u16, UserAccess> = inst
        .master()
        .read()
        .unwrap()
        .catalog
        .databases
        .iter()
        .map(|d| (d.database_id, d.user_access))
        .collect();
    let access_of = |id: u16| access.get(&id).copied().unwrap_or_default();
    let mut rows = Vec::new();
    for (id, db) in inst.databases() {
        let db = db.read().unwrap();
        let rm = db.catalog.recovery_model;
        let (wait, wait_desc) = db.log_reuse_wait();
        // A failed write or sync (or a panic) left memory and disk possibly apart: the
        // database refuses changes until it is reopened (SET ONLINE or a restart).
        let (state, state_desc) = if db.is_poisoned() {
            (4, "SUSPECT")
        } else {
            (0, "ONLINE")
        };
        rows.push(vec![
            text(&db.name),
            Value::Int(id as i32),
            Value::DateTime(ticks_from_unix_us(db.boot.created_us)),
            compatibility_level(),
            text(SERVER_COLLATION),
            Value::TinyInt(access_of(id) as u8),
            text(access_of(id).desc()),
            bit(false),
            Value::TinyInt(state),
            text(state_desc),
            Value::TinyInt(rm as u8),
            text(rm.desc()),
            Value::TinyInt(2),
            text("CHECKSUM"),
            Value::TinyInt(wait),
            text(wait_desc),
        ]);
        rows.last_mut().unwrap().extend(fixed_options());
    }
    for (id, (entry, _, state)) in inst.suspect.lock().unwrap().iter() {
        let (state, state_desc) = state.state();
        rows.push(vec![
            text(&entry.name),
            Value::Int(*id as i32),
            Value::DateTime(ticks_from_unix_us(entry.created_us)),
            compatibility_level(),
            text(SERVER_COLLATION),
            Value::TinyInt(entry.user_access as u8),
            text(entry.user_access.desc()),
            bit(false),
            Value::TinyInt(state),
            text(state_desc),
            Value::Null,
            Value::Null,
            Value::TinyInt(2),
            text("CHECKSUM"),
            Value::TinyInt(0),
            text("NOTHING"),
        ]);
        rows.last_mut().unwrap().extend(fixed_options());
    }
    rows.sort_by_key(|r| match r[1] {
        Value::Int(i) => i,
        _ => 0,
    });
    Rowset { columns, rows }
}

fn compatibility_level() -> Value {
    Value::TinyInt(super::lower::COMPATIBILITY_LEVEL.parse().unwrap())
}

/// sys.databases' options that are the same for every database, as extentdb always runs
/// (lower.rs, `set_option`'s table): AUTO_CLOSE, AUTO_SHRINK and the three statistics
/// options OFF, snapshot isolation OFF, READ_COMMITTED_SNAPSHOT OFF, TRUSTWORTHY OFF.
fn fixed_options() -> Vec<Value> {
    vec![
        bit(false),
        bit(false),
        bit(false),
        bit(false),
        bit(false),
        Value::TinyInt(0),
        text("OFF"),
        bit(false),
        bit(false),
    ]
}

fn file_columns(with_db: bool) -> Vec<(String, SqlType)> {
    let mut c = Vec::new();
    if with_db {
        c.push(("database_id".to_string(), SqlType::Int));
    }
    c.extend(cols(&[
        ("file_id", SqlType::Int),
        ("type", SqlType::TinyInt),
        ("type_desc", SqlType::NVarChar(60)),
        ("data_space_id", SqlType::Int),
        ("name", SYSNAME),
        ("physical_name", SqlType::NVarChar(260)),
        ("state", SqlType::TinyInt),
        ("state_desc", SqlType::NVarChar(60)),
        ("size", SqlType::Int),
        ("max_size", SqlType::Int),
        ("growth", SqlType::Int),
        ("is_media_read_only", SqlType::Bit),
        ("is_read_only", SqlType::Bit),
        ("is_sparse", SqlType::Bit),
        ("is_percent_growth", SqlType::Bit),
        ("is_name_reserved", SqlType::Bit),
    ]));
    c
}

fn file_row(f: &FileEntry, db_id: Option<u16>) -> Vec<Value> {
    let mut r = Vec::new();
    if let Some(id) = db_id {
        r.push(Value::Int(id as i32));
    }
    let (t, desc) = match f.file_type {
        FileType::Rows => (0, "ROWS"),
        FileType::Log => (1, "LOG"),
    };
    r.extend([
        Value::Int(f.file_id as i32),
        Value::TinyInt(t),
        text(desc),
        Value::Int(f.data_space_id as i32),
        text(&f.name),
        text(&f.physical_name),
        Value::TinyInt(0),
        text("ONLINE"),
        Value::Int(f.size_pages as i32),
        Value::Int(f.max_size_pages),
        Value::Int(f.growth as i32),
        bit(false),
        bit(false),
        bit(false),
        bit(f.is_percent_growth),
        bit(false),
    ]);
    r
}

/// sys.database_files of one database (or, with `db_id`, its rows of sys.master_files).
pub fn database_files(db: &Database, db_id: Option<u16>) -> Rowset {
    Rowset {
        columns: file_columns(db_id.is_some()),
        rows: db
            .catalog
            .files
            .iter()
            .map(|f| file_row(f, db_id))
            .collect(),
    }
}

fn master_files(inst: &Instance) -> Rowset {
    let mut out = Rowset {
        columns: file_columns(true),
        rows: Vec::new(),
    };
    for (id, db) in inst.databases() {
        let db = db.read().unwrap();
        out.rows.extend(database_files(&db, Some(id)).rows);
    }
    out
}

fn filegroups(groups: &[FilegroupEntry]) -> Rowset {
    let columns = cols(&[
        ("name", SYSNAME),
        ("data_space_id", SqlType::Int),
        ("type", SqlType::Char(2)),
        ("type_desc", SqlType::NVarChar(60)),
        ("is_default", SqlType::Bit),
        ("is_system", SqlType::Bit),
        ("is_read_only", SqlType::Bit),
        ("is_autogrow_all_files", SqlType::Bit),
    ]);
    let rows = groups
        .iter()
        .map(|g| {
            vec![
                text(&g.name),
                Value::Int(g.data_space_id as i32),
                text("FG"),
                text("ROWS_FILEGROUP"),
                bit(g.is_default),
                bit(false),
                bit(g.is_read_only),
                bit(g.is_autogrow_all_files),
            ]
        })
        .collect();
    Rowset { columns, rows }
}

/// DBCC SQLPERF(LOGSPACE): one row per database, as SQL Server prints it.
pub fn log_space(inst: &Instance) -> Rowset {
    let columns = cols(&[
        ("Database Name", SYSNAME),
        ("Log Size (MB)", SqlType::Float),
        ("Log Space Used (%)", SqlType::Float),
        ("Status", SqlType::Int),
    ]);
    let rows = inst
        .databases()
        .into_iter()
        .map(|(_, db)| {
            let db = db.read().unwrap();
            let (total, used) = db.log_space();
            vec![
                text(&db.name),
                Value::Float(total as f64 / (1 << 20) as f64),
                Value::Float(used as f64 * 100.0 / total.max(1) as f64),
                Value::Int(0),
            ]
        })
        .collect();
    Rowset { columns, rows }
}

fn tables(db: &Database) -> Rowset {
    let columns = cols(&[
        ("name", SYSNAME),
        ("object_id", SqlType::Int),
        ("schema_id", SqlType::Int),
        ("type", SqlType::Char(2)),
        ("type_desc", SqlType::NVarChar(60)),
        ("create_date", SqlType::DateTime),
        ("lock_escalation", SqlType::TinyInt),
        ("lock_escalation_desc", SqlType::NVarChar(60)),
    ]);
    let rows = db
        .live_tables()
        .map(|t| {
            vec![
                text(&t.name),
                Value::Int(t.object_id as i32),
                Value::Int(1),
                text("U "),
                text("USER_TABLE"),
                Value::DateTime(ticks_from_unix_us(t.created_us)),
                Value::TinyInt(t.lock_escalation as u8),
                text(t.lock_escalation.name()),
            ]
        })
        .collect();
    Rowset { columns, rows }
}

/// sys.columns' columns (sys.computed_columns' and sys.identity_columns' first ones).
pub(super) fn columns_of_columns() -> Vec<(String, SqlType)> {
    cols(&[
        ("object_id", SqlType::Int),
        ("name", SYSNAME),
        ("column_id", SqlType::Int),
        ("system_type_id", SqlType::TinyInt),
        ("user_type_id", SqlType::Int),
        ("max_length", SqlType::SmallInt),
        ("precision", SqlType::TinyInt),
        ("scale", SqlType::TinyInt),
        ("collation_name", SYSNAME),
        ("is_nullable", SqlType::Bit),
        ("is_identity", SqlType::Bit),
        ("is_computed", SqlType::Bit),
        ("default_object_id", SqlType::Int),
        ("rule_object_id", SqlType::Int),
    ])
}

fn columns(db: &Database) -> Rowset {
    let columns = columns_of_columns();
    let mut rows = Vec::new();
    for t in db.live_tables() {
        rows.extend(t.columns.iter().map(|c| column_row(t.object_id, c)));
    }
    Rowset { columns, rows }
}

/// One sys.columns row (sys.computed_columns' and sys.identity_columns' first columns
/// too). collation_name is the server's for character columns, NULL for others;
/// default_object_id is column_views.rs invariant 2's.
pub(super) fn column_row(object_id: u32, c: &ColumnEntry) -> Vec<Value> {
    let character = matches!(c.system_type_id, 167 | 175 | 231 | 239);
    let default_object = match c.default_sql.is_empty() {
        true => Value::Int(0),
        false => Value::Null,
    };
    vec![
        Value::Int(object_id as i32),
        text(&c.name),
        Value::Int(c.column_id as i32),
        Value::TinyInt(c.system_type_id),
        Value::Int(c.system_type_id as i32),
        Value::SmallInt(c.max_length),
        Value::TinyInt(c.precision),
        Value::TinyInt(c.scale),
        if character {
            text(SERVER_COLLATION)
        } else {
            Value::Null
        },
        bit(c.is_nullable),
        bit(c.identity.is_some()),
        bit(c.computed.is_some()),
        default_object,
        Value::Int(0),
    ]
}

/// sys.computed_columns: sys.columns' rows of computed columns, with their definition,
/// whether it is PERSISTED, and uses_database_collation: 1 when the value is character
/// data, whose comparisons follow the database's collation.
fn computed_columns(db: &Database) -> Rowset {
    let mut columns = columns_of_columns();
    columns.extend(cols(&[
        ("definition", SqlType::NVarChar(crate::types::MAX_LENGTH)),
        ("uses_database_collation", SqlType::Bit),
        ("is_persisted", SqlType::Bit),
    ]));
    let mut rows = Vec::new();
    for t in db.live_tables() {
        for c in &t.columns {
            let Some(k) = &c.computed else { continue };
            let mut row = column_row(t.object_id, c);
            let character = matches!(c.system_type_id, 167 | 175 | 231 | 239);
            row.extend([text(&k.definition), bit(character), bit(k.is_persisted)]);
            rows.push(row);
        }
    }
    Rowset { columns, rows }
}

fn indexes(db: &Database) -> Rowset {
    let columns = cols(&[
        ("object_id", SqlType::Int),
        ("name", SYSNAME),
        ("index_id", SqlType::Int),
        ("type", SqlType::TinyInt),
        ("type_desc", SqlType::NVarChar(60)),
        ("is_unique", SqlType::Bit),
        ("data_space_id", SqlType::Int),
        ("is_primary_key", SqlType::Bit),
        ("is_unique_constraint", SqlType::Bit),
        ("is_disabled", SqlType::Bit),
        ("has_filter", SqlType::Bit),
        (
            "filter_definition",
            SqlType::NVarChar(crate::types::MAX_LENGTH),
        ),
    ]);
    let mut rows = Vec::new();
    for t in db.live_tables() {
        // A clustered index (PRIMARY KEY CLUSTERED) is index 1 and named after its
        // constraint; a heap is index 0 without a name.
        let clustered = t.index_id == 1;
        let name = match (&t.primary_key, clustered) {
            (Some((pk, _)), true) => text(pk),
            _ => Value::Null,
        };
        let kind = if clustered { "CLUSTERED" } else { "HEAP" };
        let flags = [clustered, clustered, false];
        rows.push(index_row(
            t.object_id,
            name,
            (t.index_id as u16, kind),
            flags,
            t,
        ));
        for ix in db.indexes_of(t.object_id) {
            let info = ix.index_of.as_ref().expect("an index entry");
            let primary_key = ix.enforces_primary_key_of(t);
            let flags = [info.unique, primary_key, info.unique_constraint];
            let id = (info.index_id, "NONCLUSTERED");
            rows.push(index_row(t.object_id, text(&ix.name), id, flags, ix));
        }
    }
    Rowset { columns, rows }
}

/// One row of sys.indexes; `flags` are is_unique, is_primary_key, is_unique_constraint.
fn index_row(
    object_id: u32,
    name: Value,
    (index_id, kind): (u16, &str),
    [unique, primary_key, unique_constraint]: [bool; 3],
    entry: &extentdb_format::catalog::TableEntry,
) -> Vec<Value> {
    let type_code = match kind {
        "HEAP" => 0,
        "CLUSTERED" => 1,
        _ => 2,
    };
    vec![
        Value::Int(object_id as i32),
        name,
        Value::Int(index_id as i32),
        Value::TinyInt(type_code),
        text(kind),
        bit(unique),
        Value::Int(entry.data_space_id as i32),
        bit(primary_key),
        bit(unique_constraint),
        bit(extentdb_storage::index::is_disabled(entry)),
        // No index is filtered: CREATE INDEX ... WHERE is refused (40517).
        bit(false),
        Value::Null,
    ]
}

/// sys.index_columns: the clustered key's columns, then each nonclustered index's key
/// (key_ordinal from 1) and INCLUDE columns (key_ordinal 0, is_included_column 1).
fn index_columns(db: &Database) -> Rowset {
    let columns = cols(&[
        ("object_id", SqlType::Int),
        ("index_id", SqlType::Int),
        ("index_column_id", SqlType::Int),
        ("column_id", SqlType::Int),
        ("key_ordinal", SqlType::TinyInt),
        ("partition_ordinal", SqlType::TinyInt),
        ("is_descending_key", SqlType::Bit),
        ("is_included_column", SqlType::Bit),
    ]);
    let row = |oid: u32, index_id: u16, n: usize, column_id: u16, key_ordinal: usize| {
        vec![
            Value::Int(oid as i32),
            Value::Int(index_id as i32),
            Value::Int(n as i32 + 1),
            Value::Int(column_id as i32),
            Value::TinyInt(key_ordinal as u8),
            Value::TinyInt(0),
            bit(false),
            bit(key_ordinal == 0),
        ]
    };
    let mut rows = Vec::new();
    for t in db.live_tables() {
        if let (1, Some((_, ids))) = (t.index_id, &t.primary_key) {
            for (n, id) in ids.iter().enumerate() {
                rows.push(row(t.object_id, 1, n, *id, n + 1));
            }
        }
        for ix in db.indexes_of(t.object_id) {
            let info = ix.index_of.as_ref().expect("an index entry");
            let (keys, included) = (info.key_columns as usize, info.included as usize);
            for (n, source) in info.sources[..keys + included].iter().enumerate() {
                let ordinal = if n < keys { n + 1 } else { 0 };
                rows.push(row(t.object_id, info.index_id, n, *source, ordinal));
            }
        }
    }
    Rowset { columns, rows }
}

/// (object id, allocation unit, index id, data space) of every table and index, so the
/// catalog is not borrowed while the units' pages are read. An index's row names its
/// table and its own index id; a clustered rebuild's new tree, while it is built, is its
/// table's index 1 beside the tree it replaces (as a nonclustered rebuild's two entries).
fn table_units(db: &Database) -> Vec<(u32, u64, u16, u16)> {
    db.catalog
        .tables
        .iter()
        .map(|t| {
            let (object_id, index_id) = match &t.index_of {
                Some(i) => (i.table_object_id, i.index_id),
                None => (t.rebuilt_table().unwrap_or(t.object_id), t.index_id as u16),
            };
            (object_id, t.allocation_unit_id, index_id, t.data_space_id)
        })
        .collect()
}

fn partitions(db: &Database) -> Result<Rowset, StorageError> {
    let columns = cols(&[
        ("partition_id", SqlType::BigInt),
        ("object_id", SqlType::Int),
        ("index_id", SqlType::Int),
        ("partition_number", SqlType::Int),
        ("hobt_id", SqlType::BigInt),
        ("rows", SqlType::BigInt),
    ]);
    let mut rows = Vec::new();
    for (id, au, index_id, _) in table_units(db) {
        let space = db.unit_space(au)?;
        rows.push(vec![
            Value::BigInt(au as i64),
            Value::Int(id as i32),
            Value::Int(index_id as i32),
            Value::Int(1),
            Value::BigInt(au as i64),
            Value::BigInt(space.rows as i64),
        ]);
    }
    Ok(Rowset { columns, rows })
}

fn allocation_units(db: &Database) -> Result<Rowset, StorageError> {
    let columns = cols(&[
        ("allocation_unit_id", SqlType::BigInt),
        ("type", SqlType::TinyInt),
        ("type_desc", SqlType::NVarChar(60)),
        ("container_id", SqlType::BigInt),
        ("data_space_id", SqlType::Int),
        ("total_pages", SqlType::BigInt),
        ("used_pages", SqlType::BigInt),
        ("data_pages", SqlType::BigInt),
    ]);
    let mut rows = Vec::new();
    for (_, au, _, ds) in table_units(db) {
        let space = db.unit_space(au)?;
        rows.push(vec![
            Value::BigInt(au as i64),
            Value::TinyInt(1),
            text("IN_ROW_DATA"),
            Value::BigInt(au as i64),
            Value::Int(ds as i32),
            Value::BigInt(space.reserved_pages as i64),
            Value::BigInt(space.used_pages() as i64),
            Value::BigInt(space.data_pages as i64),
        ]);
    }
    Ok(Rowset { columns, rows })
}

/// sys.dm_os_spinlock_stats: extentdb's one spinlock-like lock, FGCB_PRP_FILL (each
/// filegroup's skip targets, seed 004), summed over every filegroup of every open
/// database. Taken per allocation unless every skip target of the filegroup is 1.
fn spinlock_stats(inst: &Instance) -> Rowset {
    let columns = cols(&[
        ("name", SqlType::NVarChar(256)),
        ("collisions", SqlType::BigInt),
        ("spins", SqlType::BigInt),
        ("spins_per_collision", SqlType::Real),
        ("sleep_time", SqlType::BigInt),
        ("backoffs", SqlType::Int),
    ]);
    let (mut collisions, mut spins, mut sleep_us, mut backoffs) = (0u64, 0u64, 0u64, 0u64);
    for (_, db) in inst.databases() {
        let db = db.read().unwrap();
        for g in &db.catalog.filegroups {
            if let Some((s, _)) = db.prp_fill_stats(g.data_space_id) {
                collisions += s.collisions;
                spins += s.spins;
                sleep_us += s.sleep_time_us;
                backoffs += s.backoffs;
            }
        }
    }
    let rows = vec![vec![
        text("FGCB_PRP_FILL"),
        Value::BigInt(collisions as i64),
        Value::BigInt(spins as i64),
        Value::Real(spins as f32 / collisions.max(1) as f32),
        Value::BigInt((sleep_us / 1000) as i64),
        Value::Int(backoffs.min(i32::MAX as u64) as i32),
    ]];
    Rowset { columns, rows }
}

/// sys.dm_os_performance_counters: the counters extentdb keeps, one row each, cumulative
/// since the instance started (as SQL Server's per-second counters are: cntr_type
/// 272696576, PERF_COUNTER_BULK_COUNT): Access Methods' "Full Scans/sec" (full scans of
/// tables begun) and "Page Splits/sec" (clustered index pages split), summed over the open
/// databases, and SQL Statistics' "Batch Requests/sec" and "SQL Compilations/sec" (batches
/// run, and those parsed rather than taken from their session's cache of parsed batches);
/// and per open database (its name the instance_name), Databases' "Log Flushes/sec" and
/// "Log Flush Waits/sec" (syncs of its log, and commits that waited for one, since it was
/// opened: group commit shares a sync among the waits).
fn performance_counters(inst: &Instance) -> Rowset {
    use std::sync::atomic::Ordering;
    const PERF_COUNTER_BULK_COUNT: i32 = 272_696_576;
    let columns = cols(&[
        ("object_name", SqlType::NChar(128)),
        ("counter_name", SqlType::NChar(128)),
        ("instance_name", SqlType::NChar(128)),
        ("cntr_value", SqlType::BigInt),
        ("cntr_type", SqlType::Int),
    ]);
    let (full_scans, page_splits) = inst
        .databases()
        .iter()
        .map(|(_, db)| {
            let db = db.read().unwrap();
            (db.full_scans(), db.page_splits())
        })
        .fold((0u64, 0u64), |(f, s), (df, ds)| (f + df, s + ds));
    // nchar(128): padded with spaces, as SQL Server's are.
    let nchar = |s: &str| text(&format!("{s:<128}"));
    let stats = &inst.sql_statistics;
    let mut counters = vec![
        (
            "SQLServer:Access Methods",
            "Full Scans/sec",
            String::new(),
            full_scans,
        ),
        (
            "SQLServer:Access Methods",
            "Page Splits/sec",
            String::new(),
            page_splits,
        ),
        (
            "SQLServer:SQL Statistics",
            "Batch Requests/sec",
            String::new(),
            stats.batch_requests.load(Ordering::Relaxed),
        ),
        (
            "SQLServer:SQL Statistics",
            "SQL Compilations/sec",
            String::new(),
            stats.compilations.load(Ordering::Relaxed),
        ),
    ];
    for (_, db) in inst.databases() {
        let db = db.read().unwrap();
        let (flushes, waits) = db.log_flush_counts();
        let name = db.name.clone();
        counters.push((
            "SQLServer:Databases",
            "Log Flushes/sec",
            name.clone(),
            flushes,
        ));
        counters.push(("SQLServer:Databases", "Log Flush Waits/sec", name, waits));
    }
    let rows = counters
        .iter()
        .map(|(object, counter, instance, value)| {
            vec![
                nchar(object),
                nchar(counter),
                nchar(instance),
                Value::BigInt(*value as i64),
                Value::Int(PERF_COUNTER_BULK_COUNT),
            ]
        })
        .collect();
    Rowset { columns, rows }
}

/// sys.dm_exec_sessions: every connected session (the in-process `exec` one included).
fn exec_sessions(inst: &Instance) -> Rowset {
    use std::sync::atomic::Ordering;
    let columns = cols(&[
        ("session_id", SqlType::SmallInt),
        ("login_time", SqlType::DateTime),
        ("host_name", SqlType::NVarChar(128)),
        ("program_name", SqlType::NVarChar(128)),
        ("client_interface_name", SqlType::NVarChar(32)),
        ("login_name", SqlType::NVarChar(128)),
        ("status", SqlType::NVarChar(30)),
        ("last_request_start_time", SqlType::DateTime),
        ("is_user_process", SqlType::Bit),
        ("database_id", SqlType::SmallInt),
        ("transaction_isolation_level", SqlType::SmallInt),
        ("lock_timeout", SqlType::Int),
        ("deadlock_priority", SqlType::Int),
    ]);
    let rows = inst
        .sessions
        .lock()
        .unwrap()
        .values()
        .map(|s| {
            let running = s.running.load(Ordering::Acquire);
            vec![
                Value::SmallInt(s.session_id as i16),
                Value::DateTime(ticks_from_unix_us(s.login_unix_us)),
                text(&s.host_name),
                text(&s.program_name),
                text(&s.client_interface_name),
                text(&s.login_name),
                text(if running { "running" } else { "sleeping" }),
                Value::DateTime(ticks_from_unix_us(
                    s.last_request_start_us.load(Ordering::Acquire),
                )),
                Value::Bit(true),
                Value::SmallInt(s.database_id.load(Ordering::Acquire) as i16),
                Value::SmallInt(s.transaction_isolation_level.load(Ordering::Acquire)),
                Value::Int(s.lock_timeout_ms.load(Ordering::Acquire)),
                Value::Int(s.deadlock_priority.load(Ordering::Acquire)),
            ]
        })
        .collect();
    Rowset { columns, rows }
}

/// sys.dm_exec_requests: every session's running request, with the progress of long
/// ones (REBALANCE, SHRINKFILE ...) where they report it.
fn exec_requests(inst: &Instance) -> Rowset {
    use std::sync::atomic::Ordering;
    let columns = cols(&[
        ("session_id", SqlType::SmallInt),
        ("request_id", SqlType::Int),
        ("start_time", SqlType::DateTime),
        ("status", SqlType::NVarChar(30)),
        ("command", SqlType::NVarChar(32)),
        ("database_id", SqlType::SmallInt),
        ("percent_complete", SqlType::Real),
        ("blocking_session_id", SqlType::SmallInt),
        ("wait_type", SqlType::NVarChar(60)),
        ("wait_time", SqlType::Int),
        ("last_wait_type", SqlType::NVarChar(60)),
        ("wait_resource", SqlType::NVarChar(256)),
    ]);
    let long = inst.requests.lock().unwrap().clone();
    let mut rows = Vec::new();
    for s in inst.sessions.lock().unwrap().values() {
        let long = long.get(&s.session_id);
        if !s.running.load(Ordering::Acquire) && long.is_none() {
            continue;
        }
        let (start, command, db, pct) = match long {
            Some(r) => (
                r.start_unix_us,
                r.command.clone(),
                r.database_id,
                r.percent_complete,
            ),
            None => (
                s.last_request_start_us.load(Ordering::Acquire),
                s.command.lock().unwrap().to_string(),
                s.database_id.load(Ordering::Acquire),
                0.0,
            ),
        };
        let mut row = vec![
            Value::SmallInt(s.session_id as i16),
            Value::Int(0),
            Value::DateTime(ticks_from_unix_us(start)),
            text("running"),
            text(&command),
            Value::SmallInt(db as i16),
            Value::Real(pct),
        ];
        let wait = super::lock_views::request_wait(inst, s);
        if wait[0] != Value::SmallInt(0) {
            row[3] = text("suspended");
        }
        row.extend(wait);
        rows.push(row);
    }
    // Long requests of sessions not in the list (an in-process caller without a session).
    for r in long.values() {
        if !rows
            .iter()
            .any(|row| row[0] == Value::SmallInt(r.session_id as i16))
        {
            rows.push(vec![
                Value::SmallInt(r.session_id as i16),
                Value::Int(0),
                Value::DateTime(ticks_from_unix_us(r.start_unix_us)),
                text("running"),
                text(&r.command),
                Value::SmallInt(r.database_id as i16),
                Value::Real(r.percent_complete),
                Value::SmallInt(0),
                Value::Null,
                Value::Int(0),
                Value::Null,
                text(""),
            ]);
        }
    }
    Rowset { columns, rows }
}
