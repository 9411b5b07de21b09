//! The waits of storage that are not lock waits, counted as sys.dm_os_wait_stats shows
//! them (the lock manager counts LCK_M_*):
//! - WRITELOG: a commit waiting for the log flush that makes it durable
//!   (`SharedDatabase::commit`);
//! - PAGELATCH_EX: a row operation waiting for a page latch another session holds
//!   (`access::PageLatches::hold`), or a change waiting for a buffer frame's latch
//!   (`buffer_frame`);
//! - PAGELATCH_SH: a reader waiting for a buffer frame's latch a change holds;
//! - PAGEIOLATCH_SH: a page read from its file into the buffer pool, or for a scan that
//!   does not cache it (`buffer_pool`), and a reader waiting for a frame whose page is
//!   being read or written back;
//! - PAGEIOLATCH_EX: a change waiting for a frame whose page is being read or written
//!   back.
//!
//! The counts are the process's: one instance runs in a process (`instance_lock`), so
//! they are the instance's. Only waits are counted: a latch taken without waiting and a
//! commit already durable count nothing, as in SQL Server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use extentdb_lock::WaitStat;

/// A kind of wait storage counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitType {
    WriteLog = 0,
    PageLatchEx = 1,
    PageIoLatchSh = 2,
    PageLatchSh = 3,
    PageIoLatchEx = 4,
}

const TYPES: [WaitType; 5] = [
    WaitType::WriteLog,
    WaitType::PageLatchEx,
    WaitType::PageIoLatchSh,
    WaitType::PageLatchSh,
    WaitType::PageIoLatchEx,
];

impl WaitType {
    pub fn name(self) -> &'static str {
        match self {
            WaitType::WriteLog => "WRITELOG",
            WaitType::PageLatchEx => "PAGELATCH_EX",
            WaitType::PageIoLatchSh => "PAGEIOLATCH_SH",
            WaitType::PageLatchSh => "PAGELATCH_SH",
            WaitType::PageIoLatchEx => "PAGEIOLATCH_EX",
        }
    }
}

struct Counter {
    count: AtomicU64,
    total_us: AtomicU64,
    max_us: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: Counter = Counter {
    count: AtomicU64::new(0),
    total_us: AtomicU64::new(0),
    max_us: AtomicU64::new(0),
};

static COUNTERS: [Counter; TYPES.len()] = [ZERO; TYPES.len()];

/// Counts one wait of `kind` that lasted `waited`.
pub fn record(kind: WaitType, waited: Duration) {
    let c = &COUNTERS[kind as usize];
    let us = waited.as_micros().min(u64::MAX as u128) as u64;
    c.count.fetch_add(1, Ordering::Relaxed);
    c.total_us.fetch_add(us, Ordering::Relaxed);
    c.max_us.fetch_max(us, Ordering::Relaxed);
}

/// Runs `f`, counting its duration as one wait of `kind`.
pub fn timed<T>(kind: WaitType, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = f();
    record(kind, started.elapsed());
    out
}

/// The rows of sys.dm_os_wait_stats storage keeps, one per wait type.
pub fn stats() -> Vec<WaitStat> {
    TYPES
        .iter()
        .map(|t| {
            let c = &COUNTERS[*t as usize];
            WaitStat {
                wait_type: t.name(),
                waiting_tasks_count: c.count.load(Ordering::Relaxed),
                wait_time_ms: c.total_us.load(Ordering::Relaxed) / 1000,
                max_wait_time_ms: c.max_us.load(Ordering::Relaxed) / 1000,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_counts_once_with_its_time() {
        let before = stats()[WaitType::PageIoLatchSh as usize].clone();
        record(WaitType::PageIoLatchSh, Duration::from_millis(3));
        let after = stats()[WaitType::PageIoLatchSh as usize].clone();
        assert_eq!(after.wait_type, "PAGEIOLATCH_SH");
        assert!(after.waiting_tasks_count > before.waiting_tasks_count);
        assert!(after.wait_time_ms >= before.wait_time_ms + 3);
        assert!(after.max_wait_time_ms >= 3);
    }
}
