//! After a leader failover every held lock keeps its token and is not
//! expired before `lease_ms` plus the election bound from the failure: the
//! new leader restarts every lease it inherits with that much.

use std::time::{Duration, Instant};

use lockd_tests::cluster::Cluster;

#[test]
fn held_locks_survive_failover_with_their_tokens_and_full_leases() {
    // Alone: the locks must still be held until lease_ms after the failure
    // and gone within a bound after the new leader is known; a second
    // cluster on the same two cores would move both ends of that window.
    let _alone = lockd_tests::turns::alone();
    let mut c = Cluster::start(3, &[]);
    let patience = Duration::from_millis(50 * c.election_ms);
    const LEASE: u64 = 2500;
    // The kill must come while the leases run: a machine that stalls
    // past them (another process took the cores) makes the round prove
    // nothing, so it is taken again on new keys; the old ones expire.
    let mut round = 0;
    let (held, killed) = loop {
        round += 1;
        let mut held = Vec::new();
        let granted = Instant::now();
        for i in 0..5 {
            let key = format!("r{round}/f{i}");
            let token = c.acquire_on_leader(&key, LEASE, patience);
            held.push((key, token));
        }
        c.wait_converged(patience);
        let old = c.wait_leader(patience);
        // The new leader is elected after the kill and restarts each
        // lease it inherits at its election with lease_ms plus the
        // longest election timeout (more than the configured one):
        // nothing may end before the kill plus lease_ms plus the
        // configured timeout.
        if granted.elapsed() < Duration::from_millis(LEASE) {
            let killed = Instant::now();
            c.kill(old);
            if granted.elapsed() < Duration::from_millis(LEASE) {
                break (held, killed);
            }
            // Killed too late: bring it back and take the round again.
            c.spawn(old);
        }
        assert!(
            round < 10,
            "ten rounds in a row the machine stalled past the leases before the kill"
        );
    };
    let must_hold = Duration::from_millis(LEASE + c.election_ms);
    let new = c.wait_leader(patience);
    // An upper bound on when the new leader took over.
    let elected = Instant::now();
    loop {
        for (key, token) in &held {
            let r = c.lock(new, key).expect("get");
            // Only an answer that arrived within the window proves anything.
            if killed.elapsed() >= must_hold {
                break;
            }
            assert_eq!(
                r.body["token"].as_u64(),
                Some(*token),
                "{key} lost or expired early, {:?} after the failure: {r:?}",
                killed.elapsed()
            );
        }
        if killed.elapsed() >= must_hold {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // And they do end: the lease plus the longest election timeout (1.5 ×
    // the configured one) after the new leader took over, plus time to
    // commit each Expire.
    let deadline = elected + Duration::from_millis(LEASE + 3 * c.election_ms / 2) + patience / 10;
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
