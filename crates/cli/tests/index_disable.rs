//! ALTER INDEX ... DISABLE of an index a constraint needs (exec/alter_index.rs, storage's
//! index.rs invariants 7 and 8) and ALTER TABLE ... { CHECK | NOCHECK } CONSTRAINT
//! (exec/constraint_state.rs), through real TDS sessions: disabling a PRIMARY KEY's or
//! UNIQUE constraint's index, or a unique index a FOREIGN KEY references, disables every
//! key referencing it with SQL Server's Msg 1992; those keys stay disabled after the
//! rebuild until CHECK CONSTRAINT enables them (1989 while the index is disabled, 547 WITH
//! CHECK over an orphan); refusals change nothing; the marks survive a kill -9; DISABLE
//! waits for a writer's open transaction.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use extentdb_sql::exec::Output;
use extentdb_tds::client::{Client, Response};

mod common;
use common::tds::{
    all_rows, assert_checkdb_clean, connect_at, errors, int, numbers, restart, run,
    start_in_database, table,
};

const SETUP: &str = "CREATE TABLE p (id INT NOT NULL, code INT NOT NULL, \
         CONSTRAINT p_pk PRIMARY KEY NONCLUSTERED (id), CONSTRAINT p_code UNIQUE (code)); \
     CREATE TABLE c1 (cid INT PRIMARY KEY, pid INT CONSTRAINT fk_c1 REFERENCES p (id)); \
     CREATE TABLE c2 (cid INT PRIMARY KEY, code INT CONSTRAINT fk_c2 REFERENCES p (code)); \
     CREATE TABLE q (id INT PRIMARY KEY, k INT NOT NULL); CREATE UNIQUE INDEX q_k ON q (k); \
     CREATE TABLE c3 (cid INT PRIMARY KEY, k INT CONSTRAINT fk_c3 REFERENCES q (k), \
         n INT CONSTRAINT ck_n CHECK (n > 0)); \
     INSERT INTO p VALUES (1, 10), (2, 20), (3, 30); \
     INSERT INTO c1 VALUES (1, 1), (2, 2); INSERT INTO c2 VALUES (1, 10); \
     INSERT INTO q VALUES (1, 100), (2, 200); INSERT INTO c3 VALUES (1, 100, 1)";

/// Each informational message with a number (not PRINT): (number, text).
fn infos(r: &Response) -> Vec<(i32, String)> {
    r.outputs
        .iter()
        .filter_map(|o| match o {
            Output::Info(m) if m.number != 0 => Some((m.number, m.text.clone())),
            _ => None,
        })
        .collect()
}

/// sys.foreign_keys' name, is_disabled, is_not_trusted, by name.
fn keys(c: &mut Client) -> Vec<String> {
    table(
        c,
        "SELECT name, is_disabled, is_not_trusted FROM sys.foreign_keys ORDER BY name",
    )
}

/// sys.indexes' name and is_disabled of the named table's nonclustered indexes.
fn disabled(c: &mut Client, t: &str) -> Vec<String> {
    table(
        c,
        &format!(
            "SELECT name, is_disabled FROM sys.indexes WHERE object_id = OBJECT_ID('{t}') \
             AND index_id > 1 ORDER BY name"
        ),
    )
}

fn count(c: &mut Client, sql: &str) -> i64 {
    int(&all_rows(&run(c, sql))[0][0])
}

/// Disabling a PRIMARY KEY NONCLUSTERED's index disables the key referencing it, with
/// Msg 1992's text; neither is enforced then; the key stays disabled after the rebuild
/// until CHECK CONSTRAINT (1989 while the index is disabled, 547 WITH CHECK over an
/// orphan row); DROP and TRUNCATE TABLE of the parent still count the disabled key.
#[test]
fn disabling_a_key_index_disables_its_foreign_keys() {
    let (_s, mut c) = start_in_database("ixd-keys", "ixd", SETUP);
    let r = run(&mut c, "ALTER INDEX p_pk ON p DISABLE");
    assert_eq!(
        infos(&r),
        [(
            1992,
            "Warning: Foreign key 'fk_c1' on table 'c1' referencing table 'p' was disabled \
             as a result of disabling the index 'p_pk'."
                .to_string()
        )]
    );
    assert_eq!(disabled(&mut c, "p"), ["p_code,0", "p_pk,1"]);
    assert_eq!(keys(&mut c), ["fk_c1,1,1", "fk_c2,0,0", "fk_c3,0,0"]);
    // Neither side of fk_c1 is checked, and the disabled PRIMARY KEY takes a repeat.
    run(
        &mut c,
        "INSERT INTO c1 VALUES (3, 99); DELETE FROM p WHERE id = 2; \
         INSERT INTO p VALUES (1, 11)",
    );
    assert_eq!(numbers(&mut c, "INSERT INTO c2 VALUES (2, 99)"), [547]);
    assert_eq!(numbers(&mut c, "DROP TABLE p"), [3726]);
    assert_eq!(numbers(&mut c, "TRUNCATE TABLE p"), [4712]);
    assert_eq!(numbers(&mut c, "DROP INDEX p_pk ON p"), [3723]);
    assert_eq!(
        errors(&mut c, "ALTER TABLE c1 CHECK CONSTRAINT fk_c1"),
        [(1989, 16, 1), (4916, 16, 0)]
    );
    // No new key references through the disabled index.
    assert_eq!(
        numbers(
            &mut c,
            "ALTER TABLE c3 ADD CONSTRAINT fk_new FOREIGN KEY (k) REFERENCES p (id)"
        ),
        [1776, 1750]
    );
    assert_eq!(numbers(&mut c, "ALTER INDEX p_pk ON p REBUILD"), [1505]);
    run(
        &mut c,
        "DELETE FROM p WHERE code = 11; ALTER INDEX p_pk ON p REBUILD",
    );
    assert_eq!(disabled(&mut c, "p"), ["p_code,0", "p_pk,0"]);
    assert_eq!(
        keys(&mut c)[0],
        "fk_c1,1,1",
        "a rebuild enables only the index"
    );
    assert_eq!(numbers(&mut c, "INSERT INTO p VALUES (1, 12)"), [2627]);
    // WITH CHECK over the orphans (c1's 2 and 99): 547, nothing changes.
    assert_eq!(
        numbers(&mut c, "ALTER TABLE c1 WITH CHECK CHECK CONSTRAINT fk_c1"),
        [547]
    );
    assert_eq!(keys(&mut c)[0], "fk_c1,1,1");
    // A plain CHECK enables it untrusted; WITH CHECK, once the orphans are gone, trusts it.
    run(&mut c, "ALTER TABLE c1 CHECK CONSTRAINT fk_c1");
    assert_eq!(keys(&mut c)[0], "fk_c1,0,1");
    assert_eq!(numbers(&mut c, "INSERT INTO c1 VALUES (4, 98)"), [547]);
    run(
        &mut c,
        "DELETE FROM c1 WHERE pid IN (2, 99); ALTER TABLE c1 WITH CHECK CHECK CONSTRAINT fk_c1",
    );
    assert_eq!(keys(&mut c)[0], "fk_c1,0,0");
    assert_eq!(numbers(&mut c, "DELETE FROM p WHERE id = 1"), [547]);
    assert_checkdb_clean(&mut c, "ixd", "after the keys are enabled again");
}

/// ALL on a heap disables both constraint indexes and each key referencing them (one
/// 1992 each); a UNIQUE index a key references (not a constraint) does the same.
#[test]
fn all_and_unique_indexes_disable_their_keys() {
    let (_s, mut c) = start_in_database("ixd-all", "ixd", SETUP);
    let r = run(&mut c, "ALTER INDEX ALL ON p DISABLE");
    let got: Vec<i32> = infos(&r).iter().map(|m| m.0).collect();
    assert_eq!(got, [1992, 1992]);
    assert!(infos(&r)[1].1.contains("'fk_c2' on table 'c2'"), "{r:?}");
    assert_eq!(disabled(&mut c, "p"), ["p_code,1", "p_pk,1"]);
    assert_eq!(keys(&mut c), ["fk_c1,1,1", "fk_c2,1,1", "fk_c3,0,0"]);
    run(&mut c, "INSERT INTO c2 VALUES (2, 99)");
    // The clustered table's unique index q_k.
    let r = run(&mut c, "ALTER INDEX q_k ON q DISABLE");
    assert_eq!(infos(&r).len(), 1);
    assert!(infos(&r)[0]
        .1
        .contains("'fk_c3' on table 'c3' referencing table 'q'"));
    assert_eq!(keys(&mut c), ["fk_c1,1,1", "fk_c2,1,1", "fk_c3,1,1"]);
    // Disabling a disabled index says nothing more.
    assert!(infos(&run(&mut c, "ALTER INDEX q_k ON q DISABLE")).is_empty());
    run(
        &mut c,
        "ALTER INDEX ALL ON p REBUILD; ALTER INDEX ALL ON q REBUILD",
    );
    assert_eq!(keys(&mut c), ["fk_c1,1,1", "fk_c2,1,1", "fk_c3,1,1"]);
    // ALL names the table's CHECK constraints and FOREIGN KEYs: c2's orphan stops
    // WITH CHECK; a plain CHECK enables.
    assert_eq!(
        numbers(&mut c, "ALTER TABLE c2 WITH CHECK CHECK CONSTRAINT ALL"),
        [547]
    );
    run(
        &mut c,
        "ALTER TABLE c2 CHECK CONSTRAINT ALL; ALTER TABLE c3 WITH CHECK CHECK CONSTRAINT ALL",
    );
    assert_eq!(keys(&mut c), ["fk_c1,1,1", "fk_c2,0,1", "fk_c3,0,0"]);
    assert_checkdb_clean(&mut c, "ixd", "after ALL");
}

/// CHECK constraints disabled and enabled; names that are no constraint (4917) or a key
/// constraint (11415), each with 4916, and DISABLE without ALTER on a referencing table
/// (1971), change nothing.
#[test]
fn check_constraints_and_refusals() {
    let (s, mut c) = start_in_database("ixd-refuse", "ixd", SETUP);
    let checks = "SELECT name, is_disabled, is_not_trusted FROM sys.check_constraints";
    run(&mut c, "ALTER TABLE c3 NOCHECK CONSTRAINT ck_n");
    assert_eq!(table(&mut c, checks), ["ck_n,1,1"]);
    run(&mut c, "INSERT INTO c3 VALUES (2, 200, -5)");
    assert_eq!(
        numbers(&mut c, "ALTER TABLE c3 WITH CHECK CHECK CONSTRAINT ck_n"),
        [547]
    );
    assert_eq!(table(&mut c, checks), ["ck_n,1,1"]);
    run(&mut c, "ALTER TABLE c3 CHECK CONSTRAINT ck_n");
    assert_eq!(table(&mut c, checks), ["ck_n,0,1"]);
    assert_eq!(numbers(&mut c, "INSERT INTO c3 VALUES (3, 200, -6)"), [547]);
    run(
        &mut c,
        "DELETE FROM c3 WHERE n < 0; ALTER TABLE c3 WITH CHECK CHECK CONSTRAINT ck_n",
    );
    assert_eq!(table(&mut c, checks), ["ck_n,0,0"]);
    for (sql, want) in [
        (
            "ALTER TABLE c3 NOCHECK CONSTRAINT fk_c3, nope",
            vec![(4917, 16, 0), (4916, 16, 0)],
        ),
        (
            "ALTER TABLE p NOCHECK CONSTRAINT p_pk",
            vec![(11415, 16, 1), (4916, 16, 0)],
        ),
        (
            "ALTER TABLE p NOCHECK CONSTRAINT p_code",
            vec![(11415, 16, 1), (4916, 16, 0)],
        ),
        (
            "ALTER TABLE nope NOCHECK CONSTRAINT ALL",
            vec![(4902, 16, 1)],
        ),
        ("ALTER TABLE c3 NOCHECK fk_c3", vec![(102, 15, 1)]),
    ] {
        assert_eq!(errors(&mut c, sql), want, "{sql}");
    }
    assert_eq!(
        numbers(&mut c, "BEGIN TRAN; ALTER TABLE c3 NOCHECK CONSTRAINT ALL"),
        [40517]
    );
    run(&mut c, "IF @@TRANCOUNT > 0 ROLLBACK");
    assert_eq!(keys(&mut c), ["fk_c1,0,0", "fk_c2,0,0", "fk_c3,0,0"]);
    // A user with ALTER on p but not on c1 cannot disable the key index c1 references.
    run(
        &mut c,
        "CREATE LOGIN alterer WITH PASSWORD = 'Ixd-Test-Pass-1'; \
         CREATE USER alterer FOR LOGIN alterer; GRANT ALTER ON p TO alterer",
    );
    let mut alterer = Client::connect(
        &s.addr,
        &extentdb_tds::client::ConnectOptions {
            user: "alterer".into(),
            password: "Ixd-Test-Pass-1".into(),
            database: Some("ixd".into()),
            timeout: Some(Duration::from_secs(60)),
            ..Default::default()
        },
    )
    .unwrap_or_else(|_| panic!("alterer's login"));
    assert_eq!(
        errors(&mut alterer, "ALTER INDEX p_pk ON p DISABLE"),
        [(1971, 16, 1)]
    );
    assert_eq!(disabled(&mut c, "p"), ["p_code,0", "p_pk,0"]);
    assert_eq!(keys(&mut c), ["fk_c1,0,0", "fk_c2,0,0", "fk_c3,0,0"]);
}

/// A committed DISABLE and NOCHECK survive a kill -9: the index, its key and the CHECK
/// constraint are still disabled after recovery, and in a backup restored as another
/// database, CHECKDB is clean, and a rebuild brings every row back into the index.
#[test]
fn disabled_marks_survive_kill_9() {
    let (s, mut c) = start_in_database("ixd-kill", "ixd", SETUP);
    run(
        &mut c,
        "ALTER INDEX p_code ON p DISABLE; ALTER TABLE c3 NOCHECK CONSTRAINT ck_n; \
         INSERT INTO c2 VALUES (5, 50)",
    );
    drop(c);
    let s = restart(s);
    let mut c = s.connect_to(Some("ixd"));
    assert_eq!(disabled(&mut c, "p"), ["p_code,1", "p_pk,0"]);
    assert_eq!(keys(&mut c), ["fk_c1,0,0", "fk_c2,1,1", "fk_c3,0,0"]);
    assert_eq!(
        table(&mut c, "SELECT is_disabled FROM sys.check_constraints"),
        ["1"]
    );
    assert_checkdb_clean(&mut c, "ixd", "after the restart");
    // A backup restored as another database keeps the marks.
    run(
        &mut c,
        "BACKUP DATABASE ixd TO DISK = 'ixd.bak';          RESTORE DATABASE ixd2 FROM DISK = 'ixd.bak'          WITH MOVE 'ixd' TO 'ixd2.mdf', MOVE 'ixd_log' TO 'ixd2_log.ldf'",
    );
    let mut copy = s.connect_to(Some("ixd2"));
    assert_eq!(disabled(&mut copy, "p"), ["p_code,1", "p_pk,0"]);
    assert_eq!(keys(&mut copy), ["fk_c1,0,0", "fk_c2,1,1", "fk_c3,0,0"]);
    assert_checkdb_clean(&mut copy, "ixd2", "after the restore");
    run(&mut c, "ALTER INDEX p_code ON p REBUILD");
    let rows = count(
        &mut c,
        "SELECT p.rows FROM sys.partitions AS p JOIN sys.indexes AS i \
         ON i.object_id = p.object_id AND i.index_id = p.index_id \
         WHERE i.name = 'p_code'",
    );
    assert_eq!(rows, 3);
    assert_checkdb_clean(&mut c, "ixd", "after the rebuild");
}

/// Runs `open` in a second session's open transaction, then `disable` in a third: the
/// DISABLE must still wait after 700 ms, and end once the transaction commits; the
/// number of 1992 messages it gave.
fn disable_waits_for(s: &common::tds::Server, open: &str, disable: &str) -> usize {
    let mut writer = s.connect_to(Some("ixd"));
    run(&mut writer, &format!("BEGIN TRAN; {open}"));
    let done = Arc::new(AtomicBool::new(false));
    let (addr, flag, sql) = (s.addr.clone(), done.clone(), disable.to_string());
    let disabler = thread::spawn(move || {
        let mut d = connect_at(&addr, Some("ixd"), 120).unwrap();
        let r = run(&mut d, &sql);
        flag.store(true, Ordering::SeqCst);
        infos(&r).len()
    });
    thread::sleep(Duration::from_millis(700));
    assert!(!done.load(Ordering::SeqCst), "{disable} waited for {open}");
    run(&mut writer, "COMMIT");
    disabler.join().unwrap()
}

/// DISABLE takes Sch-M: a writer's open transaction on the table, and a child writer's
/// (whose FOREIGN KEY lookup holds the parent key's S lock), hold it off until they
/// commit; the committed rows are in the index the rebuild fills, and the child's row
/// stays.
#[test]
fn disable_waits_for_writers_transactions() {
    let (s, mut c) = start_in_database("ixd-wait", "ixd", SETUP);
    let n = disable_waits_for(
        &s,
        "INSERT INTO p VALUES (4, 40)",
        "ALTER INDEX p_pk ON p DISABLE",
    );
    assert_eq!(n, 1);
    assert_eq!(disabled(&mut c, "p"), ["p_code,0", "p_pk,1"]);
    let n = disable_waits_for(
        &s,
        "INSERT INTO c2 VALUES (7, 40)",
        "ALTER INDEX p_code ON p DISABLE",
    );
    assert_eq!(n, 1);
    assert_eq!(disabled(&mut c, "p"), ["p_code,1", "p_pk,1"]);
    assert_eq!(keys(&mut c), ["fk_c1,1,1", "fk_c2,1,1", "fk_c3,0,0"]);
    run(&mut c, "ALTER INDEX ALL ON p REBUILD");
    assert_eq!(
        count(&mut c, "SELECT COUNT(*) FROM p WHERE id = 4 AND code = 40"),
        1
    );
    assert_eq!(count(&mut c, "SELECT COUNT(*) FROM c2 WHERE code = 40"), 1);
    assert_checkdb_clean(&mut c, "ixd", "after the waits");
}
