//! BACKUP's media and transfer options as SQL Server takes them: BUFFERCOUNT and
//! MAXTRANSFERSIZE (storage backup_transfer.rs), BLOCKSIZE, MEDIANAME, MEDIADESCRIPTION,
//! EXPIREDATE, RETAINDAYS and SKIP; trace flag 3213's buffer configuration lines; and
//! RESTORE LABELONLY, which shows the media header they write.
//!
//! Choices where SQL Server leaves room, each written down:
//! - BLOCKSIZE from 512 to 4,096: every structure of a backup file is at a multiple of
//!   4,096 bytes (docs/FORMAT.md), itself a multiple of the block size, so the media's I/O
//!   is aligned to it; the value is kept in the media header and shown in msdb. Larger
//!   block sizes (tape-sized) would need a wider alignment and are refused (40517).
//! - The buffers a backup holds (BUFFERCOUNT x MAXTRANSFERSIZE) may not pass a quarter of
//!   'max server memory (MB)': beyond that Msg 701, as SQL Server gives when its backup
//!   buffers cannot be had.
//! - EXPIREDATE with RETAINDAYS is Msg 3031 (the two would disagree on the date).
//! - On RESTORE these options are not built (40517), except that RESTORE LABELONLY reads
//!   the header they write.

use extentdb_format::backup::{MediaHeader, FLAG_COMPRESSED};
use extentdb_storage::backup::SetInfo;
use extentdb_storage::backup_transfer::{TransferSettings, MAX_TRANSFER, MIN_TRANSFER};

use super::lower::not_yet;
use super::views::ticks_from_unix_us;
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value};

pub use extentdb_storage::instance::TF_BACKUP_BUFFERS;

/// The media and transfer options of one BACKUP (or RESTORE, which refuses them).
#[derive(Default, Debug)]
pub(super) struct MediaOptions {
    pub buffer_count: Option<u32>,
    pub max_transfer: Option<u32>,
    pub block_size: Option<u32>,
    pub media_name: Option<String>,
    pub media_description: String,
    pub expire_date_us: Option<i64>,
    pub retain_days: Option<i64>,
    pub skip: bool,
}

impl MediaOptions {
    /// Takes option `name` with its value text if it is one of these: Ok(true) taken,
    /// Ok(false) not a media option.
    pub fn take(&mut self, name: &str, value: Option<&str>) -> Result<bool, Vec<SqlError>> {
        let number = |what: &str| -> Result<i64, Vec<SqlError>> {
            value
                .and_then(|v| v.trim().parse::<i64>().ok())
                .ok_or_else(|| vec![msg(3217, &[&what])])
        };
        match name {
            "BUFFERCOUNT" => {
                let n = number(name)?;
                self.buffer_count = Some(in_range(n, 1, i32::MAX as i64, name)? as u32);
            }
            "MAXTRANSFERSIZE" => {
                let n = in_range(
                    number(name)?,
                    MIN_TRANSFER as i64,
                    MAX_TRANSFER as i64,
                    name,
                )?;
                if n % MIN_TRANSFER as i64 != 0 {
                    return Err(vec![msg(3217, &[&name])]);
                }
                self.max_transfer = Some(n as u32);
            }
            "BLOCKSIZE" => {
                let n = in_range(number(name)?, 512, 65_536, name)?;
                if (n as u64).count_ones() != 1 {
                    return Err(vec![msg(3253, &[])]);
                }
                if n > 4096 {
                    return Err(vec![not_yet(
                        "BLOCKSIZE above 4096 (backup structures are aligned to 4,096 bytes)",
                    )]);
                }
                self.block_size = Some(n as u32);
            }
            "MEDIANAME" => self.media_name = Some(bounded(value, "media name", 128)?),
            "MEDIADESCRIPTION" => {
                self.media_description = bounded(value, "media description", 255)?
            }
            "EXPIREDATE" => {
                let text = value.unwrap_or_default();
                let parsed =
                    crate::convert::parse_datetime_text(text).ok_or_else(|| vec![msg(241, &[])])?;
                self.expire_date_us = Some(super::views::unix_us_from_ticks(parsed.ticks));
            }
            "RETAINDAYS" => {
                self.retain_days = Some(in_range(number(name)?, 0, i32::MAX as i64, name)?)
            }
            "SKIP" => self.skip = true,
            "NOSKIP" => self.skip = false,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Whether any option here was given (RESTORE refuses them).
    pub fn any(&self) -> bool {
        self.buffer_count.is_some()
            || self.max_transfer.is_some()
            || self.block_size.is_some()
            || self.media_name.is_some()
            || !self.media_description.is_empty()
            || self.expire_date_us.is_some()
            || self.retain_days.is_some()
    }

    /// The transfer settings, checked against the buffer memory allowed with
    /// `max_server_memory_mb` (Msg 701).
    pub fn transfer(&self, max_server_memory_mb: u32) -> Result<TransferSettings, Vec<SqlError>> {
        let d = TransferSettings::default();
        let t = TransferSettings {
            buffer_count: self.buffer_count.unwrap_or(d.buffer_count),
            max_transfer: self.max_transfer.unwrap_or(d.max_transfer),
        };
        if t.buffer_bytes() > memory_limit(max_server_memory_mb) {
            return Err(vec![msg(701, &[&"default"])]);
        }
        Ok(t)
    }

    /// The new set's expiration (µs since the Unix epoch; 0 for none) at `now_us`.
    pub fn expires_us(&self, now_us: i64) -> Result<i64, Vec<SqlError>> {
        match (self.expire_date_us, self.retain_days) {
            (Some(_), Some(_)) => Err(vec![msg(3031, &[&"RETAINDAYS", &"EXPIREDATE"])]),
            (Some(at), None) => Ok(at),
            (None, Some(days)) => Ok(now_us.saturating_add(days.saturating_mul(86_400_000_000))),
            (None, None) => Ok(0),
        }
    }
}

/// Bytes a backup's buffers may take: a quarter of the memory cap.
fn memory_limit(max_server_memory_mb: u32) -> u64 {
    (max_server_memory_mb as u64) << 18
}

fn in_range(n: i64, lo: i64, hi: i64, what: &str) -> Result<i64, Vec<SqlError>> {
    match (lo..=hi).contains(&n) {
        true => Ok(n),
        false => Err(vec![msg(3250, &[&n, &what])]),
    }
}

fn bounded(value: Option<&str>, what: &str, max: usize) -> Result<String, Vec<SqlError>> {
    let text = value.unwrap_or_default().to_string();
    if text.chars().count() > max {
        return Err(vec![super::errors::too_long(what, &text, max)]);
    }
    Ok(text)
}

/// Trace flag 3213's lines for a backup with `t` to one device, in SQL Server's words
/// (only those that describe something extentdb has).
pub(super) fn buffer_lines(t: &TransferSettings, max_server_memory_mb: u32) -> Vec<String> {
    let mb = |b: u64| b >> 20;
    vec![
        "Backup/Restore buffer configuration parameters".into(),
        format!("Memory limit: {}MB", mb(memory_limit(max_server_memory_mb))),
        format!("BufferCount:                {}", t.buffer_count),
        "Sets Of Buffers:            1".into(),
        format!("MaxTransferSize:            {} KB", t.max_transfer >> 10),
        format!("Min MaxTransferSize:        {} KB", MIN_TRANSFER >> 10),
        format!(
            "Total buffer space:         {} MB",
            mb(t.buffer_bytes()).max(1)
        ),
        "Tabular data device count:  1".into(),
        "Fulltext data device count: 0".into(),
        "Filestream device count:    0".into(),
        "TXF device count:           0".into(),
        "Filesystem i/o alignment:   4096".into(),
        format!("Media Buffer count:         {}", t.buffer_count),
        format!("Media Buffer size:          {} KB", t.max_transfer >> 10),
    ]
}

/// RESTORE LABELONLY's columns, as SQL Server's.
pub(super) fn label_columns() -> Vec<(String, SqlType)> {
    use SqlType::*;
    [
        ("MediaName", NVarChar(128)),
        ("MediaSetId", UniqueIdentifier),
        ("FamilyCount", Int),
        ("FamilySequenceNumber", Int),
        ("MediaFamilyId", UniqueIdentifier),
        ("MediaSequenceNumber", Int),
        ("MediaLabelPresent", TinyInt),
        ("MediaDescription", NVarChar(255)),
        ("SoftwareName", NVarChar(128)),
        ("SoftwareVendorId", Int),
        ("MediaDate", DateTime),
        ("Mirror_Count", Int),
        ("IsCompressed", Bit),
    ]
    .into_iter()
    .map(|(n, t)| (n.to_string(), t))
    .collect()
}

/// The one row of RESTORE LABELONLY: a file is one media family of one media set, whose
/// family id is the media set's id; IsCompressed when a set on it is.
pub(super) fn label_row(m: &MediaHeader, sets: &[SetInfo]) -> Vec<Value> {
    let text = |s: &str| match s.is_empty() {
        true => Value::Null,
        false => Value::Text(s.to_string()),
    };
    vec![
        text(&m.media_name),
        Value::Guid(m.media_guid),
        Value::Int(1),
        Value::Int(1),
        Value::Guid(m.media_guid),
        Value::Int(1),
        Value::TinyInt(0),
        text(&m.media_description),
        Value::Text("extentdb".into()),
        Value::Int(4608),
        Value::DateTime(ticks_from_unix_us(m.created_us)),
        Value::Int(1),
        Value::Bit(sets.iter().any(|s| s.header.flags & FLAG_COMPRESSED != 0)),
    ]
}

/// msdb.dbo.backupmediafamily.physical_block_size: BLOCKSIZE when given, else the 4,096
/// bytes every structure is aligned to.
pub(super) fn physical_block_size(m: &MediaHeader) -> i32 {
    match m.block_size {
        0 => 4096,
        n => n as i32,
    }
}
