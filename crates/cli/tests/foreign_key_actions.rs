//! FOREIGN KEY referential actions (the SQL layer's referential_actions.rs) through real TDS
//! sessions: ON DELETE and ON UPDATE CASCADE, SET NULL and SET DEFAULT, nested through
//! grandchildren, a failing cascaded change undoing the whole statement, the definition
//! rules (1761, 1762, 1785), sys.foreign_keys' action columns, the nesting bound, the
//! actions surviving a kill -9, and sessions deleting parents while others insert
//! children.

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

const SETUP: &str = "CREATE TABLE p (id INT PRIMARY KEY, name VARCHAR(10)); \
     CREATE TABLE c_cascade (id INT PRIMARY KEY, \
       pid INT REFERENCES p (id) ON DELETE CASCADE ON UPDATE CASCADE); \
     CREATE TABLE c_null (id INT PRIMARY KEY, \
       pid INT REFERENCES p (id) ON DELETE SET NULL ON UPDATE SET NULL); \
     CREATE TABLE c_default (id INT PRIMARY KEY, \
       pid INT NOT NULL DEFAULT 0 REFERENCES p (id) ON DELETE SET DEFAULT ON UPDATE SET DEFAULT); \
     INSERT INTO p VALUES (0, 'zero'), (1, 'one'), (2, 'two'), (3, 'three'); \
     INSERT INTO c_cascade VALUES (10, 1), (11, 1), (12, 2), (13, 3), (14, NULL); \
     INSERT INTO c_null VALUES (20, 1), (21, 2), (22, 3); \
     INSERT INTO c_default VALUES (30, 1), (31, 2), (32, 3)";

/// The three children's rows, for comparing.
fn children(c: &mut Client) -> [Vec<String>; 3] {
    [
        table(c, "SELECT id, pid FROM c_cascade ORDER BY id"),
        table(c, "SELECT id, pid FROM c_null ORDER BY id"),
        table(c, "SELECT id, pid FROM c_default ORDER BY id"),
    ]
}

/// DELETE of parents: CASCADE deletes their children, SET NULL and SET DEFAULT set the
/// key columns; @@ROWCOUNT counts the parent rows only; a NULL key is left alone; the
/// child keys are seen by later statements of the same transaction and undone by its
/// rollback; SET DEFAULT to a parent the statement deletes is 547; DELETE ... FROM acts.
#[test]
fn delete_actions() {
    let (_s, mut c) = start_in_database("fka-delete", "fkad", SETUP);
    run(&mut c, "BEGIN TRAN");
    assert_eq!(
        table(
            &mut c,
            "DELETE FROM p WHERE id IN (1, 2); SELECT @@ROWCOUNT"
        ),
        ["2"]
    );
    assert_eq!(
        children(&mut c),
        [
            vec!["13,3".to_string(), "14,NULL".into()],
            vec!["20,NULL".into(), "21,NULL".into(), "22,3".into()],
            vec!["30,0".into(), "31,0".into(), "32,3".into()],
        ]
    );
    run(&mut c, "ROLLBACK");
    assert_eq!(
        children(&mut c)[0].len(),
        5,
        "the rollback undoes the cascade"
    );
    run(&mut c, "DELETE FROM p WHERE id = 3");
    assert_eq!(
        children(&mut c),
        [
            vec![
                "10,1".to_string(),
                "11,1".into(),
                "12,2".into(),
                "14,NULL".into()
            ],
            vec!["20,1".into(), "21,2".into(), "22,NULL".into()],
            vec!["30,1".into(), "31,2".into(), "32,0".into()],
        ]
    );
    // The default parent itself cannot go: SET DEFAULT would point at a missing row.
    run(&mut c, "UPDATE c_default SET pid = 0 WHERE id = 30");
    let f = failures(&mut c, "DELETE FROM p WHERE id = 0");
    assert_eq!(f.iter().map(|e| e.0).collect::<Vec<_>>(), [547], "{f:?}");
    assert!(f[0].3.contains("FOREIGN KEY constraint"), "{f:?}");
    assert_eq!(table(&mut c, "SELECT COUNT(*) FROM p"), ["3"]);
    // DELETE ... FROM acts as DELETE does, even joined to the child it empties.
    run(
        &mut c,
        "DELETE p FROM p JOIN c_cascade AS k ON k.pid = p.id WHERE k.id = 12",
    );
    assert_eq!(
        children(&mut c),
        [
            vec!["10,1".to_string(), "11,1".into(), "14,NULL".into()],
            vec!["20,1".into(), "21,NULL".into(), "22,NULL".into()],
            vec!["30,0".into(), "31,0".into(), "32,0".into()],
        ]
    );
}

/// UPDATE of parent keys: CASCADE gives the children the new key, SET NULL and SET
/// DEFAULT set theirs; a statement that swaps two keys pairs each old key with its new
/// one (the children of 1 get 2 and those of 2 get 1), and one moving every key by ten
/// moves every child; an UPDATE leaving the key as it was changes no child.
#[test]
fn update_actions() {
    let (_s, mut c) = start_in_database("fka-update", "fkau", SETUP);
    run(&mut c, "UPDATE p SET name = 'uno', id = 1 WHERE id = 1");
    assert_eq!(
        children(&mut c)[1][0],
        "20,1",
        "an unchanged key acts on nothing"
    );
    run(
        &mut c,
        "UPDATE p SET id = CASE id WHEN 1 THEN 2 ELSE 1 END WHERE id IN (1, 2)",
    );
    assert_eq!(
        children(&mut c),
        [
            vec![
                "10,2".to_string(),
                "11,2".into(),
                "12,1".into(),
                "13,3".into(),
                "14,NULL".into()
            ],
            vec!["20,NULL".into(), "21,NULL".into(), "22,3".into()],
            vec!["30,0".into(), "31,0".into(), "32,3".into()],
        ]
    );
    run(&mut c, "UPDATE p SET id = id + 10 WHERE id > 0");
    assert_eq!(
        table(&mut c, "SELECT id, pid FROM c_cascade ORDER BY id"),
        ["10,12", "11,12", "12,11", "13,13", "14,NULL"]
    );
    assert_eq!(
        table(&mut c, "SELECT pid FROM c_null ORDER BY id"),
        ["NULL", "NULL", "NULL"]
    );
    assert_eq!(
        table(&mut c, "SELECT pid FROM c_default ORDER BY id"),
        ["0", "0", "0"]
    );
    // The children's keys follow through an index seek as well as through MERGE.
    run(
        &mut c,
        "CREATE INDEX ix_pid ON c_cascade (pid); \
         MERGE p USING (SELECT 13 AS id) AS s ON p.id = s.id \
         WHEN MATCHED THEN UPDATE SET id = 33;",
    );
    assert_eq!(
        table(&mut c, "SELECT id FROM c_cascade WHERE pid = 33"),
        ["13"]
    );
}

/// Cascades nest: deleting a grandparent deletes its children and their children, and
/// updating its key carries the key down two levels. A failing cascaded change (a CHECK
/// on SET DEFAULT's value, NOT NULL on a DEFAULT NULL, a NO ACTION key below a cascade,
/// a duplicate key) fails the statement with SQL Server's message, and nothing changes.
#[test]
fn cascades_nest_and_fail_as_one_statement() {
    let (_s, mut c) = start_in_database(
        "fka-nest",
        "fkan",
        "CREATE TABLE a (id INT PRIMARY KEY); \
         CREATE TABLE b (id INT PRIMARY KEY, aid INT REFERENCES a ON DELETE CASCADE \
           ON UPDATE CASCADE, UNIQUE (id, aid)); \
         CREATE TABLE g (id INT PRIMARY KEY, bid INT, aid INT, \
           FOREIGN KEY (bid, aid) REFERENCES b (id, aid) ON DELETE CASCADE ON UPDATE CASCADE); \
         INSERT INTO a VALUES (1), (2); \
         INSERT INTO b VALUES (10, 1), (11, 1), (20, 2); \
         INSERT INTO g VALUES (100, 10, 1), (101, 11, 1), (200, 20, 2)",
    );
    run(&mut c, "UPDATE a SET id = 5 WHERE id = 1");
    assert_eq!(
        table(&mut c, "SELECT id, bid, aid FROM g ORDER BY id"),
        ["100,10,5", "101,11,5", "200,20,2"]
    );
    run(&mut c, "DELETE FROM a WHERE id = 5");
    assert_eq!(table(&mut c, "SELECT id FROM b"), ["20"]);
    assert_eq!(table(&mut c, "SELECT id FROM g"), ["200"]);
    let before = |c: &mut Client| {
        [
            table(c, "SELECT id FROM a ORDER BY id"),
            table(c, "SELECT id, aid FROM b ORDER BY id"),
            table(c, "SELECT id, bid, aid FROM g ORDER BY id"),
        ]
    };
    let kept = before(&mut c);
    // A CHECK that SET DEFAULT's value breaks.
    run(
        &mut c,
        "INSERT INTO a VALUES (0); \
         CREATE TABLE d (id INT PRIMARY KEY, aid INT DEFAULT 0 CHECK (aid > 0) \
           REFERENCES a ON DELETE SET DEFAULT); \
         INSERT INTO d VALUES (1, 2)",
    );
    let f = failures(&mut c, "DELETE FROM a WHERE id = 2");
    assert_eq!(f.iter().map(|e| e.0).collect::<Vec<_>>(), [547], "{f:?}");
    assert!(f[0].3.contains("CHECK constraint"), "{f:?}");
    assert_eq!(before(&mut c)[1..], kept[1..], "b and g unchanged");
    assert_eq!(table(&mut c, "SELECT aid FROM d"), ["2"]);
    run(&mut c, "DROP TABLE d");
    // NOT NULL: a DEFAULT NULL on a NOT NULL column passes 1762 and fails at the write.
    run(
        &mut c,
        "CREATE TABLE e (id INT PRIMARY KEY, aid INT NOT NULL DEFAULT NULL \
           REFERENCES a ON UPDATE SET DEFAULT); INSERT INTO e VALUES (1, 2)",
    );
    let f = failures(&mut c, "UPDATE a SET id = 7 WHERE id = 2");
    assert_eq!(f.iter().map(|e| e.0).collect::<Vec<_>>(), [515], "{f:?}");
    assert_eq!(
        f[0].3,
        "Cannot insert the value NULL into column 'aid', table 'fkan.dbo.e'; column does \
         not allow nulls. UPDATE fails."
    );
    assert_eq!(before(&mut c)[1..], kept[1..]);
    run(&mut c, "DROP TABLE e");
    // A NO ACTION key below a cascade.
    run(
        &mut c,
        "CREATE TABLE n (id INT PRIMARY KEY, gid INT REFERENCES g); INSERT INTO n VALUES (1, 200)",
    );
    let f = failures(&mut c, "DELETE FROM a WHERE id = 2");
    assert_eq!(f.iter().map(|e| e.0).collect::<Vec<_>>(), [547], "{f:?}");
    assert!(f[0]
        .3
        .starts_with("The DELETE statement conflicted with the REFERENCE"));
    assert_eq!(before(&mut c)[1..], kept[1..]);
    assert_eq!(table(&mut c, "SELECT COUNT(*) FROM a WHERE id = 2"), ["1"]);
    run(&mut c, "DROP TABLE n");
    // A duplicate key made by ON DELETE SET NULL in a child's unique key (one NULL only).
    run(
        &mut c,
        "CREATE TABLE u (id INT PRIMARY KEY, aid INT UNIQUE REFERENCES a ON DELETE SET NULL); \
         INSERT INTO a VALUES (3); INSERT INTO u VALUES (1, 2), (2, 3)",
    );
    let f = failures(&mut c, "DELETE FROM a WHERE id IN (2, 3)");
    assert!([2627, 2601].contains(&f[0].0), "{f:?}");
    assert_eq!(
        table(&mut c, "SELECT COUNT(*) FROM a WHERE id IN (2, 3)"),
        ["2"]
    );
    assert_eq!(table(&mut c, "SELECT aid FROM u ORDER BY id"), ["2", "3"]);
    assert_eq!(before(&mut c)[1..], kept[1..]);
}

/// The definition rules, each with SQL Server's message and nothing made: SET NULL on a
/// NOT NULL column (1761), SET DEFAULT on a NOT NULL column without a DEFAULT (1762), a
/// cascading self-reference, a cycle and a second cascade path (1785, then 1750); the
/// DELETE and UPDATE graphs are separate. sys.foreign_keys reports each action.
#[test]
fn definitions_and_catalog_view() {
    let (_s, mut c) = start_in_database(
        "fka-rules",
        "fkar",
        "CREATE TABLE a (id INT PRIMARY KEY, up INT); \
         CREATE TABLE b (id INT PRIMARY KEY, aid INT NOT NULL)",
    );
    let f = failures(
        &mut c,
        "ALTER TABLE b ADD CONSTRAINT FK_ba FOREIGN KEY (aid) REFERENCES a ON DELETE SET NULL",
    );
    assert_eq!(
        f.iter().map(|e| (e.0, e.1, e.2)).collect::<Vec<_>>(),
        [(1761, 16, 0), (1750, 16, 0)]
    );
    assert_eq!(
        f[0].3,
        "Cannot create the foreign key \"FK_ba\" with the SET NULL referential action, \
         because one or more referencing columns are not nullable."
    );
    let f = failures(
        &mut c,
        "ALTER TABLE b ADD CONSTRAINT FK_ba FOREIGN KEY (aid) REFERENCES a ON UPDATE SET DEFAULT",
    );
    assert_eq!(f.iter().map(|e| e.0).collect::<Vec<_>>(), [1762, 1750]);
    assert_eq!(
        f[0].3,
        "Cannot create the foreign key \"FK_ba\" with the SET DEFAULT referential action, \
         because one or more referencing not-nullable columns lack a default constraint."
    );
    let f = failures(
        &mut c,
        "ALTER TABLE a ADD CONSTRAINT FK_aa FOREIGN KEY (up) REFERENCES a ON DELETE CASCADE",
    );
    assert_eq!(
        f.iter().map(|e| (e.0, e.1, e.2)).collect::<Vec<_>>(),
        [(1785, 16, 0), (1750, 16, 0)]
    );
    assert_eq!(
        f[0].3,
        "Introducing FOREIGN KEY constraint 'FK_aa' on table 'a' may cause cycles or multiple \
         cascade paths. Specify ON DELETE NO ACTION or ON UPDATE NO ACTION, or modify other \
         FOREIGN KEY constraints."
    );
    assert_eq!(
        numbers(
            &mut c,
            "CREATE TABLE s (id INT PRIMARY KEY, up INT CONSTRAINT FK_s REFERENCES s \
             ON UPDATE SET NULL)"
        ),
        [1785, 1750]
    );
    // A NO ACTION self-reference is fine.
    run(
        &mut c,
        "ALTER TABLE a ADD CONSTRAINT FK_aa FOREIGN KEY (up) REFERENCES a",
    );
    // a -> b -> c by DELETE CASCADE; c -> a would close a cycle; a -> c would be a
    // second path; two keys from d to a are two paths.
    run(
        &mut c,
        "ALTER TABLE b ADD CONSTRAINT FK_ba FOREIGN KEY (aid) REFERENCES a ON DELETE CASCADE; \
         CREATE TABLE c (id INT PRIMARY KEY, bid INT, aid INT, x INT, \
           CONSTRAINT FK_cb FOREIGN KEY (bid) REFERENCES b ON DELETE SET NULL)",
    );
    for sql in [
        "ALTER TABLE a ADD CONSTRAINT FK_ac FOREIGN KEY (up) REFERENCES c ON DELETE CASCADE",
        "ALTER TABLE c ADD CONSTRAINT FK_ca FOREIGN KEY (aid) REFERENCES a ON DELETE CASCADE",
        "CREATE TABLE d (id INT PRIMARY KEY, x INT REFERENCES a ON DELETE CASCADE, \
         y INT REFERENCES a ON DELETE SET NULL)",
    ] {
        assert_eq!(numbers(&mut c, sql), [1785, 1750], "{sql}");
    }
    // The UPDATE graph is apart: a second path there is its own.
    run(
        &mut c,
        "ALTER TABLE c ADD CONSTRAINT FK_ca FOREIGN KEY (aid) REFERENCES a ON UPDATE CASCADE",
    );
    assert_eq!(
        numbers(
            &mut c,
            "ALTER TABLE c ADD CONSTRAINT FK_cx FOREIGN KEY (x) REFERENCES a ON UPDATE SET NULL"
        ),
        [1785, 1750]
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT name, delete_referential_action, delete_referential_action_desc, \
             update_referential_action, update_referential_action_desc \
             FROM sys.foreign_keys ORDER BY name"
        ),
        [
            "FK_aa,0,NO_ACTION,0,NO_ACTION",
            "FK_ba,1,CASCADE,0,NO_ACTION",
            "FK_ca,0,NO_ACTION,1,CASCADE",
            "FK_cb,2,SET_NULL,0,NO_ACTION",
        ]
    );
    run(
        &mut c,
        "CREATE TABLE e (id INT PRIMARY KEY, aid INT DEFAULT 1 \
         CONSTRAINT FK_ea REFERENCES a ON DELETE SET DEFAULT)",
    );
    assert_eq!(
        table(
            &mut c,
            "SELECT delete_referential_action, delete_referential_action_desc \
             FROM sys.foreign_keys WHERE name = 'FK_ea'"
        ),
        ["3,SET_DEFAULT"]
    );
}

/// The actions are catalog state: after a kill -9 and recovery they are listed and still
/// act, and DBCC CHECKDB is clean.
#[test]
fn actions_survive_a_restart() {
    let (s, mut c) = start_in_database("fka-restart", "fkars", SETUP);
    run(&mut c, "DELETE FROM p WHERE id = 3");
    drop(c);
    let s = restart(s);
    let mut c = s.connect_to(Some("fkars"));
    assert_eq!(
        table(
            &mut c,
            "SELECT delete_referential_action_desc, update_referential_action_desc \
             FROM sys.foreign_keys ORDER BY delete_referential_action"
        ),
        [
            "CASCADE,CASCADE",
            "SET_NULL,SET_NULL",
            "SET_DEFAULT,SET_DEFAULT"
        ]
    );
    assert_eq!(
        children(&mut c)[0].len(),
        4,
        "the cascade before the kill held"
    );
    run(&mut c, "DELETE FROM p WHERE id = 1");
    assert_eq!(
        children(&mut c),
        [
            vec!["12,2".to_string(), "14,NULL".into()],
            vec!["20,NULL".into(), "21,2".into(), "22,NULL".into()],
            vec!["30,0".into(), "31,2".into(), "32,0".into()],
        ]
    );
    assert_checkdb_clean(&mut c, "fkars", "after the restart");
}

/// Several sessions at once: inserters add children (and grandchildren) of random
/// parents while deleters remove parents with ON DELETE CASCADE inside explicit
/// transactions, some rolled back. Afterwards no child or grandchild is an orphan, and
/// DBCC CHECKDB is clean.
#[test]
fn concurrent_children_and_cascading_deletes() {
    let parents: Vec<String> = (1..=60).map(|i| format!("({i})")).collect();
    let (s, mut c) = start_in_database(
        "fka-concurrent",
        "fkac",
        &format!(
            "CREATE TABLE p (id INT PRIMARY KEY); \
             CREATE TABLE ch (id INT PRIMARY KEY, pid INT REFERENCES p (id) ON DELETE CASCADE); \
             CREATE TABLE gc (id INT PRIMARY KEY, cid INT REFERENCES ch (id) ON DELETE CASCADE); \
             CREATE INDEX ix_pid ON ch (pid); \
             INSERT INTO p VALUES {}",
            parents.join(", ")
        ),
    );
    let mut threads = Vec::new();
    for w in 0..2 {
        let addr = s.addr.clone();
        threads.push(thread::spawn(move || {
            let mut c = connect_at(&addr, Some("fkac"), 120).unwrap();
            for i in 0..60 {
                let pid = (i * 7 + w * 13) % 60 + 1;
                let id = w * 1000 + i;
                let sql = format!(
                    "INSERT INTO ch VALUES ({id}, {pid}); \
                     IF @@ERROR = 0 INSERT INTO gc VALUES ({id}, {id})"
                );
                let n = numbers(&mut c, &sql);
                let refused = |e: &i32| *e == 547 || *e == 1205;
                assert!(n.iter().all(refused), "{sql}: {n:?}");
            }
        }));
    }
    for d in 0..2 {
        let addr = s.addr.clone();
        threads.push(thread::spawn(move || {
            let mut c = connect_at(&addr, Some("fkac"), 120).unwrap();
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
                assert!(n.is_empty() || n == [1205], "{n:?}");
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
    assert_eq!(
        table(
            &mut c,
            "SELECT COUNT(*) FROM gc WHERE NOT EXISTS (SELECT 1 FROM ch WHERE ch.id = gc.cid)"
        ),
        ["0"]
    );
    let deleted = table(&mut c, "SELECT COUNT(*) FROM p");
    assert_ne!(deleted, ["60"], "some parents went");
    assert_checkdb_clean(&mut c, "fkac", "after the sessions");
}

/// Cascades nest 32 levels deep and no deeper (referential_actions.rs invariant 4): a
/// chain of 32 ON DELETE CASCADE keys empties every table from one DELETE; a 33rd key
/// makes the same DELETE refused (40517) with nothing changed.
#[test]
fn cascade_depth_is_bounded() {
    let mut setup = vec!["CREATE TABLE t0 (id INT PRIMARY KEY)".to_string()];
    for i in 1..=32 {
        setup.push(format!(
            "CREATE TABLE t{i} (id INT PRIMARY KEY REFERENCES t{} ON DELETE CASCADE)",
            i - 1
        ));
    }
    let fill: Vec<String> = (0..=32)
        .map(|i| format!("INSERT INTO t{i} VALUES (1)"))
        .collect();
    let (_s, mut c) = start_in_database("fka-depth", "fkdepth", &setup.join("; "));
    run(&mut c, &fill.join("; "));
    run(&mut c, "DELETE FROM t0");
    assert_eq!(table(&mut c, "SELECT COUNT(*) FROM t32"), ["0"]);
    run(
        &mut c,
        &format!(
            "{}; CREATE TABLE t33 (id INT PRIMARY KEY REFERENCES t32 ON DELETE CASCADE); \
             INSERT INTO t33 VALUES (1)",
            fill.join("; ")
        ),
    );
    let f = failures(&mut c, "DELETE FROM t0");
    assert_eq!(f.iter().map(|e| e.0).collect::<Vec<_>>(), [40517], "{f:?}");
    assert!(f[0].3.contains("nested more than 32 levels"), "{f:?}");
    for t in ["t0", "t16", "t32", "t33"] {
        assert_eq!(
            table(&mut c, &format!("SELECT COUNT(*) FROM {t}")),
            ["1"],
            "{t}"
        );
    }
}

/// Two ALTER TABLE ... ADD FOREIGN KEY ... ON DELETE CASCADE on disjoint pairs of tables
/// (no Sch-M lock in common), each checking 20,000 existing rows, that together would
/// close the cycle a -> b -> c -> d -> a: in every round one succeeds and the other gets
/// 1785 (referential_actions.rs invariant 1, `lock_cascade_paths`); both succeeded before.
#[test]
fn concurrent_alters_cannot_close_a_cascade_cycle() {
    let digits = "(VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9))";
    let series = format!(
        "SELECT 1 + a.v + 10 * b.v + 100 * c.v + 1000 * d.v + 10000 * e.v AS n \
         FROM {digits} a(v) CROSS JOIN {digits} b(v) CROSS JOIN {digits} c(v) \
         CROSS JOIN {digits} d(v) CROSS JOIN (VALUES (0), (1)) e(v)"
    );
    let tables: Vec<String> = ["a", "b", "c", "d"]
        .iter()
        .map(|t| format!("CREATE TABLE {t} (id INT PRIMARY KEY, r INT NOT NULL)"))
        .collect();
    let (s, mut c) = start_in_database("fka-race", "fkrace", &tables.join("; "));
    for t in ["a", "b", "c", "d"] {
        run(
            &mut c,
            &format!("INSERT INTO {t} SELECT n, n FROM ({series}) s"),
        );
    }
    assert_eq!(table(&mut c, "SELECT COUNT(*) FROM d"), ["20000"]);
    run(
        &mut c,
        "ALTER TABLE a ADD CONSTRAINT a_b FOREIGN KEY (r) REFERENCES b ON DELETE CASCADE; \
         ALTER TABLE c ADD CONSTRAINT c_d FOREIGN KEY (r) REFERENCES d ON DELETE CASCADE",
    );
    let closing = [("b", "c"), ("d", "a")];
    for round in 0..3 {
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let alters: Vec<_> = closing
            .iter()
            .map(|&(child, parent)| {
                let (addr, barrier) = (s.addr.clone(), barrier.clone());
                thread::spawn(move || {
                    let mut c = connect_at(&addr, Some("fkrace"), 60).unwrap();
                    barrier.wait();
                    numbers(
                        &mut c,
                        &format!(
                            "ALTER TABLE {child} ADD CONSTRAINT {child}_{parent} FOREIGN KEY \
                             (r) REFERENCES {parent} ON DELETE CASCADE"
                        ),
                    )
                })
            })
            .collect();
        let got: Vec<Vec<i32>> = alters.into_iter().map(|a| a.join().unwrap()).collect();
        let made: Vec<usize> = (0..2).filter(|&i| got[i].is_empty()).collect();
        assert_eq!(made.len(), 1, "round {round}: {got:?}");
        assert_eq!(got[1 - made[0]], [1785, 1750], "round {round}");
        let (child, parent) = closing[made[0]];
        run(
            &mut c,
            &format!("ALTER TABLE {child} DROP CONSTRAINT {child}_{parent}"),
        );
    }
    assert_eq!(
        table(&mut c, "SELECT COUNT(*) FROM sys.foreign_keys"),
        ["2"]
    );
}

/// A cascade's child resolved while an ALTER TABLE ... ADD CHECK held it (Sch-M, its WITH
/// CHECK scan kept waiting by a writer's open transaction in the child): the SET NULL the
/// cascade makes is checked against the new constraint, so the DELETE gets 547 and
/// changes nothing (check_constraints.rs invariant 5; it used to be refused with 40517).
#[test]
fn a_cascade_meets_a_constraint_added_while_it_waited() {
    let (s, mut c) = start_in_database(
        "fka-check-race",
        "fkcheck",
        "CREATE TABLE p (id INT PRIMARY KEY); \
         CREATE TABLE k (id INT PRIMARY KEY, pid INT REFERENCES p (id) ON DELETE SET NULL); \
         INSERT INTO p VALUES (1), (2); INSERT INTO k VALUES (10, 1), (11, 2)",
    );
    let mut writer = s.connect_to(Some("fkcheck"));
    run(&mut writer, "BEGIN TRAN; INSERT INTO k VALUES (12, 2)");
    let addr = s.addr.clone();
    let alter = thread::spawn(move || {
        let mut b = connect_at(&addr, Some("fkcheck"), 60).unwrap();
        numbers(
            &mut b,
            "ALTER TABLE k ADD CONSTRAINT CK_pid CHECK (pid IS NOT NULL)",
        )
    });
    thread::sleep(std::time::Duration::from_millis(300));
    let addr = s.addr.clone();
    let deleter = thread::spawn(move || {
        let mut b = connect_at(&addr, Some("fkcheck"), 60).unwrap();
        numbers(&mut b, "DELETE FROM p WHERE id = 1")
    });
    thread::sleep(std::time::Duration::from_millis(300));
    run(&mut writer, "COMMIT");
    assert_eq!(alter.join().unwrap(), Vec::<i32>::new());
    assert_eq!(deleter.join().unwrap(), [547]);
    assert_eq!(table(&mut c, "SELECT COUNT(*) FROM p"), ["2"]);
    assert_eq!(
        table(&mut c, "SELECT COUNT(*) FROM k WHERE pid IS NULL"),
        ["0"]
    );
    assert_checkdb_clean(&mut c, "fkcheck", "after the refused cascade");
}
