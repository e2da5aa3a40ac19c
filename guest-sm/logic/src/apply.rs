//! The commands: what each does to a [`LockState`] and what it answers,
//! and the entry they come in (the busy barrier). The grant's checks are in
//! [`crate::grant`], the sessions' commands in [`crate::session_ops`].
//!
//! # Release and expire
//!
//! Both remove the holding `(key, token)` if it exists, so a late or
//! duplicated one changes nothing. `freed` is true when the removal can let
//! a waiter in: the key is now free, or it was full (as many holders as its
//! limit) and now has room. Otherwise (a reader leaves a key that had room)
//! no waiter can be granted that could not be before, and the host need not
//! retry. In exclusive mode with limit 1 every removal frees the key.
//!
//! A release of a holding entered more than once (0.3) takes one off its
//! count and removes nothing: `freed` false, the count left in the answer.
//! An expiry is the lease's end, so it removes the holding whatever its
//! count.
//!
//! # Proclaim
//!
//! Replaces the value of the holding `(key, token)` (`not-found` when it
//! does not exist); the token is the capability, as for a release. A value
//! above [`MAX_VALUE_BYTES`] is `unsupported` and changes nothing.
//!
//! # Fair waiting: the busy barrier
//!
//! The module has no queue: the host keeps FIFO waiters per key and, when a
//! key is freed, proposes `[release, head waiter's grant, next waiter's
//! grant, …]` as one entry. For that to be fair the module applies one rule
//! across the commands of an entry: once a grant for a key is `busy`, later
//! grants for that key in the same entry are `busy` untried, until a command
//! of the entry removes a holding of that key. So a reader queued behind a
//! waiting writer is never granted past it (no writer starvation), provided
//! the host (a) queues a new request behind existing waiters of its key
//! instead of proposing it, and (b) keeps waiters answered `busy` in their
//! places. In exclusive mode with limit 1 the barrier never changes an
//! outcome (a busy key stays busy until a holding is removed). In 0.3 a
//! session's end lifts it for every key it removed a holding of, as that
//! many releases would; a release that only lowers a count removes no
//! holding and so lifts nothing.
//!
//! Request ids are remembered exactly as long as the holding they were
//! granted with: after a release or expiry the same request id is a new
//! request. That bounds the memory to the live holdings; a retry that
//! arrives after its lock has ended is indistinguishable from a new acquire,
//! which is what it then gets.

use std::collections::BTreeSet;
use std::ops::Bound;

use lock_key::KeyRef;

use crate::policy::Policy;
use crate::state::LockState;
use crate::types::{Command, Outcome, PrefixPolicy, Proclaim, Reason, MAX_VALUE_BYTES};

impl LockState {
    /// Apply a committed range: one list of outcomes per entry.
    pub fn apply_entries(&mut self, entries: Vec<Vec<Command>>) -> Vec<Vec<Outcome>> {
        entries.into_iter().map(|e| self.apply_entry(e)).collect()
    }

    /// Apply the commands of one log entry, in order, with the busy
    /// barrier.
    pub fn apply_entry(&mut self, entry: Vec<Command>) -> Vec<Outcome> {
        if entry.len() == 1 {
            return entry.into_iter().map(|c| self.apply(c)).collect();
        }
        let mut waiting: BTreeSet<String> = BTreeSet::new();
        let mut out = Vec::with_capacity(entry.len());
        for command in entry {
            let outcome = match command {
                Command::Grant(g) if waiting.contains(&g.key) => Outcome::Rejected(Reason::Busy),
                Command::Grant(g) => {
                    let key = g.key.clone();
                    let o = self.grant(g);
                    if o == Outcome::Rejected(Reason::Busy) {
                        waiting.insert(key);
                    }
                    o
                }
                Command::Release(r) => {
                    let o = self.release(&r.key, r.token);
                    if matches!(o, Outcome::Released { count: 0, .. }) {
                        waiting.remove(&r.key);
                    }
                    o
                }
                Command::Expire(r) => {
                    let o = self.expire(&r.key, r.token);
                    if matches!(o, Outcome::Expired { existed: true, .. }) {
                        waiting.remove(&r.key);
                    }
                    o
                }
                Command::CloseSession(id) | Command::ExpireSession(id) => {
                    let o = self.end_session(id);
                    if let Outcome::SessionEnded { released, .. } = &o {
                        for r in released {
                            waiting.remove(&r.key);
                        }
                    }
                    o
                }
                other => self.apply(other),
            };
            out.push(outcome);
        }
        out
    }

    /// Apply one command (an entry of its own).
    pub fn apply(&mut self, command: Command) -> Outcome {
        match command {
            Command::Grant(g) => self.grant(g),
            Command::Release(r) => self.release(&r.key, r.token),
            Command::Expire(r) => self.expire(&r.key, r.token),
            Command::SetPolicy(rules) => self.set_policy(rules),
            Command::OpenSession(o) => self.open_session(o),
            Command::CloseSession(id) | Command::ExpireSession(id) => self.end_session(id),
            Command::Proclaim(p) => self.proclaim(p),
        }
    }

    /// `release`: one count of the holding `(key, token)`; the holding goes
    /// at 0.
    pub fn release(&mut self, key: &str, token: u64) -> Outcome {
        // Only a holding that uses 0.3 can have a count above 1, so a state
        // with none (every 0.2 state) goes straight to the removal, at 0.2's
        // cost.
        if self.extended > 0 {
            if let Some(count) = self.count_down(key, token) {
                return Outcome::Released {
                    freed: false,
                    count,
                };
            }
        }
        match self.remove_holding(key, token) {
            Some(freed) => Outcome::Released { freed, count: 0 },
            None => Outcome::NotFound,
        }
    }

    /// One count off the holding `(key, token)` if it has more than one:
    /// the count left, or `None` (no such holding, or a count of 1).
    fn count_down(&mut self, key: &str, token: u64) -> Option<u32> {
        let count = self
            .keys
            .get(KeyRef::new(key))?
            .holdings
            .get(&token)?
            .count();
        if count <= 1 {
            return None;
        }
        self.update_holding(key, token, |h| h.set_count(count - 1))?;
        Some(count - 1)
    }

    /// `expire`: remove the holding `(key, token)` if it still exists,
    /// every count of it.
    pub fn expire(&mut self, key: &str, token: u64) -> Outcome {
        match self.remove_holding(key, token) {
            Some(freed) => Outcome::Expired {
                existed: true,
                freed,
            },
            None => Outcome::Expired {
                existed: false,
                freed: false,
            },
        }
    }

    /// `proclaim`: replace the value of the holding `(key, token)`.
    pub fn proclaim(&mut self, p: Proclaim) -> Outcome {
        let Proclaim { key, token, value } = p;
        let held = self
            .keys
            .get(KeyRef::new(&key))
            .is_some_and(|k| k.holdings.get(&token).is_some());
        if !held {
            return Outcome::NotFound;
        }
        if let Err(r) = check_value(&value) {
            return Outcome::Rejected(r);
        }
        match self.update_holding(&key, token, |h| h.set_value(value)) {
            Some(()) => Outcome::Proclaimed,
            None => Outcome::NotFound,
        }
    }

    /// `set-policy`: replace the policy data, or refuse an invalid one and
    /// change nothing.
    pub fn set_policy(&mut self, rules: Vec<PrefixPolicy>) -> Outcome {
        match Policy::from_rules(rules) {
            Ok(policy) => {
                self.policy = policy;
                self.recount_policy();
                Outcome::PolicySet
            }
            Err(e) => Outcome::Rejected(Reason::Unsupported(format!("invalid policy: {e}"))),
        }
    }

    /// Count the holdings under every policy prefix from scratch.
    pub(crate) fn recount_policy(&mut self) {
        let keys = &self.keys;
        self.policy.recount(|prefix| {
            keys.range::<KeyRef, _>((Bound::Included(KeyRef::new(prefix)), Bound::Unbounded))
                .take_while(|(key, _)| key.0.starts_with(prefix))
                .map(|(_, k)| k.holdings.len() as u64)
                .sum()
        });
    }
}

/// A holding's value must fit [`MAX_VALUE_BYTES`].
pub(crate) fn check_value(value: &str) -> Result<(), Reason> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(Reason::Unsupported(format!(
            "a value of {} bytes; at most {MAX_VALUE_BYTES} are allowed",
            value.len()
        )));
    }
    Ok(())
}
