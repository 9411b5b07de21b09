//! How sessions share a database: `SharedDatabase`, the handle every session and
//! background thread holds, a reader-writer lock around `Database`. Storage alone chooses
//! the mode: a path built to run beside others shares it (`read`, `run`) and relies on the
//! finer locks inside the database (docs/ARCHITECTURE.md, "Locks inside a database"); a
//! change of the database's structure is one method of the handle (`structure.rs`) that
//! holds it exclusively inside storage for the whole change.
//!
//! Invariants:
//! 1. Nothing outside this crate holds the database exclusively: `lock` and `DbGuard` are
//!    `pub(crate)` (the compiler checks it), and storage's own integration tests reach it
//!    only through `lock_for_tests`, which crates/sql's boundary test forbids there.
//! 2. A panic never makes the lock itself unusable (see `SharedDatabase`).

use std::ops::{Deref, DerefMut};
use std::sync::{LockResult, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::access::{Held, Needs, Step};
use crate::log_growth::GrowthEnv;
use crate::{Database, StorageError};

/// A database shared between sessions and the instance's background threads.
///
/// Invariant: a panic never makes the lock itself unusable. std's lock poisoning would turn
/// one session's panic into a panic of every later session that takes the lock (in master:
/// every login). Instead the panic poisons the *database* (`Database::poison_after_panic`:
/// it refuses changes until reopened, as after a failed write), and the lock goes on
/// serving readers, so `lock` and `read` always return `Ok`.
pub struct SharedDatabase(RwLock<Database>);

/// The database held exclusively. Dropped by a panic's unwinding, it poisons the database:
/// the panic may have left it half way through a change.
pub(crate) struct DbGuard<'a>(RwLockWriteGuard<'a, Database>);

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
        self.0.held_exclusively = false;
        // Sessions sharing the database see to the log again (`Needs::LogSpace`).
        self.0.log_attended = false;
    }
}

/// Poisons the database when dropped by a panic's unwinding while it was shared: the panic
/// may have left a change half made.
struct PoisonOnPanic<'a>(&'a SharedDatabase);

impl Drop for PoisonOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Ok(db) = self.0.read() {
                db.poison_after_panic();
            }
        }
    }
}

impl SharedDatabase {
    pub fn new(mut db: Database) -> SharedDatabase {
        db.held_exclusively = false;
        SharedDatabase(RwLock::new(db))
    }

    /// Holds the database exclusively. Never `Err` (see the type's invariant). Crate-private
    /// (invariant 1): callers outside storage use the handle's structure changes.
    pub(crate) fn lock(&self) -> LockResult<DbGuard<'_>> {
        let mut guard = self.0.write().unwrap_or_else(|e| e.into_inner());
        guard.held_exclusively = true;
        guard.log_attended = false;
        Ok(DbGuard(guard))
    }

    /// Runs `op`, a row operation or a batch of them (access.rs), sharing the database
    /// with other sessions; what it needs is provided holding the database exclusively,
    /// where `op` runs again until it is done or says it may share the database again
    /// (`Needs::Share`). A growth to prepare is prepared holding no lock. `env` is the
    /// session's: how the growths it causes initialize and report; `map` gives a failed
    /// provision as `op`'s error.
    pub fn run<T, E>(
        &self,
        env: &GrowthEnv,
        map: impl Fn(StorageError) -> E,
        mut op: impl FnMut(Held<'_>) -> Result<Step<T>, E>,
    ) -> Result<T, E> {
        // A panic from here on may leave a change half made: the database needs reopening.
        let _panic_guard = PoisonOnPanic(self);
        loop {
            // The shared guard ends with this statement, before any lock below.
            let step = op(Held::Shared(&self.read().unwrap()))?;
            let needs = match step {
                Step::Done(t) => return Ok(t),
                // Prepared, the operation runs again sharing the database; not prepared
                // (a full disk), it runs holding it and grows, or fails to grow, as SQL
                // Server reports it (5149 in the ERRORLOG, 1105 to the client).
                Step::Needs(Needs::Growth(p)) => match p.run() {
                    Ok(_) => continue,
                    Err(_) => Needs::Exclusive,
                },
                Step::Needs(n) => n,
            };
            if let Some(t) = self.run_exclusive(env, needs, &map, &mut op)? {
                return Ok(t);
            }
        }
    }

    /// `run`'s exclusive part: provides `needs` and runs `op` again until it is done
    /// (Some) or may share the database again (None).
    fn run_exclusive<T, E>(
        &self,
        env: &GrowthEnv,
        mut needs: Needs,
        map: &impl Fn(StorageError) -> E,
        op: &mut impl FnMut(Held<'_>) -> Result<Step<T>, E>,
    ) -> Result<Option<T>, E> {
        let mut guard = self.lock().unwrap();
        guard.set_growth_env(env.clone());
        loop {
            let kind = needs.kind();
            guard.provide(needs).map_err(map)?;
            needs = match op(Held::Exclusive(&mut guard))? {
                Step::Done(t) => return Ok(Some(t)),
                Step::Needs(Needs::Share) => return Ok(None),
                Step::Needs(n) => n,
            };
            // access.rs invariant 4.
            assert_ne!(kind, needs.kind(), "{needs:?} needed twice");
        }
    }

    /// Holds the database exclusively, for storage's own integration tests and examples
    /// only (they drive the allocator and transactions as a session's exclusive path
    /// does). Nothing else calls it (invariant 1; crates/sql/tests/boundary.rs).
    #[doc(hidden)]
    pub fn lock_for_tests(&self) -> impl std::ops::DerefMut<Target = Database> + '_ {
        self.lock().unwrap()
    }

    /// Shares the database with other readers: only `&self` paths. Never `Err`.
    pub fn read(&self) -> LockResult<RwLockReadGuard<'_, Database>> {
        Ok(self.0.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The database, once no one else holds the lock.
    pub fn into_inner(self) -> Database {
        let mut db = self.0.into_inner().unwrap_or_else(|e| e.into_inner());
        db.held_exclusively = true;
        db
    }
}
