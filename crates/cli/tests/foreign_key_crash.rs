//! FOREIGN KEYs under a kill -9 (issue 22): four sessions insert parents and children of
//! three kinds (a clustered child ON DELETE CASCADE, a heap child with a plain NO ACTION
//! key, a clustered child ON DELETE SET NULL), insert orphans (547, nothing in), delete
//! parents (cascade, set null, or 547 while a NO ACTION child refers to them) and run
//! explicit transactions, some rolled back on purpose and some failing whole under
//! XACT_ABORT; deadlock victims (1205) and lock timeouts (1222) try again. The server is
//! SIGKILLed at a seeded moment and restarted, for several rounds (`XDB_KILL_ROUNDS` / 5,
//! 4 by default).
//!
//! Each session owns a key range, so it knows exactly what its rows must be: every error
//! a batch gives is the one its model predicts, and after each restart its rows equal its
//! model with or without the batch in flight at the kill. No child row refers to a
//! missing parent, DBCC CHECKDB is clean, and the keys are still enforced (547).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use extentdb_sql::types::Value;
use extentdb_tds::client::Client;

mod common;
use common::tds::{
    all_rows, assert_checkdb_clean, connect_at, int, numbers, restart, run, start_in_database,
    table, Rng, Server,
};

const WORKERS: i64 = 4;
/// Parents 1..=STABLE every session's children may refer to; none is ever deleted.
const STABLE: i64 = 20;
/// Each session's keys: `(slot + 1) * RANGE ..`, in every table.
const RANGE: i64 = 1_000_000;

const SCHEMA: &str = "CREATE TABLE parent (id INT PRIMARY KEY, owner INT NOT NULL); \
     CREATE TABLE cas (id INT PRIMARY KEY, pid INT NOT NULL \
       REFERENCES parent (id) ON DELETE CASCADE); \
     CREATE TABLE noa (id INT NOT NULL, pid INT NULL REFERENCES parent (id)); \
     CREATE TABLE nul (id INT PRIMARY KEY, pid INT NULL \
       REFERENCES parent (id) ON DELETE SET NULL)";

/// One session's rows, as its acknowledged batches left them.
#[derive(Clone, Debug, Default, PartialEq)]
struct Rows {
    parents: BTreeSet<i64>,
    cas: BTreeMap<i64, i64>,
    noa: BTreeMap<i64, i64>,
    nul: BTreeMap<i64, Option<i64>>,
}

impl Rows {
    /// The rows after a DELETE of `gone` parents, or None when a NO ACTION child refers
    /// to one of them (547, nothing changed).
    fn without_parents(&self, gone: &BTreeSet<i64>) -> Option<Rows> {
        if self.noa.values().any(|p| gone.contains(p)) {
            return None;
        }
        let mut r = self.clone();
        r.parents.retain(|p| !gone.contains(p));
        r.cas.retain(|_, p| !gone.contains(p));
        for p in r.nul.values_mut() {
            if p.is_some_and(|v| gone.contains(&v)) {
                *p = None;
            }
        }
        Some(r)
    }
}

/// A batch, the errors it must give, and the session's rows once it is acknowledged.
struct Step {
    sql: String,
    want: Vec<i32>,
    after: Rows,
}

/// One session's life across rounds: its model, its seeded choices and its counters.
struct Worker {
    slot: i64,
    rows: Rows,
    /// What the batch in flight at the kill would leave, if it committed.
    pending: Option<Rows>,
    next_key: i64,
    rng: Rng,
    acked: u64,
    refused: u64,
    retried: u64,
}

impl Worker {
    fn new(slot: i64, seed: u64) -> Worker {
        Worker {
            slot,
            rows: Rows::default(),
            pending: None,
            next_key: (slot + 1) * RANGE,
            rng: Rng(seed | 1),
            acked: 0,
            refused: 0,
            retried: 0,
        }
    }

    fn key(&mut self) -> i64 {
        self.next_key += 1;
        self.next_key
    }

    /// A parent a new child may refer to: one of this session's or a stable one.
    fn some_parent(&mut self) -> i64 {
        let own: Vec<i64> = self.rows.parents.iter().copied().collect();
        if own.is_empty() || self.rng.below(3) == 0 {
            1 + self.rng.below(STABLE as u64) as i64
        } else {
            own[self.rng.below(own.len() as u64) as usize]
        }
    }

    fn own_parent(&mut self) -> Option<i64> {
        let own: Vec<i64> = self.rows.parents.iter().copied().collect();
        (!own.is_empty()).then(|| own[self.rng.below(own.len() as u64) as usize])
    }

    /// A key no parent has or ever will have.
    fn missing(&mut self) -> i64 {
        -self.key()
    }

    fn plan(&mut self) -> Step {
        match self.rng.below(12) {
            0 | 1 => self.insert_parent(),
            2..=4 => self.insert_child(),
            5 => self.insert_orphans(),
            6 | 7 => self.delete_parents(),
            8 | 9 => self.transaction(),
            10 => self.delete_no_action_child(),
            _ => self.failing_transaction(),
        }
    }

    fn insert_parent(&mut self) -> Step {
        let id = self.key();
        let mut after = self.rows.clone();
        after.parents.insert(id);
        let sql = format!("INSERT INTO parent VALUES ({id}, {})", self.slot);
        Step {
            sql,
            want: vec![],
            after,
        }
    }

    fn insert_child(&mut self) -> Step {
        let (id, pid) = (self.key(), self.some_parent());
        let mut after = self.rows.clone();
        let sql = match self.rng.below(3) {
            0 => {
                after.cas.insert(id, pid);
                format!("INSERT INTO cas VALUES ({id}, {pid})")
            }
            1 => {
                after.noa.insert(id, pid);
                format!("INSERT INTO noa (id, pid) VALUES ({id}, {pid})")
            }
            _ => {
                after.nul.insert(id, Some(pid));
                format!("INSERT INTO nul VALUES ({id}, {pid})")
            }
        };
        Step {
            sql,
            want: vec![],
            after,
        }
    }

    /// A statement with one orphan among good rows, or an UPDATE to a missing parent:
    /// 547 and nothing changed.
    fn insert_orphans(&mut self) -> Step {
        let (a, b, good, bad) = (self.key(), self.key(), self.some_parent(), self.missing());
        let child = self.rows.nul.keys().next().copied();
        let sql = match (self.rng.below(4), child) {
            (0, _) => format!("INSERT INTO cas VALUES ({a}, {good}), ({b}, {bad})"),
            (1, _) => format!("INSERT INTO noa VALUES ({a}, {bad}), ({b}, {good})"),
            (2, Some(c)) => format!("UPDATE nul SET pid = {bad} WHERE id = {c}"),
            _ => format!("INSERT INTO nul SELECT {a}, {good} UNION ALL SELECT {b}, {bad}"),
        };
        Step {
            sql,
            want: vec![547],
            after: self.rows.clone(),
        }
    }

    /// One parent, or a range of this session's parents.
    fn delete_parents(&mut self) -> Step {
        let Some(p) = self.own_parent() else {
            return self.insert_parent();
        };
        let q = self.own_parent().unwrap_or(p);
        let (lo, hi) = if self.rng.below(2) == 0 {
            (p, p)
        } else {
            (p.min(q), p.max(q))
        };
        let gone: BTreeSet<i64> = self.rows.parents.range(lo..=hi).copied().collect();
        let sql = format!("DELETE FROM parent WHERE id BETWEEN {lo} AND {hi}");
        match self.rows.without_parents(&gone) {
            Some(after) => Step {
                sql,
                want: vec![],
                after,
            },
            None => Step {
                sql,
                want: vec![547],
                after: self.rows.clone(),
            },
        }
    }

    /// A new parent with a child of each kind, and maybe one NO ACTION child deleted,
    /// committed or (one time in four) rolled back.
    fn transaction(&mut self) -> Step {
        let (p, c1, c2, c3) = (self.key(), self.key(), self.key(), self.key());
        let mut after = self.rows.clone();
        after.parents.insert(p);
        after.cas.insert(c1, p);
        after.noa.insert(c2, p);
        after.nul.insert(c3, Some(p));
        let mut sql = format!(
            "BEGIN TRAN; INSERT INTO parent VALUES ({p}, {}); INSERT INTO cas VALUES ({c1}, {p}); \
             INSERT INTO noa VALUES ({c2}, {p}); INSERT INTO nul VALUES ({c3}, {p}); ",
            self.slot
        );
        if let Some(&old) = self.rows.noa.keys().next() {
            after.noa.remove(&old);
            sql += &format!("DELETE FROM noa WHERE id = {old}; ");
        }
        if self.rng.below(4) == 0 {
            sql += "ROLLBACK";
            after = self.rows.clone();
        } else {
            sql += "COMMIT";
        }
        Step {
            sql,
            want: vec![],
            after,
        }
    }

    /// Frees a parent for deletion: one NO ACTION child, or all of one parent's.
    fn delete_no_action_child(&mut self) -> Step {
        let Some((&id, &pid)) = self.rows.noa.iter().next() else {
            return self.insert_child();
        };
        let mut after = self.rows.clone();
        let sql = if self.rng.below(2) == 0 || pid <= STABLE {
            after.noa.remove(&id);
            format!("DELETE FROM noa WHERE id = {id}")
        } else {
            after.noa.retain(|_, p| *p != pid);
            format!("DELETE FROM noa WHERE pid = {pid}")
        };
        Step {
            sql,
            want: vec![],
            after,
        }
    }

    /// Under XACT_ABORT, a 547 after good writes rolls the whole transaction back.
    fn failing_transaction(&mut self) -> Step {
        let (p, c, n, bad) = (self.key(), self.key(), self.key(), self.missing());
        let sql = format!(
            "BEGIN TRAN; INSERT INTO parent VALUES ({p}, {}); INSERT INTO cas VALUES ({c}, {p}); \
             INSERT INTO nul VALUES ({n}, {bad}); COMMIT",
            self.slot
        );
        Step {
            sql,
            want: vec![547],
            after: self.rows.clone(),
        }
    }
}

/// Runs a worker's batches until the server is killed; a lost connection before the
/// kill (a hang past the client's timeout, a crash) fails the test.
fn work(addr: String, mut w: Worker, killed: Arc<AtomicBool>) -> Worker {
    let Ok(mut c) = connect_at(&addr, Some("fk9"), 30) else {
        assert!(
            killed.load(Ordering::SeqCst),
            "session {} got no login",
            w.slot
        );
        return w;
    };
    let set = "SET XACT_ABORT ON; SET LOCK_TIMEOUT 10000";
    if c.batch(set).is_err() {
        assert!(killed.load(Ordering::SeqCst));
        return w;
    }
    loop {
        let step = w.plan();
        w.pending = Some(step.after.clone());
        let mut tries = 0;
        let got = loop {
            let Ok(r) = c.batch(&step.sql) else {
                assert!(
                    killed.load(Ordering::SeqCst),
                    "{}: connection lost",
                    step.sql
                );
                return w;
            };
            let got: Vec<i32> = r.errors().map(|e| e.number).collect();
            if got != [1205] && got != [1222] {
                break got;
            }
            tries += 1;
            w.retried += 1;
            assert!(tries < 50, "{}: retried {tries} times", step.sql);
        };
        assert_eq!(got, step.want, "session {}: {}", w.slot, step.sql);
        w.pending = None;
        if got.is_empty() {
            w.acked += 1;
        } else {
            w.refused += 1;
        }
        w.rows = step.after;
    }
}

/// The rows of session `slot`'s key range, as the database holds them (a row twice, as
/// a heap could hold it, fails: the model's maps would hide it).
fn read_rows(c: &mut Client, slot: i64) -> Rows {
    let (lo, hi) = ((slot + 1) * RANGE, (slot + 2) * RANGE);
    let range = format!("WHERE id > {lo} AND id < {hi} ORDER BY id");
    let pairs = |c: &mut Client, t: &str| {
        all_rows(&run(c, &format!("SELECT id, pid FROM {t} {range}")))
            .into_iter()
            .map(|r| {
                let pid = (r[1] != Value::Null).then(|| int(&r[1]));
                (int(&r[0]), pid)
            })
            .collect::<Vec<_>>()
    };
    let parents = all_rows(&run(c, &format!("SELECT id FROM parent {range}")));
    let (cas, noa, nul) = (pairs(c, "cas"), pairs(c, "noa"), pairs(c, "nul"));
    let rows = Rows {
        parents: parents.iter().map(|r| int(&r[0])).collect(),
        cas: cas.iter().map(|&(i, p)| (i, p.unwrap())).collect(),
        noa: noa.iter().map(|&(i, p)| (i, p.unwrap())).collect(),
        nul: nul.iter().copied().collect(),
    };
    assert_eq!(
        (parents.len(), cas.len(), noa.len(), nul.len()),
        (
            rows.parents.len(),
            rows.cas.len(),
            rows.noa.len(),
            rows.nul.len()
        ),
        "session {slot}: a row is there twice"
    );
    rows
}

/// Every child row's parent exists (NOT EXISTS for each child, a LEFT JOIN for one).
fn assert_no_orphans(c: &mut Client, when: &str) {
    for t in ["cas", "noa", "nul"] {
        let sql = format!(
            "SELECT COUNT(*) FROM {t} WHERE pid IS NOT NULL \
             AND NOT EXISTS (SELECT 1 FROM parent p WHERE p.id = {t}.pid)"
        );
        assert_eq!(table(c, &sql), ["0"], "{when}: orphans in {t}");
    }
    let sql = "SELECT COUNT(*) FROM cas LEFT JOIN parent p ON p.id = cas.pid WHERE p.id IS NULL";
    assert_eq!(table(c, sql), ["0"], "{when}: orphans in cas (join)");
}

/// After a restart: each session's rows are its model with or without its batch in
/// flight (which then becomes its model), no orphans, CHECKDB clean, keys enforced.
fn check_after_restart(s: &Server, workers: &mut [Worker], round: u64) {
    let when = format!("after kill {round}");
    let mut c = s.connect_to(Some("fk9"));
    for w in workers.iter_mut() {
        let actual = read_rows(&mut c, w.slot);
        if actual != w.rows {
            assert_eq!(
                Some(&actual),
                w.pending.as_ref(),
                "{when}: session {}'s rows are neither its acknowledged state nor that plus its batch in flight (acknowledged: {:?})",
                w.slot,
                w.rows
            );
            w.rows = actual;
        }
        w.pending = None;
    }
    assert_eq!(
        table(
            &mut c,
            &format!("SELECT COUNT(*) FROM parent WHERE id <= {STABLE}")
        ),
        [STABLE.to_string()],
        "{when}: stable parents"
    );
    assert_no_orphans(&mut c, &when);
    assert_checkdb_clean(&mut c, "fk9", &when);
    for sql in [
        "INSERT INTO cas VALUES (-1, -7)",
        "INSERT INTO noa VALUES (-1, -7)",
        "INSERT INTO nul VALUES (-1, -7)",
        "DELETE FROM parent WHERE id = 1",
    ] {
        assert_eq!(numbers(&mut c, sql), [547], "{when}: {sql}");
    }
}

/// Workers run until a SIGKILL `run_for` after they start; the server comes back.
fn kill_under_load(s: Server, workers: Vec<Worker>, run_for: Duration) -> (Server, Vec<Worker>) {
    let killed = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = workers
        .into_iter()
        .map(|w| {
            let (addr, k) = (s.addr.clone(), killed.clone());
            thread::spawn(move || work(addr, w, k))
        })
        .collect();
    thread::sleep(run_for);
    killed.store(true, Ordering::SeqCst);
    let s = restart(s);
    let workers = handles.into_iter().map(|h| h.join().unwrap()).collect();
    (s, workers)
}

/// Seeded rounds of load, SIGKILL and restart, each checked against the sessions' models.
#[test]
fn kill_9_under_foreign_key_load_leaves_no_orphan() {
    let stable: Vec<String> = (1..=STABLE).map(|i| format!("({i}, -1)")).collect();
    let (mut s, _) = start_in_database(
        "fk-kill9",
        "fk9",
        &format!(
            "{SCHEMA}; INSERT INTO parent VALUES {}; INSERT INTO noa VALUES (0, 1)",
            stable.join(", ")
        ),
    );
    let seed = std::env::var("XDB_FK_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_f0c5_u64);
    let mut rng = Rng(seed);
    let mut workers: Vec<Worker> = (0..WORKERS).map(|w| Worker::new(w, rng.next())).collect();
    for round in 0..common::long_kill_rounds() {
        let ms = 600 + rng.below(1400);
        (s, workers) = kill_under_load(s, workers, Duration::from_millis(ms));
        check_after_restart(&s, &mut workers, round);
        eprintln!("round {round}: killed after {ms} ms, rows exact");
    }
    let (acked, refused, retried) = workers.iter().fold((0, 0, 0), |t, w| {
        (t.0 + w.acked, t.1 + w.refused, t.2 + w.retried)
    });
    eprintln!("{acked} batches acknowledged, {refused} refused as predicted, {retried} retried");
    assert!(
        acked > 100 && refused > 20,
        "the load did work: {acked}, {refused}"
    );
    let rows: Vec<usize> = workers
        .iter()
        .map(|w| w.rows.cas.len() + w.rows.noa.len())
        .collect();
    assert!(rows.iter().all(|n| *n > 0), "children survive: {rows:?}");
}
