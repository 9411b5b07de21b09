//! The in-memory tables DataFusion is measured on: `kv` as `bench/wire/` makes it (k INT
//! key, x INT, pad CHAR(200)) with 100,000 rows or 1 row, and `branches` (10 rows) to join
//! with. Arrow batches of 8,192 rows, DataFusion's default batch size.

use std::sync::Arc;

use datafusion::arrow::array::{Int32Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;

pub const KV_ROWS: i32 = 100_000;
const BATCH_ROWS: i32 = 8192;
pub const BRANCHES: i32 = 10;

fn kv_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int32, false),
        Field::new("x", DataType::Int32, false),
        Field::new("pad", DataType::Utf8, false),
    ]))
}

/// `kv` with keys 0..rows; x = k % BRANCHES (the join column); pad 200 characters.
pub fn kv(rows: i32) -> MemTable {
    let schema = kv_schema();
    let pad = "p".repeat(200);
    let mut batches = Vec::new();
    let mut start = 0;
    while start < rows {
        let end = (start + BATCH_ROWS).min(rows);
        let keys: Vec<i32> = (start..end).collect();
        let xs: Vec<i32> = keys.iter().map(|k| k % BRANCHES).collect();
        let pads: Vec<&str> = keys.iter().map(|_| pad.as_str()).collect();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int32Array::from(keys)),
                Arc::new(Int32Array::from(xs)),
                Arc::new(StringArray::from(pads)),
            ],
        )
        .expect("kv batch");
        batches.push(batch);
        start = end;
    }
    MemTable::try_new(schema, vec![batches]).expect("kv table")
}

pub fn branches() -> MemTable {
    let schema = Arc::new(Schema::new(vec![
        Field::new("bid", DataType::Int32, false),
        Field::new("bbalance", DataType::Int32, false),
    ]));
    let ids: Vec<i32> = (0..BRANCHES).collect();
    let balances: Vec<i32> = ids.iter().map(|b| b * 100).collect();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int32Array::from(ids)),
            Arc::new(Int32Array::from(balances)),
        ],
    )
    .expect("branches batch");
    MemTable::try_new(schema, vec![vec![batch]]).expect("branches table")
}

/// A context holding `kv` (100,000 rows), `kv_one` (1 row) and `branches`.
pub fn context(ctx: SessionContext) -> SessionContext {
    ctx.register_table("kv", Arc::new(kv(KV_ROWS)))
        .expect("register kv");
    ctx.register_table("kv_one", Arc::new(kv(1)))
        .expect("register kv_one");
    ctx.register_table("branches", Arc::new(branches()))
        .expect("register branches");
    ctx
}
