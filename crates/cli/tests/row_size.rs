//! Rows longer than a page through a real `extentdb serve` and real TDS sessions: with no
//! row-overflow or LOB storage yet, an INSERT or UPDATE whose row would pass 8,060 bytes
//! is refused as a statement's error (40517, severity 16) that names what is missing,
//! changes nothing, and leaves the connection and its transaction open. (It was Msg 5243
//! at severity 22 before, which ends the connection, as an internal inconsistency.)

mod common;
use common::tds::{errors, run, table, Server};

#[test]
fn a_row_past_a_page_is_refused_and_changes_nothing() {
    let s = Server::start("rowsize", &[]);
    let mut a = s.connect();
    run(
        &mut a,
        "CREATE DATABASE rs; USE rs;
         CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(MAX), b VARCHAR(MAX));
         INSERT INTO t VALUES (1, REPLICATE('a', 4000), 'short')",
    );
    let mut b = s.connect_to(Some("rs"));
    let refused = [(40517, 16, 1)];
    assert_eq!(
        errors(
            &mut a,
            "INSERT INTO t VALUES (2, REPLICATE('a', 4100), REPLICATE('b', 4100))"
        ),
        refused
    );
    run(&mut a, "BEGIN TRAN; INSERT INTO t VALUES (3, 'x', 'y')");
    assert_eq!(
        errors(&mut a, "UPDATE t SET b = REPLICATE('b', 4100) WHERE id = 1"),
        refused
    );
    // The connection and its transaction go on; the refused statements left no trace.
    assert_eq!(table(&mut a, "SELECT @@TRANCOUNT"), ["1"]);
    run(&mut a, "COMMIT");
    assert_eq!(
        table(&mut b, "SELECT id, LEN(a), b FROM t ORDER BY id"),
        ["1,4000,short", "3,1,y"]
    );
    let text = a
        .batch("INSERT INTO t VALUES (4, REPLICATE('a', 4100), REPLICATE('b', 4100))")
        .unwrap()
        .errors()
        .next()
        .unwrap()
        .text
        .clone();
    assert!(text.contains("row-overflow and LOB storage"), "{text}");
    common::tds::assert_checkdb_clean(&mut b, "rs", "after the refusals");
}
