//! ALTER DATABASE ... SET SINGLE_USER and MULTI_USER as SQL Server does them, through a real
//! `extentdb serve` and real TDS sessions: SINGLE_USER waits for the other sessions in the
//! database and fails with 5061 (5070 WITH NO_WAIT), or ends them WITH ROLLBACK IMMEDIATE /
//! AFTER n (5060); then one session at a time may be in the database and another gets 924
//! on USE, on a three-part name and at login; MULTI_USER lifts it; master keeps it across a
//! restart; master, tempdb and model refuse it (5058); and the seed scripts' path
//! (SINGLE_USER WITH ROLLBACK IMMEDIATE, then DROP DATABASE) works with a session inside.

use std::time::{Duration, Instant};

use extentdb_sql::exec::Output;
use extentdb_sql::types::Value;
use extentdb_tds::client::{Client, Response};

mod common;
use common::tds::{all_rows, connect_at, errors, numbers, restart, run, Server};

/// sys.databases (user_access, user_access_desc) of `name`.
fn access(c: &mut Client, name: &str) -> (u8, String) {
    let r = run(
        c,
        &format!("SELECT user_access, user_access_desc FROM sys.databases WHERE name = '{name}'"),
    );
    match &all_rows(&r)[0][..] {
        [Value::TinyInt(n), Value::Text(t)] => (*n, t.clone()),
        row => panic!("{row:?}"),
    }
}

fn single() -> (u8, String) {
    (1, "SINGLE_USER".into())
}

fn multi() -> (u8, String) {
    (0, "MULTI_USER".into())
}

fn has_info(r: &Response, number: i32) -> bool {
    r.outputs
        .iter()
        .any(|o| matches!(o, Output::Info(i) if i.number == number))
}

/// The error numbers a login into `database` fails with (panics if it succeeds).
fn login_refused(s: &Server, database: &str) -> Vec<i32> {
    match connect_at(&s.addr, Some(database), 30) {
        Ok(_) => panic!("the login into {database} succeeded"),
        Err(Ok(r)) => r.errors().map(|e| e.number).collect(),
        Err(Err(e)) => panic!("login into {database}: {e:?}"),
    }
}

/// Proves SINGLE_USER waits for another session in the database and fails with 5061 +
/// 5069 (5070 at once WITH NO_WAIT), leaving it MULTI_USER; once the database is clear it
/// is SINGLE_USER (sys.databases, ERRORLOG): the first session in keeps the others out with
/// 924 (severity 14, state 1) on USE, on a three-part name and at login (924, 4060), the
/// next gets in once it leaves, and MULTI_USER lets every session in again.
#[test]
fn single_user_lets_one_session_in_and_multi_user_lifts_it() {
    let s = Server::start("single-user", &[]);
    let mut a = s.connect();
    run(
        &mut a,
        "CREATE DATABASE Solo; USE Solo; CREATE TABLE t (k int NOT NULL); \
         INSERT INTO t VALUES (1), (2); USE master",
    );
    let mut b = s.connect_to(Some("Solo"));
    let t0 = Instant::now();
    assert_eq!(
        errors(&mut a, "ALTER DATABASE Solo SET SINGLE_USER"),
        vec![(5061, 16, 1), (5069, 16, 1)]
    );
    assert!(t0.elapsed() >= Duration::from_secs(4), "{:?}", t0.elapsed());
    assert_eq!(
        numbers(&mut a, "ALTER DATABASE Solo SET SINGLE_USER WITH NO_WAIT"),
        vec![5070, 5069]
    );
    assert_eq!(access(&mut a, "Solo"), multi());

    run(&mut b, "USE master");
    run(&mut a, "ALTER DATABASE Solo SET SINGLE_USER WITH NO_WAIT");
    assert_eq!(access(&mut a, "Solo"), single());
    let log = s.errorlog();
    assert!(
        log.contains("Setting database option SINGLE_USER to ON for database 'Solo'."),
        "{log}"
    );

    // b is first in; a is kept out every way it tries.
    run(&mut b, "USE Solo");
    assert_eq!(errors(&mut a, "USE Solo"), vec![(924, 14, 1)]);
    assert_eq!(a.database(), "master");
    assert_eq!(
        numbers(&mut a, "SELECT COUNT(*) FROM Solo.dbo.t"),
        vec![924]
    );
    assert_eq!(
        numbers(&mut a, "INSERT INTO Solo.dbo.t VALUES (3)"),
        vec![924]
    );
    assert_eq!(login_refused(&s, "Solo"), vec![924, 4060, 18456]);
    let r = a.batch("USE Solo").unwrap();
    let e = r.errors().next().unwrap();
    assert_eq!(
        e.text,
        "Database 'Solo' is already open and can only have one user at a time."
    );
    // The one session inside works as ever.
    assert_eq!(all_rows(&run(&mut b, "SELECT COUNT(*) FROM t")).len(), 1);

    // b leaves: a gets in, and now b is kept out.
    run(&mut b, "USE master");
    run(&mut a, "USE Solo");
    assert_eq!(numbers(&mut b, "USE Solo"), vec![924]);
    run(&mut a, "USE master");

    run(&mut a, "ALTER DATABASE Solo SET MULTI_USER");
    assert_eq!(access(&mut a, "Solo"), multi());
    run(&mut a, "USE Solo");
    run(&mut b, "USE Solo");
    let mut c = s.connect_to(Some("Solo"));
    run(&mut c, "INSERT INTO t VALUES (3)");
    // MULTI_USER again changes nothing and waits for no one.
    run(&mut a, "ALTER DATABASE Solo SET MULTI_USER WITH NO_WAIT");
    assert_eq!(access(&mut a, "Solo"), multi());
}

/// Proves WITH ROLLBACK IMMEDIATE ends the other sessions in the database (their open
/// transaction rolled back, their connection closed: 5060) and the database becomes
/// SINGLE_USER; then DROP DATABASE removes it, as the seed scripts do it
/// (`ALTER DATABASE [Company] SET SINGLE_USER WITH ROLLBACK IMMEDIATE` then DROP DATABASE).
/// WITH ROLLBACK AFTER 1 waits that long, then ends them the same way.
#[test]
fn rollback_immediate_ends_the_others_and_drop_database_follows() {
    let s = Server::start("single-user-drop", &[]);
    let mut a = s.connect();
    run(
        &mut a,
        "CREATE DATABASE Company; USE Company; CREATE TABLE t (k int NOT NULL); \
         INSERT INTO t VALUES (1); USE master",
    );
    let mut b = s.connect_to(Some("Company"));
    run(&mut b, "BEGIN TRAN; INSERT INTO t VALUES (2)");
    let mut c = s.connect_to(Some("Company"));

    let r = run(
        &mut a,
        "ALTER DATABASE [Company] SET SINGLE_USER WITH ROLLBACK AFTER 1 SECONDS",
    );
    assert!(has_info(&r, 5060), "{:?}", r.outputs);
    assert!(b.batch("SELECT 1").is_err(), "b's connection is closed");
    assert!(c.batch("SELECT 1").is_err(), "c's connection is closed");
    assert_eq!(access(&mut a, "Company"), single());
    assert_eq!(
        all_rows(&run(&mut a, "SELECT COUNT(*) FROM Company.dbo.t"))[0][0],
        Value::Int(1),
        "b's transaction rolled back"
    );

    // Again with a session inside, as the seed scripts meet it.
    run(&mut a, "ALTER DATABASE Company SET MULTI_USER");
    let mut d = s.connect_to(Some("Company"));
    let r = run(
        &mut a,
        "ALTER DATABASE [Company] SET SINGLE_USER WITH ROLLBACK IMMEDIATE",
    );
    assert!(has_info(&r, 5060), "{:?}", r.outputs);
    assert!(d.batch("SELECT 1").is_err(), "d's connection is closed");
    run(&mut a, "DROP DATABASE [Company]");
    assert!(all_rows(&run(
        &mut a,
        "SELECT name FROM sys.databases WHERE name = 'Company'"
    ))
    .is_empty());
}

/// Proves SINGLE_USER is kept in master: after a kill -9 and a restart the database is still
/// SINGLE_USER (one session in, the next gets 924), and MULTI_USER is kept the same way.
#[test]
fn single_user_lasts_across_a_restart() {
    let s = Server::start("single-user-restart", &[]);
    let mut a = s.connect();
    run(
        &mut a,
        "CREATE DATABASE Kept; ALTER DATABASE Kept SET SINGLE_USER",
    );
    let s = restart(s);
    let mut a = s.connect();
    assert_eq!(access(&mut a, "Kept"), single());
    let mut b = s.connect_to(Some("Kept"));
    assert_eq!(numbers(&mut a, "USE Kept"), vec![924]);
    run(&mut b, "USE master");
    run(&mut a, "ALTER DATABASE Kept SET MULTI_USER");
    drop(b);

    let s = restart(s);
    let mut a = s.connect();
    assert_eq!(access(&mut a, "Kept"), multi());
    let _b = s.connect_to(Some("Kept"));
    run(&mut a, "USE Kept");
}

/// Proves master, tempdb and model refuse SINGLE_USER with 5058 + 5069 and stay MULTI_USER
/// (MULTI_USER, what they are, is accepted); msdb may be made SINGLE_USER, as in SQL
/// Server; RESTRICTED_USER is refused as not built (40517); and SINGLE_USER inside a
/// transaction is 226.
#[test]
fn system_databases_refuse_single_user_and_restricted_user_is_not_built() {
    let s = Server::start("single-user-sys", &[]);
    let mut c = s.connect();
    for db in ["master", "tempdb", "model"] {
        let r = c
            .batch(&format!("ALTER DATABASE {db} SET SINGLE_USER"))
            .unwrap();
        let errs: Vec<_> = r.errors().collect();
        assert_eq!(errs.len(), 2, "{db}: {errs:?}");
        assert_eq!((errs[0].number, errs[0].severity), (5058, 16), "{db}");
        assert_eq!(
            errs[0].text,
            format!("Option 'SINGLE_USER' cannot be set in database '{db}'.")
        );
        assert_eq!(errs[1].number, 5069);
        run(&mut c, &format!("ALTER DATABASE {db} SET MULTI_USER"));
        assert_eq!(access(&mut c, db), multi(), "{db}");
    }
    run(&mut c, "ALTER DATABASE msdb SET SINGLE_USER");
    assert_eq!(access(&mut c, "msdb"), single());
    run(&mut c, "ALTER DATABASE msdb SET MULTI_USER");
    assert_eq!(access(&mut c, "msdb"), multi());

    run(&mut c, "CREATE DATABASE Plain");
    assert_eq!(
        numbers(&mut c, "ALTER DATABASE Plain SET RESTRICTED_USER"),
        vec![40517]
    );
    assert_eq!(
        numbers(&mut c, "BEGIN TRAN; ALTER DATABASE Plain SET SINGLE_USER"),
        vec![226]
    );
    run(&mut c, "ROLLBACK");
    assert_eq!(access(&mut c, "Plain"), multi());
}
