//! Snapshot format 2:
//!
//! ```text
//! "LKSM" | format: u8 = 2 | postcard(policy: str, next_token: u64, held: u64, locks: [(key, lease_ms, token)])
//! ```
//!
//! Format 1 (`guest_sm::snapshot`) is read too and migrated: same locks,
//! same token counter.

use guest_sm::snapshot::{SnapshotError, MAGIC};
use guest_sm::LockTable;
use serde::{Deserialize, Serialize};

use crate::RESERVED_PREFIX;

pub const FORMAT: u8 = 2;

#[derive(Serialize, Deserialize)]
struct Body {
    policy: String,
    next_token: u64,
    held: u64,
    locks: Vec<(String, u64, u64)>,
}

pub fn encode(table: &LockTable) -> Vec<u8> {
    let locks: Vec<(String, u64, u64)> = table
        .locks(None, usize::MAX)
        .into_iter()
        .map(|h| (h.key, h.lease_ms, h.token))
        .collect();
    let body = Body {
        policy: RESERVED_PREFIX.into(),
        next_token: table.stats().next_token,
        held: locks.len() as u64,
        locks,
    };
    let mut out = MAGIC.to_vec();
    out.push(FORMAT);
    // Serialising strings and integers into a Vec cannot fail.
    postcard::to_extend(&body, out).expect("postcard encoding into a Vec is infallible")
}

pub fn decode(bytes: &[u8]) -> Result<LockTable, SnapshotError> {
    match bytes.get(4) {
        Some(&guest_sm::snapshot::FORMAT) if bytes.starts_with(MAGIC) => {
            guest_sm::snapshot::decode(bytes)
        }
        Some(&FORMAT) if bytes.starts_with(MAGIC) => {
            let (body, rest): (Body, &[u8]) = postcard::take_from_bytes(&bytes[5..])
                .map_err(|e| SnapshotError::Decode(e.to_string()))?;
            if !rest.is_empty() {
                return Err(SnapshotError::TrailingBytes(rest.len()));
            }
            if body.held != body.locks.len() as u64 {
                return Err(SnapshotError::Decode(format!(
                    "header says {} locks, body has {}",
                    body.held,
                    body.locks.len()
                )));
            }
            // The checks every format shares: key order, token range and
            // uniqueness.
            guest_sm::snapshot::table_from_parts(
                body.next_token,
                body.locks.into_iter().map(|(k, l, t)| (k, t, l)),
            )
        }
        Some(other) if bytes.starts_with(MAGIC) => Err(SnapshotError::UnknownFormat(*other)),
        _ if bytes.starts_with(MAGIC) => Err(SnapshotError::UnknownFormat(0)),
        _ => Err(SnapshotError::BadMagic),
    }
}
