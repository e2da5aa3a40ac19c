//! The WebAssembly export layer (wasm builds only).
//!
//! `wit-bindgen` generates the `lock-sm` world's types and the `Guest` trait;
//! [`Exports`] implements it by converting WIT values to [`crate::Command`]
//! and calling the one [`LockTable`] this instance owns. The bindings and the
//! export macro are public so that test fixture guests can reuse them and
//! export an implementation of their own (`guest_sm::component::export!(T with_types_in
//! guest_sm::component)`).

use std::cell::RefCell;

use crate::command::{Command as Cmd, Outcome as Out};
use crate::table::LockTable;

wit_bindgen::generate!({
    world: "lock-sm",
    path: "../wit/lock-sm-0.1.wit",
    pub_export_macro: true,
    export_macro_name: "export",
});

#[global_allocator]
static ALLOC: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

thread_local! {
    // wasm32-unknown-unknown is single-threaded: one instance, one table.
    static TABLE: RefCell<LockTable> = RefCell::new(LockTable::new());
}

fn with_table<R>(f: impl FnOnce(&mut LockTable) -> R) -> R {
    TABLE.with(|t| f(&mut t.borrow_mut()))
}

impl From<Command> for Cmd {
    fn from(c: Command) -> Cmd {
        match c {
            Command::Grant(g) => Cmd::Grant {
                key: g.key,
                lease_ms: g.lease_ms,
            },
            Command::Release(key) => Cmd::Release { key },
            Command::Expire(e) => Cmd::Expire {
                key: e.key,
                token: e.token,
            },
        }
    }
}

impl From<Out> for Outcome {
    fn from(o: Out) -> Outcome {
        match o {
            Out::Granted { token } => Outcome::Granted(token),
            Out::GrantRejected => Outcome::GrantRejected,
            Out::Released => Outcome::Released,
            Out::NotFound => Outcome::NotFound,
            Out::Expired { existed } => Outcome::Expired(existed),
            Out::Noop => Outcome::Noop,
        }
    }
}

/// The read-only queries of a [`LockTable`], answered in WIT types; shared
/// by every module built on this table.
pub mod query {
    use super::{HeldLock, LockInfo, TableStats};
    use crate::table::LockTable;

    pub fn get(t: &LockTable, key: &str) -> Option<LockInfo> {
        t.get(key).map(|i| LockInfo {
            token: i.token,
            lease_ms: i.lease_ms,
        })
    }

    pub fn locks(t: &LockTable, after: Option<String>, limit: u32) -> Vec<HeldLock> {
        t.locks(after.as_deref(), limit as usize)
            .into_iter()
            .map(|h| HeldLock {
                key: h.key,
                token: h.token,
                lease_ms: h.lease_ms,
            })
            .collect()
    }

    pub fn stats(t: &LockTable) -> TableStats {
        let s = t.stats();
        TableStats {
            held: s.held,
            next_token: s.next_token,
        }
    }
}

/// The lock state machine as the component's exports.
pub struct Exports;

impl Guest for Exports {
    fn apply(batch: Vec<Command>) -> Vec<Outcome> {
        with_table(|t| {
            batch
                .into_iter()
                .map(|c| t.apply(c.into()).into())
                .collect()
        })
    }

    fn get(key: String) -> Option<LockInfo> {
        with_table(|t| query::get(t, &key))
    }

    fn locks(after: Option<String>, limit: u32) -> Vec<HeldLock> {
        with_table(|t| query::locks(t, after, limit))
    }

    fn stats() -> TableStats {
        with_table(|t| query::stats(t))
    }

    fn snapshot() -> Vec<u8> {
        with_table(|t| t.snapshot())
    }

    fn restore(bytes: Vec<u8>) -> Result<(), String> {
        with_table(|t| t.restore(&bytes).map_err(|e| e.to_string()))
    }

    fn state_hash() -> Vec<u8> {
        with_table(|t| t.state_hash().to_vec())
    }

    fn version() -> String {
        crate::VERSION.to_string()
    }
}

#[cfg(feature = "component")]
export!(Exports);
