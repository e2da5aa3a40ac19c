//! The answering side of the peer protocol, once the peer gate lets a
//! request through: Raft's own messages handed to openraft, with what
//! [`crate::stand`] learns from them; the pre-vote and the hand-over
//! notice answered here; the layer above's asks (the module pre-check)
//! handed to it ([`AnswersService`]). Only a voter of the committed
//! membership is counted in a vote or a pre-vote. The connection that
//! carries them is the node's (it shares the node's one address with the
//! front doors).

use std::future::Future;
use std::time::Duration;

use openraft::raft::{AppendEntriesResponse, VoteResponse};

use crate::leader_vouch::Vouches;
use crate::log_store::LogStore;
use crate::messages::{PeerRequest, PeerResponse, PreVoteAnswer, PreVoteAsk, ServiceMessages};
use crate::non_member::Standing;
use crate::peer_check::{PeerGate, Refusal};
use crate::prevote::VoterView;
use crate::stand::Silence;
use crate::{NodeId, Raft};

/// The layer above's side of the peer protocol: it answers its own asks.
pub trait AnswersService: Send + Sync {
    /// The messages it answers.
    type Messages: ServiceMessages;
    /// An older leader's ask, read as today's.
    fn first(
        ask: <Self::Messages as ServiceMessages>::FirstAsk,
    ) -> <Self::Messages as ServiceMessages>::Ask;
    /// The answer to `from`'s ask.
    fn answer(
        &self,
        from: NodeId,
        ask: <Self::Messages as ServiceMessages>::Ask,
    ) -> impl Future<Output = <Self::Messages as ServiceMessages>::Answer> + Send;
}

/// What answering a peer reads and tells: this node's consensus parts,
/// borrowed, and the layer above's answerer.
pub struct Answerer<'a, A> {
    pub id: NodeId,
    pub raft: &'a Raft,
    pub log: &'a LogStore,
    pub gate: &'a PeerGate,
    pub standing: &'a Standing,
    pub silence: &'a Silence,
    pub vouches: &'a Vouches,
    pub service: &'a A,
}

/// Whether `id` is in this node's membership; `None` while it has none.
pub fn is_member(raft: &Raft, id: NodeId) -> Option<bool> {
    let metrics = raft.metrics();
    let m = metrics.borrow();
    let membership = m.membership_config.membership();
    membership.nodes().next()?;
    Some(membership.get_node(&id).is_some())
}

/// Whether a peer RPC from `id` may reach openraft: [`is_member`], or a
/// leader a member vouched for ([`crate::leader_vouch`]).
pub fn may_send(raft: &Raft, vouches: &Vouches, id: NodeId) -> Option<bool> {
    match is_member(raft, id) {
        Some(false) => Some(vouches.admits(id, crate::leader_vouch::under(raft))),
        other => other,
    }
}

impl<A: AnswersService> Answerer<'_, A> {
    /// Whether `from` is a voter of the membership this node has
    /// committed: only a voter's pre-vote or vote is counted (a learner, or
    /// a node removed since, cannot win, and must not hold voters back).
    async fn committed_voter(&self, from: NodeId) -> bool {
        #[cfg(feature = "faults")]
        if lockd_core::faults::get().any_voter {
            return true;
        }
        self.raft
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

    /// Whether this node would vote for `from` ([`crate::prevote`]).
    fn answer_pre_vote(&self, from: NodeId, ask: &PreVoteAsk) -> PreVoteAnswer {
        let (view, followed) = {
            let metrics = self.raft.metrics();
            let m = metrics.borrow();
            let view = VoterView {
                votes: m.running_state.is_ok(),
                leads: m.current_leader == Some(self.id),
                last_log_id: self.log.last_log_id(),
                silent_for: Duration::ZERO,
                leader_gone: false,
            };
            (view, m.vote.is_committed())
        };
        self.silence.answer(self.id, from, ask, view, followed)
    }

    /// Answer a peer's request, once the peer gate lets it through; `conn`
    /// is the connection it came on ([`Silence::connection`]).
    pub async fn answer(
        &self,
        from: NodeId,
        conn: u64,
        req: PeerRequest<A::Messages>,
    ) -> PeerResponse<A::Messages> {
        if let Err(why) = self
            .gate
            .check(from, &req, |id| may_send(self.raft, self.vouches, id))
        {
            tracing::warn!(id = self.id, from, %why, "refused a peer request");
            let leads = match &req {
                PeerRequest::AppendEntries(r) => r.vote.is_committed(),
                PeerRequest::InstallSnapshot(r) => r.vote.is_committed(),
                PeerRequest::Vote(_)
                | PeerRequest::ServiceFirst(_)
                | PeerRequest::Service(_)
                | PeerRequest::PreVote(_)
                | PeerRequest::Resign(_)
                | PeerRequest::KeepAlive { .. } => false,
            };
            if leads && matches!(why, Refusal::NotMember(_)) {
                self.vouches.want(from);
            }
            let text = format!("node {} refused the request: {why}", self.id);
            return match why {
                Refusal::NotMember(_) => PeerResponse::NotMember(text),
                Refusal::Invalid(_) => PeerResponse::Error(text),
            };
        }
        match req {
            PeerRequest::AppendEntries(r) => {
                // What this leader showed of its log: the most a pre-vote
                // may claim and be believed (`stand`).
                let shown = r.entries.last().map(|e| e.log_id).max(r.leader_commit);
                let answer = self.raft.append_entries(r).await;
                match &answer {
                    Ok(
                        AppendEntriesResponse::Success | AppendEntriesResponse::PartialSuccess(_),
                    ) => {
                        self.standing.followed();
                        self.silence.heard(conn, shown);
                    }
                    // The leader is alive, though its log and ours differ.
                    Ok(AppendEntriesResponse::Conflict) => self.silence.heard(conn, None),
                    _ => {}
                }
                PeerResponse::AppendEntries(answer)
            }
            PeerRequest::Vote(r) if !self.committed_voter(from).await => {
                // A learner (or a node removed since) cannot win: its ask
                // neither moves this node's term nor holds it back.
                let m = self.raft.metrics().borrow().clone();
                let vote = VoteResponse::new(m.vote, self.log.last_log_id(), false);
                tracing::debug!(
                    id = self.id,
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
                let before = self.silence.asked_to_vote();
                let answer = self.raft.vote(r).await;
                if let Ok(v) = &answer {
                    if !v.vote_granted && v.last_log_id > theirs {
                        self.silence.outranks(before);
                    }
                }
                PeerResponse::Vote(answer)
            }
            PeerRequest::InstallSnapshot(r) => {
                let answer = self.raft.install_snapshot(r).await;
                if answer.as_ref().is_ok_and(|a| a.vote.is_committed()) {
                    self.silence.heard(conn, None);
                }
                PeerResponse::InstallSnapshot(answer)
            }
            PeerRequest::PreVote(_) if !self.committed_voter(from).await => {
                PeerResponse::PreVote(PreVoteAnswer::NotVoter)
            }
            PeerRequest::PreVote(ask) => PeerResponse::PreVote(self.answer_pre_vote(from, &ask)),
            PeerRequest::Resign(notice) => {
                // Only from the leader this node follows, of this term.
                if self.raft.metrics().borrow().vote == notice.vote {
                    self.silence.resigned(notice.successor == self.id);
                }
                PeerResponse::Resigned
            }
            PeerRequest::ServiceFirst(ask) => {
                PeerResponse::Service(self.service.answer(from, A::first(ask)).await)
            }
            PeerRequest::Service(ask) => {
                PeerResponse::Service(self.service.answer(from, ask).await)
            }
            // The connection answers it.
            PeerRequest::KeepAlive { .. } => {
                PeerResponse::Error("keep-alive is a setting of the connection".into())
            }
        }
    }
}
