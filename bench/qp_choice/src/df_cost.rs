//! DataFusion's per-query overhead, in-process: a point lookup and a small join planned
//! and executed from SQL text on MemTables (`df_tables.rs`), whole and by phase (SQL to
//! logical plan, optimiser and physical plan, execution), and a "prepared" path that keeps
//! the logical plan with a `$1` placeholder and binds a value per call (DataFusion caches
//! no physical plan, so optimisation and physical planning run every call).
//!
//! MemTable has no index: a lookup filters every row. The 1-row table `kv_one` gives the
//! framework's fixed cost, the floor a TableProvider seeking our B-tree could reach.

use std::time::Instant;

use datafusion::common::ScalarValue;
use datafusion::physical_plan::collect;
use datafusion::prelude::{SessionConfig, SessionContext};
use serde_json::{json, Value};
use tokio::runtime::Runtime;

use crate::df_tables::{context, KV_ROWS};
use crate::timing::interleaved;

const ROUNDS: usize = 15;
const ITERATIONS: usize = 40;

fn point(table: &str, key: i32) -> String {
    format!("SELECT x, pad FROM {table} WHERE k = {key}")
}

fn join(table: &str, key: i32) -> String {
    format!("SELECT t.k, t.x, b.bbalance FROM {table} AS t JOIN branches AS b ON b.bid = t.x WHERE t.k = {key}")
}

/// Runs `sql` to its rows; returns how many.
async fn rows(ctx: &SessionContext, sql: &str) -> usize {
    let df = ctx.sql(sql).await.expect("plan");
    df.collect()
        .await
        .expect("run")
        .iter()
        .map(|b| b.num_rows())
        .sum()
}

pub fn run(rt: &Runtime) -> Value {
    println!("== DataFusion per query (in-process, current-thread tokio runtime) ==");
    let mut configs = Vec::new();
    for (label, config) in [
        (
            "target_partitions_1",
            SessionConfig::new().with_target_partitions(1),
        ),
        ("default_config", SessionConfig::new()),
    ] {
        let ctx = context(SessionContext::new_with_config(config));
        let partitions = ctx.state().config().target_partitions();
        configs.push(one_config(rt, label, partitions, &ctx));
    }
    json!({ "kv_rows": KV_ROWS, "rounds": ROUNDS, "iterations_per_round": ITERATIONS, "configs": configs })
}

fn one_config(rt: &Runtime, label: &str, partitions: usize, ctx: &SessionContext) -> Value {
    // Each call looks up another key, so nothing a call leaves behind serves the next.
    let mut n = 0i32;
    let mut next = move || {
        n = (n + 7919) % KV_ROWS;
        n
    };
    assert_eq!(
        rt.block_on(rows(ctx, &point("kv", 4242))),
        1,
        "a point lookup finds its row"
    );
    assert_eq!(
        rt.block_on(rows(ctx, &join("kv", 4242))),
        1,
        "the join finds its row"
    );
    let keys = std::cell::RefCell::new(&mut next);
    let key = || (keys.borrow_mut())();
    let mut a = || rt.block_on(rows(ctx, &point("kv", key())));
    let mut b = || rt.block_on(rows(ctx, &point("kv_one", 0)));
    let mut c = || rt.block_on(rows(ctx, &join("kv", key())));
    let mut d = || rt.block_on(rows(ctx, &join("kv_one", 0)));
    let f = interleaved(ROUNDS, ITERATIONS, &mut [&mut a, &mut b, &mut c, &mut d]);
    let names = ["point_100k", "point_1row", "join_100k", "join_1row"];
    for (name, fig) in names.iter().zip(&f) {
        println!(
            "{label:<20} {name:<12} {:>9.1} us per query (rounds {:.1}-{:.1})",
            fig.median_us, fig.min_us, fig.max_us
        );
    }
    let phases_point = phases(rt, ctx, &point("kv", 4242));
    let phases_point_one = phases(rt, ctx, &point("kv_one", 0));
    let phases_join_one = phases(rt, ctx, &join("kv_one", 0));
    let prepared = prepared(rt, ctx);
    json!({
        "label": label,
        "target_partitions": partitions,
        "sql_to_rows_us": names.iter().zip(&f).map(|(n, fig)| (n.to_string(), fig.json())).collect::<serde_json::Map<_, _>>(),
        "phases_point_100k": phases_point,
        "phases_point_1row": phases_point_one,
        "phases_join_1row": phases_join_one,
        "prepared_point": prepared,
    })
}

/// Median microseconds of each phase over ROUNDS x ITERATIONS calls of one query.
fn phases(rt: &Runtime, ctx: &SessionContext, sql: &str) -> Value {
    let state = ctx.state();
    let mut samples: [Vec<f64>; 3] = Default::default();
    for _ in 0..ROUNDS * ITERATIONS {
        let t0 = Instant::now();
        let logical = rt
            .block_on(state.create_logical_plan(sql))
            .expect("logical");
        let t1 = Instant::now();
        let physical = rt
            .block_on(state.create_physical_plan(&logical))
            .expect("physical");
        let t2 = Instant::now();
        let batches = rt
            .block_on(collect(physical, ctx.task_ctx()))
            .expect("collect");
        let t3 = Instant::now();
        std::hint::black_box(batches);
        samples[0].push((t1 - t0).as_secs_f64() * 1e6);
        samples[1].push((t2 - t1).as_secs_f64() * 1e6);
        samples[2].push((t3 - t2).as_secs_f64() * 1e6);
    }
    let [a, b, c] = samples.map(median);
    println!("  phases of {sql:<70}: sql->logical {a:>7.1} us, optimize+physical {b:>7.1} us, execute {c:>8.1} us");
    json!({ "sql": sql, "sql_to_logical_us": a, "optimize_and_physical_us": b, "execute_us": c })
}

/// The logical plan kept with a placeholder; per call: bind, optimise, plan, execute.
fn prepared(rt: &Runtime, ctx: &SessionContext) -> Value {
    let state = ctx.state();
    let mut out = serde_json::Map::new();
    for table in ["kv", "kv_one"] {
        let sql = format!("SELECT x, pad FROM {table} WHERE k = $1");
        let template = rt
            .block_on(state.create_logical_plan(&sql))
            .expect("template");
        let mut samples = Vec::new();
        for i in 0..ROUNDS * ITERATIONS {
            let key = if table == "kv" {
                (i as i32 * 7919) % KV_ROWS
            } else {
                0
            };
            let t0 = Instant::now();
            let bound = template
                .clone()
                .with_param_values(vec![ScalarValue::Int32(Some(key))])
                .expect("bind");
            let physical = rt
                .block_on(state.create_physical_plan(&bound))
                .expect("physical");
            let batches = rt
                .block_on(collect(physical, ctx.task_ctx()))
                .expect("collect");
            samples.push(t0.elapsed().as_secs_f64() * 1e6);
            assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
        }
        let m = median(samples);
        println!("  prepared (bind + optimize + physical + execute) {table:<7}: {m:>8.1} us");
        out.insert(table.to_string(), json!({ "sql": sql, "median_us": m }));
    }
    Value::Object(out)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}
