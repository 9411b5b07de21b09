//! BACKUP DATABASE and RESTORE HEADERONLY / FILELISTONLY / VERIFYONLY: options and
//! devices from the AST, SQL Server's messages and result sets around `storage::backup`.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use extentdb_format::backup::{BackupType, FLAG_CHECKSUM, FLAG_COMPRESSED, FLAG_COPY_ONLY};
use extentdb_format::catalog::RecoveryModel;
use extentdb_format::file_header::FileType;
use extentdb_format::{Lsn, PAGE_SIZE};
use extentdb_storage::backup::{
    backup_database, read_backup_sets, verify_backup_set, BackupRequest, SetInfo,
};
use extentdb_storage::instance::{Instance, RequestProgress};
use extentdb_storage::restore::RestoreRequest;
use extentdb_storage::StorageError;

use super::backup_media::{self, MediaOptions, TF_BACKUP_BUFFERS};
use super::history::RestoreEvent;
use super::lower::not_yet;
use super::views::ticks_from_unix_us;
use super::{Out, Output, Session};
use crate::ast::{Backup, BackupKind, BackupOption, OptionValue, Restore, RestoreKind};
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value};

/// An LSN as SQL Server shows it in result sets: numeric(25,0), FSeqNo * 10^15 + block *
/// 10^5 + slot.
pub fn lsn_value(lsn: Lsn) -> Value {
    Value::Decimal {
        unscaled: lsn.vlf_sequence as i128 * 1_000_000_000_000_000
            + lsn.block as i128 * 100_000
            + lsn.slot as i128,
        scale: 0,
    }
}

/// An LSN as SQL Server writes it in messages: the decimal of `lsn_value`.
pub fn lsn_text(lsn: Lsn) -> String {
    (lsn.vlf_sequence as u128 * 1_000_000_000_000_000
        + lsn.block as u128 * 100_000
        + lsn.slot as u128)
        .to_string()
}

/// The SQL type of `lsn_value`.
pub const LSN_TYPE: SqlType = SqlType::Decimal {
    precision: 25,
    scale: 0,
};

/// BACKUP's and RESTORE's WITH options, as far as extentdb runs them.
#[derive(Default)]
struct Options {
    init: bool,
    format: bool,
    checksum: bool,
    copy_only: bool,
    stats: Option<u32>,
    name: String,
    description: String,
    file: Option<u32>,
    replace: bool,
    /// WITH MOVE 'logical' TO 'physical'.
    moves: Vec<(String, String)>,
    norecovery: bool,
    /// STOPAT, in µs since the Unix epoch.
    stop_at_us: Option<i64>,
    differential: bool,
    compression: bool,
    /// BUFFERCOUNT, MAXTRANSFERSIZE, BLOCKSIZE, MEDIANAME, EXPIREDATE, ... (backup_media.rs).
    media: MediaOptions,
    /// NO_CHECKSUM / NO_COMPRESSION: not the instance's backup defaults.
    no_checksum: bool,
    no_compression: bool,
}

fn col(name: &str, t: SqlType) -> (String, SqlType) {
    (name.to_string(), t)
}

impl Session {
    /// The text of an option's value (`NAME = 'x'`, `STATS = 5`).
    fn option_text(&mut self, v: &Option<OptionValue>) -> Result<Option<String>, Vec<SqlError>> {
        Ok(match v {
            None => None,
            Some(OptionValue::Word(w)) => Some(w.clone()),
            Some(OptionValue::Expr(e)) => Some(super::eval::to_text(
                &self.eval(e, None).map_err(|e| vec![e])?,
            )),
        })
    }

    /// The WITH options of a BACKUP or RESTORE (`statement`, for Msg 155); a media or
    /// transfer option's bad value is closed by 3013 naming `terminating`.
    fn backup_options(
        &mut self,
        options: &[BackupOption],
        (statement, terminating): (&str, &str),
    ) -> Result<Options, Vec<SqlError>> {
        let mut o = Options::default();
        for opt in options {
            let w = match opt {
                BackupOption::Named(w) => w,
                BackupOption::Move { logical, physical } => {
                    let text = |s: &mut Session, e| {
                        s.eval(e, None)
                            .map(|v| super::eval::to_text(&v))
                            .map_err(|e| vec![e])
                    };
                    let l = text(self, logical)?;
                    let p = text(self, physical)?;
                    o.moves.push((l, p));
                    continue;
                }
            };
            let value = self.option_text(&w.value)?;
            let media = o.media.take(&w.name.to_ascii_uppercase(), value.as_deref());
            if media.map_err(|e| abnormal(terminating, e))? {
                continue;
            }
            let number =
                |v: &Option<String>| v.as_deref().and_then(|s| s.trim().parse::<u32>().ok());
            match w.name.to_ascii_uppercase().as_str() {
                "INIT" => o.init = true,
                "FORMAT" => {
                    o.format = true;
                    o.init = true;
                }
                "CHECKSUM" => o.checksum = true,
                "COPY_ONLY" => o.copy_only = true,
                "STATS" => o.stats = Some(number(&value).unwrap_or(10).clamp(1, 100)),
                // msdb.dbo.backupset's name is nvarchar(128), description nvarchar(255).
                "NAME" => o.name = bounded_text(value, "backup set name", 128)?,
                "DESCRIPTION" => o.description = bounded_text(value, "description", 255)?,
                "FILE" => o.file = number(&value),
                "REPLACE" => o.replace = true,
                "RECOVERY" => o.norecovery = false,
                "NORECOVERY" => o.norecovery = true,
                "STANDBY" => return Err(vec![not_yet("RESTORE ... WITH STANDBY")]),
                "STOPAT" => {
                    let text = value.unwrap_or_default();
                    let parsed = crate::convert::parse_datetime_text(&text)
                        .ok_or_else(|| vec![msg(241, &[])])?;
                    o.stop_at_us = Some(super::views::unix_us_from_ticks(parsed.ticks));
                }
                "DIFFERENTIAL" => o.differential = true,
                "COMPRESSION" => o.compression = true,
                "NO_CHECKSUM" => o.no_checksum = true,
                "NO_COMPRESSION" => o.no_compression = true,
                // Defaults, and tape options that mean nothing for a disk.
                "NOINIT" | "NOFORMAT" | "REWIND" | "NOREWIND" | "UNLOAD" | "NOUNLOAD"
                | "STOP_ON_ERROR" => {}
                other => return Err(vec![msg(155, &[&other, &statement])]),
            }
        }
        Ok(o)
    }

    /// The one DISK device of a BACKUP or RESTORE, resolved inside the backup roots.
    fn backup_device(
        &mut self,
        devices: &[crate::ast::BackupDevice],
    ) -> Result<PathBuf, Vec<SqlError>> {
        let [d] = devices else {
            return Err(vec![not_yet("backups striped over several devices")]);
        };
        if d.kind != "DISK" {
            return Err(vec![not_yet("backup devices other than DISK")]);
        }
        let path = super::eval::to_text(&self.eval(&d.path, None).map_err(|e| vec![e])?);
        self.engine
            .instance
            .resolve_backup_path(&path)
            .map_err(|e| vec![storage_msg(&e)])
    }

    pub(super) fn backup(&mut self, b: &Backup, out: &mut Out) -> Result<(), Vec<SqlError>> {
        let statement = match b.kind {
            BackupKind::Database => "BACKUP DATABASE",
            BackupKind::Log => "BACKUP LOG",
        };
        let abnormal = |e| abnormal(statement, e);
        let mut opts = self.backup_options(&b.options, ("BACKUP", statement))?;
        let inst = self.engine.instance.clone();
        // 'backup compression default' and 'backup checksum default' where the statement
        // names neither way (sp_configure).
        let (compress, checksum) = super::configuration::backup_defaults(&inst);
        opts.compression |= compress && !opts.no_compression;
        opts.checksum |= checksum && !opts.no_checksum;
        let (id, db) = inst.database_by_name(&b.database).ok_or_else(|| {
            let e = self.unopened_error(&b.database);
            abnormal(vec![e.unwrap_or_else(|| msg(911, &[&b.database]))])
        })?;
        if id == extentdb_storage::instance::TEMPDB_ID {
            return Err(abnormal(vec![msg(3147, &[])]));
        }
        self.require_db_permission(id, &db.read().unwrap(), statement)
            .map_err(abnormal)?;
        // BACKUP LOG ... WITH NORECOVERY, the tail-log backup: the database goes to
        // RESTORING after it, so it needs the database to itself (3101) and a user one.
        let tail = opts.norecovery;
        if tail {
            if b.kind != BackupKind::Log {
                return Err(vec![msg(155, &[&"NORECOVERY", &"BACKUP DATABASE"])]);
            }
            if id < extentdb_storage::instance::FIRST_USER_ID {
                return Err(abnormal(vec![not_yet(
                    "a tail-log backup of a system database",
                )]));
            }
            let in_use = id == self.database_id
                || inst.sessions.lock().unwrap().values().any(|s| {
                    s.session_id != self.spid && s.database_id.load(Ordering::Relaxed) == id
                });
            // X DATABASE until the database is RESTORING (database_lock.rs): nobody enters it
            // between the check and the end of the log.
            if in_use || !self.hold_database_exclusively(id)? {
                return Err(abnormal(vec![msg(3101, &[])]));
            }
        }
        let done = self.backup_checked(b, &opts, (id, db), out);
        if tail {
            self.end_exclusive_hold(id);
        }
        done
    }

    /// BACKUP once its database is found, allowed and, for a tail-log backup, held
    /// (`backup`).
    fn backup_checked(
        &mut self,
        b: &Backup,
        opts: &Options,
        (id, db): (u16, extentdb_storage::instance::DbHandle),
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        let statement = match b.kind {
            BackupKind::Database => "BACKUP DATABASE",
            BackupKind::Log => "BACKUP LOG",
        };
        let abnormal = |e| abnormal(statement, e);
        let kind = match b.kind {
            BackupKind::Log => BackupType::Log,
            BackupKind::Database if opts.differential => BackupType::Differential,
            BackupKind::Database => BackupType::Database,
        };
        let tail = opts.norecovery;
        let inst = self.engine.instance.clone();
        let path = self.backup_device(&b.devices).map_err(abnormal)?;
        let tracked = Tracked::start(&inst, self.spid, id, statement, opts.stats);
        let progress = |done: u64, total: u64| tracked.progress(done, total);
        let cancel = self.cancel_flag();
        let memory_mb = super::configuration::max_server_memory_mb(&inst);
        let transfer = opts.media.transfer(memory_mb).map_err(abnormal)?;
        let expires_us = (opts.media)
            .expires_us(super::unix_us())
            .map_err(abnormal)?;
        if self.trace_flag(TF_BACKUP_BUFFERS)
            && (self.trace_flag(extentdb_storage::instance::TF_TO_CLIENT)
                || self.trace_flag(extentdb_storage::instance::TF_TO_ERRORLOG))
        {
            self.dbcc_print(backup_media::buffer_lines(&transfer, memory_mb), out);
        }
        let req = BackupRequest {
            transfer,
            block_size: opts.media.block_size.unwrap_or(0),
            media_name: opts.media.media_name.clone(),
            media_description: opts.media.media_description.clone(),
            expires_us,
            // FORMAT implies SKIP.
            skip: opts.media.skip || opts.format,
            kind,
            compression: opts.compression,
            path: &path,
            init: opts.init,
            format: opts.format,
            checksum: opts.checksum,
            copy_only: opts.copy_only,
            name: opts.name.clone(),
            description: opts.description.clone(),
            server_name: super::eval::hostname(),
            user_name: self.login_name().to_string(),
            progress: Some(&progress),
            cancel: Some(&cancel),
        };
        let result = backup_database(&db, &req);
        let outcome = match result {
            Ok(o) => o,
            Err(StorageError::Cancelled) => return Ok(()),
            Err(e) => return Err(abnormal(vec![storage_msg(&e)])),
        };
        tracked.stats_lines(out);
        let mut pages = 0u64;
        for (name, n) in &outcome.files {
            pages += n;
            out.push(Output::Info(msg(
                4035,
                &[n, &b.database, name, &outcome.position],
            )));
        }
        let summary = match kind {
            BackupType::Differential => "BACKUP DATABASE WITH DIFFERENTIAL",
            _ => statement,
        };
        push_summary(out, summary, pages, outcome.bytes, outcome.elapsed);
        self.record_backup(&path, outcome.position, out);
        if tail {
            drop(db);
            inst.set_restoring(id)
                .map_err(|e| abnormal(vec![storage_msg(&e)]))?;
        }
        Ok(())
    }

    pub(super) fn restore(&mut self, r: &Restore, out: &mut Out) -> Result<(), Vec<SqlError>> {
        let statement = match r.kind {
            RestoreKind::Database => "RESTORE DATABASE",
            RestoreKind::Log => "RESTORE LOG",
            RestoreKind::VerifyOnly => "VERIFY DATABASE",
            RestoreKind::FileListOnly => "RESTORE FILELIST",
            RestoreKind::HeaderOnly => "RESTORE HEADERONLY",
            RestoreKind::LabelOnly => "RESTORE LABELONLY",
        };
        let abnormal = |e| abnormal(statement, e);
        let opts = self.backup_options(&r.options, ("RESTORE", statement))?;
        if opts.media.any() || opts.media.skip {
            return Err(vec![not_yet(
                "BUFFERCOUNT, MAXTRANSFERSIZE, BLOCKSIZE and the media options on RESTORE",
            )]);
        }
        if r.kind == RestoreKind::Database && r.devices.is_empty() {
            // RESTORE DATABASE db WITH RECOVERY: the end of a restore sequence.
            let name = r.database.clone().unwrap_or_default();
            return self.recover_database(&name, &opts, out).map_err(abnormal);
        }
        let path = self.backup_device(&r.devices).map_err(abnormal)?;
        match r.kind {
            RestoreKind::Database | RestoreKind::Log => {
                let name = r.database.clone().unwrap_or_default();
                self.restore_database(r.kind, &name, &path, &opts, out)
                    .map_err(abnormal)?;
            }
            RestoreKind::VerifyOnly => {
                let position = opts.file.unwrap_or(1);
                verify_backup_set(&path, position, opts.checksum)
                    .map_err(|e| abnormal(vec![storage_msg(&e)]))?;
                out.push(Output::Info(msg(3262, &[&position])));
                let event = RestoreEvent {
                    restore_type: 'V',
                    destination: r.database.as_deref().unwrap_or(""),
                    replace: false,
                    recovery: false,
                    stop_at_us: None,
                };
                self.record_restore(&path, position, event, out);
            }
            RestoreKind::HeaderOnly => {
                let (media, sets) =
                    read_backup_sets(&path).map_err(|e| abnormal(vec![storage_msg(&e)]))?;
                let rows: Vec<Vec<Value>> = sets
                    .iter()
                    .map(|s| header_row(s, &media.media_guid))
                    .collect();
                let n = rows.len() as u64;
                out.push(Output::Rows {
                    columns: header_columns(),
                    rows,
                });
                self.rows_affected(n, out);
            }
            RestoreKind::LabelOnly => {
                let (media, sets) =
                    read_backup_sets(&path).map_err(|e| abnormal(vec![storage_msg(&e)]))?;
                out.push(Output::Rows {
                    columns: backup_media::label_columns(),
                    rows: vec![backup_media::label_row(&media, &sets)],
                });
                self.rows_affected(1, out);
            }
            RestoreKind::FileListOnly => {
                let (_, sets) =
                    read_backup_sets(&path).map_err(|e| abnormal(vec![storage_msg(&e)]))?;
                let position = opts.file.unwrap_or(1);
                let set = sets
                    .iter()
                    .find(|s| s.header.position == position)
                    .ok_or_else(|| abnormal(vec![msg(4038, &[&position, &path.display()])]))?;
                let rows = file_list_rows(set);
                let n = rows.len() as u64;
                out.push(Output::Rows {
                    columns: file_list_columns(),
                    rows,
                });
                self.rows_affected(n, out);
            }
        }
        Ok(())
    }
}

impl Session {
    /// RESTORE DATABASE db WITH RECOVERY, no backup named: a RESTORING database recovered
    /// and brought online.
    fn recover_database(
        &mut self,
        name: &str,
        opts: &Options,
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        if opts.norecovery {
            return Err(vec![msg(3117, &[])]);
        }
        let started = std::time::Instant::now();
        let inst = self.engine.instance.clone();
        let sink = self.sink();
        let ctx = self.op_context(&sink);
        inst.recover_restoring(&ctx, name)
            .map_err(|e| vec![storage_msg(&e)])?;
        push_summary(out, "RESTORE DATABASE", 0, 0, started.elapsed());
        Ok(())
    }

    /// RESTORE DATABASE | LOG name FROM DISK = ... [WITH FILE, MOVE, REPLACE, STATS,
    /// CHECKSUM, RECOVERY | NORECOVERY, STOPAT].
    fn restore_database(
        &mut self,
        kind: RestoreKind,
        name: &str,
        path: &std::path::Path,
        opts: &Options,
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        let inst = self.engine.instance.clone();
        if name.eq_ignore_ascii_case("tempdb") {
            return Err(vec![msg(3147, &[])]);
        }
        if name.eq_ignore_ascii_case("master") {
            return Err(vec![msg(3108, &[])]);
        }
        let system = ["model", "msdb"]
            .iter()
            .any(|s| name.eq_ignore_ascii_case(s));
        if system && opts.norecovery {
            return Err(vec![not_yet("RESTORE of model or msdb WITH NORECOVERY")]);
        }
        let allowed = match inst.database_by_name(name) {
            Some((id, db)) => {
                self.has_server_permission("CREATE ANY DATABASE")
                    || self.is_db_owner(id, &db.read().unwrap())
            }
            None => self.has_server_permission("CREATE ANY DATABASE"),
        };
        if !allowed {
            return Err(vec![msg(3110, &[&name])]);
        }
        // Replacing a database needs it to oneself, as SQL Server's RESTORE does: X
        // DATABASE on it while it is replaced (database_lock.rs).
        let replaced = inst.database_by_name(name).map(|(id, _)| id);
        if let Some(id) = replaced {
            if id == self.database_id {
                return Err(vec![msg(3102, &[&name])]);
            }
            let in_use =
                inst.sessions.lock().unwrap().values().any(|s| {
                    s.session_id != self.spid && s.database_id.load(Ordering::Relaxed) == id
                });
            if in_use || !self.hold_database_exclusively(id)? {
                return Err(vec![msg(3101, &[])]);
            }
        }
        self.restore_held(kind, (name, replaced), path, opts, out)
    }

    /// RESTORE's run once the database it replaces, if any, is held (`restore`).
    fn restore_held(
        &mut self,
        kind: RestoreKind,
        (name, replaced): (&str, Option<u16>),
        path: &std::path::Path,
        opts: &Options,
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        let inst = self.engine.instance.clone();
        let statement = if kind == RestoreKind::Log {
            "RESTORE LOG"
        } else {
            "RESTORE DATABASE"
        };
        let tracked = Tracked::start(&inst, self.spid, 0, statement, opts.stats);
        let progress = |done: u64, total: u64| tracked.progress(done, total);
        let cancel = self.cancel_flag();
        let req = RestoreRequest {
            path,
            position: opts.file.unwrap_or(1),
            database: name.to_string(),
            moves: opts.moves.clone(),
            replace: opts.replace,
            checksum: opts.checksum,
            recovery: !opts.norecovery,
            stop_at_us: opts.stop_at_us,
            progress: Some(&progress),
            cancel: Some(&cancel),
        };
        let sink = self.sink();
        let ctx = self.op_context(&sink);
        let result = if kind == RestoreKind::Log {
            inst.restore_log(&ctx, &req)
        } else {
            inst.restore_database(&ctx, &req)
        };
        // The X DATABASE goes before the history is written: another session writes it in
        // msdb, which may be the database restored (database_lock.rs invariant 3).
        if let Some(id) = replaced {
            if result.is_ok() {
                self.forget_index_usage(id, None, None);
            }
            self.end_exclusive_hold(id);
        }
        let outcome = match result {
            Ok(o) => o,
            Err(StorageError::Cancelled) => return Ok(()),
            Err(StorageError::RestoreFileInUse {
                path: p,
                database,
                logical,
            }) => {
                return Err(vec![
                    msg(1834, &[&p, &database]),
                    msg(3156, &[&logical, &p]),
                ])
            }
            Err(e) => return Err(vec![storage_msg(&e)]),
        };
        tracked.stats_lines(out);
        let mut pages = 0u64;
        for (file, n) in &outcome.files {
            pages += n;
            out.push(Output::Info(msg(
                4035,
                &[n, &name, file, &outcome.position],
            )));
        }
        if outcome.stop_at_beyond {
            out.push(Output::Info(msg(4322, &[])));
        }
        push_summary(out, statement, pages, outcome.bytes, outcome.elapsed);
        let event = RestoreEvent {
            restore_type: outcome.restore_type,
            destination: name,
            replace: opts.replace,
            recovery: !outcome.restoring,
            stop_at_us: opts.stop_at_us,
        };
        self.record_restore(path, outcome.position, event, out);
        Ok(())
    }
}

/// A running BACKUP or RESTORE: its row in sys.dm_exec_requests (removed when dropped) and
/// the STATS = n percentages it passed.
struct Tracked<'a> {
    inst: &'a Instance,
    spid: u16,
    stats: Option<u32>,
    reported: Mutex<Vec<u32>>,
}

impl<'a> Tracked<'a> {
    fn start(
        inst: &'a Instance,
        spid: u16,
        database_id: u16,
        command: &str,
        stats: Option<u32>,
    ) -> Tracked<'a> {
        inst.requests.lock().unwrap().insert(
            spid,
            RequestProgress {
                session_id: spid,
                database_id,
                command: command.into(),
                start_unix_us: super::ddl::now_unix_us(),
                percent_complete: 0.0,
            },
        );
        Tracked {
            inst,
            spid,
            stats,
            reported: Mutex::new(Vec::new()),
        }
    }

    fn progress(&self, done: u64, total: u64) {
        let percent = (done * 100 / total.max(1)).min(100) as u32;
        if let Some(r) = self.inst.requests.lock().unwrap().get_mut(&self.spid) {
            r.percent_complete = percent as f32;
        }
        if let Some(step) = self.stats {
            let mut rep = self.reported.lock().unwrap();
            let mut next = rep.last().map_or(step, |l| l + step);
            while next <= percent {
                rep.push(next);
                next += step;
            }
        }
    }

    /// `n percent processed.` for each step passed (Msg 3211).
    fn stats_lines(&self, out: &mut Out) {
        for p in self.reported.lock().unwrap().iter() {
            out.push(Output::Info(msg(3211, &[p])));
        }
    }
}

impl Drop for Tracked<'_> {
    fn drop(&mut self) {
        self.inst.requests.lock().unwrap().remove(&self.spid);
    }
}

/// SQL Server's closing line of a backup or restore (Msg 3014).
fn push_summary(
    out: &mut Out,
    statement: &str,
    pages: u64,
    bytes: u64,
    elapsed: std::time::Duration,
) {
    let secs = elapsed.as_secs_f64().max(0.001);
    let mb_s = bytes as f64 / 1_048_576.0 / secs;
    let ms = (secs * 1000.0).round() as u64;
    let mbs = (mb_s * 1000.0).round() as u64;
    out.push(Output::Info(msg(
        3014,
        &[
            &statement,
            &pages,
            &(ms / 1000),
            &format!("{:03}", ms % 1000),
            &(mbs / 1000),
            &format!("{:03}", mbs % 1000),
        ],
    )));
}

/// Errors of a BACKUP or RESTORE, closed by SQL Server's 3013 ("... is terminating
/// abnormally.").
fn abnormal(statement: &str, mut errors: Vec<SqlError>) -> Vec<SqlError> {
    errors.push(msg(3013, &[&statement]));
    errors
}

/// A storage error of BACKUP or RESTORE as SQL Server's message.
fn storage_msg(e: &StorageError) -> SqlError {
    match e {
        StorageError::BackupDevice { path, reason } => msg(3201, &[path, reason]),
        StorageError::BackupMedia { path, .. } => msg(3241, &[path]),
        StorageError::BackupSetNotFound { position, path } => msg(4038, &[position, path]),
        StorageError::BackupMediaNotExpired { path, expires_us } => {
            let at = super::eval::to_text(&Value::DateTime(ticks_from_unix_us(*expires_us)));
            msg(4030, &[path, &at])
        }
        StorageError::BackupMediaName { given, found, path } => msg(4037, &[given, found, path]),
        StorageError::BackupWrite { path, reason } => msg(3202, &[path, reason]),
        StorageError::RestoreKind {
            path, created_by, ..
        } => msg(3135, &[path, created_by]),
        StorageError::LogBackupSimple(_) => msg(4208, &[&"BACKUP LOG"]),
        StorageError::RestoreSystemDatabase(_) => msg(3108, &[]),
        StorageError::NoCurrentBackup(_) => msg(4214, &[]),
        StorageError::NoDifferentialBase(database) => msg(3035, &[database]),
        StorageError::NotRestoring(_) => msg(3117, &[]),
        StorageError::LogTooRecent { first, needed } => {
            msg(4305, &[&lsn_text(*first), &lsn_text(*needed)])
        }
        StorageError::LogTooEarly { last, needed } => {
            msg(4326, &[&lsn_text(*last), &lsn_text(*needed)])
        }
        StorageError::DifferentialBaseMismatch => msg(3136, &[]),
        StorageError::RestoreOverExisting { database, same } => {
            if *same {
                msg(3159, &[database])
            } else {
                msg(3154, &[database])
            }
        }
        StorageError::RestoreLogicalName { logical, database } => msg(3234, &[logical, database]),
        StorageError::RestorePageError { database, page } => {
            msg(3183, &[&page.file.0, &page.page.0, database])
        }
        StorageError::BackupPageError {
            database,
            page,
            file,
        } => msg(3043, &[database, &page.file.0, &page.page.0, file]),
        other => super::errors::map(other, super::errors::Context::Other)
            .into_iter()
            .next()
            .unwrap_or_else(|| msg(3013, &[&"BACKUP"])),
    }
}

pub(super) fn header_columns() -> Vec<(String, SqlType)> {
    use SqlType::*;
    vec![
        col("BackupName", NVarChar(128)),
        col("BackupDescription", NVarChar(255)),
        col("BackupType", SmallInt),
        col("ExpirationDate", DateTime),
        col("Compressed", Bit),
        col("Position", SmallInt),
        col("DeviceType", TinyInt),
        col("UserName", NVarChar(128)),
        col("ServerName", NVarChar(128)),
        col("DatabaseName", NVarChar(128)),
        col("DatabaseVersion", Int),
        col("DatabaseCreationDate", DateTime),
        col("BackupSize", BigInt),
        col("FirstLSN", LSN_TYPE),
        col("LastLSN", LSN_TYPE),
        col("CheckpointLSN", LSN_TYPE),
        col("DatabaseBackupLSN", LSN_TYPE),
        col("BackupStartDate", DateTime),
        col("BackupFinishDate", DateTime),
        col("SortOrder", SmallInt),
        col("CodePage", SmallInt),
        col("UnicodeLocaleId", Int),
        col("UnicodeComparisonStyle", Int),
        col("CompatibilityLevel", TinyInt),
        col("SoftwareVendorId", Int),
        col("SoftwareVersionMajor", Int),
        col("SoftwareVersionMinor", Int),
        col("SoftwareVersionBuild", Int),
        col("MachineName", NVarChar(128)),
        col("Flags", Int),
        col("BindingID", UniqueIdentifier),
        col("RecoveryForkID", UniqueIdentifier),
        col("Collation", NVarChar(128)),
        col("FamilyGUID", UniqueIdentifier),
        col("HasBulkLoggedData", Bit),
        col("IsSnapshot", Bit),
        col("IsReadOnly", Bit),
        col("IsSingleUser", Bit),
        col("HasBackupChecksums", Bit),
        col("IsDamaged", Bit),
        col("BeginsLogChain", Bit),
        col("HasIncompleteMetaData", Bit),
        col("IsForceOffline", Bit),
        col("IsCopyOnly", Bit),
        col("FirstRecoveryForkID", UniqueIdentifier),
        col("ForkPointLSN", LSN_TYPE),
        col("RecoveryModel", NVarChar(60)),
        col("DifferentialBaseLSN", LSN_TYPE),
        col("DifferentialBaseGUID", UniqueIdentifier),
        col("BackupTypeDescription", NVarChar(60)),
        col("BackupSetGUID", UniqueIdentifier),
        col("CompressedBackupSize", BigInt),
        col("Containment", TinyInt),
    ]
}

/// The set's BackupSetGUID (`SetHeader::set_guid`).
pub(super) fn backup_set_guid(s: &SetInfo, media_guid: &[u8; 16]) -> [u8; 16] {
    s.header.set_guid(media_guid)
}

pub(super) fn header_row(s: &SetInfo, media_guid: &[u8; 16]) -> Vec<Value> {
    let h = &s.header;
    let t = |us: i64| Value::DateTime(ticks_from_unix_us(us));
    let recovery = match RecoveryModel::from_u8(h.recovery_model) {
        Some(RecoveryModel::Full) => "FULL",
        Some(RecoveryModel::BulkLogged) => "BULK-LOGGED",
        _ => "SIMPLE",
    };
    let description = match h.backup_type {
        BackupType::Database => "Database",
        BackupType::Log => "Transaction Log",
        BackupType::Differential => "Database Differential",
    };
    let text = |s: &str| {
        if s.is_empty() {
            Value::Null
        } else {
            Value::Text(s.to_string())
        }
    };
    let guid = Value::Guid(h.database_guid);
    let compressed = h.flags & FLAG_COMPRESSED != 0;
    // BackupSize counts the bytes before compression; CompressedBackupSize those stored.
    let stored = s.size as i64;
    let raw = if compressed {
        stored + (s.trailer.data_pages * PAGE_SIZE as u64 + s.trailer.log_bytes) as i64
            - s.file_bytes.values().sum::<u64>() as i64
    } else {
        stored
    };
    let based = h.backup_type == BackupType::Differential;
    vec![
        text(&h.name),
        text(&h.description),
        Value::SmallInt(h.backup_type as i16),
        match h.expires_us {
            0 => Value::Null,
            us => t(us),
        },
        Value::Bit(compressed),
        Value::SmallInt(h.position as i16),
        Value::TinyInt(2),
        Value::Text(h.user_name.clone()),
        Value::Text(h.server_name.clone()),
        Value::Text(h.database_name.clone()),
        Value::Int(h.database_version as i32),
        t(h.database_created_us),
        Value::BigInt(raw),
        lsn_value(h.first_lsn),
        lsn_value(h.last_lsn),
        lsn_value(h.checkpoint_lsn),
        lsn_value(h.database_backup_lsn),
        t(h.started_us),
        t(s.trailer.finished_us),
        Value::SmallInt(0),
        Value::SmallInt(0),
        Value::Int(1033),
        Value::Int(196_609),
        Value::TinyInt(160),
        Value::Int(4608),
        Value::Int(16),
        Value::Int(0),
        Value::Int(4_175),
        Value::Text(h.server_name.clone()),
        Value::Int(if h.flags & FLAG_CHECKSUM != 0 { 16 } else { 0 }),
        guid.clone(),
        guid.clone(),
        Value::Text("SQL_Latin1_General_CP1_CI_AS".into()),
        guid.clone(),
        Value::Bit(false),
        Value::Bit(false),
        Value::Bit(false),
        Value::Bit(false),
        Value::Bit(h.flags & FLAG_CHECKSUM != 0),
        Value::Bit(false),
        Value::Bit(false),
        Value::Bit(false),
        Value::Bit(false),
        Value::Bit(h.flags & FLAG_COPY_ONLY != 0),
        guid.clone(),
        Value::Null,
        Value::Text(recovery.into()),
        if based {
            lsn_value(h.database_backup_lsn)
        } else {
            Value::Null
        },
        if based {
            Value::Guid(h.differential_base_guid)
        } else {
            Value::Null
        },
        Value::Text(description.into()),
        Value::Guid(backup_set_guid(s, media_guid)),
        Value::BigInt(stored),
        Value::TinyInt(0),
    ]
}

fn file_list_columns() -> Vec<(String, SqlType)> {
    use SqlType::*;
    vec![
        col("LogicalName", NVarChar(128)),
        col("PhysicalName", NVarChar(260)),
        col("Type", Char(1)),
        col("FileGroupName", NVarChar(128)),
        col(
            "Size",
            Decimal {
                precision: 20,
                scale: 0,
            },
        ),
        col(
            "MaxSize",
            Decimal {
                precision: 20,
                scale: 0,
            },
        ),
        col("FileId", BigInt),
        col("CreateLSN", LSN_TYPE),
        col("DropLSN", LSN_TYPE),
        col("UniqueId", UniqueIdentifier),
        col("ReadOnlyLSN", LSN_TYPE),
        col("ReadWriteLSN", LSN_TYPE),
        col("BackupSizeInBytes", BigInt),
        col("SourceBlockSize", Int),
        col("FileGroupId", Int),
        col("LogGroupGUID", UniqueIdentifier),
        col("DifferentialBaseLSN", LSN_TYPE),
        col("DifferentialBaseGUID", UniqueIdentifier),
        col("IsReadOnly", Bit),
        col("IsPresent", Bit),
        col("TDEThumbprint", VarBinary(32)),
        col("SnapshotUrl", NVarChar(360)),
    ]
}

fn file_list_rows(s: &SetInfo) -> Vec<Vec<Value>> {
    let dec = |v: u64| Value::Decimal {
        unscaled: v as i128,
        scale: 0,
    };
    let zero = lsn_value(Lsn::ZERO);
    s.header
        .files
        .iter()
        .map(|f| {
            let log = f.file_type == FileType::Log;
            let size = f.size_pages as u64 * PAGE_SIZE as u64;
            let max = match f.max_size_pages {
                -1 => 35_184_372_080_640u64,
                m => m.max(0) as u64 * PAGE_SIZE as u64,
            };
            let mut uid = s.header.database_guid;
            uid[15] ^= f.file_id as u8;
            vec![
                Value::Text(f.name.clone()),
                Value::Text(f.physical_name.clone()),
                Value::Text(if log { "L" } else { "D" }.into()),
                if log {
                    Value::Null
                } else {
                    s.header
                        .filegroups
                        .iter()
                        .find(|g| g.0 == f.data_space_id)
                        .map_or(Value::Null, |g| Value::Text(g.1.clone()))
                },
                dec(size),
                dec(max),
                Value::BigInt(f.file_id as i64),
                zero.clone(),
                zero.clone(),
                Value::Guid(uid),
                zero.clone(),
                zero.clone(),
                Value::BigInt(s.file_bytes.get(&f.file_id).copied().unwrap_or(0) as i64),
                Value::Int(4096),
                Value::Int(if log { 0 } else { f.data_space_id as i32 }),
                Value::Null,
                zero.clone(),
                Value::Null,
                Value::Bit(false),
                Value::Bit(true),
                Value::Null,
                Value::Null,
            ]
        })
        .collect()
}

/// An option's text, refused with Msg 103 past `max` characters.
fn bounded_text(value: Option<String>, what: &str, max: usize) -> Result<String, Vec<SqlError>> {
    let text = value.unwrap_or_default();
    if text.chars().count() > max {
        return Err(vec![super::errors::too_long(what, &text, max)]);
    }
    Ok(text)
}
