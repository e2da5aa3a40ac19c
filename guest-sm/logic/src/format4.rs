//! Snapshot format 4: format 3 and what world 0.3 adds, written for any
//! state that uses anything of 0.3 (a state that uses nothing of it is
//! written in format 3, byte for byte as a 0.2 module would).
//!
//! ```text
//! "LKSM" | format: u8 = 4 | postcard(next_token: u64,
//!                                    policy: [prefix-policy],
//!                                    next_session: u64,
//!                                    sessions: [(id, holder, request_id, ttl_ms, max_holdings)],
//!                                    keys: [(key, mode, limit, [(token, lease_ms, holder?, request_id,
//!                                                                session, count, value)])])
//! ```
//!
//! The format byte is the version: a later change is a format 5, never a
//! reinterpretation of 4. Sessions in id order, then as format 3: rules in
//! prefix order, keys in key order, holdings in token order, so the
//! encoding is canonical. `next_session` is carried so ids are never
//! reused; a session's holdings are not listed with it (each holding names
//! its session), and neither is anything else derived: per-principal
//! counts, session holding sets and request indexes are rebuilt on decode,
//! which checks every invariant ([`crate::parts::build`]). The keys are
//! streamed as in format 3; the sessions, far fewer, are decoded as one
//! list.

use serde::{Deserialize, Serialize};

use crate::error::SnapshotError;
use crate::holdings::Holding;
use crate::parts::{body_streamed, build, KeyParts, SessionParts, SessionsParts, MAGIC};
use crate::policy::Policy;
use crate::state::LockState;
use crate::types::{Holder, Mode, PrefixPolicy};

pub const FORMAT: u8 = 4;

#[derive(Serialize)]
struct BodyRef<S, K> {
    next_token: u64,
    policy: Vec<PrefixPolicy>,
    next_session: u64,
    /// `(id, holder, request_id, ttl_ms, max_holdings)` in id order.
    sessions: S,
    keys: K,
}

#[derive(Serialize)]
struct KeyRef<'a, H> {
    key: &'a str,
    mode: Mode,
    limit: u32,
    /// `(token, lease_ms, holder, request_id, session, count, value)` in
    /// token order.
    holdings: H,
}

/// A holding row as read back.
type HoldingRow = (u64, u64, Option<Holder>, String, u64, u32, String);

#[derive(Deserialize)]
struct KeyOwned {
    key: String,
    mode: Mode,
    limit: u32,
    holdings: Vec<HoldingRow>,
}

/// The state in format 4.
pub(crate) fn encode(s: &LockState) -> Vec<u8> {
    let body = BodyRef {
        next_token: s.next_token,
        policy: s.policy.rules(),
        next_session: s.sessions.next(),
        sessions: lock_key::SeqOf(|| {
            s.sessions.iter().map(|(&id, x)| {
                (
                    id,
                    &x.holder,
                    x.request_id.as_str(),
                    x.ttl_ms,
                    x.max_holdings,
                )
            })
        }),
        keys: lock_key::SeqOf(|| {
            s.keys.iter().map(|(key, k)| KeyRef {
                key: &key.0,
                mode: k.mode,
                limit: k.limit,
                holdings: lock_key::SeqOf(|| {
                    k.holdings.iter().map(|(&t, h)| {
                        (
                            t,
                            h.lease_ms,
                            &h.holder,
                            h.request_id.as_str(),
                            h.session(),
                            h.count(),
                            h.value(),
                        )
                    })
                }),
            })
        }),
    };
    let mut prefix = MAGIC.to_vec();
    prefix.push(FORMAT);
    lock_key::encode_exact(&prefix, &body)
}

/// The body is `(next_token, policy, next_session, sessions)` then the
/// keys, decoded one at a time into the new state.
pub(crate) fn decode(bytes: &[u8]) -> Result<LockState, SnapshotError> {
    type Head = (u64, Vec<PrefixPolicy>, u64, Vec<SessionParts>);
    body_streamed(
        bytes,
        |head: Head, keys: &mut dyn Iterator<Item = KeyOwned>| {
            let (next_token, rules, next_session, sessions) = head;
            let policy = Policy::from_rules(rules)?;
            let sessions = SessionsParts {
                next_session,
                sessions,
            };
            build(next_token, policy, sessions, keys.map(key_parts))
        },
    )
}

fn key_parts(k: KeyOwned) -> KeyParts {
    KeyParts {
        key: k.key,
        mode: k.mode,
        limit: k.limit,
        holdings: k
            .holdings
            .into_iter()
            .map(
                |(token, lease_ms, holder, request_id, session, count, value)| {
                    let holding =
                        Holding::new(lease_ms, holder, request_id).with_0_3(session, count, value);
                    (token, holding)
                },
            )
            .collect(),
    }
}
