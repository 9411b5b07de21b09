//! Format fixtures: each on-disk structure is encoded from fixed values and compared byte for
//! byte (as a hex dump of its non-zero lines) with a file under tests/fixtures/, then decoded
//! back. A change to the format fails here until docs/FORMAT.md and the fixture change
//! together. `UPDATE_GOLDEN=1 cargo test -p extentdb-format` rewrites the fixtures.

use extentdb_format::bitmap::{self, new_bitmap_page};
use extentdb_format::boot::BootPage;
use extentdb_format::catalog::{
    self, Catalog, ColumnEntry, DatabaseEntry, FileEntry, FilegroupEntry, IdentityLast,
    LockEscalation, RecoveryModel, TableEntry, UserAccess,
};
use extentdb_format::file_header::{FileHeader, FileType};
use extentdb_format::principals::{
    PermissionClass, PermissionEntry, PermissionState, PrincipalEntry, PrincipalKind,
};
use extentdb_format::{iam, pfs, Lsn, Page, PageId, PageNo, PageType};

/// Renders a page as `offset: hex` lines, skipping all-zero 16-byte lines.
fn dump(p: &Page) -> String {
    let mut s = String::new();
    for (i, chunk) in p.bytes().chunks(16).enumerate() {
        if chunk.iter().any(|&b| b != 0) {
            let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
            s.push_str(&format!("{:04x}: {}\n", i * 16, hex.join(" ")));
        }
    }
    s
}

fn check(name: &str, p: &Page) {
    let path = format!("{}/tests/fixtures/{name}.hex", env!("CARGO_MANIFEST_DIR"));
    let got = dump(p);
    if std::env::var("UPDATE_GOLDEN").is_ok() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(got, want, "{name} differs from {path}");
}

/// Pins the file header layout (FORMAT.md, "File header").
#[test]
fn file_header_fixture() {
    let h = FileHeader {
        database_guid: [0x11; 16],
        file_id: 3,
        file_type: FileType::Rows,
        created_us: 1_700_000_000_000_000,
    };
    let p = h.encode();
    check("file_header", &p);
    assert_eq!(p.verify(PageId::new(3, 0)), Ok(PageType::FileHeader));
    assert_eq!(FileHeader::decode(&p, PageId::new(3, 0)).unwrap(), h);
    assert_eq!(&p.bytes()[96..104], b"XDBFILE\0");
    assert_eq!(p.bytes()[126], 0, "file type at offset 126");
}

/// Pins the boot page layout (FORMAT.md, "Boot page").
#[test]
fn boot_page_fixture() {
    let b = BootPage {
        generation: 7,
        database_guid: [0x22; 16],
        database_version: 957,
        name: "Company".into(),
        created_us: 1_700_000_000_000_000,
        checkpoint_lsn: Lsn {
            vlf_sequence: 0x25,
            block: 0x190,
            slot: 1,
        },
        last_checkdb_us: 0,
        catalog_first_page: PageId::new(1, 16),
        catalog_bytes: 300,
        catalog_crc: 0xdead_beef,
        min_recovery_lsn: Lsn {
            vlf_sequence: 36,
            block: 7,
            slot: 2,
        },
        log_backup_lsn: Lsn::ZERO,
        differential_base_lsn: Lsn::ZERO,
        differential_base_guid: [0; 16],
    };
    let at = PageId::new(1, 9);
    let p = b.encode(at).unwrap();
    check("boot_page", &p);
    assert_eq!(BootPage::decode(&p, at).unwrap(), b);
    assert_eq!(
        u64::from_le_bytes(p.bytes()[108..116].try_into().unwrap()),
        7,
        "generation at 108"
    );
    assert_eq!(
        u32::from_le_bytes(p.bytes()[132..136].try_into().unwrap()),
        957,
        "version at 132"
    );
    assert_eq!(
        &p.bytes()[178..185],
        b"Company",
        "name at 176 after its length"
    );
    // The last clean CHECKDB (written by DBCC CHECKDB) at 154.
    let checked = BootPage {
        last_checkdb_us: 1_790_000_000_123_456,
        ..b
    };
    let p = checked.encode(at).unwrap();
    assert_eq!(
        i64::from_le_bytes(p.bytes()[154..162].try_into().unwrap()),
        1_790_000_000_123_456,
        "last clean CHECKDB at 154"
    );
    assert_eq!(BootPage::decode(&p, at).unwrap(), checked);
    // The backup fields: the log chain's next LSN at 700, the differential base at 710 and
    // its BackupSetGUID at 720 (zero in pages written before them: no chain, no base).
    let chained = BootPage {
        log_backup_lsn: Lsn {
            vlf_sequence: 40,
            block: 16,
            slot: 3,
        },
        differential_base_lsn: Lsn {
            vlf_sequence: 38,
            block: 80,
            slot: 0,
        },
        differential_base_guid: [0x5a; 16],
        ..checked
    };
    let p = chained.encode(at).unwrap();
    let b = p.bytes();
    assert_eq!(u32::from_le_bytes(b[700..704].try_into().unwrap()), 40);
    assert_eq!(u32::from_le_bytes(b[704..708].try_into().unwrap()), 16);
    assert_eq!(u16::from_le_bytes(b[708..710].try_into().unwrap()), 3);
    assert_eq!(u32::from_le_bytes(b[710..714].try_into().unwrap()), 38);
    assert_eq!(u32::from_le_bytes(b[714..718].try_into().unwrap()), 80);
    assert_eq!(&b[720..736], &[0x5a; 16]);
    assert_eq!(BootPage::decode(&p, at).unwrap(), chained);
}

/// Pins the allocation bitmap, PFS and IAM layouts.
#[test]
fn allocation_pages_fixture() {
    let mut gam = new_bitmap_page(PageType::Gam, PageId::new(1, 2));
    for e in [2u32, 3, 9, 63_903] {
        bitmap::set_bit(&mut gam, e, true);
    }
    gam.seal();
    check("gam", &gam);
    assert_eq!(gam.bytes()[194], 0b0000_1100, "bitmap at 194, LSB first");

    let mut pf = pfs::new_pfs_page(PageId::new(1, 1));
    pfs::set(
        &mut pf,
        PageNo(1),
        PageNo(8),
        pfs::ALLOCATED | pfs::IAM_PAGE,
    );
    pfs::set(&mut pf, PageNo(1), PageNo(9), pfs::ALLOCATED);
    pf.seal();
    check("pfs", &pf);
    assert_eq!(pf.bytes()[96 + 8], 0x50);

    let mut i = iam::new_iam_page(PageId::new(1, 8), 1, 0, PageId::new(1, 0));
    bitmap::set_bit(&mut i, 2, true);
    i.seal();
    check("iam", &i);
    assert_eq!(iam::start_page(&i), PageId::new(1, 0));
}

/// Pins the catalog blob and its page chain (FORMAT.md, "Catalog").
#[test]
fn catalog_fixture() {
    let c = Catalog {
        database_id: 5,
        recovery_model: RecoveryModel::Full,
        filegroups: vec![FilegroupEntry {
            data_space_id: 1,
            name: "PRIMARY".into(),
            is_default: true,
            is_autogrow_all_files: false,
            is_read_only: false,
        }],
        files: vec![
            FileEntry {
                file_id: 1,
                file_type: FileType::Rows,
                data_space_id: 1,
                name: "Company_data".into(),
                physical_name: "/d/Company_data.mdf".into(),
                size_pages: 640,
                max_size_pages: -1,
                growth: 128,
                is_percent_growth: false,
            },
            FileEntry {
                file_id: 2,
                file_type: FileType::Log,
                data_space_id: 0,
                name: "Company_log".into(),
                physical_name: "/d/Company_log.ldf".into(),
                size_pages: 1024,
                max_size_pages: 268_435_456,
                growth: 10,
                is_percent_growth: true,
            },
        ],
        allocation_units: vec![],
        next_allocation_unit_id: 72_057_594_037_927_936,
        databases: vec![
            DatabaseEntry {
                database_id: 5,
                name: "Company".into(),
                primary_file: "/d/Company_data.mdf".into(),
                created_us: 1,
                restoring: Some(vec![(1, "/d/Copy.mdf".into()), (2, "/d/Copy.ldf".into())]),
                restore_failed: false,
                offline: false,
                user_access: UserAccess::RestrictedUser,
            },
            DatabaseEntry {
                database_id: 6,
                name: "Closed".into(),
                primary_file: "/d/Closed.mdf".into(),
                created_us: 3,
                restoring: None,
                restore_failed: false,
                offline: true,
                user_access: UserAccess::SingleUser,
            },
        ],
        next_object_id: 581_577_111,
        tables: vec![TableEntry {
            object_id: 581_577_110,
            schema_name: "dbo".into(),
            name: "BigRows".into(),
            created_us: 2,
            data_space_id: 1,
            allocation_unit_id: 72_057_594_037_927_937,
            index_id: 0,
            root_page: extentdb_format::PageId::NULL,
            primary_key: Some(("PK_BigRows".into(), vec![1])),
            columns: vec![
                ColumnEntry {
                    column_id: 1,
                    name: "c1".into(),
                    system_type_id: 56,
                    max_length: 4,
                    precision: 10,
                    scale: 0,
                    is_nullable: false,
                    identity: Some((1, 1)),
                    default_sql: String::new(),
                    computed: None,
                },
                ColumnEntry {
                    column_id: 2,
                    name: "c2".into(),
                    system_type_id: 175,
                    max_length: 8000,
                    precision: 0,
                    scale: 0,
                    is_nullable: true,
                    identity: None,
                    default_sql: "('a')".into(),
                    computed: None,
                },
            ],
            identity_last: IdentityLast::Through(1_234),
            lock_escalation: LockEscalation::Auto,
            pending_ddl: None,
            index_of: None,
            checks: Vec::new(),
            foreign_keys: Vec::new(),
            is_disabled: false,
        }],
        security: extentdb_format::principals::Security {
            principals: vec![PrincipalEntry {
                principal_id: 5,
                name: "app".into(),
                kind: PrincipalKind::SqlUser,
                sid: vec![0xA1, 0xB2],
            }],
            role_members: vec![(16390, 5)],
            permissions: vec![PermissionEntry {
                class: PermissionClass::Object,
                major_id: 581_577_110,
                permission: "INSERT".into(),
                state: PermissionState::Deny,
                grantee: 5,
            }],
        },
        statistics: Vec::new(),
        modules: Vec::new(),
    };
    let blob = c.encode();
    let pages = catalog::to_pages(&blob, &[PageId::new(1, 16)]);
    check("catalog", &pages[0]);
    let (payload, next) = catalog::page_payload(&pages[0], PageId::new(1, 16)).unwrap();
    assert!(next.is_null());
    assert_eq!(Catalog::decode(payload, PageId::new(1, 16)).unwrap(), c);
    state_byte_nibbles(&c);
    older_versions_decode(&c);
    lengths_are_checked(c);
}

/// Master's state byte (FORMAT.md, "Catalog"): the state in the low nibble, the user
/// access in the high one. Company is RESTORING (1) and RESTRICTED_USER (2): 0x21; Closed is
/// OFFLINE (3) and SINGLE_USER (1): 0x13. A zero high nibble, as every version 5 blob
/// written before user access was stored has, reads MULTI_USER; a high nibble no version
/// defines is damage.
fn state_byte_nibbles(c: &Catalog) {
    let at = PageId::new(1, 16);
    let blob = c.encode();
    // The state byte follows the entry's primary file path (its last mention: the file list
    // comes first) and its created µs (i64).
    let state_at = |path: &str| {
        blob.windows(path.len())
            .rposition(|w| w == path.as_bytes())
            .map(|i| i + path.len() + 8)
            .expect("the entry's primary file")
    };
    let (company, closed) = (state_at("/d/Company_data.mdf"), state_at("/d/Closed.mdf"));
    assert_eq!(blob[company], 0x21);
    assert_eq!(blob[closed], 0x13);
    let mut zero = blob.clone();
    zero[company] = 0x01;
    zero[closed] = 0x03;
    let d = Catalog::decode(&zero, at).unwrap();
    assert!(d
        .databases
        .iter()
        .all(|e| e.user_access == UserAccess::MultiUser));
    assert!(d.databases[1].offline && d.databases[0].restoring.is_some());
    let mut bad = blob.clone();
    bad[closed] = 0x33;
    let e = Catalog::decode(&bad, at).unwrap_err().to_string();
    assert!(e.contains("unknown user access 3"), "{e}");
    bad[closed] = 0x14;
    let e = Catalog::decode(&bad, at).unwrap_err().to_string();
    assert!(e.contains("unknown state 4"), "{e}");
}

/// A version 5 blob (no identity values) decodes with BigRows' value `Unknown`, found
/// later by reading the table; a version 4 blob (no OFFLINE state; otherwise laid out as
/// version 5) still decodes, its databases online; state 3 in it is damage, never taken for
/// online (FORMAT.md, "Catalog"). Version 6 pins the identity tag after the columns: 0
/// unused, 1 and an i64, 2 unknown; any other tag is damage.
fn older_versions_decode(c: &Catalog) {
    let at = PageId::new(1, 16);
    assert_eq!(catalog::CATALOG_VERSION, 15);
    assert_eq!(&c.encode()[..2], &15u16.to_le_bytes());
    module_list(c);
    statistics_list(c);
    table_flags_byte(c);
    lock_escalation_byte(c);
    pending_ddl_mark(c);
    rebuild_mark(c);
    index_tag(c);
    check_constraint_list(c);
    foreign_key_list(c);
    computed_column_tag(c);
    let mut unknown = c.clone();
    unknown.tables[0].identity_last = IdentityLast::Unknown;
    unknown.tables[0].lock_escalation = LockEscalation::Table;
    let v5 = c.encode_version(5);
    assert_eq!(&v5[..2], &5u16.to_le_bytes());
    assert_eq!(Catalog::decode(&v5, at).unwrap(), unknown);
    // Version 5 is version 14 without the identity tag and its value (nine bytes for
    // `Through`), the lock escalation byte, the pending-DDL flags (0: no mark), the
    // index tag (0: a table), the CHECK constraint count (u16 0), the FOREIGN KEY
    // count (u16 0), each of the two columns' computed tag (0), the table's flags (0) and
    // the statistics list (u32 0) and the module list (u32 0).
    assert_eq!(
        c.encode().len(),
        v5.len() + 9 + 1 + 1 + 1 + 2 + 2 + 2 + 1 + 4 + 4
    );
    assert_eq!(Catalog::decode(&unknown.encode(), at).unwrap(), unknown);
    identity_tags(c);
    let mut online = c.clone();
    online.tables[0].lock_escalation = LockEscalation::Table;
    online.databases.retain(|d| !d.offline);
    for d in &mut online.databases {
        d.user_access = UserAccess::MultiUser;
    }
    let mut blob = online.encode_version(5);
    blob[..2].copy_from_slice(&4u16.to_le_bytes());
    online.tables[0].identity_last = IdentityLast::Unknown;
    assert_eq!(Catalog::decode(&blob, at).unwrap(), online);
    let mut blob = c.encode_version(5);
    blob[..2].copy_from_slice(&4u16.to_le_bytes());
    let e = Catalog::decode(&blob, at).unwrap_err().to_string();
    assert!(e.contains("unknown state 3"), "{e}");
}

/// Version 7's lock escalation byte follows the identity value: a version 6 blob decodes
/// as TABLE (SQL Server's default), and a code other than 0, 1, 2 is damage.
fn lock_escalation_byte(c: &Catalog) {
    let at = PageId::new(1, 16);
    assert_eq!(c.tables[0].lock_escalation, LockEscalation::Auto);
    let v6 = c.encode_version(6);
    let mut table = c.clone();
    table.tables[0].lock_escalation = LockEscalation::Table;
    assert_eq!(Catalog::decode(&v6, at).unwrap(), table);
    let blob = c.encode();
    let tag = identity_tag_at(&blob);
    assert_eq!(blob[tag + 9], 2, "AUTO after the identity value");
    let mut b = blob.clone();
    b[tag + 9] = 1;
    let mut disabled = c.clone();
    disabled.tables[0].lock_escalation = LockEscalation::Disable;
    assert_eq!(Catalog::decode(&b, at).unwrap(), disabled);
    b[tag + 9] = 3;
    let e = Catalog::decode(&b, at).unwrap_err().to_string();
    assert!(e.contains("unknown lock escalation 3"), "{e}");
}

/// Version 8's pending-DDL mark follows the lock escalation byte: flags (bit 0 created, bit
/// 1 dropped) and, when any is set, the transaction id (u64). A version 7 blob has no mark;
/// flags with an unknown bit are damage.
fn pending_ddl_mark(c: &Catalog) {
    use extentdb_format::catalog::PendingDdl;
    let at = PageId::new(1, 16);
    assert_eq!(c.tables[0].pending_ddl, None);
    let v7 = c.encode_version(7);
    assert_eq!(Catalog::decode(&v7, at).unwrap(), *c);
    let blob = c.encode();
    let tag = identity_tag_at(&blob);
    assert_eq!(blob[tag + 10], 0, "no mark after the lock escalation byte");
    let mut marked = c.clone();
    marked.tables[0].pending_ddl = Some(PendingDdl {
        xact: 0x0102_0304_0506_0708,
        created: true,
        dropped: true,
        rebuilds: None,
    });
    let b = marked.encode();
    assert_eq!(b.len(), blob.len() + 8);
    assert_eq!(b[tag + 10], 3);
    assert_eq!(
        &b[tag + 11..tag + 19],
        &0x0102_0304_0506_0708u64.to_le_bytes()
    );
    assert_eq!(Catalog::decode(&b, at).unwrap(), marked);
    for bad in [8u8, 16] {
        let mut d = b.clone();
        d[tag + 10] = bad;
        let e = Catalog::decode(&d, at).unwrap_err().to_string();
        assert!(e.contains("unknown pending DDL flags"), "{e}");
    }
}

/// Bit 2 of the pending-DDL flags (format version log 14) marks a clustered index
/// rebuild's new tree: the rebuilt table's object id (u32) follows the transaction id. A
/// mark naming no clustered table, or on an entry its transaction did not create, is
/// damage.
fn rebuild_mark(c: &Catalog) {
    use extentdb_format::catalog::PendingDdl;
    let at = PageId::new(1, 16);
    let mut base = c.clone();
    base.tables[0].index_id = 1;
    base.tables[0].root_page = PageId::new(1, 40);
    let table = base.tables[0].object_id;
    let mut tree = base.tables[0].clone();
    tree.object_id = base.next_object_id;
    base.next_object_id += 1;
    tree.root_page = PageId::new(1, 48);
    tree.identity_last = IdentityLast::Unused;
    tree.columns[0].identity = None;
    tree.pending_ddl = Some(PendingDdl {
        xact: 7,
        created: true,
        dropped: false,
        rebuilds: Some(table),
    });
    base.tables.push(tree);
    let b = base.encode();
    assert_eq!(Catalog::decode(&b, at).unwrap(), base);
    let mut mark = vec![5u8];
    mark.extend(7u64.to_le_bytes());
    mark.extend(table.to_le_bytes());
    assert!(
        b.windows(mark.len()).any(|w| w == mark),
        "flags 5, xact, table id"
    );
    let mut heap = base.clone();
    heap.tables[0].index_id = 0;
    heap.tables[0].root_page = PageId::NULL;
    let e = Catalog::decode(&heap.encode(), at).unwrap_err().to_string();
    assert!(e.contains("names no clustered table"), "{e}");
    let mut dropped = base.clone();
    dropped.tables[1].pending_ddl.as_mut().unwrap().dropped = true;
    let e = Catalog::decode(&dropped.encode(), at)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("is not a clustered tree its transaction created"),
        "{e}"
    );
}

/// Version 9's index tag follows the pending-DDL mark: 0 for a table; for a nonclustered
/// index's entry 1, then the base object id u32, index id u16, flags u8 (bit 0 unique, bit 1
/// unique constraint), key and included counts u16, and the sources (u16 count, u16 each).
/// A version 8 blob has no tag; an unknown tag or flag is damage, and so is an index whose
/// base table is missing.
fn index_tag(c: &Catalog) {
    use extentdb_format::catalog::IndexOf;
    let at = PageId::new(1, 16);
    let v8 = c.encode_version(8);
    assert_eq!(Catalog::decode(&v8, at).unwrap(), *c);
    let blob = c.encode();
    let tag = identity_tag_at(&blob);
    assert_eq!(
        blob[tag + 11],
        0,
        "a table's tag after the pending-DDL flags"
    );
    let mut ix = c.clone();
    let mut entry = c.tables[0].clone();
    entry.object_id += 1;
    entry.name = "ix_c2".into();
    entry.identity_last = IdentityLast::Unused;
    entry.columns[0].identity = None;
    entry.columns.reverse();
    entry.index_of = Some(IndexOf {
        table_object_id: c.tables[0].object_id,
        index_id: 2,
        unique: true,
        unique_constraint: false,
        is_disabled: false,
        key_columns: 1,
        included: 0,
        sources: vec![2, 1],
    });
    ix.tables.push(entry);
    let b = ix.encode();
    let mut w = extentdb_format::codec::Writer::default();
    ix.security.encode(&mut w);
    // The principals, then (version 13) the statistics list and (version 15) the module
    // list, both empty: u32 0 each.
    let start = b.len() - w.bytes.len() - 8;
    let tail = &b[..start];
    let expect: Vec<u8> = [
        &[1u8][..],
        &581_577_110u32.to_le_bytes(),
        &2u16.to_le_bytes(),
        &[1],
        &1u16.to_le_bytes(),
        &0u16.to_le_bytes(),
        &2u16.to_le_bytes(),
        &2u16.to_le_bytes(),
        &1u16.to_le_bytes(),
        &0u16.to_le_bytes(),
        &0u16.to_le_bytes(),
        &[0],
    ]
    .concat();
    assert!(
        tail.ends_with(&expect),
        "the index tag, then no CHECK and no FOREIGN KEY constraints, and no flag"
    );
    assert_eq!(Catalog::decode(&b, at).unwrap(), ix);
    ix.check_invariants().unwrap();
    let mut d = b.clone();
    d[start - expect.len()] = 2;
    let e = Catalog::decode(&d, at).unwrap_err().to_string();
    assert!(e.contains("unknown index tag 2"), "{e}");
    let mut d = b.clone();
    d[start - expect.len() + 7] = 8;
    let e = Catalog::decode(&d, at).unwrap_err().to_string();
    assert!(e.contains("unknown index flags 8"), "{e}");
    // Bit 2: disabled (format version log 15).
    let mut d = b.clone();
    d[start - expect.len() + 7] = 5;
    let mut disabled = ix.clone();
    disabled.tables[1].index_of.as_mut().unwrap().is_disabled = true;
    assert_eq!(Catalog::decode(&d, at).unwrap(), disabled);
    assert_eq!(disabled.encode(), d);
    ix.tables[1].index_of.as_mut().unwrap().table_object_id = 7;
    assert!(ix.check_invariants().unwrap_err().contains("no base table"));
}

/// Version 10's CHECK constraints follow the index tag: u16 count, then each constraint's
/// object id u32, name, column id u16 (0 table-level), flags u8 (bit 0 disabled, bit 1 not
/// trusted, bit 2 system named) and definition. A version 9 blob has none; an unknown flag is damage, and so
/// is a constraint on a column its table lacks.
fn check_constraint_list(c: &Catalog) {
    use extentdb_format::catalog::CheckConstraint;
    let at = PageId::new(1, 16);
    let v9 = c.encode_version(9);
    assert_eq!(Catalog::decode(&v9, at).unwrap(), *c);
    let blob = c.encode_version(10);
    let tag = identity_tag_at(&blob);
    assert_eq!(
        &blob[tag + 12..tag + 14],
        &[0, 0],
        "no constraints after the tag"
    );
    let mut k = c.clone();
    k.tables[0].checks.push(CheckConstraint {
        object_id: 581_577_111,
        name: "CK_c1".into(),
        column_id: 1,
        is_disabled: false,
        is_not_trusted: true,
        is_system_named: true,
        definition: "([c1]>(0))".into(),
    });
    let b = k.encode_version(10);
    let expect: Vec<u8> = [
        &1u16.to_le_bytes()[..],
        &581_577_111u32.to_le_bytes(),
        &5u16.to_le_bytes(),
        b"CK_c1",
        &1u16.to_le_bytes(),
        &[6],
        &10u16.to_le_bytes(),
        b"([c1]>(0))",
    ]
    .concat();
    assert_eq!(&b[tag + 12..tag + 12 + expect.len()], &expect[..]);
    assert_eq!(b.len(), blob.len() + expect.len() - 2);
    assert_eq!(Catalog::decode(&b, at).unwrap(), k);
    assert_eq!(Catalog::decode(&k.encode(), at).unwrap(), k);
    let mut d = b.clone();
    d[tag + 12 + 2 + 4 + 2 + 5 + 2] = 8;
    let e = Catalog::decode(&d, at).unwrap_err().to_string();
    assert!(e.contains("unknown CHECK flags 8"), "{e}");
    k.tables[0].checks[0].column_id = 9;
    assert!(k.check_invariants().unwrap_err().contains("names column 9"));
}

/// Version 14's flags byte follows each table's FOREIGN KEY constraints: bit 0 set when the
/// table's clustered index is disabled (format version log 18). A version 12 or 13 blob
/// has no byte and decodes with every table enabled; another bit is damage, and so is the
/// mark on anything but a clustered table (invariant 15).
fn table_flags_byte(c: &Catalog) {
    let at = PageId::new(1, 16);
    let v13 = c.encode_version(13);
    assert_eq!(Catalog::decode(&v13, at).unwrap(), *c);
    assert_eq!(Catalog::decode(&c.encode_version(12), at).unwrap(), *c);
    let blob = c.encode_version(14);
    assert_eq!(blob.len(), v13.len() + 1, "one byte per table");
    let mut k = c.clone();
    k.tables[0].index_id = 1;
    k.tables[0].root_page = PageId::new(1, 80);
    k.tables[0].is_disabled = true;
    let (b, kv) = (k.encode_version(14), k.encode_version(13));
    // The byte is the one the version 13 blob lacks (the first such that is set).
    let i = (2..=kv.len())
        .find(|&i| b[2..i] == kv[2..i] && b[i + 1..] == kv[i..] && b[i] == 1)
        .expect("the flags byte");
    assert_eq!(blob[i], 0, "an enabled table's flags");
    assert_eq!(Catalog::decode(&b, at).unwrap(), k);
    let mut bad = b.clone();
    bad[i] = 2;
    let e = Catalog::decode(&bad, at).unwrap_err().to_string();
    assert!(e.contains("unknown flags 0x02"), "{e}");
    // Invariant 15: a heap is never marked.
    let mut heap = c.clone();
    heap.tables[0].is_disabled = true;
    let e = Catalog::decode(&heap.encode(), at).unwrap_err().to_string();
    assert!(e.contains("no clustered table"), "{e}");
}

/// Version 12's computed-column tag follows each column's DEFAULT text: 0 for an ordinary
/// column; 1 (computed) or 3 (computed, PERSISTED), then the definition string. A version
/// 11 blob has no tags and decodes with no computed column; another tag is damage.
fn computed_column_tag(c: &Catalog) {
    use extentdb_format::catalog::ComputedColumn;
    let at = PageId::new(1, 16);
    let v11 = c.encode_version(11);
    assert_eq!(Catalog::decode(&v11, at).unwrap(), *c);
    let blob = c.encode();
    let mut default = 5u16.to_le_bytes().to_vec();
    default.extend(b"('a')");
    let i = blob
        .windows(default.len())
        .position(|w| w == default.as_slice())
        .expect("c2's DEFAULT text");
    assert_eq!(blob[i + default.len()], 0, "an ordinary column's tag");
    let mut k = c.clone();
    k.tables[0].columns[1].default_sql = String::new();
    for (persisted, tag) in [(false, 1u8), (true, 3)] {
        k.tables[0].columns[1].computed = Some(ComputedColumn {
            definition: "([c1]*(2))".into(),
            is_persisted: persisted,
        });
        let b = k.encode();
        // c2's empty DEFAULT (u16 0) where "('a')" was, then the tag and the definition.
        let mut expect = vec![0u8, 0, tag];
        expect.extend(10u16.to_le_bytes());
        expect.extend(b"([c1]*(2))");
        assert_eq!(&b[i..i + expect.len()], &expect[..], "tag, then definition");
        assert_eq!(b.len(), blob.len() - 5 + 12);
        assert_eq!(Catalog::decode(&b, at).unwrap(), k);
        let mut bad = b.clone();
        bad[i + 2] = 2;
        let e = Catalog::decode(&bad, at).unwrap_err().to_string();
        assert!(e.contains("unknown computed tag 2"), "{e}");
    }
    // Invariant 13: a computed column with a DEFAULT is damage.
    k.tables[0].columns[1].default_sql = "('a')".into();
    let e = Catalog::decode(&k.encode(), at).unwrap_err().to_string();
    assert!(e.contains("computed column c2"), "{e}");
}

/// Version 11's FOREIGN KEY constraints follow the CHECK constraints: u16 count, then each
/// constraint's object id u32, name, referenced object id u32, key index id u16, delete and
/// update actions u8 (0 NO ACTION, 1 CASCADE, 2 SET NULL, 3 SET DEFAULT), flags u8 (bit 0
/// disabled, bit 1 not trusted, bit 2 system named), u16 pair count and (child, parent)
/// column ids u16. A version 10 blob has none; an unknown action or flag is damage, and so
/// is a pair naming a column its table lacks or a referenced table that is not there.
fn foreign_key_list(c: &Catalog) {
    use extentdb_format::catalog::{ForeignKey, ReferentialAction};
    let at = PageId::new(1, 16);
    let v10 = c.encode_version(10);
    assert_eq!(Catalog::decode(&v10, at).unwrap(), *c);
    let blob = c.encode();
    let tag = identity_tag_at(&blob);
    assert_eq!(&blob[tag + 12..tag + 16], &[0, 0, 0, 0], "no CHECK, no FK");
    let mut k = c.clone();
    let own = k.tables[0].object_id;
    k.tables[0].foreign_keys.push(ForeignKey {
        object_id: 597_577_168,
        name: "FK_c1".into(),
        referenced_object_id: own,
        key_index_id: 1,
        columns: vec![(1, 1)],
        delete_action: ReferentialAction::NoAction,
        update_action: ReferentialAction::SetNull,
        is_disabled: false,
        is_not_trusted: true,
        is_system_named: false,
    });
    let b = k.encode();
    let expect: Vec<u8> = [
        &1u16.to_le_bytes()[..],
        &597_577_168u32.to_le_bytes(),
        &5u16.to_le_bytes(),
        b"FK_c1",
        &own.to_le_bytes(),
        &1u16.to_le_bytes(),
        &[0, 2, 2],
        &1u16.to_le_bytes(),
        &1u16.to_le_bytes(),
        &1u16.to_le_bytes(),
    ]
    .concat();
    assert_eq!(&b[tag + 14..tag + 14 + expect.len()], &expect[..]);
    assert_eq!(b.len(), blob.len() + expect.len() - 2);
    assert_eq!(Catalog::decode(&b, at).unwrap(), k);
    k.check_invariants().unwrap();
    let actions = tag + 14 + 2 + 4 + 2 + 5 + 4 + 2;
    let mut d = b.clone();
    d[actions] = 3;
    let set_default = Catalog::decode(&d, at).unwrap();
    let action = set_default.tables[0].foreign_keys[0].delete_action;
    assert_eq!(action, ReferentialAction::SetDefault);
    d[actions] = 4;
    let e = Catalog::decode(&d, at).unwrap_err().to_string();
    assert!(e.contains("unknown referential action 4"), "{e}");
    let mut d = b.clone();
    d[actions + 2] = 8;
    let e = Catalog::decode(&d, at).unwrap_err().to_string();
    assert!(e.contains("unknown FOREIGN KEY flags 8"), "{e}");
    let mut bad = k.clone();
    bad.tables[0].foreign_keys[0].columns[0].0 = 9;
    assert!(bad.check_invariants().unwrap_err().contains("lack"));
    k.tables[0].foreign_keys[0].referenced_object_id = 7;
    assert!(k
        .check_invariants()
        .unwrap_err()
        .contains("missing table 7"));
}

/// Where this catalog's identity tag 1 and its value 1,234 (i64) stand in `blob`.
fn identity_tag_at(blob: &[u8]) -> usize {
    let value = 1_234i64.to_le_bytes();
    blob.windows(9)
        .position(|w| w[0] == 1 && w[1..] == value)
        .expect("tag 1 and the value")
}

/// The identity tag (version 6) sits just before the lock escalation byte (version 7) and
/// the principals: in this catalog, the value 1,234 (i64) follows tag 1.
fn identity_tags(c: &Catalog) {
    let at = PageId::new(1, 16);
    let blob = c.encode();
    let tag = identity_tag_at(&blob);
    let mut unused = c.clone();
    unused.tables[0].identity_last = IdentityLast::Unused;
    let mut b = blob[..tag].to_vec();
    b.push(0);
    b.extend_from_slice(&blob[tag + 9..]);
    assert_eq!(Catalog::decode(&b, at).unwrap(), unused);
    b[tag] = 3;
    let e = Catalog::decode(&b, at).unwrap_err().to_string();
    assert!(e.contains("unknown identity tag 3"), "{e}");
    // A table without IDENTITY keeping a value is refused (catalog.rs invariant 7).
    let mut stray = c.clone();
    stray.tables[0].columns[0].identity = None;
    assert!(Catalog::decode(&stray.encode(), at).is_err());
}

/// Invariant 5 of catalog.rs: each string at its limit passes, one character more fails.
fn lengths_are_checked(c: Catalog) {
    assert_eq!(c.check_lengths(), Ok(()));
    let at = |n: usize| "x".repeat(n);
    type Edit = fn(&mut Catalog, String);
    let cases: [(Edit, usize, &str); 6] = [
        (
            |c, s| c.tables[0].name = s,
            catalog::MAX_NAME_CHARS,
            "identifier",
        ),
        (
            |c, s| c.tables[0].columns[1].name = s,
            catalog::MAX_NAME_CHARS,
            "identifier",
        ),
        (
            |c, s| c.files[0].name = s,
            catalog::MAX_NAME_CHARS,
            "identifier",
        ),
        (
            |c, s| c.files[1].physical_name = s,
            catalog::MAX_PATH_CHARS,
            "file name",
        ),
        (
            |c, s| c.databases[0].name = s,
            catalog::MAX_NAME_CHARS,
            "identifier",
        ),
        (
            |c, s| c.tables[0].columns[1].default_sql = s,
            catalog::MAX_DEFINITION_CHARS,
            "default definition",
        ),
    ];
    for (edit, max, what) in cases {
        let mut ok = c.clone();
        edit(&mut ok, at(max));
        assert_eq!(ok.check_lengths(), Ok(()), "{what} of {max}");
        let _ = ok.encode();
        let mut long = c.clone();
        edit(&mut long, at(max + 1));
        let e = long.check_lengths().unwrap_err();
        assert_eq!((e.what, e.max), (what, max));
    }
    // Four bytes a character at the longest DEFAULT still fits the u16 length.
    let mut wide = c;
    wide.tables[0].columns[1].default_sql = "\u{1F600}".repeat(catalog::MAX_DEFINITION_CHARS);
    assert_eq!(wide.check_lengths(), Ok(()));
    let _ = wide.encode();
}

/// Pins the VLF header sector and a one-record log block (FORMAT.md, "Log file").
#[test]
fn log_fixture() {
    use extentdb_format::log::{encode_block_flags, VlfHeader, PARITY_FIRST};
    let h = VlfHeader {
        sequence: 37,
        parity: PARITY_FIRST,
        file_id: 2,
        start_offset: 8192,
        size: 2_088_960,
        create_lsn: Lsn::ZERO,
    };
    let mut p = Page::zeroed();
    p.bytes_mut()[..512].copy_from_slice(&h.encode());
    let durable = Lsn {
        vlf_sequence: 36,
        block: 4000,
        slot: 0,
    };
    let block = encode_block_flags(
        &[b"BEGIN TRAN".as_slice()],
        37,
        16,
        PARITY_FIRST,
        0,
        durable,
    );
    p.bytes_mut()[512..512 + block.len()].copy_from_slice(&block);
    check("log", &p);
    assert_eq!(&p.bytes()[..8], b"XDBVLF\0\0");
    assert_eq!(
        p.bytes()[512],
        0x40,
        "parity in byte 0 of the block's sector"
    );
    let sector = &p.bytes()[512..1024];
    assert_eq!(
        &sector[21..29],
        &[36, 0, 0, 0, 0xa0, 0x0f, 0, 0],
        "durable end at body 20"
    );
    let check = u32::from_le_bytes(sector[508..].try_into().unwrap());
    assert_eq!(
        check,
        crc32c::crc32c(&sector[..508]),
        "the sector's own check"
    );
}

/// Proves no decoder panics on hostile bytes: random pages and truncated blobs give errors.
#[test]
fn decoders_never_panic_on_garbage() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for round in 0..2000 {
        let mut p = Page::zeroed();
        for b in p.bytes_mut().iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = if round % 2 == 0 {
                x as u8
            } else {
                (x as u8) & 0x03
            };
        }
        p.bytes_mut()[0] = 1;
        p.bytes_mut()[1] = [13u8, 15, 30, 10][round % 4];
        let at = PageId::new(1, 9);
        let _ = p.verify(at);
        let _ = p.header();
        let _ = BootPage::decode(&p, at);
        let _ = FileHeader::decode(&p, at);
        let _ = catalog::page_payload(&p, at);
        let _ = iam::validate(&p, at);
        let _ = Catalog::decode(&p.bytes()[..(round * 4) % 8192], at);
        let _ = extentdb_format::log::VlfHeader::decode(&p.bytes()[..512]);
        let _ = extentdb_format::log::decode_block(
            &p.bytes()[(round % 16) * 512..],
            1,
            16,
            p.bytes()[0],
        );
        let _ = extentdb_format::log::scan_vlf(p.bytes(), 1, 0x40);
    }
}

/// Version 13's statistics list follows the permissions (FORMAT.md, "Catalog"): u32 count,
/// then each entry's object id u32, stats id u16, name, flags u8 (bit 0 user created, bit 1
/// no recompute, bit 2 built), u16 column count and ids, and for a built one the header,
/// the density vector and the steps. A version 12 blob decodes with none; an unknown flag,
/// a histogram of more than 200 steps and statistics of a missing table are damage.
fn statistics_list(c: &Catalog) {
    use extentdb_format::statistics::{HistogramStep, StatisticsData, StatisticsEntry};
    let at = PageId::new(1, 16);
    let v12 = c.encode_version(12);
    assert_eq!(Catalog::decode(&v12, at).unwrap(), *c);
    let mut k = c.clone();
    k.statistics.push(StatisticsEntry {
        object_id: 581_577_110,
        stats_id: 2,
        name: "st".into(),
        columns: vec![2],
        user_created: true,
        no_recompute: true,
        data: Some(StatisticsData {
            updated_us: 7,
            rows: 3,
            rows_sampled: 3,
            unfiltered_rows: 3,
            average_key_length: 1.0,
            density_columns: vec![2],
            densities: vec![(0.5, 1.0)],
            steps: vec![
                HistogramStep {
                    range_hi_key: None,
                    range_rows: 0.0,
                    eq_rows: 1.0,
                    distinct_range_rows: 0.0,
                },
                HistogramStep {
                    range_hi_key: Some(b"a".to_vec()),
                    range_rows: 0.0,
                    eq_rows: 2.0,
                    distinct_range_rows: 0.0,
                },
            ],
        }),
    });
    let blob = k.encode();
    let base = c.encode();
    // The module list (u32 0 here) follows the statistics (version 15).
    let stats_at = base.len() - 8;
    assert_eq!(
        &base[stats_at..stats_at + 4],
        &[0, 0, 0, 0],
        "an empty list: u32 0"
    );
    let list = &blob[stats_at..blob.len() - 4];
    let f32b = |x: f32| x.to_bits().to_le_bytes();
    let f64b = |x: f64| x.to_bits().to_le_bytes();
    let mut want = 1u32.to_le_bytes().to_vec();
    want.extend(581_577_110u32.to_le_bytes());
    want.extend(2u16.to_le_bytes());
    want.extend(2u16.to_le_bytes());
    want.extend(b"st");
    want.push(1 | 2 | 4);
    want.extend(1u16.to_le_bytes());
    want.extend(2u16.to_le_bytes());
    want.extend(7i64.to_le_bytes());
    for n in [3u64, 3, 3] {
        want.extend(n.to_le_bytes());
    }
    want.extend(f32b(1.0));
    want.extend(1u16.to_le_bytes());
    want.extend(2u16.to_le_bytes());
    want.extend(f32b(0.5));
    want.extend(f32b(1.0));
    want.extend(2u16.to_le_bytes());
    want.push(0);
    for x in [0.0, 1.0, 0.0] {
        want.extend(f64b(x));
    }
    want.push(1);
    want.extend(1u16.to_le_bytes());
    want.push(b'a');
    for x in [0.0, 2.0, 0.0] {
        want.extend(f64b(x));
    }
    assert_eq!(list, &want[..]);
    assert_eq!(Catalog::decode(&blob, at).unwrap(), k);
    let flags_at = stats_at + 4 + 4 + 2 + 2 + 2;
    let mut bad = blob.clone();
    bad[flags_at] |= 8;
    let e = Catalog::decode(&bad, at).unwrap_err().to_string();
    assert!(e.contains("unknown flags"), "{e}");
    let mut orphan = k.clone();
    orphan.statistics[0].object_id = 1;
    let e = Catalog::decode(&orphan.encode(), at)
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing table"), "{e}");
}

/// The module list (FORMAT.md, "Catalog", version 15) after the statistics: u32 count, then
/// per module its object id, schema id, name, type byte 'P', created and modified µs, flags
/// (bit 0 ANSI_NULLS, bit 1 QUOTED_IDENTIFIER, bit 2 WITH RECOMPILE), the definition as u32
/// length and UTF-8, and
/// its parameters (name, type id, max length, precision, scale, flags: bit 0 OUTPUT, bit 1
/// a default, then the default's text). A version 14 blob decodes with none; an unknown
/// type or flag, a duplicate name, a module named as a table, an id a table holds are
/// damage; a 200 KB definition round-trips, one past the bound is refused by check_lengths.
fn module_list(c: &Catalog) {
    use extentdb_format::module::{self, ModuleEntry, ModuleType, ParameterEntry};
    let at = PageId::new(1, 16);
    assert_eq!(Catalog::decode(&c.encode_version(14), at).unwrap(), *c);
    let mut k = c.clone();
    let id = k.next_object_id;
    k.next_object_id += 1;
    k.modules.push(ModuleEntry {
        object_id: id,
        schema_id: 1,
        name: "p".into(),
        module_type: ModuleType::Procedure,
        created_us: 5,
        modified_us: 6,
        definition: "CREATE PROC p @a int = 1 AS".into(),
        uses_ansi_nulls: true,
        uses_quoted_identifier: false,
        is_recompiled: true,
        parameters: vec![ParameterEntry {
            name: "@a".into(),
            system_type_id: 56,
            max_length: 4,
            precision: 10,
            scale: 0,
            is_output: true,
            default_sql: Some("1".into()),
        }],
    });
    let (base, blob) = (c.encode(), k.encode());
    assert_eq!(
        &base[base.len() - 4..],
        &[0, 0, 0, 0],
        "an empty list: u32 0"
    );
    // The next object id (u32) sits before the tables; the lists after it are as before.
    let mut want = 1u32.to_le_bytes().to_vec();
    want.extend(id.to_le_bytes());
    want.extend(1u32.to_le_bytes());
    want.extend(1u16.to_le_bytes());
    want.push(b'p');
    want.push(b'P');
    want.extend(5i64.to_le_bytes());
    want.extend(6i64.to_le_bytes());
    want.push(1 | 4);
    want.extend(27u32.to_le_bytes());
    want.extend(b"CREATE PROC p @a int = 1 AS");
    want.extend(1u16.to_le_bytes());
    want.extend(2u16.to_le_bytes());
    want.extend(b"@a");
    want.push(56);
    want.extend(4u16.to_le_bytes());
    want.extend([10, 0, 1 | 2]);
    want.extend(1u16.to_le_bytes());
    want.push(b'1');
    assert_eq!(&blob[base.len() - 4..], &want[..]);
    assert_eq!(Catalog::decode(&blob, at).unwrap(), k);
    let type_at = base.len() - 4 + 4 + 4 + 4 + 2 + 1;
    let mut bad = blob.clone();
    bad[type_at] = b'V';
    let e = Catalog::decode(&bad, at).unwrap_err().to_string();
    assert!(e.contains("has type"), "{e}");
    let mut bad = blob.clone();
    bad[type_at + 1 + 16] |= 8;
    let e = Catalog::decode(&bad, at).unwrap_err().to_string();
    assert!(e.contains("has flags"), "{e}");
    let mut twice = k.clone();
    twice.modules[0].name = "BigRows".into();
    let e = Catalog::decode(&twice.encode(), at)
        .unwrap_err()
        .to_string();
    assert!(e.contains("taken twice"), "{e}");
    let mut stolen = k.clone();
    stolen.modules[0].object_id = c.tables[0].object_id;
    let e = Catalog::decode(&stolen.encode(), at)
        .unwrap_err()
        .to_string();
    assert!(e.contains("object id in use"), "{e}");
    let mut big = k.clone();
    big.modules[0].definition = format!("CREATE PROC p AS\n{}", "-- x\n".repeat(40_000));
    assert!(big.modules[0].definition.len() > 200_000);
    assert_eq!(big.check_lengths(), Ok(()));
    assert_eq!(Catalog::decode(&big.encode(), at).unwrap(), big);
    big.modules[0].definition = "x".repeat(module::MAX_DEFINITION_BYTES + 1);
    let e = big.check_lengths().unwrap_err();
    assert_eq!(
        (e.what, e.max),
        ("procedure definition", module::MAX_DEFINITION_BYTES)
    );
}
