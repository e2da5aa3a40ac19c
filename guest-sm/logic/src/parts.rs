//! What every snapshot format decodes into, and the checks they share: the
//! magic, a postcard body that must fill its input exactly, and [`build`],
//! which turns decoded sessions and keys into a state only if every
//! invariant holds. Format 4 ([`crate::format4`]), format 3
//! ([`crate::snapshot`]) and the migrated formats 1 and 2
//! ([`crate::legacy`]) all go through here; the formats before 4 have no
//! sessions and holdings without 0.3 fields.
use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::error::SnapshotError;
use crate::hash::FIRST_SESSION;
use crate::holdings::{Holding, RequestKey};
use crate::policy::Policy;
use crate::sessions::Session;
use crate::state::{LockState, FIRST_TOKEN};
use crate::types::{Holder, Mode, MAX_VALUE_BYTES};

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

/// One session of a decoded snapshot (format 4).
#[derive(Deserialize)]
pub(crate) struct SessionParts {
    pub id: u64,
    pub holder: Holder,
    pub request_id: String,
    pub ttl_ms: u64,
    pub max_holdings: u32,
}

/// The sessions of a decoded snapshot: none before format 4.
pub(crate) struct SessionsParts {
    pub next_session: u64,
    /// In ascending id order.
    pub sessions: Vec<SessionParts>,
}

impl SessionsParts {
    /// A state of a format before 4: no session was ever opened.
    pub fn none() -> SessionsParts {
        SessionsParts {
            next_session: FIRST_SESSION,
            sessions: Vec::new(),
        }
    }
}

/// Build a state from decoded parts, checking every invariant: sessions in
/// strictly ascending id order below `next_session`, each with a TTL and
/// at most one per holder and request id; keys strictly ascending, each
/// with 1..=limit holdings in strictly ascending token order, every token
/// in `1..next_token` and held once, a request id only with a holder and
/// never twice on a key, counts above 0, values within bounds, a session
/// holding only in a live session of its principal, with the session's TTL
/// as its lease, and within the session's max-holdings. Shared by every
/// format. The derived data is rebuilt by the primitives commands use.
pub(crate) fn build(
    next_token: u64,
    policy: Policy,
    sessions: SessionsParts,
    keys: impl IntoIterator<Item = KeyParts>,
) -> Result<LockState, SnapshotError> {
    if next_token < FIRST_TOKEN {
        return Err(SnapshotError::NextTokenZero(next_token));
    }
    let mut state = LockState::new();
    state.next_token = next_token;
    state.policy = policy;
    add_sessions(&mut state, sessions)?;
    let mut tokens = BTreeSet::new();
    let mut last_key: Option<String> = None;
    for k in keys {
        if last_key.as_ref().is_some_and(|prev| *prev >= k.key) {
            return Err(SnapshotError::KeysOutOfOrder { key: k.key });
        }
        check_key(&k, next_token, &mut tokens)?;
        for (token, holding) in k.holdings {
            check_session_holding(&state, &k.key, token, &holding)?;
            state.insert_holding(k.key.clone(), k.mode, k.limit, token, holding);
        }
        last_key = Some(k.key);
    }
    state.recount_policy();
    Ok(state)
}

fn add_sessions(state: &mut LockState, parts: SessionsParts) -> Result<(), SnapshotError> {
    let next_session = parts.next_session;
    if next_session < FIRST_SESSION {
        return Err(SnapshotError::NextSessionZero(next_session));
    }
    state.sessions.set_next(next_session);
    let mut last: Option<u64> = None;
    let mut requests = BTreeSet::new();
    let mut principals: BTreeMap<&str, u32> = BTreeMap::new();
    for s in &parts.sessions {
        let id = s.id;
        if last == Some(id) {
            return Err(SnapshotError::DuplicateSession { id });
        }
        if last.is_some_and(|last| id < last) {
            return Err(SnapshotError::SessionsOutOfOrder { id });
        }
        last = Some(id);
        if !(FIRST_SESSION..next_session).contains(&id) {
            return Err(SnapshotError::SessionOutOfRange { id, next_session });
        }
        if s.ttl_ms == 0 {
            return Err(SnapshotError::ZeroTtl { id });
        }
        if !s.request_id.is_empty() {
            let rk = RequestKey {
                holder: s.holder.clone(),
                request_id: s.request_id.clone(),
            };
            if !requests.insert(rk) {
                return Err(SnapshotError::DuplicateSessionRequest {
                    request_id: s.request_id.clone(),
                });
            }
        }
        // The per-principal count is a u32 (max-sessions is one).
        let n = principals.entry(&s.holder.principal).or_insert(0);
        *n = n
            .checked_add(1)
            .ok_or_else(|| SnapshotError::PrincipalSessions {
                principal: s.holder.principal.clone(),
            })?;
    }
    for s in parts.sessions {
        let session = Session::new(s.holder, s.request_id, s.ttl_ms, s.max_holdings);
        state.sessions.insert(s.id, session);
    }
    Ok(())
}

/// A holding in a session: the session lives, is its principal's, has its
/// TTL as the lease, and has room for it.
fn check_session_holding(
    state: &LockState,
    key: &str,
    token: u64,
    h: &Holding,
) -> Result<(), SnapshotError> {
    let session = h.session();
    if session == 0 {
        return Ok(());
    }
    let at = || (key.to_string(), token, session);
    let Some(s) = state.sessions.get(session) else {
        let (key, token, session) = at();
        return Err(SnapshotError::NoSuchSession {
            key,
            token,
            session,
        });
    };
    if h.holder.as_ref().map(|who| &who.principal) != Some(&s.holder.principal) {
        let (key, token, session) = at();
        return Err(SnapshotError::SessionPrincipal {
            key,
            token,
            session,
        });
    }
    if h.lease_ms != s.ttl_ms {
        let (key, token, session) = at();
        return Err(SnapshotError::SessionLease {
            key,
            token,
            session,
            lease_ms: h.lease_ms,
        });
    }
    if !s.has_room() {
        return Err(SnapshotError::OverMaxHoldings {
            session,
            max_holdings: s.max_holdings,
        });
    }
    Ok(())
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
        if h.count() == 0 {
            return Err(SnapshotError::ZeroCount { key: key(), token });
        }
        if h.value().len() > MAX_VALUE_BYTES {
            return Err(SnapshotError::ValueTooLong {
                key: key(),
                token,
                bytes: h.value().len(),
            });
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
