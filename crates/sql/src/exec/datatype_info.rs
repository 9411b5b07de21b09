//! sp_server_info and sp_datatype_info: what a driver asks about the DBMS and its types
//! (ODBC's SQLGetInfo and SQLGetTypeInfo, JDBC's getTypeInfo), with SQL Server's result
//! columns. The rows describe extentdb: its types only, and sp_server_info's capability
//! answers true for extentdb (RENAME_TABLE, RENAME_COLUMN and SP_RENAME are 'N' while
//! sp_rename is not built, REMOTE_SPROC 'N': no linked servers).
//!
//! Invariant: every type sp_datatype_info lists is one CREATE TABLE accepts, under the
//! name it shows (an `identity` row is the type with IDENTITY); so no 'decimal()
//! identity' / 'numeric() identity' rows (extentdb's IDENTITY takes the integer types
//! only), nor money, time, datetimeoffset and the other types extentdb lacks.

use super::views::{cols, text, Rowset, SYSNAME};
use super::{Out, Session};
use crate::messages::SqlError;
use crate::types::{SqlType, Value};

pub(super) const SP_SERVER_INFO_PARAMS: &[&str] = &["@attribute_id"];
pub(super) const SP_DATATYPE_INFO_PARAMS: &[&str] = &["@data_type", "@ODBCVer"];

/// sp_server_info's rows: (attribute_id, attribute_name, attribute_value).
fn server_info() -> Vec<(i32, &'static str, String)> {
    let (a, b, c, d) = super::server_properties::PRODUCT_VERSION;
    let s = |v: &str| v.to_string();
    vec![
        (1, "DBMS_NAME", s("Microsoft SQL Server")),
        (
            2,
            "DBMS_VER",
            format!("Microsoft SQL Server 2022 - {a}.{b}.{c}.{d}"),
        ),
        (10, "OWNER_TERM", s("owner")),
        (11, "TABLE_TERM", s("table")),
        (12, "MAX_OWNER_NAME_LENGTH", s("128")),
        (13, "TABLE_LENGTH", s("128")),
        (14, "MAX_QUAL_LENGTH", s("128")),
        (15, "COLUMN_LENGTH", s("128")),
        (16, "IDENTIFIER_CASE", s("MIXED")),
        (17, "TX_ISOLATION", s("2")),
        (
            18,
            "COLLATION_SEQ",
            s("charset=iso_1 sort_order=nocase_iso charset_num=1 sort_order_num=52"),
        ),
        (19, "SAVEPOINT_SUPPORT", s("Y")),
        (20, "MULTI_RESULT_SETS", s("Y")),
        (22, "ACCESSIBLE_TABLES", s("Y")),
        (100, "USERID_LENGTH", s("128")),
        (101, "QUALIFIER_TERM", s("database")),
        (102, "NAMED_TRANSACTIONS", s("Y")),
        (103, "SPROC_AS_LANGUAGE", s("Y")),
        (104, "ACCESSIBLE_SPROC", s("Y")),
        (105, "MAX_INDEX_COLS", s("16")),
        (106, "RENAME_TABLE", s("N")),
        (107, "RENAME_COLUMN", s("N")),
        (108, "DROP_COLUMN", s("Y")),
        (109, "INCREASE_COLUMN_LENGTH", s("Y")),
        (110, "DDL_IN_TRANSACTION", s("Y")),
        (111, "DESCENDING_INDEXES", s("Y")),
        (112, "SP_RENAME", s("N")),
        (113, "REMOTE_SPROC", s("N")),
        (500, "SYS_SPROC_VERSION", format!("{a}.{b:02}.{c}")),
    ]
}

/// One type: (TYPE_NAME, DATA_TYPE (ODBC 3), PRECISION, prefix, suffix, CREATE_PARAMS,
/// CASE_SENSITIVE, SEARCHABLE, UNSIGNED_ATTRIBUTE, AUTO_INCREMENT, MINIMUM_SCALE,
/// MAXIMUM_SCALE, SQL_DATA_TYPE, SQL_DATETIME_SUB, NUM_PREC_RADIX, USERTYPE).
type TypeRow = (
    &'static str,
    i16,
    i32,
    Option<&'static str>,
    Option<&'static str>,
    Option<&'static str>,
    i16,
    i16,
    Option<i16>,
    Option<i16>,
    Option<i16>,
    Option<i16>,
    i16,
    Option<i16>,
    Option<i32>,
    i16,
);

const Q: Option<&str> = Some("'");

#[rustfmt::skip]
const TYPES: &[TypeRow] = &[
    ("uniqueidentifier", -11, 36, Q, Q, None, 0, 2, None, None, None, None, -11, None, None, 0),
    ("nvarchar", -9, 4000, Some("N'"), Q, Some("max length"), 0, 3, None, None, None, None, -9, None, None, 0),
    ("nchar", -8, 4000, Some("N'"), Q, Some("length"), 0, 3, None, None, None, None, -8, None, None, 0),
    ("bit", -7, 1, None, None, None, 0, 2, None, None, Some(0), Some(0), -7, None, None, 16),
    ("tinyint", -6, 3, None, None, None, 0, 2, Some(1), Some(0), Some(0), Some(0), -6, None, Some(10), 5),
    ("tinyint identity", -6, 3, None, None, None, 0, 2, Some(1), Some(1), Some(0), Some(0), -6, None, Some(10), 5),
    ("bigint", -5, 19, None, None, None, 0, 2, Some(0), Some(0), Some(0), Some(0), -5, None, Some(10), 0),
    ("bigint identity", -5, 19, None, None, None, 0, 2, Some(0), Some(1), Some(0), Some(0), -5, None, Some(10), 0),
    ("varbinary", -3, 8000, Some("0x"), None, Some("max length"), 0, 2, None, None, None, None, -3, None, None, 4),
    ("binary", -2, 8000, Some("0x"), None, Some("length"), 0, 2, None, None, None, None, -2, None, None, 3),
    ("char", 1, 8000, Q, Q, Some("length"), 0, 3, None, None, None, None, 1, None, None, 1),
    ("numeric", 2, 38, None, None, Some("precision,scale"), 0, 2, Some(0), Some(0), Some(0), Some(38), 2, None, Some(10), 10),
    ("decimal", 3, 38, None, None, Some("precision,scale"), 0, 2, Some(0), Some(0), Some(0), Some(38), 3, None, Some(10), 24),
    ("int", 4, 10, None, None, None, 0, 2, Some(0), Some(0), Some(0), Some(0), 4, None, Some(10), 7),
    ("int identity", 4, 10, None, None, None, 0, 2, Some(0), Some(1), Some(0), Some(0), 4, None, Some(10), 7),
    ("smallint", 5, 5, None, None, None, 0, 2, Some(0), Some(0), Some(0), Some(0), 5, None, Some(10), 6),
    ("smallint identity", 5, 5, None, None, None, 0, 2, Some(0), Some(1), Some(0), Some(0), 5, None, Some(10), 6),
    ("float", 6, 53, None, None, None, 0, 2, Some(0), Some(0), None, None, 6, None, Some(2), 8),
    ("real", 7, 24, None, None, None, 0, 2, Some(0), Some(0), None, None, 7, None, Some(2), 23),
    ("varchar", 12, 8000, Q, Q, Some("max length"), 0, 3, None, None, None, None, 12, None, None, 2),
    ("date", 91, 10, Q, Q, None, 0, 3, None, None, None, None, 9, Some(1), None, 0),
    ("datetime", 93, 23, Q, Q, None, 0, 3, None, None, Some(3), Some(3), 9, Some(3), None, 12),
    ("datetime2", 93, 27, Q, Q, Some("scale"), 0, 3, None, None, Some(0), Some(7), 9, Some(3), None, 0),
];

/// ODBC 2's codes for the date and time types (ODBC 3's 91 and 93).
fn odbc2(data_type: i16) -> i16 {
    match data_type {
        91 => 9,
        93 => 11,
        t => t,
    }
}

impl Session {
    /// sp_server_info [@attribute_id].
    pub(super) fn sp_server_info(
        &mut self,
        args: &[Value],
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        let id = match args.first().filter(|v| !v.is_null()) {
            Some(v) => Some(super::eval::as_i64(v).map_err(|e| vec![e])?),
            None => None,
        };
        let rows = server_info()
            .into_iter()
            .filter(|(a, _, _)| id.is_none_or(|id| id == i64::from(*a)))
            .map(|(a, n, v)| vec![Value::Int(a), text(n), text(&v)])
            .collect();
        let columns = cols(&[
            ("attribute_id", SqlType::Int),
            ("attribute_name", SqlType::VarChar(60)),
            ("attribute_value", SqlType::VarChar(255)),
        ]);
        self.send_rowset(Rowset { columns, rows }, out);
        Ok(())
    }

    /// sp_datatype_info [@data_type [, @ODBCVer]]: every type, or those of one ODBC
    /// DATA_TYPE, for ODBC 2 (the default) or 3.
    pub(super) fn sp_datatype_info(
        &mut self,
        args: &[Value],
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        let int_arg = |i: usize| match args.get(i).filter(|v| !v.is_null()) {
            Some(v) => super::eval::as_i64(v).map(Some).map_err(|e| vec![e]),
            None => Ok(None),
        };
        let wanted = int_arg(0)?;
        let odbc = int_arg(1)?.unwrap_or(2);
        let ty = |t: i16| if odbc >= 3 { t } else { odbc2(t) };
        let mut types: Vec<&TypeRow> = TYPES
            .iter()
            .filter(|r| wanted.is_none_or(|w| w == i64::from(ty(r.1))))
            .collect();
        types.sort_by_key(|r| (ty(r.1), r.0));
        let o = |v: Option<&str>| v.map_or(Value::Null, text);
        let sm = |v: Option<i16>| v.map_or(Value::Null, Value::SmallInt);
        let rows = types
            .into_iter()
            .map(|r| {
                let local = r.0.split(['(', ' ']).next().unwrap_or(r.0);
                vec![
                    text(r.0),
                    Value::SmallInt(ty(r.1)),
                    Value::Int(r.2),
                    o(r.3),
                    o(r.4),
                    o(r.5),
                    Value::SmallInt(1),
                    Value::SmallInt(r.6),
                    Value::SmallInt(r.7),
                    sm(r.8),
                    Value::SmallInt(0),
                    sm(r.9),
                    text(local),
                    sm(r.10),
                    sm(r.11),
                    Value::SmallInt(r.12),
                    sm(r.13),
                    r.14.map_or(Value::Null, Value::Int),
                    Value::Null,
                    Value::SmallInt(r.15),
                ]
            })
            .collect();
        let columns = cols(&[
            ("TYPE_NAME", SYSNAME),
            ("DATA_TYPE", SqlType::SmallInt),
            ("PRECISION", SqlType::Int),
            ("LITERAL_PREFIX", SqlType::VarChar(32)),
            ("LITERAL_SUFFIX", SqlType::VarChar(32)),
            ("CREATE_PARAMS", SqlType::VarChar(32)),
            ("NULLABLE", SqlType::SmallInt),
            ("CASE_SENSITIVE", SqlType::SmallInt),
            ("SEARCHABLE", SqlType::SmallInt),
            ("UNSIGNED_ATTRIBUTE", SqlType::SmallInt),
            ("MONEY", SqlType::SmallInt),
            ("AUTO_INCREMENT", SqlType::SmallInt),
            ("LOCAL_TYPE_NAME", SYSNAME),
            ("MINIMUM_SCALE", SqlType::SmallInt),
            ("MAXIMUM_SCALE", SqlType::SmallInt),
            ("SQL_DATA_TYPE", SqlType::SmallInt),
            ("SQL_DATETIME_SUB", SqlType::SmallInt),
            ("NUM_PREC_RADIX", SqlType::Int),
            ("INTERVAL_PRECISION", SqlType::SmallInt),
            ("USERTYPE", SqlType::SmallInt),
        ]);
        self.send_rowset(Rowset { columns, rows }, out);
        Ok(())
    }
}
