//! Where a batch's outputs go as they are produced: the server's sink writes them to the
//! client's socket while the batch runs (rows flow from the page to the TDS packet), the
//! in-process callers collect them.
//!
//! Invariants:
//! 1. A result set reaches a sink as `Output::Columns` then zero or more `Output::Row`, each
//!    row as long as the columns; nothing else comes between them.
//! 2. Once a sink says its receiver is gone, nothing more reaches it: the batch stops as if
//!    cancelled (`Out::gone`).

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
    gone: bool,
}

impl<'a> Out<'a> {
    pub fn new(sink: &'a mut dyn OutputSink) -> Out<'a> {
        Out {
            sink,
            reported: 0,
            streaming: None,
            gone: false,
        }
    }

    pub fn push(&mut self, o: Output) {
        match &o {
            Output::Row(r) => {
                assert_eq!(Some(r.len()), self.streaming, "row shape (invariant 1)");
            }
            Output::Columns(c) => {
                self.streaming = Some(c.len());
                self.reported += 1;
            }
            other => {
                self.streaming = None;
                if matches!(
                    other,
                    Output::Rows { .. } | Output::RowsAffected(_) | Output::Error(_)
                ) {
                    self.reported += 1;
                }
            }
        }
        if !self.gone {
            self.gone = !self.sink.emit(o);
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

/// Runs `f` with an `Out` that collects, and returns what it collected.
pub fn collect(f: impl FnOnce(&mut Out)) -> Vec<Output> {
    let mut c = Collect::default();
    f(&mut Out::new(&mut c));
    c.outputs
}
