//! Golden scripts: each `tests/golden/NAME.sql` runs through the real `extentdb exec` on a
//! fresh instance; its standard output and the instance's ERRORLOG, masked where they vary
//! from run to run (timestamps, elapsed times, the temporary directory, the process id),
//! must equal `tests/golden/NAME.out`. `UPDATE_GOLDEN=1` rewrites the .out files; review the
//! diff before committing.
//!
//! A script may start with `-- setup: ARGS` (extra `extentdb setup` arguments, e.g.
//! `--instant-file-init off`), `-- touch: NAME` (a stray file made in the data root first)
//! and `-- mask: REGEX` lines (further text to mask as `<M>`).

use std::path::{Path, PathBuf};
use std::process::Command;

use regex::Regex;

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_extentdb"))
}

fn mask(text: &str, dir: &Path, extra: &[Regex]) -> String {
    let mut s = text.replace(&dir.display().to_string(), "<DIR>");
    let rules = [
        (r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?", "<TIME>"),
        (r"elapsed = \d+ ms", "elapsed = N ms"),
        (r"Process ID is \d+", "Process ID is N"),
        (r"\.extentdb-probe-\d+", ".extentdb-probe-N"),
    ];
    for (re, with) in rules {
        s = Regex::new(re).unwrap().replace_all(&s, with).into_owned();
    }
    for re in extra {
        s = re.replace_all(&s, "<M>").into_owned();
    }
    // Padding after a masked value depends on the value's width, so trailing spaces go, and
    // in a line holding the instance's directory (whose length varies with the machine's
    // temporary directory) runs of spaces become one; the renderer's unit tests pin
    // sqlcmd's padding itself.
    let spaces = Regex::new(" {2,}").unwrap();
    s.lines()
        .map(|l| {
            let l = l.trim_end();
            if l.contains("<DIR>") {
                format!("{}\n", spaces.replace_all(l, " "))
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

fn run_script(name: &str) -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.sql"));
    let script = std::fs::read_to_string(&src).unwrap();
    let dir = std::env::temp_dir().join(format!("xdb-golden-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut setup_args: Vec<String> = Vec::new();
    let mut masks = Vec::new();
    let mut touches = Vec::new();
    for line in script.lines() {
        if let Some(a) = line.strip_prefix("-- setup: ") {
            setup_args.extend(a.split_whitespace().map(String::from));
        } else if let Some(t) = line.strip_prefix("-- touch: ") {
            touches.push(t.trim().to_string());
        } else if let Some(m) = line.strip_prefix("-- mask: ") {
            masks.push(Regex::new(m.trim()).unwrap());
        }
    }
    let st = Command::new(binary())
        .args(["setup", "--data-dir"])
        .arg(&dir)
        .args(if setup_args.iter().any(|a| a == "--tempdb-files") {
            vec![]
        } else {
            vec!["--tempdb-files", "2"]
        })
        .args(&setup_args)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "setup failed: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    let script_path = dir.join("script.sql");
    // The script refers to the instance's data root as $(DATA).
    let data = dir.join("data").canonicalize().unwrap();
    for t in &touches {
        std::fs::write(data.join(t), b"not a database file").unwrap();
    }
    std::fs::write(
        &script_path,
        script.replace("$(DATA)", &data.display().to_string()),
    )
    .unwrap();
    let out = Command::new(binary())
        .args(["exec", "--data-dir"])
        .arg(&dir)
        .arg("-i")
        .arg(&script_path)
        .output()
        .unwrap();
    let errorlog = std::fs::read_to_string(dir.join("log/ERRORLOG")).unwrap_or_default();
    let text = format!(
        "exit code: {}\n---- output ----\n{}---- stderr ----\n{}---- ERRORLOG ----\n{}",
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        errorlog
    );
    let masked = mask(&text, &dir, &masks);
    let masked = mask(&masked, &data, &masks);
    std::fs::remove_dir_all(&dir).unwrap();
    masked
}

fn check(name: &str) {
    let got = run_script(name);
    let expected_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.out"));
    if std::env::var("UPDATE_GOLDEN").is_ok() {
        std::fs::write(&expected_path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&expected_path).unwrap_or_default();
    if got != want {
        let diff: Vec<String> = got
            .lines()
            .zip(want.lines().chain(std::iter::repeat("")))
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .take(8)
            .map(|(i, (a, b))| format!("line {}:\n  got:  {a}\n  want: {b}", i + 1))
            .collect();
        panic!(
            "{name}: output differs from {}\n{}",
            expected_path.display(),
            diff.join("\n")
        );
    }
}

/// Seed 000's Reports 2 and 3: with IFI only the log is zeroed; with 1806 the data file too.
#[test]
fn seed000_reports() {
    check("seed000_reports");
}

/// Seed 001's timing script, paths changed: IFI on, then trace flag 1806 for the session.
#[test]
fn seed001_timing() {
    check("seed001_timing");
}

/// Bad input gets SQL Server's message number, severity and state and changes nothing.
#[test]
fn bad_input() {
    check("bad_input");
}

/// Files and filegroups: add, grow, modify, remove, rename, and the system views.
#[test]
fn files_and_filegroups() {
    check("files_and_filegroups");
}

/// Seed 002 without setup's caps: eight 1 GB tempdb files, created at every start.
#[test]
fn tempdb_setup() {
    check("tempdb_setup");
}

/// The log's VLFs by SQL Server 2022's rules at create, growth and ADD LOG FILE.
#[test]
fn log_vlfs() {
    check("log_vlfs");
}

/// The log wraps through SQL: automatic checkpoints, VLF reuse with flipped parity, CHECKPOINT.
#[test]
fn log_reuse() {
    check("log_reuse");
}

/// IFI off at setup: every data file is zeroed and the start-up line says disabled.
#[test]
fn ifi_off_instance() {
    check("ifi_off_instance");
}

/// Tables and DML: DDL, inserts, aggregates, updates, deletes, transactions with full and
/// statement-level rollback, the catalog views, and SQL Server's errors for bad rows.
#[test]
fn tables_dml() {
    check("tables_dml");
}

/// Seed 003's JunkData script (a WHILE loop of DEFAULT VALUES inserts), scaled down.
#[test]
fn seed003_junkdata() {
    check("seed003_junkdata");
}

/// The log under transactions: ACTIVE_TRANSACTION holding it, 9002 when it cannot grow and
/// the rollback that still fits, growth by FILEGROWTH up to MAXSIZE with trace flag 3004.
#[test]
fn log_transactions() {
    check("log_transactions");
}

/// Space reporting on two data files, a heap and a clustered table: FILEPROPERTY,
/// sys.dm_db_file_space_usage, DBCC SHOWFILESTATS, sp_spaceused, sp_helpfile, sp_helpdb,
/// checks in T-SQL that their figures agree, and SQL Server's errors for bad arguments.
#[test]
fn space_reporting() {
    check("space_reporting");
}

/// SET IMPLICIT_TRANSACTIONS ON: which statements begin a transaction, and ROLLBACK/COMMIT
/// of what they did.
#[test]
fn implicit_transactions() {
    check("implicit_transactions");
}

/// DBCC PAGE with trace flag 3604 (a data page at printopt 0-3, the GAM page, page 0), to
/// the ERRORLOG without it, and Msg 8968 for a page beyond the file or a missing file.
#[test]
fn dbcc_page() {
    check("dbcc_page");
}

/// DBCC CHECKALLOC on a new database and one grown over three files: zero allocation
/// errors by name and 0, silence with NO_INFOMSGS, Msg 2520 for an unknown database.
#[test]
fn dbcc_checkalloc() {
    check("dbcc_checkalloc");
}

#[test]
fn dbcc_checkdb() {
    check("dbcc_checkdb");
}
