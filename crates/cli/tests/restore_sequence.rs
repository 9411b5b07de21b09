//! Restore sequences through `extentdb exec` on a real instance (each call a new process,
//! so every step also proves the state survives a restart): BACKUP LOG and the log chain,
//! RESTORE ... WITH NORECOVERY, RESTORE LOG (files and tables the log added, STOPAT),
//! differential and compressed backups, and SQL Server's refusals.

mod common;

use std::path::{Path, PathBuf};

fn exec(dir: &Path, sql: &str) -> (i32, String) {
    common::exec_sql(dir, &["-b"], sql)
}

fn ok(dir: &Path, sql: &str) -> String {
    let (code, out) = exec(dir, sql);
    assert_eq!(code, 0, "{sql}\n{out}");
    out
}

/// Runs `sql`, expects it to fail with Msg `number`.
fn refused(dir: &Path, sql: &str, number: u32) -> String {
    let (code, out) = exec(dir, sql);
    assert_ne!(code, 0, "{sql} should fail:\n{out}");
    assert!(
        out.contains(&format!("Msg {number},")),
        "{sql}: Msg {number} in\n{out}"
    );
    out
}

/// The value of `SELECT expr rest` (one row) as text.
fn value(dir: &Path, expr: &str, rest: &str) -> String {
    let out = ok(
        dir,
        &format!("SET NOCOUNT ON; SELECT 'VAL:' + CAST(({expr}) AS varchar(60)) {rest};"),
    );
    out.lines()
        .find_map(|l| l.trim().strip_prefix("VAL:"))
        .unwrap_or_else(|| panic!("{expr}: {out}"))
        .trim()
        .to_string()
}

fn prepare(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xdb-rseq-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    ok(
        &dir,
        "SET NOCOUNT ON; CREATE DATABASE S; ALTER DATABASE S SET RECOVERY FULL; USE S; \
         CREATE TABLE t (k int PRIMARY KEY, v varchar(300)); \
         DECLARE @i int = 0; \
         WHILE @i < 500 BEGIN INSERT INTO t VALUES (@i, REPLICATE('s', 100 + @i % 200)); SET @i += 1; END;",
    );
    dir
}

/// RESTORE DATABASE `db` FROM `bak` WITH NORECOVERY, S's files moved to `db`.mdf and
/// `db`_log.ldf.
fn restore_full(dir: &Path, db: &str, bak: &str) {
    ok(
        dir,
        &format!(
            "RESTORE DATABASE {db} FROM DISK = '{bak}' WITH NORECOVERY, \
             MOVE 'S' TO '{db}.mdf', MOVE 'S_log' TO '{db}_log.ldf';"
        ),
    );
}

fn insert_rows(dir: &Path, table: &str, from: u32, to: u32) {
    ok(
        dir,
        &format!(
            "SET NOCOUNT ON; USE S; DECLARE @i int = {from}; \
             WHILE @i < {to} BEGIN INSERT INTO {table} VALUES (@i, REPLICATE('r', 50 + @i % 250)); SET @i += 1; END;"
        ),
    );
}

/// A fingerprint of table `t` of `db`: rows and a checksum of keys and lengths.
fn fingerprint(dir: &Path, db: &str) -> String {
    value(
        dir,
        "CAST(COUNT(*) AS varchar(20)) + '/' + CAST(SUM(CAST(k AS bigint) * 7 + LEN(v)) AS varchar(30))",
        &format!("FROM {db}.dbo.t"),
    )
}

fn checks_clean(dir: &Path, db: &str) {
    let out = ok(dir, &format!("DBCC CHECKDB ({db}) WITH NO_INFOMSGS;"));
    assert!(!out.contains("Msg "), "CHECKDB of {db}:\n{out}");
}

/// Proves the log chain: BACKUP LOG needs FULL recovery (4208) and a full backup first
/// (4214); log backups restore only in order (4305 for one too recent, 4326 for one ending
/// before the point reached; one ending at it adds nothing) onto a database restored WITH NORECOVERY, which stays RESTORING across
/// restarts (state_desc, Msg 927 on USE); a table created, rows added and a data file and
/// a log file added after the full backup come back with the log (the new files where WITH
/// MOVE puts them), and the copy equals the source and checks clean. RESTORE LOG onto an
/// online database is 3117. Under FULL the log waits for LOG_BACKUP until one is taken.
#[test]
fn log_backups_restore_in_order_with_what_the_log_added() {
    let dir = prepare("chain");
    ok(
        &dir,
        "CREATE DATABASE Simple1; ALTER DATABASE Simple1 SET RECOVERY SIMPLE;",
    );
    refused(&dir, "BACKUP LOG Simple1 TO DISK = 'x.trn';", 4208);
    refused(&dir, "BACKUP LOG S TO DISK = 'x.trn';", 4214);
    ok(&dir, "BACKUP DATABASE S TO DISK = 'full.bak' WITH INIT;");
    insert_rows(&dir, "t", 1000, 1300);
    let out = ok(&dir, "BACKUP LOG S TO DISK = 'l1.trn' WITH INIT;");
    assert!(
        out.contains("file 'S_log' on file 1.")
            && out.contains("BACKUP LOG successfully processed"),
        "{out}"
    );
    assert!(
        !out.contains("file 'S' on file"),
        "a log backup copies no data file: {out}"
    );
    ok(
        &dir,
        "ALTER DATABASE S ADD FILE (NAME = 'S2', FILENAME = 'S2.ndf', SIZE = 4MB); \
         ALTER DATABASE S ADD LOG FILE (NAME = 'S_log2', FILENAME = 'S_log2.ldf', SIZE = 4MB); \
         USE S; CREATE TABLE u (k int PRIMARY KEY, v varchar(300)); \
         INSERT INTO u VALUES (1, 'one'), (2, 'two');",
    );
    insert_rows(&dir, "t", 2000, 2600);
    ok(&dir, "USE S; DELETE FROM t WHERE k % 10 = 3;");
    ok(&dir, "BACKUP LOG S TO DISK = 'l2.trn' WITH INIT;");
    let source = fingerprint(&dir, "S");

    restore_full(&dir, "R", "full.bak");
    assert_eq!(
        value(&dir, "state_desc", "FROM sys.databases WHERE name = 'R'"),
        "RESTORING"
    );
    refused(&dir, "USE R;", 927);
    let out = refused(&dir, "RESTORE LOG R FROM DISK = 'l2.trn';", 4305);
    assert!(
        out.contains("RESTORE LOG is terminating abnormally."),
        "{out}"
    );
    let out = ok(&dir, "RESTORE LOG R FROM DISK = 'l1.trn' WITH NORECOVERY;");
    assert!(out.contains("RESTORE LOG successfully processed"), "{out}");
    // Again: it ends where the database is, so it adds nothing.
    ok(&dir, "RESTORE LOG R FROM DISK = 'l1.trn' WITH NORECOVERY;");
    assert_eq!(
        value(&dir, "state_desc", "FROM sys.databases WHERE name = 'R'"),
        "RESTORING"
    );
    // The log adds S2 and S_log2: their source paths are taken, MOVE puts them elsewhere.
    refused(&dir, "RESTORE LOG R FROM DISK = 'l2.trn';", 5170);
    // That refusal wrote nothing: the same restore with MOVE goes on from the same point.
    ok(
        &dir,
        "RESTORE LOG R FROM DISK = 'l2.trn' WITH NORECOVERY, MOVE 'S2' TO 'R2.ndf', \
         MOVE 'S_log2' TO 'R_log2.ldf';",
    );
    // l1 now ends before the point the database is at.
    refused(
        &dir,
        "RESTORE LOG R FROM DISK = 'l1.trn' WITH NORECOVERY;",
        4326,
    );
    ok(&dir, "RESTORE DATABASE R WITH RECOVERY;");
    assert_eq!(
        value(&dir, "state_desc", "FROM sys.databases WHERE name = 'R'"),
        "ONLINE"
    );
    assert_eq!(fingerprint(&dir, "R"), source);
    assert_eq!(value(&dir, "COUNT(*)", "FROM R.dbo.u"), "2");
    let files = ok(
        &dir,
        "USE R; SELECT name, physical_name FROM sys.database_files;",
    );
    assert!(
        files.contains("R2.ndf") && files.contains("R_log2.ldf"),
        "{files}"
    );
    checks_clean(&dir, "R");
    // The restored copy takes writes and restarts as any database.
    insert_rows(&dir, "t", 5000, 5010);
    assert_eq!(value(&dir, "COUNT(*)", "FROM R.dbo.t WHERE k >= 5000"), "0");
    ok(&dir, "USE R; INSERT INTO t VALUES (5000, 'after');");
    assert_eq!(value(&dir, "COUNT(*)", "FROM R.dbo.t WHERE k >= 5000"), "1");
    refused(&dir, "RESTORE LOG R FROM DISK = 'l2.trn';", 3117);
    let history = ok(
        &dir,
        "SELECT restore_type, recovery FROM msdb.dbo.restorehistory \
         WHERE destination_database_name = 'R' ORDER BY restore_history_id;",
    );
    let kinds: Vec<&str> = history
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.len() == 1)
        .collect();
    assert_eq!(kinds, ["D", "L", "L", "L"], "{history}");

    // Without log backups the log is kept for the next one (LOG_BACKUP) and grows.
    ok(
        &dir,
        "SET NOCOUNT ON; USE S; CREATE TABLE big (k int PRIMARY KEY, v char(3000)); \
         DECLARE @i int = 0; \
         WHILE @i < 4000 BEGIN INSERT INTO big VALUES (@i, CAST(@i AS varchar(10))); SET @i += 1; END; \
         CHECKPOINT;",
    );
    assert_eq!(
        value(
            &dir,
            "log_reuse_wait_desc",
            "FROM sys.databases WHERE name = 'S'"
        ),
        "LOG_BACKUP"
    );
    ok(
        &dir,
        "BACKUP LOG S TO DISK = 'l3.trn' WITH INIT; USE S; CHECKPOINT;",
    );
    assert_eq!(
        value(
            &dir,
            "log_reuse_wait_desc",
            "FROM sys.databases WHERE name = 'S'"
        ),
        "NOTHING"
    );
    // SIMPLE breaks the chain: a log backup needs a full backup again.
    ok(
        &dir,
        "ALTER DATABASE S SET RECOVERY SIMPLE; ALTER DATABASE S SET RECOVERY FULL;",
    );
    refused(&dir, "BACKUP LOG S TO DISK = 'x.trn';", 4214);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proves a point-in-time restore lands exactly at the chosen time: rows committed before
/// it are there, a transaction that began before it but committed after it is not, nor
/// are rows committed after it; the copy checks clean and takes writes after the cut. A
/// STOPAT later than the log backup
/// holds applies all of it and leaves the database RESTORING (4322) until RESTORE
/// DATABASE ... WITH RECOVERY, which brings everything back.
#[test]
fn point_in_time_restore_stops_at_the_chosen_time() {
    let dir = prepare("stopat");
    ok(&dir, "BACKUP DATABASE S TO DISK = 'full.bak' WITH INIT;");
    insert_rows(&dir, "t", 1000, 1100);
    let before = fingerprint(&dir, "S");
    let out = ok(
        &dir,
        "SET NOCOUNT ON; USE S; \
         BEGIN TRANSACTION; \
         INSERT INTO t VALUES (7000, 'begun before the stop, committed after'); \
         WAITFOR DELAY '00:00:00.050'; \
         SELECT 'STOP:' + CONVERT(varchar(40), SYSDATETIME(), 121); \
         WAITFOR DELAY '00:00:00.050'; \
         COMMIT; \
         INSERT INTO t VALUES (7001, 'after the stop');",
    );
    let stop = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("STOP:"))
        .expect("stop time")
        .trim()
        .to_string();
    insert_rows(&dir, "t", 8000, 8050);
    let after = fingerprint(&dir, "S");
    ok(&dir, "BACKUP LOG S TO DISK = 'l.trn' WITH INIT;");

    restore_full(&dir, "P", "full.bak");
    ok(
        &dir,
        &format!("RESTORE LOG P FROM DISK = 'l.trn' WITH RECOVERY, STOPAT = '{stop}';"),
    );
    assert_eq!(fingerprint(&dir, "P"), before, "stopped at {stop}");
    assert_eq!(value(&dir, "COUNT(*)", "FROM P.dbo.t WHERE k >= 7000"), "0");
    checks_clean(&dir, "P");
    // The log cut at the stop goes on from there: writes after it survive a restart (each
    // call a new process: recovery reads the log past the cut).
    for k in 0..3 {
        ok(
            &dir,
            &format!(
                "USE P; INSERT INTO t VALUES ({}, 'after the cut');",
                9000 + k
            ),
        );
    }
    assert_eq!(value(&dir, "COUNT(*)", "FROM P.dbo.t WHERE k >= 9000"), "3");
    checks_clean(&dir, "P");

    restore_full(&dir, "Q", "full.bak");
    let out = ok(
        &dir,
        "RESTORE LOG Q FROM DISK = 'l.trn' WITH RECOVERY, STOPAT = '2099-01-01T00:00:00';",
    );
    assert!(
        out.contains("left in the restoring state"),
        "Msg 4322: {out}"
    );
    assert_eq!(
        value(&dir, "state_desc", "FROM sys.databases WHERE name = 'Q'"),
        "RESTORING"
    );
    let out = ok(&dir, "RESTORE DATABASE Q WITH RECOVERY;");
    assert!(
        out.contains("RESTORE DATABASE successfully processed 0 pages"),
        "{out}"
    );
    assert_eq!(fingerprint(&dir, "Q"), after);
    assert_eq!(
        value(&dir, "COUNT(*)", "FROM Q.dbo.t WHERE k IN (7000, 7001)"),
        "2"
    );
    checks_clean(&dir, "Q");
    refused(&dir, "RESTORE DATABASE Q WITH RECOVERY;", 3117);
    refused(
        &dir,
        "RESTORE LOG P FROM DISK = 'l.trn' WITH STOPAT = 'not a time';",
        241,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proves differential and compressed backups: a differential needs a full backup (3035),
/// copies fewer pages than the full one, and restores onto the full one it builds on
/// (RESTORE HEADERONLY shows type 5 and its base); onto another full one it is refused
/// (3136), as onto a database online (3117). COMPRESSION makes smaller files, recorded in
/// msdb with backup_size above compressed_backup_size, that verify and restore to the same
/// rows.
#[test]
fn differential_and_compressed_backups() {
    let dir = prepare("diff");
    ok(&dir, "CREATE DATABASE Fresh;");
    refused(
        &dir,
        "BACKUP DATABASE Fresh TO DISK = 'x.bak' WITH DIFFERENTIAL;",
        3035,
    );
    insert_rows(&dir, "t", 1000, 20000);
    ok(
        &dir,
        "BACKUP DATABASE S TO DISK = 'plain.bak' WITH INIT, COPY_ONLY;",
    );
    let full = ok(
        &dir,
        "BACKUP DATABASE S TO DISK = 'full.bak' WITH INIT, COMPRESSION;",
    );
    ok(
        &dir,
        "USE S; UPDATE t SET v = 'changed' WHERE k BETWEEN 1000 AND 1020;",
    );
    insert_rows(&dir, "t", 30000, 30040);
    let diff = ok(
        &dir,
        "BACKUP DATABASE S TO DISK = 'diff.bak' WITH INIT, DIFFERENTIAL, COMPRESSION;",
    );
    assert!(
        diff.contains("BACKUP DATABASE WITH DIFFERENTIAL successfully processed"),
        "{diff}"
    );
    let pages = |out: &str| -> u64 {
        out.lines()
            .find(|l| l.contains("file 'S' on file"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{out}"))
    };
    assert!(pages(&diff) < pages(&full) / 2, "diff {diff}\nfull {full}");
    let source = fingerprint(&dir, "S");
    let size = |name: &str| {
        std::fs::metadata(dir.join("backup").join(name))
            .unwrap()
            .len()
    };
    assert!(
        size("full.bak") * 3 < size("plain.bak") * 2,
        "compressed {} plain {}",
        size("full.bak"),
        size("plain.bak")
    );
    let header = ok(
        &dir,
        "SET NOCOUNT ON; RESTORE HEADERONLY FROM DISK = 'diff.bak'; \
         RESTORE VERIFYONLY FROM DISK = 'diff.bak'; RESTORE VERIFYONLY FROM DISK = 'full.bak';",
    );
    assert_eq!(header.matches("is valid.").count(), 2, "{header}");
    assert!(header.contains("Database Differential"), "{header}");
    // msdb records both sizes: what the set holds, and what the compressed file takes.
    assert_eq!(
        value(
            &dir,
            "COUNT(*)",
            "FROM msdb.dbo.backupset WHERE database_name = 'S' \
             AND type IN ('D', 'I') AND backup_size > compressed_backup_size"
        ),
        "2"
    );

    restore_full(&dir, "D", "full.bak");
    ok(
        &dir,
        "RESTORE DATABASE D FROM DISK = 'diff.bak' WITH RECOVERY;",
    );
    assert_eq!(fingerprint(&dir, "D"), source);
    checks_clean(&dir, "D");
    refused(&dir, "RESTORE DATABASE D FROM DISK = 'diff.bak';", 3117);

    // A new full backup is a new base: the first differential no longer fits it.
    ok(&dir, "BACKUP DATABASE S TO DISK = 'full2.bak' WITH INIT;");
    restore_full(&dir, "E", "full2.bak");
    refused(
        &dir,
        "RESTORE DATABASE E FROM DISK = 'diff.bak' WITH RECOVERY;",
        3136,
    );
    ok(&dir, "RESTORE DATABASE E WITH RECOVERY;");
    assert_eq!(fingerprint(&dir, "E"), source);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proves a log backup damaged mid-file is refused part-way through RESTORE LOG and leaves
/// the database SUSPECT (never online, never recoverable from half a log): WITH RECOVERY
/// is refused (3117), the same step may be tried again, and a full restore replaces it.
#[test]
fn a_restore_failing_part_way_leaves_the_database_suspect() {
    let dir = prepare("failed");
    ok(&dir, "BACKUP DATABASE S TO DISK = 'full.bak' WITH INIT;");
    insert_rows(&dir, "t", 1000, 3000);
    ok(&dir, "BACKUP LOG S TO DISK = 'l.trn' WITH INIT;");
    // Damage the last log block's payload (the end block follows it).
    let path = dir.join("backup").join("l.trn");
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() - 3 * 4096 - 100;
    bytes[at] ^= 0x5a;
    std::fs::write(&path, &bytes).unwrap();
    restore_full(&dir, "F", "full.bak");
    refused(&dir, "RESTORE LOG F FROM DISK = 'l.trn';", 3241);
    assert_eq!(
        value(&dir, "state_desc", "FROM sys.databases WHERE name = 'F'"),
        "SUSPECT"
    );
    refused(&dir, "USE F;", 926);
    refused(&dir, "RESTORE DATABASE F WITH RECOVERY;", 3117);
    // The same step may be taken again (the damage is still there).
    refused(&dir, "RESTORE LOG F FROM DISK = 'l.trn';", 3241);
    assert_eq!(
        value(&dir, "state_desc", "FROM sys.databases WHERE name = 'F'"),
        "SUSPECT"
    );
    ok(
        &dir,
        "RESTORE DATABASE F FROM DISK = 'full.bak' WITH \
         MOVE 'S' TO 'F.mdf', MOVE 'S_log' TO 'F_log.ldf';",
    );
    assert_eq!(
        value(&dir, "state_desc", "FROM sys.databases WHERE name = 'F'"),
        "ONLINE"
    );
    assert_eq!(value(&dir, "COUNT(*)", "FROM F.dbo.t"), "500");
    checks_clean(&dir, "F");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proves system databases: msdb (and model) can be restored WITH REPLACE, keeping their
/// database id, and the restored msdb goes on recording history; master needs a
/// single-user instance (3108) and tempdb is never restored (3147).
#[test]
fn msdb_restores_over_itself_and_master_is_refused() {
    let dir = prepare("system");
    ok(
        &dir,
        "USE msdb; CREATE TABLE marker (k int PRIMARY KEY); INSERT INTO marker VALUES (1);",
    );
    ok(&dir, "BACKUP DATABASE msdb TO DISK = 'msdb.bak' WITH INIT;");
    ok(&dir, "USE msdb; INSERT INTO marker VALUES (2);");
    ok(
        &dir,
        "BACKUP DATABASE master TO DISK = 'master.bak' WITH INIT;",
    );
    refused(
        &dir,
        "RESTORE DATABASE master FROM DISK = 'master.bak' WITH REPLACE;",
        3108,
    );
    refused(
        &dir,
        "RESTORE DATABASE tempdb FROM DISK = 'msdb.bak' WITH REPLACE;",
        3147,
    );
    refused(&dir, "RESTORE DATABASE msdb FROM DISK = 'msdb.bak';", 3159);
    ok(
        &dir,
        "RESTORE DATABASE msdb FROM DISK = 'msdb.bak' WITH REPLACE;",
    );
    assert_eq!(value(&dir, "COUNT(*)", "FROM msdb.dbo.marker"), "1");
    assert_eq!(
        value(
            &dir,
            "database_id",
            "FROM sys.databases WHERE name = 'msdb'"
        ),
        "4"
    );
    // The restore itself is recorded in the msdb it restored.
    assert_eq!(
        value(
            &dir,
            "COUNT(*)",
            "FROM msdb.dbo.restorehistory WHERE destination_database_name = 'msdb'"
        ),
        "1"
    );
    checks_clean(&dir, "msdb");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proves a RESTORE LOG killed with SIGKILL at any point loses nothing: whatever the kill
/// left (the step not begun, part-way with the database SUSPECT and RECOVERY refused, or
/// done), taking the step again (or not, when it was done) and recovering gives exactly the
/// source's rows, and the copy checks clean.
#[test]
fn a_killed_restore_log_is_taken_again() {
    let dir = prepare("kill");
    ok(&dir, "BACKUP DATABASE S TO DISK = 'full.bak' WITH INIT;");
    // About 40 MB of log, of rows that do not compress, so the restore takes a while.
    ok(
        &dir,
        "SET NOCOUNT ON; USE S; CREATE TABLE big (k int PRIMARY KEY, v varchar(7900)); \
         DECLARE @i int = 0; \
         WHILE @i < 5000 BEGIN \
         INSERT INTO big VALUES (@i, REPLICATE(CONVERT(varchar(36), NEWID()), 200)); \
         SET @i += 1; END;",
    );
    insert_rows(&dir, "t", 1000, 1200);
    ok(&dir, "BACKUP LOG S TO DISK = 'l.trn' WITH INIT;");
    let source = fingerprint(&dir, "S");
    let big = value(
        &dir,
        "CAST(COUNT(*) AS varchar(10)) + '/' + CAST(SUM(LEN(v)) AS varchar(20))",
        "FROM S.dbo.big",
    );
    for (round, delay_ms) in [5u64, 40, 120, 400, 900].into_iter().enumerate() {
        let db = format!("K{round}");
        restore_full(&dir, &db, "full.bak");
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_extentdb"))
            .args(["exec", "-b", "--data-dir"])
            .arg(&dir)
            .args([
                "-Q",
                &format!("RESTORE LOG {db} FROM DISK = 'l.trn' WITH NORECOVERY;"),
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        let state = value(
            &dir,
            "state_desc",
            &format!("FROM sys.databases WHERE name = '{db}'"),
        );
        eprintln!("round {round}: killed after {delay_ms} ms: {state}");
        match state.as_str() {
            "SUSPECT" => {
                refused(&dir, &format!("RESTORE DATABASE {db} WITH RECOVERY;"), 3117);
                ok(
                    &dir,
                    &format!("RESTORE LOG {db} FROM DISK = 'l.trn' WITH NORECOVERY;"),
                );
            }
            "RESTORING" => {
                // Not begun, or done: taking it again applies it, or is refused as applied.
                let (code, out) = exec(
                    &dir,
                    &format!("RESTORE LOG {db} FROM DISK = 'l.trn' WITH NORECOVERY;"),
                );
                assert!(
                    code == 0 || out.contains("Msg 4326,"),
                    "round {round}: {out}"
                );
            }
            other => panic!("round {round}: state {other} after the kill"),
        }
        ok(&dir, &format!("RESTORE DATABASE {db} WITH RECOVERY;"));
        assert_eq!(
            fingerprint(&dir, &db),
            source,
            "round {round} (kill after {delay_ms} ms, {state})"
        );
        assert_eq!(
            value(
                &dir,
                "CAST(COUNT(*) AS varchar(10)) + '/' + CAST(SUM(LEN(v)) AS varchar(20))",
                &format!("FROM {db}.dbo.big")
            ),
            big
        );
        checks_clean(&dir, &db);
        ok(&dir, &format!("DROP DATABASE {db};"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proves the tail-log backup workflow SQL Server's 3159 points to: BACKUP LOG ... WITH
/// NORECOVERY needs the database to itself (3101), backs the log up to its very end and
/// leaves the database RESTORING (927 on USE, across restarts); the full backup then
/// restores over it without REPLACE, and the log backups, the tail last, bring back every
/// committed row.
#[test]
fn a_tail_log_backup_leaves_the_database_restoring() {
    let dir = prepare("tail");
    ok(&dir, "BACKUP DATABASE S TO DISK = 'full.bak' WITH INIT;");
    insert_rows(&dir, "t", 1000, 1100);
    ok(&dir, "BACKUP LOG S TO DISK = 'l1.trn' WITH INIT;");
    insert_rows(&dir, "t", 2000, 2100);
    let source = fingerprint(&dir, "S");
    refused(
        &dir,
        "USE S; BACKUP LOG S TO DISK = 'tail.trn' WITH NORECOVERY;",
        3101,
    );
    refused(
        &dir,
        "BACKUP DATABASE S TO DISK = 'x.bak' WITH NORECOVERY;",
        155,
    );
    ok(
        &dir,
        "BACKUP LOG S TO DISK = 'tail.trn' WITH INIT, NORECOVERY;",
    );
    assert_eq!(
        value(&dir, "state_desc", "FROM sys.databases WHERE name = 'S'"),
        "RESTORING"
    );
    refused(&dir, "USE S;", 927);
    ok(
        &dir,
        "RESTORE DATABASE S FROM DISK = 'full.bak' WITH NORECOVERY;",
    );
    ok(&dir, "RESTORE LOG S FROM DISK = 'l1.trn' WITH NORECOVERY;");
    ok(&dir, "RESTORE LOG S FROM DISK = 'tail.trn' WITH RECOVERY;");
    assert_eq!(fingerprint(&dir, "S"), source);
    checks_clean(&dir, "S");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proves a log that cannot grow fills under FULL recovery with SQL Server's 9002 naming
/// LOG_BACKUP as what holds it; the database still restarts (a checkpoint needs no log
/// space), and after BACKUP LOG and a checkpoint it takes writes again.
#[test]
fn a_full_log_waits_for_its_backup() {
    let dir = prepare("logfull");
    ok(
        &dir,
        "CREATE DATABASE W ON (NAME = W, FILENAME = 'W.mdf', SIZE = 8MB) \
         LOG ON (NAME = W_log, FILENAME = 'W_log.ldf', SIZE = 1MB, FILEGROWTH = 0); \
         ALTER DATABASE W SET RECOVERY FULL; USE W; \
         CREATE TABLE t (k int PRIMARY KEY, v varchar(400)); \
         BACKUP DATABASE W TO DISK = 'w.bak' WITH INIT;",
    );
    let out = refused(
        &dir,
        "SET NOCOUNT ON; USE W; DECLARE @i int = 0; \
         WHILE @i < 20000 BEGIN INSERT INTO t VALUES (@i, CONVERT(varchar(36), NEWID()) \
         + CONVERT(varchar(36), NEWID()) + CONVERT(varchar(36), NEWID())); SET @i += 1; END;",
        9002,
    );
    assert!(out.contains("is full due to 'LOG_BACKUP'."), "{out}");
    assert_eq!(
        value(
            &dir,
            "log_reuse_wait_desc",
            "FROM sys.databases WHERE name = 'W'"
        ),
        "LOG_BACKUP"
    );
    let rows: u32 = value(&dir, "COUNT(*)", "FROM W.dbo.t").parse().unwrap();
    assert!(rows > 100, "{rows} rows before the log filled");
    ok(
        &dir,
        "BACKUP LOG W TO DISK = 'w.trn' WITH INIT; USE W; CHECKPOINT; \
         INSERT INTO t VALUES (99999, 'after the log backup');",
    );
    assert_eq!(
        value(&dir, "COUNT(*)", "FROM W.dbo.t")
            .parse::<u32>()
            .unwrap(),
        rows + 1
    );
    checks_clean(&dir, "W");
    let _ = std::fs::remove_dir_all(&dir);
}
