//! UNION [ALL], INTERSECT and EXCEPT: each branch runs as its own SELECT into a spool
//! (`subquery.rs`), the branches combine into one spool, and the statement's ORDER BY,
//! OFFSET and TOP apply to the combined rows through the streamed SELECT's last steps.
//!
//! Invariants:
//! 1. Every branch has as many columns as the first (205); the result's columns are named
//!    by the first branch and typed by SQL Server's precedence over all branches
//!    (`convert::fitting_type`), every value converted to its column's type.
//! 2. UNION, INTERSECT and EXCEPT compare rows as DISTINCT does (NULLs equal, the
//!    comparison rules of `=` otherwise) and give each distinct row once; UNION ALL keeps
//!    every row. Sorts and spools spill past `SORT_MEMORY_BYTES` (spill.rs invariant 2).

use std::cmp::Ordering;
use std::sync::{Arc, Mutex};

use super::select::{same_row, Source};
use super::spill::{SortSpill, SortedRows, SpoolCursor};
use super::stream::{key_order, RowSource, SORT_MEMORY_BYTES};
use super::subquery::Rows;
use super::views::Rowset;
use super::{Out, Session};
use crate::ast::{Expr, Literal, Query, QueryBody, Select, SelectItem, SetOperator};
use crate::convert::convert;
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value};

type Errors = Vec<SqlError>;

fn one(e: SqlError) -> Errors {
    vec![e]
}

impl Session {
    /// A query whose body is a set operation (or a parenthesized query): its rows, then
    /// the statement's ORDER BY, OFFSET and TOP.
    pub(super) fn select_set(&mut self, q: &Query, out: &mut Out) -> Result<(), Errors> {
        let rows = self.branch_rows(&q.body)?;
        let bound = order_bound_to_first_branch(q);
        let q = bound.as_ref().unwrap_or(q);
        let src = Source::single(
            Rowset {
                columns: rows.columns.clone(),
                rows: Vec::new(),
            },
            String::new(),
            None,
        );
        let all = Select::of_items(vec![SelectItem::Wildcard { qualifier: None }]);
        let mut input = Spooled {
            rows: &rows,
            cursor: SpoolCursor::default(),
        };
        self.finish_streamed(q, &all, &src, &mut input, out)
    }

    pub(super) fn branch_rows(&mut self, body: &QueryBody) -> Result<Rows, Errors> {
        match body {
            QueryBody::Select(s) => {
                let q = Query {
                    ctes: Vec::new(),
                    body: QueryBody::Select(s.clone()),
                    order_by: Vec::new(),
                    offset: None,
                    fetch: None,
                    hints: Vec::new(),
                };
                self.query_rows(&q, None).map_err(one)
            }
            QueryBody::Parenthesized(q) => self.query_rows(q, None).map_err(one),
            QueryBody::SetOperation { op, left, right } => {
                let left = self.branch_rows(left)?;
                let right = self.branch_rows(right)?;
                self.combine(*op, left, right)
            }
        }
    }

    /// Two branches' rows combined by `op` (invariants 1 and 2).
    fn combine(&mut self, op: SetOperator, left: Rows, right: Rows) -> Result<Rows, Errors> {
        if left.columns.len() != right.columns.len() {
            return Err(vec![msg(205, &[])]);
        }
        let columns: Vec<(String, SqlType)> = left
            .columns
            .iter()
            .zip(&right.columns)
            .map(|((n, a), (_, b))| (n.clone(), crate::convert::fitting_type(*a, *b)))
            .collect();
        let types: Vec<SqlType> = columns.iter().map(|c| c.1).collect();
        let dir = self.spill_dir();
        let mut spool = SortSpill::fifo(&dir, SORT_MEMORY_BYTES);
        let mut count = 0u64;
        let mut emit = |r: Vec<Value>| -> Result<(), Errors> {
            count += 1;
            spool.push(r).map_err(one)
        };
        match op {
            SetOperator::UnionAll => {
                for side in [&left, &right] {
                    for r in side.spool.rows() {
                        emit(converted(r.map_err(one)?, &types)?)?;
                    }
                }
            }
            SetOperator::Union => {
                let failure = Arc::new(Mutex::new(None));
                let order = key_order(vec![false; types.len()], failure.clone());
                let mut sort = SortSpill::new(&dir, SORT_MEMORY_BYTES, order);
                for side in [&left, &right] {
                    for r in side.spool.rows() {
                        sort.push(converted(r.map_err(one)?, &types)?)
                            .map_err(one)?;
                    }
                }
                let mut sorted = Distinct::new(sort.finish().map_err(one)?);
                while let Some(r) = sorted.next_row()? {
                    emit(r)?;
                }
                failed(&failure)?;
            }
            SetOperator::Intersect | SetOperator::Except => {
                let failure = Arc::new(Mutex::new(None));
                let mut l = self.distinct_sorted(&left, &types, &failure)?;
                let mut r = self.distinct_sorted(&right, &types, &failure)?;
                let compare = key_order(vec![false; types.len()], failure.clone());
                let keep_common = op == SetOperator::Intersect;
                let mut b = r.next_row()?;
                while let Some(a) = l.next_row()? {
                    let mut o = Ordering::Less;
                    while let Some(x) = &b {
                        o = compare(&a, x);
                        if o != Ordering::Greater {
                            break;
                        }
                        b = r.next_row()?;
                    }
                    let common = b.is_some() && o == Ordering::Equal;
                    if common == keep_common {
                        emit(a)?;
                    }
                }
                failed(&failure)?;
            }
        }
        Ok(Rows {
            columns,
            spool: spool.finish_rewindable().map_err(one)?,
            count,
        })
    }

    /// A branch's rows converted, sorted and each distinct row once.
    fn distinct_sorted(
        &mut self,
        rows: &Rows,
        types: &[SqlType],
        failure: &Arc<Mutex<Option<SqlError>>>,
    ) -> Result<Distinct, Errors> {
        let order = key_order(vec![false; types.len()], failure.clone());
        let mut sort = SortSpill::new(&self.spill_dir(), SORT_MEMORY_BYTES, order);
        for r in rows.spool.rows() {
            sort.push(converted(r.map_err(one)?, types)?).map_err(one)?;
        }
        Ok(Distinct::new(sort.finish().map_err(one)?))
    }
}

/// A comparison that failed while sorting (values of types that do not compare).
fn failed(failure: &Arc<Mutex<Option<SqlError>>>) -> Result<(), Errors> {
    match failure.lock().unwrap().take() {
        Some(e) => Err(vec![e]),
        None => Ok(()),
    }
}

/// A row's values converted to the result's column types (invariant 1).
fn converted(row: Vec<Value>, types: &[SqlType]) -> Result<Vec<Value>, Errors> {
    row.into_iter()
        .zip(types)
        .map(|(v, t)| convert(&v, *t, None).map_err(one))
        .collect()
}

/// Sorted rows, each distinct row once (adjacent equal rows skipped).
struct Distinct {
    sorted: SortedRows,
    last: Option<Vec<Value>>,
}

impl Distinct {
    fn new(sorted: SortedRows) -> Distinct {
        Distinct { sorted, last: None }
    }

    fn next_row(&mut self) -> Result<Option<Vec<Value>>, Errors> {
        for r in self.sorted.by_ref() {
            let r = r.map_err(one)?;
            if self.last.as_ref().is_some_and(|l| same_row(l, &r)) {
                continue;
            }
            self.last = Some(r.clone());
            return Ok(Some(r));
        }
        Ok(None)
    }
}

/// A combined result's rows, read once.
struct Spooled<'a> {
    rows: &'a Rows,
    cursor: SpoolCursor,
}

impl RowSource for Spooled<'_> {
    fn next_row(&mut self, _: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        self.cursor.next_row(&self.rows.spool).map_err(one)
    }
}

/// The leftmost SELECT of a set operation: the one whose select list names its columns.
fn first_select(body: &QueryBody) -> &Select {
    match body {
        QueryBody::Select(s) => s,
        QueryBody::SetOperation { left, .. } => first_select(left),
        QueryBody::Parenthesized(q) => first_select(&q.body),
    }
}

/// As SQL Server binds them, a set operation's ORDER BY items that are qualified column
/// references (`t.c`, which no column of the combined rows carries) name the column of
/// the first SELECT whose item is that same reference: rewritten to its ordinal. None when
/// no item needs it; an item matching nothing is left for the usual 4104.
fn order_bound_to_first_branch(q: &Query) -> Option<Query> {
    let first = first_select(&q.body);
    // A wildcard before the item would move its ordinal: bound only up to the first one.
    let plain = first
        .items
        .iter()
        .take_while(|i| !matches!(i, SelectItem::Wildcard { .. }))
        .count();
    let position = |n: &crate::ast::ObjectName| {
        first.items[..plain].iter().position(|i| match i {
            SelectItem::Expr {
                expr: Expr::Column(m),
                ..
            } => {
                m.parts.len() == n.parts.len()
                    && m.parts
                        .iter()
                        .zip(&n.parts)
                        .all(|(a, b)| a.eq_ignore_ascii_case(b))
            }
            _ => false,
        })
    };
    let mut bound = None;
    for (k, item) in q.order_by.iter().enumerate() {
        let Expr::Column(n) = &item.expr else {
            continue;
        };
        if n.parts.len() < 2 {
            continue;
        }
        if let Some(i) = position(n) {
            let q = bound.get_or_insert_with(|| q.clone());
            q.order_by[k].expr = Expr::Literal(Literal::Integer(i as i64 + 1));
        }
    }
    bound
}
