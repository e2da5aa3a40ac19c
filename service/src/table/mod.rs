//! The leader's lock logic as a pure table: events and the time go in,
//! actions come out. No I/O, no clock, no channels, no tasks: the actor
//! ([`super::actor`]) owns those and translates between them and this
//! table, so every rule below can be tested by scenario files under
//! simulated time (see `testdata/`).
//!
//! The table is the only proposer of lock commands. It keeps a mirror of
//! the applied lock table plus what only the leader needs: a lease deadline
//! per `(key, token)`, a FIFO queue of waiters per key, and which keys have
//! a proposal in flight. Because it is the only proposer, its mirror follows
//! the applied state exactly; on any doubt (a proposal that failed, a new
//! term, an outcome that contradicts the mirror) it is rebuilt from the
//! state machine.
//!
//! Rules (the design's, made concrete):
//!
//! * **Acquire**: the module decides who may hold a key; the table never
//!   does. With nobody queued and nothing in flight for the key, the
//!   `Grant` is proposed and its outcome answers: granted (token and
//!   granted lease from the applied outcome), refused by policy, quota or
//!   as unsupported (the module's reason), or `busy`: then the caller joins
//!   the key's FIFO queue if it is willing to wait, else `Held`. Otherwise
//!   the caller queues behind the others (FIFO: a reader never overtakes a
//!   waiting writer). The one shortcut: a grant that world 0.2's contract
//!   makes certainly `busy` (the key is held in the other mode, or by
//!   `limit` holders already) is not proposed; the caller queues, or gets
//!   `Held` after read-index. A retry of a grant that committed (same
//!   holder and request id as a holding) is always proposed, so it gets
//!   the same token back instead of waiting behind itself.
//! * **Release** checks the token here, before proposing. When someone is
//!   waiting, the head waiters' grants go into the same group right behind
//!   the `Release` (`[Release k, Grant k, ...]`): as many as the contract
//!   leaves room for, all of one mode. The module answers them in order
//!   and, from the first `busy` on, answers `busy`: those go back to the
//!   head of the queue, in order. A contended handoff costs one commit.
//!   Which waiter is the head when a key frees with several waiting is the
//!   module's election policy where it has one (`pick`, world 0.4; see
//!   [`pick`]), else the oldest.
//! * **Leases** end only by a committed `Expire { key, token }`, proposed
//!   when the leader's deadline for that `(key, token)` passes (again with
//!   the next waiter's `Grant` behind it).
//! * **Keepalive** extends a deadline only after the caller has confirmed
//!   leadership with a quorum (read-index); the extension counts from
//!   *before* that confirmation (the `from` of [`Request::Extend`]).
//! * **Refusals** (held, not held, wrong token, a wait that ran out) come
//!   from the leader's own view, not from a commit, so they are answered
//!   only after a read-index ([`Action::RefuseAfterReadIndex`]).
//! * **Phantom locks:** a grant whose caller is gone ([`Event::CallerGone`]
//!   before the commit, [`Event::Undelivered`] after) is released at once
//!   by `(key, token)`; waiters that are gone are skipped.
//! * **New leader:** every held lock's deadline restarts at
//!   `now + lease_ms + election timeout`, so a lease never ends earlier than
//!   its holder was promised; it may end that much later after a leader
//!   change.
//! * **Reloads:** the table is loaded only when no proposal is in flight,
//!   so no answer from before can land on the new mirror. A completion that
//!   arrives while the mirror is dropped (stale) answers its callers with
//!   what committed and leaves the mirror alone. Requests that arrive while
//!   loading wait for the load; after [`GIVE_UP_AFTER`] failed loads in a
//!   row they get the reason, and loads keep retrying with a back-off.
//!
//! Commands and outcomes are the table's own ([`Cmd`], [`Outcome`]),
//! which the actor maps onto the replicated types (world 0.2's; the engine
//! adapts them to a 0.1 module). Holders are kept per `(key, token)`.

mod commands;
mod free;
mod holders;
mod leadership;
mod pick;
mod queue;
mod requests;
#[cfg(test)]
mod scenario;
mod sessions;
mod settle;
mod stale;
mod types;
mod waits;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use lockd_replication::NodeId;

pub use commands::{Cmd, Ident, Outcome, Reject, Spec};
pub use pick::PickOrder;
pub use sessions::{LoadedSession, SessionSpec};
pub use types::{Action, Answer, Counters, Event, Held, Loaded, ReqId, Request, Why};
pub use waits::WaitLimits;

/// After this many failed loads in a row (about 350 ms of trying), the
/// requests waiting for the table are answered with the reason.
pub(crate) const GIVE_UP_AFTER: u32 = 4;

/// The longest a leader waits between two loads of its table. A leader
/// without a quorum keeps failing to load, and the leases it inherits
/// restart only when a load succeeds: a short cap keeps that within
/// 200 ms of the quorum coming back, so a lease outlives a fault window by
/// at most this more (docs/architecture.md, "How long a lease can last
/// after a leader change"). A failed load costs one heartbeat round.
pub const MAX_RETRY_DELAY: Duration = Duration::from_millis(200);

/// How long to wait before loading the table again after `failures`
/// failed loads in a row: 50 ms, doubling, at most [`MAX_RETRY_DELAY`].
pub(crate) fn retry_delay(failures: u32) -> Duration {
    Duration::from_millis(50u64 << failures.saturating_sub(1).min(5)).min(MAX_RETRY_DELAY)
}

/// Waiters' grants behind one release at most.
const MAX_BEHIND: usize = 64;

/// A caller waiting for a key (or whose grant is being proposed).
#[derive(Debug, Clone)]
struct Waiter {
    req: ReqId,
    spec: Spec,
    until: Duration,
    /// The caller left while its grant was in flight.
    gone: bool,
    /// It will not wait: one try (queued only behind a proposal in flight,
    /// with no timer), then `Held`.
    once: bool,
}

/// One holding of a key: its lease, the deadline on the leader's clock,
/// what the contract needs (mode, limit) or a retry matches (ident), and
/// the principal that holds it (empty: not recorded), which alone may
/// release or renew it besides an admin.
#[derive(Debug, Clone)]
struct Holder {
    lease_ms: u64,
    deadline: Duration,
    mode: lockd_core::command::Mode,
    limit: u32,
    ident: Option<Ident>,
    principal: String,
    owner: String,
    /// 0: on its own lease (`deadline`); else it lives in this session
    /// and has no lease timer of its own.
    session: u64,
    /// Times its holder entered it (1 unless reentrant).
    count: u32,
}

#[derive(Default, Debug)]
struct KeyState {
    /// Holders by token.
    holders: holders::Holders,
    /// Proposals for this key in flight.
    inflight: u32,
    waiters: VecDeque<Waiter>,
}

impl KeyState {
    fn idle(&self) -> bool {
        self.holders.is_empty() && self.inflight == 0 && self.waiters.is_empty()
    }
}

/// The end of a holding that a proposal carries first.
#[derive(Debug)]
struct End {
    token: u64,
    /// The client release this answers, if any: for an `Expire`, a
    /// release of its token that came while it was in flight, answered
    /// "not held" once it commits (never before: a leader that stops
    /// first may come back and restart that lease).
    reply: Option<ReqId>,
    expired: bool,
    phantom: bool,
    /// The session the holding lived in (0: none). A release of it can
    /// meet the session's end committed first: see `Table::done`.
    session: u64,
}

/// What a proposal in flight was for, so its outcomes can be handled.
#[derive(Debug)]
struct Op {
    key: String,
    end: Option<End>,
    /// Waiters whose grants follow, in order.
    grants: Vec<Waiter>,
    /// A proposal about sessions or values rather than holders.
    extra: Option<sessions::Extra>,
}

impl Op {
    fn extra(extra: sessions::Extra) -> Op {
        Op {
            key: String::new(),
            end: None,
            grants: Vec::new(),
            extra: Some(extra),
        }
    }
}

#[derive(Debug)]
enum Role {
    Follower(Option<NodeId>),
    /// Leader, (re)building the mirror; requests wait here. The table is
    /// read only once every proposal made before is done (`loading` then
    /// becomes true).
    Starting {
        term: u64,
        queued: Vec<Request>,
        loading: bool,
        /// Loads that failed in a row.
        failures: u32,
    },
    Leader {
        term: u64,
    },
}

impl Role {
    /// The term this node leads, or starts to lead, in; 0 as a follower.
    fn term(&self) -> u64 {
        match self {
            Role::Starting { term, .. } | Role::Leader { term } => *term,
            Role::Follower(_) => 0,
        }
    }
}

/// The leader's lock table. See the module docs for its rules.
#[derive(Debug)]
pub struct Table {
    id: NodeId,
    election_timeout: Duration,
    role: Role,
    keys: HashMap<String, KeyState>,
    /// (deadline, key, token) of every held lock on a lease of its own.
    leases: BTreeSet<(Duration, String, u64)>,
    /// Live sessions by id, and (deadline, id) of each.
    sessions: BTreeMap<u64, sessions::Sess>,
    session_timers: BTreeSet<(Duration, u64)>,
    /// The deadline of every waiter that has one.
    waits: waits::Waits,
    limits: WaitLimits,
    /// Proposals in flight, whose completion has not been handled yet,
    /// each with the leadership term it was made in.
    ops: HashMap<u64, (u64, Op)>,
    next_proposal: u64,
    counters: Counters,
    now: Duration,
    out: Vec<Action>,
    picker: pick::Picker,
    /// The deadlines a rebuild in the same term keeps (see `reload`).
    kept: Option<leadership::Kept>,
}

impl Table {
    /// The term this table leads (or is starting to lead), if any: what
    /// its proposals are decided under.
    pub(crate) fn leading_term(&self) -> Option<u64> {
        match self.role {
            Role::Leader { term } | Role::Starting { term, .. } => Some(term),
            Role::Follower(_) => None,
        }
    }

    /// A table for node `id`, a follower until told otherwise.
    /// `election_timeout` is the longest an election can take: a new leader
    /// adds it to every held lease it inherits.
    pub fn new(id: NodeId, election_timeout: Duration, limits: WaitLimits) -> Table {
        Table {
            id,
            election_timeout,
            role: Role::Follower(None),
            keys: HashMap::new(),
            leases: BTreeSet::new(),
            sessions: BTreeMap::new(),
            session_timers: BTreeSet::new(),
            waits: waits::Waits::default(),
            limits,
            ops: HashMap::new(),
            next_proposal: 1,
            counters: Counters::default(),
            now: Duration::ZERO,
            out: Vec::new(),
            picker: pick::Picker::default(),
            kept: None,
        }
    }

    /// Handle one event at `now` (time since an epoch the caller chose;
    /// it must not go backwards) and return what to do.
    pub fn handle(&mut self, now: Duration, event: Event) -> Vec<Action> {
        self.now = self.now.max(now);
        match event {
            Event::Request(r) => self.request(r),
            Event::Committed { id, outcomes } => self.completed(id, Ok(outcomes)),
            Event::ProposalFailed { id, error } => self.completed(id, Err(error)),
            Event::CallerGone { req } => self.caller_gone(req),
            Event::Undelivered { key, token } => self.undelivered(key, token),
            Event::Tick => self.fire_timers(),
            Event::BecameLeader { term } => self.became_leader(term),
            Event::LostLeadership { leader } => self.lost_leadership(leader),
            Event::TableLoaded { term, locks } => self.loaded(term, locks),
            Event::Reload => self.doubt(),
        }
        std::mem::take(&mut self.out)
    }

    /// The earliest lease deadline or wait limit: deliver [`Event::Tick`]
    /// then.
    pub(crate) fn next_deadline(&self) -> Option<Duration> {
        let lease = self.leases.first().map(|l| l.0);
        let session = self.session_timers.first().map(|s| s.0);
        [lease, session, self.waits.first()]
            .into_iter()
            .flatten()
            .min()
    }

    /// The service's counters so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The principal of each holding of `key` this table knows one for
    /// (a grant it made, or one the state recorded), by token.
    pub fn principals(&self, key: &str) -> Vec<(u64, String)> {
        self.keys.get(key).map_or_else(Vec::new, |k| {
            k.holders
                .iter()
                .filter(|(_, h)| !h.principal.is_empty())
                .map(|(t, h)| (t, h.principal.clone()))
                .collect()
        })
    }

    /// (token, ms left at `now`) of each holding of `key`, on the leader's
    /// clock; empty but on a leader whose table is loaded.
    pub(crate) fn leases_left(&self, key: &str, now: Duration) -> Vec<(u64, u64)> {
        if !matches!(self.role, Role::Leader { .. }) {
            return Vec::new();
        }
        self.keys.get(key).map_or_else(Vec::new, |k| {
            k.holders
                .iter()
                .map(|(t, h)| {
                    let left = match h.session {
                        0 => u64::try_from(h.deadline.saturating_sub(now).as_millis()).ok(),
                        id => self.session_left(id, now),
                    };
                    (t, left.unwrap_or(u64::MAX))
                })
                .collect()
        })
    }

    /// The ms left of session `id` at `now` on the leader's clock; `None`
    /// but on a leader whose table is loaded and times it.
    pub(crate) fn session_ttl_left(&self, id: u64, now: Duration) -> Option<u64> {
        if !matches!(self.role, Role::Leader { .. }) {
            return None;
        }
        self.session_left(id, now)
    }

    fn emit(&mut self, action: Action) {
        self.out.push(action);
    }

    fn reply(&mut self, req: ReqId, answer: Result<Answer, crate::ServiceError>) {
        self.emit(Action::Reply { req, answer });
    }

    fn refuse(&mut self, req: ReqId, error: crate::ServiceError) {
        self.emit(Action::RefuseAfterReadIndex { req, error });
    }
}
