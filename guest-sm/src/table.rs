//! The lock table and the semantics of each command. Its byte encoding and
//! `snapshot`/`restore` live in [`crate::snapshot`], the state hash in
//! [`crate::hash`].

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::command::{Command, HeldLock, LockInfo, Outcome, TableStats};
use crate::hash::{self, lock_digest, Accumulator};
use crate::key::{Key, KeyRef};

/// The first token a fresh table issues. Zero is never a valid token, so a
/// client can use it as "no token yet".
pub const FIRST_TOKEN: u64 = 1;

/// The replicated state: who holds which key, and the next fencing token.
///
/// Tokens come from `next_token`, a counter that is part of the state (and of
/// every snapshot), so they strictly increase across all grants of the
/// cluster and are never reused, also across snapshots, restarts and module
/// upgrades that migrate the counter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockTable {
    pub(crate) locks: BTreeMap<Key, LockInfo>,
    pub(crate) next_token: u64,
    /// The sum of the digests of the held locks, kept as they come and go
    /// (see [`crate::hash`]); a function of `locks` alone.
    pub(crate) acc: Accumulator,
}

impl Default for LockTable {
    fn default() -> Self {
        Self::new()
    }
}

impl LockTable {
    pub fn new() -> Self {
        LockTable {
            locks: BTreeMap::new(),
            next_token: FIRST_TOKEN,
            acc: Accumulator::default(),
        }
    }

    /// Apply one committed command.
    pub fn apply(&mut self, command: Command) -> Outcome {
        match command {
            Command::Grant { key, lease_ms } => self.grant(key, lease_ms),
            Command::Release { key } => self.release(&key),
            Command::Expire { key, token } => self.expire(&key, token),
        }
    }

    /// Apply a committed range, one outcome per command, in order.
    pub fn apply_batch(&mut self, batch: impl IntoIterator<Item = Command>) -> Vec<Outcome> {
        batch.into_iter().map(|c| self.apply(c)).collect()
    }

    /// `Grant`: the key must be free. Held keys are rejected rather than
    /// re-granted: the leader never proposes that in normal flow, so seeing it
    /// means a proposal raced another and the holder keeps its lock.
    pub fn grant(&mut self, key: String, lease_ms: u64) -> Outcome {
        use std::collections::btree_map::Entry;
        match self.locks.entry(Key(key)) {
            Entry::Occupied(_) => Outcome::GrantRejected,
            Entry::Vacant(slot) => {
                let token = self.next_token;
                // Saturating: at one grant per nanosecond the counter lasts
                // 584 years; a saturated counter would repeat tokens, so it
                // is treated as unreachable rather than wrapped.
                self.next_token = self.next_token.saturating_add(1);
                let info = LockInfo { token, lease_ms };
                self.acc.add(&lock_digest(&slot.key().0, &info));
                slot.insert(info);
                Outcome::Granted { token }
            }
        }
    }

    /// `Release`: frees the key whoever holds it. Checking the caller's token
    /// is the leader's job before it proposes; the log only records that the
    /// key was freed.
    pub fn release(&mut self, key: &str) -> Outcome {
        match self.locks.remove(KeyRef::new(key)) {
            Some(info) => {
                self.acc.sub(&lock_digest(key, &info));
                Outcome::Released
            }
            None => Outcome::NotFound,
        }
    }

    /// `Expire`: removes the lock only if `token` still names its holder, so
    /// a late or duplicated expiry cannot remove a lock granted again in the
    /// meantime. Applying it twice changes nothing the second time.
    pub fn expire(&mut self, key: &str, token: u64) -> Outcome {
        let key = KeyRef::new(key);
        let existed = match self.locks.get(key) {
            Some(info) if info.token == token => {
                self.acc.sub(&lock_digest(key.as_str(), info));
                self.locks.remove(key);
                true
            }
            _ => false,
        };
        Outcome::Expired { existed }
    }

    /// The holder of `key`, if any.
    pub fn get(&self, key: &str) -> Option<LockInfo> {
        self.locks.get(KeyRef::new(key)).copied()
    }

    /// Held locks in key order, starting after `after`, at most `limit`.
    pub fn locks(&self, after: Option<&str>, limit: usize) -> Vec<HeldLock> {
        let start = match after {
            Some(k) => Bound::Excluded(KeyRef::new(k)),
            None => Bound::Unbounded,
        };
        self.locks
            .range::<KeyRef, _>((start, Bound::Unbounded))
            .take(limit)
            .map(|(key, info)| HeldLock {
                key: key.0.clone(),
                token: info.token,
                lease_ms: info.lease_ms,
            })
            .collect()
    }

    pub fn stats(&self) -> TableStats {
        TableStats {
            held: self.locks.len() as u64,
            next_token: self.next_token,
        }
    }
}

impl LockTable {
    /// The state hash, from the sum kept as commands applied: O(1).
    pub fn state_hash(&self) -> [u8; 32] {
        hash::state_hash(&self.acc, self.locks.len() as u64, self.next_token)
    }

    /// The same hash computed from the locks themselves, for tests.
    pub fn recomputed_hash(&self) -> [u8; 32] {
        let mut acc = Accumulator::default();
        for (key, info) in &self.locks {
            acc.add(&lock_digest(&key.0, info));
        }
        hash::state_hash(&acc, self.locks.len() as u64, self.next_token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(key: &str, lease_ms: u64) -> Command {
        Command::Grant {
            key: key.into(),
            lease_ms,
        }
    }

    #[test]
    fn tokens_increase_and_survive_restore() {
        let mut t = LockTable::new();
        assert_eq!(t.apply(grant("a", 10)), Outcome::Granted { token: 1 });
        assert_eq!(t.apply(grant("b", 10)), Outcome::Granted { token: 2 });
        let snap = t.snapshot();
        let mut u = LockTable::new();
        u.restore(&snap).unwrap();
        assert_eq!(u.state_hash(), t.state_hash());
        assert_eq!(u.apply(grant("c", 10)), Outcome::Granted { token: 3 });
    }

    #[test]
    fn release_frees_and_regrant_gets_new_token() {
        let mut t = LockTable::new();
        assert_eq!(t.apply(grant("a", 10)), Outcome::Granted { token: 1 });
        assert_eq!(
            t.apply(Command::Release { key: "a".into() }),
            Outcome::Released
        );
        assert_eq!(t.apply(grant("a", 10)), Outcome::Granted { token: 2 });
        assert_eq!(
            t.apply(Command::Expire {
                key: "a".into(),
                token: 1
            }),
            Outcome::Expired { existed: false }
        );
        assert_eq!(
            t.get("a"),
            Some(LockInfo {
                token: 2,
                lease_ms: 10
            })
        );
    }

    #[test]
    fn locks_pages_in_key_order() {
        let mut t = LockTable::new();
        for k in ["c", "a", "b", "d"] {
            t.apply(grant(k, 5));
        }
        let first: Vec<_> = t.locks(None, 2).into_iter().map(|h| h.key).collect();
        assert_eq!(first, ["a", "b"]);
        let rest: Vec<_> = t.locks(Some("b"), 10).into_iter().map(|h| h.key).collect();
        assert_eq!(rest, ["c", "d"]);
    }
}

#[cfg(test)]
mod hash_tests {
    use proptest::prelude::*;

    use super::*;
    use crate::Command;

    fn command() -> impl Strategy<Value = Command> {
        let key = prop::sample::select(vec!["a", "b", "ab", "ba", "c"]);
        prop_oneof![
            (key.clone(), 1u64..4).prop_map(|(k, lease_ms)| Command::Grant {
                key: k.into(),
                lease_ms
            }),
            key.clone().prop_map(|k| Command::Release { key: k.into() }),
            (key, 0u64..8).prop_map(|(k, token)| Command::Expire {
                key: k.into(),
                token
            }),
        ]
    }

    proptest! {
        #[test]
        fn the_kept_hash_is_the_recomputed_one_after_every_command(
            cmds in prop::collection::vec(command(), 0..64)
        ) {
            let mut t = LockTable::new();
            for c in cmds {
                t.apply(c);
                prop_assert_eq!(t.state_hash(), t.recomputed_hash());
            }
            let mut u = LockTable::new();
            u.restore(&t.snapshot()).unwrap();
            prop_assert_eq!(u.state_hash(), t.state_hash());
        }
    }

    #[test]
    fn equal_locks_from_different_histories_hash_equal() {
        let grant = |k: &str| Command::Grant {
            key: k.into(),
            lease_ms: 5,
        };
        let mut x = LockTable::new();
        x.apply(grant("a"));
        x.apply(grant("b"));
        x.apply(Command::Release { key: "a".into() });
        let mut y = LockTable::new();
        y.apply(grant("c"));
        y.apply(grant("b"));
        y.apply(Command::Expire {
            key: "c".into(),
            token: 1,
        });
        // Same lock (b, token 2), same next token: equal.
        assert_eq!(x.state_hash(), y.state_hash());
        y.apply(grant("d"));
        assert_ne!(x.state_hash(), y.state_hash());
    }
}
