//! CREATE and DROP TABLE inside a transaction, as SQL Server makes them: the transaction's
//! ROLLBACK (or recovery, when a crash leaves it open) takes back the tables it created and
//! brings back the ones it dropped, with their rows.
//!
//! The catalog is saved outside the log (a synced blob, the boot page its commit point:
//! database.rs), so a transaction's table DDL is a mark on the table's catalog entry,
//! `PendingDdl { xact, created, dropped }`, saved with the change. A table created inside
//! `xact` exists from then on (the creator's session holds its Sch-M lock until the
//! transaction ends, so no other session uses it); a table dropped inside `xact` stays
//! whole until `xact` ends, hidden from the catalog views (`live_tables`) and from the
//! dropping session's name lookups (crates/sql), other sessions waiting for its Sch-M lock. Then the transaction's marks are settled (`settle_ddl`): committed, the
//! tables it dropped go and its creations are kept; rolled back, the tables it created go
//! and its drops are undone. A table both created and dropped inside it goes either way.
//!
//! Invariants:
//! 1. A transaction that marks a table has logged its BEGIN first (`ensure_begun`), so it is
//!    active in the transaction table, recovery's analysis meets it, and it logs COMMIT or
//!    ABORT when it ends.
//! 2. Marks are settled holding the database exclusively, in the same hold as the end of
//!    their transaction: commit appends COMMIT, flushes it and settles before any
//!    checkpoint can run (`SharedDatabase::commit`); rollback undoes the rows, then ends the
//!    transaction (ABORT) and settles in one hold. So no checkpoint ever sees a mark whose
//!    transaction has ended, and the log a checkpoint keeps (from the oldest active
//!    transaction's floor) holds the BEGIN and, if it was logged, the COMMIT of every
//!    transaction the catalog still marks.
//! 3. Recovery settles every mark after undo and before its checkpoint (`settle_recovered`):
//!    committed if analysis met the transaction's COMMIT, rolled back otherwise (a loser,
//!    or a transaction whose BEGIN never became durable). By invariant 2 a committed
//!    transaction's COMMIT is never before the log recovery reads.
//! 4. A transaction settles only its own marks, and a table carries at most one
//!    transaction's mark: the marking session holds the table's Sch-M lock until its
//!    transaction ends (asserted in `mark`).
//! 5. A name hidden by a pending DROP is not taken again before the drop settles
//!    (`StorageError::DropPending`): the two tables would otherwise share a name when the
//!    drop is rolled back.
//! 6. A clustered index rebuild (index.rs invariant 6) fills a new tree in an entry of its
//!    own, marked created by the rebuild's transaction and naming the table it rebuilds
//!    (`PendingDdl::rebuilds`); the table's entry keeps its tree and its object id (which
//!    its indexes, constraints and permissions name) throughout. Only settling exchanges
//!    the trees: committed, the table's entry takes the new tree and the rebuild's entry
//!    the old one, marked dropped in the same catalog save, then dropped
//!    (`exchange_rebuilt_trees`); rolled back (or a loser at recovery), the rebuild's entry
//!    goes with its new tree. So undo never meets a tree that changed hands: a loser's
//!    inserts are undone in its own entry, and a committed rebuild's are never undone.
//! 7. Settling drops the tables that go children first: a table goes only after every
//!    other going table whose FOREIGN KEY references it (`drop_in_reference_order`), as
//!    `drop_table` refuses a table still referenced (constraint.rs invariant 4). A
//!    transaction that created a table and then one referencing it rolls back whole.
//!
//! Not here: TRUNCATE TABLE and ALTER TABLE inside a transaction (the SQL layer refuses
//! them there), and the same DDL for other catalog objects (principals, files).

use std::collections::BTreeSet;

use extentdb_format::catalog::{PendingDdl, TableEntry};
use extentdb_format::log_record::XactId;

use crate::{Database, StorageError};

impl Database {
    /// CREATE TABLE, inside transaction `xact` when given (marked created, invariant 1).
    pub(crate) fn create_table_in(
        &mut self,
        mut entry: TableEntry,
        xact: Option<XactId>,
    ) -> Result<u32, StorageError> {
        if self.drop_pending(&entry.schema_name, &entry.name) {
            return Err(StorageError::DropPending(entry.name));
        }
        if let Some(x) = xact {
            self.ensure_begun(x)?;
            entry.pending_ddl = Some(PendingDdl {
                xact: x,
                created: true,
                dropped: false,
                rebuilds: None,
            });
        }
        let id = self.create_table(entry)?;
        if let Some(x) = xact {
            self.note_marked(x);
        }
        Ok(id)
    }

    /// DROP TABLE: at once outside a transaction; inside `xact`, marked dropped until it
    /// ends (the rows stay for a rollback to bring back).
    pub(crate) fn drop_table_in(
        &mut self,
        object_id: u32,
        xact: Option<XactId>,
    ) -> Result<(), StorageError> {
        let Some(x) = xact else {
            return self.drop_table(object_id);
        };
        self.check_writable()?;
        let t = self.table_or_err(object_id)?;
        if t.pending_ddl.is_some_and(|p| p.dropped) {
            return Err(StorageError::TableNotFound(object_id));
        }
        self.ensure_begun(x)?;
        self.mark(object_id, x, |p| p.dropped = true)?;
        self.note_marked(x);
        Ok(())
    }

    /// A clustered index rebuild's new tree `entry` of table `table` made in begun
    /// transaction `xact`, marked created and naming the table (invariant 6).
    pub(crate) fn create_rebuild_entry(
        &mut self,
        mut entry: TableEntry,
        xact: XactId,
        table: u32,
    ) -> Result<u32, StorageError> {
        entry.pending_ddl = Some(PendingDdl {
            xact,
            created: true,
            dropped: false,
            rebuilds: Some(table),
        });
        let id = self.create_table(entry)?;
        self.note_marked(xact);
        Ok(id)
    }

    /// Tells `xact`'s state it has a mark, so its end asks no catalog scan whether to settle.
    fn note_marked(&self, xact: XactId) {
        if let Some(x) = self.data.xacts.lock().active.get_mut(&xact) {
            x.marked_ddl = true;
        }
    }

    /// Sets `object_id`'s mark for `xact` (invariant 4).
    fn mark(
        &mut self,
        object_id: u32,
        xact: XactId,
        set: impl FnOnce(&mut PendingDdl),
    ) -> Result<(), StorageError> {
        self.change_catalog(|c| {
            let t = c
                .tables
                .iter_mut()
                .find(|t| t.object_id == object_id)
                .ok_or(StorageError::TableNotFound(object_id))?;
            let mut p = t.pending_ddl.unwrap_or(PendingDdl {
                xact,
                created: false,
                dropped: false,
                rebuilds: None,
            });
            assert_eq!(
                p.xact, xact,
                "table {object_id} marked by two transactions (ddl.rs invariant 4)"
            );
            set(&mut p);
            t.pending_ddl = Some(p);
            Ok(())
        })
    }

    /// True while `schema.name` names a table whose drop has not settled.
    fn drop_pending(&self, schema: &str, name: &str) -> bool {
        self.catalog.tables.iter().any(|t| {
            t.pending_ddl.is_some_and(|p| p.dropped)
                && t.name.eq_ignore_ascii_case(name)
                && t.schema_name.eq_ignore_ascii_case(schema)
        })
    }

    /// True if active transaction `xact` has marked a table (its end settles them:
    /// invariant 2); asked by every commit and rollback, so read from its state, not the
    /// catalog.
    pub fn has_pending_ddl(&self, xact: XactId) -> bool {
        let marked = self
            .data
            .xacts
            .lock()
            .active
            .get(&xact)
            .is_some_and(|x| x.marked_ddl);
        debug_assert_eq!(
            marked,
            self.catalog
                .tables
                .iter()
                .any(|t| t.pending_ddl.is_some_and(|p| p.xact == xact)),
            "transaction {xact}'s state and the catalog's marks disagree"
        );
        marked
    }

    /// The tables that exist for name lookups and the catalog views: all but those whose
    /// drop is pending (and the index entries and rebuilds' new trees, which are no tables).
    pub fn live_tables(&self) -> impl Iterator<Item = &TableEntry> {
        self.catalog.tables.iter().filter(|t| {
            t.index_of.is_none()
                && t.rebuilt_table().is_none()
                && !t.pending_ddl.is_some_and(|p| p.dropped)
        })
    }

    /// Settles `xact`'s marks as its end decided (invariant 2): the tables that go are
    /// dropped, the others lose the mark.
    pub(crate) fn settle_ddl(&mut self, xact: XactId, committed: bool) -> Result<(), StorageError> {
        assert!(
            !self.is_active(xact),
            "marks of transaction {xact} settled before it ended (ddl.rs invariant 2)"
        );
        if committed {
            self.exchange_rebuilt_trees(xact)?;
        }
        let marked: Vec<(u32, PendingDdl)> = self
            .catalog
            .tables
            .iter()
            .filter_map(|t| Some((t.object_id, t.pending_ddl?)))
            .filter(|(_, p)| p.xact == xact)
            .collect();
        let goes = |p: &PendingDdl| match committed {
            true => p.dropped,
            false => p.created,
        };
        let going: Vec<u32> = marked
            .iter()
            .filter(|(_, p)| goes(p))
            .map(|(id, _)| *id)
            .collect();
        self.drop_in_reference_order(going)?;
        if marked.iter().any(|(_, p)| !goes(p)) {
            self.change_catalog(|c| {
                for t in c.tables.iter_mut() {
                    if t.pending_ddl.is_some_and(|p| p.xact == xact) {
                        t.pending_ddl = None;
                    }
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Drops `going`, each table after every other going table whose FOREIGN KEY references
    /// it (invariant 7), so a rollback of a transaction that created a parent and then its
    /// child drops the child first. A reference to a table that stays (or a cycle) leaves
    /// `drop_table`'s ReferencedByForeignKey to say so.
    fn drop_in_reference_order(&mut self, mut going: Vec<u32>) -> Result<(), StorageError> {
        while !going.is_empty() {
            let referenced = |c: &extentdb_format::catalog::Catalog, id: u32| {
                going.iter().any(|&other| {
                    other != id
                        && c.tables.iter().any(|t| {
                            t.object_id == other
                                && t.foreign_keys.iter().any(|k| k.referenced_object_id == id)
                        })
                })
            };
            let at = going
                .iter()
                .position(|&id| !referenced(&self.catalog, id))
                .unwrap_or(0);
            let id = going.remove(at);
            self.drop_table(id)?;
        }
        Ok(())
    }

    /// Invariant 6: each clustered index rebuild of committed `xact` gives its new tree to
    /// its table, in one catalog save that also turns the rebuild's entry, which then holds
    /// the table's old tree, into a DROP of `xact`: it goes with the transaction's other
    /// marks, and a crash before it has gone leaves it for recovery's settling to drop.
    fn exchange_rebuilt_trees(&mut self, xact: XactId) -> Result<(), StorageError> {
        let rebuilds: Vec<(u32, u32)> = self
            .catalog
            .tables
            .iter()
            .filter(|t| t.pending_ddl.is_some_and(|p| p.xact == xact))
            .filter_map(|t| Some((t.object_id, t.rebuilt_table()?)))
            .collect();
        if rebuilds.is_empty() {
            return Ok(());
        }
        self.change_catalog(|c| {
            for &(entry, table) in &rebuilds {
                let at = |id: u32| c.tables.iter().position(|t| t.object_id == id);
                let (Some(n), Some(b)) = (at(entry), at(table)) else {
                    return Err(StorageError::TableNotFound(table));
                };
                let tree = |t: &TableEntry| (t.allocation_unit_id, t.root_page);
                let (new, old) = (tree(&c.tables[n]), tree(&c.tables[b]));
                (c.tables[b].allocation_unit_id, c.tables[b].root_page) = new;
                (c.tables[n].allocation_unit_id, c.tables[n].root_page) = old;
                // index.rs invariant 10: the rebuilt tree enables the table.
                c.tables[b].is_disabled = false;
                c.tables[n].pending_ddl = Some(PendingDdl {
                    xact,
                    created: false,
                    dropped: true,
                    rebuilds: None,
                });
            }
            Ok(())
        })
    }

    /// The transactions the catalog's marks name (recovery watches for their COMMIT).
    pub(crate) fn marking_xacts(&self) -> BTreeSet<XactId> {
        self.catalog
            .tables
            .iter()
            .filter_map(|t| Some(t.pending_ddl?.xact))
            .collect()
    }

    /// Recovery's settling of every mark (invariant 3): `committed` holds the marking
    /// transactions whose COMMIT analysis met.
    pub(crate) fn settle_recovered(
        &mut self,
        committed: &BTreeSet<XactId>,
    ) -> Result<(), StorageError> {
        for x in self.marking_xacts() {
            self.settle_ddl(x, committed.contains(&x))?;
        }
        Ok(())
    }
}
