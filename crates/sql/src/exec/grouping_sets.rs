//! GROUP BY ROLLUP, CUBE and GROUPING SETS (the sets come from parser/grouping.rs), and
//! GROUPING / GROUPING_ID.
//!
//! The result is the UNION ALL of grouping by each set: a grouping expression outside the
//! set is NULL in that set's rows, and GROUPING(e) is 1 there (0 where e groups), so a
//! NULL made by the rollup is told from a NULL key in the data. GROUPING_ID(a, b, ...) is
//! those bits with the first argument most significant.
//!
//! Planning (`SetsPlan`): after aggregate.rs has replaced aggregates by hidden columns,
//! each GROUPING / GROUPING_ID call becomes a hidden column, and each grouping expression
//! (or a column of that name) a hidden key column; the grouped source's rows are the
//! group's first source row, the aggregates, the keys (NULL outside the set), then the
//! GROUPING values. HAVING, the select list and ORDER BY run over those rows unchanged.
//!
//! Execution (`SetsRows`), SQL Server's stream aggregate: the sets are split into chains
//! in which each set contains the next (`chains`: a ROLLUP is one chain; CUBE of n
//! expressions needs as many chains as its largest layer of equal-sized subsets). Each
//! chain sorts the rows once (`SortSpill`, spilling past `SORT_MEMORY_BYTES`) by an order
//! in which every one of its sets is a prefix, and one pass keeps one group per set open
//! at a time, emitting a set's group when its prefix of the key changes. One chain (a
//! ROLLUP) sorts the input directly; with more, the input (its keys evaluated once) is
//! spooled first (`Spool`, spilling) and read once per chain, so every set sees the same
//! rows.
//!
//! Invariants:
//! 1. Held at once: the spool's and one sort's memory, and per set of the current chain
//!    one group (its first row and accumulators, a DISTINCT aggregate's with its own
//!    spilling sort: at most sets x DISTINCT aggregates x `SORT_MEMORY_BYTES`, fixed by
//!    the query); nothing grows with the number of rows or groups.
//! 2. Every set of a chain is a prefix of the chain's sort order, and a chain's sets are
//!    listed longest first (asserted in `chains`), so a change at key position d ends the
//!    groups of exactly the sets longer than d.
//! 3. A set with no expressions gives one row even over no input (the grand total: COUNT
//!    0, other aggregates NULL), as SQL Server's does; other sets give none.
//! 4. Duplicate sets each give their own rows.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::aggregate::{self, Accumulator, Aggregate};
use super::lower::not_yet;
use super::select::{same_row, Source};
use super::spill::{SortSpill, SortedRows, Spool};
use super::stream::{key_order, RowSource, SORT_MEMORY_BYTES};
use super::{Out, Session};
use crate::ast::{Expr, ObjectName, Select};
use crate::convert::{fitting_type, type_of};
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value};

type Errors = Vec<SqlError>;

fn one(e: SqlError) -> Errors {
    vec![e]
}

/// The hidden column standing for grouping expression `i`.
fn key_name(i: usize) -> String {
    format!("\u{1}key{i}")
}

/// The hidden column standing for GROUPING / GROUPING_ID call `i`.
fn call_name(i: usize) -> String {
    format!("\u{1}grouping{i}")
}

fn grouping_function(e: &Expr) -> Option<(&ObjectName, &[Expr])> {
    match e {
        Expr::Function { name, args, .. }
            if name.parts.len() == 1
                && matches!(
                    name.name().to_ascii_uppercase().as_str(),
                    "GROUPING" | "GROUPING_ID"
                ) =>
        {
            Some((name, args))
        }
        _ => None,
    }
}

/// True when `e` calls GROUPING or GROUPING_ID (outside subqueries).
pub(super) fn contains_grouping(e: &Expr) -> bool {
    let mut found = false;
    let _ = aggregate::map_expr(e, &mut |x| {
        found |= grouping_function(x).is_some();
        Ok(None)
    });
    found
}

/// A GROUPING (one argument, tinyint) or GROUPING_ID (int) call: its arguments' keys.
struct GroupingCall {
    keys: Vec<usize>,
    id: bool,
}

/// What a query with grouping sets computes beyond its aggregates.
pub(super) struct SetsPlan {
    /// Each set: indexes into `keys`, sorted.
    sets: Vec<Vec<usize>>,
    keys: Vec<Expr>,
    /// Known before any row: a column's type, else the values' (None: not yet seen).
    key_types: Vec<Option<SqlType>>,
    calls: Vec<GroupingCall>,
}

impl SetsPlan {
    /// The plan of `s` when it groups by sets, or calls GROUPING under a plain GROUP BY
    /// (one set of every expression); None otherwise. GROUPING without GROUP BY is 8160.
    pub(super) fn of(s: &Select, uses_grouping: bool) -> Result<Option<SetsPlan>, SqlError> {
        let sets = match &s.grouping_sets {
            Some(sets) => sets.clone(),
            None if !uses_grouping => return Ok(None),
            None if s.group_by.is_empty() => return Err(msg(8160, &[])),
            None => vec![(0..s.group_by.len()).collect()],
        };
        Ok(Some(SetsPlan {
            sets,
            keys: s.group_by.clone(),
            key_types: vec![None; s.group_by.len()],
            calls: Vec::new(),
        }))
    }

    /// The key `e` stands for: an equal grouping expression, or one naming the same
    /// column (`g` and `x.g`; never `x.g` and `y.g`, columns of two tables).
    fn key_of(&self, e: &Expr) -> Option<usize> {
        self.keys.iter().position(|k| k == e).or_else(|| {
            let Expr::Column(n) = e else { return None };
            self.keys
                .iter()
                .position(|k| matches!(k, Expr::Column(c) if aggregate::same_column(c, n)))
        })
    }

    /// `e` (its aggregates already hidden columns) with GROUPING calls and grouping
    /// expressions replaced by their hidden columns.
    /// A subquery is refused: its references to grouping columns (and the operand of IN)
    /// would read the group's first row, not the set's NULL.
    pub(super) fn rewrite(&mut self, e: &Expr) -> Result<Expr, SqlError> {
        let mut subquery = false;
        let _ = aggregate::map_expr(e, &mut |x| {
            subquery |= matches!(
                x,
                Expr::Subquery(_) | Expr::Exists(_) | Expr::InSubquery { .. }
            );
            Ok(None)
        });
        if subquery {
            return Err(not_yet(
                "subqueries in a query with ROLLUP, CUBE, GROUPING SETS or GROUPING",
            ));
        }
        aggregate::map_expr(e, &mut |x| {
            if let Some((name, args)) = grouping_function(x) {
                return self.call(name, args).map(Some);
            }
            Ok(self
                .key_of(x)
                .map(|i| Expr::Column(ObjectName::simple(&key_name(i)))))
        })
    }

    /// A select item's name when the rewrite hides it: the column it named.
    pub(super) fn item_alias(&self, e: &Expr, src: &Source) -> Option<String> {
        let Expr::Column(n) = e else { return None };
        self.key_of(e)?;
        let real = src.position(n).map(|i| src.rowset.columns[i].0.clone());
        Some(real.unwrap_or_else(|| n.name().to_string()))
    }

    fn call(&mut self, name: &ObjectName, args: &[Expr]) -> Result<Expr, SqlError> {
        let upper = name.name().to_ascii_uppercase();
        let id = upper == "GROUPING_ID";
        if !id && args.len() != 1 || args.is_empty() {
            return Err(msg(174, &[&upper, &1]));
        }
        let mut keys = Vec::with_capacity(args.len());
        for (n, a) in args.iter().enumerate() {
            match self
                .keys
                .iter()
                .position(|k| k == a)
                .or_else(|| self.key_of(a))
            {
                Some(i) => keys.push(i),
                None => return Err(msg(8161, &[&(n + 1), &upper])),
            }
        }
        self.calls.push(GroupingCall { keys, id });
        Ok(Expr::Column(ObjectName::simple(&call_name(
            self.calls.len() - 1,
        ))))
    }

    /// Types the keys a column does not: from `rows` (the materializing path), else left
    /// open (`keys_typed`).
    pub(super) fn type_keys(&mut self, s: &mut Session, src: &Source, rows: &[Vec<Value>]) {
        for (i, k) in self.keys.iter().enumerate() {
            if let Expr::Column(n) = k {
                if let Some(p) = src.position(n) {
                    self.key_types[i] = Some(src.rowset.columns[p].1);
                    continue;
                }
            }
            let mut t: Option<SqlType> = None;
            for r in rows {
                if let Ok(v) = s.eval(k, Some(&Session::ctx(src, r))) {
                    if !v.is_null() {
                        let vt = type_of(&v);
                        t = Some(t.map_or(vt, |t| fitting_type(t, vt)));
                    }
                }
            }
            if t.is_none() && !rows.is_empty() {
                t = Some(SqlType::Int);
            }
            self.key_types[i] = t;
        }
    }

    /// True when every key's type is known.
    pub(super) fn keys_typed(&self) -> bool {
        self.key_types.iter().all(Option::is_some)
    }

    /// The grouped source: `src`'s columns, the aggregates', the keys', the calls'.
    pub(super) fn source(
        &self,
        src: &Source,
        agg_types: &[SqlType],
        rows: Vec<Vec<Value>>,
    ) -> Source {
        let mut grouped = aggregate::grouped_source(src, agg_types, rows);
        let keys = self
            .key_types
            .iter()
            .enumerate()
            .map(|(i, t)| (key_name(i), t.unwrap_or(SqlType::Int)));
        let calls = self.calls.iter().enumerate().map(|(i, c)| {
            let t = if c.id { SqlType::Int } else { SqlType::TinyInt };
            (call_name(i), t)
        });
        let added: Vec<(String, SqlType)> = keys.chain(calls).collect();
        if !grouped.part_of.is_empty() {
            grouped
                .part_of
                .extend(added.iter().map(|_| super::eval::UNQUALIFIED));
        }
        grouped.rowset.columns.extend(added);
        grouped
    }

    /// The values of the keys and calls in a row of set `set`.
    fn set_values(&self, set: usize, keys: &[Value]) -> Vec<Value> {
        let members = &self.sets[set];
        let mut out: Vec<Value> = keys
            .iter()
            .enumerate()
            .map(|(i, v)| {
                if members.contains(&i) {
                    v.clone()
                } else {
                    Value::Null
                }
            })
            .collect();
        for c in &self.calls {
            let bits = c
                .keys
                .iter()
                .fold(0i32, |acc, k| (acc << 1) | i32::from(!members.contains(k)));
            out.push(if c.id {
                Value::Int(bits)
            } else {
                Value::TinyInt(bits as u8)
            });
        }
        out
    }
}

/// Sets sharing one sort: `order` the keys to sort by, `levels` (set, prefix length) from
/// the longest set to the shortest.
#[derive(Debug, PartialEq)]
struct Chain {
    order: Vec<usize>,
    levels: Vec<(usize, usize)>,
}

/// Splits the sets into chains, each set containing the next (invariant 2): a set joins
/// the first chain whose shortest set contains it, longest sets first.
fn chains(sets: &[Vec<usize>]) -> Vec<Chain> {
    let mut by_size: Vec<usize> = (0..sets.len()).collect();
    by_size.sort_by_key(|&i| std::cmp::Reverse(sets[i].len()));
    let mut members: Vec<Vec<usize>> = Vec::new();
    for i in by_size {
        let contains = |c: &&mut Vec<usize>| {
            let last = &sets[*c.last().expect("a chain has a set")];
            sets[i].iter().all(|k| last.contains(k))
        };
        match members.iter_mut().find(contains) {
            Some(c) => c.push(i),
            None => members.push(vec![i]),
        }
    }
    members
        .into_iter()
        .map(|m| {
            let mut order: Vec<usize> = Vec::new();
            for &set in m.iter().rev() {
                for &k in &sets[set] {
                    if !order.contains(&k) {
                        order.push(k);
                    }
                }
            }
            let levels: Vec<(usize, usize)> = m.iter().map(|&set| (set, sets[set].len())).collect();
            for &(set, len) in &levels {
                let prefix = &order[..len];
                assert!(
                    sets[set].iter().all(|k| prefix.contains(k)),
                    "a set is a prefix"
                );
            }
            assert!(levels.windows(2).all(|w| w[0].1 >= w[1].1), "longest first");
            Chain { order, levels }
        })
        .collect()
}

/// One set's open group in a chain's pass.
struct Level {
    set: usize,
    prefix: usize,
    /// The group's first row (chain keys, all keys, source row).
    first: Option<Vec<Value>>,
    accs: Vec<Accumulator>,
}

/// The pass over one chain's sorted rows.
struct ChainPass {
    sorted: SortedRows,
    failure: Arc<Mutex<Option<SqlError>>>,
    levels: Vec<Level>,
    width: usize,
    last: Option<Vec<Value>>,
}

/// The rows of every set, chain after chain (module docs).
pub(super) struct SetsRows<'a> {
    plan: &'a SetsPlan,
    aggregates: &'a [Aggregate],
    src: &'a Source,
    chains: Vec<Chain>,
    next_chain: usize,
    /// The input with its keys in front; read once per chain (empty with one chain,
    /// whose sort takes the input directly).
    spool: Spool,
    pass: Option<ChainPass>,
    ready: VecDeque<Vec<Value>>,
}

/// One chain's sort as it is filled: each row behind its chain-ordered keys.
struct ChainSort {
    sort: SortSpill,
    failure: Arc<Mutex<Option<SqlError>>>,
}

impl ChainSort {
    fn new(s: &Session, chain: &Chain) -> ChainSort {
        let failure = Arc::new(Mutex::new(None));
        let order = key_order(vec![false; chain.order.len()], failure.clone());
        ChainSort {
            sort: SortSpill::new(&s.spill_dir(), SORT_MEMORY_BYTES, order),
            failure,
        }
    }

    /// Takes a row of all keys then the source row.
    fn push(&mut self, chain: &Chain, r: Vec<Value>) -> Result<(), SqlError> {
        let mut keyed: Vec<Value> = chain.order.iter().map(|&k| r[k].clone()).collect();
        keyed.extend(r);
        self.sort.push(keyed)
    }

    fn finish(self, chain: &Chain) -> Result<ChainPass, SqlError> {
        let levels = chain
            .levels
            .iter()
            .map(|&(set, prefix)| Level {
                set,
                prefix,
                first: None,
                accs: Vec::new(),
            })
            .collect();
        Ok(ChainPass {
            sorted: self.sort.finish()?,
            failure: self.failure,
            levels,
            width: chain.order.len(),
            last: None,
        })
    }
}

impl<'a> SetsRows<'a> {
    /// Reads `input` (source rows), each row behind its keys: into the one chain's sort,
    /// or into a spool that each chain reads.
    pub(super) fn new(
        s: &mut Session,
        plan: &'a SetsPlan,
        aggregates: &'a [Aggregate],
        src: &'a Source,
        input: &mut dyn RowSource,
    ) -> Result<SetsRows<'a>, Errors> {
        let chains = chains(&plan.sets);
        let mut single = (chains.len() == 1).then(|| ChainSort::new(s, &chains[0]));
        let mut spool = SortSpill::fifo(&s.spill_dir(), SORT_MEMORY_BYTES);
        while let Some(r) = input.next_row(s)? {
            let ctx = Session::ctx(src, &r);
            let mut keyed = Vec::with_capacity(plan.keys.len() + r.len());
            for k in &plan.keys {
                keyed.push(s.eval(k, Some(&ctx)).map_err(one)?);
            }
            keyed.extend(r);
            match &mut single {
                Some(sort) => sort.push(&chains[0], keyed),
                None => spool.push(keyed),
            }
            .map_err(one)?;
        }
        let pass = single
            .map(|sort| sort.finish(&chains[0]))
            .transpose()
            .map_err(one)?;
        Ok(SetsRows {
            plan,
            aggregates,
            src,
            next_chain: usize::from(pass.is_some()),
            chains,
            spool: spool.finish_rewindable().map_err(one)?,
            pass,
            ready: VecDeque::new(),
        })
    }

    /// Sorts the spool for chain `c`.
    fn start(&mut self, s: &Session, c: usize) -> Result<ChainPass, SqlError> {
        let chain = &self.chains[c];
        let mut sort = ChainSort::new(s, chain);
        for r in self.spool.rows() {
            sort.push(chain, r?)?;
        }
        sort.finish(chain)
    }

    /// The row of `level`'s group (none for an empty group, except the grand total's).
    fn emit(&mut self, level: &mut Level, width: usize, at_end: bool) -> Result<(), SqlError> {
        let n = self.plan.keys.len();
        let (source, keys) = match level.first.take() {
            Some(first) => (
                Some(first[width + n..].to_vec()),
                first[width..width + n].to_vec(),
            ),
            None if at_end && level.prefix == 0 => (None, vec![Value::Null; n]),
            None => return Ok(()),
        };
        if level.accs.is_empty() {
            level.accs = self.aggregates.iter().map(Accumulator::new).collect();
        }
        let mut row = aggregate::group_row(self.src, source.as_deref(), &mut level.accs)?;
        row.extend(self.plan.set_values(level.set, &keys));
        level.accs.clear();
        self.ready.push_back(row);
        Ok(())
    }

    /// Takes one sorted row into the pass, ending the groups its keys leave.
    fn take(
        &mut self,
        s: &mut Session,
        pass: &mut ChainPass,
        r: Vec<Value>,
    ) -> Result<(), SqlError> {
        let w = pass.width;
        if let Some(last) = &pass.last {
            let changed = (0..w)
                .find(|&i| !same_row(&r[i..=i], &last[i..=i]))
                .unwrap_or(w);
            for level in pass.levels.iter_mut().filter(|l| l.prefix > changed) {
                self.emit(level, w, false)?;
            }
        }
        let n = self.plan.keys.len();
        for level in &mut pass.levels {
            if level.first.is_none() {
                level.first = Some(r.clone());
                level.accs = self.aggregates.iter().map(Accumulator::new).collect();
            }
            for a in &mut level.accs {
                a.add(s, self.src, &r[w + n..])?;
            }
        }
        pass.last = Some(r[..w].to_vec());
        Ok(())
    }
}

impl RowSource for SetsRows<'_> {
    fn next_row(&mut self, s: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        loop {
            if let Some(r) = self.ready.pop_front() {
                return Ok(Some(r));
            }
            let mut pass = match self.pass.take() {
                Some(p) => p,
                None if self.next_chain == self.chains.len() => return Ok(None),
                None => {
                    self.next_chain += 1;
                    self.start(s, self.next_chain - 1).map_err(one)?
                }
            };
            match pass.sorted.next().transpose().map_err(one)? {
                Some(r) => {
                    self.take(s, &mut pass, r).map_err(one)?;
                    self.pass = Some(pass);
                }
                None => {
                    if let Some(e) = pass.failure.lock().unwrap().take() {
                        return Err(vec![e]);
                    }
                    let w = pass.width;
                    for level in &mut pass.levels {
                        self.emit(level, w, true).map_err(one)?;
                    }
                }
            }
        }
    }
}

impl Session {
    /// A grouped query with sets over `input` (source rows WHERE kept): its groups, then
    /// HAVING, the select list, ORDER BY and TOP, sent.
    pub(super) fn sets_rows(
        &mut self,
        plan: &aggregate::GroupingPlan,
        sets: &SetsPlan,
        src: &Source,
        input: &mut dyn RowSource,
        out: &mut Out,
    ) -> Result<(), Errors> {
        let types: Vec<SqlType> = plan
            .aggregates
            .iter()
            .map(|a| a.result_type().unwrap_or(SqlType::Int))
            .collect();
        let grouped = sets.source(src, &types, Vec::new());
        let mut rows = SetsRows::new(self, sets, &plan.aggregates, src, input)?;
        self.finish_streamed(&plan.query, &plan.select, &grouped, &mut rows, out)
    }

    /// The materializing path's grouped source for a query with sets.
    pub(super) fn sets_source(
        &mut self,
        plan: &aggregate::GroupingPlan,
        sets: &SetsPlan,
        src: &Source,
        rows: Vec<Vec<Value>>,
    ) -> Result<Source, Errors> {
        let types: Vec<SqlType> = plan
            .aggregates
            .iter()
            .map(|a| Accumulator::new(a).result_type())
            .collect();
        let mut input = rows.into_iter();
        let mut grouped_rows = SetsRows::new(self, sets, &plan.aggregates, src, &mut input)?;
        let mut out = Vec::new();
        while let Some(r) = grouped_rows.next_row(self)? {
            out.push(r);
        }
        Ok(sets.source(src, &types, out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ROLLUP is one chain sorted by its columns in order; CUBE (a, b, c) needs three.
    #[test]
    fn sets_split_into_chains_of_prefixes() {
        let rollup = vec![vec![0, 1, 2], vec![0, 1], vec![0], vec![]];
        let c = chains(&rollup);
        assert_eq!(
            c,
            vec![Chain {
                order: vec![0, 1, 2],
                levels: vec![(0, 3), (1, 2), (2, 1), (3, 0)]
            }]
        );
        let cube: Vec<Vec<usize>> = (0..8u32)
            .rev()
            .map(|m| (0..3).filter(|i| m & (1 << (2 - i)) != 0).collect())
            .collect();
        let c = chains(&cube);
        assert_eq!(c.len(), 3);
        let covered: usize = c.iter().map(|c| c.levels.len()).sum();
        assert_eq!(covered, 8);
        // Duplicates share a chain and each keep a level.
        let c = chains(&[vec![0], vec![0]]);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].levels, vec![(0, 1), (1, 1)]);
    }
}
