//! Optimizer statistics objects (sys.stats rows) as the catalog keeps them from version 13
//! (FORMAT.md, "Catalog", the statistics list after the permissions): one per index
//! (`stats_id` = the index id, the clustered index's 1 included) and one per CREATE
//! STATISTICS, each with what DBCC SHOW_STATISTICS shows once it was built: the header,
//! the density vector over the leading column prefixes and a histogram on the first
//! column. SQL Server keeps the same in its statistics blobs (sys.sysobjvalues).
//!
//! Invariants (checked by `check`, called by `Catalog::check_invariants`):
//! 1. A statistics object's table is a table of the catalog (not an index entry), and
//!    (object id, stats id) and (object id, name, case-insensitively) are unique.
//! 2. It covers at least one column, each one of its table's, none twice.
//! 3. Built data has at most `MAX_STEPS` histogram steps, in strictly ascending key order
//!    (the caller's comparison; checked where values can be compared, in the SQL layer),
//!    one density per density column, and counts that are finite and not negative.
//! 4. An index's statistics (`user_created` false) have the stats id of an index of the
//!    table; storage keeps that so at every save (storage's statistics.rs).
//!
//! What is not here: building them (the SQL layer's statistics.rs) and the choice of a
//! key's order (key.rs compares stored values).

use crate::codec::{Reader, Writer};
use crate::{corrupt, FormatError, PageId};

/// SQL Server's histogram steps at most.
pub const MAX_STEPS: usize = 200;
/// A histogram key's stored bytes at most (a nonclustered index key's 1,700).
pub const MAX_KEY_BYTES: usize = 1700;
/// Columns one statistics object covers at most (SQL Server's 64), its density vector
/// with the clustering key appended at most twice that.
pub const MAX_COLUMNS: usize = 64;

/// One statistics object (sys.stats, sys.stats_columns).
#[derive(Debug, Clone, PartialEq)]
pub struct StatisticsEntry {
    pub object_id: u32,
    pub stats_id: u16,
    pub name: String,
    /// The base column ids it covers, in order (sys.stats_columns); an index's are its key.
    pub columns: Vec<u16>,
    /// CREATE STATISTICS (sys.stats.user_created); false for an index's.
    pub user_created: bool,
    /// WITH NORECOMPUTE (sys.stats.no_recompute).
    pub no_recompute: bool,
    /// None until first built (an index made on an empty table, CREATE STATISTICS before
    /// its build saved): DBCC SHOW_STATISTICS shows NULLs, STATS_DATE is NULL.
    pub data: Option<StatisticsData>,
}

/// What a build found (DBCC SHOW_STATISTICS' three result sets).
#[derive(Debug, Clone, PartialEq)]
pub struct StatisticsData {
    /// When it was built, µs since the Unix epoch (Updated, STATS_DATE).
    pub updated_us: i64,
    pub rows: u64,
    pub rows_sampled: u64,
    pub unfiltered_rows: u64,
    /// The average bytes of the covered columns' values over the rows sampled.
    pub average_key_length: f32,
    /// The columns of the density vector in order: the covered columns, for a
    /// nonclustered index over a clustered table then the clustering key's other columns.
    pub density_columns: Vec<u16>,
    /// Per prefix of `density_columns`: (All density = 1 / distinct prefixes, average
    /// length of the prefix's values).
    pub densities: Vec<(f32, f32)>,
    pub steps: Vec<HistogramStep>,
}

/// One histogram step: the rows above the previous step's key and below `range_hi_key`
/// (RANGE_ROWS, DISTINCT_RANGE_ROWS), and those equal to it (EQ_ROWS).
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramStep {
    /// The first column's value in its record encoding (key.rs); None for NULL.
    pub range_hi_key: Option<Vec<u8>>,
    pub range_rows: f64,
    pub eq_rows: f64,
    pub distinct_range_rows: f64,
}

impl HistogramStep {
    /// AVG_RANGE_ROWS: the range's rows per distinct value, 1 for an empty range (as SQL
    /// Server shows it).
    pub fn average_range_rows(&self) -> f64 {
        match self.distinct_range_rows > 0.0 {
            true => self.range_rows / self.distinct_range_rows,
            false => 1.0,
        }
    }
}

const USER_CREATED: u8 = 1;
const NO_RECOMPUTE: u8 = 2;
const HAS_DATA: u8 = 4;

/// The list as version 13 lays it out after the permissions: u32 count, then each: object
/// id u32, stats id u16, name, flags u8 (bit 0 user created, bit 1 no recompute, bit 2
/// built), u16 column count and column ids u16; built data follows (`encode_data`).
pub fn encode(w: &mut Writer, list: &[StatisticsEntry]) {
    w.u32(list.len() as u32);
    for s in list {
        w.u32(s.object_id);
        w.u16(s.stats_id);
        w.string(&s.name);
        let mut flags = 0;
        for (set, bit) in [
            (s.user_created, USER_CREATED),
            (s.no_recompute, NO_RECOMPUTE),
            (s.data.is_some(), HAS_DATA),
        ] {
            if set {
                flags |= bit;
            }
        }
        w.u8(flags);
        w.u16(s.columns.len() as u16);
        for c in &s.columns {
            w.u16(*c);
        }
        if let Some(d) = &s.data {
            encode_data(w, d);
        }
    }
}

/// Built data: updated µs i64, rows u64, rows sampled u64, unfiltered rows u64, average
/// key length f32, u16 density count then per density its column id u16, All density f32
/// and average length f32, u16 step count then per step the key (u8 0 NULL, else 1, u16
/// length and the stored bytes) and RANGE_ROWS, EQ_ROWS, DISTINCT_RANGE_ROWS as f64.
fn encode_data(w: &mut Writer, d: &StatisticsData) {
    assert!(d.steps.len() <= MAX_STEPS, "invariant 3: at most 200 steps");
    assert_eq!(d.densities.len(), d.density_columns.len(), "invariant 3");
    w.i64(d.updated_us);
    w.u64(d.rows);
    w.u64(d.rows_sampled);
    w.u64(d.unfiltered_rows);
    w.u32(d.average_key_length.to_bits());
    w.u16(d.densities.len() as u16);
    for (c, (density, len)) in d.density_columns.iter().zip(&d.densities) {
        w.u16(*c);
        w.u32(density.to_bits());
        w.u32(len.to_bits());
    }
    w.u16(d.steps.len() as u16);
    for s in &d.steps {
        match &s.range_hi_key {
            None => w.u8(0),
            Some(k) => {
                assert!(k.len() <= MAX_KEY_BYTES, "a histogram key fits its field");
                w.u8(1);
                w.u16(k.len() as u16);
                w.raw(k);
            }
        }
        w.u64(s.range_rows.to_bits());
        w.u64(s.eq_rows.to_bits());
        w.u64(s.distinct_range_rows.to_bits());
    }
}

/// Decodes the list `encode` wrote; damage is an error, never a panic.
pub fn decode(r: &mut Reader<'_>, limit: usize) -> Result<Vec<StatisticsEntry>, FormatError> {
    let n = r.u32()? as usize;
    if n > limit {
        return Err(damage(format!("statistics list of {n} entries")));
    }
    let mut list = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        let object_id = r.u32()?;
        let stats_id = r.u16()?;
        let name = r.string()?;
        let flags = r.u8()?;
        if flags & !(USER_CREATED | NO_RECOMPUTE | HAS_DATA) != 0 {
            return Err(damage(format!(
                "statistics {name} has unknown flags {flags}"
            )));
        }
        let count = r.u16()? as usize;
        let mut columns = Vec::with_capacity(count.min(MAX_COLUMNS));
        for _ in 0..count {
            columns.push(r.u16()?);
        }
        let data = match flags & HAS_DATA {
            0 => None,
            _ => Some(decode_data(r)?),
        };
        list.push(StatisticsEntry {
            object_id,
            stats_id,
            name,
            columns,
            user_created: flags & USER_CREATED != 0,
            no_recompute: flags & NO_RECOMPUTE != 0,
            data,
        });
    }
    Ok(list)
}

fn decode_data(r: &mut Reader<'_>) -> Result<StatisticsData, FormatError> {
    let updated_us = r.i64()?;
    let (rows, rows_sampled, unfiltered_rows) = (r.u64()?, r.u64()?, r.u64()?);
    let average_key_length = f32::from_bits(r.u32()?);
    let n = r.u16()? as usize;
    let mut density_columns = Vec::with_capacity(n.min(2 * MAX_COLUMNS));
    let mut densities = Vec::with_capacity(n.min(2 * MAX_COLUMNS));
    for _ in 0..n {
        density_columns.push(r.u16()?);
        densities.push((f32::from_bits(r.u32()?), f32::from_bits(r.u32()?)));
    }
    let steps_n = r.u16()? as usize;
    if steps_n > MAX_STEPS {
        return Err(damage(format!("a histogram of {steps_n} steps")));
    }
    let mut steps = Vec::with_capacity(steps_n);
    for _ in 0..steps_n {
        let range_hi_key = match r.u8()? {
            0 => None,
            1 => {
                let len = r.u16()? as usize;
                if len > MAX_KEY_BYTES {
                    return Err(damage(format!("a histogram key of {len} bytes")));
                }
                Some(r.take(len)?.to_vec())
            }
            t => return Err(damage(format!("unknown histogram key tag {t}"))),
        };
        steps.push(HistogramStep {
            range_hi_key,
            range_rows: f64::from_bits(r.u64()?),
            eq_rows: f64::from_bits(r.u64()?),
            distinct_range_rows: f64::from_bits(r.u64()?),
        });
    }
    Ok(StatisticsData {
        updated_us,
        rows,
        rows_sampled,
        unfiltered_rows,
        average_key_length,
        density_columns,
        densities,
        steps,
    })
}

fn damage(what: String) -> FormatError {
    corrupt(PageId::NULL, what)
}

/// Invariants 1 to 3 for `list` over `tables`' (object id, column ids, is a table).
pub fn check(
    list: &[StatisticsEntry],
    table_columns: &dyn Fn(u32) -> Option<Vec<u16>>,
) -> Result<(), String> {
    let mut ids = std::collections::HashSet::new();
    let mut names = std::collections::HashSet::new();
    for s in list {
        let Some(cols) = table_columns(s.object_id) else {
            return Err(format!(
                "statistics {} of missing table {}",
                s.name, s.object_id
            ));
        };
        if !ids.insert((s.object_id, s.stats_id))
            || !names.insert((s.object_id, s.name.to_lowercase()))
        {
            return Err(format!(
                "statistics {} of {} appear twice",
                s.name, s.object_id
            ));
        }
        let mut seen = std::collections::HashSet::new();
        let bad_column = s
            .columns
            .iter()
            .any(|c| !cols.contains(c) || !seen.insert(*c));
        if s.columns.is_empty() || s.columns.len() > MAX_COLUMNS || bad_column {
            return Err(format!(
                "statistics {} cover columns their table lacks",
                s.name
            ));
        }
        if let Some(d) = &s.data {
            check_data(&s.name, d)?;
        }
    }
    Ok(())
}

fn check_data(name: &str, d: &StatisticsData) -> Result<(), String> {
    let sane = |x: f64| x.is_finite() && x >= 0.0;
    let steps_ok = d
        .steps
        .iter()
        .all(|s| sane(s.range_rows) && sane(s.eq_rows) && sane(s.distinct_range_rows));
    if d.steps.len() > MAX_STEPS
        || d.densities.len() != d.density_columns.len()
        || d.rows_sampled > d.rows
        || !steps_ok
    {
        return Err(format!("statistics {name} hold damaged data"));
    }
    Ok(())
}
