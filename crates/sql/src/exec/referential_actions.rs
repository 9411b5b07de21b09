//! FOREIGN KEY referential actions: ON DELETE / ON UPDATE CASCADE, SET NULL and SET
//! DEFAULT, their definition rules (Msgs 1761, 1762, 1785) and what a parent's DELETE or
//! key UPDATE does to the child rows that reference it.
//!
//! A parent's writes (`write_deletes`, `write_updates`: DELETE, UPDATE, their FROM forms
//! and MERGE) are followed, in the same statement (`foreign_keys.rs` invariant 3), by
//! `referential_actions`: for each key with an action for the event, the child rows of
//! each removed or re-keyed parent row are found by a generated correlated filter
//! (`[child].[c] = [fk referenced row].[p] AND ...`, the parent row being the enclosing
//! row, so the search seeks as a correlated subquery's does) and deleted or updated
//! through the ordinary write phases, which lock, maintain indexes, log, and run the
//! child's own parent-side work (its referrers' actions and checks) in turn.
//!
//! Invariants:
//! 1. Definitions: SET NULL needs every referencing column nullable (1761); SET DEFAULT
//!    needs every NOT NULL referencing column to have a DEFAULT (1762); an ON UPDATE
//!    action other than NO ACTION on an IDENTITY column is refused (40517). For each
//!    event (DELETE, UPDATE) the keys whose action is not NO ACTION form a graph from
//!    referenced to referencing table with no cycle (a self-reference included) and at
//!    most one path between two tables; a key that would break that is refused (1785,
//!    1750), as SQL Server does. So a cascade never reaches its own table, and never
//!    reaches one table twice in a statement. ALTER TABLE ... ADD of such a key reads the
//!    graph holding X on the database's METADATA (`lock_cascade_paths`), so two ALTERs on
//!    disjoint tables cannot break the rule together.
//! 2. Every child row an action touches is found before any of them is written (the
//!    Halloween problem across parent rows): an UPDATE moving key 1 to 2 and 2 to 1 gives
//!    the children of 1 the key 2 and those of 2 the key 1. Each parent row's old key is
//!    paired with its new one by the row itself (the change spool's `[rid, old, new]`).
//! 3. A changed child row is checked as any UPDATE's is: NOT NULL (515), CHECK
//!    constraints and its own FOREIGN KEYs (547, with the statement's verb), unique keys
//!    (2627 / 2601); any failure fails the statement, whose rollback undoes the parent's
//!    writes and every cascaded one.
//! 4. Cascades nest at most `MAX_CASCADE_DEPTH` levels (invariant 1 bounds them by the
//!    number of tables): deeper is refused (40517) and the statement undone.
//! 5. Child rows are read and locked as an UPDATE's or DELETE's (U, then X), under the
//!    parent rows' X locks: a child insert racing the parent's delete waits for it (its
//!    parent lookup reads REPEATABLEREAD) and then finds no parent (547).
//!
//! Not here: NOT FOR REPLICATION (refused at parse, 40517). Each parent row's children
//! are searched on their own (a seek with an index on the referencing columns, else a
//! scan of the child), not joined to all the parent rows at once: a DELETE of many
//! parents of an unindexed child reads the child once per parent row. A child table the
//! statement's own transaction dropped is skipped (its rows are gone for it).

use extentdb_format::catalog::{ForeignKey, ReferentialAction, TableEntry};
use extentdb_storage::Database;

use super::dml::{terminated, UpdateChanges};
use super::eval::RowCtx;
use super::foreign_keys::{bracket, column_by_id, generated_condition, referrers, KeyTarget};
use super::locking::RowLocking;
use super::lower::not_yet;
use super::spill::{SortSpill, SortedRows};
use super::stream::SORT_MEMORY_BYTES;
use super::tables::TableRef;
use super::Session;
use crate::ast::{Expr, ObjectName};
use crate::messages::{msg, SqlError};
use crate::rowcodec;
use crate::types::Value;

/// Invariant 4: how many cascades deep a statement may go.
const MAX_CASCADE_DEPTH: u32 = 32;
/// Rows read from a spool at a time.
const WINDOW: usize = 256;
/// The alias the parent row has in a generated filter.
const REFERENCED_ROW: &str = "fk referenced row";

fn action_for(k: &ForeignKey, delete: bool) -> ReferentialAction {
    match delete {
        true => k.delete_action,
        false => k.update_action,
    }
}

/// Invariant 1 for a key `name` being defined on `target.child` over `columns` with
/// `actions` (ON DELETE, ON UPDATE).
pub(super) fn check_actions(
    db: &Database,
    target: &KeyTarget<'_>,
    name: &str,
    columns: &[&extentdb_format::catalog::ColumnEntry],
    actions: (ReferentialAction, ReferentialAction),
) -> Result<(), Vec<SqlError>> {
    let both = [actions.0, actions.1];
    if both.contains(&ReferentialAction::SetNull) && columns.iter().any(|c| !c.is_nullable) {
        return Err(vec![msg(1761, &[&name]), msg(1750, &[])]);
    }
    let no_default =
        |c: &&extentdb_format::catalog::ColumnEntry| !c.is_nullable && c.default_sql.is_empty();
    if both.contains(&ReferentialAction::SetDefault) && columns.iter().any(no_default) {
        return Err(vec![msg(1762, &[&name]), msg(1750, &[])]);
    }
    if actions.1 != ReferentialAction::NoAction && columns.iter().any(|c| c.identity.is_some()) {
        return Err(vec![not_yet(
            "ON UPDATE actions of a FOREIGN KEY on an IDENTITY column",
        )]);
    }
    let child = target.child.object_id;
    let parent = target.parent.map_or(child, |p| p.object_id);
    for (delete, action) in [(true, actions.0), (false, actions.1)] {
        if action == ReferentialAction::NoAction {
            continue;
        }
        let edges = cascade_edges(db, target, delete);
        if parent == child || joins_paths(&edges, parent, child) {
            let table = &target.child.name;
            return Err(vec![msg(1785, &[&name, table]), msg(1750, &[])]);
        }
    }
    Ok(())
}

/// The event's cascade graph: (referenced, referencing) object ids of the keys whose
/// action is not NO ACTION, those `target.made` included (referenced 0: the child).
fn cascade_edges(db: &Database, target: &KeyTarget<'_>, delete: bool) -> Vec<(u32, u32)> {
    let mut edges = Vec::new();
    for t in db.catalog.tables.iter().filter(|t| t.index_of.is_none()) {
        for k in &t.foreign_keys {
            if action_for(k, delete) != ReferentialAction::NoAction {
                edges.push((k.referenced_object_id, t.object_id));
            }
        }
    }
    let child = target.child.object_id;
    for k in target.made {
        if action_for(k, delete) != ReferentialAction::NoAction {
            let parent = match k.referenced_object_id {
                0 => child,
                p => p,
            };
            edges.push((parent, child));
        }
    }
    edges
}

/// The tables reachable from `from` along `edges`, `from` included.
fn reachable(edges: &[(u32, u32)], from: u32) -> Vec<u32> {
    let mut seen = vec![from];
    let mut at = 0;
    while at < seen.len() {
        let node = seen[at];
        for &(a, b) in edges {
            if a == node && !seen.contains(&b) {
                seen.push(b);
            }
        }
        at += 1;
    }
    seen
}

/// Whether a new edge `parent -> child` makes a cycle or a second path between two
/// tables: some table that reaches `parent` (or is it) already reaches `child` or a table
/// below it. `edges` holds no cycle and no second path (invariant 1), so this suffices.
fn joins_paths(edges: &[(u32, u32)], parent: u32, child: u32) -> bool {
    let below = reachable(edges, child);
    let mut nodes: Vec<u32> = edges.iter().flat_map(|&(a, b)| [a, b]).collect();
    nodes.extend([parent, child]);
    nodes.sort_unstable();
    nodes.dedup();
    nodes.into_iter().any(|x| {
        let r = reachable(edges, x);
        r.contains(&parent) && r.iter().any(|n| below.contains(n))
    })
}

/// A referencing table's three-part name, its key, and the key's (parent, child) column
/// positions.
type Referrer = (ObjectName, ForeignKey, Vec<(usize, usize)>);

/// One key with an action for the event: its child table and what it does there.
struct Cascade {
    action: ReferentialAction,
    child: TableRef,
    /// (referenced column's position in the parent's row, referencing column's position in
    /// the child's row), in key order.
    pairs: Vec<(usize, usize)>,
    /// The child rows of the enclosing parent row (`REFERENCED_ROW`).
    filter: Expr,
}

/// What a cascade gathered before writing (invariant 2).
enum Work {
    /// Child rows to delete (`[rid, values...]`) and how many.
    Deletes(Box<SortSpill>, u64),
    /// Child rows to change.
    Updates(Box<UpdateChanges>),
}

struct Pending {
    cascade: Cascade,
    locking: RowLocking,
    work: Work,
}

/// `[child].[c] = [fk referenced row].[p] AND ...`, parsed.
fn child_filter(
    child: &TableEntry,
    parent: &TableEntry,
    k: &ForeignKey,
) -> Result<Expr, Vec<SqlError>> {
    let conds: Vec<String> = k
        .columns
        .iter()
        .map(|&(c, p)| {
            format!(
                "{}.{} = {}.{}",
                bracket(&child.name),
                bracket(&column_by_id(&child.columns, c).name),
                bracket(REFERENCED_ROW),
                bracket(&column_by_id(&parent.columns, p).name)
            )
        })
        .collect();
    generated_condition(&format!("SELECT 1 WHERE {}", conds.join(" AND ")))
}

fn position(t: &TableEntry, column_id: u16) -> usize {
    let p = t.columns.iter().position(|c| c.column_id == column_id);
    p.expect("catalog invariant 10: a key's columns exist")
}

impl Session {
    /// The event's cascades of `t`'s referrers (invariant 1: none is `t` itself), each
    /// child under the lock the statement keeps on it, and all found again when a child's
    /// constraints changed before its lock was granted (check_constraints.rs invariant 5):
    /// the rows a cascade changes meet the constraints no ALTER can change until the
    /// statement ends. Each comes with the locking its writes use.
    fn cascades(
        &mut self,
        t: &TableRef,
        delete: bool,
    ) -> Result<Vec<(Cascade, RowLocking)>, Vec<SqlError>> {
        loop {
            let found = self.cascades_once(t, delete)?;
            let mut locked = Vec::with_capacity(found.len());
            let mut unchanged = true;
            for c in found {
                let locking = self.row_locking(&c.child, true, &[])?;
                unchanged &= self.checks_unchanged(&c.child);
                locked.push((c, locking));
            }
            if unchanged {
                return Ok(locked);
            }
        }
    }

    /// `cascades`' resolution, before any lock.
    fn cascades_once(&mut self, t: &TableRef, delete: bool) -> Result<Vec<Cascade>, Vec<SqlError>> {
        let found: Vec<Referrer> = {
            let d = t.db.read().unwrap();
            let acting = referrers(&d, t.entry.object_id)
                .into_iter()
                .filter(|(_, k)| action_for(k, delete) != ReferentialAction::NoAction);
            acting
                .map(|(child, k)| {
                    assert_ne!(child.object_id, t.entry.object_id, "invariant 1");
                    let name = ObjectName {
                        parts: vec![
                            t.db_name.to_string(),
                            child.schema_name.clone(),
                            child.name.clone(),
                        ],
                    };
                    let pairs = k
                        .columns
                        .iter()
                        .map(|&(c, p)| (position(&t.entry, p), position(child, c)))
                        .collect();
                    (name, k.clone(), pairs)
                })
                .collect()
        };
        let mut out = Vec::new();
        for (name, k, pairs) in found {
            // A child this transaction dropped is gone for it (nothing to act on).
            let Some(child) = self.find_table(&name)? else {
                continue;
            };
            out.push(Cascade {
                action: action_for(&k, delete),
                filter: child_filter(&child.entry, &t.entry, &k)?,
                child,
                pairs,
            });
        }
        Ok(out)
    }

    /// The actions of `t`'s referrers for `rows` (`[rid, values...]` deleted, or `[rid,
    /// old..., new...]` updated), taken in the running statement; returns `rows` again
    /// for the NO ACTION checks that follow.
    pub(super) fn referential_actions(
        &mut self,
        t: &TableRef,
        rows: SortedRows,
        delete: bool,
    ) -> Result<SortedRows, Vec<SqlError>> {
        let cascades = self.cascades(t, delete)?;
        if cascades.is_empty() {
            return Ok(rows);
        }
        if self.cascade_depth >= MAX_CASCADE_DEPTH {
            return Err(vec![not_yet(
                "cascading referential actions nested more than 32 levels deep",
            )]);
        }
        let (acted, rest) = super::foreign_keys::tee(&self.spill_dir(), rows, None)?;
        self.cascade_depth += 1;
        let done = self.act(t, cascades, acted, delete);
        self.cascade_depth -= 1;
        done.map(|()| rest)
    }

    /// Invariant 2: every cascade's child rows gathered over all of `rows`, then written.
    fn act(
        &mut self,
        t: &TableRef,
        cascades: Vec<(Cascade, RowLocking)>,
        mut rows: SortedRows,
        delete: bool,
    ) -> Result<(), Vec<SqlError>> {
        let mut pending = Vec::with_capacity(cascades.len());
        for c in cascades {
            pending.push(self.pending(c, delete)?);
        }
        let width = t.entry.columns.len();
        let columns = t.columns();
        loop {
            let window = rows.window(WINDOW).map_err(|e| vec![e])?;
            if window.is_empty() {
                break;
            }
            for row in &window {
                let old = &row[1..1 + width];
                let new = (!delete).then(|| &row[1 + width..]);
                let ctx = RowCtx::single(&columns, old, Some(REFERENCED_ROW), &t.entry.name);
                for p in pending.iter_mut() {
                    self.gather(p, &ctx, new)?;
                }
            }
        }
        for p in pending {
            self.apply(p)?;
        }
        Ok(())
    }

    fn pending(
        &mut self,
        (c, locking): (Cascade, RowLocking),
        delete: bool,
    ) -> Result<Pending, Vec<SqlError>> {
        let dir = self.spill_dir();
        let work = match (delete, c.action) {
            (true, ReferentialAction::Cascade) => {
                Work::Deletes(Box::new(SortSpill::fifo(&dir, SORT_MEMORY_BYTES)), 0)
            }
            _ => {
                let targets: Vec<Option<usize>> = c.pairs.iter().map(|&(_, cp)| Some(cp)).collect();
                Work::Updates(Box::new(UpdateChanges::new(&c.child, &targets, &dir)))
            }
        };
        Ok(Pending {
            cascade: c,
            locking,
            work,
        })
    }

    /// The child rows of one parent row (`parent`: its old values; `new`: an UPDATE's new
    /// values) added to `p`'s work; none when the key holds a NULL or is unchanged.
    fn gather(
        &mut self,
        p: &mut Pending,
        parent: &RowCtx<'_>,
        new: Option<&[Value]>,
    ) -> Result<(), Vec<SqlError>> {
        let old = parent.values;
        let pairs = &p.cascade.pairs;
        if pairs.iter().any(|&(pp, _)| old[pp].is_null()) {
            return Ok(());
        }
        let same = |n: &[Value]| {
            pairs.iter().all(|&(pp, _)| {
                crate::ops::compare(&old[pp], &n[pp]).ok().flatten()
                    == Some(std::cmp::Ordering::Equal)
            })
        };
        if new.is_some_and(same) {
            return Ok(());
        }
        let (child, filter, locking) = (&p.cascade.child, &p.cascade.filter, &p.locking);
        let (matched, _) = self.with_outer_row(Some(parent), |s| {
            let access = s.access_for(child, Some(filter), None);
            s.matching(child, Some(filter), (access, None), locking)
        })?;
        for row in matched {
            let row = row.map_err(|e| vec![e])?;
            match &mut p.work {
                Work::Deletes(spool, n) => {
                    spool.push(row).map_err(|e| vec![e])?;
                    *n += 1;
                }
                Work::Updates(changes) => {
                    let values = self.acted_row(&p.cascade, &row[1..], new)?;
                    changes.add(row, values)?;
                }
            }
        }
        Ok(())
    }

    /// A child row (`old`) as the action leaves it, checked (invariant 3).
    fn acted_row(
        &mut self,
        c: &Cascade,
        old: &[Value],
        parent_new: Option<&[Value]>,
    ) -> Result<Vec<Value>, Vec<SqlError>> {
        let verb = match parent_new {
            Some(_) => "UPDATE",
            None => "DELETE",
        };
        let child = &c.child;
        let mut row = old.to_vec();
        for &(pp, cp) in &c.pairs {
            let value = match (c.action, parent_new) {
                (ReferentialAction::Cascade, Some(new)) => new[pp].clone(),
                (ReferentialAction::SetNull, _) => Value::Null,
                (ReferentialAction::SetDefault, _) => {
                    self.default_value(child, cp).map_err(terminated)?
                }
                (a, _) => unreachable!("no row work for {a:?}"),
            };
            let col = &child.entry.columns[cp];
            row[cp] = rowcodec::assign(child.types[cp], &value, &child.three_part(), &col.name)
                .map_err(terminated)?;
            if row[cp].is_null() && !col.is_nullable {
                let args: [&dyn std::fmt::Display; 3] = [&col.name, &child.three_part(), &verb];
                return Err(terminated(msg(515, &args)));
            }
        }
        let set: Vec<usize> = c.pairs.iter().map(|&(_, cp)| cp).collect();
        self.check_row(child, &row, verb, Some(&set))?;
        Ok(row)
    }

    /// `p`'s gathered rows written through the ordinary write phases.
    fn apply(&mut self, p: Pending) -> Result<(), Vec<SqlError>> {
        let child = &p.cascade.child;
        match p.work {
            Work::Deletes(spool, n) => {
                let rows = (*spool).finish().map_err(|e| vec![e])?;
                self.write_deletes(child, rows, n, None)
            }
            Work::Updates(changes) => {
                self.note_update(child, Some(changes.set_columns()));
                let moves = changes.moves_unique_keys();
                let (rows, _) = (*changes).finish(child)?;
                self.write_updates(child, (rows, moves), &p.locking, None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new edge is refused when it closes a cycle or opens a second path between two
    /// tables, and accepted on a tree.
    #[test]
    fn cycles_and_second_paths_are_found() {
        let tree = [(1, 2), (2, 3), (1, 4)];
        assert!(!joins_paths(&tree, 4, 5));
        assert!(!joins_paths(&tree, 3, 5));
        assert!(joins_paths(&tree, 3, 1), "cycle");
        assert!(joins_paths(&tree, 4, 3), "two paths from 1 to 3");
        assert!(joins_paths(&tree, 1, 3), "a second edge below 1");
        assert!(joins_paths(&[(1, 2)], 1, 2), "two keys between one pair");
        assert!(!joins_paths(&[], 7, 8));
    }
}
