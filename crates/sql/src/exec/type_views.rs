//! The data types as the catalog names them: sys.types and TYPE_NAME (SQLAlchemy's
//! get_columns joins sys.columns to sys.types by user_type_id, and sys.types to itself for
//! a type's base type).
//!
//! Invariants:
//! 1. sys.types has one row per system type extentdb stores (rowcodec.rs's `sql_type`),
//!    plus sysname (nvarchar(128) NOT NULL, user_type_id 256), with SQL Server's ids,
//!    max_length, precision and scale; no user-defined types exist (CREATE TYPE is not
//!    built), so no row has is_user_defined = 1. A type extentdb cannot store (xml,
//!    sql_variant, geometry, ...) has no row: no column can be of it.
//! 2. Every system type's user_type_id equals its system_type_id, so sys.columns'
//!    user_type_id (its system_type_id) always finds its row.

use super::views::{cols, text, Rowset, SYSNAME};
use crate::types::{SqlType, Value};

/// (name, system_type_id, user_type_id, max_length, precision, scale, collatable,
/// nullable), in SQL Server's values.
type TypeRow = (&'static str, u8, i32, i16, u8, u8, bool, bool);

/// The types extentdb stores, in system_type_id order, then sysname (invariant 1).
pub(super) const TYPES: [TypeRow; 20] = [
    ("uniqueidentifier", 36, 36, 16, 0, 0, false, true),
    ("date", 40, 40, 3, 10, 0, false, true),
    ("datetime2", 42, 42, 8, 27, 7, false, true),
    ("tinyint", 48, 48, 1, 3, 0, false, true),
    ("smallint", 52, 52, 2, 5, 0, false, true),
    ("int", 56, 56, 4, 10, 0, false, true),
    ("real", 59, 59, 4, 24, 0, false, true),
    ("datetime", 61, 61, 8, 23, 3, false, true),
    ("float", 62, 62, 8, 53, 0, false, true),
    ("bit", 104, 104, 1, 1, 0, false, true),
    ("decimal", 106, 106, 17, 38, 38, false, true),
    ("numeric", 108, 108, 17, 38, 38, false, true),
    ("bigint", 127, 127, 8, 19, 0, false, true),
    ("varbinary", 165, 165, 8000, 0, 0, false, true),
    ("varchar", 167, 167, 8000, 0, 0, true, true),
    ("binary", 173, 173, 8000, 0, 0, false, true),
    ("char", 175, 175, 8000, 0, 0, true, true),
    ("nvarchar", 231, 231, 8000, 0, 0, true, true),
    ("nchar", 239, 239, 8000, 0, 0, true, true),
    ("sysname", 231, 256, 256, 0, 0, true, false),
];

/// A type's name by its user_type_id (TYPE_NAME; for a system type, its system_type_id).
pub(super) fn type_name(user_type_id: i64) -> Option<&'static str> {
    TYPES
        .iter()
        .find(|t| i64::from(t.2) == user_type_id)
        .map(|t| t.0)
}

/// sys.types.
pub(super) fn types_view() -> Rowset {
    let columns = cols(&[
        ("name", SYSNAME),
        ("system_type_id", SqlType::TinyInt),
        ("user_type_id", SqlType::Int),
        ("schema_id", SqlType::Int),
        ("principal_id", SqlType::Int),
        ("max_length", SqlType::SmallInt),
        ("precision", SqlType::TinyInt),
        ("scale", SqlType::TinyInt),
        ("collation_name", SYSNAME),
        ("is_nullable", SqlType::Bit),
        ("is_user_defined", SqlType::Bit),
        ("is_assembly_type", SqlType::Bit),
        ("default_object_id", SqlType::Int),
        ("rule_object_id", SqlType::Int),
        ("is_table_type", SqlType::Bit),
    ]);
    let rows = TYPES
        .iter()
        .map(
            |&(name, system, user, len, precision, scale, collatable, nullable)| {
                assert!(
                    user == i32::from(system) || name == "sysname",
                    "invariant 2"
                );
                let collation = match collatable {
                    true => text(super::lower::SERVER_COLLATION),
                    false => Value::Null,
                };
                vec![
                    text(name),
                    Value::TinyInt(system),
                    Value::Int(user),
                    Value::Int(super::schemas::SYS_SCHEMA_ID),
                    Value::Null,
                    Value::SmallInt(len),
                    Value::TinyInt(precision),
                    Value::TinyInt(scale),
                    collation,
                    Value::Bit(nullable),
                    Value::Bit(false),
                    Value::Bit(false),
                    Value::Int(0),
                    Value::Int(0),
                    Value::Bit(false),
                ]
            },
        )
        .collect();
    Rowset { columns, rows }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rowcodec::stored_type;

    /// Invariant 1: every type the engine stores has its row; TYPE_NAME finds each row.
    #[test]
    fn every_stored_type_has_a_row() {
        for &(name, _, user, ..) in &TYPES {
            assert_eq!(type_name(i64::from(user)), Some(name));
        }
        let decimal = SqlType::Decimal {
            precision: 10,
            scale: 2,
        };
        for t in [
            SqlType::Bit,
            SqlType::TinyInt,
            SqlType::SmallInt,
            SqlType::Int,
            SqlType::BigInt,
            decimal,
            SqlType::Float,
            SqlType::Real,
            SqlType::Char(5),
            SqlType::VarChar(5),
            SqlType::NChar(5),
            SqlType::NVarChar(5),
            SqlType::Binary(5),
            SqlType::VarBinary(5),
            SqlType::Date,
            SqlType::DateTime,
            SqlType::DateTime2(7),
            SqlType::UniqueIdentifier,
        ] {
            let id = stored_type(t).system_type_id;
            assert!(
                TYPES.iter().any(|r| r.1 == id && i32::from(id) == r.2),
                "{t:?}"
            );
        }
        assert_eq!(type_name(108), Some("numeric"));
        assert_eq!(
            type_name(98),
            None,
            "sql_variant is no type extentdb stores"
        );
    }
}
