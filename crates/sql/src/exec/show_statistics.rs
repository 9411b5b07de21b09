//! What statistics objects are and hold, as SQL Server shows them: DBCC SHOW_STATISTICS
//! (its three result sets: the header, the density vector, the histogram), sys.stats,
//! sys.stats_columns, STATS_DATE and sys.dm_db_stats_properties. The objects are storage's statistics.rs's; the builds statistics.rs's.
//!
//! Invariants:
//! 1. DBCC SHOW_STATISTICS checks its arguments as SQL Server does, in its order: two of
//!    them (2583), the table (2501, then SELECT on it: 229), the statistics (2767); its
//!    options are STAT_HEADER, DENSITY_VECTOR, HISTOGRAM and NO_INFOMSGS, STATS_STREAM is
//!    refused (40517) and any other word is 195.
//! 2. Statistics never built show their name and NULLs in the header, and no density
//!    vector or histogram rows, as SQL Server's do before their first build.
//! 3. The histogram's RANGE_HI_KEY has the first column's type; the counts are real but
//!    DISTINCT_RANGE_ROWS, which is bigint (SQL Server's result set types).

use extentdb_format::statistics::{StatisticsData, StatisticsEntry};
use extentdb_storage::Database;

use super::lower::not_yet;
use super::statistics::{density_columns, statistics_named};
use super::tables::{column_type, object_name_from_text, TableRef};
use super::views::{cols, text, ticks_from_unix_us, Rowset, SYSNAME};
use super::{Out, Session};
use crate::ast::Dbcc;
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value, MAX_LENGTH};

type Errors = Vec<SqlError>;

/// Which of the three result sets DBCC SHOW_STATISTICS sends.
#[derive(Clone, Copy)]
struct Parts {
    header: bool,
    density: bool,
    histogram: bool,
}

impl Session {
    /// DBCC SHOW_STATISTICS (table, statistics) [WITH ...] (invariant 1).
    pub(super) fn show_statistics(
        &mut self,
        d: &Dbcc,
        args: &[Value],
        out: &mut Out,
    ) -> Result<(), Errors> {
        let parts = show_parts(d)?;
        if args.len() != 2 {
            return Err(vec![msg(2583, &[])]);
        }
        let table_text = super::eval::to_text(&args[0]);
        let name = object_name_from_text(&table_text);
        if self.find_table(&name)?.is_none() {
            return Err(vec![msg(2501, &[&table_text])]);
        }
        let t = self.table_for(&name, "SELECT")?;
        let stats_name = super::eval::to_text(&args[1]);
        let s = statistics_named(&t, &stats_name).ok_or_else(|| vec![msg(2767, &[&stats_name])])?;
        if parts.header {
            let header = header(&t, &s);
            self.send_rowset(header, out);
        }
        if parts.density {
            let rows = density_vector(&t, &s);
            self.send_rowset(rows, out);
        }
        if parts.histogram {
            let rows = histogram(&t, &s)?;
            self.send_rowset(rows, out);
        }
        Ok(())
    }
}

/// The result sets DBCC SHOW_STATISTICS' options ask for (all three by default).
fn show_parts(d: &Dbcc) -> Result<Parts, Errors> {
    let mut p = Parts {
        header: false,
        density: false,
        histogram: false,
    };
    for o in &d.options {
        match o.name.to_ascii_uppercase().as_str() {
            "STAT_HEADER" => p.header = true,
            "DENSITY_VECTOR" => p.density = true,
            "HISTOGRAM" => p.histogram = true,
            "NO_INFOMSGS" => {}
            "STATS_STREAM" => return Err(vec![not_yet("DBCC SHOW_STATISTICS WITH STATS_STREAM")]),
            other => return Err(vec![msg(195, &[&other.to_ascii_lowercase(), &"option"])]),
        }
    }
    if !(p.header || p.density || p.histogram) {
        (p.header, p.density, p.histogram) = (true, true, true);
    }
    Ok(p)
}

/// The column names of `ids` in `t`, comma-separated (the density vector's Columns).
fn column_names(t: &TableRef, ids: &[u16]) -> String {
    let name = |id: &u16| {
        (t.entry.columns.iter().find(|c| c.column_id == *id))
            .map_or(String::new(), |c| c.name.clone())
    };
    ids.iter().map(name).collect::<Vec<_>>().join(", ")
}

fn header(t: &TableRef, s: &StatisticsEntry) -> Rowset {
    let columns = cols(&[
        ("Name", SYSNAME),
        ("Updated", SqlType::DateTime),
        ("Rows", SqlType::BigInt),
        ("Rows Sampled", SqlType::BigInt),
        ("Steps", SqlType::SmallInt),
        ("Density", SqlType::Real),
        ("Average key length", SqlType::Real),
        ("String Index", SqlType::Char(3)),
        ("Filter Expression", SqlType::NVarChar(MAX_LENGTH)),
        ("Unfiltered Rows", SqlType::BigInt),
        ("Persisted Sample Percent", SqlType::Float),
    ]);
    let mut row = vec![text(&s.name)];
    match &s.data {
        None => row.extend(std::iter::repeat_n(Value::Null, 10)),
        Some(d) => row.extend(header_values(t, s, d)),
    }
    Rowset {
        columns,
        rows: vec![row],
    }
}

fn header_values(t: &TableRef, s: &StatisticsEntry, d: &StatisticsData) -> Vec<Value> {
    let range_distinct: f64 = d.steps.iter().map(|x| x.distinct_range_rows).sum();
    // SQL Server's header Density: 1 / the first column's distinct values outside the
    // histogram's step keys.
    let density = match range_distinct > 0.0 {
        true => (1.0 / range_distinct) as f32,
        false => 0.0,
    };
    let first = t
        .entry
        .columns
        .iter()
        .find(|c| Some(&c.column_id) == s.columns.first());
    let string = first.is_some_and(|c| {
        use extentdb_format::key::type_id as id;
        matches!(
            c.system_type_id,
            id::CHAR | id::VARCHAR | id::NCHAR | id::NVARCHAR
        )
    });
    vec![
        Value::DateTime(ticks_from_unix_us(d.updated_us)),
        Value::BigInt(d.rows as i64),
        Value::BigInt(d.rows_sampled as i64),
        Value::SmallInt(d.steps.len() as i16),
        Value::Real(density),
        Value::Real(d.average_key_length),
        text(if string { "YES" } else { "NO" }),
        Value::Null,
        Value::BigInt(d.unfiltered_rows as i64),
        Value::Float(0.0),
    ]
}

fn density_vector(t: &TableRef, s: &StatisticsEntry) -> Rowset {
    let columns = cols(&[
        ("All density", SqlType::Real),
        ("Average Length", SqlType::Real),
        ("Columns", SqlType::NVarChar(4000)),
    ]);
    let rows = match &s.data {
        None => Vec::new(),
        Some(d) => {
            let ids = match d.density_columns.is_empty() {
                true => density_columns(t, s),
                false => d.density_columns.clone(),
            };
            d.densities
                .iter()
                .enumerate()
                .map(|(k, (density, len))| {
                    let prefix = column_names(t, &ids[..=k.min(ids.len() - 1)]);
                    vec![Value::Real(*density), Value::Real(*len), text(&prefix)]
                })
                .collect()
        }
    };
    Rowset { columns, rows }
}

fn histogram(t: &TableRef, s: &StatisticsEntry) -> Result<Rowset, Errors> {
    let first = t
        .entry
        .columns
        .iter()
        .find(|c| Some(&c.column_id) == s.columns.first())
        .expect("statistics cover their table's columns (catalog invariant 14)");
    let key_type = column_type(first).map_err(|e| vec![e])?;
    let columns = cols(&[
        ("RANGE_HI_KEY", key_type),
        ("RANGE_ROWS", SqlType::Real),
        ("EQ_ROWS", SqlType::Real),
        ("DISTINCT_RANGE_ROWS", SqlType::BigInt),
        ("AVG_RANGE_ROWS", SqlType::Real),
    ]);
    let mut rows = Vec::new();
    for step in s.data.iter().flat_map(|d| &d.steps) {
        let key = crate::rowcodec::decode(key_type, step.range_hi_key.as_deref())
            .map_err(|e| vec![super::tables::corrupt(&e)])?;
        rows.push(vec![
            key,
            Value::Real(step.range_rows as f32),
            Value::Real(step.eq_rows as f32),
            Value::BigInt(step.distinct_range_rows.round() as i64),
            Value::Real(step.average_range_rows() as f32),
        ]);
    }
    Ok(Rowset { columns, rows })
}

/// sys.stats of `db`: every statistics object of its user tables.
pub(super) fn stats_view(db: &Database) -> Rowset {
    let columns = cols(&[
        ("object_id", SqlType::Int),
        ("name", SYSNAME),
        ("stats_id", SqlType::Int),
        ("auto_created", SqlType::Bit),
        ("user_created", SqlType::Bit),
        ("no_recompute", SqlType::Bit),
        ("has_filter", SqlType::Bit),
        ("filter_definition", SqlType::NVarChar(MAX_LENGTH)),
        ("is_temporary", SqlType::Bit),
        ("is_incremental", SqlType::Bit),
        ("has_persisted_sample", SqlType::Bit),
        ("stats_generation_method", SqlType::Int),
        ("stats_generation_method_desc", SqlType::VarChar(80)),
        ("auto_drop", SqlType::Bit),
    ]);
    let mut rows = Vec::new();
    for t in db.live_tables() {
        for s in db.statistics_of(t.object_id) {
            rows.push(vec![
                Value::Int(s.object_id as i32),
                text(&s.name),
                Value::Int(s.stats_id as i32),
                Value::Bit(false),
                Value::Bit(s.user_created),
                Value::Bit(s.no_recompute),
                Value::Bit(false),
                Value::Null,
                Value::Bit(false),
                Value::Bit(false),
                Value::Bit(false),
                Value::Int(0),
                text("Sort based statistics"),
                Value::Bit(false),
            ]);
        }
    }
    Rowset { columns, rows }
}

/// sys.stats_columns of `db`: each statistics object's columns in order.
pub(super) fn stats_columns_view(db: &Database) -> Rowset {
    let columns = cols(&[
        ("object_id", SqlType::Int),
        ("stats_id", SqlType::Int),
        ("stats_column_id", SqlType::Int),
        ("column_id", SqlType::Int),
    ]);
    let mut rows = Vec::new();
    for t in db.live_tables() {
        for s in db.statistics_of(t.object_id) {
            for (i, c) in s.columns.iter().enumerate() {
                rows.push(vec![
                    Value::Int(s.object_id as i32),
                    Value::Int(s.stats_id as i32),
                    Value::Int(i as i32 + 1),
                    Value::Int(*c as i32),
                ]);
            }
        }
    }
    Rowset { columns, rows }
}

/// Statistics `stats_id` of table `object_id` in `db`, if any.
fn find(db: &Database, object_id: i64, stats_id: i64) -> Option<&StatisticsEntry> {
    let object_id = u32::try_from(object_id).ok()?;
    db.statistics_of(object_id)
        .into_iter()
        .find(|s| i64::from(s.stats_id) == stats_id)
}

/// STATS_DATE(object_id, stats_id): when the statistics were last built, NULL when never
/// or when there are none.
pub(super) fn stats_date(db: &Database, object_id: i64, stats_id: i64) -> Value {
    match find(db, object_id, stats_id).and_then(|s| s.data.as_ref()) {
        Some(d) => Value::DateTime(crate::convert::round_datetime(ticks_from_unix_us(
            d.updated_us,
        ))),
        None => Value::Null,
    }
}

/// sys.dm_db_stats_properties(object_id, stats_id): one row for statistics there (NULLs
/// but the ids when never built), none otherwise. modification_counter is kept in
/// memory (storage's statistics.rs invariant 4).
pub(super) fn stats_properties(db: &Database, object_id: i64, stats_id: i64) -> Rowset {
    let columns = stats_properties_shape().columns;
    let Some(s) = find(db, object_id, stats_id) else {
        return Rowset {
            columns,
            rows: Vec::new(),
        };
    };
    let mut row = vec![
        Value::Int(s.object_id as i32),
        Value::Int(s.stats_id as i32),
    ];
    match &s.data {
        None => row.extend(std::iter::repeat_n(Value::Null, 7)),
        Some(d) => {
            let changed = db.modifications.since_build((s.object_id, s.stats_id));
            row.extend([
                Value::DateTime2(ticks_from_unix_us(d.updated_us)),
                Value::BigInt(d.rows as i64),
                Value::BigInt(d.rows_sampled as i64),
                Value::Int(d.steps.len() as i32),
                Value::BigInt(d.unfiltered_rows as i64),
                Value::BigInt(changed as i64),
                Value::Float(0.0),
            ]);
        }
    }
    Rowset {
        columns,
        rows: vec![row],
    }
}

impl Session {
    /// sys.dm_db_stats_properties in FROM or APPLY: its two arguments evaluated (216
    /// for fewer, 8144 for more).
    pub(super) fn stats_properties_rowset(
        &mut self,
        args: &[crate::ast::Expr],
    ) -> Result<Rowset, Errors> {
        let name = "sys.dm_db_stats_properties";
        if args.len() < 2 {
            return Err(vec![msg(216, &[&name])]);
        }
        if args.len() > 2 {
            return Err(vec![msg(8144, &[&name])]);
        }
        let mut ids = [0i64; 2];
        for (i, a) in args.iter().enumerate() {
            let v = self.eval(a, None).map_err(|e| vec![e])?;
            if v.is_null() {
                return Ok(stats_properties_shape());
            }
            ids[i] = super::eval::as_i64(&v).map_err(|e| vec![e])?;
        }
        let (_, db) = self.current_database()?;
        let g = db.read().unwrap();
        Ok(stats_properties(&g, ids[0], ids[1]))
    }
}

/// sys.dm_db_stats_properties' columns, no rows.
fn stats_properties_shape() -> Rowset {
    let columns = cols(&[
        ("object_id", SqlType::Int),
        ("stats_id", SqlType::Int),
        ("last_updated", SqlType::DateTime2(7)),
        ("rows", SqlType::BigInt),
        ("rows_sampled", SqlType::BigInt),
        ("steps", SqlType::Int),
        ("unfiltered_rows", SqlType::BigInt),
        ("modification_counter", SqlType::BigInt),
        ("persisted_sample_percent", SqlType::Float),
    ]);
    Rowset {
        columns,
        rows: Vec::new(),
    }
}
