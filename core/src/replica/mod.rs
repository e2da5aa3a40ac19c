//! [`Replica`]: the replicated state of one node — the active lock module
//! and its instance, the shadow, the trusted module keys, the audit points
//! — and the one path that
//! applies committed entries to it. No I/O: the openraft adapter
//! (the host's state machine), `lockd replay` and the tests all drive this.
//!
//! Every committed range goes to the guest in **one** call
//! ([`GuestInstance::apply`]), split only where it must be: at an upgrade or
//! shadow entry (applied by the host, see [`crate::upgrade`]) and at every
//! audit point (a multiple of the audit interval, where the state hash is
//! recorded). Blank and membership entries are answered `Noop` by the host
//! without entering the guest. When a shadow module is running, the same
//! batch goes to it next and the outcomes are compared.
//!
//! Layout: this file holds the state and the apply path; `swap.rs` the
//! upgrade, shadow and module-key entries; `run.rs` the batch of one guest call;
//! `capacity.rs` the capacity bound; `query.rs` the reads of the state.
//!
//! A guest call that fails (see [`crate::engine`]) stops the replica for
//! good: the applied index stays at the entry before the call's first lock
//! entry, the call's lock entries are reported as where it stopped
//! ([`ReplicaView::poisoned_at`]), and every later `apply` is refused.

use std::collections::VecDeque;
use std::sync::Arc;

use lockd_proto::{AuditKind, PoisonedAt};

use crate::audit::AuditLog;
use crate::command::{legacy, Command, Outcome};
use crate::engine::{EngineError, GuestInstance, GuestModule};
use crate::entry::{Entry, LogId, Payload, Request, Response, SnapshotMeta, StoredMembership};
use crate::precompile::Precompiler;
use crate::shadow::Shadow;
use crate::signature::{SignedFor, TrustedKeys};
use crate::snapshot::SnapshotBlob;
use crate::upgrade::{ShadowEntry, UpgradeRecord};
use capacity::Capacity;

pub mod capacity;
mod query;
mod run;
mod swap;

pub use query::{ReplicaView, ShadowModule};
pub use swap::record_of;

use capacity::Usage;
use run::Run;

/// The cluster a replica belongs to, as bound signatures name it: its
/// id's 16 bytes, zeros while the node knows none (a cluster of builds
/// before cluster ids). The host's cluster identity is one; it may learn
/// its id after the replica was built, so it is asked at every check.
pub trait ClusterName: Send + Sync {
    fn bytes(&self) -> [u8; 16];
}

/// No cluster id: replay without a data dir, and the tests.
struct Unnamed;

impl ClusterName for Unnamed {
    fn bytes(&self) -> [u8; 16] {
        [0; 16]
    }
}

/// Upgrade records kept (in status and in snapshots).
const KEEP_UPGRADES: usize = 32;

/// The active module, its running instance, and what is applied with it.
pub struct Replica {
    id: u64,
    /// Loads modules: the one compiled when an entry was appended if there
    /// is one, else a fresh load (replay, tests, a restart).
    loader: Arc<Precompiler>,
    module: GuestModule,
    guest: GuestInstance,
    last_applied: Option<LogId>,
    membership: StoredMembership,
    /// The index at which the active module became active.
    module_since: u64,
    upgrades: VecDeque<UpgradeRecord>,
    shadow: Option<Shadow>,
    audit: AuditLog,
    upgrades_swapped: u64,
    upgrades_rejected: u64,
    /// The capacity bounds (replicated, in snapshots) and their use (exact
    /// after every group; see [`capacity`]).
    capacity: Capacity,
    usage: Usage,
    /// The module keys an upgrade or shadow must be signed by (replicated,
    /// in snapshots; none: no signature required).
    module_keys: TrustedKeys,
    /// The cluster this replica belongs to, which bound signatures name.
    cluster: Arc<dyn ClusterName>,
    /// Set when a guest call in `apply` failed: the entries of that call
    /// that carry commands. Nothing is applied after.
    stopped: Option<PoisonedAt>,
    /// Nothing but Raft's blank and membership entries applied since index
    /// 0 (a replica from a snapshot never is): its leader records the
    /// cluster's first module ([`crate::upgrade::Genesis`]).
    fresh: bool,
    #[cfg(feature = "fault-diverge")]
    fault_done: bool,
}

impl Replica {
    /// An empty lock table on `module`, nothing applied.
    pub fn new(
        id: u64,
        loader: Arc<Precompiler>,
        module: GuestModule,
        audit_interval: u64,
    ) -> Result<Replica, EngineError> {
        let guest = loader.engine().instantiate(&module)?;
        Ok(Replica {
            id,
            loader,
            module,
            guest,
            last_applied: None,
            membership: StoredMembership::default(),
            module_since: 0,
            upgrades: VecDeque::new(),
            shadow: None,
            audit: AuditLog::new(audit_interval),
            upgrades_swapped: 0,
            upgrades_rejected: 0,
            capacity: capacity::DEFAULT_CAPACITY,
            usage: Usage::default(),
            module_keys: TrustedKeys::default(),
            cluster: Arc::new(Unnamed),
            stopped: None,
            fresh: true,
            #[cfg(feature = "fault-diverge")]
            fault_done: false,
        })
    }

    /// The state a snapshot holds: its module, restored from its guest state.
    pub fn from_snapshot(
        id: u64,
        loader: Arc<Precompiler>,
        blob: &SnapshotBlob,
        audit_interval: u64,
    ) -> Result<Replica, EngineError> {
        let module = loader.load(&blob.module)?;
        let mut replica = Replica::new(id, loader, module, audit_interval)?;
        replica.guest.restore(&blob.guest_state)?;
        replica.last_applied = blob.meta.last_log_id;
        replica.membership = blob.meta.last_membership.clone();
        replica.module_since = blob.module_since;
        replica.upgrades = blob.upgrades.iter().cloned().collect();
        replica.capacity = blob.capacity;
        replica.module_keys = blob.module_keys.clone();
        replica.usage = replica.measure_usage()?;
        replica.fresh = false;
        Ok(replica)
    }

    /// Take over `other` (built from a snapshot installed from the leader),
    /// keeping this node's audit points and counters; `hash` is `other`'s
    /// state hash (the caller computed it to check the state before it kept
    /// the snapshot), recorded as an audit point.
    pub fn install(&mut self, other: Replica, hash: [u8; 32]) {
        self.module = other.module;
        self.guest = other.guest;
        self.last_applied = other.last_applied;
        self.membership = other.membership;
        self.module_since = other.module_since;
        self.fresh = false;
        self.upgrades = other.upgrades;
        self.capacity = other.capacity;
        self.usage = other.usage;
        self.module_keys = other.module_keys;
        // The shadow was compared against a state this node no longer has.
        self.shadow = None;
        if let Some(l) = self.last_applied {
            self.audit
                .record(l.index, &hash, self.module.hash(), AuditKind::Snapshot);
        }
    }

    /// The snapshot of the state now, under `meta`.
    pub fn snapshot_blob(&mut self, meta: SnapshotMeta) -> Result<SnapshotBlob, EngineError> {
        Ok(SnapshotBlob {
            meta,
            module: self.module.bytes().to_vec(),
            guest_state: self.guest.snapshot()?,
            module_since: self.module_since,
            upgrades: self.upgrades.iter().cloned().collect(),
            capacity: self.capacity,
            module_keys: self.module_keys.clone(),
        })
    }

    /// Apply committed entries, in order; one response per entry.
    pub fn apply(
        &mut self,
        entries: impl IntoIterator<Item = Entry>,
    ) -> Result<Vec<Response>, EngineError> {
        // Stopped: nothing more is applied, not even entries without commands.
        if let Some(first) = self.guest.poisoned() {
            return Err(EngineError::Poisoned(first.to_string()));
        }
        let mut run = Run::default();
        let mut responses: Vec<Option<Response>> = Vec::new();
        for entry in entries {
            let log_id = entry.log_id;
            if matches!(entry.payload, Payload::Normal(_)) {
                self.fresh = false;
            }
            let slot = responses.len();
            if run.entries.is_empty() {
                run.before = self.last_applied;
            }
            match entry.payload {
                Payload::Normal(Request::Commands(groups)) => {
                    run.push(slot, log_id, groups);
                    responses.push(None);
                }
                Payload::Normal(Request::Lock(commands)) => {
                    self.flush(&mut run, &mut responses)?;
                    let outcomes = self.apply_legacy(log_id, &commands)?;
                    responses.push(Some(Response::Lock(vec![outcomes])));
                }
                Payload::Membership(m) => {
                    self.membership = StoredMembership {
                        log_id: Some(log_id),
                        membership: m,
                    };
                    run.push_empty(slot, log_id);
                    responses.push(None);
                }
                Payload::Blank => {
                    run.push_empty(slot, log_id);
                    responses.push(None);
                }
                Payload::Normal(Request::Genesis(g)) => {
                    self.flush(&mut run, &mut responses)?;
                    let outcome = self.genesis(log_id, g);
                    responses.push(Some(Response::Upgrade(outcome)));
                }
                Payload::Normal(Request::Upgrade(up)) => {
                    self.flush(&mut run, &mut responses)?;
                    let outcome = self.upgrade(log_id, up, None, Some(SignedFor::Upgrade));
                    responses.push(Some(Response::Upgrade(outcome)));
                }
                Payload::Normal(Request::SignedUpgrade(s)) => {
                    self.flush(&mut run, &mut responses)?;
                    let outcome = self.upgrade(log_id, s.upgrade, Some(s.signature), None);
                    responses.push(Some(Response::Upgrade(outcome)));
                }
                Payload::Normal(Request::BoundUpgrade(s)) => {
                    self.flush(&mut run, &mut responses)?;
                    let outcome =
                        self.upgrade(log_id, s.upgrade, Some(s.signature), Some(s.signed_for));
                    responses.push(Some(Response::Upgrade(outcome)));
                }
                Payload::Normal(Request::Shadow(sh)) => {
                    self.flush(&mut run, &mut responses)?;
                    let outcome = self.shadow_entry(log_id, sh, None, true);
                    responses.push(Some(Response::Shadow(outcome)));
                }
                Payload::Normal(Request::SignedShadow(s)) => {
                    self.flush(&mut run, &mut responses)?;
                    let start = ShadowEntry::Start { module: s.module };
                    let outcome = self.shadow_entry(log_id, start, Some(s.signature), false);
                    responses.push(Some(Response::Shadow(outcome)));
                }
                Payload::Normal(Request::BoundShadow(s)) => {
                    self.flush(&mut run, &mut responses)?;
                    let start = ShadowEntry::Start { module: s.module };
                    let outcome = self.shadow_entry(log_id, start, Some(s.signature), true);
                    responses.push(Some(Response::Shadow(outcome)));
                }
                Payload::Normal(Request::ModuleKeys(k)) => {
                    self.flush(&mut run, &mut responses)?;
                    let result = self.module_keys_entry(log_id, &k);
                    responses.push(Some(Response::ModuleKeys(result, self.module_keys.clone())));
                }
                Payload::Normal(Request::Capacity(bounds)) => {
                    self.flush(&mut run, &mut responses)?;
                    let status = self.set_capacity(bounds);
                    responses.push(Some(Response::Capacity(status)));
                }
            }
            self.last_applied = Some(log_id);
            if self.audit.due(log_id.index) {
                self.flush(&mut run, &mut responses)?;
                self.audit_point(log_id.index);
            }
        }
        self.flush(&mut run, &mut responses)?;
        Ok(responses
            .into_iter()
            .map(|r| r.unwrap_or(Response::Lock(vec![vec![Outcome::Noop]])))
            .collect())
    }

    /// A log entry in world 0.1's types, on its own (see
    /// [`GuestInstance::apply_legacy`]).
    fn apply_legacy(
        &mut self,
        log_id: LogId,
        commands: &[legacy::Command],
    ) -> Result<Vec<Outcome>, EngineError> {
        match self.guest.apply_legacy(commands) {
            Ok(outcomes) => {
                let as_v02: Vec<Command> = commands.iter().map(Command::from_legacy).collect();
                self.usage.account(&as_v02, &outcomes);
                if let Some(shadow) = self.shadow.as_mut() {
                    shadow.feed_legacy(commands, log_id.index, &outcomes);
                }
                Ok(outcomes)
            }
            Err(e) => {
                let mut alone = Run {
                    before: self.last_applied,
                    ..Run::default()
                };
                alone.entries.push((0, commands.len().max(1), log_id));
                self.stop_at(&alone);
                Err(e)
            }
        }
    }

    /// Apply the waiting run in one guest call and fill its responses.
    fn flush(
        &mut self,
        run: &mut Run,
        responses: &mut [Option<Response>],
    ) -> Result<(), EngineError> {
        if run.entries.is_empty() {
            return Ok(());
        }
        let run = std::mem::take(run);
        let span = tracing::debug_span!(
            "apply",
            node = self.id,
            term = run.last.map(|l| l.leader_id.term),
            index = run.last.map(|l| l.index),
            entries = run.entries.len(),
            groups = run.groups.len()
        );
        let _enter = span.enter();
        let (outcomes, seen) = if run.groups.is_empty() {
            (Vec::new(), None)
        } else {
            match self.apply_groups(&run.groups) {
                Ok(applied) => applied,
                Err(e) => {
                    self.stop_at(&run);
                    return Err(e);
                }
            }
        };
        if let Some(shadow) = self.shadow.as_mut() {
            // The shadow sees what the module saw: not the grants the
            // capacity bound refused.
            match &seen {
                None => shadow.feed(&run.groups, |g| run.index_of(g), &outcomes),
                Some((sent, answered)) => shadow.feed(sent, |g| run.index_of(g), answered),
            }
        }
        #[cfg(feature = "fault-diverge")]
        self.plant_divergence(run.last);
        let mut outcomes = outcomes.into_iter();
        for (slot, n, _) in run.entries {
            let r = if n == 0 {
                vec![vec![Outcome::Noop]]
            } else {
                outcomes.by_ref().take(n).collect()
            };
            if let Some(place) = responses.get_mut(slot) {
                *place = Some(Response::Lock(r));
            }
        }
        Ok(())
    }

    /// After the guest call of `run` failed: the last entry applied is the
    /// one before the first entry with commands (any earlier entries of the
    /// run carry none and are applied), and the entries with commands are
    /// where applying stopped. Every node therefore reports the same, however
    /// its committed ranges were cut into runs, as long as the failed call
    /// holds the same lock entries (one when the failing command came
    /// alone).
    fn stop_at(&mut self, run: &Run) {
        let Some(at) = run.entries.iter().position(|e| e.1 > 0) else {
            return;
        };
        let first = run.entries[at].2.index;
        let last = run
            .entries
            .iter()
            .rev()
            .find(|e| e.1 > 0)
            .map_or(first, |e| e.2.index);
        self.last_applied = match at.checked_sub(1) {
            Some(before) => Some(run.entries[before].2),
            None => run.before,
        };
        self.stopped = Some(PoisonedAt { first, last });
        tracing::error!(
            node = self.id,
            first,
            last,
            "applying stopped: the guest failed on these entries"
        );
    }

    /// Record the state hash at `index` (and compare the shadow's).
    fn audit_point(&mut self, index: u64) {
        match self.guest.state_hash() {
            Ok(hash) => {
                self.audit
                    .record(index, &hash, self.module.hash(), AuditKind::Interval);
                if let Some(shadow) = self.shadow.as_mut() {
                    shadow.check_hash(&hash);
                }
            }
            Err(e) => {
                tracing::error!(node = self.id, index, error = %e, "state hash failed at an audit point")
            }
        }
    }

    /// Test-only fault: once the applied index reaches
    /// `LOCKD_FAULT_DIVERGE_AT`, this node applies one extra grant that no
    /// other node applies, so its state hash diverges from there on.
    #[cfg(feature = "fault-diverge")]
    fn plant_divergence(&mut self, last: Option<LogId>) {
        let Some(at) = std::env::var("LOCKD_FAULT_DIVERGE_AT")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        else {
            return;
        };
        if last.is_some_and(|l| l.index >= at) && !self.fault_done {
            self.fault_done = true;
            tracing::warn!(node = self.id, "FAULT: planting a state divergence");
            let _ = self
                .guest
                .apply(&[vec![crate::command::Command::grant("fault/diverged", 1)]]);
        }
    }
}
