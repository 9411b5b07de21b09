//! A damaged IAM page of one user table does not keep its database from opening, as in SQL
//! Server: the server is stopped cleanly, the first IAM page of table `a` is zeroed on disk
//! and the server started again over real TDS connections. The database must be ONLINE;
//! reading or changing `a` fails with Msg 824 naming the page (and the ERRORLOG has the
//! 824); table `b` is read and written from two connections at once; DBCC CHECKDB online
//! and `extentdb checkdb` offline report SQL Server's 8946, 8909, 7965 and 8905. Nothing
//! `a` owned is freed or reused meanwhile: with the page put back, `a` has every row again
//! and CHECKDB is clean. The same after a crash; and a zeroed first PFS page, which the
//! open cannot work around, makes the database SUSPECT without writing over anything.

mod common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::tds::{all_rows, errors, run, Server};
use extentdb_format::{bitmap, iam, Page, PageId, GAM_INTERVAL_EXTENTS, PAGES_PER_EXTENT};
use extentdb_io::os::OsFileSystem;
use extentdb_sql::types::Value;
use extentdb_storage::database::open_offline;

const A_ROWS: i32 = 400;
const B_ROWS: i32 = 100;
/// Rows each of two connections adds to `b` while `a` is damaged.
const B_MORE: i32 = 300;

/// Stops the server with SIGTERM (a clean shutdown: every database checkpointed, so no
/// redo at the next start rewrites the page from the log) and keeps its directory.
fn stop(mut s: Server) -> PathBuf {
    // SAFETY: kill(2) on the child's own pid.
    unsafe { libc::kill(s.child.id() as i32, libc::SIGTERM) };
    let status = s.child.wait().unwrap();
    assert!(status.success(), "clean stop: {status:?}");
    let dir = std::mem::replace(&mut s.dir, "/nonexistent-xdb".into());
    drop(s);
    dir
}

fn page_at(path: &Path, pid: PageId) -> Page {
    let mut b = vec![0u8; extentdb_format::PAGE_SIZE];
    std::fs::File::open(path)
        .unwrap()
        .read_exact_at(&mut b, pid.page.offset())
        .unwrap();
    Page::from_bytes(&b).unwrap()
}

fn write_page_at(path: &Path, pid: PageId, bytes: &[u8]) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, pid.page.offset()).unwrap();
    f.sync_all().unwrap();
}

/// (a's allocation unit, its first IAM page, the extents that page maps) from the stopped
/// files.
fn iam_of_a(mdf: &Path) -> (u64, PageId, Vec<u32>) {
    let off = open_offline(&OsFileSystem, mdf).unwrap();
    let au = off
        .catalog
        .tables
        .iter()
        .find(|t| t.name == "a")
        .unwrap()
        .allocation_unit_id;
    let first = off
        .catalog
        .allocation_units
        .iter()
        .find(|u| u.allocation_unit_id == au)
        .unwrap()
        .first_iam_page;
    let p = page_at(mdf, first);
    assert!(
        p.raw_header().next_page.is_null(),
        "one IAM page maps a's one file"
    );
    let base = iam::start_page(&p).page.0 / PAGES_PER_EXTENT;
    let mut extents = Vec::new();
    let mut i = 0;
    while let Some(bit) = bitmap::next_set(&p, i, GAM_INTERVAL_EXTENTS) {
        extents.push(base + bit);
        i = bit + 1;
    }
    (au, first, extents)
}

fn count(c: &mut extentdb_tds::client::Client, table: &str) -> i32 {
    match all_rows(&run(c, &format!("SELECT COUNT(*) FROM {table}")))[0][0] {
        Value::Int(n) => n,
        ref v => panic!("{v:?}"),
    }
}

/// Every message text of a batch, errors and informational ones.
fn texts(c: &mut extentdb_tds::client::Client, sql: &str) -> String {
    let r = c.batch(sql).unwrap();
    r.errors()
        .map(|e| {
            format!(
                "Msg {}, Level {}, State {}: {}\n",
                e.number, e.severity, e.state, e.text
            )
        })
        .collect()
}

fn offline_checkdb(dir: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_extentdb"))
        .args(["checkdb", "--no-infomsgs", "--database", "D", "--data-dir"])
        .arg(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// Database D with tables a (A_ROWS rows) and b (B_ROWS rows).
fn make_tables(c: &mut extentdb_tds::client::Client) {
    run(
        c,
        "CREATE DATABASE D ON (NAME = D, FILENAME = 'D.mdf', SIZE = 8MB) \
         LOG ON (NAME = D_log, FILENAME = 'D_log.ldf', SIZE = 8MB)",
    );
    run(
        c,
        &format!(
            "USE D; SET NOCOUNT ON; CREATE TABLE a (id int, pad varchar(600)); \
             CREATE TABLE b (id int, pad varchar(600)); DECLARE @i int = 0; \
             WHILE @i < {A_ROWS} BEGIN INSERT INTO a VALUES (@i, REPLICATE('a', 500)); SET @i += 1; END; \
             SET @i = 0; WHILE @i < {B_ROWS} BEGIN INSERT INTO b VALUES (@i, REPLICATE('b', 500)); SET @i += 1; END;"
        ),
    );
}

/// Proves the whole account of the module docs.
#[test]
fn zeroed_iam_page_leaves_the_database_online_and_its_table_unreadable() {
    let s = Server::start("iamzero", &[]);
    let mut c = s.connect();
    make_tables(&mut c);
    drop(c);
    let dir = stop(s);
    let mdf = dir.join("data/D.mdf");
    let (au, iam_at, extents) = iam_of_a(&mdf);
    assert!(extents.len() >= 3, "a spans several extents: {extents:?}");
    let original = page_at(&mdf, iam_at);
    write_page_at(&mdf, iam_at, &[0u8; extentdb_format::PAGE_SIZE]);

    let s = Server::start_in(dir, &[]);
    let mut c = s.connect();
    let state = all_rows(&run(
        &mut c,
        "SELECT state_desc FROM sys.databases WHERE name = 'D'",
    ));
    assert_eq!(state, vec![vec![Value::Text("ONLINE".into())]], "D opened");

    // a: every read and change that needs its IAM chain fails with 824 naming the page.
    let expected = format!(
        "incorrect pageid (expected {}:{}; actual 0:0)",
        iam_at.file.0, iam_at.page.0
    );
    let at = format!("during a read of page {iam_at} in database ID");
    for sql in [
        "USE D; SELECT COUNT(*) FROM a",
        "USE D; INSERT INTO a VALUES (-1, 'x')",
        "USE D; DROP TABLE a",
        "USE D; TRUNCATE TABLE a",
    ] {
        let mut one = s.connect();
        let out = texts(&mut one, sql);
        assert!(
            out.contains("Msg 824, Level 24, State 2")
                && out.contains(&expected)
                && out.contains(&at),
            "{sql}: {out}"
        );
    }

    // b: two connections read and write it at once.
    let addr = s.addr.clone();
    let workers: Vec<_> = (0..2)
        .map(|w| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let mut c = common::tds::connect_at(&addr, Some("D"), 120).unwrap();
                for i in 0..B_MORE {
                    run(
                        &mut c,
                        &format!(
                            "INSERT INTO b VALUES ({}, REPLICATE('c', 500))",
                            1000 * (w + 1) + i
                        ),
                    );
                    if i % 50 == 0 {
                        assert!(count(&mut c, "b") >= B_ROWS + i);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    run(&mut c, "USE D");
    assert_eq!(count(&mut c, "b"), B_ROWS + 2 * B_MORE);

    // DBCC CHECKDB names the page, the table it cannot check and the extents no IAM owns.
    let bad_header =
        format!("Allocation page {iam_at} has invalid IAM page header values. Type is 0.");
    let zero_id = format!("page ID {iam_at} contains an incorrect page ID in its page header. The PageId in the page header = (0:0).");
    let object_id = match all_rows(&run(&mut c, "SELECT OBJECT_ID('a')"))[0][0] {
        Value::Int(n) => n,
        ref v => panic!("{v:?}"),
    };
    let unchecked = format!(
        "Could not check object ID {object_id}, index ID 0, partition ID {au}, alloc unit ID {au} (type In-row data) due to invalid allocation (IAM) page(s)."
    );
    let check = |out: &str, what: &str| {
        for x in [
            "Msg 8946, Level 16, State 12",
            bad_header.as_str(),
            "Msg 8909, Level 16, State 1",
            zero_id.as_str(),
            "Msg 7965, Level 16, State 2",
            unchecked.as_str(),
        ] {
            assert!(out.contains(x), "{what}: {x:?} in:\n{out}");
        }
        for e in &extents {
            let x = format!("Extent (1:{}) in database ID", e * PAGES_PER_EXTENT);
            assert!(out.contains(&x), "{what}: 8905 for {x} in:\n{out}");
        }
    };
    check(
        &texts(&mut c, "DBCC CHECKDB ('D') WITH NO_INFOMSGS"),
        "online",
    );
    let log = s.errorlog();
    for x in ["Error: 824, Severity: 24, State: 2.", expected.as_str()] {
        assert!(log.contains(x), "ERRORLOG: {x:?} in:\n{log}");
    }
    assert!(
        log.contains(&format!("the IAM chain of alloc unit ID {au} (object ID {object_id}) is damaged at page {iam_at}")),
        "ERRORLOG names the damaged chain at open:\n{log}"
    );
    drop(c);
    let dir = stop(s);
    check(&offline_checkdb(&dir), "offline");

    // Nothing of a's was freed or written over: its extents still hold its pages, and with
    // the IAM page back every row is there and the database checks clean.
    for e in &extents {
        let first = PageId::new(1, e * PAGES_PER_EXTENT);
        assert_eq!(
            page_at(&mdf, first).raw_header().allocation_unit_id,
            au,
            "extent {first} still a's"
        );
    }
    write_page_at(&mdf, iam_at, original.bytes());
    let s = Server::start_in(dir, &[]);
    let mut c = s.connect_to(Some("D"));
    assert_eq!(count(&mut c, "a"), A_ROWS);
    assert_eq!(count(&mut c, "b"), B_ROWS + 2 * B_MORE);
    let out = texts(&mut c, "DBCC CHECKDB ('D') WITH NO_INFOMSGS");
    assert!(out.is_empty(), "clean with the page back: {out}");
    assert!(errors(&mut c, "INSERT INTO a VALUES (-1, 'x')").is_empty());
}

/// Proves a crash changes nothing of it: after a CHECKPOINT, b grows by new extents (their
/// GAM and IAM page images in the log past the checkpoint) and the server is killed
/// (SIGKILL); a's IAM page is zeroed. Recovery redoes b's pages and opens the database
/// ONLINE, but does not run the sweep that frees extents no IAM page owns (the ERRORLOG
/// says so), which would have freed all of a's: with the page back, a has every row and
/// CHECKDB is clean.
#[test]
fn zeroed_iam_page_after_a_crash_frees_none_of_its_extents() {
    let mut s = Server::start("iamzero-crash", &[]);
    let mut c = s.connect();
    make_tables(&mut c);
    run(
        &mut c,
        &format!(
            "CHECKPOINT; SET NOCOUNT ON; DECLARE @i int = 0; \
             WHILE @i < {B_MORE} BEGIN INSERT INTO b VALUES (@i, REPLICATE('k', 500)); SET @i += 1; END;"
        ),
    );
    drop(c);
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    let dir = std::mem::replace(&mut s.dir, "/nonexistent-xdb".into());
    drop(s);
    let mdf = dir.join("data/D.mdf");
    let (_, iam_at, _) = iam_of_a(&mdf);
    let original = page_at(&mdf, iam_at);
    write_page_at(&mdf, iam_at, &[0u8; extentdb_format::PAGE_SIZE]);

    let s = Server::start_in(dir, &[]);
    let mut c = s.connect_to(Some("D"));
    assert_eq!(count(&mut c, "b"), B_ROWS + B_MORE, "b recovered");
    let out = texts(&mut c, "SELECT COUNT(*) FROM a");
    assert!(out.contains("Msg 824, Level 24, State 2"), "{out}");
    let log = s.errorlog();
    assert!(
        log.contains("Recovery of database 'D' (")
            && log.contains(
                ") did not free extents allocated in a GAM page but owned by no IAM page"
            ),
        "the sweep was due and skipped:\n{log}"
    );
    drop(c);
    let dir = stop(s);
    write_page_at(&mdf, iam_at, original.bytes());
    let s = Server::start_in(dir, &[]);
    let mut c = s.connect_to(Some("D"));
    assert_eq!(count(&mut c, "a"), A_ROWS);
    assert_eq!(count(&mut c, "b"), B_ROWS + B_MORE);
    let out = texts(&mut c, "DBCC CHECKDB ('D') WITH NO_INFOMSGS");
    assert!(out.is_empty(), "clean with the page back: {out}");
}

/// Proves a zeroed first PFS page (1:1), which maps the catalog's and IAM pages, is damage
/// the open cannot work around (every catalog save, a checkpoint's too, takes pages by it):
/// the database is SUSPECT with the 824 reason in the ERRORLOG, instead of opening and
/// reading the zeros as "every page free", which handed out IAM pages in use as catalog
/// pages at the next checkpoint. With the page put back it opens, every row is there and
/// CHECKDB is clean: nothing was written over.
#[test]
fn zeroed_first_pfs_page_is_suspect_and_overwrites_nothing() {
    let s = Server::start("pfszero", &[]);
    let mut c = s.connect();
    make_tables(&mut c);
    drop(c);
    let dir = stop(s);
    let mdf = dir.join("data/D.mdf");
    let pfs = PageId::new(1, 1);
    let original = page_at(&mdf, pfs);
    write_page_at(&mdf, pfs, &[0u8; extentdb_format::PAGE_SIZE]);

    let s = Server::start_in(dir, &[]);
    let mut c = s.connect();
    let state = all_rows(&run(
        &mut c,
        "SELECT state_desc FROM sys.databases WHERE name = 'D'",
    ));
    assert_eq!(state, vec![vec![Value::Text("SUSPECT".into())]]);
    let log = s.errorlog();
    assert!(
        log.contains("Database 'D' cannot be opened: incorrect pageid (expected 1:1; actual 0:0)"),
        "{log}"
    );
    drop(c);
    let dir = stop(s);
    write_page_at(&mdf, pfs, original.bytes());
    let s = Server::start_in(dir, &[]);
    let mut c = s.connect_to(Some("D"));
    assert_eq!(count(&mut c, "a"), A_ROWS);
    assert_eq!(count(&mut c, "b"), B_ROWS);
    let out = texts(&mut c, "DBCC CHECKDB ('D') WITH NO_INFOMSGS");
    assert!(out.is_empty(), "clean with the page back: {out}");
}
