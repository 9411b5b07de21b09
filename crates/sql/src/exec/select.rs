//! SELECT: without FROM (expressions and variable assignment), and from one system view
//! with WHERE, ORDER BY and TOP. Tables, joins and aggregates arrive with the data path.

use std::cmp::Ordering;

use super::eval::{as_i64, value_type, RowCtx};
use super::lower::not_yet;
use super::views::{self, Rowset};
use super::{Output, Session};
use crate::ast::{Query, QueryBody, Select, SelectItem, TableSource};
use crate::messages::{msg, SqlError};
use crate::ops;
use crate::types::{SqlType, Value};

/// Result columns and rows.
type Projection = (Vec<(String, SqlType)>, Vec<Vec<Value>>);

/// The rows one FROM source gives, with the name and alias expressions may qualify by.
struct Source {
    rowset: Rowset,
    table: String,
    alias: Option<String>,
}

impl Session {
    pub(super) fn select(&mut self, q: &Query, out: &mut Vec<Output>) -> Result<(), Vec<SqlError>> {
        let QueryBody::Select(s) = &q.body else {
            return Err(vec![not_yet("UNION, EXCEPT and INTERSECT")]);
        };
        let source = self.from(s)?;
        if s.items
            .iter()
            .all(|i| matches!(i, SelectItem::Assign { .. }))
        {
            return self
                .assignment_select(s, source.as_ref())
                .map_err(|e| vec![e]);
        }
        if s.items
            .iter()
            .any(|i| matches!(i, SelectItem::Assign { .. }))
        {
            return Err(vec![msg(141, &[])]);
        }
        let rows = self
            .filtered_rows(s, source.as_ref())
            .map_err(|e| vec![e])?;
        let (columns, mut result) = self
            .project(s, source.as_ref(), &rows)
            .map_err(|e| vec![e])?;
        if !q.order_by.is_empty() {
            self.order(q, source.as_ref(), &rows, &columns, &mut result)
                .map_err(|e| vec![e])?;
        }
        if let Some(top) = &s.top {
            let n = as_i64(&self.eval(&top.count, None).map_err(|e| vec![e])?)
                .map_err(|e| vec![e])?
                .max(0) as usize;
            let n = if top.percent {
                (result.len() * n).div_ceil(100)
            } else {
                n
            };
            result.truncate(n);
        }
        let n = result.len() as u64;
        out.push(Output::Rows {
            columns,
            rows: result,
        });
        self.rows_affected(n, out);
        Ok(())
    }

    /// Resolves FROM: one system view (`sys.x`, `db.sys.x`), or none.
    fn from(&mut self, s: &Select) -> Result<Option<Source>, Vec<SqlError>> {
        match s.from.as_slice() {
            [] => Ok(None),
            [TableSource::Table { name, alias, .. }] => {
                let db_id = match name.database().filter(|d| !d.is_empty()) {
                    Some(db) => self
                        .engine
                        .instance
                        .database_by_name(db)
                        .map(|(id, _)| id)
                        .ok_or_else(|| vec![msg(911, &[&db])])?,
                    None => self.database_id,
                };
                let schema = name.qualifier().unwrap_or("dbo").to_ascii_lowercase();
                let key = format!("{schema}.{}", name.name().to_ascii_lowercase());
                let rowset = views::view(&self.engine.instance, db_id, &key)
                    .ok_or_else(|| vec![msg(208, &[&name.joined()])])?;
                Ok(Some(Source {
                    rowset,
                    table: name.name().to_string(),
                    alias: alias.clone(),
                }))
            }
            _ => Err(vec![not_yet("joins and derived tables")]),
        }
    }

    fn ctx<'a>(src: &'a Source, values: &'a [Value]) -> RowCtx<'a> {
        RowCtx {
            columns: &src.rowset.columns,
            values,
            alias: src.alias.as_deref(),
            table: &src.table,
        }
    }

    /// The source rows that satisfy WHERE (one empty row without FROM).
    fn filtered_rows(
        &mut self,
        s: &Select,
        src: Option<&Source>,
    ) -> Result<Vec<Vec<Value>>, SqlError> {
        let Some(src) = src else {
            if let Some(w) = &s.where_clause {
                if self.condition_row(w, None)? != Some(true) {
                    return Ok(Vec::new());
                }
            }
            return Ok(vec![Vec::new()]);
        };
        let mut rows = Vec::new();
        for r in &src.rowset.rows {
            let keep = match &s.where_clause {
                Some(w) => self.condition_row(w, Some(&Self::ctx(src, r)))? == Some(true),
                None => true,
            };
            if keep {
                rows.push(r.clone());
            }
        }
        Ok(rows)
    }

    /// Evaluates the select list for each row; columns take names from aliases or column
    /// references and types from the view or, for expressions, from the first value.
    fn project(
        &mut self,
        s: &Select,
        src: Option<&Source>,
        rows: &[Vec<Value>],
    ) -> Result<Projection, SqlError> {
        let mut columns: Vec<(String, Option<SqlType>)> = Vec::new();
        for item in &s.items {
            match item {
                SelectItem::Wildcard { .. } => {
                    let src = src.ok_or_else(|| msg(263, &[]))?;
                    columns.extend(
                        src.rowset
                            .columns
                            .iter()
                            .map(|(n, t)| (n.clone(), Some(*t))),
                    );
                }
                SelectItem::Expr { expr, alias } => {
                    let (name, t) = match expr {
                        crate::ast::Expr::Column(c) => {
                            let t = src.and_then(|s| {
                                s.rowset
                                    .columns
                                    .iter()
                                    .find(|(n, _)| n.eq_ignore_ascii_case(c.name()))
                                    .map(|x| x.1)
                            });
                            let real = src.and_then(|s| {
                                s.rowset
                                    .columns
                                    .iter()
                                    .find(|(n, _)| n.eq_ignore_ascii_case(c.name()))
                                    .map(|x| x.0.clone())
                            });
                            (
                                alias
                                    .clone()
                                    .or(real)
                                    .unwrap_or_else(|| c.name().to_string()),
                                t,
                            )
                        }
                        _ => (alias.clone().unwrap_or_default(), None),
                    };
                    columns.push((name, t));
                }
                SelectItem::Assign { .. } => unreachable!("checked by the caller"),
            }
        }
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let mut values = Vec::with_capacity(columns.len());
            for item in &s.items {
                match item {
                    SelectItem::Wildcard { .. } => values.extend(r.iter().cloned()),
                    SelectItem::Expr { expr, .. } => {
                        let ctx = src.map(|s| Self::ctx(s, r));
                        values.push(self.eval(expr, ctx.as_ref())?);
                    }
                    SelectItem::Assign { .. } => {}
                }
            }
            out.push(values);
        }
        let typed = columns
            .into_iter()
            .enumerate()
            .map(|(i, (n, t))| {
                let t = t.unwrap_or_else(|| {
                    out.iter()
                        .map(|r| &r[i])
                        .find(|v| !v.is_null())
                        .map(value_type)
                        .unwrap_or(SqlType::Int)
                });
                (n, t)
            })
            .collect();
        Ok((typed, out))
    }

    /// ORDER BY over source columns, select-list aliases or ordinals.
    fn order(
        &mut self,
        q: &Query,
        src: Option<&Source>,
        rows: &[Vec<Value>],
        columns: &[(String, SqlType)],
        result: &mut Vec<Vec<Value>>,
    ) -> Result<(), SqlError> {
        let mut keyed: Vec<(Vec<Value>, Vec<Value>)> = Vec::with_capacity(rows.len());
        for (r, projected) in rows.iter().zip(result.drain(..)) {
            let mut keys = Vec::new();
            for item in &q.order_by {
                let by_alias = match &item.expr {
                    crate::ast::Expr::Column(c) if c.parts.len() == 1 => columns
                        .iter()
                        .position(|(n, _)| n.eq_ignore_ascii_case(c.name())),
                    crate::ast::Expr::Literal(crate::ast::Literal::Integer(i)) => {
                        Some((*i as usize).saturating_sub(1))
                    }
                    _ => None,
                };
                let v = match by_alias {
                    Some(i) if i < projected.len() => projected[i].clone(),
                    _ => {
                        let ctx = src.map(|s| Self::ctx(s, r));
                        self.eval(&item.expr, ctx.as_ref())?
                    }
                };
                keys.push(v);
            }
            keyed.push((keys, projected));
        }
        let mut failure = None;
        keyed.sort_by(|a, b| {
            for (i, item) in q.order_by.iter().enumerate() {
                // NULLs sort first, as in SQL Server.
                let o = match (a.0[i].is_null(), b.0[i].is_null()) {
                    (true, true) => Ordering::Equal,
                    (true, false) => Ordering::Less,
                    (false, true) => Ordering::Greater,
                    _ => match ops::compare(&a.0[i], &b.0[i]) {
                        Ok(o) => o.unwrap_or(Ordering::Equal),
                        Err(e) => {
                            failure.get_or_insert(e);
                            Ordering::Equal
                        }
                    },
                };
                let o = if item.descending { o.reverse() } else { o };
                if o != Ordering::Equal {
                    return o;
                }
            }
            Ordering::Equal
        });
        if let Some(e) = failure {
            return Err(e);
        }
        result.extend(keyed.into_iter().map(|(_, r)| r));
        Ok(())
    }

    /// `SELECT @v = expr, ...`: assigns from each qualifying row in turn (the last wins).
    fn assignment_select(&mut self, s: &Select, src: Option<&Source>) -> Result<(), SqlError> {
        let rows = self.filtered_rows(s, src)?;
        for r in &rows {
            for item in &s.items {
                if let SelectItem::Assign {
                    variable,
                    op,
                    value,
                } = item
                {
                    let ctx = src.map(|s| Self::ctx(s, r));
                    let v = self.eval(value, ctx.as_ref())?;
                    self.assign(variable, *op, v)?;
                }
            }
        }
        self.rowcount = rows.len() as i64;
        Ok(())
    }
}
