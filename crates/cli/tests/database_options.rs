//! ALTER DATABASE ... SET's decision table (crates/sql/src/exec/lower.rs, `set_option`)
//! walked row by row through a real `extentdb serve` and a TDS session: each option extentdb
//! builds changes what sys.databases shows; each value that is what extentdb always does is
//! accepted and changes nothing sys.databases shows; each other value is refused with 40517
//! naming the option and the value, and changes nothing (a list with one refused option
//! changes nothing either).

use extentdb_sql::exec::Output;
use extentdb_sql::types::Value;
use extentdb_tds::client::{Client, Response};

mod common;
use common::tds::Server;

/// Every sys.databases setting (all but log_reuse_wait, which a checkpoint may change).
const SETTINGS: &str = "compatibility_level, collation_name, user_access, user_access_desc, \
    is_read_only, state_desc, recovery_model_desc, page_verify_option, page_verify_option_desc, \
    is_auto_close_on, is_auto_shrink_on, is_auto_create_stats_on, is_auto_update_stats_on, \
    is_auto_update_stats_async_on, snapshot_isolation_state, snapshot_isolation_state_desc, \
    is_read_committed_snapshot_on, is_trustworthy_on";

fn run(c: &mut Client, sql: &str) -> Response {
    let r = c.batch(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    if let Some(e) = r.errors().next() {
        panic!("{sql}: Msg {}: {}", e.number, e.text);
    }
    r
}

/// The settings of database Opts, by column name.
fn settings(c: &mut Client) -> Vec<(String, Value)> {
    let r = run(
        c,
        &format!("SELECT {SETTINGS} FROM sys.databases WHERE name = 'Opts'"),
    );
    let (columns, rows) = r
        .outputs
        .iter()
        .find_map(|o| match o {
            Output::Rows { columns, rows } => Some((columns.clone(), rows.clone())),
            _ => None,
        })
        .expect("a result set");
    assert_eq!(rows.len(), 1);
    columns
        .iter()
        .map(|c| c.0.clone())
        .zip(rows[0].iter().cloned())
        .collect()
}

fn text(v: &str) -> Value {
    Value::Text(v.into())
}

/// The values extentdb always has (user access and recovery model aside, as created).
fn defaults() -> Vec<(&'static str, Value)> {
    vec![
        ("compatibility_level", Value::TinyInt(160)),
        ("collation_name", text("SQL_Latin1_General_CP1_CI_AS")),
        ("user_access", Value::TinyInt(0)),
        ("user_access_desc", text("MULTI_USER")),
        ("is_read_only", Value::Bit(false)),
        ("state_desc", text("ONLINE")),
        ("recovery_model_desc", text("FULL")),
        ("page_verify_option", Value::TinyInt(2)),
        ("page_verify_option_desc", text("CHECKSUM")),
        ("is_auto_close_on", Value::Bit(false)),
        ("is_auto_shrink_on", Value::Bit(false)),
        ("is_auto_create_stats_on", Value::Bit(false)),
        ("is_auto_update_stats_on", Value::Bit(false)),
        ("is_auto_update_stats_async_on", Value::Bit(false)),
        ("snapshot_isolation_state", Value::TinyInt(0)),
        ("snapshot_isolation_state_desc", text("OFF")),
        ("is_read_committed_snapshot_on", Value::Bit(false)),
        ("is_trustworthy_on", Value::Bit(false)),
    ]
}

/// Options set to what extentdb always does: accepted, nothing changes.
const UNCHANGED: &[&str] = &[
    "SET READ_WRITE",
    "SET MULTI_USER",
    "SET AUTO_CLOSE OFF",
    "SET AUTO_SHRINK OFF",
    "SET AUTO_CREATE_STATISTICS OFF",
    "SET AUTO_UPDATE_STATISTICS OFF",
    "SET AUTO_UPDATE_STATISTICS_ASYNC OFF",
    "SET PAGE_VERIFY CHECKSUM",
    "SET ALLOW_SNAPSHOT_ISOLATION OFF",
    "SET READ_COMMITTED_SNAPSHOT OFF",
    "SET TRUSTWORTHY OFF",
    "SET COMPATIBILITY_LEVEL = 160",
    "SET AUTO_CLOSE OFF, AUTO_SHRINK OFF, PAGE_VERIFY CHECKSUM",
    "COLLATE SQL_Latin1_General_CP1_CI_AS",
];

/// Options refused with 40517, with the words the message must name.
const REFUSED: &[(&str, &str)] = &[
    ("SET READ_ONLY", "READ_ONLY"),
    ("SET RESTRICTED_USER", "RESTRICTED_USER"),
    ("SET AUTO_CLOSE ON", "AUTO_CLOSE ON"),
    ("SET AUTO_SHRINK ON", "AUTO_SHRINK ON"),
    ("SET AUTO_CREATE_STATISTICS ON", "AUTO_CREATE_STATISTICS ON"),
    ("SET AUTO_UPDATE_STATISTICS ON", "AUTO_UPDATE_STATISTICS ON"),
    (
        "SET AUTO_UPDATE_STATISTICS_ASYNC ON",
        "AUTO_UPDATE_STATISTICS_ASYNC ON",
    ),
    ("SET PAGE_VERIFY NONE", "PAGE_VERIFY NONE"),
    (
        "SET PAGE_VERIFY TORN_PAGE_DETECTION",
        "PAGE_VERIFY TORN_PAGE_DETECTION",
    ),
    (
        "SET ALLOW_SNAPSHOT_ISOLATION ON",
        "ALLOW_SNAPSHOT_ISOLATION ON",
    ),
    (
        "SET READ_COMMITTED_SNAPSHOT ON",
        "READ_COMMITTED_SNAPSHOT ON",
    ),
    ("SET TRUSTWORTHY ON", "TRUSTWORTHY ON"),
    ("SET COMPATIBILITY_LEVEL = 150", "COMPATIBILITY_LEVEL = 150"),
    ("SET ANSI_NULLS ON", "ANSI_NULLS ON"),
    (
        "COLLATE Latin1_General_CI_AS",
        "COLLATE Latin1_General_CI_AS",
    ),
    ("SET AUTO_CLOSE OFF, AUTO_SHRINK ON", "AUTO_SHRINK ON"),
    ("SET SINGLE_USER, AUTO_CLOSE ON", "AUTO_CLOSE ON"),
    ("SET RECOVERY SIMPLE, AUTO_CLOSE ON", "AUTO_CLOSE ON"),
    ("SET RECOVERY SIMPLE, SINGLE_USER", "more than one"),
    ("SET READ_ONLY WITH ROLLBACK IMMEDIATE", "READ_ONLY"),
];

/// Options extentdb builds: the statement, then the settings it changes.
fn built() -> Vec<(&'static str, Vec<(&'static str, Value)>)> {
    vec![
        (
            "SET RECOVERY SIMPLE",
            vec![("recovery_model_desc", text("SIMPLE"))],
        ),
        ("SET RECOVERY FULL", vec![]),
        (
            "SET SINGLE_USER",
            vec![
                ("user_access", Value::TinyInt(1)),
                ("user_access_desc", text("SINGLE_USER")),
            ],
        ),
        ("SET MULTI_USER", vec![]),
        (
            "SET SINGLE_USER, AUTO_CLOSE OFF WITH ROLLBACK IMMEDIATE",
            vec![
                ("user_access", Value::TinyInt(1)),
                ("user_access_desc", text("SINGLE_USER")),
            ],
        ),
        ("SET MULTI_USER", vec![]),
    ]
}

/// Walks every row of the decision table: built options change only what they say,
/// accepted ones nothing, refused ones return 40517 naming the option and value and
/// change nothing.
#[test]
fn every_option_is_built_accepted_unchanged_or_refused() {
    let s = Server::start("db-options", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE Opts");
    let expected: Vec<(String, Value)> = defaults()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    assert_eq!(settings(&mut c), expected);

    for sql in UNCHANGED {
        run(&mut c, &format!("ALTER DATABASE Opts {sql}"));
        assert_eq!(settings(&mut c), expected, "{sql} changed something");
    }
    for (sql, names) in REFUSED {
        let r = c.batch(&format!("ALTER DATABASE Opts {sql}")).unwrap();
        let errs: Vec<_> = r.errors().collect();
        assert_eq!(errs.len(), 1, "{sql}: {errs:?}");
        assert_eq!((errs[0].number, errs[0].severity), (40517, 16), "{sql}");
        assert!(
            errs[0].text.contains(names),
            "{sql}: {:?} does not name {names}",
            errs[0].text
        );
        assert_eq!(settings(&mut c), expected, "{sql} changed something");
    }
    for (sql, changes) in built() {
        run(&mut c, &format!("ALTER DATABASE Opts {sql}"));
        let mut want = expected.clone();
        for (k, v) in changes {
            want.iter_mut().find(|(n, _)| n == k).unwrap().1 = v;
        }
        assert_eq!(settings(&mut c), want, "{sql}");
    }
}
