//! PIVOT and UNPIVOT: a FROM clause's source turned into one leaf of other columns.
//!
//! UNPIVOT streams: each source row gives one row per listed column whose value is not
//! NULL (SQL Server drops NULLs): the source's other columns, then the value, then the
//! listed column's name (NVARCHAR(128)). The listed columns must have one type exactly
//! (8167).
//!
//! PIVOT groups: its grouping columns are every source column but the aggregate's
//! argument and the FOR column. The source's rows go through the spilling sort by those
//! columns (`SortSpill`, as GROUP BY's do), then each group is folded into one row: its
//! grouping columns, then per IN value the aggregate (`aggregate::Accumulator`) of the
//! argument over the group's rows whose FOR column equals that value (the IN identifier
//! converted to the FOR column's type). Over no rows COUNT is 0 and the others NULL. The
//! rows go to a spool (which spills), read as a derived table's are. With no grouping
//! column the whole source is one group, one row even when it is empty, as an aggregate
//! without GROUP BY gives.
//!
//! Invariants:
//! 1. Memory: UNPIVOT holds one source row; PIVOT one group's accumulators and the sort's
//!    and spool's in-memory parts (each within `SORT_MEMORY_BYTES`).
//! 2. Names are checked before any row is read: unknown columns 207, an IN name equal to
//!    a column kept beside it 265 then 8156, an IN name twice 8156.

use std::sync::{Arc, Mutex};

use super::{leaf_rows, one, Errors, Leaf, Shape};
use crate::ast::{Expr, ObjectName, TableSource};
use crate::exec::aggregate::{result_of, Accumulator};
use crate::exec::lower::not_yet;
use crate::exec::select::same_row;
use crate::exec::spill::{SortSpill, Spool};
use crate::exec::stream::{key_order, RowSource, SORT_MEMORY_BYTES};
use crate::exec::Session;
use crate::messages::msg;
use crate::types::{SqlType, Value};

/// What an UNPIVOT leaf gives of each source row.
pub(super) struct UnpivotPlan {
    /// The source columns kept, in order.
    keep: Vec<usize>,
    /// The listed columns: position and name.
    folded: Vec<(usize, String)>,
}

/// True when two IN names are one: SQL Server compares them case- and
/// trailing-space-insensitively.
fn same_name(a: &str, b: &str) -> bool {
    a.trim_end().eq_ignore_ascii_case(b.trim_end())
}

/// 8156 for a name listed twice; 265 then 8156 for one equal to a kept column's.
fn check_names(names: &[&str], kept: &[&str], operator: &str, alias: &str) -> Result<(), Errors> {
    for (i, n) in names.iter().enumerate() {
        if kept.iter().any(|k| same_name(k, n)) {
            return Err(vec![
                msg(265, &[n, &operator, &operator]),
                msg(8156, &[n, &alias]),
            ]);
        }
        if names[..i].iter().any(|m| same_name(m, n)) {
            return Err(one(msg(8156, &[n, &alias])));
        }
    }
    Ok(())
}

/// The column `name` names in `shape`, else 207.
fn column_of(shape: &Shape, name: &ObjectName) -> Result<usize, Errors> {
    shape
        .ctx(&[])
        .position(name)
        .ok_or_else(|| one(msg(207, &[&name.name()])))
}

/// The leaf a PIVOT or UNPIVOT (`ts`) makes of its source's leaf.
pub(super) fn rotated(
    s: &mut Session,
    ts: &TableSource,
    (leaf, shape): (Leaf, Shape),
) -> Result<(Leaf, Shape), Errors> {
    match ts {
        TableSource::Unpivot {
            value,
            name,
            columns,
            alias,
            ..
        } => {
            let (plan, columns) = unpivot_plan(&shape, value, name, columns, alias)?;
            let source = Box::new(leaf);
            Ok((Leaf::Unpivot { source, plan }, Shape::leaf(columns, alias)))
        }
        TableSource::Pivot {
            aggregate,
            argument,
            column,
            values,
            alias,
            ..
        } => {
            let spec = PivotSpec::new(&shape, aggregate, argument, column, values, alias)?;
            let (columns, spool) = spec.rows(s, &leaf, &shape)?;
            Ok((Leaf::Spooled(Arc::new(spool)), Shape::leaf(columns, alias)))
        }
        _ => unreachable!("only PIVOT and UNPIVOT rotate"),
    }
}

/// UNPIVOT's plan and its columns: the kept ones, the value's, the name's.
fn unpivot_plan(
    shape: &Shape,
    value: &str,
    name: &str,
    listed: &[String],
    alias: &str,
) -> Result<(UnpivotPlan, Vec<(String, SqlType)>), Errors> {
    let mut folded = Vec::with_capacity(listed.len());
    for c in listed {
        let i = column_of(shape, &ObjectName::simple(c))?;
        if folded.iter().any(|&(j, _)| j == i) {
            return Err(one(msg(8156, &[&c.as_str(), &alias])));
        }
        folded.push((i, shape.columns[i].0.clone()));
    }
    let value_type = shape.columns[folded[0].0].1;
    if let Some((i, _)) = folded
        .iter()
        .find(|(i, _)| shape.columns[*i].1 != value_type)
    {
        return Err(one(msg(8167, &[&shape.columns[*i].0.as_str()])));
    }
    let keep: Vec<usize> = (0..shape.width())
        .filter(|i| !folded.iter().any(|(j, _)| j == i))
        .collect();
    let kept: Vec<&str> = keep.iter().map(|&i| shape.columns[i].0.as_str()).collect();
    check_names(&[value, name], &kept, "UNPIVOT", alias)?;
    let mut columns: Vec<_> = keep.iter().map(|&i| shape.columns[i].clone()).collect();
    columns.push((value.to_string(), value_type));
    columns.push((name.to_string(), SqlType::NVarChar(128)));
    Ok((UnpivotPlan { keep, folded }, columns))
}

/// An UNPIVOT leaf's rows (invariant 1).
pub(super) fn unpivot_rows<'p>(
    s: &mut Session,
    source: &'p Leaf,
    plan: &'p UnpivotPlan,
) -> Result<Box<dyn RowSource + 'p>, Errors> {
    Ok(Box::new(UnpivotRows {
        input: leaf_rows(s, source, None)?,
        plan,
        row: None,
        next: 0,
    }))
}

struct UnpivotRows<'p> {
    input: Box<dyn RowSource + 'p>,
    plan: &'p UnpivotPlan,
    /// The source row being unfolded, and the next listed column to look at.
    row: Option<Vec<Value>>,
    next: usize,
}

impl RowSource for UnpivotRows<'_> {
    fn next_row(&mut self, s: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        loop {
            let Some(row) = &self.row else {
                match self.input.next_row(s)? {
                    Some(r) => (self.row, self.next) = (Some(r), 0),
                    None => return Ok(None),
                }
                continue;
            };
            while let Some((i, name)) = self.plan.folded.get(self.next) {
                self.next += 1;
                if row[*i].is_null() {
                    continue;
                }
                let mut out = Vec::with_capacity(self.plan.keep.len() + 2);
                out.extend(self.plan.keep.iter().map(|&k| row[k].clone()));
                out.push(row[*i].clone());
                out.push(Value::Text(name.clone()));
                return Ok(Some(out));
            }
            self.row = None;
        }
    }
}

/// A PIVOT, its names checked and its IN values converted (invariant 2).
struct PivotSpec {
    call: Expr,
    arg_type: SqlType,
    result_type: SqlType,
    argument: usize,
    column: usize,
    group: Vec<usize>,
    names: Vec<String>,
    values: Vec<Value>,
}

impl PivotSpec {
    fn new(
        shape: &Shape,
        aggregate: &ObjectName,
        argument: &ObjectName,
        column: &ObjectName,
        names: &[String],
        alias: &str,
    ) -> Result<PivotSpec, Errors> {
        let upper = aggregate.name().to_ascii_uppercase();
        let built = ["COUNT", "COUNT_BIG", "SUM", "AVG", "MIN", "MAX"];
        let known = ["STDEV", "STDEVP", "VAR", "VARP", "CHECKSUM_AGG"];
        if aggregate.parts.len() != 1 || !built.contains(&upper.as_str()) {
            if known.contains(&upper.as_str()) {
                return Err(one(not_yet(&format!("{upper} in PIVOT"))));
            }
            return Err(one(msg(195, &[&aggregate.name(), &"aggregate function"])));
        }
        let arg = column_of(shape, argument)?;
        let col = column_of(shape, column)?;
        let group: Vec<usize> = (0..shape.width())
            .filter(|&i| i != arg && i != col)
            .collect();
        let kept: Vec<&str> = group.iter().map(|&i| shape.columns[i].0.as_str()).collect();
        let listed: Vec<&str> = names.iter().map(String::as_str).collect();
        check_names(&listed, &kept, "PIVOT", alias)?;
        let column_type = shape.columns[col].1;
        let mut values = Vec::with_capacity(names.len());
        for n in names {
            let v = crate::convert::convert(&Value::Text(n.clone()), column_type, None);
            values.push(v.map_err(|_| {
                let target = crate::convert::data_type_name(column_type);
                vec![msg(8114, &[&"nvarchar", &target]), msg(473, &[&n.as_str()])]
            })?);
        }
        let arg_type = shape.columns[arg].1;
        let result_type = match upper.as_str() {
            "COUNT" => SqlType::Int,
            "COUNT_BIG" => SqlType::BigInt,
            _ => result_of(&upper, arg_type),
        };
        let call = Expr::Function {
            name: aggregate.clone(),
            args: vec![Expr::Column(argument.clone())],
            distinct: false,
            star: false,
        };
        Ok(PivotSpec {
            call,
            arg_type,
            result_type,
            argument: arg,
            column: col,
            group,
            names: names.to_vec(),
            values,
        })
    }

    /// The pivoted rows in a spool, with their columns (invariant 1).
    fn rows(
        &self,
        s: &mut Session,
        source: &Leaf,
        shape: &Shape,
    ) -> Result<(Vec<(String, SqlType)>, Spool), Errors> {
        let sorted = self.sorted(s, source)?;
        let mut out = SortSpill::fifo(&s.spill_dir(), SORT_MEMORY_BYTES);
        let g = self.group.len();
        let mut key: Option<Vec<Value>> = None;
        let mut accs = self.accumulators();
        for r in sorted {
            let r = r.map_err(one)?;
            if key.as_ref().is_some_and(|k| !same_row(k, &r[..g])) {
                let k = key.take().expect("checked");
                out.push(self.finish_group(k, &mut accs)?).map_err(one)?;
            }
            key.get_or_insert_with(|| r[..g].to_vec());
            self.take(&r[g], &r[g + 1], &mut accs)?;
        }
        if let Some(k) = key.or_else(|| (g == 0).then(Vec::new)) {
            out.push(self.finish_group(k, &mut accs)?).map_err(one)?;
        }
        let mut columns: Vec<_> = self
            .group
            .iter()
            .map(|&i| shape.columns[i].clone())
            .collect();
        columns.extend(self.names.iter().map(|n| (n.clone(), self.result_type)));
        Ok((columns, out.finish_rewindable().map_err(one)?))
    }

    /// The source's rows as (grouping columns, FOR column, argument), sorted by the
    /// grouping columns.
    fn sorted(
        &self,
        s: &mut Session,
        source: &Leaf,
    ) -> Result<crate::exec::spill::SortedRows, Errors> {
        let failure = Arc::new(Mutex::new(None));
        let order = key_order(vec![false; self.group.len()], failure.clone());
        let mut sort = SortSpill::new(&s.spill_dir(), SORT_MEMORY_BYTES, order);
        let mut input = leaf_rows(s, source, None)?;
        while let Some(r) = input.next_row(s)? {
            if s.cancelled() {
                break;
            }
            let mut keyed: Vec<Value> = self.group.iter().map(|&i| r[i].clone()).collect();
            keyed.push(r[self.column].clone());
            keyed.push(r[self.argument].clone());
            sort.push(keyed).map_err(one)?;
        }
        drop(input);
        // The source is read here, not as the statement's rows are: its SET STATISTICS IO
        // line comes after the results, as a derived table's does.
        if let Leaf::Table { t, .. } = source {
            s.scopes.deferred.extend(s.io_line(t));
        }
        let sorted = sort.finish().map_err(one)?;
        if let Some(e) = failure.lock().unwrap().take() {
            return Err(one(e));
        }
        Ok(sorted)
    }

    fn accumulators(&self) -> Vec<Accumulator> {
        let arg_type = Some(self.arg_type);
        (0..self.values.len())
            .map(|_| Accumulator::windowed(&self.call, arg_type))
            .collect()
    }

    /// Folds one row's argument into the accumulators of the IN values its FOR column
    /// equals (none when it is NULL).
    fn take(&self, column: &Value, arg: &Value, accs: &mut [Accumulator]) -> Result<(), Errors> {
        if column.is_null() {
            return Ok(());
        }
        for (v, acc) in self.values.iter().zip(accs.iter_mut()) {
            let equal = crate::ops::compare(column, v).map_err(one)?;
            if equal == Some(std::cmp::Ordering::Equal) {
                acc.take_value(Some(arg.clone())).map_err(one)?;
            }
        }
        Ok(())
    }

    /// A group's row: its grouping columns, then each IN value's aggregate; the
    /// accumulators start again.
    fn finish_group(
        &self,
        mut key: Vec<Value>,
        accs: &mut Vec<Accumulator>,
    ) -> Result<Vec<Value>, Errors> {
        for acc in accs.iter_mut() {
            key.push(acc.finish().map_err(one)?);
        }
        *accs = self.accumulators();
        Ok(key)
    }
}
