//! Table variables (`DECLARE @t TABLE (...)`, issue 22) through a real `extentdb serve`
//! and real TDS sessions: declared beside scalar variables, used by INSERT, SELECT, joins
//! with real tables, subqueries, UPDATE and DELETE (through an alias in FROM too) and
//! OUTPUT ... INTO; identity, defaults and PRIMARY KEY (2627) with statement atomicity; a
//! ROLLBACK that leaves their changes; their end with the batch (1087 after it); each
//! session's own `@t` at once; no lock taken; the table listed in tempdb.sys.tables while
//! the batch runs and tempdb clean after; and the refusals. Before table_variables.rs,
//! `DECLARE @t TABLE` was a syntax error.

use extentdb_sql::exec::Output;
use extentdb_tds::client::Client;

mod common;
use common::tds::{
    all_rows, assert_checkdb_clean, errors, int, numbers, run, show, strs, table, Server,
};

/// Each result set of a batch that may fail, its rows as text, and its errors' numbers.
fn results(c: &mut Client, sql: &str) -> (Vec<Vec<String>>, Vec<i32>) {
    let r = c.batch(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let sets = r
        .outputs
        .iter()
        .filter_map(|o| match o {
            Output::Rows { rows, .. } => Some(
                rows.iter()
                    .map(|row| row.iter().map(show).collect::<Vec<_>>().join(","))
                    .collect(),
            ),
            _ => None,
        })
        .collect();
    (sets, r.errors().map(|e| e.number).collect())
}

/// tempdb's table-variable tables (`#` and 8 hex digits).
fn in_tempdb(c: &mut Client) -> Vec<String> {
    table(
        c,
        "SELECT name FROM tempdb.sys.tables WHERE name LIKE '#________' ORDER BY name",
    )
}

/// Proves a table variable holds rows as a table does: declared in one DECLARE with
/// scalars, filled by VALUES (identity and DEFAULT filled) and by INSERT ... SELECT from a
/// real table, changed by UPDATE, UPDATE ... FROM through an alias joined with the real
/// table, DELETE and DELETE through an alias, read with a join, a subquery and an alias.
#[test]
fn a_table_variable_is_declared_filled_changed_and_read() {
    let s = Server::start("tv-use", &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "CREATE DATABASE App; USE App; CREATE TABLE items (k int PRIMARY KEY, name varchar(20)); \
         INSERT INTO items VALUES (1, 'one'), (2, 'two'), (3, 'three'), (4, 'four')",
    );
    let (sets, errs) = results(
        &mut c,
        "DECLARE @n int = 2, @t TABLE (k int PRIMARY KEY, qty int NOT NULL DEFAULT 7, \
           id int IDENTITY(10, 5), note varchar(10) NULL), @m int = 1;
         INSERT @t (k) VALUES (1), (2);
         INSERT INTO @t (k, qty) SELECT k, 3 FROM items WHERE k > @n;
         UPDATE @t SET qty = qty + @m WHERE k = 1;
         UPDATE x SET note = i.name FROM @t AS x JOIN items AS i ON i.k = x.k;
         DELETE FROM @t WHERE k = 2;
         DELETE x FROM @t x WHERE x.k = 4;
         SELECT x.k, x.qty, x.id, x.note FROM @t AS x ORDER BY x.k;
         SELECT i.name FROM items i JOIN @t t ON t.k = i.k ORDER BY i.name;
         SELECT COUNT(*) FROM items WHERE k IN (SELECT k FROM @t);
         SELECT k, (SELECT MAX(qty) FROM @t) FROM @t WHERE note = 'three'",
    );
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(
        sets,
        vec![
            strs(&["1,8,10,one", "3,3,20,three"]),
            strs(&["one", "three"]),
            strs(&["2"]),
            strs(&["3,8"]),
        ]
    );
    // Nothing of it went to the user database.
    assert!(table(
        &mut c,
        "SELECT name FROM App.sys.tables WHERE name <> 'items'"
    )
    .is_empty());
}

/// Proves SQL Server's transaction rules for table variables: a duplicate key (2627,
/// 3621) leaves none of its statement's rows, in autocommit and inside a transaction
/// (which stays open); a ROLLBACK undoes the real table's changes but not the table
/// variable's; OUTPUT ... INTO a table variable is one statement with the DML (a
/// duplicate in the INTO table leaves neither); and the session holds no lock in tempdb
/// while its transaction has changed a table variable.
#[test]
fn rollback_leaves_table_variables_and_failed_statements_leave_nothing() {
    let s = Server::start("tv-xact", &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "CREATE DATABASE App; USE App; CREATE TABLE kv (k int PRIMARY KEY, v int)",
    );
    let (sets, errs) = results(
        &mut c,
        "DECLARE @t TABLE (k int PRIMARY KEY), @log TABLE (k int PRIMARY KEY);
         INSERT @t VALUES (1);
         INSERT @t VALUES (2), (3), (1);
         SELECT k FROM @t ORDER BY k;
         BEGIN TRAN;
         INSERT INTO kv VALUES (1, 1);
         INSERT @t VALUES (10);
         DELETE @t WHERE k = 1;
         INSERT @t VALUES (20), (20);
         SELECT @@TRANCOUNT;
         SELECT COUNT(*) FROM sys.dm_tran_locks
           WHERE request_session_id = @@SPID AND resource_database_id = 2;
         ROLLBACK;
         SELECT k FROM @t ORDER BY k;
         SELECT COUNT(*) FROM kv;
         INSERT @log VALUES (5);
         INSERT @t OUTPUT inserted.k INTO @log VALUES (6), (5);
         DELETE kv OUTPUT deleted.k INTO @log;
         INSERT INTO kv VALUES (7, 7), (8, 8);
         DELETE kv OUTPUT deleted.k INTO @log WHERE k = 7;
         SELECT k FROM @t ORDER BY k;
         SELECT k FROM @log ORDER BY k;
         SELECT k FROM kv",
    );
    assert_eq!(errs, vec![2627, 2627, 2627], "{sets:?}");
    assert_eq!(
        sets,
        vec![
            strs(&["1"]),
            strs(&["1"]),
            strs(&["0"]),
            strs(&["10"]),
            strs(&["0"]),
            strs(&["10"]),
            strs(&["5", "7"]),
            strs(&["8"]),
        ]
    );
    assert_eq!(table(&mut c, "SELECT @@TRANCOUNT"), strs(&["0"]));
    // Messages name a table variable by its @name, as SQL Server's do.
    let r = c
        .batch(
            "DECLARE @t TABLE (k int PRIMARY KEY, v int NOT NULL);
             INSERT @t VALUES (1, 1), (1, 2); INSERT @t (k) VALUES (2)",
        )
        .unwrap();
    let texts: Vec<&str> = r.errors().map(|e| e.text.as_str()).collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(
        texts[0].ends_with(
            "Cannot insert duplicate key in object 'dbo.@t'. The duplicate key value is (1)."
        ),
        "{texts:?}"
    );
    assert_eq!(texts[1], "Cannot insert the value NULL into column 'v', table '@t'; column does not allow nulls. INSERT fails.");
}

/// Proves a table variable's scope and names: listed in tempdb.sys.tables as `#` and 8
/// hex digits while its batch runs, gone after it, and a later batch that names it gets
/// 1087 (level 15, state 2; the rest of that batch does not run); redeclaring it, or a
/// scalar of its name, is 134; a DECLARE in a loop is one table, its rows kept; an EXEC
/// ('...') batch does not see the caller's, and its own ends with it; `@t.k` is 137; and
/// tempdb checks clean afterwards.
#[test]
fn a_table_variable_ends_with_its_batch() {
    let s = Server::start("tv-scope", &[]);
    let mut c = s.connect();
    let (sets, errs) = results(
        &mut c,
        "DECLARE @t TABLE (k int); INSERT @t VALUES (1);
         SELECT COUNT(*) FROM tempdb.sys.tables WHERE name LIKE '#________'",
    );
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(sets, vec![strs(&["1"])]);
    assert!(in_tempdb(&mut c).is_empty());
    assert_eq!(
        errors(&mut c, "SELECT k FROM @t; SELECT 1"),
        vec![(1087, 15, 2)]
    );
    assert_eq!(
        results(&mut c, "SELECT k FROM @t; SELECT 1"),
        (vec![], vec![1087])
    );
    assert_eq!(errors(&mut c, "INSERT @t VALUES (1)"), vec![(1087, 15, 2)]);
    assert_eq!(
        numbers(&mut c, "DECLARE @t TABLE (k int); DECLARE @T TABLE (j int)"),
        vec![134]
    );
    assert_eq!(
        numbers(&mut c, "DECLARE @x int; DECLARE @x TABLE (k int)"),
        vec![134]
    );
    assert_eq!(
        numbers(&mut c, "DECLARE @x TABLE (k int); DECLARE @x int"),
        vec![134]
    );
    let (sets, errs) = results(
        &mut c,
        "DECLARE @i int = 0;
         WHILE @i < 3 BEGIN DECLARE @w TABLE (k int); INSERT @w VALUES (@i); SET @i += 1 END;
         SELECT COUNT(*) FROM @w;
         EXEC ('DECLARE @w TABLE (j int); INSERT @w VALUES (9); SELECT j FROM @w');
         EXEC ('SELECT COUNT(*) FROM @w');
         SELECT COUNT(*) FROM @w",
    );
    assert_eq!(errs, vec![1087]);
    assert_eq!(sets, vec![strs(&["3"]), strs(&["9"]), strs(&["3"])]);
    assert_eq!(
        errors(&mut c, "DECLARE @t TABLE (k int); SELECT @t.k FROM @t"),
        vec![(137, 15, 2)]
    );
    assert!(in_tempdb(&mut c).is_empty());
    assert_checkdb_clean(&mut c, "tempdb", "after table variables");
}

/// Proves sessions never share or wait for table variables: two sessions declare `@t`
/// at once, each holding its batch open (WAITFOR) with its own rows in it, and each
/// reads only its own; while one sits inside an open transaction that changed its `@t`,
/// the other's batches run; then 4 sessions x 15 batches fill, change and read their own
/// `@t` at once, every sum as computed alone; tempdb checks clean afterwards.
#[test]
fn sessions_have_their_own_table_variables_at_once() {
    let s = Server::start("tv-sessions", &[]);
    let mut dba = s.connect();
    let threads: Vec<_> = (0..2)
        .map(|n| {
            let mut c = s.connect();
            std::thread::spawn(move || {
                let sql = format!(
                    "DECLARE @t TABLE (k int PRIMARY KEY, v int);
                     INSERT @t VALUES ({n}, {n}), ({n} + 10, {n});
                     WAITFOR DELAY '00:00:00.500';
                     SELECT COUNT(*), SUM(v) FROM @t"
                );
                all_rows(&run(&mut c, &sql))
                    .into_iter()
                    .map(|r| (int(&r[0]), int(&r[1])))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(250));
    let during = in_tempdb(&mut dba);
    let got: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(got, vec![vec![(2, 0)], vec![(2, 2)]]);
    assert_eq!(during.len(), 2, "{during:?}");

    let mut holder = s.connect();
    let mut other = s.connect();
    let holding = std::thread::spawn(move || {
        run(
            &mut holder,
            "DECLARE @t TABLE (k int PRIMARY KEY, v int); BEGIN TRAN; INSERT @t VALUES (1, 1);
             UPDATE @t SET v = 2; WAITFOR DELAY '00:00:01'; ROLLBACK; SELECT v FROM @t",
        )
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    let started = std::time::Instant::now();
    let (sets, errs) = results(
        &mut other,
        "SET LOCK_TIMEOUT 100; DECLARE @t TABLE (k int PRIMARY KEY, v int);
         INSERT @t VALUES (1, 2); UPDATE @t SET v = 3 WHERE k = 1; SELECT v FROM @t",
    );
    assert!(
        errs.is_empty() && sets == vec![strs(&["3"])],
        "{sets:?} {errs:?}"
    );
    assert!(started.elapsed() < std::time::Duration::from_millis(700));
    let held = holding.join().unwrap();
    assert_eq!(
        all_rows(&held)
            .iter()
            .map(|r| int(&r[0]))
            .collect::<Vec<_>>(),
        vec![2]
    );

    let workers: Vec<_> = (0..4)
        .map(|w| {
            let mut c = s.connect();
            std::thread::spawn(move || {
                for i in 0..15 {
                    let sql = format!(
                        "DECLARE @t TABLE (id int IDENTITY PRIMARY KEY, v int NOT NULL);
                         DECLARE @i int = 0;
                         WHILE @i < 40 BEGIN INSERT @t (v) VALUES (@i * {w} + {i}); SET @i += 1 END;
                         BEGIN TRAN; UPDATE @t SET v = v + 1 WHERE id % 2 = 0; COMMIT;
                         DELETE @t WHERE id > 30;
                         SELECT COUNT(*), SUM(v) FROM @t"
                    );
                    let r = all_rows(&run(&mut c, &sql));
                    let want: i64 = (0..30).map(|k| k * w + i + (k % 2 == 1) as i64).sum();
                    assert_eq!(
                        (int(&r[0][0]), int(&r[0][1])),
                        (30, want),
                        "worker {w} batch {i}"
                    );
                }
            })
        })
        .collect();
    for t in workers {
        t.join().unwrap();
    }
    assert!(in_tempdb(&mut dba).is_empty());
    assert_checkdb_clean(&mut dba, "tempdb", "after concurrent table variables");
}

/// Proves what is not built is refused, changing nothing: an inline INDEX in a table
/// variable and CREATE TYPE (40517); a table type by name is a type that cannot exist,
/// SQL Server's 2715; TRUNCATE TABLE and SELECT ... INTO of a table variable are syntax
/// errors there as here.
#[test]
fn what_is_not_built_is_refused() {
    let s = Server::start("tv-refuse", &[]);
    let mut c = s.connect();
    assert_eq!(
        numbers(&mut c, "DECLARE @t TABLE (k int, INDEX ix (k))"),
        vec![40517]
    );
    assert_eq!(
        numbers(&mut c, "CREATE TYPE dbo.Keys AS TABLE (k int)"),
        vec![40517]
    );
    assert_eq!(numbers(&mut c, "DECLARE @t dbo.Keys"), vec![2715]);
    assert_eq!(
        numbers(&mut c, "DECLARE @t TABLE (k int); TRUNCATE TABLE @t"),
        vec![102]
    );
    assert_eq!(
        numbers(&mut c, "DECLARE @t TABLE (k int); SELECT 1 AS k INTO @t"),
        vec![102]
    );
    assert!(in_tempdb(&mut c).is_empty());
}
