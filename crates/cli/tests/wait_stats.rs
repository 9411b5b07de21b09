//! sys.dm_os_wait_stats counts storage's waits beside the lock waits (storage's
//! waits.rs): WRITELOG for commits waiting for their log flush, PAGEIOLATCH_SH for pages
//! read from their files, PAGELATCH_SH / _EX for page latches held by another session,
//! PAGEIOLATCH_EX for a page being read or written back.

mod common;
use common::tds::{all_rows, int, restart, run, Server};
use extentdb_tds::client::Client;

/// (waiting_tasks_count, wait_time_ms) of a wait type.
fn waits(c: &mut Client, wait_type: &str) -> (i64, i64) {
    let r = all_rows(&run(
        c,
        &format!(
            "SELECT waiting_tasks_count, wait_time_ms FROM sys.dm_os_wait_stats \
             WHERE wait_type = '{wait_type}'"
        ),
    ));
    assert_eq!(r.len(), 1, "{wait_type}: one row");
    (int(&r[0][0]), int(&r[0][1]))
}

#[test]
fn commits_and_page_reads_show_as_writelog_and_pageiolatch_waits() {
    let s = Server::start("wait_stats", &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "CREATE DATABASE w; USE w; CREATE TABLE t (k int PRIMARY KEY, pad char(2000))",
    );
    let before = waits(&mut c, "WRITELOG").0;
    for k in 0..20 {
        run(&mut c, &format!("USE w; INSERT INTO t VALUES ({k}, 'x')"));
    }
    let after = waits(&mut c, "WRITELOG").0;
    assert!(after > before, "WRITELOG {before} -> {after}");
    // The page latch waits have their rows (their counts depend on the threads' timing):
    // PAGELATCH_SH / _EX for a buffer frame's latch another session holds, PAGEIOLATCH_EX
    // for one whose page is being read or written back.
    for latch in ["PAGELATCH_EX", "PAGELATCH_SH", "PAGEIOLATCH_EX"] {
        waits(&mut c, latch);
    }
    // After a checkpoint and a restart no page of t is cached (recovery redoes nothing
    // there): reading the table reads its pages from the file.
    run(&mut c, "USE w; CHECKPOINT");
    drop(c);
    let s = restart(s);
    let mut c = s.connect();
    let before = waits(&mut c, "PAGEIOLATCH_SH").0;
    let n = all_rows(&run(&mut c, "SELECT COUNT(*) FROM w.dbo.t"));
    assert_eq!(int(&n[0][0]), 20);
    let after = waits(&mut c, "PAGEIOLATCH_SH").0;
    assert!(
        after >= before + 5,
        "PAGEIOLATCH_SH {before} -> {after}: 20 rows on 5+ pages"
    );
    // The lock waits are still there beside them.
    assert_eq!(waits(&mut c, "LCK_M_X").0, 0);
}

/// (Log Flushes/sec, Log Flush Waits/sec) of database `db` in sys.dm_os_performance_counters.
fn log_flushes(c: &mut Client, db: &str) -> (i64, i64) {
    let r = all_rows(&run(
        c,
        &format!(
            "SELECT counter_name, cntr_value FROM sys.dm_os_performance_counters \
             WHERE object_name LIKE 'SQLServer:Databases%' AND instance_name = '{db}' \
             AND counter_name LIKE 'Log Flush%' ORDER BY counter_name"
        ),
    ));
    let names: Vec<String> = r.iter().map(|row| format!("{:?}", row[0])).collect();
    assert_eq!(r.len(), 2, "{db}: two log flush counters, got {names:?}");
    // Ordered by name: "Log Flush Waits/sec" before "Log Flushes/sec".
    (int(&r[1][1]), int(&r[0][1]))
}

/// Proves group commit through the server and its counters: 8 connections commit 50
/// single-row INSERTs each at once; the commits that found their records not yet durable
/// wait for a log flush (Log Flush Waits/sec grows by at least the syncs, at most by the
/// 400 commits), and the syncs (Log Flushes/sec) are fewer than the commits.
#[test]
fn concurrent_commits_share_log_flushes() {
    const CONNS: usize = 8;
    const EACH: usize = 50;
    let s = Server::start("log_flushes", &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "CREATE DATABASE g; USE g; CREATE TABLE t (k int PRIMARY KEY, x int)",
    );
    let (flushes0, waits0) = log_flushes(&mut c, "g");
    std::thread::scope(|scope| {
        for t in 0..CONNS {
            let mut c = s.connect_to(Some("g"));
            scope.spawn(move || {
                for i in 0..EACH {
                    run(
                        &mut c,
                        &format!("INSERT INTO t VALUES ({}, {t})", t * EACH + i),
                    );
                }
            });
        }
    });
    let n = all_rows(&run(&mut c, "SELECT COUNT(*) FROM g.dbo.t"));
    assert_eq!(int(&n[0][0]), (CONNS * EACH) as i64);
    let (flushes, flush_waits) = log_flushes(&mut c, "g");
    let (flushes, flush_waits) = (flushes - flushes0, flush_waits - waits0);
    let commits = (CONNS * EACH) as i64;
    assert!(
        flushes >= 1 && flushes < commits,
        "{flushes} log flushes for {commits} commits: none shared"
    );
    assert!(
        flush_waits >= flushes && flush_waits <= commits,
        "{flush_waits} flush waits, {flushes} flushes, {commits} commits"
    );
    eprintln!("{commits} commits: {flushes} log flushes, {flush_waits} flush waits");
}

/// sys.dm_os_performance_counters' Access Methods "Page Splits/sec" (cumulative, as SQL
/// Server's per-second counters are): four connections insert interleaved keys of wide rows
/// into one clustered table at once, splitting its leaves beside each other (storage's
/// tree_change.rs); the counter moves by at least the leaves the table gained, and an
/// UPDATE in place splits nothing.
#[test]
fn page_splits_count_clustered_splits() {
    const CONNS: i64 = 4;
    const EACH: i64 = 60;
    let s = Server::start("page_splits", &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "CREATE DATABASE p; USE p; CREATE TABLE t (k int PRIMARY KEY, pad char(1000))",
    );
    let splits = |c: &mut Client| {
        let r = all_rows(&run(
            c,
            "SELECT cntr_value FROM sys.dm_os_performance_counters \
             WHERE object_name LIKE 'SQLServer:Access Methods%' \
             AND counter_name LIKE 'Page Splits/sec%'",
        ));
        assert_eq!(r.len(), 1, "one Page Splits/sec row");
        int(&r[0][0])
    };
    let before = splits(&mut c);
    std::thread::scope(|scope| {
        for t in 0..CONNS {
            let mut c = s.connect_to(Some("p"));
            scope.spawn(move || {
                for i in 0..EACH {
                    run(
                        &mut c,
                        &format!("INSERT INTO t VALUES ({}, 'x')", i * CONNS + t),
                    );
                }
            });
        }
    });
    let made = splits(&mut c) - before;
    let n = all_rows(&run(&mut c, "SELECT COUNT(*) FROM p.dbo.t"));
    assert_eq!(int(&n[0][0]), CONNS * EACH);
    // 240 rows of about 1 KB fill at least 30 leaves of 8 rows or fewer.
    assert!(made >= 29, "{made} page splits for 240 rows of 1 KB");
    run(&mut c, "UPDATE p.dbo.t SET pad = 'y' WHERE k < 100");
    assert_eq!(
        splits(&mut c) - before,
        made,
        "an UPDATE in place splits nothing"
    );
    eprintln!("{made} page splits");
}
