//! T-SQL operators on values: arithmetic, string concatenation, bitwise operators,
//! comparison (under SQL_Latin1_General_CP1_CI_AS) and LIKE.
//!
//! Invariants:
//! 1. NULL in, NULL out: a comparison with NULL gives `Value::Null` (unknown); three-valued
//!    logic over those results is the executor's.
//! 2. The operand of lower type precedence is converted to the other's type first, with
//!    conversion's own errors (`'abc' + 1` is message 245).
//! 3. No input panics: integer overflow is message 8115, division by zero 8134, and
//!    decimals are computed exactly in i128 with SQL Server's result precision and scale.
//!
//! Not here: AND/OR/NOT and IS NULL (the executor's), collations other than the default.

use std::cmp::Ordering;

use crate::convert::{
    convert, data_type_name, decimal_shape, fit_decimal, fits_precision, int_value, num_to_f64,
    numeric_of, parse_decimal_text, parse_float_text, parse_guid, precedence, rescale, type_of,
    value_ticks, Num,
};
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value, TICKS_PER_DAY};
use extentdb_format::collation;

/// A binary operator of T-SQL expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
    BitAnd,
    BitOr,
    BitXor,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl BinaryOp {
    /// The operator's name as SQL Server's messages print it (`add`, `modulo`, `&`).
    pub fn message_name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Subtract => "subtract",
            BinaryOp::Multiply => "multiply",
            BinaryOp::Divide => "divide",
            BinaryOp::Modulo => "modulo",
            BinaryOp::BitAnd => "&",
            BinaryOp::BitOr => "|",
            BinaryOp::BitXor => "^",
            BinaryOp::Eq => "equal to",
            BinaryOp::Ne => "not equal to",
            BinaryOp::Lt => "less than",
            BinaryOp::Le => "less than or equal to",
            BinaryOp::Gt => "greater than",
            BinaryOp::Ge => "greater than or equal to",
        }
    }

    fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }
}

/// Applies a binary operator. Comparisons give `Value::Bit` (or `Null` for unknown).
/// Operands of decimal arithmetic take the precision of their digits (as SQL Server types
/// literals); `binary_typed` gives declared types.
pub fn binary(op: BinaryOp, a: &Value, b: &Value) -> Result<Value, SqlError> {
    binary_typed(op, a, b, Declared::default())
}

/// The declared types of a binary operator's operands, where known without their values
/// (a column's type, a CAST's target, a variable's type). Decimal arithmetic computes the
/// result's precision and scale from them, as SQL Server does: `d / e` over two
/// decimal(10,2) columns has scale 13 whatever the digits of the row's values.
#[derive(Debug, Clone, Copy, Default)]
pub struct Declared {
    pub left: Option<SqlType>,
    pub right: Option<SqlType>,
}

/// Whether decimal arithmetic of `a` and `b` would use declared types (`binary_typed`):
/// worth finding them only then.
pub fn wants_declared(op: BinaryOp, a: &Value, b: &Value) -> bool {
    !op.is_comparison()
        && (matches!(a, Value::Decimal { .. }) || matches!(b, Value::Decimal { .. }))
}

/// `binary` with the operands' declared types (`Declared`).
pub fn binary_typed(
    op: BinaryOp,
    a: &Value,
    b: &Value,
    declared: Declared,
) -> Result<Value, SqlError> {
    if a.is_null() || b.is_null() {
        return Ok(Value::Null);
    }
    if op.is_comparison() {
        return Ok(match compare(a, b)? {
            None => Value::Null,
            Some(ord) => Value::Bit(match op {
                BinaryOp::Eq => ord == Ordering::Equal,
                BinaryOp::Ne => ord != Ordering::Equal,
                BinaryOp::Lt => ord == Ordering::Less,
                BinaryOp::Le => ord != Ordering::Greater,
                BinaryOp::Gt => ord == Ordering::Greater,
                _ => ord != Ordering::Less,
            }),
        });
    }
    match (op, a, b) {
        (BinaryOp::Add, Value::Text(x), Value::Text(y)) => {
            return Ok(Value::Text(format!("{x}{y}")))
        }
        (BinaryOp::Add, Value::Binary(x), Value::Binary(y)) => {
            return Ok(Value::Binary(x.iter().chain(y).copied().collect()))
        }
        _ => {}
    }
    if matches!(op, BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor) {
        return bitwise(op, a, b);
    }
    if let Some(result) = date_arithmetic(op, a, b)? {
        return Ok(result);
    }
    arithmetic(op, a, b, declared)
}

/// The result type of an operator for result-set metadata: SQL Server's decimal rules
/// per operator, `bit` for comparisons, else the higher-precedence type.
pub fn binary_result_type(op: BinaryOp, a: SqlType, b: SqlType) -> SqlType {
    if op.is_comparison() {
        return SqlType::Bit;
    }
    if op == BinaryOp::Add && a.is_text() && b.is_text() {
        return crate::convert::result_type(a, b);
    }
    let target = if precedence(a) >= precedence(b) { a } else { b };
    match (target, decimal_shape(a), decimal_shape(b)) {
        (SqlType::Decimal { .. }, Some((p1, s1)), Some((p2, s2))) => {
            decimal_result(op, p1, s1, p2, s2)
        }
        _ => target,
    }
}

/// SQL Server's precision and scale of a decimal operation's result.
fn decimal_result(op: BinaryOp, p1: u8, s1: u8, p2: u8, s2: u8) -> SqlType {
    let (p1, s1, p2, s2) = (p1 as i32, s1 as i32, p2 as i32, s2 as i32);
    match op {
        BinaryOp::Multiply => fit_decimal(p1 + p2 + 1, s1 + s2),
        BinaryOp::Divide => {
            let s = 6.max(s1 + p2 + 1);
            fit_decimal(p1 - s1 + s2 + s, s)
        }
        BinaryOp::Modulo => fit_decimal((p1 - s1).min(p2 - s2) + s1.max(s2), s1.max(s2)),
        _ => {
            let s = s1.max(s2);
            fit_decimal(s + (p1 - s1).max(p2 - s2) + 1, s)
        }
    }
}

fn invalid_operand(t: SqlType, op: BinaryOp) -> SqlError {
    msg(8117, &[&data_type_name(t), &op.message_name()])
}

fn overflow(t: SqlType) -> SqlError {
    msg(8115, &[&"expression", &data_type_name(t)])
}

/// `datetime ± number` (days, fractions allowed) and `datetime - datetime`; other date
/// types with numbers are an operand type clash, as in SQL Server.
fn date_arithmetic(op: BinaryOp, a: &Value, b: &Value) -> Result<Option<Value>, SqlError> {
    let (ta, tb) = (type_of(a), type_of(b));
    let is_date =
        |t: SqlType| matches!(t, SqlType::Date | SqlType::DateTime | SqlType::DateTime2(_));
    if !is_date(ta) && !is_date(tb) {
        return Ok(None);
    }
    let clash = || msg(206, &[&data_type_name(ta), &data_type_name(tb)]);
    let (ticks, days) = match (a, b, op) {
        (Value::DateTime(t), _, BinaryOp::Add | BinaryOp::Subtract) if numeric_of(b).is_some() => {
            let d = num_to_f64(numeric_of(b).unwrap_or(Num::Int(0)));
            (*t, if op == BinaryOp::Subtract { -d } else { d })
        }
        (_, Value::DateTime(t), BinaryOp::Add) if numeric_of(a).is_some() => {
            (*t, num_to_f64(numeric_of(a).unwrap_or(Num::Int(0))))
        }
        (Value::DateTime(x), Value::DateTime(y), BinaryOp::Subtract) => (
            x - y + crate::convert::DAYS_TO_1900 as i64 * TICKS_PER_DAY,
            0.0,
        ),
        (_, _, BinaryOp::Add | BinaryOp::Subtract) => return Err(clash()),
        _ => return Err(invalid_operand(if is_date(ta) { ta } else { tb }, op)),
    };
    let shifted = ticks as f64 + days * TICKS_PER_DAY as f64;
    if !(0.0..crate::convert::MAX_TICKS as f64).contains(&shifted) {
        return Err(msg(517, &[&"datetime"]));
    }
    let result = convert(
        &Value::DateTime2(shifted.round() as i64),
        SqlType::DateTime,
        None,
    )
    .map_err(|_| msg(517, &[&"datetime"]))?;
    Ok(Some(result))
}

/// Converts both operands to the higher-precedence numeric type and computes.
fn arithmetic(op: BinaryOp, a: &Value, b: &Value, declared: Declared) -> Result<Value, SqlError> {
    let (ta, tb) = (type_of(a), type_of(b));
    let target = if precedence(ta) >= precedence(tb) {
        ta
    } else {
        tb
    };
    let numeric_target = match target {
        SqlType::Decimal { .. } => SqlType::Decimal {
            precision: 38,
            scale: 38,
        },
        t if decimal_shape(t).is_some() || matches!(t, SqlType::Float | SqlType::Real) => t,
        t => return Err(invalid_operand(t, op)),
    };
    if ta == SqlType::Bit && tb == SqlType::Bit {
        return Err(invalid_operand(SqlType::Bit, op));
    }
    let na = operand_number(a, numeric_target)?;
    let nb = operand_number(b, numeric_target)?;
    match target {
        SqlType::Float | SqlType::Real => {
            float_arithmetic(op, num_to_f64(na), num_to_f64(nb), target)
        }
        SqlType::Decimal { .. } => decimal_arithmetic(
            op,
            decimal_operand(na, declared.left),
            decimal_operand(nb, declared.right),
        ),
        _ => {
            let target = if target == SqlType::Bit {
                SqlType::Int
            } else {
                target
            };
            let (Num::Int(x), Num::Int(y)) = (na, nb) else {
                return Err(overflow(target));
            };
            integer_arithmetic(op, x, y, target)
        }
    }
}

/// A value as a number of the operation's type; strings are converted (message 245/8114).
fn operand_number(v: &Value, target: SqlType) -> Result<Num, SqlError> {
    if let Some(n) = numeric_of(v) {
        return Ok(n);
    }
    if let (Value::Text(s), SqlType::Decimal { .. }) = (v, target) {
        return parse_decimal_text(s).ok_or_else(|| msg(8114, &[&"varchar", &"numeric"]));
    }
    let converted = convert(v, target, None)?;
    numeric_of(&converted).ok_or_else(|| overflow(target))
}

/// A decimal operand as (unscaled, precision, scale): its declared type's precision and
/// scale when known (a decimal(10,2) column's 3.00 is (300, 10, 2)); else the precision of
/// its digits, as SQL Server types literals in decimal expressions (1.0 / 3 is 0.333333).
fn decimal_operand(n: Num, declared: Option<SqlType>) -> (i128, u8, u8) {
    let (u, s) = match n {
        Num::Dec(u, s) => (u, s),
        Num::Int(i) => (i, 0),
        Num::Float(f) => return (f as i128, 38, 0),
    };
    let typed = declared
        .and_then(crate::convert::decimal_shape)
        .filter(|&(_, ds)| ds >= s)
        .and_then(|(p, ds)| Some((rescale(u, s, ds)?, p, ds)))
        .filter(|&(u, p, _)| crate::convert::digit_count(u.unsigned_abs()) <= p as u32);
    typed.unwrap_or((u, digits_precision(u, s), s))
}

fn digits_precision(u: i128, s: u8) -> u8 {
    (crate::convert::digit_count(u.unsigned_abs()).max(s as u32 + 1)).min(38) as u8
}

fn integer_arithmetic(op: BinaryOp, x: i128, y: i128, t: SqlType) -> Result<Value, SqlError> {
    let r = match op {
        BinaryOp::Add => x + y,
        BinaryOp::Subtract => x - y,
        BinaryOp::Multiply => x * y,
        BinaryOp::Divide | BinaryOp::Modulo if y == 0 => return Err(msg(8134, &[])),
        BinaryOp::Divide => x / y,
        BinaryOp::Modulo => x % y,
        _ => return Err(invalid_operand(t, op)),
    };
    int_value(r, t).ok_or_else(|| overflow(t))
}

fn float_arithmetic(op: BinaryOp, x: f64, y: f64, t: SqlType) -> Result<Value, SqlError> {
    let r = match op {
        BinaryOp::Add => x + y,
        BinaryOp::Subtract => x - y,
        BinaryOp::Multiply => x * y,
        BinaryOp::Divide | BinaryOp::Modulo if y == 0.0 => return Err(msg(8134, &[])),
        BinaryOp::Divide => x / y,
        BinaryOp::Modulo => return Err(invalid_operand(t, op)),
        _ => return Err(invalid_operand(t, op)),
    };
    if !r.is_finite() {
        return Err(overflow(SqlType::Float));
    }
    Ok(if t == SqlType::Real {
        Value::Real(r as f32)
    } else {
        Value::Float(r)
    })
}

/// Exact decimal arithmetic: operands as (unscaled, precision, scale), the result at SQL
/// Server's precision and scale for the operator.
fn decimal_arithmetic(
    op: BinaryOp,
    a: (i128, u8, u8),
    b: (i128, u8, u8),
) -> Result<Value, SqlError> {
    let SqlType::Decimal { precision, scale } = decimal_result(op, a.1, a.2, b.1, b.2) else {
        return Err(overflow(SqlType::Decimal {
            precision: 38,
            scale: 0,
        }));
    };
    let err = || overflow(SqlType::Decimal { precision, scale });
    let common = a.2.max(b.2);
    let (x, y) = (
        rescale(a.0, a.2, common).ok_or_else(err)?,
        rescale(b.0, b.2, common).ok_or_else(err)?,
    );
    let unscaled = match op {
        BinaryOp::Add => rescale(x.checked_add(y).ok_or_else(err)?, common, scale),
        BinaryOp::Subtract => rescale(x.checked_sub(y).ok_or_else(err)?, common, scale),
        BinaryOp::Multiply => rescale(a.0.checked_mul(b.0).ok_or_else(err)?, a.2 + b.2, scale),
        BinaryOp::Divide | BinaryOp::Modulo if b.0 == 0 => return Err(msg(8134, &[])),
        BinaryOp::Divide => divide_rounded(a.0, a.2, b.0, b.2, scale),
        BinaryOp::Modulo => rescale(x % y, common, scale),
        _ => return Err(invalid_operand(SqlType::Decimal { precision, scale }, op)),
    }
    .ok_or_else(err)?;
    if !fits_precision(unscaled, precision) {
        return Err(err());
    }
    Ok(Value::Decimal { unscaled, scale })
}

/// (x / 10^sx) / (y / 10^sy) as an unscaled integer at scale `s`, rounded half away from
/// zero; None on overflow.
fn divide_rounded(x: i128, sx: u8, y: i128, sy: u8, s: u8) -> Option<i128> {
    // Compute with one extra digit, then round it away.
    let shift = s as i32 + 1 + sy as i32 - sx as i32;
    let (num, den) = if shift >= 0 {
        (x.checked_mul(crate::convert::pow10(shift as u32)?)?, y)
    } else {
        (x, y.checked_mul(crate::convert::pow10((-shift) as u32)?)?)
    };
    let q = num.checked_div(den)?;
    let sign = if (num < 0) != (den < 0) { -1 } else { 1 };
    let last = (q % 10).abs();
    let base = q / 10;
    Some(if last >= 5 { base + sign } else { base })
}

fn bitwise(op: BinaryOp, a: &Value, b: &Value) -> Result<Value, SqlError> {
    let (ta, tb) = (type_of(a), type_of(b));
    let integer = |t: SqlType| {
        matches!(
            t,
            SqlType::Bit | SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::BigInt
        )
    };
    let target = if precedence(ta) >= precedence(tb) {
        ta
    } else {
        tb
    };
    let target = if target.is_text() {
        if integer(ta) {
            ta
        } else {
            tb
        }
    } else {
        target
    };
    if !integer(target) || !(integer(ta) || ta.is_text()) || !(integer(tb) || tb.is_text()) {
        return Err(msg(
            402,
            &[&data_type_name(ta), &data_type_name(tb), &op.message_name()],
        ));
    }
    let (Num::Int(x), Num::Int(y)) = (operand_number(a, target)?, operand_number(b, target)?)
    else {
        return Err(overflow(target));
    };
    let r = match op {
        BinaryOp::BitAnd => x & y,
        BinaryOp::BitOr => x | y,
        _ => x ^ y,
    };
    // Bits are kept within the type's width: tinyint is unsigned, the others two's complement.
    let wrapped = match target {
        SqlType::Bit => (r & 1 != 0) as i128,
        SqlType::TinyInt => r & 0xFF,
        _ => r,
    };
    int_value(wrapped, target).ok_or_else(|| overflow(target))
}

/// Orders two values as SQL Server compares them; `None` when either is NULL.
pub fn compare(a: &Value, b: &Value) -> Result<Option<Ordering>, SqlError> {
    if a.is_null() || b.is_null() {
        return Ok(None);
    }
    let (ta, tb) = (type_of(a), type_of(b));
    let clash = || msg(206, &[&data_type_name(ta), &data_type_name(tb)]);
    Ok(Some(match (a, b) {
        (Value::Text(x), Value::Text(y)) => collate_cmp(x, y),
        (Value::Binary(x), Value::Binary(y)) => x.cmp(y),
        (Value::Guid(x), Value::Guid(y)) => guid_cmp(x, y),
        (Value::Guid(x), Value::Text(y)) => {
            guid_cmp(x, &parse_guid(y).ok_or_else(|| msg(8169, &[]))?)
        }
        (Value::Text(x), Value::Guid(y)) => {
            guid_cmp(&parse_guid(x).ok_or_else(|| msg(8169, &[]))?, y)
        }
        _ if value_ticks(a).is_some() || value_ticks(b).is_some() => {
            let ticks = |v: &Value| -> Result<i64, SqlError> {
                match value_ticks(v) {
                    Some(t) => Ok(t),
                    None if v.is_null() => Err(clash()),
                    None => {
                        let target = if matches!(v, Value::Text(_)) {
                            SqlType::DateTime2(7)
                        } else {
                            SqlType::DateTime
                        };
                        value_ticks(&convert(v, target, None).map_err(|e| {
                            if e.number == 529 {
                                clash()
                            } else {
                                e
                            }
                        })?)
                        .ok_or_else(clash)
                    }
                }
            };
            ticks(a)?.cmp(&ticks(b)?)
        }
        _ => {
            let (na, nb) = match (numeric_of(a), numeric_of(b)) {
                (Some(x), Some(y)) => (x, y),
                (Some(x), None) => (x, text_number(b, ta, tb)?),
                (None, Some(y)) => (text_number(a, tb, ta)?, y),
                (None, None) => return Err(clash()),
            };
            return Ok(num_cmp(na, nb));
        }
    }))
}

/// A string compared with a number of type `other`, converted to that type's kind.
fn text_number(v: &Value, other: SqlType, own: SqlType) -> Result<Num, SqlError> {
    let Value::Text(s) = v else {
        return Err(msg(206, &[&data_type_name(own), &data_type_name(other)]));
    };
    match other {
        SqlType::Float | SqlType::Real => parse_float_text(s)
            .map(Num::Float)
            .ok_or_else(|| msg(8114, &[&"varchar", &data_type_name(other)])),
        SqlType::Decimal { .. } => {
            parse_decimal_text(s).ok_or_else(|| msg(8114, &[&"varchar", &"numeric"]))
        }
        t => numeric_of(&convert(v, t, None)?).ok_or_else(|| overflow(t)),
    }
}

/// Orders two numbers exactly where both are exact.
pub fn num_cmp(a: Num, b: Num) -> Option<Ordering> {
    let exact = |n: Num| match n {
        Num::Int(i) => Some((i, 0u8)),
        Num::Dec(u, s) => Some((u, s)),
        Num::Float(_) => None,
    };
    if let (Some((x, sx)), Some((y, sy))) = (exact(a), exact(b)) {
        let s = sx.max(sy);
        if let (Some(x), Some(y)) = (rescale(x, sx, s), rescale(y, sy, s)) {
            return Some(x.cmp(&y));
        }
    }
    num_to_f64(a).partial_cmp(&num_to_f64(b))
}

/// The server collation's string order (`format::collation`: each character folded to
/// uppercase, trailing spaces ignored, accents kept), the order the B-tree keeps character
/// keys in, so a seek and a scan agree.
pub fn collate_cmp(a: &str, b: &str) -> Ordering {
    extentdb_format::collation::compare(a, b)
}

/// SQL Server's uniqueidentifier order: bytes 10-15 first, then 8-9, 6-7, 4-5, 0-3.
pub fn guid_cmp(a: &[u8; 16], b: &[u8; 16]) -> Ordering {
    const ORDER: [usize; 16] = [10, 11, 12, 13, 14, 15, 8, 9, 6, 7, 4, 5, 0, 1, 2, 3];
    ORDER
        .iter()
        .map(|&i| a[i].cmp(&b[i]))
        .find(|o| *o != Ordering::Equal)
        .unwrap_or(Ordering::Equal)
}

/// One element of a LIKE pattern.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    AnyRun,
    AnyOne,
    /// A bracket set; its bounds folded by `fold_one`.
    Set {
        negated: bool,
        items: Vec<(char, char)>,
    },
    /// A run of literal characters, folded by the collation (`collation::fold`, so `'ß'`
    /// is `"SS"`).
    Literal(Vec<char>),
}

/// T-SQL LIKE: `%`, `_`, `[abc]`, `[a-z]`, `[^a]` and an optional escape character;
/// trailing spaces of the matched text are ignored, as SQL Server does.
///
/// Literal characters compare as `=` does (`format::collation`: case-insensitive, `'ß'`
/// equal to `"SS"`, accents kept), so `x LIKE 'abc'` and `x = 'abc'` agree on every `x`.
/// A literal run matches whole characters of the text: `'ß' LIKE 'SS'` is true, and
/// `'ß' LIKE 'S%'` false (half of a character is not a prefix). `_` and a bracket set
/// match one character of the text, a set after folding it to one character (`fold_one`).
pub fn like(text: &str, pattern: &str, escape: Option<char>) -> bool {
    let tokens = parse_like(pattern, escape);
    let text: Vec<char> = text.trim_end_matches(' ').chars().collect();
    // Greedy match with backtracking to the last '%'. Each token's match at a position is
    // unique, and a literal run started later never ends earlier, so the leftmost match of
    // the tokens after a '%' is the one to keep.
    let (mut t, mut p) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        let step = tokens.get(p).filter(|tok| **tok != Token::AnyRun);
        if let Some(next) = step.and_then(|tok| token_match(tok, &text, t)) {
            t = next;
            p += 1;
        } else if tokens.get(p) == Some(&Token::AnyRun) {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    tokens[p..].iter().all(|tok| *tok == Token::AnyRun)
}

/// Where the text goes on after `token` matched it at `t`, or None when it does not.
fn token_match(token: &Token, text: &[char], t: usize) -> Option<usize> {
    let c = *text.get(t)?;
    match token {
        Token::AnyRun | Token::AnyOne => Some(t + 1),
        Token::Set { negated, items } => {
            let c = fold_one(c);
            (items.iter().any(|(lo, hi)| *lo <= c && c <= *hi) != *negated).then_some(t + 1)
        }
        Token::Literal(run) => literal_match(run, text, t),
    }
}

/// Matches the folded literal `run` against whole characters of `text` from `t`.
fn literal_match(run: &[char], text: &[char], mut t: usize) -> Option<usize> {
    let mut want = run.iter();
    while want.len() > 0 {
        for f in collation::fold(*text.get(t)?) {
            if want.next() != Some(&f) {
                return None;
            }
        }
        t += 1;
    }
    Some(t)
}

/// One character folded to one character, for `_`'s sets: its collation fold when that is
/// a single character, else the character itself (`'ß'` stays `'ß'`).
fn fold_one(c: char) -> char {
    let mut f = collation::fold(c);
    match (f.next(), f.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

fn parse_like(pattern: &str, escape: Option<char>) -> Vec<Token> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if Some(c) == escape && i + 1 < chars.len() {
            push_literal(&mut tokens, chars[i + 1]);
            i += 2;
            continue;
        }
        match c {
            '%' => tokens.push(Token::AnyRun),
            '_' => tokens.push(Token::AnyOne),
            '[' => {
                if let Some((token, used)) = parse_set(&chars[i + 1..], escape) {
                    tokens.push(token);
                    i += used + 1;
                    continue;
                }
                push_literal(&mut tokens, '[');
            }
            _ => push_literal(&mut tokens, c),
        }
        i += 1;
    }
    tokens
}

/// Adds literal `c`, folded, to the run the pattern ends with (or a new run).
fn push_literal(tokens: &mut Vec<Token>, c: char) {
    if let Some(Token::Literal(run)) = tokens.last_mut() {
        run.extend(collation::fold(c));
    } else {
        tokens.push(Token::Literal(collation::fold(c).collect()));
    }
}

/// Parses a bracket set after its `[`; returns the token and the characters used
/// (including the closing `]`), or None when the set is not closed.
fn parse_set(chars: &[char], escape: Option<char>) -> Option<(Token, usize)> {
    let mut i = 0;
    let negated = chars.first() == Some(&'^');
    if negated {
        i += 1;
    }
    let mut items = Vec::new();
    while i < chars.len() {
        let mut c = chars[i];
        if c == ']' && (i > negated as usize || !items.is_empty()) {
            return Some((Token::Set { negated, items }, i + 1));
        }
        if Some(c) == escape && i + 1 < chars.len() {
            i += 1;
            c = chars[i];
        }
        if i + 2 < chars.len() && chars[i + 1] == '-' && chars[i + 2] != ']' {
            items.push((fold_one(c), fold_one(chars[i + 2])));
            i += 3;
        } else {
            items.push((fold_one(c), fold_one(c)));
            i += 1;
        }
    }
    None
}

/// Unary minus. Overflow (`-(-2147483648)`) is message 8115; strings, bits and other
/// non-numeric types are message 8117.
pub fn negate(v: &Value) -> Result<Value, SqlError> {
    let t = type_of(v);
    Ok(match v {
        Value::Null => Value::Null,
        Value::TinyInt(0) => Value::TinyInt(0),
        Value::TinyInt(_) => return Err(overflow(t)),
        Value::SmallInt(x) => Value::SmallInt(x.checked_neg().ok_or_else(|| overflow(t))?),
        Value::Int(x) => Value::Int(x.checked_neg().ok_or_else(|| overflow(t))?),
        Value::BigInt(x) => Value::BigInt(x.checked_neg().ok_or_else(|| overflow(t))?),
        Value::Decimal { unscaled, scale } => Value::Decimal {
            unscaled: -unscaled,
            scale: *scale,
        },
        Value::Float(f) => Value::Float(-f),
        Value::Real(f) => Value::Real(-f),
        _ => return Err(msg(8117, &[&data_type_name(t), &"minus"])),
    })
}

/// Bitwise NOT (`~`) of an integer or bit.
pub fn bit_not(v: &Value) -> Result<Value, SqlError> {
    Ok(match v {
        Value::Null => Value::Null,
        Value::Bit(b) => Value::Bit(!b),
        Value::TinyInt(x) => Value::TinyInt(!x),
        Value::SmallInt(x) => Value::SmallInt(!x),
        Value::Int(x) => Value::Int(!x),
        Value::BigInt(x) => Value::BigInt(!x),
        _ => return Err(msg(8117, &[&data_type_name(type_of(v)), &"~"])),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Value {
        Value::Text(s.into())
    }

    fn dec(u: i128, s: u8) -> Value {
        Value::Decimal {
            unscaled: u,
            scale: s,
        }
    }

    use extentdb_format::collation;

    #[test]
    fn integer_arithmetic_and_errors() {
        assert_eq!(
            binary(BinaryOp::Add, &Value::Int(2), &Value::Int(3)).unwrap(),
            Value::Int(5)
        );
        assert_eq!(
            binary(BinaryOp::Divide, &Value::Int(7), &Value::Int(2)).unwrap(),
            Value::Int(3)
        );
        assert_eq!(
            binary(BinaryOp::Divide, &Value::Int(-7), &Value::Int(2)).unwrap(),
            Value::Int(-3)
        );
        assert_eq!(
            binary(BinaryOp::Modulo, &Value::Int(-7), &Value::Int(2)).unwrap(),
            Value::Int(-1)
        );
        let e = binary(BinaryOp::Add, &Value::Int(i32::MAX), &Value::Int(1)).unwrap_err();
        assert_eq!(
            (e.number, e.text.as_str()),
            (
                8115,
                "Arithmetic overflow error converting expression to data type int."
            )
        );
        assert_eq!(
            binary(BinaryOp::Divide, &Value::Int(i32::MIN), &Value::Int(-1))
                .unwrap_err()
                .number,
            8115
        );
        let e = binary(BinaryOp::Divide, &Value::Int(1), &Value::Int(0)).unwrap_err();
        assert_eq!(
            (e.number, e.severity, e.text.as_str()),
            (8134, 16, "Divide by zero error encountered.")
        );
        assert_eq!(
            binary(BinaryOp::Modulo, &Value::BigInt(1), &Value::Int(0))
                .unwrap_err()
                .number,
            8134
        );
        assert_eq!(
            binary(BinaryOp::Multiply, &Value::BigInt(3), &Value::TinyInt(2)).unwrap(),
            Value::BigInt(6)
        );
        assert_eq!(
            binary(BinaryOp::Add, &Value::Null, &Value::Int(1)).unwrap(),
            Value::Null
        );
    }

    #[test]
    fn implicit_conversion() {
        assert_eq!(
            binary(BinaryOp::Add, &t("1"), &Value::Int(1)).unwrap(),
            Value::Int(2)
        );
        let e = binary(BinaryOp::Add, &t("abc"), &Value::Int(1)).unwrap_err();
        assert_eq!(
            e.text,
            "Conversion failed when converting the varchar value 'abc' to data type int."
        );
        assert_eq!(
            binary(BinaryOp::Add, &t("ab"), &t("cd")).unwrap(),
            t("abcd")
        );
        assert_eq!(
            binary(BinaryOp::Multiply, &Value::Float(1.5), &Value::Int(2)).unwrap(),
            Value::Float(3.0)
        );
        assert_eq!(
            binary(BinaryOp::Subtract, &t("x"), &t("y"))
                .unwrap_err()
                .number,
            8117
        );
    }

    #[test]
    fn decimal_arithmetic_rules() {
        assert_eq!(
            binary(BinaryOp::Add, &dec(150, 2), &dec(25, 1)).unwrap(),
            dec(400, 2)
        );
        assert_eq!(
            binary(BinaryOp::Multiply, &dec(15, 1), &dec(15, 1)).unwrap(),
            dec(225, 2)
        );
        // 1.0 / 3 is decimal(9,6) in SQL Server: 0.333333.
        assert_eq!(
            binary(BinaryOp::Divide, &dec(10, 1), &Value::Int(3)).unwrap(),
            dec(333_333, 6)
        );
        assert_eq!(
            binary(BinaryOp::Divide, &dec(20, 1), &Value::Int(3)).unwrap(),
            dec(666_667, 6)
        );
        assert_eq!(
            binary(BinaryOp::Add, &Value::Int(1), &dec(5, 1)).unwrap(),
            dec(15, 1)
        );
        assert_eq!(
            binary(BinaryOp::Divide, &dec(10, 1), &dec(0, 1))
                .unwrap_err()
                .number,
            8134
        );
        assert_eq!(
            binary(BinaryOp::Modulo, &dec(75, 1), &Value::Int(2)).unwrap(),
            dec(15, 1)
        );
        assert_eq!(
            binary_result_type(
                BinaryOp::Divide,
                SqlType::Decimal {
                    precision: 2,
                    scale: 1
                },
                SqlType::Int
            ),
            SqlType::Decimal {
                precision: 13,
                scale: 12
            }
        );
        assert_eq!(
            binary_result_type(
                BinaryOp::Divide,
                SqlType::Decimal {
                    precision: 2,
                    scale: 1
                },
                SqlType::Decimal {
                    precision: 1,
                    scale: 0
                }
            ),
            SqlType::Decimal {
                precision: 7,
                scale: 6
            }
        );
    }

    #[test]
    fn decimal_operands_take_their_declared_shape() {
        let d10_2 = SqlType::Decimal {
            precision: 10,
            scale: 2,
        };
        let typed = |a: &Value, b: &Value, l, r| {
            binary_typed(BinaryOp::Divide, a, b, Declared { left: l, right: r }).unwrap()
        };
        // decimal(10,2) / decimal(10,2): scale max(6, 2 + 10 + 1) = 13.
        assert_eq!(
            typed(&dec(100, 2), &dec(300, 2), Some(d10_2), Some(d10_2)),
            dec(3_333_333_333_333, 13)
        );
        // An int column is decimal(10,0); a literal 3 by its digits, decimal(1,0).
        assert_eq!(
            typed(
                &dec(100, 2),
                &Value::Int(3),
                Some(d10_2),
                Some(SqlType::Int)
            ),
            dec(3_333_333_333_333, 13)
        );
        assert_eq!(
            typed(&dec(100, 2), &Value::Int(3), Some(d10_2), None),
            dec(333_333, 6)
        );
        // decimal(38,10) * decimal(38,10): precision 77 reduced to 38, scale to 6.
        let d38 = Some(SqlType::Decimal {
            precision: 38,
            scale: 10,
        });
        let square = binary_typed(
            BinaryOp::Multiply,
            &dec(15, 1),
            &dec(15, 1),
            Declared {
                left: d38,
                right: d38,
            },
        );
        assert_eq!(square.unwrap(), dec(2_250_000, 6));
        // A value whose digits exceed its claimed type keeps its digits' shape.
        assert_eq!(
            typed(
                &dec(123_456, 2),
                &Value::Int(3),
                Some(SqlType::TinyInt),
                None
            ),
            dec(411_520_000, 6)
        );
    }

    #[test]
    fn dates_with_numbers() {
        let d = convert(&t("2016-10-04"), SqlType::DateTime, None).unwrap();
        let next = binary(BinaryOp::Add, &d, &Value::Int(1)).unwrap();
        assert_eq!(
            convert(&next, SqlType::VarChar(30), Some(23)).unwrap(),
            t("2016-10-05")
        );
        let d2 = convert(&t("2016-10-04"), SqlType::DateTime2(7), None).unwrap();
        let e = binary(BinaryOp::Add, &d2, &Value::Int(1)).unwrap_err();
        assert_eq!(
            e.text,
            "Operand type clash: datetime2 is incompatible with int"
        );
    }

    #[test]
    fn comparisons() {
        assert_eq!(
            compare(&t("abc"), &t("ABC  ")).unwrap(),
            Some(Ordering::Equal)
        );
        assert_eq!(compare(&t("a"), &t("B")).unwrap(), Some(Ordering::Less));
        assert_eq!(compare(&Value::Null, &Value::Int(1)).unwrap(), None);
        assert_eq!(
            binary(BinaryOp::Eq, &Value::Null, &Value::Null).unwrap(),
            Value::Null
        );
        assert_eq!(
            binary(BinaryOp::Lt, &Value::Int(1), &dec(15, 1)).unwrap(),
            Value::Bit(true)
        );
        assert_eq!(
            binary(BinaryOp::Eq, &t("10"), &Value::Int(10)).unwrap(),
            Value::Bit(true)
        );
        assert_eq!(compare(&t("x"), &Value::Int(10)).unwrap_err().number, 245);
        let d = convert(&t("2016-10-04"), SqlType::Date, None).unwrap();
        assert_eq!(
            binary(BinaryOp::Eq, &d, &t("20161004")).unwrap(),
            Value::Bit(true)
        );
        assert_eq!(
            compare(&Value::Float(0.5), &dec(5, 1)).unwrap(),
            Some(Ordering::Equal)
        );
        assert_eq!(
            compare(&Value::Guid([0; 16]), &Value::Int(1))
                .unwrap_err()
                .number,
            206
        );
    }

    #[test]
    fn like_patterns() {
        assert!(like("Hello", "h%", None));
        assert!(like("Hello", "%LL%", None));
        assert!(like("Hello", "H_llo", None));
        assert!(!like("Hello", "H_lo", None));
        assert!(like("abc ", "abc", None));
        assert!(!like("abc", "abc ", None));
        assert!(like("b", "[abc]", None));
        assert!(like("m", "[a-z]", None));
        assert!(!like("a", "[^a]", None));
        assert!(like("x", "[^a]", None));
        assert!(like("50%", "50!%", Some('!')));
        assert!(!like("500", "50!%", Some('!')));
        assert!(like("a[b", "a[b", None));
        assert!(like("", "%", None));
        assert!(like("master", "%a%t%r", None));
        assert!(!like("master", "%a%x%", None));
        assert!(like("_x", "[_]x", None));
        // Literals fold as `=` does: 'ß' is "SS", whole characters only.
        assert!(like("\u{df}", "SS", None));
        assert!(like("STRASSE", "stra\u{df}e", None));
        assert!(like("Stra\u{df}e", "%ss%", None));
        assert!(!like("\u{df}", "S%", None));
        assert!(like("\u{df}", "_", None));
        assert!(!like("\u{df}", "__", None));
        assert!(like("\u{df}", "[\u{df}]", None));
        // The Kelvin sign folds (uppercase) to itself, not to 'K', as `=` has it.
        assert!(!like("\u{212a}", "k", None));
        assert!(like("\u{e9}", "\u{c9}", None));
        assert!(!like("\u{e9}", "e", None));
    }

    /// Proves LIKE with a pattern of literal characters only agrees with `=` on many random
    /// pairs (trailing spaces aside: LIKE ignores the text's, keeps the pattern's), and that
    /// `a + b LIKE a + '%'` holds.
    #[test]
    fn like_literals_agree_with_equality() {
        let strings = random_strings(0x51ed_270b_27a5_b2c1, true, 300);
        let literal = |s: &String| !s.contains(['_', '[', '%']);
        for a in &strings {
            for b in strings.iter().filter(|b| literal(b)) {
                let pattern = b.trim_end_matches(' ');
                let equal = collate_cmp(a, pattern) == Ordering::Equal;
                assert_eq!(like(a, pattern, None), equal, "{a:?} LIKE {pattern:?}");
                if literal(a) && !a.ends_with(' ') {
                    assert!(
                        like(&format!("{a}{b}"), &format!("{a}%"), None),
                        "{a:?} {b:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn unary_operators() {
        assert_eq!(negate(&Value::Int(5)).unwrap(), Value::Int(-5));
        assert_eq!(negate(&Value::Int(i32::MIN)).unwrap_err().number, 8115);
        assert_eq!(negate(&t("1")).unwrap_err().number, 8117);
        assert_eq!(bit_not(&Value::Int(0)).unwrap(), Value::Int(-1));
        assert_eq!(bit_not(&Value::TinyInt(1)).unwrap(), Value::TinyInt(254));
        assert_eq!(
            binary(BinaryOp::BitAnd, &Value::Int(6), &Value::Int(3)).unwrap(),
            Value::Int(2)
        );
        assert_eq!(
            binary(BinaryOp::BitOr, &Value::Bit(true), &Value::Bit(false)).unwrap(),
            Value::Bit(true)
        );
        assert_eq!(
            binary(BinaryOp::BitXor, &Value::Float(1.0), &Value::Int(1))
                .unwrap_err()
                .number,
            402
        );
    }

    /// Random strings over letters of both cases, '_', '[', '^', spaces, accented letters,
    /// 'ß' and (for `unicode`) characters beyond Latin-1; a seeded xorshift, so a failure
    /// replays.
    fn random_strings(seed: u64, unicode: bool, n: usize) -> Vec<String> {
        let mut alphabet: Vec<char> = "aAbBsSzZ_[^] e\u{e9}\u{c9}E\u{df}\u{ff}\u{b5}0"
            .chars()
            .collect();
        if unicode {
            alphabet.extend("\u{3a9}\u{3c9}\u{178}\u{fb00}\u{1e9e}\u{10400}\u{10428}".chars());
        }
        let mut x = seed;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        (0..n)
            .map(|_| {
                let len = (next() % 6) as usize;
                (0..len)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect()
            })
            .collect()
    }

    /// Proves T-SQL's text comparison (`compare`, so `=`, `<`, ORDER BY, GROUP BY, DISTINCT
    /// and key checks) orders every pair of many random strings exactly as the B-tree
    /// orders their stored encodings (`key::compare`), for varchar and nvarchar, and that
    /// NULL compares as unknown: the agreement seek.rs invariant 2 rests on.
    #[test]
    fn text_order_is_the_stored_order() {
        use extentdb_format::key::{self, type_id};
        for (ty, tid, unicode) in [
            (SqlType::VarChar(20), type_id::VARCHAR, false),
            (SqlType::NVarChar(20), type_id::NVARCHAR, true),
            (SqlType::Char(8), type_id::CHAR, false),
        ] {
            let strings = random_strings(0x9e37_79b9_7f4a_7c15 ^ tid as u64, unicode, 300);
            let stored: Vec<Vec<u8>> = strings
                .iter()
                .map(|s| {
                    crate::rowcodec::encode(ty, &Value::Text(s.clone()))
                        .unwrap()
                        .unwrap()
                })
                .collect();
            for (a, ea) in strings.iter().zip(&stored) {
                for (b, eb) in strings.iter().zip(&stored) {
                    let sql = compare(&t(a), &t(b)).unwrap().unwrap();
                    assert_eq!(
                        sql,
                        key::compare(tid, Some(ea), Some(eb)),
                        "{ty:?}: {a:?} / {b:?}"
                    );
                    let folded_equal = collation::folded(a) == collation::folded(b);
                    assert_eq!(folded_equal, sql == Ordering::Equal, "{a:?} / {b:?}");
                }
            }
        }
        assert_eq!(compare(&Value::Null, &t("a")).unwrap(), None);
        assert_eq!(compare(&t("_"), &t("a")).unwrap(), Some(Ordering::Greater));
        assert_eq!(
            compare(&t("\u{df}"), &t("SS")).unwrap(),
            Some(Ordering::Equal)
        );
        assert_eq!(
            compare(&t("\u{df}"), &t("ss ")).unwrap(),
            Some(Ordering::Equal)
        );
        assert_eq!(
            compare(&t("\u{e9}"), &t("E")).unwrap(),
            Some(Ordering::Greater)
        );
    }
}
