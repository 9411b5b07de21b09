//! LOGIN7 (MS-TDS 2.2.6.4): a fixed part of 94 bytes, then variable data the fixed part
//! points into with (offset, length in characters) pairs. The password is obfuscated: each
//! byte had its nibbles swapped and was XORed with 0xA5.

use crate::wire::{utf16_to_string, Cursor};
use crate::TdsError;

/// TDS 7.4, as a client sends it in LOGIN7 (little-endian 0x74000004).
pub const TDS_74: u32 = 0x7400_0004;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Login7 {
    pub tds_version: u32,
    pub packet_size: u32,
    pub client_pid: u32,
    pub option_flags1: u8,
    pub option_flags2: u8,
    pub type_flags: u8,
    pub option_flags3: u8,
    pub host_name: String,
    pub user_name: String,
    pub password: String,
    pub app_name: String,
    pub server_name: String,
    pub library_name: String,
    pub language: String,
    pub database: String,
    /// OptionFlags2's fIntSecurity: Windows authentication (SSPI), which extentdb lacks.
    pub integrated_security: bool,
}

fn deobfuscate(b: &[u8]) -> Vec<u8> {
    b.iter()
        .map(|x| {
            let y = x ^ 0xA5;
            y.rotate_left(4)
        })
        .collect()
}

/// Obfuscates a password as a client does (for tests and the sqlcmd client).
pub fn obfuscate(password: &str) -> Vec<u8> {
    let mut b = Vec::new();
    crate::wire::put_utf16(&mut b, password);
    b.iter().map(|x| x.rotate_left(4) ^ 0xA5).collect()
}

pub fn decode(payload: &[u8]) -> Result<Login7, TdsError> {
    let mut c = Cursor::new(payload);
    let length = c.u32()? as usize;
    // 94 bytes from TDS 7.2; 7.1's fixed part ends 8 bytes sooner (no ibChangePassword,
    // cbSSPILong), and nothing past the database's field is read here.
    if length > payload.len() || payload.len() < 86 {
        return Err(TdsError::Protocol("LOGIN7 shorter than its fixed part"));
    }
    let mut l = Login7 {
        tds_version: c.u32()?,
        packet_size: c.u32()?,
        ..Default::default()
    };
    let _client_prog_ver = c.u32()?;
    l.client_pid = c.u32()?;
    let _connection_id = c.u32()?;
    l.option_flags1 = c.u8()?;
    l.option_flags2 = c.u8()?;
    l.type_flags = c.u8()?;
    l.option_flags3 = c.u8()?;
    let _time_zone = c.u32()?;
    let _lcid = c.u32()?;
    l.integrated_security = l.option_flags2 & 0x80 != 0;
    let field = |c: &mut Cursor<'_>, bytes_per_unit: usize| -> Result<&[u8], TdsError> {
        let off = c.u16()? as usize;
        let n = c.u16()? as usize * bytes_per_unit;
        if n == 0 {
            return Ok(&[]);
        }
        payload
            .get(off..off + n)
            .ok_or(TdsError::Protocol("LOGIN7 field outside the message"))
    };
    l.host_name = utf16_to_string(field(&mut c, 2)?);
    l.user_name = utf16_to_string(field(&mut c, 2)?);
    l.password = utf16_to_string(&deobfuscate(field(&mut c, 2)?));
    l.app_name = utf16_to_string(field(&mut c, 2)?);
    l.server_name = utf16_to_string(field(&mut c, 2)?);
    let _extension = field(&mut c, 1)?;
    l.library_name = utf16_to_string(field(&mut c, 2)?);
    l.language = utf16_to_string(field(&mut c, 2)?);
    l.database = utf16_to_string(field(&mut c, 2)?);
    Ok(l)
}

/// Encodes a LOGIN7 (the sqlcmd client and tests use it).
pub fn encode(l: &Login7) -> Vec<u8> {
    let mut fixed = Vec::with_capacity(94);
    let mut data: Vec<u8> = Vec::new();
    fixed.extend_from_slice(&0u32.to_le_bytes()); // length, set below
    fixed.extend_from_slice(&l.tds_version.to_le_bytes());
    fixed.extend_from_slice(&l.packet_size.to_le_bytes());
    fixed.extend_from_slice(&0x0700_0000u32.to_le_bytes());
    fixed.extend_from_slice(&l.client_pid.to_le_bytes());
    fixed.extend_from_slice(&0u32.to_le_bytes());
    fixed.extend_from_slice(&[
        l.option_flags1,
        l.option_flags2,
        l.type_flags,
        l.option_flags3,
    ]);
    fixed.extend_from_slice(&0u32.to_le_bytes());
    fixed.extend_from_slice(&0x0409u32.to_le_bytes());
    let strings: [Vec<u8>; 9] = {
        let u = |s: &str| {
            let mut b = Vec::new();
            crate::wire::put_utf16(&mut b, s);
            b
        };
        [
            u(&l.host_name),
            u(&l.user_name),
            obfuscate(&l.password),
            u(&l.app_name),
            u(&l.server_name),
            Vec::new(),
            u(&l.library_name),
            u(&l.language),
            u(&l.database),
        ]
    };
    for (i, s) in strings.iter().enumerate() {
        let off = 94 + data.len();
        let units = if i == 5 { s.len() } else { s.len() / 2 };
        fixed.extend_from_slice(&(off as u16).to_le_bytes());
        fixed.extend_from_slice(&(units as u16).to_le_bytes());
        data.extend_from_slice(s);
    }
    fixed.extend_from_slice(&[0u8; 6]); // ClientID
    for _ in 0..3 {
        // SSPI, AtchDBFile, ChangePassword: empty.
        fixed.extend_from_slice(&((94 + data.len()) as u16).to_le_bytes());
        fixed.extend_from_slice(&0u16.to_le_bytes());
    }
    fixed.extend_from_slice(&0u32.to_le_bytes()); // cbSSPILong
    debug_assert_eq!(fixed.len(), 94);
    fixed.extend_from_slice(&data);
    let n = fixed.len() as u32;
    fixed[..4].copy_from_slice(&n.to_le_bytes());
    fixed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let l = Login7 {
            tds_version: TDS_74,
            packet_size: 4096,
            user_name: "sa".into(),
            password: "Pässw0rd!".into(),
            app_name: "test".into(),
            database: "master".into(),
            host_name: "h".into(),
            ..Default::default()
        };
        let d = decode(&encode(&l)).unwrap();
        assert_eq!(d, l);
    }

    #[test]
    fn obfuscation_matches_the_spec_example() {
        // MS-TDS: each byte has its nibbles swapped, then is XORed with 0xA5; 'a' (0x61, 0x00)
        // becomes 0x16 ^ 0xA5 = 0xB3 and 0x00 ^ 0xA5 = 0xA5.
        assert_eq!(obfuscate("a"), vec![0xB3, 0xA5]);
    }

    #[test]
    fn truncated_login_is_an_error() {
        let l = encode(&Login7::default());
        assert!(decode(&l[..50]).is_err());
    }
}
