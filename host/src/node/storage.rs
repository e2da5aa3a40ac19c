//! Opening what a node keeps on disk, in order: the data dir checked
//! against this binary's engine, the cluster id, the state machine
//! (restoring the snapshot, with the watch history on it) and the log
//! (recovering the WAL); and openraft's configuration from the settings.

use std::sync::Arc;

use openraft::SnapshotPolicy;

use super::meta::{check_meta, data_err};
use super::NodeError;
use crate::cluster_id::{ClusterId, ClusterIdentity};
use crate::config::NodeConfig;
use crate::raft::log_store::{LogStore, Writer};
use crate::raft::state_machine::StateMachineStore;
use crate::watch::{Observer, WatchHub};
use lockd_core::engine::WasmEngine;
use lockd_core::precompile::Precompiler;
use lockd_log::WalOptions;

/// A node's storage, opened.
pub(super) struct Storage {
    pub engine: Arc<WasmEngine>,
    pub cluster: Arc<ClusterIdentity>,
    pub sm: StateMachineStore,
    pub log: LogStore,
}

/// Open the data dir of `config`: `engine` shared with other nodes of the
/// process, or the node's own; `applied` sees what the state machine
/// applies; `writer` writes the log ([`super::Seams`]).
pub(super) fn open(
    config: &NodeConfig,
    engine: Option<Arc<WasmEngine>>,
    applied: Option<Observer>,
    writer: Writer,
) -> Result<Storage, NodeError> {
    let dir = config.data_dir.clone();
    lockd_log::create_dir_durably(&dir).map_err(|e| data_err(&dir, e))?;
    let engine = match engine {
        Some(shared) => shared,
        None => Arc::new(WasmEngine::bounded(
            config.engine.clone(),
            Some(
                config
                    .module_cache
                    .clone()
                    .unwrap_or_else(|| dir.join("module-cache")),
            ),
            config.module_cache_bound(),
        )?),
    };
    let first_start = check_meta(&dir, config.id, engine.fingerprint())?;
    // A data dir restored or recovered records its cluster already.
    let bootstrap_id = config
        .bootstrap_members()
        .filter(|_| first_start)
        .map(|m| ClusterId::at_bootstrap(&m));
    let cluster = Arc::new(ClusterIdentity::open(&dir, bootstrap_id)?);

    let precompiler = Precompiler::limited(engine.clone(), Some(config.limits.max_module_bytes));
    let sm = StateMachineStore::open(
        config.id,
        precompiler.clone(),
        &dir.join("snapshot"),
        lockd_core::builtin::LOCK_SM,
        config.initial_module,
        config.raft.audit_interval,
    )?;
    sm.bind_cluster(cluster.clone());
    let hub = WatchHub::new(
        config.limits.watch_history,
        config.limits.max_watchers,
        config.limits.max_watchers_per_principal,
    );
    if let Some(observer) = applied {
        hub.observe(observer);
    }
    sm.attach_watch(hub);
    let log = LogStore::open(
        &dir.join("raft"),
        WalOptions {
            segment_bytes: config.raft.segment_bytes,
        },
        Some(precompiler),
        writer,
        sm.latency().stages.clone(),
    )?;
    log.forget_leadership(config.id);
    Ok(Storage {
        engine,
        cluster,
        sm,
        log,
    })
}

/// openraft's configuration from the node's settings.
pub(super) fn raft_config(config: &NodeConfig) -> Result<openraft::Config, NodeError> {
    openraft::Config {
        cluster_name: "lockd".into(),
        heartbeat_interval: config.raft.heartbeat_ms,
        election_timeout_min: config.raft_timeouts().0,
        election_timeout_max: config.raft_timeouts().1,
        // `raft::stand` decides when a node stands (after a pre-vote).
        enable_elect: false,
        // Snapshots are triggered by `raft::snapshot_policy`, which
        // also weighs the log against the state's size.
        snapshot_policy: SnapshotPolicy::Never,
        max_in_snapshot_log_to_keep: config.raft.keep_after_snapshot,
        purge_batch_size: 1,
        // Not read: `raft::snapshot_send` bounds each chunk by its
        // progress instead of one deadline for the transfer.
        ..Default::default()
    }
    .validate()
    .map_err(|e| NodeError::Raft(e.to_string()))
}
