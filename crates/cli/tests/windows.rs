//! Window functions (exec/window_functions.rs) through a real `extentdb serve` and real TDS
//! sessions: ROW_NUMBER, RANK, DENSE_RANK, NTILE, LAG, LEAD, FIRST_VALUE, LAST_VALUE and
//! the aggregates over frames, with ties, peers and NULLs in partition and order keys;
//! over a join, a derived table and a CTE, beside GROUP BY, in ORDER BY; their result
//! types; SQL Server's messages for each misuse, none of which changes anything; sessions
//! computing windows while others insert; and a partition larger than a sort's memory.
//! Before them `OVER (...)` was a syntax error.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use extentdb_sql::exec::Output;
use extentdb_sql::types::SqlType;
use extentdb_tds::client::Client;

mod common;
use common::tds::{all_rows, connect_at, errors, run, strs, table, Server};

/// The column types of a query's first result set.
fn types(c: &mut Client, sql: &str) -> Vec<SqlType> {
    run(c, sql)
        .outputs
        .iter()
        .find_map(|o| match o {
            Output::Rows { columns, .. } => Some(columns.iter().map(|(_, t)| *t).collect()),
            _ => None,
        })
        .expect("a result set")
}

/// Rows with ties in `v`, NULL in the partition key `g` and in `v`.
const SETUP: &str = "CREATE TABLE s (id INT PRIMARY KEY, g VARCHAR(5), v INT, d DECIMAL(9,2));
    INSERT INTO s VALUES (1, 'a', 10, 1.50), (2, 'a', 20, 2.25), (3, 'a', 20, NULL),
        (4, 'a', NULL, 4.00), (5, 'b', 5, 0.10), (6, 'b', 7, 0.20), (7, NULL, 1, 1.00),
        (8, NULL, 2, 2.00);
    CREATE TABLE c (cid INT PRIMARY KEY, name VARCHAR(20));
    INSERT INTO c VALUES (1, 'ann'), (2, 'bob'), (3, 'cy');
    CREATE TABLE o (oid INT PRIMARY KEY, cid INT, amt INT);
    INSERT INTO o VALUES (10, 1, 5), (11, 1, 7), (12, 2, 9), (13, 4, 1), (14, 2, 9)";

fn setup(name: &str) -> (Server, Client) {
    common::tds::start_in_database(name, "w", SETUP)
}

/// Proves the ranking functions: ROW_NUMBER counts rows, RANK leaves gaps after ties,
/// DENSE_RANK does not, NTILE gives the remainder to the first tiles; NULL partition keys
/// form one partition and NULL order keys sort first.
#[test]
fn ranking_functions_number_rank_and_tile() {
    let (_s, mut c) = setup("w-rank");
    assert_eq!(
        table(
            &mut c,
            "SELECT id, ROW_NUMBER() OVER (PARTITION BY g ORDER BY v, id),
                RANK() OVER (PARTITION BY g ORDER BY v),
                DENSE_RANK() OVER (PARTITION BY g ORDER BY v),
                NTILE(2) OVER (PARTITION BY g ORDER BY v, id)
             FROM s ORDER BY id"
        ),
        strs(&[
            "1,2,2,2,1",
            "2,3,3,3,2",
            "3,4,3,3,2",
            "4,1,1,1,1",
            "5,1,1,1,1",
            "6,2,2,2,2",
            "7,1,1,1,1",
            "8,2,2,2,2",
        ])
    );
    // Over the whole table, descending: RANK's gap after the tie of 20s.
    assert_eq!(
        table(
            &mut c,
            "SELECT id, RANK() OVER (ORDER BY v DESC), DENSE_RANK() OVER (ORDER BY v DESC),
                NTILE(3) OVER (ORDER BY id) FROM s ORDER BY id"
        ),
        strs(&[
            "1,3,2,1", "2,1,1,1", "3,1,1,1", "4,8,7,2", "5,5,4,2", "6,4,3,2", "7,7,6,3", "8,6,5,3",
        ])
    );
}

/// Proves LAG and LEAD (offsets, defaults, partition edges), FIRST_VALUE and LAST_VALUE
/// under the default frame (which ends at the current row's last peer) and under ROWS.
#[test]
fn offset_functions_reach_other_rows() {
    let (_s, mut c) = setup("w-offset");
    assert_eq!(
        table(
            &mut c,
            "SELECT id, LAG(v) OVER (ORDER BY id), LEAD(v, 2, -1) OVER (ORDER BY id),
                LAG(v, 0) OVER (ORDER BY id), LAG(id, 1, 0) OVER (PARTITION BY g ORDER BY id)
             FROM s ORDER BY id"
        ),
        strs(&[
            "1,NULL,20,10,0",
            "2,10,NULL,20,1",
            "3,20,5,20,2",
            "4,20,7,NULL,3",
            "5,NULL,1,5,0",
            "6,5,2,7,5",
            "7,7,-1,1,0",
            "8,1,-1,2,7",
        ])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT id, FIRST_VALUE(v) OVER (PARTITION BY g ORDER BY id),
                LAST_VALUE(v) OVER (PARTITION BY g ORDER BY id),
                LAST_VALUE(v) OVER (PARTITION BY g ORDER BY id
                    ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING),
                LAST_VALUE(id) OVER (PARTITION BY g ORDER BY v),
                FIRST_VALUE(id) OVER (ORDER BY id ROWS BETWEEN 2 FOLLOWING AND 3 FOLLOWING)
             FROM s ORDER BY id"
        ),
        strs(&[
            "1,10,10,NULL,1,3",
            "2,10,20,NULL,3,4",
            "3,10,20,NULL,3,5",
            "4,10,NULL,NULL,4,6",
            "5,5,5,7,5,7",
            "6,5,7,7,6,8",
            "7,1,1,2,7,NULL",
            "8,1,2,2,8,NULL",
        ])
    );
}

/// Proves the aggregates over a window: the whole partition without ORDER BY, the RANGE
/// default with ORDER BY (peers included), and ROWS frames of every bound: running,
/// sliding, trailing, leading, and frames empty at the partition's edges.
#[test]
fn aggregates_over_frames() {
    let (_s, mut c) = setup("w-frames");
    assert_eq!(
        table(
            &mut c,
            "SELECT id, SUM(v) OVER (PARTITION BY g), COUNT(*) OVER (PARTITION BY g),
                COUNT(v) OVER (PARTITION BY g), SUM(v) OVER (PARTITION BY g ORDER BY v),
                SUM(v) OVER (PARTITION BY g ORDER BY v, id ROWS UNBOUNDED PRECEDING)
             FROM s ORDER BY id"
        ),
        strs(&[
            "1,50,4,3,10,10",
            "2,50,4,3,50,30",
            "3,50,4,3,50,50",
            "4,50,4,3,NULL,NULL",
            "5,12,2,2,5,5",
            "6,12,2,2,12,12",
            "7,3,2,2,1,1",
            "8,3,2,2,3,3",
        ])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT id,
                AVG(v) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING),
                MIN(v) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW),
                MAX(v) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING),
                COUNT(v) OVER (ORDER BY id ROWS BETWEEN 2 FOLLOWING AND 3 FOLLOWING),
                SUM(v) OVER (ORDER BY id ROWS BETWEEN 3 PRECEDING AND 2 PRECEDING),
                SUM(v) OVER (ORDER BY v RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING),
                COUNT(*) OVER (ORDER BY v RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
             FROM s ORDER BY id"
        ),
        strs(&[
            "1,15,10,20,1,NULL,50,8",
            "2,16,10,20,1,NULL,40,8",
            "3,20,10,20,2,10,40,8",
            "4,12,20,7,2,30,65,8",
            "5,6,5,7,2,40,62,8",
            "6,4,5,7,1,20,57,8",
            "7,3,1,2,0,5,65,8",
            "8,1,1,2,0,12,64,8",
        ])
    );
}

/// Proves the result types SQL Server gives: the ranking functions bigint, COUNT int,
/// COUNT_BIG bigint, SUM and AVG of int int, SUM of decimal(9,2) decimal(38,2), LAG of a
/// column the column's type.
#[test]
fn window_functions_have_sql_servers_types() {
    let (_s, mut c) = setup("w-types");
    assert_eq!(
        types(
            &mut c,
            "SELECT ROW_NUMBER() OVER (ORDER BY id), RANK() OVER (ORDER BY id),
                DENSE_RANK() OVER (ORDER BY id), NTILE(2) OVER (ORDER BY id),
                COUNT(*) OVER (), COUNT_BIG(v) OVER (), SUM(v) OVER (), AVG(v) OVER (),
                SUM(d) OVER (ORDER BY id), LAG(g) OVER (ORDER BY id), MAX(d) OVER ()
             FROM s"
        ),
        vec![
            SqlType::BigInt,
            SqlType::BigInt,
            SqlType::BigInt,
            SqlType::BigInt,
            SqlType::Int,
            SqlType::BigInt,
            SqlType::Int,
            SqlType::Int,
            SqlType::Decimal {
                precision: 38,
                scale: 2
            },
            SqlType::VarChar(5),
            SqlType::Decimal {
                precision: 9,
                scale: 2
            },
        ]
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT SUM(d) OVER (ORDER BY id) FROM s WHERE id <= 3 ORDER BY id"
        ),
        strs(&["1.50", "3.75", "3.75"])
    );
}

/// Proves window functions over a join, a derived table and a CTE (filtered on the
/// number: the first row of each partition), in ORDER BY, beside GROUP BY (over the
/// groups, aggregates of aggregates), with `*`, DISTINCT and TOP, over a system view and
/// without FROM.
#[test]
fn windows_over_every_source() {
    let (_s, mut c) = setup("w-shapes");
    assert_eq!(
        table(
            &mut c,
            "SELECT c.name, o.oid, SUM(o.amt) OVER (PARTITION BY c.cid),
                ROW_NUMBER() OVER (PARTITION BY c.name ORDER BY o.amt DESC, o.oid)
             FROM c JOIN o ON o.cid = c.cid ORDER BY o.oid"
        ),
        strs(&["ann,10,12,2", "ann,11,12,1", "bob,12,18,1", "bob,14,18,2"])
    );
    let first = strs(&["2", "6", "8"]);
    assert_eq!(
        table(
            &mut c,
            "SELECT id FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY g ORDER BY v DESC, id)
                AS rn FROM s) AS x WHERE rn = 1 ORDER BY id"
        ),
        first
    );
    assert_eq!(
        table(
            &mut c,
            "WITH r AS (SELECT id, RANK() OVER (PARTITION BY g ORDER BY v DESC, id) AS rk
                FROM s) SELECT id FROM r WHERE rk = 1 ORDER BY id"
        ),
        first
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT id FROM s ORDER BY ROW_NUMBER() OVER (ORDER BY v DESC, id)"
        ),
        strs(&["2", "3", "1", "6", "5", "8", "7", "4"])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT id, ROW_NUMBER() OVER (ORDER BY id DESC) AS rn FROM s WHERE id > 4
             ORDER BY rn"
        ),
        strs(&["8,1", "7,2", "6,3", "5,4"])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT g, SUM(v), SUM(SUM(v)) OVER (), RANK() OVER (ORDER BY COUNT(*) DESC),
                LAG(g) OVER (ORDER BY g) FROM s GROUP BY g ORDER BY g"
        ),
        strs(&["NULL,3,65,2,NULL", "a,50,65,1,NULL", "b,12,65,2,a"])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT g, COUNT(*) AS n, ROW_NUMBER() OVER (ORDER BY COUNT(*), g) FROM s
             GROUP BY g HAVING COUNT(*) > 1 ORDER BY n DESC, g"
        ),
        strs(&["a,4,3", "NULL,2,1", "b,2,2"])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT *, ROW_NUMBER() OVER (ORDER BY cid DESC) FROM c ORDER BY cid"
        ),
        strs(&["1,ann,3", "2,bob,2", "3,cy,1"])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT DISTINCT g, COUNT(*) OVER (PARTITION BY g) FROM s ORDER BY g"
        ),
        strs(&["NULL,2", "a,4", "b,2"])
    );
    assert_eq!(
        table(&mut c, "SELECT TOP 2 id, SUM(v) OVER () FROM s ORDER BY id"),
        strs(&["1,65", "2,65"])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT name, ROW_NUMBER() OVER (ORDER BY database_id) FROM sys.databases
             WHERE database_id <= 4 ORDER BY database_id"
        ),
        strs(&["master,1", "tempdb,2", "model,3", "msdb,4"])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT ROW_NUMBER() OVER (ORDER BY (SELECT NULL)) + 1"
        ),
        strs(&["2"])
    );
    // OFFSET / FETCH over the numbered rows, and SELECT ... INTO a table of them.
    assert_eq!(
        table(
            &mut c,
            "SELECT id, ROW_NUMBER() OVER (ORDER BY v DESC, id) AS rn FROM s ORDER BY rn
             OFFSET 2 ROWS FETCH NEXT 3 ROWS ONLY"
        ),
        strs(&["1,3", "6,4", "5,5"])
    );
    run(
        &mut c,
        "SELECT id, NTILE(4) OVER (ORDER BY id) AS quarter INTO quartered FROM s",
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT quarter, COUNT(*) FROM quartered GROUP BY quarter ORDER BY quarter"
        ),
        strs(&["1,2", "2,2", "3,2", "4,2"])
    );
    assert_eq!(
        types(&mut c, "SELECT quarter FROM quartered"),
        vec![SqlType::BigInt]
    );
    // INSERT ... SELECT takes the numbered rows.
    run(
        &mut c,
        "CREATE TABLE ranked (id INT, rn BIGINT);
         INSERT INTO ranked SELECT id, DENSE_RANK() OVER (ORDER BY v) FROM s",
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT rn, COUNT(*) FROM ranked GROUP BY rn ORDER BY rn"
        ),
        strs(&["1,1", "2,1", "3,1", "4,1", "5,1", "6,1", "7,2"])
    );
}

/// Proves SQL Server's message for each misuse, and that none of them changes a row.
#[test]
fn misuses_get_sql_servers_messages() {
    let (_s, mut c) = setup("w-misuse");
    let refused: &[(&str, (i32, u8))] = &[
        (
            "SELECT id FROM s WHERE ROW_NUMBER() OVER (ORDER BY id) = 1",
            (4108, 15),
        ),
        (
            "SELECT g FROM s GROUP BY ROW_NUMBER() OVER (ORDER BY id)",
            (4108, 15),
        ),
        (
            "SELECT g FROM s GROUP BY g HAVING COUNT(*) OVER () > 1",
            (4108, 15),
        ),
        (
            "SELECT c.cid FROM c JOIN o ON ROW_NUMBER() OVER (ORDER BY oid) = 1",
            (4108, 15),
        ),
        (
            "UPDATE s SET v = ROW_NUMBER() OVER (ORDER BY id)",
            (4108, 15),
        ),
        (
            "SELECT ROW_NUMBER() OVER (PARTITION BY g) FROM s",
            (4112, 15),
        ),
        ("SELECT LAG(v) OVER (PARTITION BY g) FROM s", (4112, 15)),
        ("SELECT FIRST_VALUE(v) OVER () FROM s", (4112, 15)),
        ("SELECT ROW_NUMBER() FROM s", (10753, 15)),
        (
            "SELECT SUM(v) OVER (ROWS UNBOUNDED PRECEDING) FROM s",
            (10756, 15),
        ),
        (
            "SELECT SUM(v) OVER (ORDER BY id RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM s",
            (4194, 16),
        ),
        (
            "SELECT SUM(v) OVER (ORDER BY id RANGE 2 PRECEDING) FROM s",
            (4194, 16),
        ),
        (
            "SELECT SUM(v) OVER (ORDER BY id ROWS BETWEEN 1 FOLLOWING AND 1 PRECEDING) FROM s",
            (4193, 16),
        ),
        (
            "SELECT ROW_NUMBER() OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) FROM s",
            (10752, 15),
        ),
        (
            "SELECT LEAD(v) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) FROM s",
            (10752, 15),
        ),
        ("SELECT NTILE(0) OVER (ORDER BY id) FROM s", (4116, 15)),
        ("SELECT NTILE(-3) OVER (ORDER BY id) FROM s", (4116, 15)),
        ("SELECT LAG(v, -1) OVER (ORDER BY id) FROM s", (8730, 16)),
        ("SELECT COUNT(DISTINCT v) OVER () FROM s", (10759, 15)),
        (
            "SELECT SUM(ROW_NUMBER() OVER (ORDER BY id)) FROM s",
            (4109, 15),
        ),
        (
            "SELECT ROW_NUMBER() OVER (ORDER BY ROW_NUMBER() OVER (ORDER BY id)) FROM s",
            (4109, 15),
        ),
        ("SELECT UPPER(g) OVER () FROM s", (4113, 15)),
        ("SELECT STDEV(v) OVER () FROM s", (40517, 16)),
        ("SELECT ROW_NUMBER() OVER (ORDER BY 1) FROM s", (5308, 16)),
        ("SELECT ROW_NUMBER() OVER (ORDER BY 'x') FROM s", (5309, 16)),
        ("SELECT ROW_NUMBER(1) OVER (ORDER BY id) FROM s", (174, 15)),
        ("SELECT LAG() OVER (ORDER BY id) FROM s", (189, 15)),
        (
            "DECLARE @x BIGINT; SELECT @x = ROW_NUMBER() OVER (ORDER BY id) FROM s",
            (40517, 16),
        ),
        (
            "SELECT SUM(v) OVER (ORDER BY id ROWS 1 FOLLOWING) FROM s",
            (102, 15),
        ),
    ];
    for (sql, want) in refused {
        let got: Vec<(i32, u8)> = errors(&mut c, sql).iter().map(|e| (e.0, e.1)).collect();
        assert_eq!(got, vec![*want], "{sql}");
    }
    assert_eq!(
        table(&mut c, "SELECT COUNT(*), SUM(v) FROM s"),
        strs(&["8,65"])
    );
    let text = c
        .batch("SELECT STDEV(v) OVER () FROM s")
        .unwrap()
        .errors()
        .next()
        .map(|e| e.text.clone())
        .unwrap();
    assert!(
        text.contains("does not support") && text.contains("STDEV"),
        "{text}"
    );
}

/// Proves window queries run beside writers: two sessions insert rows in transactions
/// while three number, count and total them per partition; in every answer each
/// partition's last row number equals its count and its running total its total.
#[test]
fn sessions_window_beside_inserting_sessions() {
    let (s, mut c) = setup("w-concurrent");
    // Every partition has a row before the readers start.
    run(
        &mut c,
        "CREATE TABLE t (id INT PRIMARY KEY, grp INT, val INT);
         INSERT INTO t VALUES (-1, 0, 1), (-2, 1, 1), (-3, 2, 1), (-4, 3, 1)",
    );
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..2i64 {
        let (addr, stop) = (s.addr.clone(), stop.clone());
        writers.push(std::thread::spawn(move || {
            let mut c = connect_at(&addr, Some("w"), 60).unwrap();
            let mut n = 0i64;
            while !stop.load(Ordering::Relaxed) {
                let rows: Vec<String> = (0..5)
                    .map(|k| {
                        let id = w * 1_000_000 + n * 5 + k;
                        format!("({id}, {}, {})", id % 4, id % 11)
                    })
                    .collect();
                let sql = format!(
                    "BEGIN TRAN; INSERT INTO t VALUES {}; COMMIT",
                    rows.join(",")
                );
                let errs = errors(&mut c, &sql);
                assert!(errs.is_empty(), "{errs:?}");
                n += 1;
            }
            n
        }));
    }
    let check = "SELECT COUNT(*), SUM(CASE WHEN rn = cnt AND run = total THEN 1 ELSE 0 END),
            SUM(CASE WHEN rn > cnt OR rk > rn THEN 1 ELSE 0 END)
        FROM (SELECT grp, ROW_NUMBER() OVER (PARTITION BY grp ORDER BY id) AS rn,
                RANK() OVER (PARTITION BY grp ORDER BY id) AS rk,
                COUNT(*) OVER (PARTITION BY grp) AS cnt,
                SUM(val) OVER (PARTITION BY grp ORDER BY id ROWS UNBOUNDED PRECEDING) AS run,
                SUM(val) OVER (PARTITION BY grp) AS total FROM t) AS x";
    let mut readers = Vec::new();
    for _ in 0..3 {
        let (addr, stop) = (s.addr.clone(), stop.clone());
        readers.push(std::thread::spawn(move || {
            let mut c = connect_at(&addr, Some("w"), 60).unwrap();
            let mut checks = 0;
            while !stop.load(Ordering::Relaxed) || checks < 5 {
                let r = c.batch(check).unwrap();
                if r.errors().any(|e| e.number == 1205) {
                    continue;
                }
                let got = all_rows(&r);
                let row: Vec<i64> = got[0].iter().map(common::tds::int).collect();
                // Each of the 4 partitions has one last row, and nothing is out of line.
                assert!(row[0] >= 4 && row[1] == 4 && row[2] == 0, "{row:?}");
                checks += 1;
            }
            checks
        }));
    }
    std::thread::sleep(std::time::Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let inserted: i64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    let checks: i32 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(
        inserted > 0 && checks >= 15,
        "{inserted} inserts, {checks} checks"
    );
    assert_eq!(
        table(&mut c, check),
        vec![format!("{},4,0", inserted * 5 + 4)]
    );
}

/// Proves a partition larger than a sort's memory (8 MB) works: 3,000 rows of 4 KB (12 MB)
/// in one partition are sorted through spilled runs and spooled to tempdb's directory,
/// and every function still sees every row in order.
#[test]
fn a_partition_larger_than_memory_spills() {
    let (_s, mut c) = setup("w-spill");
    run(
        &mut c,
        "CREATE TABLE big (id INT PRIMARY KEY, grp INT, pad VARCHAR(4000))",
    );
    for chunk in 0..30 {
        let values: Vec<String> = (0..100)
            .map(|i| {
                let id = chunk * 100 + i;
                format!("({id}, {}, REPLICATE('p', 4000))", id % 2)
            })
            .collect();
        run(
            &mut c,
            &format!("INSERT INTO big VALUES {}", values.join(",")),
        );
    }
    // One partition of all 3,000 rows (each carrying its 4 KB pad through the sort).
    let n = 3000i64;
    let sum_ids = n * (n - 1) / 2;
    assert_eq!(
        table(
            &mut c,
            "SELECT COUNT(*), SUM(CASE WHEN rn = id + 1 THEN 1 ELSE 0 END),
                SUM(CASE WHEN lagged = id - 1 OR (id = 0 AND lagged IS NULL) THEN 1 ELSE 0 END),
                MAX(running), SUM(CASE WHEN moving = 3 * id - 3 OR id < 2 THEN 1 ELSE 0 END),
                MIN(last), SUM(LEN(pad)) / 4000, MAX(tile)
             FROM (SELECT id, pad, ROW_NUMBER() OVER (PARTITION BY 1 + 0 * grp ORDER BY id) AS rn,
                    LAG(id) OVER (ORDER BY id) AS lagged,
                    SUM(CAST(id AS BIGINT)) OVER (ORDER BY id) AS running,
                    SUM(id) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS moving,
                    LAST_VALUE(id) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS last,
                    NTILE(7) OVER (ORDER BY id) AS tile
                   FROM big) AS x"
        ),
        vec![format!("{n},{n},{n},{sum_ids},{n},{},{n},7", n - 1)]
    );
    // Two partitions, each of 1,500 rows (6 MB), numbered apart.
    assert_eq!(
        table(
            &mut c,
            "SELECT grp, MAX(rn), MIN(rn), COUNT(*) FROM (SELECT grp,
                ROW_NUMBER() OVER (PARTITION BY grp ORDER BY id DESC) AS rn, pad FROM big) AS x
             GROUP BY grp ORDER BY grp"
        ),
        strs(&["0,1500,1,1500", "1,1500,1,1500"])
    );
}
