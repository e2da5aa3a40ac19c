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
//! The hash detects divergence between replicas; it is not meant to resist
//! someone who chooses holdings to make two states collide.

use sha2::{Digest, Sha256};

use crate::types::{Holder, Mode, PrefixPolicy};

const HOLDING_TAG: &[u8] = b"lockd:sm@0.2.0/holding\0";
const POLICY_TAG: &[u8] = b"lockd:sm@0.2.0/policy\0";
const STATE_TAG: &[u8] = b"lockd:sm@0.2.0/state\0";

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
}

pub fn holding_digest(f: &HoldingFields<'_>) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(HOLDING_TAG);
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

/// The state hash from its fixed-size parts.
pub fn state_hash(acc: &Accumulator, holders: u64, next_token: u64, policy: &[u8; 32]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(STATE_TAG);
    for lane in acc.lanes() {
        put_u64(&mut h, lane);
    }
    put_u64(&mut h, holders);
    put_u64(&mut h, next_token);
    h.update(policy);
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
            })
        };
        assert_ne!(one("ab", "c"), one("a", "bc"));
        assert_ne!(digest("k", 1), digest("k", 2));
    }
}
