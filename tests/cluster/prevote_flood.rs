//! A learner (or a node removed from the cluster) floods the voters with
//! pre-votes claiming a far longer log while the leader is killed: the
//! voters count only voters of the membership they have committed and
//! believe no log longer than a leader showed them, so a new leader is
//! elected in the usual time. The negative control
//! (`LOCKD_FAULT_ANY_VOTER`: every ask answered and believed) shows the
//! flood holding every voter back: no leader while it lasts.

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lockd::raft::messages::PreVoteAsk;
use lockd::raft::messages::{PeerRequest, PeerResponse};
use lockd_client::wire::{self, Envelope};
use lockd_tests::cluster::{free_port, wait_for, Cluster};
use lockd_tests::raw;
use openraft::{CommittedLeaderId, LogId, Vote};
use serde_json::json;

/// The flooder: node `from`'s peer connection to each of `targets`, a
/// pre-vote ask on each as soon as the last is answered, until `stop`.
fn flood(c: &Cluster, targets: &[u64], from: u64, (stop, answered): (&AtomicBool, &AtomicU64)) {
    std::thread::scope(|s| {
        for &to in targets {
            s.spawn(move || {
                let status = c.status(to).expect("status");
                let cluster = status.cluster_id.expect("a cluster id");
                let mut conn = peer(c.addr(to), to, &cluster, from);
                let leader = status.leader.unwrap_or(to);
                let ask = PreVoteAsk {
                    vote: Vote::new(status.term + 1, from),
                    // A log far longer than any leader wrote.
                    last_log_id: Some(LogId::new(
                        CommittedLeaderId::new(status.term, leader),
                        1 << 40,
                    )),
                };
                let mut id = 0;
                while !stop.load(Ordering::Relaxed) {
                    id += 1;
                    let body: PeerRequest = PeerRequest::PreVote(ask.clone());
                    let bytes = wire::encode(&Envelope { id, body }).expect("encode");
                    if raw::try_send_frame(&mut conn, &bytes).is_err() {
                        conn = peer(c.addr(to), to, &cluster, from);
                        continue;
                    }
                    let Some(reply) = raw::read_frame(&mut conn) else {
                        conn = peer(c.addr(to), to, &cluster, from);
                        continue;
                    };
                    let _: Envelope<PeerResponse> = wire::decode(&reply).expect("an answer");
                    answered.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
}

/// A peer connection to node `to`, introduced as node `from`.
fn peer(addr: &str, to: u64, cluster: &str, from: u64) -> TcpStream {
    raw::peer_conn((addr, to, cluster), from, Duration::from_secs(5))
}

/// Three voters and node 4, a learner; `env` on every node.
fn cluster_with_learner(env: &[(&str, &str)]) -> Cluster {
    let mut c = Cluster::configure(3, &[]);
    let addr4 = format!("127.0.0.1:{}", free_port());
    c.add_proc(4, addr4.clone(), &["--join"]);
    for node in c.nodes.values_mut() {
        node.env
            .extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    }
    for id in 1..=3 {
        c.spawn(id);
    }
    let leader = c.wait_leader(Duration::from_secs(20));
    c.spawn(4);
    c.wait_up(4, Duration::from_secs(20));
    let r = c
        .post(leader, "/v1/members/add", json!({"id": 4, "addr": addr4}))
        .expect("add the learner");
    assert!(r.ok(), "{r:?}");
    c
}

/// Kill the leader while node `from` floods the other voters; how long
/// until one of them leads, if one does within `limit`.
fn failover_under_flood(c: &mut Cluster, from: u64, limit: Duration) -> Option<Duration> {
    let leader = c.wait_leader(Duration::from_secs(20));
    let voters: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let (stop, answered) = (AtomicBool::new(false), AtomicU64::new(0));
    let killed = std::thread::scope(|s| {
        let (cref, voters_ref, stop_ref, answered) = (&*c, &voters, &stop, &answered);
        s.spawn(move || flood(cref, voters_ref, from, (stop_ref, answered)));
        // The flood is under way before the leader dies: every voter
        // has answered asks already.
        wait_for("the flood under way", Duration::from_secs(20), || {
            answered.load(Ordering::Relaxed) >= 20
        });
        let killed = Instant::now();
        // The flood borrows the cluster: the kill goes by pid (the
        // cluster reaps the process below).
        let pid = cref.nodes[&leader].child.as_ref().expect("running").id();
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
        let elected = loop {
            let led = voters_ref.iter().any(|id| {
                cref.status(*id)
                    .is_some_and(|st| st.role == lockd_proto::Role::Leader)
            });
            if led {
                break Some(killed.elapsed());
            }
            if killed.elapsed() > limit {
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        stop_ref.store(true, Ordering::Relaxed);
        elected
    });
    c.kill(leader); // reap it
    killed
}

#[test]
fn a_flood_of_pre_votes_from_a_learner_or_a_removed_node_holds_no_voter_back() {
    // Alone: the failover time is the subject.
    let _alone = lockd_tests::turns::alone();
    let mut c = cluster_with_learner(&[]);
    let bound = Duration::from_millis(5 * c.election_ms);
    let took = failover_under_flood(&mut c, 4, Duration::from_secs(10));
    let took = took.expect("a new leader while the learner floods");
    assert!(took < bound, "elected only {took:?} after the kill");
    eprintln!("learner flooding: a new leader {took:?} after the kill");

    // Node 4 removed, the killed node back: node 4 floods again.
    let down = (1..=3)
        .find(|id| !c.nodes[id].is_running())
        .expect("the killed node");
    c.spawn(down);
    let leader = c.wait_leader(Duration::from_secs(20));
    let r = c
        .post(leader, "/v1/members/remove", json!({"id": 4}))
        .expect("remove node 4");
    assert!(r.ok(), "{r:?}");
    // Its process is not needed: the flood speaks as node 4.
    c.kill(4);
    c.wait_converged(Duration::from_secs(20));
    let took = failover_under_flood(&mut c, 4, Duration::from_secs(10));
    let took = took.expect("a new leader while the removed node floods");
    assert!(took < bound, "elected only {took:?} after the kill");
    eprintln!("removed node flooding: a new leader {took:?} after the kill");
}

#[test]
fn without_the_checks_a_learners_flood_stalls_the_election() {
    // Alone: it measures that no election happens for a while.
    let _alone = lockd_tests::turns::alone();
    let mut c = cluster_with_learner(&[("LOCKD_FAULT_ANY_VOTER", "1")]);
    let limit = Duration::from_millis(10 * c.election_ms);
    let took = failover_under_flood(&mut c, 4, limit);
    assert_eq!(took, None, "the flood did not hold the voters back");
}
