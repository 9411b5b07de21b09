//! GROUP BY, aggregates and HAVING.
//!
//! A grouped query becomes an ordinary one over a computed source: each aggregate call in
//! the select list, HAVING and ORDER BY is computed per group and replaced by a hidden
//! column of that source; HAVING becomes its WHERE. Each group's row carries the group's
//! first source row, so grouping columns keep their values (Msg 8120 refuses any other
//! column outside an aggregate).
//!
//! Result types as SQL Server's: COUNT int, COUNT_BIG bigint; SUM and AVG of tinyint,
//! smallint and int are int, of bigint bigint, of decimal(p, s) decimal(38, s) (AVG:
//! decimal(38, max(s, 6))), of real and float float; MIN and MAX keep the argument's type.
//! Over no rows, COUNT is 0 and the others NULL; without GROUP BY, zero rows still make
//! one group.
//!
//! Groups come out in ascending key order (as a stream aggregate over sorted input gives
//! them); SQL Server promises no order without ORDER BY.
//!
//! A DISTINCT aggregate (COUNT(DISTINCT x), SUM(DISTINCT x), ...) sends its group's
//! non-NULL values through a spilling sort (`SortSpill`, `SORT_MEMORY_BYTES` each, work
//! files in tempdb's directory past that) and folds each run of equal values once when the
//! group ends, so what it holds does not grow with the group. Values are folded in
//! ascending order, each distinct value as its first occurrence in scan order has it (the
//! sort is stable); a float SUM(DISTINCT) may therefore round differently from one folded
//! in scan order, as SQL Server's own plans may.

use std::cmp::Ordering;
use std::sync::{Arc, Mutex};

use super::eval::RowCtx;
use super::grouping_sets::{contains_grouping, SetsPlan};
use super::lower::not_yet;
use super::select::{same_row, Source};
use super::spill::SortSpill;
use super::stream::{key_order, SORT_MEMORY_BYTES};
use super::views::Rowset;
use super::Session;
use crate::ast::{Expr, Literal, ObjectName, OrderByItem, Query, Select, SelectItem};
use crate::convert::{convert, type_of};
use crate::messages::{msg, SqlError};
use crate::ops;
use crate::types::{SqlType, Value};

/// Prefix of the hidden columns aggregates are replaced by; no identifier can start so.
const HIDDEN: char = '\u{1}';

pub(super) fn is_hidden(name: &str) -> bool {
    name.starts_with(HIDDEN)
}

fn is_aggregate_name(n: &ObjectName) -> bool {
    n.parts.len() == 1
        && matches!(
            n.name().to_ascii_uppercase().as_str(),
            "COUNT" | "COUNT_BIG" | "SUM" | "MIN" | "MAX" | "AVG"
        )
}

fn is_aggregate(e: &Expr) -> bool {
    matches!(e, Expr::Function { name, .. } if is_aggregate_name(name))
}

/// True when the expression contains an aggregate call.
pub(super) fn contains_aggregate(e: &Expr) -> bool {
    any_node(e, &is_aggregate)
}

/// True when `found` holds for a node `map_expr` offers to its callback: the same walk,
/// but a node `map_expr` would copy whole without looking inside (a column, a literal, a
/// variable, a subquery: `descends` is false) is replaced by a bare NULL literal once
/// tested, so a search of a select list copies none of its names (asked per statement).
pub(super) fn any_node(e: &Expr, found: &dyn Fn(&Expr) -> bool) -> bool {
    let mut hit = false;
    let _ = map_expr(e, &mut |x| {
        hit |= found(x);
        Ok((!descends(x)).then_some(Expr::Literal(Literal::Null)))
    });
    hit
}

/// The nodes whose children `map_expr` (and `map_window`) rebuild; every other node it
/// clones whole, its children unvisited. Exhaustive, so a new kind of node is decided here
/// (a wrong `false` would hide an aggregate from `contains_aggregate`).
fn descends(e: &Expr) -> bool {
    match e {
        Expr::Function { .. }
        | Expr::Cast { .. }
        | Expr::Convert { .. }
        | Expr::Case { .. }
        | Expr::Unary { .. }
        | Expr::Binary { .. }
        | Expr::Like { .. }
        | Expr::InList { .. }
        | Expr::Between { .. }
        | Expr::IsNull { .. }
        | Expr::Collate { .. }
        | Expr::Window(_) => true,
        Expr::Literal(_)
        | Expr::Variable(_)
        | Expr::GlobalVariable(_)
        | Expr::Column(_)
        | Expr::DatePart(_)
        | Expr::InSubquery { .. }
        | Expr::Exists(_)
        | Expr::Subquery(_)
        | Expr::Default => false,
    }
}

/// A grouped query: GROUP BY, HAVING or an aggregate in the select list.
pub(super) fn is_aggregate_query(s: &Select) -> bool {
    !s.group_by.is_empty()
        || s.grouping_sets.is_some()
        || s.having.is_some()
        || s.items.iter().any(|i| match i {
            SelectItem::Expr { expr, .. } => contains_aggregate(expr),
            _ => false,
        })
}

/// True when the expression contains a window function (outside subqueries).
pub(super) fn contains_window(e: &Expr) -> bool {
    any_node(e, &|x| matches!(x, Expr::Window(_)))
}

/// Rebuilds `e` bottom-up-free: `f` may replace a node (Some) or let it be rebuilt from
/// its rewritten children (None). Subqueries are left as they are. A window function's
/// call is not offered to `f` itself (`SUM(x) OVER ()` is no aggregate); its arguments,
/// PARTITION BY and ORDER BY are.
pub(super) fn map_expr(
    e: &Expr,
    f: &mut dyn FnMut(&Expr) -> Result<Option<Expr>, SqlError>,
) -> Result<Expr, SqlError> {
    if let Some(r) = f(e)? {
        return Ok(r);
    }
    if let Expr::Function { .. } = e {
        return map_call(e, f);
    }
    let mut m = |x: &Expr| map_expr(x, f).map(Box::new);
    Ok(match e {
        Expr::Cast {
            expr,
            data_type,
            try_cast,
        } => Expr::Cast {
            expr: m(expr)?,
            data_type: data_type.clone(),
            try_cast: *try_cast,
        },
        Expr::Convert {
            data_type,
            expr,
            style,
            try_convert,
        } => Expr::Convert {
            data_type: data_type.clone(),
            expr: m(expr)?,
            style: style.as_ref().map(|s| m(s)).transpose()?,
            try_convert: *try_convert,
        },
        Expr::Case {
            operand,
            branches,
            else_result,
        } => Expr::Case {
            operand: operand.as_ref().map(|o| m(o)).transpose()?,
            branches: branches
                .iter()
                .map(|(w, t)| Ok((*m(w)?, *m(t)?)))
                .collect::<Result<_, SqlError>>()?,
            else_result: else_result.as_ref().map(|x| m(x)).transpose()?,
        },
        Expr::Unary { op, expr } => Expr::Unary {
            op: *op,
            expr: m(expr)?,
        },
        Expr::Binary { left, op, right } => Expr::Binary {
            left: m(left)?,
            op: *op,
            right: m(right)?,
        },
        Expr::Like {
            expr,
            pattern,
            escape,
            negated,
        } => Expr::Like {
            expr: m(expr)?,
            pattern: m(pattern)?,
            escape: escape.as_ref().map(|x| m(x)).transpose()?,
            negated: *negated,
        },
        Expr::InList {
            expr,
            list,
            negated,
        } => Expr::InList {
            expr: m(expr)?,
            list: list
                .iter()
                .map(|a| m(a).map(|b| *b))
                .collect::<Result<_, _>>()?,
            negated: *negated,
        },
        Expr::Between {
            expr,
            low,
            high,
            negated,
        } => Expr::Between {
            expr: m(expr)?,
            low: m(low)?,
            high: m(high)?,
            negated: *negated,
        },
        Expr::IsNull { expr, negated } => Expr::IsNull {
            expr: m(expr)?,
            negated: *negated,
        },
        Expr::Collate { expr, collation } => Expr::Collate {
            expr: m(expr)?,
            collation: collation.clone(),
        },
        Expr::Window(w) => Expr::Window(Box::new(map_window(w, f)?)),
        other => other.clone(),
    })
}

/// A function call rebuilt from its arguments through `map_expr` (the call itself not
/// offered to `f`).
fn map_call(
    call: &Expr,
    f: &mut dyn FnMut(&Expr) -> Result<Option<Expr>, SqlError>,
) -> Result<Expr, SqlError> {
    let Expr::Function {
        name,
        args,
        distinct,
        star,
    } = call
    else {
        return map_expr(call, f);
    };
    Ok(Expr::Function {
        name: name.clone(),
        args: args
            .iter()
            .map(|a| map_expr(a, f))
            .collect::<Result<_, _>>()?,
        distinct: *distinct,
        star: *star,
    })
}

/// `map_expr` over a window function's parts (not its call, which is no aggregate).
fn map_window(
    w: &crate::ast::WindowCall,
    f: &mut dyn FnMut(&Expr) -> Result<Option<Expr>, SqlError>,
) -> Result<crate::ast::WindowCall, SqlError> {
    let function = match &w.function {
        call @ Expr::Function { .. } => map_call(call, f)?,
        other => map_expr(other, f)?,
    };
    Ok(crate::ast::WindowCall {
        function,
        partition_by: w
            .partition_by
            .iter()
            .map(|p| map_expr(p, f))
            .collect::<Result<_, _>>()?,
        order_by: w
            .order_by
            .iter()
            .map(|o| {
                Ok(OrderByItem {
                    expr: map_expr(&o.expr, f)?,
                    descending: o.descending,
                })
            })
            .collect::<Result<_, SqlError>>()?,
        frame: w.frame,
    })
}

/// One aggregate call to compute per group, with its result type when known before any
/// row (a computed argument's comes from its first non-NULL value).
pub(super) struct Aggregate {
    call: Expr,
    result_type: Option<SqlType>,
}

impl Aggregate {
    /// The aggregate call as the query wrote it (`COUNT(*)`, `SUM(x)`).
    pub(super) fn call(&self) -> &Expr {
        &self.call
    }

    /// The result type when known before any row.
    pub(super) fn result_type(&self) -> Option<SqlType> {
        self.result_type
    }
}

/// The aggregates of a query, each replaced by its hidden column.
#[derive(Default)]
struct Collector {
    calls: Vec<Expr>,
}

impl Collector {
    fn rewrite(&mut self, e: &Expr) -> Result<Expr, SqlError> {
        map_expr(e, &mut |x| {
            if !is_aggregate(x) {
                return Ok(None);
            }
            let i = match self.calls.iter().position(|c| c == x) {
                Some(i) => i,
                None => {
                    self.calls.push(x.clone());
                    self.calls.len() - 1
                }
            };
            Ok(Some(Expr::Column(ObjectName::simple(&hidden_name(i)))))
        })
    }
}

/// The column a grouped query's rewritten expressions name aggregate `i` by.
pub(super) fn hidden_name(i: usize) -> String {
    format!("{HIDDEN}agg{i}")
}

/// True when two column references may name the same column: the same name, and the
/// same qualifier where both have one (`g` and `x.g` do; `x.g` and `y.g`, columns of two
/// tables of a join, do not).
pub(super) fn same_column(a: &ObjectName, b: &ObjectName) -> bool {
    a.name().eq_ignore_ascii_case(b.name())
        && match (a.qualifier(), b.qualifier()) {
            (Some(x), Some(y)) => x.eq_ignore_ascii_case(y),
            _ => true,
        }
}

/// Msg 8120 for a column outside aggregates and GROUP BY.
fn check_grouped(e: &Expr, group_by: &[Expr], src: &Source) -> Result<(), SqlError> {
    let mut bad: Option<String> = None;
    let _ = map_expr(e, &mut |x| {
        if bad.is_some() || group_by.iter().any(|g| g == x) {
            return Ok(Some(x.clone()));
        }
        if let Expr::Column(n) = x {
            let grouped = is_hidden(n.name())
                || group_by
                    .iter()
                    .any(|g| matches!(g, Expr::Column(c) if same_column(c, n)));
            if !grouped {
                let real = src
                    .rowset
                    .columns
                    .iter()
                    .find(|(c, _)| c.eq_ignore_ascii_case(n.name()))
                    .map(|(c, _)| c.clone());
                // An unknown column is Msg 207, which evaluation reports.
                if let Some(real) = real {
                    let q = n.qualifier().or(src.alias.as_deref()).unwrap_or(&src.table);
                    bad = Some(format!("{q}.{real}"));
                }
            }
        }
        Ok(None)
    });
    match bad {
        Some(c) => Err(msg(8120, &[&c])),
        None => Ok(()),
    }
}

fn sum_type(t: SqlType, avg: bool) -> SqlType {
    match t {
        SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::Bit => SqlType::Int,
        SqlType::BigInt => SqlType::BigInt,
        SqlType::Decimal { scale, .. } => SqlType::Decimal {
            precision: 38,
            scale: if avg { scale.max(6) } else { scale },
        },
        _ => SqlType::Float,
    }
}

/// The result type of aggregate `upper` over an argument of type `t`.
pub(super) fn result_of(upper: &str, t: SqlType) -> SqlType {
    match upper {
        "COUNT" => SqlType::Int,
        "COUNT_BIG" => SqlType::BigInt,
        "SUM" => sum_type(t, false),
        "AVG" => sum_type(t, true),
        _ => t,
    }
}

/// One aggregate computed row by row, so a group's rows need not be held: a count, the
/// best value so far (MIN, MAX) or a running sum (SUM, AVG). DISTINCT sorts the group's
/// values (spilling past its memory) and folds each distinct one at the end.
pub(super) struct Accumulator {
    call: Expr,
    upper: String,
    result_type: Option<SqlType>,
    /// Rows seen (COUNT(*)) or non-NULL values taken.
    count: i64,
    best: Option<Value>,
    sum: Option<Value>,
    /// DISTINCT: the group's values so far, from its first one on.
    distinct: Option<DistinctValues>,
}

/// A DISTINCT aggregate's values, sorted as they come; a comparison that fails is kept
/// for `Accumulator::finish` to raise.
struct DistinctValues {
    sort: SortSpill,
    failure: Arc<Mutex<Option<SqlError>>>,
}

impl Accumulator {
    pub(super) fn new(a: &Aggregate) -> Accumulator {
        let Expr::Function { name, .. } = &a.call else {
            unreachable!("collected calls are aggregates");
        };
        Accumulator {
            call: a.call.clone(),
            upper: name.name().to_ascii_uppercase(),
            result_type: a.result_type,
            count: 0,
            best: None,
            sum: None,
            distinct: None,
        }
    }

    /// An accumulator for a windowed aggregate (`window_functions.rs`), whose argument
    /// values come evaluated (`take_value`); `arg_type` is the argument's, when known.
    pub(super) fn windowed(call: &Expr, arg_type: Option<SqlType>) -> Accumulator {
        let Expr::Function { name, .. } = call else {
            unreachable!("a windowed aggregate is a call");
        };
        let upper = name.name().to_ascii_uppercase();
        let result_type = match upper.as_str() {
            "COUNT" => Some(SqlType::Int),
            "COUNT_BIG" => Some(SqlType::BigInt),
            _ => arg_type.map(|t| result_of(&upper, t)),
        };
        Accumulator::new(&Aggregate {
            call: call.clone(),
            result_type,
        })
    }

    /// Takes one row's argument value, evaluated (None for COUNT(*), which counts rows).
    pub(super) fn take_value(&mut self, v: Option<Value>) -> Result<(), SqlError> {
        debug_assert!(self.distinct.is_none(), "OVER refuses DISTINCT (10759)");
        let Some(v) = v else {
            self.count += 1;
            return Ok(());
        };
        if v.is_null() {
            return Ok(());
        }
        self.result_type
            .get_or_insert_with(|| result_of(&self.upper, type_of(&v)));
        self.take(v)
    }

    /// Takes back one value `take_value` took (a window frame's row leaving it): exact
    /// only for COUNT, and for SUM and AVG of integers and decimals (`removable`).
    pub(super) fn remove_value(&mut self, v: Option<Value>) -> Result<(), SqlError> {
        debug_assert!(self.removable(), "{} cannot take a value back", self.upper);
        let Some(v) = v else {
            self.count -= 1;
            return Ok(());
        };
        if v.is_null() {
            return Ok(());
        }
        self.count -= 1;
        debug_assert!(self.count >= 0, "a value taken back was taken first");
        if matches!(self.upper.as_str(), "COUNT" | "COUNT_BIG") {
            return Ok(());
        }
        if self.count == 0 {
            self.sum = None;
            return Ok(());
        }
        let acc_type = match self.result_type() {
            SqlType::Int => SqlType::BigInt,
            t => t,
        };
        let v = convert(&v, acc_type, None)?;
        let sum = self.sum.take().expect("a value was taken");
        self.sum = Some(ops::binary(ops::BinaryOp::Subtract, &sum, &v)?);
        Ok(())
    }

    /// True when values can be taken back exactly (`remove_value`): COUNT always, SUM and
    /// AVG over integers and decimals (a float sum would round differently).
    pub(super) fn removable(&self) -> bool {
        match self.upper.as_str() {
            "COUNT" | "COUNT_BIG" => true,
            "SUM" | "AVG" => matches!(
                self.result_type(),
                SqlType::Int | SqlType::BigInt | SqlType::Decimal { .. }
            ),
            _ => false,
        }
    }

    /// Takes one source row.
    pub(super) fn add(
        &mut self,
        s: &mut Session,
        src: &Source,
        row: &[Value],
    ) -> Result<(), SqlError> {
        let Expr::Function {
            args,
            star,
            distinct,
            ..
        } = &self.call
        else {
            unreachable!("collected calls are aggregates");
        };
        if *star {
            self.count += 1;
            return Ok(());
        }
        let v = s.eval(&args[0], Some(&Session::ctx(src, row)))?;
        if v.is_null() {
            return Ok(());
        }
        // The type comes from the first value in scan order, DISTINCT or not.
        self.result_type
            .get_or_insert_with(|| result_of(&self.upper, type_of(&v)));
        if *distinct {
            let values = self.distinct.get_or_insert_with(|| {
                let failure = Arc::new(Mutex::new(None));
                let order = key_order(vec![false], failure.clone());
                DistinctValues {
                    sort: SortSpill::new(&s.spill_dir(), SORT_MEMORY_BYTES, order),
                    failure,
                }
            });
            return values.sort.push(vec![v]);
        }
        self.take(v)
    }

    /// Folds one value in.
    fn take(&mut self, v: Value) -> Result<(), SqlError> {
        let t = self.result_type();
        self.count += 1;
        match self.upper.as_str() {
            "COUNT" | "COUNT_BIG" => {}
            "MIN" | "MAX" => self.take_best(v)?,
            _ => {
                // Integers accumulate in bigint so AVG cannot overflow where SQL Server's
                // does not; SUM converts back and reports int overflow as it would.
                let acc_type = if t == SqlType::Int {
                    SqlType::BigInt
                } else {
                    t
                };
                let v = convert(&v, acc_type, None)?;
                self.sum = Some(match self.sum.take() {
                    None => v,
                    Some(sum) => ops::binary(ops::BinaryOp::Add, &sum, &v)?,
                });
            }
        }
        Ok(())
    }

    fn take_best(&mut self, v: Value) -> Result<(), SqlError> {
        let want = if self.upper == "MIN" {
            Ordering::Less
        } else {
            Ordering::Greater
        };
        let better = match &self.best {
            None => true,
            Some(b) => ops::compare(&v, b)? == Some(want),
        };
        if better {
            self.best = Some(v);
        }
        Ok(())
    }

    /// The result type (Int for a computed argument that was NULL throughout).
    pub(super) fn result_type(&self) -> SqlType {
        self.result_type
            .unwrap_or_else(|| result_of(&self.upper, SqlType::Int))
    }

    /// Folds a DISTINCT aggregate's values in, each distinct one once (in ascending order).
    fn fold_distinct(&mut self) -> Result<(), SqlError> {
        let Some(values) = self.distinct.take() else {
            return Ok(());
        };
        let mut last: Option<Vec<Value>> = None;
        for row in values.sort.finish()? {
            let row = row?;
            if last.as_ref().is_some_and(|l| same_row(l, &row)) {
                continue;
            }
            self.take(row[0].clone())?;
            last = Some(row);
        }
        if let Some(e) = values.failure.lock().unwrap().take() {
            return Err(e);
        }
        Ok(())
    }

    pub(super) fn finish(&mut self) -> Result<Value, SqlError> {
        self.fold_distinct()?;
        let t = self.result_type();
        match self.upper.as_str() {
            "COUNT" | "COUNT_BIG" => Ok(count_value(self.count, t)),
            "MIN" | "MAX" => Ok(self.best.clone().unwrap_or(Value::Null)),
            _ => {
                let Some(sum) = &self.sum else {
                    return Ok(Value::Null);
                };
                let total = if self.upper == "AVG" {
                    let acc_type = if t == SqlType::Int {
                        SqlType::BigInt
                    } else {
                        t
                    };
                    let n = convert(&Value::BigInt(self.count), acc_type, None)?;
                    ops::binary(ops::BinaryOp::Divide, sum, &n)?
                } else {
                    sum.clone()
                };
                convert(&total, t, None)
            }
        }
    }
}

impl Session {
    /// The type of an aggregate's argument: a source column's, else the first non-NULL
    /// value's among `rows`; None when neither tells (the rows stream later).
    fn argument_type(&mut self, arg: &Expr, src: &Source, rows: &[Vec<Value>]) -> Option<SqlType> {
        if let Expr::Column(n) = arg {
            if let Some((_, t)) = src
                .rowset
                .columns
                .iter()
                .find(|(c, _)| c.eq_ignore_ascii_case(n.name()))
            {
                return Some(*t);
            }
        }
        for r in rows {
            if let Ok(v) = self.eval(arg, Some(&Session::ctx(src, r))) {
                if !v.is_null() {
                    return Some(type_of(&v));
                }
            }
        }
        None
    }

    fn aggregate_spec(
        &mut self,
        call: &Expr,
        src: &Source,
        rows: &[Vec<Value>],
    ) -> Result<Aggregate, SqlError> {
        let Expr::Function {
            name, args, star, ..
        } = call
        else {
            unreachable!("collected calls are aggregates");
        };
        let upper = name.name().to_ascii_uppercase();
        if !*star && args.len() != 1 {
            return Err(msg(174, &[&upper.to_lowercase(), &1]));
        }
        if *star && upper != "COUNT" && upper != "COUNT_BIG" {
            return Err(msg(102, &[&"*"]));
        }
        if args.iter().any(contains_window) {
            return Err(msg(4109, &[]));
        }
        if args.iter().any(contains_grouping) {
            return Err(msg(130, &[]));
        }
        if args.iter().any(contains_aggregate) {
            return Err(not_yet("aggregates of aggregates"));
        }
        let result_type = match upper.as_str() {
            "COUNT" => Some(SqlType::Int),
            "COUNT_BIG" => Some(SqlType::BigInt),
            _ => self
                .argument_type(&args[0], src, rows)
                .map(|t| result_of(&upper, t)),
        };
        Ok(Aggregate {
            call: call.clone(),
            result_type,
        })
    }

    /// The grouped form of a query: its select list, HAVING (as WHERE) and ORDER BY over
    /// a source of one row per group.
    pub(super) fn group(
        &mut self,
        q: &Query,
        s: &Select,
        source: Option<Source>,
    ) -> Result<(Query, Select, Source), Vec<SqlError>> {
        let one = |e| vec![e];
        let src = source.unwrap_or(Source::single(Rowset::default(), String::new(), None));
        let has_from = !s.from.is_empty();
        let rows = self
            .filtered_rows(s, has_from.then_some(&src))
            .map_err(one)?;
        let plan = self.plan_grouping(q, s, &src, &rows)?;
        if let Some(sets) = &plan.sets {
            let grouped = self.sets_source(&plan, sets, &src, rows)?;
            return Ok((plan.query, plan.select, grouped));
        }
        let groups = self.groups(&s.group_by, &src, &rows).map_err(one)?;
        let mut grouped_rows = Vec::with_capacity(groups.len());
        // Typed over every row (`plan_grouping`), so the same for each group.
        let types: Vec<SqlType> = plan
            .aggregates
            .iter()
            .map(|a| Accumulator::new(a).result_type())
            .collect();
        for g in &groups {
            let mut accs: Vec<Accumulator> = plan.aggregates.iter().map(Accumulator::new).collect();
            for &i in g {
                for a in &mut accs {
                    a.add(self, &src, &rows[i]).map_err(one)?;
                }
            }
            let first = g.first().map(|&i| rows[i].as_slice());
            grouped_rows.push(group_row(&src, first, &mut accs).map_err(one)?);
        }
        let grouped = grouped_source(&src, &types, grouped_rows);
        Ok((plan.query, plan.select, grouped))
    }

    /// What grouping makes of a query before any row is grouped: the select list, HAVING
    /// (as WHERE) and ORDER BY with each aggregate replaced by its hidden column, and the
    /// aggregates (typed from `rows` where their argument is computed; none when they
    /// stream).
    pub(super) fn plan_grouping(
        &mut self,
        q: &Query,
        s: &Select,
        src: &Source,
        rows: &[Vec<Value>],
    ) -> Result<GroupingPlan, Vec<SqlError>> {
        let one = |e| vec![e];
        let grouping_in = |e: &Expr| contains_aggregate(e) || contains_grouping(e);
        if s.where_clause.as_ref().is_some_and(grouping_in) {
            return Err(vec![msg(147, &[])]);
        }
        let uses_grouping = s.items.iter().any(|i| match i {
            SelectItem::Expr { expr, .. } => contains_grouping(expr),
            _ => false,
        }) || s.having.as_ref().is_some_and(contains_grouping)
            || q.order_by.iter().any(|o| contains_grouping(&o.expr));
        let mut sets = SetsPlan::of(s, uses_grouping).map_err(one)?;
        let outside = s.group_by.iter().chain(&s.having).chain(&s.where_clause);
        if outside.into_iter().any(contains_window) {
            return Err(vec![msg(4108, &[])]);
        }
        let mut c = Collector::default();
        let mut items = Vec::with_capacity(s.items.len());
        for item in &s.items {
            items.push(match item {
                SelectItem::Expr { expr, alias } => {
                    let mut e = c.rewrite(expr).map_err(one)?;
                    let mut alias = alias.clone();
                    if let Some(sets) = &mut sets {
                        alias = alias.or_else(|| sets.item_alias(expr, src));
                        e = sets.rewrite(&e).map_err(one)?;
                    }
                    check_grouped(&e, &s.group_by, src).map_err(one)?;
                    SelectItem::Expr { expr: e, alias }
                }
                SelectItem::Wildcard { .. } => {
                    return Err(vec![not_yet("* in a grouped query")]);
                }
                SelectItem::Assign { .. } => return Err(vec![msg(141, &[])]),
            });
        }
        let having = match &s.having {
            Some(h) => {
                let mut e = c.rewrite(h).map_err(one)?;
                if let Some(sets) = &mut sets {
                    e = sets.rewrite(&e).map_err(one)?;
                }
                check_grouped(&e, &s.group_by, src).map_err(one)?;
                Some(e)
            }
            None => None,
        };
        let mut order_by = Vec::with_capacity(q.order_by.len());
        for o in &q.order_by {
            let mut e = c.rewrite(&o.expr).map_err(one)?;
            if let Some(sets) = &mut sets {
                e = sets.rewrite(&e).map_err(one)?;
            }
            order_by.push(OrderByItem {
                expr: e,
                descending: o.descending,
            });
        }
        let aggregates = c
            .calls
            .iter()
            .map(|call| self.aggregate_spec(call, src, rows))
            .collect::<Result<Vec<_>, _>>()
            .map_err(one)?;
        let select = Select {
            distinct: s.distinct,
            top: s.top.clone(),
            from: s.from.clone(),
            where_clause: having,
            ..Select::of_items(items)
        };
        let query = Query {
            ctes: Vec::new(),
            body: q.body.clone(),
            order_by,
            offset: None,
            fetch: None,
            hints: Vec::new(),
        };
        if let Some(sets) = &mut sets {
            sets.type_keys(self, src, rows);
        }
        Ok(GroupingPlan {
            query,
            select,
            aggregates,
            sets,
        })
    }

    /// Row indexes of each group, groups in ascending key order. Without GROUP BY, one
    /// group of every row (possibly none).
    fn groups(
        &mut self,
        by: &[Expr],
        src: &Source,
        rows: &[Vec<Value>],
    ) -> Result<Vec<Vec<usize>>, SqlError> {
        if by.is_empty() {
            return Ok(vec![(0..rows.len()).collect()]);
        }
        let mut keyed: Vec<(Vec<Value>, usize)> = Vec::with_capacity(rows.len());
        for (i, r) in rows.iter().enumerate() {
            let ctx: RowCtx<'_> = Session::ctx(src, r);
            let key = by
                .iter()
                .map(|e| self.eval(e, Some(&ctx)))
                .collect::<Result<Vec<_>, _>>()?;
            keyed.push((key, i));
        }
        let mut failure = None;
        keyed.sort_by(|a, b| {
            for (x, y) in a.0.iter().zip(&b.0) {
                let o = match (x.is_null(), y.is_null()) {
                    (true, true) => Ordering::Equal,
                    (true, false) => Ordering::Less,
                    (false, true) => Ordering::Greater,
                    _ => ops::compare(x, y)
                        .unwrap_or_else(|e| {
                            failure.get_or_insert(e);
                            None
                        })
                        .unwrap_or(Ordering::Equal),
                };
                if o != Ordering::Equal {
                    return o;
                }
            }
            a.1.cmp(&b.1)
        });
        if let Some(e) = failure {
            return Err(e);
        }
        let mut out: Vec<Vec<usize>> = Vec::new();
        let mut last: Option<&Vec<Value>> = None;
        for (k, i) in &keyed {
            match last {
                Some(l) if same_row(l, k) => out.last_mut().expect("a group").push(*i),
                _ => out.push(vec![*i]),
            }
            last = Some(k);
        }
        Ok(out)
    }
}

/// A grouped query's parts (`plan_grouping`).
pub(super) struct GroupingPlan {
    pub query: Query,
    pub select: Select,
    pub aggregates: Vec<Aggregate>,
    /// ROLLUP, CUBE, GROUPING SETS or GROUPING calls (grouping_sets.rs).
    pub sets: Option<SetsPlan>,
}

/// A group's row: its first source row (NULLs for an empty group), then each aggregate.
pub(super) fn group_row(
    src: &Source,
    first: Option<&[Value]>,
    accs: &mut [Accumulator],
) -> Result<Vec<Value>, SqlError> {
    let mut row = match first {
        Some(r) => r.to_vec(),
        None => vec![Value::Null; src.rowset.columns.len()],
    };
    for a in accs {
        row.push(a.finish()?);
    }
    Ok(row)
}

/// The source of one row per group: the source's columns, then the aggregates' hidden
/// columns of `types`.
pub(super) fn grouped_source(src: &Source, types: &[SqlType], rows: Vec<Vec<Value>>) -> Source {
    let mut columns = src.rowset.columns.clone();
    columns.extend(types.iter().enumerate().map(|(i, t)| (hidden_name(i), *t)));
    let mut part_of = src.part_of.clone();
    if !part_of.is_empty() {
        part_of.extend(types.iter().map(|_| super::eval::UNQUALIFIED));
    }
    Source {
        rowset: Rowset { columns, rows },
        table: src.table.clone(),
        alias: src.alias.clone(),
        parts: src.parts.clone(),
        part_of,
    }
}

fn count_value(n: i64, t: SqlType) -> Value {
    match t {
        SqlType::BigInt => Value::BigInt(n),
        _ => Value::Int(n as i32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::{QueryBody, StatementKind};

    /// The first select-list expression of `SELECT <item> FROM t`.
    fn item(text: &str) -> Expr {
        let mut batch = crate::parser::parse_batch(&format!("SELECT {text} FROM t")).unwrap();
        let StatementKind::Select(q) = batch.remove(0).kind else {
            panic!("a SELECT")
        };
        let QueryBody::Select(s) = q.body else {
            panic!("a plain SELECT")
        };
        match &s.items[0] {
            SelectItem::Expr { expr, .. } => expr.clone(),
            other => panic!("an expression, not {other:?}"),
        }
    }

    /// The searches see what `map_expr` visits, no more: an aggregate or a window function
    /// under any operator or call, none inside a subquery.
    #[test]
    fn searches_find_what_map_expr_visits() {
        for (text, aggregate, window) in [
            ("x", false, false),
            ("SUM(x)", true, false),
            ("CASE WHEN x > 1 THEN 1 + COUNT(*) END", true, false),
            (
                "CAST(ISNULL(MAX(x), 0) AS int) COLLATE Latin1_General_CI_AS",
                true,
                false,
            ),
            ("(SELECT SUM(y) FROM u)", false, false),
            ("ROW_NUMBER() OVER (ORDER BY x)", false, true),
            ("SUM(x) OVER (PARTITION BY y)", false, true),
            ("1 + RANK() OVER (ORDER BY MAX(x))", true, true),
            ("x IN (1, 2, AVG(y))", true, false),
        ] {
            let e = item(text);
            assert_eq!(contains_aggregate(&e), aggregate, "aggregate in {text}");
            assert_eq!(contains_window(&e), window, "window in {text}");
        }
    }
}
