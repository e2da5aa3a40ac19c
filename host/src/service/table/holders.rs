//! The holders of one key by token: inline for the usual single holder
//! (every exclusive lock, so no map is built and dropped per grant), a map
//! only when a key has several (shared locks and semaphores of world 0.2).

use std::collections::BTreeMap;

use super::Holder;

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

    /// Every holder, by token (scenario files print them).
    #[cfg(test)]
    pub(super) fn iter(&self) -> Vec<(u64, &Holder)> {
        match self {
            Holders::None => Vec::new(),
            Holders::One(t, h) => vec![(*t, h)],
            Holders::Many(m) => m.iter().map(|(t, h)| (*t, h)).collect(),
        }
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
        }
    }

    #[test]
    fn one_then_many_then_none() {
        let mut hs = Holders::default();
        assert!(hs.is_empty());
        hs.insert(3, h(1));
        assert!(matches!(hs, Holders::One(3, _)));
        hs.insert(5, h(2));
        assert_eq!(hs.iter().iter().map(|x| x.0).collect::<Vec<_>>(), [3, 5]);
        assert_eq!(hs.remove(&3).map(|x| x.lease_ms), Some(1));
        assert!(hs.remove(&3).is_none());
        assert!(hs.contains_key(&5));
        assert_eq!(hs.remove(&5).map(|x| x.lease_ms), Some(2));
        assert!(hs.is_empty());
    }
}
