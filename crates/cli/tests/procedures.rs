//! Stored procedures' definitions through real TDS sessions: CREATE / ALTER / CREATE OR
//! ALTER / DROP PROCEDURE with SQL Server's messages, the catalog as tools read it
//! (sys.procedures, sys.sql_modules, sys.parameters, sys.objects, OBJECT_ID,
//! OBJECT_DEFINITION, sp_helptext), the permission checks, concurrent DDL from several
//! sessions, and the procedures kept across kill -9 and BACKUP / RESTORE under a new name.

mod common;

use std::time::Duration;

use common::tds::{
    all_rows, errors, int, numbers, restart, rows, run, start_in_database, table, Server, PASSWORD,
};
use extentdb_sql::types::Value;
use extentdb_tds::client::{Client, ConnectOptions};

const PW: &str = "Proc-Test-Pass-1";

fn text(v: &Value) -> String {
    match v {
        Value::Text(s) => s.clone(),
        other => panic!("not text: {other:?}"),
    }
}

/// The first column of the first row.
fn scalar(c: &mut Client, sql: &str) -> Value {
    rows(&run(c, sql))[0][0].clone()
}

fn definition(c: &mut Client, name: &str) -> Option<String> {
    match scalar(c, &format!("SELECT OBJECT_DEFINITION(OBJECT_ID('{name}'))")) {
        Value::Null => None,
        v => Some(text(&v)),
    }
}

/// The batch's text is the definition, exactly as sent (comments before CREATE, the
/// line ends and the case as written), in sys.sql_modules, OBJECT_DEFINITION and
/// sp_helptext; the parameters are in sys.parameters with SQL Server's columns.
#[test]
fn definition_is_kept_as_sent() {
    let (_s, mut c) = start_in_database("procs-def", "shop", "");
    let def = "-- header kept\r\ncreate   PROCEDURE dbo.GetThing @id int, @name nvarchar(50) = N'x' OUTPUT,\n  @d decimal(9, 2) = NULL\nWITH RECOMPILE, EXECUTE AS CALLER\nAS\nBEGIN\n  SELECT @id AS id; -- trailing\nEND\n";
    run(&mut c, def);
    assert_eq!(definition(&mut c, "GetThing").as_deref(), Some(def));
    assert_eq!(definition(&mut c, "dbo.GetThing").as_deref(), Some(def));
    let id = int(&scalar(&mut c, "SELECT OBJECT_ID('GetThing', 'P')"));
    assert_eq!(
        scalar(&mut c, "SELECT OBJECT_ID('GetThing', 'U')"),
        Value::Null
    );
    let r = rows(&run(
        &mut c,
        "SELECT m.definition, m.uses_ansi_nulls, m.uses_quoted_identifier, m.is_recompiled, \
         m.execute_as_principal_id, p.name, p.type, p.type_desc, p.schema_id \
         FROM sys.sql_modules m JOIN sys.procedures p ON p.object_id = m.object_id",
    ));
    assert_eq!(r.len(), 1);
    assert_eq!(text(&r[0][0]), def);
    assert_eq!(
        &r[0][1..5],
        &[
            Value::Bit(true),
            Value::Bit(true),
            Value::Bit(true),
            Value::Null
        ]
    );
    assert_eq!(text(&r[0][5]), "GetThing");
    assert_eq!(text(&r[0][6]), "P ");
    assert_eq!(text(&r[0][7]), "SQL_STORED_PROCEDURE");
    assert_eq!(r[0][8], Value::Int(1));
    let objects = rows(&run(
        &mut c,
        &format!("SELECT name, type FROM sys.objects WHERE object_id = {id}"),
    ));
    assert_eq!(objects.len(), 1);
    assert_eq!(text(&objects[0][1]), "P ");
    let params = rows(&run(
        &mut c,
        &format!(
            "SELECT name, parameter_id, system_type_id, max_length, [precision], scale, is_output, \
             has_default_value FROM sys.parameters WHERE object_id = {id} ORDER BY parameter_id"
        ),
    ));
    // name, parameter_id, system_type_id, max_length, precision, scale, is_output,
    // has_default_value (0 for every T-SQL parameter, as SQL Server shows it).
    let shown: Vec<String> = params
        .iter()
        .map(|p| {
            let n: Vec<String> = (1..6).map(|i| int(&p[i]).to_string()).collect();
            format!("{} {} {:?} {:?}", text(&p[0]), n.join(" "), p[6], p[7])
        })
        .collect();
    assert_eq!(
        shown,
        [
            "@id 1 56 4 10 0 Bit(false) Bit(false)",
            "@name 2 231 100 0 0 Bit(true) Bit(false)",
            "@d 3 106 5 9 2 Bit(false) Bit(false)",
        ]
    );
    // INFORMATION_SCHEMA: the routine with its text, the parameters in order (OUTPUT is
    // INOUT), types as COLUMNS gives a column's.
    let r = rows(&run(
        &mut c,
        "SELECT ROUTINE_CATALOG, ROUTINE_SCHEMA, ROUTINE_NAME, ROUTINE_TYPE, DATA_TYPE, \
         ROUTINE_BODY, ROUTINE_DEFINITION, SQL_DATA_ACCESS FROM INFORMATION_SCHEMA.ROUTINES",
    ));
    let shown: Vec<String> = r[0].iter().map(|v| format!("{v:?}")).collect();
    let want =
        ["shop", "dbo", "GetThing", "PROCEDURE"].map(|t| format!("{:?}", Value::Text(t.into())));
    assert_eq!(&shown[..4], &want[..]);
    assert_eq!(r[0][4], Value::Null);
    assert_eq!(text(&r[0][6]), def);
    assert_eq!(text(&r[0][7]), "MODIFIES");
    let r = all_rows(&run(
        &mut c,
        "SELECT PARAMETER_NAME, ORDINAL_POSITION, PARAMETER_MODE, DATA_TYPE, \
         CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE \
         FROM INFORMATION_SCHEMA.PARAMETERS WHERE SPECIFIC_NAME = 'GetThing' \
         ORDER BY ORDINAL_POSITION",
    ));
    let shown: Vec<String> = r
        .iter()
        .map(|p| {
            p.iter()
                .map(common::tds::show)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(
        shown,
        [
            "@id 1 IN int NULL 10 0",
            "@name 2 INOUT nvarchar 50 NULL NULL",
            "@d 3 IN decimal NULL 9 2",
        ]
    );
    // sp_helptext: one column Text, a row per line, together the definition.
    let r = run(&mut c, "EXEC sp_helptext 'GetThing'");
    let lines: Vec<String> = all_rows(&r).iter().map(|r| text(&r[0])).collect();
    assert_eq!(lines.concat(), def);
    assert_eq!(lines[0], "-- header kept\r\n");
    assert_eq!(lines.len(), def.matches('\n').count());
    run(&mut c, "CREATE TABLE t (a int)");
    assert_eq!(numbers(&mut c, "EXEC sp_helptext 't'"), [15197]);
    assert_eq!(numbers(&mut c, "EXEC sp_helptext 'nothing'"), [15009]);
}

/// Every refusal with SQL Server's number, severity and state, and nothing changed by it.
#[test]
fn refusals_have_sql_servers_messages() {
    let (_s, mut c) = start_in_database("procs-msgs", "shop", "CREATE TABLE t (a int)");
    run(&mut c, "CREATE PROC p AS SELECT 1");
    let cases: &[(&str, (i32, u8, u8))] = &[
        ("CREATE PROCEDURE p AS SELECT 2", (2714, 16, 6)),
        ("CREATE PROCEDURE t AS SELECT 2", (2714, 16, 6)),
        ("SELECT 1; CREATE PROCEDURE q AS SELECT 2", (111, 15, 1)),
        ("SELECT 1\nALTER PROCEDURE p AS SELECT 2", (111, 15, 1)),
        (
            "SELECT 1; CREATE OR ALTER PROCEDURE q AS SELECT 2",
            (111, 15, 1),
        ),
        ("ALTER PROCEDURE nothing AS SELECT 2", (208, 16, 1)),
        ("DROP PROCEDURE nothing", (3701, 11, 5)),
        ("CREATE PROCEDURE other.q AS SELECT 1", (2760, 16, 1)),
        ("CREATE PROCEDURE master.dbo.q AS SELECT 1", (166, 15, 1)),
        (
            "CREATE PROCEDURE q @a int, @A int AS SELECT 1",
            (134, 15, 1),
        ),
        ("CREATE PROCEDURE q;2 AS SELECT 1", (40517, 16, 1)),
        (
            "CREATE PROCEDURE q WITH ENCRYPTION AS SELECT 1",
            (40517, 16, 1),
        ),
        (
            "CREATE PROCEDURE q WITH NATIVE_COMPILATION AS SELECT 1",
            (40517, 16, 1),
        ),
        (
            "CREATE PROCEDURE q WITH EXECUTE AS OWNER AS SELECT 1",
            (40517, 16, 1),
        ),
        (
            "CREATE PROCEDURE q WITH EXECUTE AS SELF AS SELECT 1",
            (40517, 16, 1),
        ),
        (
            "CREATE PROCEDURE q WITH EXECUTE AS 'u' AS SELECT 1",
            (40517, 16, 1),
        ),
        (
            "CREATE PROCEDURE q FOR REPLICATION AS SELECT 1",
            (40517, 16, 1),
        ),
        ("CREATE PROCEDURE #q AS SELECT 1", (40517, 16, 1)),
        (
            "CREATE PROCEDURE q @t dbo.tt READONLY AS SELECT 1",
            (40517, 16, 1),
        ),
        ("CREATE PROCEDURE q AS SELEC 1", (102, 15, 1)),
        (
            "BEGIN TRAN; EXEC('CREATE PROCEDURE q AS SELECT 1'); ROLLBACK",
            (40517, 16, 1),
        ),
        ("CREATE TABLE p (a int)", (2714, 16, 6)),
    ];
    for (sql, want) in cases {
        assert_eq!(errors(&mut c, sql), vec![*want], "{sql}");
    }
    // The 40517s name what is not built.
    let r = c
        .batch("CREATE PROCEDURE q WITH ENCRYPTION AS SELECT 1")
        .unwrap();
    let e = r.errors().next().unwrap();
    assert!(e.text.contains("ENCRYPTION"), "{}", e.text);
    let r = c.batch("CREATE PROCEDURE q;2 AS SELECT 1").unwrap();
    assert!(r.errors().next().unwrap().text.contains("numbered"));
    // Nothing was made by any of them; p is as created.
    let n = scalar(&mut c, "SELECT COUNT(*) FROM sys.procedures");
    assert_eq!(int(&n), 1);
    assert_eq!(
        definition(&mut c, "p").as_deref(),
        Some("CREATE PROC p AS SELECT 1")
    );
}

/// ALTER keeps the object id and create date and moves modify_date; CREATE OR ALTER makes
/// or alters; DROP [IF EXISTS] drops a list, each in turn; a dropped name is free again,
/// for a procedure or a table.
#[test]
fn alter_and_drop() {
    let (_s, mut c) = start_in_database("procs-alter", "shop", "");
    run(&mut c, "CREATE PROCEDURE a AS SELECT 1");
    let id = int(&scalar(&mut c, "SELECT OBJECT_ID('a')"));
    let created = scalar(&mut c, "SELECT create_date FROM sys.procedures");
    std::thread::sleep(Duration::from_millis(20));
    run(&mut c, "ALTER PROCEDURE a @x int = 5 AS SELECT @x");
    let r = rows(&run(
        &mut c,
        "SELECT object_id, create_date, modify_date FROM sys.procedures",
    ));
    assert_eq!(int(&r[0][0]), id);
    assert_eq!(r[0][1], created);
    assert_ne!(r[0][2], created);
    assert_eq!(
        definition(&mut c, "a").as_deref(),
        Some("ALTER PROCEDURE a @x int = 5 AS SELECT @x")
    );
    run(&mut c, "CREATE OR ALTER PROCEDURE a AS SELECT 2");
    run(&mut c, "CREATE OR ALTER PROC b AS SELECT 3");
    assert_eq!(int(&scalar(&mut c, "SELECT OBJECT_ID('a')")), id);
    assert_eq!(
        int(&scalar(&mut c, "SELECT COUNT(*) FROM sys.procedures")),
        2
    );
    // DROP of a list stops at the first missing one (those before it are gone).
    assert_eq!(numbers(&mut c, "DROP PROCEDURE a, nothing, b"), [3701]);
    assert_eq!(scalar(&mut c, "SELECT OBJECT_ID('a')"), Value::Null);
    assert!(definition(&mut c, "b").is_some());
    run(&mut c, "DROP PROCEDURE IF EXISTS nothing, dbo.b");
    assert_eq!(
        int(&scalar(&mut c, "SELECT COUNT(*) FROM sys.procedures")),
        0
    );
    assert_eq!(
        int(&scalar(&mut c, "SELECT COUNT(*) FROM sys.parameters")),
        0
    );
    run(&mut c, "CREATE TABLE a (v int)");
    run(&mut c, "DROP TABLE a");
    run(&mut c, "CREATE PROC a AS SELECT 4");
    assert_ne!(
        int(&scalar(&mut c, "SELECT OBJECT_ID('a')")),
        id,
        "ids are not reused"
    );
}

/// A 200 KB definition is kept whole through a catalog save and a kill -9.
#[test]
fn large_definition_survives_kill9() {
    let (s, mut c) = start_in_database("procs-large", "shop", "");
    let def = format!(
        "CREATE PROC big AS\n{}SELECT 1",
        "-- padding line of text\n".repeat(9_000)
    );
    assert!(def.len() > 200_000);
    run(&mut c, &def);
    drop(c);
    let s = restart(s);
    let mut c = s.connect_to(Some("shop"));
    assert_eq!(definition(&mut c, "big"), Some(def));
}

/// Procedures survive kill -9 once CREATE returned, an ALTER's new text and a DROP too;
/// BACKUP then RESTORE under a new name brings them; DROP DATABASE takes them.
#[test]
fn survive_kill9_and_backup_restore() {
    let (s, mut c) = start_in_database("procs-durable", "shop", "");
    run(&mut c, "CREATE PROC keep @a int OUTPUT AS SELECT 1");
    run(&mut c, "CREATE PROC changed AS SELECT 1");
    run(&mut c, "ALTER PROC changed AS SELECT 2");
    run(&mut c, "CREATE PROC gone AS SELECT 1");
    run(&mut c, "DROP PROC gone");
    drop(c);
    let s = restart(s);
    let mut c = s.connect_to(Some("shop"));
    let names = |c: &mut Client| -> Vec<String> {
        let r = run(c, "SELECT name FROM sys.procedures ORDER BY name");
        all_rows(&r).iter().map(|r| text(&r[0])).collect()
    };
    assert_eq!(names(&mut c), ["changed", "keep"]);
    assert_eq!(
        definition(&mut c, "changed").as_deref(),
        Some("ALTER PROC changed AS SELECT 2")
    );
    assert_eq!(
        int(&scalar(
            &mut c,
            "SELECT COUNT(*) FROM sys.parameters WHERE is_output = 1"
        )),
        1
    );
    run(&mut c, "BACKUP DATABASE shop TO DISK = 'procs.bak'");
    run(
        &mut c,
        "RESTORE DATABASE shop2 FROM DISK = 'procs.bak' WITH MOVE 'shop' TO 'shop2.mdf', \
         MOVE 'shop_log' TO 'shop2_log.ldf'",
    );
    run(&mut c, "USE shop2");
    assert_eq!(names(&mut c), ["changed", "keep"]);
    assert_eq!(
        definition(&mut c, "keep").as_deref(),
        Some("CREATE PROC keep @a int OUTPUT AS SELECT 1")
    );
    run(
        &mut c,
        "USE master; DROP DATABASE shop2; CREATE DATABASE shop2",
    );
    run(&mut c, "USE shop2");
    assert!(names(&mut c).is_empty());
}

fn login_as(addr: &str, user: &str) -> Client {
    Client::connect(
        addr,
        &ConnectOptions {
            user: user.into(),
            password: if user == "sa" {
                PASSWORD.into()
            } else {
                PW.into()
            },
            database: Some("shop".into()),
            timeout: Some(Duration::from_secs(60)),
            ..ConnectOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{user}: {e:?}"))
}

/// CREATE PROCEDURE needs the permission (db_ddladmin, db_owner, or GRANT CREATE
/// PROCEDURE), Msg 262 otherwise; ALTER and DROP need ALTER, Msg 3701 at level 14; EXEC
/// needs EXECUTE, Msg 229 otherwise.
#[test]
fn permissions() {
    let (s, mut c) = start_in_database("procs-perms", "shop", "");
    for (user, role) in [
        ("ddl", Some("db_ddladmin")),
        ("reader", Some("db_datareader")),
        ("granted", None),
    ] {
        run(
            &mut c,
            &format!("CREATE LOGIN {user} WITH PASSWORD = '{PW}'"),
        );
        run(&mut c, &format!("CREATE USER {user} FOR LOGIN {user}"));
        if let Some(role) = role {
            run(&mut c, &format!("ALTER ROLE {role} ADD MEMBER {user}"));
        }
    }
    run(&mut c, "GRANT CREATE PROCEDURE TO granted");
    run(&mut c, "CREATE PROC sa_made AS SELECT 1");
    let mut reader = login_as(&s.addr, "reader");
    assert_eq!(
        errors(&mut reader, "CREATE PROC r AS SELECT 1"),
        [(262, 14, 1)]
    );
    assert_eq!(
        errors(&mut reader, "ALTER PROC sa_made AS SELECT 2"),
        [(3701, 14, 20)]
    );
    assert_eq!(errors(&mut reader, "DROP PROC sa_made"), [(3701, 14, 20)]);
    let mut ddl = login_as(&s.addr, "ddl");
    run(&mut ddl, "CREATE PROC d AS SELECT 1");
    run(&mut ddl, "ALTER PROC sa_made AS SELECT 3");
    let mut granted = login_as(&s.addr, "granted");
    run(&mut granted, "CREATE PROC g AS SELECT 1");
    assert_eq!(
        int(&scalar(&mut c, "SELECT COUNT(*) FROM sys.procedures")),
        3
    );
    assert_eq!(
        definition(&mut c, "sa_made").as_deref(),
        Some("ALTER PROC sa_made AS SELECT 3")
    );
    // EXEC needs EXECUTE: not db_datareader's nor db_ddladmin's; a GRANT on the procedure
    // or on the database gives it; a DROP takes the grants on the procedure with it.
    assert_eq!(errors(&mut reader, "EXEC sa_made"), [(229, 14, 5)]);
    let r = reader.batch("EXEC sa_made").unwrap();
    assert_eq!(
        r.errors().next().unwrap().text,
        "The EXECUTE permission was denied on the object 'sa_made', database 'shop', schema 'dbo'."
    );
    assert_eq!(errors(&mut ddl, "EXEC d"), [(229, 14, 5)]);
    run(&mut c, "GRANT EXECUTE ON dbo.sa_made TO reader");
    assert_eq!(int(&rows(&run(&mut reader, "EXEC sa_made"))[0][0]), 3);
    assert_eq!(errors(&mut reader, "EXEC d"), [(229, 14, 5)]);
    run(&mut c, "GRANT EXECUTE TO ddl");
    assert_eq!(int(&rows(&run(&mut ddl, "EXEC d"))[0][0]), 1);
    run(&mut c, "DENY EXECUTE ON sa_made TO ddl");
    assert_eq!(errors(&mut ddl, "EXEC sa_made"), [(229, 14, 5)]);
    run(&mut c, "DROP PROC sa_made");
    run(&mut c, "CREATE PROC sa_made AS SELECT 4");
    assert_eq!(errors(&mut reader, "EXEC sa_made"), [(229, 14, 5)]);
    assert_eq!(int(&rows(&run(&mut ddl, "EXEC sa_made"))[0][0]), 4);
}

/// Several sessions at once: four CREATE the same name and exactly one wins (the others
/// get 2714); three read the definition while a fourth ALTERs it over and over, and every
/// read sees one whole version, never a mix or none.
#[test]
fn concurrent_sessions() {
    let (s, mut c) = start_in_database("procs-conc", "shop", "");
    let addr = s.addr.clone();
    let connect = |addr: &str| {
        let mut c = common::tds::connect_at(addr, Some("shop"), 60).unwrap();
        run(&mut c, "SET NOCOUNT ON");
        c
    };
    let creators: Vec<_> = (0..4)
        .map(|i| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let mut c = connect(&addr);
                numbers(&mut c, &format!("CREATE PROC race AS SELECT {i}"))
            })
        })
        .collect();
    let results: Vec<Vec<i32>> = creators.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(
        results.iter().filter(|r| r.is_empty()).count(),
        1,
        "{results:?}"
    );
    assert!(
        results.iter().all(|r| r.is_empty() || r == &[2714]),
        "{results:?}"
    );
    let version = |n: u32| format!("ALTER PROC race AS SELECT '{}'", n.to_string().repeat(500));
    run(&mut c, &version(0).replacen("ALTER", "CREATE OR ALTER", 1));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let mut c = connect(&addr);
                let mut seen = 0;
                for _ in 0..60 {
                    let d = definition(&mut c, "race").expect("always there");
                    let body = d.rsplit('\'').nth(1).unwrap().to_string();
                    let digit = body.chars().next().unwrap();
                    assert!(body.chars().all(|x| x == digit) && body.len() == 500, "{d}");
                    seen += 1;
                }
                seen
            })
        })
        .collect();
    let mut alterer = connect(&addr);
    for n in 1..=9 {
        run(&mut alterer, &version(n));
    }
    for r in readers {
        assert_eq!(r.join().unwrap(), 60);
    }
    assert_eq!(definition(&mut c, "race"), Some(version(9)));
}

/// EXEC binds by place, by name and DEFAULT, writes OUTPUT arguments back, and gives
/// RETURN's status (0 without one); result sets of the body reach the client.
#[test]
fn exec_binds_outputs_and_returns() {
    let (_s, mut c) = start_in_database("procs-exec", "shop", "");
    run(
        &mut c,
        "CREATE PROC add2 @a int, @b int = 10, @sum bigint OUTPUT AS\nBEGIN\n  SET @sum = @a + @b;\n  RETURN @a\nEND",
    );
    run(
        &mut c,
        "CREATE PROC sel @label varchar(10) = 'none' AS SELECT 42 AS x, @label AS label",
    );
    let one = |c: &mut Client, sql: &str| -> Vec<i64> {
        let r = run(c, sql);
        let last = all_rows(&r).pop().expect("a row");
        last.iter().map(int).collect()
    };
    let got = one(
        &mut c,
        "DECLARE @s bigint, @rc int; EXEC @rc = add2 1, 2, @s OUTPUT; SELECT @s, @rc",
    );
    assert_eq!(got, [3, 1]);
    let got = one(
        &mut c,
        "DECLARE @s bigint; EXEC add2 @a = 5, @sum = @s OUT; SELECT @s",
    );
    assert_eq!(got, [15]);
    let got = one(
        &mut c,
        "DECLARE @s bigint; EXECUTE add2 7, DEFAULT, @s OUTPUT; SELECT @s",
    );
    assert_eq!(got, [17]);
    // Without OUTPUT at the call the caller's variable is left alone.
    let got = one(
        &mut c,
        "DECLARE @s bigint = -1; EXEC add2 1, 1, @s; SELECT @s",
    );
    assert_eq!(got, [-1]);
    let got = one(&mut c, "DECLARE @rc int = 9; EXEC @rc = sel; SELECT @rc");
    assert_eq!(got, [0]);
    let r = rows(&run(&mut c, "EXEC sel 'abc'"));
    assert_eq!(r, vec![vec![Value::Int(42), Value::Text("abc".into())]]);
    // A first statement needs no EXEC.
    let r = rows(&run(&mut c, "sel @label = xyz"));
    assert_eq!(r[0][1], Value::Text("xyz".into()));
    let cases: &[(&str, (i32, u8, u8))] = &[
        ("EXEC add2", (201, 16, 4)),
        ("EXEC add2 1, 2, 3, 4", (8144, 16, 2)),
        ("EXEC add2 @x = 1", (8145, 16, 2)),
        ("EXEC add2 @a = 1, 2", (119, 15, 1)),
        ("DECLARE @v int; EXEC add2 @v OUTPUT, 1", (8162, 16, 2)),
        ("EXEC add2 1, 2, 5 OUTPUT", (179, 15, 1)),
        ("EXEC nothing", (2812, 16, 62)),
        ("EXEC other.add2 1", (2812, 16, 62)),
    ];
    for (sql, want) in cases {
        assert_eq!(errors(&mut c, sql), vec![*want], "{sql}");
    }
}

/// The body has its own scope: @@NESTLEVEL and @@PROCID, its #temp tables dropped at its
/// end, its SET options undone, nesting to 32 and 217 past it, 266 for a body that leaves
/// a transaction open, an XACT_ABORT error inside ending the caller's batch, and its
/// errors carry its name and their line in its definition.
#[test]
fn exec_scope_nesting_and_errors() {
    let (_s, mut c) = start_in_database("procs-scope", "shop", "");
    run(&mut c, "CREATE PROC lvl AS SELECT @@NESTLEVEL, @@PROCID");
    let r = rows(&run(&mut c, "EXEC lvl"));
    let id = int(&scalar(&mut c, "SELECT OBJECT_ID('lvl')"));
    assert_eq!((int(&r[0][0]), int(&r[0][1])), (1, id));
    assert_eq!(int(&scalar(&mut c, "SELECT @@NESTLEVEL")), 0);
    // Its variables are its own: the caller's @x is no redeclaration inside.
    run(
        &mut c,
        "CREATE PROC own AS BEGIN DECLARE @x int = 5; SELECT @x END",
    );
    let r = all_rows(&run(&mut c, "DECLARE @x int = 1; EXEC own; SELECT @x"));
    assert_eq!((int(&r[0][0]), int(&r[1][0])), (5, 1));
    run(
        &mut c,
        "CREATE PROC mk AS BEGIN CREATE TABLE #t (a int); INSERT #t VALUES (1); SELECT COUNT(*) FROM #t END",
    );
    run(&mut c, "EXEC mk");
    run(&mut c, "EXEC mk");
    assert_eq!(numbers(&mut c, "SELECT * FROM #t"), [208]);
    run(
        &mut c,
        "CREATE PROC deep @n int OUTPUT AS BEGIN SET @n = @@NESTLEVEL; IF @@NESTLEVEL < 32 EXEC deep @n OUTPUT END",
    );
    let got = int(&all_rows(&run(
        &mut c,
        "DECLARE @n int; EXEC deep @n OUTPUT; SELECT @n",
    ))[0][0]);
    assert_eq!(got, 32);
    run(&mut c, "CREATE PROC rec AS EXEC rec");
    let r = c.batch("EXEC rec").unwrap();
    let e: Vec<_> = r.errors().collect();
    assert_eq!(e.len(), 1);
    assert_eq!((e[0].number, e[0].severity, e[0].state), (217, 16, 1));
    assert_eq!(e[0].procedure.as_deref(), Some("rec"));
    run(&mut c, "CREATE PROC opens AS BEGIN TRAN");
    assert_eq!(errors(&mut c, "EXEC opens"), [(266, 16, 2)]);
    assert_eq!(int(&scalar(&mut c, "SELECT @@TRANCOUNT")), 1);
    run(&mut c, "ROLLBACK");
    // An error under XACT_ABORT inside ends the caller's batch too; the SET goes with
    // the body (the caller's transaction then survives an error).
    run(
        &mut c,
        "CREATE PROC xa AS BEGIN SET XACT_ABORT ON; BEGIN TRAN; SELECT 1/0; SELECT 'inside' END",
    );
    let r = c.batch("EXEC xa\nSELECT 'caller'").unwrap();
    assert_eq!(r.errors().map(|e| e.number).collect::<Vec<_>>(), [8134]);
    assert!(all_rows(&r).is_empty(), "{:?}", all_rows(&r));
    assert_eq!(int(&scalar(&mut c, "SELECT @@TRANCOUNT")), 0);
    let r = c
        .batch("BEGIN TRAN; SELECT 1/0; SELECT @@TRANCOUNT")
        .unwrap();
    assert_eq!(int(&all_rows(&r)[0][0]), 1);
    run(&mut c, "ROLLBACK");
    run(
        &mut c,
        "CREATE PROC bad AS\nBEGIN\n  PRINT 'x'\n  SELECT 1/0\nEND",
    );
    let r = c.batch("SELECT 0\nEXEC bad").unwrap();
    let e = r.errors().next().expect("8134");
    assert_eq!(
        (e.number, e.procedure.as_deref(), e.line),
        (8134, Some("bad"), 4)
    );
}

/// Three sessions execute a procedure while a fourth ALTERs it over and over: every
/// execution runs one version whole (its two result columns agree), never a mix.
#[test]
fn exec_while_another_session_alters() {
    let (s, mut c) = start_in_database("procs-exec-alter", "shop", "");
    let version =
        |n: i32| format!("CREATE OR ALTER PROC v AS BEGIN SELECT {n} AS a; SELECT {n} AS b END");
    run(&mut c, &version(0));
    let runners: Vec<_> = (0..3)
        .map(|_| {
            let addr = s.addr.clone();
            std::thread::spawn(move || {
                let mut c = common::tds::connect_at(&addr, Some("shop"), 60).unwrap();
                for _ in 0..50 {
                    let r = all_rows(&run(&mut c, "EXEC v"));
                    assert_eq!(r.len(), 2);
                    assert_eq!(r[0][0], r[1][0], "one version whole");
                }
            })
        })
        .collect();
    let mut alterer = common::tds::connect_at(&s.addr, Some("shop"), 60).unwrap();
    for n in 1..=20 {
        run(&mut alterer, &version(n));
    }
    for r in runners {
        r.join().unwrap();
    }
    assert_eq!(int(&rows(&run(&mut c, "EXEC v"))[0][0]), 20);
}

/// A TDS RPC request naming a user procedure runs it: typed parameters by place and by
/// name, the OUTPUT one back as a RETURNVALUE token, RETURN's value as RETURNSTATUS; a
/// failed call's status is 1 with SQL Server's message.
#[test]
fn rpc_runs_a_user_procedure() {
    use extentdb_sql::types::SqlType;
    let (_s, mut c) = start_in_database("procs-rpc", "shop", "");
    run(
        &mut c,
        "CREATE PROC add2 @a int, @b int = 10, @sum bigint OUTPUT AS\nBEGIN\n  SET @sum = @a + @b;\n  SELECT @a AS a;\n  RETURN @a * 2\nEND",
    );
    let r = c
        .call_procedure(
            "add2",
            &[
                ("", SqlType::Int, Value::Int(4), false),
                ("@sum", SqlType::BigInt, Value::Null, true),
                ("@b", SqlType::Int, Value::Int(5), false),
            ],
        )
        .unwrap();
    assert_eq!(r.errors().count(), 0);
    assert_eq!(rows(&r), vec![vec![Value::Int(4)]]);
    assert_eq!(r.return_status, Some(8));
    assert_eq!(
        r.return_values,
        vec![("@sum".to_string(), Value::BigInt(9))]
    );
    let r = c.call_procedure("add2", &[]).unwrap();
    let e: Vec<i32> = r.errors().map(|e| e.number).collect();
    assert_eq!((e, r.return_status), (vec![201], Some(1)));
    let r = c.call_procedure("nothing", &[]).unwrap();
    let e: Vec<i32> = r.errors().map(|e| e.number).collect();
    assert_eq!((e, r.return_status), (vec![2812], Some(1)));
}

/// A procedure with an empty body is a stub that does nothing (SQL Server takes it; Ola
/// Hallengren's script creates each procedure so, through sp_executesql, then ALTERs it).
#[test]
fn an_empty_body_is_a_stub_to_alter() {
    let s = Server::start("proc-stub", &[]);
    let mut a = s.connect();
    let mut b = s.connect();
    run(&mut a, "CREATE DATABASE st");
    run(
        &mut a,
        "USE st; IF OBJECT_ID('dbo.Stub', 'P') IS NULL \
         EXEC dbo.sp_executesql @statement = N'CREATE PROCEDURE [dbo].[Stub] AS'",
    );
    assert_eq!(
        table(
            &mut b,
            "USE st; DECLARE @rc int = 9; EXEC @rc = dbo.Stub; SELECT @rc"
        ),
        ["0"]
    );
    assert_eq!(
        table(&mut b, "SELECT definition FROM sys.sql_modules"),
        ["CREATE PROCEDURE [dbo].[Stub] AS"]
    );
    run(&mut a, "ALTER PROCEDURE dbo.Stub @x int AS SELECT @x * 2");
    assert_eq!(table(&mut b, "EXEC dbo.Stub 21"), ["42"]);
}
