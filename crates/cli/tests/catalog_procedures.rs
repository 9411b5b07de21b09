//! The ODBC catalog procedures drivers call, through real TDS sessions: sp_tables,
//! sp_columns (and sp_columns_100), sp_pkeys, sp_fkeys, sp_server_info and sp_datatype_info
//! with SQL Server's result columns, parameters by position and by name, LIKE patterns
//! where SQL Server takes them, and its messages (15250, 15252, 201); a table another
//! session creates shows at once.

mod common;

use common::tds::{errors, run, show, start_in_database};
use extentdb_sql::exec::Output;
use extentdb_tds::client::{Client, Response};

/// The first result set: column names, and rows as `a|b|c` text.
fn result(r: &Response) -> (Vec<String>, Vec<String>) {
    r.outputs
        .iter()
        .find_map(|o| match o {
            Output::Rows { columns, rows } => Some((
                columns.iter().map(|c| c.0.clone()).collect(),
                rows.iter()
                    .map(|r| r.iter().map(show).collect::<Vec<_>>().join("|"))
                    .collect(),
            )),
            _ => None,
        })
        .expect("a result set")
}

fn rows_of(c: &mut Client, sql: &str) -> Vec<String> {
    result(&run(c, sql)).1
}

const SETUP: &str = "CREATE TABLE customer (id int IDENTITY(1, 1) PRIMARY KEY, name nvarchar(40) NOT NULL,
        balance decimal(10, 2) NULL DEFAULT 0, born date NULL, code char(4) NULL);
    CREATE TABLE orders (order_id int NOT NULL, line smallint NOT NULL, customer_id int NOT NULL,
        amount float NULL, note varchar(max) NULL,
        CONSTRAINT pk_orders PRIMARY KEY (order_id, line),
        CONSTRAINT fk_orders_customer FOREIGN KEY (customer_id) REFERENCES customer (id) ON DELETE CASCADE);
    CREATE TABLE cust_archive (id int NOT NULL)";

/// sp_tables: the user tables with SQL Server's five columns, by pattern (`%`, `_`), by
/// parameter name, by @table_type's quoted list, and 15250 for another database.
#[test]
fn sp_tables_lists_tables_by_pattern() {
    let (_s, mut c) = start_in_database("catproc-tables", "cat", SETUP);
    let r = run(&mut c, "EXEC sp_tables");
    let (columns, rows) = result(&r);
    assert_eq!(
        columns,
        [
            "TABLE_QUALIFIER",
            "TABLE_OWNER",
            "TABLE_NAME",
            "TABLE_TYPE",
            "REMARKS"
        ]
    );
    assert_eq!(
        rows,
        [
            "cat|dbo|cust_archive|TABLE|NULL",
            "cat|dbo|customer|TABLE|NULL",
            "cat|dbo|orders|TABLE|NULL"
        ]
    );
    assert_eq!(rows_of(&mut c, "EXEC sp_tables 'cust%'").len(), 2);
    assert_eq!(
        rows_of(&mut c, "EXEC sp_tables 'custome_'"),
        ["cat|dbo|customer|TABLE|NULL"]
    );
    assert_eq!(
        rows_of(
            &mut c,
            "EXEC sp_tables @table_name = 'ORDERS', @table_owner = 'dbo'"
        )
        .len(),
        1
    );
    assert_eq!(
        rows_of(&mut c, "EXEC sp_tables 'orders', 'nobody'").len(),
        0
    );
    assert_eq!(
        rows_of(
            &mut c,
            "EXEC sp_tables NULL, NULL, 'cat', '''TABLE'',''VIEW'''"
        )
        .len(),
        3
    );
    assert_eq!(
        rows_of(&mut c, "EXEC sp_tables NULL, NULL, NULL, '''VIEW'''").len(),
        0
    );
    assert_eq!(
        rows_of(&mut c, "EXEC sp_tables 'cust%', @fUsePattern = 0").len(),
        0
    );
    assert_eq!(
        errors(&mut c, "EXEC sp_tables 'orders', 'dbo', 'master'"),
        [(15250, 16, 1)]
    );
    // Another session's new table is there at its next call.
    let mut other = _s.connect_to(Some("cat"));
    run(&mut other, "CREATE TABLE later (a int)");
    assert_eq!(
        rows_of(&mut c, "EXEC sp_tables 'later'"),
        ["cat|dbo|later|TABLE|NULL"]
    );
}

/// sp_columns: SQL Server's nineteen columns and ODBC descriptions of each type
/// (identity in TYPE_NAME, defaults, nullability, ordinal), for ODBC 2 and 3, a column
/// pattern, and sp_columns_100's ten more columns with date as a date type.
#[test]
fn sp_columns_describes_columns() {
    let (_s, mut c) = start_in_database("catproc-columns", "cat", SETUP);
    let r = run(&mut c, "EXEC sp_columns 'customer'");
    let (columns, rows) = result(&r);
    assert_eq!(
        columns,
        [
            "TABLE_QUALIFIER",
            "TABLE_OWNER",
            "TABLE_NAME",
            "COLUMN_NAME",
            "DATA_TYPE",
            "TYPE_NAME",
            "PRECISION",
            "LENGTH",
            "SCALE",
            "RADIX",
            "NULLABLE",
            "REMARKS",
            "COLUMN_DEF",
            "SQL_DATA_TYPE",
            "SQL_DATETIME_SUB",
            "CHAR_OCTET_LENGTH",
            "ORDINAL_POSITION",
            "IS_NULLABLE",
            "SS_DATA_TYPE"
        ]
    );
    assert_eq!(
        rows,
        [
            "cat|dbo|customer|id|4|int identity|10|4|0|10|0|NULL|NULL|4|NULL|NULL|1|NO|NULL",
            "cat|dbo|customer|name|-9|nvarchar|40|80|NULL|NULL|0|NULL|NULL|-9|NULL|80|2|NO|NULL",
            "cat|dbo|customer|balance|3|decimal|10|12|2|10|1|NULL|((0))|3|NULL|NULL|3|YES|NULL",
            "cat|dbo|customer|born|-9|date|10|20|NULL|NULL|1|NULL|NULL|-9|NULL|NULL|4|YES|NULL",
            "cat|dbo|customer|code|1|char|4|4|NULL|NULL|1|NULL|NULL|1|NULL|4|5|YES|NULL"
        ]
    );
    let rows = rows_of(
        &mut c,
        "EXEC sp_columns @table_name = 'orders', @column_name = '%o%', @ODBCVer = 3",
    );
    assert_eq!(
        rows.iter()
            .map(|r| r.split('|').nth(3).unwrap().to_string())
            .collect::<Vec<_>>(),
        ["order_id", "customer_id", "amount", "note"]
    );
    assert!(
        rows[3].starts_with("cat|dbo|orders|note|12|varchar|2147483647|2147483647|"),
        "{}",
        rows[3]
    );
    assert!(
        rows[2].starts_with("cat|dbo|orders|amount|6|float|15|8|NULL|10|1|"),
        "{}",
        rows[2]
    );
    let r = run(
        &mut c,
        "EXEC sp_columns_100 'customer', 'dbo', 'cat', 'born', 0, 3, 1",
    );
    let (columns, rows) = result(&r);
    assert_eq!(columns.len(), 29);
    assert_eq!(
        columns[18..22],
        [
            "SS_IS_SPARSE",
            "SS_IS_COLUMN_SET",
            "SS_IS_COMPUTED",
            "SS_IS_IDENTITY"
        ]
    );
    assert_eq!(columns[28], "SS_DATA_TYPE");
    assert_eq!(
        rows,
        ["cat|dbo|customer|born|91|date|10|6|NULL|NULL|1|NULL|NULL|9|1|NULL|4|YES|0|0|0|0|NULL|NULL|NULL|NULL|NULL|NULL|NULL"]
    );
    // As mssql-jdbc's getColumns reads it: into a table variable of SQL Server's columns
    // (PRECISION bracketed: extentdb's parser takes it as a keyword only; Msg 156 bare).
    let r = run(
        &mut c,
        "DECLARE @r TABLE(TABLE_QUALIFIER SYSNAME, TABLE_OWNER SYSNAME, TABLE_NAME SYSNAME,
            COLUMN_NAME SYSNAME, DATA_TYPE SMALLINT, TYPE_NAME SYSNAME, [PRECISION] INT, LENGTH INT,
            SCALE SMALLINT, RADIX SMALLINT, NULLABLE SMALLINT, REMARKS VARCHAR(254),
            COLUMN_DEF NVARCHAR(4000), SQL_DATA_TYPE SMALLINT, SQL_DATETIME_SUB SMALLINT,
            CHAR_OCTET_LENGTH INT, ORDINAL_POSITION INT, IS_NULLABLE VARCHAR(254),
            SS_IS_SPARSE SMALLINT, SS_IS_COLUMN_SET SMALLINT, SS_IS_COMPUTED SMALLINT,
            SS_IS_IDENTITY SMALLINT, SS_UDT_CATALOG_NAME NVARCHAR(128),
            SS_UDT_SCHEMA_NAME NVARCHAR(128), SS_UDT_ASSEMBLY_TYPE_NAME NVARCHAR(max),
            SS_XML_SCHEMACOLLECTION_CATALOG_NAME NVARCHAR(128),
            SS_XML_SCHEMACOLLECTION_SCHEMA_NAME NVARCHAR(128),
            SS_XML_SCHEMACOLLECTION_NAME NVARCHAR(128), SS_DATA_TYPE TINYINT);
         INSERT INTO @r EXEC sp_columns_100 'customer', '%', 'cat', '%', 2, 3;
         SELECT COLUMN_NAME, SS_IS_IDENTITY FROM @r ORDER BY ORDINAL_POSITION",
    );
    assert_eq!(
        result(&r).1,
        ["id|1", "name|0", "balance|0", "born|0", "code|0"]
    );
    assert_eq!(errors(&mut c, "EXEC sp_columns"), [(201, 16, 4)]);
    assert_eq!(
        errors(&mut c, "EXEC sp_columns 'orders', NULL, 'tempdb'"),
        [(15250, 16, 1)]
    );
}

/// sp_pkeys and sp_fkeys: key columns in key order with the constraint's name; a foreign
/// key from either end, its rules (CASCADE 0, NO ACTION 1) and the key it references; 15252
/// with neither table.
#[test]
fn sp_pkeys_and_sp_fkeys_describe_keys() {
    let (_s, mut c) = start_in_database("catproc-keys", "cat", SETUP);
    let (columns, rows) = result(&run(&mut c, "EXEC sp_pkeys 'orders'"));
    assert_eq!(
        columns,
        [
            "TABLE_QUALIFIER",
            "TABLE_OWNER",
            "TABLE_NAME",
            "COLUMN_NAME",
            "KEY_SEQ",
            "PK_NAME"
        ]
    );
    assert_eq!(
        rows,
        [
            "cat|dbo|orders|order_id|1|pk_orders",
            "cat|dbo|orders|line|2|pk_orders"
        ]
    );
    assert_eq!(
        rows_of(&mut c, "EXEC sp_pkeys @table_name = 'cust_archive'").len(),
        0
    );
    assert_eq!(
        rows_of(&mut c, "EXEC sp_pkeys 'order%'").len(),
        0,
        "not a pattern"
    );
    let (columns, rows) = result(&run(&mut c, "EXEC sp_fkeys 'customer'"));
    assert_eq!(
        columns,
        [
            "PKTABLE_QUALIFIER",
            "PKTABLE_OWNER",
            "PKTABLE_NAME",
            "PKCOLUMN_NAME",
            "FKTABLE_QUALIFIER",
            "FKTABLE_OWNER",
            "FKTABLE_NAME",
            "FKCOLUMN_NAME",
            "KEY_SEQ",
            "UPDATE_RULE",
            "DELETE_RULE",
            "FK_NAME",
            "PK_NAME",
            "DEFERRABILITY"
        ]
    );
    assert_eq!(rows.len(), 1);
    assert!(
        rows[0].starts_with(
            "cat|dbo|customer|id|cat|dbo|orders|customer_id|1|1|0|fk_orders_customer|PK__"
        ),
        "{}",
        rows[0]
    );
    assert!(rows[0].ends_with("|7"));
    assert_eq!(
        rows_of(&mut c, "EXEC sp_fkeys @fktable_name = 'orders'").len(),
        1
    );
    assert_eq!(
        rows_of(&mut c, "EXEC sp_fkeys NULL, NULL, NULL, 'customer'").len(),
        0
    );
    assert_eq!(errors(&mut c, "EXEC sp_fkeys"), [(15252, 16, 1)]);
}

/// sp_server_info and sp_datatype_info: the attributes a driver reads, one by id; the
/// types extentdb has, by ODBC type and version.
#[test]
fn sp_server_info_and_sp_datatype_info() {
    let (_s, mut c) = start_in_database("catproc-info", "cat", "");
    let (columns, rows) = result(&run(&mut c, "EXEC sp_server_info"));
    assert_eq!(
        columns,
        ["attribute_id", "attribute_name", "attribute_value"]
    );
    assert!(rows.contains(&"1|DBMS_NAME|Microsoft SQL Server".to_string()));
    assert_eq!(
        rows_of(&mut c, "EXEC sp_server_info 16"),
        ["16|IDENTIFIER_CASE|MIXED"]
    );
    let r = run(&mut c, "EXEC sp_datatype_info");
    let (columns, rows) = result(&r);
    assert_eq!(columns.len(), 20);
    assert_eq!(columns[..3], ["TYPE_NAME", "DATA_TYPE", "PRECISION"]);
    assert_eq!(columns[19], "USERTYPE");
    assert!(
        rows.iter()
            .any(|r| r.starts_with("datetime|11|23|'|'|NULL|1|")),
        "ODBC 2's datetime"
    );
    let rows = rows_of(&mut c, "EXEC sp_datatype_info 4");
    assert_eq!(
        rows.iter()
            .map(|r| r.split('|').next().unwrap())
            .collect::<Vec<_>>(),
        ["int", "int identity"]
    );
    let rows = rows_of(
        &mut c,
        "EXEC sp_datatype_info @data_type = 93, @ODBCVer = 3",
    );
    assert_eq!(
        rows.iter()
            .map(|r| r.split('|').next().unwrap())
            .collect::<Vec<_>>(),
        ["datetime", "datetime2"]
    );
    // Every type listed is one CREATE TABLE takes.
    for r in rows_of(&mut c, "EXEC sp_datatype_info @ODBCVer = 3") {
        let name = r
            .split('|')
            .next()
            .unwrap()
            .replace("() identity", "(5) identity");
        let ty = name.replace(" identity", " IDENTITY");
        let sql = format!("CREATE TABLE probe (c {ty} NOT NULL); DROP TABLE probe");
        assert_eq!(errors(&mut c, &sql), [], "{sql}");
    }
}
