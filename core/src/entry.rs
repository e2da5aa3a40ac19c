//! The log entry: what a committed entry carries ([`Request`]) and what
//! applying it returns ([`Response`]), with the Raft identities the replica
//! needs ([`LogId`], [`Membership`]).
//!
//! These are the server's persisted formats (docs/architecture.md,
//! "Formats"): a log entry is postcard, read by position, and every replica
//! must decode every entry ever written identically. So a variant is only
//! appended, a field never added in place (a new variant instead), and the
//! bytes of every kind are pinned by golden files (`tests/golden/`).
//!
//! [`LogId`], [`Membership`], [`StoredMembership`] and [`SnapshotMeta`] have
//! the field order and serde form of openraft's types of the same names
//! (openraft 0.9, `serde` feature), so they encode to the same bytes; the
//! host converts at its openraft adapters. The core stays free of openraft,
//! and therefore of tokio.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::command::{legacy, v02, Command, Outcome};
use crate::signature::{KeyChange, KeyEntry, KeyError, SignedShadowStart, TrustedKeys};
use crate::upgrade::{BoundUpgrade, SignedUpgrade};
use crate::upgrade::{ShadowEntry, ShadowOutcome, UpgradeEntry, UpgradeOutcome};

/// The term and node of the leader that proposed an entry.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct LeaderId {
    pub term: u64,
    pub node_id: u64,
}

/// An entry's identity: its leader and its index.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct LogId {
    pub leader_id: LeaderId,
    pub index: u64,
}

impl LogId {
    pub fn new(term: u64, node_id: u64, index: u64) -> LogId {
        LogId {
            leader_id: LeaderId { term, node_id },
            index,
        }
    }
}

/// A member's address, as the membership records it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    pub addr: String,
}

/// A membership configuration: one voter set, or two during a change
/// (joint consensus); a node in `nodes` but in no set is a learner.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    pub configs: Vec<BTreeSet<u64>>,
    pub nodes: BTreeMap<u64, Node>,
}

/// A membership and the entry that carried it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredMembership {
    pub log_id: Option<LogId>,
    pub membership: Membership,
}

/// What a snapshot covers: its last entry, its membership, its name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotMeta {
    pub last_log_id: Option<LogId>,
    pub last_membership: StoredMembership,
    pub snapshot_id: String,
}

/// A committed entry as the replica applies it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub log_id: LogId,
    pub payload: Payload,
}

/// What a committed entry carries: nothing (a new leader's blank entry), a
/// membership, or a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    Blank,
    Normal(Request),
    Membership(Membership),
}

/// The application payload of a log entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Lock commands in world 0.1's types, as entries written before world
    /// 0.2 carry them; still applied (variant order is the log format).
    Lock(Vec<legacy::Command>),
    /// Replace the lock module (see [`crate::upgrade`]).
    Upgrade(UpgradeEntry),
    /// Start or stop a shadow module (see [`crate::shadow`]).
    Shadow(ShadowEntry),
    /// Replicated lock commands in groups, in world 0.2's types, applied in
    /// this order; each group is one entry of the module's `apply` (a
    /// `busy` grant makes the later grants of its key in the group wait).
    /// The leader puts every group waiting at the moment into one log entry
    /// (see the host's proposer): one fsync for many commands. Still what
    /// a leader proposes when every command fits world 0.2 (see
    /// [`Request::commands`]).
    Commands(Vec<Vec<v02::Command>>),
    /// Set the cluster's capacity bounds (see [`crate::replica::capacity`]).
    Capacity(crate::replica::capacity::Capacity),
    /// Trust or untrust a module key (see [`crate::signature`]).
    ModuleKeys(KeyEntry),
    /// An upgrade carrying its module's signature; an unsigned upgrade is
    /// still [`Request::Upgrade`].
    SignedUpgrade(SignedUpgrade),
    /// A shadow start carrying its module's signature.
    SignedShadow(SignedShadowStart),
    /// An upgrade (or the promote of a shadow) carrying a signature bound
    /// to its use (see [`crate::signature`]); what a leader
    /// proposes for a signed upgrade since bound signatures.
    BoundUpgrade(BoundUpgrade),
    /// A shadow start carrying a signature bound to its use.
    BoundShadow(SignedShadowStart),
    /// The first module of a new cluster (see [`crate::upgrade::Genesis`]).
    Genesis(crate::upgrade::Genesis),
    /// As [`Request::Commands`], in world 0.3's types: what a leader
    /// proposes when a command needs 0.3 (a session, a reentrant grant, a
    /// value).
    Commands03(Vec<Vec<Command>>),
    /// An upgrade (or a promote) with versions and a way back (see
    /// [`crate::way_back`]): what a leader proposes since versions.
    VersionedUpgrade(crate::way_back::VersionedUpgrade),
    /// Return to the previous module (see [`crate::way_back`]).
    Rollback(crate::way_back::RollbackEntry),
    /// Every voter's verdict on a candidate module, written before the
    /// candidate is proposed (see [`crate::precheck`]).
    Precheck(crate::precheck::PrecheckRecord),
}

/// What applying an entry returns to the proposer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// One list of outcomes per group of the entry, one outcome per
    /// command (a legacy entry is one group); a single group of one `Noop`
    /// for Raft's blank and membership entries.
    Lock(Vec<Vec<Outcome>>),
    Upgrade(UpgradeOutcome),
    Shadow(ShadowOutcome),
    /// The bounds now in force and their use.
    Capacity(lockd_proto::CapacityStatus),
    /// What a module-key entry did, and the keys trusted after it.
    ModuleKeys(Result<KeyChange, KeyError>, TrustedKeys),
    /// A pre-check record kept: whether it lets its module in.
    Precheck(bool),
}

impl Request {
    /// The entry for lock command groups: [`Request::Commands`] when every
    /// command fits world 0.2, so that a node of an older binary (a rolling
    /// upgrade) reads every entry a cluster writes until a 0.3 feature is
    /// used, which needs a 0.3 module, which needs the new binary
    /// everywhere; else [`Request::Commands03`].
    pub fn commands(groups: Vec<Vec<Command>>) -> Request {
        if groups.iter().flatten().any(Command::needs_0_3) {
            return Request::Commands03(groups);
        }
        Request::Commands(
            groups
                .into_iter()
                .map(|g| g.into_iter().filter_map(Command::into_v02).collect())
                .collect(),
        )
    }

    /// The lock command groups of [`Request::Commands`] or
    /// [`Request::Commands03`], in world 0.3's types.
    pub fn into_commands(self) -> Option<Vec<Vec<Command>>> {
        match self {
            Request::Commands(groups) => Some(
                groups
                    .into_iter()
                    .map(|g| g.into_iter().map(Command::from).collect())
                    .collect(),
            ),
            Request::Commands03(groups) => Some(groups),
            _ => None,
        }
    }

    /// About how many bytes the entry takes on the wire: module bytes and
    /// strings counted exactly, a fixed allowance for each command's
    /// numbers and framing. What bounds an AppendEntries batch in bytes.
    pub fn wire_bytes(&self) -> usize {
        crate::command::WIRE_OVERHEAD
            + match self {
                Request::Lock(cs) => cs.iter().map(legacy::Command::wire_bytes).sum(),
                Request::Commands(groups) => {
                    groups.iter().flatten().map(v02::Command::wire_bytes).sum()
                }
                Request::Commands03(groups) => {
                    groups.iter().flatten().map(Command::wire_bytes).sum()
                }
                Request::Upgrade(u) => u.module.len(),
                Request::Genesis(g) => g.module.len(),
                Request::SignedUpgrade(s) => s.upgrade.module.len() + s.signature.0.len(),
                Request::Shadow(ShadowEntry::Start { module }) => module.len(),
                Request::SignedShadow(s) | Request::BoundShadow(s) => {
                    s.module.len() + s.signature.0.len()
                }
                Request::BoundUpgrade(s) => s.upgrade.module.len() + s.signature.0.len(),
                Request::VersionedUpgrade(v) => v.upgrade.module.len() + 64,
                Request::ModuleKeys(_) | Request::Rollback(_) => 64,
                Request::Precheck(p) => p
                    .verdicts
                    .iter()
                    .map(|v| 24 + v.reason.as_ref().map_or(0, String::len))
                    .sum::<usize>()
                    .saturating_add(64),
                Request::Shadow(ShadowEntry::Stop) | Request::Capacity(_) => 0,
            }
    }

    /// Whether applying the entry may swap the active module (an upgrade
    /// of any kind, or a rollback, which carries no bytes).
    pub fn swaps_module(&self) -> bool {
        matches!(
            self,
            Request::Upgrade(_)
                | Request::SignedUpgrade(_)
                | Request::BoundUpgrade(_)
                | Request::VersionedUpgrade(_)
                | Request::Rollback(_)
        )
    }

    /// The component bytes an entry carries, if any (upgrade, shadow start):
    /// what the log store hands to the precompiler on append.
    pub fn module_bytes(&self) -> Option<&[u8]> {
        match self {
            Request::Upgrade(u) => Some(&u.module),
            Request::Genesis(g) => Some(&g.module),
            Request::SignedUpgrade(s) => Some(&s.upgrade.module),
            Request::Shadow(ShadowEntry::Start { module }) => Some(module),
            Request::SignedShadow(s) | Request::BoundShadow(s) => Some(&s.module),
            Request::BoundUpgrade(s) => Some(&s.upgrade.module),
            Request::VersionedUpgrade(v) => Some(&v.upgrade.module),
            Request::Lock(_)
            | Request::Rollback(_)
            | Request::Commands(_)
            | Request::Commands03(_)
            | Request::Capacity(_)
            | Request::ModuleKeys(_)
            | Request::Precheck(_)
            | Request::Shadow(ShadowEntry::Stop) => None,
        }
    }
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::Lock(cs) => {
                write!(f, "[")?;
                for (i, c) in cs.iter().enumerate() {
                    write!(f, "{}{c}", if i > 0 { ", " } else { "" })?;
                }
                write!(f, "]")
            }
            Request::Commands(groups) => {
                let groups: Vec<Vec<Command>> = groups
                    .iter()
                    .map(|g| g.iter().cloned().map(Command::from).collect())
                    .collect();
                write!(f, "{}", Request::Commands03(groups))
            }
            Request::Commands03(groups) => {
                write!(f, "[")?;
                for (g, cs) in groups.iter().enumerate() {
                    write!(f, "{}[", if g > 0 { ", " } else { "" })?;
                    for (i, c) in cs.iter().enumerate() {
                        write!(f, "{}{c}", if i > 0 { ", " } else { "" })?;
                    }
                    write!(f, "]")?;
                }
                write!(f, "]")
            }
            Request::Upgrade(u) => write!(f, "{u:?}"),
            Request::Genesis(g) => write!(f, "{g:?}"),
            Request::SignedUpgrade(s) => write!(f, "{:?} signed {}", s.upgrade, s.signature),
            Request::Shadow(s) => write!(f, "{s:?}"),
            Request::SignedShadow(s) => write!(f, "{s:?}"),
            Request::BoundUpgrade(s) => write!(
                f,
                "{:?} signed {} for {:?}",
                s.upgrade, s.signature, s.signed_for
            ),
            Request::BoundShadow(s) => write!(f, "bound {s:?}"),
            Request::VersionedUpgrade(v) => write!(
                f,
                "{:?} for {:?}{}{}, on failure {}",
                v.upgrade,
                v.signed_for,
                v.signature
                    .map(|s| format!(" signed {s}"))
                    .unwrap_or_default(),
                if v.rollback { ", as a rollback" } else { "" },
                v.on_failure.as_str()
            ),
            Request::Rollback(r) => write!(f, "rollback from {} to {}", r.replaces, r.to),
            Request::Precheck(p) => write!(
                f,
                "pre-check of {}: {} of {} voters accepted{}",
                p.module,
                p.verdicts.iter().filter(|v| v.accepted).count(),
                p.verdicts.len(),
                if p.enacted { ", enacted" } else { "" }
            ),
            Request::ModuleKeys(KeyEntry::Trust(k)) => write!(f, "trust module key {k}"),
            Request::ModuleKeys(KeyEntry::Untrust(k)) => write!(f, "untrust module key {k}"),
            Request::Capacity(c) => write!(
                f,
                "capacity(max_held {}, max_key_bytes {})",
                c.max_held, c.max_key_bytes
            ),
        }
    }
}
