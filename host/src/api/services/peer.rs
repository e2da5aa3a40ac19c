//! The answer to a peer's RPC, once the peer gate lets it through: Raft's
//! own messages handed to openraft, with what `raft::stand` learns from
//! them; the pre-vote, the hand-over notice and the module pre-check
//! answered here. Only a voter of the committed membership is counted in
//! a vote or a pre-vote.

use std::time::Duration;

use openraft::raft::AppendEntriesResponse;

use super::Services;
use crate::raft::messages::{
    PeerRequest, PeerResponse, PreVoteAnswer, PreVoteAsk, SignedPrecheckAsk,
};
use crate::raft::peer_check::Refusal;
use crate::raft::prevote::VoterView;
use crate::raft::stand::PeerConn;
use crate::raft::NodeId;

impl Services {
    /// Whether `from` is a voter of the membership this node has
    /// committed: only a voter's pre-vote or vote is counted (a learner, or
    /// a node removed since, cannot win, and must not hold voters back).
    async fn committed_voter(&self, from: NodeId) -> bool {
        #[cfg(feature = "faults")]
        if lockd_core::faults::get().any_voter {
            return true;
        }
        self.parts
            .raft
            .with_raft_state(move |st| {
                // A new cluster's first membership is committed by its
                // first leader, which these votes elect: until then the
                // one it started with.
                let committed = st.membership_state.committed();
                let m = match committed.log_id() {
                    Some(_) => committed,
                    None => st.membership_state.effective(),
                };
                m.voter_ids().any(|v| v == from)
            })
            .await
            .unwrap_or(false)
    }

    /// Whether this node would vote for `from` (`raft::prevote`).
    fn answer_pre_vote(&self, from: NodeId, ask: &PreVoteAsk) -> PreVoteAnswer {
        let (view, followed) = {
            let metrics = self.parts.raft.metrics();
            let m = metrics.borrow();
            let view = VoterView {
                votes: m.running_state.is_ok(),
                leads: m.current_leader == Some(self.parts.id),
                last_log_id: self.parts.log.last_log_id(),
                silent_for: Duration::ZERO,
                leader_gone: false,
            };
            (view, m.vote.is_committed())
        };
        self.parts
            .silence
            .answer(self.parts.id, from, ask, view, followed)
    }

    /// A peer's connection opens: served until the guard drops
    /// (`raft::stand` learns when the leader's closes).
    pub(crate) fn peer_connection(&self) -> PeerConn {
        self.parts.silence.connection()
    }

    /// Answer a peer's Raft RPC, once the peer gate lets it through; `conn`
    /// is the connection it came on ([`Services::peer_connection`]).
    pub(crate) async fn answer_peer(
        &self,
        from: NodeId,
        conn: u64,
        req: PeerRequest,
    ) -> PeerResponse {
        if let Err(why) = self
            .parts
            .peer_gate
            .check(from, &req, |id| self.may_send(id))
        {
            tracing::warn!(id = self.parts.id, from, %why, "refused a peer request");
            let leads = match &req {
                PeerRequest::AppendEntries(r) => r.vote.is_committed(),
                PeerRequest::InstallSnapshot(r) => r.vote.is_committed(),
                PeerRequest::Vote(_)
                | PeerRequest::Precheck(_)
                | PeerRequest::SignedPrecheck(_)
                | PeerRequest::PreVote(_)
                | PeerRequest::Resign(_)
                | PeerRequest::KeepAlive { .. } => false,
            };
            if leads && matches!(why, Refusal::NotMember(_)) {
                self.parts.vouches.want(from);
            }
            let text = format!("node {} refused the request: {why}", self.parts.id);
            return match why {
                Refusal::NotMember(_) => PeerResponse::NotMember(text),
                Refusal::Invalid(_) => PeerResponse::Error(text),
            };
        }
        match req {
            PeerRequest::AppendEntries(r) => {
                // What this leader showed of its log: the most a pre-vote
                // may claim and be believed (`raft::stand`).
                let shown = r.entries.last().map(|e| e.log_id).max(r.leader_commit);
                let answer = self.parts.raft.append_entries(r).await;
                match &answer {
                    Ok(
                        AppendEntriesResponse::Success | AppendEntriesResponse::PartialSuccess(_),
                    ) => {
                        self.parts.standing.followed();
                        self.parts.silence.heard(conn, shown);
                    }
                    // The leader is alive, though its log and ours differ.
                    Ok(AppendEntriesResponse::Conflict) => self.parts.silence.heard(conn, None),
                    _ => {}
                }
                PeerResponse::AppendEntries(answer)
            }
            PeerRequest::Vote(r) if !self.committed_voter(from).await => {
                // A learner (or a node removed since) cannot win: its ask
                // neither moves this node's term nor holds it back.
                let m = self.parts.raft.metrics().borrow().clone();
                let vote =
                    openraft::raft::VoteResponse::new(m.vote, self.parts.log.last_log_id(), false);
                tracing::debug!(
                    id = self.parts.id,
                    from,
                    term = r.vote.leader_id.term,
                    "refused a vote to a node that is not a voter"
                );
                PeerResponse::Vote(Ok(vote))
            }
            PeerRequest::Vote(r) => {
                // Before the answer: this node must not stand over the
                // candidate while it counts its votes.
                let theirs = r.last_log_id;
                let before = self.parts.silence.asked_to_vote();
                let answer = self.parts.raft.vote(r).await;
                if let Ok(v) = &answer {
                    if !v.vote_granted && v.last_log_id > theirs {
                        self.parts.silence.outranks(before);
                    }
                }
                PeerResponse::Vote(answer)
            }
            PeerRequest::InstallSnapshot(r) => {
                let answer = self.parts.raft.install_snapshot(r).await;
                if answer.as_ref().is_ok_and(|a| a.vote.is_committed()) {
                    self.parts.silence.heard(conn, None);
                }
                PeerResponse::InstallSnapshot(answer)
            }
            PeerRequest::PreVote(_) if !self.committed_voter(from).await => {
                PeerResponse::PreVote(PreVoteAnswer::NotVoter)
            }
            PeerRequest::PreVote(ask) => PeerResponse::PreVote(self.answer_pre_vote(from, &ask)),
            PeerRequest::Resign(notice) => {
                // Only from the leader this node follows, of this term.
                if self.parts.raft.metrics().borrow().vote == notice.vote {
                    self.parts
                        .silence
                        .resigned(notice.successor == self.parts.id);
                }
                PeerResponse::Resigned
            }
            // An older leader's ask carries no signature: answered as
            // unsigned (refused while keys are trusted).
            PeerRequest::Precheck(ask) => PeerResponse::Precheck(
                self.parts
                    .upgrader
                    .answer_precheck(from, SignedPrecheckAsk::unsigned(ask))
                    .await,
            ),
            PeerRequest::SignedPrecheck(ask) => {
                PeerResponse::Precheck(self.parts.upgrader.answer_precheck(from, ask).await)
            }
            // The connection answers it (`api::framed::peer`).
            PeerRequest::KeepAlive { .. } => {
                PeerResponse::Error("keep-alive is a setting of the connection".into())
            }
        }
    }
}
