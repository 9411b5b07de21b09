//! DBCC SHRINKFILE (file, EMPTYFILE | target_size_mb): the file named by logical name or
//! file id in the current database. EMPTYFILE moves every page to the other files of the
//! filegroup (so ALTER DATABASE ... REMOVE FILE can follow); a target in MB gives back the
//! free space at the end of the file. Both answer SQL Server's result set (DbId, FileId,
//! CurrentSize, MinimumSize, UsedPages, EstimatedPages, sizes in pages).

use extentdb_format::catalog::FileEntry;
use extentdb_format::file_header::FileType;
use extentdb_storage::structure::ShrinkTarget;
use extentdb_storage::{Database, StorageError};

use super::space::storage_error;
use super::views::{cols, Rowset};
use super::{Out, Session};
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value};

impl Session {
    pub(super) fn shrink_file(
        &mut self,
        args: &[Value],
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        let (db_id, db) = self.current_database()?;
        // The file and target checked at one catalog state, the first attempt made at it
        // (storage's structure.rs invariant 2).
        let (file, target, mut result) = loop {
            let (version, file, target) = {
                let d = db.read().unwrap();
                let (file, target) = shrink_request(&d, args)?;
                (d.catalog_version(), file, target)
            };
            match db.shrink_file(Some(version), file.file_id, target) {
                Err(StorageError::CatalogChanged) => continue,
                r => break (file, target, r),
            }
        };
        // Pages of tables an open transaction changed wait for it (page_move.rs invariant
        // 2): the database is let go meanwhile, and an attention ends it.
        while target == ShrinkTarget::EmptyFile
            && matches!(result, Err(StorageError::ActiveTransactions(_)))
        {
            if self.xacts.contains_key(&db_id) {
                return Err(vec![msg(226, &[&"DBCC SHRINKFILE"])]);
            }
            if self.cancelled() {
                return Err(Vec::new());
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
            result = db.shrink_file(None, file.file_id, target);
        }
        let usage = result.map_err(|e| match e {
            StorageError::CannotEmptyFile(_) if target == ShrinkTarget::EmptyFile => {
                vec![msg(2555, &[&file.name])]
            }
            other => storage_error(other),
        })?;
        let columns = cols(&[
            ("DbId", SqlType::SmallInt),
            ("FileId", SqlType::SmallInt),
            ("CurrentSize", SqlType::Int),
            ("MinimumSize", SqlType::Int),
            ("UsedPages", SqlType::Int),
            ("EstimatedPages", SqlType::Int),
        ]);
        let rows = vec![vec![
            Value::SmallInt(db_id as i16),
            Value::SmallInt(file.file_id as i16),
            Value::Int(usage.size_pages as i32),
            Value::Int(8),
            Value::Int(usage.used_pages as i32),
            Value::Int(usage.used_pages as i32),
        ]];
        self.send_rowset(Rowset { columns, rows }, out);
        Ok(())
    }
}

/// SHRINKFILE's file (by logical name or file id) and target, checked against `db`.
fn shrink_request(
    db: &Database,
    args: &[Value],
) -> Result<(FileEntry, ShrinkTarget), Vec<SqlError>> {
    let file = match args.first() {
        Some(Value::Text(name)) => db.file_by_name(name).cloned(),
        Some(v) => match super::eval::as_i64(v) {
            Ok(id) => db
                .catalog
                .files
                .iter()
                .find(|f| f.file_id as i64 == id)
                .cloned(),
            Err(_) => None,
        },
        None => return Err(vec![msg(2526, &[])]),
    };
    let shown = args.first().map(super::eval::to_text).unwrap_or_default();
    let Some(file) = file else {
        return Err(vec![msg(8985, &[&shown, &db.name])]);
    };
    if file.file_type == FileType::Log {
        return Err(vec![super::lower::not_yet("DBCC SHRINKFILE of a log file")]);
    }
    let target = match args.get(1) {
        Some(Value::Text(t)) if t.eq_ignore_ascii_case("EMPTYFILE") => ShrinkTarget::EmptyFile,
        None => ShrinkTarget::Pages(0),
        Some(v) => {
            let mb = super::eval::as_i64(v).map_err(|e| vec![e])?;
            if mb < 0 {
                return Err(vec![msg(2526, &[])]);
            }
            let pages = (mb as u64 * extentdb_format::PAGES_PER_MB as u64).min(u32::MAX as u64);
            ShrinkTarget::Pages(pages as u32)
        }
    };
    Ok((file, target))
}
