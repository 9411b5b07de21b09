//! Parse cost per statement: extentdb's `parse_batch` (lexer and parser) against
//! sqlparser's `Parser::parse_sql` with `MsSqlDialect` (tokenizer and parser), on the same
//! texts, interleaved rounds, in-process. A statement one parser refuses is timed for the
//! other alone and marked as not comparable.

use serde_json::{json, Value};
use sqlparser::dialect::MsSqlDialect;
use sqlparser::parser::Parser;

use crate::statements;
use crate::timing::{interleaved, iterations_for};

const ROUNDS: usize = 31;
const ROUND_MS: f64 = 20.0;

fn ours(text: &str) -> Result<usize, String> {
    extentdb_sql::parser::parse_batch(text)
        .map(|s| s.len())
        .map_err(|e| format!("Msg {}: {}", e.number, e.text))
}

fn theirs(text: &str) -> Result<usize, String> {
    Parser::parse_sql(&MsSqlDialect {}, text)
        .map(|s| s.len())
        .map_err(|e| e.to_string())
}

pub fn run() -> Value {
    let mut out = Vec::new();
    println!("== parse cost per statement (in-process, median of {ROUNDS} interleaved rounds) ==");
    for st in statements::all() {
        out.push(measure(st.name, &st.text));
    }
    json!({ "rounds": ROUNDS, "round_target_ms": ROUND_MS, "statements": out })
}

fn measure(name: &str, text: &str) -> Value {
    let (a, b) = (ours(text), theirs(text));
    let text = text.to_string();
    let mut run_ours = || ours(&text).ok();
    let mut run_theirs = || theirs(&text).ok();
    let iterations = iterations_for(ROUND_MS, || {
        run_theirs();
    })
    .min(iterations_for(ROUND_MS, || {
        run_ours();
    }));
    let figures = match (&a, &b) {
        (Ok(_), Ok(_)) => {
            let f = interleaved(ROUNDS, iterations, &mut [&mut run_ours, &mut run_theirs]);
            vec![Some(f[0].clone()), Some(f[1].clone())]
        }
        (Ok(_), Err(_)) => vec![
            Some(interleaved(ROUNDS, iterations, &mut [&mut run_ours])[0].clone()),
            None,
        ],
        (Err(_), Ok(_)) => vec![
            None,
            Some(interleaved(ROUNDS, iterations, &mut [&mut run_theirs])[0].clone()),
        ],
        (Err(_), Err(_)) => vec![None, None],
    };
    let show = |f: &Option<crate::timing::Figure>| {
        f.as_ref()
            .map_or("refused".to_string(), |f| format!("{:.2} us", f.median_us))
    };
    let ratio = match (&figures[0], &figures[1]) {
        (Some(x), Some(y)) => Some(y.median_us / x.median_us),
        _ => None,
    };
    println!(
        "{name:<20} {:>6} bytes  extentdb {:>12}  sqlparser {:>12}  sqlparser/extentdb {}",
        text.len(),
        show(&figures[0]),
        show(&figures[1]),
        ratio.map_or("n/a (one refuses)".to_string(), |r| format!("{r:.2}"))
    );
    json!({
        "name": name,
        "text_bytes": text.len(),
        "text": if text.len() > 600 { format!("{}...", &text[..200]) } else { text.clone() },
        "extentdb": { "parsed": a.is_ok(), "error": a.err(), "figure": figures[0].as_ref().map(|f| f.json()) },
        "sqlparser_mssql": { "parsed": b.is_ok(), "error": b.err(), "figure": figures[1].as_ref().map(|f| f.json()) },
        "ratio_sqlparser_to_extentdb": ratio,
        "comparable": ratio.is_some(),
    })
}
