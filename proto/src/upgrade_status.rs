//! What a node reports of module upgrades and the shadow: the upgrade
//! records and the shadow's comparison (fields of [`crate::Status`]), and
//! the answer to an upgrade or shadow request.

use serde::{Deserialize, Serialize};

use crate::module_status::PrecheckVerdict;

// Snapshots keep it by variant index (swapped 0, rejected 1): new
// variants go last. (Plain comments: doc comments are the OpenAPI text.)
/// What an upgrade or shadow entry did (kebab-case in JSON).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum UpgradeResult {
    /// The module was swapped at the entry's index.
    #[default]
    Swapped,
    /// Every node rejected the entry; the old module stays.
    Rejected,
    ShadowStarted,
    ShadowStopped,
}

impl UpgradeResult {
    pub fn as_str(self) -> &'static str {
        match self {
            UpgradeResult::Swapped => "swapped",
            UpgradeResult::Rejected => "rejected",
            UpgradeResult::ShadowStarted => "shadow-started",
            UpgradeResult::ShadowStopped => "shadow-stopped",
        }
    }
}

impl std::fmt::Display for UpgradeResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

// Snapshots keep it too (`lockd_core::upgrade`): its fields' order and
// types are a persisted format.
/// What applying one upgrade entry did on a node. Everything but
/// `swap_us` is computed deterministically, so every node records the same.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpgradeRecord {
    /// The log index of the upgrade entry.
    pub index: u64,
    /// The module hash the entry said it replaces.
    pub replaces: String,
    /// SHA-256 of the new component bytes.
    pub module_hash: String,
    /// Swapped or rejected.
    pub result: UpgradeResult,
    /// The new module's version string (swapped only).
    pub version: Option<String>,
    /// Why the upgrade was rejected (rejected only).
    pub reason: Option<String>,
    /// How long the swap took on this node, in µs (not deterministic).
    pub swap_us: u64,
}

impl UpgradeRecord {
    pub fn swapped(&self) -> bool {
        self.result == UpgradeResult::Swapped
    }

    /// The deterministic part, for comparing nodes.
    pub fn outcome(&self) -> (u64, &str, &str, UpgradeResult, Option<&str>, Option<&str>) {
        (
            self.index,
            &self.replaces,
            &self.module_hash,
            self.result,
            self.version.as_deref(),
            self.reason.as_deref(),
        )
    }
}

/// A candidate module fed the committed stream beside the active one.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ShadowStatus {
    pub module_hash: String,
    pub module_version: String,
    /// The log index of the entry that started it.
    pub since_index: u64,
    /// Commands fed to both modules.
    pub commands_compared: u64,
    /// Commands whose outcomes differed.
    pub outcome_diffs: u64,
    /// State hashes compared (at every audit point).
    pub hash_checks: u64,
    pub hash_diffs: u64,
    /// Set when the candidate failed (trap, fuel, memory); it is then fed
    /// nothing more. The active module is never affected.
    pub failed: Option<String>,
    /// The first few differing outcomes.
    pub examples: Vec<OutcomeDiff>,
    /// The world the candidate implements (`0.3`). Absent: a node of an
    /// earlier build.
    pub module_world: Option<String>,
}

/// One command that the active module and a candidate (a shadow, or the
/// module `lockd replay` was given) answered differently.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OutcomeDiff {
    pub index: u64,
    pub command: String,
    pub active: String,
    /// The candidate's outcome (read also from the older name `shadow`).
    #[serde(alias = "shadow")]
    pub candidate: String,
}

/// The answer to an upgrade or shadow request (`POST /v1/admin/...`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpgradeReply {
    /// The log index of the entry.
    pub index: u64,
    pub result: UpgradeResult,
    pub module_hash: String,
    pub replaces: String,
    pub version: Option<String>,
    pub reason: Option<String>,
    /// Leader-side check: compile (or cache load) time in µs, if checked.
    pub precheck_compile_us: Option<u64>,
    /// Leader-side check: dry-run migration time in µs, if checked.
    pub precheck_migrate_us: Option<u64>,
    /// Every voter's pre-check verdict, in node order (`None`: not
    /// pre-checked, as with `precheck=false` or a rollback).
    pub verdicts: Option<Vec<PrecheckVerdict>>,
}
