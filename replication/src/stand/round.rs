//! One pre-vote round ([`Clients::pre_vote`]), whether a node may stand
//! at all ([`eligible`]), and the random part of its waits.

use std::collections::HashMap;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use rand::Rng;

use super::super::log_store::LogStore;
use super::super::messages::{PreVoteAnswer, PreVoteAsk};
use super::super::non_member::Standing;
use super::super::peer_client::{NetworkFactory, PeerClient};
use super::super::prevote::is_quorum;
use super::super::{NodeId, Raft, Vote};
use openraft::RaftNetworkFactory;

/// The pre-vote round's result.
pub(super) struct Tally {
    pub quorum: bool,
    pub granted: Vec<NodeId>,
    /// The soonest a refusing voter said it would grant.
    pub wait: Option<Duration>,
}

/// One peer client per voter, kept between rounds (each has its own
/// connection, opened on first use).
#[derive(Default)]
pub(super) struct Clients(HashMap<NodeId, (String, PeerClient)>);

impl Clients {
    /// Ask every other voter at once; done at a quorum of yes, or when
    /// every answer (or `within`) is in.
    pub(super) async fn pre_vote(
        &mut self,
        raft: &Raft,
        id: NodeId,
        log: &LogStore,
        peers: &mut NetworkFactory,
        within: Duration,
    ) -> Tally {
        let (configs, voters, term) = {
            let m = raft.metrics();
            let m = m.borrow();
            let mut voters = super::super::voters(&m);
            voters.retain(|(v, _)| *v != id);
            (
                m.membership_config.membership().get_joint_config().clone(),
                voters,
                m.vote.leader_id().term,
            )
        };
        let ask = PreVoteAsk {
            vote: Vote::new(term + 1, id),
            last_log_id: log.last_log_id(),
        };
        let mut tally = Tally {
            quorum: is_quorum(&configs, &[id]),
            granted: vec![id],
            wait: None,
        };
        let mut asks = FuturesUnordered::new();
        for (target, node) in voters {
            if tally.quorum {
                break;
            }
            let mut client = match self.0.remove(&target) {
                Some((addr, client)) if addr == node.addr => client,
                _ => peers.new_client(target, &node).await,
            };
            let ask = ask.clone();
            asks.push(async move {
                let answer = tokio::time::timeout(within, client.pre_vote(ask, within)).await;
                (target, node.addr, client, answer)
            });
        }
        while let Some((target, addr, client, answer)) = asks.next().await {
            self.0.insert(target, (addr, client));
            match answer {
                Ok(Ok(PreVoteAnswer::Granted)) => tally.granted.push(target),
                Ok(Ok(PreVoteAnswer::LeaderHeard { wait_ms })) => {
                    let wait = Duration::from_millis(wait_ms.min(60_000));
                    tally.wait = Some(tally.wait.map_or(wait, |w| w.min(wait)));
                }
                _ => {}
            }
            if is_quorum(&configs, &tally.granted) {
                tally.quorum = true;
                break;
            }
        }
        tally
    }
}

pub(super) enum Eligible {
    Yes,
    No,
    Stopped,
}

/// Whether this node may stand now.
pub(super) fn eligible(raft: &Raft, id: NodeId, standing: &Standing) -> Eligible {
    let metrics = raft.metrics();
    let m = metrics.borrow();
    if m.running_state.is_err() {
        return Eligible::Stopped;
    }
    let voter = m
        .membership_config
        .membership()
        .voter_ids()
        .any(|v| v == id);
    let leads = m.current_leader == Some(id);
    if !voter || leads || standing.is_paused() {
        return Eligible::No;
    }
    Eligible::Yes
}

/// A duration in `[0, max)`, from the generator openraft draws from.
pub(super) fn random_up_to(max: Duration) -> Duration {
    let us = max.as_micros() as u64;
    if us == 0 {
        return Duration::ZERO;
    }
    let mut rng = super::super::runtime::RaftRng;
    Duration::from_micros(rng.gen_range(0..us))
}
