//! The statement texts both parsers are timed on: the OLTP statements of
//! `bench/wire/`'s concurrency family as go-mssqldb sends them (parameters `@p1`, ...), a
//! 64 KB multi-row INSERT batch, and a query with a CTE, a join and a subquery.

/// A named statement text.
pub struct Statement {
    pub name: &'static str,
    pub text: String,
}

/// Rows in the multi-row INSERT: SQL Server's limit for one VALUES list (Msg 10738).
const VALUES_ROWS: usize = 1000;

pub fn all() -> Vec<Statement> {
    vec![
        named("point_select", "SELECT x, pad FROM kv WHERE k = @p1"),
        named(
            "insert_1_row",
            "INSERT INTO ins (k, x, pad) VALUES (@p1, @p2, @p3)",
        ),
        named("update_by_key", "UPDATE kv SET x = x + 1 WHERE k = @p1"),
        named("tpcb_batch", TPCB),
        Statement {
            name: "insert_64kb_batch",
            text: insert_64kb(),
        },
        named("cte_join_subquery", CTE_JOIN),
    ]
}

fn named(name: &'static str, text: &str) -> Statement {
    Statement {
        name,
        text: text.to_string(),
    }
}

/// pgbench's TPC-B-like transaction, as `bench/wire/concurrency.go` sends it.
const TPCB: &str = "BEGIN TRANSACTION; \
UPDATE tpcb_accounts SET abalance = abalance + @p1 WHERE aid = @p2; \
SELECT abalance FROM tpcb_accounts WHERE aid = @p2; \
UPDATE tpcb_tellers SET tbalance = tbalance + @p1 WHERE tid = @p3; \
UPDATE tpcb_branches SET bbalance = bbalance + @p1 WHERE bid = @p4; \
INSERT INTO tpcb_history (tid, bid, aid, delta, mtime) VALUES (@p3, @p4, @p2, @p1, CURRENT_TIMESTAMP); \
COMMIT TRANSACTION;";

const CTE_JOIN: &str =
    "WITH recent AS (SELECT aid, SUM(delta) AS total FROM tpcb_history GROUP BY aid)
SELECT a.aid, a.abalance, r.total
FROM tpcb_accounts AS a
JOIN recent AS r ON r.aid = a.aid
WHERE a.bid IN (SELECT bid FROM tpcb_branches WHERE bbalance > 0)
ORDER BY a.aid";

/// One INSERT of 1,000 rows, about 64 KiB of text.
pub fn insert_64kb() -> String {
    let pad = "x".repeat(44);
    let rows: Vec<String> = (0..VALUES_ROWS)
        .map(|i| format!("({}, {}, '{pad}')", 100_000 + i, i % 97))
        .collect();
    let text = format!("INSERT INTO ins (k, x, pad) VALUES {}", rows.join(", "));
    assert!(
        (60 * 1024..70 * 1024).contains(&text.len()),
        "the batch is about 64 KiB: {}",
        text.len()
    );
    text
}
