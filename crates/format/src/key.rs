//! Ordering of stored column values, as B-tree keys compare them. Values are in their record
//! encoding (see the `sql` crate's row codec: little-endian integers, sign-and-magnitude
//! decimals, `datetime` as time then days, `datetime2` as time then date).
//!
//! Character columns compare by the server collation (`collation`: each character folded
//! to uppercase, trailing spaces ignored, accents kept), the one comparison the SQL layer's
//! text comparisons use too. NULL sorts before every value.
//!
//! Invariant: `compare` is a total order on the values of one type, and returns Equal for
//! two values exactly when a PRIMARY KEY would call them duplicates.

use std::cmp::Ordering;

use crate::collation::{self, latin1_chars, utf16_chars};
use type_id as id;

/// SQL Server's system type ids (sys.types.system_type_id), as the catalog stores them.
pub mod type_id {
    pub const BIT: u8 = 104;
    pub const TINYINT: u8 = 48;
    pub const SMALLINT: u8 = 52;
    pub const INT: u8 = 56;
    pub const BIGINT: u8 = 127;
    pub const DECIMAL: u8 = 106;
    pub const NUMERIC: u8 = 108;
    pub const FLOAT: u8 = 62;
    pub const REAL: u8 = 59;
    pub const CHAR: u8 = 175;
    pub const VARCHAR: u8 = 167;
    pub const NCHAR: u8 = 239;
    pub const NVARCHAR: u8 = 231;
    pub const BINARY: u8 = 173;
    pub const VARBINARY: u8 = 165;
    pub const DATE: u8 = 40;
    pub const DATETIME: u8 = 61;
    pub const DATETIME2: u8 = 42;
    pub const UNIQUEIDENTIFIER: u8 = 36;
}

fn le_signed(b: &[u8]) -> i128 {
    let mut v: i128 = 0;
    for (i, &x) in b.iter().enumerate() {
        v |= (x as i128) << (8 * i);
    }
    let bits = 8 * b.len() as u32;
    if bits > 0 && bits < 128 && (v >> (bits - 1)) & 1 == 1 {
        v -= 1i128 << bits;
    }
    v
}

fn le_unsigned(b: &[u8]) -> u128 {
    b.iter()
        .enumerate()
        .fold(0u128, |v, (i, &x)| v | (x as u128) << (8 * i))
}

fn float(b: &[u8]) -> f64 {
    match b.len() {
        4 => f32::from_le_bytes(b.try_into().expect("4")) as f64,
        8 => f64::from_le_bytes(b.try_into().expect("8")),
        _ => 0.0,
    }
}

/// Compares two stored values of one column of type `system_type_id`.
pub fn compare(system_type_id: u8, a: Option<&[u8]>, b: Option<&[u8]>) -> Ordering {
    let (a, b) = match (a, b) {
        (None, None) => return Ordering::Equal,
        (None, Some(_)) => return Ordering::Less,
        (Some(_), None) => return Ordering::Greater,
        (Some(a), Some(b)) => (a, b),
    };
    match system_type_id {
        id::TINYINT | id::BIT | id::DATE => le_unsigned(a).cmp(&le_unsigned(b)),
        id::SMALLINT | id::INT | id::BIGINT => le_signed(a).cmp(&le_signed(b)),
        id::DECIMAL | id::NUMERIC => {
            let signed = |x: &[u8]| {
                let m = le_unsigned(x.get(1..).unwrap_or(&[])) as i128;
                if x.first() == Some(&0) {
                    -m
                } else {
                    m
                }
            };
            signed(a).cmp(&signed(b))
        }
        id::FLOAT | id::REAL => float(a).total_cmp(&float(b)),
        id::CHAR | id::VARCHAR => collation::compare_trimmed(latin1_chars(a), latin1_chars(b)),
        id::NCHAR | id::NVARCHAR => collation::compare_trimmed(utf16_chars(a), utf16_chars(b)),
        id::DATETIME if a.len() == 8 && b.len() == 8 => {
            // Days (bytes 4-7) first, then the time of day (bytes 0-3).
            (le_signed(&a[4..]), le_unsigned(&a[..4]))
                .cmp(&(le_signed(&b[4..]), le_unsigned(&b[..4])))
        }
        id::DATETIME2 if a.len() > 3 && b.len() > 3 => {
            let split = |x: &[u8]| {
                let t = x.len() - 3;
                (le_unsigned(&x[t..]), le_unsigned(&x[..t]))
            };
            split(a).cmp(&split(b))
        }
        id::UNIQUEIDENTIFIER if a.len() == 16 && b.len() == 16 => {
            // SQL Server orders GUIDs by bytes 10-15, then 8-9, 6-7, 4-5, 0-3.
            let order = |x: &[u8]| -> Vec<u8> {
                let mut v = Vec::with_capacity(16);
                v.extend_from_slice(&x[10..16]);
                v.extend_from_slice(&x[8..10]);
                v.extend_from_slice(&x[6..8]);
                v.extend_from_slice(&x[4..6]);
                v.extend_from_slice(&x[0..4]);
                v
            };
            order(a).cmp(&order(b))
        }
        // Binary types and anything else: bytes, ignoring trailing zeros (binary(n) pads).
        _ => {
            let trim = |x: &[u8]| {
                let mut n = x.len();
                while n > 0 && x[n - 1] == 0 {
                    n -= 1;
                }
                n
            };
            a[..trim(a)].cmp(&b[..trim(b)])
        }
    }
}

/// Compares two keys column by column.
pub fn compare_keys(types: &[u8], a: &[Option<&[u8]>], b: &[Option<&[u8]>]) -> Ordering {
    for (i, t) in types.iter().enumerate() {
        let o = compare(*t, a.get(i).copied().flatten(), b.get(i).copied().flatten());
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// A hash of a key that agrees with `compare_keys`: keys it calls equal hash equal (each
/// value is hashed in the form `compare` decides on: characters folded and without trailing
/// spaces, numbers by value, binary without trailing zeros). KEY locks name rows by it.
pub fn hash_key(types: &[u8], key: &[Option<&[u8]>]) -> u64 {
    let mut h = Fnv::default();
    for (i, t) in types.iter().enumerate() {
        match key.get(i).copied().flatten() {
            None => h.add(&[0]),
            Some(v) => {
                h.add(&[1]);
                hash_value(&mut h, *t, v);
            }
        }
    }
    h.0
}

#[derive(Clone, Copy)]
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

fn hash_value(h: &mut Fnv, system_type_id: u8, v: &[u8]) {
    let chars = |h: &mut Fnv, c: &mut dyn Iterator<Item = char>| {
        for ch in c.flat_map(collation::fold) {
            h.add(&(ch as u32).to_le_bytes());
        }
    };
    match system_type_id {
        id::TINYINT | id::BIT | id::DATE => h.add(&le_unsigned(v).to_le_bytes()),
        id::SMALLINT | id::INT | id::BIGINT => h.add(&le_signed(v).to_le_bytes()),
        id::DECIMAL | id::NUMERIC => {
            let m = le_unsigned(v.get(1..).unwrap_or(&[]));
            let negative = v.first() == Some(&0) && m != 0;
            h.add(&[negative as u8]);
            h.add(&m.to_le_bytes());
        }
        id::FLOAT | id::REAL => h.add(&float(v).to_bits().to_le_bytes()),
        id::CHAR | id::VARCHAR => chars(h, &mut latin1_chars(v)),
        id::NCHAR | id::NVARCHAR => chars(h, &mut utf16_chars(v)),
        id::DATETIME | id::DATETIME2 | id::UNIQUEIDENTIFIER => h.add(v),
        _ => {
            let mut n = v.len();
            while n > 0 && v[n - 1] == 0 {
                n -= 1;
            }
            h.add(&v[..n]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves keys `compare_keys` calls equal hash equal, and that different keys mostly
    /// hash apart (case, trailing spaces, decimal zero's sign, binary padding).
    #[test]
    fn hash_agrees_with_compare() {
        let samples: Vec<(u8, Vec<Vec<u8>>)> = vec![
            (
                id::VARCHAR,
                vec![
                    b"abc".to_vec(),
                    b"ABC  ".to_vec(),
                    b"abd".to_vec(),
                    b"".to_vec(),
                    b" ".to_vec(),
                ],
            ),
            (
                id::NVARCHAR,
                vec![
                    "aé".encode_utf16().flat_map(|u| u.to_le_bytes()).collect(),
                    "AÉ ".encode_utf16().flat_map(|u| u.to_le_bytes()).collect(),
                ],
            ),
            (
                id::INT,
                vec![5i32.to_le_bytes().to_vec(), (-5i32).to_le_bytes().to_vec()],
            ),
            (
                id::DECIMAL,
                vec![
                    vec![0, 0, 0, 0, 0],
                    vec![1, 0, 0, 0, 0],
                    vec![1, 7, 0, 0, 0],
                ],
            ),
            (id::BINARY, vec![vec![1, 2, 0, 0], vec![1, 2], vec![1, 3]]),
        ];
        for (t, values) in &samples {
            for a in values {
                for b in values {
                    let equal = compare(*t, Some(a), Some(b)) == Ordering::Equal;
                    let (ha, hb) = (hash_key(&[*t], &[Some(a)]), hash_key(&[*t], &[Some(b)]));
                    if equal {
                        assert_eq!(ha, hb, "type {t}: {a:?} / {b:?}");
                    } else {
                        assert_ne!(ha, hb, "type {t}: {a:?} / {b:?}");
                    }
                }
            }
        }
        assert_ne!(
            hash_key(&[id::INT], &[None]),
            hash_key(&[id::INT], &[Some(&[0, 0, 0, 0])])
        );
    }

    /// Proves integers order by value, not by their little-endian bytes.
    #[test]
    fn integers_by_value() {
        let i = |v: i32| v.to_le_bytes().to_vec();
        let mut vals = [5, -1, 256, 0, -300, i32::MAX, i32::MIN];
        let mut enc: Vec<Vec<u8>> = vals.iter().map(|v| i(*v)).collect();
        enc.sort_by(|a, b| compare(id::INT, Some(a), Some(b)));
        vals.sort();
        assert_eq!(enc, vals.iter().map(|v| i(*v)).collect::<Vec<_>>());
    }

    /// Proves character keys compare case-insensitively and ignore trailing spaces.
    #[test]
    fn characters_as_the_default_collation() {
        let c = |a: &str, b: &str| compare(id::VARCHAR, Some(a.as_bytes()), Some(b.as_bytes()));
        assert_eq!(c("abc", "ABC  "), Ordering::Equal);
        assert_eq!(c("abc", "abd"), Ordering::Less);
        assert_eq!(c("b", "A"), Ordering::Greater);
        let n = |s: &str| {
            s.encode_utf16()
                .flat_map(|u| u.to_le_bytes())
                .collect::<Vec<u8>>()
        };
        assert_eq!(
            compare(id::NVARCHAR, Some(&n("straße")), Some(&n("STRASSE"))),
            Ordering::Equal
        );
    }

    /// Proves NULL sorts first and decimals order by sign and magnitude.
    #[test]
    fn nulls_and_decimals() {
        assert_eq!(compare(id::INT, None, Some(&[0, 0, 0, 0])), Ordering::Less);
        let d = |neg: bool, m: u32| {
            let mut v = vec![if neg { 0 } else { 1 }];
            v.extend_from_slice(&m.to_le_bytes());
            v
        };
        assert_eq!(
            compare(id::DECIMAL, Some(&d(true, 5)), Some(&d(false, 1))),
            Ordering::Less
        );
        assert_eq!(
            compare(id::DECIMAL, Some(&d(true, 5)), Some(&d(true, 1))),
            Ordering::Less
        );
    }
}
