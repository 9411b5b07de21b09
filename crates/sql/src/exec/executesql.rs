//! sp_executesql called from T-SQL (`EXEC sp_executesql @stmt [, @params [, @p = v
//! [OUTPUT] ...]]`), as maintenance scripts build their commands: the statement runs as a
//! batch of its own (its own variables and table variables, the caller's transaction),
//! with the parameters declared from the definition list and bound by name or position;
//! OUTPUT arguments get the parameters' values at its end. The RPC form is the TDS layer's
//! (`Connection::sp_executesql`); both bind by the same definition parser.
//!
//! Messages: 8144 (an argument past the definitions), 8145 (a name no definition has),
//! 8178 (a parameter with no value), 8162 (OUTPUT asked of a parameter not declared
//! OUTPUT), 214 (a statement or definition that is not text), 137 (an OUTPUT argument
//! that is no declared variable).

use super::Out;
use super::Session;
use crate::ast::{ExecArg, Expr};
use crate::messages::{msg, SqlError};
use crate::parser::{parse_parameter_definitions, ParameterDefinition};
use crate::types::Value;

type Errors = Vec<SqlError>;

impl Session {
    /// EXEC sp_executesql with the caller's arguments `args` and their values.
    pub(super) fn sp_executesql(
        &mut self,
        args: &[ExecArg],
        values: Vec<Value>,
        out: &mut Out,
    ) -> Result<(), Errors> {
        // @statement and @params: the first two arguments, or named so.
        let slot = |name: &str| {
            let named = args.iter().position(|a| {
                a.name.as_deref().is_some_and(|n| {
                    let n = n.trim_start_matches('@');
                    n.eq_ignore_ascii_case(name)
                        || (name == "stmt" && n.eq_ignore_ascii_case("statement"))
                })
            });
            named.or(match name {
                "stmt" => args.first().filter(|a| a.name.is_none()).map(|_| 0),
                _ => args.get(1).filter(|a| a.name.is_none()).map(|_| 1),
            })
        };
        let (at_stmt, at_params) = (slot("stmt"), slot("params"));
        let text_arg = |at: Option<usize>, what: &str| -> Result<Option<String>, Errors> {
            match at.and_then(|i| values.get(i)) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Text(t)) => Ok(Some(t.clone())),
                Some(_) => Err(vec![msg(214, &[&what, &"ntext/nchar/nvarchar"])]),
            }
        };
        let Some(statement) = text_arg(at_stmt, "@statement")? else {
            return Ok(());
        };
        let definitions = match text_arg(at_params, "@params")? {
            Some(d) => parse_parameter_definitions(&d).map_err(|e| vec![super::parse_error(e)])?,
            None => Vec::new(),
        };
        let given = (args.iter().zip(values.iter()).enumerate())
            .filter(|(i, _)| Some(*i) != at_stmt && Some(*i) != at_params)
            .map(|(_, p)| p);
        let bound = bind(&statement, &definitions, given)?;
        let params = (definitions.iter().zip(&bound))
            .map(|(d, (v, _))| {
                let v = crate::convert::convert(v, d.sql_type, None).map_err(|e| vec![e])?;
                Ok((d.name.clone(), d.sql_type, v))
            })
            .collect::<Result<Vec<_>, Errors>>()?;
        let wanted: Vec<String> = definitions.iter().map(|d| d.name.clone()).collect();
        let ended = self.run_nested_with_outputs(&statement, params, &wanted, out)?;
        // OUTPUT arguments take their parameters' final values.
        for ((_, target), v) in bound.iter().zip(ended) {
            if let Some(var) = target {
                self.assign(var, crate::ast::AssignOp::Assign, v)
                    .map_err(|e| vec![e])?;
            }
        }
        Ok(())
    }
}

/// Each definition's value and, for an argument passed OUTPUT, the caller's variable to
/// write back: arguments by position until the first named one, then by name.
fn bind<'a>(
    statement: &str,
    definitions: &[ParameterDefinition],
    given: impl Iterator<Item = (&'a ExecArg, &'a Value)>,
) -> Result<Vec<(Value, Option<String>)>, Errors> {
    let mut bound: Vec<Option<(Value, Option<String>)>> = vec![None; definitions.len()];
    for (position, (arg, value)) in given.enumerate() {
        let at = match &arg.name {
            None if position < definitions.len() => position,
            None => return Err(vec![msg(8144, &[&"sp_executesql"])]),
            Some(n) => definitions
                .iter()
                .position(|d| d.name.eq_ignore_ascii_case(n))
                .ok_or_else(|| vec![msg(8145, &[n, &"sp_executesql"])])?,
        };
        let target = match (arg.output, &arg.value) {
            (false, _) => None,
            (true, _) if !definitions[at].output => {
                return Err(vec![msg(8162, &[&definitions[at].name])])
            }
            (true, Expr::Variable(v)) => Some(v.clone()),
            (true, _) => return Err(vec![msg(137, &[&definitions[at].name])]),
        };
        bound[at] = Some((value.clone(), target));
    }
    (definitions.iter().zip(bound))
        .map(|(d, b)| b.ok_or_else(|| vec![msg(8178, &[&statement, &d.name])]))
        .collect()
}
