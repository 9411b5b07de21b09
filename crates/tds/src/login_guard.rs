//! What keeps logins open to everyone: connections that have not logged in are bounded in
//! number and in time, and an address that keeps failing to log in is slowed down.
//!
//! Invariants:
//! 1. At most `max_pending` connections are between accept and the end of LOGIN7's answer
//!    at once. A new connection beyond that evicts the oldest pending one (its socket is
//!    shut down), so idle sockets can never keep a new client, sa included, from logging
//!    in: the newest connection always gets its turn.
//! 2. A pending connection older than `login_timeout` is shut down by the reaper thread
//!    (SQL Server's login timeout; 17830 in the error log).
//! 3. After `BACKOFF_AFTER` failed logins from one address within `FAILURE_WINDOW`, each
//!    further login from it waits before its password is checked, doubling per failure up
//!    to `MAX_BACKOFF`; a successful login from the address clears its count. The table
//!    holds at most `MAX_TRACKED` addresses (the stalest are forgotten first).

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use extentdb_storage::errorlog::ErrorLog;

/// Failures from one address before its logins wait.
pub const BACKOFF_AFTER: u32 = 3;
/// The first wait; each further failure doubles it.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Failures older than this are forgotten.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Addresses tracked at most.
const MAX_TRACKED: usize = 10_000;
/// How often the reaper looks for expired logins.
const REAPER_TICK: Duration = Duration::from_millis(100);

struct Pending {
    id: u64,
    since: Instant,
    socket: TcpStream,
    peer: String,
}

#[derive(Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
}

/// The table of connections not yet logged in, and of addresses' failed logins.
pub struct LoginGuard {
    max_pending: usize,
    login_timeout: Duration,
    pending: Mutex<VecDeque<Pending>>,
    next_id: AtomicU64,
    failures: Mutex<HashMap<IpAddr, Failures>>,
    log: Arc<ErrorLog>,
}

/// A connection's place among the pending ones; dropping it (logged in, refused, closed)
/// gives the place up.
pub struct PendingLogin {
    guard: Arc<LoginGuard>,
    id: u64,
}

impl Drop for PendingLogin {
    fn drop(&mut self) {
        self.guard.remove(self.id);
    }
}

impl LoginGuard {
    pub fn new(max_pending: usize, login_timeout: Duration, log: Arc<ErrorLog>) -> Arc<Self> {
        Arc::new(LoginGuard {
            max_pending: max_pending.max(1),
            login_timeout,
            pending: Mutex::new(VecDeque::new()),
            next_id: AtomicU64::new(1),
            failures: Mutex::new(HashMap::new()),
            log,
        })
    }

    /// Registers a new connection (invariant 1: the oldest pending one goes if full).
    pub fn admit(self: &Arc<Self>, socket: &TcpStream) -> std::io::Result<PendingLogin> {
        let peer = socket
            .peer_addr()
            .map(|a| a.ip().to_string())
            .unwrap_or_default();
        let socket = socket.try_clone()?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let evicted = {
            let mut p = self.pending.lock().unwrap();
            let evicted = (p.len() >= self.max_pending)
                .then(|| p.pop_front())
                .flatten();
            p.push_back(Pending {
                id,
                since: Instant::now(),
                socket,
                peer,
            });
            evicted
        };
        if let Some(old) = evicted {
            self.close(
                &old,
                "the pending-login limit was reached and this was the oldest",
            );
        }
        Ok(PendingLogin {
            guard: self.clone(),
            id,
        })
    }

    /// How many connections are pending now.
    pub fn pending_count(&self) -> usize {
        self.pending.lock().unwrap().len()
    }

    fn remove(&self, id: u64) {
        self.pending.lock().unwrap().retain(|p| p.id != id);
    }

    fn close(&self, p: &Pending, why: &str) {
        let _ = p.socket.shutdown(std::net::Shutdown::Both);
        let ms = p.since.elapsed().as_millis();
        self.log.write(
            "Logon",
            &format!(
                "Error: 17830, Severity: 20, State: 11.\nThe connection has been closed before its login completed ({why}). Time spent during login: total {ms} ms. [CLIENT: {}]",
                p.peer
            ),
        );
    }

    /// Shuts down every pending connection older than the login timeout (invariant 2).
    pub fn reap(&self) -> usize {
        let expired: Vec<Pending> = {
            let mut p = self.pending.lock().unwrap();
            let (old, keep): (VecDeque<Pending>, VecDeque<Pending>) = p
                .drain(..)
                .partition(|x| x.since.elapsed() >= self.login_timeout);
            *p = keep;
            old.into()
        };
        let why = format!("login timeout of {} s", self.login_timeout.as_secs());
        for x in &expired {
            self.close(x, &why);
        }
        expired.len()
    }

    /// Runs the reaper until `stop` is set.
    pub fn spawn_reaper(self: &Arc<Self>, stop: Arc<AtomicBool>) {
        let me = self.clone();
        let _ = std::thread::Builder::new()
            .name("tds-login-reaper".into())
            .spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    std::thread::sleep(REAPER_TICK);
                    me.reap();
                }
            });
    }

    /// How long a login from `addr` waits before its password is checked (invariant 3).
    pub fn backoff(&self, addr: IpAddr) -> Duration {
        let f = self.failures.lock().unwrap();
        match f.get(&addr) {
            Some(x) if x.count >= BACKOFF_AFTER && x.last.elapsed() < FAILURE_WINDOW => {
                let doublings = (x.count - BACKOFF_AFTER).min(16);
                (FIRST_BACKOFF * 2u32.pow(doublings)).min(MAX_BACKOFF)
            }
            _ => Duration::ZERO,
        }
    }

    /// Counts a failed login from `addr`; returns its failures within the window.
    pub fn failed(&self, addr: IpAddr) -> u32 {
        let mut f = self.failures.lock().unwrap();
        if f.len() >= MAX_TRACKED && !f.contains_key(&addr) {
            forget_stalest(&mut f);
        }
        let now = Instant::now();
        let e = f.entry(addr).or_insert(Failures {
            count: 0,
            last: now,
        });
        if e.last.elapsed() >= FAILURE_WINDOW {
            e.count = 0;
        }
        e.count += 1;
        e.last = now;
        e.count
    }

    /// A successful login from `addr` clears its failures.
    pub fn succeeded(&self, addr: IpAddr) {
        self.failures.lock().unwrap().remove(&addr);
    }
}

fn forget_stalest(f: &mut HashMap<IpAddr, Failures>) {
    let mut by_age: Vec<(Instant, IpAddr)> = f.iter().map(|(a, x)| (x.last, *a)).collect();
    by_age.sort();
    for (_, a) in by_age.into_iter().take(MAX_TRACKED / 10) {
        f.remove(&a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn guard(max: usize, timeout: Duration) -> (Arc<LoginGuard>, tempdir::Dir) {
        let dir = tempdir::Dir::new();
        let log = Arc::new(ErrorLog::open(&dir.0).unwrap());
        (LoginGuard::new(max, timeout, log), dir)
    }

    mod tempdir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
                let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let p = std::env::temp_dir()
                    .join(format!("xdb-login-guard-{}-{n}", std::process::id()));
                let _ = std::fs::remove_dir_all(&p);
                Dir(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    fn pair(l: &TcpListener) -> (TcpStream, TcpStream) {
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (c, s)
    }

    #[test]
    fn the_oldest_pending_login_makes_room_for_the_newest() {
        let (g, _d) = guard(2, Duration::from_secs(60));
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let conns: Vec<_> = (0..3).map(|_| pair(&l)).collect();
        let p: Vec<_> = conns.iter().map(|(_, s)| g.admit(s).unwrap()).collect();
        assert_eq!(g.pending_count(), 2);
        // The first server socket was shut down: its client reads end of stream.
        let mut buf = [0u8; 1];
        use std::io::Read;
        assert_eq!((&conns[0].0).read(&mut buf).unwrap(), 0);
        drop(p);
        assert_eq!(g.pending_count(), 0, "a dropped place is given up");
    }

    #[test]
    fn pending_logins_past_the_timeout_are_closed() {
        let (g, _d) = guard(10, Duration::from_millis(50));
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let (_c, s) = pair(&l);
        let _p = g.admit(&s).unwrap();
        assert_eq!(g.reap(), 0);
        std::thread::sleep(Duration::from_millis(80));
        assert_eq!(g.reap(), 1);
        assert_eq!(g.pending_count(), 0);
    }

    #[test]
    fn failures_back_off_doubling_and_success_clears_them() {
        let (g, _d) = guard(10, Duration::from_secs(60));
        let a: IpAddr = "127.0.0.7".parse().unwrap();
        for _ in 0..BACKOFF_AFTER - 1 {
            g.failed(a);
        }
        assert_eq!(g.backoff(a), Duration::ZERO);
        g.failed(a);
        assert_eq!(g.backoff(a), FIRST_BACKOFF);
        g.failed(a);
        assert_eq!(g.backoff(a), FIRST_BACKOFF * 2);
        for _ in 0..40 {
            g.failed(a);
        }
        assert_eq!(g.backoff(a), MAX_BACKOFF);
        assert_eq!(g.backoff("127.0.0.8".parse().unwrap()), Duration::ZERO);
        g.succeeded(a);
        assert_eq!(g.backoff(a), Duration::ZERO);
    }
}
