//! The connection and host DMVs a DBA's first queries read: sys.dm_exec_connections (one
//! row per TDS connection: addresses, ports, encryption, the TDS version it speaks) and
//! sys.dm_os_sys_info (CPUs, memory, when the server started), sys.dm_os_host_info (the
//! operating system, as SQL Server on Linux shows it), read from the sessions' login facts,
//! Linux's /proc and /etc/os-release.
//!
//! Invariants:
//! 1. Only facts are shown: a column this engine has no value for is left out of the
//!    view (a query naming it gets 207), never filled with an invented figure. So
//!    dm_exec_connections has no read / write counters and dm_os_sys_info no scheduler
//!    or worker counts (a thread serves each connection; there are no schedulers).
//! 2. A connection's row lasts as long as its session (it is the session's entry in the
//!    instance's session list); a session no client connected for has none.

use extentdb_storage::instance::Instance;

use super::views::{cols, text, ticks_from_unix_us, Rowset};
use crate::types::{SqlType, Value};

/// sys.dm_exec_connections.
pub(super) fn exec_connections(inst: &Instance) -> Rowset {
    let columns = cols(&[
        ("session_id", SqlType::Int),
        ("most_recent_session_id", SqlType::Int),
        ("connect_time", SqlType::DateTime),
        ("net_transport", SqlType::NVarChar(40)),
        ("protocol_type", SqlType::NVarChar(40)),
        ("protocol_version", SqlType::Int),
        ("endpoint_id", SqlType::Int),
        ("encrypt_option", SqlType::NVarChar(40)),
        ("auth_scheme", SqlType::NVarChar(40)),
        ("node_affinity", SqlType::SmallInt),
        ("net_packet_size", SqlType::Int),
        ("client_net_address", SqlType::VarChar(48)),
        ("client_tcp_port", SqlType::Int),
        ("local_net_address", SqlType::VarChar(48)),
        ("local_tcp_port", SqlType::Int),
    ]);
    let sessions = inst.sessions.lock().unwrap();
    let rows = sessions
        .values()
        .filter_map(|s| {
            let c = s.connection.as_ref()?;
            let id = Value::Int(i32::from(s.session_id));
            Some(vec![
                id.clone(),
                id,
                Value::DateTime(ticks_from_unix_us(s.login_unix_us)),
                text("TCP"),
                text("TSQL"),
                Value::Int(c.protocol_version as i32),
                // SQL Server's "TSQL Default TCP" endpoint.
                Value::Int(4),
                text(if c.encrypted { "TRUE" } else { "FALSE" }),
                text("SQL"),
                Value::SmallInt(0),
                Value::Int(c.net_packet_size as i32),
                text(&c.client_net_address),
                Value::Int(i32::from(c.client_tcp_port)),
                text(&c.local_net_address),
                Value::Int(i32::from(c.local_tcp_port)),
            ])
        })
        .collect();
    Rowset { columns, rows }
}

/// sys.dm_os_sys_info.
pub(super) fn os_sys_info(inst: &Instance) -> Rowset {
    let host = Host::read();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as i32;
    let opt_int = |v: Option<i64>| v.map_or(Value::Null, |v| Value::Int(v as i32));
    Rowset {
        columns: cols(&[
            ("cpu_count", SqlType::Int),
            ("hyperthread_ratio", SqlType::Int),
            ("socket_count", SqlType::Int),
            ("cores_per_socket", SqlType::Int),
            ("physical_memory_kb", SqlType::BigInt),
            ("committed_target_kb", SqlType::BigInt),
            ("ms_ticks", SqlType::BigInt),
            ("sqlserver_start_time_ms_ticks", SqlType::BigInt),
            ("sqlserver_start_time", SqlType::DateTime),
            ("virtual_machine_type", SqlType::Int),
            ("virtual_machine_type_desc", SqlType::NVarChar(60)),
        ]),
        rows: vec![vec![
            Value::Int(cpus),
            opt_int(host.siblings_per_core()),
            opt_int(host.sockets),
            opt_int(host.cores_per_socket),
            host.memory_kb.map_or(Value::Null, Value::BigInt),
            // The buffer pools' cap in use ('max server memory (MB)'), in KB.
            Value::BigInt(inst.pool_budget.cap_pages() as i64 * 8),
            host.ms_ticks.map_or(Value::Null, Value::BigInt),
            host.start_ms_ticks.map_or(Value::Null, Value::BigInt),
            host.start_unix_us
                .map_or(Value::Null, |us| Value::DateTime(ticks_from_unix_us(us))),
            Value::Int(i32::from(host.hypervisor)),
            text(if host.hypervisor {
                "HYPERVISOR"
            } else {
                "NONE"
            }),
        ]],
    }
}

/// sys.dm_os_host_info: 'Linux', the distribution's NAME and VERSION_ID from
/// /etc/os-release (NULL where it has none), no service pack level (''), no Windows SKU
/// (NULL) and language 0, as SQL Server on Linux answers; the machine's architecture.
pub(super) fn os_host_info() -> Rowset {
    let release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let field = |key: &str| {
        release
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map_or(Value::Null, |v| text(v.trim_matches('"')))
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "X64",
        "aarch64" => "ARM64",
        other => other,
    };
    Rowset {
        columns: cols(&[
            ("host_platform", SqlType::NVarChar(256)),
            ("host_distribution", SqlType::NVarChar(256)),
            ("host_release", SqlType::NVarChar(256)),
            ("host_service_pack_level", SqlType::NVarChar(256)),
            ("host_sku", SqlType::Int),
            ("os_language_version", SqlType::Int),
            ("host_architecture", SqlType::NVarChar(256)),
        ]),
        rows: vec![vec![
            text("Linux"),
            field("NAME"),
            field("VERSION_ID"),
            text(""),
            Value::Null,
            Value::Int(0),
            text(arch),
        ]],
    }
}

/// What /proc says about the machine and this process (None where it says nothing).
struct Host {
    sockets: Option<i64>,
    cores_per_socket: Option<i64>,
    siblings: Option<i64>,
    memory_kb: Option<i64>,
    /// Milliseconds since boot, now and when this process started.
    ms_ticks: Option<i64>,
    start_ms_ticks: Option<i64>,
    start_unix_us: Option<i64>,
    hypervisor: bool,
}

impl Host {
    fn read() -> Host {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |name: &str| {
            cpuinfo.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim().parse::<i64>().ok())?
            })
        };
        let mut sockets: Vec<&str> = cpuinfo
            .lines()
            .filter_map(|l| l.strip_prefix("physical id"))
            .collect();
        sockets.sort_unstable();
        sockets.dedup();
        let ms_ticks = std::fs::read_to_string("/proc/uptime")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
            .map(|s| (s * 1000.0) as i64);
        let start_ms_ticks = process_start_ms_since_boot();
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        let start_unix_us = ms_ticks
            .zip(start_ms_ticks)
            .map(|(now, start)| now_us - (now - start) * 1000);
        Host {
            sockets: (!sockets.is_empty()).then_some(sockets.len() as i64),
            cores_per_socket: field("cpu cores"),
            siblings: field("siblings"),
            memory_kb: meminfo_total_kb(),
            ms_ticks,
            start_ms_ticks,
            start_unix_us,
            hypervisor: cpuinfo
                .lines()
                .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor")),
        }
    }

    /// Logical CPUs per core (hyperthreads): siblings per socket over cores per socket.
    fn siblings_per_core(&self) -> Option<i64> {
        let (s, c) = (self.siblings?, self.cores_per_socket?);
        (c > 0).then(|| s / c)
    }
}

fn meminfo_total_kb() -> Option<i64> {
    let m = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// When this process started, in milliseconds since boot (/proc/self/stat's 22nd field,
/// in clock ticks of 100 per second, Linux's USER_HZ).
fn process_start_ms_since_boot() -> Option<i64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name may hold spaces: fields are counted after its closing parenthesis.
    let after = &stat[stat.rfind(')')? + 2..];
    let ticks: i64 = after.split_whitespace().nth(19)?.parse().ok()?;
    Some(ticks * 10)
}
