//! Seeks: the key ranges of a table's clustered index, or else of one of its nonclustered
//! indexes (index_seek.rs), that a WHERE clause confines a statement to, so SELECT, UPDATE
//! and DELETE read those ranges (storage `seek_chunk`, and a lookup of each index record's
//! row) instead of the whole table.
//!
//! What narrows: top-level AND conjuncts that compare a leading key column with a value
//! known before the first row (a literal, a variable or parameter, arithmetic and CAST /
//! CONVERT of those): `col = v`, `<`, `<=`, `>`, `>=`, `!<`, `!>`, either way round,
//! `col BETWEEN a AND b` and `col IN (v, ...)`. The conjuncts on one column intersect into
//! sorted, disjoint intervals; a column held to points (equality, IN) lets the next key
//! column narrow too (composite keys: an equality prefix, then a range). Everything else
//! (OR, NOT, functions of the column, subqueries) leaves the statement to scan.
//!
//! Invariants:
//! 1. A seek returns a superset of the rows the WHERE clause accepts, in key order as a
//!    scan of the clustered index returns them: the full WHERE is still evaluated on every
//!    row, so correctness never depends on the analysis being complete, only on its
//!    never dropping a row. A conjunct it cannot reason about exactly narrows nothing.
//! 2. Only key types whose stored order (`format::key::compare`) agrees with the SQL
//!    comparison (`ops::compare`) are sought: the integers, decimal / numeric, date,
//!    datetime, datetime2, uniqueidentifier, and char, varchar, nchar and nvarchar
//!    compared with text. Both sides compare text by one rule, `format::collation` (each
//!    character folded to uppercase, trailing spaces ignored, accents kept), so a text
//!    bound is the text itself as the column stores it (`text_key`), exact whatever its
//!    length. Float and real scan (-0 and 0 are equal in SQL, ordered in the tree),
//!    binary scans (the tree ignores trailing zeros), bit scans (a conversion to bit is
//!    not monotone: -3 becomes 1).
//! 3. A value is converted to the key column's type; when it does not convert exactly
//!    (`int_col = 1.5`, `date_col < '2020-01-01 10:00'`) the bound moves to the nearest
//!    value of the column's type on the right side (a conversion rounds or truncates to a
//!    neighbour, so no value of the type lies between), and an equality becomes empty.
//!    A value that does not convert (overflow, text that is no number) narrows nothing.
//!    Float values narrow nothing: comparisons through floating point are not exact.
//!    Text against a character key is not converted (invariant 2): SQL compares it
//!    unconverted, and its bound is not cut to the column's length. Text with a character
//!    a char / varchar column cannot hold (beyond Latin-1) narrows nothing there; a
//!    character key compared with a number, a date or a GUID narrows nothing.
//! 4. NULL never matches: a comparison with NULL makes the range empty.
//! 5. The choice: the clustered key when it narrows (no lookups); else the nonclustered
//!    index whose ranges are single rows of a unique key, then the one whose seek is
//!    estimated to cost least (cardinality.rs: its statistics' histogram for values known
//!    when the plan is chosen, the density vector for variables, parameters and a join's
//!    outer columns, SQL Server's fixed guesses without statistics on its leading column),
//!    then the one with the most leading key columns narrowed (the first in catalog order
//!    among equals); else a scan. A seek that is not of single rows goes ahead only if its
//!    estimated cost (a descent per range, `cardinality::LOOKUP_COST` per row) is below a
//!    scan's (the table's rows). Without the table's cardinality (no statistics object of
//!    the table built: an index made on an empty table and filled since) the pages decide
//!    as before statistics did: the seek goes ahead only if its ranges cover at most an
//!    eighth of the index's reserved pages (`TIPPING_SHARE`), counted by reading at most
//!    that many. The answer is the same either way (invariant 1); only the pages read
//!    differ.

use std::cmp::Ordering;
use std::ops::Bound;

use extentdb_format::{collation, key};
use extentdb_storage::scan::{KeyPrefix, KeyRange};

use super::cardinality::{self, ColumnValues, Interval, TableStatistics};
use super::index_seek::IndexSeek;
use super::tables::{Access, TableRef};
use super::Session;
use crate::ast::{BinaryOp, Expr, UnaryOp};
use crate::convert::{convert, rescale};
use crate::ops;
use crate::rowcodec;
use crate::types::{SqlType, Value};

/// Key ranges one seek reads at most; past it, fewer key columns narrow (an IN list
/// longer than this scans).
const MAX_RANGES: usize = 4096;

/// How a statement names the table (its alias), and which column references are known
/// before the read (`access_with`).
type Names<'a> = (Option<&'a str>, &'a dyn Fn(&crate::ast::ObjectName) -> bool);

/// What the conjuncts on one key column allow: sorted, disjoint, non-empty intervals.
type ColumnSet = Vec<Interval>;

/// A comparison of a key column with a value, the column on the left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmp {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    fn of(op: BinaryOp) -> Option<Cmp> {
        Some(match op {
            BinaryOp::Equal => Cmp::Eq,
            BinaryOp::Less => Cmp::Lt,
            BinaryOp::LessOrEqual | BinaryOp::NotGreater => Cmp::Le,
            BinaryOp::Greater => Cmp::Gt,
            BinaryOp::GreaterOrEqual | BinaryOp::NotLess => Cmp::Ge,
            _ => return None,
        })
    }

    /// The same comparison with its operands swapped (`5 < col` is `col > 5`).
    fn reversed(self) -> Cmp {
        match self {
            Cmp::Eq => Cmp::Eq,
            Cmp::Lt => Cmp::Gt,
            Cmp::Le => Cmp::Ge,
            Cmp::Gt => Cmp::Lt,
            Cmp::Ge => Cmp::Le,
        }
    }
}

/// The clustered key as the analysis sees it: each column's position, SQL type and stored
/// type id, and the names a column reference may qualify it with.
struct KeyColumns<'a> {
    names: Vec<&'a str>,
    types: Vec<SqlType>,
    type_ids: Vec<u8>,
    table: &'a str,
    alias: Option<&'a str>,
    /// Column references known before the read (`access_with`).
    fixed: &'a dyn Fn(&crate::ast::ObjectName) -> bool,
}

impl KeyColumns<'_> {
    /// The key column (its place in the key) that `e` names, if it is a bare reference.
    fn column_of(&self, e: &Expr) -> Option<usize> {
        let Expr::Column(name) = e else {
            return None;
        };
        let qualified_ok = match name.parts.len() {
            1 => true,
            2 => {
                let q = name.parts[0].as_str();
                q.eq_ignore_ascii_case(self.alias.unwrap_or(self.table))
            }
            _ => false,
        };
        if !qualified_ok {
            return None;
        }
        self.names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name.name()))
    }
}

impl Session {
    /// How a statement whose WHERE is `filter` reads table `t` (`alias` as the FROM clause
    /// names it): the key ranges of a seek, or the whole table.
    pub(super) fn access_for(
        &mut self,
        t: &TableRef,
        filter: Option<&Expr>,
        alias: Option<&str>,
    ) -> Access {
        // A correlated subquery's outer references are known before its read: a column
        // that is not the table's and that an enclosing row has. Without an enclosing row
        // (every top-level statement) there are none to look for.
        if self.scopes.outer_rows.is_empty() {
            return self.access_with(t, filter, alias, &|_| false);
        }
        let columns = t.columns();
        let own = super::eval::RowCtx::single(&columns, &[], alias, &t.entry.name);
        let outer = &self.scopes.outer_rows;
        let fixed = |n: &crate::ast::ObjectName| {
            own.position(n).is_none()
                && n.qualifier()
                    .is_none_or(|q| !q.eq_ignore_ascii_case(alias.unwrap_or(&t.entry.name)))
                && outer.iter().any(|o| o.binds(n))
        };
        let mut names = Vec::new();
        if let Some(f) = filter {
            column_names(f, &mut names);
        }
        let known: Vec<crate::ast::ObjectName> =
            names.into_iter().filter(|n| fixed(n)).cloned().collect();
        self.access_with(t, filter, alias, &|n| known.contains(n))
    }

    /// `access_for` where `fixed` says which column references are known before the read
    /// (an enclosing row's, or a join's outer row's, held in `Scopes::outer_rows`).
    pub(super) fn access_with(
        &mut self,
        t: &TableRef,
        filter: Option<&Expr>,
        alias: Option<&str>,
        fixed: &dyn Fn(&crate::ast::ObjectName) -> bool,
    ) -> Access {
        self.access_choice(t, filter, (alias, fixed), false).0
    }

    /// `access_with` and the rows the access is estimated to give (cardinality.rs; None
    /// for a scan, or without the table's cardinality).
    pub(super) fn access_estimated(
        &mut self,
        t: &TableRef,
        filter: Option<&Expr>,
        alias: Option<&str>,
        fixed: &dyn Fn(&crate::ast::ObjectName) -> bool,
    ) -> (Access, Option<f64>) {
        self.access_choice(t, filter, (alias, fixed), true)
    }

    /// The access (`access_with`), and with `estimate` a clustered seek's estimated rows
    /// too (an index seek's come with its choice).
    fn access_choice(
        &mut self,
        t: &TableRef,
        filter: Option<&Expr>,
        names: Names<'_>,
        estimate: bool,
    ) -> (Access, Option<f64>) {
        let Some(filter) = filter else {
            return (Access::Scan, None);
        };
        let mut conjuncts = Vec::new();
        flatten_and(filter, &mut conjuncts);
        let stats = TableStatistics::of(t);
        if let (Some((_, ids)), 1) = (&t.entry.primary_key, t.entry.index_id) {
            if let Some((ranges, narrowing)) = self.ranges_on(t, ids, &conjuncts, names) {
                let rows = estimate
                    .then(|| cardinality::key_rows(&stats, ids, &narrowing.values(ids)))
                    .flatten();
                return (Access::Seek(ranges), rows);
            }
        }
        match self.index_seek(t, &conjuncts, names, &stats) {
            Some(seek) => {
                let rows = seek.estimate;
                (Access::IndexSeek(seek), rows)
            }
            None => (Access::Scan, None),
        }
    }

    /// The rows of `t` that WHERE `filter` keeps, estimated (cardinality.rs) from the
    /// conjuncts that compare a column with a value; None when another conjunct is there
    /// (a predicate the estimator has no rule for) or without the table's cardinality.
    pub(super) fn filter_estimate(
        &mut self,
        t: &TableRef,
        filter: Option<&Expr>,
        alias: Option<&str>,
    ) -> Option<f64> {
        let mut conjuncts = Vec::new();
        if let Some(f) = filter {
            flatten_and(f, &mut conjuncts);
        }
        self.conjuncts_estimate(t, &conjuncts, alias)
    }

    /// `filter_estimate` of a WHERE's conjuncts (none: the table's cardinality).
    pub(super) fn conjuncts_estimate(
        &mut self,
        t: &TableRef,
        conjuncts: &[&Expr],
        alias: Option<&str>,
    ) -> Option<f64> {
        let stats = TableStatistics::of(t);
        let ids: Vec<u16> = t.entry.columns.iter().map(|c| c.column_id).collect();
        let keys = key_columns(t, &ids, (alias, &|_| false))?;
        let mut sets: Vec<Option<(ColumnSet, bool)>> = vec![None; ids.len()];
        for &c in conjuncts {
            let (col, set) = self.conjunct_set(c, &keys)?;
            let known = compile_time_known(c, &keys);
            let tid = keys.type_ids[col];
            sets[col] = Some(match sets[col].take() {
                Some((old, k)) => (intersect(tid, &old, &set), k && known),
                None => (set, known),
            });
        }
        let values: Vec<ColumnValues> = (sets.iter().enumerate())
            .filter_map(|(i, s)| {
                let (set, known) = s.as_ref()?;
                Some(ColumnValues {
                    column_id: ids[i],
                    type_id: keys.type_ids[i],
                    set,
                    known: *known,
                })
            })
            .collect();
        cardinality::filter_rows(&stats, &values)
    }

    /// The key ranges of a B-tree keyed on `t`'s columns `ids` (in key order) that the
    /// conjuncts confine a read to, with what narrowed each key column; None when its
    /// first key column is not narrowed.
    fn ranges_on(
        &mut self,
        t: &TableRef,
        ids: &[u16],
        conjuncts: &[&Expr],
        names: Names<'_>,
    ) -> Option<(Vec<KeyRange>, Narrowing)> {
        let keys = key_columns(t, ids, names)?;
        // None: nothing narrows that column.
        let mut sets: Vec<Option<ColumnSet>> = vec![None; ids.len()];
        let mut known = vec![true; ids.len()];
        for c in conjuncts {
            let Some((col, set)) = self.conjunct_set(c, &keys) else {
                continue;
            };
            known[col] &= compile_time_known(c, &keys);
            let tid = keys.type_ids[col];
            sets[col] = Some(match sets[col].take() {
                Some(old) => intersect(tid, &old, &set),
                None => set,
            });
        }
        let ranges = key_ranges(&sets)?;
        let type_ids = keys.type_ids;
        Some((
            ranges,
            Narrowing {
                sets,
                known,
                type_ids,
            },
        ))
    }

    /// The nonclustered index of `t` a read confined by `conjuncts` seeks (invariant 5),
    /// if one's leading key column is narrowed and its seek costs less than a scan.
    fn index_seek(
        &mut self,
        t: &TableRef,
        conjuncts: &[&Expr],
        names: Names<'_>,
        stats: &TableStatistics,
    ) -> Option<IndexSeek> {
        let indexes: Vec<(u32, Vec<u16>, bool)> = {
            let db = t.db.read().unwrap();
            db.enabled_indexes_of(t.entry.object_id)
                .filter_map(|ix| {
                    let info = ix.index_of.as_ref()?;
                    let key = info.sources[..info.key_columns as usize].to_vec();
                    Some((ix.object_id, key, info.unique))
                })
                .collect()
        };
        // The best by (one row per range of a unique key, lowest estimated cost, most key
        // columns narrowed); the first in catalog order among equals.
        let mut best: Option<((bool, f64, usize), IndexSeek)> = None;
        for (index_oid, key, unique) in indexes {
            let Some((ranges, narrowing)) = self.ranges_on(t, &key, conjuncts, names) else {
                continue;
            };
            let (single, narrowed) = seek_score(&ranges, key.len(), unique);
            let estimate = match single {
                true => Some(ranges.len() as f64),
                false => cardinality::key_rows(stats, &key, &narrowing.values(&key)),
            };
            let cost = estimate.map_or(f64::INFINITY, |e| {
                cardinality::seek_cost(e, ranges.len(), true)
            });
            let better = |(s, c, n): &(bool, f64, usize)| match (single != *s, cost != *c) {
                (true, _) => single,
                (false, true) => cost < *c,
                (false, false) => narrowed > *n,
            };
            if best.as_ref().is_none_or(|(b, _)| better(b)) {
                let seek = IndexSeek {
                    index_oid,
                    ranges,
                    estimate,
                };
                best = Some(((single, cost, narrowed), seek));
            }
        }
        let ((single, _, _), seek) = best?;
        let chosen = single
            || match (seek.estimate, stats.cardinality()) {
                (Some(rows), Some(c)) => cardinality::seek_beats_scan(rows, seek.ranges.len(), c),
                // No cardinality: the pages the seek covers decide (invariant 5).
                _ => narrow_enough(t, &seek),
            };
        chosen.then_some(seek)
    }

    /// The key column a conjunct narrows and the values it allows, if it narrows one.
    fn conjunct_set(&mut self, e: &Expr, keys: &KeyColumns) -> Option<(usize, ColumnSet)> {
        match e {
            Expr::Binary { left, op, right } => {
                let cmp = Cmp::of(*op)?;
                let (col, cmp, value) = match (keys.column_of(left), keys.column_of(right)) {
                    (Some(c), None) if is_constant(right, keys.fixed) => (c, cmp, right),
                    (None, Some(c)) if is_constant(left, keys.fixed) => (c, cmp.reversed(), left),
                    _ => return None,
                };
                let v = self.eval(value, None).ok()?;
                Some((col, bound_set(keys.types[col], cmp, &v)?))
            }
            Expr::Between {
                expr,
                low,
                high,
                negated: false,
            } => {
                let col = keys.column_of(expr)?;
                if !is_constant(low, keys.fixed) || !is_constant(high, keys.fixed) {
                    return None;
                }
                let (lo, hi) = (self.eval(low, None).ok()?, self.eval(high, None).ok()?);
                let ty = keys.types[col];
                let set = match (bound_set(ty, Cmp::Ge, &lo), bound_set(ty, Cmp::Le, &hi)) {
                    (Some(a), Some(b)) => intersect(keys.type_ids[col], &a, &b),
                    (Some(a), None) | (None, Some(a)) => a,
                    (None, None) => return None,
                };
                Some((col, set))
            }
            Expr::InList {
                expr,
                list,
                negated: false,
            } => {
                let col = keys.column_of(expr)?;
                let mut points = Vec::with_capacity(list.len());
                for item in list {
                    if !is_constant(item, keys.fixed) {
                        return None;
                    }
                    let v = self.eval(item, None).ok()?;
                    // Each item allows one point or none (a NULL, a value no key equals).
                    points.extend(bound_set(keys.types[col], Cmp::Eq, &v)?);
                }
                let tid = keys.type_ids[col];
                points.sort_by(|a, b| lo_order(tid, &a.lo, &b.lo));
                points.dedup_by(|a, b| lo_order(tid, &a.lo, &b.lo) == Ordering::Equal);
                Some((col, points))
            }
            _ => None,
        }
    }
}

/// The share of an index a seek may cover and still beat a scan of its table (invariant 5):
/// a lookup costs about five times a scanned row (measured through TDS on a 20,000-row
/// clustered table with an index: a 9% range in 12.3 ms through the index, 6.8 us a row,
/// against 28.2 ms for the scan, 1.4 us a row; break-even near 20%), so past an eighth of
/// the index's pages the table is scanned.
const TIPPING_SHARE: u64 = 8;

/// Whether `seek` reads at most `TIPPING_SHARE`'s share of its index's pages (counted by
/// reading them, up to that share: storage `range_pages`). An error here decides nothing:
/// the seek stands, and the read reports it.
fn narrow_enough(t: &TableRef, seek: &IndexSeek) -> bool {
    let db = t.db.read().unwrap();
    let Ok(reserved) = db.reserved_pages(seek.index_oid) else {
        return true;
    };
    let max = (reserved / TIPPING_SHARE).max(2);
    !matches!(db.range_pages(seek.index_oid, &seek.ranges, max), Ok(None))
}

/// How good an index's seek is, without statistics (invariant 5): one row per range of
/// a unique index's whole key first, then the most key columns narrowed.
fn seek_score(ranges: &[KeyRange], key_columns: usize, unique: bool) -> (bool, usize) {
    let width = |b: &Bound<KeyPrefix>| match b {
        Bound::Included(p) | Bound::Excluded(p) => p.len(),
        Bound::Unbounded => 0,
    };
    let narrowed = ranges
        .iter()
        .map(|r| width(&r.lower).max(width(&r.upper)))
        .min()
        .unwrap_or(key_columns);
    let single = unique && ranges.iter().all(|r| r.is_point(key_columns));
    (single, narrowed)
}

/// What narrowed each key column of a B-tree (`ranges_on`): its set of values, whether
/// those were known when the plan was chosen, and its stored type.
struct Narrowing {
    sets: Vec<Option<ColumnSet>>,
    known: Vec<bool>,
    type_ids: Vec<u8>,
}

impl Narrowing {
    /// The leading key columns `key_ranges` narrows by: each held to points, then the
    /// first that is not (cardinality::key_rows' input).
    fn values<'a>(&'a self, ids: &[u16]) -> Vec<ColumnValues<'a>> {
        let mut out = Vec::new();
        for (i, set) in self.sets.iter().enumerate() {
            let Some(set) = set else { break };
            out.push(ColumnValues {
                column_id: ids[i],
                type_id: self.type_ids[i],
                set,
                known: self.known[i],
            });
            if set.iter().any(|x| x.point().is_none()) {
                break;
            }
        }
        out
    }
}

/// The columns `ids` of `t` as the analysis sees them; None for a column not there.
fn key_columns<'a>(
    t: &'a TableRef,
    ids: &[u16],
    (alias, fixed): Names<'a>,
) -> Option<KeyColumns<'a>> {
    let mut keys = KeyColumns {
        names: Vec::new(),
        types: Vec::new(),
        type_ids: Vec::new(),
        table: &t.entry.name,
        alias,
        fixed,
    };
    for id in ids {
        let p = t.entry.columns.iter().position(|c| c.column_id == *id)?;
        keys.names.push(&t.entry.columns[p].name);
        keys.types.push(t.types[p]);
        keys.type_ids.push(t.entry.columns[p].system_type_id);
    }
    Some(keys)
}

/// Whether a conjunct's values are known when the plan is chosen (cardinality.rs): it
/// reads no variable or parameter and no column but the table's own.
fn compile_time_known(c: &Expr, keys: &KeyColumns) -> bool {
    !super::aggregate::any_node(c, &|x| match x {
        Expr::Variable(_) => true,
        Expr::Column(_) => keys.column_of(x).is_none(),
        _ => false,
    })
}

/// The conjuncts of a top-level AND chain.
pub(super) fn flatten_and<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::Binary {
            left,
            op: BinaryOp::And,
            right,
        } => {
            flatten_and(left, out);
            flatten_and(right, out);
        }
        e => out.push(e),
    }
}

/// True for an expression whose value is known before the first row and the same for
/// every row: literals, variables (and parameters), column references `fixed` allows, and
/// arithmetic and conversions of them.
fn is_constant(e: &Expr, fixed: &dyn Fn(&crate::ast::ObjectName) -> bool) -> bool {
    match e {
        Expr::Literal(_) | Expr::Variable(_) => true,
        Expr::Column(n) => fixed(n),
        Expr::Unary {
            op: UnaryOp::Negate | UnaryOp::Plus,
            expr,
        } => is_constant(expr, fixed),
        Expr::Cast { expr, .. } => is_constant(expr, fixed),
        Expr::Convert { expr, style, .. } => {
            is_constant(expr, fixed) && style.as_deref().is_none_or(|s| is_constant(s, fixed))
        }
        Expr::Binary { left, op, right } => {
            matches!(
                op,
                BinaryOp::Add
                    | BinaryOp::Subtract
                    | BinaryOp::Multiply
                    | BinaryOp::Divide
                    | BinaryOp::Modulo
            ) && is_constant(left, fixed)
                && is_constant(right, fixed)
        }
        _ => false,
    }
}

/// The column references in a WHERE clause's conjuncts (not inside subqueries).
fn column_names<'e>(e: &'e Expr, out: &mut Vec<&'e crate::ast::ObjectName>) {
    match e {
        Expr::Column(n) => out.push(n),
        Expr::Unary { expr, .. } | Expr::Cast { expr, .. } => column_names(expr, out),
        Expr::Convert { expr, style, .. } => {
            column_names(expr, out);
            if let Some(s) = style {
                column_names(s, out);
            }
        }
        Expr::Binary { left, right, .. } => {
            column_names(left, out);
            column_names(right, out);
        }
        Expr::Between {
            expr, low, high, ..
        } => {
            for x in [expr, low, high] {
                column_names(x, out);
            }
        }
        Expr::InList { expr, list, .. } => {
            column_names(expr, out);
            list.iter().for_each(|x| column_names(x, out));
        }
        _ => {}
    }
}

/// True when `ops::compare` orders any value of key type `col` against `c` exactly and in
/// the stored order (invariants 2 and 3).
fn exactly_comparable(col: SqlType, c: &Value) -> bool {
    use SqlType as T;
    let (precision, scale) = match col {
        T::TinyInt | T::SmallInt | T::Int | T::BigInt => (19u32, 0u8),
        T::Decimal { precision, scale } => (precision as u32, scale),
        T::Date | T::DateTime | T::DateTime2(_) => {
            return matches!(
                c,
                Value::Date(_) | Value::DateTime(_) | Value::DateTime2(_) | Value::Text(_)
            )
        }
        T::UniqueIdentifier => return matches!(c, Value::Guid(_) | Value::Text(_)),
        _ => return false,
    };
    // Numbers compare exactly while both rescale to the larger scale within i128.
    let integer = |i: i128| rescale(i, 0, scale).is_some();
    match c {
        Value::TinyInt(i) => integer(*i as i128),
        Value::SmallInt(i) => integer(*i as i128),
        Value::Int(i) => integer(*i as i128),
        Value::BigInt(i) => integer(*i as i128),
        Value::Decimal { unscaled, scale: s } => {
            let to = scale.max(*s);
            precision + u32::from(to - scale) <= 38 && rescale(*unscaled, *s, to).is_some()
        }
        // Text against an integer key converts to the key's type; against a decimal it
        // is parsed at its own scale: left to the scan.
        Value::Text(_) => scale == 0 && precision == 19,
        _ => false,
    }
}

/// The values of key type `col` that `col <cmp> c` allows, as stored bytes; None when the
/// comparison cannot be reasoned about exactly (invariants 3 and 4).
fn bound_set(col: SqlType, cmp: Cmp, c: &Value) -> Option<ColumnSet> {
    use Bound::{Excluded, Included, Unbounded};
    use SqlType as T;
    if c.is_null() {
        return Some(Vec::new());
    }
    let (b, o) = match (col, c) {
        (T::Char(_) | T::VarChar(_) | T::NChar(_) | T::NVarChar(_), Value::Text(s)) => {
            (text_key(col, s)?, Ordering::Equal)
        }
        _ => converted_key(col, c)?,
    };
    let (lo, hi) = match (cmp, o) {
        (Cmp::Eq, Ordering::Equal) => (Included(b.clone()), Included(b)),
        (Cmp::Eq, _) => return Some(Vec::new()),
        (Cmp::Lt, Ordering::Equal) => (Unbounded, Excluded(b)),
        (Cmp::Le, Ordering::Equal) => (Unbounded, Included(b)),
        (Cmp::Gt, Ordering::Equal) => (Excluded(b), Unbounded),
        (Cmp::Ge, Ordering::Equal) => (Included(b), Unbounded),
        // The key value below c: keys up to it are below c, keys after it above.
        (Cmp::Lt | Cmp::Le, Ordering::Less) => (Unbounded, Included(b)),
        (Cmp::Gt | Cmp::Ge, Ordering::Less) => (Excluded(b), Unbounded),
        // The key value above c.
        (Cmp::Lt | Cmp::Le, Ordering::Greater) => (Unbounded, Excluded(b)),
        (Cmp::Gt | Cmp::Ge, Ordering::Greater) => (Included(b), Unbounded),
    };
    Some(vec![Interval { lo, hi }])
}

/// Value `c` converted to key type `col`, stored, and how the stored value compares with
/// `c` (invariant 3); None when the comparison cannot be reasoned about exactly.
fn converted_key(col: SqlType, c: &Value) -> Option<(Vec<u8>, Ordering)> {
    if !exactly_comparable(col, c) {
        return None;
    }
    let v = convert(c, col, None).ok().filter(|v| !v.is_null())?;
    let o = ops::compare(&v, c).ok()??;
    Some((rowcodec::encode(col, &v).ok()??, o))
}

/// The bound text `s` is for a character key column of type `col` (invariant 2): its
/// characters as the column stores them (Latin-1 bytes, or UTF-16LE), without trailing
/// spaces and not cut to the column's length, since `key::compare` orders stored values
/// against any length exactly as `ops::compare` orders the text (a cut would change the
/// order, and a too-long value may still equal a stored one: `'ß'` equals `'ss'`). None
/// for text a non-Unicode column cannot hold (a character beyond Latin-1 would become
/// `'?'`): the conjunct narrows nothing.
fn text_key(col: SqlType, s: &str) -> Option<Vec<u8>> {
    let s = collation::trimmed(s);
    match col {
        SqlType::Char(_) | SqlType::VarChar(_) => s.chars().map(|c| u8::try_from(c).ok()).collect(),
        SqlType::NChar(_) | SqlType::NVarChar(_) => {
            Some(s.encode_utf16().flat_map(u16::to_le_bytes).collect())
        }
        _ => None,
    }
}

fn value_cmp(tid: u8, a: &[u8], b: &[u8]) -> Ordering {
    key::compare(tid, Some(a), Some(b))
}

/// Lower bounds in order: unbounded first, then by value, an included value before the
/// excluded same value.
fn lo_order(tid: u8, a: &Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> Ordering {
    use Bound::{Excluded, Included, Unbounded};
    match (a, b) {
        (Unbounded, Unbounded) => Ordering::Equal,
        (Unbounded, _) => Ordering::Less,
        (_, Unbounded) => Ordering::Greater,
        (Included(x) | Excluded(x), Included(y) | Excluded(y)) => {
            value_cmp(tid, x, y).then(matches!(a, Excluded(_)).cmp(&matches!(b, Excluded(_))))
        }
    }
}

/// Upper bounds in order: by value, an excluded value before the included same value,
/// unbounded last.
fn hi_order(tid: u8, a: &Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> Ordering {
    use Bound::{Excluded, Included, Unbounded};
    match (a, b) {
        (Unbounded, Unbounded) => Ordering::Equal,
        (Unbounded, _) => Ordering::Greater,
        (_, Unbounded) => Ordering::Less,
        (Included(x) | Excluded(x), Included(y) | Excluded(y)) => {
            value_cmp(tid, x, y).then(matches!(a, Included(_)).cmp(&matches!(b, Included(_))))
        }
    }
}

/// True when no value lies between `lo` and `hi`.
fn is_empty(tid: u8, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    use Bound::{Excluded, Included};
    match (lo, hi) {
        (Included(a) | Excluded(a), Included(b) | Excluded(b)) => match value_cmp(tid, a, b) {
            Ordering::Greater => true,
            Ordering::Equal => !matches!((lo, hi), (Included(_), Included(_))),
            Ordering::Less => false,
        },
        _ => false,
    }
}

/// The intersection of two sets of sorted, disjoint intervals (sorted and disjoint too).
fn intersect(tid: u8, a: &[Interval], b: &[Interval]) -> ColumnSet {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let lo = match lo_order(tid, &a[i].lo, &b[j].lo) {
            Ordering::Less => b[j].lo.clone(),
            _ => a[i].lo.clone(),
        };
        let first_ends = hi_order(tid, &a[i].hi, &b[j].hi);
        let hi = match first_ends {
            Ordering::Greater => b[j].hi.clone(),
            _ => a[i].hi.clone(),
        };
        if !is_empty(tid, &lo, &hi) {
            out.push(Interval { lo, hi });
        }
        match first_ends {
            Ordering::Less => i += 1,
            Ordering::Greater => j += 1,
            Ordering::Equal => (i, j) = (i + 1, j + 1),
        }
    }
    out
}

/// A key prefix extended by one column's bound.
fn extended(prefix: &KeyPrefix, b: &Bound<Vec<u8>>) -> Bound<KeyPrefix> {
    let with = |v: &Vec<u8>| {
        let mut p = prefix.clone();
        p.push(Some(v.clone()));
        p
    };
    match b {
        Bound::Included(v) => Bound::Included(with(v)),
        Bound::Excluded(v) => Bound::Excluded(with(v)),
        Bound::Unbounded if prefix.is_empty() => Bound::Unbounded,
        Bound::Unbounded => Bound::Included(prefix.clone()),
    }
}

/// The key ranges the columns' sets allow, ascending and disjoint: the product of the
/// leading columns held to points, then the intervals of the first column that is not.
/// None when the first key column is not narrowed (the statement scans).
fn key_ranges(sets: &[Option<ColumnSet>]) -> Option<Vec<KeyRange>> {
    let mut prefixes: Vec<KeyPrefix> = vec![Vec::new()];
    for set in sets {
        let Some(set) = set else { break };
        if set.is_empty() {
            return Some(Vec::new());
        }
        if prefixes.len() * set.len() > MAX_RANGES {
            break;
        }
        let points: Option<Vec<&Vec<u8>>> = set.iter().map(Interval::point).collect();
        let Some(points) = points else {
            let mut ranges = Vec::with_capacity(prefixes.len() * set.len());
            for p in &prefixes {
                for i in set {
                    ranges.push(KeyRange {
                        lower: extended(p, &i.lo),
                        upper: extended(p, &i.hi),
                    });
                }
            }
            return Some(ranges);
        };
        prefixes = prefixes
            .iter()
            .flat_map(|p| {
                points.iter().map(move |v| {
                    let mut p = p.clone();
                    p.push(Some((*v).clone()));
                    p
                })
            })
            .collect();
    }
    if prefixes.len() == 1 && prefixes[0].is_empty() {
        return None;
    }
    Some(
        prefixes
            .into_iter()
            .map(|p| KeyRange {
                lower: Bound::Included(p.clone()),
                upper: Bound::Included(p),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use extentdb_format::key::type_id;

    fn int(v: i32) -> Vec<u8> {
        v.to_le_bytes().to_vec()
    }

    fn iv(lo: Bound<i32>, hi: Bound<i32>) -> Interval {
        Interval {
            lo: lo.map(int),
            hi: hi.map(int),
        }
    }

    /// Proves intersection keeps what both sets allow, drops what either excludes, and
    /// treats an excluded bound as narrower than the included same value.
    #[test]
    fn intervals_intersect() {
        use Bound::{Excluded, Included, Unbounded};
        let t = type_id::INT;
        let a = vec![iv(Unbounded, Excluded(10))];
        let b = vec![iv(Included(3), Unbounded)];
        assert_eq!(intersect(t, &a, &b), vec![iv(Included(3), Excluded(10))]);
        let points = vec![iv(Included(1), Included(1)), iv(Included(5), Included(5))];
        assert_eq!(
            intersect(t, &points, &b),
            vec![iv(Included(5), Included(5))]
        );
        let c = vec![iv(Excluded(5), Unbounded)];
        assert!(intersect(t, &points, &c).is_empty());
        let d = vec![iv(Included(-300), Included(-300))];
        assert!(intersect(t, &d, &b).is_empty());
    }

    /// Proves a value that does not convert exactly moves the bound to the neighbouring
    /// key value and empties an equality; NULL allows nothing; floats narrow nothing.
    #[test]
    fn inexact_values_move_the_bound() {
        use Bound::{Excluded, Included, Unbounded};
        let half = Value::Decimal {
            unscaled: 15,
            scale: 1,
        };
        let set = |cmp| bound_set(SqlType::Int, cmp, &half).unwrap();
        assert!(set(Cmp::Eq).is_empty());
        assert_eq!(set(Cmp::Gt), vec![iv(Excluded(1), Unbounded)]);
        assert_eq!(set(Cmp::Ge), vec![iv(Excluded(1), Unbounded)]);
        assert_eq!(set(Cmp::Lt), vec![iv(Unbounded, Included(1))]);
        let neg = Value::Decimal {
            unscaled: -15,
            scale: 1,
        };
        assert_eq!(
            bound_set(SqlType::Int, Cmp::Ge, &neg).unwrap(),
            vec![iv(Included(-1), Unbounded)]
        );
        assert!(bound_set(SqlType::Int, Cmp::Eq, &Value::Null)
            .unwrap()
            .is_empty());
        assert_eq!(bound_set(SqlType::Int, Cmp::Eq, &Value::Float(1.0)), None);
        assert_eq!(bound_set(SqlType::Bit, Cmp::Gt, &Value::Int(-3)), None);
        // Out of the key type's range: no narrowing, never a wrong bound.
        assert_eq!(bound_set(SqlType::TinyInt, Cmp::Lt, &Value::Int(-1)), None);
    }

    /// Proves composite keys narrow by an equality prefix then a range, and stop at the
    /// first column nothing narrows.
    #[test]
    fn composite_ranges() {
        use Bound::{Excluded, Included, Unbounded};
        let p = |v: i32| Some(vec![iv(Included(v), Included(v))]);
        let sets = vec![p(1), Some(vec![iv(Excluded(7), Unbounded)])];
        let r = key_ranges(&sets).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(
            r[0].lower,
            Bound::Excluded(vec![Some(int(1)), Some(int(7))])
        );
        assert_eq!(r[0].upper, Bound::Included(vec![Some(int(1))]));
        assert_eq!(key_ranges(&[None, p(3)]), None);
        let two = Some(vec![
            iv(Included(1), Included(1)),
            iv(Included(2), Included(2)),
        ]);
        let r = key_ranges(&[two, None, p(9)]).unwrap();
        assert_eq!(r.len(), 2);
        assert!(r[0].is_point(1) && r[1].is_point(1));
        assert_eq!(key_ranges(&[Some(Vec::new()), p(1)]), Some(Vec::new()));
    }

    /// Proves a text bound on a character key orders stored values exactly as SQL's
    /// comparison orders them against the unconverted text, also for text longer than the
    /// column (`'ss'` equals a stored `'ß'`), and that text a varchar column cannot hold
    /// narrows nothing while a number against a character key narrows nothing either.
    #[test]
    fn text_bounds_are_exact() {
        let col = SqlType::VarChar(2);
        let stored = [
            "\u{df}", "a", "A_", "s", "SS", "_", "[", "\u{e9}", "E", "z ",
        ];
        let literals = [
            "ss", "SS  ", "sss", "a", "A_x", "_", "[", "\u{c9}", "e", "Z", "",
        ];
        for st in stored {
            let b = rowcodec::encode(col, &Value::Text(st.into()))
                .unwrap()
                .unwrap();
            for lit in literals {
                let k = text_key(col, lit).unwrap();
                let sql = ops::compare(&Value::Text(st.into()), &Value::Text(lit.into()));
                assert_eq!(
                    Some(key::compare(type_id::VARCHAR, Some(&b), Some(&k))),
                    sql.unwrap(),
                    "{st:?} / {lit:?}"
                );
            }
        }
        assert_eq!(text_key(col, "\u{3a9}"), None);
        assert_eq!(
            bound_set(col, Cmp::Eq, &Value::Text("\u{3a9}".into())),
            None
        );
        assert_eq!(bound_set(col, Cmp::Eq, &Value::Int(5)), None);
        assert!(bound_set(col, Cmp::Eq, &Value::Null).unwrap().is_empty());
        let n = text_key(SqlType::NVarChar(1), "\u{3a9}ab  ").unwrap();
        assert_eq!(
            n,
            "\u{3a9}ab"
                .encode_utf16()
                .flat_map(u16::to_le_bytes)
                .collect::<Vec<u8>>()
        );
        let eq = bound_set(col, Cmp::Eq, &Value::Text("abc ".into())).unwrap();
        assert_eq!(
            eq,
            vec![Interval {
                lo: Bound::Included(b"abc".to_vec()),
                hi: Bound::Included(b"abc".to_vec())
            }]
        );
    }
}
