//! The leader's lock actor: a thin shell around the pure lock table
//! ([`super::table`]). One task owns the table, the channels and the
//! timers; it turns messages (requests, completed proposals, leadership
//! changes, loaded tables) into table events and the table's actions into
//! I/O: proposals through the [`Proposer`], answers on the callers'
//! oneshot channels, refusals and table loads after a read-index
//! ([`barrier::confirm`]), and one sleep until the table's next deadline.
//! Every rule of the leader's lock logic lives in the table, not here.
//!
//! The shell maps the table's commands and outcomes onto the replicated
//! types through [`super::world`].
//!
//! A caller is "connected" while it awaits its answer: [`Msg::Gone`] comes
//! from the request side when it stops waiting, and an answer to a grant
//! that finds no receiver is reported back as undelivered, so the table
//! releases it at once.
//!
//! # Layout
//!
//! * this module: the messages, the task's loop and its one timer (the
//!   table's next deadline: lease expiries, wait ends, keepalive
//!   windows), and the dispatch of the table's actions.
//! * `answer`: the proposal and answer path — entries proposed, callers
//!   answered (or refused after a read-index), undelivered grants
//!   reported back, and the test-only faults on that path.
//! * `leadership`: leadership changes told to the table, and the table
//!   loaded from the applied state when this node starts to lead.

mod answer;
mod leadership;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use self::answer::Pending;
use super::clock::TableClock;
use super::error::{Acquired, ServiceError};
use super::proposer::{Proposed, Proposer};
use super::stats::ServiceStats;
use super::table::{Action, Answer, Event, Loaded, ReqId, Request, Spec, Table, WaitLimits};
use super::tasks::ServiceTasks;
use super::world;
use lockd_replication::state_machine::StateMachineStore;
use lockd_replication::{NodeId, Raft};

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
        /// The holding's count left (0: released).
        reply: Reply<u32>,
    },
    Extend {
        req: ReqId,
        key: String,
        token: u64,
        /// On the table's clock.
        from: Duration,
        by: Option<String>,
        reply: Reply<u64>,
    },
    /// Any other request (sessions, values), answered with the table's
    /// answer as it is.
    Ask {
        request: Request,
        reply: Reply<Answer>,
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
    /// The ms left of a session on this leader's clock (a question).
    SessionLeft {
        id: u64,
        reply: oneshot::Sender<Option<u64>>,
    },
    Done {
        id: u64,
        result: Proposed,
    },
    Leader {
        term: u64,
    },
    Follower {
        leader: Option<NodeId>,
    },
    Loaded {
        term: u64,
        locks: Result<Loaded, ServiceError>,
    },
    /// Test-only fault: rebuild the mirror now (see `super::fault`).
    #[cfg(feature = "faults")]
    FaultReload,
}

/// The actor's sense of time.
pub(super) struct Timing {
    /// The longest an election can take (a new leader adds it to every
    /// held lease it inherits).
    pub election_timeout: Duration,
    pub clock: Arc<TableClock>,
}

/// Start the actor and the task that tells it about leadership changes.
pub(super) fn spawn(
    id: NodeId,
    raft: Raft,
    sm: StateMachineStore,
    proposer: Proposer,
    timing: Timing,
    limits: WaitLimits,
    stats: Arc<ServiceStats>,
) -> mpsc::UnboundedSender<Msg> {
    // The proposer's tasks are the service's.
    let tasks = proposer.tasks().clone();
    let (tx, rx) = mpsc::unbounded_channel();
    let mut table = Table::new(id, timing.election_timeout, limits);
    table.set_picker(Box::new(super::picker::ModulePick::new(sm.clone())));
    let actor = Actor {
        id,
        raft: raft.clone(),
        sm,
        proposer,
        tx: tx.clone(),
        stats,
        table,
        clock: timing.clock,
        pending: HashMap::new(),
        tasks: tasks.clone(),
    };
    tasks.spawn_loop(actor.run(rx));
    tasks.spawn(leadership::watch(id, raft, tx.clone()));
    tx
}

struct Actor {
    id: NodeId,
    raft: Raft,
    sm: StateMachineStore,
    proposer: Proposer,
    tx: mpsc::UnboundedSender<Msg>,
    stats: Arc<ServiceStats>,
    table: Table,
    /// The table's time.
    clock: Arc<TableClock>,
    pending: HashMap<ReqId, Pending>,
    /// Where its proposals, read-indexes and loads run.
    tasks: ServiceTasks,
}

impl Actor {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Msg>) {
        loop {
            let msg = match self.table.next_deadline() {
                Some(at) => tokio::select! {
                    m = rx.recv() => m,
                    _ = tokio::time::sleep_until(self.clock.when(at)) => {
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
                let now = self.clock.now();
                let known = keys.iter().map(|k| Known {
                    principals: self.table.principals(k),
                    leases_left: self.table.leases_left(k, now),
                });
                let _ = reply.send(known.collect());
                return;
            }
            Msg::SessionLeft { id, reply } => {
                let _ = reply.send(self.table.session_ttl_left(id, self.clock.now()));
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
                Event::Request(Request::Extend {
                    req,
                    key,
                    token,
                    from,
                    by,
                })
            }
            Msg::Ask { request, reply } => {
                self.pending.insert(request.req(), Pending::Any(reply));
                Event::Request(request)
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
            Msg::Leader { term } => {
                #[cfg(feature = "faults")]
                lockd_core::faults::took_over(self.id);
                Event::BecameLeader { term }
            }
            Msg::Follower { leader } => Event::LostLeadership { leader },
            Msg::Loaded { term, locks } => Event::TableLoaded { term, locks },
            #[cfg(feature = "faults")]
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
            let now = self.clock.now();
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
            Action::RefuseAfterReadIndex { req, error } => self.refuse_after_read_index(req, error),
            Action::LoadTable { term, after } => self.load(term, after),
        }
        None
    }
}
