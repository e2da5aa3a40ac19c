//! A 3-node cluster elects a leader and replicates: after a burst of
//! commands every node reports the same applied index and state hash.

use std::time::Duration;

use lockd_tests::cluster::Cluster;

#[test]
fn three_nodes_elect_replicate_and_agree() {
    let c = Cluster::start(3, &[]);
    c.wait_leader(Duration::from_secs(20));
    let mut tokens = Vec::new();
    // Through whichever node leads: an election may follow the start.
    let within = Duration::from_secs(20);
    for i in 0..60 {
        let key = format!("burst/{i}");
        tokens.push(c.acquire_on_leader(&key, 60_000, within));
        if i % 3 == 0 {
            c.release_on_leader(&key, tokens[i], within);
        }
    }
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens must strictly increase: {tokens:?}"
    );
    let s = c.wait_converged(Duration::from_secs(20));
    let leader = c.wait_leader(Duration::from_secs(20));
    assert_eq!(s.locks_held, 40);
    // Every node answers reads for the replicated state (linearizable read
    // through the leader's read-index).
    let r = c.lock(leader, "burst/1").expect("get");
    assert_eq!(r.body["held"], true);
    assert_eq!(r.body["token"].as_u64(), Some(tokens[1]));
    let r = c.lock(leader, "burst/0").expect("get");
    assert_eq!(r.body["held"], false);
    for id in 1..=3 {
        let st = c.status(id).expect("status");
        assert_eq!(st.members.len(), 3);
        assert_eq!(st.leader, Some(leader));
    }
}
