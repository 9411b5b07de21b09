//! Load for `bench/tds.py`: N connections over TDS run one statement in a loop for a fixed
//! time; prints one JSON line with the operations done and the rate.
//!
//! Usage: tds_load ADDR PASSWORD DATABASE select|insert|heap CONNECTIONS SECONDS [KEY_BASE]
//! `select` sends `SELECT 1`; `insert` sends `INSERT INTO t VALUES (k, '<8,000 hex chars>')`,
//! an autocommit insert of one 8 KB row, with keys from KEY_BASE + connection * 10^9;
//! `heap` sends autocommit inserts of eight such rows (a page each: one extent per
//! statement) into heap `h<connection>`, and counts rows.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use extentdb_tds::client::{Client, ConnectOptions};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 7 {
        eprintln!(
            "usage: tds_load ADDR PASSWORD DATABASE select|insert|heap CONNECTIONS SECONDS [KEY_BASE]"
        );
        std::process::exit(2);
    }
    let (addr, password, database, mode) = (a[1].clone(), a[2].clone(), a[3].clone(), a[4].clone());
    let connections: u64 = a[5].parse().unwrap();
    let seconds: f64 = a[6].parse().unwrap();
    let key_base: u64 = a.get(7).and_then(|s| s.parse().ok()).unwrap_or(0);
    let ops = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients: Vec<Client> = (0..connections)
        .map(|_| {
            Client::connect(
                &addr,
                &ConnectOptions {
                    password: password.clone(),
                    database: Some(database.clone()),
                    ..ConnectOptions::default()
                },
            )
            .unwrap_or_else(|e| panic!("connect: {e:?}"))
        })
        .collect();
    let start = Instant::now();
    let threads: Vec<_> = clients
        .drain(..)
        .enumerate()
        .map(|(i, mut c)| {
            let (ops, stop, mode) = (ops.clone(), stop.clone(), mode.clone());
            std::thread::spawn(move || {
                // 4,000 random bytes as 8,000 hex characters: LZ4 gains little on them.
                let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ (i as u64 + 1);
                let pad: String = (0..4000)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        format!("{:02x}", seed as u8)
                    })
                    .collect();
                let mut k = key_base + i as u64 * 1_000_000_000;
                while !stop.load(Ordering::Relaxed) {
                    let (sql, n) = match mode.as_str() {
                        "select" => ("SELECT 1".to_string(), 1),
                        "heap" => {
                            let rows: Vec<String> =
                                (0..8).map(|j| format!("({}, '{pad}')", k + j)).collect();
                            k += 8;
                            (format!("INSERT INTO h{i} VALUES {}", rows.join(", ")), 8)
                        }
                        _ => {
                            k += 1;
                            (format!("INSERT INTO t VALUES ({k}, '{pad}')"), 1)
                        }
                    };
                    let r = c.batch(&sql).expect("request");
                    if let Some(e) = r.errors().next() {
                        panic!("Msg {}: {}", e.number, e.text);
                    }
                    ops.fetch_add(n, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let elapsed = start.elapsed().as_secs_f64();
    let n = ops.load(Ordering::Relaxed);
    println!(
        "{{\"ops\": {n}, \"seconds\": {elapsed:.3}, \"ops_per_s\": {:.1}}}",
        n as f64 / elapsed
    );
}
