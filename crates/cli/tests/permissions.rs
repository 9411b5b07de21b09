//! SQL Server's permission model through real TDS sessions: a matrix of logins (fixed server
//! roles, database users in fixed database roles, explicit GRANT / DENY) against
//! statements, each allowed and refused case with SQL Server's message number; the
//! security functions and catalog views; and everything kept across a restart.

mod common;

use std::time::Duration;

use common::tds::{Server, PASSWORD};
use extentdb_sql::exec::Output;
use extentdb_sql::types::Value;
use extentdb_tds::client::{Client, ConnectOptions};

const PW: &str = "Perm-Test-Pass-1";

fn login_as(s: &Server, user: &str, database: Option<&str>) -> Result<Client, Vec<i32>> {
    Client::connect(
        &s.addr,
        &ConnectOptions {
            user: user.into(),
            password: if user == "sa" {
                PASSWORD.into()
            } else {
                PW.into()
            },
            database: database.map(str::to_string),
            timeout: Some(Duration::from_secs(60)),
            ..ConnectOptions::default()
        },
    )
    .map_err(|e| match e {
        Ok(r) => r.errors().map(|e| e.number).collect(),
        Err(e) => panic!("{user}: {e}"),
    })
}

/// The batch's error numbers (empty: it ran).
fn errs(c: &mut Client, sql: &str) -> Vec<i32> {
    c.batch(sql).unwrap().errors().map(|e| e.number).collect()
}

fn scalar(c: &mut Client, sql: &str) -> Value {
    let r = c.batch(sql).unwrap();
    assert_eq!(r.errors().count(), 0, "{sql}");
    r.outputs
        .iter()
        .find_map(|o| match o {
            Output::Rows { rows, .. } => rows.first().map(|r| r[0].clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{sql}: no row"))
}

/// sa's setup: database shop with table t, and one login per case.
fn set_up(s: &Server) -> Client {
    let mut sa = s.connect();
    let mut run = |sql: &str| assert_eq!(errs(&mut sa, sql), Vec::<i32>::new(), "{sql}");
    run("CREATE DATABASE shop");
    run(
        "CREATE TABLE shop.dbo.t (id INT PRIMARY KEY, v INT); INSERT INTO shop.dbo.t VALUES (1, 1)",
    );
    for l in [
        "plain", "reader", "writer", "ddl", "backupop", "owner", "denied", "granted", "dbc",
        "secadm", "procadm", "viewer",
    ] {
        run(&format!("CREATE LOGIN {l} WITH PASSWORD = '{PW}'"));
    }
    run("ALTER SERVER ROLE dbcreator ADD MEMBER dbc");
    run("ALTER SERVER ROLE securityadmin ADD MEMBER secadm");
    run("ALTER SERVER ROLE processadmin ADD MEMBER procadm");
    run("GRANT VIEW SERVER STATE TO viewer");
    run("USE shop");
    for (user, role) in [
        ("reader", Some("db_datareader")),
        ("writer", Some("db_datawriter")),
        ("ddl", Some("db_ddladmin")),
        ("backupop", Some("db_backupoperator")),
        ("owner", Some("db_owner")),
        ("denied", Some("db_datareader")),
        ("granted", None),
    ] {
        run(&format!("CREATE USER {user} FOR LOGIN {user}"));
        if let Some(role) = role {
            run(&format!("ALTER ROLE {role} ADD MEMBER {user}"));
        }
    }
    run("DENY SELECT ON OBJECT::dbo.t TO denied");
    run("GRANT SELECT ON dbo.t TO granted");
    run("USE master");
    sa
}

/// (login, statement run in shop unless it says otherwise, the error it must give or 0).
const MATRIX: &[(&str, &str, i32)] = &[
    ("plain", "USE shop", 916),
    ("plain", "SELECT COUNT(*) FROM shop.dbo.t", 916),
    ("plain", "CREATE DATABASE plaindb", 262),
    ("plain", "DROP DATABASE shop", 3701),
    ("plain", "ALTER DATABASE shop SET RECOVERY SIMPLE", 5011),
    ("plain", "BACKUP DATABASE shop TO DISK = 'p.bak'", 916),
    (
        "plain",
        "RESTORE DATABASE shop FROM DISK = 'p.bak' WITH REPLACE",
        3110,
    ),
    ("plain", "DBCC TRACEON (3604, -1)", 2571),
    ("plain", "DBCC PAGE ('master', 1, 9, 3)", 2571),
    ("plain", "KILL 51", 6102),
    (
        "plain",
        "SELECT COUNT(*) FROM sys.dm_os_spinlock_stats",
        300,
    ),
    (
        "plain",
        "CREATE LOGIN x1 WITH PASSWORD = 'Perm-Test-Pass-1'",
        15247,
    ),
    (
        "plain",
        "ALTER SERVER ROLE sysadmin ADD MEMBER plain",
        15247,
    ),
    ("plain", "GRANT VIEW SERVER STATE TO plain", 4613),
    ("plain", "SELECT COUNT(*) FROM sys.databases", 0),
    ("reader", "SELECT COUNT(*) FROM t", 0),
    ("reader", "INSERT INTO t VALUES (2, 2)", 229),
    ("reader", "UPDATE t SET v = 3", 229),
    ("reader", "DELETE FROM t", 229),
    ("reader", "CREATE TABLE r1 (a INT)", 262),
    ("reader", "DROP TABLE t", 3701),
    ("reader", "TRUNCATE TABLE t", 1088),
    ("reader", "BACKUP DATABASE shop TO DISK = 'r.bak'", 262),
    ("reader", "DBCC CHECKDB (shop)", 2571),
    ("reader", "CREATE USER plain FOR LOGIN plain", 15247),
    ("reader", "GRANT SELECT ON t TO writer", 4613),
    ("writer", "INSERT INTO t VALUES (3, 3)", 0),
    ("writer", "UPDATE t SET v = 4 WHERE id = 3", 0),
    ("writer", "SELECT COUNT(*) FROM t", 229),
    ("ddl", "CREATE TABLE d1 (a INT)", 0),
    ("ddl", "DROP TABLE d1", 0),
    ("ddl", "SELECT COUNT(*) FROM t", 229),
    (
        "backupop",
        "BACKUP DATABASE shop TO DISK = 'b.bak' WITH INIT",
        0,
    ),
    ("backupop", "BACKUP LOG shop TO DISK = 'b.trn' WITH INIT", 0),
    ("backupop", "CHECKPOINT", 0),
    ("backupop", "SELECT COUNT(*) FROM t", 229),
    ("owner", "SELECT COUNT(*) FROM t", 0),
    (
        "owner",
        "CREATE TABLE o1 (a INT); INSERT INTO o1 VALUES (1); DROP TABLE o1",
        0,
    ),
    ("owner", "DBCC CHECKDB (shop)", 0),
    ("owner", "ALTER DATABASE shop SET RECOVERY FULL", 0),
    ("owner", "CREATE USER plain FOR LOGIN plain", 0),
    ("owner", "DROP USER plain", 0),
    ("owner", "GRANT INSERT ON t TO granted", 0),
    ("owner", "DBCC TRACEON (3604, -1)", 2571),
    ("denied", "SELECT COUNT(*) FROM t", 229),
    ("granted", "SELECT COUNT(*) FROM t", 0),
    ("granted", "INSERT INTO t VALUES (4, 4)", 0),
    ("granted", "DELETE FROM t WHERE id = 4", 229),
    ("dbc", "CREATE DATABASE dbcdb", 0),
    (
        "dbc",
        "USE dbcdb; CREATE TABLE mine (a INT); SELECT COUNT(*) FROM mine",
        0,
    ),
    ("dbc", "DROP DATABASE dbcdb", 0),
    ("dbc", "SELECT COUNT(*) FROM shop.dbo.t", 916),
    (
        "secadm",
        "CREATE LOGIN x2 WITH PASSWORD = 'Perm-Test-Pass-2'",
        0,
    ),
    ("secadm", "ALTER SERVER ROLE bulkadmin ADD MEMBER x2", 0),
    ("secadm", "ALTER SERVER ROLE sysadmin ADD MEMBER x2", 15247),
    ("secadm", "GRANT CONTROL SERVER TO x2", 4613),
    ("secadm", "DROP LOGIN x2", 0),
    (
        "procadm",
        "SELECT COUNT(*) FROM sys.dm_os_spinlock_stats",
        0,
    ),
    ("viewer", "SELECT COUNT(*) FROM sys.dm_os_spinlock_stats", 0),
    ("viewer", "KILL 51", 6102),
];

/// Where each login's statements run: shop for its users, master for the rest.
fn home(login: &str) -> Option<&'static str> {
    match login {
        "plain" | "dbc" | "secadm" | "procadm" | "viewer" => None,
        _ => Some("shop"),
    }
}

#[test]
fn every_role_and_statement_is_allowed_or_refused_as_sql_server_does() {
    let s = Server::start("permissions", &[]);
    let mut sa = set_up(&s);
    let mut failures = Vec::new();
    for (login, sql, expected) in MATRIX {
        let mut c = login_as(&s, login, home(login)).unwrap_or_else(|e| panic!("{login}: {e:?}"));
        let got = errs(&mut c, sql);
        let ok = match expected {
            0 => got.is_empty(),
            n => got.first() == Some(n),
        };
        if !ok {
            failures.push(format!("{login}: {sql}: expected {expected}, got {got:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The refusals changed nothing: rows 1, 3 (writer) and 4 (granted); no plaindb.
    assert_eq!(
        scalar(&mut sa, "SELECT COUNT(*) FROM shop.dbo.t"),
        Value::Int(3)
    );
    let q = "SELECT COUNT(*) FROM sys.databases WHERE name IN ('plaindb', 'dbcdb')";
    assert_eq!(scalar(&mut sa, q), Value::Int(0));
}

#[test]
fn a_login_without_a_user_cannot_enter_its_default_database() {
    let s = Server::start("permissions-login", &[]);
    let mut sa = set_up(&s);
    let sql = format!("CREATE LOGIN nouser WITH PASSWORD = '{PW}', DEFAULT_DATABASE = shop");
    assert_eq!(errs(&mut sa, &sql), Vec::<i32>::new());
    let refused = login_as(&s, "nouser", None).err().expect("refused");
    assert_eq!(refused.first(), Some(&4060), "{refused:?}");
    // master is open to every login as guest.
    assert!(login_as(&s, "nouser", Some("master")).is_ok());
}

#[test]
fn functions_views_revoke_and_restart() {
    let dir = std::env::temp_dir().join(format!("xdb-tds-perm-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut s = Server::start_in(dir.clone(), &[]);
    let mut sa = set_up(&s);
    let mut r = login_as(&s, "reader", Some("shop")).unwrap();
    let int = |v: i32| Value::Int(v);
    assert_eq!(
        scalar(&mut r, "SELECT IS_SRVROLEMEMBER('sysadmin')"),
        int(0)
    );
    assert_eq!(
        scalar(&mut sa, "SELECT IS_SRVROLEMEMBER('sysadmin')"),
        int(1)
    );
    assert_eq!(
        scalar(&mut sa, "SELECT IS_SRVROLEMEMBER('dbcreator', 'dbc')"),
        int(1)
    );
    assert_eq!(scalar(&mut r, "SELECT IS_MEMBER('db_datareader')"), int(1));
    assert_eq!(scalar(&mut r, "SELECT IS_MEMBER('db_owner')"), int(0));
    assert_eq!(
        scalar(&mut r, "SELECT SUSER_SNAME()"),
        Value::Text("reader".into())
    );
    assert_eq!(
        scalar(&mut r, "SELECT ORIGINAL_LOGIN()"),
        Value::Text("reader".into())
    );
    assert_eq!(
        scalar(&mut r, "SELECT USER_NAME()"),
        Value::Text("reader".into())
    );
    assert_eq!(
        scalar(&mut sa, "USE shop; SELECT USER_NAME()"),
        Value::Text("dbo".into())
    );
    let perms = "SELECT HAS_PERMS_BY_NAME('shop.dbo.t', 'OBJECT', 'SELECT')";
    assert_eq!(scalar(&mut r, perms), int(1));
    let mut w = login_as(&s, "writer", Some("shop")).unwrap();
    assert_eq!(scalar(&mut w, perms), int(0));
    assert_eq!(
        scalar(
            &mut w,
            "SELECT HAS_PERMS_BY_NAME(NULL, 'SERVER', 'VIEW SERVER STATE')"
        ),
        int(0)
    );
    // Views.
    let q = "SELECT COUNT(*) FROM sys.database_principals WHERE name = 'reader' AND type = 'S'";
    assert_eq!(scalar(&mut sa, q), int(1));
    let q = "SELECT COUNT(*) FROM sys.database_role_members WHERE role_principal_id = 16390";
    assert_eq!(scalar(&mut sa, q), int(2));
    let q = "SELECT COUNT(*) FROM sys.server_role_members WHERE role_principal_id = 9";
    assert_eq!(scalar(&mut sa, q), int(1));
    let q = "SELECT COUNT(*) FROM sys.server_principals WHERE type = 'R'";
    assert_eq!(scalar(&mut sa, q), int(9));
    // REVOKE and DENY take effect at once, on open sessions too.
    let mut g = login_as(&s, "granted", Some("shop")).unwrap();
    assert_eq!(errs(&mut g, "SELECT COUNT(*) FROM t"), Vec::<i32>::new());
    assert_eq!(
        errs(&mut sa, "REVOKE SELECT ON dbo.t FROM granted"),
        Vec::<i32>::new()
    );
    assert_eq!(errs(&mut g, "SELECT COUNT(*) FROM t"), [229]);
    assert_eq!(
        errs(&mut sa, "DENY VIEW SERVER STATE TO viewer"),
        Vec::<i32>::new()
    );
    let mut v = login_as(&s, "viewer", None).unwrap();
    assert_eq!(
        errs(&mut v, "SELECT COUNT(*) FROM sys.dm_os_spinlock_stats"),
        [300, 297]
    );
    // Without VIEW SERVER STATE a session sees only itself in sys.dm_exec_sessions.
    let sessions = "SELECT COUNT(*) FROM sys.dm_exec_sessions";
    assert_eq!(scalar(&mut v, sessions), int(1));
    assert!(matches!(scalar(&mut sa, sessions), Value::Int(n) if n >= 5));
    drop((r, w, g, v, sa));
    // Everything is kept across a restart: users and roles in shop's catalog, server roles
    // and permissions in the logins file.
    let _ = s.child.kill();
    let _ = s.child.wait();
    s.dir = std::path::PathBuf::from("/nonexistent-xdb");
    let s = Server::start_in(dir.clone(), &[]);
    let mut r = login_as(&s, "reader", Some("shop")).unwrap();
    assert_eq!(scalar(&mut r, "SELECT COUNT(*) FROM t"), int(1));
    assert_eq!(errs(&mut r, "DELETE FROM t"), [229]);
    let mut dbc = login_as(&s, "dbc", None).unwrap();
    assert_eq!(
        scalar(&mut dbc, "SELECT IS_SRVROLEMEMBER('dbcreator')"),
        int(1)
    );
    let mut v = login_as(&s, "viewer", None).unwrap();
    assert_eq!(
        errs(&mut v, "SELECT COUNT(*) FROM sys.dm_os_spinlock_stats"),
        [300, 297]
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The permission names `sys.fn_my_permissions(securable, class)` lists for a session, as
/// "entity/subentity/permission".
fn my_permissions(c: &mut Client, securable: &str, class: &str) -> Vec<String> {
    let r = c
        .batch(&format!(
            "SELECT entity_name, subentity_name, permission_name \
             FROM sys.fn_my_permissions({securable}, '{class}')"
        ))
        .unwrap();
    assert_eq!(
        r.errors().count(),
        0,
        "{:?}",
        r.errors().collect::<Vec<_>>()
    );
    r.outputs
        .iter()
        .find_map(|o| match o {
            extentdb_sql::exec::Output::Rows { rows, .. } => Some(rows.clone()),
            _ => None,
        })
        .unwrap()
        .iter()
        .map(|r| {
            let t: Vec<String> = r
                .iter()
                .map(|v| match v {
                    Value::Text(s) => s.clone(),
                    v => format!("{v:?}"),
                })
                .collect();
            t.join("/")
        })
        .collect()
}

#[test]
fn fn_my_permissions_lists_what_the_session_holds() {
    let s = Server::start("perm-fnmy", &[]);
    let mut sa = set_up(&s);
    let mut r = login_as(&s, "reader", Some("shop")).unwrap();
    let mut d = login_as(&s, "denied", Some("shop")).unwrap();
    let mut g = login_as(&s, "granted", Some("shop")).unwrap();
    let server = my_permissions(&mut sa, "NULL", "SERVER");
    assert!(
        server.contains(&"server//CONTROL SERVER".to_string()),
        "{server:?}"
    );
    assert!(my_permissions(&mut r, "NULL", "SERVER").is_empty());
    let db = my_permissions(&mut r, "NULL", "DATABASE");
    assert!(db.contains(&"database//SELECT".to_string()), "{db:?}");
    assert!(db.contains(&"database//CONNECT".to_string()), "{db:?}");
    assert!(!db.contains(&"database//INSERT".to_string()), "{db:?}");
    assert_eq!(
        my_permissions(&mut r, "'dbo.t'", "OBJECT"),
        vec!["dbo.t//SELECT", "dbo.t/id/SELECT", "dbo.t/v/SELECT"]
    );
    // DENY wins over the role's SELECT; a GRANT on the table alone gives it.
    assert!(my_permissions(&mut d, "'dbo.t'", "OBJECT").is_empty());
    assert_eq!(
        my_permissions(&mut g, "'dbo.t'", "OBJECT"),
        vec!["dbo.t//SELECT", "dbo.t/id/SELECT", "dbo.t/v/SELECT"]
    );
    assert!(my_permissions(&mut r, "'dbo.nothing'", "OBJECT").is_empty());
    assert_eq!(
        errs(
            &mut r,
            "SELECT * FROM sys.fn_my_permissions(NULL, 'SCHEMA')"
        ),
        vec![40517]
    );
    assert_eq!(
        errs(&mut r, "SELECT * FROM sys.fn_my_permissions(NULL)"),
        vec![216]
    );
}
