//! CREATE INDEX and DROP INDEX: nonclustered indexes (storage's index.rs keeps them). The
//! statement is resolved against the table here, with SQL Server's checks and messages,
//! then made under the table's Sch-M lock (locking.rs invariant 4) by storage, which
//! builds the index from the table's rows in one transaction of its own.
//!
//! Built: [UNIQUE] [NONCLUSTERED] INDEX name ON table (columns [ASC]) [INCLUDE (columns)]
//! [WITH (options)] [ON filegroup]; DROP INDEX [IF EXISTS] name ON table and the old
//! table.name form. The WITH options accepted are those whose value asks for what every
//! index here does (`BUILT_INDEX_OPTIONS`: ONLINE = OFF, PAD_INDEX = OFF, ...), in CREATE
//! INDEX and in PRIMARY KEY and UNIQUE constraints alike. Refused with 40517 until built:
//! CLUSTERED over a heap, DESC keys, filtered indexes (WHERE), every other WITH option or
//! value, INCLUDE of a MAX column, and both statements inside a transaction (a ROLLBACK
//! could not take them back).
//!
//! A heap's PRIMARY KEY NONCLUSTERED is a unique index made with its table, named as the
//! constraint (catalog invariant 11): sys.indexes calls it is_primary_key, its duplicates
//! are Msg 2627 "PRIMARY KEY", and DROP INDEX refuses it (3723).
//!
//! Invariants:
//! 1. An index's key is at most `MAX_KEY_COLUMNS` columns and `MAX_KEY_BYTES` bytes at
//!    their declared widths (Msgs 1904 and 1944), so every key fits a B-tree separator.
//! 2. The PRIMARY KEY's index, clustered or not, is not an index DROP INDEX drops (Msg
//!    3723).

use extentdb_format::catalog::{ColumnEntry, TableEntry};
use extentdb_storage::index::IndexDef;
use extentdb_storage::{SharedDatabase, StorageError};

use super::errors;
use super::lower::not_yet;
use super::tables::TableRef;
use super::Session;
use crate::ast::{
    CreateIndex, CreateTable, IndexRef, KeyConstraint, OptionValue, TableConstraint, WithOption,
};
use crate::messages::{msg, SqlError};

/// SQL Server's key columns per index (2016 and later).
const MAX_KEY_COLUMNS: usize = 32;
/// SQL Server's largest nonclustered index key, in bytes.
const MAX_KEY_BYTES: usize = 1700;

impl Session {
    /// CREATE INDEX (the module's doc).
    pub(super) fn create_index(&mut self, c: &CreateIndex) -> Result<(), Vec<SqlError>> {
        let t = self
            .find_table(&c.table)?
            .ok_or_else(|| vec![msg(1088, &[&c.table.joined()])])?;
        self.require_table_alter(&t, msg(1088, &[&c.table.joined()]))?;
        refuse_unbuilt(c, &t)?;
        self.refuse_in_transaction("CREATE INDEX")?;
        let def = {
            let d = t.db.read().unwrap();
            let data_space_id = match &c.filegroup {
                None => t.entry.data_space_id,
                Some(fg) => super::table_ddl::table_data_space(&d, Some(fg))?,
            };
            index_def(c, &t, data_space_id)?
        };
        self.schema_modification(&t)?;
        let env = self.growth_env();
        let entry =
            t.db.create_index(&def, &env, &|| self.cancelled())
                .map_err(|e| create_failed(e, c, &t))?;
        // Its statistics, made with it, built from its rows (statistics.rs invariant 3).
        let index_id = (t.db.read().unwrap().table_by_id(entry))
            .and_then(|e| e.index_of.as_ref().map(|i| i.index_id));
        match index_id {
            Some(id) => self.build_index_statistics(&c.table, id),
            None => Ok(()),
        }
    }

    /// DROP INDEX of each of `indexes` (the module's doc).
    pub(super) fn drop_indexes(
        &mut self,
        if_exists: bool,
        indexes: &[IndexRef],
    ) -> Result<(), Vec<SqlError>> {
        self.refuse_in_transaction("DROP INDEX")?;
        for ix in indexes {
            let gone = || {
                let name = format!("{}.{}", ix.table.joined(), ix.index);
                vec![msg(3701, &[&"drop", &"index", &name])]
            };
            let Some(t) = self.find_table(&ix.table)? else {
                return if_exists.then_some(()).ok_or_else(gone);
            };
            self.require_table_alter(&t, gone().remove(0))?;
            if is_primary_key_name(&t.entry, &ix.index) {
                let name = format!("{}.{}", t.two_part(), ix.index);
                return Err(vec![msg(3723, &[&name, &"PRIMARY KEY"])]);
            }
            let found =
                t.db.read()
                    .unwrap()
                    .index_by_name(t.entry.object_id, &ix.index)
                    .map(|e| e.index_of.as_ref().is_some_and(|i| i.unique_constraint));
            if found == Some(true) {
                let name = format!("{}.{}", t.two_part(), ix.index);
                return Err(vec![msg(3723, &[&name, &"UNIQUE KEY"])]);
            }
            if found.is_none() {
                match if_exists {
                    true => continue,
                    false => return Err(gone()),
                }
            }
            self.schema_modification(&t)?;
            // Checked under Sch-M, which ALTER TABLE ... ADD FOREIGN KEY takes on its parent.
            if super::foreign_keys::index_in_use(&t, &ix.index) {
                let name = format!("{}.{}", t.two_part(), ix.index);
                return Err(vec![msg(3723, &[&name, &"FOREIGN KEY"])]);
            }
            let index_id = (t.db.read().unwrap())
                .index_by_name(t.entry.object_id, &ix.index)
                .and_then(|e| e.index_of.as_ref().map(|o| o.index_id));
            match t.db.drop_index(t.entry.object_id, &ix.index) {
                Ok(()) => {
                    if let Some(i) = index_id {
                        self.forget_index_usage(t.db_id, Some(t.entry.object_id), Some(i));
                    }
                }
                Err(StorageError::IndexNotFound(_) | StorageError::TableNotFound(_)) => {
                    return Err(gone())
                }
                Err(e) => return Err(errors::map(&e, errors::Context::Other)),
            }
        }
        Ok(())
    }
}

/// Whether `name` is table `t`'s PRIMARY KEY's clustered index.
pub(super) fn is_primary_key(t: &TableEntry, name: &str) -> bool {
    t.index_id == 1 && is_primary_key_name(t, name)
}

/// Whether `name` is table `t`'s PRIMARY KEY constraint's, clustered or not.
fn is_primary_key_name(t: &TableEntry, name: &str) -> bool {
    t.primary_key
        .as_ref()
        .is_some_and(|(pk, _)| pk.eq_ignore_ascii_case(name))
}

/// The forms not built yet, refused with 40517 (Msg 1902 for a second clustered index).
fn refuse_unbuilt(c: &CreateIndex, t: &TableRef) -> Result<(), Vec<SqlError>> {
    if c.clustered == Some(true) {
        if let (1, Some((pk, _))) = (t.entry.index_id, &t.entry.primary_key) {
            return Err(vec![msg(1902, &[&"table", &t.two_part(), &pk])]);
        }
        return Err(vec![not_yet("CREATE CLUSTERED INDEX on a heap")]);
    }
    if c.filter.is_some() {
        return Err(vec![not_yet("filtered indexes (CREATE INDEX ... WHERE)")]);
    }
    if c.columns.iter().any(|k| k.descending) {
        return Err(vec![not_yet("descending index keys (DESC)")]);
    }
    refuse_unbuilt_options(&c.options, "CREATE INDEX")
}

/// Index options whose value asks for what every index here does, accepted in CREATE
/// INDEX and in PRIMARY KEY / UNIQUE constraints (SQL Server's scripts spell them out):
/// (option, value).
const BUILT_INDEX_OPTIONS: [(&str, &str); 8] = [
    ("ONLINE", "OFF"),
    ("PAD_INDEX", "OFF"),
    ("STATISTICS_NORECOMPUTE", "OFF"),
    ("IGNORE_DUP_KEY", "OFF"),
    ("ALLOW_ROW_LOCKS", "ON"),
    ("ALLOW_PAGE_LOCKS", "ON"),
    ("OPTIMIZE_FOR_SEQUENTIAL_KEY", "OFF"),
    ("DATA_COMPRESSION", "NONE"),
];

/// Refuses (40517) each index option of `statement` that is not one of
/// `BUILT_INDEX_OPTIONS` with its value.
pub(super) fn refuse_unbuilt_options(
    options: &[WithOption],
    statement: &str,
) -> Result<(), Vec<SqlError>> {
    for o in options {
        let built = BUILT_INDEX_OPTIONS.iter().any(|(name, value)| {
            o.name.eq_ignore_ascii_case(name)
                && matches!(&o.value, Some(OptionValue::Word(w)) if w.eq_ignore_ascii_case(value))
        });
        if !built {
            let what = format!("the index option {} in {statement}", o.name.to_uppercase());
            return Err(vec![not_yet(&what)]);
        }
    }
    Ok(())
}

/// CREATE INDEX resolved against table `t`: its columns by name (Msgs 1911, 1909), its
/// key's types and size (1919, invariant 1).
fn index_def(c: &CreateIndex, t: &TableRef, data_space_id: u16) -> Result<IndexDef, Vec<SqlError>> {
    // A computed column is checked as SQL Server checks it for an index: deterministic,
    // and precise in the key unless PERSISTED (computed_columns.rs invariant 4).
    let column = |name: &str, key: bool| -> Result<&ColumnEntry, Vec<SqlError>> {
        let col = t
            .entry
            .columns
            .iter()
            .find(|col| col.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| vec![msg(1911, &[&name])])?;
        super::computed_columns::check_indexable(t, col, &c.name, key)?;
        Ok(col)
    };
    let mut seen: Vec<u16> = Vec::new();
    let mut key = Vec::new();
    let mut key_bytes = 0usize;
    for k in &c.columns {
        let col = column(&k.name, true)?;
        if seen.contains(&col.column_id) {
            return Err(vec![msg(1909, &[&"index", &col.name])]);
        }
        if !is_key_type(col) {
            return Err(vec![msg(1919, &[&col.name, &t.two_part()])]);
        }
        seen.push(col.column_id);
        key.push(col.column_id);
        key_bytes += col.max_length.max(0) as usize;
    }
    if key.len() > MAX_KEY_COLUMNS {
        let n = key.len();
        return Err(vec![msg(
            1904,
            &[
                &"index",
                &c.name,
                &t.two_part(),
                &n,
                &"index",
                &MAX_KEY_COLUMNS,
            ],
        )]);
    }
    if key_bytes > MAX_KEY_BYTES {
        return Err(vec![msg(1944, &[&c.name, &key_bytes, &MAX_KEY_BYTES])]);
    }
    let mut include = Vec::new();
    for name in &c.include {
        let col = column(name, false)?;
        if seen.contains(&col.column_id) {
            return Err(vec![msg(1909, &[&"index", &col.name])]);
        }
        if col.max_length < 0 {
            return Err(vec![not_yet("INCLUDE of a MAX column")]);
        }
        seen.push(col.column_id);
        include.push(col.column_id);
    }
    Ok(IndexDef {
        table_object_id: t.entry.object_id,
        name: c.name.clone(),
        unique: c.unique,
        unique_constraint: false,
        key,
        include,
        data_space_id,
    })
}

/// Whether a column's type may be an index key: not a MAX type, text, ntext, image or xml.
fn is_key_type(c: &ColumnEntry) -> bool {
    c.max_length >= 0 && !matches!(c.system_type_id, 34 | 35 | 99 | 241)
}

/// CREATE INDEX's failure as SQL Server reports it: 1505 for duplicate keys, 1913 for a
/// name the table's indexes already have.
fn create_failed(e: StorageError, c: &CreateIndex, t: &TableRef) -> Vec<SqlError> {
    match e {
        StorageError::DuplicateIndexKey { key, .. } => vec![
            msg(
                1505,
                &[&t.two_part(), &c.name, &errors::stored_key_text(&key)],
            ),
            msg(3621, &[]),
        ],
        StorageError::IndexExists(name) => vec![msg(1913, &[&name, &t.two_part()])],
        StorageError::TableNotFound(_) => vec![msg(1088, &[&c.table.joined()])],
        // An attention or KILL: the build is rolled back, the batch ends without a message.
        StorageError::Cancelled => Vec::new(),
        other => errors::map(&other, errors::Context::Other),
    }
}

/// A UNIQUE constraint of CREATE TABLE, or its PRIMARY KEY NONCLUSTERED, resolved: its
/// name and key's column ids.
pub(super) struct UniqueConstraint {
    name: String,
    key: Vec<u16>,
    primary_key: bool,
}

/// CREATE TABLE's unique indexes over `entry`'s columns: a heap's PRIMARY KEY first, then
/// the UNIQUE constraints, checked before the table is made (1911, 1909, 1919, 1944, each
/// followed by 1750); CLUSTERED and the forms `refuse_unbuilt_key_forms` names are refused
/// (40517). An unnamed UNIQUE constraint gets SQL Server's `UQ__` name.
pub(super) fn unique_constraints(
    c: &CreateTable,
    entry: &TableEntry,
) -> Result<Vec<UniqueConstraint>, Vec<SqlError>> {
    let mut out = Vec::new();
    if let (Some((name, ids)), 0) = (&entry.primary_key, entry.index_id) {
        out.push(nonclustered_primary_key(entry, name, ids)?);
    }
    for (n, (k, column)) in declared_uniques(c).into_iter().enumerate() {
        if k.clustered == Some(true) {
            return Err(vec![not_yet("UNIQUE CLUSTERED constraints")]);
        }
        refuse_unbuilt_key_forms(k, c.filegroup.as_deref(), "a UNIQUE constraint")?;
        let names: Vec<&str> = match column {
            Some(c) => vec![c],
            None => k.columns.iter().map(|c| c.name.as_str()).collect(),
        };
        let name = k
            .name
            .clone()
            .unwrap_or_else(|| generated_uq_name(&entry.name, entry.created_us, n));
        let key = unique_key(entry, &name, &names).map_err(|e| vec![e, msg(1750, &[])])?;
        if out
            .iter()
            .any(|u: &UniqueConstraint| u.name.eq_ignore_ascii_case(&name))
        {
            return Err(vec![msg(2714, &[&name]), msg(1750, &[])]);
        }
        out.push(UniqueConstraint {
            name,
            key,
            primary_key: false,
        });
    }
    Ok(out)
}

/// The unique index enforcing heap `entry`'s PRIMARY KEY NONCLUSTERED `name` on columns
/// `ids` (catalog invariant 11), with a UNIQUE constraint's limits.
fn nonclustered_primary_key(
    entry: &TableEntry,
    name: &str,
    ids: &[u16],
) -> Result<UniqueConstraint, Vec<SqlError>> {
    let names: Vec<&str> = ids
        .iter()
        .filter_map(|id| entry.columns.iter().find(|c| c.column_id == *id))
        .map(|c| c.name.as_str())
        .collect();
    let key = unique_key(entry, name, &names).map_err(|e| vec![e, msg(1750, &[])])?;
    Ok(UniqueConstraint {
        name: name.to_string(),
        key,
        primary_key: true,
    })
}

/// The forms of a PRIMARY KEY or UNIQUE constraint `k` of a table made ON `filegroup`
/// not built yet, refused with 40517: DESC keys, index options other than the built
/// ones' values, and ON another filegroup than the table's.
pub(super) fn refuse_unbuilt_key_forms(
    k: &KeyConstraint,
    filegroup: Option<&str>,
    what: &str,
) -> Result<(), Vec<SqlError>> {
    if k.columns.iter().any(|c| c.descending) {
        return Err(vec![not_yet("descending index keys (DESC)")]);
    }
    refuse_unbuilt_options(&k.options, what)?;
    match (&k.filegroup, filegroup) {
        (None, _) => Ok(()),
        (Some(own), Some(table)) if own.eq_ignore_ascii_case(table) => Ok(()),
        (Some(_), _) => Err(vec![not_yet(&format!(
            "{what} ON a filegroup other than the table's"
        ))]),
    }
}

/// The UNIQUE constraints of a definition: inline ones with their column's name.
fn declared_uniques(c: &CreateTable) -> Vec<(&KeyConstraint, Option<&str>)> {
    let mut declared: Vec<(&KeyConstraint, Option<&str>)> = Vec::new();
    for col in &c.columns {
        if let Some(k) = col.key.as_ref().filter(|k| !k.primary) {
            declared.push((k, Some(&col.name)));
        }
    }
    for tc in &c.constraints {
        if let TableConstraint::Key(k) = tc {
            if !k.primary {
                declared.push((k, None));
            }
        }
    }
    declared
}

/// The column ids of UNIQUE constraint `name`'s key `names` (invariant 1's limits).
fn unique_key(entry: &TableEntry, name: &str, names: &[&str]) -> Result<Vec<u16>, SqlError> {
    let mut key = Vec::new();
    let mut bytes = 0usize;
    for n in names {
        let col = entry
            .columns
            .iter()
            .find(|x| x.name.eq_ignore_ascii_case(n))
            .ok_or_else(|| msg(1911, &[n]))?;
        if key.contains(&col.column_id) {
            return Err(msg(1909, &[&"index", &col.name]));
        }
        if !is_key_type(col) {
            return Err(msg(1919, &[&col.name, &format!("dbo.{}", entry.name)]));
        }
        key.push(col.column_id);
        bytes += col.max_length.max(0) as usize;
    }
    if key.len() > MAX_KEY_COLUMNS {
        let t = format!("dbo.{}", entry.name);
        return Err(msg(
            1904,
            &[&"index", &name, &t, &key.len(), &"index", &MAX_KEY_COLUMNS],
        ));
    }
    if bytes > MAX_KEY_BYTES {
        return Err(msg(1944, &[&name, &bytes, &MAX_KEY_BYTES]));
    }
    Ok(key)
}

/// The name SQL Server gives an unnamed UNIQUE constraint: `UQ__` + up to 8 characters of
/// the table name + `__` + 16 hex digits (unique per table and constraint).
fn generated_uq_name(table: &str, created_us: i64, n: usize) -> String {
    let short: String = table.chars().take(8).collect();
    let mut h: u64 = 0x8422_2325_cbf2_9ce4;
    for b in table
        .bytes()
        .chain(created_us.to_le_bytes())
        .chain(n.to_le_bytes())
    {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    format!("UQ__{short}__{h:016X}")
}

/// The new table `object_id`'s UNIQUE constraints as unique indexes, in its filegroup.
pub(super) fn create_unique_constraints(
    db: &SharedDatabase,
    object_id: u32,
    uniques: Vec<UniqueConstraint>,
) -> Result<(), Vec<SqlError>> {
    for u in uniques {
        let data_space_id = db
            .read()
            .unwrap()
            .table_by_id(object_id)
            .map_or(1, |t| t.data_space_id);
        let def = IndexDef {
            table_object_id: object_id,
            name: u.name,
            unique: true,
            unique_constraint: !u.primary_key,
            key: u.key,
            include: Vec::new(),
            data_space_id,
        };
        // The table is new and empty: nothing to fill, nothing to cancel.
        let env = db.read().unwrap().growth_env().clone();
        db.create_index(&def, &env, &|| false)
            .map_err(|e| errors::map(&e, errors::Context::Other))?;
    }
    Ok(())
}

/// sp_helpindex's lines raising 15250 and 15009 (unverified against SQL Server's text).
const HELPINDEX_LINES: (u32, u32) = (45, 55);

impl Session {
    /// sp_helpindex @objname: the table's indexes by name, each with its description
    /// ("nonclustered, unique, unique key located on PRIMARY") and key columns; a table
    /// without one gets SQL Server's informational 15472 instead of a result.
    pub(super) fn sp_helpindex(
        &mut self,
        args: &[crate::types::Value],
        out: &mut super::Out,
    ) -> Result<(), Vec<SqlError>> {
        let objname = super::eval::to_text(&args[0]);
        let t = self.procedure_table(&objname, ("sp_helpindex", HELPINDEX_LINES))?;
        let db = t.db.read().unwrap();
        let mut rows = Vec::new();
        if let (1, Some((pk, ids))) = (t.entry.index_id, &t.entry.primary_key) {
            let fg = filegroup_name(&db, t.entry.data_space_id);
            let described = format!("clustered, unique, primary key located on {fg}");
            rows.push((pk.clone(), described, key_names(&t.entry, ids)));
        }
        for ix in db.indexes_of(t.entry.object_id) {
            let info = ix.index_of.as_ref().expect("an index entry");
            let mut d = String::from("nonclustered");
            if info.unique {
                d.push_str(", unique");
            }
            if ix.enforces_primary_key_of(&t.entry) {
                d.push_str(", primary key");
            }
            if info.unique_constraint {
                d.push_str(", unique key");
            }
            let fg = filegroup_name(&db, ix.data_space_id);
            let keys = &info.sources[..info.key_columns as usize];
            rows.push((
                ix.name.clone(),
                format!("{d} located on {fg}"),
                key_names(&t.entry, keys),
            ));
        }
        drop(db);
        if rows.is_empty() {
            out.push(super::Output::Info(msg(15472, &[&objname])));
            return Ok(());
        }
        rows.sort_by_key(|r| r.0.to_lowercase());
        let text = |s: &str| crate::types::Value::Text(s.to_string());
        let columns = super::views::cols(&[
            ("index_name", super::views::SYSNAME),
            ("index_description", crate::types::SqlType::VarChar(210)),
            ("index_keys", crate::types::SqlType::NVarChar(2126)),
        ]);
        let rows = rows
            .iter()
            .map(|(n, d, k)| vec![text(n), text(d), text(k)])
            .collect();
        out.push(super::views::Rowset { columns, rows }.into());
        Ok(())
    }
}

/// The names of table `t`'s columns `ids`, as sp_helpindex lists a key: "a, b".
fn key_names(t: &TableEntry, ids: &[u16]) -> String {
    let names: Vec<&str> = ids
        .iter()
        .filter_map(|id| t.columns.iter().find(|c| c.column_id == *id))
        .map(|c| c.name.as_str())
        .collect();
    names.join(", ")
}

/// A filegroup's name (sp_helpindex's "located on").
fn filegroup_name(db: &extentdb_storage::Database, data_space_id: u16) -> String {
    db.catalog
        .filegroups
        .iter()
        .find(|g| g.data_space_id == data_space_id)
        .map_or_else(|| data_space_id.to_string(), |g| g.name.clone())
}
