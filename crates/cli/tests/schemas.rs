//! Schemas through a real `extentdb serve` and real TDS sessions (crates/sql/src/exec/
//! schemas.rs): sys.schemas, SCHEMA_NAME, SCHEMA_ID, OBJECT_NAME and OBJECT_SCHEMA_NAME,
//! as SQLAlchemy's dialect and a DBA's scripts call them, over objects another session
//! made and dropped.

use std::time::Duration;

use extentdb_tds::client::{Client, ConnectOptions};

mod common;
use common::tds::{numbers, run, table, Server};

/// A login `name` with a user in database `db` and no other permission.
fn plain_user(s: &Server, admin: &mut Client, name: &str, db: &str) -> Client {
    let password = "Schema-Test-Pass-1";
    run(
        admin,
        &format!(
            "USE master; CREATE LOGIN {name} WITH PASSWORD = '{password}';
             USE {db}; CREATE USER {name} FOR LOGIN {name}"
        ),
    );
    Client::connect(
        &s.addr,
        &ConnectOptions {
            user: name.into(),
            password: password.into(),
            database: Some(db.into()),
            timeout: Some(Duration::from_secs(60)),
            ..Default::default()
        },
    )
    .unwrap_or_else(|_| panic!("{name}'s login"))
}

/// sys.schemas lists SQL Server's schemas of a new database with their ids and owners;
/// SCHEMA_NAME and SCHEMA_ID map them both ways (case-insensitively by name), NULL for
/// what no schema is; every user's default schema is dbo (SQLAlchemy's
/// `SELECT schema_name()` at connect), a plain user's too.
#[test]
fn schemas_and_their_functions() {
    let s = Server::start("schemas", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE sc; USE sc");
    let schemas = table(
        &mut c,
        "SELECT name, schema_id, principal_id FROM sys.schemas ORDER BY schema_id",
    );
    assert_eq!(
        &schemas[..5],
        [
            "dbo,1,1",
            "guest,2,2",
            "INFORMATION_SCHEMA,3,3",
            "sys,4,4",
            "db_owner,16384,16384"
        ]
    );
    assert_eq!(schemas.len(), 13, "{schemas:?}");
    assert_eq!(schemas[12], "db_denydatawriter,16393,16393");
    assert_eq!(
        table(
            &mut c,
            "SELECT SCHEMA_NAME(), SCHEMA_NAME(1), SCHEMA_NAME(4), SCHEMA_NAME(99),
                    SCHEMA_NAME(NULL), SCHEMA_ID(), SCHEMA_ID('DBO'), SCHEMA_ID('sys'),
                    SCHEMA_ID('nope'), SCHEMA_ID(NULL)"
        ),
        ["dbo,dbo,sys,NULL,NULL,1,1,4,NULL,NULL"]
    );
    let mut app = plain_user(&s, &mut c, "app", "sc");
    assert_eq!(
        table(&mut app, "SELECT SCHEMA_NAME(), SCHEMA_ID()"),
        ["dbo,1"]
    );
}

/// OBJECT_NAME and OBJECT_SCHEMA_NAME name what sys.objects lists (a table, its CHECK
/// and FOREIGN KEY constraints) in the current database or the one named by id, as
/// another session creates and drops it; NULL for an id no object has, a database that
/// does not exist, or an object dropped. sys.objects joins sys.schemas on schema_id, as
/// SQLAlchemy's has_table and reflection do.
#[test]
fn object_names_follow_other_sessions() {
    let s = Server::start("objnames", &[]);
    let mut a = s.connect();
    run(&mut a, "CREATE DATABASE ob; USE ob");
    let mut b = s.connect_to(Some("ob"));
    run(
        &mut a,
        "CREATE TABLE parent (id INT PRIMARY KEY);
         CREATE TABLE child (id INT PRIMARY KEY, p INT
             CONSTRAINT fk_child_parent REFERENCES parent (id),
             CONSTRAINT ck_child_id CHECK (id > 0))",
    );
    assert_eq!(
        table(
            &mut b,
            "SELECT OBJECT_NAME(OBJECT_ID('child')), OBJECT_SCHEMA_NAME(OBJECT_ID('child')),
                    OBJECT_NAME(OBJECT_ID('child'), DB_ID()),
                    OBJECT_NAME(OBJECT_ID('child'), DB_ID('master')),
                    OBJECT_NAME(OBJECT_ID('child'), 32000), OBJECT_NAME(OBJECT_ID('child'), NULL),
                    OBJECT_NAME(123456789), OBJECT_NAME(NULL), OBJECT_SCHEMA_NAME(123456789)"
        ),
        ["child,dbo,child,NULL,NULL,NULL,NULL,NULL,NULL"]
    );
    // Every sys.objects row names itself through OBJECT_NAME, from another database too.
    let listed = table(
        &mut b,
        "SELECT o.name, s.name, OBJECT_NAME(o.object_id), OBJECT_SCHEMA_NAME(o.object_id),
                OBJECT_NAME(o.parent_object_id)
         FROM sys.objects AS o JOIN sys.schemas AS s ON s.schema_id = o.schema_id
         ORDER BY o.name",
    );
    assert_eq!(
        listed,
        [
            "child,dbo,child,dbo,NULL",
            "ck_child_id,dbo,ck_child_id,dbo,child",
            "fk_child_parent,dbo,fk_child_parent,dbo,child",
            "parent,dbo,parent,dbo,NULL"
        ]
    );
    let id = table(&mut b, "SELECT OBJECT_ID('child')")[0].clone();
    run(&mut b, "USE master");
    assert_eq!(
        table(
            &mut b,
            &format!(
                "SELECT OBJECT_NAME({id}, DB_ID('ob')), OBJECT_SCHEMA_NAME({id}, DB_ID('ob'))"
            )
        ),
        ["child,dbo"]
    );
    run(&mut a, "DROP TABLE child");
    assert_eq!(
        table(&mut b, &format!("SELECT OBJECT_NAME({id}, DB_ID('ob'))")),
        ["NULL"]
    );
    // A wrong argument type is a conversion error, as an id is an int.
    assert_eq!(numbers(&mut b, "SELECT OBJECT_NAME('x')"), [245]);
}
