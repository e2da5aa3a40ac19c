//! What the lock service answers when it cannot do what was asked, and the
//! request checks that run before anything is proposed.

use lockd_proto::ErrorCode;
use openraft::error::{ForwardToLeader, RaftError};
use openraft::TryAsRef;
use thiserror::Error;

use lockd_replication::{leader_hint, Node, NodeId};

pub use lockd_proto::MAX_KEY_BYTES;
/// The longest owner (session) name accepted, in characters (what the
/// OpenAPI document's `maxLength` counts; at most 4 bytes each).
pub(crate) const MAX_OWNER_CHARS: usize = 256;
/// The longest request id (idempotency key) accepted, in characters.
pub(crate) const MAX_REQUEST_ID_CHARS: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acquired {
    pub token: u64,
    pub lease_ms: u64,
    /// Times its holder holds it now: 1, or more for a reentrant holder
    /// that entered again.
    pub count: u32,
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
    #[error("limit must be at least 1")]
    ZeroLimit,
    #[error("a page holds 1 to {max} keys, not {got}")]
    BadLimit { got: u32, max: u32 },
    #[error("the lock module refused the policy: {0}")]
    PolicyRefused(String),
    #[error("{field} is {got} characters; at most {max} are allowed")]
    FieldTooLong {
        field: &'static str,
        got: usize,
        max: usize,
    },
    #[error("lock {key:?} is held by another holder")]
    Held { key: String },
    #[error("lock {key:?} is not held")]
    NotHeld { key: String },
    #[error("the lock module refused to grant {key:?} by its policy: {reason}")]
    Refused { key: String, reason: String },
    #[error("the lock module refused to grant {key:?}: a quota is used up: {reason}")]
    Quota { key: String, reason: String },
    /// The cluster's capacity bound (held locks or key bytes) is reached.
    #[error("cannot grant {key:?}: {reason}")]
    Capacity { key: String, reason: String },
    #[error("the active lock module cannot grant {key:?} as asked: {reason}")]
    Unsupported { key: String, reason: String },
    /// The module failed on the command (trap, fuel, memory): refused on
    /// every node while everything else goes on.
    #[error("the lock module failed on this command for {key:?}: {reason}")]
    ModuleFailed { key: String, reason: String },
    #[error("token {given} does not hold lock {key:?}")]
    WrongToken { key: String, given: u64 },
    /// The holding is another principal's: only it (or an admin) may
    /// release or renew it, whoever knows the token.
    /// `holder` is for the node's log only: a refusal never names another
    /// principal (docs/security.md, "What a refusal says").
    #[error("token {token} of lock {key:?} is held by another principal, not {caller:?}; only its holder or an admin may release or renew it")]
    NotHolder {
        key: String,
        token: u64,
        holder: String,
        caller: String,
    },
    #[error("node {id} is not the leader{}", leader.map(|l| format!("; node {l} is")).unwrap_or_default())]
    NotLeader { id: u64, leader: Option<u64> },
    #[error("consensus unavailable: {0}")]
    Unavailable(String),
    /// Too many requests in progress on this node: try again shortly.
    #[error("node busy: {0}")]
    Overloaded(String),
    #[error("no more callers may wait for {key:?} now: {reason}; try again later")]
    TooManyWaiters { key: String, reason: String },
    #[error("wait_ms {got} is above this cluster's maximum of {max}")]
    WaitTooLong { got: u64, max: u64 },
    #[error("state machine failed: {0}")]
    StateMachine(String),
    #[error("session {id} does not exist (never opened, closed or expired)")]
    NoSession { id: u64 },
    #[error("session TTL must be 1 ms to {max} ms, not {got} ms")]
    BadTtl { got: u64, max: u64 },
    /// The session is another principal's: only it (or an admin) may
    /// use, renew or close it. `holder` is for the node's log only.
    #[error("session {id} is another principal's, not {caller:?}'s; only its principal or an admin may use, renew or close it")]
    NotSessionHolder {
        id: u64,
        holder: String,
        caller: String,
    },
}

pub fn check_key(key: &str) -> Result<(), ServiceError> {
    match key.len() {
        0 => Err(ServiceError::EmptyKey),
        n if n > MAX_KEY_BYTES => Err(ServiceError::KeyTooLong(n)),
        _ => Ok(()),
    }
}

impl ServiceError {
    /// The outcome label of this error in metrics (`{result="…"}`): few
    /// values, so a label never grows with keys or messages; a function of
    /// the code, so the two never disagree.
    pub(crate) fn metric_label(&self) -> &'static str {
        match self.code() {
            ErrorCode::Held => "held",
            ErrorCode::Refused | ErrorCode::Quota | ErrorCode::Unsupported => "refused",
            ErrorCode::Capacity | ErrorCode::TooManyWaiters | ErrorCode::Overloaded => "limit",
            ErrorCode::NotHeld | ErrorCode::WrongToken | ErrorCode::NotHolder => "not_holder",
            ErrorCode::NoSession | ErrorCode::NotSessionHolder => "no_session",
            ErrorCode::NotLeader => "not_leader",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Internal | ErrorCode::ModuleFailed => "error",
            // Bad input: nothing was proposed.
            _ => "invalid",
        }
    }

    /// The leader a `NotLeader` refusal names, when this node knows it.
    pub fn leader(&self) -> Option<u64> {
        match self {
            ServiceError::NotLeader { leader, .. } => *leader,
            _ => None,
        }
    }

    /// The stable code of this error (docs/api.md, "Error codes"), the
    /// same over HTTP and the native protocol.
    pub fn code(&self) -> ErrorCode {
        use ServiceError::*;
        match self {
            EmptyKey | KeyTooLong(_) | KeyNotUtf8 => ErrorCode::InvalidKey,
            ZeroLease | LeaseTooLong { .. } => ErrorCode::InvalidLease,
            WaitTooLong { .. } => ErrorCode::InvalidWait,
            ZeroLimit | BadLimit { .. } => ErrorCode::InvalidLimit,
            FieldTooLong { .. } => ErrorCode::FieldTooLong,
            PolicyRefused(_) => ErrorCode::PolicyRefused,
            Held { .. } => ErrorCode::Held,
            Refused { .. } => ErrorCode::Refused,
            Quota { .. } => ErrorCode::Quota,
            Capacity { .. } => ErrorCode::Capacity,
            Unsupported { .. } => ErrorCode::Unsupported,
            ModuleFailed { .. } => ErrorCode::ModuleFailed,
            TooManyWaiters { .. } => ErrorCode::TooManyWaiters,
            Overloaded(_) => ErrorCode::Overloaded,
            NotHeld { .. } => ErrorCode::NotHeld,
            WrongToken { .. } => ErrorCode::WrongToken,
            NotHolder { .. } => ErrorCode::NotHolder,
            NotLeader { .. } => ErrorCode::NotLeader,
            Unavailable(_) => ErrorCode::Unavailable,
            StateMachine(_) => ErrorCode::Internal,
            NoSession { .. } => ErrorCode::NoSession,
            BadTtl { .. } => ErrorCode::InvalidTtl,
            NotSessionHolder { .. } => ErrorCode::NotSessionHolder,
        }
    }

    /// openraft refused a call on node `id`: another node leads (with the
    /// leader it named), or consensus is unavailable, said by `unavailable`.
    pub fn from_raft<E>(
        id: NodeId,
        e: RaftError<NodeId, E>,
        unavailable: impl FnOnce(RaftError<NodeId, E>) -> String,
    ) -> ServiceError
    where
        E: TryAsRef<ForwardToLeader<NodeId, Node>> + std::fmt::Debug,
    {
        match leader_hint(&e) {
            Some(leader) => ServiceError::NotLeader { id, leader },
            None => ServiceError::Unavailable(unavailable(e)),
        }
    }
}

/// The module capability a request needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Needs {
    Sessions,
    Reentrant,
    Values,
}

impl Needs {
    pub(super) fn name(self) -> &'static str {
        match self {
            Needs::Sessions => "sessions",
            Needs::Reentrant => "reentrant locks",
            Needs::Values => "holding values",
        }
    }
}

/// A field's bound in characters, counted only past `max` bytes.
pub(super) fn check_len(field: &'static str, value: &str, max: usize) -> Result<(), ServiceError> {
    if value.len() > max {
        let got = value.chars().count();
        if got > max {
            return Err(ServiceError::FieldTooLong { field, got, max });
        }
    }
    Ok(())
}

/// The longest value a holding may publish, in characters: so many always
/// fit the module's bound in bytes ([`lockd_core::command::MAX_VALUE_BYTES`]), 4 bytes a
/// character at most, so the API and the module never disagree.
pub(crate) const MAX_VALUE_CHARS: usize = lockd_core::command::MAX_VALUE_BYTES / 4;

/// A holding's value: at most [`MAX_VALUE_CHARS`] characters.
pub(super) fn check_value(value: &str) -> Result<(), ServiceError> {
    check_len("value", value, MAX_VALUE_CHARS)
}
