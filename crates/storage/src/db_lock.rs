//! How sessions share a database: a reader-writer lock. A statement that changes the
//! database's structure, or whose path is not built to run beside others, holds it
//! exclusively (`lock`, as every statement did when this was a mutex); a path built to run
//! beside others shares it (`read`) and relies on the finer locks inside the database
//! (docs/ARCHITECTURE.md, "Locks inside a database").

use std::ops::{Deref, DerefMut};
use std::sync::{LockResult, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::Database;

/// A database shared between sessions and the instance's background threads.
///
/// Invariant: a panic never makes the lock itself unusable. std's lock poisoning would turn
/// one session's panic into a panic of every later session that takes the lock (in master:
/// every login). Instead the panic poisons the *database* (`Database::poison_after_panic`:
/// it refuses changes until reopened, as after a failed write), and the lock goes on
/// serving readers, so `lock` and `read` always return `Ok`.
pub struct DbLock(RwLock<Database>);

/// The database held exclusively. Dropped by a panic's unwinding, it poisons the database:
/// the panic may have left it half way through a change.
pub struct DbGuard<'a>(RwLockWriteGuard<'a, Database>);

impl Deref for DbGuard<'_> {
    type Target = Database;
    fn deref(&self) -> &Database {
        &self.0
    }
}

impl DerefMut for DbGuard<'_> {
    fn deref_mut(&mut self) -> &mut Database {
        &mut self.0
    }
}

impl Drop for DbGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.poison_after_panic();
        }
    }
}

impl DbLock {
    pub fn new(db: Database) -> DbLock {
        DbLock(RwLock::new(db))
    }

    /// Holds the database exclusively. Never `Err` (see the type's invariant).
    pub fn lock(&self) -> LockResult<DbGuard<'_>> {
        let guard = self.0.write().unwrap_or_else(|e| e.into_inner());
        Ok(DbGuard(guard))
    }

    /// Shares the database with other readers: only `&self` paths. Never `Err`.
    pub fn read(&self) -> LockResult<RwLockReadGuard<'_, Database>> {
        Ok(self.0.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The database, once no one else holds the lock.
    pub fn into_inner(self) -> Database {
        self.0.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}
