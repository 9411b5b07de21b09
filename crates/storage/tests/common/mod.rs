//! Helpers shared by the storage integration tests.
#![allow(dead_code)]

use std::path::Path;

use extentdb_format::catalog::{ColumnEntry, RecoveryModel, TableEntry};
use extentdb_format::file_header::FileType;
use extentdb_format::record::{self, ColumnLayout};
use extentdb_io::FileSystem;
use extentdb_storage::database::OpContext;
use extentdb_storage::file_init::{InitLog, InitPolicy};
use extentdb_storage::{NewDatabase, NewFile};

/// A new instance in `dir` (removed first) on the real file system, with default settings.
pub fn set_up_instance(dir: &Path) -> std::sync::Arc<dyn FileSystem> {
    let _ = std::fs::remove_dir_all(dir);
    let fs: std::sync::Arc<dyn FileSystem> = extentdb_io::os::OsFileSystem::new();
    extentdb_storage::Instance::setup(
        fs.clone(),
        dir,
        extentdb_storage::instance::SetupOptions {
            config: extentdb_storage::config::InstanceConfig::defaults(dir),
            sa_password: Some("x".into()),
        },
    )
    .unwrap();
    fs
}

/// An initialization log that drops every message.
pub struct Quiet;
impl InitLog for Quiet {
    fn log(&self, _: &str) {}
}

/// An operation context on `fs` with IFI on or off and no zeroing trace.
pub fn ctx<'a>(fs: &'a dyn FileSystem, instant: bool, log: &'a dyn InitLog) -> OpContext<'a> {
    OpContext {
        fs,
        policy: InitPolicy {
            instant,
            trace_zeroing: false,
        },
        log,
    }
}

/// A file in PRIMARY growing 1 MB, without a size limit.
pub fn file(name: &str, path: impl AsRef<Path>, t: FileType, size_pages: u32) -> NewFile {
    let path = path.as_ref().to_path_buf();
    NewFile {
        name: name.into(),
        physical_name: path,
        file_type: t,
        filegroup: "PRIMARY".into(),
        size_pages,
        max_size_pages: -1,
        growth: 128,
        is_percent_growth: false,
    }
}

/// A database `name` with a 5 MB data file and a 1 MB log in `root`.
pub fn spec(name: &str, root: &Path) -> NewDatabase {
    NewDatabase {
        name: name.into(),
        database_id: 5,
        recovery_model: RecoveryModel::Full,
        files: vec![
            file(
                &format!("{name}_data"),
                root.join(format!("{name}.mdf")),
                FileType::Rows,
                640,
            ),
            file(
                &format!("{name}_log"),
                root.join(format!("{name}_log.ldf")),
                FileType::Log,
                128,
            ),
        ],
        filegroups: vec![],
    }
}

/// A table (k INT, v VARBINARY(8000)) as the data-path tests use it: a heap, or with
/// `clustered` a PRIMARY KEY CLUSTERED on k.
pub const LAYOUT: [ColumnLayout; 2] = [ColumnLayout::Fixed(4), ColumnLayout::Variable];

pub fn table_entry(clustered: bool) -> TableEntry {
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
        name: "T".into(),
        created_us: 0,
        data_space_id: 1,
        allocation_unit_id: 0,
        index_id: clustered as u8,
        root_page: extentdb_format::PageId::NULL,
        primary_key: clustered.then(|| ("PK_T".to_string(), vec![1])),
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

pub fn row(k: u32, v: &[u8]) -> Vec<u8> {
    record::encode(&LAYOUT, &[Some(&k.to_le_bytes()), Some(v)]).unwrap()
}

/// Creates a heap "Heap" and a clustered table "Tree" (ids in that order).
#[allow(dead_code)]
pub fn heap_and_tree(db: &mut extentdb_storage::Database) -> Vec<u32> {
    let mut tables = Vec::new();
    for (name, clustered) in [("Heap", false), ("Tree", true)] {
        let mut t = table_entry(clustered);
        t.name = name.into();
        tables.push(db.create_table(t).unwrap());
    }
    tables
}

/// Inserts `rows` rows of 300-999 bytes into every table, keys in a scrambled order (so a
/// B-tree splits everywhere), committed 100 at a time and flushed.
#[allow(dead_code)]
pub fn insert_scrambled(db: &mut extentdb_storage::Database, tables: &[u32], rows: u32) {
    for chunk in 0..rows / 100 {
        let x = db.begin_xact();
        for k in chunk * 100..(chunk + 1) * 100 {
            let key = k.wrapping_mul(2_654_435_761) % 1_000_003;
            let v = vec![(k % 251) as u8; 300 + (k as usize * 7) % 700];
            for &t in tables {
                db.now(|d| d.insert_row(x, t, (&row(key, &v), d.growth_env()), None))
                    .unwrap();
            }
        }
        let lsn = db.commit_xact(x).unwrap().unwrap();
        db.wal().unwrap().flush(lsn).unwrap();
    }
}

/// An allocation unit of a new, empty heap in filegroup `data_space_id`. Every unit but
/// the catalog's belongs to a table: one that no table names is a DROP, TRUNCATE or CREATE
/// a crash cut short, and is freed at open (`free_orphan_units`).
pub fn unit(db: &mut extentdb_storage::Database, data_space_id: u16) -> u64 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let mut e = table_entry(false);
    e.name = format!(
        "Unit{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    e.data_space_id = data_space_id;
    let t = db.create_table(e).unwrap();
    db.table_by_id(t).unwrap().allocation_unit_id
}

/// DBCC CHECKALLOC and CHECKDB find nothing (`when` names the moment in the message).
pub fn assert_checkdb_clean(db: &extentdb_storage::Database, when: &str) {
    let alloc = db.check_alloc().unwrap();
    assert!(
        alloc.errors.is_empty(),
        "{when}: CHECKALLOC {:?}",
        alloc.errors
    );
    let check = extentdb_storage::check_db::check_database(
        &db.check_source().unwrap(),
        &extentdb_storage::check_db::CheckOptions {
            maxdop: 1,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(
        check.findings.is_empty(),
        "{when}: CHECKDB {:?}",
        check.findings
    );
}

/// An extent by proportional fill for a session sharing the database (`allocate_by_fill`,
/// with the database's own growth settings); None when the allocation needs it held
/// exclusively (`allocate_extent_by_fill`).
pub fn shared_extent(
    db: &extentdb_storage::Database,
    au: u64,
    ds: u16,
) -> Result<Option<(u16, extentdb_format::ExtentNo)>, extentdb_storage::StorageError> {
    use extentdb_storage::proportional_fill::Allocation;
    Ok(match db.allocate_by_fill(au, ds, db.growth_env())? {
        Allocation::Extent(file_id, e) => Some((file_id, e)),
        _ => None,
    })
}

/// A small xorshift generator: a seed fixes a workload (never 0: it would stay 0).
pub struct Rng(pub u64);

impl Rng {
    /// A value in 0..n.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(self.0 != 0 && n > 0, "a zero seed or an empty range");
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// How many seeds a crash loop runs: the number in environment variable `var`, else
/// `debug` or `release` by how the test was built.
pub fn seed_count(var: &str, debug: u64, release: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) {
            debug
        } else {
            release
        })
}

/// The rows of a `LAYOUT` table as key -> value; a key found twice fails the test.
pub fn table_rows(
    db: &extentdb_storage::Database,
    object_id: u32,
) -> std::collections::BTreeMap<u32, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    for (_, rec) in db.scan_rows(object_id).unwrap() {
        let cols = record::decode(&LAYOUT, &rec).unwrap();
        let k = u32::from_le_bytes(cols[0].unwrap().try_into().unwrap());
        let v = cols[1].unwrap().to_vec();
        assert!(
            out.insert(k, v).is_none(),
            "key {k} twice in table {object_id}"
        );
    }
    out
}

/// A background checkpointer for `db` whose failures are collected, not ignored.
pub fn checkpointer_collecting(
    db: &std::sync::Arc<extentdb_storage::shared::SharedDatabase>,
) -> (
    extentdb_storage::checkpoint::Checkpointer,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    let errors = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let errs = errors.clone();
    let checkpointer = extentdb_storage::checkpoint::Checkpointer::spawn(db, move |name, e| {
        errs.lock()
            .unwrap()
            .push(format!("checkpoint of {name}: {e}"))
    });
    (checkpointer, errors)
}

/// What every session did, once none stopped on an error.
pub fn all_succeeded<O, E: std::fmt::Debug>(results: Vec<(O, Option<E>)>) -> Vec<O> {
    results
        .into_iter()
        .map(|(o, e)| {
            assert!(e.is_none(), "a session failed: {e:?}");
            o
        })
        .collect()
}

/// Closes `db` without a checkpoint once its log is durable (the next open redoes it).
pub fn close_without_checkpoint(db: extentdb_storage::Database) {
    let wal = db.wal().expect("a log writer");
    wal.flush(wal.end_lsn()).unwrap();
    drop(wal);
    drop(db);
}

/// Cuts the power of `fs` once the sessions sharing `db` are done (faults off, unsynced
/// writes dropped or torn) and opens the database at `mdf` again through recovery.
pub fn crash_and_reopen(
    db: std::sync::Arc<extentdb_storage::shared::SharedDatabase>,
    fs: &extentdb_io::sim::SimFileSystem,
    mdf: &Path,
    seed: u64,
) -> extentdb_storage::Database {
    drop(
        std::sync::Arc::into_inner(db)
            .expect("sessions joined")
            .into_inner(),
    );
    fs.set_faults(extentdb_io::sim::Faults::default());
    fs.crash();
    extentdb_storage::Database::open(fs, mdf)
        .unwrap_or_else(|e| panic!("seed {seed}: reopen failed: {e}"))
}

/// An empty directory `xdb-NAME-PID` under the system's temp directory.
pub fn fresh_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("xdb-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Arms `fs` to fail (EIO, the power cut) its I/O `after` I/Os from now.
pub fn cut_after(fs: &extentdb_io::sim::SimFileSystem, after: u64) {
    fs.set_faults(extentdb_io::sim::Faults {
        fail_io_at: Some((fs.io_count() + after, libc::EIO)),
        ..Default::default()
    });
}
