//! sp_executesql called from T-SQL (crates/sql/src/exec/executesql.rs) through a real
//! `extentdb serve` and several TDS sessions: positional and named parameters, OUTPUT
//! written back, its own variable scope, the caller's transaction, SQL Server's messages.

mod common;
use common::tds::{numbers, run, start_in_database, table};

#[test]
fn statements_run_with_typed_parameters_and_outputs() {
    let (s, mut a) = start_in_database(
        "execsql",
        "d",
        "CREATE TABLE t (id int PRIMARY KEY, v nvarchar(20))",
    );
    assert_eq!(
        table(
            &mut a,
            "EXEC sp_executesql N'SELECT @a + @b', N'@a int, @b int', 2, 3"
        ),
        ["5"]
    );
    assert_eq!(
        table(
            &mut a,
            "EXECUTE dbo.sp_executesql @stmt = N'SELECT @x + N''!''', @params = N'@x nvarchar(10)', @x = N'hi'"
        ),
        ["hi!"]
    );
    // Values convert to the declared types; no definitions, no parameters.
    assert_eq!(
        table(
            &mut a,
            "EXEC sp_executesql N'SELECT @d * 2', N'@d decimal(5,2)', '1.25'"
        ),
        ["2.50"]
    );
    assert_eq!(table(&mut a, "EXEC sp_executesql N'SELECT 7'"), ["7"]);

    // OUTPUT, and two sessions inserting through it at once.
    let addr = s.addr.clone();
    let other = std::thread::spawn(move || {
        let mut b = common::tds::connect_at(&addr, Some("d"), 60).unwrap();
        for i in 1000..1100 {
            run(
                &mut b,
                &format!("EXEC sp_executesql N'INSERT INTO t VALUES (@i, @v)', N'@i int, @v nvarchar(20)', {i}, N'b'"),
            );
        }
    });
    for i in 0..100 {
        run(
            &mut a,
            &format!(
                "EXEC sp_executesql N'INSERT INTO t VALUES (@i, N''a'')', N'@i int', @i = {i}"
            ),
        );
    }
    other.join().unwrap();
    assert_eq!(
        table(
            &mut a,
            "DECLARE @n int = -1, @m nvarchar(20); \
             EXEC sp_executesql N'SELECT @c = COUNT(*), @w = MAX(v) FROM t', \
                 N'@c int OUTPUT, @w nvarchar(20) OUT', @c = @n OUTPUT, @w = @m OUTPUT; \
             SELECT @n, @m"
        ),
        ["200,b"]
    );

    // Its own scope: the caller's variables are not seen, its own do not leak.
    assert_eq!(
        numbers(
            &mut a,
            "DECLARE @q int = 1; EXEC sp_executesql N'SELECT @q'"
        ),
        [137]
    );
    assert_eq!(
        numbers(
            &mut a,
            "EXEC sp_executesql N'DECLARE @z int = 1'; SELECT @z"
        ),
        [137]
    );
    // The caller's transaction.
    run(
        &mut a,
        "BEGIN TRANSACTION; EXEC sp_executesql N'DELETE FROM t WHERE id < @k', N'@k int', 50; ROLLBACK",
    );
    assert_eq!(table(&mut a, "SELECT COUNT(*) FROM t"), ["200"]);

    // Refusals change nothing.
    for (sql, want) in [
        ("EXEC sp_executesql N'SELECT @a', N'@a int'", 8178),
        ("EXEC sp_executesql N'SELECT @a', N'@a int', 1, 2", 8144),
        ("EXEC sp_executesql N'SELECT @a', N'@a int', @b = 1", 8145),
        (
            "DECLARE @o int; EXEC sp_executesql N'SET @a = 1', N'@a int', @a = @o OUTPUT",
            8162,
        ),
        ("EXEC sp_executesql 42", 214),
        (
            "EXEC sp_executesql N'INSERT INTO t VALUES (@a, N''x'')', N'@a int', 'no'",
            245,
        ),
    ] {
        assert_eq!(numbers(&mut a, sql).first(), Some(&want), "{sql}");
    }
    assert_eq!(table(&mut a, "SELECT COUNT(*) FROM t"), ["200"]);
}
