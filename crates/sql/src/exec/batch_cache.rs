//! A session's parsed batches, by their text: the part of SQL Server's plan cache that
//! extentdb has, the parse. sp_executesql, sp_prepexec and sp_execute send the same text
//! with every call (drivers such as go-mssqldb and mssql-jdbc run each parameterized
//! statement that way), so a session that runs a statement again takes its tree from here
//! instead of lexing and parsing it again.
//!
//! What an entry holds is a pure function of the text: the tree of statements the parser
//! makes, with no name resolved, no table, column, type or permission looked up, and no
//! session setting read (the lexer and parser read none). Names are bound when each
//! statement runs, against the catalog of that moment, so DDL between two runs of a text
//! (ALTER, DROP or CREATE TABLE of a name it uses, another database after USE) cannot make
//! an entry wrong, and nothing needs invalidating (`tests/batch_cache.rs` runs those cases
//! over several connections).
//!
//! Invariants:
//! 1. An entry is the parser's successful result for exactly its key; a text that fails to
//!    parse is never cached (its error is made again, from the text, each time).
//! 2. Memory is bounded per session: at most `MAX_ENTRIES` entries, each for a text of at
//!    most `MAX_TEXT_BYTES` bytes (a tree's size follows its text's); the least recently
//!    used entry makes room.
//! 3. The cache is the session's own (`&mut Session`), so it takes no lock; two sessions
//!    running one text each hold their own tree.
//!
//! It does not cache plans or the seek ranges a WHERE clause gives (they depend on the
//! parameters and are made at each run) nor the tables names resolve to: those the
//! session keeps apart, each with the catalog state it was read under (`table_cache.rs`),
//! so DDL makes the next run resolve the name again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::ast::Statement;
use crate::parser::{parse_batch, ParseError};

/// Entries per session (invariant 2).
pub(super) const MAX_ENTRIES: usize = 64;
/// The longest text cached (invariant 2): longer batches (scripts, the 64 KB INSERTs of a
/// bulk load) are parsed each time, as they are seldom sent twice.
pub(super) const MAX_TEXT_BYTES: usize = 8 << 10;

/// A parsed batch, shared by the cache and the run that uses it.
pub(super) type Parsed = Arc<Vec<Statement>>;

struct Entry {
    statements: Parsed,
    /// `BatchCache::clock` at the entry's last use.
    used: u64,
}

/// The session's parsed batches (module docs).
#[derive(Default)]
pub(super) struct BatchCache {
    entries: HashMap<String, Entry>,
    /// Counts lookups; orders entries by last use.
    clock: u64,
    hits: u64,
}

impl BatchCache {
    /// The statements of `text`: the cached tree, or the parser's, cached when it parses
    /// and is short enough. Each run of the parser adds one to `compilations` (the
    /// instance's "SQL Compilations/sec").
    pub fn parse(&mut self, text: &str, compilations: &AtomicU64) -> Result<Parsed, ParseError> {
        self.clock += 1;
        if let Some(e) = self.entries.get_mut(text) {
            e.used = self.clock;
            self.hits += 1;
            return Ok(e.statements.clone());
        }
        compilations.fetch_add(1, Ordering::Relaxed);
        let statements = Arc::new(parse_batch(text)?);
        if text.len() <= MAX_TEXT_BYTES {
            if self.entries.len() == MAX_ENTRIES {
                self.evict_least_recent();
            }
            let entry = Entry {
                statements: statements.clone(),
                used: self.clock,
            };
            self.entries.insert(text.to_string(), entry);
        }
        assert!(self.entries.len() <= MAX_ENTRIES, "invariant 2");
        Ok(statements)
    }

    fn evict_least_recent(&mut self) {
        let oldest = self
            .entries
            .iter()
            .min_by_key(|(_, e)| e.used)
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            self.entries.remove(&k);
        }
    }

    /// Lookups answered from the cache since the session began.
    #[cfg(test)]
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// Entries held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses through `c`, counting compilations in `n`.
    fn parse(c: &mut BatchCache, n: &AtomicU64, text: &str) -> Result<Parsed, ParseError> {
        c.parse(text, n)
    }

    /// A text parsed twice is parsed once: the second lookup returns the same tree.
    #[test]
    fn second_parse_is_a_hit() {
        let (mut c, n) = (BatchCache::default(), AtomicU64::new(0));
        let a = parse(&mut c, &n, "SELECT x FROM t WHERE k = @p1").unwrap();
        let b = parse(&mut c, &n, "SELECT x FROM t WHERE k = @p1").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!((c.hits(), c.len(), n.into_inner()), (1, 1, 1));
    }

    /// Texts that fail to parse, and texts over the limit, are not kept (invariants 1, 2).
    #[test]
    fn errors_and_long_texts_are_not_cached() {
        let (mut c, n) = (BatchCache::default(), AtomicU64::new(0));
        assert!(parse(&mut c, &n, "SELECT FROM WHERE").is_err());
        assert!(parse(&mut c, &n, "SELECT FROM WHERE").is_err());
        let long = format!("SELECT '{}'", "a".repeat(MAX_TEXT_BYTES));
        parse(&mut c, &n, &long).unwrap();
        parse(&mut c, &n, &long).unwrap();
        assert_eq!((c.hits(), c.len(), n.into_inner()), (0, 0, 4));
    }

    /// Past `MAX_ENTRIES` the least recently used entry goes, and a recently used one stays.
    #[test]
    fn least_recently_used_entry_is_evicted() {
        let (mut c, n) = (BatchCache::default(), AtomicU64::new(0));
        for i in 0..MAX_ENTRIES {
            parse(&mut c, &n, &format!("SELECT {i}")).unwrap();
        }
        parse(&mut c, &n, "SELECT 0").unwrap(); // 0 is now the most recent; 1 the least.
        parse(&mut c, &n, "SELECT 'new'").unwrap();
        assert_eq!(c.len(), MAX_ENTRIES);
        let hits = c.hits();
        parse(&mut c, &n, "SELECT 0").unwrap();
        assert_eq!(c.hits(), hits + 1, "the recently used entry stayed");
        parse(&mut c, &n, "SELECT 1").unwrap();
        assert_eq!(c.hits(), hits + 1, "the least recently used entry went");
    }
}
