//! T-SQL for extentdb: script splitting, lexing, parsing, value semantics, execution and
//! rendering. The mapping of every failure to a SQL Server message number, severity and
//! state happens here, in `messages`, so every client sees the same Msg.

pub mod types;

// Text to statements.
pub mod ast;
pub mod lexer;
pub mod parser;
pub mod script;

// Value semantics and presentation.
pub mod convert;
pub mod dbcc_page;
pub mod functions;
pub mod histogram;
pub mod json;
pub mod messages;
pub mod ops;
pub mod render;
pub mod rowcodec;

// Execution.
pub mod exec;
