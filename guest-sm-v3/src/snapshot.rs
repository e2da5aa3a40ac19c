//! Snapshot format 3, this module's own, and `restore` of every format it
//! reads.
//!
//! ```text
//! "LKSM" | format: u8 = 3 | postcard(next_token: u64,
//!                                    policy: [prefix-policy],
//!                                    keys: [(key, mode, limit, [(token, lease_ms, holder?, request_id)])])
//! ```
//!
//! Rules in prefix order, keys in key order, holdings in token order: the
//! encoding is canonical. Formats 1 (the 0.1 module, `guest-sm`) and 2
//! (`guest-sm-v2`) are migrated by [`crate::legacy`]. Decoding checks every
//! invariant the state relies on (see [`SnapshotError`]) and builds a fresh
//! state through the same primitive grants use, so the derived data (counts,
//! request index, quota counts, hash accumulator) is right by construction.
//! Hostile bytes give an error, never a panic: postcard checks lengths and
//! UTF-8 and allocates only as the input really holds data.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::error::SnapshotError;
use crate::legacy;
use crate::policy::Policy;
use crate::state::{Holding, LockState, FIRST_TOKEN};
use crate::types::{Holder, Mode, PrefixPolicy};

pub const MAGIC: &[u8; 4] = b"LKSM";
pub const FORMAT: u8 = 3;

#[derive(Serialize)]
struct BodyRef<'a> {
    next_token: u64,
    policy: Vec<PrefixPolicy>,
    keys: Vec<KeyRef<'a>>,
}

#[derive(Serialize)]
struct KeyRef<'a> {
    key: &'a str,
    mode: Mode,
    limit: u32,
    holdings: Vec<(u64, u64, &'a Option<Holder>, &'a str)>,
}

#[derive(Deserialize)]
struct Body {
    next_token: u64,
    policy: Vec<PrefixPolicy>,
    keys: Vec<KeyOwned>,
}

#[derive(Deserialize)]
struct KeyOwned {
    key: String,
    mode: Mode,
    limit: u32,
    holdings: Vec<(u64, u64, Option<Holder>, String)>,
}

/// One key of a decoded snapshot, in any format.
pub(crate) struct KeyParts {
    pub key: String,
    pub mode: Mode,
    pub limit: u32,
    /// `(token, holding)` in token order.
    pub holdings: Vec<(u64, Holding)>,
}

impl LockState {
    /// The state in snapshot format 3.
    pub fn snapshot(&self) -> Vec<u8> {
        let body = BodyRef {
            next_token: self.next_token,
            policy: self.policy.rules(),
            keys: self
                .keys
                .iter()
                .map(|(key, k)| KeyRef {
                    key,
                    mode: k.mode,
                    limit: k.limit,
                    holdings: k
                        .holdings
                        .iter()
                        .map(|(&t, h)| (t, h.lease_ms, &h.holder, h.request_id.as_str()))
                        .collect(),
                })
                .collect(),
        };
        let mut out = MAGIC.to_vec();
        out.push(FORMAT);
        // Strings, integers and sequences into a Vec: cannot fail.
        postcard::to_extend(&body, out).expect("postcard encoding into a Vec is infallible")
    }

    /// Replace the state with a snapshot of format 3, or migrate one of
    /// format 1 or 2. On error the state is unchanged.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<(), SnapshotError> {
        *self = decode(bytes)?;
        Ok(())
    }
}

/// Decode a snapshot of any format this module reads.
pub fn decode(bytes: &[u8]) -> Result<LockState, SnapshotError> {
    let rest = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or(SnapshotError::BadMagic)?;
    let (&format, body) = rest.split_first().ok_or(SnapshotError::UnknownFormat(0))?;
    match format {
        legacy::FORMAT_1 => legacy::decode_format_1(body),
        legacy::FORMAT_2 => legacy::decode_format_2(body),
        FORMAT => decode_format_3(body),
        other => Err(SnapshotError::UnknownFormat(other)),
    }
}

/// Decode a postcard body that must fill the input exactly.
pub(crate) fn body<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, SnapshotError> {
    let (body, trailing) =
        postcard::take_from_bytes(bytes).map_err(|e| SnapshotError::Decode(e.to_string()))?;
    if !trailing.is_empty() {
        return Err(SnapshotError::TrailingBytes(trailing.len()));
    }
    Ok(body)
}

fn decode_format_3(bytes: &[u8]) -> Result<LockState, SnapshotError> {
    let b: Body = body(bytes)?;
    let policy = Policy::from_rules(b.policy)?;
    let keys = b.keys.into_iter().map(|k| KeyParts {
        key: k.key,
        mode: k.mode,
        limit: k.limit,
        holdings: k
            .holdings
            .into_iter()
            .map(|(token, lease_ms, holder, request_id)| {
                (
                    token,
                    Holding {
                        lease_ms,
                        holder,
                        request_id,
                    },
                )
            })
            .collect(),
    });
    build(b.next_token, policy, keys)
}

/// Build a state from decoded parts, checking every invariant: keys
/// strictly ascending, each with 1..=limit holdings in strictly ascending
/// token order, every token in `1..next_token` and held once, a request id
/// only with a holder and never twice on a key. Shared by every format.
pub(crate) fn build(
    next_token: u64,
    policy: Policy,
    keys: impl IntoIterator<Item = KeyParts>,
) -> Result<LockState, SnapshotError> {
    if next_token < FIRST_TOKEN {
        return Err(SnapshotError::NextTokenZero(next_token));
    }
    let mut state = LockState::new();
    state.next_token = next_token;
    state.policy = policy;
    let mut tokens = BTreeSet::new();
    let mut last_key: Option<String> = None;
    for k in keys {
        if last_key.as_ref().is_some_and(|prev| *prev >= k.key) {
            return Err(SnapshotError::KeysOutOfOrder { key: k.key });
        }
        check_key(&k, next_token, &mut tokens)?;
        for (token, holding) in k.holdings {
            state.insert_holding(k.key.clone(), k.mode, k.limit, token, holding);
        }
        last_key = Some(k.key);
    }
    state.recount_policy();
    Ok(state)
}

fn check_key(
    k: &KeyParts,
    next_token: u64,
    tokens: &mut BTreeSet<u64>,
) -> Result<(), SnapshotError> {
    let key = || k.key.clone();
    if k.holdings.is_empty() {
        return Err(SnapshotError::NoHolders { key: key() });
    }
    if k.limit == 0 {
        return Err(SnapshotError::ZeroLimit { key: key() });
    }
    if k.holdings.len() > usize::try_from(k.limit).unwrap_or(usize::MAX) {
        return Err(SnapshotError::OverLimit {
            key: key(),
            holders: k.holdings.len(),
            limit: k.limit,
        });
    }
    let mut last_token = 0;
    let mut requests = BTreeSet::new();
    for (token, h) in &k.holdings {
        let token = *token;
        if token <= last_token {
            return Err(SnapshotError::TokensOutOfOrder { key: key(), token });
        }
        last_token = token;
        if !(FIRST_TOKEN..next_token).contains(&token) {
            return Err(SnapshotError::TokenOutOfRange {
                key: key(),
                token,
                next_token,
            });
        }
        if !tokens.insert(token) {
            return Err(SnapshotError::DuplicateToken { token });
        }
        if h.holder.is_none() && !h.request_id.is_empty() {
            return Err(SnapshotError::RequestWithoutHolder { key: key(), token });
        }
        if let Some(rk) = h.request_key() {
            if !requests.insert(rk) {
                return Err(SnapshotError::DuplicateRequest {
                    key: key(),
                    request_id: h.request_id.clone(),
                });
            }
        }
    }
    Ok(())
}
