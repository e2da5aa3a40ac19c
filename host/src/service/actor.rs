//! The leader's lock actor: one task owns the leader's view of the lock
//! table and is the only proposer of lock commands. This file holds its
//! state, its message loop and the requests; [`super::handoff`] what happens
//! when a proposal commits and when timers fire.
//!
//!
//! Every lock command of the cluster is proposed here, on the leader, by one
//! actor task that keeps a mirror of the applied lock table plus what only
//! the leader needs: a lease deadline per held lock (monotonic clock), a FIFO
//! queue of waiters per key, and which keys have a proposal in flight.
//! Because the actor is the only proposer, its mirror follows the applied
//! state exactly; on any doubt (a proposal that failed, a new term) it is
//! rebuilt from the state machine.
//!
//! Rules (the design's, made concrete):
//!
//! * **Acquire** a free key: propose `Grant`; the answer carries the token
//!   from the applied outcome. A held key: join the key's FIFO queue if the
//!   caller is willing to wait, else `Held`.
//! * **Release** checks the token here, before proposing. When someone is
//!   waiting, the next waiter's `Grant` goes into the same entry right behind
//!   the `Release` (`[Release k, Grant k]`): the log order makes it safe, and
//!   a contended handoff costs one commit, not two.
//! * **Leases** end only by a committed `Expire { key, token }`, proposed when
//!   the leader's deadline passes (again with the next waiter's `Grant`
//!   behind it).
//! * **Keepalive** extends a deadline only after the caller has confirmed
//!   leadership with a quorum (read-index) — see [`super::keepalive`]; the
//!   extension counts from *before* that confirmation.
//! * **Phantom locks:** a caller is "connected" while its reply channel is
//!   open (an HTTP or framed connection that closes drops it). A grant whose
//!   caller is gone is released at once (`Release` proposed right after the
//!   grant); waiters that are gone are skipped.
//! * **New leader:** every held lock's deadline restarts at `now + lease_ms +
//!   election timeout`, so a lease never ends earlier than its holder was
//!   promised; it may end that much later after a leader change.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::error::{Acquired, ServiceError};
use super::lease;
use super::proposer::Proposer;
use super::read;
use crate::command::{HeldLock, Outcome};
use crate::raft::state_machine::StateMachineStore;
use crate::raft::{NodeId, Raft};

/// Counters of the lock service (for metrics).
#[derive(Default, Debug)]
pub struct ServiceStats {
    pub grants: AtomicU64,
    pub releases: AtomicU64,
    pub expires: AtomicU64,
    pub handoffs: AtomicU64,
    pub phantom_releases: AtomicU64,
    pub keepalives: AtomicU64,
    pub waiting: AtomicU64,
}

pub(super) type AcquireReply = oneshot::Sender<Result<Acquired, ServiceError>>;

pub(super) struct Waiter {
    pub(super) id: u64,
    pub(super) lease_ms: u64,
    pub(super) until: Instant,
    pub(super) reply: AcquireReply,
}

pub(super) struct Holder {
    pub(super) token: u64,
    pub(super) lease_ms: u64,
    pub(super) deadline: Instant,
}

#[derive(Default)]
pub(super) struct KeyState {
    pub(super) holder: Option<Holder>,
    /// A proposal for this key is in flight.
    pub(super) busy: bool,
    pub(super) waiters: VecDeque<Waiter>,
}

/// What a proposal was for, so its outcomes can be handled.
pub(super) enum Op {
    /// `[Grant]` for a waiter (or a direct acquire).
    Grant { waiter: Waiter },
    /// `[Release]` or `[Expire]` (`expired` true), then maybe `[Grant]`.
    Free {
        reply: Option<oneshot::Sender<Result<(), ServiceError>>>,
        next: Option<Waiter>,
        expired: bool,
        phantom: bool,
    },
}

pub(super) enum Msg {
    Acquire {
        key: String,
        lease_ms: u64,
        wait: Duration,
        reply: AcquireReply,
    },
    Release {
        key: String,
        token: u64,
        reply: oneshot::Sender<Result<(), ServiceError>>,
    },
    Extend {
        key: String,
        token: u64,
        from: Instant,
        reply: oneshot::Sender<Result<u64, ServiceError>>,
    },
    Done {
        key: String,
        op: Op,
        result: Result<Vec<Outcome>, ServiceError>,
    },
    Leader {
        term: u64,
    },
    Follower {
        leader: Option<NodeId>,
    },
    Loaded {
        term: u64,
        locks: Result<Vec<HeldLock>, ServiceError>,
    },
    /// Test-only fault: rebuild the mirror now (see `super::fault`).
    #[cfg(feature = "fault-stale-done")]
    FaultReload,
}

/// Start the actor and the task that tells it about leadership changes.
pub(super) fn spawn(
    id: NodeId,
    raft: Raft,
    sm: StateMachineStore,
    proposer: Proposer,
    election_timeout: Duration,
    stats: Arc<ServiceStats>,
) -> mpsc::UnboundedSender<Msg> {
    let (tx, rx) = mpsc::unbounded_channel();
    let actor = Actor {
        id,
        raft: raft.clone(),
        sm,
        proposer,
        election_timeout,
        tx: tx.clone(),
        stats,
        role: Role::Follower(None),
        keys: HashMap::new(),
        leases: BTreeSet::new(),
        waits: BTreeSet::new(),
        next_waiter: 0,
        in_flight: 0,
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

pub(super) enum Role {
    Follower(Option<NodeId>),
    /// Leader, (re)building the mirror; requests wait here. The table is
    /// read only once every proposal made before is done (`loading` then
    /// becomes true), so no answer from before can land on the new mirror.
    Starting {
        term: u64,
        queued: Vec<Msg>,
        loading: bool,
        /// Loads that failed in a row (they back off, see [`retry_delay`]).
        failures: u32,
    },
    Leader {
        term: u64,
    },
}

impl Msg {
    /// Answer a caller's request (acquire, release, extend) with `err`;
    /// internal messages have no caller.
    fn fail(self, err: ServiceError) {
        match self {
            Msg::Acquire { reply, .. } => drop(reply.send(Err(err))),
            Msg::Release { reply, .. } => drop(reply.send(Err(err))),
            Msg::Extend { reply, .. } => drop(reply.send(Err(err))),
            _ => {}
        }
    }
}

pub(super) struct Actor {
    pub(super) id: NodeId,
    pub(super) raft: Raft,
    pub(super) sm: StateMachineStore,
    pub(super) proposer: Proposer,
    pub(super) election_timeout: Duration,
    pub(super) tx: mpsc::UnboundedSender<Msg>,
    pub(super) stats: Arc<ServiceStats>,
    pub(super) role: Role,
    pub(super) keys: HashMap<String, KeyState>,
    /// (deadline, key, token) of every held lock.
    pub(super) leases: BTreeSet<(Instant, String, u64)>,
    /// (until, key, waiter id) of every waiter.
    pub(super) waits: BTreeSet<(Instant, String, u64)>,
    pub(super) next_waiter: u64,
    /// Proposals whose `Done` has not been handled yet.
    pub(super) in_flight: usize,
}

impl Actor {
    pub(super) async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Msg>) {
        loop {
            let next = match (self.leases.first(), self.waits.first()) {
                (Some(a), Some(b)) => Some(a.0.min(b.0)),
                (a, b) => a.or(b).map(|x| x.0),
            };
            let msg = match next {
                Some(at) => tokio::select! {
                    m = rx.recv() => m,
                    _ = tokio::time::sleep_until(at) => { self.fire_timers(); continue; }
                },
                None => rx.recv().await,
            };
            let Some(msg) = msg else { return };
            self.handle(msg);
        }
    }

    pub(super) fn not_leader(&self) -> ServiceError {
        let leader = match &self.role {
            Role::Follower(l) => *l,
            _ => Some(self.id),
        };
        ServiceError::NotLeader {
            id: self.id,
            leader,
        }
    }

    pub(super) fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Leader { term } => {
                self.reload(term, ServiceError::Unavailable("leadership changed".into()));
            }
            #[cfg(feature = "fault-stale-done")]
            Msg::FaultReload => {
                if let Role::Leader { term } = self.role {
                    tracing::warn!(
                        node = self.id,
                        "FAULT: rebuilding the mirror with a release's Done held back"
                    );
                    self.reload(term, ServiceError::Unavailable("fault: reload".into()));
                }
            }
            Msg::Follower { leader } => {
                self.reset(ServiceError::NotLeader {
                    id: self.id,
                    leader,
                });
                self.role = Role::Follower(leader);
            }
            Msg::Loaded { term, locks } => {
                let Role::Starting {
                    term: t,
                    queued,
                    loading: true,
                    failures,
                } = &mut self.role
                else {
                    return;
                };
                if *t != term {
                    return;
                }
                let queued = std::mem::take(queued);
                let failures = *failures + 1;
                match locks {
                    Ok(locks) => {
                        // A lease never ends earlier than promised: restart
                        // every timer with a full lease plus the longest
                        // election the gap could have lasted.
                        let now = Instant::now();
                        for l in locks {
                            let deadline = now + lease::lease(l.lease_ms) + self.election_timeout;
                            self.leases.insert((deadline, l.key.clone(), l.token));
                            self.keys.entry(l.key).or_default().holder = Some(Holder {
                                token: l.token,
                                lease_ms: l.lease_ms,
                                deadline,
                            });
                        }
                        tracing::info!(
                            node = self.id,
                            term,
                            held = self.leases.len(),
                            "leader: lock table loaded, lease timers restarted"
                        );
                        self.role = Role::Leader { term };
                        for m in queued {
                            self.handle(m);
                        }
                    }
                    Err(e) => {
                        // A load can fail while leadership settles; one
                        // that keeps failing (the state machine stopped,
                        // say) may never succeed, and whoever waits then
                        // gets the reason rather than no answer at all.
                        let queued = if failures >= GIVE_UP_AFTER {
                            let id = self.id;
                            for m in queued {
                                m.fail(ServiceError::Unavailable(format!(
                                    "node {id} leads but cannot load its lock table ({e}); the request was not proposed"
                                )));
                            }
                            Vec::new()
                        } else {
                            queued
                        };
                        let delay = retry_delay(failures);
                        if failures.is_power_of_two() {
                            tracing::warn!(node = self.id, term, failures, error = %e, retry_in_ms = delay.as_millis() as u64, "leader: could not load the lock table");
                        }
                        self.role = Role::Starting {
                            term,
                            queued,
                            loading: true,
                            failures,
                        };
                        self.load(term, delay);
                    }
                }
            }
            Msg::Done { key, op, result } => {
                self.in_flight = self.in_flight.saturating_sub(1);
                if matches!(self.role, Role::Leader { .. }) {
                    self.done(key, op, result);
                } else {
                    // From before the mirror was dropped: answer the callers
                    // with what was committed, and leave the mirror alone.
                    self.answer_stale(key, op, result);
                    self.start_loading();
                }
            }
            request => match &mut self.role {
                Role::Follower(_) => {
                    request.fail(self.not_leader());
                }
                Role::Starting { queued, .. } => queued.push(request),
                Role::Leader { .. } => match request {
                    Msg::Acquire {
                        key,
                        lease_ms,
                        wait,
                        reply,
                    } => self.acquire(key, lease_ms, wait, reply),
                    Msg::Release { key, token, reply } => self.release(key, token, reply),
                    Msg::Extend {
                        key,
                        token,
                        from,
                        reply,
                    } => {
                        let _ = reply.send(self.extend(&key, token, from));
                    }
                    _ => {}
                },
            },
        }
    }

    /// Drop all leader state (failing everyone who waits with `err`) and
    /// rebuild the mirror from the applied state for `term`.
    pub(super) fn reload(&mut self, term: u64, err: ServiceError) {
        self.reset(err);
        self.role = Role::Starting {
            term,
            queued: Vec::new(),
            loading: false,
            failures: 0,
        };
        self.start_loading();
    }

    /// Read the table once no proposal from before is still in flight: its
    /// `Done` would otherwise be applied to a mirror that already holds its
    /// effect (or, committed after the read, lacks it) — a stale release
    /// that clears the busy flag of a grant in flight drops that grant's
    /// holder from the mirror, and the holder's own release is then refused
    /// as "not held" inside its lease.
    pub(super) fn start_loading(&mut self) {
        let in_flight = self.in_flight;
        if let Role::Starting { term, loading, .. } = &mut self.role {
            if !*loading && in_flight == 0 {
                *loading = true;
                let term = *term;
                self.load(term, Duration::ZERO);
            }
        }
    }

    /// Drop all leader state, failing everyone who waits.
    pub(super) fn reset(&mut self, err: ServiceError) {
        for (_, k) in self.keys.drain() {
            for w in k.waiters {
                let _ = w.reply.send(Err(err.clone()));
            }
        }
        if let Role::Starting { queued, .. } = &mut self.role {
            for m in queued.drain(..) {
                m.fail(err.clone());
            }
        }
        self.leases.clear();
        self.waits.clear();
        self.stats.waiting.store(0, Ordering::Relaxed);
    }

    /// After `delay`, read the applied lock table once everything this
    /// node acknowledged has been applied ([`read::confirm`]), then report
    /// back.
    pub(super) fn load(&self, term: u64, delay: Duration) {
        let (raft, sm, tx, id) = (self.raft.clone(), self.sm.clone(), self.tx.clone(), self.id);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let locks = match read::confirm(&raft, id).await {
                Ok(()) => read_all(&sm),
                Err(e) => Err(e),
            };
            let _ = tx.send(Msg::Loaded { term, locks });
        });
    }
}

/// How long to wait before loading the table again after `failures`
/// failed loads in a row: 50 ms, doubling, at most 1.6 s.
fn retry_delay(failures: u32) -> Duration {
    Duration::from_millis(50u64 << failures.saturating_sub(1).min(5))
}

/// After this many failed loads in a row (about 350 ms of trying), the
/// requests waiting for the table are answered with the reason.
const GIVE_UP_AFTER: u32 = 4;

/// See [`Actor::refuse`].
pub(super) fn refuse<T: Send + 'static>(
    raft: &Raft,
    id: NodeId,
    reply: oneshot::Sender<Result<T, ServiceError>>,
    err: ServiceError,
) {
    let raft = raft.clone();
    tokio::spawn(async move {
        let answer = match read::confirm(&raft, id).await {
            Ok(()) => err,
            Err(e) => e,
        };
        let _ = reply.send(Err(answer));
    });
}

/// The first waiter that is still connected and still willing to wait.
pub(super) fn pop_live_waiter(
    key: &str,
    k: &mut KeyState,
    waits: &mut BTreeSet<(Instant, String, u64)>,
    stats: &ServiceStats,
) -> Option<Waiter> {
    let now = Instant::now();
    while let Some(w) = k.waiters.pop_front() {
        stats.waiting.fetch_sub(1, Ordering::Relaxed);
        waits.remove(&(w.until, key.to_string(), w.id));
        if !w.reply.is_closed() && w.until > now {
            return Some(w);
        }
    }
    None
}

/// Every held lock, in pages, from the applied state.
pub(super) fn read_all(sm: &StateMachineStore) -> Result<Vec<HeldLock>, ServiceError> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = sm
            .locks(after.as_deref(), 4096)
            .map_err(|e| ServiceError::StateMachine(e.to_string()))?;
        let Some(last) = page.last() else { break };
        after = Some(last.key.clone());
        let full = page.len() == 4096;
        out.extend(page);
        if !full {
            break;
        }
    }
    Ok(out)
}
