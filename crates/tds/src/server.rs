//! `extentdb serve`: a TCP listener, one thread per connection, each connection one engine
//! session (its own spid, database, SET options and transaction).
//!
//! A connection: PRELOGIN, LOGIN7 (SQL authentication against the instance's logins), then
//! requests until the client leaves. The connection's thread reads its own requests; while
//! one runs, the socket is armed with the process's attention watcher (attention.rs), so
//! an attention (cancel) reaches the running batch at once: it sets the session's cancel
//! flag, the batch stops before its next statement or loop iteration, and the server
//! answers with DONE and the ATTN bit.
//!
//! Invariants:
//! 1. Nothing a client sends can stop the server: a malformed message closes that
//!    connection (logged as SQL Server logs 17836), never the process; a request over
//!    the limit is dropped unread and refused with Msg 701, the connection goes on.
//! 2. A connection that goes away rolls back its open transaction (the session's drop).
//! 3. Every request gets exactly one final DONE / DONEPROC (no MORE bit), or DONE with ATTN
//!    after an attention.
//! 4. Passwords never reach the error log.
//! 5. A panic in a connection's thread ends that connection only: it is caught, written
//!    to the error log (3624), and the database the session held is poisoned (needs a
//!    reopen) while its lock stays usable (`SharedDatabase`), so master and every other
//!    database go on serving logins and sessions.
//! 6. Connections that have not logged in cannot keep others out (login_guard.rs).

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use extentdb_sql::convert::convert;
use extentdb_sql::exec::{ClientInfo, Engine, Output, OutputSink, Session};
use extentdb_sql::messages::{msg, SqlError};
use extentdb_sql::parser::{parse_parameter_definitions, ParameterDefinition};
use extentdb_sql::types::{SqlType, Value};
use extentdb_storage::instance::ConnectionInfo;

use crate::admission::{LargeRequests, Permit};
use crate::definitions::DefinitionCache;
use crate::login7::{self, Login7};
use crate::login_guard::{LoginGuard, PendingLogin};
use crate::packet::{
    read_message, read_request, write_message, PacketType, Refusal, Request, INITIAL_PACKET_SIZE,
    MAX_PACKET_SIZE, STATUS_RESET_CONNECTION,
};
use crate::prelogin;
use crate::request::{self, RpcCall, RpcParam, TmRequest};
use crate::response::{Encoder, Reply, Streaming};
use crate::token::{self, TdsVersion, Tokens};
use crate::TdsError;

/// How the server listens and what it allows.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub listen: String,
    /// Connections beyond this many are refused at once (SQL Server's 'user connections').
    pub max_connections: usize,
    /// The largest request message (a batch's text, an RPC) accepted, in bytes.
    pub max_request_bytes: usize,
    /// The server's name in ERROR and INFO tokens (@@SERVERNAME).
    pub server_name: String,
    /// Refuse clients that do not encrypt (`--require-encryption`).
    pub require_encryption: bool,
    /// A connection that has not logged in by then is closed (SQL Server's 60 s).
    pub login_timeout: std::time::Duration,
    /// Connections between accept and login at once (login_guard.rs invariant 1).
    pub max_pending_logins: usize,
    /// Requests past `large_request_bytes` take one of this many slots (admission.rs).
    pub large_request_slots: usize,
    pub large_request_bytes: usize,
    /// How long a large request waits for a slot before Msg 8645.
    pub large_request_wait: std::time::Duration,
}

impl Default for ServerOptions {
    fn default() -> ServerOptions {
        ServerOptions {
            listen: "127.0.0.1:1433".into(),
            max_connections: 500,
            max_request_bytes: 64 << 20,
            server_name: host_name(),
            require_encryption: false,
            login_timeout: std::time::Duration::from_secs(60),
            max_pending_logins: 64,
            large_request_slots: 1,
            large_request_bytes: 2 << 20,
            large_request_wait: std::time::Duration::from_secs(60),
        }
    }
}

/// The machine's host name (for @@SERVERNAME-like fields).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

pub struct Server {
    engine: Arc<Engine>,
    options: ServerOptions,
    listener: TcpListener,
    active: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    /// The TLS configuration when the server has a certificate.
    tls: Option<Arc<rustls::ServerConfig>>,
    /// Connections not yet logged in, and addresses' failed logins.
    guard: Arc<LoginGuard>,
    /// Requests larger than a connection's allowance take turns (admission.rs).
    large: Arc<LargeRequests>,
}

/// A connection's byte stream after the handshake: the socket itself, or the plaintext end
/// of the TLS pump.
enum Transport {
    Tcp(TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Transport {
    fn try_clone(&self) -> std::io::Result<Transport> {
        Ok(match self {
            Transport::Tcp(s) => Transport::Tcp(s.try_clone()?),
            Transport::Unix(s) => Transport::Unix(s.try_clone()?),
        })
    }

    fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Transport::Tcp(s) => s.set_read_timeout(t),
            Transport::Unix(s) => s.set_read_timeout(t),
        }
    }

    fn shutdown_read(&self) {
        let _ = match self {
            Transport::Tcp(s) => s.shutdown(std::net::Shutdown::Read),
            Transport::Unix(s) => s.shutdown(std::net::Shutdown::Read),
        };
    }

    fn shutdown(&self) {
        let _ = match self {
            Transport::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
            Transport::Unix(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }
}

impl std::os::fd::AsRawFd for Transport {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        match self {
            Transport::Tcp(s) => s.as_raw_fd(),
            Transport::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl std::io::Read for Transport {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Transport::Tcp(s) => s.read(buf),
            Transport::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Transport::Tcp(s) => s.write(buf),
            Transport::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Transport::Tcp(s) => s.flush(),
            Transport::Unix(s) => s.flush(),
        }
    }
}

impl Server {
    /// Listens with TLS available when `tls` is given (clients that ask for encryption get
    /// it; with `require_encryption`, every client must).
    pub fn bind(
        engine: Arc<Engine>,
        options: ServerOptions,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> std::io::Result<Server> {
        let listener = TcpListener::bind(&options.listen)?;
        let addr = listener.local_addr()?;
        engine.instance.errorlog.write(
            "Server",
            &format!(
                "Server is listening on [ {} <ipv{}> {}].",
                addr.ip(),
                if addr.is_ipv4() { 4 } else { 6 },
                addr.port()
            ),
        );
        let guard = LoginGuard::new(
            options.max_pending_logins,
            options.login_timeout,
            engine.instance.errorlog.clone(),
        );
        let large = LargeRequests::new(
            options.large_request_slots.max(1),
            options.large_request_bytes,
            options.large_request_wait,
        );
        Ok(Server {
            guard,
            large,
            engine,
            options,
            listener,
            active: Arc::new(AtomicUsize::new(0)),
            stop: Arc::new(AtomicBool::new(false)),
            tls,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// A flag that makes `run` return after the next connection attempt.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Accepts connections until the stop flag is set; each runs on its own thread.
    pub fn run(&self) {
        self.guard.spawn_reaper(self.stop.clone());
        for stream in self.listener.incoming() {
            if self.stop.load(Ordering::Acquire) {
                break;
            }
            let Ok(stream) = stream else { continue };
            if self.active.load(Ordering::Acquire) >= self.options.max_connections {
                let peer = stream.peer_addr().map(|a| a.ip().to_string());
                self.engine.instance.errorlog.write(
                    "Logon",
                    &format!(
                        "Could not connect because the maximum number of '{}' user connections has already been reached. [CLIENT: {}]",
                        self.options.max_connections,
                        peer.unwrap_or_default()
                    ),
                );
                drop(stream);
                continue;
            }
            let Ok(pending) = self.guard.admit(&stream) else {
                continue;
            };
            self.active.fetch_add(1, Ordering::AcqRel);
            let guard = self.guard.clone();
            let large = self.large.clone();
            let engine = self.engine.clone();
            let options = self.options.clone();
            let active = self.active.clone();
            let tls = self.tls.clone();
            let spawned = std::thread::Builder::new()
                .name("tds-connection".into())
                .spawn(move || {
                    let _ = stream.set_nodelay(true);
                    let peer = stream
                        .peer_addr()
                        .map(|a| a.ip().to_string())
                        .unwrap_or_default();
                    let log = engine.instance.errorlog.clone();
                    let login = Login {
                        pending,
                        guard,
                        large,
                    };
                    // Invariant 5: a panic ends this connection only.
                    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        Connection::run(engine, options, tls, stream, login)
                    }));
                    let run = run.unwrap_or_else(|_| {
                        log.write(
                            "Server",
                            &format!("Error: 3624, Severity: 20, State: 1.\nA system assertion check has failed: a session ended with an internal error; a database it held is marked as needing a reopen. [CLIENT: {peer}]"),
                        );
                        Ok(())
                    });
                    if let Err(e) = run {
                        if let TdsError::Protocol(_) | TdsError::TooLarge(_) = e {
                            log.write(
                                "Logon",
                                &format!(
                                    "Error: 17836, Severity: 20, State: 17.\n{} [CLIENT: {peer}]",
                                    msg(17836, &[&format!(" ({e})")]).text
                                ),
                            );
                        }
                    }
                    active.fetch_sub(1, Ordering::AcqRel);
                });
            if spawned.is_err() {
                self.active.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

/// A connection's standing until it has logged in (login_guard.rs).
struct Login {
    /// Its place among pending connections, given up once LOGIN7 is answered.
    pending: PendingLogin,
    guard: Arc<LoginGuard>,
    /// The instance's large-request slots (admission.rs), taken by its requests later.
    large: Arc<LargeRequests>,
}

/// A statement prepared by sp_prepare / sp_prepexec.
struct Prepared {
    definitions: Vec<ParameterDefinition>,
    text: String,
}

struct Connection {
    options: ServerOptions,
    /// The connection's byte stream, read and written by its own thread only.
    stream: Transport,
    /// What was received from `stream` and not yet read (inbox.rs).
    inbox: crate::inbox::Inbox,
    packet_size: usize,
    /// The TDS version the login negotiated: the tokens' layout (token.rs `TdsVersion`).
    version: TdsVersion,
    session: Session,
    /// The database the login chose (sp_reset_connection returns to it).
    login_database: u16,
    prepared: HashMap<i32, Prepared>,
    next_handle: i32,
    /// Attentions already answered by a cancelled request's DONE(ATTN), whose messages
    /// are still to be read from the stream.
    answered_attentions: usize,
    /// Set when the running RPC call's statements raised an error (DONEPROC's ERROR bit).
    proc_error: bool,
    /// The RETURN status of the user procedure an RPC call just ran (`exec_procedure`),
    /// for its RETURNSTATUS token; None for anything else.
    proc_status: Option<i32>,
    /// sp_executesql parameter definition lists already parsed (definitions.rs).
    definitions: DefinitionCache,
}

/// PRELOGIN's answer, the TLS handshake it agreed on, and the LOGIN7 after it: over TLS
/// (all traffic, or the login only) or in the clear.
fn prelogin_then_login(
    mut tcp: TcpStream,
    payload: &[u8],
    tls: Option<Arc<rustls::ServerConfig>>,
    options: &ServerOptions,
) -> Result<(Transport, Option<crate::packet::Message>), TdsError> {
    let pre = prelogin::decode(payload)?;
    let encryption = prelogin::negotiate(
        pre.encryption.unwrap_or(prelogin::ENCRYPT_NOT_SUP),
        tls.is_some(),
        options.require_encryption,
    )?;
    write_message(
        &mut tcp,
        PacketType::TabularResult,
        &prelogin::server_response(encryption),
        INITIAL_PACKET_SIZE,
        0,
    )?;
    Ok(match (encryption, tls) {
        (prelogin::ENCRYPT_OFF, Some(config)) => {
            let mut conn = crate::tls::handshake(&mut tcp, config)?;
            let m = crate::tls::read_login_over_tls(&mut tcp, &mut conn)?;
            (Transport::Tcp(tcp), m)
        }
        (prelogin::ENCRYPT_ON | prelogin::ENCRYPT_REQ, Some(config)) => {
            let conn = crate::tls::handshake(&mut tcp, config)?;
            let mut plain = crate::tls::pump(tcp, conn)?;
            let m = read_message(&mut plain, INITIAL_PACKET_SIZE, 128 << 10)?;
            (Transport::Unix(plain), m)
        }
        _ => {
            let m = read_message(&mut tcp, INITIAL_PACKET_SIZE, 128 << 10)?;
            (Transport::Tcp(tcp), m)
        }
    })
}

/// A request read, and the large-request slot it holds (admission.rs).
type Incoming = (Request, Option<Permit>);

/// How often an idle connection looks at its session's KILL flag.
const IDLE_CHECK: Duration = Duration::from_millis(200);

impl Connection {
    fn run(
        engine: Arc<Engine>,
        options: ServerOptions,
        tls: Option<Arc<rustls::ServerConfig>>,
        mut tcp: TcpStream,
        standing: Login,
    ) -> Result<(), TdsError> {
        let peer_ip = tcp.peer_addr().map(|a| a.ip()).ok();
        let peer = peer_ip.map(|a| a.to_string()).unwrap_or_default();
        let ends = (tcp.peer_addr().ok(), tcp.local_addr().ok());
        let Some(m) = read_message(&mut tcp, INITIAL_PACKET_SIZE, 128 << 10)? else {
            return Ok(());
        };
        let (transport, m) = match m.kind {
            // A client that skips PRELOGIN (jTDS with ssl=off) logs in in the clear, as
            // SQL Server lets it unless encryption is required.
            PacketType::Login7 if !options.require_encryption => (Transport::Tcp(tcp), Some(m)),
            PacketType::PreLogin => prelogin_then_login(tcp, &m.payload, tls, &options)?,
            _ => return Err(TdsError::Protocol("the first message is not PRELOGIN")),
        };
        let Some(m) = m else {
            return Ok(());
        };
        let mut stream = transport;
        if m.kind != PacketType::Login7 {
            return Err(TdsError::Protocol("expected LOGIN7"));
        }
        let login = login7::decode(&m.payload)?;
        let version = TdsVersion::negotiate(login.tds_version)
            .ok_or(TdsError::Protocol("TDS versions before 7.1 are not served"))?;
        let wait = peer_ip.map_or(Duration::ZERO, |a| standing.guard.backoff(a));
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        let default_database = match authenticate(&engine, &login) {
            Ok(db) => db,
            Err(failure) => {
                let failures = peer_ip.map_or(1, |a| standing.guard.failed(a));
                engine.instance.errorlog.write(
                    "Logon",
                    &format!("Error: 18456, Severity: 14, State: {}.", failure.log_state),
                );
                engine.instance.errorlog.write(
                    "Logon",
                    &format!(
                        "{} [CLIENT: {peer}] (failed logins from this address in the last {} s: {failures})",
                        failure.log_text,
                        crate::login_guard::FAILURE_WINDOW.as_secs()
                    ),
                );
                let mut t = Tokens::for_version(version);
                t.message(&failure.client, &options.server_name);
                t.done(token::DONE, token::DONE_ERROR, 0, 0);
                write_message(
                    &mut stream,
                    PacketType::TabularResult,
                    &t.buf,
                    INITIAL_PACKET_SIZE,
                    0,
                )?;
                return Err(TdsError::LoginFailed);
            }
        };
        let packet_size = match login.packet_size as usize {
            0 => INITIAL_PACKET_SIZE,
            n => n.clamp(512, MAX_PACKET_SIZE),
        };
        let connection = ConnectionInfo {
            client_net_address: ends.0.map(|a| a.ip().to_string()).unwrap_or_default(),
            client_tcp_port: ends.0.map_or(0, |a| a.port()),
            local_net_address: ends.1.map(|a| a.ip().to_string()).unwrap_or_default(),
            local_tcp_port: ends.1.map_or(0, |a| a.port()),
            encrypted: matches!(stream, Transport::Unix(_)),
            protocol_version: version.0,
            net_packet_size: packet_size as u32,
        };
        let mut session = engine.session_for(ClientInfo {
            login_name: login.user_name.clone(),
            host_name: login.host_name.clone(),
            program_name: login.app_name.clone(),
            client_interface_name: login.library_name.clone(),
            connection: Some(connection),
        });
        let mut t = Tokens::for_version(version);
        // The database the login asks for, else the login's default database.
        let database = if login.database.is_empty() {
            default_database
        } else {
            login.database.clone()
        };
        if !database.eq_ignore_ascii_case("master") {
            let out = session.execute(&format!("USE [{}]", database.replace(']', "]]")));
            let error = out.iter().find_map(|o| match o {
                Output::Error(e) => Some(e),
                _ => None,
            });
            if let Some(e) = error {
                // A SINGLE_USER database another session is in: the client learns why.
                if e.number == 924 {
                    t.message(e, &options.server_name);
                }
                t.message(&msg(4060, &[&database]), &options.server_name);
                let failed = msg(18456, &[&login.user_name, &"", &""]);
                t.message(&failed, &options.server_name);
                t.done(token::DONE, token::DONE_ERROR, 0, 0);
                write_message(
                    &mut stream,
                    PacketType::TabularResult,
                    &t.buf,
                    packet_size,
                    0,
                )?;
                return Err(TdsError::LoginFailed);
            }
        }
        let db_name = session_db_name(&session);
        t.env_text(token::ENV_DATABASE, &db_name, "master");
        t.message(&msg(5701, &[&db_name]), &options.server_name);
        t.env_bytes(token::ENV_COLLATION, &crate::types::COLLATION, &[]);
        t.env_text(token::ENV_LANGUAGE, "us_english", "");
        t.message(&msg(5703, &[&"us_english"]), &options.server_name);
        let ps = packet_size.to_string();
        t.env_text(token::ENV_PACKET_SIZE, &ps, &ps);
        t.login_ack(version.0, prelogin::SERVER_VERSION);
        t.done(token::DONE, token::DONE_FINAL, 0, 0);
        write_message(
            &mut stream,
            PacketType::TabularResult,
            &t.buf,
            packet_size,
            session.spid,
        )?;
        if let Some(a) = peer_ip {
            standing.guard.succeeded(a);
        }
        drop(standing.pending);

        // KILL shuts the socket's read side: a thread blocked in a request the client
        // never finished wakes (EOF) and the connection ends.
        let for_kill = stream.try_clone()?;
        session.set_kill_hook(Box::new(move || for_kill.shutdown_read()));
        let login_database = session.database_id;
        let mut conn = Connection {
            options,
            stream,
            inbox: Default::default(),
            packet_size,
            version,
            session,
            login_database,
            prepared: HashMap::new(),
            next_handle: 1,
            answered_attentions: 0,
            proc_error: false,
            proc_status: None,
            definitions: DefinitionCache::default(),
        };
        let result = conn.serve(&standing.large);
        conn.stream.shutdown();
        result
    }

    /// The next request, read by this thread once the client sends one; None when the
    /// client leaves or the session is killed (KILL is seen within `IDLE_CHECK`: the
    /// socket's receive timeout, inbox.rs).
    fn next_request(&mut self, large: &Arc<LargeRequests>) -> Result<Option<Incoming>, TdsError> {
        if self.session.killed() {
            return Ok(None);
        }
        let mut permit = None;
        let mut admit = || {
            permit = large.acquire();
            permit.is_some()
        };
        let limit = self.options.max_request_bytes;
        let info = &self.session;
        let killed = || info.killed();
        let mut reader = self.inbox.reader(&mut self.stream, &killed);
        let m = read_request(
            &mut reader,
            self.packet_size,
            limit,
            large.threshold,
            &mut admit,
        );
        match m {
            Err(TdsError::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionAborted => Ok(None),
            Err(e) => Err(e),
            Ok(m) => Ok(m.map(|m| (m, permit))),
        }
    }

    fn serve(&mut self, large: &Arc<LargeRequests>) -> Result<(), TdsError> {
        self.stream.set_read_timeout(Some(IDLE_CHECK))?;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.stream);
        let watched =
            crate::attention::AttentionWatch::get()?.register(fd, &self.session.cancel_flag());
        loop {
            let Some(m) = self.next_request(large)? else {
                return Ok(());
            };
            // The slot (if any) is given back when this request's answer is sent.
            let (m, _permit) = m;
            let m = match m {
                Request::Message(m) => m,
                Request::Refused { kind, bytes, why } => {
                    self.refuse(kind, bytes, why)?;
                    continue;
                }
            };
            let mut reply = Reply::new(self.packet_size, self.session.spid, self.version);
            if m.status & STATUS_RESET_CONNECTION != 0 {
                self.session.reset_connection(self.login_database);
                self.prepared.clear();
                reply.t.env_text(token::ENV_RESET_ACK, "", "");
            }
            if m.kind == PacketType::Attention {
                if self.answered_attentions > 0 {
                    self.answered_attentions -= 1;
                } else {
                    self.session.take_cancel();
                    reply.t.done(token::DONE, token::DONE_ATTN, 0, 0);
                    reply.finish(&mut self.stream)?;
                }
                continue;
            }
            // While the request runs, bytes from the client are its attention.
            let running = watched.running();
            if self.inbox.pending() {
                // Bytes that came with the request came while it was outstanding: an
                // attention (inbox.rs invariant 2), as the watcher would have seen them.
                self.session
                    .cancel_flag()
                    .store(true, std::sync::atomic::Ordering::Release);
            }
            match m.kind {
                PacketType::SqlBatch => {
                    let text = request::sql_batch(&m.payload)?;
                    drop(m);
                    let error = self.stream(&mut reply, token::DONE, |s, sink| {
                        s.execute_streaming(&text, Vec::new(), sink)
                    })?;
                    let in_xact = self.session.trancount() > 0;
                    finish(&mut reply.t, token::DONE, error, in_xact);
                }
                PacketType::Rpc => {
                    let calls = request::rpc(&m.payload)?;
                    drop(m);
                    let n = calls.len();
                    for (i, call) in calls.into_iter().enumerate() {
                        self.rpc(call, &mut reply, i + 1 == n)?;
                        if self.session.cancelled() {
                            break;
                        }
                    }
                }
                PacketType::TransactionManager => {
                    let out = self.transaction_manager(&m.payload)?;
                    let mut enc = Encoder::new(token::DONE, &self.options.server_name);
                    for o in &out {
                        enc.add(o, &mut reply.t);
                    }
                    let error = enc.end(&mut reply.t);
                    finish(
                        &mut reply.t,
                        token::DONE,
                        error,
                        self.session.trancount() > 0,
                    );
                }
                _ => return Err(TdsError::Protocol("unexpected message type after login")),
            }
            // Disarmed before the answer's last packet: the client may send its next
            // request as soon as that arrives (attention.rs invariant 1).
            drop(running);
            if self.session.take_cancel() {
                // Invariant 3: a cancelled request's answer ends with DONE and ATTN; what
                // went out already is followed by it, else it is the whole answer.
                self.answered_attentions += 1;
                if !reply.started() {
                    reply.discard();
                }
                reply.t.done(token::DONE, token::DONE_ATTN, 0, 0);
            }
            reply.finish(&mut self.stream)?;
        }
    }

    /// A request read to its end and dropped (packet.rs invariant 1) gets SQL Server's
    /// message and ERRORLOG line, and the session goes on: over `--max-request-mb`, Msg
    /// 701; no large-request slot in time (admission.rs), Msg 8645. An attention cannot be
    /// refused (it has no payload).
    fn refuse(&mut self, kind: PacketType, bytes: usize, why: Refusal) -> Result<(), TdsError> {
        let (e, detail) = match why {
            Refusal::TooLarge => (
                msg(701, &[&"default"]),
                format!(
                    "the limit is {} bytes, --max-request-mb",
                    self.options.max_request_bytes
                ),
            ),
            Refusal::NotAdmitted => (
                msg(8645, &[&"default", &2]),
                "no large-request slot came free in time (--large-request-slots)".to_string(),
            ),
        };
        self.session.engine.instance.errorlog.write(
            &format!("spid{}", self.session.spid),
            &format!(
                "Error: {}, Severity: {}, State: {}.\n{} (a {kind:?} request of {bytes} bytes; {detail})",
                e.number, e.severity, e.state, e.text
            ),
        );
        let mut reply = Reply::new(self.packet_size, self.session.spid, self.version);
        reply.t.message(&e, &self.options.server_name);
        let done = if kind == PacketType::Rpc {
            token::DONEPROC
        } else {
            token::DONE
        };
        finish(&mut reply.t, done, true, self.session.trancount() > 0);
        reply.finish(&mut self.stream)?;
        Ok(())
    }

    /// A transaction-manager request's outputs.
    fn transaction_manager(&mut self, payload: &[u8]) -> Result<Vec<Output>, TdsError> {
        Ok(match request::transaction_manager(payload)? {
            TmRequest::Begin => self.session.begin_transaction_request(),
            TmRequest::End {
                commit,
                begin_again,
            } => self.session.end_transaction_request(commit, begin_again),
            TmRequest::Save | TmRequest::Other(_) => {
                vec![Output::Error(SqlError {
                    number: 40512,
                    severity: 16,
                    state: 1,
                    text: "This transaction-manager request is not supported.".into(),
                    line: 1,
                    procedure: None,
                })]
            }
        })
    }

    /// Runs `f` with a sink that streams its outputs into `reply` (statement ends as
    /// `done_token`), sending full packets as they fill. Returns true if an error was
    /// among the outputs; a write that failed (the client left) ends the connection.
    fn stream(
        &mut self,
        reply: &mut Reply,
        done_token: u8,
        f: impl FnOnce(&mut Session, &mut dyn OutputSink),
    ) -> Result<bool, TdsError> {
        let mut sink = Streaming {
            encoder: Encoder::new(done_token, &self.options.server_name),
            reply,
            writer: &mut self.stream,
            failed: None,
        };
        f(&mut self.session, &mut sink);
        if let Some(e) = sink.failed {
            return Err(TdsError::Io(e));
        }
        Ok(sink.encoder.end(&mut sink.reply.t))
    }

    /// One RPC call: the prepared-statement procedures and sp_executesql are the server's
    /// own; any other name runs as EXEC with the parameters, a user procedure's RETURN
    /// status then answered in RETURNSTATUS and its OUTPUT parameters in RETURNVALUEs.
    fn rpc(&mut self, call: RpcCall, reply: &mut Reply, last: bool) -> Result<(), TdsError> {
        let result = match call.proc.as_str() {
            "sp_executesql" => self.sp_executesql(&call.params, reply),
            "sp_prepare" => self.sp_prepare(&call.params, reply, false),
            "sp_prepexec" => self.sp_prepare(&call.params, reply, true),
            "sp_execute" => self.sp_execute(&call.params, reply),
            "sp_unprepare" => {
                if let Some(Value::Int(h)) = call.params.first().map(|p| &p.value) {
                    self.prepared.remove(h);
                }
                Ok(Vec::new())
            }
            name => self.exec_procedure(name, &call.params, reply),
        };
        let t = &mut reply.t;
        let (error, outputs) = match result {
            Ok(outputs) => (false, outputs),
            Err(RpcFailure::Sql(e)) => {
                t.message(&e, &self.options.server_name);
                (true, Vec::new())
            }
            Err(RpcFailure::Connection(e)) => return Err(e),
        };
        let error = error || std::mem::take(&mut self.proc_error);
        // A procedure's own RETURN status when it ran to its end, else 0 or 1.
        let status = self.proc_status.take().filter(|_| !error);
        t.return_status(status.unwrap_or(if error { 1 } else { 0 }));
        for (ordinal, name, ty, v) in outputs {
            t.return_value(ordinal, &name, ty, &v);
        }
        let mut status = if last { 0 } else { token::DONE_MORE };
        if error {
            status |= token::DONE_ERROR;
        }
        t.done(token::DONEPROC, status, 0, 0);
        Ok(())
    }

    fn sp_executesql(&mut self, params: &[RpcParam], reply: &mut Reply) -> RpcResult {
        let Some(stmt) = params.first() else {
            return Err(msg(8144, &[&"sp_executesql"]).into());
        };
        let text = text_of(&stmt.value);
        let (definitions, values) = match params.get(1) {
            // The definitions: positional, or named @params (tiberius sends `params`).
            Some(p)
                if p.name.is_empty()
                    || p.name
                        .trim_start_matches('@')
                        .eq_ignore_ascii_case("params") =>
            {
                (self.definitions(text_of(&p.value))?, &params[2..])
            }
            _ => (Arc::from([]), &params[1.min(params.len())..]),
        };
        self.run_with(text, &definitions, values, reply, 0)
    }

    /// The parse of a parameter definition list (definitions.rs).
    fn definitions(&mut self, text: &str) -> Result<Arc<[ParameterDefinition]>, SqlError> {
        self.definitions.get(text)
    }

    fn sp_prepare(&mut self, params: &[RpcParam], reply: &mut Reply, execute: bool) -> RpcResult {
        let proc = if execute { "sp_prepexec" } else { "sp_prepare" };
        if params.len() < 3 {
            return Err(msg(8144, &[&proc]).into());
        }
        let definitions =
            parse_parameter_definitions(text_of(&params[1].value)).map_err(SqlError::from)?;
        let text = text_of(&params[2].value).to_string();
        let handle = self.next_handle;
        self.next_handle += 1;
        self.prepared.insert(
            handle,
            Prepared {
                definitions: definitions.clone(),
                text: text.clone(),
            },
        );
        let mut outputs = vec![(1, params[0].name.clone(), SqlType::Int, Value::Int(handle))];
        if execute {
            outputs.extend(self.run_with(&text, &definitions, &params[3..], reply, 3)?);
        }
        Ok(outputs)
    }

    fn sp_execute(&mut self, params: &[RpcParam], reply: &mut Reply) -> RpcResult {
        let handle = match params.first().map(|p| &p.value) {
            Some(Value::Int(h)) => *h,
            _ => return Err(msg(8144, &[&"sp_execute"]).into()),
        };
        let Some(p) = self.prepared.get(&handle) else {
            return Err(msg(8179, &[&handle]).into());
        };
        let (text, definitions) = (p.text.clone(), p.definitions.clone());
        self.run_with(&text, &definitions, &params[1..], reply, 1)
    }

    /// Runs `text` with `values` bound to `definitions` (by name, else by position);
    /// returns the OUTPUT parameters' values. `first_ordinal` is the position of the first
    /// value among the RPC's parameters.
    fn run_with(
        &mut self,
        text: &str,
        definitions: &[ParameterDefinition],
        values: &[RpcParam],
        reply: &mut Reply,
        first_ordinal: u16,
    ) -> RpcResult {
        let mut bound = Vec::new();
        let mut outputs = Vec::new();
        for (i, d) in definitions.iter().enumerate() {
            let given = values
                .iter()
                .enumerate()
                .find(|(_, v)| v.name.eq_ignore_ascii_case(&d.name))
                .or_else(|| values.get(i).filter(|v| v.name.is_empty()).map(|v| (i, v)));
            let Some((pos, v)) = given else {
                return Err(msg(
                    8178,
                    &[&format!("({})", definitions_text(definitions)), &d.name],
                )
                .into());
            };
            let value = if v.value.is_null() {
                Value::Null
            } else {
                convert(&v.value, d.sql_type, None)?
            };
            bound.push((d.name.clone(), d.sql_type, value));
            if d.output && v.output {
                outputs.push((first_ordinal + pos as u16, d.name.clone(), d.sql_type));
            }
        }
        self.proc_error |= self.stream(reply, token::DONEINPROC, |s, sink| {
            s.execute_streaming(text, bound, sink)
        })?;
        Ok(outputs
            .into_iter()
            .map(|(ordinal, name, ty)| {
                let v = self
                    .session
                    .variable(&name)
                    .map(|(_, v)| v)
                    .unwrap_or(Value::Null);
                (ordinal, name, ty, v)
            })
            .collect())
    }

    /// Another procedure by name: EXEC name with the parameters as variables.
    fn exec_procedure(&mut self, name: &str, params: &[RpcParam], reply: &mut Reply) -> RpcResult {
        let mut args = Vec::new();
        let mut bound = Vec::new();
        let mut outputs = Vec::new();
        for (i, p) in params.iter().enumerate() {
            let var = format!("@__rpc{i}");
            let out = if p.output { " OUTPUT" } else { "" };
            if p.name.is_empty() {
                args.push(format!("{var}{out}"));
            } else {
                args.push(format!("{} = {var}{out}", p.name));
            }
            bound.push((var.clone(), p.sql_type, p.value.clone()));
            if p.output {
                outputs.push((i as u16, p.name.clone(), var, p.sql_type));
            }
        }
        // `EXEC @rc = ...`: a user procedure's RETURN status (most system procedures set none).
        let rc = "@__rpcrc";
        bound.push((rc.to_string(), SqlType::Int, Value::Null));
        let text = format!("EXEC {rc} = {} {}", quoted_multipart(name), args.join(", "));
        self.proc_error |= self.stream(reply, token::DONEINPROC, |s, sink| {
            s.execute_streaming(&text, bound, sink)
        })?;
        self.proc_status = match self.session.variable(rc) {
            Some((_, Value::Int(status))) => Some(status),
            _ => None,
        };
        Ok(outputs
            .into_iter()
            .map(|(ordinal, name, var, ty)| {
                let v = self
                    .session
                    .variable(&var)
                    .map(|(_, v)| v)
                    .unwrap_or(Value::Null);
                (ordinal, name, ty, v)
            })
            .collect())
    }
}

/// An RPC's procedure name (`sp_x`, `[db]..sp_x`, `db.dbo.sp_x`) as T-SQL, each part
/// bracket-quoted so no name can end the EXEC: parts split at dots outside brackets, an
/// empty part (the default schema of `db..sp_x`) kept empty.
fn quoted_multipart(name: &str) -> String {
    let mut parts = vec![String::new()];
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '[' => {
                while let Some(c) = chars.next() {
                    if c == ']' {
                        if chars.peek() == Some(&']') {
                            chars.next();
                        } else {
                            break;
                        }
                    }
                    parts.last_mut().expect("one part at least").push(c);
                }
            }
            '.' if parts.len() < 4 => parts.push(String::new()),
            c => parts.last_mut().expect("one part at least").push(c),
        }
    }
    parts
        .iter()
        .map(|p| match p.is_empty() {
            true => String::new(),
            false => format!("[{}]", p.replace(']', "]]")),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// OUTPUT parameters to return: (ordinal, name, type, value).
type RpcResult = Result<Vec<(u16, String, SqlType, Value)>, RpcFailure>;

/// Why an RPC call failed: a message for the client, or the connection itself.
enum RpcFailure {
    Sql(SqlError),
    Connection(TdsError),
}

impl From<SqlError> for RpcFailure {
    fn from(e: SqlError) -> RpcFailure {
        RpcFailure::Sql(e)
    }
}

impl From<TdsError> for RpcFailure {
    fn from(e: TdsError) -> RpcFailure {
        RpcFailure::Connection(e)
    }
}

/// Ends a request's tokens (invariant 3): the last token, if it is a DONE of this kind
/// with MORE, becomes the final one; else a final DONE is appended.
/// `in_xact` sets DONE_INXACT: a transaction is open when the request ends.
fn finish(t: &mut Tokens, done_token: u8, error: bool, in_xact: bool) {
    let mut extra = 0;
    if error {
        extra |= token::DONE_ERROR;
    }
    if in_xact {
        extra |= token::DONE_INXACT;
    }
    let n = t.buf.len();
    let len = t.done_len();
    // Only a DONE that is the very last token (not bytes of another token that look alike).
    if n >= len && t.last_done_at == Some(n - len) && t.buf[n - len] == done_token {
        let at = n - len + 1;
        let status = u16::from_le_bytes([t.buf[at], t.buf[at + 1]]);
        if status & token::DONE_MORE != 0 {
            let s = (status & !token::DONE_MORE) | extra;
            t.buf[at..at + 2].copy_from_slice(&s.to_le_bytes());
            return;
        }
    }
    t.done(done_token, extra, 0, 0);
}

fn session_db_name(s: &Session) -> String {
    s.engine
        .instance
        .database(s.database_id)
        .map(|d| d.read().unwrap().name.clone())
        .unwrap_or_else(|| "master".into())
}

fn text_of(v: &Value) -> &str {
    match v {
        Value::Text(s) => s,
        _ => "",
    }
}

fn definitions_text(d: &[ParameterDefinition]) -> String {
    d.iter()
        .map(|p| p.name.clone())
        .collect::<Vec<_>>()
        .join(",")
}

/// Why a login failed: what the client is told (always state 1, as SQL Server hides the
/// reason) and what the error log says (the real state and reason).
struct LoginFailure {
    client: SqlError,
    log_state: u8,
    log_text: String,
}

fn authenticate(engine: &Engine, login: &Login7) -> Result<String, LoginFailure> {
    let user = login.user_name.clone();
    if login.integrated_security {
        return Err(LoginFailure {
            client: msg(18452, &[&""]),
            log_state: 1,
            log_text: msg(18452, &[&""]).text,
        });
    }
    match engine.instance.logins.authenticate(&user, &login.password) {
        Ok(l) => Ok(l.default_database),
        Err(refusal) => Err(LoginFailure {
            client: msg(18456, &[&user, &"", &""]),
            log_state: refusal.state(),
            log_text: format!(
                "Login failed for user '{user}'. Reason: {}",
                refusal.reason()
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    /// RPC procedure names become quoted multi-part names; no bracket in a name ends one.
    #[test]
    fn rpc_names_are_quoted_by_part() {
        use super::quoted_multipart as q;
        assert_eq!(q("sp_tables"), "[sp_tables]");
        assert_eq!(q("[JtdsClient]..sp_columns"), "[JtdsClient]..[sp_columns]");
        assert_eq!(q("master.dbo.sp_who"), "[master].[dbo].[sp_who]");
        assert_eq!(q("[a]]b].c"), "[a]]b].[c]");
        assert_eq!(q("x]; DROP TABLE t; --"), "[x]]; DROP TABLE t; --]");
    }
}
