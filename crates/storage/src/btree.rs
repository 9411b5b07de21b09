//! Clustered indexes (PRIMARY KEY CLUSTERED): a B+tree of the table's rows ordered by key.
//!
//! Leaf pages are data pages (type 1) holding the rows in key order; pages above are index
//! pages (type 2) whose records are a key and a child page id (the first record's key acts
//! as minus infinity). Pages of one level are chained through prev/next. The root never
//! moves (the catalog names it): when it splits, its records move to two new children and
//! it becomes their parent one level up.
//!
//! Splits are system changes, never undone: every page a split touches is logged whole in
//! one `PageImages` record, so a split is in the log entirely or not at all. Splits are
//! preemptive: going down, a node that could not take one more separator of the largest
//! possible key is split first, so a leaf split always finds room in its parent. The
//! inserting session splits sharing the database, beside other sessions' row operations
//! on the same tree (tree_change.rs: one structure change at a time per tree, under the
//! latches of the leaves it rewrites, pages installed right to left); only a split that
//! needs a new IAM page, a growth or log room past the reservations holds the database
//! exclusively (`Needs::LeafRoom`, `provide_leaf_room`).
//!
//! Row changes log `IndexChange` records: physical redo (page, slot), undo by key, because
//! a row may have moved to another page through a split between the change and its undo.
//! Deleted rows become ghosts (they keep their key's place, and the space their undo
//! needs, while their transaction may roll back); an update that changes a row's length
//! is a delete plus an insert, so one key may carry several ghosts, its earlier versions.
//!
//! Ghost cleanup: a leaf that cannot take an insert first drops the ghosts no active
//! transaction can turn live again (logged as the leaf's image, a system change like a
//! split), and splits only if it is still full. Without it the ghosts of a key deleted and
//! inserted again pile up for good, and once they fill a leaf no split can keep them
//! together (invariant 1).
//!
//! Invariants (`check_tree`):
//! 1. Keys increase (not strictly: ghosts and one live record may share a key) along each
//!    level's chain, and every key under a separator is at or above it. All records of one
//!    key are on one leaf, so a leaf's high key is below the next leaf's separator: a
//!    search for a key (a duplicate check, an undo by key) reads the one leaf that holds
//!    them all. A split never cuts between two records of one key (`split_point`).
//! 2. At most one live record per key (PRIMARY KEY uniqueness).
//! 3. All leaves are at level 0; a parent's level is its children's plus one.
//! 4. A ghost stays while an active transaction's undo may unghost it
//!    (`Database::ghosts_needed`); only ghost cleanup removes ghosts.

use std::cmp::Ordering;
use std::ops::Bound;

use extentdb_format::catalog::{ColumnEntry, TableEntry};
use extentdb_format::log_record::{KeyedUndo, LogRecordBody, SlotAction, XactId};
use extentdb_format::record::{self, ColumnLayout, RecordType};
use extentdb_format::{data_page, key, FileId, Page, PageId, PageNo, PageType};

use crate::access::{Gate, Needs, NextLatch, RowGate, RowsOnly, Step};
use crate::scan::{KeyPrefix, KeyRange, PageReads, ScanChunk, ScanPosition};
use crate::table::{layouts, PageTake, Rid};
use crate::tree_change::TreeChange;
use crate::{Database, StorageError};

/// A key: its columns' stored values (None for NULL).
type Key<'a> = Vec<Option<&'a [u8]>>;

/// Key columns `KeyInfo::key` reorders on the stack (SQL Server allows 16 in a key; a
/// wider one takes a second allocation).
const KEY_COLUMNS_ON_STACK: usize = 16;

/// What a B-tree needs to know of its table: key columns and their stored types.
pub(crate) struct KeyInfo {
    pub layouts: Vec<ColumnLayout>,
    pub positions: Vec<usize>,
    pub types: Vec<u8>,
    pub key_layouts: Vec<ColumnLayout>,
    /// Bytes of the largest separator record (for preemptive splits).
    pub max_separator: usize,
    /// Where the key columns lie in a leaf record, and the key columns then the child in a
    /// separator, when every key column is fixed-length and never NULL: a search reads
    /// them in place (`slot_key`, `slot_separator`) instead of decoding each record.
    leaf_spans: Option<Vec<(usize, usize)>>,
    separator_spans: Option<Vec<(usize, usize)>>,
}

impl KeyInfo {
    pub fn of(t: &TableEntry) -> KeyInfo {
        let lay = layouts(t);
        let ids = t
            .primary_key
            .as_ref()
            .map(|p| p.1.clone())
            .unwrap_or_default();
        // Positions in the record: a computed column not stored takes none.
        let stored: Vec<&ColumnEntry> = crate::table::stored_columns(t).collect();
        let positions: Vec<usize> = ids
            .iter()
            .filter_map(|id| stored.iter().position(|c| c.column_id == *id))
            .collect();
        let types = positions
            .iter()
            .map(|&p| stored[p].system_type_id)
            .collect();
        let mut key_layouts: Vec<ColumnLayout> = positions.iter().map(|&p| lay[p]).collect();
        let key_bytes: usize = positions
            .iter()
            .map(|&p| stored[p].max_length.max(0) as usize)
            .sum();
        key_layouts.push(ColumnLayout::Fixed(6));
        let never_null = positions.iter().all(|&p| !stored[p].is_nullable);
        let in_place = |layouts: &[ColumnLayout], at: &[usize]| {
            never_null
                .then(|| record::fixed_spans(layouts, at))
                .flatten()
        };
        let all: Vec<usize> = (0..key_layouts.len()).collect();
        KeyInfo {
            leaf_spans: in_place(&lay, &positions),
            separator_spans: in_place(&key_layouts, &all),
            layouts: lay,
            positions,
            types,
            // Header, column count, null bitmap, offsets: 64 bytes cover any key's framing.
            max_separator: key_bytes + 6 + 64 + 2 * key_layouts.len() + 2,
            key_layouts,
        }
    }

    /// The key columns of a leaf record.
    /// One allocation: the record's columns decoded, then its key columns moved to the
    /// front in key order (through a copy on the stack) and the rest cut off.
    pub fn key<'a>(&self, rec: &'a [u8]) -> Result<Vec<Option<&'a [u8]>>, StorageError> {
        let mut cols = record::decode(&self.layouts, rec)?;
        let n = self.positions.len();
        if n > KEY_COLUMNS_ON_STACK {
            return Ok(self.positions.iter().map(|&p| cols[p]).collect());
        }
        let mut key = [None; KEY_COLUMNS_ON_STACK];
        for (k, &p) in key.iter_mut().zip(&self.positions) {
            *k = cols[p];
        }
        cols.clear();
        cols.extend_from_slice(&key[..n]);
        Ok(cols)
    }

    /// The key columns of leaf record `rec`, read in place when the key allows it
    /// (`leaf_spans`), else decoded (`key`).
    fn record_key<'a>(&self, rec: &'a [u8]) -> Result<Key<'a>, StorageError> {
        match self
            .leaf_spans
            .as_ref()
            .and_then(|s| record::fixed_values(rec, s))
        {
            Some(k) => Ok(k),
            None => self.key(rec),
        }
    }

    /// The key columns of the leaf record in `slot` of `p` (None: an empty slot), read in
    /// place when the key allows it (`leaf_spans`).
    fn slot_key<'a>(&self, p: &'a Page, slot: u16) -> Result<Option<Key<'a>>, StorageError> {
        if let Some(spans) = &self.leaf_spans {
            let Some(head) = data_page::record_head(p, slot)? else {
                return Ok(None);
            };
            if let Some(k) = record::fixed_values(head, spans) {
                return Ok(Some(k));
            }
        }
        data_page::record(p, slot)?.map(|r| self.key(r)).transpose()
    }

    /// `separator` of the record in `slot` of index page `p` (None: an empty slot), read
    /// in place when the key allows it (`separator_spans`).
    fn slot_separator<'a>(
        &self,
        p: &'a Page,
        slot: u16,
    ) -> Result<Option<(Key<'a>, PageId)>, StorageError> {
        if let Some(spans) = &self.separator_spans {
            let Some(head) = data_page::record_head(p, slot)? else {
                return Ok(None);
            };
            if let Some(mut cols) = record::fixed_values(head, spans) {
                let child = cols.pop().flatten().expect("the child's span");
                return Ok(Some((cols, child_page(child))));
            }
        }
        data_page::record(p, slot)?
            .map(|r| self.separator(r))
            .transpose()
    }

    /// The key columns and child of a separator record.
    pub(crate) fn separator<'a>(&self, rec: &'a [u8]) -> Result<(Key<'a>, PageId), StorageError> {
        let mut cols = record::decode(&self.key_layouts, rec)?;
        let child = cols.pop().flatten().unwrap_or(&[0; 6]);
        Ok((cols, child_page(child)))
    }

    pub(crate) fn separator_record(
        &self,
        key: &[Option<&[u8]>],
        child: PageId,
    ) -> Result<Vec<u8>, StorageError> {
        let mut c = [0u8; 6];
        c[..4].copy_from_slice(&child.page.0.to_le_bytes());
        c[4..].copy_from_slice(&child.file.0.to_le_bytes());
        let mut values: Vec<Option<&[u8]>> = key.to_vec();
        values.push(Some(&c));
        let mut rec = record::encode(&self.key_layouts, &values)?;
        record::set_record_type(&mut rec, RecordType::Index);
        Ok(rec)
    }

    fn cmp(&self, a: &[Option<&[u8]>], b: &[Option<&[u8]>]) -> Ordering {
        key::compare_keys(&self.types, a, b)
    }

    /// Key `k`'s leading columns against a range bound's prefix.
    fn cmp_prefix(&self, k: &[Option<&[u8]>], prefix: &[Option<Vec<u8>>]) -> Ordering {
        let n = prefix.len().min(self.types.len());
        key::compare_keys(&self.types[..n], k, &borrow(prefix))
    }

    /// True when key `k` lies before a range's lower bound.
    fn below(&self, k: &[Option<&[u8]>], lower: &Bound<KeyPrefix>) -> bool {
        match lower {
            Bound::Unbounded => false,
            Bound::Included(p) => self.cmp_prefix(k, p) == Ordering::Less,
            Bound::Excluded(p) => self.cmp_prefix(k, p) != Ordering::Greater,
        }
    }

    /// True when key `k` lies past a range's upper bound.
    fn above(&self, k: &[Option<&[u8]>], upper: &Bound<KeyPrefix>) -> bool {
        match upper {
            Bound::Unbounded => false,
            Bound::Included(p) => self.cmp_prefix(k, p) == Ordering::Greater,
            Bound::Excluded(p) => self.cmp_prefix(k, p) != Ordering::Less,
        }
    }
}

/// The page a separator's 6-byte child column names (page number, then file id).
fn child_page(child: &[u8]) -> PageId {
    PageId {
        page: PageNo(u32::from_le_bytes(child[..4].try_into().expect("6 bytes"))),
        file: FileId(u16::from_le_bytes(child[4..6].try_into().expect("6 bytes"))),
    }
}

/// The records of a page in slot order.
fn page_records(p: &Page) -> Result<Vec<Vec<u8>>, StorageError> {
    let mut out = Vec::new();
    for (_, r) in data_page::records(p) {
        out.push(r?.to_vec());
    }
    Ok(out)
}

impl Database {
    /// A page of the tree, reached through the root or a link (zeros there are damage, Msg
    /// 824, never a page not used yet): a copy, read without caching it (scans), under its
    /// frame's latch. Counted in `reads`.
    fn tree_page(&self, pid: PageId, reads: &mut PageReads) -> Result<Page, StorageError> {
        let p = {
            let pool = &self.data.pool;
            reads.visit(pool.contains(pid));
            pool.peek(&self.data_files, pid)?
        };
        if p.is_unformatted() {
            return Err(self.incorrect_page_id(pid, PageId::NULL));
        }
        Ok(p)
    }

    /// `f` of tree page `pid`, cached (a seek's path stays for the next seek) and read
    /// under its frame's latch (SH); `f` must not use the pool. Counted in `reads`.
    fn with_tree_page<R>(
        &self,
        pid: PageId,
        reads: &mut PageReads,
        f: impl FnOnce(&Page) -> Result<R, StorageError>,
    ) -> Result<R, StorageError> {
        let pool = &self.data.pool;
        reads.visit(pool.contains(pid));
        let wal = self.wal.as_deref();
        let read = pool.with_page(&self.data_files, wal, pid, |p| {
            (!p.is_unformatted()).then(|| f(p))
        })?;
        read.unwrap_or_else(|| Err(self.incorrect_page_id(pid, PageId::NULL)))
    }

    /// Creates the empty root (a leaf) of a new clustered index; the format is durable
    /// before the catalog names the page.
    pub(crate) fn btree_create(&mut self, t: &TableEntry) -> Result<PageId, StorageError> {
        let root = self.take_page(t)?;
        let lsn = self.format_unit_page(root, t.allocation_unit_id, PageType::Data, 1, 0)?;
        self.wal
            .as_ref()
            .ok_or(StorageError::LogFailed)?
            .flush(lsn)?;
        Ok(root)
    }

    /// The child of internal page `p` whose range holds `k`, with the child's slot.
    fn child_for(ki: &KeyInfo, p: &Page, k: &[Option<&[u8]>]) -> Result<PageId, StorageError> {
        // The child of the last separator <= k (the first separator stands for minus
        // infinity). Separators ascend in slot order (invariant 1), so a binary search over
        // the slot array finds it without copying or decoding the page's other records.
        let n = data_page::slot_count(p);
        let sep = |slot: u16| ki.slot_separator(p, slot);
        let empty = || -> StorageError {
            extentdb_format::corrupt(
                p.header().map(|h| h.this_page).unwrap_or(PageId::NULL),
                "empty index page",
            )
            .into()
        };
        if n == 0 {
            return Err(empty());
        }
        // lo always qualifies (slot 0 by definition); no slot at or after hi does.
        let (mut lo, mut hi) = (0u16, n);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            let Some((s, _)) = sep(mid)? else {
                // Index pages keep their slot arrays dense; an empty slot means the page
                // is not what this search assumes.
                return Err(empty());
            };
            if ki.cmp(&s, k) == Ordering::Greater {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        sep(lo)?.map(|(_, child)| child).ok_or_else(empty)
    }

    /// Where a split divides `recs`: a leaf about to take key `k` past its last key splits
    /// at the end (ascending keys such as IDENTITY fill pages instead of halving them), one
    /// before its only record splits at the start; otherwise by bytes, so a page of a few
    /// large rows and many small ones halves fairly. None for a leaf whose records all
    /// have key `k`: no cut keeps them on one leaf (invariant 1).
    ///
    /// An ascending run into the middle of the index (`k` goes right after the leaf's
    /// newest record, `newest`, its position in `recs`) splits at the insertion point: the
    /// run's rows stay on the full left page, the rows after it move right, and `k`, below
    /// the right page's separator, then finds the left page full with `k` past its last
    /// key, which splits at the end. So each run fills pages instead of halving them
    /// (a 50/50 split there leaves every page the run passes half empty); random inserts
    /// rarely land right after the newest record and keep the 50/50 split.
    fn split_point(
        &self,
        ki: &KeyInfo,
        recs: &[Vec<u8>],
        k: Option<&[Option<&[u8]>]>,
        newest: Option<usize>,
    ) -> Result<Option<usize>, StorageError> {
        if let (Some(k), Some(last), Some(first)) = (k, recs.last(), recs.first()) {
            if ki.cmp(k, &ki.key(last)?) == Ordering::Greater {
                return Ok(Some(recs.len()));
            }
            if let Some(n) = newest.filter(|&n| n + 1 < recs.len()) {
                let after_newest = ki.cmp(&ki.key(&recs[n])?, k) == Ordering::Less
                    && ki.cmp(k, &ki.key(&recs[n + 1])?) == Ordering::Less;
                if after_newest {
                    return Ok(Some(n + 1));
                }
            }
            if recs.len() == 1 && ki.cmp(k, &ki.key(first)?) == Ordering::Less {
                return Ok(Some(0));
            }
        }
        let total: usize = recs.iter().map(|r| r.len()).sum();
        let mut acc = 0;
        let mut cut = recs.len() / 2;
        for (i, r) in recs.iter().enumerate() {
            acc += r.len();
            if acc * 2 >= total {
                cut = (i + 1).clamp(1, recs.len().saturating_sub(1).max(1));
                break;
            }
        }
        let Some(k) = k else {
            return Ok(Some(cut));
        };
        // Records of one key (a live row and the ghosts of its earlier versions) stay on
        // one leaf, so that the separators route every search for a key to the one leaf
        // that holds all its records (invariant 1): the cut nearest the balanced one that
        // falls between two keys.
        let same = |i: usize| -> Result<bool, StorageError> {
            Ok(ki.cmp(&ki.key(&recs[i - 1])?, &ki.key(&recs[i])?) == Ordering::Equal)
        };
        for d in 0..recs.len() {
            for c in [cut + d, cut.wrapping_sub(d)] {
                if c >= 1 && c < recs.len() && !same(c)? {
                    return Ok(Some(c));
                }
            }
        }
        // Every record has one key. Below `k`'s it is cut at the start (`k` goes to the
        // emptied left half); equal to it, nothing can be cut.
        match recs.first() {
            Some(first) if ki.cmp(k, &ki.key(first)?) == Ordering::Less => Ok(Some(0)),
            _ => Ok(None),
        }
    }

    /// Ghost cleanup of leaf `leaf` (invariant 4): rewrites it without the ghosts no active
    /// transaction's undo may turn live again, logged whole like a split's pages. True when
    /// it dropped any.
    fn clean_ghosts(&self, t: &TableEntry, leaf: PageId) -> Result<Room, StorageError> {
        let _latch = self.data.page_latches.hold(leaf);
        let old = self.tree_page(leaf, &mut PageReads::default())?;
        let h = old.header()?;
        assert_eq!(h.level, 0, "ghost cleanup of index page {leaf}");
        if h.ghost_rec_count == 0 {
            return Ok(Room::Unchanged);
        }
        let needed = self.ghosts_needed(t.allocation_unit_id);
        // Byte 0 holds the record type (ghost or not); the rest is the version's bytes,
        // as `btree_find` matches them for an undo.
        let is_needed = |r: &[u8]| match &needed {
            None => true,
            Some(needed) => needed
                .iter()
                .any(|n| n.len() == r.len() && n[1..] == r[1..]),
        };
        let recs = page_records(&old)?;
        let keep: Vec<&Vec<u8>> = recs
            .iter()
            .filter(|r| !record::is_ghost(r) || is_needed(r))
            .collect();
        if keep.len() == recs.len() {
            return Ok(Room::Unchanged);
        }
        let mut page = Page::zeroed();
        data_page::format(
            &mut page,
            leaf,
            h.page_type,
            t.allocation_unit_id,
            h.index_id,
            h.level,
        );
        for (i, r) in keep.iter().enumerate() {
            data_page::insert_shifted(&mut page, i as u16, r)?;
        }
        link(&mut page, h.prev_page, h.next_page)?;
        Ok(match self.log_system_images(vec![(leaf, page)])? {
            true => Room::Made,
            false => Room::Exclusive,
        })
    }

    /// Splits `node` (its parent has room for one separator), or the root in place, as
    /// structure change `change` of tree `t` (tree_change.rs): under `node`'s latch and,
    /// for a node with a right sibling, the sibling's (its back link changes; taken as a
    /// walk right takes it, access.rs invariant 2). `k` is the key a leaf split makes
    /// room for.
    fn split(
        &self,
        change: &TreeChange<'_>,
        t: &TableEntry,
        ki: &KeyInfo,
        (node, parent): (PageId, Option<PageId>),
        k: Option<&[Option<&[u8]>]>,
    ) -> Result<Room, StorageError> {
        let _latch = self.data.page_latches.hold(node);
        let old = self.tree_page(node, &mut PageReads::default())?;
        let h = old.header()?;
        let recs = page_records(&old)?;
        let newest = match h.level {
            0 => data_page::newest_record(&old)?,
            _ => None,
        };
        let cut = self.split_point(ki, &recs, k, newest)?.ok_or_else(|| {
            // Every record of the leaf is a version of the key being inserted, and active
            // transactions still need each one: refused, never split inside the key.
            StorageError::KeyVersionsFillPage {
                table: t.name.clone(),
            }
        })?;
        if h.level == 0 && cut > 0 && cut < recs.len() {
            assert_eq!(
                ki.cmp(&ki.key(&recs[cut - 1])?, &ki.key(&recs[cut])?),
                Ordering::Less,
                "a split of leaf {node} inside one key's records (invariant 1)"
            );
        }
        let halves = Halves {
            ki,
            t,
            level: h.level,
            page_type: h.page_type,
            k,
        };
        let (images, new_pages) = match parent {
            None => match halves.root(self, node, (&recs[..cut], &recs[cut..]))? {
                Ok(made) => made,
                Err(room) => return Ok(room),
            },
            Some(parent) => {
                let _next_latch = match h.next_page.is_null() {
                    true => None,
                    false => match self.data.page_latches.hold_next(node, h.next_page) {
                        NextLatch::Same => None,
                        NextLatch::Held(g) => Some(g),
                        NextLatch::Busy => return Ok(Room::Busy(h.next_page)),
                    },
                };
                let links = (h.prev_page, h.next_page);
                match halves.sibling(self, (node, parent, links), (&recs[..cut], &recs[cut..]))? {
                    Ok(made) => return self.install_split(change, t, made),
                    Err(room) => return Ok(room),
                }
            }
        };
        self.install_split(change, t, (images, new_pages))
    }

    /// Logs a split's pages and installs them right to left, children before their parent
    /// (`images` is in that order, tree_change.rs invariant 3), the tree's counter odd
    /// meanwhile; then marks the new pages allocated (allocation.rs invariant 5).
    fn install_split(
        &self,
        change: &TreeChange<'_>,
        t: &TableEntry,
        (images, new_pages): (Vec<(PageId, Page)>, Vec<PageId>),
    ) -> Result<Room, StorageError> {
        assert_new_pages_first(&KeyInfo::of(t), &images, &new_pages)?;
        if !change.installing(|| self.log_system_images(images))? {
            return Ok(Room::Exclusive);
        }
        for p in new_pages {
            self.mark_page_allocated(p, t.allocation_unit_id)?;
        }
        self.data
            .page_splits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Room::Made)
    }

    /// The first key of a page: a leaf record's key, or a separator's key.
    fn first_key_of(
        &self,
        ki: &KeyInfo,
        p: &Page,
        level: u8,
    ) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        let rec = data_page::record(p, 0)?.ok_or_else(|| {
            StorageError::from(extentdb_format::corrupt(
                PageId::NULL,
                "split of an empty page",
            ))
        })?;
        let k = if level == 0 {
            ki.key(rec)?
        } else {
            ki.separator(rec)?.0
        };
        Ok(k.into_iter().map(|c| c.map(|b| b.to_vec())).collect())
    }

    /// Logs whole pages as one atomic record and installs them, stamped, in the pool.
    pub(crate) fn log_images(&self, images: Vec<(PageId, Page)>) -> Result<(), StorageError> {
        let record = |images| LogRecordBody::PageImages { images };
        self.log_whole_pages(images, record)
    }

    /// `log_images` for a root's move from `from` to `to` (page_move.rs): the record also
    /// names the table, so recovery can finish the catalog's part.
    pub(crate) fn log_root_move(
        &self,
        object_id: u32,
        from: PageId,
        to: PageId,
        images: Vec<(PageId, Page)>,
    ) -> Result<(), StorageError> {
        let record = |images| LogRecordBody::RootMove {
            object_id,
            from,
            to,
            images,
        };
        self.log_whole_pages(images, record)
    }

    fn log_whole_pages(
        &self,
        images: Vec<(PageId, Page)>,
        record: impl FnOnce(Vec<(PageId, Vec<u8>)>) -> LogRecordBody,
    ) -> Result<(), StorageError> {
        let wal = self.wal.clone().ok_or(StorageError::LogFailed)?;
        let lsn = wal.append(&images_record(&images, record))?;
        // Every image in the pool, or the database poisoned (xact.rs invariant 6).
        self.install_logged(lsn, images)
    }

    /// `log_images` for a structure change (a split, a ghost cleanup): sharing the
    /// database, only when the log keeps every transaction's rollback reservation after it
    /// (`append_checked`); false when it would not, with nothing logged.
    fn log_system_images(&self, images: Vec<(PageId, Page)>) -> Result<bool, StorageError> {
        // A split before this one that failed to install its pages poisoned the database
        // (xact.rs invariant 6): the pages read here may be the stale copies it left.
        self.check_writable()?;
        if self.held_exclusively {
            self.log_images(images)?;
            return Ok(true);
        }
        let record = images_record(&images, |images| LogRecordBody::PageImages { images });
        match self.append_checked(&record)? {
            Some(lsn) => self.install_logged(lsn, images).map(|()| true),
            None => Ok(false),
        }
    }

    /// Splits the leaf for `record` (its ghosts cleaned first) until it has room for it,
    /// as a structure change of its tree beside other sessions (tree_change.rs): going
    /// down, a node that could not take one more separator of the largest key is split
    /// first, so a split always finds room in its parent. Each step runs under the tree's
    /// change mutex; a busy latch is waited for holding none and the descent starts over.
    /// Not `Made` when a step lacked a page or log room (nothing of that step changed).
    fn make_leaf_room(&self, t: &TableEntry, record: &[u8]) -> Result<Room, StorageError> {
        let ki = KeyInfo::of(t);
        let k = ki.key(record)?;
        loop {
            let step = {
                let change = self.data.trees.begin(t.object_id);
                self.leaf_room_step(&change, t, &ki, (&k, record.len()))?
            };
            match step {
                Room::Made => continue,
                Room::Unchanged => return Ok(Room::Made),
                Room::Busy(page) => drop(self.data.page_latches.hold(page)),
                other => return Ok(other),
            }
        }
    }

    /// One descent of `make_leaf_room`: the first full node on the way split (or the
    /// leaf's ghosts dropped): `Made`; none full: `Unchanged`.
    fn leaf_room_step(
        &self,
        change: &TreeChange<'_>,
        t: &TableEntry,
        ki: &KeyInfo,
        (k, len): (&[Option<&[u8]>], usize),
    ) -> Result<Room, StorageError> {
        let (mut parent, mut at) = (None, t.root_page);
        for _ in 0..=u8::MAX as usize {
            let p = self.tree_page(at, &mut PageReads::default())?;
            let leaf = p.header()?.level == 0;
            let need = if leaf { len } else { ki.max_separator };
            let full =
                !data_page::can_insert(&p, need, true) && (leaf || data_page::slot_count(&p) > 1);
            if full {
                if leaf {
                    match self.clean_ghosts(t, at)? {
                        Room::Unchanged => {}
                        other => return Ok(other),
                    }
                }
                return self.split(change, t, ki, (at, parent), leaf.then_some(k));
            }
            if leaf {
                return Ok(Room::Unchanged);
            }
            parent = Some(at);
            at = Self::child_for(ki, &p, k)?;
        }
        Err(extentdb_format::corrupt(at, "index levels loop").into())
    }

    /// Held exclusively (`Needs::LeafRoom`): the leaf for `record` given room, a page
    /// reserved in its unit's extent before each run (`reserve_tree_pages`: a new extent
    /// only once the current one is used up, as a heap takes them): a split that lacked a
    /// page runs again after a new extent of 8 free pages, and a split takes 2 at most, so
    /// each run makes one split at least and this ends.
    pub(crate) fn provide_leaf_room(
        &mut self,
        t: &TableEntry,
        record: &[u8],
    ) -> Result<(), StorageError> {
        loop {
            self.reserve_tree_pages(t, 1)?;
            match self.make_leaf_room(t, record)? {
                Room::Made => return Ok(()),
                Room::Exclusive => {}
                Room::Growth(_) | Room::Busy(_) | Room::Unchanged => {
                    unreachable!("held exclusively, a split needs no growth and waits for no latch")
                }
            }
        }
    }

    /// Inserts a row into clustered index `t` (access.rs), beside other sessions: into its
    /// leaf under the leaf's latch, when the leaf has room (else `Needs::LeafRoom`); a
    /// live row with the same key is a duplicate (PRIMARY KEY violation). `also` more log
    /// bytes must fit after the row's record. The new row goes through `gate` before the
    /// leaf's latch is let go (access.rs invariant 5).
    pub(crate) fn btree_insert(
        &self,
        xact: XactId,
        t: &TableEntry,
        (rec, also): (&[u8], u64),
        mut gate: RowGate<'_, '_>,
    ) -> Result<Step<Rid>, StorageError> {
        loop {
            match self.btree_insert_once(xact, t, (rec, also), gate.as_deref_mut())? {
                // Sharing the database, the split is made here; held exclusively, by
                // `provide_leaf_room`, which reserves its pages first.
                Attempt::Done(Step::Needs(room @ Needs::LeafRoom { .. }))
                    if !self.held_exclusively =>
                {
                    match self.make_leaf_room(t, rec)? {
                        Room::Made => {}
                        Room::Growth(g) => return Ok(Step::Needs(Needs::Growth(g))),
                        _ => return Ok(Step::Needs(room)),
                    }
                }
                Attempt::Done(step) => return Ok(step),
                // A latch of the walk was busy (access.rs invariant 2): wait for it holding
                // none, then find the row's place again.
                Attempt::Busy(page) => drop(self.data.page_latches.hold(page)),
            }
        }
    }

    /// `btree_insert`'s one attempt: under the leaf's latch, the duplicate check, room, the
    /// gate's key range (access.rs invariant 6) and the change.
    fn btree_insert_once(
        &self,
        xact: XactId,
        t: &TableEntry,
        (rec, also): (&[u8], u64),
        gate: RowGate<'_, '_>,
    ) -> Result<Attempt<Step<Rid>>, StorageError> {
        let ki = KeyInfo::of(t);
        let k = ki.key(rec)?;
        let (leaf, _latch) = self.latched_leaf(t, &ki, &k)?;
        let (slot, found, room) = self.with_tree_page(leaf, &mut PageReads::default(), |p| {
            let (slot, found) = leaf_position(&ki, p, &k)?;
            Ok((slot, found, data_page::can_insert(p, rec.len(), true)))
        })?;
        if matches!(found, Some((_, false))) {
            return Err(duplicate_key(t));
        }
        if !room {
            return Ok(Attempt::Done(Step::Needs(Needs::LeafRoom {
                object_id: t.object_id,
                record: rec.to_vec(),
            })));
        }
        let Some(gate) = gate else {
            return self.insert_at(xact, t, (leaf, slot), (rec, also), None);
        };
        if gate.key_ranges() {
            match self.next_key_range(leaf, slot, gate)? {
                Attempt::Done(true) => {}
                Attempt::Done(false) => return Err(StorageError::RowRefused),
                Attempt::Busy(page) => return Ok(Attempt::Busy(page)),
            }
        }
        self.insert_at(xact, t, (leaf, slot), (rec, also), Some(gate))
    }

    /// The change of an insert whose place `(leaf, slot)` was found under the leaf's latch,
    /// which the caller holds; then the new row passes `gate`.
    fn insert_at(
        &self,
        xact: XactId,
        t: &TableEntry,
        (leaf, slot): (PageId, u16),
        (rec, also): (&[u8], u64),
        gate: RowGate<'_, '_>,
    ) -> Result<Attempt<Step<Rid>>, StorageError> {
        let redo = SlotAction::Insert {
            slot,
            record: rec.to_vec(),
        };
        let undo = KeyedUndo::Remove {
            record: rec.to_vec(),
        };
        if !self.index_change(xact, t, leaf, redo, undo, also)? {
            return Ok(Attempt::Done(Step::Needs(Needs::LogGrowth)));
        }
        // Still under the leaf's latch: no gated reader sees the row before the gate.
        match gate.is_none_or(|g| g.row((leaf, slot), rec)) {
            true => Ok(Attempt::Done(Step::Done((leaf, slot)))),
            false => Err(StorageError::RowRefused),
        }
    }

    /// The first live key after slot `from` of `leaf` (whose latch the caller holds), on
    /// it or on the leaves right of it, or the end of the index, through
    /// `gate.key_range` (access.rs invariant 6): whether the gate lets the insert go on.
    /// Each leaf right of `leaf` is read under its own latch, taken holding `leaf`'s.
    fn next_key_range(
        &self,
        leaf: PageId,
        from: u16,
        gate: &mut (dyn Gate + '_),
    ) -> Result<Attempt<bool>, StorageError> {
        let (mut at, mut first) = (leaf, from);
        loop {
            let _latch = match at == leaf {
                true => None,
                false => match self.data.page_latches.hold_next(leaf, at) {
                    NextLatch::Same => None,
                    NextLatch::Held(g) => Some(g),
                    NextLatch::Busy => return Ok(Attempt::Busy(at)),
                },
            };
            let (live, next) = self.with_tree_page(at, &mut PageReads::default(), |p| {
                Ok((first_live(p, first)?, p.header()?.next_page))
            })?;
            if let Some((slot, r)) = live {
                return Ok(Attempt::Done(gate.key_range(Some(((at, slot), &r)))));
            }
            if next.is_null() {
                return Ok(Attempt::Done(gate.key_range(None)));
            }
            (at, first) = (next, 0);
        }
    }

    /// Finds the live row with `rec`'s key, or with `ghost` the ghost that is exactly
    /// `rec` (one key may have several ghosts, its earlier versions): (leaf, slot, record).
    pub(crate) fn btree_find(
        &self,
        t: &TableEntry,
        ki: &KeyInfo,
        rec: &[u8],
        ghost: bool,
    ) -> Result<(PageId, u16, Vec<u8>), StorageError> {
        let k = ki.key(rec)?;
        let (leaf, _latch) = self.latched_leaf(t, ki, &k)?;
        let found = self.with_tree_page(leaf, &mut PageReads::default(), |p| {
            find_in_leaf(ki, p, rec, ghost)
        })?;
        found
            .map(|(slot, r)| (leaf, slot, r))
            .ok_or(StorageError::RowNotFound {
                page: leaf,
                slot: u16::MAX,
            })
    }

    /// Changes the live row with `rec`'s key, under its leaf's latch: `change` gets its
    /// slot and record and gives the change's redo action and keyed undo.
    fn change_live_row(
        &self,
        xact: XactId,
        t: &TableEntry,
        rec: &[u8],
        also: u64,
        change: impl FnOnce(u16, Vec<u8>) -> (SlotAction, KeyedUndo),
    ) -> Result<Step<Rid>, StorageError> {
        let ki = KeyInfo::of(t);
        let k = ki.key(rec)?;
        let (leaf, _latch) = self.latched_leaf(t, &ki, &k)?;
        let found = self.with_tree_page(leaf, &mut PageReads::default(), |p| {
            find_in_leaf(&ki, p, rec, false)
        })?;
        let Some((slot, cur)) = found else {
            return Err(StorageError::RowNotFound {
                page: leaf,
                slot: u16::MAX,
            });
        };
        let (redo, undo) = change(slot, cur);
        Ok(match self.index_change(xact, t, leaf, redo, undo, also)? {
            true => Step::Done((leaf, slot)),
            false => Step::Needs(Needs::LogGrowth),
        })
    }

    /// Deletes the row with `old`'s key (it becomes a ghost), beside other sessions.
    /// `also` more log bytes must fit after its record.
    pub(crate) fn btree_delete(
        &self,
        xact: XactId,
        t: &TableEntry,
        old: &[u8],
        also: u64,
    ) -> Result<Step<()>, StorageError> {
        let step = self.change_live_row(xact, t, old, also, |slot, cur| {
            (
                SlotAction::Ghost { slot },
                KeyedUndo::Unghost { record: cur },
            )
        })?;
        Ok(match step {
            Step::Done(_) => Step::Done(()),
            Step::Needs(n) => Step::Needs(n),
        })
    }

    /// Replaces the row with `old`'s key by `new`, beside other sessions: in place when
    /// the key and length stay; else the row moves (access.rs invariant 3), within its
    /// leaf when the key stays (`btree_move_in_leaf`), else to its new key's place
    /// (`btree_move_key`).
    pub(crate) fn btree_update(
        &self,
        xact: XactId,
        t: &TableEntry,
        (old, new): (&[u8], &[u8]),
        gate: RowGate<'_, '_>,
    ) -> Result<Step<Rid>, StorageError> {
        let ki = KeyInfo::of(t);
        let same_key = ki.cmp(&ki.key(old)?, &ki.key(new)?) == Ordering::Equal;
        if same_key && old.len() == new.len() {
            return self.change_live_row(xact, t, old, 0, |slot, cur| {
                let record = new.to_vec();
                (
                    SlotAction::Replace { slot, record },
                    KeyedUndo::Replace { record: cur },
                )
            });
        }
        if same_key {
            let mut rows_only = gate.map(RowsOnly);
            let gate = rows_only.as_mut().map(|g| g as &mut dyn Gate);
            return self.btree_move_in_leaf(xact, t, &ki, (old, new), gate);
        }
        self.btree_move_key(xact, t, (old, new), gate)
    }

    /// A row whose key changes: the new row goes in first, as any insert (its leaf split,
    /// its key range tested through `gate`, a duplicate refused, nothing changed before),
    /// with log room kept for the old row's delete (xact.rs invariant 8), which follows.
    fn btree_move_key(
        &self,
        xact: XactId,
        t: &TableEntry,
        (old, new): (&[u8], &[u8]),
        gate: RowGate<'_, '_>,
    ) -> Result<Step<Rid>, StorageError> {
        let also = crate::xact::change_bytes_bound(old.len());
        let rid = match self.btree_insert(xact, t, (new, also), gate)? {
            Step::Done(rid) => rid,
            Step::Needs(n) => return Ok(Step::Needs(n)),
        };
        match self.btree_delete(xact, t, old, 0)? {
            Step::Done(()) => Ok(Step::Done(rid)),
            Step::Needs(n) => Err(self.second_change_failed(n)),
        }
    }

    /// A row whose length changes and key stays: under its leaf's latch, once the leaf has
    /// room for the new record (split first, as an insert's), the old record becomes a
    /// ghost (its undo's room) and the new one goes in beside it, with log room kept for
    /// the insert (xact.rs invariant 8). One latch hold: no other session takes the room.
    fn btree_move_in_leaf(
        &self,
        xact: XactId,
        t: &TableEntry,
        ki: &KeyInfo,
        (old, new): (&[u8], &[u8]),
        gate: RowGate<'_, '_>,
    ) -> Result<Step<Rid>, StorageError> {
        let k = ki.key(new)?;
        loop {
            let (leaf, latch) = self.latched_leaf(t, ki, &k)?;
            let (found, room) = self.with_tree_page(leaf, &mut PageReads::default(), |p| {
                Ok((
                    find_in_leaf(ki, p, old, false)?,
                    data_page::can_insert(p, new.len(), true),
                ))
            })?;
            let Some((slot, cur)) = found else {
                return Err(StorageError::RowNotFound {
                    page: leaf,
                    slot: u16::MAX,
                });
            };
            if !room {
                drop(latch);
                let needs = Needs::LeafRoom {
                    object_id: t.object_id,
                    record: new.to_vec(),
                };
                if self.held_exclusively {
                    return Ok(Step::Needs(needs));
                }
                match self.make_leaf_room(t, new)? {
                    Room::Made => continue,
                    Room::Growth(g) => return Ok(Step::Needs(Needs::Growth(g))),
                    _ => return Ok(Step::Needs(needs)),
                }
            }
            let also = crate::xact::change_bytes_bound(new.len());
            let ghost = SlotAction::Ghost { slot };
            let unghost = KeyedUndo::Unghost { record: cur };
            if !self.index_change(xact, t, leaf, ghost, unghost, also)? {
                return Ok(Step::Needs(Needs::LogGrowth));
            }
            let (at, _) = self.with_tree_page(leaf, &mut PageReads::default(), |p| {
                leaf_position(ki, p, &k)
            })?;
            return match self.insert_at(xact, t, (leaf, at), (new, 0), gate)? {
                Attempt::Done(Step::Done(rid)) => Ok(Step::Done(rid)),
                Attempt::Done(Step::Needs(n)) => Err(self.second_change_failed(n)),
                Attempt::Busy(_) => unreachable!("an insert at a latched place waits for none"),
            };
        }
    }

    /// Every live leaf row in key order.
    pub(crate) fn btree_scan(&self, t: &TableEntry) -> Result<Vec<(Rid, Vec<u8>)>, StorageError> {
        let all = KeyRange::all();
        Ok(self
            .btree_range_chunk(t, &all, (None, usize::MAX), None)?
            .rows)
    }

    /// Live leaf rows in key order inside `range` and after the row `after` (from the
    /// range's start when None), leaf by leaf until about `max_bytes` are taken (scan.rs
    /// invariants 1, 4 and 5), each through `gate` under its leaf's latch (access.rs
    /// invariant 5). A bounded range descends to its start and stops at the first key past
    /// its end; the whole range reads from the first leaf to the last. A gate of key ranges
    /// also gets the keys that bound the range (access.rs invariant 6), and the walk holds
    /// each leaf's latch until it has the next one's.
    pub(crate) fn btree_range_chunk(
        &self,
        t: &TableEntry,
        range: &KeyRange,
        (after, max_bytes): (Option<&[u8]>, usize),
        mut gate: RowGate<'_, '_>,
    ) -> Result<ScanChunk, StorageError> {
        let ki = KeyInfo::of(t);
        let ranges = gate.as_ref().is_some_and(|g| g.key_ranges());
        let read = RangeRead {
            ki: &ki,
            range,
            after: after.map(|r| ki.key(r)).transpose()?,
            ranges,
            point: range.is_point(ki.positions.len()),
        };
        let lower = match &range.lower {
            Bound::Included(p) | Bound::Excluded(p) => Some(borrow(p)),
            Bound::Unbounded => None,
        };
        let mut reads = PageReads::default();
        let mut at = match (&read.after, &lower) {
            (Some(k), _) => self.leaf_for(t, &ki, k, &mut reads)?,
            (None, Some(p)) => self.leaf_for(t, &ki, p, &mut reads)?,
            (None, None) => self.leftmost_leaf(t, &ki, &mut reads)?,
        };
        // Where a chunk the gate stopped at a key range resumes: before that key.
        let resume = |rows: &[(Rid, Vec<u8>)]| match (rows.last(), after) {
            (Some((_, r)), _) => ScanPosition::AfterRecord(r.clone()),
            (None, Some(a)) => ScanPosition::AfterRecord(a.to_vec()),
            (None, None) => ScanPosition::Start,
        };
        let mut counted = Some(at);
        let (mut rows, mut bytes, mut seen) = (Vec::new(), 0usize, 0usize);
        let mut latch = None;
        while !at.is_null() {
            if bytes >= max_bytes {
                let last = rows.last().map(|(_, r): &(Rid, Vec<u8>)| r.clone());
                let next = ScanPosition::AfterRecord(last.expect("bytes were taken, so a row"));
                return Ok(ScanChunk::to(rows, next, reads));
            }
            if gate.is_some() && latch.is_none() {
                latch = Some(self.data.page_latches.hold(at));
            }
            // The descent read (and counted) the first leaf.
            let mut uncounted = PageReads::default();
            let leaf_reads = match counted.take() == Some(at) {
                true => &mut uncounted,
                false => &mut reads,
            };
            let taken = self.read_leaf(at, leaf_reads, read.point, |p| {
                read.take_leaf(at, p, (&mut rows, &mut bytes), gate.as_deref_mut())
            })?;
            let Some((end, next)) = taken else {
                // The root, a leaf when the descent read it, split since (tree_change.rs
                // invariant 3: a stale descent lands left of its key, or on the root that
                // became an index page): the chunk ends empty where it began, and the
                // next one descends again. Links lead from leaves to leaves only.
                assert!(
                    rows.is_empty() && at == t.root_page,
                    "an index page in a leaf chain"
                );
                let next = resume(&rows);
                return Ok(ScanChunk::to(rows, next, reads));
            };
            match end {
                LeafEnd::Next => {}
                LeafEnd::Past => return Ok(ScanChunk::to(rows, ScanPosition::End, reads)),
                LeafEnd::Refused(row) => return Ok(ScanChunk::refused(rows, reads, row)),
                LeafEnd::RangeRefused => {
                    let next = resume(&rows);
                    return Ok(ScanChunk::to(rows, next, reads));
                }
            }
            if !self.walk_latch((at, next), ranges, &mut latch) {
                let next = resume(&rows);
                return Ok(ScanChunk::to(rows, next, reads));
            }
            at = next;
            seen += 1;
            if seen > 1 << 28 {
                return Err(extentdb_format::corrupt(at, "leaf chain loops").into());
            }
        }
        // The range ran to the end of the index: still under the last leaf's latch.
        if let Some(g) = gate.filter(|_| ranges) {
            if !g.key_range(None) {
                let next = resume(&rows);
                return Ok(ScanChunk::to(rows, next, reads));
            }
        }
        Ok(ScanChunk::to(rows, ScanPosition::End, reads))
    }

    /// Pages a read of `range` visits (its descent and its leaves), or None past `max`:
    /// a plan's estimate, so no row is taken or locked. Each leaf is judged by its last
    /// key alone (keys ascend along the chain, invariant 1): the range ends in the first
    /// leaf whose last key lies past it. A leaf split or moved meanwhile only shifts the
    /// estimate by the pages it moved.
    pub(crate) fn btree_range_leaves(
        &self,
        t: &TableEntry,
        range: &KeyRange,
        max: u64,
    ) -> Result<Option<u64>, StorageError> {
        let ki = KeyInfo::of(t);
        let mut reads = PageReads::default();
        let mut at = match &range.lower {
            Bound::Included(p) | Bound::Excluded(p) => {
                self.leaf_for(t, &ki, &borrow(p), &mut reads)?
            }
            Bound::Unbounded => self.leftmost_leaf(t, &ki, &mut reads)?,
        };
        // The descent counted the first leaf; the walk counts each one after it.
        let mut first = true;
        while !at.is_null() && reads.logical <= max {
            let step = |p: &Page| -> Result<Option<PageId>, StorageError> {
                let h = p.header()?;
                let last = match data_page::slot_count(p) {
                    0 => None,
                    n => data_page::record(p, n - 1)?,
                };
                let past = match (h.level, last) {
                    (0, Some(r)) => ki.above(&ki.key(r)?, &range.upper),
                    (0, None) => false,
                    _ => true,
                };
                Ok((!past).then_some(h.next_page))
            };
            let mut counted = PageReads::default();
            let next = self.with_tree_page(at, &mut counted, step)?;
            if !std::mem::take(&mut first) {
                reads.add(counted);
            }
            match next {
                Some(n) => at = n,
                None => break,
            }
        }
        Ok((reads.logical <= max).then_some(reads.logical))
    }

    /// `take` of leaf `at` and the leaf's next page, or None when `at` is not a leaf. A
    /// point read takes under the frame's latch (SH), the page cached as a seek's path is;
    /// a longer read takes from a copy read without caching it (a scan must not fill the
    /// pool). `take` may use the lock manager, never the pool.
    fn read_leaf(
        &self,
        at: PageId,
        reads: &mut PageReads,
        point: bool,
        take: impl FnOnce(&Page) -> Result<LeafEnd, StorageError>,
    ) -> Result<Option<(LeafEnd, PageId)>, StorageError> {
        let leaf = |p: &Page| -> Result<Option<(LeafEnd, PageId)>, StorageError> {
            let h = p.header()?;
            if h.level != 0 {
                return Ok(None);
            }
            Ok(Some((take(p)?, h.next_page)))
        };
        match point {
            true => self.with_tree_page(at, reads, leaf),
            false => leaf(&self.tree_page(at, reads)?),
        }
    }

    /// A range read's latch from leaf `at` on to leaf `next`: let go (not a key-range read:
    /// each leaf is latched alone), kept (the end of the index, whose key range is locked
    /// under it), or handed over, the next leaf's taken before the last one's goes
    /// (access.rs invariant 6). False when the next latch was busy (access.rs invariant
    /// 2): every latch is let go, the busy one waited for, and the read ends its chunk.
    fn walk_latch<'a>(
        &'a self,
        (at, next): (PageId, PageId),
        ranges: bool,
        latch: &mut Option<std::sync::MutexGuard<'a, ()>>,
    ) -> bool {
        if !ranges {
            *latch = None;
            return true;
        }
        if next.is_null() {
            return true;
        }
        match self.data.page_latches.hold_next(at, next) {
            NextLatch::Same => true,
            NextLatch::Held(g) => {
                *latch = Some(g);
                true
            }
            NextLatch::Busy => {
                drop(latch.take());
                drop(self.data.page_latches.hold(next));
                false
            }
        }
    }

    /// The leaf for key `k`, latched, found by a descent no split crossed (tree_change.rs
    /// invariant 2): a row operation acts on it under that latch.
    fn latched_leaf(
        &self,
        t: &TableEntry,
        ki: &KeyInfo,
        k: &[Option<&[u8]>],
    ) -> Result<(PageId, std::sync::MutexGuard<'_, ()>), StorageError> {
        loop {
            let seen = self.data.trees.before_descent(t.object_id);
            let leaf = self.leaf_for(t, ki, k, &mut PageReads::default())?;
            let latch = self.data.page_latches.hold(leaf);
            if self.data.trees.steady(t.object_id, seen) {
                return Ok((leaf, latch));
            }
        }
    }

    /// The leaf whose range holds key (or key prefix) `k`, read through the pool (a seek's
    /// path stays cached for the next seek), each level counted in `reads`.
    fn leaf_for(
        &self,
        t: &TableEntry,
        ki: &KeyInfo,
        k: &[Option<&[u8]>],
        reads: &mut PageReads,
    ) -> Result<PageId, StorageError> {
        let mut at = t.root_page;
        // A level's children are one level down (invariant 3): no tree is deeper than 255.
        for _ in 0..=u8::MAX as usize {
            let child = self.with_tree_page(at, reads, |p| match p.header()?.level {
                0 => Ok(None),
                _ => Self::child_for(ki, p, k).map(Some),
            })?;
            match child {
                None => return Ok(at),
                Some(c) => at = c,
            }
        }
        Err(extentdb_format::corrupt(at, "index levels loop").into())
    }

    /// The first leaf: down the leftmost child of each level.
    fn leftmost_leaf(
        &self,
        t: &TableEntry,
        ki: &KeyInfo,
        reads: &mut PageReads,
    ) -> Result<PageId, StorageError> {
        let mut at = t.root_page;
        loop {
            let p = self.tree_page(at, reads)?;
            if p.header()?.level == 0 {
                return Ok(at);
            }
            let first = data_page::record(&p, 0)?.ok_or_else(|| {
                StorageError::from(extentdb_format::corrupt(at, "empty index page"))
            })?;
            at = ki.separator(first)?.1;
        }
    }

    /// The leaf and slot action that compensate a keyed undo, with the leaf's latch held
    /// (xact.rs invariant 7): the row is found by key in its leaf under that latch.
    pub(crate) fn btree_undo_target(
        &self,
        allocation_unit_id: u64,
        undo: &KeyedUndo,
    ) -> Result<(PageId, SlotAction, std::sync::MutexGuard<'_, ()>), StorageError> {
        let t = self
            .catalog
            .tables
            .iter()
            .find(|t| t.allocation_unit_id == allocation_unit_id)
            .cloned()
            .ok_or(StorageError::AllocationUnitNotFound(allocation_unit_id))?;
        let ki = KeyInfo::of(&t);
        let (record, ghost) = match undo {
            KeyedUndo::Remove { record } | KeyedUndo::Replace { record } => (record, false),
            KeyedUndo::Unghost { record } => (record, true),
        };
        let k = ki.key(record)?;
        let (leaf, latch) = self.latched_leaf(&t, &ki, &k)?;
        let found = self.with_tree_page(leaf, &mut PageReads::default(), |p| {
            find_in_leaf(&ki, p, record, ghost)
        })?;
        let Some((slot, _)) = found else {
            return Err(StorageError::RowNotFound {
                page: leaf,
                slot: u16::MAX,
            });
        };
        let action = match undo {
            KeyedUndo::Remove { .. } => SlotAction::Remove { slot },
            KeyedUndo::Unghost { .. } => SlotAction::Unghost { slot },
            KeyedUndo::Replace { record } => SlotAction::Replace {
                slot,
                record: record.clone(),
            },
        };
        Ok((leaf, action, latch))
    }
}

/// What a step of `make_leaf_room` (a ghost cleanup, a split) did, or what it lacked.
enum Room {
    /// The change was made.
    Made,
    /// Nothing to change (a leaf without ghosts to drop).
    Unchanged,
    /// A latch was busy (access.rs invariant 2): wait for it holding none, then descend
    /// again.
    Busy(PageId),
    /// The database held exclusively: a page only a new IAM page or a growth gives, or
    /// log room past the reservations.
    Exclusive,
    /// A filegroup's growth to prepare first, holding no lock (`Needs::Growth`).
    Growth(crate::proportional_fill::GrowthPreparation),
}

/// A split's pages in the order they are installed (tree_change.rs invariant 3), and the
/// pages it took.
type SplitPages = (Vec<(PageId, Page)>, Vec<PageId>);

/// The two halves of a page being split: its tree, level and type, and the key a leaf
/// split makes room for.
struct Halves<'a> {
    ki: &'a KeyInfo,
    t: &'a TableEntry,
    level: u8,
    page_type: PageType,
    k: Option<&'a [Option<&'a [u8]>]>,
}

impl Halves<'_> {
    /// A new page of the split's level at `pid` holding `recs`.
    fn page(&self, pid: PageId, recs: &[Vec<u8>]) -> Result<Page, StorageError> {
        let mut p = Page::zeroed();
        let au = self.t.allocation_unit_id;
        data_page::format(&mut p, pid, self.page_type, au, 1, self.level);
        for (i, r) in recs.iter().enumerate() {
            data_page::insert_shifted(&mut p, i as u16, r)?;
        }
        Ok(p)
    }

    /// The separator naming half `p` at `pid`: its first key, or the key being inserted
    /// when the half is empty.
    fn separator(&self, db: &Database, pid: PageId, p: &Page) -> Result<Vec<u8>, StorageError> {
        let first: Vec<Option<Vec<u8>>> = match data_page::slot_count(p) {
            0 => self
                .k
                .unwrap_or(&[])
                .iter()
                .map(|c| c.map(|b| b.to_vec()))
                .collect(),
            _ => db.first_key_of(self.ki, p, self.level)?,
        };
        self.ki.separator_record(&borrow(&first), pid)
    }

    /// A page of the tree's unit for the split (`take_tree_page`), or what taking one lacks.
    fn take(&self, db: &Database) -> Result<Result<PageId, Room>, StorageError> {
        Ok(match db.take_tree_page(self.t)? {
            PageTake::Taken(p) => Ok(p),
            PageTake::Exclusive => Err(Room::Exclusive),
            PageTake::Growth(g) => Err(Room::Growth(g)),
        })
    }

    /// A root split: the root keeps its page and becomes the parent of two new pages
    /// holding `left` and `right`.
    fn root(
        &self,
        db: &Database,
        root: PageId,
        (left, right): (&[Vec<u8>], &[Vec<u8>]),
    ) -> Result<Result<SplitPages, Room>, StorageError> {
        let a = match self.take(db)? {
            Ok(p) => p,
            Err(room) => return Ok(Err(room)),
        };
        let b = match self.take(db)? {
            Ok(p) => p,
            Err(room) => return Ok(Err(room)),
        };
        let (mut pa, mut pb) = (self.page(a, left)?, self.page(b, right)?);
        link(&mut pa, PageId::NULL, b)?;
        link(&mut pb, a, PageId::NULL)?;
        let mut up = Page::zeroed();
        let au = self.t.allocation_unit_id;
        data_page::format(&mut up, root, PageType::Index, au, 1, self.level + 1);
        data_page::insert_shifted(&mut up, 0, &self.separator(db, a, &pa)?)?;
        data_page::insert_shifted(&mut up, 1, &self.separator(db, b, &pb)?)?;
        Ok(Ok((vec![(b, pb), (a, pa), (root, up)], vec![a, b])))
    }

    /// A split of `node` (linked `prev` and `next`) under `parent`: `node` keeps `left`,
    /// a new page right of it takes `right`, and the parent gains its separator right
    /// after `node`'s. The caller holds the latches of `node` and `next`.
    fn sibling(
        &self,
        db: &Database,
        (node, parent, (prev, next)): (PageId, PageId, (PageId, PageId)),
        (left, right): (&[Vec<u8>], &[Vec<u8>]),
    ) -> Result<Result<SplitPages, Room>, StorageError> {
        let m = match self.take(db)? {
            Ok(p) => p,
            Err(room) => return Ok(Err(room)),
        };
        let (mut l, mut r) = (self.page(node, left)?, self.page(m, right)?);
        link(&mut l, prev, m)?;
        link(&mut r, node, next)?;
        let sep = self.separator(db, m, &r)?;
        let mut images = vec![(m, r)];
        if !next.is_null() {
            let mut n = db.tree_page(next, &mut PageReads::default())?;
            let after = n.header()?.next_page;
            link(&mut n, m, after)?;
            images.push((next, n));
        }
        let mut pp = db.tree_page(parent, &mut PageReads::default())?;
        let mut slot = None;
        for (i, rec) in page_records(&pp)?.iter().enumerate() {
            if self.ki.separator(rec)?.1 == node {
                slot = Some(i as u16);
            }
        }
        let slot = slot.ok_or_else(|| {
            StorageError::from(extentdb_format::corrupt(
                parent,
                format!("no entry for child {node}"),
            ))
        })?;
        data_page::insert_shifted(&mut pp, slot + 1, &sep)?;
        images.extend([(node, l), (parent, pp)]);
        Ok(Ok((images, vec![m])))
    }
}

/// tree_change.rs invariant 3, asserted: a page the split takes is installed before any
/// page that links to it or names it as a child.
fn assert_new_pages_first(
    ki: &KeyInfo,
    images: &[(PageId, Page)],
    new_pages: &[PageId],
) -> Result<(), StorageError> {
    for (i, (pid, p)) in images.iter().enumerate() {
        let installed = |n: PageId| {
            assert!(
                !new_pages.contains(&n) || images[..i].iter().any(|(q, _)| *q == n),
                "tree_change.rs invariant 3: page {pid} names new page {n} before it is in"
            );
        };
        let h = p.header()?;
        installed(h.next_page);
        if h.level > 0 {
            for (_, r) in data_page::records(p) {
                installed(ki.separator(r?)?.1);
            }
        }
    }
    Ok(())
}

/// The compact encoding of a record of whole pages `images` (`record` makes the body).
fn images_record(
    images: &[(PageId, Page)],
    record: impl FnOnce(Vec<(PageId, Vec<u8>)>) -> LogRecordBody,
) -> Vec<u8> {
    let body = record(
        images
            .iter()
            .map(|(p, pg)| (*p, pg.bytes().to_vec()))
            .collect(),
    );
    extentdb_format::log_record::compact(body.encode())
}

/// Sets a page's sibling links.
/// A range read's bounds (`btree_range_chunk`): the range, and the key it goes on after.
struct RangeRead<'a> {
    ki: &'a KeyInfo,
    range: &'a KeyRange,
    after: Option<Vec<Option<&'a [u8]>>>,
    /// The gate locks key ranges (access.rs invariant 6).
    ranges: bool,
    /// The range is one whole key: found live, it needs no range past it (a unique
    /// index's equality, as SQL Server's singleton fetch locks only the key it finds).
    point: bool,
}

/// Where a leaf's rows left a range read.
enum LeafEnd {
    /// Read on to the next leaf.
    Next,
    /// A key past the range's end: the read is over.
    Past,
    /// The gate refused this row: the chunk ends before it.
    Refused((Rid, Vec<u8>)),
    /// The gate refused a key range (a ghost inside the range, the first live key past
    /// it): the chunk ends before it.
    RangeRefused,
}

impl RangeRead<'_> {
    /// Takes leaf `at`'s live rows inside the range and after `after` into `rows` (their
    /// bytes added to `bytes`), each through `gate`.
    fn take_leaf(
        &self,
        at: PageId,
        p: &Page,
        (rows, bytes): (&mut Vec<(Rid, Vec<u8>)>, &mut usize),
        mut gate: RowGate<'_, '_>,
    ) -> Result<LeafEnd, StorageError> {
        let ki = self.ki;
        let bounded = self.after.is_some() || *self.range != KeyRange::all();
        let first = self.first_slot(p)?;
        for (slot, r) in data_page::records_from(p, first) {
            let r = r?;
            let ghost = record::is_ghost(r);
            if bounded {
                let k = ki.record_key(r)?;
                if self.skips(&k) {
                    continue;
                }
                if ki.above(&k, &self.range.upper) {
                    // Key ranges end at the first live key past the range.
                    if self.ranges && ghost {
                        continue;
                    }
                    // A point read past its row (taken now, or before `after`).
                    if self.point && (self.after.is_some() || !rows.is_empty()) {
                        return Ok(LeafEnd::Past);
                    }
                    let refused = (gate.as_deref_mut())
                        .filter(|_| self.ranges)
                        .is_some_and(|g| !g.key_range(Some(((at, slot), r))));
                    return Ok(if refused {
                        LeafEnd::RangeRefused
                    } else {
                        LeafEnd::Past
                    });
                }
            }
            if ghost {
                let refused = (gate.as_deref_mut())
                    .filter(|g| self.ranges || g.ghosts())
                    .is_some_and(|g| !g.key_range(Some(((at, slot), r))));
                if refused {
                    return Ok(LeafEnd::RangeRefused);
                }
                continue;
            }
            if let Some(g) = gate.as_deref_mut() {
                if !g.row((at, slot), r) {
                    return Ok(LeafEnd::Refused(((at, slot), r.to_vec())));
                }
            }
            *bytes += r.len();
            rows.push(((at, slot), r.to_vec()));
        }
        Ok(LeafEnd::Next)
    }
}

impl RangeRead<'_> {
    /// True when the read passes over key `k`: at or before the key it goes on after, or
    /// below the range's lower bound. True for a prefix of a leaf's slots (invariant 1).
    fn skips(&self, k: &[Option<&[u8]>]) -> bool {
        let ki = self.ki;
        self.after
            .as_ref()
            .is_some_and(|a| ki.cmp(k, a) != Ordering::Greater)
            || ki.below(k, &self.range.lower)
    }

    /// The first slot of leaf `p` the read may take: every record before it is one the
    /// read `skips`. A binary search over the slot array (keys ascend in slot order,
    /// invariant 1), so a seek decodes a few keys of its leaf instead of every key before
    /// its own; 0 when nothing bounds the start, or when it meets an empty slot (the
    /// search needs a dense array; the scan then skips record by record).
    fn first_slot(&self, p: &Page) -> Result<u16, StorageError> {
        if self.after.is_none() && matches!(self.range.lower, Bound::Unbounded) {
            return Ok(0);
        }
        // Every slot below lo is skipped; none at or after hi is.
        let (mut lo, mut hi) = (0u16, data_page::slot_count(p));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let Some(k) = self.ki.slot_key(p, mid)? else {
                return Ok(0);
            };
            if self.skips(&k) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        assert!(
            lo == 0 || {
                let r = data_page::record(p, lo - 1).ok().flatten().expect("dense");
                self.skips(&self.ki.record_key(r).expect("decoded above"))
            },
            "the slot before the first taken is skipped"
        );
        Ok(lo)
    }
}

/// The slot range of records with key `k` in leaf `p`: where a new one would go, and the
/// live record with that key (else its first ghost) as (slot, ghost). The records before
/// `lower_bound`'s slot are not read: an insert at a leaf's end decodes a key or two, not
/// every record of the page.
fn leaf_position(
    ki: &KeyInfo,
    p: &Page,
    k: &[Option<&[u8]>],
) -> Result<(u16, Option<(u16, bool)>), StorageError> {
    // Every record before `first` has a key below `k`: the place is at `first` or after.
    let first = lower_bound(ki, p, k)?;
    let mut insert_at = first;
    let mut found = None;
    for (slot, r) in data_page::records_from(p, first) {
        let r = r?;
        match ki.cmp(&ki.key(r)?, k) {
            Ordering::Less => insert_at = slot + 1,
            Ordering::Equal => {
                insert_at = slot + 1;
                let ghost = record::is_ghost(r);
                if !ghost || found.is_none() {
                    found = Some((slot, ghost));
                }
            }
            Ordering::Greater => break,
        }
    }
    Ok((insert_at, found))
}

/// The first slot of leaf `p` whose key is not below `k`, by binary search over the slot
/// array (keys ascend in slot order, invariant 1; read in place where the key allows,
/// `slot_key`); 0 when the search meets an empty slot, so the caller reads from the first
/// record. The slot before the result, if any, holds a key below `k`.
fn lower_bound(ki: &KeyInfo, p: &Page, k: &[Option<&[u8]>]) -> Result<u16, StorageError> {
    let (mut lo, mut hi) = (0u16, data_page::slot_count(p));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let Some(m) = ki.slot_key(p, mid)? else {
            return Ok(0);
        };
        match ki.cmp(&m, k) {
            Ordering::Less => lo = mid + 1,
            _ => hi = mid,
        }
    }
    Ok(lo)
}

/// In leaf `p`, the live row with `rec`'s key, or with `ghost` the ghost that is exactly
/// `rec`: (slot, record).
fn find_in_leaf(
    ki: &KeyInfo,
    p: &Page,
    rec: &[u8],
    ghost: bool,
) -> Result<Option<(u16, Vec<u8>)>, StorageError> {
    let k = ki.key(rec)?;
    // Byte 0 holds the record type (ghost or not); the rest must match exactly.
    let same_version = |r: &[u8]| r.len() == rec.len() && r[1..] == rec[1..];
    for (slot, r) in data_page::records_from(p, lower_bound(ki, p, &k)?) {
        let r = r?;
        if record::is_ghost(r) == ghost
            && ki.cmp(&ki.key(r)?, &k) == Ordering::Equal
            && (!ghost || same_version(r))
        {
            return Ok(Some((slot, r.to_vec())));
        }
    }
    Ok(None)
}

/// What one attempt of a walk along a leaf chain came to: done, or stopped at a page whose
/// latch was busy (access.rs invariant 2), to wait for holding none and start again.
enum Attempt<T> {
    Done(T),
    Busy(PageId),
}

/// The first live record of leaf `p` at or after slot `from`: (slot, record).
fn first_live(p: &Page, from: u16) -> Result<Option<(u16, Vec<u8>)>, StorageError> {
    for (slot, r) in data_page::records(p).skip_while(|(slot, _)| *slot < from) {
        let r = r?;
        if !record::is_ghost(r) {
            return Ok(Some((slot, r.to_vec())));
        }
    }
    Ok(None)
}

/// A PRIMARY KEY violation on clustered index `t`.
fn duplicate_key(t: &TableEntry) -> StorageError {
    StorageError::DuplicateKey {
        table: t.name.clone(),
        constraint: t
            .primary_key
            .as_ref()
            .map(|p| p.0.clone())
            .unwrap_or_default(),
    }
}

fn link(p: &mut Page, prev: PageId, next: PageId) -> Result<(), StorageError> {
    let mut h = p.header()?;
    h.prev_page = prev;
    h.next_page = next;
    p.set_header(&h);
    Ok(())
}

fn borrow(k: &[Option<Vec<u8>>]) -> Vec<Option<&[u8]>> {
    k.iter().map(|c| c.as_deref()).collect()
}
