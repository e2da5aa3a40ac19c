//! The native client protocol: requests, responses, errors.
//!
//! Keys travel as bytes so that a key that is not UTF-8 reaches the node and
//! gets its precise error, instead of failing to decode as a frame.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientRequest {
    /// Take `key`; wait up to `wait_ms` in the key's FIFO queue if held.
    Acquire {
        key: Vec<u8>,
        lease_ms: u64,
        wait_ms: u64,
    },
    Release {
        key: Vec<u8>,
        token: u64,
    },
    Keepalive {
        key: Vec<u8>,
        token: u64,
    },
    /// Linearizable read of a key's holder.
    Get {
        key: Vec<u8>,
    },
    /// The answering node's status.
    Status,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientResponse {
    Acquired { token: u64, lease_ms: u64 },
    Released,
    KeptAlive { lease_ms: u64 },
    Lock(Option<LockView>),
    Status(Box<Status>),
    Error(WireError),
}

/// A held lock as a client sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockView {
    pub token: u64,
    pub lease_ms: u64,
}

/// Why a request failed. The message is the node's precise wording.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum WireError {
    /// Bad input: nothing was proposed.
    #[error("{0}")]
    BadRequest(String),
    /// Still held after the wait.
    #[error("{0}")]
    Held(String),
    #[error("{0}")]
    NotHeld(String),
    #[error("{0}")]
    WrongToken(String),
    /// Ask the leader instead (its address when known).
    #[error("{message}")]
    NotLeader {
        leader: Option<u64>,
        leader_addr: Option<String>,
        message: String,
    },
    /// No quorum, leadership changing, shutting down: try again.
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Internal(String),
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Member {
    pub id: u64,
    pub addr: String,
    pub voter: bool,
}

/// A node's status (`GET /v1/status`, `lockctl status`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Status {
    pub id: u64,
    pub addr: String,
    /// "leader", "follower", "candidate", "learner" (or "shutdown").
    pub role: String,
    pub leader: Option<u64>,
    pub term: u64,
    pub commit_index: u64,
    pub applied_index: u64,
    pub last_log_index: u64,
    pub snapshot_index: Option<u64>,
    pub purged_index: Option<u64>,
    pub members: Vec<Member>,
    /// SHA-256 of the active module's component bytes.
    pub module_hash: String,
    pub module_version: String,
    /// The guest state hash at `applied_index`.
    pub state_hash: String,
    pub locks_held: u64,
    pub engine_fingerprint: String,
    pub snapshots_built: u64,
    pub snapshots_installed: u64,
    pub wal_fsyncs: u64,
    pub wal_entries: u64,
    /// Set when the guest failed and the state machine stopped applying.
    pub poisoned: Option<String>,
}
