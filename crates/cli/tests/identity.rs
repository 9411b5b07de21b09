//! IDENTITY through TDS (issue 20): four connections insert into one identity table at
//! once, the server is killed (SIGKILL) while they do, and after the restart the first
//! insert reads no table (sys.dm_os_performance_counters' "Full Scans/sec" does not move;
//! a SELECT COUNT(*) moves it, so a scan would show), its value comes after every value
//! stored, skipping at most one block (1,000 for int) and the statements in flight; more
//! concurrent inserts follow, then a clean stop (SIGTERM) after which the next value is
//! exactly the last plus one. Every identity value stored is distinct throughout.

mod common;
use common::tds::{all_rows, connect_at, restart, run, Server};

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use extentdb_sql::types::Value;

const CONNECTIONS: usize = 4;

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i as i64,
        Value::BigInt(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

/// Every id stored, checked distinct.
fn ids(s: &Server) -> BTreeSet<i64> {
    let mut c = s.connect_to(Some("idt"));
    let rows = all_rows(&run(&mut c, "SELECT id FROM dbo.t"));
    let ids: BTreeSet<i64> = rows.iter().map(|r| int(&r[0])).collect();
    assert_eq!(ids.len(), rows.len(), "an identity value is stored twice");
    ids
}

/// Connections inserting two rows per statement until `stop` or an error (the server
/// killed); returns the ids each acknowledged statement reported (SCOPE_IDENTITY is the
/// second row's).
fn insert_concurrently(
    s: &Server,
    statements: usize,
    stop: &Arc<AtomicBool>,
    done: &Arc<AtomicUsize>,
) -> Vec<std::thread::JoinHandle<Vec<i64>>> {
    (0..CONNECTIONS)
        .map(|k| {
            let (addr, stop, done) = (s.addr.clone(), stop.clone(), done.clone());
            std::thread::spawn(move || {
                let mut c = connect_at(&addr, Some("idt"), 60).unwrap_or_else(|_| panic!("login"));
                let mut acked = Vec::new();
                let sql = format!(
                    "INSERT INTO dbo.t (conn, pad) VALUES ({k}, 'a'), ({k}, 'b'); \
                     SELECT CAST(SCOPE_IDENTITY() AS BIGINT)"
                );
                for _ in 0..statements {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(r) = c.batch(&sql) else { break };
                    if r.errors().next().is_some() {
                        break;
                    }
                    acked.push(int(&all_rows(&r)[0][0]));
                    done.fetch_add(2, Ordering::Relaxed);
                }
                acked
            })
        })
        .collect()
}

/// Inserts one row in a batch that reads the full-scan counter before and after it:
/// (scans before, the row's id, scans after).
fn first_insert(s: &Server) -> (i64, i64, i64) {
    let mut c = s.connect_to(Some("idt"));
    let counter = "SELECT cntr_value FROM sys.dm_os_performance_counters \
                   WHERE counter_name = 'Full Scans/sec'";
    let r = run(
        &mut c,
        &format!(
            "{counter}; INSERT INTO dbo.t (conn) VALUES (99); \
             SELECT CAST(SCOPE_IDENTITY() AS BIGINT); {counter}"
        ),
    );
    let v: Vec<i64> = all_rows(&r).iter().map(|r| int(&r[0])).collect();
    assert_eq!(v.len(), 3, "{v:?}");
    // The counter sees a scan: a COUNT(*) of the table moves it by one.
    let scans = |c: &mut extentdb_tds::client::Client| int(&all_rows(&run(c, counter))[0][0]);
    let before = scans(&mut c);
    run(&mut c, "SELECT COUNT(*) FROM dbo.t");
    assert_eq!(scans(&mut c), before + 1, "the counter missed a scan");
    (v[0], v[1], v[2])
}

/// Stops the server with SIGTERM (a clean shutdown) and starts another on its directory.
fn stop_cleanly(s: Server) -> Server {
    let mut s = s;
    // SAFETY: signals our own child process.
    unsafe { libc::kill(s.child.id() as i32, libc::SIGTERM) };
    assert!(s.child.wait().unwrap().success());
    let dir = std::mem::replace(&mut s.dir, "/nonexistent-xdb".into());
    drop(s);
    Server::start_in(dir, &[])
}

/// Proves the module docs' claims.
#[test]
fn identity_survives_kill9_and_clean_stop_without_scans() {
    let s = Server::start("identity", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE idt");
    run(
        &mut c,
        "CREATE TABLE idt.dbo.t (id INT IDENTITY(1,1) NOT NULL, conn INT NOT NULL, pad VARCHAR(20) NULL)",
    );
    drop(c);

    // Phase 1: four connections, past the first block of 1,000, killed mid-run.
    let (stop, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let workers = insert_concurrently(&s, 100_000, &stop, &done);
    while done.load(Ordering::Relaxed) < 1_300 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let s = restart(s);
    let acked: Vec<i64> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    let stored = ids(&s);
    assert!(
        acked.iter().all(|v| stored.contains(v)),
        "an acknowledged insert was lost"
    );
    let max = *stored.last().unwrap();
    assert!(max >= 1_300, "{max}");

    // The first insert after the crash: no scan, a new value, at most a block (and the
    // rows of the statements in flight at the kill, two per connection) skipped.
    let (before, id, after) = first_insert(&s);
    assert_eq!(
        before, after,
        "the first insert after the restart read a table"
    );
    assert!(!stored.contains(&id) && id > max, "{id} after {max}");
    assert!(
        id - max <= 1_000 + 1 + 2 * CONNECTIONS as i64,
        "{id} after {max}"
    );

    // Phase 2: concurrent inserts again, then a clean stop: the value continues exactly.
    let stop = Arc::new(AtomicBool::new(false));
    let workers = insert_concurrently(&s, 150, &stop, &done);
    for w in workers {
        assert_eq!(w.join().unwrap().len(), 150, "a statement failed");
    }
    let stored = ids(&s);
    let max = *stored.last().unwrap();
    let s = stop_cleanly(s);
    let (before, id, after) = first_insert(&s);
    assert_eq!(
        before, after,
        "the first insert after the clean stop read a table"
    );
    assert_eq!(id, max + 1, "a clean stop keeps the exact value");
    let all = ids(&s);
    assert_eq!(all.len(), stored.len() + 1);
}
