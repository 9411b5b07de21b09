//! Values of computed columns that no record stores but an index holds (SQL Server's index
//! on a computed column that is not PERSISTED). Storage builds index records from base
//! records (index.rs `project`), and such a column's value is in no base record: it is its
//! definition's over the record's other columns, a T-SQL expression storage cannot
//! evaluate. The SQL layer, which can, registers its evaluator here once per process
//! (`register`), and `project`, `key_matches` and CHECKDB ask it (`value_of`); CHECKDB
//! also asks it for a PERSISTED column's value, to compare with the one stored (2537).
//!
//! Invariants:
//! 1. An evaluator is a pure function of the table's catalog entry and the record: no
//!    session, clock or setting enters it (the SQL layer admits only deterministic
//!    definitions in an index, computed_columns.rs), so an index record projected by a row
//!    operation, by an index build and by CHECKDB is the same bytes for the same row.
//! 2. One evaluator per process, registered before any database holding such an index is
//!    written or checked; a second registration is ignored (the first stays). With none,
//!    asking is `ComputedValue` (an index on a column not PERSISTED is never kept without
//!    one).
//! 3. Its answer is the column's value as `record::encode` takes it (the column's stored
//!    type, None for NULL), exactly what a PERSISTED column of the same definition would
//!    store.
//!
//! Not here: the evaluation itself (crates/sql computed_columns.rs). A PERSISTED column's
//! value is in the record, and index records copy it as any column's.

use std::sync::OnceLock;

use extentdb_format::catalog::TableEntry;

use crate::StorageError;

/// The SQL layer's evaluator of computed columns (invariant 1).
pub trait ComputedValues: Send + Sync {
    /// The stored form (invariant 3) of computed column `column_id` of `table` over base
    /// record `rec`; `Err` with the reason when it cannot be computed.
    fn compute(
        &self,
        table: &TableEntry,
        rec: &[u8],
        column_id: u16,
    ) -> Result<Option<Vec<u8>>, String>;
}

static EVALUATOR: OnceLock<&'static dyn ComputedValues> = OnceLock::new();

/// Registers the process's evaluator (invariant 2: the first registration stays).
pub fn register(evaluator: &'static dyn ComputedValues) {
    let _ = EVALUATOR.set(evaluator);
}

/// Whether an evaluator is registered (CHECKDB computes PERSISTED values again only then).
pub(crate) fn registered() -> bool {
    EVALUATOR.get().is_some()
}

/// Computed column `column_id` of `table` over base record `rec`, as `record::encode`
/// takes it; `ComputedValue` when it cannot be computed or no evaluator is registered.
pub(crate) fn value_of(
    table: &TableEntry,
    rec: &[u8],
    column_id: u16,
) -> Result<Option<Vec<u8>>, StorageError> {
    let failed = |reason: String| StorageError::ComputedValue {
        table: format!("{}.{}", table.schema_name, table.name),
        column_id,
        reason,
    };
    let evaluator = EVALUATOR
        .get()
        .ok_or_else(|| failed("no evaluator of computed columns is registered".into()))?;
    debug_assert!(
        table
            .columns
            .iter()
            .any(|c| c.column_id == column_id && c.computed.is_some()),
        "computed_values: column {column_id} is not a computed column"
    );
    evaluator.compute(table, rec, column_id).map_err(failed)
}
