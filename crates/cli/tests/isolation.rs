//! Sessions side by side (issue 21): what one session's transaction does to another's.
//! Each test runs through real TDS connections to a real server.
//!
//! - Lost update through rollback: A updates a row in an open transaction; B's autocommit
//!   `UPDATE ... SET v = v + 7` of the same row waits for A; A rolls back; B's change is
//!   applied to the committed value and stays.
//! - Concurrent increments: sessions running `UPDATE ... SET v = v + 1` on one row at once
//!   lose none of them (each reads the row it changes under its lock), heap and clustered.
//! - Key-range locks (SERIALIZABLE on a clustered index): a range read keeps INSERTs out
//!   of its range and of the gap up to the next key, an equality that finds nothing keeps
//!   its key out, a scan to the end keeps every key past the last out; rows and keys
//!   elsewhere stay free, and sys.dm_tran_locks shows the RangeS-S, RangeI-N and
//!   RangeX-X locks and the end of the index, `(ffffffffffff)`.

use std::thread;
use std::time::Duration;

use extentdb_sql::types::Value;

mod common;
use common::tds::{all_rows, connect_at, run, Server};

fn value(c: &mut extentdb_tds::client::Client, sql: &str) -> i64 {
    common::tds::int(&all_rows(&run(c, sql))[0][0])
}

fn setup(s: &Server) {
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE iso");
    run(
        &mut c,
        "USE iso; CREATE TABLE heap_t (id INT NOT NULL, v INT NOT NULL); \
         CREATE TABLE clu_t (id INT NOT NULL PRIMARY KEY, v INT NOT NULL); \
         INSERT INTO heap_t VALUES (1, 100), (2, 200); \
         INSERT INTO clu_t VALUES (1, 100), (2, 200)",
    );
}

/// A's rollback never erases B's acknowledged change (it failed on 5f1faaf: B's update
/// was acknowledged at once and A's rollback restored 100).
#[test]
fn rollback_never_erases_another_sessions_commit() {
    let s = Server::start("iso-rollback", &[]);
    setup(&s);
    for table in ["heap_t", "clu_t"] {
        let mut a = s.connect_to(Some("iso"));
        run(
            &mut a,
            &format!("BEGIN TRAN; UPDATE {table} SET v = 999 WHERE id = 1"),
        );
        let addr = s.addr.clone();
        let t = table.to_string();
        let b = thread::spawn(move || {
            let mut b = connect_at(&addr, Some("iso"), 60).unwrap();
            run(&mut b, &format!("UPDATE {t} SET v = v + 7 WHERE id = 1"));
        });
        thread::sleep(Duration::from_millis(300));
        assert!(!b.is_finished(), "{table}: B waits for A's lock");
        run(&mut a, "ROLLBACK");
        b.join().unwrap();
        let mut c = s.connect_to(Some("iso"));
        assert_eq!(
            value(&mut c, &format!("SELECT v FROM {table} WHERE id = 1")),
            107,
            "{table}"
        );
        assert_eq!(
            value(&mut c, &format!("SELECT v FROM {table} WHERE id = 2")),
            200,
            "{table}"
        );
    }
}

/// 4 sessions x 50 autocommit increments of one row: the row ends 200 higher.
#[test]
fn concurrent_increments_are_not_lost() {
    let s = Server::start("iso-increments", &[]);
    setup(&s);
    for table in ["heap_t", "clu_t"] {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (addr, t) = (s.addr.clone(), table.to_string());
                thread::spawn(move || {
                    let mut c = connect_at(&addr, Some("iso"), 60).unwrap();
                    for _ in 0..50 {
                        run(&mut c, &format!("UPDATE {t} SET v = v + 1 WHERE id = 2"));
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        let mut c = s.connect_to(Some("iso"));
        assert_eq!(
            value(&mut c, &format!("SELECT v FROM {table} WHERE id = 2")),
            400,
            "{table}"
        );
    }
}

/// Many sessions incrementing a few hot rows at once, each change durable before its lock
/// goes, lose none. The statements scan (`id + 0`), and the hot rows come first, before
/// 3,000 others of the same chunk: at 3a88031 a chunk was read whole and its rows locked
/// afterwards, so a session read a hot row, another changed it, committed and let its lock
/// go meanwhile, and the first then locked the row and wrote its increment over the stale
/// value (the TPC-B benchmark found branches' balances short of the history). Rows are now
/// read and locked as one step, under their page's latch.
#[test]
fn hot_rows_lose_no_increment() {
    let s = Server::start("iso-hot", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE hot");
    run(
        &mut c,
        "USE hot; CREATE TABLE heap_t (id INT NOT NULL, v INT NOT NULL); \
         CREATE TABLE clu_t (id INT NOT NULL PRIMARY KEY, v INT NOT NULL); \
         INSERT INTO heap_t VALUES (1, 0), (2, 0), (3, 0); \
         INSERT INTO clu_t VALUES (1, 0), (2, 0), (3, 0); \
         DECLARE @i INT = 100; \
         WHILE @i < 3100 BEGIN \
           INSERT INTO heap_t VALUES (@i, 0); INSERT INTO clu_t VALUES (@i, 0); \
           SET @i = @i + 1; \
         END",
    );
    const WORKERS: i64 = 8;
    const EACH: i64 = 150;
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let addr = s.addr.clone();
            thread::spawn(move || {
                let mut c = connect_at(&addr, Some("hot"), 120).unwrap();
                for i in 0..EACH {
                    let (id, t) = (1 + (w + i) % 3, ["heap_t", "clu_t"][(i % 2) as usize]);
                    run(
                        &mut c,
                        &format!("UPDATE {t} SET v = v + 1 WHERE id + 0 = {id}"),
                    );
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    for t in ["heap_t", "clu_t"] {
        let total = value(&mut c, &format!("SELECT SUM(v) FROM hot.dbo.{t}"));
        assert_eq!(total, WORKERS * EACH / 2, "{t}");
    }
}

fn spawn_batch(s: &Server, sql: &'static str) -> thread::JoinHandle<Vec<(i32, Vec<Vec<Value>>)>> {
    let addr = s.addr.clone();
    thread::spawn(move || {
        let mut c = connect_at(&addr, Some("iso"), 60).unwrap();
        let r = c.batch(sql).unwrap();
        let errs: Vec<i32> = r.errors().map(|e| e.number).collect();
        vec![(errs.first().copied().unwrap_or(0), all_rows(&r))]
    })
}

/// READ COMMITTED waits for another session's uncommitted change and reads what was
/// committed; NOLOCK and READ UNCOMMITTED read it at once (it failed on 5f1faaf: every
/// read saw the uncommitted 999).
#[test]
fn readers_wait_for_uncommitted_changes() {
    let s = Server::start("iso-readers", &[]);
    setup(&s);
    let mut a = s.connect_to(Some("iso"));
    run(
        &mut a,
        "BEGIN TRAN; UPDATE clu_t SET v = 999 WHERE id = 1; UPDATE heap_t SET v = 999 WHERE id = 1",
    );
    let mut dirty = s.connect_to(Some("iso"));
    assert_eq!(
        value(&mut dirty, "SELECT v FROM clu_t WITH (NOLOCK) WHERE id = 1"),
        999
    );
    run(
        &mut dirty,
        "SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED",
    );
    assert_eq!(value(&mut dirty, "SELECT v FROM heap_t WHERE id = 1"), 999);
    let reader = spawn_batch(
        &s,
        "SELECT v FROM clu_t WHERE id = 1; SELECT SUM(v) FROM heap_t",
    );
    thread::sleep(Duration::from_millis(300));
    assert!(!reader.is_finished(), "READ COMMITTED waits for A");
    run(&mut a, "ROLLBACK");
    let got = reader.join().unwrap();
    assert_eq!(got[0].0, 0);
    assert_eq!(got[0].1, vec![vec![Value::Int(100)], vec![Value::Int(300)]]);
}

/// A row another session deleted in a transaction still open is waited for, not skipped,
/// by a scan and by a seek (as SQL Server's READ COMMITTED blocks behind an uncommitted
/// DELETE): once that transaction rolls back, the readers see the row. Skipping it read an
/// aborted transaction's delete (G1a); NOLOCK still reads past it at once.
#[test]
fn readers_wait_for_an_uncommitted_delete() {
    let s = Server::start("iso-ghost", &[]);
    setup(&s);
    let mut a = s.connect_to(Some("iso"));
    run(
        &mut a,
        "BEGIN TRAN; DELETE FROM clu_t WHERE id = 1; DELETE FROM heap_t WHERE id = 1",
    );
    let mut dirty = s.connect_to(Some("iso"));
    for t in ["clu_t", "heap_t"] {
        let nolock = format!("SELECT COUNT(*) FROM {t} WITH (NOLOCK)");
        assert_eq!(
            value(&mut dirty, &nolock),
            1,
            "NOLOCK reads past the delete"
        );
    }
    let scan = spawn_batch(&s, "SELECT id, v FROM clu_t");
    let heap = spawn_batch(&s, "SELECT SUM(v) FROM heap_t");
    let seek = spawn_batch(
        &s,
        "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; SELECT v FROM clu_t WHERE id = 1",
    );
    thread::sleep(Duration::from_millis(300));
    assert!(!scan.is_finished(), "the scan waits for the deleter");
    assert!(!seek.is_finished(), "the seek waits for the deleter");
    assert!(!heap.is_finished(), "the heap scan waits for the deleter");
    run(&mut a, "ROLLBACK");
    let scan = scan.join().unwrap();
    assert_eq!(scan[0].0, 0);
    assert_eq!(
        scan[0].1,
        vec![
            vec![Value::Int(1), Value::Int(100)],
            vec![Value::Int(2), Value::Int(200)]
        ]
    );
    assert_eq!(heap.join().unwrap()[0].1, vec![vec![Value::Int(300)]]);
    assert_eq!(seek.join().unwrap()[0].1, vec![vec![Value::Int(100)]]);
    // A committed delete's ghost is passed at once (its lock is free).
    run(
        &mut a,
        "DELETE FROM clu_t WHERE id = 1; DELETE FROM heap_t WHERE id = 1",
    );
    assert_eq!(value(&mut a, "SELECT COUNT(*) FROM clu_t"), 1);
    assert_eq!(value(&mut a, "SELECT SUM(v) FROM heap_t"), 200);
}

/// SET LOCK_TIMEOUT ends a wait with 1222 (the transaction stays open), NOWAIT at once,
/// READPAST skips the locked row; @@LOCK_TIMEOUT reports the setting.
#[test]
fn lock_timeout_nowait_and_readpast() {
    let s = Server::start("iso-timeout", &[]);
    setup(&s);
    let mut a = s.connect_to(Some("iso"));
    run(&mut a, "BEGIN TRAN; UPDATE clu_t SET v = 5 WHERE id = 1");
    let mut b = s.connect_to(Some("iso"));
    run(&mut b, "SET LOCK_TIMEOUT 200");
    assert_eq!(value(&mut b, "SELECT @@LOCK_TIMEOUT"), 200);
    run(&mut b, "BEGIN TRAN");
    let started = std::time::Instant::now();
    assert_eq!(
        common::tds::numbers(&mut b, "SELECT v FROM clu_t WHERE id = 1"),
        vec![1222]
    );
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(
        value(&mut b, "SELECT @@TRANCOUNT"),
        1,
        "1222 ends the statement only"
    );
    run(&mut b, "ROLLBACK; SET LOCK_TIMEOUT -1");
    assert_eq!(
        common::tds::numbers(&mut b, "SELECT v FROM clu_t WITH (NOWAIT) WHERE id = 1"),
        vec![1222]
    );
    let rows = all_rows(&run(&mut b, "SELECT id FROM clu_t WITH (READPAST)"));
    assert_eq!(rows, vec![vec![Value::Int(2)]]);
    // READPAST only at READ COMMITTED and REPEATABLE READ (SQL Server's 650): under
    // SERIALIZABLE, or with HOLDLOCK, it would hide the locked row from a range read.
    let refused = common::tds::errors(
        &mut b,
        "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE; SELECT id FROM clu_t WITH (READPAST)",
    );
    assert_eq!(refused, vec![(650, 16, 1)]);
    let refused = common::tds::errors(
        &mut b,
        "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; \
         DELETE FROM clu_t WITH (READPAST, HOLDLOCK) WHERE id = 2",
    );
    assert_eq!(refused, vec![(650, 16, 1)]);
    assert_eq!(value(&mut b, "SELECT COUNT(*) FROM clu_t WITH (NOLOCK)"), 2);
    run(&mut a, "COMMIT");
}

/// Two sessions each update a row the other holds: one is chosen as the victim (1205,
/// its transaction rolled back), the other finishes; SET DEADLOCK_PRIORITY LOW makes B the
/// victim whatever the timing.
#[test]
fn deadlock_victim_gets_1205_and_is_rolled_back() {
    let s = Server::start("iso-deadlock", &[]);
    setup(&s);
    let mut a = s.connect_to(Some("iso"));
    let mut b = s.connect_to(Some("iso"));
    run(
        &mut b,
        "DBCC TRACEON (1222, -1) WITH NO_INFOMSGS; SET DEADLOCK_PRIORITY LOW",
    );
    let b_spid = value(&mut b, "SELECT @@SPID");
    run(
        &mut a,
        "BEGIN TRAN; UPDATE clu_t SET v = v + 1 WHERE id = 1",
    );
    run(
        &mut b,
        "BEGIN TRAN; UPDATE clu_t SET v = v + 10 WHERE id = 2",
    );
    let addr = s.addr.clone();
    let a_waits = thread::spawn(move || {
        let r = a
            .batch("UPDATE clu_t SET v = v + 1 WHERE id = 2; COMMIT")
            .unwrap();
        let errs: Vec<i32> = r.errors().map(|e| e.number).collect();
        drop(addr);
        errs
    });
    thread::sleep(Duration::from_millis(200));
    let r = b.batch("UPDATE clu_t SET v = v + 10 WHERE id = 1").unwrap();
    let errs: Vec<(i32, u8)> = r.errors().map(|e| (e.number, e.severity)).collect();
    assert_eq!(errs, vec![(1205, 13)]);
    assert_eq!(
        value(&mut b, "SELECT @@TRANCOUNT"),
        0,
        "the victim's transaction is rolled back"
    );
    assert_eq!(a_waits.join().unwrap(), Vec::<i32>::new());
    let mut c = s.connect_to(Some("iso"));
    let rows = all_rows(&run(&mut c, "SELECT v FROM clu_t ORDER BY id"));
    assert_eq!(rows, vec![vec![Value::Int(101)], vec![Value::Int(201)]]);
    // Trace flag 1222: the deadlock's processes and resources in the ERRORLOG.
    let log = s.errorlog();
    assert!(log.contains("deadlock-list"), "{log}");
    assert!(
        log.contains(&format!("spid={b_spid} waitresource=KEY: ")),
        "{log}"
    );
    assert!(log.contains("keylock ("), "{log}");
}

/// What a DBA sees while B waits for A: sys.dm_tran_locks lists A's X lock granted and
/// B's request waiting; sys.dm_exec_requests shows B suspended on LCK_M_S, blocked by A.
#[test]
fn dmvs_show_who_blocks_whom() {
    let s = Server::start("iso-dmv", &[]);
    setup(&s);
    let mut a = s.connect_to(Some("iso"));
    let a_spid = value(&mut a, "SELECT @@SPID");
    run(&mut a, "BEGIN TRAN; UPDATE clu_t SET v = 7 WHERE id = 2");
    let reader = spawn_batch(&s, "SELECT v FROM clu_t WHERE id = 2");
    thread::sleep(Duration::from_millis(300));
    let mut dba = s.connect_to(Some("iso"));
    let locks = all_rows(&run(
        &mut dba,
        "SELECT resource_type, request_mode, request_status, request_session_id \
         FROM sys.dm_tran_locks WHERE resource_type = 'KEY'",
    ));
    let text = |v: &Value| match v {
        Value::Text(t) => t.clone(),
        other => format!("{other:?}"),
    };
    let modes: Vec<(String, String)> = locks.iter().map(|r| (text(&r[1]), text(&r[2]))).collect();
    assert!(modes.contains(&("X".into(), "GRANT".into())), "{modes:?}");
    assert!(modes.contains(&("S".into(), "WAIT".into())), "{modes:?}");
    let req = all_rows(&run(
        &mut dba,
        "SELECT status, wait_type, blocking_session_id FROM sys.dm_exec_requests \
         WHERE blocking_session_id <> 0",
    ));
    assert_eq!(req.len(), 1, "{req:?}");
    assert_eq!(text(&req[0][0]), "suspended");
    assert_eq!(text(&req[0][1]), "LCK_M_S");
    assert_eq!(req[0][2], Value::SmallInt(a_spid as i16));
    let tasks = all_rows(&run(
        &mut dba,
        "SELECT wait_type, blocking_session_id FROM sys.dm_os_waiting_tasks",
    ));
    assert_eq!(
        tasks,
        vec![vec![
            Value::Text("LCK_M_S".into()),
            Value::SmallInt(a_spid as i16)
        ]]
    );
    let who2 = all_rows(&run(&mut dba, "EXEC sp_who2"));
    let blocked: Vec<String> = who2
        .iter()
        .map(|r| text(&r[4]).trim().to_string())
        .collect();
    assert!(
        blocked.contains(&a_spid.to_string()),
        "sp_who2 BlkBy: {blocked:?}"
    );
    let who = all_rows(&run(&mut dba, "EXEC sp_who"));
    assert!(who
        .iter()
        .any(|r| text(&r[5]).trim() == a_spid.to_string() && text(&r[2]) == "suspended"));
    let sp_lock = all_rows(&run(&mut dba, "EXEC sp_lock"));
    assert!(sp_lock
        .iter()
        .any(|r| text(&r[4]).trim() == "KEY" && text(&r[6]) == "X" && text(&r[7]) == "GRANT"));
    assert!(sp_lock
        .iter()
        .any(|r| text(&r[4]).trim() == "KEY" && text(&r[6]) == "S" && text(&r[7]) == "WAIT"));
    run(&mut a, "COMMIT");
    assert_eq!(reader.join().unwrap()[0].1, vec![vec![Value::Int(7)]]);
}

/// REPEATABLE READ keeps the rows it read locked until it ends; SERIALIZABLE keeps the
/// table from new rows (an INSERT waits); SNAPSHOT is refused until row versioning
/// exists (3952).
#[test]
fn repeatable_read_serializable_and_snapshot() {
    let s = Server::start("iso-levels", &[]);
    setup(&s);
    let mut a = s.connect_to(Some("iso"));
    run(
        &mut a,
        "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; BEGIN TRAN",
    );
    assert_eq!(value(&mut a, "SELECT v FROM heap_t WHERE id = 1"), 100);
    let writer = spawn_batch(&s, "UPDATE heap_t SET v = 1 WHERE id = 1");
    thread::sleep(Duration::from_millis(300));
    assert!(!writer.is_finished(), "the row read stays locked");
    assert_eq!(
        value(&mut a, "SELECT v FROM heap_t WHERE id = 1"),
        100,
        "read again: the same"
    );
    run(&mut a, "COMMIT");
    assert_eq!(writer.join().unwrap()[0].0, 0);
    run(
        &mut a,
        "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE; BEGIN TRAN",
    );
    assert_eq!(value(&mut a, "SELECT COUNT(*) FROM clu_t"), 2);
    let inserter = spawn_batch(&s, "INSERT INTO clu_t VALUES (3, 300)");
    thread::sleep(Duration::from_millis(300));
    assert!(
        !inserter.is_finished(),
        "no phantom while A's transaction lasts"
    );
    assert_eq!(value(&mut a, "SELECT COUNT(*) FROM clu_t"), 2);
    run(&mut a, "COMMIT");
    assert_eq!(inserter.join().unwrap()[0].0, 0);
    run(&mut a, "SET TRANSACTION ISOLATION LEVEL SNAPSHOT");
    assert_eq!(
        common::tds::numbers(&mut a, "SELECT COUNT(*) FROM clu_t"),
        vec![3952]
    );
}

/// KILL of a session waiting for a lock ends its wait: its request leaves the lock queue
/// (sys.dm_tran_locks shows no WAIT) and the holder goes on.
#[test]
fn kill_ends_a_lock_wait() {
    let s = Server::start("iso-kill", &[]);
    setup(&s);
    let mut a = s.connect_to(Some("iso"));
    run(&mut a, "BEGIN TRAN; UPDATE heap_t SET v = 1 WHERE id = 1");
    let addr = s.addr.clone();
    let waiter = thread::spawn(move || {
        let mut b = connect_at(&addr, Some("iso"), 60).unwrap();
        let spid = value(&mut b, "SELECT @@SPID");
        let (tx, rx) = std::sync::mpsc::channel();
        let t = thread::spawn(move || {
            let r = b.batch("SELECT v FROM heap_t WHERE id = 1");
            tx.send(()).unwrap();
            r.map_or(true, |r| all_rows(&r).is_empty())
        });
        (spid, rx, t)
    });
    let (spid, done, t) = waiter.join().unwrap();
    thread::sleep(Duration::from_millis(300));
    assert!(done.try_recv().is_err(), "B waits for A");
    let mut dba = s.connect_to(Some("iso"));
    run(&mut dba, &format!("KILL {spid}"));
    done.recv_timeout(Duration::from_secs(10))
        .expect("KILL ended the wait");
    assert!(t.join().unwrap(), "the killed batch returned no row");
    let waits = all_rows(&run(
        &mut dba,
        "SELECT request_session_id FROM sys.dm_tran_locks WHERE request_status <> 'GRANT'",
    ));
    assert!(waits.is_empty(), "{waits:?}");
    run(&mut a, "COMMIT");
    assert_eq!(value(&mut dba, "SELECT v FROM heap_t WHERE id = 1"), 1);
}

/// An open transaction as a DBA finds it: sys.dm_tran_session_transactions and
/// sys.dm_tran_active_transactions list it, DBCC OPENTRAN names its session; after COMMIT
/// there is none.
#[test]
fn open_transactions_are_listed() {
    let s = Server::start("iso-opentran", &[]);
    setup(&s);
    let mut a = s.connect_to(Some("iso"));
    let a_spid = value(&mut a, "SELECT @@SPID");
    run(
        &mut a,
        "BEGIN TRAN; BEGIN TRAN; UPDATE heap_t SET v = v WHERE id = 1",
    );
    let mut dba = s.connect_to(Some("iso"));
    let rows = all_rows(&run(
        &mut dba,
        "SELECT session_id, open_transaction_count FROM sys.dm_tran_session_transactions",
    ));
    assert_eq!(rows, vec![vec![Value::Int(a_spid as i32), Value::Int(2)]]);
    let active = all_rows(&run(
        &mut dba,
        "SELECT name FROM sys.dm_tran_active_transactions",
    ));
    assert_eq!(active, vec![vec![Value::Text("user_transaction".into())]]);
    let infos = |r: &extentdb_tds::client::Response| -> String {
        r.outputs
            .iter()
            .filter_map(|o| match o {
                extentdb_sql::exec::Output::Info(e) => Some(e.text.clone()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let open = infos(&run(&mut dba, "DBCC OPENTRAN"));
    assert!(
        open.contains(&format!("SPID (server process ID): {a_spid}")),
        "{open}"
    );
    assert!(open.contains("Oldest active transaction:"), "{open}");
    run(&mut a, "COMMIT; COMMIT");
    let none = infos(&run(&mut dba, "DBCC OPENTRAN (iso)"));
    assert!(none.contains("No active open transactions."), "{none}");
    assert!(all_rows(&run(
        &mut dba,
        "SELECT * FROM sys.dm_tran_session_transactions"
    ))
    .is_empty());
}

/// Runs `first` on `a`, then `second` on `b`, each in its own thread (either may block),
/// and returns the error numbers each batch gave.
fn race(
    s: &Server,
    setup_a: &str,
    setup_b: &str,
    first: &'static str,
    second: &'static str,
) -> (Vec<i32>, Vec<i32>) {
    let mut a = s.connect_to(Some("iso"));
    let mut b = s.connect_to(Some("iso"));
    run(&mut a, setup_a);
    run(&mut b, setup_b);
    let ta = thread::spawn(move || {
        let r = a.batch(first).unwrap();
        let e: Vec<i32> = r.errors().map(|e| e.number).collect();
        let _ = a.batch("IF @@TRANCOUNT > 0 COMMIT");
        e
    });
    thread::sleep(Duration::from_millis(200));
    let tb = thread::spawn(move || {
        let r = b.batch(second).unwrap();
        let e: Vec<i32> = r.errors().map(|e| e.number).collect();
        let _ = b.batch("IF @@TRANCOUNT > 0 COMMIT");
        e
    });
    (ta.join().unwrap(), tb.join().unwrap())
}

/// P4 (lost update) under REPEATABLE READ: both read the row, both write from what they
/// read; the read locks make the second writer a deadlock victim (1205) instead of
/// overwriting the first's increment.
#[test]
fn lost_update_under_repeatable_read_is_a_deadlock() {
    let s = Server::start("iso-p4", &[]);
    setup(&s);
    let level = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; SET DEADLOCK_PRIORITY LOW";
    let (ea, eb) = race(
        &s,
        "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
        level,
        "BEGIN TRAN; DECLARE @v INT; SELECT @v = v FROM clu_t WHERE id = 1; \
         WAITFOR DELAY '00:00:00.400'; UPDATE clu_t SET v = @v + 1 WHERE id = 1",
        "BEGIN TRAN; DECLARE @v INT; SELECT @v = v FROM clu_t WHERE id = 1; \
         UPDATE clu_t SET v = @v + 1 WHERE id = 1",
    );
    assert_eq!((ea, eb), (vec![], vec![1205]));
    let mut c = s.connect_to(Some("iso"));
    assert_eq!(
        value(&mut c, "SELECT v FROM clu_t WHERE id = 1"),
        101,
        "one increment, not lost"
    );
}

/// G2-item (write skew) under SERIALIZABLE: two transactions each read both rows and
/// change a different one; one of them is the victim, so both cannot commit on a stale
/// read.
#[test]
fn write_skew_under_serializable_is_prevented() {
    let s = Server::start("iso-g2", &[]);
    setup(&s);
    let level = "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE";
    let (ea, eb) = race(
        &s,
        level,
        "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE; SET DEADLOCK_PRIORITY LOW",
        "BEGIN TRAN; DECLARE @t INT; SELECT @t = SUM(v) FROM heap_t; \
         WAITFOR DELAY '00:00:00.400'; UPDATE heap_t SET v = v - @t WHERE id = 1",
        "BEGIN TRAN; DECLARE @t INT; SELECT @t = SUM(v) FROM heap_t; \
         UPDATE heap_t SET v = v - @t WHERE id = 2",
    );
    assert_eq!((ea, eb), (vec![], vec![1205]));
    let mut c = s.connect_to(Some("iso"));
    let rows = all_rows(&run(&mut c, "SELECT v FROM heap_t ORDER BY id"));
    assert_eq!(rows, vec![vec![Value::Int(-200)], vec![Value::Int(200)]]);
}

/// Lock escalation: a transaction's 6,000th row lock on a table escalates to the table
/// (one OBJECT X lock in sys.dm_tran_locks instead of 6,000 KEY locks) unless ALTER TABLE
/// ... SET (LOCK_ESCALATION = DISABLE), which sys.tables shows and a restart keeps; other
/// ALTER TABLE forms are refused (40517), a missing table is 4902.
#[test]
fn lock_escalation_and_its_table_option() {
    let s = Server::start("iso-escalation", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE iso");
    run(
        &mut c,
        "USE iso; CREATE TABLE big (id INT NOT NULL PRIMARY KEY, v INT NOT NULL); \
         CREATE TABLE big2 (id INT NOT NULL PRIMARY KEY, v INT NOT NULL); \
         SET NOCOUNT ON; DECLARE @i INT = 0; BEGIN TRAN; \
         WHILE @i < 6000 BEGIN INSERT INTO big VALUES (@i, 0); INSERT INTO big2 VALUES (@i, 0); SET @i += 1; END; \
         COMMIT",
    );
    run(&mut c, "ALTER TABLE big2 SET (LOCK_ESCALATION = DISABLE)");
    let count = |c: &mut extentdb_tds::client::Client, kind: &str| {
        value(c, &format!("SELECT COUNT(*) FROM sys.dm_tran_locks WHERE resource_type = '{kind}' AND request_session_id = @@SPID"))
    };
    run(&mut c, "BEGIN TRAN; UPDATE big SET v = 1");
    assert_eq!(count(&mut c, "KEY"), 0, "escalated: no row locks left");
    let modes = all_rows(&run(&mut c, "SELECT request_mode FROM sys.dm_tran_locks WHERE resource_type = 'OBJECT' AND request_session_id = @@SPID"));
    assert_eq!(modes, vec![vec![Value::Text("X".into())]]);
    run(&mut c, "COMMIT; BEGIN TRAN; UPDATE big2 SET v = 1");
    assert_eq!(count(&mut c, "KEY"), 6000, "DISABLE keeps every row lock");
    run(&mut c, "COMMIT");
    let s = common::tds::restart(s);
    let mut c = s.connect_to(Some("iso"));
    let rows = all_rows(&run(
        &mut c,
        "SELECT name, lock_escalation, lock_escalation_desc FROM sys.tables ORDER BY name",
    ));
    assert_eq!(
        rows,
        vec![
            vec![
                Value::Text("big".into()),
                Value::TinyInt(0),
                Value::Text("TABLE".into())
            ],
            vec![
                Value::Text("big2".into()),
                Value::TinyInt(1),
                Value::Text("DISABLE".into())
            ],
        ]
    );
    assert_eq!(
        common::tds::numbers(&mut c, "ALTER TABLE big ADD w INT"),
        vec![40517]
    );
    assert_eq!(
        common::tds::numbers(&mut c, "ALTER TABLE nope SET (LOCK_ESCALATION = AUTO)"),
        vec![4902]
    );
}

/// A table `kr` of ids 5, 10, 12, 18, 20, 25, 40 in database `iso`.
fn key_range_table(s: &Server) {
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE iso");
    run(
        &mut c,
        "USE iso; CREATE TABLE kr (id INT NOT NULL PRIMARY KEY, v INT NOT NULL); \
         INSERT INTO kr VALUES (5, 0), (10, 0), (12, 0), (18, 0), (20, 0), (25, 0), (40, 0)",
    );
}

/// What `session`'s transaction holds in sys.dm_tran_locks on KEY resources: (mode,
/// resource_description, status), sorted.
fn key_locks(c: &mut extentdb_tds::client::Client, session: i64) -> Vec<(String, String, String)> {
    let rows = all_rows(&run(
        c,
        &format!(
            "SELECT request_mode, resource_description, request_status FROM sys.dm_tran_locks \
             WHERE resource_type = 'KEY' AND request_session_id = {session}"
        ),
    ));
    let text = |v: &Value| match v {
        Value::Text(t) => t.trim().to_string(),
        other => panic!("{other:?}"),
    };
    let mut out: Vec<_> = rows
        .iter()
        .map(|r| (text(&r[0]), text(&r[1]), text(&r[2])))
        .collect();
    out.sort();
    out
}

/// The error numbers of `sql` run by a new session of database iso with SET LOCK_TIMEOUT
/// 500: a statement that waits for a lock gives 1222 and changes nothing.
fn with_timeout(s: &Server, sql: &str) -> Vec<i32> {
    let mut c = s.connect_to(Some("iso"));
    run(&mut c, "SET LOCK_TIMEOUT 500");
    common::tds::numbers(&mut c, sql)
}

/// A SERIALIZABLE read of `id BETWEEN 10 AND 20` locks the keys it read and the next key
/// (25) RangeS-S, and the table IS, not S: INSERTs of 15 and of 22 (the gap up to 25) wait
/// (1222 under SET LOCK_TIMEOUT 500, changing nothing), as does an UPDATE that moves key
/// 40 to 16, while an INSERT of 30, an UPDATE
/// of 40 and of 5 go through (under the table lock of before, all three waited). An
/// INSERT of 15 without a timeout waits, shown as RangeI-N WAIT, until the reader commits,
/// and the reader's second read finds no phantom.
#[test]
fn serializable_range_read_locks_its_keys_and_the_next() {
    let s = Server::start("iso-keyrange", &[]);
    key_range_table(&s);
    let mut a = s.connect_to(Some("iso"));
    run(
        &mut a,
        "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE; BEGIN TRAN",
    );
    let read = "SELECT COUNT(*) FROM kr WHERE id BETWEEN 10 AND 20";
    assert_eq!(value(&mut a, read), 4);
    let spid = value(&mut a, "SELECT @@SPID");
    let held = key_locks(&mut a, spid);
    assert_eq!(
        held.len(),
        5,
        "10, 12, 18, 20 and the next key 25: {held:?}"
    );
    assert!(held
        .iter()
        .all(|(m, d, st)| m == "RangeS-S" && st == "GRANT" && d.len() == 14));
    let table = all_rows(&run(
        &mut a,
        "SELECT request_mode FROM sys.dm_tran_locks WHERE resource_type = 'OBJECT' \
         AND request_session_id = @@SPID",
    ));
    assert_eq!(table, vec![vec![Value::Text("IS".into())]]);
    assert_eq!(
        with_timeout(&s, "INSERT INTO kr VALUES (15, 1)"),
        vec![1222]
    );
    assert_eq!(
        with_timeout(&s, "INSERT INTO kr VALUES (22, 1)"),
        vec![1222]
    );
    assert_eq!(
        with_timeout(&s, "UPDATE kr SET id = 16 WHERE id = 40"),
        vec![1222],
        "a key moved into the range is an insert there"
    );
    assert_eq!(
        with_timeout(&s, "INSERT INTO kr VALUES (30, 1)"),
        Vec::<i32>::new()
    );
    assert_eq!(
        with_timeout(&s, "UPDATE kr SET v = 2 WHERE id = 40"),
        Vec::<i32>::new()
    );
    assert_eq!(
        with_timeout(&s, "UPDATE kr SET v = 3 WHERE id = 5"),
        Vec::<i32>::new()
    );
    let inserter = spawn_batch(&s, "INSERT INTO kr VALUES (15, 1)");
    let mut watch = s.connect_to(Some("iso"));
    let waiting = "SELECT COUNT(*) FROM sys.dm_tran_locks WHERE resource_type = 'KEY' \
                   AND request_mode = 'RangeI-N' AND request_status = 'WAIT'";
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while value(&mut watch, waiting) != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the INSERT never waited"
        );
        thread::sleep(Duration::from_millis(20));
    }
    assert!(!inserter.is_finished());
    assert_eq!(value(&mut a, read), 4, "no phantom");
    run(&mut a, "COMMIT");
    assert_eq!(inserter.join().unwrap()[0].0, 0);
    let rows = all_rows(&run(&mut watch, "SELECT id, v FROM kr ORDER BY id"));
    let expect: Vec<Vec<Value>> = [
        (5, 3),
        (10, 0),
        (12, 0),
        (15, 1),
        (18, 0),
        (20, 0),
        (25, 0),
        (30, 1),
        (40, 2),
    ]
    .iter()
    .map(|&(i, v)| vec![Value::Int(i), Value::Int(v)])
    .collect();
    assert_eq!(
        rows, expect,
        "22 and the first 15 timed out and changed nothing"
    );
}

/// An equality that finds no row locks the next key RangeS-S, so an INSERT of exactly
/// that key waits (and of a key before the previous one does not); a scan to the end of
/// the index locks the end, `(ffffffffffff)`, so an INSERT past the last key waits, and
/// its first key's range reaches back to the key before its range. A
/// SERIALIZABLE DELETE holds RangeX-X on the keys it deleted and RangeS-U on the next.
#[test]
fn serializable_missing_key_and_end_of_index() {
    let s = Server::start("iso-keyrange-end", &[]);
    key_range_table(&s);
    let mut a = s.connect_to(Some("iso"));
    run(
        &mut a,
        "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE; BEGIN TRAN",
    );
    let spid = value(&mut a, "SELECT @@SPID");
    assert!(all_rows(&run(&mut a, "SELECT v FROM kr WHERE id = 7")).is_empty());
    let held = key_locks(&mut a, spid);
    assert_eq!(held.len(), 1, "the next key, 10: {held:?}");
    assert_eq!(held[0].0, "RangeS-S");
    assert_eq!(with_timeout(&s, "INSERT INTO kr VALUES (7, 1)"), vec![1222]);
    assert_eq!(
        with_timeout(&s, "INSERT INTO kr VALUES (3, 1)"),
        Vec::<i32>::new()
    );
    assert_eq!(value(&mut a, "SELECT COUNT(*) FROM kr WHERE id > 30"), 1);
    let held = key_locks(&mut a, spid);
    assert!(
        held.contains(&("RangeS-S".into(), "(ffffffffffff)".into(), "GRANT".into())),
        "{held:?}"
    );
    assert_eq!(held.len(), 3, "10, 40 and the end of the index: {held:?}");
    assert_eq!(
        with_timeout(&s, "INSERT INTO kr VALUES (100, 1)"),
        vec![1222]
    );
    assert_eq!(
        with_timeout(&s, "INSERT INTO kr VALUES (35, 1)"),
        vec![1222]
    );
    // 40's range reaches back to 25: 28 waits too, as in SQL Server; 22 (before 25) not.
    assert_eq!(
        with_timeout(&s, "INSERT INTO kr VALUES (28, 1)"),
        vec![1222]
    );
    assert_eq!(
        with_timeout(&s, "INSERT INTO kr VALUES (22, 1)"),
        Vec::<i32>::new()
    );
    run(
        &mut a,
        "COMMIT; BEGIN TRAN; DELETE FROM kr WHERE id BETWEEN 10 AND 12",
    );
    let modes: Vec<String> = key_locks(&mut a, spid).into_iter().map(|l| l.0).collect();
    assert_eq!(
        modes,
        ["RangeS-U", "RangeX-X", "RangeX-X"],
        "18 read, 10 and 12 deleted"
    );
    assert_eq!(
        with_timeout(&s, "INSERT INTO kr VALUES (11, 1)"),
        vec![1222]
    );
    assert_eq!(
        with_timeout(&s, "INSERT INTO kr VALUES (15, 1)"),
        vec![1222]
    );
    run(&mut a, "ROLLBACK");
    let mut c = s.connect_to(Some("iso"));
    assert_eq!(
        value(&mut c, "SELECT COUNT(*) FROM kr"),
        9,
        "3 and 22 added, nothing else"
    );
}

/// xorshift, seeded: the load test's choices, the same in every run.
fn xorshift(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut x = seed | 1;
    move |n| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    }
}

/// No phantom under load: SERIALIZABLE readers count and sum a key range twice in one
/// transaction while writers insert odd keys and delete even ones (ghosts in the ranges),
/// and the rows are wide (a few per leaf) so ranges and next keys span leaves (the walk
/// from leaf to leaf, latch-coupled). Every pair of reads agrees, the writers lose
/// nothing (the final count is the opening count plus inserts minus deletes), and CHECKDB
/// is clean. A SERIALIZABLE transaction open throughout on a range past every key the
/// writers touch (past the sentinel 10000) holds them up in nothing: they run with SET
/// LOCK_TIMEOUT 5000 (a table lock, as before key ranges, made them all 1222).
#[test]
fn serializable_ranges_see_no_phantoms_under_load() {
    let s = Server::start("iso-phantoms", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE iso");
    run(
        &mut c,
        "USE iso; CREATE TABLE ph (id INT NOT NULL PRIMARY KEY, pad CHAR(1500) NOT NULL); \
         SET NOCOUNT ON; DECLARE @i INT = 0; BEGIN TRAN; \
         WHILE @i < 600 BEGIN INSERT INTO ph VALUES (@i, 'x'); SET @i += 2; END; \
         INSERT INTO ph VALUES (10000, 'sentinel'); COMMIT",
    );
    let mut far = s.connect_to(Some("iso"));
    let far_read = "SELECT COUNT(*) FROM ph WHERE id BETWEEN 20000 AND 30000";
    run(
        &mut far,
        "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE; BEGIN TRAN",
    );
    assert_eq!(value(&mut far, far_read), 0);
    let readers: Vec<_> = (0..3u64)
        .map(|r| {
            let addr = s.addr.clone();
            thread::spawn(move || {
                let mut c = connect_at(&addr, Some("iso"), 120).unwrap();
                run(&mut c, "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE");
                let mut next = xorshift(0x9e37 + r);
                for _ in 0..12 {
                    let lo = next(560);
                    let q = format!(
                        "SELECT COUNT(*), SUM(id) FROM ph WHERE id BETWEEN {lo} AND {}",
                        lo + 40
                    );
                    run(&mut c, "BEGIN TRAN");
                    let first = all_rows(&run(&mut c, &q));
                    run(&mut c, "WAITFOR DELAY '00:00:00.030'");
                    let again = all_rows(&run(&mut c, &q));
                    run(&mut c, "COMMIT");
                    assert_eq!(first, again, "a phantom in [{lo}, {}]", lo + 40);
                }
            })
        })
        .collect();
    let writers: Vec<_> = (0..3u64)
        .map(|w| {
            let addr = s.addr.clone();
            thread::spawn(move || {
                let mut c = connect_at(&addr, Some("iso"), 120).unwrap();
                run(&mut c, "SET LOCK_TIMEOUT 5000");
                let mut next = xorshift(0x51ed + w);
                let (mut inserted, mut deleted) = (0i64, 0i64);
                for i in 0..60u64 {
                    // Writer w's keys only: odd keys to insert, even keys to delete.
                    let k = (next(100) * 3 + w) * 2;
                    let sql = match i % 2 {
                        0 => format!("INSERT INTO ph VALUES ({}, 'y')", k + 1),
                        _ => format!("DELETE FROM ph WHERE id = {k}; SELECT @@ROWCOUNT"),
                    };
                    let r = c.batch(&sql).unwrap();
                    let errors: Vec<i32> = r.errors().map(|e| e.number).collect();
                    match (errors.as_slice(), i % 2) {
                        ([], 0) => inserted += 1,
                        ([2627], 0) => {} // inserted before
                        ([], _) => deleted += common::tds::int(&all_rows(&r)[0][0]),
                        (e, _) => panic!("{sql}: {e:?}"),
                    }
                }
                (inserted, deleted)
            })
        })
        .collect();
    for r in readers {
        r.join().unwrap();
    }
    let (mut inserted, mut deleted) = (0, 0);
    for w in writers {
        let (i, d) = w.join().unwrap();
        (inserted, deleted) = (inserted + i, deleted + d);
    }
    assert_eq!(value(&mut far, far_read), 0);
    run(&mut far, "COMMIT");
    let mut c = s.connect_to(Some("iso"));
    assert_eq!(
        value(&mut c, "SELECT COUNT(*) FROM ph"),
        301 + inserted - deleted
    );
    common::tds::assert_checkdb_clean(&mut c, "iso", "after the load");
}
