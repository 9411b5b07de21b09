//! Server configuration through real TDS sessions: sys.configurations with SQL Server
//! 2022's rows, sp_configure (listing, advanced options hidden, names matched by a unique
//! part, setting a value), RECONFIGURE [WITH OVERRIDE] (dynamic options at once, static
//! ones at the next start), every message SQL Server gives on the way (15123, 15124,
//! 15129, 15457, 5808, 574, 15247, 5812, and 40517 for an option not built), each option
//! with an effect shown by that effect, persistence across a restart, and sessions
//! changing settings at once.

mod common;

use std::time::Duration;

use common::tds::{all_rows, errors, int, ok, restart, run, show, Server, PASSWORD};
use extentdb_sql::exec::Output;
use extentdb_sql::types::Value;
use extentdb_storage::configurations::OPTIONS;
use extentdb_tds::client::{Client, ConnectOptions, Response};

/// The texts of a response's informational messages with number `n`.
fn infos(r: &Response, n: i32) -> Vec<String> {
    r.outputs
        .iter()
        .filter_map(|o| match o {
            Output::Info(m) if m.number == n => Some(m.text.clone()),
            _ => None,
        })
        .collect()
}

/// (value, value_in_use) of option `name` in sys.configurations.
fn setting(c: &mut Client, name: &str) -> (i64, i64) {
    let r = run(
        c,
        &format!("SELECT value, value_in_use FROM sys.configurations WHERE name = '{name}'"),
    );
    let rows = all_rows(&r);
    assert_eq!(rows.len(), 1, "{name}");
    (int(&rows[0][0]), int(&rows[0][1]))
}

/// The first result set's column names and rows.
fn result_set(r: &Response) -> (Vec<String>, Vec<Vec<Value>>) {
    r.outputs
        .iter()
        .find_map(|o| match o {
            Output::Rows { columns, rows } => {
                Some((columns.iter().map(|c| c.0.clone()).collect(), rows.clone()))
            }
            _ => None,
        })
        .expect("a result set")
}

/// The first error of a batch as (number, severity, state, text).
fn first_error(c: &mut Client, sql: &str) -> (i32, u8, u8, String) {
    let r = c.batch(sql).unwrap();
    let e = r
        .errors()
        .next()
        .unwrap_or_else(|| panic!("{sql} gave no error"));
    (e.number, e.severity, e.state, e.text.clone())
}

fn login(s: &Server, user: &str, password: &str) -> Client {
    Client::connect(
        &s.addr,
        &ConnectOptions {
            user: user.into(),
            password: password.into(),
            timeout: Some(Duration::from_secs(60)),
            ..ConnectOptions::default()
        },
    )
    .unwrap_or_else(|_| panic!("{user} could not log in"))
}

/// sys.configurations lists every SQL Server 2022 option once, in configuration_id
/// order, with its columns and a fresh instance's values.
#[test]
fn sys_configurations_has_sql_server_2022_rows() {
    let s = Server::start("conf-view", &[]);
    let mut c = s.connect();
    let r = run(&mut c, "SELECT * FROM sys.configurations");
    let (columns, rows) = result_set(&r);
    assert_eq!(
        columns,
        [
            "configuration_id",
            "name",
            "value",
            "minimum",
            "maximum",
            "value_in_use",
            "description",
            "is_dynamic",
            "is_advanced"
        ]
    );
    assert_eq!(rows.len(), OPTIONS.len());
    assert!(
        rows.len() >= 85,
        "SQL Server 2022 lists at least 85 options"
    );
    let ids: Vec<i64> = rows.iter().map(|r| int(&r[0])).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ordered by id");
    let row = |id: i64| -> String {
        let r = rows.iter().find(|r| int(&r[0]) == id).unwrap();
        r.iter().map(show).collect::<Vec<_>>().join("|")
    };
    assert_eq!(
        row(1579),
        "1579|backup compression default|0|0|1|0|Enable compression of backups by default|1|0"
    );
    assert_eq!(
        row(518),
        "518|show advanced options|0|0|1|0|show advanced options|1|0"
    );
    assert_eq!(
        row(1539),
        "1539|max degree of parallelism|0|0|32767|0|maximum degree of parallelism|1|1"
    );
    assert_eq!(
        row(103),
        "103|user connections|0|0|32767|0|Number of user connections allowed|0|1"
    );
    // The instance's own cap (setup's default of 1024 MB), which is the one in use.
    assert_eq!(
        row(1544),
        "1544|max server memory (MB)|1024|128|2147483647|1024|Maximum size of server memory (MB)|1|1"
    );
    assert_eq!(
        row(16390),
        "16390|xp_cmdshell|0|0|1|0|Enable or disable command shell|1|1"
    );
}

/// sp_configure lists the basic options by name, hides advanced ones until 'show advanced
/// options' is installed, finds an option by a unique part of its name, and tells a
/// change with 15457 while value_in_use waits for RECONFIGURE.
#[test]
fn sp_configure_lists_finds_and_sets() {
    let s = Server::start("conf-list", &[]);
    let mut c = s.connect();
    let (columns, rows) = result_set(&run(&mut c, "EXEC sp_configure"));
    assert_eq!(
        columns,
        ["name", "minimum", "maximum", "config_value", "run_value"]
    );
    let basic: Vec<&str> = OPTIONS
        .iter()
        .filter(|o| !o.is_advanced)
        .map(|o| o.name)
        .collect();
    assert_eq!(rows.len(), basic.len(), "only the basic options");
    let names: Vec<String> = rows.iter().map(|r| show(&r[0])).collect();
    let mut sorted = names.clone();
    sorted.sort_by_key(|n| n.to_lowercase());
    assert_eq!(names, sorted, "ordered by name");

    // Advanced and hidden: 15123, as for a name that does not exist.
    let e = first_error(&mut c, "EXEC sp_configure 'max server memory (MB)'");
    assert_eq!(
        e,
        (
            15123,
            16,
            1,
            "The configuration option 'max server memory (MB)' does not exist, or it may be an advanced option.".into()
        )
    );
    assert_eq!(
        errors(&mut c, "EXEC sp_configure 'no such option'"),
        [(15123, 16, 1)]
    );

    let r = run(&mut c, "EXEC sp_configure 'show advanced options', 1");
    assert_eq!(
        infos(&r, 15457),
        ["Configuration option 'show advanced options' changed from 0 to 1. Run the RECONFIGURE statement to install."]
    );
    assert_eq!(
        setting(&mut c, "show advanced options"),
        (1, 0),
        "not installed yet"
    );
    assert!(s.errorlog().contains(
        "Configuration option 'show advanced options' changed from 0 to 1. Run the RECONFIGURE statement to install."
    ));
    assert_eq!(
        errors(&mut c, "EXEC sp_configure 'max server memory (MB)'")[0].0,
        15123
    );
    run(&mut c, "RECONFIGURE");
    assert_eq!(setting(&mut c, "show advanced options"), (1, 1));
    let (_, rows) = result_set(&run(&mut c, "EXEC sp_configure"));
    assert_eq!(
        rows.len(),
        OPTIONS.len(),
        "every option once advanced ones show"
    );

    // A unique part of a name, any case, by position or by parameter name.
    let (_, rows) = result_set(&run(&mut c, "EXEC sp_configure 'MAX SERVER MEM'"));
    assert_eq!(
        rows.iter()
            .map(|r| r.iter().map(show).collect::<Vec<_>>().join("|"))
            .collect::<Vec<_>>(),
        ["max server memory (MB)|128|2147483647|1024|1024"]
    );
    let r = run(
        &mut c,
        "EXEC sp_configure @configvalue = 0, @configname = 'checksum def'",
    );
    assert_eq!(
        infos(&r, 15457),
        ["Configuration option 'backup checksum default' changed from 0 to 0. Run the RECONFIGURE statement to install."]
    );
    let r = c.batch("EXEC sp_configure 'max'").unwrap();
    assert_eq!(
        r.errors()
            .map(|e| (e.number, e.text.clone()))
            .collect::<Vec<_>>(),
        [(
            15124,
            "The configuration option 'max' is not unique.".to_string()
        )]
    );
    let (columns, dup) = result_set(&r);
    assert_eq!(columns, ["duplicate_options"]);
    assert!(dup.len() > 3 && dup.iter().all(|r| show(&r[0]).contains("max")));
}

/// Bad values are refused with SQL Server's message and change nothing; an option extentdb
/// does not build is refused at any value but its default (40517), never accepted and
/// ignored; 'allow updates' follows SQL Server (5808 unless WITH OVERRIDE).
#[test]
fn bad_values_are_refused_and_change_nothing() {
    let s = Server::start("conf-bad", &[]);
    let mut c = s.connect();
    let e = first_error(&mut c, "EXEC sp_configure 'backup compression default', 2");
    assert_eq!(
        e,
        (
            15129,
            16,
            1,
            "'2' is not a valid value for configuration option 'backup compression default'."
                .into()
        )
    );
    assert_eq!(setting(&mut c, "backup compression default"), (0, 0));

    let e = first_error(&mut c, "EXEC sp_configure 'clr enabled', 1");
    assert_eq!(e.0, 40517);
    assert!(e.3.contains("'clr enabled'"), "{}", e.3);
    assert_eq!(setting(&mut c, "clr enabled"), (0, 0));
    // The default itself is accepted (scripts set it to be sure).
    run(&mut c, "EXEC sp_configure 'clr enabled', 0");

    // Not inside a user transaction: 574, and nothing changes.
    let r = c
        .batch("BEGIN TRAN; EXEC sp_configure 'backup checksum default', 1")
        .unwrap();
    assert_eq!(
        r.errors()
            .map(|e| (e.number, e.severity, e.state))
            .collect::<Vec<_>>(),
        [(574, 16, 0)]
    );
    assert_eq!(numbers_of(&mut c, "RECONFIGURE"), [574]);
    run(&mut c, "ROLLBACK");
    assert_eq!(setting(&mut c, "backup checksum default"), (0, 0));

    run(&mut c, "EXEC sp_configure 'allow updates', 1");
    assert_eq!(
        first_error(&mut c, "RECONFIGURE"),
        (
            5808,
            16,
            1,
            "Ad hoc update to system catalogs is not supported.".into()
        )
    );
    assert_eq!(setting(&mut c, "allow updates"), (1, 0));
    run(&mut c, "RECONFIGURE WITH OVERRIDE");
    assert_eq!(setting(&mut c, "allow updates"), (1, 1));
    run(&mut c, "EXEC sp_configure 'allow updates', 0; RECONFIGURE");
    assert_eq!(setting(&mut c, "allow updates"), (0, 0));
}

fn numbers_of(c: &mut Client, sql: &str) -> Vec<i32> {
    errors(c, sql).into_iter().map(|e| e.0).collect()
}

/// A login without ALTER SETTINGS lists the options but changes none (15247) and cannot
/// RECONFIGURE (5812); a member of serveradmin can.
#[test]
fn only_alter_settings_changes_the_configuration() {
    let s = Server::start("conf-perm", &[]);
    let mut sa = s.connect();
    run(&mut sa, "CREATE LOGIN plain WITH PASSWORD = 'Conf-Test-Pass-1'; CREATE LOGIN operator WITH PASSWORD = 'Conf-Test-Pass-1'; ALTER SERVER ROLE serveradmin ADD MEMBER operator");
    let mut plain = login(&s, "plain", "Conf-Test-Pass-1");
    assert!(!all_rows(&run(&mut plain, "EXEC sp_configure")).is_empty());
    assert!(!all_rows(&run(&mut plain, "SELECT * FROM sys.configurations")).is_empty());
    assert_eq!(
        first_error(&mut plain, "EXEC sp_configure 'backup checksum default', 1"),
        (
            15247,
            16,
            1,
            "User does not have permission to perform this action.".into()
        )
    );
    assert_eq!(errors(&mut plain, "RECONFIGURE"), [(5812, 14, 1)]);
    assert_eq!(setting(&mut sa, "backup checksum default"), (0, 0));
    let mut operator = login(&s, "operator", "Conf-Test-Pass-1");
    run(
        &mut operator,
        "EXEC sp_configure 'backup checksum default', 1; RECONFIGURE",
    );
    assert_eq!(setting(&mut sa, "backup checksum default"), (1, 1));
}

/// (Compressed, HasBackupChecksums) of the last backup set in `file`.
fn backup_flags(c: &mut Client, file: &str) -> (String, String) {
    let r = run(c, &format!("RESTORE HEADERONLY FROM DISK = '{file}'"));
    let (columns, rows) = result_set(&r);
    let at = |n: &str| columns.iter().position(|c| c == n).unwrap();
    let last = rows.last().unwrap();
    (
        show(&last[at("Compressed")]),
        show(&last[at("HasBackupChecksums")]),
    )
}

/// BACKUP without COMPRESSION / CHECKSUM follows 'backup compression default' and 'backup
/// checksum default' once installed; NO_COMPRESSION / NO_CHECKSUM still win.
#[test]
fn backup_defaults_follow_the_configuration() {
    let s = Server::start("conf-backup", &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "CREATE DATABASE cb; USE cb; CREATE TABLE t (a int); INSERT INTO t VALUES (1), (2)",
    );
    run(&mut c, "BACKUP DATABASE cb TO DISK = 'cb0.bak'");
    assert_eq!(backup_flags(&mut c, "cb0.bak"), ("0".into(), "0".into()));
    run(
        &mut c,
        "EXEC sp_configure 'backup compression default', 1; EXEC sp_configure 'backup checksum default', 1",
    );
    // Configured but not installed: BACKUP still follows the values in use.
    run(&mut c, "BACKUP DATABASE cb TO DISK = 'cb1.bak'");
    assert_eq!(backup_flags(&mut c, "cb1.bak"), ("0".into(), "0".into()));
    run(&mut c, "RECONFIGURE");
    run(&mut c, "BACKUP DATABASE cb TO DISK = 'cb2.bak'");
    assert_eq!(backup_flags(&mut c, "cb2.bak"), ("1".into(), "1".into()));
    run(&mut c, "BACKUP LOG cb TO DISK = 'cb2.trn'");
    assert_eq!(backup_flags(&mut c, "cb2.trn"), ("1".into(), "1".into()));
    run(
        &mut c,
        "BACKUP DATABASE cb TO DISK = 'cb3.bak' WITH NO_COMPRESSION, NO_CHECKSUM",
    );
    assert_eq!(backup_flags(&mut c, "cb3.bak"), ("0".into(), "0".into()));
    run(&mut c, "RESTORE VERIFYONLY FROM DISK = 'cb2.bak'");
}

/// 'max server memory (MB)' is the buffer pools' cap, installed at once: the cap in use
/// (sys.dm_os_sys_info.committed_target_kb) follows RECONFIGURE, and the server goes on
/// serving under the lower cap.
#[test]
fn max_server_memory_sets_the_pool_cap() {
    let s = Server::start("conf-memory", &[]);
    let mut c = s.connect();
    let target = |c: &mut Client| {
        int(&all_rows(&run(
            c,
            "SELECT committed_target_kb FROM sys.dm_os_sys_info",
        ))[0][0])
    };
    assert_eq!(target(&mut c), 1024 * 1024);
    run(
        &mut c,
        "EXEC sp_configure 'show advanced options', 1; RECONFIGURE",
    );
    assert_eq!(
        errors(&mut c, "EXEC sp_configure 'max server memory (MB)', 127")[0].0,
        15129
    );
    run(&mut c, "EXEC sp_configure 'max server memory (MB)', 128");
    assert_eq!(target(&mut c), 1024 * 1024, "not installed yet");
    run(&mut c, "RECONFIGURE");
    assert_eq!(target(&mut c), 128 * 1024);
    assert_eq!(setting(&mut c, "max server memory (MB)"), (128, 128));
    run(
        &mut c,
        "CREATE DATABASE mm; USE mm; CREATE TABLE t (a int, b char(2000))",
    );
    run(&mut c, "INSERT INTO t SELECT TOP 3000 1, 'x' FROM sys.configurations a CROSS JOIN sys.configurations b");
    assert_eq!(
        int(&all_rows(&run(&mut c, "SELECT COUNT(*) FROM t"))[0][0]),
        3000
    );
}

/// 'max degree of parallelism' is DBCC CHECKDB's worker count when it names no MAXDOP;
/// CHECKDB stays clean at 1 and at the default.
#[test]
fn max_degree_of_parallelism_reaches_checkdb() {
    let s = Server::start("conf-maxdop", &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "CREATE DATABASE md; USE md; CREATE TABLE t (a int PRIMARY KEY, b nvarchar(100))",
    );
    run(
        &mut c,
        "INSERT INTO t SELECT configuration_id, name FROM sys.configurations",
    );
    run(
        &mut c,
        "EXEC sp_configure 'show advanced options', 1; RECONFIGURE",
    );
    run(
        &mut c,
        "EXEC sp_configure 'max degree of parallelism', 1; RECONFIGURE",
    );
    assert_eq!(setting(&mut c, "max degree of parallelism"), (1, 1));
    common::tds::assert_checkdb_clean(&mut c, "md", "at MAXDOP 1 by configuration");
}

/// Configured values persist across a restart (a SIGKILL, not a clean shutdown) and are
/// all in use after it: a static option ('user connections') waits for it, then bounds the
/// sessions the server accepts.
#[test]
fn settings_persist_and_static_options_wait_for_a_restart() {
    let s = Server::start("conf-restart", &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "EXEC sp_configure 'show advanced options', 1; RECONFIGURE",
    );
    run(
        &mut c,
        "EXEC sp_configure 'user connections', 3; RECONFIGURE",
    );
    run(
        &mut c,
        "EXEC sp_configure 'backup compression default', 1; RECONFIGURE",
    );
    run(&mut c, "EXEC sp_configure 'backup checksum default', 1");
    assert_eq!(
        setting(&mut c, "user connections"),
        (3, 0),
        "static: waits for a restart"
    );
    assert_eq!(setting(&mut c, "backup checksum default"), (1, 0));
    let _more: Vec<Client> = (0..4).map(|_| s.connect()).collect();
    drop(_more);
    drop(c);
    let s = restart(s);
    let mut c = s.connect();
    assert_eq!(setting(&mut c, "user connections"), (3, 3));
    assert_eq!(setting(&mut c, "backup compression default"), (1, 1));
    assert_eq!(
        setting(&mut c, "backup checksum default"),
        (1, 1),
        "installed at start"
    );
    assert_eq!(setting(&mut c, "show advanced options"), (1, 1));
    let _second = s.connect();
    let _third = s.connect();
    let fourth = Client::connect(
        &s.addr,
        &ConnectOptions {
            password: PASSWORD.into(),
            timeout: Some(Duration::from_secs(10)),
            ..ConnectOptions::default()
        },
    );
    assert!(fourth.is_err(), "a fourth connection is refused");
    assert!(s
        .errorlog()
        .contains("Could not connect because the maximum number of '3' user connections has already been reached."));
    ok(c.batch("SELECT 1").unwrap());
}

/// Sessions changing one option at once: each sp_configure is applied whole, one after
/// another, so the 15457 lines chain (each change starts from the value the previous one
/// left) and end at the value sys.configurations and the pool's cap show.
#[test]
fn concurrent_sp_configure_is_one_consistent_history() {
    let s = Server::start("conf-concurrent", &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "EXEC sp_configure 'show advanced options', 1; RECONFIGURE",
    );
    let re = regex::Regex::new(r"changed from (\d+) to (\d+)\.").unwrap();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let addr = s.addr.clone();
            std::thread::spawn(move || {
                let mut c = common::tds::connect_at(&addr, None, 60).unwrap();
                let mut pairs = Vec::new();
                for i in 0..10 {
                    let v = 200 + t * 100 + i;
                    let r = run(
                        &mut c,
                        &format!("EXEC sp_configure 'max server memory (MB)', {v}; RECONFIGURE"),
                    );
                    pairs.extend(infos(&r, 15457));
                }
                pairs
            })
        })
        .collect();
    let re_pairs: Vec<(i64, i64)> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .map(|m| {
            let c = re.captures(&m).unwrap();
            (c[1].parse().unwrap(), c[2].parse().unwrap())
        })
        .collect();
    assert_eq!(re_pairs.len(), 40);
    let next: std::collections::HashMap<i64, i64> = re_pairs.iter().copied().collect();
    assert_eq!(next.len(), 40, "no two changes started from the same value");
    let mut at = 1024;
    for _ in 0..40 {
        at = next[&at];
    }
    assert_eq!(setting(&mut c, "max server memory (MB)"), (at, at));
    let target = int(&all_rows(&run(
        &mut c,
        "SELECT committed_target_kb FROM sys.dm_os_sys_info",
    ))[0][0]);
    assert_eq!(target, at * 1024);
}
