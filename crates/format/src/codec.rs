//! Little-endian field access within a page, bounds-checked so that decoding hostile bytes
//! returns an error instead of panicking. Every multi-byte integer on disk is little-endian.

use crate::{corrupt, FormatError, PageId};

/// Reads fields from a byte slice; each read past the end is a corruption error.
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    page: PageId,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8], pos: usize, page: PageId) -> Reader<'a> {
        Reader { bytes, pos, page }
    }
    pub fn position(&self) -> usize {
        self.pos
    }
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], FormatError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        match end {
            Some(end) => {
                let s = &self.bytes[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(corrupt(
                self.page,
                format!(
                    "field of {n} bytes at offset {} runs past the end",
                    self.pos
                ),
            )),
        }
    }
    pub fn u8(&mut self) -> Result<u8, FormatError> {
        Ok(self.take(1)?[0])
    }
    pub fn u16(&mut self) -> Result<u16, FormatError> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap()))
    }
    pub fn u32(&mut self) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    pub fn u64(&mut self) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    pub fn i64(&mut self) -> Result<i64, FormatError> {
        Ok(self.u64()? as i64)
    }
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], FormatError> {
        Ok(self.take(N)?.try_into().unwrap())
    }
    /// A string stored as a u16 byte length and UTF-8 bytes.
    pub fn string(&mut self) -> Result<String, FormatError> {
        let len = self.u16()? as usize;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| corrupt(self.page, "string is not UTF-8"))
    }
    pub fn page_id(&mut self) -> Result<PageId, FormatError> {
        let page = self.u32()?;
        let file = self.u16()?;
        Ok(PageId::new(file, page))
    }
}

/// Appends fields to a growable buffer.
#[derive(Default)]
pub struct Writer {
    pub bytes: Vec<u8>,
}

impl Writer {
    pub fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }
    pub fn u16(&mut self, v: u16) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub fn i64(&mut self, v: i64) {
        self.u64(v as u64);
    }
    pub fn raw(&mut self, v: &[u8]) {
        self.bytes.extend_from_slice(v);
    }
    /// Panics if the string is longer than 65,535 bytes: callers validate names first.
    pub fn string(&mut self, s: &str) {
        assert!(
            s.len() <= u16::MAX as usize,
            "string too long for the format"
        );
        self.u16(s.len() as u16);
        self.raw(s.as_bytes());
    }
    pub fn page_id(&mut self, p: PageId) {
        self.u32(p.page.0);
        self.u16(p.file.0);
    }
}

/// Writes a little-endian u16 at `pos`.
pub fn put_u16(b: &mut [u8], pos: usize, v: u16) {
    b[pos..pos + 2].copy_from_slice(&v.to_le_bytes());
}
/// Writes a little-endian u32 at `pos`.
pub fn put_u32(b: &mut [u8], pos: usize, v: u32) {
    b[pos..pos + 4].copy_from_slice(&v.to_le_bytes());
}
/// Writes a little-endian u64 at `pos`.
pub fn put_u64(b: &mut [u8], pos: usize, v: u64) {
    b[pos..pos + 8].copy_from_slice(&v.to_le_bytes());
}
/// Reads a little-endian u16 at `pos` (caller guarantees bounds: fixed page offsets).
pub fn get_u16(b: &[u8], pos: usize) -> u16 {
    u16::from_le_bytes(b[pos..pos + 2].try_into().unwrap())
}
/// Reads a little-endian u32 at `pos` (caller guarantees bounds: fixed page offsets).
pub fn get_u32(b: &[u8], pos: usize) -> u32 {
    u32::from_le_bytes(b[pos..pos + 4].try_into().unwrap())
}
/// Reads a little-endian u64 at `pos` (caller guarantees bounds: fixed page offsets).
pub fn get_u64(b: &[u8], pos: usize) -> u64 {
    u64::from_le_bytes(b[pos..pos + 8].try_into().unwrap())
}
