//! A session's cache of parsed batches (`sql/src/exec/batch_cache.rs`) over real TDS
//! connections: a text sent again through sp_executesql is not parsed again (SQL
//! Statistics' "SQL Compilations/sec" stays put while "Batch Requests/sec" counts every
//! call), and a table a session resolved is used again only under the catalog state it
//! was read from (`table_cache.rs`, `Database::catalog_version`), so DROP TABLE, CREATE
//! TABLE of the same name with other columns, ALTER TABLE and USE of another database
//! between two runs of one text, by this session or another, give the answer the catalog
//! of that moment gives.

mod common;

use common::tds::{int, numbers, ok, rows, run, Server};
use extentdb_sql::types::{SqlType, Value};
use extentdb_tds::client::{Client, Response};

const COUNTERS: &str = "SELECT counter_name, cntr_value FROM sys.dm_os_performance_counters \
                        WHERE object_name LIKE 'SQLServer:SQL Statistics%'";

/// (Batch Requests/sec, SQL Compilations/sec) as `c` reads them now.
fn counters(c: &mut Client) -> (i64, i64) {
    let r = run(c, COUNTERS);
    let value = |name: &str| {
        rows(&r)
            .iter()
            .find(|row| matches!(&row[0], Value::Text(t) if t.trim_end() == name))
            .map(|row| int(&row[1]))
            .unwrap_or_else(|| panic!("no counter {name}"))
    };
    (value("Batch Requests/sec"), value("SQL Compilations/sec"))
}

/// Runs `text` through sp_executesql with `@k` = `k`.
fn exec(c: &mut Client, text: &str, k: i32) -> Response {
    c.execute_sql(text, &[("@k", SqlType::Int, Value::Int(k))])
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn error_numbers(r: &Response) -> Vec<i32> {
    r.errors().map(|e| e.number).collect()
}

/// Two sessions each run one text 50 times: each parses it once (the compilations grow by
/// two), while every call counts as a batch request.
#[test]
fn repeated_text_is_parsed_once_per_session() {
    let s = Server::start("batch-cache-count", &[]);
    let mut a = s.connect();
    let mut b = s.connect();
    run(
        &mut a,
        "CREATE TABLE kv (k INT PRIMARY KEY, x INT NOT NULL)",
    );
    run(&mut a, "INSERT INTO kv VALUES (1, 10), (2, 20), (3, 30)");
    // The first read parses the counter query; the second, from the cache, does not.
    counters(&mut a);
    let (batches0, compiled0) = counters(&mut a);
    let text = "SELECT x FROM kv WHERE k = @k";
    for i in 0..50 {
        for c in [&mut a, &mut b] {
            let k = i % 3 + 1;
            assert_eq!(rows(&ok(exec(c, text, k))), vec![vec![Value::Int(k * 10)]]);
        }
    }
    let (batches1, compiled1) = counters(&mut a);
    assert_eq!(compiled1 - compiled0, 2, "one parse per session");
    assert_eq!(batches1 - batches0, 101, "100 calls and the counter query");
}

/// DROP TABLE, then CREATE TABLE of the same name with other columns, by another session
/// between two runs of one cached text: the text fails with 208 while the table is gone and
/// then returns the new table's columns and rows.
#[test]
fn drop_and_create_of_the_same_name_between_runs() {
    let s = Server::start("batch-cache-ddl", &[]);
    let mut a = s.connect();
    let mut b = s.connect();
    run(&mut a, "CREATE TABLE t (k INT PRIMARY KEY, v INT NOT NULL)");
    run(&mut a, "INSERT INTO t VALUES (1, 100)");
    let text = "SELECT * FROM t WHERE k = @k";
    for c in [&mut a, &mut b] {
        assert_eq!(
            rows(&ok(exec(c, text, 1))),
            vec![vec![Value::Int(1), Value::Int(100)]]
        );
    }
    run(&mut b, "DROP TABLE t");
    for c in [&mut a, &mut b] {
        assert_eq!(error_numbers(&exec(c, text, 1)), vec![208]);
    }
    run(
        &mut b,
        "CREATE TABLE t (k INT PRIMARY KEY, name VARCHAR(10) NOT NULL, w BIGINT NULL)",
    );
    run(&mut b, "INSERT INTO t VALUES (1, 'one', 7)");
    let expected = vec![vec![
        Value::Int(1),
        Value::Text("one".into()),
        Value::BigInt(7),
    ]];
    for c in [&mut a, &mut b] {
        assert_eq!(rows(&ok(exec(c, text, 1))), expected);
    }
    // An UPDATE text cached before the change writes the new table's column.
    let update = "UPDATE t SET w = w + 1 WHERE k = @k";
    ok(exec(&mut a, update, 1));
    run(&mut b, "DROP TABLE t");
    run(&mut b, "CREATE TABLE t (k INT PRIMARY KEY, w INT NOT NULL)");
    run(&mut b, "INSERT INTO t VALUES (1, 40)");
    ok(exec(&mut a, update, 1));
    assert_eq!(
        rows(&run(&mut b, "SELECT k, w FROM t")),
        vec![vec![Value::Int(1), Value::Int(41)]]
    );
}

/// ALTER TABLE ... SET (LOCK_ESCALATION = DISABLE) by another session between two runs of
/// one cached UPDATE text: the first run's 6,000 row locks escalate to one table lock, the
/// second's stay row locks, as the table's new setting says.
#[test]
fn alter_table_between_runs() {
    let s = Server::start("batch-cache-alter", &[]);
    let mut a = s.connect();
    let mut b = s.connect();
    run(
        &mut a,
        "CREATE TABLE big (id INT NOT NULL PRIMARY KEY, v INT NOT NULL); \
         SET NOCOUNT ON; DECLARE @i INT = 0; BEGIN TRAN; \
         WHILE @i < 6000 BEGIN INSERT INTO big VALUES (@i, 0); SET @i += 1; END; COMMIT",
    );
    let update = "UPDATE big SET v = v + 1 WHERE id >= @k";
    let key_locks = |c: &mut Client| {
        let sql = "SELECT COUNT(*) FROM sys.dm_tran_locks \
                   WHERE resource_type = 'KEY' AND request_session_id = @@SPID";
        int(&rows(&run(c, sql))[0][0])
    };
    run(&mut a, "BEGIN TRAN");
    ok(exec(&mut a, update, 0));
    assert_eq!(key_locks(&mut a), 0, "escalated to the table");
    run(&mut a, "COMMIT");
    run(&mut b, "ALTER TABLE big SET (LOCK_ESCALATION = DISABLE)");
    run(&mut a, "BEGIN TRAN");
    ok(exec(&mut a, update, 0));
    assert_eq!(key_locks(&mut a), 6000, "DISABLE keeps every row lock");
    run(&mut a, "COMMIT");
}

/// One text run in one database, then after USE in another that has a table of the same
/// name with other rows and columns: each run reads its current database's table.
#[test]
fn same_text_in_another_database() {
    let s = Server::start("batch-cache-db", &[]);
    let mut a = s.connect();
    run(&mut a, "CREATE DATABASE one");
    run(&mut a, "CREATE DATABASE two");
    run(
        &mut a,
        "USE one; CREATE TABLE t (k INT PRIMARY KEY, v INT NOT NULL)",
    );
    run(&mut a, "INSERT INTO t VALUES (1, 111)");
    run(
        &mut a,
        "USE two; CREATE TABLE t (k INT PRIMARY KEY, v VARCHAR(5) NOT NULL)",
    );
    run(&mut a, "INSERT INTO t VALUES (1, 'two')");
    let text = "SELECT v FROM t WHERE k = @k";
    run(&mut a, "USE one");
    assert_eq!(
        rows(&ok(exec(&mut a, text, 1))),
        vec![vec![Value::Int(111)]]
    );
    run(&mut a, "USE two");
    assert_eq!(
        rows(&ok(exec(&mut a, text, 1))),
        vec![vec![Value::Text("two".into())]]
    );
    run(&mut a, "USE master");
    assert_eq!(error_numbers(&exec(&mut a, text, 1)), vec![208]);
}

/// The key information a session's thread keeps for a tree (storage's `KeptKeyInfos`)
/// follows the table's shape: a table whose clustered key changes type, width and columns
/// (dropped and made again by another session, and a #temporary table made again by the
/// same one) is sought, updated by key and refused a duplicate key (2627) by the sessions
/// that sought its earlier shape, each answer the new shape's.
#[test]
fn clustered_key_change_between_seeks() {
    let s = Server::start("batch-cache-key", &[]);
    let mut a = s.connect();
    let mut b = s.connect();
    // Columns, the seek's predicate, the table's two rows, then a duplicate of the first.
    let shapes = [
        (
            "k INT NOT NULL PRIMARY KEY, v INT NOT NULL",
            "k = 2",
            "(2, 20), (3, 30)",
            "(2, 1)",
        ),
        (
            "v INT NOT NULL, k VARCHAR(10) NOT NULL PRIMARY KEY",
            "k = '2'",
            "(20, '2'), (30, '3')",
            "(1, '2')",
        ),
        (
            "j BIGINT NOT NULL, k SMALLINT NOT NULL, v INT NOT NULL, PRIMARY KEY (k, j)",
            "j = 5000000000 AND k = 2",
            "(5000000000, 2, 20), (1, 2, 30)",
            "(5000000000, 2, 1)",
        ),
    ];
    for (columns, key, two, dup) in shapes {
        for t in ["t", "#t"] {
            let owner = if t == "t" { &mut b } else { &mut a };
            run(
                owner,
                &format!("IF OBJECT_ID('{t}') IS NOT NULL DROP TABLE {t}"),
            );
            run(owner, &format!("CREATE TABLE {t} ({columns})"));
            run(owner, &format!("INSERT INTO {t} VALUES {two}"));
            let users = if t == "t" {
                vec![&mut a, &mut b]
            } else {
                vec![&mut a]
            };
            for c in users {
                let seek = format!("SELECT v FROM {t} WHERE {key}");
                assert_eq!(
                    rows(&run(c, &seek)),
                    vec![vec![Value::Int(20)]],
                    "{t} ({columns})"
                );
                run(c, &format!("UPDATE {t} SET v = v + 1 WHERE {key}"));
                assert_eq!(
                    rows(&run(c, &seek)),
                    vec![vec![Value::Int(21)]],
                    "{t} ({columns})"
                );
                run(c, &format!("UPDATE {t} SET v = v - 1 WHERE {key}"));
                let insert = format!("INSERT INTO {t} VALUES {dup}");
                assert_eq!(numbers(c, &insert), vec![2627], "{t} ({columns})");
            }
        }
    }
}
