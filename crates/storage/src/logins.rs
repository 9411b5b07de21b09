//! SQL logins: name, salted password hash (PBKDF2-HMAC-SHA256, `config::hash_password`),
//! enabled or disabled, default database. `sa` starts from the instance configuration's
//! hash; every login created or changed with T-SQL lives in `DIR/logins`, one per line
//! (`name<TAB>hash<TAB>enabled|disabled<TAB>default database`), rewritten durably (a temporary
//! file, fsync, rename, fsync of the directory) on each change.
//!
//! Invariants:
//! 1. No password is stored or logged, only its salted hash.
//! 2. Names compare case-insensitively (SQL Server's default collation); the stored name
//!    keeps its case.
//! 3. The file on disk always holds a complete list: a crash during a change leaves the old
//!    list or the new one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use crate::config::{hash_password, verify_password};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    pub name: String,
    pub hash: String,
    pub enabled: bool,
    pub default_database: String,
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
}

pub struct Logins {
    path: PathBuf,
    map: RwLock<BTreeMap<String, Login>>,
}

impl Logins {
    /// Loads `DIR/logins`; `sa` comes from `sa_hash` unless the file has it.
    pub fn load(dir: &Path, sa_hash: &str) -> std::io::Result<Logins> {
        let path = dir.join("logins");
        let mut map = BTreeMap::new();
        map.insert(
            "sa".to_string(),
            Login {
                name: "sa".into(),
                hash: sa_hash.to_string(),
                enabled: true,
                default_database: "master".into(),
            },
        );
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                for line in text.lines().filter(|l| !l.trim().is_empty()) {
                    let f: Vec<&str> = line.split('\t').collect();
                    if let [name, hash, enabled, db] = f[..] {
                        map.insert(
                            name.to_lowercase(),
                            Login {
                                name: name.to_string(),
                                hash: hash.to_string(),
                                enabled: enabled == "enabled",
                                default_database: db.to_string(),
                            },
                        );
                    }
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
        Ok(login.clone())
    }

    pub fn get(&self, name: &str) -> Option<Login> {
        self.map.read().unwrap().get(&name.to_lowercase()).cloned()
    }

    pub fn list(&self) -> Vec<Login> {
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
                Login {
                    name: name.to_string(),
                    hash: hash_password(password),
                    enabled: true,
                    default_database: default_database.to_string(),
                },
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

    /// Applies `f` to a copy, writes the copy durably, then makes it current (invariant 3).
    fn change(
        &self,
        f: impl FnOnce(&mut BTreeMap<String, Login>) -> Result<(), LoginError>,
    ) -> Result<(), LoginError> {
        let mut map = self.map.write().unwrap();
        let mut next = map.clone();
        f(&mut next)?;
        let mut text = String::new();
        for l in next.values() {
            text.push_str(&format!(
                "{}\t{}\t{}\t{}\n",
                l.name,
                l.hash,
                if l.enabled { "enabled" } else { "disabled" },
                l.default_database
            ));
        }
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
