//! sys.dm_db_index_physical_stats(database_id, object_id, index_id, partition_number, mode)
//! in FROM: size and fragmentation of tables and indexes, counted from their pages by
//! storage's physical_stats.rs, a chunk of pages at a time with the database shared only
//! for the chunk (other sessions' statements run between chunks).
//!
//! One row per heap (index 0), and per B-tree level of a clustered (1) or nonclustered
//! index: the leaf level only in LIMITED and SAMPLED mode, every level in DETAILED.
//! NULL, DEFAULT and 0 mean every database / object / partition, NULL, DEFAULT and -1
//! every index, NULL and DEFAULT LIMITED. Every table has one partition (number 1).
//!
//! Differences from SQL Server, none of them in the numbers' meaning: LIMITED reads the
//! leaf pages as DETAILED does (SQL Server reads only the level above them) and shows
//! NULL where SQL Server's LIMITED does (space used, record counts and sizes); SAMPLED
//! reads every leaf page (SQL Server samples 1% of an index past 10,000 pages), so it
//! gives DETAILED's leaf row. A heap's fragmentation is counted as an index leaf's, over
//! its pages in allocation order. version_ghost_record_count is 0 (no row versions) and
//! compressed_page_count 0 (no compression).
//!
//! Memory: a walk keeps sums and one page id; the rows are one per level of each index
//! (at most a tree's depth, under 64, per index).

use extentdb_storage::instance::DbHandle;
use extentdb_storage::physical_stats::LevelWalk;

use super::errors;
use super::eval::{as_i64, to_text};
use super::views::{cols, Rowset};
use super::Session;
use crate::ast::Expr;
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value};

const NAME: &str = "dm_db_index_physical_stats";
/// Pages a walk reads per hold of the database.
const CHUNK_PAGES: usize = 1024;

/// What the mode argument asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Limited,
    Sampled,
    Detailed,
}

/// One table or index to report.
struct Target {
    object_id: u32,
    index_id: u16,
    /// The catalog entry whose pages hold it.
    entry_id: u32,
    kind: &'static str,
}

impl Session {
    /// The function's rows (the module's doc); Msgs 216 and 8144 for the wrong number of
    /// arguments, 1023 for an argument out of its domain.
    pub(super) fn index_physical_stats(&mut self, args: &[Expr]) -> Result<Rowset, Vec<SqlError>> {
        if args.len() < 5 {
            return Err(vec![msg(216, &[&NAME])]);
        }
        if args.len() > 5 {
            return Err(vec![msg(8144, &[&NAME])]);
        }
        let bad = |n: i32| vec![msg(1023, &[&n, &NAME])];
        let db_id = self.stats_number(&args[0])?.filter(|&n| n != 0);
        let object_id = self.stats_number(&args[1])?.filter(|&n| n != 0);
        let index_id = self.stats_number(&args[2])?.filter(|&n| n != -1);
        let partition = self.stats_number(&args[3])?.filter(|&n| n != 0);
        let mode = match self.stats_text(&args[4])?.map(|m| m.to_ascii_uppercase()) {
            None => Mode::Limited,
            Some(m) if m == "LIMITED" => Mode::Limited,
            Some(m) if m == "SAMPLED" => Mode::Sampled,
            Some(m) if m == "DETAILED" => Mode::Detailed,
            Some(_) => return Err(bad(5)),
        };
        if index_id.is_some_and(|i| i < -1) {
            return Err(bad(3));
        }
        if partition.is_some_and(|p| p < 0) {
            return Err(bad(4));
        }
        let databases = match db_id {
            None => self.engine.instance.databases(),
            Some(id) => {
                let id = u16::try_from(id).map_err(|_| bad(1))?;
                let db = self.engine.instance.database(id).ok_or_else(|| bad(1))?;
                vec![(id, db)]
            }
        };
        let mut rows = Vec::new();
        if partition.is_none_or(|p| p == 1) {
            for (id, db) in databases {
                let targets = targets(&db, object_id, index_id);
                for t in targets {
                    stats_rows(&db, (id, &t), mode, &mut rows)
                        .map_err(|e| errors::map(&e, errors::Context::Other))?;
                }
            }
        }
        Ok(Rowset {
            columns: columns(),
            rows,
        })
    }

    /// A numeric argument; None for NULL and DEFAULT.
    fn stats_number(&mut self, e: &Expr) -> Result<Option<i64>, Vec<SqlError>> {
        if matches!(e, Expr::Default) {
            return Ok(None);
        }
        match self.eval(e, None).map_err(|e| vec![e])? {
            Value::Null => Ok(None),
            v => as_i64(&v).map(Some).map_err(|e| vec![e]),
        }
    }

    /// The mode argument; None for NULL and DEFAULT.
    fn stats_text(&mut self, e: &Expr) -> Result<Option<String>, Vec<SqlError>> {
        if matches!(e, Expr::Default) {
            return Ok(None);
        }
        match self.eval(e, None).map_err(|e| vec![e])? {
            Value::Null => Ok(None),
            v => Ok(Some(to_text(&v))),
        }
    }
}

/// The tables and indexes of `db` the arguments select, in catalog order.
fn targets(db: &DbHandle, object_id: Option<i64>, index_id: Option<i64>) -> Vec<Target> {
    let d = db.read().unwrap();
    let mut out = Vec::new();
    for t in d.live_tables() {
        if object_id.is_some_and(|o| o != t.object_id as i64) {
            continue;
        }
        let kind = match t.index_id {
            1 => "CLUSTERED INDEX",
            _ => "HEAP",
        };
        out.push(Target {
            object_id: t.object_id,
            index_id: t.index_id as u16,
            entry_id: t.object_id,
            kind,
        });
        for ix in d.indexes_of(t.object_id) {
            let info = ix.index_of.as_ref().expect("an index entry");
            out.push(Target {
                object_id: t.object_id,
                index_id: info.index_id,
                entry_id: ix.object_id,
                kind: "NONCLUSTERED INDEX",
            });
        }
    }
    out.retain(|t| index_id.is_none_or(|i| i == t.index_id as i64));
    out.sort_by_key(|t| (t.object_id, t.index_id));
    out
}

/// Target `t`'s rows: its levels walked a chunk at a time, the database shared per chunk.
fn stats_rows(
    db: &DbHandle,
    (db_id, t): (u16, &Target),
    mode: Mode,
    rows: &mut Vec<Vec<Value>>,
) -> Result<(), extentdb_storage::StorageError> {
    let walks = db
        .read()
        .unwrap()
        .level_walks(t.entry_id, mode != Mode::Detailed)?;
    for mut w in walks {
        while !w.is_done() {
            db.read().unwrap().walk_level(&mut w, CHUNK_PAGES)?;
        }
        rows.push(row((db_id, t), &w, mode));
    }
    Ok(())
}

/// One row of the function for walk `w` of target `t`.
fn row((db_id, t): (u16, &Target), w: &LevelWalk, mode: Mode) -> Vec<Value> {
    let s = &w.stats;
    let full = mode != Mode::Limited;
    let big = |n: u64| Value::BigInt(n as i64);
    let when = |v: Value| if full { v } else { Value::Null };
    let forwarded = match (t.kind, full) {
        ("HEAP", true) => big(s.forwarded_record_count),
        _ => Value::Null,
    };
    let fragment_size = match s.fragments {
        0 => Value::Null,
        n => Value::Float(s.page_count as f64 / n as f64),
    };
    let size = |v: Option<u64>| when(v.map_or(Value::Null, |n| Value::Int(n as i32)));
    vec![
        Value::SmallInt(db_id as i16),
        Value::Int(t.object_id as i32),
        Value::Int(t.index_id as i32),
        Value::Int(1),
        Value::Text(t.kind.into()),
        Value::Text("IN_ROW_DATA".into()),
        Value::TinyInt(w.depth),
        Value::TinyInt(w.level),
        Value::Float(s.fragmentation_pct()),
        big(s.fragments),
        fragment_size,
        big(s.page_count),
        when(Value::Float(s.space_used_pct())),
        when(big(s.record_count)),
        when(big(s.ghost_record_count)),
        when(big(0)),
        size(s.min_record_bytes),
        size(s.max_record_bytes),
        when(Value::Float(s.avg_record_bytes())),
        forwarded,
        big(0),
    ]
}

/// SQL Server's columns, in its order (through compressed_page_count).
fn columns() -> Vec<(String, SqlType)> {
    cols(&[
        ("database_id", SqlType::SmallInt),
        ("object_id", SqlType::Int),
        ("index_id", SqlType::Int),
        ("partition_number", SqlType::Int),
        ("index_type_desc", SqlType::NVarChar(60)),
        ("alloc_unit_type_desc", SqlType::NVarChar(60)),
        ("index_depth", SqlType::TinyInt),
        ("index_level", SqlType::TinyInt),
        ("avg_fragmentation_in_percent", SqlType::Float),
        ("fragment_count", SqlType::BigInt),
        ("avg_fragment_size_in_pages", SqlType::Float),
        ("page_count", SqlType::BigInt),
        ("avg_page_space_used_in_percent", SqlType::Float),
        ("record_count", SqlType::BigInt),
        ("ghost_record_count", SqlType::BigInt),
        ("version_ghost_record_count", SqlType::BigInt),
        ("min_record_size_in_bytes", SqlType::Int),
        ("max_record_size_in_bytes", SqlType::Int),
        ("avg_record_size_in_bytes", SqlType::Float),
        ("forwarded_record_count", SqlType::BigInt),
        ("compressed_page_count", SqlType::BigInt),
    ])
}
