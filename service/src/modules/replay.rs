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
use std::sync::Arc;

use lockd_proto::OutcomeDiff;
use serde::Serialize;
use thiserror::Error;

use lockd_core::command::{legacy, Command, Outcome};
use lockd_core::engine::{EngineError, GuestInstance, WasmEngine};
use lockd_core::precompile::Precompiler;
use lockd_core::replica::Replica;
use lockd_core::upgrade::{migrate, MigrateError};
use lockd_log::{Wal, WalError, WalOptions};
use lockd_replication::log_store::{read_meta, LogOpenError};
use lockd_replication::snapshot::{read_blob, SnapshotFileError};
use lockd_replication::{Entry, LogId, Request, Response};

#[derive(Debug, Error)]
pub enum ReplayError {
    #[error("snapshot: {0}")]
    Snapshot(#[from] SnapshotFileError),
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
    #[error("cluster id: {0}")]
    Cluster(#[from] lockd_replication::cluster_id::ClusterIdError),
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
    pub differences: Vec<OutcomeDiff>,
    /// Set when the candidate failed (trap, fuel, memory) at some entry;
    /// nothing after it was compared.
    pub candidate_failed: Option<String>,
    /// State hashes after the last entry.
    pub active_state_hash: String,
    pub candidate_state_hash: Option<String>,
}

/// The state machine of a stopped node's data dir as its snapshot left it
/// (or the `builtin` module's empty state, without one), audit points
/// off, and the index it is at.
pub fn stored_replica(
    engine: &Arc<WasmEngine>,
    data_dir: &Path,
    builtin: &[u8],
) -> Result<(Replica, u64), ReplayError> {
    let loader = Precompiler::new(engine.clone());
    // Bound module signatures name the cluster: the one the data dir is of.
    let cluster = Arc::new(lockd_replication::cluster_id::ClusterIdentity::fixed(
        lockd_replication::cluster_id::ClusterId::read(data_dir)?,
    ));
    let (mut replica, from) = match read_blob(&data_dir.join("snapshot"))? {
        Some((blob, _)) => (
            Replica::from_snapshot(0, loader, &blob, 0).map_err(ReplayError::Active)?,
            blob.meta.last_log_id.map_or(0, |l| l.index),
        ),
        None => {
            let module = engine.load(builtin).map_err(ReplayError::Active)?;
            (
                Replica::new(0, loader, module, 0).map_err(ReplayError::Active)?,
                0,
            )
        }
    };
    replica.bind_cluster(cluster);
    Ok((replica, from))
}

/// The entries of a stopped node's log after index `from` (and after what
/// it purged), decoded, in index order.
pub fn stored_entries(data_dir: &Path, from: u64) -> Result<Vec<(u64, Entry)>, ReplayError> {
    let raft = data_dir.join("raft");
    let purged: Option<LogId> = read_meta(&raft.join("purged"))?;
    let (wal, recovered) = Wal::open(&raft.join("wal"), WalOptions::default())?;
    drop(wal);
    let skip = from.max(purged.map_or(0, |p| p.index));
    recovered
        .entries
        .range(skip + 1..)
        .map(|(index, bytes)| {
            postcard::from_bytes(bytes)
                .map(|e| (*index, e))
                .map_err(|e| ReplayError::Entry {
                    index: *index,
                    reason: e.to_string(),
                })
        })
        .collect()
}

/// Replay the log in `data_dir` through `candidate` (component bytes).
pub fn replay(
    engine: &Arc<WasmEngine>,
    data_dir: &Path,
    candidate: &[u8],
    builtin: &[u8],
) -> Result<ReplayReport, ReplayError> {
    // The active side is the node's own replica path, audit points off.
    let (mut active, from_index) = stored_replica(engine, data_dir, builtin)?;
    let candidate_module = engine
        .load(candidate)
        .map_err(|e| ReplayError::Candidate(MigrateError::Load(e)))?;
    let (state, stats) = active
        .capture(candidate_module.world())
        .map_err(ReplayError::Candidate)?;
    let migrated =
        migrate(engine, &candidate_module, &state, &stats).map_err(ReplayError::Candidate)?;
    let mut cand: Option<GuestInstance> = Some(migrated.instance);

    let mut report = ReplayReport {
        from_index,
        to_index: from_index,
        entries: 0,
        commands: 0,
        upgrades: 0,
        active_module: active.module_hash().to_string(),
        candidate_module: candidate_module.hash().to_string(),
        candidate_version: migrated.version,
        differences: Vec::new(),
        candidate_failed: None,
        active_state_hash: String::new(),
        candidate_state_hash: None,
    };
    for (index, entry) in stored_entries(data_dir, from_index)? {
        report.entries += 1;
        report.to_index = index;
        let batch = match &entry.payload {
            openraft::EntryPayload::Normal(
                req @ (Request::Commands(_) | Request::Commands03(_)),
            ) => req.clone().into_commands().map(Batch::Groups),
            openraft::EntryPayload::Normal(Request::Lock(commands)) => {
                Some(Batch::Legacy(commands.clone()))
            }
            openraft::EntryPayload::Normal(r) if r.swaps_module() => {
                report.upgrades += 1;
                None
            }
            _ => None,
        };
        // The same apply as the node's, upgrade entries included: a rejected
        // upgrade leaves the active side as it was, as it did on the node.
        let responses = active
            .apply([lockd_replication::convert::entry(entry)])
            .map_err(ReplayError::Active)?;
        let (Some(batch), Some(Response::Lock(a))) = (batch, responses.first()) else {
            continue;
        };
        let Some(c) = cand.as_mut() else {
            report.commands += batch.len() as u64;
            continue;
        };
        report.commands += batch.len() as u64;
        let b = match &batch {
            Batch::Groups(groups) => c.apply(groups),
            Batch::Legacy(commands) => c.apply_legacy(commands).map(|o| vec![o]),
        };
        match b {
            Ok(b) => compare(index, &batch.display(), a, &b, &mut report.differences),
            Err(e) => {
                report.candidate_failed = Some(format!("at index {index}: {e}"));
                cand = None;
            }
        }
    }
    report.active_state_hash = hex::encode(active.state_hash().map_err(ReplayError::Active)?);
    report.candidate_state_hash = cand
        .as_mut()
        .and_then(|c| c.state_hash().ok())
        .map(hex::encode);
    report.active_module = active.module_hash().to_string();
    Ok(report)
}

/// The lock commands of one log entry, in either world's types.
enum Batch {
    Groups(Vec<Vec<Command>>),
    Legacy(Vec<legacy::Command>),
}

impl Batch {
    fn len(&self) -> usize {
        match self {
            Batch::Groups(g) => g.iter().map(Vec::len).sum(),
            Batch::Legacy(c) => c.len(),
        }
    }

    /// Each command as text, in order.
    fn display(&self) -> Vec<String> {
        match self {
            Batch::Groups(g) => g.iter().flatten().map(|c| c.to_string()).collect(),
            Batch::Legacy(c) => c.iter().map(|c| c.to_string()).collect(),
        }
    }
}

fn compare(
    index: u64,
    commands: &[String],
    a: &[Vec<Outcome>],
    b: &[Vec<Outcome>],
    out: &mut Vec<OutcomeDiff>,
) {
    let (a, b): (Vec<&Outcome>, Vec<&Outcome>) =
        (a.iter().flatten().collect(), b.iter().flatten().collect());
    for (i, c) in commands.iter().enumerate() {
        let (x, y) = (a.get(i), b.get(i));
        if x != y {
            out.push(OutcomeDiff {
                index,
                command: c.clone(),
                active: x.map_or("(none)".into(), |o| o.to_string()),
                candidate: y.map_or("(none)".into(), |o| o.to_string()),
            });
        }
    }
}
