//! The watch on the native protocol: one request, then a stream of
//! responses under the request's id (docs/watch.md).
//!
//! `ClientRequest::Watch` is answered by any number of
//! `ClientResponse::Changes` and `ClientResponse::Progress`, and ends with
//! one `ClientResponse::Cut` (which also answers a watch that cannot
//! start: its code says why). The node sends the next message only once
//! the previous one is written, so a caller that reads slowly slows its
//! own stream, never the node, and is cut when it falls too far behind.

use serde::{Deserialize, Serialize};

use crate::{HolderId, LockMode};

/// Follow the keys under `prefix`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchRequest {
    pub prefix: Vec<u8>,
    /// The first log index wanted; 0: the next entry applied.
    pub from: u64,
}

/// One entry's changes under the prefix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeBatch {
    /// The entry's log index.
    pub index: u64,
    pub changes: Vec<WatchChange>,
}

/// One change of one key's holders.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchChange {
    pub key: String,
    pub kind: ChangeKind,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChangeKind {
    /// A new holding. `token` is 0 unless the caller may see it (its own
    /// principal's holding, or an admin).
    Granted {
        token: u64,
        lease_ms: u64,
        mode: LockMode,
        limit: u32,
        holder: HolderId,
    },
    Released {
        token: u64,
    },
    Expired {
        token: u64,
    },
    /// The holding with `token` published `value` (after its grant, or a
    /// `proclaim`: an election's leader value). Appended: a client that
    /// does not know it meets it only where values are used.
    Value {
        token: u64,
        value: String,
    },
}

/// Why a watch ended (or did not start), and where to resume.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct WatchCut {
    /// `compacted`, `watch_behind`, `too_many_watchers`, `shutting_down`,
    /// `revoked` (the caller may no longer watch: a reload removed its
    /// token or role, or its certificate expired), or an error's code
    /// (`bad_request`, `forbidden`).
    pub code: String,
    pub message: String,
    /// The index a new watch would go on from.
    pub resume_from: u64,
}

impl WatchCut {
    /// Whether a watch from `resume_from` on another node (or this one,
    /// later) can go on where this one ended: the node went away; the
    /// changes are still kept elsewhere.
    pub fn resumable(&self) -> bool {
        self.code == "shutting_down"
    }
}
