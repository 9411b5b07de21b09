//! The statements that change who may do what: ALTER SERVER ROLE (the logins' fixed server
//! roles, kept by `storage::logins`), CREATE / DROP USER and ALTER ROLE (a database's
//! principals, in its catalog), and GRANT / DENY / REVOKE at server, database and table
//! scope. The checks themselves are in `security.rs`.

use extentdb_format::catalog::Catalog;
use extentdb_format::principals::{self, PermissionClass, PermissionState, DBO};
use extentdb_storage::logins::SERVER_ROLES;
use extentdb_storage::structure::{PermissionChange, PrincipalChange};
use extentdb_storage::{Database, StorageError};

use super::security::{
    DATABASE_PERMISSIONS, OBJECT_PERMISSIONS, PROCEDURE_PERMISSIONS, SERVER_PERMISSIONS,
};
use super::structure::validated_change;
use super::Session;
use crate::ast::{PermissionAction, PermissionStatement, Securable};
use crate::messages::{msg, SqlError};

/// A database change's storage failure as messages.
fn storage(e: StorageError) -> Vec<SqlError> {
    super::errors::map(&e, super::errors::Context::Other)
}

impl Session {
    /// ALTER SERVER ROLE: securityadmin manages every role but sysadmin, which only a
    /// sysadmin changes (SQL Server's rule).
    pub(super) fn alter_server_role(
        &mut self,
        role: &str,
        add: bool,
        member: &str,
    ) -> Result<(), Vec<SqlError>> {
        self.refuse_in_transaction("ALTER SERVER ROLE")?;
        let role = role.to_ascii_lowercase();
        if !SERVER_ROLES.contains(&role.as_str()) || role == "public" {
            return Err(vec![msg(15151, &[&"alter", &"server role", &role])]);
        }
        let allowed = if role == "sysadmin" {
            self.is_sysadmin()
        } else {
            self.in_server_role("securityadmin") || self.is_sysadmin()
        };
        if !allowed {
            return Err(vec![msg(15247, &[])]);
        }
        self.engine
            .instance
            .logins
            .set_server_role(member, &role, add)
            .map_err(|e| super::logins::storage_error(e, "alter"))
    }

    /// CREATE USER name FOR LOGIN login: ALTER ANY USER (db_owner, db_accessadmin); the
    /// user gets CONNECT, as SQL Server grants it.
    pub(super) fn create_user(&mut self, name: &str, login: &str) -> Result<(), Vec<SqlError>> {
        self.refuse_in_transaction("CREATE USER")?;
        let (db_id, db) = self.current_database()?;
        let sid = self
            .engine
            .instance
            .logins
            .get(login)
            .map(|l| l.sid.clone())
            .ok_or_else(|| vec![msg(15007, &[&login])])?;
        let check = |g: &Database| {
            self.require_db_manage(db_id, g, "ALTER ANY USER")?;
            let sec = &g.catalog.security;
            if sec.principal(name).is_some() || is_fixed_name(name) {
                return Err(vec![msg(15023, &[&name])]);
            }
            let owner = super::security::owner_sid(sec);
            if sid == owner || sec.principals.iter().any(|p| p.sid == sid) {
                return Err(vec![msg(15063, &[])]);
            }
            let (name, sid) = (name.to_string(), sid.clone());
            Ok(PrincipalChange::AddUser { name, sid })
        };
        validated_change(&db, check, |v, c| db.change_principals(v, c), storage)
    }

    /// DROP USER: its memberships and permissions go with it.
    pub(super) fn drop_user(&mut self, name: &str, if_exists: bool) -> Result<(), Vec<SqlError>> {
        self.refuse_in_transaction("DROP USER")?;
        let (db_id, db) = self.current_database()?;
        let check = |g: &Database| {
            self.require_db_manage(db_id, g, "ALTER ANY USER")?;
            let Some(user) = g.catalog.security.principal(name) else {
                if if_exists {
                    return Ok(None);
                }
                return Err(vec![msg(15151, &[&"drop", &"user", &name])]);
            };
            if user.principal_id == DBO {
                return Err(vec![msg(15405, &[&"dbo"])]);
            }
            Ok(Some(PrincipalChange::DropPrincipal(user.principal_id)))
        };
        let make = |v, change: Option<PrincipalChange>| match change {
            Some(c) => db.change_principals(v, c),
            None => Ok(()),
        };
        validated_change(&db, check, make, storage)
    }

    /// ALTER ROLE fixed_role ADD | DROP MEMBER user: db_owner for db_owner, else db_owner
    /// or db_securityadmin.
    pub(super) fn alter_role(
        &mut self,
        role: &str,
        add: bool,
        member: &str,
    ) -> Result<(), Vec<SqlError>> {
        self.refuse_in_transaction("ALTER ROLE")?;
        let (db_id, db) = self.current_database()?;
        let Some(role_id) = principals::fixed_role(role) else {
            return Err(vec![msg(15151, &[&"alter", &"role", &role])]);
        };
        let check = |g: &Database| {
            let allowed = self.is_db_owner(db_id, g)
                || (!role.eq_ignore_ascii_case("db_owner")
                    && self.in_db_role(db_id, g, "db_securityadmin"));
            if !allowed {
                return Err(vec![msg(15247, &[])]);
            }
            let Some(m) = g.catalog.security.principal(member).map(|p| p.principal_id) else {
                return Err(vec![msg(15151, &[&"alter", &"user", &member])]);
            };
            Ok(PrincipalChange::RoleMember {
                role: role_id,
                member: m,
                add,
            })
        };
        validated_change(&db, check, |v, c| db.change_principals(v, c), storage)
    }

    /// GRANT / DENY / REVOKE.
    pub(super) fn permission_statement(
        &mut self,
        p: &PermissionStatement,
    ) -> Result<(), Vec<SqlError>> {
        self.refuse_in_transaction("GRANT, DENY and REVOKE")?;
        let server = match &p.on {
            Securable::Server => true,
            Securable::Default => p
                .permissions
                .iter()
                .all(|x| SERVER_PERMISSIONS.contains(&x.as_str())),
            _ => false,
        };
        if server {
            return self.server_permission_statement(p);
        }
        self.database_permission_statement(p)
    }

    fn server_permission_statement(
        &mut self,
        p: &PermissionStatement,
    ) -> Result<(), Vec<SqlError>> {
        if let Some(x) = p
            .permissions
            .iter()
            .find(|x| !SERVER_PERMISSIONS.contains(&x.as_str()))
        {
            return Err(vec![msg(15151, &[&"find", &"permission", &x])]);
        }
        let control = p.permissions.iter().any(|x| x == "CONTROL SERVER");
        let allowed = self.is_sysadmin() || (!control && self.in_server_role("securityadmin"));
        if !allowed {
            return Err(vec![msg(4613, &[])]);
        }
        let state = match p.action {
            PermissionAction::Grant => Some(true),
            PermissionAction::Deny => Some(false),
            PermissionAction::Revoke => None,
        };
        for who in &p.principals {
            for perm in &p.permissions {
                self.engine
                    .instance
                    .logins
                    .set_server_permission(who, perm, state)
                    .map_err(|e| super::logins::storage_error(e, "alter"))?;
            }
        }
        Ok(())
    }

    fn database_permission_statement(
        &mut self,
        p: &PermissionStatement,
    ) -> Result<(), Vec<SqlError>> {
        let mut allowed: &[&str] = DATABASE_PERMISSIONS;
        let (class, major_id, db_id, db) = match &p.on {
            Securable::Object(name) => match self.procedure_securable(name)? {
                Some((id, db_id, db)) => {
                    allowed = PROCEDURE_PERMISSIONS;
                    (PermissionClass::Object, id, db_id, db)
                }
                None => {
                    let t = self.table(name)?;
                    allowed = OBJECT_PERMISSIONS;
                    (PermissionClass::Object, t.entry.object_id, t.db_id, t.db)
                }
            },
            Securable::Database(name) => {
                let (id, db) = self
                    .engine
                    .instance
                    .database_by_name(name)
                    .ok_or_else(|| vec![msg(911, &[name])])?;
                (PermissionClass::Database, 0, id, db)
            }
            _ => {
                let (id, db) = self.current_database()?;
                (PermissionClass::Database, 0, id, db)
            }
        };
        if let Some(x) = p
            .permissions
            .iter()
            .find(|x| !allowed.contains(&x.as_str()))
        {
            return Err(vec![msg(15151, &[&"find", &"permission", &x])]);
        }
        let state = match p.action {
            PermissionAction::Grant if p.with_grant_option => Some(PermissionState::GrantWithGrant),
            PermissionAction::Grant => Some(PermissionState::Grant),
            PermissionAction::Deny => Some(PermissionState::Deny),
            PermissionAction::Revoke => None,
        };
        let check = |g: &Database| {
            let grantor_ok =
                self.is_db_owner(db_id, g) || self.in_db_role(db_id, g, "db_securityadmin");
            if !grantor_ok {
                return Err(vec![msg(4613, &[])]);
            }
            let mut changes = Vec::new();
            for who in &p.principals {
                let grantee = principal_id(&g.catalog, who)
                    .ok_or_else(|| vec![msg(15151, &[&"find", &"user", who])])?;
                changes.extend(p.permissions.iter().map(|perm| PermissionChange {
                    class,
                    major_id,
                    permission: perm.clone(),
                    grantee,
                    state,
                }));
            }
            Ok(PrincipalChange::Permissions(changes))
        };
        validated_change(&db, check, |v, c| db.change_principals(v, c), storage)
    }

    /// Msg 15247 unless the session holds `perm` (or owns) database `db`.
    fn require_db_manage(
        &self,
        db_id: u16,
        db: &extentdb_storage::Database,
        perm: &str,
    ) -> Result<(), Vec<SqlError>> {
        self.require_db_access(db_id, db)?;
        if self.has_db_permission(db_id, db, perm, None) {
            return Ok(());
        }
        let accessadmin = perm == "ALTER ANY USER" && self.in_db_role(db_id, db, "db_accessadmin");
        if accessadmin {
            return Ok(());
        }
        Err(vec![msg(15247, &[])])
    }
}

/// A principal of `c` by name: a stored user or role, a fixed role, or public.
fn principal_id(c: &Catalog, name: &str) -> Option<u32> {
    if name.eq_ignore_ascii_case("public") {
        return Some(principals::PUBLIC);
    }
    if name.eq_ignore_ascii_case("guest") {
        return Some(principals::GUEST);
    }
    principals::fixed_role(name).or_else(|| c.security.principal(name).map(|p| p.principal_id))
}

fn is_fixed_name(name: &str) -> bool {
    principals::fixed_role(name).is_some()
        || ["public", "dbo", "guest", "sys", "INFORMATION_SCHEMA"]
            .iter()
            .any(|n| n.eq_ignore_ascii_case(name))
}
