//! Sessions' transactions as a DBA looks at them: sys.dm_tran_session_transactions,
//! sys.dm_tran_active_transactions and DBCC OPENTRAN. An explicit transaction (BEGIN
//! TRANSACTION, or IMPLICIT_TRANSACTIONS) is listed from its BEGIN to its end; an
//! autocommit statement's transaction is not listed.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use extentdb_storage::instance::{Instance, SessionInfo};

use super::views::{cols, text, Rowset};
use super::{Out, Output, Session};
use crate::messages::{msg, SqlError};
use crate::types::{SqlType, Value};

/// Sessions with an explicit transaction open, oldest first.
fn open_transactions(inst: &Instance) -> Vec<Arc<SessionInfo>> {
    let mut v: Vec<Arc<SessionInfo>> = inst
        .sessions
        .lock()
        .unwrap()
        .values()
        .filter(|s| s.open_transaction_count.load(Ordering::Acquire) > 0)
        .cloned()
        .collect();
    v.sort_by_key(|s| s.transaction_begin_us.load(Ordering::Acquire));
    v
}

/// sys.dm_tran_session_transactions.
pub(super) fn session_transactions(inst: &Instance) -> Rowset {
    let columns = cols(&[
        ("session_id", SqlType::Int),
        ("transaction_id", SqlType::BigInt),
        ("transaction_descriptor", SqlType::Binary(8)),
        ("enlist_count", SqlType::Int),
        ("is_user_transaction", SqlType::Bit),
        ("is_local", SqlType::Bit),
        ("is_enlisted", SqlType::Bit),
        ("is_bound", SqlType::Bit),
        ("open_transaction_count", SqlType::Int),
    ]);
    let rows = open_transactions(inst)
        .iter()
        .map(|s| {
            let d = s.transaction_descriptor.load(Ordering::Acquire);
            vec![
                Value::Int(s.session_id as i32),
                Value::BigInt(d as i64),
                Value::Binary(d.to_le_bytes().to_vec()),
                Value::Int(1),
                Value::Bit(true),
                Value::Bit(true),
                Value::Bit(false),
                Value::Bit(false),
                Value::Int(s.open_transaction_count.load(Ordering::Acquire) as i32),
            ]
        })
        .collect();
    Rowset { columns, rows }
}

/// sys.dm_tran_active_transactions: the open explicit transactions (type 1 read/write,
/// state 2 active).
pub(super) fn active_transactions(inst: &Instance) -> Rowset {
    let columns = cols(&[
        ("transaction_id", SqlType::BigInt),
        ("name", SqlType::NVarChar(32)),
        ("transaction_begin_time", SqlType::DateTime),
        ("transaction_type", SqlType::Int),
        ("transaction_state", SqlType::Int),
    ]);
    let rows = open_transactions(inst)
        .iter()
        .map(|s| {
            vec![
                Value::BigInt(s.transaction_descriptor.load(Ordering::Acquire) as i64),
                text("user_transaction"),
                Value::DateTime(super::views::ticks_from_unix_us(
                    s.transaction_begin_us.load(Ordering::Acquire),
                )),
                Value::Int(1),
                Value::Int(2),
            ]
        })
        .collect();
    Rowset { columns, rows }
}

impl Session {
    /// DBCC OPENTRAN [(database)]: the oldest active transaction of a database that has
    /// written to it: its session, name, BEGIN LSN and start time; or "No active open
    /// transactions."
    pub(super) fn dbcc_opentran(
        &mut self,
        args: &[Value],
        out: &mut Out,
    ) -> Result<(), Vec<SqlError>> {
        let inst = self.engine.instance.clone();
        let (id, db) = match args.first() {
            Some(Value::Text(name)) => inst
                .database_by_name(name)
                .ok_or_else(|| vec![msg(2520, &[&name])])?,
            _ => self.current_database()?,
        };
        let (name, lsn) = {
            let g = db.read().unwrap();
            (g.name.clone(), g.oldest_active_lsn())
        };
        let oldest = open_transactions(&inst)
            .into_iter()
            .find(|s| s.xact_databases.lock().unwrap().contains(&id));
        let (Some(lsn), Some(s)) = (lsn, oldest) else {
            out.push(Output::Info(SqlError::print(
                "No active open transactions.".into(),
            )));
            return Ok(());
        };
        let started =
            super::views::ticks_from_unix_us(s.transaction_begin_us.load(Ordering::Acquire));
        let lines = [
            format!("Transaction information for database '{name}'."),
            String::new(),
            "Oldest active transaction:".to_string(),
            format!("    SPID (server process ID): {}", s.session_id),
            "    UID (user ID) : -1".to_string(),
            "    Name          : user_transaction".to_string(),
            format!(
                "    LSN           : ({}:{}:{})",
                lsn.vlf_sequence, lsn.block, lsn.slot
            ),
            format!(
                "    Start time    : {}",
                crate::convert::format_datetime(
                    started,
                    crate::convert::DateKind::DateTime,
                    Some(109)
                )
                .map_err(|e| vec![e])?
            ),
        ];
        for l in lines {
            out.push(Output::Info(SqlError::print(l)));
        }
        Ok(())
    }
}
