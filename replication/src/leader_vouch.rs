//! A leader this node's membership does not name, vouched for by a member.
//!
//! The peer gate (`raft::peer_check`) lets through only the members of
//! this node's own membership, and a request never vouches for its own
//! sender. A node that was cut off while another node was added (or
//! removed and added back) has an older membership; if the added node then
//! leads, this node refuses it for as long as it leads and never catches
//! up (found by the simulation, seeds 1059 and 1799).
//!
//! So when the gate refuses a leader's AppendEntries or snapshot as a
//! non-member, this node asks the members it *does* know (over the
//! cluster's transport, as itself) for their status; once one of them
//! lists the sender as a member, the sender is admitted, for as long as
//! this node's own membership stays the one it had when it asked. Once
//! this node has caught up, its own membership decides again. Only
//! members already trusted vouch (docs/security.md, "Peers").

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockd_net::http::Http;
use lockd_proto::Status;
use tokio::sync::{watch, Notify};

use super::{NodeId, Raft};

/// How often a round of questions may start.
const ROUND_EVERY: Duration = Duration::from_millis(500);

/// The membership a vouch was given under: its log id's (term, index).
type Under = Option<(u64, u64)>;

#[derive(Debug, Default)]
pub struct Vouches {
    /// Senders admitted, each with the membership it was admitted under.
    admitted: Mutex<BTreeMap<NodeId, Under>>,
    /// Senders refused since the last round.
    wanted: Mutex<BTreeSet<NodeId>>,
    asked: Notify,
}

/// The membership `raft` has now, as a vouch records it.
pub fn under(raft: &Raft) -> Under {
    raft.metrics()
        .borrow()
        .membership_config
        .log_id()
        .map(|l| (l.leader_id.term, l.index))
}

impl Vouches {
    pub fn new() -> Arc<Vouches> {
        Arc::new(Vouches::default())
    }

    /// Whether a member vouched for `id` under the membership `now`.
    pub fn admits(&self, id: NodeId, now: Under) -> bool {
        let admitted = self.admitted.lock().unwrap_or_else(|p| p.into_inner());
        admitted.get(&id) == Some(&now)
    }

    /// The gate refused a leader `id` as a non-member: ask about it.
    pub fn want(&self, id: NodeId) {
        let mut wanted = self.wanted.lock().unwrap_or_else(|p| p.into_inner());
        if wanted.insert(id) {
            self.asked.notify_one();
        }
    }

    /// Answer the wanted senders by asking the members, a round at most
    /// every [`ROUND_EVERY`], until `shutdown`.
    pub async fn run(
        self: Arc<Self>,
        raft: Raft,
        my_id: NodeId,
        http: Http,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                _ = self.asked.notified() => {}
                _ = shutdown.wait_for(|s| *s) => return,
            }
            let wanted =
                std::mem::take(&mut *self.wanted.lock().unwrap_or_else(|p| p.into_inner()));
            let asked_under = under(&raft);
            let members: Vec<(NodeId, String)> = {
                let m = raft.metrics().borrow().clone();
                m.membership_config
                    .membership()
                    .nodes()
                    .filter(|(id, _)| **id != my_id && !wanted.contains(id))
                    .map(|(id, n)| (*id, n.addr.clone()))
                    .collect()
            };
            if wanted.is_empty() {
                continue;
            }
            // Every member at once, each within the client's timeout, and
            // a sender admitted on the first member that lists it: a
            // member whose answers cannot reach this node (a one-way
            // fault) must not hold the round for its whole timeout
            // (simulation seed 175059).
            let mut asks: futures::stream::FuturesUnordered<_> = members
                .iter()
                .map(|(member, addr)| {
                    let http = &http;
                    async move {
                        (
                            *member,
                            http.get_json::<Status>(addr, "/v1/status").await.ok(),
                        )
                    }
                })
                .collect();
            let mut unanswered = wanted;
            while !unanswered.is_empty() {
                let next = tokio::select! {
                    next = futures::StreamExt::next(&mut asks) => next,
                    _ = shutdown.wait_for(|s| *s) => return,
                };
                let Some((member, status)) = next else {
                    break; // every member answered or timed out
                };
                let Some(status) = status else { continue };
                let (vouched, rest): (BTreeSet<NodeId>, _) = unanswered
                    .into_iter()
                    .partition(|id| status.members.iter().any(|m| m.id == *id));
                unanswered = rest;
                let mut admitted = self.admitted.lock().unwrap_or_else(|p| p.into_inner());
                for id in vouched {
                    tracing::info!(
                        id,
                        member,
                        "a member vouches for a leader this node's membership does not name yet"
                    );
                    admitted.insert(id, asked_under);
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(ROUND_EVERY) => {}
                _ = shutdown.wait_for(|s| *s) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vouch_holds_only_under_the_membership_it_was_given_under() {
        let v = Vouches::default();
        assert!(!v.admits(5, Some((3, 40))));
        v.admitted.lock().unwrap().insert(5, Some((3, 40)));
        assert!(v.admits(5, Some((3, 40))));
        assert!(!v.admits(5, Some((4, 52))), "the membership moved on");
        assert!(!v.admits(6, Some((3, 40))));
    }
}
