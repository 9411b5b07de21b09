//! GROUP BY ROLLUP, CUBE, GROUPING SETS, `()` and WITH ROLLUP / CUBE (exec/grouping_sets.rs,
//! parser/grouping.rs) through a real `extentdb serve` and real TDS sessions: each set's
//! rows with the columns it aggregates away NULL, GROUPING and GROUPING_ID telling those
//! NULLs from NULL keys in the data, duplicate sets, mixes with plain columns, HAVING and
//! ORDER BY over every set, DISTINCT aggregates, computed keys, the grand total over an
//! empty table, an input larger than a sort's memory, SQL Server's messages for each
//! misuse, and sessions computing cubes while others insert. Before them every one of
//! these was refused (40517).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use extentdb_sql::exec::Output;
use extentdb_sql::types::SqlType;
use extentdb_tds::client::Client;

mod common;
use common::tds::{all_rows, connect_at, errors, int, run, strs, table, Server};

/// A NULL key in the data (`g` of row 6, `h` of row 5) beside the rollup's NULLs.
const SETUP: &str = "CREATE TABLE s (id INT PRIMARY KEY, g VARCHAR(5), h INT, v INT);
    INSERT INTO s VALUES (1, 'a', 1, 10), (2, 'a', 2, 20), (3, 'a', 2, 30), (4, 'b', 1, 5),
        (5, 'b', NULL, 7), (6, NULL, 1, 1);
    CREATE TABLE e (g VARCHAR(5), h INT, v INT)";

fn setup(name: &str) -> (Server, Client) {
    common::tds::start_in_database(name, "gs", SETUP)
}

/// Proves ROLLUP (g, h): the detail groups, one subtotal per g and the grand total, with
/// GROUPING 1 only where the rollup made the NULL (g NULL and h NULL in the data stay
/// GROUPING 0), GROUPING_ID's bits with its first argument most significant; WITH ROLLUP
/// gives the same rows, and unordered they come as a stream aggregate emits them.
#[test]
fn rollup_subtotals_and_grouping_tell_nulls_apart() {
    let (_s, mut c) = setup("gs-rollup");
    let want = strs(&[
        "NULL,1,1,1,0,0,0",
        "NULL,NULL,1,1,0,1,1",
        "a,1,10,1,0,0,0",
        "a,2,50,2,0,0,0",
        "a,NULL,60,3,0,1,1",
        "b,NULL,7,1,0,0,0",
        "b,1,5,1,0,0,0",
        "b,NULL,12,2,0,1,1",
        "NULL,NULL,73,6,1,1,3",
    ]);
    let select = "SELECT g, h, SUM(v), COUNT(*), GROUPING(g), GROUPING(h), GROUPING_ID(g, h)
        FROM s";
    let order = "ORDER BY GROUPING(g), g, GROUPING(h), h";
    assert_eq!(
        table(&mut c, &format!("{select} GROUP BY ROLLUP (g, h) {order}")),
        want
    );
    assert_eq!(
        table(
            &mut c,
            &format!("{select} GROUP BY g, h WITH ROLLUP {order}")
        ),
        want
    );
    // Unordered: sorted by (g, h), each subtotal after its group's rows.
    assert_eq!(
        table(&mut c, &format!("{select} GROUP BY ROLLUP (g, h)")),
        want
    );
    // The grouping columns keep their names and types; GROUPING is tinyint,
    // GROUPING_ID int.
    let r = run(
        &mut c,
        "SELECT g, h, GROUPING(g) AS gg, GROUPING_ID(g, h) AS gid FROM s GROUP BY ROLLUP (g, h)",
    );
    let columns = r
        .outputs
        .iter()
        .find_map(|o| match o {
            Output::Rows { columns, .. } => Some(columns.clone()),
            _ => None,
        })
        .unwrap();
    let got: Vec<(String, SqlType)> = columns.into_iter().collect();
    assert_eq!(
        got,
        vec![
            ("g".to_string(), SqlType::VarChar(5)),
            ("h".to_string(), SqlType::Int),
            ("gg".to_string(), SqlType::TinyInt),
            ("gid".to_string(), SqlType::Int),
        ]
    );
}

/// Proves CUBE (g, h) and WITH CUBE: every subset of the keys, including the groups by h
/// alone, whose rows come from a second sort of the same spooled input.
#[test]
fn cube_groups_by_every_subset() {
    let (_s, mut c) = setup("gs-cube");
    let want = strs(&[
        "NULL,1,1,0",
        "a,1,10,0",
        "a,2,50,0",
        "b,NULL,7,0",
        "b,1,5,0",
        "NULL,NULL,1,1",
        "a,NULL,60,1",
        "b,NULL,12,1",
        "NULL,NULL,7,2",
        "NULL,1,16,2",
        "NULL,2,50,2",
        "NULL,NULL,73,3",
    ]);
    let order = "ORDER BY GROUPING_ID(g, h), g, h";
    assert_eq!(
        table(
            &mut c,
            &format!("SELECT g, h, SUM(v), GROUPING_ID(g, h) FROM s GROUP BY CUBE (g, h) {order}")
        ),
        want
    );
    assert_eq!(
        table(
            &mut c,
            &format!(
                "SELECT g, h, SUM(v), GROUPING_ID(g, h) FROM s GROUP BY g, h WITH CUBE {order}"
            )
        ),
        want
    );
    // GROUPING_ID with its arguments the other way round swaps the bits.
    assert_eq!(
        table(
            &mut c,
            "SELECT GROUPING_ID(h, g) FROM s GROUP BY CUBE (g, h) ORDER BY 1"
        ),
        strs(&["0", "0", "0", "0", "0", "1", "1", "1", "2", "2", "2", "3"])
    );
}

/// Proves GROUPING SETS: listed sets, `()`, duplicates (each group returned once per
/// copy, as SQL Server does), a set of two columns, a mix with a plain column (the cross
/// product), nested composites in ROLLUP, and `GROUP BY ()` alone.
#[test]
fn grouping_sets_duplicates_mixes_and_composites() {
    let (_s, mut c) = setup("gs-sets");
    assert_eq!(
        table(
            &mut c,
            "SELECT g, COUNT(*) FROM s GROUP BY GROUPING SETS ((g), (g), ())
             ORDER BY GROUPING(g), g"
        ),
        strs(&["NULL,1", "NULL,1", "a,3", "a,3", "b,2", "b,2", "NULL,6"])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT g, h, COUNT(*), GROUPING_ID(g, h) FROM s GROUP BY GROUPING SETS ((g, h), h)
             ORDER BY 4, g, h"
        ),
        strs(&[
            "NULL,1,1,0",
            "a,1,1,0",
            "a,2,2,0",
            "b,NULL,1,0",
            "b,1,1,0",
            "NULL,NULL,1,2",
            "NULL,1,3,2",
            "NULL,2,2,2",
        ])
    );
    // g, ROLLUP (h): the sets (g, h) and (g); no grand total.
    assert_eq!(
        table(
            &mut c,
            "SELECT g, h, SUM(v) FROM s GROUP BY g, ROLLUP (h) ORDER BY g, GROUPING(h), h"
        ),
        strs(&[
            "NULL,1,1",
            "NULL,NULL,1",
            "a,1,10",
            "a,2,50",
            "a,NULL,60",
            "b,NULL,7",
            "b,1,5",
            "b,NULL,12",
        ])
    );
    // ROLLUP ((g, h), id % 2): (g, h, id % 2), (g, h), ().
    assert_eq!(
        table(
            &mut c,
            "SELECT COUNT(*), GROUPING(g), GROUPING(h) FROM s GROUP BY ROLLUP ((g, h), id % 2)
             ORDER BY 2, 3, 1"
        )
        .len(),
        6 + 5 + 1
    );
    assert_eq!(
        table(&mut c, "SELECT COUNT(*), SUM(v) FROM s GROUP BY ()"),
        strs(&["6,73"])
    );
    // Under a plain GROUP BY, GROUPING is 0.
    assert_eq!(
        table(&mut c, "SELECT g, GROUPING(g) FROM s GROUP BY g ORDER BY g"),
        strs(&["NULL,0", "a,0", "b,0"])
    );
}

/// Proves HAVING filters every set's rows (on aggregates and on GROUPING), ORDER BY sorts
/// the whole, DISTINCT aggregates are computed per set, a computed grouping expression
/// groups and is NULL where aggregated away, and TOP takes from the whole.
#[test]
fn having_order_distinct_and_computed_keys() {
    let (_s, mut c) = setup("gs-having");
    assert_eq!(
        table(
            &mut c,
            "SELECT g, h, SUM(v) FROM s GROUP BY ROLLUP (g, h) HAVING SUM(v) > 20
             ORDER BY SUM(v) DESC"
        ),
        strs(&["NULL,NULL,73", "a,NULL,60", "a,2,50"])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT g, SUM(v) FROM s GROUP BY ROLLUP (g, h) HAVING GROUPING(h) = 1
             ORDER BY GROUPING(g), g"
        ),
        strs(&["NULL,1", "a,60", "b,12", "NULL,73"])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT g, COUNT(DISTINCT h), COUNT(h), SUM(DISTINCT v % 10) FROM s
             GROUP BY ROLLUP (g) ORDER BY GROUPING(g), g"
        ),
        strs(&["NULL,1,1,1", "a,2,3,0", "b,1,1,12", "NULL,2,5,13"])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT v % 2 AS odd, COUNT(*) FROM s GROUP BY ROLLUP (v % 2)
             ORDER BY GROUPING(v % 2), odd"
        ),
        strs(&["0,3", "1,3", "NULL,6"])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT TOP (2) g, COUNT(*) FROM s GROUP BY CUBE (g) ORDER BY COUNT(*) DESC, g"
        ),
        strs(&["NULL,6", "a,3"])
    );
    // A window function over the groups of every set.
    assert_eq!(
        table(
            &mut c,
            "SELECT g, SUM(v), RANK() OVER (ORDER BY SUM(v)) FROM s GROUP BY ROLLUP (g)
             ORDER BY GROUPING(g), g"
        ),
        strs(&["NULL,1,1", "a,60,3", "b,12,2", "NULL,73,4"])
    );
    // Over a join and a derived table; y.g is not the grouped x.g (8120, under a plain
    // GROUP BY too: it was taken for x.g by its name alone).
    for by in ["ROLLUP (x.g)", "x.g"] {
        let sql = format!("SELECT y.g FROM s AS x JOIN s AS y ON x.id = y.id GROUP BY {by}");
        let got = c.batch(&sql).unwrap();
        let got: Vec<(i32, String)> = got.errors().map(|e| (e.number, e.text.clone())).collect();
        assert_eq!(
            got,
            vec![(
                8120,
                "Column 'y.g' is invalid in the select list because it is not contained in \
                 either an aggregate function or the GROUP BY clause."
                    .to_string()
            )],
            "{sql}"
        );
    }
    assert_eq!(
        table(
            &mut c,
            "SELECT x.g, COUNT(*) FROM s AS x JOIN s AS y ON x.id = y.id
             GROUP BY ROLLUP (x.g) ORDER BY GROUPING(x.g), x.g"
        ),
        strs(&["NULL,1", "a,3", "b,2", "NULL,6"])
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT k, COUNT(*) FROM (SELECT g AS k FROM s) AS d
             GROUP BY GROUPING SETS (k, ()) ORDER BY GROUPING(k), k"
        ),
        strs(&["NULL,1", "a,3", "b,2", "NULL,6"])
    );
}

/// Proves the grand total over no rows: a set of no expressions gives one row (COUNT 0,
/// SUM NULL), other sets none, as SQL Server does.
#[test]
fn an_empty_table_gives_only_the_grand_total() {
    let (_s, mut c) = setup("gs-empty");
    for sql in [
        "SELECT COUNT(*), SUM(v), GROUPING(g) FROM e GROUP BY ROLLUP (g)",
        "SELECT COUNT(*), SUM(v), GROUPING(g) FROM e GROUP BY CUBE (g, h)",
        "SELECT COUNT(*), SUM(v), 1 FROM e GROUP BY ()",
        "SELECT COUNT(*), SUM(v), GROUPING(g) FROM e GROUP BY GROUPING SETS ((g), ())",
    ] {
        assert_eq!(table(&mut c, sql), strs(&["0,NULL,1"]), "{sql}");
    }
    assert!(table(
        &mut c,
        "SELECT COUNT(*) FROM e GROUP BY GROUPING SETS ((g), (h))"
    )
    .is_empty());
    assert!(table(
        &mut c,
        "SELECT COUNT(*) FROM s WHERE v > 100 GROUP BY g, ROLLUP (h)"
    )
    .is_empty());
}

/// Proves SQL Server's messages for each misuse, none of which returns rows: GROUPING
/// without GROUP BY (8160), an argument not grouped (8161, naming its position and the
/// function), GROUPING in WHERE (147), a column neither grouped nor aggregated (8120),
/// GROUPING with two arguments (174), WITH ROLLUP beside ROLLUP (10703), too many sets
/// (10705) and expressions (10707), a composite outside GROUPING SETS (102), GROUPING in
/// an aggregate (130); a subquery beside grouping sets is refused as not built (40517).
#[test]
fn misuses_get_sql_servers_messages() {
    let (_s, mut c) = setup("gs-errors");
    let cube13 = (0..13)
        .map(|i| format!("v + {i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let many = (0..33)
        .map(|i| format!("v + {i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let cube_sql = format!("SELECT COUNT(*) FROM s GROUP BY CUBE ({cube13})");
    let many_sql = format!("SELECT COUNT(*) FROM s GROUP BY ROLLUP ({many})");
    let refused: Vec<(&str, (i32, u8))> =
        vec![
        ("SELECT GROUPING(g) FROM s", (8160, 15)),
        ("SELECT COUNT(*), GROUPING(g) FROM s", (8160, 15)),
        (
            "SELECT g, GROUPING(v) FROM s GROUP BY ROLLUP (g)",
            (8161, 15),
        ),
        (
            "SELECT g, GROUPING_ID(g, v) FROM s GROUP BY ROLLUP (g)",
            (8161, 15),
        ),
        (
            "SELECT g FROM s WHERE GROUPING(g) = 0 GROUP BY ROLLUP (g)",
            (147, 15),
        ),
        ("SELECT g, v FROM s GROUP BY ROLLUP (g)", (8120, 16)),
        (
            "SELECT GROUPING(g, h) FROM s GROUP BY CUBE (g, h)",
            (174, 15),
        ),
        ("SELECT g FROM s GROUP BY ROLLUP (g) WITH CUBE", (10703, 15)),
        (cube_sql.as_str(), (10705, 15)),
        (many_sql.as_str(), (10707, 15)),
        ("SELECT COUNT(*) FROM s GROUP BY g, (g, h)", (102, 15)),
        ("SELECT g, SUM(GROUPING(g)) FROM s GROUP BY ROLLUP (g)", (130, 16)),
        // A subquery would read the group's first row where the set makes g NULL.
        (
            "SELECT g, (SELECT COUNT(*) FROM s AS y WHERE y.g = s.g) FROM s GROUP BY ROLLUP (g)",
            (40517, 16),
        ),
        (
            "SELECT COUNT(*) FROM s GROUP BY ROLLUP (g) HAVING g IN (SELECT g FROM s)",
            (40517, 16),
        ),
    ];
    for (sql, want) in refused {
        let got: Vec<(i32, u8)> = errors(&mut c, sql).iter().map(|e| (e.0, e.1)).collect();
        assert_eq!(got, vec![want], "{sql}");
    }
    let text = c
        .batch("SELECT g, GROUPING_ID(g, v) FROM s GROUP BY ROLLUP (g)")
        .unwrap()
        .errors()
        .next()
        .map(|e| e.text.clone())
        .unwrap();
    assert_eq!(
        text,
        "Argument 2 of the GROUPING_ID function does not match any of the expressions in the GROUP BY clause."
    );
    // 12 expressions in a CUBE make 4,096 sets: within the limit.
    let cube12 = (0..12)
        .map(|i| format!("v + {i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let r = all_rows(&run(
        &mut c,
        &format!("SELECT COUNT(*) FROM e GROUP BY CUBE ({cube12})"),
    ));
    assert_eq!(r.len(), 1);
}

/// Proves an input larger than a sort's memory (8 MB): 3,000 rows of 4 KB (12 MB) are
/// spooled and sorted through spilled runs for each of CUBE's chains (and for ROLLUP's
/// one chain sorted directly), and every set still counts every row.
#[test]
fn an_input_larger_than_memory_spills() {
    let (_s, mut c) = setup("gs-spill");
    run(
        &mut c,
        "CREATE TABLE big (id INT PRIMARY KEY, grp INT, sub INT, pad VARCHAR(4000))",
    );
    for chunk in 0..30 {
        let values: Vec<String> = (0..100)
            .map(|i| {
                let id = chunk * 100 + i;
                format!("({id}, {}, {}, REPLICATE('p', 4000))", id % 3, id % 5)
            })
            .collect();
        run(
            &mut c,
            &format!("INSERT INTO big VALUES {}", values.join(",")),
        );
    }
    let got = table(
        &mut c,
        "SELECT GROUPING_ID(grp, sub), COUNT(*), COUNT(pad), SUM(id), MIN(id) FROM big
         GROUP BY CUBE (grp, sub) ORDER BY 1, grp, sub",
    );
    // 15 detail groups of 200, 3 of 1,000, 5 of 600, the total.
    assert_eq!(got.len(), 15 + 3 + 5 + 1, "{got:?}");
    let counts: Vec<(i64, i64)> = got
        .iter()
        .map(|r| {
            let f: Vec<i64> = r.split(',').map(|x| x.parse().unwrap()).collect();
            assert_eq!(f[1], f[2], "{r}");
            (f[0], f[1])
        })
        .collect();
    for (gid, want) in [(0, 200), (1, 1000), (2, 600), (3, 3000)] {
        assert!(
            counts.iter().filter(|c| c.0 == gid).all(|c| c.1 == want),
            "{gid}: {counts:?}"
        );
    }
    assert_eq!(
        got.last().unwrap(),
        &format!("3,3000,3000,{},0", 3000 * 2999 / 2)
    );
    // A ROLLUP is one chain: the input goes straight into its one sort, which spills.
    let got = table(
        &mut c,
        "SELECT GROUPING_ID(grp, sub), COUNT(*), COUNT(pad) FROM big
         GROUP BY ROLLUP (grp, sub) ORDER BY 1, grp, sub",
    );
    assert_eq!(got.len(), 15 + 3 + 1, "{got:?}");
    assert_eq!(got[0], "0,200,200");
    assert_eq!(got[15], "1,1000,1000");
    assert_eq!(got[18], "3,3000,3000");
}

/// Proves grouping sets run beside writers: two sessions insert rows in transactions
/// while three compute a CUBE; in every answer the detail groups, the groups by each
/// key alone and the grand total count the same rows (one read of the table shared by
/// all sets, though CUBE sorts it twice).
#[test]
fn sessions_cube_beside_inserting_sessions() {
    let (s, mut c) = setup("gs-concurrent");
    run(
        &mut c,
        "CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT, val INT);
         INSERT INTO t VALUES (-1, 0, 0, 1)",
    );
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..2i64 {
        let (addr, stop) = (s.addr.clone(), stop.clone());
        writers.push(std::thread::spawn(move || {
            let mut c = connect_at(&addr, Some("gs"), 60).unwrap();
            let mut n = 0i64;
            while !stop.load(Ordering::Relaxed) {
                let rows: Vec<String> = (0..5)
                    .map(|k| {
                        let id = w * 1_000_000 + n * 5 + k;
                        format!("({id}, {}, {}, {})", id % 4, id % 3, id % 7)
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
    let check = "SELECT GROUPING_ID(a, b), COUNT(*), SUM(val) FROM t GROUP BY CUBE (a, b)";
    let mut readers = Vec::new();
    for _ in 0..3 {
        let (addr, stop) = (s.addr.clone(), stop.clone());
        readers.push(std::thread::spawn(move || {
            let mut c = connect_at(&addr, Some("gs"), 60).unwrap();
            let mut checks = 0;
            while !stop.load(Ordering::Relaxed) || checks < 5 {
                let r = c.batch(check).unwrap();
                if r.errors().any(|e| e.number == 1205) {
                    continue;
                }
                let mut totals = [(0i64, 0i64); 4];
                for row in all_rows(&r) {
                    let gid = int(&row[0]) as usize;
                    totals[gid].0 += int(&row[1]);
                    totals[gid].1 += int(&row[2]);
                }
                assert!(totals.iter().all(|t| *t == totals[3]), "{totals:?}");
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
        table(
            &mut c,
            "SELECT COUNT(*) FROM t GROUP BY ROLLUP (a) HAVING GROUPING(a) = 1"
        ),
        vec![format!("{}", inserted * 5 + 1)]
    );
}
