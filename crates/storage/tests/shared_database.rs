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
