//! The records the read-only queries answer (holdings, sessions, features,
//! counters), the superset of worlds 0.2 and 0.3 like [`crate::types`]. A
//! separate room from the commands because the features depend on which
//! world the caller exports ([`World`]): the same logic serves both, and a
//! 0.2 module must describe itself as 0.2.

use crate::types::{Holder, LockRef, Mode};

/// The world an export layer implements, where the answer differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum World {
    /// `lockd:sm/lock-sm@0.2.0`: no sessions, reentry or values, snapshot
    /// formats 1 to 3.
    V0_2,
    /// `lockd:sm/lock-sm@0.3.0`: everything, snapshot formats 1 to 4.
    V0_3,
    /// `lockd:sm/lock-sm@0.4.0`: 0.3 and its election policy
    /// ([`crate::pick`]); the same state and formats.
    V0_4,
}

impl World {
    /// The world's id, as `features` reports it.
    pub const fn id(self) -> &'static str {
        match self {
            World::V0_2 => "lockd:sm/lock-sm@0.2.0",
            World::V0_3 => "lockd:sm/lock-sm@0.3.0",
            World::V0_4 => "lockd:sm/lock-sm@0.4.0",
        }
    }
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
        let v0_3 = world != World::V0_2;
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
