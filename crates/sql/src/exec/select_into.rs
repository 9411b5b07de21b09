//! SELECT ... INTO: a new heap made from the query's result. The query runs once, into a
//! spool (`subquery.rs`), whose columns name and type the new table's; the table is made
//! as CREATE TABLE makes it (`table_ddl.rs`: a `#name` in tempdb as the session's own) and
//! the spooled rows are written as INSERT writes them (`dml.rs`).
//!
//! Invariants:
//! 1. The query runs once: the rows written are exactly the rows that typed the table.
//! 2. Every column has a name (1038) and each name once (2705), checked before anything
//!    is made; a target that exists is 2714 and changes nothing.
//! 3. The table and its rows are made in one transaction (`as_one_statement`): a statement
//!    that fails, a crash before its commit, or the ROLLBACK of the transaction it ran in,
//!    leaves no table behind (storage's ddl.rs).
//! 4. Every column is nullable, and none is an identity column. (SQL Server copies a
//!    column's NOT NULL and IDENTITY when the select list names it unchanged; extentdb
//!    does not yet, and says so here rather than in a result.)

use super::{Out, Session};
use crate::ast::{ColumnDefinition, CreateTable, DataType, ObjectName, Query, QueryBody};
use crate::convert::data_type_name;
use crate::messages::{msg, SqlError};
use crate::types::SqlType;

type Errors = Vec<SqlError>;

impl Session {
    /// `SELECT ... INTO target FROM ...`.
    pub(super) fn select_into(
        &mut self,
        q: &Query,
        target: &ObjectName,
        out: &mut Out,
    ) -> Result<(), Errors> {
        let mut plain = q.clone();
        if let QueryBody::Select(s) = &mut plain.body {
            s.into = None;
        }
        if self.find_table(target)?.is_some() {
            return Err(vec![msg(2714, &[&target.name()])]);
        }
        let rows = self.query_rows(&plain, None).map_err(|e| vec![e])?;
        let definition = new_table(target, &rows.columns)?;
        // The table and its rows are one statement (invariant 3): in autocommit one
        // transaction whose rollback, or recovery after a crash, takes the table back.
        self.as_one_statement(|s| {
            s.create_table(&definition)?;
            let written = s
                .table(target)
                .and_then(|t| s.insert_query_rows(&t, &rows, out));
            if written.is_err() {
                // Inside a transaction the statement's rollback keeps the transaction's
                // tables: this one goes with the statement.
                let _ = s.drop_tables(false, std::slice::from_ref(target));
            }
            written
        })
    }
}

/// The CREATE TABLE of a SELECT INTO's target (invariants 2 and 4).
fn new_table(target: &ObjectName, columns: &[(String, SqlType)]) -> Result<CreateTable, Errors> {
    let mut defs = Vec::with_capacity(columns.len());
    for (name, t) in columns {
        if name.is_empty() {
            return Err(vec![msg(1038, &[])]);
        }
        defs.push(ColumnDefinition {
            name: name.clone(),
            data_type: DataType {
                sql_type: *t,
                name: base_name(*t),
                length_given: true,
            },
            computed: None,
            nullable: Some(true),
            identity: None,
            default: None,
            key: None,
            checks: Vec::new(),
            foreign_keys: Vec::new(),
            collation: None,
        });
    }
    Ok(CreateTable {
        name: target.clone(),
        columns: defs,
        constraints: Vec::new(),
        filegroup: None,
    })
}

/// A type's name without its length or precision (`varchar`, `decimal`).
fn base_name(t: SqlType) -> String {
    let full = data_type_name(t);
    full.split('(').next().unwrap_or(&full).to_string()
}
