//! Result sets stream from the page to the TDS packet (issue 20 item 3): a SELECT larger
//! than the server's memory cap, read by a client that stops reading, holds neither the
//! whole result in the server's memory nor the database from other sessions; an attention
//! in the middle of a streamed result ends it with DONE and ATTN; TOP stops the scan.

use std::time::{Duration, Instant};

use extentdb_sql::types::Value;
use extentdb_tds::client::Client;

mod common;
use common::tds::{ok, rows, Server};

const CAP_MB: u64 = 64;
const ROWS: i64 = 40_000;

/// A server whose instance was set up with a `CAP_MB` memory cap.
fn capped_server(name: &str) -> Server {
    let dir = std::env::temp_dir().join(format!("xdb-tds-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_extentdb"))
        .args([
            "setup",
            "--max-server-memory-mb",
            &CAP_MB.to_string(),
            "--data-dir",
        ])
        .arg(&dir)
        .env("MSSQL_SA_PASSWORD", common::tds::PASSWORD)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    Server::start_in(dir, &[])
}

/// A kB figure of the server process's /proc status (VmRSS, VmHWM).
fn status_kb(s: &Server, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{}/status", s.child.id())).unwrap();
    text.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap()
}

/// A heap of `ROWS` rows of 4,000 bytes each (about 160 MB, 2.5 times the cap).
fn load(c: &mut Client) {
    ok(c.batch("CREATE DATABASE s").unwrap());
    ok(
        c.batch("USE s; CREATE TABLE big (id INT NOT NULL, pad CHAR(4000) NOT NULL)")
            .unwrap(),
    );
    ok(c.batch(&format!(
        "SET NOCOUNT ON; DECLARE @i INT = 0; BEGIN TRAN; \
             WHILE @i < {ROWS} BEGIN INSERT INTO big VALUES (@i, 'p'); SET @i += 1; END; \
             COMMIT"
    ))
    .unwrap());
}

#[test]
fn a_result_larger_than_the_cap_streams_to_a_stalled_client() {
    let s = capped_server("stream-stall");
    let mut a = s.connect();
    load(&mut a);
    let mut b = s.connect_to(Some("s"));
    // The peak from here on: the load's own peak does not count.
    std::fs::write(format!("/proc/{}/clear_refs", s.child.id()), "5").unwrap();
    let base_kb = status_kb(&s, "VmRSS");
    a.send_batch("SELECT id, pad FROM big").unwrap();
    // A stops reading: the server fills the socket's buffers and waits on the client.
    std::thread::sleep(Duration::from_millis(1500));
    // Meanwhile another session reads and writes the same database (no lock is held
    // while rows wait for the client).
    let started = Instant::now();
    let n = rows(&ok(b
        .batch("SELECT COUNT(*) FROM big WHERE id < 100")
        .unwrap()));
    assert_eq!(n[0][0], Value::Int(100));
    ok(
        b.batch("CREATE TABLE other (x INT); INSERT INTO other VALUES (1)")
            .unwrap(),
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    let stalled_kb = status_kb(&s, "VmHWM");
    let r = ok(a.read_response().unwrap());
    let got = rows(&r);
    assert_eq!(got.len() as i64, ROWS);
    let sum: i64 = got
        .iter()
        .map(|r| match r[0] {
            Value::Int(i) => i as i64,
            ref v => panic!("{v:?}"),
        })
        .sum();
    assert_eq!(sum, ROWS * (ROWS - 1) / 2);
    let peak_kb = status_kb(&s, "VmHWM");
    // The whole result is 160 MB of text; the pool is capped at 64 MB. Streaming holds a
    // chunk (256 KB of records) and the socket's buffers beyond the pool and the process's
    // base: the peak stays far below the result's size.
    let limit_kb = base_kb + (CAP_MB + 48) * 1024;
    assert!(
        stalled_kb < limit_kb && peak_kb < limit_kb,
        "server RSS peaked at {peak_kb} kB ({stalled_kb} kB while the client stalled); \
         base {base_kb} kB, limit {limit_kb} kB"
    );
}

#[test]
fn an_attention_ends_a_streamed_result_and_the_session_goes_on() {
    let s = capped_server("stream-attn");
    let mut a = s.connect();
    load(&mut a);
    a.send_batch("SELECT id, pad FROM big").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    a.attention().unwrap();
    let r = a.read_response().unwrap();
    // Rows already sent may come first; the answer ends with DONE and ATTN.
    if !r.attention_acknowledged() {
        let r2 = a.read_response().unwrap();
        assert!(r2.attention_acknowledged(), "{:?}", r2.dones);
    }
    let one = rows(&ok(a.batch("SELECT COUNT(*) FROM big").unwrap()));
    assert_eq!(one[0][0], Value::Int(ROWS as i32));
    // TOP stops the scan after its rows; aggregates stream too.
    let top = rows(&ok(a
        .batch("SELECT TOP (3) id FROM big WHERE id >= 10")
        .unwrap()));
    assert_eq!(
        top,
        vec![
            vec![Value::Int(10)],
            vec![Value::Int(11)],
            vec![Value::Int(12)]
        ]
    );
    let agg = rows(&ok(a
        .batch(
            "SELECT MAX(id), MIN(id), SUM(CAST(id AS BIGINT)), COUNT(*) FROM big WHERE id % 2 = 0",
        )
        .unwrap()));
    let half = ROWS / 2;
    assert_eq!(
        agg[0],
        vec![
            Value::Int((ROWS - 2) as i32),
            Value::Int(0),
            Value::BigInt(2 * half * (half - 1) / 2),
            Value::Int(half as i32)
        ]
    );
}

#[test]
fn sorts_and_groups_larger_than_their_memory_spill_and_stay_bounded() {
    let s = capped_server("stream-sort");
    let mut a = s.connect();
    load(&mut a);
    std::fs::write(format!("/proc/{}/clear_refs", s.child.id()), "5").unwrap();
    let base_kb = status_kb(&s, "VmRSS");
    // 160 MB of rows through one sort whose memory is 8 MB: it spills runs and merges them.
    let r = ok(a
        .batch("SELECT id, pad FROM big WHERE id % 2 = 1 ORDER BY pad DESC, id DESC")
        .unwrap());
    let got = rows(&r);
    assert_eq!(got.len() as i64, ROWS / 2);
    let ids: Vec<i64> = got
        .iter()
        .map(|r| match r[0] {
            Value::Int(i) => i as i64,
            ref v => panic!("{v:?}"),
        })
        .collect();
    let want: Vec<i64> = (0..ROWS).rev().filter(|i| i % 2 == 1).collect();
    assert_eq!(ids, want);
    // TOP over ORDER BY, DISTINCT, GROUP BY with HAVING and ORDER BY of an aggregate.
    let top = rows(&ok(a
        .batch("SELECT TOP (2) id FROM big ORDER BY id DESC")
        .unwrap()));
    assert_eq!(
        top,
        vec![vec![Value::Int(39_999)], vec![Value::Int(39_998)]]
    );
    // TOP PERCENT counts first (through the sort, in input order without ORDER BY).
    let pct = rows(&ok(a
        .batch("SELECT TOP (1) PERCENT id, pad FROM big ORDER BY id DESC")
        .unwrap()));
    assert_eq!(pct.len() as i64, ROWS / 100);
    assert_eq!(pct[0][0], Value::Int(39_999));
    let pct = rows(&ok(a
        .batch("SELECT TOP (10) PERCENT id FROM big WHERE id < 15")
        .unwrap()));
    assert_eq!(pct, vec![vec![Value::Int(0)], vec![Value::Int(1)]]);
    let distinct = rows(&ok(a
        .batch("SELECT DISTINCT id % 3 AS m FROM big ORDER BY m DESC")
        .unwrap()));
    assert_eq!(
        distinct,
        vec![
            vec![Value::Int(2)],
            vec![Value::Int(1)],
            vec![Value::Int(0)]
        ]
    );
    let groups = rows(&ok(a
        .batch(
            "SELECT id % 4 AS k, COUNT(*) AS n, MIN(id) AS lo FROM big \
             GROUP BY id % 4 HAVING MIN(id) > 0 ORDER BY n DESC, k",
        )
        .unwrap()));
    let q = (ROWS / 4) as i32;
    assert_eq!(
        groups,
        vec![
            vec![Value::Int(1), Value::Int(q), Value::Int(1)],
            vec![Value::Int(2), Value::Int(q), Value::Int(2)],
            vec![Value::Int(3), Value::Int(q), Value::Int(3)],
        ]
    );
    // Msg 145: DISTINCT orders only by what it selects.
    let e = a.batch("SELECT DISTINCT id FROM big ORDER BY pad").unwrap();
    assert_eq!(e.errors().map(|e| e.number).collect::<Vec<_>>(), vec![145]);
    let peak_kb = status_kb(&s, "VmHWM");
    let limit_kb = base_kb + (CAP_MB + 48) * 1024;
    assert!(peak_kb < limit_kb, "peak {peak_kb} kB, limit {limit_kb} kB");
    // The sort's work files are gone from tempdb's directory.
    let leftovers: Vec<_> = walk(&s.dir)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("extentdb-sort-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A batch of about `mb` MB on the wire (UTF-16) that holds its large-request slot for
/// `hold_s` seconds.
fn large_batch(mb: usize, hold_s: u32) -> String {
    format!(
        "WAITFOR DELAY '00:00:0{hold_s}'; SELECT LEN('{}')",
        "x".repeat(mb << 19)
    )
}

#[test]
fn large_requests_take_turns_and_one_that_waits_too_long_is_refused() {
    let s = Server::start(
        "stream-large",
        &[
            "--large-request-slots",
            "1",
            "--large-request-wait-secs",
            "1",
        ],
    );
    let mut a = s.connect();
    let mut b = s.connect();
    a.send_batch(&large_batch(3, 4)).unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    // A holds the only slot while it runs: B's large batch waits a second, then 8645.
    let refused = b.batch(&large_batch(3, 0)).unwrap();
    assert_eq!(
        refused.errors().map(|e| e.number).collect::<Vec<_>>(),
        vec![8645]
    );
    // Small requests never wait for a slot.
    let small = rows(&ok(b.batch("SELECT 7").unwrap()));
    assert_eq!(small[0][0], Value::Int(7));
    let done = rows(&ok(a.read_response().unwrap()));
    assert_eq!(done[0][0], Value::Int(3 << 19));
    // With the slot given back, B's large batch runs.
    let later = rows(&ok(b.batch(&large_batch(3, 0)).unwrap()));
    assert_eq!(later[0][0], Value::Int(3 << 19));
    assert!(s.errorlog().contains("Error: 8645, Severity: 17"));
}

#[test]
fn update_and_delete_hold_their_matches_not_the_table() {
    let s = capped_server("stream-dml");
    let mut a = s.connect();
    load(&mut a);
    std::fs::write(format!("/proc/{}/clear_refs", s.child.id()), "5").unwrap();
    let base_kb = status_kb(&s, "VmRSS");
    let n = rows(&ok(a
        .batch("DELETE FROM big WHERE id < 10; SELECT @@ROWCOUNT")
        .unwrap()));
    assert_eq!(n[0][0], Value::Int(10));
    let n = rows(&ok(a
        .batch("UPDATE big SET pad = 'q' WHERE id BETWEEN 100 AND 104; SELECT @@ROWCOUNT")
        .unwrap()));
    assert_eq!(n[0][0], Value::Int(5));
    let n = rows(&ok(a
        .batch("SELECT COUNT(*) FROM big WHERE pad = 'q'")
        .unwrap()));
    assert_eq!(n[0][0], Value::Int(5));
    let n = rows(&ok(a.batch("SELECT COUNT(*) FROM big").unwrap()));
    assert_eq!(n[0][0], Value::Int((ROWS - 10) as i32));
    let peak_kb = status_kb(&s, "VmHWM");
    let limit_kb = base_kb + (CAP_MB + 48) * 1024;
    assert!(peak_kb < limit_kb, "peak {peak_kb} kB, limit {limit_kb} kB");
}

#[test]
fn insert_select_spools_instead_of_holding_the_source() {
    let s = capped_server("stream-inssel");
    let mut a = s.connect();
    load(&mut a);
    ok(a.batch(
        "CREATE TABLE copy (id INT NOT NULL, pad CHAR(4000) NOT NULL, n INT IDENTITY(1, 1))",
    )
    .unwrap());
    std::fs::write(format!("/proc/{}/clear_refs", s.child.id()), "5").unwrap();
    let base_kb = status_kb(&s, "VmRSS");
    let n = rows(&ok(a
        .batch("INSERT INTO copy (id, pad) SELECT id, pad FROM big WHERE id % 2 = 0; SELECT @@ROWCOUNT")
        .unwrap()));
    assert_eq!(n[0][0], Value::Int((ROWS / 2) as i32));
    // The statement reads its whole source before it writes: a copy into the table it
    // reads doubles it once, never more.
    let n = rows(&ok(a
        .batch("INSERT INTO big SELECT id + 100000, pad FROM big WHERE id < 5000; SELECT COUNT(*) FROM big")
        .unwrap()));
    assert_eq!(n[0][0], Value::Int((ROWS + 5000) as i32));
    let agg = rows(&ok(a
        .batch("SELECT COUNT(*), MIN(n), MAX(n), SUM(CAST(id AS BIGINT)) FROM copy")
        .unwrap()));
    let half = ROWS / 2;
    assert_eq!(
        agg[0],
        vec![
            Value::Int(half as i32),
            Value::Int(1),
            Value::Int(half as i32),
            Value::BigInt(2 * half * (half - 1) / 2)
        ]
    );
    let peak_kb = status_kb(&s, "VmHWM");
    let limit_kb = base_kb + (CAP_MB + 48) * 1024;
    assert!(peak_kb < limit_kb, "peak {peak_kb} kB, limit {limit_kb} kB");
}
