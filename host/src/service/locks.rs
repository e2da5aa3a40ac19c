//! The leader's lock table: waiters, leases, handoff. One task owns it.
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

use super::proposer::Proposer;
use super::{Acquired, ServiceError};
use crate::command::{Command, HeldLock, Outcome};
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

type AcquireReply = oneshot::Sender<Result<Acquired, ServiceError>>;

struct Waiter {
    id: u64,
    lease_ms: u64,
    until: Instant,
    reply: AcquireReply,
}

struct Holder {
    token: u64,
    lease_ms: u64,
    deadline: Instant,
}

#[derive(Default)]
struct KeyState {
    holder: Option<Holder>,
    /// A proposal for this key is in flight.
    busy: bool,
    waiters: VecDeque<Waiter>,
}

/// What a proposal was for, so its outcomes can be handled.
enum Op {
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

enum Msg {
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
}

/// The handle to the actor. Cheap to clone.
#[derive(Clone)]
pub struct LockService {
    tx: mpsc::UnboundedSender<Msg>,
    pub stats: Arc<ServiceStats>,
}

fn gone() -> ServiceError {
    ServiceError::Unavailable("the node is shutting down".into())
}

impl LockService {
    pub fn start(
        id: NodeId,
        raft: Raft,
        sm: StateMachineStore,
        proposer: Proposer,
        election_timeout: Duration,
    ) -> LockService {
        let (tx, rx) = mpsc::unbounded_channel();
        let stats = Arc::new(ServiceStats::default());
        let actor = Actor {
            id,
            raft: raft.clone(),
            sm,
            proposer,
            election_timeout,
            tx: tx.clone(),
            stats: stats.clone(),
            role: Role::Follower(None),
            keys: HashMap::new(),
            leases: BTreeSet::new(),
            waits: BTreeSet::new(),
            next_waiter: 0,
        };
        tokio::spawn(actor.run(rx));
        tokio::spawn(watch_leadership(id, raft, tx.clone()));
        LockService { tx, stats }
    }

    pub async fn acquire(
        &self,
        key: String,
        lease_ms: u64,
        wait: Duration,
    ) -> Result<Acquired, ServiceError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Msg::Acquire {
                key,
                lease_ms,
                wait,
                reply,
            })
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    pub async fn release(&self, key: String, token: u64) -> Result<(), ServiceError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Msg::Release { key, token, reply })
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    /// Extend the lease of `token` on `key` to `from + lease_ms`. The caller
    /// must have confirmed leadership (read-index) after `from`.
    pub async fn extend(
        &self,
        key: String,
        token: u64,
        from: Instant,
    ) -> Result<u64, ServiceError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Msg::Extend {
                key,
                token,
                from,
                reply,
            })
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }
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

enum Role {
    Follower(Option<NodeId>),
    /// Leader, loading the table; requests wait here.
    Starting {
        term: u64,
        queued: Vec<Msg>,
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

struct Actor {
    id: NodeId,
    raft: Raft,
    sm: StateMachineStore,
    proposer: Proposer,
    election_timeout: Duration,
    tx: mpsc::UnboundedSender<Msg>,
    stats: Arc<ServiceStats>,
    role: Role,
    keys: HashMap<String, KeyState>,
    /// (deadline, key, token) of every held lock.
    leases: BTreeSet<(Instant, String, u64)>,
    /// (until, key, waiter id) of every waiter.
    waits: BTreeSet<(Instant, String, u64)>,
    next_waiter: u64,
}

impl Actor {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Msg>) {
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

    fn not_leader(&self) -> ServiceError {
        let leader = match &self.role {
            Role::Follower(l) => *l,
            _ => Some(self.id),
        };
        ServiceError::NotLeader {
            id: self.id,
            leader,
        }
    }

    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Leader { term } => {
                self.reload(term, ServiceError::Unavailable("leadership changed".into()));
            }
            Msg::Follower { leader } => {
                self.reset(ServiceError::NotLeader {
                    id: self.id,
                    leader,
                });
                self.role = Role::Follower(leader);
            }
            Msg::Loaded { term, locks } => {
                let Role::Starting { term: t, queued } = &mut self.role else {
                    return;
                };
                if *t != term {
                    return;
                }
                let queued = std::mem::take(queued);
                match locks {
                    Ok(locks) => {
                        // A lease never ends earlier than promised: restart
                        // every timer with a full lease plus the longest
                        // election the gap could have lasted.
                        let now = Instant::now();
                        for l in locks {
                            let deadline = now + lease(l.lease_ms) + self.election_timeout;
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
                        tracing::warn!(node = self.id, term, error = %e, "leader: could not load the lock table; retrying");
                        self.role = Role::Starting { term, queued };
                        self.load(term);
                    }
                }
            }
            Msg::Done { key, op, result } => self.done(key, op, result),
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
    fn reload(&mut self, term: u64, err: ServiceError) {
        self.reset(err);
        self.role = Role::Starting {
            term,
            queued: Vec::new(),
        };
        self.load(term);
    }

    /// Drop all leader state, failing everyone who waits.
    fn reset(&mut self, err: ServiceError) {
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

    /// Read the applied lock table once everything committed before this
    /// term has been applied (read-index), then report back.
    fn load(&self, term: u64) {
        let (raft, sm, tx) = (self.raft.clone(), self.sm.clone(), self.tx.clone());
        tokio::spawn(async move {
            let locks = match raft.ensure_linearizable().await {
                Ok(_) => read_all(&sm),
                Err(e) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Err(ServiceError::Unavailable(e.to_string()))
                }
            };
            let _ = tx.send(Msg::Loaded { term, locks });
        });
    }

    fn acquire(&mut self, key: String, lease_ms: u64, wait: Duration, reply: AcquireReply) {
        if reply.is_closed() {
            return; // the caller left before we got to it
        }
        let id = self.next_waiter;
        self.next_waiter += 1;
        let waiter = Waiter {
            id,
            lease_ms,
            until: Instant::now() + wait,
            reply,
        };
        let k = self.keys.entry(key.clone()).or_default();
        if k.holder.is_none() && !k.busy && k.waiters.is_empty() {
            k.busy = true;
            self.propose(
                key.clone(),
                vec![Command::grant(key, lease_ms)],
                Op::Grant { waiter },
            );
        } else if wait.is_zero() {
            self.refuse(waiter.reply, ServiceError::Held { key });
        } else {
            self.waits.insert((waiter.until, key, id));
            k.waiters.push_back(waiter);
            self.stats.waiting.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn release(
        &mut self,
        key: String,
        token: u64,
        reply: oneshot::Sender<Result<(), ServiceError>>,
    ) {
        let Some(k) = self.keys.get_mut(&key) else {
            self.refuse(reply, ServiceError::NotHeld { key });
            return;
        };
        match &k.holder {
            None => {
                self.refuse(reply, ServiceError::NotHeld { key });
            }
            Some(h) if h.token != token => {
                self.refuse(reply, ServiceError::WrongToken { key, given: token });
            }
            Some(_) => self.free(key, Some(reply), false, false),
        }
    }

    /// Propose the end of the current holding (`Release`, or `Expire` when
    /// the lease ran out), with the next live waiter's `Grant` behind it.
    fn free(
        &mut self,
        key: String,
        reply: Option<oneshot::Sender<Result<(), ServiceError>>>,
        expired: bool,
        phantom: bool,
    ) {
        let Some(k) = self.keys.get_mut(&key) else {
            return;
        };
        let Some(h) = k.holder.take() else { return };
        self.leases.remove(&(h.deadline, key.clone(), h.token));
        k.busy = true;
        let next = pop_live_waiter(&key, k, &mut self.waits, &self.stats);
        let mut commands = vec![if expired {
            Command::expire(key.clone(), h.token)
        } else {
            Command::release(key.clone())
        }];
        if let Some(w) = &next {
            commands.push(Command::grant(key.clone(), w.lease_ms));
        }
        self.propose(
            key,
            commands,
            Op::Free {
                reply,
                next,
                expired,
                phantom,
            },
        );
    }

    fn extend(&mut self, key: &str, token: u64, from: Instant) -> Result<u64, ServiceError> {
        let Some(h) = self.keys.get_mut(key).and_then(|k| k.holder.as_mut()) else {
            return Err(ServiceError::NotHeld { key: key.into() });
        };
        if h.token != token {
            return Err(ServiceError::WrongToken {
                key: key.into(),
                given: token,
            });
        }
        let deadline = from + lease(h.lease_ms);
        if deadline > h.deadline {
            self.leases.remove(&(h.deadline, key.to_string(), token));
            h.deadline = deadline;
            self.leases.insert((deadline, key.to_string(), token));
        }
        self.stats.keepalives.fetch_add(1, Ordering::Relaxed);
        Ok(h.lease_ms)
    }

    /// Answer a refusal (held, not held, wrong token) only after confirming
    /// with a quorum that this node is still the leader (read-index). A
    /// refusal comes from the leader's own view, not from a commit; a
    /// deposed leader that has not noticed yet (a paused process, a
    /// partition) must not tell a holder its lock is gone, or a caller that
    /// a free key is held.
    fn refuse<T: Send + 'static>(
        &self,
        reply: oneshot::Sender<Result<T, ServiceError>>,
        err: ServiceError,
    ) {
        refuse(&self.raft, self.id, reply, err);
    }

    fn propose(&self, key: String, commands: Vec<Command>, op: Op) {
        let (proposer, tx) = (self.proposer.clone(), self.tx.clone());
        tokio::spawn(async move {
            let result = proposer.propose(commands).await;
            let _ = tx.send(Msg::Done { key, op, result });
        });
    }

    fn done(&mut self, key: String, op: Op, result: Result<Vec<Outcome>, ServiceError>) {
        let term = match self.role {
            Role::Leader { term } => term,
            // State was reset when leadership went; the callers have been
            // answered by the reset or will time out on their side.
            _ => return,
        };
        let outcomes = match result {
            Ok(o) => o,
            Err(e) => {
                // The entry may or may not have committed: rebuild the
                // mirror from the applied state rather than guess.
                tracing::warn!(node = self.id, key, error = %e, "proposal failed; reloading the lock table");
                fail_op(op, e.clone());
                self.reload(term, e);
                return;
            }
        };
        let mut outcomes = outcomes.into_iter();
        let granted_to = match op {
            Op::Grant { waiter } => Some(waiter),
            Op::Free {
                reply,
                next,
                expired,
                phantom,
            } => {
                let first = outcomes.next();
                match (expired, first) {
                    (true, Some(Outcome::Expired(_))) => {
                        self.stats.expires.fetch_add(1, Ordering::Relaxed);
                    }
                    (false, Some(Outcome::Released)) => {
                        let counter = if phantom {
                            &self.stats.phantom_releases
                        } else {
                            &self.stats.releases
                        };
                        counter.fetch_add(1, Ordering::Relaxed);
                        if let Some(r) = reply {
                            let _ = r.send(Ok(()));
                        }
                    }
                    (_, other) => {
                        tracing::error!(
                            node = self.id,
                            key,
                            ?other,
                            "unexpected outcome ending a holding"
                        );
                        if let Some(r) = reply {
                            let _ = r.send(Err(ServiceError::NotHeld { key: key.clone() }));
                        }
                    }
                }
                if next.is_some() {
                    self.stats.handoffs.fetch_add(1, Ordering::Relaxed);
                }
                next
            }
        };
        if let Some(waiter) = granted_to {
            match outcomes.next() {
                Some(Outcome::Granted(token)) => {
                    self.stats.grants.fetch_add(1, Ordering::Relaxed);
                    let deadline = Instant::now() + lease(waiter.lease_ms);
                    self.leases.insert((deadline, key.clone(), token));
                    if let Some(k) = self.keys.get_mut(&key) {
                        k.holder = Some(Holder {
                            token,
                            lease_ms: waiter.lease_ms,
                            deadline,
                        });
                        k.busy = false;
                    }
                    let lease_ms = waiter.lease_ms;
                    if waiter.reply.send(Ok(Acquired { token, lease_ms })).is_err() {
                        // The caller is gone: no phantom lock until the lease ends.
                        tracing::info!(
                            node = self.id,
                            key,
                            token,
                            "caller left before its grant; releasing"
                        );
                        self.free(key, None, false, true);
                        return;
                    }
                }
                Some(Outcome::GrantRejected) if self.sm.state().guest.get(&key).ok() == Some(None) => {
                    // The key is free, yet the module said no: its policy
                    // (e.g. a reserved prefix after an upgrade). Nothing
                    // changed, so the mirror is still right.
                    let _ = waiter
                        .reply
                        .send(Err(ServiceError::Refused { key: key.clone() }));
                    if let Some(k) = self.keys.get_mut(&key) {
                        k.busy = false;
                    }
                }
                other => {
                    tracing::error!(
                        node = self.id,
                        key,
                        ?other,
                        "grant not granted; reloading the lock table"
                    );
                    let _ = waiter
                        .reply
                        .send(Err(ServiceError::Held { key: key.clone() }));
                    self.reload(term, ServiceError::Unavailable("lock table reloaded".into()));
                    return;
                }
            }
        } else if let Some(k) = self.keys.get_mut(&key) {
            k.busy = false;
        }
        self.settle(key);
    }

    /// After a key went idle: start the next waiter, or forget the key.
    fn settle(&mut self, key: String) {
        let Some(k) = self.keys.get_mut(&key) else {
            return;
        };
        if k.busy || k.holder.is_some() {
            return;
        }
        match pop_live_waiter(&key, k, &mut self.waits, &self.stats) {
            Some(w) => {
                k.busy = true;
                self.propose(
                    key.clone(),
                    vec![Command::grant(key, w.lease_ms)],
                    Op::Grant { waiter: w },
                );
            }
            None => {
                self.keys.remove(&key);
            }
        }
    }

    fn fire_timers(&mut self) {
        let now = Instant::now();
        while let Some((at, key, token)) = self.leases.first().cloned() {
            if at > now {
                break;
            }
            self.leases.pop_first();
            let current = self
                .keys
                .get(&key)
                .and_then(|k| k.holder.as_ref())
                .is_some_and(|h| h.token == token && h.deadline == at);
            if current {
                tracing::debug!(node = self.id, key, token, "lease ended; proposing expire");
                // Put the entry back so free() finds and removes it.
                self.leases.insert((at, key.clone(), token));
                self.free(key, None, true, false);
            }
        }
        while let Some((at, key, id)) = self.waits.first().cloned() {
            if at > now {
                break;
            }
            self.waits.pop_first();
            if let Some(k) = self.keys.get_mut(&key) {
                if let Some(pos) = k.waiters.iter().position(|w| w.id == id) {
                    if let Some(w) = k.waiters.remove(pos) {
                        self.stats.waiting.fetch_sub(1, Ordering::Relaxed);
                        refuse(
                            &self.raft,
                            self.id,
                            w.reply,
                            ServiceError::Held { key: key.clone() },
                        );
                    }
                }
                if k.holder.is_none() && !k.busy && k.waiters.is_empty() {
                    self.keys.remove(&key);
                }
            }
        }
    }
}

/// How long a lease of `ms` lasts on the leader's clock.
#[cfg(not(feature = "fault-early-expiry"))]
fn lease(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// A deliberately broken build (cargo feature `fault-early-expiry`, never
/// enabled by normal builds): leases end after a quarter of their time. It
/// exists to show that the fault-injection checkers catch a lock service
/// that ends leases early (`scripts/broken-variant.sh`).
#[cfg(feature = "fault-early-expiry")]
fn lease(ms: u64) -> Duration {
    Duration::from_millis(ms / 4)
}

/// See [`Actor::refuse`].
fn refuse<T: Send + 'static>(
    raft: &Raft,
    id: NodeId,
    reply: oneshot::Sender<Result<T, ServiceError>>,
    err: ServiceError,
) {
    let raft = raft.clone();
    tokio::spawn(async move {
        let answer = match raft.ensure_linearizable().await {
            Ok(_) => err,
            Err(openraft::error::RaftError::APIError(
                openraft::error::CheckIsLeaderError::ForwardToLeader(f),
            )) => ServiceError::NotLeader {
                id,
                leader: f.leader_id,
            },
            Err(e) => ServiceError::Unavailable(format!(
                "node {id} could not confirm its leadership: {e}"
            )),
        };
        let _ = reply.send(Err(answer));
    });
}

/// The first waiter that is still connected and still willing to wait.
fn pop_live_waiter(
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

fn fail_op(op: Op, e: ServiceError) {
    match op {
        Op::Grant { waiter } => drop(waiter.reply.send(Err(e))),
        Op::Free { reply, next, .. } => {
            if let Some(r) = reply {
                let _ = r.send(Err(e.clone()));
            }
            if let Some(w) = next {
                let _ = w.reply.send(Err(e));
            }
        }
    }
}

/// Every held lock, in pages, from the applied state.
fn read_all(sm: &StateMachineStore) -> Result<Vec<HeldLock>, ServiceError> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = sm
            .state()
            .guest
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
