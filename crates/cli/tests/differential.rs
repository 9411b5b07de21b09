//! Differential testing of the query processor against SQLite: a seeded generator makes
//! tables of small integers, short strings and NULLs, loads the same rows into a real
//! `extentdb serve` (over TDS) and into SQLite (Python's sqlite3, run as a child process),
//! then generates queries over joins of every kind, IN / EXISTS / scalar subqueries
//! (correlated or not), derived tables, CTEs (recursive too), APPLY (to SQLite a join or
//! correlated subqueries), PIVOT (aggregates of CASE with GROUP BY) and UNPIVOT (a UNION
//! ALL per column), UNION / INTERSECT / EXCEPT, grouping over
//! joins, OFFSET / FETCH windows and window functions (OVER: made total by a tie-break on
//! a unique key, or of functions ties cannot change), ROLLUP / CUBE / GROUPING SETS (to
//! SQLite the UNION ALL of one plain GROUP BY per set), each written in T-SQL and in
//! SQLite's dialect, and compares the result multisets (in order where ORDER BY decides it).
//!
//! A metamorphic oracle runs beside it on extentdb alone (ternary logic partitioning):
//! a join's rows are exactly the union of the rows WHERE p keeps, the rows WHERE NOT p
//! keeps, and the rows for which p is unknown.
//!
//! The data avoid what the two engines decide differently on purpose: strings are
//! lower-case (SQL Server's default collation ignores case, SQLite's does not), no
//! division, no AVG (integer in SQL Server, real in SQLite). XDB_DIFF_QUERIES sets how
//! many queries run (CI: the default; the nightly form: thousands), XDB_DIFF_SEED the seed.

use std::io::Write;
use std::process::{Command, Stdio};

use extentdb_sql::types::Value;
use extentdb_tds::client::Client;

mod common;
use common::tds::{connect_at, run, Server};

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// One generated query in both dialects; `ordered` when ORDER BY fixes the row order.
struct Case {
    tsql: String,
    sqlite: String,
    ordered: bool,
}

impl Case {
    fn same(sql: String) -> Case {
        Case {
            sqlite: sql.clone(),
            tsql: sql,
            ordered: false,
        }
    }
}

const TABLES: [&str; 3] = ["t1", "t2", "t3"];

/// The tables' definitions and rows: t1 and t2 heaps, t3 clustered on its key `a`.
fn schema(rng: &mut Rng) -> Vec<String> {
    let mut sql = vec![
        "CREATE TABLE t1 (a INT, b INT, s VARCHAR(5))".to_string(),
        "CREATE TABLE t2 (a INT, b INT, s VARCHAR(5))".to_string(),
        "CREATE TABLE t3 (a INT PRIMARY KEY, b INT, s VARCHAR(5))".to_string(),
    ];
    let int = |rng: &mut Rng| {
        if rng.chance(15) {
            "NULL".to_string()
        } else {
            rng.below(6).to_string()
        }
    };
    let text = |rng: &mut Rng| match rng.below(5) {
        0 => "NULL".to_string(),
        n => format!("'{}'", ["w", "x", "y", "z"][n - 1]),
    };
    for (t, n) in [("t1", 24), ("t2", 20), ("t3", 12)] {
        for i in 0..n {
            let a = if t == "t3" { i.to_string() } else { int(rng) };
            let (b, s) = (int(rng), text(rng));
            sql.push(format!("INSERT INTO {t} VALUES ({a}, {b}, {s})"));
        }
    }
    sql
}

/// A predicate over the columns of the tables named (each `t.a`, `t.b`, `t.s`).
fn predicate(rng: &mut Rng, tables: &[&str]) -> String {
    let t = tables[rng.below(tables.len())];
    let u = tables[rng.below(tables.len())];
    match rng.below(7) {
        0 => format!("{t}.a < {}", rng.below(6)),
        1 => format!("{t}.b = {}", rng.below(6)),
        2 => format!("{t}.s = '{}'", rng.pick(&["w", "x", "y"])),
        3 => format!("{t}.b IS NULL"),
        4 => format!("{t}.a = {u}.b"),
        5 => format!("({t}.a > {u}.b OR {t}.s IS NOT NULL)"),
        _ => format!("NOT ({t}.b >= {})", rng.below(6)),
    }
}

/// Two distinct tables.
fn two(rng: &mut Rng) -> (&'static str, &'static str) {
    let a = rng.below(3);
    let b = (a + 1 + rng.below(2)) % 3;
    (TABLES[a], TABLES[b])
}

fn join_case(rng: &mut Rng) -> Case {
    let (l, r) = two(rng);
    let kind = rng.pick(&["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "CROSS JOIN"]);
    let on = if kind == "CROSS JOIN" {
        String::new()
    } else {
        let mut on = format!(
            " ON {l}.{} = {r}.{}",
            rng.pick(&["a", "b"]),
            rng.pick(&["a", "b"])
        );
        if rng.chance(30) {
            on += &format!(" AND {}", predicate(rng, &[l, r]));
        }
        on
    };
    let filter = if rng.chance(50) {
        format!(" WHERE {}", predicate(rng, &[l, r]))
    } else {
        String::new()
    };
    Case::same(format!(
        "SELECT {l}.a, {l}.s, {r}.b, {r}.s FROM {l} {kind} {r}{on}{filter}"
    ))
}

fn three_way_case(rng: &mut Rng) -> Case {
    let kind = rng.pick(&["JOIN", "LEFT JOIN"]);
    Case::same(format!(
        "SELECT t1.a, t2.b, t3.s FROM t1 JOIN t2 ON t1.b = t2.a {kind} t3 ON t3.a = t2.b WHERE {}",
        predicate(rng, &["t1", "t2"])
    ))
}

fn in_case(rng: &mut Rng) -> Case {
    let (l, r) = two(rng);
    let not = if rng.chance(40) { "NOT " } else { "" };
    let inner_filter = if rng.chance(50) {
        format!(" WHERE {}", predicate(rng, &[r]))
    } else {
        String::new()
    };
    Case::same(format!(
        "SELECT a, b FROM {l} WHERE {l}.{} {not}IN (SELECT {r}.{} FROM {r}{inner_filter})",
        rng.pick(&["a", "b"]),
        rng.pick(&["a", "b"])
    ))
}

fn exists_case(rng: &mut Rng) -> Case {
    let (l, r) = two(rng);
    let not = if rng.chance(40) { "NOT " } else { "" };
    Case::same(format!(
        "SELECT {l}.a, {l}.s FROM {l} WHERE {not}EXISTS (SELECT 1 FROM {r} WHERE {r}.a = {l}.b AND {})",
        predicate(rng, &[r])
    ))
}

fn scalar_case(rng: &mut Rng) -> Case {
    let (l, r) = two(rng);
    let agg = rng.pick(&["COUNT(*)", "MAX(b)", "MIN(a)", "SUM(b)"]);
    let (inner_col, outer_col) = (rng.pick(&["a", "b"]), rng.pick(&["a", "b"]));
    Case::same(format!(
        "SELECT {l}.a, (SELECT {agg} FROM {r} WHERE {r}.{inner_col} = {l}.{outer_col}) FROM {l}"
    ))
}

fn derived_case(rng: &mut Rng) -> Case {
    let (l, r) = two(rng);
    Case::same(format!(
        "SELECT d.k, d.n, {r}.s FROM (SELECT b AS k, COUNT(*) AS n FROM {l} GROUP BY b) AS d \
         JOIN {r} ON {r}.a = d.k WHERE d.n > {}",
        rng.below(3)
    ))
}

fn cte_case(rng: &mut Rng) -> Case {
    let (l, r) = two(rng);
    Case::same(format!(
        "WITH c AS (SELECT a, b FROM {l} WHERE {}) SELECT c.a, {r}.s FROM c LEFT JOIN {r} ON c.b = {r}.b",
        predicate(rng, &[l])
    ))
}

fn set_case(rng: &mut Rng) -> Case {
    let (l, r) = two(rng);
    let op = rng.pick(&["UNION", "UNION ALL", "INTERSECT", "EXCEPT"]);
    Case::same(format!(
        "SELECT a, s FROM {l} WHERE {} {op} SELECT b, s FROM {r}",
        predicate(rng, &[l])
    ))
}

fn grouped_case(rng: &mut Rng) -> Case {
    let (l, r) = two(rng);
    Case::same(format!(
        "SELECT {l}.a, COUNT(*), SUM({r}.b), MAX({r}.s) FROM {l} JOIN {r} ON {l}.b = {r}.a GROUP BY {l}.a"
    ))
}

/// ROLLUP, CUBE, GROUPING SETS, a plain column beside ROLLUP, WITH ROLLUP / CUBE over one
/// table or a join; SQLite, which has none of them, gets the UNION ALL of one plain GROUP
/// BY per grouping set (the model below expands the sets itself), the keys outside a set
/// as NULL and GROUPING_ID as the set's literal bits.
fn grouping_sets_case(rng: &mut Rng) -> Case {
    let (l, r) = two(rng);
    let joined = rng.chance(40);
    let from = match joined {
        true => format!("{l} JOIN {r} ON {l}.b = {r}.a"),
        false => l.to_string(),
    };
    let mut columns = vec![format!("{l}.a"), format!("{l}.b"), format!("{l}.s")];
    if joined {
        columns.push(format!("{r}.s"));
    }
    let n = 1 + rng.below(3);
    let mut keys: Vec<String> = Vec::new();
    while keys.len() < n {
        let k = columns[rng.below(columns.len())].clone();
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let list = keys.join(", ");
    let all = (1usize << n) - 1;
    // Each set as a bit mask of the keys present, bit i for keys[i].
    let prefixes: Vec<usize> = (0..=n).rev().map(|k| (1 << k) - 1).collect();
    let (group_by, sets): (String, Vec<usize>) = match rng.below(6) {
        0 => (format!("ROLLUP ({list})"), prefixes),
        1 => (format!("CUBE ({list})"), (0..=all).rev().collect()),
        2 => (format!("{list} WITH ROLLUP"), prefixes),
        3 => (format!("{list} WITH CUBE"), (0..=all).rev().collect()),
        4 if n >= 2 => {
            let rest = keys[1..].join(", ");
            let sets = (0..n).rev().map(|k| ((1 << k) - 1) << 1 | 1).collect();
            (format!("{}, ROLLUP ({rest})", keys[0]), sets)
        }
        _ => {
            // Every key in some set: a select-list key grouped by none is 8120 (and in
            // GROUPING_ID 8161) in SQL Server as here.
            let mut sets: Vec<usize> = (0..rng.below(4)).map(|_| rng.below(all + 1)).collect();
            sets.insert(rng.below(sets.len() + 1), all);
            let text: Vec<String> = sets
                .iter()
                .map(|&m| {
                    let members: Vec<&str> = (0..n)
                        .filter(|i| m & (1 << i) != 0)
                        .map(|i| keys[i].as_str())
                        .collect();
                    format!("({})", members.join(", "))
                })
                .collect();
            (format!("GROUPING SETS ({})", text.join(", ")), sets)
        }
    };
    let filter = match rng.chance(50) {
        true => format!(" WHERE {}", predicate(rng, &[l])),
        false => String::new(),
    };
    let having = match rng.chance(30) {
        true => " HAVING COUNT(*) > 1",
        false => "",
    };
    let aggregates = format!("COUNT(*), SUM({l}.a), MAX({l}.s), COUNT(DISTINCT {l}.b)");
    let tsql = format!(
        "SELECT {list}, {aggregates}, GROUPING_ID({list}) FROM {from}{filter} GROUP BY {group_by}{having}"
    );
    let branches: Vec<String> = sets
        .iter()
        .map(|&m| {
            let shown: Vec<String> = (0..n)
                .map(|i| match m & (1 << i) != 0 {
                    true => keys[i].clone(),
                    false => "NULL".to_string(),
                })
                .collect();
            let bits = (0..n).fold(0, |acc, i| acc << 1 | usize::from(m & (1 << i) == 0));
            let by: Vec<&str> = (0..n)
                .filter(|i| m & (1 << i) != 0)
                .map(|i| keys[i].as_str())
                .collect();
            let group = match by.is_empty() {
                true => String::new(),
                false => format!(" GROUP BY {}", by.join(", ")),
            };
            format!(
                "SELECT {}, {aggregates}, {bits} FROM {from}{filter}{group}{having}",
                shown.join(", ")
            )
        })
        .collect();
    Case {
        tsql,
        sqlite: branches.join(" UNION ALL "),
        ordered: false,
    }
}

fn window_case(rng: &mut Rng) -> Case {
    let (l, r) = two(rng);
    let dir = rng.pick(&["", " DESC"]);
    let (skip, take) = (rng.below(8), 1 + rng.below(6));
    let base = format!(
        "SELECT {l}.a, {l}.b, {r}.s FROM {l} LEFT JOIN {r} ON {l}.a = {r}.b \
         ORDER BY {l}.a{dir}, {l}.b{dir}, {r}.s{dir}"
    );
    Case {
        tsql: format!("{base} OFFSET {skip} ROWS FETCH NEXT {take} ROWS ONLY"),
        sqlite: format!("{base} LIMIT {take} OFFSET {skip}"),
        ordered: true,
    }
}

/// A window function over t3, whose ORDER BY ends on the unique key `a` so that every
/// function (ROW_NUMBER, NTILE, LAG, LEAD, FIRST_VALUE, LAST_VALUE, aggregates over ROWS
/// and RANGE frames) has one answer in both engines.
fn over_total_case(rng: &mut Rng) -> Case {
    let f = rng.pick(&[
        "ROW_NUMBER()",
        "NTILE(3)",
        "NTILE(5)",
        "LAG(b)",
        "LAG(s, 2, 'q')",
        "LEAD(b, 1, -1)",
        "LEAD(s)",
        "FIRST_VALUE(b)",
        "LAST_VALUE(s)",
        "SUM(b)",
        "COUNT(b)",
        "COUNT(*)",
        "MIN(s)",
        "MAX(b)",
    ]);
    let framed = ["FIRST_VALUE", "LAST_VALUE", "SUM", "COUNT", "MIN", "MAX"]
        .iter()
        .any(|n| f.starts_with(n));
    let frame = if framed {
        rng.pick(&[
            "",
            " ROWS UNBOUNDED PRECEDING",
            " ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING",
            " ROWS BETWEEN 2 PRECEDING AND CURRENT ROW",
            " ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING",
            " ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING",
            " ROWS BETWEEN 1 FOLLOWING AND 3 FOLLOWING",
            " ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING",
            " RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING",
            " RANGE UNBOUNDED PRECEDING",
        ])
    } else {
        ""
    };
    let part = rng.pick(&["", "PARTITION BY b ", "PARTITION BY s "]);
    let key = rng.pick(&["b", "s", "b DESC", "s DESC"]);
    let dir = rng.pick(&["", " DESC"]);
    let filter = if rng.chance(40) {
        format!(" WHERE {}", predicate(rng, &["t3"]))
    } else {
        String::new()
    };
    Case::same(format!(
        "SELECT a, b, s, {f} OVER ({part}ORDER BY {key}, a{dir}{frame}) FROM t3{filter}"
    ))
}

/// Window functions whose answer ties cannot change (RANK, DENSE_RANK, aggregates over
/// RANGE frames or whole partitions), over a heap or a join of two, or beside GROUP BY,
/// or filtered through a derived table.
fn over_ties_case(rng: &mut Rng) -> Case {
    let (l, r) = two(rng);
    let f = rng.pick(&[
        "RANK() OVER (ORDER BY {l}.b)",
        "DENSE_RANK() OVER (PARTITION BY {l}.s ORDER BY {l}.b DESC)",
        "RANK() OVER (PARTITION BY {l}.a ORDER BY {l}.s DESC, {l}.b)",
        "COUNT(*) OVER (PARTITION BY {l}.b)",
        "SUM({l}.a) OVER (ORDER BY {l}.b)",
        "MAX({l}.s) OVER (PARTITION BY {l}.a ORDER BY {l}.b DESC)",
        "MIN({l}.b) OVER (ORDER BY {l}.s RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING)",
        "COUNT({l}.s) OVER (ORDER BY {l}.a RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)",
        "SUM({l}.b) OVER ()",
    ])
    .replace("{l}", l);
    match rng.below(4) {
        0 => Case::same(format!("SELECT {l}.a, {l}.b, {l}.s, {f} FROM {l}")),
        1 => Case::same(format!(
            "SELECT {l}.a, {r}.b, {f} FROM {l} JOIN {r} ON {l}.b = {r}.a"
        )),
        2 => Case::same(format!(
            "SELECT {l}.b, COUNT(*), SUM({l}.a), RANK() OVER (ORDER BY COUNT(*) DESC), \
             SUM(SUM({l}.a)) OVER (ORDER BY {l}.b), DENSE_RANK() OVER (ORDER BY MAX({l}.s)) \
             FROM {l} GROUP BY {l}.b"
        )),
        _ => {
            // MAX(s) is text: compared with text (SQL Server would convert 'x' to int: 245).
            let bound = match f.starts_with("MAX") {
                true => format!("'{}'", rng.pick(&["w", "x", "y"])),
                false => (1 + rng.below(4)).to_string(),
            };
            Case::same(format!(
                "SELECT x.a, x.b FROM (SELECT {l}.a, {l}.b, {f} AS w FROM {l}) AS x WHERE x.w <= {bound}"
            ))
        }
    }
}

/// A window function in ORDER BY, over t3 with a total order: the row order is compared.
fn over_order_case(rng: &mut Rng) -> Case {
    let key = rng.pick(&["b", "s", "b DESC", "s DESC"]);
    let f = rng.pick(&["ROW_NUMBER()", "SUM(b)", "COUNT(*)"]);
    Case {
        ordered: true,
        ..Case::same(format!(
            "SELECT a, b FROM t3 ORDER BY {f} OVER (ORDER BY {key}, a), a"
        ))
    }
}

/// Uncorrelated subqueries in each branch of a set operation (each branch is a copy the
/// executor makes and drops in turn).
fn branch_subquery_case(rng: &mut Rng) -> Case {
    let (l, r) = two(rng);
    let agg = |rng: &mut Rng| rng.pick(&["MAX(a)", "MIN(b)", "COUNT(*)", "SUM(a)"]);
    let (a1, a2) = (agg(rng), agg(rng));
    let (p1, p2) = (predicate(rng, &[l]), predicate(rng, &[r]));
    Case::same(format!(
        "SELECT (SELECT {a1} FROM {l} WHERE {p1}) UNION ALL SELECT (SELECT {a2} FROM {r} WHERE {p2})"
    ))
}

fn recursive_case(rng: &mut Rng) -> Case {
    let (start, depth) = (rng.below(12), 1 + rng.below(4));
    let body = format!(
        "r (a, d) AS (SELECT a, 0 FROM t3 WHERE a = {start} \
         UNION ALL SELECT t3.a, r.d + 1 FROM t3 JOIN r ON t3.b = r.a WHERE r.d < {depth}) \
         SELECT a, d FROM r"
    );
    Case {
        tsql: format!("WITH {body}"),
        sqlite: format!("WITH RECURSIVE {body}"),
        ordered: false,
    }
}

/// CROSS / OUTER APPLY of a correlated derived table; SQLite, which has no APPLY, gets
/// the JOIN / LEFT JOIN it equals, or for an aggregate per left row, correlated scalar
/// subqueries.
fn apply_case(rng: &mut Rng) -> Case {
    let (l, r) = two(rng);
    let (inner_col, outer_col) = (rng.pick(&["a", "b"]), rng.pick(&["a", "b"]));
    let on = format!("{r}.{inner_col} = {l}.{outer_col}");
    if rng.chance(30) {
        let agg = rng.pick(&["COUNT(*)", "MAX(b)", "MIN(s)", "SUM(a)"]);
        return Case {
            tsql: format!(
                "SELECT {l}.a, x.v FROM {l} CROSS APPLY (SELECT {agg} AS v FROM {r} WHERE {on}) x"
            ),
            sqlite: format!("SELECT {l}.a, (SELECT {agg} FROM {r} WHERE {on}) FROM {l}"),
            ordered: false,
        };
    }
    let pred = predicate(rng, &[l, r]);
    let (apply, join) = match rng.chance(50) {
        true => ("CROSS APPLY", "JOIN"),
        false => ("OUTER APPLY", "LEFT JOIN"),
    };
    Case {
        tsql: format!(
            "SELECT {l}.a, {l}.s, x.b, x.s FROM {l} {apply} \
             (SELECT {r}.b, {r}.s FROM {r} WHERE {on} AND {pred}) x"
        ),
        sqlite: format!("SELECT {l}.a, {l}.s, {r}.b, {r}.s FROM {l} {join} {r} ON {on} AND {pred}"),
        ordered: false,
    }
}

/// PIVOT over a derived table, grouped by one column or none; SQLite, which has no
/// PIVOT, gets the same aggregates of CASE expressions with GROUP BY.
fn pivot_case(rng: &mut Rng) -> Case {
    let l = TABLES[rng.below(3)];
    let agg = rng.pick(&["SUM", "COUNT", "MAX", "MIN"]);
    let group = rng.pick(&["a", ""]);
    let filter = predicate(rng, &[l]);
    let cells: Vec<String> = ["w", "x", "y"]
        .iter()
        .map(|v| format!("{agg}(CASE WHEN s = '{v}' THEN b END)"))
        .collect();
    let (src_group, keys, by) = match group {
        "" => (String::new(), String::new(), String::new()),
        g => (format!("{g}, "), format!("{g}, "), format!(" GROUP BY {g}")),
    };
    Case {
        tsql: format!(
            "SELECT * FROM (SELECT {src_group}s, b FROM {l} WHERE {filter}) AS src \
             PIVOT ({agg}(b) FOR s IN ([w], x, [y])) AS p"
        ),
        sqlite: format!(
            "SELECT {keys}{} FROM {l} WHERE {filter}{by}",
            cells.join(", ")
        ),
        ordered: false,
    }
}

/// UNPIVOT of two INT columns; SQLite gets the UNION ALL of each column's non-NULL rows.
fn unpivot_case(rng: &mut Rng) -> Case {
    let l = TABLES[rng.below(3)];
    let filter = predicate(rng, &[l]);
    Case {
        tsql: format!(
            "SELECT * FROM (SELECT s, a, b FROM {l} WHERE {filter}) AS src \
             UNPIVOT (v FOR col IN (a, b)) AS u"
        ),
        sqlite: format!(
            "SELECT s, a, 'a' FROM {l} WHERE ({filter}) AND a IS NOT NULL \
             UNION ALL SELECT s, b, 'b' FROM {l} WHERE ({filter}) AND b IS NOT NULL"
        ),
        ordered: false,
    }
}

fn generate(rng: &mut Rng) -> Case {
    let makers: [fn(&mut Rng) -> Case; 22] = [
        apply_case,
        pivot_case,
        unpivot_case,
        grouping_sets_case,
        grouping_sets_case,
        over_total_case,
        over_total_case,
        over_ties_case,
        over_order_case,
        recursive_case,
        branch_subquery_case,
        join_case,
        join_case,
        three_way_case,
        in_case,
        exists_case,
        scalar_case,
        derived_case,
        cte_case,
        set_case,
        grouped_case,
        window_case,
    ];
    makers[rng.below(makers.len())](rng)
}

/// SQLite's answers: each query's rows as text (NULL as "NULL"), or its error. The child
/// reads the setup statements, a line "--", then the queries, one per line; it answers
/// each with "OK n" and n row lines, or "ERR message".
fn sqlite_results(setup: &[String], queries: &[String]) -> Vec<Result<Vec<String>, String>> {
    let script = r#"
import sqlite3, sys
lines = sys.stdin.read().split("\n")
cut = lines.index("--")
db = sqlite3.connect(":memory:")
for s in lines[:cut]:
    db.execute(s)
for q in lines[cut + 1:]:
    if not q:
        continue
    try:
        rows = db.execute(q).fetchall()
        print("OK", len(rows))
        for r in rows:
            print(",".join("NULL" if v is None else str(v) for v in r))
    except Exception as e:
        print("ERR", str(e).replace("\n", " "))
"#;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs SQLite for the differential test (scripts/test.sh installs it)");
    let mut input = setup.join("\n");
    input.push_str("\n--\n");
    input.push_str(&queries.join("\n"));
    assert!(queries.iter().chain(setup).all(|q| !q.contains('\n')));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "sqlite3 failed");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let mut results = Vec::new();
    while let Some(head) = lines.next() {
        match head.split_once(' ') {
            Some(("OK", n)) => {
                let n: usize = n.parse().unwrap();
                results.push(Ok((0..n)
                    .map(|_| lines.next().unwrap().to_string())
                    .collect()));
            }
            _ => results.push(Err(head.to_string())),
        }
    }
    assert_eq!(results.len(), queries.len());
    results
}

fn show(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Int(n) => n.to_string(),
        Value::BigInt(n) => n.to_string(),
        Value::Text(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

/// extentdb's answer: the rows as text, or the first error.
fn extentdb_rows(c: &mut Client, sql: &str) -> Result<Vec<String>, String> {
    let r = c.batch(sql).map_err(|e| e.to_string())?;
    if let Some(e) = r.errors().next() {
        return Err(format!("Msg {}: {}", e.number, e.text));
    }
    Ok(common::tds::all_rows(&r)
        .into_iter()
        .map(|row| row.iter().map(show).collect::<Vec<_>>().join(","))
        .collect())
}

fn sorted(mut rows: Vec<String>) -> Vec<String> {
    rows.sort();
    rows
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Proves the query processor agrees with SQLite on generated data and queries, run by
/// three sessions at once, and with itself under predicate partitioning.
#[test]
fn generated_queries_agree_with_sqlite() {
    let count = env_number("XDB_DIFF_QUERIES", 300) as usize;
    let seed = env_number("XDB_DIFF_SEED", 0x5eed_d1ff);
    let mut rng = Rng(seed | 1);
    let setup = schema(&mut rng);
    let cases: Vec<Case> = (0..count).map(|_| generate(&mut rng)).collect();
    let expected = sqlite_results(
        &setup,
        &cases.iter().map(|c| c.sqlite.clone()).collect::<Vec<_>>(),
    );
    // The comparison means something only if most answers have rows.
    let with_rows = expected
        .iter()
        .filter(|r| r.as_ref().is_ok_and(|r| !r.is_empty()))
        .count();
    assert!(
        with_rows * 3 >= count * 2,
        "only {with_rows} of {count} queries return rows"
    );
    let s = Server::start("differential", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE d");
    run(&mut c, &format!("USE d; {}", setup.join(";\n")));
    let cases = std::sync::Arc::new(cases);
    let expected = std::sync::Arc::new(expected);
    let sessions: Vec<_> = (0..3)
        .map(|k| {
            let (addr, cases, expected) = (s.addr.clone(), cases.clone(), expected.clone());
            std::thread::spawn(move || {
                let mut c = connect_at(&addr, Some("d"), 60).unwrap();
                let mut failures = Vec::new();
                for i in (k..cases.len()).step_by(3) {
                    let case = &cases[i];
                    let want = expected[i]
                        .clone()
                        .map_err(|e| panic!("SQLite: {e}: {}", case.sqlite));
                    let got = extentdb_rows(&mut c, &case.tsql);
                    let (got, want) = match case.ordered {
                        true => (got, want.unwrap()),
                        false => (got.map(sorted), sorted(want.unwrap())),
                    };
                    if got.as_ref() != Ok(&want) {
                        failures.push(format!(
                            "{}\n  extentdb: {got:?}\n  sqlite:   {want:?}",
                            case.tsql
                        ));
                    }
                }
                failures
            })
        })
        .collect();
    let failures: Vec<String> = sessions
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {count} queries differ (seed {seed:#x}):\n{}",
        failures.len(),
        failures[..failures.len().min(10)].join("\n")
    );
    partitions_agree(&mut c, &mut rng, count / 3);
}

/// Ternary logic partitioning: for joins Q and predicates p, Q's rows are the rows of
/// Q WHERE p, Q WHERE NOT p and Q WHERE p is unknown, together.
fn partitions_agree(c: &mut Client, rng: &mut Rng, count: usize) {
    for _ in 0..count {
        let (l, r) = two(rng);
        let kind = rng.pick(&["JOIN", "LEFT JOIN", "FULL JOIN"]);
        let q = format!("SELECT {l}.a, {l}.s, {r}.b FROM {l} {kind} {r} ON {l}.b = {r}.a");
        let p = predicate(rng, &[l, r]);
        let whole = sorted(extentdb_rows(c, &q).unwrap());
        let mut parts = Vec::new();
        for part in [
            format!("{q} WHERE {p}"),
            format!("{q} WHERE NOT ({p})"),
            format!("{q} WHERE CASE WHEN {p} THEN 0 WHEN NOT ({p}) THEN 0 ELSE 1 END = 1"),
        ] {
            parts.extend(extentdb_rows(c, &part).unwrap_or_else(|e| panic!("{part}: {e}")));
        }
        assert_eq!(whole, sorted(parts), "partitions of {q} by {p}");
    }
}
