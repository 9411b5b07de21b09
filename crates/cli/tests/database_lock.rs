//! SQL Server's DATABASE lock through a real `extentdb serve` and real TDS sessions: each
//! session holds S on the database it uses (sys.dm_tran_locks, SHARED_TRANSACTION_WORKSPACE),
//! from its login or USE until it leaves or disconnects; DROP DATABASE of a database another
//! session uses is refused with 3702 and changes nothing; and sessions entering and leaving
//! a database while another drops it never find it gone under them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use extentdb_sql::types::Value;
use extentdb_tds::client::Client;

mod common;
use common::tds::{all_rows, connect_at, errors, run, Server};

/// The DATABASE locks on `db`: (session, mode, owner type, status), by session.
fn database_locks(c: &mut Client, db: &str) -> Vec<(i32, String, String, String)> {
    let r = run(
        c,
        &format!(
            "SELECT request_session_id, request_mode, request_owner_type, request_status \
             FROM sys.dm_tran_locks WHERE resource_type = 'DATABASE' \
             AND resource_database_id = DB_ID('{db}') ORDER BY request_session_id"
        ),
    );
    all_rows(&r)
        .into_iter()
        .map(|row| match &row[..] {
            [Value::Int(s), Value::Text(m), Value::Text(o), Value::Text(st)] => {
                (*s, m.clone(), o.clone(), st.clone())
            }
            other => panic!("{other:?}"),
        })
        .collect()
}

/// Database `name` with table t of `rows` rows (keys 1 to `rows`); `c` back in master.
fn database_with_rows(c: &mut Client, name: &str, rows: i32) {
    let values: Vec<String> = (1..=rows).map(|k| format!("({k})")).collect();
    run(
        c,
        &format!(
            "CREATE DATABASE {name}; USE {name}; CREATE TABLE t (k int NOT NULL PRIMARY KEY); \
             INSERT INTO t VALUES {}; USE master",
            values.join(", ")
        ),
    );
}

fn spid(c: &mut Client) -> i32 {
    match &all_rows(&run(c, "SELECT @@SPID"))[0][..] {
        [Value::SmallInt(n)] => *n as i32,
        [Value::Int(n)] => *n,
        other => panic!("{other:?}"),
    }
}

fn shared(s: i32) -> (i32, String, String, String) {
    (
        s,
        "S".into(),
        "SHARED_TRANSACTION_WORKSPACE".into(),
        "GRANT".into(),
    )
}

/// Proves every session holds S DATABASE on the database it uses and only there: a login
/// into a database, a USE, a USE back to master, and a disconnect each move or drop the
/// session's lock, as sys.dm_tran_locks shows it.
#[test]
fn each_session_holds_its_database_shared() {
    let s = Server::start("database-lock-rows", &[]);
    let mut dba = s.connect();
    run(&mut dba, "CREATE DATABASE Shop");
    let mut a = s.connect_to(Some("Shop"));
    let mut b = s.connect();
    let (sa, sb, sd) = (spid(&mut a), spid(&mut b), spid(&mut dba));
    assert_eq!(database_locks(&mut dba, "Shop"), vec![shared(sa)]);
    let master = database_locks(&mut dba, "master");
    assert!(master.contains(&shared(sb)) && master.contains(&shared(sd)));
    assert!(
        !master.iter().any(|l| l.0 == sa),
        "a holds nothing on master: {master:?}"
    );

    run(&mut b, "USE Shop");
    assert_eq!(
        database_locks(&mut dba, "Shop"),
        vec![shared(sa), shared(sb)]
    );
    assert!(!database_locks(&mut dba, "master").iter().any(|l| l.0 == sb));

    run(&mut a, "USE master");
    assert_eq!(database_locks(&mut dba, "Shop"), vec![shared(sb)]);
    drop(b);
    let until = Instant::now() + Duration::from_secs(30);
    while !database_locks(&mut dba, "Shop").is_empty() {
        assert!(
            Instant::now() < until,
            "a closed session kept its DATABASE lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // sp_lock lists the same locks, as DB (its type column is nchar(4)).
    let r = run(&mut dba, "EXEC sp_lock");
    let db_rows = all_rows(&r)
        .iter()
        .filter(|row| row[4] == Value::Text("DB  ".into()))
        .count();
    assert_eq!(db_rows, 2, "sa's two sessions in master");
}

/// Proves DROP DATABASE of a database another session uses is refused with 3702 (severity
/// 16, state 4) and changes nothing: the other session goes on reading its table; once it
/// leaves, the DROP goes through. Before the DATABASE lock the first DROP removed the
/// files under the other session.
#[test]
fn drop_database_in_use_is_refused() {
    let s = Server::start("database-lock-drop", &[]);
    let mut dba = s.connect();
    database_with_rows(&mut dba, "Ledger", 3);
    let mut a = s.connect_to(Some("Ledger"));
    assert_eq!(
        errors(&mut dba, "DROP DATABASE Ledger"),
        vec![(3702, 16, 4)]
    );
    let r = run(&mut a, "SELECT COUNT(*) FROM t");
    assert_eq!(all_rows(&r), vec![vec![Value::Int(3)]]);
    run(&mut a, "USE master");
    run(&mut dba, "DROP DATABASE Ledger");
    assert_eq!(
        errors(&mut a, "USE Ledger")
            .into_iter()
            .map(|e| e.0)
            .collect::<Vec<_>>(),
        vec![911]
    );
}

/// Proves sessions entering and leaving a database while another session drops it never
/// find it gone under them: four sessions loop USE, a read of the table, USE master, while
/// a fifth asks for DROP DATABASE until it goes through. Every read after a USE that
/// succeeded returns the table's rows; a refused USE is 911 (the database is gone), a
/// refused DROP is 3702, and when the DROP goes through no session is in the database
/// (sys.dm_exec_sessions): before the DATABASE lock, the first DROP went through with
/// sessions inside, which went on reading the removed files.
#[test]
fn sessions_entering_never_lose_the_database_to_a_drop() {
    let s = Server::start("database-lock-race", &[]);
    let mut dba = s.connect();
    database_with_rows(&mut dba, "Race", 2);
    let id = match &all_rows(&run(&mut dba, "SELECT DB_ID('Race')"))[0][..] {
        [Value::Int(n)] => *n,
        [Value::SmallInt(n)] => *n as i32,
        other => panic!("{other:?}"),
    };
    let dropped = Arc::new(AtomicBool::new(false));
    let users: Vec<_> = (0..4)
        .map(|i| {
            let addr = s.addr.clone();
            let dropped = dropped.clone();
            std::thread::spawn(move || {
                let mut c = connect_at(&addr, None, 60).expect("login");
                let (mut reads, mut gone) = (0u32, 0u32);
                while !dropped.load(Ordering::Acquire) || gone == 0 {
                    let r = c.batch("USE Race").expect("USE");
                    let refused: Vec<i32> = r.errors().map(|e| e.number).collect();
                    if !refused.is_empty() {
                        assert_eq!(refused, vec![911], "user {i}: USE Race");
                        gone += 1;
                        continue;
                    }
                    std::thread::sleep(Duration::from_millis(2));
                    let r = c.batch("SELECT COUNT(*) FROM t").expect("read");
                    assert_eq!(all_rows(&r), vec![vec![Value::Int(2)]], "user {i}: {r:?}");
                    reads += 1;
                    run(&mut c, "USE master");
                    std::thread::sleep(Duration::from_millis(1 + i as u64 % 2));
                }
                reads
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let (mut refused, until) = (0u32, Instant::now() + Duration::from_secs(60));
    loop {
        match &errors(&mut dba, "DROP DATABASE Race")[..] {
            [] => break,
            [(3702, 16, 4)] => refused += 1,
            other => panic!("DROP DATABASE Race: {other:?}"),
        }
        assert!(
            Instant::now() < until,
            "the DROP never found the database free"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // Nobody was inside when it went: no session is left in the dropped database.
    let r = run(
        &mut dba,
        &format!("SELECT COUNT(*) FROM sys.dm_exec_sessions WHERE database_id = {id}"),
    );
    assert_eq!(
        all_rows(&r),
        vec![vec![Value::Int(0)]],
        "sessions left in a dropped database"
    );
    dropped.store(true, Ordering::Release);
    let reads: u32 = users.into_iter().map(|u| u.join().unwrap()).sum();
    println!("{reads} reads; the DROP was refused {refused} times before it went through");
    assert!(reads > 0);
}

/// Proves a transaction that reads another database by a three-part name holds S
/// DATABASE there (owned by the transaction) until it ends: DROP DATABASE of it is refused
/// with 3702 meanwhile, and goes through after the COMMIT. Before, the DROP went through
/// under the open transaction, which was not in the database and had written nothing.
#[test]
fn a_three_part_name_holds_its_database_for_the_transaction() {
    let s = Server::start("database-lock-three-part", &[]);
    let mut dba = s.connect();
    database_with_rows(&mut dba, "Other", 1);
    let mut a = s.connect();
    let sa = spid(&mut a);
    let r = run(&mut a, "BEGIN TRAN; SELECT COUNT(*) FROM Other.dbo.t");
    assert_eq!(all_rows(&r), vec![vec![Value::Int(1)]]);
    let held = database_locks(&mut dba, "Other");
    assert_eq!(
        held,
        vec![(sa, "S".into(), "TRANSACTION".into(), "GRANT".into())]
    );
    assert_eq!(errors(&mut dba, "DROP DATABASE Other"), vec![(3702, 16, 4)]);
    run(&mut a, "COMMIT");
    assert!(database_locks(&mut dba, "Other").is_empty());
    run(&mut dba, "DROP DATABASE Other");
}
