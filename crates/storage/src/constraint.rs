//! CHECK and FOREIGN KEY constraints in the catalog: each kept on its (referencing)
//! table's entry (FORMAT.md, "Catalog", versions 10 and 11) with an object id of its own,
//! as sys.objects lists it (type 'C' or 'F').
//!
//! Invariants:
//! 1. A constraint's object id comes from the catalog's next object id, as a table's does,
//!    so no two objects share one; `create_table` numbers its table's constraints after
//!    the table.
//!    A FOREIGN KEY made with its table that references 0 references the table itself
//!    (its object id is not known before).
//! 2. Constraint names are unique among the database's CHECK constraints: `add_check_
//!    constraint` refuses a name taken (`TableExists`), checked holding the database, so
//!    two sessions adding the same name to different tables cannot both succeed.
//! 3. Adding or dropping a constraint is one catalog change (`change_catalog`), made
//!    holding the database: it is whole or absent after a crash. It is made outside any
//!    transaction (the SQL layer refuses ALTER TABLE inside one), so no rollback has to
//!    take it back.
//!
//! 4. A FOREIGN KEY's referenced table is in the catalog while the key is (the catalog's
//!    invariant 10): adding a key or creating its table checks the parent is there, and
//!    `drop_table` refuses a table another's key references (`ReferencedByForeignKey`),
//!    all holding the database, before anything changes.
//!
//! 5. Enabling or disabling constraints (ALTER TABLE ... CHECK / NOCHECK CONSTRAINT,
//!    `set_constraint_states`) is one catalog change for all the constraints a statement
//!    names; a disabled constraint is never trusted (asserted).
//!
//! What is not here: the expression's meaning. Storage keeps the definition as text; the
//! SQL layer parses, checks and enforces it.

use extentdb_format::catalog::{Catalog, CheckConstraint, ForeignKey, TableEntry};

use crate::database::Database;
use crate::StorageError;

/// Gives each of `checks` without an object id (0) the catalog's next one (invariant 1).
pub(crate) fn number_checks(c: &mut Catalog, checks: &mut [CheckConstraint]) {
    for k in checks.iter_mut().filter(|k| k.object_id == 0) {
        k.object_id = c.next_object_id;
        c.next_object_id += 1;
    }
}

/// Gives each of `keys` without an object id the catalog's next one, and points a
/// reference to 0 at `own` (invariant 1).
pub(crate) fn number_foreign_keys(c: &mut Catalog, keys: &mut [ForeignKey], own: u32) {
    for k in keys.iter_mut() {
        if k.object_id == 0 {
            k.object_id = c.next_object_id;
            c.next_object_id += 1;
        }
        if k.referenced_object_id == 0 {
            k.referenced_object_id = own;
        }
    }
}

/// Whether a FOREIGN KEY of a table other than `object_id`, not itself being dropped,
/// references it (the SQL layer refuses a drop another transaction's pending drop of a
/// child could leave dangling; this is the last guard).
pub(crate) fn referenced_by_other(c: &Catalog, object_id: u32) -> bool {
    let dropped = |t: &&extentdb_format::catalog::TableEntry| {
        t.object_id == object_id || t.pending_ddl.is_some_and(|p| p.dropped)
    };
    c.tables.iter().filter(|t| !dropped(t)).any(|t| {
        t.foreign_keys
            .iter()
            .any(|k| k.referenced_object_id == object_id)
    })
}

/// Whether `name` is taken by a CHECK or FOREIGN KEY constraint of `c`.
fn constraint_name_taken(c: &Catalog, name: &str) -> bool {
    let is = |n: &str| n.eq_ignore_ascii_case(name);
    // module.rs invariant 1: a procedure's name is taken too.
    c.modules.iter().any(|m| is(&m.name))
        || c.tables.iter().any(|t| {
            t.checks.iter().any(|k| is(&k.name)) || t.foreign_keys.iter().any(|k| is(&k.name))
        })
}

/// Table `object_id`'s entry in catalog `c`, to change its constraint lists.
fn table_mut(c: &mut Catalog, object_id: u32) -> Result<&mut TableEntry, StorageError> {
    c.tables
        .iter_mut()
        .find(|t| t.object_id == object_id)
        .ok_or(StorageError::TableNotFound(object_id))
}

/// A CHECK or FOREIGN KEY constraint's state after ALTER TABLE ... { CHECK | NOCHECK }
/// CONSTRAINT (sys.check_constraints / sys.foreign_keys is_disabled and is_not_trusted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConstraintState {
    pub object_id: u32,
    pub is_disabled: bool,
    pub is_not_trusted: bool,
}

impl Database {
    /// Sets each of `states` on its constraint of table `object_id`, in one catalog change
    /// (invariant 5); `TableNotFound` naming a constraint the table does not have (nothing
    /// changes then).
    pub fn set_constraint_states(
        &mut self,
        object_id: u32,
        states: &[ConstraintState],
    ) -> Result<(), StorageError> {
        let t = self.table_or_err(object_id)?;
        for s in states {
            assert!(
                !s.is_disabled || s.is_not_trusted,
                "constraint.rs invariant 5: a disabled constraint is not trusted"
            );
            let key = t.foreign_keys.iter().find(|k| k.object_id == s.object_id);
            let has = key.is_some() || t.checks.iter().any(|k| k.object_id == s.object_id);
            if !has {
                return Err(StorageError::TableNotFound(s.object_id));
            }
            if let (Some(k), false) = (key, s.is_disabled) {
                assert!(
                    !self.indexes_of(k.referenced_object_id).any(|ix| {
                        let of = ix.index_of.as_ref().expect("an index entry");
                        of.index_id == k.key_index_id && of.is_disabled
                    }),
                    "index.rs invariant 8: no enabled key references through a disabled index"
                );
            }
        }
        self.change_catalog(|c| {
            let t = table_mut(c, object_id)?;
            for s in states {
                for k in t.checks.iter_mut().filter(|k| k.object_id == s.object_id) {
                    (k.is_disabled, k.is_not_trusted) = (s.is_disabled, s.is_not_trusted);
                }
                for k in t
                    .foreign_keys
                    .iter_mut()
                    .filter(|k| k.object_id == s.object_id)
                {
                    (k.is_disabled, k.is_not_trusted) = (s.is_disabled, s.is_not_trusted);
                }
            }
            Ok(())
        })
    }

    /// Adds FOREIGN KEY `key` to table `object_id` (its object id assigned here); returns
    /// that id. A name taken is `TableExists` (invariant 2).
    pub fn add_foreign_key(
        &mut self,
        object_id: u32,
        mut key: ForeignKey,
    ) -> Result<u32, StorageError> {
        self.table_or_err(object_id)?;
        self.table_or_err(key.referenced_object_id)?;
        if constraint_name_taken(&self.catalog, &key.name) {
            return Err(StorageError::TableExists(key.name));
        }
        key.object_id = 0;
        let mut id = 0;
        self.change_catalog(|c| {
            number_foreign_keys(c, std::slice::from_mut(&mut key), object_id);
            id = key.object_id;
            let t = table_mut(c, object_id)?;
            t.foreign_keys.push(key);
            Ok(())
        })?;
        assert_ne!(id, 0, "a constraint has an object id");
        Ok(id)
    }

    /// Drops FOREIGN KEY `constraint_id` of table `object_id`; false when the table has no
    /// such constraint (nothing changes then).
    pub fn drop_foreign_key(
        &mut self,
        object_id: u32,
        constraint_id: u32,
    ) -> Result<bool, StorageError> {
        let t = self.table_or_err(object_id)?;
        if !t.foreign_keys.iter().any(|k| k.object_id == constraint_id) {
            return Ok(false);
        }
        self.change_catalog(|c| {
            let t = table_mut(c, object_id)?;
            t.foreign_keys.retain(|k| k.object_id != constraint_id);
            Ok(())
        })?;
        Ok(true)
    }

    /// Adds `check` to table `object_id` (its object id assigned here); returns that id.
    pub fn add_check_constraint(
        &mut self,
        object_id: u32,
        mut check: CheckConstraint,
    ) -> Result<u32, StorageError> {
        self.table_or_err(object_id)?;
        if constraint_name_taken(&self.catalog, &check.name) {
            return Err(StorageError::TableExists(check.name));
        }
        check.object_id = 0;
        let mut id = 0;
        self.change_catalog(|c| {
            number_checks(c, std::slice::from_mut(&mut check));
            id = check.object_id;
            let t = table_mut(c, object_id)?;
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
            let t = table_mut(c, object_id)?;
            t.checks.retain(|k| k.object_id != constraint_id);
            Ok(())
        })?;
        Ok(true)
    }
}
