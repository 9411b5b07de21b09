//! sys.dm_db_index_usage_stats (issue 22) through a real `extentdb serve` and TDS: each
//! statement moves exactly the counters SQL Server's would (a clustered-key seek, a scan, a
//! nonclustered index seek and its lookup, INSERT / UPDATE / DELETE, once per statement and
//! not per row, FOREIGN KEY lookups not at all); sessions running at once add up; DROP
//! INDEX and DROP TABLE remove rows; a restart empties the view; a non-sysadmin login
//! without VIEW SERVER STATE is refused.

mod common;

use std::time::Duration;

use common::tds::{all_rows, connect_at, errors, int, restart, run, start_in_database, Server};
use extentdb_sql::types::Value;
use extentdb_tds::client::Client;

/// One index's (index_id, user_seeks, user_scans, user_lookups, user_updates).
type Counts = (i64, i64, i64, i64, i64);

/// The view's user counters of table `t` in the current database, by index_id.
fn usage(c: &mut Client, t: &str) -> Vec<Counts> {
    let sql = format!(
        "SELECT index_id, user_seeks, user_scans, user_lookups, user_updates \
         FROM sys.dm_db_index_usage_stats \
         WHERE database_id = DB_ID() AND object_id = OBJECT_ID('{t}') ORDER BY index_id"
    );
    all_rows(&run(c, &sql))
        .iter()
        .map(|r| (int(&r[0]), int(&r[1]), int(&r[2]), int(&r[3]), int(&r[4])))
        .collect()
}

const SETUP: &str = "CREATE TABLE t (id INT PRIMARY KEY, b INT, c VARCHAR(10)); \
     CREATE INDEX ix_b ON t (b); \
     INSERT INTO t VALUES (1, 1, 'a'), (2, 2, 'a'), (3, 3, 'a'), (4, 4, 'a'), (5, 5, 'a'), \
     (6, 6, 'a'), (7, 7, 'a'), (8, 8, 'a')";

/// Proves each kind of statement moves exactly SQL Server's counters, step by step: the
/// INSERT updates both indexes once; a point and a range seek on the clustered key are
/// seeks; COUNT(*) is a scan; a seek of ix_b counts a seek there and a lookup on the
/// clustered index; a self join seeking per outer row is one scan and one seek; UPDATE of
/// a column outside ix_b updates only the clustered index, of ix_b's column both; DELETE
/// through ix_b seeks, looks up and updates both.
#[test]
fn each_statement_moves_exactly_its_counters() {
    let (_s, mut c) = start_in_database("ixusage-each", "ixu", SETUP);
    assert_eq!(usage(&mut c, "t"), [(1, 0, 0, 0, 1), (2, 0, 0, 0, 1)]);
    let steps: [(&str, [Counts; 2]); 8] = [
        (
            "SELECT * FROM t WHERE id = 3",
            [(1, 1, 0, 0, 1), (2, 0, 0, 0, 1)],
        ),
        (
            "SELECT * FROM t WHERE id > 2 AND id < 6",
            [(1, 2, 0, 0, 1), (2, 0, 0, 0, 1)],
        ),
        ("SELECT COUNT(*) FROM t", [(1, 2, 1, 0, 1), (2, 0, 0, 0, 1)]),
        (
            "SELECT * FROM t WHERE b = 4",
            [(1, 2, 1, 1, 1), (2, 1, 0, 0, 1)],
        ),
        (
            "SELECT a.id FROM t a JOIN t b2 ON b2.id = a.id",
            [(1, 3, 2, 1, 1), (2, 1, 0, 0, 1)],
        ),
        (
            "UPDATE t SET c = 'x' WHERE id = 2",
            [(1, 4, 2, 1, 2), (2, 1, 0, 0, 1)],
        ),
        (
            "UPDATE t SET b = 103 WHERE id = 3",
            [(1, 5, 2, 1, 3), (2, 1, 0, 0, 2)],
        ),
        (
            "DELETE FROM t WHERE b = 5",
            [(1, 5, 2, 2, 4), (2, 2, 0, 0, 3)],
        ),
    ];
    for (sql, want) in steps {
        run(&mut c, sql);
        assert_eq!(usage(&mut c, "t"), want, "after {sql}");
    }
    // Two statements in one batch count twice; a statement matching no row still counts.
    run(
        &mut c,
        "SELECT * FROM t WHERE id = 1; SELECT * FROM t WHERE id = 99",
    );
    assert_eq!(usage(&mut c, "t")[0], (1, 7, 2, 2, 4));
    // The last_* columns: set for the kinds used, NULL for ix_b's scans and lookups; no
    // system_* use is counted.
    let r = all_rows(&run(
        &mut c,
        "SELECT index_id, \
           CASE WHEN last_user_seek IS NULL THEN 0 ELSE 1 END, \
           CASE WHEN last_user_scan IS NULL THEN 0 ELSE 1 END, \
           CASE WHEN last_user_lookup IS NULL THEN 0 ELSE 1 END, \
           CASE WHEN last_user_update <= GETDATE() THEN 1 ELSE 0 END, \
           system_seeks + system_scans + system_lookups + system_updates, \
           CASE WHEN COALESCE(last_system_seek, last_system_scan, last_system_lookup, \
             last_system_update) IS NULL THEN 0 ELSE 1 END \
         FROM sys.dm_db_index_usage_stats \
         WHERE database_id = DB_ID() AND object_id = OBJECT_ID('t') ORDER BY index_id",
    ));
    let r: Vec<Vec<i64>> = r.iter().map(|r| r.iter().map(int).collect()).collect();
    assert_eq!(r, [[1, 1, 1, 1, 1, 0, 0], [2, 1, 0, 0, 1, 0, 0]]);
}

/// Proves a heap counts on index 0 (a scan, an INSERT, an index seek's RID lookup), that
/// a FOREIGN KEY's lookups of its parent count nowhere while the child's INSERT counts,
/// and that the view joins sys.indexes by name.
#[test]
fn heaps_foreign_keys_and_joins() {
    let (_s, mut c) = start_in_database(
        "ixusage-heap",
        "ixh",
        "CREATE TABLE h (a INT, b INT); CREATE INDEX ix_a ON h (a); \
         CREATE TABLE p (id INT PRIMARY KEY); \
         CREATE TABLE ch (id INT PRIMARY KEY, pid INT REFERENCES p (id))",
    );
    run(&mut c, "INSERT INTO h VALUES (1, 10), (2, 20)");
    run(&mut c, "SELECT * FROM h");
    run(&mut c, "SELECT * FROM h WHERE a = 2");
    assert_eq!(usage(&mut c, "h"), [(0, 0, 1, 1, 1), (2, 1, 0, 0, 1)]);
    let named = all_rows(&run(
        &mut c,
        "SELECT i.name, u.user_seeks FROM sys.dm_db_index_usage_stats u \
         JOIN sys.indexes i ON i.object_id = u.object_id AND i.index_id = u.index_id \
         WHERE u.database_id = DB_ID() AND u.object_id = OBJECT_ID('h') AND u.index_id = 2",
    ));
    assert_eq!(named, [[Value::Text("ix_a".into()), Value::BigInt(1)]]);
    run(&mut c, "INSERT INTO p VALUES (1)");
    assert_eq!(usage(&mut c, "p"), [(1, 0, 0, 0, 1)]);
    run(&mut c, "INSERT INTO ch VALUES (1, 1), (2, 1)");
    assert_eq!(
        usage(&mut c, "p"),
        [(1, 0, 0, 0, 1)],
        "the FOREIGN KEY lookups"
    );
    assert_eq!(usage(&mut c, "ch"), [(1, 0, 0, 0, 1)]);
}

/// Proves four sessions seeking and updating at once give the sum of their counts (each
/// session: 30 point SELECTs and 30 UPDATEs of the clustered key's rows, each UPDATE a
/// seek and an update of the clustered index only).
#[test]
fn sessions_at_once_add_up() {
    let (s, mut c) = start_in_database("ixusage-many", "ixm", SETUP);
    const SESSIONS: i64 = 4;
    const EACH: i64 = 30;
    let workers: Vec<_> = (0..SESSIONS)
        .map(|w| {
            let addr = s.addr.clone();
            std::thread::spawn(move || {
                let mut c = connect_at(&addr, Some("ixm"), 60).unwrap();
                for i in 0..EACH {
                    let id = 1 + (w + i) % 8;
                    run(&mut c, &format!("SELECT c FROM t WHERE id = {id}"));
                    run(&mut c, &format!("UPDATE t SET c = 'w{w}' WHERE id = {id}"));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let n = SESSIONS * EACH;
    assert_eq!(
        usage(&mut c, "t"),
        [(1, 2 * n, 0, 0, 1 + n), (2, 0, 0, 0, 1)]
    );
}

/// Proves DROP INDEX removes the index's row and keeps the table's, DROP TABLE removes
/// the rest, and a restart leaves the view empty for a table used before it.
#[test]
fn drops_and_restart_remove_rows() {
    let (s, mut c) = start_in_database("ixusage-drop", "ixd", SETUP);
    run(&mut c, "SELECT * FROM t WHERE b = 1");
    assert_eq!(usage(&mut c, "t"), [(1, 0, 0, 1, 1), (2, 1, 0, 0, 1)]);
    run(&mut c, "DROP INDEX ix_b ON t");
    assert_eq!(usage(&mut c, "t"), [(1, 0, 0, 1, 1)]);
    run(
        &mut c,
        "CREATE TABLE u (id INT PRIMARY KEY); INSERT INTO u VALUES (1)",
    );
    let oid = int(&all_rows(&run(&mut c, "SELECT OBJECT_ID('u')"))[0][0]);
    run(&mut c, "DROP TABLE u");
    let left = format!(
        "SELECT COUNT(*) FROM sys.dm_db_index_usage_stats \
         WHERE database_id = DB_ID() AND object_id = {oid}"
    );
    assert_eq!(int(&all_rows(&run(&mut c, &left))[0][0]), 0);
    drop(c);
    let s = restart(s);
    let mut c = s.connect_to(Some("ixd"));
    assert_eq!(usage(&mut c, "t"), []);
    run(&mut c, "SELECT COUNT(*) FROM t");
    assert_eq!(usage(&mut c, "t"), [(1, 0, 1, 0, 0)]);
}

/// Proves a login without VIEW SERVER STATE gets SQL Server's 300 and 297, as for the
/// other dynamic management views.
#[test]
fn view_server_state_is_required() {
    let s = Server::start("ixusage-perm", &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "CREATE LOGIN watcher WITH PASSWORD = 'Ixu-Test-Pass-1'",
    );
    let watcher = || {
        let options = extentdb_tds::client::ConnectOptions {
            user: "watcher".into(),
            password: "Ixu-Test-Pass-1".into(),
            timeout: Some(Duration::from_secs(60)),
            ..Default::default()
        };
        Client::connect(&s.addr, &options).unwrap()
    };
    let e = errors(&mut watcher(), "SELECT * FROM sys.dm_db_index_usage_stats");
    assert_eq!(e.iter().map(|e| e.0).collect::<Vec<_>>(), [300, 297]);
    run(&mut c, "GRANT VIEW SERVER STATE TO watcher");
    run(&mut watcher(), "SELECT * FROM sys.dm_db_index_usage_stats");
}
