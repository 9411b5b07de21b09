//! TDS packets and messages (MS-TDS 2.2.3): an 8-byte header, then payload; a message is
//! one or more packets of one type, the last with the EOM status bit.
//!
//! Header: type (1), status (1), length (2, big-endian, header included), spid (2,
//! big-endian), packet id (1, counts up modulo 256), window (1, 0).
//!
//! Invariants:
//! 1. A message read is at most `limit` bytes; a longer one is refused before it is held
//!    in memory (a client cannot make the server allocate without bound): `read_message`
//!    refuses it, `read_request` reads it to its end, keeps none of it and says so (as
//!    it does with a request its admission refuses).
//! 2. A packet's length is at least the header's 8 bytes and at most the negotiated packet
//!    size; anything else is a protocol error that closes the connection.
//! 3. See `MessageWriter`.

use std::io::{Read, Write};

use crate::TdsError;

pub const HEADER_LEN: usize = 8;
/// Status bit: end of message.
pub const STATUS_EOM: u8 = 0x01;
/// Status bit (client to server): the client ignores this message (an attention ack).
pub const STATUS_IGNORE: u8 = 0x02;
/// Status bit: reset the connection before this request (sp_reset_connection).
pub const STATUS_RESET_CONNECTION: u8 = 0x08;
/// The largest packet size a client may negotiate (MS-TDS: 32,767).
pub const MAX_PACKET_SIZE: usize = 32767;
/// The packet size before LOGIN7 negotiates one.
pub const INITIAL_PACKET_SIZE: usize = 4096;

/// Packet types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketType {
    SqlBatch,
    Rpc,
    TabularResult,
    Attention,
    BulkLoad,
    TransactionManager,
    Login7,
    Sspi,
    PreLogin,
    Other(u8),
}

impl PacketType {
    pub fn from_u8(b: u8) -> PacketType {
        match b {
            0x01 => PacketType::SqlBatch,
            0x03 => PacketType::Rpc,
            0x04 => PacketType::TabularResult,
            0x06 => PacketType::Attention,
            0x07 => PacketType::BulkLoad,
            0x0E => PacketType::TransactionManager,
            0x10 => PacketType::Login7,
            0x11 => PacketType::Sspi,
            0x12 => PacketType::PreLogin,
            b => PacketType::Other(b),
        }
    }

    pub fn to_u8(self) -> u8 {
        match self {
            PacketType::SqlBatch => 0x01,
            PacketType::Rpc => 0x03,
            PacketType::TabularResult => 0x04,
            PacketType::Attention => 0x06,
            PacketType::BulkLoad => 0x07,
            PacketType::TransactionManager => 0x0E,
            PacketType::Login7 => 0x10,
            PacketType::Sspi => 0x11,
            PacketType::PreLogin => 0x12,
            PacketType::Other(b) => b,
        }
    }
}

/// One whole message as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub kind: PacketType,
    /// The first packet's status (RESET_CONNECTION is meaningful there).
    pub status: u8,
    pub payload: Vec<u8>,
}

/// Reads one packet's header and payload; None at a clean end of stream before a header.
pub fn read_packet(
    r: &mut impl Read,
    max_packet: usize,
) -> Result<Option<(PacketType, u8, Vec<u8>)>, TdsError> {
    let mut h = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        match r.read(&mut h[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => {
                return Err(TdsError::Protocol(
                    "connection closed inside a packet header",
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(TdsError::Io(e)),
        }
    }
    let len = u16::from_be_bytes([h[2], h[3]]) as usize;
    if len < HEADER_LEN || len > max_packet.max(INITIAL_PACKET_SIZE) {
        return Err(TdsError::Protocol(
            "packet length outside the negotiated bounds",
        ));
    }
    let mut payload = vec![0u8; len - HEADER_LEN];
    r.read_exact(&mut payload)?;
    Ok(Some((PacketType::from_u8(h[0]), h[1], payload)))
}

/// Reads packets until one with EOM; refuses a message over `limit` bytes (invariant 1).
/// An attention packet arriving between messages is returned as its own message.
pub fn read_message(
    r: &mut impl Read,
    max_packet: usize,
    limit: usize,
) -> Result<Option<Message>, TdsError> {
    match read_request(r, max_packet, limit, usize::MAX, &mut || true)? {
        Some(Request::Refused { .. }) => Err(TdsError::TooLarge(limit)),
        Some(Request::Message(m)) => Ok(Some(m)),
        None => Ok(None),
    }
}

/// A request as the session reads it: whole, or read to its end and dropped.
#[derive(Debug)]
pub enum Request {
    Message(Message),
    /// Nothing of it was kept (invariant 1); the session refuses it and goes on.
    Refused {
        kind: PacketType,
        bytes: usize,
        why: Refusal,
    },
}

/// Why a request was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Longer than the limit.
    TooLarge,
    /// Past `threshold` bytes, `admit` said no (admission.rs: no large-request slot).
    NotAdmitted,
}

/// Reads packets until one with EOM. Past `threshold` bytes the request asks `admit` once
/// whether it may go on; a request over `limit` bytes, or not admitted, is read to its end
/// and dropped (invariant 1).
pub fn read_request(
    r: &mut impl Read,
    max_packet: usize,
    limit: usize,
    threshold: usize,
    admit: &mut dyn FnMut() -> bool,
) -> Result<Option<Request>, TdsError> {
    let Some((kind, status, mut payload)) = read_packet(r, max_packet)? else {
        return Ok(None);
    };
    let first_status = status;
    let mut status = status;
    let mut bytes = payload.len();
    let mut asked = false;
    let mut refused = None;
    while status & STATUS_EOM == 0 {
        let Some((k, s, more)) = read_packet(r, max_packet)? else {
            return Err(TdsError::Protocol("connection closed inside a message"));
        };
        if k != kind {
            return Err(TdsError::Protocol("packet type changed inside a message"));
        }
        bytes += more.len();
        if refused.is_none() && bytes > limit {
            refused = Some(Refusal::TooLarge);
        }
        if refused.is_none() && !asked && bytes > threshold {
            asked = true;
            if !admit() {
                refused = Some(Refusal::NotAdmitted);
            }
        }
        match refused {
            Some(_) => payload = Vec::new(),
            None => payload.extend_from_slice(&more),
        }
        status = s;
    }
    if let Some(why) = refused {
        return Ok(Some(Request::Refused { kind, bytes, why }));
    }
    Ok(Some(Request::Message(Message {
        kind,
        status: first_status,
        payload,
    })))
}

/// Writes `payload` as one message of packets of at most `packet_size` bytes.
pub fn write_message(
    w: &mut impl Write,
    kind: PacketType,
    payload: &[u8],
    packet_size: usize,
    spid: u16,
) -> std::io::Result<()> {
    MessageWriter::new(kind, packet_size, spid).finish(w, payload)
}

/// A message written while it is still being produced (a result streamed row by row):
/// full packets go out as soon as they are full, the last one with EOM at `finish`.
///
/// Invariant 3: every packet but a message's last is exactly the packet size, and packet
/// ids count up from 1 across the whole message.
#[derive(Debug)]
pub struct MessageWriter {
    kind: PacketType,
    packet_size: usize,
    spid: u16,
    /// Packets of the current message written so far.
    sent: usize,
}

impl MessageWriter {
    pub fn new(kind: PacketType, packet_size: usize, spid: u16) -> MessageWriter {
        MessageWriter {
            kind,
            packet_size: packet_size.clamp(512, MAX_PACKET_SIZE),
            spid,
            sent: 0,
        }
    }

    /// True once part of the current message went out.
    pub fn started(&self) -> bool {
        self.sent > 0
    }

    fn packet(&mut self, buf: &mut Vec<u8>, chunk: &[u8], eom: bool) {
        self.sent += 1;
        buf.push(self.kind.to_u8());
        buf.push(if eom { STATUS_EOM } else { 0 });
        buf.extend_from_slice(&((chunk.len() + HEADER_LEN) as u16).to_be_bytes());
        buf.extend_from_slice(&self.spid.to_be_bytes());
        buf.push((self.sent % 256) as u8);
        buf.push(0);
        buf.extend_from_slice(chunk);
    }

    /// Writes as many full packets of `payload` as leave at least `keep` bytes, and removes
    /// them from `payload`; returns how many bytes went.
    pub fn write_full(
        &mut self,
        w: &mut impl Write,
        payload: &mut Vec<u8>,
        keep: usize,
    ) -> std::io::Result<usize> {
        let room = self.packet_size - HEADER_LEN;
        let n = payload.len().saturating_sub(keep) / room;
        if n == 0 {
            return Ok(0);
        }
        let mut buf = Vec::with_capacity(n * self.packet_size);
        for i in 0..n {
            self.packet(&mut buf, &payload[i * room..(i + 1) * room], false);
        }
        w.write_all(&buf)?;
        w.flush()?;
        payload.drain(..n * room);
        Ok(n * room)
    }

    /// Writes the rest of the message, the last packet with EOM, and starts a new one.
    pub fn finish(&mut self, w: &mut impl Write, payload: &[u8]) -> std::io::Result<()> {
        let room = self.packet_size - HEADER_LEN;
        let mut chunks: Vec<&[u8]> = payload.chunks(room).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        let n = chunks.len();
        let mut buf = Vec::with_capacity(payload.len() + n * HEADER_LEN);
        for (i, c) in chunks.into_iter().enumerate() {
            self.packet(&mut buf, c, i + 1 == n);
        }
        self.sent = 0;
        w.write_all(&buf)?;
        w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_reassemble() {
        let payload: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let mut wire = Vec::new();
        write_message(&mut wire, PacketType::SqlBatch, &payload, 4096, 51).unwrap();
        assert_eq!(wire.len(), payload.len() + 3 * HEADER_LEN);
        assert_eq!(wire[1], 0); // first packet: not EOM
        let m = read_message(&mut &wire[..], 4096, 1 << 20)
            .unwrap()
            .unwrap();
        assert_eq!(m.kind, PacketType::SqlBatch);
        assert_eq!(m.payload, payload);
    }

    #[test]
    fn a_streamed_message_is_full_packets_then_the_rest() {
        let payload: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let mut wire = Vec::new();
        let mut mw = MessageWriter::new(PacketType::TabularResult, 4096, 51);
        let mut pending = payload[..6000].to_vec();
        assert_eq!(mw.write_full(&mut wire, &mut pending, 13).unwrap(), 4088);
        assert_eq!(wire.len(), 4096);
        assert_eq!(wire[1], 0);
        pending.extend_from_slice(&payload[6000..]);
        mw.finish(&mut wire, &pending).unwrap();
        // Packet ids count on across the message (invariant 3).
        assert_eq!(wire[4096 + 6], 2);
        let m = read_message(&mut &wire[..], 4096, 1 << 20)
            .unwrap()
            .unwrap();
        assert_eq!(m.payload, payload);
        assert!(!mw.started());
    }

    #[test]
    fn refuses_bad_lengths_and_oversized_messages() {
        let mut wire = vec![0x01, 0x01, 0x00, 0x04, 0, 0, 1, 0];
        assert!(read_message(&mut &wire[..], 4096, 1 << 20).is_err());
        wire.clear();
        let payload = vec![7u8; 9000];
        write_message(&mut wire, PacketType::SqlBatch, &payload, 4096, 51).unwrap();
        assert!(matches!(
            read_message(&mut &wire[..], 4096, 5000),
            Err(TdsError::TooLarge(5000))
        ));
    }
}
