//! All nodes SIGKILLed and restarted: the lock state is identical to before.

use std::time::Duration;

use lockd_tests::cluster::Cluster;

#[test]
fn all_nodes_killed_and_restarted_keep_the_state() {
    let mut c = Cluster::start(3, &[]);
    c.wait_leader(Duration::from_secs(20));
    let mut acked = Vec::new();
    // Through whichever node leads: an election may follow the start.
    let within = Duration::from_secs(20);
    for i in 0..40 {
        let key = format!("k{i}");
        let token = c.acquire_on_leader(&key, 60_000, within);
        if i % 4 == 0 {
            c.release_on_leader(&key, token, within);
        } else {
            acked.push((key, token));
        }
    }
    let before = c.wait_converged(Duration::from_secs(20));
    for id in 1..=3 {
        c.kill(id);
    }
    for id in 1..=3 {
        c.spawn(id);
    }
    let leader = c.wait_leader(Duration::from_secs(30));
    let after = c.wait_converged(Duration::from_secs(30));
    // A new term appends a blank entry, so the index moves on; the lock
    // table must not.
    assert!(after.applied_index >= before.applied_index);
    assert_eq!(
        after.state_hash, before.state_hash,
        "state differs after a full restart"
    );
    assert_eq!(after.locks_held, acked.len() as u64);
    for (key, token) in &acked {
        let r = c.lock(leader, key).expect("get");
        assert_eq!(r.body["token"].as_u64(), Some(*token), "{key}: {r:?}");
    }
    // And token assignment continues past every token issued before.
    let next = c.acquire_on_leader("fresh", 1_000, Duration::from_secs(10));
    assert!(acked.iter().all(|(_, t)| next > *t));
}
