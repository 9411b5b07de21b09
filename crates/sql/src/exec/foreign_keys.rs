//! FOREIGN KEY constraints: their definitions checked at CREATE TABLE and ALTER TABLE ...
//! ADD, the child side enforced on every row INSERT, UPDATE and MERGE write, the parent
//! side on every DELETE and UPDATE (MERGE's too), DROP and TRUNCATE TABLE of a referenced
//! table refused, and sys.foreign_keys / sys.foreign_key_columns.
//!
//! The catalog keeps a key on its referencing (child) table's entry (storage's
//! constraint.rs, FORMAT.md "Catalog" version 11). Each lookup is a generated correlated
//! `EXISTS (SELECT 1 FROM ... WHERE key = outer column ...)` run through the ordinary read
//! path (`condition_row`), so it seeks as any query does (a clustered key or a unique
//! index: seek.rs, index_seek.rs) and locks as a read does (locking.rs). The parsed
//! lookups are kept per table entry in the session (`LookupCache`).
//!
//! Invariants:
//! 1. Child side: a row whose key columns are all non-NULL must find its key in the
//!    parent, checked where CHECK constraints are (`check_row`: `new_row` and
//!    `updated_row_in`), before any write of the statement; an UPDATE checks only the keys
//!    whose columns it assigns. NULL in any key column passes (MATCH SIMPLE, as SQL
//!    Server). A row of a self-referencing table that references its own key passes.
//! 2. The parent lookup reads WITH (REPEATABLEREAD): the parent key's S lock is kept to
//!    the end of the writer's transaction, so no session deletes or re-keys that parent
//!    row until the child row is committed or rolled back. A parent changed by an open
//!    transaction is waited for (its X lock), and seen as it ends.
//! 3. Parent side: `write_deletes` and `write_updates` (every DELETE, UPDATE, their FROM
//!    forms and MERGE) check, after their writes and in the same statement, that no child
//!    row references a key they removed (an UPDATE's key that no parent row holds any
//!    more); a referencing row fails the statement (547), whose rollback undoes the
//!    writes. Checking after the writes, as SQL Server does, lets a statement remove a
//!    self-referencing row with its referrers, and the parent rows are X-locked by then,
//!    so a child insert racing the delete waits (invariant 2's lookup) or is waited for
//!    (the child lookup reads under the session's locking read, and a read under READ
//!    UNCOMMITTED is raised to READ COMMITTED by READCOMMITTEDLOCK). Only NO ACTION keys
//!    are checked so (a lookup's `on_delete` / `on_update`).
//! 4. A key with ON DELETE / ON UPDATE CASCADE, SET NULL or SET DEFAULT is acted on
//!    before that check, in the same statement (`referential_actions.rs`, which also
//!    holds their definition rules: 1761, 1762, 1785). FOREIGN KEYs of temporary tables
//!    and table variables, and references to another database, are refused (40517).
//! 5. ALTER TABLE ... ADD FOREIGN KEY holds Sch-M on the child and on the parent, so no
//!    writer of either runs between WITH CHECK's scan and the catalog change, and every
//!    writer of the parent that started before sees the new key when it next resolves.
//!
//! 6. An INSERT statement's row whose self-referencing key finds no parent before the
//!    statement's rows go in is checked again after they all did (`insert_checking_self_
//!    references`), in the same statement, as SQL Server checks after its inserts: the
//!    rows of one INSERT may reference each other. Such rows wait in a spool
//!    (`Session::deferred_self_references`), so memory stays bounded.
//!
//! 7. A disabled key (ALTER TABLE ... NOCHECK CONSTRAINT, constraint_state.rs, or ALTER
//!    INDEX ... DISABLE of the index it references through, alter_index.rs) is checked
//!    on neither side (`child_lookups`, `referrers`) and is not trusted; it still stops
//!    DROP and TRUNCATE TABLE of its parent and DROP INDEX of its index
//!    (`every_referrer`), and no new key references through a disabled index, the
//!    disabled clustered index of a table too (`candidate_keys`: 1776).
//!
//! DROP INDEX of an index a key references through is refused (3723, `index_in_use`).
//!
//! Not here: NOT FOR REPLICATION. MERGE's inserted rows and UPDATE's rows are checked before their writes, so
//! rows of one MERGE or UPDATE of a self-referencing table cannot reference each other's
//! new keys.

use std::sync::Arc;

use extentdb_format::catalog::{ColumnEntry, ForeignKey, ReferentialAction, TableEntry};
use extentdb_storage::Database;

use super::dml::terminated;
use super::eval::RowCtx;
use super::lower::not_yet;
use super::spill::{SortSpill, SortedRows};
use super::stream::SORT_MEMORY_BYTES;
use super::tables::{Access, TableRef};
use super::views::{cols, text};
use super::Session;
use crate::ast::{self, CreateTable, Expr, ForeignKeyDefinition, ObjectName, TableConstraint};
use crate::messages::{msg, SqlError};
use crate::parser::parse_batch;
use crate::types::{SqlType, Value};

/// How many tables' lookups a session keeps.
const CACHE_TABLES: usize = 16;
/// Rows read from a spool at a time when it is copied.
const COPY_WINDOW: usize = 256;

/// One generated lookup: a correlated EXISTS over the row it is evaluated with.
struct Lookup {
    name: String,
    /// Positions (in the evaluated row) of the key columns: NULL in any passes.
    positions: Vec<usize>,
    /// Self-reference: the positions of the referenced columns in the same row.
    own_key: Option<Vec<usize>>,
    /// `db.dbo.t` and the column (one-column keys) Msg 547 names.
    other_table: String,
    column: Option<String>,
    exists: Expr,
    /// The key's actions (parent side): only NO ACTION keys are checked; the others are
    /// `referential_actions.rs`'s.
    on_delete: ReferentialAction,
    on_update: ReferentialAction,
}

/// A child table entry's parent lookups (child side) or a parent entry's referrer
/// lookups (parent side).
struct Lookups {
    entry: Arc<TableEntry>,
    catalog_version: u64,
    parent_side: bool,
    lookups: Vec<Lookup>,
}

/// A session's generated lookups, by table entry and catalog state.
#[derive(Default)]
pub(super) struct LookupCache {
    tables: Vec<Arc<Lookups>>,
}

impl LookupCache {
    fn get(&self, entry: &Arc<TableEntry>, version: u64, parent: bool) -> Option<Arc<Lookups>> {
        let same = |l: &&Arc<Lookups>| {
            Arc::ptr_eq(&l.entry, entry) && l.catalog_version == version && l.parent_side == parent
        };
        self.tables.iter().find(same).cloned()
    }

    fn keep(&mut self, l: Arc<Lookups>) {
        if self.tables.len() >= CACHE_TABLES {
            self.tables.remove(0);
        }
        self.tables.push(l);
    }
}

/// `[name]` with `]` doubled.
pub(super) fn bracket(name: &str) -> String {
    format!("[{}]", name.replace(']', "]]"))
}

/// The name SQL Server gives an unnamed FOREIGN KEY: `FK__` + up to 8 characters of the
/// child table + `__` + up to 5 of its first column + `__` + 8 hex digits.
fn generated_name(table: &str, column: &str, salt: u64) -> String {
    let short: String = table.chars().take(8).collect();
    let col: String = column.chars().take(5).collect();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in table
        .bytes()
        .chain(column.bytes())
        .chain(salt.to_le_bytes())
    {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    let h = (h ^ (h >> 32)) as u32;
    format!("FK__{short}__{col}__{h:08X}")
}

fn column_named<'a>(columns: &'a [ColumnEntry], name: &str) -> Option<&'a ColumnEntry> {
    columns.iter().find(|c| c.name.eq_ignore_ascii_case(name))
}

pub(super) fn column_by_id(columns: &[ColumnEntry], id: u16) -> &ColumnEntry {
    let c = columns.iter().find(|c| c.column_id == id);
    c.expect("catalog invariant 10: a key's columns exist")
}

/// The parent's keys a FOREIGN KEY may reference: (index id, key column ids), the
/// clustered PRIMARY KEY first, then each unique index that is not disabled (a disabled
/// one enforces nothing: invariant 7).
fn candidate_keys(db: &Database, parent: &TableEntry) -> Vec<(u16, Vec<u16>)> {
    let mut keys = Vec::new();
    // A disabled clustered index is no key to reference (storage's index.rs invariant 10).
    if let (Some((_, ids)), 1, false) = (&parent.primary_key, parent.index_id, parent.is_disabled) {
        keys.push((1, ids.clone()));
    }
    for t in &db.catalog.tables {
        let Some(ix) = &t.index_of else { continue };
        if ix.table_object_id == parent.object_id && ix.unique && !ix.is_disabled {
            let ids = ix.sources[..ix.key_columns as usize].to_vec();
            keys.push((ix.index_id, ids));
        }
    }
    keys
}

/// Whether two columns have the same data type as a FOREIGN KEY needs (Msg 1778):
/// character and binary lengths may differ, precision and scale may not.
fn same_type(a: &ColumnEntry, b: &ColumnEntry) -> bool {
    a.system_type_id == b.system_type_id
        && match a.system_type_id {
            // decimal, numeric, datetime2, time, datetimeoffset
            106 | 108 | 42 | 41 | 43 => a.precision == b.precision && a.scale == b.scale,
            _ => true,
        }
}

/// What a key being defined is checked against.
pub(super) struct KeyTarget<'a> {
    pub child: &'a TableEntry,
    /// None: the child itself (a self-reference at CREATE TABLE).
    pub parent: Option<&'a TableEntry>,
    pub taken: &'a dyn Fn(&str) -> bool,
    pub salt: u64,
    /// Keys the same CREATE TABLE made before this one (their cascade paths count).
    pub made: &'a [ForeignKey],
}

/// One definition checked (invariant 4, Msgs 1769, 1770, 8139, 1776, 1778, and for the
/// actions 1761, 1762, 1785) and made a catalog entry (object id 0: storage numbers it; referenced 0: the child itself).
pub(super) fn key_entry(
    db: &Database,
    target: &KeyTarget<'_>,
    own: Option<&ColumnEntry>,
    def: &ForeignKeyDefinition,
) -> Result<ForeignKey, Vec<SqlError>> {
    let child = target.child;
    let parent = target.parent.unwrap_or(child);
    let child_cols: Vec<&ColumnEntry> = match own {
        Some(c) if def.columns.is_empty() => vec![c],
        _ => {
            let mut v = Vec::new();
            for n in &def.columns {
                let found = column_named(&child.columns, n);
                let name = def.name.as_deref().unwrap_or("");
                v.push(
                    found
                        .ok_or_else(|| vec![msg(1769, &[&name, n, &child.name]), msg(1750, &[])])?,
                );
            }
            v
        }
    };
    // A cascade would write a computed column (computed_columns.rs invariant 2).
    if child_cols.iter().any(|c| c.computed.is_some()) {
        return Err(vec![not_yet(
            "FOREIGN KEY constraints on a computed column",
        )]);
    }
    let name = match &def.name {
        Some(n) => n.clone(),
        None => generated_name(&child.name, &child_cols[0].name, target.salt),
    };
    let parent_ids: Vec<u16> = match def.referenced.is_empty() {
        // A heap's PRIMARY KEY is its unique index's key (catalog invariant 11).
        true => match &parent.primary_key {
            Some((_, ids)) => ids.clone(),
            None => Vec::new(),
        },
        false => {
            let mut v = Vec::new();
            for n in &def.referenced {
                let found = column_named(&parent.columns, n);
                let c = found
                    .ok_or_else(|| vec![msg(1770, &[&name, n, &parent.name]), msg(1750, &[])])?;
                v.push(c.column_id);
            }
            v
        }
    };
    if !parent_ids.is_empty() && parent_ids.len() != child_cols.len() {
        return Err(vec![msg(8139, &[&child.name]), msg(1750, &[])]);
    }
    let mut sorted = parent_ids.clone();
    sorted.sort_unstable();
    let matching = candidate_keys(db, parent).into_iter().find(|(_, ids)| {
        let mut ids = ids.clone();
        ids.sort_unstable();
        ids == sorted && !sorted.is_empty()
    });
    let Some((key_index_id, _)) = matching else {
        let parent_two = format!("{}.{}", parent.schema_name, parent.name);
        return Err(vec![msg(1776, &[&parent_two, &name]), msg(1750, &[])]);
    };
    for (c, &pid) in child_cols.iter().zip(&parent_ids) {
        let p = column_by_id(&parent.columns, pid);
        if !same_type(c, p) {
            let args: [&dyn std::fmt::Display; 5] =
                [&parent.name, &p.name, &child.name, &c.name, &name];
            return Err(vec![msg(1778, &args), msg(1750, &[])]);
        }
    }
    if (target.taken)(&name) {
        return Err(vec![msg(2714, &[&name]), msg(1750, &[])]);
    }
    let actions = (action_of(def.on_delete), action_of(def.on_update));
    super::referential_actions::check_actions(db, target, &name, &child_cols, actions)?;
    Ok(ForeignKey {
        object_id: 0,
        name,
        referenced_object_id: target.parent.map_or(0, |p| p.object_id),
        key_index_id,
        columns: child_cols
            .iter()
            .map(|c| c.column_id)
            .zip(parent_ids)
            .collect(),
        delete_action: actions.0,
        update_action: actions.1,
        is_disabled: false,
        is_not_trusted: false,
        is_system_named: def.name.is_none(),
    })
}

/// The catalog's code of a parsed action.
fn action_of(a: ast::ReferentialAction) -> ReferentialAction {
    match a {
        ast::ReferentialAction::NoAction => ReferentialAction::NoAction,
        ast::ReferentialAction::Cascade => ReferentialAction::Cascade,
        ast::ReferentialAction::SetNull => ReferentialAction::SetNull,
        ast::ReferentialAction::SetDefault => ReferentialAction::SetDefault,
    }
}

/// The enabled FOREIGN KEYs that reference `object_id` (a self-reference and those of
/// tables a transaction has dropped but not yet committed included): (child entry, key).
/// The parent side enforces these (invariant 3).
pub(super) fn referrers(db: &Database, object_id: u32) -> Vec<(&TableEntry, &ForeignKey)> {
    let mut found = every_referrer(db, object_id);
    found.retain(|(_, k)| !k.is_disabled);
    found
}

/// Every FOREIGN KEY that references `object_id`, disabled ones too (invariant 7): what
/// DROP TABLE, TRUNCATE TABLE, DROP INDEX and ALTER INDEX ... DISABLE look at.
pub(super) fn every_referrer(db: &Database, object_id: u32) -> Vec<(&TableEntry, &ForeignKey)> {
    let mut found = Vec::new();
    for t in db.catalog.tables.iter().filter(|t| t.index_of.is_none()) {
        for k in t.foreign_keys.iter() {
            if k.referenced_object_id == object_id {
                found.push((t, k));
            }
        }
    }
    found
}

/// Whether a table other than `object_id` has a FOREIGN KEY referencing it (enabled or
/// not, as SQL Server's 3726 and 4712 count them), not counting tables `xact` (the
/// dropping transaction) has itself dropped.
pub(super) fn referenced_by_other(db: &Database, object_id: u32, xact: Option<u64>) -> bool {
    every_referrer(db, object_id).iter().any(|(t, _)| {
        let dropped_here = t
            .pending_ddl
            .is_some_and(|p| p.dropped && Some(p.xact) == xact);
        t.object_id != object_id && !dropped_here
    })
}

/// Whether a FOREIGN KEY references `t` through its index `index` (DROP INDEX: 3723).
pub(super) fn index_in_use(t: &TableRef, index: &str) -> bool {
    let d = t.db.read().unwrap();
    let id = d
        .index_by_name(t.entry.object_id, index)
        .and_then(|e| e.index_of.as_ref().map(|i| i.index_id));
    let used = |(_, k): &(&TableEntry, &ForeignKey)| Some(k.key_index_id) == id;
    every_referrer(&d, t.entry.object_id).iter().any(used)
}

/// Msg 547 for `verb` against `l`.
fn conflict(verb: &str, l: &Lookup, db_name: &str, parent_side: bool) -> SqlError {
    let (open, col, close) = match &l.column {
        Some(c) => (", column '", c.as_str(), "'"),
        None => ("", "", ""),
    };
    let kind = if parent_side {
        "REFERENCE"
    } else {
        "FOREIGN KEY"
    };
    msg(
        547,
        &[
            &verb,
            &kind,
            &l.name,
            &db_name,
            &l.other_table,
            &open,
            &col,
            &close,
        ],
    )
}

/// `EXISTS (SELECT 1 FROM db.s.t AS [fk lookup] WITH (hint) WHERE [fk lookup].a =
/// [outer].b AND ...)`, parsed.
fn lookup_expr(
    db_name: &str,
    table: &TableEntry,
    hint: &str,
    pairs: &[(String, String)],
    outer: &str,
) -> Result<Expr, Vec<SqlError>> {
    let alias = bracket("fk lookup");
    let conds: Vec<String> = pairs
        .iter()
        .map(|(inner, o)| {
            format!(
                "{alias}.{} = {}.{}",
                bracket(inner),
                bracket(outer),
                bracket(o)
            )
        })
        .collect();
    let sql = format!(
        "SELECT 1 WHERE EXISTS (SELECT 1 FROM {}.{}.{} AS {alias} WITH ({hint}) WHERE {})",
        bracket(db_name),
        bracket(&table.schema_name),
        bracket(&table.name),
        conds.join(" AND ")
    );
    generated_condition(&sql)
}

/// The WHERE clause of generated `SELECT 1 WHERE ...` text `sql`, parsed (Msg 102 if the
/// text is not that shape).
pub(super) fn generated_condition(sql: &str) -> Result<Expr, Vec<SqlError>> {
    let parsed = parse_batch(sql).map_err(|e| vec![SqlError::from(e)])?;
    let found = parsed.first().and_then(|s| match &s.kind {
        ast::StatementKind::Select(q) => match &q.body {
            ast::QueryBody::Select(s) => s.where_clause.clone(),
            _ => None,
        },
        _ => None,
    });
    found.ok_or_else(|| vec![msg(102, &[&sql])])
}

/// The child side's lookups of `t` (one per key: its parent's rows).
fn child_lookups(db: &Database, t: &TableRef) -> Result<Vec<Lookup>, Vec<SqlError>> {
    let mut out = Vec::new();
    for k in t.entry.foreign_keys.iter().filter(|k| !k.is_disabled) {
        let parent = db
            .table_by_id(k.referenced_object_id)
            .ok_or_else(|| vec![msg(208, &[&k.referenced_object_id])])?;
        let pos = |e: &TableEntry, id| e.columns.iter().position(|c| c.column_id == id).unwrap();
        let pairs: Vec<(String, String)> = k
            .columns
            .iter()
            .map(|&(c, p)| {
                let pc = column_by_id(&parent.columns, p).name.clone();
                (pc, column_by_id(&t.entry.columns, c).name.clone())
            })
            .collect();
        let self_ref = k.referenced_object_id == t.entry.object_id;
        out.push(Lookup {
            name: k.name.clone(),
            positions: k.columns.iter().map(|&(c, _)| pos(&t.entry, c)).collect(),
            own_key: self_ref.then(|| k.columns.iter().map(|&(_, p)| pos(&t.entry, p)).collect()),
            other_table: format!("{}.{}", parent.schema_name, parent.name),
            column: (pairs.len() == 1).then(|| pairs[0].0.clone()),
            exists: lookup_expr(&t.db_name, parent, "REPEATABLEREAD", &pairs, &t.entry.name)?,
            on_delete: ReferentialAction::NoAction,
            on_update: ReferentialAction::NoAction,
        });
    }
    Ok(out)
}

/// The parent side's lookups of `t` (one per key referencing it: its children's rows).
fn parent_lookups(db: &Database, t: &TableRef) -> Result<Vec<Lookup>, Vec<SqlError>> {
    let mut out = Vec::new();
    for (child, k) in referrers(db, t.entry.object_id) {
        let pos = |id| {
            t.entry
                .columns
                .iter()
                .position(|c| c.column_id == id)
                .unwrap()
        };
        let pairs: Vec<(String, String)> = k
            .columns
            .iter()
            .map(|&(c, p)| {
                let cc = column_by_id(&child.columns, c).name.clone();
                (cc, column_by_id(&t.entry.columns, p).name.clone())
            })
            .collect();
        out.push(Lookup {
            name: k.name.clone(),
            positions: k.columns.iter().map(|&(_, p)| pos(p)).collect(),
            own_key: None,
            other_table: format!("{}.{}", child.schema_name, child.name),
            column: (pairs.len() == 1).then(|| pairs[0].0.clone()),
            exists: lookup_expr(
                &t.db_name,
                child,
                "READCOMMITTEDLOCK",
                &pairs,
                &t.entry.name,
            )?,
            on_delete: k.delete_action,
            on_update: k.update_action,
        });
    }
    Ok(out)
}

/// The CREATE TABLE definitions of FOREIGN KEYs, inline and table-level, in order, with
/// the column each inline one is on.
fn definitions(c: &CreateTable) -> Vec<(Option<usize>, &ForeignKeyDefinition)> {
    let mut defs = Vec::new();
    for (i, col) in c.columns.iter().enumerate() {
        defs.extend(col.foreign_keys.iter().map(|k| (Some(i), k)));
    }
    for tc in &c.constraints {
        if let TableConstraint::ForeignKey(k) = tc {
            defs.push((None, k));
        }
    }
    defs
}

impl Session {
    /// CREATE TABLE's FOREIGN KEYs of `entry` (the table being made: its columns, primary
    /// key and CHECK constraints set), checked against their parents.
    pub(super) fn create_table_foreign_keys(
        &mut self,
        c: &CreateTable,
        entry: &TableEntry,
        db: &Arc<extentdb_storage::SharedDatabase>,
    ) -> Result<Vec<ForeignKey>, Vec<SqlError>> {
        let defs = definitions(c);
        if defs.is_empty() {
            return Ok(Vec::new());
        }
        let name = c.name.name();
        if super::temp_tables::is_temporary(name) || name.starts_with('@') {
            return Err(vec![not_yet(
                "FOREIGN KEY constraints on temporary tables and table variables",
            )]);
        }
        let mut made: Vec<ForeignKey> = Vec::new();
        for (i, (own, def)) in defs.into_iter().enumerate() {
            let parent = self.parent_of(def, Some(&entry.name))?;
            let d = db.read().unwrap();
            let taken = |n: &str| {
                super::check_constraints::object_name_taken(&d, n)
                    || n.eq_ignore_ascii_case(&entry.name)
                    || entry.checks.iter().any(|k| k.name.eq_ignore_ascii_case(n))
                    || made.iter().any(|k| k.name.eq_ignore_ascii_case(n))
            };
            let target = KeyTarget {
                child: entry,
                parent: parent.as_ref().map(|p| p.entry.as_ref()),
                taken: &taken,
                salt: entry.created_us as u64 ^ (i as u64) << 48,
                made: &made,
            };
            if parent.as_ref().is_some_and(|p| !Arc::ptr_eq(&p.db, db)) {
                return Err(vec![not_yet("FOREIGN KEY references to another database")]);
            }
            let k = key_entry(&d, &target, own.map(|i| &entry.columns[i]), def)?;
            made.push(k);
        }
        Ok(made)
    }

    /// The parent a definition names: None when it is `own` (the table being created);
    /// 1767 when there is none, 1766 for a temporary table.
    fn parent_of(
        &mut self,
        def: &ForeignKeyDefinition,
        own: Option<&str>,
    ) -> Result<Option<TableRef>, Vec<SqlError>> {
        let n = def.table.name();
        if super::temp_tables::is_temporary(n) || n.starts_with('@') {
            return Err(vec![msg(1766, &[]), msg(1750, &[])]);
        }
        let schema_ok = def
            .table
            .qualifier()
            .is_none_or(|s| s.is_empty() || s.eq_ignore_ascii_case("dbo"));
        if own.is_some_and(|o| o.eq_ignore_ascii_case(n)) && schema_ok {
            return Ok(None);
        }
        let fk_name = def.name.clone().unwrap_or_default();
        match self.find_table(&def.table)? {
            Some(t) if t.variable.is_none() => Ok(Some(t)),
            _ => Err(vec![
                msg(1767, &[&fk_name, &def.table.joined()]),
                msg(1750, &[]),
            ]),
        }
    }

    fn lookups(&self, t: &TableRef, parent_side: bool) -> Result<Arc<Lookups>, Vec<SqlError>> {
        let d = t.db.read().unwrap();
        let version = d.catalog_version();
        if let Some(l) = self.fk_cache.borrow().get(&t.entry, version, parent_side) {
            return Ok(l);
        }
        let lookups = match parent_side {
            true => parent_lookups(&d, t)?,
            false => child_lookups(&d, t)?,
        };
        drop(d);
        let l = Arc::new(Lookups {
            entry: t.entry.clone(),
            catalog_version: version,
            parent_side,
            lookups,
        });
        self.fk_cache.borrow_mut().keep(l.clone());
        Ok(l)
    }

    /// The first of `lookups` that finds no row for `row` (child side: a missing parent)
    /// or finds one (parent side: a referencing child); `set` limits the child side to
    /// keys with an assigned column.
    fn failed_lookup<'l>(
        &mut self,
        l: &'l Lookups,
        t: &TableRef,
        row: &[Value],
        set: Option<&[usize]>,
    ) -> Result<Option<&'l Lookup>, Vec<SqlError>> {
        let columns = t.columns();
        let ctx = RowCtx::single(&columns, row, None, &t.entry.name);
        for k in &l.lookups {
            if set.is_some_and(|s| !k.positions.iter().any(|p| s.contains(p))) {
                continue;
            }
            // The parent side here is DELETE's: a cascading key's rows are acted on.
            if l.parent_side && k.on_delete != ReferentialAction::NoAction {
                continue;
            }
            if k.positions.iter().any(|&p| row[p].is_null()) {
                continue;
            }
            let own = k.own_key.as_ref().is_some_and(|o| {
                let eq = |(&a, &b): (&usize, &usize)| {
                    crate::ops::compare(&row[a], &row[b]).ok().flatten()
                        == Some(std::cmp::Ordering::Equal)
                };
                k.positions.iter().zip(o).all(eq)
            });
            if own {
                continue;
            }
            // The engine's lookup, not the statement's read (index_usage.rs invariant 2).
            let found = self
                .as_engine_read(|s| s.condition_row(&k.exists, Some(&ctx)))
                .map_err(terminated)?;
            if (found == Some(true)) == l.parent_side {
                // Invariant 6: looked up again once the statement's rows are in.
                let deferred = self.deferred_self_references.as_mut();
                let deferred = deferred.filter(|(id, _)| *id == t.entry.object_id);
                if let (Some(_), Some((_, d))) = (&k.own_key, deferred) {
                    d.push(row.to_vec()).map_err(|e| vec![e])?;
                    return Ok(None);
                }
                return Ok(Some(k));
            }
        }
        Ok(None)
    }

    /// Invariant 6: `insert` (an INSERT's rows building and writing into `t`) as one
    /// statement, then each row whose self-referencing key found no parent before looked
    /// up again (547 undoes the statement). Without a self-referencing key, `insert` alone.
    pub(super) fn insert_checking_self_references<R>(
        &mut self,
        t: &TableRef,
        insert: impl FnOnce(&mut Session) -> Result<R, Vec<SqlError>>,
    ) -> Result<R, Vec<SqlError>> {
        let self_referencing = t
            .entry
            .foreign_keys
            .iter()
            .any(|k| !k.is_disabled && k.referenced_object_id == t.entry.object_id);
        if !self_referencing || self.deferred_self_references.is_some() {
            return insert(self);
        }
        let mut result = None;
        self.one_statement(|s| {
            let spool = SortSpill::fifo(&s.spill_dir(), SORT_MEMORY_BYTES);
            s.deferred_self_references = Some((t.entry.object_id, spool));
            let inserted = insert(s);
            let (_, deferred) = s.deferred_self_references.take().expect("set above");
            result = Some(inserted?);
            s.check_deferred(t, deferred)
        })?;
        Ok(result.expect("the statement succeeded"))
    }

    /// The rows `deferred` of an INSERT into `t`, now in the table, looked up again.
    fn check_deferred(&mut self, t: &TableRef, deferred: SortSpill) -> Result<(), Vec<SqlError>> {
        let mut rows = deferred.finish().map_err(|e| vec![e])?;
        let l = self.lookups(t, false)?;
        loop {
            let window = rows.window(COPY_WINDOW).map_err(|e| vec![e])?;
            if window.is_empty() {
                return Ok(());
            }
            for row in window {
                if let Some(k) = self.failed_lookup(&l, t, &row, None)? {
                    return Err(terminated(conflict("INSERT", k, &t.db_name, false)));
                }
            }
        }
    }

    /// Invariant 1: a row an INSERT or UPDATE (`verb`) is about to write into `t`, checked
    /// against `t`'s FOREIGN KEYs (547, then 3621, for the first whose parent is missing).
    pub(super) fn foreign_key_row(
        &mut self,
        t: &TableRef,
        row: &[Value],
        verb: &str,
        set: Option<&[usize]>,
    ) -> Result<(), Vec<SqlError>> {
        if t.entry.foreign_keys.is_empty() {
            return Ok(());
        }
        let l = self.lookups(t, false)?;
        match self.failed_lookup(&l, t, row, set)? {
            Some(k) => Err(terminated(conflict(verb, k, &t.db_name, false))),
            None => Ok(()),
        }
    }

    /// Runs `f` (a parent's writes and then their check) as one statement, so the
    /// check's failure undoes the writes (invariant 3): inside the statement already made
    /// one (MERGE, OUTPUT ... INTO), as part of it.
    pub(super) fn one_statement(
        &mut self,
        f: impl FnOnce(&mut Session) -> Result<(), Vec<SqlError>>,
    ) -> Result<(), Vec<SqlError>> {
        match self.statement_marks.is_some() {
            true => f(self),
            false => self.as_one_statement(f),
        }
    }

    /// Whether any FOREIGN KEY references `t` (the parent side has work).
    pub(super) fn is_referenced(&self, t: &TableRef) -> bool {
        let d = t.db.read().unwrap();
        !referrers(&d, t.entry.object_id).is_empty()
    }

    /// Invariant 3, DELETE: after the rows of `removed` (`[rid, values...]`) are deleted,
    /// their referrers' actions are taken (invariant 4), then none may be referenced
    /// through a NO ACTION key.
    pub(super) fn check_removed_keys(
        &mut self,
        t: &TableRef,
        removed: SortedRows,
    ) -> Result<(), Vec<SqlError>> {
        let mut removed = self.referential_actions(t, removed, true)?;
        let l = self.lookups(t, true)?;
        loop {
            let window = removed.window(COPY_WINDOW).map_err(|e| vec![e])?;
            if window.is_empty() {
                return Ok(());
            }
            for row in &window {
                if let Some(k) = self.failed_lookup(&l, t, &row[1..], None)? {
                    return Err(terminated(conflict("DELETE", k, &t.db_name, true)));
                }
            }
        }
    }

    /// Invariant 3, UPDATE: after the changes of `changed` (`[rid, old..., new...]`) are
    /// made, and their referrers' actions taken (invariant 4), an old key changed that no
    /// parent row holds now may not be referenced through a NO ACTION key.
    pub(super) fn check_changed_keys(
        &mut self,
        t: &TableRef,
        changed: SortedRows,
    ) -> Result<(), Vec<SqlError>> {
        let mut changed = self.referential_actions(t, changed, false)?;
        let l = self.lookups(t, true)?;
        let own = self.parent_key_lookups(t)?;
        let width = t.entry.columns.len();
        loop {
            let window = changed.window(COPY_WINDOW).map_err(|e| vec![e])?;
            if window.is_empty() {
                return Ok(());
            }
            for row in &window {
                let (old, new) = row[1..].split_at(width);
                for (k, still) in l.lookups.iter().zip(&own) {
                    let moved = k.positions.iter().any(|&p| {
                        crate::ops::compare(&old[p], &new[p]).ok().flatten()
                            != Some(std::cmp::Ordering::Equal)
                    });
                    let acted = k.on_update != ReferentialAction::NoAction;
                    if acted || !moved || k.positions.iter().any(|&p| old[p].is_null()) {
                        continue;
                    }
                    let columns = t.columns();
                    let ctx = RowCtx::single(&columns, old, None, &t.entry.name);
                    let held = self.condition_row(still, Some(&ctx)).map_err(terminated)?;
                    let referenced = self
                        .condition_row(&k.exists, Some(&ctx))
                        .map_err(terminated)?;
                    if held != Some(true) && referenced == Some(true) {
                        return Err(terminated(conflict("UPDATE", k, &t.db_name, true)));
                    }
                }
            }
        }
    }

    /// For each referrer of `t` (as `parent_lookups` orders them), whether a row of `t`
    /// still holds the referenced key of the row evaluated.
    fn parent_key_lookups(&self, t: &TableRef) -> Result<Vec<Expr>, Vec<SqlError>> {
        let d = t.db.read().unwrap();
        let mut out = Vec::new();
        for (_, k) in referrers(&d, t.entry.object_id) {
            let pairs: Vec<(String, String)> = k
                .columns
                .iter()
                .map(|&(_, p)| {
                    let n = column_by_id(&t.entry.columns, p).name.clone();
                    (n.clone(), n)
                })
                .collect();
            out.push(lookup_expr(
                &t.db_name,
                &t.entry,
                "READCOMMITTEDLOCK",
                &pairs,
                &t.entry.name,
            )?);
        }
        Ok(out)
    }

    /// ALTER TABLE t [WITH CHECK | WITH NOCHECK] ADD [CONSTRAINT name] FOREIGN KEY ...:
    /// with CHECK (the default) every existing row is checked first (547 and nothing
    /// changes); with NOCHECK the key is not trusted (invariant 5).
    pub(super) fn alter_table_add_foreign_key(
        &mut self,
        name: &ObjectName,
        check_existing: bool,
        def: &ForeignKeyDefinition,
    ) -> Result<(), Vec<SqlError>> {
        let t = self.altered_table(name)?;
        if super::temp_tables::is_temporary(&t.entry.name) || t.variable.is_some() {
            return Err(vec![not_yet(
                "FOREIGN KEY constraints on temporary tables and table variables",
            )]);
        }
        let parent = self.parent_of(def, None)?.expect("no own table at ALTER");
        if !Arc::ptr_eq(&parent.db, &t.db) {
            return Err(vec![not_yet("FOREIGN KEY references to another database")]);
        }
        if parent.entry.object_id != t.entry.object_id {
            self.schema_modification(&parent)?;
        }
        let parent = self.find_table(&def.table)?.ok_or_else(|| {
            vec![msg(
                1767,
                &[&def.name.clone().unwrap_or_default(), &def.table.joined()],
            )]
        })?;
        let no_action = ast::ReferentialAction::NoAction;
        if def.on_delete != no_action || def.on_update != no_action {
            self.lock_cascade_paths(t.db_id)?;
        }
        let mut k = {
            let d = t.db.read().unwrap();
            let taken = |n: &str| super::check_constraints::object_name_taken(&d, n);
            let target = KeyTarget {
                child: &t.entry,
                parent: Some(&parent.entry),
                taken: &taken,
                salt: super::table_ddl::now_us() as u64,
                made: &[],
            };
            key_entry(&d, &target, None, def)?
        };
        k.is_not_trusted = !check_existing;
        if check_existing {
            self.check_existing_children(&t, &k)?;
        }
        t.db.add_foreign_key(t.entry.object_id, k)
            .map_err(|e| match e {
                extentdb_storage::StorageError::TableExists(n) => {
                    vec![msg(2714, &[&n]), msg(1750, &[])]
                }
                e => super::errors::map(&e, super::errors::Context::Other),
            })?;
        Ok(())
    }

    /// WITH CHECK: every row of `t` against the new key `k`; the first without a parent
    /// is 547.
    pub(super) fn check_existing_children(
        &mut self,
        t: &TableRef,
        k: &ForeignKey,
    ) -> Result<(), Vec<SqlError>> {
        let lookups = {
            let d = t.db.read().unwrap();
            let mut entry = (*t.entry).clone();
            entry.foreign_keys = vec![k.clone()];
            let probe = TableRef {
                db_id: t.db_id,
                db: t.db.clone(),
                db_name: t.db_name.clone(),
                entry: Arc::new(entry),
                types: t.types.clone(),
                layouts: t.layouts.clone(),
                computed: t.computed.clone(),
                io: Default::default(),
                variable: None,
                usage: None,
            };
            child_lookups(&d, &probe)?
        };
        let l = Lookups {
            entry: t.entry.clone(),
            catalog_version: 0,
            parent_side: false,
            lookups,
        };
        let mut failed = false;
        t.each_row(Access::Scan, |_, row| {
            failed = self.failed_lookup(&l, t, &row, None)?.is_some();
            Ok(!failed)
        })?;
        match failed {
            true => Err(vec![conflict(
                "ALTER TABLE",
                &l.lookups[0],
                &t.db_name,
                false,
            )]),
            false => Ok(()),
        }
    }
}

/// Copies `rows` (the first `count`) into two spools: one for the writes, one for the
/// parent side's check after them (invariant 3).
pub(super) fn tee(
    dir: &std::path::Path,
    mut rows: SortedRows,
    count: Option<u64>,
) -> Result<(SortedRows, SortedRows), Vec<SqlError>> {
    let one = |e| vec![e];
    let (mut a, mut b) = (
        SortSpill::fifo(dir, SORT_MEMORY_BYTES / 2),
        SortSpill::fifo(dir, SORT_MEMORY_BYTES / 2),
    );
    let mut left = count.map_or(usize::MAX, |c| c as usize);
    while left > 0 {
        let w = rows.window(left.min(COPY_WINDOW)).map_err(one)?;
        if w.is_empty() {
            break;
        }
        left = left.saturating_sub(w.len());
        for r in w {
            b.push(r.clone()).map_err(one)?;
            a.push(r).map_err(one)?;
        }
    }
    Ok((a.finish().map_err(one)?, b.finish().map_err(one)?))
}

fn action_desc(a: ReferentialAction) -> &'static str {
    match a {
        ReferentialAction::NoAction => "NO_ACTION",
        ReferentialAction::Cascade => "CASCADE",
        ReferentialAction::SetNull => "SET_NULL",
        ReferentialAction::SetDefault => "SET_DEFAULT",
    }
}

/// sys.foreign_keys of `db`.
pub(super) fn foreign_keys_view(db: &Database) -> super::views::Rowset {
    let columns = super::views::object_columns(&[
        ("referenced_object_id", SqlType::Int),
        ("key_index_id", SqlType::Int),
        ("is_disabled", SqlType::Bit),
        ("is_not_for_replication", SqlType::Bit),
        ("is_not_trusted", SqlType::Bit),
        ("delete_referential_action", SqlType::TinyInt),
        ("delete_referential_action_desc", SqlType::NVarChar(60)),
        ("update_referential_action", SqlType::TinyInt),
        ("update_referential_action_desc", SqlType::NVarChar(60)),
        ("is_system_named", SqlType::Bit),
    ]);
    let mut rows = Vec::new();
    for t in db.live_tables() {
        let created = Value::DateTime(super::views::ticks_from_unix_us(t.created_us));
        for k in &t.foreign_keys {
            rows.push(vec![
                text(&k.name),
                Value::Int(k.object_id as i32),
                Value::Null,
                Value::Int(1),
                Value::Int(t.object_id as i32),
                text("F "),
                text("FOREIGN_KEY_CONSTRAINT"),
                created.clone(),
                created.clone(),
                Value::Bit(false),
                Value::Bit(false),
                Value::Bit(false),
                Value::Int(k.referenced_object_id as i32),
                Value::Int(k.key_index_id as i32),
                Value::Bit(k.is_disabled),
                Value::Bit(false),
                Value::Bit(k.is_not_trusted),
                Value::TinyInt(k.delete_action as u8),
                text(action_desc(k.delete_action)),
                Value::TinyInt(k.update_action as u8),
                text(action_desc(k.update_action)),
                Value::Bit(k.is_system_named),
            ]);
        }
    }
    super::views::Rowset { columns, rows }
}

/// sys.foreign_key_columns of `db`.
pub(super) fn foreign_key_columns_view(db: &Database) -> super::views::Rowset {
    let columns = cols(&[
        ("constraint_object_id", SqlType::Int),
        ("constraint_column_id", SqlType::Int),
        ("parent_object_id", SqlType::Int),
        ("parent_column_id", SqlType::Int),
        ("referenced_object_id", SqlType::Int),
        ("referenced_column_id", SqlType::Int),
    ]);
    let mut rows = Vec::new();
    for t in db.live_tables() {
        for k in &t.foreign_keys {
            for (i, &(child, parent)) in k.columns.iter().enumerate() {
                rows.push(vec![
                    Value::Int(k.object_id as i32),
                    Value::Int(i as i32 + 1),
                    Value::Int(t.object_id as i32),
                    Value::Int(child as i32),
                    Value::Int(k.referenced_object_id as i32),
                    Value::Int(parent as i32),
                ]);
            }
        }
    }
    super::views::Rowset { columns, rows }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Generated names have SQL Server's shape: FK__, up to 8 characters of the table,
    /// up to 5 of the first column, 8 hex digits; each creation differs.
    #[test]
    fn generated_names_have_sql_servers_shape() {
        let a = generated_name("OrderLines", "OrderId", 1);
        assert!(a.starts_with("FK__OrderLin__Order__"), "{a}");
        assert_eq!(a.len(), "FK__OrderLin__Order__".len() + 8);
        assert_ne!(generated_name("t", "c", 1), generated_name("t", "c", 2));
    }

    /// A generated lookup parses to one EXISTS over the named table.
    #[test]
    fn lookups_parse_to_exists() {
        let t = TableEntry {
            object_id: 5,
            schema_name: "dbo".into(),
            name: "par]ent".into(),
            created_us: 0,
            data_space_id: 1,
            allocation_unit_id: 0,
            index_id: 1,
            root_page: extentdb_format::PageId::NULL,
            primary_key: None,
            columns: Vec::new(),
            identity_last: extentdb_format::catalog::IdentityLast::Unused,
            lock_escalation: Default::default(),
            pending_ddl: None,
            index_of: None,
            checks: Vec::new(),
            foreign_keys: Vec::new(),
            is_disabled: false,
        };
        let pairs = vec![("id".to_string(), "pid".to_string())];
        let e = lookup_expr("db", &t, "REPEATABLEREAD", &pairs, "child").unwrap();
        assert!(matches!(e, Expr::Exists(_)), "{e:?}");
    }
}
