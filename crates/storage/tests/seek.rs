//! Seeks (scan.rs invariant 4): `seek_chunk` over a clustered index split everywhere
//! returns exactly the live rows whose keys lie in the range, in key order, whatever the
//! bounds (included, excluded, unbounded, on a key or between keys) and however small the
//! chunks; a point seek reads one page per level.

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
