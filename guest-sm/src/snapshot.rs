//! The snapshot encoding of a [`LockTable`].
//!
//! ```text
//! "LKSM" | format: u8 = 1 | postcard(next_token: u64, locks: [(key, token, lease_ms)])
//! ```
//!
//! Locks are written in key order, so the encoding is canonical: one state,
//! one byte string. Decoding checks everything a corrupt or hand-made
//! snapshot could get wrong (magic, format, trailing bytes, key order, token
//! range and uniqueness) and reports which.
//!
//! The format has not changed since the first module; the state hash has
//! (see [`crate::hash`]), so a snapshot written by any earlier build of this
//! module restores here and gets the new hash.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::command::LockInfo;
use crate::hash::{lock_digest, Accumulator};
use crate::key::Key;
use crate::table::{LockTable, FIRST_TOKEN};

pub const MAGIC: &[u8; 4] = b"LKSM";
pub const FORMAT: u8 = 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotError {
    BadMagic,
    UnknownFormat(u8),
    Decode(String),
    TrailingBytes(usize),
    KeysOutOfOrder {
        key: String,
    },
    TokenOutOfRange {
        key: String,
        token: u64,
        next_token: u64,
    },
    DuplicateToken {
        token: u64,
    },
}

impl core::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SnapshotError::BadMagic => write!(f, "not a lock-sm snapshot (bad magic)"),
            SnapshotError::UnknownFormat(v) => write!(
                f,
                "unknown snapshot format {v} (this module reads format {FORMAT})"
            ),
            SnapshotError::Decode(e) => write!(f, "snapshot body does not decode: {e}"),
            SnapshotError::TrailingBytes(n) => {
                write!(f, "{n} trailing bytes after the snapshot body")
            }
            SnapshotError::KeysOutOfOrder { key } => {
                write!(f, "keys not in strictly ascending order at {key:?}")
            }
            SnapshotError::TokenOutOfRange {
                key,
                token,
                next_token,
            } => {
                write!(
                    f,
                    "token {token} of {key:?} is not below next_token {next_token}"
                )
            }
            SnapshotError::DuplicateToken { token } => write!(f, "token {token} is held twice"),
        }
    }
}

impl std::error::Error for SnapshotError {}

/// The body as written: `locks` streamed from the table (see
/// [`lock_key::SeqOf`]), encoded as a `Vec<(&str, u64, u64)>` would be.
#[derive(Serialize)]
struct BodyRef<L> {
    next_token: u64,
    locks: L,
}

pub fn encode(table: &LockTable) -> Vec<u8> {
    let body = BodyRef {
        next_token: table.next_token,
        locks: lock_key::SeqOf(|| {
            table
                .locks
                .iter()
                .map(|(k, i)| (k.0.as_str(), i.token, i.lease_ms))
        }),
    };
    let [m0, m1, m2, m3] = *MAGIC;
    lock_key::encode_exact(&[m0, m1, m2, m3, FORMAT], &body)
}

pub fn decode(bytes: &[u8]) -> Result<LockTable, SnapshotError> {
    let rest = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or(SnapshotError::BadMagic)?;
    let (&format, body) = rest.split_first().ok_or(SnapshotError::UnknownFormat(0))?;
    if format != FORMAT {
        return Err(SnapshotError::UnknownFormat(format));
    }
    // `next_token`, then the locks, one at a time into the new table: no
    // decoded copy of every lock beside it.
    lock_key::decode_streamed(
        body,
        |next_token: u64, locks: &mut dyn Iterator<Item = (String, u64, u64)>| {
            table_from_parts(next_token, locks)
        },
    )
    .map_err(|e| match e {
        lock_key::Streamed::Decode(e) => SnapshotError::Decode(e.to_string()),
        lock_key::Streamed::Trailing(n) => SnapshotError::TrailingBytes(n),
        lock_key::Streamed::Built(e) => e,
    })
}

/// Build a table from its parts — `locks` as `(key, token, lease_ms)` in key
/// order — checking what every snapshot format must hold: keys strictly
/// ascending, every token below `next_token` and none used twice. Shared by
/// the decoders of every format. One pass: the table is built as the locks
/// come, and dropped on the first broken rule.
pub fn table_from_parts(
    next_token: u64,
    parts: impl IntoIterator<Item = (String, u64, u64)>,
) -> Result<LockTable, SnapshotError> {
    if next_token < FIRST_TOKEN {
        return Err(SnapshotError::Decode(format!(
            "next_token {next_token} is below {FIRST_TOKEN}"
        )));
    }
    let mut locks: BTreeMap<Key, LockInfo> = BTreeMap::new();
    let mut tokens = BTreeSet::new();
    let mut acc = Accumulator::default();
    for (key, token, lease_ms) in parts {
        if locks
            .last_key_value()
            .is_some_and(|(prev, _)| prev.0.as_str() >= key.as_str())
        {
            return Err(SnapshotError::KeysOutOfOrder { key });
        }
        if !(FIRST_TOKEN..next_token).contains(&token) {
            return Err(SnapshotError::TokenOutOfRange {
                key,
                token,
                next_token,
            });
        }
        if !tokens.insert(token) {
            return Err(SnapshotError::DuplicateToken { token });
        }
        let info = LockInfo { token, lease_ms };
        acc.add(&lock_digest(&key, &info));
        locks.insert(Key(key), info);
    }
    Ok(LockTable {
        locks,
        next_token,
        acc,
    })
}

impl LockTable {
    /// The state in the snapshot encoding.
    pub fn snapshot(&self) -> Vec<u8> {
        encode(self)
    }

    /// Replace the state with a decoded snapshot. On error the state is left
    /// exactly as it was.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<(), SnapshotError> {
        *self = decode(bytes)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Command;

    fn table() -> LockTable {
        let mut t = LockTable::new();
        for k in ["x", "a", "m"] {
            t.apply(Command::Grant {
                key: k.into(),
                lease_ms: 100,
            });
        }
        t
    }

    #[test]
    fn round_trip_is_canonical() {
        let t = table();
        let bytes = encode(&t);
        let back = decode(&bytes).unwrap();
        assert_eq!(back, t);
        assert_eq!(encode(&back), bytes);
    }

    #[test]
    fn rejects_what_is_not_a_snapshot() {
        assert_eq!(decode(b"nope"), Err(SnapshotError::BadMagic));
        assert_eq!(decode(b"LKSM\x09"), Err(SnapshotError::UnknownFormat(9)));
        let mut bytes = encode(&table());
        bytes.push(0);
        assert_eq!(decode(&bytes), Err(SnapshotError::TrailingBytes(1)));
        let bytes = encode(&table());
        assert!(matches!(
            decode(&bytes[..bytes.len() - 2]),
            Err(SnapshotError::Decode(_))
        ));
    }

    #[test]
    fn rejects_broken_invariants() {
        let mut body: Vec<u8> = vec![];
        body.extend_from_slice(MAGIC);
        body.push(FORMAT);
        let bad = BodyRef {
            next_token: 3,
            locks: vec![("b", 1u64, 1u64), ("a", 2, 1)],
        };
        let body = postcard::to_extend(&bad, body).unwrap();
        assert_eq!(
            decode(&body),
            Err(SnapshotError::KeysOutOfOrder { key: "a".into() })
        );

        let body = body[..5].to_vec();
        let bad = BodyRef {
            next_token: 2,
            locks: vec![("a", 1u64, 1u64), ("b", 2, 1)],
        };
        let body = postcard::to_extend(&bad, body).unwrap();
        assert!(matches!(
            decode(&body),
            Err(SnapshotError::TokenOutOfRange { token: 2, .. })
        ));

        let body = body[..5].to_vec();
        let bad = BodyRef {
            next_token: 5,
            locks: vec![("a", 1u64, 1u64), ("b", 1, 1)],
        };
        let body = postcard::to_extend(&bad, body).unwrap();
        assert_eq!(
            decode(&body),
            Err(SnapshotError::DuplicateToken { token: 1 })
        );
    }
}
