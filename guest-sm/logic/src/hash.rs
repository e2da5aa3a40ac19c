//! The incremental state hash.
//!
//! # Construction
//!
//! * Every holding has a **digest**: SHA-256 of a domain tag and the
//!   holding's canonical encoding — key, token, mode, limit, lease, holder
//!   (or "unknown") and request id; integers as 8 little-endian bytes,
//!   strings and options length- or tag-prefixed, so the encoding is
//!   injective.
//! * The state keeps an **accumulator**: the sum of the digests of all
//!   current holdings, each digest read as four little-endian `u64` lanes
//!   and added lane-wise with wrapping (a sum in the group (Z/2^64)^4). A
//!   grant adds its holding's digest, a release or expiry subtracts it: O(1)
//!   per command. A sum is a function of the *set* of holdings alone, so
//!   the order in which holdings came and went does not matter.
//! * The policy data has a digest of its own (SHA-256 of its canonical
//!   encoding), recomputed only when `set-policy` replaces it.
//! * **state-hash** = SHA-256(domain tag, accumulator, number of holdings,
//!   next token, policy digest): a fixed-size input, so an audit point costs
//!   O(1) and never walks or re-encodes the table.
//!
//! Equal states therefore have equal hashes whatever their history, and a
//! state restored from a snapshot has the hash of the state that wrote it.
//! [`crate::LockState::recomputed_hash`] computes the same value from
//! scratch; tests require the two to agree after every command.
//!
//! # What 0.3 adds
//!
//! A state that uses nothing of 0.3 must hash exactly as in 0.2, so that a
//! 0.2 → 0.3 upgrade audits clean; what 0.3 adds enters only where it is
//! used, each time under a tag of its own (so no 0.3 input is ever hashed
//! as a 0.2 one):
//!
//! * A holding with session 0, count 1 and an empty value has exactly the
//!   0.2 digest. Any other holding's digest is SHA-256 of the **0.3
//!   holding tag**, the same fields encoded the same way, then its session
//!   (8 bytes), count (8 bytes) and value (length-prefixed).
//! * A session has a **session digest**: SHA-256 of the session tag, its
//!   id, principal, owner, request id, TTL and max-holdings. Its holdings
//!   are not in it (each holding's own digest names its session). The
//!   state keeps the sessions' digests in a second accumulator, added and
//!   subtracted as sessions open and end.
//! * While no session was ever opened (`next_session` is 1, so none
//!   exists) **state-hash** is 0.2's. Otherwise it is SHA-256(0.3 state
//!   tag, accumulator, holdings, next token, policy digest, session
//!   accumulator, live sessions, next session): still fixed-size input.
//!
//! The hash detects divergence between replicas; it is not meant to resist
//! someone who chooses holdings to make two states collide.

use sha2::{Digest, Sha256};

use crate::types::{Holder, Mode, PrefixPolicy};

const HOLDING_TAG: &[u8] = b"lockd:sm@0.2.0/holding\0";
const POLICY_TAG: &[u8] = b"lockd:sm@0.2.0/policy\0";
const STATE_TAG: &[u8] = b"lockd:sm@0.2.0/state\0";
const HOLDING_0_3_TAG: &[u8] = b"lockd:sm@0.3.0/holding\0";
const SESSION_TAG: &[u8] = b"lockd:sm@0.3.0/session\0";
const STATE_0_3_TAG: &[u8] = b"lockd:sm@0.3.0/state\0";

/// The id the first session receives: a state whose counter is still here
/// never had a session.
pub const FIRST_SESSION: u64 = 1;

pub use lock_key::Accumulator;

fn put_u64(h: &mut Sha256, x: u64) {
    h.update(x.to_le_bytes());
}

fn put_str(h: &mut Sha256, s: &str) {
    put_u64(h, s.len() as u64);
    h.update(s.as_bytes());
}

fn put_opt(h: &mut Sha256, x: Option<u64>) {
    match x {
        None => h.update([0]),
        Some(x) => {
            h.update([1]);
            put_u64(h, x);
        }
    }
}

/// What a holding's digest covers.
pub struct HoldingFields<'a> {
    pub key: &'a str,
    pub token: u64,
    pub mode: Mode,
    pub limit: u32,
    pub lease_ms: u64,
    pub holder: Option<&'a Holder>,
    pub request_id: &'a str,
    /// 0.3: 0, 1 and "" hash as 0.2.
    pub session: u64,
    pub count: u32,
    pub value: &'a str,
}

impl HoldingFields<'_> {
    /// Whether the holding uses nothing of 0.3 (and so has its 0.2 digest).
    pub fn is_0_2(&self) -> bool {
        self.session == 0 && self.count == 1 && self.value.is_empty()
    }
}

pub fn holding_digest(f: &HoldingFields<'_>) -> [u8; 32] {
    let mut h = Sha256::new();
    let v0_2 = f.is_0_2();
    h.update(if v0_2 { HOLDING_TAG } else { HOLDING_0_3_TAG });
    put_str(&mut h, f.key);
    put_u64(&mut h, f.token);
    h.update([f.mode.tag()]);
    put_u64(&mut h, u64::from(f.limit));
    put_u64(&mut h, f.lease_ms);
    match f.holder {
        None => h.update([0]),
        Some(holder) => {
            h.update([1]);
            put_str(&mut h, &holder.principal);
            put_str(&mut h, &holder.owner);
        }
    }
    put_str(&mut h, f.request_id);
    if !v0_2 {
        put_u64(&mut h, f.session);
        put_u64(&mut h, u64::from(f.count));
        put_str(&mut h, f.value);
    }
    h.finalize().into()
}

/// What a session's digest covers.
pub struct SessionFields<'a> {
    pub id: u64,
    pub holder: &'a Holder,
    pub request_id: &'a str,
    pub ttl_ms: u64,
    pub max_holdings: u32,
}

pub fn session_digest(f: &SessionFields<'_>) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(SESSION_TAG);
    put_u64(&mut h, f.id);
    put_str(&mut h, &f.holder.principal);
    put_str(&mut h, &f.holder.owner);
    put_str(&mut h, f.request_id);
    put_u64(&mut h, f.ttl_ms);
    put_u64(&mut h, u64::from(f.max_holdings));
    h.finalize().into()
}

/// The digest of the policy data, rules in prefix order.
pub fn policy_digest<'a>(rules: impl ExactSizeIterator<Item = &'a PrefixPolicy>) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(POLICY_TAG);
    put_u64(&mut h, rules.len() as u64);
    for r in rules {
        put_str(&mut h, &r.prefix);
        h.update([u8::from(r.reserved)]);
        put_opt(&mut h, r.max_lease_ms);
        put_opt(&mut h, r.max_holders.map(u64::from));
        put_opt(&mut h, r.max_held);
    }
    h.finalize().into()
}

/// The fixed-size parts of the state hash.
pub struct StateParts<'a> {
    /// The holdings' digests, summed.
    pub acc: &'a Accumulator,
    pub holders: u64,
    pub next_token: u64,
    pub policy: &'a [u8; 32],
    /// The sessions' digests, summed.
    pub sessions_acc: &'a Accumulator,
    pub sessions: u64,
    pub next_session: u64,
}

/// The state hash from its fixed-size parts: 0.2's while no session was
/// ever opened.
pub fn state_hash(p: &StateParts<'_>) -> [u8; 32] {
    let v0_2 = p.next_session == FIRST_SESSION && p.sessions == 0;
    let mut h = Sha256::new();
    h.update(if v0_2 { STATE_TAG } else { STATE_0_3_TAG });
    for lane in p.acc.lanes() {
        put_u64(&mut h, lane);
    }
    put_u64(&mut h, p.holders);
    put_u64(&mut h, p.next_token);
    h.update(p.policy);
    if !v0_2 {
        for lane in p.sessions_acc.lanes() {
            put_u64(&mut h, lane);
        }
        put_u64(&mut h, p.sessions);
        put_u64(&mut h, p.next_session);
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(key: &str, token: u64) -> [u8; 32] {
        holding_digest(&HoldingFields {
            key,
            token,
            mode: Mode::Exclusive,
            limit: 1,
            lease_ms: 5,
            holder: None,
            request_id: "",
            session: 0,
            count: 1,
            value: "",
        })
    }

    #[test]
    fn the_encoding_is_injective_at_string_boundaries() {
        let one = |principal: &str, owner: &str| {
            holding_digest(&HoldingFields {
                key: "k",
                token: 1,
                mode: Mode::Shared,
                limit: 2,
                lease_ms: 5,
                holder: Some(&Holder::new(principal, owner)),
                request_id: "",
                session: 0,
                count: 1,
                value: "",
            })
        };
        assert_ne!(one("ab", "c"), one("a", "bc"));
        assert_ne!(digest("k", 1), digest("k", 2));
    }

    /// The 0.3 fields change the digest only when used, and each of them
    /// changes it.
    #[test]
    fn the_0_3_fields_enter_only_when_used() {
        let with = |session, count, value| {
            holding_digest(&HoldingFields {
                key: "k",
                token: 1,
                mode: Mode::Exclusive,
                limit: 1,
                lease_ms: 5,
                holder: None,
                request_id: "",
                session,
                count,
                value,
            })
        };
        let base = with(0, 1, "");
        assert_eq!(base, digest("k", 1));
        let others = [
            with(1, 1, ""),
            with(0, 2, ""),
            with(0, 1, "v"),
            with(0, 0, ""),
        ];
        for (i, d) in others.iter().enumerate() {
            assert_ne!(*d, base, "variant {i}");
            for e in &others[i + 1..] {
                assert_ne!(d, e);
            }
        }
    }

    #[test]
    fn the_state_hash_is_0_2_s_until_a_session_was_opened() {
        let acc = Accumulator::default();
        let policy = [7; 32];
        let parts = |sessions, next_session| StateParts {
            acc: &acc,
            holders: 0,
            next_token: 1,
            policy: &policy,
            sessions_acc: &acc,
            sessions,
            next_session,
        };
        let v0_2 = state_hash(&parts(0, FIRST_SESSION));
        assert_ne!(state_hash(&parts(0, 2)), v0_2, "a session was opened");
        assert_ne!(state_hash(&parts(1, 2)), state_hash(&parts(0, 2)));
    }
}
