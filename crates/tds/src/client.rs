//! A TDS client: what `extentdb sqlcmd` and the protocol tests use to talk to a server
//! (extentdb's or any SQL Server's). It logs in with SQL authentication and no
//! encryption, sends batches and RPCs, and decodes the token stream into the executor's
//! own `Output`s, so results print exactly as `extentdb exec` prints them.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use extentdb_sql::exec::{EnvChange, Output};
use extentdb_sql::messages::SqlError;
use extentdb_sql::types::{SqlType, Value};

use crate::login7::{self, Login7};
use crate::packet::{read_message, write_message, PacketType, INITIAL_PACKET_SIZE};
use crate::prelogin;
use crate::token;
use crate::types::{read_type_info, read_value, WireType};
use crate::wire::{put_utf16, Cursor};
use crate::TdsError;

/// What a response held besides outputs.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Response {
    pub outputs: Vec<Output>,
    /// The server name ERROR / INFO tokens carried (sqlcmd prints it in `Msg` lines).
    pub server: String,
    /// The last DONE's status bits.
    pub final_status: u16,
    /// Every DONE / DONEINPROC / DONEPROC: (token, status, command, count).
    pub dones: Vec<(u8, u16, u16, u64)>,
    pub return_status: Option<i32>,
    /// RETURNVALUE tokens: (parameter name, value).
    pub return_values: Vec<(String, Value)>,
}

impl Response {
    /// True when the request was cancelled by an attention.
    pub fn attention_acknowledged(&self) -> bool {
        self.final_status & token::DONE_ATTN != 0
    }

    pub fn errors(&self) -> impl Iterator<Item = &SqlError> {
        self.outputs.iter().filter_map(|o| match o {
            Output::Error(e) => Some(e),
            _ => None,
        })
    }
}

/// The client's byte stream: the socket, or TLS over it.
trait Stream: std::io::Read + Write + Send {}
impl<T: std::io::Read + Write + Send> Stream for T {}

pub struct Client {
    stream: Box<dyn Stream>,
    state: ClientState,
}

/// What a client tracks from the server's ENVCHANGEs.
#[derive(Debug, Clone)]
pub struct ClientState {
    /// The current database.
    pub database: String,
    pub packet_size: usize,
    /// The open transaction's descriptor (sent in ALL_HEADERS), 0 outside one.
    pub transaction: u64,
}

impl Default for ClientState {
    fn default() -> ClientState {
        ClientState {
            database: String::new(),
            packet_size: INITIAL_PACKET_SIZE,
            transaction: 0,
        }
    }
}

/// Options of a connection.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub user: String,
    pub password: String,
    pub database: Option<String>,
    pub app_name: String,
    pub packet_size: u32,
    pub timeout: Option<Duration>,
    /// Ask for an encrypted connection (TLS inside PRELOGIN, then every message).
    pub encrypt: bool,
    /// Accept the server's certificate without checking it (sqlcmd -C).
    pub trust_server_certificate: bool,
    /// A CA certificate (PEM) to check the server's certificate against.
    pub ca_file: Option<std::path::PathBuf>,
}

impl Default for ConnectOptions {
    fn default() -> ConnectOptions {
        ConnectOptions {
            user: "sa".into(),
            password: String::new(),
            database: None,
            app_name: "extentdb sqlcmd".into(),
            packet_size: 4096,
            timeout: None,
            encrypt: false,
            trust_server_certificate: false,
            ca_file: None,
        }
    }
}

impl Client {
    /// Connects and logs in. A failed login is `Err(Ok(response))` with the server's
    /// messages (18456 ...); a transport or protocol failure is `Err(Err(e))`.
    pub fn connect(addr: &str, o: &ConnectOptions) -> Result<Client, Result<Response, TdsError>> {
        let stream = TcpStream::connect(addr).map_err(|e| Err(TdsError::Io(e)))?;
        let _ = stream.set_nodelay(true);
        stream
            .set_read_timeout(o.timeout)
            .map_err(|e| Err(TdsError::Io(e)))?;
        let mut c = Client {
            stream: Box::new(stream.try_clone().map_err(|e| Err(TdsError::Io(e)))?),
            state: ClientState::default(),
        };
        let pre = prelogin::encode(&[
            (prelogin::VERSION, vec![0, 0, 0, 0, 0, 0]),
            (
                prelogin::ENCRYPTION,
                vec![if o.encrypt {
                    prelogin::ENCRYPT_ON
                } else {
                    prelogin::ENCRYPT_NOT_SUP
                }],
            ),
            (prelogin::INSTOPT, vec![0]),
            (prelogin::THREADID, vec![0, 0, 0, 0]),
            (prelogin::MARS, vec![0]),
        ]);
        c.send(PacketType::PreLogin, &pre).map_err(Err)?;
        let reply = c.receive().map_err(Err)?;
        let p = prelogin::decode(&reply).map_err(Err)?;
        let server_encrypts = matches!(
            p.encryption,
            Some(prelogin::ENCRYPT_REQ | prelogin::ENCRYPT_ON)
        );
        if server_encrypts && !o.encrypt {
            return Err(Err(TdsError::Protocol(
                "the server requires encryption: connect with encryption (sqlcmd -N)",
            )));
        }
        if o.encrypt {
            if !server_encrypts {
                return Err(Err(TdsError::Protocol(
                    "encryption was asked for and the server does not support it",
                )));
            }
            let tls = crate::tls::client_handshake(stream, o, addr).map_err(Err)?;
            c.stream = Box::new(tls);
        }
        let login = Login7 {
            tds_version: login7::TDS_74,
            packet_size: o.packet_size,
            client_pid: std::process::id(),
            // USE_DB_ON, INIT_DB_FATAL, SET_LANG_ON; ODBC-like flags.
            option_flags1: 0xE0,
            option_flags2: 0x03,
            type_flags: 0,
            option_flags3: 0,
            host_name: crate::server::host_name(),
            user_name: o.user.clone(),
            password: o.password.clone(),
            app_name: o.app_name.clone(),
            server_name: addr.to_string(),
            library_name: "extentdb".into(),
            language: String::new(),
            database: o.database.clone().unwrap_or_default(),
            integrated_security: false,
        };
        c.send(PacketType::Login7, &login7::encode(&login))
            .map_err(Err)?;
        let r = c.read_response().map_err(Err)?;
        if r.errors().next().is_some() || r.final_status & token::DONE_ERROR != 0 {
            return Err(Ok(r));
        }
        Ok(c)
    }

    /// The current database, as the server's ENVCHANGEs say.
    pub fn database(&self) -> &str {
        &self.state.database
    }

    fn send(&mut self, kind: PacketType, payload: &[u8]) -> Result<(), TdsError> {
        write_message(&mut self.stream, kind, payload, self.state.packet_size, 0)?;
        Ok(())
    }

    fn receive(&mut self) -> Result<Vec<u8>, TdsError> {
        match read_message(&mut self.stream, 32767, 1 << 30)? {
            Some(m) => Ok(m.payload),
            None => Err(TdsError::Protocol("the server closed the connection")),
        }
    }

    /// ALL_HEADERS with the transaction descriptor header.
    fn all_headers(&self) -> Vec<u8> {
        crate::request::all_headers_with(self.state.transaction)
    }

    /// Sends a batch and reads its whole response.
    pub fn batch(&mut self, text: &str) -> Result<Response, TdsError> {
        self.send_batch(text)?;
        self.read_response()
    }

    /// Sends a batch without reading the response (to cancel it with `attention`).
    pub fn send_batch(&mut self, text: &str) -> Result<(), TdsError> {
        let mut b = self.all_headers();
        put_utf16(&mut b, text);
        self.send(PacketType::SqlBatch, &b)
    }

    /// Sends an attention (cancel) for the running request. The server's answer ends with
    /// DONE and the ATTN bit; read it with `read_response`, possibly after the rest of the
    /// cancelled request's response.
    pub fn attention(&mut self) -> Result<(), TdsError> {
        self.send(PacketType::Attention, &[])
    }

    /// Calls sp_executesql with typed parameters (`(name, type, value)`); the RPC path
    /// tedious and tiberius take for every query.
    pub fn execute_sql(
        &mut self,
        text: &str,
        params: &[(&str, SqlType, Value)],
    ) -> Result<Response, TdsError> {
        let mut b = self.all_headers();
        b.extend_from_slice(&0xFFFFu16.to_le_bytes());
        b.extend_from_slice(&10u16.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        let nvarchar_max = SqlType::NVarChar(extentdb_sql::types::MAX_LENGTH);
        let put_param = |b: &mut Vec<u8>, name: &str, t: SqlType, v: &Value| {
            crate::wire::put_b_varchar(b, name);
            b.push(0);
            crate::types::put_type_info(b, t);
            crate::types::put_value(b, t, v);
        };
        put_param(&mut b, "", nvarchar_max, &Value::Text(text.into()));
        let defs: Vec<String> = params
            .iter()
            .map(|(n, t, _)| format!("{n} {}", type_name(*t)))
            .collect();
        if !params.is_empty() {
            put_param(&mut b, "", nvarchar_max, &Value::Text(defs.join(", ")));
        }
        for (n, t, v) in params {
            put_param(&mut b, n, *t, v);
        }
        self.send(PacketType::Rpc, &b)?;
        self.read_response()
    }

    /// Calls procedure `name` by RPC with typed parameters (`(name or "", type, value,
    /// OUTPUT)`): its RETURNSTATUS and the OUTPUT parameters' RETURNVALUEs come back in the
    /// response.
    pub fn call_procedure(
        &mut self,
        name: &str,
        params: &[(&str, SqlType, Value, bool)],
    ) -> Result<Response, TdsError> {
        let mut b = self.all_headers();
        let units: Vec<u16> = name.encode_utf16().collect();
        b.extend_from_slice(&(units.len() as u16).to_le_bytes());
        for u in units {
            b.extend_from_slice(&u.to_le_bytes());
        }
        b.extend_from_slice(&0u16.to_le_bytes());
        for (n, t, v, output) in params {
            crate::wire::put_b_varchar(&mut b, n);
            b.push(u8::from(*output));
            crate::types::put_type_info(&mut b, *t);
            crate::types::put_value(&mut b, *t, v);
        }
        self.send(PacketType::Rpc, &b)?;
        self.read_response()
    }

    /// Sends raw bytes (tests of malformed input).
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<(), TdsError> {
        self.stream.write_all(bytes)?;
        Ok(())
    }

    /// Reads one response message and decodes its tokens.
    pub fn read_response(&mut self) -> Result<Response, TdsError> {
        let payload = self.receive()?;
        self.state.decode(&payload)
    }
}

impl ClientState {
    /// Decodes a response's tokens, following its ENVCHANGEs.
    pub fn decode(&mut self, payload: &[u8]) -> Result<Response, TdsError> {
        let mut r = Response::default();
        let mut c = Cursor::new(payload);
        let mut columns: Vec<(String, WireType)> = Vec::new();
        let mut rows: Vec<Vec<Value>> = Vec::new();
        let mut in_rows = false;
        let flush = |r: &mut Response,
                     columns: &[(String, WireType)],
                     rows: &mut Vec<Vec<Value>>,
                     in_rows: &mut bool| {
            if *in_rows {
                r.outputs.push(Output::Rows {
                    columns: columns
                        .iter()
                        .map(|(n, w)| (n.clone(), w.sql_type))
                        .collect(),
                    rows: std::mem::take(rows),
                });
                *in_rows = false;
            }
        };
        while !c.at_end() {
            let t = c.u8()?;
            match t {
                token::COLMETADATA => {
                    flush(&mut r, &columns, &mut rows, &mut in_rows);
                    let n = c.u16()?;
                    columns.clear();
                    if n != 0xFFFF {
                        for _ in 0..n {
                            let _user_type = c.u32()?;
                            let _flags = c.u16()?;
                            let w = read_type_info(&mut c)?;
                            if matches!(
                                w.code,
                                crate::types::TEXT | crate::types::NTEXT | crate::types::IMAGE
                            ) {
                                let parts = c.u8()?;
                                for _ in 0..parts {
                                    c.us_varchar()?;
                                }
                            }
                            columns.push((c.b_varchar()?, w));
                        }
                        in_rows = true;
                    }
                }
                token::ROW => {
                    let mut row = Vec::with_capacity(columns.len());
                    for (_, w) in &columns {
                        row.push(read_value(&mut c, w)?);
                    }
                    rows.push(row);
                }
                token::NBCROW => {
                    let bitmap = c.bytes(columns.len().div_ceil(8))?.to_vec();
                    let mut row = Vec::with_capacity(columns.len());
                    for (i, (_, w)) in columns.iter().enumerate() {
                        if bitmap[i / 8] & (1 << (i % 8)) != 0 {
                            row.push(Value::Null);
                        } else {
                            row.push(read_value(&mut c, w)?);
                        }
                    }
                    rows.push(row);
                }
                token::DONE | token::DONEPROC | token::DONEINPROC => {
                    flush(&mut r, &columns, &mut rows, &mut in_rows);
                    let status = c.u16()?;
                    let cmd = c.u16()?;
                    let count = c.u64()?;
                    r.dones.push((t, status, cmd, count));
                    if status & token::DONE_COUNT != 0 {
                        r.outputs.push(Output::RowsAffected(count));
                    }
                    r.final_status = status;
                }
                token::ERROR | token::INFO => {
                    flush(&mut r, &columns, &mut rows, &mut in_rows);
                    let len = c.u16()? as usize;
                    let body = c.bytes(len)?;
                    let mut m = Cursor::new(body);
                    let number = m.u32()? as i32;
                    let state = m.u8()?;
                    let severity = m.u8()?;
                    let text = m.us_varchar()?;
                    r.server = m.b_varchar()?;
                    let procedure = m.b_varchar()?;
                    let line = m.u32()?;
                    let e = SqlError {
                        number,
                        severity,
                        state,
                        text,
                        line,
                        procedure: (!procedure.is_empty()).then_some(procedure),
                    };
                    r.outputs.push(if t == token::INFO {
                        Output::Info(e)
                    } else {
                        Output::Error(e)
                    });
                }
                token::ENVCHANGE => {
                    let len = c.u16()? as usize;
                    let body = c.bytes(len)?;
                    let mut e = Cursor::new(body);
                    match e.u8()? {
                        token::ENV_DATABASE => {
                            let new = e.b_varchar()?;
                            let old = e.b_varchar()?;
                            self.database = new.clone();
                            r.outputs
                                .push(Output::EnvChange(EnvChange::Database { old, new }));
                        }
                        token::ENV_PACKET_SIZE => {
                            if let Ok(n) = e.b_varchar()?.parse::<usize>() {
                                self.packet_size = n.clamp(512, 32767);
                            }
                        }
                        token::ENV_BEGIN_TRAN => {
                            let n = e.u8()? as usize;
                            let d = e.bytes(n)?;
                            if d.len() == 8 {
                                self.transaction = u64::from_le_bytes(d.try_into().unwrap());
                                r.outputs
                                    .push(Output::EnvChange(EnvChange::BeginTransaction(
                                        self.transaction,
                                    )));
                            }
                        }
                        token::ENV_COMMIT_TRAN | token::ENV_ROLLBACK_TRAN => {
                            self.transaction = 0;
                        }
                        _ => {}
                    }
                }
                token::LOGINACK => {
                    let len = c.u16()? as usize;
                    c.bytes(len)?;
                }
                token::RETURNSTATUS => r.return_status = Some(c.u32()? as i32),
                token::RETURNVALUE => {
                    let _ordinal = c.u16()?;
                    let name = c.b_varchar()?;
                    let _status = c.u8()?;
                    let _user_type = c.u32()?;
                    let _flags = c.u16()?;
                    let w = read_type_info(&mut c)?;
                    let v = read_value(&mut c, &w)?;
                    r.return_values.push((name, v));
                }
                // ORDER, COLINFO, TABNAME, SSPI: length-prefixed, skipped.
                0xA9 | 0xA5 | 0xA4 | 0xED => {
                    let len = c.u16()? as usize;
                    c.bytes(len)?;
                }
                _ => return Err(TdsError::Protocol("unknown token in a response")),
            }
        }
        flush(&mut r, &columns, &mut rows, &mut in_rows);
        Ok(r)
    }
}

/// A type as a parameter definition names it.
fn type_name(t: SqlType) -> String {
    let n = |n: u32| {
        if n == extentdb_sql::types::MAX_LENGTH {
            "max".to_string()
        } else {
            n.to_string()
        }
    };
    match t {
        SqlType::Bit => "bit".into(),
        SqlType::TinyInt => "tinyint".into(),
        SqlType::SmallInt => "smallint".into(),
        SqlType::Int => "int".into(),
        SqlType::BigInt => "bigint".into(),
        SqlType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
        SqlType::Float => "float".into(),
        SqlType::Real => "real".into(),
        SqlType::Char(x) => format!("char({})", n(x)),
        SqlType::VarChar(x) => format!("varchar({})", n(x)),
        SqlType::NChar(x) => format!("nchar({})", n(x)),
        SqlType::NVarChar(x) => format!("nvarchar({})", n(x)),
        SqlType::Binary(x) => format!("binary({})", n(x)),
        SqlType::VarBinary(x) => format!("varbinary({})", n(x)),
        SqlType::Date => "date".into(),
        SqlType::DateTime => "datetime".into(),
        SqlType::DateTime2(s) => format!("datetime2({s})"),
        SqlType::UniqueIdentifier => "uniqueidentifier".into(),
    }
}
