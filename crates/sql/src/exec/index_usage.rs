//! sys.dm_db_index_usage_stats: how often each index (the heap, index 0; the clustered
//! index, 1; a nonclustered index, 2 and up) was sought, scanned, looked up into and
//! updated by statements since the instance started, and when last.
//!
//! What counts, by SQL Server's meaning (once per statement per index and kind, never per
//! row):
//! - a seek: a clustered-key seek (`Access::Seek`) of the table's index 1, or a seek of a
//!   nonclustered index (`Access::IndexSeek`) of that index, point or range alike (SQL
//!   Server's Index Seek operator);
//! - a scan: a read of the whole heap or clustered index (`Access::Scan`);
//! - a lookup: the base table's index (0 or 1) when a nonclustered index seek looks its
//!   rows up (Key Lookup / RID Lookup);
//! - an update: INSERT, DELETE, MERGE and OUTPUT ... INTO count the table's base index and
//!   every nonclustered index; UPDATE counts the base index and the nonclustered indexes
//!   holding a column it sets (a clustered key column is in all of them), as SQL Server's
//!   update plan maintains only those. Cascading actions count on the child as its writes.
//!
//! Work the engine does on its own counts nowhere (the system_* columns stay 0, their
//! last_system_* NULL): FOREIGN KEY lookups, CHECK / FOREIGN KEY validation WITH CHECK,
//! primary-key checks, CREATE INDEX and ALTER INDEX REBUILD builds, DBCC. Reading the view
//! itself uses no index.
//!
//! Invariants:
//! 1. A statement's uses gather in its session's `StatementUses`, a set, and reach the
//!    instance's counters once, when the statement ends (`Session::flush_index_usage`,
//!    before its locks go): an index nested loop join seeking per outer row is one seek.
//! 2. Reads are noted where their access is final (`tables::Chunks::locked`, after
//!    key-range locking turned an index seek into a scan); only a statement's own reads
//!    lock rows through it, and tables resolved while the engine reads for itself
//!    (`Session::engine_reads`) carry no `StatementUses`.
//! 3. Memory is bounded by the indexes used: one entry per (database, object, index),
//!    removed by DROP INDEX, DROP TABLE (temporary tables and table variables too), DROP
//!    DATABASE, SET OFFLINE and RESTORE over a database. The view shows only entries whose
//!    index still exists (a drop that rolled back loses its counters, never shows stale
//!    ones).
//! 4. The statement path takes the map's read lock and adds to atomics; the write lock is
//!    taken only to add an index's first entry or to remove entries.
//!
//! Not kept: anything across a restart (SQL Server's counters are in memory too).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::tables::TableRef;
use super::views::{cols, ticks_from_unix_us, Rowset};
use super::Session;
use crate::convert::round_datetime;
use crate::types::{SqlType, Value};

/// The kinds of use, in the view's column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Use {
    Seek = 0,
    Scan = 1,
    Lookup = 2,
    Update = 3,
}

/// One index of one table of one database (the view's first three columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct IndexKey {
    pub db_id: u16,
    pub object_id: u32,
    pub index_id: u16,
}

/// An index's counters and the time (Unix microseconds, 0: never) of each kind's last use.
#[derive(Default)]
struct Counters {
    count: [AtomicU64; 4],
    last_us: [AtomicI64; 4],
}

impl Counters {
    fn add(&self, u: Use, now_us: i64) {
        self.count[u as usize].fetch_add(1, Ordering::Relaxed);
        self.last_us[u as usize].fetch_max(now_us, Ordering::Relaxed);
    }
}

/// The instance's counters (in `Engine`), shared by every session (invariant 4).
#[derive(Default)]
pub(super) struct IndexUsage {
    entries: RwLock<HashMap<IndexKey, Counters>>,
}

impl IndexUsage {
    /// Adds one use of each of `uses` at `now_us`.
    fn add(&self, uses: &HashSet<(IndexKey, Use)>, now_us: i64) {
        let mut missing = Vec::new();
        {
            let map = self.entries.read().unwrap();
            for &(k, u) in uses {
                match map.get(&k) {
                    Some(c) => c.add(u, now_us),
                    None => missing.push((k, u)),
                }
            }
        }
        if missing.is_empty() {
            return;
        }
        let mut map = self.entries.write().unwrap();
        for (k, u) in missing {
            map.entry(k).or_default().add(u, now_us);
        }
    }

    /// Removes the entries `gone` says are gone (invariant 3).
    pub(super) fn remove(&self, gone: impl Fn(&IndexKey) -> bool) {
        self.entries.write().unwrap().retain(|k, _| !gone(k));
    }

    /// Every entry's key and values, in key order.
    fn snapshot(&self) -> Vec<(IndexKey, [u64; 4], [i64; 4])> {
        let map = self.entries.read().unwrap();
        let mut out: Vec<_> = map
            .iter()
            .map(|(k, c)| {
                let n = std::array::from_fn(|i| c.count[i].load(Ordering::Relaxed));
                let t = std::array::from_fn(|i| c.last_us[i].load(Ordering::Relaxed));
                (*k, n, t)
            })
            .collect();
        out.sort_by_key(|e| e.0);
        out
    }
}

/// A statement's uses so far (invariant 1); a session's one set, shared with the tables it
/// resolves.
#[derive(Default, Clone)]
pub(super) struct StatementUses(Arc<Mutex<HashSet<(IndexKey, Use)>>>);

impl StatementUses {
    pub(super) fn note(&self, key: IndexKey, u: Use) {
        self.0.lock().unwrap().insert((key, u));
    }
}

impl TableRef {
    /// The key of this table's index `index_id`.
    pub(super) fn index_key(&self, index_id: u16) -> IndexKey {
        IndexKey {
            db_id: self.db_id,
            object_id: self.entry.object_id,
            index_id,
        }
    }

    /// Notes a read's uses: `(index_id, kind)` pairs (nothing for an engine read).
    pub(super) fn note_uses(&self, uses: &[(u16, Use)]) {
        if let Some(s) = &self.usage {
            for &(i, u) in uses {
                s.note(self.index_key(i), u);
            }
        }
    }
}

/// The nonclustered indexes (index_id, name) a write of `t` changes: every one, or with
/// `set` (an UPDATE's column positions) those holding one of those columns. SHOWPLAN_TEXT
/// lists them on the write's operator (showplan.rs).
pub(super) fn written_indexes(t: &TableRef, set: Option<&[usize]>) -> Vec<(u16, String)> {
    let set_ids: Option<Vec<u16>> =
        set.map(|p| p.iter().map(|&i| t.entry.columns[i].column_id).collect());
    let db = t.db.read().unwrap();
    db.indexes_of(t.entry.object_id)
        .filter_map(|ix| {
            let of = ix.index_of.as_ref()?;
            let touched = set_ids
                .as_ref()
                .is_none_or(|ids| of.sources.iter().any(|c| ids.contains(c)));
            touched.then(|| (of.index_id, ix.name.clone()))
        })
        .collect()
}

impl Session {
    /// The statement's uses added to the instance's counters (invariant 1).
    pub(super) fn flush_index_usage(&mut self) {
        let uses = std::mem::take(&mut *self.index_uses.0.lock().unwrap());
        if !uses.is_empty() {
            let now = super::unix_us();
            self.engine.index_usage.add(&uses, now);
        }
    }

    /// A write's uses of `t`: its base index and every nonclustered index, or with `set`
    /// (an UPDATE's column positions) the nonclustered indexes holding one of them.
    pub(super) fn note_update(&self, t: &TableRef, set: Option<&[usize]>) {
        let Some(s) = &t.usage else { return };
        s.note(t.index_key(u16::from(t.entry.index_id)), Use::Update);
        for (index_id, _) in written_indexes(t, set) {
            s.note(t.index_key(index_id), Use::Update);
        }
    }

    /// Removes the counters of database `db_id`, of its object `object_id` or of that
    /// object's index `index_id`, which are gone (invariant 3).
    pub(super) fn forget_index_usage(
        &self,
        db_id: u16,
        object_id: Option<u32>,
        index_id: Option<u16>,
    ) {
        self.engine.index_usage.remove(|k| {
            k.db_id == db_id
                && object_id.is_none_or(|o| o == k.object_id)
                && index_id.is_none_or(|i| i == k.index_id)
        });
    }

    /// Runs `read` as the engine's own read (invariant 2): the tables it resolves note no use.
    pub(super) fn as_engine_read<T>(&mut self, read: impl FnOnce(&mut Session) -> T) -> T {
        self.engine_reads += 1;
        let r = read(self);
        self.engine_reads -= 1;
        r
    }

    /// The use set a table resolved now carries (invariant 2).
    pub(super) fn uses_for_resolved(&self) -> Option<StatementUses> {
        (self.engine_reads == 0).then(|| self.index_uses.clone())
    }

    /// sys.dm_db_index_usage_stats: one row per index used since the instance started that
    /// still exists (invariant 3).
    pub(super) fn index_usage_rowset(&self) -> Rowset {
        const B: SqlType = SqlType::BigInt;
        const D: SqlType = SqlType::DateTime;
        let columns = cols(&[
            ("database_id", SqlType::SmallInt),
            ("object_id", SqlType::Int),
            ("index_id", SqlType::Int),
            ("user_seeks", B),
            ("user_scans", B),
            ("user_lookups", B),
            ("user_updates", B),
            ("last_user_seek", D),
            ("last_user_scan", D),
            ("last_user_lookup", D),
            ("last_user_update", D),
            ("system_seeks", B),
            ("system_scans", B),
            ("system_lookups", B),
            ("system_updates", B),
            ("last_system_seek", D),
            ("last_system_scan", D),
            ("last_system_lookup", D),
            ("last_system_update", D),
        ]);
        let mut rows = Vec::new();
        for (k, n, t) in self.engine.index_usage.snapshot() {
            if !self.index_exists(&k) {
                continue;
            }
            let mut row = vec![
                Value::SmallInt(k.db_id as i16),
                Value::Int(k.object_id as i32),
                Value::Int(i32::from(k.index_id)),
            ];
            row.extend(n.iter().map(|&c| Value::BigInt(c as i64)));
            row.extend(t.iter().map(|&us| match us {
                0 => Value::Null,
                // A datetime's 1/300-second steps, as GETDATE() gives them.
                us => Value::DateTime(round_datetime(ticks_from_unix_us(us))),
            }));
            row.extend((0..4).map(|_| Value::BigInt(0)));
            row.extend((0..4).map(|_| Value::Null));
            rows.push(row);
        }
        Rowset { columns, rows }
    }

    /// Whether index `k` is still in its database's catalog.
    fn index_exists(&self, k: &IndexKey) -> bool {
        let Some(db) = self.engine.instance.database(k.db_id) else {
            return false;
        };
        let db = db.read().unwrap();
        match db.table_by_id(k.object_id) {
            Some(t) if u16::from(t.index_id) == k.index_id => t.index_of.is_none(),
            Some(_) => db.indexes_of(k.object_id).any(|ix| {
                ix.index_of
                    .as_ref()
                    .is_some_and(|o| o.index_id == k.index_id)
            }),
            None => false,
        }
    }
}
