//! Every decoder of client and server input, fed seeded random mutations of valid messages
//! (bit flips, truncations, inserted and deleted bytes, random lengths): none may panic, and
//! none may allocate without bound (the packet reader's message limit holds). This runs on
//! stable in every test run; `fuzz/` has the same decoders as cargo-fuzz targets for
//! coverage-guided runs (scripts/test.sh runs them briefly where a nightly toolchain is).

use extentdb_sql::types::{SqlType, Value, MAX_LENGTH};
use extentdb_tds::client::ClientState;
use extentdb_tds::login7::{self, Login7};
use extentdb_tds::token::Tokens;
use extentdb_tds::types::{put_type_info, put_value};
use extentdb_tds::wire::put_utf16;
use extentdb_tds::{packet, prelogin, request};

/// A small deterministic generator (SplitMix64).
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
}

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(6) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            1 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] = rng.next() as u8;
            }
            2 => b.truncate(rng.below(b.len() + 1)),
            3 => {
                let i = rng.below(b.len() + 1);
                b.insert(i, rng.next() as u8);
            }
            4 if !b.is_empty() => {
                let i = rng.below(b.len());
                b.remove(i);
            }
            _ if b.len() >= 2 => {
                // A random 16-bit length somewhere.
                let i = rng.below(b.len() - 1);
                let v = (rng.next() as u16).to_le_bytes();
                b[i..i + 2].copy_from_slice(&v);
            }
            _ => {}
        }
    }
    b
}

fn headers() -> Vec<u8> {
    request::all_headers_with(0)
}

fn typed_values() -> Vec<(SqlType, Value)> {
    vec![
        (SqlType::Int, Value::Int(7)),
        (SqlType::BigInt, Value::Null),
        (
            SqlType::Decimal {
                precision: 20,
                scale: 4,
            },
            Value::Decimal {
                unscaled: -99_999,
                scale: 4,
            },
        ),
        (
            SqlType::NVarChar(MAX_LENGTH),
            Value::Text("max text".into()),
        ),
        (SqlType::VarChar(20), Value::Text("abc".into())),
        (SqlType::VarBinary(MAX_LENGTH), Value::Binary(vec![1, 2, 3])),
        (
            SqlType::DateTime2(3),
            Value::DateTime2(638_000_000_000_000_000),
        ),
        (SqlType::DateTime, Value::DateTime(600_000_000_000_000_000)),
        (SqlType::Date, Value::Date(700_000)),
        (SqlType::UniqueIdentifier, Value::Guid([3; 16])),
        (SqlType::Float, Value::Float(2.5)),
        (SqlType::Bit, Value::Bit(false)),
    ]
}

fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    out.push((
        "prelogin",
        prelogin::server_response(prelogin::ENCRYPT_NOT_SUP),
    ));
    out.push((
        "login7",
        login7::encode(&Login7 {
            tds_version: login7::TDS_74,
            packet_size: 4096,
            user_name: "sa".into(),
            password: "secret".into(),
            database: "master".into(),
            app_name: "fuzz".into(),
            ..Default::default()
        }),
    ));
    let mut batch = headers();
    put_utf16(&mut batch, "SELECT 1");
    out.push(("batch", batch));
    let mut rpc = headers();
    rpc.extend_from_slice(&0xFFFFu16.to_le_bytes());
    rpc.extend_from_slice(&10u16.to_le_bytes());
    rpc.extend_from_slice(&0u16.to_le_bytes());
    for (i, (t, v)) in typed_values().into_iter().enumerate() {
        extentdb_tds::wire::put_b_varchar(&mut rpc, &format!("@p{i}"));
        rpc.push(0);
        put_type_info(&mut rpc, t);
        put_value(&mut rpc, t, &v);
    }
    out.push(("rpc", rpc));
    let mut tm = headers();
    tm.extend_from_slice(&7u16.to_le_bytes());
    tm.extend_from_slice(&[0, 1, 0]);
    out.push(("tm", tm));
    // A server response: every token the client decodes.
    let mut t = Tokens::new();
    t.env_text(1, "db", "master");
    t.message(&extentdb_sql::messages::msg(5701, &[&"db"]), "srv");
    t.login_ack(login7::TDS_74, prelogin::SERVER_VERSION);
    let cols: Vec<(String, SqlType)> = typed_values()
        .iter()
        .enumerate()
        .map(|(i, (t, _))| (format!("c{i}"), *t))
        .collect();
    t.col_metadata(&cols);
    let types: Vec<SqlType> = cols.iter().map(|c| c.1).collect();
    let values: Vec<Value> = typed_values().into_iter().map(|(_, v)| v).collect();
    t.row(&types, &values);
    t.row(
        &types,
        &values.iter().map(|_| Value::Null).collect::<Vec<_>>(),
    );
    t.return_status(0);
    t.return_value(1, "@h", SqlType::Int, &Value::Int(1));
    t.done(0xFD, 0x10, 0xC1, 2);
    out.push(("tokens", t.buf));
    out
}

fn decode(kind: &str, b: &[u8]) {
    match kind {
        "prelogin" => {
            let _ = prelogin::decode(b);
        }
        "login7" => {
            let _ = login7::decode(b);
        }
        "batch" => {
            let _ = request::sql_batch(b);
        }
        "rpc" => {
            let _ = request::rpc(b);
        }
        "tm" => {
            let _ = request::transaction_manager(b);
        }
        "packet" => {}
        _ => {
            let _ = ClientState::default().decode(b);
        }
    }
    // Every input also as a packet stream, with a small message limit.
    let _ = packet::read_message(&mut &b[..], 4096, 64 << 10);
}

/// Inputs cargo-fuzz once crashed a decoder with (the first byte picks the decoder, as in
/// `fuzz/fuzz_targets/decoders.rs`).
#[test]
fn fuzz_regressions_decode_without_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
    let kinds = [
        "prelogin", "login7", "batch", "rpc", "tm", "tokens", "packet",
    ];
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let data = std::fs::read(e.unwrap().path()).unwrap();
        if let Some((&which, input)) = data.split_first() {
            decode(kinds[which as usize % 7], input);
            n += 1;
        }
    }
    assert!(n > 0);
}

#[test]
fn decoders_survive_mutated_input() {
    let iterations: usize = std::env::var("XDB_FUZZ_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let seeds = seeds();
    // Each seed decodes cleanly as it is.
    assert!(prelogin::decode(&seeds[0].1).is_ok());
    assert!(login7::decode(&seeds[1].1).is_ok());
    assert!(request::rpc(&seeds[3].1).is_ok());
    assert!(ClientState::default().decode(&seeds[5].1).is_ok());
    let mut rng = Rng(0x5EED);
    for i in 0..iterations {
        let (kind, seed) = &seeds[i % seeds.len()];
        let input = mutate(&mut rng, seed);
        decode(kind, &input);
    }
}
