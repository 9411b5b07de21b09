//! Tempdb space by task and by session: the pages each task (a running request) allocates
//! and frees in tempdb, behind SQL Server's sys.dm_db_task_space_usage and
//! sys.dm_db_session_space_usage (the sql crate's `space_usage.rs` shows them).
//!
//! Two kinds of object are counted, as SQL Server counts them:
//! - *User objects*: tempdb's tables (#temp and ##global tables, table variables, the
//!   tables SELECT INTO makes there). Counted here, where storage claims and frees extents
//!   of a database that counts task space (tempdb, `Database::set_counts_task_space`):
//!   8 pages for each extent an allocation unit reserves (`claim_extent`) or gives back
//!   (`deallocate_extent_lazy`), which is "pages reserved or allocated" in SQL Server's
//!   words. IAM pages are not counted (SQL Server's rule too); nor are the catalog's pages.
//! - *Internal objects*: sort, hash and spool spills. SQL Server allocates them in
//!   tempdb's pages; extentdb writes them to work files beside tempdb's data files (the sql
//!   crate's `spill.rs`), so the sql crate counts them, in 8 KB pages of spilled data, through
//!   [`charge`] with [`ObjectKind::Internal`].
//!
//! Whose work a page is charged to: the thread's *charged counters* ([`charge_to`]). A
//! session's requests run on its connection's thread, and storage allocates and frees for
//! a request on the thread that runs it, so the session points its thread at its running
//! task's counters for the request ([`SessionSpace::begin_task`]) and adds them to its own
//! when the request ends ([`SessionSpace::end_task`]). Work done with no counters charged
//! (recovery, the freeing of orphan units at open) is nobody's and is not counted.
//!
//! Invariants:
//! 1. A charge is one atomic add on counters the charging thread already holds: no lock
//!    is taken, and nothing is charged on an insert that takes no new extent.
//! 2. A session's completed counters change only when one of its tasks ends, by the whole
//!    of that task's counts (`end_task`), so they never include a running task's work
//!    (SQL Server's rule for sys.dm_db_session_space_usage).
//! 3. A thread's charged counters are restored when a [`ChargeGuard`] drops, so nested
//!    charges (none today) end where they began.
//! 4. Memory: a session holds two fixed sets of counters, which go with its
//!    `SessionInfo` when it ends; nothing grows with the work counted.
//!
//! Not counted: deferred deallocation (extentdb frees a dropped table's extents at once, so
//! `user_objects_deferred_dealloc_page_count` is always 0), and the version store (there is
//! none).

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use extentdb_format::PAGES_PER_EXTENT;

/// Which counter a page belongs to (SQL Server's two kinds of tempdb object).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// Tables: #temp, ##global, table variables.
    User,
    /// Sort, hash and spool spills.
    Internal,
}

/// Pages allocated and freed, as one reading of [`SpaceCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpaceUsage {
    pub user_alloc_pages: u64,
    pub user_dealloc_pages: u64,
    pub internal_alloc_pages: u64,
    pub internal_dealloc_pages: u64,
}

/// Counters of pages allocated and freed, added to by one thread and read by any.
#[derive(Debug, Default)]
pub struct SpaceCounters {
    user_alloc_pages: AtomicU64,
    user_dealloc_pages: AtomicU64,
    internal_alloc_pages: AtomicU64,
    internal_dealloc_pages: AtomicU64,
}

impl SpaceCounters {
    fn counter(&self, kind: ObjectKind, alloc: bool) -> &AtomicU64 {
        match (kind, alloc) {
            (ObjectKind::User, true) => &self.user_alloc_pages,
            (ObjectKind::User, false) => &self.user_dealloc_pages,
            (ObjectKind::Internal, true) => &self.internal_alloc_pages,
            (ObjectKind::Internal, false) => &self.internal_dealloc_pages,
        }
    }

    /// Adds `pages` allocated (`alloc`) or freed of `kind`.
    pub fn add(&self, kind: ObjectKind, alloc: bool, pages: u64) {
        self.counter(kind, alloc)
            .fetch_add(pages, Ordering::Relaxed);
    }

    /// The counters now (each read atomically on its own).
    pub fn read(&self) -> SpaceUsage {
        SpaceUsage {
            user_alloc_pages: self.user_alloc_pages.load(Ordering::Relaxed),
            user_dealloc_pages: self.user_dealloc_pages.load(Ordering::Relaxed),
            internal_alloc_pages: self.internal_alloc_pages.load(Ordering::Relaxed),
            internal_dealloc_pages: self.internal_dealloc_pages.load(Ordering::Relaxed),
        }
    }

    /// The counters, set back to zero: each count is taken whole, so none is lost to a
    /// charge made meanwhile.
    fn take(&self) -> SpaceUsage {
        SpaceUsage {
            user_alloc_pages: self.user_alloc_pages.swap(0, Ordering::Relaxed),
            user_dealloc_pages: self.user_dealloc_pages.swap(0, Ordering::Relaxed),
            internal_alloc_pages: self.internal_alloc_pages.swap(0, Ordering::Relaxed),
            internal_dealloc_pages: self.internal_dealloc_pages.swap(0, Ordering::Relaxed),
        }
    }

    fn add_usage(&self, u: SpaceUsage) {
        self.add(ObjectKind::User, true, u.user_alloc_pages);
        self.add(ObjectKind::User, false, u.user_dealloc_pages);
        self.add(ObjectKind::Internal, true, u.internal_alloc_pages);
        self.add(ObjectKind::Internal, false, u.internal_dealloc_pages);
    }
}

/// A session's tempdb space: its completed tasks' counts and its running task's.
#[derive(Debug, Default)]
pub struct SessionSpace {
    /// The sum of every task of the session that has ended (invariant 2).
    completed: SpaceCounters,
    /// The running task's counts (zero between tasks).
    task: Arc<SpaceCounters>,
}

impl SessionSpace {
    /// A task begins on this thread: what storage allocates or frees in tempdb, and what
    /// spills, is charged to it until the guard drops. Pair with `end_task`.
    pub fn begin_task(&self) -> ChargeGuard {
        charge_to(self.task.clone())
    }

    /// The task ended: its counts are added to the session's (invariant 2).
    pub fn end_task(&self) {
        self.completed.add_usage(self.task.take());
    }

    /// The session's counts, its running task's excluded.
    pub fn completed(&self) -> SpaceUsage {
        self.completed.read()
    }

    /// The running task's counts so far.
    pub fn running_task(&self) -> SpaceUsage {
        self.task.read()
    }
}

thread_local! {
    /// The counters this thread's work is charged to, if any.
    static CHARGED: RefCell<Option<Arc<SpaceCounters>>> = const { RefCell::new(None) };
}

/// While it lives, this thread's work is charged to the counters `charge_to` named; the
/// thread's former counters come back when it drops (invariant 3).
#[must_use = "the charge ends when the guard drops"]
pub struct ChargeGuard {
    previous: Option<Arc<SpaceCounters>>,
    /// Bound to the thread whose charge it set.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for ChargeGuard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CHARGED.with(|c| *c.borrow_mut() = previous);
    }
}

/// Charges this thread's work to `counters` until the guard drops.
pub fn charge_to(counters: Arc<SpaceCounters>) -> ChargeGuard {
    let previous = CHARGED.with(|c| c.borrow_mut().replace(counters));
    ChargeGuard {
        previous,
        _not_send: std::marker::PhantomData,
    }
}

/// The counters this thread's work is charged to, if any (a spill's work file keeps them,
/// so its pages are given back to the task that wrote them).
pub fn charged() -> Option<Arc<SpaceCounters>> {
    CHARGED.with(|c| c.borrow().clone())
}

/// Charges `pages` allocated (`alloc`) or freed of `kind` to this thread's counters, if
/// it has any (invariant 1).
pub fn charge(kind: ObjectKind, alloc: bool, pages: u64) {
    CHARGED.with(|c| {
        if let Some(counters) = c.borrow().as_ref() {
            counters.add(kind, alloc, pages);
        }
    });
}

/// One extent of a user object claimed (`alloc`) or given back in a database that
/// counts task space.
pub(crate) fn charge_user_extent(alloc: bool) {
    charge(ObjectKind::User, alloc, u64::from(PAGES_PER_EXTENT));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves invariants 2 and 3: a task's charges show as running until it ends, then
    /// in the session's counts whole; nested guards restore the former counters, and
    /// work with no counters charged is counted nowhere.
    #[test]
    fn a_task_s_charges_reach_its_session_when_it_ends() {
        let session = SessionSpace::default();
        charge(ObjectKind::User, true, 8);
        {
            let _task = session.begin_task();
            charge_user_extent(true);
            charge(ObjectKind::Internal, true, 3);
            let other = Arc::new(SpaceCounters::default());
            {
                let _inner = charge_to(other.clone());
                charge(ObjectKind::Internal, false, 5);
            }
            assert_eq!(other.read().internal_dealloc_pages, 5);
            charge(ObjectKind::Internal, false, 3);
            assert_eq!(session.completed(), SpaceUsage::default());
            assert_eq!(session.running_task().user_alloc_pages, 8);
            session.end_task();
        }
        charge(ObjectKind::User, false, 8);
        let done = session.completed();
        assert_eq!(
            done,
            SpaceUsage {
                user_alloc_pages: 8,
                user_dealloc_pages: 0,
                internal_alloc_pages: 3,
                internal_dealloc_pages: 3,
            }
        );
        assert_eq!(session.running_task(), SpaceUsage::default());
        assert!(charged().is_none());
    }
}
