//! One frame of the buffer pool (`buffer_pool`): a cached page behind its own latch, SQL
//! Server's buffer latch. A session takes it shared (PAGELATCH_SH) to read the page and
//! exclusively (PAGELATCH_EX) to change it; the session that reads the page from disk holds
//! it exclusively while the read is in progress, and the session that writes a dirty page
//! back holds it shared meanwhile, so whoever waits for a frame with I/O in progress waits
//! as PAGEIOLATCH_SH or PAGEIOLATCH_EX (waits.rs counts every wait; a latch taken at once
//! counts nothing).
//!
//! A frame is used through a `Fix` (SQL Server's buffer keep count): the pool adds one only
//! under its map latch, and the `Fix` gives it back when dropped. The pool evicts only a
//! frame without fixes, which therefore nobody latches (buffer_pool.rs invariant 7).
//!
//! Frame states (`io`), each with who holds the latch:
//!
//! ```text
//!  inserted by a miss ──> READING (EX, the reader) ──ok──> IDLE <──> WRITING (SH, the evictor)
//!                              │                           (SH readers, EX a change)
//!                              └──failed──> out of the map; `failed` set before the latch
//!                                           is released: its waiters get the error
//! ```
//!
//! Invariants:
//! 1. A thread waits for a frame latch only while it holds no other frame latch
//!    (`LATCHES_HELD`, asserted): two frames' latches never wait for each other.
//! 2. A frame whose read failed is never read: every latch taken through a `Fix` checks
//!    `failed` first, and its waiters return the reader's error (a copy of it), never the
//!    frame's zero page.
//! 3. `dirty` is set only under the EX latch, with the change; it is cleared only by a
//!    writer of the page holding the latch (SH or EX), so a page marked clean is the one
//!    written.
//! 4. A thread holds at most one fix at a time (`FIXES_HELD`, asserted), and the pool's
//!    count of fixes held is at least the sum of its frames' fixes (taken: the pool's count
//!    first; given back: the frame's first). So the pool can tell how many sessions are
//!    inside it (buffer_pool.rs invariant 2).

use std::cell::Cell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};

use extentdb_format::{Page, PageId};
use extentdb_io::IoError;

use crate::waits::{self, WaitType};
use crate::StorageError;

/// No I/O on the frame.
pub(crate) const IO_NONE: u8 = 0;
/// Its page is being read from disk (the reader holds the latch EX).
pub(crate) const IO_READ: u8 = 1;
/// Its dirty page is being written back (the writer holds the latch SH).
pub(crate) const IO_WRITE: u8 = 2;

thread_local! {
    /// Frame latches this thread holds (invariant 1).
    static LATCHES_HELD: Cell<usize> = const { Cell::new(0) };
    /// Fixes this thread holds (invariant 4).
    static FIXES_HELD: Cell<usize> = const { Cell::new(0) };
}

pub(crate) struct Frame {
    pub(crate) pid: PageId,
    /// The frame's latch, over its page.
    latch: RwLock<Page>,
    /// Changed since it was read or last written (invariant 3).
    pub(crate) dirty: AtomicBool,
    /// The clock's second chance: set by every fix.
    pub(crate) referenced: AtomicBool,
    /// Sessions using the frame; grows only under the pool's map latch.
    pub(crate) fixes: AtomicUsize,
    /// IO_NONE, IO_READ or IO_WRITE: what a waiter for the latch waits for.
    pub(crate) io: AtomicU8,
    /// The failed read's error, for the sessions that waited on it (invariant 2).
    failed: Mutex<Option<StorageError>>,
}

impl Frame {
    /// A frame for `page`, not yet in any map, with no fix.
    pub(crate) fn new(pid: PageId, page: Page, dirty: bool, io: u8) -> Frame {
        Frame {
            pid,
            latch: RwLock::new(page),
            dirty: AtomicBool::new(dirty),
            referenced: AtomicBool::new(true),
            fixes: AtomicUsize::new(0),
            io: AtomicU8::new(io),
            failed: Mutex::new(None),
        }
    }

    /// The latch exclusively without waiting: the frame a miss just created, which no
    /// other session can reach yet. Counted as held (invariant 1).
    pub(crate) fn ex_new(&self) -> Latched<RwLockWriteGuard<'_, Page>> {
        let g = match self.latch.try_write() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => {
                panic!("frame {} latched before it is shared", self.pid)
            }
        };
        Latched::new(g)
    }

    /// Whether anyone holds the latch (the pool asserts an unfixed frame is unlatched).
    pub(crate) fn is_latched(&self) -> bool {
        matches!(self.latch.try_write(), Err(TryLockError::WouldBlock))
    }

    /// The page, for a path holding the pool exclusively (no latch needed).
    pub(crate) fn page_mut(&mut self) -> &mut Page {
        self.latch.get_mut().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that the read of this frame failed with `e` (invariant 2), while the reader
    /// still holds the latch.
    pub(crate) fn fail(&self, e: &StorageError) {
        *self.failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(copy_read_error(e));
    }

    fn failure(&self) -> Option<StorageError> {
        let f = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        f.as_ref().map(copy_read_error)
    }

    /// The latch shared, waiting (PAGEIOLATCH_SH while I/O is in progress, else
    /// PAGELATCH_SH) when a session holds it exclusively.
    fn sh(&self) -> Latched<RwLockReadGuard<'_, Page>> {
        let g = match self.latch.try_read() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => {
                let kind = match self.io.load(Ordering::Acquire) {
                    IO_NONE => WaitType::PageLatchSh,
                    _ => WaitType::PageIoLatchSh,
                };
                assert_holds_none(self.pid);
                waits::timed(kind, || {
                    self.latch.read().unwrap_or_else(|e| e.into_inner())
                })
            }
        };
        Latched::new(g)
    }

    /// The latch exclusively, waiting (PAGEIOLATCH_EX while I/O is in progress, else
    /// PAGELATCH_EX) when a session holds it.
    fn ex(&self) -> Latched<RwLockWriteGuard<'_, Page>> {
        let g = match self.latch.try_write() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => {
                let kind = match self.io.load(Ordering::Acquire) {
                    IO_NONE => WaitType::PageLatchEx,
                    _ => WaitType::PageIoLatchEx,
                };
                assert_holds_none(self.pid);
                waits::timed(kind, || {
                    self.latch.write().unwrap_or_else(|e| e.into_inner())
                })
            }
        };
        Latched::new(g)
    }
}

/// Invariant 1: a thread about to wait for frame `pid`'s latch holds no frame latch.
fn assert_holds_none(pid: PageId) {
    let held = LATCHES_HELD.with(Cell::get);
    assert_eq!(
        held, 0,
        "waiting for frame {pid}'s latch while holding {held} frame latches"
    );
}

/// A frame latch held (shared or exclusive), counted for invariant 1 until dropped.
pub(crate) struct Latched<G>(G);

impl<G> Latched<G> {
    fn new(g: G) -> Latched<G> {
        LATCHES_HELD.with(|h| h.set(h.get() + 1));
        Latched(g)
    }
}

impl<G> Drop for Latched<G> {
    fn drop(&mut self) {
        LATCHES_HELD.with(|h| h.set(h.get() - 1));
    }
}

impl<G: Deref<Target = Page>> Deref for Latched<G> {
    type Target = Page;
    fn deref(&self) -> &Page {
        &self.0
    }
}

impl<G: DerefMut<Target = Page>> DerefMut for Latched<G> {
    fn deref_mut(&mut self) -> &mut Page {
        &mut self.0
    }
}

/// A fix on a frame: the frame stays in the pool (unevicted) until it is dropped. Taken
/// only under the pool's map latch (`Fix::take`), or on a frame out of the map.
pub(crate) struct Fix<'a> {
    frame: Arc<Frame>,
    /// The pool's count of fixes held (invariant 4).
    held: &'a AtomicUsize,
}

impl<'a> Fix<'a> {
    /// Fixes `frame`, counted in the pool's `held`; the caller holds the pool's map latch
    /// when the frame is in the map.
    pub(crate) fn take(frame: &Arc<Frame>, held: &'a AtomicUsize) -> Fix<'a> {
        FIXES_HELD.with(|n| {
            assert_eq!(
                n.get(),
                0,
                "invariant 4: a second fix, on frame {}",
                frame.pid
            );
            n.set(1);
        });
        held.fetch_add(1, Ordering::AcqRel);
        frame.fixes.fetch_add(1, Ordering::AcqRel);
        frame.referenced.store(true, Ordering::Relaxed);
        Fix {
            frame: frame.clone(),
            held,
        }
    }

    pub(crate) fn frame(&self) -> &Arc<Frame> {
        &self.frame
    }

    /// The page shared, unless its read failed (invariant 2).
    pub(crate) fn sh(&self) -> Result<Latched<RwLockReadGuard<'_, Page>>, StorageError> {
        let g = self.frame.sh();
        match self.frame.failure() {
            Some(e) => Err(e),
            None => Ok(g),
        }
    }

    /// The page exclusively, unless its read failed (invariant 2).
    pub(crate) fn ex(&self) -> Result<Latched<RwLockWriteGuard<'_, Page>>, StorageError> {
        let g = self.frame.ex();
        match self.frame.failure() {
            Some(e) => Err(e),
            None => Ok(g),
        }
    }
}

impl Drop for Fix<'_> {
    fn drop(&mut self) {
        let before = self.frame.fixes.fetch_sub(1, Ordering::AcqRel);
        assert!(
            before > 0,
            "frame {} unfixed more often than fixed",
            self.frame.pid
        );
        self.held.fetch_sub(1, Ordering::AcqRel);
        FIXES_HELD.with(|n| n.set(0));
    }
}

/// A page latched exclusively for a change: marking it dirty is part of the change
/// (invariant 3).
pub struct PageMut<'a> {
    page: &'a mut Page,
    dirty: &'a AtomicBool,
}

impl<'a> PageMut<'a> {
    pub(crate) fn new(page: &'a mut Page, dirty: &'a AtomicBool) -> PageMut<'a> {
        PageMut { page, dirty }
    }

    /// Marks the page changed; its header LSN must already be the change's LSN.
    pub fn mark_dirty(&mut self) {
        self.dirty.store(true, Ordering::Release);
    }
}

impl Deref for PageMut<'_> {
    type Target = Page;
    fn deref(&self) -> &Page {
        self.page
    }
}

impl DerefMut for PageMut<'_> {
    fn deref_mut(&mut self) -> &mut Page {
        self.page
    }
}

/// A copy of a page read's error for each session that waited on the read (the error
/// types do not clone: an OS error keeps its number and text).
fn copy_read_error(e: &StorageError) -> StorageError {
    match e {
        StorageError::Format(f) => StorageError::Format(f.clone()),
        StorageError::PageOutOfRange { page, size_pages } => StorageError::PageOutOfRange {
            page: *page,
            size_pages: *size_pages,
        },
        StorageError::FileNotFound(f) => StorageError::FileNotFound(f.clone()),
        StorageError::Io(IoError::Crashed) => StorageError::Io(IoError::Crashed),
        StorageError::Io(IoError::Os {
            op,
            path,
            offset,
            source,
        }) => StorageError::Io(IoError::Os {
            op,
            path: path.clone(),
            offset: *offset,
            source: match source.raw_os_error() {
                Some(code) => std::io::Error::from_raw_os_error(code),
                None => std::io::Error::new(source.kind(), source.to_string()),
            },
        }),
        // A page read fails with one of the above; anything else keeps its text.
        other => StorageError::Io(IoError::Os {
            op: "read",
            path: Default::default(),
            offset: None,
            source: std::io::Error::other(other.to_string()),
        }),
    }
}
