//! What goes into the leader's table ([`Event`]) and what comes out
//! ([`Action`]), with the table's own commands and outcomes, which the
//! actor maps onto the active module's world.

use std::fmt;
use std::time::Duration;

use crate::error::{Acquired, ServiceError};
use lockd_core::command::Mode;
use lockd_replication::NodeId;

use super::commands::{Cmd, Ident, Outcome, Spec};

/// A caller's request, numbered by the actor (unique per node).
pub type ReqId = u64;

/// A holding as the applied state has it, loaded by a new leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub key: String,
    pub token: u64,
    pub lease_ms: u64,
    pub mode: Mode,
    pub limit: u32,
    pub ident: Option<Ident>,
    /// Who holds it; empty when the state does not record it (a module
    /// of world 0.1, or a grant made without authentication).
    pub principal: String,
    pub owner: String,
    /// 0: on its own lease.
    pub session: u64,
    /// How many times its holder entered it (1 unless reentrant).
    pub count: u32,
}

/// What a new leader reads from the applied state: every holding and
/// every live session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loaded {
    pub locks: Vec<Held>,
    pub sessions: Vec<super::sessions::LoadedSession>,
}

/// What a caller asks of the table.
#[derive(Debug)]
pub enum Request {
    /// Take a slot of `key` as `spec` says, waiting up to `wait` in the
    /// key's queue if it is busy (no wait: one try).
    Acquire {
        req: ReqId,
        key: String,
        spec: Spec,
        wait: Duration,
    },
    /// Free `key` if `token` holds it. `by`: the caller's principal, which
    /// must be the holder's (when recorded); `None` for a caller who may
    /// free any holding (an admin, or no authentication).
    Release {
        req: ReqId,
        key: String,
        token: u64,
        by: Option<String>,
    },
    /// Extend the lease of `token` on `key`, counted from `from` (taken
    /// before the caller confirmed leadership with a read-index); `by` as
    /// for `Release`.
    Extend {
        req: ReqId,
        key: String,
        token: u64,
        from: Duration,
        by: Option<String>,
    },
    /// Open a session (see [`super::sessions`]).
    OpenSession {
        req: ReqId,
        spec: super::sessions::SessionSpec,
    },
    /// End session `id` and every holding in it; `by` as for `Release`.
    CloseSession {
        req: ReqId,
        id: u64,
        by: Option<String>,
    },
    /// Renew session `id` (all its holdings), counted from `from` as for
    /// `Extend`; `by` as for `Release`.
    KeepSession {
        req: ReqId,
        id: u64,
        from: Duration,
        by: Option<String>,
    },
    /// Replace the value of the holding `(key, token)`; `by` as for
    /// `Release`.
    Proclaim {
        req: ReqId,
        key: String,
        token: u64,
        value: String,
        by: Option<String>,
    },
}

impl Request {
    pub fn req(&self) -> ReqId {
        match self {
            Request::Acquire { req, .. }
            | Request::Release { req, .. }
            | Request::Extend { req, .. }
            | Request::OpenSession { req, .. }
            | Request::CloseSession { req, .. }
            | Request::KeepSession { req, .. }
            | Request::Proclaim { req, .. } => *req,
        }
    }
}

#[derive(Debug)]
pub enum Event {
    /// A caller's request: served now, queued while the table loads.
    Request(Request),
    /// Proposal `id` committed with these outcomes, one per command.
    Committed {
        id: u64,
        outcomes: Vec<Outcome>,
    },
    /// Proposal `id` may or may not have committed.
    ProposalFailed {
        id: u64,
        error: ServiceError,
    },
    /// The caller of `req` left before its answer.
    CallerGone {
        req: ReqId,
    },
    /// The answer to the grant of `(key, token)` found no caller.
    Undelivered {
        key: String,
        token: u64,
    },
    /// A lease deadline or wait limit may have passed.
    Tick,
    BecameLeader {
        term: u64,
    },
    LostLeadership {
        leader: Option<NodeId>,
    },
    /// The applied lock table, read after a read-index for `term`.
    TableLoaded {
        term: u64,
        locks: Result<Loaded, ServiceError>,
    },
    /// Rebuild the mirror now (a leader in doubt; the test-only fault
    /// `LOCKD_FAULT_STALE_DONE` uses it).
    Reload,
}

/// Why a proposal is made (for logs, faults and scenario files).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    Grant,
    Release,
    PhantomRelease,
    Expire,
    Session,
    Proclaim,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Commit `commands` in this order, in one entry; report back with
    /// [`Event::Committed`] or [`Event::ProposalFailed`] for `id`.
    Propose {
        id: u64,
        why: Why,
        commands: Vec<Cmd>,
    },
    /// Answer `req` now.
    Reply {
        req: ReqId,
        answer: Result<Answer, ServiceError>,
    },
    /// Answer `req` with `error` once a read-index confirms this node still
    /// leads (or with why it could not confirm).
    RefuseAfterReadIndex { req: ReqId, error: ServiceError },
    /// After `after`, confirm leadership with a read-index, read the
    /// applied lock table and report back with [`Event::TableLoaded`].
    LoadTable { term: u64, after: Duration },
}

/// A successful answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Granted(Acquired),
    Released,
    /// A reentrant holding released once: still held, this many times.
    StillHeld(u32),
    /// The lease, in ms, of the extended holding (or renewed session).
    Extended(u64),
    SessionOpened {
        id: u64,
        ttl_ms: u64,
    },
    /// The holdings the session's end released.
    SessionClosed(Vec<(String, u64)>),
    Proclaimed,
}

/// Counters of the lock service on this node (`waiting` is a gauge).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counters {
    pub grants: u64,
    pub releases: u64,
    pub expires: u64,
    pub handoffs: u64,
    pub phantom_releases: u64,
    pub keepalives: u64,
    pub waiting: u64,
    /// Keys that freed and went to a waiter other than the first, as the
    /// module's `pick` chose ([`super::pick`]).
    pub picked: u64,
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Why::Grant => "grant",
            Why::Release => "release",
            Why::PhantomRelease => "phantom-release",
            Why::Expire => "expire",
            Why::Session => "session",
            Why::Proclaim => "proclaim",
        })
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Granted(a) if a.count != 1 => write!(
                f,
                "granted token={} lease={} count={}",
                a.token, a.lease_ms, a.count
            ),
            Answer::Granted(a) => write!(f, "granted token={} lease={}", a.token, a.lease_ms),
            Answer::Released => f.write_str("released"),
            Answer::StillHeld(n) => write!(f, "still held count={n}"),
            Answer::Extended(ms) => write!(f, "extended lease={ms}"),
            Answer::SessionOpened { id, ttl_ms } => write!(f, "session {id} ttl={ttl_ms}"),
            Answer::SessionClosed(r) => write!(f, "session closed released={}", r.len()),
            Answer::Proclaimed => f.write_str("proclaimed"),
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Propose { id, why, commands } => {
                write!(f, "propose #{id} ({why}):")?;
                for (i, c) in commands.iter().enumerate() {
                    write!(f, "{} {c}", if i == 0 { "" } else { ";" })?;
                }
                Ok(())
            }
            Action::Reply { req, answer } => match answer {
                Ok(a) => write!(f, "reply r{req}: {a}"),
                Err(e) => write!(f, "reply r{req}: error: {e}"),
            },
            Action::RefuseAfterReadIndex { req, error } => {
                write!(f, "refuse r{req} after read-index: {error}")
            }
            Action::LoadTable { term, after } => {
                write!(f, "load table term={term} after={}ms", after.as_millis())
            }
        }
    }
}
