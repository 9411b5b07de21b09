//! Little helpers for reading TDS payloads: a cursor that never reads past its end (a short
//! payload is a protocol error, never a panic), and UTF-16LE strings.

use crate::TdsError;

pub struct Cursor<'a> {
    buf: &'a [u8],
    pub pos: usize,
}

const SHORT: TdsError = TdsError::Protocol("message shorter than its contents say");

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Cursor<'a> {
        Cursor { buf, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], TdsError> {
        let end = self.pos.checked_add(n).ok_or(SHORT)?;
        let s = self.buf.get(self.pos..end).ok_or(SHORT)?;
        self.pos = end;
        Ok(s)
    }

    pub fn u8(&mut self) -> Result<u8, TdsError> {
        Ok(self.bytes(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16, TdsError> {
        Ok(u16::from_le_bytes(self.bytes(2)?.try_into().unwrap()))
    }

    pub fn u16_be(&mut self) -> Result<u16, TdsError> {
        Ok(u16::from_be_bytes(self.bytes(2)?.try_into().unwrap()))
    }

    pub fn u32(&mut self) -> Result<u32, TdsError> {
        Ok(u32::from_le_bytes(self.bytes(4)?.try_into().unwrap()))
    }

    pub fn u64(&mut self) -> Result<u64, TdsError> {
        Ok(u64::from_le_bytes(self.bytes(8)?.try_into().unwrap()))
    }

    /// A string of `chars` UTF-16 code units.
    pub fn utf16(&mut self, chars: usize) -> Result<String, TdsError> {
        let b = self.bytes(chars.checked_mul(2).ok_or(SHORT)?)?;
        Ok(utf16_to_string(b))
    }

    /// B_VARCHAR: a 1-byte length in characters, then UTF-16LE.
    pub fn b_varchar(&mut self) -> Result<String, TdsError> {
        let n = self.u8()? as usize;
        self.utf16(n)
    }

    /// US_VARCHAR: a 2-byte length in characters, then UTF-16LE.
    pub fn us_varchar(&mut self) -> Result<String, TdsError> {
        let n = self.u16()? as usize;
        self.utf16(n)
    }
}

pub fn utf16_to_string(b: &[u8]) -> String {
    let units: Vec<u16> = b
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    String::from_utf16_lossy(&units)
}

pub fn put_utf16(out: &mut Vec<u8>, s: &str) {
    for u in s.encode_utf16() {
        out.extend_from_slice(&u.to_le_bytes());
    }
}

/// B_VARCHAR; a longer string is cut at 255 UTF-16 units.
pub fn put_b_varchar(out: &mut Vec<u8>, s: &str) {
    let units: Vec<u16> = s.encode_utf16().take(255).collect();
    out.push(units.len() as u8);
    for u in units {
        out.extend_from_slice(&u.to_le_bytes());
    }
}

/// US_VARCHAR; a longer string is cut at 65,535 UTF-16 units.
pub fn put_us_varchar(out: &mut Vec<u8>, s: &str) {
    let units: Vec<u16> = s.encode_utf16().take(65535).collect();
    out.extend_from_slice(&(units.len() as u16).to_le_bytes());
    for u in units {
        out.extend_from_slice(&u.to_le_bytes());
    }
}
