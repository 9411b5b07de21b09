//! Computed columns (the SQL layer's computed_columns.rs, catalog version 12) through real
//! TDS sessions: PERSISTED values through every read form and every writer (INSERT with and
//! without a column list, INSERT ... SELECT, UPDATE, UPDATE ... FROM, MERGE, OUTPUT), the
//! value stored in the record, recomputed when a column it reads changes; the refusals
//! (271, 1759, 4936, 1046, 207, 8183, 213, 40517) and arithmetic errors, each changing
//! nothing; sys.columns and sys.computed_columns; definitions surviving a kill -9; and
//! several sessions writing while others read.

use std::thread;

use extentdb_tds::client::Client;

mod common;
use common::tds::{
    assert_checkdb_clean, connect_at, errors, numbers, restart, run, start_in_database, table,
};

const SETUP: &str = "CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT, \
     c AS a + b PERSISTED, d AS a * 2.5 PERSISTED NOT NULL, e AS UPPER(s) PERSISTED, \
     s VARCHAR(10))";

/// Every row of `t` as "id,a,b,c,d,e" in id order.
fn t_rows(c: &mut Client) -> Vec<String> {
    table(c, "SELECT id, a, b, c, d, e FROM t ORDER BY id")
}

/// Proves each writer computes the PERSISTED columns (INSERT without and with a column
/// list, INSERT ... SELECT, MERGE's INSERT and UPDATE, UPDATE and UPDATE ... FROM of a
/// column they read, and not of one they do not), and each read form returns them:
/// SELECT *, a named column, WHERE, ORDER BY, a join, a derived table, INSERT ... SELECT
/// from the table, OUTPUT inserted and deleted.
#[test]
fn persisted_values_through_every_writer_and_read() {
    let (_s, mut c) = start_in_database("cc-reads", "ccdb", SETUP);
    // Without a column list the values are the non-computed columns' in order.
    run(&mut c, "INSERT INTO t VALUES (1, 2, 3, 'ab')");
    run(&mut c, "INSERT INTO t (id, a, b) VALUES (2, 10, 20)");
    run(
        &mut c,
        "INSERT INTO t (id, a, b, s) SELECT 3, a + 1, b, 'x' FROM t WHERE id = 1",
    );
    assert_eq!(
        t_rows(&mut c),
        ["1,2,3,5,5.0,AB", "2,10,20,30,25.0,NULL", "3,3,3,6,7.5,X"]
    );
    // SELECT * lists the computed columns where they were declared.
    assert_eq!(
        table(&mut c, "SELECT * FROM t WHERE id = 1"),
        ["1,2,3,5,5.0,AB,ab"]
    );
    assert_eq!(
        table(&mut c, "SELECT id FROM t WHERE c > 5 ORDER BY c DESC"),
        ["2", "3"]
    );
    run(
        &mut c,
        "CREATE TABLE k (c INT, name VARCHAR(10)); INSERT k VALUES (30, 'thirty'), (6, 'six')",
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT t.id, k.name FROM t JOIN k ON k.c = t.c ORDER BY t.id"
        ),
        ["2,thirty", "3,six"]
    );
    assert_eq!(
        table(&mut c, "SELECT SUM(x) FROM (SELECT c * 2 AS x FROM t) AS q"),
        ["82"]
    );
    run(&mut c, "CREATE TABLE copy (id INT, c INT, d DECIMAL(13,1))");
    run(&mut c, "INSERT INTO copy SELECT id, c, d FROM t");
    assert_eq!(
        table(&mut c, "SELECT SUM(c), SUM(d) FROM copy"),
        ["41,37.5"]
    );
    // UPDATE of a column the definitions read recomputes them; OUTPUT sees both sides.
    assert_eq!(
        table(
            &mut c,
            "UPDATE t SET a = 100 OUTPUT deleted.c, inserted.c, inserted.d WHERE id = 1"
        ),
        ["5,103,250.0"]
    );
    // UPDATE of a column no definition reads keeps them.
    run(&mut c, "UPDATE t SET s = 'zz' WHERE id = 2");
    assert_eq!(table(&mut c, "SELECT c, e FROM t WHERE id = 2"), ["30,ZZ"]);
    run(
        &mut c,
        "UPDATE t SET b = k.c FROM t JOIN k ON k.name = 'six' WHERE t.id = 3",
    );
    assert_eq!(table(&mut c, "SELECT b, c FROM t WHERE id = 3"), ["6,9"]);
    run(
        &mut c,
        "MERGE t USING (VALUES (3, 7), (4, 1)) AS src(id, v) ON t.id = src.id \
         WHEN MATCHED THEN UPDATE SET a = src.v \
         WHEN NOT MATCHED THEN INSERT (id, a, b, s) VALUES (src.id, src.v, 2, 'm');",
    );
    assert_eq!(
        table(
            &mut c,
            "INSERT INTO t (id, a, b) OUTPUT inserted.c, inserted.d VALUES (5, -1, 1)"
        ),
        ["0,-2.5"]
    );
    assert_eq!(
        t_rows(&mut c),
        [
            "1,100,3,103,250.0,AB",
            "2,10,20,30,25.0,ZZ",
            "3,7,6,13,17.5,X",
            "4,1,2,3,2.5,M",
            "5,-1,1,0,-2.5,NULL"
        ]
    );
    // Every stored value equals its definition's.
    assert_eq!(
        table(
            &mut c,
            "SELECT COUNT(*) FROM t WHERE c <> a + b OR d <> a * 2.5"
        ),
        ["0"]
    );
    assert_checkdb_clean(&mut c, "ccdb", "after the writes");
}

/// Proves a PERSISTED column is in the record: the same rows in a table without it are
/// 4 bytes (one INT) shorter, as sys.dm_db_index_physical_stats measures its records.
#[test]
fn persisted_column_is_stored_in_the_record() {
    let (_s, mut c) = start_in_database(
        "cc-stored",
        "ccdb",
        "CREATE TABLE with_c (id INT PRIMARY KEY, a INT, b INT, c AS a + b PERSISTED); \
         CREATE TABLE without_c (id INT PRIMARY KEY, a INT, b INT); \
         INSERT with_c VALUES (1, 2, 3); INSERT without_c VALUES (1, 2, 3)",
    );
    let size = |c: &mut Client, t: &str| -> i64 {
        table(
            c,
            &format!(
                "SELECT max_record_size_in_bytes FROM sys.dm_db_index_physical_stats \
                 (DB_ID(), OBJECT_ID('{t}'), NULL, NULL, 'DETAILED') WHERE index_level = 0"
            ),
        )[0]
        .parse()
        .unwrap()
    };
    assert_eq!(size(&mut c, "with_c"), size(&mut c, "without_c") + 4);
}

/// Proves the refusals: a computed column named by INSERT or UPDATE (271, 16, 1), a
/// definition reading a computed column (1759), a non-deterministic PERSISTED one (4936),
/// a subquery (1046), an unknown column (207), NOT NULL without PERSISTED (8183), an
/// INSERT without a column list giving a computed column's value too (213), and what is
/// not built (40517): each leaves the table and the catalog as they were. A divide by zero
/// or an overflow while computing is the statement's error (8134, 8115) and inserts or
/// updates nothing.
#[test]
fn refusals_and_arithmetic_errors_change_nothing() {
    let (_s, mut c) = start_in_database(
        "cc-refused",
        "ccdb",
        "CREATE TABLE r (id INT PRIMARY KEY, a INT, b INT, q AS 100 / b PERSISTED, \
         w AS CAST(a AS SMALLINT) PERSISTED); INSERT r VALUES (1, 1, 1)",
    );
    let before = |c: &mut Client| {
        (
            table(c, "SELECT * FROM r ORDER BY id"),
            table(c, "SELECT COUNT(*) FROM sys.tables"),
        )
    };
    let start = before(&mut c);
    assert_eq!(start.0, ["1,1,1,100,1"]);
    let cases: &[(&str, (i32, u8, u8))] = &[
        ("INSERT INTO r (id, a, q) VALUES (2, 1, 5)", (271, 16, 1)),
        ("UPDATE r SET q = 1", (271, 16, 1)),
        ("INSERT INTO r VALUES (2, 1, 1, 5, 5)", (213, 16, 1)),
        ("INSERT INTO r VALUES (2, 1, 0)", (8134, 16, 1)),
        ("UPDATE r SET b = 0", (8134, 16, 1)),
        ("INSERT INTO r VALUES (2, 99999, 1)", (220, 16, 2)),
        (
            "MERGE r USING (VALUES (1)) AS s(id) ON r.id = s.id \
             WHEN MATCHED THEN UPDATE SET q = 2;",
            (271, 16, 1),
        ),
        (
            "CREATE TABLE x (a INT, c AS a + 1 PERSISTED, d AS c + 1 PERSISTED)",
            (1759, 16, 0),
        ),
        (
            "CREATE TABLE x (a INT, c AS DATEADD(day, a, GETDATE()) PERSISTED)",
            (4936, 16, 1),
        ),
        (
            "CREATE TABLE x (a INT, c AS CAST(NEWID() AS VARCHAR(36)) PERSISTED)",
            (4936, 16, 1),
        ),
        (
            "CREATE TABLE x (a INT, c AS (SELECT 1) PERSISTED)",
            (1046, 15, 1),
        ),
        (
            "CREATE TABLE x (a INT, c AS nope + 1 PERSISTED)",
            (207, 16, 1),
        ),
        ("CREATE TABLE x (a INT, c AS a + 1 NOT NULL)", (8183, 16, 1)),
        ("CREATE TABLE x (a INT, c AS a + 1)", (40517, 16, 1)),
        (
            "CREATE TABLE x (a INT, c AS a + 1 PERSISTED PRIMARY KEY)",
            (40517, 16, 1),
        ),
        (
            "CREATE TABLE x (a INT, c AS a + 1 PERSISTED, UNIQUE (c))",
            (40517, 16, 1),
        ),
        (
            "CREATE TABLE x (a INT, c AS a + 1 PERSISTED, CHECK (c > 0))",
            (40517, 16, 1),
        ),
        (
            "CREATE TABLE x (a INT, c AS SUM(a) PERSISTED)",
            (40517, 16, 1),
        ),
        (
            "CREATE TABLE x (a INT IDENTITY, c AS a + 1 PERSISTED)",
            (40517, 16, 1),
        ),
        ("CREATE INDEX ix_q ON r (q)", (40517, 16, 1)),
        ("CREATE INDEX ix_a ON r (a) INCLUDE (w)", (40517, 16, 1)),
    ];
    for (sql, want) in cases {
        let got = errors(&mut c, sql);
        assert_eq!(got.first(), Some(want), "{sql}: {got:?}");
        assert_eq!(before(&mut c), start, "{sql} changed something");
    }
    assert_eq!(numbers(&mut c, "SELECT * FROM x"), [208]);
    assert_eq!(
        table(
            &mut c,
            "SELECT COUNT(*) FROM sys.indexes WHERE object_id = OBJECT_ID('r')"
        ),
        ["1"]
    );
    let text = c.batch("UPDATE r SET q = 1").unwrap();
    let e = text.errors().next().unwrap();
    assert_eq!(
        e.text,
        "The column \"q\" cannot be modified because it is either a computed column or is \
         the result of a UNION operator."
    );
}

/// Proves sys.columns.is_computed and sys.computed_columns (definition as SQL Server
/// normalizes it, is_persisted, uses_database_collation, the derived type), and that a
/// kill -9 keeps the definitions, the values and their recomputation.
#[test]
fn catalog_views_and_definitions_survive_kill9() {
    let (s, mut c) = start_in_database("cc-views", "ccdb", SETUP);
    run(&mut c, "INSERT INTO t VALUES (1, 2, 3, 'ab')");
    let views = |c: &mut Client| {
        (
            table(
                c,
                "SELECT name, is_computed FROM sys.columns WHERE object_id = OBJECT_ID('t') \
                 ORDER BY column_id",
            ),
            table(
                c,
                "SELECT name, definition, is_persisted, uses_database_collation, \
                 system_type_id, [precision], scale, is_nullable FROM sys.computed_columns \
                 WHERE object_id = OBJECT_ID('t') ORDER BY column_id",
            ),
        )
    };
    let (columns, computed) = views(&mut c);
    assert_eq!(columns, ["id,0", "a,0", "b,0", "c,1", "d,1", "e,1", "s,0"]);
    assert_eq!(
        computed,
        [
            "c,([a]+[b]),1,0,56,10,0,1",
            "d,([a]*(2.5)),1,0,106,13,1,0",
            "e,(upper([s])),1,1,167,0,0,1"
        ]
    );
    let s = restart(s);
    let mut c = s.connect_to(Some("ccdb"));
    assert_eq!(views(&mut c), (columns, computed));
    run(&mut c, "UPDATE t SET b = 40, s = 'q' WHERE id = 1");
    run(&mut c, "INSERT INTO t (id, a, b) VALUES (2, 1, 1)");
    assert_eq!(t_rows(&mut c), ["1,2,40,42,5.0,Q", "2,1,1,2,2.5,NULL"]);
    assert_eq!(numbers(&mut c, "UPDATE t SET c = 1"), [271]);
    assert_checkdb_clean(&mut c, "ccdb", "after the restart");
}

/// Proves computed values stay their definitions' under concurrency: four sessions each
/// insert and update rows of their own while two others read the whole table over and
/// over, every row they read having c = a + b and d = a * 2.5; at the end every row does,
/// the counts are the inserts', and CHECKDB is clean.
#[test]
fn sessions_write_while_others_read() {
    let (s, mut c) = start_in_database("cc-sessions", "ccdb", SETUP);
    const PER: i32 = 60;
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let addr = s.addr.clone();
            thread::spawn(move || {
                let mut c = connect_at(&addr, Some("ccdb"), 60).unwrap();
                for i in 0..PER {
                    let id = w * 1000 + i;
                    run(
                        &mut c,
                        &format!("INSERT INTO t (id, a, b, s) VALUES ({id}, {i}, {w}, 'w{w}')"),
                    );
                    if i % 3 == 0 {
                        run(
                            &mut c,
                            &format!("UPDATE t SET a = a + 7, b = b * 2 WHERE id = {id}"),
                        );
                    }
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let addr = s.addr.clone();
            thread::spawn(move || {
                let mut c = connect_at(&addr, Some("ccdb"), 60).unwrap();
                let mut reads = 0;
                loop {
                    let bad = table(
                        &mut c,
                        "SELECT COUNT(*) FROM t WHERE c <> a + b OR d <> a * 2.5 \
                         OR e <> UPPER(s)",
                    );
                    assert_eq!(bad, ["0"], "a row whose computed values are not its own");
                    reads += 1;
                    let n: i32 = table(&mut c, "SELECT COUNT(*) FROM t")[0].parse().unwrap();
                    if n == 4 * PER {
                        return reads;
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    for r in readers {
        assert!(r.join().unwrap() >= 1);
    }
    assert_eq!(
        table(
            &mut c,
            "SELECT COUNT(*), SUM(CASE WHEN c = a + b AND d = a * 2.5 AND e = UPPER(s) \
             THEN 1 ELSE 0 END) FROM t"
        ),
        [format!("{},{}", 4 * PER, 4 * PER)]
    );
    // Rows updated (i % 3 == 0) hold the recomputed values.
    assert_eq!(
        table(&mut c, "SELECT a, b, c FROM t WHERE id = 2003"),
        ["10,4,14"]
    );
    assert_checkdb_clean(&mut c, "ccdb", "after the sessions");
}
