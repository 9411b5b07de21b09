//! BACKUP's transfer and media options through a real `extentdb serve` and several TDS
//! sessions (crates/sql/src/exec/backup_media.rs, storage backup_transfer.rs): BUFFERCOUNT
//! and MAXTRANSFERSIZE shape the writes (trace flag 3213 shows them) and the backups
//! restore whole; BLOCKSIZE, MEDIANAME and MEDIADESCRIPTION land in the media header
//! (RESTORE LABELONLY, msdb); EXPIREDATE and RETAINDAYS keep INIT off a set until SKIP;
//! bad values get SQL Server's messages and write nothing.

use extentdb_sql::convert::convert;
use extentdb_sql::exec::Output;
use extentdb_sql::types::{SqlType, Value};
use extentdb_tds::client::Client;

mod common;
use common::tds::{all_rows, assert_checkdb_clean, numbers, run, table, Server};

fn infos(c: &mut Client, sql: &str) -> Vec<String> {
    run(c, sql)
        .outputs
        .iter()
        .filter_map(|o| match o {
            Output::Info(m) => Some(m.text.clone()),
            _ => None,
        })
        .collect()
}

fn start(name: &str) -> (Server, Client) {
    let s = Server::start(name, &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "CREATE DATABASE b; CREATE TABLE b.dbo.t (id int PRIMARY KEY, pad char(2000));
         DECLARE @i int = 0;
         WHILE @i < 600 BEGIN INSERT INTO b.dbo.t VALUES (@i, REPLICATE('x', 2000)); SET @i += 1; END",
    );
    (s, c)
}

#[test]
fn bad_values_are_refused_and_write_nothing() {
    let (s, mut c) = start("bkbad");
    let long_name = format!("MEDIANAME = '{}'", "n".repeat(129));
    let cases: [(&str, &[i32]); 10] = [
        ("BLOCKSIZE = 1000", &[3253, 3013]),
        ("BLOCKSIZE = 256", &[3250, 3013]),
        ("BLOCKSIZE = 8192", &[40517, 3013]),
        ("MAXTRANSFERSIZE = 100000", &[3217, 3013]),
        ("MAXTRANSFERSIZE = 8388608", &[3250, 3013]),
        ("BUFFERCOUNT = 0", &[3250, 3013]),
        (
            "BUFFERCOUNT = 100000, MAXTRANSFERSIZE = 4194304",
            &[701, 3013],
        ),
        ("RETAINDAYS = 1, EXPIREDATE = '2030-01-01'", &[3031, 3013]),
        ("EXPIREDATE = 'not a date'", &[241, 3013]),
        (&long_name, &[103, 3013]),
    ];
    for (options, want) in cases {
        let sql = format!("BACKUP DATABASE b TO DISK = 'bad.bak' WITH {options}");
        let got = numbers(&mut c, &sql);
        // 3013 closes each; the first message is the option's.
        assert_eq!(got.first(), want.first(), "{options}");
        assert_eq!(got.last(), Some(&3013), "{options}");
    }
    assert!(!s.dir.join("backup/bad.bak").exists());
    run(&mut c, "BACKUP DATABASE b TO DISK = 'ok.bak'");
    assert_eq!(
        numbers(
            &mut c,
            "RESTORE VERIFYONLY FROM DISK = 'ok.bak' WITH BUFFERCOUNT = 2"
        ),
        [40517]
    );
}

/// Two sessions back up one database at once, each with its own buffers, while a third
/// inserts; trace flag 3213 shows each one's buffers; both backups restore whole.
#[test]
fn transfer_settings_shape_the_writes_and_restore_whole() {
    let (s, mut c) = start("bkxfer");
    run(&mut c, "DBCC TRACEON (3213, 3604, -1)");
    let addr = s.addr.clone();
    let writer = std::thread::spawn(move || {
        let mut w = common::tds::connect_at(&addr, Some("b"), 60).unwrap();
        for i in 1000..1200 {
            run(&mut w, &format!("INSERT INTO t VALUES ({i}, 'w')"));
        }
    });
    let backups: Vec<_> = [("one.bak", 1, 65_536), ("two.bak", 7, 262_144)]
        .into_iter()
        .map(|(file, count, size)| {
            let addr = s.addr.clone();
            std::thread::spawn(move || {
                let mut b = common::tds::connect_at(&addr, None, 120).unwrap();
                infos(
                    &mut b,
                    &format!(
                        "BACKUP DATABASE b TO DISK = '{file}' WITH BUFFERCOUNT = {count}, \
                         MAXTRANSFERSIZE = {size}, CHECKSUM"
                    ),
                )
            })
        })
        .collect();
    let lines: Vec<Vec<String>> = backups.into_iter().map(|h| h.join().unwrap()).collect();
    writer.join().unwrap();
    for (l, (count, kb)) in lines.iter().zip([(1, 64), (7, 256)]) {
        let has = |want: &str| l.iter().any(|x| x == want);
        assert!(
            has("Backup/Restore buffer configuration parameters"),
            "{l:?}"
        );
        assert!(
            has(&format!("BufferCount:                {count}")),
            "{l:?}"
        );
        assert!(
            has(&format!("MaxTransferSize:            {kb} KB")),
            "{l:?}"
        );
        assert!(l
            .iter()
            .any(|x| x.starts_with("BACKUP DATABASE successfully")));
    }
    for (file, copy) in [("one.bak", "b1"), ("two.bak", "b2")] {
        run(
            &mut c,
            &format!(
                "RESTORE DATABASE {copy} FROM DISK = '{file}' WITH CHECKSUM, \
                 MOVE 'b' TO '{copy}.mdf', MOVE 'b_log' TO '{copy}_log.ldf'"
            ),
        );
        assert_checkdb_clean(&mut c, copy, file);
        let n = table(
            &mut c,
            &format!("SELECT COUNT(*) FROM {copy}.dbo.t WHERE id < 1000"),
        );
        assert_eq!(n, ["600"], "{file}");
    }
}

#[test]
fn media_name_description_and_block_size_are_kept() {
    let (s, mut c) = start("bkmedia");
    run(
        &mut c,
        "BACKUP DATABASE b TO DISK = 'm.bak' WITH FORMAT, MEDIANAME = 'Weekly', \
         MEDIADESCRIPTION = 'rotation A', BLOCKSIZE = 512",
    );
    let label = table(&mut c, "RESTORE LABELONLY FROM DISK = 'm.bak'");
    assert_eq!(label.len(), 1);
    let cols: Vec<&str> = label[0].split(',').collect();
    assert_eq!(cols[0], "Weekly");
    assert_eq!((cols[2], cols[3], cols[5]), ("1", "1", "1"));
    assert_eq!(cols[7], "rotation A");
    assert_eq!(cols[8], "extentdb");
    let mut other = s.connect();
    assert_eq!(
        table(
            &mut other,
            "SELECT m.name, m.description, f.physical_block_size FROM msdb.dbo.backupmediaset m \
             JOIN msdb.dbo.backupmediafamily f ON f.media_set_id = m.media_set_id"
        ),
        ["Weekly,rotation A,512"]
    );
    // Another name is refused without SKIP and the file keeps its one set.
    assert_eq!(
        numbers(
            &mut other,
            "BACKUP DATABASE b TO DISK = 'm.bak' WITH MEDIANAME = 'Daily'"
        ),
        [4037, 3013]
    );
    assert_eq!(
        table(&mut c, "RESTORE HEADERONLY FROM DISK = 'm.bak'").len(),
        1
    );
    run(
        &mut other,
        "BACKUP DATABASE b TO DISK = 'm.bak' WITH MEDIANAME = 'WEEKLY'",
    );
    run(
        &mut other,
        "BACKUP DATABASE b TO DISK = 'm.bak' WITH MEDIANAME = 'Daily', SKIP",
    );
    assert_eq!(
        table(&mut c, "RESTORE HEADERONLY FROM DISK = 'm.bak'").len(),
        3
    );
    // INIT keeps the media header: its name stays.
    run(&mut c, "BACKUP DATABASE b TO DISK = 'm.bak' WITH INIT");
    let label = table(&mut c, "RESTORE LABELONLY FROM DISK = 'm.bak'");
    assert!(label[0].starts_with("Weekly,"), "{label:?}");
}

#[test]
fn expiration_keeps_init_off_until_skip() {
    let (_s, mut c) = start("bkexpire");
    run(
        &mut c,
        "BACKUP DATABASE b TO DISK = 'e.bak' WITH FORMAT, RETAINDAYS = 5, NAME = 'kept'",
    );
    let expected = table(
        &mut c,
        "SELECT CONVERT(char(10), DATEADD(day, 5, GETDATE()), 120)",
    );
    let rows = all_rows(&run(&mut c, "RESTORE HEADERONLY FROM DISK = 'e.bak'"));
    let day = |v: &Value| match convert(v, SqlType::VarChar(10), Some(120)) {
        Ok(Value::Text(t)) => t,
        other => panic!("{other:?}"),
    };
    let header = vec![day(&rows[0][3])];
    assert_eq!(header, expected);
    assert_eq!(
        table(
            &mut c,
            "SELECT CONVERT(char(10), expiration_date, 120) FROM msdb.dbo.backupset WHERE name = 'kept'"
        ),
        expected
    );
    // INIT over an unexpired set: 4030, and the set is still there, whole.
    let got = numbers(&mut c, "BACKUP DATABASE b TO DISK = 'e.bak' WITH INIT");
    assert_eq!(got, [4030, 3013]);
    run(&mut c, "RESTORE VERIFYONLY FROM DISK = 'e.bak'");
    // NOINIT appends beside it; INIT with SKIP overwrites both.
    run(&mut c, "BACKUP DATABASE b TO DISK = 'e.bak'");
    assert_eq!(
        table(&mut c, "RESTORE HEADERONLY FROM DISK = 'e.bak'").len(),
        2
    );
    run(
        &mut c,
        "BACKUP DATABASE b TO DISK = 'e.bak' WITH INIT, SKIP, EXPIREDATE = '2001-01-01'",
    );
    assert_eq!(
        table(&mut c, "RESTORE HEADERONLY FROM DISK = 'e.bak'").len(),
        1
    );
    // An expiration in the past holds nothing back.
    run(&mut c, "BACKUP DATABASE b TO DISK = 'e.bak' WITH INIT");
    assert_eq!(
        table(&mut c, "RESTORE HEADERONLY FROM DISK = 'e.bak'").len(),
        1
    );
}
