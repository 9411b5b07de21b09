//! A database's principals and permissions, the part of the catalog (version 4 on) that
//! sys.database_principals, sys.database_role_members and sys.database_permissions show.
//! FORMAT.md, "Catalog", gives the layout: three lists after the tables.
//!
//! Principal ids are SQL Server's: public 0, dbo 1, guest 2, INFORMATION_SCHEMA 3, sys 4,
//! users and roles a DBA makes from 5, the fixed database roles 16384-16393. Only users
//! and the rows of dbo (its owner's sid) are stored; the fixed principals are implied.
//!
//! Invariants (checked by `Security::check`):
//! 1. Principal ids and names are unique (names case-insensitively), and no stored principal
//!    takes a fixed id other than dbo's.
//! 2. Every role membership names a role (fixed, or a stored one of kind `Role`) and an
//!    existing member; every permission names an existing grantee.

use crate::codec::{Reader, Writer};
use crate::FormatError;

/// sys.database_principals.principal_id of the fixed principals.
pub const PUBLIC: u32 = 0;
pub const DBO: u32 = 1;
pub const GUEST: u32 = 2;
/// The first id a user or role a DBA makes takes.
pub const FIRST_USER_PRINCIPAL: u32 = 5;

/// The fixed database roles: (principal_id, name), as SQL Server numbers them.
pub const FIXED_ROLES: [(u32, &str); 9] = [
    (16384, "db_owner"),
    (16385, "db_accessadmin"),
    (16386, "db_securityadmin"),
    (16387, "db_ddladmin"),
    (16389, "db_backupoperator"),
    (16390, "db_datareader"),
    (16391, "db_datawriter"),
    (16392, "db_denydatareader"),
    (16393, "db_denydatawriter"),
];

/// The fixed role named `name` (case-insensitively), if any.
pub fn fixed_role(name: &str) -> Option<u32> {
    FIXED_ROLES
        .iter()
        .find(|(_, n)| n.eq_ignore_ascii_case(name))
        .map(|(id, _)| *id)
}

/// sys.database_principals.type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrincipalKind {
    /// 'S': a user mapped to a SQL login by its sid.
    SqlUser = b'S' as isize,
    /// 'R': a database role.
    Role = b'R' as isize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrincipalEntry {
    pub principal_id: u32,
    pub name: String,
    pub kind: PrincipalKind,
    /// The login's security identifier (users only; empty for roles).
    pub sid: Vec<u8>,
}

/// sys.database_permissions.class: what a permission is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PermissionClass {
    Database = 0,
    Object = 1,
}

/// sys.database_permissions.state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionState {
    /// 'G'
    Grant = b'G' as isize,
    /// 'W': granted WITH GRANT OPTION.
    GrantWithGrant = b'W' as isize,
    /// 'D'
    Deny = b'D' as isize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionEntry {
    pub class: PermissionClass,
    /// The object id for `Object`, 0 for `Database`.
    pub major_id: u32,
    /// SQL Server's permission name, upper case ("SELECT", "CREATE TABLE", "BACKUP LOG").
    pub permission: String,
    pub state: PermissionState,
    pub grantee: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Security {
    pub principals: Vec<PrincipalEntry>,
    /// (role principal_id, member principal_id).
    pub role_members: Vec<(u32, u32)>,
    pub permissions: Vec<PermissionEntry>,
}

impl Security {
    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.principals.len() as u32);
        for p in &self.principals {
            w.u32(p.principal_id);
            w.string(&p.name);
            w.u8(p.kind as u8);
            w.u8(p.sid.len() as u8);
            w.raw(&p.sid);
        }
        w.u32(self.role_members.len() as u32);
        for (role, member) in &self.role_members {
            w.u32(*role);
            w.u32(*member);
        }
        w.u32(self.permissions.len() as u32);
        for p in &self.permissions {
            w.u8(p.class as u8);
            w.u32(p.major_id);
            w.string(&p.permission);
            w.u8(p.state as u8);
            w.u32(p.grantee);
        }
    }

    pub fn decode(r: &mut Reader<'_>, limit: usize) -> Result<Security, FormatError> {
        let mut s = Security::default();
        for _ in 0..list_len(r, limit)? {
            let principal_id = r.u32()?;
            let name = r.string()?;
            let kind = match r.u8()? {
                b'S' => PrincipalKind::SqlUser,
                b'R' => PrincipalKind::Role,
                k => return Err(bad(format!("principal kind {k}"))),
            };
            let n = r.u8()? as usize;
            let sid = r.take(n)?.to_vec();
            s.principals.push(PrincipalEntry {
                principal_id,
                name,
                kind,
                sid,
            });
        }
        for _ in 0..list_len(r, limit)? {
            s.role_members.push((r.u32()?, r.u32()?));
        }
        for _ in 0..list_len(r, limit)? {
            s.permissions.push(decode_permission(r)?);
        }
        s.check().map_err(bad)?;
        Ok(s)
    }

    /// The stored principal named `name`, case-insensitively.
    pub fn principal(&self, name: &str) -> Option<&PrincipalEntry> {
        self.principals
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(name))
    }

    /// True if `id` names a principal: fixed or stored.
    pub fn exists(&self, id: u32) -> bool {
        id <= 4
            || FIXED_ROLES.iter().any(|(r, _)| *r == id)
            || self.principals.iter().any(|p| p.principal_id == id)
    }

    /// The id the next user or role takes.
    pub fn next_principal_id(&self) -> u32 {
        self.principals
            .iter()
            .map(|p| p.principal_id + 1)
            .filter(|&id| id < FIXED_ROLES[0].0)
            .max()
            .unwrap_or(FIRST_USER_PRINCIPAL)
            .max(FIRST_USER_PRINCIPAL)
    }

    /// The module's invariants.
    pub fn check(&self) -> Result<(), String> {
        let mut ids = std::collections::HashSet::new();
        let mut names = std::collections::HashSet::new();
        for p in &self.principals {
            let fixed = p.principal_id < FIRST_USER_PRINCIPAL || fixed_role_id(p.principal_id);
            if (fixed && p.principal_id != DBO) || !ids.insert(p.principal_id) {
                return Err(format!("principal id {} is taken", p.principal_id));
            }
            if !names.insert(p.name.to_lowercase()) {
                return Err(format!("principal name {} appears twice", p.name));
            }
        }
        let is_role = |id: u32| {
            fixed_role_id(id)
                || self
                    .principals
                    .iter()
                    .any(|p| p.principal_id == id && p.kind == PrincipalKind::Role)
        };
        for (role, member) in &self.role_members {
            if !is_role(*role) || !self.exists(*member) {
                return Err(format!(
                    "role membership ({role}, {member}) names no principal"
                ));
            }
        }
        match self.permissions.iter().find(|p| !self.exists(p.grantee)) {
            Some(p) => Err(format!(
                "permission {} names grantee {}",
                p.permission, p.grantee
            )),
            None => Ok(()),
        }
    }
}

fn fixed_role_id(id: u32) -> bool {
    FIXED_ROLES.iter().any(|(r, _)| *r == id)
}

fn decode_permission(r: &mut Reader<'_>) -> Result<PermissionEntry, FormatError> {
    let class = match r.u8()? {
        0 => PermissionClass::Database,
        1 => PermissionClass::Object,
        c => return Err(bad(format!("permission class {c}"))),
    };
    let major_id = r.u32()?;
    let permission = r.string()?;
    let state = match r.u8()? {
        b'G' => PermissionState::Grant,
        b'W' => PermissionState::GrantWithGrant,
        b'D' => PermissionState::Deny,
        s => return Err(bad(format!("permission state {s}"))),
    };
    Ok(PermissionEntry {
        class,
        major_id,
        permission,
        state,
        grantee: r.u32()?,
    })
}

fn list_len(r: &mut Reader<'_>, limit: usize) -> Result<u32, FormatError> {
    let n = r.u32()?;
    if n as usize > limit {
        return Err(bad(format!("list of {n} principals or permissions")));
    }
    Ok(n)
}

fn bad(reason: impl Into<String>) -> FormatError {
    crate::corrupt(crate::PageId::NULL, reason)
}
