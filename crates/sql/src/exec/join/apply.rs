//! CROSS APPLY and OUTER APPLY of a derived table (a `VALUES` constructor among them) or a
//! table-valued function: the right side runs again for each left row, with that row as its
//! innermost enclosing row (`Session::with_outer_row`), so it may name the left side's
//! columns (SQL Server's correlated nested loops). CROSS APPLY gives each left row joined
//! with each of its right rows; OUTER APPLY also gives a left row with no right rows, with
//! NULLs for the right side's columns.
//!
//! The right side's columns are known only by running it (a derived table's types come
//! from its values, `select::ColumnTyper`), and its shape is needed before the first row
//! goes out. So the left side is read ahead, one row at a time, until a left row's right
//! side gives rows (at most `LOOKAHEAD_ROWS` left rows, each kept with its right rows); that
//! run's columns, widened as a streamed result's are (`apply_type`), are the shape. With no
//! left row at all, the right side runs once with a left row of NULLs for its columns only.
//!
//! Invariants:
//! 1. Memory: one left row and its right rows' spool (which spills past
//!    `SORT_MEMORY_BYTES`), plus at most `LOOKAHEAD_ROWS` left rows read ahead, all but the
//!    last with no right rows. The left side streams.
//! 2. A right run that read no enclosing row (`Scopes::outer_reads` unchanged) gives the
//!    same rows for every left row: it is kept and read again instead of run again.
//! 3. Every right row's value fits its column's type in the shape, else the statement
//!    fails with 8115 (as a streamed result's later row does): never a cut value.

use std::collections::VecDeque;
use std::sync::Arc;

use super::{null_extended, one, Built, Errors, Shape};
use crate::ast::TableSource;
use crate::exec::eval::value_type;
use crate::exec::spill::{SortSpill, Spool, SpoolCursor};
use crate::exec::stream::{RowSource, SORT_MEMORY_BYTES};
use crate::exec::Session;
use crate::messages::msg;
use crate::types::{SqlType, Value, MAX_LENGTH};

/// Left rows read ahead at most, looking for a right side with rows to type the shape by.
const LOOKAHEAD_ROWS: usize = 64;

/// A left row with its right side's rows.
type Applied = (Vec<Value>, Arc<Spool>);

/// One run of the right side: its columns, its rows, how many, and whether it read the
/// enclosing (left) row.
struct Run {
    columns: Vec<(String, SqlType)>,
    spool: Arc<Spool>,
    count: u64,
    correlated: bool,
}

/// The right side run for the left row `row`.
fn run(s: &mut Session, right: &TableSource, outer: &Shape, row: &[Value]) -> Result<Run, Errors> {
    let ctx = outer.ctx(row);
    let reads = s.scopes.outer_reads;
    let (columns, spool, count) = s.with_outer_row(Some(&ctx), |s| match right {
        TableSource::Derived {
            query,
            alias,
            columns,
        } => {
            let rows = s.query_rows(query, None).map_err(one)?;
            let rows = crate::exec::subquery::named_columns(rows, columns, alias).map_err(one)?;
            Ok::<_, Errors>((rows.columns, rows.spool, rows.count))
        }
        TableSource::Function { .. } => {
            let r = s.function_rowset(right)?;
            let mut spool = SortSpill::fifo(&s.spill_dir(), SORT_MEMORY_BYTES);
            let count = r.rows.len() as u64;
            for row in r.rows {
                spool.push(row).map_err(one)?;
            }
            Ok((r.columns, spool.finish_rewindable().map_err(one)?, count))
        }
        _ => unreachable!("only a derived table or a function is applied (join.rs)"),
    })?;
    Ok(Run {
        columns,
        spool: Arc::new(spool),
        count,
        correlated: s.scopes.outer_reads != reads,
    })
}

/// The type an applied column is given: its first run's, widened so a later run's values
/// fit too (text of any length, a decimal of any integral digits; fixed-length text and
/// binary become variable, as their later values may be shorter or longer).
fn apply_type(t: SqlType) -> SqlType {
    match t {
        SqlType::Char(_) | SqlType::NChar(_) | SqlType::VarChar(_) | SqlType::NVarChar(_) => {
            SqlType::NVarChar(MAX_LENGTH)
        }
        SqlType::Binary(_) | SqlType::VarBinary(_) => SqlType::VarBinary(MAX_LENGTH),
        t => crate::exec::select::widened(t),
    }
}

/// APPLY of `right` (exposed as `exposed`) to `outer`'s rows; `preserve` for OUTER APPLY.
pub(super) fn apply<'p>(
    s: &mut Session,
    (outer_shape, mut outer): Built<'p>,
    right: &'p TableSource,
    exposed: &str,
    preserve: bool,
) -> Result<Built<'p>, Errors> {
    let mut ahead = VecDeque::new();
    let mut columns = None;
    let mut fixed = None;
    while ahead.len() < LOOKAHEAD_ROWS && !s.cancelled() {
        let Some(r) = outer.next_row(s)? else {
            break;
        };
        let run = run(s, right, &outer_shape, &r)?;
        ahead.push_back((r, run.spool.clone()));
        columns = Some(run.columns);
        if !run.correlated {
            fixed = Some(run.spool);
            break;
        }
        if run.count > 0 {
            break;
        }
    }
    let columns = match columns {
        Some(c) => c,
        None => {
            let nulls = vec![Value::Null; outer_shape.width()];
            run(s, right, &outer_shape, &nulls)?.columns
        }
    };
    let columns: Vec<_> = columns
        .into_iter()
        .map(|(n, t)| (n, apply_type(t)))
        .collect();
    let types = columns.iter().map(|(_, t)| *t).collect();
    let right_shape = Shape::leaf(columns, exposed);
    let shape = outer_shape.joined(&right_shape);
    let rows = ApplyRows {
        outer,
        outer_shape,
        right,
        types,
        preserve,
        ahead,
        fixed,
        current: None,
        cursor: SpoolCursor::default(),
        matched: false,
    };
    Ok((shape, Box::new(rows)))
}

struct ApplyRows<'p> {
    outer: Box<dyn RowSource + 'p>,
    outer_shape: Shape,
    right: &'p TableSource,
    /// The right side's column types in the shape (invariant 3).
    types: Vec<SqlType>,
    /// OUTER APPLY: a left row with no right rows comes out with NULLs.
    preserve: bool,
    /// Left rows read while the shape was found, each with its right rows.
    ahead: VecDeque<Applied>,
    /// The right rows of a right side that reads no left column (invariant 2).
    fixed: Option<Arc<Spool>>,
    current: Option<Applied>,
    cursor: SpoolCursor,
    matched: bool,
}

impl ApplyRows<'_> {
    /// The next left row with its right rows, None after the last.
    fn next_left(&mut self, s: &mut Session) -> Result<Option<Applied>, Errors> {
        if let Some(pair) = self.ahead.pop_front() {
            return Ok(Some(pair));
        }
        if s.cancelled() {
            return Ok(None);
        }
        let Some(r) = self.outer.next_row(s)? else {
            return Ok(None);
        };
        let spool = match &self.fixed {
            Some(spool) => spool.clone(),
            None => run(s, self.right, &self.outer_shape, &r)?.spool,
        };
        Ok(Some((r, spool)))
    }

    /// Checks a right row against the shape's types (invariant 3).
    fn check_fits(&self, row: &[Value]) -> Result<(), Errors> {
        debug_assert_eq!(row.len(), self.types.len(), "one query, one width");
        for (t, v) in self.types.iter().zip(row) {
            if !v.is_null() && crate::convert::fitting_type(*t, value_type(v)) != *t {
                let name = crate::convert::data_type_name(*t);
                return Err(one(msg(8115, &[&"expression", &name])));
            }
        }
        Ok(())
    }
}

impl RowSource for ApplyRows<'_> {
    fn next_row(&mut self, s: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        loop {
            if self.current.is_none() {
                let Some(pair) = self.next_left(s)? else {
                    return Ok(None);
                };
                self.current = Some(pair);
                self.cursor = SpoolCursor::default();
                self.matched = false;
            }
            let (left, spool) = self.current.as_ref().expect("set above");
            match self.cursor.next_row(spool).map_err(one)? {
                Some(right) => {
                    self.check_fits(&right)?;
                    let mut row = Vec::with_capacity(left.len() + right.len());
                    row.extend(left.iter().cloned());
                    row.extend(right);
                    self.matched = true;
                    return Ok(Some(row));
                }
                None => {
                    let (left, _) = self.current.take().expect("set above");
                    if self.preserve && !self.matched {
                        return Ok(Some(null_extended(left, self.types.len())));
                    }
                }
            }
        }
    }
}
