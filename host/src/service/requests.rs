//! The lock actor's requests: acquire (grant or queue), release (with the
//! next waiter's grant in the same entry), extend a lease, and refusals
//! that wait for a read-index.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::actor::{pop_live_waiter, refuse, AcquireReply, Actor, Msg, Op, Waiter};
use super::error::ServiceError;
use super::lease;
use crate::command::Command;

impl Actor {
    pub(super) fn acquire(
        &mut self,
        key: String,
        lease_ms: u64,
        wait: Duration,
        reply: AcquireReply,
    ) {
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

    pub(super) fn release(
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
    pub(super) fn free(
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

    pub(super) fn extend(
        &mut self,
        key: &str,
        token: u64,
        from: Instant,
    ) -> Result<u64, ServiceError> {
        let Some(h) = self.keys.get_mut(key).and_then(|k| k.holder.as_mut()) else {
            return Err(ServiceError::NotHeld { key: key.into() });
        };
        if h.token != token {
            return Err(ServiceError::WrongToken {
                key: key.into(),
                given: token,
            });
        }
        let deadline = from + lease::lease(h.lease_ms);
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
    pub(super) fn refuse<T: Send + 'static>(
        &self,
        reply: oneshot::Sender<Result<T, ServiceError>>,
        err: ServiceError,
    ) {
        refuse(&self.raft, self.id, reply, err);
    }

    pub(super) fn propose(&mut self, key: String, commands: Vec<Command>, op: Op) {
        self.in_flight += 1;
        #[cfg(feature = "fault-stale-done")]
        let gate = self.fault_gate(&key, &commands, &op);
        let (proposer, tx) = (self.proposer.clone(), self.tx.clone());
        tokio::spawn(async move {
            let result = proposer.propose(commands).await;
            #[cfg(feature = "fault-stale-done")]
            if let Some(gate) = gate {
                let _ = tx.send(Msg::FaultReload);
                super::fault::hold(gate).await;
            }
            let _ = tx.send(Msg::Done { key, op, result });
        });
    }

    /// Test-only fault (see `super::fault`): a client's release gets a gate
    /// for its `Done`; a grant opens the gate of its key.
    #[cfg(feature = "fault-stale-done")]
    fn fault_gate(
        &self,
        key: &str,
        commands: &[Command],
        op: &Op,
    ) -> Option<std::sync::Arc<tokio::sync::Notify>> {
        if !super::fault::active() {
            return None;
        }
        if matches!(commands.first(), Some(Command::Grant(_))) {
            super::fault::open(key);
        }
        let client_release = matches!(
            op,
            Op::Free {
                reply: Some(_),
                expired: false,
                next: None,
                ..
            }
        );
        client_release.then(|| super::fault::gate(key))
    }
}
