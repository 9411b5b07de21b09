//! The OUTPUT clause of INSERT, UPDATE and DELETE: the rows a statement changed, as the
//! pseudo-tables `inserted` (new values) and `deleted` (old values) show them, sent to the
//! client as a result set or inserted into a table (`OUTPUT ... INTO t [(columns)]`).
//!
//! How a statement with OUTPUT runs (`Session::dml_with_output`):
//! 1. Before anything is written the clause is checked (`OutputPlan::new`): its names bind
//!    to `inserted` (INSERT, UPDATE) and `deleted` (UPDATE, DELETE) only, qualified (an
//!    unqualified name is 207, another qualifier 4104, a wildcard's 107); the INTO table
//!    and its column list as INSERT checks them, and the count of values (213, 120, 121).
//! 2. The statement's write phase pushes each row into a spool as the row is written (an
//!    INSERT's with its identity value): `[deleted values..., inserted values...]`, only
//!    the halves the statement has. Nothing grows in memory: the spool spills past
//!    `SORT_MEMORY_BYTES` (`spill::SortSpill`), and reading it back streams.
//! 3. Then the spool is read and each row projected through the clause's list: to the
//!    client (typed as a streamed SELECT types its columns, from the first `TYPING_ROWS`
//!    rows when an expression has no declared type), or converted and inserted into the
//!    INTO table as INSERT ... SELECT inserts (defaults, identity, NOT NULL, keys).
//!
//! Invariants:
//! 1. The statement and its OUTPUT INTO's insert are one statement: both in one
//!    transaction (`Session::as_one_statement`), committed together in autocommit, rolled
//!    back together (to where the statement began inside a transaction) when either fails.
//! 2. A statement that fails partway (a duplicate key on its third row) still sends the
//!    client the OUTPUT rows of the rows it wrote before the failure, then the error, and
//!    is rolled back: SQL Server documents the same ("returns rows to the client even if
//!    the statement encounters errors and is rolled back"). An INTO table gets nothing.
//! 3. The rows go out only after the write phase is done: no database is held while a
//!    slow client takes them (the statement's row locks are, to its end).
//!
//! `INTO @table_variable` inserts into the batch's table variable (`table_variables.rs`):
//! its rows are written in the statement's own transaction in tempdb, committed or rolled
//! back with the rest of the statement (invariant 1), never with the session's transaction.
//!
//! MERGE's OUTPUT (`merge_output_plan`) has `$action` too, before both pseudo-tables.
//!
//! Not here: `$action` outside MERGE, subqueries and aggregates in the
//! list, and columns of an UPDATE's or DELETE's FROM tables: each refused with 40517.

use super::locking::WriteLock;
use super::lower::not_yet;
use super::select::{ColumnTyper, Source};
use super::spill::{SortSpill, Spool};
use super::stream::{SORT_MEMORY_BYTES, TYPING_ROWS};
use super::tables::TableRef;
use super::views::Rowset;
use super::{Out, Session};
use crate::ast::{Expr, OutputClause, OutputTarget, Select, SelectItem};
use crate::messages::{msg, SqlError};
use crate::types::Value;

/// The qualifier of MERGE's `$action` column, which no name can write.
const ACTION_PART: &str = "%%merge%%";

/// Which pseudo-tables a statement's changed rows have, in the order a spooled row holds
/// their values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Changed {
    /// INSERT: `inserted`.
    Inserted,
    /// DELETE: `deleted`.
    Deleted,
    /// UPDATE: `deleted`, then `inserted`.
    Both,
}

impl Changed {
    fn parts(self) -> &'static [&'static str] {
        match self {
            Changed::Inserted => &["inserted"],
            Changed::Deleted => &["deleted"],
            Changed::Both => &["deleted", "inserted"],
        }
    }
}

/// The table an OUTPUT ... INTO inserts into, and the columns it gives values for.
struct IntoTable {
    table: TableRef,
    targets: Vec<usize>,
    identity: Option<usize>,
}

/// A checked OUTPUT clause (step 1 of the module docs).
pub(super) struct OutputPlan {
    /// A changed row as the clause's expressions see it (no rows: only its shape).
    source: Source,
    /// Each OUTPUT list as a select list, with its INTO table (None: to the client).
    lists: Vec<(Select, Option<IntoTable>)>,
}

/// One OUTPUT list as a select list over the changed row.
fn as_select(items: &[SelectItem]) -> Select {
    Select::of_items(items.to_vec())
}

/// What the list may not hold: `*` alone (the grammar has only `inserted.*` and
/// `deleted.*`: 102), an assignment (102), and per expression `checked_expr`'s refusals.
fn check_items(items: &[SelectItem], merge: bool) -> Result<(), SqlError> {
    for item in items {
        match item {
            SelectItem::Wildcard { qualifier: None } => return Err(msg(102, &[&"*"])),
            SelectItem::Wildcard { .. } => {}
            SelectItem::Assign { .. } => return Err(msg(102, &[&"="])),
            SelectItem::Expr { expr, .. } if merge && is_action(expr) => {}
            SelectItem::Expr { expr, .. } => checked_expr(expr)?,
        }
    }
    Ok(())
}

/// True for MERGE's `$action` (kept as a column reference of that name).
fn is_action(e: &Expr) -> bool {
    matches!(e, Expr::Column(c) if c.parts.len() == 1 && c.name().eq_ignore_ascii_case("$action"))
}

/// An OUTPUT expression's column references are qualified (207 for a bare name, as SQL
/// Server asks every reference to the changed table to be `inserted.` or `deleted.`);
/// `$action`, subqueries and aggregates are refused (40517).
fn checked_expr(e: &Expr) -> Result<(), SqlError> {
    let all = |es: &mut dyn Iterator<Item = &Expr>| -> Result<(), SqlError> {
        for e in es {
            checked_expr(e)?;
        }
        Ok(())
    };
    match e {
        Expr::Column(c) if c.name().eq_ignore_ascii_case("$action") => Err(not_yet(
            "$action outside MERGE, whose OUTPUT clause alone has it,",
        )),
        Expr::Column(c) if c.qualifier().is_none() => Err(msg(207, &[&c.name()])),
        Expr::Subquery(_) | Expr::Exists(_) | Expr::InSubquery { .. } => {
            Err(not_yet("a subquery in an OUTPUT clause"))
        }
        e if super::aggregate::contains_aggregate(e) => {
            Err(not_yet("an aggregate in an OUTPUT clause"))
        }
        Expr::Function { args, .. } => all(&mut args.iter()),
        Expr::Cast { expr, .. } | Expr::Unary { expr, .. } | Expr::IsNull { expr, .. } => {
            checked_expr(expr)
        }
        Expr::Collate { expr, .. } => checked_expr(expr),
        Expr::Convert { expr, style, .. } => {
            all(&mut std::iter::once(&**expr).chain(style.as_deref()))
        }
        Expr::Case {
            operand,
            branches,
            else_result,
        } => all(&mut operand
            .as_deref()
            .into_iter()
            .chain(branches.iter().flat_map(|(w, t)| [w, t]))
            .chain(else_result.as_deref())),
        Expr::Binary { left, right, .. } => all(&mut [&**left, &**right].into_iter()),
        Expr::Like {
            expr,
            pattern,
            escape,
            ..
        } => all(&mut [&**expr, &**pattern].into_iter().chain(escape.as_deref())),
        Expr::InList { expr, list, .. } => all(&mut std::iter::once(&**expr).chain(list)),
        Expr::Between {
            expr, low, high, ..
        } => all(&mut [&**expr, &**low, &**high].into_iter()),
        _ => Ok(()),
    }
}

/// Whether an item of OUTPUT clause `clause` (or of the clauses after it, INTO's then the
/// client's) names one of `names` as its qualifier: a column of a table other than
/// `inserted` and `deleted`.
pub(super) fn output_names_any(clause: Option<&crate::ast::OutputClause>, names: &[&str]) -> bool {
    let mut next = clause;
    while let Some(c) = next {
        for item in &c.items {
            let q = match item {
                SelectItem::Wildcard { qualifier: Some(q) } => Some(q.name().to_string()),
                SelectItem::Expr { expr, .. } => first_qualifier_not_pseudo(expr),
                _ => None,
            };
            if q.is_some_and(|q| names.iter().any(|n| n.eq_ignore_ascii_case(&q))) {
                return true;
            }
        }
        next = c.also.as_deref();
    }
    false
}

/// The first column qualifier in `e` other than `inserted` and `deleted`, if any (outside
/// subqueries, which `checked_expr` refuses).
pub(super) fn first_qualifier_not_pseudo(e: &Expr) -> Option<String> {
    let mut found = None;
    visit_columns(e, &mut |c| {
        if let Some(q) = c.qualifier() {
            let pseudo = ["inserted", "deleted"]
                .iter()
                .any(|p| p.eq_ignore_ascii_case(q));
            if !pseudo && found.is_none() {
                found = Some(q.to_string());
            }
        }
    });
    found
}

/// Calls `f` on each column reference of `e` outside subqueries.
pub(super) fn visit_columns(e: &Expr, f: &mut dyn FnMut(&crate::ast::ObjectName)) {
    let all = |es: &mut dyn Iterator<Item = &Expr>, f: &mut dyn FnMut(&crate::ast::ObjectName)| {
        for e in es {
            visit_columns(e, f);
        }
    };
    match e {
        Expr::Column(c) => f(c),
        Expr::Function { args, .. } => all(&mut args.iter(), f),
        Expr::Cast { expr, .. }
        | Expr::Unary { expr, .. }
        | Expr::IsNull { expr, .. }
        | Expr::Collate { expr, .. } => visit_columns(expr, f),
        Expr::Convert { expr, style, .. } => {
            all(&mut std::iter::once(&**expr).chain(style.as_deref()), f)
        }
        Expr::Case {
            operand,
            branches,
            else_result,
        } => all(
            &mut operand
                .as_deref()
                .into_iter()
                .chain(branches.iter().flat_map(|(w, t)| [w, t]))
                .chain(else_result.as_deref()),
            f,
        ),
        Expr::Binary { left, right, .. } => all(&mut [&**left, &**right].into_iter(), f),
        Expr::Like {
            expr,
            pattern,
            escape,
            ..
        } => all(
            &mut [&**expr, &**pattern].into_iter().chain(escape.as_deref()),
            f,
        ),
        Expr::InList { expr, list, .. } => all(&mut std::iter::once(&**expr).chain(list), f),
        Expr::Between {
            expr, low, high, ..
        } => all(&mut [&**expr, &**low, &**high].into_iter(), f),
        _ => {}
    }
}

/// Errors of binding a name, which checking the list against a row of NULLs finds
/// before anything is written; any other error is the row's own, raised when it comes.
fn is_binding_error(e: &SqlError) -> bool {
    matches!(e.number, 107 | 207 | 209 | 4104)
}

fn one(e: SqlError) -> Vec<SqlError> {
    vec![e]
}

impl OutputPlan {
    /// The changed row's shape: the table's columns once per pseudo-table.
    fn source(t: &TableRef, changed: Changed) -> Source {
        let parts = changed.parts();
        let mut columns = Vec::new();
        let mut part_of = Vec::new();
        for (p, _) in parts.iter().enumerate() {
            columns.extend(t.columns());
            part_of.extend(std::iter::repeat_n(p as u32, t.entry.columns.len()));
        }
        Source {
            rowset: Rowset {
                columns,
                rows: Vec::new(),
            },
            table: t.entry.name.clone(),
            alias: None,
            parts: parts.iter().map(|p| p.to_string()).collect(),
            part_of,
        }
    }
}

impl Session {
    /// Step 1 of the module docs: `clause` checked for a statement changing `t`.
    pub(super) fn output_plan(
        &mut self,
        clause: Option<&OutputClause>,
        t: &TableRef,
        changed: Changed,
    ) -> Result<Option<OutputPlan>, Vec<SqlError>> {
        let Some(clause) = clause else {
            return Ok(None);
        };
        let source = OutputPlan::source(t, changed);
        self.output_plan_over(clause, source, false).map(Some)
    }

    /// MERGE's OUTPUT clause checked: its changed row is `[$action, deleted values,
    /// inserted values]` (merge.rs), and a bare `$action` item names the first.
    pub(super) fn merge_output_plan(
        &mut self,
        clause: Option<&OutputClause>,
        t: &TableRef,
    ) -> Result<Option<OutputPlan>, Vec<SqlError>> {
        let Some(clause) = clause else {
            return Ok(None);
        };
        let mut source = OutputPlan::source(t, Changed::Both);
        let action = ("$action".to_string(), crate::types::SqlType::NVarChar(10));
        source.rowset.columns.insert(0, action);
        source.parts.insert(0, ACTION_PART.into());
        source.part_of.iter_mut().for_each(|p| *p += 1);
        source.part_of.insert(0, 0);
        self.output_plan_over(clause, source, true).map(Some)
    }

    /// `output_plan` over a changed row of `source`'s shape.
    fn output_plan_over(
        &mut self,
        clause: &OutputClause,
        source: Source,
        merge: bool,
    ) -> Result<OutputPlan, Vec<SqlError>> {
        let mut lists = Vec::new();
        let mut next = Some(clause);
        while let Some(c) = next {
            check_items(&c.items, merge).map_err(one)?;
            let select = as_select(&c.items);
            let width = self
                .select_header(&select, Some(&source))
                .map_err(one)?
                .len();
            let nulls = vec![Value::Null; source.rowset.columns.len()];
            match self.project_row(&select, Some(&source), &nulls) {
                Err(e) if is_binding_error(&e) => return Err(vec![e]),
                _ => {}
            }
            let into = match &c.into {
                None => None,
                Some(i) => Some(self.output_table(&i.target, &i.columns, width)?),
            };
            lists.push((select, into));
            next = c.also.as_deref();
        }
        Ok(OutputPlan { source, lists })
    }

    /// The INTO table of an OUTPUT list `width` values wide, checked as INSERT checks its
    /// table and column list.
    fn output_table(
        &mut self,
        target: &OutputTarget,
        columns: &[String],
        width: usize,
    ) -> Result<IntoTable, Vec<SqlError>> {
        let variable;
        let name = match target {
            OutputTarget::Variable(v) => {
                variable = crate::ast::ObjectName::simple(v);
                &variable
            }
            OutputTarget::Table(name) => name,
        };
        let table = self.table_for(name, "INSERT")?;
        let targets = self.insert_targets(columns, false, &table)?;
        if columns.is_empty() && width != targets.len() {
            return Err(vec![msg(213, &[])]);
        }
        if width > targets.len() {
            return Err(vec![msg(121, &[])]);
        }
        if width < targets.len() {
            return Err(vec![msg(120, &[])]);
        }
        let identity = table
            .entry
            .columns
            .iter()
            .position(|c| c.identity.is_some());
        Ok(IntoTable {
            table,
            targets,
            identity,
        })
    }

    /// Runs a data modification with its OUTPUT clause (the module's steps 2 and 3):
    /// `write` writes the statement's rows, pushing each changed row into the spool it is
    /// given, and returns how many it changed; then the rows go where the clause says,
    /// and the count is reported. Without a clause, `write` gets no spool.
    pub(super) fn dml_with_output(
        &mut self,
        plan: Option<OutputPlan>,
        out: &mut Out,
        write: impl FnOnce(&mut Session, Option<&mut SortSpill>, &mut Out) -> Result<u64, Vec<SqlError>>,
    ) -> Result<(), Vec<SqlError>> {
        let Some(plan) = plan else {
            let n = write(self, None, out)?;
            self.rows_affected(n, out);
            return Ok(());
        };
        // Invariant 1: the statement and its INTO's insert are one.
        self.as_one_statement(|s| {
            let mut spool = SortSpill::fifo(&s.spill_dir(), SORT_MEMORY_BYTES);
            let written = write(s, Some(&mut spool), out);
            let rows = spool.finish_rewindable().map_err(one)?;
            // Invariant 2: the rows written before a failure reach the client, then the
            // failure; an INTO table gets them only when the statement succeeded.
            let sent = s.send_output(&plan, &rows, written.is_ok(), out);
            let n = written?;
            sent?;
            s.rows_affected(n, out);
            Ok(())
        })
    }

    /// Each OUTPUT list's rows: to the client, or (after a successful write) into its
    /// INTO table.
    pub(super) fn send_output(
        &mut self,
        plan: &OutputPlan,
        rows: &Spool,
        written: bool,
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        for (select, into) in &plan.lists {
            match into {
                None => self.output_to_client(&plan.source, select, rows, out)?,
                Some(i) if written => self.output_into(&plan.source, select, i, rows)?,
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// One OUTPUT list's result set, streamed from the spool (typed as `send_unsorted`
    /// types a streamed SELECT's: from the first `TYPING_ROWS` rows when needed).
    fn output_to_client(
        &mut self,
        source: &Source,
        select: &Select,
        rows: &Spool,
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        let mut typer = ColumnTyper::new(self.select_header(select, Some(source)).map_err(one)?);
        let mut held: Option<Vec<Vec<Value>>> = Some(Vec::new());
        if typer.all_declared() {
            out.columns(typer.types(false));
            held = None;
        }
        for r in rows.rows() {
            if out.gone() {
                break;
            }
            let v = self
                .project_row(select, Some(source), &r.map_err(one)?)
                .map_err(one)?;
            let Some(h) = &mut held else {
                out.row(v);
                continue;
            };
            typer.observe(&v);
            h.push(v);
            if h.len() >= TYPING_ROWS {
                out.columns(typer.types(true));
                held.take().into_iter().flatten().for_each(|v| out.row(v));
            }
        }
        if let Some(h) = held {
            out.columns(typer.types(false));
            h.into_iter().for_each(|v| out.row(v));
        }
        Ok(())
    }

    /// One OUTPUT list's rows inserted into its INTO table: each projected row converted
    /// to the table's columns into a spool, then written as INSERT writes (no count of
    /// its own: the statement reports its rows).
    fn output_into(
        &mut self,
        source: &Source,
        select: &Select,
        into: &IntoTable,
        rows: &Spool,
    ) -> Result<(), Vec<SqlError>> {
        let t = &into.table;
        let mut spool = SortSpill::fifo(&self.spill_dir(), SORT_MEMORY_BYTES);
        for r in rows.rows() {
            let v = self
                .project_row(select, Some(source), &r.map_err(one)?)
                .map_err(one)?;
            let src = v.into_iter().map(Some).collect();
            let row = self.new_row(t, &into.targets, src, into.identity)?;
            spool.push(row.spooled()).map_err(one)?;
        }
        let more = Some(spool.finish().map_err(one)?);
        self.insert_rows(t, (Vec::new(), more, None), WriteLock::Take(&[]))
    }
}
