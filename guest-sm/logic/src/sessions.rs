//! The sessions of world 0.3 as the state keeps them: each with its holder,
//! request id, TTL and max-holdings, and the table's derived data (the
//! holdings of each session, live sessions per principal, the index of
//! their request ids, the sum of their digests), kept in step by
//! [`Sessions::insert`] and [`Sessions::remove`] like the holdings' by the
//! state's primitives. The commands that open and end sessions are in
//! [`crate::session_ops`].
//!
//! Ids come from `next`, part of the state and of format 4, starting at
//! [`FIRST_SESSION`]: never reused, so a late `expire-session` cannot end a
//! newer session. Time is not here: TTLs and keepalives are the host's.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use lock_key::{Accumulator, Key};

use crate::hash::{self, SessionFields, FIRST_SESSION};
use crate::holdings::RequestKey;
use crate::types::Holder;

/// One live session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Session {
    pub holder: Holder,
    /// Empty when it was opened without one.
    pub request_id: String,
    pub ttl_ms: u64,
    pub max_holdings: u32,
    /// Derived: its holdings, in key order then token, so that ending it
    /// costs its holdings, not the table.
    pub holdings: BTreeSet<(Key, u64)>,
    digest: [u8; 32],
}

impl Session {
    pub fn new(holder: Holder, request_id: String, ttl_ms: u64, max_holdings: u32) -> Session {
        Session {
            holder,
            request_id,
            ttl_ms,
            max_holdings,
            holdings: BTreeSet::new(),
            digest: [0; 32],
        }
    }

    fn request_key(&self) -> Option<RequestKey> {
        (!self.request_id.is_empty()).then(|| RequestKey {
            holder: self.holder.clone(),
            request_id: self.request_id.clone(),
        })
    }

    /// What its digest covers.
    pub fn fields(&self, id: u64) -> SessionFields<'_> {
        SessionFields {
            id,
            holder: &self.holder,
            request_id: &self.request_id,
            ttl_ms: self.ttl_ms,
            max_holdings: self.max_holdings,
        }
    }

    /// Whether it may take one more holding.
    pub fn has_room(&self) -> bool {
        u32::try_from(self.holdings.len()).is_ok_and(|n| n < self.max_holdings)
    }
}

/// The live sessions and the id counter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Sessions {
    live: BTreeMap<u64, Session>,
    next: u64,
    /// Derived: live sessions per principal (no entry at 0).
    per_principal: BTreeMap<String, u32>,
    /// Derived: the id of each live session that has a request id.
    requests: BTreeMap<RequestKey, u64>,
    /// Derived: the sum of the live sessions' digests.
    acc: Accumulator,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            live: BTreeMap::new(),
            next: FIRST_SESSION,
            per_principal: BTreeMap::new(),
            requests: BTreeMap::new(),
            acc: Accumulator::default(),
        }
    }
}

impl Sessions {
    /// The id the next session receives.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// Set the counter (a snapshot's, which has checked it is above every
    /// id).
    pub fn set_next(&mut self, next: u64) {
        self.next = next;
    }

    /// Take the next id, or `None` when they are exhausted (`u64::MAX` is
    /// never issued, as with tokens).
    pub fn take_id(&mut self) -> Option<u64> {
        if self.next == u64::MAX {
            return None;
        }
        let id = self.next;
        self.next += 1;
        Some(id)
    }

    pub fn len(&self) -> usize {
        self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    pub fn acc(&self) -> &Accumulator {
        &self.acc
    }

    pub fn get(&self, id: u64) -> Option<&Session> {
        self.live.get(&id)
    }

    /// The live session opened with this holder and request id.
    pub fn by_request(&self, rk: &RequestKey) -> Option<(u64, &Session)> {
        let id = *self.requests.get(rk)?;
        self.live.get(&id).map(|s| (id, s))
    }

    /// Live sessions of `principal`.
    pub fn of_principal(&self, principal: &str) -> u32 {
        self.per_principal.get(principal).copied().unwrap_or(0)
    }

    /// Every session in id order (an exact-size iterator: a snapshot
    /// writes its length first).
    pub fn iter(&self) -> std::collections::btree_map::Iter<'_, u64, Session> {
        self.live.iter()
    }

    /// Sessions in id order after `after`.
    pub fn after(&self, after: Option<u64>) -> impl Iterator<Item = (&u64, &Session)> {
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        self.live.range((start, Bound::Unbounded))
    }

    /// Add a session. The caller has checked that `id` is new and below
    /// `next`, and that its request id is not live twice.
    pub fn insert(&mut self, id: u64, mut session: Session) {
        session.digest = hash::session_digest(&session.fields(id));
        self.acc.add(&session.digest);
        let n = self
            .per_principal
            .entry(session.holder.principal.clone())
            .or_insert(0);
        *n = n.saturating_add(1);
        if let Some(rk) = session.request_key() {
            self.requests.insert(rk, id);
        }
        self.live.insert(id, session);
    }

    /// Remove a session and its derived data; its holdings are the
    /// caller's to remove (the state's primitive does, key by key).
    pub fn remove(&mut self, id: u64) -> Option<Session> {
        let session = self.live.remove(&id)?;
        self.acc.sub(&session.digest);
        let principal = &session.holder.principal;
        if let Some(n) = self.per_principal.get_mut(principal) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_principal.remove(principal);
            }
        }
        if let Some(rk) = session.request_key() {
            self.requests.remove(&rk);
        }
        Some(session)
    }

    /// A holding of session `id` came; `false` if the session does not
    /// exist.
    pub fn add_holding(&mut self, id: u64, key: &str, token: u64) -> bool {
        match self.live.get_mut(&id) {
            Some(s) => {
                s.holdings.insert((Key(key.to_string()), token));
                true
            }
            None => false,
        }
    }

    /// A holding of session `id` went (a no-op once the session is gone).
    pub fn remove_holding(&mut self, id: u64, key: &str, token: u64) {
        if let Some(s) = self.live.get_mut(&id) {
            s.holdings.remove(&(Key(key.to_string()), token));
        }
    }

    /// The sessions' digests summed from scratch, for
    /// [`crate::LockState::recomputed_hash`].
    pub fn recomputed_acc(&self) -> Accumulator {
        let mut acc = Accumulator::default();
        for (&id, s) in &self.live {
            acc.add(&hash::session_digest(&s.fields(id)));
        }
        acc
    }

    /// Every live session and its derived data, checked from the outside
    /// (tests).
    #[cfg(test)]
    pub fn check(&self) -> Result<(), String> {
        let mut principals: BTreeMap<String, u32> = BTreeMap::new();
        let mut requests = BTreeMap::new();
        for (&id, s) in &self.live {
            if id >= self.next {
                return Err(format!("session {id} is not below next {}", self.next));
            }
            *principals.entry(s.holder.principal.clone()).or_insert(0) += 1;
            if let Some(rk) = s.request_key() {
                requests.insert(rk, id);
            }
            if s.holdings.len() > s.max_holdings as usize {
                return Err(format!("session {id} holds above its max-holdings"));
            }
        }
        if principals != self.per_principal {
            return Err("per-principal counts drifted".into());
        }
        if requests != self.requests {
            return Err("session request index drifted".into());
        }
        Ok(())
    }
}
