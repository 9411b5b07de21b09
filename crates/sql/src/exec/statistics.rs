//! Statistics objects (issue 22): CREATE STATISTICS, UPDATE STATISTICS, DROP STATISTICS,
//! sp_updatestats, and the build every index's statistics get at CREATE INDEX and ALTER
//! INDEX ... REBUILD. Storage's statistics.rs keeps them in the catalog (one per index,
//! made with it; FORMAT.md catalog version 13); `histogram.rs` folds the histogram.
//!
//! A build (`build`): the table read a chunk at a time without row locks under a Sch-S
//! lock of the statement (so no DROP, TRUNCATE or ALTER changes the table under it, and a
//! writer is never blocked by it, as SQL Server's statistics scans read), each row sampled
//! or not (SAMPLE: a row's chance is the rate, SQL Server samples pages), the density
//! columns of the rows sampled pushed into a spilling sort (spill.rs), then read back in
//! order once: distinct prefixes counted for the density vector, each distinct first
//! value with its rows pushed to the histogram. What the build holds is the sort's memory
//! budget and at most 400 histogram steps, whatever the table's size. The result is saved
//! in one short hold of the database (`SharedDatabase::save_statistics`), only if the
//! object is still there over the same columns.
//!
//! Invariants:
//! 1. A FULLSCAN (and the default, which here reads every row: SQL Server samples large
//!    tables by default) build has Rows Sampled = Rows, and its histogram's RANGE_ROWS +
//!    EQ_ROWS add up to Rows; a sampled one's counts are scaled by Rows / Rows Sampled.
//! 2. Every option SQL Server has is built or refused (parser/statistics.rs): never
//!    accepted and ignored. The statements run outside transactions (40517 inside one: a
//!    ROLLBACK could not take the catalog change back).
//! 3. A CREATE STATISTICS is one catalog change holding its data: after a crash it is
//!    there built, or not there. An index's statistics come with the index (unbuilt) and
//!    are built right after CREATE INDEX and REBUILD fill it, while the statement still
//!    holds the table's Sch-M lock; a crash between leaves them unbuilt, as an index made
//!    on an empty table is (NULLs in DBCC SHOW_STATISTICS) until UPDATE STATISTICS.
//! 4. A build over an empty table saves nothing for CREATE STATISTICS and CREATE INDEX
//!    (unbuilt, as SQL Server leaves them), and Rows 0 for UPDATE STATISTICS.
//!
//! Not here: auto-created and auto-updated statistics, filtered and incremental
//! statistics (refused), plan choice from them (cardinality.rs reads what is built here),
//! and a persisted modification counter.

use std::sync::{Arc, Mutex};

use extentdb_format::statistics::{StatisticsData, StatisticsEntry};
use extentdb_storage::StorageError;

use super::errors;
use super::spill::SortSpill;
use super::stream::{key_order, SORT_MEMORY_BYTES};
use super::tables::{Access, TableRef};
use super::Session;
use crate::ast::{ObjectName, StatisticsKinds, StatisticsOptions, StatisticsSample};
use crate::histogram::{self, HistogramBuilder};
use crate::messages::{msg, SqlError};
use crate::ops;
use crate::types::Value;

type Errors = Vec<SqlError>;

/// What one build reads: the columns of its density vector (positions in a decoded row)
/// and how many of them the statistics cover (Average key length's), and the sampling.
struct BuildPlan {
    positions: Vec<usize>,
    covered: usize,
    /// The chance a row is sampled; 1.0 reads every row.
    rate: f64,
}

impl Session {
    /// CREATE STATISTICS (the module's doc; invariant 3).
    pub(super) fn create_statistics(
        &mut self,
        name: &str,
        table: &ObjectName,
        columns: &[String],
        options: &StatisticsOptions,
    ) -> Result<(), Errors> {
        let t = self.statistics_table(table, || msg(1088, &[&table.joined()]))?;
        self.refuse_in_transaction("CREATE STATISTICS")?;
        let ids = column_ids(&t, columns)?;
        let taken = {
            let g = t.db.read().unwrap();
            extentdb_storage::statistics::name_taken(&g, t.entry.object_id, name)
        };
        if taken {
            return Err(vec![msg(1927, &[&t.entry.name, &name])]);
        }
        let t = self.stable_table(table, t)?;
        let density = ids.clone();
        let built = self.build(&t, &density, ids.len(), options.sample, None)?;
        let counted_at = built.as_ref().map_or(0, |b| b.1);
        let data = (built.map(|b| b.0).filter(|d| d.rows > 0), counted_at);
        let id = t.entry.object_id;
        match t
            .db
            .create_statistics(id, name, ids, options.no_recompute, data)
        {
            Ok(_) => Ok(()),
            Err(StorageError::IndexExists(_)) => Err(vec![msg(1927, &[&t.entry.name, &name])]),
            Err(StorageError::TableNotFound(_)) => Err(vec![msg(1088, &[&table.joined()])]),
            Err(e) => Err(errors::map(&e, errors::Context::Other)),
        }
    }

    /// DROP STATISTICS table.name [, ...]: 3701 for one not there, 3739 for an index's.
    pub(super) fn drop_statistics(&mut self, names: &[ObjectName]) -> Result<(), Errors> {
        self.refuse_in_transaction("DROP STATISTICS")?;
        for n in names {
            let stats = n.name().to_string();
            let table = ObjectName {
                parts: n.parts[..n.parts.len() - 1].to_vec(),
            };
            let gone = || msg(3701, &[&"drop", &"statistics", &n.joined()]);
            let t = self.find_table(&table)?.ok_or_else(|| vec![gone()])?;
            self.require_table_alter(&t, gone())?;
            let found = statistics_named(&t, &stats).ok_or_else(|| vec![gone()])?;
            if !found.user_created {
                let name = format!("{}.{}", table.name(), stats);
                return Err(vec![msg(3739, &[&"DROP", &name])]);
            }
            self.schema_modification(&t)?;
            match t.db.drop_statistics(t.entry.object_id, found.stats_id) {
                Ok(true) => {}
                Ok(false) | Err(StorageError::TableNotFound(_)) => return Err(vec![gone()]),
                Err(e) => return Err(errors::map(&e, errors::Context::Other)),
            }
        }
        Ok(())
    }

    /// UPDATE STATISTICS table [names] [WITH ...]: 2706 for a table not there, 2727 for a
    /// name none of its statistics has; each object reached built and saved in turn.
    pub(super) fn update_statistics(
        &mut self,
        table: &ObjectName,
        names: &[String],
        options: &StatisticsOptions,
    ) -> Result<(), Errors> {
        let t = self.statistics_table(table, || msg(2706, &[&table.name()]).with_state(6))?;
        self.refuse_in_transaction("UPDATE STATISTICS")?;
        let mut targets = Vec::new();
        for n in names {
            targets.push(statistics_named(&t, n).ok_or_else(|| vec![msg(2727, &[n])])?);
        }
        if names.is_empty() {
            targets = all_statistics(&t)
                .into_iter()
                .filter(|s| match options.kinds {
                    StatisticsKinds::All => true,
                    StatisticsKinds::Columns => s.user_created,
                    StatisticsKinds::Index => !s.user_created,
                })
                .collect();
        }
        let t = self.stable_table(table, t)?;
        for s in targets {
            self.rebuild_one(&t, &s, options.sample, options.no_recompute, true)?;
        }
        Ok(())
    }

    /// sp_updatestats [@resample = 'resample']: UPDATE STATISTICS of every user table of
    /// the current database (with RESAMPLE when asked, else the default sampling), a line
    /// printed per table. SQL Server skips statistics no row changed since their build;
    /// without a persisted modification counter here, all are built.
    pub(super) fn sp_updatestats(
        &mut self,
        args: &[Value],
        out: &mut super::Out,
    ) -> Result<(), Errors> {
        self.refuse_in_transaction("sp_updatestats")?;
        let sample = match &args[0] {
            Value::Null => StatisticsSample::Default,
            v if super::eval::to_text(v).eq_ignore_ascii_case("resample") => {
                StatisticsSample::Resample
            }
            v if super::eval::to_text(v).eq_ignore_ascii_case("no") => StatisticsSample::Default,
            v => return Err(vec![msg(14138, &[&super::eval::to_text(v)])]),
        };
        let (_, db) = self.current_database()?;
        let tables: Vec<(String, String)> = {
            let g = db.read().unwrap();
            g.live_tables()
                .map(|t| (t.schema_name.clone(), t.name.clone()))
                .collect()
        };
        for (schema, name) in tables {
            let n = ObjectName {
                parts: vec![schema.clone(), name.clone()],
            };
            let line = format!("Updating [{schema}].[{name}]");
            out.push(super::Output::Info(SqlError::print(line)));
            let options = StatisticsOptions {
                sample,
                ..Default::default()
            };
            self.update_statistics(&n, &[], &options)?;
        }
        let done = "Statistics for all tables have been updated.".to_string();
        out.push(super::Output::Info(SqlError::print(done)));
        Ok(())
    }

    /// After CREATE INDEX or ALTER INDEX ... REBUILD of index `index_id` of table `t`
    /// (its Sch-M lock still held): its statistics built from every row (invariant 3).
    pub(super) fn build_index_statistics(
        &mut self,
        table: &ObjectName,
        index_id: u16,
    ) -> Result<(), Errors> {
        let Some(t) = self.find_table(table)? else {
            return Ok(());
        };
        let found = all_statistics(&t)
            .into_iter()
            .find(|s| s.stats_id == index_id && !s.user_created);
        match found {
            Some(s) => self.rebuild_one(&t, &s, StatisticsSample::FullScan, s.no_recompute, false),
            None => Ok(()),
        }
    }

    /// Builds and saves statistics `s` of `t` (`update`: UPDATE STATISTICS, which saves
    /// an empty table's build too: invariant 4).
    fn rebuild_one(
        &mut self,
        t: &TableRef,
        s: &StatisticsEntry,
        sample: StatisticsSample,
        no_recompute: bool,
        update: bool,
    ) -> Result<(), Errors> {
        let density = density_columns(t, s);
        let last = s.data.as_ref();
        let built = self.build(t, &density, s.columns.len(), sample, last)?;
        let Some((data, counted_at)) = built else {
            return Ok(());
        };
        if data.rows == 0 && !update {
            return Ok(());
        }
        let ids = (t.entry.object_id, s.stats_id);
        t.db.save_statistics(ids, (&s.columns, counted_at), data, no_recompute)
            .map(drop)
            .map_err(|e| errors::map(&e, errors::Context::Other))
    }

    /// The user table `name` names for a statistics statement (`missing` when none),
    /// once the session may ALTER it.
    fn statistics_table(
        &mut self,
        name: &ObjectName,
        missing: impl Fn() -> SqlError,
    ) -> Result<TableRef, Errors> {
        let t = self.find_table(name)?.ok_or_else(|| vec![missing()])?;
        self.require_table_alter(&t, missing())?;
        Ok(t)
    }

    /// `t` resolved again once the statement holds Sch-S on it, so the build reads the
    /// table as no DDL can change it until the statement ends.
    fn stable_table(&mut self, name: &ObjectName, t: TableRef) -> Result<TableRef, Errors> {
        self.schema_stability(&t)?;
        Ok(self.find_table(name)?.unwrap_or(t))
    }

    /// One build (the module's doc) and the table's modification count when its scan
    /// began (storage's statistics.rs invariant 4): None when attention or KILL stopped it.
    fn build(
        &mut self,
        t: &TableRef,
        density: &[u16],
        covered: usize,
        sample: StatisticsSample,
        last: Option<&StatisticsData>,
    ) -> Result<Option<(StatisticsData, u64)>, Errors> {
        let positions = density
            .iter()
            .map(|id| position_of(t, *id))
            .collect::<Result<Vec<_>, _>>()?;
        let rate = self.sample_rate(t, sample, last)?;
        let counted_at = (t.db.read().unwrap())
            .modifications
            .of_table(t.entry.object_id);
        let plan = BuildPlan {
            positions,
            covered,
            rate,
        };
        let Some((rows, sorted)) = self.sample_rows(t, &plan)? else {
            return Ok(None);
        };
        let mut data = summarize(t, &plan, rows, sorted)?;
        data.density_columns = density.to_vec();
        Ok(Some((data, counted_at)))
    }

    /// The chance a row is sampled: 1 for FULLSCAN, the default and RESAMPLE of a full
    /// build; n / 100 for SAMPLE n PERCENT; n over the table's rows (counted first) for
    /// SAMPLE n ROWS; RESAMPLE the last build's Rows Sampled over Rows.
    fn sample_rate(
        &mut self,
        t: &TableRef,
        sample: StatisticsSample,
        last: Option<&StatisticsData>,
    ) -> Result<f64, Errors> {
        Ok(match sample {
            StatisticsSample::Default | StatisticsSample::FullScan => 1.0,
            StatisticsSample::Percent(p) => p / 100.0,
            StatisticsSample::Resample => match last {
                Some(d) if d.rows > 0 => d.rows_sampled as f64 / d.rows as f64,
                _ => 1.0,
            },
            StatisticsSample::Rows(n) => {
                let mut count = 0u64;
                t.each_row(Access::Scan, |_, _| {
                    count += 1;
                    Ok(true)
                })?;
                (n as f64 / count.max(1) as f64).min(1.0)
            }
        })
    }

    /// Reads every row of `t` a chunk at a time, pushing the sampled rows' density
    /// columns into a spilling sort: the rows read and the sorted sample, None when
    /// cancelled.
    fn sample_rows(
        &mut self,
        t: &TableRef,
        plan: &BuildPlan,
    ) -> Result<Option<(u64, super::spill::SortedRows)>, Errors> {
        let failure = Arc::new(Mutex::new(None));
        let order = key_order(vec![false; plan.positions.len()], failure.clone());
        let mut sort = SortSpill::new(&self.spill_dir(), SORT_MEMORY_BYTES, order);
        let mut rows = 0u64;
        let mut rng = SampleRng::new(t.entry.object_id as u64 ^ extentdb_storage::now_us() as u64);
        let mut cancelled = false;
        let cancel = self.cancel_flag();
        t.each_row(Access::Scan, |_, row| {
            if cancel.load(std::sync::atomic::Ordering::Acquire) {
                cancelled = true;
                return Ok(false);
            }
            rows += 1;
            if plan.rate >= 1.0 || rng.next_unit() < plan.rate {
                let projected = plan.positions.iter().map(|&i| row[i].clone()).collect();
                sort.push(projected).map_err(|e| vec![e])?;
            }
            Ok(true)
        })?;
        if cancelled {
            return Ok(None);
        }
        let sorted = sort.finish().map_err(|e| vec![e])?;
        if let Some(e) = failure.lock().unwrap().take() {
            return Err(vec![e]);
        }
        Ok(Some((rows, sorted)))
    }
}

/// The counts of one pass over the sorted sample.
struct Pass {
    sampled: u64,
    /// Distinct values of each prefix of the density columns.
    distinct: Vec<u64>,
    /// Bytes of each prefix's values, summed over the rows sampled.
    bytes: Vec<f64>,
    histogram: HistogramBuilder,
}

/// The header, density vector and histogram of the sorted sample (invariant 1).
fn summarize(
    t: &TableRef,
    plan: &BuildPlan,
    rows: u64,
    sorted: super::spill::SortedRows,
) -> Result<StatisticsData, Errors> {
    let n = plan.positions.len();
    let types: Vec<_> = plan.positions.iter().map(|&i| t.types[i]).collect();
    let mut pass = Pass {
        sampled: 0,
        distinct: vec![0; n],
        bytes: vec![0.0; n],
        histogram: HistogramBuilder::new(),
    };
    let mut previous: Option<Vec<Value>> = None;
    let mut run: Option<(Value, f64)> = None;
    for row in sorted {
        let row = row.map_err(|e| vec![e])?;
        let differs = previous.as_ref().map_or(0, |p| first_difference(p, &row));
        for k in differs..n {
            pass.distinct[k] += 1;
        }
        let mut sum = 0.0;
        for (k, v) in row.iter().enumerate() {
            sum += stored_len(types[k], v);
            pass.bytes[k] += sum;
        }
        if differs == 0 {
            if let Some((v, c)) = run.take() {
                pass.histogram.push(v, c);
            }
            run = Some((row[0].clone(), 0.0));
        }
        run.as_mut().expect("a run").1 += 1.0;
        pass.sampled += 1;
        previous = Some(row);
    }
    if let Some((v, c)) = run {
        pass.histogram.push(v, c);
    }
    Ok(statistics_data(rows, pass, plan, types[0]))
}

fn statistics_data(
    rows: u64,
    pass: Pass,
    plan: &BuildPlan,
    first: crate::types::SqlType,
) -> StatisticsData {
    let sampled = pass.sampled.max(1) as f64;
    let scale = match pass.sampled {
        0 => 0.0,
        s => rows as f64 / s as f64,
    };
    let encode = |v: &Value| crate::rowcodec::encode(first, v).ok().flatten();
    let densities = pass
        .distinct
        .iter()
        .zip(&pass.bytes)
        .map(|(&d, &b)| (1.0 / d.max(1) as f32, (b / sampled) as f32))
        .collect();
    let steps = histogram::stored_steps(pass.histogram.finish(), scale, &encode);
    let data = StatisticsData {
        updated_us: extentdb_storage::now_us(),
        rows,
        rows_sampled: pass.sampled,
        unfiltered_rows: rows,
        average_key_length: (pass.bytes[plan.covered - 1] / sampled) as f32,
        density_columns: Vec::new(),
        densities,
        steps,
    };
    debug_assert!(
        plan.rate < 1.0 || {
            let sum: f64 = data.steps.iter().map(|s| s.range_rows + s.eq_rows).sum();
            sum == rows as f64
        },
        "invariant 1: a full build's steps hold every row"
    );
    data
}

/// The first column at which two sorted rows differ (`len` when they agree), NULL equal
/// to NULL as the sort orders them.
fn first_difference(a: &[Value], b: &[Value]) -> usize {
    let same = |x: &Value, y: &Value| match (x.is_null(), y.is_null()) {
        (true, true) => true,
        (false, false) => ops::compare(x, y).ok().flatten() == Some(std::cmp::Ordering::Equal),
        _ => false,
    };
    a.iter()
        .zip(b)
        .position(|(x, y)| !same(x, y))
        .unwrap_or(a.len())
}

/// A value's bytes as its column stores it (0 for NULL).
fn stored_len(t: crate::types::SqlType, v: &Value) -> f64 {
    match crate::rowcodec::encode(t, v) {
        Ok(Some(b)) => b.len() as f64,
        _ => 0.0,
    }
}

/// A row sample's choices: splitmix64, seeded per build.
struct SampleRng(u64);

impl SampleRng {
    fn new(seed: u64) -> SampleRng {
        SampleRng(seed)
    }

    /// A number in [0, 1).
    fn next_unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The position of column `id` in `t`'s decoded rows.
fn position_of(t: &TableRef, id: u16) -> Result<usize, Errors> {
    t.entry
        .columns
        .iter()
        .position(|c| c.column_id == id)
        .ok_or_else(|| vec![msg(1911, &[&id.to_string()])])
}

/// CREATE STATISTICS' columns as column ids: 1911 for one the table lacks, 1909 for one
/// named twice, 40517 for a LOB (no key comparison orders one).
fn column_ids(t: &TableRef, names: &[String]) -> Result<Vec<u16>, Errors> {
    let mut ids = Vec::new();
    for n in names {
        let i = t.column_index(n).ok_or_else(|| vec![msg(1911, &[n])])?;
        let c = &t.entry.columns[i];
        if ids.contains(&c.column_id) {
            return Err(vec![msg(1909, &[&"statistics", n])]);
        }
        if c.max_length == -1 {
            return Err(vec![super::lower::not_yet("statistics on a MAX column")]);
        }
        // The first column's values are the histogram's keys, which the catalog keeps at
        // most an index key's 1,700 bytes (format's statistics.rs).
        let wide = c.max_length as usize > extentdb_format::statistics::MAX_KEY_BYTES;
        if ids.is_empty() && wide {
            return Err(vec![super::lower::not_yet(
                "statistics led by a column wider than 1,700 bytes",
            )]);
        }
        ids.push(c.column_id);
    }
    if ids.len() > extentdb_format::statistics::MAX_COLUMNS {
        return Err(vec![super::lower::not_yet(
            "statistics on more than 64 columns",
        )]);
    }
    Ok(ids)
}

/// Table `t`'s statistics objects as its catalog has them, with an index's made for any
/// index the catalog was not saved with since (storage's statistics.rs invariant 1).
pub(super) fn all_statistics(t: &TableRef) -> Vec<StatisticsEntry> {
    let g = t.db.read().unwrap();
    g.statistics_of(t.entry.object_id)
        .into_iter()
        .cloned()
        .collect()
}

/// Table `t`'s statistics object named `name` (case-insensitive).
pub(super) fn statistics_named(t: &TableRef, name: &str) -> Option<StatisticsEntry> {
    all_statistics(t)
        .into_iter()
        .find(|s| s.name.eq_ignore_ascii_case(name))
}

/// The density vector's columns of `s`: its columns, and for a nonclustered index's of a
/// clustered table the clustering key's other columns after them, as SQL Server's
/// density vector shows the key an index reaches its rows by.
pub(super) fn density_columns(t: &TableRef, s: &StatisticsEntry) -> Vec<u16> {
    let mut cols = s.columns.clone();
    let nonclustered_index = !s.user_created && s.stats_id >= 2;
    if let (true, Some((_, key)), 1) = (nonclustered_index, &t.entry.primary_key, t.entry.index_id)
    {
        for k in key {
            if !cols.contains(k) {
                cols.push(*k);
            }
        }
    }
    cols
}
