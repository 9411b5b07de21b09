//! Log records of transactions and data pages. See FORMAT.md, "Log records".
//!
//! A record is one payload entry of a log block; its first byte is its type. Page changes
//! are physiological: they name a page and a slot and say what happens to the record in
//! that slot, so redo is "apply where the page's LSN is older than the record's".
//!
//! Each row change carries both its redo action and the action that undoes it. Undo writes
//! a compensation record (CLR) whose redo action is that undo action and whose `undo_next`
//! is the change's `prev`: a CLR is never undone, so an interrupted rollback or recovery
//! resumes where it stopped and never undoes a change twice.
//!
//! Invariants:
//! 1. `decode(encode(r)) == r` for every record; decoding bytes never panics.
//! 2. Every transactional record carries the LSN of the same transaction's previous record
//!    (`Lsn::ZERO` for the first after BEGIN's), so a transaction's records form a chain.

use crate::codec::{Reader, Writer};
use crate::{corrupt, FormatError, Lsn, PageId, PAGE_SIZE};

/// Record types (byte 0). Type 1, the page image, is `log::REC_PAGE_IMAGE`.
pub const REC_BEGIN_XACT: u8 = 2;
pub const REC_COMMIT_XACT: u8 = 3;
pub const REC_ABORT_XACT: u8 = 4;
pub const REC_FORMAT_PAGE: u8 = 5;
pub const REC_ROW_CHANGE: u8 = 6;
pub const REC_COMPENSATION: u8 = 7;
pub const REC_PAGE_IMAGES: u8 = 8;
pub const REC_INDEX_CHANGE: u8 = 9;
/// Any other record, LZ4-compressed: type, u32 length of the record, the compressed bytes.
pub const REC_COMPRESSED: u8 = 10;
/// A piece of the catalog as `save_catalog` wrote it (for RESTORE LOG's redo).
pub const REC_CATALOG: u8 = 11;
/// A clustered index's root page moved (SHRINKFILE EMPTYFILE, REBALANCE).
pub const REC_ROOT_MOVE: u8 = 12;

/// Records shorter than this are logged as they are.
const COMPRESS_FROM_BYTES: usize = 256;

/// The record as it goes into the log: compressed (type 10) when that saves a quarter or
/// more, as it does for pages and for rows of padded CHAR columns; else unchanged. SQL
/// Server logs such rows whole; compressing them cuts log bytes, and so the time a commit's
/// flush and a bulk load's log writes take, without changing any page.
pub fn compact(record: Vec<u8>) -> Vec<u8> {
    if record.len() < COMPRESS_FROM_BYTES || record.first() == Some(&REC_COMPRESSED) {
        return record;
    }
    let packed = lz4_flex::block::compress(&record);
    if (packed.len() + 5) * 4 > record.len() * 3 {
        return record;
    }
    let mut out = Vec::with_capacity(packed.len() + 5);
    out.push(REC_COMPRESSED);
    out.extend_from_slice(&(record.len() as u32).to_le_bytes());
    out.extend_from_slice(&packed);
    out
}

/// The record as it was before `compact` (borrowed when it was not compressed). Corrupt
/// compressed bytes are an error, never a panic.
pub fn expand(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, FormatError> {
    if bytes.first() != Some(&REC_COMPRESSED) {
        return Ok(std::borrow::Cow::Borrowed(bytes));
    }
    let bad = |why: &str| corrupt(PageId::NULL, format!("compressed log record: {why}"));
    let len = bytes
        .get(1..5)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
        .ok_or_else(|| bad("truncated header"))?;
    if len > crate::log::MAX_BLOCK_PAYLOAD * 8 {
        return Err(bad("implausible length"));
    }
    let raw = lz4_flex::block::decompress(&bytes[5..], len).map_err(|e| bad(&e.to_string()))?;
    if raw.len() != len || raw.first() == Some(&REC_COMPRESSED) {
        return Err(bad("length or nesting"));
    }
    Ok(std::borrow::Cow::Owned(raw))
}

/// A transaction id (sys.dm_tran_* transaction_id): unique within a database, increasing.
pub type XactId = u64;

/// What happens to one slot of a data or index page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotAction {
    /// The record goes into `slot` (a new slot at the end, or an empty one).
    Insert { slot: u16, record: Vec<u8> },
    /// The slot is emptied.
    Remove { slot: u16 },
    /// The record in `slot` becomes a ghost (deleted, kept until its transaction ends).
    Ghost { slot: u16 },
    /// The ghost in `slot` becomes a live record again.
    Unghost { slot: u16 },
    /// The record in `slot` is replaced by `record`.
    Replace { slot: u16, record: Vec<u8> },
}

impl SlotAction {
    pub fn slot(&self) -> u16 {
        match self {
            SlotAction::Insert { slot, .. }
            | SlotAction::Remove { slot }
            | SlotAction::Ghost { slot }
            | SlotAction::Unghost { slot }
            | SlotAction::Replace { slot, .. } => *slot,
        }
    }
}

/// How a change to a B-tree page is undone: found again by its key (the row may have moved
/// to another page through a split since), then changed physically.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyedUndo {
    /// Remove the (live) record with this record's key.
    Remove { record: Vec<u8> },
    /// Turn the ghost with this record's key live again.
    Unghost { record: Vec<u8> },
    /// Put `record` back in place of the live record with its key.
    Replace { record: Vec<u8> },
}

impl KeyedUndo {
    pub fn record(&self) -> &[u8] {
        match self {
            KeyedUndo::Remove { record }
            | KeyedUndo::Unghost { record }
            | KeyedUndo::Replace { record } => record,
        }
    }
}

/// One decoded log record (other than a page image).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogRecordBody {
    BeginXact {
        xact: XactId,
    },
    CommitXact {
        xact: XactId,
        prev: Lsn,
        /// When it committed, µs since the Unix epoch (RESTORE LOG ... WITH STOPAT); 0 in
        /// records written before the field existed.
        time_us: i64,
    },
    /// The end of a rollback: every change of the transaction has been compensated.
    AbortXact {
        xact: XactId,
        prev: Lsn,
    },
    /// A page newly given to an allocation unit, formatted empty. Redo only.
    FormatPage {
        page: PageId,
        page_type: u8,
        allocation_unit_id: u64,
        index_id: u16,
        level: u8,
    },
    /// A change to one slot of one page by a transaction.
    RowChange {
        xact: XactId,
        prev: Lsn,
        page: PageId,
        redo: SlotAction,
        undo: SlotAction,
    },
    /// Several pages' whole images written as one atomic change (a B-tree page split):
    /// redo only, never undone, all or none of it in the log.
    PageImages {
        images: Vec<(PageId, Vec<u8>)>,
    },
    /// A clustered index's root moved from page `from` to page `to`: the images (the root's
    /// copy at `to`, `from` emptied) installed as one atomic step, and the catalog's root
    /// pointer of table `object_id`, which lives outside the log, changed after. Redo
    /// installs the images and recovery then makes the catalog point at `to` if it still
    /// points at `from` (a crash between the two), so the move is whole or not at all.
    RootMove {
        object_id: u32,
        from: PageId,
        to: PageId,
        images: Vec<(PageId, Vec<u8>)>,
    },
    /// A change to one slot of a B-tree page by a transaction, undone by key.
    IndexChange {
        xact: XactId,
        prev: Lsn,
        page: PageId,
        allocation_unit_id: u64,
        redo: SlotAction,
        undo: KeyedUndo,
    },
    /// A piece of a catalog the database saved (catalog pages are written outside the log,
    /// durable by their own protocol, so crash recovery skips this record): the whole
    /// blob is `total` bytes, this piece starts at `offset`; `pages` is the chain it went
    /// to. RESTORE LOG puts the catalog back from the pieces, so files added, grown or
    /// removed and tables created after a full backup come back with the log.
    CatalogImage {
        pages: Vec<PageId>,
        total: u32,
        offset: u32,
        bytes: Vec<u8>,
    },
    /// The undo of a row change (a CLR): redo only; `undo_next` is the next record of the
    /// transaction still to undo.
    Compensation {
        xact: XactId,
        prev: Lsn,
        undo_next: Lsn,
        page: PageId,
        redo: SlotAction,
    },
}

impl LogRecordBody {
    /// The transaction a record belongs to, if any.
    pub fn xact(&self) -> Option<XactId> {
        match self {
            LogRecordBody::BeginXact { xact }
            | LogRecordBody::CommitXact { xact, .. }
            | LogRecordBody::AbortXact { xact, .. }
            | LogRecordBody::RowChange { xact, .. }
            | LogRecordBody::IndexChange { xact, .. }
            | LogRecordBody::Compensation { xact, .. } => Some(*xact),
            LogRecordBody::FormatPage { .. }
            | LogRecordBody::PageImages { .. }
            | LogRecordBody::RootMove { .. }
            | LogRecordBody::CatalogImage { .. } => None,
        }
    }

    /// The page a record changes, if any.
    pub fn page(&self) -> Option<PageId> {
        match self {
            LogRecordBody::FormatPage { page, .. }
            | LogRecordBody::RowChange { page, .. }
            | LogRecordBody::IndexChange { page, .. }
            | LogRecordBody::Compensation { page, .. } => Some(*page),
            _ => None,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        match self {
            LogRecordBody::BeginXact { xact } => {
                w.u8(REC_BEGIN_XACT);
                w.u64(*xact);
            }
            LogRecordBody::CommitXact {
                xact,
                prev,
                time_us,
            } => {
                w.u8(REC_COMMIT_XACT);
                w.u64(*xact);
                put_lsn(&mut w, *prev);
                w.u64(*time_us as u64);
            }
            LogRecordBody::CatalogImage {
                pages,
                total,
                offset,
                bytes,
            } => {
                w.u8(REC_CATALOG);
                w.u32(*total);
                w.u32(*offset);
                w.u16(pages.len() as u16);
                for p in pages {
                    w.page_id(*p);
                }
                w.u32(bytes.len() as u32);
                w.raw(bytes);
            }
            LogRecordBody::AbortXact { xact, prev } => {
                w.u8(REC_ABORT_XACT);
                w.u64(*xact);
                put_lsn(&mut w, *prev);
            }
            LogRecordBody::FormatPage {
                page,
                page_type,
                allocation_unit_id,
                index_id,
                level,
            } => {
                w.u8(REC_FORMAT_PAGE);
                w.page_id(*page);
                w.u8(*page_type);
                w.u64(*allocation_unit_id);
                w.u16(*index_id);
                w.u8(*level);
            }
            LogRecordBody::RowChange {
                xact,
                prev,
                page,
                redo,
                undo,
            } => {
                w.u8(REC_ROW_CHANGE);
                w.u64(*xact);
                put_lsn(&mut w, *prev);
                w.page_id(*page);
                put_action(&mut w, redo);
                put_action(&mut w, undo);
            }
            LogRecordBody::PageImages { images } => {
                w.u8(REC_PAGE_IMAGES);
                put_images(&mut w, images);
            }
            LogRecordBody::RootMove {
                object_id,
                from,
                to,
                images,
            } => {
                w.u8(REC_ROOT_MOVE);
                w.u32(*object_id);
                w.page_id(*from);
                w.page_id(*to);
                put_images(&mut w, images);
            }
            LogRecordBody::IndexChange {
                xact,
                prev,
                page,
                allocation_unit_id,
                redo,
                undo,
            } => {
                w.u8(REC_INDEX_CHANGE);
                w.u64(*xact);
                put_lsn(&mut w, *prev);
                w.page_id(*page);
                w.u64(*allocation_unit_id);
                put_action(&mut w, redo);
                let kind = match undo {
                    KeyedUndo::Remove { .. } => 1u8,
                    KeyedUndo::Unghost { .. } => 2,
                    KeyedUndo::Replace { .. } => 3,
                };
                w.u8(kind);
                w.u16(undo.record().len() as u16);
                w.raw(undo.record());
            }
            LogRecordBody::Compensation {
                xact,
                prev,
                undo_next,
                page,
                redo,
            } => {
                w.u8(REC_COMPENSATION);
                w.u64(*xact);
                put_lsn(&mut w, *prev);
                put_lsn(&mut w, *undo_next);
                w.page_id(*page);
                put_action(&mut w, redo);
            }
        }
        w.bytes
    }

    /// Decodes a record; `Ok(None)` for a record type this module does not define (the
    /// page image). Never panics.
    pub fn decode(bytes: &[u8]) -> Result<Option<LogRecordBody>, FormatError> {
        let mut r = Reader::new(bytes, 0, PageId::NULL);
        let body = match r.u8()? {
            REC_BEGIN_XACT => LogRecordBody::BeginXact { xact: r.u64()? },
            REC_COMMIT_XACT => LogRecordBody::CommitXact {
                xact: r.u64()?,
                prev: get_lsn(&mut r)?,
                // Absent from commit records logged before it existed.
                time_us: if r.position() + 8 <= bytes.len() {
                    r.u64()? as i64
                } else {
                    0
                },
            },
            REC_CATALOG => {
                let total = r.u32()?;
                let offset = r.u32()?;
                let n = r.u16()? as usize;
                let mut pages = Vec::with_capacity(n.min(bytes.len() / 6));
                for _ in 0..n {
                    pages.push(r.page_id()?);
                }
                let len = r.u32()? as usize;
                if offset as u64 + len as u64 > total as u64 {
                    return Err(corrupt(PageId::NULL, "catalog piece beyond its blob"));
                }
                LogRecordBody::CatalogImage {
                    pages,
                    total,
                    offset,
                    bytes: r.take(len)?.to_vec(),
                }
            }
            REC_ABORT_XACT => LogRecordBody::AbortXact {
                xact: r.u64()?,
                prev: get_lsn(&mut r)?,
            },
            REC_FORMAT_PAGE => LogRecordBody::FormatPage {
                page: r.page_id()?,
                page_type: r.u8()?,
                allocation_unit_id: r.u64()?,
                index_id: r.u16()?,
                level: r.u8()?,
            },
            REC_ROW_CHANGE => LogRecordBody::RowChange {
                xact: r.u64()?,
                prev: get_lsn(&mut r)?,
                page: r.page_id()?,
                redo: get_action(&mut r)?,
                undo: get_action(&mut r)?,
            },
            REC_COMPENSATION => LogRecordBody::Compensation {
                xact: r.u64()?,
                prev: get_lsn(&mut r)?,
                undo_next: get_lsn(&mut r)?,
                page: r.page_id()?,
                redo: get_action(&mut r)?,
            },
            REC_PAGE_IMAGES => LogRecordBody::PageImages {
                images: get_images(&mut r)?,
            },
            REC_ROOT_MOVE => LogRecordBody::RootMove {
                object_id: r.u32()?,
                from: r.page_id()?,
                to: r.page_id()?,
                images: get_images(&mut r)?,
            },
            REC_INDEX_CHANGE => {
                let xact = r.u64()?;
                let prev = get_lsn(&mut r)?;
                let page = r.page_id()?;
                let allocation_unit_id = r.u64()?;
                let redo = get_action(&mut r)?;
                let kind = r.u8()?;
                let n = r.u16()? as usize;
                let record = r.take(n)?.to_vec();
                let undo = match kind {
                    1 => KeyedUndo::Remove { record },
                    2 => KeyedUndo::Unghost { record },
                    3 => KeyedUndo::Replace { record },
                    other => {
                        return Err(corrupt(PageId::NULL, format!("unknown keyed undo {other}")))
                    }
                };
                LogRecordBody::IndexChange {
                    xact,
                    prev,
                    page,
                    allocation_unit_id,
                    redo,
                    undo,
                }
            }
            _ => return Ok(None),
        };
        if r.position() != bytes.len() {
            return Err(corrupt(
                PageId::NULL,
                format!(
                    "log record of {} bytes has {} trailing bytes",
                    bytes.len(),
                    bytes.len() - r.position()
                ),
            ));
        }
        Ok(Some(body))
    }
}

fn put_lsn(w: &mut Writer, l: Lsn) {
    w.u32(l.vlf_sequence);
    w.u32(l.block);
    w.u16(l.slot);
}

fn get_lsn(r: &mut Reader<'_>) -> Result<Lsn, FormatError> {
    Ok(Lsn {
        vlf_sequence: r.u32()?,
        block: r.u32()?,
        slot: r.u16()?,
    })
}

const ACT_INSERT: u8 = 1;
const ACT_REMOVE: u8 = 2;
const ACT_GHOST: u8 = 3;
const ACT_UNGHOST: u8 = 4;
const ACT_REPLACE: u8 = 5;

fn put_action(w: &mut Writer, a: &SlotAction) {
    let (kind, record) = match a {
        SlotAction::Insert { record, .. } => (ACT_INSERT, Some(record)),
        SlotAction::Remove { .. } => (ACT_REMOVE, None),
        SlotAction::Ghost { .. } => (ACT_GHOST, None),
        SlotAction::Unghost { .. } => (ACT_UNGHOST, None),
        SlotAction::Replace { record, .. } => (ACT_REPLACE, Some(record)),
    };
    w.u8(kind);
    w.u16(a.slot());
    if let Some(rec) = record {
        w.u16(rec.len() as u16);
        w.raw(rec);
    }
}

fn get_action(r: &mut Reader<'_>) -> Result<SlotAction, FormatError> {
    let kind = r.u8()?;
    let slot = r.u16()?;
    let mut record = || -> Result<Vec<u8>, FormatError> {
        let n = r.u16()? as usize;
        if n > PAGE_SIZE {
            return Err(corrupt(PageId::NULL, format!("record of {n} bytes")));
        }
        Ok(r.take(n)?.to_vec())
    };
    Ok(match kind {
        ACT_INSERT => SlotAction::Insert {
            slot,
            record: record()?,
        },
        ACT_REMOVE => SlotAction::Remove { slot },
        ACT_GHOST => SlotAction::Ghost { slot },
        ACT_UNGHOST => SlotAction::Unghost { slot },
        ACT_REPLACE => SlotAction::Replace {
            slot,
            record: record()?,
        },
        other => {
            return Err(corrupt(
                PageId::NULL,
                format!("unknown slot action {other}"),
            ))
        }
    })
}

/// Whole-page images: count u8, then per page its id and 8,192 bytes.
fn put_images(w: &mut Writer, images: &[(PageId, Vec<u8>)]) {
    w.u8(images.len() as u8);
    for (p, bytes) in images {
        assert_eq!(bytes.len(), PAGE_SIZE, "a page image is a whole page");
        w.page_id(*p);
        w.raw(bytes);
    }
}

fn get_images(r: &mut Reader) -> Result<Vec<(PageId, Vec<u8>)>, FormatError> {
    let n = r.u8()?;
    let mut images = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let p = r.page_id()?;
        images.push((p, r.take(PAGE_SIZE)?.to_vec()));
    }
    Ok(images)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<LogRecordBody> {
        let lsn = Lsn {
            vlf_sequence: 7,
            block: 33,
            slot: 2,
        };
        vec![
            LogRecordBody::BeginXact { xact: 9 },
            LogRecordBody::CommitXact {
                xact: 9,
                prev: lsn,
                time_us: 1_795_000_000_123_456,
            },
            LogRecordBody::CatalogImage {
                pages: vec![PageId::new(1, 16), PageId::new(1, 17)],
                total: 9000,
                offset: 4096,
                bytes: vec![0x5a; 4904],
            },
            LogRecordBody::AbortXact { xact: 9, prev: lsn },
            LogRecordBody::FormatPage {
                page: PageId::new(3, 800),
                page_type: 1,
                allocation_unit_id: 72,
                index_id: 0,
                level: 0,
            },
            LogRecordBody::RowChange {
                xact: 9,
                prev: lsn,
                page: PageId::new(1, 96),
                redo: SlotAction::Insert {
                    slot: 4,
                    record: vec![0x30, 0, 8, 0, 1, 2, 3, 4],
                },
                undo: SlotAction::Remove { slot: 4 },
            },
            LogRecordBody::RowChange {
                xact: 10,
                prev: Lsn::ZERO,
                page: PageId::new(1, 96),
                redo: SlotAction::Replace {
                    slot: 1,
                    record: vec![1; 8060],
                },
                undo: SlotAction::Replace {
                    slot: 1,
                    record: vec![2; 10],
                },
            },
            LogRecordBody::Compensation {
                xact: 9,
                prev: lsn,
                undo_next: Lsn::ZERO,
                page: PageId::new(1, 96),
                redo: SlotAction::Unghost { slot: 0 },
            },
            LogRecordBody::PageImages {
                images: vec![
                    (PageId::new(1, 200), vec![3; PAGE_SIZE]),
                    (PageId::new(3, 9), vec![4; PAGE_SIZE]),
                ],
            },
            LogRecordBody::RootMove {
                object_id: 581_577_112,
                from: PageId::new(3, 40),
                to: PageId::new(1, 168),
                images: vec![
                    (PageId::new(1, 168), vec![5; PAGE_SIZE]),
                    (PageId::new(3, 40), vec![6; PAGE_SIZE]),
                ],
            },
            LogRecordBody::IndexChange {
                xact: 12,
                prev: lsn,
                page: PageId::new(1, 200),
                allocation_unit_id: 99,
                redo: SlotAction::Insert {
                    slot: 0,
                    record: vec![9; 20],
                },
                undo: KeyedUndo::Remove {
                    record: vec![9; 20],
                },
            },
            LogRecordBody::RowChange {
                xact: 11,
                prev: lsn,
                page: PageId::new(4, 1),
                redo: SlotAction::Ghost { slot: 3 },
                undo: SlotAction::Unghost { slot: 3 },
            },
        ]
    }

    /// Proves every record kind round-trips through its encoding, compressed or not.
    #[test]
    fn round_trip() {
        for r in samples() {
            assert_eq!(LogRecordBody::decode(&r.encode()).unwrap(), Some(r.clone()));
            let stored = compact(r.encode());
            assert_eq!(&*expand(&stored).unwrap(), &r.encode()[..]);
        }
    }

    /// Proves a padded 8,000-byte row compresses to a small record and corrupt compressed
    /// bytes are errors, never panics.
    #[test]
    fn compression() {
        let mut row = vec![b' '; 8000];
        row[0] = b'a';
        let r = LogRecordBody::RowChange {
            xact: 1,
            prev: Lsn::ZERO,
            page: PageId::new(1, 100),
            redo: SlotAction::Insert {
                slot: 0,
                record: row,
            },
            undo: SlotAction::Remove { slot: 0 },
        }
        .encode();
        let stored = compact(r.clone());
        assert!(stored.len() < 200, "{} bytes", stored.len());
        assert_eq!(&*expand(&stored).unwrap(), &r[..]);
        let small = vec![2u8, 0, 0, 0, 0, 0, 0, 0, 9];
        assert_eq!(compact(small.clone()), small);
        let mut x = 7u64;
        for _ in 0..5000 {
            let mut b = stored.clone();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = 1 + (x as usize) % (b.len() - 1);
            b[i] = (x >> 40) as u8;
            let _ = expand(&b);
            let _ = expand(&b[..(x as usize) % b.len()]);
        }
    }

    /// Pins the commit record (its time for STOPAT at byte 19) and proves one logged before
    /// the time existed decodes with time 0; a catalog piece past its blob is an error.
    #[test]
    fn commit_time_and_catalog_pieces() {
        let c = LogRecordBody::CommitXact {
            xact: 5,
            prev: Lsn::ZERO,
            time_us: 42,
        }
        .encode();
        assert_eq!(c.len(), 27);
        assert_eq!(c[0], REC_COMMIT_XACT);
        assert_eq!(i64::from_le_bytes(c[19..27].try_into().unwrap()), 42);
        assert_eq!(
            LogRecordBody::decode(&c[..19]).unwrap(),
            Some(LogRecordBody::CommitXact {
                xact: 5,
                prev: Lsn::ZERO,
                time_us: 0
            })
        );
        let bad = LogRecordBody::CatalogImage {
            pages: vec![PageId::new(1, 16)],
            total: 10,
            offset: 8,
            bytes: vec![1; 4],
        }
        .encode();
        assert!(LogRecordBody::decode(&bad).is_err());
    }

    /// Proves truncated and mutated records decode to errors or other records, never panic.
    #[test]
    fn garbage_never_panics() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for r in samples() {
            let bytes = r.encode();
            for n in 0..bytes.len() {
                // A commit without its time is one logged before the field existed.
                let old_commit =
                    matches!(r, LogRecordBody::CommitXact { .. }) && n == bytes.len() - 8;
                assert_eq!(
                    LogRecordBody::decode(&bytes[..n]).is_err(),
                    !old_commit,
                    "{n}"
                );
            }
            for _ in 0..2000 {
                let mut b = bytes.clone();
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let i = (x as usize) % b.len();
                b[i] = (x >> 32) as u8;
                let _ = LogRecordBody::decode(&b);
            }
        }
    }
}
