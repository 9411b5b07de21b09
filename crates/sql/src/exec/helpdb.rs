//! sp_helpdb and sp_helpfile: databases and their files as SQL Server's procedures list
//! them, sizes as text (`8192 KB`, `Unlimited`, `10%`, `     16.00 MB`).
//!
//! sp_helpdb's `status` is built as the procedure builds it, from DATABASEPROPERTYEX: Status,
//! Updateability, UserAccess, Recovery, Version, Collation, SQLSortOrder, then the name of
//! each boolean property that is 1. Its `owner` is `sa` (extentdb has one login). Both
//! procedures run with SET NOCOUNT ON, so no row counts follow their result sets.
//!
//! Not here: sp_helpfile's @filename form; databases that did not open (SUSPECT,
//! RECOVERY_PENDING), which sp_helpdb leaves out.

use extentdb_format::catalog::FileEntry;
use extentdb_format::file_header::FileType;
use extentdb_storage::{Database, Instance};

use super::eval::{database_property, to_text};
use super::space::{kb_text, mb_text};
use super::views::{cols, text, ticks_from_unix_us, Rowset, SYSNAME};
use super::{Out, Session};
use crate::convert::convert;
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value};

pub(super) const SP_HELPDB_PARAMS: &[&str] = &["@dbname"];
pub(super) const SP_HELPFILE_PARAMS: &[&str] = &["@filename"];

/// The line of sp_helpdb's text that raises 15010 (as SQL Server reports it).
const HELPDB_LINE_15010: u32 = 45;

/// The boolean properties sp_helpdb names in `status` when DATABASEPROPERTYEX gives 1, in
/// the procedure's order.
const FLAG_PROPERTIES: &[&str] = &[
    "IsAutoClose",
    "IsAutoShrink",
    "IsInStandby",
    "IsTornPageDetectionEnabled",
    "IsAnsiNullDefault",
    "IsAnsiNullsEnabled",
    "IsAnsiPaddingEnabled",
    "IsAnsiWarningsEnabled",
    "IsArithmeticAbortEnabled",
    "IsAutoCreateStatistics",
    "IsAutoUpdateStatistics",
    "IsCloseCursorsOnCommitEnabled",
    "IsFullTextEnabled",
    "IsLocalCursorsDefault",
    "IsNullConcat",
    "IsNumericRoundAbortEnabled",
    "IsQuotedIdentifiersEnabled",
    "IsRecursiveTriggersEnabled",
    "IsMergePublished",
    "IsPublished",
    "IsSubscribed",
    "IsSyncWithBackup",
];

/// sp_helpfile's result set for one database: one row per file, in file id order.
fn help_file(db: &Database) -> Rowset {
    let size = SqlType::NVarChar(18);
    let columns = cols(&[
        ("name", SYSNAME),
        ("fileid", SqlType::SmallInt),
        ("filename", SqlType::NChar(260)),
        ("filegroup", SYSNAME),
        ("size", size),
        ("maxsize", size),
        ("growth", size),
        ("usage", SqlType::VarChar(9)),
    ]);
    let mut files: Vec<&FileEntry> = db.catalog.files.iter().collect();
    files.sort_by_key(|f| f.file_id);
    let rows = files.into_iter().map(|f| file_row(db, f)).collect();
    Rowset { columns, rows }
}

fn file_row(db: &Database, f: &FileEntry) -> Vec<Value> {
    let filegroup = db
        .catalog
        .filegroups
        .iter()
        .find(|g| g.data_space_id == f.data_space_id && f.file_type == FileType::Rows)
        .map_or(Value::Null, |g| text(&g.name));
    let maxsize = match f.max_size_pages {
        -1 => "Unlimited".to_string(),
        pages => kb_text(pages as u64),
    };
    let growth = match f.is_percent_growth {
        true => format!("{}%", f.growth),
        false => kb_text(f.growth as u64),
    };
    let usage = match f.file_type {
        FileType::Log => "log only",
        FileType::Rows => "data only",
    };
    vec![
        text(&f.name),
        Value::SmallInt(f.file_id as i16),
        text(&f.physical_name),
        filegroup,
        text(&kb_text(f.size_pages as u64)),
        text(&maxsize),
        text(&growth),
        text(usage),
    ]
}

/// sp_helpdb's `status`: the database's properties as DATABASEPROPERTYEX reports them.
fn status_text(inst: &Instance, name: &str) -> String {
    let property = |p: &str| database_property(inst, name, p);
    let mut parts: Vec<String> = [
        "Status",
        "Updateability",
        "UserAccess",
        "Recovery",
        "Version",
        "Collation",
        "SQLSortOrder",
    ]
    .iter()
    .map(|p| format!("{p}={}", to_text(&property(p))))
    .collect();
    let set = |p: &&&str| matches!(property(p), Value::Int(1));
    parts.extend(FLAG_PROPERTIES.iter().filter(set).map(|p| p.to_string()));
    parts.join(", ")
}

/// One row of sp_helpdb's first result set.
fn help_db_row(id: u16, db: &Database, status: String) -> Result<Vec<Value>, SqlError> {
    let pages: u64 = db.catalog.files.iter().map(|f| f.size_pages as u64).sum();
    let created = Value::DateTime(ticks_from_unix_us(db.boot.created_us));
    Ok(vec![
        text(&db.name),
        text(&format!("{:>10} MB", mb_text(pages))),
        text("sa"),
        Value::SmallInt(id as i16),
        // convert(nvarchar(11), crdate): 'Oct  4 2016'.
        convert(&created, SqlType::NVarChar(11), None)?,
        Value::Text(status),
        Value::TinyInt(160),
    ])
}

fn help_db_columns() -> Vec<(String, SqlType)> {
    cols(&[
        ("name", SYSNAME),
        ("db_size", SqlType::NVarChar(13)),
        ("owner", SYSNAME),
        ("dbid", SqlType::SmallInt),
        ("created", SqlType::NVarChar(11)),
        ("status", SqlType::NVarChar(600)),
        ("compatibility_level", SqlType::TinyInt),
    ])
}

impl Session {
    /// sp_helpfile: the current database's files.
    pub(super) fn sp_helpfile(
        &mut self,
        args: &[Value],
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        if !args[0].is_null() {
            return Err(vec![super::lower::not_yet("sp_helpfile @filename")]);
        }
        let (_, db) = self.current_database()?;
        let r = help_file(&db.read().unwrap());
        out.push(r.into());
        Ok(())
    }

    /// sp_helpdb [[@dbname =] 'name']: every database ordered by name, or one database and
    /// then its files (sp_helpfile run in it).
    pub(super) fn sp_helpdb(&mut self, args: &[Value], out: &mut Out) -> Result<(), Vec<SqlError>> {
        let inst = self.engine.instance.clone();
        let wanted = (!args[0].is_null()).then(|| to_text(&args[0]));
        let mut rows = Vec::new();
        let mut files = None;
        for (id, handle) in inst.databases() {
            let name = handle.read().unwrap().name.clone();
            if wanted
                .as_ref()
                .is_some_and(|w| !w.eq_ignore_ascii_case(&name))
            {
                continue;
            }
            // DATABASEPROPERTYEX takes the database's lock, so status comes first.
            let status = status_text(&inst, &name);
            let db = handle.read().unwrap();
            rows.push(help_db_row(id, &db, status).map_err(|e| vec![e])?);
            files = wanted.as_ref().map(|_| help_file(&db));
        }
        if let (Some(w), true) = (&wanted, rows.is_empty()) {
            return Err(vec![
                msg(15010, &[w]).in_procedure("sp_helpdb", HELPDB_LINE_15010)
            ]);
        }
        rows.sort_by_key(|r| to_text(&r[0]).to_lowercase());
        out.push(
            Rowset {
                columns: help_db_columns(),
                rows,
            }
            .into(),
        );
        if let Some(f) = files {
            out.push(f.into());
        }
        Ok(())
    }
}
