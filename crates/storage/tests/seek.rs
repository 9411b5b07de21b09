//! Seeks (scan.rs invariant 4): `seek_chunk` over a clustered index split everywhere
//! returns exactly the live rows whose keys lie in the range, in key order, whatever the
//! bounds (included, excluded, unbounded, on a key or between keys) and however small the
//! chunks; a point seek reads one page per level; `range_pages` counts the pages a seek
//! visits.

mod common;

use std::ops::Bound;
use std::path::Path;

use common::{ctx, file, heap_and_tree, insert_scrambled, spec, Quiet, LAYOUT};
use extentdb_format::file_header::FileType;
use extentdb_format::record;
use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_storage::scan::{KeyRange, ScanPosition};
use extentdb_storage::Database;

fn key_of(rec: &[u8]) -> u32 {
    let cols = record::decode(&LAYOUT, rec).unwrap();
    u32::from_le_bytes(cols[0].unwrap().try_into().unwrap())
}

/// Every key `range` reaches, read `max_bytes` at a time, and the pages it read.
fn seek_keys(db: &mut Database, t: u32, range: &KeyRange, max_bytes: usize) -> (Vec<u32>, u64) {
    let origin = db.scan_origin(t).unwrap();
    let (mut at, mut keys, mut reads) = (ScanPosition::Start, Vec::new(), 0);
    while at != ScanPosition::End {
        let chunk = db
            .seek_chunk(t, origin, (range, &at), max_bytes, None)
            .unwrap();
        keys.extend(chunk.rows.iter().map(|(_, r)| key_of(r)));
        reads += chunk.reads.logical;
        at = chunk.next;
    }
    (keys, reads)
}

fn bound(kind: u64, k: u32) -> Bound<Vec<Option<Vec<u8>>>> {
    let prefix = vec![Some(k.to_le_bytes().to_vec())];
    match kind {
        0 => Bound::Unbounded,
        1 => Bound::Excluded(prefix),
        _ => Bound::Included(prefix),
    }
}

fn inside(k: u32, b: &Bound<Vec<Option<Vec<u8>>>>, lower: bool) -> bool {
    let v =
        |p: &Vec<Option<Vec<u8>>>| u32::from_le_bytes(p[0].clone().unwrap().try_into().unwrap());
    match (b, lower) {
        (Bound::Unbounded, _) => true,
        (Bound::Included(p), true) => k >= v(p),
        (Bound::Excluded(p), true) => k > v(p),
        (Bound::Included(p), false) => k <= v(p),
        (Bound::Excluded(p), false) => k < v(p),
    }
}

/// Proves 300 random ranges over a 3,000-row tree (a tenth of its rows deleted, so ghosts
/// lie in the way) read exactly the model's keys, in chunks of 2 KB and of 1 MB.
#[test]
fn seeks_return_exactly_the_rows_of_the_range() {
    let fs = SimFileSystem::new(21, Faults::default());
    let root = Path::new("/sim");
    let mut s = spec("Seek", root);
    s.files[1] = file("Seek_log", root.join("Seek_log.ldf"), FileType::Log, 1024);
    let mut db = Database::create(&ctx(&fs, true, &Quiet), &s).unwrap();
    let tables = heap_and_tree(&mut db);
    let tree = tables[1];
    insert_scrambled(&mut db, &[tree], 3000);
    let all: Vec<(u32, _)> = {
        let (keys, _) = seek_keys(&mut db, tree, &KeyRange::all(), usize::MAX);
        keys.into_iter().map(|k| (k, ())).collect()
    };
    let x = db.begin_xact();
    let rows = db.scan_rows(tree).unwrap();
    for (rid, rec) in rows.iter().step_by(10) {
        db.now(|d| d.delete_row_at(x, tree, (*rid, rec))).unwrap();
    }
    db.commit_xact(x).unwrap();
    let live: Vec<u32> = all
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 10 != 0)
        .map(|(_, (k, _))| *k)
        .collect();
    assert!(
        live.windows(2).all(|w| w[0] < w[1]),
        "scan out of key order"
    );
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for i in 0..300 {
        // Half the bounds on stored keys (live or deleted), half between them.
        let key = |r: u64, s: u64| match r % 2 {
            0 => all[(s % all.len() as u64) as usize].0,
            _ => (s % 1_000_003) as u32,
        };
        let (a, b) = (key(next(), next()), key(next(), next()));
        let (lo, hi) = (a.min(b), a.max(b));
        let range = KeyRange {
            lower: bound(next() % 3, lo),
            upper: bound(next() % 3, hi),
        };
        let want: Vec<u32> = live
            .iter()
            .copied()
            .filter(|k| inside(*k, &range.lower, true) && inside(*k, &range.upper, false))
            .collect();
        for max_bytes in [2048, 1 << 20] {
            let (got, _) = seek_keys(&mut db, tree, &range, max_bytes);
            assert_eq!(got, want, "range {i} ({range:?}) in chunks of {max_bytes}");
        }
        // The plan's estimate counts the pages the read visits, and stops past its cap.
        let (_, reads) = seek_keys(&mut db, tree, &range, usize::MAX);
        let ranges = std::slice::from_ref(&range);
        assert_eq!(
            db.range_pages(tree, ranges, reads).unwrap(),
            Some(reads),
            "range {i}"
        );
        assert_eq!(
            db.range_pages(tree, ranges, reads - 1).unwrap(),
            None,
            "range {i}"
        );
    }
    // A point seek: one page per level of the tree (root, then down to one leaf).
    let k = live[live.len() / 2];
    let point = KeyRange {
        lower: bound(2, k),
        upper: bound(2, k),
    };
    let (got, reads) = seek_keys(&mut db, tree, &point, 1 << 20);
    assert_eq!(got, vec![k]);
    let (_, scan_reads) = seek_keys(&mut db, tree, &KeyRange::all(), 1 << 20);
    assert!(
        reads <= 3 && scan_reads > 100,
        "point {reads}, scan {scan_reads}"
    );
}

/// A gate that locks key ranges (access.rs invariant 6) and records what it is shown:
/// rows taken, and the keys bounding ranges (None for the end of the index).
#[derive(Default)]
struct RangeGate {
    rows: Vec<u32>,
    ranges: Vec<Option<u32>>,
    /// Refuse every key range (an insert must then change nothing).
    refuse: bool,
}

impl extentdb_storage::access::Gate for RangeGate {
    fn row(&mut self, _: extentdb_storage::table::Rid, rec: &[u8]) -> bool {
        self.rows.push(key_of(rec));
        true
    }
    fn key_ranges(&self) -> bool {
        true
    }
    fn key_range(&mut self, next: Option<(extentdb_storage::table::Rid, &[u8])>) -> bool {
        self.ranges.push(next.map(|(_, r)| key_of(r)));
        !self.refuse
    }
}

/// Proves a key-range gate sees, for 200 random ranges over a split tree with ghosts,
/// exactly the model's live rows, then the ghosts inside the range and last the first
/// live key past it (None past the last key), and nothing past a point seek that found
/// its row; and that an insert of a new key is shown the first live key after it, ghosts
/// skipped, and changes nothing when the gate refuses that range.
#[test]
fn key_range_gates_see_the_keys_that_bound_ranges() {
    let fs = SimFileSystem::new(22, Faults::default());
    let root = Path::new("/sim");
    let mut s = spec("Ranges", root);
    s.files[1] = file(
        "Ranges_log",
        root.join("Ranges_log.ldf"),
        FileType::Log,
        1024,
    );
    let mut db = Database::create(&ctx(&fs, true, &Quiet), &s).unwrap();
    let tree = heap_and_tree(&mut db)[1];
    insert_scrambled(&mut db, &[tree], 2000);
    let (all, _) = seek_keys(&mut db, tree, &KeyRange::all(), usize::MAX);
    let x = db.begin_xact();
    let rows = db.scan_rows(tree).unwrap();
    for (rid, rec) in rows.iter().step_by(7) {
        db.now(|d| d.delete_row_at(x, tree, (*rid, rec))).unwrap();
    }
    db.commit_xact(x).unwrap();
    let ghost = |i: usize| i.is_multiple_of(7);
    let mut next = xorshift_from(0x5eed);
    for i in 0..200 {
        let (a, b) = (all[(next() % 2000) as usize], (next() % 1_000_003) as u32);
        let (lo, hi) = match i % 4 {
            0 => (a, a),
            _ => (a.min(b), a.max(b)),
        };
        let range = KeyRange {
            lower: bound(2, lo),
            upper: bound(1 + next() % 2, hi),
        };
        let is_in = |k: u32| inside(k, &range.lower, true) && inside(k, &range.upper, false);
        let live_in: Vec<u32> = (0..all.len())
            .filter(|&j| !ghost(j) && is_in(all[j]))
            .map(|j| all[j])
            .collect();
        let mut want: Vec<Option<u32>> = (0..all.len())
            .filter(|&j| ghost(j) && is_in(all[j]))
            .map(|j| Some(all[j]))
            .collect();
        let past = (0..all.len()).find(|&j| !ghost(j) && all[j] >= hi && !is_in(all[j]));
        let point_found = i % 4 == 0 && !live_in.is_empty();
        if !point_found {
            want.push(past.map(|j| all[j]));
        }
        let mut gate = RangeGate::default();
        let origin = db.scan_origin(tree).unwrap();
        let mut at = ScanPosition::Start;
        while at != ScanPosition::End {
            let chunk = db
                .seek_chunk(tree, origin, (&range, &at), 2048, Some(&mut gate))
                .unwrap();
            at = chunk.next;
        }
        // A chunk resumes after its last row: the ghosts after it show again (the
        // caller's lock on them is held already).
        gate.ranges.dedup();
        assert_eq!(gate.rows, live_in, "range {i}: {range:?}");
        assert_eq!(gate.ranges, want, "range {i}: {range:?}");
    }
    // Inserts: the first live key after the new one, ghosts skipped.
    let mut live: Vec<u32> = (0..all.len())
        .filter(|&j| !ghost(j))
        .map(|j| all[j])
        .collect();
    let x = db.begin_xact();
    for _ in 0..50 {
        let k = (next() % 1_100_000) as u32;
        if all.contains(&k) || live.contains(&k) {
            continue;
        }
        let want = live.iter().copied().find(|&l| l > k);
        let mut refused = RangeGate {
            refuse: true,
            ..RangeGate::default()
        };
        let r = db.now(|d| {
            d.insert_row(
                x,
                tree,
                (&common::row(k, b"new"), d.growth_env()),
                Some(&mut refused),
            )
        });
        assert!(
            matches!(r, Err(extentdb_storage::StorageError::RowRefused)),
            "{r:?}"
        );
        assert_eq!(
            (refused.ranges.as_slice(), refused.rows.len()),
            (&[want][..], 0)
        );
        let (keys, _) = seek_keys(
            &mut db,
            tree,
            &KeyRange {
                lower: bound(2, k),
                upper: bound(2, k),
            },
            1 << 20,
        );
        assert!(keys.is_empty(), "a refused insert changed nothing");
        let mut gate = RangeGate::default();
        db.now(|d| {
            d.insert_row(
                x,
                tree,
                (&common::row(k, b"new"), d.growth_env()),
                Some(&mut gate),
            )
        })
        .unwrap();
        assert_eq!((gate.ranges, gate.rows), (vec![want], vec![k]));
        live.insert(live.partition_point(|&l| l < k), k);
    }
    db.commit_xact(x).unwrap();
}

fn xorshift_from(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}
