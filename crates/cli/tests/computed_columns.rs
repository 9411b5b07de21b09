//! Computed columns (the SQL layer's computed_columns.rs, catalog version 12) through real
//! TDS sessions: PERSISTED values through every read form and every writer (INSERT with and
//! without a column list, INSERT ... SELECT, UPDATE, UPDATE ... FROM, MERGE, OUTPUT), the
//! value stored in the record, recomputed when a column it reads changes; the refusals
//! (271, 1759, 4936, 1046, 207, 8183, 213, 40517) and arithmetic errors, each changing
//! nothing; CHECK constraints over a computed value; #temp tables, table variables and
//! SELECT ... INTO; sys.columns and sys.computed_columns; definitions surviving a kill -9; and
//! several sessions writing while others read. Indexes on a PERSISTED column: kept by
//! INSERT, UPDATE and DELETE, sought through by a WHERE naming the column, compared with
//! the table by CHECKDB, exact after a kill -9 under load.

use std::thread;

use extentdb_tds::client::Client;

mod common;
use common::tds::{
    all_rows, assert_checkdb_clean, connect_at, errors, int, numbers, restart, run,
    scans_and_reads, show, start_in_database, table,
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
/// not built (40517: constraints but CHECK on a computed column, aggregates, a column over
/// an IDENTITY): each leaves the table and the catalog as they were. A divide by zero
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
        (
            "CREATE TABLE x (a INT, c AS a + 1 PERSISTED PRIMARY KEY)",
            (40517, 16, 1),
        ),
        (
            "CREATE TABLE x (a INT, c AS a + 1 PERSISTED, UNIQUE (c))",
            (40517, 16, 1),
        ),
        (
            "CREATE TABLE x (a INT, c AS a + 1 CHECK (c > 0))",
            (8183, 16, 1),
        ),
        (
            "CREATE TABLE x (a INT, c AS a + 1 PERSISTED, FOREIGN KEY (c) REFERENCES r (id))",
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
/// the counts are the inserts', and CHECKDB (which compares index ix_c on c, INCLUDE d,
/// with the table) is clean.
#[test]
fn sessions_write_while_others_read() {
    let setup = SETUP.replace("s VARCHAR(10))", "s VARCHAR(10), vv AS b - a)");
    let (s, mut c) = start_in_database("cc-sessions", "ccdb", &setup);
    run(&mut c, "CREATE INDEX ix_c ON t (c) INCLUDE (d)");
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
                         OR e <> UPPER(s) OR vv <> b - a",
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
             AND vv = b - a THEN 1 ELSE 0 END) FROM t"
        ),
        [format!("{},{}", 4 * PER, 4 * PER)]
    );
    let ix = table(
        &mut c,
        "SELECT p.rows FROM sys.partitions AS p JOIN sys.indexes AS i \
         ON i.object_id = p.object_id AND i.index_id = p.index_id WHERE i.name = 'ix_c'",
    );
    assert_eq!(ix, [(4 * PER).to_string()]);
    // Rows updated (i % 3 == 0) hold the recomputed values.
    assert_eq!(
        table(&mut c, "SELECT a, b, c, vv FROM t WHERE id = 2003"),
        ["10,4,14,-6"]
    );
    assert_checkdb_clean(&mut c, "ccdb", "after the sessions");
}

/// The row count sys.partitions gives index `index` of `t`, and `t`'s COUNT(*).
fn index_and_table_rows(c: &mut Client, t: &str, index: &str) -> (String, String) {
    let ix = table(
        c,
        &format!(
            "SELECT p.rows FROM sys.partitions AS p JOIN sys.indexes AS i \
             ON i.object_id = p.object_id AND i.index_id = p.index_id \
             WHERE i.name = '{index}' AND p.object_id = OBJECT_ID('{t}')"
        ),
    );
    (
        ix[0].clone(),
        table(c, &format!("SELECT COUNT(*) FROM {t}"))[0].clone(),
    )
}

/// Proves an index on a PERSISTED column (key, and INCLUDE) is built from the stored
/// values, kept by INSERT, UPDATE of a column the definition reads, and DELETE, and sought
/// through by a WHERE naming the column: on 5,000 rows the seek reads a handful of pages
/// where the same predicate made opaque (NOT (NOT ...), which no seek analyses) reads the
/// table, with the same answer; CHECKDB compares the index with the table.
#[test]
fn index_on_a_persisted_column_is_kept_and_sought() {
    let (_s, mut c) = start_in_database(
        "cc-index",
        "ccdb",
        "CREATE TABLE p (id INT PRIMARY KEY, a INT, b INT, total AS a * 10000 + b PERSISTED, \
            pad CHAR(200)); SET NOCOUNT ON; DECLARE @i INT = 0; BEGIN TRAN; \
         WHILE @i < 5000 BEGIN INSERT INTO p (id, a, b, pad) VALUES (@i, @i % 500, @i % 7, 'p'); \
            SET @i += 1; END; COMMIT; \
         CREATE INDEX ix_total ON p (total); CREATE INDEX ix_a ON p (a) INCLUDE (total)",
    );
    assert_eq!(
        index_and_table_rows(&mut c, "p", "ix_total"),
        ("5000".into(), "5000".into())
    );
    run(&mut c, "SET STATISTICS IO ON");
    let compare = |c: &mut Client, pred: &str| -> usize {
        let seek = run(c, &format!("SELECT id FROM p WHERE {pred} ORDER BY id"));
        let scan = run(
            c,
            &format!("SELECT id FROM p WHERE NOT (NOT ({pred})) ORDER BY id"),
        );
        assert_eq!(all_rows(&seek), all_rows(&scan), "{pred}");
        let (seek_reads, scan_reads) = (scans_and_reads(&seek)[0].1, scans_and_reads(&scan)[0].1);
        assert!(seek_reads <= 40, "{pred}: {seek_reads} pages");
        assert!(scan_reads > 100, "{pred}: {scan_reads} pages");
        all_rows(&seek).len()
    };
    // total = a * 10000 + b: 170003 is a = 17 and b = 3 (ids 17 and 3517).
    let n = compare(&mut c, "total = 170003");
    assert_eq!(n, 2);
    // UPDATE of a source column moves the row's index record; DELETE removes it.
    run(&mut c, "UPDATE p SET b = b + 1000 WHERE a = 17");
    assert_eq!(compare(&mut c, "total = 170003"), 0);
    assert_eq!(compare(&mut c, "total = 171003"), n);
    run(&mut c, "DELETE FROM p WHERE total = 171003 AND id < 2500");
    let left = compare(&mut c, "total = 171003");
    assert!(left < n);
    run(
        &mut c,
        "INSERT INTO p (id, a, b, pad) VALUES (9000, 17, 1003, 'n')",
    );
    assert_eq!(compare(&mut c, "total = 171003"), left + 1);
    assert_eq!(
        all_rows(&run(&mut c, "SELECT total FROM p WHERE id = 9000"))
            .iter()
            .map(|r| int(&r[0]))
            .collect::<Vec<_>>(),
        [171003]
    );
    run(&mut c, "SET STATISTICS IO OFF");
    let (ix, rows) = index_and_table_rows(&mut c, "p", "ix_total");
    assert_eq!(ix, rows);
    assert_checkdb_clean(&mut c, "ccdb", "after changes through the index");
}

/// Proves a kill -9 while four sessions insert, update (a source column, in transactions
/// committed, rolled back or left open) and delete rows of a table with an index on a
/// PERSISTED column leaves, after recovery, the index equal to the table (CHECKDB clean,
/// the same row count) and every stored value its definition's.
#[test]
fn kill_9_under_load_leaves_the_index_exact() {
    let (s, _setup) = start_in_database(
        "cc-kill9",
        "ccdb",
        "CREATE TABLE k (id INT PRIMARY KEY, a INT, b INT, v AS a * 3 + b PERSISTED, \
            pad VARCHAR(300)); CREATE INDEX ix_v ON k (v)",
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..4i64)
        .map(|w| {
            let (addr, stop) = (s.addr.clone(), stop.clone());
            thread::spawn(move || {
                let Ok(mut c) = connect_at(&addr, Some("ccdb"), 60) else {
                    return;
                };
                let mut i = 0i64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let id = w * 1_000_000 + i;
                    let sql = format!(
                        "INSERT INTO k (id, a, b, pad) VALUES ({id}, {i} % 50, {w}, \
                            REPLICATE('x', {i} % 300)); \
                         UPDATE k SET a = a + 1 WHERE id = {id} - 3; \
                         DELETE FROM k WHERE id = {id} - 9; \
                         BEGIN TRAN; UPDATE k SET b = b + 10 WHERE id = {id} - 1"
                    );
                    if c.batch(&sql).is_err() {
                        return;
                    }
                    let _ = c.batch(if i % 2 == 0 { "COMMIT" } else { "ROLLBACK" });
                    i += 1;
                }
            })
        })
        .collect();
    thread::sleep(std::time::Duration::from_millis(1500));
    let s = restart(s);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        let _ = w.join();
    }
    let mut c = s.connect_to(Some("ccdb"));
    assert_checkdb_clean(&mut c, "ccdb", "after the kill");
    let (ix, rows) = index_and_table_rows(&mut c, "k", "ix_v");
    assert_eq!(ix, rows);
    assert_ne!(rows, "0", "the load inserted rows before the kill");
    assert_eq!(
        table(&mut c, "SELECT COUNT(*) FROM k WHERE v <> a * 3 + b"),
        ["0"]
    );
    // Values sought through the index find the rows a scan finds.
    for v in (0..160).step_by(7) {
        assert_eq!(
            table(
                &mut c,
                &format!("SELECT id FROM k WHERE v = {v} ORDER BY id")
            ),
            table(
                &mut c,
                &format!("SELECT id FROM k WHERE NOT (NOT (v = {v})) ORDER BY id")
            ),
            "v = {v}"
        );
    }
}

/// Proves CHECK constraints over a PERSISTED column (inline and table-level) see the
/// computed value: an INSERT or an UPDATE of a source column making it FALSE is 547 and
/// changes nothing; a #temp table and a table variable compute theirs; SELECT ... INTO
/// copies the values into ordinary columns.
#[test]
fn checks_temporary_tables_and_select_into() {
    let (_s, mut c) = start_in_database(
        "cc-checks",
        "ccdb",
        "CREATE TABLE ck (id INT PRIMARY KEY, a INT, b INT, \
            s AS a + b PERSISTED CONSTRAINT CK_s CHECK (s < 100), \
            CONSTRAINT CK_s_a CHECK (s > a)); INSERT ck VALUES (1, 10, 5)",
    );
    let start = table(&mut c, "SELECT * FROM ck");
    assert_eq!(start, ["1,10,5,15"]);
    for (sql, constraint) in [
        ("INSERT ck VALUES (2, 60, 50)", "CK_s"),
        ("UPDATE ck SET b = 200", "CK_s"),
        ("UPDATE ck SET b = -1", "CK_s_a"),
    ] {
        let r = c.batch(sql).unwrap();
        let e = r.errors().next().unwrap_or_else(|| panic!("{sql} passed"));
        assert_eq!(e.number, 547, "{sql}");
        assert!(
            e.text.contains(&format!("\"{constraint}\"")),
            "{sql}: {}",
            e.text
        );
        assert_eq!(
            table(&mut c, "SELECT * FROM ck"),
            start,
            "{sql} changed something"
        );
    }
    run(&mut c, "UPDATE ck SET a = 20");
    assert_eq!(table(&mut c, "SELECT s FROM ck"), ["25"]);
    assert_eq!(
        table(
            &mut c,
            "CREATE TABLE #t (a INT, c AS a * a PERSISTED); INSERT #t VALUES (3); \
             DECLARE @v TABLE (a INT, c AS a - 1 PERSISTED); INSERT @v VALUES (5); \
             SELECT c FROM #t UNION ALL SELECT c FROM @v"
        ),
        ["9", "4"]
    );
    run(&mut c, "SELECT * INTO plain FROM ck");
    assert_eq!(table(&mut c, "SELECT * FROM plain"), ["1,20,5,25"]);
    assert_eq!(
        table(
            &mut c,
            "SELECT SUM(CAST(is_computed AS INT)) FROM sys.columns \
             WHERE object_id = OBJECT_ID('plain')"
        ),
        ["0"]
    );
    run(&mut c, "UPDATE plain SET s = 1");
}

/// Proves a computed column that is not PERSISTED is in no record and computed by every
/// read: declared before the PRIMARY KEY column (so record positions differ from column
/// positions), its table's records are as long as those of a table without it; SELECT *,
/// WHERE, ORDER BY, a join, a derived table, INSERT ... SELECT from it and OUTPUT inserted
/// and deleted see its value; an UPDATE of a column it reads changes it; sys.computed_columns
/// says is_persisted 0; an index over it is made; a row whose value cannot be
/// computed (8134) is refused when written, so no read fails on it later; a kill -9 keeps
/// the definition; CHECKDB is clean.
#[test]
fn non_persisted_columns_are_computed_by_every_read() {
    let (s, mut c) = start_in_database(
        "cc-virtual",
        "ccdb",
        "CREATE TABLE v (x INT, twice AS a * 2, a INT, id INT PRIMARY KEY, b INT, \
            ratio AS 100 / b, total AS a + b PERSISTED); \
         CREATE TABLE plainv (x INT, a INT, id INT PRIMARY KEY, b INT, total INT); \
         INSERT v VALUES (0, 1, 1, 2); INSERT plainv VALUES (0, 1, 1, 2, 3)",
    );
    let size = |c: &mut Client, t: &str| -> String {
        table(
            c,
            &format!(
                "SELECT max_record_size_in_bytes FROM sys.dm_db_index_physical_stats \
                 (DB_ID(), OBJECT_ID('{t}'), NULL, NULL, 'DETAILED') WHERE index_level = 0"
            ),
        )[0]
        .clone()
    };
    assert_eq!(size(&mut c, "v"), size(&mut c, "plainv"));
    run(&mut c, "INSERT INTO v (id, a, b, x) VALUES (2, 10, 20, 5)");
    assert_eq!(
        table(&mut c, "SELECT * FROM v ORDER BY id"),
        ["0,2,1,1,2,50,3", "5,20,10,2,20,5,30"]
    );
    assert_eq!(
        table(&mut c, "SELECT id FROM v WHERE twice > 5 ORDER BY ratio"),
        ["2"]
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT v.id, p.id FROM v JOIN plainv AS p ON p.total * 17 = v.ratio + 1"
        ),
        ["1,1"]
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT SUM(q) FROM (SELECT twice + ratio AS q FROM v) AS d"
        ),
        ["77"]
    );
    run(
        &mut c,
        "CREATE TABLE copy (twice INT, ratio INT); INSERT copy SELECT twice, ratio FROM v",
    );
    assert_eq!(
        table(&mut c, "SELECT SUM(twice), SUM(ratio) FROM copy"),
        ["22,55"]
    );
    assert_eq!(
        table(&mut c, "UPDATE v SET a = 100, b = 4 OUTPUT deleted.twice, inserted.twice, inserted.ratio WHERE id = 1"),
        ["2,200,25"]
    );
    assert_eq!(
        table(&mut c, "DELETE FROM v OUTPUT deleted.ratio WHERE id = 2"),
        ["5"]
    );
    assert_eq!(
        numbers(&mut c, "INSERT INTO v (id, a, b) VALUES (3, 1, 0)"),
        [8134]
    );
    assert_eq!(numbers(&mut c, "UPDATE v SET b = 0"), [8134]);
    assert_eq!(numbers(&mut c, "UPDATE v SET twice = 1"), [271]);
    // An index on one (computed_indexes.rs proves it) survives the kill below.
    run(&mut c, "CREATE INDEX ix_twice ON v (twice)");
    assert_eq!(table(&mut c, "SELECT * FROM v"), ["0,200,100,1,4,25,104"]);
    assert_eq!(
        table(
            &mut c,
            "SELECT name, definition, is_persisted FROM sys.computed_columns \
             WHERE object_id = OBJECT_ID('v') ORDER BY column_id"
        ),
        [
            "twice,([a]*(2)),0",
            "ratio,((100)/[b]),0",
            "total,([a]+[b]),1"
        ]
    );
    assert_checkdb_clean(&mut c, "ccdb", "before the kill");
    let s = restart(s);
    let mut c = s.connect_to(Some("ccdb"));
    run(&mut c, "INSERT INTO v (id, a, b) VALUES (4, 3, 3)");
    assert_eq!(
        table(&mut c, "SELECT id, twice, ratio, total FROM v ORDER BY id"),
        ["1,200,25,104", "4,6,33,6"]
    );
    assert_eq!(size(&mut c, "v"), size(&mut c, "plainv"));
    assert_checkdb_clean(&mut c, "ccdb", "after the kill");
}

/// SHOWPLAN_TEXT draws a SELECT's computed columns as the read computes them: a Compute
/// Scalar defining each one not PERSISTED over the table's read (the PERSISTED one is
/// stored), WHERE in a Filter above it (it may read them); the other session's run gives
/// the row that plan gives. A write of the table (which computes them) is refused
/// (40517) rather than shown without them, and nothing runs.
#[test]
fn showplan_draws_a_selects_computed_columns_and_refuses_writes() {
    let (s, mut c) = start_in_database(
        "cc-showplan",
        "cc",
        "CREATE TABLE t (id INT PRIMARY KEY, a INT, c AS a * 2 PERSISTED, d AS a + 1); \
         CREATE TABLE p (id INT PRIMARY KEY, a INT); INSERT INTO t VALUES (1, 5)",
    );
    let mut other = s.connect_to(Some("cc"));
    let pk = table(
        &mut c,
        "SELECT name FROM sys.indexes WHERE object_id = OBJECT_ID('t') AND index_id = 1",
    );
    run(&mut c, "SET SHOWPLAN_TEXT ON");
    let sql = "SELECT id, d FROM t WHERE d > 5 AND id = 1";
    assert_eq!(
        table(&mut c, sql)[1..],
        [
            "  |--Filter(WHERE:([d]>(5) AND [id]=(1)))".to_string(),
            "       |--Compute Scalar(DEFINE:([cc].[dbo].[t].[d]=[a]+(1)))".to_string(),
            format!(
                "            |--Clustered Index Seek(OBJECT:([cc].[dbo].[t].[{}]), \
                 SEEK:([cc].[dbo].[t].[id]=(1)) ORDERED FORWARD)",
                pk[0]
            ),
        ]
    );
    assert_eq!(
        table(&mut c, "SELECT c FROM t")[1..],
        [
            "  |--Compute Scalar(DEFINE:([cc].[dbo].[t].[d]=[a]+(1)))".to_string(),
            format!(
                "       |--Clustered Index Scan(OBJECT:([cc].[dbo].[t].[{}]))",
                pk[0]
            ),
        ],
        "every row read computes d, read or not"
    );
    for sql in [
        "INSERT INTO t VALUES (2, 6)",
        "UPDATE t SET a = 7 WHERE id = 1",
        "DELETE FROM t WHERE id = 1",
        "SELECT * FROM t CROSS JOIN p",
    ] {
        assert_eq!(numbers(&mut c, sql), [40517], "{sql}");
    }
    assert!(!numbers(&mut c, "SELECT * FROM p").contains(&40517));
    // SHOWPLAN_ALL: the Compute Scalar's DefinedValues are its definitions.
    run(&mut c, "SET SHOWPLAN_ALL ON");
    let rows = all_rows(&run(&mut c, "SELECT c FROM t"));
    let op: Vec<String> = [2, 3, 4, 5, 7].iter().map(|&i| show(&rows[1][i])).collect();
    assert_eq!(
        op,
        [
            "2",
            "1",
            "Compute Scalar",
            "Compute Scalar",
            "[cc].[dbo].[t].[d]=[a]+(1)"
        ]
    );
    run(&mut c, "SET SHOWPLAN_ALL OFF");
    assert_eq!(
        table(&mut other, "SELECT id, d FROM t WHERE d > 5 AND id = 1"),
        ["1,6"]
    );
    assert_eq!(table(&mut other, "SELECT id, a, c, d FROM t"), ["1,5,10,6"]);
}
