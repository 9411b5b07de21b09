//! CROSS APPLY / OUTER APPLY of derived tables, VALUES constructors and table-valued
//! functions (exec/join/apply.rs), and PIVOT / UNPIVOT (exec/join/rotation.rs), through a
//! real `extentdb serve` and real TDS sessions: top-n per group, left rows with empty
//! right sides, the VALUES unpivot idiom, an APPLY followed by a join and GROUP BY, PIVOT
//! with SUM / COUNT / MAX and NULL cells over a table and a derived table, UNPIVOT dropping
//! NULLs, SQL Server's messages for misuse (none changing anything), a few thousand rows,
//! and sessions applying and pivoting while others insert. Before them an APPLY of
//! anything but a table was refused (40517) and PIVOT / UNPIVOT were syntax errors.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use extentdb_sql::exec::Output;
use extentdb_sql::types::SqlType;
use extentdb_tds::client::Client;

mod common;
use common::tds::{all_rows, connect_at, errors, run, strs, table, Server};

/// Customers (one with no orders) and their orders, with ties in amounts.
const SETUP: &str = "CREATE TABLE c (cid INT PRIMARY KEY, name VARCHAR(20), q1 INT, q2 INT, q3 INT);
    INSERT INTO c VALUES (1, 'ann', 10, NULL, 30), (2, 'bob', 5, 6, NULL), (3, 'cy', NULL, NULL, NULL);
    CREATE TABLE o (oid INT PRIMARY KEY, cid INT, amt INT);
    INSERT INTO o VALUES (10, 1, 5), (11, 1, 7), (12, 1, 9), (13, 2, 9), (14, 2, 3), (15, 4, 1);
    CREATE TABLE r (cid INT PRIMARY KEY, region VARCHAR(10));
    INSERT INTO r VALUES (1, 'north'), (2, 'south'), (3, 'north');
    CREATE TABLE sales (id INT PRIMARY KEY, region VARCHAR(10), yr INT, qtr VARCHAR(2), amt INT);
    INSERT INTO sales VALUES (1, 'north', 2023, 'q1', 10), (2, 'north', 2023, 'q2', 20),
        (3, 'north', 2023, 'q1', 5), (4, 'south', 2023, 'q1', 7), (5, 'south', 2023, 'q3', NULL),
        (6, 'east', 2024, 'q2', 1);
    CREATE TABLE m (region VARCHAR(10), qtr VARCHAR(2), amt INT);
    INSERT INTO m SELECT region, qtr, amt FROM sales";

/// The names and types of a query's first result set's columns.
fn columns(c: &mut Client, sql: &str) -> Vec<(String, SqlType)> {
    run(c, sql)
        .outputs
        .iter()
        .find_map(|o| match o {
            Output::Rows { columns, .. } => Some(columns.clone()),
            _ => None,
        })
        .expect("a result set")
}

fn setup(name: &str) -> (Server, Client) {
    common::tds::start_in_database(name, "ap", SETUP)
}

/// Proves top-n per group: CROSS APPLY runs its TOP ... ORDER BY once per left row, with
/// the left row's key in its WHERE, and drops left rows with no right rows.
#[test]
fn cross_apply_gives_the_top_rows_per_left_row() {
    let (_s, mut c) = setup("ap-top");
    assert_eq!(
        table(
            &mut c,
            "SELECT c.name, x.oid, x.amt FROM c
             CROSS APPLY (SELECT TOP (2) o.oid, o.amt FROM o WHERE o.cid = c.cid
                          ORDER BY o.amt DESC) AS x
             ORDER BY c.name, x.amt DESC"
        ),
        strs(&["ann,12,9", "ann,11,7", "bob,13,9", "bob,14,3"])
    );
    // TOP's count from the left row.
    assert_eq!(
        table(
            &mut c,
            "SELECT c.cid, x.oid FROM c
             CROSS APPLY (SELECT TOP (c.cid) oid FROM o WHERE o.cid = c.cid ORDER BY oid) x
             ORDER BY c.cid, x.oid"
        ),
        strs(&["1,10", "2,13", "2,14"])
    );
    // An aggregate per left row, a derived column list naming its columns.
    assert_eq!(
        table(
            &mut c,
            "SELECT c.name, s.n, s.total FROM c
             CROSS APPLY (SELECT COUNT(*), SUM(amt) FROM o WHERE o.cid = c.cid) AS s(n, total)
             ORDER BY c.name"
        ),
        strs(&["ann,3,21", "bob,2,12", "cy,0,NULL"])
    );
}

/// Proves OUTER APPLY keeps a left row whose right side is empty, with NULLs, and that
/// WHERE and ORDER BY see the applied columns.
#[test]
fn outer_apply_keeps_left_rows_with_no_right_rows() {
    let (_s, mut c) = setup("ap-outer");
    assert_eq!(
        table(
            &mut c,
            "SELECT c.name, x.oid FROM c
             OUTER APPLY (SELECT TOP (1) oid FROM o WHERE o.cid = c.cid ORDER BY amt) x
             ORDER BY c.name"
        ),
        strs(&["ann,10", "bob,14", "cy,NULL"])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT c.name FROM c
             OUTER APPLY (SELECT oid FROM o WHERE o.cid = c.cid AND o.amt > 8) x
             WHERE x.oid IS NULL ORDER BY c.name"
        ),
        strs(&["cy"])
    );
    // No left rows at all: the result's columns still come.
    let r = run(
        &mut c,
        "SELECT c.name, x.oid FROM c OUTER APPLY (SELECT oid FROM o WHERE o.cid = c.cid) x
         WHERE c.cid > 100",
    );
    assert!(all_rows(&r).is_empty());
    let r = run(
        &mut c,
        "SELECT c.cid, x.oid FROM c
         CROSS APPLY (SELECT TOP (c.cid) oid FROM o WHERE o.cid = c.cid ORDER BY oid) x
         WHERE c.cid > 100",
    );
    assert!(all_rows(&r).is_empty());
    // A right side that reads no left column runs once and joins every left row.
    assert_eq!(
        table(
            &mut c,
            "SELECT c.cid, x.m FROM c CROSS APPLY (SELECT MAX(amt) AS m FROM o) x ORDER BY c.cid"
        ),
        strs(&["1,9", "2,9", "3,9"])
    );
}

/// Proves the VALUES idiom: a table value constructor naming the left row's columns
/// unpivots them, its column list names the result, and WHERE drops the NULLs.
#[test]
fn values_constructor_unpivots_the_left_row() {
    let (_s, mut c) = setup("ap-values");
    assert_eq!(
        table(
            &mut c,
            "SELECT c.name, v.q, v.amt FROM c
             CROSS APPLY (VALUES ('q1', c.q1), ('q2', c.q2), ('q3', c.q3)) AS v(q, amt)
             WHERE v.amt IS NOT NULL ORDER BY c.name, v.q"
        ),
        strs(&["ann,q1,10", "ann,q3,30", "bob,q1,5", "bob,q2,6"])
    );
    // A VALUES table without APPLY, typed by precedence across its rows.
    assert_eq!(
        table(
            &mut c,
            "SELECT a, b FROM (VALUES (1, 'x'), (2.5, 'yy')) AS t(a, b) ORDER BY a"
        ),
        strs(&["1.0,x", "2.5,yy"])
    );
    // Aggregates over the applied rows, grouped by the left row.
    assert_eq!(
        table(
            &mut c,
            "SELECT c.name, MAX(v.x) FROM c
             CROSS APPLY (VALUES (c.q1), (c.q2), (c.q3)) v(x) GROUP BY c.name ORDER BY c.name"
        ),
        strs(&["ann,30", "bob,6", "cy,NULL"])
    );
}

/// Proves an APPLY inside a longer FROM clause: after a join (its right side reading
/// both earlier sources), followed by a join on an applied column, then GROUP BY.
#[test]
fn apply_between_joins_then_group_by() {
    let (_s, mut c) = setup("ap-joins");
    assert_eq!(
        table(
            &mut c,
            "SELECT r.region, COUNT(*), SUM(x.amt) FROM c
             JOIN r ON r.cid = c.cid
             CROSS APPLY (SELECT o.oid, o.amt FROM o WHERE o.cid = c.cid AND r.region <> '') x
             JOIN o AS o2 ON o2.oid = x.oid
             GROUP BY r.region ORDER BY r.region"
        ),
        strs(&["north,3,21", "south,2,12"])
    );
    // Nested: an APPLY whose right side has an APPLY of its own.
    assert_eq!(
        table(
            &mut c,
            "SELECT c.cid, y.d FROM c
             CROSS APPLY (SELECT o.oid FROM o WHERE o.cid = c.cid) x
             CROSS APPLY (SELECT x.oid * 10 + c.cid AS d) y
             WHERE c.cid = 2 ORDER BY y.d"
        ),
        strs(&["2,132", "2,142"])
    );
}

/// Proves the misuses get SQL Server's messages: a derived table without an alias (102),
/// an unnamed column (8155), a constructor's rows of different widths (10709), a column
/// list of the wrong length (8158 / 8159), an unknown function still refused (40517), and
/// a name used twice (1013), an APPLY of a parenthesized join (40517) and an unknown
/// column of the right side (207).
#[test]
fn misuse_gets_sql_servers_messages() {
    let (_s, mut c) = setup("ap-errors");
    let cases: &[(&str, i32)] = &[
        (
            "SELECT * FROM c CROSS APPLY (SELECT o.oid FROM o WHERE o.cid = c.cid)",
            102,
        ),
        (
            "SELECT * FROM c CROSS APPLY (SELECT COUNT(*) FROM o WHERE o.cid = c.cid) x",
            8155,
        ),
        (
            "SELECT * FROM c CROSS APPLY (VALUES (1, 2), (3)) v(a, b)",
            10709,
        ),
        ("SELECT * FROM c CROSS APPLY (VALUES (1, 2)) v(a)", 8158),
        ("SELECT * FROM c CROSS APPLY (VALUES (1)) v(a, b)", 8159),
        (
            "SELECT * FROM c CROSS APPLY sys.fn_dblog(c.name, NULL) s",
            40517,
        ),
        ("SELECT * FROM c CROSS APPLY (SELECT 1 AS k) c", 1013),
        (
            "SELECT * FROM c CROSS APPLY (o JOIN r ON o.cid = r.cid)",
            40517,
        ),
        (
            "SELECT * FROM c CROSS APPLY (SELECT nope FROM o WHERE o.cid = c.cid) x",
            207,
        ),
    ];
    for (sql, number) in cases {
        let got = errors(&mut c, sql);
        assert_eq!(got.first().map(|e| e.0), Some(*number), "{sql}: {got:?}");
    }
}

/// Proves a few thousand rows through APPLY: a right side that sorts a 4,000-row table's
/// group per left row (checked against the answer computed here), and 4,000 left rows
/// each giving two rows through VALUES.
#[test]
fn thousands_of_left_rows_through_apply() {
    let (_s, mut c) = setup("ap-large");
    run(
        &mut c,
        "CREATE TABLE big (id INT PRIMARY KEY, grp INT, v INT)",
    );
    for chunk in 0..4 {
        let values: Vec<String> = (0..1000)
            .map(|i| {
                let id = chunk * 1000 + i;
                format!("({id}, {}, {})", id % 50, (id * 7) % 101)
            })
            .collect();
        run(
            &mut c,
            &format!("INSERT INTO big VALUES {}", values.join(",")),
        );
    }
    // The left side a derived table of 100 rows; each right side sorts its group's 79.
    let applied = table(
        &mut c,
        "SELECT COUNT(*), SUM(x.v), SUM(x.id) FROM (SELECT id, grp FROM big WHERE id % 40 = 0) b
         CROSS APPLY (SELECT TOP (2) v, id FROM big i WHERE i.grp = b.grp AND i.id <> b.id
                      ORDER BY v DESC, id) x",
    );
    let (mut v_sum, mut id_sum) = (0i64, 0i64);
    for b in (0..4000i64).filter(|id| id % 40 == 0) {
        let mut group: Vec<(i64, i64)> = (0..4000i64)
            .filter(|&id| id % 50 == b % 50 && id != b)
            .map(|id| (-((id * 7) % 101), id))
            .collect();
        group.sort();
        for (v, id) in &group[..2] {
            v_sum -= v;
            id_sum += id;
        }
    }
    assert_eq!(applied, vec![format!("200,{v_sum},{id_sum}")]);
    // Every row of every left row through the VALUES idiom: 4,000 x 2 rows.
    assert_eq!(
        table(
            &mut c,
            "SELECT COUNT(*), SUM(u.x) FROM big b CROSS APPLY (VALUES (b.v), (b.grp)) u(x)"
        ),
        vec![format!(
            "8000,{}",
            (0..4000i64).map(|id| (id * 7) % 101 + id % 50).sum::<i64>()
        )]
    );
}

/// Proves APPLY and PIVOT run beside writers: two sessions insert orders while three sum
/// each customer's top orders through CROSS APPLY and pivot the largest order per
/// customer; every answer is consistent with itself.
#[test]
fn sessions_apply_beside_inserting_sessions() {
    let (s, mut c) = setup("ap-concurrent");
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..2i64 {
        let (addr, stop) = (s.addr.clone(), stop.clone());
        writers.push(std::thread::spawn(move || {
            let mut c = connect_at(&addr, Some("ap"), 60).unwrap();
            let mut n = 0i64;
            while !stop.load(Ordering::Relaxed) {
                let id = 1000 + w * 1_000_000 + n;
                let sql = format!("INSERT INTO o VALUES ({id}, {}, 1)", id % 3 + 1);
                let errs = errors(&mut c, &sql);
                assert!(errs.is_empty(), "{errs:?}");
                n += 1;
            }
            n
        }));
    }
    // Per customer: the apply's count equals a correlated COUNT over the same snapshot
    // only under serializable reads; here each answer's own invariants are checked.
    let check = "SELECT c.cid, x.n, y.top2 FROM c
        CROSS APPLY (SELECT COUNT(*) AS n FROM o WHERE o.cid = c.cid) x
        OUTER APPLY (SELECT SUM(amt) AS top2 FROM (SELECT TOP (2) amt FROM o
                     WHERE o.cid = c.cid ORDER BY amt DESC) t) y
        ORDER BY c.cid";
    let mut readers = Vec::new();
    for _ in 0..3 {
        let (addr, stop) = (s.addr.clone(), stop.clone());
        readers.push(std::thread::spawn(move || {
            let mut c = connect_at(&addr, Some("ap"), 60).unwrap();
            let mut checks = 0;
            while !stop.load(Ordering::Relaxed) || checks < 5 {
                let r = c.batch(check).unwrap();
                if r.errors().any(|e| e.number == 1205) {
                    continue;
                }
                let got: Vec<Vec<i64>> = all_rows(&r)
                    .iter()
                    .map(|r| {
                        r.iter()
                            .map(|v| common::tds::show(v).parse().unwrap_or(-1))
                            .collect()
                    })
                    .collect();
                assert_eq!(got.len(), 3, "{got:?}");
                // The top two of ann's orders stay 9 + 7 (new orders are 1s); cy's count
                // only grows from 0.
                assert_eq!(got[0][2], 16, "{got:?}");
                assert!(
                    got[0][1] >= 3 && got[1][1] >= 2 && got[2][1] >= 0,
                    "{got:?}"
                );
                let pivot = "SELECT p.[1], p.[2], p.[3] FROM (SELECT cid, amt FROM o) s
                    PIVOT (MAX(amt) FOR cid IN ([1], [2], [3])) p";
                let r = c.batch(pivot).unwrap();
                if r.errors().any(|e| e.number == 1205) {
                    continue;
                }
                // The largest orders stay 9 and 9 (new orders are 1s).
                let row: Vec<String> = all_rows(&r)[0].iter().map(common::tds::show).collect();
                assert!(row[0] == "9" && row[1] == "9", "{row:?}");
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
    let counts = table(
        &mut c,
        "SELECT SUM(x.n) FROM c CROSS APPLY (SELECT COUNT(*) AS n FROM o WHERE o.cid = c.cid) x",
    );
    assert_eq!(counts, vec![format!("{}", inserted + 5)]);
}

/// Proves PIVOT over a derived table: grouping by every other column, one column per IN
/// value named by it, SUM's NULL and COUNT's 0 where no row (or only NULLs) fall, MAX,
/// an INT FOR column matched by bracketed numbers, and WHERE over the pivoted columns.
#[test]
fn pivot_groups_by_the_other_columns() {
    let (_s, mut c) = setup("ap-pivot");
    let sum = "SELECT * FROM (SELECT region, qtr, amt FROM sales) AS s
        PIVOT (SUM(amt) FOR qtr IN ([q1], [q2], q3)) AS p ORDER BY region";
    assert_eq!(
        table(&mut c, sum),
        strs(&["east,NULL,1,NULL", "north,15,20,NULL", "south,7,NULL,NULL"])
    );
    let names: Vec<String> = columns(&mut c, sum).into_iter().map(|c| c.0).collect();
    assert_eq!(names, strs(&["region", "q1", "q2", "q3"]));
    assert_eq!(
        table(
            &mut c,
            "SELECT region, q1, q2, q3 FROM (SELECT region, qtr, amt FROM sales) AS s
             PIVOT (COUNT(amt) FOR qtr IN ([q1], [q2], [q3])) AS p ORDER BY region"
        ),
        strs(&["east,0,1,0", "north,2,1,0", "south,1,0,0"])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT p.region, p.[2023], p.[2024] FROM (SELECT region, yr, amt FROM sales) s
             PIVOT (MAX(amt) FOR yr IN ([2023], [2024])) p WHERE p.[2023] > 5 ORDER BY 1"
        ),
        strs(&["north,20,NULL", "south,7,NULL"])
    );
    // Types: the grouping column keeps its own, COUNT is int.
    let types: Vec<SqlType> = columns(
        &mut c,
        "SELECT * FROM (SELECT region, qtr, amt FROM sales) s
         PIVOT (COUNT(amt) FOR qtr IN ([q1])) p",
    )
    .into_iter()
    .map(|c| c.1)
    .collect();
    assert_eq!(types, vec![SqlType::VarChar(10), SqlType::Int]);
}

/// Proves PIVOT straight over a table (a heap, every other column grouping), a join of
/// the pivoted rows, and a source with no grouping column giving one row.
#[test]
fn pivot_over_a_table_and_without_grouping_columns() {
    let (_s, mut c) = setup("ap-pivot-table");
    assert_eq!(
        table(
            &mut c,
            "SELECT * FROM m PIVOT (SUM(amt) FOR qtr IN (q1, q2)) AS p ORDER BY region"
        ),
        strs(&["east,NULL,1", "north,15,20", "south,7,NULL"])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT p.region, p.q1, r.cid FROM m PIVOT (SUM(amt) FOR qtr IN (q1)) AS p
             JOIN r ON r.region = p.region ORDER BY r.cid"
        ),
        strs(&["north,15,1", "south,7,2", "north,15,3"])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT * FROM (SELECT qtr, amt FROM m) s PIVOT (SUM(amt) FOR qtr IN (q1, q9)) p"
        ),
        strs(&["22,NULL"])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT * FROM (SELECT qtr, amt FROM m WHERE 1 = 0) s
             PIVOT (COUNT(amt) FOR qtr IN (q1)) p"
        ),
        strs(&["0"])
    );
}

/// Proves UNPIVOT: one row per listed column that is not NULL (a row of NULLs vanishes),
/// the kept columns then the value then the name (NVARCHAR(128)), and an APPLY's VALUES
/// idiom agreeing with it.
#[test]
fn unpivot_drops_nulls() {
    let (_s, mut c) = setup("ap-unpivot");
    let sql = "SELECT * FROM c UNPIVOT (amt FOR q IN (q1, q2, q3)) AS u ORDER BY cid, q";
    assert_eq!(
        table(&mut c, sql),
        strs(&["1,ann,10,q1", "1,ann,30,q3", "2,bob,5,q1", "2,bob,6,q2"])
    );
    assert_eq!(
        columns(&mut c, sql),
        vec![
            ("cid".to_string(), SqlType::Int),
            ("name".to_string(), SqlType::VarChar(20)),
            ("amt".to_string(), SqlType::Int),
            ("q".to_string(), SqlType::NVarChar(128)),
        ]
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT u.q, SUM(u.amt) FROM (SELECT cid, q1, q2, q3 FROM c) s
             UNPIVOT (amt FOR q IN (q1, q2, q3)) u GROUP BY u.q ORDER BY u.q"
        ),
        table(
            &mut c,
            "SELECT v.q, SUM(v.amt) FROM c CROSS APPLY (VALUES ('q1', q1), ('q2', q2), ('q3', q3))
             v(q, amt) WHERE v.amt IS NOT NULL GROUP BY v.q ORDER BY v.q"
        )
    );
}

/// Proves PIVOT's and UNPIVOT's misuses get SQL Server's messages and change nothing.
#[test]
fn pivot_and_unpivot_misuse_gets_sql_servers_messages() {
    let (_s, mut c) = setup("ap-pivot-errors");
    let src = "SELECT * FROM (SELECT region, qtr, yr, amt FROM sales) s";
    let cases: Vec<(String, Vec<i32>)> = vec![
        (
            format!("{src} PIVOT (SUM(amt) FOR qtr IN ([q1], [Q1 ])) p"),
            vec![8156],
        ),
        (
            format!("{src} PIVOT (SUM(amt) FOR qtr IN ([q1], [region])) p"),
            vec![265, 8156],
        ),
        (
            format!("{src} PIVOT (SUM(amt) FOR qtr IN ('q1')) p"),
            vec![102],
        ),
        (
            format!("{src} PIVOT (COUNT(*) FOR qtr IN ([q1])) p"),
            vec![102],
        ),
        (
            format!("{src} PIVOT (SUM(amt), COUNT(amt) FOR qtr IN ([q1])) p"),
            vec![102],
        ),
        (
            format!("{src} PIVOT (SUM(amt) FOR qtr IN ([q1]))"),
            vec![102],
        ),
        (
            format!("{src} PIVOT (UPPER(amt) FOR qtr IN ([q1])) p"),
            vec![195],
        ),
        (
            format!("{src} PIVOT (SUM(nope) FOR qtr IN ([q1])) p"),
            vec![207],
        ),
        (
            format!("{src} PIVOT (SUM(amt) FOR nope IN ([q1])) p"),
            vec![207],
        ),
        (
            format!("{src} PIVOT (SUM(amt) FOR yr IN ([abc])) p"),
            vec![8114, 473],
        ),
        (
            format!("{src} PIVOT (STDEV(amt) FOR qtr IN ([q1])) p"),
            vec![40517],
        ),
        (
            "SELECT * FROM c UNPIVOT (v FOR k IN (name, q1)) u".into(),
            vec![8167],
        ),
        (
            "SELECT * FROM c UNPIVOT (v FOR k IN (q1, nope)) u".into(),
            vec![207],
        ),
        (
            "SELECT * FROM c UNPIVOT (name FOR k IN (q1, q2)) u".into(),
            vec![265, 8156],
        ),
        (
            "SELECT * FROM c UNPIVOT (v FOR k IN (q1, q1)) u".into(),
            vec![8156],
        ),
        (
            "SELECT * FROM c UNPIVOT (v FOR k IN (q1, q2))".into(),
            vec![102],
        ),
        (
            "SELECT * FROM c JOIN r ON r.cid = c.cid UNPIVOT (v FOR k IN (q1)) u".into(),
            vec![40517],
        ),
    ];
    for (sql, want) in &cases {
        let got: Vec<i32> = errors(&mut c, sql).into_iter().map(|e| e.0).collect();
        assert_eq!(&got, want, "{sql}");
    }
    assert_eq!(table(&mut c, "SELECT COUNT(*) FROM sales"), strs(&["6"]));
}

/// Proves SET STATISTICS IO names the table under a PIVOT and an UNPIVOT (Msg 3615).
#[test]
fn statistics_io_names_the_rotated_tables() {
    let (_s, mut c) = setup("ap-pivot-io");
    let tables = |c: &mut Client, sql: &str| -> Vec<String> {
        run(
            c,
            &format!("SET STATISTICS IO ON; {sql}; SET STATISTICS IO OFF"),
        )
        .outputs
        .iter()
        .filter_map(|o| match o {
            Output::Info(m) if m.number == 3615 => {
                Some(m.text.split('\'').nth(1).unwrap_or_default().to_string())
            }
            _ => None,
        })
        .collect()
    };
    assert_eq!(
        tables(&mut c, "SELECT * FROM m PIVOT (SUM(amt) FOR qtr IN (q1)) p"),
        strs(&["m"])
    );
    assert_eq!(
        tables(
            &mut c,
            "SELECT * FROM c UNPIVOT (v FOR k IN (q1, q2)) u JOIN r ON r.cid = u.cid"
        ),
        strs(&["c", "r"])
    );
}

/// Proves PIVOT and UNPIVOT over 4,000 rows: PIVOT agrees with SUM(CASE ...) GROUP BY,
/// UNPIVOT gives every non-NULL value once.
#[test]
fn pivot_and_unpivot_over_thousands_of_rows() {
    let (_s, mut c) = setup("ap-pivot-large");
    run(
        &mut c,
        "CREATE TABLE big (id INT PRIMARY KEY, grp INT, k VARCHAR(2), v INT, w INT)",
    );
    for chunk in 0..4 {
        let values: Vec<String> = (0..1000)
            .map(|i| {
                let id = chunk * 1000 + i;
                let w = if id % 3 == 0 {
                    "NULL".into()
                } else {
                    (id % 13).to_string()
                };
                format!("({id}, {}, 'k{}', {}, {w})", id % 97, id % 4, id % 101)
            })
            .collect();
        run(
            &mut c,
            &format!("INSERT INTO big VALUES {}", values.join(",")),
        );
    }
    let pivoted = table(
        &mut c,
        "SELECT * FROM (SELECT grp, k, v FROM big) s
         PIVOT (SUM(v) FOR k IN (k0, k1, k2, k3)) p ORDER BY grp",
    );
    let grouped = table(
        &mut c,
        "SELECT grp, SUM(CASE WHEN k = 'k0' THEN v END), SUM(CASE WHEN k = 'k1' THEN v END),
             SUM(CASE WHEN k = 'k2' THEN v END), SUM(CASE WHEN k = 'k3' THEN v END)
         FROM big GROUP BY grp ORDER BY grp",
    );
    assert_eq!(pivoted.len(), 97);
    assert_eq!(pivoted, grouped);
    let nulls = (0..4000).filter(|id| id % 3 == 0).count();
    assert_eq!(
        table(
            &mut c,
            "SELECT COUNT(*) FROM big UNPIVOT (x FOR col IN (v, w)) u"
        ),
        vec![format!("{}", 8000 - nulls)]
    );
}

/// Proves a PIVOT whose grouping sort is larger than a sort's memory (8 MB) spills and
/// still folds every group once: 3,000 rows of 4 KB grouped by (grp, pad), checked against
/// the same aggregates of CASE through GROUP BY.
#[test]
fn a_pivot_larger_than_memory_spills() {
    let (_s, mut c) = setup("ap-pivot-spill");
    run(
        &mut c,
        "CREATE TABLE wide (id INT PRIMARY KEY, grp INT, k VARCHAR(2), v INT, pad VARCHAR(4000))",
    );
    for chunk in 0..30 {
        let values: Vec<String> = (0..100)
            .map(|i| {
                let id = chunk * 100 + i;
                format!(
                    "({id}, {}, 'k{}', {}, REPLICATE('{}', 4000))",
                    id % 7,
                    id % 3,
                    id % 11,
                    ["a", "b", "c", "d", "e"][id % 5]
                )
            })
            .collect();
        run(
            &mut c,
            &format!("INSERT INTO wide VALUES {}", values.join(",")),
        );
    }
    let pivoted = table(
        &mut c,
        "SELECT COUNT(*), SUM(k0), SUM(k1), SUM(k2), SUM(LEN(pad)) FROM
            (SELECT grp, pad, k, v FROM wide) s PIVOT (SUM(v) FOR k IN (k0, k1, k2)) p",
    );
    let grouped = table(
        &mut c,
        "SELECT COUNT(*), SUM(a), SUM(b), SUM(d), SUM(LEN(pad)) FROM
            (SELECT pad, SUM(CASE WHEN k = 'k0' THEN v END) AS a,
                SUM(CASE WHEN k = 'k1' THEN v END) AS b,
                SUM(CASE WHEN k = 'k2' THEN v END) AS d
             FROM wide GROUP BY grp, pad) g",
    );
    // 7 x 5 (grp, pad) pairs, each present.
    assert_eq!(pivoted[0].split(',').next(), Some("35"));
    assert_eq!(pivoted, grouped);
}
