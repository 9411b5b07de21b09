//! extentdb itself, in-process: an instance in a fresh temporary directory, its engine and
//! one session, to answer the semantic checks and to time a point SELECT beside DataFusion.

use std::path::PathBuf;
use std::sync::Arc;

use extentdb_sql::exec::{Engine, Output, Session};

pub struct Fixture {
    dir: PathBuf,
    instance: Arc<extentdb_storage::Instance>,
    pub engine: Arc<Engine>,
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = std::env::temp_dir().join(format!("xdb-qp-choice-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let fs: Arc<dyn extentdb_io::FileSystem> = extentdb_io::os::OsFileSystem::new();
        let mut config = extentdb_storage::config::InstanceConfig::defaults(&dir);
        config.max_server_memory_mb = 256;
        let options = extentdb_storage::instance::SetupOptions {
            config,
            sa_password: None,
        };
        extentdb_storage::Instance::setup(fs.clone(), &dir, options).expect("setup");
        let instance = Arc::new(extentdb_storage::Instance::start(fs, &dir, &[]).expect("start"));
        let engine = Engine::new(instance.clone());
        must(&mut engine.session(), "CREATE DATABASE qp");
        Fixture {
            dir,
            instance,
            engine,
        }
    }

    /// A session in database `qp`.
    pub fn session(&self) -> Session {
        let mut s = self.engine.session();
        must(&mut s, "USE qp");
        s
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.instance.shutdown();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs a batch that must succeed.
pub fn must(s: &mut Session, sql: &str) {
    let out = s.execute(sql);
    if let Some(e) = first_error(&out) {
        panic!("{sql}: {e}");
    }
}

pub fn first_error(out: &[Output]) -> Option<String> {
    out.iter().find_map(|o| match o {
        Output::Error(e) => Some(format!("Msg {}: {}", e.number, e.text)),
        _ => None,
    })
}

/// A batch's answer as text: its rows ("a|b; c|d") or its first error.
pub fn answer(s: &mut Session, sql: &str) -> String {
    let out = s.execute(sql);
    if let Some(e) = first_error(&out) {
        return e;
    }
    let mut columns = Vec::new();
    let mut rows = Vec::new();
    for o in &out {
        match o {
            Output::Columns(c) => columns = c.clone(),
            Output::Row(r) => rows.push(render(&columns, r)),
            Output::Rows { columns, rows: all } => {
                rows.extend(all.iter().map(|r| render(columns, r)))
            }
            _ => {}
        }
    }
    rows.join("; ")
}

fn render(
    columns: &[(String, extentdb_sql::types::SqlType)],
    row: &[extentdb_sql::types::Value],
) -> String {
    row.iter()
        .zip(columns)
        .map(|(v, (_, t))| match v {
            extentdb_sql::types::Value::Null => "NULL".to_string(),
            v => extentdb_sql::render::format_value(v, *t).trim().to_string(),
        })
        .collect::<Vec<_>>()
        .join("|")
}

/// Loads `kv` as `bench/wire/` makes it, with `rows` rows, 1,000 per INSERT.
pub fn load_kv(s: &mut Session, rows: i32) {
    must(
        s,
        "CREATE TABLE kv (k INT PRIMARY KEY, x INT NOT NULL, pad CHAR(200) NOT NULL)",
    );
    let mut start = 0;
    while start < rows {
        let end = (start + 1000).min(rows);
        let values: Vec<String> = (start..end)
            .map(|k| format!("({k}, {}, 'p')", k % 10))
            .collect();
        must(
            s,
            &format!("INSERT INTO kv (k, x, pad) VALUES {}", values.join(", ")),
        );
        start = end;
    }
}
