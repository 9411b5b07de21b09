//! Indexes on computed columns that are not PERSISTED (storage's computed_values.rs and
//! index.rs invariant 9, the SQL layer's computed_columns.rs invariant 4) through real TDS
//! sessions: the index record holds a value no base record stores, computed from the row
//! by every projection; INSERT, UPDATE, DELETE and MERGE keep it from several sessions at
//! once; a WHERE naming the column seeks through it and finds what a scan finds; CHECKDB
//! compares it with the table; a kill -9 under load leaves it equal to the table; a
//! UNIQUE one refuses a duplicate computed value (1505, 2601); SQL Server's refusals of
//! non-deterministic (2729) and imprecise (2799) columns.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use extentdb_tds::client::Client;

mod common;
use common::tds::{
    all_rows, assert_checkdb_clean, connect_at, errors, restart, run, scans_and_reads,
    start_in_database, table,
};

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

/// The ids `pred` selects from `t` through a seek, asserted equal to those the same
/// predicate made opaque to seeks (NOT (NOT ...)) selects by a scan; with SET STATISTICS
/// IO on, the seek reads at most `most` pages where the scan reads more than `least`.
fn seek_equals_scan(c: &mut Client, t: &str, pred: &str, (most, least): (u64, u64)) -> usize {
    run(c, "SET STATISTICS IO ON");
    let seek = run(c, &format!("SELECT id FROM {t} WHERE {pred} ORDER BY id"));
    let scan = run(
        c,
        &format!("SELECT id FROM {t} WHERE NOT (NOT ({pred})) ORDER BY id"),
    );
    run(c, "SET STATISTICS IO OFF");
    assert_eq!(all_rows(&seek), all_rows(&scan), "{pred}");
    let (seek_reads, scan_reads) = (scans_and_reads(&seek)[0].1, scans_and_reads(&scan)[0].1);
    assert!(
        seek_reads <= most,
        "{pred}: the seek read {seek_reads} pages"
    );
    assert!(
        scan_reads > least,
        "{pred}: the scan read {scan_reads} pages"
    );
    all_rows(&seek).len()
}

/// Proves an index on a column that is not PERSISTED (as the key, and as an INCLUDE
/// column of another) is built from the table's 5,000 rows with values computed from
/// them, sought through by a WHERE naming the column (a handful of pages, where the same
/// predicate made opaque reads the table, with the same rows), and kept by UPDATE of a
/// column the definition reads, DELETE, INSERT and MERGE; CHECKDB, which computes every
/// row's index record again, finds it equal to the table, also after ALTER INDEX REBUILD
/// and a DISABLE and REBUILD (which computes the values from the rows again).
#[test]
fn index_on_a_non_persisted_column_is_kept_and_sought() {
    let (_s, mut c) = start_in_database(
        "ci-index",
        "cidb",
        "CREATE TABLE p (id INT PRIMARY KEY, a INT, b INT, total AS a * 10000 + b, \
            pad CHAR(200)); SET NOCOUNT ON; DECLARE @i INT = 0; BEGIN TRAN; \
         WHILE @i < 5000 BEGIN INSERT INTO p (id, a, b, pad) VALUES (@i, @i % 500, @i % 7, 'p'); \
            SET @i += 1; END; COMMIT; \
         CREATE INDEX ix_total ON p (total); CREATE INDEX ix_a ON p (a) INCLUDE (total)",
    );
    for ix in ["ix_total", "ix_a"] {
        let (n, rows) = index_and_table_rows(&mut c, "p", ix);
        assert_eq!((n.as_str(), rows.as_str()), ("5000", "5000"), "{ix}");
    }
    assert_eq!(
        table(
            &mut c,
            "SELECT is_persisted FROM sys.computed_columns WHERE name = 'total'"
        ),
        ["0"]
    );
    // total = a * 10000 + b: 170003 is a = 17 and b = 3 (ids 17 and 3517).
    let n = seek_equals_scan(&mut c, "p", "total = 170003", (40, 100));
    assert_eq!(n, 2);
    assert_eq!(
        seek_equals_scan(&mut c, "p", "total BETWEEN 170000 AND 170006", (40, 100)),
        10
    );
    // UPDATE of a source column moves the row's index record; DELETE removes it.
    run(&mut c, "UPDATE p SET b = b + 1000 WHERE a = 17");
    assert_eq!(
        seek_equals_scan(&mut c, "p", "total = 170003", (40, 100)),
        0
    );
    assert_eq!(
        seek_equals_scan(&mut c, "p", "total = 171003", (40, 100)),
        n
    );
    // An UPDATE of a column the definition does not read leaves the index record.
    run(&mut c, "UPDATE p SET pad = 'q' WHERE a = 17");
    assert_eq!(
        seek_equals_scan(&mut c, "p", "total = 171003", (40, 100)),
        n
    );
    run(&mut c, "DELETE FROM p WHERE total = 171003 AND id < 2500");
    assert_eq!(
        seek_equals_scan(&mut c, "p", "total = 171003", (40, 100)),
        1
    );
    run(
        &mut c,
        "INSERT INTO p (id, a, b, pad) VALUES (9000, 17, 1003, 'n')",
    );
    assert_eq!(
        seek_equals_scan(&mut c, "p", "total = 171003", (40, 100)),
        2
    );
    // MERGE: an update of a source column, an insert and a delete in one statement.
    run(
        &mut c,
        "MERGE p AS t USING (VALUES (9000, 18), (9001, 18), (3517, NULL)) AS s (id, a) \
         ON t.id = s.id \
         WHEN MATCHED AND s.a IS NULL THEN DELETE \
         WHEN MATCHED THEN UPDATE SET a = s.a \
         WHEN NOT MATCHED THEN INSERT (id, a, b, pad) VALUES (s.id, s.a, 1003, 'm');",
    );
    assert_eq!(
        seek_equals_scan(&mut c, "p", "total = 171003", (40, 100)),
        0
    );
    assert_eq!(
        table(&mut c, "SELECT id FROM p WHERE total = 181003 ORDER BY id"),
        ["9000", "9001"]
    );
    for ix in ["ix_total", "ix_a"] {
        let (n, rows) = index_and_table_rows(&mut c, "p", ix);
        assert_eq!(n, rows, "{ix}");
    }
    assert_checkdb_clean(&mut c, "cidb", "after changes through the index");
    // A rebuild copies the old leaves; a disabled index's rebuild computes every row again.
    run(&mut c, "ALTER INDEX ix_total ON p REBUILD");
    run(&mut c, "ALTER INDEX ix_a ON p DISABLE");
    run(&mut c, "ALTER INDEX ix_a ON p REBUILD");
    assert_eq!(
        seek_equals_scan(&mut c, "p", "total = 181003", (40, 100)),
        2
    );
    assert_checkdb_clean(&mut c, "cidb", "after the rebuilds");
    // A variable's value seeks as a constant does.
    run(&mut c, "SET STATISTICS IO ON");
    let r = run(
        &mut c,
        "DECLARE @p INT = 181003; SELECT id FROM p WHERE total = @p ORDER BY id",
    );
    run(&mut c, "SET STATISTICS IO OFF");
    assert_eq!(all_rows(&r).len(), 2);
    let reads = scans_and_reads(&r)[0].1;
    assert!(reads <= 40, "WHERE total = @p read {reads} pages");
}

/// Proves SQL Server's rules for a computed column in an index: one not PERSISTED over a
/// non-deterministic function is refused as a key and as an INCLUDE column (2729); one
/// that is imprecise (a float anywhere in it) is refused as a key (2799) but taken as an
/// INCLUDE column, and as a key once PERSISTED; each refusal makes no index.
#[test]
fn non_deterministic_and_imprecise_columns_are_refused() {
    let (_s, mut c) = start_in_database(
        "ci-refuse",
        "cidb",
        "CREATE TABLE r (id INT PRIMARY KEY, a INT, now_ AS GETDATE(), \
            f AS CAST(a AS FLOAT) * 2, g AS CAST(CAST(a AS REAL) AS INT), \
            fp AS CAST(a AS FLOAT) * 2 PERSISTED, ok AS a % 7); \
         INSERT r (id, a) VALUES (1, 10), (2, 20)",
    );
    let cases = [
        ("CREATE INDEX i1 ON r (now_)", 2729),
        ("CREATE INDEX i2 ON r (a) INCLUDE (now_)", 2729),
        ("CREATE INDEX i3 ON r (f)", 2799),
        ("CREATE INDEX i4 ON r (ok, g)", 2799),
    ];
    for (sql, number) in cases {
        assert_eq!(errors(&mut c, sql), [(number, 16, 1)], "{sql}");
    }
    assert_eq!(
        table(
            &mut c,
            "SELECT COUNT(*) FROM sys.indexes WHERE object_id = OBJECT_ID('r') AND index_id > 1"
        ),
        ["0"]
    );
    run(&mut c, "CREATE INDEX i5 ON r (a) INCLUDE (f)");
    run(&mut c, "CREATE INDEX i6 ON r (fp)");
    run(&mut c, "CREATE INDEX i7 ON r (ok)");
    assert_eq!(table(&mut c, "SELECT id FROM r WHERE ok = 6"), ["2"]);
    assert_eq!(table(&mut c, "SELECT f FROM r WHERE a = 10"), ["20"]);
    assert_checkdb_clean(&mut c, "cidb", "after the refusals");
}

/// One worker's statements: inserts of its own ids, updates of a column the definition
/// reads (in transactions committed or rolled back), deletes and MERGEs, on table `t`.
fn work(c: &mut Client, t: &str, w: i64, i: i64) -> bool {
    let id = w * 1_000_000 + i;
    let sql = format!(
        "INSERT INTO {t} (id, a, b, pad) VALUES ({id}, {i} % 50, {w}, REPLICATE('x', {i} % 300)); \
         UPDATE {t} SET a = a + 1 WHERE id = {id} - 3; \
         DELETE FROM {t} WHERE id = {id} - 9; \
         MERGE {t} AS d USING (VALUES ({id} - 5, {i} % 13)) AS s (id, b) ON d.id = s.id \
            WHEN MATCHED THEN UPDATE SET b = s.b \
            WHEN NOT MATCHED THEN INSERT (id, a, b, pad) VALUES (s.id, 1, s.b, 'm'); \
         BEGIN TRAN; UPDATE {t} SET b = b + 10 WHERE id = {id} - 1"
    );
    if c.batch(&sql).is_err() {
        return false;
    }
    c.batch(if i % 2 == 0 { "COMMIT" } else { "ROLLBACK" })
        .is_ok()
}

/// The table the concurrent tests share: `v` computed, not PERSISTED, indexed.
const SHARED: &str = "CREATE TABLE k (id INT PRIMARY KEY, a INT, b INT, v AS a * 3 + b, \
    pad VARCHAR(300)); CREATE INDEX ix_v ON k (v); CREATE INDEX ix_b ON k (b) INCLUDE (v)";

/// Asserts the index on `k.v` equal to the table: as many rows, CHECKDB clean, and each
/// value sought finding what a scan finds.
fn assert_index_equals_table(c: &mut Client, when: &str) {
    assert_checkdb_clean(c, "cidb", when);
    for ix in ["ix_v", "ix_b"] {
        let (n, rows) = index_and_table_rows(c, "k", ix);
        assert_eq!(n, rows, "{when}: {ix}");
        assert_ne!(rows, "0", "{when}: the load wrote rows");
    }
    for v in (0..200).step_by(7) {
        let pred = format!("v = {v}");
        let seek = table(c, &format!("SELECT id FROM k WHERE {pred} ORDER BY id"));
        let scan = table(
            c,
            &format!("SELECT id FROM k WHERE NOT (NOT ({pred})) ORDER BY id"),
        );
        assert_eq!(seek, scan, "{when}: {pred}");
    }
}

/// Proves four sessions inserting, updating (a column the definition reads, committed
/// and rolled back), deleting and merging rows of one table at once keep its index on a
/// column that is not PERSISTED equal to the table: CHECKDB clean, the same row counts,
/// every value sought finding the rows a scan finds.
#[test]
fn sessions_keep_the_index_together() {
    let (s, mut c) = start_in_database("ci-sessions", "cidb", SHARED);
    let workers: Vec<_> = (0..4i64)
        .map(|w| {
            let addr = s.addr.clone();
            thread::spawn(move || {
                let mut c = connect_at(&addr, Some("cidb"), 60).expect("a session");
                for i in 0..150 {
                    assert!(work(&mut c, "k", w, i), "worker {w} step {i}");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a worker");
    }
    assert_index_equals_table(&mut c, "after the sessions");
}

/// Proves a kill -9 while four sessions write (as `sessions_keep_the_index_together`,
/// some transactions left open) leaves, after recovery, the index on a column that is not
/// PERSISTED equal to the table.
#[test]
fn kill_9_under_load_leaves_the_index_exact() {
    let (s, _setup) = start_in_database("ci-kill9", "cidb", SHARED);
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..4i64)
        .map(|w| {
            let (addr, stop) = (s.addr.clone(), stop.clone());
            thread::spawn(move || {
                let Ok(mut c) = connect_at(&addr, Some("cidb"), 60) else {
                    return;
                };
                let mut i = 0i64;
                while !stop.load(Ordering::Relaxed) && work(&mut c, "k", w, i) {
                    i += 1;
                }
            })
        })
        .collect();
    thread::sleep(std::time::Duration::from_millis(1500));
    let s = restart(s);
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let _ = w.join();
    }
    let mut c = s.connect_to(Some("cidb"));
    assert_index_equals_table(&mut c, "after the kill");
}

/// Proves a UNIQUE index on a column that is not PERSISTED enforces its computed values
/// across sessions: CREATE UNIQUE INDEX over duplicate values is 1505 and makes no index;
/// once the duplicate is gone it is made, and then another session's INSERT or UPDATE of
/// a source column giving a value already there is 2601 (the computed value in the
/// message) and changes nothing, while values not there go in.
#[test]
fn a_unique_index_on_a_computed_column_holds_across_sessions() {
    let (s, mut c) = start_in_database(
        "ci-unique",
        "cidb",
        "CREATE TABLE u (id INT PRIMARY KEY, a INT, b INT, code AS a * 100 + b); \
         INSERT u (id, a, b) VALUES (1, 1, 1), (2, 1, 2), (3, 0, 101)",
    );
    let e = errors(&mut c, "CREATE UNIQUE INDEX ux ON u (code)");
    assert_eq!(e.first().map(|e| e.0), Some(1505), "{e:?}");
    assert_eq!(
        table(&mut c, "SELECT COUNT(*) FROM sys.indexes WHERE name = 'ux'"),
        ["0"]
    );
    run(&mut c, "DELETE FROM u WHERE id = 3");
    run(&mut c, "CREATE UNIQUE INDEX ux ON u (code)");
    let mut other = s.connect_to(Some("cidb"));
    let r = other
        .batch("INSERT u (id, a, b) VALUES (4, 0, 102)")
        .unwrap();
    let e: Vec<_> = r.errors().map(|e| (e.number, e.text.clone())).collect();
    assert_eq!(e.first().map(|e| e.0), Some(2601), "{e:?}");
    assert!(
        e[0].1.ends_with("The duplicate key value is (102)."),
        "{e:?}"
    );
    assert_eq!(
        errors(&mut other, "UPDATE u SET b = 1 WHERE id = 2"),
        [(2601, 14, 1)]
    );
    run(&mut other, "INSERT u (id, a, b) VALUES (5, 2, 1)");
    assert_eq!(
        table(&mut c, "SELECT id, code FROM u ORDER BY id"),
        ["1,101", "2,102", "5,201"]
    );
    assert_eq!(table(&mut c, "SELECT id FROM u WHERE code = 201"), ["5"]);
    assert_checkdb_clean(&mut c, "cidb", "after the refusals");
}
