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
use std::sync::{Arc, LazyLock, RwLock};

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
    /// Each column's position in the record (`layouts`' order); None for one not stored.
    stored_at: Vec<Option<usize>>,
    plan: ComputedPlan,
    /// The table as messages name it.
    name: String,
}

/// The evaluator: plans by object id, checked on each use (invariant 2). Read-mostly:
/// every session's projections take the read lock, a new plan the write lock.
#[derive(Default)]
struct Evaluator {
    plans: RwLock<HashMap<u32, Arc<TablePlan>>>,
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
        if let Some(p) = self.plans.read().unwrap().get(&t.object_id) {
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
        let stored_at = t
            .columns
            .iter()
            .scan(0, |next, c| {
                Some(is_stored(c).then(|| {
                    *next += 1;
                    *next - 1
                }))
            })
            .collect();
        let made = Arc::new(TablePlan {
            stored_at,
            columns: t.columns.clone(),
            layouts: layouts(t),
            types,
            plan,
            name: format!("{}.{}", t.schema_name, t.name),
        });
        let mut plans = self.plans.write().unwrap();
        if plans.len() >= MAX_PLANS {
            plans.clear();
        }
        plans.insert(t.object_id, made.clone());
        assert!(plans.len() <= MAX_PLANS, "computed_values.rs invariant 2");
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
        let position = p
            .columns
            .iter()
            .position(|c| c.column_id == column_id)
            .ok_or("no such column")?;
        // Only the columns the definition reads are decoded (a pad column's text is not
        // made for nothing); the others stay NULL, which it never reads.
        let reads = p.plan.reads_of(position).ok_or("not a computed column")?;
        let mut row = vec![Value::Null; p.types.len()];
        for &at in reads {
            let stored = p.stored_at[at].ok_or("a definition reads a computed column")?;
            let b = cols.get(stored).ok_or("a column short")?;
            row[at] = rowcodec::decode(p.types[at], *b)?;
        }
        let v = p
            .plan
            .value_at(&p.name, position, &row)
            .ok_or("not a computed column")?
            .map_err(|e| e.text)?;
        rowcodec::encode(p.types[position], &v).map_err(|e| e.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use extentdb_format::catalog::ComputedColumn;

    /// A heap `t` (a INT, b INT, then each of `computed` as (name, definition, PERSISTED)).
    fn table(object_id: u32, computed: &[(&str, &str, bool)]) -> TableEntry {
        let int = |id: u16, name: &str, k: Option<ComputedColumn>| ColumnEntry {
            column_id: id,
            name: name.into(),
            system_type_id: 56,
            max_length: 4,
            precision: 10,
            scale: 0,
            is_nullable: true,
            identity: None,
            default_sql: String::new(),
            computed: k,
        };
        let mut columns = vec![int(1, "a", None), int(2, "b", None)];
        for (i, (name, definition, is_persisted)) in computed.iter().enumerate() {
            let k = ComputedColumn {
                definition: definition.to_string(),
                is_persisted: *is_persisted,
            };
            columns.push(int(3 + i as u16, name, Some(k)));
        }
        TableEntry {
            object_id,
            schema_name: "dbo".into(),
            name: "t".into(),
            created_us: 0,
            data_space_id: 1,
            allocation_unit_id: 0,
            index_id: 0,
            root_page: extentdb_format::PageId::NULL,
            primary_key: None,
            columns,
            identity_last: Default::default(),
            lock_escalation: Default::default(),
            pending_ddl: None,
            index_of: None,
            checks: Vec::new(),
            foreign_keys: Vec::new(),
            is_disabled: false,
        }
    }

    /// `t`'s record of stored values `values` (ints, None for NULL).
    fn record_of(t: &TableEntry, values: &[Option<i32>]) -> Vec<u8> {
        let bytes: Vec<Option<[u8; 4]>> = values.iter().map(|v| v.map(i32::to_le_bytes)).collect();
        let refs: Vec<Option<&[u8]>> = bytes.iter().map(|b| b.as_ref().map(|b| &b[..])).collect();
        record::encode(&layouts(t), &refs).unwrap()
    }

    /// Proves a column not PERSISTED is computed from the record's stored columns (a
    /// PERSISTED one's stored value beside it ignored), encoded as the column stores it,
    /// NULL where the definition gives NULL; that a plan made for one definition is not
    /// used for another of the same object id (invariant 2: a catalog change); and that
    /// the cache stays bounded over more tables than it holds.
    #[test]
    fn values_are_computed_from_the_record_and_plans_follow_the_catalog() {
        let e = Evaluator::default();
        let t = table(
            7,
            &[("p", "([a]*(3)+[b])", true), ("v", "([a]*(7)+[b])", false)],
        );
        let rec = record_of(&t, &[Some(5), Some(2), Some(-1)]);
        assert_eq!(
            e.compute(&t, &rec, 4),
            Ok(Some(37i32.to_le_bytes().to_vec()))
        );
        assert_eq!(
            e.compute(&t, &rec, 3),
            Ok(Some(17i32.to_le_bytes().to_vec()))
        );
        let null = record_of(&t, &[None, Some(2), None]);
        assert_eq!(e.compute(&t, &null, 4), Ok(None));
        assert!(e.compute(&t, &rec, 1).is_err(), "a is not computed");
        let changed = table(
            7,
            &[("p", "([a]*(3)+[b])", true), ("v", "([a]-[b])", false)],
        );
        assert_eq!(
            e.compute(&changed, &rec, 4),
            Ok(Some(3i32.to_le_bytes().to_vec()))
        );
        for id in 100..(100 + 2 * MAX_PLANS as u32) {
            let t = table(id, &[("v", "([a]+[b])", false)]);
            let rec = record_of(&t, &[Some(1), Some(id as i32)]);
            let want = (id as i32 + 1).to_le_bytes().to_vec();
            assert_eq!(e.compute(&t, &rec, 3), Ok(Some(want)));
            assert!(e.plans.read().unwrap().len() <= MAX_PLANS);
        }
    }
}
