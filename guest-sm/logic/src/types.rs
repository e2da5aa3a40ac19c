//! The commands and outcomes of worlds `lockd:sm@0.2.0` and `@0.3.0`
//! (`wit/lock-sm-0.2.wit`, `wit/lock-sm-0.3.wit`) as plain Rust types, the
//! superset of both: a 0.2 export layer fills the 0.3 fields with their
//! defaults ([`Grant::exclusive`] and the other constructors start there)
//! and drops them from outcomes. The meaning of every field is documented
//! in the WIT files; the query records are in [`crate::info`].

use serde::{Deserialize, Serialize};

/// The most bytes a holding's value may have.
pub const MAX_VALUE_BYTES: usize = 4096;

/// How a holding shares its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Mode {
    /// Limit 1: a mutex. Limit N: a counting semaphore of N slots.
    Exclusive,
    /// Readers: coexist with other shared holders, keep out exclusive ones.
    Shared,
}

impl Mode {
    /// The byte that stands for the mode in the state hash.
    pub fn tag(self) -> u8 {
        match self {
            Mode::Exclusive => 0,
            Mode::Shared => 1,
        }
    }
}

/// Who holds a lock: the authenticated principal (set by the leader) and a
/// caller-chosen owner name.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Holder {
    pub principal: String,
    pub owner: String,
}

impl Holder {
    pub fn new(principal: impl Into<String>, owner: impl Into<String>) -> Holder {
        Holder {
            principal: principal.into(),
            owner: owner.into(),
        }
    }
}

/// Take a slot of `key`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub key: String,
    pub holder: Holder,
    /// Empty: no idempotency.
    pub request_id: String,
    pub mode: Mode,
    pub limit: u32,
    /// Ignored in a session: the holding lives as long as the session.
    pub lease_ms: u64,
    /// 0: no session (0.3).
    pub session: u64,
    /// Enter again when this holder already holds the key (0.3).
    pub reentrant: bool,
    /// The new holding's value (0.3).
    pub value: String,
}

impl Grant {
    /// An exclusive grant with limit 1 by the anonymous holder, no request
    /// id and nothing of 0.3: the seed's `Grant { key, lease_ms }`.
    pub fn exclusive(key: impl Into<String>, lease_ms: u64) -> Grant {
        Grant {
            key: key.into(),
            holder: Holder::default(),
            request_id: String::new(),
            mode: Mode::Exclusive,
            limit: 1,
            lease_ms,
            session: 0,
            reentrant: false,
            value: String::new(),
        }
    }

    /// A shared grant (limit 1 until [`Grant::limit`] says otherwise).
    pub fn shared(key: impl Into<String>, lease_ms: u64) -> Grant {
        Grant {
            mode: Mode::Shared,
            ..Grant::exclusive(key, lease_ms)
        }
    }

    pub fn limit(self, limit: u32) -> Grant {
        Grant { limit, ..self }
    }

    pub fn by(self, principal: impl Into<String>, owner: impl Into<String>) -> Grant {
        Grant {
            holder: Holder::new(principal, owner),
            ..self
        }
    }

    pub fn request(self, request_id: impl Into<String>) -> Grant {
        Grant {
            request_id: request_id.into(),
            ..self
        }
    }

    pub fn session(self, session: u64) -> Grant {
        Grant { session, ..self }
    }

    pub fn reentrant(self) -> Grant {
        Grant {
            reentrant: true,
            ..self
        }
    }

    pub fn value(self, value: impl Into<String>) -> Grant {
        Grant {
            value: value.into(),
            ..self
        }
    }
}

/// One holding of a key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct LockRef {
    pub key: String,
    pub token: u64,
}

/// Policy for every key that starts with `prefix`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrefixPolicy {
    pub prefix: String,
    pub reserved: bool,
    pub max_lease_ms: Option<u64>,
    pub max_holders: Option<u32>,
    /// The quota: holdings under the prefix, all keys together.
    pub max_held: Option<u64>,
}

impl PrefixPolicy {
    pub fn new(prefix: impl Into<String>) -> PrefixPolicy {
        PrefixPolicy {
            prefix: prefix.into(),
            ..PrefixPolicy::default()
        }
    }
}

/// Open a session (0.3). The bounds are the leader's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenSession {
    pub holder: Holder,
    /// Empty: no idempotency.
    pub request_id: String,
    pub ttl_ms: u64,
    /// The most live sessions the principal may have.
    pub max_sessions: u32,
    /// The most holdings the session may have.
    pub max_holdings: u32,
}

impl OpenSession {
    /// A session of the anonymous holder with no request id and no bounds
    /// but the counters' own.
    pub fn new(ttl_ms: u64) -> OpenSession {
        OpenSession {
            holder: Holder::default(),
            request_id: String::new(),
            ttl_ms,
            max_sessions: u32::MAX,
            max_holdings: u32::MAX,
        }
    }

    pub fn by(self, principal: impl Into<String>, owner: impl Into<String>) -> OpenSession {
        OpenSession {
            holder: Holder::new(principal, owner),
            ..self
        }
    }

    pub fn request(self, request_id: impl Into<String>) -> OpenSession {
        OpenSession {
            request_id: request_id.into(),
            ..self
        }
    }

    pub fn max_sessions(self, max_sessions: u32) -> OpenSession {
        OpenSession {
            max_sessions,
            ..self
        }
    }

    pub fn max_holdings(self, max_holdings: u32) -> OpenSession {
        OpenSession {
            max_holdings,
            ..self
        }
    }
}

/// Replace the value of the holding `(key, token)` (0.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proclaim {
    pub key: String,
    pub token: u64,
    pub value: String,
}

/// A replicated lock command. The first four are 0.2's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Grant(Grant),
    /// One count of the holding; the holding goes at 0.
    Release(LockRef),
    /// The whole holding, every count.
    Expire(LockRef),
    /// Replace the whole policy data.
    SetPolicy(Vec<PrefixPolicy>),
    OpenSession(OpenSession),
    CloseSession(u64),
    ExpireSession(u64),
    Proclaim(Proclaim),
}

impl From<Grant> for Command {
    fn from(g: Grant) -> Command {
        Command::Grant(g)
    }
}

impl From<OpenSession> for Command {
    fn from(o: OpenSession) -> Command {
        Command::OpenSession(o)
    }
}

impl Command {
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

    pub fn proclaim(key: impl Into<String>, token: u64, value: impl Into<String>) -> Command {
        Command::Proclaim(Proclaim {
            key: key.into(),
            token,
            value: value.into(),
        })
    }
}

/// Why a grant was not granted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    Busy,
    Policy(String),
    Quota(String),
    Unsupported(String),
    /// The grant names a session that does not exist (0.3).
    NoSession(u64),
}

/// What applying one command returns to the leader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Granted {
        token: u64,
        lease_ms: u64,
        repeat: bool,
        /// The holding's count now: 1 for a new holding.
        count: u32,
    },
    Rejected(Reason),
    Released {
        freed: bool,
        /// The count left: 0 when the holding was removed.
        count: u32,
    },
    NotFound,
    Expired {
        existed: bool,
        freed: bool,
    },
    PolicySet,
    /// Never returned by this logic (the host's answer to entries without
    /// lock commands).
    Noop,
    SessionOpened {
        id: u64,
        ttl_ms: u64,
        repeat: bool,
    },
    /// A session was closed or expired: the holdings it had, in key order,
    /// and the keys their removal can let a waiter in to.
    SessionEnded {
        existed: bool,
        released: Vec<LockRef>,
        freed: Vec<String>,
    },
    Proclaimed,
}
