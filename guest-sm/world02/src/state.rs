//! [`LockState`]: the replicated state, the two primitives every change goes
//! through ([`LockState::insert_holding`], [`LockState::remove_holding`]),
//! which keep the derived data (counts, request index, quota counts, the
//! hash accumulator) in step, and the read-only queries. The commands are in
//! [`crate::apply`], the snapshot formats in [`crate::snapshot`] and
//! [`crate::legacy`].

use std::collections::BTreeMap;
use std::ops::Bound;

use lock_key::{Key, KeyRef};

use crate::hash::{self, Accumulator, HoldingFields};
use crate::policy::Policy;
use crate::types::{Counters, Features, Holder, HolderInfo, KeyHolders, Mode, PolicyKinds};

/// The first token a fresh state issues; 0 is never a token.
pub const FIRST_TOKEN: u64 = 1;

/// The identity a request id is remembered under.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct RequestKey {
    pub holder: Holder,
    pub request_id: String,
}

/// One holding of a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Holding {
    pub lease_ms: u64,
    /// `None`: carried over from a 0.1 state.
    pub holder: Option<Holder>,
    /// Empty when the grant had none.
    pub request_id: String,
}

impl Holding {
    /// The identity its request id is remembered under, if it has one.
    pub fn request_key(&self) -> Option<RequestKey> {
        match &self.holder {
            Some(holder) if !self.request_id.is_empty() => Some(RequestKey {
                holder: holder.clone(),
                request_id: self.request_id.clone(),
            }),
            _ => None,
        }
    }
}

/// A holding as the state keeps it: with its digest, so that removing it
/// subtracts the digest without hashing the holding again (in the wasm
/// build SHA-256 has no hardware help, and a grant/release cycle would
/// otherwise hash twice).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stored {
    holding: Holding,
    digest: [u8; 32],
}

impl std::ops::Deref for Stored {
    type Target = Holding;

    fn deref(&self) -> &Holding {
        &self.holding
    }
}

/// A key's holdings in token order. A vector, not a map: most keys have
/// one holding (a map's first node is a kilobyte), a grant's token is
/// above every other so it goes at the end, and a removal moves at most
/// the key's other holdings, never more than its limit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Holdings(Vec<(u64, Stored)>);

impl Holdings {
    fn find(&self, token: u64) -> Result<usize, usize> {
        self.0.binary_search_by_key(&token, |(t, _)| *t)
    }

    fn insert(&mut self, token: u64, stored: Stored) {
        match self.find(token) {
            Ok(i) => self.0[i].1 = stored,
            Err(i) => self.0.insert(i, (token, stored)),
        }
    }

    fn remove(&mut self, token: &u64) -> Option<Stored> {
        self.find(*token).ok().map(|i| self.0.remove(i).1)
    }

    pub fn get_key_value(&self, token: &u64) -> Option<(&u64, &Stored)> {
        self.find(*token).ok().map(|i| (&self.0[i].0, &self.0[i].1))
    }

    #[cfg(test)]
    pub fn get(&self, token: &u64) -> Option<&Stored> {
        self.get_key_value(token).map(|(_, s)| s)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&u64, &Stored)> {
        self.0.iter().map(|(t, s)| (t, s))
    }

    #[cfg(test)]
    pub fn keys(&self) -> impl Iterator<Item = &u64> {
        self.0.iter().map(|(t, _)| t)
    }

    #[cfg(test)]
    pub fn values(&self) -> impl Iterator<Item = &Stored> {
        self.0.iter().map(|(_, s)| s)
    }
}

/// A held key: its mode and limit (every holder agrees on them) and its
/// holdings by token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyLocks {
    pub mode: Mode,
    pub limit: u32,
    pub holdings: Holdings,
    /// Derived: the token of each live holding that has a request id.
    pub requests: BTreeMap<RequestKey, u64>,
}

/// The replicated state of the 0.2 lock module.
///
/// Tokens come from `next_token`, part of the state and of every snapshot,
/// so they strictly increase across all grants and are never reused, also
/// across snapshots, restarts and upgrades that migrate the counter. All
/// collections are ordered (`BTreeMap`): nothing depends on a hash seed.
/// Keys are [`Key`]s: `str`'s order, compared a word at a time (a B-tree
/// lookup compares a dozen keys that share long prefixes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockState {
    pub(crate) keys: BTreeMap<Key, KeyLocks>,
    pub(crate) next_token: u64,
    pub(crate) policy: Policy,
    /// Derived: holdings over all keys.
    pub(crate) holders: u64,
    /// Derived: the sum of the holdings' digests (see [`crate::hash`]).
    pub(crate) acc: Accumulator,
}

impl Default for LockState {
    fn default() -> Self {
        Self::new()
    }
}

fn fields<'a>(key: &'a str, token: u64, k: &KeyLocks, h: &'a Holding) -> HoldingFields<'a> {
    // Mode and limit are the key's; every holding of the key shares them.
    HoldingFields {
        key,
        token,
        mode: k.mode,
        limit: k.limit,
        lease_ms: h.lease_ms,
        holder: h.holder.as_ref(),
        request_id: &h.request_id,
    }
}

impl LockState {
    pub fn new() -> Self {
        LockState {
            keys: BTreeMap::new(),
            next_token: FIRST_TOKEN,
            policy: Policy::default(),
            holders: 0,
            acc: Accumulator::default(),
        }
    }

    /// Add a holding. The caller has checked that `token` is new, that the
    /// key (if held) has this `mode` and `limit` and room for one more, and
    /// that a request id is not held twice.
    pub(crate) fn insert_holding(
        &mut self,
        key: String,
        mode: Mode,
        limit: u32,
        token: u64,
        holding: Holding,
    ) {
        let digest = hash::holding_digest(&HoldingFields {
            key: &key,
            token,
            mode,
            limit,
            lease_ms: holding.lease_ms,
            holder: holding.holder.as_ref(),
            request_id: &holding.request_id,
        });
        self.acc.add(&digest);
        self.policy.count(&key, 1);
        self.holders = self.holders.saturating_add(1);
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

    /// Remove the holding `token` of `key`. `None` if there is none;
    /// otherwise `freed`: whether the removal can let a waiter in. That is
    /// when the key is now free (a waiter of the other mode, or of another
    /// limit, waits for exactly that), or when it was full and now has
    /// room (a waiter of the same mode and limit waits for exactly that).
    /// A key that had room before had no waiter this removal could help:
    /// only waiters queued behind one that must wait, and they stay queued.
    pub(crate) fn remove_holding(&mut self, key: &str, token: u64) -> Option<bool> {
        let k = self.keys.get_mut(KeyRef::new(key))?;
        let h = k.holdings.remove(&token)?;
        self.acc.sub(&h.digest);
        if let Some(rk) = h.request_key() {
            k.requests.remove(&rk);
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
        }
    }

    pub fn features() -> Features {
        Features {
            world_id: crate::WORLD.into(),
            modes: vec![Mode::Exclusive, Mode::Shared],
            max_limit: u32::MAX,
            policies: PolicyKinds {
                reserved: true,
                max_lease: true,
                max_holders: true,
                quota: true,
            },
            idempotent_grants: true,
            downgrade: true,
        }
    }

    /// The state hash, from the incrementally kept parts: O(1).
    pub fn state_hash(&self) -> [u8; 32] {
        hash::state_hash(
            &self.acc,
            self.holders,
            self.next_token,
            self.policy.digest(),
        )
    }

    /// The state hash computed from scratch over every holding; equal to
    /// [`LockState::state_hash`] (tests check it after every command).
    pub fn recomputed_hash(&self) -> [u8; 32] {
        let mut acc = Accumulator::default();
        let mut holders = 0u64;
        for (key, k) in &self.keys {
            for (&token, h) in k.holdings.iter() {
                acc.add(&hash::holding_digest(&fields(&key.0, token, k, h)));
                holders += 1;
            }
        }
        let policy = hash::policy_digest(self.policy.rules().iter());
        hash::state_hash(&acc, holders, self.next_token, &policy)
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
        })
        .collect()
}
