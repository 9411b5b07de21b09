//! The T-SQL front end and executor on arbitrary text: the lexer and parser on every input,
//! then, for inputs that touch only tables (no file, backup, wait or loop statements), a
//! real session on a real instance made once per process. Nothing may panic. Run with
//! `cargo +nightly fuzz run sql` from `fuzz/`; `crates/sql/tests/sql_fuzz.rs` runs seeded
//! mutations of the same two stages on stable in every test run.
#![no_main]

use std::sync::{Arc, Mutex, OnceLock};

use extentdb_sql::exec::{Engine, Session};
use libfuzzer_sys::fuzz_target;

/// Words whose statements could write outside a table, wait, loop or stop the server.
const NOT_EXECUTED: &[&str] = &[
    "DATABASE", "BACKUP", "RESTORE", "WAITFOR", "SHUTDOWN", "FILE", "DBCC", "KILL", "WHILE",
    "GOTO", "LOGIN", "REPLICATE", "SPACE", "CHECKPOINT",
];

fn session() -> &'static Mutex<Session> {
    static SESSION: OnceLock<Mutex<Session>> = OnceLock::new();
    SESSION.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("xdb-fuzz-sql-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let fs: Arc<dyn extentdb_io::FileSystem> = extentdb_io::os::OsFileSystem::new();
        let mut config = extentdb_storage::config::InstanceConfig::defaults(&dir);
        config.max_server_memory_mb = 64;
        let setup = extentdb_storage::instance::SetupOptions {
            config,
            sa_password: None,
        };
        extentdb_storage::Instance::setup(fs.clone(), &dir, setup).expect("setup");
        let instance = extentdb_storage::Instance::start(fs, &dir, &[]).expect("start");
        let mut s = Engine::new(Arc::new(instance)).session();
        s.execute("CREATE DATABASE fuzz");
        Mutex::new(s)
    })
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = extentdb_sql::parser::parse_batch(&text);
    let upper = text.to_ascii_uppercase();
    if NOT_EXECUTED.iter().any(|w| upper.contains(w)) {
        return;
    }
    let mut s = session().lock().unwrap();
    s.execute(&format!("USE fuzz;\n{text}"));
});
