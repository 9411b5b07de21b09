//! The server configuration options (SQL Server's `sys.configurations`, set by
//! `sp_configure`, installed by `RECONFIGURE`): SQL Server 2022's list of options with their
//! ids, bounds, defaults and descriptions (`OPTIONS`), and each option's configured value
//! and value in use.
//!
//! Only configured values that differ from the default are stored, in `DIR/configurations`
//! beside the logins (`logins.rs`), one `id<TAB>value<TAB>name` line each, rewritten
//! durably (a temporary file, fsync, rename, fsync of the directory) on each change. At
//! start every configured value is installed (SQL Server installs them all at start-up, so
//! a static option's new value is in use after a restart, not before).
//!
//! States of one option:
//! ```text
//!   value == in_use --sp_configure v--> value = v, in_use unchanged (pending)
//!   pending --RECONFIGURE, option dynamic--> in_use = value
//!   pending --RECONFIGURE, option static--> pending until the next start
//!   pending --start--> in_use = value
//! ```
//!
//! Invariants:
//! 1. Every value held is within its option's `minimum..=maximum`, except an instance's
//!    own default for 'max server memory (MB)' (the cap `extentdb setup` wrote, which may
//!    be below SQL Server's minimum of 128).
//! 2. The file on disk always holds a complete list: a crash during a change leaves the
//!    old list or the new one (`write_durably`).
//! 3. One change at a time: `set` and `install` hold the write lock across the file write,
//!    so two sessions' sp_configure calls are applied one after the other and every reader
//!    sees a state one of them left.
//! 4. A value in use only changes through `install` (RECONFIGURE) or at start.
//!
//! What each option does in extentdb is decided by the SQL layer (`sql/src/exec/
//! configuration.rs`); `Effect` records which ones have one. This module does not check
//! permissions nor produce messages.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

/// Whether extentdb honours an option's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Every value in range is honoured.
    Built,
    /// Only SQL Server's default: another value is refused (40517), never accepted and
    /// ignored.
    DefaultOnly,
}

/// One row of SQL Server 2022's sys.configurations, as a fresh instance shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigOption {
    pub id: i32,
    pub name: &'static str,
    pub minimum: i32,
    pub maximum: i32,
    pub default: i32,
    pub is_dynamic: bool,
    pub is_advanced: bool,
    pub description: &'static str,
    pub effect: Effect,
}

pub const SHOW_ADVANCED_OPTIONS: i32 = 518;
pub const ALLOW_UPDATES: i32 = 102;
pub const RECOVERY_INTERVAL: i32 = 101;
pub const USER_CONNECTIONS: i32 = 103;
pub const MAX_DEGREE_OF_PARALLELISM: i32 = 1539;
pub const MAX_SERVER_MEMORY: i32 = 1544;
pub const BACKUP_COMPRESSION_DEFAULT: i32 = 1579;
pub const BACKUP_CHECKSUM_DEFAULT: i32 = 1584;

const MAX: i32 = i32::MAX;
const MIN: i32 = i32::MIN;

const fn o(
    id: i32,
    name: &'static str,
    (minimum, maximum, default): (i32, i32, i32),
    (is_dynamic, is_advanced): (bool, bool),
    description: &'static str,
    effect: Effect,
) -> ConfigOption {
    ConfigOption {
        id,
        name,
        minimum,
        maximum,
        default,
        is_dynamic,
        is_advanced,
        description,
        effect,
    }
}

use Effect::{Built as B, DefaultOnly as D};

/// SQL Server 2022's options in configuration_id order: (minimum, maximum, default),
/// (is_dynamic, is_advanced), description, and whether extentdb honours other values.
pub const OPTIONS: &[ConfigOption] = &[
    o(101, "recovery interval (min)", (0, 32767, 0), (true, true), "Maximum recovery interval in minutes", D),
    o(102, "allow updates", (0, 1, 0), (true, false), "Allow updates to system tables", B),
    o(103, "user connections", (0, 32767, 0), (false, true), "Number of user connections allowed", B),
    o(106, "locks", (5000, MAX, 0), (false, true), "Number of locks for all users", D),
    o(107, "open objects", (0, MAX, 0), (false, true), "Number of open database objects", D),
    o(109, "fill factor (%)", (0, 100, 0), (false, true), "Default fill factor percentage", D),
    o(114, "disallow results from triggers", (0, 1, 0), (true, true), "Disallow returning results from triggers", D),
    o(115, "nested triggers", (0, 1, 1), (true, false), "Allow triggers to be invoked within triggers", D),
    o(116, "server trigger recursion", (0, 1, 1), (true, false), "Allow recursion for server level triggers", D),
    o(117, "remote access", (0, 1, 1), (false, false), "Allow remote access", D),
    o(124, "default language", (0, 9999, 0), (true, false), "default language", D),
    o(400, "cross db ownership chaining", (0, 1, 0), (true, false), "Allow cross db ownership chaining", D),
    o(503, "max worker threads", (128, 65535, 0), (true, true), "Maximum worker threads", D),
    o(505, "network packet size (B)", (512, 32767, 4096), (true, true), "Network packet size", D),
    o(518, "show advanced options", (0, 1, 0), (true, false), "show advanced options", B),
    o(542, "remote proc trans", (0, 1, 0), (true, false), "Create DTC transaction for remote procedures", D),
    o(544, "c2 audit mode", (0, 1, 0), (false, true), "c2 audit mode", D),
    o(1126, "default full-text language", (0, MAX, 1033), (true, true), "default full-text language", D),
    o(1127, "two digit year cutoff", (1753, 9999, 2049), (true, true), "two digit year cutoff", D),
    o(1505, "index create memory (KB)", (704, MAX, 0), (true, true), "Memory for index create sorts (kBytes)", D),
    o(1517, "priority boost", (0, 1, 0), (false, true), "Priority boost", D),
    o(1519, "remote login timeout (s)", (0, MAX, 10), (true, false), "remote login timeout", D),
    o(1520, "remote query timeout (s)", (0, MAX, 600), (true, false), "remote query timeout", D),
    o(1531, "cursor threshold", (-1, MAX, -1), (true, true), "cursor threshold", D),
    o(1532, "set working set size", (0, 1, 0), (false, true), "set working set size", D),
    o(1534, "user options", (0, 32767, 0), (true, false), "user options", D),
    o(1535, "affinity mask", (MIN, MAX, 0), (true, true), "affinity mask", D),
    o(1536, "max text repl size (B)", (-1, MAX, 65536), (true, false), "Maximum size of a text field in replication.", D),
    o(1537, "media retention", (0, 365, 0), (true, true), "Tape retention period in days", D),
    o(1538, "cost threshold for parallelism", (0, 32767, 5), (true, true), "cost threshold for parallelism", D),
    o(1539, "max degree of parallelism", (0, 32767, 0), (true, true), "maximum degree of parallelism", B),
    o(1540, "min memory per query (KB)", (512, MAX, 1024), (true, true), "minimum memory per query (kBytes)", D),
    o(1541, "query wait (s)", (-1, MAX, -1), (true, true), "maximum time to wait for query memory (s)", D),
    o(1543, "min server memory (MB)", (0, MAX, 0), (true, true), "Minimum size of server memory (MB)", D),
    o(1544, "max server memory (MB)", (128, MAX, MAX), (true, true), "Maximum size of server memory (MB)", B),
    o(1545, "query governor cost limit", (0, MAX, 0), (true, true), "Maximum estimated cost allowed by query governor", D),
    o(1546, "lightweight pooling", (0, 1, 0), (false, true), "User mode scheduler uses lightweight pooling", D),
    o(1547, "scan for startup procs", (0, 1, 0), (false, true), "scan for startup stored procedures", D),
    o(1549, "affinity64 mask", (MIN, MAX, 0), (true, true), "affinity64 mask", D),
    o(1550, "affinity I/O mask", (MIN, MAX, 0), (false, true), "affinity I/O mask", D),
    o(1551, "affinity64 I/O mask", (MIN, MAX, 0), (false, true), "affinity64 I/O mask", D),
    o(1555, "transform noise words", (0, 1, 0), (true, true), "Transform noise words for full-text query", D),
    o(1556, "precompute rank", (0, 1, 0), (true, true), "Use precomputed rank for full-text query", D),
    o(1557, "PH timeout (s)", (1, 3600, 60), (true, true), "DB connection timeout for full-text protocol handler (s)", D),
    o(1562, "clr enabled", (0, 1, 0), (true, false), "CLR user code execution enabled in the server", D),
    o(1563, "max full-text crawl range", (0, 256, 4), (true, true), "Maximum  crawl ranges allowed in full-text indexing", D),
    o(1564, "ft notify bandwidth (min)", (0, 32767, 0), (true, true), "Number of reserved full-text notifications buffers", D),
    o(1565, "ft notify bandwidth (max)", (0, 32767, 100), (true, true), "Max number of full-text notifications buffers", D),
    o(1566, "ft crawl bandwidth (min)", (0, 32767, 0), (true, true), "Number of reserved full-text crawl buffers", D),
    o(1567, "ft crawl bandwidth (max)", (0, 32767, 100), (true, true), "Max number of full-text crawl buffers", D),
    o(1568, "default trace enabled", (0, 1, 1), (true, true), "Enable or disable the default trace", D),
    o(1569, "blocked process threshold (s)", (0, 86400, 0), (true, true), "Blocked process reporting threshold", D),
    o(1570, "in-doubt xact resolution", (0, 2, 0), (true, true), "Recovery policy for DTC transactions with unknown outcome", D),
    o(1576, "remote admin connections", (0, 1, 0), (true, false), "Dedicated Admin Connections are allowed from remote clients", D),
    o(1577, "common criteria compliance enabled", (0, 1, 0), (false, true), "Common Criteria compliance mode enabled", D),
    o(1578, "EKM provider enabled", (0, 1, 0), (true, true), "Enable or disable EKM provider", D),
    o(1579, "backup compression default", (0, 1, 0), (true, false), "Enable compression of backups by default", B),
    o(1580, "filestream access level", (0, 2, 0), (true, false), "Sets the FILESTREAM access level", D),
    o(1581, "optimize for ad hoc workloads", (0, 1, 0), (true, true), "When this option is set, plan cache size is further reduced for single-use adhoc OLTP workload.", D),
    o(1582, "access check cache bucket count", (0, 65536, 0), (true, true), "Default hash bucket count for the access check result security cache", D),
    o(1583, "access check cache quota", (0, MAX, 0), (true, true), "Default quota for the access check result security cache", D),
    o(1584, "backup checksum default", (0, 1, 0), (true, false), "Enable checksum of backups by default", B),
    o(1585, "automatic soft-NUMA disabled", (0, 1, 0), (false, true), "Automatic soft-NUMA is enabled by default", D),
    o(1586, "external scripts enabled", (0, 1, 0), (false, false), "Allows execution of external scripts", D),
    o(1587, "clr strict security", (0, 1, 1), (true, true), "CLR strict security enabled in the server", D),
    o(1588, "column encryption enclave type", (0, 2, 0), (false, false), "Type of enclave used for computations on encrypted columns", D),
    o(1589, "tempdb metadata memory-optimized", (0, 1, 0), (false, true), "Tempdb metadata memory-optimized is disabled by default.", D),
    o(1591, "ADR cleaner retry timeout (min)", (0, 32767, 15), (true, true), "ADR cleaner retry timeout.", D),
    o(1592, "ADR Preallocation Factor", (0, 32767, 4), (true, true), "ADR Preallocation Factor.", D),
    o(1593, "version high part of SQL Server", (MIN, MAX, 1_048_576), (true, true), "version high part of SQL Server that model database copied for", D),
    o(1594, "version low part of SQL Server", (MIN, MAX, 0), (true, true), "version low part of SQL Server that model database copied for", D),
    o(1595, "Data processed daily limit in TB", (0, MAX, MAX), (true, false), "SQL On-demand data processed daily limit in TB", D),
    o(1596, "Data processed weekly limit in TB", (0, MAX, MAX), (true, false), "SQL On-demand data processed weekly limit in TB", D),
    o(1597, "Data processed monthly limit in TB", (0, MAX, MAX), (true, false), "SQL On-demand data processed monthly limit in TB", D),
    o(1598, "ADR Cleaner Thread Count", (1, 32767, 1), (true, true), "Max number of threads ADR cleaner can assign.", D),
    o(1599, "hardware offload enabled", (0, 1, 0), (false, true), "Enable hardware offloading on the server", D),
    o(1600, "hardware offload config", (0, 255, 0), (false, true), "Configure hardware offload accelerator", D),
    o(1601, "hardware offload mode", (0, 255, 0), (false, true), "Configure hardware offload accelerator mode", D),
    o(1602, "backup compression algorithm", (0, 3, 0), (true, false), "Configure default backup compression algorithm", D),
    o(16384, "Agent XPs", (0, 1, 0), (true, true), "Enable or disable Agent XPs", D),
    o(16386, "Database Mail XPs", (0, 1, 0), (true, true), "Enable or disable Database Mail XPs", D),
    o(16387, "SMO and DMO XPs", (0, 1, 1), (true, true), "Enable or disable SMO and DMO XPs", D),
    o(16388, "Ole Automation Procedures", (0, 1, 0), (true, true), "Enable or disable Ole Automation Procedures", D),
    o(16390, "xp_cmdshell", (0, 1, 0), (true, true), "Enable or disable command shell", D),
    o(16391, "Ad Hoc Distributed Queries", (0, 1, 0), (true, true), "Enable or disable Ad Hoc Distributed Queries", D),
    o(16392, "Replication XPs", (0, 1, 0), (true, true), "Enable or disable Replication XPs", D),
    o(16393, "contained database authentication", (0, 1, 0), (true, false), "Enables contained databases and contained authentication", D),
    o(16394, "hadoop connectivity", (0, 7, 0), (false, false), "Configure SQL Server to connect to external Hadoop or Microsoft Azure storage blob data sources through PolyBase", D),
    o(16395, "polybase network encryption", (0, 1, 1), (true, false), "Configure SQL Server to encrypt control and data channels when using PolyBase", D),
    o(16396, "remote data archive", (0, 1, 0), (true, false), "Allow the use of the REMOTE_DATA_ARCHIVE data access for databases", D),
    o(16397, "allow polybase export", (0, 1, 0), (true, false), "Allows writing into an external table using PolyBase", D),
    o(16398, "allow filesystem enumeration", (0, 1, 1), (true, true), "Allow enumeration of filesystem", D),
    o(16399, "polybase enabled", (0, 1, 0), (true, false), "Configure SQL Server to connect to external data sources through PolyBase", D),
];

/// The option with id `id`.
pub fn option(id: i32) -> &'static ConfigOption {
    OPTIONS
        .iter()
        .find(|o| o.id == id)
        .unwrap_or_else(|| panic!("no configuration option {id}"))
}

/// One option's configured value and the value in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    pub value: i32,
    pub value_in_use: i32,
}

/// The instance's settings: the configured values and those in use (module docs).
pub struct Configurations {
    path: PathBuf,
    /// The instance's own defaults where they differ from SQL Server's (invariant 1).
    defaults: BTreeMap<i32, i32>,
    state: RwLock<BTreeMap<i32, Setting>>,
}

impl Configurations {
    /// Loads `DIR/configurations` and installs every configured value (a start).
    /// `defaults` overrides SQL Server's default of an option for this instance.
    pub fn load(dir: &Path, defaults: &[(i32, i32)]) -> std::io::Result<Configurations> {
        let path = dir.join("configurations");
        let defaults: BTreeMap<i32, i32> = defaults.iter().copied().collect();
        let mut state = BTreeMap::new();
        for o in OPTIONS {
            let d = defaults.get(&o.id).copied().unwrap_or(o.default);
            state.insert(
                o.id,
                Setting {
                    value: d,
                    value_in_use: d,
                },
            );
        }
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                for line in text.lines() {
                    let bad = || {
                        std::io::Error::other(format!(
                            "{}: cannot read line '{line}'",
                            path.display()
                        ))
                    };
                    let mut f = line.split('\t');
                    let (Some(id), Some(v)) = (f.next(), f.next()) else {
                        return Err(bad());
                    };
                    let (Ok(id), Ok(v)) = (id.parse::<i32>(), v.parse::<i32>()) else {
                        return Err(bad());
                    };
                    let s = state.get_mut(&id).ok_or_else(bad)?;
                    let o = option(id);
                    if !(o.minimum..=o.maximum).contains(&v) {
                        return Err(bad());
                    }
                    *s = Setting {
                        value: v,
                        value_in_use: v,
                    };
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let c = Configurations {
            path,
            defaults,
            state: RwLock::new(state),
        };
        c.check_invariants();
        Ok(c)
    }

    /// The setting of option `id` now.
    pub fn get(&self, id: i32) -> Setting {
        self.state.read().unwrap()[&id]
    }

    /// Every option's setting at one moment (invariant 3), in configuration_id order.
    pub fn snapshot(&self) -> Vec<(&'static ConfigOption, Setting)> {
        let state = self.state.read().unwrap();
        OPTIONS.iter().map(|o| (o, state[&o.id])).collect()
    }

    /// sp_configure's change: option `id`'s configured value becomes `value` (in range,
    /// checked by the caller), written durably before it is seen; returns the old one.
    pub fn set(&self, id: i32, value: i32) -> std::io::Result<i32> {
        let o = option(id);
        assert!(
            (o.minimum..=o.maximum).contains(&value),
            "{} out of range",
            o.name
        );
        let mut state = self.state.write().unwrap();
        let mut next = state.clone();
        let old = next
            .get_mut(&id)
            .map(|s| std::mem::replace(&mut s.value, value))
            .expect("known option");
        crate::instance::write_durably(&self.path, self.render(&next).as_bytes())?;
        *state = next;
        drop(state);
        self.check_invariants();
        Ok(old)
    }

    /// RECONFIGURE's install, all at once: every dynamic option's configured value comes
    /// into use (static ones wait for a start), and `apply` is called with each option
    /// whose value in use changed, under the lock (so two installs apply in the order they
    /// install, invariant 3). Returns those options with their new values.
    pub fn install(&self, apply: impl Fn(i32, i32)) -> Vec<(i32, i32)> {
        let mut state = self.state.write().unwrap();
        let mut changed = Vec::new();
        for o in OPTIONS.iter().filter(|o| o.is_dynamic) {
            let s = state.get_mut(&o.id).expect("every option has a setting");
            if s.value_in_use != s.value {
                s.value_in_use = s.value;
                apply(o.id, s.value);
                changed.push((o.id, s.value));
            }
        }
        changed
    }

    /// The file's text: the configured values that differ from the instance's defaults.
    fn render(&self, state: &BTreeMap<i32, Setting>) -> String {
        OPTIONS
            .iter()
            .filter(|o| state[&o.id].value != self.default_of(o))
            .map(|o| format!("{}\t{}\t{}\n", o.id, state[&o.id].value, o.name))
            .collect()
    }

    fn default_of(&self, o: &ConfigOption) -> i32 {
        self.defaults.get(&o.id).copied().unwrap_or(o.default)
    }

    /// Invariant 1, asserted.
    pub fn check_invariants(&self) {
        for (o, s) in self.snapshot() {
            for v in [s.value, s.value_in_use] {
                assert!(
                    (o.minimum..=o.maximum).contains(&v) || v == self.default_of(o),
                    "{} holds {v}, outside {}..={}",
                    o.name,
                    o.minimum,
                    o.maximum
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("xdb-conf-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// The list is SQL Server's shape: ids unique and ascending, names unique
    /// case-insensitively, each default within its bounds.
    #[test]
    fn options_are_well_formed() {
        for w in OPTIONS.windows(2) {
            assert!(w[0].id < w[1].id, "{} before {}", w[0].name, w[1].name);
        }
        let mut names: Vec<String> = OPTIONS.iter().map(|o| o.name.to_lowercase()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), OPTIONS.len());
        for o in OPTIONS {
            assert!(
                o.name.len() <= 35,
                "{} is longer than sp_configure's nvarchar(35)",
                o.name
            );
            // 0 is "self-configuring" for locks, max worker threads, index create memory.
            assert!(
                (o.minimum..=o.maximum).contains(&o.default) || o.default == 0,
                "{}",
                o.name
            );
        }
    }

    /// A dynamic option's value is in use after install, a static one's only after a
    /// reload (a start); both survive the reload, and a value set back to the default
    /// leaves the file.
    #[test]
    fn set_install_and_reload() {
        let d = dir("reload");
        let c = Configurations::load(&d, &[(MAX_SERVER_MEMORY, 1024)]).unwrap();
        assert_eq!(
            c.get(MAX_SERVER_MEMORY),
            Setting {
                value: 1024,
                value_in_use: 1024
            }
        );
        assert_eq!(c.set(BACKUP_COMPRESSION_DEFAULT, 1).unwrap(), 0);
        assert_eq!(c.set(103, 5).unwrap(), 0);
        assert_eq!(
            c.get(BACKUP_COMPRESSION_DEFAULT),
            Setting {
                value: 1,
                value_in_use: 0
            }
        );
        assert_eq!(c.install(|_, _| {}), vec![(BACKUP_COMPRESSION_DEFAULT, 1)]);
        assert_eq!(
            c.get(103),
            Setting {
                value: 5,
                value_in_use: 0
            }
        );
        let c = Configurations::load(&d, &[(MAX_SERVER_MEMORY, 1024)]).unwrap();
        assert_eq!(
            c.get(103),
            Setting {
                value: 5,
                value_in_use: 5
            }
        );
        assert_eq!(c.get(BACKUP_COMPRESSION_DEFAULT).value_in_use, 1);
        c.set(103, 0).unwrap();
        c.set(BACKUP_COMPRESSION_DEFAULT, 0).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("configurations")).unwrap(),
            ""
        );
        std::fs::write(d.join("configurations"), "518\t7\tshow advanced options\n").unwrap();
        assert!(
            Configurations::load(&d, &[]).is_err(),
            "a value out of range is refused"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
