//! INSERT ... EXEC (exec/dml.rs, `exec_rows`) through real TDS sessions: the rows of every
//! result set of a dynamic batch or a system procedure inserted, messages passed on; 213
//! for a result set of another width, 8164 when nested, 40517 for an EXEC that would
//! change anything (its rows go in after it ended), and an error inside the EXEC fails the
//! INSERT (none of its rows go in); several sessions at once.

use extentdb_sql::types::Value;

mod common;
use common::tds::{all_rows, connect_at, errors, int, run, Server};

#[test]
fn insert_exec_takes_every_result_set() {
    let s = Server::start("insert-exec", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE ie");
    run(
        &mut c,
        "USE ie; CREATE TABLE t (a INT NOT NULL, b VARCHAR(20) NULL)",
    );
    let r = run(
        &mut c,
        "INSERT t EXEC ('SELECT 1, ''x'' UNION ALL SELECT 2, ''y''; PRINT ''between''; \
         SELECT a + 10, b FROM t WHERE a < 0'); \
         INSERT INTO t (a) EXEC ('SELECT 5; SELECT 6'); SELECT a, b FROM t ORDER BY a",
    );
    assert_eq!(
        all_rows(&r),
        vec![
            vec![Value::Int(1), Value::Text("x".into())],
            vec![Value::Int(2), Value::Text("y".into())],
            vec![Value::Int(5), Value::Null],
            vec![Value::Int(6), Value::Null],
        ]
    );
    assert!(
        r.outputs
            .iter()
            .any(|o| format!("{o:?}").contains("between")),
        "the EXEC's PRINT reaches the client"
    );
    // A system procedure's result set.
    run(
        &mut c,
        "CREATE TABLE w (spid INT, ecid INT, status NVARCHAR(60), loginame NVARCHAR(128), \
         hostname NVARCHAR(128), blk CHAR(5), dbname NVARCHAR(128), cmd NVARCHAR(32), \
         request_id INT); INSERT w EXEC sp_who",
    );
    let mine = int(&all_rows(&run(&mut c, "SELECT COUNT(*) FROM w WHERE spid = @@SPID"))[0][0]);
    assert_eq!(mine, 1);
    // Errors change nothing.
    assert_eq!(errors(&mut c, "INSERT t EXEC ('SELECT 1')"), [(213, 16, 1)]);
    assert_eq!(
        errors(
            &mut c,
            "INSERT t EXEC ('INSERT t EXEC (''SELECT 1, ''''z'''''')')"
        ),
        [(8164, 16, 1)]
    );
    for changing in [
        "INSERT t EXEC ('INSERT t VALUES (9, ''z'')')",
        "INSERT t EXEC ('SELECT 1 AS a INTO t2')",
        "INSERT t EXEC ('BEGIN TRAN; SELECT 1, ''q''')",
    ] {
        assert_eq!(errors(&mut c, changing), [(40517, 16, 1)], "{changing}");
    }
    let n = int(&all_rows(&run(&mut c, "SELECT COUNT(*) FROM t"))[0][0]);
    assert_eq!(n, 4, "nothing inserted by the failures");
    assert_eq!(int(&all_rows(&run(&mut c, "SELECT @@TRANCOUNT"))[0][0]), 0);
    // Sessions at once, each copying the table's rows back into it under its own tag.
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let addr = s.addr.clone();
            std::thread::spawn(move || {
                let mut c = connect_at(&addr, Some("ie"), 60).unwrap();
                for _ in 0..10 {
                    run(
                        &mut c,
                        &format!("INSERT t EXEC ('SELECT 100 + {i}, ''s{i}''')"),
                    );
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let n = int(&all_rows(&run(&mut c, "SELECT COUNT(*) FROM t WHERE a >= 100"))[0][0]);
    assert_eq!(n, 40);
}
