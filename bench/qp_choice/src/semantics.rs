//! T-SQL semantics DataFusion would have to be bent to: each check's text, SQL Server's
//! answer under its default collation SQL_Latin1_General_CP1_CI_AS (from SQL Server's
//! documentation: collation and padding, data type precedence, precision and scale of
//! results, message numbers), DataFusion's answer, and extentdb's own, on the same tables.

use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::prelude::{SessionConfig, SessionContext};
use serde_json::{json, Value};
use tokio::runtime::Runtime;

use crate::engine::{answer, must, Fixture};

/// (name, query, SQL Server's answer). Tables: s(v) = 'a', 'A', 'b', 'b '; nt(n) = 2, NULL, 1.
const CHECKS: &[(&str, &str, &str)] = &[
    ("ci_equality", "SELECT COUNT(*) FROM s WHERE v = 'A'", "2"),
    (
        "ci_group_by",
        "SELECT COUNT(*) AS n FROM s GROUP BY v ORDER BY n",
        "2; 2",
    ),
    ("ci_count_distinct", "SELECT COUNT(DISTINCT v) FROM s", "2"),
    (
        "trailing_space_equality",
        "SELECT COUNT(*) FROM s WHERE v = 'b'",
        "2",
    ),
    ("int_division", "SELECT 7 / 2", "3"),
    ("decimal_literal_division", "SELECT 10 / 3.0", "3.333333"),
    (
        "varchar_plus_int_error_245",
        "SELECT 'abc' + 1",
        "Msg 245: Conversion failed when converting the varchar value 'abc' to data type int.",
    ),
    ("varchar_plus_int_converts", "SELECT '12' + 1", "13"),
    ("plus_concatenates", "SELECT 'a' + 'b'", "ab"),
    ("concat_null_yields_null", "SELECT 'a' + NULL", "NULL"),
    (
        "decimal_multiply_scale",
        "SELECT CAST(1.5 AS DECIMAL(38,10)) * CAST(2.25 AS DECIMAL(38,10))",
        "3.375000",
    ),
    (
        "int_overflow_8115",
        "SELECT CAST(2147483647 AS INT) + 1",
        "Msg 8115: Arithmetic overflow error converting expression to data type int.",
    ),
    (
        "divide_by_zero_8134",
        "SELECT 1 / 0",
        "Msg 8134: Divide by zero error encountered.",
    ),
    (
        "nulls_sort_first",
        "SELECT n FROM nt ORDER BY n",
        "NULL; 1; 2",
    ),
    ("avg_of_int_is_int", "SELECT AVG(n) FROM nt", "1"),
    ("len_ignores_trailing_spaces", "SELECT LEN('ab  ')", "2"),
    (
        "sum_of_nothing_is_null",
        "SELECT SUM(n) FROM nt WHERE n > 5",
        "NULL",
    ),
    (
        "invalid_date_241",
        "SELECT CAST('2024-02-30' AS DATE)",
        "Msg 241: Conversion failed when converting date and/or time from character string.",
    ),
];

const SETUP: &[&str] = &[
    "CREATE TABLE s (v VARCHAR(10))",
    "INSERT INTO s (v) VALUES ('a'), ('A'), ('b'), ('b ')",
    "CREATE TABLE nt (n INT)",
    "INSERT INTO nt (n) VALUES (2), (NULL), (1)",
];

pub fn run(rt: &Runtime, fixture: &Fixture) -> Value {
    println!("== semantic fit: SQL Server / extentdb / DataFusion ==");
    let mut session = fixture.session();
    for sql in SETUP {
        must(&mut session, sql);
    }
    let generic = datafusion_context(rt, "generic");
    let mssql = datafusion_context(rt, "mssql");
    let mut out = Vec::new();
    let (mut df_ok, mut xdb_ok) = (0, 0);
    for (name, sql, expected) in CHECKS {
        let ours = answer(&mut session, sql);
        let df = rt.block_on(df_answer(&generic, sql));
        let df_mssql = rt.block_on(df_answer(&mssql, sql));
        df_ok += (df == *expected || df_mssql == *expected) as usize;
        xdb_ok += (ours == *expected) as usize;
        println!("{name:<28} SQL Server: {expected}\n{:<28} extentdb:   {ours}\n{:<28} DataFusion: {df}\n{:<28} DataFusion (mssql dialect): {df_mssql}", "", "", "");
        out.push(
            json!({ "name": name, "sql": sql, "sql_server": expected, "extentdb": ours,
                         "datafusion_generic_dialect": df, "datafusion_mssql_dialect": df_mssql }),
        );
    }
    println!(
        "SQL Server's answer given: extentdb {xdb_ok}/{}, DataFusion {df_ok}/{}",
        CHECKS.len(),
        CHECKS.len()
    );
    json!({ "checks": out, "matching_sql_server": { "extentdb": xdb_ok, "datafusion_either_dialect": df_ok, "of": CHECKS.len() } })
}

fn datafusion_context(rt: &Runtime, dialect: &str) -> SessionContext {
    let mut config = SessionConfig::new().with_target_partitions(1);
    config.options_mut().sql_parser.dialect = dialect.parse().expect("dialect");
    let ctx = SessionContext::new_with_config(config);
    for sql in SETUP {
        let text = sql.replace("VARCHAR(10)", "VARCHAR");
        rt.block_on(async { ctx.sql(&text).await?.collect().await })
            .expect("DataFusion setup");
    }
    ctx
}

/// DataFusion's answer as text, rendered like `engine::answer`.
async fn df_answer(ctx: &SessionContext, sql: &str) -> String {
    let batches = match ctx.sql(sql).await {
        Ok(df) => df.collect().await,
        Err(e) => Err(e),
    };
    let batches = match batches {
        Ok(b) => b,
        Err(e) => return format!("error: {}", e.to_string().lines().next().unwrap_or("")),
    };
    let options = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for batch in &batches {
        let formatters: Vec<_> = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).expect("format"))
            .collect();
        for r in 0..batch.num_rows() {
            rows.push(
                formatters
                    .iter()
                    .map(|f| f.value(r).to_string())
                    .collect::<Vec<_>>()
                    .join("|"),
            );
        }
    }
    rows.join("; ")
}
