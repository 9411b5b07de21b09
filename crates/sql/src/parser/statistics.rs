//! Parsing of the statistics statements: CREATE STATISTICS, UPDATE STATISTICS and DROP
//! STATISTICS (exec/statistics.rs runs them). A child of `parser` so it uses the parser's
//! own helpers.
//!
//! The WITH options are SQL Server's closed lists, checked here with its messages: a word
//! neither statement knows is 155, one given twice 1039, two that conflict 1052 (named in
//! a fixed order: PERCENT, ROWS, RESAMPLE, FULLSCAN; ALL, COLUMNS, INDEX), a percent past
//! 100 is 1031. The options SQL Server has and extentdb does not build (PERSIST_SAMPLE_
//! PERCENT, MAXDOP, AUTO_DROP, INCREMENTAL, STATS_STREAM, ROWCOUNT, PAGECOUNT, ON
//! PARTITIONS) and a filter (WHERE) are refused with 40517, never accepted and ignored.

use super::{PResult, ParseError, Parser};
use crate::ast::{StatementKind, StatisticsKinds, StatisticsOptions, StatisticsSample};
use crate::lexer::TokenKind;

/// Options SQL Server has for these statements that are not built (40517).
const NOT_BUILT: &[&str] = &[
    "PERSIST_SAMPLE_PERCENT",
    "MAXDOP",
    "AUTO_DROP",
    "INCREMENTAL",
    "STATS_STREAM",
    "ROWCOUNT",
    "PAGECOUNT",
];

/// The order SQL Server names two conflicting options in (1052).
const CONFLICT_ORDER: &[&str] = &[
    "PERCENT", "ROWS", "RESAMPLE", "FULLSCAN", "ALL", "COLUMNS", "INDEX",
];

impl Parser {
    /// `CREATE STATISTICS name ON table (column, ...) [WITH options]` (after CREATE).
    pub(super) fn create_statistics(&mut self) -> PResult<StatementKind> {
        self.expect_word("STATISTICS")?;
        let name = self.ident()?;
        self.expect_word("ON")?;
        let table = self.object_name()?;
        let columns = self.paren_list(|p| p.ident())?;
        if self.check_word("WHERE") {
            return Err(self.not_built("filtered statistics (CREATE STATISTICS ... WHERE)"));
        }
        let options = self.statistics_options(false)?;
        Ok(StatementKind::CreateStatistics {
            name,
            table,
            columns,
            options,
        })
    }

    /// `UPDATE STATISTICS table [name | (name, ...)] [WITH options]` (at UPDATE).
    pub(super) fn update_statistics(&mut self) -> PResult<StatementKind> {
        self.expect_word("UPDATE")?;
        self.expect_word("STATISTICS")?;
        let table = self.object_name()?;
        let names = if self.check_symbol("(") {
            self.paren_list(|p| p.ident())?
        } else if self.peek().is_some_and(super::is_identifier) {
            vec![self.ident()?]
        } else {
            Vec::new()
        };
        let options = self.statistics_options(true)?;
        Ok(StatementKind::UpdateStatistics {
            table,
            names,
            options,
        })
    }

    /// `DROP STATISTICS table.name [, ...]` (after DROP); a name of one part is 1053.
    pub(super) fn drop_statistics(&mut self) -> PResult<StatementKind> {
        self.expect_word("STATISTICS")?;
        let names = self.comma_list(|p| {
            let line = p.line();
            let n = p.object_name()?;
            if n.parts.len() < 2 {
                return Err(ParseError::new(
                    1053,
                    15,
                    1,
                    "For DROP STATISTICS, you must provide both the object (table or view) \
                     name and the statistics name, in the form \"objectname.statisticsname\".",
                    line,
                ));
            }
            Ok(n)
        })?;
        Ok(StatementKind::DropStatistics { names })
    }

    /// The WITH list of CREATE (`update` false) or UPDATE STATISTICS.
    fn statistics_options(&mut self, update: bool) -> PResult<StatisticsOptions> {
        let mut o = StatisticsOptions::default();
        if !self.eat_word("WITH") {
            return Ok(o);
        }
        let statement = match update {
            true => "UPDATE STATISTICS",
            false => "CREATE STATISTICS",
        };
        let mut seen: Vec<String> = Vec::new();
        loop {
            let line = self.line();
            let word = self.any_word()?.to_ascii_uppercase();
            let given = match word.as_str() {
                "FULLSCAN" => {
                    o.sample = StatisticsSample::FullScan;
                    word.clone()
                }
                "SAMPLE" => self.sample(&mut o, line)?,
                "RESAMPLE" if update => {
                    if self.check_word("ON") {
                        return Err(self.not_built("UPDATE STATISTICS ... ON PARTITIONS"));
                    }
                    o.sample = StatisticsSample::Resample;
                    word.clone()
                }
                "NORECOMPUTE" => {
                    o.no_recompute = true;
                    word.clone()
                }
                "ALL" | "COLUMNS" | "INDEX" if update => {
                    o.kinds = match word.as_str() {
                        "ALL" => StatisticsKinds::All,
                        "COLUMNS" => StatisticsKinds::Columns,
                        _ => StatisticsKinds::Index,
                    };
                    word.clone()
                }
                w if NOT_BUILT.contains(&w) => {
                    return Err(self.not_built(&format!("{statement} WITH {w}")))
                }
                "RESAMPLE" => return Err(self.error_before(1)),
                _ => {
                    let text = format!("'{word}' is not a recognized {statement} option.");
                    return Err(ParseError::new(155, 15, 1, text, line));
                }
            };
            self.note_option(&mut seen, given, statement, line)?;
            if !self.eat_symbol(",") {
                return Ok(o);
            }
        }
    }

    /// `SAMPLE n PERCENT | ROWS` (after SAMPLE): the word that names it for 1052.
    fn sample(&mut self, o: &mut StatisticsOptions, line: u32) -> PResult<String> {
        let number = match self.peek().map(|t| t.kind.clone()) {
            Some(TokenKind::Integer | TokenKind::Decimal) => self.next()?.text,
            _ => return Err(self.error()),
        };
        let value: f64 = number.parse().map_err(|_| self.error_before(1))?;
        if self.eat_word("PERCENT") {
            if !(0.0..=100.0).contains(&value) {
                let text = "Percent values must be between 0 and 100.";
                return Err(ParseError::new(1031, 15, 1, text, line));
            }
            o.sample = StatisticsSample::Percent(value);
            return Ok("PERCENT".into());
        }
        if self.eat_word("ROWS") && number.chars().all(|c| c.is_ascii_digit()) {
            o.sample = StatisticsSample::Rows(number.parse().unwrap_or(u64::MAX));
            return Ok("ROWS".into());
        }
        Err(self.error_before(1))
    }

    /// Records option `given`: 1039 when it came before, 1052 when it conflicts with one
    /// that did (the sampling options with each other, ALL / COLUMNS / INDEX likewise).
    fn note_option(
        &self,
        seen: &mut Vec<String>,
        given: String,
        statement: &str,
        line: u32,
    ) -> PResult<()> {
        if seen.contains(&given) {
            let text = format!("Option '{given}' is specified more than once.");
            return Err(ParseError::new(1039, 16, 1, text, line));
        }
        let group = |w: &str| match w {
            "PERCENT" | "ROWS" | "RESAMPLE" | "FULLSCAN" => 1,
            "ALL" | "COLUMNS" | "INDEX" => 2,
            _ => 0,
        };
        if let Some(other) = seen
            .iter()
            .find(|s| group(s) != 0 && group(s) == group(&given))
        {
            let rank = |w: &str| CONFLICT_ORDER.iter().position(|x| *x == w);
            let (a, b) = match rank(other) < rank(&given) {
                true => (other.as_str(), given.as_str()),
                false => (given.as_str(), other.as_str()),
            };
            let text = format!("Conflicting {statement} options \"{a}\" and \"{b}\".");
            return Err(ParseError::new(1052, 15, 1, text, line));
        }
        seen.push(given);
        Ok(())
    }

    /// A syntax error at the token `back` before the current one.
    fn error_before(&self, back: usize) -> ParseError {
        match self.tokens.get(self.pos.saturating_sub(back)) {
            Some(t) => super::syntax_error(t),
            None => self.error(),
        }
    }
}
