//! Local temporary tables (`#name`), SQL Server's way: a table in tempdb that only the
//! session that created it sees, by its `#name`, whatever its current database, and that
//! goes when the session ends (or its connection is reset for a pool). In tempdb the table
//! is stored under its name padded with underscores to 116 characters and followed by a
//! 12-digit hexadecimal number from the instance's counter, 128 in all, which is how
//! tempdb.sys.tables lists it; so two sessions may each have a `#t`.
//!
//! Invariants:
//! 1. A session's `#name` resolves only to a table it created and has not dropped
//!    (`TempTables`), and never to a table of another session or of another database.
//! 2. A temporary table's stored name is unique in tempdb: the counter is the instance's
//!    and only grows.
//! 3. A session's temporary tables are dropped when it ends or is reset; a failure to drop
//!    one goes to the error log, and tempdb is made anew at the next start anyway.
//! 4. CREATE and DROP TABLE #name inside a transaction are the transaction's (storage's
//!    ddl.rs): when it ends, the session's names follow tempdb (`temporary_xact_ended`):
//!    a table its ROLLBACK took back is forgotten, one it brought back is named again.
//!
//! Not built: global temporary tables (`##name`, refused with 40517), temporary stored
//! procedures, and the end of a temporary table at the end of the procedure that made it
//! (there are no procedures yet).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use extentdb_storage::instance::TEMPDB_ID;

use super::lower::not_yet;
use super::Session;
use crate::ast::ObjectName;
use crate::messages::{msg, SqlError};

/// The longest `#name`, the `#` included (Msg 193): the stored name adds the padding and
/// the 12-digit number.
pub const MAX_NAME_CHARS: usize = 116;
/// A stored name's length (SQL Server's sysname).
const STORED_CHARS: usize = 128;

/// Whether an object name is a temporary table's.
pub fn is_temporary(name: &str) -> bool {
    name.starts_with('#')
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
}

/// The stored name of `#name` with number `n`.
fn stored_name(name: &str, n: u64) -> String {
    let suffix = format!("{n:012X}");
    let pad = STORED_CHARS - suffix.len() - name.chars().count();
    format!("{name}{}{suffix}", "_".repeat(pad))
}

impl Session {
    /// Where a name points when it is a temporary table's: `tempdb.dbo.<stored name>`
    /// for a `#name` the session created, `tempdb.dbo.#name` (found nowhere) otherwise;
    /// None for any other name.
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
    /// temporary tables (it may use it without any permission, as its creator).
    pub(super) fn owns_temporary(&self, db_id: u16, object_name: &str) -> bool {
        db_id == TEMPDB_ID && self.temp_tables.stored.values().any(|s| s == object_name)
    }

    /// CREATE TABLE #name: the stored name it gets in tempdb, or why not (`##name` 40517,
    /// too long 193, the session has one 2714).
    pub(super) fn new_temporary(&self, name: &str) -> Result<String, Vec<SqlError>> {
        if name.starts_with("##") {
            return Err(vec![not_yet("global temporary tables (##name)")]);
        }
        if name.chars().count() > MAX_NAME_CHARS {
            return Err(vec![msg(193, &[&name, &MAX_NAME_CHARS])]);
        }
        if self.temp_tables.stored.contains_key(&name.to_lowercase()) {
            return Err(vec![msg(2714, &[&name])]);
        }
        Ok(stored_name(name, self.engine.temp_counter.next()))
    }

    /// Records a temporary table made (`new_temporary`'s stored name).
    pub(super) fn temporary_created(&mut self, name: &str, stored: String) {
        self.temp_tables.stored.insert(name.to_lowercase(), stored);
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

    /// Drops every temporary table of the session (its end, a connection reset), errors
    /// to the error log (invariant 3).
    pub(super) fn drop_temporary_tables(&mut self) {
        let stored: Vec<String> = self.temp_tables.stored.drain().map(|(_, s)| s).collect();
        self.drop_tempdb_tables(stored, "temporary table");
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
