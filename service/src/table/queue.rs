//! The waiters' queues in the table: the batch of waiters behind a
//! release, waiters put back when their grants came back busy, and
//! callers that leave while they wait.

use super::{ReqId, Role, Table, Waiter, MAX_BEHIND};
use crate::error::ServiceError;

impl Table {
    /// The head waiters of `key` to propose now (the key's holders as the
    /// mirror has them, minus any holding ended in the same group): all of
    /// the head's mode and limit, as many as the contract leaves room for,
    /// at most [`MAX_BEHIND`]. Waiters whose wait ran out (timer not fired
    /// yet) are refused as their timer would; a one-try waiter the
    /// contract leaves no room for is refused `Held`.
    pub(super) fn next_batch(&mut self, key: &str) -> Vec<Waiter> {
        let mut out: Vec<Waiter> = Vec::new();
        // The test-only fault: waiters are left waiting.
        #[cfg(feature = "faults")]
        if lockd_core::faults::get().strand_waiters {
            return out;
        }
        while out.len() < MAX_BEHIND {
            let Some(k) = self.keys.get_mut(key) else {
                break;
            };
            let Some(w) = k.waiters.front_mut() else {
                break;
            };
            w.spec.resolve(&k.holders);
            let expired = !w.once && w.until <= self.now;
            let same = out
                .first()
                .is_none_or(|h| h.spec.mode == w.spec.mode && h.spec.limit == w.spec.limit);
            let fits = same && k.holders.room(&w.spec, out.len());
            // Taken: a waiter to refuse (its wait ran out, or a one-try
            // waiter at the head with no room) or one that fits.
            let take = expired || fits || (w.once && out.is_empty());
            if !take {
                break;
            }
            let Some(w) = k.waiters.pop_front() else {
                break;
            };
            self.counters.waiting = self.counters.waiting.saturating_sub(1);
            self.waits.take(w.req);
            if expired || !fits {
                self.refuse(w.req, ServiceError::Held { key: key.into() });
            } else {
                out.push(w);
            }
        }
        out
    }

    /// Put waiters whose grants came back `busy` back at the head of
    /// `key`'s queue, in their order; a one-try waiter gets `Held`.
    pub(super) fn requeue(&mut self, key: &str, waiters: Vec<Waiter>) {
        for w in waiters.into_iter().rev() {
            if w.gone {
                continue;
            }
            if w.once {
                self.reply(w.req, Err(ServiceError::Held { key: key.into() }));
                continue;
            }
            self.waits.insert(w.until, key.to_string(), w.req);
            self.keys
                .entry(key.to_string())
                .or_default()
                .waiters
                .push_front(w);
            self.counters.waiting += 1;
        }
    }

    /// The caller of `req` left: forget it if it waits (in a queue or for
    /// the load); a grant in flight for it is released once it commits.
    pub(super) fn caller_gone(&mut self, req: ReqId) {
        if let Role::Starting { queued, .. } = &mut self.role {
            queued.retain(|q| q.req() != req);
        }
        if let Some((_, key)) = self.waits.take(req) {
            if let Some(k) = self.keys.get_mut(&key) {
                k.waiters.retain(|w| w.req != req);
                self.counters.waiting = self.counters.waiting.saturating_sub(1);
                if k.idle() {
                    self.keys.remove(&key);
                }
            }
            return;
        }
        for (_, op) in self.ops.values_mut() {
            for w in op.grants.iter_mut().filter(|w| w.req == req) {
                w.gone = true;
            }
        }
    }
}
