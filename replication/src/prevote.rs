//! Pre-vote: whether a voter would vote for a node that wants to stand.
//!
//! openraft 0.9 has no pre-vote. Without it, a node that stands raises
//! the term whether or not it can win, and a leader that meets the higher
//! term steps down: a node restarted, or cut off and back, deposes a
//! healthy leader (a fresh-clone CI run lost `lock_reentrant` that way).
//! So a node asks before it stands ([`super::stand`]): each voter answers
//! from what it sees itself, and only with a quorum of "yes" (itself
//! included) does the node ask openraft to stand. The answer costs the
//! voter nothing: no term changes, nothing is written.
//!
//! A voter says yes ([`judge`]) when it is a voter that does not lead, the
//! candidate's log is at least as long as its own (a shorter one cannot
//! win the real vote), and it has no leader: it heard none for the
//! election timeout, or the connection that carried its leader's last
//! message has closed (the leader's process is gone: its sockets closed
//! with it) and openraft's lease, during which it would refuse the real
//! vote, has run out. A node counts its start as a leader's message, so a
//! node just restarted does not help unseat a leader it has not heard yet.
//! Terms are not compared: a candidate whose term is behind learns the
//! voters' from the real vote's answers and stands above it next time.
//!
//! The messages are peer messages ([`super::messages::PeerRequest::PreVote`]),
//! pinned by `tests/golden/peer_prevote.hex` and
//! `peer_answer_prevote.hex`; a node of an older version cannot decode the
//! ask and answers an error, which counts as "no" (it still stands on
//! openraft's own timer, docs/operations.md, "Leader failover").

use std::time::Duration;

use super::messages::{PreVoteAnswer, PreVoteAsk};
use super::LogId;

/// What a voter sees of itself when asked.
#[derive(Clone, Copy, Debug)]
pub struct VoterView {
    /// A voter whose Raft runs.
    pub votes: bool,
    pub leads: bool,
    pub last_log_id: Option<LogId>,
    /// Since its leader's last message (or its own start, if later).
    pub silent_for: Duration,
    /// The connection that carried that message has closed since.
    pub leader_gone: bool,
}

/// The two waits of the rule: the election timeout, and openraft's lease
/// (its `election_timeout_max`, during which a voter refuses the real
/// vote after its leader's last message).
#[derive(Clone, Copy, Debug)]
pub struct Waits {
    pub election: Duration,
    pub lease: Duration,
}

impl Waits {
    /// How long a voter must have heard nothing before it says yes.
    pub(crate) fn silence_needed(&self, leader_gone: bool) -> Duration {
        if leader_gone {
            self.lease
        } else {
            self.election
        }
    }
}

/// The voter's answer to `ask` (see the module docs).
pub fn judge(view: &VoterView, ask: &PreVoteAsk, waits: Waits) -> PreVoteAnswer {
    if !view.votes {
        return PreVoteAnswer::CannotVote;
    }
    if view.leads {
        return PreVoteAnswer::Leads;
    }
    if ask.last_log_id < view.last_log_id {
        return PreVoteAnswer::LongerLog;
    }
    let needed = waits.silence_needed(view.leader_gone);
    if view.silent_for >= needed {
        return PreVoteAnswer::Granted;
    }
    let wait = needed - view.silent_for;
    PreVoteAnswer::LeaderHeard {
        wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX) + 1,
    }
}

/// Whether `granted` (voter ids) is a quorum of every one of the
/// membership's configurations (two during a joint change).
pub(crate) fn is_quorum(configs: &[std::collections::BTreeSet<u64>], granted: &[u64]) -> bool {
    !configs.is_empty()
        && configs.iter().all(|voters| {
            let yes = voters.iter().filter(|v| granted.contains(v)).count();
            yes * 2 > voters.len()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Vote;
    use openraft::CommittedLeaderId;
    use std::collections::BTreeSet;

    fn log(term: u64, index: u64) -> Option<LogId> {
        Some(LogId::new(CommittedLeaderId::new(term, 1), index))
    }

    const WAITS: Waits = Waits {
        election: Duration::from_millis(200),
        lease: Duration::from_millis(101),
    };

    fn view(silent_ms: u64, gone: bool) -> VoterView {
        VoterView {
            votes: true,
            leads: false,
            last_log_id: log(3, 10),
            silent_for: Duration::from_millis(silent_ms),
            leader_gone: gone,
        }
    }

    fn ask(last: Option<LogId>) -> PreVoteAsk {
        PreVoteAsk {
            vote: Vote::new(4, 2),
            last_log_id: last,
        }
    }

    #[test]
    fn a_voter_that_hears_its_leader_says_no_and_when_to_ask_again() {
        let a = judge(&view(150, false), &ask(log(3, 10)), WAITS);
        assert_eq!(a, PreVoteAnswer::LeaderHeard { wait_ms: 51 });
        // Its leader's connection closed: only the lease is waited out.
        let a = judge(&view(60, true), &ask(log(3, 10)), WAITS);
        assert_eq!(a, PreVoteAnswer::LeaderHeard { wait_ms: 42 });
    }

    #[test]
    fn silence_or_a_closed_connection_past_the_lease_is_a_yes() {
        assert_eq!(
            judge(&view(200, false), &ask(log(3, 10)), WAITS),
            PreVoteAnswer::Granted
        );
        assert_eq!(
            judge(&view(101, true), &ask(log(3, 11)), WAITS),
            PreVoteAnswer::Granted
        );
        // A longer log of an older term is still a shorter log.
        assert_eq!(
            judge(&view(500, true), &ask(log(2, 50)), WAITS),
            PreVoteAnswer::LongerLog
        );
        assert_eq!(
            judge(&view(500, true), &ask(None), WAITS),
            PreVoteAnswer::LongerLog
        );
    }

    #[test]
    fn a_leader_or_a_non_voter_never_says_yes() {
        let mut v = view(10_000, true);
        v.leads = true;
        assert_eq!(judge(&v, &ask(log(9, 99)), WAITS), PreVoteAnswer::Leads);
        v.leads = false;
        v.votes = false;
        assert_eq!(
            judge(&v, &ask(log(9, 99)), WAITS),
            PreVoteAnswer::CannotVote
        );
    }

    #[test]
    fn a_quorum_is_a_majority_of_each_configuration() {
        let one: BTreeSet<u64> = [1, 2, 3].into();
        let two: BTreeSet<u64> = [3, 4, 5].into();
        assert!(is_quorum(std::slice::from_ref(&one), &[1, 3]));
        assert!(!is_quorum(std::slice::from_ref(&one), &[3]));
        assert!(!is_quorum(&[one.clone(), two.clone()], &[1, 2]));
        assert!(is_quorum(&[one.clone(), two], &[1, 3, 4]));
        assert!(is_quorum(&[[1].into()], &[1]));
        assert!(!is_quorum(&[], &[1]));
    }
}
