//! The holders of one key by token: inline for the usual single holder
//! (every exclusive lock, so no map is built and dropped per grant), a map
//! only when a key has several (shared locks and semaphores of world 0.2).

use std::collections::BTreeMap;

use super::{Holder, Spec};
use lockd_core::command::Mode;

#[derive(Debug, Default)]
pub(super) enum Holders {
    #[default]
    None,
    One(u64, Holder),
    Many(BTreeMap<u64, Holder>),
}

impl Holders {
    pub(super) fn is_empty(&self) -> bool {
        match self {
            Holders::None => true,
            Holders::One(..) => false,
            Holders::Many(m) => m.is_empty(),
        }
    }

    pub(super) fn contains_key(&self, token: &u64) -> bool {
        self.get(token).is_some()
    }

    pub(super) fn get(&self, token: &u64) -> Option<&Holder> {
        match self {
            Holders::One(t, h) if t == token => Some(h),
            Holders::Many(m) => m.get(token),
            _ => None,
        }
    }

    pub(super) fn get_mut(&mut self, token: &u64) -> Option<&mut Holder> {
        match self {
            Holders::One(t, h) if t == token => Some(h),
            Holders::Many(m) => m.get_mut(token),
            _ => None,
        }
    }

    pub(super) fn insert(&mut self, token: u64, holder: Holder) {
        match std::mem::take(self) {
            Holders::None => *self = Holders::One(token, holder),
            Holders::One(t, _) if t == token => *self = Holders::One(t, holder),
            Holders::One(t, h) => {
                *self = Holders::Many(BTreeMap::from([(t, h), (token, holder)]));
            }
            Holders::Many(mut m) => {
                m.insert(token, holder);
                *self = Holders::Many(m);
            }
        }
    }

    pub(super) fn remove(&mut self, token: &u64) -> Option<Holder> {
        match std::mem::take(self) {
            Holders::One(t, h) if t == *token => Some(h),
            Holders::Many(mut m) => {
                let h = m.remove(token);
                *self = Holders::Many(m);
                h
            }
            other => {
                *self = other;
                None
            }
        }
    }

    /// Every holder, by token (no allocation: this runs per acquire).
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, &Holder)> + '_ {
        let one = match self {
            Holders::One(t, h) => Some((*t, h)),
            _ => None,
        };
        let many = match self {
            Holders::Many(m) => Some(m.iter().map(|(t, h)| (*t, h))),
            _ => None,
        };
        one.into_iter().chain(many.into_iter().flatten())
    }

    /// The limit the key's readers agreed on, if readers hold it.
    pub(super) fn shared_limit(&self) -> Option<u32> {
        let (_, h) = self.iter().next()?;
        (h.mode == Mode::Shared).then_some(h.limit)
    }

    /// Whether a grant of `spec` may be granted once `taken` more grants
    /// of the same mode and limit went first: false only where world 0.2's
    /// contract makes it certainly `busy` (holders of the two modes never
    /// share a key; a key takes at most `limit` holders). The module still
    /// decides everything else: a limit that differs from the holders' is
    /// left to it to refuse, with its reason.
    pub(super) fn room(&self, spec: &Spec, taken: usize) -> bool {
        let mut held = 0usize;
        for (_, h) in self.iter() {
            if h.mode != spec.mode {
                return false;
            }
            if h.limit != spec.limit {
                return true;
            }
            held += 1;
        }
        held + taken < spec.limit as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn h(ms: u64) -> Holder {
        Holder {
            lease_ms: ms,
            deadline: Duration::from_millis(ms),
            mode: lockd_core::command::Mode::Exclusive,
            limit: 1,
            ident: None,
            principal: String::new(),
            owner: String::new(),
            session: 0,
            count: 1,
        }
    }

    #[test]
    fn one_then_many_then_none() {
        let mut hs = Holders::default();
        assert!(hs.is_empty());
        hs.insert(3, h(1));
        assert!(matches!(hs, Holders::One(3, _)));
        hs.insert(5, h(2));
        assert_eq!(hs.iter().map(|x| x.0).collect::<Vec<_>>(), [3, 5]);
        assert_eq!(hs.remove(&3).map(|x| x.lease_ms), Some(1));
        assert!(hs.remove(&3).is_none());
        assert!(hs.contains_key(&5));
        assert_eq!(hs.remove(&5).map(|x| x.lease_ms), Some(2));
        assert!(hs.is_empty());
    }

    #[test]
    fn room_follows_the_contract_only() {
        let spec = |mode, limit| Spec {
            mode,
            limit,
            ..Spec::exclusive(1)
        };
        let held = |mode, limit| Holder {
            mode,
            limit,
            ..h(1)
        };
        let mut hs = Holders::default();
        assert!(hs.room(&spec(Mode::Exclusive, 1), 0));
        assert!(!hs.room(&spec(Mode::Exclusive, 1), 1));
        hs.insert(1, held(Mode::Shared, 2));
        assert!(hs.room(&spec(Mode::Shared, 2), 0));
        assert!(!hs.room(&spec(Mode::Shared, 2), 1));
        assert!(!hs.room(&spec(Mode::Exclusive, 2), 0), "modes never mix");
        // A limit unlike the holders': the module refuses it, with a reason.
        assert!(hs.room(&spec(Mode::Shared, 5), 0));
    }
}
