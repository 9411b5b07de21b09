//! Plans chosen from statistics (sql exec/cardinality.rs, seek.rs invariant 5, join.rs
//! `hash_preferred`), through real TDS sessions: on a skewed column the rare value seeks its
//! nonclustered index and the common one scans (SHOWPLAN_TEXT names the operator,
//! SHOWPLAN_ALL its EstimateRows, STATISTICS IO's logical reads follow), a variable or
//! sp_executesql parameter is estimated from the density vector, UPDATE STATISTICS after a change of distribution
//! changes the plan, a join seeks its inner table for a selective outer side and hashes it
//! for a large one; every answer equals one the index cannot serve, and four sessions
//! reading while a fifth moves rows and rebuilds statistics get exact answers.

mod common;
use common::tds::{all_rows, int, ok, run, scans_and_reads, show, Server};
use extentdb_sql::exec::Output;
use extentdb_sql::types::{SqlType, Value};
use extentdb_tds::client::{Client, Response};

/// Table s: 20,000 rows, v = 0 on 18,000 of them (id % 10 <> 0), v = id + 1 on the rest
/// (2,000 values of one row each), an index on v built after the rows (its statistics
/// with it); table o: 20,000 rows whose sid names each s row once, tag = oid % 2000, an
/// index on tag. Both in database `pc`.
fn tables(c: &mut Client) {
    let digits = "(VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9))";
    let ids = format!(
        "SELECT e.v * 10000 + a.v * 1000 + b.v * 100 + c.v * 10 + d.v AS id \
         FROM (VALUES (0),(1)) e(v) CROSS JOIN {digits} a(v) CROSS JOIN {digits} b(v) \
         CROSS JOIN {digits} c(v) CROSS JOIN {digits} d(v)"
    );
    run(c, "CREATE DATABASE pc");
    run(
        c,
        &format!(
            "USE pc; SET NOCOUNT ON; \
             CREATE TABLE s (id int PRIMARY KEY, v int NOT NULL, pad char(100) NOT NULL); \
             INSERT INTO s SELECT id, CASE WHEN id % 10 = 0 THEN id + 1 ELSE 0 END, 'p' \
                FROM ({ids}) x; \
             CREATE INDEX ix_v ON s (v); \
             CREATE TABLE o (oid int PRIMARY KEY, sid int NOT NULL, tag int NOT NULL); \
             INSERT INTO o SELECT id, 19999 - id, id % 2000 FROM ({ids}) x; \
             CREATE INDEX ix_tag ON o (tag)"
        ),
    );
}

fn session(s: &Server) -> Client {
    let mut c = s.connect();
    run(&mut c, "USE pc");
    c
}

/// The plan lines of `sql` under SHOWPLAN_TEXT, joined.
fn plan_text(c: &mut Client, sql: &str) -> String {
    run(c, "SET SHOWPLAN_TEXT ON");
    let r = run(c, sql);
    run(c, "SET SHOWPLAN_TEXT OFF");
    let sets: Vec<Vec<String>> = r
        .outputs
        .iter()
        .filter_map(|o| match o {
            Output::Rows { rows, .. } => Some(rows.iter().map(|r| show(&r[0])).collect()),
            _ => None,
        })
        .collect();
    assert_eq!(sets.len(), 2, "{sql}: {sets:?}");
    sets[1].join("\n")
}

/// (PhysicalOp, EstimateRows) of each operator row of `sql` under SHOWPLAN_ALL.
fn estimates(c: &mut Client, sql: &str) -> Vec<(String, String)> {
    run(c, "SET SHOWPLAN_ALL ON");
    let r = run(c, sql);
    run(c, "SET SHOWPLAN_ALL OFF");
    let Some(Output::Rows { columns, rows }) =
        r.outputs.iter().find(|o| matches!(o, Output::Rows { .. }))
    else {
        panic!("{sql}: no rows")
    };
    let at = |name: &str| columns.iter().position(|c| c.0 == name).unwrap();
    let (op, est) = (at("PhysicalOp"), at("EstimateRows"));
    rows.iter()
        .skip(1)
        .map(|r| (show(&r[op]), show(&r[est])))
        .collect()
}

/// A STATISTICS IO line: table name, scan count, logical reads.
type Io = (String, u64, u64);

/// The sorted rows of `sql` and its STATISTICS IO lines.
fn rows_and_io(c: &mut Client, sql: &str) -> (Vec<Vec<String>>, Vec<Io>) {
    run(c, "SET STATISTICS IO ON");
    let r = run(c, sql);
    run(c, "SET STATISTICS IO OFF");
    parsed(&r)
}

/// The sorted rows of a response and its STATISTICS IO lines.
fn parsed(r: &Response) -> (Vec<Vec<String>>, Vec<Io>) {
    let re = regex::Regex::new(r"^Table '([^']+)'").unwrap();
    let names: Vec<String> = r
        .outputs
        .iter()
        .filter_map(|o| match o {
            Output::Info(m) if m.number == 3615 => Some(re.captures(&m.text).unwrap()[1].into()),
            _ => None,
        })
        .collect();
    let io = names
        .into_iter()
        .zip(scans_and_reads(r))
        .map(|(n, (s, l))| (n, s, l))
        .collect();
    let mut rows: Vec<Vec<String>> = all_rows(r)
        .iter()
        .map(|r| r.iter().map(show).collect())
        .collect();
    rows.sort();
    (rows, io)
}

fn reads_of(io: &[Io], table: &str) -> (u64, u64) {
    let t = io
        .iter()
        .find(|x| x.0 == table)
        .unwrap_or_else(|| panic!("{table}: {io:?}"));
    (t.1, t.2)
}

/// The rare value seeks ix_v (estimated 1 row, a handful of reads), the common one scans
/// (estimated 18,000 rows, the reads of a scan, far fewer than 18,000 lookups), each with
/// the rows of a scan the index cannot serve (`v + 0 = x`); a variable or an sp_executesql
/// parameter holding the common value is estimated from the density vector, so it seeks,
/// and still gives the same rows.
#[test]
fn skewed_values_seek_or_scan() {
    let s = Server::start("plan-skew", &[]);
    let mut c = s.connect();
    tables(&mut c);
    let rare = plan_text(&mut c, "SELECT id, v FROM s WHERE v = 51");
    assert!(
        rare.contains("Index Seek(OBJECT:([pc].[dbo].[s].[ix_v])"),
        "{rare}"
    );
    let common = plan_text(&mut c, "SELECT id, v FROM s WHERE v = 0");
    assert!(
        common.contains("Clustered Index Scan(") && !common.contains("ix_v"),
        "{common}"
    );
    let est = estimates(&mut c, "SELECT id, v FROM s WHERE v = 51");
    assert!(est.contains(&("Index Seek".into(), "1".into())), "{est:?}");
    let est = estimates(&mut c, "SELECT id, v FROM s WHERE v = 0");
    assert!(
        est.contains(&("Clustered Index Scan".into(), "18000".into())),
        "{est:?}"
    );

    let (scan_rows, scan_io) = rows_and_io(&mut c, "SELECT id, v FROM s WHERE v + 0 = 0");
    let (rows, io) = rows_and_io(&mut c, "SELECT id, v FROM s WHERE v = 0");
    assert_eq!((rows.len(), &rows), (18_000, &scan_rows));
    let scan_reads = reads_of(&scan_io, "s").1;
    assert_eq!(reads_of(&io, "s"), (1, scan_reads), "{io:?}");
    assert!(
        scan_reads < 18_000,
        "a scan reads pages, not rows: {scan_reads}"
    );
    let (forced, _) = rows_and_io(&mut c, "SELECT id, v FROM s WHERE v + 0 = 51");
    let (rows, io) = rows_and_io(&mut c, "SELECT id, v FROM s WHERE v = 51");
    assert_eq!((&rows, forced.len()), (&forced, 1));
    assert!(reads_of(&io, "s").1 < 10, "{io:?}");

    // An unknown value: rows x density (20,000 / 2,001 distinct, about 10) seeks, for a
    // batch's variable and for sp_executesql's parameter (RPC) alike.
    let variable = "DECLARE @v int = 0; SELECT id, v FROM s WHERE v = @v";
    run(&mut c, "SET STATISTICS IO ON");
    let by_rpc = c.execute_sql(
        "SELECT id, v FROM s WHERE v = @p",
        &[("@p", SqlType::Int, Value::Int(0))],
    );
    run(&mut c, "SET STATISTICS IO OFF");
    for (rows, io) in [rows_and_io(&mut c, variable), parsed(&ok(by_rpc.unwrap()))] {
        assert_eq!(rows, scan_rows);
        let reads = reads_of(&io, "s").1;
        assert!(reads > 2 * scan_reads, "{io:?} against {scan_reads}");
    }
}

/// After most rows move to a rare value, the old statistics still seek it and scan the
/// old common value; UPDATE STATISTICS turns both plans round. Every answer equals a
/// scan's.
#[test]
fn update_statistics_changes_the_plan() {
    let s = Server::start("plan-update", &[]);
    let mut c = s.connect();
    tables(&mut c);
    run(&mut c, "UPDATE s SET v = 51 WHERE v = 0");
    let check = |c: &mut Client, value: i32, op: &str| {
        let sql = format!("SELECT id, v FROM s WHERE v = {value}");
        let plan = plan_text(c, &sql);
        assert!(plan.contains(op), "{sql}: {plan}");
        let (rows, _) = rows_and_io(c, &sql);
        let (forced, _) = rows_and_io(c, &format!("SELECT id, v FROM s WHERE v + 0 = {value}"));
        assert_eq!(rows, forced, "{sql}");
    };
    check(&mut c, 51, "Index Seek(OBJECT:([pc].[dbo].[s].[ix_v])");
    check(&mut c, 0, "Clustered Index Scan(");
    run(&mut c, "UPDATE STATISTICS s");
    check(&mut c, 51, "Clustered Index Scan(");
    check(&mut c, 0, "Index Seek(OBJECT:([pc].[dbo].[s].[ix_v])");
}

/// A selective outer side (tag = 5: 10 rows of o) seeks s on its clustered key per row
/// (scan count 0, singleton seeks); a large one (every row of o) reads s once and hashes
/// it (scan count 1, a scan's reads). Both give the rows the other algorithm gives.
#[test]
fn joins_seek_for_few_outer_rows_and_hash_for_many() {
    let s = Server::start("plan-join", &[]);
    let mut c = s.connect();
    tables(&mut c);
    let (_, scan_io) = rows_and_io(&mut c, "SELECT COUNT(*) FROM s");
    let scan_reads = reads_of(&scan_io, "s").1;
    let join = "SELECT o.oid, s.id, s.v FROM o JOIN s ON s.id = o.sid";
    let (few, io) = rows_and_io(&mut c, &format!("{join} WHERE o.tag = 5"));
    assert_eq!(few.len(), 10);
    let (scans, reads) = reads_of(&io, "s");
    assert_eq!(scans, 0, "{io:?}");
    assert!(reads < scan_reads, "{io:?} against a scan's {scan_reads}");
    let (many, io) = rows_and_io(&mut c, &format!("{join} WHERE o.tag >= 0"));
    assert_eq!(many.len(), 20_000);
    assert_eq!(reads_of(&io, "s"), (1, scan_reads), "{io:?}");
    let from_many: Vec<Vec<String>> = many
        .iter()
        .filter(|r| r[0].parse::<i64>().unwrap() % 2000 == 5)
        .cloned()
        .collect();
    assert_eq!(few, from_many);
    for r in &many {
        let (oid, id): (i64, i64) = (r[0].parse().unwrap(), r[1].parse().unwrap());
        assert_eq!(id, 19_999 - oid, "{r:?}");
    }
}

/// Four sessions run the rare, common and join queries while a fifth moves the common
/// rows between v = 0 and v = 51 and rebuilds the statistics, so plans flip under them:
/// the rows that never move come back exact, moving rows only ever with the value asked
/// for, no id twice, and the joins whole.
#[test]
fn readers_beside_a_writer_of_rows_and_statistics() {
    let s = Server::start("plan-concurrent", &[]);
    let mut c = s.connect();
    tables(&mut c);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let mut w = session(&s);
        let stop = stop.clone();
        std::thread::spawn(move || {
            for round in 0..6 {
                let (from, to) = if round % 2 == 0 { (0, 51) } else { (51, 0) };
                run(
                    &mut w,
                    &format!("UPDATE s SET v = {to} WHERE v = {from} AND id % 10 <> 0"),
                );
                run(&mut w, "UPDATE STATISTICS s");
            }
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        })
    };
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let mut r = session(&s);
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut rounds = 0;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) || rounds < 2 {
                    read_round(&mut r);
                    rounds += 1;
                }
            })
        })
        .collect();
    writer.join().unwrap();
    for r in readers {
        r.join().unwrap();
    }
    let (rows, _) = rows_and_io(&mut c, "SELECT id, v FROM s WHERE v = 0");
    let (forced, _) = rows_and_io(&mut c, "SELECT id, v FROM s WHERE v + 0 = 0");
    assert_eq!((rows.len(), rows), (18_000, forced));
}

/// One reader's round of queries and the checks that hold whatever the writer does.
fn read_round(c: &mut Client) {
    let rows = all_rows(&run(c, "SELECT id, v FROM s WHERE v = 1001"));
    assert_eq!(rows.iter().map(|r| int(&r[0])).collect::<Vec<_>>(), [1000]);
    for value in [0, 51] {
        let rows = all_rows(&run(c, &format!("SELECT id, v FROM s WHERE v = {value}")));
        let mut ids: Vec<i64> = rows.iter().map(|r| int(&r[0])).collect();
        assert!(rows.iter().all(|r| int(&r[1]) == value), "{value}");
        assert!(ids.iter().all(|id| id % 10 != 0 || *id == 50), "{value}");
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), rows.len(), "no row twice");
    }
    let join = "SELECT o.oid, s.id FROM o JOIN s ON s.id = o.sid";
    let few = all_rows(&run(c, &format!("{join} WHERE o.tag = 7")));
    assert_eq!(few.len(), 10);
    let many = all_rows(&run(c, &format!("{join} WHERE o.tag >= 500")));
    assert_eq!(many.len(), 15_000);
    assert!(many.iter().all(|r| int(&r[1]) == 19_999 - int(&r[0])));
}
