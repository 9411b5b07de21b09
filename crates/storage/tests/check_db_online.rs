//! CHECKDB's online snapshot (`snapshot`): checks run outside the database's lock while a
//! writer inserts into a heap and a clustered index and online checkpoints write pages to
//! disk under them. Every check must be clean and count exactly the rows present at the
//! instant its view was taken, and the copy-on-write path must have been exercised. A check
//! also stops when cancelled.

mod common;
use common::{ctx, heap_and_tree, row, spec, Quiet};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use extentdb_io::os::OsFileSystem;
use extentdb_storage::check_db::{check_database, CheckOptions};
use extentdb_storage::checkpoint::checkpoint_online;
use extentdb_storage::Database;

/// Proves a check's view is the database at one instant although pages change on disk
/// while it reads: rows counted equal rows inserted when the view was taken, no finding.
#[test]
fn checks_beside_a_writer_see_one_instant() {
    let dir = std::env::temp_dir().join(format!("xdb-check-online-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fs = OsFileSystem::new();
    let mut s = spec("Online", &dir);
    s.files[1].size_pages = 8192;
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &s).unwrap();
    // A small pool: evictions write pages to disk all the time, under the checks' feet.
    db.set_pool_budget(extentdb_storage::buffer_pool::PoolBudget::new(256))
        .unwrap();
    let tables = heap_and_tree(&mut db);
    let db = Arc::new(extentdb_storage::shared::SharedDatabase::new(db));
    let inserted = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));

    let writer = {
        let (db, inserted, stop, tables) =
            (db.clone(), inserted.clone(), stop.clone(), tables.clone());
        std::thread::spawn(move || {
            let mut k = 0u32;
            let mut batches = 0u32;
            while !stop.load(Ordering::Relaxed) && k < 40_000 {
                {
                    let mut g = db.lock_for_tests();
                    let x = g.begin_xact();
                    for _ in 0..20 {
                        let key = k.wrapping_mul(2_654_435_761) % 1_000_003;
                        let v = vec![(k % 251) as u8; 200 + (k as usize * 13) % 500];
                        for &t in &tables {
                            g.now(|d| d.insert_row(x, t, (&row(key, &v), d.growth_env()), None))
                                .unwrap();
                        }
                        k += 1;
                    }
                    g.commit_xact(x).unwrap();
                    inserted.store(k as u64, Ordering::SeqCst);
                }
                batches += 1;
                if batches.is_multiple_of(5) {
                    // Pages go to disk under the checks' feet.
                    checkpoint_online(&db).unwrap();
                }
            }
        })
    };

    let mut checks = 0;
    let mut copied = 0;
    let mut seen = Vec::new();
    while checks < 12 {
        let (src, expected) = {
            let g = db.lock_for_tests();
            (g.check_source().unwrap(), inserted.load(Ordering::SeqCst))
        };
        // Slowed down (a pause per 1 MB read) so the writer changes many pages mid-check.
        let pause = |_: u64, _: u64| std::thread::sleep(std::time::Duration::from_millis(3));
        let opts = CheckOptions {
            maxdop: 2,
            progress: Some(&pause),
            ..Default::default()
        };
        let report = check_database(&src, &opts).unwrap();
        assert!(
            report.findings.is_empty(),
            "check {checks}: {:#?}",
            report.findings
        );
        for o in &report.objects {
            assert_eq!(
                o.rows, expected,
                "check {checks}: rows of {} at the view's instant",
                o.name
            );
        }
        copied += report.copied_on_write;
        seen.push(expected);
        checks += 1;
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    eprintln!("rows at each view: {seen:?}; pages copied on write: {copied}");
    assert!(copied > 50, "writes reached pages the views covered");
    seen.dedup();
    assert!(
        seen.len() > 3,
        "the writer went on between checks: {seen:?}"
    );
    assert!(inserted.load(Ordering::SeqCst) > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proves a check stops when its cancel flag is set (a TDS attention or KILL sets the
/// session's flag): set after the first megabyte, the check ends with `Cancelled` without
/// reading the rest.
#[test]
fn a_check_stops_when_cancelled() {
    let dir = std::env::temp_dir().join(format!("xdb-check-cancel-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fs = OsFileSystem::new();
    let mut s = spec("Cancel", &dir);
    s.files[1].size_pages = 8192;
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &s).unwrap();
    let tables = heap_and_tree(&mut db);
    common::insert_scrambled(&mut db, &tables, 3000);
    let src = db.check_source().unwrap();
    let cancel = AtomicBool::new(false);
    let calls = AtomicU64::new(0);
    let progress = |done: u64, total: u64| {
        calls.fetch_add(1, Ordering::SeqCst);
        assert!(done <= total);
        cancel.store(true, Ordering::SeqCst);
    };
    let opts = CheckOptions {
        maxdop: 1,
        cancel: Some(&cancel),
        progress: Some(&progress),
        ..Default::default()
    };
    match check_database(&src, &opts) {
        Err(extentdb_storage::StorageError::Cancelled) => {}
        other => panic!("expected Cancelled, got {other:?}"),
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "stopped after the first run"
    );
    // Uncancelled, the same view checks clean.
    cancel.store(false, Ordering::SeqCst);
    let opts = CheckOptions {
        maxdop: 1,
        ..Default::default()
    };
    let r = check_database(&src, &opts).unwrap();
    assert!(
        r.findings.is_empty() && r.pages_read > 128,
        "{:?}",
        r.findings
    );
    drop(src);
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}
