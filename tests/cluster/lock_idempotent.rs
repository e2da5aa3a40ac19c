//! Retries that cannot strand a lock: the leader commits a grant and dies
//! before answering it (the test-only fault `LOCKD_FAULT_DIE_BEFORE_ANSWER`:
//! the process aborts, as under SIGKILL, between the commit and the reply).
//! The Rust client, whose acquire carries an owner and a request id, asks
//! the new leader again and gets the grant that committed: the same token,
//! one holding, no token spent on a second grant, no wait behind itself.

use std::time::{Duration, Instant};

use lockd_client::{AcquireOptions, Client, ClientOptions};
use lockd_tests::cluster::{fault_binary, Cluster};

#[test]
fn an_acquire_retried_after_its_leader_died_gets_the_committed_grant() {
    let fault = fault_binary();
    let marker = tempfile::tempdir().expect("tempdir");
    let marker = marker.path().join("died");
    let mut c = Cluster::configure(3, &[]);
    for id in 1..=3 {
        let n = c.nodes.get_mut(&id).expect("node");
        n.bin = Some(fault.clone());
        n.env.push((
            "LOCKD_FAULT_DIE_BEFORE_ANSWER".into(),
            format!("idem/k:{}", marker.display()),
        ));
    }
    for id in 1..=3 {
        c.spawn(id);
    }
    let leader = c.wait_leader(Duration::from_secs(20));
    let before = c.acquire_on_leader("idem/before", 60_000, Duration::from_secs(20));

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let options = ClientOptions {
        retry_for: Duration::from_secs(30),
        ..ClientOptions::default()
    };
    let client = Client::with_options(c.endpoints(), options);
    // worker-1's acquire of idem/k under request id `id`.
    let job = |id: &str| {
        let opts = AcquireOptions::exclusive(Duration::from_secs(60))
            .owner("worker-1")
            .request_id(id);
        rt.block_on(client.acquire_with("idem/k", opts))
    };
    let started = Instant::now();
    let guard = job("job-42").expect("the retried acquire gets the committed grant");
    assert!(marker.exists(), "the leader did not die before answering");
    assert!(
        c.status(leader).is_none(),
        "node {leader} should have aborted"
    );
    // Well inside the lease: it did not wait for its own grant to expire.
    assert!(started.elapsed() < Duration::from_secs(30));

    // The grant that committed before the leader died, and only it.
    assert_eq!(guard.token(), before + 1, "a second grant took a token");
    let holders = rt.block_on(client.holders("idem/k")).expect("holders");
    assert_eq!(holders.len(), 1, "{holders:?}");
    assert_eq!(holders[0].token, guard.token());
    assert_eq!(holders[0].request_id, "job-42");
    let next = rt
        .block_on(client.acquire("idem/next", Duration::from_secs(5), Duration::ZERO))
        .expect("acquire");
    assert_eq!(next.token(), guard.token() + 1, "no token was spent twice");

    // The same request again is still that grant; another id waits.
    let again = job("job-42").expect("repeat");
    assert_eq!(again.token(), guard.token());
    let other = job("job-43");
    assert!(other.is_err_and(|e| e.is_held()));
}
