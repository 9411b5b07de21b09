//! Parsing of the procedure statements: CREATE / ALTER / CREATE OR ALTER PROCEDURE (the
//! batch's only statement, its body the rest of the batch) and DROP PROCEDURE
//! (exec/procedures.rs runs them). A child of `parser` so it uses the parser's helpers.
//!
//! Invariants:
//! 1. A procedure's definition statement is its batch's first: elsewhere it is Msg 111,
//!    as SQL Server says it ('CREATE/ALTER PROCEDURE' must be the first statement in a
//!    query batch), and nothing of the batch runs.
//! 2. The definition kept is the batch's text exactly as sent, comments before CREATE
//!    included (SQL Server's sys.sql_modules.definition).
//! 3. What SQL Server has and extentdb does not build is refused with 40517 naming it:
//!    numbered procedures (`;2`), WITH ENCRYPTION, NATIVE_COMPILATION, SCHEMABINDING,
//!    EXECUTE AS other than CALLER, FOR REPLICATION, table-valued (READONLY) and cursor
//!    (VARYING) parameters. WITH RECOMPILE is accepted: no plan is kept across executions,
//!    so every execution compiles anew, which is what it asks for. EXECUTE AS CALLER is
//!    the default and what runs.

use super::{PResult, ParseError, Parser};
use crate::ast::{ProcedureDefinition, ProcedureMode, ProcedureParameter, StatementKind};
use crate::lexer::TokenKind;

/// SQL Server's most parameters for one procedure (Msg 180 past it).
pub const MAX_PARAMETERS: usize = 2100;

impl Parser {
    /// True when the tokens at the parser's position open a procedure's definition:
    /// CREATE [OR ALTER] PROC[EDURE] or ALTER PROC[EDURE].
    pub(super) fn at_procedure_definition(&self) -> bool {
        let proc_at =
            |i: usize| self.check_word_at(i, "PROC") || self.check_word_at(i, "PROCEDURE");
        (self.check_word("CREATE")
            && (proc_at(1)
                || self.check_word_at(1, "OR") && self.check_word_at(2, "ALTER") && proc_at(3)))
            || (self.check_word("ALTER") && proc_at(1))
    }

    /// Msg 111: a procedure's definition where it is not its batch's first statement.
    pub(super) fn not_first_in_batch(&self) -> ParseError {
        ParseError::new(
            111,
            15,
            1,
            "'CREATE/ALTER PROCEDURE' must be the first statement in a query batch.",
            self.line(),
        )
    }

    /// The whole batch `text` as one CREATE / ALTER PROCEDURE (invariants 1 and 2).
    pub(super) fn procedure_definition(&mut self, text: &str) -> PResult<StatementKind> {
        let mode = match (self.eat_word("CREATE"), self.eat_word("OR")) {
            (true, true) => {
                self.expect_word("ALTER")?;
                ProcedureMode::CreateOrAlter
            }
            (true, false) => ProcedureMode::Create,
            _ => {
                self.expect_word("ALTER")?;
                ProcedureMode::Alter
            }
        };
        if !self.eat_word("PROCEDURE") {
            self.expect_word("PROC")?;
        }
        let name = self.object_name()?;
        if self.check_symbol(";")
            && self
                .peek_at(1)
                .is_some_and(|t| t.kind == TokenKind::Integer)
        {
            return Err(self.not_built("numbered procedures (;number)"));
        }
        let parameters = self.procedure_parameters(text)?;
        let recompile = self.procedure_options()?;
        self.expect_word("AS")?;
        let mut body = Vec::new();
        self.skip_semicolons();
        while !self.at_end() {
            self.depth = 0;
            body.push(self.statement(false)?);
            self.skip_semicolons();
        }
        // An empty body is a procedure that does nothing: SQL Server takes it, and
        // maintenance scripts (Ola Hallengren's) create such a stub, then ALTER it.
        Ok(StatementKind::CreateProcedure(Box::new(
            ProcedureDefinition {
                mode,
                name,
                parameters,
                body,
                definition: text.to_string(),
                recompile,
            },
        )))
    }

    /// The parameter list, bare or in parentheses, possibly empty; Msg 180 past 2,100.
    fn procedure_parameters(&mut self, text: &str) -> PResult<Vec<ProcedureParameter>> {
        let parenthesized = self.check_symbol("(")
            && self
                .peek_at(1)
                .is_some_and(|t| t.kind == TokenKind::Variable);
        if parenthesized {
            self.pos += 1;
        }
        let mut list = Vec::new();
        if self.check_kind(&TokenKind::Variable) {
            let mut ordinal = 0;
            list = self.comma_list(|p| {
                ordinal += 1;
                p.procedure_parameter(ordinal, text)
            })?;
        }
        if parenthesized {
            self.expect_symbol(")")?;
        }
        if list.len() > MAX_PARAMETERS {
            let e = format!(
                "There are too many parameters in this CREATE PROCEDURE statement. The maximum number is {MAX_PARAMETERS}."
            );
            return Err(ParseError::new(180, 15, 1, e, self.line()));
        }
        Ok(list)
    }

    fn procedure_parameter(&mut self, ordinal: usize, text: &str) -> PResult<ProcedureParameter> {
        if self.table_valued_parameter() {
            return Err(self.not_built("table-valued parameters (READONLY)"));
        }
        let (name, data_type) = self.variable_and_type(ordinal)?;
        if self.check_word("VARYING") {
            return Err(self.not_built("cursor parameters (CURSOR VARYING)"));
        }
        let mut default = None;
        if self.eat_symbol("=") {
            let from = self.pos;
            let expr = self.expr()?;
            default = Some((expr, self.source_of(from, text)));
        }
        let output = self.eat_word("OUTPUT") || self.eat_word("OUT");
        if self.check_word("READONLY") {
            return Err(self.not_built("table-valued parameters (READONLY)"));
        }
        Ok(ProcedureParameter {
            name,
            data_type,
            default,
            output,
        })
    }

    /// The text of tokens `from..self.pos` as written in `text` (offsets in characters).
    fn source_of(&self, from: usize, text: &str) -> String {
        let (Some(first), Some(last)) = (self.tokens.get(from), self.tokens.get(self.pos - 1))
        else {
            return String::new();
        };
        let end = last.start + last.text.chars().count();
        text.chars()
            .skip(first.start)
            .take(end - first.start)
            .collect()
    }

    /// `WITH option [, ...]` and `FOR REPLICATION` (invariant 3); true WITH RECOMPILE.
    fn procedure_options(&mut self) -> PResult<bool> {
        let mut options = Vec::new();
        if self.eat_word("WITH") {
            options = self.comma_list(|p| p.procedure_option())?;
        }
        if self.check_word("FOR") && self.check_word_at(1, "REPLICATION") {
            return Err(self.not_built("FOR REPLICATION"));
        }
        Ok(options.contains(&true))
    }

    /// One WITH option: true for RECOMPILE, false for EXECUTE AS CALLER.
    fn procedure_option(&mut self) -> PResult<bool> {
        let word = self.peek_upper_word().unwrap_or_default();
        match word.as_str() {
            "RECOMPILE" => {
                self.pos += 1;
                Ok(true)
            }
            "EXECUTE" | "EXEC" => {
                self.pos += 1;
                self.expect_word("AS")?;
                if self.eat_word("CALLER") {
                    return Ok(false);
                }
                let who = match self.peek() {
                    Some(t) if t.kind != TokenKind::Word => "'user_name'".to_string(),
                    Some(t) => t.text.to_ascii_uppercase(),
                    None => return Err(self.error()),
                };
                Err(self.not_built(&format!("EXECUTE AS {who} on a procedure")))
            }
            "ENCRYPTION" | "NATIVE_COMPILATION" | "SCHEMABINDING" => {
                Err(self.not_built(&format!("WITH {word} on a procedure")))
            }
            _ => Err(self.error()),
        }
    }

    /// DROP PROC[EDURE] [IF EXISTS] name [, ...], after DROP.
    pub(super) fn drop_procedure(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        let if_exists = self.check_word("IF") && self.check_word_at(1, "EXISTS");
        if if_exists {
            self.pos += 2;
        }
        Ok(StatementKind::DropProcedure {
            if_exists,
            names: self.comma_list(|p| p.object_name())?,
        })
    }
}
