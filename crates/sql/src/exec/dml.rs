//! INSERT, UPDATE and DELETE on user tables.
//!
//! Each statement works in two phases, as SQL Server's do: first every new or changed row
//! is computed (expressions evaluated, values converted to the column types, NOT NULL
//! checked) with the database unlocked, since evaluation may itself need the database;
//! then, inside the session's transaction (see `xact`), the identity values are taken and
//! the rows are written. A clustered key and every unique index (a heap's PRIMARY KEY
//! included) refuse a taken key as each row goes in (storage's `DuplicateKey`, Msg 2627 /
//! 2601). A failure anywhere leaves the table as it was.
//!
//! Memory does not grow with the table or the statement: INSERT ... SELECT, UPDATE and
//! DELETE hold their rows in spools (`SortSpill::fifo`, spilled to work files in tempdb's
//! directory past `SORT_MEMORY_BYTES`) and write them `SPOOL_WINDOW` rows at a time, all
//! in the statement's one transaction; UPDATE and DELETE first find every row they change
//! (a chunked scan into a spool) before changing any, so none is met twice (the Halloween
//! problem). Only a heap's PRIMARY KEY from a catalog older than catalog invariant 11
//! has no index: its keys are checked against the stored rows through a spilling sort
//! (`unique::KeyCheck`, `self_checked_key`).
//!
//! The OUTPUT clause is `dml_output.rs`'s: each write phase pushes the rows it changed
//! into the spool it is given, as they are written.
//!
//! UPDATE ... FROM and DELETE ... FROM find their rows in `dml_from.rs` and write them
//! through the same write phases (`write_updates`, `write_deletes`).
//!
//! INSERT ... EXEC captures the EXEC's result sets into a spool first (`exec_rows`), then
//! inserts them as INSERT ... SELECT does; the EXEC may only read.

use std::path::PathBuf;

use extentdb_storage::access::{Held, Needs, RowGate, Step};
use extentdb_storage::log_growth::GrowthEnv;
use extentdb_storage::table::Rid;
use extentdb_storage::Database;

use super::dml_output::Changed;
use super::errors;
use super::eval::{as_i64, RowCtx};
use super::locking::{RowLocking, WriteLock, Writer};
use super::lower::not_yet;
use super::spill::{SortSpill, SortedRows};
use super::stream::SORT_MEMORY_BYTES;
use super::tables::{rid_of, rid_value, Access, TableRef};
use super::unique::KeyCheck;
use super::{Out, Session};
use crate::ast::{AssignTarget, Delete, Expr, Insert, InsertSource, Top, Update};
use crate::convert::{convert, data_type_name};
use crate::messages::{msg, SqlError};
use crate::ops;
use crate::parser::parse_batch;
use crate::rowcodec;
use crate::types::{SqlType, Value};

/// Runtime errors of a data modification, which SQL Server follows with "The statement has
/// been terminated."; compile-time ones (207, 213, 544 ...) are not.
pub(super) fn terminated(e: SqlError) -> Vec<SqlError> {
    let runtime = matches!(
        e.number,
        515 | 547 | 2627 | 2628 | 8152 | 8115 | 220 | 232 | 8134 | 242 | 517 | 8114 | 8672
    );
    if runtime {
        vec![e, msg(3621, &[])]
    } else {
        vec![e]
    }
}

/// The key of a row under a PRIMARY KEY's column positions, as Msg 2627 prints it.
fn key_text(values: &[Value]) -> String {
    let parts: Vec<String> = values
        .iter()
        .map(|v| {
            if v.is_null() {
                "<NULL>".into()
            } else {
                super::eval::to_text(v)
            }
        })
        .collect();
    format!("({})", parts.join(", "))
}

/// PRIMARY KEY positions of a table, with the constraint name.
pub(super) fn key_columns(t: &TableRef) -> Option<(String, Vec<usize>)> {
    let (name, ids) = t.entry.primary_key.as_ref()?;
    let pos = ids
        .iter()
        .filter_map(|id| t.entry.columns.iter().position(|c| c.column_id == *id))
        .collect();
    Some((name.clone(), pos))
}

/// The PRIMARY KEY whose new keys a statement checks itself (`KeyCheck`, Msg 2627): only
/// a heap's from a catalog written before a heap's PRIMARY KEY had its own unique index.
/// A clustered key is checked by its B-tree as each row goes in (btree.rs invariant 2,
/// storage's `DuplicateKey`), and a heap's PRIMARY KEY NONCLUSTERED made since is a unique
/// index, which does the same (catalog invariant 11): None for both.
/// `db` is `t`'s database as its caller holds it, or None to read it here.
fn self_checked_key(t: &TableRef, db: Option<&Database>) -> Option<(String, Vec<usize>)> {
    let key = key_columns(t)?;
    if t.entry.index_id != 0 {
        return None;
    }
    let guard;
    let db = match db {
        Some(d) => d,
        None => {
            guard = t.db.read().unwrap();
            &*guard
        }
    };
    let mut indexes = db.indexes_of(t.entry.object_id);
    (!indexes.any(|ix| ix.enforces_primary_key_of(&t.entry))).then_some(key)
}

/// Msg 2627 for a duplicate of primary key `constraint` whose values are `key`.
fn duplicate_key(t: &TableRef, constraint: &str, key: &[Value]) -> Vec<SqlError> {
    terminated(msg(
        2627,
        &[&"PRIMARY KEY", &constraint, &t.two_part(), &key_text(key)],
    ))
}

/// Fails with Msg 2627 when `check` finds a duplicate key.
fn check_keys(t: &TableRef, name: &str, check: KeyCheck) -> Result<(), Vec<SqlError>> {
    match check.finish().map_err(terminated)? {
        Some(key) => Err(duplicate_key(t, name, &key)),
        None => Ok(()),
    }
}

/// The record of a row about to be written; its errors end the statement.
pub(super) fn record(t: &TableRef, values: &[Value]) -> Result<Vec<u8>, Vec<SqlError>> {
    t.encode(values)
        .map_err(|e| e.into_iter().flat_map(terminated).collect())
}

/// An identity value as the column's type (Msg 8115 when it does not fit).
fn identity_value(t: SqlType, v: i64) -> Result<Value, SqlError> {
    convert(&Value::BigInt(v), t, None).map_err(|_| msg(8115, &[&"IDENTITY", &data_type_name(t)]))
}

/// One row to insert: its values, and the identity column to fill if it was not given.
pub(super) struct NewRow {
    values: Vec<Value>,
    generate_identity: Option<usize>,
}

impl NewRow {
    /// The row as a spool keeps it: its values, then the identity column to fill or NULL.
    pub(super) fn spooled(self) -> Vec<Value> {
        let mut v = self.values;
        v.push(
            self.generate_identity
                .map_or(Value::Null, |i| Value::Int(i as i32)),
        );
        v
    }

    fn from_spooled(mut v: Vec<Value>) -> NewRow {
        let generate_identity = match v.pop() {
            Some(Value::Int(i)) => Some(i as usize),
            _ => None,
        };
        NewRow {
            values: v,
            generate_identity,
        }
    }
}

impl Session {
    /// How many of `rows` an INSERT, UPDATE or DELETE changes: its TOP's, else SET
    /// ROWCOUNT's (SQL Server ignores SET ROWCOUNT for a statement with TOP), else all.
    pub(super) fn top_count(
        &mut self,
        top: &Option<Top>,
        rows: usize,
    ) -> Result<usize, Vec<SqlError>> {
        let Some(top) = top else {
            let cap = self.rowcount_cap().unwrap_or(u64::MAX);
            return Ok(rows.min(usize::try_from(cap).unwrap_or(usize::MAX)));
        };
        let n = as_i64(&self.eval(&top.count, None).map_err(|e| vec![e])?)
            .map_err(|e| vec![e])?
            .max(0) as usize;
        Ok(if top.percent {
            (rows * n).div_ceil(100)
        } else {
            n
        })
    }

    /// A column's DEFAULT, evaluated from its stored text.
    pub(super) fn default_value(&mut self, t: &TableRef, col: usize) -> Result<Value, SqlError> {
        let c = &t.entry.columns[col];
        if c.default_sql.is_empty() {
            return Ok(Value::Null);
        }
        let parsed = parse_batch(&format!("SELECT {}", c.default_sql)).map_err(|e| SqlError {
            number: e.number,
            severity: e.severity,
            state: e.state,
            text: e.text,
            line: 0,
            procedure: None,
        })?;
        let expr = match parsed.first().map(|s| &s.kind) {
            Some(crate::ast::StatementKind::Select(q)) => match &q.body {
                crate::ast::QueryBody::Select(s) => match s.items.first() {
                    Some(crate::ast::SelectItem::Expr { expr, .. }) => expr.clone(),
                    _ => return Ok(Value::Null),
                },
                _ => return Ok(Value::Null),
            },
            _ => return Ok(Value::Null),
        };
        let v = self.eval(&expr, None)?;
        rowcodec::assign(t.types[col], &v, &t.three_part(), &c.name)
    }

    /// The columns an INSERT (or an OUTPUT ... INTO) gives values for, by position: those
    /// of its column list, else every column but the identity; none for DEFAULT VALUES.
    pub(super) fn insert_targets(
        &self,
        columns: &[String],
        default_values: bool,
        t: &TableRef,
    ) -> Result<Vec<usize>, Vec<SqlError>> {
        let identity = t.entry.columns.iter().position(|c| c.identity.is_some());
        let identity_insert = self.identity_insert == Some((t.db_id, t.entry.object_id));
        if default_values {
            return Ok(Vec::new());
        }
        if columns.is_empty() {
            if identity.is_some() && identity_insert {
                return Err(vec![msg(8101, &[&t.entry.name])]);
            }
            // A computed column takes no value (computed_columns.rs invariant 2).
            return Ok((0..t.entry.columns.len())
                .filter(|i| Some(*i) != identity && t.entry.columns[*i].computed.is_none())
                .collect());
        }
        let mut targets = Vec::with_capacity(columns.len());
        for name in columns {
            let i = t
                .column_index(name)
                .ok_or_else(|| vec![msg(207, &[name])])?;
            if targets.contains(&i) {
                return Err(vec![msg(264, &[&t.entry.columns[i].name])]);
            }
            super::computed_columns::refuse_target(&t.entry.columns[i])?;
            targets.push(i);
        }
        if let Some(id) = identity {
            if targets.contains(&id) && !identity_insert {
                return Err(vec![msg(544, &[&t.entry.name])]);
            }
            if !targets.contains(&id) && identity_insert {
                return Err(vec![msg(545, &[&t.entry.name])]);
            }
        }
        Ok(targets)
    }

    /// The source rows of an INSERT, one value per target (None for DEFAULT).
    fn insert_source(
        &mut self,
        ins: &Insert,
        targets: &[usize],
    ) -> Result<Vec<Vec<Option<Value>>>, Vec<SqlError>> {
        match &ins.source {
            InsertSource::DefaultValues => Ok(vec![Vec::new()]),
            InsertSource::Execute(_) => Err(vec![not_yet("INSERT ... EXEC")]),
            InsertSource::Values(rows) => {
                values_fit(ins, rows, targets)?;
                let mut out = Vec::with_capacity(rows.len());
                for r in rows {
                    let mut values = Vec::with_capacity(r.len());
                    for e in r {
                        values.push(match e {
                            Expr::Default => None,
                            e => Some(self.eval(e, None).map_err(terminated)?),
                        });
                    }
                    out.push(values);
                }
                Ok(out)
            }
            InsertSource::Query(q) => {
                let (columns, rows) = self.query_result(q)?;
                if columns.len() != targets.len() {
                    return Err(vec![msg(213, &[])]);
                }
                Ok(rows
                    .into_iter()
                    .map(|r| r.into_iter().map(Some).collect())
                    .collect())
            }
        }
    }

    pub(super) fn insert(&mut self, ins: &Insert, out: &mut Out) -> Result<(), Vec<SqlError>> {
        let (t, locking) = self.write_target(&ins.table, Writer::Insert, &ins.hints)?;
        let default_values = matches!(ins.source, InsertSource::DefaultValues);
        let targets = self.insert_targets(&ins.columns, default_values, &t)?;
        let plan = self.output_plan(ins.output.as_ref(), &t, Changed::Inserted)?;
        self.dml_with_output(plan, out, |s, output, out| {
            s.insert_checking_self_references(&t, |s| {
                s.insert_values(ins, (&t, &locking), &targets, output, out)
            })
        })
    }

    /// INSERT's rows computed and written (pushed into `output` as they go in); returns
    /// how many.
    fn insert_values(
        &mut self,
        ins: &Insert,
        (t, locking): (&TableRef, &RowLocking),
        targets: &[usize],
        output: Option<&mut SortSpill>,
        out: &mut Out,
    ) -> Result<u64, Vec<SqlError>> {
        let identity = t.entry.columns.iter().position(|c| c.identity.is_some());
        let (rows, more, count) = match &ins.source {
            InsertSource::Query(q) => {
                let (spool, count) = self.spooled_insert_rows(ins, q, t, targets, identity)?;
                (Vec::new(), Some(spool), count)
            }
            InsertSource::Execute(e) => {
                let source = self.exec_rows(e, targets.len(), out)?;
                let n = self.top_count(&ins.top, source.rows)?;
                let source = source.spool.finish().map_err(|e| vec![e])?;
                let (now, locking) = self.exec_target(ins, t)?;
                let (spool, count) = self.converted_rows(source, n, &now, targets, identity)?;
                let lock = WriteLock::Held(&locking);
                self.insert_rows(&now, (Vec::new(), Some(spool), output), lock)?;
                return Ok(count);
            }
            _ => {
                let mut source = self.insert_source(ins, targets)?;
                let n = self.top_count(&ins.top, source.len())?;
                source.truncate(n);
                let mut rows = Vec::with_capacity(source.len());
                for src in source {
                    rows.push(self.new_row(t, targets, src, identity)?);
                }
                let count = rows.len() as u64;
                (rows, None, count)
            }
        };
        self.insert_rows(t, (rows, more, output), WriteLock::Held(locking))?;
        Ok(count)
    }

    /// INSERT ... EXEC's table once its source ran: the source's statements let the table
    /// lock go outside a transaction, so the table is resolved again under it
    /// (`write_target`, check_constraints.rs invariant 5) and the rows are made and checked
    /// against what it is now. A change of its columns, or of whether a FOREIGN KEY of it
    /// refers to itself (which decides how the statement checks its rows), is refused
    /// (40517: run it again).
    fn exec_target(
        &mut self,
        ins: &Insert,
        before: &TableRef,
    ) -> Result<(TableRef, RowLocking), Vec<SqlError>> {
        let (now, locking) = self.write_target(&ins.table, Writer::Insert, &ins.hints)?;
        let refers_to_itself = |t: &TableRef| {
            let id = t.entry.object_id;
            (t.entry.foreign_keys.iter()).any(|k| !k.is_disabled && k.referenced_object_id == id)
        };
        let same = now.entry.object_id == before.entry.object_id
            && now.entry.columns == before.entry.columns
            && refers_to_itself(&now) == refers_to_itself(before);
        match same {
            true => Ok((now, locking)),
            false => Err(vec![not_yet(
                "a table changed by another session while INSERT ... EXEC's source ran \
                 (run it again)",
            )]),
        }
    }

    /// Writes the rows of an INSERT (those in `rows`, then those `more` spools) into `t`
    /// in the statement's transaction, each pushed into `output` once it is in the table;
    /// the caller reports how many.
    pub(super) fn insert_rows(
        &mut self,
        t: &TableRef,
        (rows, more, output): (Vec<NewRow>, Option<SortedRows>, Option<&mut SortSpill>),
        lock: WriteLock<'_>,
    ) -> Result<(), Vec<SqlError>> {
        let taken;
        let locking = match lock {
            WriteLock::Held(l) => l,
            WriteLock::Take(hints) => {
                taken = self.row_locking(t, true, hints)?;
                taken.table_intent()?;
                if !self.checks_unchanged(t) {
                    // Resolved before this lock: only a caller that held none gets here.
                    return Err(vec![not_yet(
                        "CHECK or FOREIGN KEY constraints changed by another session \
                         between a statement's start and its first write (run it again)",
                    )]);
                }
                &taken
            }
        };
        self.note_update(t, None);
        if t.entry.index_id == 1 {
            // Keys another open transaction deleted are waited for now, not with the
            // database held (a key from an identity or a spool is new: never held).
            for r in rows.iter().filter(|r| r.generate_identity.is_none()) {
                locking.lock_new_key(&t.encode(&r.values)?)?;
            }
        }
        let env = self.growth_env();
        let range_wait = std::cell::Cell::new(None);
        let mut p = InsertProgress {
            rows,
            numbered: 0,
            inserted: 0,
            more,
            prenumbered: false,
            keys_checked: false,
            spill_dir: self.spill_dir(),
            last: None,
            output,
        };
        let step = |db: Held<'_>, x| write_inserts(db, x, (t, locking, &range_wait), &env, &mut p);
        // A key range another transaction locked: waited for, then the rows go on.
        let wait = || match range_wait.take() {
            Some(r) => locking.wait_insert_range(r).map(|()| true),
            None => Ok(false),
        };
        self.write_in_xact_waiting(t, step, wait)?;
        if p.last.is_some() {
            self.last_identity = p.last;
        }
        Ok(())
    }

    /// SELECT ... INTO's rows into the table it made: each of `rows` converted to the
    /// new table's columns (spooled), then written as INSERT writes.
    pub(super) fn insert_query_rows(
        &mut self,
        t: &TableRef,
        rows: &super::subquery::Rows,
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        let one = |e| vec![e];
        let targets: Vec<usize> = (0..t.entry.columns.len()).collect();
        let mut spool = SortSpill::fifo(&self.spill_dir(), SORT_MEMORY_BYTES);
        let mut count = 0u64;
        for r in rows.spool.rows() {
            let src = r.map_err(one)?.into_iter().map(Some).collect();
            let row = self.new_row(t, &targets, src, None)?;
            spool.push(row.spooled()).map_err(one)?;
            count += 1;
        }
        let more = Some(spool.finish().map_err(one)?);
        self.insert_rows(t, (Vec::new(), more, None), WriteLock::Take(&[]))?;
        self.rows_affected(count, out);
        Ok(())
    }

    /// INSERT ... SELECT's rows through two spools, so neither the query's result nor the
    /// rows to insert are held whole: the query's rows (streamed where the query streams)
    /// go to the first, all of them before anything is written (the statement never reads
    /// its own rows); each converted (defaults, NOT NULL, TOP) goes to the second, which
    /// the write phase reads a window at a time. Returns it and how many rows it holds.
    fn spooled_insert_rows(
        &mut self,
        ins: &Insert,
        q: &crate::ast::Query,
        t: &TableRef,
        targets: &[usize],
        identity: Option<usize>,
    ) -> Result<(SortedRows, u64), Vec<SqlError>> {
        let one = |e| vec![e];
        let dir = self.spill_dir();
        let mut capture = Capture {
            spool: SortSpill::fifo(&dir, SORT_MEMORY_BYTES),
            width: None,
            rows: 0,
            failed: None,
        };
        // The query's own result is capped by SET ROWCOUNT only when the INSERT has no TOP
        // (with TOP, SQL Server ignores SET ROWCOUNT); `top_count` caps what is inserted.
        let streamed = self.with_ctes(q, |s| {
            Ok(match ins.top {
                Some(_) => {
                    s.without_rowcount(|s| s.select_streamed(q, &mut Out::new(&mut capture)))
                }
                None => s.select_streamed(q, &mut Out::new(&mut capture)),
            })
        })?;
        match streamed {
            Some(done) => done?,
            None => {
                let (columns, rows) = self.query_result(q)?;
                capture.width = Some(columns.len());
                rows.into_iter().for_each(|r| capture.take(r));
            }
        }
        if let Some(e) = capture.failed {
            return Err(vec![e]);
        }
        if capture.width.is_some_and(|w| w != targets.len()) {
            return Err(vec![msg(213, &[])]);
        }
        let n = self.top_count(&ins.top, capture.rows)?;
        let source = capture.spool.finish().map_err(one)?;
        self.converted_rows(source, n, t, targets, identity)
    }

    /// The first `n` rows of `source`, each converted to a row of `t` (defaults, NOT NULL),
    /// into a spool the write phase reads a window at a time; and how many.
    fn converted_rows(
        &mut self,
        source: SortedRows,
        n: usize,
        t: &TableRef,
        targets: &[usize],
        identity: Option<usize>,
    ) -> Result<(SortedRows, u64), Vec<SqlError>> {
        let one = |e| vec![e];
        let mut spool = SortSpill::fifo(&self.spill_dir(), SORT_MEMORY_BYTES);
        let mut count = 0u64;
        for r in source.take(n) {
            let src = r.map_err(one)?.into_iter().map(Some).collect();
            let row = self.new_row(t, targets, src, identity)?;
            spool.push(row.spooled()).map_err(one)?;
            count += 1;
        }
        Ok((spool.finish().map_err(one)?, count))
    }

    /// INSERT ... EXEC's source: the EXEC run with its result sets captured into a spool
    /// (each must have `width` columns, else 213), its messages and row counts passed on to
    /// `out`, and its errors made the INSERT's (which then inserts nothing). It may only read (`reads_only` in mod.rs):
    /// its rows are inserted after it ended, so a change it made could not go with the
    /// INSERT's failure. Nested, 8164.
    fn exec_rows(
        &mut self,
        e: &crate::ast::Execute,
        width: usize,
        out: &mut Out,
    ) -> Result<Capture, Vec<SqlError>> {
        if self.in_insert_exec {
            return Err(vec![msg(8164, &[])]);
        }
        let mut capture = Capture {
            spool: SortSpill::fifo(&self.spill_dir(), SORT_MEMORY_BYTES),
            width: None,
            rows: 0,
            failed: None,
        };
        let mut sink = ExecCapture {
            capture: &mut capture,
            width,
            passed: Vec::new(),
            errors: Vec::new(),
        };
        self.in_insert_exec = true;
        let ran = self.execute_proc(e, &mut Out::new(&mut sink));
        self.in_insert_exec = false;
        let (passed, errors) = (
            std::mem::take(&mut sink.passed),
            std::mem::take(&mut sink.errors),
        );
        passed.into_iter().for_each(|o| out.push(o));
        ran?;
        // An error inside the EXEC fails the INSERT: none of its rows go in.
        if !errors.is_empty() {
            return Err(errors);
        }
        match capture.failed.take() {
            Some(e) => Err(vec![e]),
            None => Ok(capture),
        }
    }

    /// One row to insert: given values converted, defaults filled, NOT NULL checked.
    pub(super) fn new_row(
        &mut self,
        t: &TableRef,
        targets: &[usize],
        src: Vec<Option<Value>>,
        identity: Option<usize>,
    ) -> Result<NewRow, Vec<SqlError>> {
        let width = t.entry.columns.len();
        let mut values = vec![Value::Null; width];
        let mut given = vec![false; width];
        for (&col, v) in targets.iter().zip(src) {
            let c = &t.entry.columns[col];
            if let Some(v) = v {
                values[col] = rowcodec::assign(t.types[col], &v, &t.three_part(), &c.name)
                    .map_err(terminated)?;
                given[col] = true;
            }
        }
        let generate_identity = identity.filter(|&i| !given[i]);
        for col in 0..width {
            // Computed after the others are in place (computed_columns.rs invariant 1).
            if t.entry.columns[col].computed.is_some() {
                continue;
            }
            if !given[col] && Some(col) != generate_identity {
                values[col] = self.default_value(t, col).map_err(terminated)?;
            }
            let c = &t.entry.columns[col];
            if values[col].is_null() && !c.is_nullable && Some(col) != generate_identity {
                return Err(terminated(msg(515, &[&c.name, &t.three_part(), &"INSERT"])));
            }
        }
        self.compute_columns(t, &mut values, None, "INSERT")?;
        // An identity value is generated later: CHECK refuses identity columns
        // (check_constraints.rs invariant 2), so none of its constraints reads it.
        self.check_row(t, &values, "INSERT", None)?;
        Ok(NewRow {
            values,
            generate_identity,
        })
    }

    pub(super) fn update(&mut self, u: &Update, out: &mut Out) -> Result<(), Vec<SqlError>> {
        super::select::refuse_unbuilt_hints(&u.options)?;
        if !u.from.is_empty() {
            return self.update_from(u, out);
        }
        let (t, locking) = self.write_target(&u.table, Writer::Update, &u.hints)?;
        let targets = update_targets(u, &t)?;
        let plan = self.output_plan(u.output.as_ref(), &t, Changed::Both)?;
        self.dml_with_output(plan, out, |s, output, out| {
            s.update_rows(u, (&t, &locking), &targets, output, out)
        })
    }

    /// UPDATE's rows found, checked and changed (each pushed into `output` as changed:
    /// its old values, then its new); returns how many.
    fn update_rows(
        &mut self,
        u: &Update,
        (t, locking): (&TableRef, &RowLocking),
        targets: &[Option<usize>],
        output: Option<&mut SortSpill>,
        out: &mut Out,
    ) -> Result<u64, Vec<SqlError>> {
        let access = self.update_access(u, t, targets);
        let stop = self.rowcount_stop(&u.top);
        let (mut matched, found) =
            self.matching(t, u.where_clause.as_ref(), (access, stop), locking)?;
        let limit = self.top_count(&u.top, found as usize)?;
        let mut changes = UpdateChanges::new(t, targets, &self.spill_dir());
        for row in matched.by_ref().take(limit) {
            let row = row.map_err(|e| vec![e])?;
            let new = self.updated_row(u, t, targets, &row[1..])?;
            changes.add(row, new)?;
        }
        drop(matched);
        self.note_update(t, Some(changes.set_columns()));
        let moves_keys = changes.moves_unique_keys();
        let (changes, count) = changes.finish(t)?;
        self.write_updates(t, (changes, moves_keys), locking, output)?;
        self.report_io(t, out);
        Ok(count)
    }

    /// How an UPDATE reads its table (`targets`: `update_targets`'), before its locking
    /// (`Access::read_under`). SHOWPLAN_TEXT prints it (showplan.rs).
    pub(super) fn update_access(
        &mut self,
        u: &Update,
        t: &TableRef,
        targets: &[Option<usize>],
    ) -> Access {
        // A variable assigned row by row may be what WHERE compares with: no seek then.
        match targets.iter().any(Option::is_none) {
            true => Access::Scan,
            false => self.access_for(t, u.where_clause.as_ref(), None),
        }
    }

    /// UPDATE's write phase: each change of `changes` (`[rid, old values..., new
    /// values...]`) made in the statement's transaction, `SPOOL_WINDOW` at a time, and
    /// pushed into `output` once made. The caller has met check_constraints.rs invariant 5
    /// (its table resolved under `locking`'s table lock).
    pub(super) fn write_updates(
        &mut self,
        t: &TableRef,
        (changes, moves_keys): (SortedRows, bool),
        locking: &super::locking::RowLocking,
        output: Option<&mut SortSpill>,
    ) -> Result<(), Vec<SqlError>> {
        // foreign_keys.rs invariant 3: a referenced table's changed keys are checked after.
        let (changes, check) = match self.is_referenced(t) {
            true => {
                let (a, b) = super::foreign_keys::tee(&self.spill_dir(), changes, None)?;
                (a, Some(b))
            }
            false => (changes, None),
        };
        let Some(changed) = check else {
            return match moves_keys {
                true => self.write_key_updates(t, changes, locking, output),
                false => self.write_updates_in_place(t, changes, locking, output),
            };
        };
        self.one_statement(|s| {
            match moves_keys {
                true => s.write_key_updates(t, changes, locking, output)?,
                false => s.write_updates_in_place(t, changes, locking, output)?,
            }
            s.check_changed_keys(t, changed)
        })
    }

    /// `write_updates` row by row: each change made where the row is (or moved by
    /// storage, a clustered key's change included).
    fn write_updates_in_place(
        &mut self,
        t: &TableRef,
        mut changes: SortedRows,
        locking: &super::locking::RowLocking,
        mut output: Option<&mut SortSpill>,
    ) -> Result<(), Vec<SqlError>> {
        let one = |e| vec![e];
        let width = t.entry.columns.len();
        let env = self.growth_env();
        let (mut window, mut at) = (Vec::new(), 0usize);
        let range_wait = std::cell::Cell::new(None);
        let step = |db: Held<'_>, x| {
            let mut done = 0;
            loop {
                if at == window.len() {
                    (window, at) = (changes.window(SPOOL_WINDOW).map_err(one)?, 0);
                    if window.is_empty() {
                        return Ok(Step::Done(()));
                    }
                }
                if let Some(share) = db.share_again(done) {
                    return Ok(share);
                }
                let row: &Vec<Value> = &window[at];
                let (old, new_values) = row[1..].split_at(width);
                let (rid, old, new) = (rid_of(&row[0]), record(t, old)?, record(t, new_values)?);
                let locks = (t, locking, &range_wait);
                let changed = update_one(&db, x, locks, (rid, &old, &new), &env);
                match changed.map_err(|e| keyed(e, t, new_values))? {
                    None => return Ok(Step::Done(())),
                    Some(Step::Needs(n)) => return Ok(Step::Needs(n)),
                    Some(Step::Done(_)) => {
                        if let Some(o) = output.as_mut() {
                            o.push(row[1..].to_vec()).map_err(one)?;
                        }
                    }
                }
                (at, done) = (at + 1, done + 1);
            }
        };
        self.write_in_xact_waiting(t, step, || wait_range(locking, &range_wait))
    }

    /// `write_updates` of an UPDATE that changes the keys of a unique index or of the
    /// clustered PRIMARY KEY in several rows: every changed row is deleted first, then
    /// every new row inserted, so uniqueness is that of the rows the statement leaves, as
    /// SQL Server's split, sort and collapse decides it (`SET id = id + 1` moves each key
    /// onto one another row's, and succeeds). The deleted rows are spooled for the inserts.
    fn write_key_updates(
        &mut self,
        t: &TableRef,
        mut changes: SortedRows,
        locking: &super::locking::RowLocking,
        mut output: Option<&mut SortSpill>,
    ) -> Result<(), Vec<SqlError>> {
        let one = |e| vec![e];
        let width = t.entry.columns.len();
        let env = self.growth_env();
        let mut inserts = Some(SortSpill::fifo(&self.spill_dir(), SORT_MEMORY_BYTES));
        let mut second: Option<SortedRows> = None;
        let (mut window, mut at) = (Vec::new(), 0usize);
        let range_wait = std::cell::Cell::new(None);
        let oid = t.entry.object_id;
        let map = |e: extentdb_storage::StorageError| errors::map_data(&e, &t.db_name);
        let step = |db: Held<'_>, x| {
            let mut done = 0;
            loop {
                if at == window.len() {
                    let source = match second.as_mut() {
                        Some(s) => s,
                        None => &mut changes,
                    };
                    (window, at) = (source.window(SPOOL_WINDOW).map_err(one)?, 0);
                    if window.is_empty() {
                        match inserts.take() {
                            Some(i) => second = Some(i.finish().map_err(one)?),
                            None => return Ok(Step::Done(())),
                        }
                        continue;
                    }
                }
                if let Some(share) = db.share_again(done) {
                    return Ok(share);
                }
                let row: &Vec<Value> = &window[at];
                let (old, new) = row[1..].split_at(width);
                if let Some(spool) = inserts.as_mut() {
                    let rec = record(t, old)?;
                    match db
                        .delete_row_at(x, oid, (rid_of(&row[0]), &rec))
                        .map_err(map)?
                    {
                        Step::Needs(n) => return Ok(Step::Needs(n)),
                        Step::Done(()) => spool.push(row.clone()).map_err(one)?,
                    }
                } else {
                    let rec = record(t, new)?;
                    let mut gate = NewRowGate::new(locking, locking.insert_ranges());
                    let placed = db.insert_row(x, oid, (&rec, &env), Some(&mut gate));
                    match gate.outcome(placed)? {
                        Err(extentdb_storage::StorageError::RowRefused) => {
                            gate.leave_range_wait(&range_wait);
                            return Ok(Step::Done(()));
                        }
                        Err(extentdb_storage::StorageError::DuplicateKey {
                            constraint, ..
                        }) => {
                            let pos = key_columns(t).map(|k| k.1).unwrap_or_default();
                            let key: Vec<Value> = pos.iter().map(|&p| new[p].clone()).collect();
                            return Err(duplicate_key(t, &constraint, &key));
                        }
                        Err(e) => return Err(map(e)),
                        Ok(Step::Needs(n)) => return Ok(Step::Needs(n)),
                        Ok(Step::Done(_)) => {
                            if let Some(o) = output.as_mut() {
                                o.push(row[1..].to_vec()).map_err(one)?;
                            }
                        }
                    }
                }
                (at, done) = (at + 1, done + 1);
            }
        };
        self.write_in_xact_waiting(t, step, || wait_range(locking, &range_wait))
    }

    /// A row's new values under UPDATE's SET (variables assigned as it goes).
    fn updated_row(
        &mut self,
        u: &Update,
        t: &TableRef,
        targets: &[Option<usize>],
        old: &[Value],
    ) -> Result<Vec<Value>, Vec<SqlError>> {
        let columns = t.columns();
        let ctx = RowCtx::single(&columns, old, None, &t.entry.name);
        self.updated_row_in(u, t, targets, old, &ctx)
    }

    /// `updated_row` with SET's expressions evaluated over `ctx` (an UPDATE ... FROM's
    /// joined row, of which `old` is the target's part).
    pub(super) fn updated_row_in(
        &mut self,
        u: &Update,
        t: &TableRef,
        targets: &[Option<usize>],
        old: &[Value],
        ctx: &RowCtx<'_>,
    ) -> Result<Vec<Value>, Vec<SqlError>> {
        let mut new = old.to_vec();
        for (a, target) in u.assignments.iter().zip(targets) {
            let v = self.eval(&a.value, Some(ctx)).map_err(terminated)?;
            match (target, &a.target) {
                (Some(col), _) => {
                    let v = match super::eval::compound(a.op) {
                        Some(op) => ops::binary(op, &old[*col], &v).map_err(terminated)?,
                        None => v,
                    };
                    let c = &t.entry.columns[*col];
                    new[*col] = rowcodec::assign(t.types[*col], &v, &t.three_part(), &c.name)
                        .map_err(terminated)?;
                    if new[*col].is_null() && !c.is_nullable {
                        return Err(terminated(msg(515, &[&c.name, &t.three_part(), &"UPDATE"])));
                    }
                }
                (None, AssignTarget::Variable(name)) => {
                    self.assign(name, a.op, v).map_err(|e| vec![e])?;
                }
                (None, AssignTarget::Column(_)) => unreachable!("resolved above"),
            }
        }
        let mut set: Vec<usize> = targets.iter().flatten().copied().collect();
        self.compute_columns(t, &mut new, Some(&mut set), "UPDATE")?;
        if !t.entry.checks.is_empty() || !t.entry.foreign_keys.is_empty() {
            self.check_row(t, &new, "UPDATE", Some(&set))?;
        }
        Ok(new)
    }

    pub(super) fn delete(&mut self, d: &Delete, out: &mut Out) -> Result<(), Vec<SqlError>> {
        super::select::refuse_unbuilt_hints(&d.options)?;
        if !d.from.is_empty() {
            return self.delete_from(d, out);
        }
        let t = self.table_for(&d.table, "DELETE")?;
        let plan = self.output_plan(d.output.as_ref(), &t, Changed::Deleted)?;
        self.dml_with_output(plan, out, |s, output, out| {
            s.delete_rows(d, &t, output, out)
        })
    }

    /// DELETE's rows found and deleted (each pushed into `output` as deleted); returns
    /// how many.
    fn delete_rows(
        &mut self,
        d: &Delete,
        t: &TableRef,
        output: Option<&mut SortSpill>,
        out: &mut Out,
    ) -> Result<u64, Vec<SqlError>> {
        let access = self.access_for(t, d.where_clause.as_ref(), None);
        let locking = self.row_locking(t, true, &d.hints)?;
        let stop = self.rowcount_stop(&d.top);
        let (matched, found) =
            self.matching(t, d.where_clause.as_ref(), (access, stop), &locking)?;
        let limit = self.top_count(&d.top, found as usize)?;
        let count = found.min(limit as u64);
        self.write_deletes(t, matched, count, output)?;
        self.report_io(t, out);
        Ok(count)
    }

    /// DELETE's write phase: the first `count` rows of `matched` (`[rid, values...]`)
    /// deleted in the statement's transaction, `SPOOL_WINDOW` at a time, each pushed into
    /// `output` once deleted.
    pub(super) fn write_deletes(
        &mut self,
        t: &TableRef,
        matched: SortedRows,
        count: u64,
        output: Option<&mut SortSpill>,
    ) -> Result<(), Vec<SqlError>> {
        self.note_update(t, None);
        // foreign_keys.rs invariant 3: a referenced table's deleted keys are checked after.
        if !self.is_referenced(t) {
            return self.write_deletes_only(t, matched, count, output);
        }
        let (rows, removed) = super::foreign_keys::tee(&self.spill_dir(), matched, Some(count))?;
        self.one_statement(|s| {
            s.write_deletes_only(t, rows, count, output)?;
            s.check_removed_keys(t, removed)
        })
    }

    /// `write_deletes`' writes.
    fn write_deletes_only(
        &mut self,
        t: &TableRef,
        mut matched: SortedRows,
        count: u64,
        mut output: Option<&mut SortSpill>,
    ) -> Result<(), Vec<SqlError>> {
        let mut left = count as usize;
        let (mut window, mut at) = (Vec::new(), 0usize);
        self.write_in_xact(t, |db, x| {
            let mut done = 0;
            loop {
                if at == window.len() {
                    if left == 0 {
                        return Ok(Step::Done(()));
                    }
                    let w = matched
                        .window(left.min(SPOOL_WINDOW))
                        .map_err(|e| vec![e])?;
                    assert!(!w.is_empty(), "the spool holds every match it counted");
                    left -= w.len();
                    (window, at) = (w, 0);
                }
                if let Some(share) = db.share_again(done) {
                    return Ok(share);
                }
                let row: &Vec<Value> = &window[at];
                let old = record(t, &row[1..])?;
                let step = db
                    .delete_row_at(x, t.entry.object_id, (rid_of(&row[0]), &old))
                    .map_err(|e| errors::map_data(&e, &t.db_name))?;
                if let Step::Needs(n) = step {
                    return Ok(Step::Needs(n));
                }
                if let Some(o) = output.as_mut() {
                    o.push(row[1..].to_vec()).map_err(|e| vec![e])?;
                }
                (at, done) = (at + 1, done + 1);
            }
        })
    }

    /// The rows WHERE accepts, spooled as [rid, values...], all found before anything is
    /// written (so the statement never meets its own changes: the Halloween problem), and
    /// how many. The table is read a chunk at a time and the matches go to a spool: what
    /// is held is a chunk and the spool's memory, not the table or the matches. Each row
    /// read is locked as `locking` says (X for UPDATE and DELETE) before WHERE sees it, and
    /// a row WHERE rejects is let go, so the rows spooled stay as read until written.
    /// With `stop`, the search ends at that many matches (SET ROWCOUNT): the rest of the
    /// table is neither read nor locked.
    pub(super) fn matching(
        &mut self,
        t: &TableRef,
        filter: Option<&Expr>,
        (access, stop): (Access, Option<u64>),
        locking: &super::locking::RowLocking,
    ) -> Result<(SortedRows, u64), Vec<SqlError>> {
        let columns = t.columns();
        let mut spool = SortSpill::fifo(&self.spill_dir(), SORT_MEMORY_BYTES);
        let mut found = 0u64;
        t.each_row_locked(access, locking, stop, |rid, r| {
            let keep = match filter {
                None => true,
                Some(w) => {
                    let ctx = RowCtx::single(&columns, &r, None, &t.entry.name);
                    self.condition_row(w, Some(&ctx)).map_err(terminated)? == Some(true)
                }
            };
            if keep {
                let mut row = Vec::with_capacity(r.len() + 1);
                row.push(rid_value(rid));
                row.extend(r);
                spool.push(row).map_err(|e| vec![e])?;
                found += 1;
                return Ok(true);
            }
            Ok(false)
        })?;
        assert!(stop.is_none_or(|n| found <= n), "matched past SET ROWCOUNT");
        Ok((spool.finish().map_err(|e| vec![e])?, found))
    }

    /// Where an UPDATE's or DELETE's search for rows may stop: at SET ROWCOUNT's cap when
    /// the statement has no TOP (`top_count` then keeps every match found).
    pub(super) fn rowcount_stop(&self, top: &Option<Top>) -> Option<u64> {
        top.is_none().then(|| self.rowcount_cap()).flatten()
    }
}

/// An UPDATE's changes as they are found: spooled `[rid, old values..., new values...]` in
/// the order found, and, when SET changes a primary key column, the new keys' check.
pub(super) struct UpdateChanges {
    /// SET changes a column of the clustered key or of a unique index's key.
    unique_targets: bool,
    key: Option<(String, Vec<usize>)>,
    check: Option<KeyCheck>,
    changes: SortSpill,
    count: u64,
    /// The columns SET changes (positions in the table): the indexes it updates.
    set: Vec<usize>,
}

impl UpdateChanges {
    pub(super) fn new(t: &TableRef, targets: &[Option<usize>], dir: &std::path::Path) -> Self {
        let key = self_checked_key(t, None)
            .filter(|(_, pos)| targets.iter().flatten().any(|c| pos.contains(c)));
        let check = key
            .as_ref()
            .map(|(_, pos)| KeyCheck::new(pos.clone(), false, dir, SORT_MEMORY_BYTES));
        let unique = unique_key_positions(t);
        UpdateChanges {
            unique_targets: targets.iter().flatten().any(|c| unique.contains(c)),
            key,
            check,
            changes: SortSpill::fifo(dir, SORT_MEMORY_BYTES),
            count: 0,
            set: targets.iter().flatten().copied().collect(),
        }
    }

    /// The columns SET changes, by position in the table.
    pub(super) fn set_columns(&self) -> &[usize] {
        &self.set
    }

    /// Whether the changes move unique keys between rows: SET changes a key column of the
    /// clustered index or of a unique index in more than one row (`write_key_updates`).
    pub(super) fn moves_unique_keys(&self) -> bool {
        self.unique_targets && self.count > 1
    }

    /// One change: `row` is `[rid, old values...]`, `new` the row's new values.
    pub(super) fn add(
        &mut self,
        mut row: Vec<Value>,
        new: Vec<Value>,
    ) -> Result<(), Vec<SqlError>> {
        let one = |e| vec![e];
        if let Some(c) = &mut self.check {
            c.new_key(&new, self.count as i64).map_err(one)?;
            c.cancel(&row[1..]).map_err(one)?;
        }
        row.extend(new);
        self.changes.push(row).map_err(one)?;
        self.count += 1;
        Ok(())
    }

    /// The changes to write and how many, once the new keys were checked against every
    /// row the statement leaves as it is (Msg 2627).
    pub(super) fn finish(self, t: &TableRef) -> Result<(SortedRows, u64), Vec<SqlError>> {
        if let (Some(mut c), Some((name, _))) = (self.check, &self.key) {
            t.each_row(Access::Scan, |_, r| {
                c.existing(&r).map(|()| true).map_err(terminated)
            })?;
            check_keys(t, name, c)?;
        }
        Ok((self.changes.finish().map_err(|e| vec![e])?, self.count))
    }
}

/// UPDATE's SET targets: each assignment's column position, None for a variable.
pub(super) fn update_targets(
    u: &Update,
    t: &TableRef,
) -> Result<Vec<Option<usize>>, Vec<SqlError>> {
    let mut targets: Vec<Option<usize>> = Vec::with_capacity(u.assignments.len());
    for a in &u.assignments {
        targets.push(match &a.target {
            AssignTarget::Variable(_) => None,
            AssignTarget::Column(c) => {
                let i = t
                    .column_index(c.name())
                    .ok_or_else(|| vec![msg(207, &[&c.name()])])?;
                if t.entry.columns[i].identity.is_some() {
                    return Err(vec![msg(8102, &[&t.entry.columns[i].name])]);
                }
                super::computed_columns::refuse_target(&t.entry.columns[i])?;
                if targets.contains(&Some(i)) {
                    return Err(vec![msg(264, &[&t.entry.columns[i].name])]);
                }
                Some(i)
            }
        });
    }
    Ok(targets)
}

/// An INSERT's rows and how far its write phase took them: the first `numbered` have
/// their identity values, the first `inserted` are in the table.
struct InsertProgress<'o> {
    /// The rows of the current window (all of them, unless `more` has the rest).
    rows: Vec<NewRow>,
    numbered: usize,
    inserted: usize,
    /// The rows still to come, spooled (INSERT ... SELECT): taken `SPOOL_WINDOW` at a
    /// time once the window is in the table.
    more: Option<SortedRows>,
    /// Every row has its identity value already (`check_new_keys` numbered them all).
    prenumbered: bool,
    /// A heap's NONCLUSTERED primary key was checked for every new row.
    keys_checked: bool,
    /// Where spools go (tempdb's directory).
    spill_dir: PathBuf,
    /// The last identity value handed out (@@IDENTITY, SCOPE_IDENTITY()).
    last: Option<i64>,
    /// Where each row goes once it is in the table, for an OUTPUT clause.
    output: Option<&'o mut SortSpill>,
}

/// A query's rows caught into a spool (`spooled_insert_rows`).
struct Capture {
    spool: super::spill::SortSpill,
    /// The result's width, once its columns are known.
    width: Option<usize>,
    rows: usize,
    failed: Option<SqlError>,
}

impl Capture {
    fn take(&mut self, r: Vec<Value>) {
        if self.failed.is_none() {
            match self.spool.push(r) {
                Ok(()) => self.rows += 1,
                Err(e) => self.failed = Some(e),
            }
        }
    }
}

impl super::OutputSink for Capture {
    fn emit(&mut self, o: super::Output) -> bool {
        match o {
            super::Output::Columns(c) => self.width = Some(c.len()),
            super::Output::Row(r) => self.take(r),
            super::Output::Rows { columns, rows } => {
                self.width = Some(columns.len());
                rows.into_iter().for_each(|r| self.take(r));
            }
            _ => {}
        }
        self.failed.is_none()
    }
}

/// INSERT ... EXEC's sink: result sets into the capture, each of the target's width (213
/// and the EXEC stops otherwise); the rest kept to pass on once the EXEC ends.
struct ExecCapture<'a> {
    capture: &'a mut Capture,
    width: usize,
    passed: Vec<super::Output>,
    /// The EXEC's errors: the INSERT's own, which then inserts nothing.
    errors: Vec<SqlError>,
}

impl super::OutputSink for ExecCapture<'_> {
    fn emit(&mut self, o: super::Output) -> bool {
        let columns = match &o {
            super::Output::Columns(c) => Some(c.len()),
            super::Output::Rows { columns, .. } => Some(columns.len()),
            _ => None,
        };
        match columns {
            Some(n) if n != self.width => {
                self.capture.failed.get_or_insert(msg(213, &[]));
                return false;
            }
            Some(_) => {}
            None if matches!(o, super::Output::Row(_)) => {}
            None if matches!(o, super::Output::Error(_)) => {
                if let super::Output::Error(e) = o {
                    self.errors.push(e);
                }
                return true;
            }
            None => {
                self.passed.push(o);
                return true;
            }
        }
        self.capture.emit(o)
    }
}

/// Rows of a spool (INSERT ... SELECT, UPDATE, DELETE) held at once while they are written.
const SPOOL_WINDOW: usize = 1000;

impl InsertProgress<'_> {
    /// The row just inserted (`rows[inserted]`, identity filled) to the OUTPUT clause's
    /// spool, if the statement has one.
    fn output_row(&mut self) -> Result<(), Vec<SqlError>> {
        match &mut self.output {
            Some(spool) => spool
                .push(self.rows[self.inserted].values.clone())
                .map_err(|e| vec![e]),
            None => Ok(()),
        }
    }

    /// True while rows remain: the current window's, or the next window's once the
    /// current one is all in the table.
    fn refill(&mut self) -> Result<bool, Vec<SqlError>> {
        if self.inserted < self.rows.len() {
            return Ok(true);
        }
        let Some(more) = &mut self.more else {
            return Ok(false);
        };
        self.rows.clear();
        let window = more.window(SPOOL_WINDOW).map_err(|e| vec![e])?;
        self.rows
            .extend(window.into_iter().map(NewRow::from_spooled));
        self.numbered = if self.prenumbered { self.rows.len() } else { 0 };
        self.inserted = 0;
        Ok(!self.rows.is_empty())
    }
}

/// The write phase of INSERT, one step of `write_in_xact` (storage's access.rs): identity
/// values and records row by row beside other sessions; held exclusively after a
/// provision, one row, then back to sharing. A heap's PRIMARY KEY from a catalog written
/// before it had its unique index is checked, and its rows inserted, holding the database
/// throughout (`insert_checked`, `self_checked_key`).
/// A new clustered row first tests the key range it falls in (locking.rs invariant 5):
/// when another transaction's range lock is in the way, the step stops with nothing of
/// that row done and leaves the lock's resource in `range_wait`, to be waited for with the
/// database let go.
fn write_inserts(
    db: Held<'_>,
    x: u64,
    (t, locking, range_wait): InsertLocks<'_>,
    env: &GrowthEnv,
    p: &mut InsertProgress<'_>,
) -> Result<Step<()>, Vec<SqlError>> {
    if let (0, Some(key)) = (t.entry.index_id, self_checked_key(t, Some(&db))) {
        let Held::Exclusive(db) = db else {
            return Ok(Step::Needs(Needs::Exclusive));
        };
        insert_checked(db, x, (t, locking, range_wait), env, p, key)?;
        return Ok(Step::Done(()));
    }
    let oid = t.entry.object_id;
    let map = |e: extentdb_storage::StorageError| errors::map_data(&e, &t.db_name);
    let mut done = 0;
    while p.refill()? {
        while p.numbered < p.rows.len() {
            if let Some(share) = db.share_again(done) {
                return Ok(share);
            }
            if let Step::Needs(n) = number_row(&db, t, &mut p.rows[p.numbered], &mut p.last)? {
                return Ok(Step::Needs(n));
            }
            (p.numbered, done) = (p.numbered + 1, done + 1);
        }
        while p.inserted < p.rows.len() {
            if let Some(share) = db.share_again(done) {
                return Ok(share);
            }
            let r = &p.rows[p.inserted];
            let rec = t.encode(&r.values)?;
            let mut gate = NewRowGate::new(locking, locking.insert_ranges());
            let placed = db.insert_row(x, oid, (&rec, env), Some(&mut gate));
            match gate.outcome(placed)? {
                Err(extentdb_storage::StorageError::RowRefused) => {
                    gate.leave_range_wait(range_wait);
                    return Ok(Step::Done(()));
                }
                Err(extentdb_storage::StorageError::DuplicateKey { constraint, .. }) => {
                    let pos = key_columns(t).map(|k| k.1).unwrap_or_default();
                    let key: Vec<Value> = pos.iter().map(|&p| r.values[p].clone()).collect();
                    return Err(duplicate_key(t, &constraint, &key));
                }
                Err(e) => return Err(map(e)),
                Ok(Step::Needs(n)) => return Ok(Step::Needs(n)),
                Ok(Step::Done(_)) => p.output_row()?,
            }
            (p.inserted, done) = (p.inserted + 1, done + 1);
        }
    }
    Ok(Step::Done(()))
}

/// INSERT into a heap with a NONCLUSTERED primary key, holding the database throughout so
/// no other statement adds a key between the check and the rows: every new row's key is
/// checked first (`check_new_keys`), then the rows go in.
fn insert_checked(
    db: &mut Database,
    x: u64,
    (t, locking, _): InsertLocks<'_>,
    env: &GrowthEnv,
    p: &mut InsertProgress<'_>,
    (name, pos): (String, Vec<usize>),
) -> Result<(), Vec<SqlError>> {
    let oid = t.entry.object_id;
    let map = |e: extentdb_storage::StorageError| errors::map_data(&e, &t.db_name);
    if !p.keys_checked {
        check_new_keys(db, t, p, &name, pos)?;
        p.keys_checked = true;
    }
    // A spooled INSERT goes window by window, all in the statement's transaction.
    while p.refill()? {
        number_rows(db, t, &mut p.rows[p.numbered..], &mut p.last)?;
        p.numbered = p.rows.len();
        while p.inserted < p.rows.len() {
            let rec = t.encode(&p.rows[p.inserted].values)?;
            with_new_row_lock(locking, |mut g| {
                db.now(|d| d.insert_row(x, oid, (&rec, env), g.as_deref_mut()))
            })?
            .map_err(map)?;
            p.output_row()?;
            p.inserted += 1;
        }
    }
    Ok(())
}

/// One row of UPDATE's write phase. A heap row that grows moves: its new RID is this
/// transaction's too. A clustered row given a new key tests the key range it moves into
/// (locking.rs invariant 5): None when another transaction's range lock is in the way,
/// nothing changed and its resource left in the third of `locks` to wait for.
fn update_one(
    db: &Database,
    x: u64,
    (t, locking, range_wait): InsertLocks<'_>,
    (rid, old, new): (Rid, &[u8], &[u8]),
    env: &GrowthEnv,
) -> Result<Option<Step<Rid>>, UpdateError> {
    let clustered = t.entry.index_id == 1;
    let mut gate = NewRowGate::new(locking, clustered);
    gate.lock_rows = !clustered;
    let oid = t.entry.object_id;
    let changed = db.update_row_at(x, oid, (rid, old), (new, env), Some(&mut gate));
    match gate.outcome(changed).map_err(UpdateError::Sql)? {
        Err(extentdb_storage::StorageError::RowRefused) => {
            gate.leave_range_wait(range_wait);
            Ok(None)
        }
        Err(extentdb_storage::StorageError::DuplicateKey { constraint, .. }) => {
            Err(UpdateError::DuplicateKey(constraint))
        }
        other => other
            .map(Some)
            .map_err(|e| UpdateError::Sql(errors::map_data(&e, &t.db_name))),
    }
}

/// A write phase's table, locks, and where a refused key range is left.
type InsertLocks<'a> = (
    &'a TableRef,
    &'a super::locking::RowLocking,
    &'a std::cell::Cell<Option<extentdb_storage::lock::Resource>>,
);

/// Runs a row operation whose new row (an insert's, a moved heap row's) is locked X for
/// the statement's transaction (`own_new_row`) under its page's latch, before another
/// session's locked read can see it (storage's `RowGate`); a refused row gives the lock's
/// error, anything else is the operation's result.
fn with_new_row_lock<T>(
    locking: &super::locking::RowLocking,
    op: impl FnOnce(RowGate<'_, '_>) -> Result<T, extentdb_storage::StorageError>,
) -> Result<Result<T, extentdb_storage::StorageError>, Vec<SqlError>> {
    let mut gate = NewRowGate::new(locking, false);
    let result = op(Some(&mut gate));
    gate.outcome(result)
}

/// A new row's gate (storage's `Gate`): the row locked X (`own_new_row`), and for a
/// clustered INSERT the key range it falls in tested first (`try_insert_range`); a range
/// that would wait is kept in `pending` for the caller to wait for.
struct NewRowGate<'l> {
    locking: &'l super::locking::RowLocking,
    /// Lock the new row X (a clustered UPDATE's moved row keeps the key locks it has).
    lock_rows: bool,
    ranges: bool,
    failure: Option<Vec<SqlError>>,
    pending: Option<extentdb_storage::lock::Resource>,
}

impl<'l> NewRowGate<'l> {
    /// After storage's `RowRefused`: the key-range lock that refused the row, left to be
    /// waited for once the database is let go (only a key range refuses quietly).
    fn leave_range_wait(
        &self,
        range_wait: &std::cell::Cell<Option<extentdb_storage::lock::Resource>>,
    ) {
        assert!(self.pending.is_some(), "only a key range refuses quietly");
        range_wait.set(self.pending);
    }

    fn new(locking: &'l super::locking::RowLocking, ranges: bool) -> NewRowGate<'l> {
        NewRowGate {
            locking,
            lock_rows: true,
            ranges,
            failure: None,
            pending: None,
        }
    }

    /// The operation's result, or the error of the lock that refused its row.
    fn outcome<T>(
        &mut self,
        result: Result<T, extentdb_storage::StorageError>,
    ) -> Result<Result<T, extentdb_storage::StorageError>, Vec<SqlError>> {
        match (result, self.failure.take()) {
            (Err(extentdb_storage::StorageError::RowRefused), Some(e)) => Err(e),
            (result, _) => Ok(result),
        }
    }
}

impl extentdb_storage::access::Gate for NewRowGate<'_> {
    fn row(&mut self, rid: Rid, rec: &[u8]) -> bool {
        if !self.lock_rows {
            return true;
        }
        match self.locking.own_new_row(rid, rec) {
            Ok(()) => true,
            Err(e) => {
                self.failure = Some(e);
                false
            }
        }
    }

    fn key_ranges(&self) -> bool {
        self.ranges
    }

    fn key_range(&mut self, next: Option<(Rid, &[u8])>) -> bool {
        let got = self.locking.try_insert_range(next);
        super::locking::range_answer(got, &mut self.pending, &mut self.failure)
    }
}

/// Row `r`'s identity value if it generates one; IDENTITY_INSERT's given value moves the
/// identity on.
fn number_row(
    db: &Database,
    t: &TableRef,
    r: &mut NewRow,
    last: &mut Option<i64>,
) -> Result<Step<()>, Vec<SqlError>> {
    let oid = t.entry.object_id;
    let map = |e: extentdb_storage::StorageError| errors::map_data(&e, &t.db_name);
    let identity = t.entry.columns.iter().position(|c| c.identity.is_some());
    match (r.generate_identity, identity) {
        (Some(pos), _) => match db.next_identity(oid).map_err(map)? {
            Step::Done(v) => {
                r.values[pos] = identity_value(t.types[pos], v).map_err(terminated)?;
                *last = Some(v);
            }
            Step::Needs(n) => return Ok(Step::Needs(n)),
        },
        (None, Some(pos)) => {
            // IDENTITY_INSERT: a value beyond the current one moves the identity on.
            let Ok(v) = as_i64(&r.values[pos]) else {
                return Ok(Step::Done(()));
            };
            if let Step::Needs(n) = db.note_identity(oid, v).map_err(map)? {
                return Ok(Step::Needs(n));
            }
            *last = Some(v);
        }
        (None, None) => {}
    }
    Ok(Step::Done(()))
}

/// `number_row` for each of `rows`, holding the database (what a row needs is provided).
fn number_rows(
    db: &mut Database,
    t: &TableRef,
    rows: &mut [NewRow],
    last: &mut Option<i64>,
) -> Result<(), Vec<SqlError>> {
    for r in rows {
        loop {
            match number_row(db, t, r, last)? {
                Step::Done(()) => break,
                Step::Needs(n) => db
                    .provide(n)
                    .map_err(|e| errors::map_data(&e, &t.db_name))?,
            }
        }
    }
    Ok(())
}

/// A heap's NONCLUSTERED primary key: every new row's key (identity values taken first)
/// against the stored rows' and each other's, before any row goes in (Msg 2627 names the
/// first new row whose key is taken). A spooled INSERT's rows are numbered into a new
/// spool, which the write phase then reads (`prenumbered`); what is held is a window, the
/// check's sort and a scan chunk.
fn check_new_keys(
    db: &mut Database,
    t: &TableRef,
    p: &mut InsertProgress<'_>,
    name: &str,
    pos: Vec<usize>,
) -> Result<(), Vec<SqlError>> {
    let one = |e| vec![e];
    let mut check = KeyCheck::new(pos, true, &p.spill_dir, SORT_MEMORY_BYTES);
    if p.more.is_none() {
        number_rows(db, t, &mut p.rows[p.numbered..], &mut p.last)?;
        p.numbered = p.rows.len();
        for (i, r) in p.rows[p.inserted..].iter().enumerate() {
            check.new_key(&r.values, i as i64).map_err(one)?;
        }
    } else {
        let mut numbered = SortSpill::fifo(&p.spill_dir, SORT_MEMORY_BYTES);
        let mut index = 0i64;
        while p.refill()? {
            number_rows(db, t, &mut p.rows[p.numbered..], &mut p.last)?;
            for r in p.rows.drain(p.inserted..) {
                check.new_key(&r.values, index).map_err(one)?;
                numbered.push(r.spooled()).map_err(one)?;
                index += 1;
            }
        }
        p.more = Some(numbered.finish().map_err(one)?);
        p.prenumbered = true;
    }
    t.each_row_in(db, |r| check.existing(&r).map_err(terminated))?;
    check_keys(t, name, check)
}

/// The positions of the columns in table `t`'s clustered key and its unique indexes' keys.
/// INSERT ... VALUES: each row has a value for each target column, else 213 (no column
/// list), 109 (too few values) or 110 (too many).
pub(super) fn values_fit(
    ins: &Insert,
    rows: &[Vec<Expr>],
    targets: &[usize],
) -> Result<(), Vec<SqlError>> {
    let Some(r) = rows.iter().find(|r| r.len() != targets.len()) else {
        return Ok(());
    };
    Err(vec![if ins.columns.is_empty() {
        msg(213, &[])
    } else if targets.len() > r.len() {
        msg(109, &[])
    } else {
        msg(110, &[])
    }])
}

/// Whether an UPDATE's SET (`targets`) changes a column of a key whose uniqueness the
/// statement checks (the clustered key, a unique index's key, a heap's PRIMARY KEY): the
/// columns `UpdateChanges` checks and moves keys for.
pub(super) fn sets_unique_key(t: &TableRef, targets: &[Option<usize>]) -> bool {
    let mut keys = unique_key_positions(t);
    keys.extend(self_checked_key(t, None).map_or(Vec::new(), |(_, p)| p));
    targets.iter().flatten().any(|c| keys.contains(c))
}

fn unique_key_positions(t: &TableRef) -> Vec<usize> {
    let position = |id: &u16| t.entry.columns.iter().position(|c| c.column_id == *id);
    let mut out: Vec<usize> = match (&t.entry.primary_key, t.entry.index_id) {
        (Some((_, ids)), 1) => ids.iter().filter_map(position).collect(),
        _ => Vec::new(),
    };
    let db = t.db.read().unwrap();
    for ix in db.enabled_indexes_of(t.entry.object_id) {
        let Some(info) = ix.index_of.as_ref().filter(|i| i.unique) else {
            continue;
        };
        let keys = &info.sources[..info.key_columns as usize];
        out.extend(keys.iter().filter_map(position));
    }
    out
}

/// A write phase's wait for the key-range lock that refused its row, if one did (left in
/// `range_wait` by `NewRowGate::leave_range_wait`): true once it was had.
fn wait_range(
    locking: &super::locking::RowLocking,
    range_wait: &std::cell::Cell<Option<extentdb_storage::lock::Resource>>,
) -> Result<bool, Vec<SqlError>> {
    match range_wait.take() {
        Some(r) => locking.wait_insert_range(r).map(|()| true),
        None => Ok(false),
    }
}

/// How `update_one` failed: a PRIMARY KEY duplicate (its constraint), which the caller
/// reports with the row's key values, or the messages.
enum UpdateError {
    DuplicateKey(String),
    Sql(Vec<SqlError>),
}

/// `update_one`'s failure as messages: Msg 2627 names the new key's values.
fn keyed(e: UpdateError, t: &TableRef, new: &[Value]) -> Vec<SqlError> {
    match e {
        UpdateError::Sql(e) => e,
        UpdateError::DuplicateKey(constraint) => {
            let pos = key_columns(t).map(|k| k.1).unwrap_or_default();
            let key: Vec<Value> = pos.iter().map(|&p| new[p].clone()).collect();
            duplicate_key(t, &constraint, &key)
        }
    }
}
