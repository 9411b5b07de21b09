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
