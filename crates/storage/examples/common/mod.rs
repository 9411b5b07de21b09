//! Helpers shared by the storage benchmarks (examples): catalog entries for a one-column
//! table, files, and where results go.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use extentdb_format::catalog::{ColumnEntry, TableEntry};
use extentdb_format::file_header::FileType;
use extentdb_storage::file_init::InitLog;
use extentdb_storage::NewFile;

/// An initialization log that drops every message (creation is not measured).
pub struct Quiet;
impl InitLog for Quiet {
    fn log(&self, _: &str) {}
}

/// Column 1 of a table: NOT NULL, no identity, no default.
pub fn column(name: &str, system_type_id: u8, max_length: i16) -> ColumnEntry {
    ColumnEntry {
        column_id: 1,
        name: name.into(),
        system_type_id,
        max_length,
        precision: 0,
        scale: 0,
        is_nullable: false,
        identity: None,
        default_sql: String::new(),
        computed: None,
    }
}

/// A heap in PRIMARY with the given columns.
pub fn table(name: &str, columns: Vec<ColumnEntry>) -> TableEntry {
    TableEntry {
        object_id: 0,
        schema_name: "dbo".into(),
        name: name.into(),
        created_us: 0,
        data_space_id: 1,
        allocation_unit_id: 0,
        index_id: 0,
        root_page: extentdb_format::PageId::NULL,
        primary_key: None,
        columns,
        identity_last: Default::default(),
        lock_escalation: Default::default(),
        pending_ddl: None,
        index_of: None,
        checks: Vec::new(),
        foreign_keys: Vec::new(),
        is_disabled: false,
    }
}

/// A file in PRIMARY without MAXSIZE.
pub fn new_file(name: &str, path: PathBuf, t: FileType, size_pages: u32, growth: u32) -> NewFile {
    NewFile {
        name: name.into(),
        physical_name: path,
        file_type: t,
        filegroup: "PRIMARY".into(),
        size_pages,
        max_size_pages: -1,
        growth,
        is_percent_growth: false,
    }
}

/// (date, host) for a results file name.
pub fn date_and_host() -> (String, String) {
    let host = std::fs::read_to_string("/etc/hostname")
        .unwrap_or_default()
        .trim()
        .to_string();
    let date = std::process::Command::new("date")
        .arg("+%F")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    (date, host)
}

/// Writes `json` to bench/results/<date>-<host>-<name>.json, or to the directory named by
/// XDB_RESULTS_DIR (as bench/lib.py does); returns the path written.
pub fn write_results(name: &str, json: &str) -> String {
    let (date, host) = date_and_host();
    let out = match std::env::var_os("XDB_RESULTS_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/results"),
    };
    std::fs::create_dir_all(&out).unwrap();
    let path = out.join(format!("{date}-{host}-{name}.json"));
    std::fs::write(&path, json).unwrap();
    path.display().to_string()
}

/// The median of `v` (the upper one of an even count); 0 when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// The value after option `name` on the command line, as a number; panics with the
/// option's name when it is missing or not a number.
pub fn number<T: std::str::FromStr>(args: &mut impl Iterator<Item = String>, name: &str) -> T {
    args.next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} needs a number"))
}

/// Removes `path` if present.
pub fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
}
