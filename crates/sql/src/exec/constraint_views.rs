//! The ISO views of a database's constraints: INFORMATION_SCHEMA.TABLE_CONSTRAINTS,
//! KEY_COLUMN_USAGE, REFERENTIAL_CONSTRAINTS and CONSTRAINT_COLUMN_USAGE, with SQL
//! Server's columns and types (SQLAlchemy's get_pk_constraint reads the first two, its
//! get_foreign_keys the first three).
//!
//! Invariants:
//! 1. The constraints are exactly the catalog's: each live table's PRIMARY KEY (its
//!    clustered key, or the unique index enforcing a NONCLUSTERED one), each index made by
//!    a UNIQUE constraint, each FOREIGN KEY and each CHECK, all in dbo (schemas.rs).
//! 2. KEY_COLUMN_USAGE has a row per key column of the PRIMARY KEY, UNIQUE and FOREIGN KEY
//!    constraints (ORDINAL_POSITION from 1 in key order), none for a CHECK; a FOREIGN
//!    KEY's n-th column pairs with the n-th column of the key it references.
//! 3. REFERENTIAL_CONSTRAINTS names, for each FOREIGN KEY, the PRIMARY KEY or UNIQUE
//!    constraint (or unique index) of the parent whose key it references: the parent's
//!    index `key_index_id` (1: its clustered PRIMARY KEY).
//! 4. CONSTRAINT_COLUMN_USAGE has a row per column of each PRIMARY KEY, UNIQUE and
//!    FOREIGN KEY constraint, and per column a column-level CHECK is declared on (a
//!    table-level CHECK's columns are not recorded by the catalog, so it has none).

use extentdb_format::catalog::{ReferentialAction, TableEntry};
use extentdb_storage::Database;

use super::views::{cols, text, Rowset, SYSNAME};
use crate::types::{SqlType, Value};

/// A constraint of a table, with the names of its key columns (invariant 1).
struct Constraint<'a> {
    table: &'a TableEntry,
    name: String,
    kind: &'static str,
    columns: Vec<String>,
}

fn column_name(t: &TableEntry, id: u16) -> String {
    let c = t.columns.iter().find(|c| c.column_id == id);
    c.map(|c| c.name.clone()).unwrap_or_default()
}

/// The name of index `index_id` of table `t` (1: its clustered PRIMARY KEY's).
fn index_name(db: &Database, t: &TableEntry, index_id: u16) -> Option<String> {
    if index_id == 1 {
        return t.primary_key.as_ref().map(|(n, _)| n.clone());
    }
    db.indexes_of(t.object_id)
        .find(|ix| ix.index_of.as_ref().is_some_and(|i| i.index_id == index_id))
        .map(|ix| ix.name.clone())
}

/// Every constraint of `db`, table by table (invariant 1).
fn constraints(db: &Database) -> Vec<Constraint<'_>> {
    let mut all = Vec::new();
    for t in db.live_tables() {
        if let Some((name, ids)) = &t.primary_key {
            let columns = ids.iter().map(|id| column_name(t, *id)).collect();
            let kind = "PRIMARY KEY";
            all.push(Constraint {
                table: t,
                name: name.clone(),
                kind,
                columns,
            });
        }
        for ix in db.indexes_of(t.object_id) {
            let info = ix.index_of.as_ref().expect("an index entry");
            if !info.unique_constraint || ix.enforces_primary_key_of(t) {
                continue;
            }
            let keys = &info.sources[..info.key_columns as usize];
            let columns = keys.iter().map(|id| column_name(t, *id)).collect();
            let name = ix.name.clone();
            all.push(Constraint {
                table: t,
                name,
                kind: "UNIQUE",
                columns,
            });
        }
        for k in &t.foreign_keys {
            let columns = k.columns.iter().map(|(c, _)| column_name(t, *c)).collect();
            let name = k.name.clone();
            all.push(Constraint {
                table: t,
                name,
                kind: "FOREIGN KEY",
                columns,
            });
        }
        for k in &t.checks {
            let columns = match k.column_id {
                0 => Vec::new(),
                id => vec![column_name(t, id)],
            };
            let name = k.name.clone();
            all.push(Constraint {
                table: t,
                name,
                kind: "CHECK",
                columns,
            });
        }
    }
    all
}

/// One of the four views by its lower-cased name.
pub(super) fn view(db: &Database, name: &str) -> Rowset {
    match name {
        "information_schema.table_constraints" => table_constraints(db),
        "information_schema.key_column_usage" => column_usage(db, true),
        "information_schema.constraint_column_usage" => column_usage(db, false),
        _ => referential_constraints(db),
    }
}

/// CONSTRAINT_CATALOG, CONSTRAINT_SCHEMA, CONSTRAINT_NAME of a constraint of `db`.
fn named(db: &Database, c: &Constraint) -> [Value; 3] {
    [text(&db.name), text(&c.table.schema_name), text(&c.name)]
}

fn table_constraints(db: &Database) -> Rowset {
    let columns = cols(&[
        ("CONSTRAINT_CATALOG", SYSNAME),
        ("CONSTRAINT_SCHEMA", SYSNAME),
        ("CONSTRAINT_NAME", SYSNAME),
        ("TABLE_CATALOG", SYSNAME),
        ("TABLE_SCHEMA", SYSNAME),
        ("TABLE_NAME", SYSNAME),
        ("CONSTRAINT_TYPE", SqlType::VarChar(11)),
        ("IS_DEFERRABLE", SqlType::VarChar(2)),
        ("INITIALLY_DEFERRED", SqlType::VarChar(2)),
    ]);
    let rows = constraints(db)
        .iter()
        .map(|c| {
            let mut row = named(db, c).to_vec();
            row.extend([
                text(&db.name),
                text(&c.table.schema_name),
                text(&c.table.name),
                text(c.kind),
                text("NO"),
                text("NO"),
            ]);
            row
        })
        .collect();
    Rowset { columns, rows }
}

/// KEY_COLUMN_USAGE (`keys`, invariant 2) or CONSTRAINT_COLUMN_USAGE (invariant 4).
fn column_usage(db: &Database, keys: bool) -> Rowset {
    let mut columns = cols(&[
        ("TABLE_CATALOG", SYSNAME),
        ("TABLE_SCHEMA", SYSNAME),
        ("TABLE_NAME", SYSNAME),
        ("COLUMN_NAME", SYSNAME),
        ("CONSTRAINT_CATALOG", SYSNAME),
        ("CONSTRAINT_SCHEMA", SYSNAME),
        ("CONSTRAINT_NAME", SYSNAME),
    ]);
    if keys {
        // KEY_COLUMN_USAGE leads with the constraint and ends with the ordinal.
        columns.rotate_left(4);
        columns.push(("ORDINAL_POSITION".into(), SqlType::Int));
    }
    let mut rows = Vec::new();
    for c in constraints(db) {
        if keys && c.kind == "CHECK" {
            continue;
        }
        for (i, column) in c.columns.iter().enumerate() {
            let table = [
                text(&db.name),
                text(&c.table.schema_name),
                text(&c.table.name),
                text(column),
            ];
            let constraint = named(db, &c);
            rows.push(match keys {
                true => {
                    let mut row = constraint.to_vec();
                    row.extend(table);
                    row.push(Value::Int(i as i32 + 1));
                    row
                }
                false => table.into_iter().chain(constraint).collect(),
            });
        }
    }
    Rowset { columns, rows }
}

/// INFORMATION_SCHEMA's rule name of a referential action.
fn rule(a: ReferentialAction) -> &'static str {
    match a {
        ReferentialAction::NoAction => "NO ACTION",
        ReferentialAction::Cascade => "CASCADE",
        ReferentialAction::SetNull => "SET NULL",
        ReferentialAction::SetDefault => "SET DEFAULT",
    }
}

fn referential_constraints(db: &Database) -> Rowset {
    let columns = cols(&[
        ("CONSTRAINT_CATALOG", SYSNAME),
        ("CONSTRAINT_SCHEMA", SYSNAME),
        ("CONSTRAINT_NAME", SYSNAME),
        ("UNIQUE_CONSTRAINT_CATALOG", SYSNAME),
        ("UNIQUE_CONSTRAINT_SCHEMA", SYSNAME),
        ("UNIQUE_CONSTRAINT_NAME", SYSNAME),
        ("MATCH_OPTION", SqlType::VarChar(7)),
        ("UPDATE_RULE", SqlType::VarChar(11)),
        ("DELETE_RULE", SqlType::VarChar(11)),
    ]);
    let mut rows = Vec::new();
    for t in db.live_tables() {
        for k in &t.foreign_keys {
            let parent = db
                .live_tables()
                .find(|p| p.object_id == k.referenced_object_id);
            let key = parent.and_then(|p| index_name(db, p, k.key_index_id));
            let schema = parent.map_or(Value::Null, |p| text(&p.schema_name));
            rows.push(vec![
                text(&db.name),
                text(&t.schema_name),
                text(&k.name),
                text(&db.name),
                schema,
                key.map_or(Value::Null, |n| text(&n)),
                text("SIMPLE"),
                text(rule(k.update_action)),
                text(rule(k.delete_action)),
            ]);
        }
    }
    Rowset { columns, rows }
}
