//! Proposal batching: many commands, one log entry, one fsync.
//!
//! openraft 0.9 appends one entry (or one client write) at a time and waits
//! for its fsync before taking the next, so without batching the leader
//! commits at most one command per fsync. The proposer collects every
//! command group submitted while earlier writes are in flight into **one**
//! `Request::Commands` entry, with up to [`MAX_IN_FLIGHT`] entries
//! outstanding, so under load one fsync carries hundreds of commands.
//!
//! A group (e.g. `[Release k, Grant k]` for a handoff) stays a group inside
//! the entry, in order: it is one entry of world 0.2's `apply`, which is
//! what lets the service pipeline grants right behind the release they
//! depend on (a waiter that must still wait keeps the ones behind it
//! waiting).

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Semaphore};

use super::error::ServiceError;
use crate::command::{Command, Outcome};
use crate::raft::{NodeId, Raft, Request, Response};

/// Entries being committed at once. Two: while one entry commits, the next
/// is appended; more than that only makes entries smaller. Measured with
/// 64 clients on 3 nodes (2 cores), lock cycles/s: 1 or 2 in flight ≈ 20–22 k,
/// 4 ≈ 17 k, 8 ≈ 13 k; contended handoffs and single-client latency the
/// same for all.
pub const MAX_IN_FLIGHT: usize = 2;
/// Commands in one entry at most (the entry must stay well under a frame).
pub const MAX_BATCH: usize = 4096;

struct Pending {
    commands: Vec<Command>,
    reply: oneshot::Sender<Result<Vec<Outcome>, ServiceError>>,
}

/// Submits command groups to Raft in batches. Cheap to clone.
#[derive(Clone)]
pub struct Proposer {
    tx: mpsc::UnboundedSender<Pending>,
}

impl Proposer {
    pub fn start(raft: Raft, id: NodeId) -> Proposer {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(raft, id, rx));
        Proposer { tx }
    }

    /// Commit `commands` (in this order, in one entry) and return their
    /// outcomes.
    pub async fn propose(&self, commands: Vec<Command>) -> Result<Vec<Outcome>, ServiceError> {
        let (reply, wait) = oneshot::channel();
        self.tx
            .send(Pending { commands, reply })
            .map_err(|_| ServiceError::Unavailable("the node is shutting down".into()))?;
        wait.await
            .map_err(|_| ServiceError::Unavailable("the node is shutting down".into()))?
    }
}

async fn run(raft: Raft, id: NodeId, mut rx: mpsc::UnboundedReceiver<Pending>) {
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    loop {
        // Take a slot first: while all are busy, submissions pile up in the
        // channel and become the next, larger batch.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let Some(first) = rx.recv().await else { return };
        let mut total = first.commands.len();
        let mut groups = vec![first];
        while total < MAX_BATCH {
            match rx.try_recv() {
                Ok(p) => {
                    total += p.commands.len();
                    groups.push(p);
                }
                Err(_) => break,
            }
        }
        let raft = raft.clone();
        tokio::spawn(async move {
            let mut sizes = Vec::with_capacity(groups.len());
            let mut replies = Vec::with_capacity(groups.len());
            let mut entry = Vec::with_capacity(groups.len());
            for g in groups {
                sizes.push(g.commands.len());
                entry.push(g.commands);
                replies.push(g.reply);
            }
            let result = match raft.client_write(Request::Commands(entry)).await {
                Ok(resp) => match resp.data {
                    Response::Lock(outcomes)
                        if outcomes.len() == sizes.len()
                            && outcomes.iter().zip(&sizes).all(|(o, n)| o.len() == *n) =>
                    {
                        Ok(outcomes)
                    }
                    Response::Lock(outcomes) => Err(ServiceError::StateMachine(format!(
                        "{} outcomes for an entry of {total} commands",
                        outcomes.iter().map(Vec::len).sum::<usize>()
                    ))),
                    other => Err(ServiceError::StateMachine(format!(
                        "a lock entry was answered {other:?}"
                    ))),
                },
                Err(e) => Err(ServiceError::from_raft(id, e, |e| e.to_string())),
            };
            match result {
                Ok(outcomes) => {
                    for (o, reply) in outcomes.into_iter().zip(replies) {
                        let _ = reply.send(Ok(o));
                    }
                }
                Err(e) => {
                    for reply in replies {
                        let _ = reply.send(Err(e.clone()));
                    }
                }
            }
            drop(slot);
        });
    }
}
