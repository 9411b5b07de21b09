//! The log cut at every sector boundary, with the data path: a workload of committed,
//! rolled-back and still-open transactions is written while the buffer pool holds every
//! data page change (the data files get only the allocation pages and catalog, written
//! synchronously), then for each 512-byte boundary of
//! the log written meanwhile a copy of the database is made with the log zeroed from that
//! boundary on (the sectors after it never reached the disk) and opened. The table must hold
//! exactly the transactions whose COMMIT block lies wholly before the cut.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod common;
use common::{ctx, file, spec, Quiet};

use extentdb_format::catalog::{ColumnEntry, TableEntry};
use extentdb_format::file_header::FileType;
use extentdb_format::record::{self, ColumnLayout};
use extentdb_format::Lsn;
use extentdb_io::os::OsFileSystem;
use extentdb_storage::Database;

const LAYOUT: [ColumnLayout; 2] = [ColumnLayout::Fixed(4), ColumnLayout::Variable];

fn table() -> TableEntry {
    let col = |id: u16, ty: u8, len: i16| ColumnEntry {
        column_id: id,
        name: format!("c{id}"),
        system_type_id: ty,
        max_length: len,
        precision: 0,
        scale: 0,
        is_nullable: true,
        identity: None,
        default_sql: String::new(),
        computed: None,
    };
    TableEntry {
        object_id: 0,
        schema_name: "dbo".into(),
        name: "Cut".into(),
        created_us: 0,
        data_space_id: 1,
        allocation_unit_id: 0,
        index_id: 0,
        root_page: extentdb_format::PageId::NULL,
        primary_key: None,
        columns: vec![col(1, 56, 4), col(2, 165, 8000)],
        identity_last: Default::default(),
        lock_escalation: Default::default(),
        pending_ddl: None,
        index_of: None,
        checks: Vec::new(),
        foreign_keys: Vec::new(),
        is_disabled: false,
    }
}

fn row(k: u32, v: &[u8]) -> Vec<u8> {
    record::encode(&LAYOUT, &[Some(&k.to_le_bytes()), Some(v)]).unwrap()
}

fn contents(db: &mut Database, t: u32) -> BTreeMap<u32, Vec<u8>> {
    db.scan_rows(t)
        .unwrap()
        .into_iter()
        .map(|(_, rec)| {
            let c = record::decode(&LAYOUT, &rec).unwrap();
            (
                u32::from_le_bytes(c[0].unwrap().try_into().unwrap()),
                c[1].unwrap().to_vec(),
            )
        })
        .collect()
}

/// Proves recovery from a log cut at any sector boundary gives exactly the transactions
/// committed before the cut.
#[test]
fn log_cut_at_every_sector_boundary() {
    let dir = std::env::temp_dir().join(format!("xdb-logcut-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fs = OsFileSystem::new();
    let mut s = spec("Cut", &dir);
    s.files[1] = file("Cut_log", dir.join("Cut_log.ldf"), FileType::Log, 1024);
    let mut db = Database::create(&ctx(fs.as_ref(), true, &Quiet), &s).unwrap();
    let t = db.create_table(table()).unwrap();
    db.checkpoint().unwrap();
    let start = std::fs::read(dir.join("Cut_log.ldf")).unwrap();
    // States after each commit, keyed by the commit's LSN.
    let mut model = BTreeMap::new();
    let mut commits: Vec<(Lsn, BTreeMap<u32, Vec<u8>>)> = Vec::new();
    let mut x_seed = 12345u64;
    let mut next = || {
        x_seed ^= x_seed << 13;
        x_seed ^= x_seed >> 7;
        x_seed ^= x_seed << 17;
        x_seed
    };
    for i in 0..40u32 {
        let x = db.begin_xact();
        let mut after = model.clone();
        for j in 0..1 + next() % 3 {
            let k = i * 10 + j as u32;
            // Bytes that do not compress, so the log spans many sectors.
            let len = 1 + (next() % 700) as usize;
            let v: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            db.now(|d| d.insert_row(x, t, (&row(k, &v), d.growth_env()), None))
                .unwrap();
            after.insert(k, v);
        }
        if i % 4 == 3 {
            // Delete the oldest row in the same transaction.
            let (rid, rec) = db.scan_rows(t).unwrap().into_iter().next().unwrap();
            let k = u32::from_le_bytes(
                record::decode(&LAYOUT, &rec).unwrap()[0]
                    .unwrap()
                    .try_into()
                    .unwrap(),
            );
            db.now(|d| d.delete_row_at(x, t, (rid, &rec))).unwrap();
            after.remove(&k);
        }
        if i % 7 == 6 {
            db.rollback_xact(x).unwrap();
            continue;
        }
        let lsn = db.commit_xact(x).unwrap().unwrap();
        db.wal().unwrap().flush(lsn).unwrap();
        model = after;
        commits.push((lsn, model.clone()));
    }
    // A transaction left open: never visible after any cut.
    let x = db.begin_xact();
    db.now(|d| d.insert_row(x, t, (&row(999_999, b"open"), d.growth_env()), None))
        .unwrap();
    db.wal()
        .unwrap()
        .flush(Lsn {
            vlf_sequence: u32::MAX,
            block: 0,
            slot: 0,
        })
        .unwrap();
    assert!(db.buffer_pool_usage().1 > 0, "changes are only in the pool");
    let vlfs = db.vlfs().unwrap();
    // Dropped without a checkpoint: the data files hold what was written synchronously
    // (allocation pages, catalog) and none of the pool's data pages.
    drop(db);
    let snapshot: Vec<(PathBuf, Vec<u8>)> = vec![(
        dir.join("Cut.mdf"),
        std::fs::read(dir.join("Cut.mdf")).unwrap(),
    )];
    let log = std::fs::read(dir.join("Cut_log.ldf")).unwrap();
    // The byte range the workload wrote: from the first differing sector to the last.
    let first = (0..log.len()).find(|&i| log[i] != start[i]).unwrap() / 512 * 512;
    let end = (0..log.len()).rev().find(|&i| log[i] != start[i]).unwrap() / 512 * 512 + 512;
    // Where each commit's block ends in the file.
    let block_end = |l: Lsn| -> usize {
        let v = vlfs.iter().find(|v| v.sequence == l.vlf_sequence).unwrap();
        let at = v.start_offset as usize + l.block as usize * 512;
        at + log[at + 3] as usize * 512
    };
    let cut_dir = dir.join("cut");
    let mut checked = 0;
    for cut in (first..=end).step_by(512) {
        let _ = std::fs::remove_dir_all(&cut_dir);
        std::fs::create_dir_all(&cut_dir).unwrap();
        for (p, bytes) in &snapshot {
            std::fs::write(cut_dir.join(p.file_name().unwrap()), bytes).unwrap();
        }
        let mut cut_log = log.clone();
        cut_log[cut..end].copy_from_slice(&start[cut..end]);
        std::fs::write(cut_dir.join("Cut_log.ldf"), &cut_log).unwrap();
        // The catalog names the original paths: open the copy through them by swapping.
        let want = commits
            .iter()
            .rev()
            .find(|(l, _)| block_end(*l) <= cut)
            .map(|(_, m)| m.clone())
            .unwrap_or_default();
        let got = open_copy(&dir, &cut_dir, t);
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "cut at byte {cut}"
        );
        assert_eq!(got, want, "cut at byte {cut}");
        checked += 1;
    }
    assert!(checked > 50, "only {checked} cuts");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Opens the database from the files in `copy` (moved into `orig`'s paths, which the
/// catalog names) and returns the table's contents.
fn open_copy(orig: &Path, copy: &Path, t: u32) -> BTreeMap<u32, Vec<u8>> {
    for n in ["Cut.mdf", "Cut_log.ldf"] {
        std::fs::copy(copy.join(n), orig.join(n)).unwrap();
    }
    let fs = OsFileSystem::new();
    let mut db = Database::open(fs.as_ref(), &orig.join("Cut.mdf")).unwrap();
    contents(&mut db, t)
}
