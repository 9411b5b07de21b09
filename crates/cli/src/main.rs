//! `extentdb`: the one binary. Subcommands: `setup` creates an instance, `exec` runs T-SQL
//! scripts in-process against it, with sqlcmd's script rules and output, `serve` answers
//! SQL Server clients over TDS, `inspect` prints a page of a stopped instance's files as
//! DBCC PAGE does, `checkdb` checks a stopped instance's files as DBCC CHECKDB does.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use extentdb_io::os::OsFileSystem;
use extentdb_storage::config::{parse_on_off, InstanceConfig};
use extentdb_storage::instance::SetupOptions;
use extentdb_storage::Instance;

mod checkdb;
mod exec;
mod inspect;
mod serve;
mod sqlcmd;

#[derive(Parser)]
#[command(
    name = "extentdb",
    version,
    about = "A SQL Server-compatible storage engine for Linux: data files with instant file initialization, filegroups, the transaction log, DBCC, backup and T-SQL."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Set up a new instance: configuration, error log, master, model and msdb (tempdb is created at every start).
    Setup(SetupArgs),
    /// Run T-SQL scripts in-process (sqlcmd's rules: GO [n] separates batches; -b stops on errors).
    Exec(exec::ExecArgs),
    /// Answer SQL Server clients over TDS (sqlcmd, FreeTDS, JDBC, ODBC, pymssql, tedious ...).
    Serve(serve::ServeArgs),
    /// A client over TDS with sqlcmd's options and output (-S -U -P -d -i -Q -q -b).
    Sqlcmd(sqlcmd::SqlcmdArgs),
    /// DBCC PAGE on the files of a stopped instance (read directly; the instance is not started).
    Inspect(inspect::InspectArgs),
    /// DBCC CHECKDB on the files of a stopped instance (read directly; exit code 1 when anything is found).
    Checkdb(checkdb::CheckdbArgs),
}

#[derive(Args)]
pub struct SetupArgs {
    /// The instance's directory (created if absent).
    #[arg(long)]
    data_dir: PathBuf,
    /// Instant file initialization for data files: on (default; fallocate exposes no stale bytes on Linux) or off (data files are zeroed).
    #[arg(long, default_value = "on", value_parser = on_off, action = clap::ArgAction::Set)]
    instant_file_init: bool,
    /// A directory where CREATE/ALTER DATABASE may put files (repeatable; default DIR/data).
    #[arg(long = "data-root")]
    data_roots: Vec<PathBuf>,
    /// Number of tempdb data files (default: cores, at most 8; no upper cap).
    #[arg(long)]
    tempdb_files: Option<u32>,
    /// Size of each tempdb data file, e.g. 8MB, 1GB, 16GB (no 1,024 MB cap).
    #[arg(long, value_parser = parse_size_pages)]
    tempdb_file_size: Option<u32>,
    /// The sa login's password (stored as a salted PBKDF2 hash).
    #[arg(long)]
    sa_password: Option<String>,
    /// Memory all databases' buffer pools share, in MB (SQL Server's 'max server memory').
    #[arg(long)]
    max_server_memory_mb: Option<u32>,
}

fn on_off(v: &str) -> Result<bool, String> {
    parse_on_off(v).ok_or_else(|| format!("expected on or off, got '{v}'"))
}

/// Parses `8MB`, `1GB`, `512KB`, `2TB` (a bare number is MB) into 8 KB pages.
pub fn parse_size_pages(v: &str) -> Result<u32, String> {
    let v = v.trim().to_ascii_uppercase();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("'{v}' is not a size"))?;
    let kb = match unit.trim() {
        "KB" => n,
        "" | "MB" => n * 1024,
        "GB" => n * 1024 * 1024,
        "TB" => n * 1024 * 1024 * 1024,
        u => return Err(format!("unknown size unit '{u}'")),
    };
    u32::try_from(kb / 8).map_err(|_| format!("'{v}' is larger than a file can be"))
}

fn setup(a: SetupArgs) -> Result<(), String> {
    let mut config = InstanceConfig::defaults(&a.data_dir);
    config.instant_file_init = a.instant_file_init;
    if !a.data_roots.is_empty() {
        config.data_roots = a.data_roots;
    }
    if let Some(n) = a.tempdb_files {
        if n == 0 {
            return Err("--tempdb-files must be at least 1".into());
        }
        config.tempdb_files = n;
    }
    if let Some(p) = a.tempdb_file_size {
        config.tempdb_file_size_pages = p.max(64);
    }
    if let Some(mb) = a.max_server_memory_mb {
        config.max_server_memory_mb = mb.max(1);
    }
    Instance::setup(
        OsFileSystem::new(),
        &a.data_dir,
        SetupOptions {
            config,
            sa_password: a.sa_password,
        },
    )
    .map_err(|e| e.to_string())?;
    // The TLS certificate `serve` offers (self-signed; `serve --tls-cert` supplies another).
    let (cert, key) = extentdb_tds::tls::default_paths(&a.data_dir);
    extentdb_tds::tls::create_self_signed(&cert, &key, &extentdb_tds::server::host_name())?;
    println!("Instance set up in {}.", a.data_dir.display());
    Ok(())
}

/// The C allocator's settings for a process whose memory is capped (glibc's malloc, which
/// Rust's global allocator uses here):
/// - allocations of 128 KB and more are mapped on their own and unmapped when freed. By
///   default glibc raises that threshold after each such free (up to 32 MB), so the buffers
///   of one large request (a batch's text, its parse) stayed in the heap for good and the
///   server's RSS only grew;
/// - at most two arenas per core (the default is eight): each connection's thread would
///   otherwise keep an arena of its own, and the memory freed in each stays there.
fn tune_allocator() {
    #[cfg(target_env = "gnu")]
    {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        // SAFETY: mallopt only sets allocator parameters; called before any thread starts.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
            libc::mallopt(libc::M_ARENA_MAX, (2 * cores).max(2) as libc::c_int);
        }
    }
}

fn main() -> ExitCode {
    tune_allocator();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Setup(a) => setup(a).map(|_| 0),
        Command::Exec(a) => exec::run(a, Arc::new(OsFileSystem)),
        Command::Serve(a) => serve::run(a, Arc::new(OsFileSystem)),
        Command::Sqlcmd(a) => sqlcmd::run(a),
        Command::Inspect(a) => inspect::run(a, &OsFileSystem),
        Command::Checkdb(a) => checkdb::run(a, &OsFileSystem),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("extentdb: {e}");
            ExitCode::from(1)
        }
    }
}
