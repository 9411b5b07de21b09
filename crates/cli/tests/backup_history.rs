//! msdb's backup history as tools find it (crates/sql/src/exec/history.rs), through a real
//! `extentdb serve` and several TDS sessions: the tables are there before the first backup,
//! and msdb.dbo.sp_delete_backuphistory removes the sets older than a date with their media
//! sets and restores, in the caller's transaction, for sysadmin only.

use std::time::Duration;

use extentdb_tds::client::{Client, ConnectOptions};

mod common;
use common::tds::{numbers, run, table, Server};

const COUNTS: &str = "SELECT (SELECT COUNT(*) FROM msdb.dbo.backupset), \
    (SELECT COUNT(*) FROM msdb.dbo.backupmediaset), \
    (SELECT COUNT(*) FROM msdb.dbo.backupmediafamily), \
    (SELECT COUNT(*) FROM msdb.dbo.restorehistory)";

#[test]
fn history_tables_exist_before_the_first_backup() {
    let s = Server::start("histfresh", &[]);
    let mut a = s.connect();
    let mut b = s.connect_to(Some("msdb"));
    assert_eq!(table(&mut a, COUNTS), ["0,0,0,0"]);
    let names = table(
        &mut b,
        "SELECT name FROM sys.tables WHERE name IN ('backupset', 'backupmediaset', \
         'backupmediafamily', 'restorehistory') ORDER BY name",
    );
    assert_eq!(
        names,
        [
            "backupmediafamily",
            "backupmediaset",
            "backupset",
            "restorehistory"
        ]
    );
}

/// Three backups of one database to three files (three media sets), the first restored;
/// then the history before the third backup is deleted.
#[test]
fn sp_delete_backuphistory_removes_older_sets() {
    let s = Server::start("histdelete", &[]);
    let mut a = s.connect();
    run(
        &mut a,
        "CREATE DATABASE h; CREATE TABLE h.dbo.t (id int PRIMARY KEY)",
    );
    for n in 1..=3 {
        run(
            &mut a,
            &format!("BACKUP DATABASE h TO DISK = 'h{n}.bak' WITH NAME = 'set{n}'"),
        );
        // datetime's 3 ms steps: the sets' finish times must differ.
        std::thread::sleep(Duration::from_millis(50));
    }
    run(
        &mut a,
        "RESTORE DATABASE h1 FROM DISK = 'h1.bak' WITH MOVE 'h' TO 'h1.mdf', \
         MOVE 'h_log' TO 'h1_log.ldf'",
    );
    assert_eq!(table(&mut a, COUNTS), ["3,3,3,1"]);
    let before_third = "DECLARE @d datetime; SELECT @d = DATEADD(ms, -20, backup_finish_date) \
        FROM msdb.dbo.backupset WHERE name = 'set3'; \
        EXEC msdb.dbo.sp_delete_backuphistory @oldest_date = @d";

    // Refusals change nothing: no date (201), a login that is not sysadmin (229).
    let mut b = s.connect();
    assert_eq!(
        numbers(&mut b, "EXEC msdb.dbo.sp_delete_backuphistory"),
        [201]
    );
    run(
        &mut b,
        "CREATE LOGIN clerk WITH PASSWORD = 'Str0ng!Passw0rd'; \
         USE msdb; CREATE USER clerk FOR LOGIN clerk",
    );
    let mut clerk = login(&s, "clerk");
    assert_eq!(
        numbers(
            &mut clerk,
            "EXEC msdb.dbo.sp_delete_backuphistory '2100-01-01'"
        ),
        [229]
    );
    assert_eq!(table(&mut a, COUNTS), ["3,3,3,1"]);

    // In a transaction rolled back, the rows come back; others see the delete only after.
    run(&mut b, &format!("BEGIN TRANSACTION; {before_third}"));
    assert_eq!(table(&mut b, COUNTS), ["1,1,1,0"]);
    run(&mut b, "ROLLBACK");
    assert_eq!(table(&mut a, COUNTS), ["3,3,3,1"]);

    // Committed: set3 stays with its media set, the rest (and the restore of set1) go.
    let r = run(&mut b, before_third);
    assert!(
        r.outputs
            .iter()
            .all(|o| !matches!(o, extentdb_sql::exec::Output::Rows { .. })),
        "the procedure returns no result set"
    );
    assert_eq!(table(&mut a, COUNTS), ["1,1,1,0"]);
    assert_eq!(
        table(
            &mut a,
            "SELECT s.name, f.physical_device_name FROM msdb.dbo.backupset s \
             JOIN msdb.dbo.backupmediafamily f ON f.media_set_id = s.media_set_id"
        )
        .len(),
        1
    );
    assert_eq!(
        table(&mut a, "SELECT name FROM msdb.dbo.backupset"),
        ["set3"]
    );
    // History goes on being written after a delete.
    run(
        &mut a,
        "BACKUP DATABASE h TO DISK = 'h3.bak' WITH NAME = 'set4'",
    );
    assert_eq!(table(&mut b, COUNTS), ["2,1,1,0"]);
}

fn login(s: &Server, user: &str) -> Client {
    Client::connect(
        &s.addr,
        &ConnectOptions {
            user: user.into(),
            password: "Str0ng!Passw0rd".into(),
            timeout: Some(Duration::from_secs(30)),
            ..ConnectOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("login {user}: {e:?}"))
}
