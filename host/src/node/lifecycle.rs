//! A started node's life: bootstrapping its cluster, failing, stopping;
//! and the task that counts leader changes.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use futures::future::BoxFuture;
use openraft::error::{InitializeError, RaftError};
use tokio::sync::watch;

use super::{Node, NodeError, SHUTDOWN_GRACE};
use crate::raft::{Node as RaftNode, NodeId, Raft};

impl Node {
    pub(super) async fn bootstrap(&self, members: BTreeMap<u64, String>) -> Result<(), NodeError> {
        let nodes: BTreeMap<NodeId, RaftNode> = members
            .into_iter()
            .map(|(id, addr)| (id, RaftNode { addr }))
            .collect();
        match self.raft.initialize(nodes).await {
            Ok(()) => {
                tracing::info!(id = self.id, "bootstrapped a new cluster");
                Ok(())
            }
            // Already initialised (a restart, or a peer's entries arrived
            // first): the initial cluster is ignored, as documented.
            Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
            Err(e) => Err(NodeError::Raft(e.to_string())),
        }
    }

    /// Stop serving and stop Raft; returns once every task the node
    /// started has ended: the listener (its port is free), the background
    /// tasks, and every connection, each of which ends after what it is
    /// serving (at most [`SHUTDOWN_GRACE`]; past it, the rest is named in
    /// the log and left to the runtime).
    #[inline(never)]
    pub fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.shutdown_inner())
    }

    async fn shutdown_inner(&self) {
        let _ = self.shutdown.send(true);
        // A leader hands over before anything else: the requests it still
        // serves fail over to its successor rather than wait for it.
        let handed_over = self.handoff.hand_over().await.is_some();
        // Watch streams end at once (with where to resume), so the
        // connections serving them close within the grace.
        if let Some(hub) = self.sm.watch() {
            hub.close();
        }
        self.tasks.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                id = self.id,
                left = self.tasks.len(),
                "shutdown: tasks still running after the grace period"
            );
        }
        if !handed_over {
            if let Err(e) = self.raft.shutdown().await {
                tracing::warn!(error = %e, "raft shutdown");
            }
        }
        let left = self.service_tasks.stop(SHUTDOWN_GRACE).await;
        if left > 0 {
            tracing::warn!(
                id = self.id,
                left,
                "shutdown: lock service tasks still running after the grace period"
            );
        }
    }

    /// Resolves when Raft has stopped on its own, with why: a fatal error
    /// (a log or state machine write that failed, a panic in the core).
    /// Everything else of the node would otherwise go on answering, half
    /// alive; the caller ends the process so a supervisor restarts it.
    ///
    /// Except when the lock module is poisoned (a guest trap at apply):
    /// every replica stops at the same entry by design, a restart would
    /// meet it again, and the node stays up to report it (status, audit,
    /// replay) until an operator acts. So does a node that cannot run the
    /// module its peers swapped in (`module_cannot_run`): a restart with
    /// the same settings stops at the same swap. Then this never resolves.
    #[inline(never)]
    pub fn failed(&self) -> BoxFuture<'_, String> {
        Box::pin(self.failed_inner())
    }

    async fn failed_inner(&self) -> String {
        // openraft's server metrics change with the vote, the role, the
        // leader and the membership only; its full metrics change with
        // every entry, and this future runs on the thread that started
        // the runtime: a wakeup of that thread per entry. A fatal error
        // ends openraft's core, which drops the server metrics' sender;
        // its reason is in the full metrics by then.
        let mut server = self.raft.server_metrics();
        let fatal = || match &self.raft.metrics().borrow().running_state {
            Err(fatal) => Some(fatal.to_string()),
            Ok(()) => None,
        };
        let why = loop {
            if let Some(why) = fatal() {
                break why;
            }
            if server.changed().await.is_err() {
                break fatal().unwrap_or_else(|| "Raft stopped without a reason".to_string());
            }
        };
        let view = self.sm.view(false);
        if view.poisoned.is_some() || view.module_cannot_run.is_some() {
            tracing::error!(error = %why, "raft stopped: the lock module is poisoned, or this node cannot run it; staying up to report it");
            std::future::pending::<()>().await;
        }
        why
    }
}

/// Count every change of the leader `raft` knows (to another node, or to
/// none), until shutdown.
pub(super) async fn count_leader_changes(
    raft: Raft,
    count: Arc<AtomicU64>,
    mut shutdown: watch::Receiver<bool>,
) {
    // The server metrics: they change with the leader, not with every
    // entry.
    let mut metrics = raft.server_metrics();
    let mut leader = metrics.borrow_and_update().current_leader;
    loop {
        tokio::select! {
            changed = metrics.changed() => if changed.is_err() { return },
            _ = shutdown.changed() => return,
        }
        let now = metrics.borrow_and_update().current_leader;
        if now != leader {
            leader = now;
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
