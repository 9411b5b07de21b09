//! The heap's pages against the PFS: a page taken whose format never reached the log.

use std::path::Path;

use extentdb_format::catalog::{ColumnEntry, RecoveryModel, TableEntry};
use extentdb_format::file_header::FileType;
use extentdb_format::record::{self, ColumnLayout};
use extentdb_format::PageId;
use extentdb_io::sim::{Faults, SimFileSystem};

use crate::check_db::{check_database, CheckOptions};
use crate::database::{NewDatabase, NewFile, OpContext};
use crate::file_init::{InitLog, InitPolicy};
use crate::Database;

struct Quiet;
impl InitLog for Quiet {
    fn log(&self, _: &str) {}
}

fn new_file(name: &str, t: FileType, size_pages: u32) -> NewFile {
    NewFile {
        name: name.into(),
        physical_name: Path::new("/sim").join(name),
        file_type: t,
        filegroup: "PRIMARY".into(),
        size_pages,
        max_size_pages: -1,
        growth: 128,
        is_percent_growth: false,
    }
}

pub(crate) fn new_db(fs: &SimFileSystem) -> Database {
    let spec = NewDatabase {
        name: "Gap".into(),
        database_id: 5,
        recovery_model: RecoveryModel::Full,
        files: vec![
            new_file("Gap.mdf", FileType::Rows, 640),
            new_file("Gap_log.ldf", FileType::Log, 512),
        ],
        filegroups: vec![],
    };
    let ctx = OpContext {
        fs,
        policy: InitPolicy {
            instant: true,
            trace_zeroing: false,
        },
        log: &Quiet,
    };
    Database::create(&ctx, &spec).unwrap()
}

/// A heap (k INT, v VARBINARY(8000)).
fn heap() -> TableEntry {
    let col = |id: u16, name: &str, ty: u8, len: i16| ColumnEntry {
        column_id: id,
        name: name.into(),
        system_type_id: ty,
        max_length: len,
        precision: 0,
        scale: 0,
        is_nullable: id != 1,
        identity: None,
        default_sql: String::new(),
        computed: None,
    };
    TableEntry {
        object_id: 0,
        schema_name: "dbo".into(),
        name: "H".into(),
        created_us: 0,
        data_space_id: 1,
        allocation_unit_id: 0,
        index_id: 0,
        root_page: PageId::NULL,
        primary_key: None,
        columns: vec![col(1, "k", 56, 4), col(2, "v", 165, 8000)],
        identity_last: Default::default(),
        lock_escalation: Default::default(),
        pending_ddl: None,
        index_of: None,
        checks: Vec::new(),
        foreign_keys: Vec::new(),
        is_disabled: false,
    }
}

/// A row of 5,000 bytes: one per page.
fn big_row(k: u32) -> Vec<u8> {
    let lay = [ColumnLayout::Fixed(4), ColumnLayout::Variable];
    record::encode(&lay, &[Some(&k.to_le_bytes()), Some(&[7u8; 5000])]).unwrap()
}

fn insert_committed(db: &mut Database, t: u32, keys: std::ops::Range<u32>) {
    let x = db.begin_xact();
    for k in keys {
        db.now(|d| d.insert_row(x, t, (&big_row(k), d.growth_env()), None))
            .unwrap();
    }
    let lsn = db.commit_xact(x).unwrap().unwrap();
    db.wal().unwrap().flush(lsn).unwrap();
}

fn assert_clean(db: &Database, when: &str) {
    let src = db.check_source().unwrap();
    let opts = CheckOptions {
        maxdop: 1,
        ..Default::default()
    };
    let r = check_database(&src, &opts).unwrap();
    assert!(r.findings.is_empty(), "{when}: {:?}", r.findings);
}

/// Proves a page a heap took whose format never reached the log (an insert failing on a
/// full log between taking the page and logging its format, as `insert_target` can) is no
/// damage: the PFS never called it allocated, so CHECKDB is clean before and after a crash
/// although pages in use follow it in its extent, and every row reads back. The old check
/// judged by the page's bytes and reported it as a zeroed page (8909).
#[test]
fn a_page_taken_whose_format_never_got_logged_is_no_damage() {
    let fs = SimFileSystem::new(11, Faults::default());
    let mut db = new_db(&fs);
    let t = db.create_table(heap()).unwrap();
    insert_committed(&mut db, t, 0..2);
    let entry = db.table_by_id(t).cloned().unwrap();
    let gap = db.take_page(&entry).unwrap();
    insert_committed(&mut db, t, 2..4);
    let after_gap = db.scan_rows(t).unwrap().iter().any(|((p, _), _)| {
        p.file == gap.file && p.page.0 > gap.page.0 && p.page.0 / 8 == gap.page.0 / 8
    });
    assert!(after_gap, "pages in use follow the gap in its extent");
    assert!(
        !db.page_allocated(gap).unwrap(),
        "the gap is free in the PFS"
    );
    db.checkpoint().unwrap();
    assert_clean(&db, "before the crash");
    drop(db);
    fs.crash();
    let mut db = Database::open(&fs, Path::new("/sim/Gap.mdf")).unwrap();
    assert_eq!(db.scan_rows(t).unwrap().len(), 4);
    assert_clean(&db, "after the crash");
    insert_committed(&mut db, t, 4..6);
    assert_eq!(db.scan_rows(t).unwrap().len(), 6);
    assert_clean(&db, "after more inserts");
}

/// Proves every catalog change gives the catalog a number it never had, and two databases
/// never share one (database.rs `catalog_version`, which sessions' resolved tables rely
/// on): CREATE, TRUNCATE and DROP TABLE each change it, reading does not, and another
/// database's numbers are its own.
#[test]
fn every_catalog_change_takes_a_new_catalog_version() {
    let fs = SimFileSystem::new(12, Faults::default());
    let mut db = new_db(&fs);
    let other = new_db(&SimFileSystem::new(13, Faults::default()));
    let mut seen = vec![db.catalog_version(), other.catalog_version()];
    let mut fresh = |v: u64| {
        assert!(!seen.contains(&v), "version {v} seen before");
        seen.push(v);
    };
    let t = db.create_table(heap()).unwrap();
    fresh(db.catalog_version());
    let before = db.catalog_version();
    assert!(db.table("dbo", "H").is_some());
    assert_eq!(db.catalog_version(), before, "reading changes nothing");
    db.truncate_table(t).unwrap();
    fresh(db.catalog_version());
    db.drop_table(t).unwrap();
    fresh(db.catalog_version());
    let again = db.create_table(heap()).unwrap();
    assert!(db.table_by_id(again).is_some());
    fresh(db.catalog_version());
}
