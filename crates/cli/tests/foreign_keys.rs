//! FOREIGN KEY constraints (the SQL layer's foreign_keys.rs, storage's constraint.rs),
//! through real TDS sessions: the child side on INSERT, INSERT ... SELECT, UPDATE and
//! MERGE and the parent side on DELETE and UPDATE with SQL Server's Msg 547 and nothing
//! changed, NULL keys passing, the definition rules (1767, 1776, 1778, 8139, 1766),
//! ALTER TABLE ... ADD WITH CHECK / WITH NOCHECK and DROP CONSTRAINT, DROP TABLE (3726) and
//! TRUNCATE TABLE (4712) of a referenced table, the catalog views, the refusals (40517),
//! the keys surviving a kill -9, and sessions inserting children while others delete
//! parents.

use std::thread;

use extentdb_tds::client::Client;

mod common;
use common::tds::{
    assert_checkdb_clean, connect_at, numbers, restart, run, start_in_database, table,
};

/// (number, severity, state, text) of each error a batch gave.
fn failures(c: &mut Client, sql: &str) -> Vec<(i32, u8, u8, String)> {
    c.batch(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .errors()
        .map(|e| (e.number, e.severity, e.state, e.text.clone()))
        .collect()
}

/// The first error's text, asserting its number, severity and state.
fn refused(c: &mut Client, sql: &str, number: i32, severity: u8, state: u8) -> String {
    let f = failures(c, sql);
    assert!(!f.is_empty(), "{sql} did not fail");
    assert_eq!(
        (f[0].0, f[0].1, f[0].2),
        (number, severity, state),
        "{sql}: {f:?}"
    );
    f[0].3.clone()
}

const SETUP: &str = "CREATE TABLE parent (id INT PRIMARY KEY, name VARCHAR(20)); \
     CREATE TABLE child (id INT PRIMARY KEY, \
     pid INT CONSTRAINT FK_child_parent REFERENCES parent (id)); \
     INSERT INTO parent VALUES (1, 'one'), (2, 'two'), (3, 'three'); \
     INSERT INTO child VALUES (10, 1), (11, 1), (12, NULL)";

/// The child side: a row whose parent is missing is refused with 547 (16, 0) naming the
/// parent table and column, by INSERT, INSERT ... SELECT (none of its rows inserted),
/// UPDATE and MERGE; NULL keys pass.
#[test]
fn child_writes_need_their_parent() {
    let (_s, mut c) = start_in_database("fk-child", "fkdb", SETUP);
    let f = failures(&mut c, "INSERT INTO child VALUES (20, 9)");
    assert_eq!(f.iter().map(|e| e.0).collect::<Vec<_>>(), [547], "{f:?}");
    assert_eq!((f[0].1, f[0].2), (16, 0));
    assert_eq!(
        f[0].3,
        "The INSERT statement conflicted with the FOREIGN KEY constraint \"FK_child_parent\". \
         The conflict occurred in database \"fkdb\", table \"dbo.parent\", column 'id'."
    );
    run(&mut c, "INSERT INTO child VALUES (20, 2), (21, NULL)");
    let text = refused(
        &mut c,
        "INSERT INTO child SELECT v, v - 27 FROM (VALUES (28), (29), (30), (31)) AS s(v)",
        547,
        16,
        0,
    );
    assert!(text.contains("FK_child_parent"), "{text}");
    assert_eq!(
        table(&mut c, "SELECT COUNT(*) FROM child WHERE id >= 28"),
        ["0"]
    );
    let text = refused(&mut c, "UPDATE child SET pid = 7 WHERE id = 10", 547, 16, 0);
    assert!(
        text.starts_with("The UPDATE statement conflicted with the FOREIGN KEY"),
        "{text}"
    );
    // An UPDATE that does not touch the key is not checked; one to NULL passes.
    run(&mut c, "UPDATE child SET pid = NULL WHERE id = 11");
    run(&mut c, "UPDATE child SET pid = 3 WHERE id = 11");
    let f = numbers(
        &mut c,
        "MERGE child AS t USING (VALUES (40, 8)) AS s(id, pid) ON t.id = s.id \
         WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.pid);",
    );
    assert_eq!(f, [547]);
    assert_eq!(
        table(&mut c, "SELECT id, pid FROM child ORDER BY id"),
        ["10,1", "11,3", "12,NULL", "20,2", "21,NULL"]
    );
}

/// The parent side: DELETE or UPDATE of a referenced key is refused (547, REFERENCE
/// constraint, naming the child table and column) and changes nothing; an unreferenced
/// key may go; DROP TABLE (3726) and TRUNCATE TABLE (4712) of the parent are refused;
/// dropping the child first frees the parent.
#[test]
fn referenced_parents_stay() {
    let (_s, mut c) = start_in_database("fk-parent", "fkp", SETUP);
    let f = failures(&mut c, "DELETE FROM parent WHERE id = 1");
    assert_eq!((f[0].0, f[0].1, f[0].2), (547, 16, 0), "{f:?}");
    assert_eq!(
        f[0].3,
        "The DELETE statement conflicted with the REFERENCE constraint \"FK_child_parent\". \
         The conflict occurred in database \"fkp\", table \"dbo.child\", column 'pid'."
    );
    // A DELETE of several rows, one referenced: none deleted.
    assert_eq!(numbers(&mut c, "DELETE FROM parent"), [547]);
    assert_eq!(table(&mut c, "SELECT COUNT(*) FROM parent"), ["3"]);
    let text = refused(&mut c, "UPDATE parent SET id = 5 WHERE id = 1", 547, 16, 0);
    assert!(
        text.starts_with("The UPDATE statement conflicted with the REFERENCE"),
        "{text}"
    );
    // A change of a column other than the key, and of an unreferenced key, is fine.
    run(&mut c, "UPDATE parent SET name = 'uno' WHERE id = 1");
    run(&mut c, "UPDATE parent SET id = 4 WHERE id = 3");
    run(&mut c, "DELETE FROM parent WHERE id = 2");
    assert_eq!(
        table(&mut c, "SELECT id FROM parent ORDER BY id"),
        ["1", "4"]
    );
    let text = refused(&mut c, "DROP TABLE parent", 3726, 16, 1);
    assert_eq!(
        text,
        "Could not drop object 'dbo.parent' because it is referenced by a FOREIGN KEY constraint."
    );
    let text = refused(&mut c, "TRUNCATE TABLE parent", 4712, 16, 1);
    assert_eq!(
        text,
        "Cannot truncate table 'dbo.parent' because it is being referenced by a FOREIGN KEY \
         constraint."
    );
    assert_eq!(table(&mut c, "SELECT COUNT(*) FROM parent"), ["2"]);
    // Inside a transaction: the child dropped first lets the parent go in the same one.
    run(
        &mut c,
        "BEGIN TRAN; DROP TABLE child; DROP TABLE parent; ROLLBACK",
    );
    assert_eq!(table(&mut c, "SELECT COUNT(*) FROM child"), ["3"]);
    run(&mut c, "DROP TABLE child; DROP TABLE parent");
}

/// A self-referencing table: a row may reference itself or an earlier row, and the rows
/// of one INSERT each other's keys in any order (checked after the inserts, invariant 6;
/// a missing one fails the whole statement, in a transaction too); deleting a referenced
/// row is refused unless its referrers go in the same statement; TRUNCATE of it is
/// allowed (a self-reference does not stop it).
#[test]
fn self_references() {
    let (_s, mut c) = start_in_database(
        "fk-self",
        "fks",
        "CREATE TABLE emp (id INT PRIMARY KEY, boss INT REFERENCES emp)",
    );
    run(&mut c, "INSERT INTO emp VALUES (1, 1)");
    run(&mut c, "INSERT INTO emp VALUES (2, 1)");
    run(&mut c, "INSERT INTO emp VALUES (3, 2)");
    assert_eq!(numbers(&mut c, "INSERT INTO emp VALUES (4, 9)"), [547]);
    // Rows referencing later rows of the same statement, VALUES and SELECT alike.
    run(&mut c, "INSERT INTO emp VALUES (20, 21), (21, 22), (22, 1)");
    run(
        &mut c,
        "INSERT INTO emp SELECT id + 100, CASE WHEN id = 22 THEN 1 ELSE id + 101 END          FROM emp WHERE id >= 20",
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT id, boss FROM emp WHERE id >= 20 ORDER BY id"
        ),
        ["20,21", "21,22", "22,1", "120,121", "121,122", "122,1"]
    );
    let text = refused(
        &mut c,
        "INSERT INTO emp VALUES (30, 31), (31, 99)",
        547,
        16,
        0,
    );
    assert!(
        text.starts_with("The INSERT statement conflicted with the FOREIGN KEY"),
        "{text}"
    );
    assert_eq!(
        numbers(
            &mut c,
            "BEGIN TRAN; INSERT INTO emp VALUES (40, 1);              INSERT INTO emp VALUES (41, 42), (42, 98)"
        ),
        [547]
    );
    run(&mut c, "COMMIT");
    assert_eq!(
        table(
            &mut c,
            "SELECT id FROM emp WHERE id >= 30 AND id < 100 ORDER BY id"
        ),
        ["40"],
        "the failed statements left nothing; the transaction's earlier row stays"
    );
    run(&mut c, "DELETE FROM emp WHERE id >= 20");
    assert_eq!(numbers(&mut c, "DELETE FROM emp WHERE id = 2"), [547]);
    run(&mut c, "DELETE FROM emp WHERE id >= 2");
    assert_eq!(table(&mut c, "SELECT id, boss FROM emp"), ["1,1"]);
    run(&mut c, "TRUNCATE TABLE emp");
    let name = table(&mut c, "SELECT name, is_system_named FROM sys.foreign_keys");
    assert!(
        name[0].starts_with("FK__emp__boss__") && name[0].ends_with(",1"),
        "{name:?}"
    );
}

/// The rules at CREATE and ADD, each with SQL Server's message and nothing made: the
/// referenced table exists (1767), its columns are its primary key or a unique key
/// (1776), the counts (8139) and types (1778) match, and an index a key uses is not
/// dropped (3723); a temporary table is neither
/// referenced (1766) nor refers (40517); NOT FOR REPLICATION is refused (40517)
/// (NOCHECK CONSTRAINT: index_disable.rs) (the actions: foreign_key_actions.rs). A unique index may be
/// referenced, and omitted columns mean the primary key.
#[test]
fn definitions_are_checked() {
    let (_s, mut c) = start_in_database(
        "fk-rules",
        "fkr",
        "CREATE TABLE p (id INT PRIMARY KEY, code INT NOT NULL, big BIGINT, \
         a INT NOT NULL, b INT NOT NULL); \
         CREATE UNIQUE INDEX ux_code ON p (code); \
         CREATE UNIQUE INDEX ux_ab ON p (a, b)",
    );
    let text = refused(
        &mut c,
        "CREATE TABLE c1 (x INT CONSTRAINT FK_x REFERENCES nothere (id))",
        1767,
        16,
        0,
    );
    assert_eq!(
        text,
        "Foreign key 'FK_x' references invalid table 'nothere'."
    );
    let f = failures(
        &mut c,
        "CREATE TABLE c1 (x INT CONSTRAINT FK_x REFERENCES p (big))",
    );
    assert_eq!(
        f.iter().map(|e| e.0).collect::<Vec<_>>(),
        [1776, 1750],
        "{f:?}"
    );
    assert_eq!(
        f[0].3,
        "There are no primary or candidate keys in the referenced table 'dbo.p' that match \
         the referencing column list in the foreign key 'FK_x'."
    );
    let text = refused(
        &mut c,
        "CREATE TABLE c1 (x BIGINT CONSTRAINT FK_x REFERENCES p (id))",
        1778,
        16,
        0,
    );
    assert_eq!(
        text,
        "Column 'p.id' is not the same data type as referencing column 'c1.x' in foreign key \
         'FK_x'."
    );
    assert_eq!(
        numbers(
            &mut c,
            "CREATE TABLE c1 (x INT, FOREIGN KEY (x) REFERENCES p (a, b))"
        ),
        [8139, 1750]
    );
    assert_eq!(
        numbers(
            &mut c,
            "CREATE TABLE c1 (x INT, FOREIGN KEY (x) REFERENCES p (a))"
        ),
        [1776, 1750]
    );
    assert_eq!(
        table(&mut c, "SELECT COUNT(*) FROM sys.tables WHERE name = 'c1'"),
        ["0"]
    );
    run(&mut c, "CREATE TABLE #t (id INT PRIMARY KEY)");
    assert_eq!(
        numbers(&mut c, "CREATE TABLE c1 (x INT REFERENCES #t (id))"),
        [1766, 1750]
    );
    assert_eq!(
        numbers(&mut c, "CREATE TABLE #c (x INT REFERENCES p (id))"),
        [40517]
    );
    for sql in [
        "CREATE TABLE c1 (x INT REFERENCES p (id) NOT FOR REPLICATION)",
        "CREATE TABLE c1 (x INT REFERENCES otherdb.dbo.p (id))",
    ] {
        let text = refused(&mut c, sql, 40517, 16, 1);
        assert!(
            text.starts_with("extentdb does not support"),
            "{sql}: {text}"
        );
    }
    assert_eq!(
        table(&mut c, "SELECT COUNT(*) FROM sys.tables WHERE name = 'c1'"),
        ["0"]
    );
    // A unique index and a composite unique key, the latter with columns in another order;
    // explicit NO ACTION.
    run(
        &mut c,
        "CREATE TABLE c1 (x INT REFERENCES p (code) ON DELETE NO ACTION, y INT, z INT, \
         CONSTRAINT FK_yz FOREIGN KEY (z, y) REFERENCES p (b, a), \
         w INT FOREIGN KEY REFERENCES p)",
    );
    run(&mut c, "INSERT INTO p VALUES (1, 100, 0, 7, 8)");
    run(&mut c, "INSERT INTO c1 VALUES (100, 7, 8, 1)");
    assert_eq!(
        numbers(&mut c, "INSERT INTO c1 VALUES (100, 8, 7, 1)"),
        [547]
    );
    assert_eq!(
        numbers(&mut c, "INSERT INTO c1 VALUES (1, NULL, NULL, 1)"),
        [547]
    );
    assert_eq!(
        numbers(&mut c, "INSERT INTO c1 VALUES (100, NULL, NULL, 2)"),
        [547]
    );
    assert_eq!(numbers(&mut c, "DELETE FROM p"), [547]);
    let text = refused(&mut c, "DROP INDEX ux_code ON p", 3723, 16, 4);
    assert!(
        text.ends_with("It is being used for FOREIGN KEY constraint enforcement."),
        "{text}"
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT COUNT(*) FROM sys.indexes WHERE name = 'ux_code'"
        ),
        ["1"]
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT k.name, k.key_index_id, fc.constraint_column_id, fc.parent_column_id, \
             fc.referenced_column_id FROM sys.foreign_keys k JOIN sys.foreign_key_columns fc \
             ON fc.constraint_object_id = k.object_id WHERE k.name = 'FK_yz' \
             ORDER BY fc.constraint_column_id"
        ),
        ["FK_yz,3,1,3,5", "FK_yz,3,2,2,4"]
    );
}

/// ALTER TABLE ... ADD FOREIGN KEY: WITH CHECK (the default) over a row without parent
/// fails (547, ALTER TABLE statement) and adds nothing; WITH NOCHECK adds it untrusted;
/// DROP CONSTRAINT removes it. The views list it (sys.foreign_keys, sys.objects 'F').
#[test]
fn alter_table_add_and_drop() {
    let (_s, mut c) = start_in_database(
        "fk-alter",
        "fka",
        "CREATE TABLE p (id INT PRIMARY KEY); INSERT INTO p VALUES (1); \
         CREATE TABLE c (id INT PRIMARY KEY, pid INT); \
         INSERT INTO c VALUES (1, 1), (2, 5)",
    );
    let text = refused(
        &mut c,
        "ALTER TABLE c ADD CONSTRAINT FK_c_p FOREIGN KEY (pid) REFERENCES p (id)",
        547,
        16,
        0,
    );
    assert_eq!(
        text,
        "The ALTER TABLE statement conflicted with the FOREIGN KEY constraint \"FK_c_p\". The \
         conflict occurred in database \"fka\", table \"dbo.p\", column 'id'."
    );
    assert_eq!(
        table(&mut c, "SELECT COUNT(*) FROM sys.foreign_keys"),
        ["0"]
    );
    run(
        &mut c,
        "ALTER TABLE c WITH NOCHECK ADD CONSTRAINT FK_c_p FOREIGN KEY (pid) REFERENCES p (id)",
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT k.name, k.type, k.type_desc, c.name, p.name, key_index_id, is_disabled, \
             is_not_trusted, delete_referential_action, delete_referential_action_desc, \
             update_referential_action_desc, is_system_named FROM sys.foreign_keys k \
             JOIN sys.tables c ON c.object_id = k.parent_object_id \
             JOIN sys.tables p ON p.object_id = k.referenced_object_id"
        ),
        ["FK_c_p,F ,FOREIGN_KEY_CONSTRAINT,c,p,1,0,1,0,NO_ACTION,NO_ACTION,0"]
    );
    assert_eq!(
        table(&mut c, "SELECT name FROM sys.objects WHERE type = 'F'"),
        ["FK_c_p"]
    );
    assert_eq!(numbers(&mut c, "INSERT INTO c VALUES (3, 6)"), [547]);
    // The untrusted row stays updatable in other ways; its key may not be set anew.
    assert_eq!(numbers(&mut c, "UPDATE c SET pid = 5 WHERE id = 2"), [547]);
    run(&mut c, "ALTER TABLE c DROP CONSTRAINT FK_c_p");
    assert_eq!(
        table(&mut c, "SELECT COUNT(*) FROM sys.foreign_keys"),
        ["0"]
    );
    run(&mut c, "INSERT INTO c VALUES (3, 6)");
    run(&mut c, "DELETE FROM c WHERE pid > 1");
    run(&mut c, "ALTER TABLE c ADD FOREIGN KEY (pid) REFERENCES p");
    assert_eq!(
        table(
            &mut c,
            "SELECT is_not_trusted, is_system_named FROM sys.foreign_keys"
        ),
        ["0,1"]
    );
    assert_eq!(numbers(&mut c, "DROP TABLE p"), [3726]);
    run(&mut c, "DROP TABLE c; DROP TABLE p");
}

/// Keys are catalog state: after a kill -9 and recovery they are listed and enforced,
/// WITH NOCHECK's distrust included.
#[test]
fn keys_survive_a_restart() {
    let (s, c) = start_in_database(
        "fk-restart",
        "fkrs",
        &format!(
            "{SETUP}; CREATE TABLE other (pid INT); INSERT INTO other VALUES (9); \
             ALTER TABLE other WITH NOCHECK ADD CONSTRAINT FK_other FOREIGN KEY (pid) \
             REFERENCES parent"
        ),
    );
    drop(c);
    let s = restart(s);
    let mut c = s.connect_to(Some("fkrs"));
    assert_eq!(
        table(
            &mut c,
            "SELECT name, is_not_trusted FROM sys.foreign_keys ORDER BY name"
        ),
        ["FK_child_parent,0", "FK_other,1"]
    );
    assert_eq!(numbers(&mut c, "INSERT INTO child VALUES (50, 9)"), [547]);
    assert_eq!(numbers(&mut c, "DELETE FROM parent WHERE id = 1"), [547]);
    assert_eq!(numbers(&mut c, "DROP TABLE parent"), [3726]);
    assert_checkdb_clean(&mut c, "fkrs", "after the restart");
}

/// The parent lookup seeks its clustered key (SET STATISTICS IO: scan count 0, as a seek
/// of one whole key counts) rather than scanning 3,000 parents; and it waits for a parent
/// another session's open transaction deleted: once that commits the child is refused
/// (547), once it rolls back the child goes in.
#[test]
fn lookups_seek_and_wait_for_open_deletes() {
    let parents: Vec<String> = (1..=3000).map(|i| format!("({i})")).collect();
    let (s, mut c) = start_in_database(
        "fk-seek",
        "fkw",
        &format!(
            "CREATE TABLE p (id INT PRIMARY KEY); \
             CREATE TABLE ch (id INT PRIMARY KEY, pid INT REFERENCES p (id)); \
             INSERT INTO p VALUES {}",
            parents.join(", ")
        ),
    );
    let r = run(
        &mut c,
        "SET STATISTICS IO ON; INSERT INTO ch VALUES (1, 2000)",
    );
    let io: Vec<String> = r
        .outputs
        .iter()
        .filter_map(|o| match o {
            extentdb_sql::exec::Output::Info(m) if m.text.starts_with("Table 'p'") => {
                Some(m.text.clone())
            }
            _ => None,
        })
        .collect();
    assert!(
        io.len() == 1 && io[0].starts_with("Table 'p'. Scan count 0, logical reads 2,"),
        "{io:?}"
    );
    run(&mut c, "SET STATISTICS IO OFF");
    for (end, want) in [("COMMIT", vec![547]), ("ROLLBACK", vec![])] {
        run(&mut c, "BEGIN TRAN; DELETE FROM p WHERE id = 5");
        let addr = s.addr.clone();
        let insert = thread::spawn(move || {
            let mut b = connect_at(&addr, Some("fkw"), 60).unwrap();
            numbers(&mut b, "INSERT INTO ch VALUES (5, 5)")
        });
        thread::sleep(std::time::Duration::from_millis(400));
        assert!(
            !insert.is_finished(),
            "the insert waits for the delete's transaction"
        );
        run(&mut c, end);
        assert_eq!(insert.join().unwrap(), want, "after {end}");
        if end == "COMMIT" {
            run(&mut c, "INSERT INTO p VALUES (5)");
        }
    }
    assert_eq!(
        table(&mut c, "SELECT id, pid FROM ch ORDER BY id"),
        ["1,2000", "5,5"]
    );
}

/// Several sessions at once: inserters add children of random parents while deleters
/// remove parents inside explicit transactions, some rolled back. Afterwards no child
/// references a missing parent, and DBCC CHECKDB is clean.
#[test]
fn concurrent_children_and_parent_deletes() {
    let parents: Vec<String> = (1..=60).map(|i| format!("({i})")).collect();
    let (s, mut c) = start_in_database(
        "fk-concurrent",
        "fkc",
        &format!(
            "CREATE TABLE p (id INT PRIMARY KEY); \
             CREATE TABLE ch (id INT PRIMARY KEY, pid INT REFERENCES p (id)); \
             INSERT INTO p VALUES {}",
            parents.join(", ")
        ),
    );
    let mut threads = Vec::new();
    for w in 0..2 {
        let addr = s.addr.clone();
        threads.push(thread::spawn(move || {
            let mut c = connect_at(&addr, Some("fkc"), 120).unwrap();
            for i in 0..60 {
                let pid = (i * 7 + w * 13) % 60 + 1;
                let sql = format!("INSERT INTO ch VALUES ({}, {pid})", w * 1000 + i);
                let n = numbers(&mut c, &sql);
                assert!(n.is_empty() || n == [547] || n == [1205], "{sql}: {n:?}");
            }
        }));
    }
    for d in 0..2 {
        let addr = s.addr.clone();
        threads.push(thread::spawn(move || {
            let mut c = connect_at(&addr, Some("fkc"), 120).unwrap();
            for i in 0..30 {
                let id = (i * 11 + d * 5) % 60 + 1;
                let end = if i % 3 == 0 { "ROLLBACK" } else { "COMMIT" };
                let n = numbers(
                    &mut c,
                    &format!(
                        "BEGIN TRAN; DELETE FROM p WHERE id = {id}; \
                         IF @@TRANCOUNT > 0 {end}"
                    ),
                );
                assert!(n.is_empty() || n == [547] || n == [1205], "{n:?}");
                run(&mut c, "IF @@TRANCOUNT > 0 ROLLBACK");
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        table(
            &mut c,
            "SELECT COUNT(*) FROM ch WHERE NOT EXISTS (SELECT 1 FROM p WHERE p.id = ch.pid)"
        ),
        ["0"]
    );
    let kept = table(&mut c, "SELECT COUNT(*) FROM ch");
    assert_ne!(kept, ["0"], "some children went in");
    assert_checkdb_clean(&mut c, "fkc", "after the sessions");
}
