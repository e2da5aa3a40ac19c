//! What a node reports of its lock modules beyond the active one: the
//! way back and what happens on failure, the commands modules failed on,
//! a module out of service, the last quorum pre-check, and a module this
//! node cannot run (fields of [`crate::Status`]).

use serde::{Deserialize, Serialize};

/// A quorum pre-check as the log recorded it (see
/// [`crate::Status::module_precheck`]).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModulePrecheck {
    /// The index of the record.
    pub index: u64,
    /// SHA-256 of the module checked, hex.
    pub module_hash: String,
    /// Whether a refusal could not block it (`--quorum`). A majority must
    /// accept either way; without `quorum`, no voter that answered may
    /// refuse.
    pub quorum: bool,
    /// Whether the leader went on to propose the module.
    pub enacted: bool,
    /// One per voter, in node order.
    pub verdicts: Vec<PrecheckVerdict>,
}

/// One voter's answer to a pre-check.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PrecheckVerdict {
    pub node: u64,
    pub accepted: bool,
    /// `false`: it could not be reached or did not answer in time (which
    /// does not block a module a majority accepted).
    pub answered: bool,
    /// Why it refused, or why there is no answer (at most 1 KiB); `None`
    /// when it accepted.
    pub reason: Option<String>,
}

/// A module this node cannot run (see [`crate::Status::module_cannot_run`]).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModuleCannotRun {
    /// The index of the swap this node stopped before.
    pub index: u64,
    pub module_hash: String,
    pub reason: String,
}

/// What the cluster does when its active module goes out of service,
/// chosen with each upgrade (kebab-case in JSON and on the command line).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum OnModuleFailure {
    /// Refuse the kinds of command it kept failing on, until an operator
    /// replaces it.
    #[default]
    Refuse,
    /// Return to the previous module at the index it went out of service
    /// (refuse as above if that swap fails).
    Rollback,
}

impl OnModuleFailure {
    /// The one parser of the choice's text (`refuse`, `rollback`): the
    /// query parameter and `lockctl upgrade --on-failure`.
    pub fn parse(text: &str) -> Option<OnModuleFailure> {
        match text {
            "refuse" => Some(OnModuleFailure::Refuse),
            "rollback" => Some(OnModuleFailure::Rollback),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OnModuleFailure::Refuse => "refuse",
            OnModuleFailure::Rollback => "rollback",
        }
    }
}

/// The way back from the active module (see [`crate::Status::module_way_back`]).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModuleWayBack {
    /// SHA-256 of the module the active one replaced, which `lockctl
    /// upgrade --rollback` returns to; `None`: no way back (the first
    /// module, a rollback's result, or an upgrade written before
    /// versions).
    pub previous_module_hash: Option<String>,
    /// What happens when the active module goes out of service.
    pub on_failure: OnModuleFailure,
    /// The last time the cluster fell back on its own, if it did.
    pub fell_back: Option<ModuleFellBack>,
}

/// A return to the previous module that the cluster made on its own,
/// when the active module went out of service with `on_failure`
/// `rollback`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModuleFellBack {
    /// The log index at which it went out of service and the swap was made.
    pub index: u64,
    /// SHA-256 of the module that failed.
    pub from: String,
    /// SHA-256 of the module returned to.
    pub to: String,
    /// Whether the swap happened; when not, why (the failing module then
    /// stays, out of service).
    pub swapped: bool,
    pub reason: Option<String>,
}

/// A lock module taken out of service (docs/writing-a-lock-module.md,
/// "When a module fails").
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModuleOutOfService {
    /// SHA-256 of the module.
    pub module_hash: String,
    /// The log index at which it was taken out: commands after it are
    /// refused.
    pub since: u64,
    /// Its failures within the window then.
    pub failures: u64,
    /// The kinds of command refused: `grant`, `release`, `expire`, …
    pub kinds: Vec<String>,
    /// The reason each refused command is given.
    pub reason: String,
}

/// A command the lock module failed on: refused with `module_failed` on
/// every node, the cluster serving on.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModuleFailure {
    /// The log index of the command's entry.
    pub index: u64,
    /// SHA-256 of the module that failed.
    pub module_hash: String,
    /// The command, e.g. `grant "k" …`.
    pub command: String,
    /// The failure: a trap, the fuel budget, the memory limit, a malformed
    /// answer.
    pub reason: String,
}
