//! `extentdb exec`: runs T-SQL scripts in-process, as sqlcmd would run them against a
//! server. Batches are split by `GO [n]`; results and messages print as sqlcmd prints them;
//! `-b` stops with exit code 1 after an error of severity 11 or more.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use extentdb_io::FileSystem;
use extentdb_sql::exec::{Engine, Output, OutputSink};
use extentdb_sql::render;
use extentdb_sql::script::split_batches;
use extentdb_storage::config::InstanceConfig;
use extentdb_storage::instance::SetupOptions;
use extentdb_storage::Instance;

#[derive(Args)]
pub struct ExecArgs {
    /// The instance's directory; with no instance there, one is set up with defaults.
    #[arg(long)]
    data_dir: PathBuf,
    /// The database to start in (default master).
    #[arg(short = 'd', long = "database")]
    database: Option<String>,
    /// Script files to run in order (standard input without -i).
    #[arg(short = 'i', long = "input")]
    inputs: Vec<PathBuf>,
    /// A query to run instead of scripts.
    #[arg(short = 'Q', long = "query")]
    query: Option<String>,
    /// Exit with code 1 after an error of severity 11 or more (sqlcmd -b).
    #[arg(short = 'b')]
    stop_on_error: bool,
    /// A startup trace flag (repeatable), global for the life of the process, as SQL Server's -T.
    #[arg(short = 'T', long = "trace-flag", value_parser = built_trace_flag)]
    trace_flags: Vec<u32>,
    /// Startup option -E: a file with skip target 1 takes 64 consecutive extents before
    /// proportional fill moves on to the next file.
    #[arg(short = 'E')]
    consecutive_extents: bool,
}

/// A startup trace flag (-T): one extentdb builds (`BUILT_TRACE_FLAGS`), else refused, as
/// DBCC TRACEON refuses it, never set and ignored.
pub(crate) fn built_trace_flag(s: &str) -> Result<u32, String> {
    use extentdb_storage::instance::BUILT_TRACE_FLAGS;
    let f: u32 = s.parse().map_err(|e| format!("{e}"))?;
    match BUILT_TRACE_FLAGS.contains(&f) {
        true => Ok(f),
        false => Err(format!(
            "trace flag {f} is not built in extentdb (built: {BUILT_TRACE_FLAGS:?})"
        )),
    }
}

/// Runs the scripts; the exit code is 1 after an error under -b, else 0.
pub fn run(a: ExecArgs, fs: Arc<dyn FileSystem>) -> Result<u8, String> {
    ensure_instance(&fs, &a.data_dir, None)?;
    let instance =
        Arc::new(Instance::start(fs, &a.data_dir, &a.trace_flags).map_err(|e| e.to_string())?);
    instance.set_startup_e(a.consecutive_extents);
    let engine = Engine::new(instance.clone());
    let mut session = engine.session();
    let code = run_scripts(&a, &mut session);
    // The session's open transaction rolls back as it ends; then a checkpoint per database.
    drop(session);
    instance.shutdown();
    code
}

/// Sets up an instance with default settings in `dir` unless one is there (and says so);
/// true when it set one up.
pub fn ensure_instance(
    fs: &Arc<dyn FileSystem>,
    dir: &std::path::Path,
    sa_password: Option<String>,
) -> Result<bool, String> {
    if Instance::exists(dir) {
        return Ok(false);
    }
    Instance::setup(
        fs.clone(),
        dir,
        SetupOptions {
            config: InstanceConfig::defaults(dir),
            sa_password,
        },
    )
    .map_err(|e| e.to_string())?;
    eprintln!(
        "extentdb: no instance in {}; set one up with default settings.",
        dir.display()
    );
    Ok(true)
}

/// Runs the inputs in the session; the exit code is 1 after an error under -b, else 0.
fn run_scripts(a: &ExecArgs, session: &mut extentdb_sql::exec::Session) -> Result<u8, String> {
    let mut scripts = Vec::new();
    if let Some(q) = &a.query {
        scripts.push(q.clone());
    } else if a.inputs.is_empty() {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| e.to_string())?;
        scripts.push(s);
    } else {
        for p in &a.inputs {
            scripts.push(std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?);
        }
    }
    if let Some(db) = &a.database {
        if let Some(code) = emit(
            session.execute(&format!("USE [{}]", db.replace(']', "]]"))),
            a.stop_on_error,
            None,
        ) {
            return Ok(code);
        }
    }
    for script in scripts {
        for batch in split_batches(&script) {
            for _ in 0..batch.repeat.max(1) {
                let mut p = Printer::new(None);
                session.execute_streaming(&batch.text, Vec::new(), &mut p);
                if let Some(code) = p.end(a.stop_on_error) {
                    return Ok(code);
                }
            }
        }
    }
    Ok(0)
}

/// Prints a batch's outputs as sqlcmd does; returns an exit code when -b says to stop.
/// `server` is the name `Msg` lines carry (sqlcmd over TDS prints it; `exec` has none).
pub fn emit(outputs: Vec<Output>, stop_on_error: bool, server: Option<&str>) -> Option<u8> {
    let mut p = Printer::new(server);
    for o in outputs {
        p.emit(o);
    }
    p.end(stop_on_error)
}

/// Prints outputs as they come, a streamed result set row by row.
pub struct Printer<'a> {
    out: std::io::StdoutLock<'static>,
    server: Option<&'a str>,
    /// The columns of the result set being streamed.
    columns: Option<Vec<(String, extentdb_sql::types::SqlType)>>,
    failed: bool,
}

impl<'a> Printer<'a> {
    pub fn new(server: Option<&'a str>) -> Printer<'a> {
        Printer {
            out: std::io::stdout().lock(),
            server,
            columns: None,
            failed: false,
        }
    }

    fn write(&mut self, text: &str) -> bool {
        use std::io::Write;
        let ok = self.out.write_all(text.as_bytes()).is_ok();
        if !text.ends_with('\n') {
            let _ = self.out.write_all(b"\n");
        }
        ok
    }

    /// Ends a streamed result set with sqlcmd's empty line.
    fn end_result_set(&mut self) {
        if self.columns.take().is_some() {
            self.write("\n");
        }
    }

    /// Flushes; an exit code when -b says to stop.
    pub fn end(mut self, stop_on_error: bool) -> Option<u8> {
        use std::io::Write;
        self.end_result_set();
        let _ = self.out.flush();
        (self.failed && stop_on_error).then_some(1)
    }
}

impl OutputSink for Printer<'_> {
    fn emit(&mut self, o: Output) -> bool {
        if let Output::Row(r) = &o {
            let line = render::render_row(self.columns.as_deref().unwrap_or(&[]), r);
            return self.write(&line);
        }
        self.end_result_set();
        let text = match o {
            Output::Rows { columns, rows } => render::render_result_set(&columns, &rows),
            Output::Columns(columns) => {
                let header = render::render_header(&columns);
                self.columns = Some(columns);
                header
            }
            Output::Row(_) => unreachable!("handled above"),
            Output::RowsAffected(n) => format!("{}\n", render::rows_affected(n)),
            Output::Info(m) => format!("{}\n", m.text),
            Output::EnvChange(_) | Output::StatementEnd(_) => return true,
            Output::Error(e) => {
                self.failed |= e.severity >= 11;
                match self.server {
                    Some(s) => render::render_error_at(&e, s),
                    None => render::render_error(&e),
                }
            }
        };
        self.write(&text)
    }
}
