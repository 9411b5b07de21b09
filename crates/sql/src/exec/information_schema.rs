//! The ISO catalog views SQL Server keeps in every database's INFORMATION_SCHEMA schema:
//! SCHEMATA, TABLES, COLUMNS, ROUTINES and PARAMETERS (usql's `\dt` reads TABLES;
//! SQLAlchemy's and pandas' reflection read TABLES and COLUMNS), with SQL Server's columns
//! and types.
//!
//! Invariants:
//! 1. Their rows are exactly the catalog's live user tables and columns (sys.tables',
//!    sys.columns'), and every schema of sys.schemas; all in dbo (schemas.rs).
//! 2. A column's DATA_TYPE is its declared type's name, by its system type id (a DECIMAL
//!    column is `decimal`, a NUMERIC one `numeric`); lengths are SQL Server's:
//!    CHARACTER_MAXIMUM_LENGTH in characters (-1 for `(MAX)`), CHARACTER_OCTET_LENGTH in
//!    bytes (-1 for `(MAX)`).
//! 3. ROUTINES and PARAMETERS show exactly the catalog's stored procedures (sys.procedures)
//!    and their parameters (sys.parameters); ROUTINE_DEFINITION is the definition's first
//!    4,000 characters. MAX_DYNAMIC_RESULT_SETS -1 and IS_NULL_CALL NULL for a procedure
//!    are as SQL Server is seen to show them (its documentation gives only functions').

use extentdb_format::catalog::{ColumnEntry, TableEntry};
use extentdb_storage::Database;

use super::views::{cols, text, Rowset, SYSNAME};
use crate::types::{SqlType, Value};

/// The character set SQL Server names for SQL_Latin1_General_CP1_CI_AS's single-byte data.
const CHARACTER_SET: &str = "iso_1";

/// INFORMATION_SCHEMA.SCHEMATA of database `db_name`.
pub(super) fn schemata(db_name: &str) -> Rowset {
    let schemas = super::schemas::schemas_view();
    Rowset {
        columns: cols(&[
            ("CATALOG_NAME", SYSNAME),
            ("SCHEMA_NAME", SYSNAME),
            ("SCHEMA_OWNER", SYSNAME),
            ("DEFAULT_CHARACTER_SET_CATALOG", SqlType::VarChar(6)),
            ("DEFAULT_CHARACTER_SET_SCHEMA", SqlType::VarChar(3)),
            ("DEFAULT_CHARACTER_SET_NAME", SYSNAME),
        ]),
        rows: schemas
            .rows
            .into_iter()
            .map(|r| {
                let name = r[0].clone();
                vec![
                    text(db_name),
                    name.clone(),
                    name,
                    Value::Null,
                    Value::Null,
                    text(CHARACTER_SET),
                ]
            })
            .collect(),
    }
}

/// INFORMATION_SCHEMA.TABLES of `db`.
pub(super) fn tables(db: &Database, db_name: &str) -> Rowset {
    Rowset {
        columns: cols(&[
            ("TABLE_CATALOG", SYSNAME),
            ("TABLE_SCHEMA", SYSNAME),
            ("TABLE_NAME", SYSNAME),
            ("TABLE_TYPE", SqlType::VarChar(10)),
        ]),
        rows: db
            .live_tables()
            .map(|t| {
                vec![
                    text(db_name),
                    text(&t.schema_name),
                    text(&t.name),
                    text("BASE TABLE"),
                ]
            })
            .collect(),
    }
}

/// INFORMATION_SCHEMA.COLUMNS of `db`.
pub(super) fn columns(db: &Database, db_name: &str) -> Rowset {
    let columns = cols(&[
        ("TABLE_CATALOG", SYSNAME),
        ("TABLE_SCHEMA", SYSNAME),
        ("TABLE_NAME", SYSNAME),
        ("COLUMN_NAME", SYSNAME),
        ("ORDINAL_POSITION", SqlType::Int),
        ("COLUMN_DEFAULT", SqlType::NVarChar(4000)),
        ("IS_NULLABLE", SqlType::VarChar(3)),
        ("DATA_TYPE", SYSNAME),
        ("CHARACTER_MAXIMUM_LENGTH", SqlType::Int),
        ("CHARACTER_OCTET_LENGTH", SqlType::Int),
        ("NUMERIC_PRECISION", SqlType::TinyInt),
        ("NUMERIC_PRECISION_RADIX", SqlType::SmallInt),
        ("NUMERIC_SCALE", SqlType::Int),
        ("DATETIME_PRECISION", SqlType::SmallInt),
        ("CHARACTER_SET_CATALOG", SYSNAME),
        ("CHARACTER_SET_SCHEMA", SYSNAME),
        ("CHARACTER_SET_NAME", SYSNAME),
        ("COLLATION_CATALOG", SYSNAME),
        ("COLLATION_SCHEMA", SYSNAME),
        ("COLLATION_NAME", SYSNAME),
        ("DOMAIN_CATALOG", SYSNAME),
        ("DOMAIN_SCHEMA", SYSNAME),
        ("DOMAIN_NAME", SYSNAME),
    ]);
    let mut rows = Vec::new();
    for t in db.live_tables() {
        for (i, c) in t.columns.iter().enumerate() {
            rows.push(column_row(t, db_name, i, c));
        }
    }
    Rowset { columns, rows }
}

fn column_row(t: &TableEntry, db_name: &str, i: usize, c: &ColumnEntry) -> Vec<Value> {
    let ty = super::tables::column_type(c).ok();
    let int = |v: Option<i64>| v.map_or(Value::Null, |v| Value::Int(v as i32));
    let (chars, octets) = character_lengths(ty);
    let numeric = numeric_precision(ty);
    let character = chars.is_some();
    let charset = match ty {
        Some(SqlType::NChar(_) | SqlType::NVarChar(_)) => Some("UNICODE"),
        Some(SqlType::Char(_) | SqlType::VarChar(_)) => Some(CHARACTER_SET),
        _ => None,
    };
    let text_or_null = |s: Option<&str>| s.map_or(Value::Null, text);
    let mut row = vec![
        text(db_name),
        text(&t.schema_name),
        text(&t.name),
        text(&c.name),
        Value::Int(i as i32 + 1),
        text_or_null(default_definition(&c.default_sql).as_deref()),
        text(if c.is_nullable { "YES" } else { "NO" }),
        text(type_name(c.system_type_id)),
        int(chars),
        int(octets),
        numeric.map_or(Value::Null, |(p, _, _)| Value::TinyInt(p)),
        numeric.map_or(Value::Null, |(_, r, _)| Value::SmallInt(r)),
        numeric
            .and_then(|(_, _, s)| s)
            .map_or(Value::Null, Value::Int),
        datetime_precision(ty).map_or(Value::Null, Value::SmallInt),
        Value::Null,
        Value::Null,
        text_or_null(charset),
        Value::Null,
        Value::Null,
        text_or_null(character.then_some(super::lower::SERVER_COLLATION)),
    ];
    row.extend([Value::Null, Value::Null, Value::Null]);
    row
}

/// CHARACTER_MAXIMUM_LENGTH and CHARACTER_OCTET_LENGTH (invariant 2); None for a type
/// that is not character or binary.
pub(super) fn character_lengths(ty: Option<SqlType>) -> (Option<i64>, Option<i64>) {
    let n = |n: u32, per: i64| match n {
        crate::types::MAX_LENGTH => (Some(-1), Some(-1)),
        n => (Some(i64::from(n)), Some(i64::from(n) * per)),
    };
    match ty {
        Some(
            SqlType::Char(m) | SqlType::VarChar(m) | SqlType::Binary(m) | SqlType::VarBinary(m),
        ) => n(m, 1),
        Some(SqlType::NChar(m) | SqlType::NVarChar(m)) => n(m, 2),
        _ => (None, None),
    }
}

/// NUMERIC_PRECISION, NUMERIC_PRECISION_RADIX and NUMERIC_SCALE of a numeric type.
pub(super) fn numeric_precision(ty: Option<SqlType>) -> Option<(u8, i16, Option<i32>)> {
    Some(match ty? {
        SqlType::TinyInt => (3, 10, Some(0)),
        SqlType::SmallInt => (5, 10, Some(0)),
        SqlType::Int => (10, 10, Some(0)),
        SqlType::BigInt => (19, 10, Some(0)),
        SqlType::Decimal { precision, scale } => (precision, 10, Some(i32::from(scale))),
        SqlType::Float => (53, 2, None),
        SqlType::Real => (24, 2, None),
        _ => return None,
    })
}

/// DATETIME_PRECISION: fractional-second digits of a date or time type.
fn datetime_precision(ty: Option<SqlType>) -> Option<i16> {
    match ty? {
        SqlType::Date => Some(0),
        SqlType::DateTime => Some(3),
        SqlType::DateTime2(s) => Some(i16::from(s)),
        _ => None,
    }
}

/// A type's name by its system type id (sys.types).
pub(super) fn type_name(system_type_id: u8) -> &'static str {
    match system_type_id {
        36 => "uniqueidentifier",
        40 => "date",
        42 => "datetime2",
        48 => "tinyint",
        52 => "smallint",
        56 => "int",
        59 => "real",
        61 => "datetime",
        62 => "float",
        104 => "bit",
        106 => "decimal",
        108 => "numeric",
        127 => "bigint",
        165 => "varbinary",
        167 => "varchar",
        173 => "binary",
        175 => "char",
        231 => "nvarchar",
        239 => "nchar",
        _ => "sql_variant",
    }
}

/// A DEFAULT as SQL Server shows its definition (`((0))`, `('x')`, `(getdate())`): the
/// stored text parsed and rendered as a CHECK definition is; None without a default.
pub(super) fn default_definition(default_sql: &str) -> Option<String> {
    if default_sql.is_empty() {
        return None;
    }
    let parsed = crate::parser::parse_batch(&format!("SELECT {default_sql}")).ok()?;
    let expr = match parsed.first().map(|s| &s.kind) {
        Some(crate::ast::StatementKind::Select(q)) => match &q.body {
            crate::ast::QueryBody::Select(s) => match s.items.first() {
                Some(crate::ast::SelectItem::Expr { expr, .. }) => expr.clone(),
                _ => return None,
            },
            _ => return None,
        },
        _ => return None,
    };
    super::check_constraints::definition_text(&expr).ok()
}

/// INFORMATION_SCHEMA.ROUTINES of `db`: one row per stored procedure (invariant 3); the
/// columns that describe a function's return value are NULL, as SQL Server gives them.
pub(super) fn routines(db: &Database, db_name: &str) -> Rowset {
    let n = |name: &'static str| (name, SYSNAME);
    let mut spec = vec![
        n("SPECIFIC_CATALOG"),
        n("SPECIFIC_SCHEMA"),
        n("SPECIFIC_NAME"),
        n("ROUTINE_CATALOG"),
        n("ROUTINE_SCHEMA"),
        n("ROUTINE_NAME"),
        ("ROUTINE_TYPE", SqlType::NVarChar(20)),
    ];
    spec.extend(RETURN_VALUE_COLUMNS.iter().copied());
    spec.extend([
        ("ROUTINE_BODY", SqlType::NVarChar(30)),
        ("ROUTINE_DEFINITION", SqlType::NVarChar(4000)),
        n("EXTERNAL_NAME"),
        ("EXTERNAL_LANGUAGE", SqlType::NVarChar(30)),
        ("PARAMETER_STYLE", SqlType::NVarChar(30)),
        ("IS_DETERMINISTIC", SqlType::NVarChar(10)),
        ("SQL_DATA_ACCESS", SqlType::NVarChar(30)),
        ("IS_NULL_CALL", SqlType::NVarChar(10)),
        n("SQL_PATH"),
        ("SCHEMA_LEVEL_ROUTINE", SqlType::NVarChar(10)),
        ("MAX_DYNAMIC_RESULT_SETS", SqlType::SmallInt),
        ("IS_USER_DEFINED_CAST", SqlType::NVarChar(10)),
        ("IS_IMPLICITLY_INVOCABLE", SqlType::NVarChar(10)),
        ("CREATED", SqlType::DateTime),
        ("LAST_ALTERED", SqlType::DateTime),
    ]);
    let rows = db
        .catalog
        .modules
        .iter()
        .map(|m| {
            let mut row = vec![text(db_name), text("dbo"), text(&m.name)];
            row.extend([text(db_name), text("dbo"), text(&m.name), text("PROCEDURE")]);
            row.extend(RETURN_VALUE_COLUMNS.iter().map(|_| Value::Null));
            let first: String = m.definition.chars().take(4000).collect();
            row.extend([
                text("SQL"),
                text(&first),
                Value::Null,
                Value::Null,
                Value::Null,
            ]);
            row.extend([text("NO"), text("MODIFIES"), Value::Null, Value::Null]);
            row.extend([text("YES"), Value::SmallInt(-1), text("NO"), text("NO")]);
            let date = |us| Value::DateTime(super::views::ticks_from_unix_us(us));
            row.extend([date(m.created_us), date(m.modified_us)]);
            row
        })
        .collect();
    Rowset {
        columns: cols(&spec),
        rows,
    }
}

/// ROUTINES' columns from MODULE_CATALOG to DTD_IDENTIFIER: a function's return value,
/// NULL for a procedure.
const RETURN_VALUE_COLUMNS: [(&str, SqlType); 29] = [
    ("MODULE_CATALOG", SYSNAME),
    ("MODULE_SCHEMA", SYSNAME),
    ("MODULE_NAME", SYSNAME),
    ("UDT_CATALOG", SYSNAME),
    ("UDT_SCHEMA", SYSNAME),
    ("UDT_NAME", SYSNAME),
    ("DATA_TYPE", SYSNAME),
    ("CHARACTER_MAXIMUM_LENGTH", SqlType::Int),
    ("CHARACTER_OCTET_LENGTH", SqlType::Int),
    ("COLLATION_CATALOG", SYSNAME),
    ("COLLATION_SCHEMA", SYSNAME),
    ("COLLATION_NAME", SYSNAME),
    ("CHARACTER_SET_CATALOG", SYSNAME),
    ("CHARACTER_SET_SCHEMA", SYSNAME),
    ("CHARACTER_SET_NAME", SYSNAME),
    ("NUMERIC_PRECISION", SqlType::SmallInt),
    ("NUMERIC_PRECISION_RADIX", SqlType::SmallInt),
    ("NUMERIC_SCALE", SqlType::SmallInt),
    ("DATETIME_PRECISION", SqlType::SmallInt),
    ("INTERVAL_TYPE", SqlType::NVarChar(30)),
    ("INTERVAL_PRECISION", SqlType::SmallInt),
    ("TYPE_UDT_CATALOG", SYSNAME),
    ("TYPE_UDT_SCHEMA", SYSNAME),
    ("TYPE_UDT_NAME", SYSNAME),
    ("SCOPE_CATALOG", SYSNAME),
    ("SCOPE_SCHEMA", SYSNAME),
    ("SCOPE_NAME", SYSNAME),
    ("MAXIMUM_CARDINALITY", SqlType::BigInt),
    ("DTD_IDENTIFIER", SYSNAME),
];

/// INFORMATION_SCHEMA.PARAMETERS of `db`: each procedure's parameters in order, an OUTPUT
/// one INOUT (a T-SQL OUTPUT parameter is also an input), its type as COLUMNS describes a
/// column's (invariant 2).
pub(super) fn parameters(db: &Database, db_name: &str) -> Rowset {
    let columns = cols(&[
        ("SPECIFIC_CATALOG", SYSNAME),
        ("SPECIFIC_SCHEMA", SYSNAME),
        ("SPECIFIC_NAME", SYSNAME),
        ("ORDINAL_POSITION", SqlType::Int),
        ("PARAMETER_MODE", SqlType::NVarChar(10)),
        ("IS_RESULT", SqlType::NVarChar(10)),
        ("AS_LOCATOR", SqlType::NVarChar(10)),
        ("PARAMETER_NAME", SYSNAME),
        ("DATA_TYPE", SYSNAME),
        ("CHARACTER_MAXIMUM_LENGTH", SqlType::Int),
        ("CHARACTER_OCTET_LENGTH", SqlType::Int),
        ("COLLATION_CATALOG", SYSNAME),
        ("COLLATION_SCHEMA", SYSNAME),
        ("COLLATION_NAME", SYSNAME),
        ("CHARACTER_SET_CATALOG", SYSNAME),
        ("CHARACTER_SET_SCHEMA", SYSNAME),
        ("CHARACTER_SET_NAME", SYSNAME),
        ("NUMERIC_PRECISION", SqlType::TinyInt),
        ("NUMERIC_PRECISION_RADIX", SqlType::SmallInt),
        ("NUMERIC_SCALE", SqlType::TinyInt),
        ("DATETIME_PRECISION", SqlType::SmallInt),
        ("INTERVAL_TYPE", SqlType::NVarChar(30)),
        ("INTERVAL_PRECISION", SqlType::SmallInt),
        ("USER_DEFINED_TYPE_CATALOG", SYSNAME),
        ("USER_DEFINED_TYPE_SCHEMA", SYSNAME),
        ("USER_DEFINED_TYPE_NAME", SYSNAME),
        ("SCOPE_CATALOG", SYSNAME),
        ("SCOPE_SCHEMA", SYSNAME),
        ("SCOPE_NAME", SYSNAME),
    ]);
    let mut rows = Vec::new();
    for m in &db.catalog.modules {
        for (i, p) in m.parameters.iter().enumerate() {
            rows.push(parameter_row(db_name, &m.name, i, p));
        }
    }
    Rowset { columns, rows }
}

fn parameter_row(
    db_name: &str,
    procedure: &str,
    i: usize,
    p: &extentdb_format::module::ParameterEntry,
) -> Vec<Value> {
    let ty = crate::rowcodec::sql_type(crate::rowcodec::StoredType {
        system_type_id: p.system_type_id,
        max_length: p.max_length,
        precision: p.precision,
        scale: p.scale,
    });
    let int = |v: Option<i64>| v.map_or(Value::Null, |v| Value::Int(v as i32));
    let (chars, octets) = character_lengths(ty);
    let numeric = numeric_precision(ty);
    let charset = match ty {
        Some(SqlType::NChar(_) | SqlType::NVarChar(_)) => Some("UNICODE"),
        Some(SqlType::Char(_) | SqlType::VarChar(_)) => Some(CHARACTER_SET),
        _ => None,
    };
    let text_or_null = |s: Option<&str>| s.map_or(Value::Null, text);
    let mut row = vec![text(db_name), text("dbo"), text(procedure)];
    row.extend([
        Value::Int(i as i32 + 1),
        text(if p.is_output { "INOUT" } else { "IN" }),
    ]);
    row.extend([
        text("NO"),
        text("NO"),
        text(&p.name),
        text(type_name(p.system_type_id)),
    ]);
    row.extend([int(chars), int(octets), Value::Null, Value::Null]);
    row.push(text_or_null(
        chars.is_some().then_some(super::lower::SERVER_COLLATION),
    ));
    row.extend([Value::Null, Value::Null, text_or_null(charset)]);
    row.push(numeric.map_or(Value::Null, |(p, _, _)| Value::TinyInt(p)));
    row.push(numeric.map_or(Value::Null, |(_, r, _)| Value::SmallInt(r)));
    row.push(
        numeric
            .and_then(|(_, _, s)| s)
            .map_or(Value::Null, |s| Value::TinyInt(s as u8)),
    );
    row.push(datetime_precision(ty).map_or(Value::Null, Value::SmallInt));
    row.extend(std::iter::repeat_n(Value::Null, 8));
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every type the engine stores has its sys.types name (never the fallback).
    #[test]
    fn every_stored_type_has_its_name() {
        for id in [
            36, 40, 42, 48, 52, 56, 59, 61, 62, 104, 106, 108, 127, 165, 167, 173, 175, 231, 239,
        ] {
            assert_ne!(type_name(id), "sql_variant", "{id}");
        }
        assert_eq!(
            character_lengths(Some(SqlType::NVarChar(20))),
            (Some(20), Some(40))
        );
        assert_eq!(
            character_lengths(Some(SqlType::VarChar(crate::types::MAX_LENGTH))),
            (Some(-1), Some(-1))
        );
        assert_eq!(default_definition("0").as_deref(), Some("((0))"));
        assert_eq!(default_definition("").as_deref(), None);
    }
}
