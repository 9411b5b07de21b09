//! SET options through real TDS sessions: each is built, fixed or refused (sql
//! exec/set_options.rs), never accepted and ignored; what one session sets is its own.

mod common;
use common::tds::{all_rows, int, numbers, run, Server};
use extentdb_sql::types::Value;

#[test]
fn options_the_engine_does_not_behave_as_are_refused_and_change_nothing() {
    let s = Server::start("set_refused", &[]);
    let mut c = s.connect();
    // What drivers send on connect is accepted.
    run(
        &mut c,
        "SET ANSI_NULLS ON; SET QUOTED_IDENTIFIER ON; SET ANSI_WARNINGS ON; SET ANSI_PADDING ON; \
         SET CONCAT_NULL_YIELDS_NULL ON; SET ARITHABORT ON; SET ARITHABORT OFF; \
         SET ANSI_NULL_DFLT_ON ON; SET TEXTSIZE 2147483647; SET DATEFORMAT mdy; \
         SET LANGUAGE us_english; SET DATEFIRST 7; SET ROWCOUNT 0; SET XACT_ABORT OFF",
    );
    for (sql, number) in [
        ("SET ANSI_NULLS OFF", 40517),
        ("SET QUOTED_IDENTIFIER OFF", 40517),
        ("SET ROWCOUNT 5", 40517),
        ("SET DATEFORMAT dmy", 40517),
        ("SET LANGUAGE Deutsch", 40517),
        ("SET SHOWPLAN_XML ON", 40517),
        ("SET FMTONLY ON", 40517),
        ("SET CONTEXT_INFO 0x01", 40517),
        ("SET NO_SUCH_OPTION ON", 195),
    ] {
        assert_eq!(numbers(&mut c, sql), vec![number], "{sql}");
    }
    // A SET of several options changes none of them when one is refused.
    assert_eq!(numbers(&mut c, "SET NOCOUNT, ANSI_NULLS OFF"), vec![40517]);
    run(&mut c, "SET NOCOUNT ON");
    assert_eq!(numbers(&mut c, "SET NOCOUNT, ANSI_NULLS OFF"), vec![40517]);
    let r = run(&mut c, "CREATE TABLE t (k int); INSERT INTO t VALUES (1)");
    assert!(
        !r.outputs
            .iter()
            .any(|o| matches!(o, extentdb_sql::exec::Output::RowsAffected(_))),
        "NOCOUNT stayed ON: {r:?}"
    );
}

#[test]
fn textsize_cuts_long_values_for_its_own_session_only() {
    let s = Server::start("set_textsize", &[]);
    let mut a = s.connect();
    let mut b = s.connect();
    run(
        &mut a,
        "CREATE TABLE lv (k int PRIMARY KEY, a varchar(max), n nvarchar(max), v varbinary(max), \
         s varchar(20)); \
         INSERT INTO lv VALUES (1, 'abcdefghij', N'abcdefghij', 0x0102030405060708, 'abcdefghij')",
    );
    run(&mut a, "SET TEXTSIZE 4");
    let q = "SELECT a, n, v, s, @@TEXTSIZE FROM lv";
    assert_eq!(
        all_rows(&run(&mut a, q)),
        vec![vec![
            Value::Text("abcd".into()),
            Value::Text("ab".into()),
            Value::Binary(vec![1, 2, 3, 4]),
            Value::Text("abcdefghij".into()),
            Value::Int(4),
        ]]
    );
    // Session b never set it: whole values.
    let whole = all_rows(&run(&mut b, q));
    assert_eq!(whole[0][0], Value::Text("abcdefghij".into()));
    assert_eq!(int(&whole[0][4]), 2_147_483_647);
    // SET TEXTSIZE 0 gives the default back.
    run(&mut a, "SET TEXTSIZE 0");
    assert_eq!(
        all_rows(&run(&mut a, q))[0][0],
        Value::Text("abcdefghij".into())
    );
}

#[test]
fn xact_abort_rolls_back_the_transaction_and_ends_the_batch() {
    let s = Server::start("set_xact_abort", &[]);
    let mut a = s.connect();
    let mut b = s.connect();
    run(
        &mut a,
        "CREATE TABLE t (k int PRIMARY KEY); INSERT INTO t VALUES (1)",
    );
    // Without XACT_ABORT the failed statement alone is undone and the batch goes on.
    let r = a
        .batch("BEGIN TRAN; INSERT INTO t VALUES (2); INSERT INTO t VALUES (1); SELECT @@TRANCOUNT")
        .unwrap();
    assert_eq!(r.errors().map(|e| e.number).collect::<Vec<_>>(), vec![2627]);
    assert_eq!(all_rows(&r), vec![vec![Value::Int(1)]]);
    run(&mut a, "ROLLBACK");
    // With it, the whole transaction rolls back and nothing after the error runs.
    run(&mut a, "SET XACT_ABORT ON");
    let r = a
        .batch(
            "BEGIN TRAN; INSERT INTO t VALUES (3); INSERT INTO t VALUES (1); SELECT 'not reached'",
        )
        .unwrap();
    assert_eq!(r.errors().map(|e| e.number).collect::<Vec<_>>(), vec![2627]);
    assert!(all_rows(&r).is_empty(), "{r:?}");
    let after = all_rows(&run(&mut a, "SELECT @@TRANCOUNT, COUNT(*) FROM t"));
    assert_eq!((int(&after[0][0]), int(&after[0][1])), (0, 1));
    // The rolled-back row holds no lock: another session writes the same key at once.
    run(&mut b, "SET LOCK_TIMEOUT 2000; INSERT INTO t VALUES (3)");
    // The option is the session's: b's failed statement leaves b's transaction open.
    let r = b
        .batch("BEGIN TRAN; INSERT INTO t VALUES (4); INSERT INTO t VALUES (1); SELECT @@TRANCOUNT")
        .unwrap();
    assert_eq!(all_rows(&r), vec![vec![Value::Int(1)]]);
    run(&mut b, "COMMIT");
    let n = all_rows(&run(&mut a, "SELECT COUNT(*) FROM t"));
    assert_eq!(int(&n[0][0]), 3);
}
