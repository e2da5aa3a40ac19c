//! The replicated lock commands and their outcomes, as the host sees them.
//!
//! These are the types `wasmtime::component::bindgen!` generates from world
//! `lock-sm@0.3.0` (so a batch crosses into a 0.3 guest without
//! conversion), with serde derives so they can be stored in the log and sent
//! to peers. Modules of the older worlds get them through the adapters in
//! [`crate::engine`]: 0.2 runs everything but sessions, reentrant grants and
//! values; 0.1 maps the exclusive case onto the seed's three commands
//! (docs/architecture.md, "The lock commands (world 0.1)"). [`legacy`] and
//! [`v02`] hold the older worlds' types, which log entries written before
//! their successors existed still carry.
//!
//! | command | outcome |
//! |---|---|
//! | [`Command::Grant`] (key, holder, request id, mode, limit, lease, session, reentrant, value) | [`Outcome::Granted`] (token, lease, repeat, count) or [`Outcome::Rejected`] (busy, policy, quota, unsupported, no-session) |
//! | [`Command::Release`] (key, token) | [`Outcome::Released`] (freed, count) or [`Outcome::NotFound`] |
//! | [`Command::Expire`] (key, token) | [`Outcome::Expired`] (existed, freed) |
//! | [`Command::SetPolicy`] (rules) | [`Outcome::PolicySet`] or [`Outcome::Rejected`] |
//! | [`Command::OpenSession`] (holder, request id, TTL, bounds) | [`Outcome::SessionOpened`] (id, TTL, repeat) or [`Outcome::Rejected`] |
//! | [`Command::CloseSession`], [`Command::ExpireSession`] (id) | [`Outcome::SessionEnded`] (existed, holdings released, keys freed) |
//! | [`Command::Proclaim`] (key, token, value) | [`Outcome::Proclaimed`] or [`Outcome::NotFound`] |
//! | (Raft's blank and membership entries) | [`Outcome::Noop`] |

pub use crate::engine::bindings::v03::{
    Command, Expired, FeatureSet, Grant, Granted, Holder, HolderInfo, KeyHolders, LockRef, Mode,
    OpenSession, Outcome, PolicyKinds, PrefixPolicy, Proclaim, Reason, Released, SessionEnded,
    SessionInfo, SessionOpened, TableCounters,
};

/// The world-0.1 types (docs/architecture.md, "The lock commands (world
/// 0.1)").
pub mod legacy {
    pub use crate::engine::bindings::v01::{
        Command, Expire, Grant, HeldLock, LockInfo, Outcome, TableStats,
    };
}

/// The world-0.2 types, which log entries written before world 0.3 carry
/// ([`crate::entry::Request::Commands`]).
pub mod v02 {
    pub use crate::engine::bindings::v02::{Command, Grant, Holder, LockRef, Mode, PrefixPolicy};
}

mod display;

/// The largest value a holding may carry, in bytes (the 0.3 world's bound;
/// the module refuses larger ones too).
pub const MAX_VALUE_BYTES: usize = 4096;

/// What the reason of every refusal by the cluster's capacity bound starts
/// with (a `quota` refusal the host, not the module, gives; see
/// [`crate::replica::capacity`]).
pub const CAPACITY_REASON: &str = "cluster capacity";

/// The allowance [`Command::wire_bytes`] makes for a command's numbers and
/// framing (more than postcard's varints and tags take).
pub const WIRE_OVERHEAD: usize = 48;

/// Whether a `quota` refusal is the cluster's capacity bound.
pub fn is_capacity(reason: &str) -> bool {
    reason.starts_with(CAPACITY_REASON)
}

/// What the reason of every command the module failed on starts with (an
/// `unsupported` refusal the host, not the module, gives; see
/// [`crate::replica`], "Trap isolation").
pub const MODULE_FAILED_REASON: &str = "module failed";

/// The outcome of a command the module failed on, alone, with `why`.
pub fn module_failed(why: &str) -> Outcome {
    Outcome::Rejected(Reason::Unsupported(format!(
        "{MODULE_FAILED_REASON}: {why}"
    )))
}

/// Whether an `unsupported` refusal is the host's answer to a command the
/// module failed on.
pub fn is_module_failed(reason: &str) -> bool {
    reason.starts_with(MODULE_FAILED_REASON)
}

/// A module's outcome with the host's reserved reasons taken back: a
/// refusal of the module's own whose reason starts as the host's do
/// (capacity, module failed) is prefixed with `module: `, so that no
/// module can pass its refusals off as the host's.
pub fn unforged(o: Outcome) -> Outcome {
    let reserved = |r: &str| is_capacity(r) || is_module_failed(r);
    let own = |r: String| format!("module: {r}");
    match o {
        Outcome::Rejected(Reason::Quota(r)) if reserved(&r) => {
            Outcome::Rejected(Reason::Quota(own(r)))
        }
        Outcome::Rejected(Reason::Unsupported(r)) if reserved(&r) => {
            Outcome::Rejected(Reason::Unsupported(own(r)))
        }
        Outcome::Rejected(Reason::Policy(r)) if reserved(&r) => {
            Outcome::Rejected(Reason::Policy(own(r)))
        }
        o => o,
    }
}

impl From<v02::Command> for Command {
    /// A 0.2 command means the same in 0.3 with the new fields at their
    /// defaults.
    fn from(c: v02::Command) -> Command {
        match c {
            v02::Command::Grant(g) => Command::Grant(Grant {
                key: g.key,
                holder: Holder {
                    principal: g.holder.principal,
                    owner: g.holder.owner,
                },
                request_id: g.request_id,
                mode: match g.mode {
                    v02::Mode::Exclusive => Mode::Exclusive,
                    v02::Mode::Shared => Mode::Shared,
                },
                limit: g.limit,
                lease_ms: g.lease_ms,
                session: 0,
                reentrant: false,
                value: String::new(),
            }),
            v02::Command::Release(r) => Command::release(r.key, r.token),
            v02::Command::Expire(r) => Command::expire(r.key, r.token),
            v02::Command::SetPolicy(rules) => Command::SetPolicy(
                rules
                    .into_iter()
                    .map(|r| PrefixPolicy {
                        prefix: r.prefix,
                        reserved: r.reserved,
                        max_lease_ms: r.max_lease_ms,
                        max_holders: r.max_holders,
                        max_held: r.max_held,
                    })
                    .collect(),
            ),
        }
    }
}

impl Command {
    /// The same command in world 0.2's types, when it fits them (see
    /// [`Command::needs_0_3`]).
    pub fn into_v02(self) -> Option<v02::Command> {
        if self.needs_0_3() {
            return None;
        }
        Some(match self {
            Command::Grant(g) => v02::Command::Grant(v02::Grant {
                key: g.key,
                holder: v02::Holder {
                    principal: g.holder.principal,
                    owner: g.holder.owner,
                },
                request_id: g.request_id,
                mode: match g.mode {
                    Mode::Exclusive => v02::Mode::Exclusive,
                    Mode::Shared => v02::Mode::Shared,
                },
                limit: g.limit,
                lease_ms: g.lease_ms,
            }),
            Command::Release(r) => v02::Command::Release(v02::LockRef {
                key: r.key,
                token: r.token,
            }),
            Command::Expire(r) => v02::Command::Expire(v02::LockRef {
                key: r.key,
                token: r.token,
            }),
            Command::SetPolicy(rules) => v02::Command::SetPolicy(
                rules
                    .into_iter()
                    .map(|r| v02::PrefixPolicy {
                        prefix: r.prefix,
                        reserved: r.reserved,
                        max_lease_ms: r.max_lease_ms,
                        max_holders: r.max_holders,
                        max_held: r.max_held,
                    })
                    .collect(),
            ),
            Command::OpenSession(_)
            | Command::CloseSession(_)
            | Command::ExpireSession(_)
            | Command::Proclaim(_) => return None,
        })
    }
}

impl v02::Command {
    /// As [`Command::wire_bytes`].
    pub fn wire_bytes(&self) -> usize {
        WIRE_OVERHEAD
            + match self {
                v02::Command::Grant(g) => {
                    g.key.len()
                        + g.holder.principal.len()
                        + g.holder.owner.len()
                        + g.request_id.len()
                }
                v02::Command::Release(r) | v02::Command::Expire(r) => r.key.len(),
                v02::Command::SetPolicy(rules) => {
                    rules.iter().map(|r| r.prefix.len() + WIRE_OVERHEAD).sum()
                }
            }
    }
}

impl Command {
    /// A 0.1 command in 0.3's types (a 0.1 module's release ignores the
    /// token, so it is 0).
    pub fn from_legacy(c: &legacy::Command) -> Command {
        match c {
            legacy::Command::Grant(g) => Command::grant(g.key.clone(), g.lease_ms),
            legacy::Command::Release(key) => Command::release(key.clone(), 0),
            legacy::Command::Expire(e) => Command::expire(e.key.clone(), e.token),
        }
    }

    /// An exclusive grant of limit 1 (the seed's grant) for no one in
    /// particular.
    pub fn grant(key: impl Into<String>, lease_ms: u64) -> Command {
        Command::Grant(Grant {
            key: key.into(),
            holder: Holder {
                principal: String::new(),
                owner: String::new(),
            },
            request_id: String::new(),
            mode: Mode::Exclusive,
            limit: 1,
            lease_ms,
            session: 0,
            reentrant: false,
            value: String::new(),
        })
    }

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

    /// About how many bytes the command takes in a log entry: its strings
    /// exactly, a fixed allowance for its numbers and framing. What bounds a
    /// lock entry, and an AppendEntries batch, in bytes.
    pub fn wire_bytes(&self) -> usize {
        WIRE_OVERHEAD
            + match self {
                Command::Grant(g) => {
                    g.key.len()
                        + g.holder.principal.len()
                        + g.holder.owner.len()
                        + g.request_id.len()
                        + g.value.len()
                }
                Command::Release(r) | Command::Expire(r) => r.key.len(),
                Command::SetPolicy(rules) => {
                    rules.iter().map(|r| r.prefix.len() + WIRE_OVERHEAD).sum()
                }
                Command::OpenSession(o) => {
                    o.holder.principal.len() + o.holder.owner.len() + o.request_id.len()
                }
                Command::CloseSession(_) | Command::ExpireSession(_) => 0,
                Command::Proclaim(p) => p.key.len() + p.value.len(),
            }
    }

    /// The key the command is about (none for policy and session commands).
    pub fn key(&self) -> Option<&str> {
        match self {
            Command::Grant(g) => Some(&g.key),
            Command::Release(r) | Command::Expire(r) => Some(&r.key),
            Command::Proclaim(p) => Some(&p.key),
            Command::SetPolicy(_)
            | Command::OpenSession(_)
            | Command::CloseSession(_)
            | Command::ExpireSession(_) => None,
        }
    }

    /// Whether only a module of world 0.3 can run it: session commands,
    /// proclaim, and grants that name a session, enter again or carry a
    /// value.
    pub fn needs_0_3(&self) -> bool {
        match self {
            Command::Grant(g) => g.session != 0 || g.reentrant || !g.value.is_empty(),
            Command::OpenSession(_)
            | Command::CloseSession(_)
            | Command::ExpireSession(_)
            | Command::Proclaim(_) => true,
            Command::Release(_) | Command::Expire(_) | Command::SetPolicy(_) => false,
        }
    }
}

impl Mode {
    pub fn as_str(&self) -> &'static str {
        match self {
            Mode::Exclusive => "exclusive",
            Mode::Shared => "shared",
        }
    }
}

impl legacy::Command {
    /// As [`Command::wire_bytes`].
    pub fn wire_bytes(&self) -> usize {
        WIRE_OVERHEAD
            + match self {
                legacy::Command::Grant(g) => g.key.len(),
                legacy::Command::Release(k) => k.len(),
                legacy::Command::Expire(e) => e.key.len(),
            }
    }
}
