//! The native client protocol: requests, responses, errors.

use serde::{Deserialize, Serialize};

use crate::Status;

/// The longest lock key accepted, in bytes (also the longest watch
/// prefix): a node refuses longer ones before anything is proposed.
pub const MAX_KEY_BYTES: usize = 1024;

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
    /// Take a slot of `key` as a module of world 0.2 understands it.
    /// Variants are appended, so older peers decode every earlier one.
    AcquireWith(AcquireRequest),
    /// Every holding of `key`, read linearizably.
    Holders {
        key: Vec<u8>,
    },
    /// Held keys under `prefix`, after `after`, at most `limit`.
    List {
        prefix: Vec<u8>,
        after: Option<Vec<u8>>,
        limit: u32,
    },
    /// Follow the changes under a prefix: answered by a stream of
    /// responses under this request's id (see [`crate::WatchRequest`]).
    Watch(crate::WatchRequest),
    /// Take a slot of `key` with the options of world 0.3 (a session,
    /// reentrancy, a value): answered [`ClientResponse::Granted`].
    AcquireIn(Acquire3),
    /// Open a session: answered [`ClientResponse::SessionOpened`].
    OpenSession {
        ttl_ms: u64,
        owner: String,
        request_id: String,
    },
    /// Renew a session: answered [`ClientResponse::KeptAlive`] (its TTL).
    KeepSession {
        id: u64,
    },
    /// Close a session: answered [`ClientResponse::SessionClosed`].
    CloseSession {
        id: u64,
    },
    /// Replace a holding's value: answered [`ClientResponse::Done`].
    Proclaim {
        key: Vec<u8>,
        token: u64,
        value: String,
    },
    /// Release one count of a holding: answered
    /// [`ClientResponse::ReleasedCount`] (what is left: 0 when released).
    ReleaseCount {
        key: Vec<u8>,
        token: u64,
    },
    /// The leader of election `key` (its first holding), read
    /// linearizably: answered [`ClientResponse::Leader`].
    Leader {
        key: Vec<u8>,
    },
    /// [`ClientRequest::AcquireIn`] with a priority among the waiters
    /// (world 0.4's `pick`): answered [`ClientResponse::Granted`].
    AcquireRanked(Acquire4),
}

/// An election's leader: the holding, its published value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderView {
    /// The leadership's epoch (its fencing token; 0 unless the caller may
    /// see it, as for holdings).
    pub token: u64,
    pub holder: Option<HolderId>,
    pub value: String,
}

/// An acquire with the options of world 0.3: 0.2's and a session,
/// reentrancy and a value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acquire3 {
    pub base: AcquireRequest,
    /// 0: no session.
    pub session: u64,
    pub reentrant: bool,
    pub value: String,
}

/// An acquire with a priority among the key's waiters: higher asks to go
/// earlier when the key frees (what it means is the module's `pick`; a
/// module before world 0.4 keeps FIFO).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acquire4 {
    pub base: Acquire3,
    pub priority: u32,
}

/// The most readers a shared acquire that gives no limit admits, when the
/// key has no readers yet and no policy rule of its prefix sets a lower
/// `max-holders` (docs/lock-modules.md, "Shared locks").
pub const DEFAULT_SHARED_LIMIT: u32 = 1024;

/// How a holding shares its key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum LockMode {
    /// With limit 1 a mutex; with limit N a counting semaphore of N.
    #[default]
    Exclusive,
    /// A reader of a readers-writer lock (up to `limit` together; without a
    /// limit, as many as the key's readers already agreed on, else
    /// [`DEFAULT_SHARED_LIMIT`] or the prefix's `max-holders`).
    Shared,
}

impl LockMode {
    pub fn as_str(self) -> &'static str {
        match self {
            LockMode::Exclusive => "exclusive",
            LockMode::Shared => "shared",
        }
    }
}

/// An acquire with the options of world 0.2.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcquireRequest {
    pub key: Vec<u8>,
    pub lease_ms: u64,
    pub wait_ms: u64,
    pub mode: LockMode,
    /// Holders at once; 0: not given (exclusive: 1; shared: see
    /// [`LockMode::Shared`]).
    pub limit: u32,
    /// A caller-chosen owner (session) name.
    pub owner: String,
    /// With `owner`, makes a retry return the grant that committed.
    pub request_id: String,
}

/// One holding of a key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holding {
    pub token: u64,
    pub lease_ms: u64,
    pub mode: LockMode,
    pub limit: u32,
    /// `None`: carried over from a world-0.1 state, holder unknown.
    pub holder: Option<HolderId>,
    pub request_id: String,
}

/// Who holds a holding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HolderId {
    pub principal: String,
    pub owner: String,
}

/// A held key and its holdings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyHoldings {
    pub key: String,
    pub holdings: Vec<Holding>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientResponse {
    Acquired {
        token: u64,
        lease_ms: u64,
    },
    Released,
    KeptAlive {
        lease_ms: u64,
    },
    Lock(Option<LockView>),
    Status(Box<Status>),
    Error(WireError),
    Holders(Vec<Holding>),
    Listed(Vec<KeyHoldings>),
    /// A watch's changes at one log index.
    Changes(crate::ChangeBatch),
    /// A watch has sent everything up to this index.
    Progress {
        index: u64,
    },
    /// A watch ended (its last response).
    Cut(crate::WatchCut),
    /// A grant with the times its holder holds it (1, or more after a
    /// reentrant holder entered again).
    Granted {
        token: u64,
        lease_ms: u64,
        count: u32,
    },
    SessionOpened {
        id: u64,
        ttl_ms: u64,
    },
    /// The holdings a session's close released: (key, token).
    SessionClosed(Vec<(String, u64)>),
    /// What is left of a reentrant holding after a release (0: released).
    ReleasedCount(u32),
    /// Done, with nothing to say.
    Done,
    /// An election's leader (none: no leader now) and the log index it
    /// was read at: a watch from one past it misses no change.
    Leader {
        index: u64,
        leader: Option<LeaderView>,
    },
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
    /// The lock module's policy refused the grant.
    /// New variants go last, so that older peers decode every earlier
    /// variant unchanged.
    #[error("{0}")]
    Refused(String),
    /// A quota of the lock module's policy data is used up.
    #[error("{0}")]
    Quota(String),
    /// The active lock module cannot serve the request as asked (a mode or
    /// limit it does not support, a limit unlike the key's holders').
    #[error("{0}")]
    Unsupported(String),
    /// A bound on waiting callers is reached (per key or in all): try
    /// again later.
    #[error("{0}")]
    TooManyWaiters(String),
    /// The cluster's capacity (held locks or key bytes) is used up: the
    /// grant is refused until holdings are freed or the bound is raised.
    #[error("{0}")]
    Capacity(String),
    /// No credentials, or ones the node does not accept.
    #[error("{0}")]
    Unauthenticated(String),
    /// The caller's roles do not allow the request (or the holding is
    /// another principal's).
    #[error("{0}")]
    Forbidden(String),
}

impl WireError {
    /// The code this kind of error has when the node sent no more precise
    /// one (the native error trailer; docs/api.md, "Error codes").
    pub fn code(&self) -> crate::ErrorCode {
        use crate::ErrorCode as C;
        match self {
            WireError::BadRequest(_) => C::BadRequest,
            WireError::Held(_) => C::Held,
            WireError::NotHeld(_) => C::NotHeld,
            WireError::WrongToken(_) => C::WrongToken,
            WireError::NotLeader { .. } => C::NotLeader,
            WireError::Unavailable(_) => C::Unavailable,
            WireError::Internal(_) => C::Internal,
            WireError::Refused(_) => C::Refused,
            WireError::Quota(_) => C::Quota,
            WireError::Unsupported(_) => C::Unsupported,
            WireError::TooManyWaiters(_) => C::TooManyWaiters,
            WireError::Capacity(_) => C::Capacity,
            WireError::Unauthenticated(_) => C::Unauthenticated,
            WireError::Forbidden(_) => C::Forbidden,
        }
    }
    /// The kind of error an answer with `code` travels as on the native
    /// protocol (the code itself goes beside it, in the error trailer).
    /// `NotLeader` comes without the leader: the node adds it. Codes only
    /// the HTTP admin routes answer travel as `BadRequest`.
    pub fn of_code(code: crate::ErrorCode, message: String) -> WireError {
        use crate::ErrorCode as C;
        match code {
            C::Held => WireError::Held(message),
            C::NotHeld | C::NoSession => WireError::NotHeld(message),
            C::WrongToken => WireError::WrongToken(message),
            C::NotLeader => WireError::NotLeader {
                leader: None,
                leader_addr: None,
                message,
            },
            C::Unavailable
            | C::Overloaded
            | C::Timeout
            | C::ShuttingDown
            | C::Busy
            | C::CatchingUp
            | C::NodeUnreachable => WireError::Unavailable(message),
            C::Internal | C::ModuleFailed => WireError::Internal(message),
            C::Refused => WireError::Refused(message),
            C::Quota => WireError::Quota(message),
            C::Unsupported | C::PolicyRefused => WireError::Unsupported(message),
            C::TooManyWaiters | C::TooManyWatchers => WireError::TooManyWaiters(message),
            C::Capacity => WireError::Capacity(message),
            C::Unauthenticated => WireError::Unauthenticated(message),
            C::Forbidden | C::NotHolder | C::NotSessionHolder | C::BadSignature | C::Revoked => {
                WireError::Forbidden(message)
            }
            C::BadRequest
            | C::InvalidKey
            | C::InvalidLease
            | C::InvalidWait
            | C::InvalidLimit
            | C::FieldTooLong
            | C::InvalidTtl
            | C::BodyTooLarge
            | C::BadContentType
            | C::NotFound
            | C::MethodNotAllowed
            | C::RequestTimeout
            | C::UnknownHost
            | C::BadAddress
            | C::NodeRefused
            | C::LastVoter
            | C::NotMember
            | C::NotLearner
            | C::NotAudited
            | C::InvalidModule
            | C::StaleModule
            | C::ModuleRefused
            | C::BadModuleKey
            | C::NoShadow
            | C::ShadowConflict
            | C::Compacted
            | C::ModuleNotNewer
            | C::NoPreviousModule
            | C::PrecheckRefused => WireError::BadRequest(message),
        }
    }
}
