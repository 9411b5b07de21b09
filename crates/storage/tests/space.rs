//! Space accounting (`space.rs`) against the allocation maps and the rows written: the
//! figures behind FILEPROPERTY, sys.dm_db_file_space_usage, DBCC SHOWFILESTATS and
//! sp_spaceused must add up.

mod common;
use common::{ctx, file, row, table_entry, Quiet};
use std::path::Path;

use extentdb_format::catalog::{RecoveryModel, TableEntry};
use extentdb_format::file_header::FileType;
use extentdb_io::sim::{Faults, SimFileSystem};
use extentdb_storage::space::UnitSpace;
use extentdb_storage::{Database, NewDatabase};

fn two_file_db(root: &Path) -> NewDatabase {
    NewDatabase {
        name: "Space".into(),
        database_id: 5,
        recovery_model: RecoveryModel::Full,
        files: vec![
            file("s1", root.join("s1.mdf"), FileType::Rows, 640),
            file("slog", root.join("slog.ldf"), FileType::Log, 256),
            file("s2", root.join("s2.ndf"), FileType::Rows, 640),
        ],
        filegroups: vec![],
    }
}

fn named(mut t: TableEntry, name: &str) -> TableEntry {
    t.name = name.into();
    t
}

fn space_of(db: &mut Database, object_id: u32) -> UnitSpace {
    let au = db.table_by_id(object_id).unwrap().allocation_unit_id;
    db.unit_space(au).unwrap()
}

/// Proves, on two data files with a heap and a clustered table of 400 rows each, that every
/// allocated extent is a fixed extent, the catalog's or a table's (the invariant of
/// `space.rs`), that user-object extents are the tables' reserved pages, that used pages
/// fit in the reserved ones, that rows are counted (ghosts not) while deleted rows keep
/// their pages, and that the one log file holds all of the log in use.
#[test]
fn figures_add_up() {
    let fs = SimFileSystem::new(7, Faults::default());
    let mut db =
        Database::create(&ctx(&fs, true, &Quiet), &two_file_db(Path::new("/sim"))).unwrap();
    let heap = db.create_table(named(table_entry(false), "H")).unwrap();
    let tree = db.create_table(named(table_entry(true), "C")).unwrap();
    let x = db.begin_xact();
    for k in 0..400 {
        db.now(|d| d.insert_row(x, heap, (&row(k, &[7; 500]), d.growth_env()), None))
            .unwrap();
        db.now(|d| d.insert_row(x, tree, (&row(k, &[9; 500]), d.growth_env()), None))
            .unwrap();
    }
    db.commit_xact(x).unwrap();

    let tables = [space_of(&mut db, heap), space_of(&mut db, tree)];
    assert_eq!(tables.map(|s| s.rows), [400, 400]);
    assert!(
        tables[1].index_pages >= 1,
        "the clustered index has a level above its leaves"
    );
    assert_eq!(tables[0].index_pages, 0, "a heap has no index pages");
    let system = db.system_space().unwrap();
    let files = db.data_file_space().unwrap();
    let pages = |extents: u32| extents as u64 * 8;
    let allocated: u64 = files.iter().map(|f| pages(f.allocated_extents)).sum();
    let tables_reserved: u64 = tables.iter().map(|s| s.reserved_pages).sum();
    let reserved = tables_reserved + system.reserved_pages;
    assert_eq!(allocated, reserved + db.fixed_extent_pages());
    let user: u64 = files.iter().map(|f| pages(f.user_object_extents)).sum();
    assert_eq!(user, tables_reserved);
    let used: u64 = tables.iter().map(|s| s.used_pages()).sum::<u64>() + system.used_pages();
    assert!(
        used <= reserved,
        "{used} used pages outside {reserved} reserved"
    );
    for f in &files {
        assert_eq!(f.allocated_extents + f.free_extents, f.total_extents);
    }

    let x = db.begin_xact();
    for (rid, rec) in db.scan_rows(heap).unwrap().into_iter().take(10) {
        db.now(|d| d.delete_row_at(x, heap, (rid, &rec))).unwrap();
    }
    db.commit_xact(x).unwrap();
    let after = space_of(&mut db, heap);
    assert_eq!(after.rows, 390);
    assert_eq!(
        after.data_pages, tables[0].data_pages,
        "ghosts keep their pages"
    );

    let log_pages = db.log_space().1.div_ceil(8192);
    assert_eq!(db.log_file_used_pages().unwrap().get(&2), Some(&log_pages));
}
