//! Bookmark lookups: the base row a nonclustered index record names by its row locator (the
//! clustering key, or a heap row's RID: index.rs), read as a seek of that one row reads it,
//! so the reader's gate locks it under its page's latch (access.rs invariant 5).
//!
//! Invariants:
//! 1. An index record read is a candidate, not an answer: the index is read without row
//!    locks, and the row it names may have changed since (an open transaction's change, or
//!    one committed after the index record was read). A lookup gives the base row only when
//!    the row's projection (index.rs `project`) has the index record's B-tree key now;
//!    otherwise the row is `Stale`. So a base row comes back at most once per index key it
//!    has, and never through an index record it no longer matches (a ghost of its old key,
//!    a RID reused by another row).
//! 2. A heap lookup goes on only if no page moved since the reader's origin (scan.rs
//!    invariant 2): a RID read before a move names another row after it
//!    (`StorageError::ScanMoved`, Msg 601). A clustered lookup seeks by key wherever the
//!    pages went.
//! 3. Invariant 1 gives a row at most once per index key; two index records can hold one
//!    key of one row (a ghost beside the live record an update of an INCLUDE column left,
//!    or a row deleted and inserted again), so a reader taking ghosts looks up each
//!    `candidate_identity` once: the live record's where there is one.

use std::ops::Bound;

use extentdb_format::catalog::TableEntry;
use extentdb_format::{corrupt, data_page, record};

use crate::access::RowGate;
use crate::index::{key_matches, rid_of_bytes};
use crate::scan::{KeyRange, PageReads, ScanOrigin, StoredRow};
use crate::table::is_heap_page;
use crate::{Database, StorageError};

/// What a bookmark lookup found.
#[derive(Debug)]
pub enum Lookup {
    /// The live base row the index record stands for.
    Row(StoredRow),
    /// No live row has the index record's key now: none is there (a ghost, deleted), or
    /// the one there (given, passed by the gate) projects to another key (invariant 1).
    Stale(Option<StoredRow>),
    /// The gate refused the row (its lock must wait): nothing was taken.
    Refused(StoredRow),
}

impl Database {
    /// What index record `irec` of index `index_oid` stands for: its B-tree key's and its
    /// row locator's stored values, each length-prefixed (NULL as 0xFFFF). Two records of
    /// one index with equal identities are versions of one row at one key: a ghost and
    /// the live record an update of an INCLUDE column left beside it, or a row deleted and
    /// inserted again. A reader that takes ghosts as candidates looks such a row up once
    /// (invariant 3).
    pub fn candidate_identity(&self, index_oid: u32, irec: &[u8]) -> Result<Vec<u8>, StorageError> {
        let ix = self.table_or_err(index_oid)?;
        let info = ix.index_of.as_ref().expect("lookup.rs: an index entry");
        let base = self.table_or_err(info.table_object_id)?;
        let cols = record::decode(&crate::table::layouts(ix), irec)?;
        let locator: Vec<u16> = match (&base.primary_key, base.index_id) {
            (Some((_, ids)), 1) => ids.clone(),
            _ => vec![0],
        };
        let locator = info
            .sources
            .iter()
            .enumerate()
            .filter(|(_, s)| locator.contains(s))
            .map(|(i, _)| i);
        let mut out = Vec::new();
        for at in (0..info.key_columns as usize).chain(locator) {
            match cols.get(at).copied().flatten() {
                Some(v) => {
                    out.extend_from_slice(&(v.len() as u16).to_le_bytes());
                    out.extend_from_slice(v);
                }
                None => out.extend_from_slice(&u16::MAX.to_le_bytes()),
            }
        }
        Ok(out)
    }

    /// The base row index record `irec` of index `index_oid` names, read through `gate`
    /// as a point seek of it would be (a ghost at its key included), with the pages read.
    /// `base_origin` is the base table's scan origin (invariant 2).
    pub fn lookup(
        &self,
        index_oid: u32,
        base_origin: ScanOrigin,
        irec: &[u8],
        gate: RowGate<'_, '_>,
    ) -> Result<(Lookup, PageReads), StorageError> {
        let ix = self.table_or_err(index_oid)?;
        let info = ix.index_of.as_ref().expect("lookup.rs: an index entry");
        let base = self.table_or_err(info.table_object_id)?;
        if base.allocation_unit_id != base_origin.allocation_unit_id {
            return Err(StorageError::ScanMoved);
        }
        let cols = record::decode(&crate::table::layouts(ix), irec)?;
        let (found, reads) = if base.index_id == 1 {
            self.clustered_lookup(ix, base, &cols, gate)?
        } else {
            if self.page_moves != base_origin.page_moves {
                return Err(StorageError::ScanMoved);
            }
            let at = info.sources.iter().position(|&s| s == 0);
            let rid = at.and_then(|p| cols[p]).and_then(rid_of_bytes);
            let rid =
                rid.ok_or_else(|| corrupt(ix.root_page, "an index record without its RID"))?;
            self.heap_lookup(base, rid, gate)?
        };
        let row = match found {
            Lookup::Row(row) => row,
            other => return Ok((other, reads)),
        };
        match key_matches(ix, base, (row.0, &row.1), irec)? {
            true => Ok((Lookup::Row(row), reads)),
            false => Ok((Lookup::Stale(Some(row)), reads)),
        }
    }

    /// The clustered row whose key the index record's locator columns `cols` hold.
    fn clustered_lookup(
        &self,
        ix: &TableEntry,
        base: &TableEntry,
        cols: &[Option<&[u8]>],
        gate: RowGate<'_, '_>,
    ) -> Result<(Lookup, PageReads), StorageError> {
        let info = ix.index_of.as_ref().expect("an index entry");
        let ids = &base.primary_key.as_ref().expect("a clustered key").1;
        let mut key = Vec::with_capacity(ids.len());
        for id in ids {
            let at = info.sources.iter().position(|s| s == id);
            let at = at.ok_or_else(|| corrupt(ix.root_page, "an index without its locator"))?;
            key.push(cols[at].map(<[u8]>::to_vec));
        }
        let range = KeyRange {
            lower: Bound::Included(key.clone()),
            upper: Bound::Included(key),
        };
        let chunk = self.btree_range_chunk(base, &range, (None, usize::MAX), gate)?;
        let found = match (chunk.refused, chunk.rows.into_iter().next()) {
            (Some(row), _) => Lookup::Refused(row),
            (None, Some(row)) => Lookup::Row(row),
            (None, None) => Lookup::Stale(None),
        };
        Ok((found, chunk.reads))
    }

    /// Heap row `rid` of `base`, under its page's latch when there is a gate; a ghost
    /// there passes the gate as a scan passes it (scan.rs `heap_page_rows`).
    fn heap_lookup(
        &self,
        base: &TableEntry,
        rid: crate::table::Rid,
        gate: RowGate<'_, '_>,
    ) -> Result<(Lookup, PageReads), StorageError> {
        let (pid, slot) = rid;
        let mut reads = PageReads::default();
        let _latch = gate.is_some().then(|| self.data.page_latches.hold(pid));
        reads.visit(self.data.pool.contains(pid));
        let p = self.heap_page_as_read(pid)?;
        if !is_heap_page(&p, base.allocation_unit_id) {
            return Ok((Lookup::Stale(None), reads));
        }
        let Some(rec) = data_page::record(&p, slot)? else {
            return Ok((Lookup::Stale(None), reads));
        };
        let row = (rid, rec.to_vec());
        let g = gate;
        if record::is_ghost(rec) {
            let refused = g
                .filter(|g| g.ghosts())
                .is_some_and(|g| !g.key_range(Some((rid, rec))));
            let found = match refused {
                true => Lookup::Refused(row),
                false => Lookup::Stale(None),
            };
            return Ok((found, reads));
        }
        if let Some(g) = g {
            if !g.row(rid, rec) {
                return Ok((Lookup::Refused(row), reads));
            }
        }
        Ok((Lookup::Row(row), reads))
    }
}

impl Database {
    /// Pages a seek of `ranges` in B-tree `object_id` reads, counted up to `max`: Some(n)
    /// when it reads n <= max, None past `max` (the read stops there). How much of an index
    /// a seek covers, for the SQL layer's choice between the index and the table.
    pub fn range_pages(
        &self,
        object_id: u32,
        ranges: &[KeyRange],
        max: u64,
    ) -> Result<Option<u64>, StorageError> {
        let t = self.table_or_err(object_id)?;
        assert!(t.primary_key.is_some(), "range pages of {}, a heap", t.name);
        let mut pages = 0u64;
        for range in ranges {
            match self.btree_range_leaves(t, range, max.saturating_sub(pages))? {
                Some(n) => pages += n,
                None => return Ok(None),
            }
        }
        Ok((pages <= max).then_some(pages))
    }

    /// Pages the extents of table or index `object_id` reserve (its IAM chain's extents).
    pub fn reserved_pages(&self, object_id: u32) -> Result<u64, StorageError> {
        let au = self.table_or_err(object_id)?.allocation_unit_id;
        Ok(self.extent_count(au)? * extentdb_format::PAGES_PER_EXTENT as u64)
    }
}
