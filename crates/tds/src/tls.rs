//! TLS inside TDS (MS-TDS 3.3.4.1 and 2.2.6.5): the TLS handshake travels inside PRELOGIN
//! packets; then either every message goes over TLS (ENCRYPT_ON / REQ) or only LOGIN7 does
//! (ENCRYPT_OFF: "encrypt the login only", after which both sides drop TLS).
//!
//! The certificate is the instance's: `DIR/tls/server.crt` and `server.key`, made
//! self-signed at first use (clients trust it with trust-server-certificate) or supplied
//! with `serve --tls-cert/--tls-key`.
//!
//! A TLS connection cannot be read on one thread and written on another, so after the
//! handshake a pump of two threads owns it: one turns TLS records from the socket into
//! plaintext on one end of a local socket pair, the other turns what the server writes on
//! that end into TLS records. The connection code then reads and writes plaintext TDS as it
//! does without TLS. The session lock is never held across a blocking socket call.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls::ServerConnection;

use crate::packet::{read_message, write_message, PacketType};
use crate::TdsError;

/// The certificate and key paths of an instance.
pub fn default_paths(instance_dir: &Path) -> (PathBuf, PathBuf) {
    let d = instance_dir.join("tls");
    (d.join("server.crt"), d.join("server.key"))
}

/// Makes a self-signed certificate for `host` (and localhost, 127.0.0.1) at the given
/// paths, the key readable by its owner only.
pub fn create_self_signed(cert: &Path, key: &Path, host: &str) -> Result<(), String> {
    let mut names = vec![host.to_string(), "localhost".to_string()];
    names.dedup();
    let mut params = rcgen::CertificateParams::new(names).map_err(|e| e.to_string())?;
    params
        .subject_alt_names
        .push(rcgen::SanType::IpAddress("127.0.0.1".parse().unwrap()));
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("extentdb {host}"));
    let key_pair = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let c = params.self_signed(&key_pair).map_err(|e| e.to_string())?;
    if let Some(dir) = cert.parent() {
        extentdb_storage::instance_lock::create_private_dir(dir).map_err(|e| e.to_string())?;
    }
    // Both durably (temporary file, fsync, rename, directory fsync) and owner-only: a
    // crash must never leave an empty certificate that stops the next start.
    let write = |p: &Path, text: String| {
        extentdb_storage::instance::write_durably(p, text.as_bytes())
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    write(key, key_pair.serialize_pem())?;
    write(cert, c.pem())
}

/// Loads a certificate chain and key (PEM) into a server configuration.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, String> {
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let certs = rustls_pemfile::certs(&mut &read(cert)?[..])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate", cert.display()));
    }
    let key_der = rustls_pemfile::private_key(&mut &read(key)?[..])
        .map_err(|e| format!("{}: {e}", key.display()))?
        .ok_or_else(|| format!("{}: no private key", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // TLS 1.2, as SQL Server uses with TDS 7.x: TLS 1.3's messages after the handshake
    // (session tickets) would arrive after clients stop unwrapping PRELOGIN packets.
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS12])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| e.to_string())?;
    config.send_tls13_tickets = 0;
    Ok(Arc::new(config))
}

fn tls_err(e: rustls::Error) -> TdsError {
    TdsError::Io(std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Runs the TLS handshake with its records wrapped in PRELOGIN packets.
pub fn handshake(
    tcp: &mut TcpStream,
    config: Arc<rustls::ServerConfig>,
) -> Result<ServerConnection, TdsError> {
    let mut conn = ServerConnection::new(config).map_err(tls_err)?;
    while conn.is_handshaking() {
        if conn.wants_write() {
            let mut out = Vec::new();
            while conn.wants_write() {
                conn.write_tls(&mut out)?;
            }
            write_message(tcp, PacketType::PreLogin, &out, 4096, 0)?;
            continue;
        }
        let Some(m) = read_message(tcp, 32767, 1 << 20)? else {
            return Err(TdsError::Protocol(
                "connection closed during the TLS handshake",
            ));
        };
        if m.kind != PacketType::PreLogin {
            return Err(TdsError::Protocol("TLS handshake outside PRELOGIN packets"));
        }
        let mut data = &m.payload[..];
        while !data.is_empty() {
            conn.read_tls(&mut data)?;
            conn.process_new_packets().map_err(tls_err)?;
        }
    }
    // Flush whatever the handshake's end left (a session ticket, for instance).
    if conn.wants_write() {
        let mut out = Vec::new();
        while conn.wants_write() {
            conn.write_tls(&mut out)?;
        }
        write_message(tcp, PacketType::PreLogin, &out, 4096, 0)?;
    }
    Ok(conn)
}

/// Reads one TDS message sent over TLS records directly on the socket (the LOGIN7 of
/// login-only encryption); TLS ends after it.
pub fn read_login_over_tls(
    tcp: &mut TcpStream,
    conn: &mut ServerConnection,
) -> Result<Option<crate::packet::Message>, TdsError> {
    let mut stream = rustls::Stream::new(conn, tcp);
    read_message(&mut stream, 32767, 128 << 10)
}

/// Starts the pump for a fully encrypted connection; returns the plaintext end.
pub fn pump(tcp: TcpStream, conn: ServerConnection) -> Result<UnixStream, TdsError> {
    let (inner, outer) = UnixStream::pair()?;
    let conn = Arc::new(Mutex::new(conn));
    // Socket to plaintext.
    {
        let conn = conn.clone();
        let mut tcp_r = tcp.try_clone()?;
        let mut plain_w = inner.try_clone()?;
        std::thread::Builder::new()
            .name("tds-tls-in".into())
            .spawn(move || {
                let mut buf = vec![0u8; 32 << 10];
                let mut plain = vec![0u8; 32 << 10];
                'outer: loop {
                    let n = match tcp_r.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    let mut data = &buf[..n];
                    while !data.is_empty() {
                        let mut c = conn.lock().unwrap();
                        if c.read_tls(&mut data).is_err() || c.process_new_packets().is_err() {
                            break 'outer;
                        }
                        loop {
                            match c.reader().read(&mut plain) {
                                Ok(0) => break 'outer,
                                Ok(k) => {
                                    if plain_w.write_all(&plain[..k]).is_err() {
                                        break 'outer;
                                    }
                                }
                                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                                Err(_) => break 'outer,
                            }
                        }
                    }
                }
                let _ = plain_w.shutdown(std::net::Shutdown::Both);
                let _ = tcp_r.shutdown(std::net::Shutdown::Both);
            })?;
    }
    // Plaintext to socket.
    {
        let mut tcp_w = tcp;
        let mut plain_r = inner;
        std::thread::Builder::new()
            .name("tds-tls-out".into())
            .spawn(move || {
                let mut buf = vec![0u8; 32 << 10];
                loop {
                    let n = match plain_r.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    let mut out = Vec::with_capacity(n + 64);
                    {
                        let mut c = conn.lock().unwrap();
                        if c.writer().write_all(&buf[..n]).is_err() {
                            break;
                        }
                        while c.wants_write() {
                            if c.write_tls(&mut out).is_err() {
                                break;
                            }
                        }
                    }
                    if tcp_w.write_all(&out).is_err() {
                        break;
                    }
                }
                {
                    let mut c = conn.lock().unwrap();
                    c.send_close_notify();
                    let mut out = Vec::new();
                    while c.wants_write() && c.write_tls(&mut out).is_ok() {}
                    let _ = tcp_w.write_all(&out);
                }
                let _ = tcp_w.shutdown(std::net::Shutdown::Both);
            })?;
    }
    Ok(outer)
}

/// Accepts any server certificate (trust-server-certificate): the connection is encrypted
/// but the server is not authenticated.
#[derive(Debug)]
struct TrustAnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for TrustAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The client side of the handshake inside PRELOGIN packets; returns the encrypted stream
/// every later message goes through.
pub fn client_handshake(
    mut tcp: TcpStream,
    o: &crate::client::ConnectOptions,
    addr: &str,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, TdsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(tls_err)?;
    let config = if o.trust_server_certificate {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(TrustAnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        let Some(ca) = &o.ca_file else {
            return Err(TdsError::Protocol(
                "encryption needs a CA file to check the server's certificate, or trust-server-certificate",
            ));
        };
        let pem = std::fs::read(ca)?;
        for c in rustls_pemfile::certs(&mut &pem[..]) {
            roots.add(c?).map_err(tls_err)?;
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    let host = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or(addr);
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|_| TdsError::Protocol("a server name TLS cannot check"))?;
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).map_err(tls_err)?;
    while conn.is_handshaking() {
        if conn.wants_write() {
            let mut out = Vec::new();
            while conn.wants_write() {
                conn.write_tls(&mut out)?;
            }
            write_message(&mut tcp, PacketType::PreLogin, &out, 4096, 0)?;
            continue;
        }
        let Some(m) = read_message(&mut tcp, 32767, 1 << 20)? else {
            return Err(TdsError::Protocol(
                "connection closed during the TLS handshake",
            ));
        };
        let mut data = &m.payload[..];
        while !data.is_empty() {
            conn.read_tls(&mut data)?;
            conn.process_new_packets().map_err(tls_err)?;
        }
    }
    Ok(rustls::StreamOwned::new(conn, tcp))
}
