//! What the state keeps per held key: its holdings ([`Holding`], stored
//! with its digest) in token order, and the index of their request ids.
//! Its own room so that [`crate::state`] (the primitives) and
//! [`crate::sessions`] (which names holdings) both build on it without
//! naming each other.

use std::collections::BTreeMap;

use crate::hash::HoldingFields;
use crate::types::{Holder, Mode};

/// The identity a request id is remembered under (of a holding, or of a
/// session).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct RequestKey {
    pub holder: Holder,
    pub request_id: String,
}

/// One holding of a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Holding {
    /// In a session: the session's TTL.
    pub lease_ms: u64,
    /// `None`: carried over from a 0.1 state.
    pub holder: Option<Holder>,
    /// Empty when the grant had none.
    pub request_id: String,
    /// What 0.3 adds, `None` exactly when all of it is at its default:
    /// boxed, so a holding that uses none of it (every holding of a 0.2
    /// module, which may have millions) costs one pointer more than in 0.2,
    /// not the fields.
    ext: Option<Box<Extension>>,
}

/// A holding's 0.3 fields.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Extension {
    /// 0: not in a session.
    session: u64,
    /// How many times its holder entered it; at least 1.
    count: u32,
    /// What its holder publishes (at most [`crate::types::MAX_VALUE_BYTES`]).
    value: String,
}

impl Holding {
    /// A holding as 0.2 has them: no session, count 1, no value.
    pub fn new(lease_ms: u64, holder: Option<Holder>, request_id: String) -> Holding {
        Holding {
            lease_ms,
            holder,
            request_id,
            ext: None,
        }
    }

    /// The holding with these 0.3 fields.
    pub fn with_0_3(mut self, session: u64, count: u32, value: String) -> Holding {
        self.set(session, count, value);
        self
    }

    fn set(&mut self, session: u64, count: u32, value: String) {
        let default = session == 0 && count == 1 && value.is_empty();
        self.ext = (!default).then(|| {
            Box::new(Extension {
                session,
                count,
                value,
            })
        });
    }

    /// Its session; 0 for none.
    pub fn session(&self) -> u64 {
        self.ext.as_ref().map_or(0, |e| e.session)
    }

    /// How many times its holder entered it.
    pub fn count(&self) -> u32 {
        self.ext.as_ref().map_or(1, |e| e.count)
    }

    pub fn value(&self) -> &str {
        self.ext.as_ref().map_or("", |e| &e.value)
    }

    pub fn set_count(&mut self, count: u32) {
        let (session, value) = self
            .ext
            .take()
            .map_or((0, String::new()), |e| (e.session, e.value));
        self.set(session, count, value);
    }

    pub fn set_value(&mut self, value: String) {
        self.set(self.session(), self.count(), value);
    }

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

    /// Whether it uses anything of 0.3 (so that only format 4 carries it).
    pub fn is_extended(&self) -> bool {
        self.ext.is_some()
    }

    /// What its digest covers; mode and limit are the key's.
    pub fn fields<'a>(
        &'a self,
        key: &'a str,
        token: u64,
        mode: Mode,
        limit: u32,
    ) -> HoldingFields<'a> {
        HoldingFields {
            key,
            token,
            mode,
            limit,
            lease_ms: self.lease_ms,
            holder: self.holder.as_ref(),
            request_id: &self.request_id,
            session: self.session(),
            count: self.count(),
            value: self.value(),
        }
    }
}

/// A holding as the state keeps it: with its digest, so that removing it
/// subtracts the digest without hashing the holding again (in the wasm
/// build SHA-256 has no hardware help, and a grant/release cycle would
/// otherwise hash twice).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stored {
    pub holding: Holding,
    pub digest: [u8; 32],
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

    pub fn insert(&mut self, token: u64, stored: Stored) {
        match self.find(token) {
            Ok(i) => self.0[i].1 = stored,
            Err(i) => self.0.insert(i, (token, stored)),
        }
    }

    pub fn remove(&mut self, token: &u64) -> Option<Stored> {
        self.find(*token).ok().map(|i| self.0.remove(i).1)
    }

    pub fn get_key_value(&self, token: &u64) -> Option<(&u64, &Stored)> {
        self.find(*token).ok().map(|i| (&self.0[i].0, &self.0[i].1))
    }

    pub fn get(&self, token: &u64) -> Option<&Stored> {
        self.get_key_value(token).map(|(_, s)| s)
    }

    pub fn get_mut(&mut self, token: &u64) -> Option<&mut Stored> {
        self.find(*token).ok().map(|i| &mut self.0[i].1)
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

impl KeyLocks {
    /// The holding a reentrant grant by `holder` in `session` enters: the
    /// first (lowest token) whose principal, owner and session are those.
    /// A scan of the key's holdings, which its limit bounds; only reentrant
    /// grants pay it.
    pub fn held_by(&self, holder: &Holder, session: u64) -> Option<u64> {
        self.holdings
            .iter()
            .find(|(_, h)| h.session() == session && h.holder.as_ref() == Some(holder))
            .map(|(&t, _)| t)
    }
}
