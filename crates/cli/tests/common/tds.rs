//! A real `extentdb serve` process for tests: started on a free port in its own
//! directory with sa's password from MSSQL_SA_PASSWORD, killed and removed on drop.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use extentdb_tds::client::{Client, ConnectOptions};

pub const PASSWORD: &str = "Yuk0n!River";

pub struct Server {
    pub child: Child,
    pub addr: String,
    pub dir: PathBuf,
}

/// The response, or a panic naming its first error.
pub fn ok(r: extentdb_tds::client::Response) -> extentdb_tds::client::Response {
    if let Some(e) = r.errors().next() {
        panic!("Msg {}: {}", e.number, e.text);
    }
    r
}

/// The rows of the first result set.
pub fn rows(r: &extentdb_tds::client::Response) -> Vec<Vec<extentdb_sql::types::Value>> {
    r.outputs
        .iter()
        .find_map(|o| match o {
            extentdb_sql::exec::Output::Rows { rows, .. } => Some(rows.clone()),
            _ => None,
        })
        .expect("a result set")
}

impl Server {
    pub fn start(name: &str, extra: &[&str]) -> Server {
        let dir = std::env::temp_dir().join(format!("xdb-tds-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Server::start_in(dir, extra)
    }

    pub fn start_in(dir: PathBuf, extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_extentdb"))
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&dir)
            .args(extra)
            .env("MSSQL_SA_PASSWORD", PASSWORD)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .split_whitespace()
            .nth(3)
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        Server { child, addr, dir }
    }

    pub fn connect(&self) -> Client {
        self.connect_to(None)
    }

    pub fn connect_to(&self, database: Option<&str>) -> Client {
        connect_at(&self.addr, database, 60).unwrap_or_else(|e| panic!("login failed: {e:?}"))
    }

    pub fn errorlog(&self) -> String {
        std::fs::read_to_string(self.dir.join("log").join("ERRORLOG")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A login as sa to the server at `addr` (from a thread that has no `Server`), into
/// `database`, with a request timeout of `timeout_secs`.
pub fn connect_at(
    addr: &str,
    database: Option<&str>,
    timeout_secs: u64,
) -> Result<Client, Result<extentdb_tds::client::Response, extentdb_tds::TdsError>> {
    Client::connect(
        addr,
        &ConnectOptions {
            password: PASSWORD.into(),
            database: database.map(str::to_string),
            timeout: Some(Duration::from_secs(timeout_secs)),
            ..ConnectOptions::default()
        },
    )
}

/// Runs a batch that must succeed.
pub fn run(c: &mut extentdb_tds::client::Client, sql: &str) -> extentdb_tds::client::Response {
    ok(c.batch(sql).unwrap_or_else(|e| panic!("{sql}: {e}")))
}

/// The rows of every result set of a response, in order.
pub fn all_rows(r: &extentdb_tds::client::Response) -> Vec<Vec<extentdb_sql::types::Value>> {
    r.outputs
        .iter()
        .filter_map(|o| match o {
            extentdb_sql::exec::Output::Rows { rows, .. } => Some(rows.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// (number, severity, state) of each error a batch gave.
pub fn errors(c: &mut extentdb_tds::client::Client, sql: &str) -> Vec<(i32, u8, u8)> {
    c.batch(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .errors()
        .map(|e| (e.number, e.severity, e.state))
        .collect()
}

/// The numbers of the errors a batch gave.
pub fn numbers(c: &mut extentdb_tds::client::Client, sql: &str) -> Vec<i32> {
    errors(c, sql).into_iter().map(|e| e.0).collect()
}

/// A server named `name` with database `db` made, a session in it, and `setup` run there.
pub fn start_in_database(name: &str, db: &str, setup: &str) -> (Server, Client) {
    let s = Server::start(name, &[]);
    let mut c = s.connect();
    run(&mut c, &format!("CREATE DATABASE {db}"));
    run(&mut c, &format!("USE {db}"));
    if !setup.is_empty() {
        run(&mut c, setup);
    }
    (s, c)
}

/// Kills the server (SIGKILL) and starts another on the same directory.
pub fn restart(s: Server) -> Server {
    let mut s = s;
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    let dir = std::mem::replace(&mut s.dir, "/nonexistent-xdb".into());
    drop(s);
    Server::start_in(dir, &[])
}

/// An integer value of any width (a count, @@SPID, @@TRANCOUNT).
pub fn int(v: &extentdb_sql::types::Value) -> i64 {
    use extentdb_sql::types::Value;
    match v {
        Value::TinyInt(v) => *v as i64,
        Value::SmallInt(v) => *v as i64,
        Value::Int(v) => *v as i64,
        Value::BigInt(v) => *v,
        other => panic!("not an integer: {other:?}"),
    }
}

/// DBCC CHECKDB of `db` reports no allocation and no consistency error (`when` says at
/// which point of the test, for the failure's message).
#[allow(dead_code)]
pub fn assert_checkdb_clean(c: &mut Client, db: &str, when: &str) {
    let r = ok(c.batch(&format!("DBCC CHECKDB ({db})")).unwrap());
    let want =
        format!("CHECKDB found 0 allocation errors and 0 consistency errors in database '{db}'.");
    assert!(
        r.outputs
            .iter()
            .any(|o| matches!(o, extentdb_sql::exec::Output::Info(m) if m.text == want)),
        "{when}: {:?}",
        r.outputs
    );
}

/// The rows of a query, each value as text ("NULL" for NULL), in the order given.
pub fn table(c: &mut Client, sql: &str) -> Vec<String> {
    all_rows(&run(c, sql))
        .into_iter()
        .map(|r| r.iter().map(show).collect::<Vec<_>>().join(","))
        .collect()
}

/// A value as text, as the query tests compare them ("NULL" for NULL).
pub fn show(v: &extentdb_sql::types::Value) -> String {
    use extentdb_sql::types::{SqlType, Value};
    match v {
        Value::Null => "NULL".into(),
        Value::Int(n) => n.to_string(),
        Value::BigInt(n) => n.to_string(),
        Value::SmallInt(n) => n.to_string(),
        Value::TinyInt(n) => n.to_string(),
        Value::Text(s) => s.clone(),
        other => match extentdb_sql::convert::convert(other, SqlType::VarChar(100), None) {
            Ok(Value::Text(s)) => s,
            _ => format!("{other:?}"),
        },
    }
}

pub fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// (scan count, logical reads) of each Msg 3615 (SET STATISTICS IO) of a response, in order.
pub fn scans_and_reads(r: &extentdb_tds::client::Response) -> Vec<(u64, u64)> {
    let re = regex::Regex::new(r"Scan count (\d+), logical reads (\d+),").unwrap();
    r.outputs
        .iter()
        .filter_map(|o| match o {
            extentdb_sql::exec::Output::Info(m) if m.number == 3615 => {
                let c = re.captures(&m.text).unwrap();
                Some((c[1].parse().unwrap(), c[2].parse().unwrap()))
            }
            _ => None,
        })
        .collect()
}

/// A tiny seeded generator (xorshift), so a failing test's random choices replay.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in 0..n (0 when n is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// One of `from`.
    pub fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len() as u64) as usize]
    }

    /// A string of up to `max` characters of `alphabet`.
    pub fn text(&mut self, alphabet: &[char], max: u64) -> String {
        let n = self.below(max + 1);
        (0..n)
            .map(|_| alphabet[self.below(alphabet.len() as u64) as usize])
            .collect()
    }
}
