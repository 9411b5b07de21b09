//! INSERT, UPDATE and DELETE on user tables.
//!
//! Each statement works in two phases, as SQL Server's do: first every new or changed row
//! is computed (expressions evaluated, values converted to the column types, NOT NULL
//! checked) with the database unlocked, since evaluation may itself need the database;
//! then, under the database lock and inside the session's transaction (see `xact`), the
//! identity values are taken, PRIMARY KEY uniqueness is checked against the stored rows,
//! and the rows are written. A failure anywhere leaves the table as it was.
//!
//! Deliberately not here yet: UPDATE/DELETE ... FROM (joins), INSERT ... EXEC, OUTPUT,
//! and isolation between the two phases (a concurrent session could change the rows in
//! between; the CLI runs one session, the server will need locks).

use std::collections::HashSet;

use extentdb_storage::table::{Rid, SharedInsert};
use extentdb_storage::Database;

use super::errors;
use super::eval::{as_i64, RowCtx};
use super::lower::not_yet;
use super::tables::{Access, TableRef};
use super::xact::Shared;
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
fn terminated(e: SqlError) -> Vec<SqlError> {
    let runtime = matches!(
        e.number,
        515 | 2627 | 2628 | 8152 | 8115 | 220 | 232 | 8134 | 242 | 517 | 8114
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
fn key_columns(t: &TableRef) -> Option<(String, Vec<usize>)> {
    let (name, ids) = t.entry.primary_key.as_ref()?;
    let pos = ids
        .iter()
        .filter_map(|id| t.entry.columns.iter().position(|c| c.column_id == *id))
        .collect();
    Some((name.clone(), pos))
}

/// A comparable form of a key: text compares case-insensitively and without trailing
/// spaces, as the default collation does.
fn key_of(values: &[Value], pos: &[usize]) -> Vec<String> {
    pos.iter()
        .map(|&p| match &values[p] {
            Value::Text(s) => format!("t{}", s.trim_end_matches(' ').to_lowercase()),
            v => format!("{v:?}"),
        })
        .collect()
}

/// Checks that no two of `rows` share a key (Msg 2627 names the first duplicate).
fn check_unique<'a>(
    t: &TableRef,
    rows: impl IntoIterator<Item = &'a Vec<Value>>,
) -> Result<(), Vec<SqlError>> {
    let Some((name, pos)) = key_columns(t) else {
        return Ok(());
    };
    let mut seen = HashSet::new();
    for r in rows {
        if !seen.insert(key_of(r, &pos)) {
            let key: Vec<Value> = pos.iter().map(|&p| r[p].clone()).collect();
            return Err(terminated(msg(
                2627,
                &[&"PRIMARY KEY", &name, &t.two_part(), &key_text(&key)],
            )));
        }
    }
    Ok(())
}

/// An identity value as the column's type (Msg 8115 when it does not fit).
fn identity_value(t: SqlType, v: i64) -> Result<Value, SqlError> {
    convert(&Value::BigInt(v), t, None).map_err(|_| msg(8115, &[&"IDENTITY", &data_type_name(t)]))
}

/// One row to insert: its values, and the identity column to fill if it was not given.
struct NewRow {
    values: Vec<Value>,
    generate_identity: Option<usize>,
}

impl NewRow {
    /// The row as a spool keeps it: its values, then the identity column to fill or NULL.
    fn spooled(self) -> Vec<Value> {
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
    fn top_count(&mut self, top: &Option<Top>, rows: usize) -> Result<usize, Vec<SqlError>> {
        let Some(top) = top else { return Ok(rows) };
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
    fn default_value(&mut self, t: &TableRef, col: usize) -> Result<Value, SqlError> {
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

    /// The columns an INSERT gives values for, by position.
    fn insert_targets(&self, ins: &Insert, t: &TableRef) -> Result<Vec<usize>, Vec<SqlError>> {
        let identity = t.entry.columns.iter().position(|c| c.identity.is_some());
        let identity_insert = self.identity_insert == Some((t.db_id, t.entry.object_id));
        if matches!(ins.source, InsertSource::DefaultValues) {
            return Ok(Vec::new());
        }
        if ins.columns.is_empty() {
            if identity.is_some() && identity_insert {
                return Err(vec![msg(8101, &[&t.entry.name])]);
            }
            return Ok((0..t.entry.columns.len())
                .filter(|i| Some(*i) != identity)
                .collect());
        }
        let mut targets = Vec::with_capacity(ins.columns.len());
        for name in &ins.columns {
            let i = t
                .column_index(name)
                .ok_or_else(|| vec![msg(207, &[name])])?;
            if targets.contains(&i) {
                return Err(vec![msg(264, &[&t.entry.columns[i].name])]);
            }
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
        let mismatch = |given: usize| {
            if ins.columns.is_empty() {
                vec![msg(213, &[])]
            } else if targets.len() > given {
                vec![msg(109, &[])]
            } else {
                vec![msg(110, &[])]
            }
        };
        match &ins.source {
            InsertSource::DefaultValues => Ok(vec![Vec::new()]),
            InsertSource::Execute(_) => Err(vec![not_yet("INSERT ... EXEC")]),
            InsertSource::Values(rows) => {
                if let Some(r) = rows.iter().find(|r| r.len() != targets.len()) {
                    return Err(mismatch(r.len()));
                }
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
        let t = self.table_for(&ins.table, "INSERT")?;
        let targets = self.insert_targets(ins, &t)?;
        let identity = t.entry.columns.iter().position(|c| c.identity.is_some());
        // A heap's NONCLUSTERED key is checked against all the new rows at once.
        let whole = key_columns(&t).is_some() && t.entry.index_id == 0;
        let (rows, more, count) = match &ins.source {
            InsertSource::Query(q) if !whole => {
                let (spool, count) = self.spooled_insert_rows(ins, q, &t, &targets, identity)?;
                (Vec::new(), Some(spool), count)
            }
            _ => {
                let mut source = self.insert_source(ins, &targets)?;
                let n = self.top_count(&ins.top, source.len())?;
                source.truncate(n);
                let mut rows = Vec::with_capacity(source.len());
                for src in source {
                    rows.push(self.new_row(&t, &targets, src, identity)?);
                }
                let count = rows.len() as u64;
                (rows, None, count)
            }
        };
        let db = t.db.clone();
        let env = self.growth_env();
        let mut p = InsertProgress {
            rows,
            numbered: 0,
            inserted: 0,
            more,
            last: None,
        };
        // Each closure runs at most once, one after the other.
        let progress = std::cell::RefCell::new(&mut p);
        self.write_in_xact_sharing(
            t.db_id,
            &db,
            |db, x| write_inserts_shared(db, x, &t, &env, &mut progress.borrow_mut()),
            |db, x| write_inserts(db, x, &t, &mut progress.borrow_mut()),
        )?;
        if p.last.is_some() {
            self.last_identity = p.last;
        }
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
    ) -> Result<(super::spill::SortedRows, u64), Vec<SqlError>> {
        use super::spill::SortSpill;
        let one = |e| vec![e];
        let dir = self.spill_dir();
        let fifo =
            || -> Box<super::spill::RowCompare> { Box::new(|_, _| std::cmp::Ordering::Equal) };
        let budget = super::stream::SORT_MEMORY_BYTES;
        let mut capture = Capture {
            spool: SortSpill::new(&dir, budget, fifo()),
            width: None,
            rows: 0,
            failed: None,
        };
        match self.select_streamed(q, &mut Out::new(&mut capture)) {
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
        let mut spool = SortSpill::new(&dir, budget, fifo());
        let mut count = 0u64;
        for r in source.take(n) {
            let src = r.map_err(one)?.into_iter().map(Some).collect();
            let row = self.new_row(t, targets, src, identity)?;
            spool.push(row.spooled()).map_err(one)?;
            count += 1;
        }
        Ok((spool.finish().map_err(one)?, count))
    }

    /// One row to insert: given values converted, defaults filled, NOT NULL checked.
    fn new_row(
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
            if !given[col] && Some(col) != generate_identity {
                values[col] = self.default_value(t, col).map_err(terminated)?;
            }
            let c = &t.entry.columns[col];
            if values[col].is_null() && !c.is_nullable && Some(col) != generate_identity {
                return Err(terminated(msg(515, &[&c.name, &t.three_part(), &"INSERT"])));
            }
        }
        Ok(NewRow {
            values,
            generate_identity,
        })
    }

    pub(super) fn update(&mut self, u: &Update, out: &mut Out) -> Result<(), Vec<SqlError>> {
        if !u.from.is_empty() {
            return Err(vec![not_yet("UPDATE ... FROM")]);
        }
        let t = self.table_for(&u.table, "UPDATE")?;
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
                    if targets.contains(&Some(i)) {
                        return Err(vec![msg(264, &[&t.entry.columns[i].name])]);
                    }
                    Some(i)
                }
            });
        }
        // A variable assigned row by row may be what WHERE compares with: no seek then.
        let assigns_variable = targets.iter().any(Option::is_none);
        let access = match assigns_variable {
            true => Access::Scan,
            false => self.access_for(&t, u.where_clause.as_ref(), None),
        };
        let mut matched = self.matching(&t, u.where_clause.as_ref(), access)?;
        let limit = self.top_count(&u.top, matched.len())?;
        matched.truncate(limit);
        let columns = t.columns();
        let mut changes: Vec<(usize, Vec<Value>)> = Vec::new();
        for (i, (_, old)) in matched.iter().enumerate() {
            let ctx = RowCtx {
                columns: &columns,
                values: old,
                alias: None,
                table: &t.entry.name,
            };
            let mut new = old.clone();
            for (a, target) in u.assignments.iter().zip(&targets) {
                let v = self.eval(&a.value, Some(&ctx)).map_err(terminated)?;
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
                            return Err(terminated(msg(
                                515,
                                &[&c.name, &t.three_part(), &"UPDATE"],
                            )));
                        }
                    }
                    (None, AssignTarget::Variable(name)) => {
                        self.assign(name, a.op, v).map_err(|e| vec![e])?;
                    }
                    (None, AssignTarget::Column(_)) => unreachable!("resolved above"),
                }
            }
            changes.push((i, new));
        }
        let count = changes.len() as u64;
        let key_touched = key_columns(&t)
            .is_some_and(|(_, pos)| targets.iter().flatten().any(|c| pos.contains(c)));
        if key_touched {
            // The new keys against every row the statement leaves as it is: changed rows
            // first, so the duplicate reported is a new key.
            let changed: HashSet<Rid> = changes.iter().map(|(i, _)| matched[*i].0).collect();
            let mut unchanged = Vec::new();
            t.each_row(Access::Scan, |rid, r| {
                if !changed.contains(&rid) {
                    unchanged.push(r);
                }
                Ok(true)
            })?;
            let order = changes.iter().map(|(_, new)| new).chain(unchanged.iter());
            check_unique(&t, order)?;
        }
        let writes: Vec<(Rid, &Vec<Value>, Vec<Value>)> = changes
            .into_iter()
            .map(|(i, new)| (matched[i].0, &matched[i].1, new))
            .collect();
        let db = t.db.clone();
        self.write_in_xact(t.db_id, &db, |db, x| {
            let enc = |v: &Vec<Value>| {
                t.encode(v)
                    .map_err(|e| e.into_iter().flat_map(terminated).collect::<Vec<_>>())
            };
            for (rid, old, new) in &writes {
                let (old, rec) = (enc(old)?, enc(new)?);
                db.update_row_at(x, t.entry.object_id, *rid, &old, &rec)
                    .map_err(|e| errors::map_data(&e, &t.db_name))?;
            }
            Ok(())
        })?;
        self.report_io(&t, out);
        self.rows_affected(count, out);
        Ok(())
    }

    pub(super) fn delete(&mut self, d: &Delete, out: &mut Out) -> Result<(), Vec<SqlError>> {
        if !d.from.is_empty() {
            return Err(vec![not_yet("DELETE ... FROM")]);
        }
        let t = self.table_for(&d.table, "DELETE")?;
        let access = self.access_for(&t, d.where_clause.as_ref(), None);
        let matched = self.matching(&t, d.where_clause.as_ref(), access)?;
        let limit = self.top_count(&d.top, matched.len())?;
        let rids: Vec<(Rid, &Vec<Value>)> = matched
            .iter()
            .take(limit)
            .map(|(rid, row)| (*rid, row))
            .collect();
        let db = t.db.clone();
        self.write_in_xact(t.db_id, &db, |db, x| {
            for (rid, old) in &rids {
                let old = t
                    .encode(old)
                    .map_err(|e| e.into_iter().flat_map(terminated).collect::<Vec<_>>())?;
                db.delete_row_at(x, t.entry.object_id, *rid, &old)
                    .map_err(|e| errors::map_data(&e, &t.db_name))?;
            }
            Ok(())
        })?;
        self.report_io(&t, out);
        self.rows_affected(rids.len() as u64, out);
        Ok(())
    }

    /// The rows WHERE accepts, with their RIDs, all found before anything is written (so
    /// the statement never meets its own changes: the Halloween problem). The table (or
    /// the key ranges of a seek, `access`) is read a chunk at a time: what is held is the
    /// matches, not the table.
    fn matching(
        &mut self,
        t: &TableRef,
        filter: Option<&Expr>,
        access: Access,
    ) -> Result<Vec<(Rid, Vec<Value>)>, Vec<SqlError>> {
        let columns = t.columns();
        let mut out = Vec::new();
        t.each_row(access, |rid, r| {
            let keep = match filter {
                None => true,
                Some(w) => {
                    let ctx = RowCtx {
                        columns: &columns,
                        values: &r,
                        alias: None,
                        table: &t.entry.name,
                    };
                    self.condition_row(w, Some(&ctx)).map_err(terminated)? == Some(true)
                }
            };
            if keep {
                out.push((rid, r));
            }
            Ok(true)
        })?;
        Ok(out)
    }
}

/// An INSERT's rows and how far its write phase took them: the first `numbered` have
/// their identity values, the first `inserted` are in the table.
struct InsertProgress {
    /// The rows of the current window (all of them, unless `more` has the rest).
    rows: Vec<NewRow>,
    numbered: usize,
    inserted: usize,
    /// The rows still to come, spooled (INSERT ... SELECT): taken `SPOOL_WINDOW` at a
    /// time once the window is in the table.
    more: Option<super::spill::SortedRows>,
    /// The last identity value handed out (@@IDENTITY, SCOPE_IDENTITY()).
    last: Option<i64>,
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

/// Rows of a spooled INSERT held at once.
const SPOOL_WINDOW: usize = 1000;

impl InsertProgress {
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
        (self.numbered, self.inserted) = (0, 0);
        for r in more.by_ref().take(SPOOL_WINDOW) {
            self.rows
                .push(NewRow::from_spooled(r.map_err(|e| vec![e])?));
        }
        Ok(!self.rows.is_empty())
    }
}

/// The write phase of INSERT with the database shared: identity values and records of a
/// heap with no key to check, while the storage layer can place them beside other
/// sessions' (`Database::insert_row_shared`), as far as it can: `write_inserts` goes on
/// from where this stopped.
fn write_inserts_shared(
    db: &Database,
    x: u64,
    t: &TableRef,
    env: &extentdb_storage::log_growth::GrowthEnv,
    p: &mut InsertProgress,
) -> Result<Shared, Vec<SqlError>> {
    if t.entry.index_id != 0 || key_columns(t).is_some() {
        return Ok(Shared::Exclusive);
    }
    let oid = t.entry.object_id;
    let map = |e: extentdb_storage::StorageError| errors::map_data(&e, &t.db_name);
    let identity = t.entry.columns.iter().position(|c| c.identity.is_some());
    while p.refill()? {
        while p.numbered < p.rows.len() {
            let r = &mut p.rows[p.numbered];
            match (r.generate_identity, identity) {
                (Some(pos), _) => {
                    let Some(v) = db.next_identity_shared(oid).map_err(map)? else {
                        return Ok(Shared::Exclusive);
                    };
                    r.values[pos] = identity_value(t.types[pos], v).map_err(terminated)?;
                    p.last = Some(v);
                }
                // IDENTITY_INSERT moves the identity on: `write_inserts` does it.
                (None, Some(_)) => return Ok(Shared::Exclusive),
                (None, None) => {}
            }
            p.numbered += 1;
        }
        while p.inserted < p.rows.len() {
            let rec = t.encode(&p.rows[p.inserted].values)?;
            match db.insert_row_shared(x, oid, &rec, env).map_err(map)? {
                SharedInsert::Inserted(_) => p.inserted += 1,
                SharedInsert::Declined => return Ok(Shared::Exclusive),
                SharedInsert::Grow(g) => return Ok(Shared::Grow(g)),
            }
        }
    }
    Ok(Shared::Done)
}

/// The write phase of INSERT with the database held exclusively, from where
/// `write_inserts_shared` stopped: identity values, key check, records.
fn write_inserts(
    db: &mut Database,
    x: u64,
    t: &TableRef,
    p: &mut InsertProgress,
) -> Result<(), Vec<SqlError>> {
    let oid = t.entry.object_id;
    let map = |e: extentdb_storage::StorageError| errors::map_data(&e, &t.db_name);
    let identity = t.entry.columns.iter().position(|c| c.identity.is_some());
    // A spooled INSERT goes window by window, all in the statement's transaction.
    while p.refill()? {
        for r in &mut p.rows[p.numbered..] {
            match (r.generate_identity, identity) {
                (Some(pos), _) => {
                    let v = db.next_identity(oid).map_err(map)?;
                    r.values[pos] = identity_value(t.types[pos], v).map_err(terminated)?;
                    p.last = Some(v);
                }
                (None, Some(pos)) => {
                    // IDENTITY_INSERT: a value beyond the current one moves the identity on.
                    let Ok(v) = as_i64(&r.values[pos]) else {
                        continue;
                    };
                    db.note_identity(oid, v).map_err(map)?;
                    p.last = Some(v);
                }
                (None, None) => {}
            }
        }
        p.numbered = p.rows.len();
        // A clustered index enforces its key itself as rows go in; a NONCLUSTERED primary key
        // over a heap is checked against every row (the shared path inserts none of those).
        if key_columns(t).is_some() && t.entry.index_id == 0 {
            let existing = t.rows(db)?;
            let news = p.rows[p.inserted..].iter().map(|r| &r.values);
            check_unique(t, existing.iter().map(|(_, v)| v).chain(news))?;
        }
        while p.inserted < p.rows.len() {
            let r = &p.rows[p.inserted];
            let rec = t.encode(&r.values)?;
            match db.insert_row(x, oid, &rec) {
                Err(extentdb_storage::StorageError::DuplicateKey { constraint, .. }) => {
                    let pos = key_columns(t).map(|k| k.1).unwrap_or_default();
                    let key: Vec<Value> = pos.iter().map(|&p| r.values[p].clone()).collect();
                    return Err(terminated(msg(
                        2627,
                        &[&"PRIMARY KEY", &constraint, &t.two_part(), &key_text(&key)],
                    )));
                }
                other => {
                    other.map_err(map)?;
                }
            }
            p.inserted += 1;
        }
    }
    Ok(())
}
