//! What sys.dm_db_index_physical_stats reports of one B-tree level or one heap: pages,
//! records, ghosts, record sizes, space used and fragmentation, counted from the pages
//! themselves. A walk goes a bounded number of pages at a time (`walk_level`), so the
//! caller shares the database only for a chunk and holds nothing that grows with the
//! table: the counts are sums, the position one page id.
//!
//! A B-tree level is walked along its prev/next chain from its leftmost page (found by a
//! descent from the root, `tree_levels`); a heap in allocation order (its IAM chain's
//! extents, each extent's pages ascending), counting the pages that are the heap's.
//!
//! Fragmentation as SQL Server defines it for an index's level: a page is out of order
//! when the page after it (by the chain; for a heap, in allocation order) is not the
//! physically next page of its file; a fragment is a run of physically consecutive pages.
//!
//! Invariants:
//! 1. A walk reads each page of its level once, in chain order, and counts a page only if
//!    its header names the walk's allocation unit and level: a page that does not (the
//!    tree rebuilt or dropped between chunks) ends the walk with `ScanMoved` (Msg 601),
//!    never with counts of another object's pages.
//! 2. `fragments <= page_count`, `out_of_order < page_count` once a page is counted, and
//!    `ghost_record_count <= record_count + ghost_record_count` trivially: asserted at the
//!    end of each chunk.

use extentdb_format::catalog::TableEntry;
use extentdb_format::record::{self, RecordType};
use extentdb_format::{data_page, PageId, PAGES_PER_EXTENT, PAGE_SIZE};

use crate::btree::KeyInfo;
use crate::scan::PageReads;
use crate::table::is_heap_page;
use crate::{Database, StorageError};

/// Bytes of a page that can hold records and slots (the page less its 96-byte header).
pub const PAGE_BODY_BYTES: u64 = PAGE_SIZE as u64 - 96;

/// The counts of one level (or one heap) so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LevelStats {
    pub page_count: u64,
    /// Live records (ghosts and forwarding stubs apart).
    pub record_count: u64,
    pub ghost_record_count: u64,
    /// Heap records that moved (forwarded records).
    pub forwarded_record_count: u64,
    pub min_record_bytes: Option<u64>,
    pub max_record_bytes: Option<u64>,
    /// Bytes of every live record counted.
    pub record_bytes: u64,
    /// Bytes of the pages' bodies in use (records and slot array).
    pub used_bytes: u64,
    /// Pages whose next page is not the physically next one.
    pub out_of_order: u64,
    /// Runs of physically consecutive pages.
    pub fragments: u64,
}

impl LevelStats {
    /// avg_fragmentation_in_percent.
    pub fn fragmentation_pct(&self) -> f64 {
        match self.page_count {
            0 => 0.0,
            n => self.out_of_order as f64 * 100.0 / n as f64,
        }
    }

    /// avg_page_space_used_in_percent.
    pub fn space_used_pct(&self) -> f64 {
        match self.page_count {
            0 => 0.0,
            n => self.used_bytes as f64 * 100.0 / (n * PAGE_BODY_BYTES) as f64,
        }
    }

    /// avg_record_size_in_bytes.
    pub fn avg_record_bytes(&self) -> f64 {
        match self.record_count {
            0 => 0.0,
            n => self.record_bytes as f64 / n as f64,
        }
    }

    fn check_invariants(&self) {
        assert!(
            self.fragments <= self.page_count,
            "more fragments than pages"
        );
        assert!(
            self.page_count == 0 || self.out_of_order < self.page_count,
            "every page out of order: the last has no next"
        );
    }
}

/// Where a walk goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
enum WalkAt {
    /// A B-tree level: the next page of its chain.
    Chain(PageId),
    /// A heap: the `page`th page of its `extent`th extent in allocation order.
    Heap {
        extent: usize,
        page: u32,
    },
    Done,
}

/// One level's (or one heap's) walk in chunks.
#[derive(Debug, Clone)]
pub struct LevelWalk {
    pub allocation_unit_id: u64,
    /// The B-tree level (0 for leaves and heaps).
    pub level: u8,
    /// The tree's depth (1 for a heap).
    pub depth: u8,
    at: WalkAt,
    /// The last page counted (for the order and fragments).
    last: Option<PageId>,
    pub stats: LevelStats,
}

impl LevelWalk {
    pub fn is_done(&self) -> bool {
        self.at == WalkAt::Done
    }
}

impl Database {
    /// The walks of entry `object_id`'s levels: a heap's one, a B-tree's one per level,
    /// leaves first (with `leaf_only`, the leaves alone).
    pub fn level_walks(
        &self,
        object_id: u32,
        leaf_only: bool,
    ) -> Result<Vec<LevelWalk>, StorageError> {
        let t = self.table_or_err(object_id)?;
        let walk = |level, depth, at| LevelWalk {
            allocation_unit_id: t.allocation_unit_id,
            level,
            depth,
            at,
            last: None,
            stats: LevelStats::default(),
        };
        if t.index_id != 1 {
            return Ok(vec![walk(0, 1, WalkAt::Heap { extent: 0, page: 0 })]);
        }
        let levels = self.tree_levels(t)?;
        let depth = levels.len() as u8;
        let mut walks: Vec<LevelWalk> = levels
            .into_iter()
            .map(|(level, first)| walk(level, depth, WalkAt::Chain(first)))
            .collect();
        walks.sort_by_key(|w| w.level);
        if leaf_only {
            walks.truncate(1);
        }
        Ok(walks)
    }

    /// Each level's leftmost page, root first: the descent along each level's first record.
    fn tree_levels(&self, t: &TableEntry) -> Result<Vec<(u8, PageId)>, StorageError> {
        let ki = KeyInfo::of(t);
        let mut at = t.root_page;
        let mut levels = Vec::new();
        loop {
            let p = self.data.pool.peek(&self.data_files, at)?;
            let level = p.header()?.level;
            levels.push((level, at));
            if level == 0 {
                return Ok(levels);
            }
            let first = data_page::record(&p, 0)?.ok_or_else(|| {
                StorageError::from(extentdb_format::corrupt(at, "empty index page"))
            })?;
            at = ki.separator(first)?.1;
            if levels.len() > 64 {
                return Err(extentdb_format::corrupt(at, "tree deeper than 64 levels").into());
            }
        }
    }

    /// Counts up to `max_pages` more pages of `w` (invariant 1); the pages read.
    pub fn walk_level(
        &self,
        w: &mut LevelWalk,
        max_pages: usize,
    ) -> Result<PageReads, StorageError> {
        let mut reads = PageReads::default();
        let extents = match w.at {
            WalkAt::Heap { .. } => self.extents_of(w.allocation_unit_id)?,
            _ => Vec::new(),
        };
        for _ in 0..max_pages {
            let heap = matches!(w.at, WalkAt::Heap { .. });
            let pid = match w.at {
                WalkAt::Done => break,
                WalkAt::Chain(pid) => pid,
                WalkAt::Heap { extent, page } => match extents.get(extent) {
                    None => {
                        w.at = WalkAt::Done;
                        break;
                    }
                    Some((file, x)) => {
                        w.at = match page + 1 == PAGES_PER_EXTENT {
                            true => WalkAt::Heap {
                                extent: extent + 1,
                                page: 0,
                            },
                            false => WalkAt::Heap {
                                extent,
                                page: page + 1,
                            },
                        };
                        PageId::new(*file, x.first_page().0 + page)
                    }
                },
            };
            reads.visit(self.data.pool.contains(pid));
            let p = self.data.pool.peek(&self.data_files, pid)?;
            if heap {
                if !p.is_unformatted() && is_heap_page(&p, w.allocation_unit_id) {
                    count_page(w, pid, &p)?;
                }
                continue;
            }
            let h = p.header()?;
            if p.is_unformatted()
                || h.allocation_unit_id != w.allocation_unit_id
                || h.level != w.level
            {
                return Err(StorageError::ScanMoved);
            }
            count_page(w, pid, &p)?;
            w.at = match h.next_page.is_null() {
                true => WalkAt::Done,
                false => WalkAt::Chain(h.next_page),
            };
        }
        w.stats.check_invariants();
        Ok(reads)
    }
}

/// Adds page `pid` to `w`'s counts.
fn count_page(
    w: &mut LevelWalk,
    pid: PageId,
    p: &extentdb_format::Page,
) -> Result<(), StorageError> {
    let s = &mut w.stats;
    let next_physical = w
        .last
        .is_some_and(|l| l.file == pid.file && l.page.0 + 1 == pid.page.0);
    if w.last.is_some() && !next_physical {
        s.out_of_order += 1;
    }
    if !next_physical {
        s.fragments += 1;
    }
    w.last = Some(pid);
    s.page_count += 1;
    s.used_bytes += PAGE_BODY_BYTES - data_page::free_space(p) as u64;
    for (_, rec) in data_page::records(p) {
        let rec = rec?;
        match record::record_type(rec)? {
            RecordType::GhostIndex | RecordType::GhostData => s.ghost_record_count += 1,
            RecordType::ForwardingStub => {}
            t => {
                if t == RecordType::Forwarded {
                    s.forwarded_record_count += 1;
                }
                let n = rec.len() as u64;
                s.record_count += 1;
                s.record_bytes += n;
                s.min_record_bytes = Some(s.min_record_bytes.map_or(n, |m| m.min(n)));
                s.max_record_bytes = Some(s.max_record_bytes.map_or(n, |m| m.max(n)));
            }
        }
    }
    Ok(())
}
