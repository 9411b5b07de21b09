//! The token stream a server sends (MS-TDS 2.2.7): every token is a type byte, then its
//! fields. Built into one buffer per response message.

use extentdb_sql::messages::SqlError;
use extentdb_sql::types::{SqlType, Value};

use crate::types::{legacy_type, legacy_value, put_legacy_type_info, put_legacy_value};
use crate::types::{put_type_info, put_value};
use crate::wire::{put_b_varchar, put_us_varchar};

pub const COLMETADATA: u8 = 0x81;
pub const ERROR: u8 = 0xAA;
pub const INFO: u8 = 0xAB;
pub const RETURNVALUE: u8 = 0xAC;
pub const LOGINACK: u8 = 0xAD;
pub const ROW: u8 = 0xD1;
pub const NBCROW: u8 = 0xD2;
pub const ENVCHANGE: u8 = 0xE3;
pub const RETURNSTATUS: u8 = 0x79;
pub const DONE: u8 = 0xFD;
pub const DONEPROC: u8 = 0xFE;
pub const DONEINPROC: u8 = 0xFF;

/// DONE status bits.
pub const DONE_FINAL: u16 = 0x00;
pub const DONE_MORE: u16 = 0x01;
pub const DONE_ERROR: u16 = 0x02;
pub const DONE_INXACT: u16 = 0x04;
pub const DONE_COUNT: u16 = 0x10;
pub const DONE_ATTN: u16 = 0x20;
pub const DONE_SRVERROR: u16 = 0x100;

/// ENVCHANGE types.
pub const ENV_DATABASE: u8 = 1;
pub const ENV_LANGUAGE: u8 = 2;
pub const ENV_PACKET_SIZE: u8 = 4;
pub const ENV_COLLATION: u8 = 7;
pub const ENV_BEGIN_TRAN: u8 = 8;
pub const ENV_COMMIT_TRAN: u8 = 9;
pub const ENV_ROLLBACK_TRAN: u8 = 10;
pub const ENV_RESET_ACK: u8 = 18;

/// The CurCmd of DONE tokens (SQL Server's statement tokens: clients such as mssql-jdbc
/// take a DDL command's update count as 0 and a DML command's from DONE_COUNT).
pub const CMD_SELECT: u16 = 0xC1;
pub const CMD_INSERT: u16 = 0xC3;
pub const CMD_DELETE: u16 = 0xC4;
pub const CMD_UPDATE: u16 = 0xC5;
pub const CMD_MERGE: u16 = 0x117;
pub const CMD_TABCREATE: u16 = 0xC6;
pub const CMD_TABDESTROY: u16 = 0xC7;
pub const CMD_INDCREATE: u16 = 0xC8;
pub const CMD_INDDESTROY: u16 = 0xC9;
pub const CMD_DBCREATE: u16 = 0xCB;
pub const CMD_DBDESTROY: u16 = 0xCC;
pub const CMD_DBEXTEND: u16 = 0xD7;
pub const CMD_EXECUTE: u16 = 0xE0;
pub const CMD_DBCC: u16 = 0xE6;
pub const CMD_LOGINCREATE: u16 = 0x145;
pub const CMD_LOGINALTER: u16 = 0x146;
pub const CMD_LOGINDROP: u16 = 0x147;

/// The CurCmd of a statement's DONE.
pub fn command_code(c: extentdb_sql::exec::StatementCommand) -> u16 {
    use extentdb_sql::exec::StatementCommand as C;
    match c {
        C::Select => CMD_SELECT,
        C::Insert => CMD_INSERT,
        C::Update => CMD_UPDATE,
        C::Delete => CMD_DELETE,
        C::Merge => CMD_MERGE,
        C::CreateTable => CMD_TABCREATE,
        C::DropTable => CMD_TABDESTROY,
        C::CreateIndex => CMD_INDCREATE,
        C::DropIndex => CMD_INDDESTROY,
        C::CreateDatabase => CMD_DBCREATE,
        C::DropDatabase => CMD_DBDESTROY,
        C::AlterDatabase => CMD_DBEXTEND,
        C::Dbcc => CMD_DBCC,
        C::Execute => CMD_EXECUTE,
        C::CreateLogin => CMD_LOGINCREATE,
        C::AlterLogin => CMD_LOGINALTER,
        C::DropLogin => CMD_LOGINDROP,
        // No CurCmd of its own is known for ALTER INDEX: 0, as for any other statement.
        C::AlterIndex | C::Other => 0,
    }
}

/// The TDS version a connection speaks: LOGIN7's, capped at 7.4 (MS-TDS 2.2.6.4's
/// TDSVersion as the client sends it, little-endian). What changes below 7.4, as SQL
/// Server answers an older client:
/// - before 7.2 (jTDS, FreeTDS at 7.1): COLMETADATA's and RETURNVALUE's UserType is 2
///   bytes, not 4; DONE's row count 4 bytes, not 8; INFO's and ERROR's line number 2
///   bytes, not 4; `(MAX)` types go as TEXT, NTEXT and IMAGE (types.rs `put_legacy_*`),
///   there being no PLP streams;
/// - before 7.3: DATE and DATETIME2 go as NVARCHAR holding their text, and rows with a
///   NULL as ROW (NBCROW is 7.3's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TdsVersion(pub u32);

impl TdsVersion {
    pub const V7_1: TdsVersion = TdsVersion(0x7100_0001);
    pub const V7_2: TdsVersion = TdsVersion(0x7209_0002);
    /// 7.3B (NBCROW is 7.3B's; a 7.3A client is answered as 7.2).
    pub const V7_3: TdsVersion = TdsVersion(0x730B_0003);
    pub const V7_4: TdsVersion = TdsVersion(crate::login7::TDS_74);

    /// The version answered to a client asking for `client`: the highest of ours not above
    /// it. None below 7.1 (7.0 has no collations in TYPE_INFO; not served).
    pub fn negotiate(client: u32) -> Option<TdsVersion> {
        if client < 0x7100_0000 {
            return None;
        }
        [Self::V7_4, Self::V7_3, Self::V7_2]
            .into_iter()
            .find(|v| client >= v.0)
            .or(Some(Self::V7_1))
    }

    /// 4-byte UserType and line numbers, 8-byte DONE counts, PLP streams.
    pub fn is_7_2(self) -> bool {
        self >= Self::V7_2
    }

    /// DATE / DATETIME2 on the wire, and NBCROW.
    pub fn is_7_3(self) -> bool {
        self >= Self::V7_3
    }
}

impl Default for TdsVersion {
    fn default() -> TdsVersion {
        TdsVersion::V7_4
    }
}

/// A response being built.
#[derive(Default)]
pub struct Tokens {
    pub buf: Vec<u8>,
    /// Where the last DONE / DONEINPROC / DONEPROC token starts.
    pub last_done_at: Option<usize>,
    /// The connection's TDS version: the tokens' layout follows it.
    pub version: TdsVersion,
}

fn with_len16(buf: &mut Vec<u8>, token: u8, body: &[u8]) {
    buf.push(token);
    buf.extend_from_slice(&(body.len() as u16).to_le_bytes());
    buf.extend_from_slice(body);
}

impl Tokens {
    pub fn new() -> Tokens {
        Tokens::default()
    }

    /// An empty response in TDS `version`'s layout.
    pub fn for_version(version: TdsVersion) -> Tokens {
        Tokens {
            version,
            ..Tokens::default()
        }
    }

    /// A DONE, DONEINPROC or DONEPROC token's length.
    pub fn done_len(&self) -> usize {
        if self.version.is_7_2() {
            13
        } else {
            9
        }
    }

    /// A UserType of 0 (4 bytes from 7.2, 2 before).
    fn user_type(&self, b: &mut Vec<u8>) {
        match self.version.is_7_2() {
            true => b.extend_from_slice(&0u32.to_le_bytes()),
            false => b.extend_from_slice(&0u16.to_le_bytes()),
        }
    }

    /// ENVCHANGE with B_VARCHAR values (database, language, packet size).
    pub fn env_text(&mut self, kind: u8, new: &str, old: &str) {
        let mut b = vec![kind];
        put_b_varchar(&mut b, new);
        put_b_varchar(&mut b, old);
        with_len16(&mut self.buf, ENVCHANGE, &b);
    }

    /// ENVCHANGE with B_VARBYTE values (collation, transactions).
    pub fn env_bytes(&mut self, kind: u8, new: &[u8], old: &[u8]) {
        let mut b = vec![kind, new.len() as u8];
        b.extend_from_slice(new);
        b.push(old.len() as u8);
        b.extend_from_slice(old);
        with_len16(&mut self.buf, ENVCHANGE, &b);
    }

    /// INFO (severity <= 10) or ERROR. Severity 10 goes out as class 0, as SQL Server
    /// sends it ("for compatibility reasons"): drivers such as pymssql treat a class
    /// above their minimum error severity as an error, even in an INFO token.
    pub fn message(&mut self, m: &SqlError, server: &str) {
        let mut b = Vec::new();
        b.extend_from_slice(&m.number.to_le_bytes());
        b.push(m.state);
        b.push(if m.severity == 10 { 0 } else { m.severity });
        put_us_varchar(&mut b, &m.text);
        put_b_varchar(&mut b, server);
        put_b_varchar(&mut b, m.procedure.as_deref().unwrap_or(""));
        match self.version.is_7_2() {
            true => b.extend_from_slice(&m.line.to_le_bytes()),
            false => b.extend_from_slice(&(m.line.min(u32::from(u16::MAX)) as u16).to_le_bytes()),
        }
        with_len16(
            &mut self.buf,
            if m.severity <= 10 { INFO } else { ERROR },
            &b,
        );
    }

    /// LOGINACK: SQL interface, TDS version, program name and version.
    pub fn login_ack(&mut self, tds_version: u32, version: [u8; 4]) {
        let mut b = vec![1];
        b.extend_from_slice(&tds_version.to_be_bytes());
        put_b_varchar(&mut b, "Microsoft SQL Server");
        b.extend_from_slice(&version);
        with_len16(&mut self.buf, LOGINACK, &b);
    }

    pub fn done(&mut self, token: u8, status: u16, cur_cmd: u16, count: u64) {
        self.last_done_at = Some(self.buf.len());
        self.buf.push(token);
        self.buf.extend_from_slice(&status.to_le_bytes());
        self.buf.extend_from_slice(&cur_cmd.to_le_bytes());
        match self.version.is_7_2() {
            true => self.buf.extend_from_slice(&count.to_le_bytes()),
            false => self
                .buf
                .extend_from_slice(&(count.min(u32::MAX as u64) as u32).to_le_bytes()),
        }
    }

    /// COLMETADATA: every column nullable, user type 0.
    pub fn col_metadata(&mut self, columns: &[(String, SqlType)]) {
        self.buf.push(COLMETADATA);
        self.buf
            .extend_from_slice(&(columns.len() as u16).to_le_bytes());
        for (name, t) in columns {
            let mut b = std::mem::take(&mut self.buf);
            self.user_type(&mut b);
            b.extend_from_slice(&0x0001u16.to_le_bytes()); // fNullable
            self.type_info(&mut b, *t);
            put_b_varchar(&mut b, name);
            self.buf = b;
        }
    }

    /// TYPE_INFO of `t` as this version has it.
    fn type_info(&self, b: &mut Vec<u8>, t: SqlType) {
        let t = legacy_type(self.version, t);
        match self.version.is_7_2() {
            true => put_type_info(b, t),
            false => put_legacy_type_info(b, t),
        }
    }

    /// A value of type `t` as this version has it.
    fn value(&self, b: &mut Vec<u8>, t: SqlType, v: &Value) {
        let lt = legacy_type(self.version, t);
        let text;
        let v = if lt != t && !v.is_null() {
            text = legacy_value(lt, v);
            &text
        } else {
            v
        };
        match self.version.is_7_2() {
            true => put_value(b, lt, v),
            false => put_legacy_value(b, lt, v),
        }
    }

    /// A row: NBCROW (a null bitmap, then the other values) when it has a NULL, else ROW.
    pub fn row(&mut self, types: &[SqlType], values: &[Value]) {
        if !self.version.is_7_3() {
            return self.legacy_row(types, values);
        }
        if values.iter().any(Value::is_null) {
            self.buf.push(NBCROW);
            // The bitmap is set in place in the buffer: no allocation per row.
            let at = self.buf.len();
            self.buf.resize(at + types.len().div_ceil(8), 0);
            for (i, v) in values.iter().enumerate() {
                if v.is_null() {
                    self.buf[at + i / 8] |= 1 << (i % 8);
                }
            }
            for (t, v) in types.iter().zip(values) {
                if !v.is_null() {
                    put_value(&mut self.buf, *t, v);
                }
            }
        } else {
            self.buf.push(ROW);
            for (t, v) in types.iter().zip(values) {
                put_value(&mut self.buf, *t, v);
            }
        }
    }

    /// A row for a client before 7.3: ROW, each NULL in its type's form (NBCROW is 7.3's),
    /// each value in the version's layout.
    fn legacy_row(&mut self, types: &[SqlType], values: &[Value]) {
        let mut b = std::mem::take(&mut self.buf);
        b.push(ROW);
        for (t, v) in types.iter().zip(values) {
            self.value(&mut b, *t, v);
        }
        self.buf = b;
    }

    pub fn return_status(&mut self, status: i32) {
        self.buf.push(RETURNSTATUS);
        self.buf.extend_from_slice(&status.to_le_bytes());
    }

    /// RETURNVALUE of an output parameter.
    pub fn return_value(&mut self, ordinal: u16, name: &str, t: SqlType, v: &Value) {
        let mut b = Vec::new();
        b.extend_from_slice(&ordinal.to_le_bytes());
        put_b_varchar(&mut b, name);
        b.push(0x01);
        self.user_type(&mut b);
        b.extend_from_slice(&0x0001u16.to_le_bytes());
        self.type_info(&mut b, t);
        self.value(&mut b, t, v);
        self.buf.push(RETURNVALUE);
        self.buf.extend_from_slice(&b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's version is answered with the highest of ours not above it; before 7.1
    /// none. 7.1's tokens: 2-byte UserType, 4-byte DONE count, ROW with typed NULLs, a
    /// DATE as NVARCHAR text.
    #[test]
    fn versions_and_their_layouts() {
        let v = TdsVersion::negotiate;
        assert_eq!(v(0x7100_0001), Some(TdsVersion::V7_1));
        assert_eq!(v(0x7209_0002), Some(TdsVersion::V7_2));
        assert_eq!(v(0x730B_0003), Some(TdsVersion::V7_3));
        assert_eq!(v(0x730A_0003), Some(TdsVersion::V7_2));
        assert_eq!(v(0x7400_0004), Some(TdsVersion::V7_4));
        assert_eq!(v(0x7500_0000), Some(TdsVersion::V7_4));
        assert_eq!(v(0x7000_0000), None);
        let mut old = Tokens::for_version(TdsVersion::V7_1);
        old.done(DONE, DONE_COUNT, CMD_SELECT, 3);
        assert_eq!(old.buf.len(), old.done_len());
        assert_eq!(old.done_len(), 9);
        assert_eq!(&old.buf[5..], &3u32.to_le_bytes());
        let mut new = Tokens::new();
        new.done(DONE, DONE_COUNT, CMD_SELECT, 3);
        assert_eq!(new.buf.len(), 13);
        let cols = [("d".to_string(), SqlType::Date)];
        let mut old = Tokens::for_version(TdsVersion::V7_1);
        old.col_metadata(&cols);
        // token, count, 2-byte UserType, flags, NVARCHAR(10) with its collation, name.
        assert_eq!(old.buf[7], crate::types::NVARCHAR, "{:?}", old.buf);
        assert_eq!(&old.buf[8..10], &20u16.to_le_bytes());
        let at = old.buf.len();
        old.row(
            &[SqlType::Date, SqlType::Int],
            &[Value::Date(738_886), Value::Null],
        );
        assert_eq!(old.buf[at], ROW, "no NBCROW before 7.3");
        assert_eq!(
            &old.buf[at + 1..at + 3],
            &20u16.to_le_bytes(),
            "ten characters"
        );
        assert_eq!(old.buf.last(), Some(&0), "an INTN NULL is a zero length");
    }

    /// NBCROW's bitmap: bit i of byte i / 8 for a NULL in column i, then only the other
    /// values; a row after it in the same buffer starts where the first ended.
    #[test]
    fn nbcrow_bitmap_marks_each_null_column() {
        let types = vec![SqlType::Int; 10];
        let mut values = vec![Value::Int(7); 10];
        values[0] = Value::Null;
        values[8] = Value::Null;
        values[9] = Value::Null;
        let mut t = Tokens::new();
        t.row(&types, &values);
        assert_eq!(t.buf[0], NBCROW);
        assert_eq!(&t.buf[1..3], &[0b0000_0001, 0b0000_0011]);
        let mut one = Vec::new();
        put_value(&mut one, SqlType::Int, &Value::Int(7));
        assert_eq!(t.buf.len(), 3 + 7 * one.len(), "seven values follow");
        let first = t.buf.len();
        t.row(&types[..1], &[Value::Null]);
        assert_eq!(&t.buf[first..], &[NBCROW, 0b0000_0001]);
    }
}
