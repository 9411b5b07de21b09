//! The T-SQL parser: one batch's text to a list of [`Statement`]s, or the SQL Server
//! error a batch with a syntax error gets (Msg 102, 156, 105, 113, ...).
//!
//! A hand-written recursive-descent parser over the lexer's tokens. Statements may be
//! separated by `;` or by nothing, as in T-SQL; a statement ends where its grammar ends.
//! Keywords are matched case-insensitively on plain words, and SQL Server's reserved
//! words decide where an alias or a name may stand.
//!
//! Deliberately not done here: name resolution, type checking of expressions, constant
//! folding, and statements outside the supported set (CREATE VIEW/FUNCTION, cursors, CTEs
//! before INSERT/UPDATE/DELETE);
//! those are syntax errors for now. A table variable (`@name`) stands as a one-part table
//! name where SQL Server allows one: FROM, and the target of INSERT, UPDATE, DELETE. Nesting is bounded (Msg 191) by tree depth and by
//! measured stack use, so no input can exhaust the stack.

mod grouping;
mod merge;
mod procedures;
mod security;
mod statistics;

use crate::ast::*;
use crate::lexer::{tokenize, Token, TokenKind};
use crate::types::{SqlType, MAX_LENGTH};

/// A batch-level compile error, numbered like SQL Server's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub number: i32,
    pub severity: u8,
    pub state: u8,
    pub text: String,
    /// 1-based, batch-relative line.
    pub line: u32,
}

impl ParseError {
    pub fn new(number: i32, severity: u8, state: u8, text: impl Into<String>, line: u32) -> Self {
        ParseError {
            number,
            severity,
            state,
            text: text.into(),
            line,
        }
    }
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Msg {}, Level {}, State {}, Line {}\n{}",
            self.number, self.severity, self.state, self.line, self.text
        )
    }
}

impl std::error::Error for ParseError {}

type PResult<T> = Result<T, ParseError>;

/// The deepest tree the parser builds: parentheses, subqueries, unary operators, nested
/// statements, and each link of a left-deep chain (`a + b + ...`, joins, UNIONs) count one
/// level. This bounds the recursion of whoever walks (or drops) the tree.
const MAX_DEPTH: usize = 400;

/// The most stack the parser's own recursion may use. Frames are large in debug builds,
/// so depth alone cannot keep a 2 MB thread safe; measuring the stack can.
const STACK_BUDGET: usize = 1 << 20;

/// An address on the current stack frame, to measure how much stack the parser uses.
fn stack_position() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// Parses one batch (text between `GO`s) into statements.
pub fn parse_batch(text: &str) -> Result<Vec<Statement>, ParseError> {
    let mut parser = Parser {
        tokens: tokenize(text)?,
        pos: 0,
        depth: 0,
        stack_base: stack_position(),
    };
    let mut statements = Vec::new();
    parser.skip_semicolons();
    // procedures.rs invariant 1: a procedure's definition is its batch's first statement,
    // and its body is the rest of the batch.
    if parser.at_procedure_definition() {
        let start = parser.peek().map_or((1, 0), |t| (t.line, t.start));
        let kind = parser.procedure_definition(text)?;
        return Ok(vec![Statement {
            line: start.0,
            kind,
            span: (start.1, text.chars().count()),
        }]);
    }
    while !parser.at_end() {
        let first = parser.pos == 0;
        parser.depth = 0;
        statements.push(parser.statement(first)?);
        parser.skip_semicolons();
    }
    Ok(statements)
}

/// The error for an unexpected token, worded as SQL Server words it.
fn syntax_error(token: &Token) -> ParseError {
    if token.is_reserved() {
        return ParseError::new(
            156,
            15,
            1,
            format!("Incorrect syntax near the keyword '{}'.", token.text),
            token.line,
        );
    }
    let near = match &token.kind {
        TokenKind::String { value, .. } => value.as_str(),
        TokenKind::QuotedIdent(value) => value.as_str(),
        _ => token.text.as_str(),
    };
    ParseError::new(
        102,
        15,
        1,
        format!("Incorrect syntax near '{near}'."),
        token.line,
    )
}

fn too_deep(line: u32) -> ParseError {
    ParseError::new(
        191,
        15,
        1,
        "Some part of your SQL statement is nested too deeply. \
         Rewrite the query or break it up into smaller queries.",
        line,
    )
}

/// True for a token usable as an identifier: a quoted name or a non-reserved word.
fn is_identifier(token: &Token) -> bool {
    matches!(token.kind, TokenKind::QuotedIdent(_))
        || (token.kind == TokenKind::Word && !token.is_reserved())
}

/// The first-argument date part functions.
const DATE_PART_FUNCTIONS: &[&str] = &[
    "DATEADD",
    "DATEDIFF",
    "DATEDIFF_BIG",
    "DATEPART",
    "DATENAME",
    "DATETRUNC",
];

/// Reserved words that are nevertheless function names when followed by `(`.
const RESERVED_FUNCTIONS: &[&str] = &["LEFT", "RIGHT", "COALESCE", "NULLIF"];

/// Reserved words that are functions without parentheses.
const NILADIC_FUNCTIONS: &[&str] = &[
    "CURRENT_TIMESTAMP",
    "CURRENT_USER",
    "SESSION_USER",
    "SYSTEM_USER",
    "USER",
];

/// Words that open an old-style table hint list (`FROM t (NOLOCK)`).
const TABLE_HINT_WORDS: &[&str] = &[
    "NOLOCK",
    "READUNCOMMITTED",
    "READCOMMITTED",
    "READCOMMITTEDLOCK",
    "REPEATABLEREAD",
    "SERIALIZABLE",
    "HOLDLOCK",
    "UPDLOCK",
    "XLOCK",
    "ROWLOCK",
    "PAGLOCK",
    "TABLOCK",
    "TABLOCKX",
    "READPAST",
    "NOWAIT",
    "INDEX",
];

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    /// Current tree depth; see [`MAX_DEPTH`].
    depth: usize,
    /// [`stack_position`] when parsing began; see [`STACK_BUDGET`].
    stack_base: usize,
}

// ----------------------------------------------------------------------------------------
// Token-level helpers.
impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn peek_at(&self, offset: usize) -> Option<&Token> {
        self.tokens.get(self.pos + offset)
    }

    fn at_end(&self) -> bool {
        self.pos >= self.tokens.len()
    }

    fn check_word(&self, word: &str) -> bool {
        self.peek().is_some_and(|t| t.is_word(word))
    }

    fn check_word_at(&self, offset: usize, word: &str) -> bool {
        self.peek_at(offset).is_some_and(|t| t.is_word(word))
    }

    fn check_symbol(&self, symbol: &str) -> bool {
        self.peek().is_some_and(|t| t.is_symbol(symbol))
    }

    fn check_symbol_at(&self, offset: usize, symbol: &str) -> bool {
        self.peek_at(offset).is_some_and(|t| t.is_symbol(symbol))
    }

    fn check_kind(&self, kind: &TokenKind) -> bool {
        self.peek().is_some_and(|t| &t.kind == kind)
    }

    fn eat_word(&mut self, word: &str) -> bool {
        let found = self.check_word(word);
        if found {
            self.pos += 1;
        }
        found
    }

    fn eat_symbol(&mut self, symbol: &str) -> bool {
        let found = self.check_symbol(symbol);
        if found {
            self.pos += 1;
        }
        found
    }

    fn expect_word(&mut self, word: &str) -> PResult<()> {
        if self.eat_word(word) {
            Ok(())
        } else {
            Err(self.error())
        }
    }

    fn expect_symbol(&mut self, symbol: &str) -> PResult<()> {
        if self.eat_symbol(symbol) {
            Ok(())
        } else {
            Err(self.error())
        }
    }

    /// Takes the current token; at the end of the batch that is a syntax error.
    fn next(&mut self) -> PResult<Token> {
        let token = self.peek().cloned().ok_or_else(|| self.error())?;
        self.pos += 1;
        Ok(token)
    }

    /// The upper-cased text of the current word, if the current token is a word.
    fn peek_upper_word(&self) -> Option<String> {
        self.peek()
            .filter(|t| t.kind == TokenKind::Word)
            .map(|t| t.text.to_ascii_uppercase())
    }

    /// A syntax error at the current token, or at the last one when the batch ended early.
    fn error(&self) -> ParseError {
        match self.peek().or_else(|| self.tokens.last()) {
            Some(token) => syntax_error(token),
            None => ParseError::new(102, 15, 1, "Incorrect syntax near ''.", 1),
        }
    }

    fn line(&self) -> u32 {
        self.peek()
            .or_else(|| self.tokens.last())
            .map_or(1, |t| t.line)
    }

    fn skip_semicolons(&mut self) {
        while self.eat_symbol(";") {}
    }

    /// Runs `f` one nesting level deeper, failing with Msg 191 past [`MAX_DEPTH`] levels
    /// or [`STACK_BUDGET`] bytes of stack, whichever comes first.
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> PResult<T>) -> PResult<T> {
        let stack_used = self.stack_base.abs_diff(stack_position());
        if self.depth >= MAX_DEPTH || stack_used > STACK_BUDGET {
            return Err(too_deep(self.line()));
        }
        let saved = self.depth;
        self.depth += 1;
        let result = f(self);
        self.depth = saved;
        result
    }

    /// Counts one more link of a left-deep chain (`a + b + c`, joins, UNIONs) as one
    /// more level of tree depth; the enclosing [`Parser::nested`] call restores it.
    fn chain_link(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(too_deep(self.line()));
        }
        Ok(())
    }

    /// A quoted name or a non-reserved word.
    fn ident(&mut self) -> PResult<String> {
        match self.peek() {
            Some(t) if is_identifier(t) => {
                let t = self.next()?;
                Ok(ident_value(t))
            }
            _ => Err(self.error()),
        }
    }

    /// Any word, reserved or not, or a quoted name: for option names and similar spots
    /// where SQL Server accepts keywords (`FILE`, `STATISTICS`, `DISK`).
    fn any_word(&mut self) -> PResult<String> {
        match self.peek() {
            Some(t) if t.kind == TokenKind::Word || matches!(t.kind, TokenKind::QuotedIdent(_)) => {
                let t = self.next()?;
                Ok(ident_value(t))
            }
            _ => Err(self.error()),
        }
    }

    /// A name given as an identifier or as a string (`NAME = N'x'` or `NAME = x`).
    fn name_or_string(&mut self) -> PResult<String> {
        if let Some(TokenKind::String { value, .. }) = self.peek().map(|t| &t.kind) {
            let value = value.clone();
            self.pos += 1;
            return Ok(value);
        }
        self.ident()
    }

    /// A multi-part name; `..` leaves an empty part (`master..sysdatabases`).
    fn object_name(&mut self) -> PResult<ObjectName> {
        let mut parts = vec![self.ident()?];
        while self.check_symbol(".") && !self.check_symbol_at(1, "*") {
            self.pos += 1;
            while self.check_symbol(".") {
                parts.push(String::new());
                self.pos += 1;
            }
            parts.push(self.ident()?);
            if parts.len() > 4 {
                return Err(self.error());
            }
        }
        Ok(ObjectName { parts })
    }

    /// A comma-separated list of at least one item.
    fn comma_list<T>(&mut self, mut item: impl FnMut(&mut Self) -> PResult<T>) -> PResult<Vec<T>> {
        let mut items = vec![item(self)?];
        while self.eat_symbol(",") {
            items.push(item(self)?);
        }
        Ok(items)
    }

    /// `( item, ... )`.
    fn paren_list<T>(&mut self, item: impl FnMut(&mut Self) -> PResult<T>) -> PResult<Vec<T>> {
        self.expect_symbol("(")?;
        let items = self.comma_list(item)?;
        self.expect_symbol(")")?;
        Ok(items)
    }

    /// An integer literal as `u64`, saturating.
    fn unsigned_integer(&mut self) -> PResult<u64> {
        if !self.check_kind(&TokenKind::Integer) {
            return Err(self.error());
        }
        let token = self.next()?;
        Ok(token.text.parse::<u64>().unwrap_or(u64::MAX))
    }

    /// An optionally signed integer literal, saturating.
    fn signed_integer(&mut self) -> PResult<i64> {
        let negative = self.eat_symbol("-");
        if !negative {
            self.eat_symbol("+");
        }
        let magnitude = i64::try_from(self.unsigned_integer()?).unwrap_or(i64::MAX);
        Ok(if negative { -magnitude } else { magnitude })
    }

    /// The balanced tokens up to a `,` or `)` at depth 0, joined by spaces: for hints
    /// and options kept as text.
    fn token_run(&mut self) -> PResult<String> {
        let mut words = Vec::new();
        let mut depth = 0usize;
        while let Some(t) = self.peek() {
            if depth == 0 && (t.is_symbol(",") || t.is_symbol(")")) {
                break;
            }
            if t.is_symbol("(") {
                depth += 1;
            } else if t.is_symbol(")") {
                depth -= 1;
            }
            words.push(t.text.to_ascii_uppercase());
            self.pos += 1;
        }
        if words.is_empty() {
            return Err(self.error());
        }
        Ok(words.join(" "))
    }

    /// `( hint, hint )` with each hint kept as upper-cased text.
    fn hint_list(&mut self) -> PResult<Vec<String>> {
        self.paren_list(|p| p.token_run())
    }
}

fn ident_value(token: Token) -> String {
    match token.kind {
        TokenKind::QuotedIdent(value) => value,
        _ => token.text,
    }
}

// ----------------------------------------------------------------------------------------
// Statements.
impl Parser {
    fn statement(&mut self, first_in_batch: bool) -> PResult<Statement> {
        let token = self.peek().cloned().ok_or_else(|| self.error())?;
        let (line, start) = (token.line, token.start);
        let kind = match &token.kind {
            TokenKind::Word => self.keyword_statement(&token, first_in_batch)?,
            TokenKind::Symbol if token.text == "(" => {
                StatementKind::Select(Box::new(self.query()?))
            }
            TokenKind::QuotedIdent(_) if first_in_batch => self.implicit_execute()?,
            _ => return Err(syntax_error(&token)),
        };
        let end = self.tokens[..self.pos]
            .last()
            .map_or(start, |t| t.start + t.text.chars().count());
        Ok(Statement {
            line,
            kind,
            span: (start, end),
        })
    }

    fn keyword_statement(&mut self, token: &Token, first_in_batch: bool) -> PResult<StatementKind> {
        match statement_handler(&token.text.to_ascii_uppercase()) {
            Some(handler) => handler(self),
            None if first_in_batch && !token.is_reserved() => self.implicit_execute(),
            None => Err(syntax_error(token)),
        }
    }

    fn select_statement(&mut self) -> PResult<StatementKind> {
        Ok(StatementKind::Select(Box::new(self.query()?)))
    }

    fn with_statement(&mut self) -> PResult<StatementKind> {
        let ctes = self.cte_list()?;
        if self.check_word("MERGE") {
            return Ok(StatementKind::Merge(Box::new(self.merge(ctes)?)));
        }
        Ok(StatementKind::Select(Box::new(
            self.query_after_ctes(ctes)?,
        )))
    }

    fn merge_statement(&mut self) -> PResult<StatementKind> {
        Ok(StatementKind::Merge(Box::new(self.merge(Vec::new())?)))
    }

    fn use_statement(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        Ok(StatementKind::Use {
            database: self.ident()?,
        })
    }

    fn dbcc_statement(&mut self) -> PResult<StatementKind> {
        Ok(StatementKind::Dbcc(self.dbcc()?))
    }

    fn execute_statement(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        Ok(StatementKind::Execute(self.execute_body()?))
    }

    fn insert_statement(&mut self) -> PResult<StatementKind> {
        Ok(StatementKind::Insert(self.insert()?))
    }

    fn update_statement(&mut self) -> PResult<StatementKind> {
        // STATISTICS is reserved: UPDATE STATISTICS is the statement unless a table so
        // named (quoted) is updated, which SET follows.
        if self.check_word_at(1, "STATISTICS") && !self.check_word_at(2, "SET") {
            return self.update_statistics();
        }
        Ok(StatementKind::Update(self.update()?))
    }

    fn delete_statement(&mut self) -> PResult<StatementKind> {
        Ok(StatementKind::Delete(self.delete()?))
    }

    fn truncate_statement(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        self.expect_word("TABLE")?;
        Ok(StatementKind::TruncateTable {
            name: self.object_name()?,
        })
    }

    fn backup_statement(&mut self) -> PResult<StatementKind> {
        Ok(StatementKind::Backup(self.backup()?))
    }

    fn restore_statement(&mut self) -> PResult<StatementKind> {
        Ok(StatementKind::Restore(self.restore()?))
    }

    fn reconfigure_statement(&mut self) -> PResult<StatementKind> {
        Ok(StatementKind::Reconfigure {
            with_override: self.with_flag(&["OVERRIDE"]),
        })
    }

    fn shutdown_statement(&mut self) -> PResult<StatementKind> {
        Ok(StatementKind::Shutdown {
            nowait: self.with_flag(&["NOWAIT"]),
        })
    }

    fn while_statement(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        let condition = self.expr()?;
        let body = Box::new(self.nested(|p| p.statement(false))?);
        Ok(StatementKind::While { condition, body })
    }

    fn break_statement(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        Ok(StatementKind::Break)
    }

    fn continue_statement(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        Ok(StatementKind::Continue)
    }

    fn return_statement(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        Ok(StatementKind::Return(self.optional_expr()?))
    }

    fn print_statement(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        Ok(StatementKind::Print(self.expr()?))
    }

    fn waitfor_statement(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        let delay = self.eat_word("DELAY");
        if !delay {
            self.expect_word("TIME")?;
        }
        Ok(StatementKind::WaitFor {
            delay,
            value: self.expr()?,
        })
    }

    fn commit_statement(&mut self) -> PResult<StatementKind> {
        self.commit_or_rollback(true)
    }

    fn rollback_statement(&mut self) -> PResult<StatementKind> {
        self.commit_or_rollback(false)
    }

    fn save_statement(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        if !self.eat_word("TRAN") {
            self.expect_word("TRANSACTION")?;
        }
        Ok(StatementKind::SaveTransaction {
            name: self.transaction_name()?.ok_or_else(|| self.error())?,
        })
    }

    fn checkpoint_statement(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        let duration = if self.check_kind(&TokenKind::Integer) {
            Some(self.primary()?)
        } else {
            None
        };
        Ok(StatementKind::Checkpoint { duration })
    }

    /// An expression if one follows (`RETURN 5`), nothing otherwise (`RETURN` then END).
    fn optional_expr(&mut self) -> PResult<Option<Expr>> {
        if self.peek().is_some_and(can_start_expression) {
            Ok(Some(self.expr()?))
        } else {
            Ok(None)
        }
    }

    fn if_statement(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        let condition = self.expr()?;
        let then_branch = Box::new(self.nested(|p| p.statement(false))?);
        // `IF c stmt; ELSE stmt` is accepted: the terminator belongs to the inner statement.
        if self.check_symbol(";") && self.check_word_at(1, "ELSE") {
            self.pos += 1;
        }
        let else_branch = if self.eat_word("ELSE") {
            Some(Box::new(self.nested(|p| p.statement(false))?))
        } else {
            None
        };
        Ok(StatementKind::If {
            condition,
            then_branch,
            else_branch,
        })
    }

    fn begin(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        let distributed = self.eat_word("DISTRIBUTED");
        if self.eat_word("TRAN") || self.eat_word("TRANSACTION") {
            let name = self.transaction_name()?;
            if self.check_word("WITH") && self.check_word_at(1, "MARK") {
                self.pos += 2;
                if matches!(self.peek().map(|t| &t.kind), Some(TokenKind::String { .. })) {
                    self.pos += 1;
                }
            }
            return Ok(StatementKind::BeginTransaction { name, distributed });
        }
        if distributed {
            return Err(self.error());
        }
        if self.eat_word("TRY") {
            let try_block = self.block_body()?;
            self.expect_word("TRY")?;
            self.expect_word("BEGIN")?;
            self.expect_word("CATCH")?;
            let catch_block = self.block_body_allow_empty()?;
            self.expect_word("CATCH")?;
            return Ok(StatementKind::TryCatch {
                try_block,
                catch_block,
            });
        }
        Ok(StatementKind::Block(self.block_body()?))
    }

    /// Statements up to and including `END`; an empty block is a syntax error as in T-SQL.
    fn block_body(&mut self) -> PResult<Vec<Statement>> {
        let body = self.block_body_allow_empty()?;
        if body.is_empty() {
            // Point at END, which `block_body_allow_empty` consumed.
            self.pos -= 1;
            return Err(self.error());
        }
        Ok(body)
    }

    fn block_body_allow_empty(&mut self) -> PResult<Vec<Statement>> {
        let mut body = Vec::new();
        loop {
            self.skip_semicolons();
            if self.eat_word("END") {
                return Ok(body);
            }
            if self.at_end() {
                return Err(self.error());
            }
            body.push(self.nested(|p| p.statement(false))?);
        }
    }

    /// A transaction name or variable after TRAN, if one follows.
    fn transaction_name(&mut self) -> PResult<Option<String>> {
        match self.peek() {
            Some(t) if is_identifier(t) || t.kind == TokenKind::Variable => {
                let t = self.next()?;
                Ok(Some(ident_value(t)))
            }
            _ => Ok(None),
        }
    }

    fn commit_or_rollback(&mut self, commit: bool) -> PResult<StatementKind> {
        self.pos += 1;
        let name = if self.eat_word("TRAN") || self.eat_word("TRANSACTION") {
            self.transaction_name()?
        } else {
            self.eat_word("WORK");
            None
        };
        Ok(if commit {
            StatementKind::Commit { name }
        } else {
            StatementKind::Rollback { name }
        })
    }

    fn raiserror(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        let mut args = self.paren_list(|p| p.expr())?;
        if args.len() < 3 {
            return Err(self.error());
        }
        let rest = args.split_off(3);
        let mut fixed = args.into_iter();
        let (message, severity, state) = match (fixed.next(), fixed.next(), fixed.next()) {
            (Some(m), Some(s), Some(st)) => (m, s, st),
            _ => return Err(self.error()),
        };
        let options = if self.eat_word("WITH") {
            self.comma_list(|p| p.any_word().map(|w| w.to_ascii_uppercase()))?
        } else {
            Vec::new()
        };
        Ok(StatementKind::Raiserror {
            message,
            severity,
            state,
            args: rest,
            options,
        })
    }

    fn throw(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        if !self.peek().is_some_and(can_start_expression) {
            return Ok(StatementKind::Throw(None));
        }
        let number = self.expr()?;
        self.expect_symbol(",")?;
        let message = self.expr()?;
        self.expect_symbol(",")?;
        let state = self.expr()?;
        Ok(StatementKind::Throw(Some(ThrowArgs {
            number,
            message,
            state,
        })))
    }

    /// Consumes the statement keyword, then `WITH <flag>` when one of `flags` follows.
    fn with_flag(&mut self, flags: &[&str]) -> bool {
        self.pos += 1;
        let found = self.check_word("WITH") && flags.iter().any(|f| self.check_word_at(1, f));
        if found {
            self.pos += 2;
        }
        found
    }

    fn kill(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        let target = self.expr()?;
        let status_only = self.check_word("WITH") && self.check_word_at(1, "STATUSONLY");
        if status_only {
            self.pos += 2;
        }
        Ok(StatementKind::Kill {
            target,
            status_only,
        })
    }
}

type StatementHandler = fn(&mut Parser) -> PResult<StatementKind>;

/// The parser for a statement starting with `word` (upper-cased). A table of function
/// pointers rather than one big match keeps the recursive statement path's stack frames
/// small, which matters for nested blocks in debug builds.
fn statement_handler(word: &str) -> Option<StatementHandler> {
    let handler: StatementHandler = match word {
        "SELECT" => Parser::select_statement,
        "WITH" => Parser::with_statement,
        "CREATE" => Parser::create,
        "ALTER" => Parser::alter,
        "DROP" => Parser::drop,
        "USE" => Parser::use_statement,
        "DBCC" => Parser::dbcc_statement,
        "EXEC" | "EXECUTE" => Parser::execute_statement,
        "DECLARE" => Parser::declare,
        "SET" => Parser::set,
        "INSERT" => Parser::insert_statement,
        "UPDATE" => Parser::update_statement,
        "DELETE" => Parser::delete_statement,
        "MERGE" => Parser::merge_statement,
        "TRUNCATE" => Parser::truncate_statement,
        "BACKUP" => Parser::backup_statement,
        "RESTORE" => Parser::restore_statement,
        "KILL" => Parser::kill,
        "RECONFIGURE" => Parser::reconfigure_statement,
        "SHUTDOWN" => Parser::shutdown_statement,
        "IF" => Parser::if_statement,
        "WHILE" => Parser::while_statement,
        "BEGIN" => Parser::begin,
        "BREAK" => Parser::break_statement,
        "CONTINUE" => Parser::continue_statement,
        "RETURN" => Parser::return_statement,
        "PRINT" => Parser::print_statement,
        "RAISERROR" => Parser::raiserror,
        "THROW" => Parser::throw,
        "WAITFOR" => Parser::waitfor_statement,
        "COMMIT" => Parser::commit_statement,
        "ROLLBACK" => Parser::rollback_statement,
        "SAVE" => Parser::save_statement,
        "CHECKPOINT" => Parser::checkpoint_statement,
        "GRANT" | "DENY" | "REVOKE" => Parser::permission_statement,
        _ => return None,
    };
    Some(handler)
}

/// True when `token` can begin an expression (used where an expression is optional).
fn can_start_expression(token: &Token) -> bool {
    match &token.kind {
        TokenKind::Word => {
            let upper = token.text.to_ascii_uppercase();
            !token.is_reserved()
                || matches!(
                    upper.as_str(),
                    "NULL" | "CASE" | "CONVERT" | "TRY_CONVERT" | "NOT" | "EXISTS" | "DEFAULT"
                )
                || RESERVED_FUNCTIONS.contains(&upper.as_str())
                || NILADIC_FUNCTIONS.contains(&upper.as_str())
        }
        TokenKind::Symbol => matches!(token.text.as_str(), "(" | "-" | "+" | "~"),
        TokenKind::Unknown => false,
        _ => true,
    }
}

// ----------------------------------------------------------------------------------------
// Databases.
impl Parser {
    fn create(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        let word = self.peek_upper_word().unwrap_or_default();
        match word.as_str() {
            "DATABASE" => Ok(StatementKind::CreateDatabase(self.create_database()?)),
            "TABLE" => Ok(StatementKind::CreateTable(self.create_table()?)),
            "UNIQUE" | "CLUSTERED" | "NONCLUSTERED" | "INDEX" => {
                Ok(StatementKind::CreateIndex(self.create_index()?))
            }
            "LOGIN" => self.create_login(),
            "STATISTICS" => self.create_statistics(),
            "TYPE" => Err(self.not_built("CREATE TYPE (user-defined data types and table types)")),
            // Parsed in parse_batch when first; anywhere else, Msg 111.
            "PROC" | "PROCEDURE" | "OR" => Err(self.not_first_in_batch()),
            "USER" => {
                self.pos += 1;
                self.create_user()
            }
            _ => Err(self.error()),
        }
    }

    fn alter(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        if self.check_word("PROC") || self.check_word("PROCEDURE") {
            return Err(self.not_first_in_batch());
        }
        if self.eat_word("LOGIN") {
            return self.alter_login();
        }
        if self.eat_word("SERVER") {
            return self.alter_server_role();
        }
        if self.eat_word("ROLE") {
            return self.alter_role();
        }
        if self.eat_word("TABLE") {
            return self.alter_table();
        }
        if self.eat_word("INDEX") {
            return self.alter_index();
        }
        self.expect_word("DATABASE")?;
        let name = if self.eat_word("CURRENT") {
            "CURRENT".to_string()
        } else {
            self.ident()?
        };
        let action = self.alter_database_action()?;
        Ok(StatementKind::AlterDatabase { name, action })
    }

    /// ALTER TABLE t SET (LOCK_ESCALATION = TABLE | AUTO | DISABLE), ADD CHECK and DROP
    /// CONSTRAINT; every other ALTER TABLE form is refused (40517).
    fn alter_table(&mut self) -> PResult<StatementKind> {
        let table = self.object_name()?;
        if let Some(kind) = self.alter_table_constraint(&table)? {
            return Ok(kind);
        }
        let start = self.pos;
        if self.eat_word("SET") && self.eat_symbol("(") && self.eat_word("LOCK_ESCALATION") {
            if self.eat_symbol("=") {
                let value = self.any_word()?.to_ascii_uppercase();
                if matches!(value.as_str(), "TABLE" | "AUTO" | "DISABLE") && self.eat_symbol(")") {
                    return Ok(StatementKind::AlterTableLockEscalation {
                        table,
                        lock_escalation: value,
                    });
                }
            }
            self.pos = start;
            return Err(self.error());
        }
        self.pos = start;
        Err(ParseError::new(
            40517,
            16,
            1,
            "extentdb does not support ALTER TABLE other than SET (LOCK_ESCALATION = ...), ADD CHECK and DROP CONSTRAINT yet.",
            self.line(),
        ))
    }

    /// ALTER INDEX { name | ALL } ON table { REBUILD | REORGANIZE } [WITH (options)]: the
    /// actions and PARTITION not built are refused here (40517); the options are checked
    /// by the executor (index_ddl.rs).
    fn alter_index(&mut self) -> PResult<StatementKind> {
        let index = match self.eat_word("ALL") {
            true => None,
            false => Some(self.ident()?),
        };
        self.expect_word("ON")?;
        let table = self.object_name()?;
        let word = self.peek_upper_word().unwrap_or_default();
        let action = match word.as_str() {
            "REBUILD" => IndexAction::Rebuild,
            "REORGANIZE" => IndexAction::Reorganize,
            "DISABLE" => IndexAction::Disable,
            "RESUME" | "PAUSE" | "ABORT" | "SET" => {
                return Err(self.not_built(&format!("ALTER INDEX ... {word}")))
            }
            _ => return Err(self.error()),
        };
        self.pos += 1;
        if self.check_word("PARTITION") && action != IndexAction::Disable {
            return Err(self.not_built("ALTER INDEX ... PARTITION (partitioned indexes)"));
        }
        let options = match self.check_word("WITH") && action != IndexAction::Disable {
            true => self.index_options()?,
            false => Vec::new(),
        };
        Ok(StatementKind::AlterIndex(AlterIndex {
            index,
            table,
            action,
            options,
        }))
    }

    /// ALTER TABLE's constraint forms: `[WITH CHECK | WITH NOCHECK] ADD [CONSTRAINT name]
    /// CHECK (expr)` (or FOREIGN KEY), `[WITH CHECK | WITH NOCHECK] { CHECK | NOCHECK }
    /// CONSTRAINT { ALL | name [, ...] }` and `DROP [CONSTRAINT] [IF EXISTS] name [, ...]`;
    /// None for any other form (nothing consumed then). Adding any other kind is refused.
    fn alter_table_constraint(&mut self, table: &ObjectName) -> PResult<Option<StatementKind>> {
        let start = self.pos;
        let mut check_existing = None;
        if self.eat_word("WITH") {
            check_existing = match self.peek_upper_word().as_deref() {
                Some("CHECK") => Some(true),
                Some("NOCHECK") => Some(false),
                _ => return Err(self.error()),
            };
            self.pos += 1;
        }
        if self.check_word("CHECK") || self.check_word("NOCHECK") {
            let enable = self.check_word("CHECK");
            self.pos += 1;
            if !self.eat_word("CONSTRAINT") {
                return Err(self.error());
            }
            let names = match self.eat_word("ALL") {
                true => None,
                false => Some(self.comma_list(|p| p.ident())?),
            };
            return Ok(Some(StatementKind::AlterTableConstraintState {
                table: table.clone(),
                check_existing,
                enable,
                names,
            }));
        }
        if self.eat_word("ADD") {
            let name = match self.eat_word("CONSTRAINT") {
                true => Some(self.ident()?),
                false => None,
            };
            if self.check_word("FOREIGN") {
                let key = self.foreign_key_definition(name, true)?;
                if self.check_symbol(",") {
                    return Err(
                        self.not_built("more than one constraint in one ALTER TABLE ... ADD")
                    );
                }
                return Ok(Some(StatementKind::AlterTableAddForeignKey {
                    table: table.clone(),
                    check_existing: check_existing.unwrap_or(true),
                    key,
                }));
            }
            if !self.check_word("CHECK") {
                if name.is_some() {
                    return Err(self.not_built(
                        "ALTER TABLE ... ADD of a constraint other than CHECK and FOREIGN KEY",
                    ));
                }
                self.pos = start;
                return Ok(None);
            }
            let check = self.check_definition(name)?;
            if self.check_symbol(",") {
                return Err(self.not_built("more than one constraint in one ALTER TABLE ... ADD"));
            }
            return Ok(Some(StatementKind::AlterTableAddCheck {
                table: table.clone(),
                check_existing: check_existing.unwrap_or(true),
                check,
            }));
        }
        if check_existing.is_some() {
            return Err(self.error());
        }
        if !self.eat_word("DROP") {
            return Ok(None);
        }
        let constraint = self.eat_word("CONSTRAINT");
        if !constraint && matches!(self.peek_upper_word().as_deref(), Some("COLUMN" | "PERIOD")) {
            self.pos = start;
            return Ok(None);
        }
        let if_exists = self.check_word("IF") && self.check_word_at(1, "EXISTS");
        if if_exists {
            self.pos += 2;
        }
        let mut names = vec![self.ident()?];
        while self.eat_symbol(",") {
            self.eat_word("CONSTRAINT");
            names.push(self.ident()?);
        }
        Ok(Some(StatementKind::AlterTableDropConstraint {
            table: table.clone(),
            if_exists,
            names,
        }))
    }

    /// The refusal of a construct that is parsed but not built (40517).
    fn not_built(&self, what: &str) -> ParseError {
        ParseError::new(
            40517,
            16,
            1,
            format!("extentdb does not support {what} yet."),
            self.line(),
        )
    }

    fn drop(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        let word = self.peek_upper_word().unwrap_or_default();
        if word == "LOGIN" {
            self.pos += 1;
            return Ok(StatementKind::DropLogin {
                name: self.ident()?,
            });
        }
        if word == "USER" {
            self.pos += 1;
            return self.drop_user();
        }
        if word == "STATISTICS" {
            return self.drop_statistics();
        }
        if word == "PROC" || word == "PROCEDURE" {
            return self.drop_procedure();
        }
        if !matches!(word.as_str(), "DATABASE" | "TABLE" | "INDEX") {
            return Err(self.error());
        }
        self.pos += 1;
        let if_exists = self.check_word("IF") && self.check_word_at(1, "EXISTS");
        if if_exists {
            self.pos += 2;
        }
        Ok(match word.as_str() {
            "DATABASE" => StatementKind::DropDatabase {
                if_exists,
                names: self.comma_list(|p| p.ident())?,
            },
            "TABLE" => StatementKind::DropTable {
                if_exists,
                names: self.comma_list(|p| p.object_name())?,
            },
            _ => StatementKind::DropIndex {
                if_exists,
                indexes: self.comma_list(|p| p.index_ref())?,
            },
        })
    }

    fn create_database(&mut self) -> PResult<CreateDatabase> {
        self.pos += 1;
        let mut db = CreateDatabase {
            name: self.ident()?,
            primary_files: Vec::new(),
            filegroups: Vec::new(),
            log_files: Vec::new(),
            collation: None,
            for_attach: false,
        };
        if self.check_word("CONTAINMENT") {
            self.pos += 1;
            self.expect_symbol("=")?;
            self.any_word()?;
        }
        if self.eat_word("ON") {
            self.eat_word("PRIMARY");
            self.database_files(&mut db)?;
        }
        if self.eat_word("LOG") {
            self.expect_word("ON")?;
            db.log_files = self.comma_list(|p| p.filespec())?;
        }
        if self.eat_word("COLLATE") {
            db.collation = Some(self.any_word()?);
        }
        if self.check_word("FOR") && self.check_word_at(1, "ATTACH") {
            self.pos += 2;
            db.for_attach = true;
        }
        Ok(db)
    }

    /// The `ON` list: filespecs for PRIMARY, then `FILEGROUP fg [DEFAULT] <filespec>...`.
    fn database_files(&mut self, db: &mut CreateDatabase) -> PResult<()> {
        loop {
            if self.eat_word("FILEGROUP") {
                let name = self.ident()?;
                if self.eat_word("CONTAINS") {
                    self.any_word()?;
                }
                let default = self.eat_word("DEFAULT");
                db.filegroups.push(FilegroupDefinition {
                    name,
                    default,
                    files: vec![self.filespec()?],
                });
            } else {
                let spec = self.filespec()?;
                match db.filegroups.last_mut() {
                    Some(fg) => fg.files.push(spec),
                    None => db.primary_files.push(spec),
                }
            }
            if !self.eat_symbol(",") {
                return Ok(());
            }
        }
    }

    /// `( NAME = ..., FILENAME = ..., SIZE = ..., MAXSIZE = ..., FILEGROWTH = ... )`.
    fn filespec(&mut self) -> PResult<FileSpec> {
        self.expect_symbol("(")?;
        let mut spec = FileSpec::default();
        loop {
            let key = self.peek_upper_word().ok_or_else(|| self.error())?;
            if key == "OFFLINE" {
                self.pos += 1;
                spec.offline = true;
            } else {
                if !matches!(
                    key.as_str(),
                    "NAME" | "NEWNAME" | "FILENAME" | "SIZE" | "MAXSIZE" | "FILEGROWTH"
                ) {
                    return Err(self.error());
                }
                self.pos += 1;
                self.expect_symbol("=")?;
                match key.as_str() {
                    "NAME" => spec.name = Some(self.name_or_string()?),
                    "NEWNAME" => spec.new_name = Some(self.name_or_string()?),
                    "FILENAME" => spec.filename = Some(self.string_literal()?),
                    "SIZE" => spec.size = Some(self.size()?),
                    "MAXSIZE" => spec.max_size = Some(self.size()?),
                    _ => spec.file_growth = Some(self.size()?),
                }
            }
            if !self.eat_symbol(",") {
                break;
            }
        }
        self.expect_symbol(")")?;
        Ok(spec)
    }

    fn string_literal(&mut self) -> PResult<String> {
        match self.peek().map(|t| &t.kind) {
            Some(TokenKind::String { value, .. }) => {
                let value = value.clone();
                self.pos += 1;
                Ok(value)
            }
            _ => Err(self.error()),
        }
    }

    /// `n[KB|MB|GB|TB|%]` or `UNLIMITED`; no unit means MB.
    fn size(&mut self) -> PResult<Size> {
        if self.eat_word("UNLIMITED") {
            return Ok(Size::Unlimited);
        }
        let n = self.unsigned_integer()?;
        if self.eat_symbol("%") {
            return Ok(Size::Percent(u32::try_from(n).unwrap_or(u32::MAX)));
        }
        let shift = match self.peek_upper_word().as_deref() {
            Some("KB") => 10,
            Some("MB") => 20,
            Some("GB") => 30,
            Some("TB") => 40,
            _ => return Ok(Size::Bytes(n.saturating_mul(1 << 20))),
        };
        self.pos += 1;
        Ok(Size::Bytes(n.saturating_mul(1u64 << shift)))
    }

    fn alter_database_action(&mut self) -> PResult<AlterDatabaseAction> {
        let word = self.peek_upper_word().ok_or_else(|| self.error())?;
        self.pos += 1;
        let action = match word.as_str() {
            "ADD" => self.alter_database_add()?,
            "REMOVE" => {
                if self.eat_word("FILEGROUP") {
                    AlterDatabaseAction::RemoveFilegroup {
                        name: self.ident()?,
                    }
                } else {
                    self.expect_word("FILE")?;
                    AlterDatabaseAction::RemoveFile {
                        logical_name: self.name_or_string()?,
                    }
                }
            }
            "MODIFY" => self.alter_database_modify()?,
            "SET" => self.alter_database_set()?,
            "COLLATE" => AlterDatabaseAction::Collate {
                collation: self.any_word()?,
            },
            _ => {
                self.pos -= 1;
                return Err(self.error());
            }
        };
        Ok(action)
    }

    fn alter_database_add(&mut self) -> PResult<AlterDatabaseAction> {
        if self.eat_word("FILEGROUP") {
            let name = self.ident()?;
            if self.eat_word("CONTAINS") {
                self.any_word()?;
            }
            return Ok(AlterDatabaseAction::AddFilegroup { name });
        }
        if self.eat_word("LOG") {
            self.expect_word("FILE")?;
            return Ok(AlterDatabaseAction::AddLogFile {
                files: self.comma_list(|p| p.filespec())?,
            });
        }
        self.expect_word("FILE")?;
        let files = self.comma_list(|p| p.filespec())?;
        let filegroup = if self.eat_word("TO") {
            self.expect_word("FILEGROUP")?;
            Some(self.ident()?)
        } else {
            None
        };
        Ok(AlterDatabaseAction::AddFile { files, filegroup })
    }

    fn alter_database_modify(&mut self) -> PResult<AlterDatabaseAction> {
        if self.eat_word("FILE") {
            return Ok(AlterDatabaseAction::ModifyFile(self.filespec()?));
        }
        if self.eat_word("NAME") {
            self.expect_symbol("=")?;
            return Ok(AlterDatabaseAction::ModifyName {
                new_name: self.ident()?,
            });
        }
        self.expect_word("FILEGROUP")?;
        let name = self.ident()?;
        let word = self.peek_upper_word().ok_or_else(|| self.error())?;
        let change = match word.as_str() {
            "DEFAULT" => FilegroupChange::Default,
            "READ_ONLY" | "READONLY" => FilegroupChange::ReadOnly,
            "READ_WRITE" | "READWRITE" => FilegroupChange::ReadWrite,
            "AUTOGROW_SINGLE_FILE" => FilegroupChange::AutogrowSingleFile,
            "AUTOGROW_ALL_FILES" => FilegroupChange::AutogrowAllFiles,
            "REBALANCE" => FilegroupChange::Rebalance,
            "NAME" => {
                self.pos += 1;
                self.expect_symbol("=")?;
                return Ok(AlterDatabaseAction::ModifyFilegroup {
                    name,
                    change: FilegroupChange::Name(self.ident()?),
                });
            }
            _ => return Err(self.error()),
        };
        self.pos += 1;
        Ok(AlterDatabaseAction::ModifyFilegroup { name, change })
    }

    fn alter_database_set(&mut self) -> PResult<AlterDatabaseAction> {
        let options = self.comma_list(|p| p.database_option())?;
        let termination = if self.eat_word("WITH") {
            Some(self.termination()?)
        } else {
            None
        };
        Ok(AlterDatabaseAction::Set {
            options,
            termination,
        })
    }

    fn termination(&mut self) -> PResult<Termination> {
        if self.eat_word("NO_WAIT") {
            return Ok(Termination::NoWait);
        }
        self.expect_word("ROLLBACK")?;
        if self.eat_word("IMMEDIATE") {
            return Ok(Termination::RollbackImmediate);
        }
        self.expect_word("AFTER")?;
        let seconds = u32::try_from(self.unsigned_integer()?).unwrap_or(u32::MAX);
        self.eat_word("SECONDS");
        Ok(Termination::RollbackAfter { seconds })
    }

    fn database_option(&mut self) -> PResult<DatabaseOption> {
        let name = self.any_word()?.to_ascii_uppercase();
        let option = match name.as_str() {
            "SINGLE_USER" => DatabaseOption::SingleUser,
            "MULTI_USER" => DatabaseOption::MultiUser,
            "RESTRICTED_USER" => DatabaseOption::RestrictedUser,
            "OFFLINE" => DatabaseOption::Offline,
            "ONLINE" => DatabaseOption::Online,
            "EMERGENCY" => DatabaseOption::Emergency,
            "READ_ONLY" => DatabaseOption::ReadOnly,
            "READ_WRITE" => DatabaseOption::ReadWrite,
            "RECOVERY" => {
                let model = match self.peek_upper_word().as_deref() {
                    Some("SIMPLE") => RecoveryModel::Simple,
                    Some("FULL") => RecoveryModel::Full,
                    Some("BULK_LOGGED") => RecoveryModel::BulkLogged,
                    _ => return Err(self.error()),
                };
                self.pos += 1;
                DatabaseOption::Recovery(model)
            }
            _ => DatabaseOption::Other {
                value: self.database_option_value()?,
                name,
            },
        };
        Ok(option)
    }

    /// The value of a generic `SET` option: `OFF`, `= 130`, `60 SECONDS`, `ON (...)`.
    fn database_option_value(&mut self) -> PResult<Option<String>> {
        let explicit = self.eat_symbol("=");
        let has_value = explicit
            || self.peek().is_some_and(|t| match t.kind {
                TokenKind::Word => {
                    !t.is_reserved() || t.is_word("ON") || t.is_word("OFF") || t.is_word("FULL")
                }
                TokenKind::Integer | TokenKind::String { .. } | TokenKind::QuotedIdent(_) => true,
                _ => false,
            });
        if !has_value {
            return Ok(None);
        }
        let mut parts = vec![self.next()?.text];
        while let Some(unit) = self.peek_upper_word() {
            if !matches!(
                unit.as_str(),
                "SECONDS" | "MINUTES" | "KB" | "MB" | "GB" | "TB"
            ) {
                break;
            }
            parts.push(self.next()?.text);
        }
        if self.check_symbol("(") {
            let inner = self.hint_list()?;
            parts.push(format!("({})", inner.join(", ")));
        }
        Ok(Some(parts.join(" ")))
    }
}

// ----------------------------------------------------------------------------------------
// DBCC, EXEC, options.
impl Parser {
    fn dbcc(&mut self) -> PResult<Dbcc> {
        self.pos += 1;
        let name = self.any_word()?.to_ascii_uppercase();
        let mut args = Vec::new();
        if self.eat_symbol("(") {
            if !self.check_symbol(")") {
                args = self.comma_list(|p| p.expr())?;
            }
            self.expect_symbol(")")?;
        }
        let options = if self.eat_word("WITH") {
            self.comma_list(|p| p.with_option())?
        } else {
            Vec::new()
        };
        Ok(Dbcc {
            name,
            args,
            options,
        })
    }

    /// `NAME [= value]`.
    fn with_option(&mut self) -> PResult<WithOption> {
        let name = self.any_word()?.to_ascii_uppercase();
        let value = if self.eat_symbol("=") {
            Some(self.option_value()?)
        } else {
            None
        };
        Ok(WithOption { name, value })
    }

    fn option_value(&mut self) -> PResult<OptionValue> {
        let bare_word = self.peek().is_some_and(|t| {
            t.kind == TokenKind::Word
                && !t.is_word("NULL")
                && !self.check_symbol_at(1, "(")
                && !self.check_symbol_at(1, ".")
        });
        if bare_word {
            return Ok(OptionValue::Word(self.next()?.text));
        }
        Ok(OptionValue::Expr(self.expr()?))
    }

    /// `WITH ( opt = v, ... )` or the old `WITH opt = v, ...` form.
    fn index_options(&mut self) -> PResult<Vec<WithOption>> {
        self.expect_word("WITH")?;
        if self.check_symbol("(") {
            self.paren_list(|p| p.with_option())
        } else {
            self.comma_list(|p| p.with_option())
        }
    }

    /// Everything after `EXEC`: `[@ret =] proc [args]` or `( 'dynamic' + @sql )`.
    fn execute_body(&mut self) -> PResult<Execute> {
        if self.eat_symbol("(") {
            let expr = self.expr()?;
            self.expect_symbol(")")?;
            return Ok(Execute {
                return_variable: None,
                target: ExecTarget::Dynamic {
                    parts: concatenation_parts(expr),
                },
            });
        }
        let mut return_variable = None;
        if self.check_kind(&TokenKind::Variable) && self.check_symbol_at(1, "=") {
            return_variable = Some(self.next()?.text);
            self.pos += 1;
        }
        let name = self.object_name()?;
        let mut args = Vec::new();
        if self.peek().is_some_and(can_start_expression) {
            args = self.comma_list(|p| p.exec_arg())?;
        }
        Ok(Execute {
            return_variable,
            target: ExecTarget::Procedure { name, args },
        })
    }

    fn exec_arg(&mut self) -> PResult<ExecArg> {
        let mut name = None;
        if self.check_kind(&TokenKind::Variable) && self.check_symbol_at(1, "=") {
            name = Some(self.next()?.text);
            self.pos += 1;
        }
        let value = self.expr()?;
        let output = self.eat_word("OUTPUT") || self.eat_word("OUT");
        Ok(ExecArg {
            name,
            value,
            output,
        })
    }

    /// A batch's first statement may name a procedure without EXEC.
    fn implicit_execute(&mut self) -> PResult<StatementKind> {
        Ok(StatementKind::Execute(self.execute_body()?))
    }
}

/// Splits `a + b + c` into `[a, b, c]` for dynamic EXEC.
fn concatenation_parts(expr: Expr) -> Vec<Expr> {
    let mut parts = Vec::new();
    let mut current = expr;
    loop {
        match current {
            Expr::Binary {
                left,
                op: BinaryOp::Add,
                right,
            } => {
                parts.push(*right);
                current = *left;
            }
            other => {
                parts.push(other);
                break;
            }
        }
    }
    parts.reverse();
    parts
}

impl From<ParseError> for crate::messages::SqlError {
    /// A syntax error as the message clients see.
    fn from(e: ParseError) -> crate::messages::SqlError {
        crate::messages::SqlError {
            number: e.number,
            severity: e.severity,
            state: e.state,
            text: e.text,
            line: e.line,
            procedure: None,
        }
    }
}

/// One parameter of an sp_executesql / sp_prepare definition list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParameterDefinition {
    /// With its `@`.
    pub name: String,
    pub sql_type: crate::types::SqlType,
    pub output: bool,
}

/// Parses a parameter definition list such as `@id int, @name nvarchar(50) OUTPUT`
/// (sp_executesql's second argument). A syntax error is Msg 102 as for any batch.
pub fn parse_parameter_definitions(text: &str) -> Result<Vec<ParameterDefinition>, ParseError> {
    let mut parser = Parser {
        tokens: tokenize(text)?,
        pos: 0,
        depth: 0,
        stack_base: stack_position(),
    };
    if parser.at_end() {
        return Ok(Vec::new());
    }
    let mut ordinal = 0;
    let defs = parser.comma_list(|p| {
        ordinal += 1;
        if p.table_valued_parameter() {
            return Err(p.not_built("table-valued parameters (READONLY)"));
        }
        let (name, data_type) = p.variable_and_type(ordinal)?;
        let output = p.eat_word("OUTPUT") || p.eat_word("OUT");
        Ok(ParameterDefinition {
            name,
            sql_type: data_type.sql_type,
            output,
        })
    })?;
    if !parser.at_end() {
        return Err(parser.error());
    }
    Ok(defs)
}

// ----------------------------------------------------------------------------------------
// DECLARE, SET and data types.
impl Parser {
    /// `@name [AS] type`, as DECLARE and parameter definitions write it.
    fn variable_and_type(&mut self, ordinal: usize) -> PResult<(String, DataType)> {
        if !self.check_kind(&TokenKind::Variable) {
            return Err(self.error());
        }
        let name = self.next()?.text;
        self.eat_word("AS");
        Ok((name, self.data_type(ordinal, false)?))
    }

    /// Whether the parameter definition that starts here is a table-valued one: READONLY
    /// before the next comma outside parentheses.
    fn table_valued_parameter(&self) -> bool {
        let mut depth = 0usize;
        for t in &self.tokens[self.pos..] {
            match t.text.as_str() {
                "(" if t.kind == TokenKind::Symbol => depth += 1,
                ")" if t.kind == TokenKind::Symbol => depth = depth.saturating_sub(1),
                "," if t.kind == TokenKind::Symbol && depth == 0 => return false,
                _ if t.is_word("READONLY") => return true,
                _ => {}
            }
        }
        false
    }

    fn declare(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        let mut ordinal = 0;
        let declarations = self.comma_list(|p| {
            ordinal += 1;
            let table = p.check_kind(&TokenKind::Variable)
                && (p.check_word_at(1, "TABLE")
                    || p.check_word_at(1, "AS") && p.check_word_at(2, "TABLE"));
            if table {
                return p.table_variable().map(Declaration::Table);
            }
            let (name, data_type) = p.variable_and_type(ordinal)?;
            let initial = if p.eat_symbol("=") {
                Some(p.expr()?)
            } else {
                None
            };
            Ok(Declaration::Scalar(VariableDeclaration {
                name,
                data_type,
                initial,
            }))
        })?;
        Ok(StatementKind::Declare(declarations))
    }

    /// `@name [AS] TABLE (definitions)`, a table variable's declaration. An inline INDEX
    /// is refused (40517) until it is built.
    fn table_variable(&mut self) -> PResult<CreateTable> {
        let name = self.next()?.text;
        self.eat_word("AS");
        self.expect_word("TABLE")?;
        let mut table = CreateTable {
            name: ObjectName::simple(&name),
            columns: Vec::new(),
            constraints: Vec::new(),
            filegroup: None,
        };
        self.table_definitions(&mut table, true)?;
        Ok(table)
    }

    /// A table's name where a table variable may stand instead (`@name`, kept as a
    /// one-part name): the target of INSERT, UPDATE and DELETE, a FROM clause's table.
    fn table_or_variable(&mut self) -> PResult<ObjectName> {
        if self.check_kind(&TokenKind::Variable) {
            return Ok(ObjectName::simple(&self.next()?.text));
        }
        self.object_name()
    }

    fn assign_op(&mut self) -> Option<AssignOp> {
        let op = match self.peek()?.text.as_str() {
            "=" => AssignOp::Assign,
            "+=" => AssignOp::Add,
            "-=" => AssignOp::Subtract,
            "*=" => AssignOp::Multiply,
            "/=" => AssignOp::Divide,
            "%=" => AssignOp::Modulo,
            "&=" => AssignOp::BitAnd,
            "|=" => AssignOp::BitOr,
            "^=" => AssignOp::BitXor,
            _ => return None,
        };
        if self.peek()?.kind != TokenKind::Symbol {
            return None;
        }
        self.pos += 1;
        Some(op)
    }

    fn set(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        if self.check_kind(&TokenKind::Variable) {
            let name = self.next()?.text;
            let op = self.assign_op().ok_or_else(|| self.error())?;
            let value = self.expr()?;
            return Ok(StatementKind::SetVariable { name, op, value });
        }
        if self.eat_word("IDENTITY_INSERT") {
            let table = self.object_name()?;
            let on = self.eat_word("ON");
            if !on {
                self.expect_word("OFF")?;
            }
            return Ok(StatementKind::SetIdentityInsert { table, on });
        }
        if self.eat_word("TRANSACTION") {
            self.expect_word("ISOLATION")?;
            self.expect_word("LEVEL")?;
            return Ok(StatementKind::SetOption {
                options: vec!["TRANSACTION ISOLATION LEVEL".to_string()],
                value: SetValue::Word(self.isolation_level()?),
            });
        }
        let options = self.comma_list(|p| p.set_option_name())?;
        // SET ROWCOUNT { number | @number_var }: no sign, no expression (`SET ROWCOUNT -1`
        // is a syntax error near '-', as in SQL Server).
        let rowcount_value =
            self.check_kind(&TokenKind::Integer) || self.check_kind(&TokenKind::Variable);
        if options.iter().any(|o| o == "ROWCOUNT") {
            if !rowcount_value {
                return Err(self.error());
            }
            // The one token: `SET ROWCOUNT 5 + 1` is a syntax error near '+'.
            let value = SetValue::Expr(self.primary()?);
            return Ok(StatementKind::SetOption { options, value });
        }
        let value = if self.eat_word("ON") {
            SetValue::On
        } else if self.eat_word("OFF") {
            SetValue::Off
        } else if self
            .peek()
            .is_some_and(|t| t.kind == TokenKind::Word && !t.is_reserved())
        {
            SetValue::Word(self.next()?.text)
        } else {
            SetValue::Expr(self.expr()?)
        };
        Ok(StatementKind::SetOption { options, value })
    }

    fn set_option_name(&mut self) -> PResult<String> {
        let name = self.any_word()?.to_ascii_uppercase();
        if name == "STATISTICS" {
            let which = self.any_word()?.to_ascii_uppercase();
            return Ok(format!("STATISTICS {which}"));
        }
        Ok(name)
    }

    fn isolation_level(&mut self) -> PResult<String> {
        let first = self.any_word()?.to_ascii_uppercase();
        let level = match first.as_str() {
            "READ" => {
                let second = self.any_word()?.to_ascii_uppercase();
                if second != "COMMITTED" && second != "UNCOMMITTED" {
                    self.pos -= 1;
                    return Err(self.error());
                }
                format!("READ {second}")
            }
            "REPEATABLE" => {
                self.expect_word("READ")?;
                "REPEATABLE READ".to_string()
            }
            "SNAPSHOT" | "SERIALIZABLE" => first,
            _ => {
                self.pos -= 1;
                return Err(self.error());
            }
        };
        Ok(level)
    }

    /// A data type. `ordinal` numbers the column or variable for Msg 2715-style errors;
    /// `cast` selects the CAST/CONVERT wording for unknown types.
    fn data_type(&mut self, ordinal: usize, cast: bool) -> PResult<DataType> {
        let line = self.line();
        let name = self.object_name()?;
        let qualified_sys = name.parts.len() == 2 && name.parts[0].eq_ignore_ascii_case("sys");
        let type_name = name.name().to_string();
        let mut args = TypeArgs::default();
        if self.eat_symbol("(") {
            args = self.type_args()?;
        }
        if name.parts.len() > 1 && !qualified_sys {
            return Err(unknown_type(&name.joined(), ordinal, cast, line));
        }
        let spec = TypeSpec {
            name: &type_name,
            ordinal,
            line,
        };
        let sql_type = resolve_type(&spec, &args)?
            .ok_or_else(|| unknown_type(&type_name, ordinal, cast, line))?;
        Ok(DataType {
            sql_type,
            name: type_name,
            length_given: args.first.is_some(),
        })
    }

    /// After `(`: `MAX`, `n` or `p, s`, then `)`.
    fn type_args(&mut self) -> PResult<TypeArgs> {
        let mut args = TypeArgs::default();
        if self.eat_word("MAX") {
            args.first = Some(TypeLength::Max);
        } else {
            args.first = Some(TypeLength::N(self.unsigned_integer()?));
            if self.eat_symbol(",") {
                args.second = Some(self.unsigned_integer()?);
            }
        }
        self.expect_symbol(")")?;
        Ok(args)
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct TypeArgs {
    first: Option<TypeLength>,
    second: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum TypeLength {
    Max,
    N(u64),
}

/// What type-checking errors need to know about the type being declared.
struct TypeSpec<'a> {
    name: &'a str,
    ordinal: usize,
    line: u32,
}

fn unknown_type(name: &str, ordinal: usize, cast: bool, line: u32) -> ParseError {
    if cast {
        return ParseError::new(
            243,
            16,
            2,
            format!("Type {name} is not a defined system type."),
            line,
        );
    }
    ParseError::new(
        2715,
        16,
        6,
        format!("Column, parameter, or variable #{ordinal}: Cannot find data type {name}."),
        line,
    )
}

/// Maps a type name and its arguments to a `SqlType`; `Ok(None)` for an unknown name.
fn resolve_type(spec: &TypeSpec, args: &TypeArgs) -> PResult<Option<SqlType>> {
    let lower = spec.name.to_ascii_lowercase();
    let fixed = |t: SqlType| -> PResult<Option<SqlType>> {
        if args.first.is_some() {
            return Err(ParseError::new(
                2716,
                16,
                1,
                format!(
                    "Column, parameter, or variable #{}: Cannot specify a column width on data type {}.",
                    spec.ordinal, spec.name
                ),
                spec.line,
            ));
        }
        Ok(Some(t))
    };
    let t = match lower.as_str() {
        "bit" => return fixed(SqlType::Bit),
        "tinyint" => return fixed(SqlType::TinyInt),
        "smallint" => return fixed(SqlType::SmallInt),
        "int" | "integer" => return fixed(SqlType::Int),
        "bigint" => return fixed(SqlType::BigInt),
        "real" => return fixed(SqlType::Real),
        "money" => {
            return fixed(SqlType::Decimal {
                precision: 19,
                scale: 4,
            })
        }
        "smallmoney" => {
            return fixed(SqlType::Decimal {
                precision: 10,
                scale: 4,
            })
        }
        "date" => return fixed(SqlType::Date),
        "datetime" | "smalldatetime" => return fixed(SqlType::DateTime),
        "uniqueidentifier" => return fixed(SqlType::UniqueIdentifier),
        "sysname" => return fixed(SqlType::NVarChar(128)),
        "text" => return fixed(SqlType::VarChar(MAX_LENGTH)),
        "ntext" => return fixed(SqlType::NVarChar(MAX_LENGTH)),
        "image" => return fixed(SqlType::VarBinary(MAX_LENGTH)),
        "timestamp" | "rowversion" => return fixed(SqlType::Binary(8)),
        "decimal" | "numeric" | "dec" => decimal_type(spec, args)?,
        "float" => float_type(spec, args)?,
        "datetime2" => datetime2_type(spec, args)?,
        "char" | "character" => SqlType::Char(length(spec, args, 8000, false)?),
        "varchar" => SqlType::VarChar(length(spec, args, 8000, true)?),
        "nchar" => SqlType::NChar(length(spec, args, 4000, false)?),
        "nvarchar" => SqlType::NVarChar(length(spec, args, 4000, true)?),
        "binary" => SqlType::Binary(length(spec, args, 8000, false)?),
        "varbinary" => SqlType::VarBinary(length(spec, args, 8000, true)?),
        _ => return Ok(None),
    };
    Ok(Some(t))
}

fn zero_length(line: u32) -> ParseError {
    ParseError::new(
        1001,
        15,
        1,
        format!("Line {line}: Length or precision specification 0 is invalid."),
        line,
    )
}

fn precision_too_large(spec: &TypeSpec, precision: u64, max: u64) -> ParseError {
    ParseError::new(
        2750,
        16,
        1,
        format!(
            "Column or parameter #{}: Specified column precision {precision} is greater than the maximum precision of {max}.",
            spec.ordinal
        ),
        spec.line,
    )
}

/// A character or binary length: default 1, `MAX` where allowed, 1..=`max` otherwise.
fn length(spec: &TypeSpec, args: &TypeArgs, max: u64, allow_max: bool) -> PResult<u32> {
    if args.second.is_some() {
        return Err(ParseError::new(
            102,
            15,
            1,
            "Incorrect syntax near ','.",
            spec.line,
        ));
    }
    match args.first {
        None => Ok(1),
        Some(TypeLength::Max) if allow_max => Ok(MAX_LENGTH),
        Some(TypeLength::Max) => Err(ParseError::new(
            102,
            15,
            1,
            "Incorrect syntax near 'max'.",
            spec.line,
        )),
        Some(TypeLength::N(0)) => Err(zero_length(spec.line)),
        Some(TypeLength::N(n)) if n > max => Err(ParseError::new(
            131,
            15,
            3,
            format!(
                "The size ({n}) given to the type '{}' exceeds the maximum allowed for any data type ({max}).",
                spec.name.to_ascii_lowercase()
            ),
            spec.line,
        )),
        Some(TypeLength::N(n)) => Ok(n as u32),
    }
}

fn decimal_type(spec: &TypeSpec, args: &TypeArgs) -> PResult<SqlType> {
    let precision = match args.first {
        None => 18,
        Some(TypeLength::N(p)) => p,
        Some(TypeLength::Max) => return Err(syntax_near_max(spec.line)),
    };
    let scale = args.second.unwrap_or(0);
    if precision == 0 {
        return Err(zero_length(spec.line));
    }
    if precision > 38 {
        return Err(precision_too_large(spec, precision, 38));
    }
    if scale > precision {
        return Err(ParseError::new(
            192,
            16,
            1,
            "The scale must be less than or equal to the precision.",
            spec.line,
        ));
    }
    Ok(SqlType::Decimal {
        precision: precision as u8,
        scale: scale as u8,
    })
}

fn float_type(spec: &TypeSpec, args: &TypeArgs) -> PResult<SqlType> {
    match (args.first, args.second) {
        (None, _) => Ok(SqlType::Float),
        (Some(TypeLength::N(0)), None) => Err(zero_length(spec.line)),
        (Some(TypeLength::N(n)), None) if n <= 24 => Ok(SqlType::Real),
        (Some(TypeLength::N(n)), None) if n <= 53 => Ok(SqlType::Float),
        (Some(TypeLength::N(n)), None) => Err(precision_too_large(spec, n, 53)),
        _ => Err(syntax_near_max(spec.line)),
    }
}

fn datetime2_type(spec: &TypeSpec, args: &TypeArgs) -> PResult<SqlType> {
    match (args.first, args.second) {
        (None, _) => Ok(SqlType::DateTime2(7)),
        (Some(TypeLength::N(s)), None) if s <= 7 => Ok(SqlType::DateTime2(s as u8)),
        (Some(TypeLength::N(s)), None) => Err(ParseError::new(
            1002,
            15,
            1,
            format!("Line {}: Specified scale {s} is invalid.", spec.line),
            spec.line,
        )),
        _ => Err(syntax_near_max(spec.line)),
    }
}

fn syntax_near_max(line: u32) -> ParseError {
    ParseError::new(102, 15, 1, "Incorrect syntax near 'max'.", line)
}

// ----------------------------------------------------------------------------------------
// Queries.
impl Parser {
    fn query(&mut self) -> PResult<Query> {
        self.nested(|p| {
            let mut query = Query::of_body(p.query_union()?);
            if p.check_word("ORDER") && p.check_word_at(1, "BY") {
                p.pos += 2;
                query.order_by = p.comma_list(|p| p.order_item())?;
            }
            // OFFSET belongs to ORDER BY: without one it is a syntax error.
            if !query.order_by.is_empty() && p.eat_word("OFFSET") {
                query.offset = Some(p.expr()?);
                p.expect_rows()?;
                if p.eat_word("FETCH") {
                    if !p.eat_word("NEXT") {
                        p.expect_word("FIRST")?;
                    }
                    query.fetch = Some(p.expr()?);
                    p.expect_rows()?;
                    p.expect_word("ONLY")?;
                }
            }
            if p.check_word("OPTION") && p.check_symbol_at(1, "(") {
                p.pos += 1;
                query.hints = p.hint_list()?;
            }
            Ok(query)
        })
    }

    /// The SELECT after a `WITH` list (MERGE may follow one too: `with_statement`).
    fn query_after_ctes(&mut self, ctes: Vec<CommonTableExpression>) -> PResult<Query> {
        if !self.check_word("SELECT") {
            return Err(self.error());
        }
        let mut query = self.query()?;
        query.ctes = ctes;
        Ok(query)
    }

    /// `WITH cte [(cols)] AS (query), ...`.
    fn cte_list(&mut self) -> PResult<Vec<CommonTableExpression>> {
        self.expect_word("WITH")?;
        self.comma_list(|p| {
            let name = p.ident()?;
            let columns = if p.check_symbol("(") {
                p.paren_list(|p| p.ident())?
            } else {
                Vec::new()
            };
            p.expect_word("AS")?;
            p.expect_symbol("(")?;
            let query = Box::new(p.query()?);
            p.expect_symbol(")")?;
            Ok(CommonTableExpression {
                name,
                columns,
                query,
            })
        })
    }

    fn expect_rows(&mut self) -> PResult<()> {
        if self.eat_word("ROWS") || self.eat_word("ROW") {
            Ok(())
        } else {
            Err(self.error())
        }
    }

    fn order_item(&mut self) -> PResult<OrderByItem> {
        let expr = self.expr()?;
        let descending = self.eat_word("DESC");
        if !descending {
            self.eat_word("ASC");
        }
        Ok(OrderByItem { expr, descending })
    }

    fn query_union(&mut self) -> PResult<QueryBody> {
        let mut left = self.query_intersect()?;
        loop {
            let op = if self.eat_word("UNION") {
                if self.eat_word("ALL") {
                    SetOperator::UnionAll
                } else {
                    SetOperator::Union
                }
            } else if self.eat_word("EXCEPT") {
                SetOperator::Except
            } else {
                return Ok(left);
            };
            self.chain_link()?;
            let right = self.query_intersect()?;
            left = QueryBody::SetOperation {
                op,
                left: Box::new(left),
                right: Box::new(right),
            };
        }
    }

    fn query_intersect(&mut self) -> PResult<QueryBody> {
        let mut left = self.query_primary()?;
        while self.eat_word("INTERSECT") {
            self.chain_link()?;
            let right = self.query_primary()?;
            left = QueryBody::SetOperation {
                op: SetOperator::Intersect,
                left: Box::new(left),
                right: Box::new(right),
            };
        }
        Ok(left)
    }

    fn query_primary(&mut self) -> PResult<QueryBody> {
        if self.eat_symbol("(") {
            let inner = self.query()?;
            self.expect_symbol(")")?;
            return Ok(QueryBody::Parenthesized(Box::new(inner)));
        }
        self.expect_word("SELECT")?;
        Ok(QueryBody::Select(Box::new(self.select_body()?)))
    }

    /// Everything after `SELECT` up to ORDER BY.
    fn select_body(&mut self) -> PResult<Select> {
        let distinct = self.eat_word("DISTINCT");
        if !distinct {
            self.eat_word("ALL");
        }
        let top = if self.check_word("TOP") {
            Some(self.top()?)
        } else {
            None
        };
        let items = self.comma_list(|p| p.select_item())?;
        let into = if self.eat_word("INTO") {
            Some(self.object_name()?)
        } else {
            None
        };
        let from = if self.eat_word("FROM") {
            self.comma_list(|p| p.table_source())?
        } else {
            Vec::new()
        };
        let where_clause = self.where_clause()?;
        let (mut group_by, mut grouping_sets) = (Vec::new(), None);
        if self.check_word("GROUP") && self.check_word_at(1, "BY") {
            self.pos += 2;
            (group_by, grouping_sets) = self.group_by_clause()?;
        }
        let having = if self.eat_word("HAVING") {
            Some(self.expr()?)
        } else {
            None
        };
        Ok(Select {
            distinct,
            top,
            items,
            into,
            from,
            where_clause,
            group_by,
            grouping_sets,
            having,
        })
    }

    fn where_clause(&mut self) -> PResult<Option<Expr>> {
        if self.eat_word("WHERE") {
            Ok(Some(self.expr()?))
        } else {
            Ok(None)
        }
    }

    /// `TOP (expr)` or `TOP n`, then `[PERCENT] [WITH TIES]`.
    fn top(&mut self) -> PResult<Top> {
        self.expect_word("TOP")?;
        let count = if self.eat_symbol("(") {
            let e = self.expr()?;
            self.expect_symbol(")")?;
            e
        } else {
            self.primary()?
        };
        let percent = self.eat_word("PERCENT");
        let with_ties = self.check_word("WITH") && self.check_word_at(1, "TIES");
        if with_ties {
            self.pos += 2;
        }
        Ok(Top {
            count,
            percent,
            with_ties,
        })
    }

    /// True when the tokens ahead are `name(.name)*.*`.
    fn qualified_star_ahead(&self) -> bool {
        let mut offset = 0;
        loop {
            match self.peek_at(offset) {
                Some(t) if is_identifier(t) => {}
                _ => return false,
            }
            if !self.check_symbol_at(offset + 1, ".") {
                return false;
            }
            if self.check_symbol_at(offset + 2, "*") {
                return true;
            }
            offset += 2;
        }
    }

    fn select_item(&mut self) -> PResult<SelectItem> {
        if self.eat_symbol("*") {
            return Ok(SelectItem::Wildcard { qualifier: None });
        }
        if self.qualified_star_ahead() {
            let qualifier = self.object_name()?;
            self.expect_symbol(".")?;
            self.expect_symbol("*")?;
            return Ok(SelectItem::Wildcard {
                qualifier: Some(qualifier),
            });
        }
        if self.check_kind(&TokenKind::Variable) {
            let save = self.pos;
            let variable = self.next()?.text;
            if let Some(op) = self.assign_op() {
                let value = self.expr()?;
                return Ok(SelectItem::Assign {
                    variable,
                    op,
                    value,
                });
            }
            self.pos = save;
        }
        let alias_first = self
            .peek()
            .is_some_and(|t| is_identifier(t) || matches!(t.kind, TokenKind::String { .. }))
            && self.check_symbol_at(1, "=");
        if alias_first {
            let alias = Some(self.alias_name()?);
            self.pos += 1;
            let expr = self.expr()?;
            return Ok(SelectItem::Expr { expr, alias });
        }
        let expr = self.expr()?;
        let alias = self.column_alias()?;
        Ok(SelectItem::Expr { expr, alias })
    }

    /// An identifier or a string used as a column alias.
    fn alias_name(&mut self) -> PResult<String> {
        match self.peek().map(|t| &t.kind) {
            Some(TokenKind::String { .. }) => self.string_literal(),
            _ => self.ident(),
        }
    }

    /// `[AS] alias` after a select-list expression.
    fn column_alias(&mut self) -> PResult<Option<String>> {
        if self.eat_word("AS") {
            return Ok(Some(self.alias_name()?));
        }
        let bare = self
            .peek()
            .is_some_and(|t| is_identifier(t) || matches!(t.kind, TokenKind::String { .. }));
        if bare {
            return Ok(Some(self.alias_name()?));
        }
        Ok(None)
    }

    /// `[AS] alias` after a table source; strings are not table aliases.
    fn table_alias(&mut self) -> PResult<Option<String>> {
        if self.eat_word("AS") {
            return Ok(Some(self.ident()?));
        }
        if self.peek().is_some_and(is_identifier) {
            return Ok(Some(self.ident()?));
        }
        Ok(None)
    }

    fn table_source(&mut self) -> PResult<TableSource> {
        let primary = self.table_primary()?;
        let mut left = self.rotated(primary)?;
        while let Some(kind) = self.join_kind() {
            self.chain_link()?;
            let primary = self.table_primary()?;
            let right = self.rotated(primary)?;
            let on = match kind {
                JoinKind::Cross | JoinKind::CrossApply | JoinKind::OuterApply => None,
                _ => {
                    self.expect_word("ON")?;
                    Some(self.expr()?)
                }
            };
            left = TableSource::Join {
                left: Box::new(left),
                kind,
                right: Box::new(right),
                on,
            };
            left = self.rotated(left)?;
        }
        Ok(left)
    }

    /// `source` followed by any PIVOT / UNPIVOT clauses, each with its required alias.
    fn rotated(&mut self, mut source: TableSource) -> PResult<TableSource> {
        loop {
            let pivot = self.eat_word("PIVOT");
            if !pivot && !self.eat_word("UNPIVOT") {
                return Ok(source);
            }
            self.chain_link()?;
            self.expect_symbol("(")?;
            let boxed = Box::new(source);
            source = if pivot {
                let aggregate = self.object_name()?;
                self.expect_symbol("(")?;
                let argument = self.object_name()?;
                self.expect_symbol(")")?;
                self.expect_word("FOR")?;
                let column = self.object_name()?;
                self.expect_word("IN")?;
                let values = self.paren_list(|p| p.ident())?;
                self.expect_symbol(")")?;
                let alias = self.table_alias()?.ok_or_else(|| self.error())?;
                TableSource::Pivot {
                    source: boxed,
                    aggregate,
                    argument,
                    column,
                    values,
                    alias,
                }
            } else {
                let value = self.ident()?;
                self.expect_word("FOR")?;
                let name = self.ident()?;
                self.expect_word("IN")?;
                let columns = self.paren_list(|p| p.ident())?;
                self.expect_symbol(")")?;
                let alias = self.table_alias()?.ok_or_else(|| self.error())?;
                TableSource::Unpivot {
                    source: boxed,
                    value,
                    name,
                    columns,
                    alias,
                }
            };
        }
    }

    /// Consumes a join operator if one is next.
    fn join_kind(&mut self) -> Option<JoinKind> {
        let word = self.peek_upper_word()?;
        let outer_then_join = |p: &Self| {
            p.check_word_at(1, "JOIN")
                || (p.check_word_at(1, "OUTER") && p.check_word_at(2, "JOIN"))
        };
        let (kind, length) = match word.as_str() {
            "JOIN" => (JoinKind::Inner, 1),
            "INNER" if self.check_word_at(1, "JOIN") => (JoinKind::Inner, 2),
            "LEFT" | "RIGHT" | "FULL" if outer_then_join(self) => {
                let kind = match word.as_str() {
                    "LEFT" => JoinKind::Left,
                    "RIGHT" => JoinKind::Right,
                    _ => JoinKind::Full,
                };
                (kind, if self.check_word_at(1, "OUTER") { 3 } else { 2 })
            }
            "CROSS" if self.check_word_at(1, "JOIN") => (JoinKind::Cross, 2),
            "CROSS" if self.check_word_at(1, "APPLY") => (JoinKind::CrossApply, 2),
            "OUTER" if self.check_word_at(1, "APPLY") => (JoinKind::OuterApply, 2),
            _ => return None,
        };
        self.pos += length;
        Some(kind)
    }

    fn table_primary(&mut self) -> PResult<TableSource> {
        if self.check_symbol("(") {
            return self.nested(|p| p.parenthesized_table_source());
        }
        if self.check_kind(&TokenKind::Variable) {
            let name = self.table_or_variable()?;
            let alias = self.table_alias()?;
            let hints = self.table_hints()?;
            return Ok(TableSource::Table { name, alias, hints });
        }
        let name = self.object_name()?;
        let old_style_hints = self.check_symbol("(")
            && self
                .peek_at(1)
                .is_some_and(|t| TABLE_HINT_WORDS.iter().any(|h| t.is_word(h)));
        if self.check_symbol("(") && !old_style_hints {
            self.pos += 1;
            let mut args = Vec::new();
            if !self.check_symbol(")") {
                args = self.comma_list(|p| p.expr())?;
            }
            self.expect_symbol(")")?;
            let schema = match name.name().eq_ignore_ascii_case("OPENJSON")
                && self.check_word("WITH")
                && self.check_symbol_at(1, "(")
            {
                true => {
                    self.pos += 1;
                    Some(self.paren_list(|p| p.json_column())?)
                }
                false => None,
            };
            let alias = self.table_alias()?;
            let columns = match alias.is_some() && self.check_symbol("(") {
                true => self.paren_list(|p| p.ident())?,
                false => Vec::new(),
            };
            return Ok(TableSource::Function {
                name,
                args,
                alias,
                columns,
                schema,
            });
        }
        let mut hints = if old_style_hints {
            self.hint_list()?
        } else {
            Vec::new()
        };
        let alias = self.table_alias()?;
        hints.extend(self.table_hints()?);
        Ok(TableSource::Table { name, alias, hints })
    }

    /// One column of OPENJSON's `WITH` schema: `name type ['path'] [AS JSON]`.
    fn json_column(&mut self) -> PResult<crate::ast::JsonColumn> {
        let name = self.ident()?;
        let data_type = self.data_type(0, false)?;
        let path = match self.peek().map(|t| &t.kind) {
            Some(TokenKind::String { value, .. }) => {
                let value = value.clone();
                self.pos += 1;
                Some(value)
            }
            _ => None,
        };
        let as_json = self.check_word("AS") && self.check_word_at(1, "JSON");
        if as_json {
            self.pos += 2;
        }
        Ok(crate::ast::JsonColumn {
            name,
            data_type,
            path,
            as_json,
        })
    }

    /// `WITH (hint, ...)` after a table, if present.
    fn table_hints(&mut self) -> PResult<Vec<String>> {
        if self.check_word("WITH") && self.check_symbol_at(1, "(") {
            self.pos += 1;
            return self.hint_list();
        }
        Ok(Vec::new())
    }

    fn parenthesized_table_source(&mut self) -> PResult<TableSource> {
        self.expect_symbol("(")?;
        if self.check_word("VALUES") {
            return self.table_value_constructor();
        }
        let is_query = self.check_word("SELECT") || self.check_symbol("(");
        if !is_query {
            let inner = self.table_source()?;
            self.expect_symbol(")")?;
            return Ok(inner);
        }
        let query = self.query()?;
        self.expect_symbol(")")?;
        let alias = self.table_alias()?.ok_or_else(|| self.error())?;
        let columns = match self.check_symbol("(") {
            true => self.paren_list(|p| p.ident())?,
            false => Vec::new(),
        };
        Ok(TableSource::Derived {
            query: Box::new(query),
            alias,
            columns,
        })
    }
}

// ----------------------------------------------------------------------------------------
// Expressions, lowest precedence first.
impl Parser {
    fn expr(&mut self) -> PResult<Expr> {
        self.nested(|p| p.or_expr())
    }

    fn or_expr(&mut self) -> PResult<Expr> {
        let mut left = self.and_expr()?;
        while self.eat_word("OR") {
            self.chain_link()?;
            let right = self.and_expr()?;
            left = binary(left, BinaryOp::Or, right);
        }
        Ok(left)
    }

    fn and_expr(&mut self) -> PResult<Expr> {
        let mut left = self.not_expr()?;
        while self.eat_word("AND") {
            self.chain_link()?;
            let right = self.not_expr()?;
            left = binary(left, BinaryOp::And, right);
        }
        Ok(left)
    }

    fn not_expr(&mut self) -> PResult<Expr> {
        if self.eat_word("NOT") {
            let inner = self.nested(|p| p.not_expr())?;
            return Ok(Expr::Unary {
                op: UnaryOp::Not,
                expr: Box::new(inner),
            });
        }
        self.predicate()
    }

    fn comparison_op(&self) -> Option<BinaryOp> {
        let token = self.peek().filter(|t| t.kind == TokenKind::Symbol)?;
        Some(match token.text.as_str() {
            "=" => BinaryOp::Equal,
            "<>" | "!=" => BinaryOp::NotEqual,
            "<" => BinaryOp::Less,
            ">" => BinaryOp::Greater,
            "<=" => BinaryOp::LessOrEqual,
            ">=" => BinaryOp::GreaterOrEqual,
            "!<" => BinaryOp::NotLess,
            "!>" => BinaryOp::NotGreater,
            _ => return None,
        })
    }

    fn predicate(&mut self) -> PResult<Expr> {
        if self.eat_word("EXISTS") {
            self.expect_symbol("(")?;
            let query = self.query()?;
            self.expect_symbol(")")?;
            return Ok(Expr::Exists(Box::new(query)));
        }
        let left = self.additive()?;
        if let Some(op) = self.comparison_op() {
            self.pos += 1;
            let right = self.additive()?;
            return Ok(binary(left, op, right));
        }
        if self.eat_word("IS") {
            let negated = self.eat_word("NOT");
            self.expect_word("NULL")?;
            return Ok(Expr::IsNull {
                expr: Box::new(left),
                negated,
            });
        }
        let negated = self.check_word("NOT")
            && ["LIKE", "IN", "BETWEEN"]
                .iter()
                .any(|w| self.check_word_at(1, w));
        if negated {
            self.pos += 1;
        }
        let expr = Box::new(left);
        if self.eat_word("LIKE") {
            let pattern = Box::new(self.additive()?);
            let escape = if self.eat_word("ESCAPE") {
                Some(Box::new(self.additive()?))
            } else {
                None
            };
            return Ok(Expr::Like {
                expr,
                pattern,
                escape,
                negated,
            });
        }
        if self.eat_word("IN") {
            return self.in_predicate(expr, negated);
        }
        if self.eat_word("BETWEEN") {
            let low = Box::new(self.additive()?);
            self.expect_word("AND")?;
            let high = Box::new(self.additive()?);
            return Ok(Expr::Between {
                expr,
                low,
                high,
                negated,
            });
        }
        Ok(*expr)
    }

    fn in_predicate(&mut self, expr: Box<Expr>, negated: bool) -> PResult<Expr> {
        self.expect_symbol("(")?;
        if self.check_word("SELECT") {
            let subquery = Box::new(self.query()?);
            self.expect_symbol(")")?;
            return Ok(Expr::InSubquery {
                expr,
                subquery,
                negated,
            });
        }
        let list = self.comma_list(|p| p.expr())?;
        self.expect_symbol(")")?;
        Ok(Expr::InList {
            expr,
            list,
            negated,
        })
    }

    fn additive(&mut self) -> PResult<Expr> {
        let mut left = self.multiplicative()?;
        loop {
            let op = match self.peek().filter(|t| t.kind == TokenKind::Symbol) {
                Some(t) => match t.text.as_str() {
                    "+" => BinaryOp::Add,
                    "-" => BinaryOp::Subtract,
                    "&" => BinaryOp::BitAnd,
                    "|" => BinaryOp::BitOr,
                    "^" => BinaryOp::BitXor,
                    _ => return Ok(left),
                },
                None => return Ok(left),
            };
            self.pos += 1;
            self.chain_link()?;
            let right = self.multiplicative()?;
            left = binary(left, op, right);
        }
    }

    fn multiplicative(&mut self) -> PResult<Expr> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek().filter(|t| t.kind == TokenKind::Symbol) {
                Some(t) => match t.text.as_str() {
                    "*" => BinaryOp::Multiply,
                    "/" => BinaryOp::Divide,
                    "%" => BinaryOp::Modulo,
                    _ => return Ok(left),
                },
                None => return Ok(left),
            };
            self.pos += 1;
            self.chain_link()?;
            let right = self.unary()?;
            left = binary(left, op, right);
        }
    }

    fn unary(&mut self) -> PResult<Expr> {
        let op = match self.peek().filter(|t| t.kind == TokenKind::Symbol) {
            Some(t) if t.text == "-" => UnaryOp::Negate,
            Some(t) if t.text == "+" => UnaryOp::Plus,
            Some(t) if t.text == "~" => UnaryOp::BitNot,
            _ => return self.postfix(),
        };
        self.pos += 1;
        let inner = self.nested(|p| p.unary())?;
        Ok(Expr::Unary {
            op,
            expr: Box::new(inner),
        })
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let mut expr = self.primary()?;
        while self.eat_word("COLLATE") {
            expr = Expr::Collate {
                expr: Box::new(expr),
                collation: self.any_word()?,
            };
        }
        Ok(expr)
    }

    fn primary(&mut self) -> PResult<Expr> {
        let token = self.peek().cloned().ok_or_else(|| self.error())?;
        match &token.kind {
            TokenKind::Integer | TokenKind::Decimal | TokenKind::Float => {
                self.pos += 1;
                Ok(Expr::Literal(number_literal(&token)?))
            }
            TokenKind::String { value, national } => {
                self.pos += 1;
                Ok(Expr::Literal(Literal::String {
                    value: value.clone(),
                    national: *national,
                }))
            }
            TokenKind::Binary(bytes) => {
                self.pos += 1;
                Ok(Expr::Literal(Literal::Binary(bytes.clone())))
            }
            TokenKind::Variable => {
                self.pos += 1;
                if self.check_symbol(".") {
                    // `@t.col`: a table variable is no qualifier; SQL Server's compiler
                    // takes `@t` for a scalar and fails the batch with 137.
                    return Err(ParseError::new(
                        137,
                        15,
                        2,
                        format!("Must declare the scalar variable \"{}\".", token.text),
                        self.line(),
                    ));
                }
                Ok(Expr::Variable(token.text))
            }
            TokenKind::GlobalVariable => {
                self.pos += 1;
                Ok(Expr::GlobalVariable(token.text))
            }
            TokenKind::Symbol if token.text == "(" => self.parenthesized(),
            TokenKind::Word => self.word_primary(&token),
            TokenKind::QuotedIdent(_) => self.name_primary(),
            _ => Err(syntax_error(&token)),
        }
    }

    /// `( expr )` or `( subquery )`.
    fn parenthesized(&mut self) -> PResult<Expr> {
        self.expect_symbol("(")?;
        if self.check_word("SELECT") {
            let query = self.query()?;
            self.expect_symbol(")")?;
            return Ok(Expr::Subquery(Box::new(query)));
        }
        let inner = self.expr()?;
        self.expect_symbol(")")?;
        Ok(inner)
    }

    fn word_primary(&mut self, token: &Token) -> PResult<Expr> {
        let upper = token.text.to_ascii_uppercase();
        let call = self.check_symbol_at(1, "(");
        match upper.as_str() {
            "NULL" => {
                self.pos += 1;
                Ok(Expr::Literal(Literal::Null))
            }
            "DEFAULT" => {
                self.pos += 1;
                Ok(Expr::Default)
            }
            "CASE" => self.case(),
            "CAST" | "TRY_CAST" if call => self.cast(upper == "TRY_CAST"),
            "CONVERT" | "TRY_CONVERT" if call => self.convert(upper == "TRY_CONVERT"),
            _ if RESERVED_FUNCTIONS.contains(&upper.as_str()) && call => {
                self.pos += 1;
                let f = self.function_call(ObjectName::simple(&token.text))?;
                self.over(f)
            }
            _ if NILADIC_FUNCTIONS.contains(&upper.as_str()) => {
                self.pos += 1;
                Ok(Expr::Function {
                    name: ObjectName::simple(&token.text),
                    args: Vec::new(),
                    distinct: false,
                    star: false,
                })
            }
            _ if token.is_reserved() => Err(syntax_error(token)),
            _ => self.name_primary(),
        }
    }

    /// A column reference or a function call.
    fn name_primary(&mut self) -> PResult<Expr> {
        let name = self.object_name()?;
        if self.check_symbol("(") {
            let f = self.function_call(name)?;
            return self.over(f);
        }
        Ok(Expr::Column(name))
    }

    /// A call's `OVER ([PARTITION BY ...] [ORDER BY ...] [frame])`, if one follows.
    fn over(&mut self, function: Expr) -> PResult<Expr> {
        if !self.eat_word("OVER") {
            return Ok(function);
        }
        self.expect_symbol("(")?;
        let mut partition_by = Vec::new();
        if self.eat_word("PARTITION") {
            self.expect_word("BY")?;
            partition_by = self.comma_list(|p| p.expr())?;
        }
        let mut order_by = Vec::new();
        if self.eat_word("ORDER") {
            self.expect_word("BY")?;
            order_by = self.comma_list(|p| p.order_item())?;
        }
        let frame = if self.check_word("ROWS") || self.check_word("RANGE") {
            Some(self.window_frame()?)
        } else {
            None
        };
        self.expect_symbol(")")?;
        Ok(Expr::Window(Box::new(WindowCall {
            function,
            partition_by,
            order_by,
            frame,
        })))
    }

    /// `ROWS | RANGE` then one bound (ending at CURRENT ROW) or `BETWEEN b AND b`.
    fn window_frame(&mut self) -> PResult<WindowFrame> {
        let rows = self.eat_word("ROWS");
        if !rows {
            self.expect_word("RANGE")?;
        }
        if !self.eat_word("BETWEEN") {
            let start = self.frame_bound()?;
            if matches!(
                start,
                FrameBound::Following(_) | FrameBound::UnboundedFollowing
            ) {
                return Err(syntax_error(&self.tokens[self.pos - 1]));
            }
            let end = FrameBound::CurrentRow;
            return Ok(WindowFrame { rows, start, end });
        }
        let start = self.frame_bound()?;
        if start == FrameBound::UnboundedFollowing {
            return Err(syntax_error(&self.tokens[self.pos - 1]));
        }
        self.expect_word("AND")?;
        let end = self.frame_bound()?;
        if end == FrameBound::UnboundedPreceding {
            return Err(syntax_error(&self.tokens[self.pos - 1]));
        }
        Ok(WindowFrame { rows, start, end })
    }

    /// `UNBOUNDED PRECEDING | UNBOUNDED FOLLOWING | CURRENT ROW | n PRECEDING | n FOLLOWING`
    /// (n an unsigned integer, as SQL Server's grammar has it).
    fn frame_bound(&mut self) -> PResult<FrameBound> {
        if self.eat_word("UNBOUNDED") {
            if self.eat_word("PRECEDING") {
                return Ok(FrameBound::UnboundedPreceding);
            }
            self.expect_word("FOLLOWING")?;
            return Ok(FrameBound::UnboundedFollowing);
        }
        if self.eat_word("CURRENT") {
            self.expect_word("ROW")?;
            return Ok(FrameBound::CurrentRow);
        }
        let token = self.next()?;
        let n = match (&token.kind, token.text.parse::<u64>()) {
            (TokenKind::Integer, Ok(n)) => n,
            _ => return Err(syntax_error(&token)),
        };
        if self.eat_word("PRECEDING") {
            return Ok(FrameBound::Preceding(n));
        }
        self.expect_word("FOLLOWING")?;
        Ok(FrameBound::Following(n))
    }

    /// After the function name: `( [* | [DISTINCT] args] )`. The arguments recurse
    /// through `expr`, which bounds the nesting.
    fn function_call(&mut self, name: ObjectName) -> PResult<Expr> {
        self.expect_symbol("(")?;
        let (mut args, mut distinct, mut star) = (Vec::new(), false, false);
        if self.eat_symbol("*") {
            star = true;
        } else if !self.check_symbol(")") {
            distinct = self.eat_word("DISTINCT");
            if !distinct {
                self.eat_word("ALL");
            }
            let date_part = name.parts.len() == 1
                && DATE_PART_FUNCTIONS
                    .iter()
                    .any(|f| f.eq_ignore_ascii_case(name.name()));
            if date_part {
                args.push(Expr::DatePart(self.any_word()?));
                if self.eat_symbol(",") {
                    args.extend(self.comma_list(|p| p.expr())?);
                }
            } else {
                args = self.comma_list(|p| p.expr())?;
            }
        }
        self.expect_symbol(")")?;
        Ok(Expr::Function {
            name,
            args,
            distinct,
            star,
        })
    }

    fn case(&mut self) -> PResult<Expr> {
        self.expect_word("CASE")?;
        let operand = if self.check_word("WHEN") {
            None
        } else {
            Some(Box::new(self.expr()?))
        };
        let mut branches = Vec::new();
        while self.eat_word("WHEN") {
            let condition = self.expr()?;
            self.expect_word("THEN")?;
            branches.push((condition, self.expr()?));
        }
        if branches.is_empty() {
            return Err(self.error());
        }
        let else_result = if self.eat_word("ELSE") {
            Some(Box::new(self.expr()?))
        } else {
            None
        };
        self.expect_word("END")?;
        Ok(Expr::Case {
            operand,
            branches,
            else_result,
        })
    }

    fn cast(&mut self, try_cast: bool) -> PResult<Expr> {
        self.pos += 1;
        self.expect_symbol("(")?;
        let expr = Box::new(self.expr()?);
        self.expect_word("AS")?;
        let data_type = self.data_type(1, true)?;
        self.expect_symbol(")")?;
        Ok(Expr::Cast {
            expr,
            data_type,
            try_cast,
        })
    }

    fn convert(&mut self, try_convert: bool) -> PResult<Expr> {
        self.pos += 1;
        self.expect_symbol("(")?;
        let data_type = self.data_type(1, true)?;
        self.expect_symbol(",")?;
        let expr = Box::new(self.expr()?);
        let style = if self.eat_symbol(",") {
            Some(Box::new(self.expr()?))
        } else {
            None
        };
        self.expect_symbol(")")?;
        Ok(Expr::Convert {
            data_type,
            expr,
            style,
            try_convert,
        })
    }
}

fn binary(left: Expr, op: BinaryOp, right: Expr) -> Expr {
    Expr::Binary {
        left: Box::new(left),
        op,
        right: Box::new(right),
    }
}

/// Converts a numeric token to a literal, as SQL Server types them: integers that fit
/// `i64`, exact decimals up to precision 38, floats.
fn number_literal(token: &Token) -> PResult<Literal> {
    let text = token.text.as_str();
    if token.kind == TokenKind::Float {
        // Rust's float parser wants a digit after the point ("1.e5"); T-SQL does not.
        let normalized = text.replace(".e", ".0e").replace(".E", ".0E");
        return normalized
            .parse::<f64>()
            .map(Literal::Float)
            .map_err(|_| syntax_error(token));
    }
    if token.kind == TokenKind::Integer {
        if let Ok(n) = text.parse::<i64>() {
            return Ok(Literal::Integer(n));
        }
    }
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let whole = whole.trim_start_matches('0');
    let digits = format!("{whole}{fraction}");
    let precision = digits.len().max(fraction.len()).max(1);
    let out_of_range = || {
        ParseError::new(
            1007,
            15,
            1,
            format!(
                "The number '{text}' is out of the range for numeric representation (maximum precision 38)."
            ),
            token.line,
        )
    };
    if precision > 38 {
        return Err(out_of_range());
    }
    let unscaled = if digits.is_empty() {
        0
    } else {
        digits.parse::<i128>().map_err(|_| out_of_range())?
    };
    Ok(Literal::Decimal {
        unscaled,
        precision: precision as u8,
        scale: fraction.len() as u8,
    })
}

// ----------------------------------------------------------------------------------------
// Tables, indexes and data modification.
impl Parser {
    fn create_table(&mut self) -> PResult<CreateTable> {
        self.pos += 1;
        let mut table = CreateTable {
            name: self.object_name()?,
            columns: Vec::new(),
            constraints: Vec::new(),
            filegroup: None,
        };
        self.table_definitions(&mut table, false)?;
        if self.eat_word("ON") {
            table.filegroup = Some(self.filegroup_name()?);
        }
        if self.eat_word("TEXTIMAGE_ON") {
            self.filegroup_name()?;
        }
        Ok(table)
    }

    /// `(column or constraint, ...)` of CREATE TABLE or a table variable's declaration
    /// (`variable`: an inline INDEX there is refused, 40517, until it is built).
    fn table_definitions(&mut self, table: &mut CreateTable, variable: bool) -> PResult<()> {
        self.expect_symbol("(")?;
        loop {
            let starts_constraint = ["CONSTRAINT", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN"]
                .iter()
                .any(|w| self.check_word(w));
            if variable && self.check_word("INDEX") {
                return Err(self.not_built("INDEX in a table variable's definition"));
            }
            if starts_constraint {
                table.constraints.push(self.table_constraint()?);
            } else {
                let ordinal = table.columns.len() + 1;
                table.columns.push(self.column_definition(ordinal)?);
            }
            if !self.eat_symbol(",") {
                break;
            }
            // A trailing comma before `)` is accepted, as SQL Server does.
            if self.check_symbol(")") {
                break;
            }
        }
        self.expect_symbol(")")
    }

    /// A filegroup name; `PRIMARY` is a keyword but names the primary filegroup.
    fn filegroup_name(&mut self) -> PResult<String> {
        if self.eat_word("PRIMARY") {
            return Ok("PRIMARY".to_string());
        }
        self.ident()
    }

    fn column_definition(&mut self, ordinal: usize) -> PResult<ColumnDefinition> {
        let name = self.ident()?;
        let computed = match self.eat_word("AS") {
            true => Some(self.computed_definition()?),
            false => None,
        };
        let data_type = match computed {
            // No type is declared; the expression's is the column's (computed_columns.rs).
            Some(_) => DataType {
                sql_type: crate::types::SqlType::Int,
                name: String::new(),
                length_given: false,
            },
            None => self.data_type(ordinal, false)?,
        };
        let mut column = ColumnDefinition {
            name,
            data_type,
            computed,
            nullable: None,
            identity: None,
            default: None,
            key: None,
            checks: Vec::new(),
            foreign_keys: Vec::new(),
            collation: None,
        };
        let mut constraint_name = None;
        while let Some(word) = self.peek_upper_word() {
            match word.as_str() {
                "NULL" => column.nullable = Some(true),
                "NOT" if self.check_word_at(1, "NULL") => {
                    self.pos += 1;
                    column.nullable = Some(false);
                }
                "IDENTITY" => {
                    self.pos += 1;
                    column.identity = Some(self.identity()?);
                    continue;
                }
                "CONSTRAINT" => {
                    self.pos += 1;
                    constraint_name = Some(self.ident()?);
                    continue;
                }
                "DEFAULT" => {
                    self.pos += 1;
                    let expr = self.expr()?;
                    column.default = Some(ColumnDefault {
                        name: constraint_name.take(),
                        expr,
                    });
                    continue;
                }
                "PRIMARY" | "UNIQUE" => {
                    column.key = Some(self.key_constraint(constraint_name.take(), false)?);
                    continue;
                }
                "CHECK" => {
                    let name = constraint_name.take();
                    column.checks.push(self.check_definition(name)?);
                    continue;
                }
                "REFERENCES" | "FOREIGN" => {
                    let name = constraint_name.take();
                    let key = self.foreign_key_definition(name, false)?;
                    column.foreign_keys.push(key);
                    continue;
                }
                "COLLATE" => {
                    self.pos += 1;
                    column.collation = Some(self.any_word()?);
                    continue;
                }
                "ROWGUIDCOL" | "SPARSE" => {}
                _ => break,
            }
            self.pos += 1;
        }
        if constraint_name.is_some() {
            return Err(self.error());
        }
        Ok(column)
    }

    /// A computed column's `expression [PERSISTED]` after its `AS`.
    fn computed_definition(&mut self) -> PResult<ComputedDefinition> {
        let expr = self.expr()?;
        let persisted = self.eat_word("PERSISTED");
        Ok(ComputedDefinition { expr, persisted })
    }

    fn identity(&mut self) -> PResult<Identity> {
        if !self.eat_symbol("(") {
            return Ok(Identity {
                seed: 1,
                increment: 1,
            });
        }
        let seed = self.signed_integer()?;
        self.expect_symbol(",")?;
        let increment = self.signed_integer()?;
        self.expect_symbol(")")?;
        Ok(Identity { seed, increment })
    }

    fn table_constraint(&mut self) -> PResult<TableConstraint> {
        let name = if self.eat_word("CONSTRAINT") {
            Some(self.ident()?)
        } else {
            None
        };
        if self.check_word("CHECK") {
            return Ok(TableConstraint::Check(self.check_definition(name)?));
        }
        if self.check_word("FOREIGN") {
            let key = self.foreign_key_definition(name, true)?;
            return Ok(TableConstraint::ForeignKey(key));
        }
        Ok(TableConstraint::Key(self.key_constraint(name, true)?))
    }

    /// `[FOREIGN KEY [(cols)]] REFERENCES t [(cols)] [ON DELETE a] [ON UPDATE a]` after its
    /// optional `CONSTRAINT name`; the column list is required at table level (where
    /// FOREIGN KEY is too) and absent inline. NOT FOR REPLICATION and a
    /// reference to another database are refused (40517).
    fn foreign_key_definition(
        &mut self,
        name: Option<String>,
        table_level: bool,
    ) -> PResult<ForeignKeyDefinition> {
        let mut columns = Vec::new();
        if self.eat_word("FOREIGN") {
            self.expect_word("KEY")?;
            if table_level || self.check_symbol("(") {
                columns = self.paren_list(|p| p.ident())?;
            }
        } else if table_level {
            return Err(self.error());
        }
        self.expect_word("REFERENCES")?;
        let table = self.object_name()?;
        if table.parts.len() > 2 {
            return Err(self.not_built("FOREIGN KEY references to another database"));
        }
        let referenced = match self.check_symbol("(") {
            true => self.paren_list(|p| p.ident())?,
            false => Vec::new(),
        };
        let (mut on_delete, mut on_update) = (None, None);
        while self.check_word("ON")
            && (self.check_word_at(1, "DELETE") || self.check_word_at(1, "UPDATE"))
        {
            self.pos += 1;
            let delete = self.eat_word("DELETE");
            if !delete {
                self.expect_word("UPDATE")?;
            }
            let slot = if delete {
                &mut on_delete
            } else {
                &mut on_update
            };
            if slot.is_some() {
                return Err(self.error());
            }
            *slot = Some(self.referential_action()?);
        }
        if self.check_word("NOT") && self.check_word_at(1, "FOR") {
            return Err(self.not_built("NOT FOR REPLICATION"));
        }
        Ok(ForeignKeyDefinition {
            name,
            columns,
            table,
            referenced,
            on_delete: on_delete.unwrap_or(ReferentialAction::NoAction),
            on_update: on_update.unwrap_or(ReferentialAction::NoAction),
        })
    }

    /// `NO ACTION | CASCADE | SET NULL | SET DEFAULT`.
    fn referential_action(&mut self) -> PResult<ReferentialAction> {
        if self.eat_word("NO") {
            self.expect_word("ACTION")?;
            return Ok(ReferentialAction::NoAction);
        }
        if self.eat_word("CASCADE") {
            return Ok(ReferentialAction::Cascade);
        }
        self.expect_word("SET")?;
        if self.eat_word("NULL") {
            return Ok(ReferentialAction::SetNull);
        }
        if self.eat_word("DEFAULT") {
            return Ok(ReferentialAction::SetDefault);
        }
        Err(self.error())
    }

    /// `CHECK (expr)` after its optional `CONSTRAINT name`; NOT FOR REPLICATION is refused.
    fn check_definition(&mut self, name: Option<String>) -> PResult<CheckDefinition> {
        self.expect_word("CHECK")?;
        if self.check_word("NOT") && self.check_word_at(1, "FOR") {
            return Err(self.not_built("NOT FOR REPLICATION"));
        }
        let expr = self.parenthesized()?;
        Ok(CheckDefinition { name, expr })
    }

    /// `PRIMARY KEY | UNIQUE [CLUSTERED|NONCLUSTERED] [(cols)] [WITH ...] [ON fg]`;
    /// the column list is required at table level and absent inline.
    fn key_constraint(
        &mut self,
        name: Option<String>,
        table_level: bool,
    ) -> PResult<KeyConstraint> {
        let primary = self.eat_word("PRIMARY");
        if primary {
            self.expect_word("KEY")?;
        } else {
            self.expect_word("UNIQUE")?;
        }
        let clustered = self.clustered();
        let columns = if table_level {
            self.paren_list(|p| p.index_column())?
        } else {
            Vec::new()
        };
        let options = if self.check_word("WITH") {
            self.index_options()?
        } else {
            Vec::new()
        };
        let filegroup = if self.eat_word("ON") {
            Some(self.filegroup_name()?)
        } else {
            None
        };
        Ok(KeyConstraint {
            name,
            primary,
            clustered,
            columns,
            options,
            filegroup,
        })
    }

    fn clustered(&mut self) -> Option<bool> {
        if self.eat_word("CLUSTERED") {
            Some(true)
        } else if self.eat_word("NONCLUSTERED") {
            Some(false)
        } else {
            None
        }
    }

    fn index_column(&mut self) -> PResult<IndexColumn> {
        let name = self.ident()?;
        let descending = self.eat_word("DESC");
        if !descending {
            self.eat_word("ASC");
        }
        Ok(IndexColumn { name, descending })
    }

    fn create_index(&mut self) -> PResult<CreateIndex> {
        let unique = self.eat_word("UNIQUE");
        let clustered = self.clustered();
        self.expect_word("INDEX")?;
        let name = self.ident()?;
        self.expect_word("ON")?;
        let mut index = CreateIndex {
            unique,
            clustered,
            name,
            table: self.object_name()?,
            columns: self.paren_list(|p| p.index_column())?,
            include: Vec::new(),
            filter: None,
            options: Vec::new(),
            filegroup: None,
        };
        if self.eat_word("INCLUDE") {
            index.include = self.paren_list(|p| p.ident())?;
        }
        index.filter = self.where_clause()?;
        if self.check_word("WITH") {
            index.options = self.index_options()?;
        }
        if self.eat_word("ON") {
            index.filegroup = Some(self.filegroup_name()?);
        }
        Ok(index)
    }

    /// `index ON table` or the old `table.index`.
    fn index_ref(&mut self) -> PResult<IndexRef> {
        let name = self.object_name()?;
        if self.eat_word("ON") {
            if name.parts.len() != 1 {
                return Err(self.error());
            }
            return Ok(IndexRef {
                index: name.name().to_string(),
                table: self.object_name()?,
            });
        }
        if name.parts.len() < 2 {
            return Err(self.error());
        }
        let mut table = name.parts;
        let index = table.pop().unwrap_or_default();
        Ok(IndexRef {
            index,
            table: ObjectName { parts: table },
        })
    }

    /// `TOP (n) [PERCENT]` in INSERT, UPDATE and DELETE: parentheses are required there.
    fn dml_top(&mut self) -> PResult<Option<Top>> {
        if !self.check_word("TOP") {
            return Ok(None);
        }
        if !self.check_symbol_at(1, "(") {
            self.pos += 1;
            return Err(self.error());
        }
        Ok(Some(self.top()?))
    }

    fn insert(&mut self) -> PResult<Insert> {
        self.pos += 1;
        let top = self.dml_top()?;
        self.eat_word("INTO");
        let table = self.table_or_variable()?;
        let hints = self.table_hints()?;
        let mut columns = Vec::new();
        if self.check_symbol("(") && !self.check_word_at(1, "SELECT") {
            columns = self.paren_list(|p| p.ident())?;
        }
        let output = self.output_clause()?;
        let source = self.insert_source()?;
        Ok(Insert {
            top,
            table,
            hints,
            columns,
            output,
            source,
        })
    }

    fn insert_source(&mut self) -> PResult<InsertSource> {
        if self.eat_word("VALUES") {
            let rows = self.comma_list(|p| p.paren_list(|p| p.expr()))?;
            return Ok(InsertSource::Values(rows));
        }
        if self.eat_word("DEFAULT") {
            self.expect_word("VALUES")?;
            return Ok(InsertSource::DefaultValues);
        }
        if self.eat_word("EXEC") || self.eat_word("EXECUTE") {
            return Ok(InsertSource::Execute(Box::new(self.execute_body()?)));
        }
        if self.check_word("SELECT") || self.check_symbol("(") {
            return Ok(InsertSource::Query(Box::new(self.query()?)));
        }
        Err(self.error())
    }

    fn update(&mut self) -> PResult<Update> {
        self.pos += 1;
        let top = self.dml_top()?;
        let table = self.table_or_variable()?;
        let hints = self.table_hints()?;
        self.expect_word("SET")?;
        let assignments = self.comma_list(|p| p.assignment())?;
        let output = self.output_clause()?;
        let from = if self.eat_word("FROM") {
            self.comma_list(|p| p.table_source())?
        } else {
            Vec::new()
        };
        let where_clause = self.where_clause()?;
        Ok(Update {
            top,
            table,
            hints,
            assignments,
            output,
            from,
            where_clause,
            options: self.query_options()?,
        })
    }

    /// `OUTPUT items [INTO target [(columns)]]`, and after an INTO a second `OUTPUT items`.
    fn output_clause(&mut self) -> PResult<Option<OutputClause>> {
        if !self.eat_word("OUTPUT") {
            return Ok(None);
        }
        let items = self.comma_list(|p| p.output_item())?;
        let into = if self.eat_word("INTO") {
            let target = if self.check_kind(&TokenKind::Variable) {
                OutputTarget::Variable(self.next()?.text)
            } else {
                OutputTarget::Table(self.object_name()?)
            };
            let mut columns = Vec::new();
            if self.check_symbol("(") && !self.check_word_at(1, "SELECT") {
                columns = self.paren_list(|p| p.ident())?;
            }
            Some(OutputInto { target, columns })
        } else {
            None
        };
        let also = match into.is_some() && self.eat_word("OUTPUT") {
            true => Some(Box::new(OutputClause {
                items: self.comma_list(|p| p.output_item())?,
                into: None,
                also: None,
            })),
            false => None,
        };
        Ok(Some(OutputClause { items, into, also }))
    }

    /// An OUTPUT list's item: a select item, or MERGE's `$action` (kept as a column
    /// reference named `$action`, which the executor refuses outside MERGE).
    fn output_item(&mut self) -> PResult<SelectItem> {
        let dollar = self.peek().is_some_and(|t| t.text == "$");
        if dollar && self.check_word_at(1, "ACTION") {
            self.pos += 2;
            let expr = Expr::Column(ObjectName {
                parts: vec!["$action".into()],
            });
            let alias = self.column_alias()?;
            return Ok(SelectItem::Expr { expr, alias });
        }
        self.select_item()
    }

    fn assignment(&mut self) -> PResult<Assignment> {
        let target = if self.check_kind(&TokenKind::Variable) {
            AssignTarget::Variable(self.next()?.text)
        } else {
            AssignTarget::Column(self.object_name()?)
        };
        let op = self.assign_op().ok_or_else(|| self.error())?;
        let value = self.expr()?;
        Ok(Assignment { target, op, value })
    }

    fn delete(&mut self) -> PResult<Delete> {
        self.pos += 1;
        let top = self.dml_top()?;
        self.eat_word("FROM");
        let table = self.table_or_variable()?;
        let hints = self.table_hints()?;
        let output = self.output_clause()?;
        let from = if self.eat_word("FROM") {
            self.comma_list(|p| p.table_source())?
        } else {
            Vec::new()
        };
        let where_clause = self.where_clause()?;
        Ok(Delete {
            top,
            table,
            hints,
            output,
            from,
            where_clause,
            options: self.query_options()?,
        })
    }

    /// A statement's `OPTION (hint, ...)`, if it has one (UPDATE, DELETE).
    fn query_options(&mut self) -> PResult<Vec<String>> {
        if !(self.check_word("OPTION") && self.check_symbol_at(1, "(")) {
            return Ok(Vec::new());
        }
        self.pos += 1;
        self.hint_list()
    }
}

// ----------------------------------------------------------------------------------------
// Backup, restore and logins.
impl Parser {
    fn backup(&mut self) -> PResult<Backup> {
        self.pos += 1;
        let kind = if self.eat_word("DATABASE") {
            BackupKind::Database
        } else {
            self.expect_word("LOG")?;
            BackupKind::Log
        };
        let database = self.ident()?;
        self.expect_word("TO")?;
        let devices = self.comma_list(|p| p.backup_device())?;
        let options = self.backup_options()?;
        Ok(Backup {
            kind,
            database,
            devices,
            options,
        })
    }

    fn restore(&mut self) -> PResult<Restore> {
        self.pos += 1;
        let word = self.peek_upper_word().ok_or_else(|| self.error())?;
        let kind = match word.as_str() {
            "DATABASE" => RestoreKind::Database,
            "LOG" => RestoreKind::Log,
            "VERIFYONLY" => RestoreKind::VerifyOnly,
            "FILELISTONLY" => RestoreKind::FileListOnly,
            "HEADERONLY" => RestoreKind::HeaderOnly,
            "LABELONLY" => RestoreKind::LabelOnly,
            _ => return Err(self.error()),
        };
        self.pos += 1;
        let database = match kind {
            RestoreKind::Database | RestoreKind::Log => Some(self.ident()?),
            _ => None,
        };
        let devices = if self.eat_word("FROM") {
            self.comma_list(|p| p.backup_device())?
        } else if database.is_none() {
            return Err(self.error());
        } else {
            Vec::new()
        };
        let options = self.backup_options()?;
        Ok(Restore {
            kind,
            database,
            devices,
            options,
        })
    }

    fn backup_device(&mut self) -> PResult<BackupDevice> {
        if self.check_symbol_at(1, "=") {
            let kind = self.any_word()?.to_ascii_uppercase();
            self.pos += 1;
            return Ok(BackupDevice {
                kind,
                path: self.expr()?,
            });
        }
        Ok(BackupDevice {
            kind: String::new(),
            path: Expr::Column(ObjectName::simple(&self.ident()?)),
        })
    }

    fn backup_options(&mut self) -> PResult<Vec<BackupOption>> {
        if !self.eat_word("WITH") {
            return Ok(Vec::new());
        }
        self.comma_list(|p| {
            if p.eat_word("MOVE") {
                let logical = p.expr()?;
                p.expect_word("TO")?;
                let physical = p.expr()?;
                return Ok(BackupOption::Move { logical, physical });
            }
            Ok(BackupOption::Named(p.with_option()?))
        })
    }

    /// Login options; `PASSWORD = 'x' HASHED MUST_CHANGE` has unseparated flags.
    fn login_options(&mut self) -> PResult<Vec<WithOption>> {
        let mut options = Vec::new();
        loop {
            options.push(self.with_option()?);
            while let Some(flag) = self.peek_upper_word() {
                // PASSWORD = 'new' OLD_PASSWORD = 'old' (no comma between them).
                if flag == "OLD_PASSWORD" {
                    options.push(self.with_option()?);
                    continue;
                }
                if !matches!(flag.as_str(), "HASHED" | "MUST_CHANGE" | "UNLOCK") {
                    break;
                }
                self.pos += 1;
                options.push(WithOption {
                    name: flag,
                    value: None,
                });
            }
            if !self.eat_symbol(",") {
                return Ok(options);
            }
        }
    }

    fn create_login(&mut self) -> PResult<StatementKind> {
        self.pos += 1;
        let name = self.ident()?;
        let from_windows = self.check_word("FROM") && self.check_word_at(1, "WINDOWS");
        if from_windows {
            self.pos += 2;
        }
        let options = if self.eat_word("WITH") {
            self.login_options()?
        } else if from_windows {
            Vec::new()
        } else {
            return Err(self.error());
        };
        Ok(StatementKind::CreateLogin {
            name,
            from_windows,
            options,
        })
    }

    fn alter_login(&mut self) -> PResult<StatementKind> {
        let name = self.ident()?;
        let enable = if self.eat_word("ENABLE") {
            Some(true)
        } else if self.eat_word("DISABLE") {
            Some(false)
        } else {
            None
        };
        let options = if enable.is_none() {
            self.expect_word("WITH")?;
            self.login_options()?
        } else {
            Vec::new()
        };
        Ok(StatementKind::AlterLogin {
            name,
            enable,
            options,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(sql: &str) -> ParseError {
        match parse_batch(sql) {
            Err(e) => e,
            Ok(statements) => panic!("{sql} parsed: {statements:?}"),
        }
    }

    /// The first select item of a one-SELECT batch.
    fn first_item(sql: &str) -> Expr {
        let s = parse_batch(sql).unwrap();
        let StatementKind::Select(q) = &s[0].kind else {
            panic!("{sql}")
        };
        let QueryBody::Select(sel) = &q.body else {
            panic!("{sql}")
        };
        match &sel.items[0] {
            SelectItem::Expr { expr, .. } => expr.clone(),
            other => panic!("{other:?}"),
        }
    }

    /// ROLLUP, CUBE, GROUPING SETS, `()` and WITH ROLLUP / CUBE parse into their grouping
    /// sets over the distinct expressions (parser/grouping.rs), never into a call of a
    /// function named ROLLUP; the limits and the mix of WITH with sets are refused with
    /// SQL Server's numbers.
    #[test]
    fn grouping_sets_parse_into_sets() {
        let sets = |sql: &str| -> (usize, Option<Vec<Vec<usize>>>) {
            let b = parse_batch(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
            let StatementKind::Select(q) = &b[0].kind else {
                panic!("{sql}: not a SELECT")
            };
            let QueryBody::Select(s) = &q.body else {
                panic!("{sql}: not a plain SELECT")
            };
            (s.group_by.len(), s.grouping_sets.clone())
        };
        let v = |x: &[&[usize]]| Some(x.iter().map(|s| s.to_vec()).collect::<Vec<_>>());
        assert_eq!(sets("SELECT 1 FROM t GROUP BY a, b"), (2, None));
        assert_eq!(
            sets("SELECT 1 FROM t GROUP BY ROLLUP (a, b)"),
            (2, v(&[&[0, 1], &[0], &[]]))
        );
        assert_eq!(
            sets("SELECT 1 FROM t GROUP BY a, b WITH ROLLUP"),
            sets("SELECT 1 FROM t GROUP BY ROLLUP (a, b)")
        );
        assert_eq!(
            sets("SELECT 1 FROM t GROUP BY CUBE (a, b)"),
            (2, v(&[&[0, 1], &[0], &[1], &[]]))
        );
        assert_eq!(
            sets("SELECT 1 FROM t GROUP BY a, b WITH CUBE"),
            sets("SELECT 1 FROM t GROUP BY CUBE (a, b)")
        );
        assert_eq!(
            sets("SELECT 1 FROM t GROUP BY GROUPING SETS ((a, b), (a), ())"),
            (2, v(&[&[0, 1], &[0], &[]]))
        );
        assert_eq!(
            sets("SELECT 1 FROM t GROUP BY ROLLUP ((a, b), c)"),
            (3, v(&[&[0, 1, 2], &[0, 1], &[]]))
        );
        assert_eq!(
            sets("SELECT 1 FROM t GROUP BY a, ROLLUP (b, c)"),
            (3, v(&[&[0, 1, 2], &[0, 1], &[0]]))
        );
        assert_eq!(sets("SELECT 1 FROM t GROUP BY ()"), (0, v(&[&[]])));
        assert_eq!(
            sets("SELECT 1 FROM t GROUP BY a, a WITH ROLLUP"),
            (1, v(&[&[0], &[0], &[]]))
        );
        assert_eq!(
            sets("SELECT 1 FROM t GROUP BY GROUPING SETS (a, a, ROLLUP (b))"),
            (2, v(&[&[0], &[0], &[1], &[]]))
        );
        // A parenthesis that opens an expression stays an expression.
        assert_eq!(
            sets("SELECT 1 FROM t GROUP BY ROLLUP ((a + b) * 2, c)"),
            (2, v(&[&[0, 1], &[0], &[]]))
        );
        assert!(parse_batch("SELECT rollup, COUNT(*) FROM t GROUP BY rollup").is_ok());
        let cube13 = (0..13)
            .map(|i| format!("c{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let many = (0..33)
            .map(|i| format!("c{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        for (sql, number) in [
            (format!("SELECT 1 FROM t GROUP BY CUBE ({cube13})"), 10705),
            (format!("SELECT 1 FROM t GROUP BY ROLLUP ({many})"), 10707),
            (
                "SELECT 1 FROM t GROUP BY ROLLUP (a) WITH CUBE".to_string(),
                10703,
            ),
            ("SELECT 1 FROM t GROUP BY a, (b, c)".to_string(), 102),
            ("SELECT 1 FROM t GROUP BY ROLLUP (())".to_string(), 102),
        ] {
            let e = error(&sql);
            assert_eq!(e.number, number, "{sql}: {e}");
        }
    }

    /// OVER parses into a window call with its partition, order and frame; the one-bound
    /// frame ends at CURRENT ROW; a frame cannot start at UNBOUNDED FOLLOWING, end at
    /// UNBOUNDED PRECEDING, or (alone) be FOLLOWING.
    #[test]
    fn over_clauses_parse_to_window_calls() {
        let Expr::Window(w) = first_item(
            "SELECT SUM(x) OVER (PARTITION BY a, b ORDER BY c DESC ROWS BETWEEN 2 PRECEDING AND UNBOUNDED FOLLOWING) FROM t",
        ) else {
            panic!()
        };
        assert_eq!(w.partition_by.len(), 2);
        assert!(w.order_by[0].descending);
        assert_eq!(
            w.frame,
            Some(WindowFrame {
                rows: true,
                start: FrameBound::Preceding(2),
                end: FrameBound::UnboundedFollowing
            })
        );
        let Expr::Window(w) = first_item("SELECT COUNT(*) OVER (ORDER BY c RANGE CURRENT ROW)")
        else {
            panic!()
        };
        assert_eq!(
            w.frame,
            Some(WindowFrame {
                rows: false,
                start: FrameBound::CurrentRow,
                end: FrameBound::CurrentRow
            })
        );
        assert!(matches!(
            first_item("SELECT ROW_NUMBER() OVER ()"),
            Expr::Window(_)
        ));
        for bad in [
            "SELECT SUM(x) OVER (ORDER BY c ROWS 2 FOLLOWING)",
            "SELECT SUM(x) OVER (ORDER BY c ROWS BETWEEN UNBOUNDED FOLLOWING AND CURRENT ROW)",
            "SELECT SUM(x) OVER (ORDER BY c ROWS BETWEEN CURRENT ROW AND UNBOUNDED PRECEDING)",
            "SELECT SUM(x) OVER (ORDER BY c ROWS BETWEEN 1.5 PRECEDING AND CURRENT ROW)",
            "SELECT SUM(x) OVER (ORDER BY c",
        ] {
            assert_eq!(error(bad).number, 102, "{bad}");
        }
    }

    #[test]
    fn syntax_error_numbers_and_texts() {
        let e = error("SELECT FROM");
        assert_eq!((e.number, e.severity, e.state), (156, 15, 1));
        assert_eq!(e.text, "Incorrect syntax near the keyword 'FROM'.");
        let e = error("select * from");
        assert_eq!(e.text, "Incorrect syntax near the keyword 'from'.");
        let e = error("SELECT 'abc");
        assert_eq!((e.number, e.severity, e.state), (105, 15, 1));
        let e = error("SELECT (1");
        assert_eq!(
            (e.number, e.text.as_str()),
            (102, "Incorrect syntax near '1'.")
        );
        assert_eq!(error("SELECT 1 ?").text, "Incorrect syntax near '?'.");
        assert_eq!(error("SELECT 1 /* open").number, 113);
        assert_eq!(error("PRINT 'a' 'b'").text, "Incorrect syntax near 'b'.");
    }

    #[test]
    fn errors_carry_batch_relative_lines() {
        let e = error("SELECT 1\n\nSELECT * FROM t WHERE");
        assert_eq!((e.number, e.line), (156, 3));
        assert_eq!(error("SELECT 1\nSELECT ,").line, 2);
    }

    #[test]
    fn lone_identifier_is_an_implicit_exec_only_first() {
        assert!(parse_batch("SELEC 1").is_ok());
        let e = error("SELECT 1 SELEC 1");
        assert_eq!(e.number, 102);
        assert_eq!(
            error("SELECT 1; SELEC").text,
            "Incorrect syntax near 'SELEC'."
        );
    }

    #[test]
    fn empty_block_is_an_error() {
        assert_eq!(
            error("BEGIN END").text,
            "Incorrect syntax near the keyword 'END'."
        );
        assert_eq!(error("BEGIN SELECT 1").number, 102);
    }

    #[test]
    fn deep_nesting_is_msg_191_not_a_crash() {
        let deep = |open: &str, middle: &str, close: &str, n: usize| {
            format!("{}{}{}", open.repeat(n), middle, close.repeat(n))
        };
        for sql in [
            deep("SELECT ", "1", "", 1).replace("SELECT 1", &deep("SELECT (", "1", ")", 100_000)),
            format!("SELECT {}1", "NOT ".repeat(100_000)),
            format!("SELECT {}1", "- ".repeat(100_000)),
            deep("BEGIN ", "SELECT 1 ", "END ", 10_000),
            format!("{}SELECT 1", "IF 1 = 1 ".repeat(10_000)),
            format!("SELECT 1{}", " + 1".repeat(100_000)),
            format!("SELECT * FROM a{}", " JOIN a ON 1 = 1".repeat(5_000)),
            deep("SELECT * FROM ", "t", ")", 1).replace("t)", &deep("(", "t", ")", 10_000)),
            format!("SELECT {}", deep("(SELECT ", "1", ")", 10_000)),
        ] {
            assert_eq!(error(&sql).number, 191, "{}", &sql[..40]);
        }
        // Reasonable nesting still parses.
        let ok = format!("SELECT {}", deep("(", "1", ")", 40));
        assert!(parse_batch(&ok).is_ok(), "{:?}", parse_batch(&ok));
        let ok = format!("IF 1 = 1 PRINT 1 {}", "ELSE IF 1 = 2 PRINT 2 ".repeat(100));
        assert!(parse_batch(&ok).is_ok(), "{:?}", parse_batch(&ok));
        let ok = format!("SELECT 1 WHERE a = 0{}", " OR a = 1".repeat(300));
        assert!(parse_batch(&ok).is_ok(), "{:?}", parse_batch(&ok));
        let ok = deep("BEGIN ", "SELECT 1 ", "END ", 30);
        assert!(parse_batch(&ok).is_ok(), "{:?}", parse_batch(&ok));
    }

    /// A small deterministic generator so the garbage test needs no dependency.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    const VOCABULARY: &[&str] = &[
        "SELECT",
        "FROM",
        "WHERE",
        "(",
        ")",
        ",",
        ";",
        ".",
        "*",
        "=",
        "+",
        "-",
        "@v",
        "@@x",
        "1",
        "1.5",
        "1e3",
        "'s'",
        "N'n'",
        "0x0A",
        "[q]",
        "a",
        "b",
        "AS",
        "AND",
        "OR",
        "NOT",
        "IN",
        "LIKE",
        "BETWEEN",
        "IS",
        "NULL",
        "CASE",
        "WHEN",
        "THEN",
        "ELSE",
        "END",
        "BEGIN",
        "IF",
        "WHILE",
        "DECLARE",
        "INT",
        "VARCHAR",
        "MAX",
        "SET",
        "ON",
        "OFF",
        "EXEC",
        "DBCC",
        "CREATE",
        "DATABASE",
        "TABLE",
        "INDEX",
        "ALTER",
        "DROP",
        "ADD",
        "FILE",
        "FILEGROUP",
        "NAME",
        "SIZE",
        "MB",
        "%",
        "UNLIMITED",
        "LOG",
        "PRIMARY",
        "KEY",
        "DEFAULT",
        "VALUES",
        "INSERT",
        "INTO",
        "UPDATE",
        "DELETE",
        "TOP",
        "JOIN",
        "LEFT",
        "CROSS",
        "APPLY",
        "UNION",
        "ALL",
        "ORDER",
        "BY",
        "GROUP",
        "HAVING",
        "CAST",
        "CONVERT",
        "DATEDIFF",
        "COUNT",
        "WITH",
        "ROLLBACK",
        "IMMEDIATE",
        "TRAN",
        "COMMIT",
        "BACKUP",
        "RESTORE",
        "TO",
        "DISK",
        "MOVE",
        "IDENTITY",
        "CONSTRAINT",
        "CHECK",
        "RAISERROR",
        "THROW",
        "RETURN",
        "EXISTS",
        "OPTION",
        "OFFSET",
        "FETCH",
        "ROWS",
        "KILL",
        "LOGIN",
        "PASSWORD",
        "TRY",
        "CATCH",
        "/*",
        "*/",
        "--",
        "\n",
        "'",
        "[",
        "?",
        "!",
        "<>",
        "!<",
        "+=",
        "COLLATE",
        "ESCAPE",
        "INCLUDE",
    ];

    #[test]
    fn garbage_never_panics() {
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        for _ in 0..20_000 {
            let n = rng.below(40);
            let tokens: Vec<&str> = (0..n)
                .map(|_| VOCABULARY[rng.below(VOCABULARY.len())])
                .collect();
            let _ = parse_batch(&tokens.join(" "));
        }
        for _ in 0..5_000 {
            let n = rng.below(60);
            let text: String = (0..n)
                .map(|_| char::from_u32(rng.below(0x3000) as u32).unwrap_or('?'))
                .collect();
            let _ = parse_batch(&text);
            let ascii: String = (0..n).map(|_| (rng.below(95) as u8 + 32) as char).collect();
            let _ = parse_batch(&ascii);
        }
    }

    /// OUTPUT after an INSERT's column list, with INTO a column list and a second OUTPUT
    /// to the client, `$action` kept as a column named `$action`; after UPDATE's SET and
    /// DELETE's table, before FROM.
    #[test]
    fn output_clauses() {
        let b = parse_batch(
            "INSERT INTO t (a) OUTPUT inserted.a, $action AS act INTO #x (c, d) OUTPUT inserted.* VALUES (1)
             UPDATE t SET a = 1 OUTPUT deleted.a FROM t JOIN u ON u.a = t.a
             DELETE t OUTPUT deleted.a INTO @v WHERE a = 1",
        )
        .unwrap();
        let StatementKind::Insert(i) = &b[0].kind else {
            panic!("{:?}", b[0].kind)
        };
        let o = i.output.as_ref().unwrap();
        assert_eq!(o.items.len(), 2);
        assert!(
            matches!(&o.items[1], SelectItem::Expr { expr: Expr::Column(c), alias: Some(a) }
            if c.name() == "$action" && a == "act")
        );
        let into = o.into.as_ref().unwrap();
        assert_eq!(into.columns, vec!["c", "d"]);
        assert!(matches!(&into.target, OutputTarget::Table(n) if n.name() == "#x"));
        assert!(o
            .also
            .as_ref()
            .is_some_and(|a| a.into.is_none() && a.items.len() == 1));
        let StatementKind::Update(u) = &b[1].kind else {
            panic!("{:?}", b[1].kind)
        };
        assert!(u.output.is_some() && u.from.len() == 1);
        let StatementKind::Delete(d) = &b[2].kind else {
            panic!("{:?}", b[2].kind)
        };
        let into = d.output.as_ref().unwrap().into.as_ref().unwrap();
        assert!(matches!(&into.target, OutputTarget::Variable(v) if v == "@v"));
        assert!(d.where_clause.is_some());
    }

    #[test]
    fn truncated_scripts_never_panic() {
        let script = "IF DATABASEPROPERTYEX (N'Company', N'Version') > 0
BEGIN ALTER DATABASE [Company] SET SINGLE_USER WITH ROLLBACK IMMEDIATE; DROP DATABASE [Company]; END
CREATE DATABASE [Company] ON PRIMARY (NAME = N'Company_data', FILENAME = N'D:\\x.mdf', SIZE = 5MB,
FILEGROWTH = 10%), FILEGROUP fg DEFAULT (NAME = f, FILENAME = 'f') LOG ON (NAME = l, FILENAME = 'l', MAXSIZE = UNLIMITED)
DECLARE @start DATETIME2(3) = SYSDATETIME(), @n NVARCHAR(MAX) = N'x', @d DECIMAL(10, 2)
SELECT TOP (5) DATEDIFF(ms, @start, SYSDATETIME()) AS 'ms', t.*, c = CASE WHEN a IN (1, 2) THEN 1 ELSE 0 END
FROM sys.databases t WITH (NOLOCK) LEFT JOIN (SELECT 1 AS x) d ON d.x = t.database_id
WHERE name NOT LIKE 'a%' ESCAPE '\\' AND x BETWEEN 1 AND 2 OR y IS NOT NULL GROUP BY a HAVING COUNT(*) > 1
ORDER BY 1 DESC
CREATE TABLE t (id INT IDENTITY(1, 1) CONSTRAINT pk PRIMARY KEY CLUSTERED, c CHAR(10) DEFAULT 'a' NOT NULL)
INSERT INTO t (c) VALUES ('x'), (DEFAULT) UPDATE TOP (1) t SET c += 'y' WHERE id = 1 DELETE FROM t
BACKUP DATABASE db TO DISK = 'x' WITH INIT, STATS = 10 RESTORE DATABASE db FROM DISK = 'x' WITH MOVE 'a' TO 'b'
EXEC @r = master.dbo.sp_x @a = 1, @b = @c OUTPUT; RAISERROR('x', 16, 1) WITH NOWAIT; THROW 50000, 'x', 1;
/* comment */ BEGIN TRY SELECT CAST(1 AS VARCHAR) END TRY BEGIN CATCH SELECT CONVERT(INT, '1', 1) END CATCH";
        assert!(parse_batch(script).is_ok(), "{:?}", parse_batch(script));
        for (i, _) in script.char_indices() {
            let _ = parse_batch(&script[..i]);
        }
    }
}
