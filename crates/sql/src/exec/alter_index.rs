//! ALTER INDEX { name | ALL } ON table { REBUILD | REORGANIZE } [WITH (...)]: a
//! nonclustered index's B-tree made again, compact and in allocation order, by storage's
//! `rebuild_index` (index.rs invariant 5). Checked here with SQL Server's messages, then
//! made under the table's Sch-M lock (as CREATE INDEX: other sessions' statements on the
//! table wait for it, and it waits for every open transaction that touched the table),
//! each index in a transaction of its own holding the database.
//!
//! REORGANIZE is built as a rebuild: it leaves the leaf level compact and in order, which
//! is what REORGANIZE's page moves aim at, and changes nothing a query sees.
//!
//! Built options: REBUILD WITH (ONLINE = OFF, FILLFACTOR = 0 | 100 (leaves are filled
//! full), SORT_IN_TEMPDB = OFF | ON (the rebuild reads the old index in key order and
//! sorts nothing, so no sort run is placed anywhere), MAXDOP = n (0 to 32,767: the build
//! is serial, within any cap)); REORGANIZE WITH (LOB_COMPACTION = ON). Refused with 40517
//! until built: the clustered index (the PRIMARY KEY's, and ALL on a clustered table,
//! which includes it), every other option and value (ONLINE = ON, DATA_COMPRESSION,
//! FILLFACTOR below 100, PAD_INDEX, ...), inside a transaction (as CREATE INDEX); in the
//! parser: DISABLE, SET, RESUME, PAUSE, ABORT and PARTITION.
//!
//! Invariant: every check runs before the first index is rebuilt, so a refused statement
//! changes nothing; ALL rebuilds its indexes one after another, each whole or not at all.

use extentdb_storage::StorageError;

use super::errors;
use super::eval::as_i64;
use super::lower::not_yet;
use super::tables::TableRef;
use super::Session;
use crate::ast::{AlterIndex, IndexAction, OptionValue, WithOption};
use crate::messages::{msg, SqlError};
use crate::types::Value;

impl Session {
    /// ALTER INDEX (the module's doc).
    pub(super) fn alter_index(&mut self, a: &AlterIndex) -> Result<(), Vec<SqlError>> {
        let table_missing = || msg(1088, &[&a.table.joined()]);
        let t = self
            .find_table(&a.table)?
            .ok_or_else(|| vec![table_missing()])?;
        self.require_table_alter(&t, table_missing())?;
        for o in &a.options {
            self.check_index_option(a.action, o)?;
        }
        index_targets(a, &t)?;
        self.refuse_in_transaction("ALTER INDEX")?;
        self.schema_modification(&t)?;
        // Again under Sch-M: a rebuild that ran meanwhile renewed its entry's id.
        let targets = index_targets(a, &t)?;
        let env = self.growth_env();
        for id in targets {
            let rebuilt =
                t.db.rebuild_index((t.entry.object_id, id), &env, &|| self.cancelled());
            rebuilt.map_err(|e| match e {
                // An attention or KILL: rolled back, the batch ends without a message.
                StorageError::Cancelled => Vec::new(),
                e => errors::map(&e, errors::Context::Other),
            })?;
        }
        Ok(())
    }

    /// One WITH option of REBUILD or REORGANIZE: built (the module's doc) or refused.
    fn check_index_option(
        &mut self,
        action: IndexAction,
        o: &WithOption,
    ) -> Result<(), Vec<SqlError>> {
        let refuse = || {
            let verb = match action {
                IndexAction::Rebuild => "REBUILD",
                IndexAction::Reorganize => "REORGANIZE",
            };
            let value = match &o.value {
                Some(OptionValue::Word(w)) => format!(" = {}", w.to_ascii_uppercase()),
                Some(OptionValue::Expr(_)) => " with this value".to_string(),
                None => String::new(),
            };
            vec![not_yet(&format!(
                "the index option {}{value} in ALTER INDEX ... {verb}",
                o.name
            ))]
        };
        let word = match &o.value {
            Some(OptionValue::Word(w)) => Some(w.to_ascii_uppercase()),
            _ => None,
        };
        let number = match &o.value {
            Some(OptionValue::Expr(e)) => {
                let v = self.eval(e, None).map_err(|e| vec![e])?;
                Some(match v {
                    Value::Null => return Err(refuse()),
                    v => as_i64(&v).map_err(|e| vec![e])?,
                })
            }
            _ => None,
        };
        let built = match (action, o.name.as_str()) {
            (IndexAction::Rebuild, "ONLINE") => word.as_deref() == Some("OFF"),
            (IndexAction::Rebuild, "SORT_IN_TEMPDB") => {
                matches!(word.as_deref(), Some("OFF" | "ON"))
            }
            (IndexAction::Rebuild, "FILLFACTOR") => matches!(number, Some(0 | 100)),
            (IndexAction::Rebuild, "MAXDOP") => number.is_some_and(|n| (0..=32_767).contains(&n)),
            (IndexAction::Reorganize, "LOB_COMPACTION") => word.as_deref() == Some("ON"),
            _ => false,
        };
        match built {
            true => Ok(()),
            false => Err(refuse()),
        }
    }
}

/// The index entries ALTER INDEX `a` rebuilds on table `t`: the one named (Msg 7999 when
/// the table has none so named), or ALL of a heap's.
fn index_targets(a: &AlterIndex, t: &TableRef) -> Result<Vec<u32>, Vec<SqlError>> {
    let d = t.db.read().unwrap();
    let object_id = t.entry.object_id;
    match &a.index {
        Some(name) if super::index_ddl::is_primary_key(&t.entry, name) => Err(vec![not_yet(
            "ALTER INDEX on a clustered index (the PRIMARY KEY's)",
        )]),
        Some(name) => d
            .index_by_name(object_id, name)
            .map(|e| vec![e.object_id])
            .ok_or_else(|| vec![msg(7999, &[name, &t.entry.name])]),
        None if t.entry.index_id == 1 => Err(vec![not_yet(
            "ALTER INDEX ALL on a table with a clustered index (the clustered index is not rebuilt)",
        )]),
        None => Ok(d.indexes_of(object_id).map(|e| e.object_id).collect()),
    }
}
