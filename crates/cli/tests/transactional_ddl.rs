//! CREATE TABLE, DROP TABLE and SELECT ... INTO inside a transaction are the
//! transaction's (storage's ddl.rs): its ROLLBACK takes the new tables back and brings the
//! dropped ones back with their rows; COMMIT keeps them; a kill -9 before the commit leaves
//! what a rollback leaves. Other sessions wait for the transaction (Sch-M). TRUNCATE and
//! ALTER TABLE, which a rollback could not take back, are refused inside one (40517).
//! (Before, a dropped table stayed dropped after ROLLBACK, its rows lost, and created tables
//! stayed after it.) Every test runs real TDS sessions side by side.

use std::thread;
use std::time::{Duration, Instant};

use extentdb_sql::types::Value;
use extentdb_tds::client::Client;

mod common;
use common::tds::{all_rows, assert_checkdb_clean, connect_at, int, numbers, restart, run, Server};

fn value(c: &mut Client, sql: &str) -> i64 {
    int(&all_rows(&run(c, sql))[0][0])
}

/// The user tables of the current database, by name.
fn tables(c: &mut Client) -> Vec<String> {
    all_rows(&run(c, "SELECT name FROM sys.tables ORDER BY name"))
        .iter()
        .map(|r| match &r[0] {
            Value::Text(t) => t.trim().to_string(),
            other => panic!("{other:?}"),
        })
        .collect()
}

fn setup(s: &Server, db: &str) {
    let mut c = s.connect();
    run(&mut c, &format!("CREATE DATABASE {db}"));
    run(
        &mut c,
        &format!(
            "USE {db}; CREATE TABLE keep (k INT NOT NULL PRIMARY KEY, v INT NOT NULL); \
             INSERT INTO keep VALUES (1, 10), (2, 20), (3, 30); \
             CREATE TABLE heap (v INT); INSERT INTO heap VALUES (1), (2)"
        ),
    );
}

/// ROLLBACK takes back CREATE TABLE (with its rows), SELECT ... INTO and DROP TABLE (the
/// table back with every row, its own uncommitted rows undone); COMMIT keeps them. The
/// refusals change nothing and leave the transaction open.
#[test]
fn rollback_takes_back_create_drop_and_select_into() {
    let s = Server::start("xddl-rollback", &[]);
    setup(&s, "xd");
    let mut a = s.connect_to(Some("xd"));
    run(
        &mut a,
        "BEGIN TRAN; CREATE TABLE made (k INT PRIMARY KEY); INSERT INTO made VALUES (1); \
         SELECT k, v INTO copied FROM keep; INSERT INTO keep VALUES (4, 40); \
         DROP TABLE keep; DROP TABLE heap",
    );
    assert_eq!(tables(&mut a), ["copied", "made"], "inside: the drops hide");
    assert_eq!(numbers(&mut a, "SELECT * FROM keep"), [208]);
    assert_eq!(value(&mut a, "SELECT COUNT(*) FROM copied"), 3);
    run(&mut a, "ROLLBACK");
    assert_eq!(tables(&mut a), ["heap", "keep"]);
    assert_eq!(value(&mut a, "SELECT SUM(v) FROM keep"), 60, "row 4 undone");
    assert_eq!(value(&mut a, "SELECT COUNT(*) FROM heap"), 2);
    // COMMIT keeps them; a table made and dropped in one transaction goes either way.
    run(
        &mut a,
        "BEGIN TRAN; CREATE TABLE made (k INT); INSERT INTO made VALUES (7); \
         CREATE TABLE brief (k INT); INSERT INTO brief VALUES (1); DROP TABLE brief; \
         DROP TABLE heap; COMMIT",
    );
    assert_eq!(tables(&mut a), ["keep", "made"]);
    assert_eq!(value(&mut a, "SELECT k FROM made"), 7);
    // Refused inside a transaction, which goes on: TRUNCATE and ALTER TABLE, a name taken
    // again before its drop settles, and the security statements (a ROLLBACK could not
    // take them back).
    let r = a
        .batch(
            "BEGIN TRAN; TRUNCATE TABLE keep; ALTER TABLE keep SET (LOCK_ESCALATION = AUTO); \
             DROP TABLE made; CREATE TABLE made (z INT); \
             CREATE LOGIN late WITH PASSWORD = 'Yuk0n!River2'; GRANT SELECT ON dbo.keep TO guest; \
             SELECT @@TRANCOUNT",
        )
        .unwrap();
    let errs: Vec<(i32, u8)> = r.errors().map(|e| (e.number, e.severity)).collect();
    assert_eq!(errs, [(40517, 16); 5]);
    assert_eq!(int(&all_rows(&r)[0][0]), 1);
    run(&mut a, "ROLLBACK");
    assert_eq!(tables(&mut a), ["keep", "made"]);
    assert_eq!(value(&mut a, "SELECT COUNT(*) FROM keep"), 3);
    assert_checkdb_clean(&mut a, "xd", "after the rollbacks");
}

/// A transaction that created a table and then one whose FOREIGN KEY references it (what
/// SQLAlchemy's create_all sends) rolls back whole: the child goes before its parent
/// (storage ddl.rs invariant 7), the database stays writable and CHECKDB finds it clean;
/// another session then makes both again and commits. (Before, the rollback tried the
/// parent first, failed, and left the database needing a reopen.) The same for a DROP of
/// both committed: the child, dropped first, no longer holds the parent.
#[test]
fn rollback_drops_a_created_child_before_its_parent() {
    let s = Server::start("xddl-fk", &[]);
    setup(&s, "xf");
    let mut a = s.connect_to(Some("xf"));
    let mut b = s.connect_to(Some("xf"));
    let make = "CREATE TABLE parent (id INT IDENTITY PRIMARY KEY, code NVARCHAR(20) NOT NULL \
                UNIQUE); CREATE TABLE child (id INT PRIMARY KEY, pid INT NOT NULL \
                REFERENCES parent (id)); INSERT INTO parent (code) VALUES (N'a'); \
                INSERT INTO child VALUES (1, 1)";
    run(&mut a, &format!("BEGIN TRAN; {make}"));
    assert_eq!(tables(&mut a), ["child", "heap", "keep", "parent"]);
    let r = a.batch("ROLLBACK; SELECT @@TRANCOUNT").unwrap();
    assert_eq!(
        r.errors().count(),
        0,
        "{:?}",
        r.errors().collect::<Vec<_>>()
    );
    assert_eq!(int(&all_rows(&r)[0][0]), 0);
    assert_eq!(tables(&mut b), ["heap", "keep"]);
    run(&mut b, &format!("BEGIN TRAN; {make}; COMMIT"));
    assert_eq!(value(&mut a, "SELECT COUNT(*) FROM child"), 1);
    run(
        &mut a,
        "BEGIN TRAN; DROP TABLE child; DROP TABLE parent; COMMIT",
    );
    assert_eq!(tables(&mut b), ["heap", "keep"]);
    assert_checkdb_clean(&mut b, "xf", "after the rollback and the drops");
}

/// #temp tables follow their transaction too: a rolled-back CREATE TABLE #t is gone (the
/// name free again), a rolled-back DROP TABLE #t brings it back under its name, and
/// tempdb keeps no orphan. A table variable declared inside a transaction outlives it.
#[test]
fn temporary_tables_follow_the_transaction() {
    let s = Server::start("xddl-temp", &[]);
    let mut a = s.connect();
    let before = value(&mut a, "SELECT COUNT(*) FROM tempdb.sys.tables");
    run(
        &mut a,
        "BEGIN TRAN; CREATE TABLE #gone (x INT); INSERT INTO #gone VALUES (1); ROLLBACK",
    );
    assert_eq!(numbers(&mut a, "SELECT * FROM #gone"), [208]);
    run(
        &mut a,
        "CREATE TABLE #t (x INT); INSERT INTO #t VALUES (5); \
         BEGIN TRAN; DROP TABLE #t; ROLLBACK",
    );
    assert_eq!(value(&mut a, "SELECT x FROM #t"), 5);
    run(
        &mut a,
        "BEGIN TRAN; DROP TABLE #t; CREATE TABLE #t (y INT); INSERT INTO #t VALUES (6); COMMIT",
    );
    assert_eq!(value(&mut a, "SELECT y FROM #t"), 6);
    // A table variable declared inside a transaction is no DDL of it: ROLLBACK leaves it.
    assert_eq!(
        value(
            &mut a,
            "BEGIN TRAN; DECLARE @v TABLE (x INT); INSERT INTO @v VALUES (1); ROLLBACK; \
             SELECT COUNT(*) FROM @v"
        ),
        1
    );
    assert_eq!(
        value(&mut a, "SELECT COUNT(*) FROM tempdb.sys.tables"),
        before + 1
    );
    drop(a);
    let mut b = s.connect();
    let t = Instant::now();
    while value(&mut b, "SELECT COUNT(*) FROM tempdb.sys.tables") != before {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "#t outlived its session"
        );
        thread::sleep(Duration::from_millis(50));
    }
    assert_checkdb_clean(&mut b, "tempdb", "after the sessions");
}

/// Other sessions wait for a transaction's DDL: a table created inside it is locked Sch-M
/// before it exists (SET LOCK_TIMEOUT gives 1222, never rows a rollback takes back), a
/// dropped one too; after the end, each sees the outcome.
#[test]
fn other_sessions_wait_for_the_transaction() {
    let s = Server::start("xddl-wait", &[]);
    setup(&s, "xw");
    let mut a = s.connect_to(Some("xw"));
    let mut b = s.connect_to(Some("xw"));
    run(&mut b, "SET LOCK_TIMEOUT 300");
    run(
        &mut a,
        "BEGIN TRAN; CREATE TABLE fresh (k INT); INSERT INTO fresh VALUES (1); DROP TABLE keep",
    );
    assert_eq!(numbers(&mut b, "SELECT COUNT(*) FROM fresh"), [1222]);
    assert_eq!(numbers(&mut b, "INSERT INTO fresh VALUES (2)"), [1222]);
    assert_eq!(numbers(&mut b, "SELECT COUNT(*) FROM keep"), [1222]);
    assert_eq!(numbers(&mut b, "DROP TABLE keep"), [1222]);
    // A reader that waits without a timeout sees the committed outcome once A commits.
    let addr = s.addr.clone();
    let waiter = thread::spawn(move || {
        let mut c = connect_at(&addr, Some("xw"), 60).unwrap();
        value(&mut c, "SELECT COUNT(*) FROM fresh")
    });
    thread::sleep(Duration::from_millis(300));
    run(&mut a, "COMMIT");
    assert_eq!(waiter.join().unwrap(), 1);
    assert_eq!(numbers(&mut b, "SELECT COUNT(*) FROM keep"), [208]);
    // Rolled back: the waiter finds no table (208), the dropped one is whole again.
    run(
        &mut a,
        "BEGIN TRAN; CREATE TABLE later (k INT); DROP TABLE heap",
    );
    assert_eq!(numbers(&mut b, "SELECT COUNT(*) FROM heap"), [1222]);
    run(&mut a, "ROLLBACK");
    assert_eq!(numbers(&mut b, "SELECT * FROM later"), [208]);
    assert_eq!(value(&mut b, "SELECT COUNT(*) FROM heap"), 2);
    assert_checkdb_clean(&mut b, "xw", "at the end");
}

/// kill -9 while transactions hold DDL: recovery takes back what no COMMIT covered
/// (created tables go, dropped ones come back with their rows) and keeps what was
/// acknowledged; a SELECT ... INTO cut by the kill leaves no table, or all its rows.
#[test]
fn kill_9_leaves_what_was_committed() {
    const ROWS: i64 = 60_000;
    let s = Server::start("xddl-kill9", &[]);
    setup(&s, "xk");
    let mut a = s.connect_to(Some("xk"));
    run(
        &mut a,
        "CREATE TABLE src (k INT NOT NULL PRIMARY KEY, pad CHAR(200) NOT NULL); SET NOCOUNT ON; \
         DECLARE @i INT = 0; BEGIN TRAN; \
         WHILE @i < 60000 BEGIN INSERT INTO src VALUES (@i, 'p'); SET @i += 1; END; COMMIT; \
         BEGIN TRAN; CREATE TABLE acked (k INT); INSERT INTO acked VALUES (1); \
         DROP TABLE heap; COMMIT; CREATE TABLE three (k INT); INSERT INTO three VALUES (1), (2), (3)",
    );
    let mut open = s.connect_to(Some("xk"));
    run(
        &mut open,
        "BEGIN TRAN; CREATE TABLE open_made (k INT); INSERT INTO open_made VALUES (1); \
         INSERT INTO keep VALUES (9, 90); DROP TABLE keep",
    );
    // A long SELECT ... INTO in autocommit, killed once its table exists.
    let addr = s.addr.clone();
    thread::spawn(move || {
        let mut c = connect_at(&addr, Some("xk"), 120).unwrap();
        let _ = c.batch("SELECT a.k, a.pad INTO copy FROM src AS a CROSS JOIN three AS b");
    });
    let mut watch = s.connect_to(Some("xk"));
    let t = Instant::now();
    while value(
        &mut watch,
        "SELECT COUNT(*) FROM sys.tables WHERE name = 'copy'",
    ) == 0
    {
        assert!(t.elapsed() < Duration::from_secs(60), "copy never appeared");
        thread::sleep(Duration::from_millis(20));
    }
    thread::sleep(Duration::from_millis(100));
    let s = restart(s);
    let mut c = s.connect_to(Some("xk"));
    let names = tables(&mut c);
    assert!(!names.contains(&"open_made".to_string()), "{names:?}");
    assert!(!names.contains(&"heap".to_string()), "committed drop kept");
    assert_eq!(value(&mut c, "SELECT k FROM acked"), 1);
    assert_eq!(
        value(&mut c, "SELECT SUM(v) FROM keep"),
        60,
        "dropped table back whole"
    );
    if names.contains(&"copy".to_string()) {
        assert_eq!(value(&mut c, "SELECT COUNT(*) FROM copy"), ROWS * 3);
    }
    assert_eq!(value(&mut c, "SELECT COUNT(*) FROM src"), ROWS);
    assert_checkdb_clean(&mut c, "xk", "after the kill");
    drop(open);
}
