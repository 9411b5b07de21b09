//! sys.dm_db_session_space_usage and sys.dm_db_task_space_usage through a real `extentdb
//! serve` and several TDS sessions at once: a #temp table's extents are charged to the
//! session that filled it (exactly its reserved pages, whatever the other sessions do at
//! the same time) and given back by its DROP; a ##table's pages are its writer's, and its
//! drop at its creator's end is not charged to the writer; a table variable's pages are
//! allocated and freed by its batch; a sort that spills charges its work file's pages as
//! internal objects; a running task shows in the task view and not yet in the session
//! view; a session's row goes when it ends; a login without VIEW SERVER STATE gets Msgs
//! 300 and 297.

use std::time::{Duration, Instant};

use extentdb_sql::exec::Output;
use extentdb_sql::types::Value;
use extentdb_tds::client::{Client, ConnectOptions};

mod common;
use common::tds::{all_rows, errors, int, run, Server};

/// A session's row of sys.dm_db_session_space_usage without its session_id: database_id,
/// the four counters and the deferred count; None when it has no row.
fn session_row(c: &mut Client, spid: i64) -> Option<Vec<i64>> {
    let sql = format!("SELECT * FROM sys.dm_db_session_space_usage WHERE session_id = {spid}");
    let rows = all_rows(&run(c, &sql));
    assert!(rows.len() <= 1, "one row per session: {rows:?}");
    rows.first().map(|r| r[1..].iter().map(int).collect())
}

/// The user_objects_alloc, user_objects_dealloc, internal_objects_alloc and
/// internal_objects_dealloc page counts of a session's completed tasks.
fn counts(c: &mut Client, spid: i64) -> [i64; 4] {
    let r = session_row(c, spid).expect("a row for a current session");
    assert_eq!(r[0], 2, "tempdb's database_id");
    assert_eq!(r[5], 0, "nothing waits for deferred deallocation");
    [r[1], r[2], r[3], r[4]]
}

fn spid(c: &mut Client) -> i64 {
    int(&all_rows(&run(c, "SELECT @@SPID"))[0][0])
}

fn scalar(c: &mut Client, sql: &str) -> i64 {
    int(&all_rows(&run(c, sql))[0][0])
}

/// The pages tempdb's allocation units reserve for `#name` (sys.allocation_units'
/// total_pages), asked by the session that owns it.
fn reserved_pages(c: &mut Client, name: &str) -> i64 {
    scalar(
        c,
        &format!(
            "SELECT SUM(au.total_pages) FROM tempdb.sys.partitions AS p \
             JOIN tempdb.sys.allocation_units AS au ON au.container_id = p.partition_id \
             WHERE p.object_id = OBJECT_ID('tempdb..{name}')"
        ),
    )
}

/// Fills `#name` (a heap of 1,000-byte rows, about 7 to a page) with `rows` rows.
fn fill_temp_table(c: &mut Client, name: &str, rows: u32) {
    run(
        c,
        &format!(
            "CREATE TABLE {name} (id INT, pad CHAR(1000)); \
             DECLARE @i INT = 0; \
             WHILE @i < {rows} BEGIN INSERT INTO {name} VALUES (@i, 'p'); SET @i += 1; END"
        ),
    );
}

/// Proves user objects are charged to the session that made them, exactly: A and C fill
/// #temp tables of different sizes at the same time; B sees each one's allocation equal
/// to the pages its table reserves (8 per extent, as sys.allocation_units counts them),
/// and its own as 0; A's DROP gives them all back; A's row goes when A disconnects.
#[test]
fn temp_table_pages_are_charged_to_the_session_that_made_them() {
    let s = Server::start("su-temp", &[]);
    let mut b = s.connect();
    let (mut a, mut c) = (s.connect(), s.connect());
    let (a_spid, c_spid, b_spid) = (spid(&mut a), spid(&mut c), spid(&mut b));
    assert_eq!(counts(&mut b, a_spid), [0, 0, 0, 0]);
    let (a, c) = std::thread::scope(|t| {
        let ta = t.spawn(move || {
            fill_temp_table(&mut a, "#big", 1400);
            a
        });
        let tc = t.spawn(move || {
            fill_temp_table(&mut c, "#small", 300);
            c
        });
        (ta.join().unwrap(), tc.join().unwrap())
    });
    let (mut a, mut c) = (a, c);
    let a_pages = reserved_pages(&mut a, "#big");
    let c_pages = reserved_pages(&mut c, "#small");
    assert!(a_pages >= 200 && c_pages >= 40, "{a_pages} {c_pages}");
    assert!(a_pages > c_pages);
    assert_eq!(counts(&mut b, a_spid), [a_pages, 0, 0, 0]);
    assert_eq!(counts(&mut b, c_spid), [c_pages, 0, 0, 0]);
    assert_eq!(counts(&mut b, b_spid), [0, 0, 0, 0]);
    run(&mut a, "DROP TABLE #big");
    assert_eq!(counts(&mut b, a_spid), [a_pages, a_pages, 0, 0]);
    // The session view lists every session sys.dm_exec_sessions does.
    assert_eq!(
        scalar(&mut b, "SELECT COUNT(*) FROM sys.dm_db_session_space_usage"),
        scalar(&mut b, "SELECT COUNT(*) FROM sys.dm_exec_sessions")
    );
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(20);
    while session_row(&mut b, a_spid).is_some() {
        assert!(Instant::now() < deadline, "A's row outlived A");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(counts(&mut b, c_spid), [c_pages, 0, 0, 0]);
}

/// Proves a global table's pages are charged to the session that writes them, not to its
/// creator: A makes ##g, B fills it, so B's allocation is the pages ##g reserves and A's
/// is 0; A disconnects, its end drops ##g, and B's counts do not move (the drop is A's
/// task, whose counts go with A's row, so it cannot be seen here).
#[test]
fn a_global_table_charges_the_session_that_writes_it() {
    let s = Server::start("su-global", &[]);
    let (mut a, mut b, mut w) = (s.connect(), s.connect(), s.connect());
    let (a_spid, b_spid) = (spid(&mut a), spid(&mut b));
    run(&mut a, "CREATE TABLE ##g (id INT, pad CHAR(1000))");
    run(
        &mut b,
        "DECLARE @i INT = 0; \
         WHILE @i < 300 BEGIN INSERT INTO ##g VALUES (@i, 'g'); SET @i += 1; END",
    );
    let pages = reserved_pages(&mut b, "##g");
    assert!(pages >= 40, "{pages}");
    assert_eq!(counts(&mut w, b_spid), [pages, 0, 0, 0]);
    assert_eq!(counts(&mut w, a_spid), [0, 0, 0, 0]);
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(20);
    let gone = "SELECT COUNT(*) FROM tempdb.sys.tables WHERE name = '##g'";
    while scalar(&mut w, gone) != 0 {
        assert!(Instant::now() < deadline, "##g outlived its creator");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(counts(&mut w, b_spid), [pages, 0, 0, 0]);
}

/// Proves a table variable's pages are user objects of the batch that declared it: they
/// are allocated while it fills and freed when the batch ends, so the session's completed
/// counts show both, equal; a second batch adds the same again.
#[test]
fn a_table_variable_is_allocated_and_freed_by_its_batch() {
    let s = Server::start("su-tvar", &[]);
    let (mut a, mut b) = (s.connect(), s.connect());
    let a_spid = spid(&mut a);
    let batch = "DECLARE @t TABLE (id INT, pad CHAR(1000)); DECLARE @i INT = 0; \
                 WHILE @i < 500 BEGIN INSERT INTO @t VALUES (@i, 'v'); SET @i += 1; END; \
                 SELECT COUNT(*) FROM @t";
    assert_eq!(scalar(&mut a, batch), 500);
    let [alloc, dealloc, internal_alloc, _] = counts(&mut b, a_spid);
    // 500 rows of about 1 KB: at least 72 pages (9 extents).
    assert!(alloc >= 72, "{alloc}");
    assert_eq!(alloc % 8, 0, "whole extents");
    assert_eq!(dealloc, alloc, "freed when its batch ended");
    assert_eq!(internal_alloc, 0);
    assert_eq!(scalar(&mut a, batch), 500);
    assert_eq!(counts(&mut b, a_spid), [2 * alloc, 2 * alloc, 0, 0]);
}

/// Proves a sort that spills charges its work file as internal objects: A's DISTINCT over
/// 12 MB of rows (past the sort's 8 MB) spills; B then sees A's internal allocation of at
/// least the spilled run's pages, all deallocated (the work file closed with the query),
/// and no user object pages (the table is in a user database, not in tempdb).
#[test]
fn a_sort_that_spills_counts_internal_object_pages() {
    let (s, mut a) = common::tds::start_in_database("su-spill", "w", "");
    let mut b = s.connect();
    let a_spid = spid(&mut a);
    run(
        &mut a,
        "CREATE TABLE big (id INT PRIMARY KEY, pad VARCHAR(4000))",
    );
    for chunk in 0..30 {
        let values: Vec<String> = (0..100)
            .map(|i| format!("({}, REPLICATE('p', 4000))", chunk * 100 + i))
            .collect();
        run(
            &mut a,
            &format!("INSERT INTO big VALUES {}", values.join(",")),
        );
    }
    assert_eq!(counts(&mut b, a_spid), [0, 0, 0, 0]);
    let distinct = "SELECT COUNT(*) FROM (SELECT DISTINCT pad, id FROM big) AS d";
    assert_eq!(scalar(&mut a, distinct), 3000);
    let [user_alloc, _, alloc, dealloc] = counts(&mut b, a_spid);
    assert_eq!(user_alloc, 0);
    // At least one run of several MB went to the work file: 2 MB is 256 pages.
    assert!(alloc >= 256, "{alloc}");
    assert_eq!(dealloc, alloc, "the work file closed with the query");
    // Not more than the whole input could take, 12 MB with its row framing.
    assert!(alloc <= 2 * 1600, "{alloc}");
}

/// Proves the task view shows a running request's pages, which the session view leaves
/// out until the request ends: while A's batch waits after filling a table variable, B
/// sees A's task row (request_id and exec_context_id 0, tempdb's database_id) with the
/// pages and A's session row without them; once the batch ends, A has no task row and its
/// session row has them, allocated and freed. B's own running request is a row too.
#[test]
fn a_running_task_shows_in_the_task_view_not_yet_in_the_session_view() {
    let s = Server::start("su-task", &[]);
    let (mut a, mut b) = (s.connect(), s.connect());
    let (a_spid, b_spid) = (spid(&mut a), spid(&mut b));
    let task_rows = |b: &mut Client, spid: i64| -> Vec<Vec<i64>> {
        let sql = format!("SELECT * FROM sys.dm_db_task_space_usage WHERE session_id = {spid}");
        all_rows(&run(b, &sql))
            .iter()
            .map(|r| r[1..].iter().map(int).collect())
            .collect()
    };
    assert_eq!(task_rows(&mut b, b_spid), vec![vec![0, 0, 2, 0, 0, 0, 0]]);
    fill_temp_table(&mut a, "#r", 300);
    let before = counts(&mut b, a_spid);
    assert!(before[0] > 0 && before[1] == 0, "{before:?}");
    let waiter = std::thread::spawn(move || {
        run(
            &mut a,
            "DECLARE @t TABLE (id INT, pad CHAR(1000)); DECLARE @i INT = 0; \
             WHILE @i < 200 BEGIN INSERT INTO @t VALUES (@i, 'v'); SET @i += 1; END; \
             WAITFOR DELAY '00:00:05'",
        );
        a
    });
    // The batch is in its WAITFOR once its request's command is no longer the batch's
    // start (EXECUTE) or an INSERT: its table variable is full.
    let command = format!("SELECT command FROM sys.dm_exec_requests WHERE session_id = {a_spid}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let rows = all_rows(&run(&mut b, &command));
        let filling = |c: &Value| matches!(c, Value::Text(c) if c == "EXECUTE" || c == "INSERT");
        if matches!(&rows[..], [r] if !filling(&r[0])) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "A's batch never reached its WAITFOR: {rows:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let running = task_rows(&mut b, a_spid);
    assert_eq!(running.len(), 1, "one task: {running:?}");
    let running = &running[0];
    assert_eq!(
        running[..3],
        [0, 0, 2],
        "request_id, exec_context_id, database_id"
    );
    // 200 rows of about 1 KB: at least 29 pages, in whole extents.
    assert!(running[3] >= 32 && running[3] % 8 == 0, "{running:?}");
    assert_eq!(running[4..], [0, 0, 0], "nothing freed or spilled yet");
    assert_eq!(
        counts(&mut b, a_spid),
        before,
        "a running task is not counted"
    );
    let mut a = waiter.join().unwrap();
    assert!(task_rows(&mut b, a_spid).is_empty(), "A runs nothing");
    let after = counts(&mut b, a_spid);
    assert_eq!(after[0], before[0] + running[3]);
    assert_eq!(after[1], running[3], "@t freed at the batch's end");
    run(&mut a, "DROP TABLE #r");
    assert_eq!(counts(&mut b, a_spid)[1], before[0] + running[3]);
}

/// Proves both views need VIEW SERVER STATE, as SQL Server's do: a login without it gets
/// Msg 300 (severity 14) and 297 (16) and no row; granted it, it reads every session's
/// row; the views' columns are SQL Server 2022's, in its order.
#[test]
fn the_views_need_view_server_state() {
    let s = Server::start("su-perm", &[]);
    let mut sa = s.connect();
    run(
        &mut sa,
        "CREATE LOGIN watcher WITH PASSWORD = 'Space-Test-Pass-1'",
    );
    let mut w = Client::connect(
        &s.addr,
        &ConnectOptions {
            user: "watcher".into(),
            password: "Space-Test-Pass-1".into(),
            timeout: Some(Duration::from_secs(60)),
            ..ConnectOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("login failed: {e:?}"));
    for view in [
        "sys.dm_db_session_space_usage",
        "sys.dm_db_task_space_usage",
    ] {
        let refused = errors(&mut w, &format!("SELECT * FROM {view}"));
        assert_eq!(refused, [(300, 14, 1), (297, 16, 1)], "{view}");
    }
    run(&mut sa, "GRANT VIEW SERVER STATE TO watcher");
    assert_eq!(
        scalar(&mut w, "SELECT COUNT(*) FROM sys.dm_db_session_space_usage"),
        2
    );
    let columns = |c: &mut Client, sql: &str| -> Vec<String> {
        run(c, sql)
            .outputs
            .iter()
            .find_map(|o| match o {
                Output::Rows { columns, .. } => {
                    Some(columns.iter().map(|(n, _)| n.clone()).collect())
                }
                _ => None,
            })
            .expect("a result set")
    };
    let counters = [
        "user_objects_alloc_page_count",
        "user_objects_dealloc_page_count",
        "internal_objects_alloc_page_count",
        "internal_objects_dealloc_page_count",
    ];
    let mut session = vec!["session_id", "database_id"];
    session.extend(counters);
    session.push("user_objects_deferred_dealloc_page_count");
    assert_eq!(
        columns(&mut w, "SELECT * FROM sys.dm_db_session_space_usage"),
        session
    );
    let mut task = vec!["session_id", "request_id", "exec_context_id", "database_id"];
    task.extend(counters);
    assert_eq!(
        columns(&mut w, "SELECT * FROM sys.dm_db_task_space_usage"),
        task
    );
    let own = all_rows(&run(&mut w, "SELECT * FROM sys.dm_db_task_space_usage"));
    assert_eq!(own.len(), 1, "only the watcher's own request runs: {own:?}");
    assert!(matches!(own[0][0], Value::SmallInt(_)));
}
