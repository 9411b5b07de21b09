//! IDENTITY values, kept in the catalog as SQL Server keeps sys.identity_columns.last_value
//! with IDENTITY_CACHE on: each table's catalog entry holds a bound (`IdentityLast`) that
//! no value handed out has passed, and values are handed out from memory up to it. When
//! the next value lies past the bound, a block of values is reserved: the bound moves
//! `block_values` increments on and the catalog is saved (copy-on-write, synced, published
//! by the boot pages: FORMAT.md, "Catalog") before the value is handed out. So a crash
//! skips at most the rest of a block and never repeats a value, and no value is ever
//! found by reading the table, except once for a table of a catalog written before
//! version 6 (`IdentityLast::Unknown`), whose bound is then kept.
//!
//! The bound moves:
//! - at CREATE and TRUNCATE TABLE: one block from the seed, saved with the table's entry;
//! - when a value would pass it: one block on (`next_identity` needs it,
//!   `Needs::IdentityBlock`, and `reserve_identity_block` saves it with the database held
//!   exclusively);
//! - when SET IDENTITY_INSERT stores a value past it: to that value (`note_identity`,
//!   `raise_identity_bound`);
//! - at open (`reserve_identity_blocks`): one block past the value the catalog holds, so
//!   sessions sharing the database take values at once from the first insert;
//! - at a clean close (`release_identity_blocks`, SHUTDOWN and SET OFFLINE): back to the
//!   last value handed out, so the next open continues from it with no gap.
//!
//! Invariants:
//! 1. No value past a table's bound is handed out, and a raised bound is durable before a
//!    value it newly covers is handed out (`set_identity_bounds` returns only after the
//!    catalog save).
//! 2. `DataPath::identity` holds, for a table, the last value handed out (None: none since
//!    the seed), at or before the bound. A table missing from it has its last value equal
//!    to the bound (after open, or a save that lowered it); so an entry is made before a
//!    bound is raised.
//! 3. A table without an IDENTITY column has the bound `Unused` (catalog.rs invariant 7).
//!
//! Deliberately not here: DBCC CHECKIDENT and IDENT_CURRENT (not built); the type's range,
//! which the SQL layer checks on each value (Msg 8115): a bound may lie past it.

use std::collections::HashMap;

use extentdb_format::catalog::{IdentityLast, TableEntry};
use extentdb_format::key::type_id;
use extentdb_format::record;

use crate::access::{Needs, Step};
use crate::table::layouts;
use crate::{Database, StorageError};

/// Values one reservation covers, by the column's type: SQL Server's 1,000 for int and
/// 10,000 for bigint; tinyint and smallint take 10 and 100 (a 1,000-value block would
/// exhaust a tinyint at the first crash).
pub fn block_values(system_type_id: u8) -> i64 {
    match system_type_id {
        type_id::TINYINT => 10,
        type_id::SMALLINT => 100,
        type_id::BIGINT => 10_000,
        _ => 1_000,
    }
}

/// A table's identity column: (position, seed, increment, block).
fn identity_column(t: &TableEntry) -> Option<(usize, i64, i64, i64)> {
    crate::table::stored_columns(t)
        .enumerate()
        .find_map(|(pos, c)| {
            c.identity
                .map(|(seed, inc)| (pos, seed, inc, block_values(c.system_type_id)))
        })
}

/// The value after `last` (the seed when none was handed out).
fn next_after(last: Option<i64>, seed: i64, inc: i64) -> Result<i64, StorageError> {
    match last {
        None => Ok(seed),
        Some(v) => v.checked_add(inc).ok_or(StorageError::IdentityOverflow),
    }
}

/// True when `v` lies at or before `bound` in the increment's direction.
fn within(bound: IdentityLast, v: i64, inc: i64) -> bool {
    match bound {
        IdentityLast::Through(b) if inc >= 0 => v <= b,
        IdentityLast::Through(b) => v >= b,
        IdentityLast::Unused | IdentityLast::Unknown => false,
    }
}

/// True when `value` lies past `current` in the increment's direction.
fn beyond(current: i64, value: i64, inc: i64) -> bool {
    if inc >= 0 {
        value > current
    } else {
        value < current
    }
}

/// The bound of a block starting at `first`.
fn block_from(first: i64, inc: i64, block: i64) -> IdentityLast {
    IdentityLast::Through(first.saturating_add(inc.saturating_mul(block - 1)))
}

/// The bound a new or truncated table starts with: one block from the seed.
pub(crate) fn fresh_bound(t: &TableEntry) -> IdentityLast {
    match identity_column(t) {
        Some((_, seed, inc, block)) => block_from(seed, inc, block),
        None => IdentityLast::Unused,
    }
}

/// The last value handed out (None: none since the seed), if known without reading the
/// table (invariant 2).
fn last_known(t: &TableEntry, known: &HashMap<u32, Option<i64>>) -> Option<Option<i64>> {
    if let Some(v) = known.get(&t.object_id) {
        return Some(*v);
    }
    match t.identity_last {
        IdentityLast::Unused => Some(None),
        IdentityLast::Through(v) => Some(Some(v)),
        IdentityLast::Unknown => None,
    }
}

impl Database {
    /// The next identity value of the table's IDENTITY column (not rolled back, as in
    /// SQL Server), beside other sessions (access.rs). Needs a block reserved in the
    /// catalog first when the value lies past the bound, or when no catalog keeps the
    /// table's value (version 5: found by a scan).
    pub fn next_identity(&self, object_id: u32) -> Result<Step<i64>, StorageError> {
        let t = self
            .table_by_id(object_id)
            .ok_or(StorageError::TableNotFound(object_id))?;
        let (_, seed, inc, _) = identity_column(t).ok_or(StorageError::TableNotFound(object_id))?;
        let block = Needs::IdentityBlock { object_id };
        let mut known = self.data.identity.lock();
        let Some(last) = last_known(t, &known) else {
            return Ok(Step::Needs(block));
        };
        let next = next_after(last, seed, inc)?;
        if !within(t.identity_last, next, inc) {
            return Ok(Step::Needs(block));
        }
        known.insert(object_id, Some(next));
        Ok(Step::Done(next))
    }

    /// Reserves the block of identity values after the table's last one in the catalog
    /// (`Needs::IdentityBlock`).
    pub(crate) fn reserve_identity_block(&mut self, object_id: u32) -> Result<(), StorageError> {
        let t = self.table_or_err(object_id)?.clone();
        let (_, seed, inc, block) =
            identity_column(&t).ok_or(StorageError::TableNotFound(object_id))?;
        let last = self.last_identity(&t)?;
        let next = next_after(last, seed, inc)?;
        self.data.identity.get_mut().insert(object_id, last);
        self.set_identity_bounds(&[(object_id, block_from(next, inc, block))])
    }

    /// A value stored explicitly (SET IDENTITY_INSERT ON): past the current value, in the
    /// increment's direction, it becomes the current value, made durable first when it
    /// lies past the bound (`Needs::IdentityBound`).
    pub fn note_identity(&self, object_id: u32, value: i64) -> Result<Step<()>, StorageError> {
        let t = self
            .table_by_id(object_id)
            .ok_or(StorageError::TableNotFound(object_id))?;
        let (_, seed, inc, _) = identity_column(t).ok_or(StorageError::TableNotFound(object_id))?;
        let bound = Needs::IdentityBound { object_id, value };
        let mut known = self.data.identity.lock();
        let Some(last) = last_known(t, &known) else {
            return Ok(Step::Needs(bound));
        };
        if !beyond(last.unwrap_or_else(|| seed.saturating_sub(inc)), value, inc) {
            return Ok(Step::Done(()));
        }
        if !within(t.identity_last, value, inc) {
            return Ok(Step::Needs(bound));
        }
        known.insert(object_id, Some(value));
        Ok(Step::Done(()))
    }

    /// `note_identity`'s value past the bound (or the table's value not kept by its
    /// catalog): the current value, and the catalog's bound, once it is past them.
    pub(crate) fn raise_identity_bound(
        &mut self,
        object_id: u32,
        value: i64,
    ) -> Result<(), StorageError> {
        let t = self.table_or_err(object_id)?.clone();
        let (_, seed, inc, _) =
            identity_column(&t).ok_or(StorageError::TableNotFound(object_id))?;
        let current = self
            .last_identity(&t)?
            .unwrap_or_else(|| seed.saturating_sub(inc));
        if !beyond(current, value, inc) {
            return Ok(());
        }
        self.data.identity.get_mut().insert(object_id, Some(value));
        if !within(t.identity_last, value, inc) {
            self.set_identity_bounds(&[(object_id, IdentityLast::Through(value))])?;
        }
        Ok(())
    }

    /// The last value handed out of the table's IDENTITY column as far as known from a
    /// shared hold (sys.identity_columns.last_value): Some(None) before the first, None
    /// when only a scan could tell (a catalog older than version 6; `current_identity`).
    pub fn known_identity(&self, object_id: u32) -> Option<Option<i64>> {
        let t = self.table_by_id(object_id)?;
        last_known(t, &self.data.identity.lock())
    }

    /// The table's identity value as sys.identity_columns.last_value shows it: the last
    /// value handed out, None before the first.
    pub fn current_identity(&mut self, object_id: u32) -> Result<Option<i64>, StorageError> {
        let t = self.table_or_err(object_id)?.clone();
        identity_column(&t).ok_or(StorageError::TableNotFound(object_id))?;
        self.last_identity(&t)
    }

    /// At open: every table whose value the catalog keeps gets a block past it, in one
    /// catalog save, so the first inserts take values with the database shared.
    pub(crate) fn reserve_identity_blocks(&mut self) -> Result<(), StorageError> {
        let mut bounds = Vec::new();
        for t in &self.catalog.tables {
            let Some((_, seed, inc, block)) = identity_column(t) else {
                continue;
            };
            let known = self.data.identity.get_mut();
            let Some(last) = last_known(t, known) else {
                continue; // kept by no catalog yet: the first insert reads the table
            };
            // A table whose values are used up keeps its bound: its next insert fails.
            let Ok(next) = next_after(last, seed, inc) else {
                continue;
            };
            known.insert(t.object_id, last);
            bounds.push((t.object_id, block_from(next, inc, block)));
        }
        self.set_identity_bounds(&bounds)
    }

    /// At a clean close (SHUTDOWN, SET OFFLINE): every bound goes back to the last value
    /// handed out, so the next open continues from it exactly. Values handed out after
    /// this reserve a block again (invariant 1 holds throughout).
    pub fn release_identity_blocks(&mut self) -> Result<(), StorageError> {
        let known = self.data.identity.get_mut();
        let bounds: Vec<(u32, IdentityLast)> = self
            .catalog
            .tables
            .iter()
            .filter_map(|t| {
                let last = *known.get(&t.object_id)?;
                let exact = last.map_or(IdentityLast::Unused, IdentityLast::Through);
                (exact != t.identity_last).then_some((t.object_id, exact))
            })
            .collect();
        self.set_identity_bounds(&bounds)
    }

    /// Sets tables' bounds and saves the catalog (nothing when `bounds` is empty); on
    /// failure the catalog is as before.
    fn set_identity_bounds(&mut self, bounds: &[(u32, IdentityLast)]) -> Result<(), StorageError> {
        if bounds.is_empty() {
            return Ok(());
        }
        self.change_catalog(|c| {
            for (object_id, bound) in bounds {
                let t = c
                    .tables
                    .iter_mut()
                    .find(|t| t.object_id == *object_id)
                    .ok_or(StorageError::TableNotFound(*object_id))?;
                assert!(
                    identity_column(t).is_some(),
                    "invariant 3: a bound for a table without IDENTITY"
                );
                t.identity_last = *bound;
            }
            Ok(())
        })
    }

    /// The last value handed out, read from the table once when its catalog (version 5)
    /// kept none.
    fn last_identity(&mut self, t: &TableEntry) -> Result<Option<i64>, StorageError> {
        if let Some(last) = last_known(t, self.data.identity.get_mut()) {
            return Ok(last);
        }
        let last = self.max_stored_identity(t)?;
        self.data.identity.get_mut().insert(t.object_id, last);
        Ok(last)
    }

    /// The largest value (smallest, for a negative increment) of the identity column
    /// stored in the table, by a chunked scan: only for a table whose catalog predates
    /// version 6.
    fn max_stored_identity(&mut self, t: &TableEntry) -> Result<Option<i64>, StorageError> {
        let (pos, _, inc, _) = identity_column(t).expect("checked by the caller");
        let lay = layouts(t);
        let mut best: Option<i64> = None;
        // Chunk by chunk (scan.rs), so the scan holds a chunk, never the table.
        let origin = self.scan_origin(t.object_id)?;
        let mut at = crate::scan::ScanPosition::Start;
        let mut rows = Vec::new();
        loop {
            let Some((_, rec)) = rows.pop() else {
                if at == crate::scan::ScanPosition::End {
                    break;
                }
                let chunk = self.scan_chunk(t.object_id, origin, &at, 1 << 20, None)?;
                (rows, at) = (chunk.rows, chunk.next);
                continue;
            };
            let cols = record::decode(&lay, &rec)?;
            let Some(v) = cols.get(pos).copied().flatten().map(stored_integer) else {
                continue;
            };
            best = Some(match best {
                None => v,
                Some(b) if inc >= 0 => b.max(v),
                Some(b) => b.min(v),
            });
        }
        Ok(best)
    }
}

/// An integer column's stored bytes (1, 2, 4 or 8, little-endian; tinyint unsigned).
fn stored_integer(b: &[u8]) -> i64 {
    let mut buf = [0u8; 8];
    let n = b.len().min(8);
    buf[..n].copy_from_slice(&b[..n]);
    match n {
        1 => buf[0] as i64,
        2 => i16::from_le_bytes([buf[0], buf[1]]) as i64,
        4 => i32::from_le_bytes(buf[..4].try_into().expect("4")) as i64,
        _ => i64::from_le_bytes(buf),
    }
}
