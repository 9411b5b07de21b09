//! SELECT from one user table, streamed: rows are pulled one at a time through a chain of
//! row sources (a table scan read in chunks, WHERE, grouping, a sort) and sent as they are
//! made, so a result set flows from the page to the client and what the session holds
//! does not grow with the table.
//!
//! The chain: `TableScan` (storage `scan_chunk`, or `seek_chunk` over the key ranges
//! `seek::access_for` finds in WHERE; the database held for each chunk's read only) → WHERE → [GROUP BY: `SortSpill` by the grouping keys → `Grouped`, aggregates
//! computed row by row (`aggregate::Accumulator`); grouping sets: `grouping_sets::SetsRows`,
//! a spool and one such sort per chain of nested sets] → HAVING → [window functions: a sort per
//! PARTITION BY / ORDER BY, partitions spooled (`window_functions.rs`)] → the select list →
//! [ORDER BY / DISTINCT / TOP PERCENT: `SortSpill`, which spills runs to work files in
//! tempdb's directory past `SORT_MEMORY_BYTES`] → TOP (lowered to SET ROWCOUNT's cap when
//! that is smaller) → the client; an unsorted result stops reading at its limit. TOP PERCENT counts its
//! rows first: through the sort (a spool without ORDER BY), and with DISTINCT through a
//! second spool of the distinct rows. Other shapes (system views and table functions,
//! grouped aggregates whose type depends on their values) take the whole source first
//! (`select`); CTEs, OFFSET, INTO, WITH TIES and most query hints are refused
//! (`select::refuse_unbuilt`).
//!
//! Invariants:
//! 1. No lock on the database is held while rows go to the client (`Out`): a slow client
//!    slows its own statement only.
//! 2. Held at once: one scan chunk (`tables::Chunks`, 256 KB of records), at most `TYPING_ROWS`
//!    projected rows while a computed column's type is unknown (`ColumnTyper`), a sort's
//!    `SORT_MEMORY_BYTES` (spill.rs invariants 2 and 3; TOP PERCENT with DISTINCT: the
//!    sort's merge and a spool's), one group's accumulators (a DISTINCT aggregate's sort).
//! 3. Sorted output is the materializing path's: ORDER BY keys with NULLs first, ties in
//!    scan order (the sort is stable); groups in ascending key order, each group's
//!    non-aggregate columns from its first row in scan order.

use std::cmp::Ordering;
use std::sync::{Arc, Mutex};

use extentdb_storage::instance::TEMPDB_ID;
use extentdb_storage::table::Rid;

use super::aggregate::{self, Accumulator, Aggregate};
use super::eval::as_i64;
use super::select::{same_row, ColumnTyper, Source};
use super::spill::{SortSpill, SortedRows};
use super::tables::{Access, Chunks, TableRef};
use super::views::Rowset;
use super::{Out, Session};
use crate::ast::{Expr, Literal, Query, QueryBody, Select, SelectItem, TableSource};
use crate::messages::{msg, SqlError};
use crate::ops;
use crate::types::{SqlType, Value};

/// Rows held to type computed columns before a result set streams (invariant 2).
pub(super) const TYPING_ROWS: usize = 1000;
/// Memory one sort buffers before it spills a run (within the per-connection allowance
/// docs/BENCHMARKS.md states).
pub(super) const SORT_MEMORY_BYTES: usize = 8 << 20;

type Errors = Vec<SqlError>;

fn one(e: SqlError) -> Errors {
    vec![e]
}

/// Rows pulled one at a time; None at the end.
pub(super) trait RowSource {
    fn next_row(&mut self, s: &mut Session) -> Result<Option<Vec<Value>>, Errors>;
}

/// A user table's rows, read chunk by chunk (invariant 1).
pub(super) struct TableScan<'a> {
    t: &'a TableRef,
    chunks: Chunks<'a>,
    chunk: std::vec::IntoIter<(Rid, Vec<u8>)>,
    /// Each row ends with its RID (`tables::rid_value`): an UPDATE's or DELETE's target
    /// read through a join (dml_from.rs).
    rids: bool,
}

impl<'a> TableScan<'a> {
    /// The rows `access` reaches: the whole table, or a seek's key ranges, each locked as
    /// `locking` says.
    pub(super) fn new(
        t: &'a TableRef,
        access: Access,
        locking: &'a super::locking::RowLocking,
    ) -> Result<TableScan<'a>, Errors> {
        Ok(TableScan {
            t,
            chunks: Chunks::new(t, access)?.locked(locking),
            chunk: Vec::new().into_iter(),
            rids: false,
        })
    }

    /// The same scan, each row followed by its RID when `rids`.
    pub(super) fn with_rids(mut self, rids: bool) -> Self {
        self.rids = rids;
        self
    }
}

impl RowSource for TableScan<'_> {
    fn next_row(&mut self, s: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        loop {
            if let Some((rid, rec)) = self.chunk.next() {
                let mut row = self.t.decode(&rec)?;
                if self.rids {
                    row.push(super::tables::rid_value(rid));
                }
                return Ok(Some(row));
            }
            // A cancelled batch ends here; its answer is DONE with ATTN (server.rs).
            if s.cancelled() {
                return Ok(None);
            }
            match self.chunks.next_chunk()? {
                Some(rows) => self.chunk = rows.into_iter(),
                None => return Ok(None),
            }
        }
    }
}

/// The rows of `input` a condition keeps (all of them without one: no WHERE).
pub(super) struct Filtered<'a> {
    pub input: &'a mut dyn RowSource,
    pub condition: Option<&'a Expr>,
    pub src: &'a Source,
}

impl RowSource for Filtered<'_> {
    fn next_row(&mut self, s: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        let Some(condition) = self.condition else {
            return self.input.next_row(s);
        };
        while let Some(r) = self.input.next_row(s)? {
            let ctx = Session::ctx(self.src, &r);
            if s.condition_row(condition, Some(&ctx)).map_err(one)? == Some(true) {
                return Ok(Some(r));
            }
        }
        Ok(None)
    }
}

impl RowSource for SortedRows {
    fn next_row(&mut self, _: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        self.next().transpose().map_err(one)
    }
}

impl RowSource for std::vec::IntoIter<Vec<Value>> {
    fn next_row(&mut self, _: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        Ok(self.next())
    }
}

/// One row per group of `input`, whose rows are the grouping keys (`key_len` values) then
/// the source row, sorted by the keys; with no keys, one group of every row (one row even
/// over none). Each row: the group's first source row, then its aggregates.
struct Grouped<'a> {
    input: &'a mut dyn RowSource,
    key_len: usize,
    src: &'a Source,
    aggregates: &'a [Aggregate],
    pending: Option<Vec<Value>>,
    started: bool,
    done: bool,
    /// The aggregates' types as the last group computed them.
    types: Vec<SqlType>,
}

impl RowSource for Grouped<'_> {
    fn next_row(&mut self, s: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        if self.done {
            return Ok(None);
        }
        let first = match self.pending.take() {
            Some(r) => Some(r),
            None => self.input.next_row(s)?,
        };
        let mut accs: Vec<Accumulator> = self.aggregates.iter().map(Accumulator::new).collect();
        let Some(first) = first else {
            self.done = true;
            if self.key_len == 0 && !self.started {
                self.types = accs.iter().map(Accumulator::result_type).collect();
                let row = aggregate::group_row(self.src, None, &mut accs).map_err(one)?;
                return Ok(Some(row));
            }
            return Ok(None);
        };
        self.started = true;
        let k = self.key_len;
        for a in &mut accs {
            a.add(s, self.src, &first[k..]).map_err(one)?;
        }
        while let Some(r) = self.input.next_row(s)? {
            if !same_row(&r[..k], &first[..k]) {
                self.pending = Some(r);
                break;
            }
            for a in &mut accs {
                a.add(s, self.src, &r[k..]).map_err(one)?;
            }
        }
        self.types = accs.iter().map(Accumulator::result_type).collect();
        let row = aggregate::group_row(self.src, Some(&first[k..]), &mut accs).map_err(one)?;
        Ok(Some(row))
    }
}

/// Orders rows by their first `descending.len()` values: NULLs first, each key ascending
/// or descending. A comparison that fails (values of types that do not compare) counts
/// as equal and is kept in `failure` for the caller to raise.
pub(super) fn key_order(
    descending: Vec<bool>,
    failure: Arc<Mutex<Option<SqlError>>>,
) -> Box<super::spill::RowCompare> {
    Box::new(move |a: &[Value], b: &[Value]| {
        for (i, desc) in descending.iter().enumerate() {
            let o = match (a[i].is_null(), b[i].is_null()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Less,
                (false, true) => Ordering::Greater,
                _ => match ops::compare(&a[i], &b[i]) {
                    Ok(o) => o.unwrap_or(Ordering::Equal),
                    Err(e) => {
                        failure.lock().unwrap().get_or_insert(e);
                        Ordering::Equal
                    }
                },
            };
            let o = if *desc { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    })
}

/// TOP's limit: rows, or a percentage of the rows there are.
#[derive(Clone, Copy)]
pub(super) enum Limit {
    Rows(u64),
    Percent(u64),
}

impl Limit {
    /// The rows it allows out of `count`.
    fn rows(self, count: u64) -> u64 {
        match self {
            Limit::Rows(n) => n,
            Limit::Percent(p) => (count * p).div_ceil(100),
        }
    }
}

/// Whether a streamed SELECT's rows go through a sort (ORDER BY, DISTINCT, and TOP
/// PERCENT, which needs the count first: through the sort, with no keys, in input order,
/// spilling past its memory) or are sent as they come: `finish_streamed`'s choice, which
/// SHOWPLAN_TEXT prints (showplan.rs).
pub(super) fn sorts(q: &Query, s: &Select, top: Option<Limit>) -> bool {
    !(matches!(top, None | Some(Limit::Rows(_))) && q.order_by.is_empty() && !s.distinct)
}

/// Where an ORDER BY item's value comes from: a select-list column (by alias, name or
/// ordinal), else the expression over the source row.
enum SortKey<'a> {
    Column(usize),
    Expr(&'a Expr),
}

impl Session {
    /// Runs `q` streamed if its shape allows; None when it needs the materializing path.
    pub(super) fn select_streamed(
        &mut self,
        q: &Query,
        out: &mut Out,
    ) -> Option<Result<(), Vec<SqlError>>> {
        if let Err(e) = super::select::refuse_unbuilt(q) {
            return Some(Err(e));
        }
        let QueryBody::Select(s) = &q.body else {
            return Some(self.select_set(q, out));
        };
        let single = match s.from.as_slice() {
            [TableSource::Table { name, .. }] => !self.is_cte(name),
            _ => false,
        };
        if !single && !s.from.is_empty() {
            return self.select_joined(q, s, out);
        }
        let [TableSource::Table { name, alias, hints }] = s.from.as_slice() else {
            return None;
        };
        // What `refuse_unbuilt` let through: no CTE, OFFSET, INTO or WITH TIES; hints only
        // those extentdb always honours.
        let plain = s.into.is_none()
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
        let t = match self.table_for(name, "SELECT") {
            Ok(t) => t,
            Err(e) => return Some(Err(e)),
        };
        let src = Source::single(
            Rowset {
                columns: t.columns(),
                rows: Vec::new(),
            },
            name.name().to_string(),
            alias.clone(),
        );
        let access = self.access_for(&t, s.where_clause.as_ref(), alias.as_deref());
        let locking = match self.row_locking(&t, false, hints) {
            Ok(l) => l,
            Err(e) => return Some(Err(e)),
        };
        let done = if aggregate::is_aggregate_query(s) {
            self.grouped_streamed(q, s, &t, &src, (access, &locking), out)?
        } else {
            (|| {
                let mut scan = TableScan::new(&t, access, &locking)?;
                self.finish_streamed(q, s, &src, &mut scan, out)
            })()
        };
        if done.is_ok() {
            self.report_io(&t, out);
        }
        Some(done)
    }

    /// GROUP BY and aggregates: the table's rows WHERE keeps, sorted by the grouping keys,
    /// folded group by group; then HAVING, the select list, ORDER BY and TOP over the
    /// groups. None (the materializing path) when GROUP BY has an aggregate whose type
    /// only its values tell.
    fn grouped_streamed(
        &mut self,
        q: &Query,
        s: &Select,
        t: &TableRef,
        src: &Source,
        (access, locking): (Access, &super::locking::RowLocking),
        out: &mut Out,
    ) -> Option<Result<(), Errors>> {
        let plan = match self.streamed_grouping(q, s, src)? {
            Ok(p) => p,
            Err(e) => return Some(Err(e)),
        };
        Some((|| {
            let mut scan = TableScan::new(t, access, locking)?;
            self.grouped_rows(&plan, s, src, &mut scan, out)
        })())
    }

    /// A grouped query's plan when its groups can stream (None: an aggregate under GROUP
    /// BY is typed by its values, which the materializing path sees first).
    pub(super) fn streamed_grouping(
        &mut self,
        q: &Query,
        s: &Select,
        src: &Source,
    ) -> Option<Result<aggregate::GroupingPlan, Errors>> {
        let plan = match self.plan_grouping(q, s, src, &[]) {
            Ok(p) => p,
            Err(e) => return Some(Err(e)),
        };
        let typed = plan.aggregates.iter().all(|a| a.result_type().is_some());
        if !typed && !s.group_by.is_empty() {
            return None;
        }
        // A computed grouping expression (or an aggregate) under grouping sets is typed
        // by its values, which the materializing path sees first.
        if let Some(sets) = &plan.sets {
            if !typed || !sets.keys_typed() {
                return None;
            }
        }
        Some(Ok(plan))
    }

    /// The groups of `input` (source rows), then HAVING, the select list, ORDER BY and
    /// TOP over them, sent.
    pub(super) fn grouped_rows(
        &mut self,
        plan: &aggregate::GroupingPlan,
        s: &Select,
        src: &Source,
        input: &mut dyn RowSource,
        out: &mut Out,
    ) -> Result<(), Errors> {
        let mut filtered = Filtered {
            input,
            condition: s.where_clause.as_ref(),
            src,
        };
        let input: &mut dyn RowSource = &mut filtered;
        if let Some(sets) = &plan.sets {
            return self.sets_rows(plan, sets, src, input, out);
        }
        let mut sorted;
        let keyed: &mut dyn RowSource = if s.group_by.is_empty() {
            input
        } else {
            sorted = self.sort_by_group(&s.group_by, src, input)?;
            &mut sorted
        };
        let mut groups = Grouped {
            input: keyed,
            key_len: s.group_by.len(),
            src,
            aggregates: &plan.aggregates,
            pending: None,
            started: false,
            done: false,
            types: Vec::new(),
        };
        if s.group_by.is_empty() {
            // One group: computed first, so an aggregate typed by its values is known.
            let row = groups.next_row(self)?.unwrap_or_default();
            let grouped = aggregate::grouped_source(src, &groups.types, Vec::new());
            let mut rows = vec![row].into_iter();
            return self.finish_streamed(&plan.query, &plan.select, &grouped, &mut rows, out);
        }
        let types: Vec<_> = plan
            .aggregates
            .iter()
            .map(|a| a.result_type().unwrap_or(SqlType::Int))
            .collect();
        let grouped = aggregate::grouped_source(src, &types, Vec::new());
        self.finish_streamed(&plan.query, &plan.select, &grouped, &mut groups, out)
    }

    /// A SELECT whose FROM clause joins, or reads a derived table or CTE: its rows
    /// (join.rs) through the same WHERE, grouping, select list, ORDER BY and TOP. None
    /// (the materializing path) for what `grouped_streamed` leaves to it.
    fn select_joined(
        &mut self,
        q: &Query,
        s: &Select,
        out: &mut Out,
    ) -> Option<Result<(), Errors>> {
        let leaves = match self.resolve_leaves(&s.from) {
            Ok(l) => l,
            Err(e) => return Some(Err(e)),
        };
        let (shape, mut rows) = match leaves.relation(self, &s.from, s.where_clause.as_ref()) {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        let src = shape.source();
        let done = if !aggregate::is_aggregate_query(s) {
            self.finish_streamed(q, s, &src, &mut *rows, out)
        } else {
            let plan = match self.streamed_grouping(q, s, &src)? {
                Ok(p) => p,
                Err(e) => return Some(Err(e)),
            };
            self.grouped_rows(&plan, s, &src, &mut *rows, out)
        };
        drop(rows);
        if done.is_ok() {
            leaves.report_io(self, out);
        }
        Some(done)
    }

    /// `input`'s rows each prefixed by its grouping keys, sorted by them (stable).
    fn sort_by_group(
        &mut self,
        by: &[Expr],
        src: &Source,
        input: &mut dyn RowSource,
    ) -> Result<SortedRows, Errors> {
        let failure = Arc::new(Mutex::new(None));
        let order = key_order(vec![false; by.len()], failure.clone());
        let mut sort = SortSpill::new(&self.spill_dir(), SORT_MEMORY_BYTES, order);
        while let Some(r) = input.next_row(self)? {
            let ctx = Session::ctx(src, &r);
            let mut keyed = Vec::with_capacity(by.len() + r.len());
            for e in by {
                keyed.push(self.eval(e, Some(&ctx)).map_err(one)?);
            }
            keyed.extend(r);
            sort.push(keyed).map_err(one)?;
        }
        let sorted = sort.finish().map_err(one)?;
        if let Some(e) = failure.lock().unwrap().take() {
            return Err(vec![e]);
        }
        Ok(sorted)
    }

    /// Where sorts spill: tempdb's data directory.
    pub(super) fn spill_dir(&self) -> std::path::PathBuf {
        spill_dir(&self.engine.instance)
    }

    /// WHERE, the select list, ORDER BY / DISTINCT and TOP over `input`, each row sent as
    /// it is made (unsorted) or as the sort gives it back.
    pub(super) fn finish_streamed(
        &mut self,
        q: &Query,
        s: &Select,
        src: &Source,
        input: &mut dyn RowSource,
        out: &mut Out,
    ) -> Result<(), Errors> {
        if super::window_functions::has_windows(q, s) {
            return self.finish_windowed(q, s, src, input, out);
        }
        if s.where_clause
            .as_ref()
            .is_some_and(aggregate::contains_window)
        {
            return Err(vec![msg(4108, &[])]);
        }
        let typer = ColumnTyper::new(self.select_header(s, Some(src)).map_err(one)?);
        let window = self.window(q, s).map_err(one)?;
        let top = window.limit;
        let mut filtered = Filtered {
            input,
            condition: s.where_clause.as_ref(),
            src,
        };
        let input: &mut dyn RowSource = &mut filtered;
        if sorts(q, s, top) {
            self.send_sorted(q, s, src, input, typer, window, out)
        } else {
            let top = self.capped_by_rowcount(top.map(|l| l.rows(0)));
            self.send_unsorted(s, src, input, typer, top, out)
        }
    }

    /// Projects and sends each row as it comes (after the first `TYPING_ROWS` when a
    /// column's type depends on its values).
    fn send_unsorted(
        &mut self,
        s: &Select,
        src: &Source,
        input: &mut dyn RowSource,
        mut typer: ColumnTyper,
        top: Option<u64>,
        out: &mut Out,
    ) -> Result<(), Errors> {
        let mut held: Option<Vec<Vec<Value>>> = Some(Vec::new());
        // The types sent before every row was seen (`ColumnTyper::check_fits`).
        let mut early: Option<Vec<(String, SqlType)>> = None;
        if typer.all_declared() {
            out.columns(typer.types(false));
            held = None;
        }
        let mut sent = 0u64;
        while top.is_none_or(|n| sent < n) && !out.gone() {
            let Some(r) = input.next_row(self)? else {
                break;
            };
            let v = self.project_row(s, Some(src), &r).map_err(one)?;
            sent += 1;
            let Some(h) = &mut held else {
                if let Some(types) = &early {
                    typer.check_fits(types, &v).map_err(one)?;
                }
                out.row(v);
                continue;
            };
            typer.observe(&v);
            h.push(v);
            if h.len() >= TYPING_ROWS {
                let types = typer.types(true);
                out.columns(types.clone());
                early = Some(types);
                held.take().into_iter().flatten().for_each(|v| out.row(v));
            }
        }
        if let Some(h) = held {
            out.columns(typer.types(false));
            h.into_iter().for_each(|v| out.row(v));
        }
        self.rows_affected(sent, out);
        Ok(())
    }

    /// Projects every row into a sort by the ORDER BY keys (then, for DISTINCT, by every
    /// column), then sends the sorted rows, each DISTINCT row once, up to TOP.
    #[allow(clippy::too_many_arguments)]
    fn send_sorted(
        &mut self,
        q: &Query,
        s: &Select,
        src: &Source,
        input: &mut dyn RowSource,
        mut typer: ColumnTyper,
        window: Window,
        out: &mut Out,
    ) -> Result<(), Errors> {
        let limit = window.limit;
        let names: Vec<String> = typer.types(false).into_iter().map(|(n, _)| n).collect();
        let keys = sort_keys(q, &names);
        if s.distinct && keys.iter().any(|k| matches!(k, SortKey::Expr(_))) {
            return Err(vec![msg(145, &[])]);
        }
        let width = names.len();
        let mut descending: Vec<bool> = q.order_by.iter().map(|o| o.descending).collect();
        if s.distinct {
            descending.extend(std::iter::repeat_n(false, width));
        }
        let failure = Arc::new(Mutex::new(None));
        // No keys (TOP PERCENT alone): a spool, which keeps input order without merging.
        let mut sort = if descending.is_empty() {
            SortSpill::fifo(&self.spill_dir(), SORT_MEMORY_BYTES)
        } else {
            let order = key_order(descending, failure.clone());
            SortSpill::new(&self.spill_dir(), SORT_MEMORY_BYTES, order)
        };
        let mut count = 0u64;
        while let Some(r) = input.next_row(self)? {
            let v = self.project_row(s, Some(src), &r).map_err(one)?;
            typer.observe(&v);
            let mut row = Vec::with_capacity(keys.len() + v.len());
            for k in &keys {
                row.push(match k {
                    SortKey::Column(i) => v[*i].clone(),
                    SortKey::Expr(e) => {
                        let ctx = Session::ctx(src, &r);
                        self.eval(e, Some(&ctx)).map_err(one)?
                    }
                });
            }
            row.extend(v);
            sort.push(row).map_err(one)?;
            count += 1;
        }
        let sorted = sort.finish().map_err(one)?;
        if let Some(e) = failure.lock().unwrap().take() {
            return Err(vec![e]);
        }
        let mut rows = Deduplicated {
            sorted,
            keys: keys.len(),
            distinct: s.distinct,
            last: None,
            last_keys: Vec::new(),
        };
        let (mut spooled, top) = match limit {
            // A percentage of the distinct rows: counted into a spool, then sent from it.
            Some(Limit::Percent(p)) if s.distinct => {
                let mut spool = SortSpill::fifo(&self.spill_dir(), SORT_MEMORY_BYTES);
                let mut distinct = 0u64;
                for v in rows.by_ref() {
                    spool.push(v.map_err(one)?).map_err(one)?;
                    distinct += 1;
                }
                let spool = spool.finish().map_err(one)?;
                (Some(spool), Some(Limit::Percent(p).rows(distinct)))
            }
            l => (None, l.map(|l| l.rows(count))),
        };
        // SET ROWCOUNT counts the rows sent, after ORDER BY and DISTINCT, like TOP.
        let top = self.capped_by_rowcount(top);
        out.columns(typer.types(false));
        let mut sent = 0u64;
        let mut skipped = 0u64;
        // WITH TIES: the ORDER BY keys of the last row TOP allowed.
        let mut tie: Option<Vec<Value>> = None;
        loop {
            let v = match &mut spooled {
                Some(spool) => spool.next(),
                None => rows.next(),
            };
            let Some(v) = v else {
                break;
            };
            let v = v.map_err(one)?;
            if out.gone() || self.cancelled() {
                break;
            }
            if skipped < window.skip {
                skipped += 1;
                continue;
            }
            if top.is_some_and(|n| sent >= n) {
                let tied = tie.as_ref().is_some_and(|k| same_row(k, &rows.last_keys));
                if !(window.ties && spooled.is_none() && tied) {
                    break;
                }
            } else if window.ties {
                tie = Some(rows.last_keys.clone());
            }
            out.row(v);
            sent += 1;
        }
        self.rows_affected(sent, out);
        Ok(())
    }

    /// The rows a SELECT gives of its ordered result: TOP's (rows or percent, WITH TIES),
    /// or OFFSET's rows skipped and FETCH's taken.
    pub(super) fn window(&mut self, q: &Query, s: &Select) -> Result<Window, SqlError> {
        let count = |s: &mut Session, e: &Expr| s.eval(e, None).and_then(|v| as_i64(&v));
        if let Some(offset) = &q.offset {
            if s.top.is_some() {
                return Err(msg(10741, &[]));
            }
            let skip = count(self, offset)?;
            if skip < 0 {
                return Err(msg(10742, &[]));
            }
            let fetch = match &q.fetch {
                Some(f) => match count(self, f)? {
                    n if n <= 0 => return Err(msg(10744, &[])),
                    n => Some(Limit::Rows(n as u64)),
                },
                None => None,
            };
            return Ok(Window {
                limit: fetch,
                skip: skip as u64,
                ties: false,
            });
        }
        let Some(top) = &s.top else {
            return Ok(Window::default());
        };
        if top.with_ties && q.order_by.is_empty() {
            return Err(msg(1062, &[]));
        }
        let n = count(self, &top.count)?.max(0) as u64;
        Ok(Window {
            limit: Some(if top.percent {
                Limit::Percent(n)
            } else {
                Limit::Rows(n)
            }),
            skip: 0,
            ties: top.with_ties,
        })
    }
}

/// Which of a SELECT's ordered rows it gives (`Session::window`).
#[derive(Clone, Copy, Default)]
pub(super) struct Window {
    pub(super) limit: Option<Limit>,
    /// OFFSET: rows skipped first.
    skip: u64,
    /// TOP ... WITH TIES: rows equal to the last one in the ORDER BY keys come too.
    ties: bool,
}

/// A sort's rows without their sort keys, each DISTINCT row once (equal rows are adjacent:
/// DISTINCT sorts by every column after the ORDER BY keys, which are select-list columns).
struct Deduplicated {
    sorted: SortedRows,
    keys: usize,
    distinct: bool,
    last: Option<Vec<Value>>,
    /// The sort keys of the row given last (WITH TIES compares them).
    last_keys: Vec<Value>,
}

impl Iterator for Deduplicated {
    type Item = Result<Vec<Value>, SqlError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let v = match self.sorted.next()? {
                Ok(mut row) => {
                    let v = row.split_off(self.keys);
                    self.last_keys = row;
                    v
                }
                Err(e) => return Some(Err(e)),
            };
            if !self.distinct {
                return Some(Ok(v));
            }
            if self.last.as_ref().is_some_and(|l| same_row(l, &v)) {
                continue;
            }
            self.last = Some(v.clone());
            return Some(Ok(v));
        }
    }
}

/// Each ORDER BY item's source: a select-list column by alias or name (one-part), an
/// ordinal, else the expression.
fn sort_keys<'a>(q: &'a Query, names: &[String]) -> Vec<SortKey<'a>> {
    q.order_by
        .iter()
        .map(|item| {
            let column = match &item.expr {
                Expr::Column(c) if c.parts.len() == 1 => {
                    names.iter().position(|n| n.eq_ignore_ascii_case(c.name()))
                }
                Expr::Literal(Literal::Integer(i)) => {
                    Some((*i as usize).saturating_sub(1)).filter(|i| *i < names.len())
                }
                _ => None,
            };
            match column {
                Some(i) => SortKey::Column(i),
                None => SortKey::Expr(&item.expr),
            }
        })
        .collect()
}

/// Where sorts and spools of `instance` spill: tempdb's data directory.
pub(super) fn spill_dir(instance: &extentdb_storage::instance::Instance) -> std::path::PathBuf {
    let tempdb = instance.database(TEMPDB_ID);
    let file = tempdb.and_then(|db| {
        let g = db.read().unwrap();
        g.catalog
            .files
            .iter()
            .find(|f| f.file_type != extentdb_format::file_header::FileType::Log)
            .map(|f| std::path::PathBuf::from(&f.physical_name))
    });
    match file.as_ref().and_then(|f| f.parent()) {
        Some(d) => d.to_path_buf(),
        None => instance.dir.clone(),
    }
}
