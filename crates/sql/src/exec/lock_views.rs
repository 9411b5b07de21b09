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
        text(l.owner_type),
        Value::BigInt(l.owner as i64),
    ]
}

/// sys.dm_os_wait_stats: the lock waits by mode (LCK_M_S, LCK_M_X, ...), then storage's
/// (WRITELOG, PAGELATCH_EX, PAGEIOLATCH_SH: storage's waits.rs).
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
        .chain(extentdb_storage::waits::stats())
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
    let Some((blocker, wait_type, ms, r)) = session_wait(inst, s) else {
        return vec![
            Value::SmallInt(0),
            Value::Null,
            Value::Int(0),
            Value::Null,
            text(""),
        ];
    };
    vec![
        Value::SmallInt(blocker as i16),
        text(wait_type),
        Value::Int(ms.min(i32::MAX as u64) as i32),
        text(wait_type),
        text(&wait_resource(&r)),
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

/// What sp_who, sp_who2 and sys.dm_os_waiting_tasks show of a session's lock wait: the
/// session blocking it (0 for none), the wait type and how long.
fn session_wait(inst: &Instance, s: &SessionInfo) -> Option<(u16, &'static str, u64, Resource)> {
    let owner = s.lock_owner.lock().unwrap().clone()?;
    let w = owner.wait_info()?;
    let blocker = inst
        .locks
        .blocking_sessions(&owner)
        .first()
        .copied()
        .unwrap_or(0);
    Some((blocker, w.mode.wait_type(), w.waited_ms, w.resource))
}

fn database_name(inst: &Instance, id: u16) -> Value {
    match inst.database(id) {
        Some(d) => text(&d.read().unwrap().name),
        None => Value::Null,
    }
}

/// sp_who (`two` false) and sp_who2 (true): one row per session, with the session that
/// blocks it (blk, BlkBy).
pub(super) fn sp_who(inst: &Instance, two: bool) -> Rowset {
    use std::sync::atomic::Ordering;
    let columns = if two {
        cols(&[
            ("SPID", SqlType::NVarChar(5)),
            ("Status", SqlType::NVarChar(30)),
            ("Login", SqlType::NVarChar(128)),
            ("HostName", SqlType::NVarChar(128)),
            ("BlkBy", SqlType::NVarChar(5)),
            ("DBName", SqlType::NVarChar(128)),
            ("Command", SqlType::NVarChar(32)),
            ("CPUTime", SqlType::Int),
            ("DiskIO", SqlType::BigInt),
            ("LastBatch", SqlType::NVarChar(14)),
            ("ProgramName", SqlType::NVarChar(128)),
            ("SPID", SqlType::NVarChar(5)),
            ("REQUESTID", SqlType::Int),
        ])
    } else {
        cols(&[
            ("spid", SqlType::SmallInt),
            ("ecid", SqlType::SmallInt),
            ("status", SqlType::NVarChar(30)),
            ("loginame", SqlType::NVarChar(128)),
            ("hostname", SqlType::NVarChar(128)),
            ("blk", SqlType::NVarChar(5)),
            ("dbname", SqlType::NVarChar(128)),
            ("cmd", SqlType::NVarChar(32)),
            ("request_id", SqlType::Int),
        ])
    };
    let sessions: Vec<Arc<SessionInfo>> = inst.sessions.lock().unwrap().values().cloned().collect();
    let rows = sessions
        .iter()
        .map(|s| {
            let wait = session_wait(inst, s);
            let running = s.running.load(Ordering::Acquire);
            let status = match (&wait, running) {
                (Some(_), _) => "suspended",
                (None, true) => "runnable",
                (None, false) => "sleeping",
            };
            let command = if running {
                *s.command.lock().unwrap()
            } else {
                "AWAITING COMMAND"
            };
            let blk = wait.map_or(0, |w| w.0);
            let db = database_name(inst, s.database_id.load(Ordering::Acquire));
            let spid = s.session_id;
            if two {
                let blk = if blk == 0 {
                    "  .".to_string()
                } else {
                    format!("{blk:>5}")
                };
                vec![
                    text(&format!("{spid:<5}")),
                    text(&status.to_ascii_uppercase()),
                    text(&s.login_name),
                    text(&s.host_name),
                    text(&blk),
                    db,
                    text(command),
                    Value::Int(0),
                    Value::BigInt(0),
                    text(&last_batch(s.last_request_start_us.load(Ordering::Acquire))),
                    text(&s.program_name),
                    text(&format!("{spid:<5}")),
                    Value::Int(0),
                ]
            } else {
                vec![
                    Value::SmallInt(spid as i16),
                    Value::SmallInt(0),
                    text(status),
                    text(&s.login_name),
                    text(&s.host_name),
                    text(&format!("{blk:<5}")),
                    db,
                    text(command),
                    Value::Int(0),
                ]
            }
        })
        .collect();
    Rowset { columns, rows }
}

/// sp_who2's LastBatch: `MM/DD hh:mm:ss` in local time.
fn last_batch(unix_us: i64) -> String {
    let t = (unix_us / 1_000_000) as libc::time_t;
    // SAFETY: localtime_r writes only into the tm we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&t, &mut tm) };
    format!(
        "{:02}/{:02} {:02}:{:02}:{:02}",
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// sp_lock: every lock, with sp_lock's short type names (RID, KEY, PAG, EXT, TAB, DB,
/// FIL, MD, HBT, AU) and CNVT for a conversion waiting.
pub(super) fn sp_lock(inst: &Instance) -> Rowset {
    let columns = cols(&[
        ("spid", SqlType::SmallInt),
        ("dbid", SqlType::SmallInt),
        ("ObjId", SqlType::Int),
        ("IndId", SqlType::SmallInt),
        ("Type", SqlType::NChar(4)),
        ("Resource", SqlType::NChar(32)),
        ("Mode", SqlType::NVarChar(8)),
        ("Status", SqlType::NVarChar(5)),
    ]);
    let mut locks = inst.locks.locks();
    locks.sort_by_key(|l| {
        (
            l.session_id,
            l.resource.type_name(),
            l.resource.description(),
        )
    });
    let rows = locks
        .iter()
        .map(|l| {
            let short = match l.resource {
                Resource::Rid { .. } => "RID",
                Resource::Key { .. } => "KEY",
                Resource::Page { .. } => "PAG",
                Resource::Extent { .. } => "EXT",
                Resource::Object { .. } => "TAB",
                Resource::Database { .. } => "DB",
                Resource::File { .. } => "FIL",
                Resource::Metadata { .. } => "MD",
                Resource::Hobt { .. } => "HBT",
                Resource::AllocationUnit { .. } => "AU",
            };
            let object = match l.resource {
                Resource::Object { object, .. }
                | Resource::Rid { object, .. }
                | Resource::Key { object, .. }
                | Resource::Page { object, .. } => object as i32,
                _ => 0,
            };
            let index = match l.resource {
                Resource::Key { .. } => 1,
                _ => 0,
            };
            let status = match l.status {
                "CONVERT" => "CNVT",
                other => other,
            };
            vec![
                Value::SmallInt(l.session_id as i16),
                Value::SmallInt(l.resource.database_id() as i16),
                Value::Int(object),
                Value::SmallInt(index),
                text(short),
                text(&l.resource.description()),
                text(l.mode.name()),
                text(status),
            ]
        })
        .collect();
    Rowset { columns, rows }
}

/// sys.dm_os_waiting_tasks: the sessions waiting for a lock, with who blocks them.
pub(super) fn waiting_tasks(inst: &Instance) -> Rowset {
    let columns = cols(&[
        ("session_id", SqlType::SmallInt),
        ("exec_context_id", SqlType::Int),
        ("wait_duration_ms", SqlType::BigInt),
        ("wait_type", SqlType::NVarChar(60)),
        ("blocking_session_id", SqlType::SmallInt),
        ("blocking_exec_context_id", SqlType::Int),
        ("resource_description", SqlType::NVarChar(3072)),
    ]);
    let sessions: Vec<Arc<SessionInfo>> = inst.sessions.lock().unwrap().values().cloned().collect();
    let rows = sessions
        .iter()
        .filter_map(|s| {
            let (blocker, wait_type, ms, r) = session_wait(inst, s)?;
            Some(vec![
                Value::SmallInt(s.session_id as i16),
                Value::Int(0),
                Value::BigInt(ms as i64),
                text(wait_type),
                if blocker == 0 {
                    Value::Null
                } else {
                    Value::SmallInt(blocker as i16)
                },
                if blocker == 0 {
                    Value::Null
                } else {
                    Value::Int(0)
                },
                text(&wait_resource(&r)),
            ])
        })
        .collect();
    Rowset { columns, rows }
}
