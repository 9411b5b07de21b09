//! Stored procedures as the catalog views and metadata functions show them: sys.procedures,
//! sys.sql_modules, sys.parameters, their rows in sys.objects, OBJECT_ID(name [, 'P']),
//! OBJECT_DEFINITION and sp_helptext, with SQL Server's columns (docs: sys.procedures,
//! sys.sql_modules, sys.parameters, sp_helptext).
//!
//! Invariants:
//! 1. Every view reads the database's catalog once, under its read guard, so a row shows
//!    one version of a procedure whole (an ALTER is one catalog change).
//! 2. sys.parameters' has_default_value is 0 and default_value NULL for every T-SQL
//!    procedure's parameter, as in SQL Server (it keeps defaults only for CLR objects).
//! 3. sp_helptext returns the definition exactly, split after each line feed into rows of
//!    at most 255 characters, as SQL Server's does.

use extentdb_format::module::ModuleEntry;
use extentdb_storage::Database;

use super::views::{cols, text, ticks_from_unix_us, Rowset, SYSNAME};
use crate::types::{SqlType, Value, MAX_LENGTH};

/// sp_helptext's longest row, in characters (its Text column is nvarchar(255)).
const HELPTEXT_ROW_CHARS: usize = 255;

fn date(us: i64) -> Value {
    Value::DateTime(ticks_from_unix_us(us))
}

/// The sys.objects row of procedure `m`, in `check_constraints::objects_view`'s columns.
pub(super) fn object_row(m: &ModuleEntry) -> Vec<Value> {
    vec![
        text(&m.name),
        Value::Int(m.object_id as i32),
        Value::Null,
        Value::Int(m.schema_id as i32),
        Value::Int(0),
        text(m.module_type.code()),
        text(m.module_type.desc()),
        date(m.created_us),
        Value::Bit(false),
    ]
}

/// sys.procedures: sys.objects' columns for each procedure, then its own.
pub(super) fn procedures_view(db: &Database) -> Rowset {
    let columns = super::views::object_columns(&[
        ("is_auto_executed", SqlType::Bit),
        ("is_execution_replicated", SqlType::Bit),
        ("is_repl_serializable_only", SqlType::Bit),
        ("skips_repl_constraints", SqlType::Bit),
    ]);
    let rows = db
        .catalog
        .modules
        .iter()
        .map(|m| {
            let mut row = object_row(m);
            row.insert(8, date(m.modified_us));
            row.extend([false; 6].map(Value::Bit));
            row
        })
        .collect();
    Rowset { columns, rows }
}

/// sys.sql_modules: one row per module, its definition as sent.
pub(super) fn sql_modules_view(db: &Database) -> Rowset {
    let columns = cols(&[
        ("object_id", SqlType::Int),
        ("definition", SqlType::NVarChar(MAX_LENGTH)),
        ("uses_ansi_nulls", SqlType::Bit),
        ("uses_quoted_identifier", SqlType::Bit),
        ("is_schema_bound", SqlType::Bit),
        ("uses_database_collation", SqlType::Bit),
        ("is_recompiled", SqlType::Bit),
        ("null_on_null_input", SqlType::Bit),
        ("execute_as_principal_id", SqlType::Int),
        ("uses_native_compilation", SqlType::Bit),
        ("inline_type", SqlType::Bit),
        ("is_inlineable", SqlType::Bit),
    ]);
    let rows = db
        .catalog
        .modules
        .iter()
        .map(|m| {
            vec![
                Value::Int(m.object_id as i32),
                text(&m.definition),
                Value::Bit(m.uses_ansi_nulls),
                Value::Bit(m.uses_quoted_identifier),
                Value::Bit(false),
                Value::Bit(false),
                Value::Bit(m.is_recompiled),
                Value::Bit(false),
                // EXECUTE AS CALLER, the only form built.
                Value::Null,
                Value::Bit(false),
                Value::Bit(false),
                Value::Bit(false),
            ]
        })
        .collect();
    Rowset { columns, rows }
}

/// sys.parameters: each procedure's parameters, parameter_id from 1 (invariant 2).
pub(super) fn parameters_view(db: &Database) -> Rowset {
    let columns = cols(&[
        ("object_id", SqlType::Int),
        ("name", SYSNAME),
        ("parameter_id", SqlType::Int),
        ("system_type_id", SqlType::TinyInt),
        ("user_type_id", SqlType::Int),
        ("max_length", SqlType::SmallInt),
        ("precision", SqlType::TinyInt),
        ("scale", SqlType::TinyInt),
        ("is_output", SqlType::Bit),
        ("is_cursor_ref", SqlType::Bit),
        ("has_default_value", SqlType::Bit),
        ("is_xml_document", SqlType::Bit),
        ("default_value", SqlType::NVarChar(4000)),
        ("xml_collection_id", SqlType::Int),
        ("is_readonly", SqlType::Bit),
        ("is_nullable", SqlType::Bit),
    ]);
    let mut rows = Vec::new();
    for m in &db.catalog.modules {
        for (i, p) in m.parameters.iter().enumerate() {
            rows.push(vec![
                Value::Int(m.object_id as i32),
                text(&p.name),
                Value::Int(i as i32 + 1),
                Value::TinyInt(p.system_type_id),
                Value::Int(p.system_type_id as i32),
                Value::SmallInt(p.max_length),
                Value::TinyInt(p.precision),
                Value::TinyInt(p.scale),
                Value::Bit(p.is_output),
                Value::Bit(false),
                Value::Bit(false),
                Value::Bit(false),
                Value::Null,
                Value::Int(0),
                Value::Bit(false),
                Value::Bit(true),
            ]);
        }
    }
    Rowset { columns, rows }
}

/// OBJECT_DEFINITION(id): the module's definition, NULL for any other id.
pub(super) fn object_definition(db: &Database, object_id: i64) -> Value {
    db.catalog
        .modules
        .iter()
        .find(|m| i64::from(m.object_id) == object_id)
        .map_or(Value::Null, |m| text(&m.definition))
}

/// sp_helptext's rows (invariant 3): each line with its line feed, cut at 255 characters.
pub(super) fn helptext_rows(definition: &str) -> Vec<String> {
    let mut rows = Vec::new();
    for line in definition.split_inclusive('\n') {
        let chars: Vec<char> = line.chars().collect();
        for piece in chars.chunks(HELPTEXT_ROW_CHARS) {
            rows.push(piece.iter().collect());
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sp_helptext keeps every character: rows joined give the definition back; a line
    /// longer than 255 characters is cut into 255-character rows.
    #[test]
    fn helptext_rows_keep_the_text() {
        let long = "x".repeat(600);
        let def = format!("CREATE PROC p\r\nAS\n{long}\nSELECT 1");
        let rows = helptext_rows(&def);
        assert_eq!(rows.concat(), def);
        assert_eq!(rows[0], "CREATE PROC p\r\n");
        assert_eq!(rows[1], "AS\n");
        assert_eq!(rows[2].chars().count(), 255);
        assert_eq!(rows[4], format!("{}\n", "x".repeat(90)));
        assert_eq!(rows[5], "SELECT 1");
    }
}
