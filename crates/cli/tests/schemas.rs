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

/// INFORMATION_SCHEMA.TABLES, COLUMNS and SCHEMATA (usql's `\dt`, SQLAlchemy's
/// reflection) list what another session created, with SQL Server's values: DATA_TYPE by
/// the declared name (decimal, not numeric), lengths in characters and bytes (-1 for
/// MAX), precision and scale, DEFAULT definitions as SQL Server shows them, nullability,
/// character sets and the collation; a dropped table leaves both views.
#[test]
fn information_schema_views() {
    let s = Server::start("infoschema", &[]);
    let mut a = s.connect();
    run(&mut a, "CREATE DATABASE isc; USE isc");
    let mut b = s.connect_to(Some("isc"));
    run(
        &mut a,
        "CREATE TABLE orders (id INT IDENTITY PRIMARY KEY, code NVARCHAR(20) NOT NULL,
             note VARCHAR(MAX), amount DECIMAL(10, 2) DEFAULT 0, qty SMALLINT DEFAULT (1 + 1),
             placed DATETIME2(3) DEFAULT GETDATE(), tag CHAR(4) DEFAULT 'new', f FLOAT)",
    );
    assert_eq!(
        table(
            &mut b,
            "SELECT TABLE_CATALOG, TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE
             FROM INFORMATION_SCHEMA.TABLES"
        ),
        ["isc,dbo,orders,BASE TABLE"]
    );
    assert_eq!(
        table(
            &mut b,
            "SELECT COLUMN_NAME, ORDINAL_POSITION, COLUMN_DEFAULT, IS_NULLABLE, DATA_TYPE,
                    CHARACTER_MAXIMUM_LENGTH, CHARACTER_OCTET_LENGTH, NUMERIC_PRECISION,
                    NUMERIC_PRECISION_RADIX, NUMERIC_SCALE, DATETIME_PRECISION,
                    CHARACTER_SET_NAME, COLLATION_NAME
             FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'orders'
             ORDER BY ORDINAL_POSITION"
        ),
        [
            "id,1,NULL,NO,int,NULL,NULL,10,10,0,NULL,NULL,NULL",
            "code,2,NULL,NO,nvarchar,20,40,NULL,NULL,NULL,NULL,UNICODE,SQL_Latin1_General_CP1_CI_AS",
            "note,3,NULL,YES,varchar,-1,-1,NULL,NULL,NULL,NULL,iso_1,SQL_Latin1_General_CP1_CI_AS",
            "amount,4,((0)),YES,decimal,NULL,NULL,10,10,2,NULL,NULL,NULL",
            "qty,5,((1)+(1)),YES,smallint,NULL,NULL,5,10,0,NULL,NULL,NULL",
            "placed,6,(getdate()),YES,datetime2,NULL,NULL,NULL,NULL,NULL,3,NULL,NULL",
            "tag,7,('new'),YES,char,4,4,NULL,NULL,NULL,NULL,iso_1,SQL_Latin1_General_CP1_CI_AS",
            "f,8,NULL,YES,float,NULL,NULL,53,2,NULL,NULL,NULL,NULL",
        ]
    );
    let schemata = table(
        &mut b,
        "SELECT CATALOG_NAME, SCHEMA_NAME, SCHEMA_OWNER FROM INFORMATION_SCHEMA.SCHEMATA
         WHERE SCHEMA_NAME IN ('dbo', 'sys')",
    );
    assert_eq!(schemata, ["isc,dbo,dbo", "isc,sys,sys"]);
    run(&mut a, "DROP TABLE orders");
    assert_eq!(
        table(
            &mut b,
            "SELECT COUNT(*) FROM INFORMATION_SCHEMA.TABLES
             UNION ALL SELECT COUNT(*) FROM INFORMATION_SCHEMA.COLUMNS"
        ),
        ["0", "0"]
    );
}
