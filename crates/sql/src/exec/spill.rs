//! The sort that spills to disk: an external merge sort for ORDER BY, DISTINCT and GROUP BY,
//! so that a sort larger than its memory budget never holds its whole input in memory. SQL
//! Server spills such a sort to tempdb ("Sort Warnings", spill level N); here the runs go to
//! work files in a directory the caller names, which is tempdb's data directory.
//!
//! Rows are buffered until the next one would take the buffer past the budget; the buffer
//! is then sorted (stably) and appended to the sort's work file as one *run*. [`SortSpill::
//! finish`] merges the runs and the in-memory tail. When there are more of them than the
//! fan-in, merge passes first combine groups of `fan_in` consecutive runs into a new work
//! file, until one final merge can read them all at once.
//!
//! Life of a sort:
//!
//! ```text
//!  new ─▶ Buffering ─push past the budget─▶ sort the buffer, append a run to work file 0 ─▶ Buffering
//!         Buffering ─finish, nothing spilled─▶ SortedRows from memory (no file was created)
//!         Buffering ─finish, spilled─▶ [pass: work file n ─▶ n+1, n closed]* ─▶ final merge = SortedRows
//!         a spill fails ─▶ Failed: push and finish return that error again
//! ```
//!
//! A *spool* ([`SortSpill::fifo`]) is the same machinery with no order: its rows come back
//! in the order they were pushed, the buffer is never sorted, and `finish` reads the runs one
//! after the other (then the tail) instead of merging them, so a spool of any size is read
//! with one run's read buffer and never takes a merge pass. INSERT ... SELECT, UPDATE and
//! DELETE hold their rows in spools; TOP PERCENT without ORDER BY counts through one.
//!
//! A work file is named `extentdb-sort-<pid>-<sort number>-<file number>.tmp` and lives
//! only as an open descriptor: it is removed from the directory right after it is created.
//! One a crash caught between the two is removed at the next start
//! ([`remove_leftover_work_files`]).
//!
//! Run encoding (private to this module; nothing outside reads it, and nothing reads it
//! after the sort ends, so it has no version): a row is `varint(record length)` then the
//! record, `varint(column count)` then each value as a tag byte and its payload. Fixed-width
//! kinds have the payload length their tag implies; text (UTF-8) and binary carry a varint
//! length. Integers are little-endian; `float` and `real` are their IEEE bits, so NaN
//! payloads and -0.0 come back exactly. Varints are LEB128. This is deliberately not
//! `rowcodec`, which is directed by a column type and stores what the column keeps; a sort
//! has untyped values and must return each exactly.
//!
//! Invariants:
//! 1. Order: [`SortedRows`] yields every pushed row exactly once, in non-decreasing order
//!    under `compare`, and equal rows in the order they were pushed (stable): runs are
//!    sorted with a stable sort, passes merge only consecutive runs, and the merge breaks
//!    ties by source number (earlier runs first, the in-memory tail last). Checked on every
//!    row in debug and test builds.
//! 2. Memory while pushing: the buffered rows' estimated bytes (their values, strings and
//!    binaries by capacity) plus the buffer's slots (by capacity) stay within the budget,
//!    unless the buffer holds a single row (a row larger than the budget is still sorted,
//!    alone in its run). Not counted: the stable sort's scratch space.
//! 3. Memory while merging: the in-memory tail (within the budget), and for each run being
//!    read, one read buffer (at most [`IO_BUFFER_BYTES`]) and one decoded row, plus one
//!    record-sized decoding buffer; a merge pass adds one write buffer. At most `fan_in`
//!    runs are read at once; a spool reads one run at a time.
//! 4. Files: at most two work files are open at once (a pass reads one and writes the
//!    next), and none is visible in the directory after its creation returns; if it could
//!    not be removed then, it is removed when the sort is dropped. A panic leaves nothing
//!    behind, and a crash nothing but a file caught between its creation and its removal.
//! 5. A run file is read only through the segment its run was written to, and every record
//!    read back is validated (lengths, tags, UTF-8, row counts, segment ends): a damaged
//!    work file gives an error, never a panic or a wrong row.
//! 7. Space: a work file's data counts as tempdb's *internal objects* of the task that
//!    created it (sys.dm_db_task_space_usage, storage's `task_space.rs`), in 8 KB pages:
//!    after each run or merged group is flushed, the pages of the file's bytes so far not
//!    yet counted are allocated, and when the file closes all of them are deallocated. SQL
//!    Server's spill takes tempdb pages; this one takes no page of tempdb's data files, so
//!    its bytes in tempdb's page size are the count. The holes a merge pass punches in its
//!    input are counted when that input closes, at the pass's end.
//! 6. Errors: a full disk is Msg 1105 for tempdb's PRIMARY filegroup, naming the sort's
//!    run storage as SQL Server does; any other operating-system failure or damaged run is
//!    Msg 17053 naming the work file and the OS error.
//!
//! What it does not do: compare values (the caller's `compare` decides the order, and must be
//! a total order: a NaN-aware comparison for floats), remove duplicates for DISTINCT or fold
//! groups for GROUP BY (the caller does that on the sorted stream), fsync work files (they
//! never need to survive a crash), or allocate its runs in tempdb's data files (SQL Server
//! does; here they are plain files beside them, so tempdb's size does not show them).

use std::cmp::Ordering;
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

use extentdb_storage::task_space::{self, ObjectKind, SpaceCounters};

use crate::messages::{msg, os_error_text, SqlError};
use crate::types::Value;

/// The order a sort produces: a total order on rows.
pub(super) type RowCompare = dyn Fn(&[Value], &[Value]) -> Ordering + Send;

/// Runs merged at once, by default: bounds open readers and their buffers in a merge.
pub(super) const DEFAULT_FAN_IN: usize = 64;

/// Read and write buffer of a run: one extent.
pub(super) const IO_BUFFER_BYTES: usize = 64 * 1024;

/// The page a work file's bytes are counted in as tempdb's internal objects (invariant 7).
const PAGE_BYTES: u64 = extentdb_format::PAGE_SIZE as u64;

/// Bytes a row takes in the buffer itself, besides what it owns.
const SLOT_BYTES: usize = std::mem::size_of::<Vec<Value>>();

/// SQL Server names a sort's spill storage in Msg 1105 with an internal allocation-unit id
/// of this magnitude ("dbo.SORT temporary run storage: 140737488355328", 2^47); the sort's
/// own number is added so that two sorts' messages can be told apart.
const RUN_STORAGE_ID_BASE: u64 = 1 << 47;

/// Attempts at a fresh work-file name when one is taken (left by a crashed process whose
/// pid this one reuses, and that could not remove it).
const CREATE_ATTEMPTS: u32 = 16;

/// Invariant 1 is checked on every row in debug builds and in the release-mode tests.
const CHECK_ORDER: bool = cfg!(any(debug_assertions, test));

/// Numbers the sorts of this process, for work-file names and the 1105 object name.
static SORT_NUMBERS: AtomicU64 = AtomicU64::new(0);

/// An external merge sort being fed rows.
pub(super) struct SortSpill {
    dir: PathBuf,
    budget_bytes: usize,
    fan_in: usize,
    compare: Box<RowCompare>,
    sort_number: u64,
    /// Rows not yet written to a run, in push order.
    buffer: Vec<Vec<Value>>,
    /// Estimated heap bytes of the rows in `buffer`, without their slots (invariant 2).
    rows_bytes: usize,
    /// Runs in `writer`'s work file, in push order.
    runs: Vec<Run>,
    writer: Option<RunWriter>,
    /// The next work-file number of this sort.
    next_file: u32,
    spilled_bytes: u64,
    /// Reused encoding buffer.
    scratch: Vec<u8>,
    /// Test hooks: bytes a work file may take before writes fail with ENOSPC, and whether
    /// work files are removed at creation (false exercises the removal on drop).
    space_limit: Option<u64>,
    unlink_at_create: bool,
    /// The error that failed a spill: the runs may be incomplete, so the sort refuses
    /// further work and gives the same error again.
    failed: Option<SqlError>,
    /// A spool: push order kept, runs read one after the other (no sort, no merge).
    fifo: bool,
}

/// One sorted run: a segment of a work file.
#[derive(Debug, Clone, Copy)]
struct Run {
    offset: u64,
    bytes: u64,
    rows: u64,
}

// What a sort spilled (runs, bytes, merge passes) is read by the tests; SQL Server reports it
// as a Sort Warning's spill level, which SET STATISTICS and showplan (issue 22) will show.
#[allow(dead_code)]
impl SortSpill {
    /// A sort whose runs go to `dir`, buffering at most about `budget_bytes` of rows (see
    /// invariant 2), ordering rows by `compare`.
    pub fn new(dir: &Path, budget_bytes: usize, compare: Box<RowCompare>) -> Self {
        SortSpill {
            dir: dir.to_path_buf(),
            budget_bytes,
            fan_in: DEFAULT_FAN_IN,
            compare,
            sort_number: SORT_NUMBERS.fetch_add(1, AtomicOrdering::Relaxed),
            buffer: Vec::new(),
            rows_bytes: 0,
            runs: Vec::new(),
            writer: None,
            next_file: 0,
            spilled_bytes: 0,
            scratch: Vec::new(),
            space_limit: None,
            unlink_at_create: true,
            failed: None,
            fifo: false,
        }
    }

    /// A spool: rows come back in the order they were pushed, spilled past `budget_bytes`
    /// as a sort's are, read back run after run.
    pub fn fifo(dir: &Path, budget_bytes: usize) -> Self {
        let mut spool = SortSpill::new(dir, budget_bytes, Box::new(|_, _| Ordering::Equal));
        spool.fifo = true;
        spool
    }

    /// The same sort merging at most `fan_in` runs at once (at least 2).
    pub fn with_fan_in(mut self, fan_in: usize) -> Self {
        assert!(fan_in >= 2, "a merge needs at least two inputs");
        self.fan_in = fan_in;
        self
    }

    /// Adds a row. When the row would take the buffer past the budget, the buffer is sorted
    /// and written as a run first.
    pub fn push(&mut self, row: Vec<Value>) -> Result<(), SqlError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let row_bytes = row_heap_bytes(&row);
        let slots = if self.buffer.len() < self.buffer.capacity() {
            self.buffer.capacity()
        } else {
            (self.buffer.capacity() * 2).max(4)
        };
        let needed = self.rows_bytes + row_bytes + slots * SLOT_BYTES;
        if needed > self.budget_bytes && !self.buffer.is_empty() {
            if let Err(e) = self.spill() {
                self.failed = Some(e.clone());
                return Err(e);
            }
        }
        if self.buffer.len() == self.buffer.capacity() {
            let grown = (self.buffer.capacity() * 2).max(4);
            let affordable = self
                .budget_bytes
                .saturating_sub(self.rows_bytes + row_bytes)
                / SLOT_BYTES;
            let target = grown.min(affordable).max(self.buffer.len() + 1);
            self.buffer.reserve_exact(target - self.buffer.len());
        }
        self.buffer.push(row);
        self.rows_bytes += row_bytes;
        debug_assert!(
            self.buffer.len() == 1
                || self.rows_bytes + self.buffer.capacity() * SLOT_BYTES <= self.budget_bytes,
            "invariant 2: the buffer stays within its budget"
        );
        Ok(())
    }

    /// Runs written so far (each from one buffer-full of rows).
    pub fn spilled_runs(&self) -> usize {
        self.runs.len()
    }

    /// Bytes written to work files so far.
    pub fn spilled_bytes(&self) -> u64 {
        self.spilled_bytes
    }

    /// Ends a spool's input for reading more than once (SQL Server's table spool under a
    /// nested loop: the inner side of a join, rewound for each outer row). Its work file
    /// stays whole until the spool is dropped; its in-memory tail is within the budget.
    pub fn finish_rewindable(mut self) -> Result<Spool, SqlError> {
        assert!(self.fifo, "only a spool rewinds");
        if let Some(e) = self.failed {
            return Err(e);
        }
        let work = self.writer.take().map(|w| w.into_work_file());
        Ok(Spool {
            work,
            runs: std::mem::take(&mut self.runs),
            tail: std::mem::take(&mut self.buffer),
            sort_number: self.sort_number,
        })
    }

    /// Ends the input: sorts what is buffered and merges it with the runs. When nothing
    /// was spilled, no file is created and the rows come straight from memory.
    pub fn finish(mut self) -> Result<SortedRows, SqlError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if !self.fifo {
            let compare = &*self.compare;
            self.buffer.sort_by(|a, b| compare(a, b));
        }
        let tail = std::mem::take(&mut self.buffer);
        let spilled_runs = self.runs.len();
        let Some(writer) = self.writer.take() else {
            return Ok(SortedRows::new(
                self.compare,
                Rows::Memory(tail.into_iter()),
                0,
                0,
                0,
            ));
        };
        // Every run was flushed when it was written; the writer has nothing buffered.
        let mut work = writer.into_work_file();
        if self.fifo {
            let chain = Chain {
                work,
                runs: std::mem::take(&mut self.runs).into_iter(),
                reading: None,
                tail: tail.into_iter(),
                sort_number: self.sort_number,
                scratch: Vec::new(),
            };
            return Ok(SortedRows::new(
                self.compare,
                Rows::Chain(chain),
                spilled_runs,
                self.spilled_bytes,
                0,
            ));
        }
        let tail_sources = usize::from(!tail.is_empty());
        let mut passes = 0;
        while self.runs.len() + tail_sources > self.fan_in {
            work = self.merge_pass(&work)?;
            passes += 1;
        }
        let mut sources: Vec<Source> = self
            .runs
            .iter()
            .map(|run| Source::Run(RunReader::new(&work, *run, self.sort_number)))
            .collect();
        if !tail.is_empty() {
            sources.push(Source::Memory(tail.into_iter()));
        }
        drop(work);
        let merger = Merger::new(sources, &*self.compare)?;
        Ok(SortedRows::new(
            self.compare,
            Rows::Merge(merger),
            spilled_runs,
            self.spilled_bytes,
            passes,
        ))
    }

    /// Sorts the buffer and appends it to the work file as one run.
    fn spill(&mut self) -> Result<(), SqlError> {
        debug_assert!(!self.buffer.is_empty());
        if !self.fifo {
            let compare = &*self.compare;
            self.buffer.sort_by(|a, b| compare(a, b));
        }
        if self.writer.is_none() {
            self.writer = Some(self.create_writer()?);
        }
        let writer = self.writer.as_mut().expect("created above");
        let start = writer.end;
        let rows = self.buffer.len() as u64;
        for row in self.buffer.drain(..) {
            writer.write_row(&row, &mut self.scratch)?;
        }
        writer.flush()?;
        self.runs.push(Run {
            offset: start,
            bytes: writer.end - start,
            rows,
        });
        self.spilled_bytes += writer.end - start;
        self.rows_bytes = 0;
        Ok(())
    }

    /// Merges each group of `fan_in` consecutive runs of `input` into one run of a new work
    /// file, which it returns; `self.runs` then describes the new file.
    fn merge_pass(&mut self, input: &Arc<WorkFile>) -> Result<Arc<WorkFile>, SqlError> {
        let mut out = self.create_writer()?;
        let mut merged = Vec::with_capacity(self.runs.len().div_ceil(self.fan_in));
        for group in self.runs.chunks(self.fan_in) {
            let sources = group
                .iter()
                .map(|run| Source::Run(RunReader::new(input, *run, self.sort_number)))
                .collect();
            let mut merger = Merger::new(sources, &*self.compare)?;
            let start = out.end;
            let mut rows = 0;
            while let Some(row) = merger.next(&*self.compare)? {
                out.write_row(&row, &mut self.scratch)?;
                rows += 1;
            }
            out.flush()?;
            let expected: u64 = group.iter().map(|run| run.rows).sum();
            assert_eq!(rows, expected, "a merge pass keeps every row");
            merged.push(Run {
                offset: start,
                bytes: out.end - start,
                rows,
            });
            drop(merger);
            let first = group[0];
            let last = group[group.len() - 1];
            input.release(first.offset, last.offset + last.bytes - first.offset);
        }
        self.spilled_bytes += merged.iter().map(|run| run.bytes).sum::<u64>();
        self.runs = merged;
        Ok(out.into_work_file())
    }

    fn create_writer(&mut self) -> Result<RunWriter, SqlError> {
        let work = WorkFile::create(
            &self.dir,
            self.sort_number,
            &mut self.next_file,
            self.unlink_at_create,
        )?;
        Ok(RunWriter::new(work, self.space_limit, self.sort_number))
    }
}

/// Removes the work files a process of this instance left behind (a crash between a work
/// file's creation and its removal, invariant 4), as SQL Server starts with a clean tempdb;
/// returns how many. Called at startup, under the instance lock, so no live sort owns one.
pub(super) fn remove_leftover_work_files(dir: &Path) -> usize {
    let mut removed = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("extentdb-sort-")
            && name.ends_with(".tmp")
            && std::fs::remove_file(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Estimated heap bytes a row owns: its values, and the text and binary they point to.
fn row_heap_bytes(row: &Vec<Value>) -> usize {
    let owned: usize = row
        .iter()
        .map(|v| match v {
            Value::Text(s) => s.capacity(),
            Value::Binary(b) => b.capacity(),
            _ => 0,
        })
        .sum();
    row.capacity() * std::mem::size_of::<Value>() + owned
}

/// The sorted rows of a finished sort.
#[allow(dead_code)]
pub(super) struct SortedRows {
    compare: Box<RowCompare>,
    rows: Rows,
    /// The row yielded last, kept only to check invariant 1.
    previous: Option<Vec<Value>>,
    spilled_runs: usize,
    spilled_bytes: u64,
    merge_passes: u32,
}

enum Rows {
    Memory(std::vec::IntoIter<Vec<Value>>),
    Merge(Merger),
    Chain(Chain),
    Done,
}

/// A finished spool that is read from the start as often as asked (`rows`).
pub(super) struct Spool {
    work: Option<Arc<WorkFile>>,
    runs: Vec<Run>,
    tail: Vec<Vec<Value>>,
    sort_number: u64,
}

impl Spool {
    /// All its rows when none spilled (a join indexes them: join_hash.rs).
    pub fn in_memory(&self) -> Option<&[Vec<Value>]> {
        self.runs.is_empty().then_some(self.tail.as_slice())
    }

    /// Its rows from the first, in push order.
    pub fn rows(&self) -> SpoolRows<'_> {
        SpoolRows {
            spool: self,
            cursor: SpoolCursor::default(),
        }
    }
}

/// Where one reading of a spool is, kept apart from the spool so that both may live in
/// one struct (a join owns its inner side's spool and rewinds it for each outer row).
#[derive(Default)]
pub(super) struct SpoolCursor {
    run: usize,
    reading: Option<RunReader>,
    tail: usize,
    scratch: Vec<u8>,
}

impl SpoolCursor {
    /// The next row of `spool` (always the same spool for one cursor); None at its end.
    pub fn next_row(&mut self, spool: &Spool) -> Result<Option<Vec<Value>>, SqlError> {
        loop {
            if let Some(reader) = &mut self.reading {
                if let Some(row) = reader.next_row(&mut self.scratch)? {
                    return Ok(Some(row));
                }
                self.reading = None;
            }
            match (spool.runs.get(self.run), &spool.work) {
                (Some(run), Some(work)) => {
                    self.run += 1;
                    self.reading = Some(RunReader::new(work, *run, spool.sort_number));
                }
                _ => {
                    let row = spool.tail.get(self.tail).cloned();
                    self.tail += usize::from(row.is_some());
                    return Ok(row);
                }
            }
        }
    }
}

/// One reading of a spool; the work file is left whole for the next.
pub(super) struct SpoolRows<'a> {
    spool: &'a Spool,
    cursor: SpoolCursor,
}

impl Iterator for SpoolRows<'_> {
    type Item = Result<Vec<Value>, SqlError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.cursor.next_row(self.spool).transpose()
    }
}

/// A spool's rows: its runs one after the other, then the in-memory tail.
struct Chain {
    work: Arc<WorkFile>,
    runs: std::vec::IntoIter<Run>,
    reading: Option<RunReader>,
    tail: std::vec::IntoIter<Vec<Value>>,
    sort_number: u64,
    scratch: Vec<u8>,
}

impl Chain {
    fn next(&mut self) -> Result<Option<Vec<Value>>, SqlError> {
        loop {
            if let Some(reader) = &mut self.reading {
                if let Some(row) = reader.next_row(&mut self.scratch)? {
                    return Ok(Some(row));
                }
                // A run read to its end (validated there) frees its blocks.
                self.work.release(reader.start, reader.end - reader.start);
            }
            match self.runs.next() {
                Some(run) => {
                    self.reading = Some(RunReader::new(&self.work, run, self.sort_number));
                }
                None => return Ok(self.tail.next()),
            }
        }
    }
}

#[allow(dead_code)]
impl SortedRows {
    fn new(
        compare: Box<RowCompare>,
        rows: Rows,
        spilled_runs: usize,
        spilled_bytes: u64,
        merge_passes: u32,
    ) -> SortedRows {
        SortedRows {
            compare,
            rows,
            previous: None,
            spilled_runs,
            spilled_bytes,
            merge_passes,
        }
    }

    /// Runs written while rows were pushed (0: the sort stayed in memory).
    pub fn spilled_runs(&self) -> usize {
        self.spilled_runs
    }

    /// Bytes written to work files, merge passes included.
    pub fn spilled_bytes(&self) -> u64 {
        self.spilled_bytes
    }

    /// Merge passes before the final merge; SQL Server's sort warning reports
    /// `merge_passes() + 1` as the spill level of a sort that spilled.
    pub fn merge_passes(&self) -> u32 {
        self.merge_passes
    }

    fn next_row(&mut self) -> Option<Result<Vec<Value>, SqlError>> {
        let next = match &mut self.rows {
            Rows::Memory(rows) => return rows.next().map(Ok),
            Rows::Merge(merger) => merger.next(&*self.compare),
            Rows::Chain(chain) => chain.next(),
            Rows::Done => return None,
        };
        // The last work file closes as soon as it is read to the end (or fails).
        if !matches!(next, Ok(Some(_))) {
            self.rows = Rows::Done;
        }
        next.transpose()
    }

    /// The next `n` rows (fewer only at the end): a window of a spool.
    pub fn window(&mut self, n: usize) -> Result<Vec<Vec<Value>>, SqlError> {
        let mut rows = Vec::with_capacity(n.min(1024));
        for row in self.by_ref().take(n) {
            rows.push(row?);
        }
        Ok(rows)
    }
}

impl Iterator for SortedRows {
    type Item = Result<Vec<Value>, SqlError>;

    /// The next row in order; after an error, nothing more.
    fn next(&mut self) -> Option<Self::Item> {
        let item = self.next_row();
        if CHECK_ORDER {
            if let Some(Ok(row)) = &item {
                if let Some(previous) = &self.previous {
                    assert_ne!(
                        (self.compare)(previous, row),
                        Ordering::Greater,
                        "invariant 1: sorted rows are non-decreasing"
                    );
                }
                self.previous = Some(row.clone());
            }
        }
        item
    }
}

/// One input of a merge.
enum Source {
    Run(RunReader),
    /// The rows still buffered when the sort finished, already sorted.
    Memory(std::vec::IntoIter<Vec<Value>>),
}

impl Source {
    fn next_row(&mut self, scratch: &mut Vec<u8>) -> Result<Option<Vec<Value>>, SqlError> {
        match self {
            Source::Run(reader) => reader.next_row(scratch),
            Source::Memory(rows) => Ok(rows.next()),
        }
    }
}

/// A k-way merge: a binary min-heap of source numbers keyed by each source's head row,
/// ties to the lower source number (invariant 1).
struct Merger {
    sources: Vec<Source>,
    heads: Vec<Option<Vec<Value>>>,
    heap: Vec<usize>,
    scratch: Vec<u8>,
}

impl Merger {
    fn new(mut sources: Vec<Source>, compare: &RowCompare) -> Result<Merger, SqlError> {
        let mut scratch = Vec::new();
        let mut heads = Vec::with_capacity(sources.len());
        for source in &mut sources {
            heads.push(source.next_row(&mut scratch)?);
        }
        let mut heap: Vec<usize> = (0..sources.len()).filter(|&i| heads[i].is_some()).collect();
        for i in (0..heap.len() / 2).rev() {
            sift_down(&mut heap, &heads, compare, i);
        }
        Ok(Merger {
            sources,
            heads,
            heap,
            scratch,
        })
    }

    fn next(&mut self, compare: &RowCompare) -> Result<Option<Vec<Value>>, SqlError> {
        let Some(&top) = self.heap.first() else {
            return Ok(None);
        };
        let row = self.heads[top]
            .take()
            .expect("a source in the heap has a head row");
        let next = self.sources[top].next_row(&mut self.scratch)?;
        if CHECK_ORDER {
            if let Some(next) = &next {
                assert_ne!(
                    compare(&row, next),
                    Ordering::Greater,
                    "invariant 1: each merge source is sorted"
                );
            }
        }
        if next.is_some() {
            self.heads[top] = next;
        } else {
            let last = self.heap.pop().expect("the heap holds top");
            if self.heap.is_empty() {
                return Ok(Some(row));
            }
            self.heap[0] = last;
        }
        sift_down(&mut self.heap, &self.heads, compare, 0);
        Ok(Some(row))
    }
}

/// True when source `a`'s head comes before source `b`'s.
fn before(heads: &[Option<Vec<Value>>], compare: &RowCompare, a: usize, b: usize) -> bool {
    let row = |i: usize| {
        heads[i]
            .as_deref()
            .expect("a source in the heap has a head row")
    };
    match compare(row(a), row(b)) {
        Ordering::Less => true,
        Ordering::Greater => false,
        Ordering::Equal => a < b,
    }
}

fn sift_down(heap: &mut [usize], heads: &[Option<Vec<Value>>], compare: &RowCompare, at: usize) {
    let mut i = at;
    loop {
        let left = 2 * i + 1;
        if left >= heap.len() {
            return;
        }
        let right = left + 1;
        let child = if right < heap.len() && before(heads, compare, heap[right], heap[left]) {
            right
        } else {
            left
        };
        if !before(heads, compare, heap[child], heap[i]) {
            return;
        }
        heap.swap(i, child);
        i = child;
    }
}

/// A work file: created with mode 0600, removed from its directory at once (invariant 4).
struct WorkFile {
    file: File,
    path: PathBuf,
    /// The name could not be removed at creation; removed on drop instead.
    linked: bool,
    /// The task that created it (storage's task_space.rs), charged with its pages as
    /// internal objects (invariant 7), and given them back when it closes.
    task: Option<Arc<SpaceCounters>>,
    /// The 8 KB pages of it charged to `task` so far.
    charged_pages: AtomicU64,
}

impl WorkFile {
    fn create(
        dir: &Path,
        sort_number: u64,
        next_file: &mut u32,
        unlink: bool,
    ) -> Result<Arc<WorkFile>, SqlError> {
        let pid = std::process::id();
        let mut attempt = 0;
        loop {
            let name = format!("extentdb-sort-{pid}-{sort_number}-{}.tmp", *next_file);
            let path = dir.join(name);
            *next_file += 1;
            let opened = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path);
            match opened {
                Ok(file) => {
                    let linked = !unlink || std::fs::remove_file(&path).is_err();
                    return Ok(Arc::new(WorkFile {
                        file,
                        path,
                        linked,
                        task: task_space::charged(),
                        charged_pages: AtomicU64::new(0),
                    }));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < CREATE_ATTEMPTS => {
                    attempt += 1;
                }
                Err(e) => return Err(io_error(&e, RunOp::Create, &path, sort_number)),
            }
        }
    }

    /// Frees the blocks of a segment a merge pass has consumed, so that a pass needs room
    /// for its output and one group rather than twice its input. Best effort: where the
    /// file system cannot punch holes, the blocks are freed when the file closes at the end
    /// of the pass.
    fn release(&self, offset: u64, bytes: u64) {
        let (Ok(offset), Ok(bytes)) = (libc::off_t::try_from(offset), libc::off_t::try_from(bytes))
        else {
            return;
        };
        // SAFETY: fallocate on a descriptor this struct owns; no memory is passed.
        unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset,
                bytes,
            );
        }
    }
}

impl WorkFile {
    /// Charges the task with the pages of the file's first `end` bytes not charged yet
    /// (invariant 7).
    fn charge_to(&self, end: u64) {
        let pages = end.div_ceil(PAGE_BYTES);
        let before = self.charged_pages.fetch_max(pages, AtomicOrdering::Relaxed);
        if let (Some(task), true) = (&self.task, pages > before) {
            task.add(ObjectKind::Internal, true, pages - before);
        }
    }
}

impl Drop for WorkFile {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            let pages = *self.charged_pages.get_mut();
            task.add(ObjectKind::Internal, false, pages);
        }
        if self.linked {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The OS side of a run writer: appends to the work file, failing with ENOSPC past a
/// test's space limit.
struct Sink {
    work: Arc<WorkFile>,
    space_left: Option<u64>,
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(left) = &mut self.space_left {
            if (buf.len() as u64) > *left {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            *left -= buf.len() as u64;
        }
        (&self.work.file).write(buf)
    }

    /// Nothing to do: work files are never synced, since they never outlive the process.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Appends runs to one work file.
struct RunWriter {
    out: BufWriter<Sink>,
    /// Bytes written to the file so far: where the next run starts.
    end: u64,
    sort_number: u64,
}

impl RunWriter {
    fn new(work: Arc<WorkFile>, space_left: Option<u64>, sort_number: u64) -> RunWriter {
        RunWriter {
            out: BufWriter::with_capacity(IO_BUFFER_BYTES, Sink { work, space_left }),
            end: 0,
            sort_number,
        }
    }

    fn write_row(&mut self, row: &[Value], scratch: &mut Vec<u8>) -> Result<(), SqlError> {
        scratch.clear();
        encode_row(row, scratch);
        let mut prefix = Vec::with_capacity(10);
        put_varint(&mut prefix, scratch.len() as u64);
        let written = self
            .out
            .write_all(&prefix)
            .and_then(|()| self.out.write_all(scratch));
        written.map_err(|e| self.error(&e))?;
        self.end += (prefix.len() + scratch.len()) as u64;
        Ok(())
    }

    /// Writes out what is buffered, and charges the task with the file's new pages.
    fn flush(&mut self) -> Result<(), SqlError> {
        self.out.flush().map_err(|e| self.error(&e))?;
        self.out.get_ref().work.charge_to(self.end);
        Ok(())
    }

    fn error(&self, e: &io::Error) -> SqlError {
        io_error(
            e,
            RunOp::Write,
            &self.out.get_ref().work.path,
            self.sort_number,
        )
    }

    /// The work file, once every run is flushed.
    fn into_work_file(self) -> Arc<WorkFile> {
        assert!(
            self.out.buffer().is_empty(),
            "every run is flushed when written"
        );
        let work = Arc::clone(&self.out.get_ref().work);
        drop(self.out);
        work
    }
}

/// Reads a run's segment of a work file at its own offsets (pread), so that any number of
/// runs of one file are read through one descriptor.
struct Segment {
    work: Arc<WorkFile>,
    pos: u64,
    end: u64,
}

impl Read for Segment {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = (self.end - self.pos).min(buf.len() as u64) as usize;
        if want == 0 {
            return Ok(0);
        }
        let got = self.work.file.read_at(&mut buf[..want], self.pos)?;
        self.pos += got as u64;
        Ok(got)
    }
}

/// Reads back the rows of one run, validating each (invariant 5).
struct RunReader {
    input: BufReader<Segment>,
    path: PathBuf,
    sort_number: u64,
    rows_left: u64,
    /// File offset of the run's first record.
    start: u64,
    /// File offset of the next record.
    offset: u64,
    end: u64,
}

impl RunReader {
    fn new(work: &Arc<WorkFile>, run: Run, sort_number: u64) -> RunReader {
        let end = run.offset + run.bytes;
        let capacity = (run.bytes.max(1)).min(IO_BUFFER_BYTES as u64) as usize;
        let segment = Segment {
            work: Arc::clone(work),
            pos: run.offset,
            end,
        };
        RunReader {
            input: BufReader::with_capacity(capacity, segment),
            path: work.path.clone(),
            sort_number,
            rows_left: run.rows,
            start: run.offset,
            offset: run.offset,
            end,
        }
    }

    fn next_row(&mut self, scratch: &mut Vec<u8>) -> Result<Option<Vec<Value>>, SqlError> {
        if self.rows_left == 0 {
            if self.offset != self.end {
                return Err(self.corrupt("bytes after the run's last row"));
            }
            return Ok(None);
        }
        let (len, prefix) = self.read_length()?;
        let available = self.end - self.offset - prefix;
        if len > available {
            return Err(self.corrupt(&format!(
                "record length {len} exceeds the {available} bytes left in the run"
            )));
        }
        scratch.clear();
        scratch.resize(len as usize, 0);
        self.input
            .read_exact(scratch)
            .map_err(|e| io_error(&e, RunOp::Read(self.offset), &self.path, self.sort_number))?;
        let row = decode_row(scratch).map_err(|reason| self.corrupt(&reason))?;
        self.offset += prefix + len;
        self.rows_left -= 1;
        Ok(Some(row))
    }

    /// The record length and the bytes its varint took.
    fn read_length(&mut self) -> Result<(u64, u64), SqlError> {
        let mut value = 0u64;
        for i in 0..10u32 {
            let mut byte = [0u8];
            self.input.read_exact(&mut byte).map_err(|e| {
                io_error(&e, RunOp::Read(self.offset), &self.path, self.sort_number)
            })?;
            let bits = u64::from(byte[0] & 0x7f);
            if i == 9 && byte[0] > 1 {
                break;
            }
            value |= bits << (7 * i);
            if byte[0] & 0x80 == 0 {
                return Ok((value, u64::from(i) + 1));
            }
        }
        Err(self.corrupt("record length is not a valid varint"))
    }

    fn corrupt(&self, reason: &str) -> SqlError {
        corrupt_run(&self.path, self.offset, reason)
    }
}

/// What the sort asked of the operating system when it failed.
#[derive(Debug, Clone, Copy)]
enum RunOp {
    Create,
    Write,
    /// A read of the record at this file offset.
    Read(u64),
}

/// Maps an operating-system failure on a work file to SQL Server's message (invariant 6):
/// a full disk is 1105 for tempdb's PRIMARY filegroup, naming the sort's run storage as
/// SQL Server does; anything else is 17053 naming the file and the OS error.
fn io_error(e: &io::Error, op: RunOp, path: &Path, sort_number: u64) -> SqlError {
    match e.raw_os_error() {
        Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG) => {
            let object = format!(
                "dbo.SORT temporary run storage: {}",
                RUN_STORAGE_ID_BASE + sort_number
            );
            msg(1105, &[&object, &"", &"tempdb", &"PRIMARY"])
        }
        errno => {
            let os = match errno {
                Some(errno) => os_error_text(errno),
                None if e.kind() == io::ErrorKind::UnexpectedEof => {
                    "38(Reached the end of the file.)".to_string()
                }
                None => os_error_text(libc::EIO),
            };
            let context = match op {
                RunOp::Create => format!("SORT run create '{}'", path.display()),
                RunOp::Write => format!("SORT run write '{}'", path.display()),
                RunOp::Read(offset) => {
                    format!("SORT run read '{}' at offset {offset:#x}", path.display())
                }
            };
            msg(17053, &[&context, &os])
        }
    }
}

/// Msg 17053 for a run that does not read back as it was written.
fn corrupt_run(path: &Path, offset: u64, reason: &str) -> SqlError {
    let context = format!(
        "SORT run read '{}' at offset {offset:#x} ({reason})",
        path.display()
    );
    msg(17053, &[&context, &"13(The data is invalid.)"])
}

const TAG_NULL: u8 = 0;
const TAG_BIT: u8 = 1;
const TAG_TINYINT: u8 = 2;
const TAG_SMALLINT: u8 = 3;
const TAG_INT: u8 = 4;
const TAG_BIGINT: u8 = 5;
const TAG_DECIMAL: u8 = 6;
const TAG_FLOAT: u8 = 7;
const TAG_REAL: u8 = 8;
const TAG_TEXT: u8 = 9;
const TAG_BINARY: u8 = 10;
const TAG_DATE: u8 = 11;
const TAG_DATETIME: u8 = 12;
const TAG_DATETIME2: u8 = 13;
const TAG_GUID: u8 = 14;

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn encode_row(row: &[Value], out: &mut Vec<u8>) {
    put_varint(out, row.len() as u64);
    for value in row {
        encode_value(value, out);
    }
}

fn encode_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.push(TAG_NULL),
        Value::Bit(b) => out.extend_from_slice(&[TAG_BIT, u8::from(*b)]),
        Value::TinyInt(v) => out.extend_from_slice(&[TAG_TINYINT, *v]),
        Value::SmallInt(v) => tagged(out, TAG_SMALLINT, &v.to_le_bytes()),
        Value::Int(v) => tagged(out, TAG_INT, &v.to_le_bytes()),
        Value::BigInt(v) => tagged(out, TAG_BIGINT, &v.to_le_bytes()),
        Value::Decimal { unscaled, scale } => {
            tagged(out, TAG_DECIMAL, &unscaled.to_le_bytes());
            out.push(*scale);
        }
        Value::Float(v) => tagged(out, TAG_FLOAT, &v.to_bits().to_le_bytes()),
        Value::Real(v) => tagged(out, TAG_REAL, &v.to_bits().to_le_bytes()),
        Value::Text(s) => {
            out.push(TAG_TEXT);
            put_varint(out, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        Value::Binary(b) => {
            out.push(TAG_BINARY);
            put_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        Value::Date(v) => tagged(out, TAG_DATE, &v.to_le_bytes()),
        Value::DateTime(v) => tagged(out, TAG_DATETIME, &v.to_le_bytes()),
        Value::DateTime2(v) => tagged(out, TAG_DATETIME2, &v.to_le_bytes()),
        Value::Guid(g) => tagged(out, TAG_GUID, g),
    }
}

fn tagged(out: &mut Vec<u8>, tag: u8, payload: &[u8]) {
    out.push(tag);
    out.extend_from_slice(payload);
}

/// Reads one record; every byte is checked, since it comes back from disk.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let left = self.bytes.len() - self.pos;
        if n > left {
            return Err(format!(
                "value at record byte {} needs {n} bytes, {left} left",
                self.pos
            ));
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().expect("take returns N bytes"))
    }

    fn byte(&mut self) -> Result<u8, String> {
        Ok(self.array::<1>()?[0])
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for i in 0..10u32 {
            let byte = self.byte()?;
            if i == 9 && byte > 1 {
                break;
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(format!("invalid varint before record byte {}", self.pos))
    }

    /// A length that must fit in what is left of the record.
    fn length(&mut self) -> Result<usize, String> {
        let len = self.varint()?;
        let left = (self.bytes.len() - self.pos) as u64;
        if len > left {
            return Err(format!("length {len} exceeds the {left} bytes left"));
        }
        Ok(len as usize)
    }
}

fn decode_row(bytes: &[u8]) -> Result<Vec<Value>, String> {
    let mut cursor = Cursor { bytes, pos: 0 };
    // Every value takes at least its tag byte, which bounds the allocation.
    let columns = cursor.length()?;
    let mut row = Vec::with_capacity(columns);
    for _ in 0..columns {
        row.push(decode_value(&mut cursor)?);
    }
    if cursor.pos != bytes.len() {
        return Err(format!(
            "{} bytes after the row's last value",
            bytes.len() - cursor.pos
        ));
    }
    Ok(row)
}

fn decode_value(c: &mut Cursor<'_>) -> Result<Value, String> {
    let at = c.pos;
    Ok(match c.byte()? {
        TAG_NULL => Value::Null,
        TAG_BIT => match c.byte()? {
            0 => Value::Bit(false),
            1 => Value::Bit(true),
            other => return Err(format!("bit value {other} at record byte {at}")),
        },
        TAG_TINYINT => Value::TinyInt(c.byte()?),
        TAG_SMALLINT => Value::SmallInt(i16::from_le_bytes(c.array()?)),
        TAG_INT => Value::Int(i32::from_le_bytes(c.array()?)),
        TAG_BIGINT => Value::BigInt(i64::from_le_bytes(c.array()?)),
        TAG_DECIMAL => Value::Decimal {
            unscaled: i128::from_le_bytes(c.array()?),
            scale: c.byte()?,
        },
        TAG_FLOAT => Value::Float(f64::from_bits(u64::from_le_bytes(c.array()?))),
        TAG_REAL => Value::Real(f32::from_bits(u32::from_le_bytes(c.array()?))),
        TAG_TEXT => {
            let len = c.length()?;
            let bytes = c.take(len)?;
            let text = std::str::from_utf8(bytes)
                .map_err(|_| format!("text at record byte {at} is not UTF-8"))?;
            Value::Text(text.to_string())
        }
        TAG_BINARY => {
            let len = c.length()?;
            Value::Binary(c.take(len)?.to_vec())
        }
        TAG_DATE => Value::Date(i32::from_le_bytes(c.array()?)),
        TAG_DATETIME => Value::DateTime(i64::from_le_bytes(c.array()?)),
        TAG_DATETIME2 => Value::DateTime2(i64::from_le_bytes(c.array()?)),
        TAG_GUID => Value::Guid(c.array()?),
        other => {
            return Err(format!(
                "unknown value tag {other:#04x} at record byte {at}"
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh, empty directory for one test's work files, removed at the end.
    struct ScratchDir(PathBuf);

    impl ScratchDir {
        fn new(name: &str) -> ScratchDir {
            let dir =
                std::env::temp_dir().join(format!("extentdb-spill-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            ScratchDir(dir)
        }

        fn entries(&self) -> Vec<String> {
            std::fs::read_dir(&self.0)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        }
    }

    impl Drop for ScratchDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// xorshift64, so that a failing seed replays exactly.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Rows `[key, text, sequence]`: few distinct keys and short texts, so that many rows
    /// compare equal and only the sequence number shows whether their order was kept.
    fn random_rows(seed: u64, count: usize) -> Vec<Vec<Value>> {
        let mut rng = Rng(seed);
        (0..count)
            .map(|i| {
                let len = rng.below(4) as usize;
                let text: String = (0..len)
                    .map(|_| ['a', 'b', 'é', '字'][rng.below(4) as usize])
                    .collect();
                let key = if rng.below(10) == 0 {
                    Value::Null
                } else {
                    Value::Int(rng.below(20) as i32 - 10)
                };
                vec![key, Value::Text(text), Value::BigInt(i as i64)]
            })
            .collect()
    }

    /// Orders by the key (NULL first, as SQL Server sorts it) then the text; never by the
    /// sequence number.
    fn by_key_and_text(a: &[Value], b: &[Value]) -> Ordering {
        fn key(v: &Value) -> Option<i32> {
            match v {
                Value::Int(k) => Some(*k),
                _ => None,
            }
        }
        fn text(v: &Value) -> &str {
            match v {
                Value::Text(s) => s,
                _ => "",
            }
        }
        key(&a[0])
            .cmp(&key(&b[0]))
            .then_with(|| text(&a[1]).cmp(text(&b[1])))
    }

    fn sort_all(
        dir: &Path,
        budget_bytes: usize,
        fan_in: usize,
        rows: &[Vec<Value>],
        compare: fn(&[Value], &[Value]) -> Ordering,
    ) -> (Vec<Vec<Value>>, usize, u32) {
        let mut sort = SortSpill::new(dir, budget_bytes, Box::new(compare)).with_fan_in(fan_in);
        for row in rows {
            sort.push(row.clone()).unwrap();
        }
        let runs = sort.spilled_runs();
        let sorted = sort.finish().unwrap();
        assert_eq!(sorted.spilled_runs(), runs);
        let passes = sorted.merge_passes();
        let out: Vec<Vec<Value>> = sorted.map(Result::unwrap).collect();
        (out, runs, passes)
    }

    fn std_stable_sort(rows: &[Vec<Value>]) -> Vec<Vec<Value>> {
        let mut expected = rows.to_vec();
        expected.sort_by(|a, b| by_key_and_text(a, b));
        expected
    }

    /// Proves the order and stability of a one-pass merge: 3000 random rows through a 2 KiB
    /// budget spill more runs than the default fan-in, and come back as std's stable sort.
    #[test]
    fn random_rows_with_tiny_budget_match_std_stable_sort() {
        let dir = ScratchDir::new("random");
        let rows = random_rows(0x5eed_0001, 3000);
        let (out, runs, passes) = sort_all(&dir.0, 2048, DEFAULT_FAN_IN, &rows, by_key_and_text);
        assert!(runs > DEFAULT_FAN_IN, "only {runs} runs");
        assert!(passes >= 1);
        assert_eq!(out, std_stable_sort(&rows));
        assert!(dir.entries().is_empty());
    }

    /// Proves a spool keeps push order: 3000 random rows through a 2 KiB budget spill more
    /// runs than the fan-in, yet come back exactly as pushed, with no merge pass, in windows.
    #[test]
    fn a_spool_gives_rows_back_in_push_order_without_merging() {
        let dir = ScratchDir::new("spool");
        let rows = random_rows(0x5eed_0007, 3000);
        let mut spool = SortSpill::fifo(&dir.0, 2048).with_fan_in(2);
        for row in &rows {
            spool.push(row.clone()).unwrap();
        }
        assert!(spool.spilled_runs() > DEFAULT_FAN_IN);
        let mut out = spool.finish().unwrap();
        assert_eq!(out.merge_passes(), 0);
        let mut back = Vec::new();
        loop {
            let window = out.window(7).unwrap();
            if window.is_empty() {
                break;
            }
            assert!(window.len() == 7 || back.len() + window.len() == rows.len());
            back.extend(window);
        }
        assert_eq!(back, rows);
        assert!(dir.entries().is_empty());
    }

    /// Proves a rewindable spool gives every row back in push order on each reading, from
    /// its spilled runs and its tail alike, and that two readings may interleave.
    #[test]
    fn a_rewindable_spool_reads_the_same_rows_every_time() {
        let dir = ScratchDir::new("rewind");
        let rows = random_rows(0x5eed_0011, 2000);
        let mut spool = SortSpill::fifo(&dir.0, 2048);
        for row in &rows {
            spool.push(row.clone()).unwrap();
        }
        assert!(spool.spilled_runs() > 2);
        let spool = spool.finish_rewindable().unwrap();
        for _ in 0..3 {
            let back: Vec<_> = spool.rows().map(Result::unwrap).collect();
            assert_eq!(back, rows);
        }
        let mut a = spool.rows();
        let mut b = spool.rows();
        for row in &rows {
            assert_eq!(&a.next().unwrap().unwrap(), row);
            assert_eq!(&b.next().unwrap().unwrap(), row);
        }
        assert!(a.next().is_none() && b.next().is_none());
        drop((a, b));
        drop(spool);
        assert!(dir.entries().is_empty());
        let empty = SortSpill::fifo(&dir.0, 2048).finish_rewindable().unwrap();
        assert!(empty.rows().next().is_none());
    }

    /// Proves multi-pass merges keep order and stability: fan-ins of 2 and 3 over hundreds of
    /// runs need several passes, for several seeds and budgets.
    #[test]
    fn multi_pass_merges_with_small_fan_in_match_std_stable_sort() {
        let dir = ScratchDir::new("passes");
        for seed in 1..=4u64 {
            let rows = random_rows(seed * 0x9e37_79b9, 1500 + seed as usize * 97);
            let expected = std_stable_sort(&rows);
            for (fan_in, budget) in [(2, 700), (3, 1500), (5, 300)] {
                let (out, runs, passes) = sort_all(&dir.0, budget, fan_in, &rows, by_key_and_text);
                assert!(runs > fan_in * fan_in, "seed {seed}: only {runs} runs");
                assert!(passes >= 2, "seed {seed}: {passes} passes");
                assert_eq!(
                    out, expected,
                    "seed {seed}, fan-in {fan_in}, budget {budget}"
                );
            }
        }
        assert!(dir.entries().is_empty());
    }

    /// Proves invariant 7: the pages a sort's work files take are charged to the task that
    /// ran it as internal objects, at least its spilled bytes in 8 KB pages and at most one
    /// partial page more per work file (the first and each merge pass's), and every one is
    /// deallocated by the time the sorted rows are read and dropped; a sort that stays in
    /// memory charges nothing.
    #[test]
    fn spilled_pages_are_charged_to_the_task_and_given_back() {
        let dir = ScratchDir::new("charged");
        let task = Arc::new(SpaceCounters::default());
        let _charge = task_space::charge_to(task.clone());
        let rows = random_rows(0x5eed_0007, 3000);
        let _ = sort_all(&dir.0, 1 << 24, 2, &rows, by_key_and_text);
        assert_eq!(task.read(), task_space::SpaceUsage::default());
        let mut sort = SortSpill::new(&dir.0, 4096, Box::new(by_key_and_text)).with_fan_in(4);
        for row in &rows {
            sort.push(row.clone()).unwrap();
        }
        let sorted = sort.finish().unwrap();
        let (bytes, files) = (sorted.spilled_bytes(), 1 + u64::from(sorted.merge_passes()));
        let alloc = task.read().internal_alloc_pages;
        assert!(
            sorted.merge_passes() >= 2,
            "{} passes",
            sorted.merge_passes()
        );
        assert!(
            alloc >= bytes.div_ceil(PAGE_BYTES),
            "{alloc} pages for {bytes} bytes"
        );
        assert!(
            alloc <= bytes.div_ceil(PAGE_BYTES) + files,
            "{alloc} for {bytes} bytes"
        );
        assert_eq!(sorted.map(Result::unwrap).count(), rows.len());
        let done = task.read();
        assert_eq!(
            (done.internal_dealloc_pages, done.user_alloc_pages),
            (alloc, 0)
        );
    }

    /// Proves the empty input: no rows, no runs and no file.
    #[test]
    fn empty_input_yields_nothing_and_creates_no_file() {
        let dir = ScratchDir::new("empty");
        for budget in [0, 1 << 20] {
            let (out, runs, passes) = sort_all(&dir.0, budget, 2, &[], by_key_and_text);
            assert!(out.is_empty());
            assert_eq!((runs, passes), (0, 0));
        }
        assert!(dir.entries().is_empty());
    }

    /// Proves a single row comes back, whether it stays in memory or (budget 0, then a
    /// second sort forced to spill it) goes through a run.
    #[test]
    fn one_row_comes_back() {
        let dir = ScratchDir::new("one");
        let row = vec![Value::Int(7), Value::Text("x".into()), Value::BigInt(0)];
        let (out, runs, _) = sort_all(
            &dir.0,
            1 << 20,
            2,
            std::slice::from_ref(&row),
            by_key_and_text,
        );
        assert_eq!((out, runs), (vec![row.clone()], 0));

        let mut sort = SortSpill::new(&dir.0, 0, Box::new(by_key_and_text));
        sort.push(row.clone()).unwrap();
        sort.spill().unwrap();
        assert_eq!(sort.spilled_runs(), 1);
        let out: Vec<_> = sort.finish().unwrap().map(Result::unwrap).collect();
        assert_eq!(out, vec![row]);
    }

    /// Proves stability on its own: when every row compares equal, rows come back in push
    /// order across many runs and passes.
    #[test]
    fn equal_keys_keep_input_order() {
        let dir = ScratchDir::new("equal");
        let rows: Vec<Vec<Value>> = (0..2000).map(|i| vec![Value::Int(i)]).collect();
        let (out, runs, passes) = sort_all(&dir.0, 256, 3, &rows, |_, _| Ordering::Equal);
        assert!(runs > 9 && passes >= 2, "{runs} runs, {passes} passes");
        assert_eq!(out, rows);
    }

    /// One value of each kind at its edges; the exhaustive match makes a new `Value`
    /// variant fail to compile here until it is added to the samples.
    fn every_variant() -> Vec<Value> {
        let samples = vec![
            Value::Null,
            Value::Bit(false),
            Value::Bit(true),
            Value::TinyInt(0),
            Value::TinyInt(u8::MAX),
            Value::SmallInt(i16::MIN),
            Value::Int(i32::MIN),
            Value::Int(-1),
            Value::BigInt(i64::MAX),
            Value::Decimal {
                unscaled: -99_999_999_999_999_999_999_999_999_999_999_999_999,
                scale: 38,
            },
            Value::Decimal {
                unscaled: i128::MIN,
                scale: 255,
            },
            Value::Float(f64::NAN),
            Value::Float(f64::from_bits(0x7ff8_0000_dead_beef)),
            Value::Float(-0.0),
            Value::Float(f64::NEG_INFINITY),
            Value::Float(f64::MIN_POSITIVE / 2.0),
            Value::Real(f32::from_bits(0xffc0_1234)),
            Value::Real(-0.0),
            Value::Text(String::new()),
            Value::Text("Grüße, 世界, 🦀, \u{0}, \u{10ffff}, \u{fffd}".into()),
            Value::Text("x".repeat(100_000)),
            Value::Binary(Vec::new()),
            Value::Binary((0..=255).collect()),
            Value::Date(0),
            Value::Date(3_652_058),
            Value::DateTime(-1),
            Value::DateTime2(3_155_378_975_999_999_999),
            Value::Guid([0xff; 16]),
            Value::Guid(*b"0123456789abcdef"),
        ];
        for v in &samples {
            match v {
                Value::Null
                | Value::Bit(_)
                | Value::TinyInt(_)
                | Value::SmallInt(_)
                | Value::Int(_)
                | Value::BigInt(_)
                | Value::Decimal { .. }
                | Value::Float(_)
                | Value::Real(_)
                | Value::Text(_)
                | Value::Binary(_)
                | Value::Date(_)
                | Value::DateTime(_)
                | Value::DateTime2(_)
                | Value::Guid(_) => {}
            }
        }
        samples
    }

    /// Equality that tells NaN payloads and -0.0 apart: the encoding of both sides.
    fn exact(row: &[Value]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_row(row, &mut out);
        out
    }

    /// Proves every value kind round-trips exactly (NaN payloads, -0.0, Unicode, the
    /// decimal and date extremes) through runs on disk and a merge pass.
    #[test]
    fn every_value_variant_round_trips_through_a_spill() {
        let dir = ScratchDir::new("variants");
        let values = every_variant();
        let mut rows: Vec<Vec<Value>> = values.iter().map(|v| vec![v.clone()]).collect();
        rows.push(values.clone());
        rows.push(Vec::new());
        let (out, runs, passes) = sort_all(&dir.0, 0, 2, &rows, |_, _| Ordering::Equal);
        // Budget 0: every row but the last (the in-memory tail) is a run of its own.
        assert!(
            runs == rows.len() - 1 && passes >= 1,
            "{runs} runs, {passes} passes"
        );
        assert_eq!(out.len(), rows.len());
        for (got, want) in out.iter().zip(&rows) {
            assert_eq!(exact(got), exact(want));
            assert_eq!(decode_row(&exact(want)).map(|r| exact(&r)), Ok(exact(want)));
        }
        // The bit-level check above, spelled out for the values `==` cannot compare.
        match (&out[12][0], &out[13][0]) {
            (Value::Float(nan), Value::Float(zero)) => {
                assert_eq!(nan.to_bits(), 0x7ff8_0000_dead_beef);
                assert_eq!(zero.to_bits(), (-0.0f64).to_bits());
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Proves invariant 4: work files are private (0600) and never visible in the
    /// directory, before, while and after rows are spilled, read back and dropped.
    #[test]
    fn work_files_vanish_from_the_directory() {
        use std::os::unix::fs::PermissionsExt;
        let dir = ScratchDir::new("vanish");
        let rows = random_rows(42, 500);
        let mut sort = SortSpill::new(&dir.0, 512, Box::new(by_key_and_text)).with_fan_in(4);
        assert!(dir.entries().is_empty());
        for row in &rows {
            sort.push(row.clone()).unwrap();
            assert!(dir.entries().is_empty());
        }
        assert!(sort.spilled_runs() > 16);
        let writer = sort.writer.as_ref().unwrap();
        let work = &writer.out.get_ref().work;
        let mode = work.file.metadata().unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!work.linked);
        let name = work
            .path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(
            name.starts_with(&format!("extentdb-sort-{}-", std::process::id()))
                && name.ends_with(".tmp"),
            "{name}"
        );
        let mut sorted = sort.finish().unwrap();
        assert!(sorted.merge_passes() >= 1);
        for _ in 0..100 {
            sorted.next().unwrap().unwrap();
            assert!(dir.entries().is_empty());
        }
        drop(sorted);
        assert!(dir.entries().is_empty());
    }

    /// Proves the startup sweep removes work files a crash left (and nothing else).
    #[test]
    fn leftover_work_files_are_removed_at_startup() {
        let dir = ScratchDir::new("leftover");
        for name in [
            "extentdb-sort-1-2-0.tmp",
            "extentdb-sort-9-0-3.tmp",
            "tempdb.mdf",
        ] {
            std::fs::write(dir.0.join(name), b"x").unwrap();
        }
        assert_eq!(remove_leftover_work_files(&dir.0), 2);
        assert_eq!(dir.entries(), vec!["tempdb.mdf".to_string()]);
        std::fs::remove_file(dir.0.join("tempdb.mdf")).unwrap();
    }

    /// Proves the fallback of invariant 4: a work file whose name stayed in the directory
    /// is removed when the sort is dropped, here in the middle of reading it.
    #[test]
    fn work_files_left_at_creation_are_removed_on_drop() {
        let dir = ScratchDir::new("linked");
        let mut sort = SortSpill::new(&dir.0, 256, Box::new(by_key_and_text)).with_fan_in(3);
        sort.unlink_at_create = false;
        for row in random_rows(7, 300) {
            sort.push(row).unwrap();
        }
        assert_eq!(dir.entries().len(), 1);
        let mut sorted = sort.finish().unwrap();
        sorted.next().unwrap().unwrap();
        assert_eq!(
            dir.entries().len(),
            1,
            "only the last pass's file is still open"
        );
        drop(sorted);
        assert!(dir.entries().is_empty());
    }

    /// Proves the budget of invariant 2 holds after every push: rows and slots fit, or the
    /// buffer holds a single (oversized) row.
    #[test]
    fn memory_stays_within_budget_while_pushing() {
        let dir = ScratchDir::new("budget");
        for budget in [0, 100, 1000, 10_000] {
            let mut sort = SortSpill::new(&dir.0, budget, Box::new(by_key_and_text));
            for (i, row) in random_rows(budget as u64 + 1, 400).into_iter().enumerate() {
                let row = if i % 50 == 0 {
                    vec![Value::Text("y".repeat(budget + 10))]
                } else {
                    row
                };
                sort.push(row).unwrap();
                let used = sort.rows_bytes + sort.buffer.capacity() * SLOT_BYTES;
                assert!(
                    used <= budget || sort.buffer.len() == 1,
                    "budget {budget}: {used} bytes in {} rows",
                    sort.buffer.len()
                );
            }
        }
    }

    /// Proves a full disk while spilling is SQL Server's 1105 for tempdb, and leaves no file.
    #[test]
    fn full_disk_is_msg_1105_for_tempdb() {
        let dir = ScratchDir::new("full");
        let mut sort = SortSpill::new(&dir.0, 0, Box::new(by_key_and_text));
        sort.space_limit = Some(IO_BUFFER_BYTES as u64);
        let sort_number = sort.sort_number;
        let err = random_rows(3, 100_000)
            .into_iter()
            .find_map(|row| sort.push(row).err())
            .expect("the disk fills");
        assert_eq!((err.number, err.severity), (1105, 17));
        assert_eq!(
            err.text,
            format!(
                "Could not allocate space for object 'dbo.SORT temporary run storage: {}' in \
                 database 'tempdb' because the 'PRIMARY' filegroup is full. Create disk space \
                 by deleting unneeded files, dropping objects in the filegroup, adding \
                 additional files to the filegroup, or setting autogrowth on for existing \
                 files in the filegroup.",
                RUN_STORAGE_ID_BASE + sort_number
            )
        );
        // The runs may be incomplete now: the sort gives the same error, never a panic.
        assert_eq!(sort.push(vec![Value::Int(1)]), Err(err.clone()));
        assert!(dir.entries().is_empty());
        assert_eq!(sort.finish().err(), Some(err));
        assert!(dir.entries().is_empty());
    }

    /// Proves the mapping of invariant 6 directly: disk-full errnos are 1105 with SQL
    /// Server's own object id for the first sort; other failures are 17053 naming the file
    /// and the OS error in Windows form.
    #[test]
    fn os_errors_map_to_sql_server_messages() {
        let path = Path::new("/data/tempdb/extentdb-sort-1-0-0.tmp");
        for errno in [libc::ENOSPC, libc::EDQUOT, libc::EFBIG] {
            let e = io_error(&io::Error::from_raw_os_error(errno), RunOp::Write, path, 0);
            assert_eq!(e.number, 1105);
            assert!(e.text.starts_with(
                "Could not allocate space for object 'dbo.SORT temporary run storage: \
                 140737488355328' in database 'tempdb' because the 'PRIMARY' filegroup is full."
            ));
        }
        let e = io_error(
            &io::Error::from_raw_os_error(libc::EACCES),
            RunOp::Create,
            path,
            0,
        );
        assert_eq!((e.number, e.severity), (17053, 16));
        assert_eq!(
            e.text,
            "SORT run create '/data/tempdb/extentdb-sort-1-0-0.tmp': Operating system error \
             5(Access is denied.) encountered."
        );
        let e = io_error(
            &io::Error::from_raw_os_error(libc::EIO),
            RunOp::Read(0x2000),
            path,
            0,
        );
        assert!(e.text.starts_with(&format!(
            "SORT run read '{}' at offset 0x2000: Operating system error {}(",
            path.display(),
            libc::EIO
        )));
        let eof = io::Error::from(io::ErrorKind::UnexpectedEof);
        let e = io_error(&eof, RunOp::Read(16), path, 0);
        assert!(e
            .text
            .ends_with("Operating system error 38(Reached the end of the file.) encountered."));
        assert!(crate::messages::is_event_logged(&e));
    }

    /// Proves a directory that does not exist fails the first spill with 17053 naming the
    /// file, and that a sort which never spills does not touch the directory at all.
    #[test]
    fn missing_directory_is_msg_17053_at_the_first_spill() {
        let dir = std::env::temp_dir().join("extentdb-spill-no-such-directory/sub");
        let mut sort = SortSpill::new(&dir, 1 << 20, Box::new(by_key_and_text));
        sort.push(vec![Value::Int(1)]).unwrap();
        assert_eq!(sort.finish().unwrap().count(), 1);

        let mut sort = SortSpill::new(&dir, 0, Box::new(by_key_and_text));
        sort.push(vec![Value::Int(1)]).unwrap();
        let err = sort.push(vec![Value::Int(2)]).unwrap_err();
        assert_eq!(err.number, 17053);
        assert!(err
            .text
            .contains("extentdb-spill-no-such-directory/sub/extentdb-sort-"));
        assert!(err.text.ends_with(
            "Operating system error 2(The system cannot find the file specified.) encountered."
        ));
    }

    /// Proves invariant 5 end to end: a byte changed in a work file is an error, not a
    /// panic or a wrong row.
    #[test]
    fn damaged_work_file_is_an_error() {
        let dir = ScratchDir::new("damaged");
        let mut sort = SortSpill::new(&dir.0, 0, Box::new(by_key_and_text));
        for row in random_rows(9, 10) {
            sort.push(row).unwrap();
        }
        // The first record: its length, its column count, then the first value's tag.
        let work = Arc::clone(&sort.writer.as_ref().unwrap().out.get_ref().work);
        work.file.write_at(&[0xee], 2).unwrap();
        let err = match sort.finish() {
            Err(e) => e,
            Ok(_) => panic!("a damaged run was read"),
        };
        assert_eq!(err.number, 17053);
        assert!(err.text.contains("unknown value tag 0xee"), "{}", err.text);
        assert!(err
            .text
            .ends_with("Operating system error 13(The data is invalid.) encountered."));
    }

    /// Proves the decoder rejects damaged records with a reason and never panics: named
    /// damage, then every truncation and random byte flips of a record of every kind.
    #[test]
    fn damaged_records_are_rejected_never_panic() {
        assert!(decode_row(&[1, TAG_BIT, 2])
            .unwrap_err()
            .contains("bit value 2"));
        assert!(decode_row(&[1, TAG_TEXT, 1, 0xff])
            .unwrap_err()
            .contains("not UTF-8"));
        assert!(decode_row(&[1, TAG_NULL, 0])
            .unwrap_err()
            .contains("after the row"));
        assert!(decode_row(&[1, TAG_TEXT, 0x80, 0x80, 0x01]).is_err());
        assert!(decode_row(&[0xff; 11]).is_err());
        let record = exact(&every_variant());
        assert_eq!(decode_row(&record).map(|r| exact(&r)), Ok(record.clone()));
        for cut in 0..record.len() {
            assert!(decode_row(&record[..cut]).is_err(), "cut at {cut}");
        }
        let mut rng = Rng(0xdead_beef);
        for _ in 0..20_000 {
            let mut bytes = record[..record.len().min(400)].to_vec();
            for _ in 0..=rng.below(4) {
                let at = rng.below(bytes.len() as u64) as usize;
                bytes[at] = rng.next() as u8;
            }
            let _ = decode_row(&bytes);
        }
    }

    /// Proves the sorted rows can move to another thread (a session's worker).
    #[test]
    fn sorts_are_send() {
        fn send<T: Send>() {}
        send::<SortSpill>();
        send::<SortedRows>();
    }
}
