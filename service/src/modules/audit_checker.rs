//! The determinism audit's background checker: every node compares its
//! audit points with its peers' and raises the alarm (log line and metric)
//! for each divergence it has not seen before.

use std::collections::BTreeSet;
use std::time::Duration;

use lockd_net::http::Http;
use lockd_proto::audit::compare;
use lockd_proto::AuditReport;
use tokio::sync::watch;

use lockd_replication::state_machine::StateMachineStore;
use lockd_replication::{members, NodeId, Raft};

/// Compare this node's audit points with every peer's, every `every`, and
/// raise the alarm for each divergence not seen before.
pub async fn run(
    id: NodeId,
    raft: Raft,
    sm: StateMachineStore,
    every: Duration,
    credentials: lockd_net::Credentials,
    mut stop: watch::Receiver<bool>,
) {
    let mut seen: BTreeSet<(u64, u64)> = BTreeSet::new();
    // One client for the whole run, so peer connections are reused; with
    // TLS it presents this node's certificate (peers let nodes read).
    let http = Http::secured(lockd_net::http::GET_TIMEOUT, credentials);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let mut reports = vec![sm.audit_report()];
        // Every peer at once, each within the client's timeout, and the
        // node's stop heard meanwhile: dead peers cost a round one timeout.
        let peers: Vec<_> = members(&raft).into_iter().filter(|m| m.id != id).collect();
        let asks = peers.iter().map(|m| {
            let http = &http;
            async move {
                (
                    m.id,
                    http.get_json::<AuditReport>(&m.addr, "/v1/audit").await,
                )
            }
        });
        let answers = tokio::select! {
            answers = futures::future::join_all(asks) => answers,
            _ = stop.wait_for(|s| *s) => return,
        };
        for (peer, answer) in answers {
            match answer {
                Ok(r) if r.id == peer => reports.push(r),
                Ok(r) => tracing::warn!(
                    node = id,
                    peer,
                    answered = r.id,
                    "audit: a peer answered with another id"
                ),
                Err(e) => {
                    tracing::debug!(node = id, peer, error = %e, "audit: peer unreachable")
                }
            }
        }
        for d in compare(&reports).divergences {
            if seen.insert((d.node, d.index)) {
                sm.count_divergence(d.node, d.index);
                tracing::error!(
                    node = id,
                    divergent_node = d.node,
                    index = d.index,
                    hash = %d.hash,
                    majority = d.majority.as_deref().unwrap_or("none"),
                    "DETERMINISM AUDIT: node {} has a different state hash at index {}",
                    d.node,
                    d.index
                );
            }
        }
        // Forget what fell out of every node's window.
        if seen.len() > 65_536 {
            seen.clear();
        }
    }
}
