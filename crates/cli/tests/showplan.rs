//! SET SHOWPLAN_TEXT and SHOWPLAN_ALL through real TDS sessions (sql exec/showplan.rs):
//! the SET must be alone in its batch (1067); while it is on, statements return their text
//! and their plan (SHOWPLAN_ALL: a row per operator, numbered as the text draws them) and
//! are not run, in that session only; and the plan names the access the executor really
//! makes, which SET STATISTICS IO's reads of the same statement confirm.

mod common;
use common::tds::{all_rows, errors, int, numbers, run, scans_and_reads, show, Server};
use extentdb_sql::exec::Output;
use extentdb_sql::types::{SqlType, Value};
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
        "SELECT DISTINCT w FROM t ORDER BY w",
        "SELECT DISTINCT w, COUNT(*) FROM t GROUP BY w",
        "SELECT DISTINCT 1",
        "SELECT * FROM t JOIN h ON t.id = h.id",
        "SELECT * FROM t LEFT JOIN h ON t.w = h.v",
        "SELECT COUNT(*) FROM t CROSS JOIN h",
        "SELECT DISTINCT t.w FROM t, h",
        "SELECT * FROM t, sys.objects",
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
    // DISTINCT sorts the projected rows by every select-list column and keeps each once,
    // under TOP; the other session's run gives the first distinct rows in that order.
    let sql = "SELECT DISTINCT TOP 3 w, v % 2 FROM t WHERE id < 50";
    assert_eq!(
        plan(&mut p, sql).1,
        [
            "  |--Top(TOP EXPRESSION:((3)))".to_string(),
            "       |--Sort(DISTINCT ORDER BY:([w] ASC, [Expr1001] ASC))".to_string(),
            "            |--Compute Scalar(DEFINE:([Expr1001]=[v]%(2)))".to_string(),
            format!(
                "                 |--Clustered Index Seek(OBJECT:([sp].[dbo].[t].[{pk}]), \
                 SEEK:([sp].[dbo].[t].[id] < (50)), WHERE:([id]<(50)) ORDERED FORWARD)"
            ),
        ]
    );
    let got: Vec<(i64, i64)> = all_rows(&run(&mut x, sql))
        .iter()
        .map(|r| (int(&r[0]), int(&r[1])))
        .collect();
    assert_eq!(got, [(0, 0), (1, 1), (2, 0)]);
    assert_eq!(
        plan(&mut p, "SELECT DISTINCT * FROM h WHERE v = 7").1[0],
        "  |--Sort(DISTINCT ORDER BY:([id] ASC, [v] ASC, [pad] ASC))"
    );
    // A CROSS JOIN: the left table sought by WHERE's key conjunct and checked by the
    // conjuncts of its own columns, each of its rows joined with the right table's spooled
    // rows, the whole WHERE on the joined rows; a comma list's left table is not narrowed.
    let sql = "SELECT t.id, h.id FROM t CROSS JOIN h WHERE t.id < 3 AND h.id = 5";
    assert_eq!(
        plan(&mut p, sql).1,
        [
            "  |--Filter(WHERE:([t].[id]<(3) AND [h].[id]=(5)))".to_string(),
            "       |--Nested Loops(Inner Join)".to_string(),
            format!(
                "            |--Clustered Index Seek(OBJECT:([sp].[dbo].[t].[{pk}]), \
                 SEEK:([sp].[dbo].[t].[id] < (3)), WHERE:([t].[id]<(3)) ORDERED FORWARD)"
            ),
            "            |--Table Spool".to_string(),
            "                 |--Table Scan(OBJECT:([sp].[dbo].[h]))".to_string(),
        ]
    );
    let got: Vec<(i64, i64)> = all_rows(&run(&mut x, sql))
        .iter()
        .map(|r| (int(&r[0]), int(&r[1])))
        .collect();
    assert_eq!(got, [(0, 5), (1, 5), (2, 5)]);
    let sql = "SELECT TOP 2 t.id + h.id FROM h, t WHERE t.id = 1 ORDER BY h.v DESC";
    assert_eq!(
        plan(&mut p, sql).1,
        [
            "  |--Top(TOP EXPRESSION:((2)))".to_string(),
            "       |--Sort(ORDER BY:([h].[v] DESC))".to_string(),
            "            |--Compute Scalar(DEFINE:([Expr1001]=[t].[id]+[h].[id]))".to_string(),
            "                 |--Filter(WHERE:([t].[id]=(1)))".to_string(),
            "                      |--Nested Loops(Inner Join)".to_string(),
            "                           |--Table Scan(OBJECT:([sp].[dbo].[h]))".to_string(),
            "                           |--Table Spool".to_string(),
            format!("                                |--Clustered Index Scan(OBJECT:([sp].[dbo].[t].[{pk}]))"),
        ]
    );
    let got: Vec<i64> = all_rows(&run(&mut x, sql))
        .iter()
        .map(|r| int(&r[0]))
        .collect();
    assert_eq!(got, [1000, 999]);
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

/// SHOWPLAN_ALL's result set of one statement: its columns, then its rows shown as text
/// (NULL as "NULL").
fn all_plan(c: &mut Client, sql: &str) -> (Vec<(String, SqlType)>, Vec<Vec<String>>) {
    let r = run(c, sql);
    let sets: Vec<_> = r
        .outputs
        .iter()
        .filter_map(|o| match o {
            Output::Rows { columns, rows } => Some((columns.clone(), rows.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(sets.len(), 1, "{sql}: {sets:?}");
    let (columns, rows) = sets.into_iter().next().unwrap();
    let rows = rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|v| match v {
                    Value::Null => "NULL".to_string(),
                    v => show(v),
                })
                .collect()
        })
        .collect();
    (columns, rows)
}

/// SHOWPLAN_ALL's columns, in SQL Server's order.
const ALL_COLUMNS: [&str; 18] = [
    "StmtText",
    "StmtId",
    "NodeId",
    "Parent",
    "PhysicalOp",
    "LogicalOp",
    "Argument",
    "DefinedValues",
    "EstimateRows",
    "EstimateIO",
    "EstimateCPU",
    "AvgRowSize",
    "TotalSubtreeCost",
    "OutputList",
    "Warnings",
    "Type",
    "Parallel",
    "EstimateExecutions",
];

/// The named columns of each row of a SHOWPLAN_ALL result set.
fn pick(rows: &[Vec<String>], names: &[&str]) -> Vec<Vec<String>> {
    let at: Vec<usize> = names
        .iter()
        .map(|n| ALL_COLUMNS.iter().position(|c| c == n).unwrap())
        .collect();
    rows.iter()
        .map(|r| at.iter().map(|&i| r[i].clone()).collect())
        .collect()
}

#[test]
fn showplan_all_gives_a_row_per_operator_of_the_plan_the_text_form_draws() {
    // Session a describes statements under SHOWPLAN_ALL: one result set each, SQL Server's
    // 18 columns with their types, the statement's row (NodeId 1, Parent 0, its Type) then
    // one per operator whose StmtText is the SHOWPLAN_TEXT line of the same statement and
    // whose NodeId / Parent follow the drawing; estimates only where known, costs NULL.
    // Nothing runs (session b counts every row); SHOWPLAN_TEXT and _ALL exclude each other.
    let s = Server::start("showplan_all", &[]);
    let mut a = s.connect();
    let pk = tables(&mut a);
    let mut b = s.connect_to(Some("sp"));
    assert_eq!(
        errors(&mut a, "SET SHOWPLAN_ALL ON; SELECT 1"),
        vec![(1067, 15, 1)]
    );
    assert_eq!(
        errors(&mut a, "SET SHOWPLAN_ALL ON\nSET SHOWPLAN_TEXT OFF"),
        vec![(1067, 15, 1)]
    );
    let queries = [
        "SELECT id, w FROM t WHERE v = 7",
        "SELECT COUNT(*) FROM t",
        "DELETE FROM t WHERE id = 5",
        "INSERT INTO h (v, id, pad) VALUES (2, 1, 'p'), (3, 2, 'q')",
        "UPDATE h SET v = v + 1 WHERE id = 3",
    ];
    run(&mut a, "SET SHOWPLAN_TEXT ON");
    let texts: Vec<Vec<String>> = queries.iter().map(|q| plan(&mut a, q).1).collect();
    run(&mut a, "SET SHOWPLAN_ALL ON");
    let (columns, rows) = all_plan(&mut a, queries[0]);
    let text = SqlType::NVarChar(extentdb_sql::types::MAX_LENGTH);
    let types = [
        text,
        SqlType::Int,
        SqlType::Int,
        SqlType::Int,
        text,
        text,
        text,
        text,
        SqlType::Real,
        SqlType::Real,
        SqlType::Real,
        SqlType::Int,
        SqlType::Real,
        text,
        text,
        text,
        SqlType::Bit,
        SqlType::Real,
    ];
    let expected: Vec<(String, SqlType)> = ALL_COLUMNS
        .iter()
        .zip(types)
        .map(|(n, t)| (n.to_string(), t))
        .collect();
    assert_eq!(columns, expected);
    assert_eq!(rows[0][0], queries[0]);
    assert_eq!(
        pick(
            &rows,
            &[
                "StmtId",
                "NodeId",
                "Parent",
                "PhysicalOp",
                "LogicalOp",
                "Type"
            ]
        ),
        [
            ["1", "1", "0", "NULL", "NULL", "SELECT"],
            ["1", "2", "1", "Nested Loops", "Inner Join", "PLAN_ROW"],
            ["1", "3", "2", "Index Seek", "Index Seek", "PLAN_ROW"],
            [
                "1",
                "4",
                "2",
                "Clustered Index Seek",
                "Clustered Index Seek",
                "PLAN_ROW"
            ],
        ]
    );
    assert_eq!(
        pick(&rows[1..], &["Argument"]),
        [
            ["OUTER REFERENCES:([sp].[dbo].[t].[id])".to_string()],
            ["OBJECT:([sp].[dbo].[t].[ix_v]), SEEK:([sp].[dbo].[t].[v]=(7)) ORDERED FORWARD".to_string()],
            [format!("OBJECT:([sp].[dbo].[t].[{pk}]), SEEK:([sp].[dbo].[t].[id]=[sp].[dbo].[t].[id]), WHERE:([v]=(7)) LOOKUP ORDERED FORWARD")],
        ]
    );
    // The unique index's one key gives at most one row; WHERE on the lookup, unknown.
    assert_eq!(
        pick(&rows, &["EstimateRows", "EstimateExecutions", "Parallel"]),
        [
            ["NULL", "NULL", "NULL"],
            ["NULL", "1", "0"],
            ["1", "1", "0"],
            ["NULL", "1", "0"],
        ]
    );
    for (i, sql) in queries.iter().enumerate() {
        let (_, rows) = all_plan(&mut a, sql);
        let lines: Vec<String> = rows[1..].iter().map(|r| r[0].clone()).collect();
        assert_eq!(
            lines, texts[i],
            "{sql}: the text form's lines, in its order"
        );
        assert!(rows[1..].iter().all(|r| r[1] == "1"), "{sql}");
        let costs = pick(
            &rows,
            &[
                "EstimateIO",
                "EstimateCPU",
                "AvgRowSize",
                "TotalSubtreeCost",
            ],
        );
        assert!(
            costs.iter().flatten().all(|c| c == "NULL"),
            "{sql}: {costs:?}"
        );
    }
    let (_, rows) = all_plan(&mut a, queries[1]);
    assert_eq!(
        pick(
            &rows,
            &[
                "NodeId",
                "Parent",
                "LogicalOp",
                "DefinedValues",
                "EstimateRows"
            ]
        ),
        [
            ["1", "0", "NULL", "NULL", "1"],
            ["2", "1", "Aggregate", "[Expr1001]=count(*)", "1"],
            ["3", "2", "Clustered Index Scan", "NULL", "1000"],
        ],
        "a scan without WHERE gives the table's rows; an aggregate without GROUP BY one"
    );
    let (_, rows) = all_plan(&mut a, queries[2]);
    assert_eq!(
        pick(
            &rows,
            &[
                "NodeId",
                "Parent",
                "PhysicalOp",
                "LogicalOp",
                "EstimateRows",
                "Type"
            ]
        ),
        [
            ["1", "0", "NULL", "NULL", "1", "DELETE"],
            [
                "2",
                "1",
                "Clustered Index Delete",
                "Delete",
                "1",
                "PLAN_ROW"
            ],
            ["3", "2", "Table Spool", "Eager Spool", "1", "PLAN_ROW"],
            [
                "4",
                "3",
                "Clustered Index Seek",
                "Clustered Index Seek",
                "1",
                "PLAN_ROW"
            ],
        ]
    );
    let (_, rows) = all_plan(&mut a, queries[3]);
    assert_eq!(
        pick(
            &rows,
            &["NodeId", "Parent", "PhysicalOp", "EstimateRows", "Type"]
        ),
        [
            ["1", "0", "NULL", "2", "INSERT"],
            ["2", "1", "Table Insert", "2", "PLAN_ROW"],
            ["3", "2", "Constant Scan", "2", "PLAN_ROW"],
        ]
    );
    // Each statement of a batch is numbered (StmtId) and has its own result set.
    let r = run(
        &mut a,
        "SELECT id FROM h;  SELECT TOP 5 id FROM t WHERE id IN (1, 2)",
    );
    let sets: Vec<&Vec<Vec<Value>>> = r
        .outputs
        .iter()
        .filter_map(|o| match o {
            Output::Rows { rows, .. } => Some(rows),
            _ => None,
        })
        .collect();
    assert_eq!(sets.len(), 2);
    assert_eq!(int(&sets[0][0][1]), 1);
    assert_eq!(int(&sets[1][0][1]), 2);
    assert_eq!(show(&sets[0][1][4]), "Table Scan");
    assert_eq!(show(&sets[0][1][8]), "1000", "the heap's rows");
    assert_eq!(show(&sets[1][1][4]), "Top");
    assert_eq!(show(&sets[1][1][8]), "2", "TOP 5 of at most two keys");
    assert_eq!(
        show(&sets[1][2][8]),
        "2",
        "two whole keys of the primary key"
    );
    let (_, rows) = all_plan(&mut a, "SELECT DISTINCT w FROM t");
    let scan = format!("OBJECT:([sp].[dbo].[t].[{pk}])");
    assert_eq!(
        pick(
            &rows,
            &[
                "NodeId",
                "Parent",
                "PhysicalOp",
                "LogicalOp",
                "Argument",
                "EstimateRows"
            ]
        ),
        [
            ["1", "0", "NULL", "NULL", "NULL", "NULL"],
            [
                "2",
                "1",
                "Sort",
                "Distinct Sort",
                "DISTINCT ORDER BY:([w] ASC)",
                "NULL"
            ],
            [
                "3",
                "2",
                "Clustered Index Scan",
                "Clustered Index Scan",
                &scan,
                "1000"
            ],
        ]
    );
    // A join's rows: the product of its inputs' (no ON); the inner input's spool is read
    // once per outer row, its table once.
    let (_, rows) = all_plan(&mut a, "SELECT * FROM h, t WHERE t.id = 1");
    assert_eq!(
        pick(
            &rows,
            &[
                "NodeId",
                "Parent",
                "PhysicalOp",
                "LogicalOp",
                "EstimateRows",
                "EstimateExecutions"
            ]
        ),
        [
            ["1", "0", "NULL", "NULL", "NULL", "NULL"],
            ["2", "1", "Filter", "Filter", "NULL", "1"],
            ["3", "2", "Nested Loops", "Inner Join", "1e+006", "1"],
            ["4", "3", "Table Scan", "Table Scan", "1000", "1"],
            ["5", "3", "Table Spool", "Lazy Spool", "1000", "1000"],
            [
                "6",
                "5",
                "Clustered Index Scan",
                "Clustered Index Scan",
                "1000",
                "1"
            ],
        ]
    );
    for sql in [
        "SELECT * FROM t CROSS APPLY (SELECT 1 AS x) z",
        "DECLARE @x int = 1",
    ] {
        assert_eq!(numbers(&mut a, sql), vec![40517], "{sql}");
    }
    // Nothing described ran: another session counts every row.
    for table in ["t", "h"] {
        let sql = format!("SELECT COUNT(*), SUM(v) FROM {table}");
        let r = all_rows(&run(&mut b, &sql));
        assert_eq!((int(&r[0][0]), int(&r[0][1])), (1000, 499500), "{table}");
    }
    // SHOWPLAN_TEXT ON turns _ALL off, and _ALL OFF then leaves _TEXT on.
    run(&mut a, "SET SHOWPLAN_TEXT ON");
    assert_eq!(plan(&mut a, queries[2]).1, texts[2]);
    run(&mut a, "SET SHOWPLAN_ALL OFF");
    assert_eq!(plan(&mut a, queries[2]).1, texts[2]);
    run(&mut a, "SET SHOWPLAN_ALL ON");
    run(&mut a, "SET SHOWPLAN_ALL OFF");
    assert_eq!(
        int(&all_rows(&run(&mut a, "SELECT COUNT(*) FROM t"))[0][0]),
        1000,
        "SHOWPLAN_ALL OFF runs statements again"
    );
}
