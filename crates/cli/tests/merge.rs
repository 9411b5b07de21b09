//! MERGE (crates/sql/src/exec/merge.rs, parser/merge.rs) through a real `extentdb serve`
//! and real TDS sessions: upserts and syncs, AND conditions, DELETE when matched, sources
//! that are a VALUES constructor, a CTE, a #temp table and a table variable, OUTPUT with
//! `$action` and INTO, @@ROWCOUNT and the DONE's count, 8672 for a target row matched
//! twice, a key violation and a rollback undoing the whole MERGE, the clause rules and
//! what is refused, clustered and heap targets; TOP (n) [PERCENT] and OPTION (...); and
//! sessions upserting one table at once, with and without TOP.

use extentdb_tds::client::{Client, Response};

mod common;
use common::tds::{
    all_rows, assert_checkdb_clean, connect_at, errors, int, numbers, run, strs, table, Server,
};

fn setup(name: &str) -> (Server, Client) {
    common::tds::start_in_database(name, "mg", "")
}

/// The counts of the response's DONE tokens that carry one.
fn counts(r: &Response) -> Vec<u64> {
    r.outputs
        .iter()
        .filter_map(|o| match o {
            extentdb_sql::exec::Output::RowsAffected(n) => Some(*n),
            _ => None,
        })
        .collect()
}

/// The two target shapes every behaviour is checked on.
const TARGETS: [&str; 2] = [
    "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10), n INT NOT NULL)",
    "CREATE TABLE t (id INT, v VARCHAR(10), n INT NOT NULL)",
];

/// Upsert: matched rows updated, the others inserted, on a clustered table and a heap;
/// the DONE's count and @@ROWCOUNT are the rows inserted plus updated; the DONE names
/// MERGE (CurCmd 279).
#[test]
fn upsert_updates_matched_and_inserts_the_rest() {
    let (_s, mut c) = setup("upsert");
    for create in TARGETS {
        run(&mut c, &format!("DROP TABLE IF EXISTS t; {create}"));
        run(&mut c, "INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2)");
        let r = run(
            &mut c,
            "MERGE INTO t USING (VALUES (2, 'B'), (3, 'C')) AS s (id, v) ON t.id = s.id
             WHEN MATCHED THEN UPDATE SET v = s.v, n = t.n + 10
             WHEN NOT MATCHED THEN INSERT (id, v, n) VALUES (s.id, s.v, 0);
             SELECT @@ROWCOUNT",
        );
        assert_eq!(counts(&r)[0], 2, "{create}");
        assert_eq!(int(&all_rows(&r)[0][0]), 2);
        assert!(
            r.dones.iter().any(|d| d.2 == 279 && d.3 == 2),
            "{:?}",
            r.dones
        );
        assert_eq!(
            table(&mut c, "SELECT id, v, n FROM t ORDER BY id"),
            strs(&["1,a,1", "2,B,12", "3,C,0"]),
            "{create}"
        );
    }
    assert_checkdb_clean(&mut c, "mg", "after the upserts");
}

/// Sync: WHEN NOT MATCHED BY SOURCE THEN DELETE removes the target rows the source lacks;
/// AND conditions pick among two MATCHED clauses (DELETE first, UPDATE otherwise) and
/// skip rows no clause takes; BY SOURCE with UPDATE.
#[test]
fn sync_with_conditions_and_deletes() {
    let (_s, mut c) = setup("sync");
    for create in TARGETS {
        run(&mut c, &format!("DROP TABLE IF EXISTS t; {create}"));
        run(
            &mut c,
            "INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3), (4, 'd', 4), (5, 'e', 5)",
        );
        run(
            &mut c,
            "CREATE TABLE #src (id INT, v VARCHAR(10));
             INSERT INTO #src VALUES (1, 'x'), (2, 'gone'), (3, 'c'), (6, 'f'), (7, 'skip')",
        );
        let r = run(
            &mut c,
            "MERGE t AS tg USING #src AS s ON tg.id = s.id
             WHEN MATCHED AND s.v = 'gone' THEN DELETE
             WHEN MATCHED AND tg.v <> s.v THEN UPDATE SET v = s.v
             WHEN NOT MATCHED BY TARGET AND s.v <> 'skip' THEN INSERT VALUES (s.id, s.v, 60)
             WHEN NOT MATCHED BY SOURCE AND tg.id = 5 THEN UPDATE SET n = 50
             WHEN NOT MATCHED BY SOURCE THEN DELETE;",
        );
        // 1 updated, 2 deleted ('gone'), 3 left (equal), 6 inserted, 7 skipped, 4
        // deleted and 5 updated (not matched by source).
        assert_eq!(counts(&r), vec![5], "{create}");
        assert_eq!(
            table(&mut c, "SELECT id, v, n FROM t ORDER BY id"),
            strs(&["1,x,1", "3,c,3", "5,e,50", "6,f,60"]),
            "{create}"
        );
        run(&mut c, "DROP TABLE #src");
    }
    assert_checkdb_clean(&mut c, "mg", "after the syncs");
}

/// Sources: a CTE (WITH ... MERGE), a derived table, a table variable; INSERT DEFAULT
/// VALUES and a column's DEFAULT; an identity column filled as INSERT fills it.
#[test]
fn cte_derived_and_variable_sources() {
    let (_s, mut c) = setup("sources");
    run(
        &mut c,
        "CREATE TABLE k (id INT PRIMARY KEY, n INT NOT NULL DEFAULT 7);
         CREATE TABLE idt (i INT IDENTITY(10, 1) PRIMARY KEY, v INT);
         INSERT INTO k VALUES (1, 1)",
    );
    run(
        &mut c,
        "WITH src AS (SELECT 1 AS id UNION ALL SELECT 2)
         MERGE k USING src ON k.id = src.id
         WHEN MATCHED THEN UPDATE SET n = 100
         WHEN NOT MATCHED THEN INSERT (id) VALUES (src.id);",
    );
    assert_eq!(
        table(&mut c, "SELECT id, n FROM k ORDER BY id"),
        strs(&["1,100", "2,7"])
    );
    run(
        &mut c,
        "MERGE k USING (SELECT id + 10 AS id FROM k) AS d ON k.id = d.id
         WHEN NOT MATCHED THEN INSERT (id, n) VALUES (d.id, d.id * 2);",
    );
    assert_eq!(
        table(&mut c, "SELECT id, n FROM k ORDER BY id"),
        strs(&["1,100", "2,7", "11,22", "12,24"])
    );
    run(
        &mut c,
        "DECLARE @s TABLE (v INT); INSERT INTO @s VALUES (5), (6);
         MERGE idt USING @s AS s ON idt.v = s.v
         WHEN NOT MATCHED THEN INSERT (v) VALUES (s.v);
         MERGE idt USING (VALUES (1)) AS s (x) ON 1 = 0
         WHEN NOT MATCHED THEN INSERT DEFAULT VALUES;",
    );
    assert_eq!(
        table(&mut c, "SELECT i, v FROM idt ORDER BY i"),
        strs(&["10,5", "11,6", "12,NULL"])
    );
    // A table variable as the target, and the HOLDLOCK hint MERGE upserts often carry.
    let r = run(
        &mut c,
        "DECLARE @t TABLE (id INT PRIMARY KEY, n INT); INSERT INTO @t VALUES (1, 1);
         MERGE @t AS tv USING (VALUES (1), (2)) AS s (id) ON tv.id = s.id
         WHEN MATCHED THEN UPDATE SET n = tv.n + 1
         WHEN NOT MATCHED THEN INSERT VALUES (s.id, 0);
         MERGE k WITH (HOLDLOCK) USING (VALUES (1)) AS s (id) ON k.id = s.id
         WHEN MATCHED THEN UPDATE SET n = n + 1;
         SELECT id, n FROM @t ORDER BY id",
    );
    let got: Vec<String> = all_rows(&r)
        .iter()
        .map(|r| {
            r.iter()
                .map(common::tds::show)
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    assert_eq!(got, strs(&["1,2", "2,0"]));
    assert_eq!(
        table(&mut c, "SELECT n FROM k WHERE id = 1"),
        strs(&["101"])
    );
}

/// A sync of 6,000 target rows against 6,000 source rows half of which match, on a
/// clustered table and a heap: 3,000 updated, 3,000 inserted, 3,000 deleted, in one
/// statement; a VALUES table and a derived table's column list read as SELECT's sources.
#[test]
fn a_larger_sync() {
    let (_s, mut c) = setup("larger");
    run(&mut c, "CREATE TABLE #acts (a NVARCHAR(10))");
    let t = table(
        &mut c,
        "SELECT a + b FROM (SELECT 1, 2) AS d (a, b)
         UNION ALL SELECT SUM(n) FROM (VALUES (1, 'x'), (2, 'y')) AS v (n, s)",
    );
    assert_eq!(t, strs(&["3", "3"]));
    for create in [
        "CREATE TABLE big (k INT PRIMARY KEY, pad CHAR(200) NOT NULL, n INT NOT NULL)",
        "CREATE TABLE big (k INT NOT NULL, pad CHAR(200) NOT NULL, n INT NOT NULL)",
    ] {
        run(
            &mut c,
            &format!(
                "DROP TABLE IF EXISTS big; DROP TABLE IF EXISTS src; {create};
                 CREATE TABLE src (k INT PRIMARY KEY, n INT NOT NULL);
                 SET NOCOUNT ON; DECLARE @i INT = 0;
                 WHILE @i < 6000 BEGIN
                   INSERT INTO big VALUES (@i, 'p', 0); INSERT INTO src VALUES (@i + 3000, 1);
                   SET @i += 1;
                 END; SET NOCOUNT OFF"
            ),
        );
        let r = run(
            &mut c,
            "MERGE big USING src ON big.k = src.k
             WHEN MATCHED THEN UPDATE SET n = big.n + src.n
             WHEN NOT MATCHED BY TARGET THEN INSERT VALUES (src.k, 'q', 5)
             WHEN NOT MATCHED BY SOURCE THEN DELETE
             OUTPUT $action INTO #acts (a);",
        );
        assert_eq!(counts(&r), vec![9000], "{create}");
        assert_eq!(
            table(&mut c, "SELECT COUNT(*), MIN(k), MAX(k), SUM(n) FROM big"),
            strs(&["6000,3000,8999,18000"]),
            "{create}"
        );
        assert_eq!(
            table(
                &mut c,
                "SELECT a, COUNT(*) FROM #acts GROUP BY a ORDER BY a"
            ),
            strs(&["DELETE,3000", "INSERT,3000", "UPDATE,3000"])
        );
        run(&mut c, "DELETE FROM #acts");
    }
    assert_checkdb_clean(&mut c, "mg", "after the larger syncs");
}

/// OUTPUT $action with inserted and deleted columns (NULL for the half an action lacks),
/// `$action` typed nvarchar(10), and OUTPUT ... INTO a #temp table.
#[test]
fn output_action_and_into() {
    let (_s, mut c) = setup("output");
    run(
        &mut c,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10), n INT NOT NULL);
         INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3)",
    );
    let r = run(
        &mut c,
        "MERGE t USING (VALUES (1, 'A'), (4, 'D')) AS s (id, v) ON t.id = s.id
         WHEN MATCHED THEN UPDATE SET v = s.v
         WHEN NOT MATCHED BY TARGET THEN INSERT VALUES (s.id, s.v, 0)
         WHEN NOT MATCHED BY SOURCE AND t.id = 3 THEN DELETE
         OUTPUT $action AS act, deleted.id, inserted.id, inserted.v;",
    );
    let mut got: Vec<String> = all_rows(&r)
        .iter()
        .map(|r| {
            r.iter()
                .map(common::tds::show)
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        strs(&["DELETE,3,NULL,NULL", "INSERT,NULL,4,D", "UPDATE,1,1,A"])
    );
    assert_eq!(counts(&r), vec![3]);
    run(&mut c, "CREATE TABLE #log (a NVARCHAR(10), k INT)");
    run(
        &mut c,
        "MERGE t USING (VALUES (2), (9)) AS s (id) ON t.id = s.id
         WHEN MATCHED THEN DELETE
         WHEN NOT MATCHED THEN INSERT VALUES (s.id, 'z', 9)
         OUTPUT $action, ISNULL(inserted.id, deleted.id) INTO #log;",
    );
    assert_eq!(
        table(&mut c, "SELECT a, k FROM #log ORDER BY k"),
        strs(&["DELETE,2", "INSERT,9"])
    );
}

/// The type of OUTPUT's `$action` column: nvarchar(10), named `$action` unless aliased.
#[test]
fn action_is_nvarchar_10() {
    let (_s, mut c) = setup("action");
    run(&mut c, "CREATE TABLE t (id INT PRIMARY KEY)");
    let r = run(
        &mut c,
        "MERGE t USING (VALUES (1)) AS s (id) ON t.id = s.id
         WHEN NOT MATCHED THEN INSERT VALUES (s.id) OUTPUT $action, inserted.id;",
    );
    let columns = r.outputs.iter().find_map(|o| match o {
        extentdb_sql::exec::Output::Rows { columns, .. } => Some(columns.clone()),
        _ => None,
    });
    let columns = columns.expect("a result set");
    assert_eq!(columns[0].1, extentdb_sql::types::SqlType::NVarChar(10));
    assert_eq!(columns[0].0, "$action");
}

/// Msg 8672 when a target row matches two source rows that UPDATE or DELETE it, and
/// nothing changes; two source rows that only INSERT are no error.
#[test]
fn a_target_row_matched_twice_is_8672() {
    let (_s, mut c) = setup("twice");
    for create in TARGETS {
        run(&mut c, &format!("DROP TABLE IF EXISTS t; {create}"));
        run(&mut c, "INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2)");
        let r = c
            .batch(
                "MERGE t USING (VALUES (3), (1), (1)) AS s (id) ON t.id = s.id
                 WHEN MATCHED THEN UPDATE SET n = t.n + 1
                 WHEN NOT MATCHED THEN INSERT VALUES (s.id, 'n', 0);",
            )
            .unwrap();
        let e = r.errors().next().expect("an error");
        assert_eq!((e.number, e.severity, e.state), (8672, 16, 1), "{create}");
        assert!(
            e.text.starts_with(
                "The MERGE statement attempted to UPDATE or DELETE the same row more than once."
            ),
            "{}",
            e.text
        );
        assert_eq!(
            table(&mut c, "SELECT id, v, n FROM t ORDER BY id"),
            strs(&["1,a,1", "2,b,2"]),
            "{create}"
        );
    }
}

/// A PRIMARY KEY violation (2627) and a NOT NULL one (515) by the MERGE's own inserts undo
/// its updates and deletes too; inside an explicit transaction the MERGE's changes go
/// with ROLLBACK, and a failed MERGE inside one leaves the earlier work in place.
#[test]
fn errors_and_rollback_undo_the_whole_merge() {
    let (_s, mut c) = setup("atomic");
    run(
        &mut c,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10), n INT NOT NULL);
         INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3)",
    );
    let before = strs(&["1,a,1", "2,b,2", "3,c,3"]);
    let dup = "MERGE t USING (VALUES (1, 5), (7, 7), (8, 7)) AS s (id, k) ON t.id = s.id
               WHEN MATCHED THEN UPDATE SET n = 99
               WHEN NOT MATCHED THEN INSERT VALUES (s.k, 'x', 0)
               WHEN NOT MATCHED BY SOURCE THEN DELETE;";
    assert_eq!(numbers(&mut c, dup)[0], 2627);
    assert_eq!(table(&mut c, "SELECT id, v, n FROM t ORDER BY id"), before);
    let null = "MERGE t USING (VALUES (1, 1), (9, NULL)) AS s (id, n) ON t.id = s.id
                WHEN MATCHED THEN DELETE
                WHEN NOT MATCHED THEN INSERT VALUES (s.id, 'x', s.n);";
    assert_eq!(numbers(&mut c, null)[0], 515);
    assert_eq!(table(&mut c, "SELECT id, v, n FROM t ORDER BY id"), before);
    run(
        &mut c,
        "BEGIN TRAN; UPDATE t SET v = 'kept' WHERE id = 3;
         MERGE t USING (VALUES (1), (4)) AS s (id) ON t.id = s.id
         WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT VALUES (s.id, 'd', 4);",
    );
    assert_eq!(numbers(&mut c, dup)[0], 2627);
    assert_eq!(
        table(&mut c, "SELECT id, v, n, @@TRANCOUNT FROM t ORDER BY id"),
        strs(&["2,b,2,1", "3,kept,3,1", "4,d,4,1"])
    );
    run(&mut c, "ROLLBACK");
    assert_eq!(table(&mut c, "SELECT id, v, n FROM t ORDER BY id"), before);
    assert_checkdb_clean(&mut c, "mg", "after the failed MERGEs");
}

/// The clause rules with SQL Server's numbers (10710, 10711, 10713, 10714, 10709; 5333 and
/// 5334 for a side a NOT MATCHED clause has no row of), the
/// errors of UPDATE and INSERT (207, 4104, 8102, 109, 110, 213, 1013), and what is not
/// built refused with 40517 (a query hint SELECT refuses, a join as the source, a source's
/// columns in OUTPUT, a system view as the target, $action outside MERGE); each changes
/// nothing.
#[test]
fn clause_rules_and_refusals() {
    let (_s, mut c) = setup("refuse");
    run(
        &mut c,
        "CREATE TABLE t (id INT PRIMARY KEY, v INT); INSERT INTO t VALUES (1, 1);
         CREATE TABLE u (id INT IDENTITY PRIMARY KEY, v INT)",
    );
    let m = "MERGE t USING (VALUES (1, 2)) AS s (id, v) ON t.id = s.id";
    let cases: Vec<(String, i32)> = vec![
        (format!("{m} WHEN MATCHED THEN UPDATE SET v = s.v"), 10713),
        (format!("{m} WHEN MATCHED THEN UPDATE SET v = s.v SELECT 1"), 10713),
        (format!("{m} WHEN MATCHED THEN INSERT VALUES (1, 1);"), 10711),
        (format!("{m} WHEN NOT MATCHED BY SOURCE THEN INSERT VALUES (1, 1);"), 10711),
        (format!("{m} WHEN NOT MATCHED THEN DELETE;"), 10710),
        (
            format!("{m} WHEN MATCHED AND s.v = 1 THEN DELETE WHEN MATCHED THEN DELETE;"),
            10714,
        ),
        (
            format!("{m} WHEN NOT MATCHED THEN INSERT VALUES (1, 1) WHEN NOT MATCHED THEN INSERT VALUES (2, 2);"),
            10714,
        ),
        (
            "MERGE t USING (VALUES (1, 2), (3)) AS s (id, v) ON t.id = s.id WHEN MATCHED THEN DELETE;".into(),
            10709,
        ),
        (format!("{m} WHEN NOT MATCHED THEN INSERT VALUES (t.id, 1);"), 5333),
        (format!("{m} WHEN NOT MATCHED AND t.v = 1 THEN INSERT VALUES (2, 1);"), 5333),
        (format!("{m} WHEN NOT MATCHED BY SOURCE AND s.v = 1 THEN DELETE;"), 5334),
        (format!("{m} WHEN NOT MATCHED BY SOURCE THEN UPDATE SET v = s.v;"), 5334),
        (format!("{m} WHEN MATCHED THEN UPDATE SET nope = 1;"), 207),
        (format!("{m} WHEN MATCHED THEN UPDATE SET x.v = 1;"), 4104),
        (format!("{m} WHEN NOT MATCHED THEN INSERT (id) VALUES (1, 2);"), 110),
        (format!("{m} WHEN NOT MATCHED THEN INSERT (id, v) VALUES (1);"), 109),
        (format!("{m} WHEN NOT MATCHED THEN INSERT VALUES (1);"), 213),
        (
            "MERGE u USING (VALUES (1)) AS s (v) ON u.v = s.v WHEN MATCHED THEN UPDATE SET id = 1;".into(),
            8102,
        ),
        (
            "MERGE t USING t ON t.id = t.id WHEN MATCHED THEN DELETE;".into(),
            1013,
        ),
        (format!("{m} WHEN MATCHED THEN DELETE OPTION (HASH JOIN);"), 40517),
        (
            "MERGE t USING u JOIN u AS w ON u.id = w.id ON t.id = u.id WHEN MATCHED THEN DELETE;".into(),
            40517,
        ),
        (format!("{m} WHEN MATCHED THEN DELETE OUTPUT s.v;"), 40517),
        (
            "MERGE sys.databases USING t ON 1 = 1 WHEN MATCHED THEN DELETE;".into(),
            40517,
        ),
        ("INSERT INTO t OUTPUT $action VALUES (2, 2)".into(), 40517),
    ];
    for (sql, number) in &cases {
        assert_eq!(numbers(&mut c, sql).first(), Some(number), "{sql}");
        run(&mut c, "SET ROWCOUNT 0");
    }
    assert_eq!(errors(&mut c, &cases[0].0)[0], (10713, 15, 1));
    // 5333 / 5334: state 2 for a qualified name, 1 for a bare one.
    let qualified = format!("{m} WHEN NOT MATCHED THEN INSERT VALUES (t.id, 1);");
    assert_eq!(errors(&mut c, &qualified), [(5333, 16, 2)]);
    let bare = "MERGE t USING (VALUES (1)) AS s (id) ON t.id = s.id \
                WHEN NOT MATCHED AND v = 1 THEN INSERT VALUES (2, 1);";
    assert_eq!(errors(&mut c, bare), [(5333, 16, 1)]);
    assert_eq!(table(&mut c, "SELECT id, v FROM t"), strs(&["1,1"]));
    assert_eq!(table(&mut c, "SELECT COUNT(*) FROM u"), strs(&["0"]));
}

/// Four sessions MERGE-upsert one table at once, 60 statements each: every statement
/// bumps one of five shared rows and inserts a key of the session's own. The final table
/// is exactly what the acknowledged statements imply (no lost bump, no lost or doubled
/// insert), and CHECKDB is clean.
#[test]
fn sessions_upsert_one_table_at_once() {
    let (s, mut c) = setup("conc");
    run(
        &mut c,
        "CREATE TABLE kv (k INT PRIMARY KEY, who INT NOT NULL, n INT NOT NULL);
         INSERT INTO kv VALUES (0, -1, 0), (1, -1, 0), (2, -1, 0), (3, -1, 0), (4, -1, 0)",
    );
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let addr = s.addr.clone();
            std::thread::spawn(move || {
                let mut c = connect_at(&addr, Some("mg"), 120).unwrap();
                let mut acked = Vec::new();
                for i in 0..60 {
                    let own = 1000 * (w + 1) + i;
                    let sql = format!(
                        "MERGE kv USING (VALUES ({own}, {w}), ({}, {w})) AS s (k, who) \
                         ON kv.k = s.k \
                         WHEN MATCHED THEN UPDATE SET n = kv.n + 1 \
                         WHEN NOT MATCHED THEN INSERT (k, who, n) VALUES (s.k, s.who, 1);",
                        i % 5
                    );
                    let r = c.batch(&sql).unwrap();
                    match r.errors().next() {
                        None => acked.push((own, i % 5)),
                        Some(e) => assert_eq!(e.number, 1205, "{sql}: {}", e.text),
                    };
                }
                acked
            })
        })
        .collect();
    let acked: Vec<(i64, i64)> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    assert!(
        acked.len() >= 200,
        "most statements acknowledged: {}",
        acked.len()
    );
    let mut want: Vec<String> = (0..5)
        .map(|k| {
            let bumps = acked.iter().filter(|a| a.1 == k).count();
            format!("{k},-1,{bumps}")
        })
        .collect();
    let mut own: Vec<i64> = acked.iter().map(|a| a.0).collect();
    own.sort();
    want.extend(own.iter().map(|k| format!("{k},{},1", k / 1000 - 1)));
    assert_eq!(table(&mut c, "SELECT k, who, n FROM kv ORDER BY k"), want);
    assert_checkdb_clean(&mut c, "mg", "after the concurrent upserts");
}

/// `(action, id)` of each OUTPUT row of a response, sorted.
fn actions(r: &Response) -> Vec<(String, i64)> {
    let mut v: Vec<(String, i64)> = all_rows(r)
        .iter()
        .filter(|row| row.len() == 2)
        .map(|row| (common::tds::show(&row[0]), int(&row[1])))
        .collect();
    v.sort();
    v
}

/// The rows a MERGE over t (ids 1..=6, n = id) changed, read from the table: updated
/// (n >= 100), inserted (id > 6) and deleted (ids 1..=6 gone).
fn changed_rows(c: &mut Client) -> i64 {
    let r = run(
        c,
        "SELECT (SELECT COUNT(*) FROM t WHERE n >= 100) + (SELECT COUNT(*) FROM t WHERE id > 6)
              + (6 - (SELECT COUNT(*) FROM t WHERE id <= 6))",
    );
    int(&all_rows(&r)[0][0])
}

/// TOP (n) limits the rows acted on by the UPDATE, INSERT and DELETE clauses together:
/// @@ROWCOUNT, the DONE's count and the table's content all show exactly n changed rows
/// (of 7 that qualify); with OUTPUT exactly n rows come back and they are the rows the
/// table shows changed; TOP (0) changes nothing; TOP larger than the rows changes them all.
#[test]
fn top_limits_the_rows_affected() {
    let (_s, mut c) = setup("top");
    let merge = |top: &str, output: &str| {
        format!(
            "MERGE TOP ({top}) INTO t USING (VALUES (1), (2), (3), (7), (8)) AS s (id)
             ON t.id = s.id
             WHEN MATCHED THEN UPDATE SET n = t.n + 100
             WHEN NOT MATCHED THEN INSERT (id, v, n) VALUES (s.id, 'new', s.id)
             WHEN NOT MATCHED BY SOURCE AND t.id > 4 THEN DELETE {output};
             SELECT @@ROWCOUNT"
        )
    };
    let fill =
        "INSERT INTO t VALUES (1,'a',1), (2,'b',2), (3,'c',3), (4,'d',4), (5,'e',5), (6,'f',6)";
    for create in TARGETS {
        for (top, want) in [(3, 3), (0, 0), (1, 1), (50, 7)] {
            run(&mut c, &format!("DROP TABLE IF EXISTS t; {create}; {fill}"));
            let r = run(&mut c, &merge(&top.to_string(), ""));
            assert_eq!(counts(&r)[0], want, "{create} TOP ({top})");
            assert_eq!(
                int(&all_rows(&r)[0][0]),
                want as i64,
                "{create} TOP ({top})"
            );
            assert_eq!(changed_rows(&mut c), want as i64, "{create} TOP ({top})");
        }
        run(&mut c, &format!("DROP TABLE IF EXISTS t; {create}; {fill}"));
        let r = run(
            &mut c,
            &merge("2", "OUTPUT $action, ISNULL(inserted.id, deleted.id)"),
        );
        let out = actions(&r);
        assert_eq!(out.len(), 2, "{create}: {out:?}");
        assert_eq!(changed_rows(&mut c), 2);
        for (action, id) in &out {
            let now = table(&mut c, &format!("SELECT n FROM t WHERE id = {id}"));
            let want = match action.as_str() {
                "UPDATE" => vec![(id + 100).to_string()],
                "INSERT" => vec![id.to_string()],
                "DELETE" => Vec::new(),
                a => panic!("{a}"),
            };
            assert_eq!(now, want, "{create}: {action} {id}");
        }
    }
}

/// SET ROWCOUNT n on a MERGE without TOP acts as TOP (n): exactly n of the 7 qualifying
/// rows change (the DONE's count, @@ROWCOUNT and the table agree), 0 turns it off; a
/// MERGE's own TOP wins over it, as an UPDATE's or DELETE's does.
#[test]
fn set_rowcount_limits_the_rows_affected() {
    let (_s, mut c) = setup("rowcount");
    let merge = |top: &str| {
        format!(
            "MERGE {top} INTO t USING (VALUES (1), (2), (3), (7), (8)) AS s (id)
             ON t.id = s.id
             WHEN MATCHED THEN UPDATE SET n = t.n + 100
             WHEN NOT MATCHED THEN INSERT (id, v, n) VALUES (s.id, 'new', s.id)
             WHEN NOT MATCHED BY SOURCE AND t.id > 4 THEN DELETE;
             SELECT @@ROWCOUNT"
        )
    };
    let fill =
        "INSERT INTO t VALUES (1,'a',1), (2,'b',2), (3,'c',3), (4,'d',4), (5,'e',5), (6,'f',6)";
    for create in TARGETS {
        for (rowcount, top, want) in [(3, "", 3), (1, "", 1), (0, "", 7), (2, "TOP (5)", 5)] {
            run(&mut c, &format!("DROP TABLE IF EXISTS t; {create}; {fill}"));
            let sql = format!("SET ROWCOUNT {rowcount}; {}", merge(top));
            let r = run(&mut c, &sql);
            run(&mut c, "SET ROWCOUNT 0");
            assert_eq!(counts(&r)[0], want, "{create}: {sql}");
            assert_eq!(int(&all_rows(&r)[0][0]), want as i64, "{create}: {sql}");
            assert_eq!(changed_rows(&mut c), want as i64, "{create}: {sql}");
        }
        // The cap limits the rows acted on, not the source's rows read: the first three
        // source rows qualify for no clause, and three of the four rows that do change.
        run(&mut c, &format!("DROP TABLE IF EXISTS t; {create}; {fill}"));
        let r = run(
            &mut c,
            "SET ROWCOUNT 3;
             MERGE t USING (VALUES (1), (2), (3), (7), (8)) AS s (id) ON t.id = s.id
             WHEN MATCHED AND s.id > 3 THEN UPDATE SET n = t.n + 100
             WHEN NOT MATCHED THEN INSERT (id, v, n) VALUES (s.id, 'new', s.id)
             WHEN NOT MATCHED BY SOURCE AND t.id > 4 THEN DELETE;
             SET ROWCOUNT 0",
        );
        assert_eq!(counts(&r), [3], "{create}");
        assert_eq!(changed_rows(&mut c), 3, "{create}");
    }
}

/// TOP (p) PERCENT acts on ceil(p% of the qualifying rows) (10 rows qualify: 30% is 3,
/// 25% is 3, a float 12.5% from a variable is 2, 100% is all, 0% none); a negative TOP
/// (a literal or a variable) is 127 and a percentage outside 0 to 100 is 1031, each
/// changing nothing.
#[test]
fn top_percent_and_bad_top_values() {
    let (_s, mut c) = setup("toppct");
    let ten = "VALUES (1), (2), (3), (4), (5), (6), (7), (8), (9), (10)";
    let reset = format!(
        "DROP TABLE IF EXISTS t;
         CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10), n INT NOT NULL);
         INSERT INTO t SELECT id, 'x', 0 FROM ({ten}) AS v (id)"
    );
    let merge = |top: &str| {
        format!(
            "DECLARE @p FLOAT = 12.5, @n INT = -2;
             MERGE {top} t USING ({ten}) AS s (id)
             ON t.id = s.id WHEN MATCHED THEN UPDATE SET n = 1; SELECT @@ROWCOUNT"
        )
    };
    let changed = |c: &mut Client| table(c, "SELECT COUNT(*) FROM t WHERE n = 1");
    for (top, want) in [
        ("TOP (30) PERCENT", 3),
        ("TOP (25) PERCENT", 3),
        ("TOP (@p) PERCENT", 2),
        ("TOP (100) PERCENT", 10),
        ("TOP (0) PERCENT", 0),
    ] {
        run(&mut c, &reset);
        let r = run(&mut c, &merge(top));
        assert_eq!(int(&all_rows(&r)[0][0]), want, "{top}");
        assert_eq!(changed(&mut c), vec![want.to_string()], "{top}");
    }
    run(&mut c, &reset);
    for (top, want) in [
        ("TOP (-1)", (127, 15, 1)),
        ("TOP (@n)", (127, 15, 1)),
        ("TOP (101) PERCENT", (1031, 15, 1)),
        ("TOP (-0.5) PERCENT", (1031, 15, 1)),
    ] {
        assert_eq!(errors(&mut c, &merge(top)).first(), Some(&want), "{top}");
        assert_eq!(changed(&mut c), strs(&["0"]), "{top}");
    }
}

/// Under TOP only the rows TOP keeps are checked for 8672: a target row two source rows
/// match is updated once by TOP (1), and still 8672 when TOP keeps both matches.
#[test]
fn top_and_the_8672_check() {
    let (_s, mut c) = setup("top8672");
    run(
        &mut c,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10), n INT NOT NULL);
                 INSERT INTO t VALUES (1, 'a', 1)",
    );
    let m = |top: u32| {
        format!(
            "MERGE TOP ({top}) t USING (VALUES (1), (1)) AS s (id) ON t.id = s.id
             WHEN MATCHED THEN UPDATE SET n = t.n + 1; SELECT @@ROWCOUNT"
        )
    };
    assert_eq!(int(&all_rows(&run(&mut c, &m(1)))[0][0]), 1);
    assert_eq!(table(&mut c, "SELECT n FROM t"), strs(&["2"]));
    assert_eq!(numbers(&mut c, &m(2))[0], 8672);
    assert_eq!(table(&mut c, "SELECT n FROM t"), strs(&["2"]));
}

/// OPTION takes SELECT's hints: MAXDOP 1 and RECOMPILE run the MERGE; MAXRECURSION bounds
/// the MERGE's own recursive CTE (530 past it, and nothing changes; enough, and it runs);
/// any other hint is refused with 40517 and changes nothing.
#[test]
fn option_takes_selects_hints() {
    let (_s, mut c) = setup("option");
    run(
        &mut c,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10), n INT NOT NULL);
                 INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2)",
    );
    let m = "MERGE t USING (VALUES (1)) AS s (id) ON t.id = s.id
             WHEN MATCHED THEN UPDATE SET n = t.n + 1";
    run(&mut c, &format!("{m} OPTION (MAXDOP 1);"));
    run(&mut c, &format!("{m} OPTION (MAXDOP 1, RECOMPILE);"));
    assert_eq!(table(&mut c, "SELECT n FROM t WHERE id = 1"), strs(&["3"]));
    for hint in ["HASH JOIN", "FORCE ORDER", "MAXDOP 1, LOOP JOIN"] {
        let sql = format!("{m} OPTION ({hint});");
        assert_eq!(numbers(&mut c, &sql), vec![40517], "{sql}");
    }
    assert_eq!(table(&mut c, "SELECT n FROM t WHERE id = 1"), strs(&["3"]));
    let cte = |limit: u32| {
        format!(
            "WITH r (id) AS (SELECT 1 UNION ALL SELECT id + 1 FROM r WHERE id < 5)
             MERGE t USING r ON t.id = r.id
             WHEN MATCHED THEN UPDATE SET n = 0
             WHEN NOT MATCHED THEN INSERT VALUES (r.id, 'r', 0)
             OPTION (MAXRECURSION {limit});"
        )
    };
    assert_eq!(numbers(&mut c, &cte(2))[0], 530);
    assert_eq!(table(&mut c, "SELECT COUNT(*) FROM t"), strs(&["2"]));
    run(&mut c, &cte(4));
    assert_eq!(
        table(&mut c, "SELECT COUNT(*), SUM(n) FROM t"),
        strs(&["5,0"])
    );
}

/// Two sessions MERGE TOP (2) into one table at once, 40 statements each, every source
/// offering three keys of the session's own and one of two shared rows. Each acknowledged
/// statement changes exactly 2 rows (@@ROWCOUNT and its OUTPUT), and the final table is
/// exactly what the OUTPUTs say: the own keys inserted, each shared row bumped once per
/// UPDATE reported.
#[test]
fn sessions_merge_with_top_at_once() {
    let (s, mut c) = setup("topconc");
    run(
        &mut c,
        "CREATE TABLE kv (k INT PRIMARY KEY, n INT NOT NULL);
                 INSERT INTO kv VALUES (0, 0), (1, 0)",
    );
    let workers: Vec<_> = (0..2)
        .map(|w| {
            let addr = s.addr.clone();
            std::thread::spawn(move || {
                let mut c = connect_at(&addr, Some("mg"), 120).unwrap();
                let mut acted = Vec::new();
                for i in 0..40 {
                    let own = 10_000 * (w + 1) + 10 * i;
                    let sql = format!(
                        "MERGE TOP (2) kv USING (VALUES ({}), ({own}), ({}), ({})) AS s (k)
                         ON kv.k = s.k
                         WHEN MATCHED THEN UPDATE SET n = kv.n + 1
                         WHEN NOT MATCHED THEN INSERT (k, n) VALUES (s.k, 1)
                         OUTPUT $action, inserted.k; SELECT @@ROWCOUNT",
                        i % 2,
                        own + 1,
                        own + 2
                    );
                    let r = c.batch(&sql).unwrap();
                    if let Some(e) = r.errors().next() {
                        assert_eq!(e.number, 1205, "{sql}: {}", e.text);
                        continue;
                    }
                    let out = actions(&r);
                    assert_eq!(out.len(), 2, "{sql}: {out:?}");
                    let rowcount = all_rows(&r).iter().filter(|r| r.len() == 1).count();
                    assert_eq!(rowcount, 1);
                    assert_eq!(int(&all_rows(&r).last().unwrap()[0]), 2);
                    acted.extend(out);
                }
                acted
            })
        })
        .collect();
    let acted: Vec<(String, i64)> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    assert!(
        acted.len() >= 100,
        "most statements acknowledged: {}",
        acted.len()
    );
    let mut want: Vec<String> = (0..2)
        .map(|k| {
            let bumps = acted.iter().filter(|a| a.0 == "UPDATE" && a.1 == k).count();
            format!("{k},{bumps}")
        })
        .collect();
    let mut inserted: Vec<i64> = acted
        .iter()
        .filter(|a| a.0 == "INSERT")
        .map(|a| a.1)
        .collect();
    inserted.sort();
    want.extend(inserted.iter().map(|k| format!("{k},1")));
    assert_eq!(table(&mut c, "SELECT k, n FROM kv ORDER BY k"), want);
    assert_checkdb_clean(&mut c, "mg", "after the concurrent MERGE TOPs");
}
