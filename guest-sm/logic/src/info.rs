//! The records the read-only queries answer (holdings, sessions, features,
//! counters), the superset of worlds 0.2 and 0.3 like [`crate::types`]. A
//! separate room from the commands because the features depend on which
//! world the caller exports ([`World`]): the same logic serves both, and a
//! 0.2 module must describe itself as 0.2.

use crate::types::{Holder, LockRef, Mode};

/// The world an export layer implements, where the answer differs (the
/// logic serves 0.2 and later; `lockd-core` uses the same enum).
pub use lock_key::World;

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
    /// 0: not in a session.
    pub session: u64,
    /// 1 unless entered again.
    pub count: u32,
    pub value: String,
}

/// A held key and its holdings in token order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyHolders {
    pub key: String,
    pub holders: Vec<HolderInfo>,
}

/// One live session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    pub id: u64,
    pub holder: Holder,
    pub request_id: String,
    pub ttl_ms: u64,
    pub max_holdings: u32,
    /// In key order, then token.
    pub holdings: Vec<LockRef>,
}

/// The kinds of policy rule the logic enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyKinds {
    pub reserved: bool,
    pub max_lease: bool,
    pub max_holders: bool,
    pub quota: bool,
}

/// What a module supports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Features {
    pub world_id: String,
    pub modes: Vec<Mode>,
    pub max_limit: u32,
    pub policies: PolicyKinds,
    pub idempotent_grants: bool,
    pub downgrade: bool,
    /// 0.3: false for a 0.2 module.
    pub sessions: bool,
    pub reentrant: bool,
    pub values: bool,
}

impl Features {
    /// What a module of `world` built on this logic supports.
    pub fn of(world: World) -> Features {
        let v0_3 = world >= World::V03;
        Features {
            world_id: world.id().into(),
            modes: vec![Mode::Exclusive, Mode::Shared],
            max_limit: u32::MAX,
            policies: PolicyKinds {
                reserved: true,
                max_lease: true,
                max_holders: true,
                quota: true,
            },
            idempotent_grants: true,
            downgrade: true,
            sessions: v0_3,
            reentrant: v0_3,
            values: v0_3,
        }
    }
}

/// Counters of the lock state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counters {
    pub keys: u64,
    pub holders: u64,
    pub next_token: u64,
    pub policy_rules: u32,
    /// Live sessions (0.3).
    pub sessions: u64,
    /// The id the next session will receive (0.3).
    pub next_session: u64,
}
