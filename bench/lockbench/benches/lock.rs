//! An uncontended lock acquire + release (issue 21's goal: under 100 ns): a transaction
//! locks a key it does not hold and lets it go, with nobody else in the manager; and the
//! same with the table's intent lock already held (`lock_row`, the path a row write takes).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use extentdb_lock::{Escalation, LockManager, LockMode, Locker, Resource};

fn key(i: u64) -> Resource {
    Resource::Key { db: 5, object: 100, hobt: 7, hash: i }
}

fn uncontended(c: &mut Criterion) {
    let mgr = LockManager::new();
    let owner = mgr.new_owner(51);
    let policy = extentdb_lock::WaitPolicy { timeout: None, cancel: None };
    let mut i = 0u64;
    c.bench_function("manager acquire+release (X on a key)", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            let r = key(i & 1023);
            black_box(mgr.acquire(&owner, r, LockMode::X, None, policy).unwrap());
            mgr.release(&owner, r);
        })
    });
    let mut l = Locker::new(mgr.clone(), 52, Arc::new(AtomicBool::new(false)));
    l.lock(Resource::Object { db: 5, object: 100 }, LockMode::IX).unwrap();
    c.bench_function("locker lock_row+unlock (X on a key, table IX held)", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            let r = key(i & 1023);
            l.lock_row(r, LockMode::X, Escalation::Disable).unwrap();
            l.unlock(r);
        })
    });
}

criterion_group!(benches, uncontended);
criterion_main!(benches);
