//! When a node stands (`lockd::raft::stand`, docs/operations.md, "Leader
//! failover"), on real processes:
//!
//! * a node that hears no leader, while a quorum still does, asks for a
//!   pre-vote, is refused, and never raises the term: the leader keeps
//!   leading (without the pre-vote, the test-only fault, that node
//!   deposes it, whether it stands on a restart or on the pause: the
//!   negative control);
//! * a leader stopped with SIGTERM names a successor that has its whole
//!   log, tells every voter, and exits cleanly; nothing acknowledged is
//!   lost.
//!
//! The first uses two election timeouts: node 3 stands after 300 ms of
//! silence, nodes 1 and 2 after 5 s, so pausing the leader (SIGSTOP) for
//! half a second makes node 3 want to stand while the other follower
//! still counts the leader alive. No sleep stands for a condition: the test waits
//! for node 3's pre-vote rounds (its metrics) and for its term.

use std::time::Duration;

use lockd_tests::cluster::{fault_binary, wait_for, Cluster};

const WITHIN: Duration = Duration::from_secs(30);

/// A 3-node cluster whose node 3 stands after 300 ms of silence and the
/// others after 5 s, led by node 1 or 2. Returns it and its leader.
fn impatient_third() -> (Cluster, u64) {
    let mut c = Cluster::configure(3, &[]);
    for (id, node) in c.nodes.iter_mut() {
        let at = node
            .args
            .iter()
            .position(|a| a == "--election-timeout-ms")
            .expect("the harness sets the election timeout");
        node.args[at + 1] = if *id == 3 { "300" } else { "5000" }.into();
    }
    for id in 1..=3 {
        c.spawn(id);
    }
    let mut leader = c.wait_leader(WITHIN);
    if leader == 3 {
        // Hand over (the second test's path) and come back as a follower.
        // (A leader restarted before its successor won resumes its term.)
        c.stop(3, WITHIN);
        c.wait_leader(WITHIN);
        c.spawn(3);
        leader = c.wait_leader(WITHIN);
    }
    assert_ne!(leader, 3, "{}", c.describe());
    (c, leader)
}

const WON: &str = r#"lockd_raft_prevotes_total{result="won"}"#;
const LOST: &str = r#"lockd_raft_prevotes_total{result="lost"}"#;

fn rounds(c: &Cluster, id: u64) -> u64 {
    c.metric(id, WON).unwrap_or(0) + c.metric(id, LOST).unwrap_or(0)
}

fn term(c: &Cluster, id: u64) -> u64 {
    c.status(id).expect("node answers").term
}

#[test]
fn a_node_that_alone_hears_no_leader_is_refused_its_pre_vote_and_the_leader_stays() {
    let (c, leader) = impatient_third();
    c.acquire_on_leader("before", 60_000, WITHIN);
    let before = term(&c, leader);
    let asked = rounds(&c, 3);
    let won = c.metric(3, WON);
    // Resumed well within the other follower's 5 s: it never says yes.
    c.pause(leader);
    wait_for("node 3 to ask for a pre-vote", WITHIN, || {
        rounds(&c, 3) > asked
    });
    assert_eq!(
        c.metric(3, WON),
        won,
        "the other follower still heard the leader: no quorum"
    );
    assert_eq!(term(&c, 3), before, "a refused pre-vote raises no term");
    c.resume(leader);
    wait_for("node 3 to follow the leader again", WITHIN, || {
        c.status(3).is_some_and(|s| s.leader == Some(leader))
    });
    assert_eq!(c.wait_leader(WITHIN), leader);
    for id in 1..=3 {
        assert_eq!(term(&c, id), before, "node {id}: {}", c.describe());
    }
    c.acquire_on_leader("after", 60_000, WITHIN);
}

#[test]
fn without_the_pre_vote_a_node_that_alone_hears_no_leader_deposes_it() {
    let (mut c, leader) = impatient_third();
    let before = term(&c, leader);
    c.kill(3);
    {
        let n3 = c.nodes.get_mut(&3).expect("node 3");
        n3.bin = Some(fault_binary());
        n3.env.push(("LOCKD_FAULT_SKIP_PREVOTE".into(), "1".into()));
    }
    c.spawn(3);
    // Restarted, it may stand before the leader's replication reaches it
    // (what the pre-vote stops: a restart deposed a healthy leader); if
    // it follows first, the leader's pause makes it stand.
    wait_for("node 3 to follow, or to stand", WITHIN, || {
        c.status(3)
            .is_some_and(|s| s.leader == Some(leader) || s.term > before)
    });
    if term(&c, 3) == before {
        c.pause(leader);
        wait_for("node 3 to raise the term", WITHIN, || term(&c, 3) > before);
        c.resume(leader);
    }
    wait_for("the leader to meet the higher term", WITHIN, || {
        term(&c, leader) > before
    });
}

#[test]
fn a_leader_stopped_with_sigterm_names_a_caught_up_successor_and_keeps_every_lock() {
    let mut c = Cluster::start(3, &[]);
    let old = c.wait_leader(WITHIN);
    let acked: Vec<(String, u64)> = (0..20)
        .map(|i| {
            let key = format!("kept/{i}");
            let token = c.acquire_on_leader(&key, 60_000, WITHIN);
            (key, token)
        })
        .collect();
    let status = c.stop(old, WITHIN);
    assert!(status.success(), "a graceful stop exits 0: {status:?}");
    let log = |id: u64| std::fs::read_to_string(&c.nodes[&id].log).unwrap_or_default();
    let named: Vec<u64> = [1, 2, 3]
        .into_iter()
        .filter(|id| *id != old && log(*id).contains("the leader resigned successor=true"))
        .collect();
    assert_eq!(named.len(), 1, "one successor named: {named:?}");
    for id in (1..=3).filter(|id| *id != old) {
        assert!(
            log(id).contains("the leader resigned"),
            "node {id} was told"
        );
    }
    let choice = log(old);
    assert!(
        choice.contains("handing leadership over")
            && choice.contains(&format!("successor={}", named[0])),
        "the old leader logged its choice"
    );
    let new = c.wait_leader(WITHIN);
    assert_ne!(new, old);
    for (key, token) in &acked {
        let r = c.lock(new, key).expect("get");
        assert_eq!(r.body["held"], true, "{key} lost in the handover: {r:?}");
        assert_eq!(r.body["token"].as_u64(), Some(*token), "{key}");
    }
    c.spawn(old);
    let s = c.wait_converged(WITHIN);
    assert_eq!(s.locks_held, 20);
}
