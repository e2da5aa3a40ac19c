//! The peer protocol's messages: every request one node sends another
//! over the peer transport and every answer, with the payloads of
//! consensus's own (the pre-vote, the leader's resignation). One home,
//! below everything that sends or answers them: [`crate::network`] and
//! [`crate::peer_client`] send them, [`crate::peer_answer`] answers them
//! (on the node's connection), [`crate::stand`] and [`crate::handoff`]
//! make and read their payloads.
//!
//! The layer above (the lock service's module pre-check) has messages of
//! its own on the same connections; this crate carries them without
//! knowing what they are: their types come in through [`ServiceMessages`],
//! which the service implements (`lockd_service::modules::peer_messages`).
//! The crate's own calls use [`RaftOnly`], whose service messages cannot
//! be made. Either way a message's bytes are the same: postcard writes a
//! variant's index and its fields, never the type's name.
//!
//! A persisted format: the encoding (postcard) is pinned by
//! `tests/sm/golden_peer.rs` and `tests/golden/peer_*.hex`; new variants
//! and new fields only at the end, through a new variant.

use std::fmt::Debug;

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{LogId, NodeId, TypeConfig, Vote};

/// A message type of the layer above, carried as it is.
pub trait Carried: Serialize + DeserializeOwned + Debug + Send + 'static {}
impl<T: Serialize + DeserializeOwned + Debug + Send + 'static> Carried for T {}

/// An ask of the layer above: carried, and checked only for the vote it
/// is sent under (the peer gate: its term, and that its sender is the
/// connection's node).
pub trait Asked: Carried {
    /// The vote of the leader that asks.
    fn vote(&self) -> &Vote;
}

/// The message types of the layer above (the module pre-check): an older
/// leader's ask, today's ask, and the answer to both.
pub trait ServiceMessages: Debug + Send + Sync + 'static {
    /// [`PeerRequest::ServiceFirst`]'s payload.
    type FirstAsk: Asked;
    /// [`PeerRequest::Service`]'s payload.
    type Ask: Asked;
    /// [`PeerResponse::Service`]'s payload.
    type Answer: Carried;
}

/// The peer protocol as consensus alone knows it: no service message can
/// be made or read through it (one arrives as a decoding error).
#[derive(Debug)]
pub enum RaftOnly {}

/// No value: [`RaftOnly`]'s service messages.
#[derive(Debug, Serialize, Deserialize)]
pub enum Nothing {}

impl Asked for Nothing {
    fn vote(&self) -> &Vote {
        match *self {}
    }
}

impl ServiceMessages for RaftOnly {
    type FirstAsk = Nothing;
    type Ask = Nothing;
    type Answer = Nothing;
}

/// A Raft RPC from one node to another.
#[derive(Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub enum PeerRequest<S: ServiceMessages = RaftOnly> {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// The layer above's first ask (an older leader's module pre-check,
    /// without the signature).
    ServiceFirst(S::FirstAsk),
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
    /// The layer above's ask (the module pre-check with the signature the
    /// candidate carries).
    Service(S::Ask),
}

/// The answer to a [`PeerRequest`]; `Error` when the request itself could
/// not be handled (e.g. a client frame sent on a peer connection),
/// `NotMember` when the sender is not a member of the answering node's
/// membership (the reason as text; the sender stops starting elections,
/// `raft::non_member`). New variants go at the end: the wire is pinned by
/// `tests/sm/golden_peer.rs`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub enum PeerResponse<S: ServiceMessages = RaftOnly> {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    Error(String),
    NotMember(String),
    /// The layer above's answer (a voter's verdict on a candidate module).
    Service(S::Answer),
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

impl<S: ServiceMessages> crate::peer_conn::Reply for PeerResponse<S> {
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
