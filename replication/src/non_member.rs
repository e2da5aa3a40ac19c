//! A node its peers refuse as a non-member stops starting elections.
//!
//! A voter removed while cut off never receives the entry that removes it:
//! its own log still names it a voter, so openraft keeps starting
//! elections, each at a higher term. The members refuse its votes (the
//! peer gate, `raft::peer_check`), but a member that also missed the
//! removal grants them, and once the node is added back every leader that
//! replicates to it meets its higher term and steps down: the cluster
//! never settles (found by the simulation's membership changes, seed 979).
//!
//! etcd stops a removed member outright. Here the node stays up, so it can
//! be added back without a restart, but stops campaigning (`raft::stand`
//! asks [`Standing::is_paused`]) as soon as one peer answers a vote or a
//! pre-vote with [`PeerResponse::NotMember`](super::messages::PeerResponse).
//! It starts again once a leader's AppendEntries succeeds on it: its vote
//! is then the leader's and its log follows the leader's membership, in
//! which openraft itself decides whether it may campaign (a learner never
//! does). A voter wrongly paused (a peer whose membership is behind refused
//! it) still grants votes, and resumes at the first leader's append.

use std::sync::Arc;

use tokio::sync::watch;

/// Whether this node's elections are paused; shared by the peer client
/// (which pauses) and the peer server (which resumes).
#[derive(Debug)]
pub struct Standing {
    paused: watch::Sender<bool>,
}

impl Standing {
    pub fn new() -> Arc<Standing> {
        Arc::new(Standing {
            paused: watch::channel(false).0,
        })
    }

    /// A peer refused this node's vote request: it is not a member there.
    pub fn refused(&self, by: u64) {
        self.paused.send_if_modified(|paused| {
            if *paused {
                return false;
            }
            tracing::warn!(by, "a peer does not count this node a member: no elections from here until a leader replicates to it");
            *paused = true;
            true
        });
    }

    /// A leader's AppendEntries succeeded here. Called on every one, so
    /// the common case (not paused) only reads.
    pub fn followed(&self) {
        if !self.is_paused() {
            return;
        }
        self.paused.send_if_modified(|paused| {
            if !*paused {
                return false;
            }
            tracing::info!("a leader replicates to this node again: elections resume");
            *paused = false;
            true
        });
    }

    pub(crate) fn is_paused(&self) -> bool {
        *self.paused.borrow()
    }
}
