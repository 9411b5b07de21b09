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
    let leftovers = common::sort_work_files(&s.dir);
    assert!(leftovers.is_empty(), "{leftovers:?}");
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

/// The server's peak RSS since `base_kb` was taken stays within the cap plus 48 MB, plus
/// `undo_kb`: what an open transaction's undo list holds in the storage layer (each heap
/// row an UPDATE changed keeps its old record there until the transaction ends; not the
/// SQL layer's, and not bounded yet).
fn assert_bounded(s: &Server, base_kb: u64, undo_kb: u64, what: &str) {
    let peak_kb = status_kb(s, "VmHWM");
    let limit_kb = base_kb + (CAP_MB + 48) * 1024 + undo_kb;
    assert!(
        peak_kb < limit_kb,
        "{what}: peak {peak_kb} kB, limit {limit_kb} kB"
    );
}

/// Resets the server's peak RSS; returns its RSS now.
fn reset_peak(s: &Server) -> u64 {
    std::fs::write(format!("/proc/{}/clear_refs", s.child.id()), "5").unwrap();
    status_kb(s, "VmRSS")
}

/// Runs `sql` on a session of its own in a thread: the statements of two sessions at once.
fn on_another_session(s: &Server, sql: &'static str) -> std::thread::JoinHandle<Vec<Vec<Value>>> {
    let addr = s.addr.clone();
    std::thread::spawn(move || {
        let mut c = common::tds::connect_at(&addr, Some("s"), 600).unwrap();
        common::tds::all_rows(&ok(c.batch(sql).unwrap()))
    })
}

/// The storage layer's undo list for an UPDATE of `rows` heap rows of about `bytes` each.
fn undo_kb(rows: i64, bytes: u64) -> u64 {
    rows as u64 * (bytes + 100) / 1024
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i as i64,
        Value::BigInt(i) => *i,
        v => panic!("{v:?}"),
    }
}

fn sort_files_left(s: &Server) -> Vec<std::path::PathBuf> {
    common::sort_work_files(&s.dir)
}

/// Proves UPDATE and DELETE spool what they match and change (issue 20 item 3): an UPDATE
/// of every row of a 160 MB table beside another session's UPDATE of rows that grow and
/// move (each changed once: Halloween protection), TOP and TOP PERCENT, @@ROWCOUNT, all
/// with peak RSS within the cap; and an UPDATE that fails mid-write after its first
/// windows (a full filegroup) leaves every row as it was and CHECKDB clean.
#[test]
fn update_and_delete_spool_their_rows_and_stay_bounded() {
    let s = capped_server("stream-upd-spool");
    let mut a = s.connect();
    load(&mut a);
    ok(a.batch(
        "USE s; SET NOCOUNT ON; CREATE TABLE v (id INT NOT NULL, pad VARCHAR(8000) NOT NULL); \
         DECLARE @i INT = 0; BEGIN TRAN; \
         WHILE @i < 6000 BEGIN INSERT INTO v VALUES (@i, REPLICATE('v', 2000)); SET @i += 1; END; \
         COMMIT",
    )
    .unwrap());
    let base_kb = reset_peak(&s);
    let other = on_another_session(
        &s,
        "UPDATE v SET pad = pad + REPLICATE('x', 100) WHERE id % 2 = 0; SELECT @@ROWCOUNT",
    );
    let n = rows(&ok(a
        .batch("UPDATE big SET id = id + 1; SELECT @@ROWCOUNT")
        .unwrap()));
    assert_eq!(n[0][0], Value::Int(ROWS as i32));
    assert_eq!(other.join().unwrap(), vec![vec![Value::Int(3000)]]);
    let sums = rows(&ok(a
        .batch("SELECT COUNT(*), MIN(id), MAX(id), SUM(CAST(id AS BIGINT)) FROM big")
        .unwrap()));
    assert_eq!(
        sums[0],
        vec![
            Value::Int(ROWS as i32),
            Value::Int(1),
            Value::Int(ROWS as i32),
            Value::BigInt(ROWS * (ROWS + 1) / 2)
        ]
    );
    // Every even row of v grew once, every odd one not at all.
    let lens = rows(&ok(a
        .batch("SELECT LEN(pad), COUNT(*), SUM(id % 2) FROM v GROUP BY LEN(pad) ORDER BY 1")
        .unwrap()));
    assert_eq!(
        lens,
        vec![
            vec![Value::Int(2000), Value::Int(3000), Value::Int(3000)],
            vec![Value::Int(2100), Value::Int(3000), Value::Int(0)],
        ]
    );
    // The SQL layer held two spools' memory and a window; before they spooled, it held
    // every match and every changed row (320 MB here) besides the undo.
    assert_bounded(&s, base_kb, undo_kb(ROWS, 4000), "UPDATE of every row");
    let n = rows(&ok(a
        .batch("UPDATE TOP (5) big SET pad = 'q' WHERE id > 100; SELECT @@ROWCOUNT")
        .unwrap()));
    assert_eq!(n[0][0], Value::Int(5));
    // 10 PERCENT of the 10,000 rows matched (id 4, 8, ..., 40000).
    let n = rows(&ok(a
        .batch("DELETE TOP (10) PERCENT FROM big WHERE id % 4 = 0; SELECT @@ROWCOUNT")
        .unwrap()));
    assert_eq!(n[0][0], Value::Int(1000));
    let n = rows(&ok(a
        .batch("SELECT COUNT(*), SUM(CASE WHEN pad = 'q' THEN 1 ELSE 0 END) FROM big")
        .unwrap()));
    // The first 1,000 matches in scan order went (4, 8, ..., 4000): 104 of the five.
    assert_eq!(n[0], vec![Value::Int((ROWS - 1000) as i32), Value::Int(4)]);
    assert_bounded(&s, base_kb, undo_kb(ROWS, 4000), "TOP and TOP PERCENT");
    // A failure while the changes are written (the filegroup is full before the last
    // window) rolls every window back.
    ok(a.batch(
        "USE master; CREATE DATABASE f ON (NAME = f, FILENAME = 'f.mdf', SIZE = 40MB, \
         FILEGROWTH = 0) LOG ON (NAME = f_log, FILENAME = 'f_log.ldf', SIZE = 128MB)",
    )
    .unwrap());
    ok(a.batch(
        "USE f; SET NOCOUNT ON; CREATE TABLE g (id INT NOT NULL, pad VARCHAR(8000) NOT NULL); \
         DECLARE @i INT = 0; BEGIN TRAN; \
         WHILE @i < 12000 BEGIN INSERT INTO g VALUES (@i, REPLICATE('g', 2000)); SET @i += 1; END; \
         COMMIT",
    )
    .unwrap());
    let failed = a.batch("UPDATE g SET pad = REPLICATE('w', 3000)").unwrap();
    let numbers: Vec<i32> = failed.errors().map(|e| e.number).collect();
    assert!(
        numbers == vec![1105] || numbers == vec![9002],
        "{numbers:?}"
    );
    let g = rows(&ok(a
        .batch(
            "SELECT COUNT(*), SUM(LEN(pad)), SUM(CASE WHEN pad LIKE 'w%' THEN 1 ELSE 0 END) FROM g",
        )
        .unwrap()));
    assert_eq!(
        g[0],
        vec![Value::Int(12000), Value::Int(24_000_000), Value::Int(0)]
    );
    let check = a.batch("DBCC CHECKDB (f) WITH NO_INFOMSGS").unwrap();
    assert_eq!(check.errors().count(), 0);
    assert!(sort_files_left(&s).is_empty(), "{:?}", sort_files_left(&s));
}

/// Proves DISTINCT aggregates and TOP PERCENT with DISTINCT spill instead of holding their
/// values (issue 20 item 3): 160 MB of distinct values counted, grouped and ungrouped, on
/// one session while another takes TOP (50) PERCENT of 40,000 distinct 4 KB rows, each
/// result as the materializing code gave it, peak RSS within the cap.
#[test]
fn distinct_aggregates_and_top_percent_distinct_spill() {
    let s = capped_server("stream-distinct");
    let mut a = s.connect();
    load(&mut a);
    let base_kb = reset_peak(&s);
    let other = on_another_session(
        &s,
        "SELECT DISTINCT TOP (50) PERCENT id, pad FROM big ORDER BY id DESC; \
         SELECT DISTINCT TOP (10) PERCENT id % 10 AS m FROM big",
    );
    let n = rows(&ok(a
        .batch(
            "SELECT COUNT(DISTINCT CONCAT(id, pad)), COUNT(DISTINCT pad), \
                COUNT(DISTINCT id % 7), SUM(DISTINCT id % 7), MAX(DISTINCT id) FROM big",
        )
        .unwrap()));
    assert_eq!(
        n[0],
        vec![
            Value::Int(ROWS as i32),
            Value::Int(1),
            Value::Int(7),
            Value::Int(21),
            Value::Int((ROWS - 1) as i32)
        ]
    );
    let groups = rows(&ok(a
        .batch(
            "SELECT id % 3 AS k, COUNT(DISTINCT CONCAT(id / 2, pad)), SUM(DISTINCT id), \
             MIN(DISTINCT id) FROM big GROUP BY id % 3 ORDER BY k",
        )
        .unwrap()));
    let want: Vec<Vec<Value>> = (0..3)
        .map(|k| {
            let halves: std::collections::BTreeSet<i64> =
                (0..ROWS).filter(|i| i % 3 == k).map(|i| i / 2).collect();
            let ids = (0..ROWS).filter(|i| i % 3 == k);
            vec![
                Value::Int(k as i32),
                Value::Int(halves.len() as i32),
                Value::Int(ids.sum::<i64>() as i32),
                Value::Int(k as i32),
            ]
        })
        .collect();
    assert_eq!(groups, want);
    let top = other.join().unwrap();
    assert_eq!(top.len() as i64, ROWS / 2 + 1);
    let ids: Vec<i64> = top[..(ROWS / 2) as usize]
        .iter()
        .map(|r| int(&r[0]))
        .collect();
    assert_eq!(ids, (ROWS / 2..ROWS).rev().collect::<Vec<_>>());
    assert_eq!(top[(ROWS / 2) as usize], vec![Value::Int(0)]);
    assert_bounded(&s, base_kb, 0, "DISTINCT");
    assert!(sort_files_left(&s).is_empty(), "{:?}", sort_files_left(&s));
}

/// Proves a heap's NONCLUSTERED PRIMARY KEY is checked without holding the table's keys
/// (issue 20 item 3): INSERT ... SELECT of 80 MB into a keyed heap beside another session's
/// inserts into another, Msg 2627 naming the first duplicate in statement order (against
/// stored rows, among the new rows with the default collation, and on UPDATE of the key)
/// with nothing of the failed statement left, peak RSS within the cap.
#[test]
fn a_heap_primary_key_is_checked_in_bounded_memory() {
    let s = capped_server("stream-heapkey");
    let mut a = s.connect();
    load(&mut a);
    ok(a.batch(
        "CREATE TABLE kh (code CHAR(200) NOT NULL PRIMARY KEY NONCLUSTERED, id INT NOT NULL, \
         pad CHAR(3000) NOT NULL); \
         CREATE TABLE kh2 (k INT NOT NULL PRIMARY KEY NONCLUSTERED, v INT NOT NULL)",
    )
    .unwrap());
    let base_kb = reset_peak(&s);
    let other = on_another_session(
        &s,
        "SET NOCOUNT ON; DECLARE @i INT = 0; \
         WHILE @i < 300 BEGIN INSERT INTO kh2 VALUES (@i, @i); SET @i += 1; END; \
         SELECT COUNT(*) FROM kh2",
    );
    let n = rows(&ok(a
        .batch(
            "INSERT INTO kh SELECT CONCAT('k', id), id, pad FROM big WHERE id < 20000; \
                SELECT @@ROWCOUNT",
        )
        .unwrap()));
    assert_eq!(n[0][0], Value::Int(20000));
    assert_eq!(other.join().unwrap(), vec![vec![Value::Int(300)]]);
    let dup = |r: extentdb_tds::client::Response| -> String {
        let e = r.errors().next().expect("Msg 2627");
        assert_eq!((e.number, e.severity, e.state), (2627, 14, 1));
        e.text.clone()
    };
    // The first new row (in the source's order) whose key is stored: k19990.
    let text = dup(a
        .batch("INSERT INTO kh SELECT CONCAT('k', id), id, pad FROM big WHERE id >= 19990")
        .unwrap());
    assert!(
        text.starts_with("Violation of PRIMARY KEY constraint 'PK__kh__"),
        "{text}"
    );
    assert!(
        text.contains("in object 'dbo.kh'. The duplicate key value is (k19990"),
        "{text}"
    );
    let text = dup(a
        .batch("INSERT INTO kh2 VALUES (1000, 0), (1001, 0), (1000, 1)")
        .unwrap());
    assert!(
        text.ends_with("The duplicate key value is (1000)."),
        "{text}"
    );
    let text = dup(a
        .batch("INSERT INTO kh VALUES ('z1', 1, 'a'), ('z2', 2, 'b'), ('Z1 ', 3, 'c')")
        .unwrap());
    assert!(text.contains("The duplicate key value is (Z1"), "{text}");
    // New keys k1..k100 from ids 0..99: k100 is left on the unchanged row id 100.
    let text = dup(a
        .batch("UPDATE kh SET code = CONCAT('k', id + 1) WHERE id < 100")
        .unwrap());
    assert!(text.contains("The duplicate key value is (k100"), "{text}");
    let n = rows(&ok(a
        .batch("SELECT COUNT(*), SUM(CAST(id AS BIGINT)) FROM kh WHERE code LIKE 'k%'")
        .unwrap()));
    assert_eq!(
        n[0],
        vec![Value::Int(20000), Value::BigInt(20000 * 19999 / 2)]
    );
    let n = rows(&ok(a
        .batch(
            "INSERT INTO kh SELECT CONCAT('k', id), id, pad FROM big WHERE id >= 20000; \
             SELECT @@ROWCOUNT",
        )
        .unwrap()));
    assert_eq!(n[0][0], Value::Int((ROWS - 20000) as i32));
    assert_bounded(&s, base_kb, 0, "keyed heap INSERT");
    let n = rows(&ok(a
        .batch("UPDATE kh SET code = CONCAT('m', id); SELECT COUNT(*) FROM kh WHERE code LIKE 'm%'")
        .unwrap()));
    assert_eq!(n[0][0], Value::Int(ROWS as i32));
    assert_bounded(&s, base_kb, undo_kb(ROWS, 3200), "keyed heap UPDATE");
    assert!(sort_files_left(&s).is_empty(), "{:?}", sort_files_left(&s));
}
