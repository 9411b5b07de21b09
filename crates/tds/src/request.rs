//! Client requests (MS-TDS 2.2.6): SQLBatch, RPC and transaction-manager requests. From
//! TDS 7.2 each starts with ALL_HEADERS (a total length, then headers such as the
//! transaction descriptor), which extentdb reads past; a 7.1 client sends none.

use extentdb_sql::types::{SqlType, Value};

use crate::types::read_typed_value;
use crate::wire::Cursor;
use crate::TdsError;

/// ALL_HEADERS as a client sends it: the transaction descriptor header (the open
/// transaction's descriptor, or 0) with one outstanding request.
pub fn all_headers_with(descriptor: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(22);
    b.extend_from_slice(&22u32.to_le_bytes());
    b.extend_from_slice(&18u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&descriptor.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    b
}

/// Skips ALL_HEADERS; returns the transaction descriptor header's value if present.
fn all_headers(c: &mut Cursor<'_>) -> Result<Option<u64>, TdsError> {
    let start = c.pos;
    let total = c.u32()? as usize;
    if total < 4 {
        return Err(TdsError::Protocol(
            "ALL_HEADERS shorter than its length field",
        ));
    }
    let mut descriptor = None;
    while c.pos < start + total {
        let len = c.u32()? as usize;
        if len < 6 {
            return Err(TdsError::Protocol("a header shorter than its fields"));
        }
        let kind = c.u16()?;
        let body = c.bytes(len - 6)?;
        if kind == 2 && body.len() >= 8 {
            descriptor = Some(u64::from_le_bytes(body[..8].try_into().unwrap()));
        }
    }
    if c.pos != start + total {
        return Err(TdsError::Protocol(
            "ALL_HEADERS length does not match its headers",
        ));
    }
    Ok(descriptor)
}

/// ALL_HEADERS is present when the payload's first four bytes (little-endian) look like its
/// length: clients at TDS 7.2+ always send it; a text batch would need an implausibly large
/// first "length" to be mistaken for it.
fn has_all_headers(payload: &[u8]) -> bool {
    payload.len() >= 4 && {
        let n = u32::from_le_bytes(payload[..4].try_into().unwrap()) as usize;
        (4..=payload.len()).contains(&n) && n < 1024
    }
}

/// A SQLBatch's text.
pub fn sql_batch(payload: &[u8]) -> Result<String, TdsError> {
    let mut c = Cursor::new(payload);
    if has_all_headers(payload) {
        all_headers(&mut c)?;
    }
    let rest = c.remaining();
    if !rest.is_multiple_of(2) {
        return Err(TdsError::Protocol("batch text of an odd number of bytes"));
    }
    c.utf16(rest / 2)
}

/// The well-known procedure ids an RPC may name instead of a name.
pub fn proc_name(id: u16) -> Option<&'static str> {
    Some(match id {
        1 => "sp_cursor",
        2 => "sp_cursoropen",
        3 => "sp_cursorprepare",
        4 => "sp_cursorexecute",
        5 => "sp_cursorprepexec",
        6 => "sp_cursorunprepare",
        7 => "sp_cursorfetch",
        8 => "sp_cursoroption",
        9 => "sp_cursorclose",
        10 => "sp_executesql",
        11 => "sp_prepare",
        12 => "sp_execute",
        13 => "sp_prepexec",
        14 => "sp_prepexecrpc",
        15 => "sp_unprepare",
        _ => return None,
    })
}

#[derive(Debug, Clone, PartialEq)]
pub struct RpcParam {
    /// With its `@`, or empty for a positional parameter.
    pub name: String,
    pub output: bool,
    pub sql_type: SqlType,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RpcCall {
    /// Lower-cased procedure name.
    pub proc: String,
    pub params: Vec<RpcParam>,
}

/// An RPC request: one or more calls separated by the batch flag.
pub fn rpc(payload: &[u8]) -> Result<Vec<RpcCall>, TdsError> {
    let mut c = Cursor::new(payload);
    // A TDS 7.1 client (jTDS) sends none.
    if has_all_headers(payload) {
        all_headers(&mut c)?;
    }
    let mut calls = Vec::new();
    while !c.at_end() {
        let n = c.u16()?;
        let proc = if n == 0xFFFF {
            let id = c.u16()?;
            proc_name(id)
                .ok_or(TdsError::Protocol("RPC with an unknown procedure id"))?
                .to_string()
        } else {
            c.utf16(n as usize)?.to_lowercase()
        };
        let _options = c.u16()?;
        let mut params = Vec::new();
        while !c.at_end() {
            let peek = payload[c.pos];
            if peek == 0xFF || peek == 0x80 || peek == 0xFE {
                c.u8()?;
                break;
            }
            let name = c.b_varchar()?;
            let status = c.u8()?;
            let (sql_type, value) = read_typed_value(&mut c)?;
            params.push(RpcParam {
                name,
                output: status & 0x01 != 0,
                sql_type,
                value,
            });
        }
        calls.push(RpcCall { proc, params });
    }
    Ok(calls)
}

/// A transaction-manager request (MS-TDS 2.2.6.9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TmRequest {
    Begin,
    /// Commit or roll back; `begin_again` starts a new transaction right after.
    End {
        commit: bool,
        begin_again: bool,
    },
    Save,
    Other(u16),
}

pub fn transaction_manager(payload: &[u8]) -> Result<TmRequest, TdsError> {
    let mut c = Cursor::new(payload);
    if has_all_headers(payload) {
        all_headers(&mut c)?;
    }
    let kind = c.u16()?;
    Ok(match kind {
        5 => TmRequest::Begin,
        7 | 8 => {
            // The name is B_VARBYTE: a length in bytes (tedious, Microsoft's mssql-tds), not
            // B_VARCHAR's length in characters; read as characters, a named rollback's name
            // ran past the flags and a letter of it was taken for fBeginXact.
            let n = c.u8()? as usize;
            let _name = c.bytes(n)?;
            let flags = c.u8().unwrap_or(0);
            TmRequest::End {
                commit: kind == 7,
                begin_again: flags & 0x01 != 0,
            }
        }
        9 => TmRequest::Save,
        k => TmRequest::Other(k),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::put_utf16;

    fn headers() -> Vec<u8> {
        all_headers_with(0)
    }

    #[test]
    fn batch_with_and_without_headers() {
        let mut b = headers();
        put_utf16(&mut b, "SELECT 1");
        assert_eq!(sql_batch(&b).unwrap(), "SELECT 1");
        let mut plain = Vec::new();
        put_utf16(&mut plain, "SELECT 2");
        assert_eq!(sql_batch(&plain).unwrap(), "SELECT 2");
    }

    #[test]
    fn named_commit_and_rollback() {
        for (kind, commit) in [(7u16, true), (8, false)] {
            for (flags, begin_again) in [(0u8, false), (1, true)] {
                let mut b = headers();
                b.extend_from_slice(&kind.to_le_bytes());
                let mut name = Vec::new();
                put_utf16(&mut name, "_tedious_0123456789");
                b.push(name.len() as u8); // a length in bytes
                b.extend_from_slice(&name);
                b.push(flags);
                assert_eq!(
                    transaction_manager(&b).unwrap(),
                    TmRequest::End {
                        commit,
                        begin_again
                    }
                );
            }
        }
        // Without a name (pytds, mssql-jdbc): a zero length, then the flags.
        let mut b = headers();
        b.extend_from_slice(&8u16.to_le_bytes());
        b.extend_from_slice(&[0, 0]);
        assert_eq!(
            transaction_manager(&b).unwrap(),
            TmRequest::End {
                commit: false,
                begin_again: false
            }
        );
    }

    #[test]
    fn rpc_by_id_with_parameters() {
        let mut b = headers();
        b.extend_from_slice(&0xFFFFu16.to_le_bytes());
        b.extend_from_slice(&10u16.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        // @stmt nvarchar(16) 'SELECT @a'
        b.push(0);
        b.push(0);
        b.push(crate::types::NVARCHAR);
        b.extend_from_slice(&32u16.to_le_bytes());
        b.extend_from_slice(&crate::types::COLLATION);
        b.extend_from_slice(&18u16.to_le_bytes());
        put_utf16(&mut b, "SELECT @a");
        // @a int 5
        b.push(2);
        put_utf16(&mut b, "@a");
        b.push(0);
        b.extend_from_slice(&[crate::types::INTN, 4, 4, 5, 0, 0, 0]);
        let calls = rpc(&b).unwrap();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].proc, "sp_executesql");
        assert_eq!(calls[0].params[0].value, Value::Text("SELECT @a".into()));
        assert_eq!(calls[0].params[1].name, "@a");
        assert_eq!(calls[0].params[1].value, Value::Int(5));
        // TDS 7.1 (jTDS): the same call with no ALL_HEADERS.
        let bare = rpc(&b[headers().len()..]).unwrap();
        assert_eq!(bare[0].proc, "sp_executesql");
        assert_eq!(bare[0].params.len(), 2);
        assert_eq!(bare[0].params[1].value, Value::Int(5));
        for cut in 0..b.len() - 1 {
            let _ = rpc(&b[..cut]); // never panics
        }
    }
}
