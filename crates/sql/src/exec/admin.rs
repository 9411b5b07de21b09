//! DBCC commands and system procedures: DBCC TRACEON / TRACEOFF / TRACESTATUS / LOGINFO /
//! SQLPERF / SHOWFILESTATS / PAGE / CHECKALLOC, xp_readerrorlog (sp_readerrorlog),
//! sp_cycle_errorlog, the space procedures (sp_spaceused, sp_helpfile, sp_helpdb: `space`, `helpdb`), and dynamic
//! EXEC ('...').

use extentdb_format::PageId;
use extentdb_storage::errorlog::LogLine;
use extentdb_storage::StorageError;

use super::checkdb::CheckKind;
use super::eval::{as_i64, to_text};
use super::lower::not_yet;
use super::{Flow, Out, Output, Session};
use crate::ast::{Dbcc, ExecArg, ExecTarget, Execute};
use crate::dbcc_page;
use crate::messages::{msg, SqlError};
use crate::parser::parse_batch;
use crate::types::{SqlType, Value, MAX_LENGTH, TICKS_PER_DAY};

/// The DBCC commands whose support lands with later work, so they are refused by name.
const LATER_DBCC: &[&str] = &["SHRINKDATABASE", "IND"];

/// The checks (checkdb.rs `check_settings`) read their own WITH options, and so does
/// SHOW_STATISTICS (show_statistics.rs).
const CHECKS: &[&str] = &[
    "CHECKDB",
    "CHECKTABLE",
    "CHECKALLOC",
    "CHECKCATALOG",
    "CHECKFILEGROUP",
];

/// The commands whose output is a result set already, with or without TABLERESULTS, so
/// the option asks for what they do.
const TABLE_OUTPUT: &[&str] = &["LOGINFO", "SQLPERF", "TRACESTATUS", "SHOWFILESTATS"];

/// The commands that print text and read TABLERESULTS themselves, giving rows instead.
const OWN_TABLERESULTS: &[&str] = &["DBINFO", "PAGE"];

/// Refuses a WITH option command `name` does not read, never accepting it unheard:
/// NO_INFOMSGS every command takes, TABLERESULTS those of `TABLE_OUTPUT` and
/// `OWN_TABLERESULTS`; SQL Server's other options (OPENTRAN's TABLERESULTS, SHRINKFILE's
/// WAIT_AT_LOW_PRIORITY) are not built (40517), and a word no DBCC command takes is 2526.
/// The checks read theirs.
fn refuse_unread_options(
    name: &str,
    options: &[crate::ast::WithOption],
) -> Result<(), Vec<SqlError>> {
    if CHECKS.contains(&name) || name == "SHOW_STATISTICS" {
        return Ok(());
    }
    for o in options {
        let option = o.name.to_ascii_uppercase();
        match option.as_str() {
            "NO_INFOMSGS" => {}
            "TABLERESULTS" if TABLE_OUTPUT.contains(&name) => {}
            "TABLERESULTS" if OWN_TABLERESULTS.contains(&name) => {}
            "TABLERESULTS" | "WAIT_AT_LOW_PRIORITY" => {
                return Err(vec![not_yet(&format!("DBCC {name} WITH {option}"))])
            }
            _ => return Err(vec![msg(2526, &[])]),
        }
    }
    Ok(())
}

impl Session {
    pub(super) fn dbcc(&mut self, d: &Dbcc, out: &mut Out) -> Result<(), Vec<SqlError>> {
        let name = d.name.to_ascii_uppercase();
        let mut args = Vec::new();
        for a in &d.args {
            // A bare name (DBCC LOGINFO (Company)) is text, as in T-SQL.
            let v = match a {
                crate::ast::Expr::Column(c) if c.parts.len() == 1 => {
                    Value::Text(c.name().to_string())
                }
                other => self.eval(other, None).map_err(|e| vec![e])?,
            };
            args.push(v);
        }
        self.check_dbcc_permission(&name, &args)?;
        refuse_unread_options(&name, &d.options)?;
        match name.as_str() {
            "TRACEON" | "TRACEOFF" => self.trace(name == "TRACEON", &args)?,
            "TRACESTATUS" => self.trace_status(&args, out)?,
            "LOGINFO" => self.loginfo(&args, out)?,
            "SQLPERF" => {
                // Only LOGSPACE; SQL Server's other SQLPERF options clear wait statistics.
                if !matches!(args.first(), Some(Value::Text(t)) if t.eq_ignore_ascii_case("LOGSPACE"))
                {
                    return Err(vec![msg(2526, &[])]);
                }
                let r = super::views::log_space(&self.engine.instance);
                self.send_rowset(r, out);
            }
            "SHOWFILESTATS" => self.show_file_stats(&args, out)?,
            "SHRINKFILE" => self.shrink_file(&args, out)?,
            "PAGE" => self.dbcc_page(d, &args, out)?,
            "CHECKDB" => self.dbcc_check(CheckKind::CheckDb, d, &args, out)?,
            "CHECKTABLE" => self.dbcc_check(CheckKind::CheckTable, d, &args, out)?,
            "CHECKALLOC" => self.dbcc_check(CheckKind::CheckAlloc, d, &args, out)?,
            "CHECKCATALOG" => self.dbcc_check(CheckKind::CheckCatalog, d, &args, out)?,
            "CHECKFILEGROUP" => self.dbcc_check(CheckKind::CheckFilegroup, d, &args, out)?,
            "DBINFO" => self.dbcc_dbinfo(d, &args, out)?,
            "OPENTRAN" => self.dbcc_opentran(&args, out)?,
            "SHOW_STATISTICS" => self.show_statistics(d, &args, out)?,
            n if LATER_DBCC.contains(&n) => return Err(vec![not_yet(&format!("DBCC {n}"))]),
            _ => return Err(vec![msg(2526, &[])]),
        }
        if !d
            .options
            .iter()
            .any(|o| o.name.eq_ignore_ascii_case("NO_INFOMSGS"))
        {
            out.push(Output::Info(msg(2528, &[])));
        }
        Ok(())
    }

    /// Whether trace flag `f` is on for this session (its own or a global one).
    pub(super) fn trace_flag(&self, f: u32) -> bool {
        self.flags.contains(&f)
            || self
                .engine
                .instance
                .trace_flags
                .lock()
                .unwrap()
                .contains(&f)
    }

    /// DBCC TRACEON/TRACEOFF (n [, n ...] [, -1]): -1 makes them global. TRACEON of a flag
    /// not built is 40517 and sets none of the list.
    fn trace(&mut self, on: bool, args: &[Value]) -> Result<(), Vec<SqlError>> {
        let mut flags = Vec::new();
        let mut global = false;
        for a in args {
            match as_i64(a).map_err(|e| vec![e])? {
                -1 => global = true,
                f if on && (1..=i32::MAX as i64).contains(&f) => {
                    // A flag whose SQL Server behaviour is not built is refused, not set
                    // and ignored (BUILT_TRACE_FLAGS).
                    if !extentdb_storage::instance::BUILT_TRACE_FLAGS.contains(&(f as u32)) {
                        return Err(vec![not_yet(&format!("trace flag {f}"))]);
                    }
                    flags.push(f as u32)
                }
                f if (1..=i32::MAX as i64).contains(&f) => flags.push(f as u32),
                f => {
                    return Err(vec![SqlError {
                        number: 2579,
                        severity: 16,
                        state: 1,
                        text: format!("Invalid trace flag {f}."),
                        line: 0,
                        procedure: None,
                    }])
                }
            }
        }
        {
            let inst = &self.engine.instance;
            let mut g = inst.trace_flags.lock().unwrap();
            for &f in &flags {
                let set = if global { &mut *g } else { &mut self.flags };
                if on {
                    set.insert(f);
                } else {
                    set.remove(&f);
                    if global {
                        self.flags.remove(&f);
                    }
                }
            }
        }
        if !flags.is_empty() {
            let list: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
            let verb = if on { "TRACEON" } else { "TRACEOFF" };
            self.engine.instance.errorlog.write(&format!("spid{}", self.spid), &format!("DBCC {verb} {}, server process ID (SPID) {}. This is an informational message only; no user action is required.", list.join(", "), self.spid));
        }
        Ok(())
    }

    fn trace_status(&mut self, args: &[Value], out: &mut Out) -> Result<(), Vec<SqlError>> {
        let wanted: Vec<i64> = args
            .iter()
            .map(as_i64)
            .collect::<Result<_, _>>()
            .map_err(|e| vec![e])?;
        let global = self.engine.instance.trace_flags.lock().unwrap().clone();
        let mut all: Vec<u32> = global.iter().chain(self.flags.iter()).copied().collect();
        all.sort_unstable();
        all.dedup();
        let rows: Vec<Vec<Value>> = all
            .into_iter()
            // No argument lists every flag; -1 alone the global ones; numbers those flags.
            .filter(|f| match wanted.as_slice() {
                [] => true,
                [-1] => global.contains(f),
                list => list.contains(&(*f as i64)),
            })
            .map(|f| {
                let (g, s) = (global.contains(&f), self.flags.contains(&f));
                vec![
                    Value::Int(f as i32),
                    Value::Int(1),
                    Value::Int(g as i32),
                    Value::Int(s as i32),
                ]
            })
            .collect();
        let columns = ["TraceFlag", "Status", "Global", "Session"]
            .iter()
            .map(|n| (n.to_string(), SqlType::Int))
            .collect();
        let n = rows.len() as u64;
        out.push(Output::Rows { columns, rows });
        self.rows_affected(n, out);
        Ok(())
    }

    /// DBCC PAGE ({db name | db id | 0}, file, page [, printopt]) [WITH TABLERESULTS]: the
    /// page as SQL Server prints it (`crate::dbcc_page`), read through the buffer pool so a
    /// dirty page shows its current content. The lines go to the client with trace flag
    /// 3604 (session or global), else to the error log; WITH TABLERESULTS they come as
    /// rows (ParentObject, Object, Field, VALUE) to the client, 3604 or not.
    fn dbcc_page(&mut self, d: &Dbcc, args: &[Value], out: &mut Out) -> Result<(), Vec<SqlError>> {
        let (db_id, db, pid, printopt) = self.dbcc_page_args(args)?;
        let tabled = d
            .options
            .iter()
            .any(|o| o.name.eq_ignore_ascii_case("TABLERESULTS"));
        let (printed, grid) = {
            let d = db.read().unwrap();
            let (p, dirty) = match d.read_page_current(pid) {
                Ok(x) => x,
                Err(StorageError::PageOutOfRange { .. } | StorageError::FileNotFound(_)) => {
                    return Err(page_out_of_range(pid))
                }
                Err(e) => return Err(super::errors::map(&e, super::errors::Context::Other)),
            };
            let maps = dbcc_page::read_maps(pid, |at| d.read_page_current(at).ok().map(|x| x.0));
            let au = p.raw_header().allocation_unit_id;
            // A record holds the stored columns only (a computed column not PERSISTED is not).
            let table = d.catalog.tables.iter().find(|t| t.allocation_unit_id == au);
            let stored = table.map(extentdb_storage::table::stored_entry);
            let ctx = dbcc_page::PageContext {
                database_id: db_id,
                dirty,
                maps,
                table: stored.as_ref(),
            };
            if tabled {
                let (rows, grid) = dbcc_page::table_results(pid, &p, printopt, &ctx);
                (PageOutput::Rows(rows), grid)
            } else {
                match dbcc_page::format_index_page(pid, &p, printopt, &ctx) {
                    Some((lines, grid)) => (PageOutput::Lines(lines), Some(grid)),
                    None => {
                        let lines = dbcc_page::format_page(pid, &p, printopt, &ctx);
                        (PageOutput::Lines(lines), None)
                    }
                }
            }
        };
        match printed {
            PageOutput::Lines(lines) => self.dbcc_print(lines, out),
            PageOutput::Rows(rows) => {
                let columns = dbcc_page::table_results_columns();
                self.send_rowset(super::views::Rowset { columns, rows }, out);
            }
        }
        // An index page's rows come as a result set (dbcc_page invariant 2).
        if let Some((columns, rows)) = grid {
            out.push(Output::Rows { columns, rows });
        }
        Ok(())
    }

    /// DBCC PAGE's arguments: the database (id and handle), the page, the print option
    /// (0 when not given or NULL; past 255 as 255, which prints the header only). Fewer
    /// than three is 2526; a file or page no file can have is 8968.
    fn dbcc_page_args(
        &mut self,
        args: &[Value],
    ) -> Result<(u16, extentdb_storage::instance::DbHandle, PageId, u8), Vec<SqlError>> {
        if args.len() < 3 {
            return Err(vec![msg(2526, &[])]);
        }
        let (db_id, db) = self.dbcc_database(args.first())?;
        let number = |v: &Value| as_i64(v).map_err(|e| vec![e]);
        let (file, page) = (number(&args[1])?, number(&args[2])?);
        let printopt = match args.get(3) {
            Some(v) if !v.is_null() => number(v)?,
            _ => 0,
        };
        let (Ok(file_no), Ok(page_no)) = (u16::try_from(file), u32::try_from(page)) else {
            let pid = format!("({file}:{page})");
            return Err(vec![msg(
                8968,
                &[&"DBCC PAGE", &pid, &0, &-1, &0, &0, &"Unknown"],
            )]);
        };
        let pid = PageId::new(file_no, page_no);
        Ok((db_id, db, pid, printopt.clamp(0, 255) as u8))
    }

    /// DBCC's printed output (PAGE, DBINFO): to the client with trace flag 3604 (session or
    /// global), else to the error log, as SQL Server does.
    pub(super) fn dbcc_print(&mut self, lines: Vec<String>, out: &mut Out) {
        let inst = self.engine.instance.clone();
        let to_client = self.trace_flag(extentdb_storage::instance::TF_TO_CLIENT);
        if to_client {
            out.extend(lines.into_iter().map(|l| Output::Info(SqlError::print(l))));
        } else {
            let source = format!("spid{}", self.spid);
            for l in lines {
                inst.errorlog.write(&source, &l);
            }
        }
    }

    /// DBCC LOGINFO [(db)]: one row per VLF, as SQL Server lists them.
    fn loginfo(&mut self, args: &[Value], out: &mut Out) -> Result<(), Vec<SqlError>> {
        let inst = self.engine.instance.clone();
        let db = match args.first() {
            None => inst.database(self.database_id),
            Some(Value::Text(name)) => inst.database_by_name(name).map(|(_, d)| d),
            Some(v) => u16::try_from(as_i64(v).map_err(|e| vec![e])?)
                .ok()
                .and_then(|id| inst.database(id)),
        };
        let db =
            db.ok_or_else(|| vec![msg(2520, &[&args.first().map(to_text).unwrap_or_default()])])?;
        let (vlfs, checkpoint_seq) = {
            let d = db.read().unwrap();
            let vlfs = d
                .vlfs()
                .map_err(|e| super::errors::map(&e, super::errors::Context::Other))?;
            (vlfs, d.boot.checkpoint_lsn.vlf_sequence.max(1))
        };
        let rows: Vec<Vec<Value>> = vlfs
            .iter()
            .map(|v| {
                vec![
                    Value::Int(0),
                    Value::Int(v.file_id as i32),
                    Value::BigInt(v.size as i64),
                    Value::BigInt(v.start_offset as i64),
                    Value::Int(v.sequence as i32),
                    // 2 = active (needed from the checkpoint on), 0 = reusable.
                    Value::Int(if v.sequence >= checkpoint_seq { 2 } else { 0 }),
                    Value::TinyInt(v.parity),
                    super::backup::lsn_value(v.create_lsn),
                ]
            })
            .collect();
        let columns = vec![
            ("RecoveryUnitId".to_string(), SqlType::Int),
            ("FileId".to_string(), SqlType::Int),
            ("FileSize".to_string(), SqlType::BigInt),
            ("StartOffset".to_string(), SqlType::BigInt),
            ("FSeqNo".to_string(), SqlType::Int),
            ("Status".to_string(), SqlType::Int),
            ("Parity".to_string(), SqlType::TinyInt),
            ("CreateLSN".to_string(), super::backup::LSN_TYPE),
        ];
        let n = rows.len() as u64;
        out.push(Output::Rows { columns, rows });
        self.rows_affected(n, out);
        Ok(())
    }

    pub(super) fn execute_proc(&mut self, e: &Execute, out: &mut Out) -> Result<(), Vec<SqlError>> {
        let (name, args) = match &e.target {
            ExecTarget::Dynamic { parts } => {
                let mut sql = String::new();
                for p in parts {
                    sql.push_str(&to_text(&self.eval(p, None).map_err(|e| vec![e])?));
                }
                return self.dynamic(&sql, out);
            }
            ExecTarget::Procedure { name, args } => (name, args),
        };
        let mut values = Vec::new();
        for a in args {
            let v = match &a.value {
                crate::ast::Expr::Column(c) if c.parts.len() == 1 => {
                    Value::Text(c.name().to_string())
                }
                crate::ast::Expr::Default => Value::Null,
                other => self.eval(other, None).map_err(|e| vec![e])?,
            };
            values.push(v);
        }
        let proc = name.name().to_ascii_lowercase();
        let bind = |params: &[&str]| bind_args(&proc, params, args, values.clone());
        super::catalog_procedures::in_current_database(self, &proc, name)?;
        match proc.as_str() {
            "xp_readerrorlog" | "sp_readerrorlog" => self.read_errorlog(&values, out),
            "sp_spaceused" => self.sp_spaceused(&bind(super::space::SP_SPACEUSED_PARAMS)?, out),
            "sp_helpfile" => self.sp_helpfile(&bind(super::helpdb::SP_HELPFILE_PARAMS)?, out),
            "sp_helpdb" => self.sp_helpdb(&bind(super::helpdb::SP_HELPDB_PARAMS)?, out),
            "sp_helpindex" => self.sp_helpindex(&bind(&["@objname"])?, out),
            "sp_tables" => self.sp_tables(&bind(super::catalog_procedures::SP_TABLES_PARAMS)?, out),
            "sp_columns" | "sp_columns_100" => {
                let v100 = proc == "sp_columns_100";
                let args = bind(if v100 {
                    super::catalog_procedures::SP_COLUMNS_100_PARAMS
                } else {
                    super::catalog_procedures::SP_COLUMNS_PARAMS
                })?;
                self.sp_columns(&args, v100, out)
            }
            "sp_pkeys" => self.sp_pkeys(&bind(super::catalog_procedures::SP_PKEYS_PARAMS)?, out),
            "sp_fkeys" => self.sp_fkeys(&bind(super::catalog_procedures::SP_FKEYS_PARAMS)?, out),
            "sp_server_info" => {
                self.sp_server_info(&bind(super::datatype_info::SP_SERVER_INFO_PARAMS)?, out)
            }
            "sp_datatype_info" => {
                self.sp_datatype_info(&bind(super::datatype_info::SP_DATATYPE_INFO_PARAMS)?, out)
            }
            "sp_datatype_info_100" => Err(vec![super::lower::not_yet("sp_datatype_info_100")]),
            "sp_configure" => {
                self.sp_configure(&bind(super::configuration::SP_CONFIGURE_PARAMS)?, out)
            }
            "sp_helptext" => self.sp_helptext(&bind(&["@objname", "@columnname"])?, out),
            "sp_updatestats" => self.sp_updatestats(&bind(&["@resample"])?, out),
            "sp_delete_backuphistory" => self.sp_delete_backuphistory(&bind(&["@oldest_date"])?),
            "sp_executesql" => {
                self.sp_executesql(args, values.clone(), out)?;
                self.return_status(e, 0)
            }
            "xp_create_subdir" => {
                let status = self.xp_create_subdir(&values)?;
                self.return_status(e, status)
            }
            "xp_delete_file" => {
                let status = self.xp_delete_file(&values)?;
                self.return_status(e, status)
            }
            "xp_fileexist" => {
                let r = self.xp_fileexist(&values)?;
                self.send_rowset(r, out);
                self.return_status(e, 0)
            }
            "sp_who" | "sp_who2" => {
                let all = super::lock_views::sp_who(&self.engine.instance, proc == "sp_who2");
                // Without VIEW SERVER STATE a login sees its own session only.
                let rows = if self.view_server_state_scope("sys.dm_exec_sessions")? {
                    own_rows(all, self.spid)
                } else {
                    all
                };
                self.send_rowset(rows, out);
                Ok(())
            }
            "sp_lock" => {
                self.view_server_state_scope("sys.dm_tran_locks")?;
                let r = super::lock_views::sp_lock(&self.engine.instance);
                self.send_rowset(r, out);
                Ok(())
            }
            "sp_cycle_errorlog" => {
                let log = &self.engine.instance.errorlog;
                log.write(&format!("spid{}", self.spid), "Attempting to cycle error log. This is an informational message only; no user action is required.");
                log.cycle().map_err(|e| {
                    vec![SqlError {
                        number: 17049,
                        severity: 16,
                        state: 1,
                        text: format!("Unable to cycle error log file: {e}"),
                        line: 0,
                        procedure: None,
                    }]
                })?;
                log.write(
                    &format!("spid{}", self.spid),
                    "The error log has been reinitialized. See the previous log for older entries.",
                );
                out.push(Output::Info(msg(2528, &[])));
                Ok(())
            }
            // extentdb keeps no extended properties (column_views.rs invariant 3).
            "sp_addextendedproperty" | "sp_updateextendedproperty" | "sp_dropextendedproperty" => {
                Err(vec![super::lower::not_yet(&format!(
                    "{proc} (extended properties)"
                ))])
            }
            _ => match self.user_procedure(name)? {
                Some(m) => {
                    let rc = e.return_variable.as_deref();
                    self.execute_user_procedure(&m, args, values.clone(), rc, out)
                }
                None => Err(vec![msg(2812, &[&name.joined()])]),
            },
        }
    }

    /// `EXEC @rc = proc`: the procedure's status into @rc.
    fn return_status(&mut self, e: &Execute, status: i32) -> Result<(), Vec<SqlError>> {
        match &e.return_variable {
            Some(v) => self
                .assign(v, crate::ast::AssignOp::Assign, Value::Int(status))
                .map_err(|e| vec![e]),
            None => Ok(()),
        }
    }

    /// xp_readerrorlog [archive [, log type [, search1 [, search2]]]].
    fn read_errorlog(&mut self, args: &[Value], out: &mut Out) -> Result<(), Vec<SqlError>> {
        let archive = match args.first() {
            Some(v) if !v.is_null() => as_i64(v).map_err(|e| vec![e])?,
            _ => 0,
        };
        let searches: Vec<String> = args
            .iter()
            .skip(2)
            .filter(|v| !v.is_null())
            .map(|v| to_text(v).to_lowercase())
            .collect();
        let lines = match u32::try_from(archive) {
            Ok(a) if a <= extentdb_storage::errorlog::ARCHIVES => self.engine.instance.errorlog.read(a).unwrap_or_default(),
            _ => return Err(vec![SqlError { number: 22004, severity: 16, state: 1, text: "xp_readerrorlog() returned error 2, 'The system cannot find the file specified.'".into(), line: 0, procedure: Some("xp_readerrorlog".into()) }]),
        };
        let rows: Vec<Vec<Value>> = lines
            .into_iter()
            .filter(|l| searches.iter().all(|s| l.text.to_lowercase().contains(s)))
            .map(|l: LogLine| {
                vec![
                    Value::DateTime(parse_log_date(&l.date)),
                    Value::Text(l.source),
                    Value::Text(l.text),
                ]
            })
            .collect();
        let columns = vec![
            ("LogDate".into(), SqlType::DateTime),
            ("ProcessInfo".into(), SqlType::NVarChar(12)),
            ("Text".into(), SqlType::NVarChar(MAX_LENGTH)),
        ];
        let n = rows.len() as u64;
        out.push(Output::Rows { columns, rows });
        self.rows_affected(n, out);
        Ok(())
    }

    /// EXEC ('...'): runs the text as a batch of its own, with its own variables and
    /// table variables.
    fn dynamic(&mut self, sql: &str, out: &mut Out) -> Result<(), Vec<SqlError>> {
        self.run_nested(sql, Vec::new(), out)
    }

    /// Runs `sql` as a batch of its own inside the current statement (EXEC (@sql), a system
    /// procedure written in T-SQL): its own variables, `params` declared among them, and
    /// table variables, the caller's given back after it; the caller's transaction.
    pub(super) fn run_nested(
        &mut self,
        sql: &str,
        params: Vec<(String, SqlType, Value)>,
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        self.run_nested_with_outputs(sql, params, &[], out)
            .map(|_| ())
    }

    /// `run_nested`, returning the values its variables named in `outputs` (with `@`)
    /// hold at its end (sp_executesql's OUTPUT parameters).
    pub(super) fn run_nested_with_outputs(
        &mut self,
        sql: &str,
        params: Vec<(String, SqlType, Value)>,
        outputs: &[String],
        out: &mut Out,
    ) -> Result<Vec<Value>, Vec<SqlError>> {
        let parsed = parse_batch(sql).map_err(|e| vec![super::parse_error(e)])?;
        let names: Vec<String> = outputs.iter().map(|n| n.to_lowercase()).collect();
        let params = params
            .into_iter()
            .map(|(n, t, v)| (n.to_lowercase(), t, v))
            .collect();
        let ((), ended) = self.in_own_scope(params, &names, |s| {
            let _: Flow = s.run_block(&parsed, out);
        });
        Ok(ended)
    }
}

/// What DBCC PAGE gives before an index page's rows: its lines, printed (3604 to the
/// client, else the error log), or WITH TABLERESULTS its rows, sent to the client.
enum PageOutput {
    Lines(Vec<String>),
    Rows(Vec<Vec<Value>>),
}

/// Msg 8968 for a page beyond its file or in a file the database does not have.
fn page_out_of_range(pid: PageId) -> Vec<SqlError> {
    let at = pid.to_string();
    vec![msg(8968, &[&"DBCC PAGE", &at, &0, &-1, &0, &0, &"Unknown"])]
}

/// A system procedure's arguments bound to its parameters (`params`, with their `@`), by
/// position or by name; parameters not given are NULL. Too many arguments is Msg 8144, an
/// unknown name Msg 8145.
fn bind_args(
    proc: &str,
    params: &[&str],
    args: &[ExecArg],
    values: Vec<Value>,
) -> Result<Vec<Value>, Vec<SqlError>> {
    let mut bound = vec![Value::Null; params.len()];
    for (i, (arg, value)) in args.iter().zip(values).enumerate() {
        let at = match &arg.name {
            None if i < params.len() => i,
            None => return Err(vec![msg(8144, &[&proc])]),
            Some(n) => {
                let n = n.trim_start_matches('@');
                let found = params.iter().position(|p| p[1..].eq_ignore_ascii_case(n));
                found.ok_or_else(|| vec![msg(8145, &[&format!("@{n}"), &proc])])?
            }
        };
        bound[at] = value;
    }
    Ok(bound)
}

/// `yyyy-mm-dd hh:mm:ss.ff` to ticks since 0001-01-01.
fn parse_log_date(s: &str) -> i64 {
    let n = |a: usize, b: usize| s.get(a..b).and_then(|x| x.parse::<i64>().ok()).unwrap_or(0);
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    let days = days_from_civil(y, m, d);
    let secs = n(11, 13) * 3600 + n(14, 16) * 60 + n(17, 19);
    days * TICKS_PER_DAY + secs * 10_000_000 + n(20, 22) * 100_000
}

/// Days since 0001-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    // 719_468 days from 0000-03-01 to 1970-01-01; 719_162 from 0001-01-01 to 1970-01-01.
    era * 146_097 + doe - 719_468 + 719_162
}

impl Session {
    /// KILL spid: the session's running batch is cancelled, its connection closes and its
    /// open transaction rolls back (when its connection's thread drops it).
    pub(super) fn kill(&mut self, target: &crate::ast::Expr) -> Result<(), Vec<SqlError>> {
        if !self.has_server_permission("ALTER ANY CONNECTION") {
            return Err(vec![msg(6102, &[])]);
        }
        let v = self.eval(target, None).map_err(|e| vec![e])?;
        let spid = as_i64(&v).map_err(|e| vec![e])?;
        if spid == self.spid as i64 {
            return Err(vec![msg(6104, &[])]);
        }
        if !(1..=i64::from(u16::MAX)).contains(&spid) {
            return Err(vec![msg(6106, &[&spid])]);
        }
        let sessions = self.engine.instance.sessions.lock().unwrap();
        let Some(info) = sessions.get(&(spid as u16)) else {
            return Err(vec![msg(6106, &[&spid])]);
        };
        info.kill();
        Ok(())
    }
}

/// The rows of a session list whose first column (`spid`, `SPID`) is this session's.
fn own_rows(mut r: super::views::Rowset, spid: u16) -> super::views::Rowset {
    r.rows.retain(|row| match &row[0] {
        Value::SmallInt(v) => *v as u16 == spid,
        Value::Text(t) => t.trim() == spid.to_string(),
        _ => false,
    });
    r
}

#[cfg(test)]
mod tests {
    /// Pins the calendar arithmetic against known day numbers.
    #[test]
    fn civil_days() {
        assert_eq!(super::days_from_civil(1, 1, 1), 0);
        assert_eq!(super::days_from_civil(1970, 1, 1), 719_162);
        assert_eq!(super::days_from_civil(2016, 10, 4), 736_240);
    }
}
