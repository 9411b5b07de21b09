//! A panic while a session holds a database (shared.rs's invariant): the lock stays
//! usable, the database refuses changes until reopened, and other databases, master
//! included, go on.

mod common;

use std::sync::Arc;

use extentdb_storage::shared::SharedDatabase;
use extentdb_storage::{Database, StorageError};

#[test]
fn a_panic_holding_a_database_poisons_it_not_its_lock() {
    let dir = std::env::temp_dir().join(format!("xdb-dblock-{}", std::process::id()));
    let fs = common::set_up_instance(&dir);
    let inst = extentdb_storage::Instance::start(fs.clone(), &dir, &[]).unwrap();
    let root = dir.join("data");
    let quiet = common::Quiet;
    let db = Database::create(
        &common::ctx(fs.as_ref(), true, &quiet),
        &common::spec("p", &root),
    )
    .unwrap();
    let shared = Arc::new(SharedDatabase::new(db));
    for exclusive in [true, false] {
        let s = shared.clone();
        let master = inst.master();
        let panicked = std::thread::spawn(move || {
            let _m = master.lock_for_tests();
            if exclusive {
                let _g = s.lock_for_tests();
                panic!("on purpose, holding the database exclusively");
            }
            let _g = s.read().unwrap();
            panic!("on purpose, sharing the database");
        })
        .join();
        assert!(panicked.is_err());
    }
    // Both locks still answer; the database says it needs a reopen (Msg 945 upstream).
    let mut g = shared.lock_for_tests(); // panics if the lock were unusable
    assert!(g.is_poisoned());
    assert!(matches!(
        g.change_catalog(|_| Ok(())),
        Err(StorageError::NeedsReopen(_))
    ));
    drop(g);
    assert!(shared.read().is_ok());
    // master was held exclusively by the panicking thread too: poisoned, still readable.
    let master = inst.master();
    assert!(master.read().is_ok());
    assert!(master.lock_for_tests().is_poisoned());
    drop(inst);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A structure change validated at one catalog state is refused once the catalog moved on
/// (structure.rs invariant 2): `CatalogChanged`, nothing changed; at the current state it is
/// made. Proven with MODIFY FILEGROUP and a principal change against a stale version.
#[test]
fn a_change_validated_at_a_stale_catalog_is_refused_and_changes_nothing() {
    use extentdb_format::principals::PermissionState;
    use extentdb_storage::log_growth::GrowthEnv;
    use extentdb_storage::structure::{FilegroupChange, PermissionChange, PrincipalChange};
    let dir = std::env::temp_dir().join(format!("xdb-stale-{}", std::process::id()));
    let fs = common::set_up_instance(&dir);
    let quiet = common::Quiet;
    let db = Database::create(
        &common::ctx(fs.as_ref(), true, &quiet),
        &common::spec("p", &dir.join("data")),
    )
    .unwrap();
    let shared = SharedDatabase::new(db);
    let env = GrowthEnv::default();
    let stale = shared.read().unwrap().catalog_version();
    shared.add_filegroup(&env, "FG1").unwrap();
    let ds = shared
        .read()
        .unwrap()
        .filegroup_by_name("FG1")
        .unwrap()
        .data_space_id;
    let rename = FilegroupChange::Rename("FG2".into());
    assert!(matches!(
        shared.modify_filegroup(&env, stale, ds, &rename),
        Err(StorageError::CatalogChanged)
    ));
    let grant = PrincipalChange::Permissions(vec![PermissionChange {
        class: extentdb_format::principals::PermissionClass::Database,
        major_id: 0,
        permission: "CREATE TABLE".into(),
        grantee: extentdb_format::principals::PUBLIC,
        state: Some(PermissionState::Grant),
    }]);
    assert!(matches!(
        shared.change_principals(stale, grant.clone()),
        Err(StorageError::CatalogChanged)
    ));
    let before = shared.read().unwrap().catalog.clone();
    assert!(before.filegroups.iter().any(|g| g.name == "FG1"));
    assert!(!before
        .security
        .permissions
        .iter()
        .any(|p| p.permission == "CREATE TABLE"));
    // At the current state both are made.
    let now = shared.read().unwrap().catalog_version();
    shared.modify_filegroup(&env, now, ds, &rename).unwrap();
    let now = shared.read().unwrap().catalog_version();
    shared.change_principals(now, grant).unwrap();
    let after = shared.read().unwrap().catalog.clone();
    assert!(after.filegroups.iter().any(|g| g.name == "FG2"));
    assert!(after
        .security
        .permissions
        .iter()
        .any(|p| p.permission == "CREATE TABLE"));
    drop(shared);
    let _ = std::fs::remove_dir_all(&dir);
}
