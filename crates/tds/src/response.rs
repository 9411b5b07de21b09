//! A request's answer on the wire: the engine's outputs encoded as tokens and sent while the
//! batch runs, so a result set flows from the page to the TDS packet and a slow client
//! slows its own batch (the socket's back-pressure), not the server's memory.
//!
//! Invariants:
//! 1. At most `FLUSH_BYTES` plus one token of a reply are held before full packets go out
//!    (a row, or a message, is the largest token held).
//! 2. A reply's last DONE stays buffered until the reply ends: `finish` turns it into the
//!    final DONE (server.rs invariant 3), so it is never sent ahead.

use std::io::Write;

use extentdb_sql::convert::{convert, data_type_name};
use extentdb_sql::exec::{EnvChange, Output, OutputSink};
use extentdb_sql::messages::msg;
use extentdb_sql::types::{SqlType, Value};

use crate::packet::{MessageWriter, PacketType};
use crate::token::{self, TdsVersion, Tokens};

/// Buffered tokens beyond this go out as full packets (invariant 1).
pub const FLUSH_BYTES: usize = 32 << 10;

/// Turns outputs into tokens: statement ends become `done_token` (DONE, or DONEINPROC
/// inside an RPC) with MORE.
pub struct Encoder<'a> {
    done_token: u8,
    server_name: &'a str,
    /// The DONE a result set or a row count still owes: (command, count).
    pending: Option<(u16, Option<u64>)>,
    /// The running statement raised an error.
    statement_error: bool,
    /// Some statement raised an error.
    pub error: bool,
    /// The types of the result set being streamed.
    types: Vec<SqlType>,
}

impl<'a> Encoder<'a> {
    pub fn new(done_token: u8, server_name: &'a str) -> Encoder<'a> {
        Encoder {
            done_token,
            server_name,
            pending: None,
            statement_error: false,
            error: false,
            types: Vec::new(),
        }
    }

    fn done(&self, t: &mut Tokens, cmd: u16, count: Option<u64>, err: bool) {
        let mut status = token::DONE_MORE;
        if count.is_some() {
            status |= token::DONE_COUNT;
        }
        if err {
            status |= token::DONE_ERROR;
        }
        t.done(self.done_token, status, cmd, count.unwrap_or(0));
    }

    fn flush_pending(&mut self, t: &mut Tokens) {
        if let Some((cmd, count)) = self.pending.take() {
            self.done(t, cmd, count, false);
        }
    }

    /// A row in its result set's types. A value its column's type cannot hold (which the
    /// engine's typing of computed columns is meant to prevent) goes as NULL followed by
    /// error 8115 for the statement, so the client is never left with a silent NULL.
    fn row(&mut self, t: &mut Tokens, r: &[Value]) {
        let mut failed = None;
        let values: Vec<Value> = r
            .iter()
            .zip(&self.types)
            .map(|(v, ty)| match v {
                Value::Null => Value::Null,
                v => convert(v, *ty, None).unwrap_or_else(|_| {
                    failed.get_or_insert(*ty);
                    Value::Null
                }),
            })
            .collect();
        t.row(&self.types, &values);
        if let Some(ty) = failed {
            let e = msg(8115, &[&"expression", &data_type_name(ty)]);
            self.error = true;
            self.statement_error = true;
            t.message(&e, self.server_name);
        }
    }

    fn columns(&mut self, t: &mut Tokens, columns: &[(String, SqlType)]) {
        self.flush_pending(t);
        t.col_metadata(columns);
        self.types = columns.iter().map(|c| c.1).collect();
        self.pending = Some((token::CMD_SELECT, None));
    }

    /// Adds one output's tokens.
    pub fn add(&mut self, o: &Output, t: &mut Tokens) {
        match o {
            Output::Rows { columns, rows } => {
                self.columns(t, columns);
                for r in rows {
                    self.row(t, r);
                }
            }
            Output::Columns(columns) => self.columns(t, columns),
            Output::Row(r) => self.row(t, r),
            Output::RowsAffected(n) => match self.pending {
                Some((cmd, None)) => self.pending = Some((cmd, Some(*n))),
                _ => {
                    self.flush_pending(t);
                    self.pending = Some((0, Some(*n)));
                }
            },
            Output::StatementEnd(c) => {
                let code = token::command_code(*c);
                let err = std::mem::take(&mut self.statement_error);
                match self.pending.take() {
                    Some((cmd, count)) => {
                        self.done(t, if cmd == 0 { code } else { cmd }, count, err)
                    }
                    None => self.done(t, code, None, err),
                }
            }
            Output::Info(m) => t.message(m, self.server_name),
            Output::Error(e) => {
                self.error = true;
                self.statement_error = true;
                t.message(e, self.server_name);
            }
            Output::EnvChange(c) => env_change(t, c),
        }
    }

    /// Ends the outputs: a DONE still owed goes out. Returns true if an error was among them.
    pub fn end(&mut self, t: &mut Tokens) -> bool {
        if let Some((cmd, count)) = self.pending.take() {
            let cmd = if cmd == 0 { token::CMD_INSERT } else { cmd };
            let err = self.statement_error;
            self.done(t, cmd, count, err);
        }
        self.error
    }
}

fn env_change(t: &mut Tokens, c: &EnvChange) {
    match c {
        EnvChange::Database { old, new } => t.env_text(token::ENV_DATABASE, new, old),
        EnvChange::BeginTransaction(d) => t.env_bytes(token::ENV_BEGIN_TRAN, &d.to_le_bytes(), &[]),
        EnvChange::CommitTransaction(d) => {
            t.env_bytes(token::ENV_COMMIT_TRAN, &[], &d.to_le_bytes())
        }
        EnvChange::RollbackTransaction(d) => {
            t.env_bytes(token::ENV_ROLLBACK_TRAN, &[], &d.to_le_bytes())
        }
    }
}

/// One request's answer: its tokens so far and the message they go out in.
pub struct Reply {
    pub t: Tokens,
    mw: MessageWriter,
}

impl Reply {
    pub fn new(packet_size: usize, spid: u16, version: TdsVersion) -> Reply {
        Reply {
            t: Tokens::for_version(version),
            mw: MessageWriter::new(PacketType::TabularResult, packet_size, spid),
        }
    }

    /// True once part of this reply went out.
    pub fn started(&self) -> bool {
        self.mw.started()
    }

    /// Sends full packets once `FLUSH_BYTES` are buffered, keeping a DONE that ends the
    /// buffer (invariants 1 and 2).
    pub fn flush_some(&mut self, w: &mut impl Write) -> std::io::Result<()> {
        if self.t.buf.len() < FLUSH_BYTES {
            return Ok(());
        }
        let n = self.t.buf.len();
        let done_len = self.t.done_len();
        let keep = if self.t.last_done_at == Some(n - done_len) {
            done_len
        } else {
            0
        };
        let sent = self.mw.write_full(w, &mut self.t.buf, keep)?;
        self.t.last_done_at = self.t.last_done_at.and_then(|p| p.checked_sub(sent));
        Ok(())
    }

    /// Sends the rest of the reply with EOM; the next reply starts empty.
    pub fn finish(&mut self, w: &mut impl Write) -> std::io::Result<()> {
        self.mw.finish(w, &self.t.buf)?;
        self.t = Tokens::for_version(self.t.version);
        Ok(())
    }

    /// Drops what is buffered (a cancelled request whose answer has not started).
    pub fn discard(&mut self) {
        assert!(!self.started(), "a started reply cannot be taken back");
        self.t = Tokens::for_version(self.t.version);
    }
}

/// The sink a batch streams into: encodes each output into the reply and sends full
/// packets as they fill. A failed write ends the batch (the client is gone).
pub struct Streaming<'a, W: Write> {
    pub encoder: Encoder<'a>,
    pub reply: &'a mut Reply,
    pub writer: &'a mut W,
    pub failed: Option<std::io::Error>,
}

impl<W: Write> OutputSink for Streaming<'_, W> {
    fn emit(&mut self, o: Output) -> bool {
        if self.failed.is_some() {
            return false;
        }
        self.encoder.add(&o, &mut self.reply.t);
        if let Err(e) = self.reply.flush_some(self.writer) {
            self.failed = Some(e);
        }
        self.failed.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value its column's type cannot hold is never a silent NULL: the statement gets
    /// 8115 after the row.
    #[test]
    fn a_value_past_its_columns_type_is_an_error() {
        let mut t = Tokens::new();
        let mut e = Encoder::new(token::DONE, "srv");
        e.add(&Output::Columns(vec![("c".into(), SqlType::Int)]), &mut t);
        e.add(&Output::Row(vec![Value::Int(7)]), &mut t);
        assert!(!e.error, "a value that fits");
        e.add(&Output::Row(vec![Value::BigInt(9_000_000_000)]), &mut t);
        assert!(e.error && e.statement_error, "8115 for the statement");
    }
}
