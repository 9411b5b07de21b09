//! Recovery's memory is bounded whatever the log's size (log_writer.rs invariant 6,
//! recovery.rs invariant 4): a database whose log since the checkpoint holds more than 64 MB
//! of committed updates to one row is reopened, and a counting global allocator shows the
//! peak of live heap bytes during the open stays under 16 MB. Likewise when the updates are
//! one transaction the crash left open: undo reads its records back from the log instead of
//! keeping them from the analysis.
//!
//! The tests take turns (`ONE_AT_A_TIME`), so nothing else allocates while one measures.

mod common;
use common::{ctx, file, spec, Quiet};

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use extentdb_format::catalog::{ColumnEntry, TableEntry};
use extentdb_format::file_header::FileType;
use extentdb_format::record::{self, ColumnLayout};
use extentdb_storage::Database;

/// System's allocator, counting the bytes live now and the most live since `reset_peak`.
struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn added(bytes: usize) {
    let now = CURRENT.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            added(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            added(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
            added(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Held by each test for its whole run: one measures at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The live bytes now, after making that the peak too.
fn reset_peak() -> usize {
    let now = CURRENT.load(Ordering::Relaxed);
    PEAK.store(now, Ordering::Relaxed);
    now
}

fn table() -> TableEntry {
    TableEntry {
        object_id: 0,
        schema_name: "dbo".into(),
        name: "One".into(),
        created_us: 0,
        data_space_id: 1,
        allocation_unit_id: 0,
        index_id: 0,
        root_page: extentdb_format::PageId::NULL,
        primary_key: None,
        columns: vec![ColumnEntry {
            column_id: 1,
            name: "c".into(),
            system_type_id: 175,
            max_length: 4000,
            precision: 0,
            scale: 0,
            is_nullable: false,
            identity: None,
            default_sql: String::new(),
            computed: None,
        }],
        identity_last: Default::default(),
        lock_escalation: Default::default(),
        pending_ddl: None,
        index_of: None,
        checks: Vec::new(),
        foreign_keys: Vec::new(),
        is_disabled: false,
    }
}

/// A 4,000-byte row of noise (so the log cannot compress it away) led by its number.
fn row(i: u32) -> Vec<u8> {
    let mut x = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut v: Vec<u8> = (0..4000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    v[..4].copy_from_slice(&i.to_le_bytes());
    record::encode(&[ColumnLayout::Fixed(4000)], &[Some(&v)]).unwrap()
}

/// Proves recovery streams the log: 9,000 committed updates of one 4 KB row (over 64 MB of
/// log after the checkpoint, a few pages touched) are redone with under 16 MB live at peak.
#[test]
fn recovery_of_a_large_log_holds_a_bounded_buffer() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = common::fresh_dir("recovery-memory");
    let fs = extentdb_io::os::OsFileSystem::new();
    let mut s = spec("Big", &dir);
    // 160 MB of log: nothing makes room by a checkpoint while the updates run.
    s.files[1] = file("Big_log", dir.join("Big_log.ldf"), FileType::Log, 20_480);
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &s).unwrap();
    let t = db.create_table(table()).unwrap();
    let x = db.begin_xact();
    let rid = db
        .now(|d| d.insert_row(x, t, (&row(0), d.growth_env()), None))
        .unwrap();
    db.commit_xact(x).unwrap();
    db.checkpoint().unwrap();
    let updates = 9_000u32;
    let mut last = None;
    for i in 1..=updates {
        let x = db.begin_xact();
        db.now(|d| d.update_row_at(x, t, (rid, &row(i - 1)), (&row(i), d.growth_env()), None))
            .unwrap();
        last = db.commit_xact(x).unwrap();
    }
    db.wal().unwrap().flush(last.unwrap()).unwrap();
    // A crash: no checkpoint at close, so recovery reads every update back.
    drop(db);

    let before = reset_peak();
    let db = Database::open(fs.as_ref(), &dir.join("Big.mdf")).unwrap();
    let peak = PEAK.load(Ordering::Relaxed) - before;
    let stats = db.recovery_stats().unwrap().clone();
    eprintln!(
        "recovery: {} records, {} MB of log, peak {:.1} MB live above the {:.1} MB before",
        stats.records,
        stats.log_bytes >> 20,
        peak as f64 / (1 << 20) as f64,
        before as f64 / (1 << 20) as f64
    );
    assert!(
        stats.log_bytes > 64 << 20,
        "{} bytes of log",
        stats.log_bytes
    );
    assert!(stats.redone as u32 >= updates, "{} redone", stats.redone);
    assert!(peak < 16 << 20, "recovery peaked at {peak} bytes live");
    assert_eq!(db.scan_rows(t).unwrap(), vec![(rid, row(updates))]);
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proves undo of a large loser reads its records from the log: one transaction of 9,000
/// updates of a 4 KB row (over 64 MB of log, redo and undo actions of 4 KB each) open at the
/// crash is rolled back by recovery with under 16 MB live at peak, leaving the row as
/// committed before it.
#[test]
fn recovery_of_a_large_open_transaction_holds_a_bounded_buffer() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = common::fresh_dir("recovery-undo");
    let fs = extentdb_io::os::OsFileSystem::new();
    let mut s = spec("Loser", &dir);
    // 160 MB of log: the updates, the space kept for their compensations, and those.
    s.files[1] = file(
        "Loser_log",
        dir.join("Loser_log.ldf"),
        FileType::Log,
        20_480,
    );
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &s).unwrap();
    let t = db.create_table(table()).unwrap();
    let x = db.begin_xact();
    let rid = db
        .now(|d| d.insert_row(x, t, (&row(0), d.growth_env()), None))
        .unwrap();
    let lsn = db.commit_xact(x).unwrap().unwrap();
    db.wal().unwrap().flush(lsn).unwrap();
    db.checkpoint().unwrap();
    let updates = 9_000u32;
    let x = db.begin_xact();
    for i in 1..=updates {
        db.now(|d| d.update_row_at(x, t, (rid, &row(i - 1)), (&row(i), d.growth_env()), None))
            .unwrap();
    }
    let everything = extentdb_format::Lsn {
        vlf_sequence: u32::MAX,
        block: u32::MAX,
        slot: u16::MAX,
    };
    db.wal().unwrap().flush(everything).unwrap();
    // A crash with the transaction open.
    drop(db);

    let before = reset_peak();
    let db = Database::open(fs.as_ref(), &dir.join("Loser.mdf")).unwrap();
    let peak = PEAK.load(Ordering::Relaxed) - before;
    let stats = db.recovery_stats().unwrap().clone();
    eprintln!(
        "recovery: {} records, {} MB of log, {} rolled back, peak {:.1} MB live above the \
         {:.1} MB before",
        stats.records,
        stats.log_bytes >> 20,
        stats.rolled_back,
        peak as f64 / (1 << 20) as f64,
        before as f64 / (1 << 20) as f64
    );
    assert!(
        stats.log_bytes > 64 << 20,
        "{} bytes of log",
        stats.log_bytes
    );
    assert_eq!(stats.rolled_back, 1);
    assert!(peak < 16 << 20, "recovery peaked at {peak} bytes live");
    assert_eq!(db.scan_rows(t).unwrap(), vec![(rid, row(0))]);
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}
