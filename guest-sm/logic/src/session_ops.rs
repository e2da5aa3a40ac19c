//! The session commands of world 0.3: `open-session`, and
//! `close-session` / `expire-session`, which are one operation (the client's
//! end and the leader's, when the TTL passed without a keepalive) and
//! answer alike.
//!
//! # Open, in the order the checks are made
//!
//! 1. `ttl-ms` 0 → `unsupported` (a session that is over at once).
//! 2. **Repeat**: a non-empty request id whose `(principal, owner,
//!    request-id)` names a live session → that session (`repeat` set, its
//!    own TTL); nothing changes. As for grants, before the limits, so a
//!    retry is never refused by them.
//! 3. The principal has `max-sessions` live sessions → `policy`.
//! 4. No id left (the counter at `u64::MAX`) → `unsupported`.
//! 5. Opened: the next id, never used before.
//!
//! # End
//!
//! Removes the session and then each of its holdings (whatever its count)
//! in key order, then token, through the same primitive as a release, so
//! `freed` follows the release rule key by key: a key is listed once when
//! one of the removals can let a waiter in (it was full before the first,
//! or is free after the last). A session that does not exist (never
//! opened, ended already: ids are never reused) changes nothing: `existed`
//! false and empty lists, so a late or duplicated expiry is harmless.

use crate::holdings::RequestKey;
use crate::sessions::Session;
use crate::state::LockState;
use crate::types::{LockRef, OpenSession, Outcome, Reason};

impl LockState {
    /// `open-session`: the checks in the order of the module docs.
    pub fn open_session(&mut self, o: OpenSession) -> Outcome {
        let OpenSession {
            holder,
            request_id,
            ttl_ms,
            max_sessions,
            max_holdings,
        } = o;
        if ttl_ms == 0 {
            return Outcome::Rejected(Reason::Unsupported(
                "a session's TTL must be at least 1 ms".into(),
            ));
        }
        let request = RequestKey { holder, request_id };
        if !request.request_id.is_empty() {
            if let Some((id, s)) = self.sessions.by_request(&request) {
                return Outcome::SessionOpened {
                    id,
                    ttl_ms: s.ttl_ms,
                    repeat: true,
                };
            }
        }
        let open = self.sessions.of_principal(&request.holder.principal);
        if open >= max_sessions {
            return Outcome::Rejected(Reason::Policy(format!(
                "principal {:?} has {open} live sessions, its maximum {max_sessions}",
                request.holder.principal
            )));
        }
        let Some(id) = self.sessions.take_id() else {
            return Outcome::Rejected(Reason::Unsupported("session ids are exhausted".into()));
        };
        let session = Session::new(request.holder, request.request_id, ttl_ms, max_holdings);
        self.sessions.insert(id, session);
        Outcome::SessionOpened {
            id,
            ttl_ms,
            repeat: false,
        }
    }

    /// `close-session` and `expire-session`: remove the session `id` and
    /// every holding it has.
    pub fn end_session(&mut self, id: u64) -> Outcome {
        let Some(session) = self.sessions.remove(id) else {
            return Outcome::SessionEnded {
                existed: false,
                released: Vec::new(),
                freed: Vec::new(),
            };
        };
        let mut released = Vec::with_capacity(session.holdings.len());
        let mut freed: Vec<String> = Vec::new();
        // In key order, then token: a key's holdings are adjacent, so a key
        // freed twice is the last one listed.
        for (key, token) in session.holdings {
            let Some(was_freed) = self.remove_holding(&key.0, token) else {
                continue;
            };
            if was_freed && freed.last() != Some(&key.0) {
                freed.push(key.0.clone());
            }
            released.push(LockRef { key: key.0, token });
        }
        Outcome::SessionEnded {
            existed: true,
            released,
            freed,
        }
    }
}
