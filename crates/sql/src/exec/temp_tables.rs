//! Temporary tables, SQL Server's way.
//!
//! Local (`#name`): a table in tempdb that only the session that created it sees, by its
//! `#name`, whatever its current database, and that goes when the session ends (or its
//! connection is reset for a pool). In tempdb the table is stored under its name padded
//! with underscores to 116 characters and followed by a 12-digit hexadecimal number from
//! the instance's counter, 128 in all, which is how tempdb.sys.tables lists it; so two
//! sessions may each have a `#t`.
//!
//! Global (`##name`): a table in tempdb stored under its own name, which every session
//! finds by that name whatever its current database, and every login may use (read,
//! change, index, drop) without any permission, as SQL Server's are visible to all users.
//! A second CREATE TABLE `##name` while one exists (made or being made by any session's
//! open transaction) gets 2714 from the catalog itself, so two sessions creating it at
//! once cannot both succeed. The rule of its end, built here: when the session that
//! created it ends or its connection is reset, that session takes Sch-M on the table
//! through the lock manager with no time limit (no KILL or attention ends that wait),
//! which waits for every other session's lock on it, so their running statements and
//! open transactions that used it (locking.rs invariant 4) finish first, and drops it.
//! The lock queue is first come, first served, so a statement that starts using it after
//! that request waits behind it and then finds no table (208). The creator's session
//! remembers each table by object id and creation time, so a `##name` another session
//! dropped and made again is not the creator's to drop.
//!
//! Invariants:
//! 1. A session's `#name` resolves only to a table it created and has not dropped
//!    (`TempTables`), and never to a table of another session or of another database; a
//!    `##name` resolves to tempdb's table of that name, whoever made it.
//! 2. A temporary table's stored name is unique in tempdb: the counter is the instance's
//!    and only grows.
//! 3. A session's temporary tables are dropped when it ends or is reset; a failure to drop
//!    one goes to the error log, and tempdb is made anew at the next start anyway. A
//!    global one it created is dropped only once its Sch-M is granted (the rule above).
//! 4. CREATE and DROP TABLE #name inside a transaction are the transaction's (storage's
//!    ddl.rs): when it ends, the session's names follow tempdb (`temporary_xact_ended`):
//!    a table its ROLLBACK took back is forgotten, one it brought back is named again.
//!
//! Not built: temporary stored procedures, and the end of a temporary table at the end of
//! the procedure that made it (there are no procedures yet).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use extentdb_storage::instance::TEMPDB_ID;
use extentdb_storage::lock::{LockMode, Locker, Resource};

use super::Session;
use crate::ast::ObjectName;
use crate::messages::{msg, SqlError};

/// The longest `#name`, the `#` included (Msg 193): the stored name adds the padding and
/// the 12-digit number.
pub const MAX_NAME_CHARS: usize = 116;
/// A stored name's length (SQL Server's sysname).
const STORED_CHARS: usize = 128;

/// Whether an object name is a temporary table's (local or global).
pub fn is_temporary(name: &str) -> bool {
    name.starts_with('#')
}

/// Whether an object name is a global temporary table's (`##name`).
pub fn is_global(name: &str) -> bool {
    name.starts_with("##")
}

/// The instance-wide numbers of temporary tables and table variables (invariant 2).
#[derive(Default)]
pub struct TempCounter(AtomicU64);

impl TempCounter {
    /// The next number (invariant 2).
    pub(super) fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// A session's temporary tables: `#name` (lower case) to its stored name in tempdb.
#[derive(Default)]
pub(super) struct TempTables {
    stored: HashMap<String, String>,
    /// `#name`s (lower case, with their stored names) dropped inside the session's open
    /// transaction: its ROLLBACK brings them back (invariant 4).
    dropped_in_xact: Vec<(String, String)>,
    /// The global temporary tables the session created: name, object id and creation
    /// time (dropped at its end if tempdb still has that very table, invariant 3).
    global: Vec<(String, u32, i64)>,
}

/// The stored name of `#name` with number `n`.
fn stored_name(name: &str, n: u64) -> String {
    let suffix = format!("{n:012X}");
    let pad = STORED_CHARS - suffix.len() - name.chars().count();
    format!("{name}{}{suffix}", "_".repeat(pad))
}

impl Session {
    /// Where a name points when it is a temporary table's: `tempdb.dbo.<stored name>`
    /// for a `#name` the session created, `tempdb.dbo.#name` (found nowhere) otherwise,
    /// `tempdb.dbo.##name` for a global one (invariant 1); None for any other name.
    pub(super) fn temporary_target(&self, name: &ObjectName) -> Option<ObjectName> {
        if !is_temporary(name.name()) {
            return None;
        }
        let key = name.name().to_lowercase();
        let stored = self.temp_tables.stored.get(&key);
        let table = stored.cloned().unwrap_or_else(|| name.name().to_string());
        Some(ObjectName {
            parts: vec!["tempdb".into(), "dbo".into(), table],
        })
    }

    /// Whether table `object_name` of database `db_id` is one of this session's
    /// temporary tables or a global one (it may use it without any permission).
    pub(super) fn owns_temporary(&self, db_id: u16, object_name: &str) -> bool {
        db_id == TEMPDB_ID
            && (is_global(object_name)
                || self.temp_tables.stored.values().any(|s| s == object_name))
    }

    /// CREATE TABLE #name: the stored name it gets in tempdb, or why not (too long 193,
    /// the session has one 2714); a `##name` is stored as it is, 2714 when tempdb has it
    /// (storage refuses it again at the create, invariant 1).
    pub(super) fn new_temporary(&self, name: &str) -> Result<String, Vec<SqlError>> {
        if is_global(name) {
            let tempdb = self.engine.instance.database(TEMPDB_ID);
            let exists = tempdb.is_some_and(|db| db.read().unwrap().table("dbo", name).is_some());
            return match exists {
                true => Err(vec![msg(2714, &[&name])]),
                false => Ok(name.to_string()),
            };
        }
        if name.chars().count() > MAX_NAME_CHARS {
            return Err(vec![msg(193, &[&name, &MAX_NAME_CHARS])]);
        }
        if self.temp_tables.stored.contains_key(&name.to_lowercase()) {
            return Err(vec![msg(2714, &[&name])]);
        }
        Ok(stored_name(name, self.engine.temp_counter.next()))
    }

    /// Records a temporary table made (`new_temporary`'s stored name; its object id and
    /// creation time identify a global one at the session's end).
    pub(super) fn temporary_created(&mut self, name: &str, stored: String, id: (u32, i64)) {
        match is_global(name) {
            true => self.temp_tables.global.push((stored, id.0, id.1)),
            false => _ = self.temp_tables.stored.insert(name.to_lowercase(), stored),
        }
    }

    /// Forgets a temporary table dropped by its stored name; inside a transaction, until
    /// it ends (invariant 4).
    pub(super) fn temporary_dropped(&mut self, stored: &str) {
        let in_xact = self.trancount > 0;
        let t = &mut self.temp_tables;
        let gone: Vec<(String, String)> = t
            .stored
            .iter()
            .filter(|(_, s)| *s == stored)
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect();
        t.stored.retain(|_, s| s != stored);
        if in_xact {
            t.dropped_in_xact.extend(gone);
        }
    }

    /// The session's transaction ended (invariant 4): names of tables tempdb no longer
    /// has go, and a rollback names again the tables it brought back.
    pub(super) fn temporary_xact_ended(&mut self, committed: bool) {
        let dropped = std::mem::take(&mut self.temp_tables.dropped_in_xact);
        if dropped.is_empty() && self.temp_tables.stored.is_empty() {
            return;
        }
        let Some(tempdb) = self.engine.instance.database(TEMPDB_ID) else {
            return;
        };
        let db = tempdb.read().unwrap();
        self.temp_tables
            .stored
            .retain(|_, s| db.table("dbo", s).is_some());
        if committed {
            return;
        }
        for (name, stored) in dropped {
            if db.table("dbo", &stored).is_some() {
                self.temp_tables.stored.entry(name).or_insert(stored);
            }
        }
    }

    /// The session's #tables' names now (`drop_temporary_tables_since`).
    pub(super) fn temporary_names(&self) -> Vec<String> {
        self.temp_tables.stored.keys().cloned().collect()
    }

    /// Drops the session's #tables made since `before` (their names then): a procedure's,
    /// at its end (procedure_calls.rs invariant 2), through DROP TABLE, so one made
    /// inside the session's transaction goes with it; a failure goes to the error log.
    pub(super) fn drop_temporary_tables_since(&mut self, before: &[String]) {
        let made: Vec<String> = self
            .temp_tables
            .stored
            .keys()
            .filter(|k| !before.contains(k))
            .cloned()
            .collect();
        for name in made {
            if let Err(errors) = self.drop_tables(false, &[ObjectName::simple(&name)]) {
                for e in errors {
                    let spid = format!("spid{}", self.spid);
                    self.engine.instance.errorlog.write(&spid, &e.text);
                }
            }
        }
    }

    /// Drops every temporary table of the session (its end, a connection reset), errors
    /// to the error log (invariant 3).
    pub(super) fn drop_temporary_tables(&mut self) {
        let stored: Vec<String> = self.temp_tables.stored.drain().map(|(_, s)| s).collect();
        self.drop_tempdb_tables(stored, "temporary table");
        for (name, id, created_us) in std::mem::take(&mut self.temp_tables.global) {
            self.drop_global_temporary(&name, id, created_us);
        }
    }

    /// Whether tempdb's table `name` is still the one with object id `id` made at
    /// `created_us`.
    fn is_same_global(&self, name: &str, id: u32, created_us: i64) -> bool {
        let Some(tempdb) = self.engine.instance.database(TEMPDB_ID) else {
            return false;
        };
        let db = tempdb.read().unwrap();
        db.table("dbo", name)
            .is_some_and(|t| t.object_id == id && t.created_us == created_us)
    }

    /// The creator's end of global temporary table `name` (the module's rule): Sch-M on
    /// it, waited for with no limit and no cancel, then the drop if tempdb still has that
    /// very table; errors to the error log (invariant 3).
    fn drop_global_temporary(&self, name: &str, id: u32, created_us: i64) {
        if !self.is_same_global(name, id, created_us) {
            return;
        }
        let locks = self.engine.instance.locks.clone();
        let mut locker = Locker::new(locks, self.spid, Arc::new(AtomicBool::new(false)));
        let table = Resource::Object {
            db: TEMPDB_ID,
            object: id,
        };
        let failed = match locker.lock(table, LockMode::SchM) {
            Err(e) => Some(format!("{e:?}")),
            Ok(()) if !self.is_same_global(name, id, created_us) => None,
            Ok(()) => self.drop_tempdb_table(id).err(),
        };
        locker.release_all();
        if let Some(e) = failed {
            let text = format!("Could not drop global temporary table '{name}': {e}");
            let spid = format!("spid{}", self.spid);
            self.engine.instance.errorlog.write(&spid, &text);
        }
    }

    /// Drops table `id` of tempdb at once, its index uses forgotten.
    fn drop_tempdb_table(&self, id: u32) -> Result<(), String> {
        let tempdb = self
            .engine
            .instance
            .database(TEMPDB_ID)
            .ok_or("no tempdb")?;
        self.forget_index_usage(TEMPDB_ID, Some(id), None);
        tempdb.drop_table(id, None).map_err(|e| e.to_string())
    }

    /// Drops tables of tempdb by their stored names (`what` they are, for the error
    /// log, where a failure goes).
    pub(super) fn drop_tempdb_tables(&self, stored: Vec<String>, what: &str) {
        if stored.is_empty() {
            return;
        }
        let Some(tempdb) = self.engine.instance.database(TEMPDB_ID) else {
            return;
        };
        for s in stored {
            let id = tempdb.read().unwrap().table("dbo", &s).map(|t| t.object_id);
            let Some(id) = id else { continue };
            self.forget_index_usage(TEMPDB_ID, Some(id), None);
            if let Err(e) = tempdb.drop_table(id, None) {
                let text = format!("Could not drop {what} '{s}': {e}");
                self.engine
                    .instance
                    .errorlog
                    .write(&format!("spid{}", self.spid), &text);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_name_is_128_characters_ending_in_its_number() {
        let s = stored_name("#t", 0x2a);
        assert_eq!(s.chars().count(), STORED_CHARS);
        assert!(s.starts_with("#t___"));
        assert!(s.ends_with("_00000000002A"));
        let longest = format!("#{}", "a".repeat(MAX_NAME_CHARS - 1));
        assert_eq!(stored_name(&longest, 1).chars().count(), STORED_CHARS);
    }
}
