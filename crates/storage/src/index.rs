//! Nonclustered indexes (sys.indexes rows with index id 2 and up). Each is a B-tree of its
//! own (btree.rs), kept as a catalog entry marked by `index_of` (docs/FORMAT.md, "Catalog"):
//! its columns are its index record's (the declared key, the INCLUDE columns, then the row
//! locator: the base table's clustering key, or a heap row's RID as binary(8)), its
//! primary key is the B-tree's key (the declared key; for an index that is not unique, the
//! locator after it, so every index record's key is unique). Because the entry is a B-tree
//! like a clustered table's, its pages are allocated, logged, recovered, undone by key,
//! shrunk, backed up and checked by the same code.
//!
//! Invariants:
//! 1. Once a row operation is done (access.rs), each index of its table holds exactly one
//!    live record for each live base row: the row's projection (`project`). An operation
//!    changes the base row first, then each index in catalog order; when one needs
//!    something (a split, a growth, access.rs's `Needs`), the operation's progress is kept
//!    in its transaction's state (`RowProgress`) and the same operation run again goes on
//!    from there, changing nothing twice. A rollback step forgets the progress: the
//!    statement it belonged to is being undone.
//! 2. An index is built in a transaction of its own whose CREATE mark (ddl.rs) it carries:
//!    a crash or an error before that transaction commits takes the index back whole, so
//!    no index is ever seen holding only some of its table's rows. CREATE INDEX makes the
//!    entry and ends the transaction holding the database exclusively
//!    (`begin_index_build`, `end_build`) and fills it between, sharing the database with
//!    other sessions (`SharedDatabase::fill_index_sharing`). No other session's row
//!    operation meets the half-filled entry: its table is under the builder's Sch-M lock
//!    (the SQL layer's), and CHECKDB compares no index under a CREATE mark with its table
//!    (`comparable`).
//! 3. An index entry is never a table to the SQL layer: `Database::table` and
//!    `live_tables` skip it; it goes with its table (DROP and TRUNCATE TABLE).
//! 4. A unique index holds at most one live record per declared key (NULL equal to NULL,
//!    as SQL Server's unique indexes treat it): btree.rs invariant 2 on its B-tree key.
//! 5. A rebuild (ALTER INDEX ... REBUILD, `SharedDatabase::rebuild_index`) keeps the
//!    index's definition, name and index id; it makes a new entry marked created and marks
//!    the old one dropped, both in the rebuild's own transaction, so the catalog holds two
//!    entries of one index only while that transaction runs, and a crash leaves exactly one
//!    of them (ddl.rs invariant 3). As a build (invariant 2) it makes the new entry and ends
//!    holding the database exclusively and fills the new entry between, sharing it: no row
//!    operation sees the two entries (the table is under the rebuilder's Sch-M lock), and
//!    CHECKDB compares only the old one. Its source is the old index's leaf level, read in
//!    key order, as SQL Server reads an index that is not disabled (a damaged index is
//!    dropped and created again instead).
//! 6. A clustered index's rebuild (ALTER INDEX ... REBUILD of the PRIMARY KEY,
//!    `SharedDatabase::rebuild_clustered`) keeps the table's entry, its object id and
//!    definition: the new tree is filled, in key order from the table's rows, in an entry
//!    of its own that is no table (`TableEntry::rebuilt_table`: no name lookup, catalog view
//!    or row operation meets it, its table being under the rebuilder's Sch-M lock), made
//!    and ended holding the database and filled sharing it, as invariant 2 builds; the
//!    trees change hands only when the rebuild's transaction settles (ddl.rs invariant 6).
//!    The table's nonclustered indexes stay as they are: their row locator, the clustering
//!    key, does not change.
//! 7. A disabled index (ALTER INDEX ... DISABLE, `disable_index`) keeps its definition
//!    and an empty tree: row operations do not keep it (`enabled_indexes_of`), the SQL
//!    layer reads no row through it, CHECKDB does not compare it (`comparable`); a
//!    rebuild enables it, filled from the table's rows (invariant 5's source is the old
//!    index only when that one is not disabled). A unique index that is disabled enforces
//!    nothing, as SQL Server's.
//! 8. The FOREIGN KEYs that reference a key through an index are disabled (and not
//!    trusted) in the same catalog save that disables the index (`disable_index`'s
//!    `keys`), so no enabled key ever references through a disabled index, even across
//!    a crash; a rebuild enables only the index: its keys stay disabled until ALTER TABLE
//!    ... CHECK CONSTRAINT (the SQL layer, which refuses that while the index is
//!    disabled).
//! 9. An index may hold a computed column its table's records do not store (not
//!    PERSISTED): its index column's value is computed from the base row wherever a record
//!    is projected (`project`, `key_matches`: row operations, builds, lookups, CHECKDB)
//!    by the SQL layer's evaluator (computed_values.rs), so invariant 1 holds for it as for
//!    a stored column: a row operation changing a column the definition reads changes the
//!    projection, and the index with it.
//! 10. A clustered table whose clustered index is disabled (`disable_clustered`,
//!     `TableEntry::is_disabled`) keeps its rows in its tree, unread: every read and row
//!     operation by its object id is `ClusteredIndexDisabled` (`Database::table_for_rows`,
//!     asked at read time, so a statement that resolved the table before the DISABLE and
//!     waited for its lock is refused too), and each of its nonclustered indexes is
//!     disabled, before the mark is set. Only its clustered rebuild (invariant 6) reads the
//!     rows (`origin_of`, `chunk_of`), and the settle that gives the table its new tree
//!     clears the mark (ddl.rs); its nonclustered indexes stay disabled until each is
//!     rebuilt. While the mark is set, building or rebuilding one of them, which reads
//!     the table's rows, is `ClusteredIndexDisabled`.

use std::borrow::Cow;

use extentdb_format::catalog::{ColumnEntry, ForeignKey, IndexOf, TableEntry};
use extentdb_format::log_record::XactId;
use extentdb_format::record;

use crate::access::Step;
use crate::log_growth::GrowthEnv;
use crate::scan::ScanPosition;
use crate::shared::SharedDatabase;
use crate::table::{layouts, Rid};
use crate::{Database, KeyConstraint, StorageError};

/// CREATE INDEX as the SQL layer resolved it.
#[derive(Debug, Clone)]
pub struct IndexDef {
    pub table_object_id: u32,
    pub name: String,
    pub unique: bool,
    pub unique_constraint: bool,
    /// The key's base column ids, in key order.
    pub key: Vec<u16>,
    /// INCLUDE's base column ids.
    pub include: Vec<u16>,
    pub data_space_id: u16,
}

/// How far a row operation got (invariant 1): its base change made (the row's place
/// then), and how many of its table's index changes after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowProgress {
    /// The operation and its records, to tell it is the same operation run again.
    pub op: RowOp,
    pub base: Rid,
    /// Index changes made; an update's index change is two (its delete, its insert).
    pub steps: usize,
}

/// A row operation as its indexes see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RowOp {
    Insert(Vec<u8>),
    Delete(Vec<u8>),
    Update(Vec<u8>, Vec<u8>),
}

/// The base column a source of a heap's index copies: the RID (`IndexOf::sources`).
const RID_SOURCE: u16 = 0;

impl Database {
    /// The indexes of table `object_id`, in catalog order (the order rows change them).
    pub fn indexes_of(&self, object_id: u32) -> impl Iterator<Item = &TableEntry> {
        self.catalog
            .tables
            .iter()
            .filter(move |t| t.index_of.as_ref().map(|i| i.table_object_id) == Some(object_id))
    }

    /// The indexes of table `object_id` that row operations keep and reads may use: all
    /// but the disabled ones (invariant 7), in catalog order.
    pub fn enabled_indexes_of(&self, object_id: u32) -> impl Iterator<Item = &TableEntry> {
        self.indexes_of(object_id).filter(|t| !is_disabled(t))
    }

    /// Table `object_id`'s index named `name` (case-insensitive).
    pub fn index_by_name(&self, object_id: u32, name: &str) -> Option<&TableEntry> {
        self.indexes_of(object_id)
            .find(|t| t.name.eq_ignore_ascii_case(name))
    }

    /// An index build's first step (invariant 2): its entry made, empty, under a CREATE
    /// mark of the build's own transaction; that transaction and the entry's object id.
    /// `IndexExists` when the table has an index so named.
    pub(crate) fn begin_index_build(
        &mut self,
        def: &IndexDef,
    ) -> Result<(XactId, u32), StorageError> {
        self.check_writable()?;
        // Invariant 10: no index is built from a disabled table's rows.
        let base = self.table_for_rows(def.table_object_id)?.clone();
        assert!(base.index_of.is_none(), "an index of an index");
        if crate::statistics::name_taken(self, base.object_id, &def.name) {
            return Err(StorageError::IndexExists(def.name.clone()));
        }
        let entry = index_entry(&base, def, self.next_index_id(base.object_id));
        self.begin_build_entry(entry)
    }

    /// Ends index build `x` (invariant 2): committed (the COMMIT durable before its marks
    /// settle) when `built` succeeded, rolled back otherwise; `built`'s result.
    pub(crate) fn end_build(
        &mut self,
        x: XactId,
        built: Result<u32, StorageError>,
    ) -> Result<u32, StorageError> {
        match built {
            Ok(id) => {
                if let (Some(lsn), Some(wal)) = (self.commit_xact(x)?, self.wal()) {
                    wal.flush(lsn)?;
                }
                self.settle_ddl(x, true)?;
                Ok(id)
            }
            Err(e) => {
                self.rollback_xact(x)?;
                self.settle_ddl(x, false)?;
                Err(e)
            }
        }
    }

    /// ALTER INDEX ... REBUILD's first step (invariant 5): a new entry of index `id`'s
    /// definition made, empty, under a CREATE mark of the rebuild's own transaction; that
    /// transaction and the new entry's object id.
    pub(crate) fn begin_index_rebuild(&mut self, id: u32) -> Result<(XactId, u32), StorageError> {
        self.check_writable()?;
        let old = self.table_or_err(id)?.clone();
        let Some(of) = old.index_of.as_ref() else {
            return Err(StorageError::TableNotFound(id));
        };
        // Invariant 10: no index is rebuilt from a disabled table's rows.
        self.table_for_rows(of.table_object_id)?;
        let mut entry = TableEntry {
            object_id: 0,
            allocation_unit_id: 0,
            root_page: extentdb_format::PageId::NULL,
            pending_ddl: None,
            ..old
        };
        // A rebuild enables a disabled index (invariant 7).
        entry.index_of.as_mut().expect("an index entry").is_disabled = false;
        self.begin_build_entry(entry)
    }

    /// A clustered index rebuild's first step (invariant 6): a new tree of table `id`'s
    /// definition made, empty, in an entry marked created by the rebuild's own transaction
    /// and naming the table; that transaction and the entry's object id.
    pub(crate) fn begin_clustered_rebuild(
        &mut self,
        id: u32,
    ) -> Result<(XactId, u32), StorageError> {
        self.check_writable()?;
        let t = self.table_or_err(id)?.clone();
        if t.index_id != 1 || t.index_of.is_some() || t.pending_ddl.is_some() {
            return Err(StorageError::TableNotFound(id));
        }
        let columns = t
            .columns
            .iter()
            .map(|c| ColumnEntry {
                identity: None,
                ..c.clone()
            })
            .collect();
        let entry = TableEntry {
            object_id: 0,
            allocation_unit_id: 0,
            root_page: extentdb_format::PageId::NULL,
            columns,
            identity_last: Default::default(),
            checks: Vec::new(),
            foreign_keys: Vec::new(),
            is_disabled: false,
            ..t
        };
        let x = self.begin_xact();
        let made = self
            .ensure_begun(x)
            .and_then(|()| self.create_rebuild_entry(entry, x, id));
        match made {
            Ok(new) => Ok((x, new)),
            Err(e) => self.end_build(x, Err(e)).map(|new| (x, new)),
        }
    }

    /// A build's index entry `entry` made, empty, under a CREATE mark of a transaction of
    /// the build's own (invariants 2 and 5); that transaction and the entry's object id.
    fn begin_build_entry(&mut self, entry: TableEntry) -> Result<(XactId, u32), StorageError> {
        let x = self.begin_xact();
        match self.create_table_in(entry, Some(x)) {
            Ok(id) => Ok((x, id)),
            // Rolled back, the error given back: `end_build` of a failure is never Ok.
            Err(e) => self.end_build(x, Err(e)).map(|id| (x, id)),
        }
    }

    /// The lowest index id table `object_id`'s indexes and statistics leave free (2 and
    /// up; statistics.rs invariant 2).
    fn next_index_id(&self, object_id: u32) -> u16 {
        let mut used: Vec<u16> = self
            .indexes_of(object_id)
            .filter_map(|t| Some(t.index_of.as_ref()?.index_id))
            .collect();
        used.extend(crate::statistics::stats_ids(&self.catalog, object_id));
        (2..).find(|i| !used.contains(i)).expect("an index id")
    }

    /// DROP INDEX `name` of table `object_id`; `IndexNotFound` when it has none so named.
    pub(crate) fn drop_index(&mut self, object_id: u32, name: &str) -> Result<(), StorageError> {
        let id = self
            .index_by_name(object_id, name)
            .map(|t| t.object_id)
            .ok_or_else(|| StorageError::IndexNotFound(name.to_string()))?;
        self.drop_table(id)
    }

    /// The changes of `op` (whose base change moved the row from `old_rid` to `base_rid`)
    /// to table `t`'s indexes, from step `steps` on (invariant 1: what an earlier run of the
    /// same operation made).
    pub(crate) fn maintain_indexes(
        &self,
        xact: XactId,
        t: &TableEntry,
        (op, mut steps): (RowOp, usize),
        (old_rid, base_rid): (Rid, Rid),
    ) -> Result<Step<()>, StorageError> {
        let plan = self.index_steps(t, &op, (old_rid, base_rid))?;
        while steps < plan.len() {
            let (ix, step) = &plan[steps];
            let done = match step {
                IndexStep::Insert(irec) => self.index_insert(xact, t, ix, irec)?,
                IndexStep::Delete(irec) => self.btree_delete(xact, ix, irec, 0)?,
                IndexStep::Nothing => Step::Done(()),
            };
            if let Step::Needs(n) = done {
                self.keep_progress(xact, op, base_rid, steps);
                return Ok(Step::Needs(n));
            }
            steps += 1;
        }
        Ok(Step::Done(()))
    }

    /// The index changes `op` makes, two per index (an update's delete and insert; one of
    /// them `Nothing` for an insert or a delete, both when the projection stays).
    fn index_steps(
        &self,
        t: &TableEntry,
        op: &RowOp,
        (old_rid, new_rid): (Rid, Rid),
    ) -> Result<Vec<(&TableEntry, IndexStep)>, StorageError> {
        let mut plan = Vec::new();
        for ix in self.enabled_indexes_of(t.object_id) {
            let old = match op {
                RowOp::Delete(old) | RowOp::Update(old, _) => Some(project(ix, t, old, old_rid)?),
                RowOp::Insert(_) => None,
            };
            let new = match op {
                RowOp::Insert(new) | RowOp::Update(_, new) => Some(project(ix, t, new, new_rid)?),
                RowOp::Delete(_) => None,
            };
            let (del, ins) = match (old, new) {
                (Some(o), Some(n)) if o == n => (IndexStep::Nothing, IndexStep::Nothing),
                (o, n) => (
                    o.map_or(IndexStep::Nothing, IndexStep::Delete),
                    n.map_or(IndexStep::Nothing, IndexStep::Insert),
                ),
            };
            plan.push((ix, del));
            plan.push((ix, ins));
        }
        Ok(plan)
    }

    /// One index record in: a duplicate in a unique index is `DuplicateIndexKey`.
    fn index_insert(
        &self,
        xact: XactId,
        base: &TableEntry,
        ix: &TableEntry,
        irec: &[u8],
    ) -> Result<Step<()>, StorageError> {
        match self.btree_insert(xact, ix, (irec, 0), None) {
            Ok(Step::Done(_)) => Ok(Step::Done(())),
            Ok(Step::Needs(n)) => Ok(Step::Needs(n)),
            // A clustered rebuild's new tree (invariant 6) meets a duplicate only when its
            // table's own key order is damaged: the storage error, as the table's read.
            Err(StorageError::DuplicateKey { .. }) if ix.index_of.is_some() => {
                Err(duplicate(base, ix, irec))
            }
            Err(e) => Err(e),
        }
    }

    /// The progress `xact` kept for `op` (invariant 1), taken out of its state; a kept
    /// progress for another operation is a caller's error: a row operation that needed
    /// something is run again before any other.
    pub(crate) fn take_progress(&self, xact: XactId, op: &RowOp) -> Option<RowProgress> {
        let mut t = self.data.xacts.lock();
        let p = t.active.get_mut(&xact)?.row_progress.take()?;
        assert_eq!(
            &p.op, op,
            "index.rs invariant 1: another operation ran first"
        );
        Some(p)
    }

    fn keep_progress(&self, xact: XactId, op: RowOp, base: Rid, steps: usize) {
        let mut t = self.data.xacts.lock();
        if let Some(x) = t.active.get_mut(&xact) {
            x.row_progress = Some(RowProgress { op, base, steps });
        }
    }

    /// Whether table `object_id` has indexes to keep (the row operations' fast path).
    pub(crate) fn has_indexes(&self, object_id: u32) -> bool {
        self.enabled_indexes_of(object_id).next().is_some()
    }

    /// ALTER INDEX ... DISABLE of index entry `id` (invariant 7): an empty tree in a new
    /// allocation unit and the disabled mark, with the FOREIGN KEYs `keys` ((child table,
    /// constraint) object ids) marked disabled and not trusted (invariant 8), in one
    /// catalog save, then the old unit's extents given back (`empty_tree`, as TRUNCATE
    /// TABLE empties a table). Disabling a disabled index changes nothing but `keys`.
    pub(crate) fn disable_index(
        &mut self,
        id: u32,
        keys: &[(u32, u32)],
    ) -> Result<(), StorageError> {
        let ix = self.table_or_err(id)?;
        let Some(of) = ix.index_of.clone() else {
            return Err(StorageError::TableNotFound(id));
        };
        for &(child, key) in keys {
            let k = self
                .table_or_err(child)?
                .foreign_keys
                .iter()
                .find(|k| k.object_id == key);
            let k = k.ok_or(StorageError::TableNotFound(key))?;
            assert!(
                k.referenced_object_id == of.table_object_id && k.key_index_id == of.index_id,
                "index.rs invariant 8: a key disabled with an index references through it"
            );
        }
        let left = self.catalog.tables.iter().flat_map(|t| {
            let through = move |k: &&ForeignKey| {
                !k.is_disabled
                    && k.referenced_object_id == of.table_object_id
                    && k.key_index_id == of.index_id
            };
            t.foreign_keys
                .iter()
                .filter(through)
                .map(|k| (t.object_id, k.object_id))
        });
        assert!(
            left.clone().all(|k| keys.contains(&k)),
            "index.rs invariant 8: every enabled key through the index is disabled with it"
        );
        let disable_keys = |c: &mut extentdb_format::catalog::Catalog| {
            for t in c.tables.iter_mut() {
                let ours = |k: &&mut ForeignKey| keys.contains(&(t.object_id, k.object_id));
                for k in t.foreign_keys.iter_mut().filter(|k| ours(k)) {
                    k.is_disabled = true;
                    k.is_not_trusted = true;
                }
            }
        };
        if is_disabled(ix) {
            return self.change_catalog(|c| {
                disable_keys(c);
                Ok(())
            });
        }
        self.empty_tree_with(
            id,
            |e| e.index_of.as_mut().expect("an index entry").is_disabled = true,
            disable_keys,
        )
    }

    /// ALTER INDEX ... DISABLE of clustered table `object_id`'s clustered index (invariant
    /// 9): each of its nonclustered indexes disabled first (invariant 7, a catalog save
    /// each), then the table marked, so a crash between leaves only indexes disabled, and
    /// a marked table never has an enabled index. A table that any FOREIGN KEY references
    /// or that has one is the SQL layer's to refuse (its keys are not disabled here).
    pub(crate) fn disable_clustered(&mut self, object_id: u32) -> Result<(), StorageError> {
        let t = self.table_or_err(object_id)?;
        if t.index_id != 1 || t.index_of.is_some() || t.rebuilt_table().is_some() {
            return Err(StorageError::TableNotFound(object_id));
        }
        let enabled: Vec<u32> = self
            .enabled_indexes_of(object_id)
            .map(|ix| ix.object_id)
            .collect();
        for ix in enabled {
            self.disable_index(ix, &[])?;
        }
        assert!(
            !self.has_indexes(object_id),
            "index.rs invariant 10: a disabled table has no enabled index"
        );
        self.change_catalog(|c| {
            let t = c.tables.iter_mut().find(|t| t.object_id == object_id);
            t.ok_or(StorageError::TableNotFound(object_id))?.is_disabled = true;
            Ok(())
        })
    }

    /// The ids of table `object_id`'s indexes, for DROP and TRUNCATE TABLE (invariant 3).
    pub(crate) fn index_ids(&self, object_id: u32) -> Vec<u32> {
        self.indexes_of(object_id).map(|t| t.object_id).collect()
    }
}

/// Whether index entry `ix` may be compared with its table (CHECKDB): not while it is
/// under a CREATE mark (invariant 2), when its build or its transaction is still going,
/// and not while it is disabled (invariant 7: it holds no rows).
pub(crate) fn comparable(ix: &TableEntry) -> bool {
    !ix.pending_ddl.is_some_and(|p| p.created) && !is_disabled(ix)
}

/// Whether index entry `ix` is disabled (ALTER INDEX ... DISABLE, invariant 7), or, for a
/// table's own entry, its clustered index (invariant 10).
pub fn is_disabled(ix: &TableEntry) -> bool {
    ix.is_disabled || ix.index_of.as_ref().is_some_and(|i| i.is_disabled)
}

/// Where an index build takes its records (`SharedDatabase::fill_index_sharing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BuildSource {
    /// The base table's rows, each projected (CREATE INDEX).
    Table,
    /// This entry's live records, in key order, as they are: an index of the same
    /// definition (ALTER INDEX ... REBUILD), or the clustered table whose new tree is
    /// built (invariant 6).
    Index(u32),
}

impl SharedDatabase {
    /// Index `id` of table `base_id` filled from `source`, sharing the database with other
    /// sessions (invariants 2 and 5): a scan chunk at a time, each chunk's records inserted
    /// as row operations are (`SharedDatabase::run`: what an insert needs is provided
    /// holding the database, the insert run again). `cancelled` is asked between chunks,
    /// holding nothing: true ends the fill with `Cancelled`.
    pub(crate) fn fill_index_sharing(
        &self,
        (env, x): (&GrowthEnv, XactId),
        (base_id, source, id): (u32, BuildSource, u32),
        cancelled: &dyn Fn() -> bool,
    ) -> Result<(), StorageError> {
        let from = match source {
            BuildSource::Table => base_id,
            BuildSource::Index(old) => old,
        };
        // A table's rows are read only while its clustered index is enabled (invariant 10);
        // an index's records (a rebuild's source) whatever the table's state.
        let (origin, base) = {
            let d = self.read().unwrap();
            let origin = match source {
                BuildSource::Table => d.scan_origin(from)?,
                BuildSource::Index(_) => {
                    d.count_full_scan();
                    d.origin_of(from)?
                }
            };
            (origin, d.table_or_err(base_id)?.clone())
        };
        let mut at = ScanPosition::Start;
        while !matches!(at, ScanPosition::End) {
            if cancelled() {
                return Err(StorageError::Cancelled);
            }
            let chunk = self
                .read()
                .unwrap()
                .chunk_of(from, origin, &at, 1 << 20, None)?;
            let mut done = 0;
            self.run(
                env,
                |e| e,
                |db| {
                    let ix = db.table_or_err(id)?.clone();
                    let mut made = 0;
                    while let Some((rid, rec)) = chunk.rows.get(done) {
                        if let Some(share) = db.share_again(made) {
                            return Ok(share);
                        }
                        let irec = match source {
                            BuildSource::Table => Cow::Owned(project(&ix, &base, rec, *rid)?),
                            BuildSource::Index(_) => Cow::Borrowed(rec.as_slice()),
                        };
                        if let Step::Needs(n) = db.index_insert(x, &base, &ix, &irec)? {
                            return Ok(Step::Needs(n));
                        }
                        (done, made) = (done + 1, made + 1);
                    }
                    Ok(Step::Done(()))
                },
            )?;
            at = chunk.next;
        }
        Ok(())
    }
}

/// One index change of a row operation.
enum IndexStep {
    Insert(Vec<u8>),
    Delete(Vec<u8>),
    Nothing,
}

/// The error for a duplicate key in unique index `ix` of `base`: its key's stored values.
fn duplicate(base: &TableEntry, ix: &TableEntry, irec: &[u8]) -> StorageError {
    let info = ix.index_of.as_ref().expect("an index entry");
    let n = info.key_columns as usize;
    let key = record::decode(&layouts(ix), irec)
        .map(|cols| {
            ix.columns[..n]
                .iter()
                .zip(&cols[..n])
                .map(|(c, v)| (c.clone(), v.map(<[u8]>::to_vec)))
                .collect()
        })
        .unwrap_or_default();
    let constraint = match (ix.enforces_primary_key_of(base), info.unique_constraint) {
        (true, _) => Some(KeyConstraint::PrimaryKey),
        (false, true) => Some(KeyConstraint::Unique),
        (false, false) => None,
    };
    StorageError::DuplicateIndexKey {
        table: format!("{}.{}", base.schema_name, base.name),
        index: ix.name.clone(),
        constraint,
        key,
    }
}

/// The index record of base row `rec` (at `rid`) in index `ix` of `base`.
pub(crate) fn project(
    ix: &TableEntry,
    base: &TableEntry,
    rec: &[u8],
    rid: Rid,
) -> Result<Vec<u8>, StorageError> {
    let info = ix.index_of.as_ref().expect("an index entry");
    let cols = record::decode(&layouts(base), rec)?;
    let rid_bytes = rid_bytes(rid);
    let values = info
        .sources
        .iter()
        .map(|&s| source_bytes(base, (rec, &cols), &rid_bytes, s))
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<Option<&[u8]>> = values.iter().map(|v| v.as_deref()).collect();
    Ok(record::encode(&layouts(ix), &refs)?)
}

/// The bytes an index column whose source is `s` copies from base row `rec` (decoded as
/// `cols`; its RID as `rid` stores it): a stored column's bytes, the RID, or the value of
/// a computed column no record stores (invariant 9), computed from the row.
fn source_bytes<'a>(
    base: &TableEntry,
    (rec, cols): (&[u8], &[Option<&'a [u8]>]),
    rid: &'a [u8; 8],
    s: u16,
) -> Result<Option<Cow<'a, [u8]>>, StorageError> {
    if s == RID_SOURCE {
        return Ok(Some(Cow::Borrowed(&rid[..])));
    }
    match crate::table::stored_position(base, s) {
        Some(at) => Ok(cols[at].map(Cow::Borrowed)),
        None => Ok(crate::computed_values::value_of(base, rec, s)?.map(Cow::Owned)),
    }
}

/// Whether base row `rec` (at `rid`) projects to index record `irec`'s B-tree key: each key
/// column's stored bytes as `project` would copy them, compared with `irec`'s.
pub(crate) fn key_matches(
    ix: &TableEntry,
    base: &TableEntry,
    (rid, rec): (Rid, &[u8]),
    irec: &[u8],
) -> Result<bool, StorageError> {
    let info = ix.index_of.as_ref().expect("an index entry");
    let (cols, icols) = (
        record::decode(&layouts(base), rec)?,
        record::decode(&layouts(ix), irec)?,
    );
    let rid_bytes = rid_bytes(rid);
    let key = &ix.primary_key.as_ref().expect("an index's B-tree key").1;
    for id in key {
        let at = ix.columns.iter().position(|c| c.column_id == *id);
        let at = at.expect("index.rs: a key column the catalog checked");
        let now = source_bytes(base, (rec, &cols), &rid_bytes, info.sources[at])?;
        if now.as_deref() != icols[at] {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A heap row's RID as an index stores it: page u32, file u16, slot u16 (little-endian).
pub fn rid_bytes((page, slot): Rid) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&page.page.0.to_le_bytes());
    b[4..6].copy_from_slice(&page.file.0.to_le_bytes());
    b[6..].copy_from_slice(&slot.to_le_bytes());
    b
}

/// The RID an index record's locator names (`rid_bytes` read back).
pub fn rid_of_bytes(b: &[u8]) -> Option<Rid> {
    let b: &[u8; 8] = b.try_into().ok()?;
    let page = extentdb_format::PageId::new(
        u16::from_le_bytes([b[4], b[5]]),
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
    );
    Some((page, u16::from_le_bytes([b[6], b[7]])))
}

/// Index `def`'s catalog entry over `base`, as index id `index_id`: its columns, sources
/// and B-tree key (the module's doc).
fn index_entry(base: &TableEntry, def: &IndexDef, index_id: u16) -> TableEntry {
    let mut sources: Vec<u16> = def.key.clone();
    sources.extend(def.include.iter().filter(|c| !def.key.contains(c)));
    let locator: Vec<u16> = match &base.primary_key {
        Some((_, cols)) if base.index_id == 1 => cols.clone(),
        _ => vec![RID_SOURCE],
    };
    for c in &locator {
        if !sources.contains(c) {
            sources.push(*c);
        }
    }
    let columns: Vec<ColumnEntry> = sources
        .iter()
        .enumerate()
        .map(|(i, &s)| index_column(base, s, i as u16 + 1))
        .collect();
    let position = |s: &u16| sources.iter().position(|x| x == s).expect("placed") as u16 + 1;
    let mut key: Vec<u16> = def.key.iter().map(position).collect();
    if !def.unique {
        for c in locator.iter().map(position) {
            if !key.contains(&c) {
                key.push(c);
            }
        }
    }
    TableEntry {
        object_id: 0,
        schema_name: base.schema_name.clone(),
        name: def.name.clone(),
        created_us: crate::now_us(),
        data_space_id: def.data_space_id,
        allocation_unit_id: 0,
        index_id: 1,
        root_page: extentdb_format::PageId::NULL,
        primary_key: Some((def.name.clone(), key)),
        columns,
        identity_last: Default::default(),
        lock_escalation: base.lock_escalation,
        pending_ddl: None,
        index_of: Some(IndexOf {
            table_object_id: base.object_id,
            index_id,
            unique: def.unique,
            unique_constraint: def.unique_constraint,
            is_disabled: false,
            key_columns: def.key.len() as u16,
            included: def.include.iter().filter(|c| !def.key.contains(c)).count() as u16,
            sources,
        }),
        checks: Vec::new(),
        foreign_keys: Vec::new(),
        is_disabled: false,
    }
}

/// The index entry's column `column_id` copying base column `source` (or the RID).
fn index_column(base: &TableEntry, source: u16, column_id: u16) -> ColumnEntry {
    match base.columns.iter().find(|c| c.column_id == source) {
        Some(c) => ColumnEntry {
            column_id,
            identity: None,
            default_sql: String::new(),
            computed: None,
            ..c.clone()
        },
        None => ColumnEntry {
            column_id,
            name: "RID".into(),
            system_type_id: 173,
            max_length: 8,
            precision: 0,
            scale: 0,
            is_nullable: false,
            identity: None,
            default_sql: String::new(),
            computed: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A base table (a INT NOT NULL, b INT NULL, c INT NOT NULL), clustered on c or a heap.
    fn base(clustered: bool) -> TableEntry {
        let col = |id: u16, name: &str| ColumnEntry {
            column_id: id,
            name: name.into(),
            system_type_id: 56,
            max_length: 4,
            precision: 0,
            scale: 0,
            is_nullable: id == 2,
            identity: None,
            default_sql: String::new(),
            computed: None,
        };
        TableEntry {
            object_id: 7,
            schema_name: "dbo".into(),
            name: "T".into(),
            created_us: 0,
            data_space_id: 1,
            allocation_unit_id: 0,
            index_id: clustered as u8,
            root_page: extentdb_format::PageId::NULL,
            primary_key: clustered.then(|| ("PK".to_string(), vec![3])),
            columns: vec![col(1, "a"), col(2, "b"), col(3, "c")],
            identity_last: Default::default(),
            lock_escalation: Default::default(),
            pending_ddl: None,
            index_of: None,
            checks: Vec::new(),
            foreign_keys: Vec::new(),
            is_disabled: false,
        }
    }

    fn row(a: i32, b: Option<i32>, c: i32) -> Vec<u8> {
        let b = b.map(i32::to_le_bytes);
        let (a, c) = (a.to_le_bytes(), c.to_le_bytes());
        let values = [Some(&a[..]), b.as_ref().map(|b| &b[..]), Some(&c[..])];
        record::encode(&layouts(&base(false)), &values).unwrap()
    }

    /// `key_matches` agrees with comparing `project`'s keys: for unique and non-unique
    /// indexes over a heap and a clustered table, a row matches the record it projects to,
    /// and not one of a changed key column, a NULL, or (for a heap's non-unique index)
    /// another RID; an INCLUDE column does not enter the key.
    #[test]
    fn key_matches_is_the_projection_s_key() {
        let rid = (extentdb_format::PageId::new(1, 90), 4);
        let other = (extentdb_format::PageId::new(1, 91), 4);
        for clustered in [false, true] {
            for unique in [false, true] {
                let t = base(clustered);
                let def = IndexDef {
                    table_object_id: 7,
                    name: "ix".into(),
                    unique,
                    unique_constraint: false,
                    key: vec![1, 2],
                    include: vec![3],
                    data_space_id: 1,
                };
                let ix = index_entry(&t, &def, 2);
                let rec = row(5, Some(6), 7);
                let irec = project(&ix, &t, &rec, rid).unwrap();
                let case = format!("clustered {clustered}, unique {unique}");
                assert!(key_matches(&ix, &t, (rid, &rec), &irec).unwrap(), "{case}");
                for changed in [row(4, Some(6), 7), row(5, None, 7), row(5, Some(5), 7)] {
                    assert!(
                        !key_matches(&ix, &t, (rid, &changed), &irec).unwrap(),
                        "{case}"
                    );
                }
                // c is the clustered key's locator (in the B-tree key when not unique), or
                // an INCLUDE column of a heap's index.
                let moved = row(5, Some(6), 8);
                let keyed = clustered && !unique;
                assert_eq!(
                    key_matches(&ix, &t, (rid, &moved), &irec).unwrap(),
                    !keyed,
                    "{case}"
                );
                let elsewhere = key_matches(&ix, &t, (other, &rec), &irec).unwrap();
                assert_eq!(elsewhere, clustered || unique, "{case}");
            }
        }
    }

    #[test]
    fn a_rid_reads_back() {
        let rid = (extentdb_format::PageId::new(3, 70_000), 513);
        assert_eq!(rid_of_bytes(&rid_bytes(rid)), Some(rid));
        assert_eq!(rid_of_bytes(&[0; 7]), None);
    }
}
