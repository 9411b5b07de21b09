//! User tables as the executor sees them: resolving a name to a table of a database, the
//! SQL type of each column, and rows between stored records and `Value`s.
//!
//! Only the `dbo` schema exists; a name in any other schema is not found (Msg 208).

use std::cell::Cell;
use std::sync::Arc;

use extentdb_storage::access::Gate;
use extentdb_storage::lock::Resource;
use extentdb_storage::scan::{KeyRange, PageReads, ScanOrigin, ScanPosition, StoredRow};
use extentdb_storage::SharedDatabase;

use extentdb_format::catalog::{ColumnEntry, TableEntry};
use extentdb_format::record::{self, ColumnLayout};
use extentdb_storage::table::{is_stored, layouts, Rid};
use extentdb_storage::Database;

use super::index_seek::{IndexRead, IndexSeek};
use super::Session;
use crate::ast::ObjectName;
use crate::messages::{msg, SqlError};
use crate::rowcodec::{self, StoredType};
use crate::types::{SqlType, Value};

/// A resolved user table: its database and catalog entry as of resolution, and the SQL
/// type of each column.
pub(super) struct TableRef {
    pub db_id: u16,
    pub db: Arc<SharedDatabase>,
    pub db_name: Arc<str>,
    /// Shared with the session's resolved tables (`table_cache.rs`), not copied.
    pub entry: Arc<TableEntry>,
    pub types: Arc<[SqlType]>,
    /// How each stored column is stored (`layouts(&entry)`), made once with `types` when
    /// the entry is resolved, not for every row decoded or encoded.
    pub layouts: Arc<[ColumnLayout]>,
    /// The computed columns' parsed definitions: a row decoded gets its non-PERSISTED
    /// ones computed (computed_columns.rs invariant 5).
    pub computed: Option<Arc<super::computed_columns::ComputedPlan>>,
    /// What the statement's reads of the table cost so far (SET STATISTICS IO).
    pub io: Cell<TableIo>,
    /// A table variable's `@name`, as SQL Server's messages name it (`dbo.@t` in 2627,
    /// `@t` in 515) instead of its stored name.
    pub variable: Option<Arc<str>>,
    /// Where the statement's uses of the table's indexes gather; None for the engine's
    /// own reads (index_usage.rs invariant 2).
    pub usage: Option<super::index_usage::StatementUses>,
}

/// A statement's reads of one table, as SET STATISTICS IO reports them.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TableIo {
    /// Scans and seeks begun (SQL Server's scan count: a seek of one whole key counts 0).
    pub scans: u64,
    pub reads: PageReads,
}

/// How a statement reads a table: all of it, the rows of key ranges of its clustered
/// index (`seek::access_for`), ascending and disjoint, in key order as a scan returns them,
/// or the rows a nonclustered index's key ranges name (index_seek.rs), in that index's order.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Access {
    Scan,
    Seek(Vec<KeyRange>),
    IndexSeek(IndexSeek),
}

impl Access {
    /// What a read makes of the access seek.rs chose, given whether it locks key ranges:
    /// key-range locking reads the table, never an index (index_seek.rs invariant 3).
    /// `Chunks::locked` applies it, and SHOWPLAN_TEXT prints what it gives.
    pub(super) fn read_under(self, key_ranges: bool) -> Access {
        match self {
            Access::IndexSeek(_) if key_ranges => Access::Scan,
            a => a,
        }
    }
}

impl TableRef {
    /// Column names and types, as a rowset's header.
    pub fn columns(&self) -> Vec<(String, SqlType)> {
        self.entry
            .columns
            .iter()
            .zip(self.types.iter())
            .map(|(c, t)| (c.name.clone(), *t))
            .collect()
    }

    /// `dbo.name`, as messages name the table.
    pub fn two_part(&self) -> String {
        let name = self.variable.as_deref().unwrap_or(&self.entry.name);
        format!("{}.{name}", self.entry.schema_name)
    }

    /// `db.dbo.name`, as Msg 515 names the table (a table variable by its `@name` alone).
    pub fn three_part(&self) -> String {
        match &self.variable {
            Some(v) => v.to_string(),
            None => format!("{}.{}", self.db_name, self.two_part()),
        }
    }

    /// Columns of the clustered key (0 for a heap).
    pub fn key_width(&self) -> usize {
        match (&self.entry.primary_key, self.entry.index_id) {
            (Some((_, ids)), 1) => ids.len(),
            _ => 0,
        }
    }

    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.entry
            .columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// Calls `each` with every live row `access` reaches and its RID, reading the table a
    /// chunk at a time (`Chunks`), until `each` returns false: what is held is one chunk,
    /// not the table.
    pub fn each_row(
        &self,
        access: Access,
        mut each: impl FnMut(Rid, Vec<Value>) -> Result<bool, Vec<SqlError>>,
    ) -> Result<(), Vec<SqlError>> {
        let mut chunks = Chunks::new(self, access)?;
        while let Some(rows) = chunks.next_chunk()? {
            for (rid, rec) in rows {
                if !each(rid, self.decode(&rec)?)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// `each_row` for UPDATE and DELETE: each row is locked as `locking` says before `each`
    /// sees it; the lock of a row `each` does not keep (returns false for) is let go, and
    /// that of a row it keeps goes to X (`RowLocking::changes`). With `keep_at_most`, the
    /// scan ends once `each` kept that many (SET ROWCOUNT): the rest of the chunk, locked
    /// with it but never shown to `each`, is let go too.
    pub fn each_row_locked(
        &self,
        access: Access,
        locking: &super::locking::RowLocking,
        keep_at_most: Option<u64>,
        mut each: impl FnMut(Rid, Vec<Value>) -> Result<bool, Vec<SqlError>>,
    ) -> Result<(), Vec<SqlError>> {
        // A seek of whole keys locks the keys it changes without their ranges.
        let width = self.key_width();
        let point = matches!(&access, Access::Seek(r) if r.iter().all(|r| r.is_point(width)));
        let mut chunks = Chunks::new(self, access)?.locked(locking);
        let mut kept = 0u64;
        while let Some(rows) = chunks.next_chunk()? {
            for (i, (rid, rec)) in rows.into_iter().enumerate() {
                let full = keep_at_most.is_some_and(|n| kept >= n);
                if !full && each(rid, self.decode(&rec)?)? {
                    locking.changes(rid, &rec, point)?;
                    kept += 1;
                } else {
                    locking.not_needed(rid, &rec, chunks.fresh(i))?;
                }
            }
            if keep_at_most.is_some_and(|n| kept >= n) {
                break;
            }
        }
        assert!(
            keep_at_most.is_none_or(|n| kept <= n),
            "kept past the limit"
        );
        Ok(())
    }

    /// `each_row` for a caller that holds the database already (a statement's write
    /// phase): the same chunks, read through `db`.
    pub fn each_row_in(
        &self,
        db: &mut Database,
        mut each: impl FnMut(Vec<Value>) -> Result<(), Vec<SqlError>>,
    ) -> Result<(), Vec<SqlError>> {
        let mut chunks = Chunks::held(self, db, Access::Scan)?;
        while let Some(rows) = chunks.next_chunk_in(db)? {
            for (_, rec) in rows {
                each(self.decode(&rec)?)?;
            }
        }
        Ok(())
    }

    /// A record's row: its stored columns decoded and, where the table has computed
    /// columns not PERSISTED, theirs computed from them (an arithmetic error is the
    /// reading statement's).
    pub fn decode(&self, rec: &[u8]) -> Result<Vec<Value>, Vec<SqlError>> {
        debug_assert_eq!(*self.layouts, layouts(&self.entry)[..]);
        let cols = record::decode(&self.layouts, rec).map_err(|e| vec![corrupt(&e.to_string())])?;
        let Some(plan) = &self.computed else {
            return cols
                .iter()
                .zip(self.types.iter())
                .map(|(b, t)| rowcodec::decode(*t, *b).map_err(|e| vec![corrupt(&e)]))
                .collect();
        };
        let mut stored = cols.iter();
        let mut row = Vec::with_capacity(self.types.len());
        for (c, t) in self.entry.columns.iter().zip(self.types.iter()) {
            row.push(match is_stored(c) {
                true => {
                    let b = stored
                        .next()
                        .ok_or_else(|| vec![corrupt("a column short")])?;
                    rowcodec::decode(*t, *b).map_err(|e| vec![corrupt(&e)])?
                }
                false => Value::Null,
            });
        }
        plan.compute_virtual(self, &mut row).map_err(|e| vec![e])?;
        Ok(row)
    }

    /// The record of a row whose values already have their column types (its stored
    /// columns': a computed column not PERSISTED is not in the record).
    pub fn encode(&self, values: &[Value]) -> Result<Vec<u8>, Vec<SqlError>> {
        let mut bytes = Vec::with_capacity(values.len());
        for ((v, t), c) in values
            .iter()
            .zip(self.types.iter())
            .zip(&self.entry.columns)
        {
            if is_stored(c) {
                bytes.push(rowcodec::encode(*t, v).map_err(|e| vec![e])?);
            }
        }
        let refs: Vec<Option<&[u8]>> = bytes.iter().map(|b| b.as_deref()).collect();
        record::encode(&self.layouts, &refs).map_err(|e| vec![encode_error(e)])
    }
}

/// Why a row could not be encoded: too long for a page (a statement's error: SQL Server
/// would move its longest variable values off the row, and row-overflow and LOB storage
/// are not built), else a record the formats disagree on (`corrupt`).
fn encode_error(e: extentdb_format::FormatError) -> SqlError {
    match e {
        extentdb_format::FormatError::TooLarge { detail, .. } => super::lower::not_yet(&format!(
            "rows longer than 8,060 bytes in a page (row-overflow and LOB storage; this row's {detail})"
        )),
        e => corrupt(&e.to_string()),
    }
}

/// Stored rows with their RIDs, as a chunk of a scan gives them.
pub(super) type StoredRows = Vec<(Rid, Vec<u8>)>;

/// Bytes of records one chunk of a scan reads with the database held.
const CHUNK_BYTES: usize = 256 << 10;
/// Key ranges one chunk of a seek reads with the database held at most (an IN list's
/// points), so a long list lets other sessions in between.
const CHUNK_RANGES: usize = 256;

/// A table's rows a chunk at a time (storage `scan_chunk`, or `seek_chunk` for each key
/// range of a seek): the database is held for each chunk's read only, so the reader can
/// let go of it between chunks.
pub(super) struct Chunks<'a> {
    t: &'a TableRef,
    origin: ScanOrigin,
    access: Access,
    /// The key range being read (a seek's).
    range: usize,
    at: ScanPosition,
    /// How the rows read are locked (locking.rs); None reads without locks (a system
    /// path, or a caller that locks the table itself).
    locking: Option<&'a super::locking::RowLocking>,
    /// Per row of the last chunk: its lock is this statement's (`ChunkLocks::fresh`).
    fresh: Vec<bool>,
    /// An index seek's read of its index (`Access::IndexSeek`).
    index: Option<IndexRead>,
    /// That index's index_id (sys.indexes).
    index_id: u16,
}

impl<'a> Chunks<'a> {
    pub fn new(t: &'a TableRef, access: Access) -> Result<Chunks<'a>, Vec<SqlError>> {
        Chunks::held(t, &t.db.read().unwrap(), access)
    }

    /// Chunks read through a database the caller holds (`next_chunk_in`).
    pub fn held(
        t: &'a TableRef,
        db: &Database,
        access: Access,
    ) -> Result<Chunks<'a>, Vec<SqlError>> {
        assert!(
            !matches!(access, Access::Seek(_)) || t.entry.index_id == 1,
            "a seek of heap {}",
            t.entry.name
        );
        let map = |e| super::errors::map_data(&e, &t.db_name);
        let origin = db.scan_origin(t.entry.object_id).map_err(map)?;
        let index_id = match &access {
            Access::IndexSeek(s) => db
                .table_by_id(s.index_oid)
                .and_then(|e| e.index_of.as_ref()),
            _ => None,
        }
        .map_or(0, |o| o.index_id);
        let (access, index) = match access {
            // An index dropped since the seek was chosen: the table is scanned instead.
            Access::IndexSeek(s) if db.table_by_id(s.index_oid).is_none() => (Access::Scan, None),
            Access::IndexSeek(s) => {
                let read = IndexRead::new(db, s.clone()).map_err(map)?;
                (Access::IndexSeek(s), Some(read))
            }
            a => (a, None),
        };
        let mut io = t.io.get();
        io.scans += match &access {
            Access::Scan => 1,
            Access::Seek(r) if r.len() == 1 && r[0].is_point(t.key_width()) => 0,
            Access::Seek(r) => r.len() as u64,
            Access::IndexSeek(s) => s.ranges.len() as u64,
        };
        t.io.set(io);
        Ok(Chunks {
            t,
            origin,
            access,
            range: 0,
            at: ScanPosition::Start,
            locking: None,
            fresh: Vec::new(),
            index,
            index_id,
        })
    }

    /// The same chunks with each row locked as `locking` says (locking.rs invariant 1).
    /// Key-range locking reads the table, never an index (index_seek.rs invariant 3).
    /// A statement's own reads come here, their access now final: their index uses are
    /// noted (index_usage.rs invariant 2).
    pub fn locked(mut self, locking: &'a super::locking::RowLocking) -> Chunks<'a> {
        let access = std::mem::replace(&mut self.access, Access::Scan);
        self.access = access.read_under(locking.key_ranges());
        if !matches!(self.access, Access::IndexSeek(_)) {
            self.index = None;
        }
        self.locking = Some(locking);
        self.note_uses();
        self
    }

    /// The read's uses of the table's indexes (index_usage.rs).
    fn note_uses(&self) {
        use super::index_usage::Use;
        let base = u16::from(self.t.entry.index_id);
        match &self.access {
            Access::Scan => self.t.note_uses(&[(base, Use::Scan)]),
            Access::Seek(_) => self.t.note_uses(&[(base, Use::Seek)]),
            Access::IndexSeek(_) => self
                .t
                .note_uses(&[(self.index_id, Use::Seek), (base, Use::Lookup)]),
        }
    }

    /// Moves past key ranges read to their end; false when nothing is left to read.
    fn more(&mut self) -> bool {
        match &self.access {
            Access::Scan => self.at != ScanPosition::End,
            Access::Seek(ranges) => {
                while self.at == ScanPosition::End && self.range < ranges.len() {
                    self.range += 1;
                    self.at = ScanPosition::Start;
                }
                self.range < ranges.len()
            }
            Access::IndexSeek(_) => unreachable!("an index seek reads through its IndexRead"),
        }
    }

    /// The next chunk's records with their RIDs; None past the last. With `locking`, each
    /// row is locked as it is read, under its page's latch (storage's `RowGate`), until one
    /// would wait: the chunk ends before that row, which is waited for with the database
    /// let go and read again; the next call reads on after it. So no row is taken with a
    /// value another session changed since it was read.
    pub fn next_chunk(&mut self) -> Result<Option<StoredRows>, Vec<SqlError>> {
        if let Some(index) = &mut self.index {
            let next = index.next_chunk(self.t, self.origin, self.locking, None)?;
            return Ok(next.map(|(rows, fresh)| {
                self.fresh = fresh;
                rows
            }));
        }
        if !self.more() {
            return Ok(None);
        }
        let t = self.t;
        let Some(l) = self.locking.filter(|l| l.locks_rows()) else {
            // Reads share the database (storage reads pages under their frames' latches).
            let db = t.db.read().unwrap();
            return self.read(&db, None).map(|(rows, _)| Some(rows));
        };
        let mut gate = ChunkGate::new(l, false);
        let (mut rows, refused) = {
            let db = t.db.read().unwrap();
            self.read(&db, Some(&mut gate))?
        };
        if let Some(e) = gate.failure {
            return Err(e);
        }
        if let Some(r) = gate.pending {
            // The chunk ended before the key; it is read again once the lock is had.
            l.wait_key_range(r)?;
        }
        if let Some(row) = refused {
            self.wait_and_resume(l, row, &mut rows, &mut gate.locks)?;
        }
        self.fresh = gate.locks.fresh;
        Ok(Some(rows))
    }

    /// Whether the lock of row `i` of the last chunk is this statement's.
    pub fn fresh(&self, i: usize) -> bool {
        self.fresh.get(i).copied().unwrap_or(false)
    }

    /// The row whose lock must wait (`refused`, which ended the chunk): the scan resumes
    /// after it, the lock is waited for with no database held, and the row is read again as
    /// it is now (gone if its change rolled back an insert or committed a delete); READPAST
    /// skips it.
    fn wait_and_resume(
        &mut self,
        l: &super::locking::RowLocking,
        (rid, rec): StoredRow,
        rows: &mut StoredRows,
        locks: &mut super::locking::ChunkLocks,
    ) -> Result<(), Vec<SqlError>> {
        let past = match self.t.entry.index_id {
            1 => ScanPosition::AfterRecord(rec.clone()),
            _ => ScanPosition::AfterHeapRow(rid),
        };
        if l.key_ranges() {
            // Read again from before the row (`read` left the position there), so a key
            // put in the range while this one was waited for is seen (locking.rs
            // invariant 5); READPAST goes on after it.
            if l.wait_row(rid, &rec, locks.point)?.is_none() {
                self.at = past;
            }
            return Ok(());
        }
        self.at = past;
        let Some(fresh) = l.wait_row(rid, &rec, false)? else {
            return Ok(());
        };
        let t = self.t;
        let now =
            t.db.read()
                .unwrap()
                .current_row(t.entry.object_id, rid, &rec)
                .map_err(|e| super::errors::map_data(&e, &t.db_name))?;
        l.read_done(rid, &rec, fresh, now.is_none())?;
        if let Some(row) = now {
            rows.push(row);
            locks.fresh.push(fresh);
        }
        Ok(())
    }

    /// `next_chunk` through a database the caller holds (no row locks: the caller holds
    /// the database for its whole statement).
    pub fn next_chunk_in(&mut self, db: &Database) -> Result<Option<StoredRows>, Vec<SqlError>> {
        assert!(self.locking.is_none(), "locked reads let the database go");
        if let Some(index) = &mut self.index {
            let next = index.next_chunk(self.t, self.origin, None, Some(db))?;
            return Ok(next.map(|(rows, _)| rows));
        }
        if !self.more() {
            return Ok(None);
        }
        self.read(db, None).map(|(rows, _)| Some(rows))
    }

    /// One chunk: a scan reads one chunk per call; a seek goes on through its ranges while
    /// the chunk has room. Each row passes `gate`; the row it refuses ends the chunk and
    /// is returned apart, the position left before it (the caller's to move on:
    /// `wait_and_resume`). A key range the gate refuses ends the chunk before its key.
    fn read(
        &mut self,
        db: &Database,
        mut gate: Option<&mut ChunkGate<'_>>,
    ) -> Result<(StoredRows, Option<StoredRow>), Vec<SqlError>> {
        let t = self.t;
        let oid = t.entry.object_id;
        let mut rows: StoredRows = Vec::new();
        let mut bytes = 0;
        let mut reads = PageReads::default();
        let (mut calls, first) = (0usize, self.range);
        let mut refused = None;
        while bytes < CHUNK_BYTES && self.range - first < CHUNK_RANGES && self.more() {
            if let (Some(g), Access::Seek(r)) = (gate.as_deref_mut(), &self.access) {
                g.locks.point = r[self.range].is_point(t.key_width());
            }
            let g = gate.as_deref_mut().map(|g| g as &mut dyn Gate);
            let chunk = match &self.access {
                Access::Scan if calls > 0 => break,
                Access::Scan => db.scan_chunk(oid, self.origin, &self.at, CHUNK_BYTES, g),
                Access::Seek(r) => {
                    let max = CHUNK_BYTES - bytes;
                    db.seek_chunk(oid, self.origin, (&r[self.range], &self.at), max, g)
                }
                Access::IndexSeek(_) => unreachable!("an index seek reads through its IndexRead"),
            }
            .map_err(|e| super::errors::map_data(&e, &t.db_name))?;
            calls += 1;
            bytes += chunk.rows.iter().map(|(_, r)| r.len()).sum::<usize>();
            reads.add(chunk.reads);
            let before = match chunk.rows.last() {
                Some((_, r)) => ScanPosition::AfterRecord(r.clone()),
                None => self.at.clone(),
            };
            rows.extend(chunk.rows);
            if chunk.refused.is_some() {
                (refused, self.at) = (chunk.refused, before);
                break;
            }
            self.at = chunk.next;
            if gate
                .as_ref()
                .is_some_and(|g| g.pending.is_some() || g.failure.is_some())
            {
                break;
            }
        }
        let mut io = t.io.get();
        io.reads.add(reads);
        t.io.set(io);
        Ok((rows, refused))
    }
}

/// A locked read's gate (storage's `Gate`): each row locked as `RowLocking::try_row` says,
/// and under key-range locking (locking.rs invariant 5) the keys that bound the ranges
/// read; what could not be locked without a wait is kept for the caller to wait for.
pub(super) struct ChunkGate<'l> {
    l: &'l super::locking::RowLocking,
    locks: super::locking::ChunkLocks,
    failure: Option<Vec<SqlError>>,
    /// A key range refused: waited for once the database is let go, then read again.
    pending: Option<Resource>,
}

/// A gate's outcome: the locks it took, the error that stopped it, the range to wait for.
pub(super) type GateParts = (
    super::locking::ChunkLocks,
    Option<Vec<SqlError>>,
    Option<Resource>,
);

impl<'l> ChunkGate<'l> {
    /// A gate locking rows as `l` says; `point`: it reads one whole key.
    pub fn new(l: &'l super::locking::RowLocking, point: bool) -> ChunkGate<'l> {
        let locks = super::locking::ChunkLocks {
            point,
            ..Default::default()
        };
        ChunkGate {
            l,
            locks,
            failure: None,
            pending: None,
        }
    }

    pub fn into_parts(self) -> GateParts {
        (self.locks, self.failure, self.pending)
    }
}

impl Gate for ChunkGate<'_> {
    fn row(&mut self, rid: Rid, rec: &[u8]) -> bool {
        match self.l.try_row(rid, rec, &mut self.locks) {
            Ok(taken) => taken,
            Err(e) => {
                self.failure = Some(e);
                false
            }
        }
    }

    fn key_ranges(&self) -> bool {
        self.l.key_ranges()
    }

    /// A locked read waits for a ghost's deleter like for a row's writer (locking.rs
    /// invariant 6).
    fn ghosts(&self) -> bool {
        self.l.locks_rows()
    }

    fn key_range(&mut self, next: Option<(Rid, &[u8])>) -> bool {
        let got = self.l.try_key_range(next);
        super::locking::range_answer(got, &mut self.pending, &mut self.failure)
    }
}

/// An object name given as text (`'dbo.T'`, `N'[D].[dbo].[T]'`), as OBJECT_ID and the
/// system procedures read it.
pub(super) fn object_name_from_text(text: &str) -> ObjectName {
    let mut parts: Vec<String> = text
        .split('.')
        .map(|p| p.trim_matches(['[', ']']).to_string())
        .collect();
    // A name in a string never means a table variable (OBJECT_ID('@t') is NULL in SQL
    // Server): an empty schema part keeps `@t` a table name (table_variables.rs).
    if parts.len() == 1 && parts[0].starts_with('@') {
        parts.insert(0, String::new());
    }
    ObjectName { parts }
}

/// A stored row that does not decode (the data is damaged or the formats disagree):
/// SQL Server's Msg 5243, reference 4 (a record's structure), as its record-cracking code
/// gives it; `reason` goes to the ERRORLOG with it.
pub(super) fn corrupt(reason: &str) -> SqlError {
    let e = msg(5243, &[&4]);
    SqlError {
        text: format!("{} ({reason})", e.text),
        ..e
    }
}

/// A catalog entry as a statement uses it: shared, with its columns' SQL types.
fn resolve(t: &TableEntry, db_name: &str) -> Result<super::table_cache::Resolved, Vec<SqlError>> {
    let types: Vec<SqlType> = t
        .columns
        .iter()
        .map(column_type)
        .collect::<Result<_, _>>()
        .map_err(|e| vec![e])?;
    let computed = super::computed_columns::ComputedPlan::of(t, &types)?.map(Arc::new);
    Ok(super::table_cache::Resolved {
        entry: Arc::new(t.clone()),
        types: types.into(),
        layouts: layouts(t).into(),
        computed,
        db_name: db_name.into(),
    })
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
    ) -> Result<(u16, Arc<SharedDatabase>), Vec<SqlError>> {
        if let Some(temporary) = self.tempdb_target(name) {
            return self.object_database_named(&temporary);
        }
        self.object_database_named(name)
    }

    /// `object_database` of a name that is not a temporary table's.
    fn object_database_named(
        &self,
        name: &ObjectName,
    ) -> Result<(u16, Arc<SharedDatabase>), Vec<SqlError>> {
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
    pub(super) fn current_database(&self) -> Result<(u16, Arc<SharedDatabase>), Vec<SqlError>> {
        self.engine
            .instance
            .database(self.database_id)
            .map(|db| (self.database_id, db))
            .ok_or_else(|| vec![msg(911, &[&self.current_db_name()])])
    }

    /// The user table `name` names, if it exists: as this session resolved it before
    /// under the same catalog state (`table_cache.rs`), else from the catalog.
    pub(super) fn find_table(&self, name: &ObjectName) -> Result<Option<TableRef>, Vec<SqlError>> {
        // A #name or @name is the session's table in tempdb (temp_tables.rs invariant 1,
        // table_variables.rs invariant 1).
        let temporary = self.tempdb_target(name);
        let variable = super::table_variables::is_table_variable_name(name)
            .then(|| Arc::<str>::from(name.name()));
        let name = temporary.as_ref().unwrap_or(name);
        let (db_id, db) = self.object_database(name)?;
        let schema = name.qualifier().filter(|s| !s.is_empty()).unwrap_or("dbo");
        let resolved = {
            let g = db.read().unwrap();
            let version = g.catalog_version();
            let kept = self
                .tables
                .borrow()
                .get(db_id, schema, name.name(), version)
                .cloned();
            match kept {
                Some(r) => r,
                None => {
                    let Some(t) = g.table(schema, name.name()) else {
                        return Ok(None);
                    };
                    let r = resolve(t, &g.name)?;
                    let mut tables = self.tables.borrow_mut();
                    tables.keep(db_id, schema, name.name(), version, r.clone());
                    r
                }
            }
        };
        // A table this session's transaction dropped is gone for it (storage's ddl.rs);
        // other sessions find it and wait for that transaction's Sch-M lock.
        let own = self.xacts.get(&db_id).copied();
        if resolved
            .entry
            .pending_ddl
            .is_some_and(|p| p.dropped && Some(p.xact) == own)
        {
            return Ok(None);
        }
        Ok(Some(TableRef {
            db_id,
            db,
            db_name: resolved.db_name,
            entry: resolved.entry,
            types: resolved.types,
            layouts: resolved.layouts,
            computed: resolved.computed,
            io: Cell::new(TableIo::default()),
            variable,
            usage: self.uses_for_resolved(),
        }))
    }

    /// The user table `name` names, or Msg 208.
    pub(super) fn table(&self, name: &ObjectName) -> Result<TableRef, Vec<SqlError>> {
        self.find_table(name)?.ok_or_else(|| {
            if super::table_variables::is_table_variable_name(name) {
                return vec![msg(1087, &[&name.name()])];
            }
            vec![msg(208, &[&name.joined()])]
        })
    }
}

/// A RID as a spool keeps it: file, page and slot in one bigint's 64 bits.
pub(super) fn rid_value(rid: Rid) -> Value {
    let bits = (u64::from(rid.0.file.0) << 48) | (u64::from(rid.0.page.0) << 16) | u64::from(rid.1);
    Value::BigInt(bits as i64)
}

pub(super) fn rid_of(v: &Value) -> Rid {
    let Value::BigInt(bits) = v else {
        unreachable!("a spooled row starts with its RID");
    };
    let bits = *bits as u64;
    (
        extentdb_format::ids::PageId::new((bits >> 48) as u16, (bits >> 16) as u32),
        bits as u16,
    )
}
