//! Callers' requests in the table: acquire (propose or queue), release
//! (its proposal, with the head waiters' grants in the same group, and a
//! grant whose caller left: `free`), extend a lease.

use std::time::Duration;

use super::{Cmd, Op, ReqId, Request, Role, Spec, Table, Waiter, Why};
use crate::error::ServiceError;

impl Table {
    /// A caller's request: refused on a follower, queued while the table
    /// loads, handled on a leader.
    pub(super) fn request(&mut self, q: Request) {
        match &mut self.role {
            Role::Follower(_) => {
                let err = self.not_leader();
                self.reply(q.req(), Err(err));
            }
            Role::Starting { queued, .. } if queued.len() >= self.limits.total => {
                let err = ServiceError::Unavailable(format!(
                    "node {} is loading its lock table with {} requests queued, the most it queues (--max-waiters); try again",
                    self.id,
                    queued.len()
                ));
                self.reply(q.req(), Err(err));
            }
            Role::Starting { queued, .. } => queued.push(q),
            Role::Leader { .. } => match q {
                Request::Acquire {
                    req,
                    key,
                    spec,
                    wait,
                } => self.acquire(req, key, spec, wait),
                Request::Release {
                    req,
                    key,
                    token,
                    by,
                } => self.release(req, key, token, by),
                Request::Extend {
                    req,
                    key,
                    token,
                    from,
                    by,
                } => {
                    let answer = self.extend(&key, token, from, by.as_deref());
                    self.reply(req, answer.map(super::Answer::Extended));
                }
                Request::OpenSession { req, spec } => self.open_session(req, spec),
                Request::CloseSession { req, id, by } => self.close_session(req, id, by.as_deref()),
                Request::KeepSession { req, id, from, by } => {
                    let answer = self.keep_session(id, from, by.as_deref());
                    match answer {
                        Ok(ttl) => self.reply(req, Ok(super::Answer::Extended(ttl))),
                        Err(e) => self.refuse(req, e),
                    }
                }
                Request::Proclaim {
                    req,
                    key,
                    token,
                    value,
                    by,
                } => self.proclaim(req, key, token, value, by.as_deref()),
            },
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

    fn acquire(&mut self, req: ReqId, key: String, spec: Spec, wait: Duration) {
        if spec.session != 0 {
            if let Err(e) = self.session_check(spec.session, &spec.principal) {
                return self.refuse(req, e);
            }
        }
        let once = wait.is_zero();
        let mut waiter = Waiter {
            req,
            spec,
            until: self.now + wait,
            gone: false,
            once,
        };
        let k = self.keys.entry(key.clone()).or_default();
        waiter.spec.resolve(&k.holders);
        // A retry, or a reentrant holder entering again, never waits
        // behind others (nor behind itself).
        let retry = (!waiter.spec.request_id.is_empty()
            && k.holders.iter().any(|(_, h)| waiter.spec.repeats(&h.ident)))
            || k.holders.iter().any(|(_, h)| waiter.spec.reenters(h));
        let first = k.inflight == 0 && k.waiters.is_empty();
        if retry || (first && k.holders.room(&waiter.spec, 0)) {
            k.inflight += 1;
            let commands = vec![Cmd::Grant {
                key: key.clone(),
                spec: waiter.spec.clone(),
            }];
            self.propose(
                Why::Grant,
                commands,
                Op {
                    key,
                    end: None,
                    grants: vec![waiter],
                    extra: None,
                },
            );
        } else if once && (first || !k.waiters.is_empty()) {
            // Certainly busy now, or others wait first.
            if k.idle() {
                self.keys.remove(&key);
            }
            self.refuse(req, ServiceError::Held { key });
        } else if let Some(reason) = over(self.limits, k.waiters.len(), self.counters.waiting) {
            // Not a claim about the lock table: no read-index needed.
            if k.idle() {
                self.keys.remove(&key);
            }
            self.reply(req, Err(ServiceError::TooManyWaiters { key, reason }));
        } else {
            // A waiter, or one try once the proposal in flight is done.
            if !once {
                self.waits.insert(waiter.until, key, req);
            }
            k.waiters.push_back(waiter);
            self.counters.waiting += 1;
        }
    }

    fn release(&mut self, req: ReqId, key: String, token: u64, by: Option<String>) {
        // The test-only faults: a release refused without cause, and one
        // answered as done that nothing commits.
        #[cfg(feature = "faults")]
        if lockd_core::faults::refuse_release_now() {
            return self.refuse(req, ServiceError::NotHeld { key });
        }
        #[cfg(feature = "faults")]
        if lockd_core::faults::get().phantom_release {
            return self.reply(req, Ok(super::Answer::Released));
        }
        if self.behind_expiry(req, &key, token) {
            return;
        }
        let holders = self.keys.get(&key).map(|k| &k.holders);
        match holders {
            None => self.refuse(req, ServiceError::NotHeld { key }),
            Some(h) if h.is_empty() => self.refuse(req, ServiceError::NotHeld { key }),
            Some(h) => match h.get(&token) {
                None => self.refuse(req, ServiceError::WrongToken { key, given: token }),
                Some(h) => match not_holder(&key, token, h, by.as_deref()) {
                    Some(e) => self.refuse(req, e),
                    None => self.free(key, token, Some(req), false, false),
                },
            },
        }
    }

    /// Whether a release of `(key, token)` waits for that holding's
    /// `Expire`, in flight: the lease ended by this leader's clock, but
    /// until the `Expire` commits the replicated table still holds it, and
    /// a leader that stops now and comes back restarts it. So the release
    /// is answered "not held" only once the `Expire` has committed (or
    /// with the proposal's error if it fails). One release per `Expire`
    /// waits; another is answered at once, as before.
    fn behind_expiry(&mut self, req: ReqId, key: &str, token: u64) -> bool {
        // The test-only fault that answers refusals from this leader's own
        // view answers this one from it too, at once.
        #[cfg(feature = "faults")]
        if lockd_core::faults::get().skip_read_barrier {
            return false;
        }
        let end = self.ops.values_mut().find_map(|(_, op)| {
            op.end
                .as_mut()
                .filter(|e| op.key == key && e.expired && e.token == token && e.reply.is_none())
        });
        match end {
            Some(e) => {
                e.reply = Some(req);
                true
            }
            None => false,
        }
    }

    fn extend(
        &mut self,
        key: &str,
        token: u64,
        from: Duration,
        by: Option<&str>,
    ) -> Result<u64, ServiceError> {
        let Some(k) = self.keys.get_mut(key).filter(|k| !k.holders.is_empty()) else {
            return Err(ServiceError::NotHeld { key: key.into() });
        };
        let Some(h) = k.holders.get_mut(&token) else {
            return Err(ServiceError::WrongToken {
                key: key.into(),
                given: token,
            });
        };
        if let Some(e) = not_holder(key, token, h, by) {
            return Err(e);
        }
        if h.session != 0 {
            // A holding in a session lives on the session's lease.
            let id = h.session;
            return self.keep_session(id, from, by);
        }
        let deadline = from + crate::lease::lease(h.lease_ms);
        // The test-only fault: a keepalive answered as kept that extends
        // nothing (the simulation's renewer must catch it).
        #[cfg(feature = "faults")]
        let deadline = match lockd_core::faults::get().inert_keepalive {
            true => h.deadline,
            false => deadline,
        };
        if deadline > h.deadline {
            self.leases.remove(&(h.deadline, key.to_string(), token));
            h.deadline = deadline;
            self.leases.insert((deadline, key.to_string(), token));
        }
        self.counters.keepalives += 1;
        Ok(h.lease_ms)
    }

    pub(super) fn propose(&mut self, why: Why, commands: Vec<Cmd>, op: Op) {
        let id = self.next_proposal;
        self.next_proposal += 1;
        self.ops.insert(id, (self.role.term(), op));
        self.emit(super::Action::Propose { id, why, commands });
    }
}

/// Why one more waiter would break a bound, if it would: `on_key` wait for
/// the key already, `waiting` in all.
fn over(limits: super::WaitLimits, on_key: usize, waiting: u64) -> Option<String> {
    if on_key >= limits.per_key {
        Some(format!(
            "{on_key} callers wait for it already, the most --max-waiters-per-key allows"
        ))
    } else if waiting >= limits.total as u64 {
        Some(format!(
            "{waiting} callers wait for locks on this node already, the most --max-waiters allows"
        ))
    } else {
        None
    }
}

/// Why `by` may not release or renew the holding `h` of `(key, token)`:
/// another principal holds it. A holding whose holder was not recorded
/// is anyone's who may lock the key (checked before the table).
pub(super) fn not_holder(
    key: &str,
    token: u64,
    h: &super::Holder,
    by: Option<&str>,
) -> Option<ServiceError> {
    let by = by?;
    (!h.principal.is_empty() && h.principal != by).then(|| ServiceError::NotHolder {
        key: key.to_string(),
        token,
        holder: h.principal.clone(),
        caller: by.to_string(),
    })
}
