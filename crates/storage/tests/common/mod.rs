//! Helpers shared by the storage integration tests.
#![allow(dead_code)]

use std::path::Path;

use extentdb_format::catalog::RecoveryModel;
use extentdb_format::file_header::FileType;
use extentdb_io::FileSystem;
use extentdb_storage::database::OpContext;
use extentdb_storage::file_init::{InitLog, InitPolicy};
use extentdb_storage::{NewDatabase, NewFile};

/// An initialization log that drops every message.
pub struct Quiet;
impl InitLog for Quiet {
    fn log(&self, _: &str) {}
}

/// An operation context on `fs` with IFI on or off and no zeroing trace.
pub fn ctx<'a>(fs: &'a dyn FileSystem, instant: bool, log: &'a dyn InitLog) -> OpContext<'a> {
    OpContext {
        fs,
        policy: InitPolicy {
            instant,
            trace_zeroing: false,
        },
        log,
    }
}

/// A file in PRIMARY growing 1 MB, without a size limit.
pub fn file(name: &str, path: impl AsRef<Path>, t: FileType, size_pages: u32) -> NewFile {
    let path = path.as_ref().to_path_buf();
    NewFile {
        name: name.into(),
        physical_name: path,
        file_type: t,
        filegroup: "PRIMARY".into(),
        size_pages,
        max_size_pages: -1,
        growth: 128,
        is_percent_growth: false,
    }
}

/// A database `name` with a 5 MB data file and a 1 MB log in `root`.
pub fn spec(name: &str, root: &Path) -> NewDatabase {
    NewDatabase {
        name: name.into(),
        database_id: 5,
        recovery_model: RecoveryModel::Full,
        files: vec![
            file(
                &format!("{name}_data"),
                root.join(format!("{name}.mdf")),
                FileType::Rows,
                640,
            ),
            file(
                &format!("{name}_log"),
                root.join(format!("{name}_log.ldf")),
                FileType::Log,
                128,
            ),
        ],
        filegroups: vec![],
    }
}
