//! CREATE TABLE, DROP TABLE, TRUNCATE TABLE, ALTER TABLE and SET IDENTITY_INSERT: from
//! the syntax tree to catalog entries, with SQL Server's checks and messages for bad
//! definitions. DROP, TRUNCATE and ALTER TABLE hold the table's Sch-M lock
//! (`lock_for_table_ddl`, locking.rs invariant 4) before they hold its database.
//!
//! A table is a clustered index (its PRIMARY KEY CLUSTERED, the default) or a heap. A
//! PRIMARY KEY is recorded (name and key columns) and its columns become NOT NULL as in
//! SQL Server; a heap's (NONCLUSTERED) is enforced by a unique index of the same name made
//! with the table (catalog invariant 11), as UNIQUE constraints are.
//!
//! CREATE and DROP TABLE inside a transaction are its own: its ROLLBACK takes them back
//! (storage's ddl.rs); the creator holds the new table's Sch-M lock until the transaction
//! ends, taken before the table exists, so no other session ever uses a table a rollback
//! may take back.
//!
//! UNIQUE constraints become unique nonclustered indexes (index_ddl.rs), made with the
//! table: inside a transaction, its ROLLBACK takes them with the table.
//!
//! CHECK constraints are checked and named by check_constraints.rs, FOREIGN KEYs by
//! foreign_keys.rs, and kept on the entry, so they are made (and rolled back) with the
//! table. DROP TABLE of a table another's FOREIGN KEY references is refused (3726), and
//! so is its TRUNCATE (4712).
//!
//! Computed columns are checked, typed and rendered by computed_columns.rs.
//!
//! Not here yet: collations other than the default, and TRUNCATE or ALTER TABLE inside a transaction (refused: 40517).

use std::time::{SystemTime, UNIX_EPOCH};

use extentdb_format::catalog::{ColumnEntry, TableEntry};
use extentdb_storage::{Database, SharedDatabase, StorageError};

use super::errors;
use super::expr_text::default_text;
use super::lower::not_yet;
use super::structure::validated_change;
use super::table_variables::is_table_variable_name;
use super::temp_tables;
use super::Session;
use crate::ast::{ColumnDefinition, CreateTable, KeyConstraint, ObjectName, TableConstraint};
use crate::messages::{msg, SqlError};
use crate::rowcodec;
use crate::types::SqlType;

/// SQL Server's largest in-row record, in bytes.
const MAX_ROW_BYTES: usize = 8060;
/// Record header (4 bytes) and column count (2): the null bitmap comes on top.
const ROW_OVERHEAD_BYTES: usize = 6;

pub(super) fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// The name SQL Server gives an unnamed PRIMARY KEY: `PK__` + up to 8 characters of the
/// table name + `__` + 16 hex digits (unique per creation).
fn generated_pk_name(table: &str, created_us: i64) -> String {
    let short: String = table.chars().take(8).collect();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in table.bytes().chain(created_us.to_le_bytes()) {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    format!("PK__{short}__{h:016X}")
}

/// Both messages SQL Server sends when a key constraint cannot be made.
fn constraint_failed(first: SqlError) -> Vec<SqlError> {
    vec![first, msg(1750, &[])]
}

fn is_identity_type(t: SqlType) -> bool {
    matches!(
        t,
        SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::BigInt
    )
}

/// The catalog row of one column definition (PRIMARY KEY nullability is settled later).
fn column_entry(table: &str, id: u16, c: &ColumnDefinition) -> Result<ColumnEntry, Vec<SqlError>> {
    let t = c.data_type.sql_type;
    let st = rowcodec::stored_type(t);
    let identity = match c.identity {
        None => None,
        Some(_) if !is_identity_type(t) => return Err(vec![msg(2749, &[&c.name])]),
        Some(_) if c.nullable == Some(true) => return Err(vec![msg(8147, &[&c.name, &table])]),
        Some(i) => Some((i.seed, i.increment)),
    };
    let default_sql = match &c.default {
        None => String::new(),
        Some(d) => default_text(&d.expr).ok_or_else(|| vec![not_yet("subqueries in DEFAULT")])?,
    };
    Ok(ColumnEntry {
        column_id: id,
        name: c.name.clone(),
        system_type_id: st.system_type_id,
        max_length: st.max_length,
        precision: st.precision,
        scale: st.scale,
        is_nullable: identity.is_none() && c.nullable != Some(false),
        identity,
        default_sql,
        computed: None,
    })
}

/// The PRIMARY KEY of a definition, if any: (name given, key columns).
/// A PRIMARY KEY as declared: its name, its columns, and whether it is clustered.
type DeclaredKey = (Option<String>, Vec<String>, bool);

fn primary_key(c: &CreateTable, table: &str) -> Result<Option<DeclaredKey>, Vec<SqlError>> {
    let mut found: Vec<DeclaredKey> = Vec::new();
    let mut take = |k: &KeyConstraint, column: Option<&str>| -> Result<(), Vec<SqlError>> {
        if !k.primary {
            return Ok(());
        }
        let what = "a PRIMARY KEY constraint";
        super::index_ddl::refuse_unbuilt_key_forms(k, c.filegroup.as_deref(), what)?;
        let cols = match column {
            Some(c) => vec![c.to_string()],
            None => k.columns.iter().map(|c| c.name.clone()).collect(),
        };
        // PRIMARY KEY is CLUSTERED unless declared NONCLUSTERED, as in SQL Server.
        found.push((k.name.clone(), cols, k.clustered != Some(false)));
        Ok(())
    };
    for col in &c.columns {
        if let Some(k) = &col.key {
            take(k, Some(&col.name))?;
        }
    }
    for tc in &c.constraints {
        match tc {
            TableConstraint::Key(k) => take(k, None)?,
            TableConstraint::Check(_) | TableConstraint::ForeignKey(_) => {}
        }
    }
    if found.len() > 1 {
        return Err(constraint_failed(msg(8110, &[&table])));
    }
    Ok(found.pop())
}

/// CREATE TABLE's data space, checked against `db`: ON filegroup (1921 if there is none,
/// 1922 if it has no files), else the default filegroup.
pub(super) fn table_data_space(
    db: &Database,
    filegroup: Option<&str>,
) -> Result<u16, Vec<SqlError>> {
    let Some(fg) = filegroup else {
        let default = db.catalog.filegroups.iter().find(|f| f.is_default);
        return Ok(default.map_or(1, |f| f.data_space_id));
    };
    let id = db
        .filegroup_by_name(fg)
        .ok_or_else(|| vec![msg(1921, &[&fg])])?
        .data_space_id;
    if !db.catalog.files.iter().any(|f| f.data_space_id == id) {
        return Err(vec![msg(1922, &[&fg])]);
    }
    Ok(id)
}

/// A failure of DROP, TRUNCATE or ALTER TABLE, made under the table's Sch-M lock
/// (locking.rs invariant 4: waited for with no database held, kept to the transaction's
/// end; granted, no other transaction has an open change in the table, storage's xact.rs
/// invariant 5): a table dropped while the lock was waited for is `gone`.
/// CREATE TABLE outside a transaction: made at once, in the filegroup resolved at the
/// catalog state it is made at (storage's structure.rs invariant 2).
fn create_at_once(
    db: &SharedDatabase,
    entry: TableEntry,
    filegroup: Option<&str>,
) -> Result<u32, Vec<SqlError>> {
    validated_change(
        db,
        |d| table_data_space(d, filegroup),
        |version, data_space_id| {
            let entry = TableEntry {
                data_space_id,
                ..entry.clone()
            };
            db.create_table(version, entry, None)
        },
        |e| errors::map(&e, errors::Context::Other),
    )
}

fn table_ddl_error(e: StorageError, gone: SqlError) -> Vec<SqlError> {
    match e {
        StorageError::TableNotFound(_) => vec![gone],
        other => errors::map(&other, errors::Context::Other),
    }
}

/// SQL Server's columns per table.
const MAX_COLUMNS: usize = 1024;

impl Session {
    /// CREATE TABLE; at most `MAX_COLUMNS` columns (Msg 1702).
    pub(super) fn create_table(&mut self, c: &CreateTable) -> Result<(), Vec<SqlError>> {
        let (db_id, db) = self.object_database(&c.name)?;
        // A #name, ##name or table variable: a table in tempdb, which needs no
        // permission.
        let variable = is_table_variable_name(&c.name);
        let temporary = match temp_tables::is_temporary(c.name.name()) {
            _ if variable => Some(self.new_table_variable(c.name.name())?),
            true => Some(self.new_temporary(c.name.name())?),
            false => {
                self.require_db_permission(db_id, &db.read().unwrap(), "CREATE TABLE")?;
                None
            }
        };
        let schema = c
            .name
            .qualifier()
            .filter(|s| !s.is_empty())
            .unwrap_or("dbo");
        if !schema.eq_ignore_ascii_case("dbo") {
            return Err(vec![msg(2760, &[&schema])]);
        }
        let table = temporary
            .clone()
            .unwrap_or_else(|| c.name.name().to_string());
        if let Some(def) = c.columns.get(MAX_COLUMNS) {
            return Err(vec![msg(1702, &[&def.name, &table])]);
        }
        let mut columns: Vec<ColumnEntry> = Vec::with_capacity(c.columns.len());
        for (i, def) in c.columns.iter().enumerate() {
            if columns
                .iter()
                .any(|x| x.name.eq_ignore_ascii_case(&def.name))
            {
                return Err(vec![msg(2705, &[&def.name, &table])]);
            }
            columns.push(match def.computed {
                Some(_) => super::computed_columns::marker(def, i as u16 + 1),
                None => column_entry(&table, i as u16 + 1, def)?,
            });
        }
        // Computed columns typed once every other column is (computed_columns.rs).
        for (i, def) in c.columns.iter().enumerate() {
            if def.computed.is_some() {
                let made =
                    super::computed_columns::computed_entry(&table, &columns, def, i as u16 + 1)?;
                columns[i] = made;
            }
        }
        super::computed_columns::refuse_constrained(c, &columns)?;
        if columns.iter().filter(|x| x.identity.is_some()).count() > 1 {
            return Err(vec![msg(2744, &[&table])]);
        }
        let created_us = now_us();
        let mut clustered = false;
        let primary_key = match primary_key(c, &table)? {
            None => None,
            Some((name, keys, is_clustered)) => {
                clustered = is_clustered;
                let mut ids = Vec::with_capacity(keys.len());
                for k in &keys {
                    let Some(pos) = columns.iter().position(|x| x.name.eq_ignore_ascii_case(k))
                    else {
                        return Err(constraint_failed(msg(1911, &[k])));
                    };
                    let explicit_null = c.columns[pos].nullable == Some(true);
                    if explicit_null {
                        return Err(constraint_failed(msg(8111, &[&table])));
                    }
                    columns[pos].is_nullable = false;
                    ids.push(columns[pos].column_id);
                }
                let name = name.unwrap_or_else(|| generated_pk_name(&table, created_us));
                Some((name, ids))
            }
        };
        let fixed: usize = columns
            .iter()
            .filter(|x| !extentdb_storage::table::VARIABLE_TYPES.contains(&x.system_type_id))
            .map(|x| x.max_length.max(0) as usize)
            .sum();
        let overhead = ROW_OVERHEAD_BYTES + columns.len().div_ceil(8);
        if fixed + overhead > MAX_ROW_BYTES {
            return Err(vec![msg(
                1701,
                &[&table, &(fixed + overhead), &overhead, &MAX_ROW_BYTES],
            )]);
        }
        let checks = {
            let d = db.read().unwrap();
            super::check_constraints::create_table_checks(&d, c, &table, &columns, created_us)?
        };
        let mut entry = TableEntry {
            object_id: 0,
            schema_name: "dbo".into(),
            name: table,
            created_us,
            data_space_id: 0,
            allocation_unit_id: 0,
            index_id: clustered as u8,
            root_page: extentdb_format::PageId::NULL,
            primary_key,
            columns,
            identity_last: Default::default(),
            lock_escalation: Default::default(),
            pending_ddl: None,
            index_of: None,
            checks,
            foreign_keys: Vec::new(),
            is_disabled: false,
        };
        entry.foreign_keys = self.create_table_foreign_keys(c, &entry, &db)?;
        let uniques = super::index_ddl::unique_constraints(c, &entry)?;
        // A table variable outlives ROLLBACK (table_variables.rs): made at once.
        let xact = match variable {
            true => None,
            false => self.ddl_xact(db_id, &db),
        };
        let object_id = match xact {
            Some(x) => self.create_in_xact(db_id, &db, entry, c.filegroup.as_deref(), x)?,
            None => create_at_once(&db, entry, c.filegroup.as_deref())?,
        };
        super::index_ddl::create_unique_constraints(&db, object_id, uniques)?;
        match temporary {
            Some(stored) if variable => self.table_variable_created(c.name.name(), stored),
            Some(stored) => self.temporary_created(c.name.name(), stored, (object_id, created_us)),
            None => {}
        }
        Ok(())
    }

    /// CREATE TABLE inside transaction `x`: the object id the table will get is locked
    /// Sch-M first (the module's rule), then the table is made at the catalog state that
    /// id was read from (storage's structure.rs invariant 2), else both again.
    fn create_in_xact(
        &mut self,
        db_id: u16,
        db: &SharedDatabase,
        entry: TableEntry,
        filegroup: Option<&str>,
        x: u64,
    ) -> Result<u32, Vec<SqlError>> {
        loop {
            let (version, data_space_id, object_id) = {
                let d = db.read().unwrap();
                let space = table_data_space(&d, filegroup)?;
                (d.catalog_version(), space, d.catalog.next_object_id)
            };
            let entry = TableEntry {
                data_space_id,
                object_id,
                ..entry.clone()
            };
            self.lock_new_table(db_id, &entry)?;
            match db.create_table(version, entry, Some(x)) {
                Err(StorageError::CatalogChanged) => continue,
                Ok(id) => {
                    assert_eq!(id, object_id, "made at the catalog state read");
                    return Ok(id);
                }
                Err(e) => return Err(errors::map(&e, errors::Context::Other)),
            }
        }
    }

    pub(super) fn drop_tables(
        &mut self,
        if_exists: bool,
        names: &[ObjectName],
    ) -> Result<(), Vec<SqlError>> {
        for n in names {
            let gone = || msg(3701, &[&"drop", &"table", &n.joined()]);
            let Some(t) = self.find_table(n)? else {
                if if_exists {
                    continue;
                }
                return Err(vec![gone()]);
            };
            self.require_table_alter(&t, gone())?;
            self.schema_modification(&t)?;
            // Inside a transaction the drop waits for its end (storage's ddl.rs).
            let xact = self.ddl_xact(t.db_id, &t.db);
            let referenced = {
                let d = t.db.read().unwrap();
                super::foreign_keys::referenced_by_other(&d, t.entry.object_id, xact)
            };
            if referenced {
                return Err(vec![msg(3726, &[&t.two_part()])]);
            }
            t.db.drop_table(t.entry.object_id, xact)
                .map_err(|e| table_ddl_error(e, gone()))?;
            self.forget_index_usage(t.db_id, Some(t.entry.object_id), None);
            self.temporary_dropped(&t.entry.name);
            if self.identity_insert == Some((t.db_id, t.entry.object_id)) {
                self.identity_insert = None;
            }
        }
        Ok(())
    }

    pub(super) fn truncate_table(&mut self, name: &ObjectName) -> Result<(), Vec<SqlError>> {
        let t = self
            .find_table(name)?
            .ok_or_else(|| vec![msg(4701, &[&name.joined()])])?;
        self.require_table_alter(&t, msg(1088, &[&name.joined()]))?;
        self.refuse_in_transaction("TRUNCATE TABLE")?;
        self.schema_modification(&t)?;
        // A self-reference does not stop it, as in SQL Server.
        let referenced = {
            let d = t.db.read().unwrap();
            super::foreign_keys::referenced_by_other(&d, t.entry.object_id, None)
        };
        if referenced {
            return Err(vec![msg(4712, &[&t.two_part()])]);
        }
        t.db.truncate_table(t.entry.object_id)
            .map_err(|e| table_ddl_error(e, msg(4701, &[&name.joined()])))
    }

    /// TRUNCATE, ALTER TABLE and the security statements (logins, users, roles,
    /// permissions) change the catalog at once, so inside a transaction its ROLLBACK could
    /// not take them back: refused there (CREATE and DROP TABLE belong to the transaction:
    /// storage's ddl.rs).
    pub(super) fn refuse_in_transaction(&self, statement: &str) -> Result<(), Vec<SqlError>> {
        if self.trancount > 0 {
            return Err(vec![not_yet(&format!("{statement} inside a transaction"))]);
        }
        Ok(())
    }

    /// ALTER TABLE t SET (LOCK_ESCALATION = ...): kept in the catalog (sys.tables'
    /// lock_escalation, lock_escalation_desc); DISABLE stops a statement's row locks on
    /// the table from becoming a table lock, TABLE and AUTO allow it (no partitions here).
    /// A change of the table's definition: under Sch-M, as SQL Server's ALTER TABLE.
    pub(super) fn alter_table_lock_escalation(
        &mut self,
        name: &ObjectName,
        value: &str,
    ) -> Result<(), Vec<SqlError>> {
        use extentdb_format::catalog::LockEscalation;
        let t = self
            .find_table(name)?
            .ok_or_else(|| vec![msg(4902, &[&name.joined()])])?;
        self.require_table_alter(&t, msg(4902, &[&name.joined()]))?;
        self.refuse_in_transaction("ALTER TABLE")?;
        let v = match value {
            "DISABLE" => LockEscalation::Disable,
            "AUTO" => LockEscalation::Auto,
            _ => LockEscalation::Table,
        };
        self.schema_modification(&t)?;
        t.db.set_lock_escalation(t.entry.object_id, v)
            .map_err(|e| table_ddl_error(e, msg(4902, &[&name.joined()])))
    }

    /// SET IDENTITY_INSERT: on for at most one table per session (Msg 8107). A session
    /// setting, not a change of the table: it takes no lock.
    pub(super) fn set_identity_insert(
        &mut self,
        name: &ObjectName,
        on: bool,
    ) -> Result<(), Vec<SqlError>> {
        let t = self
            .find_table(name)?
            .ok_or_else(|| vec![msg(1088, &[&name.joined()])])?;
        if !t.entry.columns.iter().any(|c| c.identity.is_some()) {
            return Err(vec![msg(8106, &[&t.entry.name])]);
        }
        let key = (t.db_id, t.entry.object_id);
        if !on {
            if self.identity_insert == Some(key) {
                self.identity_insert = None;
            }
            return Ok(());
        }
        match self.identity_insert {
            Some(other) if other != key => {
                let (db, schema, table) = self
                    .engine
                    .instance
                    .database(other.0)
                    .and_then(|db| {
                        let g = db.read().unwrap();
                        g.table_by_id(other.1)
                            .map(|x| (g.name.clone(), x.schema_name.clone(), x.name.clone()))
                    })
                    .unwrap_or_default();
                Err(vec![msg(8107, &[&db, &schema, &table, &t.entry.name])])
            }
            _ => {
                self.identity_insert = Some(key);
                Ok(())
            }
        }
    }
}
