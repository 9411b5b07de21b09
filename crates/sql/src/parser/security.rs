//! Parsing of the security statements: ALTER SERVER ROLE, CREATE / DROP USER, ALTER ROLE,
//! GRANT, DENY and REVOKE. A child of `parser` so it uses the parser's own helpers.

use super::{PResult, Parser};
use crate::ast::{PermissionAction, PermissionStatement, Securable, StatementKind};

impl Parser {
    /// `ALTER SERVER ROLE role ADD | DROP MEMBER login` (after `ALTER SERVER`).
    pub(super) fn alter_server_role(&mut self) -> PResult<StatementKind> {
        self.expect_word("ROLE")?;
        let role = self.ident()?;
        let (add, member) = self.member_change()?;
        Ok(StatementKind::AlterServerRole { role, add, member })
    }

    /// `ALTER ROLE role ADD | DROP MEMBER user` (after `ALTER ROLE`).
    pub(super) fn alter_role(&mut self) -> PResult<StatementKind> {
        let role = self.ident()?;
        let (add, member) = self.member_change()?;
        Ok(StatementKind::AlterRole { role, add, member })
    }

    fn member_change(&mut self) -> PResult<(bool, String)> {
        let add = if self.eat_word("ADD") {
            true
        } else {
            self.expect_word("DROP")?;
            false
        };
        self.expect_word("MEMBER")?;
        Ok((add, self.ident()?))
    }

    /// `CREATE USER name [FOR | FROM LOGIN login]` (after `CREATE USER`).
    pub(super) fn create_user(&mut self) -> PResult<StatementKind> {
        let name = self.ident()?;
        let login = if self.eat_word("FOR") || self.eat_word("FROM") {
            self.expect_word("LOGIN")?;
            self.ident()?
        } else {
            name.clone()
        };
        Ok(StatementKind::CreateUser { name, login })
    }

    /// `DROP USER [IF EXISTS] name` (after `DROP USER`).
    pub(super) fn drop_user(&mut self) -> PResult<StatementKind> {
        let if_exists = self.check_word("IF") && self.check_word_at(1, "EXISTS");
        if if_exists {
            self.pos += 2;
        }
        Ok(StatementKind::DropUser {
            if_exists,
            name: self.ident()?,
        })
    }

    /// GRANT / DENY / REVOKE permission [, ...] [ON securable] TO | FROM principal [, ...]
    /// [WITH GRANT OPTION] [CASCADE].
    pub(super) fn permission_statement(&mut self) -> PResult<StatementKind> {
        let action = match self.next()?.text.to_ascii_uppercase().as_str() {
            "GRANT" => PermissionAction::Grant,
            "DENY" => PermissionAction::Deny,
            _ => PermissionAction::Revoke,
        };
        let permissions = self.comma_list(|p| p.permission_name())?;
        let on = if self.eat_word("ON") {
            self.securable()?
        } else {
            Securable::Default
        };
        if !(self.eat_word("TO") || (action == PermissionAction::Revoke && self.eat_word("FROM"))) {
            return Err(self.error());
        }
        let principals = self.comma_list(|p| p.ident())?;
        let with_grant_option = self.check_word("WITH") && self.check_word_at(1, "GRANT");
        if with_grant_option {
            self.pos += 2;
            self.expect_word("OPTION")?;
        }
        let cascade = self.eat_word("CASCADE");
        Ok(StatementKind::Permission(PermissionStatement {
            action,
            permissions,
            on,
            principals,
            with_grant_option,
            cascade,
        }))
    }

    /// One permission: words up to `,`, `ON`, `TO` or `FROM` (`VIEW SERVER STATE`).
    fn permission_name(&mut self) -> PResult<String> {
        let mut words = vec![self.any_word()?.to_ascii_uppercase()];
        while self
            .peek_upper_word()
            .is_some_and(|w| !matches!(w.as_str(), "ON" | "TO" | "FROM"))
        {
            words.push(self.any_word()?.to_ascii_uppercase());
        }
        Ok(words.join(" "))
    }

    /// `OBJECT::name`, `DATABASE::name`, `SERVER::name`, or a bare object name.
    fn securable(&mut self) -> PResult<Securable> {
        if self.check_symbol_at(1, "::") {
            let class = self.any_word()?.to_ascii_uppercase();
            self.expect_symbol("::")?;
            return match class.as_str() {
                "OBJECT" => Ok(Securable::Object(self.object_name()?)),
                "DATABASE" => Ok(Securable::Database(self.ident()?)),
                "SERVER" => {
                    self.ident()?;
                    Ok(Securable::Server)
                }
                _ => Err(self.error()),
            };
        }
        Ok(Securable::Object(self.object_name()?))
    }
}
