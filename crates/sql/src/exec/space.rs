//! Space reporting as SQL Server gives it: FILEPROPERTY(file, 'SpaceUsed' | 'IsPrimaryFile'
//! | 'IsLogFile' | 'IsReadOnly'), sys.dm_db_file_space_usage, DBCC SHOWFILESTATS and
//! sp_spaceused, over the figures of `extentdb_storage::space` (whose module docs define
//! allocated extents and a unit's reserved, data, index and used pages).
//!
//! sp_spaceused computes as SQL Server 2019's procedure does, with extentdb's units:
//! - for a table: `reserved` = the pages of the extents its allocation unit owns; `data` =
//!   its data pages (a heap's pages, a clustered index's leaves); `index_size` = used - data
//!   (index pages above the leaves and IAM pages); `unused` = reserved - used. The last two
//!   are clamped at 0 as the procedure clamps them: the IAM page lies outside the table's
//!   extents (in the catalog's), so a table whose extents are full has used > reserved.
//! - for the database: the same sums over every table plus the system space (the catalog's
//!   extents, its pages counted as data, as SQL Server counts system tables' pages), so
//!   `reserved` = the tables' reserved + the catalog's extents, and
//!   `reserved` + the fixed extents (file header, PFS, GAM ...) = the data files' allocated
//!   extents (DBCC SHOWFILESTATS's UsedExtents) * 8 pages. `unallocated space` = the data
//!   files' pages - reserved; `database_size` = every file's pages, the log included.
//!
//! Sizes are text as the procedure formats them: `LTRIM(STR(kb, 15, 0)) + ' KB'` and
//! `LTRIM(STR(mb, 15, 2)) + ' MB'` (rounded half up, as STR rounds).
//!
//! Not here: sp_spaceused's @updateusage, @mode and @include_total_xtp_storage (extentdb's
//! counts are read from the pages each time, there is no remote data archive and no
//! In-Memory OLTP); sys.dm_db_file_space_usage's modified_extent_page_count (the DCM is not
//! maintained yet).

use extentdb_format::catalog::FileEntry;
use extentdb_format::file_header::FileType;
use extentdb_storage::space::{FileSpace, UnitSpace};
use extentdb_storage::{Database, StorageError};

use super::errors::{self, Context};
use super::tables::{object_name_from_text, TableRef};
use super::views::{cols, text, Rowset, SYSNAME};
use super::{Out, Output, Session};
use crate::convert::convert;
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value};

/// The procedure's parameters, in order.
pub(super) const SP_SPACEUSED_PARAMS: &[&str] = &[
    "@objname",
    "@updateusage",
    "@mode",
    "@oneresultset",
    "@include_total_xtp_storage",
];

/// The parameters extentdb does not take yet: @updateusage, @mode and
/// @include_total_xtp_storage (positions in `SP_SPACEUSED_PARAMS`).
const SPACEUSED_NOT_YET: [usize; 3] = [1, 2, 4];

/// Lines of sp_spaceused's text (SQL Server 2016 and later) that raise 15250 and 15009;
/// unverified: counted in the procedure's published source, not seen in SQL Server output.
const SPACEUSED_LINE_15250: u32 = 99;
const SPACEUSED_LINE_15009: u32 = 120;

const PAGES_PER_EXTENT: u64 = extentdb_format::PAGES_PER_EXTENT as u64;

/// A storage failure as the messages SQL Server would send.
pub(super) fn storage_error(e: StorageError) -> Vec<SqlError> {
    errors::map(&e, Context::Other)
}

/// Pages as `LTRIM(STR(pages * 8, 15, 0)) + ' KB'`: `1234 KB`.
pub(super) fn kb_text(pages: u64) -> String {
    format!("{} KB", pages * 8)
}

/// Pages as megabytes with two decimals, rounded half up as STR rounds: `8.00`.
pub(super) fn mb_text(pages: u64) -> String {
    let hundredths = (pages * 100 + 64) / 128;
    format!("{}.{:02}", hundredths / 100, hundredths % 100)
}

/// FILEPROPERTY(file, property) in `db`: NULL for an unknown file or property.
pub(super) fn file_property(db: &Database, file: &str, property: &str) -> Result<Value, SqlError> {
    let Some(f) = db.file_by_name(file) else {
        return Ok(Value::Null);
    };
    let is_log = f.file_type == FileType::Log;
    Ok(Value::Int(match property.to_ascii_lowercase().as_str() {
        // extentdb has no read-only files (sys.database_files.is_read_only is 0 too).
        "isreadonly" => 0,
        "isprimaryfile" => (f.file_id == 1) as i32,
        "islogfile" => is_log as i32,
        "spaceused" => space_used_pages(db, f).map_err(|e| storage_error(e).swap_remove(0))? as i32,
        _ => return Ok(Value::Null),
    }))
}

/// Pages in use in a file: a data file's allocated extents * 8, a log file's log in use.
fn space_used_pages(db: &Database, f: &FileEntry) -> Result<u64, StorageError> {
    if f.file_type == FileType::Log {
        return Ok(db
            .log_file_used_pages()?
            .get(&f.file_id)
            .copied()
            .unwrap_or(0));
    }
    Ok(db
        .data_file_space()?
        .iter()
        .find(|s| s.file_id == f.file_id)
        .map_or(0, |s| s.allocated_extents as u64 * PAGES_PER_EXTENT))
}

/// sys.dm_db_file_space_usage of database `db_id`: one row per data file. extentdb
/// allocates uniform extents only and has no version store or internal objects, so those
/// counts are 0.
pub fn file_space_usage(db: &Database, db_id: u16) -> Result<Rowset, StorageError> {
    let columns = cols(&[
        ("database_id", SqlType::SmallInt),
        ("file_id", SqlType::SmallInt),
        ("filegroup_id", SqlType::SmallInt),
        ("total_page_count", SqlType::BigInt),
        ("allocated_extent_page_count", SqlType::BigInt),
        ("unallocated_extent_page_count", SqlType::BigInt),
        ("version_store_reserved_page_count", SqlType::BigInt),
        ("user_object_reserved_page_count", SqlType::BigInt),
        ("internal_object_reserved_page_count", SqlType::BigInt),
        ("mixed_extent_page_count", SqlType::BigInt),
    ]);
    let pages = |extents: u32| Value::BigInt(extents as i64 * PAGES_PER_EXTENT as i64);
    let rows = db
        .data_file_space()?
        .iter()
        .map(|f: &FileSpace| {
            vec![
                Value::SmallInt(db_id as i16),
                Value::SmallInt(f.file_id as i16),
                Value::SmallInt(f.data_space_id as i16),
                Value::BigInt(f.size_pages as i64),
                pages(f.allocated_extents),
                pages(f.free_extents),
                Value::BigInt(0),
                pages(f.user_object_extents),
                Value::BigInt(0),
                Value::BigInt(0),
            ]
        })
        .collect();
    Ok(Rowset { columns, rows })
}

/// DBCC SHOWFILESTATS: each data file's size and allocated extents.
fn show_file_stats(db: &Database) -> Result<Rowset, StorageError> {
    let columns = cols(&[
        ("Fileid", SqlType::Int),
        ("FileGroup", SqlType::Int),
        ("TotalExtents", SqlType::BigInt),
        ("UsedExtents", SqlType::BigInt),
        ("Name", SYSNAME),
        ("FileName", SqlType::NVarChar(260)),
    ]);
    let mut rows = Vec::new();
    for f in db.data_file_space()? {
        let entry = db.catalog.files.iter().find(|e| e.file_id == f.file_id);
        let (name, path) = entry.map_or(("", ""), |e| (&e.name, &e.physical_name));
        rows.push(vec![
            Value::Int(f.file_id as i32),
            Value::Int(f.data_space_id as i32),
            Value::BigInt(f.total_extents as i64),
            Value::BigInt(f.allocated_extents as i64),
            text(name),
            text(path),
        ]);
    }
    Ok(Rowset { columns, rows })
}

/// The space of every table of `db` and the system space, summed (sp_spaceused's database
/// form).
fn database_space(db: &Database) -> Result<UnitSpace, StorageError> {
    let mut total = db.system_space()?;
    let units: Vec<u64> = db
        .catalog
        .tables
        .iter()
        .map(|t| t.allocation_unit_id)
        .collect();
    for au in units {
        total.add(&db.unit_space(au)?);
    }
    Ok(total)
}

/// sp_spaceused's database_name, database_size (every file, the log's included) and
/// unallocated space (the data files' pages not reserved).
fn database_size(db: &Database, total: &UnitSpace) -> (Vec<(String, SqlType)>, Vec<Value>) {
    let file_pages = |log: bool| -> u64 {
        let files = db.catalog.files.iter();
        let of_kind = files.filter(|f| (f.file_type == FileType::Log) == log);
        of_kind.map(|f| f.size_pages as u64).sum()
    };
    let (data_pages, log_pages) = (file_pages(false), file_pages(true));
    let unallocated = data_pages.saturating_sub(total.reserved_pages);
    let columns = cols(&[
        ("database_name", SYSNAME),
        ("database_size", SIZE_TEXT),
        ("unallocated space", SIZE_TEXT),
    ]);
    let row = vec![
        text(&db.name),
        text(&format!("{} MB", mb_text(data_pages + log_pages))),
        text(&format!("{} MB", mb_text(unallocated))),
    ];
    (columns, row)
}

/// A result set of one row.
fn one_row(columns: Vec<(String, SqlType)>, row: Vec<Value>) -> Output {
    Rowset {
        columns,
        rows: vec![row],
    }
    .into()
}

/// reserved, data, index_size and unused as sp_spaceused shows them (index_size and unused
/// clamped at 0, as the procedure does).
fn usage_texts(s: &UnitSpace) -> [Value; 4] {
    let used = s.used_pages();
    [
        text(&kb_text(s.reserved_pages)),
        text(&kb_text(s.data_pages)),
        text(&kb_text(used.saturating_sub(s.data_pages))),
        text(&kb_text(s.reserved_pages.saturating_sub(used))),
    ]
}

const SIZE_TEXT: SqlType = SqlType::VarChar(18);
const USAGE_COLUMNS: [(&str, SqlType); 4] = [
    ("reserved", SIZE_TEXT),
    ("data", SIZE_TEXT),
    ("index_size", SIZE_TEXT),
    ("unused", SIZE_TEXT),
];

impl Session {
    /// DBCC SHOWFILESTATS (the current database's data files).
    pub(super) fn show_file_stats(
        &mut self,
        args: &[Value],
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        if !args.is_empty() {
            return Err(vec![msg(2526, &[])]);
        }
        let (_, db) = self.current_database()?;
        let r = show_file_stats(&db.read().unwrap()).map_err(storage_error)?;
        self.send_rowset(r, out);
        Ok(())
    }

    /// sp_spaceused [[@objname =] 'table'] [, @oneresultset = 1]: the database's space in
    /// two result sets (one with @oneresultset = 1), or one table's. The procedure runs
    /// with SET NOCOUNT ON, so no row counts follow.
    pub(super) fn sp_spaceused(
        &mut self,
        args: &[Value],
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        if let Some(&p) = SPACEUSED_NOT_YET.iter().find(|&&p| !args[p].is_null()) {
            let what = format!("sp_spaceused {}", SP_SPACEUSED_PARAMS[p]);
            return Err(vec![super::lower::not_yet(&what)]);
        }
        let one_set =
            !args[3].is_null() && super::eval::as_i64(&args[3]).map_err(|e| vec![e])? != 0;
        match &args[0] {
            Value::Null => self.database_space_used(one_set, out),
            name => self.table_space_used(&super::eval::to_text(name), out),
        }
    }

    fn database_space_used(&mut self, one_set: bool, out: &mut Out) -> Result<(), Vec<SqlError>> {
        let (_, db) = self.current_database()?;
        let db = db.read().unwrap();
        let total = database_space(&db).map_err(storage_error)?;
        let (columns, row) = database_size(&db, &total);
        let (usage_columns, usage_row) = (cols(&USAGE_COLUMNS), usage_texts(&total).to_vec());
        if one_set {
            out.push(one_row(
                [columns, usage_columns].concat(),
                [row, usage_row].concat(),
            ));
        } else {
            out.push(one_row(columns, row));
            out.push(one_row(usage_columns, usage_row));
        }
        Ok(())
    }

    fn table_space_used(&mut self, objname: &str, out: &mut Out) -> Result<(), Vec<SqlError>> {
        let lines = (SPACEUSED_LINE_15250, SPACEUSED_LINE_15009);
        let t = self.procedure_table(objname, ("sp_spaceused", lines))?;
        let space = table_and_index_space(&t.db.read().unwrap(), t.entry.object_id);
        let space = space.map_err(storage_error)?;
        // rows = CONVERT(char(20), @rowCount).
        let rows = convert(&Value::BigInt(space.rows as i64), SqlType::Char(20), None);
        let mut columns = cols(&[("name", SYSNAME), ("rows", SqlType::Char(20))]);
        columns.extend(cols(&USAGE_COLUMNS));
        let mut row = vec![text(&t.entry.name), rows.map_err(|e| vec![e])?];
        row.extend(usage_texts(&space));
        out.push(one_row(columns, row));
        Ok(())
    }

    /// The table a system procedure's @objname names in the current database, or the
    /// procedure's error: 15250 for another database's object, 15009 for no such table
    /// (each raised at the procedure's line given).
    pub(super) fn procedure_table(
        &self,
        objname: &str,
        (procedure, (line_15250, line_15009)): (&str, (u32, u32)),
    ) -> Result<TableRef, Vec<SqlError>> {
        let db_name = self.current_db_name();
        let name = object_name_from_text(objname);
        let elsewhere = |d: &str| !d.is_empty() && !d.eq_ignore_ascii_case(&db_name);
        if name.database().is_some_and(elsewhere) {
            let e = msg(15250, &[]);
            return Err(vec![e.in_procedure(procedure, line_15250)]);
        }
        self.find_table(&name)?.ok_or_else(|| {
            let e = msg(15009, &[&objname, &db_name]);
            vec![e.in_procedure(procedure, line_15009)]
        })
    }
}

/// A table's space with its nonclustered indexes': their pages count as index pages
/// (index_size), their rows not at all.
fn table_and_index_space(db: &Database, object_id: u32) -> Result<UnitSpace, StorageError> {
    let t = db
        .table_by_id(object_id)
        .ok_or(StorageError::TableNotFound(object_id))?;
    let mut space = db.unit_space(t.allocation_unit_id)?;
    let units: Vec<u64> = db
        .indexes_of(object_id)
        .map(|i| i.allocation_unit_id)
        .collect();
    for au in units {
        let ix = db.unit_space(au)?;
        space.reserved_pages += ix.reserved_pages;
        space.index_pages += ix.data_pages + ix.index_pages;
        space.iam_pages += ix.iam_pages;
    }
    Ok(space)
}

#[cfg(test)]
mod tests {
    use super::{kb_text, mb_text};

    /// Pins sp_spaceused's size texts: whole KB, and MB with two decimals rounded half up.
    #[test]
    fn size_texts() {
        assert_eq!(kb_text(0), "0 KB");
        assert_eq!(kb_text(153), "1224 KB");
        assert_eq!(mb_text(1024), "8.00");
        assert_eq!(mb_text(1), "0.01");
        assert_eq!(mb_text(16), "0.13", "0.125 rounds up");
        assert_eq!(mb_text(1536 + 512), "16.00");
    }
}
