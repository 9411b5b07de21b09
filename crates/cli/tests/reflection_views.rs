//! The catalog as SQLAlchemy's mssql dialect reflects it, through a real `extentdb serve`
//! and several TDS sessions (crates/sql/src/exec/system_views.rs, type_views.rs,
//! column_views.rs, constraint_views.rs, schemas.rs' OBJECTPROPERTY / TYPE_NAME and
//! set_ops.rs' ORDER BY of a UNION): golden rows of sys.system_views, sys.types,
//! sys.identity_columns, sys.default_constraints, sys.extended_properties, sys.columns'
//! collation_name / default_object_id, sys.indexes' filter columns and the four
//! INFORMATION_SCHEMA constraint views, over objects other sessions make and drop.

mod common;
use common::tds::{all_rows, errors, numbers, run, table, Server};

/// sys.system_views names every view extentdb answers (each row's view is read here
/// without error), with negative unique ids and is_ms_shipped = 1; the dialect's
/// isolation-level probe finds dm_exec_sessions in it and reads each session's own level.
#[test]
fn system_views_name_every_view_and_the_probe_works() {
    let s = Server::start("reflect-sysviews", &[]);
    let mut a = s.connect();
    let mut b = s.connect();
    let views = table(
        &mut a,
        "SELECT s.name, v.name, v.object_id, v.type, v.is_ms_shipped FROM sys.system_views v \
         JOIN sys.schemas s ON s.schema_id = v.schema_id ORDER BY v.object_id DESC",
    );
    assert_eq!(views.len(), 59, "{views:?}");
    assert_eq!(views[0], "sys,allocation_units,-1001,V ,1");
    let mut ids = std::collections::BTreeSet::new();
    for v in &views {
        let parts: Vec<&str> = v.split(',').collect();
        assert!(ids.insert(parts[2].to_string()), "{v}");
        let sql = format!("SELECT COUNT(*) FROM {}.{}", parts[0], parts[1]);
        assert_eq!(errors(&mut b, &sql), [], "{sql}");
    }
    let probe = "SELECT name FROM sys.system_views WHERE name IN \
                 ('dm_exec_sessions', 'dm_pdw_nodes_exec_sessions')";
    assert_eq!(table(&mut a, probe), ["dm_exec_sessions"]);
    let level = "SELECT CASE transaction_isolation_level WHEN 0 THEN NULL \
                 WHEN 1 THEN 'READ UNCOMMITTED' WHEN 2 THEN 'READ COMMITTED' \
                 WHEN 3 THEN 'REPEATABLE READ' WHEN 4 THEN 'SERIALIZABLE' \
                 WHEN 5 THEN 'SNAPSHOT' END FROM sys.dm_exec_sessions \
                 WHERE session_id = @@SPID";
    run(&mut b, "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE");
    assert_eq!(table(&mut a, level), ["READ COMMITTED"]);
    assert_eq!(table(&mut b, level), ["SERIALIZABLE"]);
}

/// sys.types has SQL Server's rows for the types extentdb stores and sysname; TYPE_NAME
/// maps a user_type_id back; the dialect's join of sys.columns to sys.types (and to a
/// base type) names each column's type, for a table another session made.
#[test]
fn types_and_type_name() {
    let s = Server::start("reflect-types", &[]);
    let mut a = s.connect();
    let mut b = s.connect();
    assert_eq!(
        table(
            &mut a,
            "SELECT name, system_type_id, user_type_id, max_length, [precision], scale, \
             collation_name, is_nullable, is_user_defined FROM sys.types \
             WHERE name IN ('int', 'bigint', 'bit', 'decimal', 'datetime2', 'nvarchar', \
             'sysname') ORDER BY user_type_id"
        ),
        [
            "datetime2,42,42,8,27,7,NULL,1,0",
            "int,56,56,4,10,0,NULL,1,0",
            "bit,104,104,1,1,0,NULL,1,0",
            "decimal,106,106,17,38,38,NULL,1,0",
            "bigint,127,127,8,19,0,NULL,1,0",
            "nvarchar,231,231,8000,0,0,SQL_Latin1_General_CP1_CI_AS,1,0",
            "sysname,231,256,256,0,0,SQL_Latin1_General_CP1_CI_AS,0,0",
        ]
    );
    assert_eq!(table(&mut a, "SELECT COUNT(*) FROM sys.types"), ["20"]);
    assert_eq!(
        table(
            &mut a,
            "SELECT TYPE_NAME(56), TYPE_NAME(256), TYPE_NAME(108), TYPE_NAME(98), TYPE_NAME(NULL)"
        ),
        ["int,sysname,numeric,NULL,NULL"]
    );
    run(
        &mut b,
        "CREATE DATABASE rt; USE rt; CREATE TABLE t (a INT NOT NULL, b NVARCHAR(20), \
         c DECIMAL(10, 2), d DATETIME2, e BIT NOT NULL)",
    );
    run(&mut a, "USE rt");
    assert_eq!(
        table(
            &mut a,
            "SELECT c.name, t.name, base.name, c.is_nullable, c.max_length, c.collation_name \
             FROM sys.columns c JOIN sys.types t ON c.user_type_id = t.user_type_id \
             LEFT OUTER JOIN sys.types AS base ON t.system_type_id = base.system_type_id \
             AND base.user_type_id = base.system_type_id \
             WHERE c.object_id = object_id('[dbo].t') ORDER BY c.column_id"
        ),
        [
            "a,int,int,0,4,NULL",
            "b,nvarchar,nvarchar,1,40,SQL_Latin1_General_CP1_CI_AS",
            "c,decimal,decimal,1,9,NULL",
            "d,datetime2,datetime2,1,8,NULL",
            "e,bit,bit,0,1,NULL",
        ]
    );
}

/// sys.identity_columns shows each IDENTITY column's seed, increment and the last value
/// handed out, as another session's inserts move it (NULL before the first). DEFAULTs are
/// not yet objects: sys.default_constraints is empty where none exists and refused (40517)
/// where one does, whose column's default_object_id is then NULL. sys.extended_properties
/// and fn_listextendedproperty are empty, and sp_addextendedproperty is not built.
#[test]
fn identity_default_and_extended_properties() {
    let s = Server::start("reflect-identity", &[]);
    let mut a = s.connect();
    run(
        &mut a,
        "CREATE DATABASE ri; USE ri; CREATE TABLE t (id BIGINT IDENTITY(100, 5) PRIMARY KEY, \
         v INT NOT NULL)",
    );
    let mut b = s.connect_to(Some("ri"));
    let identity = "SELECT name, is_identity, system_type_id, seed_value, increment_value, \
                    last_value, is_not_for_replication FROM sys.identity_columns";
    assert_eq!(table(&mut a, identity), ["id,1,127,100,5,NULL,0"]);
    run(&mut b, "INSERT INTO t (v) VALUES (1), (2)");
    assert_eq!(table(&mut a, identity), ["id,1,127,100,5,105,0"]);
    assert_eq!(
        table(&mut a, "SELECT COUNT(*) FROM sys.default_constraints"),
        ["0"]
    );
    assert_eq!(
        table(
            &mut a,
            "SELECT name, default_object_id, rule_object_id FROM sys.columns ORDER BY column_id"
        ),
        ["id,0,0", "v,0,0"]
    );
    run(&mut b, "CREATE TABLE d (k INT, z INT NOT NULL DEFAULT 7)");
    assert_eq!(
        errors(&mut a, "SELECT * FROM sys.default_constraints"),
        [(40517, 16, 1)]
    );
    assert_eq!(
        table(
            &mut a,
            "SELECT c.name, c.default_object_id FROM sys.columns c \
             WHERE c.object_id = OBJECT_ID('d') ORDER BY c.column_id"
        ),
        ["k,0", "z,NULL"]
    );
    assert_eq!(
        table(&mut a, "SELECT COUNT(*) FROM sys.extended_properties"),
        ["0"]
    );
    assert_eq!(
        numbers(
            &mut a,
            "EXEC sp_addextendedproperty @name = N'MS_Description', @value = N'x'"
        ),
        [40517]
    );
    assert_eq!(
        table(&mut a, "SELECT COUNT(*) FROM sys.extended_properties"),
        ["0"]
    );
    // The dialect's comment-support probe, and its argument count checked.
    let listed = "SELECT 1 FROM fn_listextendedproperty(default, default, default, default, \
                  default, default, default)";
    assert_eq!(all_rows(&run(&mut b, listed)).len(), 0);
    assert_eq!(
        numbers(
            &mut b,
            "SELECT * FROM sys.fn_listextendedproperty(NULL, 'schema', 'dbo', 'table', 't', NULL)"
        ),
        [216]
    );
}

/// The four INFORMATION_SCHEMA constraint views over a parent (clustered PRIMARY KEY and a
/// UNIQUE constraint) and a child (a FOREIGN KEY to each, ON DELETE CASCADE on one, and a
/// column-level CHECK); rows go when another session drops the child.
#[test]
fn information_schema_constraints() {
    let s = Server::start("reflect-constraints", &[]);
    let mut a = s.connect();
    run(
        &mut a,
        "CREATE DATABASE rc; USE rc; CREATE TABLE parent (id INT NOT NULL, code NVARCHAR(10) \
         NOT NULL, CONSTRAINT pk_parent PRIMARY KEY (id), CONSTRAINT uq_code UNIQUE (code)); \
         CREATE TABLE child (id INT NOT NULL CONSTRAINT pk_child PRIMARY KEY, \
         pid INT NOT NULL, pcode NVARCHAR(10) NULL, qty INT CONSTRAINT ck_qty CHECK (qty > 0), \
         CONSTRAINT fk_pid FOREIGN KEY (pid) REFERENCES parent (id) ON DELETE CASCADE, \
         CONSTRAINT fk_code FOREIGN KEY (pcode) REFERENCES parent (code))",
    );
    let mut b = s.connect_to(Some("rc"));
    assert_eq!(
        table(
            &mut b,
            "SELECT CONSTRAINT_CATALOG, CONSTRAINT_SCHEMA, CONSTRAINT_NAME, TABLE_NAME, \
             CONSTRAINT_TYPE, IS_DEFERRABLE, INITIALLY_DEFERRED \
             FROM INFORMATION_SCHEMA.TABLE_CONSTRAINTS ORDER BY CONSTRAINT_NAME"
        ),
        [
            "rc,dbo,ck_qty,child,CHECK,NO,NO",
            "rc,dbo,fk_code,child,FOREIGN KEY,NO,NO",
            "rc,dbo,fk_pid,child,FOREIGN KEY,NO,NO",
            "rc,dbo,pk_child,child,PRIMARY KEY,NO,NO",
            "rc,dbo,pk_parent,parent,PRIMARY KEY,NO,NO",
            "rc,dbo,uq_code,parent,UNIQUE,NO,NO",
        ]
    );
    assert_eq!(
        table(
            &mut b,
            "SELECT CONSTRAINT_NAME, TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION \
             FROM INFORMATION_SCHEMA.KEY_COLUMN_USAGE ORDER BY CONSTRAINT_NAME"
        ),
        [
            "fk_code,child,pcode,1",
            "fk_pid,child,pid,1",
            "pk_child,child,id,1",
            "pk_parent,parent,id,1",
            "uq_code,parent,code,1",
        ]
    );
    assert_eq!(
        table(
            &mut b,
            "SELECT CONSTRAINT_NAME, UNIQUE_CONSTRAINT_SCHEMA, UNIQUE_CONSTRAINT_NAME, \
             MATCH_OPTION, UPDATE_RULE, DELETE_RULE \
             FROM INFORMATION_SCHEMA.REFERENTIAL_CONSTRAINTS ORDER BY CONSTRAINT_NAME"
        ),
        [
            "fk_code,dbo,uq_code,SIMPLE,NO ACTION,NO ACTION",
            "fk_pid,dbo,pk_parent,SIMPLE,NO ACTION,CASCADE",
        ]
    );
    assert_eq!(
        table(
            &mut b,
            "SELECT TABLE_NAME, COLUMN_NAME, CONSTRAINT_NAME \
             FROM INFORMATION_SCHEMA.CONSTRAINT_COLUMN_USAGE ORDER BY CONSTRAINT_NAME"
        ),
        [
            "child,qty,ck_qty",
            "child,pcode,fk_code",
            "child,pid,fk_pid",
            "child,id,pk_child",
            "parent,id,pk_parent",
            "parent,code,uq_code",
        ]
    );
    run(&mut a, "DROP TABLE child");
    assert_eq!(
        table(
            &mut b,
            "SELECT CONSTRAINT_NAME FROM INFORMATION_SCHEMA.TABLE_CONSTRAINTS \
             ORDER BY CONSTRAINT_NAME"
        ),
        ["pk_parent", "uq_code"]
    );
    assert_eq!(
        table(
            &mut b,
            "SELECT COUNT(*) FROM INFORMATION_SCHEMA.REFERENTIAL_CONSTRAINTS"
        ),
        ["0"]
    );
}

/// OBJECTPROPERTY answers the properties built for tables and constraints (NULL for an id
/// no object has, 40517 for a property not built); sys.indexes says no index is filtered;
/// a UNION's ORDER BY binds a qualified column of its first SELECT, as the dialect's
/// get_foreign_keys query writes it.
#[test]
fn objectproperty_indexes_and_union_order_by() {
    let s = Server::start("reflect-objprop", &[]);
    let mut a = s.connect();
    run(
        &mut a,
        "CREATE DATABASE ro; USE ro; CREATE TABLE p (id INT IDENTITY PRIMARY KEY, \
         code INT UNIQUE); CREATE TABLE c (id INT, pid INT CONSTRAINT fk_c FOREIGN KEY \
         REFERENCES p (id)); CREATE INDEX ix_c ON c (pid)",
    );
    let mut b = s.connect_to(Some("ro"));
    assert_eq!(
        table(
            &mut b,
            "SELECT OBJECTPROPERTY(OBJECT_ID('p'), 'IsUserTable'), \
             OBJECTPROPERTY(OBJECT_ID('p'), 'TableHasIdentity'), \
             OBJECTPROPERTY(OBJECT_ID('c'), 'TableHasPrimaryKey'), \
             OBJECTPROPERTY(OBJECT_ID('c'), 'TableHasForeignKey'), \
             OBJECTPROPERTY(OBJECT_ID('p'), 'TableHasClustIndex'), \
             OBJECTPROPERTY(OBJECT_ID('c'), 'TableHasClustIndex'), \
             OBJECTPROPERTY(OBJECT_ID('nothing'), 'IsUserTable'), \
             OBJECTPROPERTY(OBJECT_ID('dbo.pk_none'), 'CnstIsClustKey')"
        ),
        ["1,1,0,1,1,0,NULL,NULL"]
    );
    assert_eq!(
        table(
            &mut b,
            "SELECT OBJECTPROPERTY(object_id, 'IsForeignKey'), \
             OBJECTPROPERTY(object_id, 'IsConstraint'), \
             OBJECTPROPERTY(object_id, 'IsUserTable') FROM sys.objects WHERE name = 'fk_c'"
        ),
        ["1,1,0"]
    );
    assert_eq!(
        errors(
            &mut b,
            "SELECT OBJECTPROPERTY(OBJECT_ID('p'), 'IsIndexable')"
        ),
        [(40517, 16, 1)]
    );
    assert_eq!(
        table(
            &mut b,
            "SELECT i.name, i.type, i.has_filter, i.filter_definition FROM sys.indexes i \
             WHERE i.object_id = OBJECT_ID('c') ORDER BY i.index_id"
        ),
        ["NULL,0,0,NULL", "ix_c,2,0,NULL"]
    );
    assert_eq!(
        table(
            &mut b,
            "WITH t AS (SELECT name, object_id FROM sys.tables) \
             SELECT t.name, t.object_id FROM t WHERE t.name = 'p' \
             UNION SELECT x.name, x.object_id FROM sys.tables x WHERE x.name = 'c' \
             ORDER BY t.name DESC"
        )
        .iter()
        .map(|r| r.split(',').next().unwrap().to_string())
        .collect::<Vec<_>>(),
        ["p", "c"]
    );
    assert_eq!(
        numbers(
            &mut b,
            "SELECT name FROM sys.tables t UNION SELECT name FROM sys.objects o ORDER BY o.name"
        ),
        [4104]
    );
}
