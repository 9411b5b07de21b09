//! The mapping of storage failures to SQL Server messages: one place, so every client sees
//! the same Msg. A statement-level failure can produce several messages (SQL Server follows
//! 5170 with 1802 for CREATE DATABASE, with 5009 for ALTER DATABASE ADD FILE).

use extentdb_storage::StorageError;

use crate::messages::{msg, os_error_text, SqlError};

/// Which statement failed, for the trailing message and the wording of some errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    CreateDatabase,
    AlterDatabase,
    Other,
}

fn errno_text(e: &extentdb_io::IoError) -> String {
    os_error_text(e.errno().unwrap_or(libc::EIO))
}

/// Maps one storage error to the messages SQL Server would send, in order.
pub fn map(err: &StorageError, ctx: Context) -> Vec<SqlError> {
    use StorageError::*;
    let file_level = |e: SqlError| -> Vec<SqlError> {
        match ctx {
            Context::CreateDatabase => vec![e, msg(1802, &[])],
            Context::AlterDatabase => vec![e, msg(5009, &[])],
            Context::Other => vec![e],
        }
    };
    match err {
        DatabaseExists(name) => vec![msg(1801, &[name])],
        DatabaseNotFound(name) => vec![msg(911, &[name])],
        SystemDatabase(name) => vec![SqlError {
            number: 3708,
            severity: 16,
            state: 5,
            text: format!("Cannot drop the database '{name}' because it is a system database."),
            line: 0,
            procedure: None,
        }],
        DatabaseInUse(name) => vec![msg(3702, &[name])],
        DatabaseLocked(name) => vec![msg(5061, &[name]), msg(5069, &[])],
        NeedsReopen(name) => vec![msg(945, &[name])],
        LogicalNameInUse(name) => vec![msg(1828, &[name])],
        PhysicalNameInUse { path, database } => file_level(msg(1834, &[path, database])),
        FileExists(path) => file_level(msg(5170, &[path])),
        OutsideDataRoots(path) => file_level(msg(5123, &[&os_error_text(libc::EACCES), path])),
        DirectoryNotFound(path) => file_level(msg(5133, &[path, &os_error_text(libc::ENOTDIR)])),
        FileCreate { path, source } => file_level(msg(5123, &[&errno_text(source), path])),
        FileExpand { path, source } => vec![msg(5149, &[&errno_text(source), path])],
        SizeGreaterThanMax(_) => vec![msg(5040, &[])],
        NotLarger(_) => vec![msg(5039, &[])],
        TooSmall { .. } => file_level(msg(5174, &[])),
        FileNotFound(name) => vec![msg(5041, &[name])],
        FileNotEmpty(name) => vec![msg(5042, &[&"file", name])],
        CannotRemovePrimary => vec![msg(5020, &[])],
        FilegroupNotFound(name) => vec![msg(5014, &[&"filegroup", name, &""])],
        FilegroupExists(name) => vec![msg(5035, &[name])],
        FilegroupNotEmpty(name) => vec![msg(5042, &[&"filegroup", name])],
        CannotRemovePrimaryFilegroup => vec![msg(5020, &[])],
        InvalidName(name) => vec![msg(102, &[name])],
        TableExists(name) => vec![msg(2714, &[name])],
        // The SQL layer refuses first with the table's name (table_ddl.rs); this is
        // storage's last guard (constraint.rs invariant 4), which knows only its id.
        ReferencedByForeignKey(id) => vec![msg(3726, &[&format!("object {id}")])],
        DropPending(name) => vec![super::lower::not_yet(&format!(
            "CREATE TABLE of '{name}' in the transaction that dropped it"
        ))],
        ScanMoved => vec![msg(601, &[])],
        ClusteredIndexDisabled { index, table } => vec![msg(8655, &[index, table])],
        TooLong(t) => vec![too_long(t.what, &t.value, t.max)],
        DuplicateIndexKey {
            table,
            index,
            constraint,
            key,
        } => {
            let first = match constraint {
                Some(k) => msg(2627, &[&k.kind(), index, table, &stored_key_text(key)]),
                None => msg(2601, &[table, index, &stored_key_text(key)]),
            };
            vec![first, msg(3621, &[])]
        }
        IndexExists(name) => vec![msg(1913, &[name, &"?"])],
        IndexNotFound(name) => vec![msg(3701, &[&"drop", &"index", name])],
        DuplicateKey { table, constraint } => vec![msg(
            2627,
            &[&"PRIMARY KEY", constraint, &format!("dbo.{table}"), &"(?)"],
        )],
        TableNotFound(id) => vec![msg(208, &[id])],
        IdentityOverflow => vec![msg(8115, &[&"IDENTITY", &"bigint"])],
        Io(e) => vec![io_error(e)],
        IncorrectPageId {
            page,
            database_id,
            file,
            ..
        } => vec![msg(
            824,
            &[
                &err.to_string(),
                &"read",
                &page.to_string(),
                database_id,
                &format!("0x{:016x}", page.page.offset()),
                file,
            ],
        )],
        Format(e) => vec![msg(
            824,
            &[&e.to_string(), &"read", &"", &"", &"", &"", &"", &""],
        )],
        KeyVersionsFillPage { .. } => vec![super::lower::not_yet(
            "more versions of one key than a page holds in open transactions (commit or roll back first)",
        )],
        LogFailed => vec![msg(9001, &[&""])],
        LogDamaged(_) => vec![msg(9004, &[&""])],
        Snapshot(_) => vec![msg(1823, &[])],
        RowNotFound { .. } | AllocationUnitNotFound(_) | ExtentNotOwned { .. } => {
            vec![msg(5243, &[&internal_reference(err)])]
        }
        // Every other storage error reaches the client from a path that maps it in its own
        // context (BACKUP, RESTORE, SHRINKFILE, startup); one arriving here is a condition
        // no statement expects: SQL Server's generic internal error, with the detail in
        // the ERRORLOG (`messages::is_event_logged`).
        other => vec![SqlError {
            text: format!(
                "{} ({other})",
                msg(8630, &[&0x8000_4005u32]).text
            ),
            ..msg(8630, &[&0x8000_4005u32])
        }],
    }
}

/// The reference number Msg 5243 gives an internal inconsistency: which kind it is.
fn internal_reference(err: &StorageError) -> i64 {
    match err {
        StorageError::RowNotFound { .. } => 1,
        StorageError::AllocationUnitNotFound(_) => 2,
        _ => 3,
    }
}

/// Msg 823 for a failed read, write or sync: the OS error, the operation, the byte offset
/// it started at (0 for a sync, which has none) and the file.
pub fn io_error(e: &extentdb_io::IoError) -> SqlError {
    let op = if e.op() == "read" { "read" } else { "write" };
    let offset = format!("{:#016x}", e.offset().unwrap_or(0));
    let file = e
        .path()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    msg(823, &[&errno_text(e), &op, &offset, &file])
}

/// Msg 103: `value` over `max` characters (the message quotes its first 128).
pub fn too_long(what: &str, value: &str, max: usize) -> SqlError {
    let head: String = value.chars().take(128).collect();
    msg(103, &[&what, &head, &max])
}

/// Maps a storage error of the data path (DML in database `database`): the messages that
/// name the database, each followed by "The statement has been terminated." as SQL Server
/// sends it for a failed data modification.
pub fn map_data(err: &StorageError, database: &str) -> Vec<SqlError> {
    let mut out = match err {
        StorageError::FilegroupFull { object, filegroup } => vec![msg(
            1105,
            &[&format!("dbo.{object}"), &"", &database, filegroup],
        )],
        StorageError::LogFull(why) => vec![msg(9002, &[&database, why])],
        StorageError::LogFailed => vec![msg(9001, &[&database])],
        other => return map(other, Context::Other),
    };
    out.push(msg(3621, &[]));
    out
}

/// A key's stored values as Msgs 2601, 2627 and 1505 print them: `(v1, v2)`, NULL as
/// `<NULL>`.
pub fn stored_key_text(key: &[(extentdb_format::catalog::ColumnEntry, Option<Vec<u8>>)]) -> String {
    let parts: Vec<String> = key
        .iter()
        .map(|(c, v)| {
            let value = super::tables::column_type(c)
                .ok()
                .and_then(|t| crate::rowcodec::decode(t, v.as_deref()).ok());
            match value {
                Some(v) if !v.is_null() => super::eval::to_text(&v),
                Some(_) => "<NULL>".into(),
                None => "?".into(),
            }
        })
        .collect();
    format!("({})", parts.join(", "))
}
