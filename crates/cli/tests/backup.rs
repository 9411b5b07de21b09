//! BACKUP DATABASE and RESTORE HEADERONLY / FILELISTONLY / VERIFYONLY through `extentdb
//! exec`, on a real instance and real backup files: SQL Server's messages, sets appended and
//! overwritten, and every kind of damage to the file found (never a panic, never "valid").

mod common;

use std::path::{Path, PathBuf};

fn exec(dir: &Path, sql: &str) -> (i32, String) {
    common::exec_sql(dir, &["-b"], sql)
}

fn prepare(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xdb-backup-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (code, out) = exec(
        &dir,
        "SET NOCOUNT ON; CREATE DATABASE S; ALTER DATABASE S SET RECOVERY FULL; USE S; \
         CREATE TABLE t (k int PRIMARY KEY, v varchar(500)); \
         DECLARE @i int = 0; \
         WHILE @i < 3000 BEGIN INSERT INTO t VALUES (@i, REPLICATE('x', 300 + @i % 100)); SET @i += 1; END;",
    );
    assert_eq!(code, 0, "{out}");
    dir
}

/// Proves BACKUP writes a set SQL Server's way (STATS lines, one 4035 per file, the 3014
/// summary), that NOINIT appends and INIT starts over, and that HEADERONLY, FILELISTONLY and
/// VERIFYONLY read what was written: positions, names, types, LSN order, file sizes.
#[test]
fn backup_sets_are_written_listed_and_verified() {
    let dir = prepare("sets");
    let (code, out) = exec(
        &dir,
        "BACKUP DATABASE S TO DISK = 's.bak' WITH INIT, CHECKSUM, STATS = 25, NAME = 'first';",
    );
    assert_eq!(code, 0, "{out}");
    for line in [
        "25 percent processed.",
        "50 percent processed.",
        "100 percent processed.",
        "pages for database 'S', file 'S' on file 1.",
        "pages for database 'S', file 'S_log' on file 1.",
        "BACKUP DATABASE successfully processed ",
    ] {
        assert!(out.contains(line), "{line:?} in:\n{out}");
    }
    let (code, out) = exec(
        &dir,
        "BACKUP DATABASE S TO DISK = 's.bak' WITH NAME = 'second', COPY_ONLY; \
         SET NOCOUNT ON; \
         RESTORE HEADERONLY FROM DISK = 's.bak';",
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("on file 2."), "NOINIT appends: {out}");
    assert!(out.contains("first") && out.contains("second"), "{out}");
    let (code, out) = exec(
        &dir,
        "SET NOCOUNT ON; \
         RESTORE FILELISTONLY FROM DISK = 's.bak' WITH FILE = 2; \
         RESTORE VERIFYONLY FROM DISK = 's.bak' WITH FILE = 1, CHECKSUM; \
         RESTORE VERIFYONLY FROM DISK = 's.bak' WITH FILE = 2;",
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("S_log") && out.contains("PRIMARY"), "{out}");
    assert!(out.contains("The backup set on file 1 is valid."), "{out}");
    assert!(out.contains("The backup set on file 2 is valid."), "{out}");
    let (code, out) = exec(
        &dir,
        "RESTORE VERIFYONLY FROM DISK = 's.bak' WITH FILE = 3;",
    );
    assert_ne!(code, 0);
    assert!(out.contains("Msg 4038"), "{out}");

    // INIT starts the file over: one set again.
    let (code, out) = exec(
        &dir,
        "BACKUP DATABASE S TO DISK = 's.bak' WITH INIT; \
         RESTORE VERIFYONLY FROM DISK = 's.bak' WITH FILE = 2;",
    );
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("on file 1.") && out.contains("Msg 4038"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proves a damaged backup is never called valid: a flipped byte in a data block, one in a
/// set header, and a file cut short each give Msg 3241 and 3013; a path outside the backup
/// roots gives 3201 (access denied) and writes nothing; a missing file gives 3201.
#[test]
fn damaged_backups_and_bad_paths_are_refused() {
    let dir = prepare("damage");
    let (code, out) = exec(&dir, "BACKUP DATABASE S TO DISK = 'd.bak' WITH CHECKSUM;");
    assert_eq!(code, 0, "{out}");
    let bak = dir.join("backup/d.bak");
    let good = std::fs::read(&bak).unwrap();
    let verify = || exec(&dir, "RESTORE VERIFYONLY FROM DISK = 'd.bak';");
    let (code, out) = verify();
    assert_eq!(code, 0, "{out}");

    for (what, damage) in [
        ("a data page", good.len() / 2),
        ("the set header", 4096 + 40),
        ("the media header", 20),
    ] {
        let mut bad = good.clone();
        bad[damage] ^= 0x20;
        std::fs::write(&bak, &bad).unwrap();
        let (code, out) = verify();
        assert_ne!(code, 0, "{what}: {out}");
        assert!(
            out.contains("Msg 3241") && out.contains("VERIFY DATABASE is terminating abnormally."),
            "{what}: {out}"
        );
        assert!(!out.contains("is valid"), "{what}: {out}");
    }
    std::fs::write(&bak, &good[..good.len() - 8192]).unwrap();
    let (code, out) = verify();
    assert_ne!(code, 0);
    assert!(out.contains("Msg 3241"), "cut short: {out}");

    let outside = std::env::temp_dir().join(format!("xdb-outside-{}.bak", std::process::id()));
    let (code, out) = exec(
        &dir,
        &format!("BACKUP DATABASE S TO DISK = '{}';", outside.display()),
    );
    assert_ne!(code, 0);
    assert!(
        out.contains("Msg 3201") && out.contains("Access is denied"),
        "{out}"
    );
    assert!(
        out.contains("BACKUP DATABASE is terminating abnormally."),
        "{out}"
    );
    assert!(!outside.exists());
    let (code, out) = exec(&dir, "RESTORE HEADERONLY FROM DISK = 'missing.bak';");
    assert_ne!(code, 0);
    assert!(out.contains("Msg 3201"), "{out}");
    let (code, out) = exec(&dir, "BACKUP DATABASE tempdb TO DISK = 't.bak';");
    assert_ne!(code, 0);
    assert!(out.contains("Msg 3147"), "{out}");
    let (code, out) = exec(&dir, "BACKUP DATABASE nosuch TO DISK = 't.bak';");
    assert_ne!(code, 0);
    assert!(out.contains("Msg 911"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The text of the instance's error logs (each start cycles them: ERRORLOG, ERRORLOG.1 ...).
fn errorlog(dir: &Path) -> String {
    let mut all = String::new();
    for e in std::fs::read_dir(dir.join("log")).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with("ERRORLOG") {
            all.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
        }
    }
    all
}

/// Proves RESTORE DATABASE: over an existing database it needs REPLACE (3159), onto another
/// database's files it is refused (1834, 3156), an unknown MOVE name is 3234, and with MOVE
/// it makes a second database with the same rows that checks clean, with IFI leaving the
/// data file unzeroed (trace flag 3004 logs zeroing of the log file only). A damaged backup
/// leaves no database and no file behind (3241), and REPLACE overwrites the original.
#[test]
fn restore_round_trip_and_refusals() {
    let dir = prepare("restore");
    let (code, out) = exec(&dir, "BACKUP DATABASE S TO DISK = 'r.bak' WITH CHECKSUM;");
    assert_eq!(code, 0, "{out}");
    let sums = "SET NOCOUNT ON; SELECT COUNT(*), SUM(k), SUM(LEN(v)) FROM t;";
    let (_, original) = exec(&dir, &format!("USE S; {sums}"));

    let (_, out) = exec(&dir, "RESTORE DATABASE S FROM DISK = 'r.bak';");
    assert!(
        out.contains("Msg 3159") && out.contains("RESTORE DATABASE is terminating abnormally."),
        "{out}"
    );
    let (_, out) = exec(&dir, "RESTORE DATABASE S2 FROM DISK = 'r.bak';");
    assert!(
        out.contains("Msg 1834") && out.contains("Msg 3156"),
        "{out}"
    );
    let (_, out) = exec(
        &dir,
        "RESTORE DATABASE S2 FROM DISK = 'r.bak' WITH MOVE 'nosuch' TO 'x.mdf';",
    );
    assert!(out.contains("Msg 3234"), "{out}");

    let (code, out) = exec(
        &dir,
        "DBCC TRACEON (3004, 3605, -1); \
         RESTORE DATABASE S2 FROM DISK = 'r.bak' \
         WITH MOVE 'S' TO 'S2.mdf', MOVE 'S_log' TO 'S2_log.ldf', STATS = 50, CHECKSUM; \
         DBCC TRACEOFF (3004, 3605, -1);",
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("50 percent processed."), "{out}");
    assert!(
        out.contains("RESTORE DATABASE successfully processed"),
        "{out}"
    );
    let log = errorlog(&dir);
    // Files are built under a staging name (`<path>.xdbrestore`) until complete.
    let zeroed = |name: &str| {
        log.lines()
            .any(|l| l.contains("Zeroing ") && l.contains(name) && l.contains(" from page 0"))
    };
    assert!(zeroed("S2_log.ldf"), "the log file is zeroed:\n{log}");
    assert!(
        !zeroed("S2.mdf"),
        "IFI: the data file is not zeroed:\n{log}"
    );
    let (_, copy) = exec(&dir, &format!("USE S2; {sums}"));
    assert_eq!(
        copy.replace("'S2'", "'S'"),
        original,
        "the same rows in the restored database"
    );
    let (code, out) = exec(&dir, "DBCC CHECKDB (S2) WITH NO_INFOMSGS;");
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("Msg "), "{out}");
    let (_, out) = exec(
        &dir,
        "SET NOCOUNT ON; SELECT physical_name FROM S2.sys.database_files;",
    );
    assert!(
        out.contains("S2.mdf") && out.contains("S2_log.ldf"),
        "{out}"
    );

    // A damaged backup: nothing is left behind.
    let bak = dir.join("backup/r.bak");
    let good = std::fs::read(&bak).unwrap();
    let mut bad = good.clone();
    let at = good.len() / 3;
    bad[at] ^= 0x40;
    std::fs::write(&bak, &bad).unwrap();
    let (_, out) = exec(
        &dir,
        "RESTORE DATABASE S3 FROM DISK = 'r.bak' \
         WITH MOVE 'S' TO 'S3.mdf', MOVE 'S_log' TO 'S3_log.ldf';",
    );
    assert!(
        out.contains("Msg 3241") || out.contains("Msg 3183"),
        "{out}"
    );
    let (_, out) = exec(
        &dir,
        "SET NOCOUNT ON; SELECT name FROM sys.databases WHERE name = 'S3';",
    );
    assert!(!out.contains("S3"), "no database S3: {out}");
    let leftovers: Vec<_> = std::fs::read_dir(dir.join("data"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("S3"))
        .collect();
    assert!(leftovers.is_empty(), "files left behind: {leftovers:?}");
    std::fs::write(&bak, &good).unwrap();

    // Replacing the database the session is using is refused (3102), and changes nothing.
    let (_, out) = exec(
        &dir,
        "USE S; RESTORE DATABASE S FROM DISK = 'r.bak' WITH REPLACE;",
    );
    assert!(out.contains("Msg 3102"), "{out}");

    // REPLACE: the original comes back after a change.
    let (code, out) = exec(
        &dir,
        "USE S; DELETE FROM t WHERE k < 1000; USE master; \
         RESTORE DATABASE S FROM DISK = 'r.bak' WITH REPLACE;",
    );
    assert_eq!(code, 0, "{out}");
    let (_, again) = exec(&dir, &format!("USE S; {sums}"));
    assert_eq!(again, original);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The words of each output line whose first word is an upper-case tag the query selected.
fn tagged_rows(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .filter(|w| {
            w.first()
                .is_some_and(|t| t.len() > 2 && t.chars().all(|c| c.is_ascii_uppercase()))
        })
        .collect()
}

/// Proves the history lands in msdb in SQL Server's tables: one media set per file (kept
/// across NOINIT appends, replaced by FORMAT), one backupset row per set with its position,
/// type, database, LSNs and COPY_ONLY flag, the file's path in backupmediafamily, and one
/// restorehistory row per RESTORE and VERIFYONLY pointing at the set it read. A restore
/// from a file made by another instance adds that set's rows first.
#[test]
fn backup_and_restore_history_in_msdb() {
    let dir = prepare("history");
    let (code, out) = exec(
        &dir,
        "BACKUP DATABASE S TO DISK = 'h.bak' WITH INIT, NAME = 'one'; \
         BACKUP DATABASE S TO DISK = 'h.bak' WITH COPY_ONLY, NAME = 'two'; \
         BACKUP DATABASE S TO DISK = 'h2.bak' WITH FORMAT, NAME = 'three'; \
         RESTORE VERIFYONLY FROM DISK = 'h.bak' WITH FILE = 2; \
         RESTORE DATABASE S2 FROM DISK = 'h.bak' WITH FILE = 2, \
             MOVE 'S' TO 'S2.mdf', MOVE 'S_log' TO 'S2_log.ldf';",
    );
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("Msg 3009"), "{out}");
    let (code, out) = exec(
        &dir,
        "SET NOCOUNT ON; \
         SELECT 'SET', backup_set_id, position, type, database_name, name, is_copy_only, \
                media_set_id FROM msdb.dbo.backupset ORDER BY backup_set_id; \
         SELECT 'FAMILY', media_set_id, physical_device_name, device_type \
         FROM msdb.dbo.backupmediafamily ORDER BY media_set_id; \
         SELECT 'MEDIA', COUNT(*) FROM msdb.dbo.backupmediaset; \
         SELECT 'LSN', COUNT(*) FROM msdb.dbo.backupset WHERE first_lsn <= last_lsn AND last_lsn > 0; \
         SELECT 'RESTORE', restore_type, backup_set_id, recovery, destination_database_name \
         FROM msdb.dbo.restorehistory ORDER BY restore_history_id;",
    );
    assert_eq!(code, 0, "{out}");
    let rows = tagged_rows(&out);
    let of = |tag: &str| -> Vec<&Vec<String>> { rows.iter().filter(|w| w[0] == tag).collect() };
    let sets = of("SET");
    assert_eq!(sets.len(), 3, "{out}");
    assert_eq!(&sets[0][2..7], &["1", "D", "S", "one", "0"], "{out}");
    assert_eq!(&sets[1][2..7], &["2", "D", "S", "two", "1"], "{out}");
    assert_eq!(&sets[2][2..7], &["1", "D", "S", "three", "0"], "{out}");
    assert_eq!(
        sets[0][7], sets[1][7],
        "appended sets share the media set: {out}"
    );
    assert_ne!(
        sets[0][7], sets[2][7],
        "FORMAT makes a new media set: {out}"
    );
    let family = of("FAMILY");
    assert_eq!(family.len(), 2, "{out}");
    assert!(
        family[0][1] == sets[0][7] && family[0][2].ends_with("/h.bak"),
        "{out}"
    );
    assert!(
        family[1][1] == sets[2][7] && family[1][2].ends_with("/h2.bak"),
        "{out}"
    );
    assert_eq!(family[0][3], "2", "device_type 2 is disk: {out}");
    assert!(
        rows.contains(&vec!["MEDIA".to_string(), "2".into()]),
        "{out}"
    );
    assert!(rows.contains(&vec!["LSN".to_string(), "3".into()]), "{out}");
    let restores = of("RESTORE");
    assert_eq!(restores.len(), 2, "{out}");
    // VERIFYONLY of set 2, then RESTORE of set 2 into S2: both point at the second set.
    assert_eq!(
        &restores[0][1..4],
        &["V", sets[1][1].as_str(), "0"],
        "{out}"
    );
    assert_eq!(
        &restores[1][1..],
        &["D", sets[1][1].as_str(), "1", "S2"],
        "{out}"
    );

    // A file from another instance: its set is added to this instance's history first.
    let other = prepare("history-other");
    let (code, out) = exec(
        &other,
        "BACKUP DATABASE S TO DISK = 'o.bak' WITH NAME = 'elsewhere';",
    );
    assert_eq!(code, 0, "{out}");
    std::fs::copy(other.join("backup/o.bak"), dir.join("backup/o.bak")).unwrap();
    let (code, out) = exec(
        &dir,
        "RESTORE DATABASE S3 FROM DISK = 'o.bak' WITH MOVE 'S' TO 'S3.mdf', MOVE 'S_log' TO 'S3_log.ldf'; \
         SET NOCOUNT ON; \
         SELECT 'FOREIGN', backup_set_id FROM msdb.dbo.restorehistory \
         WHERE destination_database_name = 'S3'; \
         SELECT 'SET', backup_set_id, name FROM msdb.dbo.backupset WHERE name = 'elsewhere'; \
         SELECT 'COUNT', COUNT(*) FROM msdb.dbo.backupset;",
    );
    assert_eq!(code, 0, "{out}");
    let rows = tagged_rows(&out);
    let foreign = rows
        .iter()
        .find(|w| w[0] == "FOREIGN")
        .expect("restorehistory row");
    let set = rows
        .iter()
        .find(|w| w[0] == "SET")
        .expect("the other instance's set");
    assert_eq!(foreign[1], set[1], "{out}");
    assert!(
        rows.contains(&vec!["COUNT".to_string(), "4".into()]),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&other);
}
