//! SQL types on the wire (MS-TDS 2.2.5): TYPE_INFO and values, both ways.
//!
//! Server to client, every column is sent with a nullable type (INTN, BITN, FLTN,
//! DECIMALN, DATETIMN, DATEN, DATETIME2N, GUID, BIGVARCHR/BIGCHAR/NVARCHAR/NCHAR,
//! BIGVARBIN/BIGBINARY), `(MAX)` types as PLP (partially length-prefixed) streams, and
//! character types in SQL_Latin1_General_CP1_CI_AS (code page 1252 for CHAR/VARCHAR).
//!
//! Client to server (RPC parameters), the fixed-length and legacy types clients send are
//! read too (INT4, FLT8, MONEY, SMALLDATETIME, DATETIMEOFFSET, TIME ...) and mapped onto
//! extentdb's types: MONEY to DECIMAL(19, 4), SMALLDATETIME to DATETIME, DATETIMEOFFSET to
//! its local DATETIME2, TIME to its NVARCHAR text.

use extentdb_sql::types::{SqlType, Value, MAX_LENGTH, TICKS_PER_DAY, TICKS_PER_SECOND};

use crate::wire::{put_utf16, Cursor};
use crate::TdsError;

/// SQL_Latin1_General_CP1_CI_AS: LCID 0x0409, flags 0xD0 (ignore case, kana, width),
/// version 0, sort id 52.
pub const COLLATION: [u8; 5] = [0x09, 0x04, 0xD0, 0x00, 0x34];

pub const INTN: u8 = 0x26;
pub const BITN: u8 = 0x68;
pub const FLTN: u8 = 0x6D;
pub const MONEYN: u8 = 0x6E;
pub const DATETIMN: u8 = 0x6F;
pub const DECIMALN: u8 = 0x6A;
pub const NUMERICN: u8 = 0x6C;
pub const GUID: u8 = 0x24;
pub const DATEN: u8 = 0x28;
pub const TIMEN: u8 = 0x29;
pub const DATETIME2N: u8 = 0x2A;
pub const DATETIMEOFFSETN: u8 = 0x2B;
pub const BIGVARCHR: u8 = 0xA7;
pub const BIGCHAR: u8 = 0xAF;
pub const NVARCHAR: u8 = 0xE7;
pub const NCHAR: u8 = 0xEF;
pub const BIGVARBIN: u8 = 0xA5;
pub const BIGBINARY: u8 = 0xAD;
pub const NULLTYPE: u8 = 0x1F;
pub const INT1: u8 = 0x30;
pub const BIT: u8 = 0x32;
pub const INT2: u8 = 0x34;
pub const INT4: u8 = 0x38;
pub const INT8: u8 = 0x7F;
pub const FLT4: u8 = 0x3B;
pub const FLT8: u8 = 0x3E;
pub const DATETIME: u8 = 0x3D;
pub const SMALLDATETIME: u8 = 0x3A;
pub const MONEY: u8 = 0x3C;
pub const SMALLMONEY: u8 = 0x7A;
pub const TEXT: u8 = 0x23;
pub const NTEXT: u8 = 0x63;
pub const IMAGE: u8 = 0x22;

/// Days from 0001-01-01 to 1900-01-01 (DATETIME's epoch).
const DAYS_TO_1900: i64 = 693_595;
const PLP_NULL: u64 = u64::MAX;
const PLP_UNKNOWN: u64 = u64::MAX - 1;

/// The bytes a DECIMAL of `precision` takes on the wire after its length byte (as on disk).
fn decimal_len(precision: u8) -> u8 {
    extentdb_sql::rowcodec::decimal_size(precision) as u8
}

/// DATETIME2 / TIME bytes for a fractional-second scale (as on disk).
fn time_len(scale: u8) -> usize {
    extentdb_sql::rowcodec::time_size(scale)
}

fn max_len_u16(n: u32, per_unit: u32) -> u16 {
    if n == MAX_LENGTH {
        0xFFFF
    } else {
        (n.saturating_mul(per_unit)).min(8000) as u16
    }
}

/// The type a value is sent as: character and binary types longer than TDS's 8,000-byte
/// limit for length-prefixed values go as their `(MAX)` kind (a PLP stream).
pub fn wire_type(t: SqlType) -> SqlType {
    match t {
        SqlType::Char(n) | SqlType::VarChar(n) if n > 8000 => SqlType::VarChar(MAX_LENGTH),
        SqlType::NChar(n) | SqlType::NVarChar(n) if n > 4000 => SqlType::NVarChar(MAX_LENGTH),
        SqlType::Binary(n) | SqlType::VarBinary(n) if n > 8000 => SqlType::VarBinary(MAX_LENGTH),
        t => t,
    }
}

/// TYPE_INFO for a result column or an output parameter of type `t`.
pub fn put_type_info(out: &mut Vec<u8>, t: SqlType) {
    let t = wire_type(t);
    match t {
        SqlType::Bit => out.extend_from_slice(&[BITN, 1]),
        SqlType::TinyInt => out.extend_from_slice(&[INTN, 1]),
        SqlType::SmallInt => out.extend_from_slice(&[INTN, 2]),
        SqlType::Int => out.extend_from_slice(&[INTN, 4]),
        SqlType::BigInt => out.extend_from_slice(&[INTN, 8]),
        SqlType::Decimal { precision, scale } => {
            out.extend_from_slice(&[DECIMALN, decimal_len(precision), precision, scale])
        }
        SqlType::Float => out.extend_from_slice(&[FLTN, 8]),
        SqlType::Real => out.extend_from_slice(&[FLTN, 4]),
        SqlType::Char(n) | SqlType::VarChar(n) | SqlType::NChar(n) | SqlType::NVarChar(n) => {
            let (code, per) = match t {
                SqlType::Char(_) => (BIGCHAR, 1),
                SqlType::VarChar(_) => (BIGVARCHR, 1),
                SqlType::NChar(_) => (NCHAR, 2),
                _ => (NVARCHAR, 2),
            };
            out.push(code);
            out.extend_from_slice(&max_len_u16(n, per).to_le_bytes());
            out.extend_from_slice(&COLLATION);
        }
        SqlType::Binary(n) | SqlType::VarBinary(n) => {
            out.push(if matches!(t, SqlType::Binary(_)) {
                BIGBINARY
            } else {
                BIGVARBIN
            });
            out.extend_from_slice(&max_len_u16(n, 1).to_le_bytes());
        }
        SqlType::Date => out.push(DATEN),
        SqlType::DateTime => out.extend_from_slice(&[DATETIMN, 8]),
        SqlType::DateTime2(s) => out.extend_from_slice(&[DATETIME2N, s]),
        SqlType::UniqueIdentifier => out.extend_from_slice(&[GUID, 16]),
    }
}

fn is_plp(t: SqlType) -> bool {
    matches!(
        t,
        SqlType::VarChar(MAX_LENGTH)
            | SqlType::NVarChar(MAX_LENGTH)
            | SqlType::VarBinary(MAX_LENGTH)
    )
}

/// Windows-1252 bytes of `s` (characters it lacks become '?').
pub fn to_cp1252(s: &str) -> Vec<u8> {
    s.chars()
        .map(|c| {
            let u = c as u32;
            if u < 0x80 || (0xA0..=0xFF).contains(&u) {
                return u as u8;
            }
            CP1252_HIGH
                .iter()
                .position(|&x| x as u32 == u && x != '\u{FFFD}')
                .map(|i| 0x80 + i as u8)
                .unwrap_or(b'?')
        })
        .collect()
}

pub fn from_cp1252(b: &[u8]) -> String {
    b.iter()
        .map(|&x| match x {
            0x80..=0x9F => CP1252_HIGH[(x - 0x80) as usize],
            _ => x as char,
        })
        .collect()
}

/// Windows-1252's 0x80..0x9F (U+FFFD where it has no character).
const CP1252_HIGH: [char; 32] = [
    '€', '\u{FFFD}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{FFFD}', 'Ž',
    '\u{FFFD}', '\u{FFFD}', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{FFFD}',
    'ž', 'Ÿ',
];

/// The bytes a character or binary value takes.
fn var_bytes(t: SqlType, v: &Value) -> Vec<u8> {
    match (t, v) {
        (SqlType::NChar(_) | SqlType::NVarChar(_), Value::Text(s)) => {
            let mut b = Vec::with_capacity(s.len() * 2);
            put_utf16(&mut b, s);
            b
        }
        (_, Value::Text(s)) => to_cp1252(s),
        (_, Value::Binary(b)) => b.clone(),
        _ => Vec::new(),
    }
}

/// A value of type `t` (already converted to it, or NULL).
pub fn put_value(out: &mut Vec<u8>, t: SqlType, v: &Value) {
    let t = wire_type(t);
    if is_plp(t) {
        if v.is_null() {
            out.extend_from_slice(&PLP_NULL.to_le_bytes());
            return;
        }
        let b = var_bytes(t, v);
        out.extend_from_slice(&(b.len() as u64).to_le_bytes());
        if !b.is_empty() {
            out.extend_from_slice(&(b.len() as u32).to_le_bytes());
            out.extend_from_slice(&b);
        }
        out.extend_from_slice(&0u32.to_le_bytes());
        return;
    }
    match t {
        SqlType::Char(_)
        | SqlType::VarChar(_)
        | SqlType::NChar(_)
        | SqlType::NVarChar(_)
        | SqlType::Binary(_)
        | SqlType::VarBinary(_) => {
            if v.is_null() {
                out.extend_from_slice(&0xFFFFu16.to_le_bytes());
            } else {
                let b = var_bytes(t, v);
                let n = b.len().min(8000);
                out.extend_from_slice(&(n as u16).to_le_bytes());
                out.extend_from_slice(&b[..n]);
            }
            return;
        }
        _ => {}
    }
    if v.is_null() {
        out.push(0);
        return;
    }
    match (t, v) {
        (_, Value::Bit(b)) => out.extend_from_slice(&[1, *b as u8]),
        (_, Value::TinyInt(x)) => out.extend_from_slice(&[1, *x]),
        (_, Value::SmallInt(x)) => {
            out.push(2);
            out.extend_from_slice(&x.to_le_bytes());
        }
        (_, Value::Int(x)) => {
            out.push(4);
            out.extend_from_slice(&x.to_le_bytes());
        }
        (_, Value::BigInt(x)) => {
            out.push(8);
            out.extend_from_slice(&x.to_le_bytes());
        }
        (_, Value::Float(f)) => {
            out.push(8);
            out.extend_from_slice(&f.to_le_bytes());
        }
        (_, Value::Real(f)) => {
            out.push(4);
            out.extend_from_slice(&f.to_le_bytes());
        }
        (SqlType::Decimal { precision, .. }, Value::Decimal { unscaled, .. }) => {
            let n = decimal_len(precision);
            out.push(n);
            out.push(if *unscaled < 0 { 0 } else { 1 });
            let m = unscaled.unsigned_abs().to_le_bytes();
            out.extend_from_slice(&m[..(n - 1) as usize]);
        }
        (_, Value::Date(d)) => {
            out.push(3);
            out.extend_from_slice(&d.to_le_bytes()[..3]);
        }
        (_, Value::DateTime(ticks)) => {
            let days = ticks.div_euclid(TICKS_PER_DAY) - DAYS_TO_1900;
            let rem = ticks.rem_euclid(TICKS_PER_DAY);
            let three_hundredths =
                ((rem * 300 + TICKS_PER_SECOND / 2) / TICKS_PER_SECOND).min(24 * 3600 * 300 - 1);
            out.push(8);
            out.extend_from_slice(&(days as i32).to_le_bytes());
            out.extend_from_slice(&(three_hundredths as u32).to_le_bytes());
        }
        (SqlType::DateTime2(scale), Value::DateTime2(ticks)) => {
            let n = time_len(scale);
            out.push((n + 3) as u8);
            let days = ticks.div_euclid(TICKS_PER_DAY);
            let rem = ticks.rem_euclid(TICKS_PER_DAY);
            let units = rem / 10i64.pow(7 - scale.min(7) as u32);
            out.extend_from_slice(&units.to_le_bytes()[..n]);
            out.extend_from_slice(&(days as i32).to_le_bytes()[..3]);
        }
        (_, Value::Guid(g)) => {
            out.push(16);
            out.extend_from_slice(g);
        }
        // A value that does not match its column after conversion is a bug upstream; send
        // NULL rather than a malformed row.
        _ => out.push(0),
    }
}

/// The type a value of type `t` goes as to a client of TDS `version` (token.rs
/// `TdsVersion`): before 7.3, DATE and DATETIME2 as NVARCHAR of their text's length.
pub fn legacy_type(version: crate::token::TdsVersion, t: SqlType) -> SqlType {
    if version.is_7_3() {
        return t;
    }
    match t {
        SqlType::Date => SqlType::NVarChar(10),
        SqlType::DateTime2(0) => SqlType::NVarChar(19),
        SqlType::DateTime2(s) => SqlType::NVarChar(20 + u32::from(s)),
        t => t,
    }
}

/// `v` as the value of its `legacy_type` (a date's text, as CAST gives it).
pub fn legacy_value(lt: SqlType, v: &Value) -> Value {
    extentdb_sql::convert::convert(v, lt, None).unwrap_or(Value::Null)
}

/// TYPE_INFO for a client before TDS 7.2: `(MAX)` types as TEXT, NTEXT and IMAGE (no PLP
/// streams), with 7.1's one-part table name (empty); the others as from 7.2.
pub fn put_legacy_type_info(out: &mut Vec<u8>, t: SqlType) {
    let w = wire_type(t);
    let (code, max) = match w {
        SqlType::VarChar(MAX_LENGTH) => (TEXT, 0x7FFF_FFFFu32),
        SqlType::NVarChar(MAX_LENGTH) => (NTEXT, 0x7FFF_FFFE),
        SqlType::VarBinary(MAX_LENGTH) => (IMAGE, 0x7FFF_FFFF),
        _ => return put_type_info(out, t),
    };
    out.push(code);
    out.extend_from_slice(&max.to_le_bytes());
    if code != IMAGE {
        out.extend_from_slice(&COLLATION);
    }
    out.extend_from_slice(&0u16.to_le_bytes());
}

/// A value for a client before TDS 7.2: a TEXT, NTEXT or IMAGE value is a text pointer
/// (16 bytes, none here: clients only read past it) and timestamp, then the data with a
/// 4-byte length; NULL is an empty text pointer. Other types as from 7.2.
pub fn put_legacy_value(out: &mut Vec<u8>, t: SqlType, v: &Value) {
    let w = wire_type(t);
    if !is_plp(w) {
        return put_value(out, t, v);
    }
    if v.is_null() {
        out.push(0);
        return;
    }
    out.push(16);
    out.extend_from_slice(&[0; 16 + 8]);
    let b = var_bytes(w, v);
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(&b);
}

/// A TYPE_INFO as read: the wire type code, its length field (bytes; 0xFFFF for PLP
/// streams, 0 where the type has none), precision and scale, and extentdb's type for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireType {
    pub code: u8,
    pub max: u32,
    pub scale: u8,
    pub sql_type: SqlType,
}

/// Reads a TYPE_INFO (a column's in COLMETADATA, a parameter's in an RPC).
pub fn read_type_info(c: &mut Cursor<'_>) -> Result<WireType, TdsError> {
    let code = c.u8()?;
    let w = |max: u32, sql_type: SqlType| WireType {
        code,
        max,
        scale: 0,
        sql_type,
    };
    Ok(match code {
        NULLTYPE => w(0, SqlType::Int),
        INT1 => w(1, SqlType::TinyInt),
        BIT => w(1, SqlType::Bit),
        INT2 => w(2, SqlType::SmallInt),
        INT4 => w(4, SqlType::Int),
        INT8 => w(8, SqlType::BigInt),
        FLT4 => w(4, SqlType::Real),
        FLT8 => w(8, SqlType::Float),
        DATETIME => w(8, SqlType::DateTime),
        SMALLDATETIME => w(4, SqlType::DateTime),
        MONEY => w(8, money_type()),
        SMALLMONEY => w(4, money_type()),
        INTN | BITN | FLTN | MONEYN | DATETIMN | GUID => {
            let max = c.u8()?;
            let t = match (code, max) {
                (INTN, 1) => SqlType::TinyInt,
                (INTN, 2) => SqlType::SmallInt,
                (INTN, 4) => SqlType::Int,
                (INTN, 8) => SqlType::BigInt,
                (BITN, 1) => SqlType::Bit,
                (FLTN, 4) => SqlType::Real,
                (FLTN, 8) => SqlType::Float,
                (MONEYN, 4 | 8) => money_type(),
                (DATETIMN, 4 | 8) => SqlType::DateTime,
                (GUID, 16) => SqlType::UniqueIdentifier,
                _ => return Err(TdsError::Protocol("a type with a length it cannot have")),
            };
            w(max as u32, t)
        }
        DECIMALN | NUMERICN => {
            let max = c.u8()?;
            let precision = c.u8()?;
            let scale = c.u8()?;
            if precision == 0 || precision > 38 || scale > precision || max > 17 {
                return Err(TdsError::Protocol("decimal of a bad precision"));
            }
            WireType {
                code,
                max: max as u32,
                scale,
                sql_type: SqlType::Decimal { precision, scale },
            }
        }
        DATEN => w(3, SqlType::Date),
        TIMEN | DATETIME2N | DATETIMEOFFSETN => {
            let scale = c.u8()?;
            if scale > 7 {
                return Err(TdsError::Protocol("time scale above 7"));
            }
            WireType {
                code,
                max: 0,
                scale,
                sql_type: if code == TIMEN {
                    SqlType::NVarChar(16)
                } else {
                    SqlType::DateTime2(scale)
                },
            }
        }
        BIGVARCHR | BIGCHAR | NVARCHAR | NCHAR | BIGVARBIN | BIGBINARY => {
            let max = c.u16()? as u32;
            if matches!(code, BIGVARCHR | BIGCHAR | NVARCHAR | NCHAR) {
                c.bytes(5)?;
            }
            let len = |n: u32| -> u32 {
                if max == 0xFFFF {
                    MAX_LENGTH
                } else {
                    n.max(1)
                }
            };
            let t = match code {
                BIGVARCHR => SqlType::VarChar(len(max)),
                BIGCHAR => SqlType::Char(len(max)),
                NVARCHAR => SqlType::NVarChar(len(max / 2)),
                NCHAR => SqlType::NChar(len(max / 2)),
                BIGVARBIN => SqlType::VarBinary(len(max)),
                _ => SqlType::Binary(len(max)),
            };
            w(max, t)
        }
        TEXT | NTEXT | IMAGE => {
            let max = c.u32()?;
            if code != IMAGE {
                c.bytes(5)?;
            }
            w(
                max,
                match code {
                    TEXT => SqlType::VarChar(MAX_LENGTH),
                    NTEXT => SqlType::NVarChar(MAX_LENGTH),
                    _ => SqlType::VarBinary(MAX_LENGTH),
                },
            )
        }
        _ => return Err(TdsError::UnsupportedType(code)),
    })
}

/// Reads a value of a type read by `read_type_info`.
pub fn read_value(c: &mut Cursor<'_>, w: &WireType) -> Result<Value, TdsError> {
    let fixed =
        |c: &mut Cursor<'_>, n: usize| -> Result<Vec<u8>, TdsError> { Ok(c.bytes(n)?.to_vec()) };
    Ok(match w.code {
        NULLTYPE => Value::Null,
        INT1 => Value::TinyInt(c.u8()?),
        BIT => Value::Bit(c.u8()? != 0),
        INT2 => Value::SmallInt(c.u16()? as i16),
        INT4 => Value::Int(c.u32()? as i32),
        INT8 => Value::BigInt(c.u64()? as i64),
        FLT4 => Value::Real(f32::from_bits(c.u32()?)),
        FLT8 => Value::Float(f64::from_bits(c.u64()?)),
        DATETIME => datetime8(&fixed(c, 8)?)?,
        SMALLDATETIME => smalldatetime(&fixed(c, 4)?)?,
        MONEY => money8(&fixed(c, 8)?),
        SMALLMONEY => money4(&fixed(c, 4)?),
        INTN | BITN | FLTN | MONEYN | DATETIMN | GUID => {
            let n = c.u8()? as usize;
            if n == 0 {
                return Ok(Value::Null);
            }
            let b = fixed(c, n)?;
            match (w.code, n) {
                (INTN, 1) => Value::TinyInt(b[0]),
                (INTN, 2) => Value::SmallInt(i16::from_le_bytes([b[0], b[1]])),
                (INTN, 4) => Value::Int(i32::from_le_bytes(b[..4].try_into().unwrap())),
                (INTN, 8) => Value::BigInt(i64::from_le_bytes(b[..8].try_into().unwrap())),
                (BITN, 1) => Value::Bit(b[0] != 0),
                (FLTN, 4) => Value::Real(f32::from_le_bytes(b[..4].try_into().unwrap())),
                (FLTN, 8) => Value::Float(f64::from_le_bytes(b[..8].try_into().unwrap())),
                (MONEYN, 4) => money4(&b),
                (MONEYN, 8) => money8(&b),
                (DATETIMN, 4) => smalldatetime(&b)?,
                (DATETIMN, 8) => datetime8(&b)?,
                (GUID, 16) => Value::Guid(b[..16].try_into().unwrap()),
                _ => return Err(TdsError::Protocol("a value of a wrong length")),
            }
        }
        DECIMALN | NUMERICN => {
            let n = c.u8()? as usize;
            if n == 0 {
                return Ok(Value::Null);
            }
            if n > 17 {
                return Err(TdsError::Protocol("decimal value too long"));
            }
            let b = fixed(c, n)?;
            let mut m = [0u8; 16];
            m[..n - 1].copy_from_slice(&b[1..]);
            let unscaled = i128::try_from(u128::from_le_bytes(m))
                .map_err(|_| TdsError::Protocol("decimal value out of range"))?;
            Value::Decimal {
                unscaled: if b[0] == 0 { -unscaled } else { unscaled },
                scale: w.scale,
            }
        }
        DATEN => {
            let n = c.u8()? as usize;
            if n == 0 {
                return Ok(Value::Null);
            }
            if n != 3 {
                return Err(TdsError::Protocol("date value of a wrong length"));
            }
            let days = u24(&fixed(c, 3)?) as i64;
            if days > MAX_DAYS {
                return Err(TdsError::Protocol("date value out of range"));
            }
            Value::Date(days as i32)
        }
        TIMEN | DATETIME2N | DATETIMEOFFSETN => {
            let n = c.u8()? as usize;
            if n == 0 {
                return Ok(Value::Null);
            }
            let b = fixed(c, n)?;
            let tl = time_len(w.scale);
            let need = match w.code {
                TIMEN => tl,
                DATETIME2N => tl + 3,
                _ => tl + 5,
            };
            if b.len() != need {
                return Err(TdsError::Protocol("time value of a wrong length"));
            }
            let mut tb = [0u8; 8];
            tb[..tl].copy_from_slice(&b[..tl]);
            let ticks_of_day = i64::from_le_bytes(tb) * 10i64.pow(7 - w.scale as u32);
            if ticks_of_day >= TICKS_PER_DAY {
                return Err(TdsError::Protocol("time value out of range"));
            }
            if w.code == TIMEN {
                let secs = ticks_of_day / TICKS_PER_SECOND;
                return Ok(Value::Text(format!(
                    "{:02}:{:02}:{:02}.{:07}",
                    secs / 3600,
                    secs / 60 % 60,
                    secs % 60,
                    ticks_of_day % TICKS_PER_SECOND
                )));
            }
            let days = u24(&b[tl..tl + 3]) as i64;
            if days > MAX_DAYS || ticks_of_day >= TICKS_PER_DAY {
                return Err(TdsError::Protocol("datetime2 value out of range"));
            }
            let mut ticks = days * TICKS_PER_DAY + ticks_of_day;
            if w.code == DATETIMEOFFSETN {
                let offset_min = i16::from_le_bytes([b[tl + 3], b[tl + 4]]) as i64;
                if !(-840..=840).contains(&offset_min) {
                    return Err(TdsError::Protocol("time zone offset out of range"));
                }
                ticks += offset_min * 60 * TICKS_PER_SECOND;
                if !(0..(MAX_DAYS + 1) * TICKS_PER_DAY).contains(&ticks) {
                    return Err(TdsError::Protocol("datetimeoffset value out of range"));
                }
            }
            Value::DateTime2(ticks)
        }
        BIGVARCHR | BIGCHAR | NVARCHAR | NCHAR | BIGVARBIN | BIGBINARY | TEXT | NTEXT | IMAGE => {
            let bytes = if matches!(w.code, TEXT | NTEXT | IMAGE) {
                // Text pointer and timestamp, then a 4-byte length.
                let ptr = c.u8()? as usize;
                if ptr == 0 {
                    None
                } else {
                    c.bytes(ptr + 8)?;
                    let n = c.u32()? as usize;
                    Some(fixed(c, n)?)
                }
            } else if w.max == 0xFFFF {
                read_plp(c)?
            } else {
                let n = c.u16()?;
                if n == 0xFFFF {
                    None
                } else {
                    Some(fixed(c, n as usize)?)
                }
            };
            match bytes {
                None => Value::Null,
                Some(b) if matches!(w.code, BIGVARBIN | BIGBINARY | IMAGE) => Value::Binary(b),
                Some(b) if matches!(w.code, NVARCHAR | NCHAR | NTEXT) => {
                    Value::Text(crate::wire::utf16_to_string(&b))
                }
                Some(b) => Value::Text(from_cp1252(&b)),
            }
        }
        code => return Err(TdsError::UnsupportedType(code)),
    })
}

/// One RPC parameter's type and value, read from TYPE_INFO then the value. TEXT, NTEXT
/// and IMAGE parameters carry a 4-byte length rather than a text pointer.
pub fn read_typed_value(c: &mut Cursor<'_>) -> Result<(SqlType, Value), TdsError> {
    let w = read_type_info(c)?;
    if matches!(w.code, TEXT | NTEXT | IMAGE) {
        let n = c.u32()?;
        if n == u32::MAX {
            return Ok((w.sql_type, Value::Null));
        }
        let b = c.bytes(n as usize)?.to_vec();
        let v = match w.code {
            TEXT => Value::Text(from_cp1252(&b)),
            NTEXT => Value::Text(crate::wire::utf16_to_string(&b)),
            _ => Value::Binary(b),
        };
        return Ok((w.sql_type, v));
    }
    let v = read_value(c, &w)?;
    Ok((w.sql_type, v))
}

/// A PLP stream: total length (or NULL / unknown), then chunks until a zero length.
fn read_plp(c: &mut Cursor<'_>) -> Result<Option<Vec<u8>>, TdsError> {
    let total = c.u64()?;
    if total == PLP_NULL {
        return Ok(None);
    }
    let mut out = Vec::new();
    if total != PLP_UNKNOWN && total as usize > c.remaining() {
        return Err(TdsError::Protocol("PLP value longer than the message"));
    }
    loop {
        let n = c.u32()? as usize;
        if n == 0 {
            break;
        }
        out.extend_from_slice(c.bytes(n)?);
    }
    Ok(Some(out))
}

fn u24(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], 0])
}

fn money_type() -> SqlType {
    SqlType::Decimal {
        precision: 19,
        scale: 4,
    }
}

fn money8(b: &[u8]) -> Value {
    let hi = i32::from_le_bytes(b[..4].try_into().unwrap()) as i64;
    let lo = u32::from_le_bytes(b[4..8].try_into().unwrap()) as i64;
    Value::Decimal {
        unscaled: ((hi << 32) | lo) as i128,
        scale: 4,
    }
}

fn money4(b: &[u8]) -> Value {
    Value::Decimal {
        unscaled: i32::from_le_bytes(b[..4].try_into().unwrap()) as i128,
        scale: 4,
    }
}

/// DATETIME: days since 1900-01-01 (1753-01-01 to 9999-12-31) and 1/300 s of the day.
fn datetime8(b: &[u8]) -> Result<Value, TdsError> {
    let days = i32::from_le_bytes(b[..4].try_into().unwrap()) as i64;
    let t300 = u32::from_le_bytes(b[4..8].try_into().unwrap()) as i64;
    if !(-53_690..=2_958_463).contains(&days) || t300 >= 24 * 3600 * 300 {
        return Err(TdsError::Protocol("datetime value out of range"));
    }
    let ticks = (days + DAYS_TO_1900) * TICKS_PER_DAY + (t300 * TICKS_PER_SECOND + 150) / 300;
    Ok(Value::DateTime(ticks))
}

fn smalldatetime(b: &[u8]) -> Result<Value, TdsError> {
    let days = u16::from_le_bytes([b[0], b[1]]) as i64;
    let minutes = u16::from_le_bytes([b[2], b[3]]) as i64;
    if minutes >= 24 * 60 {
        return Err(TdsError::Protocol("smalldatetime value out of range"));
    }
    Ok(Value::DateTime(
        (days + DAYS_TO_1900) * TICKS_PER_DAY + minutes * 60 * TICKS_PER_SECOND,
    ))
}

/// The last day DATE and DATETIME2 hold: 9999-12-31, days since 0001-01-01.
const MAX_DAYS: i64 = 3_652_058;

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(t: SqlType, v: Value) -> (SqlType, Value) {
        let mut b = Vec::new();
        put_type_info(&mut b, t);
        put_value(&mut b, t, &v);
        let mut c = Cursor::new(&b);
        let r = read_typed_value(&mut c).unwrap();
        assert!(c.at_end(), "{t:?}: {} bytes left", c.remaining());
        r
    }

    #[test]
    fn every_type_round_trips() {
        let cases = [
            (SqlType::Bit, Value::Bit(true)),
            (SqlType::TinyInt, Value::TinyInt(200)),
            (SqlType::SmallInt, Value::SmallInt(-3)),
            (SqlType::Int, Value::Int(-70000)),
            (SqlType::BigInt, Value::BigInt(1 << 40)),
            (
                SqlType::Decimal {
                    precision: 18,
                    scale: 2,
                },
                Value::Decimal {
                    unscaled: -12345,
                    scale: 2,
                },
            ),
            (
                SqlType::Decimal {
                    precision: 38,
                    scale: 0,
                },
                Value::Decimal {
                    unscaled: 10i128.pow(37),
                    scale: 0,
                },
            ),
            (SqlType::Float, Value::Float(1.5)),
            (SqlType::Real, Value::Real(-2.25)),
            (SqlType::VarChar(10), Value::Text("café €".into())),
            (SqlType::NVarChar(10), Value::Text("Grüße 😀".into())),
            (SqlType::Char(3), Value::Text("abc".into())),
            (SqlType::NChar(2), Value::Text("ab".into())),
            (SqlType::VarChar(MAX_LENGTH), Value::Text("x".repeat(9000))),
            (SqlType::NVarChar(MAX_LENGTH), Value::Text("z".repeat(5000))),
            (SqlType::NVarChar(MAX_LENGTH), Value::Text(String::new())),
            (SqlType::VarBinary(MAX_LENGTH), Value::Null),
            (SqlType::VarBinary(8), Value::Binary(vec![1, 2, 3])),
            (SqlType::Binary(2), Value::Binary(vec![9, 8])),
            (SqlType::Date, Value::Date(738_000)),
            (
                SqlType::DateTime2(7),
                Value::DateTime2(638_000_000_001_234_567),
            ),
            (
                SqlType::DateTime2(0),
                Value::DateTime2(638_000_000_000_000_000),
            ),
            (SqlType::UniqueIdentifier, Value::Guid([7; 16])),
            (SqlType::Int, Value::Null),
            (SqlType::NVarChar(5), Value::Null),
        ];
        for (t, v) in cases {
            assert_eq!(round_trip(t, v.clone()), (t, v), "{t:?}");
        }
    }

    #[test]
    fn long_values_of_bounded_types_go_as_max() {
        let mut b = Vec::new();
        put_type_info(&mut b, SqlType::VarChar(100_000));
        put_value(
            &mut b,
            SqlType::VarChar(100_000),
            &Value::Text("q".repeat(100_000)),
        );
        let (t, v) = read_typed_value(&mut Cursor::new(&b)).unwrap();
        assert_eq!(t, SqlType::VarChar(MAX_LENGTH));
        assert_eq!(v, Value::Text("q".repeat(100_000)));
    }

    #[test]
    fn datetime_is_days_since_1900_and_three_hundredths() {
        // 1900-01-02 00:00:01 is day 1, 300 ticks.
        let ticks = (DAYS_TO_1900 + 1) * TICKS_PER_DAY + TICKS_PER_SECOND;
        let mut b = Vec::new();
        put_value(&mut b, SqlType::DateTime, &Value::DateTime(ticks));
        assert_eq!(b, vec![8, 1, 0, 0, 0, 44, 1, 0, 0]);
        let mut c = Cursor::new(&[DATETIMN, 8, 8, 1, 0, 0, 0, 44, 1, 0, 0]);
        assert_eq!(
            read_typed_value(&mut c).unwrap(),
            (SqlType::DateTime, Value::DateTime(ticks))
        );
    }

    #[test]
    fn truncated_values_are_errors_not_panics() {
        let mut b = Vec::new();
        put_type_info(&mut b, SqlType::NVarChar(MAX_LENGTH));
        put_value(
            &mut b,
            SqlType::NVarChar(MAX_LENGTH),
            &Value::Text("hello".into()),
        );
        for cut in 0..b.len() {
            assert!(
                read_typed_value(&mut Cursor::new(&b[..cut])).is_err(),
                "cut {cut}"
            );
        }
    }
}
