//! A transaction whose undo actions pass `UNDO_MEMORY_BYTES` (4 MiB; storage/src/xact.rs
//! invariant 2) through real TDS connections: an UPDATE of every row of a 6 MB heap and a
//! 6 MB clustered table in an explicit transaction, a second UPDATE of the heap cut short
//! by a full log (Msg 9002: the statement rolled back to its savepoint, the changes it
//! undoes read back from the log), then ROLLBACK; meanwhile another session inserts in
//! autocommit (refused with 9002 while the log is full). Every row equals what it was before (compared one by one), the other
//! session's rows all stay, DBCC CHECKDB is clean, and so after a restart.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use extentdb_sql::types::Value;

mod common;
use common::tds::{all_rows, connect_at, errors, ok, restart, run, Server};

const ROWS: u32 = 3000;

/// Every row of `table` in key order.
fn every_row(c: &mut extentdb_tds::client::Client, table: &str) -> Vec<Vec<Value>> {
    all_rows(&ok(run(
        c,
        &format!("SELECT id, v, pad FROM {table} ORDER BY id"),
    )))
}

fn load(c: &mut extentdb_tds::client::Client) {
    ok(run(
        c,
        "CREATE DATABASE undo ON PRIMARY (NAME = undo_d, FILENAME = 'undo.mdf', SIZE = 64MB, \
         FILEGROWTH = 16MB) LOG ON (NAME = undo_l, FILENAME = 'undo_log.ldf', SIZE = 22MB, \
         FILEGROWTH = 16MB); ALTER DATABASE undo SET RECOVERY SIMPLE",
    ));
    ok(run(
        c,
        "USE undo; CREATE TABLE h (id INT NOT NULL, v INT NOT NULL, pad CHAR(2000) NOT NULL); \
         CREATE TABLE c (id INT NOT NULL PRIMARY KEY, v INT NOT NULL, pad CHAR(2000) NOT NULL); \
         CREATE TABLE other (n INT NOT NULL)",
    ));
    for table in ["h", "c"] {
        for chunk in 0..ROWS / 500 {
            let values: Vec<String> = (chunk * 500..(chunk + 1) * 500)
                .map(|i| format!("({i}, {}, 'row {i}')", i * 7))
                .collect();
            ok(run(
                c,
                &format!("INSERT INTO {table} VALUES {}", values.join(", ")),
            ));
        }
    }
    // From here the log stays at its size: what it has free after a checkpoint.
    ok(run(
        c,
        "CHECKPOINT; ALTER DATABASE undo MODIFY FILE (NAME = undo_l, FILEGROWTH = 0)",
    ));
}

/// Proves a transaction far past the undo memory bound rolls back, to a statement's
/// savepoint and whole, to exactly the rows it started from beside another session's
/// inserts.
#[test]
fn large_transaction_rolls_back_beside_other_sessions() {
    let s = Server::start("undo-spill", &[]);
    let mut a = s.connect();
    load(&mut a);
    let before: Vec<_> = ["h", "c"].iter().map(|t| every_row(&mut a, t)).collect();
    assert_eq!(before[0].len(), ROWS as usize);

    // Another session inserts one row at a time until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, stop2) = (s.addr.clone(), stop.clone());
    let inserter = thread::spawn(move || {
        let mut b = connect_at(&addr, Some("undo"), 60).unwrap();
        let mut n = 0u32;
        while !stop2.load(Ordering::Relaxed) || n < 20 {
            // A full log refuses the insert (9002) and changes nothing: not counted.
            let r = b.batch(&format!("INSERT INTO other VALUES ({n})")).unwrap();
            let refused: Vec<i32> = r.errors().map(|e| e.number).collect();
            match refused.as_slice() {
                [] => n += 1,
                [9002, ..] => {}
                other => panic!("the insert gave {other:?}"),
            }
        }
        n
    });

    ok(run(
        &mut a,
        "BEGIN TRAN; UPDATE h SET v = v + 1, pad = 'changed'; \
         UPDATE c SET v = v - 1, pad = 'changed too'",
    ));
    let changed: Vec<_> = ["h", "c"].iter().map(|t| every_row(&mut a, t)).collect();
    assert_ne!(changed, before);
    // The log (22 MB, no growth) cannot hold this one beside the space kept for undoing
    // the first two: Msg 9002 part-way, the statement rolled back, the transaction open.
    let e = errors(&mut a, "UPDATE h SET v = v + 100, pad = 'third'");
    assert!(e.iter().any(|m| m.0 == 9002), "{e:?}");
    assert_eq!(
        all_rows(&ok(run(&mut a, "SELECT @@TRANCOUNT")))[0][0],
        Value::Int(1)
    );
    let after_statement: Vec<_> = ["h", "c"].iter().map(|t| every_row(&mut a, t)).collect();
    assert!(
        after_statement == changed,
        "the failed statement's rollback left other rows than before it"
    );
    ok(run(&mut a, "ROLLBACK"));
    stop.store(true, Ordering::Relaxed);
    let inserted = inserter.join().unwrap();
    let after: Vec<_> = ["h", "c"].iter().map(|t| every_row(&mut a, t)).collect();
    assert!(after == before, "ROLLBACK left other rows than before it");
    let count = |c: &mut extentdb_tds::client::Client| {
        all_rows(&ok(run(c, "SELECT COUNT(*) FROM other")))[0][0].clone()
    };
    assert_eq!(count(&mut a), Value::Int(inserted as i32));
    assert!(errors(&mut a, "DBCC CHECKDB (undo) WITH NO_INFOMSGS").is_empty());

    drop(a);
    let s = restart(s);
    let mut a = s.connect_to(Some("undo"));
    let reopened: Vec<_> = ["h", "c"].iter().map(|t| every_row(&mut a, t)).collect();
    assert!(reopened == before, "after a restart the rows differ");
    assert_eq!(count(&mut a), Value::Int(inserted as i32));
    assert!(errors(&mut a, "DBCC CHECKDB (undo) WITH NO_INFOMSGS").is_empty());
}
