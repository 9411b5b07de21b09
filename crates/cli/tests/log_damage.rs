//! Issue 20, item 1, end to end: a real `extentdb serve` commits 50 small transactions and
//! is killed with SIGKILL; a byte of the durable log written since the checkpoint is
//! flipped; after the restart the database is SUSPECT (not ONLINE with committed rows
//! missing), USE gives Msg 926, and the error log has 9004 with the file and offset. With
//! no byte flipped, the same kill loses nothing.

use std::os::unix::fs::FileExt;
use std::path::Path;

use extentdb_sql::exec::Output;
use extentdb_sql::types::Value;
use extentdb_tds::client::{Client, Response};

mod common;
use common::tds::Server;

fn ok(r: Response) -> Response {
    if let Some(e) = r.errors().next() {
        panic!("Msg {}: {}", e.number, e.text);
    }
    r
}

fn scalar(c: &mut Client, sql: &str) -> Value {
    let r = ok(c.batch(sql).unwrap());
    let rows = r.outputs.iter().find_map(|o| match o {
        Output::Rows { rows, .. } => Some(rows.clone()),
        _ => None,
    });
    rows.expect("a result set")[0][0].clone()
}

/// Commits 50 transactions of 12 rows each after a CHECKPOINT, kills the server, and
/// returns the byte range of the log file written since the checkpoint.
fn commit_and_kill(dir: &Path) -> (u64, u64) {
    let mut s = Server::start_in(dir.to_path_buf(), &[]);
    let mut c = s.connect();
    ok(c.batch("CREATE DATABASE Flip; USE Flip; CREATE TABLE t (k int NOT NULL, pad varchar(40)); CHECKPOINT").unwrap());
    let ldf = dir.join("data/Flip_log.ldf");
    let before = std::fs::read(&ldf).unwrap();
    for x in 0..50 {
        let values: Vec<String> = (0..12)
            .map(|i| format!("({}, 'row')", x * 12 + i))
            .collect();
        let sql = format!(
            "BEGIN TRAN; INSERT INTO t VALUES {}; COMMIT",
            values.join(", ")
        );
        ok(c.batch(&sql).unwrap());
    }
    s.child.kill().unwrap(); // SIGKILL
    s.child.wait().unwrap();
    s.dir = "/nonexistent-xdb".into(); // keep the directory
    let after = std::fs::read(&ldf).unwrap();
    let changed = |i: &usize| before.get(*i) != after.get(*i);
    let first = (0..after.len()).find(changed).unwrap() as u64;
    let last = (0..after.len()).rfind(changed).unwrap() as u64;
    (first, last)
}

fn state(c: &mut Client) -> String {
    match scalar(
        c,
        "SELECT state_desc FROM sys.databases WHERE name = 'Flip'",
    ) {
        Value::Text(t) => t,
        v => panic!("state_desc {v:?}"),
    }
}

/// Proves a flipped byte a third of the way into the log written since the checkpoint
/// makes the database SUSPECT with 9004 naming the log file and offset, never ONLINE with
/// committed rows missing.
#[test]
fn a_flipped_byte_in_the_durable_log_is_suspect_not_a_shorter_log() {
    let dir = std::env::temp_dir().join(format!("xdb-logflip-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (first, last) = commit_and_kill(&dir);
    assert!(last - first > 20_000, "50 commits of log: {first}..{last}");
    let at = first + (last - first) / 3;
    let ldf = dir.join("data/Flip_log.ldf");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&ldf)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x04], at).unwrap();
    drop(f);
    let s = Server::start_in(dir.clone(), &[]);
    let mut c = s.connect();
    assert_eq!(state(&mut c), "SUSPECT");
    let r = c.batch("USE Flip").unwrap();
    assert!(r.errors().any(|e| e.number == 926), "Msg 926 on USE");
    let log = s.errorlog();
    assert!(
        log.contains("Error: 9004, Severity: 21, State: 1."),
        "{log}"
    );
    let sector = at / 512 * 512;
    let line = log
        .lines()
        .find(|l| l.contains("Database 'Flip' cannot be opened"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        line.contains("Flip_log.ldf") && line.contains(&format!("offset {sector} ")),
        "the error log names the file and offset {sector}: {line}"
    );
}

/// Proves the same kill with no byte flipped loses none of the 600 acknowledged rows.
#[test]
fn the_same_kill_without_a_flip_keeps_every_row() {
    let dir = std::env::temp_dir().join(format!("xdb-logkeep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    commit_and_kill(&dir);
    let s = Server::start_in(dir.clone(), &[]);
    let mut c = s.connect();
    assert_eq!(state(&mut c), "ONLINE");
    let n = scalar(&mut c, "USE Flip; SELECT COUNT(*) FROM t");
    assert_eq!(n, Value::Int(600));
}
