//! The file-system procedures maintenance scripts call (Ola Hallengren's DatabaseBackup
//! makes its directories with xp_create_subdir and cleans old backups with xp_delete_file,
//! after sys.dm_os_file_exists), confined to the instance's backup roots.
//!
//! Invariants:
//! 1. No path outside the backup roots is created, deleted or reported on: a path is
//!    resolved by its deepest existing ancestor (canonical, so no symbolic link leads out)
//!    and refused unless that ancestor is inside a backup root; `..` is refused outright.
//!    Outside, sys.dm_os_file_exists answers as SQL Server does for a path its service
//!    account may not see (all zeros); the procedures fail with error 5.
//! 2. xp_delete_file deletes only backup files: files whose first 4 KB are a backup media
//!    header, whose newest set finished before the date, with the extension asked for.
//!
//! sys.dm_os_file_exists needs VIEW SERVER STATE; the procedures need sysadmin, as on SQL
//! Server.

use std::path::{Component, Path, PathBuf};

use super::views::Rowset;
use super::Session;
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value};

type Errors = Vec<SqlError>;

/// SQL Server's 22048-style failure of an extended procedure ("xp_x() returned error n").
fn xp_error(proc: &str, code: i32, text: &str) -> SqlError {
    let mut e = msg(22048, &[&proc, &code, &text]);
    e.procedure = Some(proc.to_string());
    e
}

impl Session {
    /// `path` inside a backup root (invariant 1), or None.
    fn confined(&self, path: &str) -> Option<PathBuf> {
        let roots = &self.engine.instance.config.backup_roots;
        let raw = Path::new(path.trim());
        if raw.components().any(|c| c == Component::ParentDir) || path.trim().is_empty() {
            return None;
        }
        let joined = match raw.is_absolute() {
            true => raw.to_path_buf(),
            false => roots.first()?.join(raw),
        };
        let mut existing = joined.as_path();
        let mut rest = Vec::new();
        while !existing.exists() {
            rest.push(existing.file_name()?.to_os_string());
            existing = existing.parent()?;
        }
        let base = existing.canonicalize().ok()?;
        let inside = roots
            .iter()
            .filter_map(|r| r.canonicalize().ok())
            .any(|r| base.starts_with(r));
        inside.then(|| rest.iter().rev().fold(base, |p, c| p.join(c)))
    }

    /// sys.dm_os_file_exists(path): file_exists, file_is_a_directory,
    /// parent_directory_exists.
    pub(super) fn file_exists_rowset(
        &mut self,
        args: &[crate::ast::Expr],
    ) -> Result<Rowset, Errors> {
        self.view_server_state_scope("sys.dm_os_file_exists")?;
        let [arg] = args else {
            return Err(vec![msg(216, &[&"dm_os_file_exists"])]);
        };
        let v = self.eval(arg, None).map_err(|e| vec![e])?;
        let row = match (!v.is_null()).then(|| super::eval::to_text(&v)) {
            Some(p) => existence(self.confined(&p).as_deref()),
            None => [false; 3],
        };
        Ok(Rowset {
            columns: [
                "file_exists",
                "file_is_a_directory",
                "parent_directory_exists",
            ]
            .iter()
            .map(|c| (c.to_string(), SqlType::Bit))
            .collect(),
            rows: vec![row.iter().map(|&b| Value::Bit(b)).collect()],
        })
    }

    /// xp_fileexist 'path': the same three facts under SQL Server's column names.
    pub(super) fn xp_fileexist(&mut self, args: &[Value]) -> Result<Rowset, Errors> {
        self.require_sysadmin_for("xp_fileexist")?;
        let path = args
            .first()
            .filter(|v| !v.is_null())
            .map(super::eval::to_text);
        let row = existence(path.and_then(|p| self.confined(&p)).as_deref());
        Ok(Rowset {
            columns: [
                "File Exists",
                "File is a Directory",
                "Parent Directory Exists",
            ]
            .iter()
            .map(|c| (c.to_string(), SqlType::Int))
            .collect(),
            rows: vec![row.iter().map(|&b| Value::Int(b as i32)).collect()],
        })
    }

    /// xp_create_subdir 'path': the directory and its parents, inside a backup root.
    /// Returns the procedure's status (0).
    pub(super) fn xp_create_subdir(&mut self, args: &[Value]) -> Result<i32, Errors> {
        self.require_sysadmin_for("xp_create_subdir")?;
        let path = args
            .first()
            .filter(|v| !v.is_null())
            .map(super::eval::to_text);
        let Some(dir) = path.and_then(|p| self.confined(&p)) else {
            return Err(vec![xp_error("xp_create_subdir", 5, "Access is denied.")]);
        };
        std::fs::create_dir_all(&dir).map_err(|e| {
            let text = extentdb_storage::backup::os_error_text(&e);
            vec![xp_error(
                "xp_create_subdir",
                e.raw_os_error().unwrap_or(0),
                &text,
            )]
        })?;
        Ok(0)
    }

    /// xp_delete_file 0, 'dir', 'extension', 'date' [, 1 for subdirectories too]: the
    /// backup files there that finished before the date (invariant 2). Type 1 (report
    /// files) is not built.
    pub(super) fn xp_delete_file(&mut self, args: &[Value]) -> Result<i32, Errors> {
        self.require_sysadmin_for("xp_delete_file")?;
        let text = |i: usize| {
            args.get(i)
                .filter(|v| !v.is_null())
                .map(super::eval::to_text)
        };
        if text(0).as_deref().map(str::trim) != Some("0") {
            return Err(vec![super::lower::not_yet(
                "xp_delete_file of report files (type 1)",
            )]);
        }
        let Some(dir) = text(1).and_then(|p| self.confined(&p)) else {
            return Err(vec![xp_error("xp_delete_file", 5, "Access is denied.")]);
        };
        let extension = text(2).unwrap_or_default();
        let extension = extension.trim_start_matches('.').to_string();
        let before = match args.get(3) {
            Some(v) if !v.is_null() => {
                let d = crate::convert::convert(v, SqlType::DateTime, None).map_err(|e| vec![e])?;
                match d {
                    Value::DateTime(t) => super::views::unix_us_from_ticks(t),
                    _ => return Err(vec![msg(241, &[])]),
                }
            }
            _ => return Err(vec![msg(201, &[&"xp_delete_file", &"@date"])]),
        };
        let deep = text(4).is_some_and(|s| s.trim() == "1");
        delete_older(&dir, &extension, before, deep)
            .map_err(|e| vec![xp_error("xp_delete_file", 0, &e.to_string())])?;
        Ok(0)
    }

    fn require_sysadmin_for(&self, proc: &str) -> Result<(), Errors> {
        match self.is_sysadmin() {
            true => Ok(()),
            false => Err(vec![msg(
                229,
                &[&"EXECUTE", &proc, &"mssqlsystemresource", &"sys"],
            )]),
        }
    }
}

/// (exists as a file, is a directory, parent directory exists) of a confined path; all
/// false for None (invariant 1).
fn existence(path: Option<&Path>) -> [bool; 3] {
    let Some(p) = path else {
        return [false; 3];
    };
    let meta = std::fs::metadata(p).ok();
    [
        meta.as_ref().is_some_and(|m| m.is_file()),
        meta.as_ref().is_some_and(|m| m.is_dir()),
        p.parent().is_some_and(|d| d.is_dir()),
    ]
}

/// Deletes the backup files in `dir` (and below, if `deep`) with `extension` (any when
/// empty) whose newest set finished before `before_us` (µs since the Unix epoch).
fn delete_older(dir: &Path, extension: &str, before_us: i64, deep: bool) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() && deep {
            delete_older(&path, extension, before_us, false)?;
            continue;
        }
        let ext_ok = extension.is_empty()
            || path
                .extension()
                .is_some_and(|e| e.to_string_lossy().eq_ignore_ascii_case(extension));
        if !kind.is_file() || !ext_ok {
            continue;
        }
        // Only what reads as a backup, with its sets' finish times (invariant 2).
        let Ok((media, sets)) = extentdb_storage::backup::read_backup_sets(&path) else {
            continue;
        };
        let newest = sets
            .iter()
            .map(|s| s.trailer.finished_us)
            .max()
            .unwrap_or(media.created_us);
        if newest < before_us {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}
