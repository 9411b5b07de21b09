//! FROM clauses beyond one table: joins, derived tables, common table expressions, and
//! system views or table-valued functions as join inputs.
//!
//! A FROM clause is resolved in two steps. First every leaf (a table source that is not a
//! join) is resolved in the order it is written (`Leaves`): a user table to its
//! `TableRef` and row locking; a system view or table-valued function to its rows; a
//! derived table or CTE reference to its query's rows in a spool (`subquery.rs`). Then the
//! join tree becomes a chain of row sources (`stream::RowSource`) over those leaves:
//!
//! - the leftmost leaf streams (a table reads chunk by chunk, through a seek when WHERE
//!   confines its clustered key and no RIGHT or FULL join could add rows WHERE rejects);
//! - each join is a nested loop: for each row of its left input, its right input is read
//!   from the start. A right input that is a user table is read again for each left row,
//!   through a seek on its clustered key or a nonclustered index when ON compares the key
//!   with the left row's values (an index nested loop join), unless the estimates say a
//!   hash join costs less (`hash_preferred`: decided at the first left row from the left
//!   leaf's estimated rows, cardinality.rs); any other right input, and a hashed one, is
//!   read once into a spool and the spool is read again (SQL Server's table spool), or,
//!   held in memory, only the rows whose keys on ON's equated columns equal the left
//!   row's (`join_hash.rs`: a hash join whose build input is the right one). There is no
//!   merge join;
//! - RIGHT JOIN runs as a LEFT JOIN with its inputs swapped, each row put back in the
//!   written column order; FULL JOIN spools both inputs and, after the LEFT JOIN's rows,
//!   adds each right row no left row matched.
//!
//! Column references bind by SQL Server's rules (`eval.rs`, `RowCtx::bind`): a qualifier
//! is a source's exposed name (its alias, else its table name), an unqualified name must
//! belong to one source only (209), and two sources may not share an exposed name (1013).
//!
//! Invariants:
//! 1. Memory: a join holds one left row, one right row and its spools' in-memory parts
//!    (each within `SORT_MEMORY_BYTES`, spill.rs invariant 2); nothing grows with the
//!    inputs' sizes but the spools' work files in tempdb's directory.
//! 2. A seek on a right input returns a superset of the rows ON accepts for that left row
//!    (seek.rs invariant 1): ON is still evaluated on every joined row.
//! 3. The rows a join gives are exactly those of its definition: the pairs ON accepts, plus
//!    for LEFT (RIGHT) each left (right) row no pair accepted with NULLs for the other
//!    side, plus for FULL both kinds of unmatched rows.
//! 4. WHERE's conjuncts over the leftmost leaf's columns alone are checked on that leaf's
//!    rows before they are joined (`Narrowed`), when every join above it keeps only rows
//!    of its left input's: such a conjunct has one value for all the joined rows of one
//!    left row (NULL-extended ones too), so a left row it rejects gives no row WHERE
//!    keeps. WHERE is still evaluated whole on every joined row.

mod apply;
mod rotation;

use super::eval::RowCtx;
use super::join_hash::{self, HashIndex};
use super::locking::RowLocking;
use super::select::Source;
use super::spill::{SortSpill, Spool, SpoolCursor};
use super::stream::{RowSource, TableScan, SORT_MEMORY_BYTES};
use super::tables::{Access, TableRef};
use super::views::Rowset;
use super::Session;
use crate::ast::{Expr, JoinKind, ObjectName, TableSource};
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value};

type Errors = Vec<SqlError>;

fn one(e: SqlError) -> Errors {
    vec![e]
}

/// A relation's columns and the sources that qualify them.
#[derive(Clone, Default)]
pub(super) struct Shape {
    columns: Vec<(String, SqlType)>,
    parts: Vec<String>,
    part_of: Vec<u32>,
}

impl Shape {
    fn leaf(columns: Vec<(String, SqlType)>, exposed: &str) -> Shape {
        let part_of = vec![0; columns.len()];
        Shape {
            columns,
            parts: vec![exposed.to_string()],
            part_of,
        }
    }

    /// This shape's columns then `right`'s.
    fn joined(&self, right: &Shape) -> Shape {
        let base = self.parts.len() as u32;
        let mut s = self.clone();
        s.columns.extend(right.columns.iter().cloned());
        s.parts.extend(right.parts.iter().cloned());
        s.part_of.extend(right.part_of.iter().map(|p| p + base));
        s
    }

    fn ctx<'a>(&'a self, values: &'a [Value]) -> RowCtx<'a> {
        RowCtx {
            columns: &self.columns,
            values,
            alias: None,
            table: "",
            parts: &self.parts,
            part_of: &self.part_of,
        }
    }

    fn width(&self) -> usize {
        self.columns.len()
    }

    /// Whether a column of this shape is named `name` (case-insensitive).
    fn has_column(&self, name: &str) -> bool {
        self.columns
            .iter()
            .any(|(c, _)| c.eq_ignore_ascii_case(name))
    }

    /// The rowless `Source` a SELECT over this relation evaluates its expressions with.
    pub fn source(self) -> Source {
        Source {
            rowset: Rowset {
                columns: self.columns,
                rows: Vec::new(),
            },
            table: String::new(),
            alias: None,
            parts: self.parts,
            part_of: self.part_of,
        }
    }
}

/// A leaf of a FROM clause, resolved before any row is read. (A FROM clause has a few
/// leaves: the table variant's size is no matter.)
#[allow(clippy::large_enum_variant)]
enum Leaf {
    Table {
        t: TableRef,
        locking: RowLocking,
        exposed: String,
        /// The rows end with their RIDs (`RID_COLUMN`): a data modification's target.
        rids: bool,
    },
    /// A derived table's or CTE's rows.
    Spooled(std::sync::Arc<Spool>),
    /// A system view's or table-valued function's rows.
    Rowset(Vec<Vec<Value>>),
    /// The right side of CROSS / OUTER APPLY when it is a derived table or a function: run
    /// for each left row (`apply.rs`); its shape has only its exposed name here.
    Applied,
    /// An UNPIVOT of its source leaf's rows (`rotation.rs`).
    Unpivot {
        source: Box<Leaf>,
        plan: rotation::UnpivotPlan,
    },
}

/// The leaves of one FROM clause, in written order, with their shapes.
pub(super) struct Leaves {
    leaves: Vec<(Leaf, Shape)>,
}

impl Session {
    /// Resolves every leaf of `from` (a comma list of table sources, each maybe a join
    /// tree); two leaves with one exposed name are 1013.
    pub(super) fn resolve_leaves(&mut self, from: &[TableSource]) -> Result<Leaves, Errors> {
        let mut leaves = Vec::new();
        for ts in from {
            self.collect_leaves(ts, &mut leaves)?;
        }
        for (i, (_, a)) in leaves.iter().enumerate() {
            let clash = leaves[..i]
                .iter()
                .find(|(_, b)| b.parts[0].eq_ignore_ascii_case(&a.parts[0]));
            if let Some((_, b)) = clash {
                return Err(vec![msg(1013, &[&b.parts[0], &a.parts[0]])]);
            }
        }
        Ok(Leaves { leaves })
    }

    fn collect_leaves(
        &mut self,
        ts: &TableSource,
        out: &mut Vec<(Leaf, Shape)>,
    ) -> Result<(), Errors> {
        match ts {
            TableSource::Join {
                left, kind, right, ..
            } => {
                self.collect_leaves(left, out)?;
                if !matches!(kind, JoinKind::CrossApply | JoinKind::OuterApply) {
                    return self.collect_leaves(right, out);
                }
                match &**right {
                    TableSource::Derived { alias, .. } => {
                        out.push((Leaf::Applied, Shape::leaf(Vec::new(), alias)));
                        Ok(())
                    }
                    TableSource::Function { name, alias, .. } => {
                        let exposed = alias.as_deref().unwrap_or(name.name());
                        out.push((Leaf::Applied, Shape::leaf(Vec::new(), exposed)));
                        Ok(())
                    }
                    TableSource::Table { .. }
                    | TableSource::Pivot { .. }
                    | TableSource::Unpivot { .. } => self.collect_leaves(right, out),
                    TableSource::Join { .. } => Err(vec![super::lower::not_yet(
                        "CROSS APPLY and OUTER APPLY of a parenthesized join",
                    )]),
                }
            }
            TableSource::Table { name, alias, hints } => {
                let exposed = alias.as_deref().unwrap_or(name.name());
                out.push(self.named_leaf(name, exposed, hints)?);
                Ok(())
            }
            TableSource::Derived {
                query,
                alias,
                columns,
            } => {
                let rows = self.query_rows(query, None).map_err(one)?;
                let rows = super::subquery::named_columns(rows, columns, alias).map_err(one)?;
                let shape = Shape::leaf(rows.columns, alias);
                out.push((Leaf::Spooled(std::sync::Arc::new(rows.spool)), shape));
                Ok(())
            }
            TableSource::Pivot { source, .. } | TableSource::Unpivot { source, .. } => {
                if let TableSource::Join { .. } = **source {
                    return Err(vec![super::lower::not_yet("PIVOT and UNPIVOT of a join")]);
                }
                let mut inner = Vec::with_capacity(1);
                self.collect_leaves(source, &mut inner)?;
                let leaf = inner.pop().expect("a source that is no join is one leaf");
                out.push(rotation::rotated(self, ts, leaf)?);
                Ok(())
            }
            TableSource::Function { name, alias, .. } => {
                let r = self.function_rowset(ts)?;
                let shape = Shape::leaf(r.columns, alias.as_deref().unwrap_or(name.name()));
                out.push((Leaf::Rowset(r.rows), shape));
                Ok(())
            }
        }
    }

    /// A named leaf: a CTE in scope, a system view, or a user table.
    fn named_leaf(
        &mut self,
        name: &ObjectName,
        exposed: &str,
        hints: &[String],
    ) -> Result<(Leaf, Shape), Errors> {
        if name.parts.len() == 1 {
            if let Some(rows) = self.cte_rows(name.name()) {
                let (columns, spool) = rows.map_err(one)?;
                return Ok((Leaf::Spooled(spool), Shape::leaf(columns, exposed)));
            }
        }
        if let Some(r) = self.view_rowset(name)? {
            return Ok((Leaf::Rowset(r.rows), Shape::leaf(r.columns, exposed)));
        }
        let t = self.table_for(name, "SELECT")?;
        let locking = self.row_locking(&t, false, hints)?;
        let shape = Shape::leaf(t.columns(), exposed);
        let exposed = exposed.to_string();
        Ok((
            Leaf::Table {
                t,
                locking,
                exposed,
                rids: false,
            },
            shape,
        ))
    }

    /// True when a one-part name refers to a common table expression in scope.
    pub(super) fn is_cte(&self, name: &ObjectName) -> bool {
        name.parts.len() == 1 && self.scopes_have_cte(name.name())
    }

    /// The FROM clause's rows, materialized: for the statements that take their whole
    /// source first (assignment SELECT, INSERT ... SELECT, grouped aggregates typed by
    /// their values).
    pub(super) fn joined_source(
        &mut self,
        from: &[TableSource],
        filter: Option<&Expr>,
    ) -> Result<Source, Errors> {
        let leaves = self.resolve_leaves(from)?;
        let (shape, mut rows) = leaves.relation(self, from, filter)?;
        let mut all = Vec::new();
        while let Some(r) = rows.next_row(self)? {
            all.push(r);
        }
        drop(rows);
        let mut src = shape.source();
        src.rowset.rows = all;
        Ok(src)
    }
}

/// The hidden last column of a data modification's target leaf: each row's RID
/// (`tables::rid_value`; SQL Server calls it %%physloc%%), which no column name binds.
pub(super) const RID_COLUMN: &str = "%%physloc%%";

impl Leaves {
    /// Marks leaf `i` as an UPDATE's or DELETE's target (dml_from.rs step 1): it reads its
    /// rows with `locking` (the statement's U locks) and gives each row's RID after its
    /// columns. Returns the table's width; a target that is not a user table is refused.
    pub(super) fn make_target(&mut self, i: usize, locking: RowLocking) -> Result<usize, Errors> {
        let (leaf, shape) = &mut self.leaves[i];
        let Leaf::Table {
            t,
            locking: l,
            rids,
            ..
        } = leaf
        else {
            return Err(vec![super::lower::not_yet(
                "UPDATE or DELETE of a view, CTE or derived table",
            )]);
        };
        (*l, *rids) = (locking, true);
        shape.columns.push((RID_COLUMN.into(), SqlType::BigInt));
        shape.part_of.push(shape.part_of[0]);
        Ok(t.entry.columns.len())
    }

    /// SET STATISTICS IO's line (3615) for each user table of the FROM clause.
    pub(super) fn report_io(&self, s: &Session, out: &mut super::Out) {
        for (leaf, _) in &self.leaves {
            leaf_io(s, leaf, out);
        }
    }
}

/// SET STATISTICS IO's line for a leaf that is a user table or an UNPIVOT of one.
fn leaf_io(s: &Session, leaf: &Leaf, out: &mut super::Out) {
    match leaf {
        Leaf::Table { t, .. } => s.report_io(t, out),
        Leaf::Unpivot { source, .. } => leaf_io(s, source, out),
        _ => {}
    }
}

/// A join input being built: its shape and its rows.
type Built<'p> = (Shape, Box<dyn RowSource + 'p>);

impl Leaves {
    /// The rows of the whole FROM clause (the comma list cross-joined in order), and their
    /// shape. `filter` (WHERE) narrows the leftmost table's read where that is safe.
    pub(super) fn relation<'p>(
        &'p self,
        s: &mut Session,
        from: &'p [TableSource],
        filter: Option<&Expr>,
    ) -> Result<Built<'p>, Errors> {
        let mut next = 0;
        let mut built = self.build(s, &from[0], &mut next, leftmost_filter(from, filter))?;
        for ts in &from[1..] {
            let inner = self.inner(s, ts, &mut next)?;
            built = join(built, inner, JoinKind::Cross, None, None);
        }
        Ok(built)
    }

    /// The rows of one table source; `filter` is WHERE when this is the leftmost leaf and
    /// every join above it keeps only rows of its left input's.
    fn build<'p>(
        &'p self,
        s: &mut Session,
        ts: &'p TableSource,
        next: &mut usize,
        filter: Option<&Expr>,
    ) -> Result<Built<'p>, Errors> {
        let TableSource::Join {
            left,
            kind,
            right,
            on,
        } = ts
        else {
            let (leaf, shape) = &self.leaves[*next];
            let pushed = filter.map_or_else(Vec::new, |f| self.pushable(*next, f));
            *next += 1;
            let rows = leaf_rows(s, leaf, filter)?;
            if pushed.is_empty() {
                return Ok((shape.clone(), rows));
            }
            let rows = Box::new(Narrowed {
                rows,
                shape: shape.clone(),
                conjuncts: pushed.into_iter().cloned().collect(),
            });
            return Ok((shape.clone(), rows));
        };
        let on = on.as_ref();
        match kind {
            JoinKind::Right => {
                let inner = self.inner(s, left, next)?;
                let width = inner.shape().width();
                let outer = self.build(s, right, next, None)?;
                let (shape, rows) = join(outer, inner, JoinKind::Left, on, None);
                let width = shape.width() - width;
                let shape = unswapped(&shape, width);
                let rows = Box::new(Swapped { rows, width });
                Ok((shape, rows))
            }
            JoinKind::Full => {
                let l = self.build(s, left, next, None)?;
                let r = self.build(s, right, next, None)?;
                full_join(s, l, r, on)
            }
            _ => {
                let estimate = self.leaf_estimate(s, left, *next, filter);
                let outer = self.build(s, left, next, filter)?;
                if let (Leaf::Applied, shape) = &self.leaves[*next] {
                    *next += 1;
                    let preserve = *kind == JoinKind::OuterApply;
                    return apply::apply(s, outer, right, &shape.parts[0], preserve);
                }
                let inner = self.inner(s, right, next)?;
                Ok(join(outer, inner, *kind, on, estimate))
            }
        }
    }

    /// The conjuncts of WHERE `filter` that leaf `i` (the leftmost, every join above it
    /// keeping only rows of its left input's) can check on its own rows before any join
    /// (invariant 4): those whose every column is the leaf's (qualified by its exposed
    /// name, or unqualified and no other leaf's column) and that hold no subquery.
    /// None for a data modification's target, whose rows carry their RIDs, or beside an
    /// APPLY or UNPIVOT, whose columns are not known before their rows.
    pub(super) fn pushable<'f>(&self, i: usize, filter: &'f Expr) -> Vec<&'f Expr> {
        let (leaf, shape) = &self.leaves[i];
        // An APPLY's right side or an UNPIVOT has no columns here to tell a name by.
        let shapes_known = self
            .leaves
            .iter()
            .all(|(l, _)| !matches!(l, Leaf::Applied | Leaf::Unpivot { .. }));
        if !shapes_known || !matches!(leaf, Leaf::Table { rids: false, .. }) {
            return Vec::new();
        }
        let mine = |n: &ObjectName| match n.parts.as_slice() {
            [q, c] => q.eq_ignore_ascii_case(&shape.parts[0]) && shape.has_column(c),
            [c] => {
                shape.has_column(c)
                    && self
                        .leaves
                        .iter()
                        .enumerate()
                        .all(|(j, (_, other))| j == i || !other.has_column(c))
            }
            _ => false,
        };
        let mut conjuncts = Vec::new();
        super::seek::flatten_and(filter, &mut conjuncts);
        conjuncts.retain(|c| {
            !super::aggregate::any_node(c, &|x| match x {
                Expr::Column(n) => !mine(n),
                Expr::Subquery(_)
                | Expr::Exists(_)
                | Expr::InSubquery { .. }
                | Expr::Window(_)
                | Expr::Default => true,
                _ => false,
            })
        });
        conjuncts
    }

    /// The rows table source `ts` (leaf `i` when it is one) is estimated to give with
    /// the WHERE conjuncts its read checks (`pushable`; cardinality.rs): for a user table
    /// only, else None.
    fn leaf_estimate(
        &self,
        s: &mut Session,
        ts: &TableSource,
        i: usize,
        filter: Option<&Expr>,
    ) -> Option<f64> {
        let TableSource::Table { .. } = ts else {
            return None;
        };
        let (t, exposed) = self.table(i)?;
        let pushed = filter.map_or_else(Vec::new, |f| self.pushable(i, f));
        s.conjuncts_estimate(t, &pushed, Some(exposed))
    }

    /// A join's right input: a user table read again for each left row, else a spool.
    fn inner<'p>(
        &'p self,
        s: &mut Session,
        ts: &'p TableSource,
        next: &mut usize,
    ) -> Result<Inner<'p>, Errors> {
        if let TableSource::Table { .. } = ts {
            if let (
                Leaf::Table {
                    t,
                    locking,
                    exposed,
                    rids,
                },
                shape,
            ) = &self.leaves[*next]
            {
                *next += 1;
                return Ok(Inner::Table {
                    t,
                    locking,
                    exposed,
                    rids: *rids,
                    shape: shape.clone(),
                });
            }
        }
        let (shape, rows) = self.build(s, ts, next, None)?;
        Ok(Inner::Spooled {
            spool: spooled(s, rows)?,
            shape,
            index: None,
        })
    }
}

/// WHERE as the leftmost leaf's read gets it (`Leaves::relation`): `filter` when the FROM
/// clause is one table source whose joins all keep only their left input's rows (invariant
/// 4), else none. SHOWPLAN_TEXT prints what it gives (showplan.rs).
pub(super) fn leftmost_filter<'f>(
    from: &[TableSource],
    filter: Option<&'f Expr>,
) -> Option<&'f Expr> {
    let preserving = from.len() == 1 && only_left_preserving(&from[0]);
    preserving.then_some(filter).flatten()
}

/// How the leftmost leaf, table `t` named `exposed`, is read given `filter`
/// (`leftmost_filter`): sought where WHERE confines a key, no outer row known.
pub(super) fn leftmost_access(
    s: &mut Session,
    t: &TableRef,
    exposed: &str,
    filter: Option<&Expr>,
) -> Access {
    match filter {
        Some(f) => s.access_with(t, Some(f), Some(exposed), &|_| false),
        None => Access::Scan,
    }
}

impl Leaves {
    /// Leaf `i` when it is a user table read as it is stored: it and its exposed name.
    pub(super) fn table(&self, i: usize) -> Option<(&TableRef, &str)> {
        match &self.leaves.get(i)?.0 {
            Leaf::Table {
                t,
                exposed,
                rids: false,
                ..
            } => Some((t, exposed)),
            _ => None,
        }
    }
}

/// True when no RIGHT or FULL join is on the path from the top of `ts` to its leftmost
/// leaf, so WHERE may narrow that leaf's read (a LEFT join's NULL-extended rows come from
/// its left rows, which the narrowing keeps).
fn only_left_preserving(ts: &TableSource) -> bool {
    match ts {
        TableSource::Join { left, kind, .. } => {
            !matches!(kind, JoinKind::Right | JoinKind::Full) && only_left_preserving(left)
        }
        _ => true,
    }
}

/// A leaf's rows, streamed.
fn leaf_rows<'p>(
    s: &mut Session,
    leaf: &'p Leaf,
    filter: Option<&Expr>,
) -> Result<Box<dyn RowSource + 'p>, Errors> {
    Ok(match leaf {
        Leaf::Table {
            t,
            locking,
            exposed,
            rids,
        } => {
            let access = leftmost_access(s, t, exposed, filter);
            Box::new(TableScan::new(t, access, locking)?.with_rids(*rids))
        }
        Leaf::Spooled(spool) => Box::new(SpoolScan {
            spool,
            cursor: SpoolCursor::default(),
        }),
        Leaf::Rowset(rows) => Box::new(rows.iter()),
        Leaf::Unpivot { source, plan } => rotation::unpivot_rows(s, source, plan)?,
        Leaf::Applied => unreachable!("an applied leaf is built by its APPLY (apply.rs)"),
    })
}

/// The leftmost leaf's rows that the WHERE conjuncts it can check alone accept
/// (`Leaves::pushable`, invariant 4): a row they reject would be rejected by WHERE after
/// every join, so it is not joined at all.
struct Narrowed<'p> {
    rows: Box<dyn RowSource + 'p>,
    shape: Shape,
    conjuncts: Vec<Expr>,
}

impl RowSource for Narrowed<'_> {
    fn next_row(&mut self, s: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        'rows: while let Some(row) = self.rows.next_row(s)? {
            for c in &self.conjuncts {
                let ctx = self.shape.ctx(&row);
                if s.condition_row(c, Some(&ctx)).map_err(one)? != Some(true) {
                    continue 'rows;
                }
            }
            return Ok(Some(row));
        }
        Ok(None)
    }
}

/// A spool's rows, read once.
struct SpoolScan<'p> {
    spool: &'p Spool,
    cursor: SpoolCursor,
}

impl RowSource for SpoolScan<'_> {
    fn next_row(&mut self, _: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        self.cursor.next_row(self.spool).map_err(one)
    }
}

impl RowSource for std::slice::Iter<'_, Vec<Value>> {
    fn next_row(&mut self, _: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        Ok(self.next().cloned())
    }
}

/// Reads `rows` into a spool that can be read again.
fn spooled(s: &mut Session, mut rows: Box<dyn RowSource + '_>) -> Result<Spool, Errors> {
    let mut spool = SortSpill::fifo(&s.spill_dir(), SORT_MEMORY_BYTES);
    while let Some(r) = rows.next_row(s)? {
        spool.push(r).map_err(one)?;
    }
    spool.finish_rewindable().map_err(one)
}

/// A join's right input.
enum Inner<'p> {
    /// A user table, read again (through a seek when ON allows) for each left row.
    Table {
        t: &'p TableRef,
        locking: &'p RowLocking,
        exposed: &'p str,
        rids: bool,
        shape: Shape,
    },
    Spooled {
        spool: Spool,
        shape: Shape,
        /// The spool's rows by their keys on ON's equated columns, when it is in memory.
        index: Option<HashIndex>,
    },
    /// Only while a table's inner input becomes a spool (`JoinRows::open`).
    Idle,
}

impl Inner<'_> {
    fn shape(&self) -> &Shape {
        match self {
            Inner::Table { shape, .. } | Inner::Spooled { shape, .. } => shape,
            Inner::Idle => unreachable!("an inner input is replaced whole"),
        }
    }

    /// Indexes a spooled inner input held in memory on the columns ON equates with the
    /// outer input's (join_hash.rs), so each outer row reads only its candidates.
    fn indexed(mut self, on: Option<&Expr>, outer: &Shape) -> Self {
        if let (
            Inner::Spooled {
                spool,
                shape,
                index,
            },
            Some(on),
        ) = (&mut self, on)
        {
            let pairs = join_hash::equi_columns(on, &outer.ctx(&[]), &shape.ctx(&[]));
            if let (false, Some(rows)) = (pairs.is_empty(), spool.in_memory()) {
                *index = HashIndex::build(rows, &pairs);
            }
        }
        self
    }
}

/// Where the reading of a right input is for the current left row.
enum InnerCursor<'p> {
    Idle,
    Scan(TableScan<'p>),
    Spool(SpoolCursor),
    /// The inner rows (by number in the in-memory spool) the hash index gave, and how many
    /// were read.
    Candidates(Vec<u32>, usize),
}

/// A nested loop join of `outer` with `inner` (invariant 3).
fn join<'p>(
    (outer_shape, outer): Built<'p>,
    inner: Inner<'p>,
    kind: JoinKind,
    on: Option<&'p Expr>,
    outer_rows: Option<f64>,
) -> Built<'p> {
    let shape = outer_shape.joined(inner.shape());
    let inner = inner.indexed(on, &outer_shape);
    let preserve = matches!(kind, JoinKind::Left | JoinKind::OuterApply);
    let rows = JoinRows {
        outer,
        outer_shape,
        inner,
        on,
        shape: shape.clone(),
        preserve,
        current: None,
        matched: false,
        cursor: InnerCursor::Idle,
        outer_rows,
    };
    (shape, Box::new(rows))
}

struct JoinRows<'p> {
    outer: Box<dyn RowSource + 'p>,
    outer_shape: Shape,
    inner: Inner<'p>,
    on: Option<&'p Expr>,
    /// The joined row's shape, which ON is evaluated over.
    shape: Shape,
    /// LEFT: a left row no right row matched comes out with NULLs.
    preserve: bool,
    current: Option<Vec<Value>>,
    matched: bool,
    cursor: InnerCursor<'p>,
    /// The rows the outer input is estimated to give (`Leaves::leaf_estimate`), which
    /// chooses the algorithm at the first outer row (`hash_preferred`); None: unknown.
    outer_rows: Option<f64>,
}

impl<'p> JoinRows<'p> {
    /// Starts reading the right input for the left row `r`: a seek where ON narrows the
    /// right table's clustered key given `r`'s values (invariant 2).
    fn open(&mut self, s: &mut Session, r: &[Value]) -> Result<InnerCursor<'p>, Errors> {
        match &self.inner {
            Inner::Table {
                t,
                locking,
                exposed,
                rids,
                shape,
            } => {
                let rids = *rids;
                let (access, per_seek) = match self.on {
                    Some(on) => {
                        let left = self.outer_shape.ctx(r);
                        let own = shape.ctx(&[]);
                        let fixed = |n: &ObjectName| {
                            own.position(n).is_none()
                                && n.qualifier()
                                    .is_none_or(|q| !q.eq_ignore_ascii_case(exposed))
                                && left.position(n).is_some()
                        };
                        // Estimates only at the first outer row, where the algorithm is chosen.
                        let first = self.outer_rows.is_some();
                        s.with_outer_row(Some(&left), |s| match first {
                            true => s.access_estimated(t, Some(on), Some(exposed), &fixed),
                            false => (s.access_with(t, Some(on), Some(exposed), &fixed), None),
                        })
                    }
                    None => (Access::Scan, None),
                };
                let outer = (&mut self.outer_rows, self.on, &self.outer_shape);
                let hash = hash_preferred(outer, t, shape, &access, per_seek);
                if hash || matches!(access, Access::Scan) {
                    // ON does not seek this table, or a hash join costs less: read it once
                    // into a spool (hashed when in memory) instead of once per outer row.
                    let rows = Box::new(TableScan::new(t, Access::Scan, locking)?.with_rids(rids));
                    let spool = spooled(s, rows)?;
                    let shape = shape.clone();
                    self.inner = Inner::Spooled {
                        spool,
                        shape,
                        index: None,
                    };
                    let inner = std::mem::replace(&mut self.inner, Inner::Idle);
                    self.inner = inner.indexed(self.on, &self.outer_shape);
                    return self.open(s, r);
                }
                Ok(InnerCursor::Scan(
                    TableScan::new(t, access, locking)?.with_rids(rids),
                ))
            }
            Inner::Spooled {
                index: Some(index), ..
            } => Ok(match index.candidates(r) {
                Some(rows) => InnerCursor::Candidates(rows, 0),
                None => InnerCursor::Spool(SpoolCursor::default()),
            }),
            Inner::Spooled { .. } => Ok(InnerCursor::Spool(SpoolCursor::default())),
            Inner::Idle => unreachable!("an inner input is replaced whole"),
        }
    }

    fn next_inner(&mut self, s: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        match (&mut self.cursor, &self.inner) {
            (InnerCursor::Scan(scan), _) => scan.next_row(s),
            (InnerCursor::Spool(c), Inner::Spooled { spool, .. }) => c.next_row(spool).map_err(one),
            (InnerCursor::Candidates(rows, read), Inner::Spooled { spool, .. }) => {
                let Some(&n) = rows.get(*read) else {
                    return Ok(None);
                };
                *read += 1;
                let all = spool.in_memory().expect("indexed only in memory");
                Ok(Some(all[n as usize].clone()))
            }
            _ => Ok(None),
        }
    }
}

impl RowSource for JoinRows<'_> {
    fn next_row(&mut self, s: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        loop {
            if self.current.is_none() {
                if s.cancelled() {
                    return Ok(None);
                }
                let Some(r) = self.outer.next_row(s)? else {
                    return Ok(None);
                };
                self.cursor = self.open(s, &r)?;
                self.current = Some(r);
                self.matched = false;
            }
            match self.next_inner(s)? {
                Some(inner) => {
                    let left = self.current.as_ref().expect("set above");
                    let mut row = Vec::with_capacity(self.shape.width());
                    row.extend(left.iter().cloned());
                    row.extend(inner);
                    if accepts(s, self.on, &self.shape, &row)? {
                        self.matched = true;
                        return Ok(Some(row));
                    }
                }
                None => {
                    self.cursor = InnerCursor::Idle;
                    let left = self.current.take().expect("set above");
                    if self.preserve && !self.matched {
                        return Ok(Some(null_extended(left, self.inner.shape().width())));
                    }
                }
            }
        }
    }
}

/// Whether, at the first outer row, the inner table is better read once and hashed on
/// the columns ON equates (a hash join, `join_hash.rs`) than sought once per outer row
/// through `access` giving `per_seek` rows each (an index nested loop join): the
/// outer input's estimate times a seek's cost against one scan of the inner table, a
/// build and a probe per row (cardinality.rs `hash_join_beats_seeks`). Never without
/// both estimates, without equated columns, or when the inner table's pages exceed the
/// spool's memory (a spilled spool is read whole per outer row: invariant 1's bound
/// holds, the time would not).
fn hash_preferred(
    (outer_rows, on, outer_shape): (&mut Option<f64>, Option<&Expr>, &Shape),
    t: &TableRef,
    shape: &Shape,
    access: &Access,
    per_seek: Option<f64>,
) -> bool {
    let lookups = match access {
        Access::Scan => return false,
        Access::Seek(_) => false,
        Access::IndexSeek(_) => true,
    };
    let Some(outer) = outer_rows.take() else {
        return false;
    };
    let (Some(on), Some(per_seek)) = (on, per_seek) else {
        return false;
    };
    if join_hash::equi_columns(on, &outer_shape.ctx(&[]), &shape.ctx(&[])).is_empty() {
        return false;
    }
    let stats = super::cardinality::TableStatistics::of(t);
    let Some(inner) = stats.cardinality() else {
        return false;
    };
    let pages = t.db.read().unwrap().reserved_pages(t.entry.object_id);
    let fits = pages.is_ok_and(|p| p * 8192 <= SORT_MEMORY_BYTES as u64);
    fits && super::cardinality::hash_join_beats_seeks(outer, per_seek, lookups, inner)
}

/// True when ON (none: every pair) accepts a joined row.
fn accepts(
    s: &mut Session,
    on: Option<&Expr>,
    shape: &Shape,
    row: &[Value],
) -> Result<bool, Errors> {
    match on {
        Some(on) => Ok(s.condition_row(on, Some(&shape.ctx(row))).map_err(one)? == Some(true)),
        None => Ok(true),
    }
}

fn null_extended(mut row: Vec<Value>, nulls: usize) -> Vec<Value> {
    row.extend(std::iter::repeat_n(Value::Null, nulls));
    row
}

/// A RIGHT join's rows, run as a LEFT join of (right, left): each row's first `width`
/// values (the right input's) moved after the left input's.
struct Swapped<'p> {
    rows: Box<dyn RowSource + 'p>,
    width: usize,
}

impl RowSource for Swapped<'_> {
    fn next_row(&mut self, s: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        Ok(self.rows.next_row(s)?.map(|mut r| {
            r.rotate_left(self.width);
            r
        }))
    }
}

/// The written-order shape of a swapped join's (right ++ left) shape.
fn unswapped(shape: &Shape, width: usize) -> Shape {
    let right_parts = shape.part_of[..width]
        .iter()
        .copied()
        .max()
        .map_or(0, |m| m + 1);
    let mut s = shape.clone();
    s.columns.rotate_left(width);
    s.part_of.rotate_left(width);
    let left_parts = s.parts.len() as u32 - right_parts;
    s.parts.rotate_left(right_parts as usize);
    for p in &mut s.part_of {
        *p = if *p >= right_parts {
            *p - right_parts
        } else {
            *p + left_parts
        };
    }
    s
}

/// FULL OUTER JOIN: both inputs spooled; the LEFT join's rows, then each right row no left
/// row matched, with NULLs for the left input.
fn full_join<'p>(
    s: &mut Session,
    (ls, l): Built<'p>,
    (rs, r): Built<'p>,
    on: Option<&'p Expr>,
) -> Result<Built<'p>, Errors> {
    let left = spooled(s, l)?;
    let right = spooled(s, r)?;
    let shape = ls.joined(&rs);
    let rows = FullRows {
        left,
        right,
        on,
        shape: shape.clone(),
        left_width: ls.width(),
        right_width: rs.width(),
        phase: FullPhase::Left,
        outer: SpoolCursor::default(),
        current: None,
        matched: false,
        inner: SpoolCursor::default(),
    };
    Ok((shape, Box::new(rows)))
}

#[derive(PartialEq)]
enum FullPhase {
    /// Left rows joined with the right rows (LEFT JOIN).
    Left,
    /// Right rows no left row matched.
    Unmatched,
}

struct FullRows<'p> {
    left: Spool,
    right: Spool,
    on: Option<&'p Expr>,
    shape: Shape,
    left_width: usize,
    right_width: usize,
    phase: FullPhase,
    outer: SpoolCursor,
    current: Option<Vec<Value>>,
    matched: bool,
    inner: SpoolCursor,
}

impl FullRows<'_> {
    /// The next joined row of the LEFT phase.
    fn left_phase(&mut self, s: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        loop {
            if self.current.is_none() {
                match self.outer.next_row(&self.left).map_err(one)? {
                    Some(r) => self.current = Some(r),
                    None => return Ok(None),
                }
                self.inner = SpoolCursor::default();
                self.matched = false;
            }
            let left = self.current.as_ref().expect("set above");
            match self.inner.next_row(&self.right).map_err(one)? {
                Some(r) => {
                    let mut row = left.clone();
                    row.extend(r);
                    if accepts(s, self.on, &self.shape, &row)? {
                        self.matched = true;
                        return Ok(Some(row));
                    }
                }
                None => {
                    let left = self.current.take().expect("set above");
                    if !self.matched {
                        return Ok(Some(null_extended(left, self.right_width)));
                    }
                }
            }
        }
    }

    /// The next right row that no left row matches, NULL-extended on the left.
    fn unmatched(&mut self, s: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        while let Some(r) = self.outer.next_row(&self.right).map_err(one)? {
            let mut row = vec![Value::Null; self.left_width];
            row.extend(r);
            let mut lefts = SpoolCursor::default();
            let mut matched = false;
            while let Some(l) = lefts.next_row(&self.left).map_err(one)? {
                row[..self.left_width].clone_from_slice(&l);
                if accepts(s, self.on, &self.shape, &row)? {
                    matched = true;
                    break;
                }
            }
            if !matched {
                row[..self.left_width].fill(Value::Null);
                return Ok(Some(row));
            }
        }
        Ok(None)
    }
}

impl RowSource for FullRows<'_> {
    fn next_row(&mut self, s: &mut Session) -> Result<Option<Vec<Value>>, Errors> {
        if s.cancelled() {
            return Ok(None);
        }
        if self.phase == FullPhase::Left {
            if let Some(row) = self.left_phase(s)? {
                return Ok(Some(row));
            }
            self.phase = FullPhase::Unmatched;
            self.outer = SpoolCursor::default();
        }
        self.unmatched(s)
    }
}
