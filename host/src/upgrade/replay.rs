//! `lockd replay`: a node's stored log through another module.
//!
//! Starting from the node's stored snapshot (or from an empty table on the
//! built-in module when there is none), every stored entry after it is
//! applied to the **active** module — following the upgrade entries in the
//! log, exactly as the node did — and to the **candidate** module given on
//! the command line, which starts from the same state by the same
//! [`super::migrate`] an upgrade uses. Every command whose two outcomes
//! differ is reported. The question it answers: "had this module been
//! active, which answers would have changed?"
//!
//! It reads a **stopped** node's data dir: the log is locked while a node
//! runs. Entries at the tail of the log may not have been committed; they
//! are replayed like the others.

use std::path::Path;

use serde::Serialize;
use thiserror::Error;

use super::{apply_upgrade, switch_to, MigrateError};
use crate::command::Command;
use crate::engine::{EngineError, GuestInstance, WasmEngine};
use crate::log::{Wal, WalError, WalOptions};
use crate::raft::log_store::{read_meta, LogOpenError};
use crate::raft::state_machine::{read_snapshot, SmOpenError};
use crate::raft::{Entry, LogId, Request};

#[derive(Debug, Error)]
pub enum ReplayError {
    #[error("snapshot: {0}")]
    Snapshot(#[from] SmOpenError),
    #[error("log: {0}")]
    Wal(#[from] WalError),
    #[error("log: {0}")]
    Log(#[from] LogOpenError),
    #[error("log entry {index} does not decode: {reason}")]
    Entry { index: u64, reason: String },
    #[error("the active module: {0}")]
    Active(EngineError),
    #[error("the candidate module: {0}")]
    Candidate(MigrateError),
}

/// One command the two modules answered differently.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ReplayDiff {
    pub index: u64,
    pub command: String,
    pub active: String,
    pub candidate: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReplayReport {
    /// The snapshot's last index (0: no snapshot).
    pub from_index: u64,
    /// The last entry replayed.
    pub to_index: u64,
    pub entries: u64,
    pub commands: u64,
    /// Upgrade entries met in the log (applied to the active side).
    pub upgrades: u64,
    pub active_module: String,
    pub candidate_module: String,
    pub candidate_version: String,
    pub differences: Vec<ReplayDiff>,
    /// Set when the candidate failed (trap, fuel, memory) at some entry;
    /// nothing after it was compared.
    pub candidate_failed: Option<String>,
    /// State hashes after the last entry.
    pub active_state_hash: String,
    pub candidate_state_hash: Option<String>,
}

/// Replay the log in `data_dir` through `candidate` (component bytes).
pub fn replay(
    engine: &WasmEngine,
    data_dir: &Path,
    candidate: &[u8],
    builtin: &[u8],
) -> Result<ReplayReport, ReplayError> {
    let snapshot = read_snapshot(&data_dir.join("snapshot"))?;
    let from_index = snapshot
        .as_ref()
        .and_then(|s| s.last_log_id)
        .map_or(0, |l| l.index);
    let (active_bytes, state) = match &snapshot {
        Some(s) => (s.module.as_slice(), Some(s.guest_state.as_slice())),
        None => (builtin, None),
    };
    let mut active_module = engine.load(active_bytes).map_err(ReplayError::Active)?;
    let mut active = engine
        .instantiate(&active_module)
        .map_err(ReplayError::Active)?;
    if let Some(state) = state {
        active.restore(state).map_err(ReplayError::Active)?;
    }
    let (candidate_module, migrated) =
        switch_to(engine, engine.load(candidate), &mut active).map_err(ReplayError::Candidate)?;
    let mut cand: Option<GuestInstance> = Some(migrated.instance);

    let raft = data_dir.join("raft");
    let purged: Option<LogId> = read_meta(&raft.join("purged"))?;
    let (wal, recovered) = Wal::open(&raft.join("wal"), WalOptions::default())?;
    drop(wal);

    let mut report = ReplayReport {
        from_index,
        to_index: from_index,
        entries: 0,
        commands: 0,
        upgrades: 0,
        active_module: active_module.hash().to_string(),
        candidate_module: candidate_module.hash().to_string(),
        candidate_version: migrated.version,
        differences: Vec::new(),
        candidate_failed: None,
        active_state_hash: String::new(),
        candidate_state_hash: None,
    };
    let skip = from_index.max(purged.map_or(0, |p| p.index));
    for (index, bytes) in recovered.entries.range(skip + 1..) {
        let entry: Entry = postcard::from_bytes(bytes).map_err(|e| ReplayError::Entry {
            index: *index,
            reason: e.to_string(),
        })?;
        report.entries += 1;
        report.to_index = *index;
        match entry.payload {
            openraft::EntryPayload::Normal(Request::Lock(commands)) => {
                report.commands += commands.len() as u64;
                let a = active.apply(&commands).map_err(ReplayError::Active)?;
                if let Some(c) = cand.as_mut() {
                    match c.apply(&commands) {
                        Ok(b) => compare(*index, &commands, &a, &b, &mut report.differences),
                        Err(e) => {
                            report.candidate_failed = Some(format!("at index {index}: {e}"));
                            cand = None;
                        }
                    }
                }
            }
            openraft::EntryPayload::Normal(Request::Upgrade(up)) => {
                report.upgrades += 1;
                // The same steps as the state machine; a rejected upgrade
                // leaves the active side as it was, as it did on the node.
                let swap =
                    apply_upgrade(engine, &up, active_module.hash(), &mut active, |b| {
                        engine.load(b)
                    });
                if let Ok((m, migrated)) = swap {
                    active_module = m;
                    active = migrated.instance;
                }
            }
            _ => {}
        }
    }
    report.active_state_hash = hex::encode(active.state_hash().map_err(ReplayError::Active)?);
    report.candidate_state_hash = cand
        .as_mut()
        .and_then(|c| c.state_hash().ok())
        .map(hex::encode);
    report.active_module = active_module.hash().to_string();
    Ok(report)
}

fn compare(
    index: u64,
    commands: &[Command],
    a: &[crate::command::Outcome],
    b: &[crate::command::Outcome],
    out: &mut Vec<ReplayDiff>,
) {
    for (i, c) in commands.iter().enumerate() {
        let (x, y) = (a.get(i), b.get(i));
        if x != y {
            out.push(ReplayDiff {
                index,
                command: c.to_string(),
                active: x.map_or("(none)".into(), |o| o.to_string()),
                candidate: y.map_or("(none)".into(), |o| o.to_string()),
            });
        }
    }
}
