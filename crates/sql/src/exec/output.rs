//! Where a batch's outputs go as they are produced: the server's sink writes them to the
//! client's socket while the batch runs (rows flow from the page to the TDS packet), the
//! in-process callers collect them.
//!
//! Invariants:
//! 1. A result set reaches a sink as `Output::Columns` then zero or more `Output::Row`, each
//!    row as long as the columns; nothing else comes between them.
//! 2. Once a sink says its receiver is gone, nothing more reaches it: the batch stops as if
//!    cancelled (`Out::gone`).
//! 3. No value of a varchar(max), nvarchar(max) or varbinary(max) column reaches a sink
//!    longer than the session's SET TEXTSIZE (`Out::textsize`).

use super::Output;
use crate::types::{SqlType, Value};

/// The receiver of a batch's outputs.
pub trait OutputSink {
    /// Takes the next output; false when the receiver is gone (the client disconnected).
    fn emit(&mut self, o: Output) -> bool;
}

/// Collects outputs in memory, each result set whole (`Output::Rows`): for in-process
/// callers and for what is small by construction (a transaction-manager request's answer).
#[derive(Default)]
pub struct Collect {
    pub outputs: Vec<Output>,
}

impl OutputSink for Collect {
    fn emit(&mut self, o: Output) -> bool {
        match o {
            Output::Columns(columns) => self.outputs.push(Output::Rows {
                columns,
                rows: Vec::new(),
            }),
            Output::Row(r) => match self.outputs.last_mut() {
                Some(Output::Rows { rows, .. }) => rows.push(r),
                _ => unreachable!("a row outside a result set (invariant 1)"),
            },
            o => self.outputs.push(o),
        }
        true
    }
}

/// A statement's view of the sink: counts what was reported (for the statement's DONE),
/// checks the shape of result sets and remembers a receiver that went away.
pub struct Out<'a> {
    sink: &'a mut dyn OutputSink,
    /// Result sets, row counts and errors pushed so far.
    reported: u64,
    /// Columns of the result set being streamed (invariant 1), None between result sets.
    streaming: Option<usize>,
    /// The long columns of that result set: (index, nvarchar) (invariant 3).
    long_columns: Vec<(usize, bool)>,
    /// SET TEXTSIZE of the session running the batch.
    pub textsize: u32,
    gone: bool,
}

impl<'a> Out<'a> {
    pub fn new(sink: &'a mut dyn OutputSink) -> Out<'a> {
        Out {
            sink,
            reported: 0,
            streaming: None,
            long_columns: Vec::new(),
            textsize: super::set_options::DEFAULT_TEXTSIZE,
            gone: false,
        }
    }

    pub fn push(&mut self, mut o: Output) {
        match &mut o {
            Output::Row(r) => {
                assert_eq!(Some(r.len()), self.streaming, "row shape (invariant 1)");
                self.cut_long_values(r);
            }
            Output::Columns(c) => {
                self.streaming = Some(c.len());
                self.long_columns = long_columns(c);
                self.reported += 1;
            }
            Output::Rows { columns, rows } => {
                self.long_columns = long_columns(columns);
                rows.iter_mut().for_each(|r| self.cut_long_values(r));
                self.streaming = None;
                self.reported += 1;
            }
            other => {
                self.streaming = None;
                if matches!(other, Output::RowsAffected(_) | Output::Error(_)) {
                    self.reported += 1;
                }
            }
        }
        if !self.gone {
            self.gone = !self.sink.emit(o);
        }
    }

    /// Invariant 3.
    fn cut_long_values(&self, row: &mut [Value]) {
        if self.textsize == super::set_options::DEFAULT_TEXTSIZE {
            return;
        }
        for &(i, unicode) in &self.long_columns {
            super::set_options::cut_to_textsize(&mut row[i], unicode, self.textsize);
        }
    }

    pub fn extend(&mut self, outputs: impl IntoIterator<Item = Output>) {
        for o in outputs {
            self.push(o);
        }
    }

    /// Begins a result set streamed row by row (`row`).
    pub fn columns(&mut self, columns: Vec<(String, SqlType)>) {
        self.push(Output::Columns(columns));
    }

    pub fn row(&mut self, values: Vec<Value>) {
        self.push(Output::Row(values));
    }

    /// How many result sets, row counts and errors were pushed so far.
    pub fn reported(&self) -> u64 {
        self.reported
    }

    /// True once the receiver went away (invariant 2).
    pub fn gone(&self) -> bool {
        self.gone
    }
}

/// The columns SET TEXTSIZE cuts: (index, nvarchar).
fn long_columns(columns: &[(String, SqlType)]) -> Vec<(usize, bool)> {
    use crate::types::MAX_LENGTH;
    let long = |t: &SqlType| match *t {
        SqlType::VarChar(MAX_LENGTH) | SqlType::VarBinary(MAX_LENGTH) => Some(false),
        SqlType::NVarChar(MAX_LENGTH) => Some(true),
        _ => None,
    };
    columns
        .iter()
        .enumerate()
        .filter_map(|(i, (_, t))| long(t).map(|u| (i, u)))
        .collect()
}

/// Runs `f` with an `Out` that collects, and returns what it collected.
pub fn collect(f: impl FnOnce(&mut Out)) -> Vec<Output> {
    let mut c = Collect::default();
    f(&mut Out::new(&mut c));
    c.outputs
}
