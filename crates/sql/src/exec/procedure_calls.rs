//! EXEC of a user stored procedure: `EXEC [@rc =] name [args]`, the arguments bound by
//! place or by `@name = value`, DEFAULT, OUTPUT arguments written back to the caller's
//! variables, and RETURN's status (0 when the body returns none).
//!
//! Invariants:
//! 1. The definition is read from the catalog in one read (an ALTER is one catalog change,
//!    procedures.rs), so an execution runs one version whole; it is parsed anew at every
//!    execution (nothing is cached across executions, which is what WITH RECOMPILE asks).
//!    While it is read the caller holds the procedure's Sch-S, so an ALTER or DROP holding
//!    Sch-M is waited out first.
//! 2. The body runs in its own scope: the parameters are its only variables, its table
//!    variables and the #temp tables it made end with it, the SET options it changes
//!    (XACT_ABORT, NOCOUNT, ...) hold only inside it, and the caller's are back after it,
//!    whatever way it ended.
//! 3. Binding follows SQL Server: a positional argument after a named one is 119, more
//!    arguments than parameters 8144, an unknown name 8145, OUTPUT for a parameter not
//!    declared OUTPUT 8162, OUTPUT with a constant 179, a parameter neither given nor
//!    defaulted 201; each before the body runs, so nothing of it runs then.
//! 4. Nesting is at most `MAX_NESTING` deep (@@NESTLEVEL); the call past it is 217.
//! 5. A body that leaves @@TRANCOUNT other than it found it gets 266 after it (the
//!    transaction stays as the body left it, as in SQL Server).
//! 6. Errors raised by the body's statements carry the procedure's name and their line
//!    in its definition (ERROR token's ProcName and LineNumber).
//! 7. EXEC needs EXECUTE on the procedure (granted on it or on the database, db_owner,
//!    dbo), Msg 229 otherwise; the body's statements are then checked as the caller's
//!    (EXECUTE AS CALLER; ownership chaining is not built).
//! 8. A body that ends the batch (a deadlock victim, an error under XACT_ABORT, an
//!    attention) ends its caller's batch too, through every level.

use std::collections::HashMap;

use extentdb_format::module::ModuleEntry;
use extentdb_storage::lock::{LockMode, Resource};
use extentdb_storage::module::by_name;

use super::lower::not_yet;
use super::{Flow, Out, Session};
use crate::ast::{ExecArg, Expr, ObjectName, ProcedureDefinition, StatementKind};
use crate::convert::convert;
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value};

type Errors = Vec<SqlError>;

/// SQL Server's nesting limit (Msg 217).
pub const MAX_NESTING: usize = 32;

/// A parameter's value for the body, and the caller's variable an OUTPUT one goes back to.
struct Bound {
    values: Vec<(String, SqlType, Value)>,
    outputs: Vec<(usize, String)>,
}

/// The procedure's own definition, parsed from its catalog text (invariant 1).
fn parse_definition(m: &ModuleEntry) -> Result<ProcedureDefinition, Errors> {
    let statements = crate::parser::parse_batch(&m.definition).map_err(|e| vec![e.into()])?;
    match statements.into_iter().next().map(|s| s.kind) {
        Some(StatementKind::CreateProcedure(d)) => Ok(*d),
        _ => Err(vec![msg(2812, &[&m.name])]),
    }
}

impl Session {
    /// The user procedure `name` names in the current database, read under its Sch-S
    /// (invariant 1); None when there is none.
    pub(super) fn user_procedure(
        &mut self,
        name: &ObjectName,
    ) -> Result<Option<ModuleEntry>, Errors> {
        let here = self.current_db_name();
        if name
            .database()
            .is_some_and(|d| !d.is_empty() && !d.eq_ignore_ascii_case(&here))
        {
            return Err(vec![not_yet("EXEC of a procedure in another database")]);
        }
        let schema = name.qualifier().filter(|s| !s.is_empty()).unwrap_or("dbo");
        if !schema.eq_ignore_ascii_case("dbo") {
            return Ok(None);
        }
        let (db_id, db) = self.current_database()?;
        let Some(id) = by_name(&db.read().unwrap().catalog, name.name()).map(|m| m.object_id)
        else {
            return Ok(None);
        };
        let object = Resource::Object {
            db: db_id,
            object: id,
        };
        self.statement_object_lock(db_id, object, LockMode::SchS)?;
        let g = db.read().unwrap();
        let Some(m) = g.catalog.modules.iter().find(|m| m.object_id == id) else {
            return Ok(None);
        };
        // Invariant 7.
        self.require_object_permission(db_id, &g, "EXECUTE", id, &m.name)?;
        Ok(Some(m.clone()))
    }

    /// Runs procedure `m` for EXEC `args` (their values `values`, evaluated in the
    /// caller's scope); `rc` is `@rc` of `EXEC @rc = ...`.
    pub(super) fn execute_user_procedure(
        &mut self,
        m: &ModuleEntry,
        args: &[ExecArg],
        values: Vec<Value>,
        rc: Option<&str>,
        out: &mut Out,
    ) -> Result<(), Errors> {
        if self.procedures.len() >= MAX_NESTING {
            return Err(vec![msg(217, &[&MAX_NESTING])]);
        }
        let def = parse_definition(m)?;
        let bound = self.bind(m, &def, args, values)?;
        let trancount = self.trancount;
        let (status, results) = self.run_body(m, &def, bound.values, out);
        let mut errors = Vec::new();
        if self.trancount != trancount {
            errors.push(msg(266, &[&trancount, &self.trancount]));
        }
        for (at, var) in bound.outputs {
            let value = results.get(at).cloned().unwrap_or(Value::Null);
            if let Err(e) = self.assign(&var, crate::ast::AssignOp::Assign, value) {
                errors.push(e);
            }
        }
        if let Some(var) = rc {
            if let Err(e) = self.assign(var, crate::ast::AssignOp::Assign, Value::Int(status)) {
                errors.push(e);
            }
        }
        match errors.is_empty() {
            true => Ok(()),
            false => Err(errors),
        }
    }

    /// RETURN [n]: inside a procedure its status (an int; NULL is 0).
    pub(super) fn return_value(&mut self, value: Option<&Expr>) -> Result<(), Errors> {
        let Some(e) = value.filter(|_| !self.procedures.is_empty()) else {
            return Ok(());
        };
        let v = self.eval(e, None).map_err(|e| vec![e])?;
        let v = convert(&v, SqlType::Int, None).map_err(|e| vec![e])?;
        self.return_status = Some(match v {
            Value::Int(i) => i,
            _ => 0,
        });
        Ok(())
    }

    /// Invariant 3: the parameters' values in order, and the OUTPUT arguments' variables.
    fn bind(
        &mut self,
        m: &ModuleEntry,
        def: &ProcedureDefinition,
        args: &[ExecArg],
        values: Vec<Value>,
    ) -> Result<Bound, Errors> {
        let params = &def.parameters;
        let mut given: Vec<Option<Value>> = vec![None; params.len()];
        let mut outputs = Vec::new();
        let mut named = false;
        for (i, (arg, value)) in args.iter().zip(values).enumerate() {
            let at = match &arg.name {
                None if named => return Err(vec![msg(119, &[&(i + 1)])]),
                None if i >= params.len() => return Err(vec![msg(8144, &[&m.name])]),
                None => i,
                Some(n) => {
                    named = true;
                    let found = params.iter().position(|p| p.name.eq_ignore_ascii_case(n));
                    found.ok_or_else(|| vec![msg(8145, &[n, &m.name])])?
                }
            };
            if arg.output {
                if !params[at].output {
                    return Err(vec![msg(8162, &[&params[at].name])]);
                }
                match &arg.value {
                    Expr::Variable(v) => outputs.push((at, v.clone())),
                    _ => return Err(vec![msg(179, &[])]),
                }
            }
            if !matches!(arg.value, Expr::Default) {
                given[at] = Some(value);
            }
        }
        let mut bound = Vec::with_capacity(params.len());
        for (p, v) in params.iter().zip(given) {
            let v = match (v, &p.default) {
                (Some(v), _) => v,
                (None, Some((e, _))) => self.eval(e, None).map_err(|e| vec![e])?,
                (None, None) => return Err(vec![msg(201, &[&m.name, &p.name])]),
            };
            let t = p.data_type.sql_type;
            let v = convert(&v, t, None).map_err(|e| vec![e])?;
            bound.push((p.name.to_lowercase(), t, v));
        }
        Ok(Bound {
            values: bound,
            outputs,
        })
    }

    /// Runs `f` in a scope of its own: only `params` (lower-case names) as variables, no
    /// declaration sites and no table variables of the caller's; its table variables end
    /// with it and the caller's come back. Returns `f`'s result and the values the
    /// variables `names` hold at its end (NULL for one that is gone). A procedure's body,
    /// EXEC (@sql) and sp_executesql run so.
    pub(super) fn in_own_scope<R>(
        &mut self,
        params: Vec<(String, SqlType, Value)>,
        names: &[String],
        f: impl FnOnce(&mut Session) -> R,
    ) -> (R, Vec<Value>) {
        let vars: HashMap<String, (SqlType, Value)> =
            params.into_iter().map(|(n, t, v)| (n, (t, v))).collect();
        let saved_vars = std::mem::replace(&mut self.vars, vars);
        let saved_declared = std::mem::take(&mut self.declared_by);
        let saved_tables = self.take_table_variables();
        let r = f(self);
        let ended = names
            .iter()
            .map(|n| self.vars.get(n).map_or(Value::Null, |v| v.1.clone()))
            .collect();
        // Its table variables end with it (table_variables.rs invariant 2).
        self.drop_table_variables();
        self.restore_table_variables(saved_tables);
        self.vars = saved_vars;
        self.declared_by = saved_declared;
        (r, ended)
    }

    /// Invariant 2: the body in its own scope; its RETURN status (0 without one) and the
    /// parameters' values at its end.
    fn run_body(
        &mut self,
        m: &ModuleEntry,
        def: &ProcedureDefinition,
        params: Vec<(String, SqlType, Value)>,
        out: &mut Out,
    ) -> (i32, Vec<Value>) {
        let names: Vec<String> = params.iter().map(|p| p.0.clone()).collect();
        let temps_before = self.temporary_names();
        // SET options the body changes hold until it ends, as in SQL Server.
        let saved_options = (self.options, self.nocount);
        self.procedures.push((m.object_id, m.name.clone()));
        self.return_status = None;
        let (flow, results) = self.in_own_scope(params, &names, |s| s.run_block(&def.body, out));
        self.procedure_aborted = matches!(flow, Flow::AbortBatch);
        let status = self.return_status.take().unwrap_or(0);
        self.procedures.pop();
        self.drop_temporary_tables_since(&temps_before);
        (self.options, self.nocount) = saved_options;
        (status, results)
    }
}
