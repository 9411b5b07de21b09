//! Proportional fill through `extentdb exec`: the -E startup option, and AUTOGROW_ALL_FILES
//! against the default AUTOGROW_SINGLE_FILE.

use std::path::Path;
use std::process::Command;

fn exec(dir: &Path, extra: &[&str], sql: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_extentdb"))
        .args(["exec", "-b", "--data-dir"])
        .arg(dir)
        .args(extra)
        .args(["-Q", sql])
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

/// The numbers of each output line that holds only numbers.
fn rows(out: &str) -> Vec<Vec<i64>> {
    out.lines()
        .map(|l| l.split_whitespace().map(|w| w.parse::<i64>()).collect())
        .filter_map(|r: Result<Vec<i64>, _>| r.ok())
        .filter(|r| !r.is_empty())
        .collect()
}

const TWO_EQUAL_FILES: &str = "CREATE DATABASE E ON PRIMARY (NAME = E1, FILENAME = 'E1.mdf', SIZE = 40MB), \
     (NAME = E2, FILENAME = 'E2.ndf', SIZE = 40MB) LOG ON (NAME = E_log, FILENAME = 'E_log.ldf', SIZE = 16MB);";

const FILL_200_EXTENTS: &str = "USE E; CREATE TABLE B (c1 INT IDENTITY, c2 CHAR(8000) DEFAULT 'a'); \
     SET NOCOUNT ON; DECLARE @i INT = 0; BEGIN TRAN; \
     WHILE @i < 1600 BEGIN INSERT B DEFAULT VALUES; SET @i += 1; END; COMMIT; \
     SELECT file_id, user_object_reserved_page_count / 8 FROM sys.dm_db_file_space_usage ORDER BY file_id;";

/// Proves -E: with two files of skip target 1, 200 extents go 64, 64, 64, 8 (128 and 72)
/// instead of alternating (100 and 100).
#[test]
fn e_option_allocates_64_consecutive_extents() {
    for (e, want) in [(false, [100, 100]), (true, [128, 72])] {
        let dir = std::env::temp_dir().join(format!("xdb-fill-e{e}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let extra: &[&str] = if e { &["-E"] } else { &[] };
        exec(&dir, extra, TWO_EQUAL_FILES);
        let got = rows(&exec(&dir, extra, FILL_200_EXTENTS));
        assert_eq!(got, vec![vec![1, want[0]], vec![3, want[1]]], "-E {e}");
        // The lock the fill takes is listed as SQL Server lists it. Statements of one
        // database still run one at a time, so nobody has collided on it.
        let spin = exec(
            &dir,
            extra,
            "SELECT name, collisions, spins, backoffs, sleep_time FROM sys.dm_os_spinlock_stats \
             WHERE name = 'FGCB_PRP_FILL';",
        );
        let line = spin
            .lines()
            .find(|l| l.starts_with("FGCB_PRP_FILL"))
            .unwrap();
        let numbers: Vec<i64> = line
            .split_whitespace()
            .skip(1)
            .map(|w| w.parse().unwrap())
            .collect();
        assert_eq!(numbers, vec![0, 0, 0, 0], "{spin}");
        if e {
            let log = std::fs::read_to_string(dir.join("log/ERRORLOG")).unwrap();
            assert!(log.contains("Command Line Startup Parameters:") && log.contains("\t -E"));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Proves AUTOGROW_ALL_FILES grows every file of the filegroup together (their sizes keep
/// their 3 MB difference through every growth), shown in sys.filegroups, and that the
/// default grows one file at a time (each growth logged with its duration).
#[test]
fn autogrow_all_files_grows_the_filegroup_together() {
    for all in [true, false] {
        let dir = std::env::temp_dir().join(format!("xdb-fill-all{all}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        exec(
            &dir,
            &[],
            "CREATE DATABASE G ON PRIMARY (NAME = G1, FILENAME = 'G1.mdf', SIZE = 5MB, FILEGROWTH = 1MB), \
             (NAME = G2, FILENAME = 'G2.ndf', SIZE = 8MB, FILEGROWTH = 1MB) \
             LOG ON (NAME = G_log, FILENAME = 'G_log.ldf', SIZE = 16MB);",
        );
        if all {
            exec(
                &dir,
                &[],
                "ALTER DATABASE G MODIFY FILEGROUP [PRIMARY] AUTOGROW_ALL_FILES;",
            );
        }
        let out = exec(
            &dir,
            &["-d", "G"],
            "CREATE TABLE B (c1 INT IDENTITY, c2 CHAR(8000) DEFAULT 'a'); \
             SET NOCOUNT ON; DECLARE @i INT = 0; BEGIN TRAN; \
             WHILE @i < 3200 BEGIN INSERT B DEFAULT VALUES; SET @i += 1; END; COMMIT; \
             SELECT CAST(is_autogrow_all_files AS INT) FROM sys.filegroups; \
             SELECT file_id, size FROM sys.database_files WHERE type = 0 ORDER BY file_id;",
        );
        let r = rows(&out);
        assert_eq!(r[0], vec![all as i64], "{out}");
        let (a, b) = (r[1][1], r[2][1]);
        assert!(
            a > 640 && b > 1024,
            "both files grew past 5 and 8 MB: {out}"
        );
        let log = std::fs::read_to_string(dir.join("log/ERRORLOG")).unwrap();
        let grew = |f: &str| {
            log.lines()
                .filter(|l| l.contains(&format!("Autogrow of file '{f}' in database 'G' took")))
                .count()
        };
        if all {
            assert_eq!(b - a, 384, "the 3 MB difference kept: {out}");
            assert_eq!(grew("G1"), grew("G2"), "{log}");
        } else {
            assert_eq!(
                grew("G1") + grew("G2"),
                ((a - 640) + (b - 1024)) as usize / 128,
                "one file per growth"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Proves DBCC SHRINKFILE (EMPTYFILE) through T-SQL: the file's data moves to the other
/// file, REMOVE FILE then succeeds (it fails before with 5042), every row is still there;
/// SHRINKFILE to a size gives back free space; bad input gives 8985 and 2555.
#[test]
fn shrinkfile_emptyfile_then_remove_file() {
    let dir = std::env::temp_dir().join(format!("xdb-shrink-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    exec(
        &dir,
        &[],
        "CREATE DATABASE S ON PRIMARY (NAME = S1, FILENAME = 'S1.mdf', SIZE = 20MB), \
         (NAME = S2, FILENAME = 'S2.ndf', SIZE = 20MB) LOG ON (NAME = S_log, FILENAME = 'S_log.ldf', SIZE = 16MB);",
    );
    exec(
        &dir,
        &["-d", "S"],
        "CREATE TABLE H (c1 INT IDENTITY, c2 CHAR(3000) DEFAULT 'h'); \
         CREATE TABLE C (id INT PRIMARY KEY, c2 CHAR(3000) DEFAULT 'c'); \
         SET NOCOUNT ON; DECLARE @i INT = 0; BEGIN TRAN; \
         WHILE @i < 1000 BEGIN INSERT H DEFAULT VALUES; INSERT C (id) VALUES ((@i * 7919) % 1000); SET @i += 1; END; COMMIT;",
    );
    let before = exec(&dir, &["-d", "S"], "SELECT file_id, user_object_reserved_page_count FROM sys.dm_db_file_space_usage ORDER BY file_id;");
    assert!(rows(&before)[1][1] > 100, "file 3 holds data: {before}");
    let refused = Command::new(env!("CARGO_BIN_EXE_extentdb"))
        .args(["exec", "--data-dir"])
        .arg(&dir)
        .args(["-Q", "ALTER DATABASE S REMOVE FILE S2; USE S; DBCC SHRINKFILE (Nope, EMPTYFILE); DBCC SHRINKFILE (S1, EMPTYFILE);"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&refused.stdout);
    assert!(text.contains("Msg 5042"), "{text}");
    assert!(text.contains("Msg 8985, Level 16, State 1"), "{text}");
    assert!(text.contains("Msg 2555, Level 16, State 1"), "{text}");
    let out = exec(
        &dir,
        &["-d", "S"],
        "DBCC SHRINKFILE (S2, EMPTYFILE); \
         SELECT file_id, user_object_reserved_page_count FROM sys.dm_db_file_space_usage ORDER BY file_id; \
         ALTER DATABASE S REMOVE FILE S2; \
         SELECT COUNT(*) FROM H; SELECT COUNT(*), MIN(id), MAX(id) FROM C; \
         DBCC SHRINKFILE (S1, 1); SELECT size FROM sys.database_files WHERE file_id = 1;",
    );
    let r = rows(&out);
    assert!(out.contains("DbId   FileId CurrentSize"), "{out}");
    assert!(
        r.iter().any(|x| x.len() == 2 && x[0] == 3 && x[1] == 0),
        "file 3 emptied: {out}"
    );
    assert!(out.contains("The file 'S2' has been removed."), "{out}");
    assert!(r.iter().any(|x| x == &vec![1000]), "{out}");
    assert!(r.iter().any(|x| x == &vec![1000, 0, 999]), "{out}");
    let size = r.last().unwrap()[0];
    assert!(size < 2560 && size > 128, "S1 shrank to its data: {out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs `sql` like `exec` but returns the output whatever the exit status.
fn exec_any(dir: &Path, sql: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_extentdb"))
        .args(["exec", "--data-dir"])
        .arg(dir)
        .args(["-Q", sql])
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Proves REMOVE FILE takes the removed file's IAM pages out of every allocation unit's
/// chain: CHECKDB is clean right after it, after a restart, and after inserts that need new
/// extents. Before the fix the IAM pages mapping E2 stayed in the chains, and CHECKDB
/// stopped at them (8946 "Allocation page (1:19) has invalid IAM page header values",
/// then 8905 for every extent of E1 that the IAM pages after them map).
#[test]
fn remove_file_unlinks_its_iam_pages() {
    let dir = std::env::temp_dir().join(format!("xdb-remove-iam-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    exec(
        &dir,
        &[],
        "CREATE DATABASE E ON PRIMARY (NAME = E1, FILENAME = 'E1.mdf', SIZE = 8MB), \
         (NAME = E2, FILENAME = 'E2.ndf', SIZE = 8MB);",
    );
    let out = exec_any(
        &dir,
        "USE E; CREATE TABLE busy (id INT, pad CHAR(4000)); CREATE TABLE idle (id INT, pad CHAR(4000)); \
         SET NOCOUNT ON; DECLARE @i INT = 0; WHILE @i < 200 BEGIN INSERT busy VALUES (@i, 'b'); SET @i += 1; END; \
         SET @i = 0; WHILE @i < 200 BEGIN INSERT idle VALUES (@i, 'i'); SET @i += 1; END; \
         DBCC CHECKDB(E) WITH NO_INFOMSGS; \
         DBCC SHRINKFILE (E2, EMPTYFILE); \
         DBCC CHECKDB(E) WITH NO_INFOMSGS; \
         USE master; ALTER DATABASE E REMOVE FILE E2; \
         DBCC CHECKDB(E) WITH NO_INFOMSGS;",
    );
    assert!(out.contains("The file 'E2' has been removed."), "{out}");
    assert!(!out.contains("Msg "), "clean after REMOVE FILE: {out}");
    // A restart: the chains as saved.
    let out = exec_any(&dir, "DBCC CHECKDB(E) WITH NO_INFOMSGS;");
    assert!(!out.contains("Msg "), "clean after a restart: {out}");
    // Inserts after the removal find the chains and allocate (the file grows as needed).
    let out = exec_any(
        &dir,
        "USE E; SET NOCOUNT ON; DECLARE @i INT = 0; \
         WHILE @i < 300 BEGIN INSERT busy VALUES (1000 + @i, 'b'); INSERT idle VALUES (1000 + @i, 'i'); SET @i += 1; END; \
         SELECT COUNT(*) FROM busy; SELECT COUNT(*) FROM idle; \
         DBCC CHECKDB(E) WITH NO_INFOMSGS;",
    );
    assert!(!out.contains("Msg "), "clean after inserts: {out}");
    assert_eq!(rows(&out), vec![vec![500], vec![500]], "{out}");
    let out = exec_any(
        &dir,
        "DBCC CHECKDB(E) WITH NO_INFOMSGS; USE E; SELECT COUNT(*) FROM busy;",
    );
    assert!(!out.contains("Msg "), "clean after a second restart: {out}");
    std::fs::remove_dir_all(&dir).unwrap();
}
