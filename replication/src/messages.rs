//! The peer protocol's messages: every request one node sends another
//! over the peer transport and every answer, with the payloads of the
//! lockd-own ones (the module pre-check, the pre-vote, the leader's
//! resignation). One home, below everything that sends or answers them:
//! `raft::network` and `raft::peer_client` send them, `api::services::peer`
//! answers them, `modules::precheck`, `raft::stand` and `raft::handoff`
//! make and read their payloads.
//!
//! A persisted format: the encoding (postcard) is pinned by
//! `tests/sm/golden_wire.rs` and `tests/golden/peer_*.hex`; new variants
//! and new fields only at the end, through a new variant.

use lockd_core::signature::{ModuleSignature, SignedFor};
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};

use super::{LogId, NodeId, TypeConfig, Vote};

/// A Raft RPC from one node to another.
#[derive(Debug, Serialize, Deserialize)]
pub enum PeerRequest {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// The leader asks a voter to pre-check a candidate module
    /// (`modules::precheck`).
    Precheck(PrecheckAsk),
    /// A node that wants to stand asks whether a voter would vote for it
    /// (`raft::prevote`).
    PreVote(PreVoteAsk),
    /// A stopping leader names its successor (`raft::handoff`).
    Resign(ResignNotice),
    /// On this connection, while reading or answering a request, send a
    /// [`PeerResponse::Working`] frame at least every `every_ms` (clamped
    /// by the answering node); answered [`PeerResponse::KeepAlive`]. A
    /// connection setting, answered by the connection, never by Raft.
    KeepAlive {
        every_ms: u64,
    },
    /// The pre-check ask with what admission needs (the signature the
    /// upgrade or shadow carries): what a leader sends since signatures
    /// are checked before a voter compiles anything.
    SignedPrecheck(SignedPrecheckAsk),
}

/// The answer to a [`PeerRequest`]; `Error` when the request itself could
/// not be handled (e.g. a client frame sent on a peer connection),
/// `NotMember` when the sender is not a member of the answering node's
/// membership (the reason as text; the sender stops starting elections,
/// `raft::non_member`). New variants go at the end: the wire is pinned by
/// `tests/sm/golden_wire.rs`.
#[derive(Debug, Serialize, Deserialize)]
pub enum PeerResponse {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    Error(String),
    NotMember(String),
    /// A voter's verdict on a candidate module.
    Precheck(PrecheckAnswer),
    /// A voter's answer to a pre-vote.
    PreVote(PreVoteAnswer),
    /// A resign notice was read.
    Resigned,
    /// Still reading or working on the request of this frame's id (id 0:
    /// a request not read whole yet).
    Working,
    /// To `KeepAlive`: keep-alive frames will come every `every_ms`.
    KeepAlive {
        every_ms: u64,
    },
}

impl crate::peer_conn::Reply for PeerResponse {
    fn is_keep_alive(&self) -> bool {
        matches!(self, PeerResponse::Working)
    }
}

/// "Would you vote for me?": the vote the node would stand with (its term
/// plus one, for itself: the peer gate checks it names the caller) and its
/// last log id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreVoteAsk {
    pub vote: Vote,
    pub last_log_id: Option<LogId>,
}

/// A voter's answer. New variants go at the end (pinned).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PreVoteAnswer {
    Granted,
    /// It heard a leader too recently; in `wait_ms` it would say yes, if
    /// it hears none meanwhile.
    LeaderHeard {
        wait_ms: u64,
    },
    /// Its log is longer than the candidate's.
    LongerLog,
    /// It leads.
    Leads,
    /// It is not a voter, or its Raft has stopped.
    CannotVote,
    /// The asker is not a voter of the membership it has committed (a
    /// learner, or a node removed since): it may not stand.
    NotVoter,
}

/// "I stop leading (this vote is mine); `successor` should stand."
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResignNotice {
    pub vote: Vote,
    pub successor: NodeId,
}

/// The leader's question to a voter. A peer message: new fields only
/// through a new variant (the wire is pinned by `tests/sm/golden_wire.rs`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PrecheckAsk {
    /// The asking leader's vote (the peer gate checks term and sender).
    pub vote: Vote,
    /// The candidate's component bytes.
    pub module: Vec<u8>,
    /// Marked as a rollback: no version order.
    pub rollback: bool,
}

/// [`PrecheckAsk`] with the signature the candidate carries and what it
/// is signed for: a voter checks it, as apply would, before it compiles
/// anything. A peer message (pinned by `tests/sm/golden_wire.rs`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SignedPrecheckAsk {
    pub ask: PrecheckAsk,
    pub signature: Option<ModuleSignature>,
    pub signed_for: SignedFor,
}

impl SignedPrecheckAsk {
    /// An older leader's ask: no signature.
    pub fn unsigned(ask: PrecheckAsk) -> SignedPrecheckAsk {
        SignedPrecheckAsk {
            ask,
            signature: None,
            signed_for: SignedFor::Upgrade,
        }
    }
}

/// A voter's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrecheckAnswer {
    pub accepted: bool,
    /// Why it refused.
    pub reason: Option<String>,
    /// Time to load (compile or take from the cache), µs.
    pub compile_us: u64,
    /// Time to migrate the live state, µs.
    pub migrate_us: u64,
}

impl PrecheckAnswer {
    /// A refusal with its reason (nothing was loaded or migrated).
    pub fn refused(reason: String) -> PrecheckAnswer {
        PrecheckAnswer {
            accepted: false,
            reason: Some(reason),
            compile_us: 0,
            migrate_us: 0,
        }
    }
}
