//! The lock service on the leader: the only proposer of lock commands.
//!
//! # Layout
//!
//! * [`locks`]: the leader's actor: waiters, lease timers, handoff,
//!   phantom-lock release.
//! * [`proposer`]: batches command groups into log entries.
//!
//! The functions here are what the HTTP and framed APIs call. Requests are
//! checked here — key and lease rules — and tokens in [`locks`], **before**
//! anything is proposed, so bad input never reaches the log.

pub mod locks;
pub mod proposer;

use std::time::Duration;

use openraft::error::RaftError;
use thiserror::Error;

use crate::command::LockInfo;
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
    #[error("the lock module refused to grant {key:?} (a policy of the active module; the key is not held)")]
    Refused { key: String },
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

/// Take `key`, waiting up to `wait` in the key's FIFO queue if it is held.
pub async fn acquire(
    node: &Node,
    key: &str,
    lease_ms: u64,
    wait: Duration,
) -> Result<Acquired, ServiceError> {
    check_key(key)?;
    check_lease(node, lease_ms)?;
    node.locks.acquire(key.to_string(), lease_ms, wait).await
}

/// Free `key`, if `token` is its holder's (checked before proposing).
pub async fn release(node: &Node, key: &str, token: u64) -> Result<(), ServiceError> {
    check_key(key)?;
    node.locks.release(key.to_string(), token).await
}

/// Extend the lease of `token` on `key` by its full `lease_ms`, counted from
/// before this node confirmed with a quorum that it is still the leader
/// (read-index). A deposed or partitioned leader cannot confirm, so it
/// cannot extend. Returns the lease in ms.
pub async fn keepalive(node: &Node, key: &str, token: u64) -> Result<u64, ServiceError> {
    check_key(key)?;
    let from = tokio::time::Instant::now();
    let limit = Duration::from_millis(node.config.election_max_ms());
    match tokio::time::timeout(limit, node.raft.ensure_linearizable()).await {
        Ok(Ok(_)) => {}
        Ok(Err(RaftError::APIError(openraft::error::CheckIsLeaderError::ForwardToLeader(f)))) => {
            return Err(ServiceError::NotLeader {
                id: node.id,
                leader: f.leader_id,
            })
        }
        Ok(Err(e)) => {
            return Err(ServiceError::Unavailable(format!(
                "node {} could not confirm its leadership with a quorum: {e}",
                node.id
            )))
        }
        Err(_) => {
            return Err(ServiceError::Unavailable(format!(
                "node {} could not confirm its leadership with a quorum within {} ms",
                node.id,
                limit.as_millis()
            )))
        }
    }
    node.locks.extend(key.to_string(), token, from).await
}

/// The holder of `key`, read linearizably (read-index through the leader).
pub async fn get(node: &Node, key: &str) -> Result<Option<LockInfo>, ServiceError> {
    check_key(key)?;
    match node.raft.ensure_linearizable().await {
        Ok(_) => node
            .sm
            .state()
            .guest
            .get(key)
            .map_err(|e| ServiceError::StateMachine(e.to_string())),
        Err(RaftError::APIError(openraft::error::CheckIsLeaderError::ForwardToLeader(f))) => {
            Err(ServiceError::NotLeader {
                id: node.id,
                leader: f.leader_id,
            })
        }
        Err(e) => Err(ServiceError::Unavailable(e.to_string())),
    }
}
