//! Parse coverage: the corpus's batches (split at GO lines by extentdb's own sqlcmd
//! splitter, which both parsers then see alike), the T-SQL constructs of
//! `constructs.rs`, and what each parser's syntax errors tell (SQL Server's Msg 102 / 156 /
//! 105 with a line number).

use std::path::Path;

use serde_json::{json, Value};
use sqlparser::ast::Spanned;
use sqlparser::dialect::MsSqlDialect;
use sqlparser::parser::{Parser, ParserOptions};

use crate::constructs::CONSTRUCTS;

/// sqlparser as T-SQL needs it: statements need no `;` between them.
fn sqlparser_tsql(text: &str) -> Result<Vec<sqlparser::ast::Statement>, String> {
    let options = ParserOptions::new().with_unescape(true);
    let options = ParserOptions {
        require_semicolon_stmt_delimiter: false,
        ..options
    };
    Parser::new(&MsSqlDialect {})
        .with_options(options)
        .try_with_sql(text)
        .and_then(|mut p| p.parse_statements())
        .map_err(|e| e.to_string())
}

fn sqlparser_default(text: &str) -> Result<Vec<sqlparser::ast::Statement>, String> {
    Parser::parse_sql(&MsSqlDialect {}, text).map_err(|e| e.to_string())
}

fn ours(text: &str) -> Result<usize, String> {
    extentdb_sql::parser::parse_batch(text)
        .map(|s| s.len())
        .map_err(|e| format!("Msg {}, Line {}: {}", e.number, e.line, e.text))
}

pub fn run(corpus: &[(String, std::path::PathBuf)]) -> Value {
    json!({
        "corpus": corpus_counts(corpus),
        "constructs": constructs(),
        "syntax_errors": syntax_errors(),
        "statement_spans": spans(),
    })
}

fn corpus_counts(corpus: &[(String, std::path::PathBuf)]) -> Value {
    println!("== parse coverage over the corpus (batches split at GO lines) ==");
    let mut files = Vec::new();
    for (label, path) in corpus {
        files.push(one_file(label, path));
    }
    json!(files)
}

fn one_file(label: &str, path: &Path) -> Value {
    let raw = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // sqlcmd reads a file's byte-order mark as its encoding, not as text: so do we here.
    let text = raw.strip_prefix('\u{feff}').unwrap_or(&raw);
    let batches = extentdb_sql::script::split_batches(text);
    let (mut a, mut b, mut c) = (0usize, 0usize, 0usize);
    let mut refused = Vec::new();
    for batch in &batches {
        let (x, y, z) = (
            ours(&batch.text),
            sqlparser_default(&batch.text),
            sqlparser_tsql(&batch.text),
        );
        a += x.is_ok() as usize;
        b += y.is_ok() as usize;
        c += z.is_ok() as usize;
        refused.push(json!({
            "first_line": batch.first_line,
            "bytes": batch.text.len(),
            "extentdb": x.err(),
            "sqlparser_mssql": y.err().map(|e| e.chars().take(160).collect::<String>()),
            "sqlparser_mssql_no_semicolons": z.err().map(|e| e.chars().take(160).collect::<String>()),
        }));
    }
    println!(
        "{label:<34} batches {:>4}  extentdb {:>4}  sqlparser {:>4}  sqlparser(no ; needed) {:>4}",
        batches.len(),
        a,
        b,
        c
    );
    json!({
        "file": label,
        "bytes": text.len(),
        "byte_order_mark_stripped": raw.len() != text.len(),
        "batches": batches.len(),
        "accepted": { "extentdb": a, "sqlparser_mssql": b, "sqlparser_mssql_no_semicolons": c },
        "per_batch": refused,
    })
}

fn constructs() -> Value {
    println!("== T-SQL constructs ==");
    let mut out = Vec::new();
    for k in CONSTRUCTS {
        let a = ours(k.text);
        let b = sqlparser_tsql(k.text);
        let printed = b.as_ref().ok().map(|s| {
            s.iter()
                .map(|st| st.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        });
        let preserved = printed
            .as_ref()
            .map(|p| p.to_uppercase().contains(k.marker));
        println!(
            "{:<30} extentdb {:<9} sqlparser {:<9} marker {:?} kept: {}",
            k.name,
            if a.is_ok() { "parses" } else { "refuses" },
            if b.is_ok() { "parses" } else { "refuses" },
            k.marker,
            preserved.map_or("-".to_string(), |p| p.to_string())
        );
        out.push(json!({
            "name": k.name,
            "text": k.text,
            "extentdb": { "parsed": a.is_ok(), "error": a.err() },
            "sqlparser_mssql": {
                "parsed": b.is_ok(),
                "error": b.as_ref().err(),
                "printed": printed,
                "marker": k.marker,
                "marker_kept_in_ast": preserved,
            },
        }));
    }
    json!(out)
}

/// Texts with one syntax error each and what SQL Server answers (Msg, line, text).
const SYNTAX_ERRORS: &[(&str, &str, i32, u32, &str)] = &[
    (
        "double_operator",
        "SELECT x\nFROM kv\nWHERE k = = 1",
        102,
        3,
        "Incorrect syntax near '='.",
    ),
    (
        "keyword_where_expression",
        "SELECT x\nFROM kv\nWHERE FROM",
        156,
        3,
        "Incorrect syntax near the keyword 'FROM'.",
    ),
    (
        "unclosed_quote",
        "SELECT 1;\nSELECT 'abc",
        105,
        2,
        "Unclosed quotation mark after the character string 'abc'.",
    ),
    (
        "missing_paren",
        "SELECT x FROM kv\nWHERE k IN (1, 2",
        102,
        2,
        "Incorrect syntax near '2'.",
    ),
];

fn syntax_errors() -> Value {
    println!("== syntax errors: SQL Server's message against each parser's ==");
    let mut out = Vec::new();
    for (name, text, number, line, message) in SYNTAX_ERRORS {
        let ours = extentdb_sql::parser::parse_batch(text).err();
        // A text sqlparser accepts is shown as it printed it back.
        let theirs = match sqlparser_tsql(text) {
            Ok(s) => format!(
                "accepted as: {}",
                s.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Err(e) => e,
        };
        let ours_matches = ours
            .as_ref()
            .is_some_and(|e| e.number == *number && e.line == *line && e.text == *message);
        println!("{name:<26} SQL Server: Msg {number}, Line {line}: {message}");
        println!(
            "{:<26} extentdb:   {}",
            "",
            ours.as_ref().map_or("(parsed)".to_string(), |e| format!(
                "Msg {}, Line {}: {}",
                e.number, e.line, e.text
            ))
        );
        println!("{:<26} sqlparser:  {theirs}", "");
        out.push(json!({
            "name": name,
            "text": text,
            "sql_server": { "number": number, "line": line, "text": message },
            "extentdb": ours.as_ref().map(|e| json!({"number": e.number, "line": e.line, "text": e.text})),
            "extentdb_matches_sql_server": ours_matches,
            "sqlparser_mssql": theirs,
        }));
    }
    json!(out)
}

/// Whether sqlparser's AST carries source positions (`Spanned`): the line a runtime error
/// of a statement is reported at (Msg 245's "Line N") comes from there.
fn spans() -> Value {
    let text =
        "SET NOCOUNT ON;\n\nSELECT x\n  FROM kv WHERE k = @p1;\nUPDATE kv SET x = 1 WHERE k = 2;";
    let parsed = sqlparser_tsql(text).unwrap_or_default();
    let spans: Vec<Value> = parsed
        .iter()
        .map(|s| {
            let span = s.span();
            json!({ "statement": s.to_string(), "start_line": span.start.line, "start_column": span.start.column,
                    "end_line": span.end.line })
        })
        .collect();
    println!(
        "== statement spans (sqlparser) ==\n{}",
        serde_json::to_string(&spans).unwrap_or_default()
    );
    json!({ "text": text, "spans": spans })
}
