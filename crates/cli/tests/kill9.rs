//! A real `extentdb` process killed with SIGKILL mid-workload, many times: each round runs a
//! script of small transactions (two rows each, k and -k, committed together, then a PRINT
//! that acknowledges k), kills the process at a seeded moment, and restarts. Every
//! acknowledged k must be there after the restart, every transaction must be all or nothing
//! (k present exactly when -k is), and no key beyond those attempted may appear.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn exec(dir: &std::path::Path, db: &str, sql: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_extentdb"))
        .args(["exec", "--data-dir"])
        .arg(dir)
        .args(["-d", db, "-Q", sql])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The integer keys a `SELECT k FROM T` printed.
fn keys(out: &str) -> BTreeSet<i64> {
    out.lines()
        .filter_map(|l| l.trim().parse::<i64>().ok())
        .collect()
}

/// Proves no acknowledged commit is lost and no partial transaction is visible across
/// repeated SIGKILLs of a real process.
#[test]
fn sigkill_never_loses_an_acknowledged_commit() {
    let rounds: u64 = std::env::var("XDB_KILL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let dir = std::env::temp_dir().join(format!("xdb-kill9-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    exec(
        &dir,
        "master",
        "CREATE DATABASE Kill9 (NAME = Kill9, FILENAME = 'Kill9.mdf', SIZE = 8MB, FILEGROWTH = 0) \
         LOG ON (NAME = Kill9_log, FILENAME = 'Kill9_log.ldf', SIZE = 16MB);",
    );
    exec(
        &dir,
        "Kill9",
        "CREATE TABLE T (k INT NOT NULL, pad VARCHAR(600));",
    );
    let mut acked = BTreeSet::new();
    let mut next = 1i64;
    for round in 0..rounds {
        let first = next;
        let mut script = String::from("SET NOCOUNT ON;\nGO\n");
        for k in first..first + 400 {
            script.push_str(&format!(
                "BEGIN TRAN; INSERT INTO T VALUES ({k}, REPLICATE('x', {})); \
                 INSERT INTO T VALUES ({}, 'pair'); COMMIT; PRINT 'ack {k}';\nGO\n",
                k % 600,
                -k
            ));
        }
        next = first + 400;
        let path = dir.join(format!("round{round}.sql"));
        std::fs::write(&path, script).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_extentdb"))
            .args(["exec", "--data-dir"])
            .arg(&dir)
            .args(["-d", "Kill9", "-i"])
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        // Kill after a seeded number of acknowledgements, or a deadline.
        let kill_after = 20 + (round * 37) % 200;
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = 0;
        let mut lines = BufReader::new(stdout).lines();
        while let Some(Ok(line)) = lines.next() {
            if let Some(k) = line.strip_prefix("ack ") {
                acked.insert(k.trim().parse::<i64>().unwrap());
                seen += 1;
            }
            if seen >= kill_after || Instant::now() > deadline {
                break;
            }
        }
        // A seeded pause lands the kill in different phases of the next transaction.
        std::thread::sleep(Duration::from_micros((round * 1733) % 4000));
        // SIGKILL: no destructor, no flush, no checkpoint runs.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
        let present = keys(&exec(&dir, "Kill9", "SET NOCOUNT ON; SELECT k FROM T;"));
        eprintln!(
            "round {round}: {} acknowledged so far, {} rows present",
            acked.len(),
            present.len()
        );
        for k in &acked {
            assert!(present.contains(k), "round {round}: acknowledged {k} lost");
        }
        for k in &present {
            assert!(
                present.contains(&-k),
                "round {round}: half of transaction {} visible",
                k.abs()
            );
            assert!(k.abs() < next, "round {round}: key {k} never inserted");
        }
    }
    assert!(
        acked.len() as u64 >= rounds * 20,
        "too few acknowledgements"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
