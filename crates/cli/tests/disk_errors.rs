//! What T-SQL sees when the disk fails under a database, run through the SQL engine on the
//! simulated file system (`extentdb_io::sim`), which runs out of space or fails an I/O on
//! demand: a filegroup that cannot grow on a full disk is Msg 1105 naming the filegroup, a
//! log that cannot grow is Msg 9002, each with SQL Server's ERRORLOG lines, the statement
//! changing nothing and the database usable once space is freed; a failed write is Msg 823
//! with the real file and offset, and the database is then SUSPECT in sys.databases.

use std::path::Path;
use std::sync::Arc;

use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_io::FileSystem;
use extentdb_sql::exec::{Engine, Output, Session};
use extentdb_sql::messages::SqlError;
use extentdb_sql::types::Value;
use extentdb_storage::config::InstanceConfig;
use extentdb_storage::instance::SetupOptions;
use extentdb_storage::Instance;

/// An instance whose data files live on a simulated file system (returned to aim faults).
fn instance(tag: &str) -> (Arc<Engine>, Arc<SimFileSystem>, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("xdb-diskerr-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let sim = Arc::new(SimFileSystem::new(7, Faults::default()));
    let fs: Arc<dyn FileSystem> = sim.clone();
    let options = SetupOptions {
        config: InstanceConfig::defaults(&dir),
        sa_password: None,
    };
    Instance::setup(fs.clone(), &dir, options).unwrap();
    let engine = Engine::new(Arc::new(Instance::start(fs, &dir, &[]).unwrap()));
    (engine, sim, dir)
}

/// Bytes every simulated file holds now: a capacity of exactly this is a full disk.
fn used_bytes(sim: &SimFileSystem) -> u64 {
    sim.paths()
        .iter()
        .map(|p| sim.open(p).unwrap().len().unwrap())
        .sum()
}

/// The errors a batch produced.
fn errors(s: &mut Session, sql: &str) -> Vec<SqlError> {
    s.execute(sql)
        .into_iter()
        .filter_map(|o| match o {
            Output::Error(e) => Some(e),
            _ => None,
        })
        .collect()
}

/// Runs a batch that must succeed; returns its rows.
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

fn count(s: &mut Session, table: &str) -> i64 {
    match &run(s, &format!("SELECT COUNT(*) FROM {table}"))[0][0] {
        Value::Int(i) => *i as i64,
        Value::BigInt(i) => *i,
        other => panic!("{other:?}"),
    }
}

fn errorlog(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("log/ERRORLOG")).unwrap()
}

/// sys.databases.state_desc of `name`.
fn state_desc(s: &mut Session, name: &str) -> String {
    let rows = run(
        s,
        &format!("SELECT state_desc FROM sys.databases WHERE name = '{name}'"),
    );
    match &rows[0][0] {
        Value::Text(t) => t.clone(),
        other => panic!("{other:?}"),
    }
}

/// Inserts one 8,000-byte row per statement until one fails; returns (rows in, errors).
fn fill(s: &mut Session, table: &str, limit: usize) -> (usize, Vec<SqlError>) {
    for i in 0..limit {
        let e = errors(s, &format!("INSERT {table} DEFAULT VALUES"));
        if !e.is_empty() {
            return (i, e);
        }
    }
    panic!("{limit} rows went in on a full disk");
}

/// Proves a data file that cannot autogrow on a full disk is SQL Server's 1105 naming the
/// object, database and filegroup (severity 17), with the 5149 and 1105 lines in
/// the ERRORLOG; the failed statement leaves nothing behind and, once space is freed, the
/// same INSERT succeeds (the growth happens then).
#[test]
fn full_disk_autogrowth_is_1105_and_the_database_stays_usable() {
    let (engine, sim, dir) = instance("1105");
    let mut s = engine.session();
    run(
        &mut s,
        "CREATE DATABASE Full1 ON PRIMARY (NAME = F1, FILENAME = 'F1.mdf', SIZE = 5MB, FILEGROWTH = 1MB) \
         LOG ON (NAME = F1_log, FILENAME = 'F1_log.ldf', SIZE = 8MB, FILEGROWTH = 1MB); \
         USE Full1; CREATE TABLE T (c CHAR(8000) DEFAULT 'x');",
    );
    sim.set_faults(Faults {
        capacity_bytes: Some(used_bytes(&sim)),
        ..Default::default()
    });
    let (rows_in, errs) = fill(&mut s, "T", 5_000);
    assert!(rows_in > 100, "the 5 MB file took {rows_in} rows");
    let e = &errs[0];
    assert_eq!((e.number, e.severity, e.state), (1105, 17, 2), "{errs:?}");
    assert_eq!(
        e.text,
        "Could not allocate space for object 'dbo.T' in database 'Full1' because the 'PRIMARY' filegroup is full. Create disk space by deleting unneeded files, dropping objects in the filegroup, adding additional files to the filegroup, or setting autogrowth on for existing files in the filegroup."
    );
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(
        count(&mut s, "T"),
        rows_in as i64,
        "the failed INSERT left a row"
    );
    let log = errorlog(&dir);
    assert!(
        log.contains("Error: 5149, Severity: 16, State: 3."),
        "{log}"
    );
    assert!(
        log.contains("MODIFY FILE encountered operating system error 112(There is not enough space on the disk.) while attempting to expand the physical file '"),
        "{log}"
    );
    assert!(
        log.contains("Error: 1105, Severity: 17, State: 2."),
        "{log}"
    );
    assert!(log.contains("in database 'Full1' because the 'PRIMARY' filegroup is full"));
    assert_eq!(state_desc(&mut s, "Full1"), "ONLINE");
    // Space freed: the same statement grows the file and goes in.
    sim.set_faults(Faults::default());
    run(&mut s, "INSERT T DEFAULT VALUES");
    assert_eq!(count(&mut s, "T"), rows_in as i64 + 1);
    run(&mut s, "DBCC CHECKDB (Full1) WITH NO_INFOMSGS");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proves a log that cannot grow on a full disk is SQL Server's 9002 (severity 17, state
/// 2), never 823, with "Error: 9002, Severity: 17, State: 2." and the 5149 line naming the
/// log file in the ERRORLOG; the transaction can still roll back, and the database takes
/// new work once space is freed.
#[test]
fn full_disk_log_growth_is_9002_with_its_errorlog_line() {
    let (engine, sim, dir) = instance("9002");
    let mut s = engine.session();
    run(
        &mut s,
        "CREATE DATABASE Full2 ON PRIMARY (NAME = F2, FILENAME = 'F2.mdf', SIZE = 64MB, FILEGROWTH = 1MB) \
         LOG ON (NAME = F2_log, FILENAME = 'F2_log.ldf', SIZE = 1MB, FILEGROWTH = 1MB); \
         USE Full2; CREATE TABLE T (c CHAR(8000) DEFAULT 'x');",
    );
    sim.set_faults(Faults {
        capacity_bytes: Some(used_bytes(&sim)),
        ..Default::default()
    });
    run(&mut s, "BEGIN TRAN");
    let (rows_in, errs) = fill(&mut s, "T", 5_000);
    let e = &errs[0];
    assert_eq!((e.number, e.severity, e.state), (9002, 17, 2), "{errs:?}");
    assert!(
        e.text
            .starts_with("The transaction log for database 'Full2' is full due to '"),
        "{}",
        e.text
    );
    let log = errorlog(&dir);
    assert!(
        log.contains("Error: 9002, Severity: 17, State: 2."),
        "{log}"
    );
    assert!(log.contains(&e.text), "{log}");
    assert!(
        log.contains("while attempting to expand the physical file '")
            && log.contains("F2_log.ldf'."),
        "{log}"
    );
    run(&mut s, "ROLLBACK");
    assert_eq!(count(&mut s, "T"), 0, "{rows_in} rolled-back rows remain");
    sim.set_faults(Faults::default());
    run(&mut s, "INSERT T DEFAULT VALUES");
    assert_eq!(count(&mut s, "T"), 1);
    assert_eq!(state_desc(&mut s, "Full2"), "ONLINE");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proves a failed write is Msg 823 naming the real file and the offset the write started
/// at (severity 24), written to the ERRORLOG too, and that the database is then SUSPECT in
/// sys.databases and refuses changes (945).
#[test]
fn failed_write_is_823_with_file_and_offset_and_suspect() {
    let (engine, sim, dir) = instance("823");
    let mut s = engine.session();
    run(
        &mut s,
        "CREATE DATABASE Bad ON PRIMARY (NAME = B1, FILENAME = 'B1.mdf', SIZE = 8MB) \
         LOG ON (NAME = B1_log, FILENAME = 'B1_log.ldf', SIZE = 8MB); \
         USE Bad; CREATE TABLE T (c INT); INSERT T VALUES (1);",
    );
    assert_eq!(state_desc(&mut s, "Bad"), "ONLINE");
    sim.set_faults(Faults {
        fail_io_at: Some((sim.io_count() + 1, libc::EIO)),
        ..Default::default()
    });
    let errs = errors(&mut s, "CHECKPOINT");
    let e = &errs[0];
    assert_eq!((e.number, e.severity, e.state), (823, 24, 2), "{errs:?}");
    let re = regex::Regex::new(
        r"^The operating system returned error 5\(Input/output error\) to SQL Server during a write at offset 0x([0-9a-f]{14}) in file '(/[^']+\.(mdf|ldf))'\. ",
    )
    .unwrap();
    let caps = re.captures(&e.text).unwrap_or_else(|| panic!("{}", e.text));
    let file = caps[2].to_string();
    assert!(sim.paths().iter().any(|p| p.display().to_string() == file));
    let log = errorlog(&dir);
    assert!(log.contains("Error: 823, Severity: 24, State: 2."), "{log}");
    assert!(log.contains(&format!("in file '{file}'")), "{log}");
    assert_eq!(state_desc(&mut s, "Bad"), "SUSPECT");
    let errs = errors(&mut s, "INSERT T VALUES (2)");
    assert_eq!(errs[0].number, 945, "{errs:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proves what is not built is refused, never accepted and ignored: SET EMERGENCY, a state
/// beside other options, and MODIFY FILE (FILENAME = ...) or OFFLINE, each leave the
/// database online with its file where it was (SET OFFLINE and ONLINE: offline.rs).
#[test]
fn emergency_and_moving_a_file_are_refused_not_ignored() {
    let (engine, _sim, dir) = instance("refuse");
    let mut s = engine.session();
    run(
        &mut s,
        "CREATE DATABASE Stay ON PRIMARY (NAME = S1, FILENAME = 'S1.mdf', SIZE = 5MB) \
         LOG ON (NAME = S1_log, FILENAME = 'S1_log.ldf', SIZE = 1MB);",
    );
    for sql in [
        "ALTER DATABASE Stay SET EMERGENCY",
        "ALTER DATABASE Stay SET OFFLINE, RECOVERY SIMPLE",
        "ALTER DATABASE Stay MODIFY FILE (NAME = S1, FILENAME = 'Moved.mdf')",
        "ALTER DATABASE Stay MODIFY FILE (NAME = S1, OFFLINE)",
    ] {
        let errs = errors(&mut s, sql);
        assert_eq!(errs.len(), 1, "{sql}: {errs:?}");
        assert_eq!((errs[0].number, errs[0].severity), (40517, 16), "{sql}");
        assert!(errs[0].text.contains("does not support"), "{sql}: {errs:?}");
    }
    assert_eq!(state_desc(&mut s, "Stay"), "ONLINE");
    let rows = run(
        &mut s,
        "SELECT physical_name FROM sys.master_files WHERE name = 'S1'",
    );
    assert!(
        matches!(&rows[0][0], Value::Text(t) if t.ends_with("S1.mdf")),
        "{rows:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
