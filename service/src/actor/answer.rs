//! The proposal and answer path of the actor: the table's entries
//! proposed through the [`Proposer`](crate::proposer::Proposer),
//! its answers sent to the waiting callers, refusals sent after a
//! read-index, and a grant no caller received reported back to the table.

#[cfg(feature = "faults")]
use std::sync::Arc;

use super::{Actor, Msg, Reply};
use crate::barrier;
use crate::error::{Acquired, ServiceError};
use crate::proposer::Done;
use crate::table::{Answer, Cmd, Event, ReqId, Why};
use crate::world;
#[cfg(feature = "faults")]
use lockd_core::command::Command;

/// A caller waiting for its answer.
pub(super) enum Pending {
    Acquire { key: String, reply: Reply<Acquired> },
    Release(Reply<u32>),
    Extend(Reply<u64>),
    Any(Reply<Answer>),
}

impl Pending {
    pub(super) fn fail(self, err: ServiceError) {
        match self {
            Pending::Acquire { reply, .. } => drop(reply.send(Err(err))),
            Pending::Release(reply) => drop(reply.send(Err(err))),
            Pending::Extend(reply) => drop(reply.send(Err(err))),
            Pending::Any(reply) => drop(reply.send(Err(err))),
        }
    }
}

impl Actor {
    /// Refuse `req` with `error` once a read-index confirms this node
    /// still leads (else with why it cannot answer): a refusal must not
    /// come from a leader that was already deposed.
    pub(super) fn refuse_after_read_index(&mut self, req: ReqId, error: ServiceError) {
        if let Some(p) = self.pending.remove(&req) {
            #[cfg(feature = "faults")]
            if lockd_core::faults::get().skip_read_barrier {
                return p.fail(error);
            }
            let (raft, id) = (self.raft.clone(), self.id);
            self.tasks.spawn(async move {
                let answer = match barrier::confirm(&raft, id).await {
                    Ok(()) => error,
                    Err(e) => e,
                };
                p.fail(answer);
            });
        }
    }

    pub(super) fn answer(
        &mut self,
        req: ReqId,
        answer: Result<Answer, ServiceError>,
    ) -> Option<Event> {
        let pending = self.pending.remove(&req)?;
        match (pending, answer) {
            (p, Err(e)) => p.fail(e),
            (Pending::Acquire { key, reply }, Ok(Answer::Granted(a))) => {
                #[cfg(feature = "faults")]
                die_before_answer(&key);
                #[cfg(feature = "faults")]
                let a = Acquired {
                    token: lockd_core::faults::reset_token(self.id).unwrap_or(a.token),
                    ..a
                };
                let token = a.token;
                if reply.send(Ok(a)).is_err() {
                    return Some(Event::Undelivered { key, token });
                }
            }
            (Pending::Release(reply), Ok(Answer::Released)) => drop(reply.send(Ok(0))),
            (Pending::Release(reply), Ok(Answer::StillHeld(n))) => drop(reply.send(Ok(n))),
            (Pending::Any(reply), Ok(a)) => drop(reply.send(Ok(a))),
            (Pending::Extend(reply), Ok(Answer::Extended(ms))) => drop(reply.send(Ok(ms))),
            (p, Ok(other)) => {
                tracing::error!(node = self.id, req, ?other, "an answer of the wrong kind");
                p.fail(ServiceError::Unavailable(format!(
                    "node {} answered the request with the wrong kind of answer",
                    self.id
                )));
            }
        }
        None
    }

    pub(super) fn propose(&mut self, id: u64, why: Why, commands: Vec<Cmd>) {
        let entry = world::entry(&commands);
        #[cfg(feature = "faults")]
        if let Some(gate) = fault_gate(why, &entry) {
            return self.propose_gated(id, entry, gate);
        }
        #[cfg(not(feature = "faults"))]
        let _ = why;
        // The answer goes straight to the actor's queue from the task that
        // wrote the entry: no task of its own.
        let tx = self.tx.clone();
        // Decided under the term the table leads: never proposed in another.
        let term = self.table.leading_term();
        self.proposer.submit_in(
            entry,
            term,
            Done::new(move |result| {
                let _ = tx.send(Msg::Done { id, result });
            }),
        );
    }

    /// Test-only fault: the answer waits for the gate, in a task of its own.
    #[cfg(feature = "faults")]
    fn propose_gated(&mut self, id: u64, entry: Vec<Command>, gate: Arc<tokio::sync::Notify>) {
        let (proposer, tx) = (self.proposer.clone(), self.tx.clone());
        self.tasks.spawn(async move {
            let result = proposer.propose(entry).await;
            let _ = tx.send(Msg::FaultReload);
            crate::fault::hold(gate).await;
            let _ = tx.send(Msg::Done { id, result });
        });
    }
}

/// Test-only fault (see `crate::fault`): a client's release gets a gate
/// for its completion; a grant opens the gate of its key.
#[cfg(feature = "faults")]
fn fault_gate(why: Why, entry: &[Command]) -> Option<Arc<tokio::sync::Notify>> {
    if !crate::fault::active() {
        return None;
    }
    let first = entry.first()?;
    let key = first.key()?;
    if matches!(first, Command::Grant(_)) {
        crate::fault::open(key);
    }
    (why == Why::Release && entry.len() == 1).then(|| crate::fault::gate(key))
}

/// Test-only fault: with `LOCKD_FAULT_DIE_BEFORE_ANSWER=KEY:MARKER`, the
/// first node (cluster-wide: whoever creates MARKER) about to answer a
/// committed grant of KEY aborts, as if killed between commit and answer.
#[cfg(feature = "faults")]
fn die_before_answer(key: &str) {
    static FAULT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let Some(v) = FAULT.get_or_init(|| std::env::var("LOCKD_FAULT_DIE_BEFORE_ANSWER").ok()) else {
        return;
    };
    let Some((k, marker)) = v.split_once(':') else {
        return;
    };
    if k != key {
        return;
    }
    let first = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(marker)
        .is_ok();
    if first {
        tracing::warn!(
            key,
            "FAULT: dying between the commit of a grant and its answer"
        );
        std::process::abort();
    }
}
