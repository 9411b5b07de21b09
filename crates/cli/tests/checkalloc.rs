//! DBCC CHECKALLOC through T-SQL on a database whose GAM was damaged while the instance was
//! stopped: a free extent marked allocated with no owner is Msg 8905 naming the extent, the
//! summary counts it, and `-b` exits 1; before the damage the same check is clean.

mod common;

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use extentdb_format::{bitmap, Page};

const PAGE_SIZE: u64 = 8192;

fn exec(dir: &Path, sql: &str) -> (i32, String) {
    common::exec_sql(dir, &["-b"], sql)
}

/// Rewrites one page of a stopped database's file, resealing its checksum.
fn patch_page(path: &Path, page: u64, change: impl FnOnce(&mut Page)) {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut buf = vec![0u8; PAGE_SIZE as usize];
    f.seek(SeekFrom::Start(page * PAGE_SIZE)).unwrap();
    f.read_exact(&mut buf).unwrap();
    let mut p = Page::from_bytes(&buf).unwrap();
    change(&mut p);
    p.seal();
    f.seek(SeekFrom::Start(page * PAGE_SIZE)).unwrap();
    f.write_all(p.bytes()).unwrap();
    f.sync_all().unwrap();
}

#[test]
fn checkalloc_reports_an_unowned_allocated_extent() {
    let dir = std::env::temp_dir().join(format!("xdb-checkalloc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (code, out) = exec(
        &dir,
        "CREATE DATABASE CA ON (NAME = CA, FILENAME = 'CA.mdf', SIZE = 4MB) \
         LOG ON (NAME = CA_log, FILENAME = 'CA_log.ldf', SIZE = 8MB); \
         USE CA; CREATE TABLE t (k int PRIMARY KEY, v varchar(100)); \
         INSERT INTO t VALUES (1, 'one'), (2, 'two'); DBCC CHECKALLOC ('CA');",
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(
            "CHECKALLOC found 0 allocation errors and 0 consistency errors in database 'CA'."
        ),
        "{out}"
    );
    // The file's last extent (4 MB = 64 extents) is free: mark it allocated in the GAM
    // (page 2; bit 1 = free).
    let last = 63;
    patch_page(&dir.join("data/CA.mdf"), 2, |p| {
        assert!(
            bitmap::get_bit(p, last),
            "the last extent is free before the damage"
        );
        bitmap::set_bit(p, last, false);
    });
    let (code, out) = exec(&dir, "DBCC CHECKALLOC ('CA')");
    assert_eq!(code, 1, "-b stops on the severity-16 error: {out}");
    assert!(out.contains("Msg 8905, Level 16, State 1"), "{out}");
    assert!(out.contains(&format!("Extent (1:{})", last * 8)), "{out}");
    let (_, out) = exec(&dir, "DBCC CHECKALLOC ('CA') WITH NO_INFOMSGS");
    assert!(
        out.contains(
            "CHECKALLOC found 1 allocation errors and 0 consistency errors in database 'CA'."
        ),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
