//! Seeded fuzzing of the T-SQL front and back ends on stable, in every test run: batches
//! from the golden scripts, the examples and a corpus of table statements, mutated at the
//! token and the character level, go through the lexer and the parser (every one) and
//! through a real executor session on a real instance (those that touch only tables). No
//! input may panic, and the instance must answer and check clean afterwards (issue 20, item
//! 4). `fuzz/fuzz_targets/sql.rs` runs the same two stages coverage-guided under
//! cargo-fuzz. `XDB_SQL_FUZZ_CASES=N` runs N mutations per stage (default 10,000 parsed,
//! 8,000 executed).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use extentdb_sql::exec::{Engine, Output};
use extentdb_sql::parser::parse_batch;
use extentdb_sql::script::split_batches;

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Tokens a mutation may insert: keywords, names long and short, literals at the edges of
/// their types, symbols.
const VOCABULARY: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "INSERT",
    "INTO",
    "VALUES",
    "UPDATE",
    "SET",
    "DELETE",
    "CREATE",
    "TABLE",
    "DROP",
    "TRUNCATE",
    "BEGIN",
    "TRAN",
    "COMMIT",
    "ROLLBACK",
    "IF",
    "ELSE",
    "END",
    "DECLARE",
    "PRINT",
    "NULL",
    "NOT",
    "AND",
    "OR",
    "IN",
    "BETWEEN",
    "LIKE",
    "IS",
    "CASE",
    "WHEN",
    "THEN",
    "CAST",
    "CONVERT",
    "AS",
    "INT",
    "BIGINT",
    "VARCHAR(10)",
    "NVARCHAR(MAX)",
    "DECIMAL(38,10)",
    "FLOAT",
    "DATETIME2",
    "VARBINARY(8000)",
    "BIT",
    "PRIMARY",
    "KEY",
    "IDENTITY(1,1)",
    "DEFAULT",
    "TOP",
    "ORDER",
    "BY",
    "GROUP",
    "HAVING",
    "COUNT(*)",
    "SUM",
    "MAX",
    "MIN",
    "AVG",
    "LEN",
    "SUBSTRING",
    "GRANT",
    "DENY",
    "REVOKE",
    "TO",
    "ON",
    "USER",
    "ROLE",
    "LOGIN",
    "t",
    "u",
    "x",
    "[a b]",
    "\"q\"",
    "@v",
    "@@ROWCOUNT",
    "@@TRANCOUNT",
    "0",
    "-1",
    "2147483647",
    "2147483648",
    "-9223372036854775808",
    "99999999999999999999999999999999999999",
    "1e308",
    "1e309",
    "0.000000000000000001",
    "0x",
    "0xFFFF",
    "''",
    "'x'",
    "N'\u{1F600}'",
    "'2024-02-30'",
    "'9999-12-31 23:59:59.9999999'",
    "(",
    ")",
    ",",
    ";",
    ".",
    "*",
    "+",
    "-",
    "/",
    "%",
    "=",
    "<>",
    "<=",
    ">=",
    "::",
    "~",
    "&",
    "|",
    "^",
    "/*",
    "*/",
    "--",
    "'",
];

/// Values a literal may become: the edges of each type and conversions that must fail.
const LITERALS: &[&str] = &[
    "0",
    "-1",
    "2147483647",
    "-2147483648",
    "2147483648",
    "9223372036854775807",
    "-9223372036854775808",
    "99999999999999999999999999999999999999",
    "1e308",
    "-1e308",
    "1.7976931348623157E+309",
    "0.0000000000000000000000000000000000001",
    "NULL",
    "''",
    "'x'",
    "'12.5'",
    "'abc'",
    "N'\u{1F600}\u{0}'",
    "'2024-02-30'",
    "'0001-01-01'",
    "'9999-12-31 23:59:59.9999999'",
    "0x",
    "0x00FF",
    "CAST(1 AS BIT)",
    "-0",
    "1/0",
    "10 % 0",
    "CAST('x' AS INT)",
    "2147483647 + 1",
    "-(-2147483648)",
];

/// Statements on tables that the executor runs as they are; mutations start from them.
const TABLE_CORPUS: &str = "
CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20) NULL, d DECIMAL(10,2) DEFAULT 1.5, b BIT)
INSERT INTO t VALUES (1, 'one', 1.25, 1), (2, NULL, -3.5, 0)
INSERT INTO t (id, v) SELECT 3, 'three'
CREATE TABLE u (k BIGINT IDENTITY(1,1), name NVARCHAR(50), at DATETIME2, raw VARBINARY(16))
INSERT INTO u (name, at, raw) VALUES (N'a', '2024-01-01T10:00:00', 0x0102)
SELECT id, v, d * 2 AS dd, CASE WHEN b = 1 THEN 'y' ELSE 'n' END FROM t WHERE id BETWEEN 1 AND 3 ORDER BY id DESC
SELECT COUNT(*), SUM(d), MAX(v), MIN(id), AVG(d) FROM t GROUP BY b HAVING COUNT(*) > 0
SELECT TOP (2) * FROM u WHERE name LIKE N'%a%' AND at IS NOT NULL
UPDATE t SET v = UPPER(v) + '!', d = d / 3 WHERE id IN (1, 2)
DELETE FROM t WHERE v IS NULL OR id > 2
DECLARE @v INT = 5; SET @v += 2; PRINT CAST(@v AS VARCHAR(10))
BEGIN TRAN; INSERT INTO t VALUES (10, 'x', 0, 0); ROLLBACK
IF EXISTS (SELECT 1 FROM t) PRINT 'yes' ELSE PRINT 'no'
SELECT CONVERT(VARCHAR(30), GETDATE(), 126), LEN(N'abc'), SUBSTRING('hello', 2, 3), ABS(-4)
SELECT CAST('12.5' AS DECIMAL(5,1)), TRY_CAST('x' AS INT), ISNULL(NULL, 3), COALESCE(NULL, 'z')
SELECT name FROM sys.tables; SELECT @@ROWCOUNT, @@TRANCOUNT
TRUNCATE TABLE u
DROP TABLE IF EXISTS u
";

/// Words whose statements could write outside a table, wait, loop or stop the server:
/// parsed, never executed here.
const NOT_EXECUTED: &[&str] = &[
    "DATABASE",
    "BACKUP",
    "RESTORE",
    "WAITFOR",
    "SHUTDOWN",
    "FILE",
    "DBCC",
    "KILL",
    "WHILE",
    "GOTO",
    "LOGIN",
    "REPLICATE",
    "SPACE",
    "CHECKPOINT",
];

fn corpus() -> Vec<String> {
    let mut batches: Vec<String> = TABLE_CORPUS
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for dir in ["crates/cli/tests/golden", "examples"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            if e.path().extension().is_some_and(|x| x == "sql") {
                let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                batches.extend(split_batches(&text).into_iter().map(|b| b.text));
            }
        }
    }
    batches
}

/// Every literal of `batch` (a word starting with a digit, a quote or `N'`) kept or
/// replaced by one of `LITERALS`: statements that still parse, with values at the edges.
fn mutate_literals(rng: &mut Rng, batch: &str) -> String {
    let is_literal =
        |w: &str| w.starts_with(|c: char| c.is_ascii_digit() || c == '\'') || w.starts_with("N'");
    batch
        .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
        .filter(|w| !w.is_empty())
        .fold(batch.to_string(), |text, w| {
            if is_literal(w) && !w.contains(' ') && rng.below(2) == 0 {
                text.replacen(w, LITERALS[rng.below(LITERALS.len())], 1)
            } else {
                text
            }
        })
}

/// One mutation of `batch`: token-level edits, or a character-level one.
fn mutate(rng: &mut Rng, batch: &str) -> String {
    if rng.below(5) == 0 {
        let mut chars: Vec<char> = batch.chars().collect();
        let at = rng.below(chars.len() + 1);
        match rng.below(3) {
            0 => chars.truncate(at),
            1 => chars.insert(
                at,
                *rng.pick(&['\'', '[', ']', '"', '(', '\0', '\u{FEFF}', '@']),
            ),
            _ => {
                let tail: String = chars[at..].iter().collect();
                chars.extend(tail.chars());
            }
        }
        return chars.into_iter().collect();
    }
    let mut words: Vec<String> = batch.split_whitespace().map(str::to_string).collect();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(words.len() + 1);
        match rng.below(4) {
            0 if at < words.len() => {
                words.remove(at);
            }
            1 if at < words.len() => words[at] = rng.pick(VOCABULARY).to_string(),
            2 => words.insert(at, rng.pick(VOCABULARY).to_string()),
            _ => words.insert(at, "n".repeat(1 + rng.below(300))),
        }
    }
    words.join(" ")
}

fn cases(default: usize) -> usize {
    std::env::var("XDB_SQL_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn mutated_batches_never_panic_the_parser() {
    let corpus = corpus();
    let mut rng = Rng(0x5eed_0020);
    let (mut parsed, mut refused) = (0, 0);
    for i in 0..cases(10_000) {
        let source = rng_pick(&mut rng, &corpus);
        let input = mutate(&mut rng, source);
        match catch_unwind(|| parse_batch(&input)) {
            Ok(Ok(_)) => parsed += 1,
            Ok(Err(_)) => refused += 1,
            Err(_) => panic!("case {i}: the parser panicked on {input:?}"),
        }
    }
    println!("parser fuzz: {parsed} parsed, {refused} refused with a message, 0 panics");
    assert!(
        parsed > 0 && refused > 0,
        "the mutations reach both outcomes"
    );
}

fn rng_pick<'a>(rng: &mut Rng, corpus: &'a [String]) -> &'a str {
    corpus[rng.below(corpus.len())].as_str()
}

fn executable(batch: &str) -> bool {
    let upper = batch.to_ascii_uppercase();
    !NOT_EXECUTED.iter().any(|w| upper.contains(w))
}

#[test]
fn mutated_table_batches_never_panic_the_executor() {
    let dir = std::env::temp_dir().join(format!("xdb-sql-fuzz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let fs: Arc<dyn extentdb_io::FileSystem> = extentdb_io::os::OsFileSystem::new();
    let mut config = extentdb_storage::config::InstanceConfig::defaults(&dir);
    config.max_server_memory_mb = 64;
    extentdb_storage::Instance::setup(
        fs.clone(),
        &dir,
        extentdb_storage::instance::SetupOptions {
            config,
            sa_password: None,
        },
    )
    .unwrap();
    let instance = Arc::new(extentdb_storage::Instance::start(fs, &dir, &[]).unwrap());
    let engine = Engine::new(instance.clone());
    let mut session = engine.session();
    assert!(no_errors(&session.execute("CREATE DATABASE fuzz")));
    let corpus: Vec<String> = TABLE_CORPUS
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    let mut rng = Rng(0x5eed_0021);
    let (mut ran, mut failed) = (0, 0);
    let mut history: Vec<String> = Vec::new();
    for i in 0..cases(8_000) {
        let source = rng_pick(&mut rng, &corpus);
        let input = if rng.below(2) == 0 {
            mutate_literals(&mut rng, source)
        } else {
            mutate(&mut rng, source)
        };
        if !executable(&input) {
            continue;
        }
        let out = catch_unwind(AssertUnwindSafe(|| {
            session.execute(&format!("USE fuzz;\n{input}"))
        }));
        let shown = format!("{:?}", out.as_ref().ok());
        match out {
            Ok(out) if no_errors(&out) => ran += 1,
            Ok(_) => failed += 1,
            Err(_) => panic!("case {i}: the executor panicked on {input:?}"),
        }
        let (_, db) = instance.database_by_name("fuzz").expect("fuzz exists");
        let poisoned = db.read().unwrap().is_poisoned();
        history.push(input.clone());
        if std::env::var("XDB_SQL_FUZZ_CHECK_EACH").is_ok() {
            let out = session.execute("DBCC CHECKDB (fuzz) WITH NO_INFOMSGS");
            let bad: Vec<String> = out
                .iter()
                .filter_map(|o| match o {
                    Output::Error(e) if e.number != 3903 => {
                        Some(format!("{} {}", e.number, e.text))
                    }
                    _ => None,
                })
                .collect();
            assert!(
                bad.is_empty(),
                "case {i}: {input:?} ({shown}) left {bad:?}; before it:\n{}",
                history
                    .iter()
                    .rev()
                    .take(12)
                    .rev()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        assert!(
            !poisoned,
            "case {i}: {input:?} left the database needing a reopen ({shown}); the batches before it:\n{}",
            history.iter().rev().take(12).rev().cloned().collect::<Vec<_>>().join("\n")
        );
    }
    println!("executor fuzz: {ran} ran, {failed} refused with a message, 0 panics");
    assert!(ran > 0 && failed > 0, "the mutations reach both outcomes");
    // The instance still answers, and the database checks clean.
    let out = session.execute("ROLLBACK; USE master; DBCC CHECKDB (fuzz) WITH NO_INFOMSGS");
    let errors: Vec<i32> = out
        .iter()
        .filter_map(|o| match o {
            Output::Error(e) if e.number != 3903 => Some(e.number),
            _ => None,
        })
        .collect();
    assert!(errors.is_empty(), "after the fuzz: {errors:?}");
    drop(session);
    instance.shutdown();
    drop(instance);
    let _ = std::fs::remove_dir_all(&dir);
}

fn no_errors(out: &[Output]) -> bool {
    !out.iter().any(|o| matches!(o, Output::Error(_)))
}
