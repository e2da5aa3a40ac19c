//! The wasm export layer of version 2, on the bindings of `guest-sm` (and its
//! allocator).

use std::cell::RefCell;

use guest_sm::component::{query, Command, Guest, HeldLock, LockInfo, Outcome, TableStats};

use crate::V2;

thread_local! {
    static SM: RefCell<V2> = RefCell::new(V2::default());
}

fn with<R>(f: impl FnOnce(&mut V2) -> R) -> R {
    SM.with(|s| f(&mut s.borrow_mut()))
}

struct ExportsV2;

impl Guest for ExportsV2 {
    fn apply(batch: Vec<Command>) -> Vec<Outcome> {
        with(|s| {
            batch
                .into_iter()
                .map(|c| s.apply(c.into()).into())
                .collect()
        })
    }

    fn get(key: String) -> Option<LockInfo> {
        with(|s| query::get(&s.table, &key))
    }

    fn locks(after: Option<String>, limit: u32) -> Vec<HeldLock> {
        with(|s| query::locks(&s.table, after, limit))
    }

    fn stats() -> TableStats {
        with(|s| query::stats(&s.table))
    }

    fn snapshot() -> Vec<u8> {
        with(|s| s.snapshot())
    }

    fn restore(bytes: Vec<u8>) -> Result<(), String> {
        with(|s| s.restore(&bytes).map_err(|e| e.to_string()))
    }

    fn state_hash() -> Vec<u8> {
        with(|s| s.state_hash().to_vec())
    }

    fn version() -> String {
        crate::VERSION.to_string()
    }
}

guest_sm::component::export!(ExportsV2 with_types_in guest_sm::component);
