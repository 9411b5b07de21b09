//! SET options other than the locking ones (locking.rs): every option SQL Server has is
//! built here, fixed, or refused, and none is accepted and ignored.
//!
//! - **Built**: NOCOUNT, IMPLICIT_TRANSACTIONS, STATISTICS IO, STATISTICS TIME
//!   (`statistics_time.rs`), SHOWPLAN_TEXT and SHOWPLAN_ALL (`showplan.rs`; one excludes
//!   the other, `Showplan`), XACT_ABORT, TEXTSIZE,
//!   ROWCOUNT (`SessionOptions::rowcount`, applied by `Session::rowcount_cap`),
//!   ANSI_DEFAULTS (its IMPLICIT_TRANSACTIONS part; the other options it sets are fixed ON
//!   here), CURSOR_CLOSE_ON_COMMIT (kept; no cursor exists yet for it to close).
//! - **Fixed**: the engine always behaves as one value of the option says (ANSI_NULLS ON:
//!   `NULL = NULL` is unknown; QUOTED_IDENTIFIER ON: `"x"` names a column; ...). That value
//!   is accepted, since clients send it when they connect, and any other is refused with
//!   Msg 40517, so a script that needs the other behaviour stops instead of running wrong.
//! - **Not built** (SHOWPLAN_XML, STATISTICS XML / PROFILE, FMTONLY, NOEXEC,
//!   PARSEONLY, CONTEXT_INFO, ...): only their "off" value is accepted.
//!
//! Invariants:
//! 1. A SET naming several options changes nothing unless every one is accepted.
//! 2. An option no table here names is refused with Msg 195 (not a recognized SET option).
//! 3. SET ROWCOUNT holds 0 (off) or a positive int; anything else (NULL, negative, not an
//!    integer) is Msg 507 and leaves the setting as it was. A negative literal never gets
//!    here: SQL Server's grammar has no sign there, so the parser refuses it (Msg 102).

use super::Session;
use crate::ast::SetValue;
use crate::exec::lower::not_yet;
use crate::messages::{msg, SqlError};
use crate::types::Value;

/// The SET options this file keeps for a session (the rest live beside the features they
/// steer: `Session::nocount`, the locking options in `locking.rs`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SessionOptions {
    /// SET XACT_ABORT ON: a statement's run-time error rolls back the whole transaction
    /// and ends the batch (`Session::run_statement_inner`).
    pub xact_abort: bool,
    /// SET TEXTSIZE: how many bytes of a varchar(max), nvarchar(max) or varbinary(max)
    /// value a SELECT returns (`Out` cuts them), @@TEXTSIZE.
    pub textsize: u32,
    /// SET CURSOR_CLOSE_ON_COMMIT (kept for the cursors to come).
    pub cursor_close_on_commit: bool,
    /// SET ROWCOUNT n: a SELECT returns, and an INSERT, UPDATE or DELETE without TOP
    /// changes, at most n rows (`Session::rowcount_cap`); 0 is off. At most `i32::MAX`.
    pub rowcount: u32,
    /// SET STATISTICS TIME ON: each batch reports its parse time (Msg 3613) and each
    /// statement its execution times (Msg 3612), `statistics_time.rs`.
    pub statistics_time: bool,
    /// SET SHOWPLAN_TEXT or SHOWPLAN_ALL ON: statements are described, not run
    /// (`showplan.rs`), in that form.
    pub showplan: Option<Showplan>,
}

/// Which SET SHOWPLAN_* is on. They exclude each other: setting one ON turns the other
/// off (the form the last SET asked for); setting one OFF turns only itself off.
/// (Unverified against SQL Server, which documents neither combination.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Showplan {
    /// SHOWPLAN_TEXT: the statement's text, then its plan's drawn lines.
    Text,
    /// SHOWPLAN_ALL: one row for the statement, one per operator, with their columns.
    All,
}

/// @@TEXTSIZE when no SET TEXTSIZE was run, and after SET TEXTSIZE 0. SQL Server's own
/// default is 4,096 bytes, but every driver (ODBC, OLE DB, JDBC, FreeTDS) sets its own on
/// connect and ODBC's is this: a client that sets none gets whole values, never a silent cut.
pub const DEFAULT_TEXTSIZE: u32 = i32::MAX as u32;

impl Default for SessionOptions {
    fn default() -> SessionOptions {
        SessionOptions {
            xact_abort: false,
            textsize: DEFAULT_TEXTSIZE,
            cursor_close_on_commit: false,
            rowcount: 0,
            statistics_time: false,
            showplan: None,
        }
    }
}

/// How the engine treats an ON / OFF option.
#[derive(Clone, Copy)]
enum Switch {
    /// Always as ON: only ON is accepted.
    FixedOn,
    /// Always as OFF: only OFF is accepted (also every option not built yet).
    FixedOff,
    /// Either value behaves the same here (ARITHABORT: with ANSI_WARNINGS always ON, SQL
    /// Server ends the statement on overflow or divide by zero whatever ARITHABORT says).
    Either,
    /// Changes the session (`Session::apply_switch`).
    Built,
}

const SWITCHES: &[(&str, Switch)] = &[
    ("ANSI_NULLS", Switch::FixedOn),
    ("ANSI_PADDING", Switch::FixedOn),
    ("ANSI_WARNINGS", Switch::FixedOn),
    ("ANSI_NULL_DFLT_ON", Switch::FixedOn),
    ("ANSI_NULL_DFLT_OFF", Switch::FixedOff),
    ("QUOTED_IDENTIFIER", Switch::FixedOn),
    ("CONCAT_NULL_YIELDS_NULL", Switch::FixedOn),
    ("ARITHABORT", Switch::Either),
    ("ARITHIGNORE", Switch::FixedOff),
    ("NUMERIC_ROUNDABORT", Switch::FixedOff),
    ("FMTONLY", Switch::FixedOff),
    ("NOEXEC", Switch::FixedOff),
    ("PARSEONLY", Switch::FixedOff),
    ("FORCEPLAN", Switch::FixedOff),
    ("NO_BROWSETABLE", Switch::FixedOff),
    ("REMOTE_PROC_TRANSACTIONS", Switch::FixedOff),
    ("FIPS_FLAGGER", Switch::FixedOff),
    ("SHOWPLAN_XML", Switch::FixedOff),
    ("STATISTICS XML", Switch::FixedOff),
    ("STATISTICS PROFILE", Switch::FixedOff),
    ("NOCOUNT", Switch::Built),
    ("IMPLICIT_TRANSACTIONS", Switch::Built),
    ("STATISTICS IO", Switch::Built),
    ("STATISTICS TIME", Switch::Built),
    ("SHOWPLAN_TEXT", Switch::Built),
    ("SHOWPLAN_ALL", Switch::Built),
    ("XACT_ABORT", Switch::Built),
    ("ANSI_DEFAULTS", Switch::Built),
    ("CURSOR_CLOSE_ON_COMMIT", Switch::Built),
];

/// Options that take a value, and the only values the engine behaves as (their defaults);
/// ROWCOUNT has its own (`accept_rowcount`).
const VALUED: &[&str] = &[
    "TEXTSIZE",
    "DATEFORMAT",
    "DATEFIRST",
    "LANGUAGE",
    "QUERY_GOVERNOR_COST_LIMIT",
    "CONTEXT_INFO",
];

/// One accepted change, applied once every option of the SET was accepted (invariant 1).
enum Change {
    Switch(&'static str, bool),
    TextSize(u32),
    RowCount(u32),
    Nothing,
}

impl Session {
    /// Every SET option but the locking ones (`set_locking_option`).
    pub(super) fn set_session_option(
        &mut self,
        options: &[String],
        value: &SetValue,
    ) -> Result<(), Vec<SqlError>> {
        let changes = options
            .iter()
            .map(|o| self.accept_option(o, value))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| vec![e])?;
        for c in changes {
            match c {
                Change::Switch(name, on) => self.apply_switch(name, on),
                Change::TextSize(n) => self.options.textsize = n,
                Change::RowCount(n) => self.options.rowcount = n,
                Change::Nothing => {}
            }
        }
        Ok(())
    }

    fn accept_option(&mut self, option: &str, value: &SetValue) -> Result<Change, SqlError> {
        if let Some((name, switch)) = SWITCHES.iter().find(|(n, _)| *n == option) {
            return accept_switch(name, *switch, value);
        }
        if option == "ROWCOUNT" {
            return self.accept_rowcount(value);
        }
        if VALUED.contains(&option) {
            return self.accept_valued(option, value);
        }
        Err(msg(195, &[&option, &"SET option"]))
    }

    /// SET ROWCOUNT { number | @number_var } (invariant 3).
    fn accept_rowcount(&mut self, value: &SetValue) -> Result<Change, SqlError> {
        let SetValue::Expr(e) = value else {
            return Err(msg(102, &[&"ROWCOUNT"]));
        };
        let n = match self.eval(e, None)? {
            Value::TinyInt(i) => i64::from(i),
            Value::SmallInt(i) => i64::from(i),
            Value::Int(i) => i64::from(i),
            Value::BigInt(i) => i,
            _ => -1,
        };
        match u32::try_from(n) {
            Ok(n) if n <= i32::MAX as u32 => Ok(Change::RowCount(n)),
            _ => Err(msg(507, &[])),
        }
    }

    /// How many rows SET ROWCOUNT lets the current statement return or change; None when
    /// it is off. A SELECT takes the smaller of this and its TOP; an INSERT, UPDATE or
    /// DELETE takes this only when it has no TOP of its own (SQL Server ignores SET
    /// ROWCOUNT for a data modification with TOP).
    pub(super) fn rowcount_cap(&self) -> Option<u64> {
        assert!(self.options.rowcount <= i32::MAX as u32, "invariant 3");
        match self.options.rowcount {
            0 => None,
            n => Some(u64::from(n)),
        }
    }

    /// `limit` (a TOP's rows, or None) lowered to SET ROWCOUNT's cap when that is smaller.
    pub(super) fn capped_by_rowcount(&self, limit: Option<u64>) -> Option<u64> {
        match (limit, self.rowcount_cap()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs `f` as if SET ROWCOUNT were 0, then puts the setting back (the query inside an
    /// INSERT with TOP, which SQL Server runs uncapped).
    pub(super) fn without_rowcount<T>(&mut self, f: impl FnOnce(&mut Session) -> T) -> T {
        let kept = std::mem::take(&mut self.options.rowcount);
        let r = f(self);
        self.options.rowcount = kept;
        r
    }

    fn apply_switch(&mut self, name: &str, on: bool) {
        match name {
            "NOCOUNT" => self.nocount = on,
            "IMPLICIT_TRANSACTIONS" => self.implicit_transactions = on,
            "STATISTICS IO" => self.statistics_io = on,
            "STATISTICS TIME" => self.options.statistics_time = on,
            "SHOWPLAN_TEXT" => self.set_showplan(Showplan::Text, on),
            "SHOWPLAN_ALL" => self.set_showplan(Showplan::All, on),
            "XACT_ABORT" => self.options.xact_abort = on,
            "CURSOR_CLOSE_ON_COMMIT" => self.options.cursor_close_on_commit = on,
            "ANSI_DEFAULTS" => {
                // SQL Server's ANSI_DEFAULTS sets these two and options fixed ON here.
                self.implicit_transactions = on;
                self.options.cursor_close_on_commit = on;
            }
            _ => {}
        }
    }

    /// SET SHOWPLAN_TEXT / SHOWPLAN_ALL (`Showplan`: one ON turns the other off).
    fn set_showplan(&mut self, form: Showplan, on: bool) {
        match on {
            true => self.options.showplan = Some(form),
            false if self.options.showplan == Some(form) => self.options.showplan = None,
            false => {}
        }
    }

    fn accept_valued(&mut self, option: &str, value: &SetValue) -> Result<Change, SqlError> {
        let word = match value {
            SetValue::Word(w) => Some(w.to_ascii_lowercase()),
            SetValue::Expr(e) => match self.eval(e, None)? {
                Value::Text(t) => Some(t.to_ascii_lowercase()),
                v => return accept_number(option, &v),
            },
            SetValue::On | SetValue::Off => None,
        };
        let ok = match (option, word.as_deref()) {
            ("DATEFORMAT", Some("mdy")) => true,
            ("LANGUAGE", Some("us_english" | "english")) => true,
            (_, None) => return Err(msg(102, &[&option])),
            _ => false,
        };
        if ok {
            Ok(Change::Nothing)
        } else {
            Err(not_built(option))
        }
    }
}

fn accept_switch(name: &'static str, switch: Switch, value: &SetValue) -> Result<Change, SqlError> {
    let on = match value {
        SetValue::On => true,
        SetValue::Off => false,
        _ => return Err(msg(102, &[&name])),
    };
    match (switch, on) {
        (Switch::Built, _) => Ok(Change::Switch(name, on)),
        (Switch::Either, _) | (Switch::FixedOn, true) | (Switch::FixedOff, false) => {
            Ok(Change::Nothing)
        }
        (Switch::FixedOn, false) => Err(not_yet(&format!("SET {name} OFF"))),
        (Switch::FixedOff, true) => Err(not_yet(&format!("SET {name} ON"))),
    }
}

/// TEXTSIZE, DATEFIRST, QUERY_GOVERNOR_COST_LIMIT given a number.
fn accept_number(option: &str, v: &Value) -> Result<Change, SqlError> {
    let n = match *v {
        Value::TinyInt(i) => i64::from(i),
        Value::SmallInt(i) => i64::from(i),
        Value::Int(i) => i64::from(i),
        Value::BigInt(i) => i,
        _ => return Err(not_built(option)),
    };
    match (option, n) {
        // 0 (and -1, as drivers send) give the default; SQL Server stores any positive int.
        ("TEXTSIZE", 0 | -1) => Ok(Change::TextSize(DEFAULT_TEXTSIZE)),
        ("TEXTSIZE", n) if n > 0 && n <= i64::from(i32::MAX) => Ok(Change::TextSize(n as u32)),
        ("DATEFIRST", 7) | ("QUERY_GOVERNOR_COST_LIMIT", 0) => Ok(Change::Nothing),
        _ => Err(not_built(option)),
    }
}

/// The refusal of a value the engine does not behave as.
fn not_built(option: &str) -> SqlError {
    let what = match option {
        "DATEFORMAT" => "SET DATEFORMAT other than mdy",
        "DATEFIRST" => "SET DATEFIRST other than 7",
        "LANGUAGE" => "SET LANGUAGE other than us_english",
        "QUERY_GOVERNOR_COST_LIMIT" => "SET QUERY_GOVERNOR_COST_LIMIT other than 0",
        "TEXTSIZE" => "SET TEXTSIZE outside 0 to 2147483647",
        _ => "SET CONTEXT_INFO",
    };
    not_yet(what)
}

/// The first `limit` bytes of a long value, as SQL Server cuts them for SET TEXTSIZE:
/// varchar(max) by bytes (one a character here), nvarchar(max) by UTF-16 bytes (never
/// half a surrogate pair), varbinary(max) by bytes.
pub fn cut_to_textsize(v: &mut Value, unicode: bool, limit: u32) {
    let limit = limit as usize;
    match v {
        Value::Text(t) => {
            let mut units = 0;
            let end = t
                .char_indices()
                .find(|(_, c)| {
                    units += if unicode { 2 * c.len_utf16() } else { 1 };
                    units > limit
                })
                .map(|(i, _)| i);
            if let Some(end) = end {
                t.truncate(end);
            }
        }
        Value::Binary(b) => b.truncate(limit),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_count_bytes_as_sql_server_does() {
        let mut v = Value::Text("abcdef".into());
        cut_to_textsize(&mut v, false, 4);
        assert_eq!(v, Value::Text("abcd".into()));
        let mut v = Value::Text("abcdef".into());
        cut_to_textsize(&mut v, true, 5);
        assert_eq!(v, Value::Text("ab".into()), "5 bytes hold two UTF-16 units");
        let mut v = Value::Text("a\u{1F600}b".into());
        cut_to_textsize(&mut v, true, 4);
        assert_eq!(
            v,
            Value::Text("a".into()),
            "a surrogate pair is never split"
        );
        let mut v = Value::Binary(vec![1, 2, 3]);
        cut_to_textsize(&mut v, false, 2);
        assert_eq!(v, Value::Binary(vec![1, 2]));
        let mut v = Value::Text("ab".into());
        cut_to_textsize(&mut v, false, 10);
        assert_eq!(v, Value::Text("ab".into()));
    }
}
