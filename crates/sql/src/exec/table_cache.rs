//! A session's resolved tables: the catalog entry, column types and column layouts a name
//! resolved to, kept with the number of the catalog state they were read from
//! (`Database::catalog_version`), so a statement run again resolves its table without
//! copying the entry and decoding its columns' types and layouts each time.
//!
//! Invariants:
//! 1. An entry is used only while its database's catalog is in the very state it was read
//!    from: `catalog_version` numbers are unique across every database of the process and
//!    every state of each catalog (each save, put-back or replacement takes a new one), so
//!    DDL (CREATE, DROP, TRUNCATE, ALTER TABLE), a database reopened, restored, renamed or
//!    dropped and made again all miss, and the name is resolved afresh.
//! 2. The version is read with the database held (shared), the same hold the caller's
//!    lookup in the catalog would take, so an entry is never older than that lookup's.
//! 3. Memory is bounded per session: at most `MAX_TABLES` entries (the oldest makes room);
//!    an entry holds no database, only the catalog entry's copy it shares with the
//!    statements using it.
//!
//! It does not keep anything about rows, pages or permissions: those are read at each run.

use std::sync::Arc;

use extentdb_format::catalog::TableEntry;

use extentdb_format::record::ColumnLayout;

use crate::types::SqlType;

/// Tables kept per session (invariant 3).
pub(super) const MAX_TABLES: usize = 32;

/// What a name resolved to under one catalog state.
#[derive(Clone)]
pub(super) struct Resolved {
    pub entry: Arc<TableEntry>,
    pub types: Arc<[SqlType]>,
    /// How each stored column of `entry` is stored (storage's `layouts`).
    pub layouts: Arc<[ColumnLayout]>,
    /// The computed columns' parsed definitions (computed_columns.rs); None without any.
    pub computed: Option<Arc<super::computed_columns::ComputedPlan>>,
    pub db_name: Arc<str>,
}

struct Kept {
    db_id: u16,
    schema: String,
    name: String,
    catalog_version: u64,
    resolved: Resolved,
}

/// The session's resolved tables (module docs).
#[derive(Default)]
pub(super) struct TableCache {
    kept: Vec<Kept>,
    /// The slot the next entry takes once `kept` is full (oldest first).
    next: usize,
}

impl TableCache {
    /// `schema.name` of database `db_id` as resolved under catalog state
    /// `catalog_version`, if this session resolved it under that very state.
    pub fn get(
        &self,
        db_id: u16,
        schema: &str,
        name: &str,
        catalog_version: u64,
    ) -> Option<&Resolved> {
        self.kept
            .iter()
            .find(|k| {
                k.catalog_version == catalog_version
                    && k.db_id == db_id
                    && k.name.eq_ignore_ascii_case(name)
                    && k.schema.eq_ignore_ascii_case(schema)
            })
            .map(|k| &k.resolved)
    }

    /// Keeps what `schema.name` resolved to under `catalog_version`; an entry of the same
    /// name under an older state is replaced.
    pub fn keep(
        &mut self,
        db_id: u16,
        schema: &str,
        name: &str,
        catalog_version: u64,
        resolved: Resolved,
    ) {
        let kept = Kept {
            db_id,
            schema: schema.to_string(),
            name: name.to_string(),
            catalog_version,
            resolved,
        };
        let same = self.kept.iter().position(|k| {
            k.db_id == db_id
                && k.name.eq_ignore_ascii_case(name)
                && k.schema.eq_ignore_ascii_case(schema)
        });
        match same {
            Some(i) => self.kept[i] = kept,
            None if self.kept.len() < MAX_TABLES => self.kept.push(kept),
            None => {
                self.kept[self.next] = kept;
                self.next = (self.next + 1) % MAX_TABLES;
            }
        }
        assert!(self.kept.len() <= MAX_TABLES, "invariant 3");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(name: &str) -> Resolved {
        Resolved {
            entry: Arc::new(TableEntry {
                object_id: 7,
                schema_name: "dbo".into(),
                name: name.into(),
                created_us: 0,
                data_space_id: 1,
                allocation_unit_id: 1,
                index_id: 0,
                root_page: extentdb_format::PageId::NULL,
                primary_key: None,
                columns: Vec::new(),
                identity_last: Default::default(),
                lock_escalation: Default::default(),
                pending_ddl: None,
                index_of: None,
                checks: Vec::new(),
                foreign_keys: Vec::new(),
                is_disabled: false,
            }),
            types: Arc::from(Vec::new()),
            layouts: Arc::from(Vec::new()),
            computed: None,
            db_name: Arc::from("d"),
        }
    }

    /// An entry answers only for its database, name (any case) and catalog state.
    #[test]
    fn entry_answers_only_for_its_catalog_state() {
        let mut c = TableCache::default();
        c.keep(5, "dbo", "T", 10, resolved("T"));
        assert!(c.get(5, "DBO", "t", 10).is_some());
        assert!(c.get(5, "dbo", "t", 11).is_none(), "another catalog state");
        assert!(c.get(6, "dbo", "t", 10).is_none(), "another database");
        assert!(c.get(5, "dbo", "u", 10).is_none(), "another name");
        c.keep(5, "dbo", "t", 11, resolved("t"));
        assert!(c.get(5, "dbo", "t", 10).is_none(), "replaced");
        assert_eq!(c.kept.len(), 1);
    }

    /// Past `MAX_TABLES` names the oldest entry makes room (invariant 3).
    #[test]
    fn bounded() {
        let mut c = TableCache::default();
        for i in 0..MAX_TABLES + 3 {
            c.keep(5, "dbo", &format!("t{i}"), 1, resolved("t"));
        }
        assert_eq!(c.kept.len(), MAX_TABLES);
        assert!(c.get(5, "dbo", "t0", 1).is_none());
        assert!(c
            .get(5, "dbo", &format!("t{}", MAX_TABLES + 2), 1)
            .is_some());
    }
}
