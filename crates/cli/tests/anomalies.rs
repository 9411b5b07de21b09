//! Adya's anomalies at each locking isolation level (issue 21, "Tests"): the scenarios of
//! Kleppmann's Hermitage for SQL Server (G0, G1a, G1b, G1c, OTV, PMP, P4, G-single,
//! G2-item, G2), each run through real TDS sessions at READ UNCOMMITTED, READ COMMITTED,
//! REPEATABLE READ and SERIALIZABLE, asserting SQL Server's outcome: which statement waits
//! for a lock (seen in sys.dm_os_waiting_tasks, with the session it waits for), what it
//! returns when it resumes, and which session is the deadlock victim (1205, its
//! transaction rolled back). SNAPSHOT is refused (3952) until row versioning exists.
//!
//! Each scene has a table of its own, `(id INT PRIMARY KEY, value INT)` holding (1, 10)
//! and (2, 20) as Hermitage's `test` does; statements name it `test` and the scene puts
//! its own table's name in. The tests running at a time share one server.
//!
//! Deadlock victims: SQL Server chooses the lowest DEADLOCK_PRIORITY, then the transaction
//! cheapest to roll back, and between equals either one. Where Hermitage's two sessions
//! are equals, the session it reports as the victim runs with SET DEADLOCK_PRIORITY LOW, so
//! SQL Server and extentdb alike must choose it.
//!
//! SERIALIZABLE locks key ranges on the clustered index, as SQL Server does: a read locks
//! the keys it reads and the next key past its range (or the end of the index) RangeS-S,
//! an equality on the whole key that finds its row locks that key only, and every INSERT
//! tests RangeI-N on the key after its own. So a SERIALIZABLE write of another row goes
//! through (G1c then plays as at REPEATABLE READ), and a phantom INSERT into a range a
//! SERIALIZABLE transaction read waits for it (PMP, G-single's predicate, G2).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use extentdb_sql::types::Value;
use extentdb_tds::client::Client;

mod common;
use common::tds::{all_rows, connect_at, int, run, Server};

const DB: &str = "hermitage";

/// How long a statement that must not wait may take, and how long a wait may take to
/// show in sys.dm_os_waiting_tasks (both far above what they need: a slow machine must
/// not fail them).
const PATIENCE: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Level {
    ReadUncommitted,
    ReadCommitted,
    RepeatableRead,
    Serializable,
}
use Level::*;

const LEVELS: [Level; 4] = [ReadUncommitted, ReadCommitted, RepeatableRead, Serializable];

impl Level {
    fn sql(self) -> &'static str {
        match self {
            ReadUncommitted => "READ UNCOMMITTED",
            ReadCommitted => "READ COMMITTED",
            RepeatableRead => "REPEATABLE READ",
            Serializable => "SERIALIZABLE",
        }
    }

    fn tag(self) -> &'static str {
        match self {
            ReadUncommitted => "ru",
            ReadCommitted => "rc",
            RepeatableRead => "rr",
            Serializable => "ser",
        }
    }

    /// REPEATABLE READ and SERIALIZABLE keep the locks of what they read.
    fn keeps_read_locks(self) -> bool {
        matches!(self, RepeatableRead | Serializable)
    }
}

/// The server of the tests running now: started by the first, stopped when the last
/// running lets it go (each start has a directory of its own, so a server stopping never
/// removes the next one's).
fn server() -> Arc<Server> {
    static SHARED: Mutex<Weak<Server>> = Mutex::new(Weak::new());
    static STARTS: AtomicUsize = AtomicUsize::new(0);
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = shared.upgrade() {
        return s;
    }
    let n = STARTS.fetch_add(1, Ordering::Relaxed);
    let s = Arc::new(Server::start(&format!("anomalies-{n}"), &[]));
    run(&mut s.connect(), &format!("CREATE DATABASE {DB}"));
    *shared = Arc::downgrade(&s);
    s
}

/// Rows `(id, value)` as a result set holds them.
fn kv(pairs: &[(i32, i32)]) -> Vec<Vec<Value>> {
    pairs
        .iter()
        .map(|&(id, v)| vec![Value::Int(id), Value::Int(v)])
        .collect()
}

/// One anomaly's run at one level: its table, and a session that watches the others.
struct Scene {
    server: Arc<Server>,
    table: String,
    level: Level,
    watch: Arc<Mutex<Client>>,
}

impl Scene {
    fn new(anomaly: &str, level: Level) -> Scene {
        let server = server();
        let table = format!("{anomaly}_{}", level.tag());
        let mut watch = server.connect_to(Some(DB));
        run(
            &mut watch,
            &format!(
                "CREATE TABLE {table} (id INT PRIMARY KEY, value INT); \
                 INSERT INTO {table} (id, value) VALUES (1, 10), (2, 20)"
            ),
        );
        Scene {
            server,
            table,
            level,
            watch: Arc::new(Mutex::new(watch)),
        }
    }

    /// A session at the scene's level with its transaction begun.
    fn tx(&self, name: &'static str) -> Tx {
        Tx::begin(self, name, "")
    }

    /// The same, chosen as the victim of the deadlock it takes part in.
    fn victim(&self, name: &'static str) -> Tx {
        Tx::begin(self, name, "SET DEADLOCK_PRIORITY LOW;")
    }

    /// The table's committed rows, read once every transaction has ended.
    fn committed(&self) -> Vec<Vec<Value>> {
        let sql = format!("SELECT * FROM {} WITH (NOWAIT)", self.table);
        all_rows(&run(&mut self.watch.lock().unwrap(), &sql))
    }
}

type Outcome = Result<Vec<Vec<Value>>, Vec<i32>>;

/// A session on a thread of its own: each statement is handed to it and its outcome read
/// back, so a statement waiting for a lock can be watched while the others go on.
struct Tx {
    name: &'static str,
    spid: i64,
    table: String,
    requests: Sender<String>,
    outcomes: Receiver<Outcome>,
    /// The statement sent and not yet answered (it waits for a lock).
    waiting: Option<String>,
    watch: Arc<Mutex<Client>>,
}

impl Tx {
    fn begin(scene: &Scene, name: &'static str, settings: &str) -> Tx {
        let mut c = connect_at(&scene.server.addr, Some(DB), 120).expect("login");
        let spid = int(&all_rows(&run(&mut c, "SELECT @@SPID"))[0][0]);
        run(
            &mut c,
            &format!(
                "SET TRANSACTION ISOLATION LEVEL {}; {settings} BEGIN TRAN",
                scene.level.sql()
            ),
        );
        let (requests, rx) = channel::<String>();
        let (tx, outcomes) = channel();
        thread::spawn(move || {
            for sql in rx {
                let r = c.batch(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
                let errors: Vec<i32> = r.errors().map(|e| e.number).collect();
                let outcome = if errors.is_empty() {
                    Ok(all_rows(&r))
                } else {
                    Err(errors)
                };
                if tx.send(outcome).is_err() {
                    break;
                }
            }
        });
        Tx {
            name,
            spid,
            table: scene.table.clone(),
            requests,
            outcomes,
            waiting: None,
            watch: scene.watch.clone(),
        }
    }

    fn send(&mut self, sql: &str) {
        assert!(self.waiting.is_none(), "{}: still waiting", self.name);
        let sql = sql.replace("test", &self.table);
        self.requests.send(sql).expect("the session's thread");
    }

    fn outcome(&mut self, sql: &str) -> Outcome {
        match self.outcomes.recv_timeout(PATIENCE) {
            Ok(o) => o,
            Err(RecvTimeoutError::Timeout) => panic!("{}: `{sql}` never returned", self.name),
            Err(e) => panic!("{}: `{sql}`: {e}", self.name),
        }
    }

    /// Runs a statement that must return at once, without error; its rows.
    fn ok(&mut self, sql: &str) -> Vec<Vec<Value>> {
        self.send(sql);
        self.outcome(sql)
            .unwrap_or_else(|e| panic!("{}: `{sql}` failed: {e:?}", self.name))
    }

    /// Runs a statement that must fail; its error numbers.
    fn fails(&mut self, sql: &str) -> Vec<i32> {
        self.send(sql);
        match self.outcome(sql) {
            Err(e) => e,
            Ok(rows) => panic!("{}: `{sql}` succeeded: {rows:?}", self.name),
        }
    }

    /// Sends a statement that must wait for a lock `on` holds: it shows in
    /// sys.dm_os_waiting_tasks as a LCK_M_* wait blocked by `on`'s session, and has not
    /// returned.
    fn blocks(&mut self, sql: &str, on: &Tx) {
        self.send(sql);
        let query = format!(
            "SELECT wait_type, blocking_session_id FROM sys.dm_os_waiting_tasks \
             WHERE session_id = {}",
            self.spid
        );
        let started = Instant::now();
        loop {
            if let Ok(o) = self.outcomes.try_recv() {
                panic!("{}: `{sql}` should wait for {}: {o:?}", self.name, on.name);
            }
            let rows = all_rows(&run(&mut self.watch.lock().unwrap(), &query));
            if let [row] = rows.as_slice() {
                let Value::Text(wait) = &row[0] else {
                    panic!("{row:?}")
                };
                assert!(wait.starts_with("LCK_M_"), "{}: {wait}", self.name);
                assert_eq!(int(&row[1]), on.spid, "{}: `{sql}` waits for", self.name);
                self.waiting = Some(sql.to_string());
                return;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "{}: `{sql}` ran on",
                self.name
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// The waiting statement's outcome once its lock is granted.
    fn resumes(&mut self) -> Outcome {
        let sql = self.waiting.take().expect("a waiting statement");
        self.outcome(&sql)
    }

    /// The waiting statement resumes and succeeds; its rows.
    fn resumes_ok(&mut self) -> Vec<Vec<Value>> {
        let name = self.name;
        self.resumes()
            .unwrap_or_else(|e| panic!("{name}: resumed with {e:?}"))
    }

    /// A deadlock victim: the statement got 1205 and the transaction is gone.
    fn is_victim(&mut self, errors: Vec<i32>) {
        assert_eq!(errors, vec![1205], "{}", self.name);
        let open = self.ok("SELECT @@TRANCOUNT");
        assert_eq!(int(&open[0][0]), 0, "{}: rolled back", self.name);
    }
}

/// G0 (write cycles, dirty writes), prevented at every level: writes lock their rows to
/// the transaction's end, so T2's UPDATE of row 1 waits for T1 at every level and resumes
/// at T1's COMMIT. T1's read afterwards shows T2's uncommitted 12 at READ UNCOMMITTED and
/// waits for T2 at the other levels (then shows 12, 22). The rows end 12, 22: each
/// transaction's writes all before or all after the other's.
#[test]
fn g0_write_cycles() {
    for level in LEVELS {
        let sc = Scene::new("g0", level);
        let (mut t1, mut t2) = (sc.tx("T1"), sc.tx("T2"));
        t1.ok("UPDATE test SET value = 11 WHERE id = 1");
        t2.blocks("UPDATE test SET value = 12 WHERE id = 1", &t1);
        t1.ok("UPDATE test SET value = 21 WHERE id = 2");
        t1.ok("COMMIT");
        t2.resumes_ok();
        if level == ReadUncommitted {
            assert_eq!(t1.ok("SELECT * FROM test"), kv(&[(1, 12), (2, 21)]));
            t2.ok("UPDATE test SET value = 22 WHERE id = 2");
            t2.ok("COMMIT");
        } else {
            t1.blocks("SELECT * FROM test", &t2);
            t2.ok("UPDATE test SET value = 22 WHERE id = 2");
            t2.ok("COMMIT");
            assert_eq!(t1.resumes_ok(), kv(&[(1, 12), (2, 22)]), "{level:?}");
        }
        assert_eq!(sc.committed(), kv(&[(1, 12), (2, 22)]), "{level:?}");
    }
}

/// G1a (aborted reads): READ UNCOMMITTED reads T1's 101, which T1 then rolls back; at
/// READ COMMITTED and above T2's read waits for T1 and, after the ROLLBACK, shows 10, 20.
#[test]
fn g1a_aborted_reads() {
    for level in LEVELS {
        let sc = Scene::new("g1a", level);
        let (mut t1, mut t2) = (sc.tx("T1"), sc.tx("T2"));
        t1.ok("UPDATE test SET value = 101 WHERE id = 1");
        if level == ReadUncommitted {
            assert_eq!(t2.ok("SELECT * FROM test"), kv(&[(1, 101), (2, 20)]));
            t1.ok("ROLLBACK");
            assert_eq!(t2.ok("SELECT * FROM test"), kv(&[(1, 10), (2, 20)]));
        } else {
            t2.blocks("SELECT * FROM test", &t1);
            t1.ok("ROLLBACK");
            assert_eq!(t2.resumes_ok(), kv(&[(1, 10), (2, 20)]), "{level:?}");
        }
        t2.ok("COMMIT");
        assert_eq!(sc.committed(), kv(&[(1, 10), (2, 20)]), "{level:?}");
    }
}

/// G1b (intermediate reads): READ UNCOMMITTED reads T1's intermediate 101, then its final
/// 11; at READ COMMITTED and above T2's read waits for T1 and shows only the final 11.
#[test]
fn g1b_intermediate_reads() {
    for level in LEVELS {
        let sc = Scene::new("g1b", level);
        let (mut t1, mut t2) = (sc.tx("T1"), sc.tx("T2"));
        t1.ok("UPDATE test SET value = 101 WHERE id = 1");
        if level == ReadUncommitted {
            assert_eq!(t2.ok("SELECT * FROM test"), kv(&[(1, 101), (2, 20)]));
            t1.ok("UPDATE test SET value = 11 WHERE id = 1");
            t1.ok("COMMIT");
            assert_eq!(t2.ok("SELECT * FROM test"), kv(&[(1, 11), (2, 20)]));
        } else {
            t2.blocks("SELECT * FROM test", &t1);
            t1.ok("UPDATE test SET value = 11 WHERE id = 1");
            t1.ok("COMMIT");
            assert_eq!(t2.resumes_ok(), kv(&[(1, 11), (2, 20)]), "{level:?}");
        }
        t2.ok("COMMIT");
        assert_eq!(sc.committed(), kv(&[(1, 11), (2, 20)]), "{level:?}");
    }
}

/// G1c (circular information flow): each transaction updates a row, then reads the
/// other's. READ UNCOMMITTED reads both uncommitted values (22 and 11). READ COMMITTED
/// and REPEATABLE READ: T1's read waits for T2, T2's read closes the cycle and T2 is the
/// deadlock victim; T1 then reads the committed 20. SERIALIZABLE the same, as in SQL
/// Server: an UPDATE by the whole key locks that key only (no range past it), so T2's
/// UPDATE of row 2 goes through.
#[test]
fn g1c_circular_information_flow() {
    for level in LEVELS {
        let sc = Scene::new("g1c", level);
        let (mut t1, mut t2) = (sc.tx("T1"), sc.victim("T2"));
        t1.ok("UPDATE test SET value = 11 WHERE id = 1");
        t2.ok("UPDATE test SET value = 22 WHERE id = 2");
        if level == ReadUncommitted {
            assert_eq!(t1.ok("SELECT * FROM test WHERE id = 2"), kv(&[(2, 22)]));
            assert_eq!(t2.ok("SELECT * FROM test WHERE id = 1"), kv(&[(1, 11)]));
            t1.ok("COMMIT");
            t2.ok("COMMIT");
            assert_eq!(sc.committed(), kv(&[(1, 11), (2, 22)]));
        } else {
            t1.blocks("SELECT * FROM test WHERE id = 2", &t2);
            let e = t2.fails("SELECT * FROM test WHERE id = 1");
            t2.is_victim(e);
            assert_eq!(t1.resumes_ok(), kv(&[(2, 20)]), "{level:?}");
            t1.ok("COMMIT");
            assert_eq!(sc.committed(), kv(&[(1, 11), (2, 20)]), "{level:?}");
        }
    }
}

/// OTV (observed transaction vanishes): T1 writes both rows and commits, T2 overwrites
/// both. READ UNCOMMITTED lets T3 read T2's first write beside T1's second (12, 19), then
/// 12, 18. At READ COMMITTED and above T3's read waits for T2 and shows 12, 18: never
/// a mix of T1's and T2's writes. At every level T2's first UPDATE waits for T1.
#[test]
fn otv_observed_transaction_vanishes() {
    for level in LEVELS {
        let sc = Scene::new("otv", level);
        let (mut t1, mut t2, mut t3) = (sc.tx("T1"), sc.tx("T2"), sc.tx("T3"));
        t1.ok("UPDATE test SET value = 11 WHERE id = 1");
        t1.ok("UPDATE test SET value = 19 WHERE id = 2");
        t2.blocks("UPDATE test SET value = 12 WHERE id = 1", &t1);
        t1.ok("COMMIT");
        t2.resumes_ok();
        if level == ReadUncommitted {
            assert_eq!(t3.ok("SELECT * FROM test"), kv(&[(1, 12), (2, 19)]));
            t2.ok("UPDATE test SET value = 18 WHERE id = 2");
            assert_eq!(t3.ok("SELECT * FROM test"), kv(&[(1, 12), (2, 18)]));
            t2.ok("COMMIT");
        } else {
            t3.blocks("SELECT * FROM test", &t2);
            t2.ok("UPDATE test SET value = 18 WHERE id = 2");
            t2.ok("COMMIT");
            assert_eq!(t3.resumes_ok(), kv(&[(1, 12), (2, 18)]), "{level:?}");
        }
        t3.ok("COMMIT");
        assert_eq!(sc.committed(), kv(&[(1, 12), (2, 18)]), "{level:?}");
    }
}

/// PMP (predicate-many-preceders), read predicates: T1 finds no row with value 30, T2
/// inserts one. Below SERIALIZABLE T2 commits and T1's second predicate read sees the new
/// row (3, 30); SERIALIZABLE makes T2's INSERT wait for T1 (its RangeI-N on the end of
/// the index T1's scan locked RangeS-S), whose second read still finds nothing. Write predicates (the PostgreSQL documentation's example): T1 adds 10 to every
/// row while T2 deletes the rows with value 20. READ UNCOMMITTED: T2 reads T1's
/// uncommitted 20, 30 and its DELETE waits for T1; READ COMMITTED: T2's read waits for T1
/// and shows 20, 30; both then delete row 1 (20 after T1's commit) and keep (2, 30).
/// REPEATABLE READ and SERIALIZABLE: T2's read locks make T1's UPDATE wait, T2's DELETE
/// closes the cycle and T2 is the victim; T1's update commits whole (20, 30).
#[test]
fn pmp_predicate_many_preceders() {
    for level in LEVELS {
        pmp_read_predicate(level);
        pmp_write_predicate(level);
    }
}

fn pmp_read_predicate(level: Level) {
    let sc = Scene::new("pmp", level);
    let (mut t1, mut t2) = (sc.tx("T1"), sc.tx("T2"));
    assert!(t1.ok("SELECT * FROM test WHERE value = 30").is_empty());
    let insert = "INSERT INTO test (id, value) VALUES (3, 30)";
    if level == Serializable {
        t2.blocks(insert, &t1);
        assert!(t1.ok("SELECT * FROM test WHERE value % 3 = 0").is_empty());
        t1.ok("COMMIT");
        t2.resumes_ok();
        t2.ok("COMMIT");
    } else {
        t2.ok(insert);
        t2.ok("COMMIT");
        let seen = t1.ok("SELECT * FROM test WHERE value % 3 = 0");
        assert_eq!(seen, kv(&[(3, 30)]), "{level:?}");
        t1.ok("COMMIT");
    }
    assert_eq!(
        sc.committed(),
        kv(&[(1, 10), (2, 20), (3, 30)]),
        "{level:?}"
    );
}

fn pmp_write_predicate(level: Level) {
    let sc = Scene::new("pmpw", level);
    let (mut t1, mut t2) = (sc.tx("T1"), sc.victim("T2"));
    assert_eq!(t2.ok("SELECT * FROM test"), kv(&[(1, 10), (2, 20)]));
    let (update, delete) = (
        "UPDATE test SET value = value + 10",
        "DELETE FROM test WHERE value = 20",
    );
    if level.keeps_read_locks() {
        t1.blocks(update, &t2);
        let e = t2.fails(delete);
        t2.is_victim(e);
        t1.resumes_ok();
        t1.ok("COMMIT");
        assert_eq!(sc.committed(), kv(&[(1, 20), (2, 30)]), "{level:?}");
        return;
    }
    t1.ok(update);
    if level == ReadUncommitted {
        assert_eq!(t2.ok("SELECT * FROM test"), kv(&[(1, 20), (2, 30)]));
        t2.blocks(delete, &t1);
        t1.ok("COMMIT");
        t2.resumes_ok();
    } else {
        t2.blocks("SELECT * FROM test", &t1);
        t1.ok("COMMIT");
        assert_eq!(t2.resumes_ok(), kv(&[(1, 20), (2, 30)]));
        t2.ok(delete);
    }
    assert_eq!(t2.ok("SELECT * FROM test"), kv(&[(2, 30)]), "{level:?}");
    t2.ok("COMMIT");
    assert_eq!(sc.committed(), kv(&[(2, 30)]), "{level:?}");
}

/// P4 (lost update): both read row 1 (10) and write 11 from it. READ UNCOMMITTED and READ
/// COMMITTED: T2's UPDATE waits for T1 and then overwrites it; both commit and the row
/// is 11, one of the two increments lost. REPEATABLE READ and SERIALIZABLE: the read
/// locks make T1's UPDATE wait for T2, T2's UPDATE closes the cycle and T2 is the
/// deadlock victim; only T1's increment is acknowledged.
#[test]
fn p4_lost_update() {
    for level in LEVELS {
        let sc = Scene::new("p4", level);
        let (mut t1, mut t2) = (sc.tx("T1"), sc.victim("T2"));
        let (read, write) = (
            "SELECT * FROM test WHERE id = 1",
            "UPDATE test SET value = 11 WHERE id = 1",
        );
        assert_eq!(t1.ok(read), kv(&[(1, 10)]));
        assert_eq!(t2.ok(read), kv(&[(1, 10)]));
        if level.keeps_read_locks() {
            t1.blocks(write, &t2);
            let e = t2.fails(write);
            t2.is_victim(e);
            t1.resumes_ok();
            t1.ok("COMMIT");
        } else {
            t1.ok(write);
            t2.blocks(write, &t1);
            t1.ok("COMMIT");
            t2.resumes_ok();
            t2.ok("COMMIT");
        }
        assert_eq!(sc.committed(), kv(&[(1, 11), (2, 20)]), "{level:?}");
    }
}

/// G-single (read skew), three forms. A read-only T1 reads row 1 (10) while T2 moves both
/// rows to 12, 18: below REPEATABLE READ T2 runs through and T1 then reads 18 (10 + 18,
/// a sum no committed state had); at REPEATABLE READ and SERIALIZABLE T2's UPDATE of row
/// 1 waits for T1, which reads 20. Predicate dependencies: T1 reads `value % 5 = 0`, T2
/// inserts (3, 30): as PMP, only SERIALIZABLE makes the INSERT wait. A write predicate:
/// T1 reads row 1, T2 reads both and updates row 1, T1 deletes `value = 20`: below
/// REPEATABLE READ T2's UPDATE runs and T1's DELETE waits for T2, then finds no 20 (12,
/// 18); at REPEATABLE READ and SERIALIZABLE T2's UPDATE waits for T1 and T1's DELETE is
/// the deadlock victim.
#[test]
fn g_single_read_skew() {
    for level in LEVELS {
        g_single_read_only(level);
        g_single_predicate(level);
        g_single_write_predicate(level);
    }
}

fn g_single_read_only(level: Level) {
    let sc = Scene::new("gs", level);
    let (mut t1, mut t2) = (sc.tx("T1"), sc.tx("T2"));
    assert_eq!(t1.ok("SELECT * FROM test WHERE id = 1"), kv(&[(1, 10)]));
    t2.ok("SELECT * FROM test WHERE id = 1");
    t2.ok("SELECT * FROM test WHERE id = 2");
    if level.keeps_read_locks() {
        t2.blocks("UPDATE test SET value = 12 WHERE id = 1", &t1);
        assert_eq!(t1.ok("SELECT * FROM test WHERE id = 2"), kv(&[(2, 20)]));
        t1.ok("COMMIT");
        t2.resumes_ok();
        t2.ok("UPDATE test SET value = 18 WHERE id = 2");
        t2.ok("COMMIT");
    } else {
        t2.ok("UPDATE test SET value = 12 WHERE id = 1");
        t2.ok("UPDATE test SET value = 18 WHERE id = 2");
        t2.ok("COMMIT");
        let skewed = t1.ok("SELECT * FROM test WHERE id = 2");
        assert_eq!(skewed, kv(&[(2, 18)]), "{level:?}");
        t1.ok("COMMIT");
    }
    assert_eq!(sc.committed(), kv(&[(1, 12), (2, 18)]), "{level:?}");
}

fn g_single_predicate(level: Level) {
    let sc = Scene::new("gsp", level);
    let (mut t1, mut t2) = (sc.tx("T1"), sc.tx("T2"));
    let found = t1.ok("SELECT * FROM test WHERE value % 5 = 0");
    assert_eq!(found, kv(&[(1, 10), (2, 20)]));
    let insert = "INSERT INTO test (id, value) VALUES (3, 30)";
    let again = "SELECT * FROM test WHERE value % 3 = 0";
    if level == Serializable {
        t2.blocks(insert, &t1);
        assert!(t1.ok(again).is_empty());
        t1.ok("COMMIT");
        t2.resumes_ok();
        t2.ok("COMMIT");
    } else {
        t2.ok(insert);
        t2.ok("COMMIT");
        assert_eq!(t1.ok(again), kv(&[(3, 30)]), "{level:?}");
        t1.ok("COMMIT");
    }
    assert_eq!(
        sc.committed(),
        kv(&[(1, 10), (2, 20), (3, 30)]),
        "{level:?}"
    );
}

fn g_single_write_predicate(level: Level) {
    let sc = Scene::new("gsw", level);
    let (mut t1, mut t2) = (sc.victim("T1"), sc.tx("T2"));
    assert_eq!(t1.ok("SELECT * FROM test WHERE id = 1"), kv(&[(1, 10)]));
    t2.ok("SELECT * FROM test");
    let (update, delete) = (
        "UPDATE test SET value = 12 WHERE id = 1",
        "DELETE FROM test WHERE value = 20",
    );
    if level.keeps_read_locks() {
        t2.blocks(update, &t1);
        let e = t1.fails(delete);
        t1.is_victim(e);
        t2.resumes_ok();
    } else {
        t2.ok(update);
        t1.blocks(delete, &t2);
    }
    t2.ok("UPDATE test SET value = 18 WHERE id = 2");
    t2.ok("COMMIT");
    if !level.keeps_read_locks() {
        t1.resumes_ok();
        t1.ok("COMMIT");
    }
    assert_eq!(sc.committed(), kv(&[(1, 12), (2, 18)]), "{level:?}");
}

/// G2-item (write skew): both read rows 1 and 2, then each updates a different one. Below
/// REPEATABLE READ both run and commit (11, 21: each wrote on a read the other made
/// stale). REPEATABLE READ and SERIALIZABLE: T1's UPDATE waits for T2's read lock, T2's
/// UPDATE closes the cycle and T2 is the deadlock victim; T1 commits 11, 20.
#[test]
fn g2_item_write_skew() {
    for level in LEVELS {
        let sc = Scene::new("g2i", level);
        let (mut t1, mut t2) = (sc.tx("T1"), sc.victim("T2"));
        let read = "SELECT * FROM test WHERE id IN (1, 2)";
        assert_eq!(t1.ok(read), kv(&[(1, 10), (2, 20)]));
        assert_eq!(t2.ok(read), kv(&[(1, 10), (2, 20)]));
        let (w1, w2) = (
            "UPDATE test SET value = 11 WHERE id = 1",
            "UPDATE test SET value = 21 WHERE id = 2",
        );
        if level.keeps_read_locks() {
            t1.blocks(w1, &t2);
            let e = t2.fails(w2);
            t2.is_victim(e);
            t1.resumes_ok();
            t1.ok("COMMIT");
            assert_eq!(sc.committed(), kv(&[(1, 11), (2, 20)]), "{level:?}");
        } else {
            t1.ok(w1);
            t2.ok(w2);
            t1.ok("COMMIT");
            t2.ok("COMMIT");
            assert_eq!(sc.committed(), kv(&[(1, 11), (2, 21)]), "{level:?}");
        }
    }
}

/// G2 (anti-dependency cycles): both find no row with `value % 3 = 0`, then each inserts
/// one. Below SERIALIZABLE (REPEATABLE READ too: it locks rows, not the predicate) both
/// commit, and each row is one the other's read should have seen: (3, 30) and (4, 42).
/// SERIALIZABLE: T1's INSERT waits for T2's read (RangeI-N against the RangeS-S both
/// scans hold on the end of the index), T2's INSERT closes the cycle and T2 is the
/// deadlock victim; only (3, 30) is added.
#[test]
fn g2_anti_dependency_cycles() {
    for level in LEVELS {
        let sc = Scene::new("g2", level);
        let (mut t1, mut t2) = (sc.tx("T1"), sc.victim("T2"));
        let read = "SELECT * FROM test WHERE value % 3 = 0";
        assert!(t1.ok(read).is_empty());
        assert!(t2.ok(read).is_empty());
        let (i1, i2) = (
            "INSERT INTO test (id, value) VALUES (3, 30)",
            "INSERT INTO test (id, value) VALUES (4, 42)",
        );
        let rows = if level == Serializable {
            t1.blocks(i1, &t2);
            let e = t2.fails(i2);
            t2.is_victim(e);
            t1.resumes_ok();
            t1.ok("COMMIT");
            kv(&[(1, 10), (2, 20), (3, 30)])
        } else {
            t1.ok(i1);
            t2.ok(i2);
            t1.ok("COMMIT");
            t2.ok("COMMIT");
            kv(&[(1, 10), (2, 20), (3, 30), (4, 42)])
        };
        assert_eq!(sc.committed(), rows, "{level:?}");
    }
}

/// SNAPSHOT is refused until row versioning exists: a database cannot allow it
/// (ALLOW_SNAPSHOT_ISOLATION ON is 40517), and a SNAPSHOT transaction's first read or
/// write of a table is SQL Server's 3952 (16, 1) for a database that does not allow it,
/// changing nothing.
#[test]
fn snapshot_is_refused() {
    let sc = Scene::new("snap", ReadCommitted);
    let mut c = sc.server.connect_to(Some(DB));
    let refused = common::tds::numbers(
        &mut c,
        &format!("ALTER DATABASE {DB} SET ALLOW_SNAPSHOT_ISOLATION ON"),
    );
    assert_eq!(refused, vec![40517]);
    run(
        &mut c,
        "SET TRANSACTION ISOLATION LEVEL SNAPSHOT; BEGIN TRAN",
    );
    for sql in [
        format!("SELECT * FROM {}", sc.table),
        format!("UPDATE {} SET value = 0", sc.table),
    ] {
        assert_eq!(
            common::tds::errors(&mut c, &sql),
            vec![(3952, 16, 1)],
            "{sql}"
        );
    }
    run(&mut c, "IF @@TRANCOUNT > 0 ROLLBACK");
    assert_eq!(sc.committed(), kv(&[(1, 10), (2, 20)]));
}
