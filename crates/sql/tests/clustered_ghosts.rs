//! Ghosts in a clustered index: a key deleted and inserted again leaves a ghost each time,
//! and a leaf full of one key's ghosts must neither split inside that key (CHECKDB Msg 8934,
//! and searches by key reading only one of the two leaves) nor grow without bound. Found by
//! `sql_fuzz.rs` (`XDB_SQL_FUZZ_CHECK_EACH=1 XDB_SQL_FUZZ_CASES=64360`, case 64358: a
//! rolled-back INSERT into a leaf holding 245 ghosts of key 1). Each test runs a plain script
//! through a session and asks DBCC CHECKDB afterwards.

use std::sync::Arc;

use extentdb_sql::exec::{Engine, Output};

/// An instance in a fresh directory with database `ghosts` and table `t` (clustered on
/// `id`) holding the rows 0 and 2; dropped with the directory at the end.
struct Fixture {
    dir: std::path::PathBuf,
    instance: Arc<extentdb_storage::Instance>,
    engine: Arc<Engine>,
}

impl Fixture {
    fn new(name: &str) -> Fixture {
        let dir = std::env::temp_dir().join(format!("xdb-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let fs: Arc<dyn extentdb_io::FileSystem> = extentdb_io::os::OsFileSystem::new();
        let mut config = extentdb_storage::config::InstanceConfig::defaults(&dir);
        config.max_server_memory_mb = 64;
        extentdb_storage::Instance::setup(
            fs.clone(),
            &dir,
            extentdb_storage::instance::SetupOptions {
                config,
                sa_password: None,
            },
        )
        .unwrap();
        let instance = Arc::new(extentdb_storage::Instance::start(fs, &dir, &[]).unwrap());
        let engine = Engine::new(instance.clone());
        let f = Fixture {
            dir,
            instance,
            engine,
        };
        let mut s = f.engine.session();
        for sql in [
            "CREATE DATABASE ghosts",
            "USE ghosts; CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20) NULL)",
            "USE ghosts; INSERT INTO t VALUES (0, 'zero'), (2, 'two')",
        ] {
            assert_eq!(errors(&s.execute(sql)), Vec::<String>::new(), "{sql}");
        }
        f
    }

    /// DBCC CHECKDB's errors for the database (none when it is consistent).
    fn check(&self) -> Vec<String> {
        errors(
            &self
                .engine
                .session()
                .execute("DBCC CHECKDB (ghosts) WITH NO_INFOMSGS"),
        )
    }

    /// The table's rows as (id, v).
    fn rows(&self) -> Vec<String> {
        let out = self
            .engine
            .session()
            .execute("USE ghosts; SELECT id, v FROM t ORDER BY id");
        out.iter()
            .filter_map(|o| match o {
                Output::Rows { rows, .. } => Some(rows.iter().map(|r| format!("{r:?}"))),
                _ => None,
            })
            .flatten()
            .collect()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.instance.shutdown();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn errors(out: &[Output]) -> Vec<String> {
    out.iter()
        .filter_map(|o| match o {
            Output::Error(e) => Some(format!("{} {}", e.number, e.text)),
            _ => None,
        })
        .collect()
}

/// More delete-and-insert cycles of one key than one leaf has room for ghosts of it.
const CYCLES: usize = 600;

/// Key 1 inserted and deleted in committed transactions leaves ghosts nothing needs: the
/// insert that finds its leaf full of them cleans them up instead of splitting inside key
/// 1, and a rolled-back insert then leaves the tree as it found it (the fuzz case).
#[test]
fn committed_ghosts_of_one_key_are_cleaned_up_not_split_apart() {
    let f = Fixture::new("ghosts-committed");
    let mut s = f.engine.session();
    for i in 0..CYCLES {
        for sql in [
            "USE ghosts; INSERT INTO t VALUES (1, 'one')",
            "USE ghosts; DELETE FROM t WHERE id = 1",
        ] {
            assert_eq!(errors(&s.execute(sql)), Vec::<String>::new(), "{i}: {sql}");
        }
    }
    let out = s.execute("USE ghosts; BEGIN TRAN; INSERT INTO t VALUES (1, 'one'); ROLLBACK");
    assert_eq!(errors(&out), Vec::<String>::new());
    assert_eq!(f.check(), Vec::<String>::new(), "CHECKDB after the cycles");
    let out = s.execute("USE ghosts; INSERT INTO t VALUES (1, 'one')");
    assert_eq!(errors(&out), Vec::<String>::new());
    assert_eq!(f.check(), Vec::<String>::new());
    assert_eq!(f.rows().len(), 3, "{:?}", f.rows());
    drop(s);
}

/// One open transaction's own versions of key 1 are ghosts its rollback needs: when they
/// fill a leaf, the next insert of key 1 is refused with a message (never a split inside
/// the key), and the rollback turns the table back to its two committed rows.
#[test]
fn an_open_transactions_versions_of_one_key_filling_a_leaf_are_refused() {
    let f = Fixture::new("ghosts-open");
    let mut s = f.engine.session();
    assert_eq!(
        errors(&s.execute("USE ghosts; BEGIN TRAN")),
        Vec::<String>::new()
    );
    let mut refused = 0;
    for _ in 0..CYCLES {
        let out = s.execute("USE ghosts; INSERT INTO t VALUES (1, 'one')");
        match errors(&out).as_slice() {
            [] => {
                let out = s.execute("USE ghosts; DELETE FROM t WHERE id = 1");
                assert_eq!(errors(&out), Vec::<String>::new());
            }
            [e] if e.starts_with("40517 ") && e.contains("versions of one key") => refused += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        f.check(),
        Vec::<String>::new(),
        "CHECKDB inside the transaction"
    );
    assert!(refused > 0, "the versions of key 1 never filled a leaf");
    assert_eq!(
        errors(&s.execute("USE ghosts; ROLLBACK")),
        Vec::<String>::new()
    );
    assert_eq!(
        f.check(),
        Vec::<String>::new(),
        "CHECKDB after the rollback"
    );
    assert_eq!(
        f.rows(),
        vec!["[Int(0), Text(\"zero\")]", "[Int(2), Text(\"two\")]"]
    );
    drop(s);
}
