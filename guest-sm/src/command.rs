//! The replicated commands and what applying them returns.

use serde::{Deserialize, Serialize};

/// A replicated lock command. Proposed only by the leader; applied by every
/// node in log order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Take `key`. Carries no token: [`crate::LockTable::apply`] assigns it.
    Grant { key: String, lease_ms: u64 },
    /// Free `key`.
    Release { key: String },
    /// Leader-driven lease expiry: removes the lock only if `token` matches.
    Expire { key: String, token: u64 },
}

/// What applying one command returns to the leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// Acquired; the fencing token issued.
    Granted { token: u64 },
    /// A grant for a key that is already held.
    GrantRejected,
    /// Freed.
    Released,
    /// The key to release was not held.
    NotFound,
    /// Expiry processed; `existed` says whether a lock was really removed.
    Expired { existed: bool },
    /// Nothing happened (Raft's blank and membership entries).
    Noop,
}

/// A held lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockInfo {
    pub token: u64,
    pub lease_ms: u64,
}

/// A held lock together with its key, as listed by [`crate::LockTable::locks`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldLock {
    pub key: String,
    pub token: u64,
    pub lease_ms: u64,
}

/// Counters of the lock table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableStats {
    /// Locks currently held.
    pub held: u64,
    /// The token the next grant will receive.
    pub next_token: u64,
}
