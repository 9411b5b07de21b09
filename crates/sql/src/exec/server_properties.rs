//! What the server says it is: @@VERSION, SERVERPROPERTY, and the session globals tools
//! read at connect (@@LANGUAGE, @@OPTIONS, @@SERVICENAME, @@MICROSOFTVERSION,
//! @@MAX_PRECISION, @@DATEFIRST, @@LANGID).
//!
//! extentdb stores databases as SQL Server 2022 does, so it answers as SQL Server 2022
//! RTM (16.0.1000.6) where tools parse the version: @@VERSION begins as SQL Server's does
//! (`Microsoft SQL Server 2022 (RTM) - 16.0.1000.6 (X64)`, the form SQLAlchemy's mssql
//! dialect reads its version from, `Microsoft .*? - (\d+)\.(\d+)\.(\d+)\.(\d+)`) and its
//! next line names extentdb and its own version. The edition is Standard (EngineEdition
//! 2): tools choose features by edition (Ola Hallengren's IndexOptimize rebuilds ONLINE
//! only on EngineEdition 3, 5 or 8, and its DatabaseBackup compresses on Standard's
//! EditionID), and extentdb has Standard's feature set, not Enterprise's (no online index
//! operations, no partitioning); what it lacks of either is refused by name (40517).
//!
//! Invariants:
//! 1. Every value describes this engine as it behaves: @@OPTIONS has a bit set exactly
//!    for the options that are ON for the session, the fixed ones (set_options.rs) as
//!    the engine behaves; @@LANGUAGE and @@DATEFIRST are the only values SET accepts.
//! 2. A property SQL Server does not know gives NULL, as in SQL Server; so does one whose
//!    feature does not exist here (InstanceName of a default instance, FilestreamShareName).

use extentdb_format::boot::DATABASE_VERSION;
use extentdb_storage::instance::VERSION;

use super::eval::hostname;
use super::lower::SERVER_COLLATION;
use super::Session;
use crate::types::Value;

/// SQL Server 2022 RTM's version, major.minor.build.revision.
pub(super) const PRODUCT_VERSION: (u8, u8, u16, u16) = (16, 0, 1000, 6);

/// SERVERPROPERTY('EngineEdition') of Standard.
const ENGINE_EDITION_STANDARD: i32 = 2;

/// SERVERPROPERTY('EditionID') of Standard Edition.
const EDITION_ID_STANDARD: i64 = -1_534_726_760;

/// @@OPTIONS bits (SQL Server's "user options" configuration).
mod bit {
    pub const IMPLICIT_TRANSACTIONS: i32 = 2;
    pub const CURSOR_CLOSE_ON_COMMIT: i32 = 4;
    pub const ANSI_WARNINGS: i32 = 8;
    pub const ANSI_PADDING: i32 = 16;
    pub const ANSI_NULLS: i32 = 32;
    pub const ARITHABORT: i32 = 64;
    pub const QUOTED_IDENTIFIER: i32 = 256;
    pub const NOCOUNT: i32 = 512;
    pub const ANSI_NULL_DFLT_ON: i32 = 1024;
    pub const CONCAT_NULL_YIELDS_NULL: i32 = 4096;
    pub const XACT_ABORT: i32 = 16384;
}

fn product_version() -> String {
    let (a, b, c, d) = PRODUCT_VERSION;
    format!("{a}.{b}.{c}.{d}")
}

/// @@VERSION.
pub(super) fn version_text() -> String {
    format!(
        "Microsoft SQL Server 2022 (RTM) - {} (X64) \n\t{VERSION}: storage-compatible with \
         Microsoft SQL Server 2022, database version {DATABASE_VERSION}\n\tStandard Edition \
         (64-bit) on Linux",
        product_version()
    )
}

impl Session {
    /// The globals of this module; None for other names.
    pub(super) fn server_global(&self, upper: &str) -> Option<Value> {
        let (major, minor, build, _) = PRODUCT_VERSION;
        Some(match upper {
            "@@VERSION" => Value::Text(version_text()),
            "@@LANGUAGE" => Value::Text("us_english".into()),
            "@@LANGID" => Value::SmallInt(0),
            "@@DATEFIRST" => Value::TinyInt(7),
            "@@MAX_PRECISION" => Value::TinyInt(38),
            "@@SERVICENAME" => Value::Text("MSSQLSERVER".into()),
            "@@MICROSOFTVERSION" => {
                Value::Int((i32::from(major) << 24) | (i32::from(minor) << 16) | i32::from(build))
            }
            "@@OPTIONS" => Value::Int(self.user_options()),
            _ => return None,
        })
    }

    /// @@OPTIONS: the session's options that are ON (invariant 1). ARITHABORT counts as
    /// ON: with ANSI_WARNINGS always ON, overflow and divide by zero end the statement
    /// whatever ARITHABORT says (set_options.rs, `Switch::Either`).
    fn user_options(&self) -> i32 {
        let fixed_on = bit::ANSI_WARNINGS
            | bit::ANSI_PADDING
            | bit::ANSI_NULLS
            | bit::ARITHABORT
            | bit::QUOTED_IDENTIFIER
            | bit::ANSI_NULL_DFLT_ON
            | bit::CONCAT_NULL_YIELDS_NULL;
        let built = [
            (self.implicit_transactions, bit::IMPLICIT_TRANSACTIONS),
            (
                self.options.cursor_close_on_commit,
                bit::CURSOR_CLOSE_ON_COMMIT,
            ),
            (self.nocount, bit::NOCOUNT),
            (self.options.xact_abort, bit::XACT_ABORT),
        ];
        built
            .iter()
            .filter(|(on, _)| *on)
            .fold(fixed_on, |acc, (_, b)| acc | b)
    }

    /// SERVERPROPERTY(name), case-insensitive; NULL for a name it does not know
    /// (invariant 2).
    pub(super) fn server_property(&self, name: &str) -> Value {
        let (major, minor, build, _) = PRODUCT_VERSION;
        let config = &self.engine.instance.config;
        let dir = |p: Option<&std::path::PathBuf>| {
            p.map_or(Value::Null, |p| Value::Text(format!("{}/", p.display())))
        };
        let text = |s: &str| Value::Text(s.to_string());
        match name.to_ascii_lowercase().as_str() {
            "productversion" => Value::Text(product_version()),
            "productmajorversion" => Value::Text(major.to_string()),
            "productminorversion" => Value::Text(minor.to_string()),
            "productbuild" => Value::Text(build.to_string()),
            "productbuildtype" | "productupdatelevel" | "productupdatereference" => Value::Null,
            "productlevel" => text("RTM"),
            "resourceversion" => Value::Text(format!("{major}.{minor:02}.{build}")),
            "edition" => text("Standard Edition (64-bit)"),
            "editionid" => Value::BigInt(EDITION_ID_STANDARD),
            "engineedition" => Value::Int(ENGINE_EDITION_STANDARD),
            "servername" | "machinename" | "computernamephysicalnetbios" => Value::Text(hostname()),
            "instancename" => Value::Null,
            "collation" => text(SERVER_COLLATION),
            "processid" => Value::Int(std::process::id() as i32),
            "instancedefaultdatapath" | "instancedefaultlogpath" => dir(config.data_roots.first()),
            "instancedefaultbackuppath" => dir(config.backup_roots.first()),
            "isclustered"
            | "ishadrenabled"
            | "isfulltextinstalled"
            | "isintegratedsecurityonly"
            | "issingleuser"
            | "ispolybaseinstalled"
            | "isxtpsupported"
            | "isadvancedanalyticsinstalled"
            | "isexternalauthenticationonly"
            | "isbigdatacluster"
            | "islocaldb" => Value::Int(0),
            "buildclrversion" | "filestreamsharename" | "hadrmanagerstatus" => Value::Null,
            "filestreamconfiguredlevel" | "filestreameffectivelevel" => Value::Int(0),
            "lcid" => Value::Int(1033),
            "sqlcharset" => Value::TinyInt(1),
            "sqlcharsetname" => text("iso_1"),
            "sqlsortorder" => Value::TinyInt(52),
            "sqlsortordername" => text("nocase_iso"),
            _ => Value::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// @@VERSION's first line is what SQLAlchemy's mssql dialect parses
    /// (`Microsoft .*? - (\d+)\.(\d+)\.(\d+)\.(\d+)`), and its second names extentdb.
    #[test]
    fn version_text_parses_as_sql_servers() {
        let v = version_text();
        let rest = v
            .strip_prefix("Microsoft ")
            .expect("starts as SQL Server's");
        let (_, after) = rest.split_once(" - ").expect("the version after ' - '");
        let numbers: Vec<u32> = after
            .split(|c: char| !c.is_ascii_digit() && c != '.')
            .next()
            .unwrap()
            .split('.')
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(numbers, [16, 0, 1000, 6]);
        assert!(v.lines().nth(1).unwrap().contains(VERSION), "{v}");
    }
}
