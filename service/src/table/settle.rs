//! What the table does when a proposal completes (answer the callers, hand
//! the key to the next waiter, release a grant whose caller left, or
//! rebuild the mirror when the outcome contradicts it) and when a lease or
//! a wait runs out.

use super::{Answer, Cmd, Op, Outcome, Reject, Role, Table, Why};
use crate::error::{Acquired, ServiceError};

fn reloaded() -> ServiceError {
    ServiceError::Unavailable("lock table reloaded".into())
}

/// The caller's error for a command of `key` the module refused (a
/// grant's, not `busy`; a session's, with no key).
pub(super) fn refusal(key: &str, reject: Reject) -> ServiceError {
    let key = key.to_string();
    match reject {
        Reject::Busy => ServiceError::Held { key },
        Reject::Policy(reason) => ServiceError::Refused { key, reason },
        Reject::Quota(reason) if lockd_core::command::is_capacity(&reason) => {
            ServiceError::Capacity { key, reason }
        }
        Reject::Quota(reason) => ServiceError::Quota { key, reason },
        Reject::Unsupported(reason) if lockd_core::command::is_module_failed(&reason) => {
            ServiceError::ModuleFailed { key, reason }
        }
        Reject::Unsupported(reason) => ServiceError::Unsupported { key, reason },
        Reject::NoSession(id) => ServiceError::NoSession { id },
    }
}

impl Table {
    /// Proposal `id` completed (committed with outcomes, or failed).
    pub(super) fn completed(&mut self, id: u64, result: Result<Vec<Outcome>, ServiceError>) {
        let Some((term, mut op)) = self.ops.remove(&id) else {
            tracing::warn!(node = self.id, id, "completion of an unknown proposal");
            return;
        };
        if let Some(extra) = op.extra.take() {
            let leading = matches!(self.role, Role::Leader { .. });
            self.extra_done(extra, result, leading);
            if !leading {
                self.start_loading();
            }
            return;
        }
        match self.role {
            // Made while this node led an earlier term: the load of this
            // term's mirror came after it was decided (see
            // `start_loading`), so its completion is stale.
            Role::Leader { term: now } if term == now => self.done(now, op, result),
            _ => {
                // From before the mirror was dropped: answer the callers
                // with what was committed, and leave the mirror alone.
                self.answer_stale(op, result);
                self.start_loading();
            }
        }
    }

    fn done(&mut self, term: u64, op: Op, result: Result<Vec<Outcome>, ServiceError>) {
        let Op {
            key, end, grants, ..
        } = op;
        let outcomes = match result {
            Ok(o) => o,
            Err(e) => {
                // The entry may or may not have committed: rebuild the
                // mirror from the applied state rather than guess.
                if let Some(k) = self.keys.get_mut(&key) {
                    k.inflight = k.inflight.saturating_sub(1);
                }
                tracing::warn!(node = self.id, key, error = %e, "proposal failed; reloading the lock table");
                self.fail_op(end.and_then(|e| e.reply), &grants, e.clone());
                self.reload(term, e);
                return;
            }
        };
        let mut outcomes = outcomes.into_iter();
        let mut handoff = end.is_some();
        if let Some(end) = end {
            match (end.expired, outcomes.next()) {
                (true, Some(Outcome::Expired { .. })) => {
                    self.counters.expires += 1;
                    if let Some(r) = end.reply {
                        self.reply(r, Err(ServiceError::NotHeld { key: key.clone() }));
                    }
                }
                (false, Some(Outcome::Released { count, .. })) => {
                    if end.phantom {
                        self.counters.phantom_releases += 1;
                    } else {
                        self.counters.releases += 1;
                    }
                    // A reentrant holding released once stays in the
                    // mirror (free() left it) with the count the module
                    // answered; at 0 it goes.
                    self.recount(&key, end.token, count);
                    let answer = match count {
                        0 => Answer::Released,
                        n => Answer::StillHeld(n),
                    };
                    if let Some(r) = end.reply {
                        self.reply(r, Ok(answer));
                    }
                }
                (false, Some(Outcome::NotFound))
                    if end.session != 0 && !self.sessions.contains_key(&end.session) =>
                {
                    // The holding's session ended (expired or closed) and
                    // that end committed before this release: it took the
                    // holding with it, and the mirror already agrees. A
                    // rebuild here would restart every lease (seed 312868).
                    if let Some(r) = end.reply {
                        self.reply(r, Err(ServiceError::NotHeld { key: key.clone() }));
                    }
                }
                (_, other) => {
                    // The mirror said held and the table said otherwise:
                    // answer what the table says, and rebuild the mirror.
                    // A release the module failed on (or that a module out
                    // of service refused) released nothing: its caller is
                    // told so, not that the key was not held.
                    let answer = match &other {
                        Some(Outcome::Rejected(r @ Reject::Unsupported(why)))
                            if lockd_core::command::is_module_failed(why) =>
                        {
                            refusal(&key, r.clone())
                        }
                        _ => ServiceError::NotHeld { key: key.clone() },
                    };
                    tracing::error!(
                        node = self.id,
                        key,
                        token = end.token,
                        ?other,
                        "unexpected outcome ending a holding; reloading the lock table"
                    );
                    if let Some(r) = end.reply {
                        self.reply(r, Err(answer));
                    }
                    for w in grants.iter().filter(|w| !w.gone) {
                        self.reply(w.req, Err(reloaded()));
                    }
                    self.reload(term, reloaded());
                    return;
                }
            }
        }
        // Grants whose callers left are released once the group is handled.
        let mut phantoms = Vec::new();
        let mut blocked = Vec::new();
        let mut grants = grants.into_iter();
        while let Some(waiter) = grants.next() {
            match outcomes.next() {
                Some(Outcome::Granted {
                    token,
                    lease_ms,
                    repeat,
                    count,
                }) => {
                    if !repeat {
                        self.counters.grants += 1;
                    }
                    if std::mem::take(&mut handoff) {
                        self.counters.handoffs += 1;
                    }
                    self.hold(&key, token, lease_ms, count, &waiter.spec);
                    if waiter.gone {
                        // The caller is gone: no phantom lock until the
                        // lease ends.
                        tracing::info!(
                            node = self.id,
                            key,
                            token,
                            "caller left before its grant; releasing"
                        );
                        phantoms.push(token);
                        continue;
                    }
                    let answer = Acquired {
                        token,
                        lease_ms,
                        count,
                    };
                    self.reply(waiter.req, Ok(Answer::Granted(answer)));
                }
                Some(Outcome::Rejected(Reject::Busy)) => {
                    // From here on the module answers `busy`: back to the
                    // head of the queue, in order, until the key is freed.
                    blocked.push(waiter);
                    blocked.extend(grants.by_ref());
                }
                Some(Outcome::Rejected(reject)) => {
                    // The module's policy, quota, or a request it cannot
                    // serve. Nothing changed.
                    if !waiter.gone {
                        self.reply(waiter.req, Err(refusal(&key, reject)));
                    }
                }
                other => {
                    tracing::error!(
                        node = self.id,
                        key,
                        ?other,
                        "a grant answered with no grant outcome; reloading the lock table"
                    );
                    if !waiter.gone {
                        self.reply(waiter.req, Err(reloaded()));
                    }
                    for w in grants.filter(|w| !w.gone) {
                        self.reply(w.req, Err(reloaded()));
                    }
                    self.reload(term, reloaded());
                    return;
                }
            }
        }
        let wait_for_free = !blocked.is_empty();
        self.requeue(&key, blocked);
        if let Some(k) = self.keys.get_mut(&key) {
            k.inflight = k.inflight.saturating_sub(1);
        }
        for token in phantoms {
            self.free(key.clone(), token, None, false, true);
        }
        self.settle(key, wait_for_free);
    }

    /// The module answered a reentrant release of `(key, token)` with
    /// `count` left: keep the holding with it, or at 0 drop it.
    fn recount(&mut self, key: &str, token: u64, count: u32) {
        let Some(k) = self.keys.get_mut(key) else {
            return;
        };
        if count > 0 {
            if let Some(h) = k.holders.get_mut(&token) {
                h.count = count;
            }
            return;
        }
        if let Some(h) = k.holders.remove(&token) {
            self.leases.remove(&(h.deadline, key.to_string(), token));
            if h.session != 0 {
                self.leave_session(h.session, key, token);
            }
        }
    }

    /// Record the holding `(key, token)` granted to `spec`, with its lease
    /// timer (none for a holding in a session: the session's is its).
    fn hold(&mut self, key: &str, token: u64, lease_ms: u64, count: u32, spec: &super::Spec) {
        if let Some(old) = self
            .keys
            .get_mut(key)
            .and_then(|k| k.holders.get_mut(&token))
        {
            if count > 1 || old.session != 0 {
                // Entered again, or a retry of a session's grant: the same
                // holding, on the same lease.
                old.count = count;
                return;
            }
        }
        if spec.session != 0 && !self.join_session(spec.session, key, token) {
            // The session's end committed already, and removed it.
            return;
        }
        let deadline = match spec.session {
            0 => self.now + crate::lease::granted(lease_ms),
            id => self.sessions.get(&id).map_or(self.now, |s| s.deadline),
        };
        let k = self.keys.entry(key.to_string()).or_default();
        if let Some(old) = k.holders.get(&token) {
            // A repeated grant: the same holding, its lease counted anew.
            self.leases.remove(&(old.deadline, key.to_string(), token));
        }
        let ident = (!spec.request_id.is_empty()).then(|| super::Ident {
            principal: spec.principal.clone(),
            owner: spec.owner.clone(),
            request_id: spec.request_id.clone(),
        });
        k.holders.insert(
            token,
            super::Holder {
                lease_ms,
                deadline,
                mode: spec.mode,
                limit: spec.limit,
                ident,
                principal: spec.principal.clone(),
                owner: spec.owner.clone(),
                session: spec.session,
                count,
            },
        );
        if spec.session == 0 {
            self.leases.insert((deadline, key.to_string(), token));
        }
    }

    /// Answer the callers of `reply` and of `grants` with `e`.
    pub(super) fn fail_op(
        &mut self,
        reply: Option<u64>,
        grants: &[super::Waiter],
        e: ServiceError,
    ) {
        if let Some(r) = reply {
            self.reply(r, Err(e.clone()));
        }
        for w in grants.iter().filter(|w| !w.gone) {
            self.reply(w.req, Err(e.clone()));
        }
    }

    /// After a proposal for `key` completed: with nothing else in flight,
    /// propose the head waiters the contract leaves room for (unless the
    /// module just answered `busy`: then the next freeing retries them),
    /// or forget the key once nothing is left.
    pub(super) fn settle(&mut self, key: String, wait_for_free: bool) {
        let Some(k) = self.keys.get(&key) else {
            return;
        };
        if k.inflight > 0 {
            return;
        }
        let grants = if wait_for_free {
            Vec::new()
        } else {
            self.pick_head(&key, None);
            self.next_batch(&key)
        };
        if grants.is_empty() {
            if self.keys.get(&key).is_some_and(|k| k.idle()) {
                self.keys.remove(&key);
            }
            return;
        }
        if let Some(k) = self.keys.get_mut(&key) {
            k.inflight += 1;
        }
        let commands = grants
            .iter()
            .map(|w| Cmd::Grant {
                key: key.clone(),
                spec: w.spec.clone(),
            })
            .collect();
        let op = Op {
            key,
            end: None,
            grants,
            extra: None,
        };
        self.propose(Why::Grant, commands, op);
    }

    /// Leases whose deadline passed get an `Expire`; waiters whose wait ran
    /// out are refused (after read-index).
    pub(super) fn fire_timers(&mut self) {
        self.fire_session_timers();
        let now = self.now;
        while let Some((at, key, token)) = self.leases.first().cloned() {
            if at > now {
                break;
            }
            self.leases.pop_first();
            let current = self
                .keys
                .get(&key)
                .and_then(|k| k.holders.get(&token))
                .is_some_and(|h| h.deadline == at);
            if current {
                tracing::debug!(node = self.id, key, token, "lease ended; proposing expire");
                // Put the entry back so free() finds and removes it.
                self.leases.insert((at, key.clone(), token));
                self.free(key, token, None, true, false);
            }
        }
        while let Some((key, req)) = self.waits.pop_due(now) {
            let Some(k) = self.keys.get_mut(&key) else {
                continue;
            };
            if let Some(pos) = k.waiters.iter().position(|w| w.req == req) {
                k.waiters.remove(pos);
                self.counters.waiting = self.counters.waiting.saturating_sub(1);
                self.refuse(req, ServiceError::Held { key: key.clone() });
            }
            if self.keys.get(&key).is_some_and(|k| k.idle()) {
                self.keys.remove(&key);
            }
        }
    }
}
