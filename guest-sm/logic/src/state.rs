//! [`LockState`]: the replicated state, the primitives every change of a
//! holding goes through ([`LockState::insert_holding`],
//! [`LockState::remove_holding`], [`LockState::update_holding`]), which
//! keep the derived data (counts, request index, quota counts, session
//! holding sets, the hash accumulator) in step, and the read-only queries.
//! The commands are in [`crate::apply`], [`crate::grant`] and
//! [`crate::session_ops`], the snapshot formats in [`crate::snapshot`],
//! [`crate::format4`] and [`crate::legacy`].

use std::collections::BTreeMap;
use std::ops::Bound;

use lock_key::{Key, KeyRef};

use crate::hash::{self, Accumulator, StateParts};
use crate::holdings::{Holding, Holdings, KeyLocks, Stored};
use crate::info::{Counters, HolderInfo, KeyHolders, SessionInfo};
use crate::policy::Policy;
use crate::sessions::Sessions;
use crate::types::{LockRef, Mode};

/// The first token a fresh state issues; 0 is never a token.
pub const FIRST_TOKEN: u64 = 1;

/// The replicated state of the lock logic (worlds 0.2 and 0.3).
///
/// Tokens come from `next_token`, part of the state and of every snapshot,
/// so they strictly increase across all grants and are never reused, also
/// across snapshots, restarts and upgrades that migrate the counter; session
/// ids likewise from the sessions' counter. All collections are ordered
/// (`BTreeMap`): nothing depends on a hash seed. Keys are [`Key`]s: `str`'s
/// order, compared a word at a time (a B-tree lookup compares a dozen keys
/// that share long prefixes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockState {
    pub(crate) keys: BTreeMap<Key, KeyLocks>,
    pub(crate) next_token: u64,
    pub(crate) policy: Policy,
    pub(crate) sessions: Sessions,
    /// Derived: holdings over all keys.
    pub(crate) holders: u64,
    /// Derived: holdings that use a 0.3 field (session, count, value), so
    /// that choosing the snapshot format costs nothing.
    pub(crate) extended: u64,
    /// Derived: the sum of the holdings' digests (see [`crate::hash`]).
    pub(crate) acc: Accumulator,
}

impl Default for LockState {
    fn default() -> Self {
        Self::new()
    }
}

impl LockState {
    pub fn new() -> Self {
        LockState {
            keys: BTreeMap::new(),
            next_token: FIRST_TOKEN,
            policy: Policy::default(),
            sessions: Sessions::default(),
            holders: 0,
            extended: 0,
            acc: Accumulator::default(),
        }
    }

    /// Add a holding. The caller has checked that `token` is new, that the
    /// key (if held) has this `mode` and `limit` and room for one more,
    /// that a request id is not held twice, and that its session (if any)
    /// lives and has room.
    pub(crate) fn insert_holding(
        &mut self,
        key: String,
        mode: Mode,
        limit: u32,
        token: u64,
        holding: Holding,
    ) {
        let digest = hash::holding_digest(&holding.fields(&key, token, mode, limit));
        self.acc.add(&digest);
        self.policy.count(&key, 1);
        self.holders = self.holders.saturating_add(1);
        if holding.is_extended() {
            self.extended = self.extended.saturating_add(1);
        }
        if holding.session() != 0 {
            self.sessions.add_holding(holding.session(), &key, token);
        }
        let k = self.keys.entry(Key(key)).or_insert_with(|| KeyLocks {
            mode,
            limit,
            holdings: Holdings::default(),
            requests: BTreeMap::new(),
        });
        if let Some(rk) = holding.request_key() {
            k.requests.insert(rk, token);
        }
        k.holdings.insert(token, Stored { holding, digest });
    }

    /// Remove the holding `token` of `key`, whatever its count. `None` if
    /// there is none; otherwise `freed`: whether the removal can let a
    /// waiter in. That is when the key is now free (a waiter of the other
    /// mode, or of another limit, waits for exactly that), or when it was
    /// full and now has room (a waiter of the same mode and limit waits for
    /// exactly that). A key that had room before had no waiter this removal
    /// could help: only waiters queued behind one that must wait, and they
    /// stay queued.
    pub(crate) fn remove_holding(&mut self, key: &str, token: u64) -> Option<bool> {
        let k = self.keys.get_mut(KeyRef::new(key))?;
        let h = k.holdings.remove(&token)?;
        self.acc.sub(&h.digest);
        if let Some(rk) = h.request_key() {
            k.requests.remove(&rk);
        }
        if h.is_extended() {
            self.extended = self.extended.saturating_sub(1);
        }
        if h.session() != 0 {
            self.sessions.remove_holding(h.session(), key, token);
        }
        self.holders = self.holders.saturating_sub(1);
        self.policy.count(key, -1);
        let left = k.holdings.len();
        if left == 0 {
            self.keys.remove(KeyRef::new(key));
            return Some(true);
        }
        Some(usize::try_from(k.limit).is_ok_and(|limit| left + 1 == limit))
    }

    /// Change the holding `token` of `key` in place (its count, request id
    /// or value; never its session or holder), re-hashing it and moving its
    /// request id in the index. The caller has checked that a new request
    /// id is not held on the key. `None` if there is no such holding.
    pub(crate) fn update_holding<R>(
        &mut self,
        key: &str,
        token: u64,
        change: impl FnOnce(&mut Holding) -> R,
    ) -> Option<R> {
        let k = self.keys.get_mut(KeyRef::new(key))?;
        let (mode, limit) = (k.mode, k.limit);
        let stored = k.holdings.get_mut(&token)?;
        let before = (stored.request_key(), stored.is_extended());
        let r = change(&mut stored.holding);
        self.acc.sub(&stored.digest);
        stored.digest = hash::holding_digest(&stored.fields(key, token, mode, limit));
        self.acc.add(&stored.digest);
        let after = (stored.request_key(), stored.is_extended());
        if before.0 != after.0 {
            if let Some(rk) = before.0 {
                k.requests.remove(&rk);
            }
            if let Some(rk) = after.0 {
                k.requests.insert(rk, token);
            }
        }
        match (before.1, after.1) {
            (false, true) => self.extended = self.extended.saturating_add(1),
            (true, false) => self.extended = self.extended.saturating_sub(1),
            _ => {}
        }
        Some(r)
    }

    /// The holdings of `key` in token order (empty when free).
    pub fn holders(&self, key: &str) -> Vec<HolderInfo> {
        self.keys
            .get(KeyRef::new(key))
            .map(info)
            .unwrap_or_default()
    }

    /// Held keys that start with `prefix`, in key order, after `after`, at
    /// most `limit` keys.
    pub fn list_keys(&self, prefix: &str, after: Option<&str>, limit: u32) -> Vec<KeyHolders> {
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(KeyRef::new(a)),
            _ => Bound::Included(KeyRef::new(prefix)),
        };
        self.keys
            .range::<KeyRef, _>((start, Bound::Unbounded))
            .take_while(|(key, _)| key.0.starts_with(prefix))
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .map(|(key, k)| KeyHolders {
                key: key.0.clone(),
                holders: info(k),
            })
            .collect()
    }

    /// One session, if it lives.
    pub fn session(&self, id: u64) -> Option<SessionInfo> {
        self.sessions.get(id).map(|s| session_info(id, s))
    }

    /// Live sessions in id order, after `after`, at most `limit`.
    pub fn list_sessions(&self, after: Option<u64>, limit: u32) -> Vec<SessionInfo> {
        self.sessions
            .after(after)
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .map(|(&id, s)| session_info(id, s))
            .collect()
    }

    /// The policy data, rules in prefix order.
    pub fn policy(&self) -> Vec<crate::types::PrefixPolicy> {
        self.policy.rules()
    }

    pub fn counters(&self) -> Counters {
        Counters {
            keys: self.keys.len() as u64,
            holders: self.holders,
            next_token: self.next_token,
            policy_rules: self.policy.len() as u32,
            sessions: self.sessions.len() as u64,
            next_session: self.sessions.next(),
        }
    }

    /// Whether the state uses nothing of 0.3: no session was ever opened,
    /// every count is 1 and no holding has a value. Such a state is written
    /// in 0.2's format 3 and hashes as in 0.2.
    pub fn is_0_2(&self) -> bool {
        self.sessions.next() == hash::FIRST_SESSION && self.extended == 0
    }

    /// The state hash, from the incrementally kept parts: O(1).
    pub fn state_hash(&self) -> [u8; 32] {
        hash::state_hash(&StateParts {
            acc: &self.acc,
            holders: self.holders,
            next_token: self.next_token,
            policy: self.policy.digest(),
            sessions_acc: self.sessions.acc(),
            sessions: self.sessions.len() as u64,
            next_session: self.sessions.next(),
        })
    }

    /// The state hash computed from scratch over every holding and session;
    /// equal to [`LockState::state_hash`] (tests check it after every
    /// command).
    pub fn recomputed_hash(&self) -> [u8; 32] {
        let mut acc = Accumulator::default();
        let mut holders = 0u64;
        for (key, k) in &self.keys {
            for (&token, h) in k.holdings.iter() {
                acc.add(&hash::holding_digest(
                    &h.fields(&key.0, token, k.mode, k.limit),
                ));
                holders += 1;
            }
        }
        let policy = hash::policy_digest(self.policy.rules().iter());
        hash::state_hash(&StateParts {
            acc: &acc,
            holders,
            next_token: self.next_token,
            policy: &policy,
            sessions_acc: &self.sessions.recomputed_acc(),
            sessions: self.sessions.len() as u64,
            next_session: self.sessions.next(),
        })
    }
}

fn info(k: &KeyLocks) -> Vec<HolderInfo> {
    k.holdings
        .iter()
        .map(|(&token, h)| HolderInfo {
            token,
            lease_ms: h.lease_ms,
            mode: k.mode,
            limit: k.limit,
            holder: h.holder.clone(),
            request_id: h.request_id.clone(),
            session: h.session(),
            count: h.count(),
            value: h.value().to_string(),
        })
        .collect()
}

fn session_info(id: u64, s: &crate::sessions::Session) -> SessionInfo {
    SessionInfo {
        id,
        holder: s.holder.clone(),
        request_id: s.request_id.clone(),
        ttl_ms: s.ttl_ms,
        max_holdings: s.max_holdings,
        holdings: s
            .holdings
            .iter()
            .map(|(key, token)| LockRef {
                key: key.0.clone(),
                token: *token,
            })
            .collect(),
    }
}
