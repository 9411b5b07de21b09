//! A described plan's operators, and the two forms SQL Server gives them: SHOWPLAN_TEXT's
//! drawn lines and SHOWPLAN_ALL's rows. Both are read off one tree (`Operator`), built once
//! by showplan.rs from the executor's decisions; neither form decides anything.
//!
//! SHOWPLAN_ALL's estimates: extentdb's costs (exec/cardinality.rs) are not SQL Server's
//! units, so EstimateIO, EstimateCPU, AvgRowSize and TotalSubtreeCost are always NULL,
//! never invented. EstimateRows is a figure only where it follows from what is known
//! without running the statement (`Rows`): a table's row count for a scan of it without
//! WHERE (`sys.partitions.rows`), one per key of a seek of whole unique keys, the
//! cardinality estimate (cardinality.rs, from the statistics) of a nonclustered index
//! seek and of a scan whose every WHERE conjunct compares a column with a value, a VALUES
//! list's rows, one for an aggregate without GROUP BY, an input's count through an
//! operator that passes every row on; else NULL.
//! EstimateExecutions is 1, or a Nested Loops' outer row count for its inner input (NULL
//! when that is unknown). OutputList and Warnings are NULL (not tracked). Parallel is 0:
//! the executor runs every operator on the session's thread.
//!
//! Invariants:
//! 1. The text form's lines and SHOWPLAN_ALL's operator rows are the same operators in the
//!    same order (pre-order), one row per line, the row's StmtText the line.
//! 2. NodeId numbers the statement row 1 and the operators 2, 3, ... in that order; each
//!    operator's Parent is the NodeId of the operator reading it, 1 for the root.

use std::sync::Arc;

use extentdb_storage::SharedDatabase;

use crate::messages::SqlError;
use crate::types::{SqlType, Value, MAX_LENGTH};

/// An operator's output rows as far as they are known before running (module doc).
#[derive(Clone)]
pub(super) enum Rows {
    Known(f64),
    Unknown,
    /// As many as its (first) input gives.
    AsInput,
    /// A TOP's: its input's, if known, up to this many.
    AtMost(f64),
    /// A join without ON's: its inputs' product.
    Product,
    /// A whole table's: the rows its allocation unit holds, counted only for SHOWPLAN_ALL
    /// (`count_tables`), as sys.partitions.rows counts them.
    Table(Arc<SharedDatabase>, u64),
}

/// One operator of a plan: SQL Server's physical and logical operator names, its argument,
/// the values it defines, its output rows, and its inputs.
pub(super) struct Operator {
    pub physical: &'static str,
    pub logical: &'static str,
    /// Whether its text names the logical operator first (`Nested Loops(Inner Join, ...)`).
    pub shows_logical: bool,
    /// What follows the name in its text (`OBJECT:(...), SEEK:(...)`); empty for none.
    pub argument: String,
    /// The values it defines (`[Expr1001]=...`), SHOWPLAN_ALL's DefinedValues.
    pub defined: Vec<String>,
    pub rows: Rows,
    pub inputs: Vec<Operator>,
}

impl Operator {
    /// An operator whose logical operator is its physical one.
    pub fn new(physical: &'static str, argument: String) -> Operator {
        Operator::logical(physical, physical, argument)
    }

    pub fn logical(physical: &'static str, logical: &'static str, argument: String) -> Operator {
        Operator {
            physical,
            logical,
            shows_logical: false,
            argument,
            defined: Vec::new(),
            rows: Rows::Unknown,
            inputs: Vec::new(),
        }
    }

    /// A join: its text names its logical operator (`Nested Loops(Left Outer Join, ...)`).
    pub fn join(physical: &'static str, logical: &'static str, argument: String) -> Operator {
        Operator {
            shows_logical: true,
            ..Operator::logical(physical, logical, argument)
        }
    }

    pub fn rows(mut self, rows: Rows) -> Operator {
        self.rows = rows;
        self
    }

    pub fn defines(mut self, defined: Vec<String>) -> Operator {
        self.defined = defined;
        self
    }

    pub fn inputs(mut self, inputs: Vec<Operator>) -> Operator {
        self.inputs = inputs;
        self
    }

    /// `op` reading this operator.
    pub fn under(self, op: Operator) -> Operator {
        op.inputs(vec![self])
    }

    /// Its line's text: `Physical(Logical, argument)`, parts absent left out.
    pub fn text(&self) -> String {
        let mut parts = Vec::new();
        if self.shows_logical {
            parts.push(self.logical);
        }
        if !self.argument.is_empty() {
            parts.push(&self.argument);
        }
        match parts.is_empty() {
            true => self.physical.to_string(),
            false => format!("{}({})", self.physical, parts.join(", ")),
        }
    }

    /// Its output rows, `AsInput` resolved through its first input.
    pub fn estimate(&self) -> Option<f64> {
        match self.rows {
            Rows::Known(n) => Some(n),
            Rows::Unknown => None,
            Rows::AsInput => self.inputs.first().and_then(Operator::estimate),
            Rows::AtMost(n) => Some(self.inputs.first()?.estimate()?.min(n)),
            Rows::Product => self.inputs.iter().map(Operator::estimate).product(),
            Rows::Table(..) => unreachable!("counted before estimating (count_tables)"),
        }
    }

    /// Each `Rows::Table` made `Known`: its allocation unit's rows as they are now.
    pub fn count_tables(&mut self) -> Result<(), Vec<SqlError>> {
        if let Rows::Table(db, unit) = &self.rows {
            let space = db.read().unwrap().unit_space(*unit);
            let space = space.map_err(super::super::space::storage_error)?;
            self.rows = Rows::Known(space.rows as f64);
        }
        self.inputs.iter_mut().try_for_each(Operator::count_tables)
    }

    /// How often it runs when its reader runs `executions` times: a Nested Loops runs its
    /// inner input once per outer row; a lazy spool reads its input once, then is read again.
    fn input_executions(&self, i: usize, executions: Option<f64>) -> Option<f64> {
        match (self.physical, self.logical, i) {
            ("Nested Loops", _, 1) => Some(executions? * self.inputs[0].estimate()?),
            ("Table Spool", "Lazy Spool", _) => executions.map(|e| e.min(1.0)),
            _ => executions,
        }
    }
}

/// Appends `op`'s line and its inputs' as SQL Server draws them: `prefix|--text`, inputs
/// five columns further in, a `|` kept down the left of an input that has a sibling below.
pub(super) fn draw(op: &Operator, prefix: &str, sibling_below: bool, lines: &mut Vec<String>) {
    lines.push(format!("{prefix}|--{}", op.text()));
    let inner = format!("{prefix}{}", if sibling_below { "|    " } else { "     " });
    for (i, input) in op.inputs.iter().enumerate() {
        draw(input, &inner, i + 1 < op.inputs.len(), lines);
    }
}

/// SHOWPLAN_ALL's columns, in SQL Server's order, with their types.
pub(super) fn all_columns() -> Vec<(String, SqlType)> {
    let text = SqlType::NVarChar(MAX_LENGTH);
    [
        ("StmtText", text),
        ("StmtId", SqlType::Int),
        ("NodeId", SqlType::Int),
        ("Parent", SqlType::Int),
        ("PhysicalOp", text),
        ("LogicalOp", text),
        ("Argument", text),
        ("DefinedValues", text),
        ("EstimateRows", SqlType::Real),
        ("EstimateIO", SqlType::Real),
        ("EstimateCPU", SqlType::Real),
        ("AvgRowSize", SqlType::Int),
        ("TotalSubtreeCost", SqlType::Real),
        ("OutputList", text),
        ("Warnings", text),
        ("Type", text),
        ("Parallel", SqlType::Bit),
        ("EstimateExecutions", SqlType::Real),
    ]
    .into_iter()
    .map(|(n, t)| (n.to_string(), t))
    .collect()
}

/// SHOWPLAN_ALL's rows of one statement: the statement's (`kind`: SELECT, INSERT, ...),
/// then one per operator (invariants 1 and 2). `plan`'s tables are counted
/// (`count_tables`).
pub(super) fn all_rows(
    text: String,
    statement: i32,
    kind: &str,
    plan: &Operator,
) -> Vec<Vec<Value>> {
    let real = |n: Option<f64>| n.map_or(Value::Null, |n| Value::Real(n as f32));
    let mut statement_row = vec![
        Value::Text(text),
        Value::Int(statement),
        Value::Int(1),
        Value::Int(0),
    ];
    statement_row.extend([Value::Null, Value::Null, Value::Null, Value::Null]);
    statement_row.push(real(plan.estimate()));
    statement_row.extend(std::iter::repeat_n(Value::Null, 6));
    statement_row.extend([Value::Text(kind.into()), Value::Null, Value::Null]);
    let mut rows = vec![statement_row];
    let mut lines = Vec::new();
    draw(plan, "  ", false, &mut lines);
    let mut lines = lines.into_iter();
    let mut push = |op: &Operator, node: i32, parent: i32, executions: Option<f64>| {
        let line = lines.next().expect("one line per operator (invariant 1)");
        let text = |s: &str| match s.is_empty() {
            true => Value::Null,
            false => Value::Text(s.to_string()),
        };
        rows.push(vec![
            Value::Text(line),
            Value::Int(statement),
            Value::Int(node),
            Value::Int(parent),
            Value::Text(op.physical.into()),
            Value::Text(op.logical.into()),
            text(&op.argument),
            text(&op.defined.join(", ")),
            real(op.estimate()),
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Text("PLAN_ROW".into()),
            Value::Bit(false),
            real(executions),
        ]);
    };
    number(plan, (2, 1), Some(1.0), &mut push);
    assert!(
        lines.next().is_none(),
        "one line per operator (invariant 1)"
    );
    rows
}

/// What `number` calls for each operator: it, its NodeId, its Parent, its executions.
type Visit<'a> = dyn FnMut(&Operator, i32, i32, Option<f64>) + 'a;

/// Visits `op` and its inputs in pre-order: `(node, parent)` ids (invariant 2) and how
/// often each runs; returns the next free id.
fn number(
    op: &Operator,
    (node, parent): (i32, i32),
    executions: Option<f64>,
    visit: &mut Visit,
) -> i32 {
    visit(op, node, parent, executions);
    let mut next = node + 1;
    for (i, input) in op.inputs.iter().enumerate() {
        next = number(
            input,
            (next, node),
            op.input_executions(i, executions),
            visit,
        );
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Operator {
        let seek = Operator::new("Index Seek", "OBJECT:([i])".into()).rows(Rows::Known(4.0));
        let lookup = Operator::new("Clustered Index Seek", String::new()).rows(Rows::Known(1.0));
        Operator::join("Nested Loops", "Inner Join", String::new())
            .rows(Rows::AsInput)
            .inputs(vec![
                seek.under(Operator::new("Sort", String::new()).rows(Rows::AsInput)),
                lookup,
            ])
            .under(Operator::new("Top", "TOP EXPRESSION:((3))".into()))
    }

    /// Inputs go five columns further in, and a `|` runs down beside an input that has a
    /// sibling below it.
    #[test]
    fn plans_draw_as_sql_servers() {
        let mut lines = Vec::new();
        draw(&plan(), "  ", false, &mut lines);
        assert_eq!(
            lines,
            [
                "  |--Top(TOP EXPRESSION:((3)))",
                "       |--Nested Loops(Inner Join)",
                "            |--Sort",
                "            |    |--Index Seek(OBJECT:([i]))",
                "            |--Clustered Index Seek",
            ]
        );
    }

    /// SHOWPLAN_ALL numbers the statement 1 and the operators from 2 in the text's order,
    /// each with its reader as Parent; the inner input of a Nested Loops runs once per
    /// outer row; unknown estimates are NULL.
    #[test]
    fn all_rows_number_the_text_forms_lines() {
        let rows = all_rows("SELECT".into(), 3, "SELECT", &plan());
        assert_eq!(rows.len(), 6);
        assert!(rows.iter().all(|r| r.len() == all_columns().len()));
        let ids: Vec<(Value, Value, Value)> = rows
            .iter()
            .map(|r| (r[2].clone(), r[3].clone(), r[17].clone()))
            .collect();
        let int = Value::Int;
        assert_eq!(
            ids,
            [
                (int(1), int(0), Value::Null),
                (int(2), int(1), Value::Real(1.0)),
                (int(3), int(2), Value::Real(1.0)),
                (int(4), int(3), Value::Real(1.0)),
                (int(5), int(4), Value::Real(1.0)),
                (int(6), int(3), Value::Real(4.0)),
            ]
        );
        assert_eq!(rows[0][15], Value::Text("SELECT".into()));
        assert_eq!(rows[0][8], Value::Null, "Top's rows are not known");
        assert_eq!(
            rows[2][8],
            Value::Real(4.0),
            "the Nested Loops gives its outer rows"
        );
        assert_eq!(rows[2][5], Value::Text("Inner Join".into()));
        assert_eq!(rows[2][6], Value::Null, "no argument");
        assert!(rows.iter().all(|r| r[1] == int(3)));
    }
}
