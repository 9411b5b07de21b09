//! How sessions share a database: a reader-writer lock. A statement that changes the
//! database's structure, or whose path is not built to run beside others, holds it
//! exclusively (`lock`, as every statement did when this was a mutex); a path built to run
//! beside others shares it (`read`) and relies on the finer locks inside the database
//! (docs/ARCHITECTURE.md, "Locks inside a database").

use std::sync::{LockResult, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::Database;

/// A database shared between sessions and the instance's background threads.
pub struct DbLock(RwLock<Database>);

/// The database held exclusively.
pub type DbGuard<'a> = RwLockWriteGuard<'a, Database>;

impl DbLock {
    pub fn new(db: Database) -> DbLock {
        DbLock(RwLock::new(db))
    }

    /// Holds the database exclusively.
    pub fn lock(&self) -> LockResult<DbGuard<'_>> {
        self.0.write()
    }

    /// Shares the database with other readers: only `&self` paths.
    pub fn read(&self) -> LockResult<RwLockReadGuard<'_, Database>> {
        self.0.read()
    }

    /// The database, once no one else holds the lock (a panic while it was held is no
    /// reason to lose it: a poisoned lock gives its database too).
    pub fn into_inner(self) -> Database {
        self.0.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}
