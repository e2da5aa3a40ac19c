//! What every snapshot format decodes into, and the checks they share: the
//! magic, a postcard body that must fill its input exactly, and [`build`],
//! which turns decoded keys into a state only if every invariant holds.
//! Format 3 ([`crate::snapshot`]) and the migrated formats 1 and 2
//! ([`crate::legacy`]) all go through here.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::error::SnapshotError;
use crate::policy::Policy;
use crate::state::{Holding, LockState, FIRST_TOKEN};
use crate::types::Mode;

/// Every snapshot of every format starts with this, then a format byte.
pub const MAGIC: &[u8; 4] = b"LKSM";

/// One key of a decoded snapshot, in any format.
pub(crate) struct KeyParts {
    pub key: String,
    pub mode: Mode,
    pub limit: u32,
    /// `(token, holding)` in token order.
    pub holdings: Vec<(u64, Holding)>,
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

/// Decode a body that ends in the table's rows, building the state from
/// them one at a time (see [`lock_key::decode_streamed`]): `build` gets
/// the fields before the rows and an iterator over the rows.
pub(crate) fn body_streamed<'de, H, I>(
    bytes: &'de [u8],
    build: impl FnOnce(H, &mut dyn Iterator<Item = I>) -> Result<LockState, SnapshotError>,
) -> Result<LockState, SnapshotError>
where
    H: Deserialize<'de>,
    I: Deserialize<'de>,
{
    lock_key::decode_streamed(bytes, build).map_err(|e| match e {
        lock_key::Streamed::Decode(e) => SnapshotError::Decode(e.to_string()),
        lock_key::Streamed::Trailing(n) => SnapshotError::TrailingBytes(n),
        lock_key::Streamed::Built(e) => e,
    })
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
