//! The snapshot formats of the `lock-sm@0.1.0` modules: read to migrate a
//! running cluster onto this module, and format 1 written for a downgrade.
//!
//! ```text
//! format 1 (guest-sm):    "LKSM" | 1 | postcard(next_token: u64, locks: [(key, token, lease_ms)])
//! format 2 (guest-sm-world01-v2): "LKSM" | 2 | postcard(policy: str, next_token: u64, held: u64, locks: [(key, lease_ms, token)])
//! ```
//!
//! **Migration.** Every 0.1 lock becomes an exclusive holding with limit 1,
//! its token and lease kept, its holder unknown (no principal, owner or
//! request id: a 0.1 state never had them, so no retry can be recognised as
//! a repeat of it). The token counter carries over, so tokens keep
//! increasing across the upgrade. Format 2's policy string names the prefix
//! that module reserves (`"reserved/"`); it becomes a reserved-prefix rule,
//! so the keys it refused stay refused.
//!
//! These decoders are written here rather than taken from the crates that
//! own the formats: those crates export the 0.1 world from their wasm
//! builds, which this module's component must not link. The tests decode
//! what those crates write, so the copies cannot drift apart.
//!
//! **Downgrade.** [`LockState::downgrade_snapshot`] writes format 1, and
//! refuses a state a 0.1 module would misread: policy data (a 0.1 module
//! would silently stop enforcing it; clear it first), a shared holding, a
//! key with a limit above 1. Holders' identities and request ids are
//! dropped: after a downgrade a retry is no longer recognised as a repeat
//! (the 0.1 module refuses it as held), which can delay its client, never
//! grant twice.
//!
//! What world 0.3 adds is refused too, each by name: live sessions, a
//! session counter that has moved (a 0.1 state cannot carry it, so after an
//! upgrade back session ids would be reused, and a stale client's id could
//! name another's session), a holding entered more than once, a value.

use serde::{Deserialize, Serialize};

use crate::error::{DowngradeError, SnapshotError};
use crate::hash::FIRST_SESSION;
use crate::holdings::Holding;
use crate::parts::{self, KeyParts, SessionsParts, MAGIC};
use crate::policy::Policy;
use crate::state::LockState;
use crate::types::{Mode, PrefixPolicy};

pub const FORMAT_1: u8 = 1;
pub const FORMAT_2: u8 = 2;

#[derive(Serialize)]
struct Format1Ref<'a> {
    next_token: u64,
    locks: Vec<(&'a str, u64, u64)>,
}

#[derive(Deserialize)]
struct Format2 {
    policy: String,
    next_token: u64,
    held: u64,
    locks: Vec<(String, u64, u64)>,
}

/// A 0.1 lock as a key of this module: exclusive, limit 1, holder unknown.
fn migrated(key: String, token: u64, lease_ms: u64) -> KeyParts {
    KeyParts {
        key,
        mode: Mode::Exclusive,
        limit: 1,
        holdings: vec![(token, Holding::new(lease_ms, None, String::new()))],
    }
}

/// `next_token`, then the locks, decoded one at a time into the new state
/// (a migration from the 0.1 module holds its image and the new table).
pub(crate) fn decode_format_1(body: &[u8]) -> Result<LockState, SnapshotError> {
    parts::body_streamed(
        body,
        |next_token: u64, locks: &mut dyn Iterator<Item = (String, u64, u64)>| {
            let keys = locks.map(|(key, token, lease_ms)| migrated(key, token, lease_ms));
            parts::build(next_token, Policy::default(), SessionsParts::none(), keys)
        },
    )
}

pub(crate) fn decode_format_2(body: &[u8]) -> Result<LockState, SnapshotError> {
    let b: Format2 = parts::body(body)?;
    if b.held != b.locks.len() as u64 {
        return Err(SnapshotError::HeldCount {
            header: b.held,
            body: b.locks.len(),
        });
    }
    let rules = if b.policy.is_empty() {
        vec![]
    } else {
        vec![PrefixPolicy {
            reserved: true,
            ..PrefixPolicy::new(b.policy)
        }]
    };
    let keys = b
        .locks
        .into_iter()
        .map(|(key, lease_ms, token)| migrated(key, token, lease_ms));
    parts::build(
        b.next_token,
        Policy::from_rules(rules)?,
        SessionsParts::none(),
        keys,
    )
}

impl LockState {
    /// The state in format 1, the 0.1 module's, or why it cannot be.
    pub fn downgrade_snapshot(&self) -> Result<Vec<u8>, DowngradeError> {
        if !self.policy.is_empty() {
            return Err(DowngradeError::Policy(self.policy.len()));
        }
        if !self.sessions.is_empty() {
            return Err(DowngradeError::Sessions(self.sessions.len()));
        }
        if self.sessions.next() != FIRST_SESSION {
            return Err(DowngradeError::SessionCounter(self.sessions.next()));
        }
        let mut locks = Vec::with_capacity(self.keys.len());
        for (key, k) in &self.keys {
            if k.mode == Mode::Shared {
                return Err(DowngradeError::Shared(key.0.clone()));
            }
            if k.limit != 1 {
                return Err(DowngradeError::Semaphore {
                    key: key.0.clone(),
                    limit: k.limit,
                });
            }
            // Limit 1: exactly one holding.
            for (&token, h) in k.holdings.iter() {
                let at = || (key.0.clone(), token);
                if h.count() > 1 {
                    let (key, token) = at();
                    return Err(DowngradeError::Reentered {
                        key,
                        token,
                        count: h.count(),
                    });
                }
                if !h.value().is_empty() {
                    let (key, token) = at();
                    return Err(DowngradeError::Value { key, token });
                }
                locks.push((key.0.as_str(), token, h.lease_ms));
            }
        }
        let body = Format1Ref {
            next_token: self.next_token,
            locks,
        };
        let mut out = MAGIC.to_vec();
        out.push(FORMAT_1);
        Ok(postcard::to_extend(&body, out).expect("postcard encoding into a Vec is infallible"))
    }
}
