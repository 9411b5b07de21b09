//! The backup file: a media header, then backup sets one after another (BACKUP ... WITH
//! NOINIT appends a set, INIT and FORMAT start the file over). See FORMAT.md, "Backup file".
//!
//! A set is a set header block, then blocks of data pages and of raw log bytes, then an end
//! block. Every structure carries a CRC-32C, so a damaged or truncated file is detected
//! wherever it is damaged, and a set without its end block is incomplete (a backup that
//! died part-way).
//!
//! Invariants:
//! 1. Every decoder bounds each length and offset before use: any bytes give an error,
//!    never a panic.
//! 2. Structures start at multiples of `ALIGN`, so a reader finds the next one from the
//!    lengths alone and copies stay aligned for the device.

use crate::catalog::FileEntry;
use crate::codec::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64, Reader, Writer};
use crate::log::VlfHeader;
use crate::{corrupt, FormatError, Lsn, PageId};

/// Alignment of the media header, set headers and blocks.
pub const ALIGN: u64 = 4096;
/// Bytes of the media header.
pub const MEDIA_HEADER_SIZE: usize = 4096;
/// Bytes of a block header (the payload follows, padded to `ALIGN`).
pub const BLOCK_HEADER_SIZE: usize = 64;
/// Most bytes of payload in one block (128 pages).
pub const MAX_BLOCK_PAYLOAD: usize = 1 << 20;

const MEDIA_MAGIC: [u8; 8] = *b"XDBMEDIA";
const SET_MAGIC: [u8; 8] = *b"XDBBSET\0";
const BLOCK_MAGIC: [u8; 8] = *b"XDBBLOCK";
/// Format version of the backup file.
pub const BACKUP_FORMAT_VERSION: u32 = 1;

fn bad(what: impl Into<String>) -> FormatError {
    corrupt(PageId::NULL, what.into())
}

/// The CRC-32C a block header carries for its payload (carry-less multiply, as the page
/// checksum).
pub fn payload_crc(payload: &[u8]) -> u32 {
    let mut d = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    d.update(payload);
    d.finalize() as u32
}

/// Rounds `n` up to a multiple of `ALIGN`.
pub fn aligned(n: u64) -> u64 {
    n.div_ceil(ALIGN) * ALIGN
}

/// The first 4 KiB of a backup file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaHeader {
    pub media_guid: [u8; 16],
    pub created_us: i64,
    /// BLOCKSIZE given when the media was formatted (512 to 4,096, a power of 2), else 0:
    /// every structure is at a multiple of `ALIGN`, so the media's I/O is aligned to it.
    pub block_size: u32,
    /// MEDIANAME and MEDIADESCRIPTION given when the media was formatted (empty if none).
    pub media_name: String,
    pub media_description: String,
}

/// Bytes of the media header's fixed part (magic to creation time, block size).
const MEDIA_FIXED: usize = 44;

impl MediaHeader {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; MEDIA_HEADER_SIZE];
        b[..8].copy_from_slice(&MEDIA_MAGIC);
        put_u32(&mut b, 8, BACKUP_FORMAT_VERSION);
        b[16..32].copy_from_slice(&self.media_guid);
        put_u64(&mut b, 32, self.created_us as u64);
        put_u32(&mut b, 40, self.block_size);
        let mut w = Writer::default();
        w.string(&self.media_name);
        w.string(&self.media_description);
        assert!(
            MEDIA_FIXED + w.bytes.len() <= MEDIA_HEADER_SIZE - 4,
            "media name and description fit the media header"
        );
        b[MEDIA_FIXED..MEDIA_FIXED + w.bytes.len()].copy_from_slice(&w.bytes);
        let crc = crc32c::crc32c(&b[..MEDIA_HEADER_SIZE - 4]);
        put_u32(&mut b, MEDIA_HEADER_SIZE - 4, crc);
        b
    }

    /// Reads a media header; one written before the block size and names existed has
    /// zeros there, which read as none.
    pub fn decode(b: &[u8]) -> Result<MediaHeader, FormatError> {
        if b.len() < MEDIA_HEADER_SIZE || b[..8] != MEDIA_MAGIC {
            return Err(bad("not a backup file (no media header)"));
        }
        if crc32c::crc32c(&b[..MEDIA_HEADER_SIZE - 4]) != get_u32(b, MEDIA_HEADER_SIZE - 4) {
            return Err(bad("media header checksum"));
        }
        let version = get_u32(b, 8);
        if version != BACKUP_FORMAT_VERSION {
            return Err(bad(format!("backup format version {version}")));
        }
        let mut r = Reader::new(&b[..MEDIA_HEADER_SIZE - 4], MEDIA_FIXED, PageId::NULL);
        Ok(MediaHeader {
            media_guid: b[16..32].try_into().unwrap(),
            created_us: get_u64(b, 32) as i64,
            block_size: get_u32(b, 40),
            media_name: r.string()?,
            media_description: r.string()?,
        })
    }
}

/// What a backup set holds (RESTORE HEADERONLY's BackupType numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackupType {
    Database = 1,
    Log = 2,
    Differential = 5,
}

impl BackupType {
    pub fn from_u8(v: u8) -> Option<BackupType> {
        match v {
            1 => Some(BackupType::Database),
            2 => Some(BackupType::Log),
            5 => Some(BackupType::Differential),
            _ => None,
        }
    }
}

/// Set header flag: page checksums were verified while backing up (WITH CHECKSUM).
pub const FLAG_CHECKSUM: u8 = 0x01;
/// Set header flag: COPY_ONLY (does not start a differential base).
pub const FLAG_COPY_ONLY: u8 = 0x02;
/// Set header flag: WITH COMPRESSION (blocks are compressed where that saves space).
pub const FLAG_COMPRESSED: u8 = 0x04;

/// The header of one backup set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetHeader {
    /// 1-based position of the set in its file (RESTORE ... WITH FILE = n).
    pub position: u32,
    pub backup_type: BackupType,
    pub flags: u8,
    pub name: String,
    pub description: String,
    pub server_name: String,
    pub user_name: String,
    pub database_name: String,
    pub database_guid: [u8; 16],
    pub database_version: u32,
    pub database_created_us: i64,
    /// 1 FULL, 2 BULK_LOGGED, 3 SIMPLE (sys.databases.recovery_model).
    pub recovery_model: u8,
    /// The oldest log record in the set, the end of the log it holds, the checkpoint redo
    /// starts from, and the last full backup this one builds on (zero for a full one).
    pub first_lsn: Lsn,
    pub last_lsn: Lsn,
    pub checkpoint_lsn: Lsn,
    pub database_backup_lsn: Lsn,
    pub started_us: i64,
    /// Files of the database at the backup (data and log), as the catalog lists them.
    pub files: Vec<FileEntry>,
    /// Filegroups: (data space id, name).
    pub filegroups: Vec<(u16, String)>,
    /// Every VLF of every log file at the backup, in physical order: a restore recreates
    /// exactly this layout, so that LSNs (positions in the log) stay the same.
    pub vlfs: Vec<VlfHeader>,
    /// For a differential or log backup, the BackupSetGUID of the full backup it builds on
    /// (zero when there is none, and in sets written before the field existed).
    pub differential_base_guid: [u8; 16],
    /// EXPIREDATE / RETAINDAYS: until when (µs since the Unix epoch) INIT may not
    /// overwrite the set without SKIP; 0 for none (and in sets written before it existed).
    pub expires_us: i64,
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

/// Bytes of the set header's fixed part: magic, total length, body length, body CRC.
const SET_FIXED: usize = 24;

impl SetHeader {
    /// The set's BackupSetGUID (RESTORE HEADERONLY, msdb.dbo.backupset.backup_set_uuid),
    /// which the file does not store: derived from what identifies the set, the media
    /// GUID, its position and its start time (INIT starts a file's positions again; the
    /// start time tells such sets apart).
    pub fn set_guid(&self, media_guid: &[u8; 16]) -> [u8; 16] {
        let mut g = *media_guid;
        for (i, b) in self.position.to_le_bytes().iter().enumerate() {
            g[i] ^= b;
        }
        for (i, b) in self.started_us.to_le_bytes().iter().enumerate() {
            g[8 + i] ^= b;
        }
        g
    }

    /// The header as stored: magic, its length padded to `ALIGN`, the body's length and
    /// CRC-32C, then the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u32(self.position);
        w.u8(self.backup_type as u8);
        w.u8(self.flags);
        for s in [
            &self.name,
            &self.description,
            &self.server_name,
            &self.user_name,
            &self.database_name,
        ] {
            w.string(s);
        }
        w.raw(&self.database_guid);
        w.u32(self.database_version);
        w.i64(self.database_created_us);
        w.u8(self.recovery_model);
        for l in [
            self.first_lsn,
            self.last_lsn,
            self.checkpoint_lsn,
            self.database_backup_lsn,
        ] {
            put_lsn(&mut w, l);
        }
        w.i64(self.started_us);
        w.u16(self.files.len() as u16);
        for f in &self.files {
            f.encode(&mut w);
        }
        w.u16(self.filegroups.len() as u16);
        for (id, name) in &self.filegroups {
            w.u16(*id);
            w.string(name);
        }
        w.u32(self.vlfs.len() as u32);
        for v in &self.vlfs {
            w.raw(&v.encode()[..]);
        }
        w.raw(&self.differential_base_guid);
        w.i64(self.expires_us);
        let body = w.bytes;
        let total = aligned((SET_FIXED + body.len()) as u64) as usize;
        let mut b = vec![0u8; total];
        b[..8].copy_from_slice(&SET_MAGIC);
        put_u32(&mut b, 8, total as u32);
        put_u32(&mut b, 12, body.len() as u32);
        put_u32(&mut b, 16, crc32c::crc32c(&body));
        let head_crc = crc32c::crc32c(&b[..20]);
        put_u32(&mut b, 20, head_crc);
        b[SET_FIXED..SET_FIXED + body.len()].copy_from_slice(&body);
        b
    }

    /// The total stored length of a set header from its first `ALIGN` bytes.
    pub fn stored_len(first: &[u8]) -> Result<u64, FormatError> {
        if first.len() < SET_FIXED || first[..8] != SET_MAGIC {
            return Err(bad("no backup set header where one should start"));
        }
        if crc32c::crc32c(&first[..20]) != get_u32(first, 20) {
            return Err(bad("backup set header checksum"));
        }
        let total = get_u32(first, 8) as u64;
        if total < ALIGN || !total.is_multiple_of(ALIGN) || total > 64 << 20 {
            return Err(bad(format!("backup set header of {total} bytes")));
        }
        Ok(total)
    }

    pub fn decode(b: &[u8]) -> Result<SetHeader, FormatError> {
        let total = SetHeader::stored_len(b)? as usize;
        let body_len = get_u32(b, 12) as usize;
        if b.len() < total || SET_FIXED + body_len > total {
            return Err(bad("backup set header is cut short"));
        }
        let body = &b[SET_FIXED..SET_FIXED + body_len];
        if crc32c::crc32c(body) != get_u32(b, 16) {
            return Err(bad("backup set header checksum"));
        }
        let mut r = Reader::new(body, 0, PageId::NULL);
        let position = r.u32()?;
        let backup_type = BackupType::from_u8(r.u8()?).ok_or_else(|| bad("unknown backup type"))?;
        let flags = r.u8()?;
        let name = r.string()?;
        let description = r.string()?;
        let server_name = r.string()?;
        let user_name = r.string()?;
        let database_name = r.string()?;
        let database_guid = r.array::<16>()?;
        let database_version = r.u32()?;
        let database_created_us = r.i64()?;
        let recovery_model = r.u8()?;
        let first_lsn = get_lsn(&mut r)?;
        let last_lsn = get_lsn(&mut r)?;
        let checkpoint_lsn = get_lsn(&mut r)?;
        let database_backup_lsn = get_lsn(&mut r)?;
        let started_us = r.i64()?;
        let nfiles = r.u16()?;
        let mut files = Vec::new();
        for _ in 0..nfiles {
            files.push(FileEntry::decode(&mut r, PageId::NULL)?);
        }
        let nfg = r.u16()?;
        let mut filegroups = Vec::new();
        for _ in 0..nfg {
            filegroups.push((r.u16()?, r.string()?));
        }
        let nvlfs = r.u32()?;
        let mut vlfs = Vec::new();
        for _ in 0..nvlfs {
            let s = r.take(crate::SECTOR_SIZE)?;
            vlfs.push(VlfHeader::decode(s).ok_or_else(|| bad("VLF header in backup set"))?);
        }
        let differential_base_guid = if r.position() < body.len() {
            r.array::<16>()?
        } else {
            [0; 16]
        };
        let expires_us = if r.position() < body.len() {
            r.i64()?
        } else {
            0
        };
        Ok(SetHeader {
            differential_base_guid,
            expires_us,
            position,
            backup_type,
            flags,
            name,
            description,
            server_name,
            user_name,
            database_name,
            database_guid,
            database_version,
            database_created_us,
            recovery_model,
            first_lsn,
            last_lsn,
            checkpoint_lsn,
            database_backup_lsn,
            started_us,
            files,
            filegroups,
            vlfs,
        })
    }
}

/// What a block holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// `count` data pages of file `file_id` from page `start`.
    Pages = 1,
    /// Raw bytes of log file `file_id` from byte offset `start`.
    Log = 2,
    /// The end of the set: the payload is a `SetTrailer`.
    End = 3,
}

/// The header of one block; the payload (`length` bytes) follows it, then padding to
/// `ALIGN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    pub kind: BlockKind,
    pub file_id: u16,
    pub start: u64,
    pub count: u32,
    pub length: u32,
    pub payload_crc: u32,
    /// 0 when the payload is stored as it is; else it is LZ4-compressed (BACKUP ... WITH
    /// COMPRESSION) and expands to this many bytes. `length` and the CRC are of the bytes
    /// stored.
    pub raw_length: u32,
}

impl BlockHeader {
    pub fn encode(&self) -> [u8; BLOCK_HEADER_SIZE] {
        let mut b = [0u8; BLOCK_HEADER_SIZE];
        b[..8].copy_from_slice(&BLOCK_MAGIC);
        b[8] = self.kind as u8;
        put_u16(&mut b, 10, self.file_id);
        put_u64(&mut b, 16, self.start);
        put_u32(&mut b, 24, self.count);
        put_u32(&mut b, 28, self.length);
        put_u32(&mut b, 32, self.payload_crc);
        put_u32(&mut b, 36, self.raw_length);
        let crc = crc32c::crc32c(&b[..BLOCK_HEADER_SIZE - 4]);
        put_u32(&mut b, BLOCK_HEADER_SIZE - 4, crc);
        b
    }

    pub fn decode(b: &[u8]) -> Result<BlockHeader, FormatError> {
        if b.len() < BLOCK_HEADER_SIZE || b[..8] != BLOCK_MAGIC {
            return Err(bad("no block where one should start"));
        }
        if crc32c::crc32c(&b[..BLOCK_HEADER_SIZE - 4]) != get_u32(b, BLOCK_HEADER_SIZE - 4) {
            return Err(bad("block header checksum"));
        }
        let kind = match b[8] {
            1 => BlockKind::Pages,
            2 => BlockKind::Log,
            3 => BlockKind::End,
            k => return Err(bad(format!("block kind {k}"))),
        };
        let h = BlockHeader {
            kind,
            file_id: get_u16(b, 10),
            start: get_u64(b, 16),
            count: get_u32(b, 24),
            length: get_u32(b, 28),
            payload_crc: get_u32(b, 32),
            raw_length: get_u32(b, 36),
        };
        let expected = match kind {
            BlockKind::Pages => Some(h.count as usize * crate::PAGE_SIZE),
            BlockKind::Log => None,
            BlockKind::End => Some(TRAILER_SIZE),
        };
        let raw = h.raw_len();
        if h.length as usize > MAX_BLOCK_PAYLOAD
            || raw > MAX_BLOCK_PAYLOAD
            || expected.is_some_and(|e| e != raw)
            || (h.raw_length != 0 && kind == BlockKind::End)
        {
            return Err(bad(format!("block payload of {} bytes", h.length)));
        }
        Ok(h)
    }

    /// Bytes of the payload once expanded.
    pub fn raw_len(&self) -> usize {
        if self.raw_length == 0 {
            self.length as usize
        } else {
            self.raw_length as usize
        }
    }

    /// The payload as it was before compression, from the `length` bytes stored (whose
    /// CRC the caller checked). Damaged compressed bytes are an error, never a panic.
    pub fn expand<'a>(&self, stored: &'a [u8]) -> Result<std::borrow::Cow<'a, [u8]>, FormatError> {
        if self.raw_length == 0 {
            return Ok(std::borrow::Cow::Borrowed(stored));
        }
        let raw = lz4_flex::block::decompress(stored, self.raw_length as usize)
            .map_err(|e| bad(format!("compressed block: {e}")))?;
        if raw.len() != self.raw_length as usize {
            return Err(bad("compressed block expands to the wrong length"));
        }
        Ok(std::borrow::Cow::Owned(raw))
    }

    /// Bytes of the block in the file: header and payload, padded.
    pub fn stored_len(&self) -> u64 {
        aligned((BLOCK_HEADER_SIZE + self.length as usize) as u64)
    }
}

/// A payload as a block stores it: LZ4-compressed when `compress` and that saves at
/// least an eighth, else unchanged. Returns (stored bytes, raw_length for the header).
pub fn pack_payload(payload: &[u8], compress: bool) -> (std::borrow::Cow<'_, [u8]>, u32) {
    if compress && !payload.is_empty() {
        let packed = lz4_flex::block::compress(payload);
        if packed.len() * 8 <= payload.len() * 7 {
            return (std::borrow::Cow::Owned(packed), payload.len() as u32);
        }
    }
    (std::borrow::Cow::Borrowed(payload), 0)
}

/// The end block's payload: what the set holds, for a reader to confirm it read it all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SetTrailer {
    pub data_pages: u64,
    pub log_bytes: u64,
    pub blocks: u64,
    pub finished_us: i64,
}

/// Bytes of a `SetTrailer`.
pub const TRAILER_SIZE: usize = 32;

impl SetTrailer {
    pub fn encode(&self) -> [u8; TRAILER_SIZE] {
        let mut b = [0u8; TRAILER_SIZE];
        put_u64(&mut b, 0, self.data_pages);
        put_u64(&mut b, 8, self.log_bytes);
        put_u64(&mut b, 16, self.blocks);
        put_u64(&mut b, 24, self.finished_us as u64);
        b
    }

    pub fn decode(b: &[u8]) -> Result<SetTrailer, FormatError> {
        if b.len() != TRAILER_SIZE {
            return Err(bad("end block"));
        }
        Ok(SetTrailer {
            data_pages: get_u64(b, 0),
            log_bytes: get_u64(b, 8),
            blocks: get_u64(b, 16),
            finished_us: get_u64(b, 24) as i64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file_header::FileType;

    fn set() -> SetHeader {
        SetHeader {
            position: 2,
            backup_type: BackupType::Database,
            flags: FLAG_CHECKSUM,
            name: "full".into(),
            description: String::new(),
            server_name: "vm".into(),
            user_name: "sa".into(),
            database_name: "Sales".into(),
            database_guid: [7; 16],
            database_version: 957,
            database_created_us: 1_700_000_000_000_000,
            recovery_model: 1,
            first_lsn: Lsn {
                vlf_sequence: 3,
                block: 8192,
                slot: 1,
            },
            last_lsn: Lsn {
                vlf_sequence: 4,
                block: 16384,
                slot: 9,
            },
            checkpoint_lsn: Lsn {
                vlf_sequence: 3,
                block: 8192,
                slot: 4,
            },
            database_backup_lsn: Lsn::ZERO,
            started_us: 1_700_000_001_000_000,
            files: vec![FileEntry {
                file_id: 1,
                file_type: FileType::Rows,
                data_space_id: 1,
                name: "Sales".into(),
                physical_name: "/data/Sales.mdf".into(),
                size_pages: 1024,
                max_size_pages: -1,
                growth: 128,
                is_percent_growth: false,
            }],
            filegroups: vec![(1, "PRIMARY".into())],
            vlfs: vec![VlfHeader {
                sequence: 3,
                parity: 0x40,
                file_id: 2,
                start_offset: 8192,
                size: 1 << 20,
                create_lsn: Lsn::ZERO,
            }],
            differential_base_guid: [9; 16],
            expires_us: 1_800_000_000_000_000,
        }
    }

    /// Proves the set header, the media header, a block header and the trailer round-trip,
    /// and that one flipped bit anywhere in a header is an error, never a panic or a
    /// different header.
    #[test]
    fn headers_round_trip_and_reject_damage() {
        let s = set();
        let b = s.encode();
        assert_eq!(b.len() as u64 % ALIGN, 0);
        assert_eq!(SetHeader::decode(&b).unwrap(), s);
        for bit in (0..(b.len().min(600) * 8)).step_by(7) {
            let mut d = b.clone();
            d[bit / 8] ^= 1 << (bit % 8);
            if let Ok(x) = SetHeader::decode(&d) {
                // Only bits of the padding may change without notice.
                assert_eq!(x, s, "bit {bit}");
            }
        }
        let m = MediaHeader {
            media_guid: [3; 16],
            created_us: 42,
            block_size: 512,
            media_name: "Weekly é".into(),
            media_description: "tape-like".repeat(28),
        };
        let mb = m.encode();
        assert_eq!(MediaHeader::decode(&mb).unwrap(), m);
        for at in [20, 40, 45, 60] {
            let mut d = mb.clone();
            d[at] ^= 4;
            assert!(MediaHeader::decode(&d).is_err(), "byte {at}");
        }
        // A header from before the block size and names: zeros there read as none.
        let mut old = vec![0u8; MEDIA_HEADER_SIZE];
        old[..40].copy_from_slice(&mb[..40]);
        let crc = crc32c::crc32c(&old[..MEDIA_HEADER_SIZE - 4]);
        put_u32(&mut old, MEDIA_HEADER_SIZE - 4, crc);
        let o = MediaHeader::decode(&old).unwrap();
        assert_eq!((o.block_size, o.media_name.as_str()), (0, ""));
        assert_eq!(o.media_description, "");
        let h = BlockHeader {
            kind: BlockKind::Pages,
            file_id: 1,
            start: 64,
            count: 16,
            length: 16 * 8192,
            payload_crc: 99,
            raw_length: 0,
        };
        let hb = h.encode();
        assert_eq!(BlockHeader::decode(&hb).unwrap(), h);
        for bit in 0..BLOCK_HEADER_SIZE * 8 {
            let mut d = hb;
            d[bit / 8] ^= 1 << (bit % 8);
            assert!(BlockHeader::decode(&d).is_err(), "bit {bit}");
        }
        let t = SetTrailer {
            data_pages: 5,
            log_bytes: 6,
            blocks: 7,
            finished_us: 8,
        };
        assert_eq!(SetTrailer::decode(&t.encode()).unwrap(), t);
    }

    /// Proves a compressed block expands to its pages, that a page count must match the
    /// expanded length, and that damaged compressed bytes are an error, not a panic.
    #[test]
    fn compressed_blocks_expand_or_fail_cleanly() {
        let mut payload = vec![0u8; 2 * 8192];
        for (i, b) in payload.iter_mut().enumerate().step_by(97) {
            *b = i as u8;
        }
        let (stored, raw_length) = pack_payload(&payload, true);
        assert_eq!(raw_length as usize, payload.len());
        assert!(stored.len() < payload.len() / 2);
        let h = BlockHeader {
            kind: BlockKind::Pages,
            file_id: 3,
            start: 8,
            count: 2,
            length: stored.len() as u32,
            payload_crc: payload_crc(&stored),
            raw_length,
        };
        let back = BlockHeader::decode(&h.encode()).unwrap();
        assert_eq!(back.expand(&stored).unwrap().as_ref(), &payload[..]);
        let wrong_count = BlockHeader { count: 3, ..h };
        assert!(BlockHeader::decode(&wrong_count.encode()).is_err());
        let mut damaged = stored.to_vec();
        for i in (0..damaged.len()).step_by(7) {
            damaged[i] ^= 0x5c;
        }
        let _ = h.expand(&damaged); // an error or other bytes; never a panic
        assert!(h.expand(&stored[..stored.len() / 2]).is_err());
        // Incompressible bytes are stored as they are.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        assert_eq!(pack_payload(&noise, true).1, 0);
        assert_eq!(pack_payload(&payload, false).1, 0);
    }
}
