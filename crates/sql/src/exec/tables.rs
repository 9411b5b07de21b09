//! User tables as the executor sees them: resolving a name to a table of a database, the
//! SQL type of each column, and rows between stored records and `Value`s.
//!
//! Only the `dbo` schema exists; a name in any other schema is not found (Msg 208).

use std::sync::Arc;

use extentdb_storage::db_lock::DbLock;

use extentdb_format::catalog::{ColumnEntry, TableEntry};
use extentdb_format::record;
use extentdb_storage::table::{layouts, Rid};
use extentdb_storage::Database;

use super::Session;
use crate::ast::ObjectName;
use crate::messages::{msg, SqlError};
use crate::rowcodec::{self, StoredType};
use crate::types::{SqlType, Value};

/// A resolved user table: its database and catalog entry as of resolution, and the SQL
/// type of each column.
pub(super) struct TableRef {
    pub db_id: u16,
    pub db: Arc<DbLock>,
    pub db_name: String,
    pub entry: TableEntry,
    pub types: Vec<SqlType>,
}

impl TableRef {
    /// Column names and types, as a rowset's header.
    pub fn columns(&self) -> Vec<(String, SqlType)> {
        self.entry
            .columns
            .iter()
            .zip(&self.types)
            .map(|(c, t)| (c.name.clone(), *t))
            .collect()
    }

    /// `dbo.name`, as messages name the table.
    pub fn two_part(&self) -> String {
        format!("{}.{}", self.entry.schema_name, self.entry.name)
    }

    /// `db.dbo.name`, as Msg 515 names the table.
    pub fn three_part(&self) -> String {
        format!("{}.{}", self.db_name, self.two_part())
    }

    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.entry
            .columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// Every live row with its RID, decoded.
    pub fn rows(&self, db: &mut Database) -> Result<Vec<(Rid, Vec<Value>)>, Vec<SqlError>> {
        let stored = db
            .scan_rows(self.entry.object_id)
            .map_err(|e| super::errors::map_data(&e, &self.db_name))?;
        stored
            .into_iter()
            .map(|(rid, rec)| Ok((rid, self.decode(&rec)?)))
            .collect()
    }

    /// Calls `each` with every live row and its RID, reading the table a chunk at a time
    /// (`Chunks`), until `each` returns false: what is held is one chunk, not the table.
    pub fn each_row(
        &self,
        mut each: impl FnMut(Rid, Vec<Value>) -> Result<bool, Vec<SqlError>>,
    ) -> Result<(), Vec<SqlError>> {
        let mut chunks = Chunks::new(self)?;
        while let Some(rows) = chunks.next_chunk()? {
            for (rid, rec) in rows {
                if !each(rid, self.decode(&rec)?)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// `each_row` for a caller that holds the database already (a statement's write
    /// phase): the same chunks, read through `db`.
    pub fn each_row_in(
        &self,
        db: &mut Database,
        mut each: impl FnMut(Vec<Value>) -> Result<(), Vec<SqlError>>,
    ) -> Result<(), Vec<SqlError>> {
        let mut chunks = Chunks::held(self, db)?;
        while let Some(rows) = chunks.next_chunk_in(db)? {
            for (_, rec) in rows {
                each(self.decode(&rec)?)?;
            }
        }
        Ok(())
    }

    pub fn decode(&self, rec: &[u8]) -> Result<Vec<Value>, Vec<SqlError>> {
        let lay = layouts(&self.entry);
        let cols = record::decode(&lay, rec).map_err(|e| vec![corrupt(&e.to_string())])?;
        cols.iter()
            .zip(&self.types)
            .map(|(b, t)| rowcodec::decode(*t, *b).map_err(|e| vec![corrupt(&e)]))
            .collect()
    }

    /// The record of a row whose values already have their column types.
    pub fn encode(&self, values: &[Value]) -> Result<Vec<u8>, Vec<SqlError>> {
        let mut bytes = Vec::with_capacity(values.len());
        for (v, t) in values.iter().zip(&self.types) {
            bytes.push(rowcodec::encode(*t, v).map_err(|e| vec![e])?);
        }
        let refs: Vec<Option<&[u8]>> = bytes.iter().map(|b| b.as_deref()).collect();
        record::encode(&layouts(&self.entry), &refs).map_err(|e| vec![corrupt(&e.to_string())])
    }
}

/// Stored rows with their RIDs, as a chunk of a scan gives them.
pub(super) type StoredRows = Vec<(Rid, Vec<u8>)>;

/// Bytes of records one chunk of a scan reads with the database held.
const CHUNK_BYTES: usize = 256 << 10;

/// A table's rows a chunk at a time (storage `scan_chunk`): the database is held for each
/// chunk's read only, so the reader can let go of it between chunks.
pub(super) struct Chunks<'a> {
    t: &'a TableRef,
    origin: extentdb_storage::scan::ScanOrigin,
    at: extentdb_storage::scan::ScanPosition,
}

impl<'a> Chunks<'a> {
    pub fn new(t: &'a TableRef) -> Result<Chunks<'a>, Vec<SqlError>> {
        Chunks::held(t, &t.db.lock().unwrap())
    }

    /// Chunks read through a database the caller holds (`next_chunk_in`).
    pub fn held(t: &'a TableRef, db: &Database) -> Result<Chunks<'a>, Vec<SqlError>> {
        let origin = db.scan_origin(t.entry.object_id);
        Ok(Chunks {
            t,
            origin: origin.map_err(|e| super::errors::map_data(&e, &t.db_name))?,
            at: extentdb_storage::scan::ScanPosition::Start,
        })
    }

    /// The next chunk's records with their RIDs; None past the last.
    pub fn next_chunk(&mut self) -> Result<Option<StoredRows>, Vec<SqlError>> {
        let db = self.t.db.clone();
        let mut guard = db.lock().unwrap();
        self.next_chunk_in(&mut guard)
    }

    /// `next_chunk` through a database the caller holds.
    pub fn next_chunk_in(
        &mut self,
        db: &mut Database,
    ) -> Result<Option<StoredRows>, Vec<SqlError>> {
        if self.at == extentdb_storage::scan::ScanPosition::End {
            return Ok(None);
        }
        let chunk = db
            .scan_chunk(self.t.entry.object_id, self.origin, &self.at, CHUNK_BYTES)
            .map_err(|e| super::errors::map_data(&e, &self.t.db_name))?;
        self.at = chunk.next;
        Ok(Some(chunk.rows))
    }
}

/// An object name given as text (`'dbo.T'`, `N'[D].[dbo].[T]'`), as OBJECT_ID and the
/// system procedures read it.
pub(super) fn object_name_from_text(text: &str) -> ObjectName {
    ObjectName {
        parts: text
            .split('.')
            .map(|p| p.trim_matches(['[', ']']).to_string())
            .collect(),
    }
}

/// A stored row that does not decode (the data is damaged or the formats disagree):
/// SQL Server's Msg 5243, reference 4 (a record's structure), as its record-cracking code
/// gives it; `reason` goes to the ERRORLOG with it.
fn corrupt(reason: &str) -> SqlError {
    let e = msg(5243, &[&4]);
    SqlError {
        text: format!("{} ({reason})", e.text),
        ..e
    }
}

/// The SQL type of a catalog column.
pub(super) fn column_type(c: &ColumnEntry) -> Result<SqlType, SqlError> {
    rowcodec::sql_type(StoredType {
        system_type_id: c.system_type_id,
        max_length: c.max_length,
        precision: c.precision,
        scale: c.scale,
    })
    .ok_or_else(|| corrupt(&format!("column '{}' has an unknown type", c.name)))
}

impl Session {
    /// The database an object name points into (its third-from-last part, else the
    /// current one).
    pub(super) fn object_database(
        &self,
        name: &ObjectName,
    ) -> Result<(u16, Arc<DbLock>), Vec<SqlError>> {
        match name.database().filter(|d| !d.is_empty()) {
            Some(d) => {
                let found = self.engine.instance.database_by_name(d).ok_or_else(|| {
                    vec![self.unopened_error(d).unwrap_or_else(|| msg(911, &[&d]))]
                })?;
                self.check_single_user(found.0, d)?;
                Ok(found)
            }
            None => self.current_database(),
        }
    }

    /// The current database (Msg 911 if it was dropped meanwhile).
    pub(super) fn current_database(&self) -> Result<(u16, Arc<DbLock>), Vec<SqlError>> {
        self.engine
            .instance
            .database(self.database_id)
            .map(|db| (self.database_id, db))
            .ok_or_else(|| vec![msg(911, &[&self.current_db_name()])])
    }

    /// The user table `name` names, if it exists.
    pub(super) fn find_table(&self, name: &ObjectName) -> Result<Option<TableRef>, Vec<SqlError>> {
        let (db_id, db) = self.object_database(name)?;
        let schema = name.qualifier().filter(|s| !s.is_empty()).unwrap_or("dbo");
        let (entry, db_name) = {
            let g = db.read().unwrap();
            match g.table(schema, name.name()) {
                Some(t) => (t.clone(), g.name.clone()),
                None => return Ok(None),
            }
        };
        let types = entry
            .columns
            .iter()
            .map(column_type)
            .collect::<Result<_, _>>()
            .map_err(|e| vec![e])?;
        Ok(Some(TableRef {
            db_id,
            db,
            db_name,
            entry,
            types,
        }))
    }

    /// The user table `name` names, or Msg 208.
    pub(super) fn table(&self, name: &ObjectName) -> Result<TableRef, Vec<SqlError>> {
        self.find_table(name)?
            .ok_or_else(|| vec![msg(208, &[&name.joined()])])
    }
}
