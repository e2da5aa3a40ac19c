//! Proposal batching: many commands, one log entry, one fsync.
//!
//! Without batching every command would be a client write of its own: its
//! own entry, encoding, append, fsync on every node and replication round
//! trip, and a response through openraft's core. The proposer collects every
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
use std::time::Instant;

use tokio::sync::{mpsc, oneshot, Semaphore};

use super::error::ServiceError;
use super::tasks::ServiceTasks;
use lockd_core::command::{Command, Outcome};
use lockd_replication::telemetry::Stages;
use lockd_replication::{NodeId, Raft, Request, Response};

/// Entries being committed at once. Two: while one entry commits, the next
/// is appended; more than that only makes entries smaller. Measured with
/// 64 clients on 3 nodes (2 cores), lock cycles/s: 1 or 2 in flight ≈ 20–22 k,
/// 4 ≈ 17 k, 8 ≈ 13 k; contended handoffs and single-client latency the
/// same for all.
pub(crate) const MAX_IN_FLIGHT: usize = 2;
/// Commands in one entry at most (the entry must stay well under a frame).
pub(crate) const MAX_BATCH: usize = 4096;
/// Bytes of commands in one entry at most ([`Command::wire_bytes`]): a
/// group that would take a batch past it waits for the next entry (a
/// group alone may pass it; the API bounds a group's strings). Keeps every
/// lock entry a small part of an AppendEntries batch
/// ([`lockd_replication::network::MAX_APPEND_BYTES`]), so lock traffic never
/// delays heartbeats by much; 4096 grants of 1 KiB keys make about four.
pub(crate) const MAX_ENTRY_BYTES: usize = 1 << 20;

struct Pending {
    /// When the group was handed over (`telemetry::Stage::Queue`).
    queued: Instant,
    /// The term whose leader decided it (the lock table's actions: an
    /// expiry, a grant to a waiter), if it was: it is written only while
    /// this node leads that term, and refused otherwise.
    term: Option<u64>,
    commands: Vec<Command>,
    /// The commands' [`Command::wire_bytes`].
    bytes: usize,
    done: Done,
}

/// A group's outcomes, or why it has none.
pub type Proposed = Result<Vec<Outcome>, ServiceError>;

/// Where a group's answer goes: called once, by the task that wrote its
/// entry. A callback rather than a channel a task of the caller's awaits:
/// the lock service's actor only forwards the answer to its own queue, and
/// a task and a channel per proposal cost measurable CPU under load
/// (docs/performance.md, "Proposals"). Dropped unanswered (the node shut
/// down with the group queued or in flight), it answers that the node is
/// shutting down, as a closed channel did.
pub struct Done(Option<Box<dyn FnOnce(Proposed) + Send>>);

impl Done {
    pub fn new(f: impl FnOnce(Proposed) + Send + 'static) -> Done {
        Done(Some(Box::new(f)))
    }

    fn send(mut self, result: Proposed) {
        if let Some(f) = self.0.take() {
            f(result);
        }
    }
}

impl Drop for Done {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f(Err(shutting_down()));
        }
    }
}

fn shutting_down() -> ServiceError {
    ServiceError::Unavailable("the node is shutting down".into())
}

/// Submits command groups to Raft in batches. Cheap to clone.
#[derive(Clone)]
pub struct Proposer {
    tx: mpsc::UnboundedSender<Pending>,
    /// How long each entry took from proposal to applied (openraft's
    /// `client_write`), for metrics.
    commit: lockd_replication::telemetry::Latency,
    /// Where the service's tasks run, its own included.
    tasks: ServiceTasks,
}

impl Proposer {
    pub fn start(raft: Raft, id: NodeId, tasks: &ServiceTasks, stages: Arc<Stages>) -> Proposer {
        let (tx, rx) = mpsc::unbounded_channel();
        let commit = lockd_replication::telemetry::Latency::default();
        let timing = (commit.clone(), stages);
        tasks.spawn_loop(run(raft, id, rx, timing, tasks.clone()));
        Proposer {
            tx,
            commit,
            tasks: tasks.clone(),
        }
    }

    pub fn tasks(&self) -> &ServiceTasks {
        &self.tasks
    }

    pub fn commit_latency(&self) -> &lockd_replication::telemetry::Latency {
        &self.commit
    }

    /// Commit `commands` (in this order, in one entry) and return their
    /// outcomes.
    pub async fn propose(&self, commands: Vec<Command>) -> Proposed {
        let (reply, wait) = oneshot::channel();
        self.submit(
            commands,
            Done::new(move |r| {
                let _ = reply.send(r);
            }),
        );
        wait.await.map_err(|_| shutting_down())?
    }

    /// Commit `commands` (in this order, in one entry) and hand their
    /// outcomes to `done`; never waits.
    pub fn submit(&self, commands: Vec<Command>, done: Done) {
        self.submit_in(commands, None, done);
    }

    /// [`Proposer::submit`] for a group decided by the leader of `term`:
    /// refused unless this node still leads that term when its entry is
    /// written. A decision of a leader that was cut off (an expiry by its
    /// lease timers, say) can wait here behind entries that never commit;
    /// written later, in a term this node won again, it would act on a
    /// lock that another leader has renewed since (seed 215066 of the
    /// simulation: a lease ended 72 ms before its last keepalive's
    /// promise).
    pub(crate) fn submit_in(&self, commands: Vec<Command>, term: Option<u64>, done: Done) {
        let bytes = commands.iter().map(Command::wire_bytes).sum();
        // A closed channel hands the group back, and dropping it answers.
        let _ = self.tx.send(Pending {
            queued: Instant::now(),
            term,
            commands,
            bytes,
            done,
        });
    }
}

/// The groups of one entry, within [`MAX_BATCH`] and [`MAX_ENTRY_BYTES`].
struct Batch {
    groups: Vec<Pending>,
    commands: usize,
    bytes: usize,
}

impl Batch {
    fn new(first: Pending) -> Batch {
        Batch {
            commands: first.commands.len(),
            bytes: first.bytes,
            groups: vec![first],
        }
    }

    /// Add `p`, or hand it back when it would take the entry past a bound.
    fn push(&mut self, p: Pending) -> Result<(), Pending> {
        if self.commands + p.commands.len() > MAX_BATCH || self.bytes + p.bytes > MAX_ENTRY_BYTES {
            return Err(p);
        }
        self.commands += p.commands.len();
        self.bytes += p.bytes;
        self.groups.push(p);
        Ok(())
    }
}

async fn run(
    raft: Raft,
    id: NodeId,
    mut rx: mpsc::UnboundedReceiver<Pending>,
    (commit, stages): (lockd_replication::telemetry::Latency, Arc<Stages>),
    tasks: ServiceTasks,
) {
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let metrics = raft.server_metrics();
    // A group that did not fit the last entry: the first of the next.
    let mut held: Option<Pending> = None;
    loop {
        // Take a slot first: while all are busy, submissions pile up in the
        // channel and become the next, larger batch.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let first = match held.take() {
            Some(p) => p,
            None => match rx.recv().await {
                Some(p) => p,
                None => return,
            },
        };
        let mut batch = Batch::new(first);
        while let Ok(p) = rx.try_recv() {
            if let Err(p) = batch.push(p) {
                held = Some(p);
                break;
            }
        }
        // Only what this node may write in the term it leads now (one look
        // per entry, at the watch this task keeps).
        let groups = current(batch.groups, leading(&metrics.borrow(), id), id);
        if groups.is_empty() {
            continue; // the slot goes back as it drops
        }
        // The first group has waited longest.
        let queued = groups.first().map_or_else(Instant::now, |g| g.queued);
        let raft = raft.clone();
        let (commit, stages) = (commit.clone(), stages.clone());
        tasks.spawn(async move {
            let mut sizes = Vec::with_capacity(groups.len());
            let mut replies = Vec::with_capacity(groups.len());
            let mut entry = Vec::with_capacity(groups.len());
            for g in groups {
                sizes.push(g.commands.len());
                entry.push(g.commands);
                replies.push(g.done);
            }
            let started = Instant::now();
            let write = raft.client_write(Request::commands(entry));
            tokio::pin!(write);
            let answered = |w: Result<_, _>| w.map_err(|e| ServiceError::from_raft(id, e, |e| e.to_string()));
            let written = tokio::select! {
                biased;
                w = &mut write => answered(w),
                // openraft's own answer says more (a fatal error, the new
                // leader): wait a little for it before giving up on it.
                () = leadership_ends(&raft, id) => match tokio::time::timeout(ANSWER_GRACE, &mut write).await {
                    Ok(w) => answered(w),
                    Err(_) => Err(ServiceError::Unavailable(format!(
                        "node {id} stopped leading while the entry was in flight; it may or may not commit"
                    ))),
                },
            };
            commit.since(started);
            if let Ok(resp) = &written {
                stages.answered(resp.log_id.index, queued, started);
            }
            let result = match written {
                Ok(resp) => match resp.data {
                    Response::Lock(outcomes)
                        if outcomes.len() == sizes.len()
                            && outcomes.iter().zip(&sizes).all(|(o, n)| o.len() == *n) =>
                    {
                        Ok(outcomes)
                    }
                    Response::Lock(outcomes) => Err(ServiceError::StateMachine(format!(
                        "{} outcomes for an entry of {} commands",
                        outcomes.iter().map(Vec::len).sum::<usize>(),
                        sizes.iter().sum::<usize>()
                    ))),
                    other => Err(ServiceError::StateMachine(format!(
                        "a lock entry was answered {other:?}"
                    ))),
                },
                Err(e) => Err(e),
            };
            match result {
                Ok(outcomes) => {
                    for (o, done) in outcomes.into_iter().zip(replies) {
                        done.send(Ok(o));
                    }
                }
                Err(e) => {
                    for done in replies {
                        done.send(Err(e.clone()));
                    }
                }
            }
            drop(slot);
        });
    }
}

/// The groups that may be written while node `id` leads `leads`: those
/// decided under no term or under that one. The others are refused, not
/// written ([`Proposer::submit_in`]).
fn current(groups: Vec<Pending>, leads: Option<u64>, id: NodeId) -> Vec<Pending> {
    let fits = |g: &Pending| g.term.is_none() || g.term == leads;
    if groups.iter().all(fits) {
        return groups;
    }
    let (groups, stale): (Vec<Pending>, Vec<Pending>) = groups.into_iter().partition(fits);
    for g in stale {
        let decided = g.term.unwrap_or_default();
        g.done.send(Err(ServiceError::Unavailable(format!(
            "node {id} decided this while leading term {decided}, and no longer leads that term; it was not proposed"
        ))));
    }
    groups
}

/// The term node `id` leads, as openraft's server metrics say, if it leads.
fn leading(
    m: &openraft::metrics::RaftServerMetrics<NodeId, lockd_replication::Node>,
    id: NodeId,
) -> Option<u64> {
    (m.current_leader == Some(id)).then_some(m.vote.leader_id().get_term())
}

/// How long a write whose node stopped leading still waits for openraft's
/// answer (see [`leadership_ends`]).
const ANSWER_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Resolves when this node, leading now, stops leading the term it leads
/// now; never when it does not lead now (its write is refused at once,
/// with the leader to ask instead).
///
/// A write in flight when leadership ends is usually answered by openraft
/// (forward to the leader). Not always: an entry a deposed leader had
/// appended and that a snapshot from the new leader then replaced was never
/// answered, and the service waited for it forever (its slot, and a new
/// term's table, which loads only when no earlier proposal is in flight).
/// The simulation found it (docs/testing.md, "The simulation").
///
/// It watches openraft's server metrics, which change with the vote, the
/// role and the leader: its full metrics change with every entry, and
/// every entry in flight would wake for each of them.
async fn leadership_ends(raft: &Raft, id: NodeId) {
    let mut metrics = raft.server_metrics();
    let Some(term) = leading(&metrics.borrow_and_update(), id) else {
        return std::future::pending().await;
    };
    while leading(&metrics.borrow_and_update(), id) == Some(term) {
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
