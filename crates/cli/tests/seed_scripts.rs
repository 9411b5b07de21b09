//! The seeds' data scripts run through `extentdb exec` as the articles write them, file paths
//! aside (examples/seed004_bigrows.sql, examples/seed003_junkdata.sql): every row arrives,
//! the files autogrow, and a second run of seed 004's preamble finds the database and drops
//! it through ALTER DATABASE ... SET SINGLE_USER WITH ROLLBACK IMMEDIATE. The same scripts
//! run over TDS against `extentdb serve`, from `extentdb sqlcmd` and from FreeTDS tsql.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::tds::{Server, PASSWORD};

/// Seed 003's database, made before its JunkData script runs.
const CREATE_JUNK_DB: &str = "CREATE DATABASE TestWithZeroInitialization ON (NAME = T, \
     FILENAME = 'T.mdf', SIZE = 200MB) LOG ON (NAME = T_log, FILENAME = 'T_log.ldf', SIZE = 64MB);";

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
    check_trace_flag_1165(&dir.join("log/ERRORLOG"));
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

/// Seed 004's trace flag 1165 lines in the error log: one recalculation at CREATE DATABASE
/// and one at each ADD FILE (with the article's figures for the files it adds), at least one
/// during the 70,000 inserts (8,750 extents: past 8,192), each skip target the integer
/// quotient of the most-free file's free extents by the file's own (the most-free count for
/// a full file), and the most-free file named in the "Completed" line.
fn check_trace_flag_1165(errorlog: &Path) {
    let log = std::fs::read_to_string(errorlog).unwrap();
    // (most-free file, [(file id, free extents, skip target)]) per recalculation.
    type Recalculation = (u32, Vec<(u32, u32, u32)>);
    let mut groups: Vec<Recalculation> = Vec::new();
    for line in log.lines() {
        if let Some(rest) = line.split("most free file is file ").nth(1) {
            assert!(
                line.contains(
                    "Proportional Fill Recalculation Completed for DB Company new m_cAllocs 8192"
                ),
                "{line}"
            );
            groups.push((rest.trim_end_matches('.').parse().unwrap(), Vec::new()));
        } else if let Some(rest) = line.split("\tFile [").nth(1) {
            // `<name>] (<id>) has <n> free extents and skip target of <k>. `
            assert!(
                line.ends_with(". "),
                "the trailing space of SQL Server's line: {line:?}"
            );
            let nums: Vec<u32> = rest
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|w| w.parse().ok())
                .collect();
            let n = nums.len();
            groups
                .last_mut()
                .expect("a file line follows a Completed line")
                .1
                .push((nums[n - 3], nums[n - 2], nums[n - 1]));
        }
    }
    assert!(groups.len() >= 4, "recalculations: {groups:?}");
    assert_eq!(groups[0].1.len(), 1);
    assert_eq!(groups[1].1.len(), 2);
    assert_eq!(groups[2].1.len(), 3);
    // SecondFile: 5 MB = 80 extents less its fixed one, as in the article; ThirdFile is the
    // most free when added, so Company_data and SecondFile skip (article: 90 and 50).
    assert_eq!(groups[1].1[1], (3, 79, 1));
    assert_eq!(groups[2].0, 4);
    for (most_free, files) in &groups {
        let most = files.iter().map(|f| f.1).max().unwrap();
        assert_eq!(files.iter().find(|f| f.1 == most).unwrap().0, *most_free);
        for &(id, free, target) in files {
            let want = most.checked_div(free).unwrap_or(most).max(1);
            assert_eq!(target, want, "file {id}: {free} free of most {most}");
        }
    }
    let after_inserts = groups.len() - 3;
    assert!(
        after_inserts >= 1,
        "a recalculation after 8,192 allocations"
    );
}

/// Proves seed 003's JunkData script fills 20,000 pages with its default value.
#[test]
fn seed003_junkdata_script() {
    let dir = std::env::temp_dir().join(format!("xdb-seed003-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    exec(&dir, &["-Q", CREATE_JUNK_DB]);
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

/// Runs a script with `extentdb sqlcmd -b` against a server; its output.
fn sqlcmd(s: &Server, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_extentdb"))
        .args([
            "sqlcmd",
            "-b",
            "-S",
            &s.addr.replace(':', ","),
            "-U",
            "sa",
            "-P",
            PASSWORD,
        ])
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

/// Runs a script through FreeTDS tsql; fails on any error of severity 11 or more.
fn tsql(s: &Server, script: &Path) -> String {
    let port = s.addr.rsplit(':').next().unwrap().to_string();
    let out = Command::new("tsql")
        .args([
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-U",
            "sa",
            "-P",
            PASSWORD,
            "-o",
            "q",
        ])
        .env("TDSVER", "7.4")
        .stdin(std::fs::File::open(script).unwrap())
        .output()
        .expect("tsql (apt-get install freetds-bin; scripts/test.sh installs it)");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    for line in stderr.lines().filter(|l| l.starts_with("Msg ")) {
        let severity: u32 = line
            .split("severity ")
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(99);
        assert!(severity <= 10, "tsql: {line}\n{stderr}");
    }
    assert!(out.status.success(), "{stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Proves the seed scripts run unchanged (paths aside) over TDS: from extentdb sqlcmd with
/// every batch and repeat (seed 004's 70,000 inserts and trace flag 1165 lines), and from
/// FreeTDS tsql, which has no `GO n`, so seed 004's insert runs once there.
#[test]
fn seed_scripts_over_tds() {
    let s = Server::start("seeds", &[]);
    let out = sqlcmd(&s, &["-i", example("seed000_ifi.sql").to_str().unwrap()]);
    assert!(out.contains("instant_file_initialization_enabled"), "{out}");
    assert!(out.contains("Zeroing completed on"), "{out}");
    sqlcmd(
        &s,
        &["-i", example("seed004_bigrows.sql").to_str().unwrap()],
    );
    let count = sqlcmd(
        &s,
        &[
            "-Q",
            "SET NOCOUNT ON; SELECT COUNT(*) FROM Company.dbo.BigRows;",
        ],
    );
    assert!(count.lines().any(|l| l.trim() == "70000"), "{count}");
    check_trace_flag_1165(&s.dir.join("log/ERRORLOG"));
    sqlcmd(&s, &["-Q", CREATE_JUNK_DB]);
    sqlcmd(
        &s,
        &["-i", example("seed003_junkdata.sql").to_str().unwrap()],
    );
    let junk = sqlcmd(
        &s,
        &[
            "-d",
            "TestWithZeroInitialization",
            "-Q",
            "SET NOCOUNT ON; SELECT COUNT(*) FROM JunkData;",
        ],
    );
    assert!(junk.lines().any(|l| l.trim() == "20000"), "{junk}");
    // FreeTDS tsql: the same files.
    let out = tsql(&s, &example("seed000_ifi.sql"));
    assert!(out.contains("Zeroing completed on"), "{out}");
    tsql(&s, &example("seed004_bigrows.sql"));
    let count = sqlcmd(
        &s,
        &[
            "-Q",
            "SET NOCOUNT ON; SELECT COUNT(*) FROM Company.dbo.BigRows;",
        ],
    );
    assert!(
        count.lines().any(|l| l.trim() == "1"),
        "tsql runs GO 70000 once: {count}"
    );
    sqlcmd(&s, &["-Q", "DROP DATABASE TestWithZeroInitialization"]);
    sqlcmd(&s, &["-Q", CREATE_JUNK_DB]);
    tsql(&s, &example("seed003_junkdata.sql"));
    let junk = sqlcmd(
        &s,
        &[
            "-d",
            "TestWithZeroInitialization",
            "-Q",
            "SET NOCOUNT ON; SELECT COUNT(*) FROM JunkData;",
        ],
    );
    assert!(junk.lines().any(|l| l.trim() == "20000"), "{junk}");
}
