//! Column values as a data record stores them: the catalog's description of a column type
//! (`sys.columns`' `system_type_id`, `max_length`, `precision`, `scale`), the bytes of one
//! value in SQL Server's on-disk encoding, and the assignment rules INSERT and UPDATE apply
//! before a value is stored.
//!
//! The record format (null bitmap, variable-length offsets) belongs to
//! `extentdb_format::record`; this module only says how wide a column is ([`layout`]) and
//! what its bytes are ([`encode`], [`decode`]).
//!
//! Encodings, all little-endian, as SQL Server lays them out in a data record:
//!
//! | type | bytes |
//! |------|-------|
//! | `bit` | 1: `0` or `1` |
//! | `tinyint`, `smallint`, `int`, `bigint` | 1, 2, 4, 8: two's complement |
//! | `real`, `float` | 4, 8: IEEE 754 bits |
//! | `decimal(p, s)` | 1 sign byte (`1` positive, `0` negative), then the unscaled magnitude as an unsigned integer in 4/8/12/16 bytes for p <= 9/19/28/38 |
//! | `char(n)`, `varchar(n)` | one byte per character (Latin-1); `char` padded with spaces to n |
//! | `nchar(n)`, `nvarchar(n)` | UTF-16LE; `nchar` padded with U+0020 to 2n bytes |
//! | `binary(n)`, `varbinary(n)` | the bytes; `binary` padded with `0x00` to n |
//! | `date` | 3: days since 0001-01-01 |
//! | `datetime` | 8: `u32` 1/300-second ticks since midnight, then `i32` days since 1900-01-01 |
//! | `datetime2(p)` | 3/4/5 (p <= 2 / <= 4 / <= 7): units of 10^-p s since midnight, then 3: days since 0001-01-01 |
//! | `uniqueidentifier` | 16: as `Value::Guid` holds them (SQL Server's storage order) |
//!
//! `datetime` stores the time first on disk (the low double word of an 8-byte integer),
//! unlike `CAST(... AS BINARY(8))` and TDS, which put the days first.
//!
//! Invariants:
//! 1. `decode(t, encode(t, v)?.as_deref()) == v` for every `v` that [`assign`] returns for
//!    `t`: the stored form loses nothing the column type keeps.
//! 2. An encoded fixed-length value is exactly as long as [`layout`] says; a
//!    variable-length one is never longer than the column's `max_length`.
//! 3. `sql_type(stored_type(t)) == Some(t)` for every valid declared type, and `sql_type`
//!    accepts nothing `stored_type` cannot produce (except `numeric`, id 108, which reads
//!    back as `decimal`).
//! 4. [`decode`] validates every byte it reads (lengths, sign bytes, ranges, UTF-16) and
//!    returns a reason, never panics: its input comes from disk.
//!
//! Deliberate differences from SQL Server:
//! - `bit` columns take one byte each; SQL Server packs up to eight into a byte.
//! - Non-Unicode text is Latin-1, not code page 1252: a character above U+00FF (including
//!   `€`, which 1252 has at 0x80) is stored as `?`, and bytes 0x80-0x9F read back as
//!   U+0080-U+009F.
//! - `numeric` reads back as `decimal` (`SqlType` does not tell them apart), so a catalog
//!   row written by [`stored_type`] always says 106.
//!
//! Not here: the record header, null bitmap and offset array; row-overflow and LOB storage
//! of `MAX` values (a `MAX` value is encoded in full, in row); NOT NULL checks (Msg 515)
//! and the choice of table and column names for messages.

use crate::convert::{
    convert_from, data_type_name, fits_precision, hex_upper, rescale, round_datetime,
    round_datetime2, type_of, DAYS_TO_1900, MAX_TICKS,
};
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value, MAX_LENGTH, TICKS_PER_DAY, TICKS_PER_SECOND};

/// `sys.types.system_type_id` of each type extentdb stores.
pub use extentdb_format::key::type_id;

/// The longest `char`, `varchar`, `binary` and `varbinary` (and, in bytes, `nchar` and
/// `nvarchar`) a column can declare short of `MAX`.
pub const MAX_DECLARED_BYTES: u32 = 8000;

/// Days from 0001-01-01 to 10000-01-01: one past the last `date`.
const DAYS_TO_10000: i32 = (MAX_TICKS / TICKS_PER_DAY) as i32;
/// The first `datetime` day (1753-01-01) in days since 1900-01-01.
const DATETIME_MIN_DAYS: i32 = -53_690;
/// The last `datetime` day (9999-12-31) in days since 1900-01-01.
const DATETIME_MAX_DAYS: i32 = DAYS_TO_10000 - 1 - DAYS_TO_1900;
/// `datetime`'s 1/300-second ticks in one day.
const DATETIME_TICKS_PER_DAY: u32 = 300 * 86_400;

const _: () = assert!(DAYS_TO_10000 == 3_652_059);
const _: () = assert!(DATETIME_MAX_DAYS == 2_958_463);
const _: () = assert!(MAX_DECLARED_BYTES <= i16::MAX as u32);

/// A column's type as stored in the catalog, as `sys.columns` reports it: SQL Server's
/// `system_type_id`, `max_length` in bytes (-1 for `MAX`; `nvarchar(10)` is 20),
/// `precision` and `scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredType {
    pub system_type_id: u8,
    pub max_length: i16,
    pub precision: u8,
    pub scale: u8,
}

/// Where a column lives in a record: in the fixed-length part with its width in bytes, or
/// in the variable-length part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Fixed(u16),
    Variable,
}

/// The catalog row of a declared type. Precision and scale are those `sys.columns` shows:
/// `int` 10,0; `datetime` 23,3; `datetime2(n)` 19,0 for n = 0 and 20+n,n otherwise;
/// character and binary types 0,0.
///
/// Precondition: `t` is a type the parser accepts (lengths 1..=8000 bytes or `MAX` for the
/// variable types, decimal precision 1..=38, datetime2 scale 0..=7).
pub fn stored_type(t: SqlType) -> StoredType {
    use type_id as id;
    let (system_type_id, max_length, precision, scale) = match t {
        SqlType::Bit => (id::BIT, 1, 1, 0),
        SqlType::TinyInt => (id::TINYINT, 1, 3, 0),
        SqlType::SmallInt => (id::SMALLINT, 2, 5, 0),
        SqlType::Int => (id::INT, 4, 10, 0),
        SqlType::BigInt => (id::BIGINT, 8, 19, 0),
        SqlType::Decimal { precision, scale } => (
            id::DECIMAL,
            decimal_size(precision) as i16,
            precision,
            scale,
        ),
        SqlType::Float => (id::FLOAT, 8, 53, 0),
        SqlType::Real => (id::REAL, 4, 24, 0),
        SqlType::Char(n) => (id::CHAR, declared_bytes(n, 1), 0, 0),
        SqlType::VarChar(n) => (id::VARCHAR, declared_bytes(n, 1), 0, 0),
        SqlType::NChar(n) => (id::NCHAR, declared_bytes(n, 2), 0, 0),
        SqlType::NVarChar(n) => (id::NVARCHAR, declared_bytes(n, 2), 0, 0),
        SqlType::Binary(n) => (id::BINARY, declared_bytes(n, 1), 0, 0),
        SqlType::VarBinary(n) => (id::VARBINARY, declared_bytes(n, 1), 0, 0),
        SqlType::Date => (id::DATE, 3, 10, 0),
        SqlType::DateTime => (id::DATETIME, 8, 23, 3),
        SqlType::DateTime2(p) => {
            let precision = if p == 0 { 19 } else { 20 + p };
            (id::DATETIME2, 3 + time_size(p) as i16, precision, p)
        }
        SqlType::UniqueIdentifier => (id::UNIQUEIDENTIFIER, 16, 0, 0),
    };
    StoredType {
        system_type_id,
        max_length,
        precision,
        scale,
    }
}

/// `max_length` of a declared length of `n` units of `unit_bytes` each; -1 for `MAX`.
fn declared_bytes(n: u32, unit_bytes: u32) -> i16 {
    if n == MAX_LENGTH {
        return -1;
    }
    let bytes = n.saturating_mul(unit_bytes);
    debug_assert!(
        (1..=MAX_DECLARED_BYTES).contains(&bytes),
        "declared length {n} x {unit_bytes} bytes is not a valid column length"
    );
    bytes.min(i16::MAX as u32) as i16
}

/// The declared type of a catalog row; None when the row is not one [`stored_type`] can
/// produce (an unknown type id, a length or precision out of range): a corrupt catalog.
pub fn sql_type(t: StoredType) -> Option<SqlType> {
    use type_id as id;
    let candidate = match t.system_type_id {
        id::BIT => SqlType::Bit,
        id::TINYINT => SqlType::TinyInt,
        id::SMALLINT => SqlType::SmallInt,
        id::INT => SqlType::Int,
        id::BIGINT => SqlType::BigInt,
        id::DECIMAL | id::NUMERIC => {
            if !(1..=38).contains(&t.precision) || t.scale > t.precision {
                return None;
            }
            SqlType::Decimal {
                precision: t.precision,
                scale: t.scale,
            }
        }
        id::FLOAT => SqlType::Float,
        id::REAL => SqlType::Real,
        id::CHAR => SqlType::Char(declared_units(t.max_length, 1, false)?),
        id::VARCHAR => SqlType::VarChar(declared_units(t.max_length, 1, true)?),
        id::NCHAR => SqlType::NChar(declared_units(t.max_length, 2, false)?),
        id::NVARCHAR => SqlType::NVarChar(declared_units(t.max_length, 2, true)?),
        id::BINARY => SqlType::Binary(declared_units(t.max_length, 1, false)?),
        id::VARBINARY => SqlType::VarBinary(declared_units(t.max_length, 1, true)?),
        id::DATE => SqlType::Date,
        id::DATETIME => SqlType::DateTime,
        id::DATETIME2 if t.scale <= 7 => SqlType::DateTime2(t.scale),
        id::UNIQUEIDENTIFIER => SqlType::UniqueIdentifier,
        _ => return None,
    };
    // Every other field must be what stored_type writes, so a flipped byte in the catalog
    // cannot silently change a column's width.
    let mut expected = stored_type(candidate);
    if t.system_type_id == id::NUMERIC {
        expected.system_type_id = id::NUMERIC;
    }
    (expected == t).then_some(candidate)
}

/// The declared length in units of a `max_length`, or None when it is not a valid one.
fn declared_units(max_length: i16, unit_bytes: i16, allow_max: bool) -> Option<u32> {
    if max_length == -1 && allow_max {
        return Some(MAX_LENGTH);
    }
    let valid = max_length >= unit_bytes
        && max_length as u32 <= MAX_DECLARED_BYTES
        && max_length % unit_bytes == 0;
    valid.then_some((max_length / unit_bytes) as u32)
}

/// Where a column of type `t` goes in a record. `varchar`, `nvarchar` and `varbinary` are
/// variable-length; everything else is fixed at its `max_length`, `bit` included (one byte
/// per column: extentdb does not pack bits as SQL Server does).
pub fn layout(t: SqlType) -> Layout {
    match t {
        SqlType::VarChar(_) | SqlType::NVarChar(_) | SqlType::VarBinary(_) => Layout::Variable,
        _ => {
            let width = stored_type(t).max_length;
            debug_assert!(width > 0, "fixed-length type {t:?} without a length");
            Layout::Fixed(width.max(0) as u16)
        }
    }
}

/// Bytes of a `decimal(precision, _)` value: the sign byte and 4, 8, 12 or 16 bytes (on
/// disk and, after a length byte, in TDS).
pub fn decimal_size(precision: u8) -> usize {
    match precision {
        0..=9 => 5,
        10..=19 => 9,
        20..=28 => 13,
        _ => 17,
    }
}

/// Bytes of the time part of a `datetime2(scale)` (on disk and in TDS).
pub fn time_size(scale: u8) -> usize {
    match scale {
        0..=2 => 3,
        3..=4 => 4,
        _ => 5,
    }
}

/// 100 ns ticks in one unit of a `datetime2(scale)` time part.
fn ticks_per_unit(scale: u8) -> i64 {
    10i64.pow(7 - scale.min(7) as u32)
}

// ---------------------------------------------------------------------------------------
// Encoding

/// The stored bytes of `v` in a column of type `t`; None for NULL.
///
/// `v` must already have the column's type (INSERT and UPDATE call [`assign`] first). A
/// value of another kind is Msg 206; a value that does not fit (a decimal past its
/// precision, a date out of range) is Msg 8115; text or binary longer than the column is
/// Msg 8152. A `datetime` or `datetime2` value between steps of the type's precision is
/// rounded as conversion rounds it; a decimal of another scale is accepted only when
/// rescaling it is exact.
pub fn encode(t: SqlType, v: &Value) -> Result<Option<Vec<u8>>, SqlError> {
    let bytes = match (t, v) {
        (_, Value::Null) => return Ok(None),
        (SqlType::Bit, Value::Bit(b)) => vec![*b as u8],
        (SqlType::TinyInt, Value::TinyInt(x)) => vec![*x],
        (SqlType::SmallInt, Value::SmallInt(x)) => x.to_le_bytes().to_vec(),
        (SqlType::Int, Value::Int(x)) => x.to_le_bytes().to_vec(),
        (SqlType::BigInt, Value::BigInt(x)) => x.to_le_bytes().to_vec(),
        (
            SqlType::Decimal { precision, scale },
            Value::Decimal {
                unscaled,
                scale: from,
            },
        ) => encode_decimal(t, precision, scale, *unscaled, *from)?,
        (SqlType::Float, Value::Float(f)) if f.is_finite() => f.to_le_bytes().to_vec(),
        (SqlType::Real, Value::Real(f)) if f.is_finite() => f.to_le_bytes().to_vec(),
        (SqlType::Float | SqlType::Real, Value::Float(_) | Value::Real(_)) => {
            return Err(msg(3623, &[]))
        }
        (SqlType::Char(n) | SqlType::VarChar(n), Value::Text(s)) => {
            let fixed = matches!(t, SqlType::Char(_));
            fit_bytes(latin1(s), n, fixed, b' ')?
        }
        (SqlType::NChar(n) | SqlType::NVarChar(n), Value::Text(s)) => {
            let fixed = matches!(t, SqlType::NChar(_));
            encode_utf16(s, n, fixed)?
        }
        (SqlType::Binary(n) | SqlType::VarBinary(n), Value::Binary(b)) => {
            fit_bytes(b.clone(), n, matches!(t, SqlType::Binary(_)), 0)?
        }
        (SqlType::Date, Value::Date(d)) => {
            if !(0..DAYS_TO_10000).contains(d) {
                return Err(overflow(t));
            }
            d.to_le_bytes()[..3].to_vec()
        }
        (SqlType::DateTime, Value::DateTime(ticks)) => encode_datetime(*ticks)?,
        (SqlType::DateTime2(p), Value::DateTime2(ticks)) => encode_datetime2(*ticks, p)?,
        (SqlType::UniqueIdentifier, Value::Guid(g)) => g.to_vec(),
        _ => {
            let from = data_type_name(type_of(v));
            return Err(msg(206, &[&from, &data_type_name(t)]));
        }
    };
    debug_assert!(match layout(t) {
        Layout::Fixed(width) => bytes.len() == width as usize,
        Layout::Variable => true,
    });
    Ok(Some(bytes))
}

/// Msg 8115 for a value too large for its column type.
fn overflow(t: SqlType) -> SqlError {
    msg(8115, &[&"expression", &data_type_name(t)])
}

fn encode_decimal(
    t: SqlType,
    precision: u8,
    scale: u8,
    unscaled: i128,
    from: u8,
) -> Result<Vec<u8>, SqlError> {
    let exact =
        rescale(unscaled, from, scale).filter(|&u| rescale(u, scale, from) == Some(unscaled));
    let unscaled = match exact {
        Some(u) if fits_precision(u, precision) && precision <= 38 => u,
        _ => return Err(overflow(t)),
    };
    let size = decimal_size(precision);
    let mut bytes = Vec::with_capacity(size);
    bytes.push((unscaled >= 0) as u8);
    bytes.extend_from_slice(&unscaled.unsigned_abs().to_le_bytes()[..size - 1]);
    Ok(bytes)
}

/// Text as one byte per character, `?` for characters Latin-1 lacks.
/// Stored Latin-1 bytes as text: an ASCII value (the common case) is its bytes as they
/// are, one copy; any other byte is its Latin-1 character, two UTF-8 bytes.
fn latin1_text(b: &[u8]) -> String {
    if b.is_ascii() {
        return String::from_utf8(b.to_vec()).expect("ASCII is UTF-8");
    }
    b.iter().map(|&c| c as char).collect()
}

fn latin1(s: &str) -> Vec<u8> {
    if s.is_ascii() {
        return s.as_bytes().to_vec();
    }
    s.chars()
        .map(|c| u8::try_from(c as u32).unwrap_or(b'?'))
        .collect()
}

/// Checks `bytes` against a declared length of `n` bytes and pads fixed-length values.
fn fit_bytes(mut bytes: Vec<u8>, n: u32, fixed: bool, pad: u8) -> Result<Vec<u8>, SqlError> {
    if n == MAX_LENGTH {
        return Ok(bytes);
    }
    if bytes.len() > n as usize {
        return Err(msg(8152, &[]));
    }
    if fixed {
        bytes.resize(n as usize, pad);
    }
    Ok(bytes)
}

fn encode_utf16(s: &str, n: u32, fixed: bool) -> Result<Vec<u8>, SqlError> {
    let mut units: Vec<u16> = s.encode_utf16().collect();
    if n != MAX_LENGTH {
        if units.len() > n as usize {
            return Err(msg(8152, &[]));
        }
        if fixed {
            units.resize(n as usize, 0x0020);
        }
    }
    Ok(units.iter().flat_map(|u| u.to_le_bytes()).collect())
}

fn encode_datetime(ticks: i64) -> Result<Vec<u8>, SqlError> {
    let ticks = round_datetime(ticks);
    let days = ticks.div_euclid(TICKS_PER_DAY) - DAYS_TO_1900 as i64;
    if !(DATETIME_MIN_DAYS as i64..=DATETIME_MAX_DAYS as i64).contains(&days) {
        return Err(overflow(SqlType::DateTime));
    }
    // The inverse of round_datetime's step: the tick count is on the 1/300 s grid.
    let time = (ticks.rem_euclid(TICKS_PER_DAY) * 300 + TICKS_PER_SECOND / 2) / TICKS_PER_SECOND;
    debug_assert!(time < DATETIME_TICKS_PER_DAY as i64);
    let mut bytes = (time as u32).to_le_bytes().to_vec();
    bytes.extend_from_slice(&(days as i32).to_le_bytes());
    Ok(bytes)
}

fn encode_datetime2(ticks: i64, scale: u8) -> Result<Vec<u8>, SqlError> {
    let ticks = round_datetime2(ticks, scale);
    if !(0..MAX_TICKS).contains(&ticks) {
        return Err(overflow(SqlType::DateTime2(scale)));
    }
    let units = ticks.rem_euclid(TICKS_PER_DAY) / ticks_per_unit(scale);
    let days = ticks.div_euclid(TICKS_PER_DAY);
    let mut bytes = units.to_le_bytes()[..time_size(scale)].to_vec();
    bytes.extend_from_slice(&days.to_le_bytes()[..3]);
    Ok(bytes)
}

// ---------------------------------------------------------------------------------------
// Decoding

/// The value stored as `bytes` in a column of type `t` (None is NULL). Bytes of the wrong
/// length or out of the type's range give the reason as text; the caller makes it a
/// corruption error with the page and slot it knows.
pub fn decode(t: SqlType, bytes: Option<&[u8]>) -> Result<Value, String> {
    let Some(b) = bytes else {
        return Ok(Value::Null);
    };
    Ok(match t {
        SqlType::Bit => match exact::<1>(t, b)? {
            [0] => Value::Bit(false),
            [1] => Value::Bit(true),
            [x] => return Err(format!("bit value byte 0x{x:02X} is neither 0 nor 1")),
        },
        SqlType::TinyInt => Value::TinyInt(exact::<1>(t, b)?[0]),
        SqlType::SmallInt => Value::SmallInt(i16::from_le_bytes(exact(t, b)?)),
        SqlType::Int => Value::Int(i32::from_le_bytes(exact(t, b)?)),
        SqlType::BigInt => Value::BigInt(i64::from_le_bytes(exact(t, b)?)),
        SqlType::Decimal { precision, scale } => decode_decimal(t, precision, scale, b)?,
        SqlType::Float => Value::Float(finite(f64::from_le_bytes(exact(t, b)?))?),
        SqlType::Real => Value::Real(finite(f32::from_le_bytes(exact(t, b)?) as f64)? as f32),
        SqlType::Char(n) | SqlType::VarChar(n) => {
            check_length(t, b.len(), n, matches!(t, SqlType::Char(_)))?;
            Value::Text(latin1_text(b))
        }
        SqlType::NChar(n) | SqlType::NVarChar(n) => decode_utf16(t, n, b)?,
        SqlType::Binary(n) | SqlType::VarBinary(n) => {
            check_length(t, b.len(), n, matches!(t, SqlType::Binary(_)))?;
            Value::Binary(b.to_vec())
        }
        SqlType::Date => Value::Date(date_days(exact(t, b)?)?),
        SqlType::DateTime => decode_datetime(exact(t, b)?)?,
        SqlType::DateTime2(p) => decode_datetime2(p, b)?,
        SqlType::UniqueIdentifier => Value::Guid(exact(t, b)?),
    })
}

/// Checks that `bytes` are a legal stored value of type `t` (DBCC CHECKDB's data purity)
/// without building the value: character and binary data are checked by length only (and
/// Unicode for an even length and paired surrogates), everything else as `decode` does.
pub fn check_value(t: SqlType, b: &[u8]) -> Result<(), String> {
    match t {
        SqlType::Char(n) | SqlType::VarChar(n) | SqlType::Binary(n) | SqlType::VarBinary(n) => {
            check_length(
                t,
                b.len(),
                n,
                matches!(t, SqlType::Char(_) | SqlType::Binary(_)),
            )
        }
        SqlType::NChar(n) | SqlType::NVarChar(n) => {
            check_utf16_length(t, n, b)?;
            let units = b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]));
            match char::decode_utf16(units).find_map(Result::err) {
                Some(e) => Err(surrogate_error(e)),
                None => Ok(()),
            }
        }
        _ => decode(t, Some(b)).map(|_| ()),
    }
}

/// The bytes as an array of exactly `N`, or the reason they are not.
fn exact<const N: usize>(t: SqlType, b: &[u8]) -> Result<[u8; N], String> {
    b.try_into().map_err(|_| {
        let name = data_type_name(t);
        format!("{} bytes for a {name} value; {N} expected", b.len())
    })
}

/// Checks a stored length against a declared one of `n` units (bytes, or characters of
/// two bytes for the Unicode types).
fn check_length(t: SqlType, len: usize, n: u32, fixed: bool) -> Result<(), String> {
    let name = data_type_name(t);
    if n == MAX_LENGTH {
        return Ok(());
    }
    let unit = if matches!(t, SqlType::NChar(_) | SqlType::NVarChar(_)) {
        2
    } else {
        1
    };
    let declared = n as usize * unit;
    if fixed && len != declared {
        return Err(format!(
            "{len} bytes for a {name}({n}) value; {declared} expected"
        ));
    }
    if len > declared {
        return Err(format!(
            "{len} bytes for a {name}({n}) value; at most {declared} allowed"
        ));
    }
    Ok(())
}

fn finite(f: f64) -> Result<f64, String> {
    if f.is_finite() {
        Ok(f)
    } else {
        Err(format!(
            "floating-point value {f} is not a number SQL Server can store"
        ))
    }
}

fn decode_decimal(t: SqlType, precision: u8, scale: u8, b: &[u8]) -> Result<Value, String> {
    let size = decimal_size(precision);
    if b.len() != size {
        let name = data_type_name(t);
        return Err(format!(
            "{} bytes for a {name}({precision}, {scale}) value; {size} expected",
            b.len()
        ));
    }
    let mut magnitude = [0u8; 16];
    magnitude[..size - 1].copy_from_slice(&b[1..]);
    let magnitude = u128::from_le_bytes(magnitude);
    // A precision past 38 is no valid column; refuse rather than overflow i128.
    let unscaled = i128::try_from(magnitude)
        .ok()
        .filter(|&u| precision <= 38 && fits_precision(u, precision))
        .ok_or_else(|| format!("decimal magnitude {magnitude} exceeds precision {precision}"))?;
    match b[0] {
        1 => Ok(Value::Decimal { unscaled, scale }),
        0 => Ok(Value::Decimal {
            unscaled: -unscaled,
            scale,
        }),
        sign => Err(format!("decimal sign byte 0x{sign:02X} is neither 0 nor 1")),
    }
}

/// An even length within the declared one (NCHAR exactly, NVARCHAR at most).
fn check_utf16_length(t: SqlType, n: u32, b: &[u8]) -> Result<(), String> {
    if !b.len().is_multiple_of(2) {
        return Err(format!(
            "odd length {} for a {} value",
            b.len(),
            data_type_name(t)
        ));
    }
    check_length(t, b.len(), n, matches!(t, SqlType::NChar(_)))
}

fn surrogate_error(e: std::char::DecodeUtf16Error) -> String {
    format!("unpaired UTF-16 surrogate 0x{:04X}", e.unpaired_surrogate())
}

fn decode_utf16(t: SqlType, n: u32, b: &[u8]) -> Result<Value, String> {
    check_utf16_length(t, n, b)?;
    let units = b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]));
    char::decode_utf16(units)
        .collect::<Result<String, _>>()
        .map(Value::Text)
        .map_err(surrogate_error)
}

/// Days since 0001-01-01 from three stored bytes, checked against 9999-12-31.
fn date_days(b: [u8; 3]) -> Result<i32, String> {
    let days = i32::from_le_bytes([b[0], b[1], b[2], 0]);
    if days >= DAYS_TO_10000 {
        return Err(format!("date day number {days} is past 9999-12-31"));
    }
    Ok(days)
}

fn decode_datetime(b: [u8; 8]) -> Result<Value, String> {
    let time = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let days = i32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    if time >= DATETIME_TICKS_PER_DAY {
        return Err(format!(
            "datetime time part {time} is past the end of the day"
        ));
    }
    if !(DATETIME_MIN_DAYS..=DATETIME_MAX_DAYS).contains(&days) {
        return Err(format!(
            "datetime day number {days} is outside 1753-01-01..9999-12-31"
        ));
    }
    // The same rounding as convert::round_datetime, so stored values read back unchanged.
    let time_ticks = (time as i64 * TICKS_PER_SECOND + 150) / 300;
    Ok(Value::DateTime(
        (days + DAYS_TO_1900) as i64 * TICKS_PER_DAY + time_ticks,
    ))
}

fn decode_datetime2(scale: u8, b: &[u8]) -> Result<Value, String> {
    let t = SqlType::DateTime2(scale);
    if scale > 7 {
        return Err(format!("datetime2 scale {scale} is past 7"));
    }
    let time_len = time_size(scale);
    if b.len() != time_len + 3 {
        let expected = time_len + 3;
        return Err(format!(
            "{} bytes for a {}({scale}) value; {expected} expected",
            b.len(),
            data_type_name(t)
        ));
    }
    let mut time = [0u8; 8];
    time[..time_len].copy_from_slice(&b[..time_len]);
    let units = i64::from_le_bytes(time);
    let unit = ticks_per_unit(scale);
    if units >= TICKS_PER_DAY / unit {
        return Err(format!(
            "datetime2 time part {units} is past the end of the day"
        ));
    }
    let days = date_days([b[time_len], b[time_len + 1], b[time_len + 2]])?;
    Ok(Value::DateTime2(days as i64 * TICKS_PER_DAY + units * unit))
}

// ---------------------------------------------------------------------------------------
// Assignment

/// `v` converted for storing in column `column` of table `table` of type `t`, as INSERT
/// and UPDATE convert it; the source type is the value's natural type (see
/// [`assign_from`]).
pub fn assign(t: SqlType, v: &Value, table: &str, column: &str) -> Result<Value, SqlError> {
    assign_from(type_of(v), t, v, table, column)
}

/// Like [`assign`] with the declared source type (an `nvarchar` variable rather than the
/// `varchar` a text value looks like), which decides the type names in messages.
///
/// Implicit conversion differs from CAST in three ways:
/// - Text or binary too long for the column is Msg 2628 (SQL Server 2019's message with
///   table, column and the value cut to the column's length), except that excess trailing
///   spaces of text are dropped silently. Fixed-length values are padded.
/// - Character data to `binary`/`varbinary` and `datetime` to a number need CONVERT
///   (Msg 257).
/// - A conversion CAST refuses (Msg 529) is an operand type clash (Msg 206).
///
/// Otherwise the rules and errors are `convert`'s (245, 8114, 8115, 220, 241, 242 ...).
/// The result is what [`decode`] gives back after [`encode`]: text for a non-Unicode
/// column has `?` for characters it cannot hold.
pub fn assign_from(
    from: SqlType,
    t: SqlType,
    v: &Value,
    table: &str,
    column: &str,
) -> Result<Value, SqlError> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    let binary_target = matches!(t, SqlType::Binary(_) | SqlType::VarBinary(_));
    if (binary_target && from.is_text()) || (is_numeric(t) && from == SqlType::DateTime) {
        return Err(msg(257, &[&data_type_name(from), &data_type_name(t)]));
    }
    let keeps_length = matches!(
        v,
        Value::Text(_)
            | Value::Binary(_)
            | Value::Date(_)
            | Value::DateTime(_)
            | Value::DateTime2(_)
    );
    let result = match t {
        SqlType::Char(n) | SqlType::VarChar(n) | SqlType::NChar(n) | SqlType::NVarChar(n)
            if keeps_length =>
        {
            assign_text(from, t, n, v, table, column)
        }
        SqlType::Binary(n) | SqlType::VarBinary(n) if matches!(v, Value::Binary(_)) => {
            assign_binary(t, n, v, table, column)
        }
        _ => convert_from(v, from, t, None),
    };
    result.map_err(|e| {
        if e.number == 529 {
            msg(206, &[&data_type_name(from), &data_type_name(t)])
        } else {
            e
        }
    })
}

fn is_numeric(t: SqlType) -> bool {
    t.is_numeric()
}

/// Text for a character column of declared length `n`: converted without a length limit,
/// then cut (silently when only spaces are lost, else Msg 2628) and padded.
fn assign_text(
    from: SqlType,
    t: SqlType,
    n: u32,
    v: &Value,
    table: &str,
    column: &str,
) -> Result<Value, SqlError> {
    let unicode = matches!(t, SqlType::NChar(_) | SqlType::NVarChar(_));
    let unbounded = if unicode {
        SqlType::NVarChar(MAX_LENGTH)
    } else {
        SqlType::VarChar(MAX_LENGTH)
    };
    let Value::Text(mut s) = convert_from(v, from, unbounded, None)? else {
        return Err(msg(206, &[&data_type_name(from), &data_type_name(t)]));
    };
    if !unicode {
        s = s
            .chars()
            .map(|c| if (c as u32) <= 0xFF { c } else { '?' })
            .collect();
    }
    if n == MAX_LENGTH {
        return Ok(Value::Text(s));
    }
    // Declared lengths count bytes for char/varchar and UTF-16 code units for nchar/nvarchar.
    let width = |c: char| if unicode { c.len_utf16() } else { 1 };
    let mut seen = 0;
    let cut = s
        .char_indices()
        .find(|&(_, c)| {
            seen += width(c);
            seen > n as usize
        })
        .map(|(i, _)| i);
    if let Some(i) = cut {
        if !s[i..].chars().all(|c| c == ' ') {
            return Err(msg(2628, &[&table, &column, &&s[..i]]));
        }
        s.truncate(i);
    }
    let used: usize = s.chars().map(width).sum();
    if matches!(t, SqlType::Char(_) | SqlType::NChar(_)) {
        s.push_str(&" ".repeat((n as usize).saturating_sub(used)));
    }
    Ok(Value::Text(s))
}

/// Binary for a binary column of declared length `n`: Msg 2628 when too long (the value
/// shown in hex, `0x...`), zero-padded when fixed.
fn assign_binary(
    t: SqlType,
    n: u32,
    v: &Value,
    table: &str,
    column: &str,
) -> Result<Value, SqlError> {
    let Value::Binary(b) = v else {
        return Err(msg(206, &[&data_type_name(type_of(v)), &data_type_name(t)]));
    };
    let mut b = b.clone();
    if n == MAX_LENGTH {
        return Ok(Value::Binary(b));
    }
    if b.len() > n as usize {
        let shown = format!("0x{}", hex_upper(&b[..n as usize]));
        return Err(msg(2628, &[&table, &column, &shown]));
    }
    if matches!(t, SqlType::Binary(_)) {
        b.resize(n as usize, 0);
    }
    Ok(Value::Binary(b))
}

#[cfg(test)]
mod tests {

    /// Proves both ways of reading stored Latin-1 give its characters: ASCII as it is, and
    /// a byte above 0x7F as its Latin-1 character (two bytes of UTF-8).
    #[test]
    fn latin1_bytes_read_as_their_characters() {
        assert_eq!(latin1_text(b"row 42  "), "row 42  ");
        assert_eq!(latin1_text(&[b'c', 0xE9, 0xFF]), "c\u{e9}\u{ff}");
        assert_eq!(latin1_text(&latin1("caf\u{e9}")), "caf\u{e9}");
        assert_eq!(latin1_text(&[]), "");
    }

    use super::*;
    use crate::convert::{convert, days_from_ymd};

    fn ticks(y: i32, m: u32, d: u32, h: i64, min: i64, s: i64, frac_ticks: i64) -> i64 {
        days_from_ymd(y, m, d) as i64 * TICKS_PER_DAY
            + (h * 3600 + min * 60 + s) * TICKS_PER_SECOND
            + frac_ticks
    }

    fn text(s: &str) -> Value {
        Value::Text(s.to_string())
    }

    fn dec(unscaled: i128, scale: u8) -> Value {
        Value::Decimal { unscaled, scale }
    }

    fn bytes(t: SqlType, v: &Value) -> Vec<u8> {
        encode(t, v).unwrap().expect("not NULL")
    }

    /// Encodes, checks the width against `layout`, decodes and compares.
    fn round_trip(t: SqlType, v: &Value) {
        let stored = encode(t, v).unwrap_or_else(|e| panic!("{t:?} {v:?}: {e}"));
        if let (Some(b), Layout::Fixed(width)) = (&stored, layout(t)) {
            assert_eq!(b.len(), width as usize, "{t:?} {v:?}");
        }
        assert_eq!(decode(t, stored.as_deref()).as_ref(), Ok(v), "{t:?}");
    }

    fn every_type() -> Vec<SqlType> {
        let mut types = vec![
            SqlType::Bit,
            SqlType::TinyInt,
            SqlType::SmallInt,
            SqlType::Int,
            SqlType::BigInt,
            SqlType::Float,
            SqlType::Real,
            SqlType::Char(1),
            SqlType::Char(8000),
            SqlType::VarChar(1),
            SqlType::VarChar(8000),
            SqlType::VarChar(MAX_LENGTH),
            SqlType::NChar(1),
            SqlType::NChar(4000),
            SqlType::NVarChar(4000),
            SqlType::NVarChar(MAX_LENGTH),
            SqlType::Binary(1),
            SqlType::Binary(8000),
            SqlType::VarBinary(8000),
            SqlType::VarBinary(MAX_LENGTH),
            SqlType::Date,
            SqlType::DateTime,
            SqlType::UniqueIdentifier,
        ];
        for (precision, scale) in [
            (1, 0),
            (9, 2),
            (10, 10),
            (19, 4),
            (20, 0),
            (28, 6),
            (29, 0),
            (38, 38),
        ] {
            types.push(SqlType::Decimal { precision, scale });
        }
        types.extend((0..=7).map(SqlType::DateTime2));
        types
    }

    // Every type stores NULL as no bytes and a typical value in bytes that decode to it.
    #[test]
    fn round_trip_every_type_and_null() {
        let cases = [
            (SqlType::Bit, Value::Bit(true)),
            (SqlType::Bit, Value::Bit(false)),
            (SqlType::TinyInt, Value::TinyInt(255)),
            (SqlType::SmallInt, Value::SmallInt(i16::MIN)),
            (SqlType::Int, Value::Int(-123_456_789)),
            (SqlType::BigInt, Value::BigInt(i64::MAX)),
            (SqlType::Float, Value::Float(-1.5e300)),
            (SqlType::Real, Value::Real(3.25)),
            (SqlType::Char(4), text("ab  ")),
            (SqlType::VarChar(10), text("hello")),
            (SqlType::VarChar(10), text("")),
            (SqlType::VarChar(MAX_LENGTH), text(&"x".repeat(20_000))),
            (SqlType::NChar(3), text("é  ")),
            (SqlType::NVarChar(10), text("")),
            (SqlType::Binary(3), Value::Binary(vec![1, 0, 0])),
            (SqlType::VarBinary(5), Value::Binary(vec![0xDE, 0xAD])),
            (SqlType::Date, Value::Date(0)),
            (SqlType::Date, Value::Date(DAYS_TO_10000 - 1)),
            (
                SqlType::DateTime,
                Value::DateTime(ticks(2024, 2, 29, 13, 5, 7, 0)),
            ),
            (
                SqlType::DateTime2(7),
                Value::DateTime2(ticks(2024, 2, 29, 13, 5, 7, 1_234_567)),
            ),
            (
                SqlType::UniqueIdentifier,
                Value::Guid(core::array::from_fn(|i| i as u8 * 17)),
            ),
        ];
        for (t, v) in &cases {
            round_trip(*t, v);
        }
        for t in every_type() {
            assert_eq!(encode(t, &Value::Null), Ok(None), "{t:?}");
            assert_eq!(decode(t, None), Ok(Value::Null), "{t:?}");
        }
    }

    // Decimals keep their sign and every digit up to precision 38, in each storage width.
    #[test]
    fn round_trip_decimals_negative_and_precision_38() {
        let max38 = 10i128.pow(38) - 1;
        let cases = [
            (9, 2, -12_345),
            (9, 0, -999_999_999),
            (19, 4, -(10i128.pow(19) - 1)),
            (28, 10, 10i128.pow(28) - 1),
            (38, 0, max38),
            (38, 0, -max38),
            (38, 38, -max38),
            (38, 6, 0),
        ];
        for (precision, scale, unscaled) in cases {
            round_trip(SqlType::Decimal { precision, scale }, &dec(unscaled, scale));
        }
        let t = SqlType::Decimal {
            precision: 38,
            scale: 0,
        };
        let b = bytes(t, &dec(-max38, 0));
        assert_eq!(b.len(), 17);
        assert_eq!(b[0], 0, "negative sign byte");
        assert_eq!(&b[1..], &max38.to_le_bytes()[..16]);
    }

    // Every datetime2 scale stores midnight, the last unit of 9999-12-31 and a rounded
    // afternoon value in its own width and reads them back exactly.
    #[test]
    fn round_trip_datetime2_each_scale() {
        for scale in 0..=7u8 {
            let t = SqlType::DateTime2(scale);
            let unit = ticks_per_unit(scale);
            let last = MAX_TICKS - unit;
            let afternoon = round_datetime2(ticks(2024, 2, 29, 13, 5, 7, 1_234_567), scale);
            for v in [0, last, afternoon] {
                round_trip(t, &Value::DateTime2(v));
            }
            let expected = [6, 6, 6, 7, 7, 8, 8, 8][scale as usize];
            assert_eq!(
                bytes(t, &Value::DateTime2(last)).len(),
                expected,
                "scale {scale}"
            );
        }
    }

    // DATETIME's first and last values (1753-01-01, 9999-12-31 23:59:59.997) round-trip and
    // pin the time-first byte order.
    #[test]
    fn round_trip_datetime_min_and_max() {
        let min = convert(&text("1753-01-01 00:00:00"), SqlType::DateTime, None).unwrap();
        let max = convert(&text("9999-12-31 23:59:59.997"), SqlType::DateTime, None).unwrap();
        round_trip(SqlType::DateTime, &min);
        round_trip(SqlType::DateTime, &max);
        assert_eq!(
            bytes(SqlType::DateTime, &min),
            [0, 0, 0, 0, 0x46, 0x2E, 0xFF, 0xFF]
        );
        assert_eq!(
            bytes(SqlType::DateTime, &max),
            [0xFF, 0x81, 0x8B, 0x01, 0x7F, 0x24, 0x2D, 0x00]
        );
        assert_eq!(
            DATETIME_MIN_DAYS,
            days_from_ymd(1753, 1, 1) - DAYS_TO_1900,
            "the constant is 1753-01-01"
        );
        // Every 1/300 s step of one second reads back as the value convert rounded to.
        for step in 0..300 {
            let raw = ticks(2001, 9, 9, 1, 46, 39, step * TICKS_PER_SECOND / 300 + 7);
            round_trip(SqlType::DateTime, &Value::DateTime(round_datetime(raw)));
        }
    }

    // Text beyond Latin-1 survives nvarchar and nchar (with surrogate pairs counted as two
    // units), and becomes '?' in a varchar column.
    #[test]
    fn unicode_text_in_nvarchar_and_nchar() {
        let s = "Grüße, 世界 🎉";
        round_trip(SqlType::NVarChar(12), &text(s));
        round_trip(SqlType::NVarChar(MAX_LENGTH), &text(s));
        let padded = assign(SqlType::NChar(20), &text(s), "t", "c").unwrap();
        assert_eq!(
            padded,
            text(&format!("{s}{}", " ".repeat(8))),
            "12 units + 8 spaces"
        );
        round_trip(SqlType::NChar(20), &padded);
        assert_eq!(bytes(SqlType::NChar(20), &text(s)).len(), 40);
        assert_eq!(
            encode(SqlType::NVarChar(11), &text(s)).unwrap_err().number,
            8152,
            "the emoji is two UTF-16 units"
        );
        let stored = assign(SqlType::VarChar(20), &text(s), "t", "c").unwrap();
        assert_eq!(stored, text("Grüße, ?? ?"));
        round_trip(SqlType::VarChar(20), &stored);
    }

    // Byte images match SQL Server's storage of the same values (DBCC PAGE).
    #[test]
    fn bytes_match_sql_server_storage() {
        let date_2000 = days_from_ymd(2000, 1, 1);
        assert_eq!(date_2000, 730_119);
        let pins: Vec<(SqlType, Value, Vec<u8>)> = vec![
            (SqlType::Int, Value::Int(1), vec![1, 0, 0, 0]),
            (SqlType::Int, Value::Int(-2), vec![0xFE, 0xFF, 0xFF, 0xFF]),
            (SqlType::SmallInt, Value::SmallInt(0x1234), vec![0x34, 0x12]),
            (SqlType::BigInt, Value::BigInt(-1), vec![0xFF; 8]),
            (SqlType::Bit, Value::Bit(true), vec![1]),
            (
                SqlType::Float,
                Value::Float(1.0),
                vec![0, 0, 0, 0, 0, 0, 0xF0, 0x3F],
            ),
            (SqlType::Real, Value::Real(-2.5), vec![0, 0, 0x20, 0xC0]),
            (
                SqlType::Decimal {
                    precision: 5,
                    scale: 2,
                },
                dec(12_345, 2),
                vec![0x01, 0x39, 0x30, 0x00, 0x00],
            ),
            (
                SqlType::Decimal {
                    precision: 10,
                    scale: 2,
                },
                dec(-12_345, 2),
                vec![0x00, 0x39, 0x30, 0, 0, 0, 0, 0, 0],
            ),
            (
                SqlType::Date,
                Value::Date(date_2000),
                vec![0x07, 0x24, 0x0B],
            ),
            (
                SqlType::DateTime,
                Value::DateTime(DAYS_TO_1900 as i64 * TICKS_PER_DAY),
                vec![0; 8],
            ),
            (
                SqlType::DateTime,
                Value::DateTime(ticks(1900, 1, 1, 0, 0, 1, 0)),
                vec![0x2C, 0x01, 0, 0, 0, 0, 0, 0],
            ),
            (
                SqlType::DateTime2(7),
                Value::DateTime2(date_2000 as i64 * TICKS_PER_DAY),
                vec![0, 0, 0, 0, 0, 0x07, 0x24, 0x0B],
            ),
            (
                SqlType::DateTime2(3),
                Value::DateTime2(ticks(2000, 1, 1, 12, 34, 56, 7_890_000)),
                vec![0x95, 0x2C, 0xB3, 0x02, 0x07, 0x24, 0x0B],
            ),
            (SqlType::Char(3), text("a"), vec![b'a', b' ', b' ']),
            (SqlType::VarChar(3), text("é"), vec![0xE9]),
            (
                SqlType::NChar(3),
                text("a"),
                vec![0x61, 0, 0x20, 0, 0x20, 0],
            ),
            (SqlType::NVarChar(3), text("é"), vec![0xE9, 0]),
            (SqlType::Binary(3), Value::Binary(vec![1]), vec![1, 0, 0]),
            (SqlType::VarBinary(3), Value::Binary(vec![1]), vec![1]),
        ];
        for (t, v, expected) in pins {
            assert_eq!(bytes(t, &v), expected, "{t:?} {v:?}");
        }
    }

    // The catalog row of each type is what sys.columns shows, and reads back as the type.
    #[test]
    fn stored_type_matches_sys_columns_and_inverts() {
        let st = |system_type_id, max_length, precision, scale| StoredType {
            system_type_id,
            max_length,
            precision,
            scale,
        };
        let pins = [
            (SqlType::Int, st(56, 4, 10, 0)),
            (SqlType::BigInt, st(127, 8, 19, 0)),
            (SqlType::Bit, st(104, 1, 1, 0)),
            (SqlType::Float, st(62, 8, 53, 0)),
            (SqlType::Real, st(59, 4, 24, 0)),
            (SqlType::NVarChar(10), st(231, 20, 0, 0)),
            (SqlType::NVarChar(MAX_LENGTH), st(231, -1, 0, 0)),
            (SqlType::VarBinary(MAX_LENGTH), st(165, -1, 0, 0)),
            (SqlType::Char(10), st(175, 10, 0, 0)),
            (
                SqlType::Decimal {
                    precision: 18,
                    scale: 2,
                },
                st(106, 9, 18, 2),
            ),
            (
                SqlType::Decimal {
                    precision: 38,
                    scale: 0,
                },
                st(106, 17, 38, 0),
            ),
            (SqlType::Date, st(40, 3, 10, 0)),
            (SqlType::DateTime, st(61, 8, 23, 3)),
            (SqlType::DateTime2(0), st(42, 6, 19, 0)),
            (SqlType::DateTime2(3), st(42, 7, 23, 3)),
            (SqlType::DateTime2(7), st(42, 8, 27, 7)),
            (SqlType::UniqueIdentifier, st(36, 16, 0, 0)),
        ];
        for (t, expected) in pins {
            assert_eq!(stored_type(t), expected, "{t:?}");
        }
        for t in every_type() {
            assert_eq!(sql_type(stored_type(t)), Some(t), "{t:?}");
        }
        assert_eq!(
            sql_type(st(108, 9, 12, 3)),
            Some(SqlType::Decimal {
                precision: 12,
                scale: 3
            })
        );
    }

    // Catalog rows stored_type cannot produce (a corrupt catalog) are refused.
    #[test]
    fn sql_type_refuses_corrupt_rows() {
        let st = |system_type_id, max_length, precision, scale| StoredType {
            system_type_id,
            max_length,
            precision,
            scale,
        };
        let corrupt = [
            st(99, 4, 0, 0),     // unknown type id
            st(56, 3, 10, 0),    // int three bytes wide
            st(239, 21, 0, 0),   // nchar of an odd byte count
            st(175, -1, 0, 0),   // char(max)
            st(175, 0, 0, 0),    // char(0)
            st(167, 8001, 0, 0), // varchar past 8000
            st(106, 17, 39, 0),  // precision 39
            st(106, 5, 5, 6),    // scale past precision
            st(106, 9, 5, 2),    // decimal(5,2) nine bytes wide
            st(42, 8, 27, 8),    // datetime2 scale 8
            st(42, 8, 23, 3),    // datetime2(3) eight bytes wide
        ];
        for row in corrupt {
            assert_eq!(sql_type(row), None, "{row:?}");
        }
    }

    // Variable-length types are Variable; the rest are fixed at max_length, bit at one byte.
    #[test]
    fn layout_of_each_type() {
        assert_eq!(layout(SqlType::Bit), Layout::Fixed(1));
        assert_eq!(layout(SqlType::NChar(10)), Layout::Fixed(20));
        assert_eq!(layout(SqlType::Binary(8000)), Layout::Fixed(8000));
        assert_eq!(layout(SqlType::DateTime2(3)), Layout::Fixed(7));
        assert_eq!(
            layout(SqlType::Decimal {
                precision: 38,
                scale: 2
            }),
            Layout::Fixed(17)
        );
        assert_eq!(layout(SqlType::VarChar(MAX_LENGTH)), Layout::Variable);
        assert_eq!(layout(SqlType::NVarChar(1)), Layout::Variable);
        assert_eq!(layout(SqlType::VarBinary(8)), Layout::Variable);
    }

    // Assignment raises SQL Server's errors: 2628 on truncation, 245 on a bad number, 257
    // and 206 where implicit conversion is refused, 8115 on overflow.
    #[test]
    fn assign_errors() {
        let e = assign(SqlType::VarChar(3), &text("abcd"), "dbo.t", "c").unwrap_err();
        assert_eq!((e.number, e.severity, e.state), (2628, 16, 1));
        assert_eq!(
            e.text,
            "String or binary data would be truncated in table 'dbo.t', column 'c'. Truncated value: 'abc'."
        );
        let e = assign(SqlType::Int, &text("x"), "t", "c").unwrap_err();
        assert_eq!(e.number, 245);
        assert_eq!(
            e.text,
            "Conversion failed when converting the varchar value 'x' to data type int."
        );
        let e = assign(SqlType::NVarChar(2), &text("🎉x"), "t", "c").unwrap_err();
        assert_eq!(e.number, 2628);
        assert!(e.text.ends_with("Truncated value: '🎉'."), "{}", e.text);
        let e = assign(SqlType::Binary(2), &Value::Binary(vec![1, 2, 3]), "t", "b").unwrap_err();
        assert!(e.text.ends_with("Truncated value: '0x0102'."), "{}", e.text);
        let e = assign(SqlType::VarBinary(10), &text("abc"), "t", "b").unwrap_err();
        assert_eq!(e.number, 257);
        let now = Value::DateTime(ticks(2020, 1, 1, 0, 0, 0, 0));
        assert_eq!(
            assign(SqlType::Int, &now, "t", "c").unwrap_err().number,
            257
        );
        let e = assign(SqlType::Int, &Value::Date(1), "t", "c").unwrap_err();
        assert_eq!(e.text, "Operand type clash: date is incompatible with int");
        let decimal_5_2 = SqlType::Decimal {
            precision: 5,
            scale: 2,
        };
        assert_eq!(
            assign(decimal_5_2, &dec(12_345, 1), "t", "c")
                .unwrap_err()
                .number,
            8115
        );
    }

    // Assignment converts, pads fixed-length values, drops excess trailing spaces silently
    // and returns exactly what the column stores.
    #[test]
    fn assign_converts_pads_and_trims_spaces() {
        let ok = |t, v: Value| assign(t, &v, "t", "c").unwrap();
        assert_eq!(ok(SqlType::VarChar(3), text("ab     ")), text("ab "));
        assert_eq!(ok(SqlType::Char(3), text("abc   ")), text("abc"));
        assert_eq!(ok(SqlType::Char(5), text("ab")), text("ab   "));
        assert_eq!(ok(SqlType::NChar(3), text("é")), text("é  "));
        assert_eq!(
            ok(SqlType::Binary(3), Value::Binary(vec![9])),
            Value::Binary(vec![9, 0, 0])
        );
        assert_eq!(ok(SqlType::Int, text(" 42 ")), Value::Int(42));
        assert_eq!(
            ok(
                SqlType::Decimal {
                    precision: 5,
                    scale: 2
                },
                Value::Int(7)
            ),
            dec(700, 2)
        );
        assert_eq!(ok(SqlType::Char(10), Value::Date(0)), text("0001-01-01"));
        assert_eq!(ok(SqlType::Int, Value::Null), Value::Null);
        let e = assign(SqlType::Char(8), &Value::Date(0), "t", "c").unwrap_err();
        assert_eq!(e.number, 2628);
        for (t, v) in [
            (SqlType::Char(4), text("xy")),
            (SqlType::NVarChar(2), text("a ")),
            (SqlType::DateTime, text("2024-02-29 10:00:00.001")),
            (SqlType::DateTime2(2), text("2024-02-29 10:00:00.005")),
            (
                SqlType::Decimal {
                    precision: 9,
                    scale: 3,
                },
                Value::Float(-1.23456),
            ),
        ] {
            round_trip(t, &ok(t, v));
        }
    }

    // Encoding refuses values that are not of the column's type or do not fit it.
    #[test]
    fn encode_refuses_values_that_do_not_fit() {
        let number = |t, v: Value| encode(t, &v).unwrap_err().number;
        assert_eq!(number(SqlType::Bit, Value::Int(1)), 206);
        assert_eq!(number(SqlType::VarChar(2), text("abc")), 8152);
        assert_eq!(number(SqlType::Char(2), text("abc")), 8152);
        assert_eq!(number(SqlType::Binary(1), Value::Binary(vec![1, 2])), 8152);
        assert_eq!(
            number(
                SqlType::Decimal {
                    precision: 3,
                    scale: 0
                },
                dec(1000, 0)
            ),
            8115
        );
        assert_eq!(
            number(
                SqlType::Decimal {
                    precision: 5,
                    scale: 1
                },
                dec(125, 2)
            ),
            8115
        );
        assert_eq!(number(SqlType::Date, Value::Date(-1)), 8115);
        assert_eq!(number(SqlType::DateTime, Value::DateTime(0)), 8115);
        assert_eq!(
            number(SqlType::DateTime2(0), Value::DateTime2(MAX_TICKS - 1)),
            8115
        );
        assert_eq!(number(SqlType::Float, Value::Float(f64::NAN)), 3623);
        // A smaller scale rescales exactly.
        let t = SqlType::Decimal {
            precision: 5,
            scale: 2,
        };
        assert_eq!(bytes(t, &dec(5, 0)), bytes(t, &dec(500, 2)));
    }

    // Malformed stored bytes give a reason: wrong lengths, bad sign or bit bytes, values
    // past a type's range, broken UTF-16, non-finite floats.
    #[test]
    fn decode_refuses_malformed_bytes() {
        let bad: Vec<(SqlType, Vec<u8>)> = vec![
            (SqlType::Int, vec![1, 0, 0]),
            (SqlType::BigInt, vec![0; 9]),
            (SqlType::Bit, vec![2]),
            (
                SqlType::Decimal {
                    precision: 5,
                    scale: 2,
                },
                vec![1, 0, 0, 0],
            ),
            (
                SqlType::Decimal {
                    precision: 5,
                    scale: 2,
                },
                vec![2, 1, 0, 0, 0],
            ),
            (
                SqlType::Decimal {
                    precision: 2,
                    scale: 0,
                },
                vec![1, 100, 0, 0, 0],
            ),
            (
                SqlType::Decimal {
                    precision: 38,
                    scale: 0,
                },
                [vec![1], vec![0xFF; 16]].concat(),
            ),
            (SqlType::Char(3), vec![b'a', b'b']),
            (SqlType::VarChar(2), vec![b'a'; 3]),
            (SqlType::NChar(2), vec![0x61, 0, 0x62]),
            (SqlType::NVarChar(4), vec![0x00, 0xD8]),
            (SqlType::Binary(2), vec![1]),
            (SqlType::Date, 3_652_059i32.to_le_bytes()[..3].to_vec()),
            (
                SqlType::DateTime,
                [25_920_000u32.to_le_bytes(), [0; 4]].concat(),
            ),
            (
                SqlType::DateTime,
                [[0; 4], (-53_691i32).to_le_bytes()].concat(),
            ),
            (SqlType::DateTime2(0), vec![0x80, 0x51, 0x01, 0, 0, 0]),
            (SqlType::DateTime2(7), vec![0; 7]),
            (SqlType::Float, f64::INFINITY.to_le_bytes().to_vec()),
            (SqlType::Real, f32::NAN.to_le_bytes().to_vec()),
            (SqlType::UniqueIdentifier, vec![0; 15]),
        ];
        for (t, b) in bad {
            assert!(decode(t, Some(&b)).is_err(), "{t:?} {b:02X?}");
        }
        let reason = decode(SqlType::Int, Some(&[1, 2, 3])).unwrap_err();
        assert_eq!(reason, "3 bytes for a int value; 4 expected");
    }

    // Decoding arbitrary bytes of every length for every type returns, never panics.
    #[test]
    fn decode_never_panics_on_arbitrary_bytes() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        };
        let mut types = every_type();
        types.extend([
            SqlType::Decimal {
                precision: 40,
                scale: 2,
            },
            SqlType::DateTime2(9),
        ]);
        for t in types {
            for len in 0..=40 {
                for _ in 0..50 {
                    let b: Vec<u8> = (0..len).map(|_| next()).collect();
                    let _ = decode(t, Some(&b));
                }
                let _ = decode(t, Some(&vec![0xFF; len]));
            }
        }
    }
}
