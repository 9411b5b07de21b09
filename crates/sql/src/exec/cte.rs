//! Common table expressions: `WITH name [(columns)] AS (query), ... SELECT ...`. A CTE is
//! in scope for its statement (`with_ctes`); each reference runs its query into a spool
//! (`cte_rows`), as SQL Server evaluates a CTE once per reference.
//!
//! A recursive CTE (its query names itself) is an anchor and a recursive member joined by
//! UNION ALL: the anchor's rows are the first level; the recursive member then runs with
//! the CTE's name bound to the previous level's rows (the working table), and its rows are
//! the next level, until a level is empty.
//!
//! Invariants:
//! 1. A recursive CTE's anchor does not name the CTE (246), its recursive member does,
//!    and the two are joined by UNION ALL (252); no other shape is run.
//! 2. Levels beyond OPTION (MAXRECURSION n) (100 when not given; 0: no limit) end the
//!    statement with 530 before the next level's rows are returned.
//! 3. Memory: one level's rows (the working table) and the result so far, each in a spool
//!    that spills past `SORT_MEMORY_BYTES`.
//! 4. Every level's values are converted to the anchor's column types.

use std::sync::Arc;

use super::spill::{SortSpill, Spool};
use super::stream::SORT_MEMORY_BYTES;
use super::subquery::{named_columns, Rows};
use super::Session;
use crate::ast::{CommonTableExpression, Query, QueryBody, SetOperator, TableSource};
use crate::convert::convert;
use crate::messages::{msg, SqlError};
use crate::types::SqlType;

/// Levels a recursive CTE may take without OPTION (MAXRECURSION).
const DEFAULT_MAX_RECURSION: u32 = 100;
/// The largest MAXRECURSION SQL Server accepts.
const MAX_RECURSION_LIMIT: u32 = 32767;

/// A CTE's rows as a reference reads them: its columns and a spool.
pub(super) type CteRows = (Vec<(String, SqlType)>, Arc<Spool>);

/// One CTE in scope.
pub(super) struct CteScope {
    cte: Arc<CommonTableExpression>,
    /// Its rows are being computed (a reference now is recursion).
    running: bool,
    /// While its recursive member runs: the previous level's rows.
    working: Option<CteRows>,
    /// OPTION (MAXRECURSION) of the statement that defined it.
    max_recursion: u32,
}

impl Session {
    /// Runs `f` with the query's common table expressions in scope.
    pub(super) fn with_ctes<T>(
        &mut self,
        q: &Query,
        f: impl FnOnce(&mut Session) -> Result<T, Vec<SqlError>>,
    ) -> Result<T, Vec<SqlError>> {
        if q.ctes.is_empty() {
            return f(self);
        }
        let max_recursion = max_recursion(q)?;
        for cte in &q.ctes {
            self.scopes.ctes.push(CteScope {
                cte: Arc::new(cte.clone()),
                running: false,
                working: None,
                max_recursion,
            });
        }
        let result = f(self);
        let kept = self.scopes.ctes.len() - q.ctes.len();
        self.scopes.ctes.truncate(kept);
        result
    }

    /// True when a common table expression of this name is in scope.
    pub(super) fn scopes_have_cte(&self, name: &str) -> bool {
        self.scopes
            .ctes
            .iter()
            .any(|c| c.cte.name.eq_ignore_ascii_case(name))
    }

    /// The rows of the CTE a one-part name refers to, if one is in scope: inside its own
    /// recursive member, the working table; else its query's rows.
    pub(super) fn cte_rows(&mut self, name: &str) -> Option<Result<CteRows, SqlError>> {
        let i = self
            .scopes
            .ctes
            .iter()
            .rposition(|c| c.cte.name.eq_ignore_ascii_case(name))?;
        let scope = &self.scopes.ctes[i];
        if let Some(working) = &scope.working {
            return Some(Ok(working.clone()));
        }
        if scope.running {
            // Only a recursive member's reference may name the CTE (invariant 1).
            return Some(Err(super::lower::not_yet(
                "a recursive common table expression referenced outside its recursive member",
            )));
        }
        let cte = scope.cte.clone();
        self.scopes.ctes[i].running = true;
        let rows = if names_itself(&cte.query, &cte.name) {
            self.recursive_rows(i, &cte)
        } else {
            self.query_rows(&cte.query, None)
                .and_then(|r| named_columns(r, &cte.columns, &cte.name))
        };
        self.scopes.ctes[i].running = false;
        Some(rows.map(|r| (r.columns, Arc::new(r.spool))))
    }

    /// A recursive CTE's rows, level by level (invariants 1-4).
    fn recursive_rows(&mut self, i: usize, cte: &CommonTableExpression) -> Result<Rows, SqlError> {
        let QueryBody::SetOperation {
            op: SetOperator::UnionAll,
            left,
            right,
        } = &cte.query.body
        else {
            return Err(msg(252, &[&cte.name]));
        };
        if body_names(left, &cte.name) || !body_names(right, &cte.name) {
            return Err(msg(246, &[&cte.name]));
        }
        let anchor = self.branch_rows(left).map_err(first)?;
        let anchor = named_columns(anchor, &cte.columns, &cte.name)?;
        let types: Vec<SqlType> = anchor.columns.iter().map(|c| c.1).collect();
        let mut all = SortSpill::fifo(&self.spill_dir(), SORT_MEMORY_BYTES);
        let mut count = 0u64;
        for r in anchor.spool.rows() {
            all.push(r?)?;
            count += 1;
        }
        let limit = self.scopes.ctes[i].max_recursion;
        let mut working = Arc::new(anchor.spool);
        let mut level = 0u32;
        loop {
            self.scopes.ctes[i].working = Some((anchor.columns.clone(), working.clone()));
            let next = self.branch_rows(right).map_err(first);
            self.scopes.ctes[i].working = None;
            let next = next?;
            if next.count == 0 {
                break;
            }
            level += 1;
            if limit != 0 && level > limit {
                return Err(msg(530, &[&limit]));
            }
            let mut spool = SortSpill::fifo(&self.spill_dir(), SORT_MEMORY_BYTES);
            for r in next.spool.rows() {
                let r: Vec<_> = r?
                    .iter()
                    .zip(&types)
                    .map(|(v, t)| convert(v, *t, None))
                    .collect::<Result<_, _>>()?;
                all.push(r.clone())?;
                spool.push(r)?;
                count += 1;
            }
            working = Arc::new(spool.finish_rewindable()?);
        }
        Ok(Rows {
            columns: anchor.columns,
            spool: all.finish_rewindable()?,
            count,
        })
    }
}

fn first(mut e: Vec<SqlError>) -> SqlError {
    e.remove(0)
}

/// OPTION (MAXRECURSION n) of a statement (invariant 2); 310 past SQL Server's limit.
fn max_recursion(q: &Query) -> Result<u32, Vec<SqlError>> {
    for h in &q.hints {
        if let Some(n) = h.strip_prefix("MAXRECURSION") {
            let n: i64 = n.trim().parse().map_err(|_| vec![msg(102, &[&n.trim()])])?;
            if !(0..=MAX_RECURSION_LIMIT as i64).contains(&n) {
                return Err(vec![msg(310, &[&n, &MAX_RECURSION_LIMIT])]);
            }
            return Ok(n as u32);
        }
    }
    Ok(DEFAULT_MAX_RECURSION)
}

/// True when a query's FROM clauses name `cte` (a one-part name).
fn names_itself(q: &Query, cte: &str) -> bool {
    body_names(&q.body, cte)
}

fn body_names(b: &QueryBody, cte: &str) -> bool {
    match b {
        QueryBody::Select(s) => s.from.iter().any(|t| source_names(t, cte)),
        QueryBody::SetOperation { left, right, .. } => {
            body_names(left, cte) || body_names(right, cte)
        }
        QueryBody::Parenthesized(q) => names_itself(q, cte),
    }
}

fn source_names(t: &TableSource, cte: &str) -> bool {
    match t {
        TableSource::Table { name, .. } => {
            name.parts.len() == 1 && name.name().eq_ignore_ascii_case(cte)
        }
        TableSource::Derived { query, .. } => names_itself(query, cte),
        TableSource::Join { left, right, .. } => {
            source_names(left, cte) || source_names(right, cte)
        }
        TableSource::Pivot { source, .. } | TableSource::Unpivot { source, .. } => {
            source_names(source, cte)
        }
        TableSource::Function { .. } => false,
    }
}
