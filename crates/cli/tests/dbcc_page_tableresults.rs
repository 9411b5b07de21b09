//! DBCC PAGE WITH TABLERESULTS through real TDS sessions: SQL Server's rows (ParentObject,
//! Object, Field, VALUE) read by two sessions while a third inserts into the page, read
//! into a #temp table by INSERT ... EXEC (the way tools use it), an index page's header
//! rows followed by its rows' result set, the permission and the options still refused;
//! and `extentdb inspect` of a stopped server's index page printing the same rows.

mod common;
use common::tds::{connect_at, run, Server};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use extentdb_sql::exec::Output;
use extentdb_sql::types::{SqlType, Value};
use extentdb_tds::client::Client;

type ResultSet = (Vec<(String, SqlType)>, Vec<Vec<Value>>);

/// Every result set of a response, in order.
fn result_sets(r: &extentdb_tds::client::Response) -> Vec<ResultSet> {
    r.outputs
        .iter()
        .filter_map(|o| match o {
            Output::Rows { columns, rows } => Some((columns.clone(), rows.clone())),
            _ => None,
        })
        .collect()
}

fn text(v: &Value) -> String {
    match v {
        Value::Text(t) => t.clone(),
        other => panic!("not text: {other:?}"),
    }
}

/// The (ParentObject, Object, Field, VALUE) rows of a TABLERESULTS result set, after
/// checking its columns are SQL Server's.
fn page_rows(set: &ResultSet) -> Vec<[String; 4]> {
    let names: Vec<&str> = set.0.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["ParentObject", "Object", "Field", "VALUE"]);
    set.1
        .iter()
        .map(|r| [text(&r[0]), text(&r[1]), text(&r[2]), text(&r[3])])
        .collect()
}

/// The VALUE of the first row whose Field is `field`.
fn field<'a>(rows: &'a [[String; 4]], field: &str) -> &'a str {
    let row = rows.iter().find(|r| r[2] == field);
    &row.unwrap_or_else(|| panic!("no {field} row"))[3]
}

/// The header fields of pages 0..=last of database `db`'s file 1, each page's
/// (Field, VALUE) pairs, read as tools do: DBCC PAGE WITH TABLERESULTS into a #temp
/// table through INSERT ... EXEC, page by page in a T-SQL loop.
fn page_headers(c: &mut Client, db: &str, last: u32) -> BTreeMap<u32, BTreeMap<String, String>> {
    let batch = format!(
        "SET NOCOUNT ON; \
         CREATE TABLE #pg (ParentObject varchar(255), Object varchar(255), \
           Field varchar(255), VALUE varchar(1000), page int NULL); \
         DECLARE @p int = 0; \
         WHILE @p <= {last} BEGIN \
           INSERT INTO #pg (ParentObject, Object, Field, VALUE) \
             EXEC ('DBCC PAGE (''{db}'', 1, ' + CAST(@p AS varchar(10)) + ', 0) \
                    WITH TABLERESULTS, NO_INFOMSGS'); \
           UPDATE #pg SET page = @p WHERE page IS NULL; \
           SET @p += 1; \
         END; \
         SELECT page, Field, VALUE FROM #pg WHERE ParentObject = 'PAGE HEADER:'; \
         DROP TABLE #pg;"
    );
    let r = run(c, &batch);
    let mut pages: BTreeMap<u32, BTreeMap<String, String>> = BTreeMap::new();
    for row in &result_sets(&r).last().expect("the SELECT").1 {
        let page = common::tds::int(&row[0]) as u32;
        pages
            .entry(page)
            .or_default()
            .insert(text(&row[1]), text(&row[2]));
    }
    assert_eq!(pages.len(), last as usize + 1, "every page gave its header");
    pages
}

/// The pages whose header names object `object_id`, index `index_id`, level `level`,
/// type `page_type`, with rows.
fn pages_of(
    headers: &BTreeMap<u32, BTreeMap<String, String>>,
    object_id: &str,
    index_id: &str,
    (page_type, level): (&str, &str),
) -> Vec<u32> {
    let is =
        |h: &BTreeMap<String, String>, f: &str, v: &str| h.get(f).map(String::as_str) == Some(v);
    headers
        .iter()
        .filter(|(_, h)| {
            is(h, "Metadata: ObjectId", object_id)
                && is(h, "Metadata: IndexId", index_id)
                && is(h, "m_type", page_type)
                && is(h, "m_level", level)
                && !is(h, "m_slotCnt", "0")
        })
        .map(|(p, _)| *p)
        .collect()
}

/// One consistent read of the heap page: the m_pageId row under PAGE HEADER:, m_slotCnt
/// equal to the records listed, each record's id and name columns as inserted (name is
/// 'name-' + id) and every id from 0 up to the slot count there once. Returns the count.
fn check_heap_page(c: &mut Client, page: u32) -> usize {
    let r = run(
        c,
        &format!("DBCC PAGE ('D', 1, {page}, 3) WITH TABLERESULTS"),
    );
    let sets = result_sets(&r);
    assert_eq!(sets.len(), 1, "a data page: one result set");
    let rows = page_rows(&sets[0]);
    let id_row = rows.iter().find(|r| r[2] == "m_pageId").unwrap();
    assert_eq!(id_row[0], "PAGE HEADER:");
    assert!(id_row[1].starts_with("Page @0x"), "{id_row:?}");
    assert_eq!(id_row[3], format!("(1:{page})"));
    let slots: usize = field(&rows, "m_slotCnt").parse().unwrap();
    let records: Vec<&[String; 4]> = rows.iter().filter(|r| r[2] == "Record Type").collect();
    assert_eq!(records.len(), slots, "one record per slot");
    let mut ids = Vec::new();
    for (slot, rec) in records.iter().enumerate() {
        let heading = &rec[0];
        assert!(
            heading.starts_with(&format!("Slot {slot} Offset 0x")),
            "{heading}"
        );
        assert_eq!((&rec[1], &rec[3][..]), (heading, "PRIMARY_RECORD"));
        let column = |n: usize, name: &str| {
            let row = rows
                .iter()
                .find(|r| &r[0] == heading && r[2] == name)
                .unwrap_or_else(|| panic!("slot {slot}: no {name}"));
            let object = format!("Slot {slot} Column {n} Offset 0x");
            assert!(row[1].starts_with(&object), "{row:?}");
            assert!(row[1].contains(" Length (physical) "), "{row:?}");
            row[3].clone()
        };
        let id: usize = column(1, "id").parse().unwrap();
        assert_eq!(column(2, "name"), format!("name-{id}"));
        ids.push(id);
    }
    ids.sort_unstable();
    assert_eq!(ids, (0..slots).collect::<Vec<_>>(), "each id inserted once");
    slots
}

/// Proves DBCC PAGE (db, 1, page, 3) WITH TABLERESULTS reads a heap page as SQL Server's
/// rows while it changes: the page is found by scanning headers through INSERT ... EXEC;
/// then one session inserts 200 rows one by one while two others read the page over and
/// over, each read whole (m_slotCnt equals its records, every record's columns are the
/// values inserted, ids 0..n once each, never fewer slots than before), and some read
/// falls between the first insert and the last. At the end the slot count is the
/// table's COUNT(*).
#[test]
fn two_sessions_read_a_page_while_a_third_inserts() {
    let s = Server::start("tblres-heap", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE D");
    run(
        &mut c,
        "USE D; CREATE TABLE t (id int, name varchar(40)); INSERT t VALUES (0, 'name-0');",
    );
    let object_id = common::tds::table(&mut c, "SELECT OBJECT_ID('t')").remove(0);
    let headers = page_headers(&mut c, "D", 120);
    let found = pages_of(&headers, &object_id, "0", ("1", "0"));
    assert_eq!(found.len(), 1, "one data page of t: {found:?}");
    let page = found[0];
    assert_eq!(headers[&page]["m_pageId"], format!("(1:{page})"));

    const ROWS: usize = 200;
    let done = Arc::new(AtomicBool::new(false));
    let inserter = {
        let (addr, done) = (s.addr.clone(), done.clone());
        std::thread::spawn(move || {
            let mut w = connect_at(&addr, Some("D"), 60).unwrap();
            for id in 1..ROWS {
                run(&mut w, &format!("INSERT t VALUES ({id}, 'name-{id}')"));
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (addr, done) = (s.addr.clone(), done.clone());
            std::thread::spawn(move || {
                let mut r = connect_at(&addr, Some("D"), 60).unwrap();
                let (mut seen, mut reads) = (vec![0], 0);
                while !done.load(Ordering::SeqCst) || reads < 5 {
                    let (n, last) = (check_heap_page(&mut r, page), *seen.last().unwrap());
                    assert!(n >= last, "slots went from {last} to {n}");
                    if n > last {
                        seen.push(n);
                    }
                    reads += 1;
                }
                seen
            })
        })
        .collect();
    inserter.join().unwrap();
    let seen: Vec<Vec<usize>> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    // Some read fell between the first insert and the last: the page changed under them.
    assert!(
        seen.iter().flatten().any(|&n| n > 1 && n < ROWS),
        "{seen:?}"
    );
    assert_eq!(check_heap_page(&mut c, page), ROWS);
    assert_eq!(
        common::tds::table(&mut c, "SELECT COUNT(*) FROM t"),
        [ROWS.to_string()]
    );
}

/// Proves the options around TABLERESULTS: NO_INFOMSGS with it drops message 2528 and
/// keeps the rows; a word DBCC does not know is still 2526 and an option not built
/// (WAIT_AT_LOW_PRIORITY) 40517, each returning no rows; without 3604 the rows still
/// come to the client and nothing goes to the ERRORLOG; a login that is not sysadmin
/// gets 2571, as without the option.
#[test]
fn options_and_permission_around_tableresults() {
    let s = Server::start("tblres-options", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE D");
    let log_before = s.errorlog().matches("m_pageId").count();
    let r = run(&mut c, "DBCC PAGE ('D', 1, 0, 0) WITH TABLERESULTS");
    let rows = page_rows(&result_sets(&r)[0]);
    assert_eq!(field(&rows, "m_pageId"), "(1:0)");
    let info = |r: &extentdb_tds::client::Response| {
        r.outputs
            .iter()
            .filter(|o| matches!(o, Output::Info(m) if m.number == 2528))
            .count()
    };
    assert_eq!(info(&r), 1);
    assert_eq!(s.errorlog().matches("m_pageId").count(), log_before);
    let r = run(
        &mut c,
        "DBCC PAGE ('D', 1, 0, 0) WITH TABLERESULTS, NO_INFOMSGS",
    );
    assert_eq!((info(&r), result_sets(&r).len()), (0, 1));
    for (sql, want) in [
        (
            "DBCC PAGE ('D', 1, 0, 0) WITH TABLERESULTS, NO_SUCH_OPTION",
            2526,
        ),
        ("DBCC PAGE ('D', 1, 0, 0) WITH WAIT_AT_LOW_PRIORITY", 40517),
        ("DBCC PAGE ('D', 1, 99999, 0) WITH TABLERESULTS", 8968),
    ] {
        let r = c.batch(sql).unwrap();
        let numbers: Vec<i32> = r.errors().map(|e| e.number).collect();
        assert_eq!(numbers, [want], "{sql}");
        assert!(result_sets(&r).is_empty(), "{sql}");
    }
    run(
        &mut c,
        "CREATE LOGIN plain WITH PASSWORD = 'Tbl-Res-Pass-1'; \
         USE D; CREATE USER plain FOR LOGIN plain;",
    );
    let mut p = Client::connect(
        &s.addr,
        &extentdb_tds::client::ConnectOptions {
            user: "plain".into(),
            password: "Tbl-Res-Pass-1".into(),
            database: Some("D".into()),
            timeout: Some(std::time::Duration::from_secs(60)),
            ..Default::default()
        },
    )
    .unwrap_or_else(|_| panic!("plain's login"));
    for sql in [
        "DBCC PAGE ('D', 1, 0, 0)",
        "DBCC PAGE ('D', 1, 0, 0) WITH TABLERESULTS",
    ] {
        let r = p.batch(sql).unwrap();
        let numbers: Vec<i32> = r.errors().map(|e| e.number).collect();
        assert_eq!(numbers, [2571], "{sql}");
        assert!(result_sets(&r).is_empty(), "{sql}");
    }
}

/// Stops the server cleanly (SIGTERM: a checkpoint) and keeps its directory.
fn stop(mut s: Server) -> PathBuf {
    // SAFETY: kill(2) on the child's own pid.
    unsafe { libc::kill(s.child.id() as i32, libc::SIGTERM) };
    let status = s.child.wait().unwrap();
    assert!(status.success(), "clean stop: {status:?}");
    let dir = std::mem::replace(&mut s.dir, "/nonexistent-xdb".into());
    drop(s);
    dir
}

/// Proves an index page WITH TABLERESULTS at printopt 3 gives its header's rows (no
/// record rows) and then the index rows' result set, the same as without the option (so
/// INSERT ... EXEC of it into a four-column table is 213, inserting nothing, while
/// printopt 1 of the page goes in, one Record Type row per index row); and that `extentdb inspect --printopt 3` of the stopped server's file prints those
/// rows, as a table, exactly: h (id, a) with index h_a, 600 rows; its first leaf and its
/// root, found by scanning page headers through INSERT ... EXEC.
#[test]
fn index_page_rows_over_tds_and_in_inspect() {
    let s = Server::start("tblres-index", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE D");
    run(
        &mut c,
        "USE D; SET NOCOUNT ON; CREATE TABLE h (id int, a int); DECLARE @i int = 0; \
         WHILE @i < 600 BEGIN INSERT INTO h VALUES (@i, @i * 3); SET @i += 1; END; \
         CREATE INDEX h_a ON h (a);",
    );
    let object_id = common::tds::table(&mut c, "SELECT OBJECT_ID('h')").remove(0);
    let headers = page_headers(&mut c, "D", 160);
    let leaves = pages_of(&headers, &object_id, "2", ("1", "0"));
    let roots = pages_of(&headers, &object_id, "2", ("2", "1"));
    assert!(
        leaves.len() >= 2 && roots.len() == 1,
        "{leaves:?} {roots:?}"
    );
    let first = *leaves
        .iter()
        .find(|p| headers[p]["m_prevPage"] == "(0:0)")
        .unwrap();
    let mut grids = Vec::new();
    for page in [first, roots[0]] {
        let sql = format!("DBCC PAGE ('D', 1, {page}, 3)");
        let tabled = result_sets(&run(&mut c, &format!("{sql} WITH TABLERESULTS")));
        assert_eq!(tabled.len(), 2, "header rows, then the index rows");
        let rows = page_rows(&tabled[0]);
        assert_eq!(field(&rows, "m_pageId"), format!("(1:{page})"));
        assert!(
            rows.iter().all(|r| !r[0].starts_with("Slot ")),
            "header only"
        );
        run(&mut c, "DBCC TRACEON (3604)");
        let plain = result_sets(&run(&mut c, &sql));
        run(&mut c, "DBCC TRACEOFF (3604)");
        assert_eq!(plain[..], tabled[1..], "the same index rows either way");
        let (columns, index_rows) = &tabled[1];
        let slots: usize = field(&rows, "m_slotCnt").parse().unwrap();
        assert_eq!(index_rows.len(), slots);
        grids.push((page, columns.clone(), index_rows.clone()));
    }
    // INSERT ... EXEC takes one shape of result set: the index rows' second one is 213 and
    // nothing goes in; at printopt 1 the same page is header and record rows only.
    let into = |opt: u8| {
        format!(
            "CREATE TABLE #p (ParentObject varchar(255), Object varchar(255), \
               Field varchar(255), VALUE varchar(1000)); \
             INSERT INTO #p EXEC ('DBCC PAGE (''D'', 1, {first}, {opt}) WITH TABLERESULTS');"
        )
    };
    assert_eq!(common::tds::numbers(&mut c, &into(3)), [213]);
    assert_eq!(common::tds::table(&mut c, "SELECT COUNT(*) FROM #p"), ["0"]);
    run(&mut c, "DROP TABLE #p");
    run(&mut c, &into(1));
    let records = common::tds::table(
        &mut c,
        "SELECT COUNT(*) FROM #p WHERE Field = 'Record Type'; DROP TABLE #p;",
    );
    assert_eq!(records, [grids[0].2.len().to_string()]);
    let leaf_rows = &grids[0].2;
    for (i, row) in leaf_rows.iter().enumerate() {
        assert_eq!(row[2], Value::Int(i as i32));
        assert_eq!(row[4], Value::Int(3 * i as i32), "a ascending from 0");
    }
    drop(c);
    let dir = stop(s);
    for (page, columns, rows) in grids {
        let out = Command::new(env!("CARGO_BIN_EXE_extentdb"))
            .args(["inspect", "--data-dir"])
            .arg(&dir)
            .args(["--database", "D", "--file", "1", "--page"])
            .arg(page.to_string())
            .args(["--printopt", "3"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains(&format!("m_pageId = (1:{page})")),
            "{stdout}"
        );
        assert!(!stdout.contains("Memory Dump"), "rows as a table: {stdout}");
        let table = extentdb_sql::render::render_result_set(&columns, &rows);
        assert!(
            stdout.ends_with(&table),
            "inspect's table:\n{stdout}\nwant:\n{table}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
