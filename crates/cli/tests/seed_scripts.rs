//! The seeds' data scripts run through `extentdb exec` as the articles write them, file paths
//! aside (examples/seed004_bigrows.sql, examples/seed003_junkdata.sql): every row arrives,
//! the files autogrow, and a second run of seed 004's preamble finds the database and drops
//! it through ALTER DATABASE ... SET SINGLE_USER WITH ROLLBACK IMMEDIATE.

use std::path::{Path, PathBuf};
use std::process::Command;

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

fn exec(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_extentdb"))
        .args(["exec", "-b", "--data-dir"])
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Proves seed 004's BigRows script (70,000 single-row inserts into 5 MB files growing by
/// 1 MB) completes with every row, the primary file autogrown, and the preamble re-runnable.
#[test]
fn seed004_bigrows_script() {
    let dir = std::env::temp_dir().join(format!("xdb-seed004-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let script = example("seed004_bigrows.sql");
    let out = exec(&dir, &["-i", script.to_str().unwrap()]);
    assert!(out.contains("Zeroing") || out.contains("Autogrow"), "{out}");
    let count = exec(
        &dir,
        &[
            "-Q",
            "SET NOCOUNT ON; SELECT COUNT(*), MIN(c1), MAX(c1) FROM Company.dbo.BigRows;",
        ],
    );
    assert!(
        count
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["70000", "1", "70000"]),
        "{count}"
    );
    let sizes = exec(
        &dir,
        &[
            "-d",
            "Company",
            "-Q",
            "SET NOCOUNT ON; SELECT SUM(size) FROM sys.database_files WHERE type = 0;",
        ],
    );
    let pages: i64 = sizes
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .next()
        .unwrap_or(0);
    assert!(
        pages >= 70_000,
        "data files hold {pages} pages for 70,000 one-page rows"
    );
    // The preamble again: the database exists now, so it is set SINGLE_USER and dropped.
    let text = std::fs::read_to_string(&script).unwrap();
    let preamble = &text[..text.find("CREATE DATABASE").unwrap()];
    exec(&dir, &[&format!("--query={preamble}")]);
    let gone = exec(
        &dir,
        &[
            "-Q",
            "SET NOCOUNT ON; SELECT COUNT(*) FROM sys.databases WHERE name = 'Company';",
        ],
    );
    assert!(gone.lines().any(|l| l.trim() == "0"), "{gone}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Proves seed 003's JunkData script fills 20,000 pages with its default value.
#[test]
fn seed003_junkdata_script() {
    let dir = std::env::temp_dir().join(format!("xdb-seed003-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    exec(
        &dir,
        &[
            "-Q",
            "CREATE DATABASE TestWithZeroInitialization ON (NAME = T, FILENAME = 'T.mdf', SIZE = 200MB) \
             LOG ON (NAME = T_log, FILENAME = 'T_log.ldf', SIZE = 64MB);",
        ],
    );
    exec(
        &dir,
        &["-i", example("seed003_junkdata.sql").to_str().unwrap()],
    );
    let out = exec(
        &dir,
        &[
            "-d",
            "TestWithZeroInitialization",
            "-Q",
            "SET NOCOUNT ON; SELECT COUNT(*), MAX(JunkDataID), MIN(LEFT(JunkDataValue, 8)) FROM JunkData;",
        ],
    );
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["20000", "20000", "JunkJunk"]),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
