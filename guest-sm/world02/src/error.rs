//! The errors of this module's state encoding: a snapshot it refuses, a
//! state a 0.1 module cannot represent (an invalid policy is
//! [`PolicyError`], beside the policy). Each reaches the host as text (the
//! `Display` below), so each says precisely what is wrong.

use thiserror::Error;

use crate::policy::PolicyError;

/// Why `restore` refused a snapshot. The state is unchanged.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SnapshotError {
    #[error("not a lock-sm snapshot (bad magic)")]
    BadMagic,
    #[error("unknown snapshot format {0} (this module reads formats 1, 2 and 3)")]
    UnknownFormat(u8),
    #[error("snapshot body does not decode: {0}")]
    Decode(String),
    #[error("{0} trailing bytes after the snapshot body")]
    TrailingBytes(usize),
    #[error("next_token {0} is below 1")]
    NextTokenZero(u64),
    #[error("format 2 header says {header} locks, the body has {body}")]
    HeldCount { header: u64, body: usize },
    #[error("keys not in strictly ascending order at {key:?}")]
    KeysOutOfOrder { key: String },
    #[error("key {key:?} is listed with no holders")]
    NoHolders { key: String },
    #[error("key {key:?} has limit 0")]
    ZeroLimit { key: String },
    #[error("key {key:?} has {holders} holders, above its limit {limit}")]
    OverLimit {
        key: String,
        holders: usize,
        limit: u32,
    },
    #[error("tokens of {key:?} not in strictly ascending order at {token}")]
    TokensOutOfOrder { key: String, token: u64 },
    #[error("token {token} of {key:?} is not in 1..{next_token}")]
    TokenOutOfRange {
        key: String,
        token: u64,
        next_token: u64,
    },
    #[error("token {token} is held twice")]
    DuplicateToken { token: u64 },
    #[error("token {token} of {key:?} has a request id but no holder")]
    RequestWithoutHolder { key: String, token: u64 },
    #[error("request {request_id:?} of one holder is held twice on {key:?}")]
    DuplicateRequest { key: String, request_id: String },
    #[error("invalid policy data: {0}")]
    Policy(#[from] PolicyError),
}

/// Why the state cannot be written in the 0.1 module's format.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DowngradeError {
    #[error("the policy data has {0} rule(s), which a 0.1 module would not enforce; clear it (set-policy with no rules) first")]
    Policy(usize),
    #[error("key {0:?} is held in shared mode, which a 0.1 module cannot represent")]
    Shared(String),
    #[error("key {key:?} is a semaphore (limit {limit}), which a 0.1 module cannot represent")]
    Semaphore { key: String, limit: u32 },
}
