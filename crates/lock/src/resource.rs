//! What can be locked: SQL Server's lock resources, named and described as
//! sys.dm_tran_locks shows them (resource_type, resource_description).
//!
//! A row lock names its table too (`object`): escalation counts a statement's locks per
//! table, and the intent locks on the table come from it. SQL Server's KEY resource is the
//! hobt and a 6-byte hash of the key; `key_hash` makes that hash here (not SQL Server's
//! function: two keys sharing a hash lock together, as in SQL Server, which is safe).

/// A lockable resource. Ids are database-scoped except `Database` itself.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Resource {
    Database {
        db: u16,
    },
    File {
        db: u16,
        file: u16,
    },
    Object {
        db: u16,
        object: u32,
    },
    Hobt {
        db: u16,
        hobt: u64,
    },
    AllocationUnit {
        db: u16,
        unit: u64,
    },
    Metadata {
        db: u16,
        class: MetadataClass,
        id: u32,
    },
    Extent {
        db: u16,
        file: u16,
        page: u32,
    },
    Page {
        db: u16,
        object: u32,
        file: u16,
        page: u32,
    },
    Rid {
        db: u16,
        object: u32,
        file: u16,
        page: u32,
        slot: u16,
    },
    Key {
        db: u16,
        object: u32,
        hobt: u64,
        hash: u64,
    },
}

/// The kind of catalog entry a METADATA lock protects.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum MetadataClass {
    Schema,
    Principal,
    Database,
}

impl Resource {
    /// sys.dm_tran_locks.resource_type.
    pub fn type_name(&self) -> &'static str {
        match self {
            Resource::Database { .. } => "DATABASE",
            Resource::File { .. } => "FILE",
            Resource::Object { .. } => "OBJECT",
            Resource::Hobt { .. } => "HOBT",
            Resource::AllocationUnit { .. } => "ALLOCATION_UNIT",
            Resource::Metadata { .. } => "METADATA",
            Resource::Extent { .. } => "EXTENT",
            Resource::Page { .. } => "PAGE",
            Resource::Rid { .. } => "RID",
            Resource::Key { .. } => "KEY",
        }
    }

    /// sys.dm_tran_locks.resource_database_id.
    pub fn database_id(&self) -> u16 {
        match *self {
            Resource::Database { db }
            | Resource::File { db, .. }
            | Resource::Object { db, .. }
            | Resource::Hobt { db, .. }
            | Resource::AllocationUnit { db, .. }
            | Resource::Metadata { db, .. }
            | Resource::Extent { db, .. }
            | Resource::Page { db, .. }
            | Resource::Rid { db, .. }
            | Resource::Key { db, .. } => db,
        }
    }

    /// The table a row or page lock lies in (what escalation counts), if any.
    pub fn object(&self) -> Option<u32> {
        match *self {
            Resource::Page { object, .. }
            | Resource::Rid { object, .. }
            | Resource::Key { object, .. } => Some(object),
            _ => None,
        }
    }

    /// sys.dm_tran_locks.resource_description: `1:153:0` for a RID, `1:153` for a page or
    /// an extent, `(8194443284a0)` for a key, the file id for a file, and for a metadata
    /// lock what it protects.
    pub fn description(&self) -> String {
        match *self {
            Resource::Rid {
                file, page, slot, ..
            } => format!("{file}:{page}:{slot}"),
            Resource::Page { file, page, .. } | Resource::Extent { file, page, .. } => {
                format!("{file}:{page}")
            }
            Resource::Key { hash, .. } => format!("({:012x})", hash & KEY_HASH_MASK),
            Resource::File { file, .. } => file.to_string(),
            Resource::Metadata { class, id, .. } => {
                let what = match class {
                    MetadataClass::Schema => "schema_id",
                    MetadataClass::Principal => "principal_id",
                    MetadataClass::Database => "database_id",
                };
                format!("{what} = {id}")
            }
            _ => String::new(),
        }
    }

    /// sys.dm_tran_locks.resource_associated_entity_id: the object for OBJECT, the hobt for
    /// HOBT and KEY, the allocation unit for ALLOCATION_UNIT, 0 otherwise.
    pub fn associated_entity_id(&self) -> u64 {
        match *self {
            Resource::Object { object, .. } => object as u64,
            Resource::Hobt { hobt, .. } | Resource::Key { hobt, .. } => hobt,
            Resource::AllocationUnit { unit, .. } => unit,
            Resource::Page { object, .. } | Resource::Rid { object, .. } => object as u64,
            _ => 0,
        }
    }
}

/// A KEY lock's hash has 48 bits, as SQL Server's 6-byte key hash.
pub const KEY_HASH_MASK: u64 = (1 << 48) - 1;

/// The 48-bit hash a KEY lock names a key by (FNV-1a of the key's bytes, folded).
pub fn key_hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h ^ (h >> 48)) & KEY_HASH_MASK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_as_sys_dm_tran_locks_shows_them() {
        let rid = Resource::Rid {
            db: 5,
            object: 7,
            file: 1,
            page: 153,
            slot: 0,
        };
        assert_eq!(
            (rid.type_name(), rid.description().as_str()),
            ("RID", "1:153:0")
        );
        let page = Resource::Page {
            db: 5,
            object: 7,
            file: 3,
            page: 9,
        };
        assert_eq!(page.description(), "3:9");
        let key = Resource::Key {
            db: 5,
            object: 7,
            hobt: 72057594038321152,
            hash: key_hash(b"k"),
        };
        let d = key.description();
        assert!(
            d.len() == 14 && d.starts_with('(') && d.ends_with(')'),
            "{d}"
        );
        assert_eq!(key.associated_entity_id(), 72057594038321152);
        assert_eq!(Resource::Database { db: 5 }.description(), "");
    }

    #[test]
    fn key_hashes_have_48_bits_and_tell_keys_apart() {
        let hashes: std::collections::HashSet<u64> =
            (0u32..10_000).map(|i| key_hash(&i.to_le_bytes())).collect();
        assert_eq!(hashes.len(), 10_000);
        assert!(hashes.iter().all(|h| *h <= KEY_HASH_MASK));
    }
}
