//! Real SQL Server clients against a real `extentdb serve` process: python-tds and pymssql
//! (one DB-API suite, `tests/clients/python_dbapi.py`), SQLAlchemy's mssql dialect and
//! pandas over both (`tests/clients/sqlalchemy_suite.py`), tedious (`tests/clients/tedious`,
//! the RPC path), mssql-jdbc and jTDS (`tests/clients/jdbc`) and FreeTDS `tsql` (at TDS
//! 7.1 to 7.4). Each test starts its
//! own server on port 0 in a directory under the cargo target's tmp, runs its client's
//! suite, and fails if the suite does (the suites assert values, row counts, metadata, and
//! SQL Server's message numbers and severities). The clients connect without encryption,
//! except one test each in the tedious and JDBC suites that connects over TLS.
//!
//! `scripts/test.sh` installs the clients (apt freetds-bin, pip python-tds, pymssql,
//! SQLAlchemy, sqlalchemy-pytds and pandas, npm
//! in tests/clients/tedious, the Maven build of tests/clients/jdbc). A test whose client or
//! runtime is missing fails, so that it cannot pass without checking anything, unless
//! XDB_SKIP_CLIENTS=1 is set: then it says why and returns. XDB_PYTHON names the Python
//! interpreter (default python3).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const PASSWORD: &str = "Str0ng!Pass";
/// The longest a client suite may take (they take seconds).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(300);

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/clients")
}

/// A running `extentdb serve` on 127.0.0.1 and an ephemeral port; stopped (SIGTERM, then
/// SIGKILL) and its directory removed on drop.
struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
    /// What the server wrote to stderr, shown (in the test's captured output) at the end.
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Server {
    fn start(tag: &str) -> Server {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("tds-clients-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut child = Command::new(env!("CARGO_BIN_EXE_extentdb"))
            .args(["serve", "--data-dir"])
            .arg(&dir)
            .args(["--listen", "127.0.0.1:0"])
            .env("MSSQL_SA_PASSWORD", PASSWORD)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start extentdb serve");
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        {
            let pipe = child.stderr.take().unwrap();
            let stderr = stderr.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    let mut s = stderr.lock().unwrap();
                    s.push_str(&line);
                    s.push('\n');
                }
            });
        }
        // The first line that names the port; the rest of stdout is drained so the server
        // never blocks on a full pipe.
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if !sent {
                    if let Some(port) = parse_port(&line) {
                        let _ = tx.send(port);
                        sent = true;
                    }
                }
            }
        });
        let port = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(p) => p,
            Err(_) => {
                let _ = child.kill();
                let status = child.wait();
                panic!("extentdb serve printed no listening line within 60 s ({status:?})");
            }
        };
        Server {
            child,
            port,
            dir,
            stderr,
        }
    }
}

/// The port of `extentdb: listening on 127.0.0.1:PORT (TDS 7.4); ...`.
fn parse_port(line: &str) -> Option<u16> {
    let rest = line.split("listening on ").nth(1)?;
    let addr = rest.split_whitespace().next()?;
    addr.rsplit(':').next()?.parse().ok()
}

impl Drop for Server {
    fn drop(&mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
            }
        }
        eprintln!(
            "--- extentdb serve's stderr\n{}",
            self.stderr.lock().unwrap()
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether the client can run; if not, fails the test unless XDB_SKIP_CLIENTS=1 (then
/// returns false after saying why).
fn available(client: &str, missing: Option<String>) -> bool {
    let Some(why) = missing else { return true };
    if std::env::var("XDB_SKIP_CLIENTS").is_ok_and(|v| v == "1") {
        eprintln!("skipping the {client} client test: {why} (XDB_SKIP_CLIENTS=1)");
        return false;
    }
    panic!(
        "the {client} client is not available: {why}. Run scripts/test.sh (it installs the \
         clients), or set XDB_SKIP_CLIENTS=1 to skip the real-client tests"
    );
}

/// None if `program args` runs and exits 0, else why not.
fn runs(program: &str, args: &[&str]) -> Option<String> {
    match Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
    {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("`{program}` cannot run: {e}")),
    }
}

fn python() -> String {
    std::env::var("XDB_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Output of a finished client: exit status, stdout, stderr and how long it ran.
struct Finished {
    success: bool,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

/// Runs a client to completion (killed after CLIENT_TIMEOUT), with `input` on stdin.
fn run_client(mut cmd: Command, input: Option<&str>) -> Finished {
    let start = Instant::now();
    cmd.env("MSSQL_SA_PASSWORD", PASSWORD)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    if let Some(text) = input {
        let mut stdin = child.stdin.take().unwrap();
        let text = text.to_string();
        std::thread::spawn(move || {
            let _ = stdin.write_all(text.as_bytes());
        });
    }
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_thread = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let err_thread = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > CLIENT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = String::from_utf8_lossy(&out_thread.join().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&err_thread.join().unwrap()).into_owned();
    if status.is_none() {
        panic!("{cmd:?} ran longer than {CLIENT_TIMEOUT:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    }
    Finished {
        success: status.unwrap().success(),
        stdout,
        stderr,
        elapsed: start.elapsed(),
    }
}

/// A suite printing `N passed, N failed`: it must exit 0 with at least one test passed
/// and none failed.
fn check_suite(client: &str, f: &Finished) {
    eprintln!(
        "{client}: {:.1} s\n{}{}",
        f.elapsed.as_secs_f64(),
        f.stdout,
        f.stderr
    );
    let summary = f.stdout.lines().rev().find_map(|l| {
        let (p, rest) = l.trim().split_once(" passed, ")?;
        let failed = rest.strip_suffix(" failed")?;
        Some((p.parse::<u32>().ok()?, failed.parse::<u32>().ok()?))
    });
    match summary {
        Some((passed, 0)) if passed > 0 && f.success => {}
        _ => panic!(
            "the {client} suite failed (exit {}):\n--- stdout\n{}\n--- stderr\n{}",
            if f.success { "0" } else { "non-zero" },
            f.stdout,
            f.stderr
        ),
    }
}

fn python_suite(driver: &str, module: &str) {
    let py = python();
    if !available(
        driver,
        runs(&py, &["-c", &format!("import {module}")])
            .map(|e| format!("{e} (pip install python-tds pymssql, as scripts/test.sh does)")),
    ) {
        return;
    }
    let server = Server::start(driver);
    let mut cmd = Command::new(&py);
    cmd.arg(clients_dir().join("python_dbapi.py"))
        .arg(driver)
        .args(["--host", "127.0.0.1", "--port", &server.port.to_string()]);
    check_suite(driver, &run_client(cmd, None));
}

/// python-tds: parameters through RPC (sp_executesql), transactions through
/// transaction-manager requests.
#[test]
fn pytds() {
    python_suite("pytds", "pytds");
}

/// pymssql (FreeTDS db-lib): parameters substituted into SQL batches, BEGIN TRAN batches.
#[test]
fn pymssql() {
    python_suite("pymssql", "pymssql");
}

/// SQLAlchemy 2.x's mssql dialect and pandas, unmodified, over one driver
/// (`tests/clients/sqlalchemy_suite.py`): connect, create_all, reflection, Core, the ORM
/// through OUTPUT inserted, a rollback, pandas' to_sql and read_sql_*.
fn sqlalchemy_suite(driver: &str) {
    let py = python();
    let module = if driver == "pytds" {
        "sqlalchemy_pytds"
    } else {
        "pymssql"
    };
    if !available(
        &format!("SQLAlchemy over {driver}"),
        runs(
            &py,
            &["-c", &format!("import sqlalchemy, pandas, {module}")],
        )
        .map(|e| {
            format!("{e} (pip install SQLAlchemy sqlalchemy-pytds pandas, as scripts/test.sh does)")
        }),
    ) {
        return;
    }
    let server = Server::start(&format!("sqla-{driver}"));
    let mut cmd = Command::new(&py);
    cmd.arg(clients_dir().join("sqlalchemy_suite.py"))
        .arg(driver)
        .args(["--host", "127.0.0.1", "--port", &server.port.to_string()]);
    check_suite(&format!("SQLAlchemy over {driver}"), &run_client(cmd, None));
}

/// SQLAlchemy's mssql+pytds (the sqlalchemy-pytds dialect over python-tds).
#[test]
fn sqlalchemy_pytds() {
    sqlalchemy_suite("pytds");
}

/// SQLAlchemy's mssql+pymssql.
#[test]
fn sqlalchemy_pymssql() {
    sqlalchemy_suite("pymssql");
}

/// mssql-python (Microsoft's driver, its own native TDS layer): TLS on its defaults with
/// TrustServerCertificate, and plaintext; parameters, transactions, errors by class.
#[test]
fn mssql_python() {
    let py = python();
    if !available(
        "mssql-python",
        runs(&py, &["-c", "import mssql_python"])
            .map(|e| format!("{e} (pip install mssql-python, as scripts/test.sh does)")),
    ) {
        return;
    }
    let server = Server::start("mssql-python");
    let mut cmd = Command::new(&py);
    cmd.arg(clients_dir().join("mssql_python_test.py"))
        .args(["--host", "127.0.0.1", "--port", &server.port.to_string()])
        .args(["--password", PASSWORD]);
    check_suite("mssql-python", &run_client(cmd, None));
}

/// tedious: execSql (sp_executesql with typed parameters), prepare/execute, output
/// parameters, beginTransaction/commitTransaction/rollbackTransaction.
#[test]
fn tedious() {
    let dir = clients_dir().join("tedious");
    let missing = runs("node", &["--version"]).or_else(|| {
        (!dir.join("node_modules/tedious/package.json").exists()).then(|| {
            format!(
                "{} has no node_modules/tedious (npm ci there, as scripts/test.sh does)",
                dir.display()
            )
        })
    });
    if !available("tedious", missing) {
        return;
    }
    let server = Server::start("tedious");
    let mut cmd = Command::new("node");
    cmd.current_dir(&dir).arg("test.js").args([
        "--host",
        "127.0.0.1",
        "--port",
        &server.port.to_string(),
    ]);
    check_suite("tedious", &run_client(cmd, None));
}

/// The Maven build of tests/clients/jdbc (the mssql-jdbc and jTDS suites), if java and it
/// are there (`available` decides otherwise).
fn java_suites(client: &str) -> Option<PathBuf> {
    let jar = clients_dir().join("jdbc/target/extentdb-jdbc-tests.jar");
    let missing = runs("java", &["-version"]).or_else(|| {
        (!jar.exists()).then(|| {
            format!(
                "{} is missing (mvn -q -B package in tests/clients/jdbc, as scripts/test.sh does)",
                jar.display()
            )
        })
    });
    available(client, missing).then_some(jar)
}

/// mssql-jdbc: Statement, PreparedStatement (sp_executesql, sp_prepexec, sp_execute,
/// batches of RPCs), metadata, autocommit off (SET IMPLICIT_TRANSACTIONS ON), error codes.
#[test]
fn jdbc() {
    let Some(jar) = java_suites("jdbc") else {
        return;
    };
    let server = Server::start("jdbc");
    let mut cmd = Command::new("java");
    cmd.arg("-jar")
        .arg(&jar)
        .arg(server.port.to_string())
        .arg("127.0.0.1");
    check_suite("jdbc", &run_client(cmd, None));
}

/// jTDS 1.3.1 (TDS 7.1; the same Maven build, `extentdb.JtdsClientTest`): a login with no
/// PRELOGIN (ssl=off) and one with TLS for the login (ssl=request), rows with NULLs and
/// (MAX) values as TEXT / NTEXT / IMAGE, dates as text, update counts, sp_prepare /
/// sp_execute, error numbers, a rolled-back transaction, DatabaseMetaData (getTables,
/// getColumns, getPrimaryKeys, getImportedKeys, getTypeInfo) over the catalog procedures.
#[test]
fn jtds() {
    let Some(jar) = java_suites("jtds") else {
        return;
    };
    let server = Server::start("jtds");
    let mut cmd = Command::new("java");
    cmd.arg("-cp")
        .arg(&jar)
        .arg("extentdb.JtdsClientTest")
        .arg(server.port.to_string())
        .arg("127.0.0.1");
    check_suite("jtds", &run_client(cmd, None));
}

/// FreeTDS `tsql` reading a script on standard input: result rows on stdout (tab
/// separated), server messages on stderr as `Msg N (severity S, state T) from HOST Line L:`.
/// The same script at TDS 7.1, 7.2, 7.3 and 7.4: before 7.3 a DATE arrives as its text
/// (FreeTDS prints 7.3's DATE in its own format), and (MAX) values and NULLs in each
/// version's layout.
#[test]
fn freetds_tsql() {
    if !available(
        "tsql",
        runs("tsql", &["-C"]).map(|e| format!("{e} (apt-get install freetds-bin)")),
    ) {
        return;
    }
    let server = Server::start("tsql");
    let port = server.port.to_string();
    let tsql = |database: Option<&str>, version: &str, script: &str| {
        let mut cmd = Command::new("tsql");
        cmd.args([
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-U",
            "sa",
            "-P",
            PASSWORD,
            "-o",
            "q",
        ]);
        if let Some(db) = database {
            cmd.args(["-D", db]);
        }
        cmd.env("TDSVER", version);
        let f = run_client(cmd, Some(script));
        eprintln!(
            "tsql (TDS {version}): {:.1} s\n--- stdout\n{}--- stderr\n{}",
            f.elapsed.as_secs_f64(),
            f.stdout,
            f.stderr
        );
        assert!(f.success, "tsql failed");
        f
    };
    let setup = tsql(
        None,
        "7.4",
        "CREATE DATABASE TsqlClient\ngo\nUSE TsqlClient\ngo\n\
         CREATE TABLE t (id INT PRIMARY KEY, name NVARCHAR(20), d DECIMAL(9,2), ok BIT)\ngo\n\
         INSERT INTO t VALUES (1, N'Grüße', 12.5, 1), (2, NULL, NULL, 0)\ngo\nexit\n",
    );
    assert_eq!(setup.stdout.trim(), "", "setup printed rows");
    assert_eq!(setup.stderr.trim(), "", "setup printed messages");

    for version in ["7.1", "7.2", "7.3", "7.4"] {
        tsql_script_at(&tsql, version);
    }
}

/// `freetds_tsql`'s script at one TDS version.
fn tsql_script_at(tsql: &dyn Fn(Option<&str>, &str, &str) -> Finished, version: &str) {
    let date = match version {
        "7.1" | "7.2" => "2024-01-02",
        _ => "Jan  2 2024 12:00AM",
    };
    // LOGINACK's answer, as sys.dm_exec_connections shows it (0x71000001 ... 0x74000004).
    let protocol = match version {
        "7.1" => "1895825409",
        "7.2" => "1913192450",
        "7.3" => "1930100739",
        _ => "1946157060",
    };
    let f = tsql(
        Some("TsqlClient"),
        version,
        "SELECT DB_NAME() AS db\ngo\n\
         SELECT id, name, d, ok FROM t ORDER BY id\ngo\n\
         SELECT CAST('2024-01-02' AS DATE) AS dt, REPLICATE(CAST('ab' AS VARCHAR(MAX)), 3) AS m,\
                CAST(NULL AS NVARCHAR(MAX)) AS mn, CAST(NULL AS INT) AS i\ngo\n\
         SELECT * FROM nope\ngo\n\
         PRINT 'hello from PRINT'\ngo\n\
         SELECT 1/0\ngo\n\
         INSERT INTO t VALUES (1, N'dup', 0, 0)\ngo\n\
         SELECT 1 +\ngo\n\
         SELECT COUNT(*) AS n FROM t\ngo\n\
         SELECT protocol_version AS v FROM sys.dm_exec_connections WHERE session_id = @@SPID\n\
         go\nexit\n",
    );
    let lines: Vec<&str> = f.stdout.lines().collect();
    let row = format!("{date}\tababab\tNULL\tNULL");
    assert_eq!(
        lines,
        [
            "db",
            "TsqlClient",
            "id\tname\td\tok",
            "1\tGrüße\t12.50\t1",
            "2\tNULL\tNULL\t0",
            "dt\tm\tmn\ti",
            row.as_str(),
            "n",
            "2",
            "v",
            protocol,
        ],
        "tsql's result rows at TDS {version}"
    );
    let stderr = f.stderr.replace("\r\n", "\n");
    for expected in [
        "Msg 208 (severity 16, state 1) from ",
        "\"Invalid object name 'nope'.\"",
        "hello from PRINT",
        "Msg 8134 (severity 16, state 1) from ",
        "\"Divide by zero error encountered.\"",
        "Msg 2627 (severity 14, state 1) from ",
        "Cannot insert duplicate key in object 'dbo.t'. The duplicate key value is (1).",
        "Msg 102 (severity 15, state 1) from ",
        "\"Incorrect syntax near '+'.\"",
    ] {
        assert!(
            stderr.contains(expected),
            "tsql's messages lack {expected:?}:\n{stderr}"
        );
    }
}

/// BACKUP and RESTORE from FreeTDS `tsql` and from `extentdb sqlcmd` over TDS: the backup's
/// messages arrive as informational messages, RESTORE VERIFYONLY, RESTORE DATABASE WITH
/// MOVE, NORECOVERY and RESTORE LOG work, and the restored copy answers with the same rows.
#[test]
fn backup_and_restore_over_tds() {
    if !available(
        "tsql",
        runs("tsql", &["-C"]).map(|e| format!("{e} (apt-get install freetds-bin)")),
    ) {
        return;
    }
    let server = Server::start("backup");
    let port = server.port.to_string();
    let mut cmd = Command::new("tsql");
    cmd.args([
        "-H",
        "127.0.0.1",
        "-p",
        &port,
        "-U",
        "sa",
        "-P",
        PASSWORD,
        "-o",
        "q",
    ]);
    cmd.env("TDSVER", "7.4");
    let f = run_client(
        cmd,
        Some(
            "CREATE DATABASE Bk\ngo\nALTER DATABASE Bk SET RECOVERY FULL\ngo\nUSE Bk\ngo\n\
             CREATE TABLE t (id INT PRIMARY KEY, name NVARCHAR(20))\ngo\n\
             INSERT INTO t VALUES (1, N'one'), (2, N'two'), (3, N'three')\ngo\n\
             BACKUP DATABASE Bk TO DISK = 'bk.bak' WITH INIT, CHECKSUM\ngo\n\
             INSERT INTO t VALUES (4, N'four')\ngo\n\
             BACKUP LOG Bk TO DISK = 'bk.trn' WITH INIT, COMPRESSION\ngo\n\
             RESTORE VERIFYONLY FROM DISK = 'bk.bak'\ngo\n\
             RESTORE DATABASE BkCopy FROM DISK = 'bk.bak' WITH MOVE 'Bk' TO 'BkCopy.mdf', \
             MOVE 'Bk_log' TO 'BkCopy_log.ldf', NORECOVERY\ngo\n\
             RESTORE LOG BkCopy FROM DISK = 'bk.trn' WITH RECOVERY\ngo\n\
             SELECT COUNT(*) AS n, SUM(id) AS s FROM BkCopy.dbo.t\ngo\nexit\n",
        ),
    );
    eprintln!("--- stdout\n{}--- stderr\n{}", f.stdout, f.stderr);
    assert!(f.success, "tsql failed");
    assert_eq!(f.stdout.lines().collect::<Vec<_>>(), ["n\ts", "4\t10"]);
    for expected in [
        "Processed ",
        "BACKUP DATABASE successfully processed ",
        "BACKUP LOG successfully processed ",
        "The backup set on file 1 is valid.",
        "RESTORE DATABASE successfully processed ",
        "RESTORE LOG successfully processed ",
    ] {
        assert!(
            f.stderr.contains(expected),
            "tsql lacks {expected:?}:\n{}",
            f.stderr
        );
    }
    assert!(!f.stderr.contains("(severity 16"), "no error: {}", f.stderr);

    // extentdb sqlcmd: HEADERONLY's result set.
    let out = Command::new(env!("CARGO_BIN_EXE_extentdb"))
        .args([
            "sqlcmd",
            "-S",
            &format!("127.0.0.1,{port}"),
            "-U",
            "sa",
            "-P",
            PASSWORD,
        ])
        .args([
            "-Q",
            "SET NOCOUNT ON; RESTORE HEADERONLY FROM DISK = 'bk.bak'",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("BackupType") && text.contains("Bk "),
        "{text}"
    );

    // A session using Bk (tsql connected, its input still open) keeps RESTORE ... REPLACE
    // out: Msg 3101.
    let mut holder = Command::new("tsql")
        .args([
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-U",
            "sa",
            "-P",
            PASSWORD,
            "-o",
            "q",
        ])
        .env("TDSVER", "7.4")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    holder
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"USE Bk\ngo\n")
        .unwrap();
    holder.stdin.as_mut().unwrap().flush().unwrap();
    // Wait until the server lists a session in Bk (tsql's output is buffered, so it cannot
    // tell us itself).
    let sqlcmd = |q: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_extentdb"))
            .args([
                "sqlcmd",
                "-S",
                &format!("127.0.0.1,{port}"),
                "-U",
                "sa",
                "-P",
                PASSWORD,
            ])
            .args(["-Q", q])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let started = std::time::Instant::now();
    while !sqlcmd(
        "SET NOCOUNT ON; SELECT COUNT(*) FROM sys.dm_exec_sessions WHERE database_id = DB_ID('Bk')",
    )
    .lines()
    .any(|l| l.trim() == "1")
    {
        assert!(
            started.elapsed().as_secs() < 20,
            "the holding session never used Bk"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = Command::new(env!("CARGO_BIN_EXE_extentdb"))
        .args([
            "sqlcmd",
            "-S",
            &format!("127.0.0.1,{port}"),
            "-U",
            "sa",
            "-P",
            PASSWORD,
        ])
        .args([
            "-Q",
            "RESTORE DATABASE Bk FROM DISK = 'bk.bak' WITH REPLACE",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Msg 3101") && text.contains("Exclusive access could not be obtained"),
        "{text}"
    );
    drop(holder.stdin.take());
    assert!(holder.wait().unwrap().success());
}

#[test]
fn parses_the_listening_line() {
    assert_eq!(
        parse_port(
            "extentdb: listening on 127.0.0.1:40123 (TDS 7.4); stop with Ctrl-C or SIGTERM."
        ),
        Some(40123)
    );
    assert_eq!(parse_port("extentdb: no instance in /x"), None);
}
