//! PRIMARY KEY uniqueness of a statement's rows against a heap's, in bounded memory: what
//! a NONCLUSTERED primary key over a heap without its own unique index (a catalog written
//! before catalog invariant 11) needs on INSERT, and a clustered or such a primary key on
//! an UPDATE that changes its columns (a clustered index, and a heap's primary key's unique
//! index, enforce their keys themselves as rows go in).
//!
//! The rows a statement would leave are a *sequence*: for INSERT the table's rows (in scan
//! order), then the new ones (in statement order); for UPDATE the changed rows' new values
//! (in statement order), then the rows it leaves as they are. Msg 2627 names the key of the
//! first row of that sequence whose key an earlier row already has, as a set of seen keys
//! walked along the sequence would find it, and its key value as that row has it.
//!
//! How, without holding the table's keys: every key goes into a spilling sort as an
//! *entry* `[key..., rank, group, index]` ordered by all of it, so equal keys meet in one
//! *run*, each run in sequence order ((group, index) is a row's place in the sequence; rank
//! puts cancellations first). In each run the second member is where the set would have
//! found the duplicate; the first such place over all runs is the one reported. An UPDATE
//! adds a *cancellation* for each changed row's old key: the table's row with that key is
//! the changed row itself, not one the statement leaves, so the cancellation takes it out
//! of its run.
//!
//! While the new keys fit in `PROBE_BYTES`, they are also kept sorted in memory, and a
//! table row whose key is none of them is not pushed at all (it cannot be a duplicate: the
//! table's keys are unique among themselves), so a small statement against a large table
//! sorts only its own keys. Past that, every table row's key goes to the sort, which
//! spills to work files as any sort does (`SortSpill`).
//!
//! Invariants:
//! 1. Entries are pushed new keys and cancellations first (`new_key`, `cancel`), then the
//!    table's (`existing`); asserted: the probe is built at the first table row.
//! 2. Memory: the sort's budget plus the probe's `PROBE_BYTES`, whatever the table's size.
//! 3. The result is the first duplicate of the sequence, as the walk over a set finds it;
//!    a comparison that fails (values that do not compare) is an error, never a pass.

use std::path::Path;
use std::sync::{Arc, Mutex};

use super::select::same_row;
use super::spill::{RowCompare, SortSpill};
use super::stream::key_order;
use crate::messages::SqlError;
use crate::types::Value;

/// New keys held in memory to filter the table's rows (invariant 2).
const PROBE_BYTES: usize = 4 << 20;

/// Rank of a cancellation (before the run's members) and of a member.
const CANCEL: i32 = 0;
const MEMBER: i32 = 1;

/// One primary key's check over one statement.
pub(super) struct KeyCheck {
    pos: Vec<usize>,
    sort: SortSpill,
    failure: Arc<Mutex<Option<SqlError>>>,
    /// The order of two keys (the probe's).
    order: Box<RowCompare>,
    /// The sequence group of the new rows and of the table's (`existing`) rows.
    new_group: i32,
    existing_group: i32,
    /// The new keys while they fit `PROBE_BYTES`; sorted once the table's rows come.
    probe: Option<Vec<Vec<Value>>>,
    probe_bytes: usize,
    probe_sorted: bool,
    existing_rows: i64,
}

/// The first duplicate a check found: its key values as that row has them.
pub(super) type Duplicate = Vec<Value>;

impl KeyCheck {
    /// A check of the key at column positions `pos`. `existing_first`: the table's rows
    /// come before the new ones in the sequence (INSERT), else after them (UPDATE).
    pub fn new(pos: Vec<usize>, existing_first: bool, dir: &Path, budget: usize) -> KeyCheck {
        let failure = Arc::new(Mutex::new(None));
        let order = key_order(vec![false; pos.len() + 3], failure.clone());
        let (new_group, existing_group) = if existing_first { (1, 0) } else { (0, 1) };
        KeyCheck {
            order: key_order(vec![false; pos.len()], failure.clone()),
            pos,
            sort: SortSpill::new(dir, budget, order),
            failure,
            new_group,
            existing_group,
            probe: Some(Vec::new()),
            probe_bytes: 0,
            probe_sorted: false,
            existing_rows: 0,
        }
    }

    fn key(&self, row: &[Value]) -> Vec<Value> {
        self.pos.iter().map(|&p| row[p].clone()).collect()
    }

    fn push(
        &mut self,
        mut key: Vec<Value>,
        rank: i32,
        group: i32,
        index: i64,
    ) -> Result<(), SqlError> {
        key.extend([Value::Int(rank), Value::Int(group), Value::BigInt(index)]);
        self.sort.push(key)
    }

    /// The `index`th new row (statement order).
    pub fn new_key(&mut self, row: &[Value], index: i64) -> Result<(), SqlError> {
        assert!(
            !self.probe_sorted,
            "invariant 1: new keys come before the table's"
        );
        let key = self.key(row);
        if let Some(probe) = &mut self.probe {
            self.probe_bytes += key_bytes(&key);
            if self.probe_bytes > PROBE_BYTES {
                self.probe = None;
            } else {
                probe.push(key.clone());
            }
        }
        self.push(key, MEMBER, self.new_group, index)
    }

    /// A changed row's old values (UPDATE): the table's row with its key is not one the
    /// statement leaves.
    pub fn cancel(&mut self, old: &[Value]) -> Result<(), SqlError> {
        assert!(
            !self.probe_sorted,
            "invariant 1: cancellations come before the table's rows"
        );
        let key = self.key(old);
        self.push(key, CANCEL, 0, 0)
    }

    /// The table's next row in scan order.
    pub fn existing(&mut self, row: &[Value]) -> Result<(), SqlError> {
        let key = self.key(row);
        let index = self.existing_rows;
        self.existing_rows += 1;
        if !self.probe_sorted {
            self.probe_sorted = true;
            if let Some(probe) = &mut self.probe {
                probe.sort_by(|a, b| (self.order)(a, b));
            }
        }
        if let Some(probe) = &self.probe {
            let found = probe.binary_search_by(|p| (self.order)(p, &key));
            if found.is_err() {
                return Ok(());
            }
        }
        self.push(key, MEMBER, self.existing_group, index)
    }

    /// The first duplicate of the sequence, if any (invariant 3).
    pub fn finish(self) -> Result<Option<Duplicate>, SqlError> {
        let k = self.pos.len();
        let sorted = self.sort.finish()?;
        let mut run = Run::default();
        let mut first: Option<((i32, i64), Duplicate)> = None;
        let mut current: Option<Vec<Value>> = None;
        for entry in sorted {
            let entry = entry?;
            if current
                .as_ref()
                .is_none_or(|c| !same_row(&c[..k], &entry[..k]))
            {
                run = Run::default();
                current = Some(entry.clone());
            }
            if let Some(place) = run.take(&entry[k..], self.existing_group) {
                if first.as_ref().is_none_or(|(p, _)| place < *p) {
                    first = Some((place, entry[..k].to_vec()));
                }
            }
        }
        if let Some(e) = self.failure.lock().unwrap().take() {
            return Err(e);
        }
        Ok(first.map(|(_, key)| key))
    }
}

/// The state of one run of equal keys.
#[derive(Default)]
struct Run {
    /// Cancellations not yet matched with the table's row.
    cancels: u32,
    /// Members that count, so far.
    members: u32,
}

impl Run {
    /// Takes the next entry's `[rank, group, index]`; the entry's place in the sequence
    /// when it is the run's second member (a duplicate).
    fn take(&mut self, tail: &[Value], existing_group: i32) -> Option<(i32, i64)> {
        let (Value::Int(rank), Value::Int(group), Value::BigInt(index)) =
            (&tail[0], &tail[1], &tail[2])
        else {
            unreachable!("entries are pushed as [key..., rank, group, index]");
        };
        if *rank == CANCEL {
            self.cancels += 1;
            return None;
        }
        if *group == existing_group && self.cancels > 0 {
            self.cancels -= 1;
            return None;
        }
        self.members += 1;
        (self.members == 2).then_some((*group, *index))
    }
}

fn key_bytes(key: &[Value]) -> usize {
    key.iter()
        .map(|v| match v {
            Value::Text(s) => s.len(),
            Value::Binary(b) => b.len(),
            _ => 0,
        })
        .sum::<usize>()
        + std::mem::size_of_val(key)
        + std::mem::size_of::<Vec<Value>>()
}
