//! The incremental state hash of a [`LockTable`].
//!
//! * Every held lock has a **digest**: SHA-256 of a domain tag and the
//!   lock's canonical encoding (key length as 8 little-endian bytes, key,
//!   token, lease), so the encoding is injective.
//! * The table keeps the **sum** of the digests of its locks
//!   ([`Accumulator`]): a grant adds, a release or an expiry that removes
//!   subtracts. O(1) per command.
//! * **state-hash** = SHA-256(domain tag, sum, number of locks, next token):
//!   a fixed-size input, so an audit point or a status costs O(1) and never
//!   re-encodes the table (the first builds hashed the whole snapshot
//!   encoding, which grew with the table until it ran out of fuel).
//!
//! Equal states have equal hashes whatever their history, and a state
//! restored from a snapshot has the hash of the state that wrote it:
//! [`crate::LockTable::recomputed_hash`] computes the same value from
//! scratch, and tests require the two to agree after every command.

use sha2::{Digest, Sha256};

pub use crate::key::Accumulator;

use crate::command::LockInfo;

const LOCK_TAG: &[u8] = b"lockd:sm@0.1.0/lock\0";
const STATE_TAG: &[u8] = b"lockd:sm@0.1.0/state\0";

/// The digest of one held lock.
pub fn lock_digest(key: &str, info: &LockInfo) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(LOCK_TAG);
    h.update((key.len() as u64).to_le_bytes());
    h.update(key.as_bytes());
    h.update(info.token.to_le_bytes());
    h.update(info.lease_ms.to_le_bytes());
    h.finalize().into()
}

/// The state hash from its fixed-size parts.
pub fn state_hash(acc: &Accumulator, held: u64, next_token: u64) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(STATE_TAG);
    for lane in acc.lanes() {
        h.update(lane.to_le_bytes());
    }
    h.update(held.to_le_bytes());
    h.update(next_token.to_le_bytes());
    h.finalize().into()
}
