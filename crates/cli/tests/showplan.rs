//! SET SHOWPLAN_TEXT through real TDS sessions (sql exec/showplan.rs): the SET must be
//! alone in its batch (1067); while it is on, statements return their text and their plan
//! and are not run, in that session only; and the plan names the access the executor
//! really makes, which SET STATISTICS IO's reads of the same statement confirm.

mod common;
use common::tds::{all_rows, errors, int, run, scans_and_reads, show, Server};
use extentdb_sql::exec::Output;
use extentdb_tds::client::Client;

/// Database `sp` with clustered table t (1,000 rows of 200-byte padding, a unique index
/// on v) and heap h (the same rows, an index on v); returns t's primary key's name.
fn tables(c: &mut Client) -> String {
    let digits = "(VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9))";
    run(c, "CREATE DATABASE sp");
    run(
        c,
        &format!(
            "USE sp; SET NOCOUNT ON; \
             CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL, w int NOT NULL, \
                pad char(200) NOT NULL); \
             CREATE TABLE h (id int NOT NULL, v int NOT NULL, pad char(200) NOT NULL); \
             INSERT INTO t SELECT a.v * 100 + b.v * 10 + c.v, a.v * 100 + b.v * 10 + c.v, \
                c.v, 'x' FROM {digits} a(v) CROSS JOIN {digits} b(v) CROSS JOIN {digits} c(v); \
             INSERT INTO h SELECT id, v, pad FROM t; \
             CREATE UNIQUE INDEX ix_v ON t (v); CREATE INDEX ix_hv ON h (v)"
        ),
    );
    let r = run(
        c,
        "SELECT name FROM sys.indexes WHERE object_id = OBJECT_ID('t') AND index_id = 1",
    );
    show(&all_rows(&r)[0][0])
}

/// The two result sets a statement gives under SHOWPLAN_TEXT: its text, its plan lines.
fn plan(c: &mut Client, sql: &str) -> (Vec<String>, Vec<String>) {
    let sets = result_sets(c, sql);
    assert_eq!(sets.len(), 2, "{sql}: {sets:?}");
    (sets[0].clone(), sets[1].clone())
}

/// Every StmtText result set of a batch, each as its rows' text.
fn result_sets(c: &mut Client, sql: &str) -> Vec<Vec<String>> {
    let r = run(c, sql);
    let sets: Vec<Vec<String>> = r
        .outputs
        .iter()
        .filter_map(|o| match o {
            Output::Rows { columns, rows } => {
                assert_eq!(columns.len(), 1);
                assert_eq!(columns[0].0, "StmtText");
                Some(rows.iter().map(|r| show(&r[0])).collect())
            }
            _ => None,
        })
        .collect();
    sets
}

#[test]
fn showplan_text_is_alone_in_its_batch_and_runs_nothing_in_its_own_session_only() {
    // 1067 (severity 15) for a SET SHOWPLAN_TEXT beside another statement, and nothing of
    // that batch runs; once on, a DELETE gives its text and plan and leaves every row,
    // which another session (not under SHOWPLAN) still counts; OFF runs statements again.
    let s = Server::start("showplan_alone", &[]);
    let mut a = s.connect();
    let pk = tables(&mut a);
    let mut b = s.connect_to(Some("sp"));
    assert_eq!(
        errors(&mut a, "SET SHOWPLAN_TEXT ON; DELETE FROM t"),
        vec![(1067, 15, 1)]
    );
    assert_eq!(
        errors(&mut a, "SELECT 1\nIF 1 = 1 SET SHOWPLAN_TEXT ON"),
        vec![(1067, 15, 1)]
    );
    assert_eq!(
        int(&all_rows(&run(&mut a, "SELECT COUNT(*) FROM t"))[0][0]),
        1000
    );
    run(&mut a, "SET SHOWPLAN_TEXT ON");
    let (text, lines) = plan(&mut a, "DELETE FROM t WHERE id = 5");
    assert_eq!(text, ["DELETE FROM t WHERE id = 5"]);
    assert_eq!(
        lines,
        [
            format!("  |--Clustered Index Delete(OBJECT:([sp].[dbo].[t].[{pk}], [sp].[dbo].[t].[ix_v]))"),
            "       |--Table Spool".to_string(),
            format!(
                "            |--Clustered Index Seek(OBJECT:([sp].[dbo].[t].[{pk}]), \
                 SEEK:([sp].[dbo].[t].[id]=(5)), WHERE:([id]=(5)) ORDERED FORWARD)"
            ),
        ]
    );
    let sets = result_sets(&mut a, "DELETE FROM t;  DELETE TOP (2) FROM h");
    assert_eq!(sets.len(), 4, "each statement gives its text and its plan");
    assert_eq!(sets[0], ["DELETE FROM t"]);
    assert_eq!(sets[2], ["DELETE TOP (2) FROM h"]);
    assert_eq!(
        sets[3],
        [
            "  |--Table Delete(OBJECT:([sp].[dbo].[h], [sp].[dbo].[h].[ix_hv]))",
            "       |--Top(TOP EXPRESSION:((2)))",
            "            |--Table Spool",
            "                 |--Table Scan(OBJECT:([sp].[dbo].[h]))",
        ]
    );
    assert_eq!(
        plan(&mut a, "INSERT INTO t VALUES (5000, 5000, 0, 'x'), (5001, 5001, 1, 'y')").1,
        [
            format!(
                "  |--Clustered Index Insert(OBJECT:([sp].[dbo].[t].[{pk}], [sp].[dbo].[t].[ix_v]), \
                 SET:([sp].[dbo].[t].[id] = [Expr1001], [sp].[dbo].[t].[v] = [Expr1002], \
                 [sp].[dbo].[t].[w] = [Expr1003], [sp].[dbo].[t].[pad] = [Expr1004]))"
            ),
            "       |--Constant Scan(VALUES:(((5000),(5000),(0),'x'),((5001),(5001),(1),'y')))"
                .to_string(),
        ]
    );
    assert_eq!(
        plan(&mut a, "INSERT INTO h (v, id, pad) VALUES (2, 1, 'p')").1[0],
        "  |--Table Insert(OBJECT:([sp].[dbo].[h], [sp].[dbo].[h].[ix_hv]), \
         SET:([sp].[dbo].[h].[id] = [Expr1002], [sp].[dbo].[h].[v] = [Expr1001], \
         [sp].[dbo].[h].[pad] = [Expr1003]))"
    );
    assert_eq!(
        errors(&mut a, "INSERT INTO t (id) VALUES (1, 2)"),
        vec![(110, 15, 1)],
        "the executor's own check of the VALUES rows"
    );
    // Nothing of what was described ran: another session counts every row.
    for table in ["t", "h"] {
        let sql = format!("SELECT COUNT(*) FROM {table}");
        assert_eq!(int(&all_rows(&run(&mut b, &sql))[0][0]), 1000, "{table}");
    }
    assert_eq!(
        plan(&mut a, "UPDATE t SET w = w + 1 WHERE v = 3").1,
        [
            format!("  |--Clustered Index Update(OBJECT:([sp].[dbo].[t].[{pk}]), SET:([sp].[dbo].[t].[w] = [w]+(1)))"),
            "       |--Table Spool".to_string(),
            "            |--Table Spool".to_string(),
            "                 |--Nested Loops(Inner Join, OUTER REFERENCES:([sp].[dbo].[t].[id]))".to_string(),
            "                      |--Index Seek(OBJECT:([sp].[dbo].[t].[ix_v]), SEEK:([sp].[dbo].[t].[v]=(3)) ORDERED FORWARD)".to_string(),
            format!("                      |--Clustered Index Seek(OBJECT:([sp].[dbo].[t].[{pk}]), SEEK:([sp].[dbo].[t].[id]=[sp].[dbo].[t].[id]), WHERE:([v]=(3)) LOOKUP ORDERED FORWARD)"),
        ]
    );
    assert_eq!(
        plan(&mut a, "UPDATE h SET v = v + 1 WHERE id = 3").1[0],
        "  |--Table Update(OBJECT:([sp].[dbo].[h], [sp].[dbo].[h].[ix_hv]), SET:([sp].[dbo].[h].[v] = [v]+(1)))",
        "the index holding v is changed with the heap"
    );
    assert_eq!(
        int(&all_rows(&run(&mut b, "SELECT SUM(w) FROM t"))[0][0]),
        4500
    );
    for sql in [
        "UPDATE t SET v = 0",
        "INSERT INTO t SELECT * FROM t",
        "SELECT w, COUNT(*) FROM t GROUP BY ROLLUP (w)",
        "SELECT DISTINCT w FROM t",
        "SELECT * FROM t JOIN h ON t.id = h.id",
        "DECLARE @n int; UPDATE t SET @n = w",
        "DECLARE @x int = 1",
        "SELECT 1 WHERE 1 = 1",
        "SELECT v FROM t WHERE id IN (SELECT id FROM h)",
    ] {
        // Each statement of the batch is refused (DECLARE too).
        let numbers: Vec<i32> = errors(&mut a, sql).iter().map(|e| e.0).collect();
        let statements = sql.matches(';').count() + 1;
        assert_eq!(numbers, vec![40517; statements], "{sql}");
    }
    assert_eq!(
        plan(&mut a, "SELECT 1 + 1").1,
        [
            "  |--Compute Scalar(DEFINE:([Expr1001]=(1)+(1)))",
            "       |--Constant Scan"
        ]
    );
    run(&mut a, "SET SHOWPLAN_TEXT OFF");
    assert_eq!(
        int(&all_rows(&run(&mut a, "SELECT COUNT(*) FROM t"))[0][0]),
        1000
    );
}

/// The access a plan names: "seek" (a clustered seek), "index" (an index seek and its
/// lookups) or "scan".
fn access_of(lines: &[String]) -> &'static str {
    let all = lines.join("\n");
    if all.contains("Index Seek(OBJECT") && all.contains("LOOKUP") {
        "index"
    } else if all.contains("Clustered Index Seek") {
        "seek"
    } else {
        assert!(all.contains("Scan(OBJECT"), "{all}");
        "scan"
    }
}

#[test]
fn the_plan_names_the_access_the_executor_makes() {
    // Session p describes each query (SELECT, UPDATE, DELETE) under SHOWPLAN_TEXT while
    // session x runs it with STATISTICS IO: a clustered seek or an index seek reads a
    // handful of pages, a scan the whole table; under SERIALIZABLE the index seek becomes a scan in both (key-range
    // locking never reads an index).
    let s = Server::start("showplan_access", &[]);
    let mut p = s.connect();
    let pk = tables(&mut p);
    let mut x = s.connect_to(Some("sp"));
    run(&mut x, "SET STATISTICS IO ON");
    let reads = |x: &mut Client, sql: &str| scans_and_reads(&run(x, sql))[0].1;
    let scan_reads = reads(&mut x, "SELECT id FROM t WHERE w = 7");
    assert!(scan_reads > 20, "{scan_reads}");
    let cases = [
        ("SELECT v FROM t WHERE id = 7", "seek"),
        (
            "SELECT id FROM t WHERE id BETWEEN 10 AND 12 AND w = 1",
            "seek",
        ),
        ("SELECT id FROM t WHERE w = 7", "scan"),
        ("SELECT id, w FROM t WHERE v = 7", "index"),
        ("SELECT id FROM h WHERE v = 7", "index"),
        ("SELECT id FROM h WHERE id = 7", "scan"),
        ("UPDATE t SET w = w WHERE id = 7", "seek"),
        ("UPDATE h SET pad = pad WHERE v = 7", "index"),
        ("UPDATE t SET pad = pad WHERE w = 7", "scan"),
        ("DELETE FROM t WHERE id = 5000", "seek"),
        ("DELETE FROM h WHERE v = 5000", "index"),
        ("SELECT COUNT(*) FROM t WHERE v = 3", "index"),
        ("SELECT w, COUNT(*) FROM t GROUP BY w", "scan"),
        ("SELECT SUM(w) FROM t WHERE id < 20", "seek"),
    ];
    run(&mut p, "SET SHOWPLAN_TEXT ON");
    for (sql, expected) in cases {
        let (_, lines) = plan(&mut p, sql);
        assert_eq!(access_of(&lines), expected, "{sql}: {lines:?}");
        let n = reads(&mut x, sql);
        match expected {
            "scan" => assert!(n * 2 > scan_reads, "{sql} read {n} of {scan_reads}"),
            _ => assert!(n * 4 < scan_reads, "{sql} read {n} of {scan_reads}"),
        }
    }
    let (_, lines) = plan(&mut p, "SELECT id, w FROM t WHERE v = 7");
    assert_eq!(
        lines,
        [
            "  |--Nested Loops(Inner Join, OUTER REFERENCES:([sp].[dbo].[t].[id]))".to_string(),
            "       |--Index Seek(OBJECT:([sp].[dbo].[t].[ix_v]), SEEK:([sp].[dbo].[t].[v]=(7)) ORDERED FORWARD)".to_string(),
            format!(
                "       |--Clustered Index Seek(OBJECT:([sp].[dbo].[t].[{pk}]), SEEK:([sp].[dbo].[t].[id]=[sp].[dbo].[t].[id]), WHERE:([v]=(7)) LOOKUP ORDERED FORWARD)"
            ),
        ]
    );
    let (_, lines) = plan(
        &mut p,
        "SELECT TOP 3 id, w + 1 FROM t WHERE id > 10 AND id <= 20 ORDER BY w DESC",
    );
    assert_eq!(
        lines,
        [
            "  |--Top(TOP EXPRESSION:((3)))".to_string(),
            "       |--Sort(ORDER BY:([w] DESC))".to_string(),
            "            |--Compute Scalar(DEFINE:([Expr1001]=[w]+(1)))".to_string(),
            format!(
                "                 |--Clustered Index Seek(OBJECT:([sp].[dbo].[t].[{pk}]), SEEK:([sp].[dbo].[t].[id] > (10) AND [sp].[dbo].[t].[id] <= (20)), WHERE:([id]>(10) AND [id]<=(20)) ORDERED FORWARD)"
            ),
        ]
    );
    let (_, lines) = plan(
        &mut p,
        "SELECT w, COUNT(*) FROM t WHERE id < 100 GROUP BY w HAVING COUNT(*) > 5 \
         ORDER BY w DESC",
    );
    assert_eq!(
        lines,
        [
            "  |--Sort(ORDER BY:([w] DESC))".to_string(),
            "       |--Filter(WHERE:([Expr1001]>(5)))".to_string(),
            "            |--Stream Aggregate(GROUP BY:([w]) DEFINE:([Expr1001]=count(*)))"
                .to_string(),
            "                 |--Sort(ORDER BY:([w] ASC))".to_string(),
            format!(
                "                      |--Clustered Index Seek(OBJECT:([sp].[dbo].[t].[{pk}]), \
                 SEEK:([sp].[dbo].[t].[id] < (100)), WHERE:([id]<(100)) ORDERED FORWARD)"
            ),
        ]
    );
    assert_eq!(
        plan(&mut p, "SELECT SUM(w) + 1 FROM t").1,
        [
            "  |--Compute Scalar(DEFINE:([Expr1002]=[Expr1001]+(1)))".to_string(),
            "       |--Stream Aggregate(DEFINE:([Expr1001]=sum([w])))".to_string(),
            format!("            |--Clustered Index Scan(OBJECT:([sp].[dbo].[t].[{pk}]))"),
        ]
    );
    // SERIALIZABLE: the same query scans, in the plan and in the reads.
    let sql = "SELECT id, w FROM t WHERE v = 7";
    run(&mut p, "SET SHOWPLAN_TEXT OFF");
    for c in [&mut p, &mut x] {
        run(c, "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE");
    }
    run(&mut p, "SET SHOWPLAN_TEXT ON");
    let (_, lines) = plan(&mut p, sql);
    assert_eq!(access_of(&lines), "scan", "{lines:?}");
    let n = reads(&mut x, sql);
    assert!(n * 2 > scan_reads, "{n} of {scan_reads}");
}
