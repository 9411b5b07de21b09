//! Issue 22's measured decision: build the query processor by extending extentdb's
//! hand-written parser and executor, or adopt sqlparser-rs (MsSqlDialect) and DataFusion.
//! Prints every figure and writes them to `bench/results/<date>-<host>-qp-choice.json`.
//! Every time here is in-process (no network, no TDS); docs/ARCHITECTURE.md, "Query
//! processor: build or adopt", reads them.
//!
//! Usage: `nice -n 19 cargo run --release --manifest-path bench/qp_choice/Cargo.toml --
//! [--host vm] [--only parse,coverage,datafusion,semantics]`

mod constructs;
mod coverage;
#[cfg(feature = "datafusion")]
mod df_cost;
#[cfg(feature = "datafusion")]
mod df_tables;
#[cfg(feature = "datafusion")]
mod engine;
#[cfg(feature = "datafusion")]
mod engine_cost;
mod parse_cost;
#[cfg(feature = "datafusion")]
mod semantics;
mod statements;
mod timing;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

const PARTS: &[&str] = &["parse", "coverage", "datafusion", "engine", "semantics"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let host = flag(&args, "--host").unwrap_or_else(|| "vm".to_string());
    let only: Vec<String> = flag(&args, "--only")
        .map(|s| s.split(',').map(str::to_string).collect())
        .unwrap_or_else(|| PARTS.iter().map(|s| s.to_string()).collect());
    let root = repo_root();
    let started = std::time::Instant::now();
    let load_before = load_average();
    let mut parts = serde_json::Map::new();
    let wants = |p: &str| only.iter().any(|o| o == p);
    if wants("parse") {
        parts.insert("parse_cost".into(), parse_cost::run());
    }
    if wants("coverage") {
        parts.insert("parse_coverage".into(), coverage::run(&corpus(&root)));
    }
    #[cfg(feature = "datafusion")]
    datafusion_parts(&wants, &mut parts);
    #[cfg(not(feature = "datafusion"))]
    if wants("datafusion") || wants("engine") || wants("semantics") {
        println!("built without DataFusion: its parts are skipped");
        parts.insert(
            "skipped".into(),
            json!("built without the datafusion feature"),
        );
    }
    let date = command_output("date", &["-u", "+%F"]);
    let path = root
        .join("bench/results")
        .join(format!("{date}-{host}-qp-choice.json"));
    let run = json!({
        "parts": parts.keys().cloned().collect::<Vec<_>>(),
        "date": command_output("date", &["-u", "+%FT%T"]),
        "command": format!("nice -n 19 cargo run --release --manifest-path bench/qp_choice/Cargo.toml -- {}", args.join(" ")).trim_end().to_string(),
        "commit": command_output("git", &["-C", root.to_str().unwrap_or("."), "rev-parse", "--short", "HEAD"]),
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "elapsed_s": started.elapsed().as_secs_f64(),
    });
    let report = merge(&path, &host, run, parts);
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&report).expect("json") + "\n",
    )
    .expect("write results");
    println!("wrote {}", path.display());
}

/// The parts that need DataFusion (and extentdb's engine beside it).
#[cfg(feature = "datafusion")]
fn datafusion_parts(wants: &dyn Fn(&str) -> bool, parts: &mut serde_json::Map<String, Value>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if wants("datafusion") {
        parts.insert("datafusion_per_query".into(), df_cost::run(&rt));
    }
    if wants("engine") || wants("semantics") {
        let fixture = engine::Fixture::new();
        if wants("engine") {
            parts.insert(
                "extentdb_in_process".into(),
                engine_cost::run(&rt, &fixture),
            );
        }
        if wants("semantics") {
            parts.insert("semantic_fit".into(), semantics::run(&rt, &fixture));
        }
    }
}

/// Today's results file with this run's parts put in (a later run of some parts keeps
/// the others), and the run recorded beside the earlier ones.
fn merge(path: &Path, host: &str, run: Value, parts: serde_json::Map<String, Value>) -> Value {
    let mut report = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .unwrap_or_else(|| json!({ "parts": {}, "runs": [] }));
    report["benchmark"] = json!("qp-choice");
    report["issue"] = json!(22);
    report["host"] = json!(host);
    report["in_process"] = json!("every time here is measured in-process: no network, no TDS");
    report["machine"] = json!({ "cpu": cpu_model(), "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0) });
    report["versions"] = json!({ "sqlparser": "0.64.0", "datafusion": "55.2.0 (which itself parses with sqlparser 0.62.0)", "rustc": command_output("rustc", &["--version"]) });
    for (k, v) in parts {
        report["parts"][k] = v;
    }
    if let Some(runs) = report["runs"].as_array_mut() {
        runs.push(run);
    }
    report
}

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// The repository: two levels above this crate.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

/// T-SQL scripts to parse: Ola Hallengren's MaintenanceSolution.sql from shared/tools and
/// the seeds' scripts as `examples/` keeps them (the seed articles themselves are prose
/// with the scripts inside; `examples/` holds those scripts alone).
fn corpus(root: &Path) -> Vec<(String, PathBuf)> {
    let mut files = vec![(
        "ola/MaintenanceSolution.sql".to_string(),
        root.join("../shared/tools/ola-maintenance-solution/MaintenanceSolution.sql"),
    )];
    // Elsewhere than beside the repository: XDB_OLA_SCRIPT names the file.
    if let Some(path) = std::env::var_os("XDB_OLA_SCRIPT") {
        files[0].1 = PathBuf::from(path);
    }
    for name in [
        "seed000_ifi.sql",
        "seed003_junkdata.sql",
        "seed004_bigrows.sql",
    ] {
        files.push((format!("examples/{name}"), root.join("examples").join(name)));
    }
    files
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn command_output(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}
