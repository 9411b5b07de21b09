//! Stored procedures' definitions: CREATE, ALTER, CREATE OR ALTER and DROP PROCEDURE, kept
//! in the database's catalog with their text (format's module.rs, storage's module.rs).
//!
//! Invariants:
//! 1. A procedure lives in dbo of the current database: another schema is Msg 2760, a
//!    database prefix Msg 166, a #name (a temporary procedure) 40517.
//! 2. CREATE needs CREATE PROCEDURE in the database (db_owner and db_ddladmin hold it;
//!    Msg 262 otherwise); ALTER and DROP need ALTER on the procedure (db_ddladmin's ALTER
//!    on the database covers it). A name any object of dbo has is Msg 2714, for CREATE
//!    checked again holding the database (storage's module.rs invariant 1); ALTER of a
//!    missing procedure is 208; DROP of one is 3701 (nothing with IF EXISTS).
//! 3. ALTER and DROP hold the procedure's Sch-M (its OBJECT resource) from before the
//!    catalog changes to the statement's end, so whoever holds its Sch-S sees one version
//!    of it whole.
//! 4. Each is one catalog save, durable before the statement returns; inside a user
//!    transaction they are refused (40517) rather than made outside its rollback.
//! 5. Every SET option a module would record is fixed ON in extentdb (ANSI_NULLS and
//!    QUOTED_IDENTIFIER: set_options.rs), so a module records them ON.
//!
//! Not here: parsing (parser/procedures.rs); running a procedure (procedure_calls.rs,
//! which parses the definition again from the catalog); the catalog views
//! (procedure_views.rs).

use extentdb_format::module::{ModuleEntry, ModuleType, ParameterEntry, DBO_SCHEMA_ID};
use extentdb_storage::lock::{LockMode, Resource};
use extentdb_storage::module::{by_name, ModuleChange};
use extentdb_storage::{Database, StorageError};

use super::locking::lock_error;
use super::lower::not_yet;
use super::structure::validated_change;
use super::Session;
use crate::ast::{ObjectName, ProcedureDefinition, ProcedureMode, ProcedureParameter};
use crate::messages::{msg, SqlError};
use crate::rowcodec;
use crate::types::Value;

type Errors = Vec<SqlError>;

/// Invariant 1: the procedure's own name, `statement` naming the statement for Msg 166.
fn procedure_name<'n>(name: &'n ObjectName, statement: &str) -> Result<&'n str, Errors> {
    if name.parts.len() > 2 {
        return Err(vec![msg(166, &[&statement])]);
    }
    let schema = name.qualifier().filter(|s| !s.is_empty()).unwrap_or("dbo");
    if !schema.eq_ignore_ascii_case("dbo") {
        return Err(vec![msg(2760, &[&schema])]);
    }
    if name.name().starts_with('#') {
        return Err(vec![not_yet("temporary stored procedures (#name)")]);
    }
    Ok(name.name())
}

/// The catalog's entry for `def`; the dates and object id are storage's to give.
fn module_entry(name: &str, def: &ProcedureDefinition) -> Result<ModuleEntry, Errors> {
    let mut parameters: Vec<ParameterEntry> = Vec::with_capacity(def.parameters.len());
    for p in &def.parameters {
        if parameters
            .iter()
            .any(|q| q.name.eq_ignore_ascii_case(&p.name))
        {
            return Err(vec![msg(134, &[&p.name])]);
        }
        parameters.push(parameter_entry(p));
    }
    Ok(ModuleEntry {
        object_id: 0,
        schema_id: DBO_SCHEMA_ID,
        name: name.to_string(),
        module_type: ModuleType::Procedure,
        created_us: 0,
        modified_us: 0,
        definition: def.definition.clone(),
        // Invariant 5.
        uses_ansi_nulls: true,
        uses_quoted_identifier: true,
        is_recompiled: def.recompile,
        parameters,
    })
}

fn parameter_entry(p: &ProcedureParameter) -> ParameterEntry {
    let st = rowcodec::stored_type(p.data_type.sql_type);
    ParameterEntry {
        name: p.name.clone(),
        system_type_id: st.system_type_id,
        max_length: st.max_length,
        precision: st.precision,
        scale: st.scale,
        is_output: p.output,
        default_sql: p.default.as_ref().map(|(_, text)| text.clone()),
    }
}

/// A failed change's messages: a name taken meanwhile is 2714 (invariant 2).
fn storage(e: StorageError) -> Errors {
    match e {
        StorageError::TableExists(name) => vec![msg(2714, &[&name])],
        e => super::errors::map(&e, super::errors::Context::Other),
    }
}

impl Session {
    /// CREATE / ALTER / CREATE OR ALTER PROCEDURE (invariants 1 to 4).
    pub(super) fn create_procedure(&mut self, def: &ProcedureDefinition) -> Result<(), Errors> {
        let statement = match def.mode {
            ProcedureMode::Alter => "ALTER PROCEDURE",
            _ => "CREATE PROCEDURE",
        };
        self.refuse_in_transaction(statement)?;
        let name = procedure_name(&def.name, "CREATE/ALTER PROCEDURE")?;
        let entry = module_entry(name, def)?;
        let (db_id, db) = self.current_database()?;
        let existing = by_name(&db.read().unwrap().catalog, name).map(|m| m.object_id);
        match (def.mode, existing) {
            (ProcedureMode::Alter, None) => return Err(vec![msg(208, &[&name])]),
            (ProcedureMode::Create, _) | (ProcedureMode::CreateOrAlter, None) => {
                let check = |g: &Database| {
                    self.require_db_permission(db_id, g, "CREATE PROCEDURE")?;
                    if extentdb_storage::module::name_taken(&g.catalog, name) {
                        return Err(vec![msg(2714, &[&name])]);
                    }
                    Ok(ModuleChange::Create(entry.clone()))
                };
                validated_change(&db, check, |v, c| db.change_modules(v, c), storage)?;
                return Ok(());
            }
            _ => {}
        }
        let object_id = existing.expect("an ALTER of a procedure there");
        self.lock_procedure(db_id, object_id)?;
        let check = |g: &Database| {
            let now = by_name(&g.catalog, name).map(|m| m.object_id);
            if now != Some(object_id) {
                return Err(vec![msg(208, &[&name])]);
            }
            self.require_procedure_alter(db_id, g, object_id, "alter", name)?;
            let with = entry.clone();
            Ok(ModuleChange::Alter { object_id, with })
        };
        validated_change(&db, check, |v, c| db.change_modules(v, c), storage)?;
        Ok(())
    }

    /// DROP PROCEDURE [IF EXISTS] name [, ...]: each in turn, as SQL Server does (those
    /// before a missing one are dropped).
    pub(super) fn drop_procedures(
        &mut self,
        if_exists: bool,
        names: &[ObjectName],
    ) -> Result<(), Errors> {
        self.refuse_in_transaction("DROP PROCEDURE")?;
        for n in names {
            let name = procedure_name(n, "DROP PROCEDURE")?;
            let gone = || vec![msg(3701, &[&"drop", &"procedure", &n.joined()])];
            let (db_id, db) = self.current_database()?;
            let found = by_name(&db.read().unwrap().catalog, name).map(|m| m.object_id);
            let Some(object_id) = found else {
                match if_exists {
                    true => continue,
                    false => return Err(gone()),
                }
            };
            self.lock_procedure(db_id, object_id)?;
            let check = |g: &Database| {
                if by_name(&g.catalog, name).map(|m| m.object_id) != Some(object_id) {
                    return Err(gone());
                }
                self.require_procedure_alter(db_id, g, object_id, "drop", name)?;
                Ok(ModuleChange::Drop(vec![object_id]))
            };
            match validated_change(&db, check, |v, c| db.change_modules(v, c), storage) {
                Err(e) if if_exists && e.iter().any(|m| m.number == 3701) => {}
                other => {
                    other?;
                }
            }
        }
        Ok(())
    }

    /// Invariant 2: ALTER on the procedure (the database's ALTER, a grant on it, dbo);
    /// without it Msg 3701 at level 14, state 20, as SQL Server refuses `verb`.
    fn require_procedure_alter(
        &self,
        db_id: u16,
        g: &Database,
        object_id: u32,
        verb: &str,
        name: &str,
    ) -> Result<(), Errors> {
        self.require_db_access(db_id, g)?;
        if self.has_db_permission(db_id, g, "ALTER", Some(object_id)) {
            return Ok(());
        }
        let mut e = msg(3701, &[&verb, &"procedure", &name]).with_state(20);
        e.severity = 14;
        Err(vec![e])
    }

    /// OBJECT_ID(name [, type]): a table's id (type omitted or 'U'), a procedure's (type
    /// omitted or 'P'); NULL for any other name or type, as SQL Server for an object it
    /// does not have.
    pub(super) fn object_id_of(&self, name: &str, object_type: Option<&str>) -> Value {
        let name = super::tables::object_name_from_text(name);
        let kind = object_type.map(|t| t.trim().to_ascii_uppercase());
        if matches!(kind.as_deref(), None | Some("U")) {
            if let Ok(Some(t)) = self.find_table(&name) {
                return Value::Int(t.entry.object_id as i32);
            }
        }
        if !matches!(kind.as_deref(), None | Some("P")) {
            return Value::Null;
        }
        let db = match name.database().filter(|d| !d.is_empty()) {
            Some(d) => self.engine.instance.database_by_name(d).map(|(_, db)| db),
            None => self.engine.instance.database(self.database_id),
        };
        let schema = name.qualifier().filter(|s| !s.is_empty()).unwrap_or("dbo");
        match db {
            Some(db) if schema.eq_ignore_ascii_case("dbo") => {
                by_name(&db.read().unwrap().catalog, name.name())
                    .map_or(Value::Null, |m| Value::Int(m.object_id as i32))
            }
            _ => Value::Null,
        }
    }

    /// sp_helptext @objname: the procedure's definition as rows of one column `Text`
    /// (procedure_views.rs invariant 3); 15009 for a name the database lacks, 15197 for
    /// a table (no text). The line numbers SQL Server's sp_helptext raises them at are
    /// not known here, so none is claimed (0).
    pub(super) fn sp_helptext(
        &mut self,
        args: &[Value],
        out: &mut super::Out,
    ) -> Result<(), Errors> {
        let objname = super::eval::to_text(&args[0]);
        let (_, db) = self.current_database()?;
        let name = super::tables::object_name_from_text(&objname);
        let definition = by_name(&db.read().unwrap().catalog, name.name())
            .filter(|_| {
                name.qualifier()
                    .is_none_or(|s| s.is_empty() || s.eq_ignore_ascii_case("dbo"))
            })
            .map(|m| m.definition.clone());
        let Some(definition) = definition else {
            let e = match self.find_table(&name)? {
                Some(_) => msg(15197, &[&objname]),
                None => msg(15009, &[&objname, &self.current_db_name()]),
            };
            return Err(vec![e.in_procedure("sp_helptext", 0)]);
        };
        let rows = super::procedure_views::helptext_rows(&definition)
            .into_iter()
            .map(|line| vec![Value::Text(line)])
            .collect();
        let columns = vec![("Text".to_string(), crate::types::SqlType::NVarChar(255))];
        self.send_rowset(super::views::Rowset { columns, rows }, out);
        Ok(())
    }

    /// The procedure a GRANT / DENY / REVOKE ... ON names (object id, database id,
    /// database), None when no procedure has the name.
    pub(super) fn procedure_securable(
        &self,
        name: &ObjectName,
    ) -> Result<Option<(u32, u16, std::sync::Arc<extentdb_storage::SharedDatabase>)>, Errors> {
        let schema = name.qualifier().filter(|s| !s.is_empty()).unwrap_or("dbo");
        if name.parts.len() > 2 || !schema.eq_ignore_ascii_case("dbo") {
            return Ok(None);
        }
        let (db_id, db) = self.current_database()?;
        let id = by_name(&db.read().unwrap().catalog, name.name()).map(|m| m.object_id);
        Ok(id.map(|id| (id, db_id, db)))
    }

    /// Invariant 3: Sch-M on procedure `object_id`, waited for with no database held.
    fn lock_procedure(&mut self, db_id: u16, object_id: u32) -> Result<(), Errors> {
        let locker = self.locker();
        let mut l = locker.lock().unwrap();
        let object = Resource::Object {
            db: db_id,
            object: object_id,
        };
        l.lock(object, LockMode::SchM)
            .map_err(|e| lock_error(e, self.spid))
    }
}
