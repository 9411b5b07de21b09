//! Attentions (cancels) noticed while a request runs, without a reader thread per
//! connection.
//!
//! A connection's own thread reads its requests (no hand-off between threads per request,
//! which cost more than a point SELECT itself). While a request runs, nobody reads the
//! socket, so one watcher thread for the whole process waits in `epoll_wait` on the
//! descriptors of running requests and, when one becomes readable, sets that session's
//! cancel flag. A TDS client sends nothing while its request's answer is incomplete but an
//! attention (there is no MARS here), so bytes arriving then are an attention, or the
//! client going away; either way the batch stops at its next check. The attention message
//! itself is read by the connection's thread after the request, as before (server.rs
//! `answered_attentions`).
//!
//! A request is *armed* (its descriptor registered with epoll) only once it has run for
//! `GRACE`: the watcher sweeps the running requests every `GRACE` and arms the ones that
//! are older. Most requests end sooner and cost two atomic stores, not two `epoll_ctl`
//! calls (a tenth of a point SELECT's server time when every request was armed). Bytes
//! that arrived before the arming are seen by it: epoll reports a descriptor that is
//! readable, or whose peer has gone, when it is added.
//!
//! Invariants:
//! 1. A registration sets a cancel flag only while its request runs: the request's end
//!    (`Running`'s drop) removes the registration under the same mutex the watcher holds
//!    to set the flag and to arm, so once the guard is gone no event, however late,
//!    touches the session, and no sweep arms it.
//! 2. Every arming has its own token: an event the watcher dequeued for an earlier arming
//!    of the same descriptor finds no entry and is dropped.
//! 3. A registration is one-shot (EPOLLONESHOT): the watcher wakes at most once per
//!    request, whatever the client sends.
//! 4. A slot goes IDLE -> RUNNING (its connection's thread, a request starts) -> ARMED (the
//!    watcher, under the mutex, registering it) -> IDLE (its connection's thread: at once
//!    from RUNNING by compare-and-swap, from ARMED under the mutex after removing the
//!    registration). A slot is ARMED exactly while `Registry::armed` holds its token.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a request runs before its descriptor is armed; also the sweep interval while
/// a request runs unarmed, so an attention is noticed within about twice this once the
/// watcher is sweeping (within `QUIET_TICK` more when it was not).
pub const GRACE: Duration = Duration::from_millis(2);
/// The watcher's wait when no request was running at its last sweep: an idle server wakes
/// 50 times a second, not 500.
const QUIET_TICK: Duration = Duration::from_millis(20);
/// The watcher's wait when no connection is registered.
const IDLE_TICK: Duration = Duration::from_millis(100);

const IDLE: u8 = 0;
const RUNNING: u8 = 1;
const ARMED: u8 = 2;

/// The process's one watcher.
pub struct AttentionWatch {
    epoll: RawFd,
    registry: Mutex<Registry>,
    next_token: AtomicU64,
    /// Armings so far (tests: short requests are never armed).
    armings: AtomicU64,
}

#[derive(Default)]
struct Registry {
    /// Every connection's slot, running or not.
    slots: Vec<Arc<Slot>>,
    /// Armed slots by the token of their arming (invariant 4).
    armed: HashMap<u64, Arc<Slot>>,
}

/// One connection's descriptor and cancel flag, and whether a request runs (invariant 4).
struct Slot {
    fd: RawFd,
    cancel: Arc<AtomicBool>,
    state: AtomicU8,
    /// When the running request started, in µs since `epoch()`.
    since: AtomicU64,
    /// The token of the current arming, valid while ARMED.
    token: AtomicU64,
}

/// A connection's place with the watcher; dropping it (before the descriptor closes)
/// removes it.
pub struct Watched {
    watch: &'static AttentionWatch,
    slot: Arc<Slot>,
}

/// A request running on a watched connection; dropping it ends the watch of that request.
pub struct Running<'a> {
    watched: &'a Watched,
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_us() -> u64 {
    epoch().elapsed().as_micros() as u64
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
            registry: Mutex::default(),
            next_token: AtomicU64::new(1),
            armings: AtomicU64::new(0),
        }));
        std::thread::Builder::new()
            .name("tds-attention".into())
            .spawn(move || watch.watch())?;
        Ok(watch)
    }

    /// Registers a connection: from now on its requests (`Watched::running`) are watched.
    pub fn register(&'static self, fd: RawFd, cancel: &Arc<AtomicBool>) -> Watched {
        let slot = Arc::new(Slot {
            fd,
            cancel: cancel.clone(),
            state: AtomicU8::new(IDLE),
            since: AtomicU64::new(0),
            token: AtomicU64::new(0),
        });
        self.lock().slots.push(slot.clone());
        Watched { watch: self, slot }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn watch(&self) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 32];
        let mut last_sweep = 0u64;
        // Whether the last sweep left a request running unarmed (it is swept again soon).
        let mut young = false;
        loop {
            let tick = if young {
                GRACE
            } else if self.lock().slots.is_empty() {
                IDLE_TICK
            } else {
                QUIET_TICK
            };
            // SAFETY: `events` is a valid buffer of the length passed.
            let n = unsafe {
                libc::epoll_wait(
                    self.epoll,
                    events.as_mut_ptr(),
                    events.len() as i32,
                    tick.as_millis() as i32,
                )
            };
            let mut registry = self.lock();
            for e in &events[..n.max(0) as usize] {
                // Invariants 1 and 2: only a registration still armed is cancelled.
                if let Some(s) = registry.armed.get(&{ e.u64 }) {
                    s.cancel.store(true, Ordering::Release);
                }
            }
            let now = now_us();
            if now.saturating_sub(last_sweep) >= GRACE.as_micros() as u64 {
                young = self.arm_overdue(&mut registry, now);
                last_sweep = now;
            }
        }
    }

    /// Arms every request that has run for `GRACE` (invariant 4: RUNNING -> ARMED under
    /// the mutex); true when a request younger than that is left running unarmed.
    fn arm_overdue(&self, registry: &mut Registry, now: u64) -> bool {
        let grace = GRACE.as_micros() as u64;
        let overdue: Vec<Arc<Slot>> = registry
            .slots
            .iter()
            .filter(|s| {
                s.state.load(Ordering::Acquire) == RUNNING
                    && now.saturating_sub(s.since.load(Ordering::Acquire)) >= grace
            })
            .cloned()
            .collect();
        for s in overdue {
            if s.state
                .compare_exchange(RUNNING, ARMED, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue; // the request ended meanwhile
            }
            let token = self.next_token.fetch_add(1, Ordering::Relaxed);
            s.token.store(token, Ordering::Release);
            let mut event = libc::epoll_event {
                events: (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLONESHOT) as u32,
                u64: token,
            };
            // SAFETY: `event` outlives the call; the kernel copies it. The descriptor is
            // open: its connection removes its slot (under this mutex) before closing it.
            let rc = unsafe { libc::epoll_ctl(self.epoll, libc::EPOLL_CTL_ADD, s.fd, &mut event) };
            if rc == 0 {
                registry.armed.insert(token, s);
                self.armings.fetch_add(1, Ordering::Relaxed);
            } else {
                // Not armed: the next sweep tries again.
                s.state.store(RUNNING, Ordering::Release);
            }
        }
        registry
            .slots
            .iter()
            .any(|s| s.state.load(Ordering::Acquire) == RUNNING)
    }

    /// Removes an arming, under the mutex (invariants 1 and 4).
    fn disarm(&self, registry: &mut Registry, slot: &Slot) {
        if slot.state.load(Ordering::Acquire) == ARMED {
            let token = slot.token.load(Ordering::Acquire);
            let removed = registry.armed.remove(&token);
            debug_assert!(
                removed.is_some(),
                "an ARMED slot is registered (invariant 4)"
            );
            // SAFETY: a null event is allowed for EPOLL_CTL_DEL; the descriptor is open.
            let rc = unsafe {
                libc::epoll_ctl(
                    self.epoll,
                    libc::EPOLL_CTL_DEL,
                    slot.fd,
                    std::ptr::null_mut(),
                )
            };
            debug_assert!(rc == 0, "EPOLL_CTL_DEL of an armed descriptor failed");
        }
        slot.state.store(IDLE, Ordering::Release);
    }
}

impl Watched {
    /// A request starts: watched until the guard drops.
    pub fn running(&self) -> Running<'_> {
        let s = &self.slot;
        debug_assert_eq!(s.state.load(Ordering::Acquire), IDLE);
        s.since.store(now_us(), Ordering::Release);
        s.state.store(RUNNING, Ordering::Release);
        Running { watched: self }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let w = self.watched;
        let fast =
            w.slot
                .state
                .compare_exchange(RUNNING, IDLE, Ordering::AcqRel, Ordering::Acquire);
        if fast.is_err() {
            let mut registry = w.watch.lock();
            w.watch.disarm(&mut registry, &w.slot);
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let mut registry = self.watch.lock();
        self.watch.disarm(&mut registry, &self.slot);
        registry.slots.retain(|s| !Arc::ptr_eq(s, &self.slot));
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
    fn bytes_during_a_request_cancel_and_between_requests_never_do() {
        let watch = AttentionWatch::get().unwrap();
        let (mut client, server) = UnixStream::pair().unwrap();
        let cancel = Arc::new(AtomicBool::new(false));
        let watched = watch.register(server.as_raw_fd(), &cancel);
        {
            let _running = watched.running();
            assert!(!set_within(&cancel, Duration::from_millis(50)));
            client.write_all(&[6, 1, 0, 8, 0, 0, 1, 0]).unwrap();
            assert!(set_within(&cancel, Duration::from_secs(5)));
        }
        cancel.store(false, Ordering::Release);
        // Between requests, with bytes still unread and more coming: nothing sets the flag.
        client.write_all(&[6]).unwrap();
        assert!(!set_within(&cancel, Duration::from_millis(100)));
        // The next request (a new arming, a new token) with bytes already there: set once
        // it is armed, within the grace and a sweep.
        let running = watched.running();
        assert!(set_within(&cancel, Duration::from_secs(5)));
        drop(running);
        drop(watched);
        let registry = watch.lock();
        assert!(!registry
            .armed
            .values()
            .any(|s| Arc::ptr_eq(&s.cancel, &cancel)));
        assert!(!registry
            .slots
            .iter()
            .any(|s| Arc::ptr_eq(&s.cancel, &cancel)));
    }

    #[test]
    fn the_peer_going_away_cancels_too() {
        let watch = AttentionWatch::get().unwrap();
        let (client, server) = UnixStream::pair().unwrap();
        let cancel = Arc::new(AtomicBool::new(false));
        let watched = watch.register(server.as_raw_fd(), &cancel);
        let _running = watched.running();
        drop(client);
        assert!(set_within(&cancel, Duration::from_secs(5)));
    }

    /// Requests shorter than the grace cost no `epoll_ctl`: of 2,000 immediate ones, only
    /// those a sweep happened to catch (a thread descheduled past `GRACE`) were armed.
    #[test]
    fn short_requests_are_never_armed() {
        let watch = AttentionWatch::get().unwrap();
        let (_client, server) = UnixStream::pair().unwrap();
        let cancel = Arc::new(AtomicBool::new(false));
        let watched = watch.register(server.as_raw_fd(), &cancel);
        let before = watch.armings.load(Ordering::Relaxed);
        for _ in 0..2_000 {
            drop(watched.running());
        }
        let armed = watch.armings.load(Ordering::Relaxed) - before;
        assert!(armed < 200, "{armed} of 2,000 short requests were armed");
        // One that runs past the grace is armed, within a quiet tick and a grace.
        let running = watched.running();
        let start = Instant::now();
        while watched.slot.state.load(Ordering::Acquire) != ARMED {
            assert!(start.elapsed() < Duration::from_secs(5), "never armed");
            std::thread::sleep(GRACE);
        }
        drop(running);
    }
}
