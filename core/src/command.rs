//! The replicated lock commands and their outcomes, as the host sees them.
//!
//! These are the types `wasmtime::component::bindgen!` generates from world
//! `lock-sm@0.2.0` (so a batch crosses into a 0.2 guest without
//! conversion), with serde derives so they can be stored in the log and sent
//! to peers. A module of world 0.1 gets them through the adapter in
//! [`crate::engine`], which maps the exclusive case onto the seed's three
//! commands (docs/architecture.md, "The lock commands (world 0.1)").
//! [`legacy`] holds the 0.1 types, which log entries written before world
//! 0.2 existed still carry.
//!
//! | command | outcome |
//! |---|---|
//! | [`Command::Grant`] (key, holder, request id, mode, limit, lease) | [`Outcome::Granted`] (token, lease, repeat) or [`Outcome::Rejected`] (busy, policy, quota, unsupported) |
//! | [`Command::Release`] (key, token) | [`Outcome::Released`] (freed) or [`Outcome::NotFound`] |
//! | [`Command::Expire`] (key, token) | [`Outcome::Expired`] (existed, freed) |
//! | [`Command::SetPolicy`] (rules) | [`Outcome::PolicySet`] or [`Outcome::Rejected`] |
//! | (Raft's blank and membership entries) | [`Outcome::Noop`] |

use std::fmt;

pub use crate::engine::bindings::v02::{
    Command, Expired, FeatureSet, Grant, Granted, Holder, HolderInfo, KeyHolders, LockRef, Mode,
    Outcome, PolicyKinds, PrefixPolicy, Reason, Released, TableCounters,
};

/// The world-0.1 types (docs/architecture.md, "The lock commands (world
/// 0.1)").
pub mod legacy {
    pub use crate::engine::bindings::v01::{
        Command, Expire, Grant, HeldLock, LockInfo, Outcome, TableStats,
    };
}

/// What the reason of every refusal by the cluster's capacity bound starts
/// with (a `quota` refusal the host, not the module, gives; see
/// [`crate::replica::capacity`]).
pub const CAPACITY_REASON: &str = "cluster capacity";

/// The allowance [`Command::wire_bytes`] makes for a command's numbers and
/// framing (more than postcard's varints and tags take).
pub const WIRE_OVERHEAD: usize = 48;

/// Whether a `quota` refusal is the cluster's capacity bound.
pub fn is_capacity(reason: &str) -> bool {
    reason.starts_with(CAPACITY_REASON)
}

impl Command {
    /// A 0.1 command in 0.2's types (a 0.1 module's release ignores the
    /// token, so it is 0).
    pub fn from_legacy(c: &legacy::Command) -> Command {
        match c {
            legacy::Command::Grant(g) => Command::grant(g.key.clone(), g.lease_ms),
            legacy::Command::Release(key) => Command::release(key.clone(), 0),
            legacy::Command::Expire(e) => Command::expire(e.key.clone(), e.token),
        }
    }

    /// An exclusive grant of limit 1 (the seed's grant) for no one in
    /// particular.
    pub fn grant(key: impl Into<String>, lease_ms: u64) -> Command {
        Command::Grant(Grant {
            key: key.into(),
            holder: Holder {
                principal: String::new(),
                owner: String::new(),
            },
            request_id: String::new(),
            mode: Mode::Exclusive,
            limit: 1,
            lease_ms,
        })
    }

    pub fn release(key: impl Into<String>, token: u64) -> Command {
        Command::Release(LockRef {
            key: key.into(),
            token,
        })
    }

    pub fn expire(key: impl Into<String>, token: u64) -> Command {
        Command::Expire(LockRef {
            key: key.into(),
            token,
        })
    }

    /// About how many bytes the command takes in a log entry: its strings
    /// exactly, a fixed allowance for its numbers and framing. What bounds a
    /// lock entry, and an AppendEntries batch, in bytes.
    pub fn wire_bytes(&self) -> usize {
        WIRE_OVERHEAD
            + match self {
                Command::Grant(g) => {
                    g.key.len()
                        + g.holder.principal.len()
                        + g.holder.owner.len()
                        + g.request_id.len()
                }
                Command::Release(r) | Command::Expire(r) => r.key.len(),
                Command::SetPolicy(rules) => {
                    rules.iter().map(|r| r.prefix.len() + WIRE_OVERHEAD).sum()
                }
            }
    }

    /// The key the command is about (none for `set-policy`).
    pub fn key(&self) -> Option<&str> {
        match self {
            Command::Grant(g) => Some(&g.key),
            Command::Release(r) | Command::Expire(r) => Some(&r.key),
            Command::SetPolicy(_) => None,
        }
    }
}

impl Mode {
    pub fn as_str(&self) -> &'static str {
        match self {
            Mode::Exclusive => "exclusive",
            Mode::Shared => "shared",
        }
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::Grant(g) => {
                write!(f, "grant {:?} lease_ms={}", g.key, g.lease_ms)?;
                if g.mode != Mode::Exclusive || g.limit != 1 {
                    write!(f, " {} limit={}", g.mode.as_str(), g.limit)?;
                }
                if !g.holder.owner.is_empty() || !g.holder.principal.is_empty() {
                    write!(f, " holder={}/{}", g.holder.principal, g.holder.owner)?;
                }
                if !g.request_id.is_empty() {
                    write!(f, " request={}", g.request_id)?;
                }
                Ok(())
            }
            Command::Release(r) => write!(f, "release {:?} token={}", r.key, r.token),
            Command::Expire(r) => write!(f, "expire {:?} token={}", r.key, r.token),
            Command::SetPolicy(rules) => write!(f, "set-policy ({} rules)", rules.len()),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Busy => f.write_str("busy"),
            Reason::Policy(why) => write!(f, "policy: {why}"),
            Reason::Quota(why) => write!(f, "quota: {why}"),
            Reason::Unsupported(why) => write!(f, "unsupported: {why}"),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Granted(g) => {
                write!(f, "granted token={} lease_ms={}", g.token, g.lease_ms)?;
                if g.repeat {
                    f.write_str(" repeat")?;
                }
                Ok(())
            }
            Outcome::Rejected(r) => write!(f, "rejected ({r})"),
            Outcome::Released(r) => write!(f, "released freed={}", r.freed),
            Outcome::NotFound => f.write_str("not-found"),
            Outcome::Expired(e) => write!(f, "expired existed={} freed={}", e.existed, e.freed),
            Outcome::PolicySet => f.write_str("policy-set"),
            Outcome::Noop => f.write_str("noop"),
        }
    }
}

impl legacy::Command {
    /// As [`Command::wire_bytes`].
    pub fn wire_bytes(&self) -> usize {
        WIRE_OVERHEAD
            + match self {
                legacy::Command::Grant(g) => g.key.len(),
                legacy::Command::Release(k) => k.len(),
                legacy::Command::Expire(e) => e.key.len(),
            }
    }
}

impl fmt::Display for legacy::Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            legacy::Command::Grant(g) => write!(f, "grant {:?} lease_ms={}", g.key, g.lease_ms),
            legacy::Command::Release(k) => write!(f, "release {k:?}"),
            legacy::Command::Expire(e) => write!(f, "expire {:?} token={}", e.key, e.token),
        }
    }
}

impl fmt::Display for legacy::Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            legacy::Outcome::Granted(token) => write!(f, "granted token={token}"),
            legacy::Outcome::GrantRejected => f.write_str("grant-rejected"),
            legacy::Outcome::Released => f.write_str("released"),
            legacy::Outcome::NotFound => f.write_str("not-found"),
            legacy::Outcome::Expired(existed) => write!(f, "expired existed={existed}"),
            legacy::Outcome::Noop => f.write_str("noop"),
        }
    }
}
