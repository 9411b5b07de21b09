//! Statistics objects in the catalog (format's statistics.rs; FORMAT.md, "Catalog",
//! version 13): one per index, made with it, and one per CREATE STATISTICS; their data as
//! the SQL layer last built it.
//!
//! Invariants:
//! 1. Every catalog save leaves exactly one statistics object per index of every table
//!    (the clustered index's stats id 1, a nonclustered index's its index id), named and
//!    keyed as the index, and none of a table or index no longer in the catalog
//!    (`reconcile`, called by `Database::save_catalog`). So statistics go with DROP TABLE,
//!    DROP INDEX and a rolled-back CREATE INDEX by the same catalog save that takes the
//!    entry away, and come with CREATE TABLE and CREATE INDEX in the save that makes it,
//!    unbuilt (no data) until the SQL layer builds them.
//! 2. Stats ids and index ids of one table share one space: a user statistics object takes
//!    one past every index and statistics id (at least 2), and an index build skips the
//!    ids statistics hold (index.rs `next_index_id`). Names are unique per table across
//!    indexes and statistics (`name_taken`), checked holding the database.
//! 3. Each change is one catalog change (`change_catalog`) made holding the database, so
//!    it is whole or absent after a crash; the data of a build is saved only if its object
//!    is still there (a concurrent DROP wins).
//!
//! 4. The modification counter (sys.dm_db_stats_properties.modification_counter) is kept
//!    in memory, not in the catalog: a count per table of the rows its row operations
//!    inserted, updated or deleted (statement rollbacks' compensations not counted), added
//!    with an atomic under a read lock (`ModificationCounters::count`), and for each
//!    statistics object the table's count when its build was saved. It counts from the
//!    build, or from the database's opening for a build made before it; SQL Server keeps
//!    it per leading column and persists it, which a write per row would cost here.
//!
//! What is not here: reading rows or building histograms (the SQL layer's statistics.rs).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use extentdb_format::catalog::{Catalog, TableEntry};
use extentdb_format::statistics::{StatisticsData, StatisticsEntry};

use crate::database::Database;
use crate::StorageError;

/// Rows changed per table and the count each statistics build was saved at (invariant 4).
#[derive(Debug, Default)]
pub struct ModificationCounters {
    tables: RwLock<HashMap<u32, AtomicU64>>,
    built_at: Mutex<HashMap<(u32, u16), u64>>,
}

impl ModificationCounters {
    /// One row of table `object_id` inserted, updated or deleted.
    pub(crate) fn count(&self, object_id: u32) {
        if let Some(n) = self.tables.read().unwrap().get(&object_id) {
            n.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut w = self.tables.write().unwrap();
        w.entry(object_id)
            .or_default()
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Rows of table `object_id` changed since the database opened.
    pub fn of_table(&self, object_id: u32) -> u64 {
        let r = self.tables.read().unwrap();
        r.get(&object_id).map_or(0, |n| n.load(Ordering::Relaxed))
    }

    /// Rows of the table changed since statistics `(object id, stats id)` were saved.
    pub fn since_build(&self, ids: (u32, u16)) -> u64 {
        let at = self
            .built_at
            .lock()
            .unwrap()
            .get(&ids)
            .copied()
            .unwrap_or(0);
        self.of_table(ids.0).saturating_sub(at)
    }

    /// Statistics `ids` saved a build that read the table when its count was `at`.
    fn built(&self, ids: (u32, u16), at: u64) {
        self.built_at.lock().unwrap().insert(ids, at);
    }
}

/// The statistics object each index of `c` has (invariant 1): (object id, stats id, name,
/// key column ids).
fn index_statistics(c: &Catalog) -> Vec<(u32, u16, String, Vec<u16>)> {
    let mut out = Vec::new();
    for t in &c.tables {
        if t.rebuilt_table().is_some() {
            continue;
        }
        match &t.index_of {
            None if t.index_id == 1 => {
                if let Some((name, key)) = &t.primary_key {
                    out.push((t.object_id, 1, name.clone(), key.clone()));
                }
            }
            None => {}
            // A rebuild's old and new entries (one index id) name one object: the second
            // finds it made by the first. An entry a transaction's DROP TABLE marked keeps
            // its statistics until the drop settles, so a ROLLBACK finds them built.
            Some(ix) => {
                let key = ix.sources[..ix.key_columns as usize].to_vec();
                out.push((ix.table_object_id, ix.index_id, t.name.clone(), key));
            }
        }
    }
    out
}

/// Invariant 1: index statistics made for new indexes, removed with gone ones.
pub(crate) fn reconcile(c: &mut Catalog) {
    let indexes = index_statistics(c);
    let is_table = |c: &Catalog, id: u32| {
        c.tables
            .iter()
            .any(|t| t.object_id == id && t.index_of.is_none() && t.rebuilt_table().is_none())
    };
    let keep: Vec<bool> = c
        .statistics
        .iter()
        .map(|s| {
            is_table(c, s.object_id)
                && (s.user_created
                    || indexes
                        .iter()
                        .any(|i| i.0 == s.object_id && i.1 == s.stats_id))
        })
        .collect();
    let mut k = keep.into_iter();
    c.statistics.retain(|_| k.next().expect("one flag each"));
    for (object_id, stats_id, name, columns) in indexes {
        let at = c
            .statistics
            .iter()
            .position(|s| s.object_id == object_id && s.stats_id == stats_id);
        match at {
            Some(i) => {
                let s = &mut c.statistics[i];
                if s.columns != columns {
                    s.data = None;
                }
                s.name = name;
                s.columns = columns;
            }
            None => c.statistics.push(StatisticsEntry {
                object_id,
                stats_id,
                name,
                columns,
                user_created: false,
                no_recompute: false,
                data: None,
            }),
        }
    }
}

/// Invariant 2: whether `name` names an index or statistics of table `object_id`.
pub fn name_taken(db: &Database, object_id: u32, name: &str) -> bool {
    let is = |n: &str| n.eq_ignore_ascii_case(name);
    // A clustered PRIMARY KEY's name is its index's (index id 1, no entry of its own); a
    // heap's is its unique index entry's, which `index_by_name` finds once it is made.
    let primary_key = db
        .table_by_id(object_id)
        .filter(|t| t.index_id == 1)
        .and_then(|t| t.primary_key.as_ref())
        .is_some_and(|(n, _)| is(n));
    primary_key
        || db.index_by_name(object_id, name).is_some()
        || db
            .catalog
            .statistics
            .iter()
            .any(|s| s.object_id == object_id && is(&s.name))
}

/// The stats ids table `object_id`'s statistics hold (invariant 2).
pub(crate) fn stats_ids(c: &Catalog, object_id: u32) -> Vec<u16> {
    c.statistics
        .iter()
        .filter(|s| s.object_id == object_id)
        .map(|s| s.stats_id)
        .collect()
}

/// One past every index and stats id of table `t` (invariant 2), at least 2.
fn next_stats_id(db: &Database, t: &TableEntry) -> u16 {
    let indexes = db
        .indexes_of(t.object_id)
        .filter_map(|e| Some(e.index_of.as_ref()?.index_id));
    let stats = stats_ids(&db.catalog, t.object_id);
    indexes.chain(stats).chain([1]).max().expect("1 at least") + 1
}

impl Database {
    /// The statistics objects of table `object_id`, in stats id order.
    pub fn statistics_of(&self, object_id: u32) -> Vec<&StatisticsEntry> {
        let mut v: Vec<_> = self
            .catalog
            .statistics
            .iter()
            .filter(|s| s.object_id == object_id)
            .collect();
        v.sort_by_key(|s| s.stats_id);
        v
    }

    /// CREATE STATISTICS `name` on `columns` of table `object_id` with its first build's
    /// `data` (None: unbuilt), in one catalog change: its stats id.
    /// `IndexExists` when an index or statistics of the table has the name (Msg 1927).
    pub fn create_statistics(
        &mut self,
        object_id: u32,
        name: &str,
        columns: Vec<u16>,
        no_recompute: bool,
        (data, counted_at): (Option<StatisticsData>, u64),
    ) -> Result<u16, StorageError> {
        let t = self.table_or_err(object_id)?.clone();
        if name_taken(self, object_id, name) {
            return Err(StorageError::IndexExists(name.to_string()));
        }
        let stats_id = next_stats_id(self, &t);
        let entry = StatisticsEntry {
            object_id,
            stats_id,
            name: name.to_string(),
            columns,
            user_created: true,
            no_recompute,
            data,
        };
        self.change_catalog(|c| {
            c.statistics.push(entry);
            Ok(())
        })?;
        self.modifications.built((object_id, stats_id), counted_at);
        Ok(stats_id)
    }

    /// DROP STATISTICS of user statistics `stats_id` of table `object_id`; false when
    /// there is none (nothing changes then).
    pub fn drop_statistics(&mut self, object_id: u32, stats_id: u16) -> Result<bool, StorageError> {
        let is = |s: &StatisticsEntry| {
            s.object_id == object_id && s.stats_id == stats_id && s.user_created
        };
        if !self.catalog.statistics.iter().any(is) {
            return Ok(false);
        }
        self.change_catalog(|c| {
            c.statistics.retain(|s| !is(s));
            Ok(())
        })?;
        Ok(true)
    }

    /// Saves a build of statistics `stats_id` of table `object_id` over `columns` (the
    /// ones it was built on) and its NORECOMPUTE; false when the object is gone or now
    /// covers other columns (invariant 3: nothing changes then).
    pub fn save_statistics(
        &mut self,
        (object_id, stats_id): (u32, u16),
        (columns, counted_at): (&[u16], u64),
        data: StatisticsData,
        no_recompute: bool,
    ) -> Result<bool, StorageError> {
        let at = self.catalog.statistics.iter().position(|s| {
            s.object_id == object_id && s.stats_id == stats_id && s.columns == columns
        });
        let Some(i) = at else {
            return Ok(false);
        };
        self.change_catalog(|c| {
            c.statistics[i].data = Some(data);
            c.statistics[i].no_recompute = no_recompute;
            Ok(())
        })?;
        self.modifications.built((object_id, stats_id), counted_at);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use extentdb_format::catalog::{IndexOf, RecoveryModel};

    fn table(object_id: u32, index_id: u8) -> TableEntry {
        TableEntry {
            object_id,
            schema_name: "dbo".into(),
            name: format!("t{object_id}"),
            created_us: 0,
            data_space_id: 1,
            allocation_unit_id: object_id as u64,
            index_id,
            root_page: extentdb_format::PageId::NULL,
            primary_key: (index_id == 1).then(|| ("pk".to_string(), vec![1])),
            columns: Vec::new(),
            identity_last: Default::default(),
            lock_escalation: Default::default(),
            pending_ddl: None,
            index_of: None,
            checks: Vec::new(),
            foreign_keys: Vec::new(),
            is_disabled: false,
        }
    }

    fn catalog(tables: Vec<TableEntry>) -> Catalog {
        Catalog {
            database_id: 5,
            recovery_model: RecoveryModel::Simple,
            filegroups: Vec::new(),
            files: Vec::new(),
            allocation_units: Vec::new(),
            next_allocation_unit_id: 0,
            databases: Vec::new(),
            next_object_id: 0,
            tables,
            security: Default::default(),
            statistics: Vec::new(),
            modules: Vec::new(),
        }
    }

    /// Invariant 1: reconcile gives each index one statistics object named as it, keeps
    /// user statistics, and drops those of an index or table that went.
    #[test]
    fn reconcile_follows_the_indexes() {
        let mut ix = table(20, 1);
        ix.name = "ix".into();
        ix.index_of = Some(IndexOf {
            table_object_id: 10,
            index_id: 2,
            unique: false,
            unique_constraint: false,
            key_columns: 1,
            included: 0,
            sources: vec![2, 1],
            is_disabled: false,
        });
        let mut c = catalog(vec![table(10, 1), ix, table(30, 0)]);
        c.statistics.push(StatisticsEntry {
            object_id: 10,
            stats_id: 3,
            name: "st".into(),
            columns: vec![2],
            user_created: true,
            no_recompute: false,
            data: None,
        });
        reconcile(&mut c);
        let ids: Vec<(u32, u16, &str)> = c
            .statistics
            .iter()
            .map(|s| (s.object_id, s.stats_id, s.name.as_str()))
            .collect();
        assert_eq!(ids, vec![(10, 3, "st"), (10, 1, "pk"), (10, 2, "ix")]);
        assert_eq!(c.statistics[2].columns, vec![2], "the key, not the locator");
        c.tables.retain(|t| t.object_id != 20);
        reconcile(&mut c);
        assert_eq!(c.statistics.len(), 2, "the index's went with it");
        c.tables.retain(|t| t.object_id != 10);
        reconcile(&mut c);
        assert!(c.statistics.is_empty(), "the table's went with it");
    }
}
