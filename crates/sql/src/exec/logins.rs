//! CREATE LOGIN, ALTER LOGIN, DROP LOGIN: SQL logins kept by the instance
//! (`storage::logins`), with SQL Server's password policy (CHECK_POLICY, on by default) and
//! its messages. Only sa manages other logins; any login may change its own password with
//! OLD_PASSWORD.

use extentdb_storage::logins::{meets_policy, LoginError};

use super::eval::to_text;
use super::Session;
use crate::ast::{OptionValue, WithOption};
use crate::messages::{msg, SqlError};

/// An option's value as text (a literal, a bare word, a bracketed name).
fn option_text(s: &mut Session, o: &WithOption) -> Result<Option<String>, Vec<SqlError>> {
    Ok(match &o.value {
        None => None,
        Some(OptionValue::Word(w)) => Some(w.clone()),
        Some(OptionValue::Expr(e)) => Some(to_text(&s.eval(e, None).map_err(|e| vec![e])?)),
    })
}

/// A change to the logins refused, as SQL Server's message (`verb`: "create", "alter", ...).
pub(super) fn storage_error(e: LoginError, verb: &str) -> Vec<SqlError> {
    vec![match e {
        LoginError::Exists(n) => msg(15025, &[&n]),
        LoginError::NotFound(n) => msg(15151, &[&verb, &"login", &n]),
        LoginError::SpecialPrincipal(n) => msg(15405, &[&n]),
        LoginError::Io(text) => SqlError {
            number: 3634,
            severity: 16,
            state: 1,
            text: format!("The operating system returned an error while saving the logins: {text}"),
            line: 0,
            procedure: None,
        },
    }]
}

/// The options CREATE and ALTER LOGIN take.
#[derive(Default)]
struct LoginOptions {
    password: Option<String>,
    old_password: Option<String>,
    default_database: Option<String>,
    check_policy: bool,
}

impl Session {
    fn login_options(&mut self, options: &[WithOption]) -> Result<LoginOptions, Vec<SqlError>> {
        let mut o = LoginOptions {
            check_policy: true,
            ..Default::default()
        };
        for opt in options {
            let v = option_text(self, opt)?;
            match opt.name.as_str() {
                "PASSWORD" => o.password = v,
                "OLD_PASSWORD" => o.old_password = v,
                "DEFAULT_DATABASE" => o.default_database = v,
                "CHECK_POLICY" => {
                    o.check_policy = !v.is_some_and(|v| v.eq_ignore_ascii_case("OFF"))
                }
                "CHECK_EXPIRATION" | "DEFAULT_LANGUAGE" | "MUST_CHANGE" | "UNLOCK" => {}
                other => {
                    return Err(vec![super::lower::not_yet(&format!(
                        "LOGIN option {other}"
                    ))])
                }
            }
        }
        Ok(o)
    }

    fn check_default_database(&self, db: &Option<String>) -> Result<(), Vec<SqlError>> {
        match db {
            Some(d) if self.engine.instance.database_by_name(d).is_none() => {
                Err(vec![msg(15010, &[d])])
            }
            _ => Ok(()),
        }
    }

    pub(super) fn create_login(
        &mut self,
        name: &str,
        from_windows: bool,
        options: &[WithOption],
    ) -> Result<(), Vec<SqlError>> {
        self.refuse_in_transaction("CREATE LOGIN")?;
        if !self.has_server_permission("ALTER ANY LOGIN") {
            return Err(vec![msg(15247, &[])]);
        }
        if from_windows {
            return Err(vec![super::lower::not_yet("Windows logins")]);
        }
        let o = self.login_options(options)?;
        let Some(password) = o.password else {
            return Err(vec![msg(102, &[&name])]);
        };
        if o.check_policy && !meets_policy(name, &password) {
            return Err(vec![msg(15118, &[])]);
        }
        self.check_default_database(&o.default_database)?;
        let db = o.default_database.unwrap_or_else(|| "master".into());
        self.engine
            .instance
            .logins
            .create(name, &password, &db)
            .map_err(|e| storage_error(e, "create"))
    }

    pub(super) fn alter_login(
        &mut self,
        name: &str,
        enable: Option<bool>,
        options: &[WithOption],
    ) -> Result<(), Vec<SqlError>> {
        self.refuse_in_transaction("ALTER LOGIN")?;
        let o = self.login_options(options)?;
        let own = self.login_name().eq_ignore_ascii_case(name);
        let logins = &self.engine.instance.logins;
        if !self.has_server_permission("ALTER ANY LOGIN") {
            // Only one's own password, proven with the old one.
            let allowed = own
                && enable.is_none()
                && o.default_database.is_none()
                && o.old_password
                    .as_deref()
                    .is_some_and(|old| logins.authenticate(name, old).is_ok());
            if !allowed {
                return Err(vec![msg(15151, &[&"alter", &"login", &name])]);
            }
        }
        if let Some(p) = &o.password {
            if o.check_policy && !meets_policy(name, p) {
                return Err(vec![msg(15118, &[])]);
            }
        }
        self.check_default_database(&o.default_database)?;
        logins
            .alter(
                name,
                o.password.as_deref(),
                enable,
                o.default_database.as_deref(),
            )
            .map_err(|e| storage_error(e, "alter"))
    }

    pub(super) fn drop_login(&mut self, name: &str) -> Result<(), Vec<SqlError>> {
        self.refuse_in_transaction("DROP LOGIN")?;
        if !self.has_server_permission("ALTER ANY LOGIN") {
            return Err(vec![msg(15151, &[&"drop", &"login", &name])]);
        }
        if name.eq_ignore_ascii_case("sa") {
            return Err(vec![msg(15405, &[&"sa"])]);
        }
        let in_use = self
            .engine
            .instance
            .sessions
            .lock()
            .unwrap()
            .values()
            .any(|s| s.login_name.eq_ignore_ascii_case(name));
        if in_use {
            return Err(vec![msg(15434, &[&name])]);
        }
        self.engine
            .instance
            .logins
            .drop_login(name)
            .map_err(|e| storage_error(e, "drop"))
    }
}
