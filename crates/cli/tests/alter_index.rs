//! ALTER INDEX ... REBUILD / REORGANIZE (exec/alter_index.rs, storage's index.rs
//! invariant 5), sys.dm_db_index_physical_stats (exec/physical_stats.rs, storage's
//! physical_stats.rs) and DBCC CHECKTABLE (table, index_id), through real TDS sessions:
//! a rebuild keeps every row and makes a fragmented index compact, the DMV's numbers agree
//! with COUNT(*) and sp_spaceused, refusals carry SQL Server's numbers and change nothing,
//! a kill -9 during a rebuild leaves the old index or the new one whole, and sessions
//! writing and reading beside a rebuild lose nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use extentdb_tds::client::Client;

mod common;
use common::tds::{
    all_rows, assert_checkdb_clean, connect_at, int, numbers, restart, run, scans_and_reads, show,
    start_in_database, table, Server,
};

fn value(c: &mut Client, sql: &str) -> i64 {
    int(&all_rows(&run(c, sql))[0][0])
}

fn float(c: &mut Client, sql: &str) -> f64 {
    match &all_rows(&run(c, sql))[0][0] {
        extentdb_sql::types::Value::Float(f) => *f,
        other => panic!("not a float: {other:?}"),
    }
}

/// Rows of index `index` of table `t` (sys.partitions), and of the table itself.
fn index_and_table_rows(c: &mut Client, t: &str, index: &str) -> (i64, i64) {
    let ix = value(
        c,
        &format!(
            "SELECT p.rows FROM sys.partitions AS p JOIN sys.indexes AS i \
             ON i.object_id = p.object_id AND i.index_id = p.index_id \
             WHERE i.name = '{index}' AND p.object_id = OBJECT_ID('{t}')"
        ),
    );
    (ix, value(c, &format!("SELECT COUNT(*) FROM {t}")))
}

/// The leaf row of the DMV for index `index_id` of `t` in `mode`: fragmentation %,
/// fragment_count, page_count, record_count (NULL as -1).
fn leaf_stats(c: &mut Client, t: &str, index_id: i32, mode: &str) -> (f64, i64, i64, i64) {
    let r = &all_rows(&run(
        c,
        &format!(
            "SELECT avg_fragmentation_in_percent, fragment_count, page_count, \
             ISNULL(record_count, -1) FROM sys.dm_db_index_physical_stats \
             (DB_ID(), OBJECT_ID('{t}'), {index_id}, NULL, '{mode}') WHERE index_level = 0"
        ),
    ))[0];
    let f = match &r[0] {
        extentdb_sql::types::Value::Float(f) => *f,
        other => panic!("not a float: {other:?}"),
    };
    (f, int(&r[1]), int(&r[2]), int(&r[3]))
}

/// Fills `t` (id, k, pad) with `n` rows whose k values arrive in scattered order, so the
/// index on k splits all over its leaf level; 500 rows a transaction (one transaction of
/// tens of thousands of scattered index inserts trips "LeafRoom needed twice" in
/// shared.rs on main, a bug outside this feature).
fn fill_scattered(c: &mut Client, t: &str, n: i64) {
    run(
        c,
        &format!(
            "SET NOCOUNT ON; DECLARE @i INT = 0; WHILE @i < {n} BEGIN \
             IF @i % 500 = 0 BEGIN TRAN; \
             INSERT INTO {t} VALUES (@i, (@i * 7919) % 100003, REPLICATE('p', 60)); \
             SET @i += 1; IF @i % 500 = 0 OR @i = {n} COMMIT; END"
        ),
    );
}

/// A fragmented index rebuilt: the same rows through its key, CHECKDB clean, sys.indexes
/// unchanged, and its fragmentation and page count drop; the DMV's counts agree with
/// COUNT(*) and sp_spaceused; REBUILD ALL on a heap and REORGANIZE do the same.
#[test]
fn rebuild_compacts_and_keeps_every_row() {
    let (_s, mut c) = start_in_database(
        "aix-rebuild",
        "aix",
        "CREATE TABLE t (id INT PRIMARY KEY, k INT, pad VARCHAR(100)); \
         CREATE INDEX t_k ON t (k); \
         CREATE TABLE h (id INT, k INT, pad VARCHAR(100)); \
         CREATE UNIQUE INDEX h_id ON h (id); CREATE INDEX h_k ON h (k) INCLUDE (pad)",
    );
    fill_scattered(&mut c, "t", 6000);
    fill_scattered(&mut c, "h", 6000);
    let before = leaf_stats(&mut c, "t", 2, "DETAILED");
    assert_eq!(before.3, 6000, "record_count is the table's rows");
    assert!(
        before.0 > 30.0,
        "scattered inserts fragment the index: {before:?}"
    );
    let probe = "SELECT COUNT(*), SUM(CAST(id AS BIGINT)) FROM t WHERE k BETWEEN 500 AND 40000";
    let rows_before = table(&mut c, probe);
    let catalog = "SELECT name, index_id, type_desc, is_unique FROM sys.indexes \
                   WHERE object_id IN (OBJECT_ID('t'), OBJECT_ID('h')) ORDER BY object_id, index_id";
    let indexes_before = table(&mut c, catalog);

    run(
        &mut c,
        "ALTER INDEX t_k ON dbo.t REBUILD WITH (ONLINE = OFF, MAXDOP = 1)",
    );
    let after = leaf_stats(&mut c, "t", 2, "DETAILED");
    assert_eq!(after.3, 6000);
    assert!(
        after.0 < 5.0 && after.0 < before.0 / 4.0,
        "{before:?} -> {after:?}"
    );
    assert!(
        after.2 < before.2,
        "a compact leaf level: {before:?} -> {after:?}"
    );
    assert!(after.1 <= before.1);
    assert_eq!(table(&mut c, probe), rows_before);
    assert_eq!(table(&mut c, catalog), indexes_before);
    assert_eq!(index_and_table_rows(&mut c, "t", "t_k"), (6000, 6000));
    assert_checkdb_clean(&mut c, "aix", "after REBUILD");

    // A heap's ALL, then REORGANIZE (built as a rebuild).
    let heap_before = leaf_stats(&mut c, "h", 3, "SAMPLED");
    run(
        &mut c,
        "ALTER INDEX ALL ON h REBUILD WITH (FILLFACTOR = 100, SORT_IN_TEMPDB = ON)",
    );
    run(
        &mut c,
        "ALTER INDEX h_id ON aix.dbo.h REORGANIZE WITH (LOB_COMPACTION = ON)",
    );
    let heap_after = leaf_stats(&mut c, "h", 3, "SAMPLED");
    assert!(
        heap_after.0 < heap_before.0,
        "{heap_before:?} -> {heap_after:?}"
    );
    assert_eq!(heap_after.3, 6000);
    assert_eq!(index_and_table_rows(&mut c, "h", "h_id"), (6000, 6000));
    assert_eq!(index_and_table_rows(&mut c, "h", "h_k"), (6000, 6000));
    assert_eq!(table(&mut c, catalog), indexes_before);
    assert_eq!(
        table(
            &mut c,
            "SELECT COUNT(*) FROM h WHERE k BETWEEN 500 AND 40000"
        ),
        [rows_before[0].split(',').next().unwrap()]
    );
    // Still enforced after the rebuild: the unique index refuses a duplicate.
    assert_eq!(
        numbers(&mut c, "INSERT INTO h VALUES (5, 0, 'dup')"),
        [2601]
    );
    assert_checkdb_clean(&mut c, "aix", "after REBUILD ALL and REORGANIZE");

    // The heap's and the clustered table's rows: page_count as sp_spaceused's data,
    // record_count as COUNT(*); LIMITED leaves record counts NULL.
    for (t, index_id) in [("h", 0), ("t", 1)] {
        let (_, _, pages, records) = leaf_stats(&mut c, t, index_id, "DETAILED");
        assert_eq!(records, value(&mut c, &format!("SELECT COUNT(*) FROM {t}")));
        let used = all_rows(&run(&mut c, &format!("EXEC sp_spaceused '{t}'")));
        let data_kb: i64 = show(&used[0][3])
            .trim_end_matches(" KB")
            .trim()
            .parse()
            .unwrap();
        assert_eq!(pages * 8, data_kb, "{t}: {used:?}");
        let limited = leaf_stats(&mut c, t, index_id, "LIMITED");
        assert_eq!((limited.2, limited.3), (pages, -1));
    }
    // Every index of the database in one call (NULLs and DEFAULT), one row per level in
    // DETAILED, only the leaves otherwise.
    let all = value(
        &mut c,
        "SELECT COUNT(*) FROM sys.dm_db_index_physical_stats(DB_ID(), NULL, NULL, NULL, DEFAULT)",
    );
    assert_eq!(all, 5);
    let levels = value(
        &mut c,
        "SELECT COUNT(*) FROM sys.dm_db_index_physical_stats(DB_ID(), 0, -1, 0, 'DETAILED')",
    );
    let depths = value(
        &mut c,
        "SELECT SUM(CAST(index_depth AS INT)) FROM sys.dm_db_index_physical_stats(DB_ID(), NULL, NULL, NULL, NULL)",
    );
    assert_eq!(levels, depths);
    let used = float(
        &mut c,
        "SELECT avg_page_space_used_in_percent FROM sys.dm_db_index_physical_stats \
         (DB_ID(), OBJECT_ID('t'), 2, 1, 'DETAILED') WHERE index_level = 0",
    );
    assert!(used > 90.0, "a rebuilt leaf level is full: {used}");
}

/// Fills clustered table `t` (id, k PRIMARY KEY, pad, n IDENTITY) with `n` rows whose
/// clustered keys arrive in scattered order, so its leaves split all over; 500 rows a
/// transaction.
fn fill_scattered_keys(c: &mut Client, t: &str, n: i64) {
    run(
        c,
        &format!(
            "SET NOCOUNT ON; DECLARE @i INT = 0; WHILE @i < {n} BEGIN \
             IF @i % 500 = 0 BEGIN TRAN; \
             INSERT INTO {t} (id, k, pad) VALUES (@i, (@i * 7919) % 100003, REPLICATE('p', 60)); \
             SET @i += 1; IF @i % 500 = 0 OR @i = {n} COMMIT; END"
        ),
    );
}

/// The clustered index (the PRIMARY KEY's) rebuilt, by name and through ALL: the table
/// keeps its object id, rows, nonclustered index, FOREIGN KEYs both ways, CHECK and
/// IDENTITY; its leaf level is compact and in order afterwards; no allocation unit is
/// left behind; CHECKDB is clean.
#[test]
fn clustered_rebuild_keeps_the_table_and_what_names_it() {
    let (_s, mut c) = start_in_database(
        "aix-clustered",
        "aix",
        "CREATE TABLE parent (pid INT PRIMARY KEY); INSERT INTO parent VALUES (1); \
         CREATE TABLE t (id INT NOT NULL CHECK (id >= 0), k INT CONSTRAINT t_pk PRIMARY KEY, \
         pad VARCHAR(100), n INT IDENTITY(1, 1), p INT NULL REFERENCES parent (pid)); \
         CREATE INDEX t_id ON t (id); \
         CREATE TABLE child (cid INT PRIMARY KEY, k INT REFERENCES t (k))",
    );
    fill_scattered_keys(&mut c, "t", 6000);
    run(
        &mut c,
        "INSERT INTO child SELECT id, k FROM t WHERE id % 100 = 0; UPDATE t SET p = 1 WHERE id < 10",
    );
    let before = leaf_stats(&mut c, "t", 1, "DETAILED");
    assert_eq!(before.3, 6000);
    assert!(
        before.0 > 30.0,
        "scattered keys fragment the table: {before:?}"
    );
    let object_id = value(&mut c, "SELECT OBJECT_ID('t')");
    let units = "SELECT COUNT(*) FROM sys.allocation_units";
    let units_before = value(&mut c, units);
    let catalog = "SELECT name, index_id, type_desc, is_unique, is_primary_key FROM sys.indexes \
                   WHERE object_id = OBJECT_ID('t') ORDER BY index_id";
    let indexes_before = table(&mut c, catalog);
    let probe = "SELECT COUNT(*), SUM(CAST(id AS BIGINT)), SUM(CAST(n AS BIGINT)), \
                 COUNT(p) FROM t WHERE k BETWEEN 500 AND 40000";
    let via_index = "SELECT COUNT(*), SUM(CAST(k AS BIGINT)) FROM t WHERE id BETWEEN 100 AND 4000";
    let (rows_before, index_before) = (table(&mut c, probe), table(&mut c, via_index));

    run(
        &mut c,
        "ALTER INDEX t_pk ON dbo.t REBUILD WITH (ONLINE = OFF, MAXDOP = 1)",
    );
    let after = leaf_stats(&mut c, "t", 1, "DETAILED");
    assert_eq!(after.3, 6000);
    assert!(
        after.0 < 5.0 && after.0 < before.0 / 4.0,
        "{before:?} -> {after:?}"
    );
    assert!(
        after.2 < before.2,
        "a compact leaf level: {before:?} -> {after:?}"
    );
    assert_eq!(value(&mut c, "SELECT OBJECT_ID('t')"), object_id);
    assert_eq!(
        value(&mut c, units),
        units_before,
        "the old tree's unit went"
    );
    assert_eq!(table(&mut c, catalog), indexes_before);
    assert_eq!(table(&mut c, probe), rows_before);
    assert_eq!(table(&mut c, via_index), index_before);
    assert_eq!(index_and_table_rows(&mut c, "t", "t_id"), (6000, 6000));
    assert_checkdb_clean(&mut c, "aix", "after the clustered REBUILD");

    // What names the table's object id still holds: the FOREIGN KEYs both ways, the
    // CHECK, the key's uniqueness, and the IDENTITY goes on from where it was.
    run(
        &mut c,
        "INSERT INTO t (id, k, pad) VALUES (6000, 100010, 'next')",
    );
    assert_eq!(value(&mut c, "SELECT n FROM t WHERE k = 100010"), 6001);
    let k_of_child = value(&mut c, "SELECT MIN(k) FROM child");
    for (sql, want) in [
        ("INSERT INTO child VALUES (-1, 100004)", 547),
        (&*format!("DELETE FROM t WHERE k = {k_of_child}"), 547),
        ("UPDATE t SET p = 2 WHERE id = 1", 547),
        ("INSERT INTO t (id, k) VALUES (-5, 100005)", 547),
        ("INSERT INTO t (id, k) VALUES (1, 0)", 2627),
    ] {
        assert_eq!(numbers(&mut c, sql), [want], "{sql}");
    }

    // ALL takes the clustered index and the nonclustered one; REORGANIZE is a rebuild.
    run(
        &mut c,
        "ALTER INDEX ALL ON t REBUILD WITH (FILLFACTOR = 100, SORT_IN_TEMPDB = ON)",
    );
    run(&mut c, "ALTER INDEX t_pk ON t REORGANIZE");
    assert_eq!(value(&mut c, units), units_before);
    assert_eq!(table(&mut c, catalog), indexes_before);
    assert_eq!(table(&mut c, via_index), index_before);
    assert_eq!(index_and_table_rows(&mut c, "t", "t_id"), (6001, 6001));
    assert_eq!(
        numbers(&mut c, "DELETE FROM t WHERE k = 100010"),
        Vec::<i32>::new()
    );
    assert_eq!(table(&mut c, probe), rows_before);
    assert!(
        leaf_space_used(&mut c, "t") > 90.0,
        "a rebuilt leaf level is full"
    );
    assert_checkdb_clean(&mut c, "aix", "after ALL and REORGANIZE");
}

/// kill -9 while a clustered table's index is being rebuilt, early and late: after
/// recovery the table holds its old tree or its new one, whole (CHECKDB, its rows and
/// their sums), no allocation unit is left behind, and it rebuilds again.
#[test]
fn kill_9_during_clustered_rebuild_leaves_one_whole_table() {
    let s = Server::start("aix-kill9-clustered", &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "CREATE DATABASE k9c; USE k9c; \
         CREATE TABLE big (id INT NOT NULL, k INT CONSTRAINT big_pk PRIMARY KEY, \
         pad VARCHAR(100), n INT IDENTITY); CREATE INDEX big_id ON big (id)",
    );
    fill_scattered_keys(&mut c, "big", 40000);
    let sums = "SELECT COUNT(*), SUM(CAST(id AS BIGINT)), SUM(CAST(k AS BIGINT)) FROM big";
    let (want, units) = (
        table(&mut c, sums),
        value(&mut c, "SELECT COUNT(*) FROM sys.allocation_units"),
    );
    let s = kill_during(s, "k9c", "ALTER INDEX big_pk ON big REBUILD", |c, when| {
        assert_checkdb_clean(c, "k9c", when);
        assert_eq!(table(c, sums), want, "{when}");
        assert_eq!(index_and_table_rows(c, "big", "big_id"), (40000, 40000));
        let now = value(c, "SELECT COUNT(*) FROM sys.allocation_units");
        assert_eq!(now, units, "{when}: a tree left behind");
    });
    let mut c = s.connect_to(Some("k9c"));
    run(&mut c, "ALTER INDEX ALL ON big REBUILD");
    assert_eq!(table(&mut c, sums), want);
    assert_checkdb_clean(&mut c, "k9c", "after a rebuild following recovery");
}

/// ALTER INDEX ... DISABLE: the index keeps its definition (sys.indexes.is_disabled) and
/// no rows; reads scan instead of seeking through it, writes go on without it, a unique
/// one takes a repeated key; CHECKDB does not compare it, CHECKTABLE of it is 2530,
/// REORGANIZE 1973; REBUILD fills it from the table (1505 when a unique one meets the
/// repeated key) and reads seek through it again. What would disable a FOREIGN KEY with
/// the table is refused (40517) and changes nothing.
#[test]
fn disable_empties_an_index_until_a_rebuild() {
    let (_s, mut c) = start_in_database(
        "aix-disable",
        "aix",
        "CREATE TABLE t (id INT PRIMARY KEY, k INT, pad VARCHAR(100)); \
         CREATE INDEX t_k ON t (k); CREATE UNIQUE INDEX t_u ON t (k); \
         CREATE TABLE h (id INT, k INT, pad VARCHAR(100), CONSTRAINT h_uq UNIQUE (id)); \
         CREATE INDEX h_k ON h (k); \
         CREATE TABLE child (cid INT PRIMARY KEY, hid INT REFERENCES h (id))",
    );
    fill_scattered(&mut c, "t", 3000);
    run(
        &mut c,
        "INSERT INTO h SELECT id, k, pad FROM t WHERE id < 100",
    );
    let disabled = "SELECT name, is_disabled FROM sys.indexes WHERE object_id = OBJECT_ID('t') \
                    AND index_id > 1 ORDER BY index_id";
    let probe = "SET STATISTICS IO ON; SELECT COUNT(*) FROM t WHERE k = 75128; \
                 SET STATISTICS IO OFF";
    let seeking = scans_and_reads(&run(&mut c, probe))[0];

    run(
        &mut c,
        "ALTER INDEX t_k ON t DISABLE; ALTER INDEX t_u ON dbo.t DISABLE",
    );
    assert_eq!(table(&mut c, disabled), ["t_k,1", "t_u,1"]);
    assert_eq!(value(&mut c, "SELECT COUNT(*) FROM t WHERE k = 75128"), 1);
    let scanning = scans_and_reads(&run(&mut c, probe))[0];
    assert!(
        scanning.1 > seeking.1 * 5,
        "a scan, not a seek: {seeking:?} {scanning:?}"
    );
    // Writes go on without the disabled indexes; the unique one takes a repeated key.
    run(
        &mut c,
        "INSERT INTO t VALUES (5000, -1, 'dup'), (5001, -1, 'dup'); \
         UPDATE t SET k = -k - 10 WHERE id < 50; DELETE FROM t WHERE id BETWEEN 100 AND 149",
    );
    assert_eq!(index_and_table_rows(&mut c, "t", "t_k"), (0, 2952));
    assert_checkdb_clean(&mut c, "aix", "with disabled indexes");
    for (sql, want) in [
        ("DBCC CHECKTABLE ('t', 2)", 2530),
        ("ALTER INDEX t_k ON t REORGANIZE", 1973),
        ("ALTER INDEX ALL ON t REORGANIZE", 1973),
        ("ALTER INDEX t_u ON t REBUILD", 1505),
    ] {
        assert_eq!(numbers(&mut c, sql).first(), Some(&want), "{sql}");
    }
    assert_eq!(table(&mut c, disabled), ["t_k,1", "t_u,1"]);

    // REBUILD enables: the index holds every row, including those written meanwhile.
    run(
        &mut c,
        "DELETE FROM t WHERE id = 5001; ALTER INDEX t_k ON t REBUILD",
    );
    assert_eq!(table(&mut c, disabled), ["t_k,0", "t_u,1"]);
    assert_eq!(index_and_table_rows(&mut c, "t", "t_k"), (2951, 2951));
    let again = scans_and_reads(&run(&mut c, probe))[0];
    assert!(
        again.1 * 5 < scanning.1,
        "a seek again: {again:?} {scanning:?}"
    );
    run(&mut c, "ALTER INDEX ALL ON t REBUILD");
    assert_eq!(table(&mut c, disabled), ["t_k,0", "t_u,0"]);
    assert_eq!(
        numbers(&mut c, "INSERT INTO t VALUES (5002, -1, 'dup')"),
        [2601]
    );
    assert_checkdb_clean(&mut c, "aix", "after the rebuilds");

    // Refused: DISABLE takes no WITH; the clustered index of a table with a FOREIGN KEY
    // (not yet disabled with it; the clustered index's DISABLE: clustered_disable.rs).
    // (A constraint's index and one a FOREIGN KEY references: index_disable.rs.)
    for (sql, want) in [
        ("ALTER INDEX t_k ON t DISABLE WITH (ONLINE = OFF)", 102),
        ("ALTER INDEX ALL ON child DISABLE", 40517),
    ] {
        assert_eq!(numbers(&mut c, sql).first(), Some(&want), "{sql}");
    }
    assert_eq!(table(&mut c, disabled), ["t_k,0", "t_u,0"]);
    assert_eq!(value(&mut c, "SELECT COUNT(*) FROM child"), 0);
    // A heap's plain index: disabled and enabled through ALL.
    run(&mut c, "ALTER INDEX h_k ON h DISABLE");
    assert_eq!(index_and_table_rows(&mut c, "h", "h_k"), (0, 100));
    run(&mut c, "ALTER INDEX ALL ON h REBUILD");
    assert_eq!(index_and_table_rows(&mut c, "h", "h_k"), (100, 100));
    assert_checkdb_clean(&mut c, "aix", "after the heap's rebuild");
}

/// Every refusal and error with SQL Server's number; nothing a refused statement named
/// changes (the index's pages, sys.indexes).
#[test]
fn refusals_and_errors_change_nothing() {
    let (s, mut c) = start_in_database(
        "aix-refuse",
        "aix",
        "CREATE TABLE t (id INT PRIMARY KEY, k INT); CREATE INDEX t_k ON t (k); \
         INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)",
    );
    let state = |c: &mut Client| {
        (
            table(
                c,
                "SELECT name, index_id FROM sys.indexes WHERE object_id = OBJECT_ID('t') ORDER BY index_id",
            ),
            table(
                c,
                "SELECT total_pages FROM sys.allocation_units ORDER BY allocation_unit_id",
            ),
        )
    };
    let before = state(&mut c);
    let pk = table(
        &mut c,
        "SELECT name FROM sys.indexes WHERE object_id = OBJECT_ID('t') AND index_id = 1",
    )
    .remove(0);
    let pk_rebuild_online = format!("ALTER INDEX {pk} ON t REBUILD WITH (ONLINE = ON)");
    for (sql, want) in [
        ("ALTER INDEX t_k ON t REBUILD PARTITION = 1", 40517),
        ("ALTER INDEX t_k ON t REORGANIZE PARTITION = 1", 40517),
        ("ALTER INDEX t_k ON t SET (ALLOW_PAGE_LOCKS = OFF)", 40517),
        ("ALTER INDEX t_k ON t RESUME", 40517),
        ("ALTER INDEX t_k ON t PAUSE", 40517),
        ("ALTER INDEX t_k ON t ABORT", 40517),
        ("ALTER INDEX t_k ON t REBUILD WITH (ONLINE = ON)", 40517),
        (
            "ALTER INDEX t_k ON t REBUILD WITH (DATA_COMPRESSION = PAGE)",
            40517,
        ),
        ("ALTER INDEX t_k ON t REBUILD WITH (FILLFACTOR = 80)", 40517),
        ("ALTER INDEX t_k ON t REBUILD WITH (PAD_INDEX = ON)", 40517),
        (
            "ALTER INDEX t_k ON t REORGANIZE WITH (LOB_COMPACTION = OFF)",
            40517,
        ),
        (
            "ALTER INDEX t_k ON t REBUILD WITH (ONLINE = OFF, MAXDOP = -1)",
            40517,
        ),
        (pk_rebuild_online.as_str(), 40517),
        ("ALTER INDEX ALL ON t REBUILD WITH (FILLFACTOR = 70)", 40517),
        ("BEGIN TRAN; ALTER INDEX ALL ON t REBUILD", 40517),
        ("ALTER INDEX nope ON t REBUILD", 7999),
        ("ALTER INDEX t_k ON nope REBUILD", 1088),
        ("BEGIN TRAN; ALTER INDEX t_k ON t REBUILD", 40517),
        ("ALTER INDEX t_k ON t FROB", 102),
    ] {
        let got = numbers(&mut c, sql);
        assert_eq!(got.first(), Some(&want), "{sql}: {got:?}");
        let _ = c.batch("IF @@TRANCOUNT > 0 ROLLBACK");
    }
    // A user without ALTER on the table is refused as CREATE INDEX refuses it.
    run(
        &mut c,
        "CREATE LOGIN reader WITH PASSWORD = 'Aix-Test-Pass-1'; \
         CREATE USER reader FOR LOGIN reader; GRANT SELECT ON t TO reader",
    );
    let mut reader = extentdb_tds::client::Client::connect(
        &s.addr,
        &extentdb_tds::client::ConnectOptions {
            user: "reader".into(),
            password: "Aix-Test-Pass-1".into(),
            database: Some("aix".into()),
            timeout: Some(Duration::from_secs(60)),
            ..Default::default()
        },
    )
    .unwrap_or_else(|_| panic!("reader's login"));
    assert_eq!(numbers(&mut reader, "ALTER INDEX t_k ON t REBUILD"), [1088]);
    assert_eq!(state(&mut c), before);
    let pk = value(
        &mut c,
        "SELECT COUNT(*) FROM sys.indexes WHERE object_id = OBJECT_ID('t') AND is_primary_key = 1",
    );
    assert_eq!(pk, 1);
    // The DMV's arguments.
    for (sql, want) in [
        (
            "SELECT * FROM sys.dm_db_index_physical_stats(DB_ID(), NULL, NULL, NULL, 'FAST')",
            1023,
        ),
        (
            "SELECT * FROM sys.dm_db_index_physical_stats(32000, NULL, NULL, NULL, NULL)",
            1023,
        ),
        (
            "SELECT * FROM sys.dm_db_index_physical_stats(DB_ID(), NULL, -2, NULL, NULL)",
            1023,
        ),
        (
            "SELECT * FROM sys.dm_db_index_physical_stats(DB_ID(), NULL, NULL, NULL)",
            216,
        ),
        (
            "SELECT * FROM sys.dm_db_index_physical_stats(DB_ID(), NULL, NULL, NULL, NULL, 1)",
            8144,
        ),
        ("DBCC CHECKTABLE ('t', 9)", 2591),
    ] {
        assert_eq!(numbers(&mut c, sql).first(), Some(&want), "{sql}");
    }
    // An object or partition that does not exist has no rows.
    let none = value(
        &mut c,
        "SELECT COUNT(*) FROM sys.dm_db_index_physical_stats(DB_ID(), 987654, NULL, NULL, NULL)",
    );
    assert_eq!(none, 0);
    let none = value(
        &mut c,
        "SELECT COUNT(*) FROM sys.dm_db_index_physical_stats(DB_ID(), OBJECT_ID('t'), NULL, 2, NULL)",
    );
    assert_eq!(none, 0);
}

/// DBCC CHECKTABLE (table, index_id) checks that index against its table: a clean report
/// naming the table, for the index and for the table's own index id.
#[test]
fn checktable_of_one_index() {
    let (_s, mut c) = start_in_database(
        "aix-checktable",
        "aix",
        "CREATE TABLE t (id INT PRIMARY KEY, k INT); CREATE INDEX t_k ON t (k); \
         CREATE INDEX t_k2 ON t (k, id); INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)",
    );
    for sql in [
        "DBCC CHECKTABLE ('t', 2)",
        "DBCC CHECKTABLE ('dbo.t', 1)",
        "DBCC CHECKTABLE ('t', 3)",
    ] {
        let r = run(&mut c, sql);
        let lines: Vec<String> = r
            .outputs
            .iter()
            .filter_map(|o| match o {
                extentdb_sql::exec::Output::Info(m) => Some(m.text.clone()),
                _ => None,
            })
            .collect();
        assert!(
            lines.iter().any(|l| l.contains("There are 3 rows")),
            "{sql}: {lines:?}"
        );
        assert!(r.errors().next().is_none(), "{sql}: {lines:?}");
    }
}

/// Runs `sql` (a rebuild in database `db`) once whole to time it, then twice more, each
/// cut by a kill -9 of the server: at a quarter of that time (early in the copy; the run
/// must not have finished) and at three quarters (late in it or at its commit, whichever
/// the kill meets). The delays follow this machine's speed instead of a figure measured on
/// another, and count from the request, not from the login before it. After each restart
/// `check` runs on a new session, told when. Returns the restarted server.
fn kill_during(s: Server, db: &str, sql: &str, check: impl Fn(&mut Client, &str)) -> Server {
    let mut c = s.connect_to(Some(db));
    let started = std::time::Instant::now();
    run(&mut c, sql);
    let whole = started.elapsed().as_millis() as u64;
    eprintln!("{sql} took {whole} ms whole");
    assert!(
        whole >= 40,
        "{whole} ms leaves no time to kill in: more rows"
    );
    let mut s = s;
    for (delay_ms, must_interrupt) in [(whole / 4, true), (whole * 3 / 4, false)] {
        let (addr, db_name, text) = (s.addr.clone(), db.to_string(), sql.to_string());
        let (connected, ready) = std::sync::mpsc::channel();
        let rebuild = thread::spawn(move || {
            let mut c = connect_at(&addr, Some(&db_name), 120).unwrap();
            connected.send(()).unwrap();
            let done = c.batch(&text);
            done.is_ok_and(|r| r.errors().next().is_none())
        });
        ready.recv().unwrap();
        thread::sleep(Duration::from_millis(delay_ms));
        s = restart(s);
        let finished = rebuild.join().unwrap();
        assert!(
            !(finished && must_interrupt),
            "the kill came after {sql} finished: more rows"
        );
        check(
            &mut s.connect_to(Some(db)),
            &format!("after the kill at {delay_ms} ms"),
        );
    }
    s
}

/// kill -9 while a big index is being rebuilt, early and late: after recovery the index is
/// the old or the new one, whole (CHECKDB's index check, its row count), and every row is
/// there.
#[test]
fn kill_9_during_rebuild_leaves_one_whole_index() {
    let s = Server::start("aix-kill9", &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "CREATE DATABASE k9; USE k9; \
         CREATE TABLE big (id INT PRIMARY KEY, k INT, pad VARCHAR(100)); \
         CREATE INDEX big_k ON big (k) INCLUDE (pad)",
    );
    fill_scattered(&mut c, "big", 40000);
    let s = kill_during(s, "k9", "ALTER INDEX big_k ON big REBUILD", |c, when| {
        assert_checkdb_clean(c, "k9", when);
        assert_eq!(index_and_table_rows(c, "big", "big_k"), (40000, 40000));
        assert_eq!(
            table(
                c,
                "SELECT name, index_id FROM sys.indexes WHERE object_id = OBJECT_ID('big') AND index_id > 1"
            ),
            ["big_k,2"]
        );
        let through_index = value(c, "SELECT COUNT(*) FROM big WHERE k BETWEEN 0 AND 100003");
        assert_eq!(through_index, 40000);
    });
    let mut c = s.connect_to(Some("k9"));

    // And the index rebuilds after recovery.
    run(&mut c, "ALTER INDEX big_k ON big REBUILD");
    assert_eq!(index_and_table_rows(&mut c, "big", "big_k"), (40000, 40000));
    assert_checkdb_clean(&mut c, "k9", "after a rebuild following recovery");
}

/// Three sessions insert and read through the index while a fourth rebuilds it, the
/// clustered index with it (ALL), and disables it, over and over: they wait for each rebuild (Sch-M) or run between them; afterwards CHECKDB is
/// clean and every acknowledged insert is in the table and the index.
#[test]
fn sessions_beside_rebuilds_lose_nothing() {
    let (s, mut c) = start_in_database(
        "aix-beside",
        "aix",
        "CREATE TABLE t (id INT PRIMARY KEY, k INT, pad VARCHAR(100)); CREATE INDEX t_k ON t (k)",
    );
    fill_scattered(&mut c, "t", 5000);
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (addr, stop, acked) = (s.addr.clone(), stop.clone(), acked.clone());
            thread::spawn(move || {
                let mut c = connect_at(&addr, Some("aix"), 120).unwrap();
                let mut i = 0i64;
                while !stop.load(Ordering::Relaxed) {
                    let id = 1_000_000 + w * 100_000 + i;
                    let sql = format!(
                        "INSERT INTO t VALUES ({id}, {}, 'w'); SELECT COUNT(*) FROM t WHERE k = {}",
                        id % 977,
                        id % 977
                    );
                    let r = c.batch(&sql).unwrap();
                    if r.errors().next().is_none() {
                        acked.lock().unwrap().push(id);
                    }
                    i += 1;
                }
            })
        })
        .collect();
    // The nonclustered index alone, ALL (the clustered index's new tree too), and the
    // index disabled (writers' reads scan) and enabled again by a rebuild.
    for sql in [
        "ALTER INDEX t_k ON t REBUILD",
        "ALTER INDEX ALL ON t REBUILD",
        "ALTER INDEX t_k ON t DISABLE",
        "ALTER INDEX t_k ON t REBUILD",
        "ALTER INDEX t_k ON t DISABLE",
        "ALTER INDEX ALL ON t REBUILD",
    ] {
        run(&mut c, sql);
        thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(!acked.is_empty());
    assert_checkdb_clean(&mut c, "aix", "after rebuilds beside writers");
    let (ix, rows) = index_and_table_rows(&mut c, "t", "t_k");
    assert_eq!(ix, rows);
    assert_eq!(rows, 5000 + acked.len() as i64);
    let present = value(&mut c, "SELECT COUNT(*) FROM t WHERE id >= 1000000");
    assert_eq!(present, acked.len() as i64);
    for id in acked.iter().step_by(97) {
        let n = value(
            &mut c,
            &format!(
                "SELECT COUNT(*) FROM t WHERE k = {} AND id = {id}",
                id % 977
            ),
        );
        assert_eq!(n, 1, "acknowledged row {id}");
    }
}

/// Leaf fill of table `t`'s clustered index (sys.dm_db_index_physical_stats, DETAILED).
fn leaf_space_used(c: &mut Client, t: &str) -> f64 {
    float(
        c,
        &format!(
            "SELECT avg_page_space_used_in_percent FROM sys.dm_db_index_physical_stats \
             (DB_ID(), OBJECT_ID('{t}'), 1, NULL, 'DETAILED') WHERE index_level = 0"
        ),
    )
}

/// Four sessions each insert their own ascending run of keys into the middle of one
/// clustered index, autocommit (bench/wire's insert_clustered): a leaf split where a run
/// meets the next run's rows cuts at the insertion point (btree.rs `split_point`), so the
/// runs fill their leaves (a 50/50 split there left them about 56% full). Keys in random
/// order still split 50/50. Every row is there and CHECKDB is clean.
#[test]
fn ascending_runs_from_sessions_fill_their_leaves() {
    let (s, mut c) = start_in_database(
        "aix-runs",
        "aix",
        "CREATE TABLE runs (k BIGINT PRIMARY KEY, x INT NOT NULL, pad CHAR(200) NOT NULL); \
         CREATE TABLE scattered (k BIGINT PRIMARY KEY, x INT NOT NULL, pad CHAR(200) NOT NULL)",
    );
    let per_session = 400i64;
    let sessions: Vec<_> = (0..4i64)
        .map(|w| {
            let addr = s.addr.clone();
            thread::spawn(move || {
                let mut c = connect_at(&addr, Some("aix"), 120).unwrap();
                for i in 0..per_session {
                    let k = (w << 24) | i;
                    run(
                        &mut c,
                        &format!("INSERT INTO runs VALUES ({k}, {i}, 'run {w}')"),
                    );
                }
            })
        })
        .collect();
    for h in sessions {
        h.join().unwrap();
    }
    for i in 0..4 * per_session {
        let k = (i * 2_654_435_761) % 1_000_003;
        run(
            &mut c,
            &format!("INSERT INTO scattered VALUES ({k}, {i}, 'x')"),
        );
    }
    assert_eq!(value(&mut c, "SELECT COUNT(*) FROM runs"), 4 * per_session);
    assert_eq!(
        value(&mut c, "SELECT COUNT(DISTINCT k) FROM scattered"),
        4 * per_session
    );
    let runs = leaf_space_used(&mut c, "runs");
    assert!(runs > 85.0, "ascending runs fill their leaves: {runs}");
    let scattered = leaf_space_used(&mut c, "scattered");
    assert!(
        (50.0..85.0).contains(&scattered),
        "random keys split 50/50: {scattered}"
    );
    assert_checkdb_clean(&mut c, "aix", "after the runs");
}
