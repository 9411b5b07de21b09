//! Structure changes the SQL layer validates and storage makes (storage's structure.rs):
//! the statement's checks, with their messages, run on the database as a shared read
//! shows it; storage then holds the database exclusively and makes the change only if the
//! catalog is still the state that was checked (structure.rs invariant 2). Otherwise the
//! checks run again on the new state, so a statement never acts on a state it did not
//! check, as when both ran in one exclusive hold.
//!
//! The SQL layer never holds a database exclusively (crates/sql/tests/boundary.rs).

use extentdb_storage::{Database, SharedDatabase, StorageError};

use crate::messages::SqlError;

/// Validates with `check` (a change, or the statement's messages) and makes the change with
/// `make` at the catalog state checked, again while storage answers `CatalogChanged`;
/// `map` gives any other storage failure as messages.
pub(super) fn validated_change<C, T>(
    db: &SharedDatabase,
    mut check: impl FnMut(&Database) -> Result<C, Vec<SqlError>>,
    mut make: impl FnMut(u64, C) -> Result<T, StorageError>,
    map: impl Fn(StorageError) -> Vec<SqlError>,
) -> Result<T, Vec<SqlError>> {
    loop {
        let (catalog_version, change) = {
            let d = db.read().unwrap();
            (d.catalog_version(), check(&d)?)
        };
        match make(catalog_version, change) {
            Err(StorageError::CatalogChanged) => continue,
            other => return other.map_err(map),
        }
    }
}
