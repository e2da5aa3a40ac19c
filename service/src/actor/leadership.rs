//! Leadership, as the actor sees it: a task that tells it whenever this
//! node becomes or stops being the leader, and the table's load from the
//! applied state once a new leader has caught up.

use std::time::Duration;

use tokio::sync::mpsc;

use super::{Actor, Msg};
use crate::{barrier, world};
use lockd_replication::state_machine::StateMachineStore;
use lockd_replication::{NodeId, Raft};

/// Tell the actor whenever this node becomes or stops being the leader.
///
/// It watches openraft's server metrics (the vote, the role, the leader,
/// the membership), not its full metrics, which change with every entry.
/// A fatal error ends openraft's core and drops their sender: then this
/// node leads no more and knows no leader.
pub(super) async fn watch(id: NodeId, raft: Raft, tx: mpsc::UnboundedSender<Msg>) {
    let mut metrics = raft.server_metrics();
    let mut was: Option<(bool, u64, Option<NodeId>)> = None;
    let mut stopped = false;
    loop {
        let now = {
            let m = metrics.borrow_and_update();
            let term = m.vote.leader_id().get_term();
            // A stopped Raft's metrics stay as they were: it leads no more
            // and knows no leader (simulation seed 130193).
            let running = !stopped && raft.metrics().borrow().running_state.is_ok();
            let leader = m.current_leader.filter(|_| running);
            (leader == Some(id), term, leader)
        };
        if was != Some(now) {
            let msg = if now.0 {
                Msg::Leader { term: now.1 }
            } else {
                Msg::Follower { leader: now.2 }
            };
            if tx.send(msg).is_err() {
                return;
            }
            was = Some(now);
        }
        if stopped {
            return;
        }
        // Once the sender is gone, one more turn reports the node stopped.
        stopped = metrics.changed().await.is_err();
    }
}

impl Actor {
    /// After `delay`, read the applied lock table once everything this
    /// node acknowledged has been applied ([`barrier::confirm`]), then report
    /// back.
    pub(super) fn load(&self, term: u64, delay: Duration) {
        let (raft, sm, tx, id) = (self.raft.clone(), self.sm.clone(), self.tx.clone(), self.id);
        self.tasks.spawn(async move {
            tokio::time::sleep(delay).await;
            let locks = match barrier::confirm(&raft, id).await {
                Ok(()) => {
                    record_first_module(&raft, &sm).await;
                    world::read_all(&sm)
                }
                Err(e) => Err(e),
            };
            let _ = tx.send(Msg::Loaded { term, locks });
        });
    }
}

/// A new cluster's first leader records the module the cluster starts
/// with before it serves a lock (see [`lockd_core::upgrade::Genesis`]). A
/// failure (leadership lost) leaves it to the next leader.
async fn record_first_module(raft: &Raft, sm: &StateMachineStore) {
    let Some(genesis) = sm.genesis_needed() else {
        return;
    };
    let module = lockd_core::engine::ModuleHash::of(&genesis.module);
    match raft
        .client_write(lockd_replication::Request::Genesis(genesis))
        .await
    {
        Ok(r) => {
            tracing::info!(index = r.log_id.index, module = %module, outcome = ?r.data, "recorded the cluster's first module")
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not record the cluster's first module; the next leader will")
        }
    }
}
