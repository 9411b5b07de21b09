//! User tables stored as heaps: creating and dropping them, and inserting, scanning,
//! deleting and updating their rows inside transactions.
//!
//! A table's rows live in data pages of its own allocation unit. Extents come from the
//! files of the table's filegroup through the allocation maps (GAM, IAM); within an extent
//! pages are used in order, each formatted through a logged `FormatPage` record. A page
//! belongs to the heap when it is a formatted data page naming the unit's id: allocation
//! unit ids are never reused (TRUNCATE TABLE gives the table a new unit), so pages a former
//! owner left in a reused extent never count.
//!
//! Rows are identified by RID (page, slot). Inserts always go to the heap's current page
//! (the last one it formatted) and take a new slot, so a slot is never reused while a
//! transaction may still need it for undo. DELETE turns the row into a ghost (its space
//! stays reserved, so undo always fits); an UPDATE that keeps the length replaces the row
//! in place, otherwise it is a delete plus an insert (the RID changes: a heap has no
//! forwarding records in extentdb yet).
//!
//! A record holds a table's stored columns in column order (`layouts`, `stored_columns`):
//! every column but a computed one that is not PERSISTED, whose value the SQL layer
//! computes on each read. Every mapping from a column id to a place in a record goes
//! through `stored_position` (the clustered key, index sources, the IDENTITY column).
//!
//! Deliberately not here yet: PFS fullness bits of data pages (not maintained, so space
//! freed by deletes is not reused by later inserts), heap ghost cleanup, forwarding
//! records. (Clustered tables are btree.rs's; row locks are the SQL layer's.)
//!
//! Sessions sharing the database change heap rows at once (`heap_insert`, `heap_update`,
//! `heap_delete`, reached through access.rs): inserts one at a time into one heap (its
//! insert lock) and at once into different heaps, each page changed under its latch; the
//! buffer pool, heap cursors and identity values are latched (docs/ARCHITECTURE.md, "Locks
//! inside a database").
//!
//! Invariants:
//! 1. Every page of a table's extents is unformatted, another unit's, or a data page of the
//!    table's unit whose records are valid (`data_page::check_invariants`).
//! 2. `HeapCursor.next_index` pages of the cursor's extent are taken (in use by the heap,
//!    or left unformatted when their format failed); the rest of that extent is free.
//! 3. A heap's cursor changes only under its insert lock or with the database held
//!    exclusively, and a page's rows only under the page's latch (access.rs invariant 2),
//!    so a change's page is changed by no one between its logging and its application
//!    (xact.rs `try_log_change`).
//! 4. A heap page is marked allocated in the PFS only after its format is logged
//!    (allocation.rs invariant 5): a page taken whose format failed is zero and free, a
//!    zero page the PFS calls allocated is damage, and a scan reaching one fails (Msg 824)
//!    rather than return fewer rows; it reads the page again after the PFS first, as a
//!    session's insert may have formatted it meanwhile (scan.rs invariant 6).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use extentdb_format::catalog::{ColumnEntry, TableEntry};
use extentdb_format::log_record::{LogRecordBody, SlotAction, XactId};
use extentdb_format::record::{self, ColumnLayout};
use extentdb_format::{data_page, ExtentNo, Page, PageId, PageType, PAGES_PER_EXTENT};

use crate::access::{Needs, RowGate, Step};
use crate::buffer_pool::{BufferPool, DEFAULT_CAPACITY_PAGES};
use crate::latch::Latch;
use crate::proportional_fill::Allocation;
use crate::xact::set_lsn;
use crate::{Database, StorageError};

/// A row's address: page and slot.
pub type Rid = (PageId, u16);

/// Where a heap inserts next.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HeapCursor {
    /// The page inserts go to, if any.
    pub current: Option<PageId>,
    /// The extent pages are taken from, and how many of its pages are in use.
    pub extent: Option<(u16, ExtentNo)>,
    pub next_index: u32,
}

impl HeapCursor {
    /// The next free page of the cursor's extent, as (file, extent, index), if any.
    fn next_in_extent(&self) -> Option<(u16, ExtentNo, u32)> {
        match self.extent {
            Some((f, e)) if self.next_index < PAGES_PER_EXTENT => Some((f, e, self.next_index)),
            _ => None,
        }
    }

    /// Free pages left in the cursor's extent.
    fn free_in_extent(&self) -> u32 {
        match self.extent {
            Some(_) => PAGES_PER_EXTENT.saturating_sub(self.next_index),
            None => 0,
        }
    }

    /// The cursor once page `index` of `extent` in `file` is taken.
    fn taking(self, file: u16, extent: ExtentNo, index: u32) -> HeapCursor {
        HeapCursor {
            current: self.current,
            extent: Some((file, extent)),
            next_index: index + 1,
        }
    }
}

/// What `Database::take_unit_page` gave.
pub(crate) enum PageTake {
    /// A page, taken: the cursor moved past it.
    Taken(PageId),
    /// No page without the database held exclusively (a new IAM page, a growth, an
    /// unknown cursor).
    Exclusive,
    /// No page before a filegroup's growth, prepared holding no lock (`Needs::Growth`).
    Growth(crate::proportional_fill::GrowthPreparation),
}

/// The data path's state inside a database: buffer pool, transactions, heap cursors and
/// identity values handed out. The pool latches its frames itself (buffer_pool.rs), the
/// next three are latched (`Latch`): sessions sharing the database change rows at once
/// (access.rs).
pub struct DataPath {
    pub(crate) pool: BufferPool,
    pub(crate) xacts: Latch<crate::xact::XactTable>,
    pub(crate) cursors: Latch<HashMap<u64, HeapCursor>>,
    /// The last identity value handed out per table (None: none since the seed);
    /// identity.rs invariant 2.
    pub(crate) identity: Latch<HashMap<u32, Option<i64>>>,
    /// Full scans of tables begun (`scan_origin`, `scan_rows`): SQL Server's
    /// "Access Methods: Full Scans/sec" (sys.dm_os_performance_counters).
    pub(crate) full_scans: std::sync::atomic::AtomicU64,
    /// Page splits made (`btree.rs` `split`, a root's included): SQL Server's "Access
    /// Methods: Page Splits/sec".
    pub(crate) page_splits: std::sync::atomic::AtomicU64,
    /// Each heap's insert lock (by allocation unit): sessions sharing the database insert
    /// into one heap one at a time, into different heaps at once.
    pub(crate) insert_locks: Latch<HashMap<u64, Arc<Mutex<()>>>>,
    /// Page latches: a shared change holds its page's (access.rs invariant 2).
    pub(crate) page_latches: crate::access::PageLatches,
    /// Clustered indexes' structure changes beside row operations (tree_change.rs).
    pub(crate) trees: crate::tree_change::TreeChanges,
    pub(crate) recovery: Option<crate::recovery::RecoveryStats>,
    pub(crate) growth: crate::log_growth::LogGrowth,
    pub(crate) checkpoint: crate::checkpoint::CheckpointState,
    /// Proportional fill's round robin per filegroup (data space id).
    pub(crate) fill: std::collections::BTreeMap<u16, crate::proportional_fill::SharedFill>,
    /// Files being emptied (DBCC SHRINKFILE EMPTYFILE): they take no new extent.
    pub(crate) emptying: std::collections::BTreeSet<u16>,
    /// Data-file growths being initialized in the background (IFI off).
    pub(crate) data_growth: crate::proportional_fill::DataGrowthPrep,
    /// tempdb: each extent claimed or given back is charged to the thread's task
    /// (task_space.rs).
    pub(crate) counts_task_space: bool,
}

impl Default for DataPath {
    fn default() -> Self {
        DataPath::with_capacity(DEFAULT_CAPACITY_PAGES)
    }
}

impl DataPath {
    pub fn with_capacity(pages: usize) -> DataPath {
        DataPath {
            pool: BufferPool::new(pages),
            xacts: Default::default(),
            cursors: Default::default(),
            identity: Default::default(),
            full_scans: Default::default(),
            page_splits: Default::default(),
            insert_locks: Default::default(),
            page_latches: Default::default(),
            trees: Default::default(),
            recovery: None,
            growth: Default::default(),
            checkpoint: Default::default(),
            fill: Default::default(),
            emptying: Default::default(),
            data_growth: Default::default(),
            counts_task_space: false,
        }
    }
}

/// System type ids of the variable-length types (varchar, nvarchar, varbinary).
pub const VARIABLE_TYPES: [u8; 3] = [
    extentdb_format::key::type_id::VARCHAR,
    extentdb_format::key::type_id::NVARCHAR,
    extentdb_format::key::type_id::VARBINARY,
];

/// How each stored column is stored in a record, in record order.
pub fn layouts(t: &TableEntry) -> Vec<ColumnLayout> {
    stored_columns(t).map(column_layout).collect()
}

/// Whether a column's value is in the record: every column but a computed one that is not
/// PERSISTED, whose value the SQL layer computes on each read (FORMAT.md "Catalog",
/// version 12).
pub fn is_stored(c: &ColumnEntry) -> bool {
    c.computed.as_ref().is_none_or(|k| k.is_persisted)
}

/// The columns a record of `t` holds, in record order (`layouts`' order).
pub fn stored_columns(t: &TableEntry) -> impl Iterator<Item = &ColumnEntry> {
    t.columns.iter().filter(|c| is_stored(c))
}

/// `t` as its records are: its columns the stored ones only (DBCC PAGE's view of a page).
pub fn stored_entry(t: &TableEntry) -> TableEntry {
    TableEntry {
        columns: stored_columns(t).cloned().collect(),
        ..t.clone()
    }
}

/// Where stored column `column_id` of `t` is in its records.
pub fn stored_position(t: &TableEntry, column_id: u16) -> Option<usize> {
    stored_columns(t).position(|c| c.column_id == column_id)
}

pub fn column_layout(c: &ColumnEntry) -> ColumnLayout {
    if VARIABLE_TYPES.contains(&c.system_type_id) {
        ColumnLayout::Variable
    } else {
        ColumnLayout::Fixed(c.max_length.max(0) as u16)
    }
}

impl Database {
    /// The table `schema.name` (case-insensitive), a pending DROP's too: only the dropping
    /// transaction's session no longer finds it (ddl.rs), others wait for its Sch-M lock.
    pub fn table(&self, schema: &str, name: &str) -> Option<&TableEntry> {
        self.catalog.tables.iter().find(|t| {
            t.index_of.is_none()
                && t.rebuilt_table().is_none()
                && t.name.eq_ignore_ascii_case(name)
                && t.schema_name.eq_ignore_ascii_case(schema)
        })
    }

    pub fn table_by_id(&self, object_id: u32) -> Option<&TableEntry> {
        self.catalog
            .tables
            .iter()
            .find(|t| t.object_id == object_id)
    }

    pub(crate) fn table_or_err(&self, object_id: u32) -> Result<&TableEntry, StorageError> {
        self.table_by_id(object_id)
            .ok_or(StorageError::TableNotFound(object_id))
    }

    /// Table `object_id` for a read or a row operation: `ClusteredIndexDisabled` while its
    /// clustered index is disabled (index.rs invariant 10), checked whenever a statement
    /// reads or changes its rows, so one that found the table before the DISABLE and
    /// waited for its lock meets the mark too.
    pub(crate) fn table_for_rows(&self, object_id: u32) -> Result<&TableEntry, StorageError> {
        let t = self.table_or_err(object_id)?;
        match t.is_disabled {
            true => Err(StorageError::ClusteredIndexDisabled {
                index: t
                    .primary_key
                    .as_ref()
                    .map(|(n, _)| n.clone())
                    .unwrap_or_default(),
                table: t.name.clone(),
            }),
            false => Ok(t),
        }
    }

    /// Creates a table; `object_id` and `allocation_unit_id` of `entry` are assigned here.
    pub fn create_table(&mut self, mut entry: TableEntry) -> Result<u32, StorageError> {
        self.check_writable()?;
        let a_table = entry.index_of.is_none() && entry.rebuilt_table().is_none();
        // module.rs invariant 1: a procedure's name is no table's.
        let module_named = entry.schema_name.eq_ignore_ascii_case("dbo")
            && crate::module::by_name(&self.catalog, &entry.name).is_some();
        if a_table && (module_named || self.table(&entry.schema_name, &entry.name).is_some()) {
            return Err(StorageError::TableExists(entry.name));
        }
        // constraint.rs invariant 4: each table referenced is there (0: the table itself).
        for k in entry
            .foreign_keys
            .iter()
            .filter(|k| k.referenced_object_id != 0)
        {
            self.table_or_err(k.referenced_object_id)?;
        }
        let au = self.create_allocation_unit(entry.data_space_id)?;
        entry.allocation_unit_id = au;
        if entry.index_id == 1 {
            entry.root_page = self.btree_create(&entry)?;
        }
        // The first block of identity values is reserved with the table (identity.rs).
        entry.identity_last = crate::identity::fresh_bound(&entry);
        let has_identity = entry.columns.iter().any(|c| c.identity.is_some());
        let mut id = 0;
        self.change_catalog(|c| {
            id = c.next_object_id;
            c.next_object_id += 1;
            entry.object_id = id;
            crate::constraint::number_checks(c, &mut entry.checks);
            crate::constraint::number_foreign_keys(c, &mut entry.foreign_keys, id);
            entry.allocation_unit_id = au;
            c.tables.push(entry);
            Ok(())
        })?;
        if has_identity {
            self.data.identity.get_mut().insert(id, None);
        }
        Ok(id)
    }

    /// Drops a table and gives its extents back. No open transaction may have changed it
    /// (xact.rs invariant 5).
    pub fn drop_table(&mut self, object_id: u32) -> Result<(), StorageError> {
        let t = self.table_or_err(object_id)?.clone();
        // constraint.rs invariant 4: no FOREIGN KEY of another table is left dangling.
        if crate::constraint::referenced_by_other(&self.catalog, object_id) {
            return Err(StorageError::ReferencedByForeignKey(object_id));
        }
        // index.rs invariant 3: its indexes go first, so none outlives it.
        for ix in self.index_ids(object_id) {
            self.drop_table(ix)?;
        }
        // A failed rollback poisons the database and may leave its transaction open.
        self.check_writable()?;
        self.assert_no_open_changes(object_id);
        // A damaged chain fails here, before the catalog changes (allocation.rs invariant 8).
        self.iam_chain(t.allocation_unit_id)?;
        self.change_catalog(|c| {
            c.tables.retain(|x| x.object_id != object_id);
            Ok(())
        })?;
        self.data.identity.get_mut().remove(&object_id);
        self.free_allocation_unit(t.allocation_unit_id)
    }

    /// Empties a table: a new allocation unit takes its place, the old one's extents go
    /// back to the files. The identity value restarts from the seed. No open transaction
    /// may have changed it (xact.rs invariant 5).
    pub fn truncate_table(&mut self, object_id: u32) -> Result<(), StorageError> {
        // index.rs invariant 3: its indexes are emptied with it.
        for ix in self.index_ids(object_id) {
            self.truncate_table(ix)?;
        }
        self.empty_tree(object_id, |e| {
            // As SQL Server's TRUNCATE TABLE: the next identity value is the seed.
            e.identity_last = crate::identity::fresh_bound(e);
        })?;
        let t = self.table_or_err(object_id)?;
        if t.columns.iter().any(|c| c.identity.is_some()) {
            self.data.identity.get_mut().insert(object_id, None);
        }
        Ok(())
    }

    /// Entry `object_id` given an empty tree in a new allocation unit, `change` made to it
    /// in the same catalog save, then the old unit's extents given back (TRUNCATE TABLE;
    /// index.rs's DISABLE). No open transaction may have changed it (xact.rs invariant 5).
    pub(crate) fn empty_tree(
        &mut self,
        object_id: u32,
        change: impl FnOnce(&mut TableEntry),
    ) -> Result<(), StorageError> {
        self.empty_tree_with(object_id, change, |_| {})
    }

    /// `empty_tree`, with `others` made to the rest of the catalog in the same save (the
    /// FOREIGN KEYs a DISABLE disables with its index, index.rs invariant 8).
    pub(crate) fn empty_tree_with(
        &mut self,
        object_id: u32,
        change: impl FnOnce(&mut TableEntry),
        others: impl FnOnce(&mut extentdb_format::catalog::Catalog),
    ) -> Result<(), StorageError> {
        let t = self.table_or_err(object_id)?.clone();
        // A failed rollback poisons the database and may leave its transaction open.
        self.check_writable()?;
        self.assert_no_open_changes(object_id);
        self.iam_chain(t.allocation_unit_id)?;
        let mut fresh = t.clone();
        fresh.allocation_unit_id = self.create_allocation_unit(t.data_space_id)?;
        if t.index_id == 1 {
            fresh.root_page = self.btree_create(&fresh)?;
        }
        change(&mut fresh);
        self.change_catalog(|c| {
            let e = c
                .tables
                .iter_mut()
                .find(|x| x.object_id == object_id)
                .expect("checked");
            *e = fresh;
            others(c);
            Ok(())
        })?;
        self.free_allocation_unit(t.allocation_unit_id)
    }

    /// Gives a dropped or truncated unit's extents back, then the unit itself: its
    /// sys.allocation_units row goes (the catalog save is the commit point) and its IAM
    /// pages are free for the next system page. A crash between the save and the PFS
    /// changes leaves those IAM pages to the sweep at open (`sweep_catalog_pages`); one
    /// before the save leaves a unit no table names, which `free_orphan_units` frees at
    /// the next open.
    fn free_allocation_unit(&mut self, au: u64) -> Result<(), StorageError> {
        assert!(
            !self
                .damaged_chains
                .iter()
                .any(|d| d.allocation_unit_id == au),
            "allocation unit {au} freed with a damaged IAM chain (allocation.rs invariant 8)"
        );
        self.data.cursors.get_mut().remove(&au);
        // Held by no one: the database is held exclusively.
        self.data.insert_locks.get_mut().remove(&au);
        for (file, extent) in self.extents_of(au)? {
            self.deallocate_extent_lazy(au, file, extent)?;
        }
        self.flush_log()?;
        let iam_pages = self.iam_chain(au)?;
        self.change_catalog(|c| {
            c.allocation_units.retain(|a| a.allocation_unit_id != au);
            Ok(())
        })?;
        for at in iam_pages {
            self.mark_page_free(at)?;
        }
        Ok(())
    }

    /// Frees the allocation units no table names (a DROP or TRUNCATE cut short by a crash,
    /// or a TRUNCATE's new unit that the crash kept from taking the table's place); the
    /// catalog's own unit stays, and so does one whose IAM chain is damaged (allocation.rs
    /// invariant 8: its extents cannot be told). Returns how many. Run at open, after
    /// recovery.
    pub(crate) fn free_orphan_units(&mut self) -> Result<usize, StorageError> {
        let named: std::collections::HashSet<u64> = self
            .catalog
            .tables
            .iter()
            .map(|t| t.allocation_unit_id)
            .collect();
        let orphans: Vec<u64> = self
            .catalog
            .allocation_units
            .iter()
            .map(|a| a.allocation_unit_id)
            .filter(|au| {
                *au != extentdb_format::catalog::CATALOG_ALLOCATION_UNIT
                    && !named.contains(au)
                    && !self
                        .damaged_chains
                        .iter()
                        .any(|d| d.allocation_unit_id == *au)
            })
            .collect();
        for &au in &orphans {
            self.free_allocation_unit(au)?;
        }
        Ok(orphans.len())
    }

    /// Inserts `rec` into heap `t` within `xact` (access.rs), beside other sessions:
    /// sessions insert into different heaps at once and into one heap one at a time (its
    /// insert lock), allocating extents without the database's lock (`allocate_by_fill`).
    /// A heap whose cursor is not known yet (after open) has it rebuilt under its insert
    /// lock. Needs the database held first for a new page when that takes a new IAM page
    /// or a filegroup's growth, or the log grown; with IFI
    /// off, a filegroup's growth is prepared first holding no lock (`Needs::Growth`).
    /// `also` more log bytes must fit after the row's record (a move's second change,
    /// access.rs invariant 3). The new row goes through `gate` before its page's latch is
    /// let go (access.rs invariant 5).
    pub(crate) fn heap_insert(
        &self,
        xact: XactId,
        t: &TableEntry,
        rec: &[u8],
        (env, also): (&crate::log_growth::GrowthEnv, u64),
        gate: RowGate<'_, '_>,
    ) -> Result<Step<Rid>, StorageError> {
        let au = t.allocation_unit_id;
        let room = Needs::HeapRoom {
            object_id: t.object_id,
            len: rec.len(),
        };
        let lock = self.data.insert_locks.lock().entry(au).or_default().clone();
        let _inserting = lock.lock().unwrap_or_else(|e| e.into_inner());
        let c = self.unit_cursor(au)?;
        let fits = |pid: PageId| -> Result<bool, StorageError> {
            self.data
                .pool
                .with_page(&self.data_files, self.wal.as_deref(), pid, |p| {
                    data_page::can_insert(p, rec.len(), true)
                })
        };
        let page = match c.current {
            Some(cur) if fits(cur)? => cur,
            _ => {
                let pid = match self.take_unit_page(t, c, env)? {
                    PageTake::Taken(pid) => pid,
                    PageTake::Growth(p) => return Ok(Step::Needs(Needs::Growth(p))),
                    PageTake::Exclusive => return Ok(Step::Needs(room)),
                };
                self.format_unit_page(pid, au, PageType::Data, 0, 0)?;
                if let Some(c) = self.data.cursors.lock().get_mut(&au) {
                    c.current = Some(pid);
                }
                pid
            }
        };
        let _latch = self.data.page_latches.hold(page);
        let slot = self.data.pool.with_page(
            &self.data_files,
            self.wal.as_deref(),
            page,
            data_page::slot_count,
        )?;
        let (redo, undo) = insert_actions(slot, rec);
        if !self.change_page(xact, au, page, redo, undo, also)? {
            return Ok(Step::Needs(Needs::LogGrowth));
        }
        // Still under the page's latch: no gated reader sees the row before the gate.
        match gate.is_none_or(|g| g.row((page, slot), rec)) {
            true => Ok(Step::Done((page, slot))),
            false => Err(StorageError::RowRefused),
        }
    }

    /// The next page of `t`'s allocation unit for a session sharing the database, from
    /// cursor `c` (its current state; the caller holds the unit's insert lock): the next
    /// free page of its extent, or the first of an extent allocated without the database's
    /// lock (`allocate_by_fill`). A new IAM page or a filegroup's growth needs the database
    /// held exclusively, unless the growth can be prepared first holding no lock (IFI
    /// off); held exclusively, only the current extent's pages are taken here.
    pub(crate) fn take_unit_page(
        &self,
        t: &TableEntry,
        c: HeapCursor,
        env: &crate::log_growth::GrowthEnv,
    ) -> Result<PageTake, StorageError> {
        let au = t.allocation_unit_id;
        let (file, extent, index) = match c.next_in_extent() {
            Some(next) => next,
            // Held exclusively, the allocator that also prepares growths ahead.
            None if self.held_exclusively => return Ok(PageTake::Exclusive),
            None => match self.allocate_by_fill(au, t.data_space_id, env)? {
                Allocation::Extent(f, e) => (f, e, 0),
                Allocation::NeedsGrowth if !env.policy.instant => {
                    return Ok(match self.growth_preparation(t.data_space_id, env) {
                        Some(p) => PageTake::Growth(p),
                        None => PageTake::Exclusive,
                    })
                }
                _ => return Ok(PageTake::Exclusive),
            },
        };
        self.data
            .cursors
            .lock()
            .insert(au, c.taking(file, extent, index));
        Ok(PageTake::Taken(PageId::new(
            file,
            extent.first_page().0 + index,
        )))
    }

    /// A unit's page for a B-tree's split, sharing the database (`take_unit_page` under
    /// the unit's insert lock, its cursor rebuilt first after open).
    pub(crate) fn take_tree_page(&self, t: &TableEntry) -> Result<PageTake, StorageError> {
        let au = t.allocation_unit_id;
        let lock = self.data.insert_locks.lock().entry(au).or_default().clone();
        let _taking = lock.lock().unwrap_or_else(|e| e.into_inner());
        let c = self.unit_cursor(au)?;
        self.take_unit_page(t, c, self.growth_env())
    }

    /// Makes this database charge each extent its allocation units claim or give back to
    /// the task that does it (tempdb: task_space.rs).
    pub fn set_counts_task_space(&mut self, on: bool) {
        self.data.counts_task_space = on;
    }

    /// Held exclusively: `t`'s cursor known, and at least `pages` free pages left in its
    /// current extent (a new extent taken when fewer are), so that a split run next takes
    /// its pages from the extent (`take_tree_page`).
    pub(crate) fn reserve_tree_pages(
        &mut self,
        t: &TableEntry,
        pages: u32,
    ) -> Result<(), StorageError> {
        let au = t.allocation_unit_id;
        let c = self.unit_cursor(au)?;
        if c.free_in_extent() >= pages {
            return Ok(());
        }
        let (f, e) = self.allocate_heap_extent(t)?;
        let fresh = HeapCursor {
            current: c.current,
            extent: Some((f, e)),
            next_index: 0,
        };
        self.data.cursors.get_mut().insert(au, fresh);
        Ok(())
    }

    /// Every live (non-ghost) record of the table with its RID, in allocation order.
    pub fn scan_rows(&self, object_id: u32) -> Result<Vec<(Rid, Vec<u8>)>, StorageError> {
        let t = self.table_for_rows(object_id)?;
        self.count_full_scan();
        if t.index_id == 1 {
            return self.btree_scan(t);
        }
        Ok(self
            .heap_scan_chunk(t.allocation_unit_id, None, usize::MAX, None)?
            .rows)
    }

    /// Deletes heap `t`'s row at `rid` (it becomes a ghost until the transaction ends),
    /// under its page's latch.
    pub(crate) fn heap_delete(
        &self,
        xact: XactId,
        t: &TableEntry,
        rid: Rid,
    ) -> Result<Step<()>, StorageError> {
        let _latch = self.data.page_latches.hold(rid.0);
        self.live_record(t, rid)?;
        let ghost = SlotAction::Ghost { slot: rid.1 };
        let unghost = SlotAction::Unghost { slot: rid.1 };
        Ok(
            match self.change_page(xact, t.allocation_unit_id, rid.0, ghost, unghost, 0)? {
                true => Step::Done(()),
                false => Step::Needs(Needs::LogGrowth),
            },
        )
    }

    /// Replaces heap `t`'s row at `rid` by `rec`; returns its RID afterwards. In place,
    /// under its page's latch, when the length stays; else the row moves (access.rs
    /// invariant 3), beside other sessions: the new copy goes in first, with room in the
    /// log kept for the old one's delete, then the old one is deleted.
    pub(crate) fn heap_update(
        &self,
        xact: XactId,
        t: &TableEntry,
        rid: Rid,
        rec: &[u8],
        env: &crate::log_growth::GrowthEnv,
        gate: RowGate<'_, '_>,
    ) -> Result<Step<Rid>, StorageError> {
        {
            let _latch = self.data.page_latches.hold(rid.0);
            let old = self.live_record(t, rid)?;
            if old.len() == rec.len() {
                let slot = rid.1;
                let redo = SlotAction::Replace {
                    slot,
                    record: rec.to_vec(),
                };
                let undo = SlotAction::Replace { slot, record: old };
                return Ok(
                    match self.change_page(xact, t.allocation_unit_id, rid.0, redo, undo, 0)? {
                        true => Step::Done(rid),
                        false => Step::Needs(Needs::LogGrowth),
                    },
                );
            }
        }
        // The log room the delete needs stays reserved meanwhile (xact.rs invariant 8).
        let delete_bytes = crate::xact::change_bytes_bound(0);
        let at = match self.heap_insert(xact, t, rec, (env, delete_bytes), gate)? {
            Step::Done(at) => at,
            Step::Needs(n) => return Ok(Step::Needs(n)),
        };
        match self.heap_delete(xact, t, rid)? {
            Step::Done(()) => Ok(Step::Done(at)),
            Step::Needs(n) => Err(self.second_change_failed(n)),
        }
    }

    /// The record at `rid`, which must be a live row of the table.
    pub(crate) fn live_record(&self, t: &TableEntry, rid: Rid) -> Result<Vec<u8>, StorageError> {
        let stale = || StorageError::RowNotFound {
            page: rid.0,
            slot: rid.1,
        };
        let pool = &self.data.pool;
        pool.with_page(&self.data_files, self.wal.as_deref(), rid.0, |p| {
            if !is_heap_page(p, t.allocation_unit_id) {
                return Err(stale());
            }
            match data_page::record(p, rid.1)? {
                Some(r) if !record::is_ghost(r) => Ok(r.to_vec()),
                _ => Err(stale()),
            }
        })?
    }

    /// A page of the heap with room for a record of `len` bytes, formatting a new page
    /// (and allocating an extent) when the current one is full.
    pub(crate) fn insert_target(
        &mut self,
        t: &TableEntry,
        len: usize,
    ) -> Result<PageId, StorageError> {
        let au = t.allocation_unit_id;
        let c = self.unit_cursor(au)?;
        if let Some(cur) = c.current {
            let p = self
                .data
                .pool
                .page(&self.data_files, self.wal.as_deref(), cur)?;
            if data_page::can_insert(p, len, true) {
                return Ok(cur);
            }
        }
        let pid = self.take_page(t)?;
        self.format_unit_page(pid, au, PageType::Data, 0, 0)?;
        self.data
            .cursors
            .get_mut()
            .get_mut(&au)
            .expect("taken")
            .current = Some(pid);
        Ok(pid)
    }

    /// A page for the table's allocation unit: the next free page of its current extent,
    /// or the first of a newly allocated one.
    pub(crate) fn take_page(&mut self, t: &TableEntry) -> Result<PageId, StorageError> {
        let au = t.allocation_unit_id;
        let c = self.unit_cursor(au)?;
        let (file, extent, index) = match c.next_in_extent() {
            Some(next) => next,
            None => {
                let (f, e) = self.allocate_heap_extent(t)?;
                (f, e, 0)
            }
        };
        self.data
            .cursors
            .get_mut()
            .insert(au, c.taking(file, extent, index));
        Ok(PageId::new(file, extent.first_page().0 + index))
    }

    /// Unit `au`'s cursor, rebuilt from its last extent when not known yet (after open,
    /// `recover_cursor`); the caller holds the unit's insert lock (under which alone the
    /// unit takes pages and extents while the database is shared, so the rebuild reads maps
    /// nobody changes meanwhile) or the database exclusively.
    fn unit_cursor(&self, au: u64) -> Result<HeapCursor, StorageError> {
        if let Some(c) = self.data.cursors.lock().get(&au).copied() {
            return Ok(c);
        }
        let c = self.recover_cursor(au)?;
        self.data.cursors.lock().insert(au, c);
        Ok(c)
    }

    /// Rebuilds a heap's cursor after open from its last extent (invariant 2).
    fn recover_cursor(&self, au: u64) -> Result<HeapCursor, StorageError> {
        let Some(&(file, extent)) = self.extents_of(au)?.last() else {
            return Ok(HeapCursor::default());
        };
        let mut c = HeapCursor {
            current: None,
            extent: Some((file, extent)),
            next_index: 0,
        };
        // Every page, not up to the first unformatted one: a page taken whose format was
        // never logged (the log full at that moment) leaves a gap, and the pages after it
        // are in use. A page is taken when the PFS calls it allocated or it is formatted
        // (its bit a crash lost after the format).
        for i in 0..PAGES_PER_EXTENT {
            let pid = PageId::new(file, extent.first_page().0 + i);
            let p = self.data.pool.peek(&self.data_files, pid)?;
            if !is_unit_page(&p, au) && !self.page_allocated(pid)? {
                continue;
            }
            if is_heap_page(&p, au) {
                c.current = Some(pid);
            }
            c.next_index = i + 1;
        }
        Ok(c)
    }

    /// Allocates an extent for the table by proportional fill (`proportional_fill`), or
    /// fails with 1105 naming the object and filegroup.
    fn allocate_heap_extent(&mut self, t: &TableEntry) -> Result<(u16, ExtentNo), StorageError> {
        if let Some(got) = self.allocate_extent_by_fill(t.allocation_unit_id, t.data_space_id)? {
            return Ok(got);
        }
        Err(self.filegroup_full(t))
    }

    /// Error 1105's condition for table `t`: no file of its filegroup has a free extent.
    pub(crate) fn filegroup_full(&self, t: &TableEntry) -> StorageError {
        let fg = self
            .catalog
            .filegroups
            .iter()
            .find(|g| g.data_space_id == t.data_space_id)
            .map(|g| g.name.clone())
            .unwrap_or_default();
        StorageError::FilegroupFull {
            object: t.name.clone(),
            filegroup: fg,
        }
    }

    /// Formats `pid` as an empty page of `au`, logged (a redo-only system change), then marks
    /// it allocated in the PFS; returns the format's LSN.
    pub(crate) fn format_unit_page(
        &self,
        pid: PageId,
        au: u64,
        page_type: PageType,
        index_id: u16,
        level: u8,
    ) -> Result<extentdb_format::Lsn, StorageError> {
        let body = LogRecordBody::FormatPage {
            page: pid,
            page_type: page_type as u8,
            allocation_unit_id: au,
            index_id,
            level,
        };
        let wal = self.wal.clone().ok_or(StorageError::LogFailed)?;
        let lsn = wal.append(&body.encode())?;
        let p = formatted_page(&body, lsn)?;
        self.install_logged(lsn, vec![(pid, p)])?;
        // Only now, after the format's record (allocation.rs invariant 5).
        self.mark_page_allocated(pid, au)?;
        Ok(lsn)
    }

    /// Pages cached and dirty in the buffer pool: (cached, dirty, capacity).
    pub fn buffer_pool_usage(&self) -> (usize, usize, usize) {
        let p = &self.data.pool;
        (p.len(), p.dirty_pages(), p.capacity_pages())
    }

    /// A test's hook called at the start of every page the buffer pool reads from disk.
    #[doc(hidden)]
    pub fn set_pool_read_hook(&mut self, hook: Option<crate::buffer_pool::ReadHook>) {
        self.data.pool.set_read_hook(hook);
    }

    /// Sessions using page `pid`'s buffer frame now (None when it is not cached).
    #[doc(hidden)]
    pub fn pool_fixes(&self, pid: PageId) -> Option<usize> {
        self.data.pool.fixes(pid)
    }

    /// Asserts the buffer pool's invariants (buffer_pool.rs).
    #[doc(hidden)]
    pub fn check_pool_invariants(&self) {
        self.data.pool.check_invariants();
    }

    /// Sets the buffer pool's cap (pages); takes effect on an empty pool only.
    pub fn set_buffer_pool_pages(&mut self, pages: usize) {
        if self.data.pool.is_empty() {
            self.data.pool = BufferPool::new(pages);
        }
    }

    /// The budget the buffer pool draws on.
    pub fn pool_budget(&mut self) -> &std::sync::Arc<crate::buffer_pool::PoolBudget> {
        self.data.pool.budget()
    }

    /// Makes the pool draw on the instance's budget. A pool that already caches pages (a
    /// database opened outside the budget: a restore's recovery) is checkpointed and
    /// emptied first, so no dirty page is lost and the budget holds from here on.
    pub fn set_pool_budget(
        &mut self,
        budget: std::sync::Arc<crate::buffer_pool::PoolBudget>,
    ) -> Result<(), StorageError> {
        if self.data.pool.dirty_pages() > 0 {
            self.checkpoint()?;
        }
        let pool = &mut self.data.pool;
        assert_eq!(pool.dirty_pages(), 0, "a checkpoint leaves no dirty page");
        // The pool follows the budget's cap, which RECONFIGURE may raise or lower.
        *pool = BufferPool::with_budget(usize::MAX, budget);
        Ok(())
    }
}

/// A heap row's insertion at `slot` and its undo.
fn insert_actions(slot: u16, rec: &[u8]) -> (SlotAction, SlotAction) {
    (
        SlotAction::Insert {
            slot,
            record: rec.to_vec(),
        },
        SlotAction::Remove { slot },
    )
}

/// True for a formatted data or index page of allocation unit `au`.
pub(crate) fn is_unit_page(p: &Page, au: u64) -> bool {
    !p.is_unformatted()
        && matches!(p.header(), Ok(h) if matches!(h.page_type, PageType::Data | PageType::Index)
            && h.allocation_unit_id == au)
}

/// True for a formatted data page of allocation unit `au`.
pub(crate) fn is_heap_page(p: &Page, au: u64) -> bool {
    if p.is_unformatted() {
        return false;
    }
    matches!(p.header(), Ok(h) if h.page_type == PageType::Data && h.allocation_unit_id == au)
}

/// The page a `FormatPage` record describes, stamped with its LSN.
pub(crate) fn formatted_page(
    body: &LogRecordBody,
    lsn: extentdb_format::Lsn,
) -> Result<Page, StorageError> {
    let LogRecordBody::FormatPage {
        page,
        page_type,
        allocation_unit_id,
        index_id,
        level,
    } = body
    else {
        unreachable!("only FormatPage records describe a whole page");
    };
    let pt = PageType::from_u8(*page_type)
        .filter(|t| matches!(t, PageType::Data | PageType::Index))
        .ok_or_else(|| {
            extentdb_format::corrupt(*page, format!("FormatPage of page type {page_type}"))
        })?;
    let mut p = Page::zeroed();
    data_page::format(&mut p, *page, pt, *allocation_unit_id, *index_id, *level);
    set_lsn(&mut p, lsn)?;
    Ok(p)
}

#[cfg(test)]
#[path = "table_tests.rs"]
pub(crate) mod tests;
