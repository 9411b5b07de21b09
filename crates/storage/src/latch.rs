//! `Latch`: the short-term lock on one in-memory structure of a database (buffer pool,
//! transaction table, heap cursors, identity values) that sessions sharing the database
//! (`SharedDatabase::read`) take for a few instructions at a time. SQL Server calls these latches,
//! as against the locks that protect rows for a transaction's life.
//!
//! A path that holds the database exclusively (`&mut Database`) reaches the structure
//! through `get_mut`, which takes no lock at all: the borrow checker proves no one else
//! can hold it, so exclusive paths cannot deadlock on latches. Paths that share the
//! database take `lock` and never hold two latches at once, except in the order written
//! in docs/ARCHITECTURE.md ("Locks inside a database").
//!
//! A latch poisoned by a panicking holder still gives its value: the structures guarded
//! here are consistent between their methods' calls, and a panic is not a reason to lose a
//! database.

use std::sync::{Mutex, MutexGuard};

#[derive(Default)]
pub struct Latch<T>(Mutex<T>);

impl<T> Latch<T> {
    pub fn new(value: T) -> Latch<T> {
        Latch(Mutex::new(value))
    }

    /// The value, for a path sharing the database.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value, for a path holding the database exclusively: no lock taken.
    pub fn get_mut(&mut self) -> &mut T {
        self.0.get_mut().unwrap_or_else(|e| e.into_inner())
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Latch<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.lock().fmt(f)
    }
}
