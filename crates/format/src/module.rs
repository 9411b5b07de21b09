//! T-SQL modules (sys.sql_modules rows) as the catalog keeps them from version 15 (FORMAT.md,
//! "Catalog", the module list after the statistics): today stored procedures (type 'P'),
//! each with its object id (from the catalog's next object id, the id space of tables and
//! constraints), schema, name, dates, the definition exactly as the client sent it, the SET
//! options it was created under, and its parameters (sys.parameters). SQL Server keeps the
//! same in sys.sysschobjs, sys.sysobjvalues and sys.syscolpars.
//!
//! The definition is the module's one source of truth: the SQL layer parses it again to run
//! the module. The parameter list is what CREATE found in it, kept for the catalog views.
//!
//! Invariants (checked by `check`, called by `Catalog::check_invariants`):
//! 1. Object ids are unique among modules and are no table's, index's or constraint's id,
//!    and each is below the catalog's next object id.
//! 2. (schema id, name) is unique among modules, case-insensitively, and no table of that
//!    schema bears the name; the schema is dbo (1), the only one there is.
//! 3. The type is 'P' (a procedure); any other byte is damage.
//! 4. The definition is at most `MAX_DEFINITION_BYTES` of UTF-8, and is not empty.
//! 5. Parameter names start with '@', are unique case-insensitively, and there are at most
//!    `MAX_PARAMETERS` of them.
//! 6. modify_date is not before create_date.
//!
//! What is not here: parsing the definition, permissions, locks (the SQL layer's
//! procedures.rs), the catalog save (storage's structure.rs).

use crate::codec::{Reader, Writer};
use crate::{corrupt, FormatError, PageId};

/// A definition's bytes at most. SQL Server's nvarchar(max) allows 2 GB; every catalog save
/// rewrites and logs the whole catalog, so the catalog bounds it far lower, and CREATE past
/// it gets Msg 103 (`Catalog::check_lengths`) instead of a save that grows without bound.
pub const MAX_DEFINITION_BYTES: usize = 4 * 1024 * 1024;
/// Parameters one procedure declares at most (SQL Server's 2,100, Msg 180 past it).
pub const MAX_PARAMETERS: usize = 2100;
/// The schema modules live in: dbo.
pub const DBO_SCHEMA_ID: u32 = 1;

const ANSI_NULLS: u8 = 1;
const QUOTED_IDENTIFIER: u8 = 2;
const RECOMPILED: u8 = 4;
const IS_OUTPUT: u8 = 1;
const HAS_DEFAULT: u8 = 2;

/// A module's kind (sys.objects.type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleType {
    /// 'P', SQL_STORED_PROCEDURE.
    Procedure,
}

impl ModuleType {
    pub fn code(self) -> &'static str {
        match self {
            ModuleType::Procedure => "P ",
        }
    }
    pub fn desc(self) -> &'static str {
        match self {
            ModuleType::Procedure => "SQL_STORED_PROCEDURE",
        }
    }
}

/// One module (sys.objects, sys.sql_modules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleEntry {
    pub object_id: u32,
    pub schema_id: u32,
    pub name: String,
    pub module_type: ModuleType,
    /// µs since the Unix epoch (sys.objects.create_date, modify_date: ALTER changes it).
    pub created_us: i64,
    pub modified_us: i64,
    /// The CREATE statement's batch as the client sent it (sys.sql_modules.definition).
    pub definition: String,
    /// SET ANSI_NULLS and QUOTED_IDENTIFIER when it was created or last altered.
    pub uses_ansi_nulls: bool,
    pub uses_quoted_identifier: bool,
    /// WITH RECOMPILE (sys.sql_modules.is_recompiled).
    pub is_recompiled: bool,
    pub parameters: Vec<ParameterEntry>,
}

/// A procedure's parameter (sys.parameters; parameter_id is its place, from 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParameterEntry {
    /// With its '@'.
    pub name: String,
    pub system_type_id: u8,
    /// Bytes, as sys.parameters.max_length (-1 for MAX).
    pub max_length: i16,
    pub precision: u8,
    pub scale: u8,
    pub is_output: bool,
    /// The default's T-SQL text as written (`= 10`, `= N'x'`, `= NULL`); None: required.
    pub default_sql: Option<String>,
}

/// The list as version 15 lays it out after the statistics: u32 count, then each module:
/// object id u32, schema id u32, name, type u8 (b'P'), created µs i64, modified µs i64,
/// flags u8 (bit 0 ANSI_NULLS, bit 1 QUOTED_IDENTIFIER, bit 2 WITH RECOMPILE), the definition as u32 byte length
/// and UTF-8, u16 parameter count and per parameter: name, system type id u8, max length
/// i16, precision u8, scale u8, flags u8 (bit 0 OUTPUT, bit 1 has a default) and the
/// default's text when it has one.
pub fn encode(w: &mut Writer, list: &[ModuleEntry]) {
    w.u32(list.len() as u32);
    for m in list {
        assert!(
            m.definition.len() <= MAX_DEFINITION_BYTES,
            "invariant 4: checked by check_lengths before a save"
        );
        w.u32(m.object_id);
        w.u32(m.schema_id);
        w.string(&m.name);
        w.u8(match m.module_type {
            ModuleType::Procedure => b'P',
        });
        w.i64(m.created_us);
        w.i64(m.modified_us);
        w.u8(flag(m.uses_ansi_nulls, ANSI_NULLS)
            | flag(m.uses_quoted_identifier, QUOTED_IDENTIFIER)
            | flag(m.is_recompiled, RECOMPILED));
        w.u32(m.definition.len() as u32);
        w.raw(m.definition.as_bytes());
        w.u16(m.parameters.len() as u16);
        for p in &m.parameters {
            encode_parameter(w, p);
        }
    }
}

fn flag(set: bool, bit: u8) -> u8 {
    if set {
        bit
    } else {
        0
    }
}

fn encode_parameter(w: &mut Writer, p: &ParameterEntry) {
    w.string(&p.name);
    w.u8(p.system_type_id);
    w.u16(p.max_length as u16);
    w.u8(p.precision);
    w.u8(p.scale);
    w.u8(flag(p.is_output, IS_OUTPUT) | flag(p.default_sql.is_some(), HAS_DEFAULT));
    if let Some(d) = &p.default_sql {
        w.string(d);
    }
}

/// Decodes the list `encode` wrote; `limit` bounds its count by the blob's length.
pub fn decode(r: &mut Reader<'_>, limit: usize) -> Result<Vec<ModuleEntry>, FormatError> {
    let at = PageId::NULL;
    let n = r.u32()? as usize;
    if n > limit {
        return Err(corrupt(at, format!("module count {n} exceeds the catalog")));
    }
    let mut list = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        let object_id = r.u32()?;
        let schema_id = r.u32()?;
        let name = r.string()?;
        let module_type = match r.u8()? {
            b'P' => ModuleType::Procedure,
            t => return Err(corrupt(at, format!("module {object_id} has type {t}"))),
        };
        let created_us = r.i64()?;
        let modified_us = r.i64()?;
        let flags = r.u8()?;
        if flags & !(ANSI_NULLS | QUOTED_IDENTIFIER | RECOMPILED) != 0 {
            return Err(corrupt(at, format!("module {object_id} has flags {flags}")));
        }
        let definition = long_string(r, object_id)?;
        let mut parameters = Vec::new();
        for _ in 0..r.u16()? {
            parameters.push(decode_parameter(r, object_id)?);
        }
        list.push(ModuleEntry {
            object_id,
            schema_id,
            name,
            module_type,
            created_us,
            modified_us,
            definition,
            uses_ansi_nulls: flags & ANSI_NULLS != 0,
            uses_quoted_identifier: flags & QUOTED_IDENTIFIER != 0,
            is_recompiled: flags & RECOMPILED != 0,
            parameters,
        });
    }
    Ok(list)
}

/// A u32 byte length (at most `MAX_DEFINITION_BYTES`, invariant 4) and UTF-8.
fn long_string(r: &mut Reader<'_>, object_id: u32) -> Result<String, FormatError> {
    let len = r.u32()? as usize;
    if len > MAX_DEFINITION_BYTES {
        return Err(corrupt(
            PageId::NULL,
            format!("module {object_id}'s definition of {len} bytes exceeds the bound"),
        ));
    }
    let bytes = r.take(len)?;
    String::from_utf8(bytes.to_vec()).map_err(|_| {
        corrupt(
            PageId::NULL,
            format!("module {object_id}'s definition is not UTF-8"),
        )
    })
}

fn decode_parameter(r: &mut Reader<'_>, object_id: u32) -> Result<ParameterEntry, FormatError> {
    let name = r.string()?;
    let system_type_id = r.u8()?;
    let max_length = r.u16()? as i16;
    let precision = r.u8()?;
    let scale = r.u8()?;
    let flags = r.u8()?;
    if flags & !(IS_OUTPUT | HAS_DEFAULT) != 0 {
        return Err(corrupt(
            PageId::NULL,
            format!("parameter {name} of module {object_id} has flags {flags}"),
        ));
    }
    let default_sql = match flags & HAS_DEFAULT != 0 {
        true => Some(r.string()?),
        false => None,
    };
    Ok(ParameterEntry {
        name,
        system_type_id,
        max_length,
        precision,
        scale,
        is_output: flags & IS_OUTPUT != 0,
        default_sql,
    })
}

/// Invariants 1, 2, 5 and 6 (3 and 4 hold by decoding); `other_ids` are the ids of the
/// catalog's tables, indexes and constraints, `table_named` says whether a dbo table bears a
/// name.
pub fn check(
    list: &[ModuleEntry],
    other_ids: &std::collections::HashSet<u32>,
    table_named: &dyn Fn(&str) -> bool,
    next_object_id: u32,
) -> Result<(), String> {
    let mut ids = std::collections::HashSet::new();
    let mut names = std::collections::HashSet::new();
    for m in list {
        if !ids.insert(m.object_id) || other_ids.contains(&m.object_id) {
            return Err(format!("module {} has an object id in use", m.name));
        }
        if m.object_id >= next_object_id {
            return Err(format!("module {} has an id past the next", m.name));
        }
        if m.schema_id != DBO_SCHEMA_ID {
            return Err(format!("module {} is in schema {}", m.name, m.schema_id));
        }
        if !names.insert(m.name.to_lowercase()) || table_named(&m.name) {
            return Err(format!("module name {} is taken twice", m.name));
        }
        if m.definition.is_empty() {
            return Err(format!("module {} has no definition", m.name));
        }
        if m.modified_us < m.created_us {
            return Err(format!("module {} was modified before it was made", m.name));
        }
        check_parameters(m)?;
    }
    Ok(())
}

fn check_parameters(m: &ModuleEntry) -> Result<(), String> {
    if m.parameters.len() > MAX_PARAMETERS {
        return Err(format!("module {} has too many parameters", m.name));
    }
    let mut names = std::collections::HashSet::new();
    for p in &m.parameters {
        if !p.name.starts_with('@') || !names.insert(p.name.to_lowercase()) {
            return Err(format!(
                "module {} has parameter {} twice or unnamed",
                m.name, p.name
            ));
        }
    }
    Ok(())
}
