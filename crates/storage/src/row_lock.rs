//! The lock resource that names a row (docs/ARCHITECTURE.md, "Locks inside a database"):
//! in a clustered index the KEY (the index's allocation unit as the hobt, and the key's
//! hash, which agrees with how keys compare: `key::hash_key`), in a heap the RID (file,
//! page, slot). A clustered row keeps its name when a split moves it; a heap row keeps its
//! slot unless an update changes its length, which deletes it (the old RID stays a ghost,
//! locked by the updater) and inserts it at a new RID the updater locks too.

use extentdb_format::catalog::TableEntry;
use extentdb_lock::Resource;

use crate::btree::KeyInfo;
use crate::table::Rid;
use crate::StorageError;

/// Names the rows of one table for the lock manager.
pub struct RowNames {
    db: u16,
    object: u32,
    hobt: u64,
    /// The clustered key's columns; None for a heap.
    key: Option<KeyInfo>,
}

impl RowNames {
    pub fn of(db: u16, t: &TableEntry) -> RowNames {
        RowNames {
            db,
            object: t.object_id,
            hobt: t.allocation_unit_id,
            key: (t.index_id == 1).then(|| KeyInfo::of(t)),
        }
    }

    /// The resource of the row stored as `rec` at `rid`.
    pub fn resource(&self, rid: Rid, rec: &[u8]) -> Result<Resource, StorageError> {
        Ok(match &self.key {
            Some(k) => Resource::Key {
                db: self.db,
                object: self.object,
                hobt: self.hobt,
                hash: extentdb_format::key::hash_key(&k.types, &k.key(rec)?)
                    & extentdb_lock::KEY_HASH_MASK,
            },
            None => Resource::Rid {
                db: self.db,
                object: self.object,
                file: rid.0.file.0,
                page: rid.0.page.0,
                slot: rid.1,
            },
        })
    }

    /// The end of a clustered index, as a key-range lock names the gap after its last key
    /// (SQL Server's KEY resource `(ffffffffffff)`); None for a heap. A key whose hash is
    /// all ones shares it, as two keys sharing a hash share a lock: safe, never wrong.
    pub fn end_of_index(&self) -> Option<Resource> {
        self.key.as_ref().map(|_| Resource::Key {
            db: self.db,
            object: self.object,
            hobt: self.hobt,
            hash: extentdb_lock::KEY_HASH_MASK,
        })
    }

    /// Whether rows are named by key (a clustered index), not by RID.
    pub fn by_key(&self) -> bool {
        self.key.is_some()
    }

    /// The table's OBJECT resource.
    pub fn table(&self) -> Resource {
        Resource::Object {
            db: self.db,
            object: self.object,
        }
    }
}

impl crate::Database {
    /// ALTER TABLE ... SET (LOCK_ESCALATION = ...): kept in the catalog, saved at once.
    pub fn set_lock_escalation(
        &mut self,
        object_id: u32,
        value: extentdb_format::catalog::LockEscalation,
    ) -> Result<(), StorageError> {
        let Some(t) = self
            .catalog
            .tables
            .iter_mut()
            .find(|t| t.object_id == object_id)
        else {
            return Err(StorageError::TableNotFound(object_id));
        };
        if t.lock_escalation == value {
            return Ok(());
        }
        t.lock_escalation = value;
        self.save_catalog()
    }

    /// The row a scan found as `rec` at `rid`, as it is now: after a wait for its lock the
    /// row may have changed, moved (a heap row that grew) or gone. A heap row is looked
    /// for at its RID, a clustered one by its key. None when no live row is there.
    pub fn current_row(
        &self,
        object_id: u32,
        rid: Rid,
        rec: &[u8],
    ) -> Result<Option<(Rid, Vec<u8>)>, StorageError> {
        let t = self
            .table_by_id(object_id)
            .ok_or(StorageError::TableNotFound(object_id))?
            .clone();
        let found = if t.index_id == 1 {
            let ki = KeyInfo::of(&t);
            self.btree_find(&t, &ki, rec, false)
                .map(|(leaf, slot, r)| ((leaf, slot), r))
        } else {
            self.live_record(&t, rid).map(|r| (rid, r))
        };
        match found {
            Ok(row) => Ok(Some(row)),
            Err(StorageError::RowNotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}
