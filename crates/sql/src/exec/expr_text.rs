//! Expressions back to T-SQL text, for what the catalog keeps as text (a column's DEFAULT).
//!
//! The text is SQL Server's normalized form where that is cheap: a DEFAULT is wrapped in
//! parentheses, and so is each numeric literal (`(replicate('Junk',(2000)))`), as
//! `sys.default_constraints.definition` shows it. What matters is the round trip: parsing
//! `SELECT <text>` gives back an equal expression up to parentheses.
//!
//! Not rendered (the caller refuses them as defaults): subqueries and window functions.

use crate::ast::{BinaryOp, DataType, Expr, Literal, UnaryOp};
use crate::convert::{data_type_name, decimal_string, hex_upper};
use crate::types::{SqlType, MAX_LENGTH};

/// A column DEFAULT's stored text.
pub fn default_text(e: &Expr) -> Option<String> {
    Some(format!("({})", expr(e)?))
}

fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn length(n: u32) -> String {
    if n == MAX_LENGTH {
        "max".into()
    } else {
        n.to_string()
    }
}

/// A type as a declaration writes it: `varchar(10)`, `decimal(18,2)`, `datetime2(7)`.
pub fn type_text(t: SqlType) -> String {
    let base = data_type_name(t);
    match t {
        SqlType::Char(n)
        | SqlType::VarChar(n)
        | SqlType::NChar(n)
        | SqlType::NVarChar(n)
        | SqlType::Binary(n)
        | SqlType::VarBinary(n) => format!("{base}({})", length(n)),
        SqlType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
        SqlType::DateTime2(s) => format!("{base}({s})"),
        _ => base,
    }
}

fn data_type(d: &DataType) -> String {
    type_text(d.sql_type)
}

fn binary_op(op: BinaryOp) -> &'static str {
    use BinaryOp as B;
    match op {
        B::Multiply => "*",
        B::Divide => "/",
        B::Modulo => "%",
        B::Add => "+",
        B::Subtract => "-",
        B::BitAnd => "&",
        B::BitOr => "|",
        B::BitXor => "^",
        B::Equal => "=",
        B::NotEqual => "<>",
        B::Less => "<",
        B::Greater => ">",
        B::LessOrEqual => "<=",
        B::GreaterOrEqual => ">=",
        B::NotLess => "!<",
        B::NotGreater => "!>",
        B::And => "AND",
        B::Or => "OR",
    }
}

fn list(args: &[Expr]) -> Option<String> {
    Some(args.iter().map(expr).collect::<Option<Vec<_>>>()?.join(","))
}

/// One expression as T-SQL; None for forms a default cannot hold.
pub fn expr(e: &Expr) -> Option<String> {
    Some(match e {
        Expr::Literal(l) => match l {
            Literal::Null => "NULL".into(),
            Literal::Integer(i) => format!("({i})"),
            Literal::Decimal {
                unscaled, scale, ..
            } => format!("({})", decimal_string(*unscaled, *scale)),
            Literal::Float(f) => format!("({f:e})"),
            Literal::String { value, national } => {
                format!("{}{}", if *national { "N" } else { "" }, quoted(value))
            }
            Literal::Binary(b) => format!("0x{}", hex_upper(b)),
        },
        Expr::Variable(v) | Expr::GlobalVariable(v) => v.clone(),
        Expr::Column(n) => n
            .parts
            .iter()
            .map(|p| format!("[{}]", p.replace(']', "]]")))
            .collect::<Vec<_>>()
            .join("."),
        Expr::DatePart(p) => p.clone(),
        Expr::Function {
            name,
            args,
            distinct,
            star,
        } => {
            let inner = if *star { "*".to_string() } else { list(args)? };
            let d = if *distinct { "DISTINCT " } else { "" };
            format!("{}({d}{inner})", name.joined().to_ascii_lowercase())
        }
        Expr::Cast {
            expr: x,
            data_type: t,
            try_cast,
        } => format!(
            "{}({} AS {})",
            if *try_cast { "TRY_CAST" } else { "CAST" },
            expr(x)?,
            data_type(t)
        ),
        Expr::Convert {
            data_type: t,
            expr: x,
            style,
            try_convert,
        } => {
            let style = match style {
                Some(s) => format!(",{}", expr(s)?),
                None => String::new(),
            };
            let f = if *try_convert {
                "TRY_CONVERT"
            } else {
                "CONVERT"
            };
            format!("{f}({},{}{style})", data_type(t), expr(x)?)
        }
        Expr::Case {
            operand,
            branches,
            else_result,
        } => {
            let mut s = "CASE".to_string();
            if let Some(o) = operand {
                s += &format!(" {}", expr(o)?);
            }
            for (w, t) in branches {
                s += &format!(" WHEN {} THEN {}", expr(w)?, expr(t)?);
            }
            if let Some(x) = else_result {
                s += &format!(" ELSE {}", expr(x)?);
            }
            s + " END"
        }
        Expr::Unary { op, expr: x } => {
            let o = match op {
                UnaryOp::Negate => "-",
                UnaryOp::Plus => "+",
                UnaryOp::BitNot => "~",
                UnaryOp::Not => "NOT ",
            };
            format!("{o}{}", expr(x)?)
        }
        Expr::Binary { left, op, right } => {
            format!("({}{}{})", expr(left)?, binary_op(*op), expr(right)?)
        }
        Expr::Like {
            expr: x,
            pattern,
            escape,
            negated,
        } => {
            let esc = match escape {
                Some(e) => format!(" ESCAPE {}", expr(e)?),
                None => String::new(),
            };
            let not = if *negated { " NOT" } else { "" };
            format!("({}{not} LIKE {}{esc})", expr(x)?, expr(pattern)?)
        }
        Expr::InList {
            expr: x,
            list: l,
            negated,
        } => {
            let not = if *negated { " NOT" } else { "" };
            format!("({}{not} IN ({}))", expr(x)?, list(l)?)
        }
        Expr::Between {
            expr: x,
            low,
            high,
            negated,
        } => {
            let not = if *negated { " NOT" } else { "" };
            format!(
                "({}{not} BETWEEN {} AND {})",
                expr(x)?,
                expr(low)?,
                expr(high)?
            )
        }
        Expr::IsNull { expr: x, negated } => {
            let not = if *negated { " NOT" } else { "" };
            format!("({} IS{not} NULL)", expr(x)?)
        }
        Expr::Collate { expr: x, collation } => format!("{} COLLATE {collation}", expr(x)?),
        Expr::Exists(_)
        | Expr::Subquery(_)
        | Expr::InSubquery { .. }
        | Expr::Default
        | Expr::Window(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::{SelectItem, StatementKind};
    use crate::parser::parse_batch;

    fn first_expr(sql: &str) -> Expr {
        let s = parse_batch(sql).unwrap();
        let StatementKind::Select(q) = &s[0].kind else {
            panic!()
        };
        let crate::ast::QueryBody::Select(sel) = &q.body else {
            panic!()
        };
        match &sel.items[0] {
            SelectItem::Expr { expr, .. } => expr.clone(),
            _ => panic!(),
        }
    }

    /// A default's text parses back to the expression it came from, and reads as SQL
    /// Server's normalized definition.
    #[test]
    fn default_text_round_trips() {
        for sql in [
            "REPLICATE('Junk', 2000)",
            "N'it''s' + CAST(1 AS varchar(10))",
            "CONVERT(datetime2(3), SYSDATETIME(), 121)",
            "CASE WHEN 1 = 1 THEN -2.5 ELSE NULL END",
            "0x0A",
        ] {
            let e = first_expr(&format!("SELECT {sql}"));
            let text = default_text(&e).unwrap();
            let back = first_expr(&format!("SELECT {text}"));
            assert_eq!(expr(&back), expr(&e), "{sql} -> {text}");
        }
        let e = first_expr("SELECT REPLICATE('Junk', 2000)");
        assert_eq!(default_text(&e).unwrap(), "(replicate('Junk',(2000)))");
    }
}
