//! The server collation's comparison of text, defined once: the B-tree orders character
//! keys by it (`key::compare`, `key::hash_key`) and the SQL layer's `=`, `<`, ORDER BY,
//! GROUP BY, DISTINCT, LIKE's literal characters, hash join keys and key checks compare and
//! fold text by it too, so a seek of a character key and a scan with the same WHERE find
//! the same rows.
//!
//! The rule (SQL_Latin1_General_CP1_CI_AS in the respects extentdb builds):
//! 1. Trailing spaces (U+0020) are ignored; other trailing characters are not.
//! 2. Each remaining character is folded to its full Unicode uppercase (`char::to_uppercase`:
//!    `'a'` is `"A"`, `'ß'` is `"SS"`), and the folded sequences compare character by
//!    character by code point, a shorter sequence before any it is a prefix of. So the
//!    comparison is case-insensitive, `'ß'` equals `"SS"` and `"ss"`, and `'_'` (U+005F)
//!    sorts after every letter (they fold to U+0041-U+005A).
//! 3. Accents are kept: `'é'` folds to `'É'`, which differs from `'E'`.
//! 4. Non-Unicode (char, varchar) bytes are Latin-1 characters, one per byte (`b as char`),
//!    as the row codec stores them; Unicode (nchar, nvarchar) bytes are UTF-16LE, an
//!    unpaired surrogate read as U+FFFD.
//!
//! `compare` is a total order; `folded` gives the sequence it decides on, so two strings
//! are equal under `compare` exactly when their `folded` forms are equal (what hashing
//! needs). NULL is the callers' concern.
//!
//! Deliberately not here: any other collation (extentdb has one for the server), and
//! SQL Server's linguistic weights (its real CI_AS order puts `'_'` before letters); the
//! B-tree's order on disk is this one, and changing it would reorder existing indexes.

use std::cmp::Ordering;

/// One character as the collation sees it (rule 2).
pub fn fold(c: char) -> std::char::ToUppercase {
    c.to_uppercase()
}

/// Orders two character sequences from which trailing spaces are already gone (rule 2).
pub fn compare_trimmed(a: impl Iterator<Item = char>, b: impl Iterator<Item = char>) -> Ordering {
    a.flat_map(fold).cmp(b.flat_map(fold))
}

/// Orders two strings under the collation (rules 1-3).
pub fn compare(a: &str, b: &str) -> Ordering {
    compare_trimmed(trimmed(a).chars(), trimmed(b).chars())
}

/// `s` without its trailing spaces (rule 1).
pub fn trimmed(s: &str) -> &str {
    s.trim_end_matches(' ')
}

/// The sequence `compare` decides on: equal strings have equal folded forms (rule 2).
pub fn folded(s: &str) -> String {
    trimmed(s).chars().flat_map(fold).collect()
}

/// The characters of stored Latin-1 bytes, without trailing spaces (rules 1 and 4).
pub fn latin1_chars(b: &[u8]) -> impl Iterator<Item = char> + '_ {
    let mut n = b.len();
    while n > 0 && b[n - 1] == b' ' {
        n -= 1;
    }
    b[..n].iter().map(|&c| c as char)
}

/// The characters of stored UTF-16LE bytes, without trailing spaces (rules 1 and 4). An odd
/// last byte is no code unit and is ignored.
pub fn utf16_chars(b: &[u8]) -> impl Iterator<Item = char> + '_ {
    let mut n = b.len() & !1;
    while n >= 2 && b[n - 2] == b' ' && b[n - 1] == 0 {
        n -= 2;
    }
    let units = b[..n]
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]));
    char::decode_utf16(units).map(|r| r.unwrap_or('\u{fffd}'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves the rule's named cases: case, '_' after letters, 'ß' as "SS", trailing
    /// spaces, accents kept.
    #[test]
    fn the_rule() {
        assert_eq!(compare("abc", "ABC  "), Ordering::Equal);
        assert_eq!(compare("_", "a"), Ordering::Greater);
        assert_eq!(compare("_", "A"), Ordering::Greater);
        assert_eq!(compare("[", "z"), Ordering::Greater);
        assert_eq!(compare("ß", "SS"), Ordering::Equal);
        assert_eq!(compare("ß", "ss"), Ordering::Equal);
        assert_eq!(compare("straße", "STRASSE"), Ordering::Equal);
        assert_eq!(compare("é", "E"), Ordering::Greater);
        assert_eq!(compare("é", "É"), Ordering::Equal);
        assert_eq!(compare("a ", "a\t"), Ordering::Less);
        assert_eq!(compare("", "   "), Ordering::Equal);
        assert_eq!(folded("Straße  "), "STRASSE");
    }

    /// Proves the byte readers give the string's characters without trailing spaces.
    #[test]
    fn stored_bytes() {
        let latin1: String = latin1_chars(&[b'a', 0xE9, b' ', b' ']).collect();
        assert_eq!(latin1, "a\u{e9}");
        let utf16: Vec<u8> = "Ωx  ".encode_utf16().flat_map(u16::to_le_bytes).collect();
        assert_eq!(utf16_chars(&utf16).collect::<String>(), "Ωx");
        assert_eq!(utf16_chars(&[0x20, 0x00, 0x41]).count(), 0);
        assert_eq!(utf16_chars(&[0x00, 0xD8]).collect::<String>(), "\u{fffd}");
    }
}
