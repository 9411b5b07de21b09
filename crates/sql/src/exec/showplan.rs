//! SET SHOWPLAN_TEXT ON and SET SHOWPLAN_ALL ON: each statement is described, not run.
//! Under SHOWPLAN_TEXT it returns a result set with one column, StmtText, holding its
//! text, then one whose StmtText rows draw its plan as SQL Server does (`  |--Clustered
//! Index Seek(OBJECT:(...), SEEK:(...) ORDERED FORWARD)`, each input five columns further
//! in). Under SHOWPLAN_ALL it returns one result set of SQL Server's 18 columns: the
//! statement's row, then one row per operator (`showplan/operator.rs`: the columns, the
//! numbering, and which estimates are figures and which NULL). Both forms are read off the
//! one operator tree built here; the two options exclude each other (`set_options::Showplan`).
//!
//! The plan is the executor's own decisions, taken by the functions the executor calls,
//! never re-derived here: the access (`seek::access_for`: a clustered seek's key ranges, a
//! nonclustered index seek with its lookups, or a scan) as a read under the statement's
//! locking makes it (`Access::read_under`, key-range locking never reading an index), the
//! sort or not of a SELECT (`stream::sorts`), its TOP (`stream`'s `window`) lowered to SET
//! ROWCOUNT's cap (`Session::capped_by_rowcount`).
//!
//! Described: SELECT from one user table or from no table (a select list, WHERE, ORDER BY,
//! TOP n; GROUP BY, aggregates and HAVING as `stream::grouped_rows` runs them: a Sort by
//! the grouping keys and a Stream Aggregate, the plan `stream::streamed_grouping` gives;
//! DISTINCT without ORDER BY or aggregates as `stream::send_sorted` runs it: a Sort
//! (`Sort(DISTINCT ORDER BY:(...))`, logical Distinct Sort) by every select-list column);
//! a CROSS JOIN or comma list of two user tables as `join::Leaves::relation` runs it (the
//! left table's read as `join::leftmost_filter` and `join::leftmost_access` make it, with
//! the WHERE conjuncts `Leaves::pushable` lets it check, a Nested Loops(Inner Join) over it
//! and a Table Spool (logical Lazy Spool) of the right table, read once, then a Filter of
//! the whole WHERE on the joined rows); a SELECT of a table with computed columns not
//! PERSISTED (`read_plan`: a Compute Scalar defining them over the read, as
//! `TableRef::decode` computes them on every row, WHERE in a Filter above it); INSERT ... VALUES (a Constant Scan of the rows); DELETE and UPDATE of one table without
//! FROM or OUTPUT (their matched rows spooled before the first change, as `dml::matching`
//! does; an UPDATE's access is `dml::update_access`, the nonclustered indexes a write
//! changes `index_usage::written_indexes`). Everything else under SHOWPLAN_TEXT is
//! refused with 40517 naming it (INSERT other than VALUES, or with TOP, OUTPUT or an
//! IDENTITY column, joins with ON: the executor decides a seek or a spool, and over a
//! spool held in memory a hash index, only while it runs them (`JoinRows::open`,
//! `Inner::indexed`), so no plan says it before; aggregates or DISTINCT over a join;
//! aggregates the materializing path runs (typed by their values
//! under GROUP BY, grouping sets, without FROM), DISTINCT with ORDER BY, aggregates or
//! no FROM, window functions, subqueries,
//! TOP PERCENT / WITH TIES, OFFSET, table variables, a write a FOREIGN KEY or CHECK
//! constraint checks, a write or a join of a table with computed columns, an UPDATE of a
//! unique or clustered key column or of a variable,
//! other statements), never a partial or invented plan.
//!
//! Where the text differs from SQL Server's: a WHERE predicate is printed as written
//! (column names as the statement gives them, not four-part), and on the operator that
//! reads the base rows: the executor evaluates the whole WHERE on every row it reads
//! (seek.rs invariant 1), the seek's conjuncts too. Constants are not parameterized
//! (SQL Server's simple parameterization prints `[@1]`).
//!
//! Invariants:
//! 1. Under SHOWPLAN_TEXT or SHOWPLAN_ALL a statement changes nothing and returns nothing
//!    but its result sets (two, or one), or an error; only SET statements run (`mod.rs`).
//! 2. A SET SHOWPLAN_* is the only statement of its batch, else Msg 1067 and nothing of
//!    the batch runs (`alone_in_batch`).

use std::ops::Bound;

use extentdb_storage::scan::{KeyPrefix, KeyRange};

use super::lower::not_yet;
use super::set_options::Showplan;
use super::tables::{Access, TableRef};
use super::{Flow, Out, Output, Session};
use crate::ast::{Delete, Expr, Query, QueryBody, Select, SelectItem, Statement, Update};
use crate::ast::{Insert, InsertSource, StatementKind, TableSource};
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value, MAX_LENGTH};

mod operator;

use operator::{Operator, Rows};

type Errors = Vec<SqlError>;

/// 40517 for what neither SHOWPLAN form describes (module doc): never a partial plan.
fn refused(what: &str) -> Errors {
    vec![not_yet(&format!("SHOWPLAN_TEXT / SHOWPLAN_ALL of {what}"))]
}

/// Whether a statement is a SET of a SHOWPLAN option.
fn sets_showplan(s: &Statement) -> bool {
    matches!(&s.kind, StatementKind::SetOption { options, .. }
        if options.iter().any(|o| o.starts_with("SHOWPLAN_")))
}

/// Whether `s` is, or holds, a SET of a SHOWPLAN option.
fn holds_showplan(s: &Statement) -> bool {
    use StatementKind as K;
    match &s.kind {
        K::Block(b) => b.iter().any(holds_showplan),
        K::If {
            then_branch,
            else_branch,
            ..
        } => holds_showplan(then_branch) || else_branch.as_deref().is_some_and(holds_showplan),
        K::While { body, .. } => holds_showplan(body),
        _ => sets_showplan(s),
    }
}

/// Invariant 2: Msg 1067 when a SET SHOWPLAN_* shares its batch.
pub(super) fn alone_in_batch(statements: &[Statement]) -> Result<(), SqlError> {
    match statements {
        [s] if sets_showplan(s) => Ok(()),
        _ if statements.iter().any(holds_showplan) => Err(msg(1067, &[])),
        _ => Ok(()),
    }
}

/// Whether a statement runs under SHOWPLAN_TEXT rather than being described (invariant 1).
pub(super) fn runs_under_showplan(s: &Statement) -> bool {
    matches!(s.kind, StatementKind::SetOption { .. })
}

/// `[db].[schema].[table]`.
fn object(t: &TableRef) -> String {
    format!(
        "[{}].[{}].[{}]",
        t.db_name, t.entry.schema_name, t.entry.name
    )
}

/// A constant as a plan prints it: numbers in parentheses, text quoted.
fn constant(v: &Value, t: SqlType) -> String {
    let text = super::eval::to_text(v);
    match (v, t) {
        (Value::Null, _) => "NULL".into(),
        (Value::Text(_), SqlType::NChar(_) | SqlType::NVarChar(_)) => {
            format!("N'{}'", text.replace('\'', "''"))
        }
        (
            Value::Text(_)
            | Value::Date(_)
            | Value::DateTime(_)
            | Value::DateTime2(_)
            | Value::Guid(_),
            _,
        ) => format!("'{}'", text.replace('\'', "''")),
        _ => format!("({text})"),
    }
}

/// One key range as a seek predicate over `columns` (four-part name, type): an equality
/// for each leading column both bounds hold to one value, then the next column's bounds.
/// None for a bound beyond that column, which this form cannot print.
fn range_text(columns: &[(String, SqlType)], r: &KeyRange) -> Option<String> {
    let prefix = |b: &Bound<KeyPrefix>| match b {
        Bound::Included(p) | Bound::Excluded(p) => p.clone(),
        Bound::Unbounded => Vec::new(),
    };
    let (lo, hi) = (prefix(&r.lower), prefix(&r.upper));
    let value = |i: usize, bytes: &Option<Vec<u8>>| {
        let (_, t) = &columns[i];
        let v = crate::rowcodec::decode(*t, bytes.as_deref()).ok()?;
        Some(constant(&v, *t))
    };
    let equal = lo.iter().zip(&hi).take_while(|(a, b)| a == b).count();
    let whole_point = r.is_point(lo.len());
    let points = if whole_point { lo.len() } else { equal };
    let mut parts = Vec::new();
    for (i, b) in lo.iter().enumerate().take(points) {
        parts.push(format!("{}={}", columns.get(i)?.0, value(i, b)?));
    }
    if !whole_point {
        if lo.len() > points + 1 || hi.len() > points + 1 {
            return None;
        }
        let mut bound = |p: &KeyPrefix, b: &Bound<KeyPrefix>, incl: &str, excl: &str| {
            if let Some(bytes) = p.get(points) {
                let op = if matches!(b, Bound::Included(_)) {
                    incl
                } else {
                    excl
                };
                parts.push(format!(
                    "{} {op} {}",
                    columns.get(points)?.0,
                    value(points, bytes)?
                ));
            }
            Some(())
        };
        bound(&lo, &r.lower, ">=", ">")?;
        bound(&hi, &r.upper, "<=", "<")?;
    }
    Some(parts.join(" AND "))
}

/// The table hints of each side when `from` is a CROSS JOIN (or comma list) of two user
/// tables (not common table expressions nor system views), else None.
fn cross_join_of_tables(from: &[TableSource]) -> Option<[&[String]; 2]> {
    match from {
        [a, b] => Some([user_table(a)?, user_table(b)?]),
        [TableSource::Join {
            left,
            kind: crate::ast::JoinKind::Cross,
            right,
            on: None,
        }] => Some([user_table(left)?, user_table(right)?]),
        _ => None,
    }
}

/// A table source's hints when it names a table outside `sys` and INFORMATION_SCHEMA.
fn user_table(ts: &TableSource) -> Option<&[String]> {
    let TableSource::Table { name, hints, .. } = ts else {
        return None;
    };
    let schema = name.qualifier().unwrap_or("dbo");
    let system =
        schema.eq_ignore_ascii_case("sys") || schema.eq_ignore_ascii_case("information_schema");
    (!system).then_some(hints.as_slice())
}

/// A seek's rows when each of its ranges is one whole key of a unique index (at most one
/// row each: `columns` is the key's length), else unknown.
fn keys_sought(ranges: &[KeyRange], columns: usize) -> Rows {
    match ranges.iter().all(|r| r.is_point(columns)) {
        true => Rows::Known(ranges.len() as f64),
        false => Rows::Unknown,
    }
}

/// The SEEK:(...) argument of key ranges over the key columns `ids` of `t`.
fn seek_text(t: &TableRef, ids: &[u16], ranges: &[KeyRange]) -> Result<String, Errors> {
    if ranges.is_empty() {
        return Err(refused("a seek of no key range"));
    }
    let columns: Vec<(String, SqlType)> = ids
        .iter()
        .filter_map(|id| {
            let p = t.entry.columns.iter().position(|c| c.column_id == *id)?;
            Some((
                format!("{}.[{}]", object(t), t.entry.columns[p].name),
                t.types[p],
            ))
        })
        .collect();
    let texts: Option<Vec<String>> = ranges.iter().map(|r| range_text(&columns, r)).collect();
    texts
        .map(|t| t.join(" OR "))
        .ok_or_else(|| refused("a seek range beyond one key column"))
}

/// An expression as a plan prints it (`expr_text`'s form without its outermost
/// parentheses); 40517 for what has no text form (a subquery).
fn expr_text(e: &Expr) -> Result<String, Errors> {
    let text = super::expr_text::expr(e)
        .ok_or_else(|| refused("a subquery, a window function or DEFAULT in an expression"))?;
    match e {
        // A constant keeps its parentheses, as SQL Server prints it: `(1)`.
        Expr::Literal(_) => Ok(text),
        _ => Ok(without_outer_parentheses(text)),
    }
}

/// `(a+b)` as `a+b`; `(a)+(b)` as it is.
fn without_outer_parentheses(text: String) -> String {
    let mut depth = 0usize;
    let mut in_string = false;
    for (i, c) in text.char_indices() {
        match c {
            '\'' => in_string = !in_string,
            '(' if !in_string => depth += 1,
            ')' if !in_string => {
                depth -= 1;
                if depth == 0 && i + 1 < text.len() {
                    return text;
                }
            }
            _ if depth == 0 => return text,
            _ => {}
        }
    }
    match depth == 0 && text.len() >= 2 {
        true => text[1..text.len() - 1].to_string(),
        false => text,
    }
}

/// `, WHERE:(...)` for a filter, its top-level conjuncts joined by AND, else nothing.
fn where_text(filter: &[&Expr]) -> Result<String, Errors> {
    if filter.is_empty() {
        return Ok(String::new());
    }
    Ok(format!(", WHERE:({})", conjuncts_text(filter)?))
}

/// Conjuncts as a plan prints them, joined by AND.
fn conjuncts_text(conjuncts: &[&Expr]) -> Result<String, Errors> {
    let texts: Result<Vec<String>, Errors> = conjuncts.iter().map(|c| expr_text(c)).collect();
    Ok(texts?.join(" AND "))
}

/// A filter's top-level conjuncts (none for no filter).
fn conjuncts(filter: Option<&Expr>) -> Vec<&Expr> {
    let mut conjuncts = Vec::new();
    if let Some(f) = filter {
        super::seek::flatten_and(f, &mut conjuncts);
    }
    conjuncts
}

impl Session {
    /// Invariant 1: a statement's text and its plan: under SHOWPLAN_TEXT as two result
    /// sets (its text, its plan's lines), under SHOWPLAN_ALL as one (its row, then one per
    /// operator), both drawn from the one plan built here.
    pub(super) fn show_plan(
        &mut self,
        s: &Statement,
        mode: Showplan,
        out: &mut Out,
    ) -> Result<Flow, Errors> {
        let (mut plan, kind) = match &s.kind {
            StatementKind::Select(q) => (self.select_plan(q)?, "SELECT"),
            StatementKind::Delete(d) => (self.delete_plan(d)?, "DELETE"),
            StatementKind::Update(u) => (self.update_plan(u)?, "UPDATE"),
            StatementKind::Insert(i) => (self.insert_plan(i)?, "INSERT"),
            other => {
                let what = super::lower::statement_name(other);
                return Err(refused(what));
            }
        };
        let text: String = self
            .batch_text
            .chars()
            .skip(s.span.0)
            .take(s.span.1 - s.span.0)
            .collect();
        match mode {
            Showplan::Text => {
                let mut lines = Vec::new();
                operator::draw(&plan, "  ", false, &mut lines);
                let column = vec![("StmtText".to_string(), SqlType::NVarChar(MAX_LENGTH))];
                for rows in [vec![text], lines] {
                    out.push(Output::Rows {
                        columns: column.clone(),
                        rows: rows.into_iter().map(|l| vec![Value::Text(l)]).collect(),
                    });
                }
            }
            Showplan::All => {
                plan.count_tables()?;
                let statement = self.showplan_statement;
                out.push(Output::Rows {
                    columns: operator::all_columns(),
                    rows: operator::all_rows(text, statement, kind, &plan),
                });
            }
        }
        Ok(Flow::Normal)
    }

    /// The operator reading `t`'s rows by `access` (with their lookups), the conjuncts
    /// `filter` evaluated on it; `kept` the rows they are estimated to keep
    /// (`Session::filter_estimate`), its EstimateRows when the read is a scan.
    fn access_plan(
        t: &TableRef,
        access: &Access,
        filter: &[&Expr],
        kept: Option<f64>,
    ) -> Result<Operator, Errors> {
        let filtered = !filter.is_empty();
        let filter = where_text(filter)?;
        let clustered = match (&t.entry.primary_key, t.entry.index_id) {
            (Some((name, ids)), 1) => Some((format!("{}.[{name}]", object(t)), ids.clone())),
            _ => None,
        };
        let whole = match (filtered, kept) {
            (true, Some(rows)) => Rows::Known(rows),
            (true, None) => Rows::Unknown,
            (false, _) => Rows::Table(t.db.clone(), t.entry.allocation_unit_id),
        };
        Ok(match (access, clustered) {
            (Access::Scan, Some((pk, _))) => {
                let argument = format!("OBJECT:({pk}){filter}");
                Operator::new("Clustered Index Scan", argument).rows(whole)
            }
            (Access::Scan, None) if t.entry.index_id == 1 => {
                return Err(refused("a clustered index without a PRIMARY KEY"))
            }
            (Access::Scan, None) => {
                let argument = format!("OBJECT:({}){filter}", object(t));
                Operator::new("Table Scan", argument).rows(whole)
            }
            (Access::Seek(ranges), Some((pk, ids))) => {
                let argument = format!(
                    "OBJECT:({pk}), SEEK:({}){filter} ORDERED FORWARD",
                    seek_text(t, &ids, ranges)?
                );
                Operator::new("Clustered Index Seek", argument).rows(keys_sought(ranges, ids.len()))
            }
            (Access::Seek(_), None) => unreachable!("a seek of a heap (Chunks::held)"),
            (Access::IndexSeek(seek), clustered) => index_seek_plan(t, seek, clustered, &filter)?,
        })
    }

    /// A SELECT's read of `t` by `access` with WHERE `filter`: WHERE on the read, or, where
    /// `TableRef::decode` computes columns not PERSISTED on each row it decodes
    /// (computed_columns.rs invariant 5), a Compute Scalar defining them over the read and
    /// WHERE (which may read them) in a Filter above it.
    fn read_plan(
        t: &TableRef,
        access: &Access,
        filter: Option<&Expr>,
        kept: Option<f64>,
    ) -> Result<Operator, Errors> {
        let computed: Vec<String> = (t.entry.columns.iter())
            .filter_map(|c| Some((c, c.computed.as_ref().filter(|d| !d.is_persisted)?)))
            .map(|(c, d)| {
                let definition = without_outer_parentheses(d.definition.clone());
                format!("{}.[{}]={definition}", object(t), c.name)
            })
            .collect();
        if computed.is_empty() {
            return Self::access_plan(t, access, &conjuncts(filter), kept);
        }
        let mut op = Self::access_plan(t, access, &[], None)?.under(compute_scalar(computed));
        if let Some(f) = filter {
            let argument = format!("WHERE:({})", conjuncts_text(&conjuncts(Some(f)))?);
            op = op.under(Operator::new("Filter", argument));
        }
        Ok(op)
    }

    /// How a statement reads `t` with filter `filter` (`alias` as FROM names it): the
    /// executor's choice (module doc).
    fn planned_access(
        &mut self,
        t: &TableRef,
        filter: Option<&Expr>,
        alias: Option<&str>,
        (write, hints): (bool, &[String]),
    ) -> Result<Access, Errors> {
        let key_ranges = self.locks_key_ranges(t, write, hints)?;
        Ok(self.access_for(t, filter, alias).read_under(key_ranges))
    }

    fn select_plan(&mut self, q: &Query) -> Result<Operator, Errors> {
        super::select::refuse_unbuilt(q)?;
        let QueryBody::Select(s) = &q.body else {
            return Err(refused("UNION, INTERSECT or EXCEPT"));
        };
        refuse_unplanned_select(q, s)?;
        let mut op_table: Option<(TableRef, Option<String>)> = None;
        let mut op = match s.from.as_slice() {
            // No table: the materializing path evaluates the select list once.
            [] if s.where_clause.is_none() && q.order_by.is_empty() && s.top.is_none() => {
                Operator::new("Constant Scan", String::new()).rows(Rows::Known(1.0))
            }
            [] => return Err(refused("WHERE, ORDER BY or TOP without FROM")),
            [TableSource::Table { name, alias, hints }] if !self.is_cte(name) => {
                let schema = name.qualifier().unwrap_or("dbo");
                if schema.eq_ignore_ascii_case("sys")
                    || schema.eq_ignore_ascii_case("information_schema")
                {
                    return Err(refused("a system view"));
                }
                let t = self.table_for(name, "SELECT")?;
                refuse_table_variable(&t)?;
                let filter = s.where_clause.as_ref();
                let access = self.planned_access(&t, filter, alias.as_deref(), (false, hints))?;
                let kept = self.filter_estimate(&t, filter, alias.as_deref());
                let op = Self::read_plan(&t, &access, filter, kept)?;
                op_table = Some((t, alias.clone()));
                op
            }
            from if cross_join_of_tables(from).is_some() => self.cross_join_plan(s, from)?,
            _ => return Err(refused("a join with ON or a derived table")),
        };
        // DISTINCT as `stream::send_sorted` does it for one table's rows; the table's
        // column names stand for a `*` among its keys.
        let distinct: Option<Vec<String>> = match (&op_table, s.distinct) {
            (_, false) => None,
            (Some((t, _)), true)
                if q.order_by.is_empty() && !super::aggregate::is_aggregate_query(s) =>
            {
                Some(t.entry.columns.iter().map(|c| c.name.clone()).collect())
            }
            _ => {
                return Err(refused(
                    "DISTINCT with ORDER BY, aggregates, a join or no FROM",
                ))
            }
        };
        let grouped = match (&op_table, super::aggregate::is_aggregate_query(s)) {
            (_, false) => None,
            (None, true) => return Err(refused("aggregates over a join or without FROM")),
            (Some((t, alias)), true) => {
                let (grouping, ops) = self.aggregate_plan(q, s, t, alias.as_deref())?;
                op = ops.into_iter().fold(op, Operator::under);
                Some(grouping)
            }
        };
        match &grouped {
            Some(g) => {
                let names = g.aggregates.len();
                let rename = |text: String| renamed_aggregates(text, names);
                self.finish_plan(&g.query, &g.select, op, (Some(names), &rename), None)
            }
            None => self.finish_plan(q, s, op, (None, &|t| t), distinct.as_deref()),
        }
    }

    /// A CROSS JOIN (or comma list) of two user tables as `Leaves::relation` runs it: the
    /// left table read (through a seek where WHERE confines its key: `join::leftmost_filter`,
    /// `join::leftmost_access`) with the WHERE conjuncts it checks alone (`Leaves::pushable`),
    /// a Nested Loops joining each of its rows with every row of the right table, which is
    /// read once into a spool (`JoinRows::open`: without ON nothing seeks it), then WHERE on
    /// every joined row.
    fn cross_join_plan(&mut self, s: &Select, from: &[TableSource]) -> Result<Operator, Errors> {
        let hints = cross_join_of_tables(from).expect("a cross join (select_plan)");
        let leaves = self.resolve_leaves(from)?;
        let (Some((left, exposed)), Some((right, _))) = (leaves.table(0), leaves.table(1)) else {
            return Err(refused("a join of a view"));
        };
        for t in [left, right] {
            refuse_computed(t)?;
            refuse_table_variable(t)?;
        }
        let filter = s.where_clause.as_ref();
        let leftmost = super::join::leftmost_filter(from, filter);
        let pushed = leftmost.map_or_else(Vec::new, |f| leaves.pushable(0, f));
        let access = super::join::leftmost_access(self, left, exposed, leftmost)
            .read_under(self.locks_key_ranges(left, false, hints[0])?);
        let outer = Self::access_plan(left, &access, &pushed, None)?;
        self.locks_key_ranges(right, false, hints[1])?;
        let spool = Operator::logical("Table Spool", "Lazy Spool", String::new());
        let inner =
            Self::access_plan(right, &Access::Scan, &[], None)?.under(spool.rows(Rows::AsInput));
        let mut op = Operator::join("Nested Loops", "Inner Join", String::new())
            .rows(Rows::Product)
            .inputs(vec![outer, inner]);
        if let Some(f) = filter {
            let argument = format!("WHERE:({})", conjuncts_text(&conjuncts(Some(f)))?);
            op = op.under(Operator::new("Filter", argument));
        }
        Ok(op)
    }

    /// What a (grouped) query does to its rows after reading (and grouping) them, as
    /// `stream::finish_streamed` does it: HAVING (a grouped query's WHERE), the select
    /// list, the sort or not (`stream::sorts`), TOP lowered to SET ROWCOUNT's cap.
    /// `aggregates`: for a grouped query, how many [ExprN] names its aggregates took;
    /// `rename` maps their hidden columns to those names. `distinct`: for SELECT DISTINCT
    /// of one table, its columns' names.
    fn finish_plan(
        &mut self,
        q: &Query,
        s: &Select,
        mut op: Operator,
        (aggregates, rename): (Option<usize>, &dyn Fn(String) -> String),
        distinct: Option<&[String]>,
    ) -> Result<Operator, Errors> {
        // A grouped query's WHERE is its HAVING; a plain one's is on the read (access_plan).
        if let Some(having) = s.where_clause.as_ref().filter(|_| aggregates.is_some()) {
            let argument = format!("WHERE:({})", rename(expr_text(having)?));
            op = op.under(Operator::new("Filter", argument));
        }
        let computed = computed_items(s, aggregates.unwrap_or(0))?;
        if !computed.is_empty() {
            let computed: Vec<String> = computed.into_iter().map(rename).collect();
            op = op.under(compute_scalar(computed));
        }
        let top = self.window(q, s).map_err(|e| vec![e])?.limit;
        if let (Some(columns), true) = (distinct, super::stream::sorts(q, s, top)) {
            let argument = format!("DISTINCT ORDER BY:({})", distinct_keys(s, columns)?);
            op = op.under(Operator::logical("Sort", "Distinct Sort", argument));
        } else if super::stream::sorts(q, s, top) {
            let keys: Result<Vec<String>, Errors> = q
                .order_by
                .iter()
                .map(|o| {
                    let dir = if o.descending { "DESC" } else { "ASC" };
                    Ok(format!("{} {dir}", rename(expr_text(&o.expr)?)))
                })
                .collect();
            let argument = format!("ORDER BY:({})", keys?.join(", "));
            op = op.under(Operator::new("Sort", argument).rows(Rows::AsInput));
        }
        let rows = top.map(|l| match l {
            super::stream::Limit::Rows(n) => n,
            super::stream::Limit::Percent(_) => unreachable!("refused above"),
        });
        if let Some(n) = self.capped_by_rowcount(rows) {
            op = op.under(top_operator(&format!("({n})"), Some(n as f64)));
        }
        Ok(op)
    }

    /// A grouped SELECT's grouping as `stream::grouped_rows` does it: the rows sorted by
    /// the GROUP BY keys (none without GROUP BY), then folded group by group: the
    /// operators (lowest first) and the plan `stream::streamed_grouping` gives, which the
    /// rest of the query runs over. What that path leaves to the materializing one
    /// (aggregates typed by their values under GROUP BY, grouping sets) is refused.
    fn aggregate_plan(
        &mut self,
        q: &Query,
        s: &Select,
        t: &TableRef,
        alias: Option<&str>,
    ) -> Result<(super::aggregate::GroupingPlan, Vec<Operator>), Errors> {
        let rowset = super::views::Rowset {
            columns: t.columns(),
            rows: Vec::new(),
        };
        let name = t.entry.name.clone();
        let src = super::select::Source::single(rowset, name, alias.map(str::to_string));
        let grouping = match self.streamed_grouping(q, s, &src) {
            None => return Err(refused("an aggregate typed by its values")),
            Some(plan) => plan?,
        };
        if grouping.sets.is_some() {
            return Err(refused("ROLLUP, CUBE or GROUPING SETS"));
        }
        let mut ops = Vec::new();
        let keys: Result<Vec<String>, Errors> = s.group_by.iter().map(expr_text).collect();
        let keys = keys?;
        if !keys.is_empty() {
            let order: Vec<String> = keys.iter().map(|k| format!("{k} ASC")).collect();
            let argument = format!("ORDER BY:({})", order.join(", "));
            ops.push(Operator::new("Sort", argument).rows(Rows::AsInput));
        }
        let mut define = Vec::new();
        for (i, a) in grouping.aggregates.iter().enumerate() {
            define.push(format!("[Expr{}]={}", 1001 + i, expr_text(a.call())?));
        }
        let mut arguments = Vec::new();
        if !keys.is_empty() {
            arguments.push(format!("GROUP BY:({})", keys.join(", ")));
        }
        if !define.is_empty() {
            arguments.push(format!("DEFINE:({})", define.join(", ")));
        }
        // Without GROUP BY the aggregate gives one row, whatever it reads.
        let rows = match keys.is_empty() {
            true => Rows::Known(1.0),
            false => Rows::Unknown,
        };
        let aggregate = Operator::logical("Stream Aggregate", "Aggregate", arguments.join(" "));
        ops.push(aggregate.defines(define).rows(rows));
        Ok((grouping, ops))
    }

    fn delete_plan(&mut self, d: &Delete) -> Result<Operator, Errors> {
        super::select::refuse_unbuilt_hints(&d.options)?;
        if !d.from.is_empty() || d.output.is_some() {
            return Err(refused("DELETE with FROM or OUTPUT"));
        }
        let t = self.table_for(&d.table, "DELETE")?;
        refuse_computed(&t)?;
        refuse_constrained_write(self, &t, false)?;
        let filter = d.where_clause.as_ref();
        let access = self.access_for(&t, filter, None);
        let rows = self.write_input(&t, (access, filter), &d.top, &d.hints)?;
        Ok(rows.under(write_operator(&t, "Delete", None, "")))
    }

    /// INSERT ... VALUES: the rows as a Constant Scan, each column SET from its value, its
    /// DEFAULT or NULL (`dml::new_row`), into the table and every nonclustered index.
    fn insert_plan(&mut self, ins: &Insert) -> Result<Operator, Errors> {
        let InsertSource::Values(rows) = &ins.source else {
            return Err(refused("INSERT other than VALUES"));
        };
        if ins.output.is_some() || ins.top.is_some() {
            return Err(refused("INSERT with TOP or OUTPUT"));
        }
        let t = self.table_for(&ins.table, "INSERT")?;
        refuse_computed(&t)?;
        refuse_constrained_write(self, &t, true)?;
        if t.entry.columns.iter().any(|c| c.identity.is_some()) {
            return Err(refused("INSERT into a table with an IDENTITY column"));
        }
        self.locks_key_ranges(&t, true, &ins.hints)?;
        let targets = self.insert_targets(&ins.columns, false, &t)?;
        super::dml::values_fit(ins, rows, &targets)?;
        let mut values = Vec::with_capacity(rows.len());
        for r in rows {
            let texts: Result<Vec<String>, Errors> = r.iter().map(expr_text).collect();
            values.push(format!("({})", texts?.join(",")));
        }
        let set: Vec<String> = (t.entry.columns.iter().enumerate())
            .map(|(i, c)| {
                let value = match targets.iter().position(|&p| p == i) {
                    Some(k) => format!("[Expr{}]", 1001 + k),
                    None if c.default_sql.is_empty() => "NULL".to_string(),
                    None => c.default_sql.clone(),
                };
                format!("{}.[{}] = {value}", object(&t), c.name)
            })
            .collect();
        let scan = Operator::new("Constant Scan", format!("VALUES:({})", values.join(",")))
            .rows(Rows::Known(rows.len() as f64));
        let set = format!(", SET:({})", set.join(", "));
        Ok(scan.under(write_operator(&t, "Insert", None, &set)))
    }

    fn update_plan(&mut self, u: &Update) -> Result<Operator, Errors> {
        super::select::refuse_unbuilt_hints(&u.options)?;
        if !u.from.is_empty() || u.output.is_some() {
            return Err(refused("UPDATE with FROM or OUTPUT"));
        }
        let t = self.table_for(&u.table, "UPDATE")?;
        refuse_computed(&t)?;
        refuse_constrained_write(self, &t, true)?;
        let targets = super::dml::update_targets(u, &t)?;
        if targets.iter().any(Option::is_none) {
            return Err(refused("an UPDATE that sets a variable"));
        }
        if super::dml::sets_unique_key(&t, &targets) {
            return Err(refused("an UPDATE of a unique or clustered key column"));
        }
        let mut set = Vec::new();
        for (a, col) in u.assignments.iter().zip(&targets) {
            let col = col.expect("refused above");
            let name = &t.entry.columns[col].name;
            set.push(format!(
                "{}.[{name}] = {}",
                object(&t),
                expr_text(&a.value)?
            ));
        }
        let filter = u.where_clause.as_ref();
        let access = self.update_access(u, &t, &targets);
        // The new rows are spooled too, all of them before the first write (`UpdateChanges`).
        let rows = self
            .write_input(&t, (access, filter), &u.top, &u.hints)?
            .under(spool());
        let changed: Vec<usize> = targets.iter().flatten().copied().collect();
        let set = format!(", SET:({})", set.join(", "));
        Ok(rows.under(write_operator(&t, "Update", Some(&changed), &set)))
    }

    /// The rows an UPDATE or DELETE changes, as `dml::matching` finds them: the access
    /// (as the write's locking reads it) with WHERE, SET ROWCOUNT's stop, the spool of
    /// every match made before the first change, then TOP's first rows of it.
    fn write_input(
        &mut self,
        t: &TableRef,
        (access, filter): (Access, Option<&Expr>),
        top: &Option<crate::ast::Top>,
        hints: &[String],
    ) -> Result<Operator, Errors> {
        if top.as_ref().is_some_and(|t| t.percent) {
            return Err(refused("TOP PERCENT"));
        }
        let access = access.read_under(self.locks_key_ranges(t, true, hints)?);
        let kept = self.filter_estimate(t, filter, None);
        let mut op = Self::access_plan(t, &access, &conjuncts(filter), kept)?;
        if let Some(n) = self.rowcount_stop(top) {
            op = op.under(top_operator(&format!("({n})"), Some(n as f64)));
        }
        op = op.under(spool());
        if let Some(top) = top {
            let count = match &top.count {
                Expr::Literal(crate::ast::Literal::Integer(n)) => Some(*n as f64),
                _ => None,
            };
            op = op.under(top_operator(&expr_text(&top.count)?, count));
        }
        Ok(op)
    }
}

/// UPDATE and DELETE are described only where no constraint adds to their plan: no
/// FOREIGN KEY referencing the table, and for an UPDATE none on it and no CHECK
/// constraint (it checks its new rows).
fn refuse_constrained_write(s: &Session, t: &TableRef, update: bool) -> Result<(), Errors> {
    refuse_table_variable(t)?;
    let constrained = s.is_referenced(t)
        || (update && !(t.entry.foreign_keys.is_empty() && t.entry.checks.is_empty()));
    match constrained {
        true => Err(refused("a write a FOREIGN KEY or CHECK constraint checks")),
        false => Ok(()),
    }
}

/// A write's operator on `t` (`kind`: "Insert", "Update" or "Delete"): its clustered index
/// or heap, and each nonclustered index the write changes (`set`: an UPDATE's columns),
/// then `tail`. It writes every row it reads.
fn write_operator(t: &TableRef, kind: &str, set: Option<&[usize]>, tail: &str) -> Operator {
    let mut objects = vec![match (&t.entry.primary_key, t.entry.index_id) {
        (Some((name, _)), 1) => format!("{}.[{name}]", object(t)),
        _ => object(t),
    }];
    objects.extend(
        super::index_usage::written_indexes(t, set)
            .into_iter()
            .map(|(_, name)| format!("{}.[{name}]", object(t))),
    );
    let (physical, logical) = match (t.entry.index_id == 1, kind) {
        (true, "Insert") => ("Clustered Index Insert", "Insert"),
        (true, "Update") => ("Clustered Index Update", "Update"),
        (true, _) => ("Clustered Index Delete", "Delete"),
        (false, "Insert") => ("Table Insert", "Insert"),
        (false, "Update") => ("Table Update", "Update"),
        (false, _) => ("Table Delete", "Delete"),
    };
    let argument = format!("OBJECT:({}){tail}", objects.join(", "));
    Operator::logical(physical, logical, argument).rows(Rows::AsInput)
}

/// The spool a write fills with every row it changes before the first change (an eager
/// spool: it reads all its input before giving a row).
fn spool() -> Operator {
    Operator::logical("Table Spool", "Eager Spool", String::new()).rows(Rows::AsInput)
}

/// `Top(TOP EXPRESSION:(count))`: at most `rows` rows when that is known.
fn top_operator(count: &str, rows: Option<f64>) -> Operator {
    let argument = format!("TOP EXPRESSION:({count})");
    Operator::new("Top", argument).rows(rows.map_or(Rows::Unknown, Rows::AtMost))
}

/// `Compute Scalar(DEFINE:(...))` of the values `defined` (`[Expr1001]=...`); as many rows
/// as it reads.
fn compute_scalar(defined: Vec<String>) -> Operator {
    let argument = format!("DEFINE:({})", defined.join(", "));
    Operator::new("Compute Scalar", argument)
        .defines(defined)
        .rows(Rows::AsInput)
}

/// An index seek with a lookup of each record's row (a Key Lookup, printed as SQL Server's
/// SHOWPLAN_TEXT prints it, or a RID Lookup), WHERE (`filter`, `, WHERE:(...)` or empty)
/// on the rows looked up.
fn index_seek_plan(
    t: &TableRef,
    seek: &super::index_seek::IndexSeek,
    clustered: Option<(String, Vec<u16>)>,
    filter: &str,
) -> Result<Operator, Errors> {
    let (name, key, unique) = {
        let db = t.db.read().unwrap();
        let ix = db
            .table_by_id(seek.index_oid)
            .ok_or_else(|| refused("an index dropped meanwhile"))?;
        let info = ix.index_of.as_ref().expect("an index entry");
        let key = info.sources[..info.key_columns as usize].to_vec();
        (ix.name.clone(), key, info.unique)
    };
    let argument = format!(
        "OBJECT:({}.[{name}]), SEEK:({}) ORDERED FORWARD",
        object(t),
        seek_text(t, &key, &seek.ranges)?
    );
    let rows = match (unique, seek.estimate) {
        (true, _) => keys_sought(&seek.ranges, key.len()),
        (false, Some(rows)) => Rows::Known(rows),
        (false, None) => Rows::Unknown,
    };
    let index = Operator::new("Index Seek", argument).rows(rows);
    // Each record looks up its one row, which WHERE may then drop.
    let (looked_up, joined) = match filter.is_empty() {
        true => (Rows::Known(1.0), Rows::AsInput),
        false => (Rows::Unknown, Rows::Unknown),
    };
    let (refs, lookup) = match clustered {
        Some((pk, ids)) => {
            let keys = seek_text_columns(t, &ids);
            let equal: Vec<String> = keys.iter().map(|k| format!("{k}={k}")).collect();
            let seek = equal.join(" AND ");
            let argument = format!("OBJECT:({pk}), SEEK:({seek}){filter} LOOKUP ORDERED FORWARD");
            (
                keys.join(", "),
                Operator::new("Clustered Index Seek", argument),
            )
        }
        None => {
            let argument = format!(
                "OBJECT:({}), SEEK:([Bmk1000]=[Bmk1000]){filter} LOOKUP ORDERED FORWARD",
                object(t)
            );
            (
                "[Bmk1000]".to_string(),
                Operator::new("RID Lookup", argument),
            )
        }
    };
    let argument = format!("OUTER REFERENCES:({refs})");
    Ok(Operator::join("Nested Loops", "Inner Join", argument)
        .rows(joined)
        .inputs(vec![index, lookup.rows(looked_up)]))
}

/// `[db].[schema].[table].[column]` of each of `t`'s columns `ids`.
fn seek_text_columns(t: &TableRef, ids: &[u16]) -> Vec<String> {
    ids.iter()
        .filter_map(|id| t.entry.columns.iter().find(|c| c.column_id == *id))
        .map(|c| format!("{}.[{}]", object(t), c.name))
        .collect()
}

fn refuse_table_variable(t: &TableRef) -> Result<(), Errors> {
    match t.variable {
        Some(_) => Err(refused("a table variable")),
        None => Ok(()),
    }
}

/// The SELECT shapes this module does not describe (module doc).
fn refuse_unplanned_select(q: &Query, s: &Select) -> Result<(), Errors> {
    let refusal = if !q.ctes.is_empty() {
        Some("a common table expression")
    } else if s.into.is_some() {
        Some("SELECT INTO")
    } else if super::window_functions::has_windows(q, s) {
        Some("window functions")
    } else if q.offset.is_some() || s.top.as_ref().is_some_and(|t| t.percent || t.with_ties) {
        Some("OFFSET, TOP PERCENT or WITH TIES")
    } else if s
        .items
        .iter()
        .any(|i| matches!(i, SelectItem::Assign { .. }))
    {
        Some("an assignment SELECT")
    } else {
        None
    };
    match refusal {
        Some(what) => Err(refused(what)),
        None => Ok(()),
    }
}

/// The select list's computed items as Compute Scalar defines them: `[Expr1001]=...`,
/// numbered after the `taken` names the aggregates have.
fn computed_items(s: &Select, taken: usize) -> Result<Vec<String>, Errors> {
    let mut defined = Vec::new();
    for item in &s.items {
        if let SelectItem::Expr { expr, .. } = item {
            if !matches!(expr, Expr::Column(_)) {
                let n = 1001 + taken + defined.len();
                defined.push(format!("[Expr{n}]={}", expr_text(expr)?));
            }
        }
    }
    Ok(defined)
}

/// The keys a SELECT DISTINCT without ORDER BY sorts its rows by, as `stream::send_sorted`
/// does: every select-list column, ascending (a `*`'s: each of `columns`; a computed
/// item's: its `[ExprN]`, numbered as `computed_items` numbers them).
fn distinct_keys(s: &Select, columns: &[String]) -> Result<String, Errors> {
    let mut keys = Vec::new();
    let mut computed = 0;
    for item in &s.items {
        match item {
            SelectItem::Wildcard { .. } => keys.extend(columns.iter().map(|c| format!("[{c}]"))),
            SelectItem::Expr {
                expr: e @ Expr::Column(_),
                ..
            } => keys.push(expr_text(e)?),
            SelectItem::Expr { .. } => {
                keys.push(format!("[Expr{}]", 1001 + computed));
                computed += 1;
            }
            SelectItem::Assign { .. } => unreachable!("refused (refuse_unplanned_select)"),
        }
    }
    let keys: Vec<String> = keys.into_iter().map(|k| format!("{k} ASC")).collect();
    Ok(keys.join(", "))
}

/// A grouped query's text with each aggregate's hidden column (`aggregate::hidden_name`)
/// named as Stream Aggregate defines it, `[Expr1001]` on.
fn renamed_aggregates(mut text: String, aggregates: usize) -> String {
    for i in (0..aggregates).rev() {
        let hidden = format!("[{}]", super::aggregate::hidden_name(i));
        text = text.replace(&hidden, &format!("[Expr{}]", 1001 + i));
    }
    text
}

/// Computed columns are drawn only for a SELECT of one table (`read_plan`): a write (which
/// computes them, computed_columns.rs invariant 1) or a join of a table that has one is
/// refused rather than shown without them.
fn refuse_computed(t: &TableRef) -> Result<(), Errors> {
    match t.entry.columns.iter().any(|c| c.computed.is_some()) {
        true => Err(refused(
            "a write or a join of a table with computed columns",
        )),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_wrapping_pair_of_parentheses_goes() {
        let strip = |s: &str| without_outer_parentheses(s.to_string());
        assert_eq!(strip("([w]+(1))"), "[w]+(1)");
        assert_eq!(strip("(1)+(2)"), "(1)+(2)");
        assert_eq!(strip("[w]"), "[w]");
        assert_eq!(strip("('(')"), "'('");
        assert_eq!(strip("(')')+(1)"), "(')')+(1)");
    }
}
