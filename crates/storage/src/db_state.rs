//! A database's state as ALTER DATABASE ... SET OFFLINE and SET ONLINE change it, and its
//! user access as SET SINGLE_USER and MULTI_USER change it.
//!
//! SET OFFLINE checkpoints a database (unless a failed write poisoned it: then its memory
//! may not match its disk, and recovery settles it from the log at the next open), records
//! OFFLINE in master's catalog, and closes it: its background checkpointer stopped, its log
//! growth preparation cancelled, and its files, log writer and buffer pool released with the
//! last reference to its `Database`. A restart leaves it closed. SET ONLINE clears the mark
//! and opens it through recovery, the path instance start uses (`Instance::open_listed`);
//! SET ONLINE of a poisoned database closes it without a checkpoint and opens it the same
//! way. A database recovery cannot open is SUSPECT (or RECOVERY_PENDING) as at start.
//!
//! The SQL layer decides who may change a state and moves other sessions out first; here
//! only a transaction still open in the database (`DatabaseLocked`) stops SET OFFLINE.
//!
//! Invariants:
//! 1. State changes take turns (`Instance::state_change`): one database is never closed and
//!    opened at once, and a DROP DATABASE never removes files a SET ONLINE is recovering.
//! 2. Master's OFFLINE mark is durable before the database leaves the list of open
//!    databases, and cleared before SET ONLINE opens it; a failure to save master changes
//!    neither list, and the database stays as it was.
//! 3. Two `Database` values never have the same files open: SET ONLINE of a database that
//!    is open (poisoned) opens it again only after the last reference to the old one is
//!    gone (`wait_last_reference`); else it is put back as it was and the change fails.
//! 4. A database leaves the open list poisoned: a session that looked it up before can
//!    change nothing in it any more.
//! 5. A database's user access lives in master's entry only (`user_access` reads it there),
//!    durable before it counts; the SQL layer takes `Instance::access_turn` around a check
//!    of who is in a SINGLE_USER database and the entry that follows it, and around the
//!    change to SINGLE_USER, so two sessions never both get in.

use std::sync::Arc;
use std::time::{Duration, Instant};

use extentdb_format::catalog::{DatabaseEntry, UserAccess};

use crate::instance::{
    DbHandle, Instance, UnopenedState, FIRST_USER_ID, MASTER_ID, MODEL_ID, TEMPDB_ID,
};
use crate::StorageError;

/// How long a state change waits for sessions still holding the database (a statement
/// finishing its read) to let go of it.
const LAST_REFERENCE_WAIT: Duration = Duration::from_secs(10);

/// True once `db` is referenced only by the caller's handle; false after `within`.
fn wait_last_reference(db: &DbHandle, within: Duration) -> bool {
    let until = Instant::now() + within;
    while Arc::strong_count(db) > 1 {
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

impl Instance {
    /// ALTER DATABASE ... SET OFFLINE of user database `id` (open, or not opened at start:
    /// SUSPECT or RECOVERY_PENDING). Already OFFLINE: nothing to do.
    pub fn set_offline(&self, id: u16) -> Result<(), StorageError> {
        assert!(id >= FIRST_USER_ID, "a system database never goes offline");
        let _turn = self.state_change.lock().unwrap();
        if let Some(db) = self.database(id) {
            return self.close_to_offline(id, db);
        }
        let (mut entry, state) = self.unopened(id)?;
        match state {
            UnopenedState::Offline => return Ok(()),
            UnopenedState::Suspect | UnopenedState::RecoveryPending
                if entry.restoring.is_none() => {}
            _ => return Err(StorageError::DatabaseLocked(entry.name)),
        }
        entry.offline = true;
        self.record_in_master(&entry)?;
        self.log_option(&entry.name, "OFFLINE");
        self.list_unopened(entry, UnopenedState::Offline);
        Ok(())
    }

    /// ALTER DATABASE ... SET ONLINE of user database `id`: opens an OFFLINE (or SUSPECT,
    /// RECOVERY_PENDING) one through recovery, and reopens an open one a failed write
    /// poisoned. An open, healthy database: nothing to do. A recovery failure is returned;
    /// the database is then listed SUSPECT or RECOVERY_PENDING, as at start.
    pub fn set_online(&self, id: u16) -> Result<(), StorageError> {
        assert!(id >= FIRST_USER_ID, "a system database is never reopened");
        let _turn = self.state_change.lock().unwrap();
        if let Some(db) = self.database(id) {
            if !db.read().unwrap().is_poisoned() {
                return Ok(());
            }
            return self.reopen(id, db);
        }
        let (mut entry, state) = self.unopened(id)?;
        match state {
            UnopenedState::Offline | UnopenedState::Suspect | UnopenedState::RecoveryPending
                if entry.restoring.is_none() => {}
            _ => return Err(StorageError::DatabaseLocked(entry.name)),
        }
        if entry.offline {
            entry.offline = false;
            self.record_in_master(&entry)?;
        }
        self.log_option(&entry.name, "ONLINE");
        self.list_unopened(entry.clone(), UnopenedState::Recovering);
        self.open_listed(&entry)
    }

    /// The user access master records for database `id` (MULTI_USER for one it does not
    /// list: master, tempdb and model's own entries are always MULTI_USER).
    pub fn user_access(&self, id: u16) -> UserAccess {
        self.master()
            .read()
            .unwrap()
            .catalog
            .databases
            .iter()
            .find(|d| d.database_id == id)
            .map_or(UserAccess::MultiUser, |d| d.user_access)
    }

    /// ALTER DATABASE ... SET SINGLE_USER | RESTRICTED_USER | MULTI_USER of database `id`
    /// (a user database or msdb): recorded in master, durably (invariant 5); the SQL layer has moved other
    /// sessions out first. The same access again: nothing to do.
    pub fn set_user_access(&self, id: u16, access: UserAccess) -> Result<(), StorageError> {
        assert!(
            ![MASTER_ID, TEMPDB_ID, MODEL_ID].contains(&id),
            "master, tempdb and model are always MULTI_USER"
        );
        let _turn = self.state_change.lock().unwrap();
        let mut entry = self
            .master()
            .read()
            .unwrap()
            .catalog
            .databases
            .iter()
            .find(|d| d.database_id == id)
            .cloned()
            .ok_or_else(|| StorageError::DatabaseNotFound(id.to_string()))?;
        if entry.user_access == access {
            return Ok(());
        }
        entry.user_access = access;
        self.record_in_master(&entry)?;
        // An unopened database's listed entry is the one SET ONLINE writes back.
        if let Some(listed) = self.suspect.lock().unwrap().get_mut(&id) {
            listed.0.user_access = access;
        }
        self.log_option(&entry.name, access.desc());
        Ok(())
    }

    /// True while database `id` is listed OFFLINE.
    pub fn is_offline(&self, id: u16) -> bool {
        matches!(self.unopened(id), Ok((_, UnopenedState::Offline)))
    }

    fn unopened(&self, id: u16) -> Result<(DatabaseEntry, UnopenedState), StorageError> {
        self.suspect
            .lock()
            .unwrap()
            .get(&id)
            .map(|(e, _, s)| (e.clone(), *s))
            .ok_or_else(|| StorageError::DatabaseNotFound(id.to_string()))
    }

    /// Replaces database `entry.database_id`'s entry in master's catalog, durably.
    fn record_in_master(&self, entry: &DatabaseEntry) -> Result<(), StorageError> {
        let master = self.master();
        let mut master = master.lock().unwrap();
        master.change_catalog(|c| {
            let e = c
                .databases
                .iter_mut()
                .find(|d| d.database_id == entry.database_id)
                .ok_or_else(|| StorageError::DatabaseNotFound(entry.name.clone()))?;
            *e = entry.clone();
            Ok(())
        })
    }

    /// SQL Server's ERRORLOG line for a database option set.
    fn log_option(&self, name: &str, option: &str) {
        self.errorlog.write(
            "spid7s",
            &format!("Setting database option {option} to ON for database '{name}'."),
        );
    }

    /// SET OFFLINE of an open database (invariants 2 and 4).
    fn close_to_offline(&self, id: u16, db: DbHandle) -> Result<(), StorageError> {
        // Stopped first: a checkpoint it ran would need the lock held below.
        self.stop_checkpointer(&db);
        let closed = (|| {
            let master = self.master();
            let mut master = master.lock().unwrap();
            let mut g = db.lock().unwrap();
            if !g.is_poisoned() {
                if g.active_xacts() > 0 {
                    return Err(StorageError::DatabaseLocked(g.name.clone()));
                }
                g.checkpoint_for_close()?;
            }
            g.discard_prepared_growth();
            let mut entry = master
                .catalog
                .databases
                .iter()
                .find(|d| d.database_id == id)
                .cloned()
                .ok_or_else(|| StorageError::DatabaseNotFound(g.name.clone()))?;
            entry.offline = true;
            master.change_catalog(|c| {
                for d in c.databases.iter_mut().filter(|d| d.database_id == id) {
                    *d = entry.clone();
                }
                Ok(())
            })?;
            g.poison();
            Ok(entry)
        })();
        let entry = match closed {
            Ok(entry) => entry,
            Err(e) => {
                self.spawn_checkpointer(&db);
                return Err(e);
            }
        };
        self.log_option(&entry.name, "OFFLINE");
        let name = entry.name.clone();
        self.list_unopened(entry, UnopenedState::Offline);
        self.databases.lock().unwrap().remove(&id);
        if !wait_last_reference(&db, LAST_REFERENCE_WAIT) {
            self.errorlog.write(
                "spid7s",
                &format!("Database '{name}' is OFFLINE while a statement still reads it; its files close when that statement ends."),
            );
        }
        Ok(())
    }

    /// SET ONLINE of an open database a failed write poisoned: closed without a checkpoint,
    /// then opened through recovery (invariant 3).
    fn reopen(&self, id: u16, db: DbHandle) -> Result<(), StorageError> {
        self.stop_checkpointer(&db);
        let entry = self
            .master()
            .read()
            .unwrap()
            .catalog
            .databases
            .iter()
            .find(|d| d.database_id == id)
            .cloned();
        let Some(entry) = entry else {
            self.spawn_checkpointer(&db);
            return Err(StorageError::DatabaseNotFound(id.to_string()));
        };
        db.lock().unwrap().discard_prepared_growth();
        self.log_option(&entry.name, "ONLINE");
        self.list_unopened(entry.clone(), UnopenedState::Recovering);
        self.databases.lock().unwrap().remove(&id);
        if !wait_last_reference(&db, LAST_REFERENCE_WAIT) {
            self.databases.lock().unwrap().insert(id, db.clone());
            self.suspect.lock().unwrap().remove(&id);
            self.spawn_checkpointer(&db);
            return Err(StorageError::DatabaseLocked(entry.name));
        }
        drop(db);
        self.open_listed(&entry)
    }
}
