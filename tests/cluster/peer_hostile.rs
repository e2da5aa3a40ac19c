//! Hostile peer frames, sent to a live node over a real peer connection
//! (the right engine fingerprint, so the hello is welcomed): a vote with
//! term `u64::MAX`, a vote from a node that is not a member, a snapshot
//! chunk at a far offset and one past the size cap. Each is refused with
//! its reason before openraft sees it; the node keeps running, its term
//! does not move, and the cluster keeps committing.

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

use lockd::raft::messages::{PeerRequest, PeerResponse};
use lockd::raft::TypeConfig;
use lockd_client::wire::HelloReply;
use lockd_tests::cluster::Cluster;
use lockd_tests::raw;
use openraft::raft::{InstallSnapshotRequest, VoteRequest};
use openraft::{SnapshotMeta, Vote};

/// A welcomed peer connection to node `to` at `addr`, introduced as node
/// `from` of cluster `cluster`.
fn peer(to: (&str, u64, &str), from: u64) -> TcpStream {
    raw::peer_conn(to, from, Duration::from_secs(10))
}

/// Send `req` and return the error it was refused with.
fn refused(s: &mut TcpStream, req: PeerRequest) -> String {
    match raw::peer_call(s, req) {
        PeerResponse::Error(e) | PeerResponse::NotMember(e) => e,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn chunk(term: u64, leader: u64, offset: u64, len: usize) -> PeerRequest {
    PeerRequest::InstallSnapshot(InstallSnapshotRequest::<TypeConfig> {
        vote: Vote::new_committed(term, leader),
        meta: SnapshotMeta {
            snapshot_id: "hostile".into(),
            ..Default::default()
        },
        offset,
        data: vec![0; len],
        done: false,
    })
}

#[test]
fn hostile_peer_frames_are_refused_and_change_nothing() {
    let c = Cluster::start(3, &["--max-snapshot-bytes", "1048576"]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let within = Duration::from_secs(20);
    c.acquire_on_leader("before", 60_000, within);
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    let other = (1..=3)
        .find(|id| *id != leader && *id != follower)
        .expect("another follower");
    let status = c.status(follower).expect("status");
    let term = status.term;
    let cluster = status.cluster_id.expect("a cluster id");
    let addr = (c.addr(follower), follower, cluster.as_str());

    let vote = |term: u64, from: u64| {
        PeerRequest::Vote(VoteRequest {
            vote: Vote::new(term, from),
            last_log_id: None,
        })
    };
    let e = refused(&mut peer(addr, other), vote(u64::MAX, other));
    assert!(e.contains("above the plausible"), "{e}");
    let e = refused(&mut peer(addr, 9), vote(term + 1, 9));
    assert!(e.contains("node 9 is not a member"), "{e}");
    let e = refused(&mut peer(addr, other), vote(term + 1, leader));
    assert!(e.contains(&format!("connection is node {other}'s")), "{e}");
    let e = refused(&mut peer(addr, leader), chunk(term, leader, 1 << 40, 16));
    assert!(
        e.contains("bytes have arrived") || e.contains("above the cap"),
        "{e}"
    );
    let e = refused(&mut peer(addr, leader), chunk(term, leader, 0, 2 << 20));
    assert!(e.contains("above the cap of 1048576"), "{e}");

    // Nothing changed: the follower runs, on the same term, and the
    // cluster commits and converges.
    let after = c.status(follower).expect("the follower still answers");
    assert_eq!(after.term, term);
    c.acquire_on_leader("after", 60_000, within);
    c.wait_converged(within);
}

/// A peer hello naming node `from`, sent to node `to` at `addr` of
/// `cluster`: whether it was welcomed, and the connection.
fn try_peer(to: (&str, u64, &str), from: u64) -> (HelloReply, TcpStream) {
    raw::peer_hello(to, from, Duration::from_secs(10))
}

#[test]
fn a_node_that_is_not_a_member_gets_few_peer_connections_and_small_frames() {
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let within = Duration::from_secs(20);
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    let cluster = c.status(follower).expect("status").cluster_id.expect("id");
    let addr = (c.addr(follower), follower, cluster.as_str());
    // Node 9 is no member: its connections take places of their own, 16
    // from one address (lockd::transport::limits::MAX_UNPROVEN_PEERS).
    let (per_ip, frame) = (
        lockd::transport::limits::MAX_UNPROVEN_PEERS.1,
        lockd::transport::limits::MAX_UNPROVEN_PEER_FRAME,
    );
    let mut open = Vec::new();
    for _ in 0..per_ip {
        let (reply, s) = try_peer(addr, 9);
        assert!(matches!(reply, HelloReply::Welcome(_)), "{reply:?}");
        open.push(s);
    }
    let (reply, _) = try_peer(addr, 9);
    match reply {
        HelloReply::Refused(r) => assert!(r.reason.contains("not members"), "{r:?}"),
        other => panic!("the connection past the bound was welcomed: {other:?}"),
    }
    // A frame bigger than a vote needs closes such a connection.
    let mut s = open.pop().expect("a connection");
    let big = vec![0u8; frame + 1];
    let _ = raw::try_send_frame(&mut s, &big);
    let mut buf = [0u8; 1];
    let closed = matches!(s.read(&mut buf), Ok(0) | Err(_));
    assert!(closed, "a frame past the bound was read");
    // A member's connections are unaffected: the cluster commits.
    drop(open);
    c.acquire_on_leader("after", 60_000, within);
    c.wait_converged(within);
}
