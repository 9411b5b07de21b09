//! SELECT from one user table, streamed: the table is read in chunks (storage `scan`),
//! each chunk with the database held and let go of before its rows are filtered,
//! projected and sent, so a result set flows from the page to the client and what the
//! session holds does not grow with the table.
//!
//! Streamed here: WHERE, the select list and TOP (n); aggregates without GROUP BY (each
//! computed row by row, `aggregate::Accumulator`). Other shapes (ORDER BY, DISTINCT,
//! GROUP BY, TOP PERCENT / WITH TIES, OFFSET, DISTINCT aggregates, system views) take
//! the whole source first (`select`).
//!
//! Invariants:
//! 1. No lock on the database is held while rows go to the client (`Out`): a slow client
//!    slows its own statement only.
//! 2. At most `TYPING_ROWS` projected rows are held, and only while a computed column's
//!    type is still unknown (`select::type_columns`); then they stream.

use extentdb_storage::scan::{ScanChunk, ScanPosition};

use super::aggregate::{self, Accumulator};
use super::errors;
use super::eval::as_i64;
use super::select::{type_columns, Source};
use super::tables::TableRef;
use super::views::Rowset;
use super::{Out, Output, Session};
use crate::ast::{Query, QueryBody, Select, SelectItem, TableSource};
use crate::messages::SqlError;
use crate::types::Value;

/// Bytes of records one chunk of a scan reads with the database held.
const CHUNK_BYTES: usize = 256 << 10;
/// Rows held to type computed columns before a result set streams (invariant 2).
const TYPING_ROWS: usize = 1000;

/// What a streamed row does next.
enum Next {
    More,
    Stop,
}

type RowFn<'a> = dyn FnMut(&mut Session, Vec<Value>) -> Result<Next, SqlError> + 'a;

type Errors = Vec<SqlError>;

impl Session {
    /// Runs `q` streamed if its shape allows; None when it needs the materializing path.
    pub(super) fn select_streamed(
        &mut self,
        q: &Query,
        out: &mut Out,
    ) -> Option<Result<(), Vec<SqlError>>> {
        let QueryBody::Select(s) = &q.body else {
            return None;
        };
        let [TableSource::Table { name, alias, .. }] = s.from.as_slice() else {
            return None;
        };
        let plain = q.ctes.is_empty()
            && q.order_by.is_empty()
            && q.offset.is_none()
            && q.fetch.is_none()
            && q.hints.is_empty()
            && !s.distinct
            && s.into.is_none()
            && s.top.as_ref().is_none_or(|t| !t.percent && !t.with_ties)
            && s.group_by.is_empty()
            && s.items
                .iter()
                .all(|i| !matches!(i, SelectItem::Assign { .. }));
        let schema = name.qualifier().unwrap_or("dbo");
        if !plain
            || schema.eq_ignore_ascii_case("sys")
            || schema.eq_ignore_ascii_case("information_schema")
        {
            return None;
        }
        let aggregate = aggregate::is_aggregate_query(s);
        if aggregate && aggregate::has_distinct_aggregate(s) {
            return None;
        }
        Some((|| {
            let t = self.table_for(name, "SELECT")?;
            let src = Source {
                rowset: Rowset {
                    columns: t.columns(),
                    rows: Vec::new(),
                },
                table: name.name().to_string(),
                alias: alias.clone(),
            };
            if aggregate {
                self.aggregate_streamed(q, s, &t, &src, out)
            } else {
                self.rows_streamed(s, &t, &src, out)
            }
        })())
    }

    /// WHERE, the select list and TOP over the table's rows, each row sent as it is made.
    fn rows_streamed(
        &mut self,
        s: &Select,
        t: &TableRef,
        src: &Source,
        out: &mut Out,
    ) -> Result<(), Errors> {
        let one = |e| vec![e];
        let header = self.select_header(s, Some(src)).map_err(one)?;
        let top = match &s.top {
            Some(top) => {
                let n = self.eval(&top.count, None).and_then(|v| as_i64(&v));
                Some(n.map_err(one)?.max(0) as u64)
            }
            None => None,
        };
        let mut held: Option<Vec<Vec<Value>>> = Some(Vec::new());
        if header.iter().all(|(_, t)| t.is_some()) {
            out.columns(type_columns(header.clone(), &[], false));
            held = None;
        }
        let mut sent = 0u64;
        if top != Some(0) {
            self.scan_rows_streamed(s, t, src, &mut |session, r| {
                let v = session.project_row(s, Some(src), &r)?;
                match &mut held {
                    Some(h) => h.push(v),
                    None => out.row(v),
                }
                if held.as_ref().is_some_and(|h| h.len() >= TYPING_ROWS) {
                    let h = held.take().unwrap_or_default();
                    out.columns(type_columns(header.clone(), &h, true));
                    h.into_iter().for_each(|v| out.row(v));
                }
                sent += 1;
                Ok(if top.is_some_and(|n| sent >= n) || out.gone() {
                    Next::Stop
                } else {
                    Next::More
                })
            })?;
        }
        if let Some(h) = held {
            out.columns(type_columns(header, &h, false));
            h.into_iter().for_each(|v| out.row(v));
        }
        self.rows_affected(sent, out);
        Ok(())
    }

    /// Aggregates without GROUP BY: each computed row by row; then HAVING, the select list
    /// and TOP over the one group's row.
    fn aggregate_streamed(
        &mut self,
        q: &Query,
        s: &Select,
        t: &TableRef,
        src: &Source,
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        let plan = self.plan_grouping(q, s, src, &[])?;
        let mut accs: Vec<Accumulator> = plan.aggregates.iter().map(Accumulator::new).collect();
        let mut first: Option<Vec<Value>> = None;
        self.scan_rows_streamed(s, t, src, &mut |session, r| {
            for a in &mut accs {
                a.add(session, src, &r)?;
            }
            first.get_or_insert(r);
            Ok(Next::More)
        })?;
        let types: Vec<_> = accs.iter().map(Accumulator::result_type).collect();
        let row = aggregate::group_row(src, first.as_deref(), &accs).map_err(|e| vec![e])?;
        let grouped = aggregate::grouped_source(src, &types, vec![row]);
        let (columns, rows) = self
            .finish(&plan.query, &plan.select, Some(&grouped))
            .map_err(|e| vec![e])?;
        let n = rows.len() as u64;
        out.push(Output::Rows { columns, rows });
        self.rows_affected(n, out);
        Ok(())
    }

    /// Reads the table chunk by chunk and calls `each` with every row WHERE keeps, until
    /// it says stop or the batch is cancelled.
    fn scan_rows_streamed(
        &mut self,
        s: &Select,
        t: &TableRef,
        src: &Source,
        each: &mut RowFn,
    ) -> Result<(), Errors> {
        let one = |e| vec![e];
        let map = |e: &extentdb_storage::StorageError| errors::map_data(e, &t.db_name);
        let origin =
            t.db.lock()
                .unwrap()
                .scan_origin(t.entry.object_id)
                .map_err(|e| map(&e))?;
        let mut at = ScanPosition::Start;
        while at != ScanPosition::End {
            if self.cancelled() {
                return Ok(());
            }
            // Invariant 1: the database is held for the read only.
            let ScanChunk { rows, next } = {
                let mut g = t.db.lock().unwrap();
                g.scan_chunk(t.entry.object_id, origin, &at, CHUNK_BYTES)
                    .map_err(|e| map(&e))?
            };
            for (_, rec) in rows {
                let r = t.decode(&rec)?;
                let keep = match &s.where_clause {
                    Some(w) => {
                        let ctx = Self::ctx(src, &r);
                        self.condition_row(w, Some(&ctx)).map_err(one)? == Some(true)
                    }
                    None => true,
                };
                if keep {
                    if let Next::Stop = each(self, r).map_err(one)? {
                        return Ok(());
                    }
                }
            }
            at = next;
        }
        Ok(())
    }
}
