//! Between openraft's types and the deterministic core's mirrors of them
//! ([`lockd_core::entry`]): the same fields in the same order, so both
//! encode to the same bytes (the golden files pin it). The one place the
//! host crosses that boundary.

use lockd_core::entry as core;

use super::{Entry, LogId, Node, NodeId, SnapshotMeta, StoredMembership};

type Membership = openraft::Membership<NodeId, Node>;

pub fn log_id(l: LogId) -> core::LogId {
    core::LogId::new(l.leader_id.term, l.leader_id.node_id, l.index)
}

pub(crate) fn to_log_id(l: core::LogId) -> LogId {
    LogId::new(
        openraft::CommittedLeaderId::new(l.leader_id.term, l.leader_id.node_id),
        l.index,
    )
}

pub fn membership(m: &Membership) -> core::Membership {
    core::Membership {
        configs: m.get_joint_config().clone(),
        nodes: m
            .nodes()
            .map(|(id, n)| {
                (
                    *id,
                    core::Node {
                        addr: n.addr.clone(),
                    },
                )
            })
            .collect(),
    }
}

pub(crate) fn to_membership(m: core::Membership) -> Membership {
    let nodes: std::collections::BTreeMap<NodeId, Node> = m
        .nodes
        .into_iter()
        .map(|(id, n)| (id, Node { addr: n.addr }))
        .collect();
    Membership::new(m.configs, nodes)
}

pub(crate) fn stored_membership(m: &StoredMembership) -> core::StoredMembership {
    core::StoredMembership {
        log_id: m.log_id().map(log_id),
        membership: membership(m.membership()),
    }
}

pub(crate) fn to_stored_membership(m: core::StoredMembership) -> StoredMembership {
    StoredMembership::new(m.log_id.map(to_log_id), to_membership(m.membership))
}

pub fn snapshot_meta(m: &SnapshotMeta) -> core::SnapshotMeta {
    core::SnapshotMeta {
        last_log_id: m.last_log_id.map(log_id),
        last_membership: stored_membership(&m.last_membership),
        snapshot_id: m.snapshot_id.clone(),
    }
}

pub(crate) fn to_snapshot_meta(m: core::SnapshotMeta) -> SnapshotMeta {
    SnapshotMeta {
        last_log_id: m.last_log_id.map(to_log_id),
        last_membership: to_stored_membership(m.last_membership),
        snapshot_id: m.snapshot_id,
    }
}

/// A committed entry as the replica applies it.
pub fn entry(e: Entry) -> core::Entry {
    core::Entry {
        log_id: log_id(e.log_id),
        payload: match e.payload {
            openraft::EntryPayload::Blank => core::Payload::Blank,
            openraft::EntryPayload::Normal(r) => core::Payload::Normal(r),
            openraft::EntryPayload::Membership(m) => core::Payload::Membership(membership(&m)),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    /// The mirrors encode to openraft's bytes, and convert back unchanged.
    #[test]
    fn the_mirrors_encode_like_openraft_and_round_trip() {
        let voters: BTreeSet<NodeId> = [1, 2].into();
        let nodes: BTreeMap<NodeId, Node> = [
            (1, Node::new("a:1")),
            (2, Node::new("b:2")),
            (3, Node::new("c:3")),
        ]
        .into();
        let joint = Membership::new(vec![voters.clone(), [2, 3].into()], nodes);
        let at = LogId::new(openraft::CommittedLeaderId::new(7, 2), 41);
        let meta = SnapshotMeta {
            last_log_id: Some(LogId::new(openraft::CommittedLeaderId::new(8, 3), 99)),
            last_membership: StoredMembership::new(Some(at), joint),
            snapshot_id: "8-3-99".into(),
        };
        let mirrored = snapshot_meta(&meta);
        assert_eq!(
            postcard::to_allocvec(&mirrored).expect("encode"),
            postcard::to_allocvec(&meta).expect("encode")
        );
        assert_eq!(to_snapshot_meta(mirrored), meta);
        // A broken mirror (term and node swapped) must show: the negative
        // control of the comparison above.
        let mut wrong = snapshot_meta(&meta);
        wrong.last_log_id = Some(core::LogId::new(3, 8, 99));
        assert_ne!(
            postcard::to_allocvec(&wrong).expect("encode"),
            postcard::to_allocvec(&meta).expect("encode")
        );
    }
}
