//! MERGE: one statement that updates, deletes and inserts rows of a target table by how
//! they join a source, by SQL Server's rules.
//!
//! How it runs (`Session::merge`):
//! 1. The source is wrapped as a derived table under its own exposed name that adds a
//!    hidden column (`SOURCE_MARK`, 1 on every source row), so a joined row tells whether
//!    it has a source row even when all the source's own columns are NULL. The target is
//!    a FROM leaf marked as dml_from.rs marks an UPDATE's (`Leaves::make_target`): read
//!    under the statement's U locks, each row's RID after its columns.
//! 2. The join follows the clauses present, the target always the second leaf: MATCHED
//!    only, `source JOIN target`; NOT MATCHED BY TARGET, `source LEFT JOIN target` (the
//!    target sought per source row when ON compares its clustered key); BY SOURCE only,
//!    `source RIGHT JOIN target` (the target scanned, the source spooled and hashed on
//!    ON's equated columns); both, those two as two passes over the same leaves (one
//!    spool of the source), the second keeping only the rows no source row matched: a
//!    FULL JOIN would be a nested loop of every target row with every source row.
//!    Before any row is read, a NOT MATCHED clause naming the side it has no row of is
//!    refused (5333 the target's in WHEN NOT MATCHED, 5334 the source's in BY SOURCE).
//! 3. Each joined row goes to the first clause of its kind (matched: both sides; not
//!    matched by target: no RID; not matched by source: no mark) whose AND holds, and its
//!    action's values are computed over the joined row. Updates and deletes go to a
//!    spilling sort by (target row, arrival), inserts to a spool: nothing is written
//!    before the whole join is read (the statement never meets its own changes).
//!    TOP (n) [PERCENT] applies here, as SQL Server's documentation puts it, after the
//!    join and after the rows no clause takes are dropped: it limits the rows acted on by
//!    all the clauses together, in no defined order (`Limit`). TOP (n) stops the join at
//!    the n-th qualifying row; TOP (p) PERCENT spools the qualifying rows (pass, clause,
//!    joined row), counts them, and acts on the first ceil(p% of them). The count is
//!    evaluated once, before the join: 127 if negative, 1031 if a percentage is outside
//!    0 to 100. SET ROWCOUNT n, on a MERGE without TOP, is TOP (n) (as on UPDATE and
//!    DELETE, `Session::rowcount_stop`; a TOP of the statement's own wins over it).
//!    `OPTION (...)` takes exactly SELECT's hints (`select::refuse_unbuilt`):
//!    MAXDOP and RECOMPILE change nothing here, MAXRECURSION bounds the MERGE's CTEs.
//! 4. The sort is read back: a target row twice is Msg 8672, before anything is written;
//!    each other row's U lock goes to X (`RowLocking::changes`). Then, in one statement
//!    (`Session::as_one_statement`): the deletes, the updates, the inserts, each through
//!    the write phase of DELETE, UPDATE and INSERT (dml.rs), each changed row pushed into
//!    a spool of its own for OUTPUT, whose rows then go out as `[$action, deleted values,
//!    inserted values]`.
//!
//! Invariants:
//! 1. Each target row is updated or deleted at most once per statement (8672 otherwise,
//!    found by the sort, not by a set that grows with the target). Under TOP only the
//!    rows TOP keeps are checked: a row TOP leaves out changes nothing, so it cannot
//!    change a target row twice (the TOP sits between the join and the check, as the
//!    documentation's order of TOP after the join implies).
//! 2. A MERGE is one statement: an error anywhere (8672, 2627, 515, a lock's) leaves
//!    every table as it was before it, inside a transaction too.
//! 3. @@ROWCOUNT and the DONE's count are the rows inserted, updated and deleted; under
//!    TOP (or SET ROWCOUNT n) at most n (or ceil(p% of the qualifying rows)).
//!
//! Refused with 40517: a query hint SELECT refuses, a join as the source,
//! a target that is not a user table, and OUTPUT of the source's or target's own columns.

use super::dml::{record, terminated, UpdateChanges};
use super::dml_from::{match_order, target_row_order};
use super::dml_output::Changed;
use super::eval::as_i64;
use super::join::RID_COLUMN;
use super::locking::WriteLock;
use super::lower::not_yet;
use super::select::Source;
use super::spill::{SortSpill, SortedRows};
use super::stream::SORT_MEMORY_BYTES;
use super::tables::{rid_of, TableRef};
use super::{Out, Session};
use crate::ast::{
    AssignTarget, Expr, JoinKind, Merge, MergeAction, MergeClause, MergeWhen, Query, QueryBody,
    Select, SelectItem, TableSource, Top, Update,
};
use crate::convert::convert;
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value};

type Errors = Vec<SqlError>;

fn one(e: SqlError) -> Errors {
    vec![e]
}

/// The hidden column the wrapped source adds (step 1): no column name binds to it.
const SOURCE_MARK: &str = "%%merge_source%%";

/// A target action's code in the sorted spool.
const DELETE: i32 = 0;
const UPDATE: i32 = 1;

/// The source's exposed name; a join as the source is refused.
fn source_name(ts: &TableSource) -> Result<String, SqlError> {
    Ok(match ts {
        TableSource::Table { name, alias, .. } | TableSource::Function { name, alias, .. } => {
            alias.clone().unwrap_or_else(|| name.name().to_string())
        }
        TableSource::Derived { alias, .. } => alias.clone(),
        TableSource::Join { .. } => return Err(not_yet("a join as MERGE's source")),
        TableSource::Pivot { .. } | TableSource::Unpivot { .. } => {
            return Err(not_yet("PIVOT or UNPIVOT as MERGE's source"))
        }
    })
}

/// A query of one SELECT.
fn query_of(select: Select) -> Query {
    Query::of_body(QueryBody::Select(Box::new(select)))
}

/// Step 1: `(SELECT *, 1 AS [SOURCE_MARK] FROM source) AS name`.
fn marked_source(source: &TableSource, name: &str) -> TableSource {
    let mut select = Select::of_items(vec![
        SelectItem::Wildcard { qualifier: None },
        SelectItem::Expr {
            expr: Expr::Literal(crate::ast::Literal::Integer(1)),
            alias: Some(SOURCE_MARK.into()),
        },
    ]);
    select.from = vec![source.clone()];
    TableSource::Derived {
        query: Box::new(query_of(select)),
        alias: name.to_string(),
        columns: Vec::new(),
    }
}

/// Step 2: the join passes, each a FROM clause of `source <kind> JOIN target` (the
/// target is always leaf 1) and whether only its rows not matched by source count.
fn merge_passes(m: &Merge, source: TableSource) -> Vec<(TableSource, bool)> {
    let has = |w: MergeWhen| m.clauses.iter().any(|c| c.when == w);
    let target = TableSource::Table {
        name: m.target.clone(),
        alias: m.alias.clone(),
        hints: m.hints.clone(),
    };
    let join = |kind| TableSource::Join {
        left: Box::new(source.clone()),
        kind,
        right: Box::new(target.clone()),
        on: Some(m.on.clone()),
    };
    match (
        has(MergeWhen::NotMatchedByTarget),
        has(MergeWhen::NotMatchedBySource),
    ) {
        (true, true) => vec![(join(JoinKind::Left), false), (join(JoinKind::Right), true)],
        (true, false) => vec![(join(JoinKind::Left), false)],
        (false, true) => vec![(join(JoinKind::Right), false)],
        (false, false) => vec![(join(JoinKind::Inner), false)],
    }
}

/// A MATCHED or NOT MATCHED BY SOURCE clause's UPDATE as an UPDATE statement, so its SET
/// is checked and computed as UPDATE's is.
fn as_update(m: &Merge, assignments: &[crate::ast::Assignment]) -> Update {
    Update {
        top: None,
        table: m.target.clone(),
        hints: m.hints.clone(),
        assignments: assignments.to_vec(),
        output: None,
        from: Vec::new(),
        where_clause: None,
        options: Vec::new(),
    }
}

/// A clause checked against the target: its SET's columns or its INSERT's.
enum Plan {
    Update(Box<Update>, Vec<Option<usize>>),
    Delete,
    Insert(Vec<usize>, Option<Vec<Expr>>),
}

/// The rows the join pass found (step 3): target actions sorted, inserts spooled.
struct Found {
    sorted: SortedRows,
    inserts: SortedRows,
    insert_count: u64,
    /// Every column an UPDATE clause sets (its new keys are checked when a key's).
    set_columns: Vec<Option<usize>>,
}

/// The join pass's outputs as they grow (step 3).
struct Finding {
    sort: SortSpill,
    inserts: SortSpill,
    insert_count: u64,
    /// The next target action's arrival number.
    seq: i64,
}

/// What the write phases pushed for OUTPUT, one spool per action.
struct OutputSpools {
    deleted: SortSpill,
    updated: SortSpill,
    inserted: SortSpill,
}

impl Session {
    /// MERGE: the module's steps.
    pub(super) fn merge(&mut self, m: &Merge, out: &mut Out) -> Result<(), Errors> {
        // OPTION (...) is a query's: the hints SELECT takes, with their effect (MAXRECURSION
        // bounds the MERGE's own CTEs through `with_ctes`), every other one refused.
        let scope = Query {
            ctes: m.ctes.clone(),
            hints: m.options.clone(),
            ..query_of(Select::of_items(Vec::new()))
        };
        super::select::refuse_unbuilt(&scope)?;
        let limit = match self.rowcount_stop(&m.top) {
            Some(n) => Limit::Rows(n),
            None => self.merge_limit(m.top.as_ref())?,
        };
        // The cap is the Limit's alone: the source and the join are read whole.
        self.without_rowcount(|s| s.with_ctes(&scope, |s| s.merge_in_scope(m, limit, out)))
    }

    /// MERGE's TOP, evaluated once before the join is read: 127 for a negative count,
    /// 1031 for a percentage outside 0 to 100.
    fn merge_limit(&mut self, top: Option<&Top>) -> Result<Limit, Errors> {
        let Some(top) = top else {
            return Ok(Limit::All);
        };
        let v = self.eval(&top.count, None).map_err(one)?;
        if top.percent {
            let p = match convert(&v, SqlType::Float, None).map_err(one)? {
                Value::Float(p) => p,
                _ => 0.0,
            };
            if !(0.0..=100.0).contains(&p) {
                return Err(one(msg(1031, &[])));
            }
            return Ok(Limit::Percent(p));
        }
        let n = as_i64(&v).map_err(one)?;
        if n < 0 {
            return Err(one(msg(127, &[])));
        }
        Ok(Limit::Rows(n as u64))
    }

    /// MERGE with its CTEs in scope.
    fn merge_in_scope(&mut self, m: &Merge, limit: Limit, out: &mut Out) -> Result<(), Errors> {
        if self.is_cte(&m.target) || self.view_rowset(&m.target)?.is_some() {
            return Err(vec![not_yet(
                "MERGE into a view or common table expression",
            )]);
        }
        let t = self.merge_target(m)?;
        let exposed = m
            .alias
            .clone()
            .unwrap_or_else(|| m.target.name().to_string());
        let plans = self.merge_plans(m, &t, &exposed)?;
        let name = source_name(&m.source).map_err(one)?;
        self.refuse_merge_columns_in_output(m, &[&name, &exposed])?;
        let plan = self.merge_output_plan(m.output.as_ref(), &t)?;
        let passes = merge_passes(m, marked_source(&m.source, &name));
        self.as_one_statement(|s| {
            let found = s.merge_rows(m, &t, (&passes, limit), &plans, out)?;
            let mut spools = plan.as_ref().map(|_| OutputSpools {
                deleted: SortSpill::fifo(&s.spill_dir(), SORT_MEMORY_BYTES),
                updated: SortSpill::fifo(&s.spill_dir(), SORT_MEMORY_BYTES),
                inserted: SortSpill::fifo(&s.spill_dir(), SORT_MEMORY_BYTES),
            });
            let written = s.merge_write(m, &t, found, spools.as_mut());
            let Some(plan) = plan else {
                let n = written?;
                s.rows_affected(n, out);
                return Ok(());
            };
            let width = t.entry.columns.len();
            let rows = output_rows(spools.expect("a plan has spools"), width, &s.spill_dir())?;
            let sent = s.send_output(&plan, &rows, written.is_ok(), out);
            let n = written?;
            sent?;
            s.rows_affected(n, out);
            Ok(())
        })
    }

    /// The target table, with the permission of each action the clauses take, under the
    /// lock the statement keeps on it, and resolved again when its constraints changed
    /// before the lock was granted (check_constraints.rs invariant 5, as `write_target`).
    fn merge_target(&mut self, m: &Merge) -> Result<TableRef, Errors> {
        loop {
            let t = self.merge_target_once(m)?;
            self.row_locking(&t, true, &m.hints)?;
            if self.checks_unchanged(&t) {
                return Ok(t);
            }
        }
    }

    /// `merge_target`'s resolution, before any lock.
    fn merge_target_once(&mut self, m: &Merge) -> Result<TableRef, Errors> {
        let mut t = None;
        for c in &m.clauses {
            let perm = match c.action {
                MergeAction::Update(_) => "UPDATE",
                MergeAction::Delete => "DELETE",
                MergeAction::Insert { .. } => "INSERT",
            };
            t = Some(self.table_for(&m.target, perm)?);
        }
        Ok(t.expect("a MERGE has a clause (the parser's rule)"))
    }

    /// Each clause checked against the target (as UPDATE checks SET and INSERT its
    /// column list and values), in written order.
    fn merge_plans(&mut self, m: &Merge, t: &TableRef, exposed: &str) -> Result<Vec<Plan>, Errors> {
        let mut plans = Vec::with_capacity(m.clauses.len());
        for c in &m.clauses {
            plans.push(match &c.action {
                MergeAction::Delete => Plan::Delete,
                MergeAction::Update(assignments) => {
                    for a in assignments {
                        if let AssignTarget::Column(col) = &a.target {
                            if col
                                .qualifier()
                                .is_some_and(|q| !q.eq_ignore_ascii_case(exposed))
                            {
                                return Err(vec![msg(4104, &[&col.joined()])]);
                            }
                        }
                    }
                    let u = as_update(m, assignments);
                    let targets = super::dml::update_targets(&u, t)?;
                    Plan::Update(Box::new(u), targets)
                }
                MergeAction::Insert { columns, values } => {
                    let targets = self.insert_targets(columns, values.is_none(), t)?;
                    if let Some(v) = values {
                        if v.len() != targets.len() {
                            let n = match (columns.is_empty(), targets.len() > v.len()) {
                                (true, _) => 213,
                                (false, true) => 109,
                                (false, false) => 110,
                            };
                            return Err(vec![msg(n, &[])]);
                        }
                    }
                    Plan::Insert(targets, values.clone())
                }
            });
        }
        Ok(plans)
    }

    /// Steps 2 and 3: the join read whole (or, under TOP (n), until n rows qualified),
    /// each qualifying row sent to its clause; under TOP PERCENT the qualifying rows are
    /// spooled first and the leading share of them acted on (`Limit`).
    fn merge_rows(
        &mut self,
        m: &Merge,
        t: &TableRef,
        (passes, limit): (&[(TableSource, bool)], Limit),
        plans: &[Plan],
        out: &mut Out,
    ) -> Result<Found, Errors> {
        let mut leaves = self.resolve_leaves(std::slice::from_ref(&passes[0].0))?;
        let locking = self.row_locking(t, true, &m.hints)?;
        let width = leaves.make_target(1, locking)?;
        let dir = self.spill_dir();
        let key = super::dml::key_columns(t)
            .filter(|_| t.entry.index_id == 1)
            .map(|(_, pos)| pos);
        let mut found = Finding {
            sort: SortSpill::new(&dir, SORT_MEMORY_BYTES, match_order(key)),
            inserts: SortSpill::fifo(&dir, SORT_MEMORY_BYTES),
            insert_count: 0,
            seq: 0,
        };
        // Under TOP PERCENT: `[pass, clause, joined row...]` of every qualifying row.
        let mut pending =
            matches!(limit, Limit::Percent(_)).then(|| SortSpill::fifo(&dir, SORT_MEMORY_BYTES));
        let (mut sources, mut qualified) = (Vec::with_capacity(passes.len()), 0u64);
        for (pass, (from, only_by_source)) in passes.iter().enumerate() {
            let (shape, mut rows) = leaves.relation(self, std::slice::from_ref(from), None)?;
            let src: Source = shape.source();
            let (rid_at, mark_at) = marks(&src);
            let parts = (src.part_of[rid_at], src.part_of[mark_at]);
            check_clause_scope(&m.clauses, &src, parts).map_err(one)?;
            while !limit.reached(qualified) {
                let Some(r) = rows.next_row(self)? else { break };
                let when = match (r[rid_at].is_null(), r[mark_at].is_null()) {
                    (true, _) => MergeWhen::NotMatchedByTarget,
                    (false, true) => MergeWhen::NotMatchedBySource,
                    (false, false) => MergeWhen::Matched,
                };
                if *only_by_source && when != MergeWhen::NotMatchedBySource {
                    continue;
                }
                let ctx = Session::ctx(&src, &r);
                let Some(i) = self.first_clause(&m.clauses, when, &ctx)? else {
                    continue;
                };
                qualified += 1;
                match pending.as_mut() {
                    Some(p) => {
                        let mut row = vec![Value::Int(pass as i32), Value::Int(i as i32)];
                        row.extend(r);
                        p.push(row).map_err(one)?;
                    }
                    None => self.merge_joined(t, &plans[i], (&src, &r, width), &mut found)?,
                }
            }
            sources.push(src);
        }
        if let Some(p) = pending {
            let kept = limit.share_of(qualified);
            for row in p.finish().map_err(one)?.take(kept as usize) {
                let row = row.map_err(one)?;
                let (Value::Int(pass), Value::Int(i)) = (&row[0], &row[1]) else {
                    unreachable!("pending rows start with their pass and clause")
                };
                let src = (&sources[*pass as usize], &row[2..], width);
                self.merge_joined(t, &plans[*i as usize], src, &mut found)?;
            }
        }
        leaves.report_io(self, out);
        Ok(Found {
            sorted: found.sort.finish().map_err(one)?,
            inserts: found.inserts.finish().map_err(one)?,
            insert_count: found.insert_count,
            set_columns: plans
                .iter()
                .flat_map(|p| match p {
                    Plan::Update(_, targets) => targets.clone(),
                    _ => Vec::new(),
                })
                .collect(),
        })
    }

    /// One qualifying joined row `r` of `src` (the target's `width` columns before its
    /// RID) acted on by `plan` (`merge_row`).
    fn merge_joined(
        &mut self,
        t: &TableRef,
        plan: &Plan,
        (src, r, width): (&Source, &[Value], usize),
        found: &mut Finding,
    ) -> Result<(), Errors> {
        let (rid_at, _) = marks(src);
        let ctx = Session::ctx(src, r);
        let old = (&r[rid_at], &r[rid_at - width..rid_at]);
        self.merge_row(t, plan, old, &ctx, found)
    }

    /// One joined row's action under `plan` (step 3): an insert's new row spooled, or
    /// `[rid, arrival, old values..., action, new values...]` into the sort (a delete's
    /// new values NULL). `old` is the target's RID and values in the joined row.
    fn merge_row(
        &mut self,
        t: &TableRef,
        plan: &Plan,
        (rid, old): (&Value, &[Value]),
        ctx: &super::eval::RowCtx<'_>,
        found: &mut Finding,
    ) -> Result<(), Errors> {
        let width = t.entry.columns.len();
        let mut a = vec![rid.clone(), Value::BigInt(found.seq)];
        a.extend(old.iter().cloned());
        match plan {
            Plan::Insert(targets, values) => {
                let row = self.merge_insert_row(t, targets, values.as_deref(), ctx)?;
                found.inserts.push(row).map_err(one)?;
                found.insert_count += 1;
                return Ok(());
            }
            Plan::Update(u, targets) => {
                a.push(Value::Int(UPDATE));
                a.extend(self.updated_row_in(u, t, targets, old, ctx)?);
            }
            Plan::Delete => {
                a.push(Value::Int(DELETE));
                a.extend(std::iter::repeat_n(Value::Null, width));
            }
        }
        found.sort.push(a).map_err(one)?;
        found.seq += 1;
        Ok(())
    }

    /// The first clause of kind `when` whose AND holds for the joined row, by index.
    fn first_clause(
        &mut self,
        clauses: &[MergeClause],
        when: MergeWhen,
        ctx: &super::eval::RowCtx<'_>,
    ) -> Result<Option<usize>, Errors> {
        for (i, c) in clauses.iter().enumerate().filter(|(_, c)| c.when == when) {
            let holds = match &c.condition {
                None => true,
                Some(e) => self.condition_row(e, Some(ctx)).map_err(terminated)? == Some(true),
            };
            if holds {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// An INSERT clause's row over the joined row, as INSERT makes it (spooled form).
    fn merge_insert_row(
        &mut self,
        t: &TableRef,
        targets: &[usize],
        values: Option<&[Expr]>,
        ctx: &super::eval::RowCtx<'_>,
    ) -> Result<Vec<Value>, Errors> {
        let identity = t.entry.columns.iter().position(|c| c.identity.is_some());
        let mut src = Vec::with_capacity(targets.len());
        for e in values.unwrap_or_default() {
            src.push(match e {
                Expr::Default => None,
                e => Some(self.eval(e, Some(ctx)).map_err(terminated)?),
            });
        }
        Ok(self.new_row(t, targets, src, identity)?.spooled())
    }

    /// Step 4: 8672 checked, locks to X, then the deletes, updates and inserts written;
    /// returns how many rows changed.
    fn merge_write(
        &mut self,
        m: &Merge,
        t: &TableRef,
        found: Found,
        mut spools: Option<&mut OutputSpools>,
    ) -> Result<u64, Errors> {
        let width = t.entry.columns.len();
        let dir = self.spill_dir();
        let key = super::dml::key_columns(t)
            .filter(|_| t.entry.index_id == 1)
            .map(|(_, pos)| pos);
        let locking = self.row_locking(t, true, &m.hints)?;
        let mut deletes = SortSpill::fifo(&dir, SORT_MEMORY_BYTES);
        let mut updates = UpdateChanges::new(t, &found.set_columns, &dir);
        let (mut last, mut delete_count): (Option<Vec<Value>>, u64) = (None, 0);
        for a in found.sorted {
            let mut a = a.map_err(one)?;
            if let Some(l) = &last {
                match target_row_order(&key, l, &a) {
                    // Invariant 1.
                    std::cmp::Ordering::Equal => return Err(terminated(msg(8672, &[]))),
                    o => assert_eq!(o, std::cmp::Ordering::Less, "sorted by target row"),
                }
            }
            last = Some(a[..2 + width].to_vec());
            a.remove(1);
            let rec = record(t, &a[1..1 + width])?;
            locking.changes(rid_of(&a[0]), &rec, false)?;
            let new = a.split_off(1 + width);
            match new[0] {
                Value::Int(DELETE) => {
                    deletes.push(a).map_err(one)?;
                    delete_count += 1;
                }
                _ => updates.add(a, new[1..].to_vec())?,
            }
        }
        let deletes = deletes.finish().map_err(one)?;
        let out_del = spools.as_mut().map(|s| &mut s.deleted);
        self.write_deletes(t, deletes, delete_count, out_del)?;
        self.note_update(t, Some(updates.set_columns()));
        let moves_keys = updates.moves_unique_keys();
        let (changes, update_count) = updates.finish(t)?;
        let out_upd = spools.as_mut().map(|s| &mut s.updated);
        self.write_updates(t, (changes, moves_keys), &locking, out_upd)?;
        let out_ins = spools.as_mut().map(|s| &mut s.inserted);
        let lock = WriteLock::Take(&m.hints);
        self.insert_rows(t, (Vec::new(), Some(found.inserts), out_ins), lock)?;
        Ok(delete_count + update_count + found.insert_count)
    }

    /// OUTPUT with MERGE may name `inserted`, `deleted` and `$action`: the source's or
    /// the target's own columns (`names`) are refused (40517) rather than called unknown.
    fn refuse_merge_columns_in_output(&self, m: &Merge, names: &[&str]) -> Result<(), Errors> {
        if super::dml_output::output_names_any(m.output.as_ref(), names) {
            return Err(vec![not_yet(
                "OUTPUT of a MERGE source's or target's own columns",
            )]);
        }
        Ok(())
    }
}

/// The side a NOT MATCHED clause may not name (its rows have none): 5333 for the target
/// in a WHEN NOT MATCHED [BY TARGET] clause, 5334 for the source in a BY SOURCE one. A
/// column belongs to a side by its qualifier, or unqualified by the side whose column
/// it names (`parts`: the target's and the source's part in `src`). Subqueries are not
/// looked into. The state is 2 for a qualified name, 1 for a bare one.
fn check_clause_scope(
    clauses: &[MergeClause],
    src: &Source,
    (target, source): (u32, u32),
) -> Result<(), SqlError> {
    for c in clauses {
        let (banned, number) = match c.when {
            MergeWhen::Matched => continue,
            MergeWhen::NotMatchedByTarget => (target, 5333),
            MergeWhen::NotMatchedBySource => (source, 5334),
        };
        let mut exprs: Vec<&Expr> = c.condition.iter().collect();
        match &c.action {
            MergeAction::Insert {
                values: Some(v), ..
            } => exprs.extend(v),
            MergeAction::Update(a) => exprs.extend(a.iter().map(|a| &a.value)),
            _ => {}
        }
        let mut bad = None;
        for e in exprs {
            super::dml_output::visit_columns(e, &mut |col| {
                if bad.is_none() && names_part(src, col, banned) {
                    bad = Some((col.joined(), col.parts.len()));
                }
            });
        }
        // State 2 for a qualified name, 1 for a bare one, as SQL Server raises them.
        if let Some((name, parts)) = bad {
            return Err(msg(number, &[&name]).with_state(if parts > 1 { 2 } else { 1 }));
        }
    }
    Ok(())
}

/// True when column reference `col` binds to part `part` of `src`: by its qualifier, or
/// unqualified when only that part has a column of its name.
fn names_part(src: &Source, col: &crate::ast::ObjectName, part: u32) -> bool {
    let of_part = |p: u32| {
        src.rowset
            .columns
            .iter()
            .zip(&src.part_of)
            .any(|(c, &q)| q == p && c.0.eq_ignore_ascii_case(col.name()))
    };
    match col.qualifier() {
        Some(q) => src.parts[part as usize].eq_ignore_ascii_case(q),
        None => of_part(part) && (0..src.parts.len() as u32).all(|p| p == part || !of_part(p)),
    }
}

/// Where a joined row of `src` holds the target's RID and the source's mark.
fn marks(src: &Source) -> (usize, usize) {
    let at = |name: &str| src.rowset.columns.iter().position(|c| c.0 == name);
    let rid_at = at(RID_COLUMN).expect("the target's leaf gives RIDs");
    (rid_at, at(SOURCE_MARK).expect("the marked source"))
}

/// MERGE's TOP (step 3): how many of the qualifying joined rows (those a clause takes)
/// are acted on; the rest are neither written nor counted by 8672's check.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Limit {
    /// No TOP: every qualifying row.
    All,
    /// TOP (n): the first n qualifying rows the join gives.
    Rows(u64),
    /// TOP (p) PERCENT: the first ceil(p% of all qualifying rows), 0 <= p <= 100.
    Percent(f64),
}

impl Limit {
    /// True when the join pass may stop reading: TOP (n)'s n rows have qualified.
    fn reached(self, qualified: u64) -> bool {
        matches!(self, Limit::Rows(n) if qualified >= n)
    }

    /// How many of `qualified` rows TOP PERCENT keeps (a fraction of a row rounds up).
    fn share_of(self, qualified: u64) -> u64 {
        let Limit::Percent(p) = self else {
            return qualified;
        };
        assert!((0.0..=100.0).contains(&p), "checked by merge_limit");
        let kept = (qualified as f64 * p / 100.0).ceil() as u64;
        assert!(kept <= qualified);
        kept
    }
}

/// The OUTPUT rows of a MERGE: each action's changed rows as `[$action, deleted values,
/// inserted values]`, the half an action lacks NULL.
fn output_rows(
    spools: OutputSpools,
    width: usize,
    dir: &std::path::Path,
) -> Result<super::spill::Spool, Errors> {
    let nulls = vec![Value::Null; width];
    let mut all = SortSpill::fifo(dir, SORT_MEMORY_BYTES);
    let parts = [
        ("DELETE", spools.deleted, Changed::Deleted),
        ("UPDATE", spools.updated, Changed::Both),
        ("INSERT", spools.inserted, Changed::Inserted),
    ];
    for (action, spool, changed) in parts {
        for r in spool.finish().map_err(one)? {
            let r = r.map_err(one)?;
            let mut row = vec![Value::Text(action.into())];
            match changed {
                Changed::Deleted => row.extend(r.into_iter().chain(nulls.iter().cloned())),
                Changed::Inserted => row.extend(nulls.iter().cloned().chain(r)),
                Changed::Both => row.extend(r),
            }
            all.push(row).map_err(one)?;
        }
    }
    all.finish_rewindable().map_err(one)
}
