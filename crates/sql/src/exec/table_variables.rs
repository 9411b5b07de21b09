//! Table variables (`DECLARE @t TABLE (...)`), SQL Server's way: a table in tempdb that
//! only the batch that declared it sees, by its `@name`, stored under `#` and 8
//! hexadecimal digits (the instance's temporary-table counter, `temp_tables.rs`), which
//! is how tempdb.sys.tables lists it while the batch runs. It is made with CREATE TABLE's
//! checks (`table_ddl.rs`) and used by INSERT, UPDATE, DELETE, SELECT, joins, subqueries
//! and OUTPUT ... INTO like any table; `@t.col` is no column reference (137, as in SQL
//! Server: qualify by an alias).
//!
//! Invariants:
//! 1. A session's `@name` resolves only to a table variable the running batch declared
//!    (an EXEC ('...') batch has its own), in tempdb; any other `@name` as a table is
//!    Msg 1087. A scalar variable and a table variable share one namespace (134).
//! 2. A table variable goes when its batch ends (`drop_table_variables`), and with it
//!    the session's record of it.
//! 3. Writes to a table variable never join the session's transaction: a statement's
//!    changes to table variables are one storage transaction of their own in tempdb
//!    (`TableVariables::xact`), committed when the statement's writes succeed and rolled
//!    back when they fail. So ROLLBACK leaves them (SQL Server's rule), a failing
//!    statement leaves none of its rows, and no transaction has an open change in a
//!    table variable between statements (asserted at the batch's end, before the drop:
//!    storage's xact.rs invariant 5).
//! 4. A table variable takes no lock (`RowLocking` of a private plan, locking.rs): no
//!    other session can reach it, so none waits for it, and its statements wait for none.
//!
//! Not built (refused by the parser, 40517): an inline INDEX in the declaration,
//! user-defined table types (CREATE TYPE; `DECLARE @t dbo.T` is then SQL Server's 2715
//! for a type that does not exist), table-valued parameters (`@p T READONLY` in
//! sp_executesql's definitions). A table variable is not passed to an inner batch
//! (EXEC ('...') has its own: 1087 there), and a TVP value on the wire (TDS type 0xF3)
//! is a type the TDS decoder does not know, which ends the request's connection.

use std::collections::HashMap;

use extentdb_storage::instance::TEMPDB_ID;

use super::tables::TableRef;
use super::Session;
use crate::ast::{CreateTable, ObjectName};
use crate::messages::{msg, SqlError};

/// Whether a name is a table variable's (`@name`, one part).
pub fn is_table_variable_name(name: &ObjectName) -> bool {
    name.parts.len() == 1 && name.name().starts_with('@')
}

/// The running batch's table variables.
#[derive(Default)]
pub(super) struct TableVariables {
    /// `@name` (lower case) to the stored name in tempdb.
    stored: HashMap<String, String>,
    /// The running statement's storage transaction in tempdb for its writes to table
    /// variables, while one is open (invariant 3).
    pub xact: Option<u64>,
}

/// The stored name of table variable number `n`: `#` and 8 hexadecimal digits.
fn stored_name(n: u64) -> String {
    format!("#{:08X}", n as u32)
}

impl Session {
    /// Where `@name` points: `tempdb.dbo.<stored name>` for a declared one, else
    /// `tempdb.dbo.@name`, found nowhere (invariant 1).
    pub(super) fn table_variable_target(&self, name: &ObjectName) -> ObjectName {
        let key = name.name().to_lowercase();
        let stored = self.table_vars.stored.get(&key).cloned();
        ObjectName {
            parts: vec![
                "tempdb".into(),
                "dbo".into(),
                stored.unwrap_or_else(|| name.name().to_string()),
            ],
        }
    }

    /// Where a name points when it is a table of the session's in tempdb: a table
    /// variable's (invariant 1) or a temporary table's (`temporary_target`).
    pub(super) fn tempdb_target(&self, name: &ObjectName) -> Option<ObjectName> {
        match is_table_variable_name(name) {
            true => Some(self.table_variable_target(name)),
            false => self.temporary_target(name),
        }
    }

    /// Whether table `object_name` of database `db_id` is one of the session's own
    /// tables in tempdb (used without any permission, as its creator).
    pub(super) fn owns_tempdb_table(&self, db_id: u16, object_name: &str) -> bool {
        self.owns_temporary(db_id, object_name) || self.is_table_variable_stored(db_id, object_name)
    }

    /// Whether `t` is one of the batch's table variables.
    pub(super) fn is_table_variable(&self, t: &TableRef) -> bool {
        self.is_table_variable_stored(t.db_id, &t.entry.name)
    }

    /// `is_table_variable` by database and stored name.
    pub(super) fn is_table_variable_stored(&self, db_id: u16, name: &str) -> bool {
        db_id == TEMPDB_ID && self.table_vars.stored.values().any(|s| s == name)
    }

    /// A DECLARE's `@name TABLE (...)`'s stored name, or 134 when the batch has a
    /// variable of that name.
    pub(super) fn new_table_variable(&self, name: &str) -> Result<String, Vec<SqlError>> {
        let key = name.to_lowercase();
        if self.table_vars.stored.contains_key(&key) || self.vars.contains_key(&key) {
            return Err(vec![msg(134, &[&name])]);
        }
        let n = self.engine.temp_counter.next();
        Ok(stored_name(n))
    }

    /// Whether `@name` names a table variable of the batch (for 134 on a scalar).
    pub(super) fn table_variable_declared(&self, name: &str) -> bool {
        self.table_vars.stored.contains_key(&name.to_lowercase())
    }

    /// DECLARE @name TABLE (...): the table made in tempdb and recorded. Run again by
    /// a loop (`again`), it is the same table, rows and all, as in SQL Server.
    pub(super) fn declare_table(
        &mut self,
        c: &CreateTable,
        again: bool,
    ) -> Result<(), Vec<SqlError>> {
        if again && self.table_variable_declared(c.name.name()) {
            return Ok(());
        }
        self.create_table(c)
    }

    /// Records a table variable made (`new_table_variable`'s stored name).
    pub(super) fn table_variable_created(&mut self, name: &str, stored: String) {
        self.table_vars.stored.insert(name.to_lowercase(), stored);
    }

    /// The batch's table variables, taken away for an inner batch (EXEC ('...')) to
    /// start without any; `restore_table_variables` gives them back.
    pub(super) fn take_table_variables(&mut self) -> HashMap<String, String> {
        std::mem::take(&mut self.table_vars.stored)
    }

    pub(super) fn restore_table_variables(&mut self, saved: HashMap<String, String>) {
        assert!(self.table_vars.stored.is_empty(), "dropped first");
        self.table_vars.stored = saved;
    }

    /// Drops the batch's table variables at its end (invariant 2); a failure to drop one
    /// goes to the error log (tempdb is made anew at the next start anyway).
    pub(super) fn drop_table_variables(&mut self) {
        assert!(
            self.table_vars.xact.is_none(),
            "a table variable's changes are committed or undone with their statement"
        );
        let stored: Vec<String> = self.table_vars.stored.drain().map(|(_, s)| s).collect();
        self.drop_tempdb_tables(stored, "table variable");
    }

    /// Ends the statement's own transaction of table-variable writes (invariant 3):
    /// committed when the statement's writes succeeded (`ok`), else rolled back.
    pub(super) fn end_table_variable_writes(&mut self, ok: bool) -> Result<(), Vec<SqlError>> {
        let Some(x) = self.table_vars.xact.take() else {
            return Ok(());
        };
        let Some(tempdb) = self.engine.instance.database(TEMPDB_ID) else {
            return Ok(());
        };
        match ok {
            true => super::xact::commit(&tempdb, x),
            false => tempdb
                .rollback(x)
                .map_err(|e| super::errors::map(&e, super::errors::Context::Other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_name_is_a_hash_and_8_hex_digits() {
        assert_eq!(stored_name(0x2a), "#0000002A");
        assert_eq!(stored_name(0x1_A1B2_C3D4), "#A1B2C3D4");
        assert!(is_table_variable_name(&ObjectName::simple("@t")));
        assert!(!is_table_variable_name(&ObjectName::simple("#t")));
    }
}
