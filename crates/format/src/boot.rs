//! The database boot page: page 9 of file 1, mirrored at page 10. See FORMAT.md, "Boot page".
//!
//! Invariants:
//! 1. The two copies are written one after the other, each made durable before the next,
//!    so a crash or torn write damages at most one; the valid copy with the higher
//!    `generation` is the truth.
//! 2. `catalog_first_page`, `catalog_bytes` and `catalog_crc` describe exactly one
//!    complete catalog chain that was durable before this boot page was written.

use crate::codec::{Reader, Writer};
use crate::{corrupt, FormatError, Lsn, Page, PageHeader, PageId, PageType, PAGE_HEADER_SIZE};

pub const BOOT_MAGIC: [u8; 8] = *b"XDBBOOT\0";
pub const BOOT_FORMAT_VERSION: u32 = 1;
/// The database version DATABASEPROPERTYEX(db, 'Version') reports (SQL Server 2022's).
pub const DATABASE_VERSION: u32 = 957;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootPage {
    pub generation: u64,
    pub database_guid: [u8; 16],
    pub database_version: u32,
    pub name: String,
    pub created_us: i64,
    /// Where recovery starts (the last checkpoint's LSN).
    pub checkpoint_lsn: Lsn,
    /// Microseconds since the Unix epoch of the last clean CHECKDB, 0 if never.
    pub last_checkdb_us: i64,
    pub catalog_first_page: PageId,
    pub catalog_bytes: u32,
    pub catalog_crc: u32,
    /// SQL Server's MinLSN when older than the checkpoint LSN: where analysis, redo and
    /// undo start, the lowest image floor a transaction active at the checkpoint began
    /// under (at or before its BEGIN); zero when none was active: see FORMAT.md, "Boot
    /// page".
    pub min_recovery_lsn: Lsn,
    /// Where the next BACKUP LOG starts (the end of the last one, or the start of the full
    /// backup that began the log chain); zero when there is no log chain (SIMPLE recovery,
    /// or no full backup since FULL was set): under FULL the log is kept from here.
    pub log_backup_lsn: Lsn,
    /// The differential base: the first LSN of the last full, not COPY_ONLY, backup (pages
    /// with an older LSN are in it unchanged), and that backup's BackupSetGUID; zero when
    /// there is none.
    pub differential_base_lsn: Lsn,
    pub differential_base_guid: [u8; 16],
}

/// Offset of `min_recovery_lsn`, after the name's largest extent.
const OFF_MIN_RECOVERY: usize = 690;
const _: () = assert!(OFF_MIN_RECOVERY >= crate::PAGE_HEADER_SIZE + 80 + 2 + 512);
/// Offsets of the backup fields (FORMAT.md, "Boot page").
const OFF_LOG_BACKUP: usize = 700;
const OFF_DIFF_BASE: usize = 710;
const OFF_DIFF_GUID: usize = 720;

fn put_lsn_at(b: &mut [u8], o: usize, l: Lsn) {
    b[o..o + 4].copy_from_slice(&l.vlf_sequence.to_le_bytes());
    b[o + 4..o + 8].copy_from_slice(&l.block.to_le_bytes());
    b[o + 8..o + 10].copy_from_slice(&l.slot.to_le_bytes());
}

fn lsn_at(b: &[u8], o: usize) -> Lsn {
    Lsn {
        vlf_sequence: u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes")),
        block: u32::from_le_bytes(b[o + 4..o + 8].try_into().expect("4 bytes")),
        slot: u16::from_le_bytes(b[o + 8..o + 10].try_into().expect("2 bytes")),
    }
}

impl BootPage {
    pub fn encode(&self, at: PageId) -> Result<Page, FormatError> {
        if self.name.len() > 512 {
            return Err(FormatError::TooLarge {
                what: "database name",
                detail: self.name.clone(),
            });
        }
        let mut page = Page::new(&PageHeader::new(PageType::Boot, at));
        let mut w = Writer::default();
        w.raw(&BOOT_MAGIC);
        w.u32(BOOT_FORMAT_VERSION);
        w.u64(self.generation);
        w.raw(&self.database_guid);
        w.u32(self.database_version);
        w.i64(self.created_us);
        w.u32(self.checkpoint_lsn.vlf_sequence);
        w.u32(self.checkpoint_lsn.block);
        w.u16(self.checkpoint_lsn.slot);
        w.i64(self.last_checkdb_us);
        w.page_id(self.catalog_first_page);
        w.u32(self.catalog_bytes);
        w.u32(self.catalog_crc);
        w.string(&self.name);
        page.body_mut()[..w.bytes.len()].copy_from_slice(&w.bytes);
        let b = page.bytes_mut();
        put_lsn_at(b, OFF_MIN_RECOVERY, self.min_recovery_lsn);
        put_lsn_at(b, OFF_LOG_BACKUP, self.log_backup_lsn);
        put_lsn_at(b, OFF_DIFF_BASE, self.differential_base_lsn);
        b[OFF_DIFF_GUID..OFF_DIFF_GUID + 16].copy_from_slice(&self.differential_base_guid);
        page.seal();
        Ok(page)
    }

    /// Decodes a boot page whose checksum the caller verified.
    pub fn decode(page: &Page, at: PageId) -> Result<BootPage, FormatError> {
        let h = page.header()?;
        if h.page_type != PageType::Boot {
            return Err(corrupt(
                at,
                format!("expected a boot page, found type {}", h.page_type as u8),
            ));
        }
        let mut r = Reader::new(page.bytes(), PAGE_HEADER_SIZE, at);
        if r.array::<8>()? != BOOT_MAGIC {
            return Err(corrupt(at, "bad boot page magic"));
        }
        let version = r.u32()?;
        if version != BOOT_FORMAT_VERSION {
            return Err(corrupt(
                at,
                format!("boot page version {version} is not supported"),
            ));
        }
        let b = page.bytes();
        Ok(BootPage {
            min_recovery_lsn: lsn_at(b, OFF_MIN_RECOVERY),
            log_backup_lsn: lsn_at(b, OFF_LOG_BACKUP),
            differential_base_lsn: lsn_at(b, OFF_DIFF_BASE),
            differential_base_guid: b[OFF_DIFF_GUID..OFF_DIFF_GUID + 16]
                .try_into()
                .expect("16 bytes"),
            generation: r.u64()?,
            database_guid: r.array::<16>()?,
            database_version: r.u32()?,
            created_us: r.i64()?,
            checkpoint_lsn: Lsn {
                vlf_sequence: r.u32()?,
                block: r.u32()?,
                slot: r.u16()?,
            },
            last_checkdb_us: r.i64()?,
            catalog_first_page: r.page_id()?,
            catalog_bytes: r.u32()?,
            catalog_crc: r.u32()?,
            name: r.string()?,
        })
    }
}
