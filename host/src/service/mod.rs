//! The lock service on the leader: the only proposer of lock commands.
//!
//! # Layout
//!
//! * [`proposer`]: batches command groups into log entries.
//!
//! Acquire (try once), release with the holder's token, and linearizable
//! reads. Requests are checked here — key and lease rules, token match —
//! **before** anything is proposed, so bad input never reaches the log.

pub mod proposer;

use openraft::error::RaftError;
use thiserror::Error;

use crate::command::{Command, LockInfo, Outcome};
use crate::node::Node;

/// The longest key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acquired {
    pub token: u64,
    pub lease_ms: u64,
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ServiceError {
    #[error("key must not be empty")]
    EmptyKey,
    #[error("key is {0} bytes; at most {MAX_KEY_BYTES} are allowed")]
    KeyTooLong(usize),
    #[error("key is not valid UTF-8")]
    KeyNotUtf8,
    #[error("lease_ms must be above 0")]
    ZeroLease,
    #[error("lease_ms {got} is above this cluster's maximum of {max}")]
    LeaseTooLong { got: u64, max: u64 },
    #[error("lock {key:?} is held by another holder")]
    Held { key: String },
    #[error("lock {key:?} is not held")]
    NotHeld { key: String },
    #[error("token {given} does not hold lock {key:?}")]
    WrongToken { key: String, given: u64 },
    #[error("node {id} is not the leader{}", leader.map(|l| format!("; node {l} is")).unwrap_or_default())]
    NotLeader { id: u64, leader: Option<u64> },
    #[error("consensus unavailable: {0}")]
    Unavailable(String),
    #[error("state machine failed: {0}")]
    StateMachine(String),
}

pub fn check_key(key: &str) -> Result<(), ServiceError> {
    match key.len() {
        0 => Err(ServiceError::EmptyKey),
        n if n > MAX_KEY_BYTES => Err(ServiceError::KeyTooLong(n)),
        _ => Ok(()),
    }
}

pub fn check_lease(node: &Node, lease_ms: u64) -> Result<(), ServiceError> {
    let max = node.config.max_lease_ms;
    match lease_ms {
        0 => Err(ServiceError::ZeroLease),
        n if n > max => Err(ServiceError::LeaseTooLong { got: n, max }),
        _ => Ok(()),
    }
}

fn holder(node: &Node, key: &str) -> Result<Option<LockInfo>, ServiceError> {
    node.sm.state().guest.get(key).map_err(|e| ServiceError::StateMachine(e.to_string()))
}

/// Take `key` if it is free.
pub async fn try_acquire(node: &Node, key: &str, lease_ms: u64) -> Result<Acquired, ServiceError> {
    check_key(key)?;
    check_lease(node, lease_ms)?;
    if holder(node, key)?.is_some() {
        return Err(ServiceError::Held { key: key.into() });
    }
    match node.proposer.propose_one(Command::grant(key, lease_ms)).await? {
        Outcome::Granted(token) => Ok(Acquired { token, lease_ms }),
        Outcome::GrantRejected => Err(ServiceError::Held { key: key.into() }),
        other => Err(ServiceError::StateMachine(format!("grant answered {other}"))),
    }
}

/// Free `key`, if `token` is its holder's.
pub async fn release(node: &Node, key: &str, token: u64) -> Result<(), ServiceError> {
    check_key(key)?;
    match holder(node, key)? {
        None => return Err(ServiceError::NotHeld { key: key.into() }),
        Some(h) if h.token != token => return Err(ServiceError::WrongToken { key: key.into(), given: token }),
        Some(_) => {}
    }
    match node.proposer.propose_one(Command::release(key)).await? {
        Outcome::Released => Ok(()),
        Outcome::NotFound => Err(ServiceError::NotHeld { key: key.into() }),
        other => Err(ServiceError::StateMachine(format!("release answered {other}"))),
    }
}

/// The holder of `key`, read linearizably (read-index through the leader).
pub async fn get(node: &Node, key: &str) -> Result<Option<LockInfo>, ServiceError> {
    check_key(key)?;
    match node.raft.ensure_linearizable().await {
        Ok(_) => holder(node, key),
        Err(RaftError::APIError(openraft::error::CheckIsLeaderError::ForwardToLeader(f))) => {
            Err(ServiceError::NotLeader { id: node.id, leader: f.leader_id })
        }
        Err(e) => Err(ServiceError::Unavailable(e.to_string())),
    }
}
