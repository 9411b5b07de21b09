//! Interleaved timing: two (or more) contenders run in alternating rounds (A, B, A, B, ...)
//! so that drift in the machine's load falls on both alike; each round times a batch of
//! iterations, and the figure is the median over rounds of the time per iteration.
//!
//! Invariants: 1. every contender runs the same number of rounds and iterations; 2. a
//! contender's result is consumed (`black_box`) so the work is not optimised away.

use std::hint::black_box;
use std::time::Instant;

/// One contender's figures, in microseconds per iteration.
#[derive(Debug, Clone)]
pub struct Figure {
    pub median_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    pub rounds: usize,
    pub iterations_per_round: usize,
}

impl Figure {
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "median_us": self.median_us,
            "min_round_us": self.min_us,
            "max_round_us": self.max_us,
            "rounds": self.rounds,
            "iterations_per_round": self.iterations_per_round,
        })
    }
}

/// Runs each closure `iterations` times per round, `rounds` rounds, the closures taking
/// turns round by round (A, B, A, B, ...); returns one figure per closure.
pub fn interleaved<R>(
    rounds: usize,
    iterations: usize,
    contenders: &mut [&mut dyn FnMut() -> R],
) -> Vec<Figure> {
    assert!(rounds > 0 && iterations > 0);
    let mut per_round: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); contenders.len()];
    for _ in 0..rounds {
        for (i, run) in contenders.iter_mut().enumerate() {
            let start = Instant::now();
            for _ in 0..iterations {
                black_box(run());
            }
            let us = start.elapsed().as_secs_f64() * 1e6 / iterations as f64;
            per_round[i].push(us);
        }
    }
    per_round
        .into_iter()
        .map(|samples| summarize(samples, iterations))
        .collect()
}

/// The median, minimum and maximum of one contender's per-round times.
fn summarize(mut samples: Vec<f64>, iterations: usize) -> Figure {
    samples.sort_by(|a, b| a.total_cmp(b));
    let n = samples.len();
    let median = if n % 2 == 1 {
        samples[n / 2]
    } else {
        (samples[n / 2 - 1] + samples[n / 2]) / 2.0
    };
    Figure {
        median_us: median,
        min_us: samples[0],
        max_us: samples[n - 1],
        rounds: n,
        iterations_per_round: iterations,
    }
}

/// How many iterations make a round last about `target_ms`, from one timed call.
pub fn iterations_for(target_ms: f64, mut run: impl FnMut()) -> usize {
    run(); // warm caches
    let start = Instant::now();
    run();
    let us = start.elapsed().as_secs_f64() * 1e6;
    ((target_ms * 1000.0 / us.max(0.01)) as usize).clamp(1, 100_000)
}
