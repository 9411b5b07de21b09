//! Parsing of GROUP BY: plain expressions, ROLLUP, CUBE, GROUPING SETS, the grand total
//! `()` and the non-ISO `WITH ROLLUP` / `WITH CUBE`. A child of `parser` so it uses the
//! parser's own helpers.
//!
//! A GROUP BY with any of these becomes its grouping sets: each top-level element's sets
//! (an expression: one set of it; ROLLUP of n elements: n + 1 sets, every prefix from the
//! whole list down to none; CUBE: the 2^n subsets; GROUPING SETS: each of its sets in
//! turn; `()`: the empty set), crossed with one another (the union of one set from each).
//!
//! Invariants:
//! 1. `Select::group_by` holds each distinct grouping expression once, and every set is a
//!    sorted, duplicate-free list of indexes into it; duplicate sets are kept (SQL Server
//!    returns their groups once per copy).
//! 2. At most `MAX_GROUPING_SETS` sets (10705) and `MAX_GROUPING_EXPRESSIONS` distinct
//!    expressions (10707); a CUBE is refused before it is expanded, so nothing grows past
//!    the limit while parsing.
//! 3. A GROUP BY of plain expressions only keeps them as written (`grouping_sets` None).

use super::{PResult, ParseError, Parser};
use crate::ast::Expr;

/// SQL Server's limit on the grouping sets one GROUP BY makes.
pub const MAX_GROUPING_SETS: usize = 4096;
/// SQL Server's limit on the expressions of a GROUP BY with grouping sets.
pub const MAX_GROUPING_EXPRESSIONS: usize = 32;

/// Sets of grouping expressions, each as sorted indexes into the distinct expressions.
type Sets = Vec<Vec<usize>>;

/// The distinct grouping expressions met so far.
#[derive(Default)]
struct Interned {
    exprs: Vec<Expr>,
}

impl Interned {
    fn index(&mut self, e: Expr) -> usize {
        match self.exprs.iter().position(|x| *x == e) {
            Some(i) => i,
            None => {
                self.exprs.push(e);
                self.exprs.len() - 1
            }
        }
    }
}

/// The union of two sets, sorted and without duplicates.
fn union(a: &[usize], b: &[usize]) -> Vec<usize> {
    let mut u: Vec<usize> = a.iter().chain(b).copied().collect();
    u.sort_unstable();
    u.dedup();
    u
}

impl Parser {
    /// The list after `GROUP BY` (and a trailing `WITH ROLLUP` / `WITH CUBE`): the
    /// grouping expressions and, when the clause has sets, the sets (invariant 3).
    pub(super) fn group_by_clause(&mut self) -> PResult<(Vec<Expr>, Option<Sets>)> {
        let mut interned = Interned::default();
        let mut plain = Vec::new();
        let mut all_plain = true;
        let mut sets: Sets = vec![Vec::new()];
        loop {
            let (element, is_plain) = self.group_by_element(&mut interned)?;
            if let (true, [set]) = (is_plain, element.as_slice()) {
                plain.push(interned.exprs[set[0]].clone());
            }
            all_plain &= is_plain;
            sets = self.cross(&sets, &element)?;
            if !self.eat_symbol(",") {
                break;
            }
        }
        let with = self.check_word("WITH")
            && (self.check_word_at(1, "ROLLUP") || self.check_word_at(1, "CUBE"));
        if with {
            if !all_plain {
                return Err(self.grouping_error(
                    10703,
                    "The WITH CUBE and WITH ROLLUP options are not permitted with a ROLLUP, CUBE, or GROUPING SETS specification.".into(),
                ));
            }
            let rollup = self.check_word_at(1, "ROLLUP");
            self.pos += 2;
            // Each expression as written, repeats too: `a, a WITH ROLLUP` is ROLLUP (a, a).
            let composites: Sets = plain.into_iter().map(|e| vec![interned.index(e)]).collect();
            let sets = self.expand(&composites, rollup)?;
            return self.checked(interned, sets);
        }
        if all_plain {
            return Ok((plain, None));
        }
        self.checked(interned, sets)
    }

    /// The expressions and sets, within SQL Server's limits (invariant 2).
    fn checked(&self, interned: Interned, sets: Sets) -> PResult<(Vec<Expr>, Option<Sets>)> {
        if interned.exprs.len() > MAX_GROUPING_EXPRESSIONS {
            return Err(self.grouping_error(
                10707,
                format!("Too many expressions are specified in the GROUP BY clause. The maximum number is {MAX_GROUPING_EXPRESSIONS} when grouping sets are supplied."),
            ));
        }
        debug_assert!(sets.len() <= MAX_GROUPING_SETS);
        debug_assert!(sets
            .iter()
            .all(|s| s.windows(2).all(|w| w[0] < w[1])
                && s.iter().all(|&i| i < interned.exprs.len())));
        Ok((interned.exprs, Some(sets)))
    }

    fn grouping_error(&self, number: i32, text: String) -> ParseError {
        ParseError::new(number, 15, 1, text, self.line())
    }

    fn too_many_sets(&self) -> ParseError {
        self.grouping_error(
            10705,
            format!("Too many grouping sets. The maximum number is {MAX_GROUPING_SETS}."),
        )
    }

    /// Every union of a set of `a` with a set of `b`, `a`'s order outermost.
    fn cross(&self, a: &Sets, b: &Sets) -> PResult<Sets> {
        if a.len().saturating_mul(b.len()) > MAX_GROUPING_SETS {
            return Err(self.too_many_sets());
        }
        Ok(a.iter()
            .flat_map(|x| b.iter().map(move |y| union(x, y)))
            .collect())
    }

    /// One top-level element, and whether it is a plain expression.
    fn group_by_element(&mut self, g: &mut Interned) -> PResult<(Sets, bool)> {
        if self.check_symbol("(") && self.check_symbol_at(1, ")") {
            self.pos += 2;
            return Ok((vec![Vec::new()], false));
        }
        if let Some(sets) = self.rollup_cube_or_sets(g)? {
            return Ok((sets, false));
        }
        let e = self.expr()?;
        Ok((vec![vec![g.index(e)]], true))
    }

    /// ROLLUP (...), CUBE (...) or GROUPING SETS (...), when one comes next.
    fn rollup_cube_or_sets(&mut self, g: &mut Interned) -> PResult<Option<Sets>> {
        let rollup = self.check_word("ROLLUP") && self.check_symbol_at(1, "(");
        if rollup || self.check_word("CUBE") && self.check_symbol_at(1, "(") {
            self.pos += 1;
            let composites = self.paren_list(|p| p.composite_element(g))?;
            return self.expand(&composites, rollup).map(Some);
        }
        if self.check_word("GROUPING") && self.check_word_at(1, "SETS") {
            self.pos += 2;
            let lists = self.paren_list(|p| p.grouping_set(g))?;
            let sets: Sets = lists.into_iter().flatten().collect();
            if sets.len() > MAX_GROUPING_SETS {
                return Err(self.too_many_sets());
            }
            return Ok(Some(sets));
        }
        Ok(None)
    }

    /// ROLLUP's sets (every prefix, longest first) or CUBE's (every subset, the whole
    /// first) of `composites`.
    fn expand(&self, composites: &Sets, rollup: bool) -> PResult<Sets> {
        let n = composites.len();
        if rollup {
            return Ok((0..=n)
                .rev()
                .map(|k| composites[..k].iter().fold(Vec::new(), |u, c| union(&u, c)))
                .collect());
        }
        if n >= usize::BITS as usize || (1usize << n) > MAX_GROUPING_SETS {
            return Err(self.too_many_sets());
        }
        Ok((0..1usize << n)
            .rev()
            .map(|mask| {
                (0..n)
                    .filter(|i| mask & (1 << (n - 1 - i)) != 0)
                    .fold(Vec::new(), |u, i| union(&u, &composites[i]))
            })
            .collect())
    }

    /// A ROLLUP or CUBE element: an expression, or `( expr, ... )` taken as one.
    fn composite_element(&mut self, g: &mut Interned) -> PResult<Vec<usize>> {
        if let Some(list) = self.try_paren_list(g, |p, _| p.expr())? {
            let set = list.into_iter().map(|e| g.index(e)).collect::<Vec<_>>();
            return Ok(union(&set, &[]));
        }
        let e = self.expr()?;
        Ok(vec![g.index(e)])
    }

    /// One element of GROUPING SETS: `()`, an item, or `( item, ... )` (their cross
    /// product).
    fn grouping_set(&mut self, g: &mut Interned) -> PResult<Sets> {
        if self.check_symbol("(") && self.check_symbol_at(1, ")") {
            self.pos += 2;
            return Ok(vec![Vec::new()]);
        }
        if let Some(items) = self.try_paren_list(g, |p, g| p.grouping_set_item(g))? {
            let mut sets: Sets = vec![Vec::new()];
            for item in &items {
                sets = self.cross(&sets, item)?;
            }
            return Ok(sets);
        }
        self.grouping_set_item(g)
    }

    /// An expression, ROLLUP, CUBE, or a composite `( expr, ... )`.
    fn grouping_set_item(&mut self, g: &mut Interned) -> PResult<Sets> {
        if let Some(sets) = self.rollup_cube_or_sets(g)? {
            return Ok(sets);
        }
        Ok(vec![self.composite_element(g)?])
    }

    /// `( item, ... )` when it is a list standing alone (followed by `,` or `)`); None,
    /// having read nothing (and interned nothing), when the parenthesis opens an
    /// expression such as `(a + b) * 2`.
    fn try_paren_list<T>(
        &mut self,
        g: &mut Interned,
        mut item: impl FnMut(&mut Self, &mut Interned) -> PResult<T>,
    ) -> PResult<Option<Vec<T>>> {
        if !self.check_symbol("(") {
            return Ok(None);
        }
        let (start, known) = (self.pos, g.exprs.len());
        match self.paren_list(|p| item(p, g)) {
            Ok(list) if self.check_symbol(",") || self.check_symbol(")") => Ok(Some(list)),
            // A limit passed is no reason to read the text another way.
            Err(e) if e.number == 10705 => Err(e),
            _ => {
                self.pos = start;
                g.exprs.truncate(known);
                Ok(None)
            }
        }
    }
}
