//! Scans in chunks: a table's rows read a bounded piece at a time, so the reader can let go
//! of the database between pieces (other sessions run, the client takes what was read)
//! and nothing it holds grows with the table.
//!
//! A heap goes on by page, in allocation order (the IAM chain's order, each IAM page's
//! extents ascending); a clustered index by key, after the last row it returned (so a split
//! between chunks neither loses nor repeats a row).
//!
//! Invariants:
//! 1. A chunk holds whole heap pages, or leaf rows in key order after the position, and at
//!    most about `max_bytes` of records plus one page.
//! 2. A heap scan goes on only if its allocation unit is the one it began on and no page
//!    moved since (`Database::page_moves`); otherwise `StorageError::ScanMoved` (Msg 601)
//!    rather than a row missed or returned twice. A clustered scan checks the unit only:
//!    it goes on by key wherever the pages went.
//! 3. Rows inserted behind a heap scan's position are not returned, rows ahead of it are,
//!    as in SQL Server's allocation-order scans. A chunk read with a row gate (the SQL
//!    layer's row locks) passes each row through it under the row's page latch (access.rs
//!    invariant 5) and ends at the first row it refuses (`ScanChunk::refused`); a gate of
//!    key ranges (access.rs invariant 6) also sees the keys that bound a clustered range,
//!    and one it refuses ends the chunk where it resumes before that key (`next`).
//! 4. A seek (`seek_chunk`) is a clustered scan of one key range: it descends to the
//!    range's lower bound (or to its position), returns the live rows whose keys lie in the
//!    range, in key order, and ends at the first key past the upper bound. It returns
//!    exactly the rows a full scan would return inside the range, never one outside it.
//! 5. Every chunk counts the pages it read (`PageReads`): each page visited once per visit
//!    (logical), and of those the ones not in the buffer pool before (physical).
//! 6. A heap page that reads as zeros where the PFS says allocated fails the scan (Msg 824)
//!    only if it reads as zeros again after the PFS was read. A session inserting beside
//!    the scan formats a new page of the heap (installed in the buffer pool, then marked
//!    allocated) without the page's latch: a read that missed the pool before the install
//!    finds the file's zeros, and the PFS read after it the new bit. Read again after the
//!    bit, the page shows its format (allocation.rs invariant 5; the pool lets a changed
//!    page go only written back), so zeros then are damage. Before this the scan failed
//!    with 824 on a page being formatted (`SELECT COUNT(*)` beside INSERTs, under load).

use std::ops::Bound;

use extentdb_format::{data_page, record, Page, PageId, PAGES_PER_EXTENT};

use crate::access::RowGate;
use crate::table::{is_heap_page, Rid};
use crate::{Database, StorageError};

/// Where a scan in chunks goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanPosition {
    /// Before the first row.
    Start,
    /// A heap: the next page to read.
    HeapPage(PageId),
    /// A heap: after this row (its page's rows up to its slot are passed over).
    AfterHeapRow(Rid),
    /// A clustered index: after the row of this record (its key).
    AfterRecord(Vec<u8>),
    /// Past the last row.
    End,
}

/// What a scan began on (invariant 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanOrigin {
    pub allocation_unit_id: u64,
    pub page_moves: u64,
}

/// The stored values (None for NULL) of a clustered key's leading columns, in key order:
/// a whole key or a prefix of one.
pub type KeyPrefix = Vec<Option<Vec<u8>>>;

/// A range of a clustered index's keys. A bound is a key prefix: a key is inside an
/// included bound when its leading columns equal the prefix, so `[(5), (5)]` is every key
/// whose first column is 5.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    pub lower: Bound<KeyPrefix>,
    pub upper: Bound<KeyPrefix>,
}

impl KeyRange {
    /// Every key.
    pub fn all() -> KeyRange {
        KeyRange {
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
        }
    }

    /// True when both bounds are the same included prefix of `columns` values: one key
    /// when `columns` is the whole key (SQL Server's "seeking for only one value").
    pub fn is_point(&self, columns: usize) -> bool {
        match (&self.lower, &self.upper) {
            (Bound::Included(a), Bound::Included(b)) => a == b && a.len() == columns,
            _ => false,
        }
    }
}

/// Pages a read touched: every visit (logical reads, SET STATISTICS IO's word), and the
/// visits that found the page outside the buffer pool (physical reads).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageReads {
    pub logical: u64,
    pub physical: u64,
}

impl PageReads {
    /// Counts one visit of a page that was (`cached`) or was not in the pool.
    pub(crate) fn visit(&mut self, cached: bool) {
        self.logical += 1;
        self.physical += u64::from(!cached);
    }

    pub fn add(&mut self, other: PageReads) {
        self.logical += other.logical;
        self.physical += other.physical;
    }
}

/// A row as a scan gives it: its RID and record.
pub type StoredRow = (Rid, Vec<u8>);

/// One chunk's rows, where the next chunk begins, and the pages it read.
#[derive(Debug)]
pub struct ScanChunk {
    pub rows: Vec<(Rid, Vec<u8>)>,
    pub next: ScanPosition,
    pub reads: PageReads,
    /// The row the reader's gate refused, which ended the chunk: the caller waits for it
    /// and goes on from it (`next` is then `End`).
    pub refused: Option<StoredRow>,
}

impl ScanChunk {
    /// A chunk ended by a refused row.
    pub(crate) fn refused(
        rows: Vec<(Rid, Vec<u8>)>,
        reads: PageReads,
        row: (Rid, Vec<u8>),
    ) -> ScanChunk {
        let next = ScanPosition::End;
        ScanChunk {
            rows,
            next,
            reads,
            refused: Some(row),
        }
    }

    /// A chunk that read on to `next`.
    pub(crate) fn to(rows: Vec<(Rid, Vec<u8>)>, next: ScanPosition, reads: PageReads) -> Self {
        ScanChunk {
            rows,
            next,
            reads,
            refused: None,
        }
    }
}

impl Database {
    /// What a scan of `object_id` that begins now begins on.
    pub fn scan_origin(&self, object_id: u32) -> Result<ScanOrigin, StorageError> {
        self.count_full_scan();
        self.seek_origin(object_id)
    }

    /// `scan_origin` for a read that is no full scan (an index seek's read of its index).
    pub fn seek_origin(&self, object_id: u32) -> Result<ScanOrigin, StorageError> {
        self.table_for_rows(object_id)?;
        self.origin_of(object_id)
    }

    /// What a read of `object_id` begins on, its clustered index disabled or not: a
    /// clustered rebuild's, which reads a disabled table's rows (index.rs invariant 10).
    pub(crate) fn origin_of(&self, object_id: u32) -> Result<ScanOrigin, StorageError> {
        Ok(ScanOrigin {
            allocation_unit_id: self.table_or_err(object_id)?.allocation_unit_id,
            page_moves: self.page_moves,
        })
    }

    /// Full scans of tables begun since open (a chunked scan's origin, or `scan_rows`):
    /// SQL Server's Access Methods counter "Full Scans/sec", cumulative.
    pub fn full_scans(&self) -> u64 {
        self.data
            .full_scans
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Page splits since open (a root's included): SQL Server's Access Methods counter
    /// "Page Splits/sec", cumulative.
    pub fn page_splits(&self) -> u64 {
        self.data
            .page_splits
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn count_full_scan(&self) {
        self.data
            .full_scans
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Reads rows of `object_id` from `at` until about `max_bytes` of records are taken
    /// (invariant 1); the database may be let go of between chunks.
    pub fn scan_chunk(
        &self,
        object_id: u32,
        origin: ScanOrigin,
        at: &ScanPosition,
        max_bytes: usize,
        gate: RowGate<'_, '_>,
    ) -> Result<ScanChunk, StorageError> {
        self.table_for_rows(object_id)?;
        self.chunk_of(object_id, origin, at, max_bytes, gate)
    }

    /// `scan_chunk`, the table's clustered index disabled or not (`origin_of`).
    pub(crate) fn chunk_of(
        &self,
        object_id: u32,
        origin: ScanOrigin,
        at: &ScanPosition,
        max_bytes: usize,
        gate: RowGate<'_, '_>,
    ) -> Result<ScanChunk, StorageError> {
        let t = self.table_or_err(object_id)?;
        if t.allocation_unit_id != origin.allocation_unit_id {
            return Err(StorageError::ScanMoved);
        }
        match at {
            ScanPosition::End => Ok(ScanChunk::to(
                Vec::new(),
                ScanPosition::End,
                PageReads::default(),
            )),
            _ if t.index_id == 1 => {
                let after = match at {
                    ScanPosition::AfterRecord(r) => Some(r.as_slice()),
                    _ => None,
                };
                self.btree_range_chunk(t, &KeyRange::all(), (after, max_bytes), gate)
            }
            _ => {
                if self.page_moves != origin.page_moves {
                    return Err(StorageError::ScanMoved);
                }
                let from = match at {
                    ScanPosition::HeapPage(p) => Some((*p, None)),
                    ScanPosition::AfterHeapRow((p, slot)) => Some((*p, Some(*slot))),
                    _ => None,
                };
                self.heap_scan_chunk(t.allocation_unit_id, from, max_bytes, gate)
            }
        }
    }

    /// Reads rows of clustered table `object_id` inside `range` from `at` until about
    /// `max_bytes` of records are taken (invariants 1 and 4): a seek. A heap has no key to
    /// seek on; asking it for a range is a caller's error.
    pub fn seek_chunk(
        &self,
        object_id: u32,
        origin: ScanOrigin,
        (range, at): (&KeyRange, &ScanPosition),
        max_bytes: usize,
        gate: RowGate<'_, '_>,
    ) -> Result<ScanChunk, StorageError> {
        let t = self.table_for_rows(object_id)?;
        assert_eq!(t.index_id, 1, "a seek on {}, which is a heap", t.name);
        if t.allocation_unit_id != origin.allocation_unit_id {
            return Err(StorageError::ScanMoved);
        }
        let after = match at {
            ScanPosition::End => {
                let next = ScanPosition::End;
                return Ok(ScanChunk::to(Vec::new(), next, PageReads::default()));
            }
            ScanPosition::AfterRecord(r) => Some(r.as_slice()),
            ScanPosition::Start => None,
            ScanPosition::HeapPage(p) | ScanPosition::AfterHeapRow((p, _)) => {
                panic!("a seek resumed at heap page {p}")
            }
        };
        self.btree_range_chunk(t, range, (after, max_bytes), gate)
    }

    /// A heap's pages from `from` (the first page when None; on it, the rows after the
    /// slot given) in allocation order.
    pub(crate) fn heap_scan_chunk(
        &self,
        au: u64,
        from: Option<(PageId, Option<u16>)>,
        max_bytes: usize,
        mut gate: RowGate<'_, '_>,
    ) -> Result<ScanChunk, StorageError> {
        let extents = self.extents_of(au)?;
        let mut after = from.and_then(|(_, slot)| slot);
        let (mut index, mut page_in_extent) = match from.map(|(p, _)| p) {
            None => (0, 0),
            Some(p) => {
                let e = p.page.0 / PAGES_PER_EXTENT;
                let i = extents
                    .iter()
                    .position(|(f, x)| *f == p.file.0 && x.0 == e)
                    .ok_or(StorageError::ScanMoved)?;
                (i, p.page.0 % PAGES_PER_EXTENT)
            }
        };
        let mut rows = Vec::new();
        let mut bytes = 0usize;
        let mut reads = PageReads::default();
        while index < extents.len() {
            if bytes >= max_bytes {
                let (file, extent) = extents[index];
                let next = PageId::new(file, extent.first_page().0 + page_in_extent);
                return Ok(ScanChunk::to(rows, ScanPosition::HeapPage(next), reads));
            }
            let (file, extent) = extents[index];
            let pid = PageId::new(file, extent.first_page().0 + page_in_extent);
            reads.visit(self.data.pool.contains(pid));
            let page = (pid, after.take());
            let (taken, refused) = self.heap_page_rows(au, page, &mut rows, gate.as_deref_mut())?;
            if let Some(row) = refused {
                return Ok(ScanChunk::refused(rows, reads, row));
            }
            bytes += taken;
            page_in_extent += 1;
            if page_in_extent == PAGES_PER_EXTENT {
                page_in_extent = 0;
                index += 1;
            }
        }
        Ok(ScanChunk::to(rows, ScanPosition::End, reads))
    }

    /// Heap page `pid` as a scan reads it (`peek`, not cached by the read). Zeros where
    /// the PFS says allocated are damage (table.rs invariant 4) only when a read after the
    /// PFS still finds them (invariant 6).
    pub(crate) fn heap_page_as_read(&self, pid: PageId) -> Result<Page, StorageError> {
        let p = self.data.pool.peek(&self.data_files, pid)?;
        if !p.is_unformatted() || !self.page_allocated(pid)? {
            return Ok(p);
        }
        // The bit is set once the page's format is in the pool (allocation.rs invariant 5),
        // and the pool lets a changed page go only written back: read now, the page shows
        // the format that may have come between the first read and the PFS's.
        let again = self.data.pool.peek(&self.data_files, pid)?;
        if again.is_unformatted() {
            return Err(self.incorrect_page_id(pid, PageId::NULL));
        }
        Ok(again)
    }

    /// Appends the live rows of heap page `pid` (if it is one of unit `au`'s) after slot
    /// `after` (all when None) that `gate` lets through, holding the page's latch meanwhile
    /// when there is a gate (access.rs invariant 5); returns their bytes, and the row the
    /// gate refused, which ends the page. A zero page the PFS calls allocated is damage
    /// (table.rs invariant 4).
    fn heap_page_rows(
        &self,
        au: u64,
        (pid, after): (PageId, Option<u16>),
        rows: &mut Vec<(Rid, Vec<u8>)>,
        mut gate: RowGate<'_, '_>,
    ) -> Result<(usize, Option<StoredRow>), StorageError> {
        let _latch = gate.is_some().then(|| self.data.page_latches.hold(pid));
        let p = self.heap_page_as_read(pid)?;
        if !is_heap_page(&p, au) {
            return Ok((0, None));
        }
        let mut bytes = 0;
        for (slot, rec) in data_page::records(&p) {
            let rec = rec?;
            if after.is_some_and(|a| slot <= a) {
                continue;
            }
            if record::is_ghost(rec) {
                // A ghost whose delete may still roll back (access.rs `Gate::ghosts`) ends
                // the page as a refused row: the caller waits for it and reads it again.
                let refused = (gate.as_deref_mut())
                    .filter(|g| g.ghosts())
                    .is_some_and(|g| !g.key_range(Some(((pid, slot), rec))));
                if refused {
                    return Ok((bytes, Some(((pid, slot), rec.to_vec()))));
                }
                continue;
            }
            if let Some(g) = gate.as_deref_mut() {
                if !g.row((pid, slot), rec) {
                    return Ok((bytes, Some(((pid, slot), rec.to_vec()))));
                }
            }
            bytes += rec.len();
            rows.push(((pid, slot), rec.to_vec()));
        }
        Ok((bytes, None))
    }
}
