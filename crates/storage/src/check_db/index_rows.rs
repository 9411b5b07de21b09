//! Step 5's findings row by row (check_db's module docs): for each nonclustered index whose
//! order-free sums and its table's differ, which rows differ. SQL Server reports, per data
//! row without its index row, 8951 followed by 8955 (the data row, its locator and the index
//! values it should have), and per index row no data row matches, 8952 followed by 8956 (the
//! index row, its values and the data row its locator names).
//!
//! How, in bounded memory (only for an index whose sums differ, after the main scan; the
//! `CheckSource` is a point-in-time view, so pages read again read the same):
//! 1. One pass over the table's and the index's pages sums each side's record hashes into
//!    `BUCKETS` buckets by the hash's top bits: a bucket whose sides differ holds every
//!    differing record (a record's hash decides its bucket on both sides).
//! 2. The differing buckets are cut into groups of at most `GROUP_BUDGET` records (a bucket
//!    is never split). Per group, one more pass tallies each record hash of the group's
//!    buckets (+1 per projected data row, -1 per index row), with one place of each side:
//!    a hash left above zero is a data row whose index row is missing, below zero an index
//!    row that matches no data row. Memory: the buckets, one group's tallies and the places
//!    of at most `limit` findings per side.
//! 3. The first `limit` findings (CheckOptions::detail_limit) are printed, their rows read
//!    again by place and their values rendered by the SQL layer (`ValueText`); past the
//!    limit, 8986 says how many were found, and the rest are counted unprinted
//!    (`CheckDbReport::unprinted`), so the summaries count every one.
//!
//! Invariants:
//! 1. A record counts here exactly when it counts in step 5's sums (the same pages, the
//!    same live records, the same projection and hash), so the findings and the sums agree:
//!    sums that differ give at least one finding, barring a 64-bit hash collision.
//! 2. Detail messages (8955, 8956, 8986) are never counted as errors (`counted`).

use std::collections::HashMap;

use extentdb_format::catalog::{ColumnEntry, TableEntry};
use extentdb_format::record;
use extentdb_format::{Page, PageId, PageType, PageView, PAGES_PER_EXTENT};

use super::{page_records, read_run, Context, Finding, Gathered, IndexRows, Owner, Run};
use super::{RowSums, TableInfo};
use crate::index::{project, rid_of_bytes};
use crate::table::layouts;

/// Buckets of pass 1 (the hash's top 12 bits).
const BUCKETS: usize = 4096;
/// Records one tally pass holds at most (a few tens of bytes each).
const GROUP_BUDGET: u64 = 200_000;
/// Findings printed per index unless ALL_ERRORMSGS (SQL Server's 200 errors per object).
pub const DEFAULT_DETAIL_LIMIT: usize = 200;

/// A stored value as SQL Server prints it in a message (`5`, `'x'`). Supplied by the SQL
/// layer, which owns the value encodings.
pub type ValueText = dyn Fn(&ColumnEntry, &[u8]) -> String + Sync;

/// The messages that detail another finding: never counted as errors (invariant 2).
pub const DETAIL_MESSAGES: [u32; 3] = [8955, 8956, 8986];

/// Whether finding `f` counts as an error in the summaries.
pub fn counted(f: &Finding) -> bool {
    !DETAIL_MESSAGES.contains(&f.number)
}

/// A record's hash, as step 5's sums and the tallies take it.
pub(super) fn record_hash(rec: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    rec.hash(&mut h);
    h.finish()
}

fn bucket(h: u64) -> usize {
    (h >> 52) as usize
}

/// A data row (expected: its projection) or an index row (found).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Data,
    Index,
}

type Place = (PageId, u16);

/// What one index's comparison found: totals, and the places of the first findings.
#[derive(Default)]
struct Differences {
    missing: u64,
    extra: u64,
    missing_at: Vec<Place>,
    extra_at: Vec<Place>,
}

/// The findings of every checked index whose sums differ, and per table the errors found
/// but not printed.
pub(super) fn index_findings(
    ctx: &Context<'_>,
    runs: &[Run],
    rows: &HashMap<u64, IndexRows>,
) -> (Vec<Finding>, Vec<(u32, u64)>) {
    let (mut out, mut unprinted) = (Vec::new(), Vec::new());
    for ix in &ctx.tables {
        let au = ix.entry.allocation_unit_id;
        let Some(of) = &ix.entry.index_of else {
            continue;
        };
        if !ctx.checked_units.contains(&au) || !crate::index::comparable(ix.entry) {
            continue;
        }
        let r = rows.get(&au).copied().unwrap_or_default();
        if r.expected == r.found {
            continue;
        }
        let base = ctx
            .tables
            .iter()
            .find(|b| b.entry.object_id == of.table_object_id && b.entry.index_of.is_none());
        let Some(base) = base else { continue };
        let d = differences(ctx, runs, base, ix);
        if d.missing + d.extra == 0 {
            // The sums differ but no row was found (a read that failed this time, or a
            // hash collision): the index is still reported, without rows.
            out.push(summary_finding(base, ix, 8951, None));
            continue;
        }
        let limit = ctx.opts.detail_limit;
        let printed = report(ctx, base, ix, &d, limit, &mut out);
        let total = d.missing + d.extra;
        if total > printed {
            let mut f = summary_finding(base, ix, 8986, None);
            f.args = vec![total.to_string(), of.table_object_id.to_string()];
            out.push(f);
            unprinted.push((of.table_object_id, total - printed));
        }
    }
    (out, unprinted)
}

/// Steps 1 and 2 of the module docs for index `ix` of table `base`.
fn differences(ctx: &Context<'_>, runs: &[Run], base: &TableInfo, ix: &TableInfo) -> Differences {
    let mut sums = vec![(RowSums::default(), RowSums::default()); BUCKETS];
    each_record(ctx, runs, base, ix, |side, h, _| {
        let b = &mut sums[bucket(h)];
        let s = if side == Side::Data {
            &mut b.0
        } else {
            &mut b.1
        };
        s.count += 1;
        s.sum = s.sum.wrapping_add(h);
        s.xor ^= h;
    });
    let mut d = Differences::default();
    let limit = ctx.opts.detail_limit;
    let mut group = vec![false; BUCKETS];
    let mut held = 0u64;
    let differing: Vec<usize> = (0..BUCKETS).filter(|&b| sums[b].0 != sums[b].1).collect();
    for (i, &b) in differing.iter().enumerate() {
        group[b] = true;
        held += sums[b].0.count + sums[b].1.count;
        let last = i + 1 == differing.len();
        if !last && held + next_size(&sums, differing.get(i + 1)) <= GROUP_BUDGET {
            continue;
        }
        tally_group(ctx, runs, base, ix, &group, limit, &mut d);
        group.iter_mut().for_each(|g| *g = false);
        held = 0;
    }
    d.missing_at.sort();
    d.extra_at.sort();
    d
}

fn next_size(sums: &[(RowSums, RowSums)], b: Option<&usize>) -> u64 {
    b.map_or(0, |&b| sums[b].0.count + sums[b].1.count)
}

/// One tally pass over the records of the buckets in `group` (module docs, step 2).
fn tally_group(
    ctx: &Context<'_>,
    runs: &[Run],
    base: &TableInfo,
    ix: &TableInfo,
    group: &[bool],
    limit: usize,
    d: &mut Differences,
) {
    // Per hash: data rows less index rows, and a place of each side.
    let mut tally: HashMap<u64, (i64, Option<Place>, Option<Place>)> = HashMap::new();
    each_record(ctx, runs, base, ix, |side, h, at| {
        if !group[bucket(h)] {
            return;
        }
        let t = tally.entry(h).or_insert((0, None, None));
        match side {
            Side::Data => {
                t.0 += 1;
                t.1.get_or_insert(at);
            }
            Side::Index => {
                t.0 -= 1;
                t.2.get_or_insert(at);
            }
        }
    });
    for (_, (balance, data, index)) in tally {
        if balance > 0 {
            d.missing += balance as u64;
            if let (Some(p), true) = (data, d.missing_at.len() < limit) {
                d.missing_at.push(p);
            }
        } else if balance < 0 {
            d.extra += balance.unsigned_abs();
            if let (Some(p), true) = (index, d.extra_at.len() < limit) {
                d.extra_at.push(p);
            }
        }
    }
}

/// Calls `f` with each live record's hash and place, as step 5 counts them (invariant
/// 1): `base`'s rows projected into `ix`, and `ix`'s own leaf records.
fn each_record(
    ctx: &Context<'_>,
    runs: &[Run],
    base: &TableInfo,
    ix: &TableInfo,
    mut f: impl FnMut(Side, u64, Place),
) {
    let mut pages: Vec<Page> = Vec::new();
    let mut scratch = Gathered::default();
    for run in runs {
        let ti = if run.unit == base.entry.allocation_unit_id {
            base
        } else if run.unit == ix.entry.allocation_unit_id {
            ix
        } else {
            continue;
        };
        let (first, count) = (
            run.first_extent * PAGES_PER_EXTENT,
            run.extents * PAGES_PER_EXTENT,
        );
        let mut ignored = Vec::new();
        if read_run(
            ctx,
            &ti.owner,
            run.file,
            first,
            count,
            &mut pages,
            &mut ignored,
        )
        .is_err()
        {
            continue;
        }
        for i in 0..count {
            let pid = PageId::new(run.file, first + i);
            for (slot, rec) in
                leaf_records(&ti.owner, ti, pid, pages[i as usize].view(), &mut scratch)
            {
                if ti.entry.index_of.is_some() {
                    f(Side::Index, record_hash(rec), (pid, slot));
                } else if let Ok(irec) = project(ix.entry, base.entry, rec, (pid, slot)) {
                    f(Side::Data, record_hash(&irec), (pid, slot));
                }
            }
        }
    }
}

/// The live records of a leaf page of `ti`'s unit that passes check_page's audit (the
/// pages whose records step 5 counts); none for any other page.
fn leaf_records<'p>(
    owner: &Owner,
    ti: &TableInfo,
    pid: PageId,
    page: PageView<'p>,
    scratch: &mut Gathered,
) -> Vec<(u16, &'p [u8])> {
    let mut records = Vec::new();
    if page.is_unformatted() || page.raw_header().checksum != page.compute_checksum() {
        return records;
    }
    if page.raw_header().this_page != pid {
        return records;
    }
    let Ok(h) = page.header() else {
        return records;
    };
    let leaf = h.page_type == PageType::Data && h.level == 0;
    if h.allocation_unit_id != owner.unit || !leaf || h.index_id as u8 != ti.entry.index_id {
        return records;
    }
    if !page_records(owner, pid, page, &h, &mut records, scratch) {
        records.clear();
    }
    scratch.findings.clear();
    records.retain(|(_, r)| !record::is_ghost(r));
    records
}

/// The record at `at`, read again (None when it no longer reads as a live record).
fn record_at(ctx: &Context<'_>, ti: &TableInfo, at: Place) -> Option<Vec<u8>> {
    let page = ctx.src.read_page(at.0).ok()?;
    let mut scratch = Gathered::default();
    let recs = leaf_records(&ti.owner, ti, at.0, page.view(), &mut scratch);
    recs.iter()
        .find(|(s, _)| *s == at.1)
        .map(|(_, r)| r.to_vec())
}

/// An 8951 / 8952 / 8986 of index `ix` of `base`, at `at` when it names a row.
fn summary_finding(base: &TableInfo, ix: &TableInfo, number: u32, at: Option<Place>) -> Finding {
    let of = ix.entry.index_of.as_ref().expect("an index");
    Finding {
        number,
        args: vec![
            format!("{}.{}", base.entry.schema_name, base.entry.name),
            of.table_object_id.to_string(),
            ix.entry.name.clone(),
            of.index_id.to_string(),
        ],
        object_id: ix.owner.object_id,
        index_id: ix.owner.index_id,
        allocation_unit_id: ix.entry.allocation_unit_id,
        allocation: false,
        page: at.map(|p| p.0),
        slot: at.map(|p| p.1),
    }
}

/// Step 3: the first `limit` findings as message pairs; returns how many were printed.
fn report(
    ctx: &Context<'_>,
    base: &TableInfo,
    ix: &TableInfo,
    d: &Differences,
    limit: usize,
    out: &mut Vec<Finding>,
) -> u64 {
    let text = Text {
        ctx,
        base: base.entry,
        ix: ix.entry,
    };
    let mut printed = 0;
    for &at in &d.missing_at {
        if printed >= limit {
            break;
        }
        let values = record_at(ctx, base, at).and_then(|rec| {
            project(ix.entry, base.entry, &rec, at)
                .ok()
                .map(|i| (rec, i))
        });
        let (identified, index_values) = match &values {
            Some((rec, irec)) => (text.data_locator(rec, at), text.index_values(irec)),
            None => (text.rid(at), String::new()),
        };
        out.push(summary_finding(base, ix, 8951, Some(at)));
        let mut detail = summary_finding(base, ix, 8955, Some(at));
        detail.args = place_args(at);
        detail.args.extend([identified, index_values]);
        out.push(detail);
        printed += 1;
    }
    for &at in &d.extra_at {
        if printed >= limit {
            break;
        }
        let irec = record_at(ctx, ix, at);
        let (values, pointing) = match &irec {
            Some(irec) => (text.index_values(irec), text.index_locator(irec)),
            None => (String::new(), String::new()),
        };
        out.push(summary_finding(base, ix, 8952, Some(at)));
        let mut detail = summary_finding(base, ix, 8956, Some(at));
        detail.args = place_args(at);
        detail.args.extend([values, pointing]);
        out.push(detail);
        printed += 1;
    }
    printed as u64
}

fn place_args(at: Place) -> Vec<String> {
    vec![
        at.0.file.0.to_string(),
        at.0.page.0.to_string(),
        at.1.to_string(),
    ]
}

/// Rows printed as SQL Server prints them in 8955 and 8956: `name = value` joined by
/// `and`, a heap row's locator as `HEAP RID = (1:120:3)`.
struct Text<'a> {
    ctx: &'a Context<'a>,
    base: &'a TableEntry,
    ix: &'a TableEntry,
}

impl Text<'_> {
    fn rid(&self, at: Place) -> String {
        format!("HEAP RID = ({}:{}:{})", at.0.file.0, at.0.page.0, at.1)
    }

    fn value(&self, c: &ColumnEntry, v: Option<&[u8]>) -> String {
        match (v, self.ctx.opts.value_text) {
            (None, _) => format!("{} = NULL", c.name),
            (Some(b), Some(t)) => format!("{} = {}", c.name, t(c, b)),
            (Some(b), None) => {
                let hex: String = b.iter().map(|x| format!("{x:02X}")).collect();
                format!("{} = 0x{hex}", c.name)
            }
        }
    }

    /// A data row's locator: its RID in a heap, its clustered key's values otherwise.
    fn data_locator(&self, rec: &[u8], at: Place) -> String {
        let Some((_, key)) = self
            .base
            .primary_key
            .as_ref()
            .filter(|_| self.base.index_id == 1)
        else {
            return self.rid(at);
        };
        let Ok(values) = record::decode(&layouts(self.base), rec) else {
            return String::new();
        };
        let parts: Vec<String> = key
            .iter()
            .filter_map(|id| {
                let at = crate::table::stored_position(self.base, *id)?;
                let c = self.base.columns.iter().find(|c| c.column_id == *id)?;
                Some(self.value(c, values.get(at).copied().flatten()))
            })
            .collect();
        parts.join(" and ")
    }

    /// An index record's key columns and then its locator's columns not in the key.
    fn index_values(&self, irec: &[u8]) -> String {
        let of = self.ix.index_of.as_ref().expect("an index");
        let Ok(values) = record::decode(&layouts(self.ix), irec) else {
            return String::new();
        };
        let keys = of.key_columns as usize;
        let locator = self.locator_positions();
        let shown = (0..keys).chain(locator.into_iter().filter(|&i| i >= keys));
        let parts: Vec<String> = shown
            .map(|i| self.column_text(i, values.get(i).copied().flatten()))
            .collect();
        parts.join(" and ")
    }

    /// The data row an index record names: its RID, or its clustered key's values.
    fn index_locator(&self, irec: &[u8]) -> String {
        let Ok(values) = record::decode(&layouts(self.ix), irec) else {
            return String::new();
        };
        let parts: Vec<String> = self
            .locator_positions()
            .into_iter()
            .map(|i| self.column_text(i, values.get(i).copied().flatten()))
            .collect();
        parts.join(" and ")
    }

    /// The index entry's columns holding the locator, in the clustered key's order.
    fn locator_positions(&self) -> Vec<usize> {
        let of = self.ix.index_of.as_ref().expect("an index");
        let wanted: Vec<u16> = match &self.base.primary_key {
            Some((_, key)) if self.base.index_id == 1 => key.clone(),
            _ => vec![0],
        };
        wanted
            .iter()
            .filter_map(|s| of.sources.iter().position(|x| x == s))
            .collect()
    }

    fn column_text(&self, i: usize, v: Option<&[u8]>) -> String {
        let of = self.ix.index_of.as_ref().expect("an index");
        let c = &self.ix.columns[i];
        match (of.sources.get(i), v.and_then(rid_of_bytes)) {
            (Some(0), Some(rid)) => self.rid(rid),
            _ => self.value(c, v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check_db::{check_database, CheckOptions};
    use crate::index::IndexDef;
    use crate::Database;
    use extentdb_io::sim::{Faults, SimFileSystem};

    /// T (k INT NOT NULL, v INT NULL), a heap or clustered on k.
    fn table(clustered: bool) -> TableEntry {
        let col = |id: u16, name: &str| ColumnEntry {
            column_id: id,
            name: name.into(),
            system_type_id: 56,
            max_length: 4,
            precision: 0,
            scale: 0,
            is_nullable: id == 2,
            identity: None,
            default_sql: String::new(),
            computed: None,
        };
        TableEntry {
            object_id: 0,
            schema_name: "dbo".into(),
            name: "T".into(),
            created_us: 0,
            data_space_id: 1,
            allocation_unit_id: 0,
            index_id: clustered as u8,
            root_page: PageId::NULL,
            primary_key: clustered.then(|| ("PK_T".to_string(), vec![1])),
            columns: vec![col(1, "k"), col(2, "v")],
            identity_last: Default::default(),
            lock_escalation: Default::default(),
            pending_ddl: None,
            index_of: None,
            checks: Vec::new(),
            foreign_keys: Vec::new(),
            is_disabled: false,
        }
    }

    fn row(k: i32, v: i32) -> Vec<u8> {
        let lay = layouts(&table(false));
        let (k, v) = (k.to_le_bytes(), v.to_le_bytes());
        record::encode(&lay, &[Some(&k[..]), Some(&v[..])]).unwrap()
    }

    fn int_text(_: &ColumnEntry, b: &[u8]) -> String {
        b.try_into()
            .map_or("?".into(), |b| i32::from_le_bytes(b).to_string())
    }

    /// 300 rows (k, 10 k) and an index on v; then, committed, row 5's index record
    /// deleted and an index record (v = 999999) naming row 7 inserted.
    fn damaged(fs: &SimFileSystem, clustered: bool) -> (Database, Place, Place) {
        let mut db = crate::table::tests::new_db(fs);
        let t = db.create_table(table(clustered)).unwrap();
        let x = db.begin_xact();
        for k in 0..300 {
            db.now(|d| d.insert_row(x, t, (&row(k, k * 10), d.growth_env()), None))
                .unwrap();
        }
        let lsn = db.commit_xact(x).unwrap().unwrap();
        db.wal().unwrap().flush(lsn).unwrap();
        let def = IndexDef {
            table_object_id: t,
            name: "T_v".into(),
            unique: false,
            unique_constraint: false,
            key: vec![2],
            include: vec![],
            data_space_id: 1,
        };
        let shared = crate::shared::SharedDatabase::new(db);
        let env = shared.read().unwrap().growth_env().clone();
        shared.create_index(&def, &env, &|| false).unwrap();
        let mut db = shared.into_inner();
        let base = db.table_by_id(t).cloned().unwrap();
        let ix = db.indexes_of(t).next().cloned().unwrap();
        let rows = db.scan_rows(t).unwrap();
        let at = |k: i32| rows.iter().find(|(_, r)| *r == row(k, k * 10)).unwrap().0;
        let (five, seven) = (at(5), at(7));
        let x = db.begin_xact();
        let gone = project(&ix, &base, &row(5, 50), five).unwrap();
        db.now(|d| d.btree_delete(x, &ix, &gone, 0)).unwrap();
        let bogus = project(&ix, &base, &row(7, 999_999), seven).unwrap();
        db.now(|d| d.btree_insert(x, &ix, (&bogus, 0), None))
            .unwrap();
        let lsn = db.commit_xact(x).unwrap().unwrap();
        db.wal().unwrap().flush(lsn).unwrap();
        db.checkpoint().unwrap();
        (db, five, seven)
    }

    fn args(f: &[Finding], number: u32) -> Vec<Vec<String>> {
        f.iter()
            .filter(|f| f.number == number)
            .map(|f| f.args.clone())
            .collect()
    }

    /// Proves CHECKDB names the rows an index and its table disagree on: over a heap and
    /// a clustered table, an index missing row 5's record and holding a record (v =
    /// 999999) no row projects to gives 8951 + 8955 for row 5 (its locator and the index
    /// values it should have) and 8952 + 8956 for the extra record, two consistency
    /// errors; with a limit of one finding, the second is counted, not printed (8986).
    #[test]
    fn an_index_missing_a_row_and_holding_an_extra_one_names_both() {
        for clustered in [false, true] {
            let fs = SimFileSystem::new(3, Faults::default());
            let (db, five, seven) = damaged(&fs, clustered);
            let src = db.check_source().unwrap();
            let opts = CheckOptions {
                maxdop: 1,
                value_text: Some(&int_text),
                ..Default::default()
            };
            let r = check_database(&src, &opts).unwrap();
            let rid = |p: Place| format!("HEAP RID = ({}:{}:{})", p.0.file.0, p.0.page.0, p.1);
            let (loc5, loc7) = match clustered {
                false => (rid(five), rid(seven)),
                true => ("k = 5".to_string(), "k = 7".to_string()),
            };
            let numbers: Vec<u32> = r.findings.iter().map(|f| f.number).collect();
            assert_eq!(numbers, [8951, 8955, 8952, 8956], "{:?}", r.findings);
            let d55 = &args(&r.findings, 8955)[0];
            assert_eq!(d55[..3], place_args(five)[..], "{clustered}");
            let five_values = match clustered {
                false => format!("v = 50 and {loc5}"),
                true => "v = 50 and k = 5".to_string(),
            };
            assert_eq!(d55[3..], [loc5.clone(), five_values], "{clustered}");
            let d56 = &args(&r.findings, 8956)[0];
            let extra_values = match clustered {
                false => format!("v = 999999 and {loc7}"),
                true => "v = 999999 and k = 7".to_string(),
            };
            assert_eq!(d56[3..], [extra_values, loc7], "{clustered}");
            assert_eq!(args(&r.findings, 8951)[0][2], "T_v");
            assert_eq!((r.consistency_errors(), r.allocation_errors()), (2, 0));
            assert_eq!(r.objects[0].consistency_errors, 2);

            let limited = CheckOptions {
                detail_limit: 1,
                ..opts
            };
            let r = check_database(&src, &limited).unwrap();
            let numbers: Vec<u32> = r.findings.iter().map(|f| f.number).collect();
            assert_eq!(numbers, [8951, 8955, 8986], "{:?}", r.findings);
            assert_eq!(args(&r.findings, 8986)[0][0], "2");
            assert_eq!(r.consistency_errors(), 2);
            assert_eq!(r.objects[0].consistency_errors, 2);
        }
    }
}
