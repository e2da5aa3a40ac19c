//! The leader's lock actor: a thin shell around the pure lock table
//! ([`super::table`]). One task owns the table, the channels and the
//! timers; it turns messages (requests, completed proposals, leadership
//! changes, loaded tables) into table events and the table's actions into
//! I/O: proposals through the [`Proposer`], answers on the callers'
//! oneshot channels, refusals and table loads after a read-index
//! ([`read::confirm`]), and one sleep until the table's next deadline.
//! Every rule of the leader's lock logic lives in the table, not here.
//!
//! The shell maps the table's commands and outcomes onto the replicated
//! types through [`super::world`].
//!
//! A caller is "connected" while it awaits its answer: [`Msg::Gone`] comes
//! from the request side when it stops waiting, and an answer to a grant
//! that finds no receiver is reported back as undelivered, so the table
//! releases it at once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::error::{Acquired, ServiceError};
use super::proposer::Proposer;
use super::read;
use super::stats::ServiceStats;
use super::table::{
    Action, Answer, Cmd, Event, Held, ReqId, Request, Spec, Table, WaitLimits, Why,
};
use super::world;
use crate::raft::state_machine::StateMachineStore;
use crate::raft::{NodeId, Raft};
#[cfg(feature = "fault-stale-done")]
use lockd_core::command::Command;
use lockd_core::command::Outcome as Replicated;

pub(super) type Reply<T> = oneshot::Sender<Result<T, ServiceError>>;

/// What the leader's table knows of one key's holdings: (token, principal)
/// where it recorded one, and (token, ms of lease left).
#[derive(Debug, Default)]
pub struct Known {
    pub principals: Vec<(u64, String)>,
    pub leases_left: Vec<(u64, u64)>,
}

pub(super) enum Msg {
    Acquire {
        req: ReqId,
        key: String,
        spec: Spec,
        wait: Duration,
        reply: Reply<Acquired>,
    },
    Release {
        req: ReqId,
        key: String,
        token: u64,
        by: Option<String>,
        reply: Reply<()>,
    },
    Extend {
        req: ReqId,
        key: String,
        token: u64,
        from: Instant,
        by: Option<String>,
        reply: Reply<u64>,
    },
    /// The caller of `req` stopped waiting for its answer.
    Gone {
        req: ReqId,
    },
    /// Who holds each key's holdings, as the table knows (a question, not
    /// an event: answered at once).
    /// With the lease left of each on this leader's clock.
    Known {
        keys: Vec<String>,
        reply: oneshot::Sender<Vec<Known>>,
    },
    Done {
        id: u64,
        result: Result<Vec<Replicated>, ServiceError>,
    },
    Leader {
        term: u64,
    },
    Follower {
        leader: Option<NodeId>,
    },
    Loaded {
        term: u64,
        locks: Result<Vec<Held>, ServiceError>,
    },
    /// Test-only fault: rebuild the mirror now (see `super::fault`).
    #[cfg(feature = "fault-stale-done")]
    FaultReload,
}

/// A caller waiting for its answer.
enum Pending {
    Acquire { key: String, reply: Reply<Acquired> },
    Release(Reply<()>),
    Extend(Reply<u64>),
}

impl Pending {
    fn fail(self, err: ServiceError) {
        match self {
            Pending::Acquire { reply, .. } => drop(reply.send(Err(err))),
            Pending::Release(reply) => drop(reply.send(Err(err))),
            Pending::Extend(reply) => drop(reply.send(Err(err))),
        }
    }
}

/// Start the actor and the task that tells it about leadership changes.
pub(super) fn spawn(
    id: NodeId,
    raft: Raft,
    sm: StateMachineStore,
    proposer: Proposer,
    election_timeout: Duration,
    limits: WaitLimits,
    stats: Arc<ServiceStats>,
) -> mpsc::UnboundedSender<Msg> {
    let (tx, rx) = mpsc::unbounded_channel();
    let actor = Actor {
        id,
        raft: raft.clone(),
        sm,
        proposer,
        tx: tx.clone(),
        stats,
        table: Table::new(id, election_timeout, limits),
        epoch: Instant::now(),
        pending: HashMap::new(),
    };
    tokio::spawn(actor.run(rx));
    tokio::spawn(watch_leadership(id, raft, tx.clone()));
    tx
}

/// Tell the actor whenever this node becomes or stops being the leader.
async fn watch_leadership(id: NodeId, raft: Raft, tx: mpsc::UnboundedSender<Msg>) {
    let mut metrics = raft.metrics();
    let mut was: Option<(bool, u64, Option<NodeId>)> = None;
    loop {
        let now = {
            let m = metrics.borrow_and_update();
            (
                m.current_leader == Some(id),
                m.current_term,
                m.current_leader,
            )
        };
        if was != Some(now) {
            let msg = if now.0 {
                Msg::Leader { term: now.1 }
            } else {
                Msg::Follower { leader: now.2 }
            };
            if tx.send(msg).is_err() {
                return;
            }
            was = Some(now);
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

struct Actor {
    id: NodeId,
    raft: Raft,
    sm: StateMachineStore,
    proposer: Proposer,
    tx: mpsc::UnboundedSender<Msg>,
    stats: Arc<ServiceStats>,
    table: Table,
    /// The table's time is the time since this instant.
    epoch: Instant,
    pending: HashMap<ReqId, Pending>,
}

impl Actor {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Msg>) {
        loop {
            let msg = match self.table.next_deadline() {
                Some(at) => tokio::select! {
                    m = rx.recv() => m,
                    _ = tokio::time::sleep_until(self.epoch + at) => {
                        self.step(Event::Tick);
                        continue;
                    }
                },
                None => rx.recv().await,
            };
            let Some(msg) = msg else { return };
            self.on_msg(msg);
        }
    }

    fn on_msg(&mut self, msg: Msg) {
        let event = match msg {
            Msg::Known { keys, reply } => {
                let now = Instant::now().saturating_duration_since(self.epoch);
                let known = keys.iter().map(|k| Known {
                    principals: self.table.principals(k),
                    leases_left: self.table.leases_left(k, now),
                });
                let _ = reply.send(known.collect());
                return;
            }
            Msg::Acquire {
                req,
                key,
                spec,
                wait,
                reply,
            } => {
                if reply.is_closed() {
                    return; // the caller left before we got to it
                }
                let pending = Pending::Acquire {
                    key: key.clone(),
                    reply,
                };
                self.pending.insert(req, pending);
                Event::Request(Request::Acquire {
                    req,
                    key,
                    spec,
                    wait,
                })
            }
            Msg::Release {
                req,
                key,
                token,
                by,
                reply,
            } => {
                self.pending.insert(req, Pending::Release(reply));
                Event::Request(Request::Release {
                    req,
                    key,
                    token,
                    by,
                })
            }
            Msg::Extend {
                req,
                key,
                token,
                from,
                by,
                reply,
            } => {
                self.pending.insert(req, Pending::Extend(reply));
                let from = from.saturating_duration_since(self.epoch);
                Event::Request(Request::Extend {
                    req,
                    key,
                    token,
                    from,
                    by,
                })
            }
            Msg::Gone { req } => {
                if self.pending.remove(&req).is_none() {
                    return; // answered already
                }
                Event::CallerGone { req }
            }
            Msg::Done { id, result } => match result {
                Ok(outcomes) => Event::Committed {
                    id,
                    outcomes: world::outcomes(outcomes),
                },
                Err(error) => Event::ProposalFailed { id, error },
            },
            Msg::Leader { term } => Event::BecameLeader { term },
            Msg::Follower { leader } => Event::LostLeadership { leader },
            Msg::Loaded { term, locks } => Event::TableLoaded { term, locks },
            #[cfg(feature = "fault-stale-done")]
            Msg::FaultReload => {
                tracing::warn!(
                    node = self.id,
                    "FAULT: rebuilding the mirror with a release's Done held back"
                );
                Event::Reload
            }
        };
        self.step(event);
    }

    /// Hand `event` to the table and carry out its actions.
    fn step(&mut self, event: Event) {
        // Follow-ups are rare: the queue allocates only when one comes.
        let mut later = std::collections::VecDeque::new();
        let mut first = Some(event);
        while let Some(event) = first.take().or_else(|| later.pop_front()) {
            let now = Instant::now().saturating_duration_since(self.epoch);
            for action in self.table.handle(now, event) {
                if let Some(follow_up) = self.act(action) {
                    later.push_back(follow_up);
                }
            }
        }
        self.stats.publish(self.table.counters());
    }

    /// Carry out one action; an answer to a grant that finds no caller
    /// comes back as an event.
    fn act(&mut self, action: Action) -> Option<Event> {
        match action {
            Action::Propose { id, why, commands } => self.propose(id, why, commands),
            Action::Reply { req, answer } => return self.answer(req, answer),
            Action::RefuseAfterReadIndex { req, error } => {
                if let Some(p) = self.pending.remove(&req) {
                    let (raft, id) = (self.raft.clone(), self.id);
                    tokio::spawn(async move {
                        let answer = match read::confirm(&raft, id).await {
                            Ok(()) => error,
                            Err(e) => e,
                        };
                        p.fail(answer);
                    });
                }
            }
            Action::LoadTable { term, after } => self.load(term, after),
        }
        None
    }

    fn answer(&mut self, req: ReqId, answer: Result<Answer, ServiceError>) -> Option<Event> {
        let pending = self.pending.remove(&req)?;
        match (pending, answer) {
            (p, Err(e)) => p.fail(e),
            (Pending::Acquire { key, reply }, Ok(Answer::Granted(a))) => {
                #[cfg(feature = "fault-die-before-answer")]
                die_before_answer(&key);
                let token = a.token;
                if reply.send(Ok(a)).is_err() {
                    return Some(Event::Undelivered { key, token });
                }
            }
            (Pending::Release(reply), Ok(Answer::Released)) => drop(reply.send(Ok(()))),
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

    fn propose(&mut self, id: u64, why: Why, commands: Vec<Cmd>) {
        let entry = world::entry(&commands);
        #[cfg(feature = "fault-stale-done")]
        let gate = fault_gate(why, &entry);
        #[cfg(not(feature = "fault-stale-done"))]
        let _ = why;
        let (proposer, tx) = (self.proposer.clone(), self.tx.clone());
        tokio::spawn(async move {
            let result = proposer.propose(entry).await;
            #[cfg(feature = "fault-stale-done")]
            if let Some(gate) = gate {
                let _ = tx.send(Msg::FaultReload);
                super::fault::hold(gate).await;
            }
            let _ = tx.send(Msg::Done { id, result });
        });
    }

    /// After `delay`, read the applied lock table once everything this
    /// node acknowledged has been applied ([`read::confirm`]), then report
    /// back.
    fn load(&self, term: u64, delay: Duration) {
        let (raft, sm, tx, id) = (self.raft.clone(), self.sm.clone(), self.tx.clone(), self.id);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let locks = match read::confirm(&raft, id).await {
                Ok(()) => {
                    record_first_module(&raft, &sm).await;
                    world::read_all(&sm)
                }
                Err(e) => Err(e),
            };
            let _ = tx.send(Msg::Loaded { term, locks });
        });
    }
}

/// A new cluster's first leader records the module the cluster starts
/// with before it serves a lock (see [`lockd_core::upgrade::Genesis`]). A
/// failure (leadership lost) leaves it to the next leader.
async fn record_first_module(raft: &Raft, sm: &StateMachineStore) {
    let first = lockd_core::builtin::first_module();
    let Some(genesis) = sm.genesis_needed(&first) else {
        return;
    };
    match raft
        .client_write(crate::raft::Request::Genesis(genesis))
        .await
    {
        Ok(r) => {
            tracing::info!(index = r.log_id.index, module = %lockd_core::engine::ModuleHash::of(&first), outcome = ?r.data, "recorded the cluster's first module")
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not record the cluster's first module; the next leader will")
        }
    }
}

/// Test-only fault (see `super::fault`): a client's release gets a gate
/// for its completion; a grant opens the gate of its key.
#[cfg(feature = "fault-stale-done")]
fn fault_gate(why: Why, entry: &[Command]) -> Option<Arc<tokio::sync::Notify>> {
    if !super::fault::active() {
        return None;
    }
    let first = entry.first()?;
    let key = first.key()?;
    if matches!(first, Command::Grant(_)) {
        super::fault::open(key);
    }
    (why == Why::Release && entry.len() == 1).then(|| super::fault::gate(key))
}

/// Test-only fault: with `LOCKD_FAULT_DIE_BEFORE_ANSWER=KEY:MARKER`, the
/// first node (cluster-wide: whoever creates MARKER) about to answer a
/// committed grant of KEY aborts, as if killed between commit and answer.
#[cfg(feature = "fault-die-before-answer")]
fn die_before_answer(key: &str) {
    let Ok(v) = std::env::var("LOCKD_FAULT_DIE_BEFORE_ANSWER") else {
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
