//! Data and index records in SQL Server's FixedVar format. See FORMAT.md, "Data records".
//!
//! A record carries its own framing (the column-count offset, the column count and the
//! variable-column end offsets), so a page can find where a record ends without the schema
//! (`record_len`); the schema (`ColumnLayout`s, in column ordinal order) is needed only to
//! split the record into column values (`decode`).
//!
//! Invariants:
//! 1. `decode` accepts exactly what `encode` produces for the same layouts, plus records
//!    written before trailing columns were added (fewer stored columns: the missing ones
//!    read as NULL). Anything else is `FormatError::Corrupt`; no input makes it panic.
//! 2. The encoding is canonical: NULL fixed columns hold zero bytes, trailing NULL variable
//!    columns are not stored, and status bit 0x20 is set exactly when a variable column is
//!    stored. So `encode(decode(r)) == r` for every record with all columns stored.
//! 3. No record is longer than `MAX_RECORD_SIZE` or shorter than 7 bytes (a record has at
//!    least one column, so at least one null-bitmap byte).
//!
//! Deliberately absent: SQL Server's 9-byte forwarding stub, row-overflow and LOB pointers
//! (complex columns), the versioning tag, sparse columns and row/page compression. A
//! forwarding stub here is an ordinary FixedVar record whose type is `ForwardingStub`; the
//! storage layer chooses its columns.

use crate::codec::{get_u16, put_u16};
use crate::{corrupt, FormatError, PageId};

/// The longest record a page accepts, as in SQL Server.
pub const MAX_RECORD_SIZE: usize = 8060;

/// Status A bits (byte 0).
const TYPE_MASK: u8 = 0x0E;
const HAS_NULL_BITMAP: u8 = 0x10;
const HAS_VARIABLE: u8 = 0x20;
/// Offset of the u16 that points at the column-count field, and of the fixed-length data.
const OFF_COLUMN_COUNT_PTR: usize = 2;
const FIXED_DATA: usize = 4;
/// The smallest record: status A, status B, count pointer, count, one bitmap byte.
const MIN_RECORD_SIZE: usize = 7;
const _: () = assert!(
    MAX_RECORD_SIZE < 0x8000,
    "end offsets must never need bit 15"
);
const _: () = assert!(MAX_RECORD_SIZE + 2 <= crate::PAGE_SIZE - crate::PAGE_HEADER_SIZE);

/// How a column is stored: fixed-length with its byte size, or variable-length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnLayout {
    Fixed(u16),
    Variable,
}

/// Record type in bits 1-3 of status byte A, numbered as SQL Server numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RecordType {
    /// A data record (heap row or clustered index leaf row).
    Primary = 0,
    /// A heap row that moved to another page; a stub on its home page points to it.
    Forwarded = 1,
    /// The stub left on a heap row's home page when the row moved.
    ForwardingStub = 2,
    /// An index record (non-leaf rows, and nonclustered index leaf rows).
    Index = 3,
    /// A deleted index record awaiting ghost cleanup.
    GhostIndex = 5,
    /// A deleted data record awaiting ghost cleanup.
    GhostData = 6,
}

impl RecordType {
    pub fn from_u8(v: u8) -> Option<RecordType> {
        use RecordType::*;
        Some(match v {
            0 => Primary,
            1 => Forwarded,
            2 => ForwardingStub,
            3 => Index,
            5 => GhostIndex,
            6 => GhostData,
            _ => return None,
        })
    }

    pub fn is_ghost(self) -> bool {
        matches!(self, RecordType::GhostIndex | RecordType::GhostData)
    }
}

fn bad(reason: impl Into<String>) -> FormatError {
    corrupt(PageId::NULL, reason)
}

fn too_large(detail: String) -> FormatError {
    FormatError::TooLarge {
        what: "record",
        detail,
    }
}

/// Bytes in the null bitmap of a record with `columns` columns.
fn bitmap_len(columns: usize) -> usize {
    columns.div_ceil(8)
}

fn is_null(bitmap: &[u8], column: usize) -> bool {
    bitmap[column / 8] & (1 << (column % 8)) != 0
}

/// Encodes one record of type `Primary`; `values[i]` is column i's bytes, `None` for NULL.
/// Use `set_record_type` for other types.
pub fn encode(layouts: &[ColumnLayout], values: &[Option<&[u8]>]) -> Result<Vec<u8>, FormatError> {
    if values.len() != layouts.len() {
        return Err(too_large(format!(
            "{} values for {} columns",
            values.len(),
            layouts.len()
        )));
    }
    if layouts.is_empty() {
        return Err(too_large("a record needs at least one column".into()));
    }
    let mut fixed_len = 0usize;
    for (i, (layout, value)) in layouts.iter().zip(values).enumerate() {
        if let ColumnLayout::Fixed(size) = *layout {
            fixed_len += size as usize;
            if let Some(v) = value {
                if v.len() != size as usize {
                    return Err(too_large(format!(
                        "column {i} holds {size} bytes but the value has {}",
                        v.len()
                    )));
                }
            }
        }
    }
    // Variable columns up to the last non-NULL one are stored; later ones are implied NULL.
    let variable: Vec<Option<&[u8]>> = layouts
        .iter()
        .zip(values)
        .filter(|(l, _)| **l == ColumnLayout::Variable)
        .map(|(_, v)| *v)
        .collect();
    let stored = variable
        .iter()
        .rposition(Option::is_some)
        .map_or(0, |i| i + 1);
    let count_at = FIXED_DATA + fixed_len;
    let bitmap_at = count_at + 2;
    let after_bitmap = bitmap_at + bitmap_len(layouts.len());
    let var_data_at = if stored > 0 {
        after_bitmap + 2 + 2 * stored
    } else {
        after_bitmap
    };
    let var_len: usize = variable[..stored]
        .iter()
        .map(|v| v.map_or(0, <[u8]>::len))
        .sum();
    let total = var_data_at + var_len;
    if total > MAX_RECORD_SIZE {
        return Err(too_large(format!(
            "{total} bytes exceed the maximum of {MAX_RECORD_SIZE}"
        )));
    }
    // From here every offset is below MAX_RECORD_SIZE, so the u16 casts are exact.
    let mut rec = vec![0u8; total];
    rec[0] = HAS_NULL_BITMAP | if stored > 0 { HAS_VARIABLE } else { 0 };
    put_u16(&mut rec, OFF_COLUMN_COUNT_PTR, count_at as u16);
    put_u16(&mut rec, count_at, layouts.len() as u16);
    let mut fixed_at = FIXED_DATA;
    for (i, (layout, value)) in layouts.iter().zip(values).enumerate() {
        if value.is_none() {
            rec[bitmap_at + i / 8] |= 1 << (i % 8);
        }
        if let ColumnLayout::Fixed(size) = *layout {
            if let Some(v) = value {
                rec[fixed_at..fixed_at + v.len()].copy_from_slice(v);
            }
            fixed_at += size as usize;
        }
    }
    if stored > 0 {
        put_u16(&mut rec, after_bitmap, stored as u16);
        let mut end = var_data_at;
        for (k, value) in variable[..stored].iter().enumerate() {
            let v = value.unwrap_or(&[]);
            rec[end..end + v.len()].copy_from_slice(v);
            end += v.len();
            put_u16(&mut rec, after_bitmap + 2 + 2 * k, end as u16);
        }
        debug_assert_eq!(end, total);
    }
    debug_assert_eq!(record_len(&rec), Ok(total));
    Ok(rec)
}

/// The framing of a record, validated without the schema.
struct Frame {
    /// Offset of the column-count field (= 4 + fixed-length bytes).
    count_at: usize,
    columns: usize,
    bitmap_at: usize,
    /// Variable columns stored, and where their end-offset array and data start.
    var_stored: usize,
    var_ends_at: usize,
    var_data_at: usize,
    len: usize,
}

fn u16_at(rec: &[u8], pos: usize, what: &str) -> Result<usize, FormatError> {
    match rec.get(pos..pos + 2) {
        Some(_) => Ok(get_u16(rec, pos) as usize),
        None => Err(bad(format!(
            "record {what} at offset {pos} runs past the {} available bytes",
            rec.len()
        ))),
    }
}

/// Parses the framing of the record at `rec[0]`; `rec` may run on past the record's end.
fn frame(rec: &[u8]) -> Result<Frame, FormatError> {
    if rec.len() < MIN_RECORD_SIZE {
        return Err(bad(format!("record of {} bytes is too short", rec.len())));
    }
    let status = rec[0];
    if status & !(TYPE_MASK | HAS_NULL_BITMAP | HAS_VARIABLE) != 0 || rec[1] != 0 {
        return Err(bad(format!(
            "record status bytes 0x{status:02x} 0x{:02x} have unknown bits",
            rec[1]
        )));
    }
    if status & HAS_NULL_BITMAP == 0 {
        return Err(bad("record has no null bitmap"));
    }
    record_type(rec)?;
    let count_at = get_u16(rec, OFF_COLUMN_COUNT_PTR) as usize;
    if count_at < FIXED_DATA {
        return Err(bad(format!("record column count offset {count_at}")));
    }
    let columns = u16_at(rec, count_at, "column count")?;
    if columns == 0 {
        return Err(bad("record has no columns"));
    }
    let bitmap_at = count_at + 2;
    let after_bitmap = bitmap_at + bitmap_len(columns);
    let Some(bitmap) = rec.get(bitmap_at..after_bitmap) else {
        return Err(bad(format!(
            "null bitmap of {columns} columns runs past the record"
        )));
    };
    // Bits past the last column are zero, as encode leaves them.
    let spare_bits = bitmap.len() * 8 - columns;
    if spare_bits > 0 && bitmap[bitmap.len() - 1] >> (8 - spare_bits) != 0 {
        return Err(bad("null bitmap has bits set beyond the column count"));
    }
    let mut f = Frame {
        count_at,
        columns,
        bitmap_at,
        var_stored: 0,
        var_ends_at: after_bitmap,
        var_data_at: after_bitmap,
        len: after_bitmap,
    };
    if status & HAS_VARIABLE != 0 {
        f.var_stored = u16_at(rec, after_bitmap, "variable column count")?;
        if f.var_stored == 0 || f.var_stored > columns {
            return Err(bad(format!(
                "record stores {} variable columns of {columns}",
                f.var_stored
            )));
        }
        f.var_ends_at = after_bitmap + 2;
        f.var_data_at = f.var_ends_at + 2 * f.var_stored;
        let mut end = f.var_data_at;
        for k in 0..f.var_stored {
            let e = u16_at(rec, f.var_ends_at + 2 * k, "variable column end offset")?;
            if e < end {
                return Err(bad(format!(
                    "variable column {k} ends at {e}, before offset {end}"
                )));
            }
            end = e;
        }
        f.len = end;
    }
    if f.len > rec.len() || f.len > MAX_RECORD_SIZE {
        return Err(bad(format!(
            "record of {} bytes runs past the {} available (maximum {MAX_RECORD_SIZE})",
            f.len,
            rec.len()
        )));
    }
    Ok(f)
}

/// Length of the record starting at `rec[0]`, from the record's own framing (no schema).
/// `rec` may extend past the record, e.g. to the end of the page's record area.
pub fn record_len(rec: &[u8]) -> Result<usize, FormatError> {
    frame(rec).map(|f| f.len)
}

/// The record's type from status byte A.
pub fn record_type(rec: &[u8]) -> Result<RecordType, FormatError> {
    let Some(&status) = rec.first() else {
        return Err(bad("empty record"));
    };
    RecordType::from_u8((status & TYPE_MASK) >> 1)
        .ok_or_else(|| bad(format!("unknown record type {}", (status & TYPE_MASK) >> 1)))
}

/// Sets the record's type in place (ghosting and unghosting a record, marking it forwarded).
/// Panics on an empty slice: callers pass records that `record_len` accepted.
pub fn set_record_type(rec: &mut [u8], t: RecordType) {
    assert!(!rec.is_empty(), "set_record_type on an empty record");
    rec[0] = (rec[0] & !TYPE_MASK) | ((t as u8) << 1);
}

/// True if the record is a ghost (deleted, awaiting cleanup); false for anything unreadable.
pub fn is_ghost(rec: &[u8]) -> bool {
    record_type(rec).is_ok_and(RecordType::is_ghost)
}

/// The bytes of fixed-length columns `spans` ((offset, length) from the record's start,
/// as `fixed_spans` gives them) of a record that starts `head` (the record, or more
/// bytes after it), or None when the record's fixed part does not reach the last span (a
/// record stored before those columns were added, or damage): `decode` then decides.
/// For columns that are never NULL: the null bitmap is not read.
pub fn fixed_values<'a>(head: &'a [u8], spans: &[(usize, usize)]) -> Option<Vec<Option<&'a [u8]>>> {
    let count_at = get_u16(head.get(..FIXED_DATA)?, OFF_COLUMN_COUNT_PTR) as usize;
    let end = spans
        .iter()
        .map(|&(o, n)| o + n)
        .max()
        .unwrap_or(FIXED_DATA);
    if count_at < end || head.len() < end {
        return None;
    }
    Some(spans.iter().map(|&(o, n)| Some(&head[o..o + n])).collect())
}

/// Where the columns at `positions` lie in a record of `layouts`, when each is
/// fixed-length: (offset from the record's start, length). None if one is variable.
pub fn fixed_spans(layouts: &[ColumnLayout], positions: &[usize]) -> Option<Vec<(usize, usize)>> {
    let mut starts = Vec::with_capacity(layouts.len());
    let mut at = FIXED_DATA;
    for l in layouts {
        starts.push(at);
        if let ColumnLayout::Fixed(n) = l {
            at += *n as usize;
        }
    }
    positions
        .iter()
        .map(|&p| match layouts.get(p)? {
            ColumnLayout::Fixed(n) => Some((starts[p], *n as usize)),
            ColumnLayout::Variable => None,
        })
        .collect()
}

/// Splits the record `rec` (exactly one record, no trailing bytes) into column values,
/// `None` for NULL. Columns beyond those stored (added after the record was written) are
/// NULL.
pub fn decode<'a>(
    layouts: &[ColumnLayout],
    rec: &'a [u8],
) -> Result<Vec<Option<&'a [u8]>>, FormatError> {
    let mut values = Vec::with_capacity(layouts.len());
    decode_into(layouts, rec, &mut values)?;
    Ok(values)
}

/// `decode`, appending the `layouts.len()` values to `values` (a buffer the caller reuses
/// across records). After an error `values` may hold some of them: truncate it.
pub fn decode_into<'a>(
    layouts: &[ColumnLayout],
    rec: &'a [u8],
    values: &mut Vec<Option<&'a [u8]>>,
) -> Result<(), FormatError> {
    let start = values.len();
    let f = frame(rec)?;
    if f.len != rec.len() {
        return Err(bad(format!(
            "record framing ends at {} but the record has {} bytes",
            f.len,
            rec.len()
        )));
    }
    if f.columns > layouts.len() {
        return Err(bad(format!(
            "record stores {} columns but the table has {}",
            f.columns,
            layouts.len()
        )));
    }
    let stored = &layouts[..f.columns];
    let fixed_len: usize = stored
        .iter()
        .map(|l| match l {
            ColumnLayout::Fixed(size) => *size as usize,
            ColumnLayout::Variable => 0,
        })
        .sum();
    if FIXED_DATA + fixed_len != f.count_at {
        return Err(bad(format!(
            "record has {} fixed-length bytes but its columns need {fixed_len}",
            f.count_at - FIXED_DATA
        )));
    }
    let var_columns = stored
        .iter()
        .filter(|l| **l == ColumnLayout::Variable)
        .count();
    if f.var_stored > var_columns {
        return Err(bad(format!(
            "record stores {} variable columns but the table has {var_columns}",
            f.var_stored
        )));
    }
    let bitmap = &rec[f.bitmap_at..f.bitmap_at + bitmap_len(f.columns)];
    let mut fixed_at = FIXED_DATA;
    let mut var_index = 0;
    let mut var_start = f.var_data_at;
    for (i, layout) in stored.iter().enumerate() {
        let null = is_null(bitmap, i);
        let bytes = match *layout {
            ColumnLayout::Fixed(size) => {
                let bytes = &rec[fixed_at..fixed_at + size as usize];
                fixed_at += size as usize;
                bytes
            }
            ColumnLayout::Variable if var_index < f.var_stored => {
                let end = get_u16(rec, f.var_ends_at + 2 * var_index) as usize;
                let bytes = &rec[var_start..end];
                var_start = end;
                var_index += 1;
                if null && var_index == f.var_stored {
                    return Err(bad(format!("trailing NULL column {i} is stored")));
                }
                bytes
            }
            ColumnLayout::Variable => {
                if !null {
                    return Err(bad(format!("column {i} is neither stored nor NULL")));
                }
                &[]
            }
        };
        if null && bytes.iter().any(|&b| b != 0) {
            return Err(bad(format!("NULL column {i} holds data")));
        }
        values.push(if null { None } else { Some(bytes) });
    }
    values.resize(start + layouts.len(), None);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ColumnLayout::{Fixed, Variable};

    /// Proves fixed_values reads the same bytes decode gives, for fixed columns among
    /// variable ones, from a head with later records after it; and declines a record
    /// stored before its later columns were added, and a variable column.
    #[test]
    fn fixed_values_match_decode() {
        let layouts = [Fixed(4), Variable, Fixed(8), Variable, Fixed(2)];
        let vals: [Option<&[u8]>; 5] = [
            Some(&[1, 2, 3, 4]),
            Some(b"abc"),
            Some(&[9; 8]),
            None,
            Some(&[7, 7]),
        ];
        let rec = encode(&layouts, &vals).unwrap();
        let mut head = rec.clone();
        head.extend_from_slice(&[0xEE; 40]);
        let spans = fixed_spans(&layouts, &[4, 0, 2]).unwrap();
        let got = fixed_values(&head, &spans).unwrap();
        let all = decode(&layouts, &rec).unwrap();
        assert_eq!(got, vec![all[4], all[0], all[2]]);
        assert_eq!(fixed_spans(&layouts, &[0, 1]), None, "a variable column");
        let old = encode(&layouts[..3], &vals[..3]).unwrap();
        assert_eq!(fixed_values(&old, &spans), None, "column 4 is not stored");
        assert_eq!(fixed_values(&old[..3], &spans), None, "a head too short");
    }

    /// A small xorshift64 generator so that failing seeds replay exactly.
    pub(crate) struct Rng(pub u64);
    impl Rng {
        pub fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        pub fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    fn round_trip(layouts: &[ColumnLayout], values: &[Option<&[u8]>]) -> Vec<u8> {
        let rec = encode(layouts, values).unwrap();
        assert_eq!(record_len(&rec), Ok(rec.len()));
        assert_eq!(decode(layouts, &rec).unwrap(), values);
        assert_eq!(record_type(&rec), Ok(RecordType::Primary));
        rec
    }

    /// Proves the byte layout of INT 5, VARCHAR 'ab', NULL CHAR(3) against hand-computed bytes.
    #[test]
    fn byte_pin_small_record() {
        let rec = round_trip(
            &[Fixed(4), Variable, Fixed(3)],
            &[Some(&5i32.to_le_bytes()), Some(b"ab"), None],
        );
        #[rustfmt::skip]
        let expected = [
            0x30, 0x00, 0x0B, 0x00,             // status A (bitmap, variable), B, count at 11
            0x05, 0x00, 0x00, 0x00,             // INT 5
            0x00, 0x00, 0x00,                   // NULL CHAR(3), zeroed
            0x03, 0x00, 0x04,                   // 3 columns; column 2 NULL
            0x01, 0x00, 0x14, 0x00,             // 1 variable column ending at 20
            b'a', b'b',
        ];
        assert_eq!(rec, expected);
    }

    /// Proves round trips across fixed, variable and NULL mixes, and that trailing NULL
    /// variable columns are not stored while a middle one takes no bytes.
    #[test]
    fn round_trips() {
        round_trip(
            &[Fixed(4), Fixed(8), Fixed(1)],
            &[Some(&[1; 4]), None, Some(&[9])],
        );
        round_trip(&[Fixed(2)], &[None]);
        round_trip(
            &[Variable, Variable, Variable],
            &[Some(b"x"), Some(b""), Some(b"yz")],
        );
        round_trip(&[Variable, Variable], &[None, None]);
        let nine: Vec<ColumnLayout> = (0..9).map(|_| Variable).collect();
        let vals: Vec<Option<&[u8]>> = (0..9).map(|i| (i % 3 == 0).then_some(&b"q"[..])).collect();
        round_trip(&nine, &vals);

        let with_trailing = round_trip(
            &[Variable, Fixed(2), Variable, Variable],
            &[Some(b"abc"), Some(b"zz"), None, None],
        );
        let without = encode(&[Variable, Fixed(2)], &[Some(b"abc"), Some(b"zz")]).unwrap();
        assert_eq!(get_u16(&with_trailing, 9), 1, "one variable column stored");
        assert_eq!(with_trailing.len(), without.len());
        let middle = round_trip(
            &[Variable, Variable, Variable],
            &[Some(b"a"), None, Some(b"b")],
        );
        assert_eq!(
            get_u16(&middle, 9),
            get_u16(&middle, 11),
            "NULL middle column is empty"
        );
        let all_null = round_trip(&[Variable, Fixed(1)], &[None, None]);
        assert_eq!(all_null[0] & HAS_VARIABLE, 0, "no variable column stored");
    }

    /// Proves a record of exactly 8,060 bytes encodes and one byte more is rejected.
    #[test]
    fn max_record_size() {
        let layouts = [Fixed(4), Variable];
        let big = vec![7u8; MAX_RECORD_SIZE - 15];
        let rec = round_trip(&layouts, &[Some(&[0; 4]), Some(&big)]);
        assert_eq!(rec.len(), MAX_RECORD_SIZE);
        let bigger = vec![7u8; MAX_RECORD_SIZE - 14];
        assert!(matches!(
            encode(&layouts, &[Some(&[0; 4]), Some(&bigger)]),
            Err(FormatError::TooLarge { .. })
        ));
    }

    /// Proves encode rejects a value count mismatch, a wrong fixed length and no columns.
    #[test]
    fn encode_rejects_bad_input() {
        assert!(encode(&[Fixed(4)], &[]).is_err());
        assert!(encode(&[Fixed(4)], &[Some(b"abc")]).is_err());
        assert!(encode(&[], &[]).is_err());
    }

    /// Proves a record written before columns were added decodes with the new ones NULL,
    /// and one with more columns than the table is corrupt.
    #[test]
    fn fewer_stored_columns_read_as_null() {
        let old = [Fixed(4), Variable];
        let rec = encode(&old, &[Some(&[1; 4]), Some(b"hi")]).unwrap();
        let new = [Fixed(4), Variable, Fixed(2), Variable];
        assert_eq!(
            decode(&new, &rec).unwrap(),
            vec![Some(&[1u8; 4][..]), Some(b"hi"), None, None]
        );
        assert!(decode(&old[..1], &rec).is_err());
    }

    /// Proves set_record_type ghosts and unghosts in place without changing the framing.
    #[test]
    fn ghosting_in_place() {
        let mut rec = encode(&[Fixed(1), Variable], &[Some(&[3]), Some(b"v")]).unwrap();
        assert!(!is_ghost(&rec));
        set_record_type(&mut rec, RecordType::GhostData);
        assert!(is_ghost(&rec));
        assert_eq!(record_len(&rec), Ok(rec.len()));
        set_record_type(&mut rec, RecordType::Primary);
        assert!(!is_ghost(&rec));
        rec[0] |= 4 << 1;
        assert!(record_type(&rec).is_err(), "type 4 is not defined");
        assert!(!is_ghost(&[]));
    }

    fn sample_records() -> Vec<(Vec<ColumnLayout>, Vec<u8>)> {
        type Case = (Vec<ColumnLayout>, Vec<Option<&'static [u8]>>);
        let cases: Vec<Case> = vec![
            (
                vec![Fixed(4), Variable, Fixed(3)],
                vec![Some(&[5, 0, 0, 0]), Some(b"ab"), None],
            ),
            (vec![Fixed(2), Fixed(3)], vec![Some(b"ab"), Some(b"cde")]),
            (
                vec![Variable, Variable, Variable],
                vec![Some(b"x"), None, Some(b"long value")],
            ),
            (
                (0..11).map(|_| Variable).collect(),
                (0..11).map(|_| Some(&b"vv"[..])).collect(),
            ),
        ];
        cases
            .into_iter()
            .map(|(l, v)| {
                let rec = encode(&l, &v).unwrap();
                (l, rec)
            })
            .collect()
    }

    /// Proves every truncation of a valid record is rejected, and so is trailing garbage.
    #[test]
    fn truncations_are_rejected() {
        for (layouts, rec) in sample_records() {
            for cut in 0..rec.len() {
                assert!(decode(&layouts, &rec[..cut]).is_err(), "cut at {cut}");
                assert!(record_len(&rec[..cut]).is_err(), "cut at {cut}");
            }
            let mut longer = rec.clone();
            longer.push(0);
            assert!(decode(&layouts, &longer).is_err());
            assert_eq!(record_len(&longer), Ok(rec.len()));
        }
    }

    /// Proves random byte mutations never panic, and that whatever still decodes with all
    /// columns stored re-encodes to the same bytes (the encoding is canonical).
    #[test]
    fn mutations_never_panic() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let samples = sample_records();
        for _ in 0..50_000 {
            let (layouts, rec) = &samples[rng.below(samples.len())];
            let mut m = rec.clone();
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(m.len());
                m[at] = rng.next() as u8;
            }
            if rng.below(8) == 0 {
                m.truncate(rng.below(m.len() + 1));
            }
            let _ = record_len(&m);
            if let Ok(values) = decode(layouts, &m) {
                let count_at = get_u16(&m, OFF_COLUMN_COUNT_PTR) as usize;
                if get_u16(&m, count_at) as usize == layouts.len() {
                    let mut again = encode(layouts, &values).unwrap();
                    set_record_type(&mut again, record_type(&m).unwrap());
                    assert_eq!(again, m);
                }
            }
        }
    }
}
