//! What the table does when a proposal completes (answer the callers, hand
//! the key to the next waiter, release a grant whose caller left, or
//! rebuild the mirror when the outcome contradicts it) and when a lease or
//! a wait runs out.

use super::{Answer, Cmd, Op, Outcome, Reject, Role, Table, Why};
use crate::service::error::{Acquired, ServiceError};

fn reloaded() -> ServiceError {
    ServiceError::Unavailable("lock table reloaded".into())
}

impl Table {
    /// Proposal `id` completed (committed with outcomes, or failed).
    pub(super) fn completed(&mut self, id: u64, result: Result<Vec<Outcome>, ServiceError>) {
        let Some(op) = self.ops.remove(&id) else {
            tracing::warn!(node = self.id, id, "completion of an unknown proposal");
            return;
        };
        match self.role {
            Role::Leader { term } => self.done(term, op, result),
            _ => {
                // From before the mirror was dropped: answer the callers
                // with what was committed, and leave the mirror alone.
                self.answer_stale(op, result);
                self.start_loading();
            }
        }
    }

    fn done(&mut self, term: u64, op: Op, result: Result<Vec<Outcome>, ServiceError>) {
        let Op { key, end, grants } = op;
        let outcomes = match result {
            Ok(o) => o,
            Err(e) => {
                // The entry may or may not have committed: rebuild the
                // mirror from the applied state rather than guess.
                tracing::warn!(node = self.id, key, error = %e, "proposal failed; reloading the lock table");
                self.fail_op(end.and_then(|e| e.reply), &grants, e.clone());
                self.reload(term, e);
                return;
            }
        };
        let mut outcomes = outcomes.into_iter();
        if let Some(end) = end {
            match (end.expired, outcomes.next()) {
                (true, Some(Outcome::Expired { .. })) => self.counters.expires += 1,
                (false, Some(Outcome::Released { .. })) => {
                    if end.phantom {
                        self.counters.phantom_releases += 1;
                    } else {
                        self.counters.releases += 1;
                    }
                    if let Some(r) = end.reply {
                        self.reply(r, Ok(Answer::Released));
                    }
                }
                (_, other) => {
                    // The mirror said held and the table said otherwise:
                    // answer what the table says, and rebuild the mirror.
                    tracing::error!(
                        node = self.id,
                        key,
                        token = end.token,
                        ?other,
                        "unexpected outcome ending a holding; reloading the lock table"
                    );
                    if let Some(r) = end.reply {
                        self.reply(r, Err(ServiceError::NotHeld { key: key.clone() }));
                    }
                    for w in grants.iter().filter(|w| !w.gone) {
                        self.reply(w.req, Err(reloaded()));
                    }
                    self.reload(term, reloaded());
                    return;
                }
            }
            if !grants.is_empty() {
                self.counters.handoffs += 1;
            }
        }
        // A grant whose caller left is released once the entry is handled.
        // (0.1 has one grant per entry; with several, the first such grant
        // is released at once and any other ends with its lease.)
        let mut phantom = None;
        let mut grants = grants.into_iter();
        while let Some(waiter) = grants.next() {
            match outcomes.next() {
                Some(Outcome::Granted { token, lease_ms }) => {
                    self.counters.grants += 1;
                    let deadline = self.now + crate::service::lease::granted(lease_ms);
                    self.leases.insert((deadline, key.clone(), token));
                    let k = self.keys.entry(key.clone()).or_default();
                    k.holders
                        .insert(token, super::Holder { lease_ms, deadline });
                    k.busy = false;
                    if waiter.gone {
                        // The caller is gone: no phantom lock until the
                        // lease ends.
                        tracing::info!(
                            node = self.id,
                            key,
                            token,
                            "caller left before its grant; releasing"
                        );
                        phantom = phantom.or(Some(token));
                        continue;
                    }
                    let answer = Acquired {
                        token,
                        lease_ms: waiter.lease_ms,
                    };
                    self.reply(waiter.req, Ok(Answer::Granted(answer)));
                }
                Some(Outcome::Rejected(
                    Reject::Policy(_) | Reject::Quota(_) | Reject::Unsupported(_),
                )) => {
                    // The key is free, yet the module said no: its policy.
                    // Nothing changed, so the mirror is still right.
                    if !waiter.gone {
                        self.reply(waiter.req, Err(ServiceError::Refused { key: key.clone() }));
                    }
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
                    if !waiter.gone {
                        self.reply(waiter.req, Err(ServiceError::Held { key: key.clone() }));
                    }
                    for w in grants.filter(|w| !w.gone) {
                        self.reply(w.req, Err(reloaded()));
                    }
                    self.reload(term, reloaded());
                    return;
                }
            }
        }
        if let Some(k) = self.keys.get_mut(&key) {
            k.busy = false;
        }
        match phantom {
            Some(token) => self.free(key, token, None, false, true),
            None => self.settle(key),
        }
    }

    /// Answer the callers of a proposal made before the mirror was dropped
    /// (leadership changed, or a reload): what committed is a fact, so a
    /// grant is handed out and a release confirmed; the mirror is rebuilt
    /// from the table, which holds the same effects.
    fn answer_stale(&mut self, op: Op, result: Result<Vec<Outcome>, ServiceError>) {
        let Op { key, end, grants } = op;
        let outcomes = match result {
            Ok(o) => o,
            Err(e) => return self.fail_op(end.and_then(|e| e.reply), &grants, e),
        };
        let gone = || {
            ServiceError::Unavailable(
                "leadership changed while the request was being committed".into(),
            )
        };
        let mut outcomes = outcomes.into_iter();
        if let Some(end) = end {
            let answer = match outcomes.next() {
                Some(Outcome::Released { .. } | Outcome::Expired { .. }) => Ok(Answer::Released),
                Some(Outcome::NotFound) => Err(ServiceError::NotHeld { key: key.clone() }),
                _ => Err(gone()),
            };
            if let Some(r) = end.reply {
                self.reply(r, answer);
            }
        }
        for w in grants {
            let answer = match outcomes.next() {
                Some(Outcome::Granted { token, .. }) => {
                    self.counters.grants += 1;
                    Ok(Answer::Granted(Acquired {
                        token,
                        lease_ms: w.lease_ms,
                    }))
                }
                _ => Err(gone()),
            };
            if w.gone {
                // Nobody to tell: the lease ends it, on the rebuilt mirror.
                tracing::info!(
                    node = self.id,
                    key,
                    "caller left before a grant from before a reload"
                );
            } else {
                self.reply(w.req, answer);
            }
        }
    }

    fn fail_op(&mut self, reply: Option<u64>, grants: &[super::Waiter], e: ServiceError) {
        if let Some(r) = reply {
            self.reply(r, Err(e.clone()));
        }
        for w in grants.iter().filter(|w| !w.gone) {
            self.reply(w.req, Err(e.clone()));
        }
    }

    /// After a key went idle: start the next waiter, or forget the key.
    pub(super) fn settle(&mut self, key: String) {
        let Some(k) = self.keys.get(&key) else {
            return;
        };
        if k.busy || !k.holders.is_empty() {
            return;
        }
        match self.pop_live_waiter(&key) {
            Some(w) => {
                if let Some(k) = self.keys.get_mut(&key) {
                    k.busy = true;
                }
                let commands = vec![Cmd::Grant {
                    key: key.clone(),
                    lease_ms: w.lease_ms,
                }];
                let op = Op {
                    key,
                    end: None,
                    grants: vec![w],
                };
                self.propose(Why::Grant, commands, op);
            }
            None => {
                self.keys.remove(&key);
            }
        }
    }

    /// Leases whose deadline passed get an `Expire`; waiters whose wait ran
    /// out are refused (after read-index).
    pub(super) fn fire_timers(&mut self) {
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
        while let Some((at, key, req)) = self.waits.first().cloned() {
            if at > now {
                break;
            }
            self.waits.pop_first();
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
