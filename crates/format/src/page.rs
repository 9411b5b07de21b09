//! The 8 KiB page and its 96-byte header. See FORMAT.md, "Page header".
//!
//! Invariants:
//! 1. A formatted page's header names the page itself (`this_page`), so a page written to
//!    the wrong place is detected on read.
//! 2. The checksum is CRC-32C over the whole page with the checksum field taken as zero.
//! 3. An all-zero page is `Unformatted`: never written since its space was added.

use crate::codec::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64};
use crate::{corrupt, FileId, FormatError, Lsn, PageId, PageNo, PAGE_HEADER_SIZE, PAGE_SIZE};

/// Page types, numbered as SQL Server numbers them (`m_type` in DBCC PAGE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PageType {
    /// Never written: all bytes zero.
    Unformatted = 0,
    Data = 1,
    Index = 2,
    TextMix = 3,
    TextTree = 4,
    Gam = 8,
    Sgam = 9,
    Iam = 10,
    Pfs = 11,
    Boot = 13,
    FileHeader = 15,
    Dcm = 16,
    Bcm = 17,
    /// A page of the serialized catalog (extentdb's own type; see FORMAT.md, "Catalog").
    Catalog = 30,
}

impl PageType {
    pub fn from_u8(v: u8) -> Option<PageType> {
        use PageType::*;
        Some(match v {
            0 => Unformatted,
            1 => Data,
            2 => Index,
            3 => TextMix,
            4 => TextTree,
            8 => Gam,
            9 => Sgam,
            10 => Iam,
            11 => Pfs,
            13 => Boot,
            15 => FileHeader,
            16 => Dcm,
            17 => Bcm,
            30 => Catalog,
            _ => return None,
        })
    }
}

/// Header format version written in byte 0 of every formatted page.
pub const HEADER_VERSION: u8 = 1;

// Field offsets of the page header (FORMAT.md, "Page header"): the single source of truth.
const OFF_VERSION: usize = 0;
const OFF_TYPE: usize = 1;
const OFF_TYPE_FLAGS: usize = 2;
const OFF_LEVEL: usize = 3;
const OFF_FLAGS: usize = 4;
const OFF_INDEX_ID: usize = 6;
const OFF_PREV: usize = 8;
const OFF_PMINLEN: usize = 14;
const OFF_NEXT: usize = 16;
const OFF_SLOT_COUNT: usize = 22;
const OFF_ALLOC_UNIT: usize = 24;
const OFF_FREE_COUNT: usize = 32;
const OFF_FREE_DATA: usize = 34;
const OFF_THIS: usize = 36;
const OFF_RESERVED_COUNT: usize = 42;
const OFF_LSN: usize = 44;
const OFF_XACT_RESERVED: usize = 54;
const OFF_XDES: usize = 56;
const OFF_GHOST: usize = 64;
/// Offset of the checksum field.
pub const OFF_CHECKSUM: usize = 92;
const _: () = assert!(OFF_CHECKSUM + 4 == PAGE_HEADER_SIZE);

/// The decoded page header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageHeader {
    pub page_type: PageType,
    pub type_flag_bits: u8,
    pub level: u8,
    pub flag_bits: u16,
    pub index_id: u16,
    pub prev_page: PageId,
    pub pminlen: u16,
    pub next_page: PageId,
    pub slot_count: u16,
    /// The allocation unit that owns the page (0 for allocation-map and system pages).
    pub allocation_unit_id: u64,
    pub free_count: u16,
    pub free_data: u16,
    pub this_page: PageId,
    pub reserved_count: u16,
    /// LSN of the last log record that changed the page.
    pub lsn: Lsn,
    pub xact_reserved: u16,
    pub xdes_id: u64,
    pub ghost_rec_count: u16,
    pub checksum: u32,
}

/// The header fields as stored, unvalidated (`Page::raw_header`): the version and type are
/// the raw bytes, so a stale or foreign page shows what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawHeader {
    pub version: u8,
    pub page_type: u8,
    pub type_flag_bits: u8,
    pub level: u8,
    pub flag_bits: u16,
    pub index_id: u16,
    pub prev_page: PageId,
    pub pminlen: u16,
    pub next_page: PageId,
    pub slot_count: u16,
    pub allocation_unit_id: u64,
    pub free_count: u16,
    pub free_data: u16,
    pub this_page: PageId,
    pub reserved_count: u16,
    pub lsn: Lsn,
    pub xact_reserved: u16,
    pub xdes_id: u64,
    pub ghost_rec_count: u16,
    pub checksum: u32,
}

impl PageHeader {
    /// A fresh header for a page of `page_type` at `this_page`, with an empty body.
    pub fn new(page_type: PageType, this_page: PageId) -> PageHeader {
        PageHeader {
            page_type,
            type_flag_bits: 0,
            level: 0,
            flag_bits: 0,
            index_id: 0,
            prev_page: PageId::NULL,
            pminlen: 0,
            next_page: PageId::NULL,
            slot_count: 0,
            allocation_unit_id: 0,
            free_count: (PAGE_SIZE - PAGE_HEADER_SIZE) as u16,
            free_data: PAGE_HEADER_SIZE as u16,
            this_page,
            reserved_count: 0,
            lsn: Lsn::ZERO,
            xact_reserved: 0,
            xdes_id: 0,
            ghost_rec_count: 0,
            checksum: 0,
        }
    }
}

fn put_page_id(b: &mut [u8], pos: usize, p: PageId) {
    put_u32(b, pos, p.page.0);
    put_u16(b, pos + 4, p.file.0);
}

fn get_page_id(b: &[u8], pos: usize) -> PageId {
    PageId {
        page: PageNo(get_u32(b, pos)),
        file: FileId(get_u16(b, pos + 4)),
    }
}

/// One page image. Boxed because 8 KiB is too large to move around on the stack freely.
#[derive(Clone, PartialEq, Eq)]
pub struct Page {
    bytes: Box<[u8; PAGE_SIZE]>,
}

impl std::fmt::Debug for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Page(type={})", self.bytes[OFF_TYPE])
    }
}

impl Default for Page {
    fn default() -> Self {
        Page::zeroed()
    }
}

impl Page {
    /// An all-zero (unformatted) page.
    pub fn zeroed() -> Page {
        Page {
            bytes: Box::new([0u8; PAGE_SIZE]),
        }
    }

    /// A page with `header` written and the body zero.
    pub fn new(header: &PageHeader) -> Page {
        let mut p = Page::zeroed();
        p.set_header(header);
        p
    }

    /// Wraps bytes read from disk; nothing is validated until `verify`/`header`.
    pub fn from_bytes(bytes: &[u8]) -> Result<Page, FormatError> {
        let arr: [u8; PAGE_SIZE] = bytes.try_into().map_err(|_| {
            corrupt(
                PageId::NULL,
                format!("page buffer of {} bytes", bytes.len()),
            )
        })?;
        Ok(Page {
            bytes: Box::new(arr),
        })
    }

    pub fn bytes(&self) -> &[u8; PAGE_SIZE] {
        &self.bytes
    }

    pub fn bytes_mut(&mut self) -> &mut [u8; PAGE_SIZE] {
        &mut self.bytes
    }

    /// The page body after the header.
    pub fn body(&self) -> &[u8] {
        &self.bytes[PAGE_HEADER_SIZE..]
    }

    pub fn body_mut(&mut self) -> &mut [u8] {
        &mut self.bytes[PAGE_HEADER_SIZE..]
    }

    /// The page's bytes as a borrowed view (the read-only methods live there).
    pub fn view(&self) -> PageView<'_> {
        PageView(&self.bytes)
    }

    /// True if every byte is zero: space that was added but never written.
    pub fn is_unformatted(&self) -> bool {
        self.view().is_unformatted()
    }

    /// Writes the header fields (the checksum field is left to `seal`).
    pub fn set_header(&mut self, h: &PageHeader) {
        let b = &mut self.bytes[..];
        b[OFF_VERSION] = HEADER_VERSION;
        b[OFF_TYPE] = h.page_type as u8;
        b[OFF_TYPE_FLAGS] = h.type_flag_bits;
        b[OFF_LEVEL] = h.level;
        put_u16(b, OFF_FLAGS, h.flag_bits);
        put_u16(b, OFF_INDEX_ID, h.index_id);
        put_page_id(b, OFF_PREV, h.prev_page);
        put_u16(b, OFF_PMINLEN, h.pminlen);
        put_page_id(b, OFF_NEXT, h.next_page);
        put_u16(b, OFF_SLOT_COUNT, h.slot_count);
        put_u64(b, OFF_ALLOC_UNIT, h.allocation_unit_id);
        put_u16(b, OFF_FREE_COUNT, h.free_count);
        put_u16(b, OFF_FREE_DATA, h.free_data);
        put_page_id(b, OFF_THIS, h.this_page);
        put_u16(b, OFF_RESERVED_COUNT, h.reserved_count);
        put_u32(b, OFF_LSN, h.lsn.vlf_sequence);
        put_u32(b, OFF_LSN + 4, h.lsn.block);
        put_u16(b, OFF_LSN + 8, h.lsn.slot);
        put_u16(b, OFF_XACT_RESERVED, h.xact_reserved);
        put_u64(b, OFF_XDES, h.xdes_id);
        put_u16(b, OFF_GHOST, h.ghost_rec_count);
    }

    /// Decodes the header without verifying the checksum.
    pub fn header(&self) -> Result<PageHeader, FormatError> {
        self.view().header()
    }

    /// The header fields exactly as stored, with no validation (see `PageView::raw_header`).
    pub fn raw_header(&self) -> RawHeader {
        self.view().raw_header()
    }

    /// The checksum the page should carry: CRC-32C with the checksum field as zero.
    pub fn compute_checksum(&self) -> u32 {
        self.view().compute_checksum()
    }

    /// Stores the checksum; call last, just before the page is written.
    pub fn seal(&mut self) {
        let c = self.compute_checksum();
        put_u32(&mut self.bytes[..], OFF_CHECKSUM, c);
    }

    /// Verifies a page read from `expected` (see `PageView::verify`).
    pub fn verify(&self, expected: PageId) -> Result<PageType, FormatError> {
        self.view().verify(expected)
    }
}

/// A page's bytes borrowed from wherever they are (a `Page`, a read buffer, a mapped
/// file): the read-only half of `Page`, which never copies.
#[derive(Clone, Copy)]
pub struct PageView<'a>(&'a [u8; PAGE_SIZE]);

impl<'a> PageView<'a> {
    pub fn new(bytes: &'a [u8; PAGE_SIZE]) -> PageView<'a> {
        PageView(bytes)
    }

    pub fn bytes(self) -> &'a [u8; PAGE_SIZE] {
        self.0
    }

    /// True if every byte is zero: space that was added but never written.
    pub fn is_unformatted(self) -> bool {
        self.0.iter().all(|&b| b == 0)
    }

    /// Decodes the header without verifying the checksum.
    pub fn header(self) -> Result<PageHeader, FormatError> {
        let b = &self.0[..];
        let this_page = get_page_id(b, OFF_THIS);
        if b[OFF_VERSION] != HEADER_VERSION {
            return Err(corrupt(
                this_page,
                format!(
                    "header version {} (expected {HEADER_VERSION})",
                    b[OFF_VERSION]
                ),
            ));
        }
        let page_type = PageType::from_u8(b[OFF_TYPE])
            .ok_or_else(|| corrupt(this_page, format!("unknown page type {}", b[OFF_TYPE])))?;
        let r = self.raw_header();
        Ok(PageHeader {
            page_type,
            type_flag_bits: r.type_flag_bits,
            level: r.level,
            flag_bits: r.flag_bits,
            index_id: r.index_id,
            prev_page: r.prev_page,
            pminlen: r.pminlen,
            next_page: r.next_page,
            slot_count: r.slot_count,
            allocation_unit_id: r.allocation_unit_id,
            free_count: r.free_count,
            free_data: r.free_data,
            this_page,
            reserved_count: r.reserved_count,
            lsn: r.lsn,
            xact_reserved: r.xact_reserved,
            xdes_id: r.xdes_id,
            ghost_rec_count: r.ghost_rec_count,
            checksum: r.checksum,
        })
    }

    /// The header fields exactly as stored, with no validation: any version and type
    /// (an unformatted page reads as all zeros). For tools that show pages as they are
    /// (DBCC PAGE, `extentdb inspect`).
    pub fn raw_header(self) -> RawHeader {
        let b = &self.0[..];
        RawHeader {
            version: b[OFF_VERSION],
            page_type: b[OFF_TYPE],
            type_flag_bits: b[OFF_TYPE_FLAGS],
            level: b[OFF_LEVEL],
            flag_bits: get_u16(b, OFF_FLAGS),
            index_id: get_u16(b, OFF_INDEX_ID),
            prev_page: get_page_id(b, OFF_PREV),
            pminlen: get_u16(b, OFF_PMINLEN),
            next_page: get_page_id(b, OFF_NEXT),
            slot_count: get_u16(b, OFF_SLOT_COUNT),
            allocation_unit_id: get_u64(b, OFF_ALLOC_UNIT),
            free_count: get_u16(b, OFF_FREE_COUNT),
            free_data: get_u16(b, OFF_FREE_DATA),
            this_page: get_page_id(b, OFF_THIS),
            reserved_count: get_u16(b, OFF_RESERVED_COUNT),
            lsn: Lsn {
                vlf_sequence: get_u32(b, OFF_LSN),
                block: get_u32(b, OFF_LSN + 4),
                slot: get_u16(b, OFF_LSN + 8),
            },
            xact_reserved: get_u16(b, OFF_XACT_RESERVED),
            xdes_id: get_u64(b, OFF_XDES),
            ghost_rec_count: get_u16(b, OFF_GHOST),
            checksum: get_u32(b, OFF_CHECKSUM),
        }
    }

    /// The checksum the page should carry: CRC-32C with the checksum field as zero.
    pub fn compute_checksum(self) -> u32 {
        // crc-fast folds with carry-less multiplies (AVX-512 VPCLMULQDQ where the CPU has
        // it): 2.5 times the crc32 instruction's speed on 8 KB, the same CRC.
        let mut d = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
        d.update(&self.0[..OFF_CHECKSUM]);
        d.update(&[0u8; 4]);
        d.update(&self.0[PAGE_HEADER_SIZE..]);
        d.finalize() as u32
    }

    /// Verifies a page read from `expected`: unformatted pages pass as `Unformatted`,
    /// formatted pages must have a valid checksum and name themselves.
    pub fn verify(self, expected: PageId) -> Result<PageType, FormatError> {
        if self.is_unformatted() {
            return Ok(PageType::Unformatted);
        }
        let stored = get_u32(&self.0[..], OFF_CHECKSUM);
        let actual = self.compute_checksum();
        if stored != actual {
            return Err(corrupt(
                expected,
                format!("incorrect checksum (expected: 0x{stored:08x}; actual: 0x{actual:08x})"),
            ));
        }
        let h = self.header()?;
        if h.this_page != expected {
            return Err(corrupt(
                expected,
                format!(
                    "incorrect pageid (expected {expected}; actual {})",
                    h.this_page
                ),
            ));
        }
        Ok(h.page_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves the page checksum is CRC-32C (Castagnoli) of the page with the checksum field
    /// as zero, computed independently with the crc32 instruction's implementation, over
    /// pages of varied bytes: the format's checksum does not depend on the library.
    #[test]
    fn checksum_is_crc32c_of_the_page_with_a_zero_checksum_field() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..64 {
            let mut p = Page::zeroed();
            for b in p.bytes_mut().iter_mut() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                *b = seed as u8;
            }
            let mut zeroed = *p.bytes();
            zeroed[OFF_CHECKSUM..PAGE_HEADER_SIZE].fill(0);
            assert_eq!(p.compute_checksum(), crc32c::crc32c(&zeroed));
        }
    }

    /// Proves a header round-trips and a sealed page verifies, while one flipped bit fails.
    #[test]
    fn header_round_trip_and_checksum() {
        let mut h = PageHeader::new(PageType::Data, PageId::new(3, 77));
        h.allocation_unit_id = 72057594043170816;
        h.lsn = Lsn {
            vlf_sequence: 37,
            block: 400,
            slot: 1,
        };
        h.next_page = PageId::new(3, 78);
        let mut p = Page::new(&h);
        p.seal();
        let mut back = p.header().unwrap();
        back.checksum = 0;
        assert_eq!(back, h);
        assert_eq!(p.verify(PageId::new(3, 77)), Ok(PageType::Data));
        assert!(p.verify(PageId::new(3, 76)).is_err());
        p.bytes_mut()[5000] ^= 1;
        assert!(p.verify(PageId::new(3, 77)).is_err());
    }

    /// Proves an all-zero page is accepted as unformatted, never as a formatted page.
    #[test]
    fn zero_page_is_unformatted() {
        assert_eq!(
            Page::zeroed().verify(PageId::new(1, 5)),
            Ok(PageType::Unformatted)
        );
    }
}
