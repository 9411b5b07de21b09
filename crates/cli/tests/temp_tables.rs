//! Temporary tables through a real `extentdb serve` and real TDS sessions. Local (`#t`):
//! each session's `#t` is its own table in tempdb, seen by no other session, whatever the
//! current database, gone when the session ends; the user database holds nothing of it;
//! and the messages SQL Server gives for a second `#t` (2714) and a name past 116
//! characters (193). Before temp_tables.rs, `CREATE TABLE #t` made a permanent table in
//! the current database that every session saw. Global (`##g`): one table every session
//! uses at once, 2714 for a second one, dropped once its creator is gone and no other
//! session holds a lock on it, by any session's DROP TABLE, and by a restart.

use std::time::{Duration, Instant};

use extentdb_sql::types::Value;
use extentdb_tds::client::{Client, ConnectOptions};

mod common;
use common::tds::{all_rows, errors, numbers, restart, run, Server};

fn ints(c: &mut Client, sql: &str) -> Vec<i64> {
    all_rows(&run(c, sql))
        .into_iter()
        .map(|r| match r[..] {
            [Value::Int(n)] => n as i64,
            [Value::BigInt(n)] => n,
            ref other => panic!("{sql}: {other:?}"),
        })
        .collect()
}

fn texts(c: &mut Client, sql: &str) -> Vec<String> {
    all_rows(&run(c, sql))
        .into_iter()
        .map(|r| match &r[..] {
            [Value::Text(t)] => t.clone(),
            other => panic!("{sql}: {other:?}"),
        })
        .collect()
}

/// tempdb's tables whose names start with `prefix`.
fn in_tempdb(c: &mut Client, prefix: &str) -> Vec<String> {
    texts(
        c,
        &format!("SELECT name FROM tempdb.sys.tables WHERE name LIKE '{prefix}%' ORDER BY name"),
    )
}

/// Proves two sessions' `#t` are two tables: each session sees only its own rows, from
/// any current database and by `tempdb..#t`; OBJECT_ID gives each its own id; the user
/// database's sys.tables lists neither; tempdb.sys.tables lists both under 128-character
/// names; a third session gets 208; and a session's `#t` goes when it disconnects.
#[test]
fn each_session_has_its_own_temporary_table() {
    let s = Server::start("temp-own", &[]);
    let mut dba = s.connect();
    run(&mut dba, "CREATE DATABASE App");
    let mut a = s.connect_to(Some("App"));
    let mut b = s.connect_to(Some("App"));
    run(
        &mut a,
        "CREATE TABLE #t (k int PRIMARY KEY, v int); INSERT INTO #t VALUES (1, 10), (2, 20)",
    );
    run(&mut b, "CREATE TABLE #t (k int); INSERT INTO #t VALUES (7)");
    assert_eq!(ints(&mut a, "SELECT v FROM #t ORDER BY k"), vec![10, 20]);
    assert_eq!(ints(&mut b, "SELECT k FROM #t"), vec![7]);
    run(&mut a, "USE master; UPDATE #t SET v = v + 1 WHERE k = 2");
    assert_eq!(
        ints(&mut a, "SELECT v FROM tempdb..#t WHERE k = 2"),
        vec![21]
    );
    let ids: Vec<i64> = [&mut a, &mut b]
        .into_iter()
        .map(|c| ints(c, "SELECT OBJECT_ID('tempdb..#t')")[0])
        .collect();
    assert_ne!(ids[0], ids[1]);
    assert!(texts(&mut dba, "SELECT name FROM App.sys.tables").is_empty());
    let stored = in_tempdb(&mut dba, "#t");
    assert_eq!(stored.len(), 2, "{stored:?}");
    assert!(stored
        .iter()
        .all(|n| n.chars().count() == 128 && n.starts_with("#t___")));
    let mut c = s.connect_to(Some("App"));
    assert_eq!(numbers(&mut c, "SELECT k FROM #t"), vec![208]);
    drop(b);
    let until = Instant::now() + Duration::from_secs(30);
    while in_tempdb(&mut dba, "#t").len() != 1 {
        assert!(
            Instant::now() < until,
            "a closed session's #t stayed in tempdb"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(ints(&mut a, "SELECT COUNT(*) FROM #t"), vec![2]);
    let r = run(&mut dba, "DBCC CHECKDB ('App') WITH NO_INFOMSGS");
    assert!(r.errors().next().is_none());
}

/// Proves a temporary table's life and messages: rows changed in a transaction roll back;
/// DROP TABLE #t and a new CREATE TABLE #t; a second `#t` 2714; a name of 117 characters
/// 193 (level 15, state 1) while 116 are taken; and a login with no permission in its
/// database (CREATE TABLE, SELECT) makes and uses its own `#t`, and reads, changes and
/// drops sa's `##g`.
#[test]
fn temporary_tables_live_and_refuse_as_sql_server_does() {
    let s = Server::start("temp-life", &[]);
    let mut a = s.connect();
    run(&mut a, "CREATE TABLE #t (k int); INSERT INTO #t VALUES (1)");
    run(
        &mut a,
        "BEGIN TRAN; INSERT INTO #t VALUES (2); DELETE FROM #t WHERE k = 1; ROLLBACK",
    );
    assert_eq!(ints(&mut a, "SELECT k FROM #t"), vec![1]);
    assert_eq!(
        errors(&mut a, "CREATE TABLE #T (x int)"),
        vec![(2714, 16, 6)]
    );
    run(&mut a, "DROP TABLE #t; CREATE TABLE #t (x int)");
    assert_eq!(ints(&mut a, "SELECT COUNT(*) FROM #t"), vec![0]);
    let long = format!("#{}", "a".repeat(116));
    assert_eq!(
        errors(&mut a, &format!("CREATE TABLE {long} (x int)")),
        vec![(193, 15, 1)]
    );
    run(&mut a, &format!("CREATE TABLE {} (x int)", &long[..116]));
    run(
        &mut a,
        "CREATE TABLE ##g (x int); INSERT INTO ##g VALUES (9)",
    );

    run(
        &mut a,
        "CREATE DATABASE Shop; CREATE LOGIN clerk WITH PASSWORD = 'Temp-Test-Pass-1'; \
         USE Shop; CREATE USER clerk FOR LOGIN clerk; USE master",
    );
    let mut clerk = Client::connect(
        &s.addr,
        &ConnectOptions {
            user: "clerk".into(),
            password: "Temp-Test-Pass-1".into(),
            database: Some("Shop".into()),
            timeout: Some(Duration::from_secs(60)),
            ..ConnectOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("clerk's login: {e:?}"));
    assert_eq!(numbers(&mut clerk, "CREATE TABLE t (x int)"), vec![262]);
    run(
        &mut clerk,
        "CREATE TABLE #work (x int); INSERT INTO #work VALUES (5)",
    );
    assert_eq!(ints(&mut clerk, "SELECT x FROM #work"), vec![5]);
    run(&mut clerk, "DROP TABLE #work");
    run(&mut clerk, "INSERT INTO ##g VALUES (10)");
    assert_eq!(
        ints(&mut clerk, "SELECT x FROM ##g ORDER BY x"),
        vec![9, 10]
    );
    run(&mut clerk, "DROP TABLE ##g");
    assert_eq!(numbers(&mut a, "SELECT x FROM ##g"), vec![208]);
}

/// Waits until `cond` holds (30 s at most, `what` when it does not).
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < until, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Proves a global `##g` is one table for every session: A makes it in master, B (App
/// current) reads A's rows, inserts, indexes it, and A sees B's rows; both get the same
/// OBJECT_ID; tempdb.sys.tables lists it as `##g`, App.sys.tables nothing; a second
/// CREATE 2714 from either. Then A disconnects while B's open transaction has changed
/// `##g`: the table stays while B's transaction is open (A's end waits in Sch-M), a
/// statement C starts meanwhile waits behind that request, B commits, and then the table
/// is gone: C gets 208, OBJECT_ID NULL, tempdb lists nothing.
#[test]
fn a_global_temporary_table_is_shared_and_ends_after_its_creator() {
    let s = Server::start("temp-global", &[]);
    let mut dba = s.connect();
    run(&mut dba, "CREATE DATABASE App");
    let mut a = s.connect();
    let mut b = s.connect_to(Some("App"));
    run(
        &mut a,
        "CREATE TABLE ##g (k int PRIMARY KEY, v int); INSERT INTO ##g VALUES (1, 10)",
    );
    assert_eq!(ints(&mut b, "SELECT v FROM ##g"), vec![10]);
    run(
        &mut b,
        "INSERT INTO ##g VALUES (2, 20); CREATE INDEX gv ON ##g (v)",
    );
    assert_eq!(ints(&mut a, "SELECT k FROM ##g ORDER BY k"), vec![1, 2]);
    assert_eq!(ints(&mut a, "SELECT k FROM ##g WHERE v = 20"), vec![2]);
    let ids: Vec<i64> = [&mut a, &mut b]
        .into_iter()
        .map(|c| ints(c, "SELECT OBJECT_ID('tempdb..##g')")[0])
        .collect();
    assert_eq!(ids[0], ids[1]);
    assert_eq!(in_tempdb(&mut dba, "##"), vec!["##g".to_string()]);
    assert!(texts(&mut dba, "SELECT name FROM App.sys.tables").is_empty());
    for c in [&mut a, &mut b] {
        assert_eq!(errors(c, "CREATE TABLE ##G (x int)"), vec![(2714, 16, 6)]);
    }

    run(&mut b, "BEGIN TRAN; UPDATE ##g SET v = v + 1 WHERE k = 1");
    drop(a);
    let waiting = format!(
        "SELECT COUNT(*) FROM sys.dm_tran_locks WHERE resource_type = 'OBJECT' \
         AND request_mode = 'Sch-M' AND request_status = 'WAIT' \
         AND resource_associated_entity_id = {}",
        ids[0]
    );
    wait_until("the creator's end did not wait for Sch-M", || {
        ints(&mut dba, &waiting) == vec![1]
    });
    let mut c = s.connect();
    let late = std::thread::spawn(move || numbers(&mut c, "SELECT COUNT(*) FROM ##g"));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(in_tempdb(&mut dba, "##"), vec!["##g".to_string()]);
    assert_eq!(ints(&mut b, "SELECT v FROM ##g WHERE k = 1"), vec![11]);
    run(&mut b, "COMMIT");
    assert_eq!(late.join().unwrap(), vec![208]);
    wait_until("##g stayed after its creator and B's transaction", || {
        in_tempdb(&mut dba, "##").is_empty()
    });
    assert_eq!(
        all_rows(&run(&mut b, "SELECT OBJECT_ID('tempdb..##g')")),
        vec![vec![Value::Null]]
    );
}

/// Proves any session's DROP TABLE ends a `##g` at once, and that a `##g` made again by
/// another session is that session's: its first creator's end leaves it; and a restart
/// (tempdb made anew) leaves none.
#[test]
fn a_global_temporary_table_is_dropped_by_anyone_and_by_a_restart() {
    let s = Server::start("temp-global-drop", &[]);
    let mut a = s.connect();
    let mut b = s.connect();
    run(
        &mut a,
        "CREATE TABLE ##h (x int); INSERT INTO ##h VALUES (1)",
    );
    run(&mut b, "DROP TABLE ##h");
    assert_eq!(numbers(&mut a, "SELECT x FROM ##h"), vec![208]);
    run(
        &mut b,
        "CREATE TABLE ##h (y int); INSERT INTO ##h VALUES (2)",
    );
    drop(a);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(ints(&mut b, "SELECT y FROM ##h"), vec![2]);
    run(&mut b, "BEGIN TRAN; CREATE TABLE ##r (z int); ROLLBACK");
    assert_eq!(numbers(&mut b, "SELECT z FROM ##r"), vec![208]);
    let s = restart(s);
    let mut d = s.connect();
    assert!(in_tempdb(&mut d, "##").is_empty());
    assert_eq!(numbers(&mut d, "SELECT y FROM ##h"), vec![208]);
}

/// Proves a `##race` made by four sessions at once is made once: one CREATE succeeds and
/// the three others get 2714; then the four insert into it at once and every row is in it.
#[test]
fn sessions_creating_and_filling_one_global_table_at_once() {
    let s = Server::start("temp-global-race", &[]);
    let clients: Vec<Client> = (0..4).map(|_| s.connect()).collect();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
    let threads: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, mut c)| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let made = errors(&mut c, "CREATE TABLE ##race (k int PRIMARY KEY)");
                barrier.wait();
                for n in 0..50 {
                    run(
                        &mut c,
                        &format!("INSERT INTO ##race VALUES ({})", i * 100 + n),
                    );
                }
                (made, c)
            })
        })
        .collect();
    let mut made = Vec::new();
    let mut kept = Vec::new();
    for t in threads {
        let (m, c) = t.join().unwrap();
        made.push(m);
        kept.push(c);
    }
    made.sort();
    let refused = vec![(2714, 16, 6)];
    assert_eq!(
        made,
        vec![vec![], refused.clone(), refused.clone(), refused]
    );
    assert_eq!(ints(&mut kept[0], "SELECT COUNT(*) FROM ##race"), vec![200]);
}
