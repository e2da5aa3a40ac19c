//! The commands: what each does to a [`LockState`] and what it answers.
//!
//! # Grant, in the order the checks are made
//!
//! 1. `limit` 0 → `unsupported`.
//! 2. **Repeat**: a non-empty request id whose `(principal, owner,
//!    request-id)` names a live holding of the key → `granted` with that
//!    holding's token and lease, `repeat` set; nothing changes. This comes
//!    before every other check, so a retry is never refused by a policy set
//!    after the original grant, and never `busy` behind itself.
//! 3. Policy: a reserved prefix, or `limit` above a `max-holders` →
//!    `policy`.
//! 4. The key's holders: another mode → `busy`; the same mode with another
//!    limit → `unsupported` (every holder of a key agrees on its limit);
//!    `limit` holders already → `busy`.
//! 5. Quota: a matching rule's `max-held` reached → `quota`.
//! 6. No token left (`next_token` = `u64::MAX`) → `unsupported`.
//! 7. Granted: the next token; the lease shortened to the strictest
//!    `max-lease-ms`.
//!
//! In exclusive mode with limit 1, without policy and request ids, this is
//! exactly the seed's `Grant` (granted when free, refused — `busy` — when
//! held, tokens from the same counter); release by the holder's token and
//! expire are exactly its `Release` and `Expire`. The differential test in
//! `tests/sm/world02_differential.rs` checks it.
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
//! outcome (a busy key stays busy until a holding is removed).
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
use crate::state::{Holding, LockState, RequestKey};
use crate::types::{Command, Grant, Outcome, PrefixPolicy, Reason};

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
                    if matches!(o, Outcome::Released { .. }) {
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
                Command::SetPolicy(rules) => self.set_policy(rules),
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
        }
    }

    /// `grant`: the checks in the order of the module docs.
    pub fn grant(&mut self, g: Grant) -> Outcome {
        let Grant {
            key,
            holder,
            request_id,
            mode,
            limit,
            lease_ms,
        } = g;
        if limit == 0 {
            return reject(Reason::Unsupported("limit must be at least 1".into()));
        }
        let request = RequestKey { holder, request_id };
        // One descent of the key tree for every check below.
        let held = self.keys.get(KeyRef::new(&key));
        if let Some(k) = held {
            if !request.request_id.is_empty() {
                if let Some((&token, h)) = k
                    .requests
                    .get(&request)
                    .and_then(|t| k.holdings.get_key_value(t))
                {
                    return Outcome::Granted {
                        token,
                        lease_ms: h.lease_ms,
                        repeat: true,
                    };
                }
            }
        }
        if let Err(r) = self.policy.check_grant(&key, limit) {
            return reject(r);
        }
        if let Some(k) = held {
            if k.mode != mode {
                return reject(Reason::Busy);
            }
            if k.limit != limit {
                return reject(Reason::Unsupported(format!(
                    "limit {limit} differs from limit {} of the holders of {key:?}",
                    k.limit
                )));
            }
            // The policy check above bounds `limit`, and with it the
            // holders, by every max-holders.
            if k.holdings.len() >= usize::try_from(limit).unwrap_or(usize::MAX) {
                return reject(Reason::Busy);
            }
        }
        if let Err(r) = self.policy.check_quota(&key) {
            return reject(r);
        }
        if self.next_token == u64::MAX {
            return reject(Reason::Unsupported(
                "fencing tokens are exhausted".to_string(),
            ));
        }
        let token = self.next_token;
        self.next_token += 1;
        let lease_ms = self
            .policy
            .lease_cap(&key)
            .map_or(lease_ms, |cap| cap.min(lease_ms));
        let holding = Holding {
            lease_ms,
            holder: Some(request.holder),
            request_id: request.request_id,
        };
        self.insert_holding(key, mode, limit, token, holding);
        Outcome::Granted {
            token,
            lease_ms,
            repeat: false,
        }
    }

    /// `release`: remove the holding `(key, token)`.
    pub fn release(&mut self, key: &str, token: u64) -> Outcome {
        match self.remove_holding(key, token) {
            Some(freed) => Outcome::Released { freed },
            None => Outcome::NotFound,
        }
    }

    /// `expire`: remove the holding `(key, token)` if it still exists.
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

    /// `set-policy`: replace the policy data, or refuse an invalid one and
    /// change nothing.
    pub fn set_policy(&mut self, rules: Vec<PrefixPolicy>) -> Outcome {
        match Policy::from_rules(rules) {
            Ok(policy) => {
                self.policy = policy;
                self.recount_policy();
                Outcome::PolicySet
            }
            Err(e) => reject(Reason::Unsupported(format!("invalid policy: {e}"))),
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

fn reject(reason: Reason) -> Outcome {
    Outcome::Rejected(reason)
}
