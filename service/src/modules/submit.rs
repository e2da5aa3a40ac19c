//! The leader's side of an upgrade: validate, then propose.
//!
//! Then every voter checks it too (the quorum pre-check,
//! [`super::precheck`]): each one's verdict goes through the log before
//! the upgrade does, and the upgrade is proposed only once a majority of
//! voters accepted and none refused (with [`How::quorum`], a refusal does
//! not block).
//!
//! Before an upgrade or shadow entry is proposed, the leader runs the same
//! [`super::migrate`] the apply path will run, on its current state: the
//! component must load (valid, of the `lock-sm` world, no imports), restore
//! the current state within the fuel and memory limits, keep every held
//! lock and not move the token counter back; and, unless the upgrade is
//! marked as a rollback, its version must be above the active module's
//! (`lockd_core::way_back`). A module that fails is refused
//! with the reason and nothing reaches the log. What is proposed is a
//! versioned upgrade entry; a rollback (`rollback.rs`) is an entry of its
//! own, naming the previous module every node keeps. The state may still change
//! between this dry run and the entry's apply, which is why apply checks
//! everything again (deterministically, on every node).
//!
//! First of all, while the cluster trusts module keys, the module's
//! signature must verify under one of them (the check apply makes first,
//! [`super::signature`]); a module that fails it is refused (HTTP 403)
//! before it is loaded. A promote carries the signature the shadow was
//! started with.
//!
//! `precheck: false` skips every check here (signature, stale, dry run) —
//! the entry then goes straight to the log, where the apply-time checks
//! still reject a bad module on every node. It exists to exercise exactly
//! that path.
//!
//! The module keys change through the log as well ([`Upgrader::trust_key`],
//! [`Upgrader::untrust_key`]; with the capacity bounds, in `settings`):
//! the leader applies the entry to a copy of its set first, so a key that
//! is malformed, unknown or one too many is refused with nothing proposed;
//! apply decides again on every node.

use std::sync::Arc;

use lockd_proto::{UpgradeReply, UpgradeResult};
use thiserror::Error;

use lockd_proto::signature::Purpose;

use lockd_core::engine::ModuleHash;
use lockd_core::signature::{KeyError, ModuleSignature, SignedFor};
use lockd_core::upgrade::{MigrateError, UpgradeEntry, UpgradeOutcome};
use lockd_core::way_back::{OnModuleFailure, VersionedUpgrade};
use lockd_replication::peer_client::NetworkFactory;
use lockd_replication::state_machine::StateMachineStore;
use lockd_replication::{leader_hint, NodeId, Raft, Request, Response};

/// How an upgrade is let in (see `lockd_core::way_back`).
#[derive(Clone, Copy, Debug, Default)]
pub struct How {
    /// Marked as a rollback: whatever its version.
    pub rollback: bool,
    /// What the cluster does if it goes out of service.
    pub on_failure: OnModuleFailure,
    /// Enacted once a majority of voters accepted it at the pre-check,
    /// even if one refused; otherwise a refusal blocks it.
    pub quorum: bool,
}

#[derive(Debug, Error)]
pub enum UpgradeError {
    #[error("node {id} is not the leader{}", leader.map(|l| format!("; node {l} is")).unwrap_or_default())]
    NotLeader { id: u64, leader: Option<u64> },
    /// The leader's dry run failed; nothing was proposed.
    #[error("refused before proposing (nothing changed): {0}")]
    Refused(MigrateError),
    /// The entry was committed and every node rejected it.
    #[error("upgrade entry {} was rejected on every node: {}", .0.index, .0.reason.as_deref().unwrap_or(""))]
    Rejected(Box<UpgradeReply>),
    #[error("module {0} is already the active module; nothing to upgrade")]
    AlreadyActive(ModuleHash),
    #[error("no shadow module is running")]
    NoShadow,
    #[error("the shadow module failed ({0}); drop it with --abort")]
    ShadowFailed(String),
    #[error("consensus unavailable: {0}")]
    Unavailable(String),
    /// Another upgrade or shadow is being checked on this node: one dry
    /// run at a time (each may take a whole guest store).
    #[error("another module is being checked on node {0}; try again when it is done")]
    Busy(u64),
    /// A module-key change that would change nothing or break a rule
    /// (refused before proposing, or by every node at apply).
    #[error("{0}")]
    Key(KeyError),
    /// A voter refused the module at the quorum pre-check; the verdicts
    /// are in the log at `index` and nothing was swapped.
    #[error("the pre-check at index {index} did not let the module in ({}): {}", if *.quorum { "a majority of voters must accept it" } else { "a majority of voters must accept it and none refuse it" }, .refusals.join("; "))]
    PrecheckRefused {
        index: u64,
        quorum: bool,
        refusals: Vec<String>,
        verdicts: Vec<lockd_proto::PrecheckVerdict>,
    },
    /// A module above this node's `--max-module-bytes` (why, as the
    /// precompiler says it).
    #[error("{0}")]
    OverNodeBound(String),
    /// A rollback while module keys are trusted: the previous module may
    /// have been signed by a key untrusted since.
    #[error("the cluster trusts {trusted} module key(s), so a return to the previous module needs a signature by one of them: sign the previous module for an upgrade over the active one (`lockctl module sign`) and upgrade to it with --rollback")]
    RollbackUnsigned { trusted: usize },
    #[error("{0}")]
    Internal(String),
}

/// The longest an upgrade waits for this node's state to settle
/// ([`Upgrader::settle`]).
const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Timings of a dry run, in µs.
pub(super) struct Precheck {
    pub(super) compile_us: u64,
    pub(super) migrate_us: u64,
}

/// The answer to an entry at `index` replacing `replaces`, its result and
/// module still to be filled in.
fn reply_at(index: u64, replaces: &ModuleHash, timings: Option<&Precheck>) -> UpgradeReply {
    UpgradeReply {
        index,
        result: UpgradeResult::Swapped,
        module_hash: String::new(),
        replaces: replaces.to_string(),
        version: None,
        reason: None,
        precheck_compile_us: timings.map(|t| t.compile_us),
        precheck_migrate_us: timings.map(|t| t.migrate_us),
        verdicts: None,
    }
}

/// An upgrade or shadow start that every node refused, with why.
fn rejected(mut reply: UpgradeReply, module: ModuleHash, reason: String) -> UpgradeError {
    reply.result = UpgradeResult::Rejected;
    reply.module_hash = module.to_string();
    reply.reason = Some(reason);
    UpgradeError::Rejected(Box::new(reply))
}

/// The leader's upgrade and shadow requests.
#[derive(Clone)]
pub struct Upgrader {
    pub(super) id: NodeId,
    pub(super) raft: Raft,
    pub(super) sm: StateMachineStore,
    /// One dry run at a time.
    prechecks: Arc<tokio::sync::Semaphore>,
    /// Reaches the voters for the quorum pre-check.
    pub(super) peers: NetworkFactory,
    /// The verdicts this node gave leaders' pre-checks, remembered.
    pub(super) verdicts: Arc<super::verdicts::Verdicts>,
}

impl Upgrader {
    pub fn new(id: NodeId, raft: Raft, sm: StateMachineStore, peers: NetworkFactory) -> Upgrader {
        Upgrader {
            id,
            raft,
            sm,
            prechecks: Arc::new(tokio::sync::Semaphore::new(1)),
            peers,
            verdicts: Default::default(),
        }
    }

    fn check_leader(&self) -> Result<(), UpgradeError> {
        let leader = self.raft.metrics().borrow().current_leader;
        if leader != Some(self.id) {
            return Err(UpgradeError::NotLeader {
                id: self.id,
                leader,
            });
        }
        Ok(())
    }

    /// Wait until this node's state is the cluster's: leadership confirmed
    /// by a quorum, the log applied as far as it reached, and a new
    /// cluster's first module recorded. A leader just elected may not have
    /// applied entries it has (an upgrade among them), and a new cluster
    /// runs the index-0 module until its first module's entry applies: an
    /// upgrade computed before then would name the wrong module it
    /// replaces, and every node would reject it as stale.
    async fn settle(&self) -> Result<(), UpgradeError> {
        use crate::{barrier, ServiceError};
        barrier::confirm(&self.raft, self.id)
            .await
            .map_err(|e| match e {
                ServiceError::NotLeader { leader, .. } => UpgradeError::NotLeader {
                    id: self.id,
                    leader,
                },
                e => UpgradeError::Unavailable(e.to_string()),
            })?;
        if barrier::first_module(&self.raft, &self.sm, SETTLE_LIMIT).await {
            return Ok(());
        }
        Err(UpgradeError::Unavailable(format!(
            "node {}: the cluster's first module is not recorded after {} s",
            self.id,
            SETTLE_LIMIT.as_secs()
        )))
    }

    pub(super) async fn propose(&self, request: Request) -> Result<(u64, Response), UpgradeError> {
        // Ten election timeouts: a big module's entry may keep the
        // followers from answering heartbeats for a while; a leader cut
        // off stays cut off.
        let quorum_within = 10 * self.peers.stall.as_millis() as u64;
        let written = tokio::select! {
            written = self.raft.client_write(request) => written,
            () = lockd_replication::leadership_fails(&self.raft, self.id, quorum_within) => {
                return Err(UpgradeError::Unavailable(format!(
                    "node {} lost its quorum (or its leadership) before the entry committed: it may or may not take effect",
                    self.id
                )));
            }
        };
        match written {
            Ok(r) => Ok((r.log_id.index, r.data)),
            Err(e) => Err(match leader_hint(&e) {
                Some(leader) => UpgradeError::NotLeader {
                    id: self.id,
                    leader,
                },
                None => UpgradeError::Unavailable(e.to_string()),
            }),
        }
    }

    /// While module keys are trusted, `module` must be signed by one for
    /// `purpose`, here and now (the check apply makes, on the state this
    /// leader has applied).
    pub(super) fn check_signature(
        &self,
        module: &[u8],
        signature: Option<&ModuleSignature>,
        purpose: Purpose,
    ) -> Result<(), UpgradeError> {
        self.sm
            .module_keys()
            .check_bound(
                &ModuleHash::of(module),
                &self.sm.binding(purpose),
                signature,
            )
            .map(|_| ())
            .map_err(|e| UpgradeError::Refused(MigrateError::Signature(e)))
    }

    /// Replace the active module with `module`, carrying `signature` if
    /// given. `replaces` defaults to the active module's hash. Answers with
    /// the index of the entry and whether the swap happened there.
    /// `signed_for`: an upgrade's signature, or (promoting the shadow) the
    /// shadow's.
    /// `how`: whether it is marked as a rollback (any version comes in),
    /// and what to do if it goes out of service.
    pub async fn upgrade(
        &self,
        module: Vec<u8>,
        replaces: Option<ModuleHash>,
        signature: Option<ModuleSignature>,
        precheck_first: bool,
        signed_for: SignedFor,
        how: How,
    ) -> Result<UpgradeReply, UpgradeError> {
        self.check_leader()?;
        self.settle().await?;
        let active = self.sm.module_hash();
        let replaces = replaces.unwrap_or(active);
        let mut timings = None;
        let mut verdicts = None;
        if precheck_first {
            self.check_signature(&module, signature.as_ref(), signed_for.purpose())?;
            if replaces != active {
                return Err(UpgradeError::Refused(MigrateError::Stale {
                    replaces,
                    active,
                }));
            }
            if ModuleHash::of(&module) == active {
                return Err(UpgradeError::AlreadyActive(active));
            }
            timings = Some(self.dry_run(&module, how.rollback).await?);
            let signed = (signature, signed_for);
            verdicts = Some(
                self.quorum_check(&module, how.rollback, how.quorum, signed)
                    .await?,
            );
        }
        let request = Request::VersionedUpgrade(VersionedUpgrade {
            upgrade: UpgradeEntry { module, replaces },
            signature,
            signed_for,
            rollback: how.rollback,
            on_failure: how.on_failure,
        });
        let mut reply = self.answer_swap(request, &replaces, timings.as_ref()).await;
        if let Ok(r) = reply.as_mut() {
            r.verdicts = verdicts;
        }
        reply
    }

    /// Propose an entry that swaps the module, and answer what it did.
    async fn answer_swap(
        &self,
        request: Request,
        replaces: &ModuleHash,
        timings: Option<&Precheck>,
    ) -> Result<UpgradeReply, UpgradeError> {
        let (index, response) = self.propose(request).await?;
        let mut reply = reply_at(index, replaces, timings);
        match response {
            Response::Upgrade(UpgradeOutcome::Swapped {
                module, version, ..
            }) => {
                reply.result = UpgradeResult::Swapped;
                reply.module_hash = module.to_string();
                reply.version = Some(version);
                Ok(reply)
            }
            Response::Upgrade(UpgradeOutcome::Rejected { module, reason, .. }) => {
                Err(rejected(reply, module, reason))
            }
            other => Err(UpgradeError::Internal(format!(
                "an upgrade entry was answered {other:?}"
            ))),
        }
    }
}

mod dry_run;
mod rollback;
mod settings;
mod shadow;
