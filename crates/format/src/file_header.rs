//! The file header page, page 0 of every data and log file. See FORMAT.md, "File header".
//!
//! It makes a file self-identifying: which database (by GUID) and which file of it. All
//! other file properties (names, sizes, growth) live in the catalog, once.

use crate::codec::{Reader, Writer};
use crate::{corrupt, FormatError, Page, PageHeader, PageId, PageType, PAGE_HEADER_SIZE};

pub const FILE_MAGIC: [u8; 8] = *b"XDBFILE\0";
pub const FILE_FORMAT_VERSION: u32 = 1;

/// Whether a file holds pages (ROWS) or the transaction log (LOG), as sys.database_files.type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileType {
    Rows = 0,
    Log = 1,
}

impl FileType {
    pub fn from_u8(v: u8) -> Option<FileType> {
        match v {
            0 => Some(FileType::Rows),
            1 => Some(FileType::Log),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHeader {
    pub database_guid: [u8; 16],
    pub file_id: u16,
    pub file_type: FileType,
    /// Microseconds since the Unix epoch when the file was created.
    pub created_us: i64,
}

impl FileHeader {
    pub fn encode(&self) -> Page {
        let at = PageId::new(self.file_id, 0);
        let mut page = Page::new(&PageHeader::new(PageType::FileHeader, at));
        let mut w = Writer::default();
        w.raw(&FILE_MAGIC);
        w.u32(FILE_FORMAT_VERSION);
        w.raw(&self.database_guid);
        w.u16(self.file_id);
        w.u8(self.file_type as u8);
        w.i64(self.created_us);
        page.body_mut()[..w.bytes.len()].copy_from_slice(&w.bytes);
        page.seal();
        page
    }

    /// Decodes a verified file header page (the caller checks the checksum first).
    pub fn decode(page: &Page, at: PageId) -> Result<FileHeader, FormatError> {
        let h = page.header()?;
        if h.page_type != PageType::FileHeader {
            return Err(corrupt(
                at,
                format!("page 0 has type {}, not a file header", h.page_type as u8),
            ));
        }
        let mut r = Reader::new(page.bytes(), PAGE_HEADER_SIZE, at);
        if r.array::<8>()? != FILE_MAGIC {
            return Err(corrupt(at, "not an extentdb file (bad magic)"));
        }
        let version = r.u32()?;
        if version != FILE_FORMAT_VERSION {
            return Err(corrupt(
                at,
                format!("file format version {version} is not supported"),
            ));
        }
        let database_guid = r.array::<16>()?;
        let file_id = r.u16()?;
        let file_type =
            FileType::from_u8(r.u8()?).ok_or_else(|| corrupt(at, "unknown file type"))?;
        let created_us = r.i64()?;
        Ok(FileHeader {
            database_guid,
            file_id,
            file_type,
            created_us,
        })
    }
}
