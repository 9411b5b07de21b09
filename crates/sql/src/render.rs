//! Output as sqlcmd prints it with its defaults (no `-W`, `-s " "`, `-y 256`): result
//! sets in fixed-width columns, row counts, errors as `Msg n, Level l, State s, Line n`
//! and informational messages as bare text.
//!
//! Column width is the larger of the column name's length and the ODBC display size of the
//! column's type, as sqlcmd computes it; every column, the last included, is padded to its
//! width, so lines carry the trailing spaces sqlcmd writes. Numbers are right-aligned,
//! everything else left-aligned; values longer than the width are cut, as sqlcmd cuts
//! `MAX` types at 256 characters.
//!
//! This module only formats; it does not decide whether a row count is shown (SET
//! NOCOUNT is the executor's) and never appends one to a result set.

use crate::convert::{date_parts, decimal_string, guid_string, hex_upper, rescale};
use crate::messages::SqlError;
use crate::types::{SqlType, Value, MAX_LENGTH, TICKS_PER_DAY};

/// sqlcmd's `-y` default: the display width of `varchar(max)`, `nvarchar(max)` and
/// `varbinary(max)` columns.
pub const MAX_TYPE_DISPLAY_WIDTH: usize = 256;

/// Renders a result set: header line, dash line, one line per row, then the empty line
/// sqlcmd writes after every result set. Each line ends with `\n`.
pub fn render_result_set(columns: &[(String, SqlType)], rows: &[Vec<Value>]) -> String {
    let mut out = render_header(columns);
    for row in rows {
        out.push_str(&render_row(columns, row));
    }
    out.push('\n');
    out
}

/// The widths sqlcmd gives columns: from the name and the type, never from the data (so
/// a result set renders row by row as it streams).
fn column_widths(columns: &[(String, SqlType)]) -> impl Iterator<Item = usize> + '_ {
    columns
        .iter()
        .map(|(name, t)| name.chars().count().max(display_width(*t)))
}

/// A result set's header line and dash line.
pub fn render_header(columns: &[(String, SqlType)]) -> String {
    let mut out = String::new();
    let header: Vec<String> = columns
        .iter()
        .zip(column_widths(columns))
        .map(|((name, _), w)| pad(name, w, false))
        .collect();
    out.push_str(&header.join(" "));
    out.push('\n');
    let dashes: Vec<String> = column_widths(columns).map(|w| "-".repeat(w)).collect();
    out.push_str(&dashes.join(" "));
    out.push('\n');
    out
}

/// One row's line.
pub fn render_row(columns: &[(String, SqlType)], row: &[Value]) -> String {
    let cells: Vec<String> = columns
        .iter()
        .zip(column_widths(columns))
        .enumerate()
        .map(|(i, ((_, t), w))| {
            let v = row.get(i).unwrap_or(&Value::Null);
            let text = format_value(v, *t);
            pad(&text, w, is_right_aligned(*t) && !v.is_null())
        })
        .collect();
    let mut line = cells.join(" ");
    line.push('\n');
    line
}

/// `(1 row affected)` / `(N rows affected)`, SQL Server 2016+ wording.
pub fn rows_affected(n: u64) -> String {
    if n == 1 {
        "(1 row affected)".to_string()
    } else {
        format!("({n} rows affected)")
    }
}

/// An error as sqlcmd prints it: `Msg 5170, Level 16, State 1, Line 1` and the text on
/// the next line. Messages of severity 10 or less print as their text alone.
pub fn render_error(e: &SqlError) -> String {
    render_error_from(e, None)
}

/// An error as sqlcmd prints it from a server: `Msg 208, Level 16, State 1, Server
/// HOST, Line 1` and the text on the next line.
pub fn render_error_at(e: &SqlError, server: &str) -> String {
    render_error_from(e, Some(server))
}

fn render_error_from(e: &SqlError, server: Option<&str>) -> String {
    if e.severity <= 10 {
        return render_info(&e.text);
    }
    let procedure = match &e.procedure {
        Some(p) => format!("Procedure {p}, "),
        None => String::new(),
    };
    let server = match server {
        Some(s) => format!("Server {s}, "),
        None => String::new(),
    };
    format!(
        "Msg {}, Level {}, State {}, {server}{procedure}Line {}\n{}\n",
        e.number, e.severity, e.state, e.line, e.text
    )
}

/// An informational message or PRINT output: the text and a newline.
pub fn render_info(text: &str) -> String {
    format!("{text}\n")
}

/// The ODBC display size sqlcmd sizes a column of type `t` by.
pub fn display_width(t: SqlType) -> usize {
    let var = |n: u32, per: usize, extra: usize| {
        if n == MAX_LENGTH {
            MAX_TYPE_DISPLAY_WIDTH
        } else {
            (n as usize).saturating_mul(per).saturating_add(extra)
        }
    };
    match t {
        SqlType::Bit => 1,
        SqlType::TinyInt => 3,
        SqlType::SmallInt => 6,
        SqlType::Int => 11,
        SqlType::BigInt => 20,
        SqlType::Real => 14,
        SqlType::Float => 24,
        SqlType::Decimal { precision, .. } => precision as usize + 2,
        SqlType::Char(n) | SqlType::VarChar(n) | SqlType::NChar(n) | SqlType::NVarChar(n) => {
            var(n, 1, 0)
        }
        SqlType::Binary(n) | SqlType::VarBinary(n) => var(n, 2, 2),
        SqlType::Date => 10,
        SqlType::DateTime => 23,
        SqlType::DateTime2(0) => 19,
        SqlType::DateTime2(s) => 20 + s.min(7) as usize,
        SqlType::UniqueIdentifier => 36,
    }
}

/// True for the numeric types, which sqlcmd right-aligns.
fn is_right_aligned(t: SqlType) -> bool {
    t.is_numeric()
}

/// Pads (or cuts) text to exactly `width` characters.
fn pad(text: &str, width: usize, right: bool) -> String {
    let len = text.chars().count();
    if len >= width {
        return text.chars().take(width).collect();
    }
    let fill = " ".repeat(width - len);
    if right {
        format!("{fill}{text}")
    } else {
        format!("{text}{fill}")
    }
}

/// The text sqlcmd shows for a value of column type `t`: `NULL`, `2016-10-04
/// 11:38:33.830` (datetime), `2016-10-04 11:38:33.8300000` (datetime2(7)), `123.45`
/// (decimal at the column's scale), `0x0A1B`, upper-case GUIDs, shortest round-trip floats.
pub fn format_value(v: &Value, t: SqlType) -> String {
    match v {
        Value::Null => "NULL".to_string(),
        Value::Text(s) => s.clone(),
        Value::Bit(b) => if *b { "1" } else { "0" }.to_string(),
        Value::TinyInt(x) => x.to_string(),
        Value::SmallInt(x) => x.to_string(),
        Value::Int(x) => x.to_string(),
        Value::BigInt(x) => x.to_string(),
        Value::Decimal { unscaled, scale } => match t {
            SqlType::Decimal { scale: col, .. } if col != *scale => {
                match rescale(*unscaled, *scale, col) {
                    Some(u) => decimal_string(u, col),
                    None => decimal_string(*unscaled, *scale),
                }
            }
            _ => decimal_string(*unscaled, *scale),
        },
        Value::Float(f) => float_text(*f),
        Value::Real(f) => float_text_f32(*f),
        Value::Binary(b) => format!("0x{}", hex_upper(b)),
        Value::Guid(g) => guid_string(g),
        Value::Date(d) => date_text(*d as i64 * TICKS_PER_DAY, t, None),
        Value::DateTime(ticks) => date_text(*ticks, t, Some(3)),
        Value::DateTime2(ticks) => date_text(*ticks, t, Some(7)),
    }
}

/// A date/time at the column type's precision: date only for `date`, milliseconds for
/// `datetime`, the scale's digits for `datetime2(s)`; `natural` is the value's own when
/// the column type is not a date type.
fn date_text(ticks: i64, t: SqlType, natural: Option<u8>) -> String {
    let p = date_parts(ticks);
    let date = format!("{:04}-{:02}-{:02}", p.year, p.month, p.day);
    let digits = match t {
        SqlType::Date => return date,
        SqlType::DateTime => Some(3),
        SqlType::DateTime2(s) => Some(s.min(7)),
        _ => natural,
    };
    let Some(digits) = digits else { return date };
    let hms = format!("{:02}:{:02}:{:02}", p.hour, p.minute, p.second);
    match digits {
        0 => format!("{date} {hms}"),
        3 => {
            let ms = ((p.fraction + 5_000) / 10_000).min(999);
            format!("{date} {hms}.{ms:03}")
        }
        s => {
            let all = format!("{:07}", p.fraction);
            format!("{date} {hms}.{}", &all[..s as usize])
        }
    }
}

/// Shortest round-trip text of a float (`1.5`, `0.1`), switching to `1.0E+21`-style
/// exponents for very large or very small magnitudes.
pub fn float_text(f: f64) -> String {
    if f != 0.0 && f.is_finite() && !(1e-4..1e15).contains(&f.abs()) {
        exponent_text(&format!("{f:e}"))
    } else {
        format!("{f}")
    }
}

fn float_text_f32(f: f32) -> String {
    if f != 0.0 && f.is_finite() && !(1e-4..1e15).contains(&f.abs()) {
        exponent_text(&format!("{f:e}"))
    } else {
        format!("{f}")
    }
}

/// Rust's `1.5e21` as `1.5E+21` (a mantissa without a point gets `.0`).
fn exponent_text(s: &str) -> String {
    let (mantissa, exp) = s.split_once('e').unwrap_or((s, "0"));
    let mantissa = if mantissa.contains('.') {
        mantissa.to_string()
    } else {
        format!("{mantissa}.0")
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    format!(
        "{mantissa}E{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.abs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::days_from_ymd;
    use crate::messages::msg;
    use crate::types::TICKS_PER_SECOND;

    fn ticks(y: i32, m: u32, d: u32, h: i64, mi: i64, s: i64) -> i64 {
        days_from_ymd(y, m, d) as i64 * TICKS_PER_DAY + (h * 3600 + mi * 60 + s) * TICKS_PER_SECOND
    }

    #[test]
    fn golden_result_set() {
        let columns = vec![
            ("id".to_string(), SqlType::Int),
            ("name".to_string(), SqlType::NVarChar(10)),
            ("created".to_string(), SqlType::DateTime2(7)),
        ];
        let rows = vec![
            vec![
                Value::Int(1),
                Value::Text("master".into()),
                Value::DateTime2(ticks(2016, 10, 4, 11, 38, 33) + 8_300_000),
            ],
            vec![Value::Int(-20), Value::Null, Value::Null],
        ];
        let expected = concat!(
            "id          name       created                    \n",
            "----------- ---------- ---------------------------\n",
            "          1 master     2016-10-04 11:38:33.8300000\n",
            "        -20 NULL       NULL                       \n",
            "\n",
        );
        assert_eq!(render_result_set(&columns, &rows), expected);
    }

    #[test]
    fn sysname_column_is_128_wide() {
        let columns = vec![
            ("name".to_string(), SqlType::NVarChar(128)),
            (String::new(), SqlType::Int),
        ];
        let out = render_result_set(
            &columns,
            &[vec![Value::Text("tempdb".into()), Value::Int(2)]],
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], format!("{:128} {:11}", "name", ""));
        assert_eq!(lines[1], format!("{} {}", "-".repeat(128), "-".repeat(11)));
        assert_eq!(lines[2], format!("{:128} {:>11}", "tempdb", "2"));
    }

    #[test]
    fn value_text() {
        let dt = ticks(2016, 10, 4, 11, 38, 33) + 8_300_000;
        assert_eq!(
            format_value(&Value::DateTime(dt), SqlType::DateTime),
            "2016-10-04 11:38:33.830"
        );
        assert_eq!(
            format_value(&Value::DateTime2(dt), SqlType::DateTime2(7)),
            "2016-10-04 11:38:33.8300000"
        );
        assert_eq!(
            format_value(&Value::DateTime2(dt), SqlType::DateTime2(0)),
            "2016-10-04 11:38:33"
        );
        assert_eq!(
            format_value(&Value::Date(days_from_ymd(2016, 10, 4)), SqlType::Date),
            "2016-10-04"
        );
        assert_eq!(format_value(&Value::Bit(true), SqlType::Bit), "1");
        assert_eq!(
            format_value(
                &Value::Decimal {
                    unscaled: 12345,
                    scale: 2
                },
                SqlType::Decimal {
                    precision: 5,
                    scale: 2
                }
            ),
            "123.45"
        );
        assert_eq!(
            format_value(
                &Value::Decimal {
                    unscaled: 5,
                    scale: 0
                },
                SqlType::Decimal {
                    precision: 5,
                    scale: 2
                }
            ),
            "5.00"
        );
        assert_eq!(format_value(&Value::Float(1.5), SqlType::Float), "1.5");
        assert_eq!(format_value(&Value::Float(0.1), SqlType::Float), "0.1");
        assert_eq!(format_value(&Value::Float(1e21), SqlType::Float), "1.0E+21");
        assert_eq!(
            format_value(&Value::Binary(vec![0x0A, 0x1B]), SqlType::VarBinary(2)),
            "0x0A1B"
        );
        assert_eq!(format_value(&Value::Null, SqlType::Int), "NULL");
    }

    #[test]
    fn widths_follow_display_sizes() {
        assert_eq!(
            display_width(SqlType::Decimal {
                precision: 18,
                scale: 2
            }),
            20
        );
        assert_eq!(display_width(SqlType::Binary(4)), 10);
        assert_eq!(display_width(SqlType::VarChar(MAX_LENGTH)), 256);
        assert_eq!(display_width(SqlType::DateTime2(3)), 23);
        assert_eq!(display_width(SqlType::UniqueIdentifier), 36);
    }

    #[test]
    fn long_max_values_are_cut() {
        let columns = vec![("v".to_string(), SqlType::VarChar(MAX_LENGTH))];
        let out = render_result_set(&columns, &[vec![Value::Text("x".repeat(300))]]);
        assert_eq!(out.lines().nth(2).unwrap().len(), 256);
    }

    #[test]
    fn counts_and_messages() {
        assert_eq!(rows_affected(1), "(1 row affected)");
        assert_eq!(rows_affected(0), "(0 rows affected)");
        assert_eq!(rows_affected(12), "(12 rows affected)");
        let e = msg(5170, &[&"/d/x.mdf"]).with_line(1);
        assert_eq!(
            render_error(&e),
            "Msg 5170, Level 16, State 1, Line 1\nCannot create file '/d/x.mdf' because it already exists. Change the file path or the file name, and retry the operation.\n"
        );
        let mut p = msg(2812, &[&"x"]).with_line(3);
        p.procedure = Some("outer_proc".into());
        assert!(render_error(&p)
            .starts_with("Msg 2812, Level 16, State 62, Procedure outer_proc, Line 3\n"));
        assert_eq!(
            render_error(&msg(5701, &[&"db1"])),
            "Changed database context to 'db1'.\n"
        );
        assert_eq!(render_info("hello"), "hello\n");
    }
}
