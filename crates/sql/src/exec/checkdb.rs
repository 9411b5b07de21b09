//! DBCC CHECKDB, CHECKTABLE, CHECKCATALOG, CHECKALLOC and CHECKFILEGROUP: the statement's arguments and
//! options, the run on a snapshot of the database (`extentdb_storage::snapshot`) outside
//! the database's lock, and the report in SQL Server's messages (or, WITH TABLERESULTS, its
//! result set). `render_check` is shared with `extentdb checkdb`, which checks a stopped
//! instance's files.

use std::sync::atomic::AtomicBool;

use extentdb_format::catalog::ColumnEntry;
use extentdb_storage::check_db::{check_database, CheckDbReport, CheckOptions, Finding};
use extentdb_storage::instance::RequestProgress;
use extentdb_storage::snapshot::CheckSource;
use extentdb_storage::StorageError;

use super::eval::as_i64;
use super::views::Rowset;
use super::{Out, Output, Session};
use crate::ast::{Dbcc, OptionValue};
use crate::messages::{msg, msg_strings, SqlError};
use crate::rowcodec::{self, StoredType};
use crate::types::{SqlType, Value};

/// Which DBCC check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckKind {
    CheckDb,
    CheckTable,
    CheckAlloc,
    CheckCatalog,
    CheckFilegroup,
}

impl CheckKind {
    pub fn name(self) -> &'static str {
        match self {
            CheckKind::CheckDb => "CHECKDB",
            CheckKind::CheckTable => "CHECKTABLE",
            CheckKind::CheckAlloc => "CHECKALLOC",
            CheckKind::CheckCatalog => "CHECKCATALOG",
            CheckKind::CheckFilegroup => "CHECKFILEGROUP",
        }
    }
}

/// The WITH options of a check.
#[derive(Debug, Clone, Default)]
pub struct CheckSettings {
    pub no_infomsgs: bool,
    pub table_results: bool,
    pub physical_only: bool,
    pub maxdop: usize,
    /// CHECKTABLE (table, index_id): only that nonclustered index of the table.
    pub index_id: Option<u16>,
    /// ALL_ERRORMSGS: every index row finding printed, not the first 200 per index.
    pub all_errormsgs: bool,
    /// Trace flag 2549 (session or global): each data file read as its own drive.
    pub per_file_read_ahead: bool,
    /// CHECKFILEGROUP's data space.
    pub filegroup: Option<u16>,
}

/// DATA_PURITY: the value is legal for its column's type, else the type's name (2570).
pub fn value_check(c: &ColumnEntry, bytes: &[u8]) -> Option<String> {
    let t = rowcodec::sql_type(StoredType {
        system_type_id: c.system_type_id,
        max_length: c.max_length,
        precision: c.precision,
        scale: c.scale,
    })?;
    rowcodec::check_value(t, bytes)
        .err()
        .map(|_| crate::convert::data_type_name(t))
}

/// A stored value as CHECKDB's index row findings print it (8955, 8956): numbers as they
/// are, binary as `0x...`, other values quoted.
pub fn value_text(c: &ColumnEntry, bytes: &[u8]) -> String {
    let t = rowcodec::sql_type(StoredType {
        system_type_id: c.system_type_id,
        max_length: c.max_length,
        precision: c.precision,
        scale: c.scale,
    });
    let Some(v) = t.and_then(|t| rowcodec::decode(t, Some(bytes)).ok()) else {
        return "?".into();
    };
    let text = super::eval::to_text(&v);
    match v {
        Value::Text(_) | Value::Date(_) | Value::DateTime(_) | Value::DateTime2(_) => {
            format!("'{}'", text.replace('\'', "''"))
        }
        Value::Guid(_) => format!("'{text}'"),
        _ => text,
    }
}

/// The minimum repair level of a finding: REPAIR_REBUILD for damage to a nonclustered
/// index alone (its rows against the table's), else REPAIR_ALLOW_DATA_LOSS.
fn repair_level(number: i32) -> &'static str {
    match number {
        8951 | 8952 | 8955 | 8956 | 8986 => "repair_rebuild",
        _ => "repair_allow_data_loss",
    }
}

/// What a check printed and measured.
pub struct CheckRun {
    /// The messages (or TABLERESULTS rows) in SQL Server's order.
    pub outputs: Vec<Output>,
    /// Nothing was found.
    pub clean: bool,
    /// Bytes of pages read.
    pub bytes_read: u64,
}

/// Runs `kind` on a view and reports it.
pub fn run_check(
    kind: CheckKind,
    src: &CheckSource,
    db_id: u16,
    objects: Option<Vec<u32>>,
    settings: &CheckSettings,
    cancel: Option<&AtomicBool>,
    progress: Option<&(dyn Fn(u64, u64) + Sync)>,
) -> Result<CheckRun, StorageError> {
    // The offline checks run without an engine: computed index columns need the evaluator.
    super::computed_values::register();
    let opts = CheckOptions {
        physical_only: settings.physical_only,
        maxdop: settings.maxdop,
        allocation: matches!(
            kind,
            CheckKind::CheckDb | CheckKind::CheckAlloc | CheckKind::CheckFilegroup
        ),
        catalog: matches!(kind, CheckKind::CheckDb | CheckKind::CheckCatalog),
        objects: match kind {
            // CHECKALLOC and CHECKCATALOG read no data page.
            CheckKind::CheckAlloc | CheckKind::CheckCatalog => Some(Vec::new()),
            _ => objects,
        },
        index_id: settings.index_id,
        filegroup: settings.filegroup,
        values: Some(&value_check),
        value_text: Some(&value_text),
        detail_limit: match settings.all_errormsgs {
            true => usize::MAX,
            false => extentdb_storage::check_db::DEFAULT_DETAIL_LIMIT,
        },
        per_file_read_ahead: settings.per_file_read_ahead,
        cancel,
        progress,
    };
    let report = check_database(src, &opts)?;
    Ok(CheckRun {
        outputs: render_check(kind, src, db_id, &report, settings),
        clean: report.findings.is_empty(),
        bytes_read: report.bytes_read,
    })
}

fn finding_error(f: &Finding) -> SqlError {
    msg_strings(f.number as i32, &f.args)
}

/// The report as SQL Server prints it: "DBCC results for 'db'.", then per table its errors,
/// its row and page count (2593) and, when it has errors, its summary (8990); then the
/// database-wide errors and the closing line (8989), and the minimum repair level (8958)
/// when anything was found. NO_INFOMSGS keeps only the errors and, when there are some,
/// the summaries. TABLERESULTS returns the same lines as one result set.
pub fn render_check(
    kind: CheckKind,
    src: &CheckSource,
    db_id: u16,
    report: &CheckDbReport,
    settings: &CheckSettings,
) -> Vec<Output> {
    let mut lines: Vec<(SqlError, Option<&Finding>)> = Vec::new();
    let quiet = settings.no_infomsgs;
    let name = src.name.as_str();
    let info = |lines: &mut Vec<(SqlError, Option<&Finding>)>, e: SqlError| {
        if !quiet {
            lines.push((e, None));
        }
    };
    if kind != CheckKind::CheckTable {
        info(&mut lines, msg(2536, &[&name]));
    }
    // Errors not tied to a checked table first (allocation, catalog), as SQL Server
    // reports the allocation and catalog phases before the tables.
    let checked: Vec<u32> = report.objects.iter().map(|o| o.object_id).collect();
    for f in report
        .findings
        .iter()
        .filter(|f| !checked.contains(&f.object_id))
    {
        lines.push((finding_error(f), Some(f)));
    }
    for o in &report.objects {
        let table = src
            .catalog
            .tables
            .iter()
            .find(|t| t.object_id == o.object_id)
            .map_or(o.name.clone(), |t| format!("{}.{}", t.schema_name, t.name));
        info(&mut lines, msg(2536, &[&table]));
        for f in report
            .findings
            .iter()
            .filter(|f| f.object_id == o.object_id)
        {
            lines.push((finding_error(f), Some(f)));
        }
        info(&mut lines, msg(2593, &[&o.rows, &o.pages, &table]));
        if o.allocation_errors + o.consistency_errors > 0 {
            lines.push((
                msg(
                    8990,
                    &[
                        &kind.name(),
                        &o.allocation_errors,
                        &o.consistency_errors,
                        &table,
                        &o.object_id,
                    ],
                ),
                None,
            ));
        }
    }
    let (a, c) = (report.allocation_errors(), report.consistency_errors());
    if kind != CheckKind::CheckTable && (!quiet || a + c > 0) {
        lines.push((msg(8989, &[&kind.name(), &a, &c, &name]), None));
    }
    if a + c > 0 && matches!(kind, CheckKind::CheckDb | CheckKind::CheckTable) {
        let rebuild = report
            .findings
            .iter()
            .all(|f| repair_level(f.number as i32) == "repair_rebuild");
        let level = match rebuild {
            true => "repair_rebuild",
            false => "repair_allow_data_loss",
        };
        let target = if kind == CheckKind::CheckTable {
            report
                .objects
                .first()
                .map_or(name.to_string(), |o| o.name.clone())
        } else {
            name.to_string()
        };
        lines.push((msg(8958, &[&level, &kind.name(), &target, &"", &""]), None));
    }
    if settings.table_results {
        return vec![table_results(&lines, db_id).into()];
    }
    lines
        .into_iter()
        .map(|(e, _)| {
            if e.severity > 10 {
                Output::Error(e)
            } else {
                Output::Info(e)
            }
        })
        .collect()
}

/// WITH TABLERESULTS: one row per message, in SQL Server's column order.
fn table_results(lines: &[(SqlError, Option<&Finding>)], db_id: u16) -> Rowset {
    let int = SqlType::Int;
    let big = SqlType::BigInt;
    let columns = vec![
        ("Error".to_string(), int),
        ("Level".to_string(), int),
        ("State".to_string(), int),
        ("MessageText".to_string(), SqlType::NVarChar(2048)),
        ("RepairLevel".to_string(), SqlType::NVarChar(22)),
        ("Status".to_string(), int),
        ("DbId".to_string(), int),
        ("DbFragId".to_string(), int),
        ("ObjectId".to_string(), int),
        ("IndexId".to_string(), int),
        ("PartitionId".to_string(), big),
        ("AllocUnitId".to_string(), big),
        ("RidDbId".to_string(), int),
        ("RidPruId".to_string(), int),
        ("File".to_string(), int),
        ("Page".to_string(), int),
        ("Slot".to_string(), int),
        ("RefDbId".to_string(), int),
        ("RefPruId".to_string(), int),
        ("RefFile".to_string(), int),
        ("RefPage".to_string(), int),
        ("RefSlot".to_string(), int),
        ("Allocation".to_string(), int),
    ];
    let rows = lines
        .iter()
        .map(|(e, f)| {
            let (obj, idx, au, file, page, slot, alloc) = match f {
                Some(f) => (
                    f.object_id as i32,
                    f.index_id,
                    f.allocation_unit_id as i64,
                    f.page.map_or(0, |p| p.file.0 as i32),
                    f.page.map_or(0, |p| p.page.0 as i32),
                    f.slot.map_or(0, |s| s as i32),
                    if f.allocation { 1 } else { 2 },
                ),
                None => (0, 0, 0, 0, 0, 0, 1),
            };
            let repair = if e.severity > 10 {
                Value::Text(repair_level(e.number).into())
            } else {
                Value::Null
            };
            vec![
                Value::Int(e.number),
                Value::Int(e.severity as i32),
                Value::Int(e.state as i32),
                Value::Text(e.text.clone()),
                repair,
                Value::Int(0),
                Value::Int(db_id as i32),
                Value::Int(0),
                Value::Int(obj),
                Value::Int(idx),
                Value::BigInt(au),
                Value::BigInt(au),
                Value::Int(0),
                Value::Int(0),
                Value::Int(file),
                Value::Int(page),
                Value::Int(slot),
                Value::Int(0),
                Value::Int(0),
                Value::Int(0),
                Value::Int(0),
                Value::Int(0),
                Value::Int(alloc),
            ]
        })
        .collect();
    Rowset { columns, rows }
}

/// CHECKTABLE's index_id argument for table `object_id`: 0 for a heap, 1 for a clustered
/// table, or one of its nonclustered indexes' ids; else Msg 2591 (2530 for a disabled
/// index).
fn checked_index(
    db: &extentdb_storage::instance::DbHandle,
    object_id: u32,
    index_id: i64,
    name: &str,
) -> Result<u16, Vec<SqlError>> {
    let d = db.read().unwrap();
    if d.table_by_id(object_id).map(|t| t.index_id as i64) == Some(index_id) {
        return Ok(index_id as u16);
    }
    let ix = d
        .indexes_of(object_id)
        .find(|ix| ix.index_of.as_ref().map(|i| i.index_id as i64) == Some(index_id));
    match ix {
        Some(ix) if extentdb_storage::index::is_disabled(ix) => {
            Err(vec![msg(2530, &[&ix.name, &name])])
        }
        Some(_) => Ok(index_id as u16),
        None => Err(vec![msg(2591, &[&index_id, &name])]),
    }
}

/// CHECKFILEGROUP's first argument in the current database: a filegroup's name or id, 0
/// or none for PRIMARY; else Msg 1921.
fn checked_filegroup(
    db: &extentdb_storage::instance::DbHandle,
    arg: Option<&Value>,
) -> Result<u16, Vec<SqlError>> {
    let d = db.read().unwrap();
    let groups = &d.catalog.filegroups;
    let found = match arg {
        None => Some(1),
        Some(Value::Text(name)) => groups
            .iter()
            .find(|g| g.name.eq_ignore_ascii_case(name))
            .map(|g| g.data_space_id),
        Some(v) => match as_i64(v).map_err(|e| vec![e])? {
            0 => Some(1),
            n => groups
                .iter()
                .find(|g| g.data_space_id as i64 == n)
                .map(|g| g.data_space_id),
        },
    };
    found.ok_or_else(|| {
        let shown = arg.map(super::eval::to_text).unwrap_or_default();
        vec![msg(1921, &[&shown])]
    })
}

impl Session {
    /// DBCC CHECKDB [(db [, NOINDEX])], CHECKTABLE (table [, NOINDEX | index_id]), CHECKALLOC [(db)],
    /// CHECKCATALOG [(db)], CHECKFILEGROUP [(filegroup [, NOINDEX])] [WITH ...]: resolves the target, takes a snapshot under the
    /// database's lock and releases it, checks with progress in sys.dm_exec_requests and the
    /// session's cancel flag polled, records a clean CHECKDB in the boot page, and reports.
    pub(super) fn dbcc_check(
        &mut self,
        kind: CheckKind,
        d: &Dbcc,
        args: &[Value],
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        let mut settings = self.check_settings(d)?;
        let mut index_id = None;
        match args.get(1) {
            None => {}
            Some(Value::Text(t)) => {
                let t = t.to_ascii_uppercase();
                if t.starts_with("REPAIR_") {
                    // Repair needs single-user mode, which extentdb does not offer yet.
                    return Err(vec![msg(7919, &[])]);
                }
                if t != "NOINDEX" {
                    return Err(vec![msg(2526, &[])]);
                }
            }
            // CHECKTABLE (table, index_id); CHECKDB's second argument is no number.
            Some(v) if kind == CheckKind::CheckTable => {
                index_id = Some(super::eval::as_i64(v).map_err(|e| vec![e])?);
            }
            Some(_) => return Err(vec![msg(2526, &[])]),
        }
        let inst = self.engine.instance.clone();
        let (db_id, db, objects) = match kind {
            CheckKind::CheckTable => {
                let Some(Value::Text(name)) = args.first() else {
                    return Err(vec![msg(2526, &[])]);
                };
                let db = inst
                    .database(self.database_id)
                    .ok_or_else(|| vec![msg(2520, &[&self.database_id])])?;
                let bare = name
                    .rsplit('.')
                    .next()
                    .unwrap_or(name)
                    .trim_matches(['[', ']']);
                let schema = name
                    .rsplit('.')
                    .nth(1)
                    .map_or("dbo", |s| s.trim_matches(['[', ']']))
                    .to_string();
                let id = db
                    .read()
                    .unwrap()
                    .table(&schema, bare)
                    .map(|t| t.object_id)
                    .ok_or_else(|| vec![msg(2501, &[name])])?;
                if let Some(i) = index_id {
                    settings.index_id = Some(checked_index(&db, id, i, name)?);
                }
                (self.database_id, db, Some(vec![id]))
            }
            CheckKind::CheckFilegroup => {
                let db = inst
                    .database(self.database_id)
                    .ok_or_else(|| vec![msg(2520, &[&self.database_id])])?;
                settings.filegroup = Some(checked_filegroup(&db, args.first())?);
                (self.database_id, db, None)
            }
            _ => {
                let (id, db) = self.dbcc_database(args.first())?;
                (id, db, None)
            }
        };
        // The view is taken holding the database exclusively, inside storage
        // (snapshot.rs): no change is half made and no page is being written back meanwhile.
        let src = db
            .check_source()
            .map_err(|e| super::errors::map(&e, super::errors::Context::Other))?;
        let spid = self.spid;
        inst.requests.lock().unwrap().insert(
            spid,
            RequestProgress {
                session_id: spid,
                database_id: db_id,
                command: "DBCC TABLE CHECK".into(),
                start_unix_us: super::ddl::now_unix_us(),
                percent_complete: 0.0,
            },
        );
        let requests = &inst.requests;
        let progress = |done: u64, total: u64| {
            if let Some(r) = requests.lock().unwrap().get_mut(&spid) {
                r.percent_complete = (done as f32 * 100.0 / total.max(1) as f32).min(100.0);
            }
        };
        let cancel = self.cancel_flag();
        let result = run_check(
            kind,
            &src,
            db_id,
            objects,
            &settings,
            Some(&cancel),
            Some(&progress),
        );
        inst.requests.lock().unwrap().remove(&spid);
        drop(src);
        let CheckRun {
            outputs: lines,
            clean,
            ..
        } = match result {
            Ok(r) => r,
            Err(StorageError::Cancelled) => return Ok(()),
            Err(e) => return Err(super::errors::map(&e, super::errors::Context::Other)),
        };
        if clean && kind == CheckKind::CheckDb {
            let now = super::ddl::now_unix_us();
            db.record_clean_check(now)
                .map_err(|e| super::errors::map(&e, super::errors::Context::Other))?;
        }
        for o in lines {
            let rows = match &o {
                Output::Rows { rows, .. } => Some(rows.len() as u64),
                _ => None,
            };
            out.push(o);
            if let Some(n) = rows {
                self.rows_affected(n, out);
            }
        }
        Ok(())
    }

    /// The WITH options of a check; unknown ones are refused as SQL Server does (2526).
    pub(super) fn check_settings(&mut self, d: &Dbcc) -> Result<CheckSettings, Vec<SqlError>> {
        let mut s = CheckSettings {
            per_file_read_ahead: self.trace_flag(extentdb_storage::instance::TF_CHECKDB_PER_FILE),
            // 'max degree of parallelism' unless the command names MAXDOP.
            maxdop: super::configuration::default_maxdop(&self.engine.instance),
            ..CheckSettings::default()
        };
        for o in &d.options {
            match o.name.as_str() {
                "NO_INFOMSGS" => s.no_infomsgs = true,
                "TABLERESULTS" => s.table_results = true,
                "PHYSICAL_ONLY" => s.physical_only = true,
                "ALL_ERRORMSGS" => s.all_errormsgs = true,
                // Checked always (data purity), or not applicable: accepted.
                "DATA_PURITY" | "EXTENDED_LOGICAL_CHECKS" | "TABLOCK" | "NOINDEX" => {}
                "MAXDOP" => {
                    let v = match &o.value {
                        Some(OptionValue::Expr(e)) => self.eval(e, None).map_err(|e| vec![e])?,
                        Some(OptionValue::Word(w)) => Value::Text(w.clone()),
                        None => return Err(vec![msg(2526, &[])]),
                    };
                    let n = as_i64(&v).map_err(|e| vec![e])?;
                    if !(0..=32_767).contains(&n) {
                        return Err(vec![msg(2526, &[])]);
                    }
                    s.maxdop = n as usize;
                }
                _ => return Err(vec![msg(2526, &[])]),
            }
        }
        Ok(s)
    }

    /// The database a DBCC command names: a name, an id, 0 or nothing (the current one).
    pub(super) fn dbcc_database(
        &self,
        arg: Option<&Value>,
    ) -> Result<(u16, extentdb_storage::instance::DbHandle), Vec<SqlError>> {
        let inst = &self.engine.instance;
        match arg {
            None => inst
                .database(self.database_id)
                .map(|d| (self.database_id, d))
                .ok_or_else(|| vec![msg(2520, &[&self.database_id])]),
            Some(Value::Text(name)) => inst.database_by_name(name).ok_or_else(|| {
                vec![self
                    .unopened_error(name)
                    .unwrap_or_else(|| msg(2520, &[name]))]
            }),
            Some(v) => {
                let id = as_i64(v).map_err(|e| vec![e])?;
                let id = if id == 0 { self.database_id as i64 } else { id };
                u16::try_from(id)
                    .ok()
                    .and_then(|i| inst.database(i).map(|d| (i, d)))
                    .ok_or_else(|| vec![msg(2520, &[&id])])
            }
        }
    }
}

impl Session {
    /// DBCC DBINFO [(db)] [WITH TABLERESULTS]: the boot page's fields under SQL Server's
    /// names (dbi_dbccLastKnownGood is what maintenance scripts read). As rows with
    /// TABLERESULTS; otherwise printed to the client with trace flag 3604, else to the
    /// error log, as SQL Server does.
    pub(super) fn dbcc_dbinfo(
        &mut self,
        d: &Dbcc,
        args: &[Value],
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        let (db_id, db) = self.dbcc_database(args.first())?;
        let fields: Vec<(&str, String)> = {
            let g = db.read().unwrap();
            let b = &g.boot;
            let time = |us: i64| {
                if us == 0 {
                    "1900-01-01 00:00:00.000".to_string()
                } else {
                    extentdb_storage::errorlog::local_time(us)
                }
            };
            let guid = b
                .database_guid
                .iter()
                .map(|x| format!("{x:02x}"))
                .collect::<String>();
            vec![
                ("dbi_version", b.database_version.to_string()),
                ("dbi_createVersion", b.database_version.to_string()),
                ("dbi_crdate", time(b.created_us)),
                ("dbi_dbname", g.name.clone()),
                ("dbi_dbid", db_id.to_string()),
                ("dbi_checkptLSN", b.checkpoint_lsn.to_string()),
                ("dbi_dbccLastKnownGood", time(b.last_checkdb_us)),
                ("dbi_familyGUID", guid),
            ]
        };
        if d.options.iter().any(|o| o.name == "TABLERESULTS") {
            let text = SqlType::NVarChar(255);
            let rows = fields
                .iter()
                .map(|(f, v)| {
                    vec![
                        Value::Text("DBINFO STRUCTURE:".into()),
                        Value::Text("DBINFO @0x0000000000000000".into()),
                        Value::Text(f.to_string()),
                        Value::Text(v.clone()),
                    ]
                })
                .collect();
            let r = Rowset {
                columns: ["ParentObject", "Object", "Field", "VALUE"]
                    .iter()
                    .map(|c| (c.to_string(), text))
                    .collect(),
                rows,
            };
            self.send_rowset(r, out);
            return Ok(());
        }
        let mut lines = vec![
            String::new(),
            "DBINFO STRUCTURE:".to_string(),
            String::new(),
        ];
        lines.extend(fields.iter().map(|(f, v)| format!("{f} = {v}")));
        self.dbcc_print(lines, out);
        Ok(())
    }
}
