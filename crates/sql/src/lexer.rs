//! The T-SQL lexer: batch text to tokens with 1-based, batch-relative line numbers.
//!
//! Keywords are not a separate token kind: every plain word is a `Word` that keeps the
//! user's spelling, and the parser compares words case-insensitively. That keeps the
//! original spelling for messages ("near the keyword 'from'") and lets non-reserved
//! keywords (`NAME`, `SIZE`, `RECOVERY`) serve as identifiers without special cases.
//! [`is_reserved`] says which words SQL Server reserves.
//!
//! The lexer deliberately does not interpret numbers beyond classifying them (the parser
//! converts them, so range errors carry statement context), does not recognise size units
//! (`5MB` is the number `5` followed by the word `MB`, just as SQL Server lexes it), and
//! does not handle ODBC escapes (`{fn ...}`) or money literals (`$1.50`).

use crate::parser::ParseError;

/// What a token is. The exact source text is in [`Token::text`].
#[derive(Debug, Clone, PartialEq)]
pub enum TokenKind {
    /// A plain identifier or keyword (`select`, `sys`, `#temp`, `N`).
    Word,
    /// A `[bracketed]` or `"quoted"` identifier with escapes removed; never a keyword.
    QuotedIdent(String),
    /// `@name`; the text includes the `@`.
    Variable,
    /// `@@name`; the text includes the `@@`.
    GlobalVariable,
    /// Digits only (`42`).
    Integer,
    /// Digits with a decimal point (`1.5`, `.5`, `1.`).
    Decimal,
    /// A number with an exponent (`1e3`, `2.5E-4`).
    Float,
    /// `'text'` or `N'text'`, with doubled quotes collapsed.
    String { value: String, national: bool },
    /// `0x0A1B`: the bytes.
    Binary(Vec<u8>),
    /// An operator or punctuation mark; the text is the symbol (`<=`, `(`, `+=`).
    Symbol,
    /// A character that starts no token; the parser reports it as a syntax error.
    Unknown,
}

/// One token.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub kind: TokenKind,
    /// The source text of the token as written.
    pub text: String,
    /// 1-based line number within the batch.
    pub line: u32,
    /// Where the token starts in the batch, in characters (a statement's text, SHOWPLAN).
    pub start: usize,
}

impl Token {
    /// True for a plain word equal (ignoring case) to `word`.
    pub fn is_word(&self, word: &str) -> bool {
        self.kind == TokenKind::Word && self.text.eq_ignore_ascii_case(word)
    }

    /// True for the symbol `symbol`.
    pub fn is_symbol(&self, symbol: &str) -> bool {
        self.kind == TokenKind::Symbol && self.text == symbol
    }

    /// True for a plain word SQL Server reserves.
    pub fn is_reserved(&self) -> bool {
        self.kind == TokenKind::Word && is_reserved(&self.text)
    }
}

/// sysname: nvarchar(128).
pub const MAX_IDENTIFIER_CHARS: usize = 128;

/// SQL Server's reserved keywords (Transact-SQL reserved keywords list).
const RESERVED: &[&str] = &[
    "ADD",
    "ALL",
    "ALTER",
    "AND",
    "ANY",
    "AS",
    "ASC",
    "AUTHORIZATION",
    "BACKUP",
    "BEGIN",
    "BETWEEN",
    "BREAK",
    "BROWSE",
    "BULK",
    "BY",
    "CASCADE",
    "CASE",
    "CHECK",
    "CHECKPOINT",
    "CLOSE",
    "CLUSTERED",
    "COALESCE",
    "COLLATE",
    "COLUMN",
    "COMMIT",
    "COMPUTE",
    "CONSTRAINT",
    "CONTAINS",
    "CONTAINSTABLE",
    "CONTINUE",
    "CONVERT",
    "CREATE",
    "CROSS",
    "CURRENT",
    "CURRENT_DATE",
    "CURRENT_TIME",
    "CURRENT_TIMESTAMP",
    "CURRENT_USER",
    "CURSOR",
    "DATABASE",
    "DBCC",
    "DEALLOCATE",
    "DECLARE",
    "DEFAULT",
    "DELETE",
    "DENY",
    "DESC",
    "DISK",
    "DISTINCT",
    "DISTRIBUTED",
    "DOUBLE",
    "DROP",
    "DUMP",
    "ELSE",
    "END",
    "ERRLVL",
    "ESCAPE",
    "EXCEPT",
    "EXEC",
    "EXECUTE",
    "EXISTS",
    "EXIT",
    "EXTERNAL",
    "FETCH",
    "FILE",
    "FILLFACTOR",
    "FOR",
    "FOREIGN",
    "FREETEXT",
    "FREETEXTTABLE",
    "FROM",
    "FULL",
    "FUNCTION",
    "GOTO",
    "GRANT",
    "GROUP",
    "HAVING",
    "HOLDLOCK",
    "IDENTITY",
    "IDENTITY_INSERT",
    "IDENTITYCOL",
    "IF",
    "IN",
    "INDEX",
    "INNER",
    "INSERT",
    "INTERSECT",
    "INTO",
    "IS",
    "JOIN",
    "KEY",
    "KILL",
    "LEFT",
    "LIKE",
    "LINENO",
    "LOAD",
    "MERGE",
    "NATIONAL",
    "NOCHECK",
    "NONCLUSTERED",
    "NOT",
    "NULL",
    "NULLIF",
    "OF",
    "OFF",
    "OFFSETS",
    "ON",
    "OPEN",
    "OPENDATASOURCE",
    "OPENQUERY",
    "OPENROWSET",
    "OPENXML",
    "OPTION",
    "OR",
    "ORDER",
    "OUTER",
    "OVER",
    "PERCENT",
    "PIVOT",
    "PLAN",
    "PRECISION",
    "PRIMARY",
    "PRINT",
    "PROC",
    "PROCEDURE",
    "PUBLIC",
    "RAISERROR",
    "READ",
    "READTEXT",
    "RECONFIGURE",
    "REFERENCES",
    "REPLICATION",
    "RESTORE",
    "RESTRICT",
    "RETURN",
    "REVERT",
    "REVOKE",
    "RIGHT",
    "ROLLBACK",
    "ROWCOUNT",
    "ROWGUIDCOL",
    "RULE",
    "SAVE",
    "SCHEMA",
    "SECURITYAUDIT",
    "SELECT",
    "SEMANTICKEYPHRASETABLE",
    "SEMANTICSIMILARITYDETAILSTABLE",
    "SEMANTICSIMILARITYTABLE",
    "SESSION_USER",
    "SET",
    "SETUSER",
    "SHUTDOWN",
    "SOME",
    "STATISTICS",
    "SYSTEM_USER",
    "TABLE",
    "TABLESAMPLE",
    "TEXTSIZE",
    "THEN",
    "TO",
    "TOP",
    "TRAN",
    "TRANSACTION",
    "TRIGGER",
    "TRUNCATE",
    "TRY_CONVERT",
    "TSEQUAL",
    "UNION",
    "UNIQUE",
    "UNPIVOT",
    "UPDATE",
    "UPDATETEXT",
    "USE",
    "USER",
    "VALUES",
    "VARYING",
    "VIEW",
    "WAITFOR",
    "WHEN",
    "WHERE",
    "WHILE",
    "WITH",
    "WITHIN",
    "WRITETEXT",
];

/// True when SQL Server reserves `word` (case-insensitive).
pub fn is_reserved(word: &str) -> bool {
    RESERVED.iter().any(|k| k.eq_ignore_ascii_case(word))
}

/// Symbols of two characters, tried before single characters.
const TWO_CHAR_SYMBOLS: &[&str] = &[
    "<>", "!=", "<=", ">=", "!<", "!>", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "::",
];

/// Single-character symbols.
const ONE_CHAR_SYMBOLS: &str = "=<>+-*/%(),.;~&|^:";

/// Splits batch text into tokens, dropping whitespace and comments.
pub fn tokenize(text: &str) -> Result<Vec<Token>, ParseError> {
    let mut lexer = Lexer {
        chars: text.chars().collect(),
        pos: 0,
        line: 1,
        tokens: Vec::new(),
    };
    lexer.run()?;
    Ok(lexer.tokens)
}

struct Lexer {
    chars: Vec<char>,
    pos: usize,
    line: u32,
    tokens: Vec<Token>,
}

impl Lexer {
    fn peek(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    /// Moves one character forward, counting lines.
    fn bump(&mut self) -> Option<char> {
        let c = self.peek(0)?;
        self.pos += 1;
        if c == '\n' {
            self.line = self.line.saturating_add(1);
        }
        Some(c)
    }

    fn text_from(&self, start: usize) -> String {
        self.chars[start..self.pos].iter().collect()
    }

    fn push(&mut self, kind: TokenKind, start: usize, line: u32) {
        let text = self.text_from(start);
        self.tokens.push(Token {
            kind,
            text,
            line,
            start,
        });
    }

    fn run(&mut self) -> Result<(), ParseError> {
        while let Some(c) = self.peek(0) {
            let next = self.peek(1);
            if c.is_whitespace() {
                self.bump();
            } else if c == '-' && next == Some('-') {
                while self.peek(0).is_some_and(|c| c != '\n') {
                    self.bump();
                }
            } else if c == '/' && next == Some('*') {
                self.block_comment()?;
            } else if c == '\'' {
                self.string(false)?;
            } else if (c == 'N' || c == 'n') && next == Some('\'') {
                self.string(true)?;
            } else if c == '[' {
                self.quoted_ident(']')?;
            } else if c == '"' {
                self.quoted_ident('"')?;
            } else if c == '0' && matches!(next, Some('x' | 'X')) {
                self.binary();
            } else if c.is_ascii_digit() || (c == '.' && next.is_some_and(|n| n.is_ascii_digit())) {
                self.number();
            } else if c == '@' {
                self.variable()?;
            } else if is_ident_start(c) {
                let (start, line) = (self.pos, self.line);
                self.eat_ident_chars();
                self.check_identifier_length(&self.text_from(start))?;
                self.push(TokenKind::Word, start, line);
            } else {
                self.symbol();
            }
        }
        Ok(())
    }

    fn block_comment(&mut self) -> Result<(), ParseError> {
        self.pos += 2;
        let mut depth = 1u32;
        while depth > 0 {
            match (self.peek(0), self.peek(1)) {
                (None, _) => {
                    return Err(ParseError::new(
                        113,
                        15,
                        1,
                        "Missing end comment mark '*/'.",
                        self.line,
                    ))
                }
                (Some('*'), Some('/')) => {
                    depth -= 1;
                    self.pos += 2;
                }
                (Some('/'), Some('*')) => {
                    depth += 1;
                    self.pos += 2;
                }
                _ => {
                    self.bump();
                }
            }
        }
        Ok(())
    }

    /// Reads up to the closing `close`, collapsing doubled closers; `None` if unclosed.
    fn delimited(&mut self, close: char) -> Option<String> {
        let mut value = String::new();
        loop {
            let c = self.bump()?;
            if c == close {
                if self.peek(0) == Some(close) {
                    self.bump();
                } else {
                    return Some(value);
                }
            }
            value.push(c);
        }
    }

    fn unclosed(&self, content_start: usize) -> ParseError {
        let rest: String = self.chars[content_start..].iter().collect();
        ParseError::new(
            105,
            15,
            1,
            format!("Unclosed quotation mark after the character string '{rest}'."),
            self.line,
        )
    }

    fn string(&mut self, national: bool) -> Result<(), ParseError> {
        let (start, line) = (self.pos, self.line);
        self.pos += if national { 2 } else { 1 };
        let content_start = self.pos;
        let value = self
            .delimited('\'')
            .ok_or_else(|| self.unclosed(content_start))?;
        self.push(TokenKind::String { value, national }, start, line);
        Ok(())
    }

    fn quoted_ident(&mut self, close: char) -> Result<(), ParseError> {
        let (start, line) = (self.pos, self.line);
        self.pos += 1;
        let content_start = self.pos;
        let value = self
            .delimited(close)
            .ok_or_else(|| self.unclosed(content_start))?;
        self.check_identifier_length(&value)?;
        self.push(TokenKind::QuotedIdent(value), start, line);
        Ok(())
    }

    fn binary(&mut self) {
        let (start, line) = (self.pos, self.line);
        self.pos += 2;
        let mut digits = Vec::new();
        while let Some(d) = self.peek(0).and_then(|c| c.to_digit(16)) {
            digits.push(d as u8);
            self.pos += 1;
        }
        // An odd number of digits means a leading zero nibble, as SQL Server reads it.
        if digits.len() % 2 == 1 {
            digits.insert(0, 0);
        }
        let bytes = digits.chunks(2).map(|p| (p[0] << 4) | p[1]).collect();
        self.push(TokenKind::Binary(bytes), start, line);
    }

    fn eat_digits(&mut self) {
        while self.peek(0).is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    fn number(&mut self) {
        let (start, line) = (self.pos, self.line);
        let mut kind = TokenKind::Integer;
        self.eat_digits();
        if self.peek(0) == Some('.') {
            kind = TokenKind::Decimal;
            self.pos += 1;
            self.eat_digits();
        }
        if matches!(self.peek(0), Some('e' | 'E')) {
            let digit_at = match self.peek(1) {
                Some('+' | '-') => 2,
                _ => 1,
            };
            if self.peek(digit_at).is_some_and(|c| c.is_ascii_digit()) {
                kind = TokenKind::Float;
                self.pos += digit_at;
                self.eat_digits();
            }
        }
        self.push(kind, start, line);
    }

    fn variable(&mut self) -> Result<(), ParseError> {
        let (start, line) = (self.pos, self.line);
        let global = self.peek(1) == Some('@');
        self.pos += if global { 2 } else { 1 };
        self.eat_ident_chars();
        self.check_identifier_length(&self.text_from(start))?;
        if self.pos - start == 1 {
            self.push(TokenKind::Unknown, start, line);
        } else if global {
            self.push(TokenKind::GlobalVariable, start, line);
        } else {
            self.push(TokenKind::Variable, start, line);
        }
        Ok(())
    }

    /// Msg 103: a name (plain, [bracketed], "quoted", @variable) longer than sysname's 128
    /// characters. Names are checked here, before any statement sees them, so no catalog,
    /// boot page or backup header is ever asked to store one.
    fn check_identifier_length(&self, name: &str) -> Result<(), ParseError> {
        if name.chars().count() <= MAX_IDENTIFIER_CHARS {
            return Ok(());
        }
        let head: String = name.chars().take(MAX_IDENTIFIER_CHARS).collect();
        Err(ParseError::new(
            103,
            15,
            4,
            format!(
                "The identifier that starts with '{head}' is too long. Maximum length is {MAX_IDENTIFIER_CHARS}."
            ),
            self.line,
        ))
    }

    fn eat_ident_chars(&mut self) {
        while self.peek(0).is_some_and(is_ident_char) {
            self.pos += 1;
        }
    }

    fn symbol(&mut self) {
        let (start, line) = (self.pos, self.line);
        let pair: String = self.chars[self.pos..].iter().take(2).collect();
        if TWO_CHAR_SYMBOLS.contains(&pair.as_str()) {
            self.pos += 2;
            self.push(TokenKind::Symbol, start, line);
            return;
        }
        let c = self.bump().unwrap_or(' ');
        let kind = if ONE_CHAR_SYMBOLS.contains(c) {
            TokenKind::Symbol
        } else {
            TokenKind::Unknown
        };
        self.push(kind, start, line);
    }
}

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_' || c == '#'
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '@' | '#' | '$')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(TokenKind, String)> {
        tokenize(text)
            .unwrap()
            .into_iter()
            .map(|t| (t.kind, t.text))
            .collect()
    }

    #[test]
    fn words_identifiers_and_variables() {
        let t = tokenize("select [a]]b], \"q\" @v @@ROWCOUNT #tmp").unwrap();
        assert!(t[0].is_word("SELECT"));
        assert!(t[0].is_reserved());
        assert_eq!(t[0].text, "select");
        assert_eq!(t[1].kind, TokenKind::QuotedIdent("a]b".into()));
        assert!(t[2].is_symbol(","));
        assert_eq!(t[3].kind, TokenKind::QuotedIdent("q".into()));
        assert_eq!(
            (t[4].kind.clone(), t[4].text.as_str()),
            (TokenKind::Variable, "@v")
        );
        assert_eq!(t[5].kind, TokenKind::GlobalVariable);
        assert_eq!(t[6].kind, TokenKind::Word);
    }

    #[test]
    fn numbers_and_units() {
        let k = kinds("1 1.5 .5 1e3 2.5E-4 5MB 0x0A1B 0xABC 1e");
        assert_eq!(k[0].0, TokenKind::Integer);
        assert_eq!(k[1].0, TokenKind::Decimal);
        assert_eq!(k[2].0, TokenKind::Decimal);
        assert_eq!(k[3].0, TokenKind::Float);
        assert_eq!(k[4], (TokenKind::Float, "2.5E-4".into()));
        assert_eq!(k[5], (TokenKind::Integer, "5".into()));
        assert_eq!(k[6], (TokenKind::Word, "MB".into()));
        assert_eq!(k[7].0, TokenKind::Binary(vec![0x0A, 0x1B]));
        assert_eq!(k[8].0, TokenKind::Binary(vec![0x0A, 0xBC]));
        assert_eq!(k[9], (TokenKind::Integer, "1".into()));
        assert_eq!(k[10], (TokenKind::Word, "e".into()));
    }

    #[test]
    fn strings() {
        let k = kinds("'it''s' N'ünï' n'x'");
        assert_eq!(
            k[0].0,
            TokenKind::String {
                value: "it's".into(),
                national: false
            }
        );
        assert_eq!(
            k[1].0,
            TokenKind::String {
                value: "ünï".into(),
                national: true
            }
        );
        assert!(matches!(k[2].0, TokenKind::String { national: true, .. }));
    }

    #[test]
    fn operators_and_comments() {
        let k = kinds("a<>b!=c<=d>=e!<f -- x\n/* /* nested */ */ +=~&|^%");
        let syms: Vec<&str> = k
            .iter()
            .filter(|(kind, _)| *kind == TokenKind::Symbol)
            .map(|(_, t)| t.as_str())
            .collect();
        assert_eq!(
            syms,
            ["<>", "!=", "<=", ">=", "!<", "+=", "~", "&", "|", "^", "%"]
        );
    }

    #[test]
    fn line_numbers() {
        let t = tokenize("a\n/* x\ny */ b\r\n'p\nq' c").unwrap();
        assert_eq!(t.iter().map(|t| t.line).collect::<Vec<_>>(), [1, 3, 4, 5]);
    }

    #[test]
    fn lexical_errors() {
        let e = tokenize("SELECT 'abc").unwrap_err();
        assert_eq!((e.number, e.severity, e.state), (105, 15, 1));
        assert_eq!(
            e.text,
            "Unclosed quotation mark after the character string 'abc'."
        );
        assert_eq!(tokenize("SELECT [abc").unwrap_err().number, 105);
        let e = tokenize("SELECT 1 /* /* */").unwrap_err();
        assert_eq!(
            (e.number, e.text.as_str()),
            (113, "Missing end comment mark '*/'.")
        );
    }

    #[test]
    fn names_over_128_characters_are_msg_103() {
        let ok = "n".repeat(128);
        assert!(tokenize(&format!(
            "SELECT {ok}, [{ok}], \"{ok}\", @{}",
            "v".repeat(127)
        ))
        .is_ok());
        for text in [
            format!("CREATE TABLE {}n (a int)", ok),
            format!("CREATE TABLE [{}n] (a int)", ok),
            format!("SELECT \"{}]n\"", "x".repeat(128)),
            format!("DECLARE @{} int", "v".repeat(128)),
        ] {
            let e = tokenize(&text).unwrap_err();
            assert_eq!((e.number, e.severity, e.state), (103, 15, 4), "{text}");
            assert!(e.text.ends_with("is too long. Maximum length is 128."));
            assert!(e.text.len() < 200, "the message quotes 128 characters");
        }
    }

    #[test]
    fn unknown_characters_become_tokens() {
        let k = kinds("? {} @ !");
        assert!(k.iter().all(|(kind, _)| *kind == TokenKind::Unknown));
    }
}
