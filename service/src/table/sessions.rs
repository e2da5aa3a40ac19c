//! Sessions in the table: open, keepalive, close, expiry, and the
//! holdings that live in them.
//!
//! A session is replicated (the module keeps its id, holder, TTL and
//! holdings); its clock is the leader's, like a lease's. The table keeps a
//! deadline per live session and none for the holdings in it: one
//! keepalive renews them all, and when the deadline passes the table
//! proposes one `ExpireSession`, which removes the session and every
//! holding in it in one entry. Then each key it freed is handed to its
//! waiters, as after a release.
//!
//! * **Open** is proposed at once; the module answers the id (or the live
//!   session of the same holder and request id: opening is retry-safe).
//! * **Keepalive** extends the deadline counted from before the caller's
//!   read-index, as for a lease ([`super::Request::Extend`]).
//! * **Close** and **expiry** remove the session from the mirror only when
//!   the entry commits; a session being ended takes no keepalive and no
//!   new grant (the module would refuse the grant: `no-session`).
//! * **New leader:** every session's deadline restarts at `now + TTL +
//!   election timeout`, as a lease's does.
//! * **Principals:** only the session's principal (or an admin: `by` is
//!   `None`) may renew, close or acquire in it.

use std::collections::BTreeSet;
use std::time::Duration;

use super::{Answer, Cmd, Op, Outcome, ReqId, Role, Table, Why};
use crate::error::ServiceError;

/// What opening a session asks for. The bounds are the node's settings,
/// carried into the command so every replica enforces the same ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSpec {
    pub ttl_ms: u64,
    /// Set by the service from the caller's credentials.
    pub principal: String,
    pub owner: String,
    /// Makes a retried open answer the session that opened.
    pub request_id: String,
    pub max_sessions: u32,
    pub max_holdings: u32,
}

/// A live session as a new leader reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedSession {
    pub id: u64,
    pub ttl_ms: u64,
    pub principal: String,
}

/// A live session in the mirror.
#[derive(Debug, Clone)]
pub(super) struct Sess {
    pub ttl_ms: u64,
    pub deadline: Duration,
    pub principal: String,
    /// Its holdings, as the mirror has them.
    pub holdings: BTreeSet<(String, u64)>,
    /// An end is in flight: no keepalive, no new holding.
    pub ending: bool,
}

/// The non-key part of a proposal in flight.
#[derive(Debug)]
pub(super) enum Extra {
    Open {
        req: ReqId,
        principal: String,
    },
    End {
        id: u64,
        reply: Option<ReqId>,
        expired: bool,
    },
    Proclaim {
        req: ReqId,
        key: String,
    },
}

impl Table {
    pub(super) fn open_session(&mut self, req: ReqId, spec: super::SessionSpec) {
        let principal = spec.principal.clone();
        let op = Op::extra(Extra::Open { req, principal });
        self.propose(Why::Session, vec![Cmd::OpenSession(spec)], op);
    }

    /// A live session `by` may use (`None`: anyone).
    fn usable(&self, id: u64, by: Option<&str>) -> Result<&Sess, ServiceError> {
        let s = self
            .sessions
            .get(&id)
            .filter(|s| !s.ending)
            .ok_or(ServiceError::NoSession { id })?;
        match by {
            Some(by) if s.principal != by => Err(ServiceError::NotSessionHolder {
                id,
                holder: s.principal.clone(),
                caller: by.to_string(),
            }),
            _ => Ok(s),
        }
    }

    /// Whether an acquire in session `id` by `principal` may be proposed;
    /// the refusal otherwise (the module would refuse it too, but a
    /// session being ended must not take a holding the end misses).
    pub(super) fn session_check(&self, id: u64, principal: &str) -> Result<(), ServiceError> {
        let by = (!principal.is_empty()).then_some(principal);
        self.usable(id, by).map(|_| ())
    }

    pub(super) fn keep_session(
        &mut self,
        id: u64,
        from: Duration,
        by: Option<&str>,
    ) -> Result<u64, ServiceError> {
        self.usable(id, by)?;
        let Some(s) = self.sessions.get_mut(&id) else {
            return Err(ServiceError::NoSession { id });
        };
        let deadline = from + crate::lease::session(s.ttl_ms);
        if deadline > s.deadline {
            self.session_timers.remove(&(s.deadline, id));
            s.deadline = deadline;
            self.session_timers.insert((deadline, id));
        }
        self.counters.keepalives += 1;
        Ok(s.ttl_ms)
    }

    pub(super) fn close_session(&mut self, req: ReqId, id: u64, by: Option<&str>) {
        if let Err(e) = self.usable(id, by) {
            return self.refuse(req, e);
        }
        self.end_session(id, Some(req), false);
    }

    /// Propose the end of session `id` (its close, or its expiry).
    fn end_session(&mut self, id: u64, reply: Option<ReqId>, expired: bool) {
        if let Some(s) = self.sessions.get_mut(&id) {
            s.ending = true;
            self.session_timers.remove(&(s.deadline, id));
        }
        let cmd = if expired {
            Cmd::ExpireSession { id }
        } else {
            Cmd::CloseSession { id }
        };
        let op = Op::extra(Extra::End { id, reply, expired });
        self.propose(Why::Session, vec![cmd], op);
    }

    /// Sessions whose deadline passed get an `ExpireSession`.
    pub(super) fn fire_session_timers(&mut self) {
        while let Some(&(at, id)) = self.session_timers.first() {
            if at > self.now {
                break;
            }
            tracing::debug!(
                node = self.id,
                session = id,
                "session ended; proposing its expiry"
            );
            self.end_session(id, None, true);
        }
    }

    /// Record the session a committed open made.
    fn opened(&mut self, id: u64, ttl_ms: u64, principal: String) {
        if self.sessions.contains_key(&id) {
            return; // A retried open: the session is already timed.
        }
        let deadline = self.now + crate::lease::session_opened(ttl_ms);
        self.session_timers.insert((deadline, id));
        self.sessions.insert(
            id,
            Sess {
                ttl_ms,
                deadline,
                principal,
                holdings: BTreeSet::new(),
                ending: false,
            },
        );
    }

    /// A proposal of sessions or values completed. `leading`: the mirror
    /// is this proposal's (else only the callers are answered).
    pub(super) fn extra_done(
        &mut self,
        extra: Extra,
        result: Result<Vec<Outcome>, ServiceError>,
        leading: bool,
    ) {
        let outcome = match result {
            Ok(mut o) => o.pop(),
            Err(e) => {
                if let Some(req) = extra.reply() {
                    self.reply(req, Err(e.clone()));
                }
                if let (true, Role::Leader { term }) = (leading, &self.role) {
                    self.reload(*term, e);
                }
                return;
            }
        };
        match (extra, outcome) {
            (Extra::Open { req, principal }, Some(Outcome::SessionOpened { id, ttl_ms })) => {
                if leading {
                    self.opened(id, ttl_ms, principal);
                }
                self.reply(req, Ok(Answer::SessionOpened { id, ttl_ms }));
            }
            (
                Extra::End { id, reply, expired },
                Some(Outcome::SessionEnded { released, freed }),
            ) => {
                if leading {
                    self.ended(id, &released, freed, expired);
                }
                if let Some(req) = reply {
                    self.reply(req, Ok(Answer::SessionClosed(released)));
                }
            }
            (Extra::Proclaim { req, .. }, Some(Outcome::Proclaimed)) => {
                self.reply(req, Ok(Answer::Proclaimed));
            }
            (extra, Some(Outcome::Rejected(r))) => {
                if let Some(req) = extra.reply() {
                    let e = super::settle::refusal(extra.key(), r);
                    self.reply(req, Err(e));
                }
            }
            (extra, Some(Outcome::NotFound)) => {
                if let Some(req) = extra.reply() {
                    let key = extra.key().to_string();
                    self.reply(req, Err(ServiceError::NotHeld { key }));
                }
            }
            (extra, other) => {
                tracing::error!(
                    node = self.id,
                    ?other,
                    "unexpected outcome of a session proposal; reloading the lock table"
                );
                if let Some(req) = extra.reply() {
                    self.reply(
                        req,
                        Err(ServiceError::Unavailable("lock table reloaded".into())),
                    );
                }
                if let (true, Role::Leader { term }) = (leading, &self.role) {
                    self.reload(
                        *term,
                        ServiceError::Unavailable("lock table reloaded".into()),
                    );
                }
            }
        }
    }

    /// A session's end committed: drop it and its holdings from the
    /// mirror, and hand each freed key to its waiters.
    fn ended(&mut self, id: u64, released: &[(String, u64)], freed: Vec<String>, expired: bool) {
        if let Some(s) = self.sessions.remove(&id) {
            self.session_timers.remove(&(s.deadline, id));
        }
        for (key, token) in released {
            if let Some(k) = self.keys.get_mut(key) {
                k.holders.remove(token);
            }
            if expired {
                self.counters.expires += 1;
            } else {
                self.counters.releases += 1;
            }
        }
        for key in released.iter().map(|(k, _)| k) {
            if !freed.contains(key) && self.keys.get(key).is_some_and(|k| k.idle()) {
                self.keys.remove(key);
            }
        }
        for key in freed {
            self.settle(key, false);
        }
    }

    /// Record a holding granted in session `id` (the session's set).
    /// False when the session is gone from the mirror: its end committed
    /// already and removed the holding with it.
    pub(super) fn join_session(&mut self, id: u64, key: &str, token: u64) -> bool {
        match self.sessions.get_mut(&id) {
            Some(s) => {
                s.holdings.insert((key.to_string(), token));
                true
            }
            None => false,
        }
    }

    /// Replace the value of `(key, token)`, checked as a release is.
    pub(super) fn proclaim(
        &mut self,
        req: ReqId,
        key: String,
        token: u64,
        value: String,
        by: Option<&str>,
    ) {
        let h = self.keys.get(&key).and_then(|k| k.holders.get(&token));
        let check = match h {
            None if self.keys.get(&key).is_some_and(|k| !k.holders.is_empty()) => {
                Err(ServiceError::WrongToken {
                    key: key.clone(),
                    given: token,
                })
            }
            None => Err(ServiceError::NotHeld { key: key.clone() }),
            Some(h) => match super::requests::not_holder(&key, token, h, by) {
                Some(e) => Err(e),
                None => Ok(()),
            },
        };
        if let Err(e) = check {
            return self.refuse(req, e);
        }
        let op = Op::extra(Extra::Proclaim {
            req,
            key: key.clone(),
        });
        self.propose(Why::Proclaim, vec![Cmd::Proclaim { key, token, value }], op);
    }

    /// A holding of session `id` ended by itself (released, expired).
    pub(super) fn leave_session(&mut self, id: u64, key: &str, token: u64) {
        if let Some(s) = self.sessions.get_mut(&id) {
            s.holdings.remove(&(key.to_string(), token));
        }
    }

    /// The ms left of session `id` at `now`, on this leader's clock.
    pub(super) fn session_left(&self, id: u64, now: Duration) -> Option<u64> {
        let s = self.sessions.get(&id)?;
        u64::try_from(s.deadline.saturating_sub(now).as_millis()).ok()
    }

    /// A new leader's sessions: every deadline restarts with a full TTL
    /// plus the longest election the gap could have lasted, unless a
    /// rebuild in the same term `kept` it.
    pub(super) fn load_sessions(
        &mut self,
        sessions: Vec<LoadedSession>,
        kept: Option<&super::leadership::Kept>,
    ) {
        for s in sessions {
            let deadline = kept.and_then(|k| k.session(s.id)).unwrap_or_else(|| {
                self.now + crate::lease::session(s.ttl_ms) + self.election_timeout
            });
            self.session_timers.insert((deadline, s.id));
            self.sessions.insert(
                s.id,
                Sess {
                    ttl_ms: s.ttl_ms,
                    deadline,
                    principal: s.principal,
                    holdings: BTreeSet::new(),
                    ending: false,
                },
            );
        }
    }
}

impl Extra {
    fn reply(&self) -> Option<ReqId> {
        match self {
            Extra::Open { req, .. } | Extra::Proclaim { req, .. } => Some(*req),
            Extra::End { reply, .. } => *reply,
        }
    }

    /// The key it is about (none for a session's).
    fn key(&self) -> &str {
        match self {
            Extra::Proclaim { key, .. } => key,
            Extra::Open { .. } | Extra::End { .. } => "",
        }
    }
}
