//! `extentdb exec`'s sqlcmd options through the real binary: -b, -T, -d, -Q, standard input,
//! GO n, and setting up an instance where there is none.

use std::io::Write;
use std::process::{Command, Stdio};

fn run(dir: &std::path::Path, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_extentdb"))
        .args(["exec", "--data-dir"])
        .arg(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.unwrap_or("").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Proves exec sets up a missing instance and says so, reads standard input, repeats a
/// batch with GO n, keeps -T flags global, starts in the -d database, and under -b stops at
/// the first error of severity 11 or more with exit code 1 (and not without -b).
#[test]
fn sqlcmd_options() {
    let dir = std::env::temp_dir().join(format!("xdb-exec-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (code, out, err) = run(&dir, &[], Some("PRINT 'hello'\nGO 3\n"));
    assert_eq!(code, 0);
    assert!(err.contains("set one up with default settings"), "{err}");
    assert_eq!(out.matches("hello").count(), 3, "{out}");
    let (_, out, err) = run(
        &dir,
        &[
            "-T",
            "3604",
            "-T",
            "1806",
            "-Q",
            "DBCC TRACESTATUS(-1) WITH NO_INFOMSGS",
        ],
        None,
    );
    assert!(!err.contains("set one up"), "set up twice: {err}");
    let flags: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.parse::<u32>().is_ok())
        .collect();
    assert_eq!(flags, ["1806", "3604"], "{out}");
    let (_, out, _) = run(&dir, &["-d", "model", "-Q", "SELECT DB_NAME() AS db"], None);
    assert!(
        out.contains("Changed database context to 'model'.")
            && out.lines().any(|l| l.trim() == "model"),
        "{out}"
    );
    let script = "SELECT 1 AS a\nGO\nUSE NoSuchDb\nGO\nPRINT 'after the error'\nGO\n";
    let (code, out, _) = run(&dir, &["-b"], Some(script));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("Msg 911, Level 16, State 1, Line 1") && !out.contains("after the error"),
        "{out}"
    );
    let (code, out, _) = run(&dir, &[], Some(script));
    assert_eq!(code, 0);
    assert!(out.contains("after the error"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}
