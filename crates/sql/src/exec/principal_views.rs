//! The catalog views of principals, with SQL Server's columns and ids:
//! sys.server_principals (logins, then the fixed server roles), sys.sql_logins,
//! sys.server_role_members, sys.database_principals and sys.database_role_members.

use extentdb_format::principals::{self, PrincipalKind};
use extentdb_storage::logins::Login;
use extentdb_storage::{Database, Instance};

use super::views::{cols, text, Rowset, SYSNAME};
use crate::types::{SqlType, Value};

/// The fixed server roles' principal ids, as SQL Server numbers them.
const SERVER_ROLE_IDS: [(&str, i32); 9] = [
    ("public", 2),
    ("sysadmin", 3),
    ("securityadmin", 4),
    ("serveradmin", 5),
    ("setupadmin", 6),
    ("processadmin", 7),
    ("diskadmin", 8),
    ("dbcreator", 9),
    ("bulkadmin", 10),
];

/// Logins in principal order: sa is 1, the others from 256 by name.
fn logins_by_id(inst: &Instance) -> Vec<(i32, std::sync::Arc<Login>)> {
    let mut logins = inst.logins.list();
    logins.sort_by_key(|l| (!l.name.eq_ignore_ascii_case("sa"), l.name.to_lowercase()));
    logins
        .into_iter()
        .enumerate()
        .map(|(i, l)| (if i == 0 { 1 } else { 255 + i as i32 }, l))
        .collect()
}

/// sys.server_principals (with `roles`) or sys.sql_logins (logins only).
pub(super) fn server_principals(inst: &Instance, roles: bool) -> Rowset {
    let columns = cols(&[
        ("name", SYSNAME),
        ("principal_id", SqlType::Int),
        ("sid", SqlType::VarBinary(85)),
        ("type", SqlType::Char(1)),
        ("type_desc", SqlType::NVarChar(60)),
        ("is_disabled", SqlType::Bit),
        ("default_database_name", SYSNAME),
        ("is_fixed_role", SqlType::Bit),
    ]);
    let mut rows: Vec<Vec<Value>> = logins_by_id(inst)
        .into_iter()
        .map(|(id, l)| {
            vec![
                text(&l.name),
                Value::Int(id),
                Value::Binary(l.sid.clone()),
                text("S"),
                text("SQL_LOGIN"),
                Value::Bit(!l.enabled),
                text(&l.default_database),
                Value::Bit(false),
            ]
        })
        .collect();
    if roles {
        rows.extend(SERVER_ROLE_IDS.iter().map(|(name, id)| {
            vec![
                text(name),
                Value::Int(*id),
                Value::Binary(vec![*id as u8]),
                text("R"),
                text("SERVER_ROLE"),
                Value::Bit(false),
                Value::Null,
                Value::Bit(*name != "public"),
            ]
        }));
    }
    Rowset { columns, rows }
}

/// sys.server_role_members: each login's fixed server roles (public is implied).
pub(super) fn server_role_members(inst: &Instance) -> Rowset {
    let columns = cols(&[
        ("role_principal_id", SqlType::Int),
        ("member_principal_id", SqlType::Int),
    ]);
    let mut rows = Vec::new();
    for (id, l) in logins_by_id(inst) {
        for (role, role_id) in SERVER_ROLE_IDS.iter().skip(1) {
            if l.server_roles.contains(*role) {
                rows.push(vec![Value::Int(*role_id), Value::Int(id)]);
            }
        }
    }
    Rowset { columns, rows }
}

/// sys.database_principals of `db`: the fixed users and roles, then its own users.
pub(super) fn database_principals(db: &Database) -> Rowset {
    let columns = cols(&[
        ("name", SYSNAME),
        ("principal_id", SqlType::Int),
        ("type", SqlType::Char(1)),
        ("type_desc", SqlType::NVarChar(60)),
        ("default_schema_name", SYSNAME),
        ("sid", SqlType::VarBinary(85)),
        ("is_fixed_role", SqlType::Bit),
    ]);
    let sec = &db.catalog.security;
    let user = |name: &str, id: u32, schema: Option<&str>, sid: Vec<u8>| {
        vec![
            text(name),
            Value::Int(id as i32),
            text("S"),
            text("SQL_USER"),
            schema.map_or(Value::Null, text),
            Value::Binary(sid),
            Value::Bit(false),
        ]
    };
    let role = |name: &str, id: u32, fixed: bool| {
        vec![
            text(name),
            Value::Int(id as i32),
            text("R"),
            text("DATABASE_ROLE"),
            Value::Null,
            Value::Null,
            Value::Bit(fixed),
        ]
    };
    let mut rows = vec![
        role("public", principals::PUBLIC, false),
        user(
            "dbo",
            principals::DBO,
            Some("dbo"),
            super::security::owner_sid(sec),
        ),
        user("guest", principals::GUEST, Some("guest"), vec![0]),
    ];
    for p in sec
        .principals
        .iter()
        .filter(|p| p.principal_id != principals::DBO)
    {
        rows.push(match p.kind {
            PrincipalKind::SqlUser => user(&p.name, p.principal_id, Some("dbo"), p.sid.clone()),
            PrincipalKind::Role => role(&p.name, p.principal_id, false),
        });
    }
    rows.extend(
        principals::FIXED_ROLES
            .iter()
            .map(|(id, n)| role(n, *id, true)),
    );
    Rowset { columns, rows }
}

/// sys.database_role_members of `db` (dbo in db_owner, as SQL Server lists it).
pub(super) fn database_role_members(db: &Database) -> Rowset {
    let columns = cols(&[
        ("role_principal_id", SqlType::Int),
        ("member_principal_id", SqlType::Int),
    ]);
    let owner = principals::fixed_role("db_owner").unwrap_or_default();
    let mut rows = vec![vec![
        Value::Int(owner as i32),
        Value::Int(principals::DBO as i32),
    ]];
    rows.extend(
        db.catalog
            .security
            .role_members
            .iter()
            .map(|(r, m)| vec![Value::Int(*r as i32), Value::Int(*m as i32)]),
    );
    Rowset { columns, rows }
}
