//! Window functions: `f(...) OVER ([PARTITION BY ...] [ORDER BY ...] [ROWS | RANGE frame])`
//! in a select list and ORDER BY. Ranking (ROW_NUMBER, RANK, DENSE_RANK, NTILE), offset
//! (LAG, LEAD, FIRST_VALUE, LAST_VALUE) and the aggregates COUNT, COUNT_BIG, SUM, AVG, MIN,
//! MAX over a frame.
//!
//! A query with window functions becomes an ordinary one over a computed source, as a
//! grouped one does (`aggregate.rs`): each window call in the select list and ORDER BY is
//! replaced by a hidden column (`\u{1}win<i>`) that the rows of the FROM clause (after
//! WHERE; with GROUP BY, the groups after HAVING) carry, computed like this. Calls with
//! one PARTITION BY and ORDER BY share a *pass*: the input is sorted by (partition keys,
//! order keys) with `SortSpill` (each row prefixed by those keys and the calls' evaluated
//! arguments), then read partition by partition; each partition goes into a `Spool`
//! (which spills past `SORT_MEMORY_BYTES`) and its rows come out one at a time with the
//! pass's values appended. A second pass sorts the first one's output, and so on.
//!
//! Frames as SQL Server's: without ORDER BY the whole partition; with ORDER BY and no
//! frame, RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW (the row's peers, rows with
//! equal order keys, included); ROWS with UNBOUNDED / n PRECEDING, CURRENT ROW, n /
//! UNBOUNDED FOLLOWING; RANGE only with UNBOUNDED and CURRENT ROW (4194).
//!
//! Types: ROW_NUMBER, RANK, DENSE_RANK, NTILE bigint; COUNT int, COUNT_BIG bigint; SUM,
//! AVG, MIN, MAX as the plain aggregates (`aggregate::result_of`) over the argument's type;
//! LAG, LEAD, FIRST_VALUE, LAST_VALUE the argument's (LAG's and LEAD's default converted to
//! it). A column argument has its column's type; a computed one the first non-NULL
//! value's, widened (`select::widened`), known once the pass's sort has seen every row.
//!
//! Invariants:
//! 1. Memory: a pass holds its sort's `SORT_MEMORY_BYTES`, then one partition's spool
//!    (`SORT_MEMORY_BYTES`, the rest spilled) and, per function, one reader's row and at
//!    most `FRAME_MEMORY_BYTES` of frame values: nothing grows with a table or a partition.
//! 2. A frame's bounds never move backwards as the current row advances (every bound is
//!    UNBOUNDED, the current row or its peers, or a fixed offset from it), so the readers
//!    of a spilled partition read forwards, each row once: a frame that starts at the
//!    partition's first row folds on as it grows; one whose start moves takes leaving rows
//!    back (COUNT, and SUM and AVG of integers and decimals: `Partition::slide`), or keeps
//!    its values (`FrameValues`: MIN, MAX, float sums) and folds them again for each row;
//!    past their memory it is read again from the spool for each row (time, not memory).
//! 3. Peers are rows with equal order keys as `same_row` compares them (NULLs equal), the
//!    order the sort gave them (`stream::key_order`: NULLs first).
//!
//! Not here: STDEV, VAR and the other statistical aggregates over a window, PERCENT_RANK,
//! CUME_DIST and the percentiles (refused with 40517); named windows (WINDOW clause, a
//! syntax error); window functions in an assignment SELECT (40517).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::aggregate::{contains_window, map_expr, Accumulator};
use super::lower::not_yet;
use super::select::{same_row, widened, Source};
use super::spill::{SortSpill, SortedRows, Spool, SpoolCursor};
use super::stream::{key_order, Filtered, RowSource, SORT_MEMORY_BYTES};
use super::views::Rowset;
use super::{Out, Session};
use crate::ast::{
    Expr, FrameBound, Literal, ObjectName, OrderByItem, Query, Select, SelectItem, WindowCall,
    WindowFrame,
};
use crate::convert::{convert, type_of};
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value};

type Errors = Vec<SqlError>;

fn one(e: SqlError) -> Errors {
    vec![e]
}

/// Functions that exist only with an OVER clause (10753 without one).
const WINDOW_ONLY: [&str; 8] = [
    "ROW_NUMBER",
    "RANK",
    "DENSE_RANK",
    "NTILE",
    "LAG",
    "LEAD",
    "FIRST_VALUE",
    "LAST_VALUE",
];
const AGGREGATES: [&str; 6] = ["COUNT", "COUNT_BIG", "SUM", "AVG", "MIN", "MAX"];
/// Windowed functions SQL Server has that are not built here (40517).
const NOT_BUILT: [&str; 9] = [
    "STDEV",
    "STDEVP",
    "VAR",
    "VARP",
    "CHECKSUM_AGG",
    "PERCENT_RANK",
    "CUME_DIST",
    "PERCENTILE_CONT",
    "PERCENTILE_DISC",
];

/// True for a function that needs an OVER clause (ROW_NUMBER, LAG, ...).
pub(super) fn is_window_only(name: &ObjectName) -> bool {
    // Asked for every function call evaluated: compares without allocating.
    name.parts.len() == 1
        && WINDOW_ONLY
            .iter()
            .any(|w| w.eq_ignore_ascii_case(name.name()))
}

fn hidden_name(i: usize) -> String {
    format!("\u{1}win{i}")
}

/// True when a query's select list or ORDER BY has a window function.
pub(super) fn has_windows(q: &Query, s: &Select) -> bool {
    let in_items = s.items.iter().any(|i| match i {
        SelectItem::Expr { expr, .. } => contains_window(expr),
        SelectItem::Assign { value, .. } => contains_window(value),
        SelectItem::Wildcard { .. } => false,
    });
    in_items || q.order_by.iter().any(|o| contains_window(&o.expr))
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    RowNumber,
    Rank,
    DenseRank,
    Ntile,
    Lag,
    Lead,
    FirstValue,
    LastValue,
    Aggregate,
}

/// A query with its window calls replaced by hidden columns, and the calls.
pub(super) struct WindowPlan {
    pub query: Query,
    pub select: Select,
    pub calls: Vec<WindowCall>,
}

/// Checks each window call of the select list and ORDER BY and replaces it by its hidden
/// column (equal calls share one); a window function in WHERE is 4108.
pub(super) fn plan(q: &Query, s: &Select) -> Result<WindowPlan, SqlError> {
    if s.where_clause.as_ref().is_some_and(contains_window) {
        return Err(msg(4108, &[]));
    }
    let mut calls: Vec<WindowCall> = Vec::new();
    let mut rewrite = |e: &Expr| -> Result<Expr, SqlError> {
        map_expr(e, &mut |x| {
            let Expr::Window(w) = x else {
                return Ok(None);
            };
            check_call(w)?;
            let i = match calls.iter().position(|c| c == &**w) {
                Some(i) => i,
                None => {
                    calls.push((**w).clone());
                    calls.len() - 1
                }
            };
            Ok(Some(Expr::Column(ObjectName::simple(&hidden_name(i)))))
        })
    };
    let mut items = Vec::with_capacity(s.items.len());
    for item in &s.items {
        items.push(match item {
            SelectItem::Expr { expr, alias } => SelectItem::Expr {
                expr: rewrite(expr)?,
                alias: alias.clone(),
            },
            SelectItem::Assign { .. } => {
                return Err(not_yet("window functions in an assignment SELECT"))
            }
            other => other.clone(),
        });
    }
    let mut order_by = Vec::with_capacity(q.order_by.len());
    for o in &q.order_by {
        order_by.push(OrderByItem {
            expr: rewrite(&o.expr)?,
            descending: o.descending,
        });
    }
    let select = Select {
        items,
        where_clause: None,
        ..s.clone()
    };
    let query = Query {
        order_by,
        ..q.clone()
    };
    Ok(WindowPlan {
        query,
        select,
        calls,
    })
}

/// The function a window call makes, checked as SQL Server checks it.
fn check_call(w: &WindowCall) -> Result<Kind, SqlError> {
    let Expr::Function {
        name,
        args,
        distinct,
        star,
    } = &w.function
    else {
        unreachable!("the parser puts OVER after a call only");
    };
    let upper = name.name().to_ascii_uppercase();
    let lower = upper.to_ascii_lowercase();
    let kind = match upper.as_str() {
        _ if name.parts.len() != 1 => return Err(msg(4113, &[&lower])),
        "ROW_NUMBER" => Kind::RowNumber,
        "RANK" => Kind::Rank,
        "DENSE_RANK" => Kind::DenseRank,
        "NTILE" => Kind::Ntile,
        "LAG" => Kind::Lag,
        "LEAD" => Kind::Lead,
        "FIRST_VALUE" => Kind::FirstValue,
        "LAST_VALUE" => Kind::LastValue,
        a if AGGREGATES.contains(&a) => Kind::Aggregate,
        n if NOT_BUILT.contains(&n) => {
            return Err(not_yet(&format!("the windowed function {n}")));
        }
        _ => return Err(msg(4113, &[&lower])),
    };
    let parts = args
        .iter()
        .chain(&w.partition_by)
        .chain(w.order_by.iter().map(|o| &o.expr));
    if parts.into_iter().any(contains_window) {
        return Err(msg(4109, &[]));
    }
    if *distinct {
        return Err(msg(10759, &[]));
    }
    check_arguments(kind, &upper, args.len(), *star)?;
    for o in &w.order_by {
        match &o.expr {
            Expr::Literal(Literal::Integer(_)) => return Err(msg(5308, &[])),
            Expr::Literal(_) => return Err(msg(5309, &[])),
            _ => {}
        }
    }
    if kind != Kind::Aggregate && w.order_by.is_empty() {
        return Err(msg(4112, &[&upper]));
    }
    if let Some(f) = &w.frame {
        if !matches!(kind, Kind::Aggregate | Kind::FirstValue | Kind::LastValue) {
            return Err(msg(10752, &[&lower]));
        }
        if w.order_by.is_empty() {
            return Err(msg(10756, &[]));
        }
        check_frame(f)?;
    }
    Ok(kind)
}

/// The argument counts: 174 and 189 as SQL Server words them.
fn check_arguments(kind: Kind, upper: &str, n: usize, star: bool) -> Result<(), SqlError> {
    let lower = upper.to_ascii_lowercase();
    let wanted = match kind {
        Kind::RowNumber | Kind::Rank | Kind::DenseRank => 0,
        Kind::Lag | Kind::Lead if !star && (1..=3).contains(&n) => return Ok(()),
        Kind::Lag | Kind::Lead => return Err(msg(189, &[&lower, &1, &3])),
        Kind::Aggregate if star => {
            return match upper {
                "COUNT" | "COUNT_BIG" => Ok(()),
                _ => Err(msg(102, &[&"*"])),
            };
        }
        _ => 1,
    };
    if star || n != wanted {
        return Err(msg(174, &[&lower, &wanted]));
    }
    Ok(())
}

/// A frame SQL Server accepts: RANGE only with UNBOUNDED and CURRENT ROW (4194), and a
/// start that is not after the end (4193).
fn check_frame(f: &WindowFrame) -> Result<(), SqlError> {
    use FrameBound::*;
    let offset = |b: FrameBound| matches!(b, Preceding(_) | Following(_));
    if !f.rows && (offset(f.start) || offset(f.end)) {
        return Err(msg(4194, &[]));
    }
    let backwards = match (f.start, f.end) {
        (Following(_), Preceding(_)) => Some("BETWEEN ... FOLLOWING AND ... PRECEDING"),
        (Following(_), CurrentRow) => Some("BETWEEN ... FOLLOWING AND CURRENT ROW"),
        (CurrentRow, Preceding(_)) => Some("BETWEEN CURRENT ROW AND ... PRECEDING"),
        _ => None,
    };
    match backwards {
        Some(text) => Err(msg(4193, &[&text])),
        None => Ok(()),
    }
}

/// One window call of a pass, its arguments at `slot..slot + args.len()` of each sorted
/// row.
struct Function {
    kind: Kind,
    call: Expr,
    args: Vec<Expr>,
    star: bool,
    frame: WindowFrame,
    slot: usize,
    /// The first argument's type: its column's, else the first non-NULL value's.
    arg_type: Option<SqlType>,
    /// Whether `arg_type` came from a column (else from a value, and is widened).
    declared: bool,
    /// LAG's and LEAD's default: its first non-NULL value's type (the result's when the
    /// argument is NULL throughout).
    default_type: Option<SqlType>,
}

impl Function {
    fn new(w: &WindowCall, slot: usize, src: &Source) -> Function {
        let kind = check_call(w).expect("checked by plan");
        let Expr::Function { args, star, .. } = &w.function else {
            unreachable!("checked by plan");
        };
        let frame = w.frame.unwrap_or(WindowFrame {
            rows: w.order_by.is_empty(),
            start: FrameBound::UnboundedPreceding,
            end: if w.order_by.is_empty() {
                FrameBound::UnboundedFollowing
            } else {
                FrameBound::CurrentRow
            },
        });
        let arg_type = match args.first() {
            Some(Expr::Column(c)) => src.position(c).map(|i| src.rowset.columns[i].1),
            _ => None,
        };
        Function {
            kind,
            call: w.function.clone(),
            args: args.clone(),
            star: *star,
            frame,
            slot,
            declared: arg_type.is_some(),
            arg_type,
            default_type: None,
        }
    }

    /// The result type, once every row's arguments were seen.
    fn result_type(&self) -> SqlType {
        let arg = self
            .arg_type
            .map(|t| if self.declared { t } else { widened(t) });
        match self.kind {
            Kind::RowNumber | Kind::Rank | Kind::DenseRank | Kind::Ntile => SqlType::BigInt,
            Kind::Aggregate => Accumulator::windowed(&self.call, arg).result_type(),
            _ => arg
                .or(self.default_type.map(widened))
                .unwrap_or(SqlType::Int),
        }
    }
}

/// Calls sharing one PARTITION BY and ORDER BY, and the layout of their sorted rows:
/// partition keys, order keys, each function's arguments, then the input row.
struct Pass {
    partition_by: Vec<Expr>,
    order_by: Vec<OrderByItem>,
    functions: Vec<Function>,
    prefix: usize,
}

impl Pass {
    fn new(calls: &[&WindowCall], src: &Source) -> Pass {
        let partition_by = calls[0].partition_by.clone();
        let order_by = calls[0].order_by.clone();
        let mut slot = partition_by.len() + order_by.len();
        let mut functions = Vec::with_capacity(calls.len());
        for w in calls {
            let f = Function::new(w, slot, src);
            slot += f.args.len();
            functions.push(f);
        }
        Pass {
            partition_by,
            order_by,
            functions,
            prefix: slot,
        }
    }

    fn keys(&self) -> std::ops::Range<usize> {
        self.partition_by.len()..self.partition_by.len() + self.order_by.len()
    }
}

impl Session {
    /// WHERE, the window functions, then the select list, ORDER BY and TOP over their
    /// hidden columns (`finish_streamed` again, without the window calls).
    pub(super) fn finish_windowed(
        &mut self,
        q: &Query,
        s: &Select,
        src: &Source,
        input: &mut dyn RowSource,
        out: &mut Out,
    ) -> Result<(), Errors> {
        let plan = plan(q, s).map_err(one)?;
        let mut filtered = Filtered {
            input,
            condition: s.where_clause.as_ref(),
            src,
        };
        let (windowed, mut rows) = self.windowed(&plan.calls, src, &mut filtered)?;
        self.finish_streamed(&plan.query, &plan.select, &windowed, &mut *rows, out)
    }

    /// `input`'s rows with each call's value appended (in `calls` order's passes), and the
    /// source that names those values by their hidden columns.
    pub(super) fn windowed(
        &mut self,
        calls: &[WindowCall],
        src: &Source,
        input: &mut dyn RowSource,
    ) -> Result<(Source, Box<dyn RowSource>), Errors> {
        // Calls with one PARTITION BY and ORDER BY share a pass (and its sort).
        let mut passes: Vec<Vec<usize>> = Vec::new();
        for (i, c) in calls.iter().enumerate() {
            let first = |p: &Vec<usize>| &calls[p[0]];
            match passes.iter_mut().find(|p| {
                first(p).partition_by == c.partition_by && first(p).order_by == c.order_by
            }) {
                Some(p) => p.push(i),
                None => passes.push(vec![i]),
            }
        }
        let mut columns = src.rowset.columns.clone();
        let mut rows: Option<Box<dyn RowSource>> = None;
        for members in &passes {
            let group: Vec<&WindowCall> = members.iter().map(|&i| &calls[i]).collect();
            let pass = Pass::new(&group, src);
            let done = match rows.take() {
                None => self.sort_pass(pass, src, input)?,
                Some(mut previous) => self.sort_pass(pass, src, &mut *previous)?,
            };
            for (f, &i) in done.pass.functions.iter().zip(members) {
                columns.push((hidden_name(i), f.result_type()));
            }
            rows = Some(Box::new(done));
        }
        let rows = rows.expect("a window plan has a call");
        let mut part_of = src.part_of.clone();
        if !part_of.is_empty() {
            part_of.resize(columns.len(), super::eval::UNQUALIFIED);
        }
        let windowed = Source {
            rowset: Rowset {
                columns,
                rows: Vec::new(),
            },
            table: src.table.clone(),
            alias: src.alias.clone(),
            parts: src.parts.clone(),
            part_of,
        };
        Ok((windowed, rows))
    }

    /// Sorts `input` by the pass's partition and order keys, each row prefixed by them and
    /// by the functions' evaluated arguments.
    fn sort_pass(
        &mut self,
        mut pass: Pass,
        src: &Source,
        input: &mut dyn RowSource,
    ) -> Result<WindowRows, Errors> {
        let failure = Arc::new(Mutex::new(None));
        let mut descending = vec![false; pass.partition_by.len()];
        descending.extend(pass.order_by.iter().map(|o| o.descending));
        let order = key_order(descending, failure.clone());
        let mut sort = SortSpill::new(&self.spill_dir(), SORT_MEMORY_BYTES, order);
        while let Some(r) = input.next_row(self)? {
            let ctx = Session::ctx(src, &r);
            let mut row = Vec::with_capacity(pass.prefix + r.len());
            let keys = pass
                .partition_by
                .iter()
                .chain(pass.order_by.iter().map(|o| &o.expr));
            for e in keys {
                row.push(self.eval(e, Some(&ctx)).map_err(one)?);
            }
            for f in &mut pass.functions {
                for (k, a) in f.args.iter().enumerate() {
                    let v = self.eval(a, Some(&ctx)).map_err(one)?;
                    if k == 0 && f.arg_type.is_none() && !v.is_null() {
                        f.arg_type = Some(type_of(&v));
                    }
                    if k == 2 && f.default_type.is_none() && !v.is_null() {
                        f.default_type = Some(type_of(&v));
                    }
                    row.push(v);
                }
            }
            debug_assert_eq!(row.len(), pass.prefix);
            row.extend(r);
            sort.push(row).map_err(one)?;
        }
        let sorted = sort.finish().map_err(one)?;
        if let Some(e) = failure.lock().unwrap().take() {
            return Err(vec![e]);
        }
        Ok(WindowRows {
            pass,
            sorted,
            pending: None,
            partition: None,
            failure,
            dir: self.spill_dir(),
        })
    }
}

/// A pass's output: its sorted rows, a partition at a time, each without its prefix and
/// with the pass's values appended.
struct WindowRows {
    pass: Pass,
    sorted: SortedRows,
    /// The first row of the next partition, read while looking for the current one's end.
    pending: Option<Vec<Value>>,
    partition: Option<Partition>,
    failure: Arc<Mutex<Option<SqlError>>>,
    dir: PathBuf,
}

impl RowSource for WindowRows {
    fn next_row(&mut self, s: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        loop {
            if let Some(p) = &mut self.partition {
                if p.next < p.len {
                    return p.next_row(&self.pass).map(Some).map_err(one);
                }
            }
            // The finished partition's spool goes before the next one fills (invariant 1).
            self.partition = None;
            if s.cancelled() {
                return Ok(None);
            }
            match self.spool_partition().map_err(one)? {
                Some(p) => self.partition = Some(p),
                None => {
                    if let Some(e) = self.failure.lock().unwrap().take() {
                        return Err(vec![e]);
                    }
                    return Ok(None);
                }
            }
        }
    }
}

impl WindowRows {
    /// The next partition's rows, spooled; None after the last.
    fn spool_partition(&mut self) -> Result<Option<Partition>, SqlError> {
        let first = match self.pending.take() {
            Some(r) => r,
            None => match self.sorted.next() {
                Some(r) => r?,
                None => return Ok(None),
            },
        };
        let np = self.pass.partition_by.len();
        let key = first[..np].to_vec();
        let mut spool = SortSpill::fifo(&self.dir, SORT_MEMORY_BYTES);
        spool.push(first)?;
        let mut len = 1;
        for r in self.sorted.by_ref() {
            let r = r?;
            if !same_row(&r[..np], &key) {
                self.pending = Some(r);
                break;
            }
            spool.push(r)?;
            len += 1;
        }
        let spool = spool.finish_rewindable()?;
        let states = self
            .pass
            .functions
            .iter()
            .map(|_| State::default())
            .collect();
        Ok(Some(Partition {
            spool,
            len,
            next: 0,
            current: Reader::default(),
            peers: Reader::default(),
            peer_start: 0,
            peer_end: 0,
            dense_rank: 0,
            states,
        }))
    }
}

/// Reads rows of a spooled partition by position (invariant 2): straight from memory when
/// nothing spilled, else forwards through a cursor, starting over to go back.
#[derive(Default)]
struct Reader {
    cursor: SpoolCursor,
    /// Rows read so far; `row` is the last of them.
    read: usize,
    row: Vec<Value>,
}

impl Reader {
    fn row<'a>(&'a mut self, spool: &'a Spool, i: usize) -> Result<&'a [Value], SqlError> {
        if let Some(rows) = spool.in_memory() {
            return Ok(&rows[i]);
        }
        if i + 1 < self.read {
            *self = Reader::default();
        }
        while self.read <= i {
            self.row = self
                .cursor
                .next_row(spool)?
                .expect("a partition holds the rows counted into it");
            self.read += 1;
        }
        Ok(&self.row)
    }
}

/// One function's state within a partition.
#[derive(Default)]
struct State {
    reader: Reader,
    /// A frame that starts at the partition's first row: its running aggregate and the
    /// rows folded in so far.
    running: Option<Accumulator>,
    added: usize,
    /// NTILE's tile count, from the partition's first row.
    tiles: i64,
    /// A frame whose start moves: its values.
    values: FrameValues,
    /// Whether that frame's aggregate slides (takes leaving rows back), once known.
    sliding: Option<bool>,
    /// The sliding frame's first row still in `running` (rows before it were taken
    /// back), and the reader that takes them back.
    removed: usize,
    behind: Reader,
}

/// One partition, spooled, and where its reading is.
struct Partition {
    spool: Spool,
    len: usize,
    /// The row to give next.
    next: usize,
    current: Reader,
    peers: Reader,
    /// The current row's peers: the first and last of them.
    peer_start: usize,
    peer_end: usize,
    dense_rank: i64,
    states: Vec<State>,
}

impl Partition {
    /// The current row without its prefix, with each function's value appended.
    fn next_row(&mut self, pass: &Pass) -> Result<Vec<Value>, SqlError> {
        let i = self.next;
        let row = self.current.row(&self.spool, i)?.to_vec();
        if i == 0 || i > self.peer_end {
            self.find_peers(pass, i, &row)?;
        }
        let mut out = row[pass.prefix..].to_vec();
        for (j, f) in pass.functions.iter().enumerate() {
            out.push(self.value(f, j, i, &row)?);
        }
        self.next += 1;
        Ok(out)
    }

    /// Row `i` starts a peer group: finds its last row (invariant 3).
    fn find_peers(&mut self, pass: &Pass, i: usize, row: &[Value]) -> Result<(), SqlError> {
        let keys = &row[pass.keys()];
        let mut end = i;
        while end + 1 < self.len {
            let next = self.peers.row(&self.spool, end + 1)?;
            if !same_row(&next[pass.keys()], keys) {
                break;
            }
            end += 1;
        }
        self.peer_start = i;
        self.peer_end = end;
        self.dense_rank += 1;
        Ok(())
    }

    /// Function `f`'s (the `j`th) value at row `i`.
    fn value(
        &mut self,
        f: &Function,
        j: usize,
        i: usize,
        row: &[Value],
    ) -> Result<Value, SqlError> {
        let n = self.len;
        Ok(match f.kind {
            Kind::RowNumber => Value::BigInt(i as i64 + 1),
            Kind::Rank => Value::BigInt(self.peer_start as i64 + 1),
            Kind::DenseRank => Value::BigInt(self.dense_rank),
            Kind::Ntile => {
                if i == 0 {
                    self.states[j].tiles = tile_count(&row[f.slot])?;
                }
                Value::BigInt(ntile(i as i64, n as i64, self.states[j].tiles))
            }
            Kind::Lag | Kind::Lead => self.offset_value(f, j, i, row)?,
            Kind::FirstValue | Kind::LastValue => match self.frame(f, i) {
                Some((lo, hi)) => {
                    let at = if f.kind == Kind::FirstValue { lo } else { hi };
                    self.states[j].reader.row(&self.spool, at)?[f.slot].clone()
                }
                None => Value::Null,
            },
            Kind::Aggregate => self.aggregate(f, j, i)?,
        })
    }

    /// LAG and LEAD: the row `offset` rows before or after, else the default.
    fn offset_value(
        &mut self,
        f: &Function,
        j: usize,
        i: usize,
        row: &[Value],
    ) -> Result<Value, SqlError> {
        let offset = match f.args.len() {
            1 => 1,
            _ => match &row[f.slot + 1] {
                Value::Null => return Ok(Value::Null),
                v => super::eval::as_i64(v)?,
            },
        };
        if offset < 0 {
            return Err(msg(8730, &[]));
        }
        let target = if f.kind == Kind::Lag {
            (i as i64).checked_sub(offset)
        } else {
            (i as i64).checked_add(offset)
        };
        match target.filter(|&t| t >= 0 && t < self.len as i64) {
            Some(t) => Ok(self.states[j].reader.row(&self.spool, t as usize)?[f.slot].clone()),
            None if f.args.len() == 3 => match &row[f.slot + 2] {
                Value::Null => Ok(Value::Null),
                v => convert(v, f.result_type(), None),
            },
            None => Ok(Value::Null),
        }
    }

    /// The rows of `f`'s frame at row `i`, first and last; None when it is empty.
    fn frame(&self, f: &Function, i: usize) -> Option<(usize, usize)> {
        let (lo, end) = self.bounds(f, i);
        (lo < end).then(|| (lo, end - 1))
    }

    /// `f`'s frame at row `i` as `lo..end` within the partition (empty when `lo >= end`);
    /// both only grow with `i` (invariant 2).
    fn bounds(&self, f: &Function, i: usize) -> (usize, usize) {
        let (i, len) = (i as i64, self.len as i64);
        let far = |k: u64| i64::try_from(k).unwrap_or(i64::MAX);
        let at = |b: FrameBound, start: bool| match b {
            FrameBound::UnboundedPreceding => 0,
            FrameBound::UnboundedFollowing => len - 1,
            FrameBound::Preceding(k) => i.saturating_sub(far(k)),
            FrameBound::Following(k) => i.saturating_add(far(k)),
            FrameBound::CurrentRow if f.frame.rows => i,
            FrameBound::CurrentRow if start => self.peer_start as i64,
            FrameBound::CurrentRow => self.peer_end as i64,
        };
        let lo = at(f.frame.start, true).clamp(0, len);
        let end = at(f.frame.end, false).saturating_add(1).clamp(0, len);
        (lo as usize, end as usize)
    }

    /// An aggregate over `f`'s frame at row `i`: folded on as the frame grows when it
    /// starts at the partition's first row, else folded again over the frame's values
    /// (`FrameValues`), or over the frame read again when those outgrow their memory.
    fn aggregate(&mut self, f: &Function, j: usize, i: usize) -> Result<Value, SqlError> {
        let frame = self.frame(f, i);
        let slot = (!f.star).then_some(f.slot);
        let state = &mut self.states[j];
        if f.frame.start == FrameBound::UnboundedPreceding {
            let acc = state
                .running
                .get_or_insert_with(|| Accumulator::windowed(&f.call, f.arg_type));
            if let Some((_, hi)) = frame {
                while state.added <= hi {
                    let v = match slot {
                        Some(k) => Some(state.reader.row(&self.spool, state.added)?[k].clone()),
                        None => None,
                    };
                    acc.take_value(v)?;
                    state.added += 1;
                }
            }
            return acc.finish();
        }
        if state.sliding.is_none() {
            let acc = Accumulator::windowed(&f.call, f.arg_type);
            state.sliding = Some(acc.removable());
        }
        if state.sliding == Some(true) {
            let (lo, end) = self.bounds(f, i);
            return self.slide(f, j, lo, end);
        }
        let mut acc = Accumulator::windowed(&f.call, f.arg_type);
        let Some((lo, hi)) = frame else {
            return acc.finish();
        };
        let values = &mut state.values;
        if !values.overflowed && values.advance(&mut state.reader, &self.spool, slot, lo, hi)? {
            for v in &values.values {
                acc.take_value(slot.map(|_| v.clone()))?;
            }
            return acc.finish();
        }
        for k in lo..=hi {
            let v = match slot {
                Some(s) => Some(state.reader.row(&self.spool, k)?[s].clone()),
                None => None,
            };
            acc.take_value(v)?;
        }
        acc.finish()
    }
}

impl Partition {
    /// A removable aggregate (`Accumulator::removable`) over the frame `lo..end`, which
    /// only moves forwards: the rows entering it are taken, those leaving taken back, each
    /// read once by one of two readers.
    fn slide(&mut self, f: &Function, j: usize, lo: usize, end: usize) -> Result<Value, SqlError> {
        let state = &mut self.states[j];
        let acc = state
            .running
            .get_or_insert_with(|| Accumulator::windowed(&f.call, f.arg_type));
        let value = |reader: &mut Reader, k: usize| -> Result<Option<Value>, SqlError> {
            match f.star {
                true => Ok(None),
                false => Ok(Some(reader.row(&self.spool, k)?[f.slot].clone())),
            }
        };
        debug_assert!(state.removed <= lo, "a frame's start never moves back");
        while state.removed < lo.min(state.added) {
            acc.remove_value(value(&mut state.behind, state.removed)?)?;
            state.removed += 1;
        }
        state.removed = lo;
        state.added = state.added.max(lo);
        while state.added < end {
            acc.take_value(value(&mut state.reader, state.added)?)?;
            state.added += 1;
        }
        acc.finish()
    }
}

/// Memory one function's frame values may take (invariant 1).
const FRAME_MEMORY_BYTES: usize = 1 << 20;

/// The argument values of a frame whose start moves, rows `first..next` of the
/// partition, read once each as the frame slides (invariant 2).
#[derive(Default)]
struct FrameValues {
    values: VecDeque<Value>,
    first: usize,
    next: usize,
    bytes: usize,
    /// Past `FRAME_MEMORY_BYTES`: the frame is read again for each row instead.
    overflowed: bool,
}

impl FrameValues {
    /// Slides to the frame `lo..=hi` (`slot` None: COUNT(*), which needs no value); false
    /// when its values no longer fit in memory.
    fn advance(
        &mut self,
        reader: &mut Reader,
        spool: &Spool,
        slot: Option<usize>,
        lo: usize,
        hi: usize,
    ) -> Result<bool, SqlError> {
        debug_assert!(self.first <= lo, "a frame's start never moves back");
        while self.first < lo {
            let Some(v) = self.values.pop_front() else {
                break;
            };
            self.bytes -= value_bytes(&v);
            self.first += 1;
        }
        if self.values.is_empty() {
            self.first = self.first.max(lo);
            self.next = self.next.max(self.first);
        }
        while self.next <= hi {
            let v = match slot {
                Some(s) => reader.row(spool, self.next)?[s].clone(),
                None => Value::Null,
            };
            self.bytes += value_bytes(&v);
            self.values.push_back(v);
            self.next += 1;
            if self.bytes > FRAME_MEMORY_BYTES {
                self.overflowed = true;
                self.values = VecDeque::new();
                return Ok(false);
            }
        }
        debug_assert_eq!(self.values.len(), hi + 1 - lo);
        Ok(true)
    }
}

fn value_bytes(v: &Value) -> usize {
    std::mem::size_of::<Value>()
        + match v {
            Value::Text(s) => s.len(),
            Value::Binary(b) => b.len(),
            _ => 0,
        }
}

/// NTILE's argument: a positive integer (4116).
fn tile_count(v: &Value) -> Result<i64, SqlError> {
    match v {
        Value::TinyInt(_) | Value::SmallInt(_) | Value::Int(_) | Value::BigInt(_) => {
            match super::eval::as_i64(v)? {
                n if n > 0 => Ok(n),
                _ => Err(msg(4116, &[])),
            }
        }
        _ => Err(msg(4116, &[])),
    }
}

/// The tile of row `i` of `n` split into `tiles` groups as evenly as can be, the larger
/// groups first.
fn ntile(i: i64, n: i64, tiles: i64) -> i64 {
    let (size, larger) = (n / tiles, n % tiles);
    let in_larger = larger * (size + 1);
    if i < in_larger {
        i / (size + 1) + 1
    } else {
        larger + (i - in_larger) / size + 1
    }
}

#[cfg(test)]
mod tests {
    use super::ntile;

    /// NTILE gives the remainder's extra rows to the first tiles, and one row each when
    /// there are more tiles than rows.
    #[test]
    fn ntile_splits_as_sql_server_does() {
        let tiles: Vec<i64> = (0..10).map(|i| ntile(i, 10, 3)).collect();
        assert_eq!(tiles, [1, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
        let tiles: Vec<i64> = (0..3).map(|i| ntile(i, 3, 5)).collect();
        assert_eq!(tiles, [1, 2, 3]);
        let tiles: Vec<i64> = (0..8).map(|i| ntile(i, 8, 4)).collect();
        assert_eq!(tiles, [1, 1, 2, 2, 3, 3, 4, 4]);
    }
}
