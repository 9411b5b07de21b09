//! BACKUP DATABASE online beside a writer, with a transaction left open across the backup,
//! then RESTORE into a new database: the copy holds exactly the committed batches of one
//! instant (whole batches, a prefix of the writer's order), none of the open transaction's
//! rows (recovery rolled them back), checks clean, and survives an instance restart.

mod common;
use common::{ctx, heap_and_tree, row, set_up_instance, spec, Quiet};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use extentdb_format::backup::BackupType;
use extentdb_format::catalog::RecoveryModel;
use extentdb_storage::backup::{backup_database, verify_backup_set, BackupRequest};
use extentdb_storage::backup_transfer::{TransferSettings, MIN_TRANSFER};
use extentdb_storage::check_db::{check_database, CheckOptions};
use extentdb_storage::checkpoint::checkpoint_online;
use extentdb_storage::instance::Instance;
use extentdb_storage::restore::RestoreRequest;
use extentdb_storage::Database;

const BATCH: u64 = 20;

/// A new instance in a scratch directory named after `tag`, holding database Src (32 MB
/// data, 16 MB log).
fn source(
    tag: &str,
) -> (
    std::path::PathBuf,
    Arc<dyn extentdb_io::FileSystem>,
    Instance,
    Arc<extentdb_storage::shared::SharedDatabase>,
) {
    let dir = std::env::temp_dir().join(format!("xdb-{tag}-{}", std::process::id()));
    let fs = set_up_instance(&dir);
    let inst = Instance::start(fs.clone(), &dir, &[]).unwrap();
    let mut s = spec("Src", &dir.join("data"));
    s.database_id = inst.next_database_id();
    s.files[0].size_pages = 4096;
    s.files[1].size_pages = 2048;
    inst.create_database(&ctx(fs.as_ref(), true, &Quiet), &s)
        .unwrap();
    let (_, db) = inst.database_by_name("Src").unwrap();
    (dir, fs, inst, db)
}

/// A backup of `kind` to `path` (INIT) with page checksums, reporting to `progress`.
fn request<'a>(
    kind: BackupType,
    path: &'a std::path::Path,
    progress: Option<&'a (dyn Fn(u64, u64) + Sync)>,
) -> BackupRequest<'a> {
    BackupRequest {
        kind,
        compression: kind == BackupType::Log,
        path,
        init: true,
        format: false,
        checksum: true,
        copy_only: false,
        name: String::new(),
        description: String::new(),
        server_name: "test".into(),
        user_name: "sa".into(),
        // Small buffers, so a backup crosses many of them (backup_transfer.rs).
        transfer: TransferSettings {
            buffer_count: 2,
            max_transfer: MIN_TRANSFER,
        },
        block_size: 0,
        media_name: None,
        media_description: String::new(),
        expires_us: 0,
        skip: false,
        progress,
        cancel: None,
    }
}

/// RESTORE of the set in `bak` as database Copy (files Copy.mdf and Copy_log.ldf).
fn restore_as_copy(bak: &std::path::Path, recovery: bool) -> RestoreRequest<'_> {
    RestoreRequest {
        path: bak,
        position: 1,
        database: "Copy".into(),
        moves: vec![
            ("Src_data".into(), "Copy.mdf".into()),
            ("Src_log".into(), "Copy_log.ldf".into()),
        ],
        replace: false,
        checksum: true,
        recovery,
        stop_at_us: None,
        progress: None,
        cancel: None,
    }
}

/// Rows per table and findings of a full check of `db`.
fn check(db: &Database) -> (Vec<u64>, usize) {
    let src = db.check_source().unwrap();
    let r = check_database(&src, &CheckOptions::default()).unwrap();
    for f in &r.findings {
        eprintln!("finding {} {:?} page {:?}", f.number, f.args, f.page);
    }
    (r.objects.iter().map(|o| o.rows).collect(), r.findings.len())
}

/// Proves a backup taken while a writer commits batches and another transaction stays open
/// restores to one instant: whole committed batches only, the open transaction rolled back,
/// a clean CHECKDB, and the restored database reopening after a restart.
#[test]
fn online_backup_restores_one_consistent_instant() {
    let (dir, fs, inst, db) = source("backup-restore");
    let tables = heap_and_tree(&mut db.lock_for_tests());

    // A transaction that stays open across the backup: its rows must not survive a restore.
    let open = {
        let mut g = db.lock_for_tests();
        let x = g.begin_xact();
        for k in 0..50u32 {
            for &t in &tables {
                g.now(|d| {
                    d.insert_row(
                        x,
                        t,
                        (&row(2_000_000 + k, &[7u8; 100]), d.growth_env()),
                        None,
                    )
                })
                .unwrap();
            }
        }
        x
    };

    let committed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = spawn_writer(&db, &tables, &committed, &stop);
    waits_for(&committed, 2_000);
    let before = committed.load(Ordering::SeqCst);
    // Slowed (a pause per block) so that the writer changes pages while the backup copies.
    let pause = |_: u64, _: u64| std::thread::sleep(std::time::Duration::from_millis(2));
    let bak = dir.join("backup/src.bak");
    std::fs::create_dir_all(bak.parent().unwrap()).unwrap();
    let outcome = backup_database(&db, &request(BackupType::Database, &bak, Some(&pause))).unwrap();
    let after = committed.load(Ordering::SeqCst);
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(after > before, "the writer committed during the backup");
    db.lock_for_tests().commit_xact(open).unwrap();
    assert_eq!(check(&db.lock_for_tests()).1, 0, "the source checks clean");
    assert_eq!(outcome.position, 1);
    verify_backup_set(&bak, 1, true).unwrap();

    // Restore as a new database beside the source.
    let c = ctx(fs.as_ref(), true, &Quiet);
    let restored = inst
        .restore_database(&c, &restore_as_copy(&bak, true))
        .unwrap();
    let (_, copy) = inst.database_by_name("Copy").unwrap();
    let (rows, findings) = check(&copy.lock_for_tests());
    assert_eq!(findings, 0, "the restored database checks clean");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0], rows[1], "heap and tree hold the same rows");
    let n = rows[0];
    assert!(
        n >= before && n <= after,
        "{n} rows: the backup's instant lies between {before} and {after}"
    );
    assert_eq!(
        n % BATCH,
        0,
        "whole committed batches only, no open transaction's rows"
    );
    assert_ne!(restored.database_id, 0);

    // The restored database is listed in master and reopens after a restart.
    drop(copy);
    drop(db);
    inst.shutdown();
    drop(inst);
    let inst = Instance::start(fs.clone(), &dir, &[]).unwrap();
    let (_, copy) = inst.database_by_name("Copy").expect("listed in master");
    let (rows2, findings2) = check(&copy.lock_for_tests());
    assert_eq!((rows2, findings2), (rows, 0));
    inst.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A writer committing batches of BATCH rows into `tables` until `stop`; `committed`
/// counts the rows committed.
fn spawn_writer(
    db: &Arc<extentdb_storage::shared::SharedDatabase>,
    tables: &[u32],
    committed: &Arc<AtomicU64>,
    stop: &Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let (db, committed, stop, tables) =
        (db.clone(), committed.clone(), stop.clone(), tables.to_vec());
    std::thread::spawn(move || {
        let mut k = committed.load(Ordering::SeqCst);
        while !stop.load(Ordering::Relaxed) && k < 60_000 {
            {
                let mut g = db.lock_for_tests();
                let x = g.begin_xact();
                for _ in 0..BATCH {
                    let v = vec![(k % 251) as u8; 200 + (k as usize * 13) % 400];
                    for &t in &tables {
                        g.now(|d| d.insert_row(x, t, (&row(k as u32, &v), d.growth_env()), None))
                            .unwrap();
                    }
                    k += 1;
                }
                g.commit_xact(x).unwrap();
                committed.store(k, Ordering::SeqCst);
            }
            if (k / BATCH).is_multiple_of(10) {
                checkpoint_online(&db).unwrap();
            }
        }
    })
}

fn waits_for(committed: &AtomicU64, rows: u64) {
    while committed.load(Ordering::SeqCst) < rows {
        std::thread::yield_now();
    }
}

/// Proves log backups taken while a writer commits (and online checkpoints run) chain
/// without a gap: a full backup and two log backups, all taken under load, restore in
/// sequence to one instant between the counts before and after the last log backup,
/// whole batches only, the transaction open across it rolled back, checking clean.
#[test]
fn log_backups_under_load_restore_in_sequence() {
    let (dir, fs, inst, db) = source("log-backup");
    db.lock_for_tests()
        .set_recovery_model(RecoveryModel::Full)
        .unwrap();
    let tables = heap_and_tree(&mut db.lock_for_tests());
    let committed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = spawn_writer(&db, &tables, &committed, &stop);
    std::fs::create_dir_all(dir.join("backup")).unwrap();
    let pause = |_: u64, _: u64| std::thread::sleep(std::time::Duration::from_millis(1));
    let backup = |kind: BackupType, name: &str| {
        let path = dir.join("backup").join(name);
        backup_database(&db, &request(kind, &path, Some(&pause))).unwrap();
        verify_backup_set(&path, 1, true).unwrap();
        path
    };
    waits_for(&committed, 1_000);
    let full = backup(BackupType::Database, "full.bak");
    waits_for(&committed, committed.load(Ordering::SeqCst) + 2_000);
    let log1 = backup(BackupType::Log, "l1.trn");
    waits_for(&committed, committed.load(Ordering::SeqCst) + 2_000);
    // A transaction open across the last log backup.
    let open = {
        let mut g = db.lock_for_tests();
        let x = g.begin_xact();
        for k in 0..30u32 {
            g.now(|d| {
                d.insert_row(
                    x,
                    tables[0],
                    (&row(3_000_000 + k, &[9u8; 80]), d.growth_env()),
                    None,
                )
            })
            .unwrap();
        }
        x
    };
    let before = committed.load(Ordering::SeqCst);
    let log2 = backup(BackupType::Log, "l2.trn");
    let after = committed.load(Ordering::SeqCst);
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    db.lock_for_tests().commit_xact(open).unwrap();

    let c = ctx(fs.as_ref(), true, &Quiet);
    let steps = [(full, false), (log1, false), (log2, true)];
    for (i, (bak, recovery)) in steps.iter().enumerate() {
        let req = restore_as_copy(bak, *recovery);
        let outcome = if i == 0 {
            inst.restore_database(&c, &req)
        } else {
            inst.restore_log(
                &c,
                &RestoreRequest {
                    moves: vec![],
                    ..req
                },
            )
        }
        .unwrap();
        assert_eq!(outcome.restoring, !recovery);
    }
    let (_, copy) = inst
        .database_by_name("Copy")
        .expect("online after the last log");
    let (rows, findings) = check(&copy.lock_for_tests());
    assert_eq!(findings, 0, "the restored database checks clean");
    assert_eq!(rows[0], rows[1], "heap and tree hold the same rows");
    let n = rows[0];
    assert!(
        n >= before && n <= after,
        "{n} rows: the last log backup's instant lies between {before} and {after}"
    );
    assert_eq!(
        n % BATCH,
        0,
        "whole batches, not the open transaction's rows"
    );
    drop(copy);
    drop(db);
    inst.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proves a backup that stops part-way (cancelled after its first block) takes its partial
/// set back off the file: the file is as before, its earlier set still reads and verifies.
#[test]
fn a_failed_backup_leaves_the_file_as_it_was() {
    let dir = std::env::temp_dir().join(format!("xdb-backup-cancel-{}", std::process::id()));
    let fs = set_up_instance(&dir);
    let inst = Instance::start(fs.clone(), &dir, &[]).unwrap();
    let mut s = spec("Cut", &dir.join("data"));
    s.database_id = inst.next_database_id();
    inst.create_database(&ctx(fs.as_ref(), true, &Quiet), &s)
        .unwrap();
    let (_, db) = inst.database_by_name("Cut").unwrap();
    let tables = heap_and_tree(&mut db.lock_for_tests());
    common::insert_scrambled(&mut db.lock_for_tests(), &tables, 2000);
    let bak = dir.join("backup/cut.bak");
    std::fs::create_dir_all(bak.parent().unwrap()).unwrap();
    let cancel = AtomicBool::new(false);
    let stop = |_: u64, _: u64| cancel.store(true, Ordering::SeqCst);
    backup_database(
        &db,
        &BackupRequest {
            cancel: Some(&cancel),
            ..request(BackupType::Database, &bak, None)
        },
    )
    .unwrap();
    let before = std::fs::read(&bak).unwrap();
    let appended = BackupRequest {
        init: false,
        cancel: Some(&cancel),
        ..request(BackupType::Database, &bak, Some(&stop))
    };
    match backup_database(&db, &appended) {
        Err(extentdb_storage::StorageError::Cancelled) => {}
        other => panic!("expected Cancelled, got {other:?}"),
    }
    assert_eq!(
        std::fs::read(&bak).unwrap(),
        before,
        "the file is as it was"
    );
    verify_backup_set(&bak, 1, true).unwrap();
    drop(db);
    inst.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
