//! extentdb's own point SELECT in-process (`Session::execute`: parse, resolve, a seek of the
//! clustered key, the row) beside DataFusion's on the same 100,000 rows, interleaved; and
//! what extentdb answers the small join today.

use datafusion::prelude::{SessionConfig, SessionContext};
use serde_json::{json, Value};
use tokio::runtime::Runtime;

use crate::df_tables::{context, KV_ROWS};
use crate::engine::{answer, load_kv, Fixture};
use crate::timing::interleaved;

const ROUNDS: usize = 15;
const ITERATIONS: usize = 200;

pub fn run(rt: &Runtime, fixture: &Fixture) -> Value {
    println!("== extentdb in-process against DataFusion, the same point SELECT ==");
    let mut s = fixture.session();
    load_kv(&mut s, KV_ROWS);
    assert_eq!(
        answer(&mut s, "SELECT COUNT(*) FROM kv"),
        KV_ROWS.to_string()
    );
    let ctx = context(SessionContext::new_with_config(
        SessionConfig::new().with_target_partitions(1),
    ));
    let key = std::cell::Cell::new(0i32);
    let next = || {
        key.set((key.get() + 7919) % KV_ROWS);
        key.get()
    };
    let mut ours = || {
        s.execute(&format!("SELECT x, pad FROM kv WHERE k = {}", next()))
            .len()
    };
    let mut df = || {
        let sql = format!("SELECT x, pad FROM kv WHERE k = {}", next());
        rt.block_on(async {
            ctx.sql(&sql)
                .await
                .expect("plan")
                .collect()
                .await
                .expect("run")
                .len()
        })
    };
    let f = interleaved(ROUNDS, ITERATIONS, &mut [&mut ours, &mut df]);
    println!(
        "extentdb Session::execute   {:>9.1} us per point SELECT (rounds {:.1}-{:.1})",
        f[0].median_us, f[0].min_us, f[0].max_us
    );
    println!(
        "DataFusion SessionContext   {:>9.1} us per point SELECT (rounds {:.1}-{:.1})",
        f[1].median_us, f[1].min_us, f[1].max_us
    );
    let join = "SELECT t.k, t.x, b.bid FROM kv AS t JOIN kv AS b ON b.k = t.x WHERE t.k = 4242";
    let join_answer = answer(&mut fixture.session(), join);
    println!("extentdb on a join: {join_answer}");
    json!({
        "kv_rows": KV_ROWS,
        "sql": "SELECT x, pad FROM kv WHERE k = <key>",
        "extentdb_session_execute": f[0].json(),
        "datafusion_target_partitions_1": f[1].json(),
        "ratio_datafusion_to_extentdb": f[1].median_us / f[0].median_us,
        "extentdb_join": { "sql": join, "answer": join_answer },
    })
}
