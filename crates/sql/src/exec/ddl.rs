//! Database-level DDL: CREATE DATABASE, ALTER DATABASE (files and filegroups), DROP.
//!
//! Every statement validates all of its input before it touches a file: names, sizes,
//! paths (data roots, existing files, files of other databases). Only then does storage
//! create or grow anything, and storage undoes its own partial work. So bad input changes
//! nothing, as a DBA expects.

use std::collections::HashSet;
use std::path::PathBuf;

use extentdb_format::catalog::RecoveryModel;
use extentdb_format::file_header::FileType;
use extentdb_storage::database::{OpContext, MIN_FILE_PAGES};
use extentdb_storage::instance::LogSink;
use extentdb_storage::log_growth::GrowthEnv;
use extentdb_storage::structure::{FileChange, FileEntryChange, FilegroupChange};
use extentdb_storage::{Database, Instance, NewDatabase, NewFile, StorageError};

use super::errors::{map, Context};
use super::structure::validated_change;
use super::Session;
use crate::messages::{msg, SqlError};

/// Pages in a file can never exceed this (SQL Server's 2^31 - 1 page limit, Msg 1842).
const MAX_PAGES: u64 = i32::MAX as u64;
/// What sys.database_files shows as max_size for an unlimited log (2 TB).
const LOG_UNLIMITED_PAGES: i32 = 268_435_456;

/// FILEGROWTH as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Growth {
    Bytes(u64),
    Percent(u32),
}

/// MAXSIZE as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxSize {
    Bytes(u64),
    Unlimited,
}

/// One `( NAME = ..., FILENAME = ..., SIZE = ..., MAXSIZE = ..., FILEGROWTH = ... )`.
#[derive(Debug, Clone, Default)]
pub struct FileSpec {
    pub name: Option<String>,
    pub filename: Option<String>,
    pub size_bytes: Option<u64>,
    pub max_size: Option<MaxSize>,
    pub growth: Option<Growth>,
    pub new_name: Option<String>,
}

/// CREATE DATABASE's parts.
#[derive(Debug, Clone, Default)]
pub struct CreateSpec {
    pub name: String,
    /// Files of the PRIMARY filegroup (the first is the primary file).
    pub primary: Vec<FileSpec>,
    /// (filegroup, is default, files).
    pub filegroups: Vec<(String, bool, Vec<FileSpec>)>,
    pub log: Vec<FileSpec>,
}

/// ALTER DATABASE's actions on files and filegroups.
#[derive(Debug, Clone)]
pub enum AlterAction {
    AddFiles {
        files: Vec<FileSpec>,
        filegroup: Option<String>,
    },
    AddLogFiles(Vec<FileSpec>),
    AddFilegroup(String),
    RemoveFilegroup(String),
    RemoveFile(String),
    ModifyFile(FileSpec),
    ModifyName(String),
    ModifyFilegroup {
        name: String,
        property: FilegroupProperty,
    },
    SetRecovery(RecoveryModel),
    /// Options set to what extentdb always does (lower.rs, `set_option`'s table): the
    /// database must exist and the caller may alter it; nothing changes.
    Unchanged,
    /// MODIFY FILEGROUP name REBALANCE (extentdb's own).
    Rebalance(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilegroupProperty {
    Default,
    AutogrowSingleFile,
    AutogrowAllFiles,
    ReadOnly(bool),
    Name(String),
}

fn pages_of(bytes: u64) -> u64 {
    bytes.div_ceil(extentdb_format::PAGE_SIZE as u64)
}

/// What a file gets where its filespec is silent.
struct Defaults {
    file_type: FileType,
    filegroup: String,
    name: String,
    path: PathBuf,
    size_pages: u32,
    growth: (u32, bool),
}

impl Defaults {
    /// A file called `name` in the first data root (`.mdf`, `.ndf` or `.ldf`), of
    /// `size_pages`, growing as model's file of the same type grows.
    fn new(
        inst: &Instance,
        file_type: FileType,
        filegroup: &str,
        name: &str,
        ext: &str,
        size_pages: u32,
    ) -> Defaults {
        let (model_data, model_log) = inst.model_defaults();
        let model = if file_type == FileType::Log {
            model_log
        } else {
            model_data
        };
        Defaults {
            file_type,
            filegroup: filegroup.to_string(),
            name: name.to_string(),
            path: inst.config.data_roots[0].join(format!("{name}.{ext}")),
            size_pages,
            growth: (model.growth, model.is_percent_growth),
        }
    }
}

/// Turns a FileSpec into a NewFile with defaults, checking sizes (5174, 1842, 5103, 5169).
fn new_file(spec: &FileSpec, d: Defaults, inst: &Instance) -> Result<NewFile, Vec<SqlError>> {
    let Defaults {
        file_type,
        filegroup,
        name: default_name,
        path: default_path,
        size_pages: default_size,
        growth: default_growth,
    } = d;
    let name = spec
        .name
        .clone()
        .unwrap_or_else(|| default_name.to_string());
    let physical = match &spec.filename {
        Some(f) => inst
            .resolve_path(f)
            .map_err(|e| map(&e, Context::CreateDatabase))?,
        None => default_path,
    };
    let size = spec.size_bytes.map(pages_of).unwrap_or(default_size as u64);
    if size < MIN_FILE_PAGES as u64 {
        return Err(vec![msg(5174, &[])]);
    }
    let max_size_pages = match spec.max_size {
        None | Some(MaxSize::Unlimited) => {
            if file_type == FileType::Log {
                LOG_UNLIMITED_PAGES
            } else {
                -1
            }
        }
        Some(MaxSize::Bytes(b)) => pages_of(b).min(MAX_PAGES) as i32,
    };
    let (growth, is_percent_growth) = match spec.growth {
        None => default_growth,
        Some(Growth::Percent(p)) => (p, true),
        Some(Growth::Bytes(b)) => (pages_of(b).min(MAX_PAGES) as u32, false),
    };
    if size > MAX_PAGES
        || spec
            .max_size
            .is_some_and(|m| matches!(m, MaxSize::Bytes(b) if pages_of(b) > MAX_PAGES))
    {
        return Err(vec![msg(1842, &[])]);
    }
    if max_size_pages >= 0 && size > max_size_pages as u64 {
        return Err(vec![msg(5103, &[&physical.display()])]);
    }
    if max_size_pages >= 0 && !is_percent_growth && growth as i64 > max_size_pages as i64 {
        return Err(vec![msg(5169, &[&name])]);
    }
    Ok(NewFile {
        name,
        physical_name: physical,
        file_type,
        filegroup,
        size_pages: size as u32,
        max_size_pages,
        growth,
        is_percent_growth,
    })
}

/// Checks names and paths of new files against each other and the instance (1828, 1834,
/// 5170), where `existing_names` are the logical names already in the database.
fn check_new_files(
    inst: &Instance,
    files: &[NewFile],
    existing_names: &[String],
    ctx: Context,
) -> Result<(), Vec<SqlError>> {
    let mut names: HashSet<String> = existing_names.iter().map(|n| n.to_lowercase()).collect();
    let mut paths = HashSet::new();
    for f in files {
        if !names.insert(f.name.to_lowercase()) {
            return Err(vec![msg(1828, &[&f.name])]);
        }
        if !paths.insert(f.physical_name.clone()) {
            return Err(map(
                &StorageError::FileExists(f.physical_name.display().to_string()),
                ctx,
            ));
        }
        inst.check_new_path(&f.physical_name)
            .map_err(|e| map(&e, ctx))?;
    }
    Ok(())
}

impl Session {
    pub(super) fn op_context<'a>(&'a self, sink: &'a LogSink<'a>) -> OpContext<'a> {
        OpContext {
            fs: self.engine.instance.fs.as_ref(),
            policy: self.engine.instance.init_policy(&self.flags),
            log: sink,
        }
    }

    pub(super) fn sink(&self) -> LogSink<'_> {
        LogSink {
            log: &self.engine.instance.errorlog,
            source: format!("spid{}", self.spid),
        }
    }

    /// CREATE DATABASE.
    pub fn create_database(&mut self, spec: &CreateSpec) -> Result<(), Vec<SqlError>> {
        if !self.has_server_permission("CREATE ANY DATABASE") {
            return Err(vec![msg(262, &[&"CREATE DATABASE", &"master"])]);
        }
        let inst = &self.engine.instance;
        if inst.database_by_name(&spec.name).is_some() {
            return Err(vec![msg(1801, &[&spec.name])]);
        }
        let (model_data, model_log) = inst.model_defaults();
        let mut files = Vec::new();
        let primary_default = FileSpec::default();
        let primary_specs: Vec<&FileSpec> = if spec.primary.is_empty() {
            vec![&primary_default]
        } else {
            spec.primary.iter().collect()
        };
        for (i, f) in primary_specs.into_iter().enumerate() {
            let (dname, dsize) = if i == 0 {
                (spec.name.clone(), model_data.size_pages)
            } else {
                (format!("{}_{i}", spec.name), 1024)
            };
            let ext = if i == 0 { "mdf" } else { "ndf" };
            files.push(new_file(
                f,
                Defaults::new(inst, FileType::Rows, "PRIMARY", &dname, ext, dsize),
                inst,
            )?);
        }
        let mut filegroups = Vec::new();
        for (fg, is_default, fg_files) in &spec.filegroups {
            if fg.eq_ignore_ascii_case("DEFAULT") {
                return Err(vec![msg(5051, &[])]);
            }
            if fg.eq_ignore_ascii_case("PRIMARY")
                || filegroups
                    .iter()
                    .any(|(n, _): &(String, bool)| n.eq_ignore_ascii_case(fg))
            {
                return Err(vec![msg(5035, &[fg])]);
            }
            filegroups.push((fg.clone(), *is_default));
            for f in fg_files {
                let dname = f.name.clone().unwrap_or_default();
                files.push(new_file(
                    f,
                    Defaults::new(inst, FileType::Rows, fg, &dname, "ndf", 1024),
                    inst,
                )?);
            }
        }
        let data_pages: u64 = files.iter().map(|f| f.size_pages as u64).sum();
        let log_default_size = (data_pages / 4).max(model_log.size_pages as u64) as u32;
        let log_default = FileSpec::default();
        let log_specs: Vec<&FileSpec> = if spec.log.is_empty() {
            vec![&log_default]
        } else {
            spec.log.iter().collect()
        };
        for (i, f) in log_specs.into_iter().enumerate() {
            let dname = if i == 0 {
                format!("{}_log", spec.name)
            } else {
                format!("{}_log{i}", spec.name)
            };
            let size = if spec.log.is_empty() {
                log_default_size
            } else {
                1024
            };
            files.push(new_file(
                f,
                Defaults::new(inst, FileType::Log, "", &dname, "ldf", size),
                inst,
            )?);
        }
        check_new_files(inst, &files, &[], Context::CreateDatabase)?;
        let new_db = NewDatabase {
            name: spec.name.clone(),
            database_id: inst.next_database_id(),
            recovery_model: RecoveryModel::Full,
            files,
            filegroups,
        };
        let sink = self.sink();
        let ctx = self.op_context(&sink);
        inst.create_database(&ctx, &new_db)
            .map_err(|e| map(&e, Context::CreateDatabase))?;
        // The new database's first proportional fill calculation (trace flag 1165).
        // With the new database's first proportional fill calculation (trace flag 1165).
        if let Some((_, db)) = inst.database_by_name(&new_db.name) {
            db.complete_creation(&self.growth_env(), self.owner_sid())
                .map_err(|e| map(&e, Context::CreateDatabase))?;
        }
        Ok(())
    }

    /// The creator owns a new database: dbo maps to its login, unless that is sa (whose
    /// sid dbo has when none is stored).
    fn owner_sid(&self) -> Option<Vec<u8>> {
        self.login()
            .map(|login| login.sid.clone())
            .filter(|sid| sid.as_slice() != extentdb_storage::logins::SA_SID)
    }

    /// ALTER DATABASE ... MODIFY FILEGROUP fg REBALANCE: one extent per step, the database's
    /// lock released between steps so other sessions read and write; waits while a
    /// transaction is active (a move needs none); progress in sys.dm_exec_requests.
    fn rebalance(
        &mut self,
        database_id: u16,
        db: &extentdb_storage::instance::DbHandle,
        env: &GrowthEnv,
        fg: &str,
    ) -> Result<u64, Vec<SqlError>> {
        let ds = {
            let d = db.read().unwrap();
            d.filegroup_by_name(fg)
                .map(|g| g.data_space_id)
                .ok_or_else(|| vec![msg(5014, &[&"filegroup", &fg, &d.name])])?
        };
        let inst = self.engine.instance.clone();
        let spid = self.spid;
        inst.requests.lock().unwrap().insert(
            spid,
            extentdb_storage::instance::RequestProgress {
                session_id: spid,
                database_id,
                command: "ALTER DATABASE".into(),
                start_unix_us: now_unix_us(),
                percent_complete: 0.0,
            },
        );
        let result = (|| {
            let mut moved = 0u64;
            loop {
                let step = db.rebalance_step(env, ds);
                match step.map_err(|e| map(&e, Context::AlterDatabase))? {
                    None => std::thread::sleep(std::time::Duration::from_millis(20)),
                    Some(0) => return Ok(moved),
                    Some(left) => {
                        moved += 1;
                        // Hand the database to a session waiting for it before the next
                        // step (the lock is not fair: without a pause this thread would
                        // take it straight back).
                        std::thread::sleep(std::time::Duration::from_micros(200));
                        if let Some(r) = inst.requests.lock().unwrap().get_mut(&spid) {
                            r.percent_complete = (moved as f32 * 100.0 / (moved + left) as f32)
                                .max(r.percent_complete);
                        }
                    }
                }
            }
        })();
        inst.requests.lock().unwrap().remove(&spid);
        result
    }

    /// How changes made for this session grow files and what they trace.
    pub(crate) fn growth_env(&self) -> extentdb_storage::log_growth::GrowthEnv {
        extentdb_storage::log_growth::GrowthEnv {
            source: format!("spid{}", self.spid),
            ..self.engine.instance.growth_env(&self.flags)
        }
    }

    /// DROP DATABASE name.
    pub fn drop_database(&mut self, name: &str, if_exists: bool) -> Result<(), Vec<SqlError>> {
        let inst = self.engine.instance.clone();
        if inst.suspect_by_name(name).is_some() {
            return inst
                .drop_database(name)
                .map_err(|e| map(&e, Context::Other));
        }
        let allowed = |(id, db): &(u16, extentdb_storage::instance::DbHandle)| {
            self.has_server_permission("ALTER ANY DATABASE")
                || self.is_db_owner(*id, &db.read().unwrap())
        };
        match inst.database_by_name(name) {
            None if if_exists => Ok(()),
            None => Err(vec![msg(3701, &[&"drop", &"database", &name])]),
            Some(found) if !allowed(&found) => Err(vec![msg(3701, &[&"drop", &"database", &name])]),
            Some((id, _)) if id < extentdb_storage::instance::FIRST_USER_ID => inst
                .drop_database(name)
                .map_err(|e| map(&e, Context::Other)),
            Some((id, _)) if id == self.database_id => Err(vec![msg(3702, &[&name])]),
            Some((id, _)) => self.drop_user_database(id, name),
        }
    }

    /// DROP DATABASE of a user database the session is not in: refused (3702) while another
    /// session uses it, and held exclusively (X DATABASE, database_lock.rs) while it goes.
    fn drop_user_database(&mut self, id: u16, name: &str) -> Result<(), Vec<SqlError>> {
        if !self.sessions_in(id).is_empty() || !self.hold_database_exclusively(id)? {
            return Err(vec![msg(3702, &[&name])]);
        }
        let dropped = self.engine.instance.drop_database(name);
        if dropped.is_ok() {
            self.forget_index_usage(id, None, None);
        }
        self.end_exclusive_hold(id);
        dropped.map_err(|e| map(&e, Context::Other))
    }

    /// ALTER DATABASE name action.
    pub fn alter_database(
        &mut self,
        name: &str,
        action: &AlterAction,
    ) -> Result<Vec<SqlError>, Vec<SqlError>> {
        let inst = self.engine.instance.clone();
        let (id, db) = inst
            .database_by_name(name)
            .ok_or_else(|| vec![msg(5011, &[&name])])?;
        if !self.has_server_permission("ALTER ANY DATABASE")
            && !self.is_db_owner(id, &db.read().unwrap())
        {
            return Err(vec![msg(5011, &[&name])]);
        }
        let sink = self.sink();
        let ctx = self.op_context(&sink);
        let env = self.growth_env();
        let to_err = |e: StorageError| map(&e, Context::AlterDatabase);
        let mut info = Vec::new();
        match action {
            AlterAction::AddFiles { files, filegroup } => {
                let fg = filegroup.clone().unwrap_or_else(|| "PRIMARY".into());
                add_files(&inst, &db, (&env, &ctx), files, FileType::Rows, &fg)?;
            }
            AlterAction::AddLogFiles(files) => {
                add_files(&inst, &db, (&env, &ctx), files, FileType::Log, "")?
            }
            AlterAction::AddFilegroup(fg) => {
                if fg.eq_ignore_ascii_case("DEFAULT") {
                    return Err(vec![msg(5051, &[])]);
                }
                db.add_filegroup(&env, fg).map_err(to_err)?
            }
            AlterAction::RemoveFilegroup(fg) => db
                .remove_filegroup(&env, fg)
                .map_err(|e| filegroup_error(&db, e))?,
            AlterAction::RemoveFile(file) => {
                let real = db
                    .remove_file(&env, inst.fs.as_ref(), file)
                    .map_err(to_err)?;
                info.push(msg(5044, &[&"file", &real]));
            }
            AlterAction::ModifyFile(spec) => validated_change(
                &db,
                |d| file_change(d, spec),
                |version, change| db.modify_file(&env, &ctx, version, change),
                to_err,
            )?,
            AlterAction::ModifyName(new_name) => {
                inst.rename_database(id, new_name).map_err(to_err)?;
                info.push(SqlError::print(format!(
                    "The database name '{new_name}' has been set."
                )));
            }
            AlterAction::ModifyFilegroup { name, property } => validated_change(
                &db,
                |d| filegroup_change(d, name, property),
                |version, (ds, change)| db.modify_filegroup(&env, version, ds, &change),
                to_err,
            )?,
            AlterAction::SetRecovery(rm) => db.set_recovery_model(&env, *rm).map_err(to_err)?,
            AlterAction::Unchanged => {}
            AlterAction::Rebalance(fg) => {
                let moved = self.rebalance(id, &db, &env, fg)?;
                info.push(SqlError::print(format!(
                    "REBALANCE of filegroup '{fg}' moved {moved} extents. This is an informational message only. No user action is required."
                )));
            }
        }
        Ok(info)
    }
}

/// ALTER DATABASE ... ADD [LOG] FILE: validates every file (which locks every database, so
/// before this one is locked), then creates them all or none.
fn add_files(
    inst: &Instance,
    db: &extentdb_storage::instance::DbHandle,
    (env, ctx): (&GrowthEnv, &OpContext<'_>),
    files: &[FileSpec],
    file_type: FileType,
    fg: &str,
) -> Result<(), Vec<SqlError>> {
    let (existing, fg_ok, db_name) = {
        let d = db.read().unwrap();
        let names: Vec<String> = d.catalog.files.iter().map(|f| f.name.clone()).collect();
        (
            names,
            file_type == FileType::Log || d.filegroup_by_name(fg).is_some(),
            d.name.clone(),
        )
    };
    if !fg_ok {
        return Err(vec![msg(5014, &[&"filegroup", &fg, &db_name])]);
    }
    let ext = if file_type == FileType::Log {
        "ldf"
    } else {
        "ndf"
    };
    let new: Vec<NewFile> = files
        .iter()
        .map(|f| {
            let n = f.name.clone().unwrap_or_default();
            new_file(f, Defaults::new(inst, file_type, fg, &n, ext, 1024), inst)
        })
        .collect::<Result<_, _>>()?;
    check_new_files(inst, &new, &existing, Context::AlterDatabase)?;
    db.add_files(env, ctx, &new)
        .map_err(|e| map(&e, Context::AlterDatabase))
}

/// REMOVE FILEGROUP's failures: 5014 names the database.
fn filegroup_error(db: &extentdb_storage::instance::DbHandle, e: StorageError) -> Vec<SqlError> {
    match e {
        StorageError::FilegroupNotFound(fg) => {
            let name = db.read().unwrap().name.clone();
            vec![msg(5014, &[&"filegroup", &fg, &name])]
        }
        other => map(&other, Context::AlterDatabase),
    }
}

/// MODIFY FILEGROUP checked against `db`: the filegroup's data space and its change.
fn filegroup_change(
    db: &Database,
    name: &str,
    property: &FilegroupProperty,
) -> Result<(u16, FilegroupChange), Vec<SqlError>> {
    let g = db
        .filegroup_by_name(name)
        .cloned()
        .ok_or_else(|| vec![msg(5014, &[&"filegroup", &name, &db.name])])?;
    if let FilegroupProperty::Default = property {
        if !db
            .catalog
            .files
            .iter()
            .any(|f| f.data_space_id == g.data_space_id)
        {
            return Err(vec![msg(1922, &[&g.name])]);
        }
    }
    if let FilegroupProperty::Name(n) = property {
        if db.filegroup_by_name(n).is_some() {
            return Err(vec![msg(5035, &[n])]);
        }
    }
    let change = match property {
        FilegroupProperty::Default => FilegroupChange::MakeDefault,
        FilegroupProperty::AutogrowSingleFile => FilegroupChange::AutogrowAllFiles(false),
        FilegroupProperty::AutogrowAllFiles => FilegroupChange::AutogrowAllFiles(true),
        FilegroupProperty::ReadOnly(r) => FilegroupChange::ReadOnly(*r),
        FilegroupProperty::Name(n) => FilegroupChange::Rename(n.clone()),
    };
    Ok((g.data_space_id, change))
}

/// MODIFY FILE checked against `db`: SIZE grows (5039 if not larger, 5040 beyond MAXSIZE);
/// MAXSIZE, FILEGROWTH and NEWNAME change the catalog.
fn file_change(db: &Database, spec: &FileSpec) -> Result<FileChange, Vec<SqlError>> {
    let name = spec.name.clone().unwrap_or_default();
    let entry = db
        .file_by_name(&name)
        .cloned()
        .ok_or_else(|| vec![msg(5041, &[&name])])?;
    let max_pages = match spec.max_size {
        None => entry.max_size_pages,
        Some(MaxSize::Unlimited) => {
            if entry.file_type == FileType::Log {
                LOG_UNLIMITED_PAGES
            } else {
                -1
            }
        }
        Some(MaxSize::Bytes(b)) => pages_of(b).min(MAX_PAGES) as i32,
    };
    let new_size = spec.size_bytes.map(pages_of);
    let effective = new_size.unwrap_or(entry.size_pages as u64);
    if new_size.is_some_and(|s| s > MAX_PAGES) {
        return Err(vec![msg(1842, &[])]);
    }
    if max_pages >= 0 && effective > max_pages as u64 {
        return Err(vec![if new_size.is_some() {
            msg(5040, &[])
        } else {
            msg(5103, &[&entry.physical_name])
        }]);
    }
    if let Some(s) = new_size {
        if s <= entry.size_pages as u64 {
            return Err(vec![msg(5039, &[])]);
        }
    }
    if let Some(n) = &spec.new_name {
        if db
            .file_by_name(n)
            .is_some_and(|f| f.file_id != entry.file_id)
        {
            return Err(vec![msg(1828, &[n])]);
        }
    }
    let changes_entry = spec.max_size.is_some() || spec.growth.is_some() || spec.new_name.is_some();
    let growth = spec.growth.map(|g| match g {
        Growth::Percent(p) => (p, true),
        Growth::Bytes(b) => (pages_of(b).min(MAX_PAGES) as u32, false),
    });
    Ok(FileChange {
        file_id: entry.file_id,
        grow_to_pages: new_size.map(|s| s as u32),
        entry: changes_entry.then(|| FileEntryChange {
            max_size_pages: max_pages,
            growth,
            new_name: spec.new_name.clone(),
        }),
    })
}

pub(super) fn now_unix_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}
