//! A lease ends only through a committed `Expire`: a leader that cannot
//! commit cannot remove a lock, however late it is.

use std::time::{Duration, Instant};

use lock_tests::cluster::Cluster;

#[test]
fn expiry_happens_only_through_a_committed_expire() {
    let mut c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let r = c.acquire(leader, "lease", 400).expect("acquire");
    assert!(r.ok(), "{r:?}");
    let token = r.body["token"].as_u64().expect("token");
    c.wait_converged(Duration::from_secs(10));

    // Without a quorum the leader's Expire cannot commit: the lock stays in
    // the replicated state long after its deadline.
    let followers: Vec<u64> = (1..=3).filter(|i| *i != leader).collect();
    for f in &followers {
        c.kill(*f);
    }
    std::thread::sleep(Duration::from_millis(1500));
    let st = c.status(leader).expect("status");
    assert_eq!(
        st.locks_held, 1,
        "a lock vanished without a committed Expire: {st:?}"
    );
    assert_eq!(c.metric(leader, "lockd_lock_expires_total"), Some(0));

    // With the quorum back, the Expire commits and every node drops the lock.
    for f in &followers {
        c.spawn(*f);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let statuses: Vec<_> = (1..=3).filter_map(|i| c.status(i)).collect();
        if statuses.len() == 3 && statuses.iter().all(|s| s.locks_held == 0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the lock was never expired: {}",
            c.describe()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = c.wait_converged(Duration::from_secs(10));
    assert_eq!(s.locks_held, 0);
    let leader = c.wait_leader(Duration::from_secs(10));
    let r = c.lock(leader, "lease").expect("get");
    assert_eq!(r.body["held"], false);
    // The next grant gets a higher token: the expired one is never reused.
    let r = c.acquire(leader, "lease", 1000).expect("acquire");
    assert!(r.body["token"].as_u64().expect("token") > token);
}
