//! CHECK constraints in the catalog: each kept on its table's entry (FORMAT.md, "Catalog",
//! version 10) with an object id of its own, as sys.objects lists it (type 'C').
//!
//! Invariants:
//! 1. A constraint's object id comes from the catalog's next object id, as a table's does,
//!    so no two objects share one; `create_table` numbers its table's constraints after
//!    the table.
//! 2. Constraint names are unique among the database's CHECK constraints: `add_check_
//!    constraint` refuses a name taken (`TableExists`), checked holding the database, so
//!    two sessions adding the same name to different tables cannot both succeed.
//! 3. Adding or dropping a constraint is one catalog change (`change_catalog`), made
//!    holding the database: it is whole or absent after a crash. It is made outside any
//!    transaction (the SQL layer refuses ALTER TABLE inside one), so no rollback has to
//!    take it back.
//!
//! What is not here: the expression's meaning. Storage keeps the definition as text; the
//! SQL layer parses, checks and enforces it.

use extentdb_format::catalog::{Catalog, CheckConstraint};

use crate::database::Database;
use crate::StorageError;

/// Gives each of `checks` without an object id (0) the catalog's next one (invariant 1).
pub(crate) fn number_checks(c: &mut Catalog, checks: &mut [CheckConstraint]) {
    for k in checks.iter_mut().filter(|k| k.object_id == 0) {
        k.object_id = c.next_object_id;
        c.next_object_id += 1;
    }
}

impl Database {
    /// Adds `check` to table `object_id` (its object id assigned here); returns that id.
    pub fn add_check_constraint(
        &mut self,
        object_id: u32,
        mut check: CheckConstraint,
    ) -> Result<u32, StorageError> {
        self.table_or_err(object_id)?;
        let mut taken = self.catalog.tables.iter().flat_map(|t| &t.checks);
        if taken.any(|k| k.name.eq_ignore_ascii_case(&check.name)) {
            return Err(StorageError::TableExists(check.name));
        }
        check.object_id = 0;
        let mut id = 0;
        self.change_catalog(|c| {
            number_checks(c, std::slice::from_mut(&mut check));
            id = check.object_id;
            let t = c
                .tables
                .iter_mut()
                .find(|t| t.object_id == object_id)
                .ok_or(StorageError::TableNotFound(object_id))?;
            t.checks.push(check);
            Ok(())
        })?;
        assert_ne!(id, 0, "a constraint has an object id");
        Ok(id)
    }

    /// Drops the CHECK constraint `constraint_id` of table `object_id`; false when the
    /// table has no such constraint (nothing changes then).
    pub fn drop_check_constraint(
        &mut self,
        object_id: u32,
        constraint_id: u32,
    ) -> Result<bool, StorageError> {
        let t = self.table_or_err(object_id)?;
        if !t.checks.iter().any(|k| k.object_id == constraint_id) {
            return Ok(false);
        }
        self.change_catalog(|c| {
            let t = c
                .tables
                .iter_mut()
                .find(|t| t.object_id == object_id)
                .ok_or(StorageError::TableNotFound(object_id))?;
            t.checks.retain(|k| k.object_id != constraint_id);
            Ok(())
        })?;
        Ok(true)
    }
}
