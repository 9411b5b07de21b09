//! CAST, CONVERT and implicit conversion between SQL Server's data types, with SQL
//! Server's results and errors (220, 241, 242, 244, 245, 248, 529, 8114, 8115, 8169 ...).
//!
//! Also the type facts the rest of the crate needs: a value's natural type
//! ([`type_of`]), the type names SQL Server prints in messages ([`data_type_name`]), data
//! type precedence ([`precedence`]) and the result type of a binary operator
//! ([`result_type`]), plus the calendar helpers shared with `functions` and `render`.
//!
//! Invariants:
//! 1. Conversion never panics: every overflow is checked and becomes a SQL Server error.
//! 2. `Value::Guid` holds the 16 bytes in SQL Server's storage order (the first three
//!    groups of the text form byte-reversed), so `CAST(guid AS BINARY(16))` matches.
//! 3. `DATETIME` results are rounded to 1/300 s and `DATETIME2(s)` results to 10^-s s.
//!
//! Not here: collation beyond SQL_Latin1_General_CP1_CI_AS, SET DATEFORMAT / LANGUAGE
//! (dates are read as us_english, mdy), money types, time and datetimeoffset.

use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value, MAX_LENGTH, TICKS_PER_DAY, TICKS_PER_SECOND};

/// Days from 0001-01-01 to 1900-01-01, the `DATETIME` epoch.
pub const DAYS_TO_1900: i32 = 693_595;
/// Ticks one past the largest `DATETIME2` value (10000-01-01).
pub const MAX_TICKS: i64 = 3_652_059 * TICKS_PER_DAY;
/// Days from 0001-01-01 to 1753-01-01, the smallest `DATETIME` date.
const DAYS_TO_1753: i32 = 639_905;

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Converts `value` to type `to` as `CONVERT(to, value, style)` does (`CAST` is style
/// `None`). The source type is the value's natural type; see [`convert_from`].
pub fn convert(value: &Value, to: SqlType, style: Option<i32>) -> Result<Value, SqlError> {
    convert_from(value, type_of(value), to, style)
}

/// Like [`convert`] with the declared source type, which decides the type names in
/// messages (`nvarchar` rather than `varchar`) and the scale a `DATETIME2` prints with.
pub fn convert_from(
    value: &Value,
    from: SqlType,
    to: SqlType,
    style: Option<i32>,
) -> Result<Value, SqlError> {
    if value.is_null() {
        return Ok(Value::Null);
    }
    match to {
        SqlType::Bit | SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::BigInt => {
            to_integer(value, from, to)
        }
        SqlType::Decimal { precision, scale } => to_decimal(value, from, precision, scale),
        SqlType::Float | SqlType::Real => to_float(value, from, to),
        SqlType::Char(_) | SqlType::VarChar(_) | SqlType::NChar(_) | SqlType::NVarChar(_) => {
            to_text(value, from, to, style)
        }
        SqlType::Binary(_) | SqlType::VarBinary(_) => to_binary(value, from, to, style),
        SqlType::Date | SqlType::DateTime | SqlType::DateTime2(_) => to_datetime(value, from, to),
        SqlType::UniqueIdentifier => to_guid(value, from),
    }
}

/// The lower-case type name SQL Server prints in conversion messages. `DECIMAL` prints
/// as `numeric`, as SQL Server's own messages do (`Error converting data type varchar to
/// numeric.`).
pub fn data_type_name(t: SqlType) -> String {
    match t {
        SqlType::Bit => "bit",
        SqlType::TinyInt => "tinyint",
        SqlType::SmallInt => "smallint",
        SqlType::Int => "int",
        SqlType::BigInt => "bigint",
        SqlType::Decimal { .. } => "numeric",
        SqlType::Float => "float",
        SqlType::Real => "real",
        SqlType::Char(_) => "char",
        SqlType::VarChar(_) => "varchar",
        SqlType::NChar(_) => "nchar",
        SqlType::NVarChar(_) => "nvarchar",
        SqlType::Binary(_) => "binary",
        SqlType::VarBinary(_) => "varbinary",
        SqlType::Date => "date",
        SqlType::DateTime => "datetime",
        SqlType::DateTime2(_) => "datetime2",
        SqlType::UniqueIdentifier => "uniqueidentifier",
    }
    .to_string()
}

/// The natural type of a value, as SQL Server types a literal: text is `varchar(len)`,
/// a decimal gets the precision its digits need, `NULL` is `int`.
pub fn type_of(value: &Value) -> SqlType {
    match value {
        Value::Null => SqlType::Int,
        Value::Bit(_) => SqlType::Bit,
        Value::TinyInt(_) => SqlType::TinyInt,
        Value::SmallInt(_) => SqlType::SmallInt,
        Value::Int(_) => SqlType::Int,
        Value::BigInt(_) => SqlType::BigInt,
        Value::Decimal { unscaled, scale } => {
            let digits = digit_count(unscaled.unsigned_abs())
                .max(*scale as u32 + 1)
                .min(38);
            SqlType::Decimal {
                precision: digits as u8,
                scale: (*scale).min(38),
            }
        }
        Value::Float(_) => SqlType::Float,
        Value::Real(_) => SqlType::Real,
        Value::Text(s) => SqlType::VarChar(s.chars().count().max(1) as u32),
        Value::Binary(b) => SqlType::VarBinary(b.len().max(1) as u32),
        Value::Date(_) => SqlType::Date,
        Value::DateTime(_) => SqlType::DateTime,
        Value::DateTime2(_) => SqlType::DateTime2(7),
        Value::Guid(_) => SqlType::UniqueIdentifier,
    }
}

/// SQL Server's data type precedence: the operand of lower precedence is converted to
/// the type of the other. Higher numbers win.
pub fn precedence(t: SqlType) -> u8 {
    match t {
        SqlType::DateTime2(_) => 20,
        SqlType::DateTime => 19,
        SqlType::Date => 18,
        SqlType::Float => 17,
        SqlType::Real => 16,
        SqlType::Decimal { .. } => 15,
        SqlType::BigInt => 14,
        SqlType::Int => 13,
        SqlType::SmallInt => 12,
        SqlType::TinyInt => 11,
        SqlType::Bit => 10,
        SqlType::UniqueIdentifier => 9,
        SqlType::NVarChar(_) => 8,
        SqlType::NChar(_) => 7,
        SqlType::VarChar(_) => 6,
        SqlType::Char(_) => 5,
        SqlType::VarBinary(_) => 4,
        SqlType::Binary(_) => 3,
    }
}

/// The result type of `a + b` style operators: the higher-precedence type, with string
/// concatenation lengths added and decimal precision/scale per SQL Server's addition rule.
pub fn result_type(a: SqlType, b: SqlType) -> SqlType {
    if a.is_text() && b.is_text() {
        return concat_type(a, b);
    }
    if let (Some((p1, s1)), Some((p2, s2))) = (decimal_shape(a), decimal_shape(b)) {
        if matches!(a, SqlType::Decimal { .. }) || matches!(b, SqlType::Decimal { .. }) {
            let s = s1.max(s2);
            let p = s + (p1 - s1).max(p2 - s2) + 1;
            return fit_decimal(p as i32, s as i32);
        }
    }
    if precedence(a) >= precedence(b) {
        a
    } else {
        b
    }
}

/// The type of `a + b` for two strings: Unicode if either is, lengths added up to the
/// type's limit, `MAX` when either is `MAX`.
fn concat_type(a: SqlType, b: SqlType) -> SqlType {
    let len = |t: SqlType| match t {
        SqlType::Char(n) | SqlType::VarChar(n) | SqlType::NChar(n) | SqlType::NVarChar(n) => n,
        _ => 0,
    };
    let unicode = matches!(a, SqlType::NChar(_) | SqlType::NVarChar(_))
        || matches!(b, SqlType::NChar(_) | SqlType::NVarChar(_));
    let (la, lb) = (len(a), len(b));
    let limit = if unicode { 4000 } else { 8000 };
    let total = if la == MAX_LENGTH || lb == MAX_LENGTH {
        MAX_LENGTH
    } else {
        la.saturating_add(lb).min(limit)
    };
    if unicode {
        SqlType::NVarChar(total)
    } else {
        SqlType::VarChar(total)
    }
}

/// Precision and scale of an exact numeric type, integers as `decimal(n, 0)`.
pub fn decimal_shape(t: SqlType) -> Option<(u8, u8)> {
    match t {
        SqlType::Bit => Some((1, 0)),
        SqlType::TinyInt => Some((3, 0)),
        SqlType::SmallInt => Some((5, 0)),
        SqlType::Int => Some((10, 0)),
        SqlType::BigInt => Some((19, 0)),
        SqlType::Decimal { precision, scale } => Some((precision, scale)),
        _ => None,
    }
}

/// A type values of types `a` and `b` both fit without loss, where one exists: the longer
/// of two texts or binaries, the wider of two integers, the decimal with the larger
/// integral part and scale (precision at most 38, the scale giving way); else the type of
/// higher precedence (to which SQL Server would convert the other). A UNION's column and a
/// column typed by its values (select.rs `ColumnTyper`) are typed so.
pub fn fitting_type(a: SqlType, b: SqlType) -> SqlType {
    use SqlType::*;
    if a == b {
        return a;
    }
    let len = |t: SqlType| match t {
        VarChar(n) | NVarChar(n) | Char(n) | NChar(n) | VarBinary(n) | Binary(n) => Some(n),
        _ => None,
    };
    let (high, low) = if precedence(a) >= precedence(b) {
        (a, b)
    } else {
        (b, a)
    };
    match (high, len(high), len(low)) {
        (VarChar(_) | NVarChar(_) | Char(_) | NChar(_), Some(x), Some(y)) if low.is_text() => {
            let n = x.max(y);
            return match high {
                NVarChar(_) | NChar(_) => NVarChar(n),
                _ => VarChar(n),
            };
        }
        (VarBinary(_) | Binary(_), Some(x), Some(y)) => return VarBinary(x.max(y)),
        _ => {}
    }
    match (high, decimal_shape(high), decimal_shape(low)) {
        (Decimal { .. }, Some((p1, s1)), Some((p2, s2))) => {
            let integral = (p1 - s1).max(p2 - s2);
            let scale = s1.max(s2).min(38 - integral.min(38));
            Decimal {
                precision: (integral + scale).clamp(1, 38),
                scale,
            }
        }
        _ => high,
    }
}

/// A decimal type from computed precision and scale, reduced as SQL Server does when the
/// precision passes 38: the integral digits are kept and the scale shrinks, to no less
/// than 6 (or the original scale when that is smaller).
pub fn fit_decimal(p: i32, s: i32) -> SqlType {
    let (mut p, mut s) = (p.max(1), s.max(0));
    if p > 38 {
        let integral = p - s;
        s = s.min(38 - integral).max(s.min(6));
        p = 38;
    }
    SqlType::Decimal {
        precision: p as u8,
        scale: s.min(p) as u8,
    }
}

/// Number of decimal digits of `v` (1 for zero).
pub fn digit_count(mut v: u128) -> u32 {
    let mut n = 1;
    while v >= 10 {
        v /= 10;
        n += 1;
    }
    n
}

/// 10^n as i128, or None past i128's range.
pub fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

/// Rescales an unscaled decimal from scale `from` to `to`, rounding half away from zero
/// when digits are dropped; None on overflow.
pub fn rescale(unscaled: i128, from: u8, to: u8) -> Option<i128> {
    if to >= from {
        return unscaled.checked_mul(pow10((to - from) as u32)?);
    }
    let div = pow10((from - to) as u32)?;
    let q = unscaled / div;
    let r = unscaled % div;
    if r.unsigned_abs() * 2 >= div.unsigned_abs() {
        Some(q + unscaled.signum())
    } else {
        Some(q)
    }
}

/// True when `unscaled` fits `precision` digits.
pub fn fits_precision(unscaled: i128, precision: u8) -> bool {
    match pow10(precision as u32) {
        Some(limit) => unscaled.unsigned_abs() < limit.unsigned_abs(),
        None => true,
    }
}

/// The exact or approximate number a numeric value holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    Int(i128),
    Dec(i128, u8),
    Float(f64),
}

/// The number in a numeric value (bit, integers, decimal, float, real), else None.
pub fn numeric_of(value: &Value) -> Option<Num> {
    Some(match value {
        Value::Bit(b) => Num::Int(*b as i128),
        Value::TinyInt(v) => Num::Int(*v as i128),
        Value::SmallInt(v) => Num::Int(*v as i128),
        Value::Int(v) => Num::Int(*v as i128),
        Value::BigInt(v) => Num::Int(*v as i128),
        Value::Decimal { unscaled, scale } => Num::Dec(*unscaled, *scale),
        Value::Float(f) => Num::Float(*f),
        Value::Real(f) => Num::Float(*f as f64),
        _ => return None,
    })
}

/// A number as f64.
pub fn num_to_f64(n: Num) -> f64 {
    match n {
        Num::Int(i) => i as f64,
        Num::Dec(u, s) => u as f64 / 10f64.powi(s as i32),
        Num::Float(f) => f,
    }
}

fn err_8115(from: &str, to: SqlType) -> SqlError {
    msg(8115, &[&from, &data_type_name(to)])
}

fn err_529(from: SqlType, to: SqlType) -> SqlError {
    msg(529, &[&data_type_name(from), &data_type_name(to)])
}

fn is_integer_type(t: SqlType) -> bool {
    matches!(
        t,
        SqlType::Bit | SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::BigInt
    )
}

/// An integer in the range of an integer type as a value of that type, else None.
pub fn int_value(v: i128, to: SqlType) -> Option<Value> {
    Some(match to {
        SqlType::Bit => Value::Bit(v != 0),
        SqlType::TinyInt => Value::TinyInt(u8::try_from(v).ok()?),
        SqlType::SmallInt => Value::SmallInt(i16::try_from(v).ok()?),
        SqlType::Int => Value::Int(i32::try_from(v).ok()?),
        SqlType::BigInt => Value::BigInt(i64::try_from(v).ok()?),
        _ => return None,
    })
}

fn to_integer(value: &Value, from: SqlType, to: SqlType) -> Result<Value, SqlError> {
    if let Value::Text(s) = value {
        return text_to_integer(s, from, to);
    }
    let n = match value {
        Value::DateTime(t) => Num::Float(datetime_days_f64(*t).round()),
        Value::Binary(b) => Num::Int(binary_to_int(b, to)),
        _ => numeric_of(value).ok_or_else(|| err_529(from, to))?,
    };
    let whole = match n {
        Num::Int(i) => i,
        Num::Dec(u, s) => u / pow10(s as u32).unwrap_or(i128::MAX),
        Num::Float(f) => {
            if !f.is_finite() || f.abs() >= 1e30 {
                return Err(err_8115("expression", to));
            }
            f.trunc() as i128
        }
    };
    int_value(whole, to).ok_or_else(|| match (n, to) {
        (Num::Int(_), SqlType::TinyInt | SqlType::SmallInt | SqlType::Int)
            if is_integer_type(from) && from != SqlType::BigInt =>
        {
            msg(220, &[&data_type_name(to), &whole])
        }
        _ => err_8115("expression", to),
    })
}

/// The rightmost bytes of a binary value, big-endian, as the integer type `to` reads them.
fn binary_to_int(b: &[u8], to: SqlType) -> i128 {
    let size = match to {
        SqlType::Bit | SqlType::TinyInt => 1,
        SqlType::SmallInt => 2,
        SqlType::Int => 4,
        _ => 8,
    };
    let tail = &b[b.len().saturating_sub(size)..];
    let mut v: u64 = 0;
    for byte in tail {
        v = (v << 8) | *byte as u64;
    }
    match size {
        1 => v as u8 as i128,
        2 => v as u16 as i16 as i128,
        4 => v as u32 as i32 as i128,
        _ => v as i64 as i128,
    }
}

fn text_to_integer(s: &str, from: SqlType, to: SqlType) -> Result<Value, SqlError> {
    let t = s.trim_matches(|c: char| c.is_whitespace());
    let fail = || msg(245, &[&data_type_name(from), &s, &data_type_name(to)]);
    if to == SqlType::Bit {
        if t.eq_ignore_ascii_case("true") {
            return Ok(Value::Bit(true));
        }
        if t.eq_ignore_ascii_case("false") {
            return Ok(Value::Bit(false));
        }
    }
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if !digits.bytes().all(|c| c.is_ascii_digit()) || (digits.is_empty() && !t.is_empty()) {
        return Err(fail());
    }
    let digits = digits.trim_start_matches('0');
    let mut v: i128 = 0;
    for c in digits.bytes().take(30) {
        v = v * 10 + (c - b'0') as i128;
    }
    if digits.len() > 30 {
        v = i128::MAX / 2;
    }
    let v = if neg { -v } else { v };
    int_value(v, to).ok_or_else(|| match to {
        SqlType::TinyInt => msg(244, &[&data_type_name(from), &s, &"INT1"]),
        SqlType::SmallInt => msg(244, &[&data_type_name(from), &s, &"INT2"]),
        SqlType::Int => msg(248, &[&data_type_name(from), &s]),
        _ => err_8115("expression", to),
    })
}

fn to_decimal(value: &Value, from: SqlType, precision: u8, scale: u8) -> Result<Value, SqlError> {
    let to = SqlType::Decimal { precision, scale };
    let from_name = match from {
        SqlType::Decimal { .. } => "numeric".to_string(),
        _ => data_type_name(from),
    };
    let overflow = || err_8115(&from_name, to);
    let n = match value {
        Value::Text(s) => {
            parse_decimal_text(s).ok_or_else(|| msg(8114, &[&data_type_name(from), &"numeric"]))?
        }
        Value::DateTime(t) => Num::Float(datetime_days_f64(*t)),
        _ => numeric_of(value).ok_or_else(|| err_529(from, to))?,
    };
    let unscaled = match n {
        Num::Int(i) => i.checked_mul(pow10(scale as u32).ok_or_else(overflow)?),
        Num::Dec(u, s) => rescale(u, s, scale),
        Num::Float(f) => float_to_unscaled(f, scale),
    }
    .ok_or_else(overflow)?;
    if !fits_precision(unscaled, precision) {
        return Err(overflow());
    }
    Ok(Value::Decimal { unscaled, scale })
}

/// A float rounded to `scale` decimal places as an unscaled integer; None past 38 digits.
fn float_to_unscaled(f: f64, scale: u8) -> Option<i128> {
    let scaled = (f * 10f64.powi(scale as i32)).round();
    if !scaled.is_finite() || scaled.abs() >= 1e38 {
        return None;
    }
    Some(scaled as i128)
}

/// Parses `[+-]digits[.digits]` (spaces around allowed) as an exact decimal.
pub fn parse_decimal_text(s: &str) -> Option<Num> {
    let t = s.trim();
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (int_part, frac_part) = body.split_once('.').unwrap_or((body, ""));
    let all_digits = |p: &str| p.bytes().all(|c| c.is_ascii_digit());
    if !all_digits(int_part)
        || !all_digits(frac_part)
        || (int_part.is_empty() && frac_part.is_empty())
    {
        return None;
    }
    let int_part = int_part.trim_start_matches('0');
    if int_part.len() + frac_part.len() > 38 || frac_part.len() > 38 {
        return None;
    }
    let mut v: i128 = 0;
    for c in int_part.bytes().chain(frac_part.bytes()) {
        v = v * 10 + (c - b'0') as i128;
    }
    Some(Num::Dec(if neg { -v } else { v }, frac_part.len() as u8))
}

fn to_float(value: &Value, from: SqlType, to: SqlType) -> Result<Value, SqlError> {
    let f = match value {
        Value::Text(s) => parse_float_text(s)
            .ok_or_else(|| msg(8114, &[&data_type_name(from), &data_type_name(to)]))?,
        Value::DateTime(t) => datetime_days_f64(*t),
        _ => num_to_f64(numeric_of(value).ok_or_else(|| err_529(from, to))?),
    };
    if to == SqlType::Real {
        let r = f as f32;
        if r.is_infinite() && f.is_finite() {
            return Err(err_8115("expression", to));
        }
        return Ok(Value::Real(r));
    }
    Ok(Value::Float(f))
}

/// Parses a float literal the way CAST reads one: digits, one point, an optional
/// exponent; an empty string is 0.
pub fn parse_float_text(s: &str) -> Option<f64> {
    let t = s.trim();
    if t.is_empty() {
        return Some(0.0);
    }
    if !t
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'+' | b'-' | b'.' | b'e' | b'E'))
    {
        return None;
    }
    t.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// Days since 1900-01-01 with the time of day as a fraction, as `DATETIME` converts to numbers.
fn datetime_days_f64(ticks: i64) -> f64 {
    (ticks - DAYS_TO_1900 as i64 * TICKS_PER_DAY) as f64 / TICKS_PER_DAY as f64
}

fn to_text(
    value: &Value,
    from: SqlType,
    to: SqlType,
    style: Option<i32>,
) -> Result<Value, SqlError> {
    let (n, fixed, unicode) = match to {
        SqlType::Char(n) => (n, true, false),
        SqlType::VarChar(n) => (n, false, false),
        SqlType::NChar(n) => (n, true, true),
        SqlType::NVarChar(n) => (n, false, true),
        _ => (MAX_LENGTH, false, false),
    };
    if let Value::Guid(_) = value {
        if n < 36 {
            return Err(msg(8170, &[]));
        }
    }
    let mut s = text_of(value, from, style)?;
    if n != MAX_LENGTH && s.chars().count() > n as usize {
        match value {
            // Integers too wide for the target print as '*', as SQL Server does for char.
            Value::Bit(_)
            | Value::TinyInt(_)
            | Value::SmallInt(_)
            | Value::Int(_)
            | Value::BigInt(_)
                if !unicode =>
            {
                s = "*".to_string()
            }
            Value::Bit(_)
            | Value::TinyInt(_)
            | Value::SmallInt(_)
            | Value::Int(_)
            | Value::BigInt(_) => return Err(err_8115("expression", to)),
            Value::Decimal { .. } => return Err(err_8115("numeric", to)),
            Value::Float(_) | Value::Real(_) => return Err(err_8115(&data_type_name(from), to)),
            _ => s = s.chars().take(n as usize).collect(),
        }
    }
    if fixed && n != MAX_LENGTH {
        let len = s.chars().count();
        s.push_str(&" ".repeat((n as usize).saturating_sub(len)));
    }
    Ok(Value::Text(s))
}

/// The text CONVERT gives a value with a style (`None` is CAST's default).
pub fn text_of(value: &Value, from: SqlType, style: Option<i32>) -> Result<String, SqlError> {
    Ok(match value {
        Value::Null => String::new(),
        Value::Text(s) => s.clone(),
        Value::Bit(b) => if *b { "1" } else { "0" }.to_string(),
        Value::TinyInt(v) => v.to_string(),
        Value::SmallInt(v) => v.to_string(),
        Value::Int(v) => v.to_string(),
        Value::BigInt(v) => v.to_string(),
        Value::Decimal { unscaled, scale } => decimal_string(*unscaled, *scale),
        Value::Float(f) => float_string(*f, style.unwrap_or(0), 15),
        Value::Real(f) => float_string(*f as f64, style.unwrap_or(0), 7),
        Value::Binary(b) => binary_text(b, style),
        Value::Guid(g) => guid_string(g),
        Value::Date(d) => format_datetime(*d as i64 * TICKS_PER_DAY, DateKind::Date, style)?,
        Value::DateTime(t) => format_datetime(*t, DateKind::DateTime, style)?,
        Value::DateTime2(t) => {
            let scale = if let SqlType::DateTime2(s) = from {
                s.min(7)
            } else {
                7
            };
            format_datetime(*t, DateKind::DateTime2(scale), style)?
        }
    })
}

/// An unscaled decimal as text with exactly `scale` decimals: `123.45`, `-0.50`.
pub fn decimal_string(unscaled: i128, scale: u8) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let scale = scale as usize;
    let sign = if unscaled < 0 { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int_part, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int_part}.{frac}")
}

/// A float as CONVERT prints it: style 0 is C's `%g` with 6 significant digits and a
/// three-digit exponent (`1.23457e+006`), style 1 eight digits and style 2 sixteen digits
/// in scientific form, style 3 seventeen digits.
pub fn float_string(f: f64, style: i32, _max_digits: usize) -> String {
    match style {
        1 => scientific(f, 7),
        2 => scientific(f, 15),
        3 => scientific(f, 16),
        _ => general(f, 6),
    }
}

/// `%.{digits}e` with SQL Server's (MSVC's) three-digit exponent.
fn scientific(f: f64, digits: usize) -> String {
    let s = format!("{f:.digits$e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    format!(
        "{mantissa}e{}{:03}",
        if exp < 0 { '-' } else { '+' },
        exp.abs()
    )
}

/// C's `%g` with `precision` significant digits and a three-digit exponent.
fn general(f: f64, precision: usize) -> String {
    if f == 0.0 {
        return "0".to_string();
    }
    if !f.is_finite() {
        return f.to_string();
    }
    let s = format!("{f:.prec$e}", prec = precision - 1);
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= precision as i32 {
        let m = strip_zeros(mantissa);
        format!("{m}e{}{:03}", if exp < 0 { '-' } else { '+' }, exp.abs())
    } else {
        let decimals = (precision as i32 - 1 - exp).max(0) as usize;
        strip_zeros(&format!("{f:.decimals$}")).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Binary as text: the bytes as characters for CAST, `0x`-prefixed hex for style 1,
/// bare hex for style 2.
fn binary_text(b: &[u8], style: Option<i32>) -> String {
    match style {
        Some(1) => format!("0x{}", hex_upper(b)),
        Some(2) => hex_upper(b),
        _ => b.iter().map(|&c| c as char).collect(),
    }
}

/// Upper-case hex digits of bytes.
pub fn hex_upper(b: &[u8]) -> String {
    b.iter().map(|c| format!("{c:02X}")).collect()
}

/// A GUID in SQL Server's text form from its storage-order bytes.
pub fn guid_string(g: &[u8; 16]) -> String {
    format!(
        "{:02X}{:02X}{:02X}{:02X}-{:02X}{:02X}-{:02X}{:02X}-{}-{}",
        g[3],
        g[2],
        g[1],
        g[0],
        g[5],
        g[4],
        g[7],
        g[6],
        hex_upper(&g[8..10]),
        hex_upper(&g[10..16])
    )
}

/// Parses SQL Server's GUID text (optionally in braces; characters past the 36th are
/// ignored, as CAST ignores them) into storage-order bytes.
pub fn parse_guid(s: &str) -> Option<[u8; 16]> {
    let t = s.trim();
    let t = t
        .strip_prefix('{')
        .map(|r| r.strip_suffix('}').unwrap_or(r))
        .unwrap_or(t);
    let t: String = t.chars().take(36).collect();
    let b = t.as_bytes();
    if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
        return None;
    }
    let hex: String = t.chars().filter(|&c| c != '-').collect();
    let raw = parse_hex(&hex)?;
    if raw.len() != 16 {
        return None;
    }
    let mut g = [0u8; 16];
    let order = [3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15];
    for (i, &src) in order.iter().enumerate() {
        g[i] = raw[src];
    }
    Some(g)
}

/// Hex digits (even count) to bytes.
pub fn parse_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() & 1 == 1 || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

fn to_guid(value: &Value, from: SqlType) -> Result<Value, SqlError> {
    match value {
        Value::Guid(g) => Ok(Value::Guid(*g)),
        Value::Text(s) => parse_guid(s).map(Value::Guid).ok_or_else(|| msg(8169, &[])),
        Value::Binary(b) => {
            let mut g = [0u8; 16];
            for (i, byte) in b.iter().take(16).enumerate() {
                g[i] = *byte;
            }
            Ok(Value::Guid(g))
        }
        _ => Err(err_529(from, SqlType::UniqueIdentifier)),
    }
}

fn to_binary(
    value: &Value,
    from: SqlType,
    to: SqlType,
    style: Option<i32>,
) -> Result<Value, SqlError> {
    let (n, fixed) = match to {
        SqlType::Binary(n) => (n, true),
        SqlType::VarBinary(n) => (n, false),
        _ => (MAX_LENGTH, false),
    };
    let (mut bytes, numeric) = binary_bytes(value, from, style)?;
    if n != MAX_LENGTH {
        let n = n as usize;
        if numeric && bytes.len() > n {
            bytes.drain(..bytes.len() - n);
        } else if numeric && fixed {
            let mut padded = vec![0u8; n - bytes.len()];
            padded.extend_from_slice(&bytes);
            bytes = padded;
        }
        bytes.truncate(n);
        if fixed {
            bytes.resize(n, 0);
        }
    }
    Ok(Value::Binary(bytes))
}

/// The bytes a value converts to, and whether they are a number (kept right-aligned).
fn binary_bytes(
    value: &Value,
    from: SqlType,
    style: Option<i32>,
) -> Result<(Vec<u8>, bool), SqlError> {
    Ok(match value {
        Value::Binary(b) => (b.clone(), false),
        Value::Text(s) => (text_to_bytes(s, from, style)?, false),
        Value::Bit(b) => (vec![*b as u8], true),
        Value::TinyInt(v) => (vec![*v], true),
        Value::SmallInt(v) => (v.to_be_bytes().to_vec(), true),
        Value::Int(v) => (v.to_be_bytes().to_vec(), true),
        Value::BigInt(v) => (v.to_be_bytes().to_vec(), true),
        Value::Float(f) => (f.to_be_bytes().to_vec(), true),
        Value::Real(f) => (f.to_be_bytes().to_vec(), true),
        Value::Decimal { unscaled, scale } => {
            let p = type_of(value);
            let precision = if let SqlType::Decimal { precision, .. } = p {
                precision
            } else {
                38
            };
            let mut b = vec![precision, *scale, (*unscaled >= 0) as u8];
            b.extend_from_slice(&unscaled.unsigned_abs().to_le_bytes());
            (b, false)
        }
        Value::Guid(g) => (g.to_vec(), false),
        Value::DateTime(t) => {
            let days = (t.div_euclid(TICKS_PER_DAY) - DAYS_TO_1900 as i64) as i32;
            let c300 =
                (t.rem_euclid(TICKS_PER_DAY) * 300 + TICKS_PER_SECOND / 2) / TICKS_PER_SECOND;
            let mut b = days.to_be_bytes().to_vec();
            b.extend_from_slice(&(c300 as i32).to_be_bytes());
            (b, true)
        }
        Value::Date(d) => (d.to_be_bytes().to_vec(), true),
        Value::DateTime2(t) => (t.to_be_bytes().to_vec(), true),
        Value::Null => (Vec::new(), false),
    })
}

/// String to bytes: hex for styles 1 (with `0x`) and 2; otherwise the characters'
/// code units (Latin-1 for char types, UTF-16LE for Unicode types).
fn text_to_bytes(s: &str, from: SqlType, style: Option<i32>) -> Result<Vec<u8>, SqlError> {
    let bad = || msg(8114, &[&data_type_name(from), &"varbinary"]);
    match style {
        Some(1) => {
            let hex = s
                .strip_prefix("0x")
                .or_else(|| s.strip_prefix("0X"))
                .ok_or_else(bad)?;
            parse_hex(hex).ok_or_else(bad)
        }
        Some(2) => parse_hex(s).ok_or_else(bad),
        _ if matches!(from, SqlType::NChar(_) | SqlType::NVarChar(_)) => {
            Ok(s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect())
        }
        _ => Ok(s
            .chars()
            .map(|c| if (c as u32) < 256 { c as u8 } else { b'?' })
            .collect()),
    }
}

fn to_datetime(value: &Value, from: SqlType, to: SqlType) -> Result<Value, SqlError> {
    let ticks = match value {
        Value::Date(d) => *d as i64 * TICKS_PER_DAY,
        Value::DateTime(t) | Value::DateTime2(t) => *t,
        Value::Text(s) => {
            let p = parse_datetime_text(s).ok_or_else(|| msg(241, &[]))?;
            if to == SqlType::DateTime && p.frac_digits > 3 {
                return Err(msg(241, &[]));
            }
            p.ticks
        }
        _ if to == SqlType::DateTime => {
            let n = numeric_of(value).ok_or_else(|| err_529(from, to))?;
            let days = num_to_f64(n);
            if !days.is_finite() || days.abs() > 4e6 {
                return Err(msg(8115, &[&"expression", &"datetime"]));
            }
            DAYS_TO_1900 as i64 * TICKS_PER_DAY + (days * TICKS_PER_DAY as f64).round() as i64
        }
        _ => return Err(err_529(from, to)),
    };
    finish_datetime(ticks, from, to)
}

/// Rounds ticks to the target type's precision and checks its range.
fn finish_datetime(ticks: i64, from: SqlType, to: SqlType) -> Result<Value, SqlError> {
    let out_of_range = || msg(242, &[&data_type_name(from), &data_type_name(to)]);
    match to {
        SqlType::Date => {
            if !(0..MAX_TICKS).contains(&ticks) {
                return Err(out_of_range());
            }
            Ok(Value::Date(ticks.div_euclid(TICKS_PER_DAY) as i32))
        }
        SqlType::DateTime => {
            let t = round_datetime(ticks);
            if t < DAYS_TO_1753 as i64 * TICKS_PER_DAY || t >= MAX_TICKS {
                return Err(out_of_range());
            }
            Ok(Value::DateTime(t))
        }
        SqlType::DateTime2(s) => {
            let t = round_datetime2(ticks, s);
            if !(0..MAX_TICKS).contains(&t) {
                return Err(out_of_range());
            }
            Ok(Value::DateTime2(t))
        }
        _ => Err(err_529(from, to)),
    }
}

/// Rounds ticks to `DATETIME`'s 1/300-second steps (`.000`, `.003`, `.007`).
pub fn round_datetime(ticks: i64) -> i64 {
    let days = ticks.div_euclid(TICKS_PER_DAY);
    let rem = ticks.rem_euclid(TICKS_PER_DAY);
    let c300 = (rem * 300 + TICKS_PER_SECOND / 2) / TICKS_PER_SECOND;
    days.saturating_mul(TICKS_PER_DAY)
        .saturating_add((c300 * TICKS_PER_SECOND + 150) / 300)
}

/// Rounds ticks to `DATETIME2(scale)` precision, half up.
pub fn round_datetime2(ticks: i64, scale: u8) -> i64 {
    let unit = 10i64.pow(7 - scale.min(7) as u32);
    ticks
        .saturating_add(unit / 2)
        .div_euclid(unit)
        .saturating_mul(unit)
}

/// True for leap years of the proleptic Gregorian calendar.
pub fn is_leap(y: i32) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// Days in a month (1-based).
pub fn days_in_month(y: i32, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ => 28 + is_leap(y) as u32,
    }
}

/// Days since 0001-01-01 of a calendar date.
pub fn days_from_ymd(y: i32, m: u32, d: u32) -> i32 {
    let y0 = y - 1;
    let before_year = y0 * 365 + y0 / 4 - y0 / 100 + y0 / 400;
    let mut doy = d as i32 - 1;
    for month in 1..m {
        doy += days_in_month(y, month) as i32;
    }
    before_year + doy
}

/// The calendar date of a day count since 0001-01-01.
pub fn ymd_from_days(days: i32) -> (i32, u32, u32) {
    // Shift to a 400-year cycle starting 0000-03-01 (Howard Hinnant's civil_from_days).
    let z = days as i64 + 306;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = (yoe + era * 400 + (m <= 2) as i64) as i32;
    (y, m, d)
}

/// Calendar fields of a tick count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateParts {
    pub year: i32,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    /// 100-ns ticks within the second.
    pub fraction: u32,
}

/// Splits ticks since 0001-01-01 into calendar fields.
pub fn date_parts(ticks: i64) -> DateParts {
    let days = ticks.div_euclid(TICKS_PER_DAY);
    let rem = ticks.rem_euclid(TICKS_PER_DAY);
    let (year, month, day) = ymd_from_days(days.clamp(i32::MIN as i64, i32::MAX as i64) as i32);
    let secs = rem / TICKS_PER_SECOND;
    DateParts {
        year,
        month,
        day,
        hour: (secs / 3600) as u32,
        minute: (secs / 60 % 60) as u32,
        second: (secs % 60) as u32,
        fraction: (rem % TICKS_PER_SECOND) as u32,
    }
}

/// Which date type a tick count is printed as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateKind {
    Date,
    DateTime,
    DateTime2(u8),
}

/// Formats ticks as CONVERT does with a style; `None` is CAST's default (`Oct  4 2016
/// 11:38AM` for datetime, ISO for date and datetime2). Unknown styles give message 281.
pub fn format_datetime(ticks: i64, kind: DateKind, style: Option<i32>) -> Result<String, SqlError> {
    let p = date_parts(ticks);
    let (y, m, d) = (p.year, p.month, p.day);
    let mon = MONTHS[(m as usize + 11) % 12];
    let hms = format!("{:02}:{:02}:{:02}", p.hour, p.minute, p.second);
    let ms = ((p.fraction + 5_000) / 10_000).min(999);
    let default = match kind {
        DateKind::DateTime => 100,
        _ => 121,
    };
    Ok(match style.unwrap_or(default) {
        0 | 100 => format!("{mon} {d:>2} {y} {}", clock_12(p.hour, p.minute)),
        1 => format!("{m:02}/{d:02}/{:02}", y % 100),
        101 => format!("{m:02}/{d:02}/{y:04}"),
        2 => format!("{:02}.{m:02}.{d:02}", y % 100),
        102 => format!("{y:04}.{m:02}.{d:02}"),
        3 => format!("{d:02}/{m:02}/{:02}", y % 100),
        103 => format!("{d:02}/{m:02}/{y:04}"),
        104 => format!("{d:02}.{m:02}.{y:04}"),
        105 => format!("{d:02}-{m:02}-{y:04}"),
        106 => format!("{d:02} {mon} {y:04}"),
        107 => format!("{mon} {d:02}, {y:04}"),
        8 | 24 | 108 => hms,
        9 | 109 => {
            let ampm = clock_12(p.hour, p.minute);
            let (hm, suffix) = ampm.split_at(ampm.len() - 2);
            format!("{mon} {d:>2} {y} {hm}:{:02}:{ms:03}{suffix}", p.second)
        }
        110 => format!("{m:02}-{d:02}-{y:04}"),
        111 => format!("{y:04}/{m:02}/{d:02}"),
        112 => format!("{y:04}{m:02}{d:02}"),
        13 | 113 => format!("{d:02} {mon} {y:04} {hms}:{ms:03}"),
        20 | 120 => format!("{y:04}-{m:02}-{d:02} {hms}"),
        21 | 25 | 121 => iso(y, m, d, &hms, kind, p.fraction, ms, ' ', false),
        23 => format!("{y:04}-{m:02}-{d:02}"),
        126 | 127 => iso(y, m, d, &hms, kind, p.fraction, ms, 'T', true),
        other => {
            return Err(msg(281, &[&other, &data_type_name(kind_type(kind))]));
        }
    })
}

fn kind_type(kind: DateKind) -> SqlType {
    match kind {
        DateKind::Date => SqlType::Date,
        DateKind::DateTime => SqlType::DateTime,
        DateKind::DateTime2(s) => SqlType::DateTime2(s),
    }
}

/// `hh:miAM` with the hour right-aligned in two characters, as style 100 prints it.
fn clock_12(hour: u32, minute: u32) -> String {
    let h12 = match hour % 12 {
        0 => 12,
        h => h,
    };
    format!(
        "{h12:>2}:{minute:02}{}",
        if hour < 12 { "AM" } else { "PM" }
    )
}

/// ISO 8601 forms (styles 121 and 126); a date prints without time, a datetime with
/// milliseconds (126 omits `.000`), a datetime2 with its scale's digits.
#[allow(clippy::too_many_arguments)]
fn iso(
    y: i32,
    m: u32,
    d: u32,
    hms: &str,
    kind: DateKind,
    fraction: u32,
    ms: u32,
    sep: char,
    trim_zero_ms: bool,
) -> String {
    let date = format!("{y:04}-{m:02}-{d:02}");
    match kind {
        DateKind::Date => date,
        DateKind::DateTime if trim_zero_ms && ms == 0 => format!("{date}{sep}{hms}"),
        DateKind::DateTime => format!("{date}{sep}{hms}.{ms:03}"),
        DateKind::DateTime2(0) => format!("{date}{sep}{hms}"),
        DateKind::DateTime2(s) => {
            let digits = format!("{fraction:07}");
            format!("{date}{sep}{hms}.{}", &digits[..s.min(7) as usize])
        }
    }
}

/// A date/time string read by CAST: ticks and how many fraction digits it carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedDateTime {
    pub ticks: i64,
    pub frac_digits: u32,
}

/// Reads the date/time strings SQL Server accepts under us_english: `yyyy-mm-dd`,
/// `yyyymmdd`, `mm/dd/yyyy`, `Mon dd yyyy`, `dd Mon yyyy`, each optionally followed by
/// ` hh:mi[:ss[.fffffff]][AM|PM]` (or `T` and a trailing `Z`), or a time alone (on
/// 1900-01-01).
pub fn parse_datetime_text(s: &str) -> Option<ParsedDateTime> {
    let t = s.trim().to_ascii_uppercase();
    if t.is_empty() {
        return Some(ParsedDateTime {
            ticks: DAYS_TO_1900 as i64 * TICKS_PER_DAY,
            frac_digits: 0,
        });
    }
    let tokens: Vec<&str> = t
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|x| !x.is_empty())
        .collect();
    let (days, time_tokens) = if tokens[0].contains(':') && !tokens[0].contains('T') {
        (DAYS_TO_1900, &tokens[..])
    } else if tokens[0].starts_with(|c: char| c.is_ascii_alphabetic()) {
        // Mon dd yyyy
        let m = month_number(tokens[0])?;
        let d: u32 = tokens.get(1)?.parse().ok()?;
        let y = parse_year(tokens.get(2)?)?;
        (checked_days(y, m, d)?, &tokens[3..])
    } else if tokens.len() > 1
        && tokens[1].starts_with(|c: char| c.is_ascii_alphabetic())
        && month_number(tokens[1]).is_some()
    {
        // dd Mon yyyy
        let d: u32 = tokens[0].parse().ok()?;
        let m = month_number(tokens[1])?;
        let y = parse_year(tokens.get(2)?)?;
        (checked_days(y, m, d)?, &tokens[3..])
    } else {
        let (date, time) = match tokens[0].split_once('T') {
            Some((date, time)) => (date, Some(time)),
            None => (tokens[0], None),
        };
        let days = parse_numeric_date(date)?;
        if let Some(time) = time {
            if tokens.len() > 1 {
                return None;
            }
            let (ticks, digits) = parse_time(&[time.strip_suffix('Z').unwrap_or(time)])?;
            return Some(ParsedDateTime {
                ticks: days as i64 * TICKS_PER_DAY + ticks,
                frac_digits: digits,
            });
        }
        (days, &tokens[1..])
    };
    let (time, frac_digits) = if time_tokens.is_empty() {
        (0, 0)
    } else {
        parse_time(time_tokens)?
    };
    Some(ParsedDateTime {
        ticks: days as i64 * TICKS_PER_DAY + time,
        frac_digits,
    })
}

fn month_number(s: &str) -> Option<u32> {
    if s.len() < 3 {
        return None;
    }
    let full = [
        "JANUARY",
        "FEBRUARY",
        "MARCH",
        "APRIL",
        "MAY",
        "JUNE",
        "JULY",
        "AUGUST",
        "SEPTEMBER",
        "OCTOBER",
        "NOVEMBER",
        "DECEMBER",
    ];
    full.iter()
        .position(|m| m.starts_with(s) && (s.len() == 3 || s.len() == m.len()))
        .map(|i| i as u32 + 1)
}

fn parse_year(s: &str) -> Option<i32> {
    if !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let y: i32 = s.parse().ok()?;
    match s.len() {
        2 => Some(if y < 50 { 2000 + y } else { 1900 + y }),
        4 => Some(y),
        _ => None,
    }
}

fn checked_days(y: i32, m: u32, d: u32) -> Option<i32> {
    if !(1..=9999).contains(&y) || !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return None;
    }
    Some(days_from_ymd(y, m, d))
}

/// `yyyymmdd`, `yyyy-mm-dd` (or `/`, `.`), `mm/dd/yyyy` (or `-`, `.`, two-digit years).
fn parse_numeric_date(s: &str) -> Option<i32> {
    if s.len() == 8 && s.bytes().all(|c| c.is_ascii_digit()) {
        return checked_days(
            s[..4].parse().ok()?,
            s[4..6].parse().ok()?,
            s[6..].parse().ok()?,
        );
    }
    let sep = s.chars().find(|c| matches!(c, '-' | '/' | '.'))?;
    let parts: Vec<&str> = s.split(sep).collect();
    if parts.len() != 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit()))
    {
        return None;
    }
    if parts[0].len() == 4 {
        checked_days(
            parts[0].parse().ok()?,
            parts[1].parse().ok()?,
            parts[2].parse().ok()?,
        )
    } else {
        checked_days(
            parse_year(parts[2])?,
            parts[0].parse().ok()?,
            parts[1].parse().ok()?,
        )
    }
}

/// `hh:mi[:ss[.fffffff|:mmm]]` with an optional `AM`/`PM` (attached or separate token);
/// returns ticks into the day and the number of fraction digits.
fn parse_time(tokens: &[&str]) -> Option<(i64, u32)> {
    let joined = tokens.concat();
    let (body, ampm) = if let Some(b) = joined.strip_suffix("AM") {
        (b, Some(false))
    } else if let Some(b) = joined.strip_suffix("PM") {
        (b, Some(true))
    } else {
        (joined.as_str(), None)
    };
    let parts: Vec<&str> = body.split(':').collect();
    if parts.is_empty() || parts.len() > 4 || parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    let num = |p: &str| -> Option<u32> {
        p.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| p.parse().ok())
            .flatten()
    };
    let mut hour = num(parts[0])?;
    let minute = parts.get(1).map_or(Some(0), |p| num(p))?;
    let (second, mut fraction, mut digits) = match parts.get(2) {
        Some(p) => parse_seconds(p)?,
        None => (0, 0, 0),
    };
    if let Some(ms) = parts.get(3) {
        if digits > 0 || ms.len() > 3 {
            return None;
        }
        fraction = num(ms)? as i64 * 10_000;
        digits = ms.len() as u32;
    }
    if let Some(pm) = ampm {
        if hour > 12 {
            return None;
        }
        hour = hour % 12 + if pm { 12 } else { 0 };
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let secs = hour as i64 * 3600 + minute as i64 * 60 + second as i64;
    Some((secs * TICKS_PER_SECOND + fraction, digits))
}

/// `ss[.fffffff]` into seconds, fraction ticks and fraction digit count.
fn parse_seconds(p: &str) -> Option<(u32, i64, u32)> {
    let (sec, frac) = p.split_once('.').unwrap_or((p, ""));
    if sec.is_empty()
        || !sec.bytes().all(|c| c.is_ascii_digit())
        || !frac.bytes().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    if frac.len() > 7 {
        return None;
    }
    let ticks = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<7}").parse::<i64>().ok()?
    };
    Some((sec.parse().ok()?, ticks, frac.len() as u32))
}

/// The ticks of a date/time value (a date at midnight), else None.
pub fn value_ticks(v: &Value) -> Option<i64> {
    match v {
        Value::Date(d) => Some(*d as i64 * TICKS_PER_DAY),
        Value::DateTime(t) | Value::DateTime2(t) => Some(*t),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dt2(s: &str) -> Value {
        convert(&Value::Text(s.into()), SqlType::DateTime2(7), None).unwrap()
    }

    #[test]
    fn integers_and_overflow() {
        assert_eq!(
            convert(&Value::Int(300), SqlType::BigInt, None).unwrap(),
            Value::BigInt(300)
        );
        let e = convert(&Value::Int(300), SqlType::TinyInt, None).unwrap_err();
        assert_eq!(
            (e.number, e.text.as_str()),
            (
                220,
                "Arithmetic overflow error for data type tinyint, value = 300."
            )
        );
        let e = convert(&Value::BigInt(3_000_000_000), SqlType::Int, None).unwrap_err();
        assert_eq!(e.number, 8115);
        assert_eq!(
            e.text,
            "Arithmetic overflow error converting expression to data type int."
        );
        assert_eq!(
            convert(
                &Value::Decimal {
                    unscaled: 275,
                    scale: 2
                },
                SqlType::Int,
                None
            )
            .unwrap(),
            Value::Int(2)
        );
        assert_eq!(
            convert(&Value::Float(-2.9), SqlType::Int, None).unwrap(),
            Value::Int(-2)
        );
        assert_eq!(
            convert(&Value::Int(5), SqlType::Bit, None).unwrap(),
            Value::Bit(true)
        );
        assert_eq!(
            convert(&Value::Float(f64::NAN), SqlType::Int, None)
                .unwrap_err()
                .number,
            8115
        );
    }

    #[test]
    fn strings_to_integers() {
        let t = |s: &str| Value::Text(s.into());
        assert_eq!(
            convert(&t(" 42 "), SqlType::Int, None).unwrap(),
            Value::Int(42)
        );
        assert_eq!(convert(&t(""), SqlType::Int, None).unwrap(), Value::Int(0));
        let e = convert(&t("abc"), SqlType::Int, None).unwrap_err();
        assert_eq!(e.number, 245);
        assert_eq!(
            e.text,
            "Conversion failed when converting the varchar value 'abc' to data type int."
        );
        let e = convert_from(&t("1.5"), SqlType::NVarChar(10), SqlType::Int, None).unwrap_err();
        assert_eq!(
            e.text,
            "Conversion failed when converting the nvarchar value '1.5' to data type int."
        );
        assert_eq!(
            convert(&t("3000000000"), SqlType::Int, None)
                .unwrap_err()
                .number,
            248
        );
        assert_eq!(
            convert(&t("300"), SqlType::TinyInt, None)
                .unwrap_err()
                .number,
            244
        );
        assert_eq!(
            convert(&t("TRUE"), SqlType::Bit, None).unwrap(),
            Value::Bit(true)
        );
        assert_eq!(
            convert(&t("0"), SqlType::Bit, None).unwrap(),
            Value::Bit(false)
        );
        assert_eq!(
            convert(&t("x"), SqlType::Bit, None).unwrap_err().number,
            245
        );
        assert_eq!(
            convert(
                &t("99999999999999999999999999999999999999999"),
                SqlType::BigInt,
                None
            )
            .unwrap_err()
            .number,
            8115
        );
    }

    #[test]
    fn decimals() {
        let d = SqlType::Decimal {
            precision: 5,
            scale: 2,
        };
        assert_eq!(
            convert(&Value::Text("123.456".into()), d, None).unwrap(),
            Value::Decimal {
                unscaled: 12346,
                scale: 2
            }
        );
        assert_eq!(
            convert(&Value::Int(7), d, None).unwrap(),
            Value::Decimal {
                unscaled: 700,
                scale: 2
            }
        );
        let e = convert(&Value::Text("1x".into()), d, None).unwrap_err();
        assert_eq!(
            (e.number, e.text.as_str()),
            (8114, "Error converting data type varchar to numeric.")
        );
        let e = convert(&Value::Int(1000), d, None).unwrap_err();
        assert_eq!(
            e.text,
            "Arithmetic overflow error converting int to data type numeric."
        );
        let e = convert(&Value::Text("1000".into()), d, None).unwrap_err();
        assert_eq!(
            e.text,
            "Arithmetic overflow error converting varchar to data type numeric."
        );
        assert_eq!(
            convert(
                &Value::Decimal {
                    unscaled: -12345,
                    scale: 3
                },
                d,
                None
            )
            .unwrap(),
            Value::Decimal {
                unscaled: -1235,
                scale: 2
            }
        );
        assert_eq!(
            convert(
                &Value::Float(1.005),
                SqlType::Decimal {
                    precision: 10,
                    scale: 1
                },
                None
            )
            .unwrap(),
            Value::Decimal {
                unscaled: 10,
                scale: 1
            }
        );
    }

    #[test]
    fn numbers_to_strings() {
        let vc = SqlType::VarChar(30);
        let s = |v: Value| convert(&v, vc, None).unwrap();
        assert_eq!(s(Value::Int(-5)), Value::Text("-5".into()));
        assert_eq!(
            s(Value::Decimal {
                unscaled: 12345,
                scale: 2
            }),
            Value::Text("123.45".into())
        );
        assert_eq!(
            s(Value::Decimal {
                unscaled: -5,
                scale: 2
            }),
            Value::Text("-0.05".into())
        );
        assert_eq!(
            s(Value::Float(1234567.0)),
            Value::Text("1.23457e+006".into())
        );
        assert_eq!(s(Value::Float(123456.0)), Value::Text("123456".into()));
        assert_eq!(s(Value::Float(0.1)), Value::Text("0.1".into()));
        assert_eq!(s(Value::Float(0.00001)), Value::Text("1e-005".into()));
        assert_eq!(
            convert(&Value::Float(1.5), vc, Some(2)).unwrap(),
            Value::Text("1.500000000000000e+000".into())
        );
        assert_eq!(
            convert(&Value::Int(123), SqlType::VarChar(2), None).unwrap(),
            Value::Text("*".into())
        );
        assert_eq!(
            convert(
                &Value::Decimal {
                    unscaled: 12345,
                    scale: 2
                },
                SqlType::VarChar(3),
                None
            )
            .unwrap_err()
            .number,
            8115
        );
        assert_eq!(
            convert(&Value::Text("abcdef".into()), SqlType::VarChar(3), None).unwrap(),
            Value::Text("abc".into())
        );
        assert_eq!(
            convert(&Value::Text("ab".into()), SqlType::Char(4), None).unwrap(),
            Value::Text("ab  ".into())
        );
    }

    #[test]
    fn strings_to_dates() {
        let ticks = |y, m, d, h: i64, mi: i64, s: i64| {
            days_from_ymd(y, m, d) as i64 * TICKS_PER_DAY
                + (h * 3600 + mi * 60 + s) * TICKS_PER_SECOND
        };
        assert_eq!(
            dt2("2016-10-04 11:38:33.83"),
            Value::DateTime2(ticks(2016, 10, 4, 11, 38, 33) + 8_300_000)
        );
        for s in [
            "20161004",
            "2016-10-04T11:38:33",
            "10/04/2016 11:38PM",
            "Oct  4 2016 11:38AM",
            "4 October 2016",
        ] {
            assert!(parse_datetime_text(s).is_some(), "{s}");
        }
        assert_eq!(
            dt2("20161004"),
            Value::DateTime2(ticks(2016, 10, 4, 0, 0, 0))
        );
        assert_eq!(
            dt2("2016-10-04T11:38:33"),
            Value::DateTime2(ticks(2016, 10, 4, 11, 38, 33))
        );
        assert_eq!(
            dt2("10/04/2016 11:38PM"),
            Value::DateTime2(ticks(2016, 10, 4, 23, 38, 0))
        );
        assert_eq!(
            dt2("Oct  4 2016 11:38AM"),
            Value::DateTime2(ticks(2016, 10, 4, 11, 38, 0))
        );
        assert_eq!(
            dt2("4 October 2016"),
            Value::DateTime2(ticks(2016, 10, 4, 0, 0, 0))
        );
        let e = convert(&Value::Text("2016-13-01".into()), SqlType::Date, None).unwrap_err();
        assert_eq!(
            (e.number, e.text.as_str()),
            (
                241,
                "Conversion failed when converting date and/or time from character string."
            )
        );
        assert_eq!(
            convert(&Value::Text("2016-02-30".into()), SqlType::Date, None)
                .unwrap_err()
                .number,
            241
        );
        assert_eq!(
            convert(
                &Value::Text("2016-01-01 10:00:00.1234".into()),
                SqlType::DateTime,
                None
            )
            .unwrap_err()
            .number,
            241
        );
        let e = convert(&Value::Text("1700-01-01".into()), SqlType::DateTime, None).unwrap_err();
        assert_eq!(e.text, "The conversion of a varchar data type to a datetime data type resulted in an out-of-range value.");
        assert_eq!(
            convert(&Value::Int(1), SqlType::Date, None)
                .unwrap_err()
                .number,
            529
        );
    }

    #[test]
    fn datetime_rounding_and_text() {
        let dt = |s: &str| convert(&Value::Text(s.into()), SqlType::DateTime, None).unwrap();
        let text = |v: &Value, style| convert(v, SqlType::VarChar(40), style).unwrap();
        for (input, shown) in [
            ("01:02:03.001", "000"),
            ("01:02:03.002", "003"),
            ("01:02:03.005", "007"),
            ("01:02:03.009", "010"),
            ("01:02:03.998", "997"),
            ("01:02:03.999", "04.000"),
        ] {
            let v = dt(&format!("2016-10-04 {input}"));
            let Value::Text(s) = text(&v, Some(121)) else {
                panic!()
            };
            assert!(s.ends_with(shown), "{input} -> {s}");
        }
        let v = dt("2016-10-04 11:38:33.830");
        assert_eq!(text(&v, None), Value::Text("Oct  4 2016 11:38AM".into()));
        assert_eq!(
            text(&v, Some(120)),
            Value::Text("2016-10-04 11:38:33".into())
        );
        assert_eq!(
            text(&v, Some(126)),
            Value::Text("2016-10-04T11:38:33.830".into())
        );
        assert_eq!(
            text(&dt("2016-10-04 21:05"), Some(0)),
            Value::Text("Oct  4 2016  9:05PM".into())
        );
        let v2 = dt2("2016-10-04 11:38:33.83");
        assert_eq!(
            text(&v2, None),
            Value::Text("2016-10-04 11:38:33.8300000".into())
        );
        let d = convert(&v2, SqlType::Date, None).unwrap();
        assert_eq!(text(&d, None), Value::Text("2016-10-04".into()));
        let r = convert(
            &Value::Text("2016-10-04 11:38:33.8351".into()),
            SqlType::DateTime2(2),
            None,
        )
        .unwrap();
        assert_eq!(
            convert_from(&r, SqlType::DateTime2(2), SqlType::VarChar(40), None).unwrap(),
            Value::Text("2016-10-04 11:38:33.84".into())
        );
        assert_eq!(
            convert(&v, SqlType::VarChar(40), Some(999))
                .unwrap_err()
                .number,
            281
        );
    }

    #[test]
    fn guid_and_binary() {
        let text = "6F9619FF-8B86-D011-B42D-00C04FC964FF";
        let g = convert(
            &Value::Text(text.to_lowercase()),
            SqlType::UniqueIdentifier,
            None,
        )
        .unwrap();
        assert_eq!(
            convert(&g, SqlType::NVarChar(36), None).unwrap(),
            Value::Text(text.into())
        );
        let Value::Binary(b) = convert(&g, SqlType::Binary(16), None).unwrap() else {
            panic!()
        };
        assert_eq!(hex_upper(&b), "FF19966F868B11D0B42D00C04FC964FF");
        assert_eq!(
            convert(&Value::Text("nope".into()), SqlType::UniqueIdentifier, None)
                .unwrap_err()
                .number,
            8169
        );
        assert_eq!(
            convert(&g, SqlType::VarChar(10), None).unwrap_err().number,
            8170
        );
        assert_eq!(
            convert(&Value::Int(1), SqlType::Binary(4), None).unwrap(),
            Value::Binary(vec![0, 0, 0, 1])
        );
        assert_eq!(
            convert(&Value::Int(258), SqlType::Binary(1), None).unwrap(),
            Value::Binary(vec![2])
        );
        assert_eq!(
            convert(&Value::Text("AB".into()), SqlType::VarBinary(10), None).unwrap(),
            Value::Binary(vec![0x41, 0x42])
        );
        assert_eq!(
            convert(
                &Value::Text("0x0A1B".into()),
                SqlType::VarBinary(10),
                Some(1)
            )
            .unwrap(),
            Value::Binary(vec![0x0A, 0x1B])
        );
        assert_eq!(
            convert(
                &Value::Binary(vec![0x0A, 0x1B]),
                SqlType::VarChar(10),
                Some(1)
            )
            .unwrap(),
            Value::Text("0x0A1B".into())
        );
        assert_eq!(
            convert(&Value::Binary(vec![0, 1]), SqlType::Int, None).unwrap(),
            Value::Int(1)
        );
    }

    #[test]
    fn calendar_round_trip() {
        for days in [0, 1, 59, 60, 365, 693_595, 736_240, 3_652_058] {
            let (y, m, d) = ymd_from_days(days);
            assert_eq!(days_from_ymd(y, m, d), days);
        }
        assert_eq!(ymd_from_days(0), (1, 1, 1));
        assert_eq!(ymd_from_days(DAYS_TO_1900), (1900, 1, 1));
        assert_eq!(ymd_from_days(3_652_058), (9999, 12, 31));
        assert_eq!(days_from_ymd(1753, 1, 1), DAYS_TO_1753);
    }

    #[test]
    fn type_facts() {
        assert_eq!(data_type_name(SqlType::NVarChar(5)), "nvarchar");
        assert_eq!(data_type_name(SqlType::DateTime2(3)), "datetime2");
        assert_eq!(
            type_of(&Value::Decimal {
                unscaled: 12345,
                scale: 2
            }),
            SqlType::Decimal {
                precision: 5,
                scale: 2
            }
        );
        assert_eq!(type_of(&Value::Text("abc".into())), SqlType::VarChar(3));
        assert!(precedence(SqlType::DateTime2(7)) > precedence(SqlType::DateTime));
        assert!(precedence(SqlType::Int) > precedence(SqlType::NVarChar(1)));
        assert!(precedence(SqlType::Char(1)) > precedence(SqlType::VarBinary(1)));
        assert_eq!(result_type(SqlType::Int, SqlType::VarChar(3)), SqlType::Int);
        assert_eq!(
            result_type(SqlType::VarChar(3), SqlType::NVarChar(4)),
            SqlType::NVarChar(7)
        );
        assert_eq!(
            result_type(
                SqlType::Int,
                SqlType::Decimal {
                    precision: 5,
                    scale: 2
                }
            ),
            SqlType::Decimal {
                precision: 13,
                scale: 2
            }
        );
        assert_eq!(
            fit_decimal(77, 40),
            SqlType::Decimal {
                precision: 38,
                scale: 6
            }
        );
    }
}
