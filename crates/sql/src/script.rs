//! Script splitting by sqlcmd's batch rules: a line holding only `GO` (optionally with a
//! repeat count and a trailing `-- comment`) ends a batch.
//!
//! `GO` is not T-SQL; the server never sees it. This module only cuts the script into
//! batch texts and records where each batch starts, so errors can be reported per batch
//! with batch-relative line numbers, as sqlcmd does. It deliberately does not lex T-SQL:
//! it tracks just enough state (block comments, string literals and quoted identifiers
//! spanning lines) to know whether a `GO` line is really a separator. It does not handle
//! sqlcmd's other commands (`:r`, `:setvar`, `$(var)` substitution).

/// One batch of a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The batch text, lines joined with `\n` (carriage returns removed).
    pub text: String,
    /// The 1-based line number, in the script, of the batch's first line.
    pub first_line: u32,
    /// How many times the batch runs: the count after `GO`, 1 without one.
    pub repeat: u32,
}

/// What a line leaves open for the next one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct CarryState {
    /// Depth of nested `/* */` comments still open.
    comment_depth: u32,
    /// The closing character of an open string literal or quoted identifier.
    open_quote: Option<char>,
}

impl CarryState {
    fn is_clear(self) -> bool {
        self.comment_depth == 0 && self.open_quote.is_none()
    }
}

/// Splits a script into batches at `GO` lines. Whitespace-only batches are dropped. A
/// UTF-8 byte-order mark at the start is no part of the first batch, as sqlcmd reads it.
pub fn split_batches(script: &str) -> Vec<Batch> {
    let script = script.strip_prefix('\u{feff}').unwrap_or(script);
    let mut batches = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut first_line = 1u32;
    let mut state = CarryState::default();
    for (index, raw) in script.split('\n').enumerate() {
        let line_no = u32::try_from(index + 1).unwrap_or(u32::MAX);
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if state.is_clear() {
            if let Some(repeat) = go_line(line) {
                push_batch(&mut batches, &current, first_line, repeat);
                current.clear();
                first_line = line_no.saturating_add(1);
                continue;
            }
        }
        state = scan_line(line, state);
        current.push(line);
    }
    push_batch(&mut batches, &current, first_line, 1);
    batches
}

fn push_batch(batches: &mut Vec<Batch>, lines: &[&str], first_line: u32, repeat: u32) {
    if lines.iter().all(|l| l.trim().is_empty()) {
        return;
    }
    batches.push(Batch {
        text: lines.join("\n"),
        first_line,
        repeat,
    });
}

/// Returns the repeat count when the line is a batch separator.
///
/// A count of 0 or one too large for `u32` still ends the batch; it runs once, because
/// silently skipping or endlessly repeating a batch would be worse than running it.
fn go_line(line: &str) -> Option<u32> {
    let trimmed = line.trim();
    let head = trimmed.get(..2)?;
    if !head.eq_ignore_ascii_case("go") {
        return None;
    }
    let rest = &trimmed[2..];
    if !rest.is_empty() && !rest.starts_with(char::is_whitespace) && !rest.starts_with("--") {
        return None;
    }
    let rest = rest.trim_start();
    let digits_end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (digits, tail) = rest.split_at(digits_end);
    let tail = tail.trim_start();
    if !tail.is_empty() && !tail.starts_with("--") {
        return None;
    }
    if digits.is_empty() {
        return Some(1);
    }
    Some(digits.parse::<u32>().ok().filter(|&n| n > 0).unwrap_or(1))
}

/// Advances the carry state over one line.
fn scan_line(line: &str, mut state: CarryState) -> CarryState {
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if let Some(close) = state.open_quote {
            if c == close {
                // A doubled closing character is an escape, not the end.
                if next == Some(close) {
                    i += 2;
                    continue;
                }
                state.open_quote = None;
            }
            i += 1;
            continue;
        }
        if state.comment_depth > 0 {
            if c == '*' && next == Some('/') {
                state.comment_depth -= 1;
                i += 2;
            } else if c == '/' && next == Some('*') {
                state.comment_depth += 1;
                i += 2;
            } else {
                i += 1;
            }
            continue;
        }
        match (c, next) {
            ('-', Some('-')) => break,
            ('/', Some('*')) => {
                state.comment_depth = 1;
                i += 2;
                continue;
            }
            ('\'', _) => state.open_quote = Some('\''),
            ('"', _) => state.open_quote = Some('"'),
            ('[', _) => state.open_quote = Some(']'),
            _ => {}
        }
        i += 1;
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_order_mark_is_not_part_of_the_first_batch() {
        let b = split_batches("\u{feff}SELECT 1\nGO\nSELECT 2");
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].text, "SELECT 1");
        let parsed = crate::parser::parse_batch(&b[0].text);
        assert!(parsed.is_ok(), "{parsed:?}");
    }

    #[test]
    fn splits_on_go_lines() {
        let b = split_batches("SELECT 1\nGO\nSELECT 2\ngo\n  SELECT 3");
        assert_eq!(b.len(), 3);
        assert_eq!(b[0].text, "SELECT 1");
        assert_eq!(b[0].first_line, 1);
        assert_eq!(b[1].text, "SELECT 2");
        assert_eq!(b[1].first_line, 3);
        assert_eq!(b[2].text, "  SELECT 3");
        assert_eq!(b[2].first_line, 5);
        assert!(b.iter().all(|x| x.repeat == 1));
    }

    #[test]
    fn go_with_count_and_comment() {
        let b =
            split_batches("INSERT t DEFAULT VALUES;\r\nGO 70000\r\nSELECT 1\r\n  Go  -- done\r\n");
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].repeat, 70000);
        assert_eq!(b[0].text, "INSERT t DEFAULT VALUES;");
        assert_eq!(b[1].repeat, 1);
        assert_eq!(b[1].text, "SELECT 1");
        assert_eq!(b[1].first_line, 3);
    }

    #[test]
    fn go_lookalikes_are_not_separators() {
        let b = split_batches("GOTO x\nGO;\nGO x\ngo 5 6\nSELECT 1 GO\n");
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].first_line, 1);
    }

    #[test]
    fn go_inside_comment_or_string_is_text() {
        let script = "/* a\nGO\n/* nested */\nGO\n*/ SELECT 'x\nGO\ny'\nGO\nSELECT [a\nGO\nb]\nGO";
        let b = split_batches(script);
        assert_eq!(b.len(), 2);
        assert!(b[0].text.contains("y'"));
        assert_eq!(b[1].first_line, 9);
        assert_eq!(b[1].text, "SELECT [a\nGO\nb]");
    }

    #[test]
    fn escaped_quotes_and_line_comments() {
        let b = split_batches("SELECT 'it''s' -- it's\nGO\nSELECT 2");
        assert_eq!(b.len(), 2);
    }

    #[test]
    fn empty_batches_are_dropped_and_lines_still_count() {
        let b = split_batches("GO\n\n  \nGO\n\nSELECT 1\nGO 0\n");
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].first_line, 5);
        assert_eq!(b[0].repeat, 1);
        assert!(split_batches("").is_empty());
    }
}
