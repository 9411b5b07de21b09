//! DBCC PAGE's text, shared by the statement (`exec/admin.rs`) and `extentdb inspect`: the
//! sections and field names SQL Server prints (PAGE, BUFFER, PAGE HEADER, Allocation
//! Status, DATA, OFFSET TABLE), from a page's bytes as they are. Nothing here reads files:
//! callers hand in the page, the allocation-map pages of its interval and, for printopt 3,
//! the table whose allocation unit owns it.
//!
//! Invariants:
//! 1. Any 8,192 bytes format without error or panic: the header is read raw
//!    (`Page::raw_header`), slot offsets and record framing are bounds-checked, and a record
//!    that does not frame is dumped up to the slot array instead.
//! 2. printopt 0 prints the header only; 1 adds per-record dumps and the offset table; 2 the
//!    whole page and the offset table; 3 per-record dumps and each column's value (known
//!    tables' data pages), as SQL Server does (no offset table).
//!
//! Addresses (`BUF @0x...`, `Memory Dump @0x...`) are those of the copy formatted; buffer
//! fields extentdb does not have print as 0.

use extentdb_format::catalog::TableEntry;
use extentdb_format::layout::{self, BitmapKind};
use extentdb_format::record::{self, ColumnLayout, RecordType};
use extentdb_format::{
    pfs, Page, PageId, PageNo, GAM_INTERVAL_EXTENTS, PAGES_PER_EXTENT, PAGE_HEADER_SIZE, PAGE_SIZE,
};

use crate::render::format_value;
use crate::rowcodec::{self, StoredType};
use crate::types::Value;

/// The allocation-map pages that describe one page: GAM, SGAM, PFS, DCM (DIFF), BCM (ML).
/// A map page that could not be read counts as zeros (its unwritten state).
pub struct AllocMaps {
    pub gam: (PageId, Option<Page>),
    pub sgam: (PageId, Option<Page>),
    pub pfs: (PageId, Option<Page>),
    pub dcm: (PageId, Option<Page>),
    pub bcm: (PageId, Option<Page>),
}

/// Reads the allocation-map pages of `pid`'s interval through `read`.
pub fn read_maps(pid: PageId, mut read: impl FnMut(PageId) -> Option<Page>) -> AllocMaps {
    let interval = pid.page.0 / PAGES_PER_EXTENT / GAM_INTERVAL_EXTENTS;
    let mut map = |p: PageNo| {
        let at = PageId {
            file: pid.file,
            page: p,
        };
        (at, read(at))
    };
    AllocMaps {
        gam: map(layout::bitmap_page(BitmapKind::Gam, interval)),
        sgam: map(layout::bitmap_page(BitmapKind::Sgam, interval)),
        pfs: map(layout::pfs_page_for(pid.page)),
        dcm: map(layout::bitmap_page(BitmapKind::Dcm, interval)),
        bcm: map(layout::bitmap_page(BitmapKind::Bcm, interval)),
    }
}

/// What the formatter knows besides the page's bytes.
pub struct PageContext<'a> {
    pub database_id: u16,
    /// The page was a dirty buffer (`bstat`).
    pub dirty: bool,
    pub maps: AllocMaps,
    /// The table whose allocation unit the header names, if the catalog has it.
    pub table: Option<&'a TableEntry>,
}

/// Width of one field column in SQL Server's header lines.
const FIELD: usize = 36;

/// Fields laid out in 36-character columns, three to a line; a longer field takes the next
/// column too, and a field that would pass the third column starts a new line.
fn fields(items: &[String]) -> String {
    let mut s = String::new();
    let mut line_start = 0;
    for f in items {
        if s.len() > line_start && s.len() - line_start + f.len() > 3 * FIELD {
            s.truncate(s.trim_end().len());
            s.push('\n');
            line_start = s.len();
        }
        s.push_str(f);
        let width = f.len().div_ceil(FIELD).max(1) * FIELD;
        let width = if f.len() == width {
            width + FIELD
        } else {
            width
        };
        s.push_str(&" ".repeat(width - f.len()));
    }
    s.trim_end().to_string()
}

fn addr<T: ?Sized>(p: *const T) -> String {
    format!("0x{:016X}", p as *const u8 as usize)
}

/// Hex dump lines in SQL Server's layout: the offset (or address), 20 bytes in five groups
/// of four, then the bytes as ASCII ('.' for anything unprintable).
fn hex_dump(bytes: &[u8], base: u64, out: &mut Vec<String>) {
    for (i, chunk) in bytes.chunks(20).enumerate() {
        let mut hex = String::with_capacity(44);
        for (g, group) in chunk.chunks(4).enumerate() {
            if g > 0 {
                hex.push(' ');
            }
            for b in group {
                hex.push_str(&format!("{b:02x}"));
            }
        }
        let ascii: String = chunk
            .iter()
            .map(|&b| {
                if (0x20..0x7f).contains(&b) {
                    b as char
                } else {
                    '.'
                }
            })
            .collect();
        out.push(format!(
            "{:016X}:   {hex:<44}  {ascii}",
            base + (i * 20) as u64
        ));
    }
}

fn bit(map: &Option<Page>, index: u32) -> bool {
    map.as_ref()
        .is_some_and(|p| extentdb_format::bitmap::get_bit(p, index))
}

/// A PFS byte as SQL Server prints it: `0x60 MIXED_EXT ALLOCATED   0_PCT_FULL`, and for an
/// unallocated page `0x0   0_PCT_FULL`.
pub fn pfs_text(v: u8) -> String {
    let mut s = format!("0x{v:x}");
    if v & pfs::IAM_PAGE != 0 {
        s.push_str(" IAM_PG");
    }
    if v & pfs::MIXED_EXTENT != 0 {
        s.push_str(" MIXED_EXT");
    }
    if v & pfs::ALLOCATED != 0 {
        s.push_str(" ALLOCATED");
    }
    let pct = match v & pfs::FULLNESS_MASK {
        0 => 0,
        1 => 50,
        2 => 80,
        3 => 95,
        _ => 100,
    };
    s.push_str(&format!(" {pct:>3}_PCT_FULL"));
    if v & pfs::GHOST_RECORDS != 0 {
        s.push_str(" Has Ghost");
    }
    s
}

fn record_type_name(rec: &[u8]) -> String {
    match record::record_type(rec) {
        Ok(RecordType::Primary) => "PRIMARY_RECORD".into(),
        Ok(RecordType::Forwarded) => "FORWARDED_RECORD".into(),
        Ok(RecordType::ForwardingStub) => "FORWARDING_STUB".into(),
        Ok(RecordType::Index) => "INDEX_RECORD".into(),
        Ok(RecordType::GhostIndex) => "GHOST_INDEX_RECORD".into(),
        Ok(RecordType::GhostData) => "GHOST_DATA_RECORD".into(),
        Err(_) => format!("UNKNOWN ({})", rec.first().map_or(0, |b| (b >> 1) & 7)),
    }
}

/// The lines DBCC PAGE prints for page `pid` (whose bytes are `page`) with `printopt`.
pub fn format_page(pid: PageId, page: &Page, printopt: u8, ctx: &PageContext<'_>) -> Vec<String> {
    let lines = format_lines(pid, page, printopt, ctx);
    // `fields` may have wrapped a line.
    lines
        .iter()
        .flat_map(|l| l.split('\n').map(str::to_string))
        .collect()
}

fn format_lines(pid: PageId, page: &Page, printopt: u8, ctx: &PageContext<'_>) -> Vec<String> {
    let b = page.bytes();
    let h = page.raw_header();
    let page_addr = b.as_ptr() as usize as u64;
    let mut out = vec![String::new(), format!("PAGE: {pid}"), String::new()];
    out.extend([
        String::new(),
        "BUFFER:".into(),
        String::new(),
        String::new(),
    ]);
    out.push(format!("BUF @{}", addr(page as *const Page)));
    out.push(String::new());
    let zero = "0x0000000000000000".to_string();
    let bstat = if ctx.dirty { "0xb" } else { "0x9" };
    for row in [
        [
            format!("bpage = {}", addr(b.as_ptr())),
            format!("bPmmpage = {zero}"),
            format!("bsort_r_nextbP = {zero}"),
        ],
        [
            format!("bsort_r_prevbP = {zero}"),
            format!("bhash = {zero}"),
            format!("bpageno = {pid}"),
        ],
        [
            "bpart = 0".into(),
            format!("ckptGen = {zero}"),
            "bDirtyRefCount = 0".into(),
        ],
        [
            format!("bstat = {bstat}"),
            "breferences = 0".into(),
            "berrcode = 0".into(),
        ],
        [
            "bUse1 = 0".into(),
            "bstat2 = 0x0".into(),
            "blog = 0x0".into(),
        ],
        [
            "bsampleCount = 0".into(),
            "bIoCount = 0".into(),
            "resPoolId = 0".into(),
        ],
        [
            "bcputicks = 0".into(),
            "bReadMicroSec = 0".into(),
            format!("bDirtyContext = {zero}"),
        ],
        [
            format!("bDbPageBroker = {zero}"),
            format!("bdbid = {}", ctx.database_id),
            format!("bpru = {zero}"),
        ],
    ] {
        out.push(fields(&row));
    }
    out.extend([
        String::new(),
        "PAGE HEADER:".into(),
        String::new(),
        String::new(),
    ]);
    out.push(format!("Page @{}", addr(b.as_ptr())));
    out.push(String::new());
    let au = h.allocation_unit_id;
    let (object_id, index_id, partition_id): (i64, i64, u64) = match ctx.table {
        Some(t) => (t.object_id as i64, t.index_id as i64, au),
        None if au == 0 => (99, 0, 0),
        None => (0, -1, 0),
    };
    let lsn = h.lsn;
    out.push(fields(&[
        format!("m_pageId = {}", h.this_page),
        format!("m_headerVersion = {}", h.version),
        format!("m_type = {}", h.page_type),
    ]));
    out.push(fields(&[
        format!("m_typeFlagBits = 0x{:x}", h.type_flag_bits),
        format!("m_level = {}", h.level),
        format!("m_flagBits = 0x{:x}", h.flag_bits),
    ]));
    out.push(fields(&[
        format!("m_objId (AllocUnitId.idObj) = {}", (au >> 16) & 0xffff_ffff),
        format!("m_indexId (AllocUnitId.idInd) = {}", h.index_id),
    ]));
    out.push(fields(&[format!("Metadata: AllocUnitId = {au}")]));
    out.push(fields(&[
        format!("Metadata: PartitionId = {partition_id}"),
        format!("Metadata: IndexId = {index_id}"),
    ]));
    out.push(fields(&[
        format!("Metadata: ObjectId = {object_id}"),
        format!("m_prevPage = {}", h.prev_page),
        format!("m_nextPage = {}", h.next_page),
    ]));
    out.push(fields(&[
        format!("pminlen = {}", h.pminlen),
        format!("m_slotCnt = {}", h.slot_count),
        format!("m_freeCnt = {}", h.free_count),
    ]));
    out.push(fields(&[
        format!("m_freeData = {}", h.free_data),
        format!("m_reservedCnt = {}", h.reserved_count),
        format!("m_lsn = ({}:{}:{})", lsn.vlf_sequence, lsn.block, lsn.slot),
    ]));
    out.push(fields(&[
        format!("m_xactReserved = {}", h.xact_reserved),
        format!(
            "m_xdesId = ({}:{})",
            h.xdes_id >> 32,
            h.xdes_id & 0xffff_ffff
        ),
        format!("m_ghostRecCnt = {}", h.ghost_rec_count),
    ]));
    out.push(fields(&[
        format!("m_tornBits = {}", h.checksum as i32),
        "DB Frag ID = 1".into(),
    ]));
    // Allocation status from the maps of the page's interval.
    let m = &ctx.maps;
    let bit_index = (pid.page.0 / PAGES_PER_EXTENT) % GAM_INTERVAL_EXTENTS;
    let pfs_value = m.pfs.1.as_ref().map_or(0, |p| {
        let first = pfs::first_covered(m.pfs.0.page).0;
        b_at(p, PAGE_HEADER_SIZE + (pid.page.0 - first) as usize)
    });
    let yes_no = |v: bool, yes: &str, no: &str| if v { yes.to_string() } else { no.to_string() };
    out.extend([String::new(), "Allocation Status".into(), String::new()]);
    out.push(fields(&[
        format!(
            "GAM {} = {}",
            m.gam.0,
            // GAM bit 1 = extent free.
            yes_no(bit(&m.gam.1, bit_index), "NOT ALLOCATED", "ALLOCATED")
        ),
        format!(
            "SGAM {} = {}",
            m.sgam.0,
            yes_no(bit(&m.sgam.1, bit_index), "ALLOCATED", "NOT ALLOCATED")
        ),
    ]));
    out.push(fields(&[
        format!("PFS {} = {}", m.pfs.0, pfs_text(pfs_value)),
        format!(
            "DIFF {} = {}",
            m.dcm.0,
            yes_no(bit(&m.dcm.1, bit_index), "CHANGED", "NOT CHANGED")
        ),
    ]));
    out.push(fields(&[format!(
        "ML {} = {}",
        m.bcm.0,
        yes_no(bit(&m.bcm.1, bit_index), "MIN_LOGGED", "NOT MIN_LOGGED")
    )]));
    out.push(String::new());
    if printopt == 0 || printopt > 3 {
        return out;
    }
    // Pages with a slot array: data and index pages, and unformatted ones (no slots).
    let slotted = matches!(h.page_type, 0..=2);
    out.extend(["DATA:".into(), String::new(), String::new()]);
    if printopt == 2 || !slotted {
        out.push(format!("Memory Dump @{}", addr(b.as_ptr())));
        out.push(String::new());
        hex_dump(&b[..], page_addr, &mut out);
        out.push(String::new());
        if slotted {
            offset_table(page, &mut out);
        }
        return out;
    }
    let slots = slots(page);
    let layouts = ctx.table.and_then(table_layouts);
    for (slot, off) in slots.iter().copied().enumerate() {
        let Some(rec) = record_at(page, off, slots.len()) else {
            continue;
        };
        if printopt == 1 {
            out.push(format!(
                "Slot {slot}, Offset 0x{off:x}, Length {}, DumpStyle BYTE",
                rec.len()
            ));
        } else {
            out.push(format!("Slot {slot} Offset 0x{off:x} Length {}", rec.len()));
        }
        out.push(String::new());
        let mut attrs = "NULL_BITMAP".to_string();
        if rec.first().is_some_and(|s| s & 0x20 != 0) {
            attrs.push_str(" VARIABLE_COLUMNS");
        }
        out.push(fields(&[
            format!("Record Type = {}", record_type_name(rec)),
            format!("Record Attributes =  {attrs}"),
            format!("Record Size = {}", rec.len()),
        ]));
        out.push(String::new());
        out.push(format!("Memory Dump @{}", addr(rec.as_ptr())));
        out.push(String::new());
        hex_dump(rec, 0, &mut out);
        out.push(String::new());
        if printopt == 3 {
            if let (Some((table, types)), Ok(RecordType::Primary)) =
                (&layouts, record::record_type(rec))
            {
                columns(slot, rec, table, types, &mut out);
            }
        }
    }
    if printopt == 1 {
        offset_table(page, &mut out);
    }
    out
}

fn b_at(p: &Page, i: usize) -> u8 {
    p.bytes().get(i).copied().unwrap_or(0)
}

/// The slot array's offsets, bounded by the room a slot array can have.
fn slots(page: &Page) -> Vec<u16> {
    let b = page.bytes();
    let n = (page.raw_header().slot_count as usize).min((PAGE_SIZE - PAGE_HEADER_SIZE) / 2);
    (0..n)
        .map(|i| {
            let at = PAGE_SIZE - 2 * (i + 1);
            u16::from_le_bytes([b[at], b[at + 1]])
        })
        .collect()
}

/// The record a slot points at: framed by its own header, or, when that does not frame,
/// the bytes up to the slot array (at most a record's maximum size).
fn record_at(page: &Page, off: u16, slot_count: usize) -> Option<&[u8]> {
    let off = off as usize;
    let end = PAGE_SIZE - 2 * slot_count;
    if off < PAGE_HEADER_SIZE || off >= end {
        return None;
    }
    let area = &page.bytes()[off..end];
    let len = match record::record_len(area) {
        Ok(n) if n <= area.len() => n,
        _ => area.len().min(record::MAX_RECORD_SIZE),
    };
    Some(&area[..len])
}

fn offset_table(page: &Page, out: &mut Vec<String>) {
    out.extend(["OFFSET TABLE:".into(), String::new(), "Row - Offset".into()]);
    for (slot, off) in slots(page).iter().enumerate().rev() {
        out.push(format!("{slot} (0x{slot:x}) - {off} (0x{off:x})"));
    }
    out.push(String::new());
}

type ColumnTypes = Vec<(crate::types::SqlType, ColumnLayout)>;

fn table_layouts(t: &TableEntry) -> Option<(&TableEntry, ColumnTypes)> {
    let mut v = Vec::new();
    for c in &t.columns {
        let ty = rowcodec::sql_type(StoredType {
            system_type_id: c.system_type_id,
            max_length: c.max_length,
            precision: c.precision,
            scale: c.scale,
        })?;
        let l = match rowcodec::layout(ty) {
            rowcodec::Layout::Fixed(n) => ColumnLayout::Fixed(n),
            rowcodec::Layout::Variable => ColumnLayout::Variable,
        };
        v.push((ty, l));
    }
    Some((t, v))
}

/// `Slot n Column c Offset 0x.. Length n Length (physical) n` and `name = value` per column.
fn columns(slot: usize, rec: &[u8], t: &TableEntry, types: &ColumnTypes, out: &mut Vec<String>) {
    let layouts: Vec<ColumnLayout> = types.iter().map(|(_, l)| *l).collect();
    let Ok(values) = record::decode(&layouts, rec) else {
        return;
    };
    for (i, (c, v)) in t.columns.iter().zip(values).enumerate() {
        let (off, len) = match v {
            Some(bytes) => (bytes.as_ptr() as usize - rec.as_ptr() as usize, bytes.len()),
            None => (0, 0),
        };
        out.push(format!(
            "Slot {slot} Column {} Offset 0x{off:x} Length {len} Length (physical) {len}",
            i + 1
        ));
        out.push(String::new());
        let ty = types[i].0;
        let text = match rowcodec::decode(ty, v) {
            Ok(Value::Null) => "[NULL]".to_string(),
            Ok(val) => format_value(&val, ty),
            Err(e) => format!("[{e}]"),
        };
        out.push(format!("{} = {text}", c.name));
        out.push(String::new());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_maps(pid: PageId) -> AllocMaps {
        read_maps(pid, |_| None)
    }

    /// Proves any bytes format without panicking: zeros, and a page of 0xff (a slot count
    /// far beyond the page, slot offsets outside it).
    #[test]
    fn garbage_pages_format() {
        for fill in [0u8, 0xff, 0x30] {
            let page = Page::from_bytes(&[fill; PAGE_SIZE]).unwrap();
            let pid = PageId::new(1, 300);
            for opt in 0..=3 {
                let ctx = PageContext {
                    database_id: 5,
                    dirty: false,
                    maps: no_maps(pid),
                    table: None,
                };
                let lines = format_page(pid, &page, opt, &ctx);
                assert!(lines.iter().any(|l| l.starts_with("m_pageId = ")));
            }
        }
    }

    /// Pins the hex dump layout: offset, five groups of four bytes, then the ASCII column.
    #[test]
    fn hex_dump_layout() {
        let mut out = Vec::new();
        hex_dump(b"JunkJunkJunkJunkJunk\x00\x01Ju", 0, &mut out);
        assert_eq!(
            out[0],
            "0000000000000000:   4a756e6b 4a756e6b 4a756e6b 4a756e6b 4a756e6b  JunkJunkJunkJunkJunk"
        );
        assert_eq!(
            out[1],
            format!("0000000000000014:   00014a75{}  ..Ju", " ".repeat(36))
        );
        assert_eq!(pfs_text(0x60), "0x60 MIXED_EXT ALLOCATED   0_PCT_FULL");
        assert_eq!(pfs_text(0x44), "0x44 ALLOCATED 100_PCT_FULL");
        assert_eq!(pfs_text(0x00), "0x0   0_PCT_FULL");
    }
}
