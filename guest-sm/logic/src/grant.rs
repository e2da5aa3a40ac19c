//! `grant`: the checks, in the order they are made, and the two ways a
//! grant ends without a new holding (a repeat, a reentry).
//!
//! # In the order the checks are made
//!
//! 1. `limit` 0 → `unsupported`.
//! 2. **Repeat**: a non-empty request id whose `(principal, owner,
//!    request-id)` names a live holding of the key → `granted` with that
//!    holding's token, lease and count, `repeat` set; nothing changes. This
//!    comes before every other check, so a retry is never refused by a
//!    policy set after the original grant, and never `busy` behind itself.
//! 3. A value above [`crate::types::MAX_VALUE_BYTES`] → `unsupported`.
//! 4. **Reentry** (0.3, `reentrant` set): an anonymous request (no owner,
//!    no session) → `unsupported`, since the anonymous holder is everyone.
//!    If the key has a holding with the request's principal, owner and
//!    session: in the same mode its count goes up by one (the same token,
//!    its own lease, `repeat` false; `unsupported` past `u32::MAX`) and its
//!    request id becomes the grant's (unless the grant has none), so a
//!    retry of the latest acquire is a repeat; in the other mode →
//!    `unsupported`, never `busy` behind itself. Like a repeat, a reentry
//!    adds no holding, so the policy and quota checks below do not apply.
//! 5. **Session** (0.3, `session` not 0): the session must live
//!    (`rejected(no-session)`), be the grant's principal's, have room for a
//!    holding (its max-holdings), and no prefix may cap leases below its
//!    TTL (a holding in a session lives as long as the session, so it must
//!    not outlive a lease cap) → `policy` otherwise. The lease is the TTL.
//! 6. Policy: a reserved prefix, or `limit` above a `max-holders` →
//!    `policy`.
//! 7. The key's holders: another mode → `busy`; the same mode with another
//!    limit → `unsupported` (every holder of a key agrees on its limit);
//!    `limit` holders already → `busy`.
//! 8. Quota: a matching rule's `max-held` reached → `quota`.
//! 9. No token left (`next_token` = `u64::MAX`) → `unsupported`.
//! 10. Granted: the next token, count 1, the grant's value; the lease
//!     shortened to the strictest `max-lease-ms`.
//!
//! Checks 3 to 5 need fields only 0.3 has; with their defaults (no value,
//! not reentrant, no session) they pass untouched, and this is 0.2's grant
//! exactly. In exclusive mode with limit 1, without policy and request ids,
//! it is the seed's `Grant` (granted when free, refused — `busy` — when
//! held, tokens from the same counter). The differential test in
//! `tests/sm/world02_differential.rs` checks it.

use lock_key::KeyRef;

use crate::apply::check_value;
use crate::holdings::{Holding, KeyLocks, RequestKey};
use crate::state::LockState;
use crate::types::{Grant, Holder, Mode, Outcome, Reason};

fn reject(reason: Reason) -> Outcome {
    Outcome::Rejected(reason)
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Exclusive => "exclusive",
        Mode::Shared => "shared",
    }
}

/// What step 4 found on the key.
enum Reentry {
    /// No holding of this holder: a grant like any other.
    None,
    /// Enter the holding with this token again.
    Enter(u64),
    Refused(Reason),
}

/// Step 4 for a reentrant grant by `holder` in `session` and `mode` of
/// `key`, which `held` holds (if anyone does).
fn reentry(
    key: &str,
    held: Option<&KeyLocks>,
    holder: &Holder,
    session: u64,
    mode: Mode,
) -> Reentry {
    if holder.owner.is_empty() && session == 0 {
        return Reentry::Refused(Reason::Unsupported(
            "a reentrant grant needs an owner or a session: the anonymous holder is everyone"
                .into(),
        ));
    }
    let Some(k) = held else {
        return Reentry::None;
    };
    match k.held_by(holder, session) {
        Some(_) if k.mode != mode => Reentry::Refused(Reason::Unsupported(format!(
            "this holder holds {key:?} in {} mode; it cannot enter it in {} mode",
            mode_name(k.mode),
            mode_name(mode)
        ))),
        Some(token) => Reentry::Enter(token),
        None => Reentry::None,
    }
}

impl LockState {
    /// `grant`: the checks in the order of the module docs.
    pub fn grant(&mut self, g: Grant) -> Outcome {
        let Grant {
            key,
            holder,
            request_id,
            mode,
            limit,
            lease_ms,
            session,
            reentrant,
            value,
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
                        count: h.count(),
                    };
                }
            }
        }
        if let Err(r) = check_value(&value) {
            return reject(r);
        }
        if reentrant {
            match reentry(&key, held, &request.holder, session, mode) {
                Reentry::None => {}
                Reentry::Refused(r) => return reject(r),
                Reentry::Enter(token) => return self.enter_again(&key, token, request.request_id),
            }
        }
        let mut lease_ms = lease_ms;
        if session != 0 {
            match self.check_session(&key, session, &request.holder.principal) {
                Ok(ttl_ms) => lease_ms = ttl_ms,
                Err(r) => return reject(r),
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
        if session == 0 {
            lease_ms = self
                .policy
                .lease_cap(&key)
                .map_or(lease_ms, |cap| cap.min(lease_ms));
        }
        let holding = Holding::new(lease_ms, Some(request.holder), request.request_id)
            .with_0_3(session, 1, value);
        self.insert_holding(key, mode, limit, token, holding);
        Outcome::Granted {
            token,
            lease_ms,
            repeat: false,
            count: 1,
        }
    }

    /// Step 4: one more count of the holding `token`, which the checks
    /// found held by the grant's holder in the grant's mode.
    fn enter_again(&mut self, key: &str, token: u64, request_id: String) -> Outcome {
        let entered = self.update_holding(key, token, |h| {
            let count = h.count().checked_add(1)?;
            h.set_count(count);
            if !request_id.is_empty() {
                h.request_id = request_id;
            }
            Some((count, h.lease_ms))
        });
        match entered.flatten() {
            Some((count, lease_ms)) => Outcome::Granted {
                token,
                lease_ms,
                repeat: false,
                count,
            },
            None => reject(Reason::Unsupported(format!(
                "the holding {token} of {key:?} is entered {} times already",
                u32::MAX
            ))),
        }
    }

    /// Step 5: the session a grant names may take a holding of `key`; its
    /// TTL, the lease the holding gets.
    fn check_session(&self, key: &str, id: u64, principal: &str) -> Result<u64, Reason> {
        let s = self.sessions.get(id).ok_or(Reason::NoSession(id))?;
        if s.holder.principal != principal {
            return Err(Reason::Policy(format!(
                "session {id} is another principal's"
            )));
        }
        if !s.has_room() {
            return Err(Reason::Policy(format!(
                "session {id} holds {} locks, its maximum",
                s.max_holdings
            )));
        }
        if let Some(cap) = self.policy.lease_cap(key).filter(|&cap| cap < s.ttl_ms) {
            return Err(Reason::Policy(format!(
                "key {key:?} caps leases at {cap} ms, below the TTL {} ms of session {id}",
                s.ttl_ms
            )));
        }
        Ok(s.ttl_ms)
    }
}
