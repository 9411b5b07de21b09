//! DBCC PAGE beyond the golden script (`golden/dbcc_page.sql`): `extentdb inspect` on the
//! files of a stopped instance, and seed 003's walk of a JunkData database's pages.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn extentdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_extentdb"))
        .args(args)
        .output()
        .unwrap()
}

fn instance(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xdb-dbccpage-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = extentdb(&[
        "setup",
        "--data-dir",
        dir.to_str().unwrap(),
        "--tempdb-files",
        "1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// Runs a script through `extentdb exec` (the instance stops when it ends).
fn exec(dir: &Path, script: &str) -> String {
    let data = dir.join("data").canonicalize().unwrap();
    let path = dir.join("script.sql");
    std::fs::write(&path, script.replace("$(DATA)", data.to_str().unwrap())).unwrap();
    let out = extentdb(&[
        "exec",
        "-b",
        "--data-dir",
        dir.to_str().unwrap(),
        "-i",
        path.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The bytes of a DBCC PAGE hex dump: every `OFFSET:   hex groups  ascii` line's hex.
fn dumped_bytes(text: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    for line in text.lines() {
        let Some((offset, rest)) = line.split_once(":   ") else {
            continue;
        };
        if offset.len() != 16 || !offset.chars().all(|c| c.is_ascii_hexdigit()) {
            continue;
        }
        let hex: String = rest.get(..44).unwrap_or(rest).split_whitespace().collect();
        for i in (0..hex.len()).step_by(2) {
            bytes.push(u8::from_str_radix(&hex[i..i + 2], 16).unwrap());
        }
    }
    bytes
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Proves `extentdb inspect` reads a stopped instance's data file directly: the row's text
/// is in the whole-page hex dump (printopt 2), printopt 3 names the column and its value
/// from the catalog, and a page beyond the file is Msg 8968 with exit code 1.
#[test]
fn inspect_finds_a_rows_text_on_a_stopped_instance() {
    let dir = instance("inspect");
    exec(
        &dir,
        "CREATE DATABASE Insp ON (NAME = Insp, FILENAME = '$(DATA)/Insp.mdf', SIZE = 4MB) \
         LOG ON (NAME = Insp_log, FILENAME = '$(DATA)/Insp_log.ldf', SIZE = 4MB);\nGO\n\
         USE Insp;\nCREATE TABLE Notes (id int, txt varchar(100));\n\
         INSERT Notes VALUES (7, 'Zebra stripes are unique to each zebra');\nGO\n",
    );
    let args = |page: &str, opt: &str| {
        let d = dir.to_str().unwrap().to_string();
        let v = [
            "inspect",
            "--data-dir",
            &d,
            "--database",
            "Insp",
            "--file",
            "1",
            "--page",
            page,
            "--printopt",
            opt,
        ];
        extentdb(&v)
    };
    let out = args("24", "2");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for section in [
        "PAGE: (1:24)",
        "BUFFER:",
        "PAGE HEADER:",
        "Allocation Status",
        "DATA:",
    ] {
        assert!(text.contains(section), "{section} missing:\n{text}");
    }
    assert!(text.contains("m_pageId = (1:24)") && text.contains("m_type = 1"));
    assert!(text.contains("OFFSET TABLE:") && text.contains("0 (0x0) - 96 (0x60)"));
    let bytes = dumped_bytes(&text);
    assert_eq!(bytes.len(), 8192, "the whole page is dumped");
    assert!(contains(&bytes, b"Zebra stripes are unique to each zebra"));

    let out = args("24", "3");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Slot 0 Column 2 Offset 0xf Length 38 Length (physical) 38"),
        "{text}"
    );
    assert!(
        text.contains("txt = Zebra stripes are unique to each zebra"),
        "{text}"
    );
    assert!(text.contains("id = 7"));

    let out = args("512", "0");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Msg 8968") && err.contains("DBCC PAGE page (1:512)"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Proves seed 003's walk works here: DBCC PAGE of every page 200..4500 of a database
/// holding JunkData prints (no page is an error, formatted or not), and the rows' pages
/// show "Junk" in their hex dumps.
#[test]
fn seed003_walk_of_junkdata_pages() {
    let dir = instance("walk");
    let stdout = exec(
        &dir,
        "CREATE DATABASE J ON (NAME = J, FILENAME = '$(DATA)/J.mdf', SIZE = 40MB) \
         LOG ON (NAME = J_log, FILENAME = '$(DATA)/J_log.ldf', SIZE = 16MB);\nGO\n\
         USE J;\nCREATE TABLE JunkData (JunkDataID int identity, \
         JunkDataValue char(8000) DEFAULT REPLICATE('Junk', 2000));\nGO\n\
         SET NOCOUNT ON;\nDECLARE @Counter int = 0;\nWHILE @Counter < 300\nBEGIN\n\
         INSERT JunkData DEFAULT VALUES;\nSET @Counter = @Counter + 1\nEND\nGO\n\
         DBCC TRACEON (3604);\nDECLARE @p int = 200;\nWHILE @p <= 4500\nBEGIN\n\
         DBCC PAGE ('J', 1, @p, 1) WITH NO_INFOMSGS;\nSET @p = @p + 1\nEND\nGO\n",
    );
    assert!(
        !stdout.contains("Msg "),
        "{}",
        &stdout[..stdout.len().min(4000)]
    );
    let pages = stdout
        .lines()
        .filter(|l| l.starts_with("PAGE: (1:"))
        .count();
    assert_eq!(pages, 4301);
    let junk_pages = stdout
        .split("\nPAGE: (1:")
        .filter(|p| contains(&dumped_bytes(p), b"JunkJunkJunk"))
        .count();
    assert!(junk_pages >= 50, "only {junk_pages} pages show Junk");
    assert!(stdout.contains("m_pageId = (1:4500)") || stdout.contains("PAGE: (1:4500)"));
    std::fs::remove_dir_all(&dir).unwrap();
}
