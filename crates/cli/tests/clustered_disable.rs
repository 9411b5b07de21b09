//! ALTER INDEX ... DISABLE of a clustered index (exec/alter_index.rs, storage's index.rs
//! invariant 10), through real TDS sessions: the table's rows stay on disk but every
//! statement that reads or changes them gets Msg 8655 and changes nothing, its
//! nonclustered indexes are disabled with it, a statement queued behind the DISABLE's
//! Sch-M gets 8655 too, REBUILD brings every row back (a clustered-only REBUILD leaves the
//! nonclustered indexes disabled, ALL rebuilds them), and the mark survives a kill -9.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use extentdb_tds::client::Client;

mod common;
use common::tds::{
    all_rows, assert_checkdb_clean, connect_at, errors, int, numbers, restart, run,
    start_in_database, table,
};

/// A clustered table of 200 rows with a nonclustered index, and a heap beside it.
const SETUP: &str = "CREATE TABLE t (id INT NOT NULL, v INT NOT NULL, pad VARCHAR(100), \
         CONSTRAINT t_pk PRIMARY KEY CLUSTERED (id)); \
     CREATE INDEX t_v ON t (v); \
     CREATE TABLE src (id INT PRIMARY KEY, v INT); \
     INSERT INTO src VALUES (1, 1), (500, 5); \
     DECLARE @i INT = 1; \
     WHILE @i <= 200 BEGIN \
         INSERT INTO t VALUES (@i, @i % 17, REPLICATE('x', @i % 90)); SET @i += 1; \
     END";

/// Every row of t, as text, in key order (read through the clustered index).
const ALL_ROWS: &str = "SELECT id, v, pad FROM t ORDER BY id";

/// sys.indexes' name and is_disabled of t's indexes, by index id.
fn disabled(c: &mut Client) -> Vec<String> {
    table(
        c,
        "SELECT name, is_disabled FROM sys.indexes WHERE object_id = OBJECT_ID('t') \
         ORDER BY index_id",
    )
}

fn count(c: &mut Client, sql: &str) -> i64 {
    int(&all_rows(&run(c, sql))[0][0])
}

/// Each statement that reads or changes t gets 8655 (severity 16, state 1) alone.
fn assert_refused(c: &mut Client) {
    for sql in [
        "SELECT * FROM t",
        "SELECT COUNT(*) FROM t",
        "SELECT v FROM t WHERE id = 5",
        "SELECT id FROM t WHERE v = 3",
        "SELECT s.id FROM src AS s JOIN t ON t.id = s.id",
        "INSERT INTO t VALUES (1000, 1, 'a')",
        "INSERT INTO t SELECT id + 1000, v, NULL FROM src",
        "UPDATE t SET v = 0 WHERE id = 5",
        "UPDATE t SET v = 0",
        "DELETE FROM t WHERE id = 5",
        "DELETE FROM t",
        "MERGE t USING src AS s ON t.id = s.id \
         WHEN MATCHED THEN UPDATE SET v = s.v \
         WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v, NULL);",
        "TRUNCATE TABLE t",
        "CREATE INDEX t_new ON t (pad)",
        "ALTER INDEX t_v ON t REBUILD",
    ] {
        assert_eq!(errors(c, sql), [(8655, 16, 1)], "{sql}");
    }
}

/// DISABLE of the clustered index: every statement on the table gets 8655 with SQL
/// Server's text, from another session too, and changes nothing; the nonclustered index
/// is disabled; REORGANIZE is 1973; CHECKDB is clean; a clustered-only REBUILD brings
/// every row back with t_v still disabled, and ALL enables t_v.
#[test]
fn a_disabled_clustered_table_refuses_every_statement() {
    let (s, mut c) = start_in_database("cdis-stmts", "cdis", SETUP);
    let before = table(&mut c, ALL_ROWS);
    assert_eq!(before.len(), 200);
    run(&mut c, "ALTER INDEX t_pk ON t DISABLE");
    assert_eq!(disabled(&mut c), ["t_pk,1", "t_v,1"]);
    let r = c.batch("SELECT * FROM t").unwrap();
    let texts: Vec<String> = r.errors().map(|e| e.text.clone()).collect();
    assert_eq!(
        texts,
        [
            "The query processor is unable to produce a plan because the index 't_pk' on \
          table or view 't' is disabled."
        ]
    );
    let mut other = s.connect_to(Some("cdis"));
    assert_refused(&mut c);
    assert_refused(&mut other);
    assert_eq!(
        numbers(&mut other, "ALTER INDEX t_pk ON t REORGANIZE"),
        [1973]
    );
    // A second DISABLE changes nothing; the other table is untouched.
    run(&mut other, "ALTER INDEX ALL ON t DISABLE");
    assert_eq!(count(&mut other, "SELECT COUNT(*) FROM src"), 2);
    assert_checkdb_clean(&mut c, "cdis", "while disabled");
    run(&mut other, "ALTER INDEX t_pk ON t REBUILD");
    assert_eq!(disabled(&mut c), ["t_pk,0", "t_v,1"]);
    assert_eq!(table(&mut c, ALL_ROWS), before);
    assert_eq!(count(&mut c, "SELECT COUNT(*) FROM t WHERE v = 3"), 12);
    run(&mut c, "UPDATE t SET v = v + 1 WHERE id = 5");
    run(&mut c, "ALTER INDEX ALL ON t REBUILD");
    assert_eq!(disabled(&mut c), ["t_pk,0", "t_v,0"]);
    assert_eq!(count(&mut c, "SELECT COUNT(*) FROM t WHERE v = 6"), 13);
    assert_checkdb_clean(&mut c, "cdis", "after the rebuilds");
}

/// ALL ... DISABLE on a clustered table disables the table; a table with a FOREIGN KEY,
/// or one that a FOREIGN KEY references, is refused with 40517 (those keys are not yet
/// disabled with it) and changes nothing; while the table is disabled no key is enabled
/// (1989) or added (1776) through its PRIMARY KEY.
#[test]
fn all_disables_the_table_and_keys_are_refused() {
    let (_s, mut c) = start_in_database("cdis-all", "cdis", SETUP);
    run(&mut c, "ALTER INDEX ALL ON t DISABLE");
    assert_eq!(disabled(&mut c), ["t_pk,1", "t_v,1"]);
    assert_eq!(numbers(&mut c, "SELECT COUNT(*) FROM t"), [8655]);
    run(&mut c, "ALTER INDEX ALL ON t REBUILD");
    assert_eq!(count(&mut c, "SELECT COUNT(*) FROM t"), 200);
    run(
        &mut c,
        "CREATE TABLE child (id INT PRIMARY KEY, tid INT CONSTRAINT fk_t REFERENCES t (id))",
    );
    for sql in [
        "ALTER INDEX t_pk ON t DISABLE",
        "ALTER INDEX ALL ON t DISABLE",
        "ALTER INDEX ALL ON child DISABLE",
    ] {
        assert_eq!(numbers(&mut c, sql), [40517], "{sql}");
    }
    assert_eq!(disabled(&mut c), ["t_pk,0", "t_v,0"]);
    // With the key disabled, nothing stops it.
    run(
        &mut c,
        "ALTER TABLE child NOCHECK CONSTRAINT fk_t; ALTER INDEX t_pk ON t DISABLE",
    );
    assert_eq!(numbers(&mut c, "DELETE FROM t WHERE id = 1"), [8655]);
    // No key is enabled or added through the disabled PRIMARY KEY (1989, 1776) until the
    // REBUILD; the key stays disabled after it.
    assert_eq!(
        errors(&mut c, "ALTER TABLE child CHECK CONSTRAINT fk_t"),
        [(1989, 16, 1), (4916, 16, 0)]
    );
    assert_eq!(
        numbers(
            &mut c,
            "ALTER TABLE child ADD CONSTRAINT fk_2 FOREIGN KEY (tid) REFERENCES t (id)"
        ),
        [1776, 1750]
    );
    let keys = "SELECT name, is_disabled FROM sys.foreign_keys ORDER BY name";
    assert_eq!(table(&mut c, keys), ["fk_t,1"]);
    run(&mut c, "ALTER INDEX t_pk ON t REBUILD");
    assert_eq!(table(&mut c, keys), ["fk_t,1"]);
    run(&mut c, "ALTER TABLE child WITH CHECK CHECK CONSTRAINT fk_t");
    assert_eq!(table(&mut c, keys), ["fk_t,0"]);
    assert_eq!(numbers(&mut c, "INSERT INTO child VALUES (1, 9999)"), [547]);
}

/// Runs `sql` in a new session on a thread; the flag says it ended, the join gives its
/// error numbers.
fn spawn(addr: &str, sql: &str) -> (Arc<AtomicBool>, thread::JoinHandle<Vec<i32>>) {
    let done = Arc::new(AtomicBool::new(false));
    let (addr, flag, sql) = (addr.to_string(), done.clone(), sql.to_string());
    let h = thread::spawn(move || {
        let mut s = connect_at(&addr, Some("cdis"), 120).unwrap();
        let got = numbers(&mut s, &sql);
        flag.store(true, Ordering::SeqCst);
        got
    });
    (done, h)
}

/// A reader and a writer that found the table before the DISABLE and queued behind its
/// Sch-M (itself waiting for a writer's open transaction) get 8655 once it is done: the
/// mark is checked when rows are read, not only when the table is named.
#[test]
fn statements_queued_behind_the_disable_get_8655() {
    let (s, mut c) = start_in_database("cdis-wait", "cdis", SETUP);
    let mut writer = s.connect_to(Some("cdis"));
    run(&mut writer, "BEGIN TRAN; UPDATE t SET v = 99 WHERE id = 7");
    let (disable_done, disable) = spawn(&s.addr, "ALTER INDEX t_pk ON t DISABLE");
    thread::sleep(Duration::from_millis(500));
    let (read_done, reader) = spawn(&s.addr, "SELECT COUNT(*) FROM t");
    let (write_done, writer2) = spawn(&s.addr, "UPDATE t SET v = 0 WHERE id = 8");
    thread::sleep(Duration::from_millis(700));
    for (flag, what) in [
        (&disable_done, "the DISABLE"),
        (&read_done, "the reader"),
        (&write_done, "the writer"),
    ] {
        assert!(!flag.load(Ordering::SeqCst), "{what} waited");
    }
    run(&mut writer, "COMMIT");
    assert_eq!(disable.join().unwrap(), Vec::<i32>::new());
    assert_eq!(reader.join().unwrap(), [8655]);
    assert_eq!(writer2.join().unwrap(), [8655]);
    run(&mut c, "ALTER INDEX t_pk ON t REBUILD");
    assert_eq!(count(&mut c, "SELECT v FROM t WHERE id = 7"), 99);
    assert_eq!(count(&mut c, "SELECT v FROM t WHERE id = 8"), 8);
}

/// A committed DISABLE survives a kill -9: after the restart the table is still disabled
/// (8655, sys.indexes) and CHECKDB is clean; REBUILD brings every row back and CHECKDB
/// is clean again.
#[test]
fn a_disabled_table_survives_kill_9() {
    let (s, mut c) = start_in_database("cdis-kill", "cdis", SETUP);
    let before = table(&mut c, ALL_ROWS);
    run(&mut c, "ALTER INDEX t_pk ON t DISABLE");
    drop(c);
    let s = restart(s);
    let mut c = s.connect_to(Some("cdis"));
    assert_eq!(disabled(&mut c), ["t_pk,1", "t_v,1"]);
    assert_eq!(numbers(&mut c, "SELECT * FROM t"), [8655]);
    assert_checkdb_clean(&mut c, "cdis", "after the restart");
    run(&mut c, "ALTER INDEX ALL ON t REBUILD");
    assert_eq!(disabled(&mut c), ["t_pk,0", "t_v,0"]);
    assert_eq!(table(&mut c, ALL_ROWS), before);
    assert_eq!(count(&mut c, "SELECT COUNT(*) FROM t WHERE v = 3"), 12);
    assert_checkdb_clean(&mut c, "cdis", "after the rebuild");
}

/// What else meets a disabled table: DROP INDEX of a nonclustered index goes on (a
/// disabled index can be dropped, as SQL Server's); the PRIMARY KEY's is 3723; CHECKTABLE
/// checks the kept tree; DROP TABLE drops it, and CHECKDB is clean after.
#[test]
fn drop_on_a_disabled_table() {
    let (_s, mut c) = start_in_database("cdis-drop", "cdis", SETUP);
    run(&mut c, "ALTER INDEX t_pk ON t DISABLE");
    assert_eq!(numbers(&mut c, "DROP INDEX t_pk ON t"), [3723]);
    // The kept tree is checked as any table's.
    assert_eq!(errors(&mut c, "DBCC CHECKTABLE ('t')"), []);
    // Catalog views count the kept rows from the allocation unit, reading none.
    let kept = "SELECT rows FROM sys.partitions WHERE object_id = OBJECT_ID('t') AND index_id = 1";
    assert_eq!(count(&mut c, kept), 200);
    run(&mut c, "DROP INDEX t_v ON t");
    assert_eq!(disabled(&mut c), ["t_pk,1"]);
    run(&mut c, "DROP TABLE t");
    assert_eq!(numbers(&mut c, "SELECT * FROM t"), [208]);
    assert_checkdb_clean(&mut c, "cdis", "after the drop");
}
