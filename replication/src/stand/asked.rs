//! What other nodes' asks do to this node's stand: a real vote asked for
//! holds it back for the candidate's time to win, a leader's resignation
//! names a successor, and a pre-vote granted to a better candidate (a
//! voter whose longer log a leader showed this node) holds it back a
//! quarter of a timeout.

use std::time::Duration;

use tokio::time::Instant;

use super::super::messages::{PreVoteAnswer, PreVoteAsk};
use super::super::prevote::{judge, VoterView};
use super::super::NodeId;
use super::{random_up_to, Silence};

impl Silence {
    /// Another node asks for this node's real vote: it stands now, and
    /// gets the time to win: half a timeout and a random part of up to
    /// another half (two candidates of one term, each refused by the
    /// other, must not stand again at the same moment). Held before the
    /// answer (this node must not stand over it while it counts); given
    /// back with [`Silence::outranks`] if this node refused it for a
    /// shorter log (it cannot win, and must not hold anyone back).
    pub fn asked_to_vote(&self) -> Option<Instant> {
        let half = self.waits.election / 2;
        let until = Instant::now() + half + random_up_to(half);
        let mut s = self.state();
        let before = s.hold;
        s.hold_until(until);
        before
    }

    /// This node refused a vote for a log shorter than its own: the hold
    /// is as before.
    pub fn outranks(&self, before: Option<Instant>) {
        self.state().hold = before;
    }

    /// The leader this node follows resigned (`raft::handoff`), naming
    /// this node its successor or not.
    pub fn resigned(&self, successor: bool) {
        let now = Instant::now();
        {
            let mut s = self.state();
            if s.heard.is_none() {
                return;
            }
            s.gone = Some(now);
            s.successor = successor;
            if !successor {
                // Time for the successor to win, before this node guesses.
                s.hold_until(now + self.waits.election);
            }
        }
        tracing::info!(successor, "the leader resigned");
        self.changed.notify_one();
    }

    /// Answer node `from`'s pre-vote. `view` is what the caller knows of
    /// this node's Raft; the silence is filled in here. `followed`: this
    /// node's vote is a leader's (it counts its start as a message from
    /// that leader, see `raft::prevote`).
    pub fn answer(
        &self,
        me: NodeId,
        from: NodeId,
        ask: &PreVoteAsk,
        mut view: VoterView,
        followed: bool,
    ) -> PreVoteAnswer {
        let now = Instant::now();
        let mut s = self.state();
        view.silent_for = match s.heard {
            Some(at) => now - at,
            None if followed => now - self.started,
            None => Duration::MAX,
        };
        view.leader_gone = s.gone.is_some();
        let answer = judge(&view, ask, self.waits);
        let better =
            (ask.last_log_id, std::cmp::Reverse(from)) > (view.last_log_id, std::cmp::Reverse(me));
        // A log longer than any a leader showed this node is a claim only:
        // it may be granted (the real vote checks), but holds no one back.
        let believed = ask.last_log_id <= view.last_log_id.max(s.heard_log);
        #[cfg(feature = "faults")]
        let believed = believed || lockd_core::faults::get().any_voter;
        if answer == PreVoteAnswer::Granted && better && believed {
            s.hold_until(now + self.waits.election / 4);
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, LogId, Vote};

    use super::super::super::prevote::Waits;
    use super::*;

    fn log(index: u64) -> Option<LogId<NodeId>> {
        Some(LogId::new(CommittedLeaderId::new(3, 1), index))
    }

    fn ask(from: NodeId, index: u64) -> PreVoteAsk {
        PreVoteAsk {
            vote: Vote::new(4, from),
            last_log_id: log(index),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn only_a_log_a_leader_showed_holds_this_node_back() {
        let waits = Waits {
            election: Duration::from_millis(200),
            lease: Duration::from_millis(101),
        };
        let silence = Silence::new(waits);
        // The leader showed this node its log up to 50; this node has 40.
        silence.heard(7, log(50));
        tokio::time::advance(Duration::from_secs(1)).await;
        let view = VoterView {
            votes: true,
            leads: false,
            last_log_id: log(40),
            silent_for: Duration::ZERO,
            leader_gone: false,
        };
        // A claim past anything shown: granted, but no hold.
        let answer = silence.answer(1, 2, &ask(2, 1 << 40), view, true);
        assert_eq!(answer, PreVoteAnswer::Granted);
        assert_eq!(silence.state().hold, None, "a claim held this node back");
        // A longer log that the leader did show: granted, and held back.
        let answer = silence.answer(1, 2, &ask(2, 50), view, true);
        assert_eq!(answer, PreVoteAnswer::Granted);
        assert!(silence.state().hold.is_some());
    }
}
