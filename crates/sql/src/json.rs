//! JSON text as SQL Server's JSON functions read it: a parser of JSON text into a tree
//! that keeps each value's source text, SQL Server's JSON path expressions
//! (`[append] [lax | strict] $.key."quoted key"[0]`), and the scalar functions ISJSON,
//! JSON_VALUE, JSON_QUERY and JSON_MODIFY. OPENJSON's rows are built from the same tree (exec/table_functions.rs).
//!
//! Invariants:
//! 1. A document is an object or an array at its top level (RFC 4627, as ISJSON without
//!    a type constraint checks); anything else is Msg 13609 at the first character that
//!    breaks the grammar. Positions in 13609 and 13607 count characters from 0.
//! 2. A node's `text` is the exact slice of the input it was parsed from: JSON_QUERY,
//!    OPENJSON's `value` of an object or array and AS JSON columns return it unchanged,
//!    never a re-serialisation.
//! 3. Lax mode answers "nothing" (NULL, no rows) where strict mode raises 13608 (no such
//!    property), 13623 (not a scalar), 13624 (not an object or array) or 13625 (longer than
//!    JSON_VALUE's nvarchar(4000)). Invalid JSON text and an invalid path are errors in
//!    both modes.
//! 4. Not built, and refused with 40517 rather than answered: path wildcards (`$.*`,
//!    `[*]`), ISJSON's json_type_constraint; in JSON_MODIFY the root path `$`, appending
//!    NULL, appending to a value that is not an array, and a new value that may carry
//!    JSON_QUERY's result indirectly (exec/eval.rs decides which argument is JSON text).
//! 5. JSON_MODIFY edits the document's text in place: one range of it is replaced, the
//!    rest is returned byte for byte (invariant 2). By SQL Server's table: a value found
//!    is replaced; NULL deletes an object's key in lax mode (an array element becomes
//!    null, keeping its place) and writes null in strict mode; a key not found is added
//!    to its object in lax mode (`,"key":value` after the last member; nothing if the
//!    parent is missing or not an object) and is 13608 in strict mode; `append` adds to
//!    the end of the array at the path (lax: a missing key becomes `[value]`). The new
//!    value is a JSON string (quoted, FOR JSON's escapes) unless it is a number or bit
//!    (written as its digits, true or false) or JSON text from JSON_QUERY or JSON_MODIFY
//!    (written as it is). The separators written around an added member or element are
//!    this engine's choice (no spaces): SQL Server's exact whitespace is unverified.

use crate::messages::{msg, SqlError};
use crate::types::Value;

/// JSON_VALUE's result length in characters (nvarchar(4000)).
pub const JSON_VALUE_LENGTH: usize = 4000;

/// One parsed JSON value with the text it came from (invariant 2).
#[derive(Debug, Clone, PartialEq)]
pub struct Node<'a> {
    pub value: Json<'a>,
    pub text: &'a str,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Json<'a> {
    Null,
    Bool(bool),
    /// A number, kept as written (its text is the node's `text`).
    Number,
    /// A string with its escapes decoded.
    String(String),
    Array(Vec<Node<'a>>),
    /// Members in document order; a repeated key keeps every occurrence.
    Object(Vec<(String, Node<'a>)>),
}

impl Node<'_> {
    /// OPENJSON's `type` column: 0 null, 1 string, 2 number, 3 true/false, 4 array,
    /// 5 object.
    pub fn type_code(&self) -> i32 {
        match self.value {
            Json::Null => 0,
            Json::String(_) => 1,
            Json::Number => 2,
            Json::Bool(_) => 3,
            Json::Array(_) => 4,
            Json::Object(_) => 5,
        }
    }

    pub fn is_container(&self) -> bool {
        matches!(self.value, Json::Array(_) | Json::Object(_))
    }

    /// The value as text: a string decoded, a number or true/false as written, an object
    /// or array as its source text; None for null.
    pub fn as_text(&self) -> Option<String> {
        match &self.value {
            Json::Null => None,
            Json::String(s) => Some(s.clone()),
            _ => Some(self.text.to_string()),
        }
    }
}

/// Parses a JSON document (invariant 1).
pub fn parse(text: &str) -> Result<Node<'_>, SqlError> {
    let mut p = Parser { text, pos: 0 };
    p.skip_space();
    if !matches!(p.peek(), Some('{' | '[')) {
        return Err(p.unexpected());
    }
    let node = p.value()?;
    p.skip_space();
    if p.pos < text.len() {
        return Err(p.unexpected());
    }
    Ok(node)
}

/// A recursive-descent parser over the input's bytes; `pos` is a byte offset on a
/// character boundary.
struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    /// Msg 13609 at the current character (an empty one at the end of the text).
    fn unexpected(&self) -> SqlError {
        let ch = self.peek().map(String::from).unwrap_or_default();
        let at = self.text[..self.pos].chars().count();
        msg(13609, &[&ch, &at])
    }

    fn skip_space(&mut self) {
        while let Some(' ' | '\t' | '\n' | '\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            return true;
        }
        false
    }

    fn expect(&mut self, c: char) -> Result<(), SqlError> {
        match self.eat(c) {
            true => Ok(()),
            false => Err(self.unexpected()),
        }
    }

    fn value(&mut self) -> Result<Node<'a>, SqlError> {
        let start = self.pos;
        let value = match self.peek() {
            Some('{') => self.object()?,
            Some('[') => self.array()?,
            Some('"') => Json::String(self.string()?),
            Some('t') => self.word("true", Json::Bool(true))?,
            Some('f') => self.word("false", Json::Bool(false))?,
            Some('n') => self.word("null", Json::Null)?,
            Some('-' | '0'..='9') => self.number()?,
            _ => return Err(self.unexpected()),
        };
        Ok(Node {
            value,
            text: &self.text[start..self.pos],
        })
    }

    fn word(&mut self, word: &str, value: Json<'a>) -> Result<Json<'a>, SqlError> {
        for c in word.chars() {
            self.expect(c)?;
        }
        Ok(value)
    }

    fn digits(&mut self) -> Result<(), SqlError> {
        if !matches!(self.peek(), Some('0'..='9')) {
            return Err(self.unexpected());
        }
        while let Some('0'..='9') = self.peek() {
            self.pos += 1;
        }
        Ok(())
    }

    fn number(&mut self) -> Result<Json<'a>, SqlError> {
        self.eat('-');
        if !self.eat('0') {
            self.digits()?;
        }
        if self.eat('.') {
            self.digits()?;
        }
        if self.eat('e') || self.eat('E') {
            let _ = self.eat('+') || self.eat('-');
            self.digits()?;
        }
        Ok(Json::Number)
    }

    fn string(&mut self) -> Result<String, SqlError> {
        self.expect('"')?;
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.unexpected());
            };
            if c < ' ' {
                return Err(self.unexpected());
            }
            self.pos += c.len_utf8();
            match c {
                '"' => return Ok(out),
                '\\' => out.push(self.escape()?),
                c => out.push(c),
            }
        }
    }

    /// The character after a backslash; a \u surrogate pair makes one character.
    fn escape(&mut self) -> Result<char, SqlError> {
        let c = self.peek().ok_or_else(|| self.unexpected())?;
        let simple = match c {
            '"' => Some('"'),
            '\\' => Some('\\'),
            '/' => Some('/'),
            'b' => Some('\u{8}'),
            'f' => Some('\u{c}'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'u' => None,
            _ => return Err(self.unexpected()),
        };
        self.pos += 1;
        if let Some(s) = simple {
            return Ok(s);
        }
        let high = self.hex4()?;
        if (0xD800..0xDC00).contains(&high) && self.text[self.pos..].starts_with("\\u") {
            let back = self.pos;
            self.pos += 2;
            let low = self.hex4()?;
            if (0xDC00..0xE000).contains(&low) {
                let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                return Ok(char::from_u32(code).unwrap_or('\u{FFFD}'));
            }
            self.pos = back;
        }
        Ok(char::from_u32(high).unwrap_or('\u{FFFD}'))
    }

    fn hex4(&mut self) -> Result<u32, SqlError> {
        let mut n = 0;
        for _ in 0..4 {
            let d = self.peek().and_then(|c| c.to_digit(16));
            let d = d.ok_or_else(|| self.unexpected())?;
            n = n * 16 + d;
            self.pos += 1;
        }
        Ok(n)
    }

    fn array(&mut self) -> Result<Json<'a>, SqlError> {
        self.expect('[')?;
        let mut items = Vec::new();
        self.skip_space();
        if self.eat(']') {
            return Ok(Json::Array(items));
        }
        loop {
            self.skip_space();
            items.push(self.value()?);
            self.skip_space();
            if self.eat(']') {
                return Ok(Json::Array(items));
            }
            self.expect(',')?;
        }
    }

    fn object(&mut self) -> Result<Json<'a>, SqlError> {
        self.expect('{')?;
        let mut members = Vec::new();
        self.skip_space();
        if self.eat('}') {
            return Ok(Json::Object(members));
        }
        loop {
            self.skip_space();
            if self.peek() != Some('"') {
                return Err(self.unexpected());
            }
            let key = self.string()?;
            self.skip_space();
            self.expect(':')?;
            self.skip_space();
            members.push((key, self.value()?));
            self.skip_space();
            if self.eat('}') {
                return Ok(Json::Object(members));
            }
            self.expect(',')?;
        }
    }
}

/// A parsed JSON path: its mode and its steps from `$`.
#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    pub strict: bool,
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// Msg 13607 at character `at` of the path.
fn bad_path(chars: &[char], at: usize) -> SqlError {
    let ch = chars.get(at).map(|c| c.to_string()).unwrap_or_default();
    msg(13607, &[&ch, &at])
}

/// Parses `[lax | strict] $ (.key | ."key" | [n])*` (invariant 4 for wildcards).
pub fn parse_path(path: &str) -> Result<Path, SqlError> {
    Ok(parse_path_from(path, false)?.1)
}

/// `parse_path`, with JSON_MODIFY's leading `append` allowed when `append` is true;
/// returns whether it was there. Positions in 13607 count from the path's start.
fn parse_path_from(path: &str, append: bool) -> Result<(bool, Path), SqlError> {
    let chars: Vec<char> = path.chars().collect();
    let mut i = 0;
    let mut strict = false;
    let starts = |i: usize, w: &str| {
        let word: String = chars.iter().skip(i).take(w.len()).collect();
        word.eq_ignore_ascii_case(w)
    };
    let appends = append && starts(0, "append ");
    if appends {
        i = 7;
        while chars.get(i) == Some(&' ') {
            i += 1;
        }
    }
    if starts(i, "strict") {
        strict = true;
        i += 6;
    } else if starts(i, "lax") {
        i += 3;
    }
    while chars.get(i) == Some(&' ') {
        i += 1;
    }
    if chars.get(i) != Some(&'$') {
        return Err(bad_path(&chars, i));
    }
    i += 1;
    let mut steps = Vec::new();
    while i < chars.len() {
        let (step, next) = match chars[i] {
            '.' => path_key(&chars, i + 1)?,
            '[' => path_index(&chars, i + 1)?,
            _ => return Err(bad_path(&chars, i)),
        };
        steps.push(step);
        i = next;
    }
    Ok((appends, Path { strict, steps }))
}

/// A key after '.', quoted or not; returns the step and the index after it.
fn path_key(chars: &[char], mut i: usize) -> Result<(Step, usize), SqlError> {
    if chars.get(i) == Some(&'*') {
        return Err(msg(40517, &[&"JSON path wildcards"]));
    }
    if chars.get(i) == Some(&'"') {
        let mut key = String::new();
        i += 1;
        loop {
            match chars.get(i) {
                None => return Err(bad_path(chars, i)),
                Some('"') => return Ok((Step::Key(key), i + 1)),
                Some('\\') => {
                    let c = chars.get(i + 1).ok_or_else(|| bad_path(chars, i + 1))?;
                    key.push(*c);
                    i += 2;
                }
                Some(c) => {
                    key.push(*c);
                    i += 1;
                }
            }
        }
    }
    let start = i;
    while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$') {
        i += 1;
    }
    if i == start {
        return Err(bad_path(chars, i));
    }
    Ok((Step::Key(chars[start..i].iter().collect()), i))
}

/// An array index after '['; returns the step and the index after ']'.
fn path_index(chars: &[char], mut i: usize) -> Result<(Step, usize), SqlError> {
    if chars.get(i) == Some(&'*') {
        return Err(msg(40517, &[&"JSON path wildcards"]));
    }
    let start = i;
    while i < chars.len() && chars[i].is_ascii_digit() {
        i += 1;
    }
    if i == start {
        return Err(bad_path(chars, i));
    }
    let digits: String = chars[start..i].iter().collect();
    let n = digits.parse().map_err(|_| bad_path(chars, start))?;
    if chars.get(i) != Some(&']') {
        return Err(bad_path(chars, i));
    }
    Ok((Step::Index(n), i + 1))
}

impl Path {
    /// The node the path names in `root`, None when a step finds nothing.
    pub fn find<'n, 'a>(&self, root: &'n Node<'a>) -> Option<&'n Node<'a>> {
        let mut at = root;
        for step in &self.steps {
            at = match (step, &at.value) {
                (Step::Key(k), Json::Object(members)) => {
                    &members.iter().find(|(name, _)| name == k)?.1
                }
                (Step::Index(n), Json::Array(items)) => items.get(*n)?,
                _ => return None,
            };
        }
        Some(at)
    }

    /// `find`, with strict mode's 13608 for nothing found (invariant 3).
    pub fn lookup<'n, 'a>(&self, root: &'n Node<'a>) -> Result<Option<&'n Node<'a>>, SqlError> {
        match self.find(root) {
            None if self.strict => Err(msg(13608, &[])),
            found => Ok(found),
        }
    }
}

/// Text of a function argument, None for NULL.
fn text(v: &Value) -> Result<Option<String>, SqlError> {
    if v.is_null() {
        return Ok(None);
    }
    crate::convert::text_of(v, crate::convert::type_of(v), None).map(Some)
}

/// ISJSON(expression): 1 for a valid JSON object or array, 0 otherwise, NULL for NULL.
pub fn isjson(v: &Value) -> Result<Value, SqlError> {
    Ok(match text(v)? {
        None => Value::Null,
        Some(t) => Value::Int(parse(&t).is_ok() as i32),
    })
}

/// The document and path of JSON_VALUE and JSON_QUERY, None when the document is NULL.
fn document_and_path(args: &[Value]) -> Result<Option<(String, Path)>, SqlError> {
    let path = match args.get(1) {
        None => "$".to_string(),
        Some(p) => text(p)?.ok_or_else(|| msg(40517, &[&"a NULL JSON path"]))?,
    };
    let path = parse_path(&path)?;
    Ok(text(&args[0])?.map(|doc| (doc, path)))
}

/// JSON_VALUE(expression, path): the scalar at the path as nvarchar(4000).
pub fn json_value(args: &[Value]) -> Result<Value, SqlError> {
    let Some((doc, path)) = document_and_path(args)? else {
        return Ok(Value::Null);
    };
    let root = parse(&doc)?;
    let Some(node) = path.lookup(&root)? else {
        return Ok(Value::Null);
    };
    if node.is_container() {
        return match path.strict {
            true => Err(msg(13623, &[])),
            false => Ok(Value::Null),
        };
    }
    Ok(match node.as_text() {
        Some(t) if t.encode_utf16().count() > JSON_VALUE_LENGTH => match path.strict {
            true => return Err(msg(13625, &[])),
            false => Value::Null,
        },
        Some(t) => Value::Text(t),
        None => Value::Null,
    })
}

/// JSON_QUERY(expression [, path]): the object or array at the path, as written.
pub fn json_query(args: &[Value]) -> Result<Value, SqlError> {
    let Some((doc, path)) = document_and_path(args)? else {
        return Ok(Value::Null);
    };
    let root = parse(&doc)?;
    Ok(match path.lookup(&root)? {
        Some(node) if node.is_container() => Value::Text(node.text.to_string()),
        Some(_) if path.strict => return Err(msg(13624, &[])),
        _ => Value::Null,
    })
}

/// JSON_MODIFY's third argument as it goes into the document (invariant 5).
#[derive(Debug, Clone, PartialEq)]
pub enum NewValue {
    /// SQL NULL: lax mode deletes the key, strict mode writes `null`.
    Null,
    /// JSON text to write as it is (a JSON_QUERY or JSON_MODIFY result).
    Json(String),
    /// A scalar's JSON form: a number or true/false unquoted, a string quoted and escaped.
    Scalar(String),
}

impl NewValue {
    /// The new value from argument 3's value; `is_json` when the argument is a direct
    /// JSON_QUERY or JSON_MODIFY call. A type JSON_MODIFY does not take is Msg 8116.
    pub fn of(v: &Value, is_json: bool) -> Result<NewValue, SqlError> {
        use crate::convert::{data_type_name, text_of, type_of};
        Ok(match v {
            Value::Null => NewValue::Null,
            Value::Text(t) if is_json => {
                parse(t)?;
                NewValue::Json(t.clone())
            }
            Value::Text(t) => NewValue::Scalar(quoted(t)),
            Value::Bit(b) => NewValue::Scalar(b.to_string()),
            v if type_of(v).is_numeric() => NewValue::Scalar(text_of(v, type_of(v), None)?),
            // unverified: that SQL Server answers 8116 for a type JSON_MODIFY does not take.
            v => {
                let name = data_type_name(type_of(v));
                return Err(msg(8116, &[&name, &3, &"json_modify"]));
            }
        })
    }

    /// The JSON text written into the document; None for NULL.
    fn text(&self) -> Option<&str> {
        match self {
            NewValue::Null => None,
            NewValue::Json(t) | NewValue::Scalar(t) => Some(t),
        }
    }
}

/// `s` as a JSON string: quoted, with FOR JSON's escapes (`"` `\` `/` and the control
/// characters: \b \f \n \r \t by name, the others as \u00xx).
pub fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// JSON_MODIFY(expression, path, newValue): the document with the value at `path`
/// replaced, added, deleted or appended to (invariant 5); NULL for a NULL document.
pub fn json_modify(doc: &Value, path: &Value, new: &NewValue) -> Result<Value, SqlError> {
    let path = text(path)?.ok_or_else(|| msg(40517, &[&"a NULL JSON path"]))?;
    let (append, path) = parse_path_from(&path, true)?;
    let Some(doc) = text(doc)? else {
        return Ok(Value::Null);
    };
    let root = parse(&doc)?;
    let Some((last, parents)) = path.steps.split_last() else {
        return Err(msg(40517, &[&"JSON_MODIFY of the root path '$'"]));
    };
    let parent = Path {
        strict: path.strict,
        steps: parents.to_vec(),
    }
    .find(&root);
    let edit = match append {
        true => append_edit(&doc, parent, last, path.strict, new)?,
        false => set_edit(&doc, parent, last, path.strict, new)?,
    };
    Ok(Value::Text(match edit {
        None => doc.clone(),
        Some(e) => e.apply(&doc),
    }))
}

/// One change to a document's text: `range` (byte offsets) replaced by `text`.
struct Edit {
    range: std::ops::Range<usize>,
    text: String,
}

impl Edit {
    fn apply(self, doc: &str) -> String {
        assert!(self.range.start <= self.range.end && self.range.end <= doc.len());
        let mut out = String::with_capacity(doc.len() + self.text.len());
        out.push_str(&doc[..self.range.start]);
        out.push_str(&self.text);
        out.push_str(&doc[self.range.end..]);
        out
    }

    fn insert(at: usize, text: String) -> Edit {
        Edit {
            range: at..at,
            text,
        }
    }
}

/// Where `node`'s text starts in `doc`, whose slice it is (invariant 2).
fn offset(doc: &str, node: &Node<'_>) -> usize {
    let at = (node.text.as_ptr() as usize).wrapping_sub(doc.as_ptr() as usize);
    assert!(
        at + node.text.len() <= doc.len(),
        "a node's text is a slice of its document"
    );
    at
}

fn end_of(doc: &str, node: &Node<'_>) -> usize {
    offset(doc, node) + node.text.len()
}

/// The child of `parent` that `step` names.
fn child<'n, 'a>(parent: &'n Node<'a>, step: &Step) -> Option<(usize, &'n Node<'a>)> {
    match (step, &parent.value) {
        (Step::Key(k), Json::Object(m)) => m.iter().position(|(n, _)| n == k).map(|i| (i, &m[i].1)),
        (Step::Index(n), Json::Array(items)) => items.get(*n).map(|v| (*n, v)),
        _ => None,
    }
}

/// JSON_MODIFY without `append`: SQL Server's table of lax and strict mode.
fn set_edit(
    doc: &str,
    parent: Option<&Node<'_>>,
    last: &Step,
    strict: bool,
    new: &NewValue,
) -> Result<Option<Edit>, SqlError> {
    let found = parent.and_then(|p| child(p, last).map(|(i, n)| (p, i, n)));
    let Some((parent, i, node)) = found else {
        if strict {
            return Err(msg(13608, &[]));
        }
        // Lax: a key is added to an object that exists; anything else changes nothing.
        return Ok(match (parent, last, new.text()) {
            (Some(p), Step::Key(k), Some(v)) => add_member(doc, p, k, v),
            _ => None,
        });
    };
    let range = offset(doc, node)..end_of(doc, node);
    Ok(Some(match (new.text(), strict, &parent.value) {
        (Some(v), _, _) => Edit {
            range,
            text: v.to_string(),
        },
        (None, false, Json::Object(members)) => delete_member(doc, parent, members, i),
        // Strict mode's NULL, and lax mode's for an array element (its place stays).
        (None, _, _) => Edit {
            range,
            text: "null".into(),
        },
    }))
}

/// `,"key":value` after an object's last member (or alone in an empty one).
fn add_member(doc: &str, object: &Node<'_>, key: &str, value: &str) -> Option<Edit> {
    let Json::Object(members) = &object.value else {
        return None;
    };
    let member = format!("{}:{value}", quoted(key));
    Some(match members.last() {
        Some((_, last)) => Edit::insert(end_of(doc, last), format!(",{member}")),
        None => Edit::insert(end_of(doc, object) - 1, member),
    })
}

/// Member `i` of `object` removed with the comma that joined it to a neighbour.
fn delete_member(doc: &str, object: &Node<'_>, members: &[(String, Node<'_>)], i: usize) -> Edit {
    let end = end_of(doc, &members[i].1);
    if i > 0 {
        return Edit {
            range: end_of(doc, &members[i - 1].1)..end,
            text: String::new(),
        };
    }
    let first_key = offset(doc, object) + 1;
    let to = match members.get(1) {
        // The next key starts at the first quote after the comma.
        Some(_) => end + doc[end..].find('"').expect("a member follows"),
        None => end_of(doc, object) - 1,
    };
    Edit {
        range: first_key..to,
        text: String::new(),
    }
}

/// JSON_MODIFY with `append`: the value added at the end of the array at the path; in
/// lax mode a missing key of an existing object becomes a one-element array.
fn append_edit(
    doc: &str,
    parent: Option<&Node<'_>>,
    last: &Step,
    strict: bool,
    new: &NewValue,
) -> Result<Option<Edit>, SqlError> {
    let Some(value) = new.text() else {
        return Err(msg(40517, &[&"JSON_MODIFY appending NULL"]));
    };
    match parent.and_then(|p| child(p, last)) {
        Some((_, node)) => {
            let Json::Array(items) = &node.value else {
                return Err(msg(
                    40517,
                    &[&"JSON_MODIFY appending to a value not an array"],
                ));
            };
            Ok(Some(match items.last() {
                Some(l) => Edit::insert(end_of(doc, l), format!(",{value}")),
                None => Edit::insert(end_of(doc, node) - 1, value.to_string()),
            }))
        }
        None if strict => Err(msg(13608, &[])),
        None => Ok(match (parent, last) {
            (Some(p), Step::Key(k)) => add_member(doc, p, k, &format!("[{value}]")),
            _ => None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(r: Result<Node<'_>, SqlError>) -> (i32, String) {
        let e = r.expect_err("invalid JSON");
        (e.number, e.text)
    }

    #[test]
    fn parses_values_and_keeps_source_text() {
        let doc = r#" {"a": [1, -2.5e3, "x\ty"], "b": {"c": null}, "d": true} "#;
        let root = parse(doc).unwrap();
        let Json::Object(m) = &root.value else {
            panic!("object")
        };
        assert_eq!(m[0].0, "a");
        assert_eq!(m[0].1.text, r#"[1, -2.5e3, "x\ty"]"#);
        assert_eq!(m[0].1.type_code(), 4);
        let Json::Array(items) = &m[0].1.value else {
            panic!("array")
        };
        assert_eq!(items[1].as_text().as_deref(), Some("-2.5e3"));
        assert_eq!(items[2].as_text().as_deref(), Some("x\ty"));
        assert_eq!(m[1].1.text, r#"{"c": null}"#);
        assert_eq!(m[2].1.as_text().as_deref(), Some("true"));
        assert_eq!(m[2].1.type_code(), 3);
    }

    #[test]
    fn decodes_unicode_escapes_and_surrogate_pairs() {
        let root = parse(r#"["\u00e9\ud83d\ude00\/"]"#).unwrap();
        let Json::Array(items) = &root.value else {
            panic!("array")
        };
        assert_eq!(items[0].as_text().as_deref(), Some("é😀/"));
    }

    #[test]
    fn invalid_text_is_13609_at_the_character() {
        let text = |c: &str, at: usize| {
            format!("JSON text is not properly formatted. Unexpected character '{c}' is found at position {at}.")
        };
        assert_eq!(err(parse("NULL")), (13609, text("N", 0)));
        assert_eq!(err(parse(r#"{"a":1,}"#)), (13609, text("}", 7)));
        assert_eq!(err(parse(r#"{"é":tru}"#)), (13609, text("}", 8)));
        assert_eq!(err(parse("[1] x")), (13609, text("x", 4)));
        assert_eq!(err(parse("[01]")), (13609, text("1", 2)));
        assert_eq!(err(parse("42")), (13609, text("4", 0)));
        assert_eq!(err(parse("[1,")).0, 13609);
        assert_eq!(err(parse("[\"a\nb\"]")).0, 13609);
    }

    #[test]
    fn paths_parse_modes_keys_and_indexes() {
        let p = parse_path(r#"strict $.a."b c"[2].d"#).unwrap();
        assert!(p.strict);
        assert_eq!(
            p.steps,
            vec![
                Step::Key("a".into()),
                Step::Key("b c".into()),
                Step::Index(2),
                Step::Key("d".into())
            ]
        );
        assert!(!parse_path("lax$").unwrap().strict);
        assert!(parse_path("$").unwrap().steps.is_empty());
    }

    #[test]
    fn bad_paths_are_13607_and_wildcards_40517() {
        let e = parse_path("a.b").unwrap_err();
        assert_eq!(e.number, 13607);
        assert_eq!(
            e.text,
            "JSON path is not properly formatted. Unexpected character 'a' is found at position 0."
        );
        assert_eq!(parse_path("$.").unwrap_err().number, 13607);
        assert_eq!(parse_path("$[x]").unwrap_err().number, 13607);
        assert_eq!(parse_path("$.a b").unwrap_err().number, 13607);
        assert_eq!(parse_path("$[*]").unwrap_err().number, 40517);
        assert_eq!(parse_path("$.*").unwrap_err().number, 40517);
    }

    #[test]
    fn lookup_in_lax_and_strict_modes() {
        let root = parse(r#"{"a":[10,{"b":"x"}]}"#).unwrap();
        let find = |p: &str| {
            parse_path(p)
                .unwrap()
                .lookup(&root)
                .map(|n| n.map(|n| n.text))
        };
        assert_eq!(find("$.a[1].b").unwrap(), Some(r#""x""#));
        assert_eq!(find("$.a[5]").unwrap(), None);
        assert_eq!(find("$.a.b").unwrap(), None);
        assert_eq!(find("strict $.z").unwrap_err().number, 13608);
    }

    #[test]
    fn scalar_functions() {
        let t = |s: &str| Value::Text(s.into());
        let doc = t(r#"{"n":1.50,"s":"hi","o":{"k":[1]},"z":null}"#);
        assert_eq!(isjson(&doc).unwrap(), Value::Int(1));
        assert_eq!(isjson(&t("nope")).unwrap(), Value::Int(0));
        assert_eq!(isjson(&Value::Null).unwrap(), Value::Null);
        let value = |p: &str| json_value(&[doc.clone(), t(p)]);
        assert_eq!(value("$.n").unwrap(), t("1.50"));
        assert_eq!(value("$.s").unwrap(), t("hi"));
        assert_eq!(value("$.o").unwrap(), Value::Null);
        assert_eq!(value("$.z").unwrap(), Value::Null);
        assert_eq!(value("strict $.o").unwrap_err().number, 13623);
        let query = |p: &str| json_query(&[doc.clone(), t(p)]);
        assert_eq!(query("$.o").unwrap(), t(r#"{"k":[1]}"#));
        assert_eq!(query("$.s").unwrap(), Value::Null);
        assert_eq!(query("strict $.s").unwrap_err().number, 13624);
        assert_eq!(json_query(std::slice::from_ref(&doc)).unwrap(), doc);
        let long = t(&format!(r#"["{}"]"#, "x".repeat(4001)));
        assert_eq!(json_value(&[long.clone(), t("$[0]")]).unwrap(), Value::Null);
        let e = json_value(&[long, t("strict $[0]")]).unwrap_err();
        assert_eq!(e.number, 13625);
    }

    /// JSON_MODIFY of `doc` at `path` with a scalar `new` (a string, or SQL NULL).
    fn modify(doc: &str, path: &str, new: &NewValue) -> Result<String, SqlError> {
        let t = |s: &str| Value::Text(s.into());
        match json_modify(&t(doc), &t(path), new)? {
            Value::Text(s) => Ok(s),
            v => panic!("not text: {v:?}"),
        }
    }

    fn string(s: &str) -> NewValue {
        NewValue::of(&Value::Text(s.into()), false).unwrap()
    }

    fn json(s: &str) -> NewValue {
        NewValue::of(&Value::Text(s.into()), true).unwrap()
    }

    /// An existing value is replaced in place, the rest of the text kept byte for byte
    /// (spaces too), in both modes; nested keys and array elements alike.
    #[test]
    fn modify_replaces_a_value_in_place() {
        let doc = r#"{ "a" : 1, "b": {"c": [10, 20, {"d": "x"}]} }"#;
        let want = r#"{ "a" : "new", "b": {"c": [10, 20, {"d": "x"}]} }"#;
        assert_eq!(modify(doc, "$.a", &string("new")).unwrap(), want);
        assert_eq!(modify(doc, "strict $.a", &string("new")).unwrap(), want);
        let want = r#"{ "a" : 1, "b": {"c": [10, "y", {"d": "x"}]} }"#;
        assert_eq!(modify(doc, "$.b.c[1]", &string("y")).unwrap(), want);
        let want = r#"{ "a" : 1, "b": {"c": [10, 20, {"d": 7}]} }"#;
        let seven = NewValue::of(&Value::Int(7), false).unwrap();
        assert_eq!(modify(doc, "lax $.b.c[2].d", &seven).unwrap(), want);
        let quoted_key = modify(r#"{"a b":1}"#, r#"$."a b""#, &seven).unwrap();
        assert_eq!(quoted_key, r#"{"a b":7}"#);
    }

    /// Strings are quoted with FOR JSON's escapes; numbers, decimals and bits go in
    /// unquoted; JSON text from JSON_QUERY goes in as it is (and must be JSON); other
    /// types are 8116.
    #[test]
    fn new_values_by_type_and_escaping() {
        let s = string("q\"b\\s/\u{8}\u{c}\n\r\t\u{1}\u{1f}é");
        let want = r#""q\"b\\s\/\b\f\n\r\t\u0001\u001fé""#;
        assert_eq!(s, NewValue::Scalar(want.into()));
        let of = |v: Value| NewValue::of(&v, false).unwrap();
        assert_eq!(of(Value::BigInt(-5)), NewValue::Scalar("-5".into()));
        let dec = Value::Decimal {
            unscaled: 4999,
            scale: 2,
        };
        assert_eq!(of(dec), NewValue::Scalar("49.99".into()));
        assert_eq!(of(Value::Bit(true)), NewValue::Scalar("true".into()));
        assert_eq!(of(Value::Bit(false)), NewValue::Scalar("false".into()));
        assert_eq!(of(Value::Float(1.5)), NewValue::Scalar("1.5".into()));
        assert_eq!(of(Value::Null), NewValue::Null);
        assert_eq!(json("[1, 2]"), NewValue::Json("[1, 2]".into()));
        assert_eq!(string("[1, 2]"), NewValue::Scalar(r#""[1, 2]""#.into()));
        let bad = NewValue::of(&Value::Text("{nope".into()), true).unwrap_err();
        assert_eq!(bad.number, 13609);
        let e = NewValue::of(&Value::DateTime(0), false).unwrap_err();
        assert_eq!(e.number, 8116);
        assert!(
            e.text.contains("datetime") && e.text.contains("json_modify"),
            "{}",
            e.text
        );
        let doc = r#"{"a":1}"#;
        assert_eq!(
            modify(doc, "$.a", &json(r#"{"k":[1]}"#)).unwrap(),
            r#"{"a":{"k":[1]}}"#
        );
        assert_eq!(
            modify(doc, "$.a", &string("x\"y")).unwrap(),
            r#"{"a":"x\"y"}"#
        );
    }

    /// A missing key: lax mode adds it to its object (empty or not, nested too) and
    /// changes nothing where the parent is missing or not an object, or for an array
    /// index past the end; strict mode is 13608.
    #[test]
    fn modify_adds_missing_keys_in_lax_mode_only() {
        let doc = r#"{"a":1,"o":{},"arr":[1]}"#;
        let x = string("x");
        assert_eq!(
            modify(doc, "$.n", &x).unwrap(),
            r#"{"a":1,"o":{},"arr":[1],"n":"x"}"#
        );
        assert_eq!(
            modify(doc, "$.o.k", &x).unwrap(),
            r#"{"a":1,"o":{"k":"x"},"arr":[1]}"#
        );
        for unchanged in ["$.p.q", "$.a.b", "$.arr[5]", "$.arr.k"] {
            assert_eq!(modify(doc, unchanged, &x).unwrap(), doc, "{unchanged}");
        }
        for path in ["strict $.n", "strict $.p.q", "strict $.arr[5]"] {
            assert_eq!(modify(doc, path, &x).unwrap_err().number, 13608, "{path}");
        }
        assert_eq!(modify("[]", "$[0]", &x).unwrap(), "[]");
    }

    /// NULL: lax mode deletes an object's key (first, middle, last or only member, with
    /// its comma) and leaves a missing key alone; an array element becomes null in place;
    /// strict mode writes null, or 13608 when the key is missing.
    #[test]
    fn null_deletes_in_lax_mode_and_writes_null_in_strict() {
        let null = NewValue::Null;
        let doc = r#"{"a": 1, "b": 2, "c": 3}"#;
        assert_eq!(modify(doc, "$.a", &null).unwrap(), r#"{"b": 2, "c": 3}"#);
        assert_eq!(modify(doc, "$.b", &null).unwrap(), r#"{"a": 1, "c": 3}"#);
        assert_eq!(modify(doc, "$.c", &null).unwrap(), r#"{"a": 1, "b": 2}"#);
        assert_eq!(modify(r#"{ "a": {"x":1} }"#, "$.a", &null).unwrap(), "{}");
        assert_eq!(modify(doc, "$.z", &null).unwrap(), doc);
        assert_eq!(
            modify(r#"{"k":[1,2,3]}"#, "$.k[1]", &null).unwrap(),
            r#"{"k":[1,null,3]}"#
        );
        let strict = modify(doc, "strict $.b", &null).unwrap();
        assert_eq!(strict, r#"{"a": 1, "b": null, "c": 3}"#);
        assert_eq!(modify(doc, "strict $.z", &null).unwrap_err().number, 13608);
        let deleted = modify(doc, "$.b", &null).unwrap();
        let parsed = parse(&deleted).unwrap();
        assert!(matches!(parsed.value, Json::Object(m) if m.len() == 2));
    }

    /// append adds at the end of the array at the path (empty too, nested too, JSON text
    /// as it is); lax mode makes a missing key a one-element array, strict mode is 13608;
    /// appending NULL or to a non-array is refused (40517).
    #[test]
    fn append_adds_to_arrays() {
        let doc = r#"{"s":["C#","SQL"],"e":[],"n":{"m":[[1]]},"v":5}"#;
        let az = string("Azure");
        let got = modify(doc, "append $.s", &az).unwrap();
        assert!(
            got.starts_with(r#"{"s":["C#","SQL","Azure"],"e":[]"#),
            "{got}"
        );
        assert!(modify(doc, "append strict $.e", &az)
            .unwrap()
            .contains(r#""e":["Azure"]"#));
        let got = modify(doc, "APPEND $.n.m[0]", &json("[2]")).unwrap();
        assert!(got.contains(r#""m":[[1,[2]]]"#), "{got}");
        let got = modify(doc, "append lax $.new", &az).unwrap();
        assert!(got.ends_with(r#""v":5,"new":["Azure"]}"#), "{got}");
        assert_eq!(
            modify(doc, "append strict $.new", &az).unwrap_err().number,
            13608
        );
        assert_eq!(modify(doc, "append $.v", &az).unwrap_err().number, 40517);
        assert_eq!(
            modify(doc, "append $.s", &NewValue::Null)
                .unwrap_err()
                .number,
            40517
        );
        assert_eq!(
            modify(r#"[[0]]"#, "append $[0]", &az).unwrap(),
            r#"[[0,"Azure"]]"#
        );
    }

    /// NULL document: NULL. Invalid JSON: 13609. A bad path (append outside JSON_MODIFY
    /// too): 13607 at the character; a NULL path and the root path: 40517.
    #[test]
    fn modify_null_inputs_and_errors() {
        let t = |s: &str| Value::Text(s.into());
        let x = string("x");
        assert_eq!(
            json_modify(&Value::Null, &t("$.a"), &x).unwrap(),
            Value::Null
        );
        assert_eq!(modify("{\"a\":", "$.a", &x).unwrap_err().number, 13609);
        assert_eq!(modify("nope", "$.a", &x).unwrap_err().number, 13609);
        let e = modify("{}", "append a", &x).unwrap_err();
        assert_eq!(
            (e.number, e.text.contains("position 7")),
            (13607, true),
            "{}",
            e.text
        );
        assert_eq!(modify("{}", "$.", &x).unwrap_err().number, 13607);
        assert_eq!(parse_path("append $.a").unwrap_err().number, 13607);
        let e = json_modify(&t("{}"), &Value::Null, &x).unwrap_err();
        assert_eq!(e.number, 40517);
        assert_eq!(modify("{}", "$", &x).unwrap_err().number, 40517);
    }
}
