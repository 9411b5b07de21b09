//! Proportional fill: which file of a filegroup the next extent comes from (seed 004).
//!
//! The files of a filegroup are visited round robin. Each file has a skip target, the
//! integer quotient (free extents of the file with the most free) / (its own free extents),
//! at least 1; a file with no free extent gets the most-free file's count. Skip targets are
//! recalculated when a file is added to or removed from the filegroup and after every 8,192
//! extent allocations in it (`RECALCULATE_EVERY`, SQL Server's m_cAllocs).
//!
//! extentdb's rule for the countdown (REFERENCE.md leaves it to us; this makes the fill
//! really proportional): each file keeps a countdown that starts at its skip target. A
//! visit with countdown 1 allocates from the file and resets the countdown to the skip
//! target; a visit with a higher countdown decrements it and moves on. A file with skip
//! target k thus gets one extent per k rounds. A visit that would allocate from a file that
//! is full resets its countdown and moves on without allocating.
//!
//! With the startup option -E, a file with skip target 1 takes `E_EXTENTS` consecutive
//! extents before the round robin moves on.
//!
//! `FilegroupFill` is the pure algorithm (no I/O): the database feeds it free-extent counts
//! at each recalculation and tells it which allocations happened. tests/proportional_fill.rs
//! checks it against an independent reference model.
//!
//! Sessions allocating at once share a filegroup's round robin through `SharedFill`: the
//! algorithm behind the FGCB_PRP_FILL lock while some skip target is above 1, a lock-free
//! round robin when all are 1 (seed 004's exception). `Database::allocate_by_fill`
//! allocates with the database shared (`&self`), each extent claimed under its file's
//! allocation lock; what needs the database to itself (growth, a new IAM page, the log)
//! falls back to `allocate_extent_by_fill`. docs/ARCHITECTURE.md lists the lock order.
//!
//! Invariants:
//! 1. After a recalculation at least one file has skip target 1 (the most-free one), so
//!    each round of the round robin allocates at least once while any file has free space.
//! 2. `next_file` returns only a file whose believed free count is above zero.

/// Extent allocations in a filegroup between two recalculations.
pub const RECALCULATE_EVERY: u32 = 8192;
/// Consecutive extents a file with skip target 1 takes under -E.
pub const E_EXTENTS: u32 = 64;

/// One file's place in the round robin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileFill {
    pub file_id: u16,
    /// Free extents as last counted, less the extents handed out since.
    pub free: u32,
    pub skip_target: u32,
    countdown: u32,
}

/// The round robin of one filegroup.
#[derive(Debug, Clone, Default)]
pub struct FilegroupFill {
    /// Files in round-robin order (file id order).
    pub files: Vec<FileFill>,
    /// The next file the round robin visits.
    next: usize,
    /// Extent allocations since the last recalculation.
    pub allocations: u32,
    /// SQL Server's m_cAllocs: the allocation count that triggers the next recalculation;
    /// 0 before the first.
    pub threshold: u32,
    /// -E: the file taking consecutive extents, and how many it still takes.
    run: Option<(usize, u32)>,
}

/// What a recalculation found, for trace flag 1165.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recalculation {
    pub threshold_before: u32,
    pub threshold_after: u32,
    pub most_free_file: u16,
    /// (file id, free extents, skip target) in round-robin order.
    pub files: Vec<(u16, u32, u32)>,
}

/// The skip target of a file with `free` extents when the most-free file has `most`.
pub fn skip_target(most: u32, free: u32) -> u32 {
    most.checked_div(free).unwrap_or(most).max(1)
}

impl FilegroupFill {
    /// True when the next allocation should recalculate first.
    pub fn due(&self) -> bool {
        self.threshold == 0 || self.allocations >= self.threshold
    }

    /// New skip targets from each file's free extents (file id order). Countdowns restart
    /// at the new targets; the round robin keeps its position when its file remains.
    pub fn recalculate(&mut self, free: &[(u16, u32)]) -> Recalculation {
        let most = free.iter().map(|f| f.1).max().unwrap_or(0);
        // The first file with the most free (ties go to the lowest file id).
        let most_free_file = free.iter().find(|f| f.1 == most).map(|f| f.0).unwrap_or(0);
        let next_id = self.files.get(self.next).map(|f| f.file_id);
        self.files = free
            .iter()
            .map(|&(file_id, n)| {
                let t = skip_target(most, n);
                FileFill {
                    file_id,
                    free: n,
                    skip_target: t,
                    countdown: t,
                }
            })
            .collect();
        self.next = next_id
            .and_then(|id| self.files.iter().position(|f| f.file_id == id))
            .unwrap_or(0);
        self.run = None;
        let before = self.threshold;
        self.threshold = RECALCULATE_EVERY;
        self.allocations = 0;
        debug_assert!(self.files.is_empty() || self.files.iter().any(|f| f.skip_target == 1));
        Recalculation {
            threshold_before: before,
            threshold_after: self.threshold,
            most_free_file,
            files: self
                .files
                .iter()
                .map(|f| (f.file_id, f.free, f.skip_target))
                .collect(),
        }
    }

    /// True when every file's skip target is 1 (the fast path seed 004 describes: no
    /// countdown to consult, plain round robin).
    pub fn all_targets_one(&self) -> bool {
        self.files.iter().all(|f| f.skip_target == 1)
    }

    /// The file the next extent comes from, by the round robin; `e_extents` is 1, or
    /// `E_EXTENTS` under -E. None when no file is believed to have a free extent
    /// (invariant 2).
    pub fn next_file(&mut self, e_extents: u32) -> Option<u16> {
        if let Some((i, left)) = self.run {
            if left > 0 && self.files[i].free > 0 {
                self.run = Some((i, left - 1));
                return Some(self.files[i].file_id);
            }
            self.run = None;
        }
        if self.files.iter().all(|f| f.free == 0) {
            return None;
        }
        // Every round decrements each countdown above 1, so a file with free extents is
        // chosen within (largest skip target) rounds.
        loop {
            let i = self.next;
            self.next = (self.next + 1) % self.files.len();
            let f = &mut self.files[i];
            if f.countdown > 1 {
                f.countdown -= 1;
                continue;
            }
            f.countdown = f.skip_target;
            if f.free == 0 {
                continue;
            }
            if f.skip_target == 1 && e_extents > 1 {
                self.run = Some((i, e_extents - 1));
            }
            return Some(f.file_id);
        }
    }

    /// Records an extent handed out from `file_id`.
    pub fn allocated(&mut self, file_id: u16) {
        self.allocations += 1;
        if let Some(f) = self.files.iter_mut().find(|f| f.file_id == file_id) {
            f.free = f.free.saturating_sub(1);
        }
    }

    /// File ids in the order the round robin visits them from where it stands.
    pub fn round_robin_order(&self) -> Vec<u16> {
        let n = self.files.len();
        (0..n)
            .map(|k| self.files[(self.next + k) % n].file_id)
            .collect()
    }

    /// Sets a file's believed free extents (found full, or grown).
    pub fn set_free(&mut self, file_id: u16, free: u32) {
        if let Some(f) = self.files.iter_mut().find(|f| f.file_id == file_id) {
            f.free = free;
        }
    }
}

// ---- Sharing the round robin between sessions allocating at once ----

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize};
use std::sync::{Mutex, MutexGuard};

/// Spins on FGCB_PRP_FILL before a waiter backs off and sleeps on the lock.
const PRP_FILL_SPINS: u64 = 64;

/// How sessions have taken one filegroup's FGCB_PRP_FILL lock, in the terms of SQL
/// Server's sys.dm_os_spinlock_stats: acquisitions, collisions (the lock was held when
/// asked for), spins before it was free, backoffs (spinning gave up and the session slept
/// on the lock) and the time slept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrpFillStats {
    /// Acquisitions by allocations: two per allocation (choosing the file, recording the
    /// extent) unless every skip target is 1, when there are none but recalculations.
    pub acquisitions: u64,
    /// Acquisitions to recalculate the skip targets.
    pub recalculations: u64,
    pub collisions: u64,
    pub spins: u64,
    pub backoffs: u64,
    pub sleep_time_us: u64,
    /// Allocations that chose their file by the lock-free round robin.
    pub lock_free_picks: u64,
}

#[derive(Default)]
struct PrpFillCounters {
    acquisitions: AtomicU64,
    recalculations: AtomicU64,
    collisions: AtomicU64,
    spins: AtomicU64,
    backoffs: AtomicU64,
    sleep_time_us: AtomicU64,
    lock_free_picks: AtomicU64,
}

/// What the round robin offers the next allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pick {
    File(u16),
    /// The skip targets are due for recalculation first.
    Due,
    /// No file is believed to have a free extent.
    AllFull,
}

/// One file of the lock-free round robin: its id and believed free extents.
#[derive(Debug)]
struct RingFile {
    file_id: u16,
    free: AtomicU32,
}

/// The round robin of one filegroup as sessions share it (seed 004's FGCB).
///
/// The skip targets, countdowns and -E run (`FilegroupFill`) sit behind the FGCB_PRP_FILL
/// lock, taken for every allocation while some skip target is above 1. When a
/// recalculation finds every skip target 1 (and -E is off) there is nothing to count down,
/// and allocations choose their file without that lock: a ticket from an atomic counter
/// picks the file (ticket modulo the number of files), skipping files believed full, and
/// the believed free counts and the allocation count are atomics.
///
/// Invariants:
/// 1. While `lock_free` is set, `ring` lists exactly the files of `FilegroupFill::files`
///    in the same order; the set of files changes only through `&mut` (file added or
///    removed), never while sessions allocate.
/// 2. Single-threaded, the lock-free round robin hands out the same files in the same
///    order as `FilegroupFill::next_file` with every skip target 1 (tests/proportional_fill.rs
///    checks the engine against the reference model in both modes).
#[derive(Default)]
pub struct SharedFill {
    locked: Mutex<FilegroupFill>,
    lock_free: AtomicBool,
    ring: Vec<RingFile>,
    /// The lock-free round robin's next ticket.
    ticket: AtomicUsize,
    /// Allocations since the last recalculation while lock-free.
    allocations: AtomicU32,
    /// The allocation count that triggers the next recalculation while lock-free.
    threshold: AtomicU32,
    counters: PrpFillCounters,
    /// Turns a session sharing the database was given but could not use (the unit needs
    /// an IAM page in that file, which only the exclusive path creates): the next exclusive
    /// allocations take them first, so the round robin hands out the same files as if the
    /// session had allocated there itself.
    deferred: Mutex<std::collections::VecDeque<u16>>,
}

impl SharedFill {
    /// Takes FGCB_PRP_FILL: a few spins on `try_lock`, then a blocking wait, counted.
    fn prp_fill(&self) -> MutexGuard<'_, FilegroupFill> {
        let c = &self.counters;
        c.acquisitions.fetch_add(1, Ordering::Relaxed);
        if let Ok(g) = self.locked.try_lock() {
            return g;
        }
        c.collisions.fetch_add(1, Ordering::Relaxed);
        for _ in 0..PRP_FILL_SPINS {
            std::hint::spin_loop();
            c.spins.fetch_add(1, Ordering::Relaxed);
            if let Ok(g) = self.locked.try_lock() {
                return g;
            }
        }
        c.backoffs.fetch_add(1, Ordering::Relaxed);
        let slept = std::time::Instant::now();
        let g = self.locked.lock().unwrap_or_else(|e| e.into_inner());
        c.sleep_time_us
            .fetch_add(slept.elapsed().as_micros() as u64, Ordering::Relaxed);
        g
    }

    /// Recalculates the skip targets from `free` (file id order) under FGCB_PRP_FILL and
    /// chooses the mode: lock-free when every target is 1 and `e_extents` is 1. The set of
    /// files must be the ring's while lock-free (invariant 1); `&mut` callers use
    /// `recalculate_files`.
    /// With `only_if_due`, nothing happens (None) unless a recalculation is still due once
    /// the lock is held (another session may have done it meanwhile).
    fn recalculate(
        &self,
        free: &[(u16, u32)],
        e_extents: u32,
        only_if_due: bool,
    ) -> Option<Recalculation> {
        let mut g = self.prp_fill();
        let was_lock_free = self.lock_free.load(Ordering::Acquire);
        if only_if_due {
            let due = if was_lock_free {
                self.allocations.load(Ordering::Relaxed) >= self.threshold.load(Ordering::Relaxed)
            } else {
                g.due()
            };
            if !due {
                return None;
            }
        }
        self.counters.recalculations.fetch_add(1, Ordering::Relaxed);
        if was_lock_free {
            // The round robin continues where the lock-free tickets left it.
            let n = g.files.len().max(1);
            g.next = self.ticket.load(Ordering::Relaxed) % n;
            g.threshold = self.threshold.load(Ordering::Relaxed);
            g.allocations = self.allocations.load(Ordering::Relaxed);
        }
        let r = g.recalculate(free);
        let lock_free = e_extents <= 1 && !g.files.is_empty() && g.all_targets_one();
        if lock_free {
            assert!(
                self.ring.len() == g.files.len()
                    && self
                        .ring
                        .iter()
                        .zip(&g.files)
                        .all(|(a, b)| a.file_id == b.file_id),
                "the lock-free ring must list the filegroup's files (invariant 1)"
            );
            for (slot, f) in self.ring.iter().zip(&g.files) {
                slot.free.store(f.free, Ordering::Relaxed);
            }
            self.ticket.store(g.next, Ordering::Relaxed);
            self.allocations.store(0, Ordering::Relaxed);
            self.threshold.store(g.threshold, Ordering::Relaxed);
        }
        self.lock_free.store(lock_free, Ordering::Release);
        Some(r)
    }

    /// `recalculate` after the filegroup's files changed (`&mut`: nobody allocates).
    fn recalculate_files(&mut self, free: &[(u16, u32)], e_extents: u32) -> Recalculation {
        self.lock_free.store(false, Ordering::Release);
        // A turn given back may name a file no longer in the filegroup.
        self.deferred
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.ring = free
            .iter()
            .map(|&(file_id, _)| RingFile {
                file_id,
                free: AtomicU32::new(0),
            })
            .collect();
        self.recalculate(free, e_extents, false)
            .expect("an unconditional recalculation")
    }

    /// The file the next extent comes from: lock-free when every skip target is 1, else
    /// through `FilegroupFill::next_file` under FGCB_PRP_FILL (which also tells whether a
    /// recalculation is due, under the same acquisition).
    fn next_file(&self, e_extents: u32) -> Pick {
        if self.lock_free.load(Ordering::Acquire) {
            if self.allocations.load(Ordering::Relaxed) >= self.threshold.load(Ordering::Relaxed) {
                return Pick::Due;
            }
            let n = self.ring.len();
            for _ in 0..n {
                let t = self.ticket.fetch_add(1, Ordering::Relaxed);
                let f = &self.ring[t % n];
                if f.free.load(Ordering::Relaxed) > 0 {
                    self.counters
                        .lock_free_picks
                        .fetch_add(1, Ordering::Relaxed);
                    return Pick::File(f.file_id);
                }
            }
            return Pick::AllFull;
        }
        let mut g = self.prp_fill();
        if g.due() {
            return Pick::Due;
        }
        match g.next_file(e_extents) {
            Some(id) => Pick::File(id),
            None => Pick::AllFull,
        }
    }

    /// Gives back a turn of `file_id` that a session sharing the database could not use.
    fn defer(&self, file_id: u16) {
        self.deferred
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(file_id);
    }

    /// A turn given back (`defer`), for an allocation holding the database exclusively.
    fn take_deferred(&self) -> Option<u16> {
        self.deferred
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
    }

    /// Records an extent handed out from `file_id`.
    fn allocated(&self, file_id: u16) {
        if self.lock_free.load(Ordering::Acquire) {
            if let Some(f) = self.ring.iter().find(|f| f.file_id == file_id) {
                let _ = f
                    .free
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1));
            }
            self.allocations.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.prp_fill().allocated(file_id);
    }

    /// Sets a file's believed free extents (found full, counted again, or grown).
    fn set_free(&self, file_id: u16, free: u32) {
        if let Some(f) = self.ring.iter().find(|f| f.file_id == file_id) {
            f.free.store(free, Ordering::Relaxed);
        }
        self.prp_fill().set_free(file_id, free);
    }

    /// The round robin as it stands, the lock-free state folded in.
    pub fn snapshot(&self) -> FilegroupFill {
        // Not counted: an observer's acquisition, not an allocation's.
        let mut g = self
            .locked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if self.lock_free.load(Ordering::Acquire) {
            for (f, slot) in g.files.iter_mut().zip(&self.ring) {
                f.free = slot.free.load(Ordering::Relaxed);
            }
            g.next = self.ticket.load(Ordering::Relaxed) % g.files.len().max(1);
            g.allocations = self.allocations.load(Ordering::Relaxed);
        }
        g
    }

    /// True while allocations choose their file without FGCB_PRP_FILL.
    pub fn is_lock_free(&self) -> bool {
        self.lock_free.load(Ordering::Acquire)
    }

    pub fn stats(&self) -> PrpFillStats {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        PrpFillStats {
            acquisitions: l(&c.acquisitions),
            recalculations: l(&c.recalculations),
            collisions: l(&c.collisions),
            spins: l(&c.spins),
            backoffs: l(&c.backoffs),
            sleep_time_us: l(&c.sleep_time_us),
            lock_free_picks: l(&c.lock_free_picks),
        }
    }
}

// ---- The database's side: counts, growth, trace flag 1165 ----

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use extentdb_format::{ExtentNo, PAGES_PER_EXTENT};

use crate::allocation::Claim;
use crate::log_growth::GrowthEnv;
use crate::{Database, StorageError};

/// What one step of an allocation by fill found (`allocate_by_fill`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocation {
    Extent(u16, ExtentNo),
    /// The round robin chose this file and the unit has no IAM page for its free
    /// extent's interval: one is made holding the database (`allocate_extent_lazy`).
    NeedsIam(u16),
    /// Every file of the filegroup is full, counted again from the maps: it must grow.
    NeedsGrowth,
    /// The round robin believes every file full, but the maps show free extents (freed
    /// since): the counts are set again, holding the database.
    NeedsRecount,
    /// The log needs a checkpoint or growth first, or the filegroup's round robin is not
    /// set up since open.
    NeedsExclusive,
}

/// Where the shared part of an allocation by fill ended.
enum FillStep {
    Extent(u16, ExtentNo),
    /// The round robin chose this file, and the unit has no IAM page for it yet.
    NeedsIam(u16),
    /// No file is believed to have a free extent.
    AllFull,
}

impl Database {
    /// Recalculates the skip targets of every filegroup (after the database is created or
    /// opened).
    pub fn recalculate_proportional_fill(&mut self) -> Result<(), StorageError> {
        let groups: Vec<u16> = self
            .catalog
            .filegroups
            .iter()
            .map(|g| g.data_space_id)
            .collect();
        for ds in groups {
            self.recalculate_fill(ds)?;
        }
        Ok(())
    }

    /// The round robin of filegroup `ds` as it stands (for tests, DMVs and tools).
    pub fn proportional_fill(&self, ds: u16) -> Option<FilegroupFill> {
        self.data.fill.get(&ds).map(SharedFill::snapshot)
    }

    /// How sessions took filegroup `ds`'s FGCB_PRP_FILL lock, and whether its allocations
    /// now choose their file without it.
    pub fn prp_fill_stats(&self, ds: u16) -> Option<(PrpFillStats, bool)> {
        self.data
            .fill
            .get(&ds)
            .map(|f| (f.stats(), f.is_lock_free()))
    }

    /// Counts the free extents of each file of filegroup `ds` and recalculates its skip
    /// targets, after its files changed, or at open (`open_at`), before any session.
    pub(crate) fn recalculate_fill(&mut self, ds: u16) -> Result<(), StorageError> {
        let free = self.free_extents_by_file(ds)?;
        let e_extents = self.data.growth.env.e_extents;
        let r = self
            .data
            .fill
            .entry(ds)
            .or_default()
            .recalculate_files(&free, e_extents);
        self.trace_recalculation(&r, &self.data.growth.env);
        Ok(())
    }

    /// The recalculation due after `RECALCULATE_EVERY` allocations, while sessions may be
    /// allocating; when several find it due at once, one recalculates.
    fn recalculate_due(
        &self,
        fill: &SharedFill,
        ds: u16,
        env: &GrowthEnv,
    ) -> Result<(), StorageError> {
        let free = self.free_extents_by_file(ds)?;
        if let Some(r) = fill.recalculate(&free, env.e_extents, true) {
            self.trace_recalculation(&r, env);
        }
        Ok(())
    }

    /// Writes a recalculation to the error log under trace flags 1165 and 3605, in seed
    /// 004's three line shapes, as the session `env` describes (its trace flags and spid).
    fn trace_recalculation(&self, r: &Recalculation, env: &GrowthEnv) {
        let (true, Some(log)) = (env.trace_fill, &env.errorlog) else {
            return;
        };
        log.write(
            &env.source,
            &format!(
                "Proportional Fill Recalculation Starting for DB {} with m_cAllocs {}.",
                self.name, r.threshold_before
            ),
        );
        log.write(
            &env.source,
            &format!(
                "Proportional Fill Recalculation Completed for DB {} new m_cAllocs {}, most free file is file {}.",
                self.name, r.threshold_after, r.most_free_file
            ),
        );
        for (file_id, n, target) in &r.files {
            let name = self
                .catalog
                .files
                .iter()
                .find(|f| f.file_id == *file_id)
                .map(|f| f.name.as_str())
                .unwrap_or("");
            log.write(
                &env.source,
                &format!(
                    "\tFile [{name}] ({file_id}) has {n} free extents and skip target of {target}. "
                ),
            );
        }
    }

    /// (file id, free extents) of each data file of filegroup `ds`, in file id order.
    fn free_extents_by_file(&self, ds: u16) -> Result<Vec<(u16, u32)>, StorageError> {
        let mut out = Vec::new();
        for f in self.catalog.files.iter().filter(|f| f.data_space_id == ds) {
            if let Some(df) = self.data_files.get(&f.file_id) {
                // A file being emptied counts as full (it takes no new extent).
                let free = if self.data.emptying.contains(&f.file_id) {
                    0
                } else {
                    df.free_extents()?
                };
                out.push((f.file_id, free));
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// The part of an allocation by fill that sessions may run at once (`&self`): the
    /// round robin's choice (lock-free when every skip target is 1) and the claim of an
    /// extent in the chosen file under that file's allocation lock.
    fn fill_step(
        &self,
        fill: &SharedFill,
        au: u64,
        ds: u16,
        env: &GrowthEnv,
    ) -> Result<FillStep, StorageError> {
        let e_extents = env.e_extents.max(1);
        loop {
            // A turn a session sharing the database handed back goes to the next
            // allocation holding it.
            let deferred = match self.held_exclusively {
                true => fill.take_deferred(),
                false => None,
            };
            let pick = deferred.map_or_else(|| fill.next_file(e_extents), Pick::File);
            match pick {
                Pick::Due => self.recalculate_due(fill, ds, env)?,
                Pick::AllFull => return Ok(FillStep::AllFull),
                Pick::File(file_id) => match self.claim_extent(au, file_id)? {
                    Claim::Extent(e) => {
                        fill.allocated(file_id);
                        return Ok(FillStep::Extent(file_id, e));
                    }
                    // Counted free, found full (extents taken outside the round robin).
                    Claim::Full => fill.set_free(file_id, 0),
                    Claim::NeedsIam(_) => return Ok(FillStep::NeedsIam(file_id)),
                },
            }
        }
    }

    /// One step of an allocation by proportional fill of an extent for allocation unit
    /// `au` of filegroup `ds`, beside other sessions allocating at once (`&self`). The
    /// file is chosen without any filegroup-wide lock when every skip target is 1 (seed
    /// 004's FGCB_PRP_FILL exception), under FGCB_PRP_FILL otherwise; the extent is claimed
    /// under the chosen file's allocation lock, so sessions never receive the same extent.
    /// Anything else (`Allocation::Needs*`) is made holding the database exclusively
    /// (`allocate_extent_by_fill`); a session sharing it hands a turn whose file needs an
    /// IAM page back to that next exclusive allocation, so the round robin gives each file
    /// the same extents as if nothing had been handed back. `env` is the allocating
    /// session's (-E, trace flags, its spid in the error log).
    pub fn allocate_by_fill(
        &self,
        au: u64,
        ds: u16,
        env: &GrowthEnv,
    ) -> Result<Allocation, StorageError> {
        self.check_writable()?;
        let Some(fill) = self.data.fill.get(&ds) else {
            return Ok(Allocation::NeedsExclusive);
        };
        if self.log_wants_space() {
            return Ok(Allocation::NeedsExclusive);
        }
        Ok(match self.fill_step(fill, au, ds, env)? {
            FillStep::Extent(file_id, e) => Allocation::Extent(file_id, e),
            FillStep::NeedsIam(file_id) => {
                if !self.held_exclusively {
                    fill.defer(file_id);
                }
                Allocation::NeedsIam(file_id)
            }
            // Every file believed full: count again (deallocations are not tracked).
            FillStep::AllFull if self.free_extents_by_file(ds)?.iter().all(|f| f.1 == 0) => {
                Allocation::NeedsGrowth
            }
            FillStep::AllFull => Allocation::NeedsRecount,
        })
    }

    /// An extent for allocation unit `au` of filegroup `ds`, by proportional fill
    /// (`allocate_by_fill`), holding the database: an IAM page made, the counts set again,
    /// or, when no file has a free extent, the filegroup grown (one file, or all of them
    /// with AUTOGROW_ALL_FILES). None when it cannot grow (the caller raises 1105).
    pub fn allocate_extent_by_fill(
        &mut self,
        au: u64,
        ds: u16,
    ) -> Result<Option<(u16, ExtentNo)>, StorageError> {
        self.check_writable()?;
        if !self.data.fill.contains_key(&ds) {
            // Counted at open unless a map could not be read then: this reports it.
            self.recalculate_fill(ds)?;
        }
        loop {
            self.ensure_log_space()?;
            self.log_attended = true;
            let env = self.data.growth.env.clone();
            let got = match self.allocate_by_fill(au, ds, &env)? {
                Allocation::Extent(file_id, e) => Some((file_id, e)),
                Allocation::NeedsIam(file_id) => self.allocate_with_iam(au, ds, file_id)?,
                Allocation::NeedsRecount => {
                    for (id, n) in self.free_extents_by_file(ds)? {
                        self.data.fill[&ds].set_free(id, n);
                    }
                    None
                }
                Allocation::NeedsGrowth if self.grow_for_fill(ds)? => None,
                Allocation::NeedsGrowth => return Ok(None),
                Allocation::NeedsExclusive => unreachable!("the log was seen to"),
            };
            if let Some(got) = got {
                self.prepare_growth_ahead(ds)?;
                return Ok(Some(got));
            }
        }
    }

    /// The extent of file `file_id` the round robin chose, with the IAM page it needs.
    fn allocate_with_iam(
        &mut self,
        au: u64,
        ds: u16,
        file_id: u16,
    ) -> Result<Option<(u16, ExtentNo)>, StorageError> {
        let got = self.allocate_extent_lazy(au, file_id)?;
        let fill = &self.data.fill[&ds];
        Ok(match got {
            Some(e) => {
                fill.allocated(file_id);
                Some((file_id, e))
            }
            None => {
                fill.set_free(file_id, 0);
                None
            }
        })
    }

    /// Grows filegroup `ds` for an allocation that found every file full, and counts the
    /// grown files' free extents; false when no file could grow.
    fn grow_for_fill(&mut self, ds: u16) -> Result<bool, StorageError> {
        let grown = self.autogrow_filegroup(ds)?;
        for &id in &grown {
            let n = self.data_files[&id].free_extents()?;
            self.data.fill[&ds].set_free(id, n);
        }
        Ok(!grown.is_empty())
    }

    /// Reports a data file's autogrowth with its duration (SQL Server's message 5145);
    /// `how` says where the initialization's time went, if not into this wait.
    pub(crate) fn log_data_autogrow(
        &self,
        sink: &crate::log_growth::EnvSink,
        file_name: &str,
        took: std::time::Duration,
        how: &str,
    ) {
        crate::file_init::InitLog::log(
            sink,
            &format!(
                "Autogrow of file '{file_name}' in database '{}' took {} milliseconds{how}. Consider using ALTER DATABASE to set a smaller FILEGROWTH for this file.",
                self.name,
                took.as_millis()
            ),
        );
    }

    /// Grows filegroup `ds` when all its files are full: every file that may grow when the
    /// filegroup is AUTOGROW_ALL_FILES, else the first that may, in round-robin order from
    /// the position the round robin has reached. Each by its FILEGROWTH (pages or percent),
    /// capped by MAXSIZE, through the one file-initialization path (instant with IFI), each
    /// logged with its duration (SQL Server's message 5145). Returns the files grown.
    fn autogrow_filegroup(&mut self, ds: u16) -> Result<Vec<u16>, StorageError> {
        let targets = self.growth_targets(ds);
        let env = self.data.growth.env.clone();
        let sink = crate::log_growth::EnvSink::new(&env);
        let mut grown = Vec::new();
        for (file_id, name, to) in targets {
            let started = std::time::Instant::now();
            let prepared = self.commit_prepared_data_growth(file_id, to)?;
            if prepared.is_none() {
                match self.grow_file_with(env.policy, &sink, file_id, to) {
                    Ok(()) => {}
                    // The disk refused the space: the growth was undone whole (catalog and
                    // file as before), so this file simply cannot grow now (1105 follows
                    // when no file of the filegroup could).
                    Err(StorageError::FileExpand { path, source }) => {
                        crate::file_init::InitLog::log(&sink, &expand_failed_text(&path, &source));
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            let how = match prepared {
                Some(Prepared::Background) => {
                    " (initialized in the background before it was needed)".to_string()
                }
                Some(Prepared::Session(took)) => format!(
                    " (initialized in {} milliseconds outside the database lock)",
                    took.as_millis()
                ),
                None => String::new(),
            };
            self.log_data_autogrow(&sink, &name, started.elapsed(), &how);
            grown.push(file_id);
        }
        Ok(grown)
    }
}

/// The ERRORLOG lines SQL Server writes when the disk refuses a file's growth (5149), with
/// the OS error as SQL Server quotes it: `112(There is not enough space on the disk.)`.
pub(crate) fn expand_failed_text(path: &str, source: &extentdb_io::IoError) -> String {
    let errno = source.errno().unwrap_or(libc::EIO);
    let os = match errno {
        libc::ENOSPC | libc::EDQUOT | libc::EFBIG => {
            "112(There is not enough space on the disk.)".to_string()
        }
        n => format!("{n}({})", std::io::Error::from_raw_os_error(n)),
    };
    format!(
        "Error: 5149, Severity: 16, State: 3.\nMODIFY FILE encountered operating system error {os} while attempting to expand the physical file '{path}'."
    )
}

/// Data-file growths initialized in the background ahead of need when instant file
/// initialization is off (with it, a growth takes milliseconds and needs no preparing): the
/// zeros are written outside the database's lock, so no session waits for them unless the
/// filegroup fills before they are done, and other filegroups never do. The space lies past
/// the catalog's size until the growth is committed, so a crash meanwhile changes nothing.
#[derive(Default)]
pub(crate) struct DataGrowthPrep {
    /// file id -> (from pages, to pages, the initializing thread, set when it has ended).
    preparing: BTreeMap<u16, (u32, u32, Preparation, Arc<AtomicBool>)>,
    /// Growths a session initialized itself (`GrowthPreparation`, holding no database
    /// lock): file id -> (from pages, to pages, time taken).
    ready: Arc<Mutex<ReadyGrowths>>,
    /// Each filegroup's growth lock: held while a session initializes the filegroup's next
    /// growth, so its other sessions wait for that growth instead of starting another.
    growth_locks: Mutex<BTreeMap<u16, Arc<Mutex<()>>>>,
    cancel: Arc<AtomicBool>,
    /// Growths committed from a preparation, and the longest wait for one (µs).
    committed: u64,
    longest_wait_us: u64,
    /// Growths committed from a session's preparation.
    shared_committed: u64,
}

/// How a committed growth's space was initialized ahead of its commit.
enum Prepared {
    /// By a background thread (IFI off, `prepare_growth_ahead`).
    Background,
    /// By a session sharing the database, taking this long.
    Session(std::time::Duration),
}

/// Growths initialized by sessions: file id -> (from pages, to pages, time taken).
type ReadyGrowths = BTreeMap<u16, (u32, u32, std::time::Duration)>;

impl DataGrowthPrep {
    fn ready_growths(&self) -> std::sync::MutexGuard<'_, ReadyGrowths> {
        self.ready.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The slow half of a filegroup's growth (`Database::growth_preparation`), run by a session
/// holding no lock on the database at all: a session waiting to hold it exclusively (a
/// checkpoint, another statement) would otherwise stop every session behind it, of every
/// filegroup, for as long as the zeros take. Holds what it needs: the files' handles and
/// sizes, the filegroup's growth lock and the table of ready growths.
pub struct GrowthPreparation {
    lock: Arc<Mutex<()>>,
    /// (file id, handle, from pages, to pages) of each file to initialize.
    files: Vec<(u16, Arc<dyn extentdb_io::DbFile>, u32, u32)>,
    /// Background preparations of the same growth still running: waited for.
    background: Vec<Arc<AtomicBool>>,
    ready: Arc<Mutex<ReadyGrowths>>,
    env: GrowthEnv,
}

impl std::fmt::Debug for GrowthPreparation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let files: Vec<(u16, u32, u32)> = self.files.iter().map(|f| (f.0, f.2, f.3)).collect();
        f.debug_struct("GrowthPreparation")
            .field("files", &files)
            .finish()
    }
}

impl GrowthPreparation {
    /// Initializes the growth's space (zeros at device speed with IFI off, fallocate with
    /// it) under the filegroup's growth lock, so the filegroup's other sessions wait for this
    /// growth instead of starting another; the exclusive commit (`allocate_extent_by_fill`)
    /// then only formats the new space's maps and saves the catalog. The space lies past the
    /// catalog's size, so a crash meanwhile changes nothing. Returns the files prepared.
    pub fn run(self) -> Result<Vec<u16>, StorageError> {
        let _growing = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        for done in &self.background {
            while !done.load(Ordering::Acquire) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        let sink = crate::log_growth::EnvSink::new(&self.env);
        let mut prepared = Vec::new();
        for (file_id, file, from, to) in &self.files {
            let done = self
                .ready
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(file_id)
                .is_some_and(|r| (r.0, r.1) == (*from, *to));
            if !done {
                let started = std::time::Instant::now();
                crate::file_init::initialize(
                    file.as_ref(),
                    crate::file_init::SpaceKind::Data,
                    *from,
                    *to,
                    self.env.policy,
                    &sink,
                )?;
                file.sync_data()?;
                self.ready
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(*file_id, (*from, *to, started.elapsed()));
            }
            prepared.push(*file_id);
        }
        Ok(prepared)
    }
}

impl Drop for DataGrowthPrep {
    /// A closing database stops its preparations within one step and waits for them.
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        for (_, (_, _, h, _)) in std::mem::take(&mut self.preparing) {
            let _ = h.join();
        }
    }
}

/// The thread initializing a prepared growth.
type Preparation = JoinHandle<Result<(), StorageError>>;

/// Zeroing step of a background data-file preparation.
const PREPARE_STEP_BYTES: u64 = 1 << 20;

impl Database {
    /// (data-file growths committed from a background preparation, longest wait in µs).
    pub fn data_growth_stats(&self) -> (u64, u64) {
        let p = &self.data.data_growth;
        (p.committed, p.longest_wait_us)
    }

    /// Data-file growths committed from a preparation by a session sharing the database
    /// (`initialize_filegroup_growth`).
    pub fn shared_growths_committed(&self) -> u64 {
        self.data.data_growth.shared_committed
    }

    /// After an allocation in filegroup `ds`: with IFI off and the filegroup's free extents
    /// down to half of the growth that would come next, starts initializing that growth
    /// (every file's with AUTOGROW_ALL_FILES) in the background.
    fn prepare_growth_ahead(&mut self, ds: u16) -> Result<(), StorageError> {
        let env = &self.data.growth.env;
        if env.policy.instant || !env.prepare_ahead {
            return Ok(());
        }
        let Some(g) = self.proportional_fill(ds) else {
            return Ok(());
        };
        let free: u64 = g.files.iter().map(|f| f.free as u64).sum();
        let targets = self.growth_targets(ds);
        let need: u64 = targets
            .iter()
            .map(|t| ((t.2 - self.file_pages(t.0)) / PAGES_PER_EXTENT) as u64)
            .sum();
        if free * 2 > need {
            return Ok(());
        }
        for (file_id, _, to) in targets {
            if self.data.data_growth.preparing.contains_key(&file_id) {
                continue;
            }
            let from = self.file_pages(file_id);
            let file = self.data_files[&file_id].file.clone();
            let cancel = self.data.data_growth.cancel.clone();
            let policy = self.data.growth.env.policy;
            let finished = Arc::new(AtomicBool::new(false));
            let ended = finished.clone();
            let handle = std::thread::spawn(move || {
                // Set however the thread ends (sessions wait on it, `GrowthPreparation`).
                struct Ended(Arc<AtomicBool>);
                impl Drop for Ended {
                    fn drop(&mut self) {
                        self.0.store(true, Ordering::Release);
                    }
                }
                let _ended = Ended(ended);
                let no_rest = |_: u64, _: std::time::Duration| false;
                crate::file_init::initialize_paced(
                    file.as_ref(),
                    crate::file_init::SpaceKind::Data,
                    from,
                    to,
                    crate::file_init::InitPolicy {
                        trace_zeroing: false,
                        ..policy
                    },
                    &Silent,
                    Some(crate::file_init::Pace {
                        bytes: PREPARE_STEP_BYTES,
                        cancel: &cancel,
                        may_rest: &no_rest,
                    }),
                )?;
                file.sync_data()?;
                Ok(())
            });
            self.data
                .data_growth
                .preparing
                .insert(file_id, (from, to, handle, finished));
        }
        Ok(())
    }

    /// Waits for a preparation of file `file_id` and drops it: the file is about to change
    /// size another way (ALTER DATABASE ... MODIFY FILE, SHRINKFILE, REMOVE FILE), and the
    /// thread must not write zeros into space that becomes live.
    pub(crate) fn drop_prepared_data_growth(&mut self, file_id: u16) {
        if let Some((_, _, h, _)) = self.data.data_growth.preparing.remove(&file_id) {
            let _ = h.join();
        }
        // A session initializing this file's growth holding no database lock finishes
        // first (it holds the filegroup's growth lock), so its entry is not left behind.
        let ds = self
            .catalog
            .files
            .iter()
            .find(|f| f.file_id == file_id)
            .map(|f| f.data_space_id);
        let lock = ds.map(|ds| self.growth_lock(ds));
        let _growing = lock
            .as_ref()
            .map(|l| l.lock().unwrap_or_else(|e| e.into_inner()));
        self.data.data_growth.ready_growths().remove(&file_id);
    }

    fn growth_lock(&self, ds: u16) -> Arc<Mutex<()>> {
        let mut locks = self
            .data
            .data_growth
            .growth_locks
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        locks.entry(ds).or_default().clone()
    }

    /// True while a session initializes a growth of filegroup `ds`
    /// (`initialize_filegroup_growth`).
    pub fn filegroup_growth_in_progress(&self, ds: u16) -> bool {
        self.growth_lock(ds).try_lock().is_err()
    }

    /// The slow half of a growth of filegroup `ds`, for a session sharing the database
    /// (`&self`) whose allocation found every file full (`GrowthPreparation::run`, here
    /// while holding the database shared: the storage tests' way; sessions of the server
    /// run it holding no lock, `growth_preparation`). Sessions allocating in other
    /// filegroups go on meanwhile; sessions of this one wait on the filegroup's growth lock
    /// and find the growth prepared. Returns the files prepared (or already prepared).
    pub fn initialize_filegroup_growth(&self, ds: u16) -> Result<Vec<u16>, StorageError> {
        self.check_writable()?;
        match self.growth_preparation(ds, &self.data.growth.env) {
            Some(p) => p.run(),
            None => Ok(Vec::new()),
        }
    }

    /// What initializing filegroup `ds`'s next growth takes, as session `env` would grow it
    /// (its IFI policy and trace flags, its spid in the error log), to run holding no lock
    /// on the database; None when there is nothing to initialize (no file may grow, or the
    /// growth is initialized already).
    pub fn growth_preparation(&self, ds: u16, env: &GrowthEnv) -> Option<GrowthPreparation> {
        let mut files = Vec::new();
        let mut background = Vec::new();
        for (file_id, _, to) in self.growth_targets(ds) {
            let from = self.file_pages(file_id);
            // A background preparation of the same space is committed by its own path; it
            // is waited for outside the database's lock, so that the commit (holding it
            // exclusively) finds it finished and does not hold up other filegroups.
            if let Some((_, _, _, ended)) = self.data.data_growth.preparing.get(&file_id) {
                if !ended.load(Ordering::Acquire) {
                    background.push(ended.clone());
                }
                continue;
            }
            let done = self
                .data
                .data_growth
                .ready_growths()
                .get(&file_id)
                .is_some_and(|r| (r.0, r.1) == (from, to));
            if !done {
                files.push((file_id, self.data_files[&file_id].file.clone(), from, to));
            }
        }
        if files.is_empty() && background.is_empty() {
            return None;
        }
        Some(GrowthPreparation {
            lock: self.growth_lock(ds),
            files,
            background,
            ready: self.data.data_growth.ready.clone(),
            env: env.clone(),
        })
    }

    fn file_pages(&self, file_id: u16) -> u32 {
        self.catalog
            .files
            .iter()
            .find(|f| f.file_id == file_id)
            .map_or(0, |f| f.size_pages)
    }

    /// Commits file `file_id`'s prepared growth if it is the growth wanted (from the
    /// current size to `to`), waiting for it to finish; false when there is none to use.
    fn commit_prepared_data_growth(
        &mut self,
        file_id: u16,
        to: u32,
    ) -> Result<Option<Prepared>, StorageError> {
        let ready = self.data.data_growth.ready_growths().remove(&file_id);
        if let Some((from, prepared_to, took)) = ready {
            if (from, prepared_to) == (self.file_pages(file_id), to) {
                self.grow_file_initialized(file_id, to)?;
                self.data.data_growth.shared_committed += 1;
                return Ok(Some(Prepared::Session(took)));
            }
        }
        let Some((from, prepared_to, handle, _)) = self.data.data_growth.preparing.remove(&file_id)
        else {
            return Ok(None);
        };
        let waited = std::time::Instant::now();
        let done = handle.join().unwrap_or(Err(StorageError::LogFailed));
        let wait_us = waited.elapsed().as_micros() as u64;
        let p = &mut self.data.data_growth;
        p.longest_wait_us = p.longest_wait_us.max(wait_us);
        if done.is_err() || from != self.file_pages(file_id) || prepared_to != to {
            // Failed, or stale (the file changed meanwhile): grow the usual way.
            return Ok(None);
        }
        self.grow_file_initialized(file_id, to)?;
        self.data.data_growth.committed += 1;
        Ok(Some(Prepared::Background))
    }

    /// The files a growth of filegroup `ds` would grow, with their new sizes: every file
    /// that may grow with AUTOGROW_ALL_FILES, else the first that may in round-robin order.
    fn growth_targets(&self, ds: u16) -> Vec<(u16, String, u32)> {
        let all = self
            .catalog
            .filegroups
            .iter()
            .any(|g| g.data_space_id == ds && g.is_autogrow_all_files);
        let order: Vec<u16> = self
            .data
            .fill
            .get(&ds)
            .map(|g| g.snapshot().round_robin_order())
            .unwrap_or_default();
        let mut targets: Vec<(u16, String, u32)> = order
            .iter()
            .filter(|id| !self.data.emptying.contains(id))
            .filter_map(|id| self.catalog.files.iter().find(|f| f.file_id == *id))
            .filter_map(|f| {
                crate::log_growth::growth_target(f, PAGES_PER_EXTENT)
                    .filter(|&to| to >= f.size_pages + PAGES_PER_EXTENT)
                    .map(|to| (f.file_id, f.name.clone(), to))
            })
            .collect();
        if !all {
            targets.truncate(1);
        }
        targets
    }
}

/// An initialization log that drops every message (a background preparation's zeroing is
/// reported when its growth commits).
struct Silent;
impl crate::file_init::InitLog for Silent {
    fn log(&self, _: &str) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves seed 004's figures: 3995/44 = 90, 3995/79 = 50, 79/44 = 1, and a full file
    /// gets the most-free file's count (74).
    #[test]
    fn skip_targets_as_seed_004_prints_them() {
        let mut g = FilegroupFill::default();
        let r = g.recalculate(&[(1, 44), (3, 79), (4, 3995)]);
        assert_eq!(r.files, vec![(1, 44, 90), (3, 79, 50), (4, 3995, 1)]);
        assert_eq!((r.most_free_file, r.threshold_before), (4, 0));
        let r = g.recalculate(&[(1, 44), (3, 79)]);
        assert_eq!(r.files, vec![(1, 44, 1), (3, 79, 1)]);
        assert_eq!(r.threshold_before, RECALCULATE_EVERY);
        let r = g.recalculate(&[(1, 0), (3, 74), (4, 0)]);
        assert_eq!(r.files, vec![(1, 0, 74), (3, 74, 1), (4, 0, 74)]);
    }

    /// Proves -E: a file with skip target 1 takes 64 extents in a row.
    #[test]
    fn e_option_takes_64_consecutive_extents() {
        let mut g = FilegroupFill::default();
        g.recalculate(&[(1, 1000), (3, 1000)]);
        let picks: Vec<u16> = (0..130).map(|_| g.next_file(E_EXTENTS).unwrap()).collect();
        assert!(picks[..64].iter().all(|&f| f == 1));
        assert!(picks[64..128].iter().all(|&f| f == 3));
        assert_eq!(picks[128], 1);
    }
}
