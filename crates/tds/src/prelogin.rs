//! PRELOGIN (MS-TDS 2.2.6.5): the first message each way. A list of (option, offset,
//! length) entries ended by 0xFF, then the options' data; offsets count from the payload's
//! start.
//!
//! The server's answer follows REFERENCE.md: VERSION with a major version of 16 (clients
//! such as mssql-jdbc refuse a server older than 9), ENCRYPTION as the server can do it
//! (NOT_SUP without TLS; never OFF, which would mean "encrypt the login only"), INSTOPT,
//! THREADID and MARS always present (FreeTDS drops to TDS 7.1 without MARS).

use crate::wire::Cursor;
use crate::TdsError;

pub const VERSION: u8 = 0x00;
pub const ENCRYPTION: u8 = 0x01;
pub const INSTOPT: u8 = 0x02;
pub const THREADID: u8 = 0x03;
pub const MARS: u8 = 0x04;
pub const TRACEID: u8 = 0x05;
pub const FEDAUTHREQUIRED: u8 = 0x06;
pub const TERMINATOR: u8 = 0xFF;

/// ENCRYPTION values.
pub const ENCRYPT_OFF: u8 = 0x00;
pub const ENCRYPT_ON: u8 = 0x01;
pub const ENCRYPT_NOT_SUP: u8 = 0x02;
pub const ENCRYPT_REQ: u8 = 0x03;

/// The server version reported: 16.0.1000 (SQL Server 2022's major version).
pub const SERVER_VERSION: [u8; 4] = [16, 0, 0x03, 0xE8];

/// What the client's PRELOGIN asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreLogin {
    pub version: Option<[u8; 6]>,
    pub encryption: Option<u8>,
    pub mars: Option<u8>,
    pub fed_auth_required: Option<u8>,
}

pub fn decode(payload: &[u8]) -> Result<PreLogin, TdsError> {
    let mut p = PreLogin::default();
    let mut c = Cursor::new(payload);
    loop {
        let token = c.u8()?;
        if token == TERMINATOR {
            break;
        }
        let offset = c.u16_be()? as usize;
        let len = c.u16_be()? as usize;
        let data = payload
            .get(offset..offset + len)
            .ok_or(TdsError::Protocol("PRELOGIN option outside the message"))?;
        match token {
            VERSION if len >= 6 => p.version = Some(data[..6].try_into().unwrap()),
            ENCRYPTION if len >= 1 => p.encryption = Some(data[0]),
            MARS if len >= 1 => p.mars = Some(data[0]),
            FEDAUTHREQUIRED if len >= 1 => p.fed_auth_required = Some(data[0]),
            _ => {}
        }
    }
    Ok(p)
}

/// Encodes a PRELOGIN from (option, data) pairs.
pub fn encode(options: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut head = Vec::new();
    let mut data = Vec::new();
    let base = options.len() * 5 + 1;
    for (token, d) in options {
        head.push(*token);
        head.extend_from_slice(&((base + data.len()) as u16).to_be_bytes());
        head.extend_from_slice(&(d.len() as u16).to_be_bytes());
        data.extend_from_slice(d);
    }
    head.push(TERMINATOR);
    head.extend_from_slice(&data);
    head
}

/// The server's PRELOGIN answer with the encryption it settled on.
pub fn server_response(encryption: u8) -> Vec<u8> {
    let mut version = SERVER_VERSION.to_vec();
    version.extend_from_slice(&[0, 0]);
    encode(&[
        (VERSION, version),
        (ENCRYPTION, vec![encryption]),
        (INSTOPT, vec![0]),
        (THREADID, vec![]),
        (MARS, vec![0]),
    ])
}

/// The server's ENCRYPTION answer to a client's request (MS-TDS 2.2.6.5's table), given
/// whether the server has TLS and requires it. Err when the two cannot agree (the client
/// requires encryption the server lacks): the connection is closed.
pub fn negotiate(client: u8, tls: bool, required: bool) -> Result<u8, TdsError> {
    match (client, tls) {
        (_, false) if client == ENCRYPT_ON || client == ENCRYPT_REQ => Err(TdsError::Protocol(
            "client requires encryption and the server has no certificate",
        )),
        (_, false) => Ok(ENCRYPT_NOT_SUP),
        (ENCRYPT_NOT_SUP, true) if required => Err(TdsError::Protocol(
            "the server requires encryption and the client does not support it",
        )),
        (ENCRYPT_NOT_SUP, true) => Ok(ENCRYPT_NOT_SUP),
        (ENCRYPT_OFF, true) if !required => Ok(ENCRYPT_OFF),
        (_, true) => Ok(ENCRYPT_ON),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_required_options() {
        let r = server_response(ENCRYPT_NOT_SUP);
        let p = decode(&r).unwrap();
        assert_eq!(p.encryption, Some(ENCRYPT_NOT_SUP));
        assert_eq!(p.mars, Some(0));
        assert_eq!(p.version.unwrap()[0], 16);
    }

    #[test]
    fn negotiation_table() {
        assert_eq!(
            negotiate(ENCRYPT_OFF, false, false).unwrap(),
            ENCRYPT_NOT_SUP
        );
        assert!(negotiate(ENCRYPT_ON, false, false).is_err());
        assert_eq!(negotiate(ENCRYPT_OFF, true, false).unwrap(), ENCRYPT_OFF);
        assert_eq!(negotiate(ENCRYPT_OFF, true, true).unwrap(), ENCRYPT_ON);
        assert!(negotiate(ENCRYPT_NOT_SUP, true, true).is_err());
        assert_eq!(negotiate(ENCRYPT_ON, true, false).unwrap(), ENCRYPT_ON);
    }

    #[test]
    fn option_outside_the_message_is_an_error() {
        assert!(decode(&[0x00, 0x00, 0x50, 0x00, 0x06, 0xFF]).is_err());
        assert!(decode(&[0x00]).is_err());
    }
}
