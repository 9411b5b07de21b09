//! A database's T-SQL modules (stored procedures, format's module.rs): CREATE, ALTER and
//! DROP PROCEDURE as catalog changes, each one catalog save made durable before the
//! statement is acknowledged (so a procedure survives kill -9 once CREATE returned, goes
//! with its database, and is in every backup taken after).
//!
//! Invariants:
//! 1. A module's name is no other object's in dbo: not a module's, a table's, nor a CHECK or
//!    FOREIGN KEY constraint's (SQL Server's one namespace per schema, Msg 2714); checked
//!    holding the database, so two sessions creating one name get one procedure and one
//!    `TableExists`. CREATE TABLE and ADD CONSTRAINT check modules' names likewise.
//! 2. A module's object id is taken from the catalog's next object id (the id space of tables
//!    and constraints) and never reused while the database lives.
//! 3. ALTER keeps the object id and create date, and replaces the definition, parameters and
//!    SET options whole, with the modify date moved to now (never before the create date).
//! 4. DROP removes the permissions granted or denied on the procedure in the same save.
//!
//! Not here: parsing, permissions, schema locks and messages (the SQL layer's
//! procedures.rs); what runs a module.

use extentdb_format::catalog::Catalog;
use extentdb_format::module::ModuleEntry;
use extentdb_format::principals::PermissionClass;

use crate::shared::SharedDatabase;
use crate::StorageError;

/// A change of the module list, validated by the caller (structure.rs invariant 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModuleChange {
    /// A new module: its object id and dates are assigned here.
    Create(ModuleEntry),
    /// Module `object_id` gets `with`'s definition, parameters and SET options.
    Alter { object_id: u32, with: ModuleEntry },
    /// Every module named goes, in one catalog save.
    Drop(Vec<u32>),
}

/// Invariant 1: whether `name` is an object of dbo already.
pub fn name_taken(c: &Catalog, name: &str) -> bool {
    let is = |n: &str| n.eq_ignore_ascii_case(name);
    c.modules.iter().any(|m| is(&m.name))
        || c.tables.iter().any(|t| {
            t.index_of.is_none()
                && t.rebuilt_table().is_none()
                && t.schema_name.eq_ignore_ascii_case("dbo")
                && is(&t.name)
        })
        || c.tables.iter().any(|t| {
            t.checks.iter().any(|k| is(&k.name)) || t.foreign_keys.iter().any(|k| is(&k.name))
        })
}

/// The module named `name` (dbo's; case-insensitively).
pub fn by_name<'c>(c: &'c Catalog, name: &str) -> Option<&'c ModuleEntry> {
    c.modules.iter().find(|m| m.name.eq_ignore_ascii_case(name))
}

impl SharedDatabase {
    /// Makes `change` at catalog state `catalog_version` (structure.rs invariant 2); returns
    /// the object id created or altered (0 for a drop).
    pub fn change_modules(
        &self,
        catalog_version: u64,
        change: ModuleChange,
    ) -> Result<u32, StorageError> {
        let mut g = self.hold_at(catalog_version)?;
        let now = crate::now_us();
        let mut id = 0;
        g.change_catalog(|c| {
            match change {
                ModuleChange::Create(mut m) => {
                    if name_taken(c, &m.name) {
                        return Err(StorageError::TableExists(m.name));
                    }
                    m.object_id = c.next_object_id;
                    c.next_object_id += 1;
                    (m.created_us, m.modified_us) = (now, now);
                    id = m.object_id;
                    c.modules.push(m);
                }
                ModuleChange::Alter { object_id, with } => {
                    let m = c
                        .modules
                        .iter_mut()
                        .find(|m| m.object_id == object_id)
                        .ok_or(StorageError::TableNotFound(object_id))?;
                    m.definition = with.definition;
                    m.parameters = with.parameters;
                    m.uses_ansi_nulls = with.uses_ansi_nulls;
                    m.uses_quoted_identifier = with.uses_quoted_identifier;
                    m.modified_us = now.max(m.created_us);
                    id = object_id;
                }
                ModuleChange::Drop(ids) => {
                    let before = c.modules.len();
                    c.modules.retain(|m| !ids.contains(&m.object_id));
                    if before - c.modules.len() != ids.len() {
                        return Err(StorageError::TableNotFound(ids[0]));
                    }
                    // Invariant 4: its permissions go with it.
                    c.security.permissions.retain(|p| {
                        p.class != PermissionClass::Object || !ids.contains(&p.major_id)
                    });
                }
            }
            Ok(())
        })?;
        Ok(id)
    }
}
