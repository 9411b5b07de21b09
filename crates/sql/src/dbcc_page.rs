//! DBCC PAGE's output, shared by the statement (`exec/admin.rs`) and `extentdb inspect`:
//! the sections and field names SQL Server prints (PAGE, BUFFER, PAGE HEADER, Allocation
//! Status, DATA, OFFSET TABLE), from a page's bytes as they are, as text or, WITH
//! TABLERESULTS, as rows. Nothing here reads files: callers hand in the page, the
//! allocation-map pages of its interval and, for printopt 3, the table whose allocation
//! unit owns it.
//!
//! Invariants:
//! 1. Any 8,192 bytes format without error or panic: the header is read raw
//!    (`Page::raw_header`), slot offsets and record framing are bounds-checked, and a record
//!    that does not frame is dumped up to the slot array instead.
//! 2. printopt 0 prints the header only; 1 adds per-record dumps and the offset table; 2 the
//!    whole page and the offset table; 3 per-record dumps and each column's value (known
//!    tables' data pages), as SQL Server does (no offset table). For an index page (a
//!    nonclustered index's leaf or upper level, a clustered index's upper level), printopt
//!    3 prints the header only and the rows come as a result set (`index_rows`): FileId,
//!    PageId, Row, Level, ChildFileId and ChildPageId above the leaf, the key columns as
//!    "name (key)", the locator ("HEAP RID" or the clustered key), KeyHashValue at the
//!    leaf, Row Size.
//! 3. The text and the TABLERESULTS rows come from one list of `Part`s (`parts`), so they
//!    cannot disagree: each `name = value` field is a row (ParentObject = the section
//!    heading, `BUFFER:`, `PAGE HEADER:`, or the record's `Slot n Offset ..` line; Object =
//!    the heading under it, `BUF @..`, `Page @..`, `Allocation Status`, `Memory Dump @..`,
//!    `Slot n Column c Offset .. Length (physical) ..`; Field = name; VALUE = value), each
//!    hex dump line a row with an empty Field, each offset table line a row (row, offset).
//!    Lines that are headings only (`PAGE: (1:24)`, empty lines) are no row. An index page
//!    at printopt 3 gives its header's rows and then its rows' result set (`index_rows`),
//!    so INSERT ... EXEC of it into one four-column table is 213 (two shapes of result).
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
fn hex_dump(bytes: &[u8], base: u64, out: &mut Vec<Part>) {
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
        out.push(Part::Dump(format!(
            "{:016X}:   {hex:<44}  {ascii}",
            base + (i * 20) as u64
        )));
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

/// One step of DBCC PAGE's output, the one source of both its forms (invariant 3): the
/// text prints each part as its line(s); WITH TABLERESULTS makes each field, dump line and
/// offset-table line a row (ParentObject, Object, Field, VALUE) under the latest section
/// (`Parent`) and object (`Object`) heading.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    /// A line of the text only (`PAGE: (1:24)`, an empty line).
    Text(String),
    /// A section heading (`BUFFER:`, `PAGE HEADER:`, `DATA:`, `OFFSET TABLE:`): printed,
    /// and the ParentObject of the rows after it.
    Parent(String),
    /// A heading within a section (`BUF @0x..`, `Allocation Status`, `Memory Dump @0x..`,
    /// `Slot 0 Column 1 Offset ..`): printed, and the Object of the rows after it.
    Object(String),
    /// A record's heading (`Slot 0 Offset 0x60 Length 15`): its ParentObject and Object.
    Slot(String),
    /// Fields printed `name = value`, three to a line (`fields`); a row each. A value may
    /// open with a space the text keeps (`Record Attributes =  NULL_BITMAP`); its row not.
    Fields(Vec<(String, String)>),
    /// A column's value on a line of its own, printed `name = value` as it is.
    Field(String, String),
    /// A hex dump line (`OFFSET:   hex groups  ascii`): printed; a row with an empty Field.
    Dump(String),
    /// An offset table line, printed `row - offset`; a row (row, offset).
    Offset(String, String),
}

fn text_of(parts: &[Part]) -> Vec<String> {
    let mut out = Vec::with_capacity(parts.len());
    for p in parts {
        match p {
            Part::Text(l) | Part::Parent(l) | Part::Object(l) | Part::Slot(l) | Part::Dump(l) => {
                out.push(l.clone())
            }
            Part::Fields(items) => {
                let items: Vec<String> = items.iter().map(|(n, v)| format!("{n} = {v}")).collect();
                // `fields` may have wrapped a line.
                out.extend(fields(&items).split('\n').map(str::to_string));
            }
            Part::Field(n, v) => out.push(format!("{n} = {v}")),
            Part::Offset(row, off) => out.push(format!("{row} - {off}")),
        }
    }
    out
}

/// The TABLERESULTS rows of `parts`: (ParentObject, Object, Field, VALUE).
fn rows_of(parts: &[Part]) -> Vec<[String; 4]> {
    let (mut parent, mut object) = (String::new(), String::new());
    let mut rows = Vec::new();
    for p in parts {
        match p {
            Part::Text(_) => {}
            Part::Parent(h) => (parent, object) = (h.clone(), String::new()),
            Part::Object(h) => object = h.clone(),
            Part::Slot(h) => (parent, object) = (h.clone(), h.clone()),
            Part::Fields(items) => rows.extend(items.iter().map(|(n, v)| {
                [
                    parent.clone(),
                    object.clone(),
                    n.clone(),
                    v.trim_start().to_string(),
                ]
            })),
            Part::Field(n, v) => rows.push([parent.clone(), object.clone(), n.clone(), v.clone()]),
            Part::Dump(l) => rows.push([parent.clone(), object.clone(), String::new(), l.clone()]),
            Part::Offset(r, o) => rows.push([parent.clone(), object.clone(), r.clone(), o.clone()]),
        }
    }
    rows
}

/// The lines DBCC PAGE prints for page `pid` (whose bytes are `page`) with `printopt`.
pub fn format_page(pid: PageId, page: &Page, printopt: u8, ctx: &PageContext<'_>) -> Vec<String> {
    text_of(&parts(pid, page, printopt, ctx, false))
}

/// `format_page` of an index page at printopt 3 (invariant 2): the header's lines, and the
/// rows as a result set's columns and rows; None for any other page or option.
pub fn format_index_page(
    pid: PageId,
    page: &Page,
    printopt: u8,
    ctx: &PageContext<'_>,
) -> Option<(Vec<String>, IndexRows)> {
    let rows = (printopt == 3)
        .then(|| index_rows(pid, page, ctx))
        .flatten()?;
    Some((text_of(&parts(pid, page, printopt, ctx, true)), rows))
}

/// The columns of DBCC PAGE WITH TABLERESULTS, SQL Server's names; each text of up to
/// 255 characters but VALUE, which holds a column's whole value.
pub fn table_results_columns() -> Vec<(String, crate::types::SqlType)> {
    use crate::types::{SqlType, MAX_LENGTH};
    let name = SqlType::NVarChar(255);
    vec![
        ("ParentObject".into(), name),
        ("Object".into(), name),
        ("Field".into(), name),
        ("VALUE".into(), SqlType::NVarChar(MAX_LENGTH)),
    ]
}

/// DBCC PAGE WITH TABLERESULTS (invariant 3): the rows of `format_page`'s facts under
/// `table_results_columns`; for an index page at printopt 3 the header's rows and then
/// the index rows as their own result set, as `format_index_page` gives them.
pub fn table_results(
    pid: PageId,
    page: &Page,
    printopt: u8,
    ctx: &PageContext<'_>,
) -> (Vec<Vec<Value>>, Option<IndexRows>) {
    let index = (printopt == 3)
        .then(|| index_rows(pid, page, ctx))
        .flatten();
    let rows = rows_of(&parts(pid, page, printopt, ctx, index.is_some()))
        .into_iter()
        .map(|r| r.into_iter().map(Value::Text).collect())
        .collect();
    (rows, index)
}

/// Every part of DBCC PAGE's output; `grid` stops after the header (an index page at
/// printopt 3, whose rows are a result set).
fn parts(pid: PageId, page: &Page, printopt: u8, ctx: &PageContext<'_>, grid: bool) -> Vec<Part> {
    let blank = || Part::Text(String::new());
    let mut out = vec![blank(), Part::Text(format!("PAGE: {pid}")), blank()];
    buffer_parts(pid, page, ctx, &mut out);
    header_parts(page, ctx, &mut out);
    allocation_parts(pid, ctx, &mut out);
    if printopt == 0 || printopt > 3 || grid {
        return out;
    }
    data_parts(page, printopt, ctx, &mut out);
    out
}

/// BUFFER: the buffer's fields; those extentdb does not have are 0.
fn buffer_parts(pid: PageId, page: &Page, ctx: &PageContext<'_>, out: &mut Vec<Part>) {
    let blank = || Part::Text(String::new());
    out.extend([blank(), Part::Parent("BUFFER:".into()), blank(), blank()]);
    out.push(Part::Object(format!("BUF @{}", addr(page as *const Page))));
    out.push(blank());
    let zero = || "0x0000000000000000".to_string();
    let bstat = if ctx.dirty { "0xb" } else { "0x9" };
    let f = |n: &str, v: String| (n.to_string(), v);
    let rows = [
        [
            f("bpage", addr(page.bytes().as_ptr())),
            f("bPmmpage", zero()),
            f("bsort_r_nextbP", zero()),
        ],
        [
            f("bsort_r_prevbP", zero()),
            f("bhash", zero()),
            f("bpageno", pid.to_string()),
        ],
        [
            f("bpart", "0".into()),
            f("ckptGen", zero()),
            f("bDirtyRefCount", "0".into()),
        ],
        [
            f("bstat", bstat.into()),
            f("breferences", "0".into()),
            f("berrcode", "0".into()),
        ],
        [
            f("bUse1", "0".into()),
            f("bstat2", "0x0".into()),
            f("blog", "0x0".into()),
        ],
        [
            f("bsampleCount", "0".into()),
            f("bIoCount", "0".into()),
            f("resPoolId", "0".into()),
        ],
        [
            f("bcputicks", "0".into()),
            f("bReadMicroSec", "0".into()),
            f("bDirtyContext", zero()),
        ],
        [
            f("bDbPageBroker", zero()),
            f("bdbid", ctx.database_id.to_string()),
            f("bpru", zero()),
        ],
    ];
    out.extend(rows.into_iter().map(|r| Part::Fields(r.to_vec())));
}

/// PAGE HEADER: the header's fields as they are, and the metadata the catalog gives.
fn header_parts(page: &Page, ctx: &PageContext<'_>, out: &mut Vec<Part>) {
    let blank = || Part::Text(String::new());
    let h = page.raw_header();
    out.extend([
        blank(),
        Part::Parent("PAGE HEADER:".into()),
        blank(),
        blank(),
    ]);
    out.push(Part::Object(format!(
        "Page @{}",
        addr(page.bytes().as_ptr())
    )));
    out.push(blank());
    let au = h.allocation_unit_id;
    let (object_id, index_id, partition_id) = metadata(au, ctx);
    let lsn = h.lsn;
    let f = |n: &str, v: String| (n.to_string(), v);
    let lines = vec![
        vec![
            f("m_pageId", h.this_page.to_string()),
            f("m_headerVersion", h.version.to_string()),
            f("m_type", h.page_type.to_string()),
        ],
        vec![
            f("m_typeFlagBits", format!("0x{:x}", h.type_flag_bits)),
            f("m_level", h.level.to_string()),
            f("m_flagBits", format!("0x{:x}", h.flag_bits)),
        ],
        vec![
            f(
                "m_objId (AllocUnitId.idObj)",
                ((au >> 16) & 0xffff_ffff).to_string(),
            ),
            f("m_indexId (AllocUnitId.idInd)", h.index_id.to_string()),
        ],
        vec![f("Metadata: AllocUnitId", au.to_string())],
        vec![
            f("Metadata: PartitionId", partition_id.to_string()),
            f("Metadata: IndexId", index_id.to_string()),
        ],
        vec![
            f("Metadata: ObjectId", object_id.to_string()),
            f("m_prevPage", h.prev_page.to_string()),
            f("m_nextPage", h.next_page.to_string()),
        ],
        vec![
            f("pminlen", h.pminlen.to_string()),
            f("m_slotCnt", h.slot_count.to_string()),
            f("m_freeCnt", h.free_count.to_string()),
        ],
        vec![
            f("m_freeData", h.free_data.to_string()),
            f("m_reservedCnt", h.reserved_count.to_string()),
            f(
                "m_lsn",
                format!("({}:{}:{})", lsn.vlf_sequence, lsn.block, lsn.slot),
            ),
        ],
        vec![
            f("m_xactReserved", h.xact_reserved.to_string()),
            f(
                "m_xdesId",
                format!("({}:{})", h.xdes_id >> 32, h.xdes_id & 0xffff_ffff),
            ),
            f("m_ghostRecCnt", h.ghost_rec_count.to_string()),
        ],
        vec![
            f("m_tornBits", (h.checksum as i32).to_string()),
            f("DB Frag ID", "1".into()),
        ],
    ];
    out.extend(lines.into_iter().map(Part::Fields));
}

/// The header's Metadata: ObjectId, IndexId and PartitionId of allocation unit `au`: an
/// index's pages name its table's object; a unit the catalog does not have is object 0,
/// index -1 (99 and 0 for allocation unit 0, the allocation pages').
fn metadata(au: u64, ctx: &PageContext<'_>) -> (i64, i64, u64) {
    match ctx.table {
        Some(t) => match &t.index_of {
            Some(ix) => (ix.table_object_id as i64, ix.index_id as i64, au),
            None => (t.object_id as i64, t.index_id as i64, au),
        },
        None if au == 0 => (99, 0, 0),
        None => (0, -1, 0),
    }
}

/// Allocation Status, from the maps of the page's interval.
fn allocation_parts(pid: PageId, ctx: &PageContext<'_>, out: &mut Vec<Part>) {
    let m = &ctx.maps;
    let bit_index = (pid.page.0 / PAGES_PER_EXTENT) % GAM_INTERVAL_EXTENTS;
    let pfs_value = m.pfs.1.as_ref().map_or(0, |p| {
        let first = pfs::first_covered(m.pfs.0.page).0;
        b_at(p, PAGE_HEADER_SIZE + (pid.page.0 - first) as usize)
    });
    let yes_no = |v: bool, yes: &str, no: &str| if v { yes.to_string() } else { no.to_string() };
    let blank = || Part::Text(String::new());
    out.extend([blank(), Part::Object("Allocation Status".into()), blank()]);
    out.push(Part::Fields(vec![
        (
            format!("GAM {}", m.gam.0),
            // GAM bit 1 = extent free.
            yes_no(bit(&m.gam.1, bit_index), "NOT ALLOCATED", "ALLOCATED"),
        ),
        (
            format!("SGAM {}", m.sgam.0),
            yes_no(bit(&m.sgam.1, bit_index), "ALLOCATED", "NOT ALLOCATED"),
        ),
    ]));
    out.push(Part::Fields(vec![
        (format!("PFS {}", m.pfs.0), pfs_text(pfs_value)),
        (
            format!("DIFF {}", m.dcm.0),
            yes_no(bit(&m.dcm.1, bit_index), "CHANGED", "NOT CHANGED"),
        ),
    ]));
    out.push(Part::Fields(vec![(
        format!("ML {}", m.bcm.0),
        yes_no(bit(&m.bcm.1, bit_index), "MIN_LOGGED", "NOT MIN_LOGGED"),
    )]));
    out.push(blank());
}

/// DATA: the whole page (printopt 2, or a page without a slot array), else each record.
fn data_parts(page: &Page, printopt: u8, ctx: &PageContext<'_>, out: &mut Vec<Part>) {
    let b = page.bytes();
    let blank = || Part::Text(String::new());
    // Pages with a slot array: data and index pages, and unformatted ones (no slots).
    let slotted = matches!(page.raw_header().page_type, 0..=2);
    out.extend([Part::Parent("DATA:".into()), blank(), blank()]);
    if printopt == 2 || !slotted {
        out.push(Part::Object(format!("Memory Dump @{}", addr(b.as_ptr()))));
        out.push(blank());
        hex_dump(&b[..], b.as_ptr() as usize as u64, out);
        out.push(blank());
        if slotted {
            offset_table(page, out);
        }
        return;
    }
    let slots = slots(page);
    let layouts = ctx.table.and_then(table_layouts);
    for (slot, off) in slots.iter().copied().enumerate() {
        if let Some(rec) = record_at(page, off, slots.len()) {
            record_parts(slot, off, rec, printopt, layouts.as_ref(), out);
        }
    }
    if printopt == 1 {
        offset_table(page, out);
    }
}

/// One record: its heading, type and attributes, its dump, and at printopt 3 its columns.
fn record_parts(
    slot: usize,
    off: u16,
    rec: &[u8],
    printopt: u8,
    layouts: Option<&(&TableEntry, ColumnTypes)>,
    out: &mut Vec<Part>,
) {
    let blank = || Part::Text(String::new());
    out.push(Part::Slot(match printopt {
        1 => format!(
            "Slot {slot}, Offset 0x{off:x}, Length {}, DumpStyle BYTE",
            rec.len()
        ),
        _ => format!("Slot {slot} Offset 0x{off:x} Length {}", rec.len()),
    }));
    out.push(blank());
    let mut attrs = " NULL_BITMAP".to_string();
    if rec.first().is_some_and(|s| s & 0x20 != 0) {
        attrs.push_str(" VARIABLE_COLUMNS");
    }
    out.push(Part::Fields(vec![
        ("Record Type".into(), record_type_name(rec)),
        ("Record Attributes".into(), attrs),
        ("Record Size".into(), rec.len().to_string()),
    ]));
    out.push(blank());
    out.push(Part::Object(format!("Memory Dump @{}", addr(rec.as_ptr()))));
    out.push(blank());
    hex_dump(rec, 0, out);
    out.push(blank());
    if printopt == 3 {
        if let (Some((table, types)), Ok(RecordType::Primary)) = (layouts, record::record_type(rec))
        {
            columns(slot, rec, table, types, out);
        }
    }
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

fn offset_table(page: &Page, out: &mut Vec<Part>) {
    out.extend([
        Part::Parent("OFFSET TABLE:".into()),
        Part::Text(String::new()),
        Part::Object("Row - Offset".into()),
    ]);
    for (slot, off) in slots(page).iter().enumerate().rev() {
        out.push(Part::Offset(
            format!("{slot} (0x{slot:x})"),
            format!("{off} (0x{off:x})"),
        ));
    }
    out.push(Part::Text(String::new()));
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
fn columns(slot: usize, rec: &[u8], t: &TableEntry, types: &ColumnTypes, out: &mut Vec<Part>) {
    let layouts: Vec<ColumnLayout> = types.iter().map(|(_, l)| *l).collect();
    let Ok(values) = record::decode(&layouts, rec) else {
        return;
    };
    for (i, (c, v)) in t.columns.iter().zip(values).enumerate() {
        let (off, len) = match v {
            Some(bytes) => (bytes.as_ptr() as usize - rec.as_ptr() as usize, bytes.len()),
            None => (0, 0),
        };
        out.push(Part::Object(format!(
            "Slot {slot} Column {} Offset 0x{off:x} Length {len} Length (physical) {len}",
            i + 1
        )));
        out.push(Part::Text(String::new()));
        let ty = types[i].0;
        let text = match rowcodec::decode(ty, v) {
            Ok(Value::Null) => "[NULL]".to_string(),
            Ok(val) => format_value(&val, ty),
            Err(e) => format!("[{e}]"),
        };
        out.push(Part::Field(c.name.clone(), text));
        out.push(Part::Text(String::new()));
    }
}

/// An index page's rows as DBCC PAGE's result set: (column name, type) and rows.
pub type IndexRows = (Vec<(String, crate::types::SqlType)>, Vec<Vec<Value>>);

/// The rows of an index page (invariant 2), None when `page` is not one: a page of a
/// nonclustered index (`index_of`) at any level, or a clustered index's page above the
/// leaf. A record that does not decode shows NULLs (invariant 1).
fn index_rows(pid: PageId, page: &Page, ctx: &PageContext<'_>) -> Option<IndexRows> {
    use crate::types::SqlType;
    let t = ctx.table?;
    let h = page.raw_header();
    let upper = h.page_type == extentdb_format::PageType::Index as u8 && h.level > 0;
    let nc_leaf = h.page_type == extentdb_format::PageType::Data as u8
        && h.level == 0
        && t.index_of.is_some();
    if !(nc_leaf || upper && t.index_id == 1) {
        return None;
    }
    let (_, types) = table_layouts(t)?;
    let key_ids = t
        .primary_key
        .as_ref()
        .map(|k| k.1.clone())
        .unwrap_or_default();
    let name = |i: usize| {
        let c = &t.columns[i];
        let rid = t
            .index_of
            .as_ref()
            .is_some_and(|x| x.sources.get(i) == Some(&0));
        let base = if rid {
            "HEAP RID".to_string()
        } else {
            c.name.clone()
        };
        match key_ids.contains(&c.column_id) {
            true => format!("{base} (key)"),
            false => base,
        }
    };
    // Above the leaf a record holds the key columns (in key order) and the child page.
    let shown: Vec<usize> = match upper {
        true => key_ids
            .iter()
            .filter_map(|id| t.columns.iter().position(|c| c.column_id == *id))
            .collect(),
        false => (0..t.columns.len()).collect(),
    };
    let mut columns: Vec<(String, SqlType)> = ["FileId", "PageId", "Row", "Level"]
        .iter()
        .map(|n| (n.to_string(), SqlType::Int))
        .collect();
    if upper {
        columns.push(("ChildFileId".into(), SqlType::Int));
        columns.push(("ChildPageId".into(), SqlType::Int));
    }
    for &i in &shown {
        columns.push((name(i), types[i].0));
    }
    if !upper {
        columns.push(("KeyHashValue".into(), SqlType::NVarChar(30)));
    }
    columns.push(("Row Size".into(), SqlType::Int));
    let mut layouts: Vec<ColumnLayout> = shown.iter().map(|&i| types[i].1).collect();
    if upper {
        layouts.push(ColumnLayout::Fixed(6));
    }
    let slots = slots(page);
    let mut rows = Vec::new();
    for (slot, off) in slots.iter().copied().enumerate() {
        let Some(rec) = record_at(page, off, slots.len()) else {
            continue;
        };
        let decoded = record::decode(&layouts, rec).ok();
        let mut row = vec![
            Value::Int(pid.file.0 as i32),
            Value::Int(pid.page.0 as i32),
            Value::Int(slot as i32),
            Value::Int(h.level as i32),
        ];
        if upper {
            let child = decoded.as_ref().and_then(|d| d.last().copied().flatten());
            let child = child.filter(|c| c.len() == 6);
            let (file, page_no) = child.map_or((Value::Null, Value::Null), |c| {
                let page_no = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                (
                    Value::Int(u16::from_le_bytes([c[4], c[5]]) as i32),
                    Value::Int(page_no as i32),
                )
            });
            row.extend([file, page_no]);
        }
        for (n, &i) in shown.iter().enumerate() {
            let v = decoded.as_ref().and_then(|d| d.get(n).copied());
            let v = v.and_then(|v| rowcodec::decode(types[i].0, v).ok());
            row.push(v.unwrap_or(Value::Null));
        }
        if !upper {
            let names = extentdb_storage::row_lock::RowNames::of(ctx.database_id, t);
            let hash = names.resource((pid, slot as u16), rec).ok();
            row.push(hash.map_or(Value::Null, |r| Value::Text(r.description())));
        }
        row.push(Value::Int(rec.len() as i32));
        rows.push(row);
    }
    Some((columns, rows))
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

    /// Proves the TABLERESULTS rows are the text's facts (invariant 3): on pages of any
    /// bytes at every print option, each row with a Field is a `Field = VALUE` (or
    /// `Field - VALUE`) in the text, each dump row's VALUE a line of it, and the header
    /// rows sit under PAGE HEADER: with m_pageId first.
    #[test]
    fn table_rows_are_the_texts_facts() {
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
                let parts = parts(pid, &page, opt, &ctx, false);
                let text = text_of(&parts).join("\n");
                let rows = rows_of(&parts);
                for [parent, object, field, value] in &rows {
                    assert!(!parent.is_empty() && !object.is_empty(), "{object}");
                    let found = match field.is_empty() {
                        true => text.lines().any(|l| l == value),
                        false => [" = ", " - "]
                            .iter()
                            .any(|sep| text.contains(&format!("{field}{sep}{value}"))),
                    };
                    assert!(found, "{parent} / {object} / {field} / {value}");
                }
                let header = rows.iter().find(|r| r[2] == "m_pageId").unwrap();
                assert_eq!(header[0], "PAGE HEADER:");
                assert!(header[1].starts_with("Page @0x"));
                assert!(text.contains(&format!("m_pageId = {}", header[3])));
                let gam = rows.iter().find(|r| r[2] == "GAM (1:2)").unwrap();
                assert_eq!(
                    (&gam[0][..], &gam[1][..]),
                    ("PAGE HEADER:", "Allocation Status")
                );
            }
        }
    }

    /// Pins the hex dump layout: offset, five groups of four bytes, then the ASCII column.
    #[test]
    fn hex_dump_layout() {
        let mut parts = Vec::new();
        hex_dump(b"JunkJunkJunkJunkJunk\x00\x01Ju", 0, &mut parts);
        let out = text_of(&parts);
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
