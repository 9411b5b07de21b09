//! `extentdb serve`: starts the instance and answers SQL Server clients over TDS until
//! SIGINT or SIGTERM, then shuts the instance down cleanly (a checkpoint per database).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use clap::Args;
use extentdb_io::FileSystem;
use extentdb_sql::exec::Engine;
use extentdb_storage::Instance;
use extentdb_tds::server::{Server, ServerOptions};

#[derive(Args)]
pub struct ServeArgs {
    /// The instance's directory; with no instance there, one is set up with defaults and
    /// the sa password from MSSQL_SA_PASSWORD.
    #[arg(long)]
    data_dir: PathBuf,
    /// The address and port to listen on.
    #[arg(long, default_value = "127.0.0.1:1433")]
    listen: String,
    /// A startup trace flag (repeatable), global for the life of the process, as SQL Server's -T.
    #[arg(short = 'T', long = "trace-flag", value_parser = crate::exec::built_trace_flag)]
    trace_flags: Vec<u32>,
    /// Startup option -E: a file with skip target 1 takes 64 consecutive extents.
    #[arg(short = 'E')]
    consecutive_extents: bool,
    /// Connections beyond this many are refused.
    #[arg(long, default_value_t = 500)]
    max_connections: usize,
    /// A connection that has not logged in within this many seconds is closed.
    #[arg(long, default_value_t = 60)]
    login_timeout_secs: u64,
    /// Connections waiting to log in at once; one more closes the oldest of them.
    #[arg(long, default_value_t = 64)]
    max_pending_logins: usize,
    /// The largest request (batch text or RPC) accepted, in MB (Msg 701 beyond).
    #[arg(long, default_value_t = 64)]
    max_request_mb: usize,
    /// Requests larger than 2 MB run this many at a time (default: one per 512 MB of max
    /// server memory, at least one); the others wait (docs/SECURITY.md, "Memory").
    #[arg(long)]
    large_request_slots: Option<usize>,
    /// How long a large request waits for a slot before Msg 8645, in seconds.
    #[arg(long, default_value_t = 60)]
    large_request_wait_secs: u64,
    /// The TLS certificate (PEM); default DIR/tls/server.crt, made self-signed at first start.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The TLS certificate's private key (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Refuse clients that do not encrypt the connection.
    #[arg(long)]
    require_encryption: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Release);
}

pub fn run(a: ServeArgs, fs: Arc<dyn FileSystem>) -> Result<u8, String> {
    let env_password = std::env::var("MSSQL_SA_PASSWORD")
        .ok()
        .filter(|p| !p.is_empty());
    let created = crate::exec::ensure_instance(&fs, &a.data_dir, env_password.clone())?;
    // A new instance got sa's password at setup; an existing one gets it reset.
    if let (false, Some(pw)) = (created, &env_password) {
        Instance::set_sa_password(&a.data_dir, pw).map_err(|e| e.to_string())?;
    }
    let instance =
        Arc::new(Instance::start(fs, &a.data_dir, &a.trace_flags).map_err(|e| e.to_string())?);
    if instance
        .logins
        .get("sa")
        .is_none_or(|l| l.hash.is_empty() || !l.enabled)
    {
        eprintln!(
            "extentdb: the sa login has no password or is disabled, so sa cannot log in; set MSSQL_SA_PASSWORD or run `extentdb setup --sa-password`."
        );
    }
    instance.set_startup_e(a.consecutive_extents);
    let engine = Engine::new(instance.clone());
    let (cert, key) = match (&a.tls_cert, &a.tls_key) {
        (Some(c), Some(k)) => (c.clone(), k.clone()),
        _ => {
            let (c, k) = extentdb_tds::tls::default_paths(&a.data_dir);
            if !c.exists() || !k.exists() {
                extentdb_tds::tls::create_self_signed(&c, &k, &extentdb_tds::server::host_name())?;
                instance.errorlog.write(
                    "Server",
                    &format!(
                        "A self-signed certificate was generated for encryption: {}.",
                        c.display()
                    ),
                );
            }
            (c, k)
        }
    };
    let tls = extentdb_tds::tls::server_config(&cert, &key)?;
    instance.errorlog.write(
        "Server",
        &format!(
            "The certificate {} was successfully loaded for encryption.",
            cert.display()
        ),
    );
    let options = ServerOptions {
        listen: a.listen.clone(),
        max_connections: user_connections(&instance, a.max_connections),
        max_request_bytes: a.max_request_mb.max(1) << 20,
        require_encryption: a.require_encryption,
        login_timeout: std::time::Duration::from_secs(a.login_timeout_secs.max(1)),
        max_pending_logins: a.max_pending_logins.max(1),
        large_request_slots: a
            .large_request_slots
            .unwrap_or(instance.config.max_server_memory_mb as usize / 512)
            .max(1),
        large_request_wait: std::time::Duration::from_secs(a.large_request_wait_secs),
        ..ServerOptions::default()
    };
    let server = Arc::new(
        Server::bind(engine, options, Some(tls)).map_err(|e| format!("{}: {e}", a.listen))?,
    );
    let addr = server.local_addr().map_err(|e| e.to_string())?;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let stop = server.stop_flag();
    let accept = {
        let server = server.clone();
        std::thread::spawn(move || server.run())
    };
    println!("extentdb: listening on {addr} (TDS 7.4); stop with Ctrl-C or SIGTERM.");
    while !STOP.load(Ordering::Acquire) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    instance.errorlog.write(
        "Server",
        "extentdb is terminating in response to a stop signal (SIGINT or SIGTERM): no new connections; each database is checkpointed.",
    );
    stop.store(true, Ordering::Release);
    // Wake the accept loop so it sees the flag.
    let _ = std::net::TcpStream::connect(addr);
    let _ = accept.join();
    instance.shutdown();
    // stdout may be gone (a closed pipe) by now; that is no reason to fail.
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "extentdb: stopped.");
    Ok(0)
}

/// The connections `serve` accepts: --max-connections, or fewer when the static option
/// 'user connections' (in use since this start) is set (0 is SQL Server's "as many as
/// allowed").
fn user_connections(instance: &Instance, flag: usize) -> usize {
    let configured = instance
        .configurations
        .get(extentdb_storage::configurations::USER_CONNECTIONS)
        .value_in_use;
    match usize::try_from(configured) {
        Ok(n) if n > 0 => n.min(flag),
        _ => flag,
    }
    .max(1)
}
