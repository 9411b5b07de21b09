//! ALTER DATABASE ... SET OFFLINE | ONLINE [WITH ROLLBACK IMMEDIATE | ROLLBACK AFTER n
//! [SECONDS] | NO_WAIT]: who may change a database's state, and the other sessions using it
//! (storage's `db_state.rs` closes and opens the database).
//!
//! A session uses a database while it is its current database or its explicit transaction
//! has written there (`SessionInfo::xact_databases`). Before SET OFFLINE (and SET ONLINE of
//! a database a failed write poisoned, which closes it) the others must leave:
//! - no termination clause: SQL Server waits for them; extentdb waits up to `LOCK_WAIT`,
//!   then fails with 5061 as SQL Server does when its lock wait times out;
//! - NO_WAIT: fails at once with 5070;
//! - ROLLBACK IMMEDIATE: ends those sessions as KILL does (their transactions roll back,
//!   their connections close), then goes on (5060 says so);
//! - ROLLBACK AFTER n: waits n seconds, then as ROLLBACK IMMEDIATE.
//!
//! The session running the statement may be in the database: SET OFFLINE moves it to
//! master (with the ENVCHANGE and 5701 a USE sends), since its database is gone.
//! EMERGENCY is not built (40517).
//!
//! ALTER DATABASE ... SET SINGLE_USER [WITH ...] moves the other sessions out the same way,
//! then records SINGLE_USER in master (storage's `set_user_access`): from then on one
//! session at a time may be in the database. USE (and so a login's default or requested
//! database) and a three-part name into it from another session get Msg 924 while one
//! session is in it; entering is checked and done under `Instance::access_turn`, the lock
//! SET SINGLE_USER holds while it checks the database is clear and records the change, so
//! two sessions never both get in. MULTI_USER lifts it and waits for no one. SINGLE_USER
//! is refused for master, tempdb and model (5058); msdb may be made SINGLE_USER, as in SQL
//! Server. RESTRICTED_USER is not built (40517).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use extentdb_format::catalog::UserAccess;
use extentdb_storage::instance::{
    SessionInfo, UnopenedState, FIRST_USER_ID, MASTER_ID, MODEL_ID, TEMPDB_ID,
};
use extentdb_storage::StorageError;

use super::errors::{map, Context};
use super::lower::not_yet;
use super::Session;
use super::{EnvChange, Out, Output};
use crate::ast::{DatabaseOption, Termination};
use crate::messages::{msg, SqlError};

/// How long a state change without a termination clause waits for other sessions to leave
/// the database before failing with 5061.
const LOCK_WAIT: Duration = Duration::from_secs(5);
/// How long sessions ended WITH ROLLBACK get to roll back and close.
const KILL_WAIT: Duration = Duration::from_secs(30);

fn failed(first: SqlError) -> Vec<SqlError> {
    vec![first, msg(5069, &[])]
}

impl Session {
    /// ALTER DATABASE `name` SET `option` (OFFLINE, ONLINE or EMERGENCY) [WITH `termination`].
    pub(super) fn set_database_state(
        &mut self,
        name: &str,
        option: &DatabaseOption,
        termination: Option<Termination>,
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        let (word, offline) = match option {
            DatabaseOption::Offline => ("OFFLINE", true),
            DatabaseOption::Online => ("ONLINE", false),
            _ => return Err(vec![not_yet("ALTER DATABASE ... SET EMERGENCY")]),
        };
        if self.trancount > 0 {
            return Err(vec![msg(226, &[&"ALTER DATABASE"])]);
        }
        let inst = self.engine.instance.clone();
        let open = inst.database_by_name(name);
        let (id, real_name) = match &open {
            Some((id, db)) => (*id, db.read().unwrap().name.clone()),
            None => {
                let id = inst
                    .suspect_by_name(name)
                    .ok_or_else(|| vec![msg(5011, &[&name])])?;
                let entry = inst
                    .suspect
                    .lock()
                    .unwrap()
                    .get(&id)
                    .map(|s| s.0.name.clone());
                (id, entry.unwrap_or_else(|| name.to_string()))
            }
        };
        let allowed = self.has_server_permission("ALTER ANY DATABASE")
            || open
                .as_ref()
                .is_some_and(|(id, db)| self.is_db_owner(*id, &db.read().unwrap()));
        if !allowed {
            return Err(vec![msg(5011, &[&name])]);
        }
        if id < FIRST_USER_ID {
            return Err(failed(msg(5058, &[&word, &real_name])));
        }
        match inst.unopened_state(&real_name) {
            Some(UnopenedState::Restoring) => {
                return Err(failed(msg(5052, &[&"ALTER DATABASE", &"RESTORING"])));
            }
            Some(UnopenedState::Recovering) => {
                return Err(failed(msg(5061, &[&real_name])));
            }
            _ => {}
        }
        // Closing an open database (SET OFFLINE, or SET ONLINE of a poisoned one) needs the
        // other sessions out of it.
        let closes = open
            .as_ref()
            .is_some_and(|(_, db)| offline || db.read().unwrap().is_poisoned());
        // Storage waits for the last reference to a database it closes: hold none.
        drop(open);
        if closes {
            self.clear_database(id, &real_name, termination, out)?;
            // X DATABASE while it closes (database_lock.rs): a session that entered since the
            // others left is refused as if it had been seen.
            if !self.hold_database_exclusively(id)? {
                return Err(failed(msg(5061, &[&real_name])));
            }
        }
        let result = if offline {
            inst.set_offline(id)
        } else {
            inst.set_online(id)
        };
        if offline && result.is_ok() {
            // A database closed loses its index usage rows, as in SQL Server.
            self.forget_index_usage(id, None, None);
        }
        if closes && !(offline && result.is_ok() && self.database_id == id) {
            self.end_exclusive_hold(id);
        }
        if let Err(e) = result {
            return Err(self.state_change_failed(&e, &real_name));
        }
        if offline && self.database_id == id {
            self.enter_database(MASTER_ID)?;
            out.push(Output::EnvChange(EnvChange::Database {
                old: real_name,
                new: "master".into(),
            }));
            out.push(Output::Info(msg(5701, &[&"master"])));
        }
        Ok(())
    }

    /// ALTER DATABASE `name` SET SINGLE_USER | MULTI_USER [WITH `termination`] (module docs).
    pub(super) fn set_user_access(
        &mut self,
        name: &str,
        access: UserAccess,
        termination: Option<Termination>,
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        if self.trancount > 0 {
            return Err(vec![msg(226, &[&"ALTER DATABASE"])]);
        }
        let inst = self.engine.instance.clone();
        let (id, db) = inst
            .database_by_name(name)
            .ok_or_else(|| vec![msg(5011, &[&name])])?;
        let real_name = db.read().unwrap().name.clone();
        let allowed = self.has_server_permission("ALTER ANY DATABASE")
            || self.is_db_owner(id, &db.read().unwrap());
        drop(db);
        if !allowed {
            return Err(vec![msg(5011, &[&name])]);
        }
        let always_multi = [MASTER_ID, TEMPDB_ID, MODEL_ID].contains(&id);
        match access {
            UserAccess::MultiUser if always_multi => return Ok(()),
            UserAccess::MultiUser => {}
            UserAccess::SingleUser if always_multi => {
                return Err(failed(msg(5058, &[&"SINGLE_USER", &real_name])));
            }
            UserAccess::SingleUser => {
                return self.make_single_user(id, &real_name, termination, out);
            }
            UserAccess::RestrictedUser => {
                return Err(vec![not_yet("ALTER DATABASE ... SET RESTRICTED_USER")]);
            }
        }
        inst.set_user_access(id, access)
            .map_err(|e| self.state_change_failed(&e, &real_name))
    }

    /// SET SINGLE_USER: the others out as the termination clause says, then, with no one
    /// able to enter meanwhile (`access_turn`), the database checked clear and the change
    /// recorded. A session that entered between the two is moved out in a further round.
    fn make_single_user(
        &self,
        id: u16,
        name: &str,
        termination: Option<Termination>,
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        let inst = self.engine.instance.clone();
        for _ in 0..3 {
            self.clear_database(id, name, termination, out)?;
            let _turn = inst.access_turn.lock().unwrap();
            if self.sessions_in(id).is_empty() {
                return inst
                    .set_user_access(id, UserAccess::SingleUser)
                    .map_err(|e| self.state_change_failed(&e, name));
            }
        }
        Err(failed(msg(5061, &[&name])))
    }

    /// Msg 924 if database `id` is SINGLE_USER and another session is in it. Callers that
    /// then enter it hold `Instance::access_turn` across the check and the entry.
    pub(super) fn single_user_refusal(&self, id: u16, name: &str) -> Option<SqlError> {
        let single = self.engine.instance.user_access(id) == UserAccess::SingleUser;
        (single && !self.sessions_in(id).is_empty()).then(|| msg(924, &[&name]))
    }

    /// A three-part name into database `id` of another session's SINGLE_USER database:
    /// Msg 924 while someone else is in it (the session's own database needs no check).
    pub(super) fn check_single_user(&self, id: u16, name: &str) -> Result<(), Vec<SqlError>> {
        if id == self.database_id {
            return Ok(());
        }
        match self.single_user_refusal(id, name) {
            Some(e) => Err(vec![e]),
            None => Ok(()),
        }
    }

    /// The messages of a failed state change: storage's error, then, when SET ONLINE's
    /// recovery left the database SUSPECT or RECOVERY_PENDING, the message USE would give,
    /// then 5069.
    fn state_change_failed(&self, e: &StorageError, name: &str) -> Vec<SqlError> {
        let mut errors = map(e, Context::Other);
        if matches!(e, StorageError::DatabaseLocked(_)) {
            return errors;
        }
        match self.engine.instance.unopened_state(name) {
            Some(UnopenedState::Suspect) => errors.push(msg(926, &[&name])),
            Some(UnopenedState::RecoveryPending) => errors.push(msg(945, &[&name])),
            _ => {}
        }
        errors.push(msg(5069, &[]));
        errors
    }

    /// Other sessions using database `id`: it is their current database, or their
    /// transaction has written there.
    pub(super) fn sessions_in(&self, id: u16) -> Vec<Arc<SessionInfo>> {
        self.engine
            .instance
            .sessions
            .lock()
            .unwrap()
            .values()
            .filter(|s| s.session_id != self.spid)
            .filter(|s| {
                s.database_id.load(Ordering::Acquire) == id
                    || s.xact_databases.lock().unwrap().contains(&id)
            })
            .cloned()
            .collect()
    }

    /// Waits up to `within` for every other session to leave database `id`; true once none
    /// is left. An attention stops the wait.
    fn wait_sessions_out(&self, id: u16, within: Duration) -> bool {
        let until = Instant::now() + within;
        loop {
            if self.sessions_in(id).is_empty() {
                return true;
            }
            if Instant::now() >= until || self.cancelled() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Moves the other sessions out of database `id` as the termination clause says (the
    /// module docs).
    fn clear_database(
        &self,
        id: u16,
        name: &str,
        termination: Option<Termination>,
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        let grace = match termination {
            None => {
                if self.wait_sessions_out(id, LOCK_WAIT) {
                    return Ok(());
                }
                return Err(failed(msg(5061, &[&name])));
            }
            Some(Termination::NoWait) => {
                if self.sessions_in(id).is_empty() {
                    return Ok(());
                }
                return Err(failed(msg(5070, &[&name])));
            }
            Some(Termination::RollbackImmediate) => Duration::ZERO,
            Some(Termination::RollbackAfter { seconds }) => Duration::from_secs(seconds.into()),
        };
        if self.wait_sessions_out(id, grace) {
            return Ok(());
        }
        let victims = self.sessions_in(id);
        for s in &victims {
            s.kill();
        }
        if !self.wait_sessions_out(id, KILL_WAIT) {
            return Err(failed(msg(5061, &[&name])));
        }
        out.push(Output::Info(msg(5060, &[&100])));
        Ok(())
    }

    /// The message for a database listed in master but not open (USE, a three-part name,
    /// BACKUP, DBCC): 942 OFFLINE, 922 being recovered, 926 SUSPECT, 945 RECOVERY_PENDING,
    /// 927 RESTORING.
    pub(super) fn unopened_error(&self, name: &str) -> Option<SqlError> {
        let number = match self.engine.instance.unopened_state(name)? {
            UnopenedState::RecoveryPending => 945,
            UnopenedState::Suspect => 926,
            UnopenedState::Restoring => 927,
            UnopenedState::Offline => 942,
            UnopenedState::Recovering => 922,
        };
        Some(msg(number, &[&name]))
    }
}
