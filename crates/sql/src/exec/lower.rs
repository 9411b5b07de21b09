//! Lowers database-level statements from the AST to the plain specs of `ddl`, and routes
//! them. Statements whose engine support has not landed yet are refused with a clear error
//! rather than silently accepted.

use super::ddl::{AlterAction, CreateSpec, FileSpec, FilegroupProperty, Growth, MaxSize};
use super::{Flow, Out, Output, Session};
use crate::ast::{
    self, AlterDatabaseAction, DatabaseOption, FilegroupChange, Size, Statement, StatementKind,
};
use crate::messages::{msg, SqlError};
use extentdb_format::catalog::{RecoveryModel, UserAccess};

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
            if let Some(state) = options.iter().find_map(state_option) {
                // A state alone is routed to `set_database_state` before this; beside other
                // options it is refused rather than half done.
                return Err(vec![not_yet(&format!(
                    "ALTER DATABASE ... SET {state} together with other options"
                ))]);
            }
            let mut action = AlterAction::Unchanged;
            for o in options {
                match set_option(o)? {
                    SetEffect::Unchanged => {}
                    SetEffect::Recovery(rm) if matches!(action, AlterAction::Unchanged) => {
                        action = AlterAction::SetRecovery(rm);
                    }
                    _ => return Err(vec![more_than_one_change()]),
                }
            }
            action
        }
        AlterDatabaseAction::Collate { collation } => {
            if !collation.eq_ignore_ascii_case(SERVER_COLLATION) {
                return Err(vec![not_yet(&format!(
                    "ALTER DATABASE ... COLLATE {collation} (every database uses the server's collation, {SERVER_COLLATION})"
                ))]);
            }
            AlterAction::Unchanged
        }
    })
}

/// The collation of the server and of every database (sys.databases.collation_name; the
/// TDS collation the server announces, `extentdb_tds::types::COLLATION`).
pub(super) const SERVER_COLLATION: &str = "SQL_Latin1_General_CP1_CI_AS";
/// The compatibility level every database runs at (sys.databases.compatibility_level).
pub(super) const COMPATIBILITY_LEVEL: &str = "160";

/// What one ALTER DATABASE ... SET option does in extentdb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SetEffect {
    /// The value asked for is what extentdb always does: accepted, nothing changes.
    Unchanged,
    /// SET RECOVERY: the database's recovery model changes.
    Recovery(RecoveryModel),
    /// SET SINGLE_USER | MULTI_USER: who may use the database (db_state.rs).
    UserAccess(UserAccess),
}

fn more_than_one_change() -> SqlError {
    not_yet("ALTER DATABASE ... SET with more than one of RECOVERY, SINGLE_USER and MULTI_USER")
}

/// Lowers one ALTER DATABASE ... SET option (the states OFFLINE, ONLINE and EMERGENCY are
/// routed before this). Nothing is accepted and ignored: an option is built, or the value
/// asked for is what extentdb always does (accepted, nothing changes), or it is refused
/// with 40517 naming the option and the value, and then the statement changes nothing.
///
/// | option | accepted | refused (40517) | why |
/// |---|---|---|---|
/// | RECOVERY | SIMPLE, FULL, BULK_LOGGED | — | built: recovery_model changes |
/// | SINGLE_USER | yes, WITH ROLLBACK IMMEDIATE / AFTER n / NO_WAIT | master, tempdb, model (5058) | built: one session at a time (924 for others), kept in master |
/// | MULTI_USER | yes | — | built: lifts SINGLE_USER; already MULTI_USER changes nothing |
/// | RESTRICTED_USER | — | always | not built (membership check on entry and sessions ended by role) |
/// | READ_WRITE | yes | — | every database is read-write |
/// | READ_ONLY | — | always | not built (database-wide read-only; Msg 3906 on writes) |
/// | AUTO_CLOSE | OFF | ON | a database stays open while the instance runs |
/// | AUTO_SHRINK | OFF | ON | files shrink only by DBCC SHRINKFILE |
/// | AUTO_CREATE_STATISTICS | OFF | ON | statistics are made only by CREATE INDEX and CREATE STATISTICS (plans read them: cardinality.rs), never by a plan: OFF is what it does; ON would promise statistics it never makes |
/// | AUTO_UPDATE_STATISTICS | OFF | ON | statistics are rebuilt only by UPDATE STATISTICS, sp_updatestats and ALTER INDEX REBUILD, never before a plan |
/// | AUTO_UPDATE_STATISTICS_ASYNC | OFF | ON | as AUTO_CREATE_STATISTICS |
/// | PAGE_VERIFY | CHECKSUM | NONE, TORN_PAGE_DETECTION | every page carries a CRC-32C that every read verifies (FORMAT.md, page header) |
/// | ALLOW_SNAPSHOT_ISOLATION | OFF | ON | no row versioning yet (issue 21) |
/// | READ_COMMITTED_SNAPSHOT | OFF | ON | no row versioning yet (issue 25) |
/// | TRUSTWORTHY | OFF | ON | nothing in a database runs under an impersonated context |
/// | COMPATIBILITY_LEVEL | 160 | any other level | extentdb has one behaviour, reported as 160 |
/// | COLLATE (not a SET option) | SQL_Latin1_General_CP1_CI_AS | any other | one collation for the server and every database |
/// | any other option | — | every value | not built |
///
/// The visible settings are sys.databases' columns (user_access, recovery_model,
/// page_verify_option, compatibility_level, collation_name, is_read_only, is_auto_close_on,
/// is_auto_shrink_on, is_auto_create_stats_on, is_auto_update_stats_on,
/// is_auto_update_stats_async_on, snapshot_isolation_state,
/// is_read_committed_snapshot_on, is_trustworthy_on); the test `database_options.rs` walks
/// every row through TDS.
pub(super) fn set_option(o: &DatabaseOption) -> Result<SetEffect, Vec<SqlError>> {
    let refused = |what: &str, why: &str| -> Result<SetEffect, Vec<SqlError>> {
        Err(vec![not_yet(&format!(
            "ALTER DATABASE ... SET {what} ({why})"
        ))])
    };
    let (name, value) = match o {
        DatabaseOption::Recovery(rm) => {
            return Ok(SetEffect::Recovery(match rm {
                ast::RecoveryModel::Simple => RecoveryModel::Simple,
                ast::RecoveryModel::Full => RecoveryModel::Full,
                ast::RecoveryModel::BulkLogged => RecoveryModel::BulkLogged,
            }))
        }
        DatabaseOption::SingleUser => return Ok(SetEffect::UserAccess(UserAccess::SingleUser)),
        DatabaseOption::MultiUser => return Ok(SetEffect::UserAccess(UserAccess::MultiUser)),
        DatabaseOption::RestrictedUser => {
            return Ok(SetEffect::UserAccess(UserAccess::RestrictedUser))
        }
        DatabaseOption::ReadWrite => return Ok(SetEffect::Unchanged),
        DatabaseOption::ReadOnly => return refused("READ_ONLY", "every database is read-write"),
        DatabaseOption::Offline | DatabaseOption::Online | DatabaseOption::Emergency => {
            unreachable!("states are routed to set_database_state")
        }
        DatabaseOption::Other { name, value } => (name.as_str(), value.as_deref()),
    };
    let value_text = value.unwrap_or("").to_ascii_uppercase();
    let off_only = |why: &str| {
        if value_text == "OFF" {
            Ok(SetEffect::Unchanged)
        } else {
            refused(&format!("{name} {value_text}"), why)
        }
    };
    match name {
        "AUTO_CLOSE" => off_only("a database stays open while the instance runs"),
        "AUTO_SHRINK" => off_only("files shrink only by DBCC SHRINKFILE"),
        "AUTO_CREATE_STATISTICS" | "AUTO_UPDATE_STATISTICS" | "AUTO_UPDATE_STATISTICS_ASYNC" => {
            off_only("plans neither create nor update statistics")
        }
        "ALLOW_SNAPSHOT_ISOLATION" | "READ_COMMITTED_SNAPSHOT" => {
            off_only("there is no row versioning")
        }
        "TRUSTWORTHY" => off_only("nothing runs under an impersonated context"),
        "PAGE_VERIFY" if value_text == "CHECKSUM" => Ok(SetEffect::Unchanged),
        "PAGE_VERIFY" => refused(
            &format!("PAGE_VERIFY {value_text}"),
            "every page is verified by its checksum",
        ),
        "COMPATIBILITY_LEVEL" if value_text == COMPATIBILITY_LEVEL => Ok(SetEffect::Unchanged),
        "COMPATIBILITY_LEVEL" => refused(
            &format!("COMPATIBILITY_LEVEL = {value_text}"),
            &format!("every database runs at level {COMPATIBILITY_LEVEL}"),
        ),
        _ => refused(
            format!("{name} {value_text}").trim_end(),
            "the option is not built",
        ),
    }
}

/// The user access a SET list changes to, if it holds SINGLE_USER, MULTI_USER or
/// RESTRICTED_USER; every other option in the list must then change nothing (each is
/// checked, so a refused one refuses the whole statement first).
fn user_access_change(options: &[DatabaseOption]) -> Result<Option<UserAccess>, Vec<SqlError>> {
    if options.iter().any(|o| state_option(o).is_some()) {
        return Ok(None); // refused with its own message by `alter_action`
    }
    let mut access = None;
    let mut changes = 0;
    for o in options {
        match set_option(o)? {
            SetEffect::Unchanged => {}
            SetEffect::UserAccess(a) => {
                access = Some(a);
                changes += 1;
            }
            SetEffect::Recovery(_) => changes += 1,
        }
    }
    if access.is_some() && changes > 1 {
        return Err(vec![more_than_one_change()]);
    }
    Ok(access)
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
    crate::messages::msg(40517, &[&what])
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
                    if let Some(access) = user_access_change(options)? {
                        self.set_user_access(&name, access, *termination, out)?;
                        return Ok(Flow::Normal);
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
            StatementKind::Reconfigure { with_override } => self.reconfigure(*with_override)?,
            StatementKind::Backup(b) => self.backup(b, out)?,
            StatementKind::Restore(r) => self.restore(r, out)?,
            other => return Err(vec![not_yet(statement_name(other))]),
        }
        Ok(Flow::Normal)
    }
}

pub(super) fn statement_name(k: &StatementKind) -> &'static str {
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
        K::Merge(_) => "MERGE",
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
