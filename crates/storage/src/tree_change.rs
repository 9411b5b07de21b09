//! Structure changes of clustered indexes beside row operations: a split (SQL Server's
//! structure modification, "SMO") made by a session sharing the database while others
//! read, insert, change and delete rows of the same table.
//!
//! Each tree has a change counter and a change mutex (striped by object id, so memory
//! stays fixed). One session at a time changes a tree's structure, holding its mutex; it
//! takes the latches of the leaves it rewrites (access.rs invariant 2), and installs its
//! pages with the counter odd, making it even again once every page is in: a sequence
//! lock that row operations read around their descents.
//!
//! Invariants:
//! 1. Only a session holding the tree's change mutex, or the database exclusively, changes
//!    the tree's index pages (level above 0), a leaf chain's links, or the keys a leaf
//!    holds other than by a row's own insert or delete; it installs those pages only while
//!    the counter is odd (`TreeChange::installing`), so the counter moves by two across
//!    every such change.
//! 2. A row operation that finds its leaf by a descent acts on it only under the leaf's
//!    latch and only if the counter reads, under that latch, the even value it read before
//!    the descent (`TreeChanges::steady`); else it lets the latch go and descends again.
//!    So it never inserts into, changes or undoes in a leaf whose key range a split
//!    changed after the descent read the leaf's parent.
//! 3. A split installs its pages from right to left and children before their parent: the
//!    new right page before the page that links to it, every new child before the parent
//!    whose separator names it (btree.rs `split`). A reader following a link or a
//!    separator without the mutex reads a page already in place, and a descent that missed
//!    a split lands left of its key, never right of it; a range read walks right from
//!    there along the leaf chain to the key (the B-link property), so it needs no check.
//!
//! Lock order: the tree's change mutex before any page latch (access.rs invariant 2). A
//! session waits for the mutex (`TreeChanges::before_descent`, a change installing its
//! pages) only holding no latch.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Stripes of change counters and mutexes per database.
const TREE_STRIPES: usize = 64;

/// One stripe: the counter (even at rest, odd while a change installs its pages) and the
/// mutex the changing session holds.
#[derive(Default)]
struct TreeStripe {
    counter: AtomicU64,
    change: Mutex<()>,
}

/// The change counters and mutexes of a database's trees (module docs).
pub(crate) struct TreeChanges(Vec<TreeStripe>);

impl Default for TreeChanges {
    fn default() -> Self {
        TreeChanges((0..TREE_STRIPES).map(|_| TreeStripe::default()).collect())
    }
}

impl TreeChanges {
    fn stripe(&self, object_id: u32) -> &TreeStripe {
        &self.0[object_id as usize % TREE_STRIPES]
    }

    /// The counter of tree `object_id` before a descent: even (a change installing its
    /// pages is waited out, holding no latch: module lock order).
    pub(crate) fn before_descent(&self, object_id: u32) -> u64 {
        let s = self.stripe(object_id);
        loop {
            let seen = s.counter.load(Ordering::Acquire);
            if seen.is_multiple_of(2) {
                return seen;
            }
            drop(s.change.lock().unwrap_or_else(|e| e.into_inner()));
        }
    }

    /// Whether no change of tree `object_id` installed pages since the counter read `seen`
    /// (invariant 2). Read under a page latch, or after a page's copy under its frame
    /// latch: a change's pages are installed under those latches after the counter went
    /// odd, so a descent that read any of them sees the counter moved.
    pub(crate) fn steady(&self, object_id: u32, seen: u64) -> bool {
        self.stripe(object_id).counter.load(Ordering::Acquire) == seen
    }

    /// Begins a structure change of tree `object_id`: waits for (and holds) its mutex.
    pub(crate) fn begin(&self, object_id: u32) -> TreeChange<'_> {
        let s = self.stripe(object_id);
        TreeChange {
            stripe: s,
            _held: s.change.lock().unwrap_or_else(|e| e.into_inner()),
        }
    }
}

/// A structure change in progress: its tree's mutex held.
pub(crate) struct TreeChange<'a> {
    stripe: &'a TreeStripe,
    _held: MutexGuard<'a, ()>,
}

impl TreeChange<'_> {
    /// Runs `install` (the change's pages put in place) with the counter odd (invariant 1).
    pub(crate) fn installing<T>(&self, install: impl FnOnce() -> T) -> T {
        let before = self.stripe.counter.fetch_add(1, Ordering::AcqRel);
        assert_eq!(
            before % 2,
            0,
            "tree_change.rs invariant 1: one change at a time"
        );
        let done = install();
        self.stripe.counter.fetch_add(1, Ordering::Release);
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves invariant 2's check: a descent across a change's install is not steady,
    /// one before or after it is, and a descent begun while pages install waits it out.
    #[test]
    fn a_descent_across_a_change_is_not_steady() {
        let trees = TreeChanges::default();
        let seen = trees.before_descent(7);
        assert!(trees.steady(7, seen));
        let change = trees.begin(7);
        change.installing(|| assert!(!trees.steady(7, seen)));
        assert!(!trees.steady(7, seen));
        let after = trees.before_descent(7);
        assert_eq!(after, seen + 2);
        std::thread::scope(|s| {
            let waiter = change.installing(|| {
                let waiter = s.spawn(|| trees.before_descent(7));
                std::thread::sleep(std::time::Duration::from_millis(20));
                assert!(!waiter.is_finished(), "a descent waits out an install");
                waiter
            });
            drop(change);
            assert_eq!(waiter.join().unwrap(), seen + 4);
        });
    }
}
