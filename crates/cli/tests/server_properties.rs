//! What the server says it is, through a real `extentdb serve` and real TDS sessions
//! (crates/sql/src/exec/server_properties.rs): @@VERSION in the form tools parse,
//! SERVERPROPERTY's values and its NULL for unknown names, the default data path where
//! CREATE DATABASE puts files, and @@OPTIONS following each session's own SET options.

mod common;
use common::tds::{int, run, table, Server};

/// @@VERSION's first line is SQL Server 2022 RTM's (what SQLAlchemy's mssql dialect reads
/// its version from), its second names extentdb; SERVERPROPERTY's version, edition and
/// collation properties agree with it, @@MICROSOFTVERSION too; unknown names are NULL.
#[test]
fn version_and_server_properties() {
    let s = Server::start("srvprop", &[]);
    let mut c = s.connect();
    let version = table(&mut c, "SELECT @@VERSION")[0].clone();
    assert!(
        version.starts_with("Microsoft SQL Server 2022 (RTM) - 16.0.1000.6 (X64)"),
        "{version}"
    );
    assert!(version.contains("extentdb"), "{version}");
    assert_eq!(
        table(
            &mut c,
            "SELECT SERVERPROPERTY('ProductVersion'), SERVERPROPERTY('productmajorversion'),
                    SERVERPROPERTY('ProductBuild'), SERVERPROPERTY('ProductLevel'),
                    SERVERPROPERTY('Edition'), SERVERPROPERTY('EngineEdition'),
                    SERVERPROPERTY('Collation'), SERVERPROPERTY('InstanceName'),
                    SERVERPROPERTY('IsHadrEnabled'), SERVERPROPERTY('NoSuchProperty'),
                    SERVERPROPERTY(NULL), @@MICROSOFTVERSION / 16777216, @@MICROSOFTVERSION & 65535,
                    @@LANGUAGE, @@SERVICENAME, @@DATEFIRST, @@MAX_PRECISION"
        ),
        [
            "16.0.1000.6,16,1000,RTM,Standard Edition (64-bit),2,SQL_Latin1_General_CP1_CI_AS,\
          NULL,0,NULL,NULL,16,1000,us_english,MSSQLSERVER,7,38"
        ]
    );
    // Ola Hallengren's DatabaseBackup compresses on Standard's EditionID.
    assert_eq!(
        table(&mut c, "SELECT SERVERPROPERTY('EditionID')"),
        ["-1534726760"]
    );
    let pid = int(&common::tds::all_rows(&run(&mut c, "SELECT SERVERPROPERTY('ProcessID')"))[0][0]);
    assert_eq!(pid as u32, s.child.id(), "the serving process");
}

/// InstanceDefaultDataPath is the directory CREATE DATABASE puts files named without
/// one in; InstanceDefaultBackupPath the one BACKUP writes a bare file name to.
#[test]
fn default_paths_are_where_files_go() {
    let s = Server::start("srvpaths", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE pathdb");
    let data = table(&mut c, "SELECT SERVERPROPERTY('InstanceDefaultDataPath')")[0].clone();
    assert!(data.ends_with('/'), "{data}");
    let files = table(
        &mut c,
        "SELECT physical_name FROM sys.master_files WHERE database_id = DB_ID('pathdb')",
    );
    assert!(!files.is_empty());
    for f in &files {
        assert!(f.starts_with(&data), "{f} under {data}");
    }
    let backup = table(&mut c, "SELECT SERVERPROPERTY('InstanceDefaultBackupPath')")[0].clone();
    run(&mut c, "BACKUP DATABASE pathdb TO DISK = 'pathdb.bak'");
    let bak = std::path::Path::new(&backup).join("pathdb.bak");
    assert!(bak.exists(), "{}", bak.display());
}

/// @@OPTIONS is 5496 on a new session (ANSI_WARNINGS, ANSI_PADDING, ANSI_NULLS,
/// ARITHABORT, QUOTED_IDENTIFIER, ANSI_NULL_DFLT_ON, CONCAT_NULL_YIELDS_NULL: the options
/// the engine always behaves as) and adds NOCOUNT (512), XACT_ABORT (16384),
/// IMPLICIT_TRANSACTIONS (2) and CURSOR_CLOSE_ON_COMMIT (4) as one session sets them;
/// another session's stays as it was.
#[test]
fn options_follow_each_sessions_settings() {
    let s = Server::start("srvopts", &[]);
    let mut a = s.connect();
    let mut b = s.connect();
    let options = |c: &mut extentdb_tds::client::Client| table(c, "SELECT @@OPTIONS")[0].clone();
    assert_eq!(options(&mut a), "5496");
    run(&mut a, "SET NOCOUNT ON");
    assert_eq!(options(&mut a), (5496 + 512).to_string());
    run(&mut a, "SET XACT_ABORT ON; SET IMPLICIT_TRANSACTIONS ON");
    run(&mut a, "SET CURSOR_CLOSE_ON_COMMIT ON");
    assert_eq!(options(&mut a), (5496 + 512 + 16384 + 2 + 4).to_string());
    assert_eq!(options(&mut b), "5496");
    run(
        &mut a,
        "IF @@TRANCOUNT > 0 COMMIT; SET NOCOUNT OFF; SET XACT_ABORT OFF",
    );
    run(
        &mut a,
        "SET IMPLICIT_TRANSACTIONS OFF; SET CURSOR_CLOSE_ON_COMMIT OFF",
    );
    assert_eq!(options(&mut a), "5496");
}
