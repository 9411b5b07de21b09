//! Statistics objects (issue 22; exec/statistics.rs, exec/show_statistics.rs, storage's
//! statistics.rs, catalog version 13) through real TDS sessions: histograms and density
//! vectors checked against data of a known distribution, index statistics made and
//! dropped with their index, refusals with SQL Server's numbers that change nothing,
//! statistics built while other sessions insert, and what a CREATE STATISTICS committed
//! still there after a kill -9 and recovery.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use extentdb_sql::types::Value;
use extentdb_tds::client::Client;

mod common;
use common::tds::{
    all_rows, assert_checkdb_clean, connect_at, int, numbers, restart, run, start_in_database,
    table,
};

fn real(v: &Value) -> f64 {
    match v {
        Value::Real(f) => *f as f64,
        Value::Float(f) => *f,
        other => int(other) as f64,
    }
}

/// `t (id INT PRIMARY KEY, v INT, w INT, c VARCHAR(20) NULL)` with `n` rows: v = id % 10,
/// w = id, c NULL for every seventh row.
fn fill(c: &mut Client, n: i32) {
    run(
        c,
        "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v INT NOT NULL, w INT NOT NULL, \
         c VARCHAR(20) NULL)",
    );
    run(
        c,
        &format!(
            "SET NOCOUNT ON; DECLARE @i INT = 1; WHILE @i <= {n} BEGIN \
             INSERT t VALUES (@i, @i % 10, @i, CASE WHEN @i % 7 = 0 THEN NULL \
             ELSE 'k' + CAST(@i % 40 AS VARCHAR(10)) END); SET @i += 1 END"
        ),
    );
}

/// (RANGE_HI_KEY, RANGE_ROWS, EQ_ROWS, DISTINCT_RANGE_ROWS, AVG_RANGE_ROWS) of a histogram.
fn histogram(c: &mut Client, stats: &str) -> Vec<(Value, f64, f64, i64, f64)> {
    let sql = format!("DBCC SHOW_STATISTICS ('t', {stats}) WITH HISTOGRAM, NO_INFOMSGS");
    all_rows(&run(c, &sql))
        .into_iter()
        .map(|r| {
            (
                r[0].clone(),
                real(&r[1]),
                real(&r[2]),
                int(&r[3]),
                real(&r[4]),
            )
        })
        .collect()
}

/// The header's Rows, Rows Sampled and Steps (None when never built).
fn header(c: &mut Client, stats: &str) -> Option<(i64, i64, i64)> {
    let sql = format!("DBCC SHOW_STATISTICS ('t', {stats}) WITH STAT_HEADER, NO_INFOMSGS");
    let r = &all_rows(&run(c, &sql))[0];
    match r[2] {
        Value::Null => None,
        _ => Some((int(&r[2]), int(&r[3]), int(&r[4]))),
    }
}

fn density(c: &mut Client, stats: &str) -> Vec<(f64, String)> {
    let sql = format!("DBCC SHOW_STATISTICS ('t', {stats}) WITH DENSITY_VECTOR, NO_INFOMSGS");
    all_rows(&run(c, &sql))
        .into_iter()
        .map(|r| (real(&r[0]), common::tds::show(&r[2])))
        .collect()
}

fn count(c: &mut Client, sql: &str) -> i64 {
    int(&all_rows(&run(c, sql))[0][0])
}

/// A FULLSCAN build's histogram and density vector against data of known distribution:
/// ten values of 300 rows each (one step per value, EQ_ROWS 300, RANGE_ROWS 0), and 3,000
/// distinct values folded into at most 200 steps whose RANGE_ROWS and EQ_ROWS add up to
/// Rows, the first step the minimum with no range and the last the maximum; densities are
/// 1 / distinct values of each prefix.
#[test]
fn fullscan_histograms_match_the_data() {
    let (_s, mut c) = start_in_database("stats-hist", "sh", "");
    fill(&mut c, 3000);
    run(&mut c, "CREATE STATISTICS st_v ON t (v, w) WITH FULLSCAN");
    assert_eq!(header(&mut c, "st_v"), Some((3000, 3000, 10)));
    let h = histogram(&mut c, "st_v");
    let keys: Vec<i64> = h.iter().map(|s| int(&s.0)).collect();
    assert_eq!(keys, (0..10).collect::<Vec<_>>());
    assert!(h
        .iter()
        .all(|s| s.1 == 0.0 && s.2 == 300.0 && s.3 == 0 && s.4 == 1.0));
    let d = density(&mut c, "st_v");
    assert_eq!(d.len(), 2);
    assert!((d[0].0 - 0.1).abs() < 1e-6 && d[0].1 == "v", "{d:?}");
    assert!(
        (d[1].0 - 1.0 / 3000.0).abs() < 1e-9 && d[1].1 == "v, w",
        "{d:?}"
    );

    run(&mut c, "CREATE STATISTICS st_w ON t (w) WITH FULLSCAN");
    let h = histogram(&mut c, "st_w");
    let (rows, sampled, steps) = header(&mut c, "st_w").unwrap();
    assert_eq!((rows, sampled, steps as usize), (3000, 3000, h.len()));
    assert!(h.len() <= 200 && h.len() > 100, "{} steps", h.len());
    let sum: f64 = h.iter().map(|s| s.1 + s.2).sum();
    assert_eq!(sum, 3000.0);
    let distinct: i64 = h.iter().map(|s| s.3 + 1).sum();
    assert_eq!(distinct, 3000);
    assert_eq!((int(&h[0].0), h[0].1), (1, 0.0));
    assert_eq!(int(&h[h.len() - 1].0), 3000);
    let d = density(&mut c, "st_w");
    assert!((d[0].0 - 1.0 / 3000.0).abs() < 1e-9);

    // NULLs have a step of their own, first; character keys come back as text.
    run(&mut c, "CREATE STATISTICS st_c ON t (c)");
    let h = histogram(&mut c, "st_c");
    assert_eq!((h[0].0.clone(), h[0].2), (Value::Null, 428.0));
    assert_eq!(h.iter().map(|s| s.1 + s.2).sum::<f64>(), 3000.0);
    assert!(matches!(&h[1].0, Value::Text(_)), "{:?}", h[1].0);
}

/// SAMPLE n PERCENT reads a part of the rows and scales its counts to Rows; RESAMPLE keeps
/// the last rate; NORECOMPUTE is kept until an update without it; sp_updatestats builds
/// every table's.
#[test]
fn sampling_resample_norecompute_and_sp_updatestats() {
    let (_s, mut c) = start_in_database("stats-sample", "ss", "");
    fill(&mut c, 3000);
    run(
        &mut c,
        "CREATE STATISTICS st_w ON t (w) WITH SAMPLE 30 PERCENT, NORECOMPUTE",
    );
    let (rows, sampled, _) = header(&mut c, "st_w").unwrap();
    assert_eq!(rows, 3000);
    assert!(
        (600..1200).contains(&sampled),
        "{sampled} sampled of 3000 at 30%"
    );
    let sum: f64 = histogram(&mut c, "st_w").iter().map(|s| s.1 + s.2).sum();
    assert!((sum - 3000.0).abs() < 1.0, "scaled to Rows: {sum}");
    let nr = "SELECT CAST(no_recompute AS INT) FROM sys.stats WHERE name = 'st_w'";
    assert_eq!(count(&mut c, nr), 1);
    run(&mut c, "UPDATE STATISTICS t st_w WITH RESAMPLE");
    let (_, resampled, _) = header(&mut c, "st_w").unwrap();
    assert!((600..1200).contains(&resampled), "{resampled}");
    assert_eq!(
        count(&mut c, nr),
        0,
        "an update without NORECOMPUTE clears it"
    );
    run(&mut c, "UPDATE STATISTICS t (st_w) WITH SAMPLE 100 ROWS");
    let (_, some, _) = header(&mut c, "st_w").unwrap();
    assert!((30..300).contains(&some), "{some}");
    run(&mut c, "EXEC sp_updatestats");
    let (rows, sampled, _) = header(&mut c, "st_w").unwrap();
    assert_eq!((rows, sampled), (3000, 3000), "the default reads every row");
    // WITH INDEX reaches the indexes' statistics only.
    run(&mut c, "CREATE STATISTICS st_v ON t (v)");
    run(&mut c, "INSERT t VALUES (5000, 1, 5000, 'z')");
    run(&mut c, "UPDATE STATISTICS t WITH INDEX");
    assert_eq!(header(&mut c, "st_v").unwrap().0, 3000);
    let pk = table(&mut c, "SELECT name FROM sys.stats WHERE stats_id = 1")[0].clone();
    assert_eq!(header(&mut c, &pk).unwrap().0, 3001);
}

/// An index's statistics come with it (stats id = index id; the PRIMARY KEY's 1, never
/// built on an empty table), are built by CREATE INDEX and REBUILD with the clustering
/// key in the density vector, cannot be dropped (3739), and go with DROP INDEX and DROP
/// TABLE; stats ids and index ids share one space and one name space (1927, 1913).
#[test]
fn index_statistics_follow_their_index() {
    let (_s, mut c) = start_in_database("stats-index", "si", "");
    run(
        &mut c,
        "CREATE TABLE t (id INT NOT NULL CONSTRAINT pk_t PRIMARY KEY, a INT)",
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT name, stats_id, CAST(user_created AS INT) FROM sys.stats"
        ),
        ["pk_t,1,0"]
    );
    assert_eq!(
        header(&mut c, "pk_t"),
        None,
        "never built on an empty table"
    );
    run(&mut c, "INSERT t VALUES (1, 10), (2, 20), (3, 20)");
    run(&mut c, "CREATE INDEX ix_a ON t (a)");
    assert_eq!(header(&mut c, "ix_a"), Some((3, 3, 2)));
    let d = density(&mut c, "ix_a");
    assert_eq!(
        d.iter().map(|x| x.1.as_str()).collect::<Vec<_>>(),
        ["a", "a, id"]
    );
    assert!((d[0].0 - 0.5).abs() < 1e-6 && (d[1].0 - 1.0 / 3.0).abs() < 1e-6);
    run(&mut c, "CREATE STATISTICS st ON t (a)");
    let ids = table(
        &mut c,
        "SELECT name, stats_id FROM sys.stats ORDER BY stats_id",
    );
    assert_eq!(ids, ["pk_t,1", "ix_a,2", "st,3"]);
    assert_eq!(numbers(&mut c, "CREATE INDEX st ON t (id)"), [1913]);
    assert_eq!(numbers(&mut c, "CREATE STATISTICS ix_a ON t (a)"), [1927]);
    assert_eq!(numbers(&mut c, "DROP STATISTICS t.ix_a"), [3739]);
    run(&mut c, "CREATE INDEX ix_id ON t (id, a)");
    let cols = "SELECT stats_id, stats_column_id, column_id FROM sys.stats_columns \
                WHERE stats_id = 4 ORDER BY stats_column_id";
    assert_eq!(
        table(&mut c, cols),
        ["4,1,1", "4,2,2"],
        "past the statistics' id"
    );
    run(&mut c, "INSERT t VALUES (4, 40)");
    run(&mut c, "ALTER INDEX ix_a ON t REBUILD");
    assert_eq!(header(&mut c, "ix_a").unwrap().0, 4);
    run(&mut c, "ALTER INDEX pk_t ON t REBUILD");
    assert_eq!(header(&mut c, "pk_t"), Some((4, 4, 4)));
    run(&mut c, "DROP INDEX ix_a ON t");
    let names = table(&mut c, "SELECT name FROM sys.stats ORDER BY stats_id");
    assert_eq!(names, ["pk_t", "st", "ix_id"]);
    run(&mut c, "DROP STATISTICS t.st");
    assert_eq!(
        table(&mut c, "SELECT name FROM sys.stats ORDER BY stats_id"),
        ["pk_t", "ix_id"]
    );
    let built = header(&mut c, "ix_id");
    assert!(built.is_some());
    run(&mut c, "BEGIN TRAN; DROP TABLE t; ROLLBACK");
    assert_eq!(
        header(&mut c, "ix_id"),
        built,
        "a rolled-back DROP keeps them built"
    );
    run(&mut c, "DROP TABLE t");
    assert_eq!(count(&mut c, "SELECT COUNT(*) FROM sys.stats"), 0);
    assert_checkdb_clean(&mut c, "si", "after the drops");
}

/// Bad names and options get SQL Server's numbers, options not built 40517, and none of
/// them changes what sys.stats lists or what a statistics object holds.
#[test]
fn refusals_carry_sql_servers_numbers_and_change_nothing() {
    let (_s, mut c) = start_in_database("stats-refuse", "sr", "");
    fill(&mut c, 50);
    run(&mut c, "CREATE STATISTICS st ON t (v)");
    let before = table(
        &mut c,
        "SELECT name, stats_id, CAST(no_recompute AS INT) FROM sys.stats",
    );
    let hist = histogram(&mut c, "st");
    for (sql, want) in [
        ("CREATE STATISTICS st ON t (w)", 1927),
        ("CREATE STATISTICS s2 ON nosuch (w)", 1088),
        ("CREATE STATISTICS s2 ON t (zzz)", 1911),
        ("CREATE STATISTICS s2 ON t (w, w)", 1909),
        (
            "CREATE STATISTICS s2 ON t (w) WITH SAMPLE 101 PERCENT",
            1031,
        ),
        (
            "CREATE STATISTICS s2 ON t (w) WITH FULLSCAN, SAMPLE 5 PERCENT",
            1052,
        ),
        (
            "CREATE STATISTICS s2 ON t (w) WITH FULLSCAN, FULLSCAN",
            1039,
        ),
        ("CREATE STATISTICS s2 ON t (w) WITH BOGUS", 155),
        ("CREATE STATISTICS s2 ON t (w) WITH RESAMPLE", 102),
        ("CREATE STATISTICS s2 ON t (w) WITH INCREMENTAL = ON", 40517),
        (
            "CREATE STATISTICS s2 ON t (w) WITH PERSIST_SAMPLE_PERCENT = ON",
            40517,
        ),
        ("CREATE STATISTICS s2 ON t (w) WHERE w > 3", 40517),
        (
            "CREATE TABLE w2 (k INT, s VARCHAR(2000)); CREATE STATISTICS s2 ON w2 (s)",
            40517,
        ),
        ("UPDATE STATISTICS nosuch", 2706),
        ("UPDATE STATISTICS t nosuch", 2727),
        ("UPDATE STATISTICS t (st, nosuch)", 2727),
        ("UPDATE STATISTICS t WITH RESAMPLE, FULLSCAN", 1052),
        ("UPDATE STATISTICS t WITH ALL, COLUMNS", 1052),
        ("UPDATE STATISTICS t WITH MAXDOP = 2", 40517),
        (
            "UPDATE STATISTICS t WITH NORECOMPUTE, AUTO_DROP = ON",
            40517,
        ),
        ("UPDATE STATISTICS t WITH RESAMPLE ON PARTITIONS (1)", 40517),
        ("BEGIN TRAN; UPDATE STATISTICS t WITH NORECOMPUTE", 40517),
        ("DROP STATISTICS t.nosuch", 3701),
        ("DROP STATISTICS st", 1053),
        ("DBCC SHOW_STATISTICS ('t')", 2583),
        ("DBCC SHOW_STATISTICS ('nosuch', st)", 2501),
        ("DBCC SHOW_STATISTICS ('t', nosuch)", 2767),
        ("DBCC SHOW_STATISTICS ('t', st) WITH NOSUCH", 195),
        ("DBCC SHOW_STATISTICS ('t', st) WITH STATS_STREAM", 40517),
    ] {
        assert_eq!(numbers(&mut c, sql), [want], "{sql}");
        run(&mut c, "IF @@TRANCOUNT > 0 ROLLBACK");
    }
    let after = table(
        &mut c,
        "SELECT name, stats_id, CAST(no_recompute AS INT) FROM sys.stats",
    );
    assert_eq!(before, after);
    assert_eq!(hist, histogram(&mut c, "st"));
    let e = common::tds::errors(&mut c, "UPDATE STATISTICS nosuch");
    assert_eq!(e, [(2706, 11, 6)]);
}

/// Statistics built and dropped by one session while two others insert: the writers
/// never wait for a build's scan (they go on inserting while builds run), nothing fails,
/// and once they stop a FULLSCAN build counts exactly the rows there are.
#[test]
fn builds_beside_writers() {
    let (s, mut c) = start_in_database("stats-writers", "sw", "");
    fill(&mut c, 2000);
    let stop = Arc::new(AtomicBool::new(false));
    let inserted = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (addr, stop, inserted) = (s.addr.clone(), stop.clone(), inserted.clone());
            thread::spawn(move || {
                let mut c = connect_at(&addr, Some("sw"), 60).unwrap();
                let mut id = 100_000 + w * 1_000_000;
                while !stop.load(Ordering::Relaxed) {
                    run(
                        &mut c,
                        &format!("INSERT t VALUES ({id}, {id} % 10, {id}, 'x')"),
                    );
                    inserted.fetch_add(1, Ordering::Relaxed);
                    id += 1;
                }
            })
        })
        .collect();
    let mut during = 0;
    for round in 0..6 {
        let before = inserted.load(Ordering::Relaxed);
        run(
            &mut c,
            &format!("CREATE STATISTICS s{round} ON t (w, v) WITH FULLSCAN"),
        );
        run(&mut c, "UPDATE STATISTICS t WITH FULLSCAN");
        if round % 2 == 1 {
            run(&mut c, &format!("DROP STATISTICS t.s{round}"));
        }
        during += inserted.load(Ordering::Relaxed) - before;
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    assert!(
        during > 0,
        "the writers went on while statistics were built"
    );
    run(&mut c, "UPDATE STATISTICS t s4 WITH FULLSCAN");
    let rows = count(&mut c, "SELECT COUNT(*) FROM t");
    assert_eq!(rows, 2000 + inserted.load(Ordering::Relaxed) as i64);
    assert_eq!(header(&mut c, "s4").map(|h| (h.0, h.1)), Some((rows, rows)));
    let sum: f64 = histogram(&mut c, "s4").iter().map(|s| s.1 + s.2).sum();
    assert_eq!(sum, rows as f64);
    assert_eq!(
        count(
            &mut c,
            "SELECT COUNT(*) FROM sys.stats WHERE user_created = 1"
        ),
        3
    );
}

/// A CREATE STATISTICS that returned is durable: after a kill -9 and recovery, sys.stats
/// and DBCC SHOW_STATISTICS show the same object, header and histogram; an index's
/// statistics too; and the database checks clean.
#[test]
fn statistics_survive_kill_9_and_recovery() {
    let (s, mut c) = start_in_database("stats-kill9", "sk", "");
    fill(&mut c, 1000);
    run(&mut c, "CREATE INDEX ix_c ON t (c)");
    run(
        &mut c,
        "CREATE STATISTICS st ON t (v, c) WITH SAMPLE 50 PERCENT, NORECOMPUTE",
    );
    let listed = "SELECT name, stats_id, CAST(user_created AS INT), CAST(no_recompute AS INT) \
                  FROM sys.stats ORDER BY stats_id";
    let before = (
        table(&mut c, listed),
        header(&mut c, "st"),
        histogram(&mut c, "st"),
        histogram(&mut c, "ix_c"),
        density(&mut c, "ix_c"),
    );
    drop(c);
    let s = restart(s);
    let mut c = s.connect_to(Some("sk"));
    let after = (
        table(&mut c, listed),
        header(&mut c, "st"),
        histogram(&mut c, "st"),
        histogram(&mut c, "ix_c"),
        density(&mut c, "ix_c"),
    );
    assert_eq!(before, after);
    assert_eq!(before.0.len(), 3);
    assert_checkdb_clean(&mut c, "sk", "after recovery");
}

/// STATS_DATE and sys.dm_db_stats_properties read the same objects: NULLs for statistics
/// never built (no row for ones not there), the build's Rows and Steps once built, and a
/// modification counter that counts the rows other sessions change after the build and
/// starts again at the next one.
#[test]
fn stats_date_and_stats_properties() {
    let (s, mut c) = start_in_database("stats-props", "sp", "");
    run(
        &mut c,
        "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v INT NOT NULL)",
    );
    run(&mut c, "INSERT t VALUES (1, 1), (2, 2)");
    run(&mut c, "CREATE STATISTICS st ON t (v)");
    let props = "SELECT s.name, ISNULL(p.rows, -1), ISNULL(p.steps, -1), \
                 ISNULL(p.modification_counter, -1), \
                 CASE WHEN STATS_DATE(s.object_id, s.stats_id) IS NULL THEN 0 ELSE 1 END \
                 FROM sys.stats AS s \
                 CROSS APPLY sys.dm_db_stats_properties(s.object_id, s.stats_id) AS p \
                 ORDER BY s.stats_id";
    let pk = table(&mut c, "SELECT name FROM sys.stats WHERE stats_id = 1")[0].clone();
    assert_eq!(
        table(&mut c, props),
        [format!("{pk},-1,-1,-1,0"), "st,2,2,0,1".into()]
    );
    let mut other = s.connect_to(Some("sp"));
    run(
        &mut other,
        "INSERT t VALUES (3, 3); UPDATE t SET v = 0 WHERE id = 1; DELETE t WHERE id = 2",
    );
    assert_eq!(table(&mut c, props)[1], "st,2,2,3,1");
    run(&mut c, "UPDATE STATISTICS t");
    assert_eq!(
        table(&mut c, props),
        [format!("{pk},2,2,0,1"), "st,2,2,0,1".into()]
    );
    let none = "SELECT COUNT(*) FROM sys.dm_db_stats_properties(OBJECT_ID('t'), 99)";
    assert_eq!(count(&mut c, none), 0);
    assert_eq!(numbers(&mut c, "SELECT STATS_DATE(OBJECT_ID('t'))"), [174]);
    assert_eq!(
        table(
            &mut c,
            "SELECT ISNULL(CONVERT(VARCHAR(30), STATS_DATE(1, 1)), 'none')"
        ),
        ["none"]
    );
}
