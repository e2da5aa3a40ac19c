//! A lease ends only through a committed `Expire`: a leader that cannot
//! commit cannot remove a lock, however late it is; once it can, the
//! `Expire` commits and counts.

use std::time::{Duration, Instant};

use lockd_tests::cluster::Cluster;

#[test]
fn expiry_happens_only_through_a_committed_expire() {
    let mut c = Cluster::start(3, &[]);
    let patience = Duration::from_millis(50 * c.election_ms);
    // Long enough that the followers are surely gone before it ends.
    let lease = Duration::from_millis(5 * c.election_ms);
    // One follower goes before the grant, the other right after it, so
    // the lease surely outlasts the quorum.
    let first = (1..=3)
        .find(|i| *i != c.wait_leader(patience))
        .expect("follower");
    c.kill(first);
    let sent = Instant::now();
    let token = c.acquire_on_leader("lease", lease.as_millis() as u64, patience);
    let leader = c.wait_leader(patience);
    let second = (1..=3)
        .find(|i| *i != leader && *i != first)
        .expect("follower");
    c.kill(second);
    assert!(
        sent.elapsed() < lease,
        "the quorum outlived the lease ({:?}): the machine stalled",
        sent.elapsed()
    );

    // Without a quorum the leader's Expire cannot commit: it is proposed
    // (its log grows past the commit index), and the lock stays in the
    // replicated state.
    let start = Instant::now();
    loop {
        let st = c.status(leader).expect("status");
        if st.last_log_index > st.commit_index {
            break;
        }
        assert!(
            start.elapsed() < lease + patience,
            "the leader never proposed the Expire: {st:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = c.status(leader).expect("status");
    assert_eq!(
        st.locks_held, 1,
        "a lock vanished without a committed Expire: {st:?}"
    );
    assert_eq!(
        c.metric(leader, "lockd_lock_events_total{event=\"expire\"}"),
        Some(0)
    );

    // With the quorum back, the Expire commits, the leader that proposed
    // it counts it, and every node drops the lock. The followers come back
    // with a long election timeout: the leader reaches a restarted node
    // only after its reconnect backoff, and a follower that stood for
    // election meanwhile would end the term, and the count with it.
    let term = c.status(leader).expect("status").term;
    let long = 20 * c.election_ms;
    for f in [first, second] {
        patient_restart(&mut c, f, long);
    }
    let start = Instant::now();
    loop {
        let statuses: Vec<_> = (1..=3).filter_map(|i| c.status(i)).collect();
        if statuses.len() == 3 && statuses.iter().all(|s| s.locks_held == 0) {
            break;
        }
        assert!(
            start.elapsed() < patience,
            "the lock was never expired: {}",
            c.describe()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = c.wait_converged(patience);
    assert_eq!(s.locks_held, 0);
    assert_eq!(c.wait_leader(patience), leader);
    assert_eq!(s.term, term, "an election intervened: {}", c.describe());
    assert_eq!(
        c.metric(leader, "lockd_lock_events_total{event=\"expire\"}"),
        Some(1),
        "one lock, one committed Expire"
    );
    let r = c.lock(leader, "lease").expect("get");
    assert_eq!(r.body["held"], false);
    // The next grant gets a higher token: the expired one is never reused.
    assert!(c.acquire_on_leader("lease", 1000, patience) > token);
}

/// Restart node `id` with an election timeout of `election_ms`.
fn patient_restart(c: &mut Cluster, id: u64, election_ms: u64) {
    let args = &mut c.nodes.get_mut(&id).expect("node").args;
    let at = args
        .iter()
        .position(|a| a == "--election-timeout-ms")
        .expect("election timeout flag")
        + 1;
    args[at] = election_ms.to_string();
    c.spawn(id);
}
