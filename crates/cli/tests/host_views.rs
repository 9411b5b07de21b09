//! sys.dm_exec_connections and sys.dm_os_sys_info through a real `extentdb serve` and
//! real TDS sessions (crates/sql/src/exec/host_views.rs): a row per connection with its
//! session, addresses, ports, packet size, encryption and TDS version, gone when the
//! connection closes; VIEW SERVER STATE required; the host's CPUs and memory and the
//! server's start time as /proc gives them.

use std::time::Duration;

use extentdb_tds::client::{Client, ConnectOptions};

mod common;
use common::tds::{errors, run, table, Server};

#[test]
fn connections_are_listed_while_they_last() {
    let s = Server::start("hostconn", &[]);
    let mut a = s.connect();
    let mut b = s.connect();
    let spid = |c: &mut Client| table(c, "SELECT @@SPID")[0].clone();
    let (sa, sb) = (spid(&mut a), spid(&mut b));
    let port = s.addr.rsplit(':').next().unwrap().to_string();
    let rows = table(
        &mut a,
        &format!(
            "SELECT session_id, most_recent_session_id, net_transport, protocol_type,
                    protocol_version, encrypt_option, auth_scheme, client_net_address,
                    local_net_address, local_tcp_port, net_packet_size
             FROM sys.dm_exec_connections WHERE session_id IN ({sa}, {sb})
             ORDER BY session_id"
        ),
    );
    let row = |id: &str| {
        format!("{id},{id},TCP,TSQL,1946157060,FALSE,SQL,127.0.0.1,127.0.0.1,{port},4096")
    };
    assert_eq!(rows, [row(&sa), row(&sb)]);
    // The client's port is the other end of b's own socket.
    let client_port = table(
        &mut b,
        "SELECT client_tcp_port FROM sys.dm_exec_connections WHERE session_id = @@SPID",
    );
    assert_eq!(client_port.len(), 1);
    assert_ne!(client_port[0], port);
    drop(b);
    let gone = format!("SELECT COUNT(*) FROM sys.dm_exec_connections WHERE session_id = {sb}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while table(&mut a, &gone) != ["0"] {
        assert!(std::time::Instant::now() < deadline, "b's row outlived it");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Without VIEW SERVER STATE: 300 and 297, as SQL Server.
    run(
        &mut a,
        "CREATE LOGIN plain WITH PASSWORD = 'Host-View-Pass-1'",
    );
    let mut plain = Client::connect(
        &s.addr,
        &ConnectOptions {
            user: "plain".into(),
            password: "Host-View-Pass-1".into(),
            timeout: Some(Duration::from_secs(60)),
            ..Default::default()
        },
    )
    .unwrap_or_else(|_| panic!("plain's login"));
    let refused: Vec<i32> = errors(&mut plain, "SELECT * FROM sys.dm_exec_connections")
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(refused, [300, 297]);
}

#[test]
fn sys_info_is_the_hosts() {
    let s = Server::start("hostinfo", &[]);
    let mut c = s.connect();
    let row = table(
        &mut c,
        "SELECT cpu_count, physical_memory_kb, committed_target_kb,
                DATEDIFF(SECOND, sqlserver_start_time, GETDATE()),
                CASE WHEN sqlserver_start_time_ms_ticks <= ms_ticks THEN 1 ELSE 0 END
         FROM sys.dm_os_sys_info",
    );
    let f: Vec<&str> = row[0].split(',').collect();
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert_eq!(f[0], cpus.to_string());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let total = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap();
    assert_eq!(f[1], total);
    assert_eq!(
        f[2],
        (1024 * 1024).to_string(),
        "max server memory's 1024 MB"
    );
    let age: i64 = f[3].parse().unwrap();
    assert!((0..120).contains(&age), "started {age} s ago");
    assert_eq!(f[4], "1");
}

/// sys.dm_os_host_info as SQL Server on Linux answers it: the platform, the distribution
/// and release /etc/os-release names, no service pack or SKU; any login may read it.
#[test]
fn host_info_names_the_operating_system() {
    let s = Server::start("hostplatform", &[]);
    let mut a = s.connect();
    let release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let field = |key: &str| {
        release
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map_or("NULL".to_string(), |v| v.trim_matches('"').to_string())
    };
    let arch = if cfg!(target_arch = "x86_64") {
        "X64"
    } else {
        std::env::consts::ARCH
    };
    assert_eq!(
        table(
            &mut a,
            "SELECT host_platform, host_distribution, host_release, host_service_pack_level, \
             host_sku, os_language_version, host_architecture FROM sys.dm_os_host_info"
        ),
        [format!(
            "Linux,{},{},,NULL,0,{arch}",
            field("NAME"),
            field("VERSION_ID")
        )]
    );
    run(
        &mut a,
        "CREATE LOGIN plain WITH PASSWORD = 'Str0ng!Passw0rd'",
    );
    let mut plain = Client::connect(
        &s.addr,
        &ConnectOptions {
            user: "plain".into(),
            password: "Str0ng!Passw0rd".into(),
            timeout: Some(Duration::from_secs(30)),
            ..ConnectOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        table(&mut plain, "SELECT host_platform FROM sys.dm_os_host_info"),
        ["Linux"]
    );
}
