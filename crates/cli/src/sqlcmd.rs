//! `extentdb sqlcmd`: a client over TDS with sqlcmd's options and output. Scripts are
//! split into batches at `GO [n]` (a client-side separator, as in sqlcmd); each batch is
//! sent n times; results print as `extentdb exec` prints them, errors with the server's
//! name (`Msg 208, Level 16, State 1, Server HOST, Line 1`). Without -i or -Q on a terminal
//! it prompts (`1>`, `2>` ...) with line editing and history.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;

use clap::Args;
use extentdb_sql::script::split_batches;
use extentdb_tds::client::{Client, ConnectOptions};

use crate::exec::emit;

#[derive(Args)]
pub struct SqlcmdArgs {
    /// The server: host, host,port or tcp:host,port (default localhost,1433).
    #[arg(short = 'S', long = "server", default_value = "localhost")]
    server: String,
    /// The login name.
    #[arg(short = 'U', long = "user-name", default_value = "sa")]
    user: String,
    /// The password (else the SQLCMDPASSWORD environment variable).
    #[arg(short = 'P', long = "password")]
    password: Option<String>,
    /// The database to start in.
    #[arg(short = 'd', long = "database-name")]
    database: Option<String>,
    /// Script files to run in order (also comma-separated).
    #[arg(short = 'i', long = "input-file", value_delimiter = ',')]
    inputs: Vec<PathBuf>,
    /// A query to run, then exit.
    #[arg(short = 'Q')]
    query_exit: Option<String>,
    /// A query to run, then prompt.
    #[arg(short = 'q')]
    query: Option<String>,
    /// Exit with code 1 after an error of severity 11 or more.
    #[arg(short = 'b')]
    stop_on_error: bool,
    /// Encrypt the connection (TLS).
    #[arg(short = 'N')]
    encrypt: bool,
    /// Trust the server's certificate without checking it.
    #[arg(short = 'C')]
    trust_server_certificate: bool,
    /// A CA certificate (PEM) to check the server's certificate against.
    #[arg(long)]
    ca_file: Option<PathBuf>,
    /// Login timeout in seconds.
    #[arg(short = 'l', default_value_t = 8)]
    login_timeout: u64,
}

/// `host`, `host,port`, `tcp:host,port`, `host:port` to `host:port`.
fn address(server: &str) -> String {
    let s = server.strip_prefix("tcp:").unwrap_or(server);
    let s = if s == "." || s.eq_ignore_ascii_case("(local)") {
        "localhost"
    } else {
        s
    };
    match s.split_once(',') {
        Some((h, p)) => format!("{}:{}", h.trim(), p.trim()),
        None if s.contains(':') => s.to_string(),
        None => format!("{s}:1433"),
    }
}

pub fn run(a: SqlcmdArgs) -> Result<u8, String> {
    let addr = address(&a.server);
    let password = a
        .password
        .clone()
        .or_else(|| std::env::var("SQLCMDPASSWORD").ok())
        .unwrap_or_default();
    let options = ConnectOptions {
        user: a.user.clone(),
        password,
        database: a.database.clone(),
        timeout: None,
        encrypt: a.encrypt,
        trust_server_certificate: a.trust_server_certificate,
        ca_file: a.ca_file.clone(),
        ..ConnectOptions::default()
    };
    let mut client = match connect_with_timeout(&addr, &options, a.login_timeout) {
        Ok(c) => c,
        Err(Ok(r)) => {
            emit(r.outputs, false, Some(&r.server));
            return Ok(1);
        }
        Err(Err(e)) => {
            eprintln!("Sqlcmd: Error: unable to connect to {addr}: {e}");
            return Ok(1);
        }
    };
    if let Some(q) = &a.query_exit {
        return Ok(run_script(&mut client, q, a.stop_on_error)?.unwrap_or(0));
    }
    if !a.inputs.is_empty() {
        for p in &a.inputs {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            if let Some(code) = run_script(&mut client, &text, a.stop_on_error)? {
                return Ok(code);
            }
        }
        return Ok(0);
    }
    if let Some(q) = &a.query {
        if let Some(code) = run_script(&mut client, q, a.stop_on_error)? {
            return Ok(code);
        }
    }
    if std::io::stdin().is_terminal() {
        interactive(&mut client, a.stop_on_error)
    } else {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| e.to_string())?;
        Ok(run_script(&mut client, &s, a.stop_on_error)?.unwrap_or(0))
    }
}

fn connect_with_timeout(
    addr: &str,
    o: &ConnectOptions,
    seconds: u64,
) -> Result<Client, Result<extentdb_tds::client::Response, extentdb_tds::TdsError>> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds.max(1));
    loop {
        match Client::connect(addr, o) {
            Err(Err(extentdb_tds::TdsError::Io(e)))
                if e.kind() == std::io::ErrorKind::ConnectionRefused
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            other => return other,
        }
    }
}

/// Runs a script's batches; Some(exit code) when -b stops it.
fn run_script(client: &mut Client, text: &str, stop: bool) -> Result<Option<u8>, String> {
    for batch in split_batches(text) {
        for _ in 0..batch.repeat.max(1) {
            if let Some(code) = send(client, &batch.text, stop)? {
                return Ok(Some(code));
            }
        }
    }
    Ok(None)
}

fn send(client: &mut Client, text: &str, stop: bool) -> Result<Option<u8>, String> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let r = client
        .batch(text)
        .map_err(|e| format!("Sqlcmd: Error: {e}"))?;
    Ok(emit(r.outputs, stop, Some(&r.server)))
}

/// The prompt: lines gather into a batch until `GO [n]`; `EXIT`/`QUIT` leave, `RESET`
/// clears the batch. Line editing and history come from rustyline.
fn interactive(client: &mut Client, stop: bool) -> Result<u8, String> {
    let mut editor = rustyline::DefaultEditor::new().map_err(|e| e.to_string())?;
    let history = std::env::var_os("HOME")
        .map(PathBuf::from)
        .map(|h| h.join(".extentdb_sqlcmd_history"));
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    let mut batch = String::new();
    let mut line_no = 1;
    let code = loop {
        let line = match editor.readline(&format!("{line_no}> ")) {
            Ok(l) => l,
            Err(rustyline::error::ReadlineError::Interrupted) => {
                batch.clear();
                line_no = 1;
                continue;
            }
            Err(_) => break 0,
        };
        let _ = editor.add_history_entry(line.as_str());
        let word = line.trim();
        let upper = word.to_ascii_uppercase();
        if upper == "EXIT" || upper == "QUIT" {
            break 0;
        }
        if upper == "RESET" {
            batch.clear();
            line_no = 1;
            continue;
        }
        let mut parts = upper.split_whitespace();
        if parts.next() == Some("GO") {
            let n: u32 = parts.next().and_then(|n| n.parse().ok()).unwrap_or(1);
            for _ in 0..n.max(1) {
                if let Some(code) = send(client, &batch, stop)? {
                    return Ok(code);
                }
            }
            batch.clear();
            line_no = 1;
            continue;
        }
        batch.push_str(&line);
        batch.push('\n');
        line_no += 1;
    };
    if let Some(h) = &history {
        let _ = editor.save_history(h);
    }
    Ok(code)
}
