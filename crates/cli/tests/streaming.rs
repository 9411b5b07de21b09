//! Result sets stream from the page to the TDS packet (issue 20 item 3): a SELECT larger
//! than the server's memory cap, read by a client that stops reading, holds neither the
//! whole result in the server's memory nor the database from other sessions; an attention
//! in the middle of a streamed result ends it with DONE and ATTN; TOP stops the scan.

use std::time::{Duration, Instant};

use extentdb_sql::exec::Output;
use extentdb_sql::types::Value;
use extentdb_tds::client::{Client, Response};

mod common;
use common::tds::Server;

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

fn ok(r: Response) -> Response {
    if let Some(e) = r.errors().next() {
        panic!("Msg {}: {}", e.number, e.text);
    }
    r
}

fn rows(r: &Response) -> Vec<Vec<Value>> {
    r.outputs
        .iter()
        .find_map(|o| match o {
            Output::Rows { rows, .. } => Some(rows.clone()),
            _ => None,
        })
        .expect("a result set")
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
