//! Table DDL waits through the lock manager with SQL Server's schema locks: DROP TABLE,
//! TRUNCATE TABLE and ALTER TABLE take Sch-M on the table's OBJECT resource before they
//! change it, and a read that locks no rows (NOLOCK) holds Sch-S for its statement. So the
//! wait is a lock wait like any other: sys.dm_exec_requests, sys.dm_tran_locks and
//! sys.dm_os_waiting_tasks show it, SET LOCK_TIMEOUT ends it (1222), the deadlock monitor
//! sees it (1205), an attention ends it. Every test runs real TDS sessions side by side.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use extentdb_sql::types::Value;
use extentdb_tds::client::Client;

mod common;
use common::tds::{all_rows, assert_checkdb_clean, connect_at, int, numbers, run, Server};

fn value(c: &mut Client, sql: &str) -> i64 {
    int(&all_rows(&run(c, sql))[0][0])
}

fn text(v: &Value) -> String {
    match v {
        Value::Text(t) => t.trim().to_string(),
        other => format!("{other:?}"),
    }
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(15), "timed out: {what}");
        thread::sleep(Duration::from_millis(50));
    }
}

/// A database `sl` with t (clustered, 3 rows), h (a heap, 2 rows) and u (clustered).
fn setup(s: &Server) {
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE sl");
    run(
        &mut c,
        "USE sl; CREATE TABLE t (k INT NOT NULL PRIMARY KEY, v INT NOT NULL); \
         CREATE TABLE h (k INT NOT NULL, v INT NOT NULL); \
         CREATE TABLE u (k INT NOT NULL PRIMARY KEY, v INT NOT NULL); \
         INSERT INTO t VALUES (1, 10), (2, 20), (3, 30); INSERT INTO h VALUES (1, 1), (2, 2); \
         INSERT INTO u VALUES (1, 100), (2, 200)",
    );
}

/// A batch run on its own connection in a thread; the channel gets the numbers of its
/// errors when it ends (the caller decides how long to wait for that).
fn spawn_batch(s: &Server, setup: &str, sql: &str) -> (i64, mpsc::Receiver<Vec<i32>>) {
    let (spid_tx, spid_rx) = mpsc::channel();
    let (tx, rx) = mpsc::channel();
    let (addr, setup, sql) = (s.addr.clone(), setup.to_string(), sql.to_string());
    thread::spawn(move || {
        let mut c = connect_at(&addr, Some("sl"), 60).unwrap();
        if !setup.is_empty() {
            run(&mut c, &setup);
        }
        spid_tx.send(value(&mut c, "SELECT @@SPID")).unwrap();
        let r = c.batch(&sql).unwrap();
        let _ = tx.send(r.errors().map(|e| e.number).collect());
    });
    (spid_rx.recv().unwrap(), rx)
}

/// The rows of sys.dm_tran_locks on OBJECT resources: (mode, status, session).
fn object_locks(c: &mut Client) -> Vec<(String, String, i64)> {
    all_rows(&run(
        c,
        "SELECT request_mode, request_status, request_session_id FROM sys.dm_tran_locks \
         WHERE resource_type = 'OBJECT' AND resource_database_id = DB_ID('sl')",
    ))
    .iter()
    .map(|r| (text(&r[0]), text(&r[1]), int(&r[2])))
    .collect()
}

/// `spid`'s request as sys.dm_exec_requests shows it: (wait_type, blocking_session_id).
fn request(c: &mut Client, spid: i64) -> Option<(String, i64)> {
    all_rows(&run(
        c,
        &format!(
            "SELECT wait_type, blocking_session_id FROM sys.dm_exec_requests \
             WHERE session_id = {spid}"
        ),
    ))
    .first()
    .map(|r| (text(&r[0]), int(&r[1])))
}

/// DROP TABLE waits for a transaction that changed the table as a lock wait a DBA can
/// see: LCK_M_SCH_M in sys.dm_exec_requests and sys.dm_os_waiting_tasks, blocked by the
/// writer, Sch-M WAIT on the OBJECT in sys.dm_tran_locks; the commit lets it through and
/// the database checks clean. (Before schema locks the wait was a sleep loop no view saw.)
#[test]
fn drop_table_waits_for_a_writer_as_a_visible_sch_m_wait() {
    let s = Server::start("schm-drop", &[]);
    setup(&s);
    let mut a = s.connect_to(Some("sl"));
    let a_spid = value(&mut a, "SELECT @@SPID");
    run(&mut a, "BEGIN TRAN; INSERT INTO t VALUES (4, 40)");
    let (b_spid, b_done) = spawn_batch(&s, "", "DROP TABLE t");
    let mut dba = s.connect_to(Some("sl"));
    wait_until("B waits on LCK_M_SCH_M", || {
        request(&mut dba, b_spid) == Some(("LCK_M_SCH_M".into(), a_spid))
    });
    let locks = object_locks(&mut dba);
    assert!(
        locks.contains(&("Sch-M".into(), "WAIT".into(), b_spid)),
        "{locks:?}"
    );
    assert!(
        locks.contains(&("IX".into(), "GRANT".into(), a_spid)),
        "{locks:?}"
    );
    let tasks = all_rows(&run(
        &mut dba,
        &format!(
            "SELECT wait_type, blocking_session_id FROM sys.dm_os_waiting_tasks \
             WHERE session_id = {b_spid}"
        ),
    ));
    assert_eq!(
        tasks,
        vec![vec![
            Value::Text("LCK_M_SCH_M".into()),
            Value::SmallInt(a_spid as i16)
        ]]
    );
    let who2 = all_rows(&run(&mut dba, "EXEC sp_who2"));
    assert!(
        who2.iter()
            .any(|r| text(&r[0]) == b_spid.to_string() && text(&r[4]) == a_spid.to_string()),
        "sp_who2 BlkBy: {who2:?}"
    );
    assert!(b_done.try_recv().is_err(), "DROP went ahead of A");
    run(&mut a, "COMMIT");
    let errs = b_done
        .recv_timeout(Duration::from_secs(10))
        .expect("DROP ends once A commits");
    assert_eq!(errs, Vec::<i32>::new());
    assert_eq!(numbers(&mut a, "SELECT COUNT(*) FROM t"), vec![208]);
    assert!(object_locks(&mut dba).is_empty(), "every lock let go");
    assert_checkdb_clean(&mut dba, "sl", "at the end");
}

/// SET LOCK_TIMEOUT ends a schema-lock wait with 1222 and changes nothing: TRUNCATE,
/// ALTER TABLE ... SET (LOCK_ESCALATION) and DROP TABLE of a table an open transaction
/// holds leave its rows and its option as they were; the waiter's own transaction stays
/// open. (Before, TRUNCATE polled without end and ALTER TABLE did not wait at all.)
#[test]
fn lock_timeout_ends_a_truncate_or_alter_with_1222() {
    let s = Server::start("schm-timeout", &[]);
    setup(&s);
    let mut a = s.connect_to(Some("sl"));
    run(&mut a, "BEGIN TRAN; UPDATE h SET v = 5 WHERE k = 1");
    let (_, b_done) = spawn_batch(
        &s,
        "SET LOCK_TIMEOUT 200",
        "TRUNCATE TABLE h; ALTER TABLE h SET (LOCK_ESCALATION = DISABLE); \
         BEGIN TRAN; DROP TABLE h; IF @@TRANCOUNT = 1 COMMIT",
    );
    let started = Instant::now();
    let errs = b_done
        .recv_timeout(Duration::from_secs(10))
        .expect("LOCK_TIMEOUT ends the waits");
    // Each statement waited its 200 ms, then the batch went on (in its transaction).
    assert_eq!(errs, vec![1222, 1222, 1222]);
    assert!(started.elapsed() >= Duration::from_millis(500));
    let mut c = s.connect_to(Some("sl"));
    assert_eq!(
        value(
            &mut c,
            "SELECT COUNT(*) FROM sys.dm_tran_locks WHERE request_status = 'WAIT'"
        ),
        0
    );
    run(&mut a, "COMMIT");
    assert_eq!(
        all_rows(&run(&mut c, "SELECT k, v FROM h ORDER BY k")),
        vec![
            vec![Value::Int(1), Value::Int(5)],
            vec![Value::Int(2), Value::Int(2)]
        ],
        "TRUNCATE changed nothing"
    );
    assert_eq!(
        all_rows(&run(
            &mut c,
            "SELECT lock_escalation_desc FROM sys.tables WHERE name = 'h'"
        )),
        vec![vec![Value::Text("TABLE".into())]],
        "ALTER TABLE changed nothing"
    );
    // Nobody in the way: the session's own intent lock on the table converts to Sch-M
    // instead of waiting on itself, held until its transaction ends; its ROLLBACK brings
    // the dropped table back whole.
    run(
        &mut c,
        "SET LOCK_TIMEOUT 200; BEGIN TRAN; SELECT COUNT(*) FROM h WITH (HOLDLOCK); \
         DROP TABLE h",
    );
    let mine = value(&mut c, "SELECT @@SPID");
    let locks = object_locks(&mut c);
    assert_eq!(locks, vec![("Sch-M".into(), "GRANT".into(), mine)]);
    run(&mut c, "ROLLBACK");
    assert_eq!(value(&mut c, "SELECT COUNT(*) FROM h"), 2);
    run(
        &mut c,
        "ALTER TABLE h SET (LOCK_ESCALATION = DISABLE); TRUNCATE TABLE h",
    );
    assert_eq!(value(&mut c, "SELECT COUNT(*) FROM h"), 0);
    assert_checkdb_clean(&mut c, "sl", "at the end");
}

/// A deadlock through a schema lock is found: A holds a row of u and waits for a row of
/// t B holds; B's DROP TABLE u waits for A's intent lock on u. The session with the lower
/// DEADLOCK_PRIORITY gets 1205 and its transaction is rolled back; the other finishes;
/// no committed change is lost. Both ways round. (Before, the two waited for ever.)
#[test]
fn a_deadlock_through_sch_m_has_a_victim() {
    let s = Server::start("schm-deadlock", &[]);
    setup(&s);
    for dropper_loses in [true, false] {
        let mut a = s.connect_to(Some("sl"));
        let mut b = s.connect_to(Some("sl"));
        let (low, other) = if dropper_loses {
            (&mut b, &mut a)
        } else {
            (&mut a, &mut b)
        };
        run(low, "SET DEADLOCK_PRIORITY LOW");
        run(other, "SET DEADLOCK_PRIORITY NORMAL");
        run(&mut a, "BEGIN TRAN; UPDATE u SET v = v + 1 WHERE k = 1");
        run(&mut b, "BEGIN TRAN; UPDATE t SET v = v + 1 WHERE k = 2");
        let (a_tx, a_done) = mpsc::channel();
        let a_thread = thread::spawn(move || {
            let r = a.batch("UPDATE t SET v = v + 100 WHERE k = 2").unwrap();
            let errs: Vec<i32> = r.errors().map(|e| e.number).collect();
            let _ = a_tx.send(errs.clone());
            if errs.is_empty() {
                run(&mut a, "COMMIT");
            }
            a
        });
        thread::sleep(Duration::from_millis(200));
        let (b_tx, b_done) = mpsc::channel();
        let b_thread = thread::spawn(move || {
            let r = b.batch("DROP TABLE u").unwrap();
            let errs: Vec<i32> = r.errors().map(|e| e.number).collect();
            let _ = b_tx.send(errs.clone());
            if errs.is_empty() {
                run(&mut b, "COMMIT");
            }
            b
        });
        let b_errs = b_done
            .recv_timeout(Duration::from_secs(10))
            .expect("the deadlock is resolved");
        let a_errs = a_done
            .recv_timeout(Duration::from_secs(10))
            .expect("the survivor goes on");
        let mut a = a_thread.join().unwrap();
        let mut b = b_thread.join().unwrap();
        assert_eq!(value(&mut a, "SELECT @@TRANCOUNT"), 0);
        assert_eq!(value(&mut b, "SELECT @@TRANCOUNT"), 0);
        let mut c = s.connect_to(Some("sl"));
        if dropper_loses {
            assert_eq!((a_errs, b_errs), (vec![], vec![1205]));
            // B's change of t rolled back, A's committed on top of the original 20.
            assert_eq!(value(&mut c, "SELECT v FROM t WHERE k = 2"), 120);
            assert_eq!(value(&mut c, "SELECT v FROM u WHERE k = 1"), 101);
        } else {
            assert_eq!((a_errs, b_errs), (vec![1205], vec![]));
            assert_eq!(value(&mut c, "SELECT v FROM t WHERE k = 2"), 121);
            assert_eq!(numbers(&mut c, "SELECT COUNT(*) FROM u"), vec![208]);
        }
        assert!(object_locks(&mut c).is_empty(), "every lock let go");
        assert_checkdb_clean(&mut c, "sl", "at the end");
    }
}

/// A NOLOCK scan holds Sch-S on its table for its statement: while its client stalls in
/// the middle of the result, sys.dm_tran_locks shows the Sch-S granted, an uncommitted
/// writer goes on beside it (Sch-S is compatible with IX), and DROP TABLE waits (Sch-M,
/// blocked by the reader) instead of pulling the pages from under the scan, which
/// returns every row. Inside a transaction the Sch-S ends with the statement.
#[test]
fn a_nolock_scan_holds_sch_s_and_drop_waits_for_it() {
    const ROWS: i64 = 8_000;
    let s = Server::start("schm-nolock", &[]);
    setup(&s);
    let mut r = s.connect_to(Some("sl"));
    run(
        &mut r,
        &format!(
            "CREATE TABLE big (id INT NOT NULL, pad CHAR(4000) NOT NULL); SET NOCOUNT ON; \
             DECLARE @i INT = 0; BEGIN TRAN; \
             WHILE @i < {ROWS} BEGIN INSERT INTO big VALUES (@i, 'p'); SET @i += 1; END; COMMIT"
        ),
    );
    // Inside a transaction, a NOLOCK read's Sch-S goes with its statement.
    run(&mut r, "BEGIN TRAN; SELECT COUNT(*) FROM t WITH (NOLOCK)");
    let mut dba = s.connect_to(Some("sl"));
    assert!(object_locks(&mut dba).is_empty());
    run(&mut r, "COMMIT");
    let r_spid = value(&mut r, "SELECT @@SPID");
    // About 32 MB of rows: far more than the sockets buffer, so the scan stalls.
    r.send_batch("SELECT id, pad FROM big WITH (NOLOCK)")
        .unwrap();
    wait_until("the reader's Sch-S", || {
        object_locks(&mut dba).contains(&("Sch-S".into(), "GRANT".into(), r_spid))
    });
    // A writer's IX goes beside the Sch-S, and the reader does not wait for its row.
    let mut w = s.connect_to(Some("sl"));
    run(
        &mut w,
        "BEGIN TRAN; INSERT INTO big VALUES (-1, 'uncommitted')",
    );
    assert_eq!(
        value(
            &mut dba,
            "SELECT COUNT(*) FROM big WITH (NOLOCK) WHERE id = -1"
        ),
        1
    );
    run(&mut w, "ROLLBACK");
    let (d_spid, d_done) = spawn_batch(&s, "", "DROP TABLE big");
    wait_until("DROP waits for the reader", || {
        request(&mut dba, d_spid) == Some(("LCK_M_SCH_M".into(), r_spid))
    });
    let locks = object_locks(&mut dba);
    assert!(
        locks.contains(&("Sch-M".into(), "WAIT".into(), d_spid)),
        "{locks:?}"
    );
    assert!(d_done.try_recv().is_err(), "DROP went ahead of the scan");
    let got = r.read_response().unwrap();
    assert_eq!(got.errors().count(), 0, "{:?}", got.errors().next());
    assert_eq!(all_rows(&got).len() as i64, ROWS, "the scan read every row");
    let errs = d_done
        .recv_timeout(Duration::from_secs(10))
        .expect("DROP ends with the scan");
    assert_eq!(errs, Vec::<i32>::new());
    assert_eq!(numbers(&mut r, "SELECT COUNT(*) FROM big"), vec![208]);
    assert_checkdb_clean(&mut dba, "sl", "at the end");
}

/// An attention ends a DROP TABLE waiting for Sch-M: its request leaves the lock queue,
/// the table and its rows stay, and the session goes on.
#[test]
fn an_attention_ends_a_waiting_drop() {
    let s = Server::start("schm-attn", &[]);
    setup(&s);
    let mut a = s.connect_to(Some("sl"));
    let a_spid = value(&mut a, "SELECT @@SPID");
    run(&mut a, "BEGIN TRAN; DELETE FROM t WHERE k = 3");
    let mut b = s.connect_to(Some("sl"));
    let b_spid = value(&mut b, "SELECT @@SPID");
    b.send_batch("DROP TABLE t").unwrap();
    let mut dba = s.connect_to(Some("sl"));
    wait_until("B waits on LCK_M_SCH_M", || {
        request(&mut dba, b_spid) == Some(("LCK_M_SCH_M".into(), a_spid))
    });
    let started = Instant::now();
    b.attention().unwrap();
    let r = b.read_response().unwrap();
    if !r.attention_acknowledged() {
        assert!(b.read_response().unwrap().attention_acknowledged());
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        !object_locks(&mut dba)
            .iter()
            .any(|l| l.1 != "GRANT" || l.2 == b_spid),
        "B's request left the queue"
    );
    assert_eq!(value(&mut b, "SELECT 7"), 7);
    run(&mut a, "COMMIT");
    assert_eq!(value(&mut b, "SELECT COUNT(*) FROM t"), 2, "t stays");
    assert_checkdb_clean(&mut b, "sl", "at the end");
}

/// A read takes its table's intent lock before its first row, as SQL Server does: a
/// REPEATABLE READ transaction that read an empty table keeps IS on it, and DROP TABLE
/// waits for that transaction; a READ COMMITTED read inside a transaction lets its IS go
/// with the statement, and DROP goes through.
#[test]
fn a_read_of_no_rows_holds_the_table_as_its_isolation_level_says() {
    let s = Server::start("schema_locks_empty", &[]);
    setup(&s);
    let mut a = connect_at(&s.addr, Some("sl"), 60).unwrap();
    let mut c = connect_at(&s.addr, Some("sl"), 60).unwrap();
    run(
        &mut a,
        "CREATE TABLE e (k INT NOT NULL PRIMARY KEY); CREATE TABLE e2 (k INT)",
    );
    let spid_a = value(&mut a, "SELECT @@SPID");
    run(
        &mut a,
        "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; BEGIN TRAN; SELECT k FROM e",
    );
    assert_eq!(
        object_locks(&mut c),
        vec![("IS".into(), "GRANT".into(), spid_a)]
    );
    let (spid_b, done) = spawn_batch(&s, "", "DROP TABLE e");
    wait_until("DROP to wait for the reader", || {
        request(&mut c, spid_b).is_some_and(|(w, by)| w == "LCK_M_SCH_M" && by == spid_a)
    });
    run(&mut a, "COMMIT");
    let errors = done.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    // READ COMMITTED: the IS is the statement's; the transaction keeps nothing on e2.
    run(
        &mut a,
        "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; BEGIN TRAN; SELECT k FROM e2",
    );
    assert!(
        object_locks(&mut c).is_empty(),
        "{:?}",
        object_locks(&mut c)
    );
    run(&mut c, "SET LOCK_TIMEOUT 2000; DROP TABLE e2");
    run(&mut a, "COMMIT");
    assert_checkdb_clean(&mut c, "sl", "at the end");
}
