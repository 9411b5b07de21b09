//! Queries inside queries: subqueries in expressions (scalar, EXISTS, IN), and the rows of
//! derived tables and common table expressions (`cte.rs`), each run through the ordinary
//! SELECT path into a spool (`spill::Spool`, which spills to tempdb's directory past its memory).
//!
//! A correlated subquery sees its enclosing rows through `Scopes::outer_rows` (innermost
//! last), which column binding (`eval.rs`, `Session::column`) searches after the row of
//! its own FROM clause.
//!
//! Invariants:
//! 1. A subquery's result is reused within one statement only when its run read no
//!    enclosing row (`outer_reads` unchanged): a run that never read the outer rows gives
//!    the same rows for any of them. It is found by the subquery's address and reused
//!    only for an equal subquery (an address is reused once a copy is dropped). The cache
//!    is emptied at every statement's start and end, so a later statement (or a loop's
//!    next turn) sees the data as it is then.
//! 2. `outer_rows` is empty between statements: every push has its pop on all paths.
//! 3. A subquery does not change @@ROWCOUNT and is not capped by SET ROWCOUNT (which
//!    applies to the statement's own result).

use std::collections::HashMap;
use std::sync::Arc;

use super::eval::{OuterRow, RowCtx};
use super::output::OutputSink;
use super::spill::{SortSpill, Spool};
use super::stream::SORT_MEMORY_BYTES;
use super::{Out, Output, Session};
use crate::ast::Query;
use crate::messages::{msg, SqlError};
use crate::ops;
use crate::types::{SqlType, Value};

/// The running statement's query scopes.
#[derive(Default)]
pub(super) struct Scopes {
    /// Rows of the enclosing queries, innermost last (invariant 2).
    pub outer_rows: Vec<OuterRow>,
    /// How many column references bound to an enclosing row so far (invariant 1).
    pub outer_reads: u64,
    /// Results of subqueries that read no enclosing row, by the subquery's address in the
    /// statement's tree, each with the subquery it answers (invariant 1).
    cache: HashMap<usize, (Query, Arc<Rows>)>,
    /// The common table expressions in scope, innermost last (`cte.rs`).
    pub ctes: Vec<super::cte::CteScope>,
    /// Messages of the queries run into spools (SET STATISTICS IO's lines), passed on to
    /// the client when the statement ends.
    pub deferred: Vec<Output>,
}

impl Scopes {
    /// Forgets what an earlier statement's subqueries returned (invariant 1).
    pub fn statement_start(&mut self) {
        debug_assert!(self.outer_rows.is_empty(), "invariant 2");
        self.cache.clear();
    }
}

/// A query's result held for reading again: its columns and a spool of its rows.
pub(super) struct Rows {
    pub columns: Vec<(String, SqlType)>,
    pub spool: Spool,
    pub count: u64,
}

/// Receives a query's result into a spool; other outputs (messages) are kept to pass on.
struct SpoolSink {
    spool: Option<SortSpill>,
    columns: Option<Vec<(String, SqlType)>>,
    count: u64,
    /// Rows wanted at most (EXISTS needs one, a scalar subquery two); the sink says its
    /// receiver is gone past it, which stops the query's read.
    limit: Option<u64>,
    failed: Option<SqlError>,
    messages: Vec<Output>,
}

impl SpoolSink {
    fn row(&mut self, r: Vec<Value>) -> bool {
        if self.limit.is_some_and(|n| self.count >= n) {
            return false;
        }
        self.count += 1;
        if let Err(e) = self.spool.as_mut().expect("open").push(r) {
            self.failed.get_or_insert(e);
            return false;
        }
        true
    }
}

impl OutputSink for SpoolSink {
    fn emit(&mut self, o: Output) -> bool {
        match o {
            Output::Columns(c) => {
                self.columns.get_or_insert(c);
                true
            }
            Output::Row(r) => self.row(r),
            Output::Rows { columns, rows } => {
                self.columns.get_or_insert(columns);
                rows.into_iter().all(|r| self.row(r))
            }
            Output::RowsAffected(_) | Output::StatementEnd(_) => true,
            other => {
                self.messages.push(other);
                true
            }
        }
    }
}

impl Session {
    /// Runs `q` (a SELECT) into a spool, at most `limit` rows (invariant 3).
    pub(super) fn query_rows(&mut self, q: &Query, limit: Option<u64>) -> Result<Rows, SqlError> {
        let mut sink = SpoolSink {
            spool: Some(SortSpill::fifo(&self.spill_dir(), SORT_MEMORY_BYTES)),
            columns: None,
            count: 0,
            limit,
            failed: None,
            messages: Vec::new(),
        };
        let rowcount = self.rowcount;
        let done = self.without_rowcount(|s| {
            let mut out = Out::new(&mut sink);
            s.select(q, &mut out)
        });
        self.rowcount = rowcount;
        if let Err(mut e) = done {
            return Err(e.remove(0));
        }
        if let Some(e) = sink.failed {
            return Err(e);
        }
        self.scopes.deferred.append(&mut sink.messages);
        let spool = sink.spool.take().expect("open").finish_rewindable()?;
        Ok(Rows {
            columns: sink.columns.unwrap_or_default(),
            spool,
            count: sink.count,
        })
    }

    /// A subquery's rows with `row` as its innermost enclosing row: from the cache when an
    /// earlier run read no enclosing row (invariant 1).
    fn subquery(
        &mut self,
        q: &Query,
        row: Option<&RowCtx<'_>>,
        limit: Option<u64>,
    ) -> Result<Arc<Rows>, SqlError> {
        let key = q as *const Query as usize;
        // An address alone is not enough: a copy of part of the statement (a set
        // operation's branch, a grouped query's rewrite) is made and dropped, and the next
        // copy may take the same address with another subquery there.
        if let Some((same, r)) = self.scopes.cache.get(&key) {
            if same == q {
                return Ok(r.clone());
            }
        }
        let reads = self.scopes.outer_reads;
        let rows = self.with_outer_row(row, |s| s.query_rows(q, limit));
        let rows = Arc::new(rows?);
        if self.scopes.outer_reads == reads {
            self.scopes.cache.insert(key, (q.clone(), rows.clone()));
        }
        Ok(rows)
    }

    /// Runs `f` with `row` (if any) as the innermost enclosing row (invariant 2).
    pub(super) fn with_outer_row<T>(
        &mut self,
        row: Option<&RowCtx<'_>>,
        f: impl FnOnce(&mut Session) -> T,
    ) -> T {
        let pushed = row
            .map(|r| self.scopes.outer_rows.push(OuterRow::of(r)))
            .is_some();
        let result = f(self);
        if pushed {
            self.scopes.outer_rows.pop();
        }
        result
    }

    /// `(SELECT ...)` as a value: NULL for no row, 512 for more than one, 116 for more
    /// than one column.
    pub(super) fn scalar_subquery(
        &mut self,
        q: &Query,
        row: Option<&RowCtx<'_>>,
    ) -> Result<Value, SqlError> {
        let rows = self.subquery(q, row, Some(2))?;
        if rows.columns.len() != 1 {
            return Err(msg(116, &[]));
        }
        if rows.count > 1 {
            return Err(msg(512, &[]));
        }
        let first = rows.spool.rows().next().transpose()?;
        Ok(first.and_then(|mut r| r.pop()).unwrap_or(Value::Null))
    }

    /// `EXISTS (SELECT ...)`.
    pub(super) fn exists_subquery(
        &mut self,
        q: &Query,
        row: Option<&RowCtx<'_>>,
    ) -> Result<bool, SqlError> {
        Ok(self.subquery(q, row, Some(1))?.count > 0)
    }

    /// `v IN (SELECT ...)`, three-valued: true when a row equals `v`; unknown when none
    /// does but `v` or a row is NULL; false otherwise (and always over no rows).
    pub(super) fn in_subquery(
        &mut self,
        v: &Value,
        q: &Query,
        row: Option<&RowCtx<'_>>,
    ) -> Result<Option<bool>, SqlError> {
        let rows = self.subquery(q, row, None)?;
        if rows.columns.len() != 1 {
            return Err(msg(116, &[]));
        }
        if rows.count == 0 {
            return Ok(Some(false));
        }
        if v.is_null() {
            return Ok(None);
        }
        let mut unknown = false;
        for r in rows.spool.rows() {
            let r = r?;
            match ops::compare(v, &r[0])? {
                Some(std::cmp::Ordering::Equal) => return Ok(Some(true)),
                Some(_) => {}
                None => unknown = true,
            }
        }
        Ok(if unknown { None } else { Some(false) })
    }
}

/// A derived table's or CTE's rows with their columns named by `names` (when given), each
/// column named and each name once (8155, 8156).
pub(super) fn named_columns(
    mut rows: Rows,
    names: &[String],
    table: &str,
) -> Result<Rows, SqlError> {
    if !names.is_empty() {
        if names.len() < rows.columns.len() {
            return Err(msg(8158, &[&table]));
        }
        if names.len() > rows.columns.len() {
            return Err(msg(8159, &[&table]));
        }
        for (c, n) in rows.columns.iter_mut().zip(names) {
            c.0 = n.clone();
        }
    }
    for (i, (n, _)) in rows.columns.iter().enumerate() {
        if n.is_empty() {
            return Err(msg(8155, &[&(i as i64 + 1), &table]));
        }
        if rows.columns[..i]
            .iter()
            .any(|(m, _)| m.eq_ignore_ascii_case(n))
        {
            return Err(msg(8156, &[&n.as_str(), &table]));
        }
    }
    Ok(rows)
}
