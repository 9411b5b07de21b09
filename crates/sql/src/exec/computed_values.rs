//! Storage's evaluator of computed columns (storage computed_values.rs): the value of a
//! computed column that no record stores, computed from a base record wherever storage
//! projects an index record (row operations, index builds, lookups, DBCC CHECKDB), with
//! no session at hand. `register` hands it to storage once per process; the engine
//! (`Engine::new`) and the offline checks (`checkdb::run_check`) call it.
//!
//! Invariants:
//! 1. A value is `ComputedPlan::value_at`'s over the record's stored columns, converted
//!    and encoded as `TableRef::encode` would store it had the column been PERSISTED: the
//!    same evaluation the SQL layer's reads make (computed_columns.rs invariant 5), so an
//!    index seek's key and the row it finds agree.
//! 2. Parsed plans are cached by table, each checked against the entry it was made from
//!    (its columns compared, not only its object id: databases share object ids and a
//!    catalog change makes a new entry), and the cache holds at most `MAX_PLANS` of them
//!    (emptied when full), so memory is bounded whatever the number of tables.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use extentdb_format::catalog::{ColumnEntry, TableEntry};
use extentdb_format::record::{self, ColumnLayout};
use extentdb_storage::computed_values::ComputedValues;
use extentdb_storage::table::{is_stored, layouts};

use super::computed_columns::ComputedPlan;
use super::tables::column_type;
use crate::rowcodec;
use crate::types::{SqlType, Value};

/// Plans the cache holds at most (invariant 2).
const MAX_PLANS: usize = 256;

/// One table's computed columns, ready for its records.
struct TablePlan {
    /// The columns the plan was made from (invariant 2).
    columns: Vec<ColumnEntry>,
    types: Vec<SqlType>,
    layouts: Vec<ColumnLayout>,
    plan: ComputedPlan,
    /// The table as messages name it.
    name: String,
}

/// The evaluator: plans by (database-independent) object id, checked on each use.
#[derive(Default)]
struct Evaluator {
    plans: Mutex<HashMap<u32, Arc<TablePlan>>>,
}

static EVALUATOR: LazyLock<Evaluator> = LazyLock::new(Evaluator::default);

/// Hands the evaluator to storage (storage computed_values.rs invariant 2: once per
/// process; calling again changes nothing).
pub fn register() {
    extentdb_storage::computed_values::register(&*EVALUATOR);
}

impl Evaluator {
    /// `t`'s plan, from the cache when it was made from the same columns.
    fn plan(&self, t: &TableEntry) -> Result<Arc<TablePlan>, String> {
        if let Some(p) = self.plans.lock().unwrap().get(&t.object_id) {
            if p.columns == t.columns {
                return Ok(p.clone());
            }
        }
        let types = t
            .columns
            .iter()
            .map(column_type)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.text)?;
        let plan = ComputedPlan::of(t, &types)
            .map_err(|e| e.into_iter().map(|e| e.text).collect::<Vec<_>>().join(" "))?
            .ok_or("the table has no computed column")?;
        let made = Arc::new(TablePlan {
            columns: t.columns.clone(),
            layouts: layouts(t),
            types,
            plan,
            name: format!("{}.{}", t.schema_name, t.name),
        });
        let mut plans = self.plans.lock().unwrap();
        if plans.len() >= MAX_PLANS {
            plans.clear();
        }
        plans.insert(t.object_id, made.clone());
        Ok(made)
    }
}

impl ComputedValues for Evaluator {
    fn compute(
        &self,
        table: &TableEntry,
        rec: &[u8],
        column_id: u16,
    ) -> Result<Option<Vec<u8>>, String> {
        let p = self.plan(table)?;
        let cols = record::decode(&p.layouts, rec).map_err(|e| e.to_string())?;
        let mut stored = cols.iter();
        let mut row = Vec::with_capacity(p.types.len());
        for (c, t) in p.columns.iter().zip(&p.types) {
            row.push(match is_stored(c) {
                true => {
                    let b = stored.next().ok_or("a column short")?;
                    rowcodec::decode(*t, *b)?
                }
                false => Value::Null,
            });
        }
        let position = p
            .columns
            .iter()
            .position(|c| c.column_id == column_id)
            .ok_or("no such column")?;
        let v = p
            .plan
            .value_at(&p.name, position, &row)
            .ok_or("not a computed column")?
            .map_err(|e| e.text)?;
        rowcodec::encode(p.types[position], &v).map_err(|e| e.text)
    }
}
