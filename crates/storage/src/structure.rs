//! Changes of a database's structure, as the SQL layer asks for them: one method of the
//! handle (`SharedDatabase`) per statement-level change, each holding the database
//! exclusively inside storage for the whole change (shared.rs invariant 1), so the SQL
//! layer never chooses a lock mode.
//!
//! Invariants:
//! 1. One call, one exclusive hold: what a statement changed in one hold before this
//!    boundary existed (several catalog saves, a growth and its catalog entry) is still
//!    made in one hold, and a failure leaves what the `Database` method it calls leaves.
//! 2. A change the SQL layer validated against what it read sharing the database carries
//!    the catalog state it read (`Database::catalog_version`); it is made only if the
//!    catalog is still in that state, else `StorageError::CatalogChanged` changes nothing
//!    and the caller validates again. Validation and change thus see one state, as when
//!    both ran in one hold, while SQL Server's messages stay the SQL layer's.
//! 3. Every change is described by data (names, ids, a `FileChange`, a `PrincipalChange`):
//!    no caller's code runs holding the database.
//! 4. Long operations (REBALANCE, SHRINKFILE EMPTYFILE's waits) are steps: each call holds
//!    the database for one step and lets it go, so the caller reports progress and sees
//!    attention and KILL between steps.
//!
//! Not here: name resolution, permission checks and the messages (crates/sql); row
//! operations (`SharedDatabase::run`, access.rs).

use extentdb_format::catalog::{FilegroupEntry, LockEscalation, RecoveryModel, TableEntry};
use extentdb_format::log_record::XactId;
use extentdb_format::principals::{
    PermissionClass, PermissionEntry, PermissionState, PrincipalEntry, PrincipalKind, DBO,
};
use extentdb_io::FileSystem;

use crate::database::OpContext;
use crate::index::{is_disabled, BuildSource};
use crate::log_growth::GrowthEnv;
use crate::shared::{DbGuard, SharedDatabase};
use crate::{NewFile, StorageError};

/// MODIFY FILE's change of one file, validated by the caller (invariant 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    pub file_id: u16,
    /// The file grows to this many pages first.
    pub grow_to_pages: Option<u32>,
    /// Then its catalog entry changes (MAXSIZE, FILEGROWTH, NEWNAME).
    pub entry: Option<FileEntryChange>,
}

/// A file's catalog properties after MODIFY FILE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntryChange {
    pub max_size_pages: i32,
    /// (growth, is_percent_growth), or unchanged.
    pub growth: Option<(u32, bool)>,
    pub new_name: Option<String>,
}

/// MODIFY FILEGROUP's change of one filegroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilegroupChange {
    /// DEFAULT: the one filegroup new tables go to.
    MakeDefault,
    /// AUTOGROW_ALL_FILES (true) or AUTOGROW_SINGLE_FILE (false).
    AutogrowAllFiles(bool),
    ReadOnly(bool),
    Rename(String),
}

/// SHRINKFILE's aim for a data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShrinkTarget {
    /// Every page moved to the filegroup's other files (`Database::empty_file`).
    EmptyFile,
    /// The free space at the end given back, down to this many pages.
    Pages(u32),
}

/// A data file's size and used pages, as SHRINKFILE's result set reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileUsage {
    pub size_pages: u32,
    pub used_pages: u32,
}

/// A change of a database's principals or permissions (CREATE / DROP USER, ALTER ROLE,
/// GRANT / DENY / REVOKE), validated by the caller (invariant 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrincipalChange {
    /// A SQL user mapped to `sid`, granted CONNECT as SQL Server's CREATE USER does.
    AddUser { name: String, sid: Vec<u8> },
    /// A principal with its role memberships and the permissions granted to it.
    DropPrincipal(u32),
    /// `member` added to or dropped from fixed database role `role`.
    RoleMember { role: u32, member: u32, add: bool },
    /// Each permission's GRANT or DENY replaced (`state` None: revoked).
    Permissions(Vec<PermissionChange>),
}

/// One permission of one grantee on one securable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionChange {
    pub class: PermissionClass,
    pub major_id: u32,
    pub permission: String,
    pub grantee: u32,
    pub state: Option<PermissionState>,
}

impl SharedDatabase {
    /// Holds the database exclusively for a change by session environment `env` (how
    /// growths and the log's own growth initialize and report).
    fn hold_for(&self, env: &GrowthEnv) -> DbGuard<'_> {
        let mut g = self.lock().unwrap();
        g.set_growth_env(env.clone());
        g
    }

    /// Holds the database exclusively if its catalog is still `catalog_version`
    /// (invariant 2).
    pub(crate) fn hold_at(&self, catalog_version: u64) -> Result<DbGuard<'_>, StorageError> {
        let g = self.lock().unwrap();
        if g.catalog_version() != catalog_version {
            return Err(StorageError::CatalogChanged);
        }
        Ok(g)
    }

    /// After CREATE DATABASE: the first proportional fill calculation (trace flag 1165)
    /// and, for a creator other than sa, dbo mapped to the creator's login `owner_sid`.
    pub fn complete_creation(
        &self,
        env: &GrowthEnv,
        owner_sid: Option<Vec<u8>>,
    ) -> Result<(), StorageError> {
        let mut g = self.hold_for(env);
        g.recalculate_proportional_fill()?;
        let Some(sid) = owner_sid else {
            return Ok(());
        };
        g.change_catalog(|c| {
            c.security.principals.push(PrincipalEntry {
                principal_id: DBO,
                name: "dbo".into(),
                kind: PrincipalKind::SqlUser,
                sid,
            });
            Ok(())
        })
    }

    /// ADD FILE / ADD LOG FILE: every file created or none (`Database::add_files`).
    pub fn add_files(
        &self,
        env: &GrowthEnv,
        ctx: &OpContext<'_>,
        files: &[NewFile],
    ) -> Result<(), StorageError> {
        self.hold_for(env).add_files(ctx, files)
    }

    /// REMOVE FILE `name` (any case): the file's own name, once removed.
    pub fn remove_file(
        &self,
        env: &GrowthEnv,
        fs: &dyn FileSystem,
        name: &str,
    ) -> Result<String, StorageError> {
        let mut g = self.hold_for(env);
        let real = g
            .file_by_name(name)
            .map(|f| f.name.clone())
            .ok_or_else(|| StorageError::FileNotFound(name.to_string()))?;
        g.remove_file(fs, &real)?;
        Ok(real)
    }

    /// MODIFY FILE: the growth, then the catalog entry, in one hold.
    pub fn modify_file(
        &self,
        env: &GrowthEnv,
        ctx: &OpContext<'_>,
        catalog_version: u64,
        change: FileChange,
    ) -> Result<(), StorageError> {
        let mut g = self.hold_at(catalog_version)?;
        g.set_growth_env(env.clone());
        if let Some(pages) = change.grow_to_pages {
            g.grow_file(ctx, change.file_id, pages)?;
        }
        let Some(e) = change.entry else {
            return Ok(());
        };
        g.update_file_entry(change.file_id, |f| {
            f.max_size_pages = e.max_size_pages;
            if let Some((growth, percent)) = e.growth {
                (f.growth, f.is_percent_growth) = (growth, percent);
            }
            if let Some(n) = e.new_name {
                f.name = n;
            }
        })
    }

    /// ADD FILEGROUP `name`: the next data space id (FilegroupExists if the name is taken).
    pub fn add_filegroup(&self, env: &GrowthEnv, name: &str) -> Result<(), StorageError> {
        let mut g = self.hold_for(env);
        if g.filegroup_by_name(name).is_some() {
            return Err(StorageError::FilegroupExists(name.to_string()));
        }
        g.change_catalog(|c| {
            let id = c
                .filegroups
                .iter()
                .map(|x| x.data_space_id)
                .max()
                .unwrap_or(1)
                + 1;
            c.filegroups.push(FilegroupEntry {
                data_space_id: id,
                name: name.to_string(),
                is_default: false,
                is_autogrow_all_files: false,
                is_read_only: false,
            });
            Ok(())
        })
    }

    /// REMOVE FILEGROUP `name`: an empty filegroup other than PRIMARY; PRIMARY becomes
    /// the default if it was.
    pub fn remove_filegroup(&self, env: &GrowthEnv, name: &str) -> Result<(), StorageError> {
        let mut g = self.hold_for(env);
        let fg = g
            .filegroup_by_name(name)
            .cloned()
            .ok_or_else(|| StorageError::FilegroupNotFound(name.to_string()))?;
        if fg.data_space_id == 1 {
            return Err(StorageError::CannotRemovePrimaryFilegroup);
        }
        let files = &g.catalog.files;
        if files.iter().any(|f| f.data_space_id == fg.data_space_id) {
            return Err(StorageError::FilegroupNotEmpty(fg.name));
        }
        g.change_catalog(|c| {
            c.filegroups.retain(|x| x.data_space_id != fg.data_space_id);
            if fg.is_default {
                c.filegroups[0].is_default = true;
            }
            Ok(())
        })
    }

    /// MODIFY FILEGROUP of data space `data_space_id`.
    pub fn modify_filegroup(
        &self,
        env: &GrowthEnv,
        catalog_version: u64,
        data_space_id: u16,
        change: &FilegroupChange,
    ) -> Result<(), StorageError> {
        let mut g = self.hold_at(catalog_version)?;
        g.set_growth_env(env.clone());
        g.change_catalog(|c| {
            for x in c.filegroups.iter_mut() {
                let this = x.data_space_id == data_space_id;
                match change {
                    FilegroupChange::MakeDefault => x.is_default = this,
                    FilegroupChange::AutogrowAllFiles(all) if this => {
                        x.is_autogrow_all_files = *all
                    }
                    FilegroupChange::ReadOnly(r) if this => x.is_read_only = *r,
                    FilegroupChange::Rename(n) if this => x.name = n.clone(),
                    _ => {}
                }
            }
            Ok(())
        })
    }

    /// SET RECOVERY.
    pub fn set_recovery_model(
        &self,
        env: &GrowthEnv,
        model: RecoveryModel,
    ) -> Result<(), StorageError> {
        self.hold_for(env).set_recovery_model(model)
    }

    /// One step of REBALANCE of data space `ds` (`Database::rebalance_step`): the database
    /// is let go before this returns (invariant 4).
    pub fn rebalance_step(&self, env: &GrowthEnv, ds: u16) -> Result<Option<u64>, StorageError> {
        self.hold_for(env).rebalance_step(ds)
    }

    /// One attempt at SHRINKFILE of data file `file_id`, with the file's size and used pages
    /// after it. EMPTYFILE fails with `ActiveTransactions` while an open transaction
    /// changed a page it must move: the database is let go, and the caller tries again
    /// (invariant 4), with `catalog_version` None as the file was resolved already.
    pub fn shrink_file(
        &self,
        catalog_version: Option<u64>,
        file_id: u16,
        target: ShrinkTarget,
    ) -> Result<FileUsage, StorageError> {
        let mut g = match catalog_version {
            Some(v) => self.hold_at(v)?,
            None => self.lock().unwrap(),
        };
        match target {
            ShrinkTarget::EmptyFile => g.empty_file(file_id).map(drop)?,
            ShrinkTarget::Pages(p) => g.shrink_file(file_id, p).map(drop)?,
        }
        let size_pages = g
            .catalog
            .files
            .iter()
            .find(|f| f.file_id == file_id)
            .map_or(0, |f| f.size_pages);
        let used_pages = g.data_files.get(&file_id).map_or(0, |df| {
            df.usable_extents()
                .saturating_sub(df.free_extents().unwrap_or(0))
                * 8
        });
        Ok(FileUsage {
            size_pages,
            used_pages,
        })
    }

    /// CREATE TABLE: `entry` placed as the caller resolved it (its filegroup) at catalog
    /// state `catalog_version`; the new table's object id. Inside transaction `xact`, its
    /// rollback takes the table back (ddl.rs).
    pub fn create_table(
        &self,
        catalog_version: u64,
        entry: TableEntry,
        xact: Option<XactId>,
    ) -> Result<u32, StorageError> {
        self.hold_at(catalog_version)?.create_table_in(entry, xact)
    }

    /// DROP TABLE of `object_id`; `TableNotFound` if it is gone. The caller holds the
    /// table's Sch-M lock: outside a transaction no open transaction changed it (xact.rs
    /// invariant 5); inside `xact` the drop waits for its commit (ddl.rs).
    pub fn drop_table(&self, object_id: u32, xact: Option<XactId>) -> Result<(), StorageError> {
        self.hold_table(object_id)?.drop_table_in(object_id, xact)
    }

    /// CREATE INDEX `def`, under its table's Sch-M lock (index.rs invariant 2): the entry
    /// made holding the database, filled from the table's rows sharing it with other
    /// sessions (`env`: how the growths it causes initialize and report; `cancelled` asked
    /// between scan chunks, holding nothing), then committed or rolled back holding it;
    /// the index's entry's object id. The one exception to invariant 1: the fill is many
    /// holds, shared, so a long build does not stop the database's other tables.
    pub fn create_index(
        &self,
        def: &crate::index::IndexDef,
        env: &GrowthEnv,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<u32, StorageError> {
        let base = def.table_object_id;
        let (x, id) = self.hold_table(base)?.begin_index_build(def)?;
        let source = (base, BuildSource::Table, id);
        let filled = self.fill_index_sharing((env, x), source, cancelled);
        self.hold_for(env).end_build(x, filled.map(|()| id))
    }

    /// ALTER INDEX ... REBUILD of index entry `index_entry_id` of table `object_id`, under
    /// the table's Sch-M lock (index.rs invariant 5): the new entry made, filled from the
    /// old sharing the database, then the old dropped and the rebuild committed holding it,
    /// as `create_index` builds; the new entry's object id.
    pub fn rebuild_index(
        &self,
        (object_id, index_entry_id): (u32, u32),
        env: &GrowthEnv,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<u32, StorageError> {
        let ((x, new), from) = {
            let mut g = self.hold_index(object_id, index_entry_id)?;
            let from = match g.table_by_id(index_entry_id).is_some_and(is_disabled) {
                true => BuildSource::Table,
                false => BuildSource::Index(index_entry_id),
            };
            (g.begin_index_rebuild(index_entry_id)?, from)
        };
        let source = (object_id, from, new);
        let filled = self.fill_index_sharing((env, x), source, cancelled);
        let mut g = self.hold_for(env);
        let built = filled.and_then(|()| g.drop_table_in(index_entry_id, Some(x)));
        g.end_build(x, built.map(|()| new))
    }

    /// ALTER INDEX ... REBUILD of clustered table `object_id`'s index, under the table's
    /// Sch-M lock (index.rs invariant 6): a new tree made holding the database, filled from
    /// the table's rows in key order sharing it, then committed (the trees exchanged as the
    /// commit settles) or rolled back holding it, as `create_index` builds.
    pub fn rebuild_clustered(
        &self,
        object_id: u32,
        env: &GrowthEnv,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<(), StorageError> {
        let (x, new) = self
            .hold_table(object_id)?
            .begin_clustered_rebuild(object_id)?;
        let source = (object_id, BuildSource::Index(object_id), new);
        let filled = self.fill_index_sharing((env, x), source, cancelled);
        self.hold_for(env)
            .end_build(x, filled.map(|()| new))
            .map(drop)
    }

    /// ALTER INDEX ... DISABLE of index entry `index_entry_id` of table `object_id`, under
    /// the table's Sch-M lock (index.rs invariant 7), with the FOREIGN KEYs `keys` ((child
    /// table, constraint) object ids) that reference through it (invariant 8).
    pub fn disable_index(
        &self,
        (object_id, index_entry_id): (u32, u32),
        keys: &[(u32, u32)],
    ) -> Result<(), StorageError> {
        self.hold_index(object_id, index_entry_id)?
            .disable_index(index_entry_id, keys)
    }

    /// ALTER INDEX ... DISABLE of clustered table `object_id`'s clustered index, under the
    /// table's Sch-M lock (index.rs invariant 10).
    pub fn disable_clustered(&self, object_id: u32) -> Result<(), StorageError> {
        self.hold_table(object_id)?.disable_clustered(object_id)
    }

    /// ALTER TABLE ... { CHECK | NOCHECK } CONSTRAINT on table `object_id`, under its Sch-M
    /// lock (storage's constraint.rs).
    pub fn set_constraint_states(
        &self,
        object_id: u32,
        states: &[crate::constraint::ConstraintState],
    ) -> Result<(), StorageError> {
        self.hold_table(object_id)?
            .set_constraint_states(object_id, states)
    }

    /// Held exclusively with index entry `index_entry_id` of table `object_id` still there
    /// (`TableNotFound` otherwise).
    fn hold_index(&self, object_id: u32, index_entry_id: u32) -> Result<DbGuard<'_>, StorageError> {
        let g = self.hold_table(object_id)?;
        let of = g
            .table_by_id(index_entry_id)
            .and_then(|t| t.index_of.as_ref())
            .map(|i| i.table_object_id);
        if of != Some(object_id) {
            return Err(StorageError::TableNotFound(index_entry_id));
        }
        Ok(g)
    }

    /// DROP INDEX `name` of table `object_id`, under the table's Sch-M lock.
    pub fn drop_index(&self, object_id: u32, name: &str) -> Result<(), StorageError> {
        self.hold_table(object_id)?.drop_index(object_id, name)
    }

    /// TRUNCATE TABLE of `object_id`, under its Sch-M lock as `drop_table`; refused while
    /// its clustered index is disabled (index.rs invariant 10).
    pub fn truncate_table(&self, object_id: u32) -> Result<(), StorageError> {
        let mut db = self.hold_table(object_id)?;
        db.table_for_rows(object_id)?;
        db.truncate_table(object_id)
    }

    /// ALTER TABLE ... SET (LOCK_ESCALATION), under the table's Sch-M lock.
    pub fn set_lock_escalation(
        &self,
        object_id: u32,
        value: LockEscalation,
    ) -> Result<(), StorageError> {
        self.hold_table(object_id)?
            .set_lock_escalation(object_id, value)
    }

    /// ALTER TABLE ... ADD CHECK (storage's constraint.rs): the new constraint's object id.
    pub fn add_check_constraint(
        &self,
        object_id: u32,
        check: extentdb_format::catalog::CheckConstraint,
    ) -> Result<u32, StorageError> {
        self.hold_table(object_id)?
            .add_check_constraint(object_id, check)
    }

    /// ALTER TABLE ... DROP CONSTRAINT of a CHECK constraint; false when it is not there.
    pub fn drop_check_constraint(
        &self,
        object_id: u32,
        constraint_id: u32,
    ) -> Result<bool, StorageError> {
        self.hold_table(object_id)?
            .drop_check_constraint(object_id, constraint_id)
    }

    /// ALTER TABLE ... ADD FOREIGN KEY (storage's constraint.rs): the new constraint's id.
    pub fn add_foreign_key(
        &self,
        object_id: u32,
        key: extentdb_format::catalog::ForeignKey,
    ) -> Result<u32, StorageError> {
        self.hold_table(object_id)?.add_foreign_key(object_id, key)
    }

    /// ALTER TABLE ... DROP CONSTRAINT of a FOREIGN KEY; false when it is not there.
    pub fn drop_foreign_key(
        &self,
        object_id: u32,
        constraint_id: u32,
    ) -> Result<bool, StorageError> {
        self.hold_table(object_id)?
            .drop_foreign_key(object_id, constraint_id)
    }

    /// CREATE STATISTICS (storage's statistics.rs) with its first build's data and the
    /// table's modification count when that build began: the new object's stats id.
    pub fn create_statistics(
        &self,
        object_id: u32,
        name: &str,
        columns: Vec<u16>,
        no_recompute: bool,
        data: (Option<extentdb_format::statistics::StatisticsData>, u64),
    ) -> Result<u16, StorageError> {
        self.hold_table(object_id)?
            .create_statistics(object_id, name, columns, no_recompute, data)
    }

    /// DROP STATISTICS of a user statistics object; false when it is not there.
    pub fn drop_statistics(&self, object_id: u32, stats_id: u16) -> Result<bool, StorageError> {
        self.hold_table(object_id)?
            .drop_statistics(object_id, stats_id)
    }

    /// A build of statistics `(object id, stats id)` over `columns` that began when the
    /// table's modification count was the second of `columns`, saved in one short hold
    /// after the build read the table sharing the database; false when the object went or
    /// changed meanwhile (statistics.rs invariants 3 and 4).
    pub fn save_statistics(
        &self,
        ids: (u32, u16),
        columns: (&[u16], u64),
        data: extentdb_format::statistics::StatisticsData,
        no_recompute: bool,
    ) -> Result<bool, StorageError> {
        let mut g = self.lock().unwrap();
        if g.table_by_id(ids.0).is_none() {
            return Ok(false);
        }
        g.save_statistics(ids, columns, data, no_recompute)
    }

    /// Held exclusively with table `object_id` still there (`TableNotFound` otherwise:
    /// dropped while its Sch-M lock was waited for).
    fn hold_table(&self, object_id: u32) -> Result<DbGuard<'_>, StorageError> {
        let g = self.lock().unwrap();
        if g.table_by_id(object_id).is_none() {
            return Err(StorageError::TableNotFound(object_id));
        }
        Ok(g)
    }

    /// A change of the database's principals or permissions at catalog state
    /// `catalog_version` (invariant 2).
    pub fn change_principals(
        &self,
        catalog_version: u64,
        change: PrincipalChange,
    ) -> Result<(), StorageError> {
        let mut g = self.hold_at(catalog_version)?;
        g.change_catalog(|c| {
            let sec = &mut c.security;
            match change {
                PrincipalChange::AddUser { name, sid } => {
                    let id = sec.next_principal_id();
                    sec.principals.push(PrincipalEntry {
                        principal_id: id,
                        name,
                        kind: PrincipalKind::SqlUser,
                        sid,
                    });
                    sec.permissions.push(PermissionEntry {
                        class: PermissionClass::Database,
                        major_id: 0,
                        permission: "CONNECT".into(),
                        state: PermissionState::Grant,
                        grantee: id,
                    });
                }
                PrincipalChange::DropPrincipal(id) => {
                    sec.principals.retain(|p| p.principal_id != id);
                    sec.role_members.retain(|&(r, m)| r != id && m != id);
                    sec.permissions.retain(|p| p.grantee != id);
                }
                PrincipalChange::RoleMember { role, member, add } => {
                    sec.role_members
                        .retain(|&(r, x)| !(r == role && x == member));
                    if add {
                        sec.role_members.push((role, member));
                    }
                }
                PrincipalChange::Permissions(changes) => {
                    for p in changes {
                        set_permission(&mut sec.permissions, p);
                    }
                }
            }
            Ok(())
        })
    }

    /// DBCC CHECKDB's and CHECKALLOC's view of the database as it is now
    /// (`Database::check_source`), taken holding it exclusively for that instant.
    pub fn check_source(&self) -> Result<crate::snapshot::CheckSource, StorageError> {
        self.lock().unwrap().check_source()
    }

    /// DBCC CHECKDB found nothing: its time kept (`Database::record_clean_check`).
    pub fn record_clean_check(&self, at_unix_us: i64) -> Result<(), StorageError> {
        self.lock().unwrap().record_clean_check(at_unix_us)
    }
}

/// Replaces any GRANT or DENY of the permission to its grantee on its securable by
/// `p.state` (none: revoked).
fn set_permission(perms: &mut Vec<PermissionEntry>, p: PermissionChange) {
    perms.retain(|x| {
        !(x.class == p.class
            && x.major_id == p.major_id
            && x.permission == p.permission
            && x.grantee == p.grantee)
    });
    if let Some(state) = p.state {
        perms.push(PermissionEntry {
            class: p.class,
            major_id: p.major_id,
            permission: p.permission,
            state,
            grantee: p.grantee,
        });
    }
}
