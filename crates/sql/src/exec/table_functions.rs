//! The rows of a table-valued function in FROM or on the right of APPLY: the built-in
//! STRING_SPLIT and OPENJSON here, the system functions (sys.fn_my_permissions,
//! sys.dm_db_index_physical_stats) through `select.rs`'s `table_function`; then the
//! column aliases of `AS x (c, ...)`.
//!
//! Invariants:
//! 1. The rows are bounded by the argument's text (one per piece, member or element):
//!    the input is read once and split or parsed in place, never copied per row.
//! 2. STRING_SPLIT's `value` has the input's type (nvarchar when the input or separator
//!    is Unicode, else varchar; the input's length), `ordinal` is bigint from 1.
//! 3. OPENJSON's default schema is key nvarchar(4000), value nvarchar(max), type int;
//!    an explicit schema's columns have their declared types, each value converted from
//!    its JSON text as CAST would. Lax paths give NULL or no rows where strict ones raise
//!    (json.rs invariant 3).
//! 4. Not built, refused with 40517: an enable_ordinal that is not the constant 0, 1 or
//!    NULL, a non-character STRING_SPLIT input, AS JSON on a column that is not
//!    nvarchar(max), a NULL JSON path.

use super::lower::not_yet;
use super::views::Rowset;
use super::Session;
use crate::ast::{Expr, JsonColumn, Literal, TableSource};
use crate::json::{self, Json, Node, Path, Step};
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value, MAX_LENGTH};

type Errors = Vec<SqlError>;

fn one(e: SqlError) -> Errors {
    vec![e]
}

impl Session {
    /// The rows of the function call `source` (a `TableSource::Function`), with its
    /// column aliases applied.
    pub(super) fn function_rowset(&mut self, source: &TableSource) -> Result<Rowset, Errors> {
        let TableSource::Function {
            name,
            args,
            alias,
            columns,
            schema,
        } = source
        else {
            unreachable!("function_rowset of a function call");
        };
        let builtin = name.parts.len() == 1;
        let mut rowset = if builtin && name.name().eq_ignore_ascii_case("STRING_SPLIT") {
            self.string_split(args).map_err(one)?
        } else if builtin && name.name().eq_ignore_ascii_case("OPENJSON") {
            self.openjson(args, schema.as_deref()).map_err(one)?
        } else {
            self.table_function(name, args)?
        };
        if !columns.is_empty() {
            rename(
                &mut rowset,
                columns,
                alias.as_deref().unwrap_or(name.name()),
            )
            .map_err(one)?;
        }
        Ok(rowset)
    }

    /// An argument's type: a column's or a declared one, else its value's.
    fn function_argument_type(&self, e: &Expr, v: &Value) -> SqlType {
        let known = match e {
            Expr::Column(c) => self.column_type(c, None),
            _ => self.declared_type(e),
        };
        known.unwrap_or_else(|| super::eval::value_type(v))
    }

    /// STRING_SPLIT(string, separator [, enable_ordinal]).
    fn string_split(&mut self, args: &[Expr]) -> Result<Rowset, SqlError> {
        check_arity(args, "STRING_SPLIT", 2, 3)?;
        let ordinal = match args.get(2) {
            None | Some(Expr::Literal(Literal::Null | Literal::Integer(0))) => false,
            Some(Expr::Literal(Literal::Integer(1))) => true,
            Some(_) => {
                return Err(not_yet(
                    "a STRING_SPLIT enable_ordinal other than the constant 0, 1 or NULL",
                ))
            }
        };
        let input = self.eval(&args[0], None)?;
        let separator = self.eval(&args[1], None)?;
        let input_type = self.function_argument_type(&args[0], &input);
        let separator_type = self.function_argument_type(&args[1], &separator);
        let sep = match &separator {
            Value::Text(s) if s.chars().count() == 1 => s.chars().next(),
            _ => None,
        };
        let sep = sep.ok_or_else(|| msg(214, &[&"separator", &"nchar(1)/nvarchar(1)"]))?;
        let value_type = split_type(input_type, separator_type)
            .ok_or_else(|| not_yet("STRING_SPLIT of a string that is not character data"))?;
        let mut columns = vec![("value".to_string(), value_type)];
        if ordinal {
            columns.push(("ordinal".to_string(), SqlType::BigInt));
        }
        let text = match &input {
            Value::Null => {
                return Ok(Rowset {
                    columns,
                    rows: Vec::new(),
                })
            }
            Value::Text(t) => t,
            _ => {
                return Err(not_yet(
                    "STRING_SPLIT of a string that is not character data",
                ))
            }
        };
        let rows = text
            .split(sep)
            .enumerate()
            .map(|(i, piece)| {
                let mut row = vec![Value::Text(piece.to_string())];
                if ordinal {
                    row.push(Value::BigInt(i as i64 + 1));
                }
                row
            })
            .collect();
        Ok(Rowset { columns, rows })
    }

    /// OPENJSON(json [, path]) [WITH (...)].
    fn openjson(
        &mut self,
        args: &[Expr],
        schema: Option<&[JsonColumn]>,
    ) -> Result<Rowset, SqlError> {
        check_arity(args, "OPENJSON", 1, 2)?;
        let doc = self.eval(&args[0], None)?;
        let path = match args.get(1) {
            None => "$".to_string(),
            Some(p) => match self.eval(p, None)? {
                Value::Null => return Err(not_yet("a NULL JSON path")),
                v => super::eval::to_text(&v),
            },
        };
        let path = json::parse_path(&path)?;
        let columns = match schema {
            None => default_columns(),
            Some(s) => schema_columns(s)?,
        };
        let paths = match schema {
            None => Vec::new(),
            Some(s) => s.iter().map(column_path).collect::<Result<_, _>>()?,
        };
        let mut rows = Vec::new();
        let doc = match doc {
            Value::Null => return Ok(Rowset { columns, rows }),
            v => super::eval::to_text(&v),
        };
        let root = json::parse(&doc)?;
        let Some(at) = path.lookup(&root)? else {
            return Ok(Rowset { columns, rows });
        };
        if !at.is_container() {
            return match path.strict {
                true => Err(msg(13611, &[])),
                false => Ok(Rowset { columns, rows }),
            };
        }
        match schema {
            None => default_rows(at, &mut rows),
            Some(s) => {
                let items: Vec<&Node> = match &at.value {
                    Json::Array(items) => items.iter().collect(),
                    _ => vec![at],
                };
                for item in items {
                    rows.push(schema_row(item, s, &paths, &columns)?);
                }
            }
        }
        Ok(Rowset { columns, rows })
    }
}

/// 216 for too few arguments, 8144 for too many.
fn check_arity(args: &[Expr], name: &str, min: usize, max: usize) -> Result<(), SqlError> {
    if args.len() < min {
        return Err(msg(216, &[&name]));
    }
    if args.len() > max {
        return Err(msg(8144, &[&name]));
    }
    Ok(())
}

/// STRING_SPLIT's value type (invariant 2); None for a non-character input.
fn split_type(input: SqlType, separator: SqlType) -> Option<SqlType> {
    let unicode = |t| matches!(t, SqlType::NChar(_) | SqlType::NVarChar(_));
    let n = match input {
        SqlType::Char(n) | SqlType::VarChar(n) | SqlType::NChar(n) | SqlType::NVarChar(n) => n,
        _ => return None,
    };
    Some(match unicode(input) || unicode(separator) {
        true if n > 4000 => SqlType::NVarChar(MAX_LENGTH),
        true => SqlType::NVarChar(n),
        false => SqlType::VarChar(n),
    })
}

/// Column aliases replace the names in order; a count that differs is 8158 or 8159.
fn rename(rowset: &mut Rowset, names: &[String], exposed: &str) -> Result<(), SqlError> {
    if rowset.columns.len() > names.len() {
        return Err(msg(8158, &[&exposed]));
    }
    if rowset.columns.len() < names.len() {
        return Err(msg(8159, &[&exposed]));
    }
    for (c, n) in rowset.columns.iter_mut().zip(names) {
        c.0 = n.clone();
    }
    Ok(())
}

fn default_columns() -> Vec<(String, SqlType)> {
    vec![
        ("key".to_string(), SqlType::NVarChar(4000)),
        ("value".to_string(), SqlType::NVarChar(MAX_LENGTH)),
        ("type".to_string(), SqlType::Int),
    ]
}

/// key, value, type for each member of an object or element of an array.
fn default_rows(at: &Node, rows: &mut Vec<Vec<Value>>) {
    let row = |key: String, n: &Node| {
        let value = n.as_text().map_or(Value::Null, Value::Text);
        vec![Value::Text(key), value, Value::Int(n.type_code())]
    };
    match &at.value {
        Json::Object(members) => rows.extend(members.iter().map(|(k, n)| row(k.clone(), n))),
        Json::Array(items) => {
            rows.extend(items.iter().enumerate().map(|(i, n)| row(i.to_string(), n)))
        }
        _ => unreachable!("a container (checked by openjson)"),
    }
}

/// The declared columns; AS JSON only on nvarchar(max) (invariant 4).
fn schema_columns(schema: &[JsonColumn]) -> Result<Vec<(String, SqlType)>, SqlError> {
    let mut columns = Vec::with_capacity(schema.len());
    for c in schema {
        let t = c.data_type.sql_type;
        if c.as_json && t != SqlType::NVarChar(MAX_LENGTH) {
            return Err(not_yet(
                "OPENJSON's AS JSON on a column that is not nvarchar(max)",
            ));
        }
        columns.push((c.name.clone(), t));
    }
    Ok(columns)
}

/// A column's path: the one written, else `$.name` in lax mode.
fn column_path(c: &JsonColumn) -> Result<Path, SqlError> {
    match &c.path {
        Some(p) => json::parse_path(p),
        None => Ok(Path {
            strict: false,
            steps: vec![Step::Key(c.name.clone())],
        }),
    }
}

/// One row of an explicit schema from one object (or element).
fn schema_row(
    item: &Node,
    schema: &[JsonColumn],
    paths: &[Path],
    columns: &[(String, SqlType)],
) -> Result<Vec<Value>, SqlError> {
    let mut row = Vec::with_capacity(schema.len());
    for ((c, path), (_, t)) in schema.iter().zip(paths).zip(columns) {
        let Some(node) = path.lookup(item)? else {
            row.push(Value::Null);
            continue;
        };
        let v = match (c.as_json, node.is_container()) {
            (true, true) => Value::Text(node.text.to_string()),
            (true, false) if path.strict => return Err(msg(13624, &[])),
            (false, true) if path.strict => return Err(msg(13623, &[])),
            (true, false) | (false, true) => Value::Null,
            (false, false) => match node.as_text() {
                None => Value::Null,
                Some(text) => crate::convert::convert(&Value::Text(text), *t, None)?,
            },
        };
        row.push(v);
    }
    Ok(row)
}
