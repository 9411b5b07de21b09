//! What SQLAlchemy's get_columns joins to sys.columns: sys.identity_columns,
//! sys.default_constraints and sys.extended_properties, with SQL Server's columns; and
//! fn_listextendedproperty's rowset (the dialect's comment-support probe at connect).
//!
//! Invariants:
//! 1. sys.identity_columns has one row per IDENTITY column of a live table: sys.columns'
//!    columns, then seed_value, increment_value, last_value (NULL before the first value
//!    is handed out; storage's `known_identity`, also NULL for a table of a catalog older
//!    than version 6 whose value only a scan could tell) and
//!    is_not_for_replication. SQL Server types the three values sql_variant; extentdb has
//!    no sql_variant, so they are numeric(38, 0), which holds every identity type's value
//!    exactly.
//! 2. A column DEFAULT is not yet an object with its own id in extentdb's catalog (it is
//!    text on the column's entry). So sys.columns.default_object_id is 0 for a column
//!    without one and NULL (unknown) for a column with one, and sys.default_constraints
//!    answers only where its answer is true: empty in a database with no DEFAULT, refused
//!    with 40517 in one that has any (no row would have a true object_id or name).
//! 3. extentdb keeps no extended properties (sp_addextendedproperty is not built), so
//!    sys.extended_properties and fn_listextendedproperty are always empty: the true answer, with SQL Server's columns
//!    (value, sql_variant in SQL Server, is nvarchar(max) here: extentdb has no sql_variant).

use extentdb_storage::instance::Instance;
use extentdb_storage::Database;

use super::views::{cols, Rowset, SYSNAME};
use crate::messages::SqlError;
use crate::types::{SqlType, Value};

/// numeric(38, 0), invariant 1's type for the identity values.
const IDENTITY_VALUE: SqlType = SqlType::Decimal {
    precision: 38,
    scale: 0,
};

/// sys.identity_columns of `db` (invariant 1).
pub(super) fn identity_columns(db: &Database) -> Rowset {
    let mut columns = super::views::columns_of_columns();
    columns.extend(cols(&[
        ("seed_value", IDENTITY_VALUE),
        ("increment_value", IDENTITY_VALUE),
        ("last_value", IDENTITY_VALUE),
        ("is_not_for_replication", SqlType::Bit),
    ]));
    let found: Vec<_> = db
        .live_tables()
        .flat_map(|t| {
            let c = t.columns.iter().find(|c| c.identity.is_some())?;
            Some((t.object_id, c.clone()))
        })
        .collect();
    let value = |v: i64| Value::Decimal {
        unscaled: i128::from(v),
        scale: 0,
    };
    let mut rows = Vec::with_capacity(found.len());
    for (object_id, c) in found {
        let (seed, increment) = c.identity.expect("an IDENTITY column");
        let last = db.known_identity(object_id).flatten();
        let mut row = super::views::column_row(object_id, &c);
        row.extend([
            value(seed),
            value(increment),
            last.map_or(Value::Null, value),
            Value::Bit(false),
        ]);
        rows.push(row);
    }
    Rowset { columns, rows }
}

/// sys.default_constraints of database `db_id` (invariant 2).
pub(super) fn default_constraints(inst: &Instance, db_id: u16) -> Result<Rowset, SqlError> {
    let columns = super::views::object_columns(&[
        ("parent_column_id", SqlType::Int),
        ("definition", SqlType::NVarChar(crate::types::MAX_LENGTH)),
        ("is_system_named", SqlType::Bit),
    ]);
    let Some(db) = inst.database(db_id) else {
        return Ok(Rowset {
            columns,
            rows: Vec::new(),
        });
    };
    let has_default = db
        .read()
        .unwrap()
        .live_tables()
        .any(|t| t.columns.iter().any(|c| !c.default_sql.is_empty()));
    if has_default {
        return Err(super::lower::not_yet(
            "sys.default_constraints in a database with a column DEFAULT (DEFAULTs are \
             not yet objects with ids)",
        ));
    }
    Ok(Rowset {
        columns,
        rows: Vec::new(),
    })
}

/// sys.extended_properties: always empty (invariant 3).
pub(super) fn extended_properties() -> Rowset {
    Rowset {
        columns: cols(&[
            ("class", SqlType::TinyInt),
            ("class_desc", SqlType::NVarChar(60)),
            ("major_id", SqlType::Int),
            ("minor_id", SqlType::Int),
            ("name", SYSNAME),
            ("value", SqlType::NVarChar(crate::types::MAX_LENGTH)),
        ]),
        rows: Vec::new(),
    }
}

/// fn_listextendedproperty's rowset: always empty (invariant 3).
pub(super) fn listed_extended_properties() -> Rowset {
    Rowset {
        columns: cols(&[
            ("objtype", SYSNAME),
            ("objname", SYSNAME),
            ("name", SYSNAME),
            ("value", SqlType::NVarChar(crate::types::MAX_LENGTH)),
        ]),
        rows: Vec::new(),
    }
}
