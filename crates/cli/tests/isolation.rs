//! Sessions side by side (issue 21): what one session's transaction does to another's.
//! Each test runs through real TDS connections to a real server.
//!
//! - Lost update through rollback: A updates a row in an open transaction; B's autocommit
//!   `UPDATE ... SET v = v + 7` of the same row waits for A; A rolls back; B's change is
//!   applied to the committed value and stays.
//! - Concurrent increments: sessions running `UPDATE ... SET v = v + 1` on one row at once
//!   lose none of them (each reads the row it changes under its lock), heap and clustered.

use std::thread;
use std::time::Duration;

use extentdb_sql::types::Value;

mod common;
use common::tds::{all_rows, connect_at, run, Server};

fn value(c: &mut extentdb_tds::client::Client, sql: &str) -> i64 {
    match &all_rows(&run(c, sql))[0][0] {
        Value::Int(v) => *v as i64,
        Value::BigInt(v) => *v,
        other => panic!("{other:?}"),
    }
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
