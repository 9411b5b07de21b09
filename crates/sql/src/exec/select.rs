//! SELECT: without FROM (expressions and variable assignment), and from one system view or
//! user table with WHERE, GROUP BY and aggregates (see `aggregate`), HAVING, DISTINCT,
//! ORDER BY and TOP. Joins, subqueries and set operations are not here yet.

use std::cmp::Ordering;

use super::aggregate;
use super::errors;
use super::eval::{as_i64, value_type, RowCtx};
use super::lower::not_yet;
use super::views::{self, Rowset};
use super::{Out, Output, Session};
use crate::ast::{Query, QueryBody, Select, SelectItem, TableSource};
use crate::messages::{msg, SqlError};
use crate::ops;
use crate::types::{SqlType, Value};

/// Result columns and rows.
type Projection = (Vec<(String, SqlType)>, Vec<Vec<Value>>);

/// The rows one FROM source gives, with the name and alias expressions may qualify by.
pub(super) struct Source {
    pub rowset: Rowset,
    pub table: String,
    pub alias: Option<String>,
    /// A join's sources and each column's source (`RowCtx::parts`, `part_of`); empty
    /// for one table source.
    pub parts: Vec<String>,
    pub part_of: Vec<u32>,
}

impl Source {
    /// The columns `*` or `q.*` stands for: all, or those of the source `q` names.
    pub fn wildcard(
        &self,
        qualifier: Option<&crate::ast::ObjectName>,
    ) -> Result<Vec<usize>, SqlError> {
        let all = 0..self.visible_columns();
        let Some(q) = qualifier.map(|q| q.name()) else {
            return Ok(all.collect());
        };
        if self.parts.is_empty() {
            let named = q.eq_ignore_ascii_case(self.alias.as_deref().unwrap_or(&self.table));
            return if named {
                Ok(all.collect())
            } else {
                Err(msg(107, &[&q]))
            };
        }
        let Some(p) = self.parts.iter().position(|n| n.eq_ignore_ascii_case(q)) else {
            return Err(msg(107, &[&q]));
        };
        Ok(all.filter(|&i| self.part_of[i] == p as u32).collect())
    }

    /// How many columns come before the hidden ones (aggregates', window functions'),
    /// which are always last and which `*` does not stand for.
    pub fn visible_columns(&self) -> usize {
        let columns = &self.rowset.columns;
        columns.len()
            - columns
                .iter()
                .rev()
                .take_while(|(n, _)| aggregate::is_hidden(n))
                .count()
    }

    /// The same source without its rows (its columns and names), for evaluating over rows
    /// held elsewhere.
    pub fn shape(&self) -> Source {
        Source {
            rowset: Rowset {
                columns: self.rowset.columns.clone(),
                rows: Vec::new(),
            },
            table: self.table.clone(),
            alias: self.alias.clone(),
            parts: self.parts.clone(),
            part_of: self.part_of.clone(),
        }
    }

    /// The column a reference names, if exactly one.
    pub fn position(&self, name: &crate::ast::ObjectName) -> Option<usize> {
        Session::ctx(self, &[]).position(name)
    }

    /// The rows of one table source.
    pub fn single(rowset: Rowset, table: String, alias: Option<String>) -> Source {
        Source {
            rowset,
            table,
            alias,
            parts: Vec::new(),
            part_of: Vec::new(),
        }
    }
}

/// Types the columns a select list leaves open (`select_header`) from the values they take,
/// row by row: a type every value seen fits (`fitting`: the longest text, the widest
/// integer, a decimal with the most integral digits and the largest scale, the type of
/// highest precedence), so no value is cut, rounded or lost when it is sent in the
/// column's type. (Typed by the first value, `UPPER(name)` cut every later name to the
/// first one's length, and a decimal with more digits than the first came out NULL.)
/// A computed character column typed so
/// (VARCHAR) becomes NVARCHAR when a value has a character beyond U+00FF: such text came
/// from a Unicode source (an NVARCHAR column through UPPER, `+`, ISNULL ...), which SQL
/// Server types NVARCHAR, and as VARCHAR a client would receive it in code page 1252 with
/// those characters turned into '?'.
pub(super) struct ColumnTyper {
    columns: Vec<(String, Option<SqlType>)>,
    /// For each column: a type every non-NULL value so far fits, whether some text went
    /// beyond U+00FF, and the longest text in UTF-16 units.
    seen: Vec<(Option<SqlType>, bool, usize)>,
}

impl ColumnTyper {
    pub(super) fn new(columns: Vec<(String, Option<SqlType>)>) -> ColumnTyper {
        let seen = vec![(None, false, 1); columns.len()];
        ColumnTyper { columns, seen }
    }

    pub(super) fn observe(&mut self, row: &[Value]) {
        for ((_, declared), (v, seen)) in self.columns.iter().zip(row.iter().zip(&mut self.seen)) {
            if declared.is_some() {
                continue;
            }
            let (fit, unicode, units) = seen;
            if !v.is_null() {
                let t = value_type(v);
                *fit = Some(fit.map_or(t, |f| crate::convert::fitting_type(f, t)));
            }
            if let Value::Text(s) = v {
                *unicode |= s.chars().any(|c| c as u32 > 0xFF);
                *units = (*units).max(s.encode_utf16().count());
            }
        }
    }

    /// Checks that a row streamed after the columns were sent as `sent` (`types(true)`)
    /// fits them: a computed column's value that the sent type would cut or round is the
    /// statement's error (8115, as a value overflowing its column's type in SQL Server),
    /// never a changed value.
    pub(super) fn check_fits(
        &self,
        sent: &[(String, SqlType)],
        row: &[Value],
    ) -> Result<(), SqlError> {
        for (((_, declared), (_, t)), v) in self.columns.iter().zip(sent).zip(row) {
            if declared.is_some() || v.is_null() {
                continue;
            }
            if crate::convert::fitting_type(*t, value_type(v)) != *t {
                return Err(msg(
                    8115,
                    &[&"expression", &crate::convert::data_type_name(*t)],
                ));
            }
        }
        Ok(())
    }

    /// True when every column's type is known without a row.
    pub(super) fn all_declared(&self) -> bool {
        self.columns.iter().all(|(_, t)| t.is_some())
    }

    /// The columns' types from what was observed; with `more` (rows beyond these are still
    /// to come, streamed), widened so a later value fits too: text NVARCHAR(MAX), binary
    /// VARBINARY(MAX), a decimal precision 38.
    pub(super) fn types(&self, more: bool) -> Vec<(String, SqlType)> {
        self.columns
            .iter()
            .zip(&self.seen)
            .map(|((n, declared), &(first, unicode, units))| {
                let t = declared.unwrap_or_else(|| {
                    let t = match (first.unwrap_or(SqlType::Int), unicode, units) {
                        (SqlType::VarChar(_), true, n) if n > 4000 => {
                            SqlType::NVarChar(crate::types::MAX_LENGTH)
                        }
                        (SqlType::VarChar(_), true, n) => SqlType::NVarChar(n as u32),
                        (t, _, _) => t,
                    };
                    if more {
                        widened(t)
                    } else {
                        t
                    }
                });
                (n.clone(), t)
            })
            .collect()
    }
}

/// Types the columns `select_header` left open from all the rows' values (`ColumnTyper`).
pub(super) fn type_columns(
    columns: Vec<(String, Option<SqlType>)>,
    rows: &[Vec<Value>],
    more: bool,
) -> Vec<(String, SqlType)> {
    let mut typer = ColumnTyper::new(columns);
    for r in rows {
        typer.observe(r);
    }
    typer.types(more)
}

/// A type every later value of a computed column fits (`ColumnTyper::types` with `more`).
pub(super) fn widened(t: SqlType) -> SqlType {
    use crate::types::MAX_LENGTH;
    match t {
        SqlType::VarChar(_) | SqlType::NVarChar(_) => SqlType::NVarChar(MAX_LENGTH),
        SqlType::VarBinary(_) => SqlType::VarBinary(MAX_LENGTH),
        SqlType::Decimal { scale, .. } => SqlType::Decimal {
            precision: 38,
            scale,
        },
        t => t,
    }
}

/// The parts of a query that are parsed but not built yet: refused (40517) rather than
/// dropped, so no statement returns a silently wrong result (issue 22 builds them). Query
/// hints are accepted only where extentdb always does what they ask: MAXDOP (a query runs on
/// one thread), RECOMPILE (no plan is cached) and MAXRECURSION (cte.rs).
pub(super) fn refuse_unbuilt(q: &Query) -> Result<(), Vec<SqlError>> {
    refuse_unbuilt_hints(&q.hints)?;
    if let QueryBody::Select(s) = &q.body {
        if s.into.is_some() {
            return Err(vec![not_yet("SELECT ... INTO")]);
        }
    }
    Ok(())
}

/// A statement's OPTION (...) hints (a query's, UPDATE's, DELETE's, MERGE's): MAXDOP (the
/// statement runs on one thread), RECOMPILE (no plan is cached) and MAXRECURSION (cte.rs)
/// are built; any other is refused (40517).
pub(super) fn refuse_unbuilt_hints(hints: &[String]) -> Result<(), Vec<SqlError>> {
    match hints.iter().find(|h| {
        !(h.starts_with("MAXDOP") || h.starts_with("MAXRECURSION") || h.as_str() == "RECOMPILE")
    }) {
        Some(h) => Err(vec![not_yet(&format!("the query hint OPTION ({h})"))]),
        None => Ok(()),
    }
}

/// Assignment SELECT `s` as the SELECT of its values (`@v = expr` as `expr`).
fn values_of(s: &Select) -> Select {
    let mut plain = s.clone();
    plain.items = s
        .items
        .iter()
        .map(|i| match i {
            SelectItem::Assign { value, .. } => SelectItem::Expr {
                expr: value.clone(),
                alias: None,
            },
            other => other.clone(),
        })
        .collect();
    plain
}

/// Whether assignment SELECT `s` leaves its variables as its last row's values alone:
/// every assignment is `=` and no value reads a variable the statement assigns (nor holds
/// a subquery, which could), so no row sees an earlier row's assignment and each one
/// overwrites the one before. `SELECT @s = @s + name FROM t` and `SELECT @n += 1 FROM t`
/// need every row in turn.
fn last_row_decides(s: &Select) -> bool {
    let assigned: Vec<&str> = s
        .items
        .iter()
        .filter_map(|i| match i {
            SelectItem::Assign { variable, .. } => Some(variable.as_str()),
            _ => None,
        })
        .collect();
    let reads_assigned = |e: &crate::ast::Expr| {
        aggregate::any_node(e, &|x| match x {
            crate::ast::Expr::Variable(v) => assigned.iter().any(|a| a.eq_ignore_ascii_case(v)),
            crate::ast::Expr::Subquery(_)
            | crate::ast::Expr::Exists(_)
            | crate::ast::Expr::InSubquery { .. } => true,
            _ => false,
        })
    };
    s.items.iter().all(|i| match i {
        SelectItem::Assign { op, value, .. } => {
            *op == crate::ast::AssignOp::Assign && !reads_assigned(value)
        }
        _ => false,
    }) && !s.where_clause.as_ref().is_some_and(reads_assigned)
        && !s.having.as_ref().is_some_and(reads_assigned)
}

/// The sink of a streamed assignment SELECT (`assignment_streamed`): its result's last row
/// and row count kept, the result set and its row count swallowed (an assignment returns
/// neither), everything else (SET STATISTICS IO's lines) passed on.
struct LastRow<'o, 'a> {
    out: &'o mut Out<'a>,
    last: Option<Vec<Value>>,
    rows: u64,
}

impl super::output::OutputSink for LastRow<'_, '_> {
    fn emit(&mut self, o: Output) -> bool {
        match o {
            Output::Columns(_) | Output::RowsAffected(_) => {}
            Output::Row(r) => {
                self.rows += 1;
                self.last = Some(r);
            }
            Output::Rows { mut rows, .. } => {
                self.rows += rows.len() as u64;
                if let Some(r) = rows.pop() {
                    self.last = Some(r);
                }
            }
            o => self.out.push(o),
        }
        !self.out.gone()
    }
}

/// Rows equal for DISTINCT and GROUP BY: NULLs equal each other.
pub(super) fn same_row(a: &[Value], b: &[Value]) -> bool {
    a.iter()
        .zip(b)
        .all(|(x, y)| match (x.is_null(), y.is_null()) {
            (true, true) => true,
            (false, false) => matches!(ops::compare(x, y), Ok(Some(Ordering::Equal))),
            _ => false,
        })
}

impl Session {
    pub(super) fn select(&mut self, q: &Query, out: &mut Out) -> Result<(), Vec<SqlError>> {
        if let QueryBody::Select(s) = &q.body {
            if let Some(target) = &s.into {
                return self.with_ctes(q, |s| s.select_into(q, target, out));
            }
        }
        refuse_unbuilt(q)?;
        self.with_ctes(q, |s| s.select_in_scope(q, out))
    }

    /// `select` with the query's CTEs in scope.
    fn select_in_scope(&mut self, q: &Query, out: &mut Out) -> Result<(), Vec<SqlError>> {
        if let QueryBody::Select(s) = &q.body {
            if s.items
                .iter()
                .all(|i| matches!(i, SelectItem::Assign { .. }))
            {
                if super::window_functions::has_windows(q, s) {
                    return Err(vec![not_yet("window functions in an assignment SELECT")]);
                }
                if let Some(done) = self.assignment_streamed(q, s, out) {
                    return done;
                }
                if let Some(done) = self.aggregate_assignment(q, s) {
                    return done;
                }
                let source = self.from(s)?;
                return self
                    .assignment_select(s, source.as_ref())
                    .map_err(|e| vec![e]);
            }
        }
        if let Some(done) = self.select_streamed(q, out) {
            return done;
        }
        let (columns, mut result) = self.query_result(q)?;
        self.cap_rows(&mut result);
        let n = result.len() as u64;
        out.push(Output::Rows {
            columns,
            rows: result,
        });
        self.rows_affected(n, out);
        Ok(())
    }

    /// The result of a query (SELECT and INSERT ... SELECT): FROM, WHERE, GROUP BY and
    /// aggregates, HAVING, the select list, DISTINCT, ORDER BY and TOP, in that order.
    pub(super) fn query_result(&mut self, q: &Query) -> Result<Projection, Vec<SqlError>> {
        refuse_unbuilt(q)?;
        self.with_ctes(q, |s| s.query_result_in_scope(q))
    }

    fn query_result_in_scope(&mut self, q: &Query) -> Result<Projection, Vec<SqlError>> {
        let QueryBody::Select(s) = &q.body else {
            return Err(vec![not_yet("UNION, EXCEPT and INTERSECT")]);
        };
        if s.items
            .iter()
            .any(|i| matches!(i, SelectItem::Assign { .. }))
        {
            return Err(vec![msg(141, &[])]);
        }
        let source = self.from(s)?;
        if aggregate::is_aggregate_query(s) {
            let (grouped_q, grouped_s, grouped) = self.group(q, s, source)?;
            return self
                .finish(&grouped_q, &grouped_s, Some(&grouped))
                .map_err(|e| vec![e]);
        }
        self.finish(q, s, source.as_ref()).map_err(|e| vec![e])
    }

    /// WHERE, the select list, DISTINCT, ORDER BY and TOP over one source.
    pub(super) fn finish(
        &mut self,
        q: &Query,
        s: &Select,
        src: Option<&Source>,
    ) -> Result<Projection, SqlError> {
        if super::window_functions::has_windows(q, s) {
            return self.finish_windowed_rows(q, s, src);
        }
        let rows = self.filtered_rows(s, src)?;
        let (columns, mut result) = self.project(s, src, &rows)?;
        if !q.order_by.is_empty() {
            self.order(q, src, &rows, &columns, &mut result)?;
        }
        if s.distinct {
            let mut kept: Vec<Vec<Value>> = Vec::with_capacity(result.len());
            for r in result {
                if !kept.iter().any(|k| same_row(k, &r)) {
                    kept.push(r);
                }
            }
            result = kept;
        }
        // The streamed path's checks of TOP, OFFSET and FETCH (10741, 10742, 10744, 1062).
        self.window(q, s)?;
        if let Some(offset) = &q.offset {
            let skip = as_i64(&self.eval(offset, None)?)?.max(0) as usize;
            result.drain(..skip.min(result.len()));
            if let Some(f) = &q.fetch {
                result.truncate(as_i64(&self.eval(f, None)?)?.max(0) as usize);
            }
        }
        if let Some(top) = &s.top {
            if top.with_ties {
                return Err(not_yet("TOP ... WITH TIES over a system view"));
            }
            let n = as_i64(&self.eval(&top.count, None)?)?.max(0) as usize;
            let n = if top.percent {
                (result.len() * n).div_ceil(100)
            } else {
                n
            };
            result.truncate(n);
        }
        Ok((columns, result))
    }

    /// `finish` for a query with window functions, over rows held in memory (a system
    /// view's, a grouped query's on the materializing path, none without FROM).
    fn finish_windowed_rows(
        &mut self,
        q: &Query,
        s: &Select,
        src: Option<&Source>,
    ) -> Result<Projection, SqlError> {
        let first = |mut e: Vec<SqlError>| e.remove(0);
        let plan = super::window_functions::plan(q, s)?;
        let rows = self.filtered_rows(s, src)?;
        let base = match src {
            Some(s) => s.shape(),
            None => Source::single(Rowset::default(), String::new(), None),
        };
        let (mut windowed, mut out) = self
            .windowed(&plan.calls, &base, &mut rows.into_iter())
            .map_err(first)?;
        while let Some(r) = out.next_row(self).map_err(first)? {
            windowed.rowset.rows.push(r);
        }
        self.finish(&plan.query, &plan.select, Some(&windowed))
    }

    /// Resolves FROM: one system view (`sys.x`, `db.sys.x`) or user table, or none.
    fn from(&mut self, s: &Select) -> Result<Option<Source>, Vec<SqlError>> {
        match s.from.as_slice() {
            [] => Ok(None),
            [TableSource::Table { name, alias, hints }] if !self.is_cte(name) => {
                let rowset = match self.view_rowset(name)? {
                    Some(r) => r,
                    None => {
                        let t = self.table_for(name, "SELECT")?;
                        let locking = self.row_locking(&t, false, hints)?;
                        let mut chunks =
                            super::tables::Chunks::new(&t, super::tables::Access::Scan)?
                                .locked(&locking);
                        let mut rows = Vec::new();
                        while let Some(chunk) = chunks.next_chunk()? {
                            for (_, rec) in chunk {
                                rows.push(t.decode(&rec)?);
                            }
                        }
                        Rowset {
                            columns: t.columns(),
                            rows,
                        }
                    }
                };
                Ok(Some(Source::single(
                    rowset,
                    name.name().to_string(),
                    alias.clone(),
                )))
            }
            [f @ TableSource::Function { name, alias, .. }] => {
                let rowset = self.function_rowset(f)?;
                Ok(Some(Source::single(
                    rowset,
                    name.name().to_string(),
                    alias.clone(),
                )))
            }
            from => self.joined_source(from, s.where_clause.as_ref()).map(Some),
        }
    }

    /// The rows of a system view (`sys.x`, `db.sys.x`, INFORMATION_SCHEMA), None when the
    /// name is no view.
    pub(super) fn view_rowset(
        &mut self,
        name: &crate::ast::ObjectName,
    ) -> Result<Option<Rowset>, Vec<SqlError>> {
        let db_id = match name.database().filter(|d| !d.is_empty()) {
            Some(db) => self
                .engine
                .instance
                .database_by_name(db)
                .map(|(id, _)| id)
                .ok_or_else(|| vec![self.unopened_error(db).unwrap_or_else(|| msg(911, &[&db]))])
                .and_then(|id| self.check_single_user(id, db).map(|()| id))?,
            None => self.database_id,
        };
        let schema = name.qualifier().unwrap_or("dbo").to_ascii_lowercase();
        let key = format!("{schema}.{}", name.name().to_ascii_lowercase());
        let own_only = self.view_server_state_scope(&key)?;
        if key == "sys.dm_db_index_usage_stats" {
            // The instance's counters, every database's (index_usage.rs).
            return Ok(Some(self.index_usage_rowset()));
        }
        if key == "sys.default_constraints" {
            let r = super::column_views::default_constraints(&self.engine.instance, db_id);
            return r.map(Some).map_err(|e| vec![e]);
        }
        match views::view(&self.engine.instance, db_id, &key) {
            Some(r) => {
                let r = r.map_err(|e| errors::map(&e, errors::Context::Other))?;
                Ok(Some(if own_only {
                    self.own_session_rows(r)
                } else {
                    r
                }))
            }
            None => Ok(None),
        }
    }

    /// fn_listextendedproperty(name, level0 type, level0 name, level1 type, level1 name,
    /// level2 type, level2 name): its seven arguments checked (216, 8144) and evaluated,
    /// then no rows, as extentdb keeps no extended properties (column_views.rs invariant 3).
    fn list_extended_properties(
        &mut self,
        args: &[crate::ast::Expr],
    ) -> Result<Rowset, Vec<SqlError>> {
        const NAME: &str = "fn_listextendedproperty";
        if args.len() < 7 {
            return Err(vec![msg(216, &[&NAME])]);
        }
        if args.len() > 7 {
            return Err(vec![msg(8144, &[&NAME])]);
        }
        for a in args
            .iter()
            .filter(|a| !matches!(a, crate::ast::Expr::Default))
        {
            self.eval(a, None).map_err(|e| vec![e])?;
        }
        Ok(super::column_views::listed_extended_properties())
    }

    /// The rows of a system table-valued function: sys.fn_my_permissions and
    /// sys.dm_db_index_physical_stats (physical_stats.rs); any other is not built (40517).
    /// The built-in STRING_SPLIT and OPENJSON are table_functions.rs's `function_rowset`,
    /// which calls this for the rest.
    pub(super) fn table_function(
        &mut self,
        name: &crate::ast::ObjectName,
        args: &[crate::ast::Expr],
    ) -> Result<Rowset, Vec<SqlError>> {
        let schema = name.qualifier().unwrap_or("sys");
        if schema.eq_ignore_ascii_case("sys")
            && name
                .name()
                .eq_ignore_ascii_case("dm_db_index_physical_stats")
        {
            return self.index_physical_stats(args);
        }
        if schema.eq_ignore_ascii_case("sys")
            && name.name().eq_ignore_ascii_case("dm_db_stats_properties")
        {
            return self.stats_properties_rowset(args);
        }
        if schema.eq_ignore_ascii_case("sys")
            && name.name().eq_ignore_ascii_case("dm_os_file_exists")
        {
            return self.file_exists_rowset(args);
        }
        if name.name().eq_ignore_ascii_case("fn_listextendedproperty")
            && (schema.eq_ignore_ascii_case("sys") || name.qualifier().is_none())
        {
            return self.list_extended_properties(args);
        }
        if !(schema.eq_ignore_ascii_case("sys")
            && name.name().eq_ignore_ascii_case("fn_my_permissions"))
        {
            return Err(vec![not_yet(&format!(
                "the table-valued function {}",
                name.joined()
            ))]);
        }
        if args.len() < 2 {
            return Err(vec![msg(216, &[&"fn_my_permissions"])]);
        }
        if args.len() > 2 {
            return Err(vec![msg(8144, &[&"fn_my_permissions"])]);
        }
        let one = |e| vec![e];
        let securable = self.eval(&args[0], None).map_err(one)?;
        let class = self.eval(&args[1], None).map_err(one)?;
        let securable = (!securable.is_null()).then(|| super::eval::to_text(&securable));
        self.my_permissions(securable, &super::eval::to_text(&class))
    }

    pub(super) fn ctx<'a>(src: &'a Source, values: &'a [Value]) -> RowCtx<'a> {
        RowCtx {
            columns: &src.rowset.columns,
            values,
            alias: src.alias.as_deref(),
            table: &src.table,
            parts: &src.parts,
            part_of: &src.part_of,
        }
    }

    /// The source rows that satisfy WHERE (one empty row without FROM).
    pub(super) fn filtered_rows(
        &mut self,
        s: &Select,
        src: Option<&Source>,
    ) -> Result<Vec<Vec<Value>>, SqlError> {
        let Some(src) = src else {
            if let Some(w) = &s.where_clause {
                if self.condition_row(w, None)? != Some(true) {
                    return Ok(Vec::new());
                }
            }
            return Ok(vec![Vec::new()]);
        };
        let mut rows = Vec::new();
        for r in &src.rowset.rows {
            let keep = match &s.where_clause {
                Some(w) => self.condition_row(w, Some(&Self::ctx(src, r)))? == Some(true),
                None => true,
            };
            if keep {
                rows.push(r.clone());
            }
        }
        Ok(rows)
    }

    /// Evaluates the select list for each row; columns take names from aliases or column
    /// references and types from the view or, for expressions, from the first value.
    fn project(
        &mut self,
        s: &Select,
        src: Option<&Source>,
        rows: &[Vec<Value>],
    ) -> Result<Projection, SqlError> {
        let columns = self.select_header(s, src)?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            out.push(self.project_row(s, src, r)?);
        }
        Ok((type_columns(columns, &out, false), out))
    }

    /// The select list's column names, and types where known before any row: a source
    /// column's, a declared one (`declared_type`); None for other expressions.
    pub(super) fn select_header(
        &mut self,
        s: &Select,
        src: Option<&Source>,
    ) -> Result<Vec<(String, Option<SqlType>)>, SqlError> {
        let mut columns: Vec<(String, Option<SqlType>)> = Vec::new();
        for item in &s.items {
            match item {
                SelectItem::Wildcard { qualifier } => {
                    let src = src.ok_or_else(|| msg(263, &[]))?;
                    for i in src.wildcard(qualifier.as_ref())? {
                        let (n, t) = &src.rowset.columns[i];
                        columns.push((n.clone(), Some(*t)));
                    }
                }
                SelectItem::Expr { expr, alias } => {
                    let (name, t) = match expr {
                        crate::ast::Expr::Column(c) => {
                            let found = src
                                .and_then(|s| s.position(c).map(|i| s.rowset.columns[i].clone()));
                            let t = found.as_ref().map(|x| x.1);
                            let real = found.map(|x| x.0);
                            let name = alias
                                .clone()
                                .or(real)
                                .unwrap_or_else(|| c.name().to_string());
                            // Aggregates stand in as hidden columns; unaliased, they are
                            // unnamed like any other expression.
                            let name = if aggregate::is_hidden(&name) && alias.is_none() {
                                String::new()
                            } else {
                                name
                            };
                            (name, t)
                        }
                        _ => (alias.clone().unwrap_or_default(), self.declared_type(expr)),
                    };
                    columns.push((name, t));
                }
                SelectItem::Assign { .. } => unreachable!("checked by the caller"),
            }
        }
        Ok(columns)
    }

    /// The select list evaluated over one source row.
    pub(super) fn project_row(
        &mut self,
        s: &Select,
        src: Option<&Source>,
        r: &[Value],
    ) -> Result<Vec<Value>, SqlError> {
        let mut values = Vec::with_capacity(s.items.len());
        for item in &s.items {
            match item {
                SelectItem::Wildcard { qualifier: None }
                    if src.is_none_or(|s| s.visible_columns() == r.len()) =>
                {
                    values.extend(r.iter().cloned())
                }
                SelectItem::Wildcard { qualifier } => {
                    let src = src.ok_or_else(|| msg(263, &[]))?;
                    for i in src.wildcard(qualifier.as_ref())? {
                        values.push(r[i].clone());
                    }
                }
                SelectItem::Expr { expr, .. } => {
                    let ctx = src.map(|s| Self::ctx(s, r));
                    values.push(self.eval(expr, ctx.as_ref())?);
                }
                SelectItem::Assign { .. } => {}
            }
        }
        Ok(values)
    }

    /// The type an expression has whatever its value: a CAST or CONVERT's target, a
    /// variable's declared type, a JSON function's type, an N'...' literal's NVARCHAR. Clients see it in the result's
    /// metadata, so a NULL keeps its type and Unicode text is not sent as code page 1252.
    /// None for other expressions (typed from their first non-NULL value).
    pub(super) fn declared_type(&self, expr: &crate::ast::Expr) -> Option<SqlType> {
        use crate::ast::{Expr, Literal};
        match expr {
            Expr::Cast { data_type, .. } | Expr::Convert { data_type, .. } => {
                Some(data_type.cast_target())
            }
            Expr::Variable(name) => self.variable(name).map(|(t, _)| t),
            // The JSON functions' types are SQL Server's whatever the value (json.rs).
            Expr::Function { name, args, .. }
                if name.parts.len() == 1
                    && ["ISJSON", "JSON_VALUE", "JSON_QUERY", "JSON_MODIFY"]
                        .iter()
                        .any(|f| name.name().eq_ignore_ascii_case(f)) =>
            {
                crate::functions::scalar_result_type(name.name(), &vec![SqlType::Int; args.len()])
            }
            Expr::Literal(Literal::String {
                value,
                national: true,
            }) => Some(match value.encode_utf16().count() {
                n if n > 4000 => SqlType::NVarChar(crate::types::MAX_LENGTH),
                n => SqlType::NVarChar(n.max(1) as u32),
            }),
            _ => None,
        }
    }

    /// ORDER BY over source columns, select-list aliases or ordinals.
    fn order(
        &mut self,
        q: &Query,
        src: Option<&Source>,
        rows: &[Vec<Value>],
        columns: &[(String, SqlType)],
        result: &mut Vec<Vec<Value>>,
    ) -> Result<(), SqlError> {
        let mut keyed: Vec<(Vec<Value>, Vec<Value>)> = Vec::with_capacity(rows.len());
        for (r, projected) in rows.iter().zip(result.drain(..)) {
            let mut keys = Vec::new();
            for item in &q.order_by {
                let by_alias = match &item.expr {
                    crate::ast::Expr::Column(c) if c.parts.len() == 1 => columns
                        .iter()
                        .position(|(n, _)| n.eq_ignore_ascii_case(c.name())),
                    crate::ast::Expr::Literal(crate::ast::Literal::Integer(i)) => {
                        Some((*i as usize).saturating_sub(1))
                    }
                    _ => None,
                };
                let v = match by_alias {
                    Some(i) if i < projected.len() => projected[i].clone(),
                    _ => {
                        let ctx = src.map(|s| Self::ctx(s, r));
                        self.eval(&item.expr, ctx.as_ref())?
                    }
                };
                keys.push(v);
            }
            keyed.push((keys, projected));
        }
        let mut failure = None;
        keyed.sort_by(|a, b| {
            for (i, item) in q.order_by.iter().enumerate() {
                // NULLs sort first, as in SQL Server.
                let o = match (a.0[i].is_null(), b.0[i].is_null()) {
                    (true, true) => Ordering::Equal,
                    (true, false) => Ordering::Less,
                    (false, true) => Ordering::Greater,
                    _ => match ops::compare(&a.0[i], &b.0[i]) {
                        Ok(o) => o.unwrap_or(Ordering::Equal),
                        Err(e) => {
                            failure.get_or_insert(e);
                            Ordering::Equal
                        }
                    },
                };
                let o = if item.descending { o.reverse() } else { o };
                if o != Ordering::Equal {
                    return o;
                }
            }
            Ordering::Equal
        });
        if let Some(e) = failure {
            return Err(e);
        }
        result.extend(keyed.into_iter().map(|(_, r)| r));
        Ok(())
    }

    /// An assignment SELECT whose result only its last row decides (`last_row_decides`),
    /// run as the SELECT of its values through the streamed paths (seeks, joins, the
    /// spilling sort; SET STATISTICS IO's lines), its rows kept one at a time
    /// (`LastRow`): the variables take the last row's values, @@ROWCOUNT the number of
    /// rows. None for any other query, or one the streamed paths do not take (a system
    /// view, no FROM), left to the paths below.
    fn assignment_streamed(
        &mut self,
        q: &Query,
        s: &Select,
        out: &mut Out,
    ) -> Option<Result<(), Vec<SqlError>>> {
        if s.from.is_empty() || !last_row_decides(s) {
            return None;
        }
        let query = Query {
            body: QueryBody::Select(Box::new(values_of(s))),
            ..q.clone()
        };
        let mut kept = LastRow {
            out,
            last: None,
            rows: 0,
        };
        let done = self.select_streamed(&query, &mut Out::new(&mut kept))?;
        let (last, rows) = (kept.last.take(), kept.rows);
        Some(done.and_then(|()| {
            let assigned = s.items.iter().filter_map(|i| match i {
                SelectItem::Assign { variable, op, .. } => Some((variable, *op)),
                _ => None,
            });
            for ((variable, op), v) in assigned.zip(last.into_iter().flatten()) {
                self.assign(variable, op, v).map_err(|e| vec![e])?;
            }
            self.rowcount = rows as i64;
            Ok(())
        }))
    }

    /// `SELECT @c = COUNT(*), @m = MAX(x) FROM t [GROUP BY ...]`: the query runs as a
    /// SELECT (aggregates, grouping, ORDER BY, TOP) and each result row assigns in turn
    /// (the last wins). None when the query has no aggregate: that form assigns row by row
    /// as it evaluates, so `SELECT @s = @s + name FROM t` sees each earlier assignment.
    fn aggregate_assignment(&mut self, q: &Query, s: &Select) -> Option<Result<(), Vec<SqlError>>> {
        let plain = values_of(s);
        if !super::aggregate::is_aggregate_query(&plain) {
            return None;
        }
        let query = Query {
            body: QueryBody::Select(Box::new(plain)),
            ..q.clone()
        };
        Some((|| {
            let (_, mut rows) = self.query_result(&query)?;
            self.cap_rows(&mut rows);
            for r in &rows {
                for (i, item) in s.items.iter().enumerate() {
                    if let SelectItem::Assign { variable, op, .. } = item {
                        self.assign(variable, *op, r[i].clone())
                            .map_err(|e| vec![e])?;
                    }
                }
            }
            self.rowcount = rows.len() as i64;
            Ok(())
        })())
    }

    /// A materialized result cut to SET ROWCOUNT's cap (the streamed paths stop reading
    /// there instead).
    fn cap_rows<T>(&self, rows: &mut Vec<T>) {
        if let Some(n) = self.rowcount_cap() {
            rows.truncate(usize::try_from(n).unwrap_or(usize::MAX));
        }
    }

    /// `SELECT @v = expr, ...`: assigns from each qualifying row in turn (the last wins),
    /// as many as SET ROWCOUNT lets.
    fn assignment_select(&mut self, s: &Select, src: Option<&Source>) -> Result<(), SqlError> {
        let mut rows = self.filtered_rows(s, src)?;
        self.cap_rows(&mut rows);
        for r in &rows {
            for item in &s.items {
                if let SelectItem::Assign {
                    variable,
                    op,
                    value,
                } = item
                {
                    let ctx = src.map(|s| Self::ctx(s, r));
                    let v = self.eval(value, ctx.as_ref())?;
                    self.assign(variable, *op, v)?;
                }
            }
        }
        self.rowcount = rows.len() as i64;
        Ok(())
    }
}
