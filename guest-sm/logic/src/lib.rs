//! The lock logic of the reference modules of worlds `lockd:sm@0.2.0`
//! (`guest-sm/world02`), `lockd:sm@0.3.0` (`guest-sm/world03`) and
//! `lockd:sm@0.4.0` (`guest-sm/world04`, 0.3's and [`pick`]): the
//! superset of them, in plain, pure Rust with no export layer. Each module
//! is this crate plus its own `component.rs`, which converts its world's
//! WIT values to these types; a crate of its own because two modules that
//! shared an rlib with `wit-bindgen` exports would export `apply` twice.
//!
//! A 0.2 module fills the 0.3 fields of its commands with their defaults
//! (no session, not reentrant, no value) and, on such input, this logic is
//! the 0.2 module exactly: same outcomes, same state hash, same snapshot
//! bytes (format 3). The golden files under `golden/` pin it.
//!
//! # What it does
//!
//! * **Modes and limits.** An exclusive grant with limit 1 is the seed's
//!   mutex, exactly (the differential test against `guest-sm` checks it);
//!   exclusive with limit N is a counting semaphore; shared holders are the
//!   readers of a readers-writer lock (at most `limit` of them). Holders of
//!   the two modes never hold a key together, and all holders of a key must
//!   ask for the same limit (another limit is refused as `unsupported`).
//! * **Holders.** Every grant records its holder (principal, set by the
//!   leader, and owner) and request id; release and expire name the holding
//!   by `(key, token)`.
//! * **Idempotent grants.** A grant repeating a live holding's `(principal,
//!   owner, request-id)` gets that holding's token back (`repeat`), never a
//!   second holding and never `busy` behind itself. Request ids are
//!   remembered exactly as long as their holding lives ([`apply`]).
//! * **Fair waiting.** No queue here: the host keeps FIFO waiters. The
//!   logic's part is the busy barrier within an entry ([`apply`]), which
//!   keeps a queued reader from overtaking a queued writer.
//! * **Policy data** in the replicated state, replaced by `set-policy`:
//!   reserved prefixes, lease caps, max holders and quotas per prefix
//!   ([`policy`]).
//! * **Sessions** (0.3): a holding may live as long as a session instead of
//!   a lease; ending the session (closed, or expired by the leader) removes
//!   its holdings in one entry. Ids are never reused ([`session_ops`]).
//! * **Reentrant holdings** (0.3): a holder that holds a key enters it
//!   again with the same token and a count; a release takes one count off
//!   ([`grant`]).
//! * **Values** (0.3): a holding carries up to 4096 bytes its holder
//!   publishes, set by the grant and replaced by `proclaim` — with an
//!   exclusive key, a leader election's announcement.
//! * **Election policy** (0.4): which waiting candidate takes a key that
//!   frees: the highest priority, then a leader whose lease just ran out,
//!   then the oldest ([`pick`]; a leader's query, never a command).
//! * **Fencing tokens** strictly increase across all grants and are never
//!   reused: one counter in the state, carried through snapshots and
//!   migrations. Token `u64::MAX` is never issued; a grant that would need
//!   it is refused.
//! * **Incremental state hash**, O(1) per command and per audit, equal to
//!   0.2's while nothing of 0.3 is used ([`hash`]).
//! * **Migration and downgrade.** `restore` reads formats 1 to 4 (a 0.2
//!   module: 1 to 3); `downgrade-snapshot` writes the 0.1 format when the
//!   state fits it ([`legacy`]).
//!
//! # Layout
//!
//! * [`types`]: commands and outcomes; [`info`]: the query records and the
//!   features of each [`World`].
//! * [`state`]: [`LockState`], the primitives every change of a holding
//!   goes through, and the queries; [`holdings`]: what it keeps per key;
//!   [`sessions`]: what it keeps per session.
//! * [`apply`]: the entry, its busy barrier, release, expire, proclaim and
//!   set-policy; [`grant`]: the grant's checks in order, repeat and
//!   reentry; [`session_ops`]: opening and ending sessions.
//! * [`policy`]: the policy data and how a key's rules combine.
//! * [`hash`]: the incremental state hash and its construction.
//! * [`snapshot`]: format 3 and `restore`; [`format4`]: format 4;
//!   [`legacy`]: formats 1 and 2 and the downgrade; [`parts`]: what every
//!   format decodes into, and the shared checks.
//! * [`pick`]: the election policy of the 0.4 module.
//! * [`error`]: the snapshot and downgrade errors, each with a precise
//!   message ([`PolicyError`] lives with the policy).
//!
//! # Determinism and hostile input
//!
//! Nothing here reads a clock, a random source or an address; all state is
//! in `BTreeMap`s. No input makes it panic: counters saturate or are
//! checked, a snapshot of any bytes decodes to a state or an error.

pub mod apply;
pub mod error;
pub mod format4;
pub mod grant;
pub mod hash;
pub mod holdings;
pub mod info;
pub mod legacy;
pub mod parts;
pub mod pick;
pub mod policy;
pub mod session_ops;
pub mod sessions;
pub mod snapshot;
pub mod state;
pub mod types;

#[cfg(test)]
mod tests;

pub use error::{DowngradeError, SnapshotError};
pub use info::{Counters, Features, HolderInfo, KeyHolders, PolicyKinds, SessionInfo, World};
pub use pick::{pick, Candidate};
pub use policy::PolicyError;
pub use state::LockState;
pub use types::{
    Command, Grant, Holder, LockRef, Mode, OpenSession, Outcome, PrefixPolicy, Proclaim, Reason,
    MAX_VALUE_BYTES,
};
