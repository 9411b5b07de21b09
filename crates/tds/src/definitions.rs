//! A connection's parsed sp_executesql parameter definition lists, by their text.
//! Drivers send the list with every call of a parameterized statement (go-mssqldb,
//! mssql-jdbc, pytds); a client that runs several statements in turn (a transaction of
//! five statements) would miss a one-entry cache every time, so a few are kept.
//!
//! Invariants:
//! 1. An entry is `parse_parameter_definitions`'s successful result for exactly its key;
//!    a list that fails to parse is never kept (its error is made again each time).
//! 2. Memory is bounded per connection: at most `MAX_ENTRIES` entries, each for a text of
//!    at most `MAX_TEXT_BYTES` bytes; the least recently used entry makes room.

use std::sync::Arc;

use extentdb_sql::messages::SqlError;
use extentdb_sql::parser::{parse_parameter_definitions, ParameterDefinition};

/// Entries per connection (invariant 2).
pub const MAX_ENTRIES: usize = 16;
/// The longest list kept (invariant 2).
pub const MAX_TEXT_BYTES: usize = 4 << 10;

/// The connection's parsed definition lists, most recently used first (module docs).
#[derive(Default)]
pub struct DefinitionCache {
    entries: Vec<(String, Arc<[ParameterDefinition]>)>,
    parses: u64,
}

impl DefinitionCache {
    /// The parse of definition list `text`, kept or made (and kept when short enough).
    /// A hit copies nothing (the text is kept only when it was parsed).
    pub fn get(&mut self, text: &str) -> Result<Arc<[ParameterDefinition]>, SqlError> {
        if let Some(i) = self.entries.iter().position(|(t, _)| t == text) {
            // Most recently used first: the hit moves to the front.
            self.entries[..=i].rotate_right(1);
            return Ok(self.entries[0].1.clone());
        }
        self.parses += 1;
        let defs: Arc<[ParameterDefinition]> = parse_parameter_definitions(text)?.into();
        if text.len() <= MAX_TEXT_BYTES {
            self.entries.truncate(MAX_ENTRIES - 1);
            self.entries.insert(0, (text.to_string(), defs.clone()));
        }
        assert!(self.entries.len() <= MAX_ENTRIES, "invariant 2");
        Ok(defs)
    }

    /// How many lists were parsed (not found kept).
    pub fn parses(&self) -> u64 {
        self.parses
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(i: usize) -> String {
        format!("@p{i} int, @q nvarchar(10)")
    }

    #[test]
    fn statements_run_in_turn_parse_their_lists_once() {
        let mut c = DefinitionCache::default();
        for _ in 0..100 {
            for i in 0..5 {
                let defs = c.get(&list(i)).unwrap();
                assert_eq!(defs.len(), 2);
                assert_eq!(defs[0].name.to_lowercase(), format!("@p{i}"));
            }
        }
        assert_eq!(
            c.parses(),
            5,
            "five lists sent in turn are parsed once each"
        );
    }

    #[test]
    fn the_least_recently_used_list_makes_room() {
        let mut c = DefinitionCache::default();
        for i in 0..=MAX_ENTRIES {
            c.get(&list(i)).unwrap();
        }
        assert_eq!(c.entries.len(), MAX_ENTRIES);
        c.get(&list(MAX_ENTRIES)).unwrap();
        assert_eq!(c.parses(), MAX_ENTRIES as u64 + 1, "the newest is kept");
        c.get(&list(0)).unwrap();
        assert_eq!(c.parses(), MAX_ENTRIES as u64 + 2, "the oldest was dropped");
    }

    /// A hit moves its list to the front: the list used longest ago makes room, not the
    /// one kept first.
    #[test]
    fn a_hit_is_kept_over_older_lists() {
        let mut c = DefinitionCache::default();
        for i in 0..MAX_ENTRIES {
            c.get(&list(i)).unwrap();
        }
        c.get(&list(0)).unwrap();
        c.get(&list(MAX_ENTRIES)).unwrap();
        assert_eq!(c.parses(), MAX_ENTRIES as u64 + 1);
        c.get(&list(0)).unwrap();
        assert_eq!(c.parses(), MAX_ENTRIES as u64 + 1, "the hit was kept");
        c.get(&list(1)).unwrap();
        assert_eq!(c.parses(), MAX_ENTRIES as u64 + 2, "the oldest was dropped");
    }

    #[test]
    fn a_list_that_fails_is_not_kept() {
        let mut c = DefinitionCache::default();
        assert!(c.get("@p int,,").is_err());
        assert!(c.get("@p int,,").is_err());
        assert_eq!(c.parses(), 2);
        assert!(c.entries.is_empty());
    }
}
