//! Log files: created with a file header and fully initialized space (see `file_init`),
//! divided into virtual log files (VLFs) by SQL Server 2022's rules, each VLF headed by a
//! `VlfHeader` sector so the layout can be read back from the file itself.
//!
//! VLF count rules (FORMAT.md, "Log file"): a new log of size S gets 4 VLFs below 64 MB, 8 up
//! to 1 GB, 16 above. A growth of G on a log of current size C gets 1 VLF when G <= 64 MB or
//! G < C/8, otherwise the same table as creation.
//!
//! Invariants:
//! 1. VLFs tile the file from offset 8,192 to its end without gaps; every VLF is a multiple
//!    of 8 KiB and at least 16 KiB, except a growth too small for that, which is one VLF.
//! 2. A VLF that was never used has sequence 0 and parity 0; only the log writer (with the
//!    transaction log) changes a header after that, and the database's first VLF starts
//!    in use as sequence 1, parity 0x40.

use extentdb_format::file_header::{FileHeader, FileType};
use extentdb_format::log::{VlfHeader, PARITY_FIRST, VLF_HEADER_AREA};
use extentdb_format::{Lsn, PageId, PAGE_SIZE, SECTOR_SIZE};
use extentdb_io::DbFile;

use crate::{now_us, StorageError};

const MB: u64 = 1 << 20;

/// Writes the log file's header page (page 0) over its initialized space.
pub fn write_header(
    file: &dyn DbFile,
    database_guid: [u8; 16],
    file_id: u16,
    created_us: i64,
) -> Result<(), StorageError> {
    let h = FileHeader {
        database_guid,
        file_id,
        file_type: FileType::Log,
        created_us,
    };
    let p = h.encode();
    debug_assert_eq!(
        p.header().map(|h| h.this_page).ok(),
        Some(PageId::new(file_id, 0))
    );
    file.write_at(p.bytes(), 0)?;
    Ok(())
}

/// Formats a new, initialized log file: header page, then `vlf_count` VLF headers over the
/// rest of its `size_pages` (the first in use when `activate_first`), made durable.
pub fn format_new(
    file: &dyn DbFile,
    database_guid: [u8; 16],
    file_id: u16,
    size_pages: u32,
    vlf_count: u32,
    activate_first: bool,
) -> Result<(), StorageError> {
    write_header(file, database_guid, file_id, now_us())?;
    let end = size_pages as u64 * PAGE_SIZE as u64;
    write_vlf_headers(
        file,
        file_id,
        &layout(PAGE_SIZE as u64, end, vlf_count),
        activate_first,
    )?;
    Ok(file.sync_data()?)
}

/// VLFs for a new log file of `size` bytes.
pub fn vlf_count_for_create(size: u64) -> u32 {
    match size {
        s if s < 64 * MB => 4,
        s if s <= 1024 * MB => 8,
        _ => 16,
    }
}

/// VLFs for a growth of `growth` bytes of a log that is `current` bytes now.
pub fn vlf_count_for_growth(growth: u64, current: u64) -> u32 {
    if growth <= 64 * MB || growth < current / 8 {
        1
    } else {
        vlf_count_for_create(growth)
    }
}

/// Splits `[start, end)` into `count` VLFs of whole pages; the last takes the remainder.
pub fn layout(start: u64, end: u64, count: u32) -> Vec<(u64, u64)> {
    assert!(
        end > start && start.is_multiple_of(PAGE_SIZE as u64),
        "VLF range [{start}, {end})"
    );
    let pages = (end - start) / PAGE_SIZE as u64;
    // Each VLF needs its header area and at least one page of blocks (invariant 1).
    let count = (count as u64).min(pages / 2).max(1);
    let each = pages / count * PAGE_SIZE as u64;
    (0..count)
        .map(|i| {
            let offset = start + i * each;
            let size = if i + 1 == count { end - offset } else { each };
            (offset, size)
        })
        .collect()
}

/// Writes never-used VLF headers over `vlfs`; with `activate_first`, the first one starts in
/// use as sequence 1 with the first parity. The caller syncs.
pub fn write_vlf_headers(
    file: &dyn DbFile,
    file_id: u16,
    vlfs: &[(u64, u64)],
    activate_first: bool,
) -> Result<(), StorageError> {
    for (i, &(start_offset, size)) in vlfs.iter().enumerate() {
        let first = activate_first && i == 0;
        let h = VlfHeader {
            sequence: if first { 1 } else { 0 },
            parity: if first { PARITY_FIRST } else { 0 },
            file_id,
            start_offset,
            size,
            create_lsn: Lsn::ZERO,
        };
        file.write_at(&h.encode(), start_offset)?;
    }
    Ok(())
}

/// Reads the VLF headers of a log file, walking from offset 8,192 by each header's size.
pub fn read_vlfs(file: &dyn DbFile, file_id: u16) -> Result<Vec<VlfHeader>, StorageError> {
    read_vlfs_upto(file, file_id, u64::MAX)
}

/// `read_vlfs` over the first `limit` bytes only: space past the catalog's size (a growth
/// prepared but never committed) is not part of the log.
pub fn read_vlfs_upto(
    file: &dyn DbFile,
    file_id: u16,
    limit: u64,
) -> Result<Vec<VlfHeader>, StorageError> {
    let len = file.len()?.min(limit);
    let mut out = Vec::new();
    let mut at = PAGE_SIZE as u64;
    let mut sector = [0u8; SECTOR_SIZE];
    while at < len {
        file.read_at(&mut sector, at)?;
        let h = VlfHeader::decode(&sector).filter(|h| {
            h.start_offset == at && h.size >= VLF_HEADER_AREA.min(len - at) && h.size <= len - at
        });
        let Some(h) = h else {
            return Err(extentdb_format::corrupt(
                PageId::new(file_id, (at / PAGE_SIZE as u64) as u32),
                format!("no valid VLF header at offset {at}"),
            )
            .into());
        };
        at += h.size;
        out.push(h);
    }
    Ok(out)
}

/// Cuts the log at `stop` (RESTORE LOG ... WITH STOPAT): the records from `stop` on are
/// removed, so the end of the log is there. The block holding `stop` is written again with
/// only the records before it, the rest of its VLF is zeroed, and every VLF of a later
/// FSeqNo is zeroed and marked never used, so no block after the cut can be read as log
/// (nor taken for damage by the reader's look past the end) and the writer reuses them.
pub fn cut_log(
    files: &std::collections::BTreeMap<u16, std::sync::Arc<dyn DbFile>>,
    vlfs: &[VlfHeader],
    stop: Lsn,
) -> Result<(), StorageError> {
    use extentdb_format::log::{decode_block, encode_block_flags, MAX_BLOCK_SECTORS};
    let file_of = |id: u16| {
        files
            .get(&id)
            .ok_or_else(|| StorageError::FileNotFound(id.to_string()))
    };
    let v = vlfs
        .iter()
        .find(|v| v.sequence == stop.vlf_sequence)
        .ok_or_else(|| {
            extentdb_format::corrupt(PageId::NULL, format!("no VLF holds LSN {stop}"))
        })?;
    let file = file_of(v.file_id)?;
    let at = stop.block as u64 * SECTOR_SIZE as u64;
    let mut bytes = vec![0u8; ((v.size - at) as usize).min(MAX_BLOCK_SECTORS * SECTOR_SIZE)];
    file.read_at(&mut bytes, v.start_offset + at)?;
    let block = decode_block(&bytes, v.sequence, stop.block, v.parity).ok_or_else(|| {
        extentdb_format::corrupt(PageId::NULL, format!("no log block at LSN {stop}"))
    })?;
    let mut end = at;
    if stop.slot > 0 {
        let kept: Vec<&[u8]> = block.records[..stop.slot as usize]
            .iter()
            .map(|r| r.as_slice())
            .collect();
        // The same block, shorter: its flags and durable end stay.
        let b = encode_block_flags(
            &kept,
            v.sequence,
            stop.block,
            v.parity,
            block.flags,
            block.durable,
        );
        file.write_at(&b, v.start_offset + at)?;
        end += b.len() as u64;
    }
    extentdb_io::write_zeros(file.as_ref(), v.start_offset + end, v.size - end)?;
    for later in vlfs.iter().filter(|l| l.sequence > stop.vlf_sequence) {
        let f = file_of(later.file_id)?;
        extentdb_io::write_zeros(f.as_ref(), later.start_offset, later.size)?;
        let unused = VlfHeader {
            sequence: 0,
            parity: 0,
            ..*later
        };
        f.write_at(&unused.encode(), later.start_offset)?;
    }
    for f in files.values() {
        f.sync_data()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pins SQL Server 2022's VLF counts: creation by size, growth by the 64 MB and 1/8 rules.
    #[test]
    fn vlf_counts() {
        assert_eq!(vlf_count_for_create(8 * MB), 4);
        assert_eq!(vlf_count_for_create(64 * MB), 8);
        assert_eq!(vlf_count_for_create(1024 * MB), 8);
        assert_eq!(vlf_count_for_create(1025 * MB), 16);
        assert_eq!(vlf_count_for_growth(64 * MB, 8 * MB), 1);
        assert_eq!(vlf_count_for_growth(100 * MB, 8 * MB), 8);
        assert_eq!(
            vlf_count_for_growth(100 * MB, 1000 * MB),
            1,
            "below 1/8 of the log"
        );
        assert_eq!(vlf_count_for_growth(2048 * MB, 1000 * MB), 16);
    }

    /// Proves layouts tile their range exactly in whole pages.
    #[test]
    fn layouts_tile() {
        for (start, end, n) in [
            (8192u64, 8 * MB, 4u32),
            (8 * MB, 9 * MB, 1),
            (8192, 512 * 1024, 4),
            (8192, 8192 * 3, 4),
        ] {
            let l = layout(start, end, n);
            assert_eq!(l[0].0, start);
            assert_eq!(l.iter().map(|v| v.1).sum::<u64>(), end - start);
            assert!(l.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
            assert!(l.iter().all(|v| v.1 % PAGE_SIZE as u64 == 0));
        }
    }
}
