//! The file-system procedures maintenance scripts call, through a real `extentdb serve`
//! and several TDS sessions (crates/sql/src/exec/file_system.rs): xp_create_subdir,
//! sys.dm_os_file_exists, xp_fileexist and xp_delete_file inside the backup roots, nothing
//! outside them, sysadmin (or VIEW SERVER STATE) only.

use std::time::Duration;

use extentdb_tds::client::{Client, ConnectOptions};

mod common;
use common::tds::{numbers, run, table, Server};

fn exists(c: &mut Client, path: &str) -> String {
    table(
        c,
        &format!("SELECT file_exists, file_is_a_directory, parent_directory_exists FROM sys.dm_os_file_exists(N'{path}')"),
    )
    .join(";")
}

#[test]
fn directories_are_made_and_old_backups_deleted_inside_the_roots() {
    let s = Server::start("xpfiles", &[]);
    let mut a = s.connect();
    let mut b = s.connect();
    // The first backup makes the backup root.
    run(
        &mut a,
        "CREATE DATABASE x; BACKUP DATABASE x TO DISK = 'first.bak'",
    );
    let root = s.dir.join("backup").canonicalize().unwrap();
    let dir = root.join("ola/full");
    let d = dir.display().to_string();
    assert_eq!(exists(&mut b, &d), "0,0,0");
    assert_eq!(
        table(
            &mut a,
            &format!("DECLARE @rc int = 7; EXEC @rc = dbo.xp_create_subdir N'{d}'; SELECT @rc")
        ),
        ["0"]
    );
    assert!(dir.is_dir());
    assert_eq!(exists(&mut b, &d), "0,1,1");
    assert_eq!(exists(&mut b, &format!("{d}/none.bak")), "0,0,1");

    // Two backups and a .trn, and a file that is no backup.
    run(&mut a, "BACKUP DATABASE x TO DISK = 'ola/full/old.bak'");
    run(&mut b, "BACKUP DATABASE x TO DISK = 'ola/full/old.trn'");
    std::fs::write(dir.join("notes.bak"), b"not a backup").unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let cutoff = table(&mut a, "SELECT CONVERT(nvarchar(23), GETDATE(), 126)")[0].clone();
    std::thread::sleep(Duration::from_millis(50));
    run(&mut a, "BACKUP DATABASE x TO DISK = 'ola/full/new.bak'");
    assert_eq!(exists(&mut b, &format!("{d}/old.bak")), "1,0,1");
    assert_eq!(
        table(&mut b, &format!("EXEC xp_fileexist N'{d}/old.trn'")),
        ["1,0,1"]
    );
    assert_eq!(
        table(
            &mut a,
            &format!(
                "DECLARE @rc int; EXEC @rc = dbo.xp_delete_file 0, N'{d}', N'bak', N'{cutoff}'; SELECT @rc"
            )
        ),
        ["0"]
    );
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["new.bak", "notes.bak", "old.trn"]);
    run(&mut a, "RESTORE VERIFYONLY FROM DISK = 'ola/full/new.bak'");

    // Outside the roots: nothing reported, made or deleted.
    let outside = std::env::temp_dir().join(format!("xdb-outside-{}", std::process::id()));
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("o.bak"), b"x").unwrap();
    let o = outside.display().to_string();
    assert_eq!(exists(&mut b, &o), "0,0,0");
    assert_eq!(exists(&mut b, &format!("{d}/../../../x")), "0,0,0");
    assert_eq!(
        numbers(&mut a, &format!("EXEC xp_create_subdir N'{o}/made'")),
        [22048]
    );
    assert!(!outside.join("made").exists());
    assert_eq!(
        numbers(
            &mut a,
            &format!("EXEC xp_delete_file 0, N'{o}', N'bak', N'2100-01-01'")
        ),
        [22048]
    );
    assert!(outside.join("o.bak").exists());
    assert_eq!(
        numbers(
            &mut a,
            &format!("EXEC xp_delete_file 1, N'{d}', N'txt', N'2100-01-01'")
        ),
        [40517]
    );
    std::fs::remove_dir_all(&outside).unwrap();

    // A login that is not sysadmin and has no VIEW SERVER STATE.
    run(
        &mut a,
        "CREATE LOGIN clerk WITH PASSWORD = 'Str0ng!Passw0rd'",
    );
    let mut clerk = Client::connect(
        &s.addr,
        &ConnectOptions {
            user: "clerk".into(),
            password: "Str0ng!Passw0rd".into(),
            timeout: Some(Duration::from_secs(30)),
            ..ConnectOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        numbers(&mut clerk, &format!("EXEC xp_create_subdir N'{d}/more'")),
        [229]
    );
    assert_eq!(
        numbers(
            &mut clerk,
            &format!("SELECT * FROM sys.dm_os_file_exists(N'{d}')")
        ),
        [300, 297]
    );
    assert!(!dir.join("more").exists());
}
