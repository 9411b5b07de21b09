//! Computed columns: `name AS expression [PERSISTED [NOT NULL]]` in CREATE TABLE (and a
//! table variable's declaration), their definitions checked and typed, and their values
//! computed: a PERSISTED one's by every writer, stored in the record; one not PERSISTED by
//! every read, in no record.
//!
//! The catalog keeps a definition as text (`ColumnEntry::computed`, FORMAT.md "Catalog"
//! version 12), rendered and parsed again as a CHECK constraint's is
//! (check_constraints.rs `definition_text`, `parse_definition`): SQL Server's
//! `sys.computed_columns.definition` form, `([a]+[b])`. The parsed form (`ComputedPlan`)
//! is made when a name is resolved and kept with the resolved entry (table_cache.rs), so a
//! catalog change parses it again. Both kinds are evaluated by one function, `evaluate`,
//! which needs no session (a row is decoded where no session is at hand) and admits only
//! invariant 3's forms.
//!
//! Invariants:
//! 1. Every computed value a writer holds is its definition's over the row's other
//!    columns: computed in `new_row` for INSERT (and MERGE's INSERT, OUTPUT ... INTO),
//!    after the given values and defaults are in place, and in `updated_row_in` for UPDATE
//!    (and MERGE's UPDATE, UPDATE ... FROM) whenever a column it reads is set; both before
//!    NOT NULL (515) and CHECK checks (a CHECK may read a computed column; an UPDATE
//!    recomputing one checks the constraints reading it) and before any write, so OUTPUT
//!    inserted sees them. An error while computing (8134 divide by zero, 8115 overflow) is
//!    the statement's. For a column not PERSISTED this is stricter than SQL Server, which
//!    computes it only when read: a row whose value cannot be computed is refused when
//!    written, so that no later read (nor the DELETE or UPDATE of that row) fails on it.
//! 2. No writer names a computed column: INSERT's column list and UPDATE's SET refuse it
//!    (271, `refuse_target`), and INSERT without a column list gives values for the other
//!    columns only (`insert_targets`).
//! 3. A definition reads only its table's columns (207), none of them computed (1759) or
//!    IDENTITY (whose value is generated after the row is computed: 40517); no subquery
//!    (1046); a PERSISTED one is deterministic (4936; one not PERSISTED may not be, and is
//!    computed with the clock at each read). Its type is the expression's, derived
//!    without a row (`expr_type`): an expression whose type is not derived here is refused
//!    (40517), never typed from a value.
//! 4. A nonclustered index may hold a computed column (CREATE INDEX, key or INCLUDE), as
//!    SQL Server allows: a PERSISTED one always (it was deterministic when made, 4936);
//!    one not PERSISTED when its definition is deterministic (else 2729, key or INCLUDE)
//!    and, as a key, precise: no float or real anywhere in it (else 2799; `check_indexable`).
//!    A PERSISTED column's index records copy its stored value; one not PERSISTED has its
//!    value computed from the base row wherever storage projects an index record (storage
//!    index.rs invariant 9, through this crate's computed_values.rs: row operations,
//!    index builds, lookups, CHECKDB), by `evaluate`, the function every read computes it
//!    with. So the row operations keep the index (an UPDATE of a column the definition
//!    reads changes the record it projects), a WHERE naming the column seeks through it,
//!    and DBCC CHECKDB compares its rows with the values computed again (8951 / 8955).
//!    CHECKDB also computes every PERSISTED column's value again from its row and
//!    compares it with the stored one (2537, "valid computed column"; storage check_db.rs).
//! 5. A column not PERSISTED has no place in the record (storage's `layouts`,
//!    `stored_columns`, `stored_position`): `TableRef::encode` leaves it out and
//!    `TableRef::decode` computes it (`ComputedPlan::compute_virtual`), so every read of
//!    the table, whatever its form, sees it.
//!
//! Not here yet (refused, 40517): ALTER TABLE ... ADD of a computed column, PRIMARY KEY,
//! UNIQUE and FOREIGN KEY constraints on a computed column, a seek by the definition's
//! expression written out instead of the column's name, aggregates, window functions,
//! variables, CASE and user functions in a definition. Determinism is judged by the
//! functions called (`NONDETERMINISTIC`), not by a conversion's style (SQL Server also
//! calls some CONVERT styles of dates non-deterministic).

use extentdb_format::catalog::{ColumnEntry, ComputedColumn, TableEntry};

use super::aggregate::{contains_aggregate, map_expr};
use super::check_constraints::{definition_text, parse_definition};
use super::dml::terminated;
use super::lower::not_yet;
use super::tables::{column_type, TableRef};
use super::Session;
use crate::ast::{BinaryOp, ColumnDefinition, Expr, Literal, ObjectName, UnaryOp};
use crate::convert::{decimal_shape, fit_decimal, result_type};
use crate::messages::{msg, SqlError};
use crate::rowcodec;
use crate::types::{SqlType, Value};

/// Built-in functions whose value is not a function of their arguments alone: a PERSISTED
/// column over one is refused (4936), as SQL Server refuses it.
const NONDETERMINISTIC: [&str; 11] = [
    "GETDATE",
    "GETUTCDATE",
    "CURRENT_TIMESTAMP",
    "SYSDATETIME",
    "SYSUTCDATETIME",
    "SYSDATETIMEOFFSET",
    "NEWID",
    "NEWSEQUENTIALID",
    "RAND",
    "CURRENT_USER",
    "HOST_NAME",
];

/// One computed column ready to evaluate.
struct Rule {
    /// Its position among the table's columns.
    position: usize,
    /// Positions of the columns it reads (an UPDATE setting none of them keeps its value).
    reads: Vec<usize>,
    expr: Expr,
    /// PERSISTED: its value is in the record.
    stored: bool,
}

/// A table entry's computed columns, parsed once when the entry is resolved (the table
/// cache keeps it with the entry, so a catalog change parses them again), with the row
/// header they evaluate over.
pub(super) struct ComputedPlan {
    header: Vec<(String, SqlType)>,
    rules: Vec<Rule>,
}

/// Whether a column is computed.
pub(super) fn is_computed(c: &ColumnEntry) -> bool {
    c.computed.is_some()
}

/// Invariant 2: Msg 271 for a writer naming computed column `c`.
pub(super) fn refuse_target(c: &ColumnEntry) -> Result<(), Vec<SqlError>> {
    match is_computed(c) {
        true => Err(vec![msg(271, &[&c.name])]),
        false => Ok(()),
    }
}

/// Invariant 3's checks of one definition over `columns` (the table's, computed ones
/// marked): the ids it reads, in order of first reference.
fn checked_references(
    table: &str,
    columns: &[ColumnEntry],
    e: &Expr,
) -> Result<Vec<u16>, Vec<SqlError>> {
    if contains_aggregate(e) {
        return Err(vec![not_yet("aggregates in a computed column")]);
    }
    let mut ids: Vec<u16> = Vec::new();
    let mut refused: Option<SqlError> = None;
    let _ = map_expr(e, &mut |x| {
        let bad = match x {
            Expr::Subquery(_) | Expr::Exists(_) | Expr::InSubquery { .. } => msg(1046, &[]),
            Expr::Window(_) => not_yet("window functions in a computed column"),
            Expr::Variable(_) => not_yet("variables in a computed column"),
            Expr::Default => msg(102, &[&"DEFAULT"]),
            Expr::Function { name, .. } if name.parts.len() > 1 => {
                not_yet("user-defined functions in a computed column")
            }
            Expr::Column(n) => match super::check_constraints::column_of(table, columns, n) {
                Ok(c) if is_computed(c) => msg(1759, &[&c.name, &table]),
                Ok(c) if c.identity.is_some() => {
                    not_yet("a computed column over an IDENTITY column")
                }
                Ok(c) => {
                    if !ids.contains(&c.column_id) {
                        ids.push(c.column_id);
                    }
                    return Ok(None);
                }
                Err(e) => e,
            },
            _ => return Ok(None),
        };
        refused = Some(bad);
        Err(msg(0, &[]))
    });
    match refused {
        Some(e) => Err(vec![e]),
        None => Ok(ids),
    }
}

/// Whether `e` calls a nondeterministic built-in or reads a @@ value.
fn is_nondeterministic(e: &Expr) -> bool {
    let mut found = false;
    let _ = map_expr(e, &mut |x| {
        found |= match x {
            Expr::Function { name, .. } => NONDETERMINISTIC
                .iter()
                .any(|f| name.name().eq_ignore_ascii_case(f)),
            Expr::GlobalVariable(_) => true,
            _ => false,
        };
        Ok(None)
    });
    found
}

/// Whether `e` is imprecise as SQL Server calls an expression so: a float or real value
/// anywhere in it (a column, a conversion, a constant, an intermediate result).
fn is_imprecise(table: &str, columns: &[ColumnEntry], e: &Expr) -> bool {
    let mut found = false;
    let _ = map_expr(e, &mut |x| {
        found |= matches!(
            expr_type(table, columns, x),
            Some(SqlType::Float | SqlType::Real)
        );
        Ok(None)
    });
    found
}

/// Invariant 4: whether computed column `c` of table `t` may be in index `index` (as a
/// key column when `key`): one not PERSISTED must be deterministic (Msg 2729, key or
/// INCLUDE) and, in the key, precise (2799). A PERSISTED one was deterministic when made
/// (4936) and may be imprecise.
pub(super) fn check_indexable(
    t: &TableRef,
    c: &ColumnEntry,
    index: &str,
    key: bool,
) -> Result<(), Vec<SqlError>> {
    let Some(k) = c.computed.as_ref().filter(|k| !k.is_persisted) else {
        return Ok(());
    };
    let e = parse_definition(&k.definition).map_err(|e| vec![e])?;
    if is_nondeterministic(&e) {
        return Err(vec![msg(2729, &[&c.name, &"table", &t.entry.name])]);
    }
    if key && is_imprecise(&t.entry.name, &t.entry.columns, &e) {
        return Err(vec![msg(2799, &[&index, &t.two_part(), &c.name])]);
    }
    Ok(())
}

/// A literal's type as SQL Server types the constant.
fn literal_type(l: &Literal) -> SqlType {
    match l {
        Literal::Null => SqlType::Int,
        Literal::Integer(i) if i32::try_from(*i).is_ok() => SqlType::Int,
        Literal::Integer(_) => SqlType::BigInt,
        Literal::Decimal {
            precision, scale, ..
        } => SqlType::Decimal {
            precision: *precision,
            scale: *scale,
        },
        Literal::Float(_) => SqlType::Float,
        Literal::String { value, national } => {
            let n = value.chars().count().max(1) as u32;
            match national {
                true => SqlType::NVarChar(n.min(4000)),
                false => SqlType::VarChar(n.min(8000)),
            }
        }
        Literal::Binary(b) => SqlType::VarBinary((b.len().max(1) as u32).min(8000)),
    }
}

/// An integer literal beside a decimal operand is a decimal of its digits (as SQL Server
/// converts the constant).
fn beside(e: &Expr, t: SqlType, other: SqlType) -> SqlType {
    match (e, other) {
        (Expr::Literal(Literal::Integer(i)), SqlType::Decimal { .. }) => SqlType::Decimal {
            precision: crate::convert::digit_count(i.unsigned_abs() as u128).max(1) as u8,
            scale: 0,
        },
        _ => t,
    }
}

/// The type of `a op b` by SQL Server's rules: precedence, string concatenation, and the
/// decimal rules for +, -, * and /.
fn binary_type(op: BinaryOp, a: SqlType, b: SqlType) -> Option<SqlType> {
    let decimal = matches!(a, SqlType::Decimal { .. }) || matches!(b, SqlType::Decimal { .. });
    let shapes = decimal_shape(a).zip(decimal_shape(b)).filter(|_| decimal);
    match (op, shapes) {
        (BinaryOp::Multiply, Some(((p1, s1), (p2, s2)))) => Some(fit_decimal(
            p1 as i32 + p2 as i32 + 1,
            s1 as i32 + s2 as i32,
        )),
        (BinaryOp::Divide, Some(((p1, s1), (p2, s2)))) => {
            let s = 6.max(s1 as i32 + p2 as i32 + 1);
            Some(fit_decimal(p1 as i32 - s1 as i32 + s2 as i32 + s, s))
        }
        (BinaryOp::Add | BinaryOp::Subtract, _) => Some(result_type(a, b)),
        (BinaryOp::Multiply | BinaryOp::Divide | BinaryOp::Modulo, _) if a.is_text() => None,
        (
            BinaryOp::Multiply
            | BinaryOp::Divide
            | BinaryOp::Modulo
            | BinaryOp::BitAnd
            | BinaryOp::BitOr
            | BinaryOp::BitXor,
            _,
        ) => Some(result_type(a, b)),
        _ => None,
    }
}

/// Invariant 3: the type of a definition over `columns`, derived without a row; None
/// where this engine does not derive it.
fn expr_type(table: &str, columns: &[ColumnEntry], e: &Expr) -> Option<SqlType> {
    let of = |x: &Expr| expr_type(table, columns, x);
    match e {
        Expr::Literal(l) => Some(literal_type(l)),
        Expr::Column(n) => {
            column_type(super::check_constraints::column_of(table, columns, n).ok()?).ok()
        }
        Expr::Cast { data_type, .. } | Expr::Convert { data_type, .. } => {
            Some(data_type.cast_target())
        }
        Expr::Unary {
            op: UnaryOp::Negate | UnaryOp::Plus | UnaryOp::BitNot,
            expr,
        } => of(expr),
        Expr::Binary { left, op, right } => {
            let (a, b) = (of(left)?, of(right)?);
            binary_type(*op, beside(left, a, b), beside(right, b, a))
        }
        Expr::Function {
            name,
            args,
            distinct: false,
            star: false,
        } => {
            let types: Option<Vec<SqlType>> = args
                .iter()
                .map(|a| match a {
                    Expr::DatePart(_) => Some(SqlType::Int),
                    a => of(a),
                })
                .collect();
            crate::functions::scalar_result_type(name.name(), &types?)
        }
        _ => None,
    }
}

/// The catalog entry of computed column `def` (id `id`) of `table`, whose other columns
/// are `columns` (computed ones marked by an entry with `computed` set, their type not yet
/// derived): invariant 3's checks, the type derived, the definition rendered.
pub(super) fn computed_entry(
    table: &str,
    columns: &[ColumnEntry],
    def: &ColumnDefinition,
    id: u16,
) -> Result<ColumnEntry, Vec<SqlError>> {
    let c = def
        .computed
        .as_ref()
        .expect("a computed column's definition");
    refuse_unbuilt(def)?;
    checked_references(table, columns, &c.expr)?;
    if c.persisted && is_nondeterministic(&c.expr) {
        return Err(vec![msg(4936, &[&def.name, &table])]);
    }
    let what = "this expression in a computed column";
    let t = expr_type(table, columns, &c.expr).ok_or_else(|| vec![not_yet(what)])?;
    let st = rowcodec::stored_type(t);
    Ok(ColumnEntry {
        column_id: id,
        name: def.name.clone(),
        system_type_id: st.system_type_id,
        max_length: st.max_length,
        precision: st.precision,
        scale: st.scale,
        is_nullable: def.nullable != Some(false),
        identity: None,
        default_sql: String::new(),
        computed: Some(ComputedColumn {
            definition: definition_text(&c.expr)?,
            is_persisted: c.persisted,
        }),
    })
}

/// What a computed column's definition may not carry: a DEFAULT (102), IDENTITY, or NOT
/// NULL, CHECK or FOREIGN KEY without PERSISTED (8183); and what is not built for one yet
/// (40517): a PRIMARY KEY, UNIQUE or FOREIGN KEY on it, a collation.
fn refuse_unbuilt(def: &ColumnDefinition) -> Result<(), Vec<SqlError>> {
    let persisted = def.computed.as_ref().is_some_and(|c| c.persisted);
    if def.default.is_some() {
        return Err(vec![msg(102, &[&"DEFAULT"])]);
    }
    let needs_persisted =
        def.nullable == Some(false) || !def.checks.is_empty() || !def.foreign_keys.is_empty();
    if def.identity.is_some() || (needs_persisted && !persisted) {
        return Err(vec![msg(8183, &[])]);
    }
    if def.key.is_some() || !def.foreign_keys.is_empty() {
        let what = "PRIMARY KEY, UNIQUE and FOREIGN KEY constraints on a computed column";
        return Err(vec![not_yet(what)]);
    }
    if def.collation.is_some() {
        return Err(vec![not_yet("COLLATE on a computed column")]);
    }
    Ok(())
}

/// A placeholder entry marking computed column `def` while the table's other columns are
/// made: `computed_entry` reads it to refuse one definition reading another (1759).
pub(super) fn marker(def: &ColumnDefinition, id: u16) -> ColumnEntry {
    ColumnEntry {
        column_id: id,
        name: def.name.clone(),
        system_type_id: 0,
        max_length: 0,
        precision: 0,
        scale: 0,
        is_nullable: true,
        identity: None,
        default_sql: String::new(),
        computed: Some(ComputedColumn {
            definition: String::new(),
            is_persisted: false,
        }),
    }
}

/// CREATE TABLE's PRIMARY KEY, UNIQUE and FOREIGN KEY constraints naming a computed
/// column: refused (40517) until built. A CHECK constraint may read a PERSISTED one: it is
/// checked after the value is computed (invariant 1).
pub(super) fn refuse_constrained(
    c: &crate::ast::CreateTable,
    columns: &[ColumnEntry],
) -> Result<(), Vec<SqlError>> {
    use crate::ast::TableConstraint;
    let computed = |name: &str| {
        columns
            .iter()
            .any(|x| is_computed(x) && x.name.eq_ignore_ascii_case(name))
    };
    for tc in &c.constraints {
        let names: Vec<&str> = match tc {
            TableConstraint::Key(k) => k.columns.iter().map(|x| x.name.as_str()).collect(),
            TableConstraint::ForeignKey(k) => k.columns.iter().map(String::as_str).collect(),
            TableConstraint::Check(_) => Vec::new(),
        };
        if names.iter().any(|n| computed(n)) {
            return Err(vec![not_yet(
                "PRIMARY KEY, UNIQUE and FOREIGN KEY constraints on a computed column",
            )]);
        }
    }
    Ok(())
}

impl ComputedPlan {
    /// The plan of table entry `t` whose columns have `types`; None without computed
    /// columns. A stored definition that does not parse or check is damage to report.
    pub(super) fn of(
        t: &TableEntry,
        types: &[SqlType],
    ) -> Result<Option<ComputedPlan>, Vec<SqlError>> {
        let cols = &t.columns;
        let mut rules = Vec::new();
        for (position, c) in cols.iter().enumerate() {
            let Some(k) = &c.computed else { continue };
            let expr = parse_definition(&k.definition).map_err(|e| vec![e])?;
            let reads = checked_references(&t.name, cols, &expr)?
                .into_iter()
                .filter_map(|id| cols.iter().position(|c| c.column_id == id))
                .collect();
            rules.push(Rule {
                position,
                reads,
                expr,
                stored: k.is_persisted,
            });
        }
        if rules.is_empty() {
            return Ok(None);
        }
        let header = cols
            .iter()
            .zip(types)
            .map(|(c, t)| (c.name.clone(), *t))
            .collect();
        Ok(Some(ComputedPlan { header, rules }))
    }

    /// Rule `r`'s value over `row`, converted to its column's type.
    fn value(&self, t: &TableRef, r: &Rule, row: &[Value]) -> Result<Value, SqlError> {
        self.value_in(&t.three_part(), r, row)
    }

    /// `value` of table `table` (as messages name it), without a `TableRef`: the header
    /// holds each column's name and type.
    fn value_in(&self, table: &str, r: &Rule, row: &[Value]) -> Result<Value, SqlError> {
        let v = evaluate(&r.expr, &self.header, row)?;
        let (name, t) = &self.header[r.position];
        rowcodec::assign(*t, &v, table, name)
    }

    /// The value of the computed column at `position` over `row` (the columns it reads,
    /// `reads_of`, decoded; the others may be NULL: a definition reads nothing else);
    /// None when that column is not computed.
    pub(super) fn value_at(
        &self,
        table: &str,
        position: usize,
        row: &[Value],
    ) -> Option<Result<Value, SqlError>> {
        let r = self.rules.iter().find(|r| r.position == position)?;
        Some(self.value_in(table, r, row))
    }

    /// The positions of the columns the computed column at `position` reads; None when
    /// that column is not computed.
    pub(super) fn reads_of(&self, position: usize) -> Option<&[usize]> {
        let r = self.rules.iter().find(|r| r.position == position)?;
        Some(&r.reads)
    }

    /// Invariant 5: a decoded row's computed columns that are not stored, computed.
    pub(super) fn compute_virtual(&self, t: &TableRef, row: &mut [Value]) -> Result<(), SqlError> {
        for r in self.rules.iter().filter(|r| !r.stored) {
            row[r.position] = self.value(t, r, row)?;
        }
        Ok(())
    }
}

/// A column of a definition's row: by name (a definition reads its own table only).
fn column_at(header: &[(String, SqlType)], n: &ObjectName) -> Result<usize, SqlError> {
    header
        .iter()
        .position(|(c, _)| c.eq_ignore_ascii_case(n.name()))
        .ok_or_else(|| msg(207, &[&n.joined()]))
}

/// The type `e` has whatever its value (eval.rs `operand_type`'s rules over a
/// definition's row), for decimal arithmetic.
fn declared(e: &Expr, header: &[(String, SqlType)]) -> Option<SqlType> {
    match e {
        Expr::Column(n) => column_at(header, n).ok().map(|i| header[i].1),
        Expr::Cast { data_type, .. } | Expr::Convert { data_type, .. } => {
            Some(data_type.cast_target())
        }
        Expr::Unary {
            op: UnaryOp::Negate | UnaryOp::Plus,
            expr,
        } => declared(expr, header),
        Expr::Binary { left, op, right } => {
            let op = super::eval::value_op(*op)?;
            let (l, r) = (declared(left, header), declared(right, header));
            let (l, r) = (
                l.or_else(|| super::eval::literal_type(left, r))?,
                r.or_else(|| super::eval::literal_type(right, l))?,
            );
            Some(crate::ops::binary_result_type(op, l, r))
        }
        _ => None,
    }
}

/// A definition's value over `row` (its table's columns, `header`): the forms invariant 3
/// admits, evaluated as `Session::eval` evaluates them, without a session, so a row is
/// computed wherever it is decoded.
fn evaluate(e: &Expr, header: &[(String, SqlType)], row: &[Value]) -> Result<Value, SqlError> {
    let eval = |x: &Expr| evaluate(x, header, row);
    match e {
        Expr::Literal(l) => Ok(super::eval::literal(l)),
        Expr::Column(n) => Ok(row[column_at(header, n)?].clone()),
        Expr::DatePart(p) => Ok(Value::Text(p.clone())),
        Expr::Cast {
            expr,
            data_type,
            try_cast,
        } => super::eval::cast_value(&eval(expr)?, data_type.cast_target(), None, *try_cast),
        Expr::Convert {
            data_type,
            expr,
            style,
            try_convert,
        } => {
            let v = eval(expr)?;
            let style = style.as_deref().map(eval).transpose()?;
            super::eval::cast_value(&v, data_type.cast_target(), style, *try_convert)
        }
        Expr::Unary {
            op: UnaryOp::Negate,
            expr,
        } => crate::ops::negate(&eval(expr)?),
        Expr::Unary {
            op: UnaryOp::Plus,
            expr,
        } => eval(expr),
        Expr::Unary {
            op: UnaryOp::BitNot,
            expr,
        } => crate::ops::bit_not(&eval(expr)?),
        Expr::Binary { left, op, right } if super::eval::value_op(*op).is_some() => {
            let (a, b) = (eval(left)?, eval(right)?);
            let op = super::eval::value_op(*op).expect("checked");
            if !crate::ops::wants_declared(op, &a, &b) {
                return crate::ops::binary(op, &a, &b);
            }
            let d = crate::ops::Declared {
                left: declared(left, header),
                right: declared(right, header),
            };
            crate::ops::binary_typed(op, &a, &b, d)
        }
        Expr::Function { name, args, .. } => {
            let values = args.iter().map(eval).collect::<Result<Vec<_>, _>>()?;
            let clock = crate::functions::SystemClock;
            crate::functions::call_scalar(name.name(), &values, &clock)?
                .ok_or_else(|| msg(195, &[&name.name(), &"built-in function name"]))
        }
        _ => Err(not_yet("this expression in a computed column")),
    }
}

impl Session {
    /// Invariant 1: `row`'s computed columns computed from its other columns, for an
    /// INSERT (`set` None) or an UPDATE setting the columns at `set` (only those reading
    /// one of them), converted to their types and checked against NOT NULL (515). An
    /// UPDATE's `set` gains the columns recomputed, so the CHECK constraints reading them
    /// are checked.
    pub(super) fn compute_columns(
        &mut self,
        t: &TableRef,
        row: &mut [Value],
        mut set: Option<&mut Vec<usize>>,
        verb: &str,
    ) -> Result<(), Vec<SqlError>> {
        let Some(plan) = t.computed.clone() else {
            return Ok(());
        };
        for r in &plan.rules {
            if let Some(s) = set.as_deref_mut() {
                if !r.reads.iter().any(|c| s.contains(c)) {
                    continue;
                }
                s.push(r.position);
            }
            let v = plan.value(t, r, row).map_err(terminated)?;
            let c = &t.entry.columns[r.position];
            if v.is_null() && !c.is_nullable {
                return Err(terminated(msg(515, &[&c.name, &t.three_part(), &verb])));
            }
            row[r.position] = v;
        }
        Ok(())
    }
}
