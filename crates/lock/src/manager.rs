//! The lock table: granted and waiting requests per resource, in shards.
//!
//! Each resource's *head* lists the owners granted a mode on it and the queue of requests
//! waiting. A request is granted at once when its mode is compatible with every other
//! owner's granted mode and (for a new request, not a conversion) nobody is queued ahead:
//! the queue is first come, first served, so a stream of readers never starves a writer.
//! Conversions (an owner asking for more on a resource it holds) queue ahead of new
//! requests, as in SQL Server.
//!
//! Invariants (`Head::check_invariants`):
//! 1. An owner appears at most once among a head's grants.
//! 2. The granted modes of different owners are pairwise compatible.
//! 3. A head with no grants and no waiters is not kept.
//! 4. Every queued request's slot is `Waiting`; its owner's `waiting` names this resource.
//!
//! Lock order: a shard, then a wait slot's state (never two shards at once; the deadlock
//! search takes one shard at a time).

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::owner::{Owner, WaitSlot, WaitState, Waiting};
use crate::{FxHasher, LockError, LockMode, Resource, ALL_MODES};

type Heads = HashMap<Resource, Head, BuildHasherDefault<FxHasher>>;

const SHARDS: usize = 64;

/// A granted lock.
pub(crate) struct Grant {
    pub owner: Arc<Owner>,
    pub mode: LockMode,
}

/// A queued request.
pub(crate) struct Waiter {
    pub owner: Arc<Owner>,
    /// The mode it will hold once granted (for a conversion, the converted mode).
    pub mode: LockMode,
    pub conversion: bool,
    pub slot: Arc<WaitSlot>,
}

/// A resource's grants: the first inline (most resources have one owner, and an
/// uncontended lock must not allocate), the others in a vector.
#[derive(Default)]
pub(crate) struct Grants {
    first: Option<Grant>,
    more: Vec<Grant>,
}

impl Grants {
    pub fn iter(&self) -> impl Iterator<Item = &Grant> {
        self.first.iter().chain(self.more.iter())
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut Grant> {
        self.first.iter_mut().chain(self.more.iter_mut())
    }

    fn push(&mut self, g: Grant) {
        match self.first {
            None => self.first = Some(g),
            Some(_) => self.more.push(g),
        }
    }

    fn remove(&mut self, owner: u64) {
        if self.first.as_ref().is_some_and(|g| g.owner.id == owner) {
            self.first = self.more.pop();
        } else {
            self.more.retain(|g| g.owner.id != owner);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }
}

#[derive(Default)]
pub(crate) struct Head {
    pub granted: Grants,
    pub queue: VecDeque<Waiter>,
}

impl Head {
    /// Whether `mode` is compatible with every grant of owners other than `owner`.
    fn grantable(&self, owner: u64, mode: LockMode) -> bool {
        self.granted
            .iter()
            .all(|g| g.owner.id == owner || mode.compatible(g.mode))
    }

    fn set_grant(&mut self, owner: &Arc<Owner>, mode: LockMode) {
        if let Some(g) = self.granted.iter_mut().find(|g| g.owner.id == owner.id) {
            g.mode = mode;
            return;
        }
        self.granted.push(Grant {
            owner: owner.clone(),
            mode,
        });
    }

    /// Grants queued requests in order until one cannot be granted.
    fn grant_waiters(&mut self) {
        while let Some(w) = self.queue.front() {
            if !self.grantable(w.owner.id, w.mode) {
                break;
            }
            let w = self.queue.pop_front().expect("front");
            self.set_grant(&w.owner, w.mode);
            w.owner.set_waiting(None);
            w.slot.finish(WaitState::Granted);
        }
    }

    fn is_empty(&self) -> bool {
        self.granted.is_empty() && self.queue.is_empty()
    }

    pub fn check_invariants(&self) {
        let all: Vec<&Grant> = self.granted.iter().collect();
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a.owner.id, b.owner.id, "invariant 1: one grant per owner");
                assert!(
                    a.mode.compatible(b.mode),
                    "invariant 2: {} / {}",
                    a.mode,
                    b.mode
                );
            }
        }
        assert!(!self.is_empty(), "invariant 3: an empty head is removed");
    }
}

/// How long a request may wait (SET LOCK_TIMEOUT) and what ends the wait early.
#[derive(Clone, Copy)]
pub struct WaitPolicy<'a> {
    /// None waits as long as it takes; zero does not wait (NOWAIT, READPAST).
    pub timeout: Option<Duration>,
    /// Set by an attention or KILL.
    pub cancel: Option<&'a std::sync::atomic::AtomicBool>,
}

/// A row of sys.dm_tran_locks.
#[derive(Clone, Debug)]
pub struct LockRow {
    pub resource: Resource,
    pub mode: LockMode,
    /// GRANT, WAIT or CONVERT.
    pub status: &'static str,
    pub owner: u64,
    pub session_id: u16,
    /// TRANSACTION or SHARED_TRANSACTION_WORKSPACE (`Owner::owner_type`).
    pub owner_type: &'static str,
}

/// Waits by mode, for sys.dm_os_wait_stats (LCK_M_*).
#[derive(Default)]
struct WaitCounters {
    count: AtomicU64,
    total_ms: AtomicU64,
    max_ms: AtomicU64,
}

/// A row of sys.dm_os_wait_stats.
#[derive(Clone, Debug)]
pub struct WaitStat {
    pub wait_type: &'static str,
    pub waiting_tasks_count: u64,
    pub wait_time_ms: u64,
    pub max_wait_time_ms: u64,
}

/// The instance's lock manager.
pub struct LockManager {
    shards: Vec<Mutex<Heads>>,
    waits: Vec<WaitCounters>,
    next_owner: AtomicU64,
    /// How long a request waits before it looks for a deadlock, and between looks.
    pub(crate) deadlock_interval: Duration,
    pub(crate) deadlock_observer: Mutex<Option<crate::deadlock::Observer>>,
    pub(crate) deadlocks: AtomicU64,
}

impl LockManager {
    pub fn new() -> Arc<LockManager> {
        LockManager::with_deadlock_interval(Duration::from_millis(100))
    }

    pub fn with_deadlock_interval(interval: Duration) -> Arc<LockManager> {
        Arc::new(LockManager {
            shards: (0..SHARDS).map(|_| Mutex::new(Heads::default())).collect(),
            waits: (0..ALL_MODES.len())
                .map(|_| WaitCounters::default())
                .collect(),
            next_owner: AtomicU64::new(1),
            deadlock_interval: interval,
            deadlock_observer: Mutex::new(None),
            deadlocks: AtomicU64::new(0),
        })
    }

    /// A new lock owner for a session's transaction.
    pub fn new_owner(&self, session_id: u16) -> Arc<Owner> {
        Owner::new(self.next_owner.fetch_add(1, Ordering::Relaxed), session_id)
    }

    /// A session's workspace owner: the DATABASE lock of the database it uses.
    pub fn new_workspace_owner(&self, session_id: u16) -> Arc<Owner> {
        let id = self.next_owner.fetch_add(1, Ordering::Relaxed);
        Owner::of_kind(id, session_id, true)
    }

    pub(crate) fn shard(&self, r: &Resource) -> MutexGuard<'_, Heads> {
        use std::hash::BuildHasher;
        let h = BuildHasherDefault::<FxHasher>::default().hash_one(r);
        let i = (h >> 32) as usize % SHARDS;
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks for `mode` on `resource` for `owner`, which holds `held` there already (None if
    /// nothing). Returns the mode now held. Waits as `policy` says.
    pub fn acquire(
        &self,
        owner: &Arc<Owner>,
        resource: Resource,
        mode: LockMode,
        held: Option<LockMode>,
        policy: WaitPolicy<'_>,
    ) -> Result<LockMode, LockError> {
        let target = held.map_or(mode, |h| h.convert(mode));
        let slot = {
            let mut heads = self.shard(&resource);
            let head = heads.entry(resource).or_default();
            let conversion = held.is_some();
            if head.grantable(owner.id, target) && (conversion || head.queue.is_empty()) {
                head.set_grant(owner, target);
                return Ok(target);
            }
            if policy.timeout == Some(Duration::ZERO) {
                if head.is_empty() {
                    heads.remove(&resource);
                }
                return Err(LockError::Timeout);
            }
            let slot = WaitSlot::new();
            let waiter = Waiter {
                owner: owner.clone(),
                mode: target,
                conversion,
                slot: slot.clone(),
            };
            let at = if conversion {
                head.queue.iter().take_while(|w| w.conversion).count()
            } else {
                head.queue.len()
            };
            head.queue.insert(at, waiter);
            owner.set_waiting(Some(Waiting {
                resource,
                mode: target,
                since: Instant::now(),
                slot: slot.clone(),
            }));
            slot
        };
        let started = Instant::now();
        let result = self.wait(owner, resource, &slot, policy);
        self.count_wait(target, started.elapsed());
        result.map(|()| target)
    }

    /// Whether `owner`, holding `held` on `resource`, would be granted `mode` there now
    /// (`acquire`'s rule), without recording anything: the uncontended case of an
    /// instant-duration lock (`Locker::try_instant`) costs one look-up.
    pub fn would_grant(
        &self,
        owner: &Owner,
        resource: Resource,
        mode: LockMode,
        held: Option<LockMode>,
    ) -> bool {
        let target = held.map_or(mode, |h| h.convert(mode));
        let heads = self.shard(&resource);
        heads.get(&resource).is_none_or(|head| {
            head.grantable(owner.id, target) && (held.is_some() || head.queue.is_empty())
        })
    }

    /// Puts `owner`'s grant on `resource` back to `mode`, which it held before an
    /// instant-duration conversion (`Locker::instant`), and grants what waited for the
    /// stronger mode to go. `mode` must be weaker than the grant (conflict with a subset).
    pub fn restore(&self, owner: &Arc<Owner>, resource: Resource, mode: LockMode) {
        let mut heads = self.shard(&resource);
        let head = heads
            .get_mut(&resource)
            .expect("an instant conversion restores a grant it holds");
        let now = head
            .granted
            .iter()
            .find(|g| g.owner.id == owner.id)
            .map(|g| g.mode)
            .expect("an instant conversion restores a grant it holds");
        assert!(
            now.covers(mode),
            "{now} restored to {mode}, which is stronger"
        );
        head.set_grant(owner, mode);
        head.grant_waiters();
    }

    /// Waits until the request is granted, chosen as a deadlock victim, timed out or
    /// cancelled; looks for a deadlock every `deadlock_interval`.
    fn wait(
        &self,
        owner: &Arc<Owner>,
        resource: Resource,
        slot: &Arc<WaitSlot>,
        policy: WaitPolicy<'_>,
    ) -> Result<(), LockError> {
        let start = Instant::now();
        let deadline = policy.timeout.map(|t| start + t);
        let mut next_search = start + self.deadlock_interval;
        loop {
            let now = Instant::now();
            let mut until = next_search.min(now + Duration::from_millis(50));
            if let Some(d) = deadline {
                until = until.min(d);
            }
            {
                let state = slot.state.lock().unwrap_or_else(|e| e.into_inner());
                let (state, _) = slot
                    .wake
                    .wait_timeout_while(state, until.saturating_duration_since(now), |s| {
                        *s == WaitState::Waiting
                    })
                    .unwrap_or_else(|e| e.into_inner());
                match *state {
                    WaitState::Granted => return Ok(()),
                    WaitState::Victim => return Err(LockError::Deadlock),
                    WaitState::Waiting => {}
                }
            }
            let cancelled = policy.cancel.is_some_and(|c| c.load(Ordering::Relaxed));
            let timed_out = deadline.is_some_and(|d| Instant::now() >= d);
            if cancelled || timed_out {
                let why = if cancelled {
                    LockError::Cancelled
                } else {
                    LockError::Timeout
                };
                return self.give_up(owner, resource, slot, why);
            }
            if Instant::now() >= next_search {
                crate::deadlock::search(self, owner);
                next_search = Instant::now() + self.deadlock_interval;
            }
        }
    }

    /// Takes a request out of its queue (timeout, cancel), unless it was granted or chosen
    /// as a victim meanwhile.
    fn give_up(
        &self,
        owner: &Arc<Owner>,
        resource: Resource,
        slot: &Arc<WaitSlot>,
        why: LockError,
    ) -> Result<(), LockError> {
        let mut heads = self.shard(&resource);
        match slot.state() {
            WaitState::Granted => return Ok(()),
            WaitState::Victim => return Err(LockError::Deadlock),
            WaitState::Waiting => {}
        }
        if let Some(head) = heads.get_mut(&resource) {
            head.queue.retain(|w| !Arc::ptr_eq(&w.slot, slot));
            head.grant_waiters();
            if head.is_empty() {
                heads.remove(&resource);
            }
        }
        owner.set_waiting(None);
        Err(why)
    }

    /// Ends a deadlock victim's wait (the caller checked it is in the cycle). False if the
    /// request is no longer waiting.
    pub(crate) fn make_victim(&self, victim: &Owner, w: &Waiting) -> bool {
        let mut heads = self.shard(&w.resource);
        let Some(head) = heads.get_mut(&w.resource) else {
            return false;
        };
        let Some(i) = head
            .queue
            .iter()
            .position(|q| Arc::ptr_eq(&q.slot, &w.slot))
        else {
            return false;
        };
        head.queue.remove(i);
        head.grant_waiters();
        if head.is_empty() {
            heads.remove(&w.resource);
        }
        victim.set_waiting(None);
        w.slot.finish(WaitState::Victim);
        true
    }

    /// The owners a waiting request waits for: grants of other owners it is incompatible
    /// with, and every request queued ahead of it (first come, first served).
    pub(crate) fn blockers(&self, w: &Waiting, waiter: u64) -> Vec<Arc<Owner>> {
        let heads = self.shard(&w.resource);
        let Some(head) = heads.get(&w.resource) else {
            return Vec::new();
        };
        let Some(pos) = head
            .queue
            .iter()
            .position(|q| Arc::ptr_eq(&q.slot, &w.slot))
        else {
            return Vec::new();
        };
        let mut out: Vec<Arc<Owner>> = head
            .granted
            .iter()
            .filter(|g| g.owner.id != waiter && !w.mode.compatible(g.mode))
            .map(|g| g.owner.clone())
            .collect();
        out.extend(head.queue.iter().take(pos).map(|q| q.owner.clone()));
        out
    }

    /// The sessions `owner`'s waiting request waits for (sys.dm_exec_requests'
    /// blocking_session_id is the first).
    pub fn blocking_sessions(&self, owner: &Owner) -> Vec<u16> {
        match owner.waiting() {
            Some(w) => self
                .blockers(&w, owner.id)
                .iter()
                .map(|o| o.session_id)
                .collect(),
            None => Vec::new(),
        }
    }

    /// Gives up `owner`'s lock on `resource` and grants what waited for it.
    pub fn release(&self, owner: &Owner, resource: Resource) {
        let mut heads = self.shard(&resource);
        let Some(head) = heads.get_mut(&resource) else {
            return;
        };
        head.granted.remove(owner.id);
        if !head.queue.is_empty() {
            head.grant_waiters();
        }
        if head.is_empty() {
            heads.remove(&resource);
        }
    }

    fn count_wait(&self, mode: LockMode, waited: Duration) {
        let c = &self.waits[mode as usize];
        let ms = waited.as_millis() as u64;
        c.count.fetch_add(1, Ordering::Relaxed);
        c.total_ms.fetch_add(ms, Ordering::Relaxed);
        c.max_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// LCK_M_* rows of sys.dm_os_wait_stats, one per mode.
    pub fn wait_stats(&self) -> Vec<WaitStat> {
        ALL_MODES
            .iter()
            .map(|m| {
                let c = &self.waits[*m as usize];
                WaitStat {
                    wait_type: m.wait_type(),
                    waiting_tasks_count: c.count.load(Ordering::Relaxed),
                    wait_time_ms: c.total_ms.load(Ordering::Relaxed),
                    max_wait_time_ms: c.max_ms.load(Ordering::Relaxed),
                }
            })
            .collect()
    }

    /// Deadlocks resolved since start (a victim chosen).
    pub fn deadlock_count(&self) -> u64 {
        self.deadlocks.load(Ordering::Relaxed)
    }

    /// Every granted and waiting request, as sys.dm_tran_locks lists them.
    pub fn locks(&self) -> Vec<LockRow> {
        let mut out = Vec::new();
        for shard in &self.shards {
            let heads = shard.lock().unwrap_or_else(|e| e.into_inner());
            for (r, head) in heads.iter() {
                for g in head.granted.iter() {
                    out.push(row(*r, g.mode, "GRANT", &g.owner));
                }
                for w in &head.queue {
                    let status = if w.conversion { "CONVERT" } else { "WAIT" };
                    out.push(row(*r, w.mode, status, &w.owner));
                }
            }
        }
        out
    }

    /// Asserts every head's invariants (tests, DBCC).
    pub fn check_invariants(&self) {
        for shard in &self.shards {
            let heads = shard.lock().unwrap_or_else(|e| e.into_inner());
            for (r, head) in heads.iter() {
                head.check_invariants();
                for w in &head.queue {
                    assert_eq!(w.slot.state(), WaitState::Waiting, "invariant 4");
                    let named = w.owner.waiting().map(|x| x.resource);
                    assert_eq!(named, Some(*r), "invariant 4: owner names its wait");
                }
            }
        }
    }
}

fn row(resource: Resource, mode: LockMode, status: &'static str, o: &Owner) -> LockRow {
    LockRow {
        resource,
        mode,
        status,
        owner: o.id,
        session_id: o.session_id,
        owner_type: o.owner_type(),
    }
}
