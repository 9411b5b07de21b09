//! tiberius, the Rust SQL Server client, against a real `extentdb serve`: it sends every
//! query with parameters as sp_executesql RPCs, so this covers the RPC path, typed
//! parameters and values both ways, row counts, server errors, transactions, and TLS on
//! tiberius's defaults (encryption on) with trust-server-certificate.

mod common;

use common::tds::{Server, PASSWORD};
use tiberius::{AuthMethod, Client, Config, EncryptionLevel};
use tokio::net::TcpStream;
use tokio_util::compat::{Compat, TokioAsyncWriteCompatExt};

async fn connect(addr: &str, encryption: Option<EncryptionLevel>) -> Client<Compat<TcpStream>> {
    let mut config = Config::new();
    let (host, port) = addr.rsplit_once(':').unwrap();
    config.host(host);
    config.port(port.parse().unwrap());
    config.authentication(AuthMethod::sql_server("sa", PASSWORD));
    match encryption {
        Some(level) => config.encryption(level),
        // tiberius's default (encryption required with the rustls feature), trusting the
        // server's self-signed certificate.
        None => config.trust_cert(),
    }
    let tcp = TcpStream::connect(config.get_addr()).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    Client::connect(config, tcp.compat_write()).await.unwrap()
}

async fn session(addr: &str, encryption: Option<EncryptionLevel>) {
    let mut c = connect(addr, encryption).await;
    let db = format!("tib{}", rand_suffix());
    c.simple_query(format!("CREATE DATABASE {db}"))
        .await
        .unwrap()
        .into_results()
        .await
        .unwrap();
    c.simple_query(format!(
        "USE {db}; CREATE TABLE t (k int PRIMARY KEY, name nvarchar(40), big bigint, \
         f float, ok bit, amount decimal(12,3), blob varbinary(100))"
    ))
    .await
    .unwrap()
    .into_results()
    .await
    .unwrap();
    // Parameters of several types; the row count comes back.
    let r = c
        .execute(
            "INSERT INTO t VALUES (@P1, @P2, @P3, @P4, @P5, @P6, @P7)",
            &[
                &1i32,
                &"ünïcode ✓",
                &5_000_000_000i64,
                &2.5f64,
                &true,
                &tiberius::numeric::Numeric::new_with_scale(-12345, 3),
                &vec![0xDEu8, 0xAD, 0xBE, 0xEF].as_slice(),
            ],
        )
        .await
        .unwrap();
    assert_eq!(r.rows_affected(), &[1]);
    let none: Option<i64> = None;
    c.execute(
        "INSERT INTO t (k, name, big) VALUES (@P1, @P2, @P3)",
        &[&2i32, &"second", &none],
    )
    .await
    .unwrap();
    let rows = c
        .query(
            "SELECT k, name, big, f, ok, amount, blob FROM t WHERE k >= @P1 ORDER BY k",
            &[&1i32],
        )
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    let r0 = &rows[0];
    assert_eq!(r0.get::<i32, _>("k"), Some(1));
    assert_eq!(r0.get::<&str, _>("name"), Some("ünïcode ✓"));
    assert_eq!(r0.get::<i64, _>("big"), Some(5_000_000_000));
    assert_eq!(r0.get::<f64, _>("f"), Some(2.5));
    assert_eq!(r0.get::<bool, _>("ok"), Some(true));
    let amount: tiberius::numeric::Numeric = r0.get("amount").unwrap();
    assert_eq!((amount.value(), amount.scale()), (-12345, 3));
    assert_eq!(
        r0.get::<&[u8], _>("blob"),
        Some(&[0xDEu8, 0xAD, 0xBE, 0xEF][..])
    );
    assert_eq!(rows[1].get::<i64, _>("big"), None);
    // A server error keeps its number and class.
    match c.query("SELECT * FROM nosuch", &[]).await {
        Err(tiberius::error::Error::Server(e)) => {
            assert_eq!((e.code(), e.class()), (208, 16));
        }
        other => panic!("expected 208, got {:?}", other.map(|_| ())),
    }
    let e = c
        .execute("INSERT INTO t (k) VALUES (@P1)", &[&1i32])
        .await
        .unwrap_err();
    match e {
        tiberius::error::Error::Server(e) => assert_eq!(e.code(), 2627),
        e => panic!("expected 2627, got {e}"),
    }
    // A transaction rolled back leaves nothing.
    c.simple_query("BEGIN TRAN")
        .await
        .unwrap()
        .into_results()
        .await
        .unwrap();
    c.execute("INSERT INTO t (k) VALUES (@P1)", &[&3i32])
        .await
        .unwrap();
    c.simple_query("ROLLBACK")
        .await
        .unwrap()
        .into_results()
        .await
        .unwrap();
    let n: i32 = c
        .query("SELECT COUNT(*) FROM t", &[])
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap()
        .get(0)
        .unwrap();
    assert_eq!(n, 2);
}

fn rand_suffix() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
}

#[test]
fn tiberius_without_and_with_tls() {
    let s = Server::start("tiberius", &[]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(session(&s.addr, Some(EncryptionLevel::NotSupported)));
    rt.block_on(session(&s.addr, None));
}
