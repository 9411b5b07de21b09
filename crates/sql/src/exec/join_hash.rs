//! The hash index a nested loop join builds over a spooled inner input that fits in memory,
//! on the columns its ON clause equates with the outer input's (a hash join's build side):
//! for each outer row the join reads only the inner rows whose keys equal the outer row's,
//! instead of every inner row.
//!
//! Invariants:
//! 1. Keys are equal exactly when T-SQL's `=` finds the values equal (`ops::compare`): both
//!    columns are of one family (exact numbers, floating point, character, date and time,
//!    uniqueidentifier, binary), and each family's key is the value as that comparison sees
//!    it (a decimal without trailing zeros; text as the server collation folds it,
//!    `format::collation::folded`; date and time in ticks). Columns of different families
//!    (which compare through a conversion) are not keyed.
//! 2. A row whose key has a NULL is in no bucket and an outer row with a NULL key has no
//!    candidates: `=` with NULL is never true. A value of another family than its
//!    column's type (a derived table's column is typed by its first values) is never
//!    keyed: an inner one leaves the input unindexed, an outer one reads every inner row.
//! 3. The index only narrows: the join still evaluates all of ON on every candidate pair, so
//!    a wrong answer needs invariant 1 broken, never a mere hash collision.
//! 4. Memory: built only over a spool held wholly in memory (within `SORT_MEMORY_BYTES`);
//!    the index holds each keyed row's key once and its row number.

use std::collections::HashMap;

use super::eval::RowCtx;
use super::seek::flatten_and;
use crate::ast::{BinaryOp, Expr};
use crate::convert::{numeric_of, value_ticks, Num};
use crate::types::{SqlType, Value};

/// Types whose values compare with each other without a conversion that could change
/// which are equal (invariant 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Exact,
    Float,
    Text,
    Time,
    Guid,
    Bytes,
}

fn family(t: SqlType) -> Family {
    match t {
        SqlType::Bit
        | SqlType::TinyInt
        | SqlType::SmallInt
        | SqlType::Int
        | SqlType::BigInt
        | SqlType::Decimal { .. } => Family::Exact,
        SqlType::Float | SqlType::Real => Family::Float,
        SqlType::Char(_) | SqlType::VarChar(_) | SqlType::NChar(_) | SqlType::NVarChar(_) => {
            Family::Text
        }
        SqlType::Date | SqlType::DateTime | SqlType::DateTime2(_) => Family::Time,
        SqlType::UniqueIdentifier => Family::Guid,
        SqlType::Binary(_) | SqlType::VarBinary(_) => Family::Bytes,
    }
}

/// A value as `=` sees it (invariant 1).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Exact(i128, u8),
    Float(u64),
    Text(String),
    Time(i64),
    Bytes(Vec<u8>),
}

/// What a value keys as in family `f`.
enum Keyed {
    Key(Key),
    /// NULL: equal to nothing (invariant 2).
    Null,
    /// A value of another family (a derived table's column typed by its first values may
    /// hold others): no key is sure to match as `=` would.
    Foreign,
}

fn keyed(v: &Value, f: Family) -> Keyed {
    match (v, key(v, f)) {
        (Value::Null, _) => Keyed::Null,
        (_, Some(k)) => Keyed::Key(k),
        (_, None) => Keyed::Foreign,
    }
}

/// The key of a non-NULL value of family `f`; None for NULL or a value outside the family.
fn key(v: &Value, f: Family) -> Option<Key> {
    Some(match (f, v) {
        (_, Value::Null) => return None,
        (Family::Exact, v) => match numeric_of(v)? {
            Num::Int(i) => Key::Exact(i, 0),
            Num::Dec(mut u, mut s) => {
                while s > 0 && u % 10 == 0 {
                    u /= 10;
                    s -= 1;
                }
                Key::Exact(u, s)
            }
            Num::Float(_) => return None,
        },
        (Family::Float, v) => match numeric_of(v)? {
            // -0 equals 0.
            Num::Float(x) => Key::Float(if x == 0.0 { 0 } else { x.to_bits() }),
            _ => return None,
        },
        (Family::Text, Value::Text(s)) => Key::Text(extentdb_format::collation::folded(s)),
        (Family::Time, v) => Key::Time(value_ticks(v)?),
        (Family::Guid, Value::Guid(g)) => Key::Bytes(g.to_vec()),
        (Family::Bytes, Value::Binary(b)) => Key::Bytes(b.clone()),
        _ => return None,
    })
}

/// The (outer column, inner column, family) pairs ON's top-level AND equates: `x = y`
/// with one a column of the outer input only and the other of the inner input only,
/// both of one family.
pub(super) fn equi_columns(
    on: &Expr,
    outer: &RowCtx<'_>,
    inner: &RowCtx<'_>,
) -> Vec<(usize, usize, SqlType)> {
    let mut conjuncts = Vec::new();
    flatten_and(on, &mut conjuncts);
    let side = |e: &Expr| -> Option<(bool, usize)> {
        let Expr::Column(n) = e else {
            return None;
        };
        match (outer.position(n), inner.position(n)) {
            (Some(i), None) => Some((true, i)),
            (None, Some(i)) => Some((false, i)),
            _ => None,
        }
    };
    let mut pairs = Vec::new();
    for c in conjuncts {
        let Expr::Binary {
            left,
            op: BinaryOp::Equal,
            right,
        } = c
        else {
            continue;
        };
        let (o, i) = match (side(left), side(right)) {
            (Some((true, o)), Some((false, i))) | (Some((false, i)), Some((true, o))) => (o, i),
            _ => continue,
        };
        let (to, ti) = (outer.columns[o].1, inner.columns[i].1);
        if family(to) == family(ti) {
            pairs.push((o, i, ti));
        }
    }
    pairs
}

/// The inner rows by their keys on the equated columns.
pub(super) struct HashIndex {
    outer: Vec<usize>,
    families: Vec<Family>,
    buckets: HashMap<Vec<Key>, Vec<u32>>,
}

impl HashIndex {
    /// Indexes `rows` (the whole inner input, in memory) on the pairs' inner columns; None
    /// when a row holds a value of another family there (the join reads every row then).
    pub fn build(rows: &[Vec<Value>], pairs: &[(usize, usize, SqlType)]) -> Option<HashIndex> {
        let families: Vec<Family> = pairs.iter().map(|p| family(p.2)).collect();
        let mut buckets: HashMap<Vec<Key>, Vec<u32>> = HashMap::new();
        'rows: for (n, row) in rows.iter().enumerate() {
            let mut keys = Vec::with_capacity(pairs.len());
            for (p, f) in pairs.iter().zip(&families) {
                match keyed(&row[p.1], *f) {
                    Keyed::Key(k) => keys.push(k),
                    Keyed::Null => continue 'rows,
                    Keyed::Foreign => return None,
                }
            }
            buckets.entry(keys).or_default().push(n as u32);
        }
        Some(HashIndex {
            outer: pairs.iter().map(|p| p.0).collect(),
            families,
            buckets,
        })
    }

    /// The inner rows (by number) whose keys equal the outer row's: none for a NULL key;
    /// None (read them all) for a value of another family.
    pub fn candidates(&self, outer: &[Value]) -> Option<Vec<u32>> {
        let mut keys = Vec::with_capacity(self.outer.len());
        for (i, f) in self.outer.iter().zip(&self.families) {
            match keyed(&outer[*i], *f) {
                Keyed::Key(k) => keys.push(k),
                Keyed::Null => return Some(Vec::new()),
                Keyed::Foreign => return None,
            }
        }
        Some(self.buckets.get(&keys).cloned().unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;

    /// Proves invariant 1 over values of each family: keys are equal exactly when `=` is.
    #[test]
    fn keys_are_equal_exactly_when_values_are() {
        let groups: Vec<(SqlType, Vec<Value>)> = vec![
            (
                SqlType::Decimal {
                    precision: 10,
                    scale: 2,
                },
                vec![
                    Value::Int(1),
                    Value::BigInt(1),
                    Value::Decimal {
                        unscaled: 100,
                        scale: 2,
                    },
                    Value::Decimal {
                        unscaled: 10,
                        scale: 1,
                    },
                    Value::Int(10),
                    Value::Decimal {
                        unscaled: 101,
                        scale: 2,
                    },
                    Value::TinyInt(0),
                    Value::Int(-1),
                ],
            ),
            (
                SqlType::VarChar(10),
                [
                    "abc", "ABC", "abc  ", "ab", "Ab c", "ab c", "ß", "SS", "é", "e",
                ]
                .iter()
                .map(|s| Value::Text(s.to_string()))
                .collect(),
            ),
            (
                SqlType::Float,
                vec![
                    Value::Float(0.0),
                    Value::Float(-0.0),
                    Value::Float(1.5),
                    Value::Real(1.5),
                ],
            ),
        ];
        for (t, values) in groups {
            let f = family(t);
            for a in &values {
                for b in &values {
                    let equal = matches!(ops::compare(a, b), Ok(Some(std::cmp::Ordering::Equal)));
                    assert_eq!(key(a, f) == key(b, f), equal, "{a:?} = {b:?}");
                }
            }
            assert_eq!(key(&Value::Null, f), None);
        }
    }

    /// Proves a column holding a value of another family than its type's is not indexed
    /// (so no row is missed), and an outer value of another family reads every row.
    #[test]
    fn values_of_another_family_are_never_keyed() {
        let pairs = [(0, 0, SqlType::Int)];
        let rows = vec![vec![Value::Int(5)], vec![Value::Text("5".into())]];
        assert!(HashIndex::build(&rows, &pairs).is_none());
        let rows = vec![vec![Value::Int(5)], vec![Value::Null]];
        let index = HashIndex::build(&rows, &pairs).unwrap();
        assert_eq!(index.candidates(&[Value::Int(5)]), Some(vec![0]));
        assert_eq!(index.candidates(&[Value::Null]), Some(vec![]));
        assert_eq!(index.candidates(&[Value::Text("5".into())]), None);
    }
}
