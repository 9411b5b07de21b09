//! What a DBA sees of locking: sys.dm_tran_locks (SQL Server's columns), the LCK_M_* rows
//! of sys.dm_os_wait_stats, and the wait columns of sys.dm_exec_requests
//! (blocking_session_id, wait_type, wait_time, last_wait_type, wait_resource).

use extentdb_storage::instance::{Instance, SessionInfo};
use std::sync::{Arc, Weak};

use extentdb_storage::lock::{DeadlockReport, LockRow, Resource};

use super::views::{cols, text, Rowset};
use crate::types::{SqlType, Value};

/// sys.dm_tran_locks: every lock granted or waited for, one row per owner and resource.
pub(super) fn tran_locks(inst: &Instance) -> Rowset {
    let columns = cols(&[
        ("resource_type", SqlType::NVarChar(60)),
        ("resource_subtype", SqlType::NVarChar(60)),
        ("resource_database_id", SqlType::Int),
        ("resource_description", SqlType::NVarChar(256)),
        ("resource_associated_entity_id", SqlType::BigInt),
        ("resource_lock_partition", SqlType::Int),
        ("request_mode", SqlType::NVarChar(60)),
        ("request_type", SqlType::NVarChar(60)),
        ("request_status", SqlType::NVarChar(60)),
        ("request_reference_count", SqlType::SmallInt),
        ("request_session_id", SqlType::Int),
        ("request_owner_type", SqlType::NVarChar(60)),
        ("request_owner_id", SqlType::BigInt),
    ]);
    let mut locks = inst.locks.locks();
    locks.sort_by_key(|l| {
        (
            l.session_id,
            l.resource.type_name(),
            l.resource.description(),
        )
    });
    let rows = locks.iter().map(lock_row).collect();
    Rowset { columns, rows }
}

fn lock_row(l: &LockRow) -> Vec<Value> {
    vec![
        text(l.resource.type_name()),
        text(""),
        Value::Int(l.resource.database_id() as i32),
        text(&l.resource.description()),
        Value::BigInt(l.resource.associated_entity_id() as i64),
        Value::Int(0),
        text(l.mode.name()),
        text("LOCK"),
        text(l.status),
        Value::SmallInt(1),
        Value::Int(l.session_id as i32),
        text("TRANSACTION"),
        Value::BigInt(l.owner as i64),
    ]
}

/// sys.dm_os_wait_stats: the lock waits by mode (LCK_M_S, LCK_M_X, ...).
pub(super) fn wait_stats(inst: &Instance) -> Rowset {
    let columns = cols(&[
        ("wait_type", SqlType::NVarChar(60)),
        ("waiting_tasks_count", SqlType::BigInt),
        ("wait_time_ms", SqlType::BigInt),
        ("max_wait_time_ms", SqlType::BigInt),
        ("signal_wait_time_ms", SqlType::BigInt),
    ]);
    let rows = inst
        .locks
        .wait_stats()
        .into_iter()
        .map(|w| {
            vec![
                text(w.wait_type),
                Value::BigInt(w.waiting_tasks_count as i64),
                Value::BigInt(w.wait_time_ms as i64),
                Value::BigInt(w.max_wait_time_ms as i64),
                Value::BigInt(0),
            ]
        })
        .collect();
    Rowset { columns, rows }
}

/// sys.dm_exec_requests' blocking_session_id, wait_type, wait_time, last_wait_type and
/// wait_resource of a session (0 and NULLs when it waits for no lock).
pub(super) fn request_wait(inst: &Instance, s: &SessionInfo) -> Vec<Value> {
    let owner = s.lock_owner.lock().unwrap().clone();
    let wait = owner.as_ref().and_then(|o| o.wait_info().map(|w| (o, w)));
    let Some((owner, w)) = wait else {
        return vec![
            Value::SmallInt(0),
            Value::Null,
            Value::Int(0),
            Value::Null,
            text(""),
        ];
    };
    let blocker = inst
        .locks
        .blocking_sessions(owner)
        .first()
        .copied()
        .unwrap_or(0);
    vec![
        Value::SmallInt(blocker as i16),
        text(w.mode.wait_type()),
        Value::Int(w.waited_ms.min(i32::MAX as u64) as i32),
        text(w.mode.wait_type()),
        text(&wait_resource(&w.resource)),
    ]
}

/// sys.dm_exec_requests.wait_resource: `KEY: 5:72057594038321152 (8194443284a0)`,
/// `RID: 5:1:153:0`, `OBJECT: 5:245575913:0`, as SQL Server writes them.
fn wait_resource(r: &Resource) -> String {
    let db = r.database_id();
    match *r {
        Resource::Key { hobt, .. } => format!("KEY: {db}:{hobt} {}", r.description()),
        Resource::Rid { .. } | Resource::Page { .. } => {
            format!("{}: {db}:{}", r.type_name(), r.description())
        }
        Resource::Object { object, .. } => format!("OBJECT: {db}:{object}:0"),
        _ => format!("{}: {db}:{}", r.type_name(), r.description()),
    }
}

/// Trace flag 1222: each deadlock's participants and resources go to the ERRORLOG, in
/// the shape of SQL Server's report (deadlock-list, the victim, process-list,
/// resource-list).
pub(super) fn log_deadlocks(inst: &Arc<Instance>) {
    let weak: Weak<Instance> = Arc::downgrade(inst);
    inst.locks
        .set_deadlock_observer(Box::new(move |r: &DeadlockReport| {
            let Some(inst) = weak.upgrade() else {
                return;
            };
            if !inst.trace_flags.lock().unwrap().contains(&1222) {
                return;
            }
            inst.errorlog.write("spid4s", &deadlock_text(r));
        }));
}

fn deadlock_text(r: &DeadlockReport) -> String {
    let mut lines = vec![
        "deadlock-list".to_string(),
        format!(" deadlock victim=process{:x}", r.victim),
        "  process-list".to_string(),
    ];
    for (owner, spid, res, mode) in &r.participants {
        lines.push(format!(
            "   process id=process{owner:x} spid={spid} waitresource={} lockMode={}",
            wait_resource(res),
            mode.name()
        ));
    }
    lines.push("  resource-list".to_string());
    for (owner, _, res, mode) in &r.participants {
        lines.push(format!(
            "   {}lock {} dbid={} associatedObjectId={} waiter id=process{owner:x} mode={}",
            res.type_name().to_ascii_lowercase(),
            res.description(),
            res.database_id(),
            res.associated_entity_id(),
            mode.name()
        ));
    }
    lines.join("\n")
}
