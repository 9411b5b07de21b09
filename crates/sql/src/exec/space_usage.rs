//! sys.dm_db_session_space_usage and sys.dm_db_task_space_usage: the tempdb pages each
//! session and each running task allocated and freed, with SQL Server's columns (SQL Server
//! 2022's: the session view's `user_objects_deferred_dealloc_page_count` too).
//!
//! The counting is storage's `task_space.rs`: a request is a task, charged from its start
//! to its end (`Session::execute_streaming`), and so are the other things a session does
//! in tempdb outside a batch (a transaction-manager COMMIT or ROLLBACK, sp_reset_connection,
//! its end, which drops its #temp tables and the ##tables it made). User objects are counted
//! where storage claims or gives back a tempdb extent (8 pages each); internal objects are
//! counted by `spill.rs` as 8 KB pages of data written to a sort's or a spool's work files,
//! freed when the work file closes: those files lie beside tempdb's data files rather than
//! in its pages, so there is no page of tempdb to count, and the pages of spilled data are
//! what SQL Server's spill would have taken there.
//!
//! Rows: the session view has one row per session sys.dm_exec_sessions lists (its
//! completed tasks only, invariant 2 of `task_space.rs`: a running task is not in it); the
//! task view one row per running request, with sys.dm_exec_requests' request_id (0: a
//! session runs one request at a time) and exec_context_id 0 (a request runs as one task;
//! there are no parallel plans). database_id is tempdb's (2) in both. Both need VIEW SERVER
//! STATE (Msgs 300 and 297, `Session::view_server_state_scope`), as SQL Server's do.
//!
//! `user_objects_deferred_dealloc_page_count` is 0: a dropped table's extents are freed at
//! once (storage's `free_allocation_unit`), so nothing waits for deferred deallocation.

use std::sync::atomic::Ordering;

use extentdb_storage::instance::{Instance, TEMPDB_ID};
use extentdb_storage::task_space::SpaceUsage;

use super::views::{cols, Rowset};
use super::Session;
use crate::types::{SqlType, Value};

impl Session {
    /// Runs `f` as a task of this session outside a batch: its tempdb pages are charged
    /// to it, and added to the session's counts when it ends.
    pub(super) fn as_task<R>(&mut self, f: impl FnOnce(&mut Session) -> R) -> R {
        let info = self.info.clone();
        let _task = info.space.begin_task();
        let r = f(self);
        info.space.end_task();
        r
    }
}

/// The four page counters of a reading, as the views' bigint columns.
fn counters(u: SpaceUsage) -> [Value; 4] {
    let big = |n: u64| Value::BigInt(i64::try_from(n).unwrap_or(i64::MAX));
    [
        big(u.user_alloc_pages),
        big(u.user_dealloc_pages),
        big(u.internal_alloc_pages),
        big(u.internal_dealloc_pages),
    ]
}

const COUNTER_COLUMNS: [(&str, SqlType); 4] = [
    ("user_objects_alloc_page_count", SqlType::BigInt),
    ("user_objects_dealloc_page_count", SqlType::BigInt),
    ("internal_objects_alloc_page_count", SqlType::BigInt),
    ("internal_objects_dealloc_page_count", SqlType::BigInt),
];

/// sys.dm_db_session_space_usage: one row per session, its completed tasks' pages.
pub(super) fn session_space_usage(inst: &Instance) -> Rowset {
    let mut spec = vec![
        ("session_id", SqlType::SmallInt),
        ("database_id", SqlType::SmallInt),
    ];
    spec.extend(COUNTER_COLUMNS);
    spec.push(("user_objects_deferred_dealloc_page_count", SqlType::BigInt));
    let rows = inst
        .sessions
        .lock()
        .unwrap()
        .values()
        .map(|s| {
            let mut row = vec![
                Value::SmallInt(s.session_id as i16),
                Value::SmallInt(TEMPDB_ID as i16),
            ];
            row.extend(counters(s.space.completed()));
            row.push(Value::BigInt(0));
            row
        })
        .collect();
    Rowset {
        columns: cols(&spec),
        rows,
    }
}

/// sys.dm_db_task_space_usage: one row per running request, its pages so far.
pub(super) fn task_space_usage(inst: &Instance) -> Rowset {
    let mut spec = vec![
        ("session_id", SqlType::SmallInt),
        ("request_id", SqlType::Int),
        ("exec_context_id", SqlType::Int),
        ("database_id", SqlType::SmallInt),
    ];
    spec.extend(COUNTER_COLUMNS);
    let rows = inst
        .sessions
        .lock()
        .unwrap()
        .values()
        .filter(|s| s.running.load(Ordering::Acquire))
        .map(|s| {
            let mut row = vec![
                Value::SmallInt(s.session_id as i16),
                Value::Int(0),
                Value::Int(0),
                Value::SmallInt(TEMPDB_ID as i16),
            ];
            row.extend(counters(s.space.running_task()));
            row
        })
        .collect();
    Rowset {
        columns: cols(&spec),
        rows,
    }
}
