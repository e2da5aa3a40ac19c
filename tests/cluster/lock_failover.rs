//! After a leader failover every held lock keeps its token and is not
//! expired before `lease_ms` from the new leader's election.

use std::time::{Duration, Instant};

use lock_tests::cluster::Cluster;

#[test]
fn held_locks_survive_failover_with_their_tokens_and_full_leases() {
    // Alone: the locks must still be held until just before lease_ms after
    // the election and gone within a bound after it; a second cluster on the
    // same two cores would move both ends of that window.
    let _alone = lock_tests::turns::alone();
    let mut c = Cluster::start(3, &[]);
    let old = c.wait_leader(Duration::from_secs(20));
    const LEASE: u64 = 2500;
    let mut held = Vec::new();
    for i in 0..5 {
        let key = format!("f{i}");
        let r = c.acquire(old, &key, LEASE).expect("acquire");
        held.push((key, r.body["token"].as_u64().expect("token")));
    }
    c.wait_converged(Duration::from_secs(10));
    c.kill(old);
    let new = c.wait_leader(Duration::from_secs(20));
    let elected = Instant::now();
    // Until lease_ms after the election, every lock is still held, same token.
    while elected.elapsed() < Duration::from_millis(LEASE - 300) {
        for (key, token) in &held {
            let r = c.lock(new, key).expect("get");
            assert_eq!(
                r.body["token"].as_u64(),
                Some(*token),
                "{key} lost or expired early at {:?}: {r:?}",
                elected.elapsed()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // And they do end, bounded by lease + election timeout after the election.
    let deadline =
        elected + Duration::from_millis(LEASE + 2 * 2 * lock_tests::cluster::ELECTION_MS + 3000);
    for (key, _) in &held {
        loop {
            let r = c.lock(new, key).expect("get");
            if r.body["held"] == false {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{key} never expired after the failover"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
