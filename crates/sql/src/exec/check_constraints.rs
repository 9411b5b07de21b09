//! CHECK constraints: their definitions checked at CREATE TABLE and ALTER TABLE ... ADD,
//! their enforcement on every row INSERT, UPDATE and MERGE write, ALTER TABLE ... DROP
//! CONSTRAINT, and sys.check_constraints.
//!
//! The catalog keeps a constraint's expression as text (storage's constraint.rs, FORMAT.md
//! "Catalog" version 10): rendered from the parsed expression by `expr_text` inside one
//! pair of parentheses, as SQL Server's `definition` shows it (`([qty]>(0))`), not the
//! characters the user typed. It is parsed again when a statement first needs it, and the
//! parsed form is kept per table entry in the session (`CheckCache`).
//!
//! Invariants:
//! 1. A row is refused (Msg 547) only when a constraint's expression is FALSE: UNKNOWN
//!    (a NULL operand) passes, as in SQL Server. The check runs where NOT NULL (Msg 515)
//!    is checked, `new_row` for INSERT (and MERGE's INSERT, OUTPUT ... INTO) and
//!    `updated_row_in` for UPDATE (and MERGE's UPDATE), so every writer path has it, before
//!    any write of the statement; a failure mid-statement is undone by the statement's
//!    rollback.
//! 2. A definition references only its table's columns (207), a column constraint only
//!    its own column (8141), no subquery (1046). Aggregates, window functions, variables,
//!    user functions and IDENTITY columns (whose generated value is not known when the row
//!    is checked) are refused with 40517: never accepted and left unenforced.
//! 3. A constraint's `column_id` (sys.check_constraints.parent_column_id, and the column
//!    Msg 547 names) is the column of a column-level constraint, or the one column a
//!    table-level constraint references (as SQL Server does); 0 for a table-level one
//!    over several columns or none.
//! 4. ALTER TABLE ... ADD CHECK and DROP CONSTRAINT run outside transactions (refused in
//!    one: 40517, as every ALTER TABLE here) under the table's Sch-M lock, so WITH CHECK's
//!    scan of the existing rows sees no other session's open change and no row arrives
//!    between the scan and the catalog change.
//! 5. A writer checks its rows against the constraints of the catalog while it holds the
//!    table's intent lock, which no ALTER's Sch-M is granted beside. Every writer resolves
//!    its table, takes the lock, and resolves it again when its constraints changed
//!    before the lock was granted (`checks_unchanged`), before computing a row: INSERT and
//!    UPDATE (`write_target`), UPDATE ... FROM (dml_from.rs `update_target`), MERGE
//!    (merge.rs `merge_target`), a cascade's children (referential_actions.rs
//!    `cascades`), and INSERT ... EXEC once more after its source ran, whose own
//!    statements release the lock outside a transaction (dml.rs `exec_target`).
//!
//! FOREIGN KEY constraints are foreign_keys.rs's; `check_row` runs their child side.
//!
//! Enabling and disabling a constraint (NOCHECK CONSTRAINT / CHECK CONSTRAINT) is
//! constraint_state.rs's: a disabled constraint is not among a table's rules
//! (`table_rules`).
//!
//! Not here: NOT FOR REPLICATION: refused at parse (40517).

use std::sync::Arc;

use extentdb_format::catalog::{CheckConstraint, ColumnEntry, TableEntry};
use extentdb_storage::Database;

use super::aggregate::{contains_aggregate, map_expr};
use super::dml::terminated;
use super::eval::RowCtx;
use super::locking::{RowLocking, Writer};
use super::lower::not_yet;
use super::tables::{Access, TableRef};
use super::views::{cols, text, SYSNAME};
use super::Session;
use crate::ast::{CheckDefinition, CreateTable, Expr, ObjectName, StatementKind, TableConstraint};
use crate::messages::{msg, SqlError};
use crate::parser::parse_batch;
use crate::types::{SqlType, Value};

/// How many tables' parsed constraints a session keeps.
const CACHE_TABLES: usize = 16;

/// One constraint ready to evaluate.
pub(super) struct CheckRule {
    name: String,
    /// The column Msg 547 names (invariant 3).
    column: Option<String>,
    /// Positions of the columns the expression reads: an UPDATE that sets none of them
    /// does not check it, as SQL Server does (a row kept from before WITH NOCHECK stays
    /// updatable in its other columns).
    reads: Vec<usize>,
    expr: Expr,
}

/// A table entry's parsed constraints with the row header they evaluate over.
pub(super) struct TableRules {
    entry: Arc<TableEntry>,
    columns: Vec<(String, SqlType)>,
    rules: Vec<CheckRule>,
}

/// A session's parsed constraints, by table entry (the `Arc` the table cache shares, so a
/// catalog change, which makes a new entry, makes them parsed again).
#[derive(Default)]
pub(super) struct CheckCache {
    tables: Vec<Arc<TableRules>>,
}

impl CheckCache {
    fn get(&self, entry: &Arc<TableEntry>) -> Option<Arc<TableRules>> {
        let found = self.tables.iter().find(|r| Arc::ptr_eq(&r.entry, entry));
        found.cloned()
    }

    fn keep(&mut self, rules: Arc<TableRules>) {
        if self.tables.len() >= CACHE_TABLES {
            self.tables.remove(0);
        }
        self.tables.push(rules);
    }
}

/// The name SQL Server gives an unnamed CHECK constraint: `CK__` + up to 8 characters of
/// the table name + `__` (+ up to 5 of the column's + `__` for a column constraint) + 8
/// hex digits, unique per creation.
fn generated_name(table: &str, column: Option<&str>, salt: u64) -> String {
    let short: String = table.chars().take(8).collect();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in table.bytes().chain(salt.to_le_bytes()) {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    let h = (h ^ (h >> 32)) as u32;
    match column {
        Some(c) => {
            let c: String = c.chars().take(5).collect();
            format!("CK__{short}__{c}__{h:08X}")
        }
        None => format!("CK__{short}__{h:08X}"),
    }
}

/// Whether `name` is already an object of `db`: a table, a PRIMARY KEY or UNIQUE
/// constraint, a CHECK or a FOREIGN KEY constraint.
pub(super) fn object_name_taken(db: &Database, name: &str) -> bool {
    db.catalog.tables.iter().any(|t| {
        let is = |n: &str| n.eq_ignore_ascii_case(name);
        let own = match &t.index_of {
            None => is(&t.name),
            Some(ix) => ix.unique_constraint && is(&t.name),
        };
        own || t.primary_key.as_ref().is_some_and(|(n, _)| is(n))
            || t.checks.iter().any(|k| is(&k.name))
            || t.foreign_keys.iter().any(|k| is(&k.name))
    })
}

/// The columns a definition references, checked (invariant 2): their ids, in order of
/// first reference.
fn referenced_columns(
    table: &str,
    columns: &[ColumnEntry],
    e: &Expr,
) -> Result<Vec<u16>, Vec<SqlError>> {
    if contains_aggregate(e) {
        return Err(vec![not_yet("aggregates in a CHECK constraint")]);
    }
    let mut ids: Vec<u16> = Vec::new();
    let mut refused: Option<Vec<SqlError>> = None;
    let _ = map_expr(e, &mut |x| {
        let bad = match x {
            Expr::Subquery(_) | Expr::Exists(_) | Expr::InSubquery { .. } => {
                vec![msg(1046, &[])]
            }
            Expr::Window(_) => vec![not_yet("window functions in a CHECK constraint")],
            Expr::Variable(_) => vec![not_yet("variables in a CHECK constraint")],
            Expr::Default => vec![msg(102, &[&"DEFAULT"])],
            Expr::Function { name, .. } if name.parts.len() > 1 => {
                vec![not_yet("user-defined functions in a CHECK constraint")]
            }
            Expr::Column(n) => match column_of(table, columns, n) {
                Ok(c) if c.identity.is_some() => {
                    vec![not_yet("CHECK constraints on an IDENTITY column")]
                }
                Ok(c) => {
                    if !ids.contains(&c.column_id) {
                        ids.push(c.column_id);
                    }
                    return Ok(None);
                }
                Err(e) => vec![e],
            },
            _ => return Ok(None),
        };
        refused = Some(bad);
        Err(msg(0, &[]))
    });
    match refused {
        Some(e) => Err(e),
        None => Ok(ids),
    }
}

/// The column a reference names: unqualified, or qualified by the table's own name.
pub(super) fn column_of<'a>(
    table: &str,
    columns: &'a [ColumnEntry],
    n: &ObjectName,
) -> Result<&'a ColumnEntry, SqlError> {
    let qualified_elsewhere = n
        .qualifier()
        .is_some_and(|q| !q.is_empty() && !q.eq_ignore_ascii_case(table));
    let found = columns
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(n.name()));
    match found {
        Some(c) if !qualified_elsewhere => Ok(c),
        _ => Err(msg(207, &[&n.joined()])),
    }
}

/// The stored text of an expression: one pair of parentheses around `expr_text`'s form (a
/// computed column's definition too, computed_columns.rs).
pub(super) fn definition_text(e: &Expr) -> Result<String, Vec<SqlError>> {
    let t = super::expr_text::expr(e)
        .ok_or_else(|| vec![not_yet("this expression in a CHECK constraint")])?;
    let wrapped = matches!(
        e,
        Expr::Binary { .. }
            | Expr::Like { .. }
            | Expr::InList { .. }
            | Expr::Between { .. }
            | Expr::IsNull { .. }
    );
    Ok(if wrapped { t } else { format!("({t})") })
}

/// One definition checked against its table's `columns` (`own`: the column of an inline
/// constraint) and made a catalog entry (object id 0: storage numbers it). `taken` says
/// whether a name is already an object (2714).
pub(super) fn check_entry(
    table: &str,
    columns: &[ColumnEntry],
    own: Option<&ColumnEntry>,
    def: &CheckDefinition,
    taken: &dyn Fn(&str) -> bool,
    salt: u64,
) -> Result<CheckConstraint, Vec<SqlError>> {
    let ids = referenced_columns(table, columns, &def.expr)?;
    if let Some(c) = own {
        if ids.iter().any(|&id| id != c.column_id) {
            return Err(vec![msg(8141, &[&c.name, &table])]);
        }
    }
    let column_id = match (own, ids.as_slice()) {
        (Some(c), _) => c.column_id,
        (None, [only]) => *only,
        _ => 0,
    };
    let name = match &def.name {
        Some(n) => n.clone(),
        None => generated_name(table, own.map(|c| c.name.as_str()), salt),
    };
    if taken(&name) {
        return Err(vec![msg(2714, &[&name]), msg(1750, &[])]);
    }
    Ok(CheckConstraint {
        object_id: 0,
        name,
        column_id,
        is_disabled: false,
        is_not_trusted: false,
        is_system_named: def.name.is_none(),
        definition: definition_text(&def.expr)?,
    })
}

/// CREATE TABLE's CHECK constraints, inline and table-level, in declaration order.
pub(super) fn create_table_checks(
    db: &Database,
    c: &CreateTable,
    table: &str,
    columns: &[ColumnEntry],
    created_us: i64,
) -> Result<Vec<CheckConstraint>, Vec<SqlError>> {
    let mut defs: Vec<(Option<&ColumnEntry>, &CheckDefinition)> = Vec::new();
    for (def, entry) in c.columns.iter().zip(columns) {
        defs.extend(def.checks.iter().map(|k| (Some(entry), k)));
    }
    for tc in &c.constraints {
        if let TableConstraint::Check(k) = tc {
            defs.push((None, k));
        }
    }
    let mut made: Vec<CheckConstraint> = Vec::with_capacity(defs.len());
    for (i, (own, def)) in defs.into_iter().enumerate() {
        let taken = |n: &str| {
            object_name_taken(db, n)
                || n.eq_ignore_ascii_case(table)
                || made.iter().any(|k| k.name.eq_ignore_ascii_case(n))
        };
        let salt = created_us as u64 ^ (i as u64) << 48;
        let k = check_entry(table, columns, own, def, &taken, salt)?;
        made.push(k);
    }
    Ok(made)
}

/// The expression of a stored definition, parsed again.
pub(super) fn parse_definition(text: &str) -> Result<Expr, SqlError> {
    let parsed = parse_batch(&format!("SELECT {text}")).map_err(SqlError::from)?;
    match parsed.first().map(|s| &s.kind) {
        Some(StatementKind::Select(q)) => match &q.body {
            crate::ast::QueryBody::Select(s) => match s.items.first() {
                Some(crate::ast::SelectItem::Expr { expr, .. }) => Ok(expr.clone()),
                _ => Err(msg(102, &[&text])),
            },
            _ => Err(msg(102, &[&text])),
        },
        _ => Err(msg(102, &[&text])),
    }
}

fn table_rules(t: &TableRef) -> Result<TableRules, Vec<SqlError>> {
    let mut rules = Vec::with_capacity(t.entry.checks.len());
    for k in t.entry.checks.iter().filter(|k| !k.is_disabled) {
        let column = t
            .entry
            .columns
            .iter()
            .find(|c| c.column_id == k.column_id && k.column_id != 0)
            .map(|c| c.name.clone());
        let expr = parse_definition(&k.definition).map_err(|e| vec![e])?;
        let reads = referenced_columns(&t.entry.name, &t.entry.columns, &expr)?
            .into_iter()
            .filter_map(|id| t.entry.columns.iter().position(|c| c.column_id == id))
            .collect();
        rules.push(CheckRule {
            name: k.name.clone(),
            column,
            reads,
            expr,
        });
    }
    Ok(TableRules {
        entry: t.entry.clone(),
        columns: t.columns(),
        rules,
    })
}

/// Msg 547 for a row `verb` (INSERT, UPDATE, ALTER TABLE) would leave against `rule`.
fn conflict(verb: &str, rule: &CheckRule, t: &TableRef) -> SqlError {
    let (open, col, close) = match &rule.column {
        Some(c) => (", column '", c.as_str(), "'"),
        None => ("", "", ""),
    };
    msg(
        547,
        &[
            &verb,
            &"CHECK",
            &rule.name,
            &t.db_name,
            &t.two_part(),
            &open,
            &col,
            &close,
        ],
    )
}

impl Session {
    /// `t`'s constraints parsed, from the session's cache when its entry is the same.
    fn check_rules(&self, t: &TableRef) -> Result<Arc<TableRules>, Vec<SqlError>> {
        if let Some(r) = self.check_cache.borrow().get(&t.entry) {
            return Ok(r);
        }
        let r = Arc::new(table_rules(t)?);
        self.check_cache.borrow_mut().keep(r.clone());
        Ok(r)
    }

    /// The first of `rules` that `row` makes FALSE (invariant 1: UNKNOWN passes); with
    /// `set`, only those reading one of those columns.
    fn failed_rule<'r>(
        &mut self,
        rules: &'r TableRules,
        t: &TableRef,
        row: &[Value],
        set: Option<&[usize]>,
    ) -> Result<Option<&'r CheckRule>, SqlError> {
        let ctx = RowCtx::single(&rules.columns, row, None, &t.entry.name);
        let wanted = |r: &CheckRule| set.is_none_or(|s| r.reads.iter().any(|c| s.contains(c)));
        for r in rules.rules.iter().filter(|r| wanted(r)) {
            if self.condition_row(&r.expr, Some(&ctx))? == Some(false) {
                return Ok(Some(r));
            }
        }
        Ok(None)
    }

    /// Checks a row an INSERT or UPDATE (`verb`) is about to write against `t`'s CHECK
    /// constraints: Msg 547 (then 3621) for the first it makes FALSE. `set`: the columns
    /// an UPDATE assigns (None for an INSERT: every constraint).
    pub(super) fn check_row(
        &mut self,
        t: &TableRef,
        row: &[Value],
        verb: &str,
        set: Option<&[usize]>,
    ) -> Result<(), Vec<SqlError>> {
        if !t.entry.checks.is_empty() {
            let rules = self.check_rules(t)?;
            if let Some(r) = self.failed_rule(&rules, t, row, set).map_err(terminated)? {
                return Err(terminated(conflict(verb, r, t)));
            }
        }
        // FOREIGN KEYs are checked where CHECKs are (foreign_keys.rs invariant 1).
        self.foreign_key_row(t, row, verb, set)
    }

    /// Invariant 5: the table an INSERT or UPDATE writes, locked as the statement locks it
    /// with its table `hints` (INSERT's IX included), and resolved again when its
    /// constraints changed before the lock was granted. Its constraints stay these until
    /// the statement ends; the statement goes on with the returned locking
    /// (`WriteLock::Held`).
    pub(super) fn write_target(
        &mut self,
        name: &ObjectName,
        writer: Writer,
        hints: &[String],
    ) -> Result<(TableRef, RowLocking), Vec<SqlError>> {
        let mut t = self.table_for(name, writer.permission())?;
        loop {
            let locking = self.row_locking(&t, true, hints)?;
            if writer == Writer::Insert {
                locking.table_intent()?;
            }
            if self.checks_unchanged(&t) {
                return Ok((t, locking));
            }
            // Changed before the lock: once it is held, the next round finds them equal.
            t = self.table_for(name, writer.permission())?;
        }
    }

    /// Invariant 5: whether `t`'s constraints are still those of the catalog; asked
    /// holding `t`'s intent lock, before computing a row.
    pub(super) fn checks_unchanged(&self, t: &TableRef) -> bool {
        let d = t.db.read().unwrap();
        // A table gone meanwhile is storage's to report when the write reaches it.
        !d.table_by_id(t.entry.object_id).is_some_and(|now| {
            now.checks != t.entry.checks || now.foreign_keys != t.entry.foreign_keys
        })
    }

    /// ALTER TABLE t [WITH CHECK | WITH NOCHECK] ADD [CONSTRAINT name] CHECK (expr):
    /// with CHECK (the default) every existing row is checked first (547 and nothing
    /// changes); with NOCHECK the constraint is not trusted (invariant 4).
    pub(super) fn alter_table_add_check(
        &mut self,
        name: &ObjectName,
        check_existing: bool,
        def: &CheckDefinition,
    ) -> Result<(), Vec<SqlError>> {
        let t = self.altered_table(name)?;
        let salt = super::table_ddl::now_us() as u64;
        let mut k = {
            let d = t.db.read().unwrap();
            let taken = |n: &str| object_name_taken(&d, n);
            check_entry(&t.entry.name, &t.entry.columns, None, def, &taken, salt)?
        };
        k.is_not_trusted = !check_existing;
        if check_existing {
            self.check_existing_rows(&t, existing_rule(&t, &k, def.expr.clone()))?;
        }
        // A name another session took meanwhile: 2714 from storage (its invariant 2).
        t.db.add_check_constraint(t.entry.object_id, k)
            .map_err(|e| match e {
                extentdb_storage::StorageError::TableExists(n) => {
                    vec![msg(2714, &[&n]), msg(1750, &[])]
                }
                e => super::errors::map(&e, super::errors::Context::Other),
            })?;
        Ok(())
    }

    /// The table an ALTER TABLE changes, resolved again under its Sch-M lock (4902 when
    /// there is none, or when the caller may not alter it); refused in a transaction.
    pub(super) fn altered_table(&mut self, name: &ObjectName) -> Result<TableRef, Vec<SqlError>> {
        let gone = || vec![msg(4902, &[&name.joined()])];
        let t = self.find_table(name)?.ok_or_else(gone)?;
        self.require_table_alter(&t, gone().remove(0))?;
        self.refuse_in_transaction("ALTER TABLE")?;
        self.schema_modification(&t)?;
        // Resolved again: the definition may have changed while the lock was waited for.
        let again = self.find_table(name)?.ok_or_else(gone)?;
        if again.entry.object_id != t.entry.object_id {
            return Err(gone());
        }
        Ok(again)
    }

    /// ALTER TABLE ... WITH CHECK CHECK CONSTRAINT: every row of `t` against its CHECK
    /// constraint `k` (547 on the first it makes FALSE).
    pub(super) fn check_existing_constraint(
        &mut self,
        t: &TableRef,
        k: &CheckConstraint,
    ) -> Result<(), Vec<SqlError>> {
        let expr = parse_definition(&k.definition).map_err(|e| vec![e])?;
        self.check_existing_rows(t, existing_rule(t, k, expr))
    }

    /// WITH CHECK: every row of `t` against `rule`; the first it makes FALSE is 547.
    fn check_existing_rows(&mut self, t: &TableRef, rule: CheckRule) -> Result<(), Vec<SqlError>> {
        let rules = TableRules {
            entry: t.entry.clone(),
            columns: t.columns(),
            rules: vec![rule],
        };
        let mut failed = false;
        t.each_row(Access::Scan, |_, row| {
            failed = self
                .failed_rule(&rules, t, &row, None)
                .map_err(|e| vec![e])?
                .is_some();
            Ok(!failed)
        })?;
        match failed {
            true => Err(vec![conflict("ALTER TABLE", &rules.rules[0], t)]),
            false => Ok(()),
        }
    }

    /// ALTER TABLE t DROP [CONSTRAINT] [IF EXISTS] name [, ...]: every name is found
    /// before any is dropped, so a missing one (3728, 3727) changes nothing.
    pub(super) fn alter_table_drop_constraints(
        &mut self,
        name: &ObjectName,
        if_exists: bool,
        names: &[String],
    ) -> Result<(), Vec<SqlError>> {
        let t = self.altered_table(name)?;
        let mut ids = Vec::with_capacity(names.len());
        let mut fk_ids = Vec::new();
        for n in names {
            let is = |x: &str| x.eq_ignore_ascii_case(n);
            if let Some(k) = t.entry.checks.iter().find(|k| is(&k.name)) {
                ids.push(k.object_id);
                continue;
            }
            if let Some(k) = t.entry.foreign_keys.iter().find(|k| is(&k.name)) {
                fk_ids.push(k.object_id);
                continue;
            }
            let d = t.db.read().unwrap();
            let key_constraint = d.catalog.tables.iter().any(|x| {
                x.primary_key.as_ref().is_some_and(|(k, _)| is(k))
                    || x.index_of.as_ref().is_some_and(|ix| ix.unique_constraint) && is(&x.name)
            });
            if key_constraint {
                return Err(vec![not_yet(
                    "ALTER TABLE ... DROP CONSTRAINT of a PRIMARY KEY or UNIQUE constraint",
                )]);
            }
            if !if_exists {
                return Err(vec![msg(3728, &[n]), msg(3727, &[])]);
            }
        }
        for id in ids {
            t.db.drop_check_constraint(t.entry.object_id, id)
                .map_err(|e| super::errors::map(&e, super::errors::Context::Other))?;
        }
        for id in fk_ids {
            t.db.drop_foreign_key(t.entry.object_id, id)
                .map_err(|e| super::errors::map(&e, super::errors::Context::Other))?;
        }
        Ok(())
    }
}

/// sys.check_constraints of `db`.
pub(super) fn check_constraints_view(db: &Database) -> super::views::Rowset {
    let columns = cols(&[
        ("name", SYSNAME),
        ("object_id", SqlType::Int),
        ("principal_id", SqlType::Int),
        ("schema_id", SqlType::Int),
        ("parent_object_id", SqlType::Int),
        ("type", SqlType::Char(2)),
        ("type_desc", SqlType::NVarChar(60)),
        ("is_disabled", SqlType::Bit),
        ("is_not_trusted", SqlType::Bit),
        ("parent_column_id", SqlType::Int),
        ("definition", SqlType::NVarChar(crate::types::MAX_LENGTH)),
        ("is_system_named", SqlType::Bit),
    ]);
    let mut rows = Vec::new();
    for t in db.live_tables() {
        for k in &t.checks {
            rows.push(vec![
                text(&k.name),
                Value::Int(k.object_id as i32),
                Value::Null,
                Value::Int(1),
                Value::Int(t.object_id as i32),
                text("C "),
                text("CHECK_CONSTRAINT"),
                Value::Bit(k.is_disabled),
                Value::Bit(k.is_not_trusted),
                Value::Int(k.column_id as i32),
                text(&k.definition),
                Value::Bit(k.is_system_named),
            ]);
        }
    }
    super::views::Rowset { columns, rows }
}

/// Constraint `k` of `t` (its definition parsed as `expr`) as the rule WITH CHECK tests
/// every existing row against.
fn existing_rule(t: &TableRef, k: &CheckConstraint, expr: Expr) -> CheckRule {
    CheckRule {
        reads: Vec::new(),
        name: k.name.clone(),
        column: t
            .entry
            .columns
            .iter()
            .find(|c| c.column_id == k.column_id)
            .map(|c| c.name.clone()),
        expr,
    }
}

/// sys.objects of `db`: its user tables (U), CHECK constraints (C) and FOREIGN KEY
/// constraints (F). PRIMARY KEY and
/// UNIQUE constraints have no object ids of their own here and are not listed.
pub(super) fn objects_view(db: &Database) -> super::views::Rowset {
    let columns = cols(&[
        ("name", SYSNAME),
        ("object_id", SqlType::Int),
        ("principal_id", SqlType::Int),
        ("schema_id", SqlType::Int),
        ("parent_object_id", SqlType::Int),
        ("type", SqlType::Char(2)),
        ("type_desc", SqlType::NVarChar(60)),
        ("create_date", SqlType::DateTime),
        ("is_ms_shipped", SqlType::Bit),
    ]);
    let mut rows = Vec::new();
    for t in db.live_tables() {
        let created = Value::DateTime(super::views::ticks_from_unix_us(t.created_us));
        let row = |name: &str, id: u32, parent: u32, ty: &str, desc: &str| {
            vec![
                text(name),
                Value::Int(id as i32),
                Value::Null,
                Value::Int(1),
                Value::Int(parent as i32),
                text(ty),
                text(desc),
                created.clone(),
                Value::Bit(false),
            ]
        };
        rows.push(row(&t.name, t.object_id, 0, "U ", "USER_TABLE"));
        for k in &t.checks {
            rows.push(row(
                &k.name,
                k.object_id,
                t.object_id,
                "C ",
                "CHECK_CONSTRAINT",
            ));
        }
        for k in &t.foreign_keys {
            let desc = "FOREIGN_KEY_CONSTRAINT";
            rows.push(row(&k.name, k.object_id, t.object_id, "F ", desc));
        }
    }
    let procedures = db.catalog.modules.iter();
    rows.extend(procedures.map(super::procedure_views::object_row));
    super::views::Rowset { columns, rows }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Generated names have SQL Server's shape: CK__, up to 8 characters of the table,
    /// up to 5 of the column for a column constraint, 8 hex digits; each creation differs.
    #[test]
    fn generated_names_have_sql_servers_shape() {
        let a = generated_name("OrderLines", Some("Quantity"), 1);
        assert!(a.starts_with("CK__OrderLin__Quant__"), "{a}");
        assert_eq!(a.len(), "CK__OrderLin__Quant__".len() + 8);
        let b = generated_name("OrderLines", None, 2);
        assert!(b.starts_with("CK__OrderLin__"), "{b}");
        assert_eq!(b.len(), "CK__OrderLin__".len() + 8);
        assert_ne!(
            generated_name("t", None, 1),
            generated_name("t", None, 2),
            "a different creation, a different name"
        );
    }

    /// A definition is stored in one pair of parentheses and parses back to the same
    /// stored text.
    #[test]
    fn definitions_round_trip() {
        for (sql, stored) in [
            ("qty > 0", "([qty]>(0))"),
            ("a BETWEEN 1 AND 9", "([a] BETWEEN (1) AND (9))"),
            ("LEN(code) = 3", "(len([code])=(3))"),
            ("code LIKE 'A%'", "([code] LIKE 'A%')"),
        ] {
            let e = parse_definition(sql).unwrap();
            assert_eq!(definition_text(&e).unwrap(), stored, "{sql}");
            let back = parse_definition(stored).unwrap();
            assert_eq!(definition_text(&back).unwrap(), stored, "{sql}");
        }
    }
}
