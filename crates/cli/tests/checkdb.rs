//! DBCC CHECKDB against a corruption injector: a real database (a heap and a clustered
//! index of a few thousand rows, made through `extentdb exec`) is damaged while the instance
//! is stopped, one way at a time (thirteen ways, and four to an IAM chain), and `extentdb checkdb` (and, for some, DBCC CHECKDB
//! through T-SQL on the running engine) must report each damage with SQL Server's message,
//! the object and the page; the page is then restored and the database checks clean again.
//! A seeded fuzz loop then mutates random pages in random ways and checks in-process that
//! CHECKDB always returns (no panic, no hang) and reports something whenever a page it reads
//! changed.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use extentdb_format::catalog::TableEntry;
use extentdb_format::codec::{get_u16, put_u16, put_u32};
use extentdb_format::layout::{self, BitmapKind};
use extentdb_format::{
    bitmap, iam, pfs, Page, PageId, PageNo, PageType, GAM_INTERVAL_EXTENTS, PAGE_HEADER_SIZE,
    PAGE_SIZE,
};
use extentdb_io::os::OsFileSystem;

use common::tds::Rng;
use extentdb_sql::exec::checkdb::value_check;
use extentdb_storage::check_db::{check_database, CheckOptions};
use extentdb_storage::database::open_offline;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_extentdb")
}

fn exec(dir: &Path, sql: &str) -> (i32, String) {
    common::exec_sql(dir, &[], sql)
}

fn checkdb(dir: &Path) -> (i32, String) {
    let out = Command::new(bin())
        .args(["checkdb", "--no-infomsgs", "--database", "CK", "--data-dir"])
        .arg(dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// One page of the primary file as the injector sees it.
#[derive(Debug, Clone)]
struct PageInfo {
    no: u32,
    unit: u64,
    page_type: u8,
    level: u8,
    next: PageId,
    slots: u16,
}

/// The stopped database: where its primary file is and what its pages hold.
struct Db {
    path: PathBuf,
    tables: BTreeMap<String, TableEntry>,
    pages: Vec<PageInfo>,
}

impl Db {
    fn load(dir: &Path) -> Db {
        let path = dir.join("data/CK.mdf");
        let off = open_offline(&OsFileSystem, &path).unwrap();
        let tables = off
            .catalog
            .tables
            .iter()
            .map(|t| (t.name.clone(), t.clone()))
            .collect();
        let bytes = std::fs::read(&path).unwrap();
        let pages = bytes
            .chunks(PAGE_SIZE)
            .enumerate()
            .filter_map(|(n, b)| {
                let p = Page::from_bytes(b).ok()?;
                if p.is_unformatted() {
                    return None;
                }
                let h = p.raw_header();
                Some(PageInfo {
                    no: n as u32,
                    unit: h.allocation_unit_id,
                    page_type: h.page_type,
                    level: h.level,
                    next: h.next_page,
                    slots: h.slot_count,
                })
            })
            .collect();
        Db {
            path,
            tables,
            pages,
        }
    }

    fn table(&self, name: &str) -> &TableEntry {
        &self.tables[name]
    }

    /// Pages of `table` of `page_type` and `level` with at least `min_slots` slots.
    fn pages_of(
        &self,
        table: &str,
        page_type: PageType,
        level: u8,
        min_slots: u16,
    ) -> Vec<PageInfo> {
        let au = self.table(table).allocation_unit_id;
        self.pages
            .iter()
            .filter(|p| {
                p.unit == au
                    && p.page_type == page_type as u8
                    && p.level == level
                    && p.slots >= min_slots
            })
            .cloned()
            .collect()
    }

    /// The first IAM page of `unit` (all live in the primary file).
    fn iam_page_of(&self, unit: u64) -> u32 {
        self.pages
            .iter()
            .find(|p| p.page_type == PageType::Iam as u8 && p.unit == unit)
            .unwrap()
            .no
    }

    fn read(&self, no: u32) -> Page {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::open(&self.path).unwrap();
        let mut b = vec![0u8; PAGE_SIZE];
        f.read_exact_at(&mut b, no as u64 * PAGE_SIZE as u64)
            .unwrap();
        Page::from_bytes(&b).unwrap()
    }

    fn write(&self, no: u32, p: &Page) {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.path)
            .unwrap();
        f.write_all_at(p.bytes(), no as u64 * PAGE_SIZE as u64)
            .unwrap();
        f.sync_all().unwrap();
    }

    /// Applies `change` to page `no` (resealing its checksum when `reseal`), returns a guard
    /// that puts the original back.
    fn damage(&self, no: u32, reseal: bool, change: impl FnOnce(&mut Page)) -> Restore<'_> {
        let original = self.read(no);
        let mut p = original.clone();
        change(&mut p);
        if reseal {
            p.seal();
        }
        self.write(no, &p);
        Restore {
            db: self,
            no,
            original,
        }
    }
}

struct Restore<'a> {
    db: &'a Db,
    no: u32,
    original: Page,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        self.db.write(self.no, &self.original);
    }
}

fn slot_offset(p: &Page, slot: u16) -> usize {
    get_u16(p.bytes(), PAGE_SIZE - 2 * (slot as usize + 1)) as usize
}

fn set_slot_offset(p: &mut Page, slot: u16, offset: usize) {
    put_u16(
        p.bytes_mut(),
        PAGE_SIZE - 2 * (slot as usize + 1),
        offset as u16,
    );
}

/// Runs the offline check and asserts it failed with every `expected` text in its output.
fn expect(dir: &Path, what: &str, expected: &[String]) -> String {
    let (code, out) = checkdb(dir);
    assert_eq!(code, 1, "{what}: the check must fail:\n{out}");
    for e in expected {
        assert!(
            out.contains(e.as_str()),
            "{what}: expected {e:?} in:\n{out}"
        );
    }
    out
}

fn assert_clean(dir: &Path, what: &str) {
    let (code, out) = checkdb(dir);
    assert_eq!(code, 0, "{what}: {out}");
    assert!(
        out.is_empty(),
        "{what}: NO_INFOMSGS on a clean database prints nothing: {out}"
    );
}

fn prepare(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xdb-checkdb-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (code, out) = exec(
        &dir,
        "CREATE DATABASE CK ON (NAME = CK, FILENAME = 'CK.mdf', SIZE = 8MB) \
         LOG ON (NAME = CK_log, FILENAME = 'CK_log.ldf', SIZE = 8MB); \
         USE CK; CREATE TABLE t (k int PRIMARY KEY, v varchar(600)); \
         CREATE TABLE h (a int, flag bit, v varchar(600)); \
         DECLARE @i int = 0; \
         WHILE @i < 2500 BEGIN \
           INSERT INTO t VALUES ((@i * 7919) % 100003, REPLICATE('t', 200 + @i % 300)); \
           INSERT INTO h VALUES (@i, @i % 2, REPLICATE('h', 200 + @i % 300)); \
           SET @i += 1; \
         END; \
         DBCC CHECKDB ('CK') WITH NO_INFOMSGS;",
    );
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("Msg "), "clean at first: {out}");
    dir
}

/// Proves every kind of damage the issue names is found with SQL Server's message, the
/// object and the page, and that the database checks clean once the page is restored.
#[test]
fn every_injected_corruption_is_reported() {
    let dir = prepare("inject");
    let db = Db::load(&dir);
    let (t, h) = (db.table("t").clone(), db.table("h").clone());
    let obj = |e: &TableEntry| format!("Object ID {}, index ID {}", e.object_id, e.index_id);
    assert_clean(&dir, "before any damage");

    let heap_pages = db.pages_of("h", PageType::Data, 0, 2);
    let leaves = db.pages_of("t", PageType::Data, 0, 2);
    let index_pages = db.pages_of("t", PageType::Index, 1, 3);
    assert!(heap_pages.len() > 20 && leaves.len() > 20, "enough pages");
    assert!(!index_pages.is_empty(), "the tree has an index level");
    let pid = |no: u32| PageId::new(1, no).to_string();

    // 1. A bit flipped in a data row, checksum left as it was: the page audit fails.
    {
        let p = &heap_pages[3];
        let _r = db.damage(p.no, false, |pg| {
            let off = slot_offset(pg, 0);
            pg.bytes_mut()[off + 12] ^= 0x10;
        });
        expect(
            &dir,
            "bit flip",
            &[
                "Msg 8939, Level 16, State 98".to_string(),
                format!("{}, partition ID", obj(&h)),
                format!("page {}. Test (IS_OFF (BUF_IOERR, pBUF->bstat)) failed. Values are 133129 and -4.", pid(p.no)),
                format!("Page {} could not be processed.  See other errors for details.", pid(p.no)),
            ],
        );
    }
    assert_clean(&dir, "after restoring the bit flip");

    // 2. A zeroed page followed by a page in use in its extent.
    {
        let p = heap_pages
            .iter()
            .find(|p| p.no % 8 < 7 && heap_pages.iter().any(|q| q.no == p.no + 1))
            .unwrap();
        let _r = db.damage(p.no, false, |pg| *pg = Page::zeroed());
        expect(
            &dir,
            "zeroed page",
            &[format!(
                "page ID {} contains an incorrect page ID in its page header. The PageId in the page header = (0:0).",
                pid(p.no)
            )],
        );
    }

    // 3. A torn sector: the fifth 512-byte sector of a leaf from another write.
    {
        let p = &leaves[5];
        let _r = db.damage(p.no, false, |pg| pg.bytes_mut()[2048..2560].fill(0xA5));
        expect(
            &dir,
            "torn sector",
            &[
                format!("{}, partition ID", obj(&t)),
                format!(
                    "page {}. Test (IS_OFF (BUF_IOERR, pBUF->bstat)) failed",
                    pid(p.no)
                ),
            ],
        );
    }

    // 4. A page naming another page in its header (checksum valid).
    {
        let p = &heap_pages[4];
        let _r = db.damage(p.no, true, |pg| {
            let mut hd = pg.header().unwrap();
            hd.this_page = PageId::new(1, p.no + 1000);
            pg.set_header(&hd);
        });
        expect(
            &dir,
            "wrong page id",
            &[format!(
                "{}, partition ID {}, alloc unit ID {} (type In-row data), page ID {} contains an incorrect page ID in its page header. The PageId in the page header = {}.",
                obj(&h),
                h.allocation_unit_id,
                h.allocation_unit_id,
                pid(p.no),
                pid(p.no + 1000)
            )],
        );
    }

    // 5. The GAM and an IAM disagree: an extent of t marked free in the GAM.
    let t_extent = leaves[7].no / 8;
    {
        let gam = layout::bitmap_page(BitmapKind::Gam, t_extent / GAM_INTERVAL_EXTENTS).0;
        let _r = db.damage(gam, true, |pg| {
            bitmap::set_bit(pg, t_extent % GAM_INTERVAL_EXTENTS, true)
        });
        expect(
            &dir,
            "GAM against IAM",
            &[
                "Msg 8904, Level 16, State 1".to_string(),
                format!("Extent {} in database ID", pid(t_extent * 8)),
                format!(
                    "Extent {} is allocated to 'GAM' and at least one other object.",
                    pid(t_extent * 8)
                ),
            ],
        );
    }

    // 6. An extent owned twice: t's extent also set in h's IAM page.
    {
        let h_iam = db.iam_page_of(h.allocation_unit_id);
        assert_eq!(iam::start_page(&db.read(h_iam)).file.0, 1);
        let _r = db.damage(h_iam, true, |pg| {
            bitmap::set_bit(pg, t_extent % GAM_INTERVAL_EXTENTS, true)
        });
        expect(
            &dir,
            "extent owned twice",
            &[
                format!("Extent {} in database ID", pid(t_extent * 8)),
                "is allocated by more than one allocation object.".to_string(),
                format!("is allocated to 'Object ID {}, index ID 0", h.object_id),
                format!("is allocated to 'Object ID {}, index ID 1", t.object_id),
            ],
        );
    }

    // 7. B-tree key order broken: a leaf's first two slots swapped.
    {
        let p = &leaves[9];
        let _r = db.damage(p.no, true, |pg| {
            let (a, b) = (slot_offset(pg, 0), slot_offset(pg, 1));
            set_slot_offset(pg, 0, b);
            set_slot_offset(pg, 1, a);
        });
        expect(
            &dir,
            "key order",
            &[format!(
                "{}, partition ID {}, alloc unit ID {} (type In-row data). Keys out of order on page {}, slots 0 and 1.",
                obj(&t),
                t.allocation_unit_id,
                t.allocation_unit_id,
                pid(p.no)
            )],
        );
        // The same damage through T-SQL on the running engine (the online snapshot path).
        let (_, out) = exec(&dir, "DBCC CHECKDB ('CK') WITH NO_INFOMSGS");
        assert!(out.contains("Msg 2511, Level 16"), "{out}");
        assert!(
            out.contains(
                "CHECKDB found 0 allocation errors and 1 consistency errors in database 'CK'."
            ),
            "{out}"
        );
        assert!(
            out.contains("repair_allow_data_loss is the minimum repair level"),
            "{out}"
        );
        // That start-up logged the clean check `prepare` made (SQL Server's 17573).
        let log = std::fs::read_to_string(dir.join("log/ERRORLOG")).unwrap();
        assert!(
            log.contains("CHECKDB for database 'CK' finished without errors on ")
                && log.contains("(local time). This is an informational message only; no user action is required."),
            "{log}"
        );
    }

    // 8. A broken sibling link: a leaf's next pointer skips its real successor.
    {
        let a = leaves
            .iter()
            .find(|p| {
                !p.next.is_null()
                    && leaves
                        .iter()
                        .any(|b| PageId::new(1, b.no) == p.next && !b.next.is_null())
            })
            .unwrap();
        let b = leaves
            .iter()
            .find(|b| PageId::new(1, b.no) == a.next)
            .unwrap();
        let _r = db.damage(a.no, true, |pg| {
            let mut hd = pg.header().unwrap();
            hd.next_page = b.next;
            pg.set_header(&hd);
        });
        expect(
            &dir,
            "sibling link",
            &[format!(
                "Page {} is missing a reference from previous page {}. Possible chain linkage problem.",
                pid(b.no),
                pid(a.no)
            )],
        );
    }

    // 9. A record offset pointing past the records.
    {
        let p = &heap_pages[6];
        let _r = db.damage(p.no, true, |pg| set_slot_offset(pg, 0, 0x1ff0));
        expect(
            &dir,
            "bad record offset",
            &[
                format!("page {}. Test (", pid(p.no)),
                "Slot 0, offset 0x1ff0 is invalid.".to_string(),
            ],
        );
    }

    // 10. A ghost record count that does not match the page.
    {
        let p = &heap_pages[8];
        let _r = db.damage(p.no, true, |pg| {
            let mut hd = pg.header().unwrap();
            hd.ghost_rec_count = 3;
            pg.set_header(&hd);
        });
        expect(
            &dir,
            "ghost count",
            &[format!(
                "The ghosted record count in the header (3) does not match the number of ghosted records (0) found on page {}.",
                pid(p.no)
            )],
        );
    }

    // 11. A value out of its type's range (DATA_PURITY): a bit column holding 2.
    {
        let p = &heap_pages[10];
        let _r = db.damage(p.no, true, |pg| {
            // h (a int, flag bit, v varchar): the bit is the fixed byte after the int.
            let off = slot_offset(pg, 0);
            pg.bytes_mut()[off + 8] = 2;
        });
        expect(
            &dir,
            "data purity",
            &[format!(
                "Page {}, slot 0 in object ID {}, index ID 0, partition ID {}, alloc unit ID {} (type \"In-row data\"). Column \"flag\" value is out of range for data type \"bit\".",
                pid(p.no),
                h.object_id,
                h.allocation_unit_id,
                h.allocation_unit_id
            )],
        );
    }

    // 12. A separator key above its child's keys: the parent-child key range is broken.
    {
        let p = &index_pages[0];
        let _r = db.damage(p.no, true, |pg| {
            let off = slot_offset(pg, 1);
            pg.bytes_mut()[off + 4..off + 8].copy_from_slice(&i32::MAX.to_le_bytes());
        });
        expect(
            &dir,
            "parent range",
            &[format!(
                "is not >= the key value in the parent {} slot 1.",
                pid(p.no)
            )],
        );
    }

    // 13. The PFS and an IAM page disagree: h's IAM page loses its IAM mark.
    {
        let h_iam = db.iam_page_of(h.allocation_unit_id);
        let _r = db.damage(1, true, |pg| {
            pfs::set(pg, PageNo(1), PageNo(h_iam), pfs::ALLOCATED)
        });
        expect(
            &dir,
            "PFS against IAM",
            &[format!(
                "Msg 8948, Level 16, State 6, Line 1\nDatabase error: Page {} is marked with the wrong type in PFS page (1:1). PFS status 0x40 expected 0x50.",
                pid(h_iam)
            )],
        );
    }

    assert_clean(&dir, "after every page was restored");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proves damage to an IAM chain is found with SQL Server's messages, naming both pages and
/// the object: a heap spread over two files has a chain of two IAM pages, and in turn the
/// first page's previous pointer names the second (2576), the second's previous pointer is
/// cleared (2576 naming (0:0)), the second's sequence number jumps (2577), and the first's
/// next pointer names a data page (2575). The database checks clean once each is undone.
#[test]
fn iam_chain_damage_is_reported() {
    let dir = std::env::temp_dir().join(format!("xdb-checkdb-iam-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (code, out) = exec(
        &dir,
        "CREATE DATABASE CK ON (NAME = CK, FILENAME = 'CK.mdf', SIZE = 8MB), \
         (NAME = CK2, FILENAME = 'CK2.ndf', SIZE = 8MB) \
         LOG ON (NAME = CK_log, FILENAME = 'CK_log.ldf', SIZE = 8MB); \
         USE CK; CREATE TABLE h (a int, v varchar(600)); \
         DECLARE @i int = 0; \
         WHILE @i < 1500 BEGIN INSERT INTO h VALUES (@i, REPLICATE('h', 500)); SET @i += 1; END;",
    );
    assert_eq!(code, 0, "{out}");
    let path = |file: u16| match file {
        1 => dir.join("data/CK.mdf"),
        3 => dir.join("data/CK2.ndf"),
        f => panic!("no file {f}"),
    };
    let (h, first) = {
        let off = open_offline(&OsFileSystem, &path(1)).unwrap();
        let h = off
            .catalog
            .tables
            .iter()
            .find(|t| t.name == "h")
            .unwrap()
            .clone();
        let au = off
            .catalog
            .allocation_units
            .iter()
            .find(|a| a.allocation_unit_id == h.allocation_unit_id)
            .unwrap()
            .first_iam_page;
        (h, au)
    };
    let read = |pid: PageId| {
        use std::os::unix::fs::FileExt;
        let mut b = vec![0u8; PAGE_SIZE];
        std::fs::File::open(path(pid.file.0))
            .unwrap()
            .read_exact_at(&mut b, pid.page.0 as u64 * PAGE_SIZE as u64)
            .unwrap();
        Page::from_bytes(&b).unwrap()
    };
    let write = |pid: PageId, p: &Page| {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(path(pid.file.0))
            .unwrap();
        f.write_all_at(p.bytes(), pid.page.0 as u64 * PAGE_SIZE as u64)
            .unwrap();
        f.sync_all().unwrap();
    };
    // Damages one page (resealed, so only the chain is wrong), checks, and restores it.
    let damaged = |pid: PageId, what: &str, change: &dyn Fn(&mut Page), expected: &[String]| {
        let original = read(pid);
        let mut p = original.clone();
        change(&mut p);
        p.seal();
        write(pid, &p);
        expect(&dir, what, expected);
        write(pid, &original);
    };
    let set_prev = |to: PageId| {
        move |p: &mut Page| {
            let mut hd = p.header().unwrap();
            hd.prev_page = to;
            p.set_header(&hd);
        }
    };
    let second = read(first).raw_header().next_page;
    assert!(!second.is_null(), "the heap's chain has two IAM pages");
    assert_eq!(iam::sequence(&read(second)), 1);
    let obj = format!("in object ID {}, index ID 0,", h.object_id);
    assert_clean(&dir, "before any damage");

    damaged(
        first,
        "previous pointer of the first IAM page",
        &set_prev(second),
        &[format!(
            "Msg 2576, Level 16, State 1, Line 1\nThe Index Allocation Map (IAM) page {second} \
             is pointed to by the previous pointer of IAM page {first} {obj}"
        )],
    );
    damaged(
        second,
        "previous pointer of the second IAM page",
        &set_prev(PageId::NULL),
        &[format!(
            "The Index Allocation Map (IAM) page (0:0) is pointed to by the previous pointer \
             of IAM page {second} {obj}"
        )],
    );
    damaged(
        second,
        "sequence number",
        &|p: &mut Page| put_u32(p.bytes_mut(), PAGE_HEADER_SIZE, 7),
        &[format!(
            "Msg 2577, Level 16, State 1, Line 1\nChain sequence numbers are out of order in \
             the Index Allocation Map (IAM) chain for object ID {}, index ID 0,",
            h.object_id
        ),
        format!("Page {first} with sequence number 0 points to page {second} with sequence number 7.")],
    );
    let bytes = std::fs::read(path(1)).unwrap();
    let data = bytes
        .chunks(PAGE_SIZE)
        .enumerate()
        .find_map(|(n, b)| {
            let r = Page::from_bytes(b).ok()?.raw_header();
            (r.allocation_unit_id == h.allocation_unit_id && r.page_type == PageType::Data as u8)
                .then(|| PageId::new(1, n as u32))
        })
        .expect("a data page of h in the primary file");
    damaged(
        first,
        "next pointer to a data page",
        &|p: &mut Page| {
            let mut hd = p.header().unwrap();
            hd.next_page = data;
            p.set_header(&hd);
        },
        &[format!(
            "Msg 2575, Level 16, State 1, Line 1\nThe Index Allocation Map (IAM) page {data} \
             is pointed to by the next pointer of IAM page {first} {obj}"
        )],
    );
    assert_clean(&dir, "after every page was restored");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proves CHECKDB survives any bytes: seeded random damage to random pages (bit flips,
/// random bytes with and without a valid checksum, zeroed pages, shuffled slot arrays,
/// random header fields, random allocation bits), each checked in-process with a deadline.
/// A check must return (a report, or an error for a damaged boot page or catalog), never
/// panic or hang; damage to a page of a table with its checksum left stale must be found.
#[test]
fn fuzzed_pages_never_crash_the_check() {
    let dir = prepare("fuzz");
    let db = Db::load(&dir);
    let original = std::fs::read(&db.path).unwrap();
    let iterations: u64 = std::env::var("XDB_CHECKDB_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    let seed: u64 = std::env::var("XDB_CHECKDB_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_c0de);
    let mut rng = Rng(seed);
    let units: Vec<u64> = db.tables.values().map(|t| t.allocation_unit_id).collect();
    let table_pages: Vec<u32> = db
        .pages
        .iter()
        .filter(|p| units.contains(&p.unit))
        .map(|p| p.no)
        .collect();
    let n_pages = (original.len() / PAGE_SIZE) as u64;
    // Replays one iteration only (the generator still runs through the earlier ones).
    let only: Option<u64> = std::env::var("XDB_CHECKDB_FUZZ_ONLY")
        .ok()
        .and_then(|v| v.parse().ok());
    let mut found_stale = 0;
    let started = Instant::now();
    for i in 0..iterations {
        let mut bytes = original.clone();
        let damages = 1 + rng.below(3);
        let mut stale_table_page = false;
        let mut damaged = Vec::new();
        for _ in 0..damages {
            // Mostly pages of the tables, sometimes any page (maps, catalog, boot).
            let no = if rng.below(4) > 0 {
                table_pages[rng.below(table_pages.len() as u64) as usize] as u64
            } else {
                rng.below(n_pages)
            };
            let at = no as usize * PAGE_SIZE;
            let page = &mut bytes[at..at + PAGE_SIZE];
            let kind = rng.below(7);
            if only == Some(i) {
                eprintln!("iteration {i}: page {no} damage kind {kind}");
            }
            let reseal = match kind {
                0 => {
                    // Bit flips.
                    for _ in 0..1 + rng.below(8) {
                        let b = rng.below(PAGE_SIZE as u64) as usize;
                        page[b] ^= 1 << rng.below(8);
                    }
                    rng.below(2) == 0
                }
                1 => {
                    // A run of random bytes.
                    let start = rng.below(PAGE_SIZE as u64) as usize;
                    let len = (1 + rng.below(600) as usize).min(PAGE_SIZE - start);
                    for b in &mut page[start..start + len] {
                        *b = rng.next() as u8;
                    }
                    rng.below(2) == 0
                }
                2 => {
                    page.fill(0);
                    false
                }
                3 => {
                    // The slot array shuffled or pointed anywhere.
                    for s in 0..1 + rng.below(6) as usize {
                        let pos = PAGE_SIZE - 2 * (s + 1);
                        let v = rng.below(PAGE_SIZE as u64 + 200) as u16;
                        page[pos..pos + 2].copy_from_slice(&v.to_le_bytes());
                    }
                    true
                }
                4 => {
                    // Header fields: counts, offsets, links, level, type.
                    let field =
                        [2usize, 3, 6, 8, 16, 22, 24, 32, 34, 36, 64][rng.below(11) as usize];
                    for k in 0..2 {
                        page[field + k] = rng.next() as u8;
                    }
                    true
                }
                5 => {
                    // A whole page of noise, sealed as a page of itself.
                    for b in page.iter_mut() {
                        *b = rng.next() as u8;
                    }
                    page[0] = 1;
                    true
                }
                _ => {
                    // Allocation bits anywhere in the bitmap area.
                    let b = 194 + rng.below(7988) as usize;
                    page[b] ^= 1 << rng.below(8);
                    true
                }
            };
            if reseal {
                let mut p = Page::from_bytes(page).unwrap();
                p.seal();
                page.copy_from_slice(p.bytes());
            }
            damaged.push(no as u32);
        }
        // A table page left with a checksum that does not match (a later damage may have
        // resealed an earlier one's).
        for &no in &damaged {
            let at = no as usize * PAGE_SIZE;
            let p = Page::from_bytes(&bytes[at..at + PAGE_SIZE]).unwrap();
            stale_table_page |= table_pages.contains(&no)
                && !p.is_unformatted()
                && p.raw_header().checksum != p.compute_checksum();
        }
        if only.is_some_and(|o| o != i) {
            continue;
        }
        std::fs::write(&db.path, &bytes).unwrap();
        let path = db.path.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(|| {
                let off = open_offline(&OsFileSystem, &path)?;
                let src = off.source();
                let opts = CheckOptions {
                    maxdop: 2,
                    values: Some(&value_check),
                    ..Default::default()
                };
                check_database(&src, &opts).map(|r| {
                    if only.is_some() {
                        eprintln!("{:#?}", r.findings);
                    }
                    r.findings.len()
                })
            });
            let _ = tx.send(r.map_err(|_| ()));
        });
        let result = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("seed {seed} iteration {i}: the check hung"));
        let outcome =
            result.unwrap_or_else(|_| panic!("seed {seed} iteration {i}: the check panicked"));
        if stale_table_page {
            if let Ok(n) = outcome {
                assert!(
                    n > 0,
                    "seed {seed} iteration {i}: a damaged table page went unreported"
                );
                found_stale += 1;
            }
        }
    }
    std::fs::write(&db.path, &original).unwrap();
    // Memory stays bounded whatever the bytes say (a few MB of database here): the test
    // process's peak resident set, checks included, stays far below what a runaway
    // allocation driven by a corrupt length would reach.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let peak_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    eprintln!("fuzz: peak resident set {} MB", peak_kb / 1024);
    assert!(peak_kb < 512 * 1024, "peak resident set {peak_kb} kB");
    assert_clean(&dir, "after the fuzz loop");
    eprintln!(
        "fuzz: {iterations} iterations (seed {seed}) in {:.1} s; {found_stale} with a stale checksum on a table page, all reported",
        started.elapsed().as_secs_f64()
    );
    assert!(
        only.is_some() || found_stale > 10,
        "the loop exercised stale checksums"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The last page of `pages` in allocation order (the last used page of its extent).
fn last_page(pages: &[PageInfo]) -> &PageInfo {
    pages.iter().max_by_key(|p| p.no).unwrap()
}

/// A page with a page of the same list after it in its extent (a middle page).
fn middle_page(pages: &[PageInfo]) -> &PageInfo {
    pages
        .iter()
        .find(|p| {
            p.no % 8 > 0
                && pages
                    .iter()
                    .any(|q| q.no == p.no + 1 && q.no % 8 > p.no % 8)
        })
        .unwrap()
}

/// Asserts one zeroed page of `table` (allocated in the PFS) is reported by the offline
/// check, by DBCC CHECKDB on the running engine, and that a scan of the table fails with
/// Msg 824 (in the client's output and the error log) instead of returning fewer rows.
fn assert_zeroed_page_found(dir: &Path, db: &Db, table: &str, no: u32, what: &str) {
    let e = db.table(table);
    let page = PageId::new(1, no).to_string();
    let owner = format!(
        "Object ID {}, index ID {}, partition ID {}, alloc unit ID {} (type In-row data)",
        e.object_id, e.index_id, e.allocation_unit_id, e.allocation_unit_id
    );
    let expected = [
        "Msg 8909, Level 16, State 1".to_string(),
        format!("Table error: {owner}, page ID {page} contains an incorrect page ID in its page header. The PageId in the page header = (0:0)."),
        "Msg 8928, Level 16, State 1".to_string(),
        format!("{owner}: Page {page} could not be processed.  See other errors for details."),
    ];
    let _r = db.damage(no, false, |pg| *pg = Page::zeroed());
    expect(dir, what, &expected);
    let (_, online) = exec(dir, "DBCC CHECKDB ('CK') WITH NO_INFOMSGS");
    for x in &expected {
        assert!(
            online.contains(x.as_str()),
            "{what} online: {x:?} in:\n{online}"
        );
    }
    let (_, out) = exec(dir, &format!("USE CK; SELECT COUNT(*) FROM {table};"));
    let text = format!(
        "SQL Server detected a logical consistency-based I/O error: incorrect pageid (expected 1:{no}; actual 0:0). It occurred during a read of page {page} in database ID "
    );
    let at = format!(
        " at offset 0x{:016x} in file '{}'.",
        no as u64 * PAGE_SIZE as u64,
        db.path.display()
    );
    for x in ["Msg 824, Level 24, State 2", text.as_str(), at.as_str()] {
        assert!(out.contains(x), "{what} SELECT: {x:?} in:\n{out}");
    }
    let log = std::fs::read_to_string(dir.join("log/ERRORLOG")).unwrap();
    for x in ["Error: 824, Severity: 24, State: 2.", text.as_str()] {
        assert!(log.contains(x), "{what} error log: {x:?} in:\n{log}");
    }
}

/// Proves a page the PFS marks allocated that reads as zeros is damage wherever it is: the
/// last used page of a heap's extent (which the old check took for a page never used), a
/// middle page of a heap's extent, a clustered index's leaf and non-leaf pages. Each is
/// reported by CHECKDB offline and online (8909 naming (0:0), 8928), and SELECT on the
/// table fails with 824 instead of returning fewer rows. A zeroed IAM page is found by the
/// allocation checks, and a scan of its table fails with 824 too.
#[test]
fn zeroed_allocated_pages_are_reported_and_unreadable() {
    let dir = prepare("zeroed");
    let db = Db::load(&dir);
    assert_clean(&dir, "before any damage");
    let heap = db.pages_of("h", PageType::Data, 0, 1);
    let leaves = db.pages_of("t", PageType::Data, 0, 1);
    let upper = db.pages_of("t", PageType::Index, 1, 1);
    let cases = [
        (
            "h",
            last_page(&heap).no,
            "last used page of a heap's extent",
        ),
        ("h", middle_page(&heap).no, "middle page of a heap's extent"),
        ("t", last_page(&leaves).no, "clustered index leaf page"),
        ("t", upper[0].no, "clustered index non-leaf page"),
    ];
    for (table, no, what) in cases {
        assert_zeroed_page_found(&dir, &db, table, no, what);
        assert_clean(&dir, &format!("after restoring the {what}"));
    }
    // An IAM page the PFS marks as one (0x50) that reads as zeros: the offline check names
    // it (8946, type 0; 8909, (0:0)), the table it cannot check (7965) and the extents it
    // mapped (8905); the instance opens the database and a scan of the table fails with
    // 824 naming the IAM page (iam_damage.rs has the whole account).
    let h = db.table("h");
    let iam = db.iam_page_of(h.allocation_unit_id);
    {
        let _r = db.damage(iam, false, |pg| *pg = Page::zeroed());
        let page = PageId::new(1, iam);
        expect(
            &dir,
            "zeroed IAM page",
            &[
                "Msg 8946, Level 16, State 12".to_string(),
                format!("Allocation page {page} has invalid IAM page header values. Type is 0."),
                "Msg 8909, Level 16, State 1".to_string(),
                format!("page ID {page} contains an incorrect page ID in its page header. The PageId in the page header = (0:0)."),
                "Msg 7965, Level 16, State 2".to_string(),
                format!(
                    "Could not check object ID {}, index ID 0, partition ID {au}, alloc unit ID {au} (type In-row data) due to invalid allocation (IAM) page(s).",
                    h.object_id,
                    au = h.allocation_unit_id
                ),
                "Msg 8905".to_string(),
            ],
        );
        let (_, select) = exec(&dir, "USE CK; SELECT COUNT(*) FROM h;");
        let text = format!("incorrect pageid (expected 1:{iam}; actual 0:0)");
        assert!(
            select.contains("Msg 824, Level 24, State 2") && select.contains(&text),
            "zeroed IAM page: {select}"
        );
    }
    assert_clean(&dir, "after restoring the IAM page");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A nonclustered index that no longer matches its table is reported against the table
/// (step 5 of check_db.rs): a key changed in an index row (checksum valid) is a missing
/// and an extra row (8951, 8952); an index row turned ghost is a missing one (8951 alone).
/// Restored, the database checks clean again.
#[test]
fn index_rows_that_disagree_with_their_table_are_reported() {
    let dir = prepare("index");
    let (code, out) = exec(
        &dir,
        "USE CK; CREATE INDEX h_a ON h (a); CREATE INDEX t_v ON t (v); \
         CREATE INDEX h_flag ON h (flag);",
    );
    assert_eq!(code, 0, "{out}");
    let db = Db::load(&dir);
    let (h, t) = (db.table("h").clone(), db.table("t").clone());
    assert_clean(&dir, "with the indexes");
    let leaf = db.pages_of("h_a", PageType::Data, 0, 2)[0].clone();
    let text = |table: &TableEntry, index: &str, missing: bool| {
        match missing {
        true => format!(
            "Table error: table 'dbo.{}' (ID {}). Data row does not have a matching index row in the index '{index}' (ID 2).",
            table.name, table.object_id
        ),
        false => format!(
            "Table error: table 'dbo.{}' (ID {}). Index row in index '{index}' (ID 2) does not match any data row.",
            table.name, table.object_id
        ),
    }
    };
    {
        // h_a's records: header (4 bytes), then a (int), then the RID (binary(8)).
        let _r = db.damage(leaf.no, true, |pg| {
            let off = slot_offset(pg, 0);
            pg.bytes_mut()[off + 4] ^= 0x40;
        });
        let out = expect(
            &dir,
            "changed index key",
            &[text(&h, "h_a", true), text(&h, "h_a", false)],
        );
        assert!(!out.contains("t_v"), "only h's index: {out}");
        // CHECKTABLE (table, index_id) checks that index alone: h_a (ID 2) is found
        // damaged checking index 2, and checking h_flag (ID 3) finds nothing.
        let (_, two) = exec(&dir, "USE CK; DBCC CHECKTABLE ('h', 2) WITH NO_INFOMSGS");
        assert!(two.contains(&text(&h, "h_a", true)), "{two}");
        let (_, three) = exec(&dir, "USE CK; DBCC CHECKTABLE ('h', 3) WITH NO_INFOMSGS");
        assert!(!three.contains("Table error"), "{three}");
    }
    assert_clean(&dir, "after restoring the index key");
    let leaf = db.pages_of("t_v", PageType::Data, 0, 2)[1].clone();
    {
        let _r = db.damage(leaf.no, true, |pg| {
            let off = slot_offset(pg, 1);
            let rec = &mut pg.bytes_mut()[off..];
            extentdb_format::record::set_record_type(
                rec,
                extentdb_format::record::RecordType::GhostData,
            );
        });
        let out = expect(&dir, "index row made a ghost", &[text(&t, "t_v", true)]);
        assert!(!out.contains("does not match any data row"), "{out}");
    }
    assert_clean(&dir, "after restoring the ghost");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The offline check's output and the bytes its `--stats` line says it read.
fn checkdb_with(dir: &Path, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin())
        .args(["checkdb", "--database", "CK2", "--stats", "--maxdop", "2"])
        .args(extra)
        .arg("--data-dir")
        .arg(dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let read = err
        .split_whitespace()
        .zip(err.split_whitespace().skip(1))
        .find(|(_, w)| *w == "bytes")
        .map(|(n, _)| n.to_string())
        .unwrap_or_default();
    let code = out.status.code().unwrap_or(-1);
    (
        code,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        read,
    )
}

/// Trace flag 2549 (each data file read as its own drive) changes the order of the reads
/// only: on a database of two files the check reports the same, reads the same bytes, and
/// finds nothing, online (DBCC TRACEON) and offline (`extentdb checkdb -T 2549`). A trace
/// flag extentdb does not build is refused (40517 by DBCC TRACEON, an error by -T) and
/// sets nothing; 2562 (one batch) is how every check runs, and is accepted.
#[test]
fn trace_flag_2549_reads_each_file_on_its_own() {
    let dir = std::env::temp_dir().join(format!("xdb-checkdb-tf-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (code, out) = exec(
        &dir,
        "CREATE DATABASE CK2 ON (NAME = CK2a, FILENAME = 'CK2a.mdf', SIZE = 8MB), \
         (NAME = CK2b, FILENAME = 'CK2b.ndf', SIZE = 8MB) \
         LOG ON (NAME = CK2_log, FILENAME = 'CK2_log.ldf', SIZE = 8MB); \
         USE CK2; CREATE TABLE t (k int PRIMARY KEY, v varchar(600)); \
         DECLARE @i int = 0; \
         WHILE @i < 3000 BEGIN \
           INSERT INTO t VALUES ((@i * 7919) % 100003, REPLICATE('t', 300)); SET @i += 1; \
         END; \
         SELECT name, FILEPROPERTY(name, 'SpaceUsed') FROM sys.database_files WHERE type = 0",
    );
    assert_eq!(code, 0, "{out}");
    // Proportional fill put the table in both files.
    for f in ["CK2a", "CK2b"] {
        let used: u32 = out
            .lines()
            .find(|l| l.trim_start().starts_with(f))
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or_else(|| panic!("{f}: {out}"));
        assert!(used > 40, "{f} holds {used} pages: {out}");
    }
    let (code, online) = exec(
        &dir,
        "USE CK2; DBCC CHECKDB (CK2) WITH MAXDOP = 2; \
         DBCC TRACEON (2549); DBCC CHECKDB (CK2) WITH MAXDOP = 2; \
         DBCC TRACEON (2562, -1); DBCC TRACESTATUS (-1) WITH NO_INFOMSGS; \
         DBCC TRACEON (2549, 9999)",
    );
    assert_eq!(code, 0, "{online}");
    let reports: Vec<&str> = online.split("DBCC results for 'CK2'.").skip(1).collect();
    let rows = |r: &str| -> Vec<String> {
        r.lines()
            .filter(|l| l.starts_with("There are") || l.starts_with("CHECKDB found"))
            .map(str::to_string)
            .collect()
    };
    assert!(
        rows(reports[0])
            .iter()
            .any(|l| l.contains("0 consistency errors")),
        "{online}"
    );
    assert_eq!(rows(reports[0]), rows(reports[1]), "{online}");
    assert!(online.contains("2562"), "{online}");
    assert!(
        online.contains("Msg 40517") && online.contains("trace flag 9999"),
        "{online}"
    );
    let (code, plain, plain_read) = checkdb_with(&dir, &[]);
    assert_eq!(code, 0, "{plain}");
    let (code, per_file, per_file_read) = checkdb_with(&dir, &["-T", "2549"]);
    assert_eq!(code, 0, "{per_file}");
    assert_eq!(plain, per_file);
    assert!(
        !plain_read.is_empty() && plain_read == per_file_read,
        "{plain_read} {per_file_read}"
    );
    let (code, _, _) = checkdb_with(&dir, &["-T", "9999"]);
    assert_ne!(code, 0, "-T 9999 is refused");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Proves CHECKDB evaluates computed columns as SQL Server does: a PERSISTED column's
/// stored value changed in its record (checksum valid) is computed again from the row's
/// other columns and reported (2537, "valid computed column", counted in the summary),
/// offline and through T-SQL; an index value of a column that is not PERSISTED changed in
/// its index record is a missing and an extra index row (8951, 8952), the table row's
/// index record being computed again; the database with its computed columns and their
/// index checks clean before and once each page is restored.
#[test]
fn computed_values_that_disagree_with_their_definitions_are_reported() {
    let dir = prepare("computed");
    let (code, out) = exec(
        &dir,
        "USE CK; CREATE TABLE c (k INT PRIMARY KEY, a INT NOT NULL, b INT NOT NULL, \
            p AS a * 3 + b PERSISTED, v AS a * 7 + b, pad VARCHAR(100)); \
         DECLARE @i INT = 0; WHILE @i < 400 BEGIN \
           INSERT INTO c (k, a, b, pad) VALUES (@i, @i % 37, @i % 5, REPLICATE('c', @i % 90)); \
           SET @i += 1; END; \
         CREATE INDEX c_v ON c (v);",
    );
    assert_eq!(code, 0, "{out}");
    let db = Db::load(&dir);
    let c = db.table("c").clone();
    assert_clean(&dir, "with the computed columns");
    // c's records: header (4 bytes), then k, a, b and p (ints); v is in no record.
    let page = db.pages_of("c", PageType::Data, 0, 2)[0].clone();
    {
        let _r = db.damage(page.no, true, |pg| {
            let off = slot_offset(pg, 1);
            pg.bytes_mut()[off + 16] ^= 0x10;
        });
        let text = format!(
            "Table error: object ID {}, index ID 1, partition ID {au}, alloc unit ID {au} \
             (type In-row data), page (1:{}), row 1. The record check (valid computed column) failed.",
            c.object_id,
            page.no,
            au = c.allocation_unit_id,
        );
        let out = expect(&dir, "changed PERSISTED value", std::slice::from_ref(&text));
        assert!(out.contains("Msg 2537, Level 16"), "{out}");
        assert!(!out.contains("Msg 8951"), "no index holds p: {out}");
        let (_, online) = exec(&dir, "USE CK; DBCC CHECKDB ('CK') WITH NO_INFOMSGS");
        assert!(online.contains(&text), "{online}");
        assert!(
            online.contains("CHECKDB found 0 allocation errors and 1 consistency errors"),
            "{online}"
        );
    }
    assert_clean(&dir, "after restoring the PERSISTED value");
    // c_v's records: header (4 bytes), then v (int), then the key k.
    let leaf = db.pages_of("c_v", PageType::Data, 0, 2)[0].clone();
    {
        let _r = db.damage(leaf.no, true, |pg| {
            let off = slot_offset(pg, 0);
            pg.bytes_mut()[off + 4] ^= 0x40;
        });
        let missing = format!(
            "Table error: table 'dbo.c' (ID {}). Data row does not have a matching index row in the index 'c_v' (ID 2).",
            c.object_id
        );
        let extra = format!(
            "Table error: table 'dbo.c' (ID {}). Index row in index 'c_v' (ID 2) does not match any data row.",
            c.object_id
        );
        let out = expect(&dir, "changed index value", &[missing, extra]);
        assert!(!out.contains("2537"), "the table's values are right: {out}");
    }
    assert_clean(&dir, "after restoring the index value");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proves DBCC CHECKFILEGROUP checks the tables of its filegroup only: a damaged index of
/// a PRIMARY table is found checking PRIMARY (no argument, 0, 1 or its name) and not
/// checking FG2; an index in PRIMARY of a table in FG2 is checked by neither (its table
/// is not in the filegroup being checked, as SQL Server documents), only by CHECKDB.
#[test]
fn checkfilegroup_checks_the_tables_of_its_filegroup() {
    let dir = prepare("filegroup");
    let (code, out) = exec(
        &dir,
        "ALTER DATABASE CK ADD FILEGROUP FG2; \
         ALTER DATABASE CK ADD FILE (NAME = CK2, FILENAME = 'CK2.ndf', SIZE = 4MB) TO FILEGROUP FG2; \
         USE CK; CREATE TABLE g (id int PRIMARY KEY, v int) ON FG2; \
         DECLARE @i int = 0; \
         WHILE @i < 400 BEGIN INSERT INTO g VALUES (@i, @i * 3); SET @i += 1; END; \
         CREATE INDEX g_v ON g (v) ON [PRIMARY]; CREATE INDEX h_a ON h (a);",
    );
    assert_eq!(code, 0, "{out}");
    let check = |arg: &str| exec(&dir, &format!("USE CK; DBCC CHECKFILEGROUP {arg}")).1;
    let all = check("('FG2')");
    assert!(all.contains("DBCC results for 'dbo.g'."), "{all}");
    assert!(!all.contains("DBCC results for 'dbo.h'."), "{all}");
    assert!(
        all.contains(
            "CHECKFILEGROUP found 0 allocation errors and 0 consistency errors in database 'CK'."
        ),
        "{all}"
    );
    let primary = check("");
    assert!(primary.contains("DBCC results for 'dbo.h'."), "{primary}");
    assert!(!primary.contains("DBCC results for 'dbo.g'."), "{primary}");
    assert!(check("('nope')").contains("Msg 1921"));

    let db = Db::load(&dir);
    let (h, g) = (db.table("h").clone(), db.table("g").clone());
    let missing = |t: &TableEntry, index: &str| {
        format!(
            "Table error: table 'dbo.{}' (ID {}). Data row does not have a matching index row in the index '{index}' (ID 2).",
            t.name, t.object_id
        )
    };
    let leaf = db.pages_of("h_a", PageType::Data, 0, 2)[0].clone();
    {
        let _r = db.damage(leaf.no, true, |pg| {
            let off = slot_offset(pg, 0);
            pg.bytes_mut()[off + 4] ^= 0x40;
        });
        for arg in [
            "WITH NO_INFOMSGS",
            "(0) WITH NO_INFOMSGS",
            "('PRIMARY') WITH NO_INFOMSGS",
        ] {
            let out = check(arg);
            assert!(out.contains(&missing(&h, "h_a")), "{arg}: {out}");
        }
        let out = check("('FG2') WITH NO_INFOMSGS");
        assert!(!out.contains("Table error"), "{out}");
    }
    let leaf = db.pages_of("g_v", PageType::Data, 0, 2)[0].clone();
    {
        let _r = db.damage(leaf.no, true, |pg| {
            let off = slot_offset(pg, 0);
            pg.bytes_mut()[off + 4] ^= 0x40;
        });
        for arg in ["('FG2') WITH NO_INFOMSGS", "(1) WITH NO_INFOMSGS"] {
            let out = check(arg);
            assert!(!out.contains("Table error"), "{arg}: {out}");
        }
        expect(&dir, "g_v damaged", &[missing(&g, "g_v")]);
    }
    assert_clean(&dir, "after restoring the pages");
    let _ = std::fs::remove_dir_all(&dir);
}
