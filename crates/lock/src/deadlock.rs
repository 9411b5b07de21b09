//! Deadlock detection: a request that has waited `deadlock_interval` walks the wait-for
//! graph from its owner (who waits for whom: `LockManager::blockers`). A path back to
//! itself is a deadlock; its victim is the participant with the lowest DEADLOCK_PRIORITY,
//! then the least log used (the cheapest to roll back), then the youngest. The victim's
//! request leaves its queue with `LockError::Deadlock` (Msg 1205; the caller ends the
//! victim's transaction, which releases its locks and lets the others go on).
//!
//! The graph is read one resource at a time, not frozen, so before a victim is chosen
//! every edge of the cycle is read again; a cycle that came apart meanwhile is not a
//! deadlock. SQL Server's monitor wakes every 5 s (faster once it finds deadlocks); here
//! each waiter looks after its own wait, from 100 ms by default.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::manager::LockManager;
use crate::owner::Owner;
use crate::{LockMode, Resource};

/// What trace flag 1222 writes to the ERRORLOG about a deadlock.
#[derive(Clone, Debug)]
pub struct DeadlockReport {
    pub victim: u64,
    /// Each participant: owner, session, the resource and mode it waited for.
    pub participants: Vec<(u64, u16, Resource, LockMode)>,
}

/// Told of every deadlock resolved (the instance writes it to the ERRORLOG).
pub type Observer = Box<dyn Fn(&DeadlockReport) + Send + Sync>;

impl LockManager {
    pub fn set_deadlock_observer(&self, o: Observer) {
        *self
            .deadlock_observer
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(o);
    }
}

/// Nodes the search visits at most (a bound on the work one waiter does).
const MAX_NODES: usize = 4096;

/// Looks for a cycle through `start` and, if there is one, ends its victim's wait.
pub(crate) fn search(mgr: &LockManager, start: &Arc<Owner>) {
    let Some(cycle) = find_cycle(mgr, start) else {
        return;
    };
    if !still_a_cycle(mgr, &cycle) {
        return;
    }
    let victim = cycle
        .iter()
        .min_by_key(|o| (o.deadlock_priority(), o.log_used(), std::cmp::Reverse(o.id)))
        .expect("a cycle has members")
        .clone();
    let Some(w) = victim.waiting() else {
        return;
    };
    let report = DeadlockReport {
        victim: victim.id,
        participants: cycle
            .iter()
            .filter_map(|o| {
                o.waiting()
                    .map(|w| (o.id, o.session_id, w.resource, w.mode))
            })
            .collect(),
    };
    if mgr.make_victim(&victim, &w) {
        mgr.deadlocks.fetch_add(1, Ordering::Relaxed);
        if let Some(o) = mgr
            .deadlock_observer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            o(&report);
        }
    }
}

/// A path start -> ... -> start in the wait-for graph, by depth-first search.
fn find_cycle(mgr: &LockManager, start: &Arc<Owner>) -> Option<Vec<Arc<Owner>>> {
    let mut visited = std::collections::HashSet::new();
    let mut path: Vec<Arc<Owner>> = vec![start.clone()];
    let mut stack: Vec<Vec<Arc<Owner>>> = vec![edges(mgr, start)];
    while let Some(next) = stack.last_mut() {
        let Some(o) = next.pop() else {
            stack.pop();
            path.pop();
            continue;
        };
        if o.id == start.id {
            return Some(path);
        }
        if visited.len() >= MAX_NODES || !visited.insert(o.id) {
            continue;
        }
        stack.push(edges(mgr, &o));
        path.push(o);
    }
    None
}

fn edges(mgr: &LockManager, o: &Owner) -> Vec<Arc<Owner>> {
    match o.waiting() {
        Some(w) => mgr.blockers(&w, o.id),
        None => Vec::new(),
    }
}

/// Reads each edge of the cycle again.
fn still_a_cycle(mgr: &LockManager, cycle: &[Arc<Owner>]) -> bool {
    (0..cycle.len()).all(|i| {
        let next = &cycle[(i + 1) % cycle.len()];
        edges(mgr, &cycle[i]).iter().any(|b| b.id == next.id)
    })
}
