//! The OUTPUT clause of INSERT, UPDATE and DELETE (exec/dml_output.rs) through a real
//! `extentdb serve` and real TDS sessions: each statement's rows as SQL Server names
//! them, OUTPUT ... INTO a table and a #temp table, a statement failing halfway (the rows
//! before the failure reach the client, then the error, and nothing stays), and the
//! refusals with SQL Server's numbers. Several sessions insert with OUTPUT at once.
//! UPDATE / DELETE ... FROM (exec/dml_from.rs): inner and left joins, aliases, the target
//! joined when FROM lacks it, each row changed once, a key-changing UPDATE ... FROM
//! (Halloween), its refusals, and sessions updating disjoint and shared rows at once.
//! Both under kill -9: a move through OUTPUT ... INTO and an UPDATE ... FROM are all or
//! nothing after the restart, and no acknowledged one is lost.

use extentdb_sql::exec::Output;
use extentdb_sql::types::Value;
use extentdb_tds::client::{Client, Response};

mod common;
use common::tds::{all_rows, connect_at, int, numbers, run, Server};

fn setup(name: &str) -> (Server, Client) {
    common::tds::start_in_database(name, "od", "")
}

/// The column names of each result set of a response.
fn names(r: &Response) -> Vec<Vec<String>> {
    r.outputs
        .iter()
        .filter_map(|o| match o {
            Output::Rows { columns, .. } => Some(columns.iter().map(|c| c.0.clone()).collect()),
            _ => None,
        })
        .collect()
}

/// Every value of every row, as text ("NULL" for NULL), rows joined by ';'.
fn text(rows: &[Vec<Value>]) -> String {
    rows.iter()
        .map(|r| {
            r.iter()
                .map(|v| match v {
                    Value::Null => "NULL".to_string(),
                    Value::Text(s) => s.clone(),
                    v => int(v).to_string(),
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join(";")
}

fn query(c: &mut Client, sql: &str) -> String {
    text(&all_rows(&run(c, sql)))
}

/// OUTPUT of INSERT (VALUES and SELECT), UPDATE and DELETE: the rows each changed, the
/// columns named as SQL Server names them (a column's name, an alias, an expression none),
/// identity values included, and @@ROWCOUNT the statement's count.
#[test]
fn output_of_each_statement() {
    let (_s, mut c) = setup("each");
    run(
        &mut c,
        "CREATE TABLE t (id INT IDENTITY(1,1) PRIMARY KEY, name VARCHAR(20), n INT)",
    );
    let r = run(
        &mut c,
        "INSERT INTO t (name, n) OUTPUT inserted.id, inserted.name VALUES ('a', 1), ('b', 2)",
    );
    assert_eq!(names(&r), vec![vec!["id", "name"]]);
    assert_eq!(text(&all_rows(&r)), "1,a;2,b");
    let r = run(
        &mut c,
        "INSERT INTO t OUTPUT inserted.* SELECT name + 'x', n * 10 FROM t ORDER BY n",
    );
    assert_eq!(names(&r), vec![vec!["id", "name", "n"]]);
    assert_eq!(text(&all_rows(&r)), "3,ax,10;4,bx,20");
    let r = run(
        &mut c,
        "UPDATE t SET n = n + 1, name = 'z' OUTPUT deleted.n, inserted.n AS now, \
         inserted.id * 100, deleted.name WHERE id >= 3; SELECT @@ROWCOUNT",
    );
    assert_eq!(names(&r)[0], vec!["n", "now", "", "name"]);
    assert_eq!(text(&all_rows(&r)), "10,11,300,ax;20,21,400,bx;2");
    let r = run(
        &mut c,
        "DELETE FROM t OUTPUT deleted.id, deleted.name WHERE n > 1",
    );
    assert_eq!(names(&r), vec![vec!["id", "name"]]);
    assert_eq!(text(&all_rows(&r)), "2,b;3,z;4,z");
    assert_eq!(query(&mut c, "SELECT id, name, n FROM t"), "1,a,1");
    // A DELETE that finds nothing still sends its (empty) result set.
    let r = run(&mut c, "DELETE t OUTPUT deleted.* WHERE id = 99");
    assert_eq!(names(&r), vec![vec!["id", "name", "n"]]);
    assert_eq!(all_rows(&r).len(), 0);
}

/// OUTPUT ... INTO a table (with and without a column list, an identity column skipped)
/// and INTO a #temp table: the rows go there, not to the client, in the statement's
/// transaction; with a second OUTPUT they go to both.
#[test]
fn output_into_tables() {
    let (_s, mut c) = setup("into");
    run(
        &mut c,
        "CREATE TABLE t (id INT PRIMARY KEY, v INT);
         CREATE TABLE audit (aid INT IDENTITY(1,1), id INT, old_v INT, new_v INT);
         CREATE TABLE #gone (id INT, v INT)",
    );
    let r = run(
        &mut c,
        "INSERT INTO t OUTPUT inserted.id, NULL, inserted.v INTO audit VALUES (1, 10), (2, 20)",
    );
    assert!(names(&r).is_empty(), "INTO sends no result set");
    let r = run(
        &mut c,
        "UPDATE t SET v = v + 1 OUTPUT inserted.id, deleted.v, inserted.v \
         INTO audit (id, old_v, new_v) OUTPUT inserted.id WHERE id = 2",
    );
    assert_eq!(text(&all_rows(&r)), "2");
    run(
        &mut c,
        "DELETE FROM t OUTPUT deleted.id, deleted.v INTO #gone (id, v) WHERE id = 1",
    );
    assert_eq!(
        query(
            &mut c,
            "SELECT aid, id, old_v, new_v FROM audit ORDER BY aid"
        ),
        "1,1,NULL,10;2,2,NULL,20;3,2,20,21"
    );
    assert_eq!(query(&mut c, "SELECT id, v FROM #gone"), "1,10");
    assert_eq!(query(&mut c, "SELECT id, v FROM t"), "2,21");
    // Inside a transaction rolled back, the INTO rows go with the statement's.
    run(
        &mut c,
        "BEGIN TRAN; DELETE FROM t OUTPUT deleted.id, deleted.v INTO #gone; ROLLBACK",
    );
    assert_eq!(query(&mut c, "SELECT COUNT(*) FROM #gone"), "1");
    assert_eq!(query(&mut c, "SELECT id, v FROM t"), "2,21");
}

/// A statement failing partway (a duplicate key on its third row): the client gets the
/// OUTPUT rows written before the failure, then 2627; the table and the INTO table are
/// as before, in autocommit and inside a transaction (which stays open with its earlier
/// work). An INTO insert that fails rolls the statement it belongs to back too.
#[test]
fn failing_statement_with_output() {
    let (_s, mut c) = setup("fail");
    run(
        &mut c,
        "CREATE TABLE k (id INT PRIMARY KEY, v INT); INSERT INTO k VALUES (3, 0);
         CREATE TABLE log (id INT PRIMARY KEY)",
    );
    let r = c
        .batch("INSERT INTO k OUTPUT inserted.id VALUES (1, 1), (2, 2), (3, 3), (4, 4)")
        .unwrap();
    assert_eq!(text(&all_rows(&r)), "1;2");
    let errs: Vec<i32> = r.errors().map(|e| e.number).collect();
    assert_eq!(errs, vec![2627]);
    assert_eq!(query(&mut c, "SELECT id FROM k"), "3");
    assert_eq!(
        numbers(
            &mut c,
            "INSERT INTO k OUTPUT inserted.id INTO log VALUES (1, 1), (3, 3)"
        ),
        vec![2627]
    );
    assert_eq!(query(&mut c, "SELECT COUNT(*) FROM log"), "0");
    // Inside a transaction: the failed statement is undone, the transaction goes on.
    let r = c
        .batch(
            "BEGIN TRAN; INSERT INTO k VALUES (7, 7);
             INSERT INTO k OUTPUT inserted.id INTO log VALUES (8, 8), (3, 3);
             SELECT @@TRANCOUNT; COMMIT",
        )
        .unwrap();
    assert_eq!(text(&all_rows(&r)), "1");
    assert_eq!(query(&mut c, "SELECT id FROM k ORDER BY id"), "3;7");
    assert_eq!(query(&mut c, "SELECT COUNT(*) FROM log"), "0");
    // The INTO's own duplicate key undoes the DELETE it came from.
    run(&mut c, "INSERT INTO log VALUES (7)");
    assert_eq!(
        numbers(&mut c, "DELETE FROM k OUTPUT deleted.id INTO log"),
        vec![2627]
    );
    assert_eq!(query(&mut c, "SELECT id FROM k ORDER BY id"), "3;7");
    assert_eq!(query(&mut c, "SELECT id FROM log"), "7");
    assert_eq!(query(&mut c, "SELECT @@TRANCOUNT"), "0");
}

/// What OUTPUT refuses, with SQL Server's numbers, each changing nothing: `deleted` in an
/// INSERT and `inserted` in a DELETE (4104), a bare column name (207), an unknown column
/// (207), `*` alone (102), INTO with the wrong count of values (213, 121, 120), INTO an
/// unknown table (208), INTO an undeclared table variable (1087); and what is not built
/// (40517): `$action`, a subquery.
#[test]
fn output_refusals() {
    let (_s, mut c) = setup("refuse");
    run(
        &mut c,
        "CREATE TABLE t (id INT PRIMARY KEY, v INT); INSERT INTO t VALUES (1, 1);
         CREATE TABLE two (a INT, b INT)",
    );
    let cases: &[(&str, i32)] = &[
        ("INSERT INTO t OUTPUT deleted.id VALUES (2, 2)", 4104),
        ("DELETE FROM t OUTPUT inserted.id WHERE id = 1", 4104),
        ("UPDATE t SET v = 5 OUTPUT x.v", 4104),
        ("UPDATE t SET v = 5 OUTPUT v", 207),
        ("INSERT INTO t OUTPUT inserted.id + v VALUES (2, 2)", 207),
        ("DELETE t OUTPUT deleted.nope", 207),
        ("DELETE t OUTPUT *", 102),
        ("DELETE t OUTPUT deleted.* INTO two (a)", 121),
        ("DELETE t OUTPUT deleted.id INTO two (a, b)", 120),
        ("DELETE t OUTPUT deleted.id INTO two", 213),
        ("DELETE t OUTPUT deleted.id, 1, 2 INTO two", 213),
        ("DELETE t OUTPUT deleted.id INTO nosuch", 208),
        ("INSERT INTO t OUTPUT $action VALUES (2, 2)", 40517),
        ("DELETE t OUTPUT deleted.id INTO @t", 1087),
        (
            "DECLARE @t TABLE (a int, b int); DELETE t OUTPUT deleted.id INTO @t",
            213,
        ),
        ("DELETE t OUTPUT (SELECT 1)", 40517),
        ("DELETE t OUTPUT COUNT(*)", 40517),
    ];
    for (sql, number) in cases {
        assert_eq!(numbers(&mut c, sql), vec![*number], "{sql}");
    }
    assert_eq!(query(&mut c, "SELECT id, v FROM t"), "1,1");
    assert_eq!(query(&mut c, "SELECT COUNT(*) FROM two"), "0");
}

/// Four sessions insert into one identity table at once, each taking its new ids from
/// OUTPUT: every id comes back to exactly one session, and they are the table's ids.
#[test]
fn sessions_insert_with_output_at_once() {
    let (s, mut c) = setup("many");
    run(
        &mut c,
        "CREATE TABLE q (id INT IDENTITY(1,1) PRIMARY KEY, who INT)",
    );
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let addr = s.addr.clone();
            std::thread::spawn(move || {
                let mut c = connect_at(&addr, Some("od"), 60).unwrap();
                let mut ids = Vec::new();
                for _ in 0..25 {
                    let r = run(
                        &mut c,
                        &format!("INSERT INTO q (who) OUTPUT inserted.id, inserted.who VALUES ({w}), ({w})"),
                    );
                    for row in all_rows(&r) {
                        assert_eq!(int(&row[1]), w);
                        ids.push(int(&row[0]));
                    }
                }
                ids
            })
        })
        .collect();
    let mut ids: Vec<i64> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    ids.sort();
    let stored: Vec<i64> = all_rows(&run(&mut c, "SELECT id FROM q ORDER BY id"))
        .iter()
        .map(|r| int(&r[0]))
        .collect();
    assert_eq!(ids.len(), 200);
    assert_eq!(ids, stored);
}

/// UPDATE ... FROM and DELETE ... FROM with inner and left joins, through an alias, with
/// the target not named in FROM (joined to it), and each target row changed once when
/// several source rows match it (the first the join gives).
#[test]
fn update_and_delete_from_joins() {
    let (_s, mut c) = setup("from");
    run(
        &mut c,
        "CREATE TABLE acct (id INT PRIMARY KEY, bal INT, tag VARCHAR(10));
         INSERT INTO acct VALUES (1, 100, NULL), (2, 200, NULL), (3, 300, NULL), (4, 400, NULL);
         CREATE TABLE pay (pid INT PRIMARY KEY, acct INT, amt INT);
         INSERT INTO pay VALUES (10, 1, 5), (11, 2, 7), (12, 2, 9), (13, 9, 1);
         CREATE TABLE heap (id INT, v INT);
         INSERT INTO heap VALUES (1, 0), (2, 0), (3, 0)",
    );
    // Inner join: account 2 has two payments and changes once.
    let r = run(
        &mut c,
        "UPDATE acct SET bal = bal - p.amt FROM acct JOIN pay AS p ON p.acct = acct.id; \
         SELECT @@ROWCOUNT",
    );
    assert_eq!(text(&all_rows(&r)), "2");
    let bal = query(&mut c, "SELECT id, bal FROM acct ORDER BY id");
    assert!(
        bal == "1,95;2,193;3,300;4,400" || bal == "1,95;2,191;3,300;4,400",
        "{bal}"
    );
    // Left join through an alias: every account, tagged by whether it has a payment.
    run(
        &mut c,
        "UPDATE a SET tag = CASE WHEN p.pid IS NULL THEN 'none' ELSE 'paid' END \
         FROM acct AS a LEFT JOIN pay p ON p.acct = a.id",
    );
    assert_eq!(
        query(&mut c, "SELECT id, tag FROM acct ORDER BY id"),
        "1,paid;2,paid;3,none;4,none"
    );
    // The target not in FROM: joined to it on WHERE.
    run(
        &mut c,
        "UPDATE heap SET v = p.amt FROM pay p WHERE p.acct = heap.id AND p.pid <> 12",
    );
    assert_eq!(
        query(&mut c, "SELECT id, v FROM heap ORDER BY id"),
        "1,5;2,7;3,0"
    );
    // A heap target matched twice (account 2 has two payments) changes once.
    let r = run(
        &mut c,
        "UPDATE h SET v = v + 1 FROM heap h JOIN pay p ON p.acct = h.id; SELECT @@ROWCOUNT",
    );
    assert_eq!(text(&all_rows(&r)), "2");
    assert_eq!(
        query(&mut c, "SELECT id, v FROM heap ORDER BY id"),
        "1,6;2,8;3,0"
    );
    // DELETE with a join, both spellings, and OUTPUT of the deleted rows.
    let r = run(
        &mut c,
        "DELETE FROM a OUTPUT deleted.id FROM acct a JOIN pay p ON p.acct = a.id WHERE p.amt > 6",
    );
    assert_eq!(text(&all_rows(&r)), "2");
    run(
        &mut c,
        "DELETE heap FROM heap h LEFT JOIN pay p ON p.acct = h.id WHERE p.pid IS NULL",
    );
    assert_eq!(query(&mut c, "SELECT id FROM heap ORDER BY id"), "1;2");
    assert_eq!(query(&mut c, "SELECT id FROM acct ORDER BY id"), "1;3;4");
    // UPDATE ... FROM with OUTPUT of old and new values.
    let r = run(
        &mut c,
        "UPDATE acct SET bal = 0 OUTPUT deleted.bal, inserted.bal \
         FROM acct JOIN pay ON pay.acct = acct.id",
    );
    assert_eq!(text(&all_rows(&r)), "95,0");
}

/// Halloween protection: an UPDATE ... FROM that moves every row to a higher clustered
/// key (into the range it is still reading) changes each row exactly once.
#[test]
fn key_changing_update_from_changes_each_row_once() {
    let (_s, mut c) = setup("halloween");
    run(
        &mut c,
        "CREATE TABLE k (id INT PRIMARY KEY, v INT); CREATE TABLE src (n INT)",
    );
    let values: Vec<String> = (1..=300).map(|i| format!("({i}, {i})")).collect();
    run(
        &mut c,
        &format!("INSERT INTO k VALUES {}", values.join(",")),
    );
    run(&mut c, "INSERT INTO src VALUES (1000)");
    let r = run(
        &mut c,
        "UPDATE k SET id = k.id + s.n FROM k CROSS JOIN src s; SELECT @@ROWCOUNT",
    );
    assert_eq!(text(&all_rows(&r)), "300");
    assert_eq!(
        query(&mut c, "SELECT MIN(id), MAX(id), COUNT(*), SUM(v) FROM k"),
        "1001,1300,300,45150"
    );
}

/// What UPDATE / DELETE with FROM refuse: a target named only through two aliases
/// (8154), an unknown qualifier or SET of another source's column (4104), NOLOCK on the
/// target's FROM reference (1065), an unknown table (208), an ambiguous column (209), TOP
/// PERCENT and OUTPUT of a FROM table's columns (40517); each changes nothing.
#[test]
fn from_refusals() {
    let (_s, mut c) = setup("fromrefuse");
    run(
        &mut c,
        "CREATE TABLE t (id INT PRIMARY KEY, v INT); INSERT INTO t VALUES (1, 1), (2, 2);
         CREATE TABLE u (id INT, w INT); INSERT INTO u VALUES (1, 10)",
    );
    let cases: &[(&str, i32)] = &[
        (
            "UPDATE t SET v = 0 FROM t AS a JOIN t AS b ON a.id = b.id",
            8154,
        ),
        ("UPDATE t SET v = zz.w FROM t JOIN u ON u.id = t.id", 4104),
        ("UPDATE t SET u.w = 0 FROM t JOIN u ON u.id = t.id", 4104),
        (
            "UPDATE t SET v = 0 FROM t WITH (NOLOCK) JOIN u ON u.id = t.id",
            1065,
        ),
        ("DELETE t FROM t JOIN nosuch n ON n.id = t.id", 208),
        (
            "UPDATE TOP (50) PERCENT t SET v = 0 FROM t JOIN u ON u.id = t.id",
            40517,
        ),
        (
            "UPDATE t SET v = 0 OUTPUT u.w FROM t JOIN u ON u.id = t.id",
            40517,
        ),
        (
            "UPDATE t SET v = w FROM t JOIN u ON u.id = t.id JOIN u AS u2 ON 1 = 1",
            209,
        ),
    ];
    for (sql, number) in cases {
        assert_eq!(numbers(&mut c, sql), vec![*number], "{sql}");
    }
    assert_eq!(query(&mut c, "SELECT id, v FROM t ORDER BY id"), "1,1;2,2");
}

/// Four sessions run UPDATE ... FROM at once, 50 times each: two on disjoint rows (a
/// seek on the target's key) and two on the same rows; every increment is there after
/// (no lost update) and the money is conserved.
#[test]
fn sessions_update_from_at_once() {
    let (s, mut c) = setup("fromconc");
    run(
        &mut c,
        "CREATE TABLE acct (id INT PRIMARY KEY, bal INT);
         CREATE TABLE delta (id INT PRIMARY KEY, d INT)",
    );
    let values: Vec<String> = (1..=40).map(|i| format!("({i}, 0)")).collect();
    run(
        &mut c,
        &format!("INSERT INTO acct VALUES {}", values.join(",")),
    );
    let deltas: Vec<String> = (1..=40).map(|i| format!("({i}, 1)")).collect();
    run(
        &mut c,
        &format!("INSERT INTO delta VALUES {}", deltas.join(",")),
    );
    // Workers 0 and 1 each own ten rows; workers 2 and 3 both update rows 21..40.
    let ranges = [(1, 10), (11, 20), (21, 40), (21, 40)];
    let workers: Vec<_> = ranges
        .iter()
        .map(|&(lo, hi)| {
            let addr = s.addr.clone();
            std::thread::spawn(move || {
                let mut c = connect_at(&addr, Some("od"), 120).unwrap();
                for _ in 0..50 {
                    run(
                        &mut c,
                        &format!(
                            "UPDATE a SET bal = a.bal + d.d FROM acct a JOIN delta d \
                             ON d.id = a.id WHERE a.id BETWEEN {lo} AND {hi}"
                        ),
                    );
                }
            })
        })
        .collect();
    workers.into_iter().for_each(|w| w.join().unwrap());
    assert_eq!(
        query(&mut c, "SELECT SUM(bal) FROM acct WHERE id <= 20"),
        "1000"
    );
    assert_eq!(
        query(&mut c, "SELECT MIN(bal), MAX(bal) FROM acct WHERE id > 20"),
        "100,100"
    );
}

/// kill -9 of the server while sessions run DELETE ... OUTPUT deleted.* INTO another table
/// and UPDATE ... FROM a join, twice: after each restart every row is in exactly one of the
/// two tables (a move is all or nothing), every UPDATE ... FROM was applied to all its rows
/// or none and none acknowledged is lost, and CHECKDB is clean.
#[test]
fn kill_9_mid_output_into_and_update_from() {
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
    use std::sync::Arc;
    let (s, mut c) = setup("out-kill9");
    run(
        &mut c,
        "CREATE TABLE src (k INT NOT NULL PRIMARY KEY, v INT NOT NULL); \
         CREATE TABLE dst (k INT NOT NULL PRIMARY KEY, v INT NOT NULL); \
         CREATE TABLE ctr (k INT NOT NULL PRIMARY KEY, v INT NOT NULL); \
         CREATE TABLE one (k INT NOT NULL); SET NOCOUNT ON; DECLARE @i INT = 0; \
         WHILE @i < 3000 BEGIN INSERT INTO src VALUES (@i, @i % 7); \
           IF @i < 100 BEGIN INSERT INTO ctr VALUES (@i, 0); INSERT INTO one VALUES (@i); END; \
           SET @i += 1; END",
    );
    drop(c);
    let mut s = s;
    let mut acked = 0i64;
    for cycle in 0..2 {
        let stop = Arc::new(AtomicBool::new(false));
        let updates = Arc::new(AtomicI64::new(acked));
        let mut threads = Vec::new();
        for w in 0..2 {
            let (addr, stop, updates) = (s.addr.clone(), stop.clone(), updates.clone());
            threads.push(std::thread::spawn(move || {
                let Ok(mut c) = connect_at(&addr, Some("od"), 30) else {
                    return;
                };
                while !stop.load(Ordering::Relaxed) {
                    let sql = match w {
                        0 => "DELETE TOP (40) FROM src OUTPUT deleted.k, deleted.v INTO dst",
                        _ => "UPDATE t SET v = t.v + 1 FROM ctr AS t JOIN one AS o ON o.k = t.k",
                    };
                    match c.batch(sql) {
                        Ok(r) if r.errors().next().is_none() => {
                            if w == 1 {
                                updates.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        _ => return,
                    }
                }
            }));
        }
        std::thread::sleep(std::time::Duration::from_millis(1200 + cycle * 500));
        s = common::tds::restart(s);
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            let _ = t.join();
        }
        acked = updates.load(Ordering::SeqCst);
        let mut c = s.connect_to(Some("od"));
        let one_value = |c: &mut Client, sql: &str| int(&all_rows(&run(c, sql))[0][0]);
        assert_eq!(
            one_value(&mut c, "SELECT COUNT(*) FROM src")
                + one_value(&mut c, "SELECT COUNT(*) FROM dst"),
            3000,
            "cycle {cycle}: a row lost or doubled"
        );
        assert_eq!(
            one_value(
                &mut c,
                "SELECT COUNT(*) FROM src AS s JOIN dst AS d ON d.k = s.k"
            ),
            0
        );
        let (lo, hi) = (
            one_value(&mut c, "SELECT MIN(v) FROM ctr"),
            one_value(&mut c, "SELECT MAX(v) FROM ctr"),
        );
        assert_eq!(lo, hi, "cycle {cycle}: an UPDATE ... FROM applied in part");
        assert!(
            lo == acked || lo == acked + 1,
            "cycle {cycle}: {lo} updates kept, {acked} acknowledged"
        );
        acked = lo;
        assert!(
            acked > 0 && one_value(&mut c, "SELECT COUNT(*) FROM dst") > 0,
            "cycle {cycle}: the workload made no progress"
        );
        common::tds::assert_checkdb_clean(&mut c, "od", &format!("cycle {cycle}"));
    }
}
