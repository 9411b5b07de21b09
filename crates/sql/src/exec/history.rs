//! The backup and restore history in msdb, in SQL Server's tables and columns
//! (backupmediaset, backupmediafamily, backupset, restorehistory), so that a DBA's queries
//! and tools read it as they read SQL Server's.
//!
//! The tables are ordinary tables of msdb, created when the engine starts (`ensure_tables`:
//! a tool reading msdb.dbo.backupset before the first backup finds it empty, as on SQL
//! Server, not missing) and again before each write. After a BACKUP or RESTORE
//! succeeds, an internal session (spid listed like any other while it runs) inserts the rows
//! with the values as parameters, taken from the backup file's own headers (the same values
//! RESTORE HEADERONLY shows). A history that cannot be written does not undo the operation:
//! SQL Server's message 3009 says so, and the operation stands.
//!
//! Rows are matched to a backup set by its backup_set_uuid (HEADERONLY's BackupSetGUID, derived
//! from the media GUID, the position and the start time: `backup::backup_set_guid`). A
//! RESTORE from a set that this instance did not write (another instance's file) first adds
//! that set's rows, as SQL Server does, and restorehistory points at them.

use std::path::Path;

use extentdb_format::backup::MediaHeader;
use extentdb_storage::backup::{read_backup_sets, SetInfo};

use super::backup::{header_columns, header_row};
use super::Session;
use super::{Out, Output};
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value};

/// The tables, in SQL Server's column names and types (a subset of backupset's 70 columns:
/// those the backup file records).
const TABLES: &str = "
IF OBJECT_ID('msdb.dbo.backupmediaset') IS NULL
CREATE TABLE msdb.dbo.backupmediaset (
    media_set_id int IDENTITY(1,1) PRIMARY KEY, media_uuid uniqueidentifier NULL,
    media_family_count tinyint NULL, name nvarchar(128) NULL, description nvarchar(255) NULL,
    software_name nvarchar(128) NULL, software_vendor_id int NULL, MTF_major_version tinyint NULL,
    mirror_count tinyint NULL, is_password_protected bit NULL, is_compressed bit NULL,
    is_encrypted bit NULL);
IF OBJECT_ID('msdb.dbo.backupmediafamily') IS NULL
CREATE TABLE msdb.dbo.backupmediafamily (
    media_set_id int NOT NULL, family_sequence_number tinyint NOT NULL,
    media_family_id uniqueidentifier NULL, media_count int NULL,
    logical_device_name nvarchar(128) NULL, physical_device_name nvarchar(260) NULL,
    device_type tinyint NULL, physical_block_size int NULL, mirror tinyint NOT NULL);
IF OBJECT_ID('msdb.dbo.backupset') IS NULL
CREATE TABLE msdb.dbo.backupset (
    backup_set_id int IDENTITY(1,1) PRIMARY KEY, backup_set_uuid uniqueidentifier NOT NULL,
    media_set_id int NOT NULL, first_family_number tinyint NULL, first_media_number smallint NULL,
    last_family_number tinyint NULL, last_media_number smallint NULL,
    catalog_family_number tinyint NULL, catalog_media_number smallint NULL, position int NULL,
    expiration_date datetime NULL, software_vendor_id int NULL, name nvarchar(128) NULL,
    description nvarchar(255) NULL, user_name nvarchar(128) NULL,
    software_major_version tinyint NULL, software_minor_version tinyint NULL,
    software_build_version smallint NULL, first_lsn numeric(25,0) NULL,
    last_lsn numeric(25,0) NULL, checkpoint_lsn numeric(25,0) NULL,
    database_backup_lsn numeric(25,0) NULL, database_creation_date datetime NULL,
    backup_start_date datetime NULL, backup_finish_date datetime NULL, type char(1) NULL,
    compatibility_level tinyint NULL, database_version int NULL, backup_size numeric(20,0) NULL,
    database_name nvarchar(128) NULL, server_name nvarchar(128) NULL,
    machine_name nvarchar(128) NULL, flags int NULL, collation_name nvarchar(128) NULL,
    is_password_protected bit NULL, recovery_model nvarchar(60) NULL,
    has_bulk_logged_data bit NULL, is_snapshot bit NULL, is_readonly bit NULL,
    is_single_user bit NULL, has_backup_checksums bit NULL, is_damaged bit NULL,
    begins_log_chain bit NULL, has_incomplete_metadata bit NULL, is_force_offline bit NULL,
    is_copy_only bit NULL, first_recovery_fork_guid uniqueidentifier NULL,
    last_recovery_fork_guid uniqueidentifier NULL, fork_point_lsn numeric(25,0) NULL,
    database_guid uniqueidentifier NULL, family_guid uniqueidentifier NULL,
    differential_base_lsn numeric(25,0) NULL, differential_base_guid uniqueidentifier NULL,
    compressed_backup_size numeric(20,0) NULL);
IF OBJECT_ID('msdb.dbo.restorehistory') IS NULL
CREATE TABLE msdb.dbo.restorehistory (
    restore_history_id int IDENTITY(1,1) PRIMARY KEY, restore_date datetime NULL,
    destination_database_name nvarchar(128) NULL, user_name nvarchar(128) NULL,
    backup_set_id int NOT NULL, restore_type char(1) NULL, replace bit NULL, recovery bit NULL,
    restart bit NULL, stop_at datetime NULL, device_count tinyint NULL,
    stop_at_mark_name nvarchar(128) NULL, stop_before bit NULL);
";

/// Finds (or adds) the rows of the set the parameters describe; leaves its id in @set_id.
const SET_ROWS: &str = "
DECLARE @media_set_id int, @set_id int;
SELECT @media_set_id = media_set_id FROM msdb.dbo.backupmediaset WHERE media_uuid = @MediaUuid;
IF @media_set_id IS NULL
BEGIN
    INSERT INTO msdb.dbo.backupmediaset (media_uuid, media_family_count, name, description,
        software_name, software_vendor_id, MTF_major_version, mirror_count,
        is_password_protected, is_compressed, is_encrypted)
    VALUES (@MediaUuid, 1, @MediaName, @MediaDescription, N'extentdb', 4608, 1, 1, 0, 0, 0);
    SET @media_set_id = SCOPE_IDENTITY();
    INSERT INTO msdb.dbo.backupmediafamily (media_set_id, family_sequence_number,
        media_family_id, media_count, logical_device_name, physical_device_name, device_type,
        physical_block_size, mirror)
    VALUES (@media_set_id, 1, @MediaUuid, 1, NULL, @PhysicalDevice, 2, @PhysicalBlockSize, 0);
END
SELECT @set_id = backup_set_id FROM msdb.dbo.backupset WHERE backup_set_uuid = @BackupSetGUID;
IF @set_id IS NULL
BEGIN
    INSERT INTO msdb.dbo.backupset (backup_set_uuid, media_set_id, first_family_number,
        first_media_number, last_family_number, last_media_number, catalog_family_number,
        catalog_media_number, position, expiration_date, software_vendor_id, name,
        description, user_name, software_major_version, software_minor_version,
        software_build_version, first_lsn, last_lsn, checkpoint_lsn, database_backup_lsn,
        database_creation_date, backup_start_date, backup_finish_date, type,
        compatibility_level, database_version, backup_size, database_name, server_name,
        machine_name, flags, collation_name, is_password_protected, recovery_model,
        has_bulk_logged_data, is_snapshot, is_readonly, is_single_user, has_backup_checksums,
        is_damaged, begins_log_chain, has_incomplete_metadata, is_force_offline, is_copy_only,
        first_recovery_fork_guid, last_recovery_fork_guid, fork_point_lsn, database_guid,
        family_guid, differential_base_lsn, differential_base_guid, compressed_backup_size)
    VALUES (@BackupSetGUID, @media_set_id, 1, 1, 1, 1, 1, 1, @Position, @ExpirationDate,
        @SoftwareVendorId,
        @BackupName, @BackupDescription, @UserName, @SoftwareVersionMajor,
        @SoftwareVersionMinor, @SoftwareVersionBuild, @FirstLSN, @LastLSN, @CheckpointLSN,
        @DatabaseBackupLSN, @DatabaseCreationDate, @BackupStartDate, @BackupFinishDate,
        @SetType, @CompatibilityLevel, @DatabaseVersion, @BackupSize, @DatabaseName,
        @ServerName, @MachineName, @Flags, @Collation, 0, @RecoveryModel,
        @HasBulkLoggedData, @IsSnapshot, @IsReadOnly, @IsSingleUser, @HasBackupChecksums,
        @IsDamaged, @BeginsLogChain, @HasIncompleteMetaData, @IsForceOffline, @IsCopyOnly,
        @FirstRecoveryForkID, @RecoveryForkID, @ForkPointLSN, @BindingID, @FamilyGUID,
        @DifferentialBaseLSN, @DifferentialBaseGUID, @CompressedBackupSize);
    SET @set_id = SCOPE_IDENTITY();
END
";

/// sp_delete_backuphistory: the sets that finished before @oldest_date, their media sets
/// when no set is left on them, and the restores from those sets (SQL Server's order:
/// restorehistory, then backupset, backupmediafamily, backupmediaset).
const DELETE_OLDER: &str = "
DELETE FROM msdb.dbo.restorehistory WHERE backup_set_id IN
    (SELECT backup_set_id FROM msdb.dbo.backupset WHERE backup_finish_date < @oldest_date);
DELETE FROM msdb.dbo.backupset WHERE backup_finish_date < @oldest_date;
DELETE FROM msdb.dbo.backupmediafamily WHERE media_set_id NOT IN
    (SELECT media_set_id FROM msdb.dbo.backupset);
DELETE FROM msdb.dbo.backupmediaset WHERE media_set_id NOT IN
    (SELECT media_set_id FROM msdb.dbo.backupset);
";

/// Creates the history tables in msdb where they are missing, as the engine starts; a
/// failure (msdb offline, read-only, damaged) goes to the error log and the engine starts.
pub(super) fn ensure_tables(engine: &std::sync::Arc<super::Engine>) {
    // spid 7, the start-up task's in the error log ("spid7s").
    let mut s = engine.system_session(7, history_client());
    let failed = s.execute(TABLES).into_iter().find_map(|o| match o {
        Output::Error(e) => Some(e.text),
        _ => None,
    });
    if let Some(reason) = failed {
        engine.instance.errorlog.write(
            "spid7s",
            &format!("msdb's backup history tables could not be created: {reason}"),
        );
    }
}

/// The internal session that writes the history.
fn history_client() -> super::ClientInfo {
    super::ClientInfo {
        login_name: "sa".into(),
        host_name: String::new(),
        program_name: "extentdb backup history".into(),
        client_interface_name: "extentdb".into(),
        connection: None,
    }
}

/// What a RESTORE adds to restorehistory.
pub(super) struct RestoreEvent<'a> {
    /// 'D' database, 'I' differential, 'L' log, 'V' VERIFYONLY.
    pub restore_type: char,
    pub destination: &'a str,
    pub replace: bool,
    pub recovery: bool,
    /// RESTORE LOG ... WITH STOPAT, µs since the Unix epoch.
    pub stop_at_us: Option<i64>,
}

impl Session {
    /// Records the set at `position` of `path` that BACKUP just wrote.
    pub(super) fn record_backup(&self, path: &Path, position: u32, out: &mut Out) {
        if let Err(e) = self.write_history(path, position, None) {
            out.push(Output::Error(history_failed(e)));
        }
    }

    /// Records a RESTORE (or VERIFYONLY) from the set at `position` of `path`.
    pub(super) fn record_restore(
        &self,
        path: &Path,
        position: u32,
        event: RestoreEvent<'_>,
        out: &mut Out,
    ) {
        if let Err(e) = self.write_history(path, position, Some(event)) {
            out.push(Output::Error(history_failed(e)));
        }
    }

    fn write_history(
        &self,
        path: &Path,
        position: u32,
        restore: Option<RestoreEvent<'_>>,
    ) -> Result<(), String> {
        let (media, sets) = read_backup_sets(path).map_err(|e| e.to_string())?;
        let set = sets
            .iter()
            .find(|s| s.header.position == position)
            .ok_or_else(|| format!("no backup set {position} in the file"))?;
        let mut params = set_parameters(set, &media, path);
        let mut batch = String::from(SET_ROWS);
        if let Some(r) = restore {
            batch.push_str(
                "INSERT INTO msdb.dbo.restorehistory (restore_date, destination_database_name,
                    user_name, backup_set_id, restore_type, replace, recovery, restart, stop_at,
                    device_count, stop_at_mark_name, stop_before)
                 VALUES (GETDATE(), @Destination, @RestoringUser, @set_id, @RestoreType,
                    @Replace, @Recovery, 0, @StopAt, 1, NULL, 0);",
            );
            let text = |s: &str| Value::Text(s.to_string());
            params.push((
                "@Destination".into(),
                SqlType::NVarChar(128),
                text(r.destination),
            ));
            params.push((
                "@RestoringUser".into(),
                SqlType::NVarChar(128),
                text(self.login_name()),
            ));
            params.push((
                "@RestoreType".into(),
                SqlType::Char(1),
                text(&r.restore_type.to_string()),
            ));
            params.push(("@Replace".into(), SqlType::Bit, Value::Bit(r.replace)));
            params.push(("@Recovery".into(), SqlType::Bit, Value::Bit(r.recovery)));
            params.push((
                "@StopAt".into(),
                SqlType::DateTime,
                r.stop_at_us.map_or(Value::Null, |us| {
                    Value::DateTime(super::views::ticks_from_unix_us(us))
                }),
            ));
        }
        let mut s = self.engine.session_for(history_client());
        for o in s.execute(TABLES) {
            if let Output::Error(e) = o {
                return Err(e.text);
            }
        }
        for o in s.execute_with_parameters(&batch, params) {
            if let Output::Error(e) = o {
                return Err(e.text);
            }
        }
        Ok(())
    }
}

impl Session {
    /// msdb.dbo.sp_delete_backuphistory @oldest_date: deletes the history of the sets that
    /// finished before it, in the caller's transaction (a ROLLBACK brings the rows back).
    /// sysadmin only, as on SQL Server (229 otherwise); 201 without @oldest_date.
    pub(super) fn sp_delete_backuphistory(&mut self, args: &[Value]) -> Result<(), Vec<SqlError>> {
        if !self.is_sysadmin() {
            let p: [&dyn std::fmt::Display; 4] =
                [&"EXECUTE", &"sp_delete_backuphistory", &"msdb", &"dbo"];
            return Err(vec![msg(229, &p)]);
        }
        let oldest = match args.first() {
            None | Some(Value::Null) => {
                let p: [&dyn std::fmt::Display; 2] = [&"sp_delete_backuphistory", &"@oldest_date"];
                return Err(vec![msg(201, &p)]);
            }
            Some(v) => crate::convert::convert(v, SqlType::DateTime, None).map_err(|e| vec![e])?,
        };
        let params = vec![("@oldest_date".to_string(), SqlType::DateTime, oldest)];
        let mut sink = super::output::Collect::default();
        self.run_nested(DELETE_OLDER, params, &mut Out::new(&mut sink))?;
        // Like SQL Server's procedure, no counts reach the client: only errors.
        let errors: Vec<SqlError> = (sink.outputs.into_iter())
            .filter_map(|o| match o {
                Output::Error(e) => Some(e),
                _ => None,
            })
            .collect();
        match errors.is_empty() {
            true => Ok(()),
            false => Err(errors),
        }
    }
}

/// SQL Server's 3009, with what went wrong in the error log's manner appended.
fn history_failed(reason: String) -> SqlError {
    let mut e = msg(3009, &[]);
    e.text = format!("{} ({reason})", e.text);
    e
}

/// The set's values as parameters named after RESTORE HEADERONLY's columns (@BackupName,
/// @FirstLSN, ...), plus the media set's.
fn set_parameters(
    set: &SetInfo,
    media: &MediaHeader,
    path: &Path,
) -> Vec<(String, SqlType, Value)> {
    let media_guid = &media.media_guid;
    let mut params: Vec<(String, SqlType, Value)> = header_columns()
        .into_iter()
        .zip(header_row(set, media_guid))
        .map(|((name, t), v)| (format!("@{name}"), t, v))
        .collect();
    let set_type = match set.header.backup_type {
        extentdb_format::backup::BackupType::Database => "D",
        extentdb_format::backup::BackupType::Differential => "I",
        extentdb_format::backup::BackupType::Log => "L",
    };
    params.push((
        "@SetType".into(),
        SqlType::Char(1),
        Value::Text(set_type.into()),
    ));
    params.push((
        "@MediaUuid".into(),
        SqlType::UniqueIdentifier,
        Value::Guid(*media_guid),
    ));
    params.push((
        "@PhysicalDevice".into(),
        SqlType::NVarChar(260),
        Value::Text(path.display().to_string()),
    ));
    let text = |s: &str| match s.is_empty() {
        true => Value::Null,
        false => Value::Text(s.to_string()),
    };
    params.extend([
        (
            "@MediaName".into(),
            SqlType::NVarChar(128),
            text(&media.media_name),
        ),
        (
            "@MediaDescription".into(),
            SqlType::NVarChar(255),
            text(&media.media_description),
        ),
        (
            "@PhysicalBlockSize".into(),
            SqlType::Int,
            Value::Int(super::backup_media::physical_block_size(media)),
        ),
    ]);
    params
}
