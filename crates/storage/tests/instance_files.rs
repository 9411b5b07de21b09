//! Integration tests of the instance and file-level DDL on the real file system, and of
//! failure atomicity with injected faults on the simulated one.

mod common;
use common::{ctx, file, set_up_instance, spec, Quiet};
use std::path::{Path, PathBuf};

use extentdb_format::file_header::FileType;
use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_storage::config::InstanceConfig;
use extentdb_storage::database::OpContext;
use extentdb_storage::file_init::{InitLog, InitPolicy};
use extentdb_storage::{Database, Instance, StorageError};

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("xdb-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Proves setup, start, create, grow, add and remove file, reopen and drop work end to end,
/// and that free-extent figures follow the pinned arithmetic.
#[test]
fn instance_lifecycle() {
    let dir = temp_dir("life");
    let fs = set_up_instance(&dir);
    let inst = Instance::start(fs.clone(), &dir, &[]).unwrap();
    let root = inst.config.data_roots[0].clone();
    let ctx = ctx(fs.as_ref(), true, &Quiet);
    inst.create_database(&ctx, &spec("Company", &root)).unwrap();
    assert!(matches!(
        inst.create_database(&ctx, &spec("company", &root)),
        Err(StorageError::DatabaseExists(_))
    ));
    let (_, db) = inst.database_by_name("Company").unwrap();
    {
        let mut db = db.lock_for_tests();
        // 5 MB primary: 80 extents less the two system extents and one catalog extent.
        assert_eq!(db.data_files[&1].free_extents().unwrap(), 77);
        db.add_files(
            &ctx,
            &[file(
                "SecondFile",
                root.join("SecondFile.ndf"),
                FileType::Rows,
                640,
            )],
        )
        .unwrap();
        assert_eq!(db.data_files[&3].free_extents().unwrap(), 79);
        db.grow_file(&ctx, 3, 32_000).unwrap();
        assert_eq!(db.data_files[&3].free_extents().unwrap(), 3996);
        assert!(db.is_file_empty(3).unwrap());
        db.remove_file(fs.as_ref(), "SecondFile").unwrap();
        assert!(!root.join("SecondFile.ndf").exists());
    }
    drop(db);
    drop(inst);
    let inst = Instance::start(fs.clone(), &dir, &[]).unwrap();
    let (_, db) = inst.database_by_name("company").unwrap();
    assert_eq!(db.lock_for_tests().catalog.files.len(), 2);
    drop(db);
    inst.drop_database("Company").unwrap();
    assert!(!root.join("Company.mdf").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Proves a reopened database reads the newest catalog after many saves (copy-on-write
/// chain and boot page generations), and that catalog pages do not leak.
#[test]
fn catalog_survives_reopen_after_many_saves() {
    let fs = SimFileSystem::new(3, Faults::default());
    let root = Path::new("/sim");
    let ctx = ctx(&fs, true, &Quiet);
    let mut db = Database::create(&ctx, &spec("Cat", root)).unwrap();
    let free_before = db.data_files[&1].free_extents().unwrap();
    for i in 0..40 {
        db.update_file_entry(2, |f| f.growth = 10 + i).unwrap();
    }
    assert_eq!(db.data_files[&1].free_extents().unwrap(), free_before);
    let db = Database::open(&fs, &root.join("Cat.mdf")).unwrap();
    assert_eq!(db.catalog.files[1].growth, 49);
}

/// Proves ENOSPC and EACCES during create and grow leave no file and no catalog change.
#[test]
fn failures_change_nothing() {
    let fs = SimFileSystem::new(9, Faults::default());
    let root = Path::new("/sim");
    let ctx = ctx(&fs, false, &Quiet);
    fs.set_faults(Faults {
        capacity_bytes: Some(3 << 20),
        ..Default::default()
    });
    let e = Database::create(&ctx, &spec("Full", root)).err().unwrap();
    assert!(matches!(e, StorageError::FileCreate { .. }), "{e}");
    assert!(fs.paths().is_empty(), "left {:?}", fs.paths());
    fs.set_faults(Faults {
        deny_create_under: Some(root.join("deny")),
        ..Default::default()
    });
    let mut s = spec("Deny", root);
    s.files[1].physical_name = root.join("deny/Deny_log.ldf");
    assert!(Database::create(&ctx, &s).is_err());
    assert!(fs.paths().is_empty());
    fs.set_faults(Faults::default());
    let mut db = Database::create(&ctx, &spec("Grow", root)).unwrap();
    fs.set_faults(Faults {
        capacity_bytes: Some(16 << 20),
        ..Default::default()
    });
    let r = db.grow_file(&ctx, 1, 64_000);
    let e = r.err().unwrap();
    assert!(matches!(e, StorageError::FileExpand { .. }), "{e}");
    assert_eq!(db.catalog.files[0].size_pages, 640);
    fs.set_faults(Faults::default());
    let db2 = Database::open(&fs, &root.join("Grow.mdf")).unwrap();
    assert_eq!(db2.catalog.files[0].size_pages, 640);
    assert_eq!(db2.data_files[&1].free_extents().unwrap(), 77);
}

/// Collects initialization messages, honouring log_once like the instance's error log.
#[derive(Default)]
struct Collect {
    lines: std::sync::Mutex<Vec<String>>,
    once: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl InitLog for Collect {
    fn log(&self, text: &str) {
        self.lines.lock().unwrap().push(text.to_string());
    }
    fn log_once(&self, key: &str, text: &str) {
        if self.once.lock().unwrap().insert(key.to_string()) {
            self.log(text);
        }
    }
}

/// Proves that where fallocate is refused, IFI falls back to writing zeros, says so once
/// per file, and still reports the zeroing under trace flags 3004 + 3605.
#[test]
fn fallocate_refused_falls_back_to_zeros_once_per_file() {
    let fs = SimFileSystem::new(
        5,
        Faults {
            refuse_fallocate: true,
            ..Default::default()
        },
    );
    let root = Path::new("/sim");
    let log = Collect::default();
    let ctx = OpContext {
        fs: &fs,
        policy: InitPolicy {
            instant: true,
            trace_zeroing: true,
        },
        log: &log,
    };
    let mut db = Database::create(&ctx, &spec("NoFalloc", root)).unwrap();
    db.grow_file(&ctx, 1, 1280).unwrap();
    db.grow_file(&ctx, 1, 1920).unwrap();
    let lines = log.lines.lock().unwrap().clone();
    let refused: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("refused fallocate"))
        .collect();
    assert_eq!(
        refused.len(),
        1,
        "once for the data file (the log never uses IFI): {lines:#?}"
    );
    let data_zeroing = lines
        .iter()
        .filter(|l| l.starts_with("Zeroing /sim/NoFalloc.mdf"))
        .count();
    assert_eq!(
        data_zeroing, 3,
        "create and two growths zero the data file: {lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l == "Zeroing /sim/NoFalloc.mdf from page 640 to 1280 (0x500000 to 0xa00000)"),
        "{lines:#?}"
    );
}

/// Proves the two ways a database fails to open at start-up are told apart: a damaged block
/// inside the durable log (valid log follows it) is SUSPECT with SQL Server's 9004 in the
/// error log, never a silently shorter log; a missing log file is RECOVERY_PENDING. The
/// instance starts either way.
#[test]
fn damaged_log_is_suspect_and_missing_log_is_recovery_pending() {
    use extentdb_storage::instance::UnopenedState;
    let dir = temp_dir("logdamage");
    let fs = set_up_instance(&dir);
    let (victim, ldf) = {
        let inst = Instance::start(fs.clone(), &dir, &[]).unwrap();
        let root = inst.config.data_roots[0].clone();
        let ctx = ctx(fs.as_ref(), true, &Quiet);
        for (i, name) in ["Damaged", "Missing"].into_iter().enumerate() {
            let mut s = spec(name, &root);
            s.database_id = 5 + i as u16;
            // A 32 MB log: no checkpoint truncates it during the test.
            s.files[1].size_pages = 4096;
            inst.create_database(&ctx, &s).unwrap();
        }
        let (_, db) = inst.database_by_name("Damaged").unwrap();
        let mut db = db.lock_for_tests();
        let t = db.create_table(common::table_entry(false)).unwrap();
        // ~3 MB of incompressible log in committed transactions, no checkpoint after.
        let mut x = 0x9e37_79b9u64;
        let mut first = None;
        for k in 0..6000u32 {
            let v: Vec<u8> = (0..500)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let xact = db.begin_xact();
            db.now(|d| d.insert_row(xact, t, (&common::row(k, &v), d.growth_env()), None))
                .unwrap();
            let lsn = db.commit_xact(xact).unwrap().unwrap();
            db.wal().unwrap().flush(lsn).unwrap();
            if k == 200 {
                first = Some(lsn);
            }
        }
        let lsn = first.unwrap();
        let v = db
            .vlfs()
            .unwrap()
            .into_iter()
            .find(|v| v.sequence == lsn.vlf_sequence)
            .unwrap();
        let ldf = db
            .physical_names()
            .into_iter()
            .find(|p| p.extension().is_some_and(|e| e == "ldf"))
            .unwrap();
        (v.start_offset + lsn.block as u64 * 512 + 100, ldf)
        // Dropped without a shutdown checkpoint: a crash, as far as the files tell.
    };
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&ldf)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, victim).unwrap();
    f.write_all_at(&[b[0] ^ 0x77], victim).unwrap();
    drop(f);
    let missing_ldf = ldf.with_file_name("Missing_log.ldf");
    std::fs::rename(&missing_ldf, dir.join("elsewhere.ldf")).unwrap();
    let inst = Instance::start(fs.clone(), &dir, &[]).unwrap();
    assert_eq!(inst.unopened_state("Damaged"), Some(UnopenedState::Suspect));
    assert_eq!(
        inst.unopened_state("Missing"),
        Some(UnopenedState::RecoveryPending)
    );
    let log = std::fs::read_to_string(dir.join("log/ERRORLOG")).unwrap();
    assert!(
        log.contains("Error: 9004, Severity: 21, State: 1."),
        "{log}"
    );
    assert!(
        log.contains("An error occurred while processing the log for database 'Damaged'."),
        "{log}"
    );
    assert!(
        log.contains("Database 'Missing' cannot be opened") && log.contains("RECOVERY_PENDING"),
        "{log}"
    );
    assert!(inst.database_by_name("master").is_some());
    drop(inst);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Proves setup creates msdb (id 4, SQL Server's file names), and that an instance set up
/// before msdb existed (master lists no msdb, no msdb files) gets it at its next start.
#[test]
fn msdb_is_created_by_setup_and_for_older_instances() {
    use extentdb_storage::instance::MSDB_ID;
    let dir = temp_dir("msdb");
    let fs = set_up_instance(&dir);
    let root = InstanceConfig::defaults(&dir).data_roots[0].clone();
    assert!(root.join("MSDBData.mdf").exists() && root.join("MSDBLog.ldf").exists());
    {
        let inst = Instance::start(fs.clone(), &dir, &[]).unwrap();
        let (id, _) = inst.database_by_name("msdb").unwrap();
        assert_eq!(id, MSDB_ID);
        assert!(matches!(
            inst.drop_database("msdb"),
            Err(StorageError::SystemDatabase(_))
        ));
    }
    // An instance of an earlier version: master without msdb.
    {
        let mut master = Database::open(fs.as_ref(), &root.join("master.mdf")).unwrap();
        master
            .catalog
            .databases
            .retain(|d| d.database_id != MSDB_ID);
        master.save_catalog().unwrap();
    }
    std::fs::remove_file(root.join("MSDBData.mdf")).unwrap();
    std::fs::remove_file(root.join("MSDBLog.ldf")).unwrap();
    let inst = Instance::start(fs.clone(), &dir, &[]).unwrap();
    let (id, _) = inst.database_by_name("msdb").unwrap();
    assert_eq!(id, MSDB_ID);
    assert!(root.join("MSDBData.mdf").exists());
    drop(inst);
    // And it stays: the next start opens it like any other database.
    let inst = Instance::start(fs, &dir, &[]).unwrap();
    assert_eq!(inst.database_by_name("msdb").unwrap().0, MSDB_ID);
    drop(inst);
    std::fs::remove_dir_all(&dir).unwrap();
}
