//! Peer RPCs checked before openraft sees them (docs/configuration.md,
//! "Peers"). openraft trusts its peers: a vote with term `u64::MAX` is
//! persisted (and the next election's `term + 1` wraps), a snapshot chunk
//! at a far offset makes the receiving buffer zero-fill up to it.
//! [`PeerGate::check`] refuses, with a reason, what no correct peer sends:
//!
//! * a lock entry bigger than one AppendEntries batch may be
//!   ([`MAX_APPEND_BYTES`]; an honest leader cuts lock entries at a
//!   fraction of it, and every version ever did: 4096 commands of the
//!   longest strings make about 6 MiB);
//! * a term above [`MAX_TERM`] (2^48: an election every millisecond would
//!   take nine thousand years to get there, and far below wrapping);
//! * an RPC whose sender is not the node its connection's hello named;
//! * a sender that is not a voter or learner of this node's membership
//!   (the last one in its own log, which only members wrote), unless this
//!   node has no membership yet (it is being added). A request never
//!   vouches for its sender: a membership entry or a snapshot that names
//!   the sender does not let it in, since the sender wrote it. (A node
//!   that missed the change adding the node that now leads refuses that
//!   leader until another member leads; docs/security.md, "Peers".);
//! * a snapshot chunk that does not continue the bytes received so far of
//!   its snapshot (a new snapshot starts at offset 0; a resent chunk may
//!   start earlier), or that ends past the size cap.
//!
//! Pure apart from the record of the snapshot being received, so the rules
//! are unit-tested here; the node answers a refusal with
//! `PeerResponse::NotMember` when the sender is not a member (the sender
//! then stops starting elections, `raft::non_member`) and with
//! `PeerResponse::Error` otherwise, and logs it.

use std::sync::Mutex;

use openraft::EntryPayload;

use super::messages::{Asked, PeerRequest, ServiceMessages};
use super::network::MAX_APPEND_BYTES;
use super::{NodeId, Request};

/// The highest term a peer may send.
pub(crate) const MAX_TERM: u64 = 1 << 48;

/// The default cap on a snapshot's size in bytes: the guest memory limit
/// (1 GiB) with room for the module and membership.
pub const DEFAULT_MAX_SNAPSHOT_BYTES: u64 = (1 << 30) + (256 << 20);

/// Why a peer request was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Refusal {
    #[error("node {0} is not a member")]
    NotMember(NodeId),
    #[error("{0}")]
    Invalid(String),
}

impl From<String> for Refusal {
    fn from(why: String) -> Refusal {
        Refusal::Invalid(why)
    }
}

#[derive(Debug)]
pub struct PeerGate {
    max_snapshot_bytes: u64,
    /// The snapshot being received: its id and the bytes received so far.
    receiving: Mutex<Option<(String, u64)>>,
}

impl PeerGate {
    pub fn new(max_snapshot_bytes: u64) -> PeerGate {
        PeerGate {
            max_snapshot_bytes,
            receiving: Mutex::new(None),
        }
    }

    /// Whether `req`, from the peer whose hello said `from`, may reach
    /// openraft. `member(id)` says whether this node's membership has
    /// `id`; `None` when it has no membership yet. A closure, so the
    /// replication path asks one question instead of copying the members.
    pub fn check<S: ServiceMessages>(
        &self,
        from: NodeId,
        req: &PeerRequest<S>,
        member: impl Fn(NodeId) -> Option<bool>,
    ) -> Result<(), Refusal> {
        let vote = match req {
            PeerRequest::AppendEntries(r) => &r.vote,
            PeerRequest::Vote(r) => &r.vote,
            PeerRequest::InstallSnapshot(r) => &r.vote,
            PeerRequest::ServiceFirst(r) => r.vote(),
            PeerRequest::Service(r) => r.vote(),
            PeerRequest::PreVote(r) => &r.vote,
            PeerRequest::Resign(r) => &r.vote,
            // A setting of the connection it comes on: nothing for Raft.
            PeerRequest::KeepAlive { .. } => return Ok(()),
        };
        let term = vote.leader_id.term;
        if term > MAX_TERM {
            return Err(format!("term {term} is above the plausible {MAX_TERM}").into());
        }
        if let PeerRequest::AppendEntries(r) = req {
            if let Some(e) = r.entries.iter().find(|e| e.log_id.leader_id.term > term) {
                return Err(
                    format!("entry {} is of a term above the request's {term}", e.log_id).into(),
                );
            }
            for e in &r.entries {
                if let EntryPayload::Normal(
                    req @ (Request::Lock(_) | Request::Commands(_) | Request::Commands03(_)),
                ) = &e.payload
                {
                    let bytes = req.wire_bytes();
                    if bytes > MAX_APPEND_BYTES {
                        return Err(format!(
                            "lock entry {} takes {bytes} bytes, above the bound of {MAX_APPEND_BYTES}",
                            e.log_id
                        )
                        .into());
                    }
                }
            }
        }
        if let Some(sender) = vote.leader_id.voted_for() {
            if sender != from {
                return Err(format!(
                    "the request is from node {sender}, but the connection is node {from}'s"
                )
                .into());
            }
        }
        if member(from) == Some(false) {
            return Err(Refusal::NotMember(from));
        }
        if let PeerRequest::InstallSnapshot(r) = req {
            self.check_chunk(&r.meta.snapshot_id, r.offset, r.data.len() as u64)?;
        }
        Ok(())
    }

    fn check_chunk(&self, id: &str, offset: u64, len: u64) -> Result<(), String> {
        let end = offset.saturating_add(len);
        if end > self.max_snapshot_bytes {
            return Err(format!(
                "snapshot {id} would reach {end} bytes, above the cap of {}",
                self.max_snapshot_bytes
            ));
        }
        let mut receiving = self.receiving.lock().unwrap_or_else(|p| p.into_inner());
        let received = match receiving.as_ref() {
            Some((current, n)) if current == id => *n,
            _ => 0,
        };
        if offset > received {
            return Err(format!(
                "snapshot {id}: a chunk at offset {offset}, but {received} bytes have arrived"
            ));
        }
        *receiving = Some((id.to_string(), received.max(end)));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::raft::{InstallSnapshotRequest, VoteRequest};
    use openraft::{SnapshotMeta, Vote};

    fn vote(term: u64, node: NodeId) -> PeerRequest {
        PeerRequest::Vote(VoteRequest {
            vote: Vote::new(term, node),
            last_log_id: None,
        })
    }

    fn chunk(term: u64, node: NodeId, id: &str, offset: u64, len: usize) -> PeerRequest {
        PeerRequest::InstallSnapshot(InstallSnapshotRequest {
            vote: Vote::new_committed(term, node),
            meta: SnapshotMeta {
                snapshot_id: id.to_string(),
                ..Default::default()
            },
            offset,
            data: vec![0; len],
            done: false,
        })
    }

    fn members(id: NodeId) -> Option<bool> {
        Some((1..=3).contains(&id))
    }

    fn none_yet(_: NodeId) -> Option<bool> {
        None
    }

    #[test]
    fn an_implausible_term_is_refused() {
        let g = PeerGate::new(1 << 20);
        assert!(g.check(2, &vote(5, 2), members).is_ok());
        let e = g
            .check(2, &vote(u64::MAX, 2), members)
            .unwrap_err()
            .to_string();
        assert!(e.contains("plausible"), "{e}");
    }

    #[test]
    fn a_sender_unlike_its_hello_or_not_a_member_is_refused() {
        let g = PeerGate::new(1 << 20);
        let e = g.check(3, &vote(5, 2), members).unwrap_err().to_string();
        assert!(e.contains("node 3's"), "{e}");
        let e = g.check(9, &vote(5, 9), members).unwrap_err();
        assert_eq!(e, Refusal::NotMember(9));
        // A node with no membership yet (being added) takes it.
        assert!(g.check(9, &vote(5, 9), none_yet).is_ok());
    }

    #[test]
    fn a_non_member_cannot_vouch_for_itself() {
        use openraft::{Membership, StoredMembership};
        let g = PeerGate::new(1 << 20);
        let naming_9 = Membership::<NodeId, crate::Node>::new(
            vec![[1, 2, 9].into_iter().collect()],
            [1, 2, 9]
                .into_iter()
                .map(|id| (id, crate::Node::default()))
                .collect::<std::collections::BTreeMap<_, _>>(),
        );
        let mut append = append(7, 9, Request::Commands(vec![]));
        if let PeerRequest::AppendEntries(r) = &mut append {
            r.entries[0].payload = EntryPayload::Membership(naming_9.clone());
        }
        let e = g.check(9, &append, members).unwrap_err().to_string();
        assert!(e.contains("not a member"), "{e}");
        let mut snap = chunk(7, 9, "s", 0, 10);
        if let PeerRequest::InstallSnapshot(r) = &mut snap {
            r.meta.last_membership = StoredMembership::new(None, naming_9);
        }
        let e = g.check(9, &snap, members).unwrap_err().to_string();
        assert!(e.contains("not a member"), "{e}");
        // A member's requests pass as before.
        assert!(g
            .check(1, &self::append(7, 1, Request::Commands(vec![])), members)
            .is_ok());
    }

    #[test]
    fn snapshot_chunks_must_be_contiguous_and_under_the_cap() {
        let g = PeerGate::new(1000);
        let m = members;
        assert!(g.check(1, &chunk(2, 1, "s1", 0, 400), m).is_ok());
        // A chunk resent from earlier is fine; one past the end is not.
        assert!(g.check(1, &chunk(2, 1, "s1", 200, 400), m).is_ok());
        let e = g
            .check(1, &chunk(2, 1, "s1", 900, 10), m)
            .unwrap_err()
            .to_string();
        assert!(e.contains("600 bytes have arrived"), "{e}");
        let e = g
            .check(1, &chunk(2, 1, "s1", 600, 401), m)
            .unwrap_err()
            .to_string();
        assert!(e.contains("above the cap"), "{e}");
        // A new snapshot starts at 0.
        let e = g
            .check(1, &chunk(2, 1, "s2", 400, 10), m)
            .unwrap_err()
            .to_string();
        assert!(e.contains("0 bytes have arrived"), "{e}");
        assert!(g.check(1, &chunk(2, 1, "s2", 0, 10), m).is_ok());
        let e = g
            .check(1, &chunk(2, 1, "s3", u64::MAX, 10), m)
            .unwrap_err()
            .to_string();
        assert!(e.contains("above the cap"), "{e}");
    }

    fn append(term: u64, node: NodeId, request: Request) -> PeerRequest {
        use openraft::raft::AppendEntriesRequest;
        PeerRequest::AppendEntries(AppendEntriesRequest {
            vote: Vote::new_committed(term, node),
            prev_log_id: None,
            entries: vec![crate::Entry {
                log_id: openraft::LogId::new(openraft::CommittedLeaderId::new(term, node), 1),
                payload: EntryPayload::Normal(request),
            }],
            leader_commit: None,
        })
    }

    #[test]
    fn a_lock_entry_past_the_batch_bound_is_refused() {
        use lockd_core::command::Command;
        let g = PeerGate::new(1 << 20);
        let key = "k".repeat(1024);
        let group = |n: usize| vec![(0..n).map(|_| Command::grant(key.clone(), 1)).collect()];
        // The most an honest leader sends in one entry passes.
        let ok = append(2, 1, Request::commands(group(4096)));
        assert!(g.check(1, &ok, members).is_ok());
        let big = append(2, 1, Request::commands(group(9000)));
        let e = g.check(1, &big, members).unwrap_err().to_string();
        assert!(e.contains("above the bound"), "{e}");
    }
}
