//! Slotted data and index pages. See FORMAT.md, "Data pages".
//!
//! Records grow up from the end of the page header; the slot array (one u16 record offset
//! per slot, 0 for an empty slot) grows down from the end of the page. Heap pages address
//! rows by slot number, so `insert_at`/`delete_at` never renumber a live slot; B-tree pages
//! keep the slot array in key order, so `insert_shifted`/`delete_shifted` shift it.
//!
//! Invariants (checked by `check_invariants`):
//! 1. `96 <= free_data <= 8192 - 2 * slot_count`.
//! 2. Every non-empty slot's offset lies in `[96, free_data)`, and its record (framed by
//!    `record::record_len`) ends at or before `free_data`; no two records overlap.
//! 3. `free_count == 8192 - 96 - 2 * slot_count - (sum of live record lengths)`: space left
//!    by deleted or shrunk records counts as free, and `compact` makes it contiguous.
//! 4. `ghost_rec_count` equals the number of ghost records.
//! 5. A data page holds primary, forwarded, forwarding-stub and ghost data records; an index
//!    page holds index and ghost index records.
//!
//! A heap delete leaves its slot empty and never shrinks `slot_count`, so undo and redo by
//! slot number always find the slot; an empty slot costs its 2 bytes until a later insert
//! reuses it.
//!
//! Every function validates the header fields it relies on before touching the page, so a
//! corrupt page read from disk yields `FormatError::Corrupt` naming the page, never a panic;
//! a mutation that fails leaves the page unchanged. Deliberately absent: checksums (the
//! caller seals pages before writing), locking and logging (the storage layer's job), and
//! any knowledge of columns.

use crate::codec::{get_u16, put_u16};
use crate::record::{self, RecordType};
use crate::{
    corrupt, FormatError, Page, PageHeader, PageId, PageType, PAGE_HEADER_SIZE, PAGE_SIZE,
};

/// Bytes per slot-array entry.
const SLOT_SIZE: usize = 2;
/// Bytes available to records and slots on an empty page.
const BODY_SIZE: usize = PAGE_SIZE - PAGE_HEADER_SIZE;
const _: () = assert!(record::MAX_RECORD_SIZE + SLOT_SIZE <= BODY_SIZE);

/// Position of slot `slot`'s entry: slot 0 at 8190, slot 1 at 8188, ...
fn slot_pos(slot: u16) -> usize {
    PAGE_SIZE - SLOT_SIZE * (slot as usize + 1)
}

fn slot_offset(page: &Page, slot: u16) -> usize {
    get_u16(page.bytes(), slot_pos(slot)) as usize
}

fn set_slot_offset(page: &mut Page, slot: u16, offset: usize) {
    put_u16(page.bytes_mut(), slot_pos(slot), offset as u16);
}

/// First byte of the slot array.
fn slot_array_start(h: &PageHeader) -> usize {
    PAGE_SIZE - SLOT_SIZE * h.slot_count as usize
}

/// Contiguous free bytes between the last record and the slot array.
fn gap(h: &PageHeader) -> usize {
    slot_array_start(h) - h.free_data as usize
}

/// Decodes the header and checks the fields every operation relies on (invariant 1 and the
/// bounds of free_count), so that later arithmetic and slicing cannot go out of bounds.
fn frame(page: &Page) -> Result<PageHeader, FormatError> {
    let h = page.header()?;
    let at = h.this_page;
    if !matches!(h.page_type, PageType::Data | PageType::Index) {
        return Err(corrupt(
            at,
            format!(
                "expected a data or index page, found type {}",
                h.page_type as u8
            ),
        ));
    }
    let slots_bytes = SLOT_SIZE * h.slot_count as usize;
    if slots_bytes > BODY_SIZE {
        return Err(corrupt(
            at,
            format!("slot array of {} slots overlaps the header", h.slot_count),
        ));
    }
    let free_data = h.free_data as usize;
    if free_data < PAGE_HEADER_SIZE || free_data > PAGE_SIZE - slots_bytes {
        return Err(corrupt(
            at,
            format!(
                "free data offset {free_data} outside [{PAGE_HEADER_SIZE}, {}]",
                PAGE_SIZE - slots_bytes
            ),
        ));
    }
    let free_count = h.free_count as usize;
    if free_count > BODY_SIZE - slots_bytes || free_count < gap(&h) {
        return Err(corrupt(
            at,
            format!(
                "free count {free_count} outside [{}, {}]",
                gap(&h),
                BODY_SIZE - slots_bytes
            ),
        ));
    }
    Ok(h)
}

/// The offset and length of the record in `slot`, `None` for an empty slot (invariant 2
/// for that one record).
fn locate(page: &Page, h: &PageHeader, slot: u16) -> Result<Option<(usize, usize)>, FormatError> {
    let at = h.this_page;
    if slot >= h.slot_count {
        return Err(corrupt(
            at,
            format!("slot {slot} is beyond the slot count {}", h.slot_count),
        ));
    }
    let offset = slot_offset(page, slot);
    if offset == 0 {
        return Ok(None);
    }
    let free_data = h.free_data as usize;
    if offset < PAGE_HEADER_SIZE || offset >= free_data {
        return Err(corrupt(
            at,
            format!("slot {slot} offset {offset} outside [{PAGE_HEADER_SIZE}, {free_data})"),
        ));
    }
    match record::record_len(&page.bytes()[offset..free_data]) {
        Ok(len) => Ok(Some((offset, len))),
        Err(FormatError::Corrupt { reason, .. }) => Err(corrupt(
            at,
            format!("slot {slot} at offset {offset}: {reason}"),
        )),
        Err(e) => Err(e),
    }
}

/// A live record's position: (slot, offset, length).
type Placed = (u16, usize, usize);

/// Every live record, validated one by one and against each other (invariants 2 and 3), in
/// slot order.
fn live_records(page: &Page, h: &PageHeader) -> Result<Vec<Placed>, FormatError> {
    let mut live = Vec::with_capacity(h.slot_count as usize);
    for slot in 0..h.slot_count {
        if let Some((offset, len)) = locate(page, h, slot)? {
            live.push((slot, offset, len));
        }
    }
    let mut by_offset = live.clone();
    by_offset.sort_unstable_by_key(|&(_, offset, _)| offset);
    for pair in by_offset.windows(2) {
        let ((s1, o1, l1), (s2, o2, _)) = (pair[0], pair[1]);
        if o1 + l1 > o2 {
            return Err(corrupt(
                h.this_page,
                format!("record of slot {s1} at {o1} overlaps slot {s2} at {o2}"),
            ));
        }
    }
    let used: usize = live.iter().map(|&(_, _, len)| len).sum();
    let expected = BODY_SIZE - SLOT_SIZE * h.slot_count as usize - used;
    if h.free_count as usize != expected {
        return Err(corrupt(
            h.this_page,
            format!("free count {} (expected {expected})", h.free_count),
        ));
    }
    Ok(live)
}

/// Checks that `rec` is exactly one well-framed record before it goes onto the page.
fn check_new_record(h: &PageHeader, rec: &[u8]) -> Result<(), FormatError> {
    match record::record_len(rec) {
        Ok(len) if len == rec.len() => Ok(()),
        Ok(len) => Err(corrupt(
            h.this_page,
            format!("new record framed as {len} bytes but {} given", rec.len()),
        )),
        Err(e) => Err(e),
    }
}

/// Adjusts the ghost count for a ghost record leaving (`removed`) or arriving (`added`).
fn ghost_delta(h: &mut PageHeader, removed: bool, added: bool) -> Result<(), FormatError> {
    let count = (h.ghost_rec_count as usize + added as usize).checked_sub(removed as usize);
    match count.and_then(|c| u16::try_from(c).ok()) {
        Some(c) => {
            h.ghost_rec_count = c;
            Ok(())
        }
        None => Err(corrupt(
            h.this_page,
            format!("ghost record count {} is out of step", h.ghost_rec_count),
        )),
    }
}

/// Formats `page` as an empty data or index page at `this`, body zeroed.
pub fn format(
    page: &mut Page,
    this: PageId,
    page_type: PageType,
    allocation_unit_id: u64,
    index_id: u16,
    level: u8,
) {
    assert!(
        matches!(page_type, PageType::Data | PageType::Index),
        "data_page::format of a {page_type:?} page"
    );
    let mut h = PageHeader::new(page_type, this);
    h.allocation_unit_id = allocation_unit_id;
    h.index_id = index_id;
    h.level = level;
    *page = Page::new(&h);
}

/// Slots on the page, empty ones included; 0 if the header is corrupt (`check_invariants`
/// and `records` say why).
pub fn slot_count(page: &Page) -> u16 {
    frame(page).map_or(0, |h| h.slot_count)
}

/// The bytes from the record in `slot` to the page's free space (the record and the ones
/// stored after it), `None` for an empty slot: the record's offset is checked as `record`
/// checks it, but the record is not framed. For a reader of a record's fixed part only.
pub fn record_head(page: &Page, slot: u16) -> Result<Option<&[u8]>, FormatError> {
    let h = frame(page)?;
    if slot >= h.slot_count {
        let n = h.slot_count;
        return Err(corrupt(
            h.this_page,
            format!("slot {slot} is beyond the slot count {n}"),
        ));
    }
    let (offset, free_data) = (slot_offset(page, slot), h.free_data as usize);
    if offset == 0 {
        return Ok(None);
    }
    if offset < PAGE_HEADER_SIZE || offset >= free_data {
        let why = format!("slot {slot} offset {offset} outside [{PAGE_HEADER_SIZE}, {free_data})");
        return Err(corrupt(h.this_page, why));
    }
    Ok(Some(&page.bytes()[offset..free_data]))
}

/// The record in `slot`, `None` for an empty slot.
pub fn record(page: &Page, slot: u16) -> Result<Option<&[u8]>, FormatError> {
    let h = frame(page)?;
    Ok(locate(page, &h, slot)?.map(|(offset, len)| &page.bytes()[offset..offset + len]))
}

/// The live (non-empty) slots in slot order, ghosts included. A corrupt header yields one
/// error and nothing else.
pub fn records(page: &Page) -> impl Iterator<Item = (u16, Result<&[u8], FormatError>)> + '_ {
    records_from(page, 0)
}

/// `records` from slot `first` on: the slots before it are not read (a seek that found its
/// first slot by binary search frames no record it passes over).
pub fn records_from(
    page: &Page,
    first: u16,
) -> impl Iterator<Item = (u16, Result<&[u8], FormatError>)> + '_ {
    let (header, error) = match frame(page) {
        Ok(h) => (Some(h), None),
        Err(e) => (None, Some((0, Err(e)))),
    };
    let slots = header.as_ref().map_or(0, |h| h.slot_count);
    error
        .into_iter()
        .chain((first.min(slots)..slots).filter_map(move |slot| {
            let h = header.as_ref()?;
            match locate(page, h, slot) {
                Ok(None) => None,
                Ok(Some((offset, len))) => Some((slot, Ok(&page.bytes()[offset..offset + len]))),
                Err(e) => Some((slot, Err(e))),
            }
        }))
}

/// Of the live records in slot order (as `records` yields them), the position of the one
/// stored last in the record area: the record written most recently, unless the page was
/// compacted or rebuilt since (both lay records in slot order, so the last one then).
/// None for a page without live records. B-tree splits read it to tell ascending inserts
/// into the middle of an index from random ones.
pub fn newest_record(page: &Page) -> Result<Option<usize>, FormatError> {
    let h = frame(page)?;
    let mut newest: Option<(usize, usize)> = None;
    let mut at = 0;
    for slot in 0..h.slot_count {
        if let Some((offset, _)) = locate(page, &h, slot)? {
            if newest.is_none_or(|(_, o)| offset > o) {
                newest = Some((at, offset));
            }
            at += 1;
        }
    }
    Ok(newest.map(|(at, _)| at))
}

/// The longest record that fits in a new slot (free count less the slot's 2 bytes); 0 for
/// a corrupt header.
pub fn free_space(page: &Page) -> usize {
    frame(page).map_or(0, |h| (h.free_count as usize).saturating_sub(SLOT_SIZE))
}

/// True if a record of `len` bytes fits, in a new slot or in an existing empty one.
pub fn can_insert(page: &Page, len: usize, new_slot: bool) -> bool {
    let slot_bytes = if new_slot { SLOT_SIZE } else { 0 };
    frame(page)
        .is_ok_and(|h| len <= record::MAX_RECORD_SIZE && len + slot_bytes <= h.free_count as usize)
}

/// Makes `len + slot_bytes` contiguous free bytes, compacting if needed; returns the header
/// as it then stands. Err(TooLarge) if the page cannot hold them.
fn make_room(
    page: &mut Page,
    h: PageHeader,
    len: usize,
    slot_bytes: usize,
) -> Result<PageHeader, FormatError> {
    let need = len + slot_bytes;
    if need > h.free_count as usize {
        return Err(FormatError::TooLarge {
            what: "record",
            detail: format!(
                "{len} bytes do not fit in page {} with {} bytes free",
                h.this_page, h.free_count
            ),
        });
    }
    if gap(&h) >= need {
        return Ok(h);
    }
    let h = compact_with(page, h)?;
    debug_assert!(gap(&h) >= need, "compaction left free count and gap apart");
    Ok(h)
}

/// Copies `rec` to the free data offset and accounts for its bytes; the caller has made room.
fn append_record(page: &mut Page, h: &mut PageHeader, rec: &[u8]) -> usize {
    let offset = h.free_data as usize;
    page.bytes_mut()[offset..offset + rec.len()].copy_from_slice(rec);
    h.free_data += rec.len() as u16;
    h.free_count -= rec.len() as u16;
    offset
}

/// Heap insert into `slot`: `slot == slot_count` appends a new slot, a lower slot must be
/// empty. Compacts the page (slot numbers unchanged) when the contiguous gap is too small
/// but the free count suffices; Err(TooLarge) when the record does not fit.
pub fn insert_at(page: &mut Page, slot: u16, rec: &[u8]) -> Result<(), FormatError> {
    let mut h = frame(page)?;
    check_new_record(&h, rec)?;
    let new_slot = slot == h.slot_count;
    if !new_slot && locate(page, &h, slot)?.is_some() {
        return Err(corrupt(h.this_page, format!("slot {slot} is not empty")));
    }
    let slot_bytes = if new_slot { SLOT_SIZE } else { 0 };
    ghost_delta(&mut h, false, record::is_ghost(rec))?;
    let mut h = make_room(page, h, rec.len(), slot_bytes)?;
    let offset = append_record(page, &mut h, rec);
    if new_slot {
        h.slot_count += 1;
        h.free_count -= SLOT_SIZE as u16;
    }
    set_slot_offset(page, slot, offset);
    page.set_header(&h);
    Ok(())
}

/// Index insert at `slot <= slot_count`: slots at and after it move up by one, keeping the
/// slot array in key order.
pub fn insert_shifted(page: &mut Page, slot: u16, rec: &[u8]) -> Result<(), FormatError> {
    let mut h = frame(page)?;
    check_new_record(&h, rec)?;
    if slot > h.slot_count {
        return Err(corrupt(
            h.this_page,
            format!(
                "insert at slot {slot} beyond the slot count {}",
                h.slot_count
            ),
        ));
    }
    ghost_delta(&mut h, false, record::is_ghost(rec))?;
    let mut h = make_room(page, h, rec.len(), SLOT_SIZE)?;
    let offset = append_record(page, &mut h, rec);
    // Slots [slot, slot_count) sit at [start, slot_pos(slot) + 2); move them 2 bytes down.
    let start = slot_array_start(&h);
    page.bytes_mut()
        .copy_within(start..slot_pos(slot) + SLOT_SIZE, start - SLOT_SIZE);
    h.slot_count += 1;
    h.free_count -= SLOT_SIZE as u16;
    set_slot_offset(page, slot, offset);
    page.set_header(&h);
    Ok(())
}

/// Takes the live record out of `slot` and accounts for its space; returns its bytes.
fn take_record(page: &Page, h: &mut PageHeader, slot: u16) -> Result<Vec<u8>, FormatError> {
    let Some((offset, len)) = locate(page, h, slot)? else {
        return Err(corrupt(h.this_page, format!("slot {slot} is empty")));
    };
    let rec = page.bytes()[offset..offset + len].to_vec();
    ghost_delta(h, record::is_ghost(&rec), false)?;
    h.free_count += len as u16;
    // The last record's space rejoins the gap at once; earlier ones wait for compaction.
    if offset + len == h.free_data as usize {
        h.free_data = offset as u16;
    }
    Ok(rec)
}

/// Heap delete: empties `slot` (offset 0) and returns the record. The slot stays and
/// `slot_count` never shrinks, so no live row is renumbered; the space is reclaimed at
/// once if the record was the last in the page, otherwise on compaction.
pub fn delete_at(page: &mut Page, slot: u16) -> Result<Vec<u8>, FormatError> {
    let mut h = frame(page)?;
    let rec = take_record(page, &mut h, slot)?;
    set_slot_offset(page, slot, 0);
    page.set_header(&h);
    Ok(rec)
}

/// Index delete: removes `slot` and moves the following slots down by one.
pub fn delete_shifted(page: &mut Page, slot: u16) -> Result<Vec<u8>, FormatError> {
    let mut h = frame(page)?;
    let rec = take_record(page, &mut h, slot)?;
    let start = slot_array_start(&h);
    page.bytes_mut()
        .copy_within(start..slot_pos(slot), start + SLOT_SIZE);
    page.bytes_mut()[start..start + SLOT_SIZE].fill(0);
    h.slot_count -= 1;
    h.free_count += SLOT_SIZE as u16;
    page.set_header(&h);
    Ok(rec)
}

/// Replaces the record in `slot` with `rec` of any length: in place when it fits there,
/// otherwise moved to the free space (compacting if needed). Err(TooLarge) when it cannot
/// fit; the page is then unchanged.
pub fn replace(page: &mut Page, slot: u16, rec: &[u8]) -> Result<(), FormatError> {
    let mut h = frame(page)?;
    check_new_record(&h, rec)?;
    let Some((offset, old_len)) = locate(page, &h, slot)? else {
        return Err(corrupt(h.this_page, format!("slot {slot} is empty")));
    };
    let old_is_ghost = record::is_ghost(&page.bytes()[offset..offset + old_len]);
    let at_end = offset + old_len == h.free_data as usize;
    let fits_in_place =
        rec.len() <= old_len || (at_end && offset + rec.len() <= slot_array_start(&h));
    if fits_in_place {
        ghost_delta(&mut h, old_is_ghost, record::is_ghost(rec))?;
        page.bytes_mut()[offset..offset + rec.len()].copy_from_slice(rec);
        h.free_count = (h.free_count as usize + old_len - rec.len()) as u16;
        if at_end {
            h.free_data = (offset + rec.len()) as u16;
        }
        page.set_header(&h);
        return Ok(());
    }
    if rec.len() - old_len > h.free_count as usize {
        return Err(FormatError::TooLarge {
            what: "record",
            detail: format!(
                "{} bytes replacing {old_len} do not fit in page {} with {} bytes free",
                rec.len(),
                h.this_page,
                h.free_count
            ),
        });
    }
    // Validate the whole page first: compaction must not fail once the old record is gone.
    live_records(page, &h)?;
    take_record(page, &mut h, slot)?;
    ghost_delta(&mut h, false, record::is_ghost(rec))?;
    set_slot_offset(page, slot, 0);
    let mut h = make_room(page, h, rec.len(), 0)?;
    let offset = append_record(page, &mut h, rec);
    set_slot_offset(page, slot, offset);
    page.set_header(&h);
    Ok(())
}

/// Ghosts (`ghost == true`) or unghosts the record in `slot` in place: GhostData <->
/// Primary, GhostIndex <-> Index; keeps the header's ghost count. Already in the requested
/// state is a no-op; forwarded records and stubs cannot be ghosted.
pub fn set_ghost(page: &mut Page, slot: u16, ghost: bool) -> Result<(), FormatError> {
    let mut h = frame(page)?;
    let Some((offset, len)) = locate(page, &h, slot)? else {
        return Err(corrupt(h.this_page, format!("slot {slot} is empty")));
    };
    let current = record::record_type(&page.bytes()[offset..offset + len])?;
    use RecordType::*;
    let target = match (current, ghost) {
        (Primary, true) => GhostData,
        (Index, true) => GhostIndex,
        (GhostData, false) => Primary,
        (GhostIndex, false) => Index,
        (GhostData | GhostIndex, true) | (Primary | Index, false) => return Ok(()),
        (Forwarded | ForwardingStub, _) => {
            return Err(corrupt(
                h.this_page,
                format!("slot {slot} holds a {current:?} record, which has no ghost form"),
            ))
        }
    };
    ghost_delta(&mut h, !ghost, ghost)?;
    record::set_record_type(&mut page.bytes_mut()[offset..offset + len], target);
    page.set_header(&h);
    Ok(())
}

/// Moves the live records together, in slot order, right after the header, so that all
/// free space is one gap; slot numbers are unchanged. Validates the page first and leaves
/// a corrupt page untouched.
pub fn compact(page: &mut Page) -> Result<(), FormatError> {
    let h = frame(page)?;
    let h = compact_with(page, h)?;
    page.set_header(&h);
    Ok(())
}

/// Compacts the page as `h` describes it (the caller may have changed counts not yet
/// stored) and returns `h` with the new free data offset; writes nothing on error.
fn compact_with(page: &mut Page, mut h: PageHeader) -> Result<PageHeader, FormatError> {
    let live = live_records(page, &h)?;
    let mut area = vec![0u8; slot_array_start(&h) - PAGE_HEADER_SIZE];
    let mut end = 0;
    for &(_, offset, len) in &live {
        area[end..end + len].copy_from_slice(&page.bytes()[offset..offset + len]);
        end += len;
    }
    page.bytes_mut()[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + area.len()].copy_from_slice(&area);
    let mut offset = PAGE_HEADER_SIZE;
    for &(slot, _, len) in &live {
        set_slot_offset(page, slot, offset);
        offset += len;
    }
    h.free_data = offset as u16;
    debug_assert_eq!(gap(&h), h.free_count as usize);
    Ok(h)
}

/// Checks invariants 1-5 of the module docs; errors name the page.
pub fn check_invariants(page: &Page) -> Result<(), FormatError> {
    let h = frame(page)?;
    let live = live_records(page, &h)?;
    let mut ghosts = 0usize;
    for &(slot, offset, len) in &live {
        let t = record::record_type(&page.bytes()[offset..offset + len])?;
        ghosts += t.is_ghost() as usize;
        let allowed = match h.page_type {
            PageType::Data => !matches!(t, RecordType::Index | RecordType::GhostIndex),
            _ => matches!(t, RecordType::Index | RecordType::GhostIndex),
        };
        if !allowed {
            return Err(corrupt(
                h.this_page,
                format!(
                    "slot {slot} holds a {t:?} record on a {:?} page",
                    h.page_type
                ),
            ));
        }
    }
    if ghosts != h.ghost_rec_count as usize {
        return Err(corrupt(
            h.this_page,
            format!(
                "ghost record count {} (counted {ghosts})",
                h.ghost_rec_count
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{encode, ColumnLayout};

    /// A small xorshift64 generator so that failing seeds replay exactly.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    const AT: PageId = PageId {
        file: crate::FileId(1),
        page: crate::PageNo(200),
    };

    fn empty(page_type: PageType) -> Page {
        let mut p = Page::zeroed();
        format(&mut p, AT, page_type, 72_057_594_043_170_816, 1, 0);
        p
    }

    /// A record of exactly `len` bytes (at least 15): an INT key and a variable filler.
    fn rec_of_len(key: u32, len: usize, t: RecordType) -> Vec<u8> {
        let filler = vec![(key % 251) as u8; len - 15];
        let mut r = encode(
            &[ColumnLayout::Fixed(4), ColumnLayout::Variable],
            &[Some(&key.to_le_bytes()), Some(&filler)],
        )
        .unwrap();
        record::set_record_type(&mut r, t);
        assert_eq!(r.len(), len);
        r
    }

    /// The page's live records as (slot, bytes), from `records`.
    fn contents(p: &Page) -> Vec<(u16, Vec<u8>)> {
        records(p).map(|(s, r)| (s, r.unwrap().to_vec())).collect()
    }

    /// `newest_record` names the record stored last, by its position among the live
    /// records, whatever its slot; after compaction, the last one in slot order.
    #[test]
    fn newest_record_is_the_last_stored() {
        let mut p = empty(PageType::Data);
        assert_eq!(newest_record(&p).unwrap(), None);
        for (slot, key) in [(0, 10), (1, 30), (1, 20)] {
            insert_shifted(&mut p, slot, &rec_of_len(key, 40, RecordType::Primary)).unwrap();
        }
        assert_eq!(newest_record(&p).unwrap(), Some(1));
        insert_shifted(&mut p, 0, &rec_of_len(5, 40, RecordType::Primary)).unwrap();
        assert_eq!(newest_record(&p).unwrap(), Some(0));
        compact(&mut p).unwrap();
        assert_eq!(newest_record(&p).unwrap(), Some(3));
        let mut heap = empty(PageType::Data);
        for key in [1, 2, 3] {
            let slot = slot_count(&heap);
            insert_at(&mut heap, slot, &rec_of_len(key, 40, RecordType::Primary)).unwrap();
        }
        delete_at(&mut heap, 0).unwrap();
        assert_eq!(
            newest_record(&heap).unwrap(),
            Some(1),
            "empty slots are not counted"
        );
    }

    /// Proves the byte positions: slot 0 at 8190, first record at 96, header counts.
    #[test]
    fn byte_pin_first_record() {
        let mut p = empty(PageType::Data);
        check_invariants(&p).unwrap();
        assert_eq!(free_space(&p), 8094);
        let r = rec_of_len(7, 20, RecordType::Primary);
        insert_at(&mut p, 0, &r).unwrap();
        assert_eq!(&p.bytes()[8190..], &[96, 0]);
        assert_eq!(&p.bytes()[96..116], &r[..]);
        let h = p.header().unwrap();
        assert_eq!(
            (h.slot_count, h.free_data, h.free_count),
            (1, 116, 8192 - 96 - 20 - 2)
        );
        assert_eq!(record(&p, 0).unwrap(), Some(&r[..]));
        check_invariants(&p).unwrap();
    }

    /// Proves a page fills to the last byte, frees space by deletes, and reinserting a
    /// record larger than any gap compacts the page without renumbering live slots.
    #[test]
    fn fill_delete_and_compact() {
        let mut p = empty(PageType::Data);
        let mut slot = 0;
        while can_insert(&p, 100, true) {
            insert_at(
                &mut p,
                slot,
                &rec_of_len(slot as u32, 100, RecordType::Primary),
            )
            .unwrap();
            slot += 1;
            check_invariants(&p).unwrap();
        }
        assert_eq!(slot as usize, (8192 - 96) / 102);
        let rest = free_space(&p);
        assert!(matches!(
            insert_at(&mut p, slot, &rec_of_len(0, rest + 1, RecordType::Primary)),
            Err(FormatError::TooLarge { .. })
        ));
        insert_at(&mut p, slot, &rec_of_len(999, rest, RecordType::Primary)).unwrap();
        assert_eq!(p.header().unwrap().free_count, 0);
        check_invariants(&p).unwrap();
        let before = contents(&p);
        for s in [3u16, 4, 10, 11, 12] {
            assert_eq!(delete_at(&mut p, s).unwrap(), before[s as usize].1);
            check_invariants(&p).unwrap();
        }
        assert_eq!(record(&p, 3).unwrap(), None);
        assert!(delete_at(&mut p, 3).is_err(), "already empty");
        // 500 bytes fit only once the five 100-byte holes are made contiguous.
        let big = rec_of_len(5000, 500, RecordType::Primary);
        insert_at(&mut p, 4, &big).unwrap();
        check_invariants(&p).unwrap();
        assert_eq!(p.header().unwrap().free_count, 0);
        let after = contents(&p);
        for (s, r) in &before {
            if ![3, 4, 10, 11, 12].contains(s) {
                assert!(after.contains(&(*s, r.clone())), "slot {s} kept its record");
            }
        }
        assert_eq!(record(&p, 4).unwrap(), Some(&big[..]));
    }

    /// Proves insert_shifted and delete_shifted keep the slot array in key order.
    #[test]
    fn shifted_keeps_order() {
        let mut p = empty(PageType::Index);
        let mut keys: Vec<u32> = Vec::new();
        let mut rng = Rng(77);
        for _ in 0..200 {
            let key = rng.next() as u32 % 1000;
            let at = keys.partition_point(|&k| k < key);
            keys.insert(at, key);
            insert_shifted(&mut p, at as u16, &rec_of_len(key, 20, RecordType::Index)).unwrap();
        }
        for _ in 0..80 {
            let at = rng.below(keys.len());
            let gone = delete_shifted(&mut p, at as u16).unwrap();
            assert_eq!(gone, rec_of_len(keys.remove(at), 20, RecordType::Index));
        }
        check_invariants(&p).unwrap();
        let read: Vec<u32> = contents(&p)
            .iter()
            .map(|(_, r)| u32::from_le_bytes(r[4..8].try_into().unwrap()))
            .collect();
        assert_eq!(read, keys);
        assert_eq!(slot_count(&p) as usize, keys.len());
    }

    /// Proves set_ghost flips the record type both ways and keeps the ghost count, and
    /// that forwarded records refuse.
    #[test]
    fn ghosting() {
        let mut p = empty(PageType::Data);
        insert_at(&mut p, 0, &rec_of_len(1, 30, RecordType::Primary)).unwrap();
        insert_at(&mut p, 1, &rec_of_len(2, 30, RecordType::Forwarded)).unwrap();
        set_ghost(&mut p, 0, true).unwrap();
        set_ghost(&mut p, 0, true).unwrap();
        assert_eq!(p.header().unwrap().ghost_rec_count, 1);
        assert!(record::is_ghost(record(&p, 0).unwrap().unwrap()));
        check_invariants(&p).unwrap();
        assert!(set_ghost(&mut p, 1, true).is_err());
        set_ghost(&mut p, 0, false).unwrap();
        assert_eq!(p.header().unwrap().ghost_rec_count, 0);
        check_invariants(&p).unwrap();
        let mut idx = empty(PageType::Index);
        insert_shifted(&mut idx, 0, &rec_of_len(1, 30, RecordType::Index)).unwrap();
        set_ghost(&mut idx, 0, true).unwrap();
        assert_eq!(
            record::record_type(record(&idx, 0).unwrap().unwrap()),
            Ok(RecordType::GhostIndex)
        );
        check_invariants(&idx).unwrap();
    }

    fn random_record(rng: &mut Rng, key: u32, t: RecordType) -> Vec<u8> {
        let len = match rng.below(10) {
            0 => 15 + rng.below(3000),
            _ => 15 + rng.below(300),
        };
        rec_of_len(key, len, t)
    }

    /// Proves, over 10,000 seeded random heap operations, that every operation keeps the
    /// invariants and the page's content equal to an in-memory model of its slots.
    #[test]
    fn random_heap_ops_match_model() {
        let mut rng = Rng(0xDEAD_BEEF_1234_5678);
        let mut p = empty(PageType::Data);
        let mut model: Vec<Option<Vec<u8>>> = Vec::new();
        for op in 0..10_000u32 {
            let live: Vec<u16> = (0..model.len() as u16)
                .filter(|&s| model[s as usize].is_some())
                .collect();
            match rng.below(10) {
                0..=3 => {
                    let rec = random_record(&mut rng, op, RecordType::Primary);
                    let slot = model
                        .iter()
                        .position(Option::is_none)
                        .unwrap_or(model.len());
                    let new_slot = slot == model.len();
                    let fits = can_insert(&p, rec.len(), new_slot);
                    let result = insert_at(&mut p, slot as u16, &rec);
                    assert_eq!(result.is_ok(), fits, "op {op}");
                    if fits && new_slot {
                        model.push(Some(rec));
                    } else if fits {
                        model[slot] = Some(rec);
                    }
                }
                4..=6 if !live.is_empty() => {
                    let s = live[rng.below(live.len())];
                    let gone = delete_at(&mut p, s).unwrap();
                    assert_eq!(Some(gone), model[s as usize].take(), "op {op}");
                }
                7..=8 if !live.is_empty() => {
                    let s = live[rng.below(live.len())];
                    let mut rec = random_record(&mut rng, op, RecordType::Primary);
                    let old = model[s as usize].as_ref().unwrap();
                    if record::is_ghost(old) {
                        record::set_record_type(&mut rec, RecordType::GhostData);
                    }
                    let free = p.header().unwrap().free_count as usize;
                    let fits = rec.len() <= old.len() + free;
                    let before = p.clone();
                    let result = replace(&mut p, s, &rec);
                    assert_eq!(result.is_ok(), fits, "op {op}");
                    match result {
                        Ok(()) => model[s as usize] = Some(rec),
                        Err(_) => assert_eq!(p, before, "failed replace changed the page"),
                    }
                }
                9 if !live.is_empty() => {
                    let s = live[rng.below(live.len())];
                    let ghost = rng.below(2) == 0;
                    set_ghost(&mut p, s, ghost).unwrap();
                    let t = if ghost {
                        RecordType::GhostData
                    } else {
                        RecordType::Primary
                    };
                    record::set_record_type(model[s as usize].as_mut().unwrap(), t);
                }
                _ => compact(&mut p).unwrap(),
            }
            check_invariants(&p).unwrap_or_else(|e| panic!("op {op}: {e}"));
            assert_eq!(slot_count(&p) as usize, model.len());
            let expected: Vec<(u16, Vec<u8>)> = model
                .iter()
                .enumerate()
                .filter_map(|(s, r)| r.clone().map(|r| (s as u16, r)))
                .collect();
            assert_eq!(contents(&p), expected, "op {op}");
        }
    }

    /// Proves, over seeded random index operations, that shifted inserts and deletes match
    /// a sorted in-memory model and keep the invariants.
    #[test]
    fn random_index_ops_match_model() {
        let mut rng = Rng(0x0123_4567_89AB_CDEF);
        let mut p = empty(PageType::Index);
        let mut model: Vec<Vec<u8>> = Vec::new();
        for op in 0..5_000u32 {
            if rng.below(2) == 0 || model.is_empty() {
                let rec = random_record(&mut rng, op, RecordType::Index);
                let at = rng.below(model.len() + 1);
                match insert_shifted(&mut p, at as u16, &rec) {
                    Ok(()) => model.insert(at, rec),
                    Err(e) => assert!(matches!(e, FormatError::TooLarge { .. })),
                }
            } else {
                let at = rng.below(model.len());
                assert_eq!(delete_shifted(&mut p, at as u16).unwrap(), model.remove(at));
            }
            check_invariants(&p).unwrap_or_else(|e| panic!("op {op}: {e}"));
            let read: Vec<Vec<u8>> = contents(&p).into_iter().map(|(_, r)| r).collect();
            assert_eq!(read, model, "op {op}");
        }
    }

    fn sample_page() -> Page {
        let mut p = empty(PageType::Data);
        for s in 0..12u16 {
            insert_at(
                &mut p,
                s,
                &rec_of_len(s as u32, 40 + s as usize, RecordType::Primary),
            )
            .unwrap();
        }
        delete_at(&mut p, 5).unwrap();
        set_ghost(&mut p, 2, true).unwrap();
        p
    }

    /// Proves targeted corruptions of the header, slot array and records are reported
    /// by check_invariants and by the reads that touch them.
    #[test]
    fn corruption_is_reported() {
        let good = sample_page();
        check_invariants(&good).unwrap();
        type Corruption = (&'static str, Box<dyn Fn(&mut Page)>);
        let cases: Vec<Corruption> = vec![
            ("header version", Box::new(|p| p.bytes_mut()[0] = 9)),
            (
                "huge slot count",
                Box::new(|p| put_u16(p.bytes_mut(), 22, 5000)),
            ),
            (
                "free data past slots",
                Box::new(|p| put_u16(p.bytes_mut(), 34, 8190)),
            ),
            (
                "free count off by one",
                Box::new(|p| {
                    let fc = get_u16(p.bytes(), 32);
                    put_u16(p.bytes_mut(), 32, fc - 1)
                }),
            ),
            ("ghost count", Box::new(|p| put_u16(p.bytes_mut(), 64, 0))),
            (
                "slot into header",
                Box::new(|p| put_u16(p.bytes_mut(), slot_pos(3), 40)),
            ),
            (
                "slot past free data",
                Box::new(|p| put_u16(p.bytes_mut(), slot_pos(3), 8000)),
            ),
            (
                "overlapping slots",
                Box::new(|p| {
                    let o = get_u16(p.bytes(), slot_pos(1));
                    put_u16(p.bytes_mut(), slot_pos(3), o + 2)
                }),
            ),
            (
                "record status",
                Box::new(|p| {
                    let o = get_u16(p.bytes(), slot_pos(3)) as usize;
                    p.bytes_mut()[o] = 0xFF
                }),
            ),
            (
                "index record on data page",
                Box::new(|p| {
                    let o = get_u16(p.bytes(), slot_pos(3)) as usize;
                    record::set_record_type(&mut p.bytes_mut()[o..], RecordType::Index)
                }),
            ),
        ];
        for (what, corrupt_it) in cases {
            let mut p = good.clone();
            corrupt_it(&mut p);
            let err = check_invariants(&p).expect_err(what);
            if let FormatError::Corrupt { page, .. } = &err {
                if what != "header version" {
                    assert_eq!(*page, AT, "{what}: {err}");
                }
            }
            let read_errors = (0..12).filter(|&s| record(&p, s).is_err()).count();
            let iter_errors = records(&p).filter(|(_, r)| r.is_err()).count();
            let structural = !matches!(
                what,
                "free count off by one"
                    | "ghost count"
                    | "overlapping slots"
                    | "index record on data page"
            );
            if structural {
                assert!(read_errors > 0 && iter_errors > 0, "{what}");
            }
            assert!(compact(&mut p.clone()).is_err() || !structural, "{what}");
        }
    }

    /// Proves random byte corruption of the header, slot array and records never panics
    /// any function, that a page passing check_invariants reads every slot cleanly, and
    /// that a failed mutation leaves the page as it was.
    #[test]
    fn random_corruption_never_panics() {
        let good = sample_page();
        let mut rng = Rng(0x5EED);
        let mut detected = 0;
        for round in 0..20_000 {
            let mut p = good.clone();
            for _ in 0..1 + rng.below(4) {
                let at = match rng.below(3) {
                    0 => rng.below(PAGE_HEADER_SIZE),
                    1 => PAGE_SIZE - 1 - rng.below(40),
                    _ => PAGE_HEADER_SIZE + rng.below(700),
                };
                p.bytes_mut()[at] = rng.next() as u8;
            }
            let checked = check_invariants(&p);
            detected += checked.is_err() as usize;
            let slots = slot_count(&p);
            for s in 0..slots.saturating_add(3) {
                let read = record(&p, s);
                if checked.is_ok() && s < slots {
                    assert!(
                        read.is_ok(),
                        "round {round}: slot {s} unreadable on a valid page"
                    );
                }
            }
            let _ = records(&p).count();
            let _ = free_space(&p);
            let rec = rec_of_len(1, 60, RecordType::Primary);
            let slot = rng.below(slots as usize + 2) as u16;
            type Op = fn(&mut Page, u16, &[u8]) -> Result<(), FormatError>;
            let ops: [Op; 7] = [
                |p, s, r| insert_at(p, s, r),
                |p, s, r| insert_shifted(p, s, r),
                |p, s, _| delete_at(p, s).map(drop),
                |p, s, _| delete_shifted(p, s).map(drop),
                |p, s, r| replace(p, s, r),
                |p, s, _| set_ghost(p, s, true),
                |p, _, _| compact(p),
            ];
            let before = p.clone();
            let mut q = p.clone();
            if ops[rng.below(ops.len())](&mut q, slot, &rec).is_err() {
                assert_eq!(q, before, "round {round}: failed mutation changed the page");
            } else if checked.is_ok() {
                check_invariants(&q).unwrap_or_else(|e| panic!("round {round}: {e}"));
            }
        }
        assert!(detected > 10_000, "only {detected} corruptions detected");
    }
}
