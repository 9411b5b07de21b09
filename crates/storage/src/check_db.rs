//! DBCC CHECKDB and CHECKTABLE: every page of every allocation unit read once, in
//! allocation order, by `maxdop` workers, and checked as a page (audit), as records, and as
//! part of its heap or B-tree. DBCC CHECKALLOC (`check_alloc`) is its allocation half and
//! CHECKCATALOG (`check_catalog`) its catalog half. Pure reading of a `CheckSource`, the
//! point-in-time view `snapshot` keeps exact while other sessions write.
//!
//! Order of work:
//! 1. Catalog checks (8992), then the allocation checks (8904, 8905, 8946 ...), which also
//!    say which unit owns each extent.
//! 2. The owned extents, sorted by (file, extent), are cut into runs of up to 16 contiguous
//!    extents (1 MB) of one owner. Each of the `maxdop` checking workers has a read-ahead
//!    thread that takes runs from one atomic counter (one increment per MB read: no hot
//!    spot; with trace flag 2549 one counter per file, each worker starting in its own
//!    file: `RunQueue`), reads each with one large read into a spare buffer and hands it
//!    over, so reading overlaps checking. The whole database is checked in this one pass
//!    (SQL Server's trace flag 2562, one batch, is how every check runs here).
//! 3. Each page is audited (but a catalog page the PFS marks free, which holds nothing):
//!    checksum and page id (8939 + 8928, 8909); for a data or index
//!    page of its unit, the header fields, the slot array and every record's framing (8939,
//!    8941, 8942, 8944, 8927). Without PHYSICAL_ONLY also each record against the table's
//!    columns (8944), each value against its type (2570), each PERSISTED computed column
//!    computed again from its row and compared with the value stored (2537, "valid
//!    computed column"), and key order inside the page (2511, 2512). Facts for the
//!    cross-page checks are kept per B-tree page.
//! 4. Per unit, single-threaded on the facts alone (no reads): a clustered index is walked
//!    from its root level by level: children seen and of the right level (8976/8980, 8931),
//!    each child under one parent (8937), keys inside the parent's range (8933, 8934), the
//!    sibling chain in the parents' order (8935, 8978, 8981), every page reached (8977).
//! 5. Nonclustered indexes against their tables (not with PHYSICAL_ONLY): each live row of
//!    a table is projected into each of its indexes (storage's index.rs) and the index
//!    records' count and two order-free hashes (a sum and an exclusive or) are gathered
//!    per index, beside the same of the index's own live leaf records. They differ only
//!    when an index misses rows (8951) or holds rows no table row matches (8952); only
//!    then are the rows found, in bounded memory, and reported one by one with their
//!    details (8955, 8956), at most `detail_limit` per index (`index_rows`).
//!
//! Whether a page of an owned extent is in use is the allocation maps' word, never the
//! page's bytes: a page whose PFS byte has the allocated bit (set only once the page's
//! format is logged, `allocation` invariant 5) and that reads as all zeros lost its
//! contents (8909 naming page (0:0), as SQL Server reads it, and 8928), wherever it lies in
//! its extent; a zero page the PFS calls free is one the unit never formatted (a page taken
//! whose format a crash or a full log lost is one). A page naming another allocation unit is a
//! stale page of a dropped or truncated unit (ids are never reused) unless that unit is
//! live: then the page is claimed by two owners (2534).
//!
//! Robustness: every length and offset read from a page is bounded before use, chains are
//! followed with a seen-set, and memory is a few bytes per page plus one key per B-tree
//! page, so any bytes on disk give findings, never a panic, a hang or unbounded memory.
//!
//! Invariants:
//! 1. Every owned extent's pages are read exactly once (runs partition the owned extents).
//! 2. A finding's `allocation` flag is true exactly for the allocation errors SQL Server
//!    counts as such in its closing line.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use extentdb_format::catalog::{ColumnEntry, TableEntry, CATALOG_ALLOCATION_UNIT};
use extentdb_format::codec::get_u16;
use extentdb_format::layout;
use extentdb_format::record::{self, ColumnLayout, RecordType};
use extentdb_format::{
    key, pfs, Page, PageId, PageType, PageView, PAGES_PER_EXTENT, PAGE_HEADER_SIZE, PAGE_SIZE,
};

use crate::btree::KeyInfo;
use crate::check_alloc::{check_allocation, AllocError, CheckAllocReport, Claimant};
use crate::snapshot::CheckSource;
use crate::table::layouts;
use crate::StorageError;

mod index_rows;
pub use index_rows::{counted, ValueText, DEFAULT_DETAIL_LIMIT, DETAIL_MESSAGES};

/// Extents per read (1 MB).
const RUN_EXTENTS: u32 = 16;
/// Runs hinted ahead of the one being read.
const READ_AHEAD_RUNS: usize = 4;
/// Run buffers per worker: one being checked, the others being read ahead.
const READ_BUFFERS: usize = 3;

/// A run read by a worker's read-ahead thread, for the worker to check.
struct ReadRun {
    /// Index into the runs.
    run: usize,
    pages: Vec<Page>,
    /// Pages that could not be read (8939 with -1).
    findings: Vec<Finding>,
    result: Result<(), StorageError>,
}
const SLOT_SIZE: usize = 2;
/// B-tree levels at least this wide are checked by all the workers (`check_tree`).
const PARALLEL_LEVEL: usize = 128;
const BODY_SIZE: usize = PAGE_SIZE - PAGE_HEADER_SIZE;

/// Says whether a stored value is legal for its column; returns the type's name when not
/// (DATA_PURITY, Msg 2570). Supplied by the SQL layer, which owns the value encodings.
pub type ValueCheck = dyn Fn(&ColumnEntry, &[u8]) -> Option<String> + Sync;

/// What to check.
pub struct CheckOptions<'a> {
    /// PHYSICAL_ONLY: page audits, record framing and allocation; no column, key or
    /// B-tree structure checks.
    pub physical_only: bool,
    /// Workers; 0 means one per CPU.
    pub maxdop: usize,
    /// Run the allocation checks (CHECKDB, not CHECKTABLE).
    pub allocation: bool,
    /// Run the catalog checks.
    pub catalog: bool,
    /// Only these tables (CHECKTABLE); None for all.
    pub objects: Option<Vec<u32>>,
    /// CHECKFILEGROUP: only the tables and indexes of this data space (a table whose heap
    /// or clustered index is in it, with those of its nonclustered indexes also in it: an
    /// index elsewhere, or one here on a table elsewhere, cannot be checked against its
    /// table), and of the allocation findings only those in its files or checked units.
    pub filegroup: Option<u16>,
    /// CHECKTABLE (table, index_id): of the tables' nonclustered indexes, only this one
    /// (its pages and its agreement with the table, whose rows are read for it); the table
    /// itself is always checked. None for all; 0 or 1 for none of them.
    pub index_id: Option<u16>,
    /// Value checks (None: none).
    pub values: Option<&'a ValueCheck>,
    /// How values print in the index row findings (None: as hexadecimal).
    pub value_text: Option<&'a ValueText>,
    /// Index row findings printed per index (the rest are counted, 8986).
    pub detail_limit: usize,
    /// Set to stop the check (attention, KILL): it ends with `StorageError::Cancelled`.
    pub cancel: Option<&'a AtomicBool>,
    /// Called with (pages done, pages in all) as runs complete.
    pub progress: Option<&'a (dyn Fn(u64, u64) + Sync)>,
    /// Trace flag 2549: each data file read as if it were its own drive, every file's
    /// runs from its own sequence (`RunQueue`); else the database is one sequence.
    pub per_file_read_ahead: bool,
}

impl Default for CheckOptions<'_> {
    fn default() -> Self {
        CheckOptions {
            physical_only: false,
            maxdop: 0,
            allocation: true,
            catalog: true,
            objects: None,
            filegroup: None,
            index_id: None,
            values: None,
            value_text: None,
            detail_limit: DEFAULT_DETAIL_LIMIT,
            per_file_read_ahead: false,
            cancel: None,
            progress: None,
        }
    }
}

/// One error found, as SQL Server's message `number` with its arguments in the order of
/// the message's text (object ids, pages as `(file:page)`, numbers as decimal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub number: u32,
    pub args: Vec<String>,
    /// The table the error belongs to (0 for none: allocation pages, the catalog).
    pub object_id: u32,
    pub index_id: i32,
    pub allocation_unit_id: u64,
    /// Counted as an allocation error (else a consistency error).
    pub allocation: bool,
    pub page: Option<PageId>,
    pub slot: Option<u16>,
}

/// Per table: what the check saw and found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectSummary {
    pub object_id: u32,
    pub name: String,
    pub rows: u64,
    pub pages: u64,
    pub allocation_errors: u64,
    pub consistency_errors: u64,
}

/// The result of a check.
#[derive(Debug, Clone, Default)]
pub struct CheckDbReport {
    pub findings: Vec<Finding>,
    /// Every checked table, in catalog order.
    pub objects: Vec<ObjectSummary>,
    pub alloc: Option<CheckAllocReport>,
    pub pages_read: u64,
    pub bytes_read: u64,
    /// Pages the snapshot copied because sessions wrote during the check.
    pub copied_on_write: u64,
    /// Per table: consistency errors found but not printed (past `detail_limit`).
    pub unprinted: Vec<(u32, u64)>,
}

impl CheckDbReport {
    pub fn allocation_errors(&self) -> u64 {
        self.findings
            .iter()
            .filter(|f| f.allocation && counted(f))
            .count() as u64
    }
    pub fn consistency_errors(&self) -> u64 {
        let printed = self.findings.iter().filter(|f| !f.allocation && counted(f));
        printed.count() as u64 + self.unprinted.iter().map(|(_, n)| n).sum::<u64>()
    }
}

/// Who owns pages of a unit, for messages.
#[derive(Clone)]
struct Owner {
    object_id: u32,
    index_id: i32,
    unit: u64,
    table: Option<usize>,
}

impl Owner {
    fn unknown() -> Owner {
        Owner {
            object_id: 0,
            index_id: -1,
            unit: 0,
            table: None,
        }
    }

    /// "Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls)".
    fn args(&self) -> Vec<String> {
        let (partition, type_desc) = if self.unit == 0 {
            (0, "Unknown")
        } else {
            (self.unit, "In-row data")
        };
        vec![
            self.object_id.to_string(),
            self.index_id.to_string(),
            partition.to_string(),
            self.unit.to_string(),
            type_desc.to_string(),
        ]
    }

    /// A page-level error followed by SQL Server's 8928 ("could not be processed").
    fn unprocessable(
        &self,
        findings: &mut Vec<Finding>,
        number: u32,
        extra: Vec<String>,
        pid: PageId,
    ) {
        findings.push(self.finding(number, extra, Some(pid)));
        findings.push(self.finding(8928, vec![pid.to_string()], Some(pid)));
    }

    fn finding(&self, number: u32, extra: Vec<String>, page: Option<PageId>) -> Finding {
        let mut args = self.args();
        args.extend(extra);
        Finding {
            number,
            args,
            object_id: self.object_id,
            index_id: self.index_id,
            allocation_unit_id: self.unit,
            allocation: false,
            page,
            slot: None,
        }
    }
}

/// The child page id stored as a separator's last column (6 bytes: page, file).
fn page_id_of(b: &[u8]) -> Option<PageId> {
    let b: &[u8; 6] = b.try_into().ok()?;
    Some(PageId::new(
        u16::from_le_bytes([b[4], b[5]]),
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
    ))
}

/// Column `i` of a record's key: the key columns are the record's first columns on an
/// index page (`positions` None), and the clustered key's columns on a leaf.
fn key_column<'v>(
    values: &[Option<&'v [u8]>],
    positions: Option<&[usize]>,
    i: usize,
) -> Option<&'v [u8]> {
    let at = match positions {
        Some(p) => *p.get(i)?,
        None => i,
    };
    values.get(at).copied().flatten()
}

/// Compares two records' keys column by column, as `key::compare_keys` does.
fn compare_records(
    types: &[u8],
    positions: Option<&[usize]>,
    a: &[Option<&[u8]>],
    b: &[Option<&[u8]>],
) -> std::cmp::Ordering {
    for (i, &t) in types.iter().enumerate() {
        match key::compare(t, key_column(a, positions, i), key_column(b, positions, i)) {
            std::cmp::Ordering::Equal => {}
            o => return o,
        }
    }
    std::cmp::Ordering::Equal
}

/// The next column of an encoded key, and the rest.
fn next_column(b: &[u8]) -> Option<(Option<&[u8]>, &[u8])> {
    let len = u16::from_le_bytes([*b.first()?, *b.get(1)?]);
    if len == u16::MAX {
        return Some((None, &b[2..]));
    }
    let end = 2 + len as usize;
    Some((Some(b.get(2..end)?), &b[end..]))
}

/// Compares two encoded keys column by column, as `key::compare_keys` does.
fn compare_encoded(types: &[u8], mut a: &[u8], mut b: &[u8]) -> std::cmp::Ordering {
    for &t in types {
        let (Some((x, ra)), Some((y, rb))) = (next_column(a), next_column(b)) else {
            break;
        };
        match key::compare(t, x, y) {
            std::cmp::Ordering::Equal => {}
            o => return o,
        }
        a = ra;
        b = rb;
    }
    std::cmp::Ordering::Equal
}

/// Where a key lies in its `TreeFacts::keys` arena.
#[derive(Debug, Clone, Copy)]
struct KeyRef {
    start: usize,
    len: u32,
}

/// What the cross-page checks need of one B-tree page.
struct TreePage {
    pid: PageId,
    level: u8,
    prev: PageId,
    next: PageId,
    /// Keys of the first and last record that bound the page's range: for a leaf its first
    /// and last records, for an index page its second (the first counts as minus infinity)
    /// and last.
    low: Option<KeyRef>,
    high: Option<KeyRef>,
    /// Index pages: their (separator key, child) pairs in slot order, a range of
    /// `TreeFacts::children`; the first key is unused.
    children: std::ops::Range<usize>,
    /// The page could not be read as records: structure checks skip its contents.
    damaged: bool,
}

/// The B-tree facts of one allocation unit, kept flat: pages in a vector (sorted by page
/// id before the walk, then found by binary search), keys encoded in one byte arena (per
/// column a u16 length, 0xFFFF for NULL, and the bytes). A few dozen bytes per page and no
/// allocation per page.
#[derive(Default)]
struct TreeFacts {
    pages: Vec<TreePage>,
    children: Vec<(KeyRef, PageId)>,
    keys: Vec<u8>,
}

impl TreeFacts {
    /// A page with its links and level from its header; keys and children come after.
    fn push_page(&mut self, pid: PageId, h: &extentdb_format::PageHeader, damaged: bool) {
        let at = self.children.len();
        self.pages.push(TreePage {
            pid,
            level: h.level,
            prev: h.prev_page,
            next: h.next_page,
            low: None,
            high: None,
            children: at..at,
            damaged,
        });
    }

    /// Encodes a key's columns into the arena.
    fn push_key<'v>(&mut self, columns: impl Iterator<Item = Option<&'v [u8]>>) -> KeyRef {
        let start = self.keys.len();
        for v in columns {
            match v {
                None => self.keys.extend_from_slice(&u16::MAX.to_le_bytes()),
                Some(b) => {
                    self.keys.extend_from_slice(&(b.len() as u16).to_le_bytes());
                    self.keys.extend_from_slice(b);
                }
            }
        }
        KeyRef {
            start,
            len: (self.keys.len() - start) as u32,
        }
    }

    fn key(&self, k: KeyRef) -> &[u8] {
        &self.keys[k.start..k.start + k.len as usize]
    }

    /// Takes another worker's facts of the same unit.
    fn append(&mut self, o: TreeFacts) {
        let (keys, children) = (self.keys.len(), self.children.len());
        let shift = |k: KeyRef| KeyRef {
            start: k.start + keys,
            len: k.len,
        };
        self.keys.extend_from_slice(&o.keys);
        self.children
            .extend(o.children.into_iter().map(|(k, c)| (shift(k), c)));
        self.pages.extend(o.pages.into_iter().map(|mut p| {
            p.low = p.low.map(shift);
            p.high = p.high.map(shift);
            p.children = p.children.start + children..p.children.end + children;
            p
        }));
    }

    /// Sorts the pages by page id, for `find`. Each worker's pages come in ascending
    /// order (runs are taken in (file, extent) order), so the stable sort, which finds
    /// ascending runs, only merges those few.
    fn sort(&mut self) {
        self.pages.sort_by_key(|p| (p.pid.file.0, p.pid.page.0));
    }

    /// The index of a page in `pages` (after `sort`).
    fn find(&self, pid: PageId) -> Option<usize> {
        self.pages
            .binary_search_by_key(&(pid.file.0, pid.page.0), |p| (p.pid.file.0, p.pid.page.0))
            .ok()
    }
}

/// What the workers gather.
#[derive(Default)]
struct Gathered {
    findings: Vec<Finding>,
    tree_pages: HashMap<u64, TreeFacts>,
    /// Per unit: pages holding its records, and live rows.
    pages: HashMap<u64, u64>,
    rows: HashMap<u64, u64>,
    /// Per nonclustered index's unit: the rows its table's rows project to, and the live
    /// rows it holds (step 5).
    index_rows: HashMap<u64, IndexRows>,
    pages_read: u64,
    /// The run being scanned: its unit's data pages and live rows so far.
    run_pages: u64,
    run_rows: u64,
    /// Buffers reused from page to page (no allocation per page or record).
    scratch: Scratch,
    /// The PFS page last read (None: it failed its audit), for zero pages' allocated bits.
    pfs: Option<(PageId, Option<Page>)>,
}

/// A worker's per-page buffers. Those holding slices of a page are kept empty between
/// pages, with a lifetime that is re-chosen for each page (`recycle`).
#[derive(Default)]
struct Scratch {
    /// Page records: (slot, offset, length) as placed, then sorted by offset.
    placed: Vec<(u16, usize, usize)>,
    by_offset: Vec<(u16, usize, usize)>,
    records: Vec<(u16, &'static [u8])>,
    /// Every decoded record's values in a row, and per record (slot, its values, live).
    values: Vec<Option<&'static [u8]>>,
    decoded: Vec<(u16, std::ops::Range<usize>, bool)>,
}

/// Empties a buffer and gives it back for elements of another lifetime, keeping its
/// allocation (an in-place collect: the element types have one layout).
fn recycle<T, U>(mut v: Vec<T>) -> Vec<U> {
    v.clear();
    v.into_iter().map(|_| unreachable!("emptied")).collect()
}

impl Gathered {
    fn tree_facts(&mut self, unit: u64) -> &mut TreeFacts {
        self.tree_pages.entry(unit).or_default()
    }

    fn merge(&mut self, o: Gathered) {
        self.findings.extend(o.findings);
        // A unit one worker saw whole is moved, not copied; else the smaller joins the
        // larger (copying megabytes of facts costs the serial tail a page clear per 4 KB).
        for (u, m) in o.tree_pages {
            match self.tree_pages.entry(u) {
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(m);
                }
                std::collections::hash_map::Entry::Occupied(mut e) => {
                    let mine = e.get_mut();
                    if mine.pages.len() < m.pages.len() {
                        let smaller = std::mem::replace(mine, m);
                        mine.append(smaller);
                    } else {
                        mine.append(m);
                    }
                }
            }
        }
        for (u, n) in o.pages {
            *self.pages.entry(u).or_default() += n;
        }
        for (u, n) in o.rows {
            *self.rows.entry(u).or_default() += n;
        }
        for (u, r) in o.index_rows {
            self.index_rows.entry(u).or_default().add(&r);
        }
        self.pages_read += o.pages_read;
    }
}

/// Hands out the indexes of the runs (sorted by file and extent), each exactly once
/// (invariant 1): from one sequence, the database read as one stream; or, with trace flag
/// 2549, from one sequence per file, each worker starting in its own file (worker `w` in
/// the `w % files`-th) and going on to the next file once its own is done, so every
/// file is read at once, as if each were its own drive.
struct RunQueue {
    /// Each sequence's end (exclusive) in the runs, and its next run.
    sequences: Vec<(usize, AtomicUsize)>,
}

impl RunQueue {
    fn new(runs: &[Run], per_file: bool) -> RunQueue {
        let mut sequences = Vec::new();
        let mut start = 0;
        for (i, r) in runs.iter().enumerate() {
            let last_of_file = runs.get(i + 1).is_none_or(|n| n.file != r.file);
            if per_file && last_of_file {
                sequences.push((i + 1, AtomicUsize::new(start)));
                start = i + 1;
            }
        }
        if !per_file || sequences.is_empty() {
            sequences = vec![(runs.len(), AtomicUsize::new(0))];
        }
        RunQueue { sequences }
    }

    /// The next run for `worker`, None when every run was handed out.
    fn take(&self, worker: usize) -> Option<usize> {
        let n = self.sequences.len();
        (0..n).find_map(|k| {
            let (end, next) = &self.sequences[(worker + k) % n];
            // Once past its end a sequence stays there: each index below it went once.
            let i = next.fetch_add(1, Ordering::Relaxed);
            (i < *end).then_some(i)
        })
    }
}

/// A run of contiguous extents of one owner in one file.
#[derive(Debug, Clone, Copy)]
struct Run {
    file: u16,
    first_extent: u32,
    extents: u32,
    unit: u64,
}

/// Per-table facts the page checks need.
struct TableInfo<'a> {
    entry: &'a TableEntry,
    owner: Owner,
    layouts: Vec<ColumnLayout>,
    keys: Option<KeyInfo>,
    /// A table's nonclustered indexes' entries, each row's projections go to (step 5).
    indexes: Vec<&'a TableEntry>,
    /// Its PERSISTED computed columns: (position in the record, column id), each computed
    /// again from every live row (step 3, 2537).
    persisted: Vec<(usize, u16)>,
}

struct Context<'a> {
    src: &'a CheckSource,
    opts: &'a CheckOptions<'a>,
    /// Unit -> table index, for the checked tables and every other live unit.
    tables: Vec<TableInfo<'a>>,
    by_unit: HashMap<u64, usize>,
    live_units: HashSet<u64>,
    checked_units: HashSet<u64>,
}

impl Context<'_> {
    fn owner(&self, unit: u64) -> Owner {
        match self.by_unit.get(&unit) {
            Some(&i) => self.tables[i].owner.clone(),
            None if unit == CATALOG_ALLOCATION_UNIT => Owner {
                object_id: 0,
                index_id: 0,
                unit,
                table: None,
            },
            None => Owner::unknown(),
        }
    }
}

/// Runs the checks `opts` asks for on `src`.
pub fn check_database(
    src: &CheckSource,
    opts: &CheckOptions<'_>,
) -> Result<CheckDbReport, StorageError> {
    let mut report = CheckDbReport::default();
    let mut tables = Vec::new();
    let mut by_unit = HashMap::new();
    for (i, t) in src.catalog.tables.iter().enumerate() {
        // An index's findings are its table's, under its own index id.
        let (object_id, index_id) = match &t.index_of {
            Some(ix) => (ix.table_object_id, ix.index_id as i32),
            // A clustered rebuild's new tree is its table's index 1 (index.rs invariant 6).
            None => (t.rebuilt_table().unwrap_or(t.object_id), t.index_id as i32),
        };
        let owner = Owner {
            object_id,
            index_id,
            unit: t.allocation_unit_id,
            table: Some(i),
        };
        by_unit.insert(t.allocation_unit_id, tables.len());
        tables.push(TableInfo {
            entry: t,
            owner,
            layouts: layouts(t),
            keys: (t.index_id == 1).then(|| KeyInfo::of(t)),
            indexes: indexes_of(&src.catalog.tables, t),
            persisted: persisted_computed(t),
        });
    }
    let checked = |t: &TableEntry| {
        let id = t
            .index_of
            .as_ref()
            .map_or(t.rebuilt_table().unwrap_or(t.object_id), |i| {
                i.table_object_id
            });
        let index_wanted = match (&t.index_of, opts.index_id) {
            (Some(ix), Some(want)) => ix.index_id == want,
            _ => true,
        };
        index_wanted
            && opts.objects.as_ref().is_none_or(|o| o.contains(&id))
            && opts
                .filegroup
                .is_none_or(|ds| in_filegroup(&src.catalog.tables, t, ds))
    };
    let checked_units: HashSet<u64> = src
        .catalog
        .tables
        .iter()
        .filter(|t| checked(t))
        .map(|t| t.allocation_unit_id)
        .collect();
    let live_units: HashSet<u64> = src
        .catalog
        .allocation_units
        .iter()
        .map(|a| a.allocation_unit_id)
        .chain([CATALOG_ALLOCATION_UNIT])
        .collect();
    let ctx = Context {
        src,
        opts,
        tables,
        by_unit,
        live_units,
        checked_units,
    };

    if opts.catalog {
        report.findings.extend(check_catalog(src));
    }
    // The allocation pass also says who owns each extent, which the page scan needs; a
    // check that scans no table and skips allocation (CHECKCATALOG) needs neither.
    let scans = opts.objects.as_ref().is_none_or(|o| !o.is_empty());
    let mut owners = Default::default();
    // Units whose IAM chain broke: their extents are not known, their tables not checked.
    let mut unchecked: HashSet<u64> = HashSet::new();
    if opts.allocation || scans {
        let (alloc, o) = check_allocation(src)?;
        if opts.allocation {
            let findings = alloc_findings(&ctx, &alloc);
            report.findings.extend(match opts.filegroup {
                Some(ds) => filegroup_findings(&ctx, findings, ds),
                None => findings,
            });
        }
        unchecked = alloc
            .units
            .iter()
            .filter(|u| u.chain_damaged)
            .map(|u| u.allocation_unit_id)
            .collect();
        report.alloc = Some(alloc);
        owners = o;
    }
    report.findings.extend(unchecked_tables(&ctx, &unchecked));

    // Runs over the owned extents of the checked units (and the catalog's, for CHECKDB).
    let mut runs: Vec<Run> = Vec::new();
    for (&(file, extent), &unit) in owners.iter() {
        let wanted = (ctx.checked_units.contains(&unit) && !unchecked.contains(&unit))
            || (opts.objects.is_none() && unit == CATALOG_ALLOCATION_UNIT);
        let in_file = src
            .files
            .get(&file)
            .is_some_and(|f| (extent + 1) * PAGES_PER_EXTENT <= f.size_pages);
        if !wanted || !in_file {
            continue;
        }
        match runs.last_mut() {
            Some(r)
                if r.file == file
                    && r.unit == unit
                    && r.first_extent + r.extents == extent
                    && r.extents < RUN_EXTENTS =>
            {
                r.extents += 1
            }
            _ => runs.push(Run {
                file,
                first_extent: extent,
                extents: 1,
                unit,
            }),
        }
    }
    let total_pages: u64 = runs
        .iter()
        .map(|r| (r.extents * PAGES_PER_EXTENT) as u64)
        .sum();
    let workers = match opts.maxdop {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .clamp(1, runs.len().max(1));
    for r in runs.iter().take(READ_AHEAD_RUNS) {
        src.will_need(
            r.file,
            r.first_extent * PAGES_PER_EXTENT,
            r.extents * PAGES_PER_EXTENT,
        );
    }
    let next = RunQueue::new(&runs, opts.per_file_read_ahead);
    let done = AtomicU64::new(0);
    let failure: Mutex<Option<StorageError>> = Mutex::new(None);
    let gathered = Mutex::new(Gathered::default());
    // Each checking worker has a read-ahead thread that reads the runs it will check next
    // into spare buffers (as SQL Server's read-ahead reads asynchronously beside its DOP
    // workers): reading one run overlaps checking the previous one.
    std::thread::scope(|s| {
        for worker in 0..workers {
            let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<ReadRun>(READ_BUFFERS);
            let (free_tx, free_rx) = std::sync::mpsc::channel::<Vec<Page>>();
            for _ in 0..READ_BUFFERS {
                free_tx.send(Vec::new()).expect("receiver alive");
            }
            let (next, failure, ctx, runs) = (&next, &failure, &ctx, &runs);
            let (done, gathered) = (&done, &gathered);
            s.spawn(move || {
                // While runs come whole from the page cache, read-ahead hints only cost
                // (the kernel walks the cached pages); they resume at the first run that
                // had to wait for the device.
                let mut warm = false;
                let hint = |ahead: &[Run]| {
                    for a in ahead {
                        src.will_need(
                            a.file,
                            a.first_extent * PAGES_PER_EXTENT,
                            a.extents * PAGES_PER_EXTENT,
                        );
                    }
                };
                loop {
                    if failure.lock().unwrap().is_some()
                        || opts.cancel.is_some_and(|c| c.load(Ordering::Relaxed))
                    {
                        break;
                    }
                    let Some(i) = next.take(worker) else { break };
                    let run = &runs[i];
                    let Ok(mut pages) = free_rx.recv() else { break };
                    if !warm {
                        hint(
                            runs.get(i + READ_AHEAD_RUNS..=i + READ_AHEAD_RUNS)
                                .unwrap_or(&[]),
                        );
                    }
                    let mut findings = Vec::new();
                    let owner = ctx.owner(run.unit);
                    let result = read_run(
                        ctx,
                        &owner,
                        run.file,
                        run.first_extent * PAGES_PER_EXTENT,
                        run.extents * PAGES_PER_EXTENT,
                        &mut pages,
                        &mut findings,
                    );
                    if let Ok(cached) = result {
                        if warm && !cached {
                            // The cache ran out: hint the whole window again.
                            let end = (i + 1 + READ_AHEAD_RUNS).min(runs.len());
                            hint(runs.get(i + 1..end).unwrap_or(&[]));
                        }
                        warm = cached;
                    }
                    let read = ReadRun {
                        run: i,
                        pages,
                        findings,
                        result: result.map(|_| ()),
                    };
                    if full_tx.send(read).is_err() {
                        break;
                    }
                }
            });
            s.spawn(move || {
                let mut mine = Gathered::default();
                for read in full_rx {
                    if opts.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                        break;
                    }
                    if let Err(e) = read.result {
                        failure.lock().unwrap().get_or_insert(e);
                        break;
                    }
                    let run = &runs[read.run];
                    mine.findings.extend(read.findings);
                    check_run(ctx, run, &read.pages, &mut mine);
                    let _ = free_tx.send(read.pages);
                    let pages = (run.extents * PAGES_PER_EXTENT) as u64;
                    let d = done.fetch_add(pages, Ordering::Relaxed) + pages;
                    if let Some(p) = opts.progress {
                        p(d, total_pages);
                    }
                }
                gathered.lock().unwrap().merge(mine);
            });
        }
    });
    if let Some(e) = failure.into_inner().unwrap() {
        return Err(e);
    }
    if opts.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
        return Err(StorageError::Cancelled);
    }
    let mut g = gathered.into_inner().unwrap();
    report.pages_read = g.pages_read;
    report.bytes_read = g.pages_read * PAGE_SIZE as u64;

    // Cross-page structure, per checked table.
    for t in &ctx.tables {
        if !ctx.checked_units.contains(&t.entry.allocation_unit_id) {
            continue;
        }
        if let (Some(k), false) = (&t.keys, opts.physical_only) {
            let mut facts = g
                .tree_pages
                .remove(&t.entry.allocation_unit_id)
                .unwrap_or_default();
            facts.sort();
            check_tree(t, k, &facts, workers, &mut g.findings);
        }
    }
    report.findings.extend(g.findings);
    report.findings.sort_by_key(|f| {
        (
            f.allocation_unit_id,
            f.page.map(|p| (p.file.0, p.page.0)),
            f.slot,
        )
    });
    // After the sort: each 8951 / 8952 stays before its detail.
    if !opts.physical_only {
        let (found, unprinted) = index_rows::index_findings(&ctx, &runs, &g.index_rows);
        report.findings.extend(found);
        report.unprinted = unprinted;
    }
    for t in &ctx.tables {
        let au = t.entry.allocation_unit_id;
        let a_table = t.entry.index_of.is_none() && t.entry.rebuilt_table().is_none();
        if !ctx.checked_units.contains(&au) || !a_table {
            continue;
        }
        let mine = report
            .findings
            .iter()
            .filter(|f| f.object_id == t.entry.object_id);
        let (mut a, mut c) = (0, 0);
        for f in mine.filter(|f| counted(f)) {
            if f.allocation {
                a += 1
            } else {
                c += 1
            }
        }
        report.objects.push(ObjectSummary {
            object_id: t.entry.object_id,
            name: t.entry.name.clone(),
            rows: g.rows.get(&au).copied().unwrap_or(0),
            pages: g.pages.get(&au).copied().unwrap_or(0),
            allocation_errors: a,
            consistency_errors: c + report
                .unprinted
                .iter()
                .filter(|(o, _)| *o == t.entry.object_id)
                .map(|(_, n)| n)
                .sum::<u64>(),
        });
    }
    report.copied_on_write = src.copied_on_write();
    Ok(report)
}

/// SQL Server's 7965 for each checked table whose IAM chain broke (`unchecked`): its pages
/// cannot be found, so none of them is checked (a consistency error of the table).
fn unchecked_tables(ctx: &Context<'_>, unchecked: &HashSet<u64>) -> Vec<Finding> {
    ctx.tables
        .iter()
        .filter(|t| {
            let au = t.entry.allocation_unit_id;
            ctx.checked_units.contains(&au) && unchecked.contains(&au)
        })
        .map(|t| t.owner.finding(7965, Vec::new(), None))
        .collect()
}

/// The allocation report as findings, attributed to their tables where an IAM names one.
fn alloc_findings(ctx: &Context<'_>, alloc: &CheckAllocReport) -> Vec<Finding> {
    let db_id = ctx.src.catalog.database_id.to_string();
    let plain = |number: u32, args: Vec<String>, page: PageId| Finding {
        number,
        args,
        object_id: 0,
        index_id: 0,
        allocation_unit_id: 0,
        allocation: true,
        page: Some(page),
        slot: None,
    };
    let mut out = Vec::new();
    for e in &alloc.errors {
        match e {
            AllocError::MultipleClaims { extent, claimants } => {
                out.push(plain(
                    8904,
                    vec![extent.to_string(), db_id.clone()],
                    *extent,
                ));
                for c in claimants {
                    let who = match c {
                        Claimant::Gam => "GAM".to_string(),
                        Claimant::Sgam => "SGAM".to_string(),
                        Claimant::System => "system".to_string(),
                        Claimant::Unit(au) => {
                            let o = ctx.owner(*au);
                            format!(
                                "Object ID {}, index ID {}, partition ID {}, alloc unit ID {} (type In-row data)",
                                o.object_id, o.index_id, au, au
                            )
                        }
                    };
                    let mut f = plain(8913, vec![extent.to_string(), who], *extent);
                    if let Claimant::Unit(au) = c {
                        let o = ctx.owner(*au);
                        f.object_id = o.object_id;
                        f.allocation_unit_id = *au;
                    }
                    out.push(f);
                }
            }
            AllocError::Unclaimed { extent } => out.push(plain(
                8905,
                vec![extent.to_string(), db_id.clone()],
                *extent,
            )),
            AllocError::GamAndSgam { extent, gam, sgam } => out.push(plain(
                8903,
                vec![
                    extent.to_string(),
                    db_id.clone(),
                    gam.to_string(),
                    sgam.to_string(),
                ],
                *extent,
            )),
            AllocError::BadAllocationPage {
                page,
                kind,
                page_type,
            } => out.push(plain(
                8946,
                vec![page.to_string(), kind.to_string(), page_type.to_string()],
                *page,
            )),
            AllocError::PageAudit {
                page,
                reason: _,
                checksum,
            } => {
                let code = if *checksum {
                    AUDIT_CHECKSUM
                } else {
                    AUDIT_PAGE_ID
                };
                let mut f = Owner::unknown().finding(8939, audit_args(*page, code), Some(*page));
                f.allocation = true;
                out.push(f);
                out.push(plain(
                    8998,
                    vec![db_id.clone(), page.to_string(), page.to_string()],
                    *page,
                ));
            }
            AllocError::WrongPageId { page, actual } => {
                let mut f = Owner::unknown().finding(
                    8909,
                    vec![page.to_string(), actual.to_string()],
                    Some(*page),
                );
                f.allocation = true;
                out.push(f);
            }
            AllocError::PfsWrongType {
                page,
                pfs,
                actual,
                expected,
            } => out.push(plain(
                8948,
                vec![
                    page.to_string(),
                    pfs.to_string(),
                    format!("{actual:x}"),
                    format!("{expected:x}"),
                ],
                *page,
            )),
            AllocError::Unreadable { page, reason: _ } => {
                let mut f =
                    Owner::unknown().finding(8939, audit_args(*page, AUDIT_IO), Some(*page));
                f.allocation = true;
                out.push(f);
            }
            AllocError::IamNextNotDetected {
                page,
                from,
                allocation_unit_id,
            }
            | AllocError::IamPrevNotDetected {
                page,
                from,
                allocation_unit_id,
            } => {
                let number = if matches!(e, AllocError::IamNextNotDetected { .. }) {
                    2575
                } else {
                    2576
                };
                let o = ctx.owner(*allocation_unit_id);
                let mut args = vec![page.to_string(), from.to_string()];
                args.extend(o.args());
                out.push(Finding {
                    number,
                    args,
                    object_id: o.object_id,
                    index_id: o.index_id,
                    allocation_unit_id: *allocation_unit_id,
                    allocation: true,
                    page: Some(*from),
                    slot: None,
                });
            }
            AllocError::IamSequence {
                allocation_unit_id,
                from,
                from_sequence,
                page,
                sequence,
            } => {
                let o = ctx.owner(*allocation_unit_id);
                let mut f = o.finding(
                    2577,
                    vec![
                        from.to_string(),
                        from_sequence.to_string(),
                        page.to_string(),
                        sequence.to_string(),
                    ],
                    Some(*page),
                );
                f.allocation = true;
                out.push(f);
            }
            AllocError::BeyondFile {
                extent,
                allocation_unit_id,
            } => {
                let o = ctx.owner(*allocation_unit_id);
                let mut f = o.finding(
                    8939,
                    vec![
                        extent.to_string(),
                        "extent mapped by the IAM lies inside its file".to_string(),
                        extent.page.0.to_string(),
                        ctx.src
                            .files
                            .get(&extent.file.0)
                            .map_or(0, |f| f.size_pages)
                            .to_string(),
                    ],
                    Some(*extent),
                );
                f.allocation = true;
                out.push(f);
            }
        }
    }
    out
}

/// Error codes SQL Server's failed page audit prints: -1 an I/O error, -4 a bad checksum,
/// -6 a page naming another page.
const AUDIT_IO: i64 = -1;
const AUDIT_CHECKSUM: i64 = -4;
const AUDIT_PAGE_ID: i64 = -6;

/// The arguments after the owner of SQL Server's 8939 for a page whose read failed its
/// audit: the page, the test, the buffer's status bits and the error `code`.
fn audit_args(pid: PageId, code: i64) -> Vec<String> {
    vec![
        pid.to_string(),
        "IS_OFF (BUF_IOERR, pBUF->bstat)".to_string(),
        "133129".to_string(),
        code.to_string(),
    ]
}

/// Checks the pages of one run, read by `read_run`.
fn check_run(ctx: &Context<'_>, run: &Run, pages: &[Page], out: &mut Gathered) {
    let first = run.first_extent * PAGES_PER_EXTENT;
    let count = run.extents * PAGES_PER_EXTENT;
    let owner = ctx.owner(run.unit);
    out.run_pages = 0;
    out.run_rows = 0;
    for i in 0..count {
        let pid = PageId::new(run.file, first + i);
        let page = pages[i as usize].view();
        out.pages_read += 1;
        // A catalog page the PFS marks free holds nothing of the catalog: a save whose sync
        // failed may have left it torn before the open's sweep freed it
        // (`sweep_catalog_pages`), and no later save reads it before writing it whole.
        if run.unit == CATALOG_ALLOCATION_UNIT && !pfs_allocated(ctx, pid, out) {
            continue;
        }
        if page.is_unformatted() {
            // The PFS says whether the page is in use; a page in use reads as naming page
            // (0:0) in SQL Server.
            if run.unit != CATALOG_ALLOCATION_UNIT && pfs_allocated(ctx, pid, out) {
                let args = vec![pid.to_string(), PageId::NULL.to_string()];
                owner.unprocessable(&mut out.findings, 8909, args, pid);
            }
            continue;
        }
        check_page(ctx, &owner, pid, page, out);
    }
    if out.run_pages > 0 {
        *out.pages.entry(run.unit).or_default() += out.run_pages;
        *out.rows.entry(run.unit).or_default() += out.run_rows;
    }
}

/// True when the PFS marks `pid` allocated. The worker keeps the PFS page it read last (a
/// run lies inside one PFS interval: the extent holding a PFS page is never owned). A PFS
/// page failing its audit marks nothing (CHECKALLOC judges the page itself).
fn pfs_allocated(ctx: &Context<'_>, pid: PageId, out: &mut Gathered) -> bool {
    let at = PageId::new(pid.file.0, layout::pfs_page_for(pid.page).0);
    if out.pfs.as_ref().map(|(p, _)| *p) != Some(at) {
        let page = ctx
            .src
            .read_page(at)
            .ok()
            .filter(|p| p.is_unformatted() || matches!(p.verify(at), Ok(PageType::Pfs)));
        out.pfs = Some((at, page));
    }
    match &out.pfs {
        Some((_, Some(p))) => pfs::get(p, at.page, pid.page) & pfs::ALLOCATED != 0,
        _ => false,
    }
}

/// Reads a run into `pages`, reporting pages that cannot be read (8939 with -1, as SQL
/// Server's CHECKDB reports a failed read) and leaving them zero.
fn read_run(
    ctx: &Context<'_>,
    owner: &Owner,
    file: u16,
    first: u32,
    count: u32,
    pages: &mut Vec<Page>,
    findings: &mut Vec<Finding>,
) -> Result<bool, StorageError> {
    // The buffer only grows: shrinking it would free pages that the next, longer run
    // allocates again, and fresh memory costs the kernel a page clear on first touch (a
    // quarter of a warm check's time when runs alternated in length).
    if pages.len() < count as usize {
        pages.resize_with(count as usize, Page::zeroed);
    }
    let pages = &mut pages[..count as usize];
    match ctx.src.read_pages(file, first, pages) {
        Ok(cached) => return Ok(cached),
        Err(StorageError::Io(_)) => {
            // Find the failing pages one by one.
            for i in 0..count {
                let pid = PageId::new(file, first + i);
                let one = &mut pages[i as usize..i as usize + 1];
                match ctx.src.read_pages(file, first + i, one) {
                    Ok(_) => {}
                    Err(StorageError::Io(_)) => {
                        // Reported as SQL Server's CHECKDB does a failed read (-1: I/O
                        // error); the zeros left in the buffer are then skipped.
                        one[0].bytes_mut().fill(0);
                        owner.unprocessable(findings, 8939, audit_args(pid, AUDIT_IO), pid);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Err(e) => return Err(e),
    }
    Ok(false)
}

/// The audit and record checks of one page of an owned extent (module docs, step 3).
fn check_page(
    ctx: &Context<'_>,
    owner: &Owner,
    pid: PageId,
    page: PageView<'_>,
    out: &mut Gathered,
) {
    if page.is_unformatted() {
        return;
    }
    let raw = page.raw_header();
    if raw.checksum != page.compute_checksum() {
        owner.unprocessable(
            &mut out.findings,
            8939,
            audit_args(pid, AUDIT_CHECKSUM),
            pid,
        );
        return;
    }
    if raw.this_page != pid {
        let args = vec![pid.to_string(), raw.this_page.to_string()];
        owner.unprocessable(&mut out.findings, 8909, args, pid);
        return;
    }
    let header = match page.header() {
        Ok(h) => h,
        Err(_) => {
            let args = vec![
                pid.to_string(),
                "m_headerVersion == HEADER_7_0 && m_type is valid".to_string(),
                raw.version.to_string(),
                raw.page_type.to_string(),
            ];
            owner.unprocessable(&mut out.findings, 8939, args, pid);
            return;
        }
    };
    if owner.unit == CATALOG_ALLOCATION_UNIT {
        // Catalog and IAM pages have their own formats, checked as the catalog loads.
        return;
    }
    if header.allocation_unit_id != owner.unit {
        let other = header.allocation_unit_id;
        if other != 0 && other != owner.unit && ctx.live_units.contains(&other) {
            let o = ctx.owner(other);
            let mut args = vec![pid.to_string()];
            args.extend(o.args());
            out.findings.push(Finding {
                number: 2534,
                args,
                object_id: owner.object_id,
                index_id: owner.index_id,
                allocation_unit_id: owner.unit,
                allocation: false,
                page: Some(pid),
                slot: None,
            });
        }
        // Otherwise a stale page of a unit that no longer exists, or one a move left.
        return;
    }
    let Some(ti) = owner.table.map(|i| &ctx.tables[i]) else {
        return;
    };
    let clustered = ti.entry.index_id == 1;
    let type_ok = match header.page_type {
        PageType::Data => header.level == 0,
        PageType::Index => clustered && header.level > 0,
        _ => false,
    };
    if !type_ok || header.index_id as u8 != ti.entry.index_id {
        let args = vec![
            pid.to_string(),
            "m_type and m_level match the index".to_string(),
            (header.page_type as u8).to_string(),
            header.level.to_string(),
        ];
        owner.unprocessable(&mut out.findings, 8939, args, pid);
        return;
    }
    out.run_pages += 1;
    let mut records = recycle(std::mem::take(&mut out.scratch.records));
    let framed = page_records(owner, pid, page, &header, &mut records, out);
    if !framed && clustered {
        out.tree_facts(owner.unit).push_page(pid, &header, true);
    }
    if framed {
        check_records(ctx, owner, ti, pid, &header, &records, out);
    }
    out.scratch.records = recycle(records);
}

/// The record checks of a page whose records are framed (module docs, step 3): live rows,
/// and without PHYSICAL_ONLY the values, keys and B-tree facts.
fn check_records(
    ctx: &Context<'_>,
    owner: &Owner,
    ti: &TableInfo<'_>,
    pid: PageId,
    header: &extentdb_format::PageHeader,
    records: &[(u16, &[u8])],
    out: &mut Gathered,
) {
    let live = records
        .iter()
        .filter(|(_, r)| !record::is_ghost(r) && header.page_type == PageType::Data)
        .count() as u64;
    out.run_rows += live;
    if ctx.opts.physical_only {
        return;
    }
    if header.page_type == PageType::Data {
        index_facts(ti, pid, records, out);
    }
    // Records against the table's columns, values against their types.
    let index_page = header.page_type == PageType::Index;
    let layouts = if index_page {
        &ti.keys
            .as_ref()
            .expect("index pages only in clustered tables")
            .key_layouts
    } else {
        &ti.layouts
    };
    // Each record decoded once: its values serve the value checks and the keys.
    let mut values = recycle(std::mem::take(&mut out.scratch.values));
    let mut decoded = std::mem::take(&mut out.scratch.decoded);
    decoded.clear();
    let mut decoded_ok = true;
    for (slot, rec) in records {
        let start = values.len();
        match record::decode_into(layouts, rec, &mut values) {
            Ok(()) => {
                if !index_page {
                    if let Some(check) = ctx.opts.values {
                        check_values(owner, ti, pid, *slot, &values[start..], check, out);
                    }
                    if !ti.persisted.is_empty() && !record::is_ghost(rec) {
                        check_computed(owner, ti, (pid, *slot), rec, &values[start..], out);
                    }
                }
                decoded.push((*slot, start..values.len(), !record::is_ghost(rec)));
            }
            Err(e) => {
                values.truncate(start);
                decoded_ok = false;
                let mut f = owner.finding(
                    8944,
                    vec![
                        pid.to_string(),
                        slot.to_string(),
                        format!("record matches the table's columns: {e}"),
                        rec.len().to_string(),
                        layouts.len().to_string(),
                    ],
                    Some(pid),
                );
                f.slot = Some(*slot);
                out.findings.push(f);
            }
        }
    }
    if let Some(keys) = &ti.keys {
        tree_facts(owner, keys, pid, header, decoded_ok, &values, &decoded, out);
    }
    out.scratch.values = recycle(values);
    out.scratch.decoded = decoded;
}

/// Key order inside a B-tree page (2511, 2512), and the page's facts for the tree walk.
#[allow(clippy::too_many_arguments)]
fn tree_facts(
    owner: &Owner,
    keys: &KeyInfo,
    pid: PageId,
    header: &extentdb_format::PageHeader,
    decoded_ok: bool,
    values: &[Option<&[u8]>],
    decoded: &[(u16, std::ops::Range<usize>, bool)],
    out: &mut Gathered,
) {
    let index_page = header.page_type == PageType::Index;
    let facts = out.tree_pages.entry(owner.unit).or_default();
    facts.push_page(pid, header, !decoded_ok);
    if !decoded_ok {
        return;
    }
    // Keys in slot order; on a leaf at most one live record per key. Keys are compared
    // borrowed from the page; only the bounds and separators are copied to the facts.
    let positions = (!index_page).then_some(keys.positions.as_slice());
    let ncols = keys.types.len();
    let mut prev: Option<usize> = None;
    let mut first: Option<usize> = None;
    for (i, (slot, range, live)) in decoded.iter().enumerate() {
        let record = &values[range.clone()];
        if index_page {
            let Some(child) = record.last().copied().flatten().and_then(page_id_of) else {
                continue;
            };
            let k = facts.push_key(record[..record.len() - 1].iter().copied());
            facts.children.push((k, child));
            if i == 0 {
                // Minus infinity: not compared.
                continue;
            }
        }
        if let Some(p) = prev {
            let (pslot, prange, plive) = &decoded[p];
            let pvalues = &values[prange.clone()];
            match compare_records(&keys.types, positions, pvalues, record) {
                std::cmp::Ordering::Greater => {
                    let mut f = owner.finding(
                        2511,
                        vec![pid.to_string(), pslot.to_string(), slot.to_string()],
                        Some(pid),
                    );
                    f.slot = Some(*slot);
                    out.findings.push(f);
                }
                std::cmp::Ordering::Equal if *plive && *live && !index_page => {
                    let mut f = owner.finding(
                        2512,
                        vec![
                            pid.to_string(),
                            pslot.to_string(),
                            pid.to_string(),
                            slot.to_string(),
                        ],
                        Some(pid),
                    );
                    f.slot = Some(*slot);
                    out.findings.push(f);
                }
                _ => {}
            }
        }
        first.get_or_insert(i);
        prev = Some(i);
    }
    let facts = out.tree_facts(owner.unit);
    let bound = |facts: &mut TreeFacts, i: usize| {
        let values = &values[decoded[i].1.clone()];
        facts.push_key((0..ncols).map(|c| key_column(values, positions, c)))
    };
    let low = first.map(|i| bound(facts, i));
    let high = match (first, prev) {
        (Some(f), Some(l)) if f == l => low,
        (_, Some(l)) => Some(bound(facts, l)),
        _ => None,
    };
    let children_end = facts.children.len();
    let page = facts.pages.last_mut().expect("pushed above");
    page.low = low;
    page.high = high;
    page.children.end = children_end;
}

/// A table's PERSISTED computed columns as `TableInfo::persisted` lists them; none while
/// no evaluator is registered (computed_values.rs: a check run without the SQL layer).
fn persisted_computed(t: &TableEntry) -> Vec<(usize, u16)> {
    if !crate::computed_values::registered() {
        return Vec::new();
    }
    crate::table::stored_columns(t)
        .enumerate()
        .filter(|(_, c)| c.computed.is_some())
        .map(|(at, c)| (at, c.column_id))
        .collect()
}

/// Each PERSISTED computed column of a live data row computed again from the row's other
/// columns and compared with the value stored (SQL Server's record check "valid computed
/// column", 2537): a stored value its definition does not give, or a row it cannot be
/// computed from, is one finding per column. Its two values are the column's id and 0
/// (what SQL Server prints there for this check is not documented).
fn check_computed(
    owner: &Owner,
    ti: &TableInfo<'_>,
    (pid, slot): (PageId, u16),
    rec: &[u8],
    values: &[Option<&[u8]>],
    out: &mut Gathered,
) {
    for &(at, column_id) in &ti.persisted {
        let stored = values.get(at).copied().flatten();
        let now = crate::computed_values::value_of(ti.entry, rec, column_id);
        if now.is_ok_and(|v| v.as_deref() == stored) {
            continue;
        }
        let extra = vec![
            pid.to_string(),
            slot.to_string(),
            "valid computed column".to_string(),
            column_id.to_string(),
            "0".to_string(),
        ];
        let mut f = owner.finding(2537, extra, Some(pid));
        f.slot = Some(slot);
        out.findings.push(f);
    }
}

/// DATA_PURITY: each value of a decoded row against its column's type (2570).
fn check_values(
    owner: &Owner,
    ti: &TableInfo<'_>,
    pid: PageId,
    slot: u16,
    values: &[Option<&[u8]>],
    check: &ValueCheck,
    out: &mut Gathered,
) {
    for (c, v) in crate::table::stored_columns(ti.entry).zip(values) {
        let Some(v) = v else { continue };
        if let Some(type_name) = check(c, v) {
            let mut args = vec![pid.to_string(), slot.to_string()];
            args.extend(owner.args());
            args.push(c.name.clone());
            args.push(type_name);
            out.findings.push(Finding {
                number: 2570,
                args,
                object_id: owner.object_id,
                index_id: owner.index_id,
                allocation_unit_id: owner.unit,
                allocation: false,
                page: Some(pid),
                slot: Some(slot),
            });
        }
    }
}

/// The physical checks of a data or index page's header, slot array and record framing.
/// Puts its records in `records` in slot order (empty slots skipped) and returns true, or
/// returns false when the page cannot be read as records (after recording why).
fn page_records<'p>(
    owner: &Owner,
    pid: PageId,
    page: PageView<'p>,
    h: &extentdb_format::PageHeader,
    records: &mut Vec<(u16, &'p [u8])>,
    out: &mut Gathered,
) -> bool {
    let findings = &mut out.findings;
    let placed = &mut out.scratch.placed;
    let by_offset = &mut out.scratch.by_offset;
    placed.clear();
    by_offset.clear();
    records.clear();
    let b = page.bytes();
    let test_args = |t: &str, a: i64, v: i64| {
        vec![pid.to_string(), t.to_string(), a.to_string(), v.to_string()]
    };
    let slots_bytes = SLOT_SIZE * h.slot_count as usize;
    if slots_bytes > BODY_SIZE {
        let args = test_args(
            "m_slotCnt <= (PAGESIZE - PAGEHEADSIZE) / sizeof (Slot)",
            h.slot_count as i64,
            (BODY_SIZE / SLOT_SIZE) as i64,
        );
        owner.unprocessable(findings, 8939, args, pid);
        return false;
    }
    let free_data = h.free_data as usize;
    if free_data < PAGE_HEADER_SIZE || free_data > PAGE_SIZE - slots_bytes {
        let args = test_args(
            "m_freeData >= PAGEHEADSIZE && m_freeData <= (UINT)PAGESIZE - m_slotCnt * sizeof (Slot)",
            free_data as i64,
            h.slot_count as i64,
        );
        owner.unprocessable(findings, 8939, args, pid);
        return false;
    }
    let mut bad = false;
    for slot in 0..h.slot_count {
        let offset = get_u16(b, PAGE_SIZE - SLOT_SIZE * (slot as usize + 1)) as usize;
        if offset == 0 {
            continue;
        }
        if offset < PAGE_HEADER_SIZE || offset >= free_data {
            let mut f = owner.finding(
                8941,
                vec![
                    pid.to_string(),
                    "sorted [i].offset >= PAGEHEADSIZE && sorted [i].offset < m_freeData"
                        .to_string(),
                    slot.to_string(),
                    format!("{offset:x}"),
                ],
                Some(pid),
            );
            f.slot = Some(slot);
            findings.push(f);
            bad = true;
            continue;
        }
        match record::record_len(&b[offset..free_data]) {
            Ok(len) => placed.push((slot, offset, len)),
            Err(_) => {
                let avail = free_data - offset;
                let claimed = get_u16(b, offset + 2) as i64;
                let mut f = owner.finding(
                    8944,
                    vec![
                        pid.to_string(),
                        slot.to_string(),
                        "ColumnOffsets <= (nextRec - pRec)".to_string(),
                        claimed.to_string(),
                        avail.to_string(),
                    ],
                    Some(pid),
                );
                f.slot = Some(slot);
                findings.push(f);
                bad = true;
            }
        }
    }
    by_offset.extend_from_slice(placed);
    by_offset.sort_unstable_by_key(|&(_, o, _)| o);
    for pair in by_offset.windows(2) {
        let ((_, o1, l1), (s2, o2, _)) = (pair[0], pair[1]);
        if o1 + l1 > o2 {
            let mut f = owner.finding(
                8942,
                vec![
                    pid.to_string(),
                    "sorted[i].offset >= max".to_string(),
                    s2.to_string(),
                    format!("{o2:x}"),
                ],
                Some(pid),
            );
            f.slot = Some(s2);
            findings.push(f);
            bad = true;
        }
    }
    if bad {
        findings.push(owner.finding(8928, vec![pid.to_string()], Some(pid)));
        return false;
    }
    let used: usize = placed.iter().map(|&(_, _, l)| l).sum();
    let expected_free = BODY_SIZE - slots_bytes - used;
    if h.free_count as usize != expected_free {
        let args = test_args(
            "m_freeCnt == freeCnt",
            h.free_count as i64,
            expected_free as i64,
        );
        findings.push(owner.finding(8939, args, Some(pid)));
    }
    let mut ghosts = 0u32;
    for &(slot, offset, len) in placed.iter() {
        let rec = &b[offset..offset + len];
        let t = record::record_type(rec).ok();
        ghosts += t.is_some_and(RecordType::is_ghost) as u32;
        let allowed = match (h.page_type, t) {
            (PageType::Data, Some(RecordType::Index | RecordType::GhostIndex)) => false,
            (PageType::Data, Some(_)) => true,
            (_, Some(RecordType::Index | RecordType::GhostIndex)) => true,
            _ => false,
        };
        if !allowed {
            let mut f = owner.finding(
                8944,
                vec![
                    pid.to_string(),
                    slot.to_string(),
                    "record type matches the page type".to_string(),
                    t.map_or(-1, |t| t as i64).to_string(),
                    (h.page_type as u8).to_string(),
                ],
                Some(pid),
            );
            f.slot = Some(slot);
            findings.push(f);
            continue;
        }
        records.push((slot, rec));
    }
    if ghosts != h.ghost_rec_count as u32 {
        let args = vec![
            h.ghost_rec_count.to_string(),
            ghosts.to_string(),
            pid.to_string(),
        ];
        findings.push(owner.finding(8927, args, Some(pid)));
    }
    true
}

/// The cross-page checks of one clustered index (module docs, step 4).
fn check_tree(
    t: &TableInfo<'_>,
    keys: &KeyInfo,
    facts: &TreeFacts,
    workers: usize,
    findings: &mut Vec<Finding>,
) {
    let owner = &t.owner;
    let root = t.entry.root_page;
    let cmp = |a: &[u8], b: &[u8]| compare_encoded(&keys.types, a, b);
    let Some(root_index) = facts.find(root) else {
        findings.push(owner.finding(
            8976,
            vec![
                root.to_string(),
                PageId::NULL.to_string(),
                PageId::NULL.to_string(),
            ],
            Some(root),
        ));
        return;
    };
    // (page index, parent, parent slot, low bound, high bound): bounds borrowed from the
    // parents' keys in the arena.
    type Entry<'k> = (usize, PageId, u16, Option<&'k [u8]>, Option<&'k [u8]>);
    let pages = &facts.pages;
    let mut level: Vec<Entry<'_>> = vec![(root_index, PageId::NULL, 0, None, None)];
    let mut expected_level = pages[root_index].level;
    // Per page (by index): reached yet, and from which parent and slot.
    let mut parent_of: Vec<Option<(PageId, u16)>> = vec![None; pages.len()];
    parent_of[root_index] = Some((PageId::NULL, 0));
    loop {
        // This level's pages in key order: sibling links must follow it. Each page's checks
        // read only the facts and its neighbours in the level, so a wide level is cut into
        // one slice per worker, whose findings join in order.
        let check_range = |range: std::ops::Range<usize>, findings: &mut Vec<Finding>| {
            for i in range {
                let (at, parent, pslot, low, high) = level[i];
                let p = &pages[at];
                let pid = p.pid;
                if p.level != expected_level {
                    findings.push(owner.finding(
                        8931,
                        vec![
                            pid.to_string(),
                            p.level.to_string(),
                            expected_level.to_string(),
                            parent.to_string(),
                        ],
                        Some(pid),
                    ));
                }
                let expected_prev = if i == 0 {
                    PageId::NULL
                } else {
                    pages[level[i - 1].0].pid
                };
                if p.prev != expected_prev {
                    findings.push(owner.finding(
                        8935,
                        vec![
                            p.prev.to_string(),
                            pid.to_string(),
                            expected_prev.to_string(),
                            parent.to_string(),
                            pslot.to_string(),
                        ],
                        Some(pid),
                    ));
                }
                let next = level.get(i + 1).map(|e| pages[e.0].pid);
                match next {
                    Some(next) if p.next != next => findings.push(owner.finding(
                        8978,
                        vec![next.to_string(), pid.to_string()],
                        Some(next),
                    )),
                    None if !p.next.is_null() => findings.push(owner.finding(
                        8981,
                        vec![pid.to_string(), p.next.to_string(), p.next.to_string()],
                        Some(pid),
                    )),
                    _ => {}
                }
                if let (Some(lo), Some(k)) = (low, p.low) {
                    if cmp(facts.key(k), lo) == std::cmp::Ordering::Less {
                        findings.push(owner.finding(
                            8933,
                            vec![
                                pid.to_string(),
                                p.level.to_string(),
                                parent.to_string(),
                                pslot.to_string(),
                            ],
                            Some(pid),
                        ));
                    }
                }
                if let (Some(hi), Some(k)) = (high, p.high) {
                    if cmp(facts.key(k), hi) != std::cmp::Ordering::Less {
                        findings.push(owner.finding(
                            8934,
                            vec![
                                pid.to_string(),
                                p.level.to_string(),
                                parent.to_string(),
                                (pslot + 1).to_string(),
                                next.unwrap_or(PageId::NULL).to_string(),
                            ],
                            Some(pid),
                        ));
                    }
                }
            }
        };
        if workers > 1 && level.len() >= PARALLEL_LEVEL {
            let chunk = level.len().div_ceil(workers);
            let mut parts: Vec<Vec<Finding>> = (0..workers).map(|_| Vec::new()).collect();
            std::thread::scope(|s| {
                for (w, part) in parts.iter_mut().enumerate() {
                    let range = (w * chunk).min(level.len())..((w + 1) * chunk).min(level.len());
                    let check_range = &check_range;
                    s.spawn(move || check_range(range, part));
                }
            });
            findings.extend(parts.into_iter().flatten());
        } else {
            check_range(0..level.len(), findings);
        }
        if expected_level == 0 {
            break;
        }
        // The next level down, from this level's separators.
        let mut below: Vec<Entry<'_>> = Vec::new();
        // Children usually follow each other in page order (pages are allocated as the
        // index grows): the page after the last child found is tried before a search.
        let mut last_found: Option<usize> = None;
        for &(at, _, _, low, high) in &level {
            let p = &pages[at];
            let children = &facts.children[p.children.clone()];
            for (s, &(k, child)) in children.iter().enumerate() {
                let lo = if s == 0 { low } else { Some(facts.key(k)) };
                let hi = match children.get(s + 1) {
                    Some(&(nk, _)) => Some(facts.key(nk)),
                    None => high,
                };
                let next_in_order = last_found
                    .map(|i| i + 1)
                    .filter(|&i| pages.get(i).is_some_and(|p| p.pid == child));
                let found = next_in_order.or_else(|| facts.find(child));
                if found.is_some() {
                    last_found = found;
                }
                let Some(c) = found else {
                    let prev_child = if s == 0 {
                        PageId::NULL
                    } else {
                        children[s - 1].1
                    };
                    findings.push(owner.finding(
                        8980,
                        vec![
                            p.pid.to_string(),
                            s.to_string(),
                            child.to_string(),
                            prev_child.to_string(),
                        ],
                        Some(p.pid),
                    ));
                    continue;
                };
                if let Some((op, os)) = parent_of[c] {
                    findings.push(owner.finding(
                        8937,
                        vec![
                            child.to_string(),
                            op.to_string(),
                            os.to_string(),
                            p.pid.to_string(),
                            s.to_string(),
                        ],
                        Some(child),
                    ));
                    continue;
                }
                parent_of[c] = Some((p.pid, s as u16));
                below.push((c, p.pid, s as u16, lo, hi));
            }
        }
        if below.is_empty() {
            break;
        }
        level = below;
        expected_level -= 1;
    }
    // Below a page that could not be read as records, its children look unreached: those
    // are reported through the damaged page, not one by one.
    if pages.iter().any(|p| p.damaged) {
        return;
    }
    // Pages are sorted by page id, so the orphans come out in page order.
    for (p, reached) in pages.iter().zip(&parent_of) {
        if reached.is_none() {
            findings.push(owner.finding(8977, vec![p.pid.to_string()], Some(p.pid)));
        }
    }
}

/// Where a catalog entry's name must be unique (`check_catalog`): a table's in its schema
/// (sys.objects); an index's in its table (sys.indexes: two tables may each have an index
/// `ix`). An index being built or rebuilt (under a CREATE mark, index.rs invariants 2, 5
/// and 6) is a scope of its own: a rebuild's new entry bears the old one's (or its
/// table's) name until its transaction settles.
#[derive(PartialEq, Eq, Hash)]
enum NameScope {
    Schema(String),
    Table(u32),
    Build(u32),
}

fn catalog_name(t: &TableEntry) -> (NameScope, String) {
    let scope = match &t.index_of {
        None if t.rebuilt_table().is_some() => NameScope::Build(t.object_id),
        None => NameScope::Schema(t.schema_name.to_ascii_lowercase()),
        Some(ix) if !t.pending_ddl.is_some_and(|p| p.created) => {
            NameScope::Table(ix.table_object_id)
        }
        Some(_) => NameScope::Build(t.object_id),
    };
    (scope, t.name.to_ascii_lowercase())
}

/// DBCC CHECKCATALOG: the catalog's rows agree with each other (Msg 8992 with the inner
/// message SQL Server uses for that kind of disagreement).
pub fn check_catalog(src: &CheckSource) -> Vec<Finding> {
    let c = &src.catalog;
    let mut out = Vec::new();
    let mut push = |inner: u32, text: String| {
        out.push(Finding {
            number: 8992,
            args: vec![inner.to_string(), "1".to_string(), text],
            object_id: 0,
            index_id: 0,
            allocation_unit_id: 0,
            allocation: false,
            page: None,
            slot: None,
        })
    };
    let groups: HashSet<u16> = c.filegroups.iter().map(|g| g.data_space_id).collect();
    let units: HashMap<u64, &extentdb_format::catalog::AllocationUnitEntry> = c
        .allocation_units
        .iter()
        .map(|a| (a.allocation_unit_id, a))
        .collect();
    for f in &c.files {
        if f.file_type == extentdb_format::file_header::FileType::Rows
            && !groups.contains(&f.data_space_id)
        {
            push(3853, format!("Attribute (data_space_id={}) of row (file_id={}) in sys.database_files does not have a matching row (data_space_id={}) in sys.data_spaces.", f.data_space_id, f.file_id, f.data_space_id));
        }
    }
    let mut seen_units = HashSet::new();
    for a in &c.allocation_units {
        if !seen_units.insert(a.allocation_unit_id) {
            push(3854, format!("Attribute (allocation_unit_id={}) of row (allocation_unit_id={}) in sys.allocation_units has a duplicate.", a.allocation_unit_id, a.allocation_unit_id));
        }
        if !groups.contains(&a.data_space_id) {
            push(3853, format!("Attribute (data_space_id={}) of row (allocation_unit_id={}) in sys.allocation_units does not have a matching row (data_space_id={}) in sys.data_spaces.", a.data_space_id, a.allocation_unit_id, a.data_space_id));
        }
        if a.allocation_unit_id >= c.next_allocation_unit_id {
            push(3855, format!("Attribute (allocation_unit_id={}) exists without a row (next_allocation_unit_id={}) that allows it.", a.allocation_unit_id, c.next_allocation_unit_id));
        }
    }
    let mut ids = HashSet::new();
    let mut names = HashSet::new();
    for t in &c.tables {
        if !ids.insert(t.object_id) {
            push(3854, format!("Attribute (object_id={}) of row (object_id={}) in sys.objects has a duplicate.", t.object_id, t.object_id));
        }
        if !names.insert(catalog_name(t)) {
            push(
                3854,
                format!(
                    "Attribute (name={}) of row (object_id={}) in sys.objects has a duplicate.",
                    t.name, t.object_id
                ),
            );
        }
        match units.get(&t.allocation_unit_id) {
            None => push(3853, format!("Attribute (container_id={}) of row (object_id={}) in sys.partitions does not have a matching row (allocation_unit_id={}) in sys.allocation_units.", t.allocation_unit_id, t.object_id, t.allocation_unit_id)),
            Some(a) if a.data_space_id != t.data_space_id => push(3853, format!("Attribute (data_space_id={}) of row (object_id={}) in sys.indexes does not match the allocation unit's data space ({}).", t.data_space_id, t.object_id, a.data_space_id)),
            _ => {}
        }
        if t.index_id == 1 {
            let in_group = c
                .files
                .iter()
                .any(|f| f.file_id == t.root_page.file.0 && f.data_space_id == t.data_space_id);
            if t.root_page.is_null() || !in_group {
                push(3853, format!("Attribute (root_page={}) of row (object_id={}) in sys.indexes does not have a matching file in data space {}.", t.root_page, t.object_id, t.data_space_id));
            }
        }
        let mut col_ids = HashSet::new();
        let mut col_names = HashSet::new();
        for col in &t.columns {
            if !col_ids.insert(col.column_id) || !col_names.insert(col.name.to_ascii_lowercase()) {
                push(3854, format!("Attribute (column_id={}) of row (object_id={},column_id={}) in sys.columns has a duplicate.", col.column_id, t.object_id, col.column_id));
            }
        }
        if let Some((_, key)) = &t.primary_key {
            for k in key {
                if !t.columns.iter().any(|col| col.column_id == *k) {
                    push(3853, format!("Attribute (column_id={k}) of row (object_id={},index_id=1) in sys.index_columns does not have a matching row (object_id={},column_id={k}) in sys.columns.", t.object_id, t.object_id));
                }
            }
        }
    }
    out
}

impl crate::Database {
    /// Records a check that found no error (DBCC CHECKDB): the boot page keeps its time
    /// (DATABASEPROPERTYEX 'LastGoodCheckDbTime', DBCC DBINFO's dbi_dbccLastKnownGood) and
    /// is saved with the catalog.
    pub fn record_clean_check(&mut self, at_unix_us: i64) -> Result<(), StorageError> {
        self.boot.last_checkdb_us = at_unix_us;
        self.save_catalog()
    }
}

/// Whether CHECKFILEGROUP of data space `ds` checks entry `t` (`CheckOptions::filegroup`):
/// it is in `ds`, and so is its table's heap or clustered index when it is an index.
fn in_filegroup(tables: &[TableEntry], t: &TableEntry, ds: u16) -> bool {
    let base_in = |object_id: u32| {
        tables
            .iter()
            .any(|b| b.object_id == object_id && b.index_of.is_none() && b.data_space_id == ds)
    };
    t.data_space_id == ds
        && t.index_of
            .as_ref()
            .is_none_or(|ix| base_in(ix.table_object_id))
}

/// CHECKFILEGROUP's allocation findings: those on a page of one of the data space's files,
/// or of a unit it checks.
fn filegroup_findings(ctx: &Context<'_>, findings: Vec<Finding>, ds: u16) -> Vec<Finding> {
    let in_files = |p: &PageId| {
        ctx.src
            .catalog
            .files
            .iter()
            .any(|f| f.file_id == p.file.0 && f.data_space_id == ds)
    };
    findings
        .into_iter()
        .filter(|f| match &f.page {
            Some(p) => in_files(p),
            None => ctx.checked_units.contains(&f.allocation_unit_id),
        })
        .collect()
}

/// Table `t`'s nonclustered indexes' entries (none for an index entry), but for one still
/// under a CREATE mark (index.rs `comparable`): its rows are not compared with the table's.
fn indexes_of<'a>(tables: &'a [TableEntry], t: &TableEntry) -> Vec<&'a TableEntry> {
    match t.index_of {
        Some(_) => Vec::new(),
        None => tables
            .iter()
            .filter(|x| x.index_of.as_ref().map(|i| i.table_object_id) == Some(t.object_id))
            .filter(|x| crate::index::comparable(x))
            .collect(),
    }
}

/// An index's rows as counted and hashed, order-free (module docs, step 5).
#[derive(Default, Clone, Copy, PartialEq, Eq, Debug)]
struct RowSums {
    count: u64,
    sum: u64,
    xor: u64,
}

impl RowSums {
    fn add_record(&mut self, rec: &[u8]) {
        let v = index_rows::record_hash(rec);
        self.count += 1;
        self.sum = self.sum.wrapping_add(v);
        self.xor ^= v;
    }

    fn add(&mut self, o: &RowSums) {
        self.count += o.count;
        self.sum = self.sum.wrapping_add(o.sum);
        self.xor ^= o.xor;
    }
}

/// One index's sums: of its table's rows' projections, and of its own records.
#[derive(Default, Clone, Copy, Debug)]
struct IndexRows {
    expected: RowSums,
    found: RowSums,
}

impl IndexRows {
    fn add(&mut self, o: &IndexRows) {
        self.expected.add(&o.expected);
        self.found.add(&o.found);
    }
}

/// Step 5's facts of one data page's live records: as an index's own records, or
/// projected into each of their table's indexes. A record that does not project (it
/// failed its own checks) adds nothing; those checks report it.
fn index_facts(ti: &TableInfo<'_>, pid: PageId, records: &[(u16, &[u8])], out: &mut Gathered) {
    let live = records.iter().filter(|(_, r)| !record::is_ghost(r));
    if ti.entry.index_of.is_some() {
        let sums = &mut out
            .index_rows
            .entry(ti.entry.allocation_unit_id)
            .or_default();
        for (_, rec) in live {
            sums.found.add_record(rec);
        }
        return;
    }
    for (slot, rec) in live {
        for ix in &ti.indexes {
            if let Ok(irec) = crate::index::project(ix, ti.entry, rec, (pid, *slot)) {
                let sums = out.index_rows.entry(ix.allocation_unit_id).or_default();
                sums.expected.add_record(&irec);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(files: &[(u16, usize)]) -> Vec<Run> {
        let mut out = Vec::new();
        for &(file, n) in files {
            for i in 0..n {
                out.push(Run {
                    file,
                    first_extent: i as u32 * RUN_EXTENTS,
                    extents: RUN_EXTENTS,
                    unit: 7,
                });
            }
        }
        out
    }

    /// Proves invariant 1 for both orders: every run is handed out exactly once, from
    /// several workers at once; with trace flag 2549 each worker starts in its own file.
    #[test]
    fn every_run_is_handed_out_once() {
        let all = runs(&[(1, 40), (3, 7), (4, 25)]);
        for per_file in [false, true] {
            let q = RunQueue::new(&all, per_file);
            let taken: Vec<Vec<usize>> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..4)
                    .map(|w| {
                        let q = &q;
                        s.spawn(move || std::iter::from_fn(|| q.take(w)).collect::<Vec<_>>())
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let mut every: Vec<usize> = taken.iter().flatten().copied().collect();
            every.sort_unstable();
            assert_eq!(
                every,
                (0..all.len()).collect::<Vec<_>>(),
                "per file {per_file}"
            );
        }
        let q = RunQueue::new(&all, true);
        let first: Vec<u16> = (0..3).map(|w| all[q.take(w).unwrap()].file).collect();
        assert_eq!(first, [1, 3, 4], "each worker starts in its own file");
        let q = RunQueue::new(&all, false);
        let first: Vec<u16> = (0..3).map(|w| all[q.take(w).unwrap()].file).collect();
        assert_eq!(first, [1, 1, 1], "one stream");
    }
}
