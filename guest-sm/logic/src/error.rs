//! The errors of the state encoding: a snapshot it refuses, a
//! state a 0.1 module cannot represent (an invalid policy is
//! [`PolicyError`], beside the policy). Each reaches the host as text (the
//! `Display` below), so each says precisely what is wrong.

use thiserror::Error;

use crate::policy::PolicyError;
use crate::types::MAX_VALUE_BYTES;

/// Why `restore` refused a snapshot. The state is unchanged.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SnapshotError {
    #[error("not a lock-sm snapshot (bad magic)")]
    BadMagic,
    #[error("unknown snapshot format {format} (this module reads formats {})", reads(*newest))]
    UnknownFormat {
        format: u8,
        /// The newest format the reading module's world has.
        newest: u8,
    },
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
    #[error("next_session {0} is below 1")]
    NextSessionZero(u64),
    #[error("session {id} is listed twice")]
    DuplicateSession { id: u64 },
    #[error("sessions not in ascending id order at {id}")]
    SessionsOutOfOrder { id: u64 },
    #[error("session {id} is not in 1..{next_session}")]
    SessionOutOfRange { id: u64, next_session: u64 },
    #[error("session {id} has TTL 0")]
    ZeroTtl { id: u64 },
    #[error("request {request_id:?} of one holder opened two live sessions")]
    DuplicateSessionRequest { request_id: String },
    #[error("principal {principal:?} has more live sessions than a count can hold")]
    PrincipalSessions { principal: String },
    #[error("token {token} of {key:?} is in session {session}, which does not exist")]
    NoSuchSession {
        key: String,
        token: u64,
        session: u64,
    },
    #[error("token {token} of {key:?} is in session {session} of another principal")]
    SessionPrincipal {
        key: String,
        token: u64,
        session: u64,
    },
    #[error(
        "token {token} of {key:?} has lease {lease_ms} ms, not the TTL of its session {session}"
    )]
    SessionLease {
        key: String,
        token: u64,
        session: u64,
        lease_ms: u64,
    },
    #[error("session {session} has more holdings than its max-holdings {max_holdings}")]
    OverMaxHoldings { session: u64, max_holdings: u32 },
    #[error("token {token} of {key:?} has count 0")]
    ZeroCount { key: String, token: u64 },
    #[error("token {token} of {key:?} has a value of {bytes} bytes, above {max}", max = MAX_VALUE_BYTES)]
    ValueTooLong {
        key: String,
        token: u64,
        bytes: usize,
    },
}

/// The formats a module whose newest is `newest` reads, as its error says
/// (0.2's text is kept word for word).
fn reads(newest: u8) -> String {
    match newest {
        0..=2 => "1 and 2".into(),
        n => {
            let older: Vec<String> = (1..n).map(|f| f.to_string()).collect();
            format!("{} and {n}", older.join(", "))
        }
    }
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
    #[error("{0} live session(s), which a 0.1 module cannot represent; close them first")]
    Sessions(usize),
    #[error("sessions were opened (the next id is {0}), and a 0.1 module would lose the counter, so session ids could be reused after an upgrade")]
    SessionCounter(u64),
    #[error(
        "token {token} of {key:?} is entered {count} times, which a 0.1 module cannot represent"
    )]
    Reentered { key: String, token: u64, count: u32 },
    #[error("token {token} of {key:?} has a value, which a 0.1 module cannot represent")]
    Value { key: String, token: u64 },
}
