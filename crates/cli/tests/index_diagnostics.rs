//! Index diagnostics a DBA uses, through real TDS sessions: DBCC CHECKDB naming each row a
//! nonclustered index and its table disagree on (8951 + 8955, 8952 + 8956), counted as SQL
//! Server counts them and with REPAIR_REBUILD as the minimum repair level. The damage is
//! made on purpose: an index leaf record's key bytes changed in a stopped server's file
//! (the page's checksum resealed, so only the rows disagree).

mod common;
use common::tds::{run, Server};

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use extentdb_format::codec::get_u16;
use extentdb_format::{Page, PageType, PAGE_SIZE};
use extentdb_io::os::OsFileSystem;
use extentdb_sql::exec::Output;
use extentdb_storage::database::open_offline;

/// Stops the server cleanly (SIGTERM: a checkpoint) and keeps its directory.
fn stop(mut s: Server) -> PathBuf {
    // SAFETY: kill(2) on the child's own pid.
    unsafe { libc::kill(s.child.id() as i32, libc::SIGTERM) };
    let status = s.child.wait().unwrap();
    assert!(status.success(), "clean stop: {status:?}");
    let dir = std::mem::replace(&mut s.dir, "/nonexistent-xdb".into());
    drop(s);
    dir
}

/// The first leaf page in key order (a data page of level 0 with rows and no previous
/// page) of catalog entry `name` in the primary file.
fn first_leaf(mdf: &Path, name: &str) -> u32 {
    let off = open_offline(&OsFileSystem, mdf).unwrap();
    let au = off
        .catalog
        .tables
        .iter()
        .find(|t| t.name == name)
        .unwrap()
        .allocation_unit_id;
    let bytes = std::fs::read(mdf).unwrap();
    bytes
        .chunks(PAGE_SIZE)
        .enumerate()
        .find_map(|(n, b)| {
            let p = Page::from_bytes(b).ok()?;
            let h = p.raw_header();
            let leaf = h.page_type == PageType::Data as u8 && h.level == 0 && h.slot_count > 0;
            let leaf = leaf && h.prev_page == extentdb_format::PageId::NULL;
            (!p.is_unformatted() && h.allocation_unit_id == au && leaf).then_some(n as u32)
        })
        .unwrap()
}

fn read_page(mdf: &Path, no: u32) -> Page {
    let mut b = vec![0u8; PAGE_SIZE];
    std::fs::File::open(mdf)
        .unwrap()
        .read_exact_at(&mut b, no as u64 * PAGE_SIZE as u64)
        .unwrap();
    Page::from_bytes(&b).unwrap()
}

fn write_page(mdf: &Path, no: u32, p: &Page) {
    let f = std::fs::OpenOptions::new().write(true).open(mdf).unwrap();
    f.write_all_at(p.bytes(), no as u64 * PAGE_SIZE as u64)
        .unwrap();
    f.sync_all().unwrap();
}

/// Slot `slot`'s record of `p`.
fn record(p: &Page, slot: u16) -> &[u8] {
    let off = get_u16(p.bytes(), PAGE_SIZE - 2 * (slot as usize + 1)) as usize;
    &p.bytes()[off..]
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// Every message of a response: errors as "Msg N, Level L: text", informational
/// messages as "Msg N: text".
fn messages(outputs: &[Output]) -> Vec<String> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Error(e) => Some(format!(
                "Msg {}, Level {}: {}",
                e.number, e.severity, e.text
            )),
            Output::Info(e) => Some(format!("Msg {}: {}", e.number, e.text)),
            _ => None,
        })
        .collect()
}

/// Proves CHECKDB names each disagreeing row as SQL Server does. D holds a heap h (id, a)
/// with index h_a on a, and a clustered table t (k PRIMARY KEY, a) with index t_a on a.
/// In the stopped server's file, the key of h_a's and t_a's first leaf record (a = 0) gets
/// its sign bit (resealed; it stays first in key order, so only the rows disagree). CHECKDB over TDS then reports, per index, 8951 + 8955 for the data row
/// (its RID or clustered key, and the index values it should have) and 8952 + 8956 for
/// the changed index row (its values, and the data row its locator names), two
/// consistency errors per table, four in the database, repair_rebuild as the minimum
/// repair level; a second session's CHECKTABLE sees the same; the repaired file (original
/// page back) checks clean.
#[test]
fn checkdb_names_each_row_an_index_and_its_table_disagree_on() {
    let s = Server::start("ixdiag-checkdb", &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "CREATE DATABASE D ON (NAME = D, FILENAME = 'D.mdf', SIZE = 8MB) \
         LOG ON (NAME = D_log, FILENAME = 'D_log.ldf', SIZE = 8MB)",
    );
    run(
        &mut c,
        "USE D; SET NOCOUNT ON; CREATE TABLE h (id int, a int); \
         CREATE TABLE t (k int PRIMARY KEY, a int); DECLARE @i int = 0; \
         WHILE @i < 500 BEGIN INSERT INTO h VALUES (@i, @i * 3); \
           INSERT INTO t VALUES (@i, @i * 5); SET @i += 1; END; \
         CREATE INDEX h_a ON h (a); CREATE INDEX t_a ON t (a);",
    );
    drop(c);
    let dir = stop(s);
    let mdf = dir.join("data/D.mdf");
    // Index records: a 4-byte header, a (int), then the locator (h: the RID as page u32,
    // file u16, slot u16; t: k).
    let (h_leaf, t_leaf) = (first_leaf(&mdf, "h_a"), first_leaf(&mdf, "t_a"));
    let (h_orig, t_orig) = (read_page(&mdf, h_leaf), read_page(&mdf, t_leaf));
    let (h_rec, t_rec) = (record(&h_orig, 0).to_vec(), record(&t_orig, 0).to_vec());
    let (h_a, t_a, t_k) = (i32_at(&h_rec, 4), i32_at(&t_rec, 4), i32_at(&t_rec, 8));
    let rid = format!(
        "HEAP RID = ({}:{}:{})",
        u16::from_le_bytes([h_rec[12], h_rec[13]]),
        u32::from_le_bytes(h_rec[8..12].try_into().unwrap()),
        u16::from_le_bytes([h_rec[14], h_rec[15]])
    );
    let rid_place = rid.trim_start_matches("HEAP RID = ").to_string();
    for (no, orig) in [(h_leaf, &h_orig), (t_leaf, &t_orig)] {
        let mut p = orig.clone();
        let off = get_u16(p.bytes(), PAGE_SIZE - 2) as usize;
        p.bytes_mut()[off + 7] ^= 0x80;
        p.seal();
        write_page(&mdf, no, &p);
    }

    let s = Server::start_in(dir, &[]);
    let mut c = s.connect();
    let r = c.batch("DBCC CHECKDB ('D') WITH NO_INFOMSGS").unwrap();
    let got = messages(&r.outputs);
    let ids = common::tds::table(
        &mut c,
        "USE D; SELECT OBJECT_ID('dbo.h'), OBJECT_ID('dbo.t')",
    );
    let ids: Vec<&str> = ids[0].split(',').collect();
    let (h_id, t_id) = (ids[0], ids[1]);
    let want = [
        format!("Msg 8951, Level 16: Table error: table 'dbo.h' (ID {h_id}). Data row does not have a matching index row in the index 'h_a' (ID 2). Possible missing or invalid keys for the index row matching:"),
        format!("Msg 8955, Level 16: Data row {} identified by ({rid}) with index values 'a = {h_a} and {rid}'.", rid_place),
        format!("Msg 8952, Level 16: Table error: table 'dbo.h' (ID {h_id}). Index row in index 'h_a' (ID 2) does not match any data row. Possible extra or invalid keys for:"),
        format!("Msg 8956, Level 16: Index row (1:{h_leaf}:0) with values (a = {} and {rid}) pointing to the data row identified by ({rid}).", h_a ^ i32::MIN),
        format!("Msg 8990: CHECKDB found 0 allocation errors and 2 consistency errors in table 'dbo.h' (object ID {h_id})."),
        format!("Msg 8951, Level 16: Table error: table 'dbo.t' (ID {t_id}). Data row does not have a matching index row in the index 't_a' (ID 2). Possible missing or invalid keys for the index row matching:"),
        format!("Msg 8952, Level 16: Table error: table 'dbo.t' (ID {t_id}). Index row in index 't_a' (ID 2) does not match any data row. Possible extra or invalid keys for:"),
        format!("Msg 8956, Level 16: Index row (1:{t_leaf}:0) with values (a = {} and k = {t_k}) pointing to the data row identified by (k = {t_k}).", t_a ^ i32::MIN),
        format!("Msg 8990: CHECKDB found 0 allocation errors and 2 consistency errors in table 'dbo.t' (object ID {t_id})."),
        "Msg 8989: CHECKDB found 0 allocation errors and 4 consistency errors in database 'D'.".to_string(),
        "Msg 8958: repair_rebuild is the minimum repair level for the errors found by DBCC CHECKDB (D).".to_string(),
    ];
    for w in &want {
        assert!(got.contains(w), "expected {w:?} in:\n{}", got.join("\n"));
    }
    // t's 8955 names the data row by its clustered key.
    let t55 = format!("identified by (k = {t_k}) with index values 'a = {t_a} and k = {t_k}'.");
    assert!(
        got.iter()
            .any(|m| m.starts_with("Msg 8955") && m.ends_with(&t55)),
        "{got:?}"
    );
    let counted = got
        .iter()
        .filter(|m| m.starts_with("Msg 8951") || m.starts_with("Msg 8952"))
        .count();
    assert_eq!(counted, 4, "{got:?}");
    assert_eq!(
        got.iter()
            .filter(|m| m.starts_with("Msg 89") && m.contains("Level 16"))
            .count(),
        8
    );

    // Another session's CHECKTABLE of h alone sees the same rows.
    let mut other = s.connect_to(Some("D"));
    let r = other
        .batch("DBCC CHECKTABLE ('h') WITH NO_INFOMSGS")
        .unwrap();
    let one = messages(&r.outputs);
    assert!(one.contains(&want[1]) && one.contains(&want[3]), "{one:?}");
    assert!(
        one.iter()
            .any(|m| m.contains("repair_rebuild is the minimum repair level")),
        "{one:?}"
    );
    drop((c, other));
    let dir = stop(s);
    write_page(&mdf, h_leaf, &h_orig);
    write_page(&mdf, t_leaf, &t_orig);
    let s = Server::start_in(dir, &[]);
    let mut c = s.connect();
    common::tds::assert_checkdb_clean(&mut c, "D", "with the pages restored");
}

/// Leaf pages of catalog entry `name` (data pages of level 0 of its unit), and its root.
fn leaves_and_root(mdf: &Path, name: &str) -> (Vec<u32>, u32) {
    let off = open_offline(&OsFileSystem, mdf).unwrap();
    let t = off.catalog.tables.iter().find(|t| t.name == name).unwrap();
    let bytes = std::fs::read(mdf).unwrap();
    let leaves = bytes
        .chunks(PAGE_SIZE)
        .enumerate()
        .filter_map(|(n, b)| {
            let p = Page::from_bytes(b).ok()?;
            let h = p.raw_header();
            let leaf = h.page_type == PageType::Data as u8 && h.level == 0 && h.slot_count > 0;
            (!p.is_unformatted() && h.allocation_unit_id == t.allocation_unit_id && leaf)
                .then_some(n as u32)
        })
        .collect();
    (leaves, t.root_page.page.0)
}

/// The column names and rows of the only result set of a response.
fn grid(outputs: &[Output]) -> (Vec<String>, Vec<Vec<extentdb_sql::types::Value>>) {
    let sets: Vec<_> = outputs
        .iter()
        .filter_map(|o| match o {
            Output::Rows { columns, rows } => Some((
                columns.iter().map(|c| c.0.clone()).collect::<Vec<_>>(),
                rows.clone(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(sets.len(), 1, "one result set: {outputs:?}");
    sets.into_iter().next().unwrap()
}

/// Proves DBCC PAGE (db, 1, page, 3) of index pages gives SQL Server's grid after the
/// header. D: a heap h (id, a) with index h_a on a, and t (k PRIMARY KEY, a), 600 rows
/// each (two leaves and a root per index). h_a's leaf: FileId, PageId, Row, Level,
/// "a (key)", "HEAP RID (key)", KeyHashValue, Row Size, one row per record, a ascending
/// from 0; h_a's root (level 1): ChildFileId / ChildPageId naming exactly h_a's leaves;
/// t's root: "k (key)" and its children t's leaves. The header (3604) names the base
/// table's object id and index id 2. A data page at option 3 keeps its text form and no
/// result set; options 1 and 2 of an index page print dumps, no result set.
#[test]
fn dbcc_page_prints_index_pages_rows_as_a_grid() {
    let s = Server::start("ixdiag-page", &[]);
    let mut c = s.connect();
    run(
        &mut c,
        "CREATE DATABASE D ON (NAME = D, FILENAME = 'D.mdf', SIZE = 8MB) \
         LOG ON (NAME = D_log, FILENAME = 'D_log.ldf', SIZE = 8MB)",
    );
    run(
        &mut c,
        "USE D; SET NOCOUNT ON; CREATE TABLE h (id int, a int); \
         CREATE TABLE t (k int PRIMARY KEY, a int); DECLARE @i int = 0; \
         WHILE @i < 600 BEGIN INSERT INTO h VALUES (@i, @i * 3); \
           INSERT INTO t VALUES (@i, @i * 5); SET @i += 1; END; \
         CREATE INDEX h_a ON h (a); CREATE INDEX t_a ON t (a);",
    );
    drop(c);
    let dir = stop(s);
    let mdf = dir.join("data/D.mdf");
    let (h_leaves, h_root) = leaves_and_root(&mdf, "h_a");
    let (t_leaves, t_root) = leaves_and_root(&mdf, "t");
    let (h_data, _) = leaves_and_root(&mdf, "h");
    assert!(
        h_leaves.len() >= 2 && t_leaves.len() >= 2,
        "{h_leaves:?} {t_leaves:?}"
    );
    let leaf = first_leaf(&mdf, "h_a");

    let s = Server::start_in(dir, &[]);
    let mut c = s.connect_to(Some("D"));
    run(&mut c, "DBCC TRACEON (3604)");
    let page = |c: &mut extentdb_tds::client::Client, no: u32, opt: u8| {
        run(c, &format!("DBCC PAGE ('D', 1, {no}, {opt})")).outputs
    };
    let ids = common::tds::table(&mut c, "SELECT OBJECT_ID('dbo.h')");
    let r = page(&mut c, leaf, 3);
    let text = messages(&r).join("\n");
    assert!(
        text.contains(&format!("Metadata: ObjectId = {}", ids[0])),
        "{text}"
    );
    assert!(text.contains("Metadata: IndexId = 2"), "{text}");
    assert!(!text.contains("DATA:"), "{text}");
    let (cols, rows) = grid(&r);
    assert_eq!(
        cols,
        [
            "FileId",
            "PageId",
            "Row",
            "Level",
            "a (key)",
            "HEAP RID (key)",
            "KeyHashValue",
            "Row Size"
        ]
    );
    use extentdb_sql::types::Value;
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(
            row[..4],
            [
                Value::Int(1),
                Value::Int(leaf as i32),
                Value::Int(i as i32),
                Value::Int(0)
            ]
        );
        assert_eq!(row[4], Value::Int(3 * i as i32), "a ascending from 0");
        assert!(
            matches!(&row[5], Value::Binary(b) if b.len() == 8),
            "{row:?}"
        );
        assert!(
            matches!(&row[6], Value::Text(h) if h.len() == 14 && h.starts_with('(')),
            "{row:?}"
        );
        assert!(matches!(row[7], Value::Int(n) if n > 16), "{row:?}");
    }
    assert!(rows.len() > 100, "{}", rows.len());

    for (root, leaves, key) in [
        (h_root, &h_leaves, "a (key)"),
        (t_root, &t_leaves, "k (key)"),
    ] {
        let (cols, rows) = grid(&page(&mut c, root, 3));
        let mut want = vec![
            "FileId",
            "PageId",
            "Row",
            "Level",
            "ChildFileId",
            "ChildPageId",
            key,
        ];
        if key == "a (key)" {
            want.push("HEAP RID (key)");
        }
        want.push("Row Size");
        assert_eq!(cols, want);
        let mut children: Vec<u32> = rows
            .iter()
            .map(|r| {
                assert_eq!((&r[3], &r[4]), (&Value::Int(1), &Value::Int(1)), "{r:?}");
                common::tds::int(&r[5]) as u32
            })
            .collect();
        children.sort();
        assert_eq!(&children, leaves, "the root names exactly the leaves");
    }

    let data = page(&mut c, h_data[0], 3);
    assert!(
        data.iter().all(|o| !matches!(o, Output::Rows { .. })),
        "a data page: text"
    );
    assert!(
        messages(&data).join("\n").contains("a = "),
        "columns printed"
    );
    for opt in [1, 2] {
        let r = page(&mut c, leaf, opt);
        assert!(
            r.iter().all(|o| !matches!(o, Output::Rows { .. })),
            "option {opt}"
        );
        assert!(
            messages(&r).join("\n").contains("Memory Dump"),
            "option {opt}"
        );
    }
}

/// Proves a DBCC option the command does not read is refused, never accepted unheard:
/// OPENTRAN's TABLERESULTS and WAIT_AT_LOW_PRIORITY (SHRINKFILE's, not PAGE's) with
/// 40517, a word no DBCC command takes with 2526; NO_INFOMSGS still works everywhere and
/// DBINFO WITH TABLERESULTS still gives its rows, as LOGINFO and SQLPERF do theirs (DBCC
/// PAGE's TABLERESULTS: `dbcc_page_tableresults.rs`).
#[test]
fn dbcc_options_not_read_are_refused() {
    let s = Server::start("ixdiag-options", &[]);
    let mut c = s.connect();
    let refused = |c: &mut extentdb_tds::client::Client, sql: &str| {
        let r = c.batch(sql).unwrap();
        let e: Vec<_> = r.errors().map(|e| (e.number, e.text.clone())).collect();
        assert_eq!(e.len(), 1, "{sql}: {e:?}");
        e[0].clone()
    };
    let not_yet = |what: &str| (40517, format!("extentdb does not support {what} yet."));
    assert_eq!(
        refused(&mut c, "DBCC PAGE (1, 1, 0, 0) WITH WAIT_AT_LOW_PRIORITY"),
        not_yet("DBCC PAGE WITH WAIT_AT_LOW_PRIORITY")
    );
    assert_eq!(
        refused(&mut c, "DBCC OPENTRAN WITH TABLERESULTS, NO_INFOMSGS"),
        not_yet("DBCC OPENTRAN WITH TABLERESULTS")
    );
    assert_eq!(refused(&mut c, "DBCC LOGINFO WITH NO_SUCH_OPTION").0, 2526);
    let r = run(&mut c, "DBCC PAGE (1, 1, 0, 0) WITH NO_INFOMSGS");
    assert_eq!(r.errors().count(), 0);
    let r = run(&mut c, "DBCC DBINFO WITH TABLERESULTS");
    assert!(r.outputs.iter().any(|o| matches!(o, Output::Rows { .. })));
    // A command whose output is a table already takes TABLERESULTS as asking for it.
    for sql in ["DBCC LOGINFO", "DBCC SQLPERF(LOGSPACE)"] {
        let plain = run(&mut c, sql);
        let tabled = run(&mut c, &format!("{sql} WITH TABLERESULTS"));
        let shape = |r: &extentdb_tds::client::Response| {
            r.outputs
                .iter()
                .filter(|o| matches!(o, Output::Rows { .. }))
                .count()
        };
        assert_eq!((shape(&plain), shape(&tabled)), (1, 1), "{sql}");
    }
}
