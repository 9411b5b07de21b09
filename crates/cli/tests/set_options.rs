//! SET options through real TDS sessions: each is built, fixed or refused (sql
//! exec/set_options.rs), never accepted and ignored; what one session sets is its own.

mod common;
use common::tds::{all_rows, errors, int, numbers, run, Server};
use extentdb_sql::exec::Output;
use extentdb_sql::types::Value;
use extentdb_tds::client::Client;

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

/// The first column of every row of a batch's result sets, as integers.
fn ints(c: &mut Client, sql: &str) -> Vec<i64> {
    all_rows(&run(c, sql)).iter().map(|r| int(&r[0])).collect()
}

/// The "(n rows affected)" counts of a batch, in order.
fn affected(c: &mut Client, sql: &str) -> Vec<u64> {
    run(c, sql)
        .outputs
        .iter()
        .filter_map(|o| match o {
            Output::RowsAffected(n) => Some(*n),
            _ => None,
        })
        .collect()
}

/// Table `t` with keys 1..=n and v = 100 - k (so ORDER BY v runs opposite to the key).
fn table_of(c: &mut Client, n: i64) {
    let values: Vec<String> = (1..=n).map(|k| format!("({k}, {})", 100 - k)).collect();
    run(
        c,
        &format!(
            "CREATE TABLE t (k int PRIMARY KEY, v int); INSERT INTO t VALUES {}",
            values.join(", ")
        ),
    );
}

/// Sends `sql` as a batch whose packet carries RESETCONNECTION (a pooled connection
/// handed to a new user: sp_reset_connection), and reads its response.
fn batch_after_reset(c: &mut Client, sql: &str) -> extentdb_tds::client::Response {
    let mut payload = extentdb_tds::request::all_headers_with(0);
    payload.extend(sql.encode_utf16().flat_map(u16::to_le_bytes));
    let len = (payload.len() + 8) as u16;
    let mut packet = vec![0x01, 0x01 | 0x08];
    packet.extend_from_slice(&len.to_be_bytes());
    packet.extend_from_slice(&[0, 0, 1, 0]);
    packet.extend(payload);
    c.send_raw(&packet).unwrap();
    common::tds::ok(c.read_response().unwrap())
}

#[test]
fn rowcount_caps_what_a_select_returns_after_order_by_and_top_for_its_session_only() {
    // Session a sets ROWCOUNT 3 over a 10-row table; every SELECT shape returns at most 3
    // rows (the first in ORDER BY's order, the smaller of TOP and ROWCOUNT), an aggregate
    // still counts every row, and session b, SET ROWCOUNT 0 and a reset connection see all.
    let s = Server::start("set_rowcount_select", &[]);
    let mut a = s.connect();
    let mut b = s.connect();
    table_of(&mut a, 10);
    run(&mut a, "SET ROWCOUNT 3");
    assert_eq!(ints(&mut a, "SELECT k FROM t"), vec![1, 2, 3]);
    assert_eq!(affected(&mut a, "SELECT k FROM t WHERE k > 2"), vec![3]);
    assert_eq!(ints(&mut a, "SELECT k FROM t; SELECT @@ROWCOUNT")[3], 3);
    assert_eq!(ints(&mut a, "SELECT k FROM t ORDER BY v"), vec![10, 9, 8]);
    assert_eq!(
        ints(&mut a, "SELECT TOP 5 k FROM t ORDER BY k DESC"),
        vec![10, 9, 8]
    );
    assert_eq!(
        ints(&mut a, "SELECT TOP 2 k FROM t ORDER BY v"),
        vec![10, 9]
    );
    assert_eq!(ints(&mut a, "SELECT TOP 5 k FROM t"), vec![1, 2, 3]);
    assert_eq!(
        ints(&mut a, "SELECT DISTINCT v % 5 FROM t ORDER BY 1"),
        vec![0, 1, 2]
    );
    assert_eq!(ints(&mut a, "SELECT COUNT(*) FROM t"), vec![10]);
    assert_eq!(
        ints(&mut a, "SELECT k, COUNT(*) FROM t GROUP BY k"),
        vec![1, 2, 3]
    );
    assert_eq!(
        all_rows(&run(&mut a, "SELECT name FROM sys.databases")).len(),
        3
    );
    // An assignment SELECT stops after ROWCOUNT rows too: the last it sees is the third.
    assert_eq!(
        ints(&mut a, "DECLARE @x int; SELECT @x = k FROM t; SELECT @x"),
        vec![3]
    );
    // Session b never set it.
    assert_eq!(ints(&mut b, "SELECT k FROM t").len(), 10);
    // A variable sets it; 0 turns it off.
    assert_eq!(
        ints(
            &mut a,
            "DECLARE @n int = 4; SET ROWCOUNT @n; SELECT k FROM t"
        )
        .len(),
        4
    );
    run(&mut a, "SET ROWCOUNT 0");
    assert_eq!(ints(&mut a, "SELECT k FROM t ORDER BY v").len(), 10);
    // sp_reset_connection gives the next user ROWCOUNT 0.
    run(&mut a, "SET ROWCOUNT 2");
    assert_eq!(ints(&mut a, "SELECT k FROM t").len(), 2);
    assert_eq!(
        all_rows(&batch_after_reset(&mut a, "SELECT k FROM t")).len(),
        10
    );
}

#[test]
fn rowcount_caps_insert_update_and_delete_and_sets_at_at_rowcount() {
    // Under ROWCOUNT 2 each data modification without TOP changes two rows and says so
    // (@@ROWCOUNT, rows affected); one with TOP ignores ROWCOUNT, as SQL Server does;
    // session b's statements change every row meanwhile.
    let s = Server::start("set_rowcount_dml", &[]);
    let mut a = s.connect();
    let mut b = s.connect();
    table_of(&mut a, 10);
    run(&mut a, "CREATE TABLE u (k int)");
    run(&mut a, "SET ROWCOUNT 2");
    let counts = "SELECT @@ROWCOUNT";
    let step = |c: &mut Client, sql: &str| ints(c, &format!("{sql}; {counts}"))[0];
    assert_eq!(step(&mut a, "INSERT INTO u VALUES (1), (2), (3)"), 2);
    assert_eq!(
        affected(&mut a, "INSERT INTO u SELECT k FROM t WHERE k > 5"),
        vec![2]
    );
    assert_eq!(step(&mut a, "INSERT INTO u SELECT k FROM t ORDER BY v"), 2);
    assert_eq!(step(&mut a, "INSERT TOP (3) INTO u SELECT k FROM t"), 3);
    assert_eq!(
        ints(&mut b, "SELECT k FROM u ORDER BY k"),
        vec![1, 1, 2, 2, 3, 6, 7, 9, 10]
    );
    assert_eq!(step(&mut a, "UPDATE t SET v = 0 WHERE k > 4"), 2);
    assert_eq!(ints(&mut b, "SELECT k FROM t WHERE v = 0"), vec![5, 6]);
    assert_eq!(step(&mut a, "DELETE FROM t WHERE v <> 0"), 2);
    assert_eq!(ints(&mut b, "SELECT COUNT(*) FROM t"), vec![8]);
    assert_eq!(step(&mut a, "DELETE TOP (3) FROM t WHERE v <> 0"), 3);
    // b is unaffected: its UPDATE changes every row.
    assert_eq!(affected(&mut b, "UPDATE t SET v = 1"), vec![5]);
    // The search stops at the cap: rows past it are neither changed nor locked, so b
    // writes one at once while a's transaction is still open.
    run(&mut a, "SET ROWCOUNT 1; BEGIN TRAN; UPDATE t SET v = 2");
    assert_eq!(
        affected(
            &mut b,
            "SET LOCK_TIMEOUT 2000; UPDATE t SET v = 3 WHERE k = 10"
        ),
        vec![1]
    );
    run(&mut a, "COMMIT");
    assert_eq!(
        ints(&mut b, "SELECT v FROM t ORDER BY k"),
        vec![2, 1, 1, 1, 3]
    );
    run(&mut a, "SET ROWCOUNT 0");
    assert_eq!(affected(&mut a, "DELETE FROM u"), vec![9]);
}

#[test]
fn the_batched_delete_idiom_removes_every_row_in_steps() {
    // SET ROWCOUNT 10 with DELETE in a WHILE loop until @@ROWCOUNT = 0: 25 rows go in
    // three steps of at most 10, while another session still sees the rest between runs.
    let s = Server::start("set_rowcount_loop", &[]);
    let mut a = s.connect();
    let mut b = s.connect();
    table_of(&mut a, 25);
    let r = run(
        &mut a,
        "SET ROWCOUNT 10; DECLARE @steps int = 0; \
         WHILE 1 = 1 BEGIN DELETE FROM t WHERE k > 0; IF @@ROWCOUNT = 0 BREAK; \
         SET @steps = @steps + 1; END; SET ROWCOUNT 0; SELECT @steps",
    );
    assert_eq!(all_rows(&r), vec![vec![Value::Int(3)]]);
    let steps: Vec<u64> = r
        .outputs
        .iter()
        .filter_map(|o| match o {
            Output::RowsAffected(n) => Some(*n),
            _ => None,
        })
        .collect();
    assert_eq!(steps, vec![10, 10, 5, 0, 1]);
    assert_eq!(ints(&mut b, "SELECT COUNT(*) FROM t"), vec![0]);
}

#[test]
fn a_negative_or_null_rowcount_is_refused_and_changes_nothing() {
    // SQL Server's grammar has no sign after SET ROWCOUNT (Msg 102 near '-'); a variable
    // that is negative, NULL or not an integer is Msg 507 state 2; the setting stays 3.
    let s = Server::start("set_rowcount_bad", &[]);
    let mut a = s.connect();
    table_of(&mut a, 5);
    run(&mut a, "SET ROWCOUNT 3");
    assert_eq!(errors(&mut a, "SET ROWCOUNT -1"), vec![(102, 15, 1)]);
    // One number or variable, no expression: the batch does not run.
    assert_eq!(errors(&mut a, "SET ROWCOUNT 5 + 1"), vec![(102, 15, 1)]);
    for bad in [
        "DECLARE @n int = -5; SET ROWCOUNT @n",
        "DECLARE @n int = NULL; SET ROWCOUNT @n",
        "DECLARE @n varchar(5) = '4'; SET ROWCOUNT @n",
        "DECLARE @n bigint = 3000000000; SET ROWCOUNT @n",
    ] {
        assert_eq!(errors(&mut a, bad), vec![(507, 16, 2)], "{bad}");
    }
    assert_eq!(ints(&mut a, "SELECT k FROM t").len(), 3);
}

/// Proves SET IDENTITY_INSERT is on for one table per session (Msg 8107, severity 16,
/// state 1, naming the table it is on for by database, schema and name, and the table
/// asked for), another session's setting is its own, and OFF frees it.
#[test]
fn identity_insert_is_on_for_one_table_per_session() {
    let s = Server::start("set_identity_insert", &[]);
    let (mut a, mut b) = (s.connect(), s.connect());
    run(
        &mut a,
        "CREATE DATABASE idi; USE idi; \
         CREATE TABLE t1 (id INT IDENTITY, v INT); CREATE TABLE t2 (id INT IDENTITY, v INT); \
         SET IDENTITY_INSERT t1 ON",
    );
    let r = a.batch("SET IDENTITY_INSERT t2 ON").unwrap();
    let refused: Vec<_> = r
        .errors()
        .map(|e| (e.number, e.severity, e.state, e.text.clone()))
        .collect();
    assert_eq!(
        refused,
        [(
            8107,
            16,
            1,
            "IDENTITY_INSERT is already ON for table 'idi.dbo.t1'. Cannot perform SET \
             operation for table 't2'."
                .to_string()
        )]
    );
    run(&mut b, "USE idi; SET IDENTITY_INSERT t2 ON");
    run(&mut b, "INSERT INTO t2 (id, v) VALUES (40, 1)");
    run(
        &mut a,
        "SET IDENTITY_INSERT t1 OFF; SET IDENTITY_INSERT t2 ON; \
         INSERT INTO t2 (id, v) VALUES (41, 2)",
    );
    assert_eq!(
        int(&all_rows(&run(&mut a, "SELECT SUM(id) FROM t2"))[0][0]),
        81
    );
}

/// Each output of a response as a word, in order: "3612 L2" / "3613 L1" for SET
/// STATISTICS TIME's messages (whose text must be SQL Server's, with numbers), "rows" for
/// a result set, "count n" for a DONE's row count, the number of any other message.
fn trace(r: &extentdb_tds::client::Response) -> Vec<String> {
    r.outputs
        .iter()
        .filter_map(|o| match o {
            Output::Info(m) if m.number == 3612 || m.number == 3613 => {
                assert!(time_figures(m).is_some(), "{:?}", m.text);
                assert_eq!(m.severity, 0, "severity 10 goes out as 0");
                Some(format!("{} L{}", m.number, m.line))
            }
            Output::Info(m) | Output::Error(m) => Some(m.number.to_string()),
            Output::Rows { .. } => Some("rows".into()),
            Output::RowsAffected(n) => Some(format!("count {n}")),
            _ => None,
        })
        .collect()
}

/// (CPU ms, elapsed ms) of a Msg 3612 or 3613, None when its text is not SQL Server's.
fn time_figures(m: &extentdb_sql::messages::SqlError) -> Option<(u64, u64)> {
    let re = match m.number {
        3612 => {
            r"^\n SQL Server Execution Times:\n   CPU time = (\d+) ms,  elapsed time = (\d+) ms\.$"
        }
        3613 => {
            r"^SQL Server parse and compile time: \n   CPU time = (\d+) ms, elapsed time = (\d+) ms\.$"
        }
        _ => return None,
    };
    let c = regex::Regex::new(re).unwrap().captures(&m.text)?;
    Some((c[1].parse().unwrap(), c[2].parse().unwrap()))
}

#[test]
fn statistics_time_reports_the_batch_and_each_statement_for_its_own_session_only() {
    // Session a turns SET STATISTICS TIME on: a batch reports its parse time first (on
    // its last statement's line), then each statement that runs its execution times after
    // its rows and before its DONE (a DECLARE without a value and the SETs turning the
    // option on and off report none); a failed statement's come between its error and
    // 3621. Session b, OFF, a reset connection and an empty batch see none.
    let s = Server::start("set_statistics_time", &[]);
    let mut a = s.connect();
    let mut b = s.connect();
    table_of(&mut a, 10);
    let batch = "DECLARE @x int; DECLARE @y int = 1\nSELECT k FROM t WHERE k = @y\n\
                 UPDATE t SET v = v + 1 WHERE k = 2";
    run(&mut a, "SET STATISTICS TIME ON");
    assert_eq!(
        trace(&run(&mut b, batch)),
        ["rows", "count 1", "count 1"],
        "session b never set it"
    );
    assert_eq!(
        trace(&run(&mut a, batch)),
        ["3613 L3", "3612 L1", "rows", "3612 L2", "count 1", "3612 L3", "count 1"]
    );
    assert_eq!(
        trace(&a.batch("INSERT INTO t VALUES (1, 0)").unwrap()),
        ["3613 L1", "2627", "3612 L1", "3621"]
    );
    assert_eq!(
        trace(&run(
            &mut a,
            "IF EXISTS (SELECT * FROM t WHERE k = 3) PRINT 'yes'"
        )),
        ["3613 L1", "3612 L1", "0", "3612 L1"],
        "IF's condition reports as a statement of its own, then PRINT"
    );
    assert_eq!(
        trace(&run(
            &mut a,
            "SET STATISTICS TIME OFF; SELECT 1; SET STATISTICS TIME ON; SELECT 2"
        )),
        ["3613 L1", "rows", "count 1", "rows", "3612 L1", "count 1"]
    );
    run(&mut a, "SET STATISTICS IO ON");
    assert_eq!(
        trace(&run(&mut a, "SELECT k FROM t WHERE k = 1")),
        ["3613 L1", "rows", "3615", "3612 L1", "count 1"],
        "a statement's reads (3615) come before its times"
    );
    assert_eq!(
        trace(&run(
            &mut a,
            "DECLARE @i int = 0\nWHILE @i < 2\nSET @i += 1"
        )),
        ["3613 L2", "3612 L1", "3612 L2", "3612 L3", "3612 L2", "3612 L3", "3612 L2"],
        "WHILE's condition reports each time it is evaluated"
    );
    run(&mut a, "SET SHOWPLAN_TEXT ON");
    assert_eq!(
        trace(&batch_after_reset(&mut a, "SELECT k FROM t WHERE k = 1")),
        ["rows", "count 1"],
        "sp_reset_connection turns it off, and STATISTICS IO (3615) and SHOWPLAN_TEXT too"
    );
    assert_eq!(trace(&run(&mut a, "SELECT 1")), ["rows", "count 1"]);
}

#[test]
fn statistics_time_counts_the_cpu_of_each_sessions_own_sort() {
    // Two sessions at once sort 100,000 computed rows each (a cross join of VALUES, no
    // table): each statement's 3612 reports CPU time above 0 ms and never above its
    // elapsed time (1 ms of rounding allowed), its own thread's CPU, not the other's.
    let s = Server::start("set_statistics_time_cpu", &[]);
    let digits = "(VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9))";
    let from: Vec<String> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|n| format!("{digits} {n}(v)"))
        .collect();
    let sort = format!(
        "SELECT TOP 1 x FROM (SELECT a.v * 10000 + b.v * 1000 + c.v * 100 + d.v * 10 + e.v \
         AS x FROM {}) q ORDER BY (x * 7919) % 100003 DESC",
        from.join(" CROSS JOIN ")
    );
    let sessions: Vec<_> = (0..2)
        .map(|_| {
            let (mut c, sort) = (s.connect(), sort.clone());
            std::thread::spawn(move || {
                run(&mut c, "SET STATISTICS TIME ON");
                run(&mut c, &sort)
            })
        })
        .collect();
    for session in sessions {
        let r = session.join().unwrap();
        assert_eq!(trace(&r), ["3613 L1", "rows", "3612 L1", "count 1"]);
        let (cpu_ms, elapsed_ms) = r
            .outputs
            .iter()
            .find_map(|o| match o {
                Output::Info(m) if m.number == 3612 => time_figures(m),
                _ => None,
            })
            .unwrap();
        assert!(cpu_ms > 0, "a sort of 100,000 rows takes CPU");
        assert!(
            cpu_ms <= elapsed_ms + 1,
            "{cpu_ms} ms CPU in {elapsed_ms} ms"
        );
    }
}
