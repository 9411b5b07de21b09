//! UPDATE ... FROM and DELETE ... FROM: a data modification whose rows come from a FROM
//! clause with joins, by SQL Server's rules.
//!
//! The target is one of FROM's tables: the one whose exposed name (alias, else table name)
//! the statement names; else, when the statement names a table FROM has once under an
//! alias, that reference (twice or more: 8154, "The table ... is ambiguous."); when FROM
//! does not have it at all, the table itself is joined to FROM (an inner join on WHERE
//! when FROM is one table source, else a cross join that WHERE filters), as SQL Server
//! does.
//!
//! How it runs (`Session::target_rows`):
//! 1. The FROM clause is resolved as a SELECT's (join.rs), the target's leaf marked
//!    (`Leaves::make_target`): it reads its rows with the statement's row locking (U, as
//!    a plain UPDATE's scan) and gives each row's RID as a hidden last column
//!    (`RID_COLUMN`, SQL Server's %%physloc%%).
//! 2. The joined rows WHERE keeps go to a spilling sort by (target row, arrival), a
//!    target row told by its clustered key, else (a heap) by its RID, with the
//!    target's old values and, for UPDATE, the new values SET computes over the joined
//!    row. The whole join is read before anything is written, so the statement never
//!    meets its own changes (Halloween protection: a row an UPDATE moves to a new key is
//!    not found again).
//! 3. Read back in that order, each target row is taken once: when several joined rows
//!    match it, the first the join gave wins (SQL Server takes one of them, unspecified);
//!    its U lock goes to X (`RowLocking::changes`) with no database held, and it goes on
//!    to the write phase a plain UPDATE or DELETE uses (dml.rs).
//!
//! Invariants:
//! 1. Each target row is changed at most once per statement.
//! 2. The values written were computed from the row as it is when written: the target's
//!    rows are read under U locks, which exclude other writers until the statement's
//!    transaction ends, so concurrent UPDATE ... FROMs lose no update.
//!
//! Deliberately not here: TOP (n) PERCENT with FROM (40517), and OUTPUT of a FROM table's
//! columns other than the target's (40517). Unlike a plain UPDATE, the U locks of target
//! rows WHERE or ON rejected are kept to the statement's end (its transaction's, inside
//! one): more blocking than SQL Server, never less isolation.

use std::cmp::Ordering;

use super::dml_output::Changed;
use super::join::RID_COLUMN;
use super::lower::not_yet;
use super::select::Source;
use super::spill::{SortSpill, SortedRows};
use super::stream::SORT_MEMORY_BYTES;
use super::tables::TableRef;
use super::{Out, Session};
use crate::ast::{AssignTarget, Delete, Expr, JoinKind, ObjectName, TableSource, Update};
use crate::messages::{msg, SqlError};
use crate::types::Value;

type Errors = Vec<SqlError>;

fn one(e: SqlError) -> Errors {
    vec![e]
}

/// Where a statement's target is: FROM's leaf at this index (written order, as
/// `Session::resolve_leaves` numbers them), or not in FROM (joined to it).
#[derive(Debug, PartialEq, Eq)]
enum TargetIn {
    Leaf(usize),
    Joined,
}

/// Each leaf of `ts` in written order: a table's name and alias, None for other leaves.
fn leaf_names<'a>(ts: &'a TableSource, out: &mut Vec<Option<(&'a ObjectName, Option<&'a str>)>>) {
    match ts {
        TableSource::Join { left, right, .. } => {
            leaf_names(left, out);
            leaf_names(right, out);
        }
        TableSource::Table { name, alias, .. } => out.push(Some((name, alias.as_deref()))),
        _ => out.push(None),
    }
}

/// The table hints of FROM's leaf `i` (written order), none for other leaves.
fn leaf_hints(from: &[TableSource], i: usize) -> Vec<String> {
    fn walk<'a>(ts: &'a TableSource, out: &mut Vec<&'a TableSource>) {
        match ts {
            TableSource::Join { left, right, .. } => {
                walk(left, out);
                walk(right, out);
            }
            leaf => out.push(leaf),
        }
    }
    let mut leaves = Vec::new();
    from.iter().for_each(|ts| walk(ts, &mut leaves));
    match leaves.get(i) {
        Some(TableSource::Table { hints, .. }) => hints.clone(),
        _ => Vec::new(),
    }
}

/// True when `a` and `b` name one table: one name, and one schema when both give one.
fn same_table(a: &ObjectName, b: &ObjectName) -> bool {
    let schema = |n: &ObjectName| (n.parts.len() >= 2).then(|| n.parts[n.parts.len() - 2].clone());
    a.name().eq_ignore_ascii_case(b.name())
        && match (schema(a), schema(b)) {
            (Some(x), Some(y)) => x.eq_ignore_ascii_case(&y),
            _ => true,
        }
}

/// The module docs' rule for where `target` is among `from`'s leaves (8154 when it names
/// a table FROM has only under two or more aliases).
fn target_in(target: &ObjectName, from: &[TableSource]) -> Result<TargetIn, SqlError> {
    let mut leaves = Vec::new();
    from.iter().for_each(|ts| leaf_names(ts, &mut leaves));
    let named = |i: usize, aliased: bool| -> Option<usize> {
        let (name, alias) = leaves[i]?;
        let hit = match (alias, aliased) {
            (Some(a), false) => target.parts.len() == 1 && a.eq_ignore_ascii_case(target.name()),
            (None, false) => same_table(name, target),
            (Some(_), true) => same_table(name, target),
            (None, true) => false,
        };
        hit.then_some(i)
    };
    let exposed: Vec<usize> = (0..leaves.len()).filter_map(|i| named(i, false)).collect();
    if let [i] = exposed[..] {
        return Ok(TargetIn::Leaf(i));
    }
    let aliased: Vec<usize> = (0..leaves.len()).filter_map(|i| named(i, true)).collect();
    match (exposed.len(), &aliased[..]) {
        (0, []) => Ok(TargetIn::Joined),
        (0, [i]) => Ok(TargetIn::Leaf(*i)),
        _ => Err(msg(8154, &[&target.joined()])),
    }
}

/// FROM with the target joined to it when FROM does not have it: an inner join on WHERE
/// for one table source (so the join can seek or hash on it), else a cross join.
fn joined_from(
    target: &ObjectName,
    hints: &[String],
    from: &[TableSource],
    filter: Option<&Expr>,
) -> Vec<TableSource> {
    let table = TableSource::Table {
        name: target.clone(),
        alias: None,
        hints: hints.to_vec(),
    };
    match (from, filter) {
        ([only], Some(w)) => vec![TableSource::Join {
            left: Box::new(table),
            kind: JoinKind::Inner,
            right: Box::new(only.clone()),
            on: Some(w.clone()),
        }],
        _ => std::iter::once(table).chain(from.iter().cloned()).collect(),
    }
}

/// A spooled match's `[rid, arrival, old values...]` number at `i`.
fn number(m: &[Value], i: usize) -> i64 {
    match m[i] {
        Value::BigInt(n) => n,
        _ => unreachable!("a match starts with its RID and its arrival"),
    }
}

/// Which target row a match is, as an order (step 3): a clustered table's rows by their
/// key (unique: the primary key), which stays when a concurrent page split moves a row
/// between two reads of the join's inner input; a heap's by RID (a heap row moves only
/// when updated, and the statement holds its U lock).
pub(super) fn target_row_order(key: &Option<Vec<usize>>, a: &[Value], b: &[Value]) -> Ordering {
    let Some(pos) = key else {
        return number(a, 0).cmp(&number(b, 0));
    };
    pos.iter()
        .map(|&p| match crate::ops::compare(&a[2 + p], &b[2 + p]) {
            Ok(Some(o)) => o,
            _ => Ordering::Equal,
        })
        .find(|o| o.is_ne())
        .unwrap_or(Ordering::Equal)
}

/// Step 2's sort: by target row, then by arrival.
pub(super) fn match_order(key: Option<Vec<usize>>) -> Box<super::spill::RowCompare> {
    Box::new(move |a, b| target_row_order(&key, a, b).then_with(|| number(a, 1).cmp(&number(b, 1))))
}

/// The rows of a statement's FROM to change, each target row once (step 3): each as
/// `[rid, old values..., new values...]` (UPDATE) or `[rid, old values...]` (DELETE).
struct FromMatches {
    rows: SortedRows,
    count: u64,
}

/// A statement's target and FROM, resolved: the table, its leaf, and the FROM to run.
struct FromTarget {
    table: TableRef,
    /// The name that qualifies the target's columns (its alias, else its table name).
    exposed: String,
    /// How the target is locked: the statement's table hints, then those its reference
    /// in FROM has (none is dropped: each is built or refused by `hint_locking`).
    hints: Vec<String>,
    leaf: usize,
    from: Vec<TableSource>,
}

impl Session {
    /// UPDATE ... SET ... FROM ... WHERE: the module's steps, then UPDATE's write phase.
    pub(super) fn update_from(&mut self, u: &Update, out: &mut Out) -> Result<(), Errors> {
        let filter = u.where_clause.as_ref();
        let ft = self.update_target(&u.table, &u.hints, (&u.from, filter))?;
        let t = &ft.table;
        // SET's columns are the target's: a qualifier naming another source is 4104.
        for a in &u.assignments {
            if let AssignTarget::Column(c) = &a.target {
                if c.qualifier()
                    .is_some_and(|q| !q.eq_ignore_ascii_case(&ft.exposed))
                {
                    return Err(vec![msg(4104, &[&c.joined()])]);
                }
            }
        }
        let targets = super::dml::update_targets(u, t)?;
        self.refuse_from_columns_in_output(u.output.as_ref(), &u.from)?;
        let plan = self.output_plan(u.output.as_ref(), t, Changed::Both)?;
        let limit = self.limit_with_from(&u.top)?;
        self.dml_with_output(plan, out, |s, output, out| {
            let set = Some((u, &targets[..]));
            let m = s.target_rows(&ft, filter, set, limit, out)?;
            let width = t.entry.columns.len();
            let mut changes = super::dml::UpdateChanges::new(t, &targets, &s.spill_dir());
            for r in m.rows {
                let mut r = r.map_err(one)?;
                let new = r.split_off(1 + width);
                changes.add(r, new)?;
            }
            s.note_update(t, Some(changes.set_columns()));
            let moves_keys = changes.moves_unique_keys();
            let (changes, count) = changes.finish(t)?;
            assert_eq!(count, m.count, "every deduplicated row is changed");
            let locking = s.row_locking(t, true, &ft.hints)?;
            s.write_updates(t, (changes, moves_keys), &locking, output)?;
            Ok(count)
        })
    }

    /// DELETE [FROM] t FROM ... WHERE: the module's steps, then DELETE's write phase.
    pub(super) fn delete_from(&mut self, d: &Delete, out: &mut Out) -> Result<(), Errors> {
        let filter = d.where_clause.as_ref();
        let ft = self.dml_target(&d.table, &d.hints, (&d.from, filter), "DELETE")?;
        self.refuse_from_columns_in_output(d.output.as_ref(), &d.from)?;
        let plan = self.output_plan(d.output.as_ref(), &ft.table, Changed::Deleted)?;
        let limit = self.limit_with_from(&d.top)?;
        self.dml_with_output(plan, out, |s, output, out| {
            let m = s.target_rows(&ft, filter, None, limit, out)?;
            s.write_deletes(&ft.table, m.rows, m.count, output)?;
            Ok(m.count)
        })
    }

    /// The target of an UPDATE or DELETE with FROM (`perm`: UPDATE or DELETE), by the
    /// module docs' rule.
    /// UPDATE ... FROM's target as `dml_target` resolves it, under the lock the statement
    /// keeps on it, and resolved again when its constraints changed before the lock was
    /// granted (check_constraints.rs invariant 5, as `write_target`): the rows it computes
    /// meet the constraints no ALTER can change until the statement ends.
    fn update_target(
        &mut self,
        target: &ObjectName,
        hints: &[String],
        (from, filter): (&[TableSource], Option<&Expr>),
    ) -> Result<FromTarget, Errors> {
        loop {
            let ft = self.dml_target(target, hints, (from, filter), "UPDATE")?;
            self.row_locking(&ft.table, true, &ft.hints)?;
            if self.checks_unchanged(&ft.table) {
                return Ok(ft);
            }
        }
    }

    fn dml_target(
        &mut self,
        target: &ObjectName,
        hints: &[String],
        (from, filter): (&[TableSource], Option<&Expr>),
        perm: &str,
    ) -> Result<FromTarget, Errors> {
        let (leaf, from, hints) = match target_in(target, from).map_err(one)? {
            TargetIn::Leaf(i) => {
                let mut all = hints.to_vec();
                all.extend(leaf_hints(from, i));
                (i, from.to_vec(), all)
            }
            TargetIn::Joined => (0, joined_from(target, hints, from, filter), hints.to_vec()),
        };
        let mut names = Vec::new();
        from.iter().for_each(|ts| leaf_names(ts, &mut names));
        let (name, alias) = names[leaf].expect("a table leaf");
        let exposed = alias.unwrap_or(name.name()).to_string();
        let table = self.table_for(name, perm)?;
        Ok(FromTarget {
            table,
            exposed,
            hints,
            leaf,
            from,
        })
    }

    /// Steps 1 to 3: the target rows FROM and WHERE give, each once, locked X, with
    /// (for UPDATE, `set`) their new values; `limit` caps how many (TOP, SET ROWCOUNT).
    fn target_rows(
        &mut self,
        ft: &FromTarget,
        filter: Option<&Expr>,
        set: Option<(&Update, &[Option<usize>])>,
        limit: u64,
        out: &mut Out,
    ) -> Result<FromMatches, Errors> {
        let t = &ft.table;
        let mut leaves = self.resolve_leaves(&ft.from)?;
        let locking = self.row_locking(t, true, &ft.hints)?;
        let width = leaves.make_target(ft.leaf, locking)?;
        let dir = self.spill_dir();
        let key = super::dml::key_columns(t)
            .filter(|_| t.entry.index_id == 1)
            .map(|(_, pos)| pos);
        let mut sort = SortSpill::new(&dir, SORT_MEMORY_BYTES, match_order(key.clone()));
        {
            let (shape, mut rows) = leaves.relation(self, &ft.from, filter)?;
            let src: Source = shape.source();
            let rid_at = src.rowset.columns.iter().position(|c| c.0 == RID_COLUMN);
            let rid_at = rid_at.expect("the target's leaf gives RIDs");
            let mut seq = 0i64;
            while let Some(r) = rows.next_row(self)? {
                let ctx = Session::ctx(&src, &r);
                if let Some(w) = filter {
                    if self
                        .condition_row(w, Some(&ctx))
                        .map_err(super::dml::terminated)?
                        != Some(true)
                    {
                        continue;
                    }
                }
                let old = &r[rid_at - width..rid_at];
                let mut m = vec![r[rid_at].clone(), Value::BigInt(seq)];
                m.extend(old.iter().cloned());
                if let Some((u, targets)) = set {
                    m.extend(self.updated_row_in(u, t, targets, old, &ctx)?);
                }
                sort.push(m).map_err(one)?;
                seq += 1;
            }
        }
        leaves.report_io(self, out);
        let locking = self.row_locking(t, true, &ft.hints)?;
        let mut sorted = sort.finish().map_err(one)?;
        let mut kept = SortSpill::fifo(&dir, SORT_MEMORY_BYTES);
        let (mut last, mut count): (Option<Vec<Value>>, u64) = (None, 0);
        while count < limit {
            let Some(m) = sorted.next() else { break };
            let mut m = m.map_err(one)?;
            if let Some(l) = &last {
                match target_row_order(&key, l, &m) {
                    Ordering::Equal => continue,
                    // Invariant 1: each target row once, in order.
                    o => assert_eq!(o, Ordering::Less, "matches sorted by target row"),
                }
            }
            last = Some(m.clone());
            m.remove(1);
            let rec = super::dml::record(t, &m[1..1 + width])?;
            locking.changes(super::tables::rid_of(&m[0]), &rec, false)?;
            kept.push(m).map_err(one)?;
            count += 1;
        }
        Ok(FromMatches {
            rows: kept.finish().map_err(one)?,
            count,
        })
    }

    /// An UPDATE's or DELETE's limit with FROM: TOP (n), else SET ROWCOUNT, else none;
    /// TOP (n) PERCENT is refused (it needs the count of target rows first).
    fn limit_with_from(&mut self, top: &Option<crate::ast::Top>) -> Result<u64, Errors> {
        if top.as_ref().is_some_and(|t| t.percent) {
            return Err(vec![not_yet(
                "TOP (n) PERCENT in UPDATE or DELETE with FROM",
            )]);
        }
        Ok(self.top_count(top, usize::MAX)? as u64)
    }

    /// OUTPUT with FROM may name only `inserted` and `deleted`: a FROM table's columns
    /// are refused (40517) rather than called unknown.
    fn refuse_from_columns_in_output(
        &self,
        clause: Option<&crate::ast::OutputClause>,
        from: &[TableSource],
    ) -> Result<(), Errors> {
        let Some(clause) = clause else {
            return Ok(());
        };
        let mut leaves = Vec::new();
        from.iter().for_each(|ts| leaf_names(ts, &mut leaves));
        let exposed: Vec<&str> = leaves
            .iter()
            .flatten()
            .map(|(n, a)| a.unwrap_or(n.name()))
            .collect();
        if super::dml_output::output_names_any(Some(clause), &exposed) {
            return Err(vec![not_yet("OUTPUT of a FROM table's columns")]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(sql: &str) -> Vec<TableSource> {
        let stmt = crate::parser::parse_batch(&format!("SELECT 1 FROM {sql}")).unwrap();
        match &stmt[0].kind {
            crate::ast::StatementKind::Select(q) => match &q.body {
                crate::ast::QueryBody::Select(s) => s.from.clone(),
                _ => unreachable!(),
            },
            _ => unreachable!(),
        }
    }

    fn name(s: &str) -> ObjectName {
        ObjectName {
            parts: s.split('.').map(str::to_string).collect(),
        }
    }

    /// SQL Server's rule for the target among FROM's tables, case by case.
    #[test]
    fn the_target_among_from_tables() {
        let f = from("t JOIN u ON t.id = u.id");
        assert_eq!(target_in(&name("t"), &f), Ok(TargetIn::Leaf(0)));
        assert_eq!(target_in(&name("u"), &f), Ok(TargetIn::Leaf(1)));
        assert_eq!(target_in(&name("dbo.u"), &f), Ok(TargetIn::Leaf(1)));
        assert_eq!(target_in(&name("v"), &f), Ok(TargetIn::Joined));
        let f = from("t AS a JOIN u ON a.id = u.id");
        assert_eq!(target_in(&name("a"), &f), Ok(TargetIn::Leaf(0)));
        assert_eq!(target_in(&name("t"), &f), Ok(TargetIn::Leaf(0)));
        let f = from("u JOIN t AS a ON 1 = 1 JOIN t AS b ON 1 = 1");
        assert_eq!(target_in(&name("b"), &f), Ok(TargetIn::Leaf(2)));
        assert_eq!(target_in(&name("t"), &f).unwrap_err().number, 8154);
        let f = from("t JOIN t AS b ON 1 = 1");
        assert_eq!(target_in(&name("t"), &f), Ok(TargetIn::Leaf(0)));
    }
}
