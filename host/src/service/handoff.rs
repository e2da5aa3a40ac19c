//! What the lock actor does when a proposal commits (answer the caller,
//! hand the key to the next waiter, release a grant whose caller left) and
//! when a lease or a wait runs out.

use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::actor::{pop_live_waiter, refuse, Actor, Holder, Op, Role};
use super::error::{Acquired, ServiceError};
use super::lease;
use crate::command::{Command, Outcome};

impl Actor {
    pub(super) fn done(&mut self, key: String, op: Op, result: Result<Vec<Outcome>, ServiceError>) {
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
                        // The mirror said held and the table said otherwise:
                        // answer what the table says, and rebuild the mirror.
                        tracing::error!(
                            node = self.id,
                            key,
                            ?other,
                            "unexpected outcome ending a holding; reloading the lock table"
                        );
                        if let Some(r) = reply {
                            let _ = r.send(Err(ServiceError::NotHeld { key: key.clone() }));
                        }
                        if let Some(w) = next {
                            let _ = w
                                .reply
                                .send(Err(ServiceError::Unavailable("lock table reloaded".into())));
                        }
                        self.reload(
                            term,
                            ServiceError::Unavailable("lock table reloaded".into()),
                        );
                        return;
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
                    let deadline = Instant::now() + lease::granted(waiter.lease_ms);
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
                Some(Outcome::GrantRejected) if self.sm.get(&key).ok() == Some(None) => {
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
                    self.reload(
                        term,
                        ServiceError::Unavailable("lock table reloaded".into()),
                    );
                    return;
                }
            }
        } else if let Some(k) = self.keys.get_mut(&key) {
            k.busy = false;
        }
        self.settle(key);
    }

    /// Answer the callers of a proposal made before the mirror was dropped
    /// (leadership changed, or a reload): what committed is a fact, so a
    /// grant is handed out and a release confirmed; the mirror is rebuilt
    /// from the table, which holds the same effects.
    pub(super) fn answer_stale(
        &mut self,
        key: String,
        op: Op,
        result: Result<Vec<Outcome>, ServiceError>,
    ) {
        let outcomes = match result {
            Ok(o) => o,
            Err(e) => return fail_op(op, e),
        };
        let gone = || {
            ServiceError::Unavailable(
                "leadership changed while the request was being committed".into(),
            )
        };
        let mut outcomes = outcomes.into_iter();
        let waiter = match op {
            Op::Grant { waiter } => Some(waiter),
            Op::Free { reply, next, .. } => {
                let answer = match outcomes.next() {
                    Some(Outcome::Released | Outcome::Expired(_)) => Ok(()),
                    Some(Outcome::NotFound) => Err(ServiceError::NotHeld { key: key.clone() }),
                    _ => Err(gone()),
                };
                if let Some(r) = reply {
                    let _ = r.send(answer);
                }
                next
            }
        };
        if let Some(w) = waiter {
            let answer = match outcomes.next() {
                Some(Outcome::Granted(token)) => {
                    self.stats.grants.fetch_add(1, Ordering::Relaxed);
                    Ok(Acquired {
                        token,
                        lease_ms: w.lease_ms,
                    })
                }
                _ => Err(gone()),
            };
            if w.reply.send(answer).is_err() {
                // Nobody to tell: the lease ends it, on the rebuilt mirror.
                tracing::info!(
                    node = self.id,
                    key,
                    "caller left before a grant from before a reload"
                );
            }
        }
    }

    /// After a key went idle: start the next waiter, or forget the key.
    pub(super) fn settle(&mut self, key: String) {
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

    pub(super) fn fire_timers(&mut self) {
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

pub(super) fn fail_op(op: Op, e: ServiceError) {
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
