//! Large requests take turns, so that many clients sending large batches at once cannot
//! take the server past its memory cap: a request may grow to `LargeRequests::threshold`
//! bytes freely (within each connection's allowance); beyond that it needs one of the
//! instance's large-request slots, which it holds while it is read, parsed and run. A
//! request that cannot get a slot in time is read to its end, dropped and refused with
//! SQL Server's Msg 8645 (its RESOURCE_SEMAPHORE timeout); the connection goes on.
//!
//! Invariants:
//! 1. At most `slots` requests larger than `threshold` are held at once; a slot is taken
//!    before the request's bytes beyond the threshold are read, and given back when its
//!    `Permit` is dropped (after the request's answer).
//! 2. Waiting for a slot holds no lock of the engine: the connection's thread waits while
//!    reading the request, before it reaches the session, and the client's further packets
//!    wait in its socket.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The instance's large-request slots.
#[derive(Debug)]
pub struct LargeRequests {
    free: Mutex<usize>,
    freed: Condvar,
    /// Bytes a request may reach without a slot.
    pub threshold: usize,
    /// How long a request waits for a slot before Msg 8645.
    pub wait: Duration,
}

/// A slot held (invariant 1).
#[derive(Debug)]
pub struct Permit(Arc<LargeRequests>);

impl Drop for Permit {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap() += 1;
        self.0.freed.notify_one();
    }
}

impl LargeRequests {
    pub fn new(slots: usize, threshold: usize, wait: Duration) -> Arc<LargeRequests> {
        assert!(slots >= 1, "at least one large request must be able to run");
        Arc::new(LargeRequests {
            free: Mutex::new(slots),
            freed: Condvar::new(),
            threshold,
            wait,
        })
    }

    /// Takes a slot, waiting up to `wait`; None when none came free in time.
    pub fn acquire(self: &Arc<Self>) -> Option<Permit> {
        let deadline = Instant::now() + self.wait;
        let mut free = self.free.lock().unwrap();
        while *free == 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            free = self.freed.wait_timeout(free, left).unwrap().0;
        }
        *free -= 1;
        Some(Permit(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_taken_in_turn_and_given_back() {
        let l = LargeRequests::new(2, 1 << 20, Duration::from_millis(50));
        let a = l.acquire().unwrap();
        let b = l.acquire().unwrap();
        let started = Instant::now();
        assert!(l.acquire().is_none(), "a third waits, then times out");
        assert!(started.elapsed() >= Duration::from_millis(50));
        drop(a);
        let c = l.acquire().expect("a freed slot is taken again");
        drop((b, c));
        assert_eq!(*l.free.lock().unwrap(), 2);
    }

    #[test]
    fn a_waiter_gets_the_slot_another_thread_gives_back() {
        let l = LargeRequests::new(1, 1 << 20, Duration::from_secs(30));
        let held = l.acquire().unwrap();
        let waiter = {
            let l = l.clone();
            std::thread::spawn(move || l.acquire().is_some())
        };
        std::thread::sleep(Duration::from_millis(50));
        drop(held);
        assert!(waiter.join().unwrap());
        assert_eq!(*l.free.lock().unwrap(), 1);
    }
}
