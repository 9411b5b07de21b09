//! SQL Server's permission model, the part a DBA relies on: who a session is in the server
//! (a login, its fixed server roles and server permissions) and in each database (a user
//! mapped to the login by sid, dbo, or guest; its fixed database roles and the permissions
//! GRANT / DENY / REVOKE recorded in the database's catalog), and the checks statements
//! make.
//!
//! Invariants:
//! 1. A login with no user in a database (and not sysadmin, not the database's owner, and
//!    not entering master, msdb or tempdb as guest) cannot use it: Msg 916, for USE, for the
//!    login's database, and for a three-part name.
//! 2. DENY wins over every GRANT and every role but sysadmin and dbo (SQL Server's rule).
//! 3. Every permission check is a pure function of the login (read from the instance at
//!    the check, so ALTER SERVER ROLE and DROP LOGIN take effect at once) and of the
//!    database's catalog under its lock.

use extentdb_format::principals::{
    self, PermissionClass, PermissionEntry, PermissionState, Security, DBO, GUEST, PUBLIC,
};
use extentdb_storage::instance::{MASTER_ID, MSDB_ID, TEMPDB_ID};
use extentdb_storage::logins::{Login, SA_SID};
use extentdb_storage::Database;

use super::Session;
use crate::messages::{msg, SqlError};

/// The server permissions each fixed server role carries (sysadmin carries all).
const SERVER_ROLE_PERMISSIONS: &[(&str, &[&str])] = &[
    (
        "serveradmin",
        &[
            "ALTER SETTINGS",
            "SHUTDOWN",
            "ALTER SERVER STATE",
            "VIEW SERVER STATE",
        ],
    ),
    ("securityadmin", &["ALTER ANY LOGIN"]),
    (
        "processadmin",
        &[
            "ALTER ANY CONNECTION",
            "ALTER SERVER STATE",
            "VIEW SERVER STATE",
        ],
    ),
    ("setupadmin", &["ALTER ANY LINKED SERVER"]),
    ("bulkadmin", &["ADMINISTER BULK OPERATIONS"]),
    ("diskadmin", &["ALTER RESOURCES"]),
    ("dbcreator", &["CREATE ANY DATABASE", "ALTER ANY DATABASE"]),
];

/// Server permissions a GRANT may name.
pub(super) const SERVER_PERMISSIONS: &[&str] = &[
    "CONTROL SERVER",
    "VIEW SERVER STATE",
    "ALTER SERVER STATE",
    "ALTER SETTINGS",
    "SHUTDOWN",
    "ALTER ANY LOGIN",
    "ALTER ANY CONNECTION",
    "ALTER ANY DATABASE",
    "CREATE ANY DATABASE",
    "ALTER RESOURCES",
    "ADMINISTER BULK OPERATIONS",
    "ALTER ANY LINKED SERVER",
    "CONNECT SQL",
    "VIEW ANY DATABASE",
];

/// Database permissions a GRANT may name (on the database, or the first five on a table).
pub(super) const DATABASE_PERMISSIONS: &[&str] = &[
    "SELECT",
    "INSERT",
    "UPDATE",
    "DELETE",
    "ALTER",
    "CONTROL",
    "CONNECT",
    "CREATE TABLE",
    "CREATE PROCEDURE",
    "EXECUTE",
    "BACKUP DATABASE",
    "BACKUP LOG",
    "CHECKPOINT",
    "ALTER ANY USER",
    "ALTER ANY ROLE",
    "VIEW DEFINITION",
];

/// Permissions on a table.
pub(super) const OBJECT_PERMISSIONS: &[&str] =
    &["SELECT", "INSERT", "UPDATE", "DELETE", "ALTER", "CONTROL"];

/// Permissions on a stored procedure.
pub(super) const PROCEDURE_PERMISSIONS: &[&str] =
    &["EXECUTE", "ALTER", "CONTROL", "VIEW DEFINITION"];

/// The fixed database roles' permissions in their database (db_owner carries all).
const DATABASE_ROLE_PERMISSIONS: &[(&str, &[&str])] = &[
    ("db_accessadmin", &["ALTER ANY USER", "CONNECT"]),
    ("db_securityadmin", &["ALTER ANY ROLE", "VIEW DEFINITION"]),
    (
        "db_ddladmin",
        &[
            "CREATE TABLE",
            "CREATE PROCEDURE",
            "ALTER",
            "VIEW DEFINITION",
        ],
    ),
    (
        "db_backupoperator",
        &["BACKUP DATABASE", "BACKUP LOG", "CHECKPOINT"],
    ),
    ("db_datareader", &["SELECT"]),
    ("db_datawriter", &["INSERT", "UPDATE", "DELETE"]),
];

/// Who a session is inside one database.
#[derive(Debug, Clone)]
pub(super) struct DbIdentity {
    /// sys.database_principals.principal_id: dbo (1), guest (2) or a user.
    pub principal_id: u32,
    pub name: String,
    /// Every role it is a member of, public included.
    pub roles: Vec<u32>,
}

impl DbIdentity {
    fn in_role(&self, name: &str) -> bool {
        principals::fixed_role(name).is_some_and(|id| self.roles.contains(&id))
    }
}

impl Session {
    /// The session's login as the instance knows it now (None once dropped).
    pub(super) fn login(&self) -> Option<std::sync::Arc<Login>> {
        self.engine.instance.logins.get(self.login_name())
    }

    /// A member of sysadmin: every check passes.
    pub(super) fn is_sysadmin(&self) -> bool {
        self.login().is_some_and(|l| l.in_role("sysadmin"))
    }

    /// IS_SRVROLEMEMBER for the session's login.
    pub(super) fn in_server_role(&self, role: &str) -> bool {
        self.login()
            .is_some_and(|l| l.in_role("sysadmin") || l.in_role(role))
    }

    /// True if the login holds server permission `perm` (invariant 2).
    pub(super) fn has_server_permission(&self, perm: &str) -> bool {
        let Some(l) = self.login() else { return false };
        if l.in_role("sysadmin") {
            return true;
        }
        let implied = |p: &str| {
            p == perm
                || p == "CONTROL SERVER"
                || (p == "ALTER SERVER STATE" && perm == "VIEW SERVER STATE")
                || (p == "ALTER ANY DATABASE" && perm == "CREATE ANY DATABASE")
        };
        if l.denied.iter().any(|p| implied(p)) {
            return false;
        }
        l.granted.iter().any(|p| implied(p))
            || SERVER_ROLE_PERMISSIONS
                .iter()
                .any(|(role, perms)| l.in_role(role) && perms.iter().any(|p| implied(p)))
    }

    /// Who the session is in `db`, or None (invariant 1).
    pub(super) fn db_identity(&self, db_id: u16, db: &Database) -> Option<DbIdentity> {
        let login = self.login()?;
        let sec = &db.catalog.security;
        if login.in_role("sysadmin") || login.sid == owner_sid(sec) {
            return Some(identity(sec, DBO, "dbo"));
        }
        if let Some(u) = sec.principals.iter().find(|p| p.sid == login.sid) {
            let id = identity(sec, u.principal_id, &u.name);
            let connect = effective(sec, &id, "CONNECT", None);
            return (connect == Some(true)).then_some(id);
        }
        let guest = [MASTER_ID, MSDB_ID, TEMPDB_ID].contains(&db_id);
        guest.then(|| identity(sec, GUEST, "guest"))
    }

    /// Msg 916 unless the session may use database `db`.
    pub(super) fn require_db_access(
        &self,
        db_id: u16,
        db: &Database,
    ) -> Result<DbIdentity, Vec<SqlError>> {
        self.db_identity(db_id, db)
            .ok_or_else(|| vec![msg(916, &[&self.login_name(), &db.name])])
    }

    /// True if the session holds `perm` in `db` (on table `object`, when given).
    pub(super) fn has_db_permission(
        &self,
        db_id: u16,
        db: &Database,
        perm: &str,
        object: Option<u32>,
    ) -> bool {
        self.db_identity(db_id, db)
            .is_some_and(|id| holds(db, &id, perm, object))
    }

    /// Msg 262 (`PERM permission denied in database 'db'.`) unless the session holds it.
    pub(super) fn require_db_permission(
        &self,
        db_id: u16,
        db: &Database,
        perm: &str,
    ) -> Result<(), Vec<SqlError>> {
        let id = self.require_db_access(db_id, db)?;
        if holds(db, &id, perm, None) {
            return Ok(());
        }
        Err(vec![msg(262, &[&perm, &db.name])])
    }

    /// Msg 229 unless the session holds `perm` on table `object_id` named `name`.
    pub(super) fn require_object_permission(
        &self,
        db_id: u16,
        db: &Database,
        perm: &str,
        object_id: u32,
        name: &str,
    ) -> Result<(), Vec<SqlError>> {
        let id = self.require_db_access(db_id, db)?;
        if holds(db, &id, perm, Some(object_id)) {
            return Ok(());
        }
        Err(vec![msg(229, &[&perm, &name, &db.name, &"dbo"])])
    }

    /// True if the session is dbo of `db` or a member of db_owner there.
    pub(super) fn is_db_owner(&self, db_id: u16, db: &Database) -> bool {
        self.db_identity(db_id, db)
            .is_some_and(|id| id.principal_id == DBO || id.in_role("db_owner"))
    }

    /// The session's membership in fixed database role `role` of `db` (IS_MEMBER).
    pub(super) fn in_db_role(&self, db_id: u16, db: &Database, role: &str) -> bool {
        let Some(id) = self.db_identity(db_id, db) else {
            return false;
        };
        if role.eq_ignore_ascii_case("public") {
            return true;
        }
        id.principal_id == DBO && role.eq_ignore_ascii_case("db_owner") || id.in_role(role)
    }
}

/// True if `id` holds `perm` in `db` (on table `object`, when given): dbo always.
fn holds(db: &Database, id: &DbIdentity, perm: &str, object: Option<u32>) -> bool {
    id.principal_id == DBO || effective(&db.catalog.security, id, perm, object) == Some(true)
}

/// The owner's sid: dbo's stored row, else sa's (databases made before principals).
pub(super) fn owner_sid(sec: &Security) -> Vec<u8> {
    sec.principals
        .iter()
        .find(|p| p.principal_id == DBO)
        .map_or_else(|| SA_SID.to_vec(), |p| p.sid.clone())
}

fn identity(sec: &Security, principal_id: u32, name: &str) -> DbIdentity {
    let mut roles = vec![PUBLIC];
    roles.extend(
        sec.role_members
            .iter()
            .filter(|(_, m)| *m == principal_id)
            .map(|(r, _)| *r),
    );
    if principal_id == DBO {
        roles.extend(principals::fixed_role("db_owner"));
    }
    DbIdentity {
        principal_id,
        name: name.to_string(),
        roles,
    }
}

/// Some(false) if denied, Some(true) if granted, None if neither (invariant 2).
fn effective(sec: &Security, id: &DbIdentity, perm: &str, object: Option<u32>) -> Option<bool> {
    let holders: Vec<u32> = std::iter::once(id.principal_id)
        .chain(id.roles.iter().copied())
        .collect();
    let applies = |p: &PermissionEntry| {
        holders.contains(&p.grantee)
            && (p.permission == perm || p.permission == "CONTROL")
            && match p.class {
                PermissionClass::Database => true,
                PermissionClass::Object => object == Some(p.major_id),
            }
    };
    let fixed_deny = (id.in_role("db_denydatareader") && perm == "SELECT")
        || (id.in_role("db_denydatawriter") && matches!(perm, "INSERT" | "UPDATE" | "DELETE"));
    let denied = sec
        .permissions
        .iter()
        .any(|p| applies(p) && p.state == PermissionState::Deny);
    if fixed_deny || denied {
        return Some(false);
    }
    let by_role = id.in_role("db_owner")
        || DATABASE_ROLE_PERMISSIONS
            .iter()
            .any(|(role, perms)| id.in_role(role) && perms.contains(&perm));
    let granted = sec
        .permissions
        .iter()
        .any(|p| applies(p) && p.state != PermissionState::Deny);
    (by_role || granted).then_some(true)
}

impl Session {
    /// Who may run each DBCC command (SQL Server's documented requirements): TRACEON,
    /// TRACEOFF, PAGE, LOGINFO and DBINFO need sysadmin; SQLPERF needs VIEW SERVER STATE;
    /// the checks, SHRINKFILE and SHOWFILESTATS need db_owner of their database.
    pub(super) fn check_dbcc_permission(
        &self,
        name: &str,
        args: &[crate::types::Value],
    ) -> Result<(), Vec<SqlError>> {
        let allowed = self.is_sysadmin()
            || match name {
                // SELECT on its table, checked by the command (show_statistics.rs).
                "TRACESTATUS" | "SHOW_STATISTICS" => true,
                "SQLPERF" => self.has_server_permission("VIEW SERVER STATE"),
                "CHECKDB" | "CHECKALLOC" | "CHECKCATALOG" | "CHECKTABLE" | "CHECKFILEGROUP"
                | "SHRINKFILE" | "SHOWFILESTATS" | "OPENTRAN" => self.owns_dbcc_target(name, args),
                _ => self.is_sysadmin(),
            };
        if allowed {
            return Ok(());
        }
        let user = self
            .current_database()
            .ok()
            .and_then(|(id, db)| self.db_identity(id, &db.read().unwrap()))
            .map_or_else(|| self.login_name().to_string(), |i| i.name);
        Err(vec![msg(2571, &[&user, &name])])
    }

    /// db_owner of the database a DBCC check names first (CHECKDB, CHECKALLOC,
    /// CHECKCATALOG; 0 is the current one), else of the current one. A name that finds no
    /// database passes, for the command to report (2520).
    fn owns_dbcc_target(&self, name: &str, args: &[crate::types::Value]) -> bool {
        use crate::types::Value;
        let named = matches!(name, "CHECKDB" | "CHECKALLOC" | "CHECKCATALOG" | "OPENTRAN");
        let target = match args.first() {
            Some(Value::Text(t)) if named => self.engine.instance.database_by_name(t),
            Some(
                v @ (Value::Int(_) | Value::SmallInt(_) | Value::TinyInt(_) | Value::BigInt(_)),
            ) if named => {
                let id = super::eval::as_i64(v)
                    .ok()
                    .and_then(|n| u16::try_from(n).ok());
                match id {
                    Some(0) => self.current_database().ok(),
                    Some(id) => self.engine.instance.database(id).map(|db| (id, db)),
                    None => return true,
                }
            }
            _ => self.current_database().ok(),
        };
        target.is_none_or(|(id, db)| self.is_db_owner(id, &db.read().unwrap()))
    }
}

impl Session {
    /// The user table `name` names (Msg 208), once the session holds `perm` on it
    /// (Msg 916 for its database, else 229).
    pub(super) fn table_for(
        &self,
        name: &crate::ast::ObjectName,
        perm: &str,
    ) -> Result<super::tables::TableRef, Vec<SqlError>> {
        let t = self.table(name)?;
        if self.owns_tempdb_table(t.db_id, &t.entry.name) {
            return Ok(t);
        }
        let g = t.db.read().unwrap();
        self.require_object_permission(t.db_id, &g, perm, t.entry.object_id, &t.entry.name)?;
        drop(g);
        Ok(t)
    }

    /// ALTER on table `t` (DROP, TRUNCATE); refused with `refusal`.
    pub(super) fn require_table_alter(
        &self,
        t: &super::tables::TableRef,
        refusal: SqlError,
    ) -> Result<(), Vec<SqlError>> {
        if self.owns_tempdb_table(t.db_id, &t.entry.name) {
            return Ok(());
        }
        let g = t.db.read().unwrap();
        self.require_db_access(t.db_id, &g)?;
        if self.has_db_permission(t.db_id, &g, "ALTER", Some(t.entry.object_id)) {
            return Ok(());
        }
        Err(vec![refusal])
    }

    /// What VIEW SERVER STATE decides for view `key`: a dynamic management view needs it
    /// (Msgs 300 and 297), except sys.dm_exec_sessions and sys.dm_exec_requests, which
    /// show a session without it only its own row (true), as SQL Server's do.
    pub(super) fn view_server_state_scope(&self, key: &str) -> Result<bool, Vec<SqlError>> {
        // sys.dm_os_host_info is granted to public, as on SQL Server.
        let public = key == "sys.dm_os_host_info";
        if !key.starts_with("sys.dm_") || public || self.has_server_permission("VIEW SERVER STATE")
        {
            return Ok(false);
        }
        if matches!(key, "sys.dm_exec_sessions" | "sys.dm_exec_requests") {
            return Ok(true);
        }
        Err(vec![
            msg(300, &[&"VIEW SERVER STATE", &"server", &"master"]),
            msg(297, &[]),
        ])
    }

    /// The rows of a session view whose session_id is this session's.
    pub(super) fn own_session_rows(&self, mut r: super::views::Rowset) -> super::views::Rowset {
        let Some(col) = r.columns.iter().position(|(n, _)| n == "session_id") else {
            r.rows.clear();
            return r;
        };
        let me = i64::from(self.spid);
        r.rows.retain(|row| {
            !row[col].is_null() && super::eval::as_i64(&row[col]).is_ok_and(|id| id == me)
        });
        r
    }
}

impl Session {
    /// IS_SRVROLEMEMBER, IS_MEMBER, HAS_PERMS_BY_NAME, SUSER_SNAME / SUSER_NAME,
    /// ORIGINAL_LOGIN and USER_NAME; None for any other name.
    pub(super) fn security_function(
        &self,
        name: &str,
        args: &[crate::types::Value],
    ) -> Option<crate::types::Value> {
        use crate::types::Value;
        let text = |i: usize| {
            args.get(i)
                .filter(|v| !v.is_null())
                .map(super::eval::to_text)
        };
        let bit = |b: bool| Value::Int(b as i32);
        Some(match name {
            "IS_SRVROLEMEMBER" => match (text(0), text(1)) {
                (Some(r), _)
                    if !extentdb_storage::logins::SERVER_ROLES
                        .contains(&r.to_ascii_lowercase().as_str()) =>
                {
                    Value::Null
                }
                (Some(r), None) => bit(self.in_server_role(&r)),
                (Some(r), Some(l)) => match self.engine.instance.logins.get(&l) {
                    Some(l) => bit(l.in_role("sysadmin") || l.in_role(&r)),
                    None => Value::Null,
                },
                (None, _) => Value::Null,
            },
            "IS_MEMBER" => match (text(0), self.current_database()) {
                (Some(r), Ok((id, db)))
                    if principals::fixed_role(&r).is_some() || r.eq_ignore_ascii_case("public") =>
                {
                    bit(self.in_db_role(id, &db.read().unwrap(), &r))
                }
                _ => Value::Null,
            },
            "HAS_PERMS_BY_NAME" => self.has_perms_by_name(text(0), text(1)?, text(2)?),
            "SUSER_SNAME" | "SUSER_NAME" | "ORIGINAL_LOGIN" if args.is_empty() => {
                Value::Text(self.login_name().to_string())
            }
            "USER_NAME" if args.is_empty() => self
                .current_database()
                .ok()
                .and_then(|(id, db)| self.db_identity(id, &db.read().unwrap()))
                .map_or(Value::Null, |i| Value::Text(i.name)),
            _ => return None,
        })
    }

    /// sys.fn_my_permissions(securable, class) for SERVER, DATABASE and OBJECT: a row for
    /// each permission the session holds there (entity_name, subentity_name,
    /// permission_name), and for a table also each column's SELECT and UPDATE (extentdb has
    /// no column permissions: a column has what its table grants). A securable that does
    /// not exist gives no rows, as in SQL Server; other classes are not built (40517).
    pub(super) fn my_permissions(
        &self,
        securable: Option<String>,
        class: &str,
    ) -> Result<super::views::Rowset, Vec<SqlError>> {
        use super::views::{cols, text, SYSNAME};
        let mut rows = Vec::new();
        let mut row = |entity: &str, sub: &str, p: &str| {
            rows.push(vec![text(entity), text(sub), text(p)]);
        };
        match class.to_ascii_uppercase().as_str() {
            "SERVER" => {
                for p in SERVER_PERMISSIONS
                    .iter()
                    .filter(|p| self.has_server_permission(p))
                {
                    row("server", "", p);
                }
            }
            "DATABASE" => {
                let db = match &securable {
                    Some(n) => self.engine.instance.database_by_name(n),
                    None => self.current_database().ok(),
                };
                if let Some((id, db)) = db {
                    let g = db.read().unwrap();
                    for p in DATABASE_PERMISSIONS
                        .iter()
                        .filter(|p| self.has_db_permission(id, &g, p, None))
                    {
                        row("database", "", p);
                    }
                }
            }
            "OBJECT" => {
                let name = super::tables::object_name_from_text(securable.as_deref().unwrap_or(""));
                if let Ok(Some(t)) = self.find_table(&name) {
                    let g = t.db.read().unwrap();
                    let oid = Some(t.entry.object_id);
                    let held: Vec<&str> = OBJECT_PERMISSIONS
                        .iter()
                        .copied()
                        .filter(|p| self.has_db_permission(t.db_id, &g, p, oid))
                        .collect();
                    let entity = t.two_part();
                    for p in &held {
                        row(&entity, "", p);
                    }
                    for c in &t.entry.columns {
                        for p in held.iter().filter(|p| matches!(**p, "SELECT" | "UPDATE")) {
                            row(&entity, &c.name, p);
                        }
                    }
                }
            }
            other => {
                return Err(vec![super::lower::not_yet(&format!(
                    "sys.fn_my_permissions for the securable class '{other}'"
                ))])
            }
        }
        Ok(super::views::Rowset {
            columns: cols(&[
                ("entity_name", SYSNAME),
                ("subentity_name", SYSNAME),
                ("permission_name", crate::types::SqlType::NVarChar(60)),
            ]),
            rows,
        })
    }

    /// HAS_PERMS_BY_NAME(securable, class, permission) for SERVER, DATABASE and OBJECT.
    fn has_perms_by_name(
        &self,
        securable: Option<String>,
        class: String,
        perm: String,
    ) -> crate::types::Value {
        use crate::types::Value;
        let perm = perm.to_ascii_uppercase();
        let held = match class.to_ascii_uppercase().as_str() {
            "SERVER" => Some(self.has_server_permission(&perm)),
            "DATABASE" => {
                let db = match securable {
                    Some(n) => self.engine.instance.database_by_name(&n),
                    None => self.current_database().ok(),
                };
                db.map(|(id, db)| self.has_db_permission(id, &db.read().unwrap(), &perm, None))
            }
            "OBJECT" => securable.and_then(|n| {
                let t = self
                    .find_table(&super::tables::object_name_from_text(&n))
                    .ok()??;
                let g = t.db.read().unwrap();
                Some(self.has_db_permission(t.db_id, &g, &perm, Some(t.entry.object_id)))
            }),
            _ => None,
        };
        held.map_or(Value::Null, |b| Value::Int(b as i32))
    }
}
