//! ALTER TABLE t [WITH CHECK | WITH NOCHECK] { CHECK | NOCHECK } CONSTRAINT { ALL | name
//! [, ...] }: CHECK and FOREIGN KEY constraints enabled or disabled (sys.check_constraints
//! and sys.foreign_keys is_disabled, is_not_trusted), as SQL Server's.
//!
//! NOCHECK disables each constraint named: it is no longer checked (check_constraints.rs
//! and foreign_keys.rs read only enabled ones) and is not trusted. CHECK enables it; WITH
//! CHECK first checks every row of the table against it (547 and nothing changes) and
//! then trusts it, while a plain CHECK (WITH NOCHECK, the default when enabling) leaves
//! its trust as it was. A FOREIGN KEY whose referenced key's index is disabled (ALTER
//! INDEX ... DISABLE, alter_index.rs) cannot be enabled (Msg 1989).
//!
//! Invariants:
//! 1. Every name is resolved and every check made before anything changes, so a refused
//!    statement (4917, 11415, 1989, 547, each followed by 4916 where SQL Server adds it)
//!    changes nothing; the change itself is one catalog save (storage's constraint.rs
//!    invariant 5).
//! 2. The table is under Sch-M (`altered_table`), and so is each parent table whose key
//!    WITH CHECK reads: no writer of either runs between the check and the catalog change
//!    (foreign_keys.rs invariant 5, as ALTER TABLE ... ADD).

use extentdb_format::catalog::{ForeignKey, TableEntry};
use extentdb_storage::constraint::ConstraintState;
use extentdb_storage::Database;

use super::errors;
use super::tables::TableRef;
use super::Session;
use crate::ast::ObjectName;
use crate::messages::{msg, SqlError};

/// One constraint a statement names.
#[derive(Clone)]
enum Named {
    Check(u32),
    ForeignKey(ForeignKey),
}

impl Session {
    /// ALTER TABLE ... { CHECK | NOCHECK } CONSTRAINT (the module's doc).
    pub(super) fn alter_table_constraint_state(
        &mut self,
        name: &ObjectName,
        check_existing: Option<bool>,
        enable: bool,
        names: Option<&[String]>,
    ) -> Result<(), Vec<SqlError>> {
        let t = self.altered_table(name)?;
        let named = {
            let d = t.db.read().unwrap();
            resolve(&d, &t.entry, names)?
        };
        let validate = enable && check_existing == Some(true);
        if enable {
            let d = t.db.read().unwrap();
            for n in &named {
                if let Named::ForeignKey(k) = n {
                    refuse_disabled_key(&d, k)?;
                }
            }
        }
        if validate {
            self.validate(&t, &named)?;
        }
        let states: Vec<ConstraintState> = named
            .iter()
            .map(|n| state_after(&t.entry, n, enable, validate))
            .collect();
        t.db.set_constraint_states(t.entry.object_id, &states)
            .map_err(|e| errors::map(&e, errors::Context::Other))
    }

    /// WITH CHECK: every row of `t` against each constraint in `named`, each parent of a
    /// FOREIGN KEY under Sch-M first (invariant 2).
    fn validate(&mut self, t: &TableRef, named: &[Named]) -> Result<(), Vec<SqlError>> {
        for n in named {
            match n {
                Named::Check(id) => {
                    let k = t.entry.checks.iter().find(|k| k.object_id == *id);
                    let k = k.expect("resolved from this entry").clone();
                    self.check_existing_constraint(t, &k)?;
                }
                Named::ForeignKey(k) => {
                    if k.referenced_object_id != t.entry.object_id {
                        let parent = self.table_by_id_ref(t, k.referenced_object_id)?;
                        self.schema_modification(&parent)?;
                    }
                    // Checked as the enabled key it is about to be.
                    let enabled = ForeignKey {
                        is_disabled: false,
                        ..k.clone()
                    };
                    self.check_existing_children(t, &enabled)?;
                }
            }
        }
        Ok(())
    }

    /// Table `object_id` of `t`'s database, as a `TableRef` (a FOREIGN KEY's parent).
    fn table_by_id_ref(&mut self, t: &TableRef, object_id: u32) -> Result<TableRef, Vec<SqlError>> {
        let parent = {
            let d = t.db.read().unwrap();
            let p = d
                .table_by_id(object_id)
                .ok_or_else(|| vec![msg(208, &[&object_id])])?;
            ObjectName {
                parts: vec![t.db_name.to_string(), p.schema_name.clone(), p.name.clone()],
            }
        };
        self.find_table(&parent)?
            .ok_or_else(|| vec![msg(208, &[&parent.joined()])])
    }
}

/// The constraints `names` names on `entry` (None: ALL, its CHECK constraints then its
/// FOREIGN KEYs). A name that is no constraint of the table is 4917, one that is another
/// kind of constraint or object (a PRIMARY KEY, a UNIQUE constraint) 11415, each with 4916.
fn resolve(
    d: &Database,
    entry: &TableEntry,
    names: Option<&[String]>,
) -> Result<Vec<Named>, Vec<SqlError>> {
    let Some(names) = names else {
        let checks = entry.checks.iter().map(|k| Named::Check(k.object_id));
        let keys = entry.foreign_keys.iter().cloned().map(Named::ForeignKey);
        return Ok(checks.chain(keys).collect());
    };
    let mut out = Vec::with_capacity(names.len());
    for n in names {
        let is = |x: &str| x.eq_ignore_ascii_case(n);
        if let Some(k) = entry.checks.iter().find(|k| is(&k.name)) {
            out.push(Named::Check(k.object_id));
        } else if let Some(k) = entry.foreign_keys.iter().find(|k| is(&k.name)) {
            out.push(Named::ForeignKey(k.clone()));
        } else if is_other_constraint(d, entry, n) {
            return Err(vec![msg(11415, &[n]), msg(4916, &[])]);
        } else {
            return Err(vec![msg(4917, &[n]), msg(4916, &[])]);
        }
    }
    Ok(out)
}

/// Whether `name` is `entry`'s PRIMARY KEY or one of its UNIQUE constraints' indexes.
fn is_other_constraint(d: &Database, entry: &TableEntry, name: &str) -> bool {
    let is = |x: &str| x.eq_ignore_ascii_case(name);
    let primary = entry.primary_key.as_ref().is_some_and(|(k, _)| is(k));
    let unique = d
        .indexes_of(entry.object_id)
        .any(|ix| ix.index_of.as_ref().is_some_and(|i| i.unique_constraint) && is(&ix.name));
    primary || unique
}

/// Msg 1989 when FOREIGN KEY `k`'s referenced key is enforced by a disabled index: a
/// nonclustered one, or the clustered PRIMARY KEY of a table whose clustered index is
/// disabled (storage's index.rs invariant 10).
fn refuse_disabled_key(d: &Database, k: &ForeignKey) -> Result<(), Vec<SqlError>> {
    let parent = d.table_by_id(k.referenced_object_id);
    let clustered = parent
        .filter(|p| k.key_index_id == 1 && p.is_disabled)
        .and_then(|p| p.primary_key.as_ref().map(|(n, _)| n.clone()));
    let disabled = d.indexes_of(k.referenced_object_id).find(|ix| {
        let of = ix.index_of.as_ref().expect("an index entry");
        of.index_id == k.key_index_id && of.is_disabled
    });
    match clustered.or(disabled.map(|ix| ix.name.clone())) {
        Some(index) => Err(vec![msg(1989, &[&k.name, &index]), msg(4916, &[])]),
        None => Ok(()),
    }
}

/// What constraint `n` of `entry` becomes: enabled (trusted only when `validated`, else
/// as trusted as it was) or disabled and not trusted.
fn state_after(entry: &TableEntry, n: &Named, enable: bool, validated: bool) -> ConstraintState {
    let (object_id, was_not_trusted) = match n {
        Named::Check(id) => {
            let k = entry.checks.iter().find(|k| k.object_id == *id);
            (*id, k.expect("resolved from this entry").is_not_trusted)
        }
        Named::ForeignKey(k) => (k.object_id, k.is_not_trusted),
    };
    ConstraintState {
        object_id,
        is_disabled: !enable,
        is_not_trusted: !enable || (!validated && was_not_trusted),
    }
}
