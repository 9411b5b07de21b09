//! The ODBC catalog procedures drivers call for their metadata (jTDS's and ODBC's
//! SQLTables / SQLColumns / SQLPrimaryKeys / SQLForeignKeys / SQLGetTypeInfo, mssql-jdbc's
//! getColumns through sp_columns_100): sp_tables, sp_columns, sp_columns_100, sp_pkeys,
//! sp_fkeys, sp_server_info and sp_datatype_info, with SQL Server's result columns and
//! parameters (by position or by name).
//!
//! Patterns: sp_tables' @table_name and @table_owner and sp_columns' @table_name,
//! @table_owner and @column_name are LIKE patterns (`%`, `_`, `[...]`) while @fUsePattern is
//! 1 (the default), exact names when it is 0; sp_pkeys' and sp_fkeys' names are exact. A
//! @table_qualifier (the database) other than the current database's name is Msg 15250,
//! as SQL Server's. sp_tables' @table_type is SQL Server's quoted list (`'TABLE','VIEW'`).
//!
//! Invariants:
//! 1. Every row comes from the current database's live catalog under its shared lock, read
//!    once per call: the rows of one call are one moment's tables, columns and keys.
//! 2. Rows are in SQL Server's order: sp_tables by TABLE_TYPE, owner, name; sp_columns by
//!    owner, table, ORDINAL_POSITION; sp_pkeys by KEY_SEQ; sp_fkeys by the foreign key
//!    table, then KEY_SEQ; sp_datatype_info by DATA_TYPE, then TYPE_NAME.
//!
//! What is not here: sp_tables lists the user tables ('TABLE'); extentdb has no user views
//! and its system views are not catalog objects, so no 'VIEW' or 'SYSTEM TABLE' rows, and
//! sp_tables' catalog listing (`sp_tables '', '', '%'`) is refused with 40517.
//! sp_datatype_info_100 and sp_columns' SS_DATA_TYPE need SQL Server's legacy type codes
//! (spt_datatype_info), not built yet: sp_datatype_info_100 is refused with 40517 and
//! SS_DATA_TYPE is NULL.

use extentdb_format::catalog::{ColumnEntry, ReferentialAction, TableEntry};
use extentdb_storage::Database;

use crate::ast::ObjectName;

use super::information_schema::{character_lengths, default_definition, type_name};
use super::lower::not_yet;
use super::views::{cols, text, Rowset, SYSNAME};
use super::{Out, Session};
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value};

pub(super) const SP_TABLES_PARAMS: &[&str] = &[
    "@table_name",
    "@table_owner",
    "@table_qualifier",
    "@table_type",
    "@fUsePattern",
];
pub(super) const SP_COLUMNS_PARAMS: &[&str] = &[
    "@table_name",
    "@table_owner",
    "@table_qualifier",
    "@column_name",
    "@ODBCVer",
    "@fUsePattern",
];
/// sp_columns_100's: @NameScope (which columns of sparse column sets; extentdb has none,
/// so every value lists every column) comes before @ODBCVer, as mssql-jdbc passes them.
pub(super) const SP_COLUMNS_100_PARAMS: &[&str] = &[
    "@table_name",
    "@table_owner",
    "@table_qualifier",
    "@column_name",
    "@NameScope",
    "@ODBCVer",
    "@fUsePattern",
];
pub(super) const SP_PKEYS_PARAMS: &[&str] = &["@table_name", "@table_owner", "@table_qualifier"];
pub(super) const SP_FKEYS_PARAMS: &[&str] = &[
    "@pktable_name",
    "@pktable_owner",
    "@pktable_qualifier",
    "@fktable_name",
    "@fktable_owner",
    "@fktable_qualifier",
];

const VARCHAR254: SqlType = SqlType::VarChar(254);
const VARCHAR32: SqlType = SqlType::VarChar(32);

/// A catalog procedure called as `db..sp_tables` (as jTDS calls them) runs in the current
/// database only: another database's name is refused (40517), not answered for the
/// current one.
pub(super) fn in_current_database(
    s: &Session,
    proc: &str,
    name: &ObjectName,
) -> Result<(), Vec<SqlError>> {
    const CATALOG: &[&str] = &[
        "sp_tables",
        "sp_columns",
        "sp_columns_100",
        "sp_pkeys",
        "sp_fkeys",
    ];
    match name.database() {
        Some(db) if CATALOG.contains(&proc) && !db.eq_ignore_ascii_case(&s.current_db_name()) => {
            Err(vec![not_yet(&format!(
                "{proc} run in another database than the current one"
            ))])
        }
        _ => Ok(()),
    }
}

/// A text argument, None for NULL.
fn arg_text(args: &[Value], i: usize) -> Option<String> {
    args.get(i)
        .filter(|v| !v.is_null())
        .map(super::eval::to_text)
}

/// An int argument (`default` for NULL or absent).
fn arg_int(args: &[Value], i: usize, default: i64) -> Result<i64, Vec<SqlError>> {
    match args.get(i).filter(|v| !v.is_null()) {
        Some(v) => super::eval::as_i64(v).map_err(|e| vec![e]),
        None => Ok(default),
    }
}

/// A name matched against an argument: a LIKE pattern, or exact; NULL matches all.
fn matches(name: &str, arg: &Option<String>, pattern: bool) -> bool {
    match arg {
        None => true,
        Some(p) if pattern => crate::ops::like(name, p, None),
        Some(p) => crate::ops::collate_cmp(name, p) == std::cmp::Ordering::Equal,
    }
}

/// A nullable smallint.
fn small(v: Option<i64>) -> Value {
    v.map_or(Value::Null, |v| Value::SmallInt(v as i16))
}

fn int(v: Option<i64>) -> Value {
    v.map_or(Value::Null, |v| Value::Int(v as i32))
}

/// A column's ODBC description: (DATA_TYPE, PRECISION, LENGTH, SCALE, RADIX,
/// SQL_DATA_TYPE, SQL_DATETIME_SUB), for ODBC version `odbc` (2 or 3). sp_columns (not
/// _100) describes date and datetime2 as nvarchar, as SQL Server's does for clients older
/// than 2008's types.
fn odbc_type(c: &ColumnEntry, odbc: i64, new_types: bool) -> [Option<i64>; 7] {
    let p = i64::from(c.precision);
    let s = i64::from(c.scale);
    let timestamp = if odbc >= 3 { 93 } else { 11 };
    let len = |n: i16| if n < 0 { 2_147_483_647 } else { i64::from(n) };
    match c.system_type_id {
        104 => [Some(-7), Some(1), Some(1), None, None, Some(-7), None],
        48 => [
            Some(-6),
            Some(3),
            Some(1),
            Some(0),
            Some(10),
            Some(-6),
            None,
        ],
        52 => [Some(5), Some(5), Some(2), Some(0), Some(10), Some(5), None],
        56 => [Some(4), Some(10), Some(4), Some(0), Some(10), Some(4), None],
        127 => [
            Some(-5),
            Some(19),
            Some(8),
            Some(0),
            Some(10),
            Some(-5),
            None,
        ],
        106 => [
            Some(3),
            Some(p),
            Some(p + 2),
            Some(s),
            Some(10),
            Some(3),
            None,
        ],
        108 => [
            Some(2),
            Some(p),
            Some(p + 2),
            Some(s),
            Some(10),
            Some(2),
            None,
        ],
        62 => [Some(6), Some(15), Some(8), None, Some(10), Some(6), None],
        59 => [Some(7), Some(7), Some(4), None, Some(10), Some(7), None],
        61 => [
            Some(timestamp),
            Some(23),
            Some(16),
            Some(3),
            None,
            Some(9),
            Some(3),
        ],
        40 if new_types => [
            Some(if odbc >= 3 { 91 } else { 9 }),
            Some(10),
            Some(6),
            None,
            None,
            Some(9),
            Some(1),
        ],
        42 if new_types => [
            Some(timestamp),
            Some(20 + s + i64::from(s > 0)),
            Some(16),
            Some(s),
            None,
            Some(9),
            Some(3),
        ],
        40 => [Some(-9), Some(10), Some(20), None, None, Some(-9), None],
        42 => [Some(-9), Some(27), Some(54), None, None, Some(-9), None],
        36 => [Some(-11), Some(36), Some(16), None, None, Some(-11), None],
        175 => [
            Some(1),
            Some(len(c.max_length)),
            Some(len(c.max_length)),
            None,
            None,
            Some(1),
            None,
        ],
        167 => [
            Some(12),
            Some(len(c.max_length)),
            Some(len(c.max_length)),
            None,
            None,
            Some(12),
            None,
        ],
        173 => [
            Some(-2),
            Some(len(c.max_length)),
            Some(len(c.max_length)),
            None,
            None,
            Some(-2),
            None,
        ],
        165 => [
            Some(-3),
            Some(len(c.max_length)),
            Some(len(c.max_length)),
            None,
            None,
            Some(-3),
            None,
        ],
        239 | 231 => {
            let (chars, octets) = if c.max_length < 0 {
                (1_073_741_823, 2_147_483_646)
            } else {
                (i64::from(c.max_length) / 2, i64::from(c.max_length))
            };
            let t = if c.system_type_id == 239 { -8 } else { -9 };
            [
                Some(t),
                Some(chars),
                Some(octets),
                None,
                None,
                Some(t),
                None,
            ]
        }
        _ => [None; 7],
    }
}

impl Session {
    /// The current database's name, or 15250 when `qualifier` names another.
    fn catalog_qualifier(&self, qualifier: &Option<String>) -> Result<String, Vec<SqlError>> {
        let name = self.current_db_name();
        match qualifier {
            Some(q) if !q.is_empty() && !q.eq_ignore_ascii_case(&name) => {
                Err(vec![msg(15250, &[])])
            }
            _ => Ok(name),
        }
    }

    /// Runs `f` on the current database, shared (invariant 1).
    fn with_current_db<T>(&self, f: impl FnOnce(&Database) -> T) -> Result<T, Vec<SqlError>> {
        let db = self
            .engine
            .instance
            .database(self.database_id)
            .ok_or_else(|| vec![msg(911, &[&self.current_db_name()])])?;
        let d = db.read().unwrap();
        Ok(f(&d))
    }

    /// sp_tables [@table_name [, @table_owner [, @table_qualifier [, @table_type [,
    /// @fUsePattern]]]]].
    pub(super) fn sp_tables(&mut self, args: &[Value], out: &mut Out) -> Result<(), Vec<SqlError>> {
        let (name, owner, qualifier) = (arg_text(args, 0), arg_text(args, 1), arg_text(args, 2));
        if qualifier.as_deref() == Some("%") && name.as_deref() == Some("") {
            return Err(vec![not_yet("sp_tables' list of databases")]);
        }
        let types = arg_text(args, 3);
        let pattern = arg_int(args, 4, 1)? != 0;
        let db_name = self.catalog_qualifier(&qualifier)?;
        let wants_tables = types.as_deref().is_none_or(|t| {
            t.split(',').any(|w| {
                w.trim()
                    .trim_matches(|c| c == '\'' || c == '"')
                    .eq_ignore_ascii_case("TABLE")
            })
        });
        let mut rows: Vec<Vec<Value>> = self.with_current_db(|db| {
            db.live_tables()
                .filter(|t| wants_tables && matches(&t.name, &name, pattern))
                .filter(|t| matches(&t.schema_name, &owner, pattern))
                .map(|t| {
                    vec![
                        text(&db_name),
                        text(&t.schema_name),
                        text(&t.name),
                        text("TABLE"),
                        Value::Null,
                    ]
                })
                .collect()
        })?;
        rows.sort_by_key(|r| {
            (
                super::eval::to_text(&r[1]).to_lowercase(),
                super::eval::to_text(&r[2]).to_lowercase(),
            )
        });
        let columns = cols(&[
            ("TABLE_QUALIFIER", SYSNAME),
            ("TABLE_OWNER", SYSNAME),
            ("TABLE_NAME", SYSNAME),
            ("TABLE_TYPE", VARCHAR32),
            ("REMARKS", VARCHAR254),
        ]);
        self.send_rowset(Rowset { columns, rows }, out);
        Ok(())
    }

    /// sp_columns and sp_columns_100 (`v100`): @table_name, @table_owner,
    /// @table_qualifier, @column_name, @ODBCVer (2), @fUsePattern (1).
    pub(super) fn sp_columns(
        &mut self,
        args: &[Value],
        v100: bool,
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        let Some(name) = arg_text(args, 0) else {
            let proc = if v100 { "sp_columns_100" } else { "sp_columns" };
            return Err(vec![msg(201, &[&proc, &"@table_name"])]);
        };
        let (owner, column) = (arg_text(args, 1), arg_text(args, 3));
        let at = usize::from(v100);
        let odbc = arg_int(args, 4 + at, 2)?;
        let pattern = arg_int(args, 5 + at, 1)? != 0;
        let db_name = self.catalog_qualifier(&arg_text(args, 2))?;
        let name = Some(name);
        let mut rows = self.with_current_db(|db| {
            let mut rows = Vec::new();
            let mut tables: Vec<&TableEntry> = db
                .live_tables()
                .filter(|t| {
                    matches(&t.name, &name, pattern) && matches(&t.schema_name, &owner, pattern)
                })
                .collect();
            tables.sort_by_key(|t| (t.schema_name.to_lowercase(), t.name.to_lowercase()));
            for t in tables {
                for (i, c) in t.columns.iter().enumerate() {
                    if matches(&c.name, &column, pattern) {
                        rows.push(column_row(&db_name, t, i, c, odbc, v100));
                    }
                }
            }
            rows
        })?;
        rows.shrink_to_fit();
        let mut columns = cols(&[
            ("TABLE_QUALIFIER", SYSNAME),
            ("TABLE_OWNER", SYSNAME),
            ("TABLE_NAME", SYSNAME),
            ("COLUMN_NAME", SYSNAME),
            ("DATA_TYPE", SqlType::SmallInt),
            ("TYPE_NAME", SYSNAME),
            ("PRECISION", SqlType::Int),
            ("LENGTH", SqlType::Int),
            ("SCALE", SqlType::SmallInt),
            ("RADIX", SqlType::SmallInt),
            ("NULLABLE", SqlType::SmallInt),
            ("REMARKS", VARCHAR254),
            ("COLUMN_DEF", SqlType::NVarChar(4000)),
            ("SQL_DATA_TYPE", SqlType::SmallInt),
            ("SQL_DATETIME_SUB", SqlType::SmallInt),
            ("CHAR_OCTET_LENGTH", SqlType::Int),
            ("ORDINAL_POSITION", SqlType::Int),
            ("IS_NULLABLE", VARCHAR254),
        ]);
        if v100 {
            columns.extend(cols(&[
                ("SS_IS_SPARSE", SqlType::SmallInt),
                ("SS_IS_COLUMN_SET", SqlType::SmallInt),
                ("SS_IS_COMPUTED", SqlType::SmallInt),
                ("SS_IS_IDENTITY", SqlType::SmallInt),
                ("SS_UDT_CATALOG_NAME", SqlType::NVarChar(128)),
                ("SS_UDT_SCHEMA_NAME", SqlType::NVarChar(128)),
                ("SS_UDT_ASSEMBLY_TYPE_NAME", SqlType::NVarChar(4000)),
                ("SS_XML_SCHEMACOLLECTION_CATALOG_NAME", SYSNAME),
                ("SS_XML_SCHEMACOLLECTION_SCHEMA_NAME", SYSNAME),
                ("SS_XML_SCHEMACOLLECTION_NAME", SYSNAME),
            ]));
        }
        // Last in both, as SQL Server's (mssql-jdbc inserts sp_columns_100's rows into a
        // table of these columns in this order).
        columns.extend(cols(&[("SS_DATA_TYPE", SqlType::TinyInt)]));
        self.send_rowset(Rowset { columns, rows }, out);
        Ok(())
    }

    /// sp_pkeys @table_name [, @table_owner [, @table_qualifier]]: exact names.
    pub(super) fn sp_pkeys(&mut self, args: &[Value], out: &mut Out) -> Result<(), Vec<SqlError>> {
        let Some(name) = arg_text(args, 0) else {
            return Err(vec![msg(201, &[&"sp_pkeys", &"@table_name"])]);
        };
        let owner = arg_text(args, 1);
        let db_name = self.catalog_qualifier(&arg_text(args, 2))?;
        let name = Some(name);
        let rows = self.with_current_db(|db| {
            let mut rows = Vec::new();
            for t in db.live_tables().filter(|t| {
                matches(&t.name, &name, false) && matches(&t.schema_name, &owner, false)
            }) {
                let Some((pk, keys)) = &t.primary_key else {
                    continue;
                };
                for (seq, id) in keys.iter().enumerate() {
                    let c = t
                        .columns
                        .iter()
                        .find(|c| c.column_id == *id)
                        .map_or("", |c| &c.name);
                    rows.push(vec![
                        text(&db_name),
                        text(&t.schema_name),
                        text(&t.name),
                        text(c),
                        Value::SmallInt(seq as i16 + 1),
                        text(pk),
                    ]);
                }
            }
            rows
        })?;
        let columns = cols(&[
            ("TABLE_QUALIFIER", SYSNAME),
            ("TABLE_OWNER", SYSNAME),
            ("TABLE_NAME", SYSNAME),
            ("COLUMN_NAME", SYSNAME),
            ("KEY_SEQ", SqlType::SmallInt),
            ("PK_NAME", SYSNAME),
        ]);
        self.send_rowset(Rowset { columns, rows }, out);
        Ok(())
    }

    /// sp_fkeys: the foreign keys referencing @pktable_name, or those of @fktable_name
    /// (one of them must be given, 15252 otherwise as SQL Server's), exact names.
    pub(super) fn sp_fkeys(&mut self, args: &[Value], out: &mut Out) -> Result<(), Vec<SqlError>> {
        let (pk_name, pk_owner) = (arg_text(args, 0), arg_text(args, 1));
        let (fk_name, fk_owner) = (arg_text(args, 3), arg_text(args, 4));
        if pk_name.is_none() && fk_name.is_none() {
            return Err(vec![msg(15252, &[])]);
        }
        let db_name = self.catalog_qualifier(&arg_text(args, 2))?;
        self.catalog_qualifier(&arg_text(args, 5))?;
        let rows = self.with_current_db(|db| {
            let tables: Vec<&TableEntry> = db.live_tables().collect();
            let mut rows = Vec::new();
            let mut children: Vec<&TableEntry> = tables
                .iter()
                .copied()
                .filter(|t| {
                    matches(&t.name, &fk_name, false) && matches(&t.schema_name, &fk_owner, false)
                })
                .collect();
            children.sort_by_key(|t| (t.schema_name.to_lowercase(), t.name.to_lowercase()));
            for child in children {
                for fk in &child.foreign_keys {
                    let Some(parent) = tables
                        .iter()
                        .find(|t| t.object_id == fk.referenced_object_id)
                    else {
                        continue;
                    };
                    if !matches(&parent.name, &pk_name, false)
                        || !matches(&parent.schema_name, &pk_owner, false)
                    {
                        continue;
                    }
                    let key_name = referenced_key_name(db, parent, fk.key_index_id);
                    for (seq, (from, to)) in fk.columns.iter().enumerate() {
                        let col = |t: &TableEntry, id: u16| {
                            t.columns
                                .iter()
                                .find(|c| c.column_id == id)
                                .map_or(String::new(), |c| c.name.clone())
                        };
                        rows.push(vec![
                            text(&db_name),
                            text(&parent.schema_name),
                            text(&parent.name),
                            text(&col(parent, *to)),
                            text(&db_name),
                            text(&child.schema_name),
                            text(&child.name),
                            text(&col(child, *from)),
                            Value::SmallInt(seq as i16 + 1),
                            Value::SmallInt(rule(fk.update_action)),
                            Value::SmallInt(rule(fk.delete_action)),
                            text(&fk.name),
                            key_name.as_deref().map_or(Value::Null, text),
                            Value::SmallInt(7),
                        ]);
                    }
                }
            }
            rows
        })?;
        let columns = cols(&[
            ("PKTABLE_QUALIFIER", SYSNAME),
            ("PKTABLE_OWNER", SYSNAME),
            ("PKTABLE_NAME", SYSNAME),
            ("PKCOLUMN_NAME", SYSNAME),
            ("FKTABLE_QUALIFIER", SYSNAME),
            ("FKTABLE_OWNER", SYSNAME),
            ("FKTABLE_NAME", SYSNAME),
            ("FKCOLUMN_NAME", SYSNAME),
            ("KEY_SEQ", SqlType::SmallInt),
            ("UPDATE_RULE", SqlType::SmallInt),
            ("DELETE_RULE", SqlType::SmallInt),
            ("FK_NAME", SYSNAME),
            ("PK_NAME", SYSNAME),
            ("DEFERRABILITY", SqlType::SmallInt),
        ]);
        self.send_rowset(Rowset { columns, rows }, out);
        Ok(())
    }
}

/// sp_fkeys' UPDATE_RULE / DELETE_RULE: 0 CASCADE, 1 NO ACTION, 2 SET NULL, 3 SET DEFAULT.
fn rule(a: ReferentialAction) -> i16 {
    match a {
        ReferentialAction::Cascade => 0,
        ReferentialAction::NoAction => 1,
        ReferentialAction::SetNull => 2,
        ReferentialAction::SetDefault => 3,
    }
}

/// The name of the key a foreign key references: the parent's PRIMARY KEY (index 1) or
/// the UNIQUE constraint / index with that id.
fn referenced_key_name(db: &Database, parent: &TableEntry, index_id: u16) -> Option<String> {
    if index_id == 1 {
        return parent.primary_key.as_ref().map(|(n, _)| n.clone());
    }
    db.catalog
        .tables
        .iter()
        .find(|t| {
            t.index_of
                .as_ref()
                .is_some_and(|i| i.table_object_id == parent.object_id && i.index_id == index_id)
        })
        .map(|t| t.name.clone())
}

/// One sp_columns row (with sp_columns_100's ten more when `v100`).
fn column_row(
    db_name: &str,
    t: &TableEntry,
    i: usize,
    c: &ColumnEntry,
    odbc: i64,
    v100: bool,
) -> Vec<Value> {
    let [data_type, precision, length, scale, radix, sql_type, sub] = odbc_type(c, odbc, v100);
    let mut name = type_name(c.system_type_id).to_string();
    if c.identity.is_some() {
        name.push_str(" identity");
    }
    let ty = super::tables::column_type(c).ok();
    let octets = character_lengths(ty)
        .1
        .map(|o| if o < 0 { 2_147_483_647 } else { o });
    let mut row = vec![
        text(db_name),
        text(&t.schema_name),
        text(&t.name),
        text(&c.name),
        small(data_type),
        text(&name),
        int(precision),
        int(length),
        small(scale),
        small(radix),
        Value::SmallInt(i16::from(c.is_nullable)),
        Value::Null,
        default_definition(&c.default_sql).map_or(Value::Null, |d| text(&d)),
        small(sql_type),
        small(sub),
        int(octets),
        Value::Int(i as i32 + 1),
        text(if c.is_nullable { "YES" } else { "NO" }),
    ];
    if v100 {
        row.extend([
            Value::SmallInt(0),
            Value::SmallInt(0),
            Value::SmallInt(i16::from(c.computed.is_some())),
            Value::SmallInt(i16::from(c.identity.is_some())),
        ]);
        row.extend(std::iter::repeat_n(Value::Null, 6));
    }
    // SS_DATA_TYPE (module docs).
    row.push(Value::Null);
    row
}
