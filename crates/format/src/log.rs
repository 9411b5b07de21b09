//! The transaction log's on-disk format: VLF headers, 512-byte sectors with parity, and log
//! blocks. See FORMAT.md, "Log file".
//!
//! A log file is page 0 (file header) followed by virtual log files (VLFs). Each VLF starts
//! with an 8 KiB header area whose first sector holds the `VlfHeader`; log blocks follow at
//! VLF offset 8,192. A block is 1 to 120 sectors (512 B to 60 KiB). Byte 0 of every sector
//! of a block is the parity byte of the VLF's current use: 0x40 the first time the VLF is
//! used, then 0x80, alternating on each reuse; 0 (initialized space) is never valid.
//!
//! Every sector of a block ends with its own CRC-32C (bytes 508-511, over bytes 0-507), so a
//! sector is always in one of three states (`sector_state`): unwritten (all zeros), written
//! whole (its check matches: by some use of the VLF, maybe an older one), or damaged. Sectors
//! are written atomically (FORMAT.md, "Assumptions about the disk"), so a crash leaves only
//! the first two; a damaged sector is corruption wherever it lies.
//!
//! Each block header also records the durable end of the log when the block was written:
//! an LSN (slot 0) before which every block had been made durable by a completed sync. The
//! reader uses it to tell a torn tail from damage (see RECOVERY.md, "The end of the log").
//!
//! Invariants:
//! 1. A block is valid only if every sector carries the current parity and its own check
//!    matches, its header names the VLF's current sequence number and its own offset, its
//!    durable end lies at or before the block itself, and its CRC-32C matches. So torn
//!    blocks (some sectors old), stale blocks from a use two reuses back (same parity, older
//!    sequence) and initialized space all end the log.
//! 2. `scan_vlf` never reads past the VLF and never panics on any bytes.
//! 3. `encode_block_flags` refuses (panics on) a durable end after the block's own start.

use crate::{Lsn, SECTOR_SIZE};

/// Bytes before the first log block of a VLF (its header area).
pub const VLF_HEADER_AREA: u64 = 8192;
/// Sectors in the largest log block (60 KiB).
pub const MAX_BLOCK_SECTORS: usize = 120;
/// Payload bytes of a sector (byte 0 is the parity byte, bytes 508-511 the sector's check).
pub const SECTOR_PAYLOAD: usize = SECTOR_SIZE - 5;
/// Offset of a sector's own CRC-32C (over the bytes before it).
const SECTOR_CHECK: usize = SECTOR_SIZE - 4;
/// Bytes of the block header inside the first sector's payload.
pub const BLOCK_HEADER: usize = 28;
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
/// sector `offset` of a VLF in use `sequence` with `parity`, claiming no durable log.
pub fn encode_block(records: &[&[u8]], sequence: u32, offset: u32, parity: u8) -> Vec<u8> {
    encode_block_flags(records, sequence, offset, parity, 0, Lsn::ZERO)
}

/// `encode_block` with flags (`FLAG_VLF_END`) and the durable end of the log the writer
/// knew when it wrote the block (invariant 3: at or before the block itself).
///
/// Block header (body bytes 0-27): magic u16, sectors u8, flags u8, VLF sequence u32, block
/// offset (sectors from the VLF start) u32, record count u16, payload length u16, CRC-32C
/// u32 of the body with the CRC as zero, durable end FSeqNo u32 and block offset u32.
pub fn encode_block_flags(
    records: &[&[u8]],
    sequence: u32,
    offset: u32,
    parity: u8,
    flags: u8,
    durable: Lsn,
) -> Vec<u8> {
    assert!(
        durable_end_fits(durable, sequence, offset),
        "block {sequence}:{offset} claims the log durable up to {durable}"
    );
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
    body.extend_from_slice(&durable.vlf_sequence.to_le_bytes());
    body.extend_from_slice(&durable.block.to_le_bytes());
    debug_assert_eq!(body.len(), BLOCK_HEADER);
    body.extend_from_slice(&payload);
    body.resize(sectors * SECTOR_PAYLOAD, 0);
    let crc = crc32c::crc32c(&body);
    body[BODY_CRC..BODY_CRC + 4].copy_from_slice(&crc.to_le_bytes());
    spread(&body, parity)
}

/// Offset of the block CRC within the body.
const BODY_CRC: usize = 16;

/// True if a block at `sequence`:`offset` may claim the log durable up to `durable`: never
/// past its own start (nothing after a block is written before it).
fn durable_end_fits(durable: Lsn, sequence: u32, offset: u32) -> bool {
    (durable.vlf_sequence, durable.block) <= (sequence, offset) && durable.slot == 0
}

/// Lays body bytes into sectors behind each sector's parity byte, each sector closed by its
/// own check.
fn spread(body: &[u8], parity: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() / SECTOR_PAYLOAD * SECTOR_SIZE);
    for chunk in body.chunks(SECTOR_PAYLOAD) {
        let start = out.len();
        out.push(parity);
        out.extend_from_slice(chunk);
        let check = crc32c::crc32c(&out[start..]);
        out.extend_from_slice(&check.to_le_bytes());
    }
    out
}

/// What a sector holds, by its own bytes alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SectorState {
    /// All zeros: initialized or zeroed space, never written as log.
    Unwritten,
    /// Written whole by some use of the VLF (its check matches); byte 0 is that use's parity.
    Written { parity: u8 },
    /// Neither: not something a write, whole or lost, can leave behind (sectors are atomic).
    Damaged,
}

/// Classifies one 512-byte sector.
pub fn sector_state(s: &[u8]) -> SectorState {
    let s = &s[..SECTOR_SIZE];
    let stored = u32::from_le_bytes(s[SECTOR_CHECK..].try_into().unwrap());
    if stored == crc32c::crc32c(&s[..SECTOR_CHECK]) && s[0] != 0 {
        SectorState::Written { parity: s[0] }
    } else if s.iter().all(|&b| b == 0) {
        SectorState::Unwritten
    } else {
        SectorState::Damaged
    }
}

/// One valid block found by a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Sector offset of the block within its VLF (the LSN's block part).
    pub offset: u32,
    pub sectors: u32,
    pub flags: u8,
    /// The durable end of the log when the block was written: every block before this LSN
    /// had been synced.
    pub durable: Lsn,
    pub records: Vec<Vec<u8>>,
}

/// The sector count a block starting with `bytes` declares for use (`sequence`, `offset`,
/// `parity`), if its first sector is written whole by that use and names it.
fn declared_sectors(bytes: &[u8], sequence: u32, offset: u32, parity: u8) -> Option<usize> {
    if bytes.len() < SECTOR_SIZE || sector_state(bytes) != (SectorState::Written { parity }) {
        return None;
    }
    let u32_at = |i: usize| u32::from_le_bytes(bytes[1 + i..5 + i].try_into().unwrap());
    let sectors = bytes[1 + 2] as usize;
    let sane = u16::from_le_bytes([bytes[1], bytes[2]]) == BLOCK_MAGIC
        && (1..=MAX_BLOCK_SECTORS).contains(&sectors);
    (sane && u32_at(4) == sequence && u32_at(8) == offset).then_some(sectors)
}

/// Decodes the block at the start of `bytes` if it is valid for (`sequence`, `offset`,
/// `parity`) by invariant 1; None ends the log.
pub fn decode_block(bytes: &[u8], sequence: u32, offset: u32, parity: u8) -> Option<Block> {
    let sectors = declared_sectors(bytes, sequence, offset, parity)?;
    let block = bytes.get(..sectors * SECTOR_SIZE)?;
    let whole = SectorState::Written { parity };
    if block.chunks(SECTOR_SIZE).any(|s| sector_state(s) != whole) {
        return None;
    }
    let mut body: Vec<u8> = block
        .chunks(SECTOR_SIZE)
        .flat_map(|s| s[1..SECTOR_CHECK].iter().copied())
        .collect();
    let stored = u32::from_le_bytes(body[BODY_CRC..BODY_CRC + 4].try_into().ok()?);
    body[BODY_CRC..BODY_CRC + 4].fill(0);
    if stored != crc32c::crc32c(&body) {
        return None;
    }
    let u32_at = |i: usize| u32::from_le_bytes(body[i..i + 4].try_into().unwrap());
    let durable = Lsn {
        vlf_sequence: u32_at(20),
        block: u32_at(24),
        slot: 0,
    };
    if !durable_end_fits(durable, sequence, offset) {
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
        durable,
        records,
    })
}

/// What lies where a scan of use (`sequence`, `parity`) stopped, at sector `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The first sector was never written (zeros).
    Unwritten,
    /// Every sector is whole, yet they make no valid block of this use: a torn write (some
    /// sectors still hold what an older use or the initialization left) or a stale block.
    Stale,
    /// The sector at this index (from `offset`) is damaged: corruption, never a crash.
    Damaged { sector: usize },
}

/// Classifies the bytes at the point a scan stopped: the sectors the first one declares for
/// this use (one sector if it declares nothing).
pub fn classify_ending(bytes: &[u8], sequence: u32, offset: u32, parity: u8) -> Ending {
    let declared = declared_sectors(bytes, sequence, offset, parity).unwrap_or(1);
    let sectors = declared.min(bytes.len() / SECTOR_SIZE);
    let damaged = (0..sectors).find(|&k| {
        sector_state(&bytes[k * SECTOR_SIZE..(k + 1) * SECTOR_SIZE]) == SectorState::Damaged
    });
    match damaged {
        Some(sector) => Ending::Damaged { sector },
        None if sectors > 0 && sector_state(bytes) == SectorState::Unwritten => Ending::Unwritten,
        None => Ending::Stale,
    }
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
