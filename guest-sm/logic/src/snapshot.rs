//! Snapshot format 3, 0.2's, still written for a state that uses nothing
//! of 0.3, and `restore` of every format the logic reads.
//!
//! ```text
//! "LKSM" | format: u8 = 3 | postcard(next_token: u64,
//!                                    policy: [prefix-policy],
//!                                    keys: [(key, mode, limit, [(token, lease_ms, holder?, request_id)])])
//! ```
//!
//! Rules in prefix order, keys in key order, holdings in token order: the
//! encoding is canonical. A state with anything of 0.3 (a session was ever
//! opened, a count above 1, a value) is written in format 4
//! ([`crate::format4`]); formats 1 (the 0.1 module, `guest-sm`) and 2
//! (`guest-sm-world01-v2`) are migrated by [`crate::legacy`]. Which formats a
//! module reads is its world's ([`World`]): a 0.2 module refuses format 4,
//! whose sessions and counts it could not serve. Decoding checks every
//! invariant the state relies on (see [`SnapshotError`]) and builds a fresh
//! state through the same primitive grants use, so the derived data
//! (counts, request index, quota counts, session holdings, hash
//! accumulators) is right by construction. Hostile bytes give an error,
//! never a panic: postcard checks lengths and UTF-8 and allocates only as
//! the input really holds data.

use serde::{Deserialize, Serialize};

use crate::error::SnapshotError;
use crate::format4;
use crate::holdings::Holding;
use crate::info::World;
use crate::legacy;
use crate::parts::{body_streamed, build, KeyParts, SessionsParts, MAGIC};
use crate::policy::Policy;
use crate::state::LockState;
use crate::types::{Holder, Mode, PrefixPolicy};

pub const FORMAT: u8 = 3;

/// The body as written: keys and holdings streamed from the table (see
/// [`lock_key::SeqOf`]); read back as `(next_token, policy)` and then
/// [`KeyOwned`] rows (`decode_format_3`).
#[derive(Serialize)]
struct BodyRef<K> {
    next_token: u64,
    policy: Vec<PrefixPolicy>,
    keys: K,
}

#[derive(Serialize)]
struct KeyRef<'a, H> {
    key: &'a str,
    mode: Mode,
    limit: u32,
    /// `(token, lease_ms, holder, request_id)` in token order.
    holdings: H,
}

#[derive(Deserialize)]
struct KeyOwned {
    key: String,
    mode: Mode,
    limit: u32,
    holdings: Vec<(u64, u64, Option<Holder>, String)>,
}

impl LockState {
    /// The state in snapshot format 3 when it uses nothing of 0.3, else in
    /// format 4.
    pub fn snapshot(&self) -> Vec<u8> {
        if !self.is_0_2() {
            return format4::encode(self);
        }
        let body = BodyRef {
            next_token: self.next_token,
            policy: self.policy.rules(),
            keys: lock_key::SeqOf(|| {
                self.keys.iter().map(|(key, k)| KeyRef {
                    key: &key.0,
                    mode: k.mode,
                    limit: k.limit,
                    holdings: lock_key::SeqOf(|| {
                        k.holdings
                            .iter()
                            .map(|(&t, h)| (t, h.lease_ms, &h.holder, h.request_id.as_str()))
                    }),
                })
            }),
        };
        let mut prefix = MAGIC.to_vec();
        prefix.push(FORMAT);
        lock_key::encode_exact(&prefix, &body)
    }

    /// Replace the state with a snapshot of format 3 or 4, or migrate one
    /// of format 1 or 2. On error the state is unchanged.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<(), SnapshotError> {
        self.restore_as(World::V03, bytes)
    }

    /// [`LockState::restore`] as a module of `world`: a 0.2 module reads
    /// formats 1 to 3 only.
    pub fn restore_as(&mut self, world: World, bytes: &[u8]) -> Result<(), SnapshotError> {
        *self = decode_as(world, bytes)?;
        Ok(())
    }
}

/// The newest format a module of `world` reads.
pub fn newest_format(world: World) -> u8 {
    match world {
        // No 0.1 module runs this logic; asked as one, it reads what 0.2 reads.
        World::V01 | World::V02 => FORMAT,
        World::V03 | World::V04 => format4::FORMAT,
    }
}

/// Decode a snapshot of any format the logic reads.
pub fn decode(bytes: &[u8]) -> Result<LockState, SnapshotError> {
    decode_as(World::V03, bytes)
}

/// Decode a snapshot of any format a module of `world` reads.
pub fn decode_as(world: World, bytes: &[u8]) -> Result<LockState, SnapshotError> {
    let newest = newest_format(world);
    let unknown = |format| SnapshotError::UnknownFormat { format, newest };
    let rest = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or(SnapshotError::BadMagic)?;
    let (&format, body) = rest.split_first().ok_or(unknown(0))?;
    match format {
        _ if format > newest => Err(unknown(format)),
        legacy::FORMAT_1 => legacy::decode_format_1(body),
        legacy::FORMAT_2 => legacy::decode_format_2(body),
        FORMAT => decode_format_3(body),
        format4::FORMAT => format4::decode(body),
        other => Err(unknown(other)),
    }
}

/// The body is `(next_token, policy)` then the keys, decoded one at a
/// time into the new state.
fn decode_format_3(bytes: &[u8]) -> Result<LockState, SnapshotError> {
    body_streamed(
        bytes,
        |head: (u64, Vec<PrefixPolicy>), keys: &mut dyn Iterator<Item = KeyOwned>| {
            let (next_token, rules) = head;
            let policy = Policy::from_rules(rules)?;
            build(
                next_token,
                policy,
                SessionsParts::none(),
                keys.map(key_parts),
            )
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
            .map(|(token, lease_ms, holder, request_id)| {
                (token, Holding::new(lease_ms, holder, request_id))
            })
            .collect(),
    }
}
