//! The SQL layer reaches a database only through storage's handle (`SharedDatabase`'s row
//! operations, shared reads and structure changes, storage's structure.rs), never choosing
//! a lock mode or driving the log: no file under crates/sql/src (nor crates/tds/src and
//! crates/cli/src above it) names the exclusive hold (`DbGuard`, the old `DbLock` /
//! `db_lock`), storage's test-only exclusive path, or the log writer. The compiler checks
//! the hold is private to storage; this test keeps the names (and comments leaning on
//! them) out. Proven by scanning every source file's identifiers.

use std::path::{Path, PathBuf};

/// Identifiers the SQL layer must not use.
const FORBIDDEN: &[&str] = &[
    "DbLock",
    "DbGuard",
    "db_lock",
    "log_writer",
    "LogWriter",
    "lock_for_tests",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The identifiers of `text` that are forbidden, with their line numbers. `extentdb_lock`
/// (the lock manager crate) is one identifier, not `db_lock`.
fn forbidden_in(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for ident in line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if FORBIDDEN.contains(&ident) {
                found.push((n + 1, ident.to_string()));
            }
        }
    }
    found
}

#[test]
fn the_scan_finds_each_forbidden_name_and_only_whole_identifiers() {
    let text = "use extentdb_storage::db_lock::DbLock;\n// DbGuard<'_>, log_writer::LogWriter\nlet x = s.lock_for_tests();\nuse extentdb_lock::Resource; // DbLocker, my_db_lock";
    let found: Vec<String> = forbidden_in(text).into_iter().map(|(_, i)| i).collect();
    assert_eq!(
        found,
        [
            "db_lock",
            "DbLock",
            "DbGuard",
            "log_writer",
            "LogWriter",
            "lock_for_tests"
        ]
    );
}

#[test]
fn the_sql_layer_names_no_exclusive_hold_and_no_log_writer() {
    // crates/sql/src, and the layers above it (tds, cli) that reach databases through it.
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for layer in ["sql", "tds", "cli"] {
        let before = files.len();
        rust_files(&crates.join(layer).join("src"), &mut files);
        assert!(files.len() > before + 2, "crates/{layer}/src has its files");
    }
    let mut hits = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (line, ident) in forbidden_in(&text) {
            hits.push(format!("{}:{line}: {ident}", f.display()));
        }
    }
    assert!(
        hits.is_empty(),
        "the SQL layer reaches past storage's handle:\n{}",
        hits.join("\n")
    );
}
