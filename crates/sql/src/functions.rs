//! T-SQL scalar built-in functions: date and time (SYSDATETIME, GETDATE, DATEADD,
//! DATEDIFF, DATEPART ...), strings (LEN, LEFT, SUBSTRING, REPLACE, CHARINDEX ...),
//! mathematics (ABS, ROUND, POWER ...) and NULL handling (ISNULL, COALESCE, NULLIF, IIF).
//!
//! Invariants:
//! 1. [`call_scalar`] answers `Ok(None)` for a name it does not know, so the executor
//!    reports its own error (195) for unknown functions.
//! 2. The clock is injected ([`Clock`]) so tests and golden scripts can fix "now".
//! 3. DATEDIFF counts datepart boundaries crossed, as SQL Server does, not elapsed units;
//!    weeks start on Sunday (SET DATEFIRST 7, the us_english default).
//! 4. No input panics; overflows become SQL Server's messages (535, 517, 8115).
//!
//! Not here: aggregates, CAST/CONVERT (the executor calls `convert` with the parsed type),
//! SET DATEFIRST / LANGUAGE other than us_english, FORMAT.

use std::cmp::Ordering;

use crate::convert::{
    convert, date_parts, days_from_ymd, days_in_month, decimal_shape, numeric_of, pow10, rescale,
    round_datetime, text_of, type_of, value_ticks, ymd_from_days, Num, MAX_TICKS,
};
use crate::messages::{msg, SqlError};
use crate::ops::compare;
use crate::types::{SqlType, Value, MAX_LENGTH, TICKS_PER_DAY, TICKS_PER_SECOND};

/// Ticks of 1970-01-01 00:00:00 since 0001-01-01.
const UNIX_EPOCH_TICKS: i64 = 621_355_968_000_000_000;

/// The source of "now": 100-ns ticks since 0001-01-01, local and UTC.
pub trait Clock {
    fn now_ticks_local(&self) -> i64;
    fn now_ticks_utc(&self) -> i64;
}

/// The machine's clock; local time through the C library's time zone rules.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ticks_utc(&self) -> i64 {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        UNIX_EPOCH_TICKS + (since.as_nanos() / 100) as i64
    }

    fn now_ticks_local(&self) -> i64 {
        let utc = self.now_ticks_utc();
        let unix_s = (utc - UNIX_EPOCH_TICKS) / TICKS_PER_SECOND;
        utc + local_offset_seconds(unix_s) * TICKS_PER_SECOND
    }
}

/// The local time zone's offset from UTC at a Unix time, in seconds.
fn local_offset_seconds(unix_s: i64) -> i64 {
    let t = unix_s as libc::time_t;
    // SAFETY: tm is plain data we own; localtime_r only writes into it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let ok = unsafe { !libc::localtime_r(&t, &mut tm).is_null() };
    if ok {
        tm.tm_gmtoff
    } else {
        0
    }
}

/// UPPER and LOWER as SQL Server does them: each character mapped on its own, kept when
/// its mapping is not one character (ß, ŉ), so the length never changes; Rust's
/// str::to_uppercase would make ß "SS" and a word-final Σ "ς".
fn simple_case<I: Iterator<Item = char>>(s: &str, map: impl Fn(char) -> I) -> String {
    s.chars()
        .map(|c| {
            let mut m = map(c);
            match (m.next(), m.next()) {
                (Some(one), None) => one,
                _ => c,
            }
        })
        .collect()
}

/// Calls scalar function `name` (any case). `Ok(None)`: not a known scalar function.
pub fn call_scalar(
    name: &str,
    args: &[Value],
    clock: &dyn Clock,
) -> Result<Option<Value>, SqlError> {
    let upper = name.to_ascii_uppercase();
    if let Some(v) = date_function(&upper, args, clock)? {
        return Ok(Some(v));
    }
    if let Some(v) = string_function(&upper, args)? {
        return Ok(Some(v));
    }
    if let Some(v) = math_function(&upper, args)? {
        return Ok(Some(v));
    }
    if let Some(v) = json_function(&upper, args)? {
        return Ok(Some(v));
    }
    misc_function(&upper, args)
}

/// Message 174 (exact count) or 189 (a range) when `args` does not fit.
fn arity(name: &str, args: &[Value], min: usize, max: usize) -> Result<(), SqlError> {
    if (min..=max).contains(&args.len()) {
        return Ok(());
    }
    let lower = name.to_ascii_lowercase();
    Err(if min == max {
        msg(174, &[&lower, &min])
    } else {
        msg(189, &[&lower, &min, &max])
    })
}

/// A datepart named by the executor as text (`MILLISECOND`, `mcs`, `yy` ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatePart {
    Year,
    Quarter,
    Month,
    DayOfYear,
    Day,
    Week,
    Weekday,
    Hour,
    Minute,
    Second,
    Millisecond,
    Microsecond,
    Nanosecond,
    IsoWeek,
}

/// Reads a datepart name or abbreviation; anything else is message 155 for `function`.
pub fn parse_datepart(v: &Value, function: &str) -> Result<DatePart, SqlError> {
    let text = match v {
        Value::Text(s) => s.trim().to_ascii_lowercase(),
        other => text_of(other, type_of(other), None).unwrap_or_default(),
    };
    Ok(match text.as_str() {
        "year" | "yy" | "yyyy" => DatePart::Year,
        "quarter" | "qq" | "q" => DatePart::Quarter,
        "month" | "mm" | "m" => DatePart::Month,
        "dayofyear" | "dy" | "y" => DatePart::DayOfYear,
        "day" | "dd" | "d" => DatePart::Day,
        "week" | "wk" | "ww" => DatePart::Week,
        "weekday" | "dw" | "w" => DatePart::Weekday,
        "hour" | "hh" => DatePart::Hour,
        "minute" | "mi" | "n" => DatePart::Minute,
        "second" | "ss" | "s" => DatePart::Second,
        "millisecond" | "ms" => DatePart::Millisecond,
        "microsecond" | "mcs" => DatePart::Microsecond,
        "nanosecond" | "ns" => DatePart::Nanosecond,
        "iso_week" | "isowk" | "isoww" => DatePart::IsoWeek,
        _ => return Err(msg(155, &[&text, &function.to_ascii_lowercase()])),
    })
}

/// A date argument as ticks and its type: strings read as datetime2(7), numbers as days
/// since 1900-01-01 (datetime); `None` for NULL.
fn date_arg(v: &Value) -> Result<Option<(i64, SqlType)>, SqlError> {
    Ok(match v {
        Value::Null => None,
        Value::Date(_) => value_ticks(v).map(|t| (t, SqlType::Date)),
        Value::DateTime(t) => Some((*t, SqlType::DateTime)),
        Value::DateTime2(t) => Some((*t, SqlType::DateTime2(7))),
        Value::Text(_) => value_ticks(&convert(v, SqlType::DateTime2(7), None)?)
            .map(|t| (t, SqlType::DateTime2(7))),
        _ => value_ticks(&convert(v, SqlType::DateTime, None)?).map(|t| (t, SqlType::DateTime)),
    })
}

fn date_function(name: &str, args: &[Value], clock: &dyn Clock) -> Result<Option<Value>, SqlError> {
    let v = match name {
        "SYSDATETIME" => zero_args(name, args, Value::DateTime2(clock.now_ticks_local()))?,
        "SYSUTCDATETIME" => zero_args(name, args, Value::DateTime2(clock.now_ticks_utc()))?,
        "GETDATE" | "CURRENT_TIMESTAMP" => zero_args(
            name,
            args,
            Value::DateTime(round_datetime(clock.now_ticks_local())),
        )?,
        "GETUTCDATE" => zero_args(
            name,
            args,
            Value::DateTime(round_datetime(clock.now_ticks_utc())),
        )?,
        "DATEDIFF" | "DATEDIFF_BIG" => {
            arity(name, args, 3, 3)?;
            datediff(name, args)?
        }
        "DATEADD" => {
            arity(name, args, 3, 3)?;
            dateadd(args)?
        }
        "DATEPART" | "DATENAME" => {
            arity(name, args, 2, 2)?;
            let part = parse_datepart(&args[0], name)?;
            match date_arg(&args[1])? {
                None => Value::Null,
                Some((t, _)) if name == "DATEPART" => Value::Int(datepart(part, t) as i32),
                Some((t, _)) => Value::Text(datename(part, t)),
            }
        }
        "YEAR" | "MONTH" | "DAY" => {
            arity(name, args, 1, 1)?;
            let part = match name {
                "YEAR" => DatePart::Year,
                "MONTH" => DatePart::Month,
                _ => DatePart::Day,
            };
            date_arg(&args[0])?.map_or(Value::Null, |(t, _)| Value::Int(datepart(part, t) as i32))
        }
        "EOMONTH" => {
            arity(name, args, 1, 2)?;
            eomonth(args)?
        }
        _ => return Ok(None),
    };
    Ok(Some(v))
}

fn zero_args(name: &str, args: &[Value], v: Value) -> Result<Value, SqlError> {
    arity(name, args, 0, 0)?;
    Ok(v)
}

/// The boundary index of a tick count for a datepart: DATEDIFF is the difference of two.
fn boundary(part: DatePart, ticks: i64) -> i128 {
    let days = ticks.div_euclid(TICKS_PER_DAY) as i128;
    let p = date_parts(ticks);
    let t = ticks as i128;
    match part {
        DatePart::Year => p.year as i128,
        DatePart::Quarter => p.year as i128 * 4 + (p.month as i128 - 1) / 3,
        DatePart::Month => p.year as i128 * 12 + p.month as i128 - 1,
        DatePart::DayOfYear | DatePart::Day | DatePart::Weekday => days,
        // 0001-01-01 was a Monday; weeks begin on Sunday.
        DatePart::Week | DatePart::IsoWeek => (days + 1).div_euclid(7),
        DatePart::Hour => t.div_euclid(36_000_000_000),
        DatePart::Minute => t.div_euclid(600_000_000),
        DatePart::Second => t.div_euclid(TICKS_PER_SECOND as i128),
        DatePart::Millisecond => t.div_euclid(10_000),
        DatePart::Microsecond => t.div_euclid(10),
        DatePart::Nanosecond => t * 100,
    }
}

fn datediff(name: &str, args: &[Value]) -> Result<Value, SqlError> {
    let part = parse_datepart(&args[0], name)?;
    let (Some((a, _)), Some((b, _))) = (date_arg(&args[1])?, date_arg(&args[2])?) else {
        return Ok(Value::Null);
    };
    let diff = boundary(part, b) - boundary(part, a);
    if name == "DATEDIFF_BIG" {
        return i64::try_from(diff)
            .map(Value::BigInt)
            .map_err(|_| msg(535, &[]));
    }
    i32::try_from(diff)
        .map(Value::Int)
        .map_err(|_| msg(535, &[]))
}

fn dateadd(args: &[Value]) -> Result<Value, SqlError> {
    let part = parse_datepart(&args[0], "dateadd")?;
    let n = match convert(&args[1], SqlType::BigInt, None)? {
        Value::BigInt(n) => n,
        _ => return Ok(Value::Null),
    };
    let Some((ticks, t)) = date_arg(&args[2])? else {
        return Ok(Value::Null);
    };
    let result_type = if matches!(args[2], Value::Text(_)) {
        SqlType::DateTime
    } else {
        t
    };
    let type_name = crate::convert::data_type_name(result_type);
    if t == SqlType::Date
        && !matches!(
            part,
            DatePart::Year
                | DatePart::Quarter
                | DatePart::Month
                | DatePart::DayOfYear
                | DatePart::Day
                | DatePart::Week
                | DatePart::Weekday
        )
    {
        return Err(msg(
            9810,
            &[
                &format!("{part:?}").to_ascii_lowercase(),
                &"dateadd",
                &type_name,
            ],
        ));
    }
    let overflow = || msg(517, &[&type_name]);
    let shifted = match part {
        DatePart::Year => add_months(ticks, n.checked_mul(12).ok_or_else(overflow)?),
        DatePart::Quarter => add_months(ticks, n.checked_mul(3).ok_or_else(overflow)?),
        DatePart::Month => add_months(ticks, n),
        _ => {
            let unit: i128 = match part {
                DatePart::Week | DatePart::IsoWeek => 7 * TICKS_PER_DAY as i128,
                DatePart::Hour => 36_000_000_000,
                DatePart::Minute => 600_000_000,
                DatePart::Second => TICKS_PER_SECOND as i128,
                DatePart::Millisecond => 10_000,
                DatePart::Microsecond => 10,
                DatePart::Nanosecond => {
                    return Ok(
                        add_ticks(ticks, (n / 100) as i128, result_type).unwrap_or(Value::Null)
                    )
                }
                _ => TICKS_PER_DAY as i128,
            };
            Some(ticks as i128 + n as i128 * unit).and_then(|t| i64::try_from(t).ok())
        }
    }
    .ok_or_else(overflow)?;
    add_ticks(shifted, 0, result_type).ok_or_else(overflow)
}

/// Ticks plus an offset as a value of `t`, None when out of the type's range.
fn add_ticks(ticks: i64, delta: i128, t: SqlType) -> Option<Value> {
    let total = i64::try_from(ticks as i128 + delta).ok()?;
    if !(0..MAX_TICKS).contains(&total) {
        return None;
    }
    convert(&Value::DateTime2(total), t, None).ok()
}

/// Adds months, clamping the day to the end of the target month (Jan 31 + 1 month is
/// Feb 28/29), keeping the time of day.
fn add_months(ticks: i64, months: i64) -> Option<i64> {
    let p = date_parts(ticks);
    let index = p.year as i64 * 12 + p.month as i64 - 1 + months;
    let year = index.div_euclid(12);
    if !(1..=9999).contains(&year) {
        return None;
    }
    let month = (index.rem_euclid(12) + 1) as u32;
    let day = p.day.min(days_in_month(year as i32, month));
    let days = days_from_ymd(year as i32, month, day) as i64;
    Some(days * TICKS_PER_DAY + ticks.rem_euclid(TICKS_PER_DAY))
}

/// DATEPART's integer for a tick count.
pub fn datepart(part: DatePart, ticks: i64) -> i64 {
    let p = date_parts(ticks);
    let days = ticks.div_euclid(TICKS_PER_DAY);
    let frac = p.fraction as i64;
    match part {
        DatePart::Year => p.year as i64,
        DatePart::Quarter => (p.month as i64 - 1) / 3 + 1,
        DatePart::Month => p.month as i64,
        DatePart::DayOfYear => days - days_from_ymd(p.year, 1, 1) as i64 + 1,
        DatePart::Day => p.day as i64,
        DatePart::Week => {
            let jan1 = days_from_ymd(p.year, 1, 1) as i64;
            (days - jan1 + weekday(jan1) - 1) / 7 + 1
        }
        DatePart::Weekday => weekday(days),
        DatePart::Hour => p.hour as i64,
        DatePart::Minute => p.minute as i64,
        DatePart::Second => p.second as i64,
        DatePart::Millisecond => frac / 10_000,
        DatePart::Microsecond => frac / 10,
        DatePart::Nanosecond => frac * 100,
        DatePart::IsoWeek => iso_week(days),
    }
}

/// Day of the week with Sunday = 1 (DATEFIRST 7).
fn weekday(days: i64) -> i64 {
    (days + 1).rem_euclid(7) + 1
}

/// ISO 8601 week number: weeks start on Monday, week 1 holds the year's first Thursday.
fn iso_week(days: i64) -> i64 {
    let monday_based = days.rem_euclid(7); // 0 = Monday
    let thursday = days - monday_based + 3;
    let (year, _, _) = ymd_from_days(thursday as i32);
    let jan1 = days_from_ymd(year, 1, 1) as i64;
    (thursday - jan1) / 7 + 1
}

/// DATENAME: month and weekday names, numbers as text for the other parts.
fn datename(part: DatePart, ticks: i64) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
    ];
    let n = datepart(part, ticks);
    match part {
        DatePart::Month => MONTHS[(n as usize + 11) % 12].to_string(),
        DatePart::Weekday => DAYS[(n as usize + 6) % 7].to_string(),
        _ => n.to_string(),
    }
}

fn eomonth(args: &[Value]) -> Result<Value, SqlError> {
    let Some((ticks, _)) = date_arg(&args[0])? else {
        return Ok(Value::Null);
    };
    let months = match args.get(1) {
        None => 0,
        Some(v) => match convert(v, SqlType::BigInt, None)? {
            Value::BigInt(n) => n,
            _ => return Ok(Value::Null),
        },
    };
    let shifted = add_months(ticks, months).ok_or_else(|| msg(517, &[&"date"]))?;
    let p = date_parts(shifted);
    Ok(Value::Date(days_from_ymd(
        p.year,
        p.month,
        days_in_month(p.year, p.month),
    )))
}

/// A string argument (any value as CAST to varchar would print it), None for NULL.
fn text_arg(v: &Value) -> Result<Option<String>, SqlError> {
    if v.is_null() {
        return Ok(None);
    }
    text_of(v, type_of(v), None).map(Some)
}

/// An integer argument, None for NULL.
fn int_arg(v: &Value) -> Result<Option<i64>, SqlError> {
    match convert(v, SqlType::BigInt, None)? {
        Value::BigInt(n) => Ok(Some(n)),
        _ => Ok(None),
    }
}

/// Evaluates `f` on the text and integer arguments, NULL if any is NULL.
fn with_text_int(
    args: &[Value],
    f: impl Fn(String, i64) -> Result<Value, SqlError>,
) -> Result<Value, SqlError> {
    match (text_arg(&args[0])?, int_arg(&args[1])?) {
        (Some(s), Some(n)) => f(s, n),
        _ => Ok(Value::Null),
    }
}

fn string_function(name: &str, args: &[Value]) -> Result<Option<Value>, SqlError> {
    let one = |f: &dyn Fn(String) -> Value| -> Result<Value, SqlError> {
        arity(name, args, 1, 1)?;
        Ok(text_arg(&args[0])?.map_or(Value::Null, f))
    };
    let v = match name {
        "LEN" => one(&|s| Value::Int(s.trim_end_matches(' ').chars().count() as i32))?,
        "UPPER" => one(&|s| Value::Text(simple_case(&s, char::to_uppercase)))?,
        "LOWER" => one(&|s| Value::Text(simple_case(&s, char::to_lowercase)))?,
        "LTRIM" => one(&|s| Value::Text(s.trim_start_matches(' ').to_string()))?,
        "RTRIM" => one(&|s| Value::Text(s.trim_end_matches(' ').to_string()))?,
        "TRIM" => one(&|s| Value::Text(s.trim_matches(' ').to_string()))?,
        "REVERSE" => one(&|s| Value::Text(s.chars().rev().collect()))?,
        "DATALENGTH" => {
            arity(name, args, 1, 1)?;
            datalength(&args[0])
        }
        "LEFT" | "RIGHT" | "REPLICATE" => {
            arity(name, args, 2, 2)?;
            sized_string(name, args)?
        }
        "SPACE" => {
            arity(name, args, 1, 1)?;
            match int_arg(&args[0])? {
                Some(n) if n >= 0 => Value::Text(" ".repeat((n as usize).min(8000))),
                _ => Value::Null,
            }
        }
        "SUBSTRING" => {
            arity(name, args, 3, 3)?;
            substring(args)?
        }
        "REPLACE" => {
            arity(name, args, 3, 3)?;
            match (
                text_arg(&args[0])?,
                text_arg(&args[1])?,
                text_arg(&args[2])?,
            ) {
                (Some(s), Some(find), Some(with)) => Value::Text(replace_ci(&s, &find, &with)),
                _ => Value::Null,
            }
        }
        "CHARINDEX" => {
            arity(name, args, 2, 3)?;
            charindex(args)?
        }
        "CONCAT" => {
            arity(name, args, 2, 254)?;
            let mut out = String::new();
            for a in args {
                out.push_str(&text_arg(a)?.unwrap_or_default());
            }
            Value::Text(out)
        }
        _ => return Ok(None),
    };
    Ok(Some(v))
}

/// LEFT, RIGHT and REPLICATE: a string and a count.
fn sized_string(name: &str, args: &[Value]) -> Result<Value, SqlError> {
    with_text_int(args, |s, n| {
        if name == "REPLICATE" {
            // A negative count gives NULL; results stop at 8000 characters.
            let Ok(n) = usize::try_from(n) else {
                return Ok(Value::Null);
            };
            let total = n.saturating_mul(s.chars().count()).min(8000);
            return Ok(Value::Text(s.chars().cycle().take(total).collect()));
        }
        let n = usize::try_from(n).map_err(|_| msg(536, &[&name.to_ascii_lowercase()]))?;
        let len = s.chars().count();
        let skip = if name == "LEFT" {
            0
        } else {
            len.saturating_sub(n)
        };
        Ok(Value::Text(s.chars().skip(skip).take(n).collect()))
    })
}

/// Bytes a value takes: one per character for text (single-byte collation), the stored
/// size for fixed types.
fn datalength(v: &Value) -> Value {
    let n = match v {
        Value::Null => return Value::Null,
        Value::Text(s) => s.chars().count(),
        Value::Binary(b) => b.len(),
        Value::Bit(_) | Value::TinyInt(_) => 1,
        Value::SmallInt(_) => 2,
        Value::Int(_) | Value::Real(_) => 4,
        Value::BigInt(_) | Value::Float(_) | Value::DateTime(_) | Value::DateTime2(_) => 8,
        Value::Date(_) => 3,
        Value::Guid(_) => 16,
        Value::Decimal { .. } => match type_of(v) {
            SqlType::Decimal { precision, .. } => match precision {
                1..=9 => 5,
                10..=19 => 9,
                20..=28 => 13,
                _ => 17,
            },
            _ => 17,
        },
    };
    Value::Int(n as i32)
}

fn substring(args: &[Value]) -> Result<Value, SqlError> {
    let (Some(s), Some(start), Some(len)) =
        (text_arg(&args[0])?, int_arg(&args[1])?, int_arg(&args[2])?)
    else {
        return Ok(Value::Null);
    };
    if len < 0 {
        return Err(msg(536, &[&"substring"]));
    }
    // Characters from `start` (1-based, may be 0 or negative) for `len` positions.
    let end = start.saturating_add(len);
    let first = start.max(1);
    if end <= first {
        return Ok(Value::Text(String::new()));
    }
    let out = s
        .chars()
        .skip((first - 1) as usize)
        .take((end - first) as usize)
        .collect();
    Ok(Value::Text(out))
}

/// Case-insensitive REPLACE, as under the default CI collation.
fn replace_ci(s: &str, find: &str, with: &str) -> String {
    if find.is_empty() {
        return s.to_string();
    }
    let chars: Vec<char> = s.chars().collect();
    let pat: Vec<char> = find.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        if i + pat.len() <= chars.len() && eq_ci(&chars[i..i + pat.len()], &pat) {
            out.push_str(with);
            i += pat.len();
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// Character by character equality under the server collation's fold
/// (`format::collation::fold`).
fn eq_ci(a: &[char], b: &[char]) -> bool {
    use extentdb_format::collation::fold;
    a.iter()
        .zip(b)
        .all(|(x, y)| x == y || fold(*x).eq(fold(*y)))
}

fn charindex(args: &[Value]) -> Result<Value, SqlError> {
    let (Some(find), Some(s)) = (text_arg(&args[0])?, text_arg(&args[1])?) else {
        return Ok(Value::Null);
    };
    let start = match args.get(2) {
        Some(v) => match int_arg(v)? {
            Some(n) => n.max(1) as usize,
            None => return Ok(Value::Null),
        },
        None => 1,
    };
    let chars: Vec<char> = s.chars().collect();
    let pat: Vec<char> = find.chars().collect();
    if pat.is_empty() {
        return Ok(Value::Int(0));
    }
    let pos = (start - 1..chars.len().saturating_sub(pat.len()) + 1)
        .find(|&i| i + pat.len() <= chars.len() && eq_ci(&chars[i..i + pat.len()], &pat));
    Ok(Value::Int(pos.map_or(0, |p| p as i32 + 1)))
}

fn math_function(name: &str, args: &[Value]) -> Result<Option<Value>, SqlError> {
    let v = match name {
        "PI" => zero_args(name, args, Value::Float(std::f64::consts::PI))?,
        "ABS" | "CEILING" | "FLOOR" | "SIGN" => {
            arity(name, args, 1, 1)?;
            unary_math(name, &args[0])?
        }
        "SQRT" | "EXP" | "LOG" | "LOG10" | "SQUARE" => {
            arity(name, args, 1, 1)?;
            float_math(name, &args[0])?
        }
        "ROUND" => {
            arity(name, args, 2, 3)?;
            round(args)?
        }
        "POWER" => {
            arity(name, args, 2, 2)?;
            power(&args[0], &args[1])?
        }
        _ => return Ok(None),
    };
    Ok(Some(v))
}

/// A numeric argument with its type; strings are read as float, as SQL Server does for
/// math functions.
fn number_arg(v: &Value) -> Result<Option<(Num, SqlType)>, SqlError> {
    if v.is_null() {
        return Ok(None);
    }
    if let Some(n) = numeric_of(v) {
        return Ok(Some((n, type_of(v))));
    }
    let f = convert(v, SqlType::Float, None)?;
    Ok(numeric_of(&f).map(|n| (n, SqlType::Float)))
}

fn overflow(t: SqlType) -> SqlError {
    msg(8115, &[&"expression", &crate::convert::data_type_name(t)])
}

/// A number back into the argument's type (bit counts as int).
fn typed(n: Num, t: SqlType) -> Result<Value, SqlError> {
    match (n, t) {
        (Num::Int(i), SqlType::Bit) => {
            crate::convert::int_value(i, SqlType::Int).ok_or_else(|| overflow(SqlType::Int))
        }
        (Num::Int(i), t) => crate::convert::int_value(i, t).ok_or_else(|| overflow(t)),
        (Num::Dec(u, s), _) => Ok(Value::Decimal {
            unscaled: u,
            scale: s,
        }),
        (Num::Float(f), SqlType::Real) => Ok(Value::Real(f as f32)),
        (Num::Float(f), _) => Ok(Value::Float(f)),
    }
}

fn unary_math(name: &str, v: &Value) -> Result<Value, SqlError> {
    let Some((n, t)) = number_arg(v)? else {
        return Ok(Value::Null);
    };
    let result = match (name, n) {
        ("ABS", Num::Int(i)) => Num::Int(i.abs()),
        ("ABS", Num::Dec(u, s)) => Num::Dec(u.abs(), s),
        ("ABS", Num::Float(f)) => Num::Float(f.abs()),
        ("SIGN", Num::Int(i)) => Num::Int(i.signum()),
        ("SIGN", Num::Dec(u, s)) => Num::Dec(u.signum() * pow10(s as u32).unwrap_or(1), s),
        ("SIGN", Num::Float(f)) => Num::Float(if f == 0.0 { 0.0 } else { f.signum() }),
        (_, Num::Int(i)) => Num::Int(i),
        (_, Num::Float(f)) => Num::Float(if name == "CEILING" {
            f.ceil()
        } else {
            f.floor()
        }),
        (_, Num::Dec(u, s)) => {
            let d = pow10(s as u32).unwrap_or(1);
            let q = u.div_euclid(d);
            Num::Dec(
                if name == "CEILING" && u.rem_euclid(d) != 0 {
                    q + 1
                } else {
                    q
                },
                0,
            )
        }
    };
    typed(result, t)
}

fn float_math(name: &str, v: &Value) -> Result<Value, SqlError> {
    let Some((n, _)) = number_arg(v)? else {
        return Ok(Value::Null);
    };
    let x = crate::convert::num_to_f64(n);
    let r = match name {
        "SQRT" => x.sqrt(),
        "EXP" => x.exp(),
        "LOG" => x.ln(),
        "LOG10" => x.log10(),
        _ => x * x,
    };
    if r.is_nan() || (matches!(name, "LOG" | "LOG10") && x <= 0.0) {
        return Err(msg(3623, &[]));
    }
    if r.is_infinite() {
        return Err(overflow(SqlType::Float));
    }
    Ok(Value::Float(r))
}

/// ROUND(x, length[, function]): half away from zero (truncation when `function` is not
/// 0), keeping the argument's type and, for decimals, its scale.
fn round(args: &[Value]) -> Result<Value, SqlError> {
    let (Some((n, t)), Some(len)) = (number_arg(&args[0])?, int_arg(&args[1])?) else {
        return Ok(Value::Null);
    };
    let truncate = match args.get(2) {
        Some(v) => int_arg(v)?.unwrap_or(0) != 0,
        None => false,
    };
    let len = len.clamp(-38, 38);
    let result = match n {
        Num::Float(f) => {
            let m = 10f64.powi(len as i32);
            let scaled = f * m;
            Num::Float(if truncate {
                scaled.trunc() / m
            } else {
                scaled.round() / m
            })
        }
        Num::Int(i) => Num::Int(round_unscaled(i, 0, len, truncate).ok_or_else(|| overflow(t))?),
        Num::Dec(u, s) => {
            let r = round_unscaled(u, s, len, truncate).ok_or_else(|| overflow(t))?;
            if let Some((p, _)) = decimal_shape(t) {
                if !crate::convert::fits_precision(r, p) {
                    return Err(overflow(t));
                }
            }
            Num::Dec(r, s)
        }
    };
    typed(result, t)
}

/// Rounds an unscaled value at scale `s` to `len` decimals, keeping scale `s`.
fn round_unscaled(u: i128, s: u8, len: i64, truncate: bool) -> Option<i128> {
    if len >= s as i64 {
        return Some(u);
    }
    let drop = (s as i64 - len) as u32;
    let Some(d) = pow10(drop) else {
        // Rounding away more digits than i128 holds leaves nothing.
        return Some(0);
    };
    let kept = if truncate {
        u / d
    } else {
        rescale(u, drop as u8, 0)?
    };
    kept.checked_mul(d)
}

/// POWER(x, y) in the type of x: integers truncate, decimals keep their scale.
fn power(x: &Value, y: &Value) -> Result<Value, SqlError> {
    let (Some((n, t)), Some((e, _))) = (number_arg(x)?, number_arg(y)?) else {
        return Ok(Value::Null);
    };
    let r = crate::convert::num_to_f64(n).powf(crate::convert::num_to_f64(e));
    if r.is_nan() {
        return Err(msg(3623, &[]));
    }
    if r.is_infinite() {
        return Err(overflow(t));
    }
    let result = match n {
        Num::Int(_) => {
            if r.abs() >= 1e19 {
                return Err(overflow(t));
            }
            Num::Int(r.trunc() as i128)
        }
        Num::Dec(_, s) => {
            let scaled = (r * 10f64.powi(s as i32)).round();
            if scaled.abs() >= 1e38 {
                return Err(overflow(t));
            }
            Num::Dec(scaled as i128, s)
        }
        Num::Float(_) => Num::Float(r),
    };
    typed(result, t)
}

fn misc_function(name: &str, args: &[Value]) -> Result<Option<Value>, SqlError> {
    let v = match name {
        "ISNULL" => {
            arity(name, args, 2, 2)?;
            if args[0].is_null() {
                args[1].clone()
            } else {
                args[0].clone()
            }
        }
        "COALESCE" => {
            arity(name, args, 1, usize::MAX)?;
            args.iter()
                .find(|a| !a.is_null())
                .cloned()
                .unwrap_or(Value::Null)
        }
        "NULLIF" => {
            arity(name, args, 2, 2)?;
            match compare(&args[0], &args[1])? {
                Some(Ordering::Equal) => Value::Null,
                _ => args[0].clone(),
            }
        }
        "IIF" => {
            arity(name, args, 3, 3)?;
            let truth = match numeric_of(&args[0]) {
                Some(n) => crate::convert::num_to_f64(n) != 0.0,
                None => false,
            };
            if truth {
                args[1].clone()
            } else {
                args[2].clone()
            }
        }
        "NEWID" => zero_args(name, args, Value::Guid(new_guid()))?,
        _ => return Ok(None),
    };
    Ok(Some(v))
}

/// JSON_MODIFY over its arguments' values; `new_is_json` when argument 3 is JSON text (a
/// direct JSON_QUERY or JSON_MODIFY call, which only the expression shows: exec/eval.rs).
pub fn json_modify(args: &[Value], new_is_json: bool) -> Result<Value, SqlError> {
    arity("JSON_MODIFY", args, 3, 3)?;
    let new = crate::json::NewValue::of(&args[2], new_is_json)?;
    crate::json::json_modify(&args[0], &args[1], &new)
}

/// ISJSON, JSON_VALUE, JSON_QUERY and JSON_MODIFY (json.rs).
fn json_function(name: &str, args: &[Value]) -> Result<Option<Value>, SqlError> {
    Ok(Some(match name {
        "ISJSON" => {
            arity(name, args, 1, 1)?;
            crate::json::isjson(&args[0])?
        }
        "JSON_VALUE" => {
            arity(name, args, 2, 2)?;
            crate::json::json_value(args)?
        }
        "JSON_QUERY" => {
            arity(name, args, 1, 2)?;
            crate::json::json_query(args)?
        }
        // A bare value carries no JSON mark: exec/eval.rs calls `json_modify` itself.
        "JSON_MODIFY" => json_modify(args, false)?,
        _ => return Ok(None),
    }))
}

/// A random version-4 GUID (storage byte order), from /dev/urandom with a time-seeded
/// fallback.
pub fn new_guid() -> [u8; 16] {
    use std::io::Read;
    let mut g = [0u8; 16];
    let filled = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut g))
        .is_ok();
    if !filled {
        let mut seed = SystemClock.now_ticks_utc() as u64 ^ (std::process::id() as u64) << 32;
        for b in g.iter_mut() {
            // xorshift64: enough to make fallback GUIDs distinct.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            *b = seed as u8;
        }
    }
    // Text form group 3 starts with '4' (byte 7 in storage order), variant 10xx in byte 8.
    g[7] = (g[7] & 0x0F) | 0x40;
    g[8] = (g[8] & 0x3F) | 0x80;
    g
}

/// The result type of a scalar function for result-set metadata, None for unknown names.
pub fn scalar_result_type(name: &str, arg_types: &[SqlType]) -> Option<SqlType> {
    let first = arg_types.first().copied();
    let text_len = |t: Option<SqlType>| match t {
        Some(SqlType::NChar(n) | SqlType::NVarChar(n)) => SqlType::NVarChar(n),
        Some(SqlType::Char(n) | SqlType::VarChar(n)) => SqlType::VarChar(n),
        _ => SqlType::VarChar(8000),
    };
    Some(match name.to_ascii_uppercase().as_str() {
        "SYSDATETIME" | "SYSUTCDATETIME" => SqlType::DateTime2(7),
        "GETDATE" | "CURRENT_TIMESTAMP" | "GETUTCDATE" => SqlType::DateTime,
        "DATEDIFF" | "DATEPART" | "YEAR" | "MONTH" | "DAY" | "LEN" | "DATALENGTH" | "CHARINDEX" => {
            SqlType::Int
        }
        "DATEDIFF_BIG" => SqlType::BigInt,
        "DATEADD" => match arg_types.get(2) {
            Some(t @ (SqlType::Date | SqlType::DateTime | SqlType::DateTime2(_))) => *t,
            _ => SqlType::DateTime,
        },
        "DATENAME" => SqlType::NVarChar(30),
        "EOMONTH" => SqlType::Date,
        "REPLICATE" => match first {
            Some(SqlType::NChar(_) | SqlType::NVarChar(_)) => SqlType::NVarChar(4000),
            Some(SqlType::VarChar(MAX_LENGTH)) => SqlType::VarChar(MAX_LENGTH),
            _ => SqlType::VarChar(8000),
        },
        "SPACE" => SqlType::VarChar(8000),
        "LEFT" | "RIGHT" | "SUBSTRING" | "UPPER" | "LOWER" | "LTRIM" | "RTRIM" | "TRIM"
        | "REVERSE" => text_len(first),
        "REPLACE" => match first {
            Some(SqlType::NChar(_) | SqlType::NVarChar(_)) => SqlType::NVarChar(4000),
            _ => SqlType::VarChar(8000),
        },
        "CONCAT" => {
            if arg_types
                .iter()
                .any(|t| matches!(t, SqlType::NChar(_) | SqlType::NVarChar(_)))
            {
                SqlType::NVarChar(4000)
            } else {
                SqlType::VarChar(8000)
            }
        }
        "ISNULL" | "ABS" | "SIGN" | "NULLIF" => first.unwrap_or(SqlType::Int),
        "CEILING" | "FLOOR" => match first {
            Some(SqlType::Decimal { precision, .. }) => SqlType::Decimal {
                precision,
                scale: 0,
            },
            Some(t) => t,
            None => SqlType::Int,
        },
        "ROUND" | "POWER" => first.unwrap_or(SqlType::Float),
        "COALESCE" | "IIF" => {
            let candidates = if name.eq_ignore_ascii_case("IIF") {
                &arg_types[1.min(arg_types.len())..]
            } else {
                arg_types
            };
            candidates
                .iter()
                .copied()
                .max_by_key(|t| crate::convert::precedence(*t))
                .unwrap_or(SqlType::Int)
        }
        "SQRT" | "EXP" | "LOG" | "LOG10" | "SQUARE" | "PI" => SqlType::Float,
        "NEWID" => SqlType::UniqueIdentifier,
        "ISJSON" => SqlType::Int,
        "JSON_VALUE" => SqlType::NVarChar(crate::json::JSON_VALUE_LENGTH as u32),
        "JSON_QUERY" | "JSON_MODIFY" => SqlType::NVarChar(MAX_LENGTH),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct FixedClock;

    impl Clock for FixedClock {
        fn now_ticks_local(&self) -> i64 {
            days_from_ymd(2016, 10, 4) as i64 * TICKS_PER_DAY + 419_138_301_234
        }
        fn now_ticks_utc(&self) -> i64 {
            self.now_ticks_local() - 2 * 36_000_000_000
        }
    }

    fn call(name: &str, args: &[Value]) -> Result<Value, SqlError> {
        Ok(call_scalar(name, args, &FixedClock)?.expect("known function"))
    }

    fn t(s: &str) -> Value {
        Value::Text(s.into())
    }

    #[test]
    fn datediff_counts_boundaries() {
        assert_eq!(
            call("DATEDIFF", &[t("year"), t("2016-12-31"), t("2017-01-01")]).unwrap(),
            Value::Int(1)
        );
        assert_eq!(
            call("DATEDIFF", &[t("yy"), t("2016-01-01"), t("2016-12-31")]).unwrap(),
            Value::Int(0)
        );
        assert_eq!(
            call(
                "datediff",
                &[
                    t("MILLISECOND"),
                    t("2016-10-04 11:38:33.100"),
                    t("2016-10-04 11:38:34.250")
                ]
            )
            .unwrap(),
            Value::Int(1150)
        );
        assert_eq!(
            call(
                "DATEDIFF",
                &[t("day"), t("2016-10-04 23:59"), t("2016-10-05 00:01")]
            )
            .unwrap(),
            Value::Int(1)
        );
        assert_eq!(
            call("DATEDIFF", &[t("month"), t("2016-01-31"), t("2016-02-01")]).unwrap(),
            Value::Int(1)
        );
        assert_eq!(
            call(
                "DATEDIFF",
                &[t("quarter"), t("2016-03-31"), t("2016-04-01")]
            )
            .unwrap(),
            Value::Int(1)
        );
        // 2016-10-08 is a Saturday, 2016-10-09 a Sunday: one week boundary.
        assert_eq!(
            call("DATEDIFF", &[t("wk"), t("2016-10-08"), t("2016-10-09")]).unwrap(),
            Value::Int(1)
        );
        assert_eq!(
            call("DATEDIFF", &[t("wk"), t("2016-10-09"), t("2016-10-15")]).unwrap(),
            Value::Int(0)
        );
    }

    #[test]
    fn datediff_edges_and_errors() {
        assert_eq!(
            call(
                "DATEDIFF",
                &[t("second"), t("2017-01-01"), t("2016-12-31 23:59:59")]
            )
            .unwrap(),
            Value::Int(-1)
        );
        let e = call("DATEDIFF", &[t("ns"), t("2000-01-01"), t("2016-01-01")]).unwrap_err();
        assert_eq!(e.number, 535);
        assert_eq!(
            call("DATEDIFF_BIG", &[t("ns"), t("2016-01-01"), t("2016-01-02")]).unwrap(),
            Value::BigInt(86_400_000_000_000)
        );
        assert_eq!(
            call("DATEDIFF", &[t("day"), Value::Null, t("2016-01-01")]).unwrap(),
            Value::Null
        );
        assert_eq!(
            call("DATEDIFF", &[t("day"), Value::Int(0), t("1900-01-11")]).unwrap(),
            Value::Int(10)
        );
        assert_eq!(
            call(
                "DATEDIFF",
                &[t("fortnight"), t("2016-01-01"), t("2016-01-02")]
            )
            .unwrap_err()
            .number,
            155
        );
        assert_eq!(
            call("DATEDIFF", &[t("day"), t("2016-01-01")])
                .unwrap_err()
                .text,
            "The datediff function requires 3 argument(s)."
        );
    }

    #[test]
    fn dateadd_and_parts() {
        let d = convert(&t("2016-01-31"), SqlType::Date, None).unwrap();
        let feb = call("DATEADD", &[t("month"), Value::Int(1), d]).unwrap();
        assert_eq!(feb, convert(&t("2016-02-29"), SqlType::Date, None).unwrap());
        let dt = convert(&t("2016-10-04 11:38:33.830"), SqlType::DateTime, None).unwrap();
        let later = call("DATEADD", &[t("ms"), Value::Int(2), dt.clone()]).unwrap();
        assert_eq!(
            convert(&later, SqlType::VarChar(30), Some(121)).unwrap(),
            t("2016-10-04 11:38:33.833")
        );
        let e = call("DATEADD", &[t("year"), Value::Int(9000), dt.clone()]).unwrap_err();
        assert_eq!(
            e.text,
            "Adding a value to a 'datetime' column caused an overflow."
        );
        assert_eq!(
            call("DATEPART", &[t("dw"), dt.clone()]).unwrap(),
            Value::Int(3)
        ); // Tuesday
        assert_eq!(
            call("DATEPART", &[t("dy"), dt.clone()]).unwrap(),
            Value::Int(278)
        );
        assert_eq!(
            call("DATEPART", &[t("wk"), dt.clone()]).unwrap(),
            Value::Int(41)
        );
        assert_eq!(
            call("DATEPART", &[t("iso_week"), dt.clone()]).unwrap(),
            Value::Int(40)
        );
        assert_eq!(
            call("DATEPART", &[t("ms"), dt.clone()]).unwrap(),
            Value::Int(830)
        );
        assert_eq!(
            call("YEAR", std::slice::from_ref(&dt)).unwrap(),
            Value::Int(2016)
        );
        assert_eq!(
            call("DATENAME", &[t("month"), dt.clone()]).unwrap(),
            t("October")
        );
        assert_eq!(
            call("EOMONTH", &[t("2016-02-10")]).unwrap(),
            convert(&t("2016-02-29"), SqlType::Date, None).unwrap()
        );
    }

    #[test]
    fn clock_functions() {
        let now = FixedClock.now_ticks_local();
        assert_eq!(call("SYSDATETIME", &[]).unwrap(), Value::DateTime2(now));
        assert_eq!(
            call("GETDATE", &[]).unwrap(),
            Value::DateTime(round_datetime(now))
        );
        assert_eq!(
            call("GETUTCDATE", &[]).unwrap(),
            Value::DateTime(round_datetime(FixedClock.now_ticks_utc()))
        );
        let real = SystemClock.now_ticks_utc();
        assert!(real > days_from_ymd(2020, 1, 1) as i64 * TICKS_PER_DAY);
        assert!((SystemClock.now_ticks_local() - real).abs() <= 15 * 36_000_000_000);
    }

    #[test]
    fn string_functions() {
        assert_eq!(call("LEN", &[t("abc  ")]).unwrap(), Value::Int(3));
        assert_eq!(call("DATALENGTH", &[t("abc  ")]).unwrap(), Value::Int(5));
        assert_eq!(
            call("REPLICATE", &[t("ab"), Value::Int(3)]).unwrap(),
            t("ababab")
        );
        assert_eq!(call("LEFT", &[t("hello"), Value::Int(2)]).unwrap(), t("he"));
        assert_eq!(
            call("RIGHT", &[t("hello"), Value::Int(2)]).unwrap(),
            t("lo")
        );
        assert_eq!(
            call("LEFT", &[t("hello"), Value::Int(-1)])
                .unwrap_err()
                .text,
            "Invalid length parameter passed to the left function."
        );
        assert_eq!(
            call("SUBSTRING", &[t("hello"), Value::Int(2), Value::Int(3)]).unwrap(),
            t("ell")
        );
        assert_eq!(
            call("SUBSTRING", &[t("hello"), Value::Int(0), Value::Int(2)]).unwrap(),
            t("h")
        );
        assert_eq!(
            call("SUBSTRING", &[t("hello"), Value::Int(1), Value::Int(-1)])
                .unwrap_err()
                .number,
            536
        );
        assert_eq!(
            call("REPLACE", &[t("ABCabc"), t("b"), t("x")]).unwrap(),
            t("AxCaxc")
        );
        assert_eq!(
            call("CHARINDEX", &[t("C"), t("abcabc")]).unwrap(),
            Value::Int(3)
        );
        assert_eq!(
            call("CHARINDEX", &[t("c"), t("abcabc"), Value::Int(4)]).unwrap(),
            Value::Int(6)
        );
        assert_eq!(
            call("CHARINDEX", &[t("z"), t("abc")]).unwrap(),
            Value::Int(0)
        );
        assert_eq!(
            call("CONCAT", &[t("a"), Value::Null, Value::Int(1)]).unwrap(),
            t("a1")
        );
        assert_eq!(call("UPPER", &[t("aé")]).unwrap(), t("AÉ"));
        // Character by character, never changing the length: ß stays, no final sigma.
        assert_eq!(call("UPPER", &[t("straße ŉ")]).unwrap(), t("STRAßE ŉ"));
        assert_eq!(call("LOWER", &[t("ΣΑΣ")]).unwrap(), t("σασ"));
        assert_eq!(call("LTRIM", &[t("  a ")]).unwrap(), t("a "));
        assert_eq!(call("TRIM", &[t("  a ")]).unwrap(), t("a"));
        assert_eq!(call("REVERSE", &[t("abc")]).unwrap(), t("cba"));
        assert_eq!(call("SPACE", &[Value::Int(3)]).unwrap(), t("   "));
        assert_eq!(call("LEN", &[Value::Null]).unwrap(), Value::Null);
        assert!(call_scalar("NO_SUCH_FUNCTION", &[], &FixedClock)
            .unwrap()
            .is_none());
    }

    #[test]
    fn math_and_null_functions() {
        let dec = |u, s| Value::Decimal {
            unscaled: u,
            scale: s,
        };
        assert_eq!(call("ABS", &[Value::Int(-3)]).unwrap(), Value::Int(3));
        assert_eq!(
            call("ABS", &[Value::Int(i32::MIN)]).unwrap_err().number,
            8115
        );
        assert_eq!(call("CEILING", &[dec(-15, 1)]).unwrap(), dec(-1, 0));
        assert_eq!(call("FLOOR", &[dec(-15, 1)]).unwrap(), dec(-2, 0));
        assert_eq!(
            call("ROUND", &[dec(123_456, 3), Value::Int(2)]).unwrap(),
            dec(123_460, 3)
        );
        assert_eq!(
            call("ROUND", &[dec(123_456, 3), Value::Int(2), Value::Int(1)]).unwrap(),
            dec(123_450, 3)
        );
        assert_eq!(
            call("ROUND", &[Value::Int(1250), Value::Int(-2)]).unwrap(),
            Value::Int(1300)
        );
        assert_eq!(
            call("ROUND", &[Value::Float(2.5), Value::Int(0)]).unwrap(),
            Value::Float(3.0)
        );
        assert_eq!(
            call("POWER", &[Value::Int(2), Value::Int(10)]).unwrap(),
            Value::Int(1024)
        );
        assert_eq!(
            call("POWER", &[Value::Int(2), Value::Int(40)])
                .unwrap_err()
                .number,
            8115
        );
        assert_eq!(call("SQRT", &[Value::Int(16)]).unwrap(), Value::Float(4.0));
        assert_eq!(call("SQRT", &[Value::Int(-1)]).unwrap_err().number, 3623);
        assert_eq!(call("SIGN", &[Value::Int(-9)]).unwrap(), Value::Int(-1));
        assert_eq!(
            call("ISNULL", &[Value::Null, Value::Int(2)]).unwrap(),
            Value::Int(2)
        );
        assert_eq!(
            call("COALESCE", &[Value::Null, Value::Null, t("x")]).unwrap(),
            t("x")
        );
        assert_eq!(call("NULLIF", &[t("a"), t("A")]).unwrap(), Value::Null);
        assert_eq!(
            call("NULLIF", &[Value::Int(1), Value::Int(2)]).unwrap(),
            Value::Int(1)
        );
        assert_eq!(
            call("IIF", &[Value::Bit(true), Value::Int(1), Value::Int(2)]).unwrap(),
            Value::Int(1)
        );
        let Value::Guid(a) = call("NEWID", &[]).unwrap() else {
            panic!()
        };
        let Value::Guid(b) = call("NEWID", &[]).unwrap() else {
            panic!()
        };
        assert_ne!(a, b);
        assert_eq!(crate::convert::guid_string(&a).as_bytes()[14], b'4');
    }

    #[test]
    fn result_types() {
        assert_eq!(scalar_result_type("datediff", &[]), Some(SqlType::Int));
        assert_eq!(
            scalar_result_type("SYSDATETIME", &[]),
            Some(SqlType::DateTime2(7))
        );
        assert_eq!(
            scalar_result_type("LEN", &[SqlType::VarChar(5)]),
            Some(SqlType::Int)
        );
        assert_eq!(
            scalar_result_type("REPLICATE", &[SqlType::VarChar(1), SqlType::Int]),
            Some(SqlType::VarChar(8000))
        );
        assert_eq!(
            scalar_result_type("LEFT", &[SqlType::NVarChar(128), SqlType::Int]),
            Some(SqlType::NVarChar(128))
        );
        assert_eq!(scalar_result_type("nope", &[]), None);
    }
}
