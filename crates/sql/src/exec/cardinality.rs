//! Cardinality estimation and the costs plan choices compare (issue 22): how many rows a
//! predicate on a table's columns keeps, from the table's statistics objects (exec/
//! statistics.rs builds them; `histogram.rs` reads a histogram), and what reading them
//! through an index costs against a scan. seek.rs chooses an access path with it, join.rs
//! a join algorithm, showplan.rs prints its figures as EstimateRows.
//!
//! The estimate of one column's allowed values (`column_rows`, a set of intervals of its
//! stored values as seek.rs derives them from WHERE):
//! - values known when the plan is chosen (literals, and arithmetic of them) and a built
//!   statistics object led by the column: the histogram's (`estimate_equal` per point,
//!   `estimate_range` per interval), scaled from the statistics' rows to the table's;
//! - values not known then (a `@variable` or parameter, as sp_executesql, sp_prepare /
//!   sp_execute and a batch's DECLAREd variables give them; a join's outer column): the
//!   density vector, as SQL Server estimates an unknown value: rows x All density per
//!   point; a one-sided interval 30% of the rows, a two-sided one (BETWEEN, `> @a AND <
//!   @b`) 9%;
//! - no statistics on the column: SQL Server's fixed guesses (its cardinality estimator
//!   without statistics): rows^0.75 per point, 30% for a one-sided interval, 9% for a
//!   two-sided one.
//!
//! Further key columns (an index's second column after an equality on its first) multiply
//! by the ratio of the density vector's prefixes (the rows per distinct prefix shrink by
//! it), or by the fixed guesses' share without one. Conjuncts on different columns
//! multiply (independence, SQL Server's legacy estimator). An estimate is never below one
//! row, as SQL Server's, unless the predicate allows no value (an empty set: 0), and never
//! above the table's rows.
//!
//! The table's rows (its cardinality): the rows of its most recently built statistics
//! object. With none built, nothing is estimated (None): the table's row count is not kept
//! anywhere cheaper than reading its pages, and seek.rs falls back to counting the pages
//! a seek covers (its invariant 5).
//!
//! Costs are in units of one row read by a scan (measured through TDS on a 20,000-row
//! clustered table with an index: a row read through an index and looked up costs 6.8 us,
//! a scanned row 1.4 us; `LOOKUP_COST`). A scan costs the table's rows; a seek costs a
//! descent per range plus `LOOKUP_COST` per row it is estimated to give. Every seek looks
//! its rows up in the table (index_seek.rs): no index covers a query here, so "a covering
//! index seeks whenever it can" has nothing to apply to yet.
//!
//! Invariants:
//! 1. An estimate changes a plan, never a result: every access returns a superset of the
//!    rows WHERE keeps (seek.rs invariant 1) and every join algorithm the pairs ON keeps
//!    (join.rs invariant 3), so a wrong estimate costs time only.
//! 2. Estimates are finite and not negative (asserted in `clamped`).
//! 3. Reading statistics holds the database only to clone one object's data: no lock is
//!    waited for and nothing is written.

use std::cell::OnceCell;
use std::ops::Bound;

use extentdb_format::statistics::{StatisticsData, StatisticsEntry};

use super::tables::TableRef;
use crate::histogram;

/// What a row read through an index and looked up in its table costs, in scanned rows.
pub(super) const LOOKUP_COST: f64 = 5.0;
/// What a descent of a B-tree to a range's first record costs, in scanned rows.
pub(super) const DESCENT_COST: f64 = 5.0;
/// What hashing one inner row into a hash join's table costs, in scanned rows.
const HASH_BUILD_COST: f64 = 1.0;
/// SQL Server's guess for a one-sided comparison with an unknown value, or without
/// statistics.
const INEQUALITY_GUESS: f64 = 0.3;
/// SQL Server's guess for a two-sided interval (BETWEEN) likewise.
const BETWEEN_GUESS: f64 = 0.09;
/// SQL Server's guess for an equality without statistics: rows ^ this per value.
const EQUALITY_GUESS_EXPONENT: f64 = 0.75;

/// An interval of one column's stored values (key.rs encoding), as seek.rs derives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Interval {
    pub lo: Bound<Vec<u8>>,
    pub hi: Bound<Vec<u8>>,
}

impl Interval {
    /// The one value both bounds include, if it is a point.
    pub fn point(&self) -> Option<&Vec<u8>> {
        match (&self.lo, &self.hi) {
            (Bound::Included(a), Bound::Included(b)) if a == b => Some(a),
            _ => None,
        }
    }

    fn sides(&self) -> usize {
        [&self.lo, &self.hi]
            .iter()
            .filter(|b| !matches!(b, Bound::Unbounded))
            .count()
    }
}

/// The values a predicate allows on one column: sorted disjoint intervals, and whether
/// they were known when the plan was chosen (the module doc).
pub(super) struct ColumnValues<'a> {
    pub column_id: u16,
    pub type_id: u8,
    pub set: &'a [Interval],
    pub known: bool,
}

/// A table's built statistics objects, read at most once per plan choice, when an
/// estimate first needs them (invariant 3; a seek of a unique key's single rows and a
/// join's later outer rows need none).
pub(super) struct TableStatistics<'t> {
    table: Option<&'t TableRef>,
    built: OnceCell<Vec<StatisticsEntry>>,
}

impl<'t> TableStatistics<'t> {
    pub fn of(t: &'t TableRef) -> TableStatistics<'t> {
        TableStatistics {
            table: Some(t),
            built: OnceCell::new(),
        }
    }

    fn built(&self) -> &[StatisticsEntry] {
        self.built.get_or_init(|| {
            let Some(t) = self.table else {
                return Vec::new();
            };
            let g = t.db.read().unwrap();
            g.statistics_of(t.entry.object_id)
                .into_iter()
                .filter(|s| s.data.as_ref().is_some_and(|d| d.rows > 0))
                .cloned()
                .collect()
        })
    }

    /// The table's rows: its most recently built statistics object's (module doc).
    pub fn cardinality(&self) -> Option<f64> {
        let d = self.built().iter().filter_map(|s| s.data.as_ref());
        d.max_by_key(|d| d.updated_us).map(|d| d.rows as f64)
    }

    /// The statistics led by `key[0]` that share the longest prefix with `key` (an
    /// index's own first), the most recently built among equals.
    fn leading(&self, key: &[u16]) -> Option<&StatisticsData> {
        let shared = |s: &StatisticsEntry| {
            let n = s
                .columns
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count();
            n
        };
        self.built()
            .iter()
            .filter(|s| s.columns.first() == key.first())
            .max_by_key(|s| (shared(s), s.data.as_ref().map_or(0, |d| d.updated_us)))
            .and_then(|s| s.data.as_ref())
    }
}

/// Rows `c` (the table's) whose column has one of `v`'s values (module doc), unclamped.
fn column_rows(d: Option<&StatisticsData>, v: &ColumnValues, c: f64) -> f64 {
    let scale = d.map_or(1.0, |d| c / d.rows.max(1) as f64);
    let density = d.and_then(|d| d.densities.first()).map(|x| f64::from(x.0));
    v.set
        .iter()
        .map(|i| match (d, v.known, i.point()) {
            (Some(d), true, Some(p)) => histogram::estimate_equal(d, v.type_id, Some(p)) * scale,
            (Some(d), true, None) => {
                let (lo, hi) = (as_slice(&i.lo), as_slice(&i.hi));
                histogram::estimate_range(d, v.type_id, lo, hi) * scale
            }
            (Some(_), false, Some(_)) => c * density.unwrap_or(1.0),
            (None, _, Some(_)) => c.powf(EQUALITY_GUESS_EXPONENT),
            (_, _, None) => c * guess(i),
        })
        .sum()
}

fn as_slice(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(|x| x.as_slice())
}

/// SQL Server's share for an interval it cannot read from a histogram.
fn guess(i: &Interval) -> f64 {
    match i.sides() {
        2 => BETWEEN_GUESS,
        1 => INEQUALITY_GUESS,
        _ => 1.0,
    }
}

/// `rows` within [1, c] (0 stays 0: a predicate no value meets); invariant 2.
fn clamped(rows: f64, c: f64) -> f64 {
    assert!(
        rows.is_finite() && rows >= 0.0,
        "an estimate is a finite count"
    );
    match rows {
        0.0 => 0.0,
        r => r.clamp(1.0, c.max(1.0)),
    }
}

/// Rows a seek of a B-tree keyed on `key` (column ids, in order) gives when `columns`
/// (a prefix of the key, each held to points but the last) narrow it; None without the
/// table's cardinality.
pub(super) fn key_rows(
    stats: &TableStatistics,
    key: &[u16],
    columns: &[ColumnValues],
) -> Option<f64> {
    let c = stats.cardinality()?;
    let Some(first) = columns.first() else {
        return Some(c);
    };
    if columns.iter().any(|v| v.set.is_empty()) {
        return Some(0.0);
    }
    let d = stats.leading(key);
    let mut rows = column_rows(d, first, c);
    for (i, v) in columns.iter().enumerate().skip(1) {
        let prefix = d.and_then(|d| Some((d.densities.get(i - 1)?.0, d.densities.get(i)?.0)));
        let share = match (v.set.iter().all(|x| x.point().is_some()), prefix) {
            (true, Some((wider, narrower))) if wider > 0.0 => {
                v.set.len() as f64 * f64::from(narrower) / f64::from(wider)
            }
            _ => column_rows(None, v, c) / c.max(1.0),
        };
        rows *= share;
    }
    Some(clamped(rows, c))
}

/// Rows of the table that conjuncts narrowing `columns` (one entry per column) keep,
/// columns taken as independent; None without the table's cardinality.
pub(super) fn filter_rows(stats: &TableStatistics, columns: &[ColumnValues]) -> Option<f64> {
    let c = stats.cardinality()?;
    let mut rows = c;
    for v in columns {
        if v.set.is_empty() {
            return Some(0.0);
        }
        let d = stats.leading(&[v.column_id]);
        rows *= column_rows(d, v, c) / c.max(1.0);
    }
    Some(clamped(rows, c))
}

/// Whether a nonclustered seek of `ranges` ranges giving `rows` rows costs less than a
/// scan of the table's `c` rows (the module doc's costs).
pub(super) fn seek_beats_scan(rows: f64, ranges: usize, c: f64) -> bool {
    seek_cost(rows, ranges, true) < c
}

/// What a seek of `ranges` ranges giving `rows` rows costs; `lookups` when each row is
/// looked up in the table (a nonclustered index's).
pub(super) fn seek_cost(rows: f64, ranges: usize, lookups: bool) -> f64 {
    let per_row = if lookups { LOOKUP_COST } else { 1.0 };
    ranges as f64 * DESCENT_COST + rows * per_row
}

/// Whether a hash join reading the inner table's `inner` rows once (a scan, a build per
/// row) and probing with each of `outer` rows costs less than `outer` seeks of the inner
/// table giving `per_seek` rows each (`lookups`: through a nonclustered index).
pub(super) fn hash_join_beats_seeks(outer: f64, per_seek: f64, lookups: bool, inner: f64) -> bool {
    let seeks = outer * seek_cost(per_seek, 1, lookups);
    let hash = inner * (1.0 + HASH_BUILD_COST) + outer;
    hash < seeks
}

#[cfg(test)]
mod tests {
    use super::*;
    use extentdb_format::key::type_id;
    use extentdb_format::statistics::HistogramStep;

    fn int(v: i32) -> Vec<u8> {
        v.to_le_bytes().to_vec()
    }

    /// 20,000 rows: 0 holds 18,000, 1..=2000 one each (steps for 0 and 2000 only).
    fn skewed() -> TableStatistics<'static> {
        let step = |k: i32, range: f64, eq: f64, distinct: f64| HistogramStep {
            range_hi_key: Some(int(k)),
            range_rows: range,
            eq_rows: eq,
            distinct_range_rows: distinct,
        };
        let data = StatisticsData {
            updated_us: 1,
            rows: 20_000,
            rows_sampled: 20_000,
            unfiltered_rows: 20_000,
            average_key_length: 4.0,
            density_columns: vec![2],
            densities: vec![(1.0 / 2001.0, 4.0)],
            steps: vec![step(0, 0.0, 18_000.0, 0.0), step(2000, 1999.0, 1.0, 1999.0)],
        };
        let entry = StatisticsEntry {
            object_id: 7,
            stats_id: 2,
            name: "ix_v".into(),
            columns: vec![2],
            user_created: false,
            no_recompute: false,
            data: Some(data),
        };
        entries(vec![entry])
    }

    fn entries(built: Vec<StatisticsEntry>) -> TableStatistics<'static> {
        TableStatistics {
            table: None,
            built: OnceCell::from(built),
        }
    }

    fn point(v: i32) -> Vec<Interval> {
        vec![Interval {
            lo: Bound::Included(int(v)),
            hi: Bound::Included(int(v)),
        }]
    }

    fn values(set: &[Interval], known: bool) -> ColumnValues<'_> {
        ColumnValues {
            column_id: 2,
            type_id: type_id::INT,
            set,
            known,
        }
    }

    /// A frequent value's estimate is its EQ_ROWS and it scans; a rare one estimates its
    /// AVG_RANGE_ROWS and seeks; an unknown value (a variable) takes the density.
    #[test]
    fn histogram_density_and_choice() {
        let s = skewed();
        let (common, rare) = (point(0), point(7));
        let common = key_rows(&s, &[2], &[values(&common, true)]).unwrap();
        assert_eq!(common, 18_000.0);
        assert!(!seek_beats_scan(common, 1, 20_000.0));
        let r = key_rows(&s, &[2], &[values(&rare, true)]).unwrap();
        assert_eq!(r, 1.0);
        assert!(seek_beats_scan(r, 1, 20_000.0));
        let unknown = key_rows(&s, &[2], &[values(&rare, false)]).unwrap();
        assert!((unknown - 20_000.0 / 2001.0).abs() < 1e-3, "{unknown}");
    }

    /// Without statistics on the column: rows^0.75 for an equality, 30% one-sided, 9%
    /// two-sided; no statistics at all: no estimate.
    #[test]
    fn fixed_guesses() {
        let s = skewed();
        let other = |set: &[Interval]| {
            let v = ColumnValues {
                column_id: 3,
                ..values(set, true)
            };
            filter_rows(&s, &[v]).unwrap()
        };
        let eq = other(&point(5));
        assert!((eq - 20_000f64.powf(0.75)).abs() < 1e-6);
        let one = vec![Interval {
            lo: Bound::Excluded(int(5)),
            hi: Bound::Unbounded,
        }];
        assert!((other(&one) - 6_000.0).abs() < 1e-6);
        let two = vec![Interval {
            lo: Bound::Included(int(5)),
            hi: Bound::Included(int(9)),
        }];
        assert!((other(&two) - 1_800.0).abs() < 1e-6);
        let none = entries(Vec::new());
        assert_eq!(filter_rows(&none, &[values(&point(0), true)]), None);
        assert_eq!(other(&[]), 0.0);
    }
}
