//! The lock manager under real threads: waits and grants in order, conversions first,
//! SET LOCK_TIMEOUT, cancellation, deadlock cycles of 2 to 8 owners with SQL Server's choice
//! of victim, escalation at 5,000 locks, and a seeded stress run that checks the lock
//! table's invariants while 8 threads lock and unlock.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use extentdb_lock::{
    Escalation, LockError, LockManager, LockMode, Locker, Resource, ESCALATION_THRESHOLD,
};

fn key(i: u64) -> Resource {
    Resource::Key {
        db: 5,
        object: 100,
        hobt: 7,
        hash: i,
    }
}

fn locker(mgr: &Arc<LockManager>, spid: u16) -> Locker {
    Locker::new(mgr.clone(), spid, Arc::new(AtomicBool::new(false)))
}

/// Waits until `n` requests are queued in the manager.
fn until_waiting(mgr: &LockManager, n: usize) {
    for _ in 0..2000 {
        let waiting = mgr.locks().iter().filter(|r| r.status != "GRANT").count();
        if waiting >= n {
            return;
        }
        thread::sleep(Duration::from_millis(2));
    }
    panic!("{n} requests never queued: {:?}", mgr.locks());
}

/// S beside S; X waits for both; a later S queues behind the X instead of starving it.
#[test]
fn writers_are_not_starved_by_readers() {
    let mgr = LockManager::new();
    let (mut a, mut b) = (locker(&mgr, 51), locker(&mgr, 52));
    a.lock(key(1), LockMode::S).unwrap();
    b.lock(key(1), LockMode::S).unwrap();
    let m2 = mgr.clone();
    let writer = thread::spawn(move || {
        let mut w = locker(&m2, 53);
        w.lock(key(1), LockMode::X).unwrap();
        thread::sleep(Duration::from_millis(30));
        w.release_all();
    });
    until_waiting(&mgr, 1);
    let mut late = locker(&mgr, 54);
    late.timeout = Some(Duration::from_millis(30));
    assert_eq!(
        late.lock(key(1), LockMode::S),
        Err(LockError::Timeout),
        "queued behind X"
    );
    a.release_all();
    b.release_all();
    writer.join().unwrap();
    late.timeout = None;
    late.lock(key(1), LockMode::S).unwrap();
    mgr.check_invariants();
}

/// A conversion (S held, U asked) queues ahead of new requests, and sys.dm_tran_locks
/// shows GRANT, CONVERT and WAIT.
#[test]
fn conversions_go_first_and_show_as_convert() {
    let mgr = LockManager::new();
    let (mut a, mut b) = (locker(&mgr, 51), locker(&mgr, 52));
    a.lock(key(1), LockMode::S).unwrap();
    b.lock(key(1), LockMode::S).unwrap();
    let m2 = mgr.clone();
    let newcomer = thread::spawn(move || {
        let mut c = locker(&m2, 53);
        c.lock(key(1), LockMode::X).unwrap();
    });
    until_waiting(&mgr, 1);
    let m3 = mgr.clone();
    let converter = thread::spawn(move || {
        b.lock(key(1), LockMode::X).unwrap();
        assert_eq!(b.held(&key(1)), Some(LockMode::X));
        b
    });
    until_waiting(&mgr, 2);
    let rows = m3.locks();
    let status = |spid: u16| {
        rows.iter()
            .find(|r| r.session_id == spid && r.status != "GRANT")
    };
    assert_eq!(status(52).map(|r| r.status), Some("CONVERT"));
    assert_eq!(
        status(53).map(|r| (r.status, r.mode)),
        Some(("WAIT", LockMode::X))
    );
    a.release_all();
    let mut b = converter.join().unwrap();
    assert!(
        !newcomer.is_finished(),
        "the new request waits behind the conversion"
    );
    b.release_all();
    newcomer.join().unwrap();
    assert!(mgr.locks().is_empty());
}

/// SET LOCK_TIMEOUT 0 and 40 ms end the wait with 1222; a cancel (attention, KILL) ends it
/// too; neither leaves anything queued.
#[test]
fn timeouts_and_cancels_end_the_wait() {
    let mgr = LockManager::new();
    let mut holder = locker(&mgr, 51);
    holder.lock(key(9), LockMode::X).unwrap();
    let mut w = locker(&mgr, 52);
    w.timeout = Some(Duration::ZERO);
    assert_eq!(w.lock(key(9), LockMode::S), Err(LockError::Timeout));
    w.timeout = Some(Duration::from_millis(40));
    assert_eq!(w.lock(key(9), LockMode::S), Err(LockError::Timeout));
    let cancel = Arc::new(AtomicBool::new(false));
    let (m2, c2) = (mgr.clone(), cancel.clone());
    let t = thread::spawn(move || Locker::new(m2, 53, c2).lock(key(9), LockMode::U));
    until_waiting(&mgr, 1);
    cancel.store(true, Ordering::Relaxed);
    assert_eq!(t.join().unwrap(), Err(LockError::Cancelled));
    assert_eq!(mgr.locks().len(), 1, "only the holder's grant is left");
    let stats = mgr.wait_stats();
    let s = stats.iter().find(|s| s.wait_type == "LCK_M_S").unwrap();
    assert_eq!(s.waiting_tasks_count, 1, "the NOWAIT request never waited");
}

/// Owners 0..n each hold key i and ask for key i+1: exactly one is chosen as the victim,
/// the others all finish once it lets go.
fn cycle_of(n: usize, priorities: &[i32]) -> (usize, u64) {
    let mgr = LockManager::with_deadlock_interval(Duration::from_millis(20));
    let barrier = Arc::new(Barrier::new(n));
    let victims = Arc::new(AtomicUsize::new(usize::MAX));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let (mgr, barrier, victims) = (mgr.clone(), barrier.clone(), victims.clone());
            let p = priorities.get(i).copied().unwrap_or(0);
            thread::spawn(move || {
                let mut l = locker(&mgr, 51 + i as u16);
                l.owner().set_deadlock_priority(p);
                l.lock(key(i as u64), LockMode::X).unwrap();
                barrier.wait();
                match l.lock(key(((i + 1) % n) as u64), LockMode::X) {
                    Ok(()) => 0,
                    Err(LockError::Deadlock) => {
                        victims.store(i, Ordering::Relaxed);
                        l.release_all();
                        1
                    }
                    Err(e) => panic!("{e}"),
                }
            })
        })
        .collect();
    let chosen: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(chosen, 1, "one victim per deadlock");
    mgr.check_invariants();
    (victims.load(Ordering::Relaxed), mgr.deadlock_count())
}

#[test]
fn deadlock_cycles_of_two_to_eight_have_one_victim() {
    for n in 2..=8 {
        let (_, count) = cycle_of(n, &[]);
        assert_eq!(count, 1, "cycle of {n}");
    }
}

/// SET DEADLOCK_PRIORITY LOW makes that session the victim whatever the order.
#[test]
fn the_lowest_deadlock_priority_is_the_victim() {
    for low in 0..4 {
        let mut p = vec![0; 4];
        p[low] = -5;
        assert_eq!(cycle_of(4, &p).0, low);
    }
}

/// Among equal priorities the transaction with the least log used is chosen.
#[test]
fn the_least_log_used_is_the_victim() {
    let mgr = LockManager::with_deadlock_interval(Duration::from_millis(20));
    let barrier = Arc::new(Barrier::new(2));
    let run = |i: u64, log: u64| {
        let (mgr, barrier) = (mgr.clone(), barrier.clone());
        thread::spawn(move || {
            let mut l = locker(&mgr, 60 + i as u16);
            l.owner().set_log_used(log);
            l.lock(key(i), LockMode::X).unwrap();
            barrier.wait();
            let r = l.lock(key(1 - i), LockMode::X);
            l.release_all();
            r
        })
    };
    let (big, small) = (run(0, 1 << 20), run(1, 100));
    assert_eq!(big.join().unwrap(), Ok(()));
    assert_eq!(small.join().unwrap(), Err(LockError::Deadlock));
}

/// The 5,000th row lock of a statement on one table takes the table and lets the row
/// locks go; with escalation disabled it never does.
#[test]
fn escalation_at_five_thousand_locks() {
    let mgr = LockManager::new();
    let mut l = locker(&mgr, 51);
    for i in 0..u64::from(ESCALATION_THRESHOLD) - 1 {
        l.lock_row(key(i), LockMode::X, Escalation::Auto).unwrap();
    }
    assert_eq!(
        l.count(),
        ESCALATION_THRESHOLD as usize,
        "4,999 keys and the table's IX"
    );
    l.lock_row(key(1 << 40), LockMode::X, Escalation::Auto)
        .unwrap();
    assert_eq!(l.escalated(5, 100), Some(LockMode::X));
    assert_eq!(l.count(), 1, "the table lock alone");
    let mut other = locker(&mgr, 52);
    other.timeout = Some(Duration::ZERO);
    assert_eq!(
        other.lock_row(key(3), LockMode::S, Escalation::Auto),
        Err(LockError::Timeout)
    );
    l.release_all();
    let mut off = locker(&mgr, 53);
    for i in 0..u64::from(ESCALATION_THRESHOLD) + 10 {
        off.lock_row(key(i), LockMode::S, Escalation::Disable)
            .unwrap();
    }
    assert_eq!(off.escalated(5, 100), None);
    assert_eq!(off.count(), ESCALATION_THRESHOLD as usize + 11);
}

/// Another transaction's IX on the table refuses the escalation; the statement goes on
/// with row locks and escalates at the next attempt, 1,250 locks later, once it is gone.
#[test]
fn refused_escalation_is_tried_again() {
    let mgr = LockManager::new();
    let mut blocker = locker(&mgr, 52);
    blocker
        .lock_row(key(u64::MAX >> 20), LockMode::X, Escalation::Auto)
        .unwrap();
    let mut l = locker(&mgr, 51);
    for i in 0..u64::from(ESCALATION_THRESHOLD) {
        l.lock_row(key(i), LockMode::S, Escalation::Auto).unwrap();
    }
    assert_eq!(l.escalated(5, 100), None, "the other IX is in the way");
    blocker.release_all();
    for i in 0..u64::from(extentdb_lock::ESCALATION_RETRY) {
        l.lock_row(key(100_000 + i), LockMode::S, Escalation::Auto)
            .unwrap();
    }
    assert_eq!(l.escalated(5, 100), Some(LockMode::S));
}

/// 8 threads lock and unlock 16 keys in random modes (seeded), with short timeouts so
/// waits end; the lock table's invariants hold throughout and nothing is left at the end.
#[test]
fn seeded_stress_keeps_the_invariants() {
    let mgr = LockManager::with_deadlock_interval(Duration::from_millis(5));
    let modes = [
        LockMode::S,
        LockMode::U,
        LockMode::X,
        LockMode::IS,
        LockMode::IX,
        LockMode::SIX,
    ];
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..8u64)
        .map(|t| {
            let mgr = mgr.clone();
            thread::spawn(move || {
                let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ t;
                let mut next = move || {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed
                };
                let mut l = locker(&mgr, 51 + t as u16);
                l.timeout = Some(Duration::from_millis(3));
                let mut outcomes = [0usize; 3];
                for _ in 0..3000 {
                    let r = key(next() % 16);
                    let m = modes[(next() % modes.len() as u64) as usize];
                    match l.lock(r, m) {
                        Ok(()) => outcomes[0] += 1,
                        Err(LockError::Timeout) => outcomes[1] += 1,
                        Err(LockError::Deadlock) => outcomes[2] += 1,
                        Err(e) => panic!("{e}"),
                    }
                    if next() % 4 == 0 {
                        l.release_all();
                    }
                }
                l.release_all();
                outcomes
            })
        })
        .collect();
    let checker = {
        let (mgr, stop) = (mgr.clone(), stop.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                mgr.check_invariants();
                thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let granted: usize = workers.into_iter().map(|w| w.join().unwrap()[0]).sum();
    stop.store(true, Ordering::Relaxed);
    checker.join().unwrap();
    assert!(granted > 1000, "most requests are granted: {granted}");
    assert!(mgr.locks().is_empty(), "{:?}", mgr.locks());
}

/// An instant-duration RangeI-N (an INSERT's test of the key after its own): granted
/// beside X and another RangeI-N and leaves nothing behind; refused by RangeS-S without
/// waiting (`try_instant`) and waited for (`instant`, shown WAIT) until the reader ends;
/// a transaction's own RangeS-S there is left as it was.
#[test]
fn instant_range_insert_locks() {
    let mgr = LockManager::new();
    let (mut reader, mut writer, mut ins) = (locker(&mgr, 51), locker(&mgr, 52), locker(&mgr, 53));
    writer.lock(key(1), LockMode::X).unwrap();
    assert_eq!(
        ins.try_instant(key(1), LockMode::RangeIN),
        Ok(true),
        "beside X"
    );
    assert_eq!(ins.count(), 0, "an instant lock is not kept");
    reader.lock(key(2), LockMode::RangeSS).unwrap();
    assert_eq!(ins.try_instant(key(2), LockMode::RangeIN), Ok(false));
    let m2 = mgr.clone();
    let waiter = thread::spawn(move || {
        let mut w = locker(&m2, 54);
        w.instant(key(2), LockMode::RangeIN).map(|()| w.count())
    });
    until_waiting(&mgr, 1);
    let rows = mgr.locks();
    assert!(rows
        .iter()
        .any(|r| r.mode == LockMode::RangeIN && r.status == "WAIT" && r.session_id == 54));
    reader.release_all();
    assert_eq!(waiter.join().unwrap(), Ok(0));
    assert!(mgr.locks().iter().all(|r| r.session_id != 54), "given up");
    // Its own RangeS-S stays RangeS-S; another reader's makes the test wait.
    let mut own = locker(&mgr, 55);
    own.lock(key(3), LockMode::RangeSS).unwrap();
    assert_eq!(own.try_instant(key(3), LockMode::RangeIN), Ok(true));
    reader.lock(key(3), LockMode::RangeSS).unwrap();
    assert_eq!(own.try_instant(key(3), LockMode::RangeIN), Ok(false));
    own.timeout = Some(Duration::from_millis(20));
    assert_eq!(
        own.instant(key(3), LockMode::RangeIN),
        Err(LockError::Timeout)
    );
    reader.release_all();
    own.instant(key(3), LockMode::RangeIN).unwrap();
    assert_eq!(own.held(&key(3)), Some(LockMode::RangeSS), "put back");
    mgr.check_invariants();
}

/// Key-range locks count toward escalation: 5,000 RangeS-S go to the table's S, which
/// covers further RangeS-S without a lock each.
#[test]
fn range_locks_escalate_to_the_table() {
    let mgr = LockManager::new();
    let mut l = locker(&mgr, 51);
    for i in 0..u64::from(ESCALATION_THRESHOLD) {
        l.lock_row(key(i), LockMode::RangeSS, Escalation::Auto)
            .unwrap();
    }
    assert_eq!(l.escalated(5, 100), Some(LockMode::S));
    l.lock_row(key(1 << 40), LockMode::RangeSS, Escalation::Auto)
        .unwrap();
    assert_eq!(l.count(), 1, "the table lock alone");
}
