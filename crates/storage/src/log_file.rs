//! Log files as far as the foundation needs them: created with a file header and fully
//! initialized space (see `file_init`), and grown the same way. The VLF structure, sector
//! parity and log records come with the transaction log and live beside this module.

use extentdb_format::file_header::{FileHeader, FileType};
use extentdb_format::{PageId, PAGE_SIZE};
use extentdb_io::DbFile;

use crate::StorageError;

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
    debug_assert_eq!(p.bytes().len(), PAGE_SIZE);
    Ok(())
}
