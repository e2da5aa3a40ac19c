//! The leader's side of an upgrade: validate, then propose.
//!
//! Before an upgrade or shadow entry is proposed, the leader runs the same
//! [`super::migrate`] the apply path will run, on its current state: the
//! component must load (valid, of the `lock-sm` world, no imports), restore
//! the current state within the fuel and memory limits, keep every held
//! lock and not move the token counter back. A module that fails is refused
//! with the reason and nothing reaches the log. The state may still change
//! between this dry run and the entry's apply, which is why apply checks
//! everything again (deterministically, on every node).
//!
//! `precheck: false` skips the dry run — the entry then goes straight to the
//! log, where the apply-time checks still reject a bad module on every node.
//! It exists to exercise exactly that path.

use std::time::Instant;

use lockd_client::proto::UpgradeReply;
use openraft::error::{ClientWriteError, RaftError};
use thiserror::Error;

use super::{capture, migrate, MigrateError, ShadowEntry, ShadowOutcome, UpgradeEntry, UpgradeOutcome};
use crate::engine::ModuleHash;
use crate::node::Node;
use crate::raft::{Request, Response};

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
    #[error("{0}")]
    Internal(String),
}

fn check_leader(node: &Node) -> Result<(), UpgradeError> {
    let leader = node.raft.metrics().borrow().current_leader;
    if leader != Some(node.id) {
        return Err(UpgradeError::NotLeader {
            id: node.id,
            leader,
        });
    }
    Ok(())
}

/// Timings of a dry run, in µs.
struct Precheck {
    compile_us: u64,
    migrate_us: u64,
}

/// The dry run: load `module` (compiling it once, for the apply path too)
/// and migrate the current state into it.
async fn precheck(node: &Node, module: &[u8]) -> Result<Precheck, UpgradeError> {
    let pre = node.sm.precompiler().clone();
    let bytes = module.to_vec();
    let started = Instant::now();
    let loaded = tokio::task::spawn_blocking(move || {
        pre.prepare(&bytes);
        pre.load(&bytes)
    })
    .await
    .map_err(|e| UpgradeError::Internal(format!("compile task: {e}")))?
    .map_err(|e| UpgradeError::Refused(MigrateError::Load(e)))?;
    let compile_us = started.elapsed().as_micros() as u64;
    let (state, stats) = {
        let mut st = node.sm.state();
        capture(&mut st.guest).map_err(UpgradeError::Refused)?
    };
    let engine = node.engine.clone();
    let started = Instant::now();
    tokio::task::spawn_blocking(move || migrate(&engine, &loaded, &state, &stats).map(|_| ()))
        .await
        .map_err(|e| UpgradeError::Internal(format!("migrate task: {e}")))?
        .map_err(UpgradeError::Refused)?;
    Ok(Precheck {
        compile_us,
        migrate_us: started.elapsed().as_micros() as u64,
    })
}

async fn propose(node: &Node, request: Request) -> Result<(u64, Response), UpgradeError> {
    match node.raft.client_write(request).await {
        Ok(r) => Ok((r.log_id.index, r.data)),
        Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
            Err(UpgradeError::NotLeader {
                id: node.id,
                leader: f.leader_id,
            })
        }
        Err(e) => Err(UpgradeError::Unavailable(e.to_string())),
    }
}

/// Replace the active module with `module`. `replaces` defaults to the
/// active module's hash. Answers with the index of the entry and whether
/// the swap happened there.
pub async fn upgrade(
    node: &Node,
    module: Vec<u8>,
    replaces: Option<ModuleHash>,
    precheck_first: bool,
) -> Result<UpgradeReply, UpgradeError> {
    check_leader(node)?;
    let active = node.sm.state().module_hash();
    let replaces = replaces.unwrap_or(active);
    let mut timings = None;
    if precheck_first {
        if replaces != active {
            return Err(UpgradeError::Refused(MigrateError::Stale { replaces, active }));
        }
        if ModuleHash::of(&module) == active {
            return Err(UpgradeError::AlreadyActive(active));
        }
        timings = Some(precheck(node, &module).await?);
    }
    let (index, response) = propose(node, Request::Upgrade(UpgradeEntry { module, replaces })).await?;
    let mut reply = UpgradeReply {
        index,
        result: String::new(),
        module_hash: String::new(),
        replaces: replaces.to_string(),
        version: None,
        reason: None,
        precheck_compile_us: timings.as_ref().map(|t| t.compile_us),
        precheck_migrate_us: timings.as_ref().map(|t| t.migrate_us),
    };
    match response {
        Response::Upgrade(UpgradeOutcome::Swapped { module, version, .. }) => {
            reply.result = "swapped".into();
            reply.module_hash = module.to_string();
            reply.version = Some(version);
            Ok(reply)
        }
        Response::Upgrade(UpgradeOutcome::Rejected { module, reason, .. }) => {
            reply.result = "rejected".into();
            reply.module_hash = module.to_string();
            reply.reason = Some(reason);
            Err(UpgradeError::Rejected(Box::new(reply)))
        }
        other => Err(UpgradeError::Internal(format!(
            "an upgrade entry was answered {other:?}"
        ))),
    }
}

/// Start `module` as a shadow on every node, from the state at the entry.
pub async fn shadow_start(
    node: &Node,
    module: Vec<u8>,
    precheck_first: bool,
) -> Result<UpgradeReply, UpgradeError> {
    check_leader(node)?;
    let timings = if precheck_first {
        Some(precheck(node, &module).await?)
    } else {
        None
    };
    let active = node.sm.state().module_hash();
    let (index, response) = propose(node, Request::Shadow(ShadowEntry::Start { module })).await?;
    let mut reply = UpgradeReply {
        index,
        result: String::new(),
        module_hash: String::new(),
        replaces: active.to_string(),
        version: None,
        reason: None,
        precheck_compile_us: timings.as_ref().map(|t| t.compile_us),
        precheck_migrate_us: timings.as_ref().map(|t| t.migrate_us),
    };
    match response {
        Response::Shadow(ShadowOutcome::Started { module, version }) => {
            reply.result = "shadow-started".into();
            reply.module_hash = module.to_string();
            reply.version = Some(version);
            Ok(reply)
        }
        Response::Shadow(ShadowOutcome::Failed { module, reason }) => {
            reply.result = "rejected".into();
            reply.module_hash = module.to_string();
            reply.reason = Some(reason);
            Err(UpgradeError::Rejected(Box::new(reply)))
        }
        other => Err(UpgradeError::Internal(format!(
            "a shadow entry was answered {other:?}"
        ))),
    }
}

/// Promote the running shadow: a normal upgrade entry with its bytes.
pub async fn shadow_promote(node: &Node) -> Result<UpgradeReply, UpgradeError> {
    check_leader(node)?;
    let bytes = {
        let st = node.sm.state();
        let shadow = st.shadow.as_ref().ok_or(UpgradeError::NoShadow)?;
        if let Some(f) = shadow.failed() {
            return Err(UpgradeError::ShadowFailed(f.to_string()));
        }
        shadow.module.bytes().to_vec()
    };
    upgrade(node, bytes, None, true).await
}

/// Stop shadow mode on every node.
pub async fn shadow_abort(node: &Node) -> Result<UpgradeReply, UpgradeError> {
    check_leader(node)?;
    let running = node.sm.state().shadow.as_ref().map(|s| s.module.hash());
    if running.is_none() {
        return Err(UpgradeError::NoShadow);
    }
    let active = node.sm.state().module_hash();
    let (index, response) = propose(node, Request::Shadow(ShadowEntry::Stop)).await?;
    let module = match response {
        Response::Shadow(ShadowOutcome::Stopped { module }) => module,
        other => {
            return Err(UpgradeError::Internal(format!(
                "a shadow entry was answered {other:?}"
            )))
        }
    };
    Ok(UpgradeReply {
        index,
        result: "shadow-stopped".into(),
        module_hash: module.map(|m| m.to_string()).unwrap_or_default(),
        replaces: active.to_string(),
        version: None,
        reason: None,
        precheck_compile_us: None,
        precheck_migrate_us: None,
    })
}
