//! ALTER DATABASE ... SET OFFLINE and SET ONLINE as SQL Server does them, through a real
//! `extentdb serve` and real TDS sessions: OFFLINE closes the database (its files released),
//! lasts across a restart, and gives 942 to USE, three-part names and BACKUP; ONLINE opens
//! it through recovery with every committed row; other sessions in the database make it
//! wait and fail with 5061 (5070 WITH NO_WAIT) unless WITH ROLLBACK IMMEDIATE ends them;
//! system databases refuse it (5058); DROP of an OFFLINE database keeps its files. And a
//! database a failed fsync poisoned (SUSPECT, refusing changes) is writable again after SET
//! ONLINE (or SET OFFLINE + SET ONLINE), run in-process on the simulated file system that
//! injects the failure (as disk_errors.rs does).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_io::FileSystem;
use extentdb_sql::exec::{Engine, Output, Session};
use extentdb_sql::types::Value;
use extentdb_storage::config::InstanceConfig;
use extentdb_storage::instance::SetupOptions;
use extentdb_storage::Instance;
use extentdb_tds::client::Client;

mod common;
use common::tds::{all_rows, errors, numbers, restart, run, Server};

fn scalar(c: &mut Client, sql: &str) -> Value {
    all_rows(&run(c, sql))[0][0].clone()
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i as i64,
        Value::BigInt(i) => *i,
        Value::TinyInt(i) => *i as i64,
        other => panic!("not an integer: {other:?}"),
    }
}

/// sys.databases (state, state_desc) of `name`.
fn state(c: &mut Client, name: &str) -> (i64, String) {
    let r = run(
        c,
        &format!("SELECT state, state_desc FROM sys.databases WHERE name = '{name}'"),
    );
    let row = &all_rows(&r)[0];
    match &row[1] {
        Value::Text(t) => (int(&row[0]), t.clone()),
        v => panic!("state_desc {v:?}"),
    }
}

/// The files process `pid` has open whose names contain `part`.
fn open_files(pid: u32, part: &str) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|p| p.display().to_string())
        .filter(|p| p.contains(part))
        .collect()
}

/// DBCC CHECKDB of `db` reports no error.
fn checkdb_clean(c: &mut Client, db: &str) {
    let errs = errors(c, &format!("DBCC CHECKDB ('{db}') WITH NO_INFOMSGS"));
    assert!(errs.is_empty(), "CHECKDB {db}: {errs:?}");
}

/// Proves SET OFFLINE closes the database (its files released by the server process),
/// shows state 6 OFFLINE, gives 942 (severity 14) to USE, a three-part name and BACKUP
/// (with 3013), lasts across a restart (the database is not started), and SET ONLINE
/// opens it through recovery ("Starting up database") with every committed row and a
/// clean CHECKDB, writable again.
#[test]
fn offline_closes_and_survives_a_restart_and_online_brings_every_row_back() {
    let s = Server::start("offline", &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "CREATE DATABASE Shop; USE Shop; \
         CREATE TABLE t (k int NOT NULL, pad varchar(40)); \
         CREATE TABLE p (k int NOT NULL PRIMARY KEY, v int)",
    );
    for x in 0..20 {
        let values: Vec<String> = (0..10)
            .map(|i| format!("({}, 'row')", x * 10 + i))
            .collect();
        run(
            &mut c,
            &format!(
                "BEGIN TRAN; INSERT INTO t VALUES {}; INSERT INTO p VALUES ({x}, {x}); COMMIT",
                values.join(", ")
            ),
        );
    }
    run(&mut c, "UPDATE p SET v = v * 2 WHERE k < 10; USE master");
    let pid = s.child.id();
    assert!(
        !open_files(pid, "Shop").is_empty(),
        "the open database's files"
    );

    run(&mut c, "ALTER DATABASE Shop SET OFFLINE");
    assert_eq!(state(&mut c, "Shop"), (6, "OFFLINE".into()));
    assert_eq!(
        open_files(pid, "Shop"),
        Vec::<String>::new(),
        "files released"
    );
    assert_eq!(errors(&mut c, "USE Shop"), vec![(942, 14, 4)]);
    assert_eq!(c.database(), "master");
    assert_eq!(
        numbers(&mut c, "SELECT COUNT(*) FROM Shop.dbo.t"),
        vec![942]
    );
    assert_eq!(
        numbers(&mut c, "INSERT INTO Shop.dbo.t VALUES (1, 'x')"),
        vec![942]
    );
    assert_eq!(
        numbers(&mut c, "BACKUP DATABASE Shop TO DISK = 'shop.bak'"),
        vec![942, 3013]
    );
    // Already offline: nothing to do, as in SQL Server.
    run(&mut c, "ALTER DATABASE Shop SET OFFLINE");
    let log = s.errorlog();
    assert!(
        log.contains("Setting database option OFFLINE to ON for database 'Shop'."),
        "{log}"
    );

    let s = restart(s);
    let mut c = s.connect();
    assert_eq!(state(&mut c, "Shop"), (6, "OFFLINE".into()));
    assert_eq!(numbers(&mut c, "USE Shop"), vec![942]);
    let log = s.errorlog();
    assert!(log.contains("Starting up database 'msdb'."), "{log}");
    assert!(!log.contains("Starting up database 'Shop'."), "{log}");
    assert!(open_files(s.child.id(), "Shop").is_empty());

    run(&mut c, "ALTER DATABASE Shop SET ONLINE");
    assert_eq!(state(&mut c, "Shop"), (0, "ONLINE".into()));
    let log = s.errorlog();
    assert!(log.contains("Starting up database 'Shop'."), "{log}");
    assert!(
        log.contains("Setting database option ONLINE to ON for database 'Shop'."),
        "{log}"
    );
    assert_eq!(int(&scalar(&mut c, "SELECT COUNT(*) FROM Shop.dbo.t")), 200);
    assert_eq!(
        int(&scalar(&mut c, "SELECT SUM(k) FROM Shop.dbo.t")),
        19_900
    );
    assert_eq!(
        int(&scalar(&mut c, "SELECT SUM(v) FROM Shop.dbo.p")),
        190 + 45
    );
    checkdb_clean(&mut c, "Shop");
    run(
        &mut c,
        "USE Shop; INSERT INTO t VALUES (200, 'after'); INSERT INTO p VALUES (20, 20)",
    );
    assert_eq!(int(&scalar(&mut c, "SELECT COUNT(*) FROM t")), 201);

    // Online across a restart too: the OFFLINE mark is cleared durably.
    let s = restart(s);
    let mut c = s.connect();
    assert_eq!(state(&mut c, "Shop"), (0, "ONLINE".into()));
    assert_eq!(int(&scalar(&mut c, "SELECT COUNT(*) FROM Shop.dbo.t")), 201);
}

/// Proves another session in the database (its current database, or a transaction that
/// wrote there through a three-part name) makes SET OFFLINE wait and fail with 5061 (5070
/// at once WITH NO_WAIT), the database staying online; WITH ROLLBACK IMMEDIATE ends that
/// session (its connection closes, its transaction rolls back: 5060) and goes on; and the
/// session running the statement from inside the database is moved to master.
#[test]
fn other_sessions_make_offline_wait_and_fail_unless_rolled_back() {
    let s = Server::start("offline-busy", &[]);
    let mut a = s.connect();
    run(
        &mut a,
        "CREATE DATABASE Busy; USE Busy; CREATE TABLE t (k int NOT NULL); \
         INSERT INTO t VALUES (1), (2); USE master",
    );
    let mut b = s.connect_to(Some("Busy"));
    let t0 = Instant::now();
    assert_eq!(
        errors(&mut a, "ALTER DATABASE Busy SET OFFLINE"),
        vec![(5061, 16, 1), (5069, 16, 1)]
    );
    assert!(t0.elapsed() >= Duration::from_secs(4), "{:?}", t0.elapsed());
    assert_eq!(
        numbers(&mut a, "ALTER DATABASE Busy SET OFFLINE WITH NO_WAIT"),
        vec![5070, 5069]
    );
    assert_eq!(state(&mut a, "Busy"), (0, "ONLINE".into()));

    // A transaction that wrote there from another database holds it too.
    run(
        &mut b,
        "USE master; BEGIN TRAN; INSERT INTO Busy.dbo.t VALUES (3)",
    );
    assert_eq!(
        numbers(&mut a, "ALTER DATABASE Busy SET OFFLINE"),
        vec![5061, 5069]
    );
    assert_eq!(state(&mut a, "Busy"), (0, "ONLINE".into()));

    let r = run(
        &mut a,
        "ALTER DATABASE Busy SET OFFLINE WITH ROLLBACK IMMEDIATE",
    );
    assert!(
        r.outputs
            .iter()
            .any(|o| matches!(o, Output::Info(i) if i.number == 5060)),
        "{:?}",
        r.outputs
    );
    assert_eq!(state(&mut a, "Busy"), (6, "OFFLINE".into()));
    assert!(
        b.batch("SELECT 1").is_err(),
        "the ended session's connection is closed"
    );
    run(&mut a, "ALTER DATABASE Busy SET ONLINE");
    assert_eq!(
        int(&scalar(&mut a, "SELECT COUNT(*) FROM Busy.dbo.t")),
        2,
        "the ended transaction rolled back"
    );

    // From inside the database: the session ends in master.
    run(&mut a, "USE Busy");
    let r = run(&mut a, "ALTER DATABASE Busy SET OFFLINE");
    assert_eq!(a.database(), "master");
    assert!(
        r.outputs
            .iter()
            .any(|o| matches!(o, Output::Info(i) if i.number == 5701)),
        "{:?}",
        r.outputs
    );
    assert_eq!(int(&scalar(&mut a, "SELECT DB_ID()")), 1);
    assert_eq!(state(&mut a, "Busy"), (6, "OFFLINE".into()));
}

/// Proves master, model, msdb and tempdb refuse OFFLINE and ONLINE with 5058; EMERGENCY is
/// refused as not built (40517); a state change inside a transaction is 226; and DROP of an
/// OFFLINE database forgets it but leaves its files, as SQL Server does, saying so in the
/// ERRORLOG.
#[test]
fn system_databases_refuse_and_drop_of_offline_keeps_the_files() {
    let s = Server::start("offline-sys", &[]);
    let mut c = s.connect();
    for db in ["master", "model", "msdb", "tempdb"] {
        for option in ["OFFLINE", "ONLINE"] {
            let r = c
                .batch(&format!("ALTER DATABASE {db} SET {option}"))
                .unwrap();
            let errs: Vec<_> = r.errors().collect();
            assert_eq!(errs.len(), 2, "{db} {option}: {errs:?}");
            assert_eq!((errs[0].number, errs[0].severity), (5058, 16), "{db}");
            assert_eq!(
                errs[0].text,
                format!("Option '{option}' cannot be set in database '{db}'.")
            );
            assert_eq!(errs[1].number, 5069);
        }
        assert_eq!(state(&mut c, db), (0, "ONLINE".into()));
    }
    run(&mut c, "CREATE DATABASE Gone");
    assert_eq!(
        numbers(&mut c, "ALTER DATABASE Gone SET EMERGENCY"),
        vec![40517]
    );
    assert_eq!(
        numbers(&mut c, "BEGIN TRAN; ALTER DATABASE Gone SET OFFLINE"),
        vec![226]
    );
    run(&mut c, "ROLLBACK");
    assert_eq!(state(&mut c, "Gone"), (0, "ONLINE".into()));

    run(
        &mut c,
        "ALTER DATABASE Gone SET OFFLINE; DROP DATABASE Gone",
    );
    let r = run(&mut c, "SELECT name FROM sys.databases WHERE name = 'Gone'");
    assert!(all_rows(&r).is_empty());
    assert!(s.dir.join("data/Gone.mdf").exists());
    assert!(s.dir.join("data/Gone_log.ldf").exists());
    let log = s.errorlog();
    assert!(
        log.contains("Database 'Gone' was dropped while OFFLINE: its files were not deleted"),
        "{log}"
    );
    // The name is free again, but the kept files are in the way of the defaults.
    assert_eq!(numbers(&mut c, "CREATE DATABASE Gone"), vec![5170, 1802]);
}

/// Proves SET ONLINE retries the open of a database start-up could not open: with its log
/// file missing it stays RECOVERY_PENDING (the open's error, 945 and 5069); with the file
/// back it comes online without a restart, every row there.
#[test]
fn online_retries_a_database_start_up_could_not_open() {
    let s = Server::start("offline-pending", &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "CREATE DATABASE Later; USE Later; CREATE TABLE t (k int NOT NULL); \
         INSERT INTO t VALUES (1), (2), (3)",
    );
    let ldf = s.dir.join("data/Later_log.ldf");
    let away = s.dir.join("Later_log.ldf.away");
    let s = {
        let mut s = s;
        s.child.kill().unwrap();
        s.child.wait().unwrap();
        std::fs::rename(&ldf, &away).unwrap();
        let dir = std::mem::replace(&mut s.dir, "/nonexistent-xdb".into());
        drop(s);
        Server::start_in(dir, &[])
    };
    let mut c = s.connect();
    assert_eq!(state(&mut c, "Later"), (3, "RECOVERY_PENDING".into()));
    let errs = numbers(&mut c, "ALTER DATABASE Later SET ONLINE");
    assert_eq!(errs[errs.len() - 2..], [945, 5069], "{errs:?}");
    assert_eq!(state(&mut c, "Later"), (3, "RECOVERY_PENDING".into()));
    std::fs::rename(&away, &ldf).unwrap();
    run(&mut c, "ALTER DATABASE Later SET ONLINE");
    assert_eq!(state(&mut c, "Later"), (0, "ONLINE".into()));
    assert_eq!(int(&scalar(&mut c, "SELECT COUNT(*) FROM Later.dbo.t")), 3);
}

/// An in-process instance on the simulated file system (returned to inject faults).
fn sim_instance(tag: &str) -> (Arc<Engine>, Arc<SimFileSystem>, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("xdb-offline-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let sim = Arc::new(SimFileSystem::new(11, Faults::default()));
    let fs: Arc<dyn FileSystem> = sim.clone();
    let options = SetupOptions {
        config: InstanceConfig::defaults(&dir),
        sa_password: None,
    };
    Instance::setup(fs.clone(), &dir, options).unwrap();
    let engine = Engine::new(Arc::new(Instance::start(fs, &dir, &[]).unwrap()));
    (engine, sim, dir)
}

fn session_errors(s: &mut Session, sql: &str) -> Vec<i32> {
    s.execute(sql)
        .into_iter()
        .filter_map(|o| match o {
            Output::Error(e) => Some(e.number),
            _ => None,
        })
        .collect()
}

fn session_rows(s: &mut Session, sql: &str) -> Vec<Vec<Value>> {
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

fn session_state(s: &mut Session, name: &str) -> String {
    let rows = session_rows(
        s,
        &format!("SELECT state_desc FROM sys.databases WHERE name = '{name}'"),
    );
    match &rows[0][0] {
        Value::Text(t) => t.clone(),
        v => panic!("{v:?}"),
    }
}

/// Makes the next fdatasync fail under an autocommit INSERT: the commit's log flush fails
/// (823), the database is poisoned (SUSPECT, changes refused with 945).
fn poison_by_fsync(sim: &SimFileSystem, s: &mut Session, k: i64) {
    sim.set_faults(Faults {
        fail_next_sync: Some(libc::EIO),
        ..Default::default()
    });
    let errs = session_errors(s, &format!("INSERT INTO Hurt.dbo.t VALUES ({k})"));
    assert_eq!(errs.first(), Some(&823), "{errs:?}");
    assert_eq!(session_state(s, "Hurt"), "SUSPECT");
    assert_eq!(
        session_errors(s, "INSERT INTO Hurt.dbo.t VALUES (-1)"),
        vec![945]
    );
}

fn keys(s: &mut Session) -> Vec<i64> {
    session_rows(s, "SELECT k FROM Hurt.dbo.t")
        .iter()
        .map(|r| int(&r[0]))
        .collect()
}

/// Proves a database poisoned by a failed fsync (SUSPECT, refusing changes until reopened)
/// comes back writable through recovery after SET ONLINE alone, and again after SET
/// OFFLINE + SET ONLINE, with no committed row lost, CHECKDB clean and the ERRORLOG
/// showing the database started again.
#[test]
fn a_database_poisoned_by_a_failed_fsync_is_writable_after_set_online() {
    let (engine, sim, dir) = sim_instance("fsync");
    let mut s = engine.session();
    session_rows(
        &mut s,
        "CREATE DATABASE Hurt ON PRIMARY (NAME = H1, FILENAME = 'H1.mdf', SIZE = 8MB) \
         LOG ON (NAME = H1_log, FILENAME = 'H1_log.ldf', SIZE = 8MB); \
         USE Hurt; CREATE TABLE t (k int NOT NULL); USE master;",
    );
    for k in 0..50 {
        session_rows(&mut s, &format!("INSERT INTO Hurt.dbo.t VALUES ({k})"));
    }
    poison_by_fsync(&sim, &mut s, 1000);

    session_rows(&mut s, "ALTER DATABASE Hurt SET ONLINE");
    assert_eq!(session_state(&mut s, "Hurt"), "ONLINE");
    let got = keys(&mut s);
    for k in 0..50 {
        assert!(got.contains(&k), "committed row {k} lost: {got:?}");
    }
    // The row whose commit failed may or may not have reached the log: either is right.
    assert!(
        got.len() == 50 || (got.len() == 51 && got.contains(&1000)),
        "{got:?}"
    );
    session_rows(&mut s, "INSERT INTO Hurt.dbo.t VALUES (50)");
    assert!(keys(&mut s).contains(&50));
    let errs = session_errors(&mut s, "DBCC CHECKDB ('Hurt') WITH NO_INFOMSGS");
    assert!(errs.is_empty(), "{errs:?}");

    poison_by_fsync(&sim, &mut s, 2000);
    session_rows(&mut s, "ALTER DATABASE Hurt SET OFFLINE");
    assert_eq!(session_state(&mut s, "Hurt"), "OFFLINE");
    session_rows(&mut s, "ALTER DATABASE Hurt SET ONLINE");
    assert_eq!(session_state(&mut s, "Hurt"), "ONLINE");
    let got = keys(&mut s);
    for k in 0..=50 {
        assert!(got.contains(&k), "committed row {k} lost: {got:?}");
    }
    session_rows(&mut s, "INSERT INTO Hurt.dbo.t VALUES (51)");
    let errs = session_errors(&mut s, "DBCC CHECKDB ('Hurt') WITH NO_INFOMSGS");
    assert!(errs.is_empty(), "{errs:?}");
    let log = std::fs::read_to_string(dir.join("log/ERRORLOG")).unwrap();
    assert_eq!(
        log.matches("Starting up database 'Hurt'.").count(),
        2,
        "{log}"
    );
    drop(s);
    drop(engine);
    let _ = std::fs::remove_dir_all(Path::new(&dir));
}
