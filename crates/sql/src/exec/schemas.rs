//! Schemas as a database's catalog shows them: sys.schemas and the metadata functions
//! SCHEMA_NAME, SCHEMA_ID, OBJECT_NAME, OBJECT_SCHEMA_NAME, OBJECTPROPERTY (the
//! properties `object_property_of` lists; any other refused with 40517) and TYPE_NAME
//! (type_views.rs) (SQLAlchemy's dialect asks
//! `SELECT schema_name()` at connect; has_table and reflection join sys.objects to
//! sys.schemas).
//!
//! Every database has the schemas a new SQL Server database has, with SQL Server's ids
//! and owners (`FIXED_SCHEMAS`): dbo, guest, INFORMATION_SCHEMA, sys, and one per fixed
//! database role. Only dbo holds user objects (CREATE SCHEMA is not built, and a table in
//! any other schema is refused, Msg 2760), so it is every user's default schema.
//!
//! Invariants:
//! 1. An id or name no schema has gives NULL, as in SQL Server; so does an object id no
//!    object of the database has (OBJECTPROPERTY's too), or a database id no database has.
//! 2. The objects OBJECT_NAME names are exactly sys.objects' rows (user tables, CHECK and
//!    FOREIGN KEY constraints: `check_constraints::objects_view`), all in dbo.

use extentdb_format::catalog::TableEntry;
use extentdb_storage::Database;

use super::eval::as_i64;
use super::views::{cols, text, Rowset, SYSNAME};
use super::Session;
use crate::messages::SqlError;
use crate::types::{SqlType, Value};

/// The sys schema's id (the system views' and types' schema).
pub(super) const SYS_SCHEMA_ID: i32 = 4;

/// The one schema user objects live in, and its id.
pub(super) const DBO: (i32, &str) = (1, "dbo");

/// (schema_id, name, principal_id) of the schemas every database has, as in SQL Server.
const FIXED_SCHEMAS: [(i32, &str, i32); 13] = [
    (1, "dbo", 1),
    (2, "guest", 2),
    (3, "INFORMATION_SCHEMA", 3),
    (4, "sys", 4),
    (16384, "db_owner", 16384),
    (16385, "db_accessadmin", 16385),
    (16386, "db_securityadmin", 16386),
    (16387, "db_ddladmin", 16387),
    (16389, "db_backupoperator", 16389),
    (16390, "db_datareader", 16390),
    (16391, "db_datawriter", 16391),
    (16392, "db_denydatareader", 16392),
    (16393, "db_denydatawriter", 16393),
];

/// sys.schemas.
pub(super) fn schemas_view() -> Rowset {
    Rowset {
        columns: cols(&[
            ("name", SYSNAME),
            ("schema_id", SqlType::Int),
            ("principal_id", SqlType::Int),
        ]),
        rows: FIXED_SCHEMAS
            .iter()
            .map(|&(id, name, owner)| vec![text(name), Value::Int(id), Value::Int(owner)])
            .collect(),
    }
}

fn schema_by_id(id: i64) -> Option<&'static str> {
    FIXED_SCHEMAS
        .iter()
        .find(|s| i64::from(s.0) == id)
        .map(|s| s.1)
}

fn schema_by_name(name: &str) -> Option<i32> {
    FIXED_SCHEMAS
        .iter()
        .find(|s| s.1.eq_ignore_ascii_case(name))
        .map(|s| s.0)
}

/// The name of the object `id` of `db` (invariant 2): a live table, or one of its CHECK
/// or FOREIGN KEY constraints.
fn object_name(db: &Database, id: i64) -> Option<String> {
    let named = |t: &TableEntry| -> Option<String> {
        if i64::from(t.object_id) == id {
            return Some(t.name.clone());
        }
        let check = t.checks.iter().find(|k| i64::from(k.object_id) == id);
        let fk = t.foreign_keys.iter().find(|k| i64::from(k.object_id) == id);
        check.map(|k| k.name.clone()).or(fk.map(|k| k.name.clone()))
    };
    db.live_tables().find_map(named)
}

/// What an object id of a database is, for OBJECTPROPERTY.
enum ObjectKind {
    /// A user table: has a PRIMARY KEY, an IDENTITY column, a clustered index, a FOREIGN KEY.
    Table {
        primary_key: bool,
        identity: bool,
        clustered: bool,
        foreign_key: bool,
    },
    /// A CHECK (false) or FOREIGN KEY (true) constraint: is_disabled, is_not_trusted.
    Constraint {
        foreign_key: bool,
        disabled: bool,
        not_trusted: bool,
    },
}

fn object_kind(db: &Database, id: i64) -> Option<ObjectKind> {
    db.live_tables().find_map(|t| {
        if i64::from(t.object_id) == id {
            return Some(ObjectKind::Table {
                primary_key: t.primary_key.is_some(),
                identity: t.columns.iter().any(|c| c.identity.is_some()),
                clustered: t.index_id == 1,
                foreign_key: !t.foreign_keys.is_empty(),
            });
        }
        let check = t.checks.iter().find(|k| i64::from(k.object_id) == id);
        let check = check.map(|k| (false, k.is_disabled, k.is_not_trusted));
        let fk = t.foreign_keys.iter().find(|k| i64::from(k.object_id) == id);
        let fk = fk.map(|k| (true, k.is_disabled, k.is_not_trusted));
        let (foreign_key, disabled, not_trusted) = check.or(fk)?;
        Some(ObjectKind::Constraint {
            foreign_key,
            disabled,
            not_trusted,
        })
    })
}

/// The OBJECTPROPERTY properties built, by lower-cased name; None for any other.
fn object_property_of(kind: ObjectKind, property: &str) -> Option<bool> {
    let table = matches!(kind, ObjectKind::Table { .. });
    Some(match (kind, property) {
        (_, "isusertable" | "istable") => table,
        (_, "isview" | "isprocedure" | "issystemtable" | "ismsshipped") => false,
        (_, "isprimarykey" | "isuniquecnst" | "isdefaultcnst") => false,
        (_, "cnstisclustkey" | "cnstisnonclustkey") => false,
        (_, "isconstraint") => !table,
        (ObjectKind::Table { primary_key, .. }, "tablehasprimarykey") => primary_key,
        (ObjectKind::Table { identity, .. }, "tablehasidentity") => identity,
        (ObjectKind::Table { clustered, .. }, "tablehasclustindex") => clustered,
        (ObjectKind::Table { foreign_key, .. }, "tablehasforeignkey") => foreign_key,
        (ObjectKind::Constraint { foreign_key, .. }, "isforeignkey") => foreign_key,
        (ObjectKind::Constraint { foreign_key, .. }, "ischeckcnst") => !foreign_key,
        (ObjectKind::Constraint { disabled, .. }, "cnstisdisabled") => disabled,
        (ObjectKind::Constraint { not_trusted, .. }, "cnstisnottrusted") => not_trusted,
        (ObjectKind::Table { .. }, "isforeignkey" | "ischeckcnst") => false,
        _ => return None,
    })
}

/// An argument as an integer; NULL (or no argument) as None.
fn int_arg(args: &[Value], i: usize) -> Result<Option<i64>, SqlError> {
    match args.get(i) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => as_i64(v).map(Some),
    }
}

impl Session {
    /// SCHEMA_NAME, SCHEMA_ID, OBJECT_NAME, OBJECT_SCHEMA_NAME; None for other names.
    pub(super) fn schema_function(
        &self,
        name: &str,
        args: &[Value],
    ) -> Result<Option<Value>, SqlError> {
        let name_or_null = |n: Option<String>| n.map_or(Value::Null, Value::Text);
        Ok(Some(match name {
            "SCHEMA_NAME" if args.is_empty() => name_or_null(self.default_schema()),
            "SCHEMA_NAME" => {
                name_or_null(int_arg(args, 0)?.and_then(schema_by_id).map(String::from))
            }
            "SCHEMA_ID" => match args.first() {
                None => self
                    .default_schema()
                    .map_or(Value::Null, |_| Value::Int(DBO.0)),
                Some(Value::Null) => Value::Null,
                Some(v) => schema_by_name(&super::eval::to_text(v)).map_or(Value::Null, Value::Int),
            },
            "OBJECT_NAME" => name_or_null(self.object_named(args)?),
            "TYPE_NAME" => name_or_null(
                int_arg(args, 0)?
                    .and_then(super::type_views::type_name)
                    .map(String::from),
            ),
            "OBJECTPROPERTY" => self.object_property(args)?,
            "OBJECT_SCHEMA_NAME" => {
                name_or_null(self.object_named(args)?.map(|_| DBO.1.to_string()))
            }
            _ => return Ok(None),
        }))
    }

    /// The caller's default schema in the current database: dbo for every user it has
    /// (the only schema objects live in), None without one.
    fn default_schema(&self) -> Option<String> {
        let (id, db) = self.current_database().ok()?;
        let user = self.db_identity(id, &db.read().unwrap());
        user.map(|_| DBO.1.to_string())
    }

    /// OBJECTPROPERTY(id, property) of a table or a CHECK / FOREIGN KEY constraint of the
    /// current database: NULL for an id no object has (invariant 1); a property not built
    /// is refused (40517), never answered NULL as if it did not apply.
    fn object_property(&self, args: &[Value]) -> Result<Value, SqlError> {
        let (Some(id), Some(property)) = (int_arg(args, 0)?, args.get(1)) else {
            return Ok(Value::Null);
        };
        let property = super::eval::to_text(property).to_ascii_lowercase();
        let Ok((_, db)) = self.current_database() else {
            return Ok(Value::Null);
        };
        let db = db.read().unwrap();
        let Some(kind) = object_kind(&db, id) else {
            return Ok(Value::Null);
        };
        object_property_of(kind, &property)
            .map(|b| Value::Int(i32::from(b)))
            .ok_or_else(|| super::lower::not_yet(&format!("OBJECTPROPERTY '{property}'")))
    }

    /// OBJECT_NAME(object_id [, database_id]): the object's name in that database (the
    /// current one by default).
    fn object_named(&self, args: &[Value]) -> Result<Option<String>, SqlError> {
        let Some(id) = int_arg(args, 0)? else {
            return Ok(None);
        };
        let db_id = match (args.len(), int_arg(args, 1)?) {
            (1, _) => i64::from(self.database_id),
            (_, None) => return Ok(None),
            (_, Some(d)) => d,
        };
        let inst = &self.engine.instance;
        let db = u16::try_from(db_id).ok().and_then(|d| inst.database(d));
        Ok(db.and_then(|db| object_name(&db.read().unwrap(), id)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixed schemas are SQL Server's: ids and names one to one, dbo first.
    #[test]
    fn fixed_schemas_have_sql_servers_ids() {
        assert_eq!(schema_by_id(1), Some("dbo"));
        assert_eq!(schema_by_id(4), Some("sys"));
        assert_eq!(schema_by_id(16389), Some("db_backupoperator"));
        assert_eq!(schema_by_id(16388), None);
        assert_eq!(schema_by_name("information_schema"), Some(3));
        assert_eq!(schema_by_name("nope"), None);
        let view = schemas_view();
        assert_eq!(view.rows.len(), FIXED_SCHEMAS.len());
        for (i, s) in FIXED_SCHEMAS.iter().enumerate() {
            assert_eq!(schema_by_name(s.1), Some(s.0));
            assert!(FIXED_SCHEMAS[i + 1..]
                .iter()
                .all(|o| o.0 != s.0 && o.1 != s.1));
        }
    }
}
