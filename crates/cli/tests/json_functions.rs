//! STRING_SPLIT, OPENJSON and the scalar JSON functions (ISJSON, JSON_VALUE, JSON_QUERY,
//! JSON_MODIFY; issue 22) through a real `extentdb serve` and real TDS sessions: their rows, NULLs,
//! empty pieces, ordinals, aliases and column aliases, variable arguments, CROSS and OUTER
//! APPLY over a table's rows from two sessions at once, JSON_MODIFY's updates from
//! several sessions at once, the result columns' types as the
//! client reads them from the TDS metadata, each error's number and text, and the
//! refusals (40517) of what is not built. Before json_functions.rs, every one of them was
//! refused.

use extentdb_sql::exec::Output;
use extentdb_sql::types::{SqlType, MAX_LENGTH};
use extentdb_tds::client::Client;

mod common;
use common::tds::{connect_at, run, show, start_in_database, strs, Server};

/// The first result set's column types and its rows as text (`a|b` per row).
fn result(c: &mut Client, sql: &str) -> (Vec<(String, SqlType)>, Vec<String>) {
    let r = run(c, sql);
    let (columns, rows) = r
        .outputs
        .iter()
        .find_map(|o| match o {
            Output::Rows { columns, rows } => Some((columns.clone(), rows.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result set: {sql}"));
    let rows = rows
        .iter()
        .map(|r| r.iter().map(show).collect::<Vec<_>>().join("|"))
        .collect();
    (columns, rows)
}

/// The rows of the first result set as text.
fn texts(c: &mut Client, sql: &str) -> Vec<String> {
    result(c, sql).1
}

/// The one error a batch gives: number, severity and text.
fn error(c: &mut Client, sql: &str) -> (i32, u8, String) {
    let r = c.batch(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let errs: Vec<_> = r
        .errors()
        .map(|e| (e.number, e.severity, e.text.clone()))
        .collect();
    assert_eq!(errs.len(), 1, "{sql}: {errs:?}");
    errs.into_iter().next().unwrap()
}

fn typed(names: &[(&str, SqlType)]) -> Vec<(String, SqlType)> {
    names.iter().map(|(n, t)| (n.to_string(), *t)).collect()
}

fn server(name: &str) -> (Server, Client) {
    start_in_database(
        name,
        "Js",
        "CREATE TABLE posts (id int PRIMARY KEY, tags varchar(40) NULL, doc nvarchar(max) NULL)",
    )
}

/// Proves STRING_SPLIT's rows and types: one row per piece in order (empty pieces as ''),
/// no rows for NULL, the ordinal column, the value typed as its input (varchar(n) from a
/// literal, nvarchar(n) from an nvarchar variable or a Unicode separator, max kept), an
/// alias with column aliases, and WHERE and ORDER BY over its columns.
#[test]
fn string_split_rows_and_types() {
    let (_s, mut c) = server("json-split");
    let (cols, rows) = result(&mut c, "SELECT * FROM STRING_SPLIT('a,,b,', ',')");
    assert_eq!(cols, typed(&[("value", SqlType::VarChar(5))]));
    assert_eq!(rows, strs(&["a", "", "b", ""]));
    let (cols, rows) = result(
        &mut c,
        "DECLARE @s nvarchar(20) = N'x y  z'; \
         SELECT s.v, s.n FROM STRING_SPLIT(@s, ' ', 1) AS s (v, n) ORDER BY s.n DESC",
    );
    assert_eq!(
        cols,
        typed(&[("v", SqlType::NVarChar(20)), ("n", SqlType::BigInt)])
    );
    assert_eq!(rows, strs(&["z|4", "|3", "y|2", "x|1"]));
    let (cols, _) = result(&mut c, "SELECT value FROM STRING_SPLIT('ab', N'b')");
    assert_eq!(cols, typed(&[("value", SqlType::NVarChar(2))]));
    let (cols, rows) = result(
        &mut c,
        "DECLARE @m varchar(max) = 'q;r'; SELECT value, ordinal FROM STRING_SPLIT(@m, ';', 1) \
         WHERE value <> 'q'",
    );
    assert_eq!(
        cols,
        typed(&[
            ("value", SqlType::VarChar(MAX_LENGTH)),
            ("ordinal", SqlType::BigInt)
        ])
    );
    assert_eq!(rows, strs(&["r|2"]));
    let rows = texts(
        &mut c,
        "DECLARE @n varchar(10) = NULL; SELECT COUNT(*) FROM STRING_SPLIT(@n, ',')",
    );
    assert_eq!(rows, strs(&["0"]));
    let rows = texts(
        &mut c,
        "SELECT COUNT(*) FROM STRING_SPLIT('', ',', 0) UNION ALL \
         SELECT COUNT(*) FROM STRING_SPLIT('a', ',', NULL)",
    );
    assert_eq!(rows, strs(&["1", "1"]));
}

/// Proves STRING_SPLIT's errors: a separator that is not one character (or NULL) is 214,
/// too few and too many arguments 216 and 8144, a column alias list of the wrong length
/// 8158 / 8159, an enable_ordinal that is not the constant 0, 1 or NULL and a
/// non-character input 40517; and a failing INSERT ... SELECT inserts nothing.
#[test]
fn string_split_errors() {
    let (_s, mut c) = server("json-split-errors");
    let separator = (
        214,
        16,
        "Procedure expects parameter 'separator' of type 'nchar(1)/nvarchar(1)'.".to_string(),
    );
    assert_eq!(
        error(&mut c, "SELECT * FROM STRING_SPLIT('a,b', ', ')"),
        separator
    );
    assert_eq!(
        error(&mut c, "SELECT * FROM STRING_SPLIT('a,b', '')"),
        separator
    );
    assert_eq!(
        error(&mut c, "SELECT * FROM STRING_SPLIT('a,b', NULL)"),
        separator
    );
    assert_eq!(error(&mut c, "SELECT * FROM STRING_SPLIT('a')").0, 216);
    assert_eq!(
        error(&mut c, "SELECT * FROM STRING_SPLIT('a', ',', 1, 1)").0,
        8144
    );
    assert_eq!(
        error(&mut c, "SELECT * FROM STRING_SPLIT('a', ',') AS s (x, y)"),
        (
            8159,
            16,
            "'s' has fewer columns than were specified in the column list.".to_string()
        )
    );
    assert_eq!(
        error(&mut c, "SELECT * FROM STRING_SPLIT('a', ',', 1) AS s (x)").0,
        8158
    );
    let (n, _, text) = error(
        &mut c,
        "DECLARE @o int = 1; SELECT * FROM STRING_SPLIT('a', ',', @o)",
    );
    assert_eq!(n, 40517);
    assert!(text.starts_with("extentdb does not support"), "{text}");
    assert_eq!(
        error(&mut c, "SELECT * FROM STRING_SPLIT('a', ',', 2)").0,
        40517
    );
    assert_eq!(
        error(&mut c, "SELECT * FROM STRING_SPLIT(12, ',')").0,
        40517
    );
    let r = c
        .batch(
            "INSERT INTO posts (id, tags) SELECT 100 + LEN(value), value \
             FROM STRING_SPLIT('a,bb', ';;')",
        )
        .unwrap();
    assert_eq!(r.errors().next().map(|e| e.number), Some(214));
    assert_eq!(texts(&mut c, "SELECT COUNT(*) FROM posts"), strs(&["0"]));
}

/// Proves STRING_SPLIT and OPENJSON on the right of CROSS APPLY and OUTER APPLY take the
/// outer row's column as their argument, and that two sessions run them over the same
/// table at once while each also writes its own rows, each seeing the right answer.
#[test]
fn apply_over_a_tables_rows_from_two_sessions() {
    let (s, mut c) = server("json-apply");
    run(
        &mut c,
        "INSERT INTO posts VALUES (1, 'red,green', N'{\"a\":1}'), (2, NULL, NULL), \
         (3, 'blue', N'[true,\"x\"]')",
    );
    assert_eq!(
        texts(
            &mut c,
            "SELECT t.id, s.value FROM posts t CROSS APPLY STRING_SPLIT(t.tags, ',') AS s \
             ORDER BY t.id, s.value"
        ),
        strs(&["1|green", "1|red", "3|blue"])
    );
    assert_eq!(
        texts(
            &mut c,
            "SELECT t.id, s.value FROM posts t OUTER APPLY STRING_SPLIT(t.tags, ',') s \
             ORDER BY t.id, s.value"
        ),
        strs(&["1|green", "1|red", "2|NULL", "3|blue"])
    );
    assert_eq!(
        texts(
            &mut c,
            "SELECT t.id, j.[key], j.value, j.type FROM posts t \
             CROSS APPLY OPENJSON(t.doc) j ORDER BY t.id, j.[key]"
        ),
        strs(&["1|a|1|2", "3|0|true|3", "3|1|x|1"])
    );
    let workers: Vec<_> = (0..2)
        .map(|w| {
            let addr = s.addr.clone();
            std::thread::spawn(move || {
                let mut c = common::tds::connect_at(&addr, Some("Js"), 60).unwrap();
                for i in 0..15 {
                    let id = 1000 + w * 100 + i;
                    run(
                        &mut c,
                        &format!("INSERT INTO posts (id, tags) VALUES ({id}, 'w{w},{i},x')"),
                    );
                    let mine = texts(
                        &mut c,
                        &format!(
                            "SELECT s.value FROM posts t CROSS APPLY \
                             STRING_SPLIT(t.tags, ',', 1) s WHERE t.id = {id} ORDER BY s.ordinal"
                        ),
                    );
                    assert_eq!(mine, vec![format!("w{w}"), i.to_string(), "x".to_string()]);
                    let count = texts(
                        &mut c,
                        &format!(
                            "SELECT COUNT(*) FROM posts t CROSS APPLY STRING_SPLIT(t.tags, ',') s \
                             WHERE s.value = 'w{w}'"
                        ),
                    );
                    assert_eq!(count, vec![(i + 1).to_string()]);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(
        texts(
            &mut c,
            "SELECT COUNT(*) FROM posts t CROSS APPLY STRING_SPLIT(t.tags, ',') s \
             WHERE s.value = 'x'"
        ),
        strs(&["30"])
    );
}

/// Proves OPENJSON's default schema: key, value and type (0 to 5) for each member of an
/// object or element of an array, strings decoded and objects and arrays as written, a
/// path argument, lax paths giving no rows, NULL giving no rows, and the columns' types.
#[test]
fn openjson_default_schema() {
    let (_s, mut c) = server("json-openjson");
    let (cols, rows) = result(
        &mut c,
        "DECLARE @j nvarchar(max) = N'{\"s\":\"a\\\"b\",\"n\":-1.5e2,\"t\":true,\"z\":null,\
         \"a\":[1, 2],\"o\":{\"k\":\"v\"}}'; SELECT * FROM OPENJSON(@j)",
    );
    assert_eq!(
        cols,
        typed(&[
            ("key", SqlType::NVarChar(4000)),
            ("value", SqlType::NVarChar(MAX_LENGTH)),
            ("type", SqlType::Int)
        ])
    );
    assert_eq!(
        rows,
        strs(&[
            "s|a\"b|1",
            "n|-1.5e2|2",
            "t|true|3",
            "z|NULL|0",
            "a|[1, 2]|4",
            "o|{\"k\":\"v\"}|5"
        ])
    );
    assert_eq!(
        texts(
            &mut c,
            "SELECT [key], value FROM OPENJSON(N'{\"x\":{\"y\":[\"p\",\"q\"]}}', '$.x.y')"
        ),
        strs(&["0|p", "1|q"])
    );
    assert_eq!(
        texts(
            &mut c,
            "SELECT COUNT(*) FROM OPENJSON(N'{\"x\":1}', '$.missing') UNION ALL \
             SELECT COUNT(*) FROM OPENJSON(N'{\"x\":1}', 'lax $.x') UNION ALL \
             SELECT COUNT(*) FROM OPENJSON(NULL)"
        ),
        strs(&["0", "0", "0"])
    );
}

/// Proves OPENJSON WITH: one row per element of an array (one for an object), each column
/// from its path (`$.name` by default, lax or strict), converted to its declared type,
/// AS JSON giving the object or array as written, and the declared types as the client
/// reads them.
#[test]
fn openjson_with_schema() {
    let (_s, mut c) = server("json-openjson-with");
    let (cols, rows) = result(
        &mut c,
        "SELECT * FROM OPENJSON(N'[{\"id\":1,\"name\":\"ann\",\"tags\":[\"x\"],\"in\":{\"d\":\"2024-01-02\"}},\
         {\"id\":\"2\",\"name\":null}]') \
         WITH (id int, name nvarchar(10), d date '$.in.d', tags nvarchar(max) AS JSON, \
               other varchar(5) 'lax $.nope') AS r ORDER BY id DESC",
    );
    assert_eq!(
        cols,
        typed(&[
            ("id", SqlType::Int),
            ("name", SqlType::NVarChar(10)),
            ("d", SqlType::Date),
            ("tags", SqlType::NVarChar(MAX_LENGTH)),
            ("other", SqlType::VarChar(5))
        ])
    );
    assert_eq!(
        rows,
        strs(&["2|NULL|NULL|NULL|NULL", "1|ann|2024-01-02|[\"x\"]|NULL"])
    );
    assert_eq!(
        texts(
            &mut c,
            "SELECT v.n FROM OPENJSON(N'{\"a\":{\"n\":7}}', '$.a') WITH (n int) v"
        ),
        strs(&["7"])
    );
}

/// Proves OPENJSON's errors: invalid JSON is 13609 with the character and its position,
/// a strict path that finds nothing 13608, a strict path to a scalar 13611, a bad path
/// 13607, AS JSON on a column that is not nvarchar(max) 40517; and a failing INSERT ...
/// SELECT inserts nothing.
#[test]
fn openjson_errors() {
    let (_s, mut c) = server("json-openjson-errors");
    assert_eq!(
        error(&mut c, "SELECT * FROM OPENJSON(N'{\"a\":1,}')"),
        (
            13609,
            16,
            "JSON text is not properly formatted. Unexpected character '}' is found at position 7."
                .to_string()
        )
    );
    assert_eq!(
        error(&mut c, "SELECT * FROM OPENJSON(N'{\"a\":1}', 'strict $.b')"),
        (
            13608,
            16,
            "Property cannot be found on the specified JSON path.".to_string()
        )
    );
    assert_eq!(
        error(&mut c, "SELECT * FROM OPENJSON(N'{\"a\":1}', 'strict $.a')").0,
        13611
    );
    assert_eq!(
        error(&mut c, "SELECT * FROM OPENJSON(N'{\"a\":1}', 'a')"),
        (
            13607,
            16,
            "JSON path is not properly formatted. Unexpected character 'a' is found at position 0."
                .to_string()
        )
    );
    assert_eq!(
        error(
            &mut c,
            "SELECT * FROM OPENJSON(N'[{\"a\":1}]') WITH (a int, b int 'strict $.b')"
        )
        .0,
        13608
    );
    assert_eq!(
        error(
            &mut c,
            "SELECT * FROM OPENJSON(N'[{\"a\":[1]}]') WITH (a nvarchar(20) AS JSON)"
        )
        .0,
        40517
    );
    assert_eq!(
        error(&mut c, "SELECT * FROM OPENJSON(N'[1]', '$[*]')").0,
        40517
    );
    let r = c
        .batch("INSERT INTO posts (id) SELECT CAST([key] AS int) FROM OPENJSON(N'[1,2,]')")
        .unwrap();
    assert_eq!(r.errors().next().map(|e| e.number), Some(13609));
    assert_eq!(texts(&mut c, "SELECT COUNT(*) FROM posts"), strs(&["0"]));
}

/// Proves ISJSON, JSON_VALUE and JSON_QUERY: values, NULLs, lax and strict paths, their
/// types as the client reads them (int, nvarchar(4000), nvarchar(max)), over a table's
/// column, and their errors (13609, 13607, 13608, 13623, 13624) and refusals (ISJSON's
/// type constraint, JSON_MODIFY of the root path: 40517).
#[test]
fn scalar_json_functions() {
    let (_s, mut c) = server("json-scalar");
    run(
        &mut c,
        "INSERT INTO posts (id, doc) VALUES (1, N'{\"name\":\"ann\",\"age\":31,\"kids\":[\"b\"]}'), \
         (2, N'not json'), (3, NULL)",
    );
    let (cols, rows) = result(
        &mut c,
        "SELECT id, ISJSON(doc) AS ok, JSON_VALUE(doc, '$.name') AS name, \
         JSON_QUERY(doc, '$.kids') AS kids FROM posts WHERE id <> 2 ORDER BY id",
    );
    assert_eq!(
        cols,
        typed(&[
            ("id", SqlType::Int),
            ("ok", SqlType::Int),
            ("name", SqlType::NVarChar(4000)),
            ("kids", SqlType::NVarChar(MAX_LENGTH))
        ])
    );
    assert_eq!(rows, strs(&["1|1|ann|[\"b\"]", "3|NULL|NULL|NULL"]));
    assert_eq!(
        texts(
            &mut c,
            "SELECT ISJSON(doc) FROM posts WHERE id = 2 UNION ALL SELECT ISJSON('[1]') \
             UNION ALL SELECT ISJSON('1')"
        ),
        strs(&["0", "1", "0"])
    );
    assert_eq!(
        texts(
            &mut c,
            "SELECT JSON_VALUE(doc, '$.age'), JSON_VALUE(doc, '$.kids'), \
             JSON_VALUE(doc, 'lax $.none'), JSON_QUERY(doc), JSON_QUERY(doc, '$.age') \
             FROM posts WHERE id = 1"
        ),
        strs(&["31|NULL|NULL|{\"name\":\"ann\",\"age\":31,\"kids\":[\"b\"]}|NULL"])
    );
    assert_eq!(
        texts(
            &mut c,
            "SELECT id FROM posts \
             WHERE CASE WHEN ISJSON(doc) = 1 THEN JSON_VALUE(doc, 'lax $.kids[0]') END = 'b'"
        ),
        strs(&["1"])
    );
    let doc = "N'{\"a\":{\"b\":1}}'";
    let cases = [
        (format!("JSON_VALUE({doc}, 'strict $.x')"), 13608),
        (format!("JSON_VALUE({doc}, 'strict $.a')"), 13623),
        (format!("JSON_QUERY({doc}, 'strict $.a.b')"), 13624),
        (format!("JSON_VALUE({doc}, '$.a..b')"), 13607),
        ("JSON_VALUE('{oops', '$')".to_string(), 13609),
        (format!("ISJSON({doc}, OBJECT)"), 40517),
        (format!("JSON_MODIFY({doc}, '$', 1)"), 40517),
    ];
    for (call, number) in cases {
        assert_eq!(error(&mut c, &format!("SELECT {call}")).0, number, "{call}");
    }
    assert_eq!(
        error(&mut c, "SELECT JSON_VALUE('{oops', '$')").2,
        "JSON text is not properly formatted. Unexpected character 'o' is found at position 1."
    );
    let r = c
        .batch("UPDATE posts SET tags = JSON_VALUE(doc, 'strict $.name')")
        .unwrap();
    assert_eq!(r.errors().next().map(|e| e.number), Some(13609));
    assert_eq!(
        texts(&mut c, "SELECT COUNT(*) FROM posts WHERE tags IS NOT NULL"),
        strs(&["0"])
    );
}

/// Proves JSON_MODIFY through TDS: its type as the client reads it (nvarchar(max)); a
/// value replaced, a key added and deleted (lax), null written (strict), append; strings
/// quoted and escaped, numbers and bits unquoted, JSON_QUERY's result and a nested
/// JSON_MODIFY's inserted as JSON; 13608 in strict mode, 13609 for bad JSON and 40517 for
/// an expression that might carry JSON_QUERY's result, each leaving the table unchanged.
#[test]
fn json_modify_values_and_errors() {
    let (_s, mut c) = server("json-modify");
    run(
        &mut c,
        "INSERT INTO posts (id, doc) VALUES (1, N'{\"name\":\"ann\",\"skills\":[\"C#\"]}')",
    );
    let (cols, rows) = result(
        &mut c,
        "SELECT JSON_MODIFY(doc, '$.name', 'bo') AS m FROM posts",
    );
    assert_eq!(cols, typed(&[("m", SqlType::NVarChar(MAX_LENGTH))]));
    assert_eq!(rows, strs(&[r#"{"name":"bo","skills":["C#"]}"#]));
    let cases = [
        ("'$.age', 31", r#"{"name":"ann","skills":["C#"],"age":31}"#),
        (
            "'$.ok', CAST(1 AS BIT)",
            r#"{"name":"ann","skills":["C#"],"ok":true}"#,
        ),
        (
            "'$.p', CAST(49.99 AS DECIMAL(4,2))",
            r#"{"name":"ann","skills":["C#"],"p":49.99}"#,
        ),
        ("'$.name', NULL", r#"{"skills":["C#"]}"#),
        ("'strict $.name', NULL", r#"{"name":null,"skills":["C#"]}"#),
        (
            "'append $.skills', 'SQL'",
            r#"{"name":"ann","skills":["C#","SQL"]}"#,
        ),
        (
            "'$.name', 'a\"b/c'",
            r#"{"name":"a\"b\/c","skills":["C#"]}"#,
        ),
        ("'$.skills', '[1]'", r#"{"name":"ann","skills":"[1]"}"#),
        (
            "'$.skills', JSON_QUERY('[1]')",
            r#"{"name":"ann","skills":[1]}"#,
        ),
        (
            "'$.o', JSON_MODIFY('{}', '$.k', 1)",
            r#"{"name":"ann","skills":["C#"],"o":{"k":1}}"#,
        ),
        ("'$.none.deeper', 1", r#"{"name":"ann","skills":["C#"]}"#),
    ];
    for (args, want) in cases {
        let got = texts(
            &mut c,
            &format!("SELECT JSON_MODIFY(doc, {args}) FROM posts"),
        );
        assert_eq!(got, vec![want], "{args}");
    }
    let before = texts(&mut c, "SELECT doc FROM posts");
    for (sql, number) in [
        (
            "UPDATE posts SET doc = JSON_MODIFY(doc, 'strict $.none', 1)",
            13608,
        ),
        (
            "UPDATE posts SET doc = JSON_MODIFY(N'{oops', '$.a', 1)",
            13609,
        ),
        ("UPDATE posts SET doc = JSON_MODIFY(doc, '$..a', 1)", 13607),
        (
            "UPDATE posts SET doc = JSON_MODIFY(doc, '$.a', ISNULL(JSON_QUERY(doc, '$.x'), '[]'))",
            40517,
        ),
        (
            "UPDATE posts SET doc = JSON_MODIFY(doc, '$.a', GETDATE())",
            8116,
        ),
    ] {
        assert_eq!(error(&mut c, sql).0, number, "{sql}");
        assert_eq!(texts(&mut c, "SELECT doc FROM posts"), before, "{sql}");
    }
    assert_eq!(
        error(&mut c, "SELECT JSON_MODIFY(N'{}', 'strict $.a', 1)").2,
        "Property cannot be found on the specified JSON path."
    );
}

/// Three sessions UPDATE ... SET doc = JSON_MODIFY(doc, '$.n', n + 1) at once, 30 times
/// each on a row of their own (appending to a log array too, through a nested
/// JSON_MODIFY) and on one shared row: read back with JSON_VALUE and JSON_QUERY, every
/// document's n equals the column n (no lost update), the own rows' logs are 1..=30 in
/// order, and the rest of each document is unchanged.
#[test]
fn sessions_json_modify_different_rows_at_once() {
    let (s, mut c) = server("json-modify-conc");
    run(
        &mut c,
        "CREATE TABLE docs (id INT PRIMARY KEY, n INT NOT NULL, doc NVARCHAR(MAX) NOT NULL);
         INSERT INTO docs VALUES
           (0, 0, N'{\"n\":0,\"tag\":\"sh/ared\"}'),
           (1, 0, N'{\"n\":0,\"tag\":\"one\",\"log\":[]}'),
           (2, 0, N'{\"n\":0,\"tag\":\"two\",\"log\":[]}'),
           (3, 0, N'{\"n\":0,\"tag\":\"three\",\"log\":[]}')",
    );
    let workers: Vec<_> = (1..=3)
        .map(|id| {
            let addr = s.addr.clone();
            std::thread::spawn(move || {
                let mut c = connect_at(&addr, Some("Js"), 120).unwrap();
                for _ in 0..30 {
                    run(
                        &mut c,
                        &format!(
                            "UPDATE docs SET n = n + 1, doc = JSON_MODIFY(JSON_MODIFY(doc, \
                             '$.n', n + 1), 'append $.log', n + 1) WHERE id = {id};
                             UPDATE docs SET n = n + 1, doc = JSON_MODIFY(doc, '$.n', n + 1) \
                             WHERE id = 0"
                        ),
                    );
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let log: Vec<String> = (1..=30).map(|i| i.to_string()).collect();
    let log = format!("[{}]", log.join(","));
    assert_eq!(
        texts(
            &mut c,
            "SELECT id, n, JSON_VALUE(doc, '$.n'), JSON_VALUE(doc, '$.tag'), \
             JSON_QUERY(doc, '$.log') FROM docs ORDER BY id"
        ),
        vec![
            "0|90|90|sh/ared|NULL".to_string(),
            format!("1|30|30|one|{log}"),
            format!("2|30|30|two|{log}"),
            format!("3|30|30|three|{log}"),
        ]
    );
    assert_eq!(
        texts(&mut c, "SELECT doc FROM docs WHERE id = 0"),
        strs(&[r#"{"n":90,"tag":"sh/ared"}"#])
    );
}
