//! Statistics histograms: built from a column's values in ascending order (exec/
//! statistics.rs feeds them from a spilling sort), and read by a planner for estimates.
//!
//! Building (`HistogramBuilder`): each distinct value arrives once, with its rows, and
//! becomes a step of its own (EQ_ROWS its rows). When the steps reach twice
//! `MAX_STEPS`, or at the end when they pass it, they are folded: a step is kept once the
//! rows since the last kept step (its own range's, and the equal rows of the steps folded
//! into it) reach a budget of the rows seen over `MAX_STEPS - 1`; a step not kept adds
//! its EQ_ROWS and RANGE_ROWS to the next kept step's RANGE_ROWS and itself and its
//! distinct range values to its DISTINCT_RANGE_ROWS. The budget grows by half until the
//! steps fit. So a value holding more than a step's share of the rows keeps a step of its
//! own (its EQ_ROWS exact), as SQL Server's histograms keep frequent values.
//!
//! Invariants:
//! 1. Memory: at most `2 * MAX_STEPS` steps (one value each) are held, whatever the input.
//! 2. Nothing is lost: RANGE_ROWS + EQ_ROWS over the steps is the rows pushed, and
//!    DISTINCT_RANGE_ROWS + one per step is the distinct values pushed (asserted by the
//!    tests on every fold).
//! 3. The first step (the smallest value; NULL when there are NULLs, and then the smallest
//!    value too) and the last (the largest) are always kept, with RANGE_ROWS 0 on the
//!    first, as SQL Server's histograms begin and end.
//!
//! Estimates (`estimate_equal`, `estimate_range`): the API exec/cardinality.rs calls for
//! plan choice (access paths, join algorithms, SHOWPLAN's EstimateRows). Inside a step's range, values are taken as AVG_RANGE_ROWS each
//! and a range bound that cuts a step's range counts half of that range (keys of every
//! type compare, few interpolate).

use std::cmp::Ordering;
use std::ops::Bound;

use extentdb_format::key;
use extentdb_format::statistics::{HistogramStep, StatisticsData, MAX_STEPS};

use crate::types::Value;

/// One step while building: the value and its counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub key: Value,
    pub range_rows: f64,
    pub eq_rows: f64,
    pub distinct_range_rows: f64,
}

/// A histogram built from distinct values pushed in ascending order (the module's doc).
#[derive(Debug, Default)]
pub struct HistogramBuilder {
    steps: Vec<Step>,
    rows: f64,
}

impl HistogramBuilder {
    pub fn new() -> HistogramBuilder {
        HistogramBuilder::default()
    }

    /// The next distinct value, above every one pushed before (NULL first), and its rows.
    pub fn push(&mut self, key: Value, rows: f64) {
        assert!(rows > 0.0, "a value pushed has rows");
        debug_assert!(
            self.steps.last().is_none_or(|s| s.key.is_null()
                || crate::ops::compare(&s.key, &key).ok().flatten() == Some(Ordering::Less)),
            "values arrive in ascending order, each once"
        );
        self.steps.push(Step {
            key,
            range_rows: 0.0,
            eq_rows: rows,
            distinct_range_rows: 0.0,
        });
        self.rows += rows;
        if self.steps.len() >= 2 * MAX_STEPS {
            self.fold(MAX_STEPS);
        }
        debug_assert!(self.steps.len() < 2 * MAX_STEPS, "invariant 1");
    }

    /// The steps, at most `MAX_STEPS`.
    pub fn finish(mut self) -> Vec<Step> {
        if self.steps.len() > MAX_STEPS {
            self.fold(MAX_STEPS);
        }
        self.steps
    }

    /// Folds the steps into at most `max` (the module's doc; invariants 2 and 3).
    fn fold(&mut self, max: usize) {
        assert!(
            max >= 3,
            "room for the first, a NULL's neighbour and the last step"
        );
        let mut budget = (self.rows / (max as f64 - 1.0)).max(1.0);
        loop {
            let folded = fold_with(&self.steps, budget);
            if folded.len() <= max {
                self.steps = folded;
                return;
            }
            budget *= 1.5;
        }
    }
}

/// The steps kept under `budget`, the others folded into the next kept one.
fn fold_with(steps: &[Step], budget: f64) -> Vec<Step> {
    let last = steps.len().saturating_sub(1);
    let null_first = steps.first().is_some_and(|s| s.key.is_null());
    let mut out = Vec::with_capacity(MAX_STEPS);
    let (mut rows, mut distinct) = (0.0, 0.0);
    for (i, s) in steps.iter().enumerate() {
        let protected = i == 0 || i == last || (i == 1 && null_first);
        if protected || rows + s.range_rows + s.eq_rows >= budget {
            out.push(Step {
                key: s.key.clone(),
                range_rows: rows + s.range_rows,
                eq_rows: s.eq_rows,
                distinct_range_rows: distinct + s.distinct_range_rows,
            });
            (rows, distinct) = (0.0, 0.0);
        } else {
            rows += s.range_rows + s.eq_rows;
            distinct += s.distinct_range_rows + 1.0;
        }
    }
    out
}

/// Estimated rows whose column equals `value` (its stored encoding, key.rs) under a
/// histogram on a column of type `system_type_id`: EQ_ROWS of a step with that key,
/// AVG_RANGE_ROWS of the step whose range holds it, 0 past the last step. NULL matches
/// the NULL step's rows only.
pub fn estimate_equal(d: &StatisticsData, system_type_id: u8, value: Option<&[u8]>) -> f64 {
    let cmp = |k: &Option<Vec<u8>>| key::compare(system_type_id, k.as_deref(), value);
    for (i, s) in d.steps.iter().enumerate() {
        match cmp(&s.range_hi_key) {
            Ordering::Less => continue,
            Ordering::Equal => return s.eq_rows,
            Ordering::Greater if i == 0 || value.is_none() => return 0.0,
            Ordering::Greater if s.range_rows > 0.0 => return s.average_range_rows(),
            Ordering::Greater => return 0.0,
        }
    }
    0.0
}

/// Estimated rows whose column lies between `low` and `high` (stored encodings; NULLs
/// never do, as no comparison with NULL is true): each step's EQ_ROWS when its key is
/// inside, its RANGE_ROWS when its whole range is, half of them when a bound cuts it.
pub fn estimate_range(
    d: &StatisticsData,
    system_type_id: u8,
    low: Bound<&[u8]>,
    high: Bound<&[u8]>,
) -> f64 {
    let cmp = |a: &[u8], b: &[u8]| key::compare(system_type_id, Some(a), Some(b));
    let (lo, hi) = (bound_key(low), bound_key(high));
    let key_in = |k: &[u8]| {
        let above = match low {
            Bound::Unbounded => true,
            Bound::Included(l) => cmp(k, l) != Ordering::Less,
            Bound::Excluded(l) => cmp(k, l) == Ordering::Greater,
        };
        let below = match high {
            Bound::Unbounded => true,
            Bound::Included(h) => cmp(k, h) != Ordering::Greater,
            Bound::Excluded(h) => cmp(k, h) == Ordering::Less,
        };
        above && below
    };
    let mut rows = 0.0;
    let mut previous: Option<&[u8]> = None;
    for s in &d.steps {
        let Some(k) = s.range_hi_key.as_deref() else {
            continue;
        };
        if key_in(k) {
            rows += s.eq_rows;
        }
        // The open range (previous, k): inside when previous >= low and k <= high,
        // outside when previous >= high or k <= low, else cut by a bound.
        let ge = |a: Option<&[u8]>, b: Option<&[u8]>| match (a, b) {
            (_, None) => true,
            (None, Some(_)) => false,
            (Some(a), Some(b)) => cmp(a, b) != Ordering::Less,
        };
        let le = |a: &[u8], b: Option<&[u8]>| b.is_none_or(|b| cmp(a, b) != Ordering::Greater);
        let inside = ge(previous, lo) && le(k, hi);
        let outside = (hi.is_some() && previous.is_some() && ge(previous, hi))
            || lo.is_some_and(|l| cmp(k, l) != Ordering::Greater);
        rows += match (inside, outside) {
            (true, _) => s.range_rows,
            (false, true) => 0.0,
            (false, false) => s.range_rows / 2.0,
        };
        previous = Some(k);
    }
    rows
}

fn bound_key(b: Bound<&[u8]>) -> Option<&[u8]> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    }
}

/// The builder's steps as the catalog keeps them: keys in their stored encoding
/// (`encode` for the column's type), counts scaled by `scale` (the rows over the rows
/// sampled).
pub fn stored_steps(
    steps: Vec<Step>,
    scale: f64,
    encode: &dyn Fn(&Value) -> Option<Vec<u8>>,
) -> Vec<HistogramStep> {
    steps
        .into_iter()
        .map(|s| HistogramStep {
            range_hi_key: encode(&s.key),
            range_rows: s.range_rows * scale,
            eq_rows: s.eq_rows * scale,
            distinct_range_rows: s.distinct_range_rows,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use extentdb_format::key::type_id;

    fn int(v: i32) -> Option<Vec<u8>> {
        Some(v.to_le_bytes().to_vec())
    }

    fn data(steps: Vec<Step>) -> StatisticsData {
        let rows = steps.iter().map(|s| s.range_rows + s.eq_rows).sum::<f64>() as u64;
        let encode = |v: &Value| match v {
            Value::Int(x) => int(*x),
            _ => None,
        };
        StatisticsData {
            updated_us: 0,
            rows,
            rows_sampled: rows,
            unfiltered_rows: rows,
            average_key_length: 4.0,
            density_columns: vec![1],
            densities: vec![(0.0, 4.0)],
            steps: stored_steps(steps, 1.0, &encode),
        }
    }

    /// Invariants 1 to 3 over 100,000 distinct values, one of them holding a tenth of the
    /// rows: at most 200 steps, nothing lost, the first and last values kept, and the
    /// frequent value a step of its own with its exact EQ_ROWS.
    #[test]
    fn folds_keep_every_row_and_frequent_values() {
        let mut b = HistogramBuilder::new();
        let mut rows = 0.0;
        for v in 0..100_000 {
            let n = if v == 50_000 { 11_111.0 } else { 1.0 };
            b.push(Value::Int(v), n);
            rows += n;
            assert!(b.steps.len() < 2 * MAX_STEPS);
        }
        let steps = b.finish();
        assert!(steps.len() <= MAX_STEPS);
        let sum: f64 = steps.iter().map(|s| s.range_rows + s.eq_rows).sum();
        assert_eq!(sum, rows);
        let distinct: f64 = steps.iter().map(|s| s.distinct_range_rows + 1.0).sum();
        assert_eq!(distinct, 100_000.0);
        assert_eq!(steps[0].key, Value::Int(0));
        assert_eq!(steps[0].range_rows, 0.0);
        assert_eq!(steps.last().unwrap().key, Value::Int(99_999));
        let frequent = steps.iter().find(|s| s.key == Value::Int(50_000));
        assert_eq!(frequent.map(|s| s.eq_rows), Some(11_111.0));
    }

    /// A NULL step stays first and the smallest value keeps its step beside it.
    #[test]
    fn null_step_and_minimum_are_kept() {
        let mut b = HistogramBuilder::new();
        b.push(Value::Null, 3.0);
        for v in 0..1000 {
            b.push(Value::Int(v), 1.0);
        }
        let steps = b.finish();
        assert_eq!((steps[0].key.clone(), steps[0].eq_rows), (Value::Null, 3.0));
        assert_eq!(steps[1].key, Value::Int(0));
    }

    /// Estimates read the histogram: equality on a step key is its EQ_ROWS, inside a
    /// range its AVG_RANGE_ROWS, outside 0; a range over every step is every non-NULL row.
    #[test]
    fn estimates_from_steps() {
        let mut b = HistogramBuilder::new();
        b.push(Value::Null, 5.0);
        for v in 1..=1000 {
            b.push(Value::Int(v), if v == 500 { 300.0 } else { 2.0 });
        }
        let d = data(b.finish());
        let t = type_id::INT;
        assert_eq!(estimate_equal(&d, t, int(500).as_deref()), 300.0);
        assert_eq!(estimate_equal(&d, t, None), 5.0);
        assert_eq!(estimate_equal(&d, t, int(5000).as_deref()), 0.0);
        assert_eq!(estimate_equal(&d, t, int(0).as_deref()), 0.0);
        let inside = d
            .steps
            .iter()
            .position(|s| s.range_rows > 0.0)
            .expect("a step with a range");
        let k = i32::from_le_bytes(
            d.steps[inside]
                .range_hi_key
                .clone()
                .unwrap()
                .try_into()
                .unwrap(),
        );
        let below = int(k - 1);
        assert_eq!(
            estimate_equal(&d, t, below.as_deref()),
            d.steps[inside].average_range_rows()
        );
        let all = estimate_range(&d, t, Bound::Unbounded, Bound::Unbounded);
        assert_eq!(all, 999.0 * 2.0 + 300.0);
        let (lo, hi) = (int(1).unwrap(), int(1000).unwrap());
        let closed = estimate_range(&d, t, Bound::Included(&lo), Bound::Included(&hi));
        assert_eq!(closed, all);
        let none = estimate_range(&d, t, Bound::Excluded(&hi), Bound::Unbounded);
        assert_eq!(none, 0.0);
        let half = estimate_range(&d, t, Bound::Unbounded, Bound::Included(&int(500).unwrap()));
        assert!((half - (499.0 * 2.0 + 300.0)).abs() <= 40.0, "{half}");
    }
}
