//! Seeks on character keys (issue 22), through a real `extentdb serve` and TDS: a point
//! lookup by a varchar clustered key and by an nvarchar nonclustered index on 3,000 rows
//! reads a handful of pages where a scan reads them all (SET STATISTICS IO's Msg 3615);
//! seek and scan give the same rows, and UPDATE and DELETE leave the same rows, over many
//! generated predicates whose text mixes case, trailing spaces, '_', '[', '^', accented
//! letters, 'ß', text longer than the column and N'' text a varchar column cannot hold
//! (the scan forced by wrapping WHERE in NOT (NOT (...)), which no seek analyses); a
//! FOREIGN KEY's parent lookup by a varchar key finds its parent case-insensitively; and
//! four sessions read and update by varchar key at once.

mod common;

use common::tds::{all_rows, connect_at, ok, rows, run, scans_and_reads, Rng, Server};
use extentdb_format::collation;
use extentdb_sql::exec::Output;
use extentdb_sql::types::{SqlType, Value};
use extentdb_tds::client::Client;

/// The rows of `sql` and its first (scan count, logical reads).
fn rows_and_io(c: &mut Client, sql: &str) -> (Vec<Vec<Value>>, (u64, u64)) {
    let r = run(c, sql);
    (all_rows(&r), scans_and_reads(&r)[0])
}

fn ints(v: &[i32]) -> Vec<Vec<Value>> {
    v.iter().map(|i| vec![Value::Int(*i)]).collect()
}

/// Proves a point lookup by a varchar clustered key on 3,000 rows reads a handful of
/// pages (scan count 0: one key of a unique index) whatever the literal's case, trailing
/// spaces or N prefix, for SELECT, UPDATE and DELETE, and through a unique nvarchar
/// index too; text longer than the column finds nothing in a handful of pages; N'' text
/// a varchar column cannot hold reads the table (and finds what a scan finds); a range
/// reads its part of the table; text longer than a varchar(1) key finds its 'ß' by "SS";
/// and a FOREIGN KEY's parent lookup finds 'kEy_10005 ' by a seek of one key.
#[test]
fn point_lookups_by_character_keys_read_a_handful_of_pages() {
    let s = Server::start("charseek-point", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE cs");
    run(
        &mut c,
        "USE cs; CREATE TABLE t (name VARCHAR(20) NOT NULL PRIMARY KEY, \
            note NVARCHAR(20) NOT NULL, v INT NOT NULL, pad CHAR(200) NOT NULL DEFAULT 'x'); \
         SET NOCOUNT ON; DECLARE @i INT = 0; BEGIN TRAN; \
         WHILE @i < 3000 BEGIN \
            INSERT INTO t (name, note, v) VALUES ('Key_' + CAST(10000 + @i AS VARCHAR(10)), \
               N'n\u{f6}te-' + CAST(@i AS NVARCHAR(10)) + N'\u{3a9}', @i); \
            SET @i += 1; END; COMMIT; \
         CREATE UNIQUE INDEX ix_note ON t (note); SET STATISTICS IO ON",
    );
    let (r, (_, scan_reads)) = rows_and_io(
        &mut c,
        "SELECT v FROM t WHERE NOT (NOT (name = 'KEY_11234'))",
    );
    assert_eq!(r, ints(&[1234]));
    assert!(scan_reads > 80, "a scan read only {scan_reads} pages");
    for literal in ["'KEY_11234'", "'key_11234   '", "N'kEy_11234'", "@p"] {
        let sql = format!(
            "DECLARE @p NVARCHAR(30) = N'Key_11234 '; SELECT v FROM t WHERE name = {literal}"
        );
        let (r, (scans, reads)) = rows_and_io(&mut c, &sql);
        assert_eq!(r, ints(&[1234]), "{sql}");
        assert_eq!(scans, 0, "{sql}");
        assert!(reads <= 4, "{sql}: {reads} pages");
    }
    let (r, (_, reads)) = rows_and_io(
        &mut c,
        "SELECT v FROM t WHERE name = 'key_11234xxxxxxxxxxxxxxxxxxxxx'",
    );
    assert_eq!((r, reads <= 4), (ints(&[]), true));
    let (r, (_, reads)) = rows_and_io(&mut c, "SELECT v FROM t WHERE name = N'key_1123\u{3a9}'");
    assert_eq!((r, reads), (ints(&[]), scan_reads));
    let (r, (_, reads)) = rows_and_io(
        &mut c,
        "SELECT v FROM t WHERE note = N'N\u{d6}TE-1234\u{3c9} '",
    );
    assert_eq!(r, ints(&[1234]));
    assert!(reads <= 8, "through the index: {reads} pages");
    let (r, (scans, reads)) = rows_and_io(
        &mut c,
        "SELECT COUNT(*) FROM t WHERE name BETWEEN 'key_11000' AND 'KEY_11099'",
    );
    assert_eq!((r, scans), (ints(&[100]), 1));
    assert!(
        reads * 10 < scan_reads,
        "a 100-row range read {reads} pages"
    );
    let (r, (scans, _)) = rows_and_io(
        &mut c,
        "SELECT v FROM t WHERE name IN ('key_10002 ', 'KEY_10001', 'Key_10002')",
    );
    assert_eq!((r, scans), (ints(&[1, 2]), 2));

    for sql in [
        "UPDATE t SET v = -7 WHERE name = 'kEy_10007  '",
        "DELETE FROM t WHERE name = N'KEY_10008'",
    ] {
        let r = run(&mut c, sql);
        let (scans, reads) = scans_and_reads(&r)[0];
        assert!(scans == 0 && reads <= 4, "{sql}: {:?}", scans_and_reads(&r));
    }
    let (r, _) = rows_and_io(
        &mut c,
        "SELECT v FROM t WHERE name IN ('Key_10007', 'Key_10008')",
    );
    assert_eq!(r, ints(&[-7]));

    // Text longer than the column may still equal a stored value: 'ß' is "SS".
    run(
        &mut c,
        "CREATE TABLE one (k VARCHAR(1) NOT NULL PRIMARY KEY, v INT NOT NULL); \
         INSERT INTO one VALUES ('\u{df}', 1), ('S', 2), ('T', 3)",
    );
    // Scan count 0 is one key's seek, 2 the IN list's two (a scan counts 1).
    for (w, expected, seeks) in [
        ("k = 'ss'", vec![1], 0),
        ("k IN ('SS ', 's')", vec![2, 1], 2),
        ("k > 'ss'", vec![3], 1),
        ("k BETWEEN 'S' AND 'SSS'", vec![2, 1], 1),
    ] {
        let (r, (scans, _)) = rows_and_io(&mut c, &format!("SELECT v FROM one WHERE {w}"));
        assert_eq!(r, ints(&expected), "{w}");
        assert_eq!(scans, seeks, "{w}");
    }
    run(
        &mut c,
        "CREATE TABLE child (id INT NOT NULL PRIMARY KEY, \
            name VARCHAR(20) NOT NULL REFERENCES t (name))",
    );
    let r = run(&mut c, "INSERT INTO child VALUES (1, 'kEy_10005 ')");
    // The parent lookup is a seek of one key of t (scan count 0), not a read of t.
    let re = regex::Regex::new(r"^Table 't'\. Scan count (\d+), logical reads (\d+),").unwrap();
    let parent: Vec<(u64, u64)> = r
        .outputs
        .iter()
        .filter_map(|o| match o {
            Output::Info(m) if m.number == 3615 => re
                .captures(&m.text)
                .map(|c| (c[1].parse().unwrap(), c[2].parse().unwrap())),
            _ => None,
        })
        .collect();
    assert!(matches!(parent[..], [(0, n)] if n <= 4), "{parent:?}");
    let r = c
        .batch("INSERT INTO child VALUES (2, 'Key_10008')")
        .unwrap();
    let numbers: Vec<i32> = r.errors().map(|e| e.number).collect();
    assert_eq!(numbers, [547], "the deleted parent");
    let r = c.batch("DELETE FROM t WHERE name = 'KEY_10005'").unwrap();
    let numbers: Vec<i32> = r.errors().map(|e| e.number).collect();
    assert_eq!(numbers, [547], "the parent of a child row");
}

/// Characters of the keys: both cases, '_', '[', '^' and ']' (which sort apart from
/// letters), accented letters, 'ß' (which equals "SS"), 'µ' (whose uppercase is Greek),
/// digits and spaces.
const KEY_CHARS: &str = "aAbBsSzZ_[^]e\u{e9}\u{c9}E\u{df}\u{b5}\u{ff}0 ";
/// Characters only nvarchar holds: Greek (with 'μ', equal to a stored 'µ'), 'Ÿ', 'ẞ'.
const UNICODE_CHARS: &str = "\u{3a9}\u{3c9}\u{3bc}\u{178}\u{1e9e}";

/// A text literal of up to 9 characters (the columns hold 6), mostly in the keys'
/// alphabet, sometimes N'' with characters varchar cannot hold, sometimes with trailing
/// spaces.
fn literal(r: &mut Rng) -> String {
    let latin: Vec<char> = KEY_CHARS.chars().collect();
    let mut all = latin.clone();
    all.extend(UNICODE_CHARS.chars());
    let (unicode, prefix) = match r.below(4) {
        0 => (true, "N"),
        1 => (false, "N"),
        _ => (false, ""),
    };
    let mut s = r.text(if unicode { &all } else { &latin }, 9);
    if r.below(5) == 0 {
        s.push_str("  ");
    }
    format!("{prefix}'{s}'")
}

/// A conjunct on column `col`.
fn conjunct(r: &mut Rng, col: &str) -> String {
    let op = ["=", "<", "<=", ">", ">="][r.below(5) as usize];
    match r.below(10) {
        0..=3 => format!("{col} {op} {}", literal(r)),
        4 => format!("{} {op} {col}", literal(r)),
        5 | 6 => format!("{col} BETWEEN {} AND {}", literal(r), literal(r)),
        _ => {
            let items: Vec<String> = (0..1 + r.below(5)).map(|_| literal(r)).collect();
            format!("{col} IN ({})", items.join(", "))
        }
    }
}

/// A WHERE clause of one or two conjuncts on the keys, sometimes with a residual one.
fn predicate(r: &mut Rng) -> String {
    let mut parts = Vec::new();
    for _ in 0..1 + r.below(2) {
        let col = if r.below(3) == 0 { "n" } else { "name" };
        parts.push(conjunct(r, col));
    }
    if r.below(5) == 0 {
        parts.push("v % 3 <> 1".into());
    }
    parts.join(" AND ")
}

/// Loads table k: 300 keys of up to 6 characters of `KEY_CHARS`, distinct under the
/// collation, each with an nvarchar `n` (indexed, not unique) and a pad that spreads them
/// over several pages.
fn load_keys(c: &mut Client, rng: &mut Rng) {
    let latin: Vec<char> = KEY_CHARS.chars().collect();
    let mut all = latin.clone();
    all.extend(UNICODE_CHARS.chars());
    let mut seen = std::collections::HashSet::new();
    let mut values = Vec::new();
    while values.len() < 300 {
        let name = rng.text(&latin, 6);
        if !seen.insert(collation::folded(&name)) {
            continue;
        }
        let n = rng.text(&all, 6);
        values.push(format!("('{name}', N'{n}', {})", values.len()));
    }
    run(
        c,
        "CREATE TABLE k (name VARCHAR(6) NOT NULL PRIMARY KEY, n NVARCHAR(6) NOT NULL, \
            v INT NOT NULL, pad CHAR(150) NOT NULL DEFAULT 'p'); \
         CREATE INDEX k_n ON k (n)",
    );
    for chunk in values.chunks(50) {
        run(
            c,
            &format!("INSERT INTO k (name, n, v) VALUES {}", chunk.join(", ")),
        );
    }
}

/// Runs `sql` and returns its rows and reads, or its error numbers.
fn outcome(c: &mut Client, sql: &str) -> (Result<Vec<Vec<Value>>, Vec<i32>>, u64) {
    let r = c.batch(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let errors: Vec<i32> = r.errors().map(|e| e.number).collect();
    let reads = scans_and_reads(&r).iter().map(|x| x.1).sum();
    if errors.is_empty() {
        (Ok(all_rows(&r)), reads)
    } else {
        (Err(errors), reads)
    }
}

/// Proves seek and scan agree, for SELECT and for what UPDATE and DELETE leave, over 600
/// generated predicates on a varchar clustered key and an nvarchar index whose keys mix
/// case, punctuation, accents and 'ß' (the literals add trailing spaces, text longer than
/// the columns and N'' text varchar cannot hold), and that many of them read fewer pages.
#[test]
fn character_seek_and_scan_agree_on_generated_predicates() {
    let s = Server::start("charseek-diff", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE cd");
    run(&mut c, "USE cd");
    let mut rng = Rng(0xc0ff_ee15_5eed);
    load_keys(&mut c, &mut rng);
    run(&mut c, "SET STATISTICS IO ON");
    let mut fewer = 0;
    for i in 0..600 {
        let p = predicate(&mut rng);
        let statement = |w: &str| match i % 4 {
            0 | 1 => format!("SELECT name, n, v FROM k WHERE {w} ORDER BY v"),
            2 => format!(
                "BEGIN TRAN; UPDATE k SET v = v + 10000 WHERE {w}; \
                 SELECT name, n, v FROM k ORDER BY v; ROLLBACK"
            ),
            _ => format!(
                "BEGIN TRAN; DELETE FROM k WHERE {w}; SELECT name, n, v FROM k ORDER BY v; \
                 ROLLBACK"
            ),
        };
        let (sought, seek_reads) = outcome(&mut c, &statement(&p));
        let (scanned, scan_reads) = outcome(&mut c, &statement(&format!("NOT (NOT ({p}))")));
        assert_eq!(sought, scanned, "predicate {i}: {p}");
        fewer += usize::from(seek_reads < scan_reads);
    }
    assert!(fewer > 300, "only {fewer} of 600 predicates sought");
    let checked = run(&mut c, "DBCC CHECKTABLE ('k') WITH NO_INFOMSGS");
    assert!(checked.errors().next().is_none());
}

/// Proves LIKE with a pattern of literal characters finds exactly the rows `=` finds, on a
/// varchar key and an nvarchar column whose text mixes case, accents, 'ß' and 'µ', over 150
/// generated patterns ('_', '[' and '%' escaped with ESCAPE '!'): LIKE folds characters as
/// the collation does (`'SS'` finds a stored 'ß', as `=` does).
#[test]
fn like_of_literal_text_finds_what_equality_finds() {
    let s = Server::start("charseek-like", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE cl");
    run(&mut c, "USE cl");
    let mut rng = Rng(0x11ce_5eed);
    load_keys(&mut c, &mut rng);
    let latin: Vec<char> = KEY_CHARS.chars().collect();
    let mut all = latin.clone();
    all.extend(UNICODE_CHARS.chars());
    let mut found = 0;
    for i in 0..150 {
        let col = if i % 2 == 0 { "name" } else { "n" };
        let text = rng.text(if i % 4 == 1 { &all } else { &latin }, 6);
        let text = text.trim_end_matches(' ');
        let escaped: String = text
            .chars()
            .flat_map(|ch| match ch {
                '_' | '[' | '%' | '!' => vec!['!', ch],
                _ => vec![ch],
            })
            .collect();
        let mut query = |w: String| {
            all_rows(&run(
                &mut c,
                &format!("SELECT v FROM k WHERE {w} ORDER BY v"),
            ))
        };
        let like = query(format!("{col} LIKE N'{escaped}' ESCAPE '!'"));
        let equal = query(format!("{col} = N'{text}'"));
        assert_eq!(like, equal, "{col} LIKE N'{escaped}'");
        found += usize::from(!like.is_empty());
    }
    assert!(found > 10, "only {found} patterns found a row");
    run(
        &mut c,
        "INSERT INTO k (name, n, v) VALUES ('Fu\u{df}', N'stra\u{df}e', 1000)",
    );
    let r = run(
        &mut c,
        "SELECT v FROM k WHERE name LIKE 'FUSS' AND n LIKE N'%ss%'",
    );
    assert_eq!(all_rows(&r), ints(&[1000]));
}

/// Proves reads and updates by a varchar key from four sessions at once lose nothing and
/// see their own writes: each session adds to its own keys by a parameterized point
/// UPDATE whose key text varies in case and trailing spaces, reads the key back by a seek,
/// and one also updates a range of its keys; every row ends with exactly its additions.
#[test]
fn sessions_read_and_update_by_varchar_key_at_once() {
    const KEYS: usize = 200;
    const ROUNDS: usize = 60;
    let s = Server::start("charseek-concurrent", &[]);
    let mut c = s.connect();
    run(&mut c, "CREATE DATABASE cc");
    run(
        &mut c,
        &format!(
            "USE cc; CREATE TABLE acct (name VARCHAR(12) NOT NULL PRIMARY KEY, x INT NOT NULL); \
             SET NOCOUNT ON; DECLARE @i INT = 0; \
             WHILE @i < {KEYS} BEGIN \
                INSERT INTO acct VALUES ('Acct_' + CAST(1000 + @i AS VARCHAR(10)), 0); \
                SET @i += 1; END"
        ),
    );
    let key = |k: usize, variant: u64| match variant % 3 {
        0 => format!("ACCT_{}", 1000 + k),
        1 => format!("acct_{}  ", 1000 + k),
        _ => format!("aCcT_{}", 1000 + k),
    };
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let addr = s.addr.clone();
            std::thread::spawn(move || {
                let mut c = connect_at(&addr, Some("cc"), 120).unwrap();
                let mut rng = Rng(0x5151_0000 + w as u64);
                let mut added = vec![0i32; KEYS];
                for _ in 0..ROUNDS {
                    let k = rng.below((KEYS / 4) as u64) as usize * 4 + w;
                    let p = [("@k", SqlType::NVarChar(20), Value::Text(key(k, rng.next())))];
                    ok(
                        c.execute_sql("UPDATE acct SET x = x + 1 WHERE name = @k", &p)
                            .unwrap(),
                    );
                    added[k] += 1;
                    let r = ok(c
                        .execute_sql("SELECT x FROM acct WHERE name = @k", &p)
                        .unwrap());
                    assert_eq!(rows(&r), vec![vec![Value::Int(added[k])]], "key {k}");
                    if w == 0 {
                        // Worker 0's own keys only, so no two sessions change one row.
                        run(
                            &mut c,
                            "UPDATE acct SET x = x + 1000 \
                             WHERE name BETWEEN 'acct_1100' AND 'ACCT_1149' \
                               AND CAST(RIGHT(name, 4) AS INT) % 4 = 0",
                        );
                        for k in (100..150).step_by(4) {
                            added[k] += 1000;
                        }
                    }
                }
                added
            })
        })
        .collect();
    let mut added = vec![0i32; KEYS];
    for w in workers {
        for (a, b) in added.iter_mut().zip(w.join().unwrap()) {
            *a += b;
        }
    }
    let expected: Vec<Vec<Value>> = (0..KEYS)
        .map(|k| {
            vec![
                Value::Text(format!("Acct_{}", 1000 + k)),
                Value::Int(added[k]),
            ]
        })
        .collect();
    let r = run(&mut c, "SELECT name, x FROM acct");
    assert_eq!(rows(&r), expected);
    let checked = run(&mut c, "DBCC CHECKTABLE ('acct') WITH NO_INFOMSGS");
    assert!(checked.errors().next().is_none());
}
