//! The commands, outcomes and query records of world `lockd:sm@0.2.0`
//! (`wit/lock-sm-0.2.wit`) as plain Rust types. The wasm export layer
//! converts between these and the generated WIT types one to one; the
//! meaning of every field is documented in the WIT file.

use serde::{Deserialize, Serialize};

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
    pub lease_ms: u64,
}

impl Grant {
    /// An exclusive grant with limit 1 by the anonymous holder and no
    /// request id: the seed's `Grant { key, lease_ms }`.
    pub fn exclusive(key: impl Into<String>, lease_ms: u64) -> Grant {
        Grant {
            key: key.into(),
            holder: Holder::default(),
            request_id: String::new(),
            mode: Mode::Exclusive,
            limit: 1,
            lease_ms,
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
}

/// One holding of a key.
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// A replicated lock command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Grant(Grant),
    Release(LockRef),
    Expire(LockRef),
    /// Replace the whole policy data.
    SetPolicy(Vec<PrefixPolicy>),
}

impl From<Grant> for Command {
    fn from(g: Grant) -> Command {
        Command::Grant(g)
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
}

/// Why a grant was not granted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    Busy,
    Policy(String),
    Quota(String),
    Unsupported(String),
}

/// What applying one command returns to the leader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Granted {
        token: u64,
        lease_ms: u64,
        repeat: bool,
    },
    Rejected(Reason),
    Released {
        freed: bool,
    },
    NotFound,
    Expired {
        existed: bool,
        freed: bool,
    },
    PolicySet,
    /// Never returned by this module (the host's answer to entries without
    /// lock commands).
    Noop,
}

/// One holding, as the queries show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HolderInfo {
    pub token: u64,
    pub lease_ms: u64,
    pub mode: Mode,
    pub limit: u32,
    /// `None`: carried over from a 0.1 state.
    pub holder: Option<Holder>,
    pub request_id: String,
}

/// A held key and its holdings in token order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyHolders {
    pub key: String,
    pub holders: Vec<HolderInfo>,
}

/// The kinds of policy rule the module enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyKinds {
    pub reserved: bool,
    pub max_lease: bool,
    pub max_holders: bool,
    pub quota: bool,
}

/// What the module supports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Features {
    pub world_id: String,
    pub modes: Vec<Mode>,
    pub max_limit: u32,
    pub policies: PolicyKinds,
    pub idempotent_grants: bool,
    pub downgrade: bool,
}

/// Counters of the lock state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counters {
    pub keys: u64,
    pub holders: u64,
    pub next_token: u64,
    pub policy_rules: u32,
}
