//! What a node reports: status, members, capacity, audit points, admin
//! actions (upgrade records and the shadow: `upgrade_status`).

use serde::{Deserialize, Serialize};

use crate::module_status::{
    ModuleCannotRun, ModuleFailure, ModuleOutOfService, ModulePrecheck, ModuleWayBack,
};
use crate::upgrade_status::{ShadowStatus, UpgradeRecord};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Member {
    pub id: u64,
    pub addr: String,
    pub voter: bool,
}

/// A node's part in the cluster, as status reports it (lowercase in JSON).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Role {
    Leader,
    Follower,
    Candidate,
    Learner,
    Shutdown,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Leader => "leader",
            Role::Follower => "follower",
            Role::Candidate => "candidate",
            Role::Learner => "learner",
            Role::Shutdown => "shutdown",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an audit point was recorded (lowercase in JSON).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum AuditKind {
    /// A multiple of the audit interval.
    Interval,
    /// Right after an upgrade entry.
    Upgrade,
    /// Right after installing a snapshot.
    Snapshot,
}

/// A node's status (`GET /v1/status`, `lockctl status`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Status {
    pub id: u64,
    pub addr: String,
    pub role: Role,
    pub leader: Option<u64>,
    pub term: u64,
    pub commit_index: u64,
    pub applied_index: u64,
    pub last_log_index: u64,
    pub snapshot_index: Option<u64>,
    pub purged_index: Option<u64>,
    pub members: Vec<Member>,
    /// SHA-256 of the active module's component bytes.
    pub module_hash: String,
    pub module_version: String,
    /// The guest state hash at `applied_index`.
    pub state_hash: String,
    pub locks_held: u64,
    pub engine_fingerprint: String,
    pub snapshots_built: u64,
    pub snapshots_installed: u64,
    pub wal_fsyncs: u64,
    pub wal_entries: u64,
    /// Set when the guest failed and the state machine stopped applying.
    pub poisoned: Option<String>,
    /// Where applying stopped, when a guest call failed in `apply`.
    pub poisoned_at: Option<PoisonedAt>,
    /// The log index at which the active module became active (0: it is
    /// the module the cluster started with, or came with a snapshot).
    pub module_since_index: u64,
    /// The most recent upgrade entries this node applied, oldest first.
    pub upgrades: Vec<UpgradeRecord>,
    /// The candidate module running in shadow mode, if any.
    pub shadow: Option<ShadowStatus>,
    /// Audit divergences this node has seen between itself and a peer.
    pub audit_divergences: u64,
    /// The cluster's capacity bounds and what is used of them.
    pub capacity: Option<CapacityStatus>,
    /// The active guest's linear memory in bytes (what the memory limit
    /// counts).
    pub guest_memory_bytes: u64,
    /// Bytes of the last snapshot this node built or installed.
    pub last_snapshot_bytes: u64,
    /// How long this node's last snapshot build took, ms (0: none yet).
    pub last_snapshot_build_ms: u64,
    /// How long this node's last install of a leader's snapshot took, ms.
    pub last_snapshot_install_ms: u64,
    /// The most recent admin requests this node served, oldest first.
    pub admin_actions: Vec<AdminAction>,
    /// The cluster's trusted module keys (ed25519, hex), in key order.
    /// When any is trusted, every upgrade and shadow start must be signed
    /// by one of them (see [`crate::signature`]).
    pub trusted_module_keys: Vec<String>,
    /// The last divergence the determinism audit found from this node:
    /// which node's state hash differed, and at which index.
    pub last_divergence: Option<DivergenceSeen>,
    /// The implementation part of the engine fingerprint
    /// (`wasmtime=…;arch=…`): nodes may differ in it during a rolling
    /// upgrade, unlike the rest.
    pub engine_implementation: String,
    /// The id of the cluster this node belongs to (32 hex digits); `None`
    /// on a node that joins and has not yet been reached by its leader.
    pub cluster_id: Option<String>,
    /// The module the cluster started with (SHA-256, hex): the built-in
    /// one of index 0, or the one a new cluster recorded as its first
    /// entry. `None`: not known (a node restored from a snapshot written
    /// before this was kept, after an upgrade). Appended last: a reply's
    /// new fields go at its end, which older clients do not read.
    pub first_module_hash: Option<String>,
    /// Commands the cluster's lock modules failed on (each refused with
    /// `module_failed`, the rest applied), since the cluster began.
    /// Replicated: every node reports the same at the same index. `None`
    /// (absent): a node of a build before trap isolation.
    pub module_failures_total: Option<u64>,
    /// The most recent of them, oldest first (`None` as above).
    pub module_failures: Option<Vec<ModuleFailure>>,
    /// The active module, when it failed so often that it is out of
    /// service for the kinds of command it failed on (those are refused
    /// with `module_failed` until another module is swapped in).
    /// Replicated. Absent: in service, or a node of an earlier build.
    pub module_out_of_service: Option<ModuleOutOfService>,
    /// The way back from the active module: the module a rollback returns
    /// to, and what the cluster does when the active module goes out of
    /// service (docs/writing-a-lock-module.md, "Versions and the way
    /// back"). Replicated. Absent: a node of an earlier build.
    pub module_way_back: Option<ModuleWayBack>,
    /// The last quorum pre-check of a module: each voter's verdict, as the
    /// leader wrote them through the log (docs/writing-a-lock-module.md,
    /// "The quorum pre-check"). Replicated. Absent: none yet, or a node
    /// of an earlier build.
    pub module_precheck: Option<ModulePrecheck>,
    /// Set when this node cannot run the module the cluster swapped in
    /// (it refused it at the pre-check, or cannot load it now): it
    /// stopped applying at that index and stands for no election until it
    /// is restarted with what can run it. Not replicated.
    pub module_cannot_run: Option<ModuleCannotRun>,
    /// The voter configuration in effect on this node: its log index, and
    /// whether it is joint (a change of voters under way, in which a
    /// quorum is a majority of the old voters and of the new). A change is
    /// done once it is not joint and `commit_index` has reached `index`.
    /// Absent: a node of an earlier build.
    pub membership: Option<MembershipInEffect>,
    /// The world the active module implements (`0.3`): what a person
    /// should read beside [`Status::module_version`], a release number
    /// that counts modules, not worlds. Absent: a node of an earlier
    /// build.
    pub module_world: Option<String>,
}

/// The voter configuration a node runs under ([`Status::membership`]).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MembershipInEffect {
    /// The log index of the entry that set it (0: the initial one).
    pub index: u64,
    /// A joint configuration: old and new voters both decide.
    pub joint: bool,
}

impl Status {
    /// The membership is settled: not joint, and committed.
    pub fn membership_settled(&self) -> bool {
        self.membership
            .is_some_and(|m| !m.joint && self.commit_index >= m.index)
    }
}

/// A node whose state hash differed from the others' at an index.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DivergenceSeen {
    pub node: u64,
    pub index: u64,
}

/// One admin request a node served: who, what, how it ended, and where
/// in the log it went (when it made an entry).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AdminAction {
    /// When it was answered, ms since the Unix epoch (this node's clock).
    pub at_ms: u64,
    /// Empty when authentication is off.
    pub principal: String,
    /// Method and path, e.g. `POST /v1/admin/upgrade`.
    pub action: String,
    /// The HTTP status it was answered with.
    pub status: u16,
    pub index: Option<u64>,
    pub module_hash: Option<String>,
}

/// The cluster's capacity bounds: a replicated setting, enforced by every
/// node at apply (a grant past a bound is refused with
/// [`crate::WireError::Capacity`], HTTP 507).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Capacity {
    /// The most holdings the cluster keeps (a shared or semaphore key
    /// counts each holder); at least 1.
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub max_held: u64,
    /// The most key bytes those holdings may have together (a key held by
    /// N holders counts N times); at least 1.
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub max_key_bytes: u64,
}

/// A snapshot built on request (`POST /v1/admin/snapshot`).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SnapshotBuilt {
    /// The node that built it.
    pub node: u64,
    /// The last log index it covers.
    pub index: u64,
    pub bytes: u64,
    /// How long the build took (the guest's `snapshot`, encoding, fsync).
    pub build_ms: u64,
}

/// The capacity bounds and the use of them at one applied index.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CapacityStatus {
    pub limits: Capacity,
    pub held: u64,
    pub key_bytes: u64,
}

/// The committed entries with lock commands that went to the guest in the
/// call that failed: the first of them whose commands the guest could not
/// apply is the cause. Every entry before `first` is applied
/// (`applied_index` is `first - 1`); none from `first` on is. A failing
/// command committed alone gives `first == last`, the same on every node.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PoisonedAt {
    pub first: u64,
    pub last: u64,
}

/// One (index, state hash) point a node recorded for the determinism audit.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditRecord {
    pub index: u64,
    pub state_hash: String,
    pub module_hash: String,
    pub kind: AuditKind,
}

/// A node's audit points (`GET /v1/audit`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditReport {
    pub id: u64,
    pub interval: u64,
    pub records: Vec<AuditRecord>,
}

/// The header of `GET /v1/admin/snapshot`'s answer that names the log
/// index the snapshot is the state at.
pub const SNAPSHOT_INDEX_HEADER: &str = "x-lockd-snapshot-index";
