//! Lowers database-level statements from the AST to the plain specs of `ddl`, and routes
//! them. Statements whose engine support has not landed yet are refused with a clear error
//! rather than silently accepted.

use super::ddl::{AlterAction, CreateSpec, FileSpec, FilegroupProperty, Growth, MaxSize};
use super::{Flow, Out, Output, Session};
use crate::ast::{
    self, AlterDatabaseAction, DatabaseOption, FilegroupChange, Size, Statement, StatementKind,
};
use crate::messages::{msg, SqlError};
use extentdb_format::catalog::RecoveryModel;

/// A filespec from the AST, rejecting units that make no sense where they appear.
fn file_spec(f: &ast::FileSpec) -> Result<FileSpec, Vec<SqlError>> {
    let bad = |what: &str| vec![msg(102, &[&what])];
    let size_bytes = match f.size {
        None => None,
        Some(Size::Bytes(b)) => Some(b),
        Some(Size::Percent(_)) => return Err(bad("%")),
        Some(Size::Unlimited) => return Err(bad("UNLIMITED")),
    };
    let max_size = match f.max_size {
        None => None,
        Some(Size::Bytes(b)) => Some(MaxSize::Bytes(b)),
        Some(Size::Unlimited) => Some(MaxSize::Unlimited),
        Some(Size::Percent(_)) => return Err(bad("%")),
    };
    let growth = match f.file_growth {
        None => None,
        Some(Size::Bytes(b)) => Some(Growth::Bytes(b)),
        Some(Size::Percent(p)) => Some(Growth::Percent(p)),
        Some(Size::Unlimited) => return Err(bad("UNLIMITED")),
    };
    Ok(FileSpec {
        name: f.name.clone(),
        filename: f.filename.clone(),
        size_bytes,
        max_size,
        growth,
        new_name: f.new_name.clone(),
    })
}

fn file_specs(v: &[ast::FileSpec]) -> Result<Vec<FileSpec>, Vec<SqlError>> {
    v.iter().map(file_spec).collect()
}

fn alter_action(a: &AlterDatabaseAction) -> Result<AlterAction, Vec<SqlError>> {
    Ok(match a {
        AlterDatabaseAction::AddFile { files, filegroup } => AlterAction::AddFiles {
            files: file_specs(files)?,
            filegroup: filegroup.clone(),
        },
        AlterDatabaseAction::AddLogFile { files } => AlterAction::AddLogFiles(file_specs(files)?),
        AlterDatabaseAction::AddFilegroup { name } => AlterAction::AddFilegroup(name.clone()),
        AlterDatabaseAction::RemoveFilegroup { name } => AlterAction::RemoveFilegroup(name.clone()),
        AlterDatabaseAction::RemoveFile { logical_name } => {
            AlterAction::RemoveFile(logical_name.clone())
        }
        AlterDatabaseAction::ModifyFile(f) => {
            if f.name.is_none() {
                return Err(vec![msg(5041, &[&""])]);
            }
            if f.filename.is_some() {
                // Moving a file needs the database taken offline and reopened, which is
                // not built: refused, never recorded and ignored.
                return Err(vec![not_yet(
                    "ALTER DATABASE ... MODIFY FILE (FILENAME = ...) (moving a file)",
                )]);
            }
            if f.offline {
                return Err(vec![not_yet("ALTER DATABASE ... MODIFY FILE ... OFFLINE")]);
            }
            AlterAction::ModifyFile(file_spec(f)?)
        }
        AlterDatabaseAction::ModifyName { new_name } => AlterAction::ModifyName(new_name.clone()),
        AlterDatabaseAction::ModifyFilegroup { name, change } => {
            let property = match change {
                FilegroupChange::Default => FilegroupProperty::Default,
                FilegroupChange::ReadOnly => FilegroupProperty::ReadOnly(true),
                FilegroupChange::ReadWrite => FilegroupProperty::ReadOnly(false),
                FilegroupChange::AutogrowSingleFile => FilegroupProperty::AutogrowSingleFile,
                FilegroupChange::AutogrowAllFiles => FilegroupProperty::AutogrowAllFiles,
                FilegroupChange::Name(n) => FilegroupProperty::Name(n.clone()),
                FilegroupChange::Rebalance => return Ok(AlterAction::Rebalance(name.clone())),
            };
            AlterAction::ModifyFilegroup {
                name: name.clone(),
                property,
            }
        }
        AlterDatabaseAction::Set { options, .. } => {
            let mut action = AlterAction::SetOption;
            for o in options {
                if let Some(state) = state_option(o) {
                    // A state alone is routed to `set_database_state` before this; beside
                    // other options it is refused rather than half done.
                    return Err(vec![not_yet(&format!(
                        "ALTER DATABASE ... SET {state} together with other options"
                    ))]);
                }
                if let DatabaseOption::Recovery(rm) = o {
                    action = AlterAction::SetRecovery(match rm {
                        ast::RecoveryModel::Simple => RecoveryModel::Simple,
                        ast::RecoveryModel::Full => RecoveryModel::Full,
                        ast::RecoveryModel::BulkLogged => RecoveryModel::BulkLogged,
                    });
                }
            }
            action
        }
        AlterDatabaseAction::Collate { .. } => AlterAction::SetOption,
    })
}

/// The state a SET option asks for (OFFLINE, ONLINE, EMERGENCY), if it is one.
fn state_option(o: &DatabaseOption) -> Option<&'static str> {
    match o {
        DatabaseOption::Offline => Some("OFFLINE"),
        DatabaseOption::Online => Some("ONLINE"),
        DatabaseOption::Emergency => Some("EMERGENCY"),
        _ => None,
    }
}

/// The error for statements the engine does not run yet (their issue is open): SQL
/// Server's number for a statement or option a version does not support (40517), never
/// 50000, which is a user's RAISERROR.
pub fn not_yet(what: &str) -> SqlError {
    SqlError {
        number: 40517,
        severity: 16,
        state: 1,
        text: format!("extentdb does not support {what} yet."),
        line: 0,
        procedure: None,
    }
}

impl Session {
    pub(super) fn lowered(&mut self, s: &Statement, out: &mut Out) -> Result<Flow, Vec<SqlError>> {
        match &s.kind {
            StatementKind::CreateDatabase(c) => {
                if c.for_attach {
                    return Err(vec![not_yet("CREATE DATABASE ... FOR ATTACH")]);
                }
                let spec = CreateSpec {
                    name: c.name.clone(),
                    primary: file_specs(&c.primary_files)?,
                    filegroups: c
                        .filegroups
                        .iter()
                        .map(|g| Ok((g.name.clone(), g.default, file_specs(&g.files)?)))
                        .collect::<Result<_, Vec<SqlError>>>()?,
                    log: file_specs(&c.log_files)?,
                };
                self.create_database(&spec)?;
            }
            StatementKind::AlterDatabase { name, action } => {
                let name = if name.eq_ignore_ascii_case("CURRENT") {
                    self.current_db_name()
                } else {
                    name.clone()
                };
                if let AlterDatabaseAction::Set {
                    options,
                    termination,
                } = action
                {
                    if let [o] = options.as_slice() {
                        if state_option(o).is_some() {
                            self.set_database_state(&name, o, *termination, out)?;
                            return Ok(Flow::Normal);
                        }
                    }
                }
                let action = alter_action(action)?;
                for info in self.alter_database(&name, &action)? {
                    out.push(Output::Info(info));
                }
            }
            StatementKind::DropDatabase { if_exists, names } => {
                for n in names {
                    self.drop_database(n, *if_exists)?;
                }
            }
            StatementKind::Checkpoint { .. } => {
                // CHECKPOINT [duration]: the duration is a hint SQL Server may ignore; so do we.
                let db = self.engine.instance.database(self.database_id);
                if let Some(db) = db {
                    self.require_db_permission(
                        self.database_id,
                        &db.read().unwrap(),
                        "CHECKPOINT",
                    )?;
                    // Online: other sessions keep working while the pages are written.
                    extentdb_storage::checkpoint::checkpoint_online(&db)
                        .map_err(|e| super::errors::map(&e, super::errors::Context::Other))?;
                }
            }
            StatementKind::Kill {
                target,
                status_only: false,
            } => self.kill(target)?,
            StatementKind::CreateLogin {
                name,
                from_windows,
                options,
            } => self.create_login(name, *from_windows, options)?,
            StatementKind::AlterLogin {
                name,
                enable,
                options,
            } => self.alter_login(name, *enable, options)?,
            StatementKind::DropLogin { name } => self.drop_login(name)?,
            StatementKind::AlterServerRole { role, add, member } => {
                self.alter_server_role(role, *add, member)?
            }
            StatementKind::CreateUser { name, login } => self.create_user(name, login)?,
            StatementKind::DropUser { if_exists, name } => self.drop_user(name, *if_exists)?,
            StatementKind::AlterRole { role, add, member } => {
                self.alter_role(role, *add, member)?
            }
            StatementKind::Permission(p) => self.permission_statement(p)?,
            StatementKind::Backup(b) => self.backup(b, out)?,
            StatementKind::Restore(r) => self.restore(r, out)?,
            other => return Err(vec![not_yet(statement_name(other))]),
        }
        Ok(Flow::Normal)
    }
}

fn statement_name(k: &StatementKind) -> &'static str {
    use StatementKind as K;
    match k {
        K::CreateTable(_) => "CREATE TABLE",
        K::CreateIndex(_) => "CREATE INDEX",
        K::DropTable { .. } => "DROP TABLE",
        K::TruncateTable { .. } => "TRUNCATE TABLE",
        K::DropIndex { .. } => "DROP INDEX",
        K::Insert(_) => "INSERT",
        K::Update(_) => "UPDATE",
        K::Delete(_) => "DELETE",
        K::BeginTransaction { .. }
        | K::Commit { .. }
        | K::Rollback { .. }
        | K::SaveTransaction { .. } => "transactions",
        K::Backup(_) => "BACKUP",
        K::Restore(_) => "RESTORE",
        K::CreateLogin { .. } | K::AlterLogin { .. } => "logins",
        K::Kill { .. } => "KILL",
        K::TryCatch { .. } => "TRY/CATCH",
        K::Raiserror { .. } | K::Throw(_) => "RAISERROR/THROW",
        K::SetIdentityInsert { .. } => "SET IDENTITY_INSERT",
        _ => "this statement",
    }
}
