//! A database whose files cannot be opened at start-up is marked SUSPECT, with the reason in
//! the error log; the instance and every other database stay usable, and the damaged
//! database can still be dropped.

use std::os::unix::fs::FileExt;
use std::process::Command;

fn exec(dir: &std::path::Path, sql: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_extentdb"))
        .args(["exec", "--data-dir"])
        .arg(dir)
        .args(["-Q", sql])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Proves both boot pages damaged gives SUSPECT (not a failed start), 926 on USE, a logged
/// reason, and a working DROP DATABASE.
#[test]
fn damaged_database_is_suspect_not_fatal() {
    let dir = std::env::temp_dir().join(format!("xdb-suspect-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    exec(&dir, "CREATE DATABASE Hurt; CREATE DATABASE Fine;");
    let mdf = dir.join("data/Hurt.mdf");
    let f = std::fs::OpenOptions::new().write(true).open(&mdf).unwrap();
    for page in [9u64, 10] {
        f.write_all_at(&[0xA5u8; 512], page * 8192 + 1024).unwrap();
    }
    drop(f);
    let out = exec(&dir, "SELECT name, state_desc FROM sys.databases WHERE name IN ('Hurt', 'Fine') ORDER BY name; USE Fine;");
    assert!(out.contains("Fine") && out.contains("ONLINE"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("Hurt") && l.contains("SUSPECT")),
        "{out}"
    );
    let out = exec(&dir, "USE Hurt;");
    assert!(out.contains("Msg 926, Level 14, State 1"), "{out}");
    let log = std::fs::read_to_string(dir.join("log/ERRORLOG")).unwrap();
    assert!(
        log.contains("Database 'Hurt' cannot be opened") && log.contains("incorrect checksum"),
        "{log}"
    );
    let out = exec(
        &dir,
        "DROP DATABASE Hurt; SELECT name FROM sys.databases WHERE name = 'Hurt';",
    );
    assert!(out.contains("(0 rows affected)"), "{out}");
    assert!(!mdf.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Proves a database whose log file is missing at start-up is RECOVERY_PENDING (not
/// SUSPECT: nothing is damaged), USE gives Msg 945, and it comes back once the file does.
#[test]
fn missing_log_file_is_recovery_pending() {
    let dir = std::env::temp_dir().join(format!("xdb-pending-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    exec(&dir, "CREATE DATABASE Gone;");
    let ldf = dir.join("data/Gone_log.ldf");
    let away = dir.join("Gone_log.ldf.away");
    std::fs::rename(&ldf, &away).unwrap();
    let out = exec(
        &dir,
        "SELECT name, state, state_desc FROM sys.databases WHERE name = 'Gone';",
    );
    assert!(out.contains("RECOVERY_PENDING"), "{out}");
    let out = exec(&dir, "USE Gone;");
    assert!(out.contains("Msg 945, Level 14, State 2"), "{out}");
    std::fs::rename(&away, &ldf).unwrap();
    let out = exec(
        &dir,
        "SELECT state_desc FROM sys.databases WHERE name = 'Gone'; USE Gone;",
    );
    assert!(out.contains("ONLINE") && !out.contains("Msg"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}
