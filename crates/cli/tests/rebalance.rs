//! ALTER DATABASE ... MODIFY FILEGROUP ... REBALANCE, online: one session rebalances a
//! filegroup after a new file joined it full, while a second session inserts rows and
//! watches sys.dm_exec_requests.percent_complete rise. Afterwards every row is there and
//! the files' used fractions are within one growth increment of each other.

use std::sync::Arc;

use extentdb_io::os::OsFileSystem;
use extentdb_io::FileSystem;
use extentdb_sql::exec::{Engine, Output, Session};
use extentdb_sql::types::Value;
use extentdb_storage::config::InstanceConfig;
use extentdb_storage::instance::SetupOptions;
use extentdb_storage::Instance;

/// Runs a batch; panics on an error message; returns the rows of its result sets.
fn run(s: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for o in s.execute(sql) {
        match o {
            Output::Error(e) => panic!("{sql}: Msg {} {}", e.number, e.text),
            Output::Rows { rows: r, .. } => rows.extend(r),
            _ => {}
        }
    }
    rows
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i as i64,
        Value::BigInt(i) => *i,
        Value::SmallInt(i) => *i as i64,
        other => panic!("not an integer: {other:?}"),
    }
}

/// Proves REBALANCE moves extents into the new file while another session inserts and
/// reads its progress, and ends balanced with every row present.
#[test]
fn rebalance_runs_online_with_progress() {
    let dir = std::env::temp_dir().join(format!("xdb-rebalance-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let fs: Arc<dyn FileSystem> = OsFileSystem::new();
    Instance::setup(
        fs.clone(),
        &dir,
        SetupOptions {
            config: InstanceConfig::defaults(&dir),
            sa_password: None,
        },
    )
    .unwrap();
    let engine = Engine::new(Arc::new(Instance::start(fs, &dir, &[]).unwrap()));
    let mut a = engine.session();
    run(
        &mut a,
        "CREATE DATABASE R ON PRIMARY (NAME = R1, FILENAME = 'R1.mdf', SIZE = 64MB, FILEGROWTH = 1MB), \
         (NAME = R2, FILENAME = 'R2.ndf', SIZE = 64MB, FILEGROWTH = 1MB) \
         LOG ON (NAME = R_log, FILENAME = 'R_log.ldf', SIZE = 64MB);",
    );
    run(
        &mut a,
        "USE R; CREATE TABLE T (c1 INT IDENTITY, c2 CHAR(8000) DEFAULT 'r'); \
         SET NOCOUNT ON; DECLARE @i INT = 0; BEGIN TRAN; \
         WHILE @i < 12800 BEGIN INSERT T DEFAULT VALUES; SET @i += 1; END; COMMIT; \
         ALTER DATABASE R ADD FILE (NAME = R3, FILENAME = 'R3.ndf', SIZE = 128MB, FILEGROWTH = 1MB);",
    );
    let mut b = engine.session();
    run(&mut b, "USE R; SET NOCOUNT ON;");
    let worker = std::thread::spawn(move || {
        run(
            &mut a,
            "ALTER DATABASE R MODIFY FILEGROUP [PRIMARY] REBALANCE;",
        );
        a
    });
    // Inserts made after progress strictly between 0 and 100 was seen: made while the
    // rebalance was under way.
    let (mut inserted, mut seen, mut during) = (0, Vec::new(), 0);
    while !worker.is_finished() {
        run(&mut b, "INSERT T DEFAULT VALUES;");
        inserted += 1;
        if seen.iter().any(|&p: &f32| p > 0.0 && p < 100.0) {
            during += 1;
        }
        for r in run(
            &mut b,
            "SELECT percent_complete FROM sys.dm_exec_requests WHERE command = 'ALTER DATABASE';",
        ) {
            if let Value::Real(p) = r[0] {
                seen.push(p);
            }
        }
    }
    worker.join().unwrap();
    eprintln!("{inserted} inserts meanwhile, {during} of them mid-rebalance");
    assert!(
        during >= 1,
        "the second session inserted while the rebalance was under way: {inserted} inserts, progress {seen:?}"
    );
    assert!(
        seen.iter().any(|&p| p > 0.0 && p < 100.0),
        "progress seen: {seen:?}"
    );
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]),
        "progress never goes back"
    );
    let count = run(&mut b, "SELECT COUNT(*) FROM T;");
    assert_eq!(int(&count[0][0]), 12800 + inserted);
    let usage = run(
        &mut b,
        "SELECT file_id, total_page_count, allocated_extent_page_count FROM sys.dm_db_file_space_usage ORDER BY file_id;",
    );
    let fractions: Vec<f64> = usage
        .iter()
        .map(|r| int(&r[2]) as f64 / int(&r[1]) as f64)
        .collect();
    let spread = fractions.iter().cloned().fold(0.0, f64::max)
        - fractions.iter().cloned().fold(1.0, f64::min);
    // One growth increment: 1 MB of the smallest file, 64 MB.
    assert!(spread <= 1.0 / 64.0 + 0.02, "used fractions {fractions:?}");
    assert!(
        int(&usage[2][2]) > 4000,
        "the new file took data: {usage:?}"
    );
    drop(b);
    std::fs::remove_dir_all(&dir).unwrap();
}
