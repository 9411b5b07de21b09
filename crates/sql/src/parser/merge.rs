//! Parsing of MERGE and of table value constructors (`(VALUES (...), ...) AS s (cols)`,
//! MERGE's usual source). A child of `parser` so it uses the parser's own helpers.
//!
//! The clause rules SQL Server checks while compiling are checked here, each with its
//! message: an action a clause may not take (10710, 10711), an action or clause twice
//! (10714), and the closing semicolon MERGE requires (10713).

use super::{PResult, ParseError, Parser};
use crate::ast::{
    CommonTableExpression, Expr, Merge, MergeAction, MergeClause, MergeWhen, Query, QueryBody,
    Select, SelectItem, SetOperator, TableSource,
};

impl Parser {
    /// `MERGE ...;` (at MERGE), with the CTEs a `WITH` before it named.
    pub(super) fn merge(&mut self, ctes: Vec<CommonTableExpression>) -> PResult<Merge> {
        self.expect_word("MERGE")?;
        let top = self.dml_top()?;
        self.eat_word("INTO");
        let target = self.table_or_variable()?;
        let hints = self.table_hints()?;
        // USING is no reserved word: it ends the target, it does not alias it.
        let alias = match self.check_word("USING") {
            true => None,
            false => self.table_alias()?,
        };
        self.expect_word("USING")?;
        let source = self.table_source()?;
        self.expect_word("ON")?;
        let on = self.expr()?;
        let mut clauses = Vec::new();
        while self.check_word("WHEN") {
            clauses.push(self.merge_clause()?);
        }
        if clauses.is_empty() {
            return Err(self.error());
        }
        check_clauses(&clauses, self.line())?;
        let output = self.output_clause()?;
        let mut options = Vec::new();
        if self.check_word("OPTION") && self.check_symbol_at(1, "(") {
            self.pos += 1;
            options = self.hint_list()?;
        }
        if !self.check_symbol(";") {
            if self.at_end() || self.check_word("GO") || self.peek_statement_start() {
                return Err(ParseError::new(
                    10713,
                    15,
                    1,
                    "A MERGE statement must be terminated by a semi-colon (;).",
                    self.line(),
                ));
            }
            return Err(self.error());
        }
        Ok(Merge {
            ctes,
            top,
            target,
            hints,
            alias,
            source,
            on,
            clauses,
            output,
            options,
        })
    }

    /// True when the next token begins another statement.
    fn peek_statement_start(&self) -> bool {
        self.peek_upper_word()
            .is_some_and(|w| super::statement_handler(&w).is_some())
    }

    /// `WHEN [NOT] MATCHED [BY TARGET | BY SOURCE] [AND cond] THEN action`.
    fn merge_clause(&mut self) -> PResult<MergeClause> {
        self.expect_word("WHEN")?;
        let not = self.eat_word("NOT");
        self.expect_word("MATCHED")?;
        let when = match (not, self.eat_word("BY")) {
            (false, false) => MergeWhen::Matched,
            (true, false) => MergeWhen::NotMatchedByTarget,
            (true, true) if self.eat_word("TARGET") => MergeWhen::NotMatchedByTarget,
            (true, true) => {
                self.expect_word("SOURCE")?;
                MergeWhen::NotMatchedBySource
            }
            (false, true) => return Err(self.error()),
        };
        let condition = match self.eat_word("AND") {
            true => Some(self.expr()?),
            false => None,
        };
        self.expect_word("THEN")?;
        let line = self.line();
        let action = if self.eat_word("UPDATE") {
            self.expect_word("SET")?;
            MergeAction::Update(self.comma_list(|p| p.assignment())?)
        } else if self.eat_word("DELETE") {
            MergeAction::Delete
        } else if self.eat_word("INSERT") {
            self.merge_insert()?
        } else {
            return Err(self.error());
        };
        allowed(when, &action, line)?;
        Ok(MergeClause {
            when,
            condition,
            action,
        })
    }

    /// `INSERT [(columns)] VALUES (...) | DEFAULT VALUES` (after INSERT).
    fn merge_insert(&mut self) -> PResult<MergeAction> {
        let mut columns = Vec::new();
        if self.check_symbol("(") {
            columns = self.paren_list(|p| {
                let name = p.object_name()?;
                if name.parts.len() > 1 {
                    return Err(ParseError::new(
                        10900,
                        16,
                        1,
                        "The insert column list used in the MERGE statement cannot contain \
                         multi-part identifiers. Use single part identifiers instead.",
                        p.line(),
                    ));
                }
                Ok(name.name().to_string())
            })?;
        }
        if self.eat_word("DEFAULT") {
            self.expect_word("VALUES")?;
            return Ok(MergeAction::Insert {
                columns,
                values: None,
            });
        }
        self.expect_word("VALUES")?;
        let values = self.paren_list(|p| p.expr())?;
        Ok(MergeAction::Insert {
            columns,
            values: Some(values),
        })
    }

    /// `VALUES (...), (...)) AS alias (columns)` after the opening parenthesis: a derived
    /// table whose query is a UNION ALL of one-row SELECTs, joined as a balanced tree so
    /// a long list does not nest deeply. Rows of different widths are 10709.
    pub(super) fn table_value_constructor(&mut self) -> PResult<TableSource> {
        self.expect_word("VALUES")?;
        let line = self.line();
        let rows = self.comma_list(|p| p.paren_list(|p| p.expr()))?;
        self.expect_symbol(")")?;
        if rows.iter().any(|r| r.len() != rows[0].len()) {
            return Err(ParseError::new(
                10709,
                16,
                1,
                "The number of columns for each row in a table value constructor must be the same.",
                line,
            ));
        }
        let alias = self.table_alias()?.ok_or_else(|| self.error())?;
        let columns = match self.check_symbol("(") {
            true => self.paren_list(|p| p.ident())?,
            false => Vec::new(),
        };
        let selects: Vec<QueryBody> = rows.into_iter().map(one_row_select).collect();
        Ok(TableSource::Derived {
            query: Box::new(Query::of_body(union_all(selects))),
            alias,
            columns,
        })
    }
}

/// `SELECT e1, e2, ...` of one row of a table value constructor.
fn one_row_select(row: Vec<Expr>) -> QueryBody {
    let items = row
        .into_iter()
        .map(|expr| SelectItem::Expr { expr, alias: None })
        .collect();
    QueryBody::Select(Box::new(Select::of_items(items)))
}

/// The UNION ALL of `bodies` (at least one), as a balanced tree.
fn union_all(mut bodies: Vec<QueryBody>) -> QueryBody {
    assert!(!bodies.is_empty(), "a table value constructor has a row");
    if bodies.len() == 1 {
        return bodies.pop().expect("one body");
    }
    let right = bodies.split_off(bodies.len() / 2);
    QueryBody::SetOperation {
        op: SetOperator::UnionAll,
        left: Box::new(union_all(bodies)),
        right: Box::new(union_all(right)),
    }
}

/// The clause's name as SQL Server's messages give it.
fn clause_name(when: MergeWhen) -> &'static str {
    match when {
        MergeWhen::Matched => "WHEN MATCHED",
        MergeWhen::NotMatchedByTarget => "WHEN NOT MATCHED",
        MergeWhen::NotMatchedBySource => "WHEN NOT MATCHED BY SOURCE",
    }
}

fn action_name(action: &MergeAction) -> &'static str {
    match action {
        MergeAction::Update(_) => "UPDATE",
        MergeAction::Delete => "DELETE",
        MergeAction::Insert { .. } => "INSERT",
    }
}

/// 10711: INSERT only when not matched by target; 10710: only INSERT there.
fn allowed(when: MergeWhen, action: &MergeAction, line: u32) -> PResult<()> {
    let insert = matches!(action, MergeAction::Insert { .. });
    match (when, insert) {
        (MergeWhen::NotMatchedByTarget, false) => Err(ParseError::new(
            10710,
            15,
            1,
            format!(
                "An action of type '{}' is not allowed in the 'WHEN NOT MATCHED' clause of a \
                 MERGE statement.",
                action_name(action)
            ),
            line,
        )),
        (MergeWhen::Matched | MergeWhen::NotMatchedBySource, true) => Err(ParseError::new(
            10711,
            15,
            1,
            format!(
                "An action of type 'INSERT' is not allowed in the '{}' clause of a MERGE \
                 statement.",
                clause_name(when)
            ),
            line,
        )),
        _ => Ok(()),
    }
}

/// At most two clauses of each kind (one for NOT MATCHED BY TARGET), never the same
/// action twice in one kind (10714, whose text SQL Server words with the clause and the
/// action the other way round), and of two the first has its AND (a syntax error at the
/// second's WHEN otherwise: SQL Server's grammar cannot reach the second).
fn check_clauses(clauses: &[MergeClause], line: u32) -> PResult<()> {
    for when in [
        MergeWhen::Matched,
        MergeWhen::NotMatchedByTarget,
        MergeWhen::NotMatchedBySource,
    ] {
        let of: Vec<&MergeClause> = clauses.iter().filter(|c| c.when == when).collect();
        for (i, c) in of.iter().enumerate() {
            let twice = of[..i]
                .iter()
                .any(|d| action_name(&d.action) == action_name(&c.action));
            if twice || i >= 2 {
                return Err(ParseError::new(
                    10714,
                    15,
                    1,
                    format!(
                        "An action of type '{}' cannot appear more than once in a '{}' clause \
                         of a MERGE statement.",
                        clause_name(when),
                        action_name(&c.action)
                    ),
                    line,
                ));
            }
        }
        if of.len() == 2 && of[0].condition.is_none() {
            return Err(ParseError::new(
                102,
                15,
                1,
                "Incorrect syntax near 'WHEN'.",
                line,
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ast::{MergeAction, MergeWhen, StatementKind, TableSource};
    use crate::parser::parse_batch;

    fn number(sql: &str) -> i32 {
        parse_batch(sql).expect_err(sql).number
    }

    /// A full MERGE parses into its parts: CTEs, alias, hints, a VALUES source with its
    /// column names, each clause's kind, condition and action, OUTPUT.
    #[test]
    fn merge_parts() {
        let b = parse_batch(
            "WITH c AS (SELECT 1 AS x) MERGE INTO dbo.t WITH (HOLDLOCK) AS tg
             USING (VALUES (1, 'a'), (2, 'b'), (3, 'c')) AS s (id, v) ON tg.id = s.id
             WHEN MATCHED AND s.v = 'x' THEN DELETE
             WHEN MATCHED THEN UPDATE SET v = s.v
             WHEN NOT MATCHED BY TARGET THEN INSERT (id) VALUES (s.id)
             WHEN NOT MATCHED BY SOURCE THEN DELETE
             OUTPUT $action, inserted.id;",
        )
        .unwrap();
        let StatementKind::Merge(m) = &b[0].kind else {
            panic!("{:?}", b[0].kind)
        };
        assert_eq!(m.ctes.len(), 1);
        assert_eq!(m.alias.as_deref(), Some("tg"));
        assert_eq!(m.hints, vec!["HOLDLOCK".to_string()]);
        let TableSource::Derived { alias, columns, .. } = &m.source else {
            panic!("{:?}", m.source)
        };
        assert_eq!((alias.as_str(), columns.len()), ("s", 2));
        let kinds: Vec<MergeWhen> = m.clauses.iter().map(|c| c.when).collect();
        assert_eq!(
            kinds,
            [
                MergeWhen::Matched,
                MergeWhen::Matched,
                MergeWhen::NotMatchedByTarget,
                MergeWhen::NotMatchedBySource
            ]
        );
        assert!(m.clauses[0].condition.is_some());
        assert!(matches!(m.clauses[1].action, MergeAction::Update(_)));
        assert_eq!(m.output.as_ref().unwrap().items.len(), 2);
        // A target without an alias: USING is not taken for one.
        let b = parse_batch("MERGE t USING u ON t.a = u.a WHEN MATCHED THEN DELETE;").unwrap();
        let StatementKind::Merge(m) = &b[0].kind else {
            panic!()
        };
        assert_eq!(m.alias, None);
    }

    /// The clause rules' numbers, and the semicolon MERGE must end with.
    #[test]
    fn merge_clause_rules() {
        let m = "MERGE t USING u ON t.a = u.a ";
        assert_eq!(number(&format!("{m} WHEN MATCHED THEN DELETE")), 10713);
        assert_eq!(
            number(&format!("{m} WHEN MATCHED THEN DELETE PRINT 1")),
            10713
        );
        assert_eq!(
            number(&format!("{m} WHEN MATCHED THEN INSERT VALUES (1);")),
            10711
        );
        assert_eq!(
            number(&format!("{m} WHEN NOT MATCHED THEN UPDATE SET a = 1;")),
            10710
        );
        let twice =
            "WHEN MATCHED AND u.b = 1 THEN UPDATE SET a = 1 WHEN MATCHED THEN UPDATE SET a = 2;";
        assert_eq!(number(&format!("{m} {twice}")), 10714);
        let unconditioned =
            "WHEN MATCHED THEN UPDATE SET a = 1 WHEN MATCHED AND u.b = 1 THEN DELETE;";
        assert_eq!(number(&format!("{m} {unconditioned}")), 102);
        assert_eq!(number(m), 102);
        assert_eq!(number("SELECT * FROM (VALUES (1), (2, 3)) AS v (a)"), 10709);
        assert_eq!(
            number(&format!(
                "{m} WHEN NOT MATCHED THEN INSERT (t.a) VALUES (1);"
            )),
            10900
        );
    }
}
