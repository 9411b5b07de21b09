//! INSERT ... SELECT and UPDATE through their spools (12 MB each, past the 8 MB that
//! spills them to work files in tempdb's directory) on two TDS sessions at once, the server
//! SIGKILLed at a seeded moment, for a few rounds (issue 20 item 3). After each restart:
//! every acknowledged statement is wholly there, the one each session had in flight wholly
//! there or wholly absent (statement atomicity), nothing else; CHECKDB finds nothing; and
//! no work file is left in the instance's directories (they are unlinked at creation).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use extentdb_sql::types::Value;

mod common;
use common::tds::{all_rows, connect_at, restart, rows, run, Server};

/// Rows of the source each INSERT ... SELECT copies and of the table each UPDATE changes:
/// 6,000 rows of 2 KB, 12 MB.
const ROWS: i64 = 6000;

/// What a session's loop got acknowledged, and the statement it had in flight.
#[derive(Default)]
struct Progress {
    acked: Vec<i64>,
    in_flight: Option<i64>,
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i as i64,
        Value::BigInt(i) => *i,
        v => panic!("{v:?}"),
    }
}

/// Runs `statement(n)` for n = first, first + 1, ... on its own session until the server
/// goes away or `stop` is set, recording each acknowledgement.
fn session_loop(
    addr: String,
    first: i64,
    statement: fn(i64) -> String,
    progress: Arc<Mutex<Progress>>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let Ok(mut c) = connect_at(&addr, Some("K"), 120) else {
            return;
        };
        let mut n = first;
        while !stop.load(Ordering::Relaxed) {
            progress.lock().unwrap().in_flight = Some(n);
            match c.batch(&statement(n)) {
                Ok(r) if r.errors().next().is_none() => {
                    let mut p = progress.lock().unwrap();
                    p.acked.push(n);
                    p.in_flight = None;
                }
                Ok(r) => panic!("statement {n}: {:?}", r.errors().next()),
                Err(_) => return,
            }
            n += 1;
        }
    })
}

fn insert_batch(b: i64) -> String {
    format!("INSERT INTO dst SELECT {b}, id, pad FROM src")
}

fn update_all(_: i64) -> String {
    "UPDATE u SET v = v + 1".into()
}

/// Proves statement atomicity and a clean database across SIGKILLs of a server running
/// spooled INSERT ... SELECT and UPDATE statements on two sessions.
#[test]
fn spooled_statements_survive_sigkill_whole_or_not_at_all() {
    let rounds = common::long_kill_rounds();
    let mut s = Server::start("spool-kill9", &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "CREATE DATABASE K ON (NAME = K, FILENAME = 'K.mdf', SIZE = 64MB, FILEGROWTH = 64MB) \
         LOG ON (NAME = K_log, FILENAME = 'K_log.ldf', SIZE = 64MB, FILEGROWTH = 64MB); \
         ALTER DATABASE K SET RECOVERY SIMPLE",
    );
    run(
        &mut c,
        &format!(
            "USE K; SET NOCOUNT ON; \
             CREATE TABLE src (id INT NOT NULL, pad CHAR(2000) NOT NULL); \
             CREATE TABLE dst (b INT NOT NULL, id INT NOT NULL, pad CHAR(2000) NOT NULL); \
             CREATE TABLE u (id INT NOT NULL, v INT NOT NULL, pad CHAR(2000) NOT NULL); \
             DECLARE @i INT = 0; BEGIN TRAN; \
             WHILE @i < {ROWS} BEGIN INSERT INTO src VALUES (@i, 's'); \
             INSERT INTO u VALUES (@i, 0, 'u'); SET @i += 1; END; COMMIT"
        ),
    );
    drop(c);
    let inserts = Arc::new(Mutex::new(Progress::default()));
    let updates = Arc::new(Mutex::new(Progress::default()));
    let mut killed_mid_statement = 0;
    for round in 0..rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let next_batch = 1000 * round as i64 + 1;
        let a = session_loop(
            s.addr.clone(),
            next_batch,
            insert_batch,
            inserts.clone(),
            stop.clone(),
        );
        let b = session_loop(s.addr.clone(), 0, update_all, updates.clone(), stop.clone());
        // Seeded: a different moment of the statements each round.
        std::thread::sleep(Duration::from_millis(1500 + (round * 7_919) % 2000));
        let in_flight = inserts.lock().unwrap().in_flight.is_some()
            || updates.lock().unwrap().in_flight.is_some();
        killed_mid_statement += usize::from(in_flight);
        s = restart(s);
        stop.store(true, Ordering::Relaxed);
        a.join().unwrap();
        b.join().unwrap();
        check_after_kill(&s, round, &inserts, &updates);
        // The statements in flight are settled: present or absent, they are not retried.
        inserts.lock().unwrap().in_flight = None;
        updates.lock().unwrap().in_flight = None;
    }
    eprintln!("{killed_mid_statement} of {rounds} kills landed while a statement ran");
    assert!(
        !inserts.lock().unwrap().acked.is_empty() && !updates.lock().unwrap().acked.is_empty(),
        "no statement finished before a kill"
    );
}

/// After a restart: the batches present are the acknowledged ones (each whole) and at most
/// the one in flight (whole); every row of u has the same v, the acknowledged UPDATEs' count
/// or one more; CHECKDB is clean; no work file is left.
fn check_after_kill(
    s: &Server,
    round: u64,
    inserts: &Arc<Mutex<Progress>>,
    updates: &Arc<Mutex<Progress>>,
) {
    let mut c = s.connect_to(Some("K"));
    let batches = all_rows(&run(
        &mut c,
        "SELECT b, COUNT(*), SUM(CAST(id AS BIGINT)) FROM dst GROUP BY b",
    ));
    let mut ins = inserts.lock().unwrap();
    let whole = ROWS * (ROWS - 1) / 2;
    let mut present = Vec::new();
    for r in &batches {
        let b = int(&r[0]);
        assert_eq!(
            (int(&r[1]), int(&r[2])),
            (ROWS, whole),
            "round {round}: batch {b} is not whole"
        );
        present.push(b);
    }
    for b in &ins.acked {
        assert!(
            present.contains(b),
            "round {round}: acknowledged batch {b} lost"
        );
    }
    for b in &present {
        assert!(
            ins.acked.contains(b) || ins.in_flight == Some(*b),
            "round {round}: batch {b} was never run"
        );
        // A batch committed but not acknowledged before the kill counts as done.
        if !ins.acked.contains(b) {
            ins.acked.push(*b);
        }
    }
    let v = rows(&run(&mut c, "SELECT MIN(v), MAX(v), COUNT(*) FROM u"));
    let (lo, hi) = (int(&v[0][0]), int(&v[0][1]));
    assert_eq!(int(&v[0][2]), ROWS);
    assert_eq!(lo, hi, "round {round}: an UPDATE is half there");
    let mut upd = updates.lock().unwrap();
    let acked = upd.acked.len() as i64;
    let in_flight = i64::from(upd.in_flight.is_some());
    assert!(
        (acked..=acked + in_flight).contains(&lo),
        "round {round}: v = {lo}, {acked} UPDATEs acknowledged, {in_flight} in flight"
    );
    while (upd.acked.len() as i64) < lo {
        upd.acked.push(0);
    }
    let check = c.batch("DBCC CHECKDB (K) WITH NO_INFOMSGS").unwrap();
    assert_eq!(
        check.errors().map(|e| e.text.clone()).collect::<Vec<_>>(),
        Vec::<String>::new(),
        "round {round}: CHECKDB"
    );
    assert!(
        common::sort_work_files(&s.dir).is_empty(),
        "round {round}: {:?}",
        common::sort_work_files(&s.dir)
    );
}
