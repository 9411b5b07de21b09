//! DBCC SHRINKFILE (EMPTYFILE): every page of a file moves to the other files of its
//! filegroup (heap pages, B-tree pages with their sibling links and parent separators, the
//! B-tree root through the catalog), the tables read the same afterwards, REMOVE FILE then
//! succeeds; and a power cut at any I/O during the move loses and duplicates nothing.

mod common;
use common::{
    assert_checkdb_clean, ctx, file, heap_and_tree, insert_scrambled, row, spec, table_entry, Quiet,
};

use std::path::Path;

use extentdb_format::file_header::FileType;
use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_storage::{Database, StorageError};

/// Every table's rows: the heap's sorted (its scan order follows extents, which moves
/// change), the clustered table's in scan order (key order, which moves must keep).
fn contents(db: &mut Database, tables: &[u32]) -> Result<Vec<Vec<Vec<u8>>>, StorageError> {
    tables
        .iter()
        .enumerate()
        .map(|(i, &t)| {
            let mut rows: Vec<Vec<u8>> = db.scan_rows(t)?.into_iter().map(|(_, r)| r).collect();
            if i == 0 {
                rows.sort();
            }
            Ok(rows)
        })
        .collect()
}

/// Rows per table and a digest, for assertion messages.
fn summary(c: &[Vec<Vec<u8>>]) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    c.hash(&mut h);
    format!(
        "rows {:?} digest {:x}",
        c.iter().map(|t| t.len()).collect::<Vec<_>>(),
        h.finish()
    )
}

/// Asserts two table contents are equal without printing them whole.
fn same(a: &[Vec<Vec<u8>>], b: &[Vec<Vec<u8>>], what: &str) {
    assert!(a == b, "{what}: {} against {}", summary(a), summary(b));
}

/// A database with files 3 and 4 beside the primary, a heap and a clustered table of
/// `rows` rows each spread over all three files by proportional fill.
fn loaded(fs: &SimFileSystem, rows: u32) -> (Database, Vec<u32>) {
    let root = Path::new("/sim");
    let mut s = spec("Move", root);
    s.files[0].size_pages = 8 * 203;
    s.files[1].size_pages = 4096;
    let mut db = Database::create(&ctx(fs, true, &Quiet), &s).unwrap();
    let more = vec![
        file("F3", root.join("f3.ndf"), FileType::Rows, 8 * 200),
        file("F4", root.join("f4.ndf"), FileType::Rows, 8 * 200),
    ];
    db.add_files(&ctx(fs, true, &Quiet), &more).unwrap();
    // Equal free space in the three files (skip targets 1): the first root takes an extent
    // of file 1, Tree's root one of file 3, so emptying file 3 moves a root.
    let mut dummy = table_entry(true);
    dummy.name = "Dummy".into();
    db.create_table(dummy).unwrap();
    let tables = heap_and_tree(&mut db);
    insert_scrambled(&mut db, &tables, rows);
    (db, tables)
}

/// The data file holding the clustered table's root, if not the primary; else file 3.
fn file_to_empty(db: &Database) -> u16 {
    let root = db.table("dbo", "Tree").unwrap().root_page;
    if root.file.0 == 1 {
        3
    } else {
        root.file.0
    }
}

/// The logical name of file `id`.
fn file_name(db: &Database, id: u16) -> String {
    db.catalog
        .files
        .iter()
        .find(|x| x.file_id == id)
        .unwrap()
        .name
        .clone()
}

fn owned_in(db: &Database, tables: &[u32], file_id: u16) -> usize {
    tables
        .iter()
        .map(|&t| {
            let au = db
                .catalog
                .tables
                .iter()
                .find(|x| x.object_id == t)
                .unwrap()
                .allocation_unit_id;
            db.extents_of(au)
                .unwrap()
                .iter()
                .filter(|(f, _)| *f == file_id)
                .count()
        })
        .sum()
}

/// Proves EMPTYFILE moves every extent out (the root among them when it lived there),
/// the tables read the same in the same key order, REMOVE FILE then works, and all of it
/// survives a crash and a reopen.
#[test]
fn emptyfile_moves_everything_and_remove_file_follows() {
    let fs = SimFileSystem::new(9, Faults::default());
    let (mut db, tables) = loaded(&fs, 3000);
    let before = contents(&mut db, &tables).unwrap();
    let f = file_to_empty(&db);
    assert!(owned_in(&db, &tables, f) > 10, "the file holds data");
    let root_before = db.table("dbo", "Tree").unwrap().root_page;
    let stats = db.empty_file(f).unwrap();
    assert!(
        stats.extents_moved > 10 && stats.pages_moved > 50,
        "{stats:?}"
    );
    assert_eq!(owned_in(&db, &tables, f), 0);
    same(
        &contents(&mut db, &tables).unwrap(),
        &before,
        "after EMPTYFILE",
    );
    // The root lived in the emptied file (file_to_empty picks it): it moved.
    assert_eq!(root_before.file.0, f, "the test covers a root move");
    assert_ne!(
        db.table("dbo", "Tree").unwrap().root_page.file.0,
        f,
        "root moved"
    );
    // New rows go elsewhere while the file is being emptied.
    let x = db.begin_xact();
    for k in 0..200 {
        db.now(|d| {
            d.insert_row(
                x,
                tables[0],
                (&row(2_000_000 + k, &[9; 900]), d.growth_env()),
                None,
            )
        })
        .unwrap();
    }
    db.commit_xact(x).unwrap();
    assert_eq!(owned_in(&db, &tables, f), 0);
    let name = file_name(&db, f);
    db.remove_file(&fs, &name).unwrap();
    let after = contents(&mut db, &tables).unwrap();
    assert!(
        after[1] == before[1],
        "the clustered table after REMOVE FILE"
    );
    drop(db);
    fs.crash();
    let mut db = Database::open(&fs, Path::new("/sim/Move.mdf")).unwrap();
    same(
        &contents(&mut db, &tables).unwrap(),
        &after,
        "after a crash",
    );
    assert!(db.file_by_name(&name).is_none());
}

/// Proves a power cut at a seeded I/O during EMPTYFILE loses nothing and shows nothing
/// twice; a second EMPTYFILE after recovery finishes the move and REMOVE FILE works.
#[test]
fn emptyfile_survives_a_crash_at_any_io() {
    let seeds: u64 = std::env::var("XDB_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(12, |n: u64| n / 10);
    for seed in 0..seeds {
        let fs = SimFileSystem::new(seed + 100, Faults::default());
        let (mut db, tables) = loaded(&fs, 1500);
        let before = contents(&mut db, &tables).unwrap();
        let f = file_to_empty(&db);
        let cut = fs.io_count() + 5 + (seed * 97) % 600;
        fs.set_faults(Faults {
            fail_io_at: Some((cut, libc::EIO)),
            ..Default::default()
        });
        let _ = db.empty_file(f);
        drop(db);
        fs.set_faults(Faults::default());
        fs.crash();
        let mut db = Database::open(&fs, Path::new("/sim/Move.mdf"))
            .unwrap_or_else(|e| panic!("seed {seed}: reopen: {e}"));
        same(
            &contents(&mut db, &tables).unwrap(),
            &before,
            &format!("seed {seed}: the tables after the crash"),
        );
        assert_checkdb_clean(
            &db,
            &format!("seed {seed}: after the interrupted EMPTYFILE"),
        );
        db.empty_file(f)
            .unwrap_or_else(|e| panic!("seed {seed}: second EMPTYFILE: {e}"));
        assert_eq!(owned_in(&db, &tables, f), 0, "seed {seed}");
        assert_checkdb_clean(&db, &format!("seed {seed}: after EMPTYFILE again"));
        same(
            &contents(&mut db, &tables).unwrap(),
            &before,
            &format!("seed {seed}"),
        );
        let name = file_name(&db, f);
        db.remove_file(&fs, &name)
            .unwrap_or_else(|e| panic!("seed {seed}: REMOVE FILE: {e}"));
    }
}

/// Proves SHRINKFILE to a target cuts a file back to its last extent in use (never below),
/// gives the space back to the file system, keeps every row, and survives a crash; and
/// that an emptied file shrinks to its fixed pages.
#[test]
fn shrinkfile_to_a_target_gives_back_free_space_at_the_end() {
    let fs = SimFileSystem::new(21, Faults::default());
    let (mut db, tables) = loaded(&fs, 1000);
    let before = contents(&mut db, &tables).unwrap();
    let f = file_to_empty(&db);
    let size = |db: &Database, id: u16| {
        db.catalog
            .files
            .iter()
            .find(|x| x.file_id == id)
            .unwrap()
            .size_pages
    };
    // File 4 holds data up to some extent: the shrink stops there.
    let new4 = db.shrink_file(4, 8).unwrap();
    assert!(
        new4 > 8 && new4 < size(&db, 4) + 1,
        "stops at the last extent in use: {new4}"
    );
    assert_eq!(size(&db, 4), new4);
    let len = |p: &str| {
        use extentdb_io::FileSystem;
        fs.open(Path::new(p)).unwrap().len().unwrap()
    };
    assert_eq!(len("/sim/f4.ndf"), new4 as u64 * 8192);
    same(
        &contents(&mut db, &tables).unwrap(),
        &before,
        "after SHRINKFILE",
    );
    // An emptied file shrinks to its first extent (the fixed pages).
    db.empty_file(f).unwrap();
    assert_eq!(db.shrink_file(f, 0).unwrap(), 8);
    // New rows still find room (in the other files), and everything survives a crash.
    let x = db.begin_xact();
    for k in 0..100 {
        db.now(|d| {
            d.insert_row(
                x,
                tables[1],
                (&row(3_000_000 + k, &[5; 800]), d.growth_env()),
                None,
            )
        })
        .unwrap();
    }
    let lsn = db.commit_xact(x).unwrap().unwrap();
    db.wal().unwrap().flush(lsn).unwrap();
    let after = contents(&mut db, &tables).unwrap();
    drop(db);
    fs.crash();
    let mut db = Database::open(&fs, Path::new("/sim/Move.mdf")).unwrap();
    same(
        &contents(&mut db, &tables).unwrap(),
        &after,
        "after a crash",
    );
    assert_eq!(size(&db, f), 8);
    assert_eq!(size(&db, 4), new4);
}

/// Proves REBALANCE: after a new empty file joins a filegroup whose files are well used,
/// the steps move extents until the files' used fractions are within one growth increment,
/// the tables read the same, new rows go on being inserted between steps, and a power cut
/// during the steps loses nothing.
#[test]
fn rebalance_evens_out_used_fractions() {
    use extentdb_storage::page_move::rebalance_plan;
    for seed in 0..3u64 {
        let fs = SimFileSystem::new(seed + 300, Faults::default());
        let (mut db, tables) = loaded(&fs, 6000);
        let mut extra = file("F5", Path::new("/sim/f5.ndf"), FileType::Rows, 8 * 200);
        extra.growth = 0;
        db.add_files(&ctx(&fs, true, &Quiet), &[extra]).unwrap();
        let mut before = contents(&mut db, &tables).unwrap();
        let gap = |db: &Database| {
            let u = db.filegroup_usage(1).unwrap();
            let f: Vec<f64> = u.iter().map(|x| x.used as f64 / x.usable as f64).collect();
            f.iter().cloned().fold(0.0, f64::max) - f.iter().cloned().fold(1.0, f64::min)
        };
        let start_gap = gap(&db);
        if seed > 0 {
            // Power cut somewhere in the steps; recovery must keep every row.
            fs.set_faults(Faults {
                fail_io_at: Some((fs.io_count() + 20 + seed * 211, libc::EIO)),
                ..Default::default()
            });
        }
        let mut steps = 0;
        let mut k = 5_000_000;
        let outcome: Result<(), StorageError> = (|| {
            while db.rebalance_step(1)?.is_some_and(|left| left > 0) {
                steps += 1;
                // Another session's work between steps.
                let x = db.begin_xact();
                db.now(|d| d.insert_row(x, tables[0], (&row(k, &[3; 200]), d.growth_env()), None))?;
                let lsn = db.commit_xact(x)?.unwrap();
                db.wal().unwrap().flush(lsn)?;
                before[0].push(row(k, &[3; 200]));
                k += 1;
                assert!(steps < 10_000, "rebalance ends");
            }
            Ok(())
        })();
        before[0].sort();
        if seed > 0 {
            drop(db);
            fs.set_faults(Faults::default());
            fs.crash();
            let mut db = Database::open(&fs, Path::new("/sim/Move.mdf")).unwrap();
            let got = contents(&mut db, &tables).unwrap();
            // The row whose commit the cut interrupted may or may not have committed.
            let mut in_doubt = before.clone();
            in_doubt[0].push(row(k, &[3; 200]));
            in_doubt[0].sort();
            assert!(
                got == before || (outcome.is_err() && got == in_doubt),
                "seed {seed}: {} against {}",
                summary(&got),
                summary(&before)
            );
            continue;
        }
        outcome.unwrap();
        assert!(steps > 5, "extents moved: {steps}");
        let usage = db.filegroup_usage(1).unwrap();
        assert!(rebalance_plan(&usage).is_none(), "balanced: {usage:?}");
        assert!(gap(&db) < start_gap, "{} -> {}", start_gap, gap(&db));
        same(
            &contents(&mut db, &tables).unwrap(),
            &before,
            "after REBALANCE",
        );
    }
}

/// Proves REMOVE FILE takes the removed file's IAM pages out of every chain: CHECKALLOC is
/// clean after it and after a reopen, no chain names the file, and rows inserted afterwards
/// allocate; and a power cut at any I/O of REMOVE FILE leaves a database that checks clean
/// (the old chains and catalog, or the new), where a second REMOVE FILE then works.
#[test]
fn remove_file_unlinks_its_iam_pages_and_survives_a_crash_at_any_io() {
    let remove = |cut: Option<u64>| -> u64 {
        let fs = SimFileSystem::new(31, Faults::default());
        let (mut db, tables) = loaded(&fs, 1500);
        let f = file_to_empty(&db);
        db.empty_file(f).unwrap();
        let before = contents(&mut db, &tables).unwrap();
        let name = file_name(&db, f);
        let chains_with = |db: &Database| -> usize {
            tables
                .iter()
                .filter(|&&t| {
                    let au = db
                        .catalog
                        .tables
                        .iter()
                        .find(|x| x.object_id == t)
                        .unwrap()
                        .allocation_unit_id;
                    db.iam_chain(au).unwrap().len() > 1
                })
                .count()
        };
        assert!(chains_with(&db) > 0, "chains span several files");
        // REMOVE FILE's own checkpoint then has little to write: the cuts fall in the
        // chain copies, the catalog save and the frees.
        db.checkpoint().unwrap();
        let start = fs.io_count();
        if let Some(cut) = cut {
            fs.set_faults(Faults {
                fail_io_at: Some((start + cut, libc::EIO)),
                ..Default::default()
            });
        }
        let removed = db.remove_file(&fs, &name);
        let ios = fs.io_count() - start;
        if cut.is_none() {
            removed.unwrap();
            let report = db.check_alloc().unwrap();
            assert!(report.errors.is_empty(), "{:?}", report.errors);
        }
        drop(db);
        fs.set_faults(Faults::default());
        fs.crash();
        let mut db = Database::open(&fs, Path::new("/sim/Move.mdf"))
            .unwrap_or_else(|e| panic!("cut {cut:?}: reopen: {e}"));
        let report = db.check_alloc().unwrap();
        assert!(report.errors.is_empty(), "cut {cut:?}: {:?}", report.errors);
        same(
            &contents(&mut db, &tables).unwrap(),
            &before,
            &format!("cut {cut:?}: after the crash"),
        );
        if db.file_by_name(&name).is_some() {
            db.remove_file(&fs, &name)
                .unwrap_or_else(|e| panic!("cut {cut:?}: second REMOVE FILE: {e}"));
        }
        let x = db.begin_xact();
        for k in 0..300 {
            db.now(|d| {
                d.insert_row(
                    x,
                    tables[0],
                    (&row(3_000_000 + k, &[7; 900]), d.growth_env()),
                    None,
                )
            })
            .unwrap();
        }
        db.commit_xact(x).unwrap();
        let report = db.check_alloc().unwrap();
        assert!(report.errors.is_empty(), "cut {cut:?}: {:?}", report.errors);
        ios
    };
    let ios = remove(None);
    let step = (ios / 60).max(1);
    eprintln!("REMOVE FILE: {ios} I/Os, a cut every {step}");
    for cut in (0..ios).step_by(step as usize) {
        remove(Some(cut));
    }
}
