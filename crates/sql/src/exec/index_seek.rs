//! Index seeks: the key ranges of a nonclustered index (seek.rs finds them in WHERE), read a
//! chunk at a time, each index record's row looked up in its table (storage's lookup.rs,
//! SQL Server's Key Lookup or RID Lookup) and locked there as a read of that row locks it.
//!
//! Invariants:
//! 1. The index is read without row locks; its records are candidates (storage lookup.rs
//!    invariant 1). A locked read also takes the index's ghosts as candidates: a key an
//!    open transaction moved away from may come back when it rolls back, and the lookup
//!    waits for the row's lock before it decides. The row a lookup gives is locked (and
//!    waited for) exactly as a clustered seek of it would lock it, and the full WHERE is
//!    evaluated on it afterwards (seek.rs invariant 1).
//! 2. Memory is bounded: at most about `INDEX_BYTES` of index records are held, and a
//!    chunk looks up at most `LOOKUPS` of them.
//! 3. Key-range locking (SERIALIZABLE, HOLDLOCK) never reads through an index: the ranges
//!    it locks are the clustered index's (locking.rs invariant 5), so such a read scans or
//!    seeks the table instead (`Chunks::locked`).
//! 4. A session waits for a lock only with no database held (locking.rs invariant 1).
//! 5. Each row comes back once per seek: candidates with one identity (storage's
//!    `candidate_identity`: a ghost and the live record of one row at one key) are looked
//!    up once, the live one where the chunk has it (`take_candidates`).

use std::collections::VecDeque;

use extentdb_storage::access::Gate;
use extentdb_storage::lookup::Lookup;
use extentdb_storage::scan::{KeyRange, PageReads, ScanOrigin, ScanPosition, StoredRow};
use extentdb_storage::table::Rid;
use extentdb_storage::Database;

use super::errors::map_data;
use super::locking::RowLocking;
use super::tables::{ChunkGate, StoredRows, TableRef};
use crate::messages::SqlError;

/// Bytes of index records one read of the index takes at most (invariant 2).
const INDEX_BYTES: usize = 32 << 10;
/// Index records one chunk looks up at most (invariant 2).
const LOOKUPS: usize = 256;

/// A seek of nonclustered index `index_oid` (seek.rs chooses it): its key ranges, ascending
/// and disjoint.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct IndexSeek {
    pub index_oid: u32,
    pub ranges: Vec<KeyRange>,
    /// The rows it is estimated to give (cardinality.rs), SHOWPLAN_ALL's EstimateRows;
    /// None without the table's cardinality.
    pub estimate: Option<f64>,
}

/// An index seek under way: where the index read is, and the records read but not yet
/// looked up.
pub(super) struct IndexRead {
    seek: IndexSeek,
    origin: ScanOrigin,
    range: usize,
    at: ScanPosition,
    candidates: VecDeque<Vec<u8>>,
    /// The identities of the last chunk's candidates (`take_candidates`): one chunk's
    /// worth, so memory stays bounded (invariant 2).
    identities: std::collections::HashSet<Vec<u8>>,
}

/// The index's records a read meets: its live ones, and (for a locked read) its ghosts
/// (invariant 1).
struct Candidates {
    ghosts: bool,
    found: Vec<Vec<u8>>,
}

impl Gate for Candidates {
    fn row(&mut self, _: Rid, _: &[u8]) -> bool {
        true
    }

    fn ghosts(&self) -> bool {
        self.ghosts
    }

    fn key_range(&mut self, next: Option<(Rid, &[u8])>) -> bool {
        if let Some((_, rec)) = next {
            self.found.push(rec.to_vec());
        }
        true
    }
}

/// What a lookup under a database guard left to do once the guard is gone.
enum Wait {
    /// A key range (a ghost at the row's key) to wait for; then the lookup again.
    Range(extentdb_storage::lock::Resource),
    /// The row's lock to wait for; then the row read again.
    Row(StoredRow),
}

impl IndexRead {
    pub fn new(
        db: &Database,
        seek: IndexSeek,
    ) -> Result<IndexRead, extentdb_storage::StorageError> {
        Ok(IndexRead {
            origin: db.seek_origin(seek.index_oid)?,
            seek,
            range: 0,
            at: ScanPosition::Start,
            candidates: VecDeque::new(),
            identities: Default::default(),
        })
    }

    /// Moves past ranges read to their end; false when the index holds nothing more.
    fn more(&mut self) -> bool {
        while self.at == ScanPosition::End && self.range < self.seek.ranges.len() {
            self.range += 1;
            self.at = ScanPosition::Start;
        }
        self.range < self.seek.ranges.len()
    }

    /// Reads index records until some are held or the ranges end.
    fn fill(
        &mut self,
        db: &Database,
        ghosts: bool,
    ) -> Result<PageReads, extentdb_storage::StorageError> {
        let mut reads = PageReads::default();
        while self.candidates.is_empty() && self.more() {
            let mut gate = Candidates {
                ghosts,
                found: Vec::new(),
            };
            let range = &self.seek.ranges[self.range];
            let chunk = db.seek_chunk(
                self.seek.index_oid,
                self.origin,
                (range, &self.at),
                INDEX_BYTES,
                Some(&mut gate),
            )?;
            reads.add(chunk.reads);
            self.at = chunk.next;
            let live = chunk.rows.into_iter().map(|(_, r)| r);
            self.take_candidates(db, live.chain(gate.found))?;
        }
        Ok(reads)
    }

    /// Holds `found` (the chunk's live records first, then its ghosts) as candidates, each
    /// identity once (storage lookup.rs invariant 3): a ghost whose row and key a live
    /// record of the chunk, or a candidate of the chunk before, already stands for is
    /// dropped, so no row is looked up, and given, twice.
    fn take_candidates(
        &mut self,
        db: &Database,
        found: impl Iterator<Item = Vec<u8>>,
    ) -> Result<(), extentdb_storage::StorageError> {
        let before = std::mem::take(&mut self.identities);
        for irec in found {
            let id = db.candidate_identity(self.seek.index_oid, &irec)?;
            if before.contains(&id) || !self.identities.insert(id) {
                continue;
            }
            self.candidates.push_back(irec);
        }
        Ok(())
    }

    /// The next chunk of base rows (with, per row, whether its lock is this statement's),
    /// None past the last. `held`: the caller holds the database (no locks then).
    pub fn next_chunk(
        &mut self,
        t: &TableRef,
        base: ScanOrigin,
        locking: Option<&RowLocking>,
        held: Option<&Database>,
    ) -> Result<Option<(StoredRows, Vec<bool>)>, Vec<SqlError>> {
        let locking = locking.filter(|l| l.locks_rows());
        let mut reads = PageReads::default();
        let batch: Vec<Vec<u8>> = {
            let guard = match held {
                Some(_) => None,
                None => Some(t.db.read().unwrap()),
            };
            let db = held.or(guard.as_deref()).expect("a database");
            let r = self.fill(db, locking.is_some());
            reads.add(r.map_err(|e| map_data(&e, &t.db_name))?);
            let n = self.candidates.len().min(LOOKUPS);
            self.candidates.drain(..n).collect()
        };
        if batch.is_empty() {
            return Ok(None);
        }
        let found = match (locking, held) {
            (Some(l), None) => self.locked_lookups(t, base, l, &batch, &mut reads)?,
            (None, Some(db)) => self.lookups(t, db, base, &batch, &mut reads)?,
            (None, None) => {
                let db = t.db.read().unwrap();
                self.lookups(t, &db, base, &batch, &mut reads)?
            }
            (Some(_), Some(_)) => unreachable!("locked reads let the database go"),
        };
        let mut io = t.io.get();
        io.reads.add(reads);
        t.io.set(io);
        Ok(Some(found))
    }

    /// Lookups without locks: each candidate's row if it still stands for it.
    fn lookups(
        &self,
        t: &TableRef,
        db: &Database,
        base: ScanOrigin,
        batch: &[Vec<u8>],
        reads: &mut PageReads,
    ) -> Result<(StoredRows, Vec<bool>), Vec<SqlError>> {
        let mut rows = Vec::new();
        for irec in batch {
            let (found, r) = db
                .lookup(self.seek.index_oid, base, irec, None)
                .map_err(|e| map_data(&e, &t.db_name))?;
            reads.add(r);
            if let Lookup::Row(row) = found {
                rows.push(row);
            }
        }
        let fresh = vec![false; rows.len()];
        Ok((rows, fresh))
    }

    /// Lookups that lock each row as a read of it locks it, waiting with no database held
    /// (invariants 1 and 4).
    fn locked_lookups(
        &self,
        t: &TableRef,
        base: ScanOrigin,
        l: &RowLocking,
        batch: &[Vec<u8>],
        reads: &mut PageReads,
    ) -> Result<(StoredRows, Vec<bool>), Vec<SqlError>> {
        let (mut rows, mut fresh) = (Vec::new(), Vec::new());
        let mut i = 0;
        while i < batch.len() {
            let wait = {
                let db = t.db.read().unwrap();
                let mut wait = None;
                while i < batch.len() && wait.is_none() {
                    let mut gate = ChunkGate::new(l, true);
                    let (found, r) = db
                        .lookup(self.seek.index_oid, base, &batch[i], Some(&mut gate))
                        .map_err(|e| map_data(&e, &t.db_name))?;
                    reads.add(r);
                    let (locks, failure, pending) = gate.into_parts();
                    if let Some(e) = failure {
                        return Err(e);
                    }
                    wait = match (pending, found) {
                        (Some(r), _) => Some(Wait::Range(r)),
                        (None, Lookup::Refused(row)) => Some(Wait::Row(row)),
                        (None, Lookup::Row(row)) => {
                            rows.push(row);
                            fresh.push(locks.fresh.last().copied().unwrap_or(false));
                            None
                        }
                        (None, Lookup::Stale(Some((rid, rec)))) => {
                            let f = locks.fresh.last().copied().unwrap_or(false);
                            l.not_needed(rid, &rec, f)?;
                            None
                        }
                        (None, Lookup::Stale(None)) => None,
                    };
                    if !matches!(wait, Some(Wait::Range(_))) {
                        i += 1;
                    }
                }
                wait
            };
            match wait {
                None => {}
                Some(Wait::Range(r)) => l.wait_key_range(r)?,
                Some(Wait::Row((rid, rec))) => {
                    let Some(f) = l.wait_row(rid, &rec, true)? else {
                        continue;
                    };
                    let irec = &batch[i - 1];
                    let (found, r) =
                        t.db.read()
                            .unwrap()
                            .lookup(self.seek.index_oid, base, irec, None)
                            .map_err(|e| map_data(&e, &t.db_name))?;
                    reads.add(r);
                    let row = match found {
                        Lookup::Row(row) => Some(row),
                        _ => None,
                    };
                    l.read_done(rid, &rec, f, row.is_none())?;
                    if let Some(row) = row {
                        rows.push(row);
                        fresh.push(f);
                    }
                }
            }
        }
        Ok((rows, fresh))
    }
}
