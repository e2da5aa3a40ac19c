//! The quorum pre-check: before an upgrade or a shadow start is proposed,
//! every voter loads, compiles and dry-runs the candidate against its own
//! live state (docs/writing-a-lock-module.md, "The quorum pre-check").
//!
//! The leader sends [`PrecheckAsk`] to each other voter over the peer
//! transport (a peer RPC, checked by the peer gate like the others) and
//! runs the same check itself. A voter answers [`PrecheckAnswer`]: the
//! same dry run as the leader's (`submit`: its own bound on module size,
//! load and compile with its own engine, the one migration path with the
//! host's and the module's own checks, the version order unless marked as
//! a rollback). A voter that cannot be reached or does not answer within
//! [`DEADLINE`] gives no verdict ("unreachable", "no answer").
//!
//! The leader then writes every verdict through the log
//! ([`lockd_core::precheck::PrecheckRecord`]) and proposes the candidate
//! at a later index only if a majority of voters accepted and, unless
//! `quorum`, none refused (one that did not answer does not block: it
//! checks at the swap like any node); otherwise it answers
//! `precheck_refused` naming each refusal, and nothing is swapped. A node
//! that cannot run a module its peers swapped in stops before the swap
//! (`lockd_core::replica`, "Cannot run").

use std::time::{Duration, Instant};

use lockd_core::engine::ModuleHash;
use lockd_core::precheck::{NodeVerdict, PrecheckRecord};
use lockd_core::signature::{ModuleSignature, SignedFor};
use openraft::RaftNetworkFactory;

use super::peer_messages::{self, PrecheckAnswer, PrecheckAsk, SignedPrecheckAsk};
use super::submit::{UpgradeError, Upgrader};
use lockd_replication::{NodeId, Request, Response};

/// How long a voter has to answer: a compile takes about half a second,
/// a migration of a million held locks a few.
pub(crate) const DEADLINE: Duration = Duration::from_secs(30);

impl Upgrader {
    /// Answer a leader's pre-check (on a voter): only the leader of this
    /// node's current term may ask; the module must pass admission (its
    /// size, its signature while keys are trusted) before anything is
    /// compiled (the engine then refuses imports and a missing world
    /// before its compile); the same ask again is answered from the
    /// verdict given the first time.
    pub async fn answer_precheck(&self, from: NodeId, signed: SignedPrecheckAsk) -> PrecheckAnswer {
        let started = Instant::now();
        let ask = &signed.ask;
        let hash = ModuleHash::of(&ask.module);
        let vote = self.raft.metrics().borrow().vote;
        let leads =
            ask.vote == vote && vote.is_committed() && vote.leader_id().voted_for() == Some(from);
        if !leads {
            tracing::warn!(from, module = %hash, "refused a pre-check ask from a node that is not this term's leader");
            return PrecheckAnswer::refused(format!(
                "node {} asks, but this node's leader of term {} is {:?}: only the leader may ask for a pre-check",
                from,
                vote.leader_id().term,
                vote.leader_id().voted_for()
            ));
        }
        let key = (hash, ask.rollback, self.sm.module_hash());
        if let Some(answer) = self.verdicts.get(&key) {
            return answer;
        }
        let admitted = match self.sm.precompiler().over_bound(&ask.module) {
            Some(why) => Err(UpgradeError::OverNodeBound(why)),
            None => self.check_signature(
                &ask.module,
                signed.signature.as_ref(),
                signed.signed_for.purpose(),
            ),
        };
        let answer = match admitted {
            Err(e) => PrecheckAnswer::refused(e.to_string()),
            Ok(()) => match self.dry_run(&ask.module, ask.rollback).await {
                Ok(t) => PrecheckAnswer {
                    accepted: true,
                    reason: None,
                    compile_us: t.compile_us,
                    migrate_us: t.migrate_us,
                },
                // Busy (another dry run) is not a verdict: not remembered.
                Err(e @ UpgradeError::Busy(_)) => return PrecheckAnswer::refused(e.to_string()),
                Err(e) => PrecheckAnswer::refused(e.to_string()),
            },
        };
        self.verdicts.put(key, answer.clone());
        tracing::info!(
            from,
            module = %hash,
            accepted = answer.accepted,
            reason = answer.reason.as_deref().unwrap_or(""),
            ms = started.elapsed().as_millis() as u64,
            "pre-checked a module for the leader"
        );
        answer
    }

    /// Ask every other voter (this node, the leader, accepted already:
    /// its own dry run passed) and decide; the record is what the leader
    /// writes.
    pub(super) async fn gather(
        &self,
        module: &[u8],
        rollback: bool,
        quorum: bool,
        signed: (Option<ModuleSignature>, SignedFor),
    ) -> PrecheckRecord {
        let (voters, vote) = {
            let m = self.raft.metrics();
            let m = m.borrow();
            let voters = lockd_replication::voters(&m);
            (voters, m.vote)
        };
        let asks = voters.into_iter().map(|(id, node)| {
            let mut peers = self.peers.clone();
            async move {
                if id == self.id {
                    return (id, Ok(()));
                }
                let ask = SignedPrecheckAsk {
                    ask: PrecheckAsk {
                        vote,
                        module: module.to_vec(),
                        rollback,
                    },
                    signature: signed.0,
                    signed_for: signed.1,
                };
                let mut client = peers.new_client(id, &node).await;
                let answer =
                    tokio::time::timeout(DEADLINE, peer_messages::ask(&mut client, ask, DEADLINE))
                        .await
                        .unwrap_or_else(|_| Err(format!("no answer in {} s", DEADLINE.as_secs())));
                let verdict = match answer {
                    Ok(a) if a.accepted => Ok(()),
                    Ok(a) => Err((true, a.reason.unwrap_or_default())),
                    Err(why) => Err((false, why)),
                };
                (id, verdict)
            }
        });
        let mut answers = futures::future::join_all(asks).await;
        answers.sort_by_key(|(id, _)| *id);
        let verdicts: Vec<NodeVerdict> = answers
            .into_iter()
            .map(|(node, v)| NodeVerdict {
                node,
                accepted: v.is_ok(),
                answered: v.as_ref().err().is_none_or(|(answered, _)| *answered),
                reason: v.err().map(|(_, why)| why),
            })
            .collect();
        let mut record = PrecheckRecord {
            module: ModuleHash::of(module),
            quorum,
            enacted: false,
            verdicts,
        }
        .bounded();
        record.enacted = record.passes();
        record
    }

    /// Ask every voter, write the verdicts through the log, and answer
    /// whether the candidate may be proposed (`Err`: refused, naming
    /// each refusal).
    pub(super) async fn quorum_check(
        &self,
        module: &[u8],
        rollback: bool,
        quorum: bool,
        signed: (Option<ModuleSignature>, SignedFor),
    ) -> Result<Vec<lockd_proto::PrecheckVerdict>, UpgradeError> {
        let record = self.gather(module, rollback, quorum, signed).await;
        let refusals = record.refusals();
        let verdicts = record.status(0).verdicts;
        let (index, response) = self.propose(Request::Precheck(record)).await?;
        match response {
            Response::Precheck(true) => Ok(verdicts),
            Response::Precheck(false) => Err(UpgradeError::PrecheckRefused {
                index,
                quorum,
                refusals,
                verdicts,
            }),
            other => Err(UpgradeError::Internal(format!(
                "a pre-check record was answered {other:?}"
            ))),
        }
    }
}

/// The peer protocol hands a voter the pre-check asks it reads.
impl lockd_replication::peer_answer::AnswersService for Upgrader {
    type Messages = peer_messages::Prechecks;

    /// An older leader's ask carries no signature: answered as unsigned
    /// (refused while keys are trusted).
    fn first(ask: PrecheckAsk) -> SignedPrecheckAsk {
        SignedPrecheckAsk::unsigned(ask)
    }

    fn answer(
        &self,
        from: lockd_replication::NodeId,
        ask: SignedPrecheckAsk,
    ) -> impl std::future::Future<Output = PrecheckAnswer> + Send {
        self.answer_precheck(from, ask)
    }
}
