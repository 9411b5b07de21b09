//! Issue 20's hardening, through a real `extentdb serve` process and real sockets: one
//! process per instance directory, logins that idle sockets and failed passwords cannot
//! block, names longer than the catalog stores refused with Msg 103 (and no panic that
//! locks logins out), owner-only files, and backups that follow no symbolic link.

mod common;

use std::io::Read;
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::tds::{Server, PASSWORD};
use extentdb_tds::client::{Client, ConnectOptions};

fn login(addr: &str, user: &str, password: &str) -> Result<Client, String> {
    Client::connect(
        addr,
        &ConnectOptions {
            user: user.into(),
            password: password.into(),
            timeout: Some(Duration::from_secs(30)),
            ..ConnectOptions::default()
        },
    )
    .map_err(|e| match e {
        Ok(r) => r
            .errors()
            .map(|e| format!("Msg {}: {}", e.number, e.text))
            .collect(),
        Err(e) => format!("{e}"),
    })
}

/// The numbers of a batch's errors.
fn error_numbers(c: &mut Client, sql: &str) -> Vec<i32> {
    c.batch(sql).unwrap().errors().map(|e| e.number).collect()
}

/// Runs the extentdb binary with `args` and waits at most 20 s for it to exit.
fn run_bounded(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_extentdb"))
        .args(args)
        .env("MSSQL_SA_PASSWORD", PASSWORD)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.code(), err);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    (None, "still running after 20 s".into())
}

#[test]
fn a_second_process_on_one_instance_is_refused_and_touches_nothing() {
    let server = Server::start("one-process", &[]);
    let mut c = server.connect();
    c.batch("CREATE DATABASE Kept; ").unwrap();
    c.batch("CREATE TABLE Kept.dbo.t (id INT PRIMARY KEY); INSERT INTO Kept.dbo.t VALUES (1)")
        .unwrap();
    let tempdb = server.dir.join("data").join("tempdb.mdf");
    let before = std::fs::metadata(&tempdb).unwrap().modified().unwrap();
    let dir = server.dir.to_str().unwrap();
    for args in [
        vec!["serve", "--listen", "127.0.0.1:0", "--data-dir", dir],
        vec!["exec", "--data-dir", dir, "-Q", "SELECT 1"],
        vec!["checkdb", "--data-dir", dir],
    ] {
        let (code, err) = run_bounded(&args);
        assert_eq!(code, Some(1), "{args:?} must fail at once: {err}");
        assert!(err.contains("is in use by process"), "{args:?}: {err}");
    }
    let after = std::fs::metadata(&tempdb).unwrap().modified().unwrap();
    assert_eq!(before, after, "tempdb was not re-created under the server");
    let r = c.batch("SELECT COUNT(*) FROM Kept.dbo.t").unwrap();
    assert_eq!(r.errors().count(), 0);
    assert!(login(&server.addr, "sa", PASSWORD).is_ok());
}

#[test]
fn idle_sockets_cannot_keep_sa_out() {
    let server = Server::start("idle-sockets", &["--login-timeout-secs", "3"]);
    // More than the 500 user connections and the 64 pending logins the server allows.
    let idle: Vec<TcpStream> = (0..560)
        .map(|_| TcpStream::connect(&server.addr).unwrap())
        .collect();
    let started = Instant::now();
    let mut c = login(&server.addr, "sa", PASSWORD).expect("sa logs in past 560 idle sockets");
    assert_eq!(error_numbers(&mut c, "SELECT 1"), Vec::<i32>::new());
    assert!(started.elapsed() < Duration::from_secs(10));
    // The newest idle socket is closed by the login timeout: it reads end of stream.
    let mut last = idle.last().unwrap();
    last.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(last.read(&mut buf).unwrap(), 0, "closed by the server");
    let log = server.errorlog();
    assert!(log.contains("login timeout of 3 s"), "17830 for a timeout");
    assert!(
        log.contains("the pending-login limit was reached"),
        "17830 for an eviction"
    );
    assert!(login(&server.addr, "sa", PASSWORD).is_ok());
}

#[test]
fn failed_logins_are_logged_with_their_state_and_slowed() {
    let server = Server::start("failed-logins", &[]);
    let mut slowest = Duration::ZERO;
    for i in 0..6 {
        let started = Instant::now();
        let Err(err) = login(&server.addr, "sa", "wrong password") else {
            panic!("attempt {i}: a wrong password logged in");
        };
        assert!(err.contains("Msg 18456"), "attempt {i}: {err}");
        slowest = slowest.max(started.elapsed());
    }
    // Failures 4, 5 and 6 waited 100, 200 and 400 ms before the password was checked.
    assert!(slowest >= Duration::from_millis(400), "{slowest:?}");
    let log = server.errorlog();
    assert_eq!(
        log.matches("Error: 18456, Severity: 14, State: 8.").count(),
        6
    );
    assert!(
        log.contains("[CLIENT: 127.0.0.1] (failed logins from this address in the last 60 s: 6)")
    );
    assert!(login(&server.addr, "sa", PASSWORD).is_ok());
    // The success cleared the count: the next failure is the address's first again.
    assert!(login(&server.addr, "sa", "wrong").is_err());
    let log = server.errorlog();
    assert!(
        log.ends_with("(failed logins from this address in the last 60 s: 1)\n"),
        "{log}"
    );
}

#[test]
fn names_longer_than_the_catalog_stores_are_msg_103_and_logins_go_on() {
    let server = Server::start("long-names", &[]);
    let mut c = server.connect();
    let n = "n".repeat(70_000);
    let text = "d".repeat(70_000);
    for sql in [
        format!("CREATE TABLE [{n}] (a INT)"),
        format!("CREATE TABLE t (a INT CONSTRAINT [{n}] PRIMARY KEY)"),
        format!("CREATE TABLE t ([{}] INT)", "c".repeat(129)),
        format!("CREATE TABLE t (a VARCHAR(10) DEFAULT '{text}')"),
        format!(
            "BACKUP DATABASE master TO DISK = 'm.bak' WITH NAME = '{}'",
            "b".repeat(129)
        ),
        format!("DECLARE @{} INT", "v".repeat(129)),
    ] {
        assert_eq!(error_numbers(&mut c, &sql), [103], "{}", &sql[..60]);
    }
    let cols: Vec<String> = (0..1025).map(|i| format!("c{i} INT")).collect();
    let sql = format!("CREATE TABLE wide ({})", cols.join(", "));
    assert_eq!(error_numbers(&mut c, &sql), [1702]);
    // Nothing was created, master still changes, and a new login gets in.
    let r = c.batch("SELECT COUNT(*) FROM sys.tables").unwrap();
    assert_eq!(r.errors().count(), 0);
    assert_eq!(
        error_numbers(&mut c, "CREATE TABLE kept (a INT)"),
        Vec::<i32>::new()
    );
    let mut d = login(&server.addr, "sa", PASSWORD).expect("logins go on");
    assert_eq!(error_numbers(&mut d, "DROP TABLE kept"), Vec::<i32>::new());
}

fn mode(p: &std::path::Path) -> u32 {
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn secrets_and_backups_are_owner_only() {
    let server = Server::start("file-modes", &[]);
    let mut c = server.connect();
    let errors = error_numbers(
        &mut c,
        "CREATE LOGIN app WITH PASSWORD = 'Str0ng!Passw0rd'; BACKUP DATABASE master TO DISK = 'm.bak'",
    );
    assert_eq!(errors, Vec::<i32>::new());
    let d = &server.dir;
    for f in [
        "instance.conf",
        "logins",
        "tls/server.crt",
        "tls/server.key",
        "backup/m.bak",
    ] {
        assert_eq!(mode(&d.join(f)), 0o600, "{f}");
    }
    for dir in ["", "data", "log", "tls", "backup"] {
        assert_eq!(mode(&d.join(dir)), 0o700, "{dir}/");
    }
}

#[test]
fn backup_follows_no_symbolic_link_out_of_its_root() {
    let server = Server::start("backup-symlink", &[]);
    let mut c = server.connect();
    let outside = server.dir.with_extension("outside.bak");
    std::fs::write(&outside, b"not a backup").unwrap();
    let root = server.dir.join("backup");
    std::fs::create_dir_all(&root).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("link.bak")).unwrap();
    let backup = error_numbers(&mut c, "BACKUP DATABASE master TO DISK = 'link.bak'");
    assert!(
        backup.contains(&3201) && backup.contains(&3013),
        "{backup:?}"
    );
    let restore = error_numbers(&mut c, "RESTORE HEADERONLY FROM DISK = 'link.bak'");
    assert!(restore.contains(&3201), "{restore:?}");
    assert_eq!(std::fs::read(&outside).unwrap(), b"not a backup");
    std::fs::remove_file(&outside).unwrap();
}

/// EMPTYFILE beside open transactions (issue 20 item 2): it moves what no open transaction
/// changed, waits (holding no lock: the other sessions go on) for the transaction that
/// changed a table with pages in the file, and finishes once that one commits.
#[test]
fn emptyfile_waits_for_the_transactions_that_changed_its_tables() {
    let server = Server::start("emptyfile-busy", &[]);
    let mut a = server.connect();
    let setup = "CREATE DATABASE E ON PRIMARY (NAME = E1, FILENAME = 'E1.mdf', SIZE = 8MB), \
                 (NAME = E2, FILENAME = 'E2.ndf', SIZE = 8MB)";
    assert_eq!(error_numbers(&mut a, setup), Vec::<i32>::new());
    let fill = "USE E; CREATE TABLE busy (id INT, pad CHAR(4000)); CREATE TABLE idle (id INT, pad CHAR(4000)); \
                DECLARE @i INT = 0; WHILE @i < 200 BEGIN INSERT busy VALUES (@i, 'b'); SET @i += 1; END; \
                SET @i = 0; WHILE @i < 200 BEGIN INSERT idle VALUES (@i, 'i'); SET @i += 1; END";
    assert_eq!(error_numbers(&mut a, fill), Vec::<i32>::new());
    // Each table has extents in both files (one filled after the other: the round robin
    // gives each table extents in E1 and E2).
    assert_eq!(
        error_numbers(&mut a, "BEGIN TRAN; INSERT busy VALUES (1000, 'open')"),
        Vec::<i32>::new()
    );
    let addr = server.addr.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let shrinker = std::thread::spawn(move || {
        let mut b =
            common::tds::connect_at(&addr, Some("E"), 120).unwrap_or_else(|_| panic!("login"));
        let r = b.batch("DBCC SHRINKFILE (E2, EMPTYFILE)").unwrap();
        tx.send(r.errors().map(|e| e.number).collect::<Vec<_>>())
            .unwrap();
    });
    // It cannot finish while the transaction is open; meanwhile the database serves others.
    std::thread::sleep(Duration::from_millis(1500));
    let early = rx.try_recv();
    assert!(
        early.is_err(),
        "EMPTYFILE finished beside an open transaction on its table: {early:?}"
    );
    let mut c = server.connect_to(Some("E"));
    let r = c.batch("SELECT COUNT(*) FROM idle").unwrap();
    assert_eq!(
        r.errors().count(),
        0,
        "another session reads while EMPTYFILE waits"
    );
    assert_eq!(error_numbers(&mut a, "COMMIT"), Vec::<i32>::new());
    let done = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("EMPTYFILE ends after the commit");
    assert_eq!(done, Vec::<i32>::new());
    shrinker.join().unwrap();
    let r = c
        .batch("SELECT COUNT(*) FROM busy; SELECT COUNT(*) FROM idle")
        .unwrap();
    let counts: Vec<_> = r
        .outputs
        .iter()
        .filter_map(|o| match o {
            extentdb_sql::exec::Output::Rows { rows, .. } => Some(rows[0][0].clone()),
            _ => None,
        })
        .collect();
    use extentdb_sql::types::Value;
    assert_eq!(counts, [Value::Int(201), Value::Int(200)]);
    let r = c.batch("DBCC CHECKDB (E) WITH NO_INFOMSGS").unwrap();
    let found: Vec<String> = r
        .errors()
        .map(|e| format!("{} {}", e.number, e.text))
        .collect();
    assert!(found.is_empty(), "CHECKDB after EMPTYFILE: {found:#?}");
    let used = "SELECT FILEPROPERTY('E2', 'SpaceUsed')";
    let r = c.batch(used).unwrap();
    let pages = r.outputs.iter().find_map(|o| match o {
        extentdb_sql::exec::Output::Rows { rows, .. } => Some(rows[0][0].clone()),
        _ => None,
    });
    assert!(
        matches!(pages, Some(Value::Int(n)) if n <= 8),
        "E2 is empty: {pages:?}"
    );
    let remove = "USE master; ALTER DATABASE E REMOVE FILE E2";
    assert_eq!(error_numbers(&mut c, remove), Vec::<i32>::new());
    let r = c.batch("DBCC CHECKDB (E) WITH NO_INFOMSGS").unwrap();
    let found: Vec<String> = r
        .errors()
        .map(|e| format!("{} {}", e.number, e.text))
        .collect();
    assert!(found.is_empty(), "CHECKDB after REMOVE FILE: {found:#?}");
    // Inside one's own transaction it would wait for itself: refused.
    let mut d = server.connect();
    let own = "USE E; BEGIN TRAN; INSERT idle VALUES (1, 'x'); DBCC SHRINKFILE (E1, EMPTYFILE)";
    assert!(!error_numbers(&mut d, own).is_empty());
}

/// Query parts that are parsed but not built are refused, never dropped: a query hint
/// other than MAXDOP, MAXRECURSION and RECOMPILE, APPLY of a parenthesized join or of a
/// table-valued function not built, PIVOT with STDEV, UNPIVOT of a join, the window
/// functions not built (STDEV OVER, an assignment SELECT of a window function). (OFFSET /
/// FETCH, WITH TIES, CTEs, recursive ones too, and SELECT INTO, once refused here, are
/// built: crates/cli/tests/queries.rs; OVER, once a syntax error: windows.rs; APPLY of a
/// derived table, PIVOT and UNPIVOT: apply_pivot.rs.)
#[test]
fn unbuilt_query_parts_are_refused_not_dropped() {
    let s = Server::start("unbuilt-query", &[]);
    let mut c = s.connect();
    assert_eq!(
        error_numbers(
            &mut c,
            "CREATE TABLE t (a INT); INSERT INTO t VALUES (1), (2), (3)"
        ),
        Vec::<i32>::new()
    );
    for sql in [
        "SELECT a FROM t OPTION (HASH JOIN)",
        "SELECT t.a FROM t CROSS APPLY (t AS u JOIN t AS v ON u.a = v.a)",
        "INSERT INTO t SELECT t.a FROM t OUTER APPLY sys.fn_dblog(NULL, NULL) x",
        "SELECT * FROM t PIVOT (STDEV(a) FOR a IN ([1])) AS p",
        "INSERT INTO t SELECT v FROM t JOIN t AS u ON t.a = u.a UNPIVOT (v FOR k IN (a)) AS p",
        "SELECT STDEV(a) OVER (ORDER BY a) FROM t",
        "INSERT INTO t SELECT VAR(a) OVER () FROM t",
        "DECLARE @n BIGINT; SELECT @n = ROW_NUMBER() OVER (ORDER BY a) FROM t",
    ] {
        assert_eq!(error_numbers(&mut c, sql), vec![40517], "{sql}");
    }
    // Nothing changed: no t2, t as it was; hints extentdb always honours are accepted.
    assert_eq!(error_numbers(&mut c, "SELECT a FROM t2"), vec![208]);
    assert_eq!(
        error_numbers(
            &mut c,
            "SELECT COUNT(*) FROM t OPTION (MAXDOP 1, RECOMPILE)"
        ),
        Vec::<i32>::new()
    );
    let r = c.batch("SELECT COUNT(*) FROM t").unwrap();
    assert!(
        format!("{:?}", r.outputs).contains("Int(3)"),
        "{:?}",
        r.outputs
    );
}
