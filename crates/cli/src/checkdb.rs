//! `extentdb checkdb`: DBCC CHECKDB on the files of a stopped instance, read directly (the
//! instance is not started; nothing is recovered or written). The checks and the report
//! are DBCC CHECKDB's (`extentdb_sql::exec::checkdb`); the exit code is 1 when anything
//! was found. The files are checked as they are: a database a crash left needing recovery
//! should be opened by the instance once first, as SQL Server checks only recovered
//! databases.

use std::path::PathBuf;

use clap::Args;
use extentdb_io::FileSystem;
use extentdb_sql::exec::checkdb::{run_check, CheckKind, CheckSettings};
use extentdb_sql::exec::Output;
use extentdb_sql::messages::msg;
use extentdb_storage::database::open_offline;

#[derive(Args)]
pub struct CheckdbArgs {
    /// The instance's directory.
    #[arg(long)]
    data_dir: PathBuf,
    /// A database to check (repeatable; default every database but tempdb).
    #[arg(long)]
    database: Vec<String>,
    /// PHYSICAL_ONLY: page audits, record framing and allocation only.
    #[arg(long)]
    physical_only: bool,
    /// Worker threads (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    maxdop: usize,
    /// NO_INFOMSGS: print only errors and the summaries of what had errors.
    #[arg(long)]
    no_infomsgs: bool,
    /// Print, to standard error, the bytes read and the time taken per database.
    #[arg(long)]
    stats: bool,
    /// A trace flag, as DBCC TRACEON would set it for the check (repeatable): 2549 reads
    /// each data file as its own drive; 2562 (one batch) is how every check runs.
    #[arg(short = 'T', long = "trace-flag", value_parser = crate::exec::built_trace_flag)]
    trace_flags: Vec<u32>,
}

pub fn run(a: CheckdbArgs, fs: &dyn FileSystem) -> Result<u8, String> {
    let _lock = crate::inspect::lock_offline(&a.data_dir)?;
    let all = crate::inspect::offline_databases(&a.data_dir, fs)?;
    let mut chosen = Vec::new();
    if a.database.is_empty() {
        chosen = all;
    } else {
        for name in &a.database {
            let d = all
                .iter()
                .find(|(_, n, _)| n.eq_ignore_ascii_case(name))
                .ok_or_else(|| msg(2520, &[name]).text)?;
            chosen.push(d.clone());
        }
    }
    let settings = CheckSettings {
        no_infomsgs: a.no_infomsgs,
        table_results: false,
        physical_only: a.physical_only,
        maxdop: a.maxdop,
        index_id: None,
        all_errormsgs: false,
        per_file_read_ahead: a
            .trace_flags
            .contains(&extentdb_storage::instance::TF_CHECKDB_PER_FILE),
        filegroup: None,
    };
    let mut found = false;
    for (id, name, primary) in chosen {
        let db = match open_offline(fs, &primary) {
            Ok(db) => db,
            Err(e) => {
                // The boot page or catalog itself is unreadable: nothing further to check.
                eprintln!("extentdb checkdb: database '{name}': {e}");
                found = true;
                continue;
            }
        };
        let src = db.source();
        let started = std::time::Instant::now();
        let run = run_check(CheckKind::CheckDb, &src, id, None, &settings, None, None)
            .map_err(|e| format!("database '{name}': {e}"))?;
        let secs = started.elapsed().as_secs_f64();
        if a.stats {
            eprintln!(
                "checkdb stats: database '{name}': {} bytes read in {secs:.3} s ({:.1} MB/s)",
                run.bytes_read,
                run.bytes_read as f64 / 1e6 / secs.max(1e-9)
            );
        }
        found |= !run.clean;
        let lines = run.outputs;
        // As sqlcmd shows a one-line batch's errors.
        let mut out: Vec<Output> = lines
            .into_iter()
            .map(|o| match o {
                Output::Error(mut e) => {
                    e.line = 1;
                    Output::Error(e)
                }
                other => other,
            })
            .collect();
        if !a.no_infomsgs {
            out.push(Output::Info(msg(2528, &[])));
        }
        crate::exec::emit(out, false, None);
    }
    Ok(found as u8)
}
