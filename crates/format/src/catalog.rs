//! The serialized catalog of a database: its filegroups, files and allocation units, and in
//! master the list of databases. See FORMAT.md, "Catalog".
//!
//! The catalog is encoded as one blob (little-endian fields, strings as u16 length + UTF-8)
//! and stored in a chain of `Catalog` pages in file 1, each holding a u16 payload length
//! at offset 96 and up to `CATALOG_PAGE_PAYLOAD` bytes from offset 98. The boot page names
//! the chain's first page, the blob's length and its CRC-32C.
//!
//! Invariants (checked by `check_invariants`):
//! 1. File ids are unique; file 1 is ROWS in filegroup 1 (PRIMARY); file 2 is LOG.
//! 2. Logical names are unique (case-insensitively); physical names are unique.
//! 3. Every ROWS file's filegroup exists; LOG files have data space 0.
//! 4. Exactly one filegroup is the default.
//! 5. Every string fits its field (`check_lengths`): names are sysname (128 characters),
//!    paths at most `MAX_PATH_CHARS`, a DEFAULT's text at most `MAX_DEFINITION_CHARS`, and
//!    counts fit their u16 fields. It is checked before a save writes anything, so input
//!    that does not fit is refused (Msg 103) instead of reaching `Writer::string`'s assert.
//! 6. In master's list of databases an entry is in one state: never both OFFLINE and
//!    RESTORING, and a failed restore only of a RESTORING one (`encode` asserts it; the
//!    state byte's low nibble can say only one). Its user access (MULTI_USER, SINGLE_USER,
//!    RESTRICTED_USER) is independent of the state and lives in the high nibble.
//! 7. A table keeps an identity value (`IdentityLast` other than `Unused`) only when it has
//!    an IDENTITY column.
//! 8. A table's pending-DDL mark (`PendingDdl`) says CREATE, DROP or both: a mark that says
//!    neither is damage.
//! 9. A CHECK constraint's column id is 0 (table-level) or one of its table's columns, and
//!    only a table (not an index entry) has CHECK constraints.
//! 10. A FOREIGN KEY constraint is kept on its referencing (child) table's entry, only a
//!     table has them, it pairs at least one column, each pair's child column is one of its
//!     table's and its parent column one of the referenced table's, and the referenced table
//!     is a table of the catalog (the child itself for a self-reference) while the child is
//!     not dropped (a child dropped by a transaction not yet settled may outlive its parent
//!     dropped by the same transaction, for as long as the settling takes).
//! 11. A heap's PRIMARY KEY (NONCLUSTERED) is enforced by the unique index entry of its
//!     table that bears the constraint's name (`TableEntry::enforces_primary_key_of`), and
//!     that index's key is the constraint's columns in order. Catalogs written before such
//!     indexes were made hold a heap's PRIMARY KEY without one; their DML checks its keys by
//!     reading the table.
//! 12. A clustered index rebuild's new tree (`PendingDdl::rebuilds`) is an entry its
//!     transaction created and did not drop, a clustered tree, not an index entry, with its
//!     table's key and number of columns; the table it names is a clustered table of the
//!     catalog, and no table has two such trees.
//! 13. A computed column (version 12) has no IDENTITY and no DEFAULT, and only a table's
//!     entry has one: an index entry's columns copy stored values, not definitions.
//! 14. Statistics objects (version 13) belong to tables of the catalog and cover their
//!     columns (`statistics::check`).
//! 15. Only a clustered table's own entry is marked disabled (`TableEntry::is_disabled`,
//!     version 14): never a heap, an index entry or a clustered rebuild's new tree.
//! 16. Modules (version 15, stored procedures) take object ids no table, index or
//!     constraint has, below the next object id, and names no other module and no dbo
//!     table has; each definition fits `module::MAX_DEFINITION_BYTES` (`module::check`).

use crate::codec::{Reader, Writer};
use crate::file_header::FileType;
use crate::{
    corrupt, FormatError, Page, PageHeader, PageId, PageType, PAGE_HEADER_SIZE, PAGE_SIZE,
};

/// Version 2 added tables (`next object id` and the table list at the end of the blob);
/// version 1 blobs decode with no tables. Version 4 added the database's principals and
/// permissions after the tables (`principals.rs`); older blobs decode with none. Version 5
/// added state 3 (OFFLINE) to master's list of databases and the user access in the state
/// byte's high nibble; older blobs hold only states 0 to 2, all MULTI_USER. Version 6 added
/// each table's identity value (`IdentityLast`) after its columns; older blobs decode with
/// `IdentityLast::Unknown` for a table with an IDENTITY column. Version 10 added each
/// table's CHECK constraints after its index tag; older blobs decode with none. Version 11
/// added each table's FOREIGN KEY constraints after its CHECK constraints; older blobs
/// decode with none. Version 12 added each column's computed-column definition
/// (`ColumnEntry::computed`) after its DEFAULT text; older blobs decode with no computed
/// columns. Version 13 added the statistics objects (`statistics.rs`) after the
/// principals; older blobs decode with none. Version 14 added each table's flags byte
/// after its FOREIGN KEY constraints (`TableEntry::is_disabled`); older blobs decode with
/// every table enabled. Version 15 added the modules (`module.rs`, stored procedures with
/// their definitions and parameters) after the statistics; older blobs decode with none.
pub const CATALOG_VERSION: u16 = 15;
/// Payload bytes one catalog page holds.
pub const CATALOG_PAGE_PAYLOAD: usize = PAGE_SIZE - PAGE_HEADER_SIZE - 2;
/// The allocation unit id that owns catalog pages.
pub const CATALOG_ALLOCATION_UNIT: u64 = 1;

/// sys.databases.recovery_model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryModel {
    Full = 1,
    BulkLogged = 2,
    Simple = 3,
}

impl RecoveryModel {
    pub fn from_u8(v: u8) -> Option<RecoveryModel> {
        match v {
            1 => Some(RecoveryModel::Full),
            2 => Some(RecoveryModel::BulkLogged),
            3 => Some(RecoveryModel::Simple),
            _ => None,
        }
    }
    pub fn desc(self) -> &'static str {
        match self {
            RecoveryModel::Full => "FULL",
            RecoveryModel::BulkLogged => "BULK_LOGGED",
            RecoveryModel::Simple => "SIMPLE",
        }
    }
}

/// One filegroup (sys.filegroups row). Data space id 1 is PRIMARY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilegroupEntry {
    pub data_space_id: u16,
    pub name: String,
    pub is_default: bool,
    pub is_autogrow_all_files: bool,
    pub is_read_only: bool,
}

/// One file (sys.database_files row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    pub file_id: u16,
    pub file_type: FileType,
    /// 0 for log files.
    pub data_space_id: u16,
    pub name: String,
    pub physical_name: String,
    /// Current size in 8 KiB pages.
    pub size_pages: u32,
    /// Maximum size in pages; -1 = unlimited, 0 = no growth allowed.
    pub max_size_pages: i32,
    /// Growth in pages, or in percent when `is_percent_growth`; 0 = no automatic growth.
    pub growth: u32,
    pub is_percent_growth: bool,
}

impl FileEntry {
    /// The entry as the catalog (and a backup set's header) stores it.
    pub fn encode(&self, w: &mut Writer) {
        w.u16(self.file_id);
        w.u8(self.file_type as u8);
        w.u16(self.data_space_id);
        w.string(&self.name);
        w.string(&self.physical_name);
        w.u32(self.size_pages);
        w.u32(self.max_size_pages as u32);
        w.u32(self.growth);
        w.u8(self.is_percent_growth as u8);
    }

    pub fn decode(r: &mut Reader<'_>, at: PageId) -> Result<FileEntry, FormatError> {
        Ok(FileEntry {
            file_id: r.u16()?,
            file_type: FileType::from_u8(r.u8()?).ok_or_else(|| corrupt(at, "bad file type"))?,
            data_space_id: r.u16()?,
            name: r.string()?,
            physical_name: r.string()?,
            size_pages: r.u32()?,
            max_size_pages: r.u32()? as i32,
            growth: r.u32()?,
            is_percent_growth: r.u8()? != 0,
        })
    }
}

/// An allocation unit's first IAM page (sys.allocation_units, simplified).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocationUnitEntry {
    pub allocation_unit_id: u64,
    pub data_space_id: u16,
    pub first_iam_page: PageId,
}

/// A column of a user table (sys.columns). Types are SQL Server's system type ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnEntry {
    pub column_id: u16,
    pub name: String,
    pub system_type_id: u8,
    /// Bytes, as sys.columns.max_length (-1 for MAX).
    pub max_length: i16,
    pub precision: u8,
    pub scale: u8,
    pub is_nullable: bool,
    /// IDENTITY(seed, increment).
    pub identity: Option<(i64, i64)>,
    /// The DEFAULT expression as T-SQL text; empty when there is none.
    pub default_sql: String,
    /// A computed column's definition (version 12; none before): its values are computed
    /// from the row's other columns, never written by INSERT or UPDATE.
    pub computed: Option<ComputedColumn>,
}

/// A computed column's definition (sys.computed_columns). Only a PERSISTED one is stored in
/// the record; the SQL layer keeps its value equal to the definition's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComputedColumn {
    /// The expression as normalized T-SQL text (`([a]+[b])`), as sys.computed_columns.
    /// definition shows it; the SQL layer parses it again.
    pub definition: String,
    pub is_persisted: bool,
}

/// A user table (sys.tables): a heap (index id 0) or a clustered index (index id 1) whose
/// rows live in one allocation unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableEntry {
    pub object_id: u32,
    pub schema_name: String,
    pub name: String,
    pub created_us: i64,
    pub data_space_id: u16,
    pub allocation_unit_id: u64,
    pub index_id: u8,
    /// Root page of the clustered index (index id 1), which never moves; null for a heap.
    pub root_page: PageId,
    /// PRIMARY KEY constraint name and its key column ids, in key order.
    pub primary_key: Option<(String, Vec<u16>)>,
    pub columns: Vec<ColumnEntry>,
    /// The IDENTITY column's value as kept (version 6); `Unused` for a table without one.
    pub identity_last: IdentityLast,
    /// ALTER TABLE ... SET (LOCK_ESCALATION = ...) (version 7; TABLE before).
    pub lock_escalation: LockEscalation,
    /// A CREATE or DROP TABLE of a transaction not yet settled (version 8; none before).
    pub pending_ddl: Option<PendingDdl>,
    /// Set on a nonclustered index's entry (version 9): the entry is not a table but the
    /// index's B-tree, whose `columns` are its index record's and whose `primary_key` is its
    /// B-tree key (storage's index.rs).
    pub index_of: Option<IndexOf>,
    /// The table's CHECK constraints (version 10; none before), in creation order.
    pub checks: Vec<CheckConstraint>,
    /// The table's FOREIGN KEY constraints (version 11; none before), in creation order.
    pub foreign_keys: Vec<ForeignKey>,
    /// ALTER INDEX ... DISABLE of the table's clustered index (version 14's flags byte, bit
    /// 0; enabled before): the rows stay in the tree but no statement reads or changes
    /// them until a rebuild of the clustered index (sys.indexes.is_disabled of index id
    /// 1). Only a clustered table's own entry is ever marked (invariant 15).
    pub is_disabled: bool,
}

impl TableEntry {
    /// The table this entry is a clustered index rebuild's new tree of (`PendingDdl`'s
    /// `rebuilds`): no table to name lookups and the catalog views, its table's while
    /// DBCC CHECKDB reads it.
    pub fn rebuilt_table(&self) -> Option<u32> {
        self.pending_ddl.and_then(|p| p.rebuilds)
    }

    /// Whether this entry is the unique index enforcing `base`'s PRIMARY KEY NONCLUSTERED:
    /// `base` is a heap and this index of it bears the constraint's name (invariant 11).
    pub fn enforces_primary_key_of(&self, base: &TableEntry) -> bool {
        let of_base = self
            .index_of
            .as_ref()
            .is_some_and(|i| i.table_object_id == base.object_id && i.unique);
        of_base
            && base.index_id == 0
            && base.index_of.is_none()
            && base
                .primary_key
                .as_ref()
                .is_some_and(|(n, _)| n.eq_ignore_ascii_case(&self.name))
    }
}

/// A FOREIGN KEY constraint (sys.foreign_keys row, sys.objects type 'F'), kept on the
/// referencing table's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignKey {
    pub object_id: u32,
    pub name: String,
    /// The referenced (parent) table's object id.
    pub referenced_object_id: u32,
    /// The parent's index whose key the columns match (1: its clustered PRIMARY KEY).
    pub key_index_id: u16,
    /// (referencing column id, referenced column id), in the constraint's order.
    pub columns: Vec<(u16, u16)>,
    pub delete_action: ReferentialAction,
    pub update_action: ReferentialAction,
    /// ALTER TABLE ... NOCHECK CONSTRAINT, or ALTER INDEX ... DISABLE of the index it
    /// references through (storage's index.rs invariant 8); a disabled key is not trusted.
    pub is_disabled: bool,
    /// Added or enabled WITH NOCHECK, or disabled: rows may not satisfy it.
    pub is_not_trusted: bool,
    /// Named by the engine (`FK__...`), not by a CONSTRAINT clause.
    pub is_system_named: bool,
}

/// sys.foreign_keys.delete_referential_action / update_referential_action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReferentialAction {
    NoAction = 0,
    Cascade = 1,
    SetNull = 2,
    SetDefault = 3,
}

impl ReferentialAction {
    fn from_code(code: u8) -> Option<ReferentialAction> {
        Some(match code {
            0 => ReferentialAction::NoAction,
            1 => ReferentialAction::Cascade,
            2 => ReferentialAction::SetNull,
            3 => ReferentialAction::SetDefault,
            _ => return None,
        })
    }
}

/// A CHECK constraint (sys.check_constraints row, sys.objects type 'C').
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckConstraint {
    pub object_id: u32,
    pub name: String,
    /// The column of a column-level constraint (parent_column_id); 0 for a table-level one.
    pub column_id: u16,
    /// ALTER TABLE ... NOCHECK CONSTRAINT; a disabled constraint is not trusted.
    pub is_disabled: bool,
    /// Added or enabled WITH NOCHECK, or disabled: rows may not satisfy it.
    pub is_not_trusted: bool,
    /// Named by the engine (`CK__...`), not by a CONSTRAINT clause.
    pub is_system_named: bool,
    /// The expression as T-SQL text inside one pair of parentheses (sys.check_constraints
    /// .definition), parsed again to enforce it.
    pub definition: String,
}

/// A nonclustered index (sys.indexes row with index id 2 or more) kept as its own B-tree
/// entry. The entry's columns are, in order: the `key_columns` the index was declared
/// with, its `included` columns, then the row locator's columns that are not already there
/// (the base table's clustering key, or for a heap the RID, binary(8), source 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexOf {
    /// The base table's object id.
    pub table_object_id: u32,
    /// sys.indexes.index_id (2 and up).
    pub index_id: u16,
    pub unique: bool,
    /// Made by a UNIQUE constraint (sys.indexes.is_unique_constraint; Msg 2627, not 2601).
    pub unique_constraint: bool,
    pub key_columns: u16,
    pub included: u16,
    /// For each of the entry's columns, the base table's column id it copies (0: the RID).
    pub sources: Vec<u16>,
    /// ALTER INDEX ... DISABLE (sys.indexes.is_disabled): the definition kept, the tree
    /// emptied and no longer kept by row operations, read or compared, until a REBUILD.
    pub is_disabled: bool,
}

/// What a transaction still open (or committing, not yet settled) did to a table's
/// existence: the table goes when that transaction rolls back if it `created` it, when it
/// commits if it `dropped` it, and the mark goes either way (storage's ddl.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingDdl {
    pub xact: u64,
    pub created: bool,
    pub dropped: bool,
    /// Set on a clustered index rebuild's new tree (an entry `created` by the rebuild's
    /// transaction): the table whose tree it becomes when that transaction commits, the two
    /// entries' trees exchanged as the mark settles (storage's ddl.rs invariant 6).
    pub rebuilds: Option<u32>,
}

impl PendingDdl {
    fn flags(self) -> u8 {
        self.created as u8 | (self.dropped as u8) << 1 | (self.rebuilds.is_some() as u8) << 2
    }
}

/// sys.tables.lock_escalation: 0 TABLE (SQL Server's default), 1 DISABLE, 2 AUTO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LockEscalation {
    #[default]
    Table = 0,
    Disable = 1,
    Auto = 2,
}

impl LockEscalation {
    pub fn from_code(v: u8) -> Option<LockEscalation> {
        Some(match v {
            0 => LockEscalation::Table,
            1 => LockEscalation::Disable,
            2 => LockEscalation::Auto,
            _ => return None,
        })
    }

    /// sys.tables.lock_escalation_desc.
    pub fn name(self) -> &'static str {
        match self {
            LockEscalation::Table => "TABLE",
            LockEscalation::Disable => "DISABLE",
            LockEscalation::Auto => "AUTO",
        }
    }
}

/// A table's identity value as the catalog keeps it (sys.identity_columns.last_value;
/// FORMAT.md, "Catalog"): a bound no value handed out has passed, in the increment's
/// direction. While the database is open it is the end of the block of values reserved
/// (IDENTITY_CACHE); a clean close lowers it to the last value handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IdentityLast {
    /// No value handed out since the table was created or truncated: the next is the seed.
    #[default]
    Unused,
    /// No value past this one was handed out.
    Through(i64),
    /// Written before version 6, which kept no value: found once by reading the table.
    Unknown,
}

/// A database known to the instance (master only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseEntry {
    pub database_id: u16,
    pub name: String,
    pub primary_file: String,
    pub created_us: i64,
    /// Some while the database is RESTORING (RESTORE ... WITH NORECOVERY): the path of
    /// each of its files by file id, since its own catalog still names the source's paths
    /// until recovery brings it online. None for a database that is online.
    pub restoring: Option<Vec<(u16, String)>>,
    /// A restore of this RESTORING database failed part-way (its files may hold part of
    /// a log): only a new full restore or DROP DATABASE may follow (it starts SUSPECT).
    pub restore_failed: bool,
    /// ALTER DATABASE ... SET OFFLINE (version 5): the database is closed and stays closed
    /// across restarts until SET ONLINE. Never set together with `restoring`.
    pub offline: bool,
    /// ALTER DATABASE ... SET SINGLE_USER | RESTRICTED_USER | MULTI_USER (version 5, the
    /// state byte's high nibble): who may use the database; it lasts across restarts.
    pub user_access: UserAccess,
}

/// Who may use a database (sys.databases.user_access; FORMAT.md, "Catalog"). The value is
/// SQL Server's and the one stored in the high nibble of master's state byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UserAccess {
    /// Anyone with access to the database (the default).
    #[default]
    MultiUser = 0,
    /// One session at a time.
    SingleUser = 1,
    /// Members of db_owner, dbcreator and sysadmin only.
    RestrictedUser = 2,
}

impl UserAccess {
    /// The value stored (and shown in sys.databases.user_access), or None for one no
    /// version defines.
    pub fn from_u8(v: u8) -> Option<UserAccess> {
        match v {
            0 => Some(UserAccess::MultiUser),
            1 => Some(UserAccess::SingleUser),
            2 => Some(UserAccess::RestrictedUser),
            _ => None,
        }
    }

    /// sys.databases.user_access_desc.
    pub fn desc(self) -> &'static str {
        match self {
            UserAccess::MultiUser => "MULTI_USER",
            UserAccess::SingleUser => "SINGLE_USER",
            UserAccess::RestrictedUser => "RESTRICTED_USER",
        }
    }
}

/// Not `Eq`: statistics hold floating-point counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    pub database_id: u16,
    pub recovery_model: RecoveryModel,
    pub filegroups: Vec<FilegroupEntry>,
    pub files: Vec<FileEntry>,
    pub allocation_units: Vec<AllocationUnitEntry>,
    pub next_allocation_unit_id: u64,
    pub databases: Vec<DatabaseEntry>,
    /// Object id the next table takes.
    pub next_object_id: u32,
    pub tables: Vec<TableEntry>,
    /// Users, roles, memberships and permissions (version 4).
    pub security: crate::principals::Security,
    /// Statistics objects (version 13), indexes' and CREATE STATISTICS'.
    pub statistics: Vec<crate::statistics::StatisticsEntry>,
    /// T-SQL modules (version 15): stored procedures with their text.
    pub modules: Vec<crate::module::ModuleEntry>,
}

/// sysname: names of databases, files, filegroups, tables, columns and constraints.
pub const MAX_NAME_CHARS: usize = 128;
/// A file's path (Linux's PATH_MAX less the terminating NUL).
pub const MAX_PATH_CHARS: usize = 4095;
/// A DEFAULT's text: four bytes a character still fits the u16 length.
pub const MAX_DEFINITION_CHARS: usize = u16::MAX as usize / 4;

/// A string or list longer than the catalog stores (`Catalog::check_lengths`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLong {
    /// What it is, as SQL Server's Msg 103 names it ("identifier", "file name", ...).
    pub what: &'static str,
    pub value: String,
    pub max: usize,
}

fn fits(what: &'static str, value: &str, max: usize) -> Result<(), TooLong> {
    if value.chars().count() <= max {
        return Ok(());
    }
    Err(TooLong {
        what,
        value: value.to_string(),
        max,
    })
}

fn count_fits(what: &'static str, count: usize) -> Result<(), TooLong> {
    if count <= u16::MAX as usize {
        return Ok(());
    }
    Err(TooLong {
        what,
        value: count.to_string(),
        max: u16::MAX as usize,
    })
}

/// Object ids of user tables start here, as in SQL Server's user objects.
pub const FIRST_USER_OBJECT_ID: u32 = 581_577_110;

impl Catalog {
    pub fn encode(&self) -> Vec<u8> {
        self.encode_version(CATALOG_VERSION)
    }

    /// The blob as catalog version `version` (5 or 6) lays it out: version 5, which keeps
    /// no identity values, is what databases written before version 6 hold (upgrade tests).
    pub fn encode_version(&self, version: u16) -> Vec<u8> {
        assert!(
            (5..=CATALOG_VERSION).contains(&version),
            "catalog version {version} is not written"
        );
        let mut w = Writer::default();
        w.u16(version);
        w.u16(self.database_id);
        w.u8(self.recovery_model as u8);
        w.u64(self.next_allocation_unit_id);
        w.u32(self.filegroups.len() as u32);
        for g in &self.filegroups {
            w.u16(g.data_space_id);
            w.string(&g.name);
            w.u8(g.is_default as u8
                | (g.is_autogrow_all_files as u8) << 1
                | (g.is_read_only as u8) << 2);
        }
        w.u32(self.files.len() as u32);
        for f in &self.files {
            f.encode(&mut w);
        }
        w.u32(self.allocation_units.len() as u32);
        for a in &self.allocation_units {
            w.u64(a.allocation_unit_id);
            w.u16(a.data_space_id);
            w.page_id(a.first_iam_page);
        }
        w.u32(self.databases.len() as u32);
        for d in &self.databases {
            assert!(
                !(d.offline && d.restoring.is_some()),
                "invariant 6: one state per database"
            );
            w.u16(d.database_id);
            w.string(&d.name);
            w.string(&d.primary_file);
            w.i64(d.created_us);
            let access = (d.user_access as u8) << 4;
            match &d.restoring {
                None => w.u8(access | if d.offline { 3 } else { 0 }),
                Some(paths) => {
                    w.u8(access | if d.restore_failed { 2 } else { 1 });
                    w.u16(paths.len() as u16);
                    for (id, path) in paths {
                        w.u16(*id);
                        w.string(path);
                    }
                }
            }
        }
        w.u32(self.next_object_id);
        w.u32(self.tables.len() as u32);
        for t in &self.tables {
            encode_table(&mut w, t, version);
        }
        self.security.encode(&mut w);
        if version >= 13 {
            crate::statistics::encode(&mut w, &self.statistics);
        }
        if version >= 15 {
            crate::module::encode(&mut w, &self.modules);
        }
        w.bytes
    }

    /// Decodes a catalog blob; `at` names the chain's first page for error reports.
    pub fn decode(bytes: &[u8], at: PageId) -> Result<Catalog, FormatError> {
        let mut r = Reader::new(bytes, 0, at);
        let version = r.u16()?;
        if !(1..=CATALOG_VERSION).contains(&version) {
            return Err(corrupt(
                at,
                format!("catalog version {version} is not supported"),
            ));
        }
        let database_id = r.u16()?;
        let recovery_model =
            RecoveryModel::from_u8(r.u8()?).ok_or_else(|| corrupt(at, "bad recovery model"))?;
        let next_allocation_unit_id = r.u64()?;
        let mut filegroups = Vec::new();
        for _ in 0..count(&mut r, bytes.len())? {
            let data_space_id = r.u16()?;
            let name = r.string()?;
            let flags = r.u8()?;
            filegroups.push(FilegroupEntry {
                data_space_id,
                name,
                is_default: flags & 1 != 0,
                is_autogrow_all_files: flags & 2 != 0,
                is_read_only: flags & 4 != 0,
            });
        }
        let mut files = Vec::new();
        for _ in 0..count(&mut r, bytes.len())? {
            files.push(FileEntry::decode(&mut r, at)?);
        }
        let mut allocation_units = Vec::new();
        for _ in 0..count(&mut r, bytes.len())? {
            allocation_units.push(AllocationUnitEntry {
                allocation_unit_id: r.u64()?,
                data_space_id: r.u16()?,
                first_iam_page: r.page_id()?,
            });
        }
        let mut databases = Vec::new();
        for _ in 0..count(&mut r, bytes.len())? {
            let database_id = r.u16()?;
            let name = r.string()?;
            let primary_file = r.string()?;
            let created_us = r.i64()?;
            let byte = if version >= 3 { r.u8()? } else { 0 };
            // Version 5 splits the byte: the state in the low nibble, the user access in
            // the high one. Each version knows its values; any other is damage, never taken
            // for online or for MULTI_USER.
            let (state, access) = if version >= 5 {
                (byte & 0x0f, byte >> 4)
            } else {
                (byte, 0)
            };
            let known = if version >= 5 { 3 } else { 2 };
            if state > known {
                return Err(corrupt(
                    at,
                    format!("database {database_id} has unknown state {state}"),
                ));
            }
            let user_access = UserAccess::from_u8(access).ok_or_else(|| {
                corrupt(
                    at,
                    format!("database {database_id} has unknown user access {access}"),
                )
            })?;
            let restoring = if state == 1 || state == 2 {
                let n = r.u16()?;
                let mut paths = Vec::new();
                for _ in 0..n {
                    paths.push((r.u16()?, r.string()?));
                }
                Some(paths)
            } else {
                None
            };
            databases.push(DatabaseEntry {
                database_id,
                name,
                primary_file,
                created_us,
                restoring,
                restore_failed: state == 2,
                offline: state == 3,
                user_access,
            });
        }
        let mut next_object_id = FIRST_USER_OBJECT_ID;
        let mut tables = Vec::new();
        if version >= 2 {
            next_object_id = r.u32()?;
            for _ in 0..count(&mut r, bytes.len())? {
                tables.push(decode_table(&mut r, bytes.len(), version)?);
            }
        }
        let security = if version >= 4 {
            crate::principals::Security::decode(&mut r, bytes.len())?
        } else {
            Default::default()
        };
        let statistics = match version {
            ..=12 => Vec::new(),
            _ => crate::statistics::decode(&mut r, bytes.len())?,
        };
        let modules = match version {
            ..=14 => Vec::new(),
            _ => crate::module::decode(&mut r, bytes.len())?,
        };
        let c = Catalog {
            statistics,
            modules,
            database_id,
            recovery_model,
            filegroups,
            files,
            allocation_units,
            next_allocation_unit_id,
            databases,
            next_object_id,
            tables,
            security,
        };
        c.check_invariants().map_err(|e| corrupt(at, e))?;
        Ok(c)
    }

    /// Checks the numbered invariants of the module docs.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut ids = std::collections::HashSet::new();
        let mut names = std::collections::HashSet::new();
        let mut paths = std::collections::HashSet::new();
        for f in &self.files {
            if !ids.insert(f.file_id) {
                return Err(format!("file id {} appears twice", f.file_id));
            }
            if !names.insert(f.name.to_lowercase()) {
                return Err(format!("logical name {} appears twice", f.name));
            }
            if !paths.insert(f.physical_name.clone()) {
                return Err(format!("physical name {} appears twice", f.physical_name));
            }
            let fg_ok = match f.file_type {
                FileType::Log => f.data_space_id == 0,
                FileType::Rows => self
                    .filegroups
                    .iter()
                    .any(|g| g.data_space_id == f.data_space_id),
            };
            if !fg_ok {
                return Err(format!(
                    "file {} has data space {}",
                    f.file_id, f.data_space_id
                ));
            }
        }
        match self.files.iter().find(|f| f.file_id == 1) {
            Some(f) if f.file_type == FileType::Rows && f.data_space_id == 1 => {}
            _ => return Err("file 1 is not the primary data file".into()),
        }
        if !self
            .files
            .iter()
            .any(|f| f.file_id == 2 && f.file_type == FileType::Log)
        {
            return Err("file 2 is not a log file".into());
        }
        if self.filegroups.iter().filter(|g| g.is_default).count() != 1 {
            return Err("there must be exactly one default filegroup".into());
        }
        for t in &self.tables {
            let has_identity = t.columns.iter().any(|c| c.identity.is_some());
            if !has_identity && t.identity_last != IdentityLast::Unused {
                return Err(format!(
                    "table {} keeps an identity value without an IDENTITY column",
                    t.name
                ));
            }
            if t.pending_ddl.is_some_and(|p| !p.created && !p.dropped) {
                return Err(format!(
                    "table {} is pending neither CREATE nor DROP",
                    t.name
                ));
            }
            if let Some(ix) = &t.index_of {
                check_index_entry(self, t, ix)?;
            }
            check_rebuild_entry(self, t)?;
            let clustered_table =
                t.index_id == 1 && t.index_of.is_none() && t.rebuilt_table().is_none();
            if t.is_disabled && !clustered_table {
                return Err(format!(
                    "{} is marked disabled but is no clustered table",
                    t.name
                ));
            }
            check_check_constraints(t)?;
            check_foreign_keys(self, t)?;
            check_primary_key_index(self, t)?;
        }
        let table_columns = |id: u32| {
            let t = self
                .tables
                .iter()
                .find(|t| t.object_id == id && t.index_of.is_none())?;
            Some(t.columns.iter().map(|c| c.column_id).collect())
        };
        crate::statistics::check(&self.statistics, &table_columns)?;
        self.check_modules()?;
        for d in &self.databases {
            if d.offline && d.restoring.is_some() {
                return Err(format!("database {} is both OFFLINE and RESTORING", d.name));
            }
            if d.restore_failed && d.restoring.is_none() {
                return Err(format!("database {} failed a restore it is not in", d.name));
            }
            // master (1), tempdb (2) and model (3) refuse SINGLE_USER (Msg 5058).
            if d.database_id <= 3 && d.user_access != UserAccess::MultiUser {
                return Err(format!("system database {} is not MULTI_USER", d.name));
            }
        }
        Ok(())
    }
}

impl Catalog {
    /// Invariant 16: modules' ids and names are their own.
    fn check_modules(&self) -> Result<(), String> {
        let mut ids = std::collections::HashSet::new();
        for t in &self.tables {
            ids.insert(t.object_id);
            ids.extend(t.checks.iter().map(|k| k.object_id));
            ids.extend(t.foreign_keys.iter().map(|k| k.object_id));
        }
        let table_named = |name: &str| {
            self.tables.iter().any(|t| {
                t.index_of.is_none()
                    && t.rebuilt_table().is_none()
                    && t.schema_name.eq_ignore_ascii_case("dbo")
                    && t.name.eq_ignore_ascii_case(name)
            })
        };
        crate::module::check(&self.modules, &ids, &table_named, self.next_object_id)
    }
}

/// Invariant 12: a clustered index rebuild's new tree is created, not dropped, by its
/// transaction; it is no index entry; the table it rebuilds is a clustered table (not
/// itself such a tree) with the same key and columns; and no table has two.
fn check_rebuild_entry(c: &Catalog, t: &TableEntry) -> Result<(), String> {
    let Some((p, of)) = t.pending_ddl.and_then(|p| Some((p, p.rebuilds?))) else {
        return Ok(());
    };
    let bad = |why: &str| Err(format!("rebuild entry {} of table {of} {why}", t.object_id));
    if !p.created || p.dropped || t.index_of.is_some() || t.index_id != 1 {
        return bad("is not a clustered tree its transaction created");
    }
    let Some(base) = c.tables.iter().find(|b| b.object_id == of) else {
        return bad("names a table not in the catalog");
    };
    if base.index_id != 1 || base.index_of.is_some() || base.rebuilt_table().is_some() {
        return bad("names no clustered table");
    }
    if base.primary_key != t.primary_key || base.columns.len() != t.columns.len() {
        return bad("differs from its table's key or columns");
    }
    if c.tables
        .iter()
        .filter(|x| x.rebuilt_table() == Some(of))
        .count()
        > 1
    {
        return bad("is one of two");
    }
    Ok(())
}

/// Invariant 11: the index enforcing a heap's PRIMARY KEY, if any, keys its columns.
fn check_primary_key_index(c: &Catalog, t: &TableEntry) -> Result<(), String> {
    let Some((name, ids)) = t.primary_key.as_ref().filter(|_| t.index_of.is_none()) else {
        return Ok(());
    };
    for ix in c.tables.iter().filter(|e| e.enforces_primary_key_of(t)) {
        let info = ix.index_of.as_ref().expect("an index entry");
        if info.sources.get(..info.key_columns as usize) != Some(ids.as_slice()) {
            return Err(format!(
                "the index enforcing PRIMARY KEY {name} of table {} keys other columns",
                t.name
            ));
        }
    }
    Ok(())
}

/// Invariant 13: computed columns have neither IDENTITY nor DEFAULT, and only in a table.
fn check_computed_columns(t: &TableEntry) -> Result<(), String> {
    for c in t.columns.iter().filter(|c| c.computed.is_some()) {
        if t.index_of.is_some() || c.identity.is_some() || !c.default_sql.is_empty() {
            return Err(format!(
                "computed column {} of {} is in an index or has IDENTITY or DEFAULT",
                c.name, t.name
            ));
        }
    }
    Ok(())
}

/// Invariant 9: each CHECK constraint names no column its table lacks.
fn check_check_constraints(t: &TableEntry) -> Result<(), String> {
    check_computed_columns(t)?;
    if t.index_of.is_some() && !t.checks.is_empty() {
        return Err(format!("index {} has CHECK constraints", t.name));
    }
    for k in &t.checks {
        if k.column_id != 0 && !t.columns.iter().any(|c| c.column_id == k.column_id) {
            return Err(format!(
                "CHECK constraint {} of table {} names column {} it lacks",
                k.name, t.name, k.column_id
            ));
        }
    }
    Ok(())
}

/// Invariant 10: each FOREIGN KEY pairs columns its table and the referenced table have.
fn check_foreign_keys(c: &Catalog, t: &TableEntry) -> Result<(), String> {
    if t.index_of.is_some() && !t.foreign_keys.is_empty() {
        return Err(format!("index {} has FOREIGN KEY constraints", t.name));
    }
    if t.pending_ddl.is_some_and(|p| p.dropped) {
        return Ok(());
    }
    for k in &t.foreign_keys {
        let parent = c
            .tables
            .iter()
            .find(|p| p.object_id == k.referenced_object_id && p.index_of.is_none())
            .ok_or_else(|| {
                format!(
                    "FOREIGN KEY {} of table {} references missing table {}",
                    k.name, t.name, k.referenced_object_id
                )
            })?;
        if k.columns.is_empty() {
            return Err(format!("FOREIGN KEY {} pairs no columns", k.name));
        }
        let has = |e: &TableEntry, id: u16| e.columns.iter().any(|c| c.column_id == id);
        for &(child, referenced) in &k.columns {
            if !has(t, child) || !has(parent, referenced) {
                return Err(format!(
                    "FOREIGN KEY {} of table {} pairs columns {child} and {referenced} its \
                     tables lack",
                    k.name, t.name
                ));
            }
        }
    }
    Ok(())
}

/// An index entry's shape: its base table exists and is not an index, its sources are
/// the base's columns (0, the RID, only over a heap), one per column, and the counts fit.
fn check_index_entry(c: &Catalog, t: &TableEntry, ix: &IndexOf) -> Result<(), String> {
    let base = c
        .tables
        .iter()
        .find(|b| b.object_id == ix.table_object_id && b.index_of.is_none())
        .ok_or_else(|| format!("index {} has no base table {}", t.name, ix.table_object_id))?;
    let bad = |what: &str| Err(format!("index {} {what}", t.name));
    if ix.sources.len() != t.columns.len()
        || (ix.key_columns + ix.included) as usize > t.columns.len()
        || ix.key_columns == 0
        || ix.index_id < 2
    {
        return bad("has a shape its columns do not match");
    }
    for s in &ix.sources {
        let known = match s {
            0 => base.index_id == 0,
            id => base.columns.iter().any(|c| c.column_id == *id),
        };
        if !known {
            return bad("copies a column its table does not have");
        }
    }
    Ok(())
}

impl Catalog {
    /// Invariant 5: every string and count fits its field.
    pub fn check_lengths(&self) -> Result<(), TooLong> {
        for g in &self.filegroups {
            fits("identifier", &g.name, MAX_NAME_CHARS)?;
        }
        for f in &self.files {
            fits("identifier", &f.name, MAX_NAME_CHARS)?;
            fits("file name", &f.physical_name, MAX_PATH_CHARS)?;
        }
        for d in &self.databases {
            fits("identifier", &d.name, MAX_NAME_CHARS)?;
            fits("file name", &d.primary_file, MAX_PATH_CHARS)?;
            for (_, path) in d.restoring.iter().flatten() {
                fits("file name", path, MAX_PATH_CHARS)?;
            }
            count_fits(
                "restoring file list",
                d.restoring.as_ref().map_or(0, Vec::len),
            )?;
        }
        self.tables.iter().try_for_each(check_table_lengths)?;
        for p in &self.security.principals {
            fits("identifier", &p.name, MAX_NAME_CHARS)?;
        }
        for s in &self.statistics {
            fits("identifier", &s.name, MAX_NAME_CHARS)?;
        }
        self.modules.iter().try_for_each(check_module_lengths)
    }
}

/// A module's name, parameters and definition fit their fields (the definition is bounded
/// in bytes, its u32 length field far wider: `module::MAX_DEFINITION_BYTES`).
fn check_module_lengths(m: &crate::module::ModuleEntry) -> Result<(), TooLong> {
    use crate::module::{MAX_DEFINITION_BYTES, MAX_PARAMETERS};
    fits("identifier", &m.name, MAX_NAME_CHARS)?;
    if m.definition.len() > MAX_DEFINITION_BYTES {
        return Err(TooLong {
            what: "procedure definition",
            value: m.definition.chars().take(MAX_NAME_CHARS).collect(),
            max: MAX_DEFINITION_BYTES,
        });
    }
    if m.parameters.len() > MAX_PARAMETERS {
        return Err(TooLong {
            what: "parameter list",
            value: m.parameters.len().to_string(),
            max: MAX_PARAMETERS,
        });
    }
    for p in &m.parameters {
        fits("identifier", &p.name, MAX_NAME_CHARS)?;
        fits(
            "default definition",
            p.default_sql.as_deref().unwrap_or(""),
            MAX_DEFINITION_CHARS,
        )?;
    }
    Ok(())
}

fn check_table_lengths(t: &TableEntry) -> Result<(), TooLong> {
    fits("identifier", &t.schema_name, MAX_NAME_CHARS)?;
    fits("identifier", &t.name, MAX_NAME_CHARS)?;
    if let Some((name, cols)) = &t.primary_key {
        fits("identifier", name, MAX_NAME_CHARS)?;
        count_fits("key column list", cols.len())?;
    }
    for c in &t.columns {
        fits("identifier", &c.name, MAX_NAME_CHARS)?;
        fits("default definition", &c.default_sql, MAX_DEFINITION_CHARS)?;
        if let Some(k) = &c.computed {
            fits(
                "computed column definition",
                &k.definition,
                MAX_DEFINITION_CHARS,
            )?;
        }
    }
    count_fits("CHECK constraint list", t.checks.len())?;
    for k in &t.checks {
        fits("identifier", &k.name, MAX_NAME_CHARS)?;
        fits("check definition", &k.definition, MAX_DEFINITION_CHARS)?;
    }
    count_fits("FOREIGN KEY constraint list", t.foreign_keys.len())?;
    for k in &t.foreign_keys {
        fits("identifier", &k.name, MAX_NAME_CHARS)?;
        count_fits("FOREIGN KEY column list", k.columns.len())?;
    }
    Ok(())
}

fn encode_table(w: &mut Writer, t: &TableEntry, version: u16) {
    w.u32(t.object_id);
    w.string(&t.schema_name);
    w.string(&t.name);
    w.i64(t.created_us);
    w.u16(t.data_space_id);
    w.u64(t.allocation_unit_id);
    w.u8(t.index_id);
    w.page_id(t.root_page);
    match &t.primary_key {
        None => w.u8(0),
        Some((name, cols)) => {
            w.u8(1);
            w.string(name);
            w.u16(cols.len() as u16);
            for c in cols {
                w.u16(*c);
            }
        }
    }
    w.u32(t.columns.len() as u32);
    for c in &t.columns {
        w.u16(c.column_id);
        w.string(&c.name);
        w.u8(c.system_type_id);
        w.u16(c.max_length as u16);
        w.u8(c.precision);
        w.u8(c.scale);
        w.u8(c.is_nullable as u8);
        match c.identity {
            None => w.u8(0),
            Some((seed, inc)) => {
                w.u8(1);
                w.i64(seed);
                w.i64(inc);
            }
        }
        w.string(&c.default_sql);
        if version >= 12 {
            encode_computed(w, c.computed.as_ref());
        }
    }
    if version < 6 {
        return;
    }
    match t.identity_last {
        IdentityLast::Unused => w.u8(0),
        IdentityLast::Through(v) => {
            w.u8(1);
            w.i64(v);
        }
        IdentityLast::Unknown => w.u8(2),
    }
    if version >= 7 {
        w.u8(t.lock_escalation as u8);
    }
    if version >= 8 {
        match t.pending_ddl {
            None => w.u8(0),
            Some(p) => {
                w.u8(p.flags());
                w.u64(p.xact);
                if let Some(table) = p.rebuilds {
                    w.u32(table);
                }
            }
        }
    }
    if version >= 9 {
        encode_index_of(w, t.index_of.as_ref());
    }
    if version >= 10 {
        encode_checks(w, &t.checks);
    }
    if version >= 11 {
        encode_foreign_keys(w, &t.foreign_keys);
    }
    if version >= 14 {
        w.u8(t.is_disabled as u8);
    }
}

/// Version 12's computed-column tag after a column's DEFAULT text: u8 0 for an ordinary
/// column, else bit 0 set (computed) and bit 1 (PERSISTED), then the definition string.
fn encode_computed(w: &mut Writer, c: Option<&ComputedColumn>) {
    match c {
        None => w.u8(0),
        Some(k) => {
            w.u8(1 | (k.is_persisted as u8) << 1);
            w.string(&k.definition);
        }
    }
}

fn decode_computed(
    r: &mut Reader<'_>,
    column_id: u16,
) -> Result<Option<ComputedColumn>, FormatError> {
    match r.u8()? {
        0 => Ok(None),
        tag @ (1 | 3) => Ok(Some(ComputedColumn {
            definition: r.string()?,
            is_persisted: tag == 3,
        })),
        tag => Err(corrupt(
            PageId::NULL,
            format!("column {column_id} has unknown computed tag {tag}"),
        )),
    }
}

/// Version 11's FOREIGN KEY constraints: u16 count, then each: object id u32, name,
/// referenced object id u32, key index id u16, delete action u8, update action u8, flags
/// u8 (bit 0 disabled, bit 1 not trusted, bit 2 system named), u16 column pair count, then
/// per pair the referencing column id u16 and the referenced column id u16.
fn encode_foreign_keys(w: &mut Writer, keys: &[ForeignKey]) {
    w.u16(keys.len() as u16);
    for k in keys {
        w.u32(k.object_id);
        w.string(&k.name);
        w.u32(k.referenced_object_id);
        w.u16(k.key_index_id);
        w.u8(k.delete_action as u8);
        w.u8(k.update_action as u8);
        w.u8(k.is_disabled as u8 | (k.is_not_trusted as u8) << 1 | (k.is_system_named as u8) << 2);
        w.u16(k.columns.len() as u16);
        for &(child, parent) in &k.columns {
            w.u16(child);
            w.u16(parent);
        }
    }
}

fn decode_foreign_keys(r: &mut Reader<'_>, object_id: u32) -> Result<Vec<ForeignKey>, FormatError> {
    let damage = |what: String| corrupt(PageId::NULL, format!("table {object_id} has {what}"));
    let n = r.u16()?;
    let mut keys = Vec::with_capacity(n.min(64) as usize);
    for _ in 0..n {
        let id = r.u32()?;
        let name = r.string()?;
        let referenced_object_id = r.u32()?;
        let key_index_id = r.u16()?;
        let (delete, update) = (r.u8()?, r.u8()?);
        let action = |code: u8| {
            ReferentialAction::from_code(code)
                .ok_or_else(|| damage(format!("unknown referential action {code}")))
        };
        let (delete_action, update_action) = (action(delete)?, action(update)?);
        let flags = r.u8()?;
        if flags & !7 != 0 {
            return Err(damage(format!("unknown FOREIGN KEY flags {flags}")));
        }
        let pairs = r.u16()?;
        let mut columns = Vec::with_capacity(pairs.min(64) as usize);
        for _ in 0..pairs {
            columns.push((r.u16()?, r.u16()?));
        }
        keys.push(ForeignKey {
            object_id: id,
            name,
            referenced_object_id,
            key_index_id,
            columns,
            delete_action,
            update_action,
            is_disabled: flags & 1 != 0,
            is_not_trusted: flags & 2 != 0,
            is_system_named: flags & 4 != 0,
        });
    }
    Ok(keys)
}

/// Version 10's CHECK constraints: u16 count, then each: object id u32, name, column id
/// u16 (0: table-level), flags u8 (bit 0 disabled, bit 1 not trusted, bit 2 system
/// named), definition.
fn encode_checks(w: &mut Writer, checks: &[CheckConstraint]) {
    w.u16(checks.len() as u16);
    for k in checks {
        w.u32(k.object_id);
        w.string(&k.name);
        w.u16(k.column_id);
        w.u8(k.is_disabled as u8 | (k.is_not_trusted as u8) << 1 | (k.is_system_named as u8) << 2);
        w.string(&k.definition);
    }
}

fn decode_checks(r: &mut Reader<'_>, object_id: u32) -> Result<Vec<CheckConstraint>, FormatError> {
    let n = r.u16()?;
    let mut checks = Vec::with_capacity(n.min(64) as usize);
    for _ in 0..n {
        let id = r.u32()?;
        let name = r.string()?;
        let column_id = r.u16()?;
        let flags = r.u8()?;
        if flags & !7 != 0 {
            return Err(corrupt(
                PageId::NULL,
                format!("table {object_id} has unknown CHECK flags {flags}"),
            ));
        }
        checks.push(CheckConstraint {
            object_id: id,
            name,
            column_id,
            is_disabled: flags & 1 != 0,
            is_not_trusted: flags & 2 != 0,
            is_system_named: flags & 4 != 0,
            definition: r.string()?,
        });
    }
    Ok(checks)
}

/// Version 9's index tag: u8 0 (a table), or 1 then the base object id u32, index id u16,
/// flags u8 (bit 0 unique, bit 1 unique constraint), key column count u16, included count
/// u16, and the sources (u16 count, u16 each).
fn encode_index_of(w: &mut Writer, ix: Option<&IndexOf>) {
    let Some(ix) = ix else {
        w.u8(0);
        return;
    };
    w.u8(1);
    w.u32(ix.table_object_id);
    w.u16(ix.index_id);
    w.u8(ix.unique as u8 | (ix.unique_constraint as u8) << 1 | (ix.is_disabled as u8) << 2);
    w.u16(ix.key_columns);
    w.u16(ix.included);
    w.u16(ix.sources.len() as u16);
    for s in &ix.sources {
        w.u16(*s);
    }
}

fn decode_index_of(r: &mut Reader<'_>, object_id: u32) -> Result<Option<IndexOf>, FormatError> {
    let bad = |what: String| corrupt(PageId::NULL, format!("table {object_id} {what}"));
    match r.u8()? {
        0 => return Ok(None),
        1 => {}
        v => return Err(bad(format!("has unknown index tag {v}"))),
    }
    let table_object_id = r.u32()?;
    let index_id = r.u16()?;
    let flags = r.u8()?;
    if flags & !7 != 0 {
        return Err(bad(format!("has unknown index flags {flags}")));
    }
    let key_columns = r.u16()?;
    let included = r.u16()?;
    let n = r.u16()?;
    let mut sources = Vec::with_capacity(n as usize);
    for _ in 0..n {
        sources.push(r.u16()?);
    }
    Ok(Some(IndexOf {
        table_object_id,
        index_id,
        unique: flags & 1 != 0,
        unique_constraint: flags & 2 != 0,
        is_disabled: flags & 4 != 0,
        key_columns,
        included,
        sources,
    }))
}

/// Version 8's pending-DDL mark: flags u8 (0 none; bit 0 created, bit 1 dropped), then
/// the transaction id u64 when any is set.
fn decode_pending(r: &mut Reader<'_>, object_id: u32) -> Result<Option<PendingDdl>, FormatError> {
    let flags = r.u8()?;
    if flags == 0 {
        return Ok(None);
    }
    if flags & !7 != 0 {
        return Err(corrupt(
            PageId::NULL,
            format!("table {object_id} has unknown pending DDL flags {flags}"),
        ));
    }
    let xact = r.u64()?;
    let rebuilds = match flags & 4 {
        0 => None,
        _ => Some(r.u32()?),
    };
    Ok(Some(PendingDdl {
        xact,
        created: flags & 1 != 0,
        dropped: flags & 2 != 0,
        rebuilds,
    }))
}

fn decode_table(r: &mut Reader<'_>, limit: usize, version: u16) -> Result<TableEntry, FormatError> {
    let object_id = r.u32()?;
    let schema_name = r.string()?;
    let name = r.string()?;
    let created_us = r.i64()?;
    let data_space_id = r.u16()?;
    let allocation_unit_id = r.u64()?;
    let index_id = r.u8()?;
    let root_page = r.page_id()?;
    let primary_key = match r.u8()? {
        0 => None,
        _ => {
            let pk_name = r.string()?;
            let n = r.u16()?;
            let mut cols = Vec::new();
            for _ in 0..n {
                cols.push(r.u16()?);
            }
            Some((pk_name, cols))
        }
    };
    let mut columns = Vec::new();
    for _ in 0..count(r, limit)? {
        let column_id = r.u16()?;
        let name = r.string()?;
        let system_type_id = r.u8()?;
        let max_length = r.u16()? as i16;
        let precision = r.u8()?;
        let scale = r.u8()?;
        let is_nullable = r.u8()? != 0;
        let identity = match r.u8()? {
            0 => None,
            _ => Some((r.i64()?, r.i64()?)),
        };
        let default_sql = r.string()?;
        let computed = match version {
            ..=11 => None,
            _ => decode_computed(r, column_id)?,
        };
        columns.push(ColumnEntry {
            column_id,
            name,
            system_type_id,
            max_length,
            precision,
            scale,
            is_nullable,
            identity,
            default_sql,
            computed,
        });
    }
    let has_identity = columns.iter().any(|c| c.identity.is_some());
    let identity_last = match version {
        ..=5 if has_identity => IdentityLast::Unknown,
        ..=5 => IdentityLast::Unused,
        _ => match r.u8()? {
            0 => IdentityLast::Unused,
            1 => IdentityLast::Through(r.i64()?),
            2 => IdentityLast::Unknown,
            v => {
                return Err(corrupt(
                    PageId::NULL,
                    format!("table {object_id} has unknown identity tag {v}"),
                ))
            }
        },
    };
    let lock_escalation = match version {
        ..=6 => LockEscalation::Table,
        _ => {
            let v = r.u8()?;
            LockEscalation::from_code(v).ok_or_else(|| {
                corrupt(
                    PageId::NULL,
                    format!("table {object_id} has unknown lock escalation {v}"),
                )
            })?
        }
    };
    let pending_ddl = match version {
        ..=7 => None,
        _ => decode_pending(r, object_id)?,
    };
    let index_of = match version {
        ..=8 => None,
        _ => decode_index_of(r, object_id)?,
    };
    let checks = match version {
        ..=9 => Vec::new(),
        _ => decode_checks(r, object_id)?,
    };
    let foreign_keys = match version {
        ..=10 => Vec::new(),
        _ => decode_foreign_keys(r, object_id)?,
    };
    let is_disabled = match version {
        ..=13 => false,
        // Bit 0 only; which entries may carry it is invariant 15's.
        _ => match r.u8()? {
            v @ (0 | 1) => v == 1,
            v => {
                return Err(corrupt(
                    PageId::NULL,
                    format!("table {object_id} has unknown flags {v:#04x}"),
                ))
            }
        },
    };
    Ok(TableEntry {
        object_id,
        schema_name,
        name,
        created_us,
        data_space_id,
        allocation_unit_id,
        index_id,
        root_page,
        primary_key,
        columns,
        identity_last,
        lock_escalation,
        pending_ddl,
        index_of,
        checks,
        foreign_keys,
        is_disabled,
    })
}

fn count(r: &mut Reader<'_>, limit: usize) -> Result<u32, FormatError> {
    let at = PageId::NULL;
    let n = r.u32()?;
    if n as usize > limit {
        return Err(corrupt(
            at,
            format!("catalog list of {n} entries is longer than the blob"),
        ));
    }
    Ok(n)
}

/// Number of pages a blob of `len` bytes needs.
pub fn pages_needed(len: usize) -> usize {
    len.div_ceil(CATALOG_PAGE_PAYLOAD).max(1)
}

/// Splits a catalog blob into pages at `at` (in chain order), linked through next/prev.
pub fn to_pages(blob: &[u8], at: &[PageId]) -> Vec<Page> {
    assert_eq!(
        at.len(),
        pages_needed(blob.len()),
        "wrong number of catalog pages"
    );
    let chunks: Vec<&[u8]> = if blob.is_empty() {
        vec![&[][..]]
    } else {
        blob.chunks(CATALOG_PAGE_PAYLOAD).collect()
    };
    chunks
        .iter()
        .enumerate()
        .map(|(i, chunk)| {
            let mut h = PageHeader::new(PageType::Catalog, at[i]);
            h.allocation_unit_id = CATALOG_ALLOCATION_UNIT;
            h.prev_page = if i > 0 { at[i - 1] } else { PageId::NULL };
            h.next_page = at.get(i + 1).copied().unwrap_or(PageId::NULL);
            let mut p = Page::new(&h);
            let body = p.body_mut();
            body[..2].copy_from_slice(&(chunk.len() as u16).to_le_bytes());
            body[2..2 + chunk.len()].copy_from_slice(chunk);
            p.seal();
            p
        })
        .collect()
}

/// The payload of one catalog page and the next page of the chain.
pub fn page_payload(p: &Page, at: PageId) -> Result<(&[u8], PageId), FormatError> {
    let h = p.header()?;
    if h.page_type != PageType::Catalog {
        return Err(corrupt(
            at,
            format!("expected a catalog page, found type {}", h.page_type as u8),
        ));
    }
    let body = p.body();
    let len = u16::from_le_bytes([body[0], body[1]]) as usize;
    if len > CATALOG_PAGE_PAYLOAD {
        return Err(corrupt(at, format!("catalog payload of {len} bytes")));
    }
    Ok((&body[2..2 + len], h.next_page))
}
