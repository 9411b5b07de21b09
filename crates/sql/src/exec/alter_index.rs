//! ALTER INDEX { name | ALL } ON table { REBUILD | REORGANIZE } [WITH (...)]: an index's
//! B-tree made again, compact and in allocation order. A nonclustered index by storage's
//! `rebuild_index` (index.rs invariant 5: a new entry replaces the old); the clustered
//! index (the PRIMARY KEY's) by `rebuild_clustered` (index.rs invariant 6: a new tree
//! filled from the table's rows in key order, exchanged with the table's when the
//! rebuild commits; the table keeps its object id, and its nonclustered indexes, whose row
//! locator is the unchanged clustering key, stay). Checked here with SQL Server's
//! messages, then made under the table's Sch-M lock (as CREATE INDEX: other sessions'
//! statements on the table wait for it, and it waits for every open transaction that
//! touched the table), each index in a transaction of its own; ALL takes the clustered
//! index first, then each nonclustered one.
//!
//! REORGANIZE is built as a rebuild: it leaves the leaf level compact and in order, which
//! is what REORGANIZE's page moves aim at, and changes nothing a query sees.
//!
//! DISABLE (index.rs invariant 7) empties a nonclustered index and keeps its definition
//! (sys.indexes.is_disabled): row operations no longer keep it, no read seeks through it,
//! a unique one enforces nothing, CHECKDB does not compare it and CHECKTABLE of it is Msg
//! 2530, REORGANIZE of it Msg 1973; REBUILD (of it or ALL) fills it again from the table
//! and enables it (Msg 1505 when a unique one meets a repeated key). Disabling an index
//! that enforces a PRIMARY KEY or UNIQUE constraint, or a unique index a FOREIGN KEY
//! references, disables (and no longer trusts) every enabled FOREIGN KEY referencing
//! through it, in the same catalog save (storage's index.rs invariant 8), each told with
//! Msg 1992 as SQL Server does; the caller needs ALTER on each such key's table (Msg
//! 1971). Those keys stay disabled after the index is rebuilt, until ALTER TABLE ...
//! CHECK CONSTRAINT (constraint_state.rs, which refuses it with 1989 while the index is
//! disabled).
//!
//! DISABLE of the clustered index (by its PRIMARY KEY's name, or ALL on a clustered
//! table; storage's index.rs invariant 10) disables each nonclustered index of the table,
//! then marks the table: its rows stay in its tree, and every statement that reads or
//! changes them (SELECT, INSERT, UPDATE, DELETE, MERGE, TRUNCATE TABLE, CREATE INDEX,
//! REBUILD of a nonclustered index) gets Msg 8655, raised by storage when the rows are
//! read, so a statement that found the table before the DISABLE and waited for its Sch-M
//! lock gets it too. REBUILD of the clustered index (or ALL) enables the table again with
//! every row; its nonclustered indexes stay disabled after a REBUILD of the clustered
//! index alone, ALL rebuilds them too. REORGANIZE of the disabled clustered index is Msg
//! 1973. Refused with 40517 until built: DISABLE of the clustered index of a table with an
//! enabled FOREIGN KEY or that an enabled FOREIGN KEY references (SQL Server disables
//! those keys with it).
//!
//! Built options: REBUILD WITH (ONLINE = OFF, FILLFACTOR = 0 | 100 (leaves are filled
//! full), SORT_IN_TEMPDB = OFF | ON (the rebuild reads the old index, or the clustered
//! table, in key order and sorts nothing, so no sort run is placed anywhere), MAXDOP = n
//! (0 to 32,767: the build is serial, within any cap)); REORGANIZE WITH (LOB_COMPACTION =
//! ON). Refused with 40517 until built: every other option and value (ONLINE = ON,
//! DATA_COMPRESSION, FILLFACTOR below 100, PAD_INDEX, ...), inside a transaction (as
//! CREATE INDEX); in the parser: SET, RESUME, PAUSE, ABORT and PARTITION.
//!
//! Invariant: every check runs before the first index is rebuilt, so a refused statement
//! changes nothing; ALL rebuilds its indexes one after another, each whole or not at all.

use extentdb_format::catalog::TableEntry;
use extentdb_storage::{Database, StorageError};

use super::errors;
use super::eval::as_i64;
use super::lower::not_yet;
use super::tables::TableRef;
use super::{Out, Output, Session};
use crate::ast::{AlterIndex, IndexAction, OptionValue, WithOption};
use crate::messages::{msg, SqlError};
use crate::types::Value;

impl Session {
    /// ALTER INDEX (the module's doc).
    pub(super) fn alter_index(
        &mut self,
        a: &AlterIndex,
        out: &mut Out<'_>,
    ) -> Result<(), Vec<SqlError>> {
        let table_missing = || msg(1088, &[&a.table.joined()]);
        let t = self
            .find_table(&a.table)?
            .ok_or_else(|| vec![table_missing()])?;
        self.require_table_alter(&t, table_missing())?;
        for o in &a.options {
            self.check_index_option(a.action, o)?;
        }
        let targets = index_targets(a, &t)?;
        self.refuse_in_transaction("ALTER INDEX")?;
        if a.action == IndexAction::Disable {
            self.check_disable_permissions(&t, &targets)?;
        }
        self.schema_modification(&t)?;
        // Again under Sch-M: a rebuild that ran meanwhile renewed its entry's id.
        let targets = index_targets(a, &t)?;
        if a.action == IndexAction::Disable {
            self.check_disable_permissions(&t, &targets)?;
        }
        let env = self.growth_env();
        let table = t.entry.object_id;
        for target in targets {
            let stats_id = match target {
                Target::Clustered => Some(1),
                Target::Index(id) => (t.db.read().unwrap().table_by_id(id))
                    .and_then(|e| e.index_of.as_ref().map(|i| i.index_id)),
            };
            let cancelled = || self.cancelled();
            let done = match (a.action, target) {
                (IndexAction::Disable, Target::Index(id)) => disable(&t, id, out),
                (IndexAction::Disable, Target::Clustered) => t.db.disable_clustered(table),
                (_, Target::Clustered) => t.db.rebuild_clustered(table, &env, &cancelled),
                (_, Target::Index(id)) => {
                    t.db.rebuild_index((table, id), &env, &cancelled).map(drop)
                }
            };
            done.map_err(|e| match e {
                // An attention or KILL: rolled back, the batch ends without a message.
                StorageError::Cancelled => Vec::new(),
                // A disabled unique index rebuilt over rows that repeat a key.
                StorageError::DuplicateIndexKey { index, key, .. } => vec![
                    msg(
                        1505,
                        &[&t.two_part(), &index, &errors::stored_key_text(&key)],
                    ),
                    msg(3621, &[]),
                ],
                e => errors::map(&e, errors::Context::Other),
            })?;
            // REBUILD builds the index's statistics from every row, as SQL Server's does;
            // REORGANIZE and DISABLE leave them (statistics.rs invariant 3).
            if let (IndexAction::Rebuild, Some(id)) = (a.action, stats_id) {
                self.build_index_statistics(&a.table, id)?;
            }
        }
        Ok(())
    }

    /// DISABLE disables the FOREIGN KEYs that reference through each index it disables
    /// (`keys_through`): the caller needs ALTER on each key's table (Msg 1971), checked
    /// for every target before any changes.
    fn check_disable_permissions(
        &self,
        t: &TableRef,
        targets: &[Target],
    ) -> Result<(), Vec<SqlError>> {
        for target in targets {
            let Target::Index(id) = *target else { continue };
            let d = t.db.read().unwrap();
            let Some(ix) = d.table_by_id(id) else {
                continue;
            };
            for k in keys_through(&d, &t.entry, ix) {
                if !self.has_db_permission(t.db_id, &d, "ALTER", Some(k.child)) {
                    let args: [&dyn std::fmt::Display; 4] =
                        [&ix.name, &t.entry.name, &k.name, &k.child_name];
                    return Err(vec![msg(1971, &args)]);
                }
            }
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
                IndexAction::Disable => "DISABLE",
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

/// What ALTER INDEX rebuilds: a clustered table's own tree, or a nonclustered index's
/// entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Clustered,
    Index(u32),
}

/// The indexes ALTER INDEX `a` changes on table `t` (`named_targets`), once what it
/// does to each is checked: DISABLE's refusals, REORGANIZE of a disabled index (Msg
/// 1973).
fn index_targets(a: &AlterIndex, t: &TableRef) -> Result<Vec<Target>, Vec<SqlError>> {
    let targets = named_targets(a, t)?;
    for target in &targets {
        let ix = match target {
            Target::Clustered => {
                check_clustered(a.action, t)?;
                continue;
            }
            // Cloned, so the checks below read the database on their own.
            Target::Index(id) => match t.db.read().unwrap().table_by_id(*id) {
                Some(ix) => ix.clone(),
                // Dropped meanwhile: checked again under Sch-M, before anything changes.
                None => continue,
            },
        };
        let ix = &ix;
        match a.action {
            IndexAction::Reorganize if extentdb_storage::index::is_disabled(ix) => {
                return Err(vec![msg(1973, &[&ix.name, &"table", &t.entry.name])]);
            }
            _ => {}
        }
    }
    Ok(targets)
}

/// What ALTER INDEX `action` of table `t`'s clustered index meets, read again from the
/// catalog (the table's entry may have changed since it was found): REORGANIZE of a
/// disabled one is Msg 1973; DISABLE of the clustered index of a table with an enabled
/// FOREIGN KEY, or that an enabled one references, is refused with 40517 until the keys are disabled with it
/// as SQL Server does.
fn check_clustered(action: IndexAction, t: &TableRef) -> Result<(), Vec<SqlError>> {
    let d = t.db.read().unwrap();
    let Some(entry) = d.table_by_id(t.entry.object_id) else {
        // Dropped meanwhile: checked again under Sch-M, before anything changes.
        return Ok(());
    };
    let index = entry.primary_key.as_ref().map(|(n, _)| n.as_str());
    match action {
        IndexAction::Reorganize if entry.is_disabled => Err(vec![msg(
            1973,
            &[&index.unwrap_or_default(), &"table", &entry.name],
        )]),
        IndexAction::Disable
            if entry.foreign_keys.iter().any(|k| !k.is_disabled)
                || !super::foreign_keys::referrers(&d, entry.object_id).is_empty() =>
        {
            Err(vec![not_yet(
                "ALTER INDEX ... DISABLE of the clustered index of a table with a FOREIGN KEY \
                 or that a FOREIGN KEY references",
            )])
        }
        _ => Ok(()),
    }
}

/// A FOREIGN KEY an index's DISABLE disables with it (index.rs invariant 8 in storage).
struct KeyThrough {
    /// The referencing table's object id and name.
    child: u32,
    child_name: String,
    /// The key's object id and name.
    key: u32,
    name: String,
}

/// The enabled FOREIGN KEYs that reference table `base` through its index entry `ix`, in
/// catalog order.
fn keys_through(d: &Database, base: &TableEntry, ix: &TableEntry) -> Vec<KeyThrough> {
    let Some(of) = ix.index_of.as_ref() else {
        return Vec::new();
    };
    let referrers = super::foreign_keys::referrers(d, base.object_id);
    let through = referrers
        .into_iter()
        .filter(|(_, k)| k.key_index_id == of.index_id);
    through
        .map(|(child, k)| KeyThrough {
            child: child.object_id,
            child_name: child.name.clone(),
            key: k.object_id,
            name: k.name.clone(),
        })
        .collect()
}

/// DISABLE of index entry `id` of `t` under its Sch-M lock, with the FOREIGN KEYs that
/// reference through it, each told with Msg 1992 once it is done.
fn disable(t: &TableRef, id: u32, out: &mut Out<'_>) -> Result<(), StorageError> {
    let (keys, index) = {
        let d = t.db.read().unwrap();
        let ix = d.table_by_id(id).ok_or(StorageError::TableNotFound(id))?;
        (keys_through(&d, &t.entry, ix), ix.name.clone())
    };
    let pairs: Vec<(u32, u32)> = keys.iter().map(|k| (k.child, k.key)).collect();
    t.db.disable_index((t.entry.object_id, id), &pairs)?;
    for k in keys {
        let args: [&dyn std::fmt::Display; 4] = [&k.name, &k.child_name, &t.entry.name, &index];
        out.push(Output::Info(msg(1992, &args)));
    }
    Ok(())
}

/// The indexes `a` names on `t`: the one named (Msg 7999 when the table has none so
/// named), or ALL: the clustered index first, then each nonclustered one, in catalog
/// order.
fn named_targets(a: &AlterIndex, t: &TableRef) -> Result<Vec<Target>, Vec<SqlError>> {
    let d = t.db.read().unwrap();
    let object_id = t.entry.object_id;
    let nonclustered = d.indexes_of(object_id).map(|e| Target::Index(e.object_id));
    match &a.index {
        Some(name) if super::index_ddl::is_primary_key(&t.entry, name) => {
            Ok(vec![Target::Clustered])
        }
        Some(name) => d
            .index_by_name(object_id, name)
            .map(|e| vec![Target::Index(e.object_id)])
            .ok_or_else(|| vec![msg(7999, &[name, &t.entry.name])]),
        None if t.entry.index_id == 1 => Ok([Target::Clustered]
            .into_iter()
            .chain(nonclustered)
            .collect()),
        None => Ok(nonclustered.collect()),
    }
}
