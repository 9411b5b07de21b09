//! A connection's receive buffer, and how its thread waits for the next request.
//!
//! A small request (a point SELECT's RPC) arrives in one TCP segment; reading its packet
//! header and its payload with a `recv` each cost two system calls per request. The inbox
//! takes whatever the socket holds in one `recv` and serves the packet reader from it.
//!
//! The socket's receive timeout is the idle connection's KILL check (`IDLE_CHECK` in
//! server.rs): a `recv` that times out looks at the session's KILL flag and, if it is not
//! set, waits again. That replaces a `poll` before each request. (KILL also shuts the
//! socket's read side, which ends a wait at once: `SessionInfo::kill`.)
//!
//! Invariants:
//! 1. Bytes are handed out in the order they arrived, each once.
//! 2. Bytes left in the inbox once a request has been read arrived while that request was
//!    outstanding: for a TDS client without MARS that is an attention (or the client going
//!    away), so the caller treats them exactly as the attention watcher treats a socket
//!    that becomes readable while a request runs (`pending`).

use std::io::{ErrorKind, Read};

/// One `recv`'s worth: larger reads go straight to the caller's buffer.
const CAPACITY: usize = 8192;

pub struct Inbox {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl Default for Inbox {
    fn default() -> Inbox {
        Inbox {
            buf: vec![0u8; CAPACITY].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }
}

impl Inbox {
    /// Bytes received and not yet read (invariant 2).
    pub fn pending(&self) -> bool {
        self.start < self.end
    }

    /// A reader of `inner` through this inbox; a timed-out `recv` asks `killed` whether
    /// to give up (an error of kind `ConnectionAborted`) or wait again.
    pub fn reader<'a, R: Read>(
        &'a mut self,
        inner: &'a mut R,
        killed: &'a dyn Fn() -> bool,
    ) -> Buffered<'a, R> {
        Buffered {
            inbox: self,
            inner,
            killed,
        }
    }
}

pub struct Buffered<'a, R: Read> {
    inbox: &'a mut Inbox,
    inner: &'a mut R,
    killed: &'a dyn Fn() -> bool,
}

impl<R: Read> Buffered<'_, R> {
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match self.inner.read(buf) {
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if (self.killed)() {
                        return Err(std::io::Error::new(
                            ErrorKind::ConnectionAborted,
                            "the session was killed",
                        ));
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }
}

impl<R: Read> Read for Buffered<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if !self.inbox.pending() {
            if out.len() >= CAPACITY {
                return self.recv(out);
            }
            let mut buf = std::mem::take(&mut self.inbox.buf);
            let got = self.recv(&mut buf);
            self.inbox.buf = buf;
            self.inbox.start = 0;
            self.inbox.end = got?;
        }
        let inbox = &mut *self.inbox;
        let n = out.len().min(inbox.end - inbox.start);
        out[..n].copy_from_slice(&inbox.buf[inbox.start..inbox.start + n]);
        inbox.start += n;
        debug_assert!(inbox.start <= inbox.end && inbox.end <= inbox.buf.len());
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    /// Two packets sent together come out of one `recv` whole and in order, the second
    /// left pending after the first is read.
    #[test]
    fn bytes_come_out_in_order_and_the_rest_stays_pending() {
        let (mut client, mut server) = UnixStream::pair().unwrap();
        let mut inbox = Inbox::default();
        client.write_all(b"0123456789").unwrap();
        let never = || false;
        let mut r = inbox.reader(&mut server, &never);
        let mut a = [0u8; 4];
        r.read_exact(&mut a).unwrap();
        assert_eq!(&a, b"0123");
        assert!(inbox.pending());
        let mut r = inbox.reader(&mut server, &never);
        let mut b = [0u8; 6];
        r.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"456789");
        assert!(!inbox.pending());
        // A read as large as the inbox bypasses it.
        let big = vec![7u8; CAPACITY + 10];
        client.write_all(&big).unwrap();
        let mut got = vec![0u8; CAPACITY + 10];
        inbox
            .reader(&mut server, &never)
            .read_exact(&mut got)
            .unwrap();
        assert_eq!(got, big);
    }

    /// A timed-out wait goes on until the session is killed, then fails.
    #[test]
    fn a_timeout_waits_again_until_killed() {
        let (_client, mut server) = UnixStream::pair().unwrap();
        server
            .set_read_timeout(Some(Duration::from_millis(10)))
            .unwrap();
        let killed = AtomicBool::new(false);
        let polls = std::sync::atomic::AtomicUsize::new(0);
        let check = || {
            if polls.fetch_add(1, Ordering::Relaxed) == 5 {
                killed.store(true, Ordering::Relaxed);
            }
            killed.load(Ordering::Relaxed)
        };
        let mut inbox = Inbox::default();
        let e = inbox
            .reader(&mut server, &check)
            .read(&mut [0u8; 8])
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionAborted);
        assert_eq!(polls.load(Ordering::Relaxed), 6, "waited again five times");
    }
}
