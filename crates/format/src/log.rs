//! The transaction log's on-disk format: VLF headers, 512-byte sectors with parity, and log
//! blocks. See FORMAT.md, "Log file".
//!
//! A log file is page 0 (file header) followed by virtual log files (VLFs). Each VLF starts
//! with an 8 KiB header area whose first sector holds the `VlfHeader`; log blocks follow at
//! VLF offset 8,192. A block is 1 to 120 sectors (512 B to 60 KiB). Byte 0 of every sector
//! of a block is the parity byte of the VLF's current use: 0x40 the first time the VLF is
//! used, then 0x80, alternating on each reuse; 0 (initialized space) is never valid.
//!
//! Invariants:
//! 1. A block is valid only if every sector carries the current parity, its header names the
//!    VLF's current sequence number and its own offset, and its CRC-32C matches. So torn
//!    blocks (some sectors old), stale blocks from a use two reuses back (same parity, older
//!    sequence) and initialized space all end the log.
//! 2. `scan_vlf` never reads past the VLF and never panics on any bytes.

use crate::{Lsn, SECTOR_SIZE};

/// Bytes before the first log block of a VLF (its header area).
pub const VLF_HEADER_AREA: u64 = 8192;
/// Sectors in the largest log block (60 KiB).
pub const MAX_BLOCK_SECTORS: usize = 120;
/// Payload bytes of a sector (byte 0 is the parity byte).
pub const SECTOR_PAYLOAD: usize = SECTOR_SIZE - 1;
/// Bytes of the block header inside the first sector's payload.
pub const BLOCK_HEADER: usize = 20;
/// Parity of a VLF's odd-numbered uses (the first use).
pub const PARITY_FIRST: u8 = 0x40;
/// Parity of a VLF's even-numbered uses.
pub const PARITY_SECOND: u8 = 0x80;

const VLF_MAGIC: [u8; 8] = *b"XDBVLF\0\0";
/// Block flag: the last block of this VLF use; the log goes on in the VLF with the next FSeqNo.
pub const FLAG_VLF_END: u8 = 0x01;
const BLOCK_MAGIC: u16 = 0x4C42; // "BL"

/// The other parity: a VLF's next use flips it.
pub fn flip(parity: u8) -> u8 {
    if parity == PARITY_FIRST {
        PARITY_SECOND
    } else {
        PARITY_FIRST
    }
}

/// The header in the first sector of each VLF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlfHeader {
    /// FSeqNo: the log-wide sequence number of the VLF's current use; 0 = never used.
    pub sequence: u32,
    /// 0 (never used), 0x40 or 0x80.
    pub parity: u8,
    pub file_id: u16,
    /// Byte offset of the VLF in its file.
    pub start_offset: u64,
    /// Bytes of the VLF, header area included.
    pub size: u64,
    /// The LSN at which the VLF was created (0 for the log's first VLFs).
    pub create_lsn: Lsn,
}

impl VlfHeader {
    /// Encodes the header as one 512-byte sector with a CRC-32C in its last 4 bytes.
    pub fn encode(&self) -> [u8; SECTOR_SIZE] {
        let mut s = [0u8; SECTOR_SIZE];
        s[0..8].copy_from_slice(&VLF_MAGIC);
        s[8..12].copy_from_slice(&self.sequence.to_le_bytes());
        s[12] = self.parity;
        s[14..16].copy_from_slice(&self.file_id.to_le_bytes());
        s[16..24].copy_from_slice(&self.start_offset.to_le_bytes());
        s[24..32].copy_from_slice(&self.size.to_le_bytes());
        s[32..36].copy_from_slice(&self.create_lsn.vlf_sequence.to_le_bytes());
        s[36..40].copy_from_slice(&self.create_lsn.block.to_le_bytes());
        s[40..42].copy_from_slice(&self.create_lsn.slot.to_le_bytes());
        let crc = crc32c::crc32c(&s[..SECTOR_SIZE - 4]);
        s[SECTOR_SIZE - 4..].copy_from_slice(&crc.to_le_bytes());
        s
    }

    /// Decodes a header sector; None if it is not a valid header (never written, torn).
    pub fn decode(s: &[u8]) -> Option<VlfHeader> {
        if s.len() < SECTOR_SIZE || s[0..8] != VLF_MAGIC {
            return None;
        }
        let crc = u32::from_le_bytes(s[SECTOR_SIZE - 4..SECTOR_SIZE].try_into().ok()?);
        if crc != crc32c::crc32c(&s[..SECTOR_SIZE - 4]) {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes(s[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(s[i..i + 8].try_into().unwrap());
        Some(VlfHeader {
            sequence: u32_at(8),
            parity: s[12],
            file_id: u16::from_le_bytes([s[14], s[15]]),
            start_offset: u64_at(16),
            size: u64_at(24),
            create_lsn: Lsn {
                vlf_sequence: u32_at(32),
                block: u32_at(36),
                slot: u16::from_le_bytes([s[40], s[41]]),
            },
        })
    }
}

/// Sectors a block needs for `payload` bytes of records.
pub fn block_sectors(payload: usize) -> usize {
    (BLOCK_HEADER + payload).div_ceil(SECTOR_PAYLOAD).max(1)
}

/// The largest record payload one block holds.
pub const MAX_BLOCK_PAYLOAD: usize = MAX_BLOCK_SECTORS * SECTOR_PAYLOAD - BLOCK_HEADER;

/// Encodes a log block holding `records` (each a byte string; slot = index) written at
/// sector `offset` of a VLF in use `sequence` with `parity`.
///
/// Block header (in the payload of sector 0): magic u16, sectors u8, reserved u8, VLF
/// sequence u32, block offset (sectors from the VLF start) u32, record count u16, payload
/// length u16 ... see FORMAT.md; then the CRC-32C u32 of all sectors with the CRC as zero.
pub fn encode_block(records: &[&[u8]], sequence: u32, offset: u32, parity: u8) -> Vec<u8> {
    encode_block_flags(records, sequence, offset, parity, 0)
}

/// `encode_block` with flags (`FLAG_VLF_END`).
pub fn encode_block_flags(
    records: &[&[u8]],
    sequence: u32,
    offset: u32,
    parity: u8,
    flags: u8,
) -> Vec<u8> {
    let mut payload = Vec::new();
    for r in records {
        payload.extend_from_slice(&(r.len() as u32).to_le_bytes());
        payload.extend_from_slice(r);
    }
    assert!(
        payload.len() <= MAX_BLOCK_PAYLOAD,
        "log block payload of {} bytes",
        payload.len()
    );
    let sectors = block_sectors(payload.len());
    let mut body = Vec::with_capacity(sectors * SECTOR_PAYLOAD);
    body.extend_from_slice(&BLOCK_MAGIC.to_le_bytes());
    body.push(sectors as u8);
    body.push(flags);
    body.extend_from_slice(&sequence.to_le_bytes());
    body.extend_from_slice(&offset.to_le_bytes());
    body.extend_from_slice(&(records.len() as u16).to_le_bytes());
    body.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    body.extend_from_slice(&[0u8; 4]); // CRC, filled below
    debug_assert_eq!(body.len(), BLOCK_HEADER);
    body.extend_from_slice(&payload);
    body.resize(sectors * SECTOR_PAYLOAD, 0);
    let mut out = spread(&body, parity);
    let crc = block_crc(&out);
    let body_crc_at = 16; // offset of the CRC within the body
    let pos = 1 + body_crc_at; // sector 0, after the parity byte
    out[pos..pos + 4].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Lays body bytes into sectors behind each sector's parity byte.
fn spread(body: &[u8], parity: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() / SECTOR_PAYLOAD * SECTOR_SIZE);
    for chunk in body.chunks(SECTOR_PAYLOAD) {
        out.push(parity);
        out.extend_from_slice(chunk);
    }
    out
}

/// CRC-32C of a block's sectors with the CRC field (sector 0, bytes 17..21) as zero.
fn block_crc(sectors: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&sectors[..17]);
    let crc = crc32c::crc32c_append(crc, &[0u8; 4]);
    crc32c::crc32c_append(crc, &sectors[21..])
}

/// One valid block found by a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Sector offset of the block within its VLF (the LSN's block part).
    pub offset: u32,
    pub sectors: u32,
    pub flags: u8,
    pub records: Vec<Vec<u8>>,
}

/// Decodes the block at the start of `bytes` if it is valid for (`sequence`, `offset`,
/// `parity`) by invariant 1; None ends the log.
pub fn decode_block(bytes: &[u8], sequence: u32, offset: u32, parity: u8) -> Option<Block> {
    if bytes.len() < SECTOR_SIZE || bytes[0] != parity {
        return None;
    }
    let sectors = bytes[1 + 2] as usize;
    let magic = u16::from_le_bytes([bytes[1], bytes[2]]);
    if magic != BLOCK_MAGIC
        || sectors == 0
        || sectors > MAX_BLOCK_SECTORS
        || bytes.len() < sectors * SECTOR_SIZE
    {
        return None;
    }
    let block = &bytes[..sectors * SECTOR_SIZE];
    if block.chunks(SECTOR_SIZE).any(|s| s[0] != parity) {
        return None;
    }
    let stored = u32::from_le_bytes(block[17..21].try_into().ok()?);
    if stored != block_crc(block) {
        return None;
    }
    let body: Vec<u8> = block
        .chunks(SECTOR_SIZE)
        .flat_map(|s| s[1..].iter().copied())
        .collect();
    let u32_at = |i: usize| u32::from_le_bytes(body[i..i + 4].try_into().unwrap());
    if u32_at(4) != sequence || u32_at(8) != offset {
        return None;
    }
    let count = u16::from_le_bytes([body[12], body[13]]) as usize;
    let len = u16::from_le_bytes([body[14], body[15]]) as usize;
    let payload = body.get(BLOCK_HEADER..BLOCK_HEADER + len)?;
    let mut records = Vec::with_capacity(count);
    let mut at = 0;
    for _ in 0..count {
        let n = u32::from_le_bytes(payload.get(at..at + 4)?.try_into().ok()?) as usize;
        records.push(payload.get(at + 4..at + 4 + n)?.to_vec());
        at += 4 + n;
    }
    Some(Block {
        offset,
        sectors: sectors as u32,
        flags: body[3],
        records,
    })
}

/// Scans the blocks of one VLF image (header area included) for use (`sequence`,
/// `parity`), from the first block until the first invalid one: the end of the log.
pub fn scan_vlf(vlf: &[u8], sequence: u32, parity: u8) -> Vec<Block> {
    let mut out = Vec::new();
    let mut pos = VLF_HEADER_AREA as usize;
    while pos + SECTOR_SIZE <= vlf.len() {
        let offset = (pos / SECTOR_SIZE) as u32;
        match decode_block(&vlf[pos..], sequence, offset, parity) {
            Some(b) => {
                pos += b.sectors as usize * SECTOR_SIZE;
                out.push(b);
            }
            None => break,
        }
    }
    out
}

/// Log record type: a full page image (the page as written, its LSN field aside).
pub const REC_PAGE_IMAGE: u8 = 1;

/// Encodes a page-image record: type u8, file id u16, page number u32, the 8,192 bytes.
pub fn encode_page_image(file_id: u16, page: u32, bytes: &[u8]) -> Vec<u8> {
    assert_eq!(
        bytes.len(),
        crate::PAGE_SIZE,
        "page image of {} bytes",
        bytes.len()
    );
    let mut r = Vec::with_capacity(7 + bytes.len());
    r.push(REC_PAGE_IMAGE);
    r.extend_from_slice(&file_id.to_le_bytes());
    r.extend_from_slice(&page.to_le_bytes());
    r.extend_from_slice(bytes);
    r
}

/// Decodes a page-image record into (file id, page number, bytes); None for other records.
pub fn decode_page_image(r: &[u8]) -> Option<(u16, u32, &[u8])> {
    if r.len() != 7 + crate::PAGE_SIZE || r[0] != REC_PAGE_IMAGE {
        return None;
    }
    Some((
        u16::from_le_bytes([r[1], r[2]]),
        u32::from_le_bytes(r[3..7].try_into().ok()?),
        &r[7..],
    ))
}
