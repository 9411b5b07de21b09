//! Index seeks (issue 22): reads through a nonclustered index and a lookup of each row,
//! through a real `extentdb serve` and TDS. A lookup by an indexed column on 20,000 rows
//! reads a handful of pages where a scan reads hundreds; seek and scan return the same rows
//! over generated predicates on heap and clustered tables, unique and not, one and two key
//! columns, for SELECT, UPDATE and DELETE (the scan forced by NOT (NOT (...)), which no
//! seek analyses); a read through an index waits for a row another session moved away
//! from its key and gives it back when that session rolls back; and readers of an index
//! beside sessions moving keys in it never see a row twice nor miss one whose move rolls
//! back.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::tds::{
    all_rows, assert_checkdb_clean, connect_at, int, run, scans_and_reads, Rng, Server,
};
use extentdb_sql::types::Value;
use extentdb_tds::client::Client;

fn count(c: &mut Client, sql: &str) -> i64 {
    int(&all_rows(&run(c, sql))[0][0])
}

/// Proves a lookup by an indexed column reads a handful of pages on a 20,000-row heap and
/// clustered table (unique index: one row; not unique: its 20 rows, one lookup each),
/// while the same predicate made opaque reads the table, and the answers agree.
#[test]
fn lookups_read_a_handful_of_pages() {
    let s = Server::start("ixseek-io", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE ix");
    run(
        &mut c,
        "USE ix; CREATE TABLE h (id INT NOT NULL, v INT NOT NULL, pad CHAR(100) NOT NULL); \
         CREATE TABLE c (id INT NOT NULL PRIMARY KEY, v INT NOT NULL, w INT NOT NULL, \
            pad CHAR(100) NOT NULL); \
         SET NOCOUNT ON; DECLARE @i INT = 0; BEGIN TRAN; \
         WHILE @i < 20000 BEGIN INSERT INTO h VALUES (@i, @i % 1000, 'h'); \
            INSERT INTO c VALUES (@i, @i % 1000, 20000 - @i, 'c'); SET @i += 1; END; COMMIT; \
         CREATE INDEX ih ON h (v); CREATE INDEX ic ON c (v); CREATE UNIQUE INDEX uw ON c (w); \
         SET STATISTICS IO ON",
    );
    for (seek, scan) in [
        (
            "SELECT COUNT(*), SUM(id) FROM h WHERE v = 7",
            "SELECT COUNT(*), SUM(id) FROM h WHERE NOT (NOT (v = 7))",
        ),
        (
            "SELECT COUNT(*), SUM(id) FROM c WHERE v = 7",
            "SELECT COUNT(*), SUM(id) FROM c WHERE NOT (NOT (v = 7))",
        ),
        (
            "SELECT id, pad FROM c WHERE w = 12345",
            "SELECT id, pad FROM c WHERE NOT (NOT (w = 12345))",
        ),
    ] {
        let (a, b) = (run(&mut c, seek), run(&mut c, scan));
        assert_eq!(all_rows(&a), all_rows(&b), "{seek}");
        let (seek_reads, scan_reads) = (scans_and_reads(&a)[0].1, scans_and_reads(&b)[0].1);
        assert!(seek_reads <= 70, "{seek}: {seek_reads} pages");
        assert!(scan_reads > 250, "{scan}: {scan_reads} pages");
    }
    assert_eq!(
        all_rows(&run(&mut c, "SELECT id FROM c WHERE w = 12345")),
        vec![vec![Value::Int(7655)]]
    );
    // UPDATE and DELETE through the index change exactly the rows it names.
    run(&mut c, "UPDATE h SET v = v + 5000 WHERE v = 3");
    assert_eq!(count(&mut c, "SELECT COUNT(*) FROM h WHERE v = 5003"), 20);
    assert_eq!(count(&mut c, "SELECT COUNT(*) FROM h WHERE v = 3"), 0);
    run(&mut c, "DELETE FROM c WHERE v IN (4, 5) AND id < 10000");
    assert_eq!(
        count(&mut c, "SELECT COUNT(*) FROM c WHERE v IN (4, 5)"),
        20
    );
    assert_eq!(count(&mut c, "SELECT COUNT(*) FROM c"), 19980);
    assert_checkdb_clean(&mut c, "ix", "after changes through index seeks");
}

/// A conjunct on column `col` of the differential tables (values -5 to 45, NULL among
/// them, compared as SQL Server compares: inexact values, IN lists, BETWEEN).
fn conjunct(r: &mut Rng, col: &str) -> String {
    let mut v = || match r.below(10) {
        0 => "NULL".to_string(),
        1 => format!("{}.5", r.below(40)),
        _ => (r.below(50) as i64 - 5).to_string(),
    };
    let (a, b) = (v(), v());
    match r.below(7) {
        0 | 1 => format!("{col} = {a}"),
        2 => format!("{col} < {a}"),
        3 => format!("{col} >= {a}"),
        4 => format!("{col} BETWEEN {a} AND {b}"),
        5 => format!("{col} IN ({a}, {b}, 7)"),
        _ => format!("{a} > {col}"),
    }
}

fn outcome(c: &mut Client, sql: &str) -> (Vec<Vec<Value>>, u64) {
    let r = run(c, sql);
    (all_rows(&r), scans_and_reads(&r).iter().map(|x| x.1).sum())
}

/// Proves seek and scan agree over 400 generated predicates on indexed columns of a heap
/// and of a clustered table (a unique index on one column, a two-column index, an index
/// on a nullable column), for SELECT and for what UPDATE (moving index keys) and DELETE
/// leave, and that most of them read fewer pages through the index.
#[test]
fn index_seek_and_scan_agree_on_generated_predicates() {
    let s = Server::start("ixseek-diff", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE dif");
    run(
        &mut c,
        "USE dif; \
         CREATE TABLE h (id INT NOT NULL, a INT NOT NULL, b INT NULL, u INT NOT NULL, \
            pad CHAR(200) NOT NULL DEFAULT 'h'); \
         CREATE TABLE c (id INT NOT NULL PRIMARY KEY, a INT NOT NULL, b INT NULL, \
            u INT NOT NULL, pad CHAR(200) NOT NULL DEFAULT 'c'); \
         SET NOCOUNT ON; DECLARE @i INT = 0; BEGIN TRAN; \
         WHILE @i < 2000 BEGIN \
            INSERT INTO h (id, a, b, u) VALUES (@i, @i % 40, NULLIF(@i % 37, 3), @i * 3); \
            INSERT INTO c (id, a, b, u) VALUES (@i, @i % 40, NULLIF(@i % 37, 3), @i * 3); \
            SET @i += 1; END; COMMIT; \
         CREATE INDEX h_ab ON h (a, b); CREATE UNIQUE INDEX h_u ON h (u) INCLUDE (a); \
         CREATE INDEX h_b ON h (b); \
         CREATE INDEX c_ab ON c (a, b); CREATE UNIQUE INDEX c_u ON c (u); \
         CREATE INDEX c_b ON c (b) INCLUDE (pad); \
         SET STATISTICS IO ON",
    );
    let mut rng = Rng(0x1dea_5eed);
    let (mut fewer, mut total) = (0, 0);
    for i in 0..400 {
        let t = ["h", "c"][i % 2];
        let first = ["a", "b", "u"][rng.below(3) as usize];
        let mut parts = vec![conjunct(&mut rng, first)];
        if rng.below(2) == 0 {
            let second = ["a", "b", "id"][rng.below(3) as usize];
            parts.push(conjunct(&mut rng, second));
        }
        let w = parts.join(" AND ");
        let statement = |w: &str| match i / 2 % 3 {
            0 => format!("SELECT id, a, b, u FROM {t} WHERE {w} ORDER BY id"),
            1 => format!(
                "BEGIN TRAN; UPDATE {t} SET a = a + 1, b = u % 41 WHERE {w}; \
                 SELECT id, a, b, u FROM {t} ORDER BY id; ROLLBACK"
            ),
            _ => format!(
                "BEGIN TRAN; DELETE FROM {t} WHERE {w}; \
                 SELECT COUNT(*), SUM(id) FROM {t}; ROLLBACK"
            ),
        };
        let (sought, seek_reads) = outcome(&mut c, &statement(&w));
        let (scanned, scan_reads) = outcome(&mut c, &statement(&format!("NOT (NOT ({w}))")));
        assert_eq!(sought, scanned, "predicate {i} on {t}: {w}");
        total += 1;
        fewer += usize::from(seek_reads < scan_reads);
    }
    assert!(
        fewer * 2 > total,
        "only {fewer} of {total} predicates sought"
    );
    assert_checkdb_clean(&mut c, "dif", "after the generated statements");
}

/// Runs `sql` on its own connection in a thread; the receiver gets its first column's
/// integers once it finishes.
fn in_background(addr: &str, sql: &'static str) -> mpsc::Receiver<Vec<i64>> {
    let (tx, rx) = mpsc::channel();
    let mut c = connect_at(addr, Some("mv"), 60).unwrap();
    std::thread::spawn(move || {
        let r = run(&mut c, sql);
        tx.send(all_rows(&r).iter().map(|r| int(&r[0])).collect())
            .unwrap();
    });
    rx
}

/// Proves a locked read through an index waits for a row another open transaction moved
/// off or onto the key it seeks (READ COMMITTED), and then answers as of that
/// transaction's end: the row is back after a rollback, gone after a commit; a NOLOCK
/// read does not wait.
#[test]
fn a_read_through_an_index_waits_for_a_moved_row() {
    let s = Server::start("ixseek-wait", &[]);
    let mut a = s.connect();
    run(&mut a, "CREATE DATABASE mv");
    run(
        &mut a,
        "USE mv; CREATE TABLE t (k INT NOT NULL PRIMARY KEY, v INT NOT NULL); \
         CREATE TABLE h (k INT NOT NULL, v INT NOT NULL); \
         INSERT INTO t VALUES (1, 10), (2, 20), (3, 30); \
         INSERT INTO h VALUES (1, 10), (2, 20), (3, 30); \
         CREATE INDEX tv ON t (v); CREATE INDEX hv ON h (v)",
    );
    for table in ["t", "h"] {
        for commit in [false, true] {
            run(
                &mut a,
                &format!("BEGIN TRAN; UPDATE {table} SET v = 25 WHERE k = 1"),
            );
            let (old, new): (&'static str, &'static str) = match table {
                "t" => (
                    "SELECT k FROM t WHERE v = 10",
                    "SELECT k FROM t WHERE v BETWEEN 21 AND 29",
                ),
                _ => (
                    "SELECT k FROM h WHERE v = 10",
                    "SELECT k FROM h WHERE v BETWEEN 21 AND 29",
                ),
            };
            let (old_rx, new_rx) = (in_background(&s.addr, old), in_background(&s.addr, new));
            let wait = Duration::from_millis(700);
            assert!(old_rx.recv_timeout(wait).is_err(), "{old} did not wait");
            assert!(new_rx.recv_timeout(wait).is_err(), "{new} did not wait");
            let mut n = connect_at(&s.addr, Some("mv"), 30).unwrap();
            let dirty = format!("SELECT k FROM {table} WITH (NOLOCK) WHERE v = 25");
            assert_eq!(all_rows(&run(&mut n, &dirty)), vec![vec![Value::Int(1)]]);
            run(&mut a, if commit { "COMMIT" } else { "ROLLBACK" });
            let got = Duration::from_secs(20);
            let (o, w) = (
                old_rx.recv_timeout(got).unwrap(),
                new_rx.recv_timeout(got).unwrap(),
            );
            match commit {
                false => assert_eq!((o, w), (vec![1], vec![]), "{table} rolled back"),
                true => assert_eq!((o, w), (vec![], vec![1]), "{table} committed"),
            }
            if commit {
                run(&mut a, &format!("UPDATE {table} SET v = 10 WHERE k = 1"));
            }
        }
    }
    assert_checkdb_clean(&mut a, "mv", "after the waits");
}

/// Proves readers through an index beside writers that move keys never see a row twice
/// and never miss a row whose move rolls back: four writers move rows of a 200-row table
/// off their keys and back, rolling every move back, or move rows of a second range for
/// good, while four readers count each key of the first range through the index (always
/// exactly one) and list keys of the second (never a row twice). The writers find their
/// row by key (the heap through a unique index), so each locks that row only.
#[test]
fn readers_beside_key_moves_see_each_row_once() {
    let s = Server::start("ixseek-churn", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE mv");
    run(
        &mut c,
        "USE mv; CREATE TABLE t (k INT NOT NULL PRIMARY KEY, v INT NOT NULL, g INT NOT NULL); \
         CREATE TABLE h (k INT NOT NULL, v INT NOT NULL, g INT NOT NULL); \
         SET NOCOUNT ON; DECLARE @i INT = 0; \
         WHILE @i < 200 BEGIN INSERT INTO t VALUES (@i, @i, @i % 10); \
            INSERT INTO h VALUES (@i, @i, @i % 10); SET @i += 1; END; \
         CREATE INDEX tv ON t (v); CREATE INDEX tg ON t (g); \
         CREATE INDEX hv ON h (v); CREATE INDEX hg ON h (g); CREATE UNIQUE INDEX hk ON h (k)",
    );
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (addr, stop) = (s.addr.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut c = connect_at(&addr, Some("mv"), 60).unwrap();
                let mut rng = Rng(0xabc + w);
                let mut moves = 0;
                while !stop.load(Ordering::SeqCst) || moves < 20 {
                    let t = ["t", "h"][rng.below(2) as usize];
                    let k = rng.below(100) * 2 + w % 2;
                    let sql = match rng.below(2) {
                        0 => format!(
                            "BEGIN TRAN; UPDATE {t} SET v = v + 100000 WHERE k = {k}; \
                             UPDATE {t} SET v = v - 50000 WHERE k = {k}; ROLLBACK"
                        ),
                        _ => format!("UPDATE {t} SET g = (g + 1) % 10 WHERE k = {k}"),
                    };
                    run(&mut c, &sql);
                    moves += 1;
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..4)
        .map(|r| {
            let (addr, stop) = (s.addr.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut c = connect_at(&addr, Some("mv"), 60).unwrap();
                let mut rng = Rng(0x5eed + r);
                for _ in 0..150 {
                    let t = ["t", "h"][rng.below(2) as usize];
                    let v = rng.below(200);
                    let n = count(&mut c, &format!("SELECT COUNT(*) FROM {t} WHERE v = {v}"));
                    assert_eq!(n, 1, "{t}: key {v} read {n} times");
                    let g = rng.below(10);
                    let r = run(&mut c, &format!("SELECT k FROM {t} WHERE g = {g}"));
                    let mut ks: Vec<i64> = all_rows(&r).iter().map(|r| int(&r[0])).collect();
                    let all = ks.len();
                    ks.sort_unstable();
                    ks.dedup();
                    assert_eq!(ks.len(), all, "{t}: a row read twice through g = {g}");
                }
                stop.store(true, Ordering::SeqCst);
            })
        })
        .collect();
    for h in readers.into_iter().chain(writers) {
        h.join().unwrap();
    }
    for t in ["t", "h"] {
        let all = count(&mut c, &format!("SELECT COUNT(*) FROM {t}"));
        let by_g = count(
            &mut c,
            &format!("SELECT COUNT(*) FROM {t} WHERE g BETWEEN 0 AND 9"),
        );
        assert_eq!((all, by_g), (200, 200), "{t}");
    }
    assert_checkdb_clean(&mut c, "mv", "after the churn");
}

/// A row comes back once through an index that holds a ghost beside its live record at
/// one key (storage lookup.rs invariant 3): after an UPDATE of an INCLUDE column, after a
/// row deleted and inserted again in one transaction, and across a committed key change
/// read by a range over both keys; it came back twice (a seek of 10 rows gave 20). Two
/// sessions read while a third updates the INCLUDE column over and over.
#[test]
fn a_ghost_beside_its_live_record_gives_the_row_once() {
    let s = Server::start("ixs-ghost", &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "CREATE DATABASE ig; USE ig; \
         CREATE TABLE q (id INT PRIMARY KEY, a INT, b INT, pad CHAR(200)); \
         SET NOCOUNT ON; DECLARE @i INT = 0; BEGIN TRAN; WHILE @i < 5000 BEGIN \
         INSERT INTO q VALUES (@i, @i % 500, @i % 7, 'x'); SET @i += 1; END; COMMIT; \
         CREATE INDEX ix_qa ON q (a) INCLUDE (b); CREATE UNIQUE INDEX ux_id ON q (id) INCLUDE (b)",
    );
    let both = |c: &mut Client, pred: &str| {
        (
            count(c, &format!("SELECT COUNT(*) FROM q WHERE {pred}")),
            count(
                c,
                &format!("SELECT COUNT(*) FROM q WHERE NOT (NOT ({pred}))"),
            ),
        )
    };
    run(&mut c, "UPDATE q SET b = b + 1000 WHERE a = 17");
    assert_eq!(both(&mut c, "a = 17"), (10, 10));
    assert_eq!(both(&mut c, "id BETWEEN 10 AND 30"), (21, 21));
    run(
        &mut c,
        "BEGIN TRAN; DELETE FROM q WHERE id = 18; \
         INSERT INTO q VALUES (18, 18, 4, 'x'); COMMIT",
    );
    assert_eq!(both(&mut c, "a = 18"), (10, 10));
    run(&mut c, "UPDATE q SET a = 20 WHERE a = 19");
    assert_eq!(both(&mut c, "a BETWEEN 19 AND 20"), (20, 20));
    assert_checkdb_clean(&mut c, "ig", "after the updates");

    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (addr, stop) = (s.addr.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut w = connect_at(&addr, Some("ig"), 60).unwrap();
            while !stop.load(Ordering::Relaxed) {
                run(&mut w, "UPDATE q SET b = b + 1 WHERE a IN (30, 31)");
            }
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let addr = s.addr.clone();
            std::thread::spawn(move || {
                let mut r = connect_at(&addr, Some("ig"), 60).unwrap();
                for _ in 0..50 {
                    assert_eq!(count(&mut r, "SELECT COUNT(*) FROM q WHERE a = 30"), 10);
                    assert_eq!(
                        count(&mut r, "SELECT COUNT(*) FROM q WHERE id BETWEEN 30 AND 531"),
                        502
                    );
                }
            })
        })
        .collect();
    for r in readers {
        r.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
}
