//! DBCC SHRINKFILE (file, EMPTYFILE | target_size_mb): the file named by logical name or
//! file id in the current database. EMPTYFILE moves every page to the other files of the
//! filegroup (so ALTER DATABASE ... REMOVE FILE can follow); a target in MB gives back the
//! free space at the end of the file. Both answer SQL Server's result set (DbId, FileId,
//! CurrentSize, MinimumSize, UsedPages, EstimatedPages, sizes in pages).

use extentdb_format::file_header::FileType;
use extentdb_storage::StorageError;

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
        let (db_id, shared) = self.current_database()?;
        let mut db = shared.lock().unwrap();
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
        let cannot_empty = |e: StorageError| match e {
            StorageError::CannotEmptyFile(_) => vec![msg(2555, &[&file.name])],
            other => storage_error(other),
        };
        match args.get(1) {
            Some(Value::Text(t)) if t.eq_ignore_ascii_case("EMPTYFILE") => loop {
                // Pages of tables an open transaction changed wait for it (page_move.rs
                // invariant 2): the lock is released meanwhile, and an attention ends it.
                match db.empty_file(file.file_id) {
                    Err(StorageError::ActiveTransactions(_)) => {
                        drop(db);
                        if self.xacts.contains_key(&db_id) {
                            return Err(vec![msg(226, &[&"DBCC SHRINKFILE"])]);
                        }
                        if self.cancelled() {
                            return Err(Vec::new());
                        }
                        std::thread::sleep(std::time::Duration::from_millis(5));
                        db = shared.lock().unwrap();
                    }
                    other => {
                        other.map_err(cannot_empty)?;
                        break;
                    }
                }
            },
            None => {
                db.shrink_file(file.file_id, 0).map_err(storage_error)?;
            }
            Some(v) => {
                let mb = super::eval::as_i64(v).map_err(|e| vec![e])?;
                if mb < 0 {
                    return Err(vec![msg(2526, &[])]);
                }
                let pages = (mb as u64 * extentdb_format::PAGES_PER_MB as u64).min(u32::MAX as u64);
                db.shrink_file(file.file_id, pages as u32)
                    .map_err(storage_error)?;
            }
        }
        let size = db
            .catalog
            .files
            .iter()
            .find(|f| f.file_id == file.file_id)
            .map_or(0, |f| f.size_pages);
        let used = db
            .data_files
            .get(&file.file_id)
            .map(|df| {
                df.usable_extents()
                    .saturating_sub(df.free_extents().unwrap_or(0))
                    * 8
            })
            .unwrap_or(0);
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
            Value::Int(size as i32),
            Value::Int(8),
            Value::Int(used as i32),
            Value::Int(used as i32),
        ]];
        drop(db);
        self.send_rowset(Rowset { columns, rows }, out);
        Ok(())
    }
}
