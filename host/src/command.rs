//! The replicated lock commands and their outcomes, as the host sees them.
//!
//! These are the types `wasmtime::component::bindgen!` generates from the
//! `lock-sm` world (so a batch crosses into the guest without conversion),
//! with serde derives so they can be stored in the log and sent to peers.
//! The two tables of the design map one to one:
//!
//! | command | | outcome | |
//! |---|---|---|---|
//! | `Grant { key, lease_ms }` | [`Command::Grant`] | `Granted { token }` | [`Outcome::Granted`] |
//! | `Release { key }` | [`Command::Release`] | `GrantRejected` | [`Outcome::GrantRejected`] |
//! | `Expire { key, token }` | [`Command::Expire`] | `Released` / `NotFound` | [`Outcome::Released`] / [`Outcome::NotFound`] |
//! | | | `Expired { existed }` | [`Outcome::Expired`] |
//! | | | `Noop` | [`Outcome::Noop`] |

use std::fmt;

pub use crate::engine::bindings::{
    Command, Expire, Grant, HeldLock, LockInfo, Outcome, TableStats,
};

impl Command {
    pub fn grant(key: impl Into<String>, lease_ms: u64) -> Command {
        Command::Grant(Grant {
            key: key.into(),
            lease_ms,
        })
    }

    pub fn release(key: impl Into<String>) -> Command {
        Command::Release(key.into())
    }

    pub fn expire(key: impl Into<String>, token: u64) -> Command {
        Command::Expire(Expire {
            key: key.into(),
            token,
        })
    }

    /// The key the command is about.
    pub fn key(&self) -> &str {
        match self {
            Command::Grant(g) => &g.key,
            Command::Release(k) => k,
            Command::Expire(e) => &e.key,
        }
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::Grant(g) => write!(f, "grant {:?} lease_ms={}", g.key, g.lease_ms),
            Command::Release(k) => write!(f, "release {k:?}"),
            Command::Expire(e) => write!(f, "expire {:?} token={}", e.key, e.token),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Granted(token) => write!(f, "granted token={token}"),
            Outcome::GrantRejected => f.write_str("grant-rejected"),
            Outcome::Released => f.write_str("released"),
            Outcome::NotFound => f.write_str("not-found"),
            Outcome::Expired(existed) => write!(f, "expired existed={existed}"),
            Outcome::Noop => f.write_str("noop"),
        }
    }
}
