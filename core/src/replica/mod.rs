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
//! Layout: this file holds the state; `apply.rs` the apply path; `swap.rs`
//! the upgrade, shadow and module-key entries; `run.rs` the batch of one
//! guest call; `capacity.rs` the capacity bound; `isolate.rs` trap
//! isolation; `checkpoint.rs` the checkpoint and journal it rebuilds from;
//! `failures.rs` the failures recorded and a module taken out of service;
//! `way_back.rs` the rollback to the previous module; `cannot_run.rs` a
//! module this node cannot run, and the pre-check record that tells;
//! `query.rs` the reads of the state.
//!
//! A guest call that fails fails its commands, not the replica: see
//! `isolate.rs` ("Trap isolation"). Only a failure that rebuilding the
//! instance cannot get past stops the replica for good: the applied index
//! stays at the entry before the call's first lock entry, the call's lock
//! entries are reported as where it stopped ([`ReplicaView::poisoned_at`]),
//! and every later `apply` is refused.

use std::collections::VecDeque;
use std::sync::Arc;

use lockd_proto::{AuditKind, PoisonedAt};

use crate::audit::AuditLog;
use crate::changes::Change;
use crate::engine::{EngineError, GuestInstance, GuestModule, ModuleHash};
use crate::entry::{LogId, SnapshotMeta, StoredMembership};
use crate::precompile::Precompiler;
use crate::shadow::Shadow;
use crate::signature::TrustedKeys;
use crate::snapshot::SnapshotBlob;
use crate::upgrade::UpgradeRecord;
use crate::way_back::WayBack;
use capacity::Capacity;

mod apply;
mod cannot_run;
pub mod capacity;
mod checkpoint;
pub mod failures;
pub mod isolate;
mod query;
mod run;
mod swap;
mod way_back;

pub use query::{ReplicaView, ShadowModule};
pub use swap::record_of;

use capacity::Usage;
use checkpoint::Checkpoint;
use failures::FailureLog;
use isolate::Failed;

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
    /// The module the cluster started with (`None`: not known, from a
    /// format-4 snapshot taken after an upgrade).
    first_module: Option<ModuleHash>,
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
    /// What rebuilds the instance after a failed call (not replicated).
    checkpoint: Checkpoint,
    /// The commands of the run being applied that the module failed on.
    failed: Vec<Failed>,
    /// Every command the module failed on (replicated, in snapshots).
    failures: FailureLog,
    /// Instances rebuilt on this node (not replicated).
    rebuilds: u64,
    /// The previous module and what to do on failure (replicated, in
    /// snapshots; see [`crate::way_back`]).
    way_back: WayBack,
    /// The last quorum pre-check (replicated, in snapshots; see
    /// [`crate::precheck`]).
    precheck: Option<crate::precheck::PrecheckSeen>,
    /// Set when this node cannot run a module the cluster swaps in: the
    /// swap's index, the module and why. Nothing is applied after (not
    /// replicated).
    cannot_run: Option<lockd_proto::ModuleCannotRun>,
    /// Nothing but Raft's blank and membership entries applied since index
    /// 0 (a replica from a snapshot never is): its leader records the
    /// cluster's first module ([`crate::upgrade::Genesis`]).
    fresh: bool,
    /// The changes of the entries applied since the last
    /// [`Replica::take_changes`]; `None`: not recorded (nobody drains them).
    changes: Option<Vec<Change>>,
    #[cfg(feature = "faults")]
    fault_done: bool,
    #[cfg(feature = "faults")]
    grant_forgotten: bool,
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
        let first_module = Some(module.hash());
        Ok(Replica {
            id,
            loader,
            module,
            guest,
            last_applied: None,
            membership: StoredMembership::default(),
            module_since: 0,
            first_module,
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
            checkpoint: Checkpoint::default(),
            failed: Vec::new(),
            failures: FailureLog::default(),
            rebuilds: 0,
            way_back: WayBack::default(),
            precheck: None,
            cannot_run: None,
            fresh: true,
            changes: None,
            #[cfg(feature = "faults")]
            fault_done: false,
            #[cfg(feature = "faults")]
            grant_forgotten: false,
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
        replica.checkpoint_at(blob.guest_state.as_slice());
        replica.failures = blob.failures.clone();
        replica.way_back = blob.way_back.clone();
        replica.precheck = blob.precheck.clone();
        replica.last_applied = blob.meta.last_log_id;
        replica.membership = blob.meta.last_membership.clone();
        replica.module_since = blob.module_since;
        replica.first_module = blob.first_module;
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
        self.checkpoint = other.checkpoint;
        self.failures = other.failures;
        self.way_back = other.way_back;
        self.precheck = other.precheck;
        // Whatever stopped this replica is behind the installed state.
        self.stopped = None;
        self.last_applied = other.last_applied;
        self.membership = other.membership;
        self.module_since = other.module_since;
        self.first_module = other.first_module;
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

    /// Record what each applied entry changes, for [`Replica::take_changes`]
    /// (the host's watch). Off by default: the buffer grows until drained.
    pub fn record_changes(&mut self) {
        self.changes.get_or_insert_with(Vec::new);
    }

    /// The changes recorded since the last call, in log order.
    pub fn take_changes(&mut self) -> Vec<Change> {
        self.changes
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The snapshot of the state now, under `meta`.
    pub fn snapshot_blob(&mut self, meta: SnapshotMeta) -> Result<SnapshotBlob, EngineError> {
        Ok(SnapshotBlob {
            meta,
            module: self.module.bytes().to_vec(),
            guest_state: self.healthy()?.snapshot()?,
            module_since: self.module_since,
            upgrades: self.upgrades.iter().cloned().collect(),
            capacity: self.capacity,
            module_keys: self.module_keys.clone(),
            first_module: self.first_module,
            failures: self.failures.clone(),
            way_back: self.way_back.clone(),
            precheck: self.precheck.clone(),
        })
    }
}
