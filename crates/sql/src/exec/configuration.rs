//! Server configuration as a DBA meets it: sys.configurations, sp_configure and
//! RECONFIGURE [WITH OVERRIDE], over the instance's settings
//! (`extentdb_storage::configurations`: SQL Server 2022's options, persisted beside the
//! logins, installed at start).
//!
//! sp_configure: no argument lists every option (the advanced ones only while
//! 'show advanced options' is 1 in use), ordered by name, as name, minimum, maximum,
//! config_value, run_value; one name gives its row; a name and a value set the configured
//! value (Msg 15457 tells the change, to the client and the ERRORLOG; RECONFIGURE installs
//! it). A name matches an option
//! spelled the same (any case) or, failing that, every option whose name contains it, as
//! SQL Server's `LIKE '%name%'`: one match is that option, several are Msg 15124 with their
//! names as `duplicate_options`, none (or only advanced ones while hidden) Msg 15123.
//!
//! Which options act in extentdb (the rest are listed with SQL Server's default, and
//! setting another value is refused with 40517 naming the option, never accepted and
//! ignored, because a DBA who sets one expects its effect):
//! - 'show advanced options': sp_configure shows and sets advanced options.
//! - 'max server memory (MB)': the buffer pools' shared cap, dynamic; a lowered cap is
//!   reached as pools next take a frame (each evicts its own pages while the instance is
//!   over it). Its default is the cap `extentdb setup --max-server-memory-mb` wrote
//!   (1024), not SQL Server's 2147483647, because that is the cap in use.
//!   sys.dm_os_sys_info.committed_target_kb shows the cap in use.
//! - 'backup compression default' / 'backup checksum default': BACKUP without
//!   COMPRESSION / NO_COMPRESSION (CHECKSUM / NO_CHECKSUM) follows them.
//! - 'max degree of parallelism': the checking workers of DBCC CHECKDB / CHECKTABLE /
//!   CHECKALLOC without MAXDOP (0 = one per CPU). Queries run on one thread whatever it
//!   says, as a query with OPTION (MAXDOP 1) does.
//! - 'user connections' (static): `extentdb serve` accepts at most that many connections
//!   (fewer if --max-connections says so) from the start after it is set; 0 leaves
//!   --max-connections alone.
//! - 'allow updates': has no effect in SQL Server since 2005 either; RECONFIGURE refuses
//!   a configured 1 with Msg 5808, RECONFIGURE WITH OVERRIDE installs it.
//!
//! Invariants:
//! 1. Listing needs no permission; a change (sp_configure with a value) needs ALTER
//!    SETTINGS (sysadmin, serveradmin), else Msg 15247 and nothing changes; RECONFIGURE
//!    needs it too, else Msg 5812.
//! 2. Neither runs inside a user transaction (Msg 574): a configuration change is not
//!    transactional, so it could not be rolled back with the transaction.
//! 3. A refused change changes nothing: every check comes before the storage's `set`,
//!    which writes the file before the value is seen.
//!
//! Differences from SQL Server kept on purpose: value, minimum, maximum and value_in_use
//! are int, not sql_variant (extentdb has no sql_variant; CAST(value AS int), the way
//! scripts read them, gives the same).

use extentdb_storage::configurations::{
    ConfigOption, Effect, Setting, ALLOW_UPDATES, BACKUP_CHECKSUM_DEFAULT,
    BACKUP_COMPRESSION_DEFAULT, MAX_DEGREE_OF_PARALLELISM, MAX_SERVER_MEMORY, OPTIONS,
    SHOW_ADVANCED_OPTIONS,
};
use extentdb_storage::instance::Instance;

use super::lower::not_yet;
use super::views::{cols, text, Rowset};
use super::{Out, Output, Session};
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value};

/// sp_configure's parameters, by position.
pub(super) const SP_CONFIGURE_PARAMS: &[&str] = &["@configname", "@configvalue"];

/// The lines of sp_configure's text where SQL Server raises these (as clients show).
const LINE_15123: u32 = 62;
const LINE_15457: u32 = 185;

/// sys.configurations, in configuration_id order.
pub(super) fn sys_configurations(inst: &Instance) -> Rowset {
    let rows = inst
        .configurations
        .snapshot()
        .into_iter()
        .map(|(o, s)| {
            vec![
                Value::Int(o.id),
                text(o.name),
                Value::Int(s.value),
                Value::Int(o.minimum),
                Value::Int(o.maximum),
                Value::Int(s.value_in_use),
                text(o.description),
                Value::Bit(o.is_dynamic),
                Value::Bit(o.is_advanced),
            ]
        })
        .collect();
    Rowset {
        columns: cols(&[
            ("configuration_id", SqlType::Int),
            ("name", SqlType::NVarChar(35)),
            ("value", SqlType::Int),
            ("minimum", SqlType::Int),
            ("maximum", SqlType::Int),
            ("value_in_use", SqlType::Int),
            ("description", SqlType::NVarChar(255)),
            ("is_dynamic", SqlType::Bit),
            ("is_advanced", SqlType::Bit),
        ]),
        rows,
    }
}

/// The BACKUP defaults in use: (compression, checksum).
pub(super) fn backup_defaults(inst: &Instance) -> (bool, bool) {
    let on = |id| inst.configurations.get(id).value_in_use == 1;
    (on(BACKUP_COMPRESSION_DEFAULT), on(BACKUP_CHECKSUM_DEFAULT))
}

/// 'max server memory (MB)' in use (a RECONFIGURE changes it while the server runs).
pub(super) fn max_server_memory_mb(inst: &Instance) -> u32 {
    let v = inst.configurations.get(MAX_SERVER_MEMORY).value_in_use;
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// DBCC's checking workers when the command names no MAXDOP.
pub(super) fn default_maxdop(inst: &Instance) -> usize {
    inst.configurations
        .get(MAX_DEGREE_OF_PARALLELISM)
        .value_in_use
        .max(0) as usize
}

fn config_row(o: &ConfigOption, s: Setting) -> Vec<Value> {
    vec![
        text(o.name),
        Value::Int(o.minimum),
        Value::Int(o.maximum),
        Value::Int(s.value),
        Value::Int(s.value_in_use),
    ]
}

fn sp_configure_columns() -> Vec<(String, SqlType)> {
    cols(&[
        ("name", SqlType::NVarChar(35)),
        ("minimum", SqlType::Int),
        ("maximum", SqlType::Int),
        ("config_value", SqlType::Int),
        ("run_value", SqlType::Int),
    ])
}

/// The option `name` names, among those sp_configure shows now (module docs).
fn find_option(
    name: &str,
    show_advanced: bool,
) -> Result<&'static ConfigOption, (SqlError, Vec<&'static str>)> {
    let visible = || OPTIONS.iter().filter(|o| show_advanced || !o.is_advanced);
    if let Some(o) = visible().find(|o| o.name.eq_ignore_ascii_case(name)) {
        return Ok(o);
    }
    let needle = name.to_lowercase();
    let found: Vec<&ConfigOption> = visible()
        .filter(|o| o.name.to_lowercase().contains(&needle))
        .collect();
    match found.as_slice() {
        [o] => Ok(o),
        [] => Err((
            msg(15123, &[&name]).in_procedure("sp_configure", LINE_15123),
            Vec::new(),
        )),
        many => {
            let mut names: Vec<&str> = many.iter().map(|o| o.name).collect();
            names.sort_by_key(|n| n.to_lowercase());
            Err((msg(15124, &[&name]), names))
        }
    }
}

impl Session {
    /// sp_configure [@configname [, @configvalue]] (module docs).
    pub(super) fn sp_configure(
        &mut self,
        args: &[Value],
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        let name = match args.first() {
            Some(v) if !v.is_null() => Some(super::eval::to_text(v)),
            _ => None,
        };
        let value = match args.get(1) {
            Some(v) if !v.is_null() => Some(as_int(v)?),
            _ => None,
        };
        let inst = self.engine.instance.clone();
        if value.is_some() {
            self.may_change_configuration(15247)?;
        }
        let show_advanced = inst.configurations.get(SHOW_ADVANCED_OPTIONS).value_in_use == 1;
        let Some(name) = name else {
            let mut rows: Vec<Vec<Value>> = inst
                .configurations
                .snapshot()
                .into_iter()
                .filter(|(o, _)| show_advanced || !o.is_advanced)
                .map(|(o, s)| config_row(o, s))
                .collect();
            rows.sort_by_key(|r| super::eval::to_text(&r[0]).to_lowercase());
            self.send_rowset(
                Rowset {
                    columns: sp_configure_columns(),
                    rows,
                },
                out,
            );
            return Ok(());
        };
        let o = find_option(&name, show_advanced).map_err(|(e, names)| {
            if !names.is_empty() {
                out.push(Output::Rows {
                    columns: cols(&[("duplicate_options", SqlType::NVarChar(35))]),
                    rows: names.into_iter().map(|n| vec![text(n)]).collect(),
                });
            }
            vec![e]
        })?;
        match value {
            None => {
                let row = config_row(o, inst.configurations.get(o.id));
                self.send_rowset(
                    Rowset {
                        columns: sp_configure_columns(),
                        rows: vec![row],
                    },
                    out,
                );
            }
            Some(v) => self.configure(o, v, out)?,
        }
        Ok(())
    }

    /// Sets option `o`'s configured value to `v` (invariant 3).
    fn configure(&mut self, o: &ConfigOption, v: i32, out: &mut Out) -> Result<(), Vec<SqlError>> {
        if !(o.minimum..=o.maximum).contains(&v) {
            return Err(vec![msg(15129, &[&v, &o.name])]);
        }
        if o.effect == Effect::DefaultOnly && v != o.default {
            return Err(vec![not_yet(&format!(
                "the configuration option '{}' at a value other than its default ({})",
                o.name, o.default
            ))]);
        }
        let old = self
            .engine
            .instance
            .configurations
            .set(o.id, v)
            .map_err(|e| vec![msg(3634, &[&e.to_string(), &"write", &"configurations"])])?;
        let info = msg(15457, &[&o.name, &old, &v]).in_procedure("sp_configure", LINE_15457);
        // SQL Server logs the change too.
        self.engine
            .instance
            .errorlog
            .write(&format!("spid{}", self.spid), &info.text);
        out.push(Output::Info(info));
        Ok(())
    }

    /// RECONFIGURE [WITH OVERRIDE]: installs the dynamic options' configured values.
    pub(super) fn reconfigure(&mut self, with_override: bool) -> Result<(), Vec<SqlError>> {
        self.may_change_configuration(5812)?;
        let inst = self.engine.instance.clone();
        if !with_override && inst.configurations.get(ALLOW_UPDATES).value == 1 {
            return Err(vec![msg(5808, &[])]);
        }
        inst.reconfigure();
        Ok(())
    }

    /// Invariants 1 and 2: `denied` is the message without ALTER SETTINGS.
    fn may_change_configuration(&self, denied: i32) -> Result<(), Vec<SqlError>> {
        if self.trancount > 0 {
            return Err(vec![msg(574, &[])]);
        }
        if !self.has_server_permission("ALTER SETTINGS") {
            return Err(vec![msg(denied, &[])]);
        }
        Ok(())
    }
}

/// sp_configure's @configvalue, an int (a string of digits converts, as SQL Server's).
fn as_int(v: &Value) -> Result<i32, Vec<SqlError>> {
    match crate::convert::convert(v, SqlType::Int, None).map_err(|e| vec![e])? {
        Value::Int(i) => Ok(i),
        _ => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::ast::StatementKind;
    use crate::exec::{Engine, Output};

    /// 'max degree of parallelism' in use is DBCC CHECKDB's worker count when the command
    /// names no MAXDOP, and MAXDOP = n still wins (the settings the check runs with).
    #[test]
    fn max_degree_of_parallelism_is_checkdbs_default() {
        let dir = std::env::temp_dir().join(format!("xdb-conf-maxdop-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let fs: Arc<dyn extentdb_io::FileSystem> = extentdb_io::os::OsFileSystem::new();
        let mut config = extentdb_storage::config::InstanceConfig::defaults(&dir);
        config.max_server_memory_mb = 64;
        let setup = extentdb_storage::instance::SetupOptions {
            config,
            sa_password: None,
        };
        extentdb_storage::Instance::setup(fs.clone(), &dir, setup).unwrap();
        let instance = Arc::new(extentdb_storage::Instance::start(fs, &dir, &[]).unwrap());
        let engine = Engine::new(instance);
        let mut s = engine.session();
        let maxdop = |s: &mut super::Session, sql: &str| {
            let stmt = crate::parser::parse_batch(sql).unwrap().remove(0);
            let StatementKind::Dbcc(d) = &stmt.kind else {
                panic!("{sql}")
            };
            s.check_settings(d).unwrap().maxdop
        };
        assert_eq!(maxdop(&mut s, "DBCC CHECKDB (master)"), 0);
        let out = s.execute(
            "EXEC sp_configure 'show advanced options', 1; RECONFIGURE;
             EXEC sp_configure 'max degree of parallelism', 3",
        );
        assert!(
            !out.iter().any(|o| matches!(o, Output::Error(_))),
            "{out:?}"
        );
        assert_eq!(
            maxdop(&mut s, "DBCC CHECKDB (master)"),
            0,
            "not installed yet"
        );
        s.execute("RECONFIGURE");
        assert_eq!(maxdop(&mut s, "DBCC CHECKDB (master)"), 3);
        assert_eq!(maxdop(&mut s, "DBCC CHECKTABLE ('sys.objects')"), 3);
        assert_eq!(maxdop(&mut s, "DBCC CHECKDB (master) WITH MAXDOP = 2"), 2);
        drop(s);
        drop(engine);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
