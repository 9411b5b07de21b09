//! Attentions (cancels) noticed while a request runs, without a reader thread per
//! connection.
//!
//! A connection's own thread reads its requests (no hand-off between threads per request,
//! which cost more than a point SELECT itself). While a request runs, nobody reads the
//! socket, so the connection's descriptor is *armed* here: one watcher thread for the whole
//! process waits in `epoll_wait` on every armed descriptor and, when one becomes readable,
//! sets that session's cancel flag. A TDS client sends nothing while its request's answer is
//! incomplete but an attention (there is no MARS here), so bytes arriving then are an
//! attention, or the client going away; either way the batch stops at its next check. The
//! attention message itself is read by the connection's thread after the request, as
//! before (server.rs `answered_attentions`).
//!
//! Invariants:
//! 1. A registration sets a cancel flag only while it is armed: `disarm` (the `Armed`
//!    guard's drop) removes it under the same mutex the watcher holds to set the flag, so
//!    once the guard is gone no event, however late, touches the session.
//! 2. Every arming has its own token: an event the watcher dequeued for an earlier arming
//!    of the same descriptor finds no entry and is dropped.
//! 3. A registration is one-shot (EPOLLONESHOT): the watcher wakes at most once per
//!    request, whatever the client sends.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The process's one watcher.
pub struct AttentionWatch {
    epoll: RawFd,
    armed: Mutex<HashMap<u64, Registration>>,
    next_token: AtomicU64,
}

struct Registration {
    fd: RawFd,
    cancel: Arc<AtomicBool>,
}

/// A descriptor armed for one request; dropping it disarms.
pub struct Armed<'a> {
    watch: &'a AttentionWatch,
    token: u64,
}

impl AttentionWatch {
    /// The process-wide watcher, its thread started on first use.
    pub fn get() -> std::io::Result<&'static AttentionWatch> {
        static WATCH: OnceLock<Result<&'static AttentionWatch, String>> = OnceLock::new();
        WATCH
            .get_or_init(|| Self::start().map_err(|e| e.to_string()))
            .as_ref()
            .copied()
            .map_err(|e| std::io::Error::other(e.clone()))
    }

    fn start() -> std::io::Result<&'static AttentionWatch> {
        // SAFETY: epoll_create1 takes no pointers.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epoll < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let watch: &'static AttentionWatch = Box::leak(Box::new(AttentionWatch {
            epoll,
            armed: Mutex::new(HashMap::new()),
            next_token: AtomicU64::new(1),
        }));
        std::thread::Builder::new()
            .name("tds-attention".into())
            .spawn(move || watch.watch())?;
        Ok(watch)
    }

    /// Arms `fd`: until the guard drops, bytes readable on it set `cancel`.
    pub fn arm(&self, fd: RawFd, cancel: &Arc<AtomicBool>) -> std::io::Result<Armed<'_>> {
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let registration = Registration {
            fd,
            cancel: cancel.clone(),
        };
        self.lock().insert(token, registration);
        let mut event = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLONESHOT) as u32,
            u64: token,
        };
        // SAFETY: `event` outlives the call; the kernel copies it.
        let rc = unsafe { libc::epoll_ctl(self.epoll, libc::EPOLL_CTL_ADD, fd, &mut event) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            self.lock().remove(&token);
            return Err(e);
        }
        Ok(Armed { watch: self, token })
    }

    fn disarm(&self, token: u64) {
        let removed = self.lock().remove(&token);
        let registration = removed.expect("an armed descriptor is registered until disarmed");
        // SAFETY: a null event is allowed for EPOLL_CTL_DEL. The descriptor is still open
        // (the connection owns it and outlives its `Armed` guard).
        let rc = unsafe {
            libc::epoll_ctl(
                self.epoll,
                libc::EPOLL_CTL_DEL,
                registration.fd,
                std::ptr::null_mut(),
            )
        };
        debug_assert!(rc == 0, "EPOLL_CTL_DEL of an armed descriptor failed");
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Registration>> {
        self.armed.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn watch(&self) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 32];
        loop {
            // SAFETY: `events` is a valid buffer of the length passed.
            let n = unsafe {
                libc::epoll_wait(self.epoll, events.as_mut_ptr(), events.len() as i32, -1)
            };
            if n < 0 {
                continue; // EINTR
            }
            let armed = self.lock();
            for e in &events[..n as usize] {
                // Invariants 1 and 2: only a registration still armed is cancelled.
                let token = e.u64;
                if let Some(r) = armed.get(&token) {
                    r.cancel.store(true, Ordering::Release);
                }
            }
        }
    }
}

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        self.watch.disarm(self.token);
    }
}

/// Waits up to `timeout` for `fd` to become readable (or closed); false on timeout.
pub fn readable_within(fd: RawFd, timeout: std::time::Duration) -> std::io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd.
    let rc = unsafe { libc::poll(&mut p, 1, ms) };
    match rc {
        0 => Ok(false),
        n if n > 0 => Ok(true),
        _ => {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::time::{Duration, Instant};

    fn set_within(flag: &AtomicBool, limit: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            if flag.load(Ordering::Acquire) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        false
    }

    #[test]
    fn bytes_on_an_armed_descriptor_cancel_and_a_disarmed_one_never_does() {
        let watch = AttentionWatch::get().unwrap();
        let (mut client, server) = UnixStream::pair().unwrap();
        let cancel = Arc::new(AtomicBool::new(false));
        {
            let _armed = watch.arm(server.as_raw_fd(), &cancel).unwrap();
            assert!(!set_within(&cancel, Duration::from_millis(50)));
            client.write_all(&[6, 1, 0, 8, 0, 0, 1, 0]).unwrap();
            assert!(set_within(&cancel, Duration::from_secs(5)));
        }
        cancel.store(false, Ordering::Release);
        // Disarmed, with bytes still unread and more coming: nothing sets the flag.
        client.write_all(&[6]).unwrap();
        assert!(!set_within(&cancel, Duration::from_millis(100)));
        // Armed again (a new token) with bytes already there: set at once.
        let armed = watch.arm(server.as_raw_fd(), &cancel).unwrap();
        assert!(set_within(&cancel, Duration::from_secs(5)));
        drop(armed);
        assert!(!watch
            .lock()
            .values()
            .any(|r| Arc::ptr_eq(&r.cancel, &cancel)));
    }

    #[test]
    fn the_peer_going_away_cancels_too() {
        let watch = AttentionWatch::get().unwrap();
        let (client, server) = UnixStream::pair().unwrap();
        let cancel = Arc::new(AtomicBool::new(false));
        let _armed = watch.arm(server.as_raw_fd(), &cancel).unwrap();
        drop(client);
        assert!(set_within(&cancel, Duration::from_secs(5)));
    }

    #[test]
    fn readable_within_times_out_then_sees_bytes() {
        let (mut client, server) = UnixStream::pair().unwrap();
        let fd = server.as_raw_fd();
        assert!(!readable_within(fd, Duration::from_millis(20)).unwrap());
        client.write_all(b"x").unwrap();
        assert!(readable_within(fd, Duration::from_millis(1000)).unwrap());
    }
}
