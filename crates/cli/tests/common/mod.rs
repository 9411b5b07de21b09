//! Helpers the integration tests share.
pub mod tds;

/// Runs `extentdb exec --data-dir DIR [extra] -Q sql` and returns its exit code and
/// standard output.
#[allow(dead_code)]
pub fn exec_sql(dir: &std::path::Path, extra: &[&str], sql: &str) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_extentdb"))
        .arg("exec")
        .args(extra)
        .arg("--data-dir")
        .arg(dir)
        .args(["-Q", sql])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The sort work files (`extentdb-sort-*`) anywhere under `dir`: none may outlive its sort.
#[allow(dead_code)]
pub fn sort_work_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(sort_work_files(&p));
        } else if p.to_string_lossy().contains("extentdb-sort-") {
            out.push(p);
        }
    }
    out
}

/// Rounds of a SIGKILL test that runs a few long rounds: a fifth of XDB_KILL_ROUNDS (which
/// counts kill9.rs's short ones), at least 1; 4 by default.
#[allow(dead_code)]
pub fn long_kill_rounds() -> u64 {
    std::env::var("XDB_KILL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(4, |n: u64| (n / 5).max(1))
}
