//! TDS 7.4 for extentdb: the protocol SQL Server's clients speak (MS-TDS). `packet` frames
//! messages, `prelogin` and `login7` open a connection, `request` reads what clients send
//! (SQLBatch, RPC, transaction-manager requests), `types` and `token` write results, and
//! `server` runs connections against the engine's sessions.
//!
//! Dependencies point down: this crate uses `extentdb-sql` (sessions, values, messages)
//! and `extentdb-storage` (the instance and its error log); the `cli` crate uses it.

pub mod admission;
pub mod attention;
pub mod client;
pub mod definitions;
pub mod inbox;
pub mod login7;
pub mod login_guard;
pub mod packet;
pub mod prelogin;
pub mod request;
pub mod response;
pub mod server;
pub mod tls;
pub mod token;
pub mod types;
pub mod wire;

/// Everything that can go wrong on a connection. Any of these closes that connection
/// only; the server goes on.
#[derive(Debug, thiserror::Error)]
pub enum TdsError {
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("malformed TDS: {0}")]
    Protocol(&'static str),
    #[error("message longer than the {0}-byte limit")]
    TooLarge(usize),
    #[error("unsupported TDS data type 0x{0:02X}")]
    UnsupportedType(u8),
    #[error("login failed")]
    LoginFailed,
}
