//! Keepalive: keeps a lock past its lease on a live leader; a deposed
//! leader refuses it as "not the leader", and a leader that cannot confirm
//! its leadership with a quorum as "unavailable".

use std::time::{Duration, Instant};

use lockd::raft::peer_conn::FramedConn;
use lockd_client::wire::Role;
use lockd_proto::{ClientRequest, ClientResponse, WireError};
use lockd_tests::cluster::Cluster;

/// The lease of the kept lock: keepalives go out every quarter of it.
const LEASE_MS: u64 = 600;

/// Ask node `addr` itself (the native protocol never forwards) to renew
/// `token`, and return its typed answer.
fn native_keepalive(addr: &str, key: &str, token: u64) -> ClientResponse {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut conn = FramedConn::connect(addr, 0, Role::Client, Duration::from_secs(5), None)
            .await
            .expect("connect");
        let req = ClientRequest::Keepalive {
            key: key.as_bytes().to_vec(),
            token,
        };
        let wait = Duration::from_secs(10);
        conn.call(&req, wait, wait, || async { false })
            .await
            .expect("keepalive answered")
    })
}

#[test]
fn keepalive_keeps_a_lock_past_its_lease_and_stopping_lets_it_expire() {
    // Alone: keepalives every quarter lease must each land within the
    // lease, and the expiry is timed; a second cluster on the same two
    // cores could delay one past the lease.
    let _alone = lockd_tests::turns::alone();
    let c = Cluster::start(3, &[]);
    let patience = Duration::from_millis(50 * c.election_ms);
    let lease = Duration::from_millis(LEASE_MS);
    // When the grant, then the last renewal the leader granted, was sent:
    // the leader counts the lease from after that.
    let mut renewed = Instant::now();
    let token = c.acquire_on_leader("kept", LEASE_MS, patience);
    let start = Instant::now();
    let mut turn = 0u64;
    while start.elapsed() < 3 * lease {
        // Through a follower too, every other time: it forwards to the leader.
        let leader = c.wait_leader(patience);
        let via = if turn.is_multiple_of(2) {
            leader
        } else {
            (1..=3).find(|i| *i != leader).expect("follower")
        };
        turn += 1;
        let sent = Instant::now();
        let r = c.keepalive(via, "kept", token).expect("keepalive");
        if r.ok() {
            assert_eq!(r.body["lease_ms"], LEASE_MS);
            renewed = sent;
        } else {
            // Only an election may intervene; the new leader keeps the lock.
            assert_eq!(r.status, 503, "{r:?}");
        }
        std::thread::sleep(lease / 4);
    }
    let leader = c.wait_leader(patience);
    let r = c.lock(leader, "kept").expect("get");
    assert_eq!(
        r.body["token"].as_u64(),
        Some(token),
        "held past 3 leases by keepalive: {r:?}"
    );
    // Keepalive with the wrong token is refused and extends nothing.
    let r = c.keepalive(leader, "kept", token + 1).expect("keepalive");
    assert_eq!(r.status, 409, "{r:?}");
    // Stop: the lease runs out and the lock is expired, never before a
    // full lease after the last renewal was sent.
    let expired = loop {
        let r = c.lock(leader, "kept").expect("get");
        if r.body["held"] == false {
            break Instant::now();
        }
        assert!(
            renewed.elapsed() < lease + patience,
            "never expired: {}",
            c.describe()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        expired - renewed >= lease,
        "expired {:?} after its last renewal was sent, within its {lease:?} lease",
        expired - renewed
    );
    let r = c.keepalive(leader, "kept", token).expect("keepalive");
    assert_eq!(r.status, 404, "{r:?}");
}

#[test]
fn keepalive_to_a_deposed_leader_is_refused_as_not_the_leader() {
    let c = Cluster::start(3, &[]);
    let patience = Duration::from_millis(50 * c.election_ms);
    let token = c.acquire_on_leader("fenced", 60_000, patience);
    let old = c.wait_leader(patience);
    c.wait_converged(patience);
    // The old leader freezes; the others elect a new one.
    c.pause(old);
    let others: Vec<u64> = (1..=3).filter(|i| *i != old).collect();
    let start = Instant::now();
    let new = loop {
        let leaders: Vec<u64> = others
            .iter()
            .filter_map(|i| c.status(*i))
            .filter(|s| s.role == lockd_proto::Role::Leader)
            .map(|s| s.id)
            .collect();
        if let Some(l) = leaders.first() {
            break *l;
        }
        assert!(
            start.elapsed() < patience,
            "no new leader: {}",
            c.describe()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // It wakes up still believing it leads, and is asked first thing. It
    // must not extend; it says it is not the leader once a follower answers
    // with the higher term (or, if none answered in time, that it could not
    // confirm its leadership), and it names the new leader once it has
    // heard from it.
    c.resume(old);
    let start = Instant::now();
    let named = loop {
        match native_keepalive(c.addr(old), "fenced", token) {
            // The new leader (or, after yet another election, the other node).
            ClientResponse::Error(WireError::NotLeader {
                leader: Some(l), ..
            }) if others.contains(&l) => break l,
            ClientResponse::Error(WireError::NotLeader { leader: None, .. }) => {}
            ClientResponse::Error(WireError::Unavailable(m)) => {
                assert!(m.contains("could not confirm its leadership"), "{m}")
            }
            other => panic!("a deposed leader answered a keepalive with {other:?}"),
        }
        assert!(
            start.elapsed() < patience,
            "node {old} never said node {new} leads: {}",
            c.describe()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // The lock itself is intact under the new leader, same token.
    let r = c.lock(named, "fenced").expect("get");
    assert_eq!(r.body["token"].as_u64(), Some(token));
}

#[test]
fn keepalive_without_a_quorum_is_refused_as_unavailable() {
    let mut c = Cluster::start(3, &[]);
    let patience = Duration::from_millis(50 * c.election_ms);
    let token = c.acquire_on_leader("alone", 60_000, patience);
    let leader = c.wait_leader(patience);
    for f in (1..=3).filter(|i| *i != leader) {
        c.kill(f);
    }
    // Still the leader as far as it knows, so not "not the leader": it
    // cannot confirm that with a quorum.
    match native_keepalive(c.addr(leader), "alone", token) {
        ClientResponse::Error(WireError::Unavailable(m)) => assert!(
            m.contains(&format!(
                "node {leader} could not confirm its leadership with a quorum"
            )),
            "{m}"
        ),
        other => panic!("expected unavailable, got {other:?}"),
    }
    // Over HTTP: the same refusal, naming no leader to go to.
    let r = c
        .keepalive(leader, "alone", token)
        .expect("keepalive answered");
    assert_eq!(r.status, 503, "{r:?}");
    assert!(
        r.error().starts_with("consensus unavailable: ") && r.body.get("leader").is_none(),
        "{r:?}"
    );
}
