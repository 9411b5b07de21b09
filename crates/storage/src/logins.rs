//! SQL logins: name, salted password hash (PBKDF2-HMAC-SHA256, `config::hash_password`),
//! enabled or disabled, default database. `sa` starts from the instance configuration's
//! hash; every login created or changed with T-SQL lives in `DIR/logins`, one per line
//! (`name<TAB>hash<TAB>enabled|disabled<TAB>default database<TAB>sid hex<TAB>server roles
//! <TAB>granted server permissions<TAB>denied ones`, lists comma-separated; lines of the
//! first four fields only, from before roles, still load), rewritten durably (a temporary
//! file, fsync, rename, fsync of the directory) on each change, owner-only.
//!
//! Invariants:
//! 1. No password is stored or logged, only its salted hash.
//! 2. Names compare case-insensitively (SQL Server's default collation); the stored name
//!    keeps its case.
//! 3. The file on disk always holds a complete list: a crash during a change leaves the old
//!    list or the new one.
//! 4. sa's sid is 0x01 and sa is always a member of sysadmin (SQL Server's 15405 refuses
//!    changing it); every other login's sid is 16 random bytes fixed at CREATE LOGIN, which
//!    is what database users map to.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use crate::config::{hash_password, verify_password};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    pub name: String,
    pub hash: String,
    pub enabled: bool,
    pub default_database: String,
    /// The security identifier database users map to (invariant 4).
    pub sid: Vec<u8>,
    /// Fixed server roles it is a member of (lower case), besides public.
    pub server_roles: BTreeSet<String>,
    /// Server permissions granted and denied to it (upper case, SQL Server's names).
    pub granted: BTreeSet<String>,
    pub denied: BTreeSet<String>,
}

/// SQL Server's fixed server roles, public last (every login is a member).
pub const SERVER_ROLES: [&str; 9] = [
    "sysadmin",
    "serveradmin",
    "securityadmin",
    "processadmin",
    "setupadmin",
    "bulkadmin",
    "diskadmin",
    "dbcreator",
    "public",
];

/// sa's sid.
pub const SA_SID: [u8; 1] = [1];

impl Login {
    /// True if the login is a member of fixed server role `role` (public: everyone).
    pub fn in_role(&self, role: &str) -> bool {
        let role = role.to_ascii_lowercase();
        role == "public" || self.server_roles.contains(&role)
    }

    fn line(&self) -> String {
        let list = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(",");
        format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            self.name,
            self.hash,
            if self.enabled { "enabled" } else { "disabled" },
            self.default_database,
            hex(&self.sid),
            list(&self.server_roles),
            list(&self.granted),
            list(&self.denied)
        )
    }

    fn parse(line: &str) -> Option<Login> {
        let f: Vec<&str> = line.split('\t').collect();
        let set = |i: usize| -> BTreeSet<String> {
            f.get(i)
                .map(|v| {
                    v.split(',')
                        .filter(|x| !x.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let [name, hash, enabled, db] = f.get(..4)? else {
            return None;
        };
        let sid = match f.get(4) {
            Some(h) => unhex(h)?,
            None => legacy_sid(name),
        };
        Some(Login {
            name: name.to_string(),
            hash: hash.to_string(),
            enabled: *enabled == "enabled",
            default_database: db.to_string(),
            sid,
            server_roles: set(5),
            granted: set(6),
            denied: set(7),
        })
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A sid for a login saved before sids existed: derived from its name, so it is stable.
fn legacy_sid(name: &str) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(name.to_lowercase().as_bytes())[..16].to_vec()
}

/// 16 random bytes for a new login.
fn new_sid() -> Vec<u8> {
    let mut b = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    b.to_vec()
}

fn sa_login(hash: &str) -> Login {
    Login {
        name: "sa".into(),
        hash: hash.to_string(),
        enabled: true,
        default_database: "master".into(),
        sid: SA_SID.to_vec(),
        server_roles: ["sysadmin".to_string()].into(),
        granted: BTreeSet::new(),
        denied: BTreeSet::new(),
    }
}

/// Why a login attempt failed: SQL Server's state for 18456 in the error log and the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginRefusal {
    /// State 5: no such login.
    NoSuchLogin,
    /// State 7: the login is disabled (or has no password at all).
    Disabled,
    /// State 8: the password did not match.
    WrongPassword,
}

impl LoginRefusal {
    pub fn state(self) -> u8 {
        match self {
            LoginRefusal::NoSuchLogin => 5,
            LoginRefusal::Disabled => 7,
            LoginRefusal::WrongPassword => 8,
        }
    }

    pub fn reason(self) -> &'static str {
        match self {
            LoginRefusal::NoSuchLogin => "Could not find a login matching the name provided.",
            LoginRefusal::Disabled => "The account is disabled.",
            LoginRefusal::WrongPassword => "Password did not match that for the login provided.",
        }
    }
}

/// Why a change to the logins was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginError {
    Exists(String),
    NotFound(String),
    Io(String),
    /// sa's sysadmin membership cannot change (15405).
    SpecialPrincipal(String),
}

pub struct Logins {
    path: PathBuf,
    map: RwLock<BTreeMap<String, Arc<Login>>>,
}

impl Logins {
    /// Loads `DIR/logins`; `sa` comes from `sa_hash` unless the file has it.
    pub fn load(dir: &Path, sa_hash: &str) -> std::io::Result<Logins> {
        let path = dir.join("logins");
        let mut map = BTreeMap::new();
        map.insert("sa".to_string(), Arc::new(sa_login(sa_hash)));
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                for mut l in text.lines().filter_map(Login::parse) {
                    if l.name.eq_ignore_ascii_case("sa") {
                        // Invariant 4, whatever the file says.
                        l.sid = SA_SID.to_vec();
                        l.server_roles.insert("sysadmin".into());
                    }
                    map.insert(l.name.to_lowercase(), Arc::new(l));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(Logins {
            path,
            map: RwLock::new(map),
        })
    }

    /// Checks a login and password (invariant 1: the password is only hashed).
    pub fn authenticate(&self, name: &str, password: &str) -> Result<Login, LoginRefusal> {
        let map = self.map.read().unwrap();
        let login = map
            .get(&name.to_lowercase())
            .ok_or(LoginRefusal::NoSuchLogin)?;
        if !login.enabled || login.hash.is_empty() {
            return Err(LoginRefusal::Disabled);
        }
        if !verify_password(password, &login.hash) {
            return Err(LoginRefusal::WrongPassword);
        }
        Ok(Login::clone(login))
    }

    /// The login as it is now, shared: a statement's permission checks read it without
    /// copying it (a change replaces the map's entry; a reader keeps the version it took).
    pub fn get(&self, name: &str) -> Option<Arc<Login>> {
        self.map.read().unwrap().get(&name.to_lowercase()).cloned()
    }

    pub fn list(&self) -> Vec<Arc<Login>> {
        self.map.read().unwrap().values().cloned().collect()
    }

    pub fn create(
        &self,
        name: &str,
        password: &str,
        default_database: &str,
    ) -> Result<(), LoginError> {
        self.change(|map| {
            let key = name.to_lowercase();
            if map.contains_key(&key) {
                return Err(LoginError::Exists(name.to_string()));
            }
            map.insert(
                key,
                Arc::new(Login {
                    name: name.to_string(),
                    hash: hash_password(password),
                    enabled: true,
                    default_database: default_database.to_string(),
                    sid: new_sid(),
                    server_roles: BTreeSet::new(),
                    granted: BTreeSet::new(),
                    denied: BTreeSet::new(),
                }),
            );
            Ok(())
        })
    }

    /// ALTER LOGIN: a new password, enabled or disabled, a default database.
    pub fn alter(
        &self,
        name: &str,
        password: Option<&str>,
        enabled: Option<bool>,
        default_database: Option<&str>,
    ) -> Result<(), LoginError> {
        self.change(|map| {
            let login = map
                .get_mut(&name.to_lowercase())
                .map(Arc::make_mut)
                .ok_or_else(|| LoginError::NotFound(name.to_string()))?;
            if let Some(p) = password {
                login.hash = hash_password(p);
            }
            if let Some(e) = enabled {
                login.enabled = e;
            }
            if let Some(d) = default_database {
                login.default_database = d.to_string();
            }
            Ok(())
        })
    }

    pub fn drop_login(&self, name: &str) -> Result<(), LoginError> {
        self.change(|map| {
            map.remove(&name.to_lowercase())
                .map(|_| ())
                .ok_or_else(|| LoginError::NotFound(name.to_string()))
        })
    }

    /// ALTER SERVER ROLE `role` ADD | DROP MEMBER `name` (sa stays sysadmin, 15405).
    pub fn set_server_role(&self, name: &str, role: &str, member: bool) -> Result<(), LoginError> {
        self.change(|map| {
            let login = map
                .get_mut(&name.to_lowercase())
                .map(Arc::make_mut)
                .ok_or_else(|| LoginError::NotFound(name.to_string()))?;
            let role = role.to_ascii_lowercase();
            if login.name.eq_ignore_ascii_case("sa") && role == "sysadmin" {
                return Err(LoginError::SpecialPrincipal("sa".into()));
            }
            if member {
                login.server_roles.insert(role);
            } else {
                login.server_roles.remove(&role);
            }
            Ok(())
        })
    }

    /// GRANT (`Some(true)`), DENY (`Some(false)`) or REVOKE (`None`) of a server permission.
    pub fn set_server_permission(
        &self,
        name: &str,
        permission: &str,
        state: Option<bool>,
    ) -> Result<(), LoginError> {
        self.change(|map| {
            let login = map
                .get_mut(&name.to_lowercase())
                .map(Arc::make_mut)
                .ok_or_else(|| LoginError::NotFound(name.to_string()))?;
            login.granted.remove(permission);
            login.denied.remove(permission);
            match state {
                Some(true) => login.granted.insert(permission.to_string()),
                Some(false) => login.denied.insert(permission.to_string()),
                None => false,
            };
            Ok(())
        })
    }

    /// Applies `f` to a copy, writes the copy durably, then makes it current (invariant 3).
    fn change(
        &self,
        f: impl FnOnce(&mut BTreeMap<String, Arc<Login>>) -> Result<(), LoginError>,
    ) -> Result<(), LoginError> {
        let mut map = self.map.write().unwrap();
        let mut next = map.clone();
        f(&mut next)?;
        let text: String = next.values().map(|l| l.line()).collect();
        crate::instance::write_durably(&self.path, text.as_bytes())
            .map_err(|e| LoginError::Io(e.to_string()))?;
        *map = next;
        Ok(())
    }
}

/// SQL Server's password policy on Linux (CHECK_POLICY = ON, the default): at least eight
/// characters, of at least three of uppercase, lowercase, digits and other characters, and
/// not containing the login name.
pub fn meets_policy(name: &str, password: &str) -> bool {
    let classes = [
        password.chars().any(|c| c.is_uppercase()),
        password.chars().any(|c| c.is_lowercase()),
        password.chars().any(|c| c.is_ascii_digit()),
        password.chars().any(|c| !c.is_alphanumeric()),
    ];
    password.chars().count() >= 8
        && classes.iter().filter(|&&c| c).count() >= 3
        && !password.to_lowercase().contains(&name.to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_authenticate_alter_drop_and_reload() {
        let dir = std::env::temp_dir().join(format!("xdb-logins-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let l = Logins::load(&dir, &hash_password("Sa-Pass-1")).unwrap();
        assert!(l.authenticate("SA", "Sa-Pass-1").is_ok());
        l.create("App", "App-Pass-1", "master").unwrap();
        assert_eq!(
            l.create("app", "x", "master"),
            Err(LoginError::Exists("app".into()))
        );
        assert_eq!(
            l.authenticate("app", "wrong").unwrap_err(),
            LoginRefusal::WrongPassword
        );
        l.alter("APP", None, Some(false), None).unwrap();
        assert_eq!(
            l.authenticate("app", "App-Pass-1").unwrap_err(),
            LoginRefusal::Disabled
        );
        l.alter("app", Some("New-Pass-2"), Some(true), Some("tempdb"))
            .unwrap();
        let text = std::fs::read_to_string(dir.join("logins")).unwrap();
        assert!(!text.contains("New-Pass-2"), "only the hash is stored");
        let again = Logins::load(&dir, "").unwrap();
        let app = again.authenticate("app", "New-Pass-2").unwrap();
        assert_eq!(
            (app.name.as_str(), app.default_database.as_str()),
            ("App", "tempdb")
        );
        again.drop_login("app").unwrap();
        assert_eq!(
            again.authenticate("app", "New-Pass-2").unwrap_err(),
            LoginRefusal::NoSuchLogin
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn password_policy() {
        assert!(meets_policy("app", "Str0ng!pw"));
        assert!(!meets_policy("app", "short1!"));
        assert!(!meets_policy("app", "alllowercase"));
        assert!(!meets_policy("app", "My-app-Pass1"));
    }
}
