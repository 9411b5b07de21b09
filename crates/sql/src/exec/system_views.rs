//! sys.system_views: the catalog views and DMVs extentdb answers, each a row with
//! sys.objects' columns and the view-only ones (SQLAlchemy's isolation-level probe asks it
//! whether `dm_exec_sessions` exists before reading transaction_isolation_level).
//!
//! Invariants:
//! 1. `SYSTEM_VIEWS` names exactly the views `views::view` and `select.rs`'s
//!    `view_rowset` answer (a golden test through TDS reads every row's view, and every
//!    view the module docs list is in it): a tool that finds a view here can read it.
//! 2. Object ids are negative, as every system object's in SQL Server, numbered by the
//!    list's order from -1001 (extentdb's own numbers; SQL Server's differ and no tool
//!    relies on them), so each is unique and stable across restarts and versions that
//!    only append to the list.
//! 3. Every row is is_ms_shipped = 1 and dated with the instance's master database, made
//!    with the instance, as SQL Server's are dated with its resource database.

use extentdb_storage::instance::Instance;

use super::views::{object_columns, text, ticks_from_unix_us, Rowset};
use crate::types::{SqlType, Value};

/// (schema_id, name) of each system view, appended to only (invariant 2).
pub(super) const SYSTEM_VIEWS: [(i32, &str); 59] = [
    (4, "allocation_units"),
    (4, "check_constraints"),
    (4, "columns"),
    (4, "computed_columns"),
    (4, "database_files"),
    (4, "database_principals"),
    (4, "database_role_members"),
    (4, "databases"),
    (4, "default_constraints"),
    (4, "dm_db_file_space_usage"),
    (4, "dm_db_index_usage_stats"),
    (4, "dm_db_log_space_usage"),
    (4, "dm_db_session_space_usage"),
    (4, "dm_db_task_space_usage"),
    (4, "dm_exec_connections"),
    (4, "dm_exec_requests"),
    (4, "dm_exec_sessions"),
    (4, "dm_os_performance_counters"),
    (4, "dm_os_spinlock_stats"),
    (4, "dm_os_sys_info"),
    (4, "dm_os_wait_stats"),
    (4, "dm_os_waiting_tasks"),
    (4, "dm_server_services"),
    (4, "dm_tran_active_transactions"),
    (4, "dm_tran_locks"),
    (4, "dm_tran_session_transactions"),
    (4, "extended_properties"),
    (4, "filegroups"),
    (4, "foreign_key_columns"),
    (4, "foreign_keys"),
    (4, "identity_columns"),
    (4, "index_columns"),
    (4, "indexes"),
    (4, "master_files"),
    (4, "objects"),
    (4, "partitions"),
    (4, "schemas"),
    (4, "server_principals"),
    (4, "server_role_members"),
    (4, "sql_logins"),
    (4, "stats"),
    (4, "stats_columns"),
    (4, "system_views"),
    (4, "tables"),
    (4, "types"),
    (3, "COLUMNS"),
    (3, "CONSTRAINT_COLUMN_USAGE"),
    (3, "KEY_COLUMN_USAGE"),
    (3, "REFERENTIAL_CONSTRAINTS"),
    (3, "SCHEMATA"),
    (3, "TABLES"),
    (3, "TABLE_CONSTRAINTS"),
    (4, "dm_os_host_info"),
    (4, "configurations"),
    (4, "procedures"),
    (4, "sql_modules"),
    (4, "parameters"),
    (3, "ROUTINES"),
    (3, "PARAMETERS"),
];

/// sys.system_views: sys.objects' columns, then the six its documentation adds.
pub(super) fn system_views(inst: &Instance) -> Rowset {
    let mut columns = object_columns(&[]);
    let flags = [
        "is_replicated",
        "has_replication_filter",
        "has_opaque_metadata",
        "has_unchecked_assembly_data",
        "with_check_option",
        "is_date_correlation_view",
    ];
    columns.extend(flags.iter().map(|f| (f.to_string(), SqlType::Bit)));
    let created = ticks_from_unix_us(inst.master().read().unwrap().boot.created_us);
    let rows = SYSTEM_VIEWS
        .iter()
        .enumerate()
        .map(|(i, &(schema_id, name))| {
            let mut row = vec![
                text(name),
                Value::Int(-1001 - i as i32),
                Value::Null,
                Value::Int(schema_id),
                Value::Int(0),
                text("V "),
                text("VIEW"),
                Value::DateTime(created),
                Value::DateTime(created),
            ];
            // is_ms_shipped, is_published, is_schema_published, then the view's own.
            row.extend([Value::Bit(true), Value::Bit(false), Value::Bit(false)]);
            row.extend(flags.iter().map(|_| Value::Bit(false)));
            row
        })
        .collect();
    Rowset { columns, rows }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant 2: names unique within their schema (so ids are one per view).
    #[test]
    fn names_are_unique() {
        for (i, a) in SYSTEM_VIEWS.iter().enumerate() {
            assert!(SYSTEM_VIEWS[i + 1..]
                .iter()
                .all(|b| b.0 != a.0 || !b.1.eq_ignore_ascii_case(a.1)));
        }
    }
}
