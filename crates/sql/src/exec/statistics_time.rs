//! SET STATISTICS TIME ON: the times SQL Server reports for a batch's parse and compile
//! (Msg 3613) and for each statement's execution (Msg 3612), as informational messages
//! (sys.messages severity 10, sent as 0: SQL Server turns 10 into 0 on the wire, MS-TDS
//! 2.2.7.10).
//!
//! What the figures cover here, which is not all that SQL Server's cover:
//! - **Parse and compile (3613)**: once per batch, when the option is ON as the batch
//!   starts, ahead of everything the batch sends; on the line of the batch's last
//!   statement, as SQL Server gives it (here its last top-level statement: a WHILE's,
//!   not its body's). It times turning the batch's text into statements
//!   (lexing and parsing; a batch the session's cache already holds, `batch_cache.rs`,
//!   costs next to nothing, as a plan cache hit does). extentdb has no compile step of its
//!   own: resolving names, choosing a clustered seek range or a nonclustered index happen
//!   as each statement starts to run, so that time is in the statement's 3612, not here,
//!   and there is no mid-batch recompile with a 3613 of its own.
//! - **Execution (3612)**: for each statement that runs, from its start to its end (its
//!   locks released, an autocommit transaction's commit with its log flush included),
//!   after its result sets, row counts and SET STATISTICS IO lines and before its DONE;
//!   a failed statement's comes after its error and ahead of Msg 3621. BEGIN ... END,
//!   IF, WHILE, BREAK, CONTINUE and RETURN report none of their own (the statements inside
//!   do); IF's and WHILE's condition reports each time it is evaluated; a DECLARE reports
//!   only when it gives a variable a value. The SET that turns the option on reports
//!   nothing (it was off when the statement began), nor does the one that turns it off.
//! - **CPU time** is the session thread's own CPU clock (`CLOCK_THREAD_CPUTIME_ID`): the
//!   statement's work runs on the session's thread; work other threads do for it (the log
//!   writer's flush, DBCC CHECKDB's parallel checkers) is waited for, so it shows in
//!   elapsed time only. **Elapsed time** is the monotonic clock. Both are whole
//!   milliseconds, rounded down.
//!
//! Invariants:
//! 1. A stopwatch is read on the thread that started it (the CPU clock is per thread).
//! 2. The CPU interval lies inside the elapsed one: the monotonic clock is read first at
//!    the start and last at the stop.

use std::thread::ThreadId;
use std::time::Instant;

use crate::ast::StatementKind;
use crate::messages::{msg, SqlError};

/// A start to measure from: the monotonic clock and the thread's CPU clock.
pub(super) struct Stopwatch {
    wall: Instant,
    cpu_ns: u64,
    thread: ThreadId,
}

/// What a stopwatch measured, in whole milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Times {
    pub cpu_ms: u64,
    pub elapsed_ms: u64,
}

impl Stopwatch {
    pub(super) fn start() -> Stopwatch {
        // The wall clock first (invariant 2).
        let wall = Instant::now();
        Stopwatch {
            wall,
            cpu_ns: thread_cpu_ns(),
            thread: std::thread::current().id(),
        }
    }

    pub(super) fn stop(&self) -> Times {
        assert_eq!(
            self.thread,
            std::thread::current().id(),
            "a stopwatch is read on its own thread (invariant 1)"
        );
        let cpu_ns = thread_cpu_ns();
        assert!(
            cpu_ns >= self.cpu_ns,
            "a thread's CPU clock never goes back"
        );
        // The wall clock last (invariant 2).
        let elapsed = self.wall.elapsed();
        Times {
            cpu_ms: (cpu_ns - self.cpu_ns) / 1_000_000,
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// The calling thread's CPU time so far, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec the call only writes.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "Linux always has CLOCK_THREAD_CPUTIME_ID");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Msg 3612, a statement's execution times: "\n SQL Server Execution Times:\n   CPU time
/// = N ms,  elapsed time = N ms." (SQL Server fills both %hs with its line breaks).
pub(super) fn execution_times(t: Times) -> SqlError {
    msg(3612, &[&"\n", &"\n  ", &t.cpu_ms, &t.elapsed_ms])
}

/// Msg 3613, a batch's parse and compile time: "SQL Server parse and compile time: \n
/// CPU time = N ms, elapsed time = N ms.".
pub(super) fn parse_and_compile_time(t: Times) -> SqlError {
    msg(3613, &[&"\n  ", &t.cpu_ms, &t.elapsed_ms])
}

/// Whether a statement reports its own execution time (the module doc's list).
pub(super) fn reports_execution_time(kind: &StatementKind) -> bool {
    use crate::ast::Declaration;
    use StatementKind as K;
    match kind {
        K::Block(_)
        | K::If { .. }
        | K::While { .. }
        | K::TryCatch { .. }
        | K::Break
        | K::Continue
        | K::Return(_) => false,
        K::Declare(d) => d
            .iter()
            .any(|d| matches!(d, Declaration::Scalar(v) if v.initial.is_some())),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts match SQL Server's character for character, line breaks and the two
    /// spaces before 3612's "elapsed" included.
    #[test]
    fn messages_read_as_sql_servers() {
        let t = Times {
            cpu_ms: 3,
            elapsed_ms: 7,
        };
        let e = execution_times(t);
        assert_eq!((e.number, e.severity), (3612, 0));
        assert_eq!(
            e.text,
            "\n SQL Server Execution Times:\n   CPU time = 3 ms,  elapsed time = 7 ms."
        );
        let c = parse_and_compile_time(t);
        assert_eq!((c.number, c.severity), (3613, 0));
        assert_eq!(
            c.text,
            "SQL Server parse and compile time: \n   CPU time = 3 ms, elapsed time = 7 ms."
        );
    }

    /// Work on the thread advances its CPU clock, and the CPU measured never exceeds the
    /// elapsed time measured around it (invariant 2).
    #[test]
    fn cpu_time_counts_this_threads_work_inside_the_elapsed_time() {
        let w = Stopwatch::start();
        let mut x = 0u64;
        while w.stop().cpu_ms < 2 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let t = w.stop();
        assert!(t.cpu_ms >= 2);
        assert!(t.cpu_ms <= t.elapsed_ms, "{t:?}");
    }
}
