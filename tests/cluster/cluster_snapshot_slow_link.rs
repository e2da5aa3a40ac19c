//! A snapshot of tens of MiB over a slow link completes: each chunk takes
//! longer than the stall bound on a peer call (the election timeout), and
//! yet no send is given up as stalled, because the receiving node sends
//! keep-alives while a chunk arrives and while it installs
//! (docs/architecture.md, "Replication after a fault").

use std::time::{Duration, Instant};

use lockd_client::{AcquireOptions, Client};
use lockd_tests::cluster::{free_port, wait_for, Cluster};
use lockd_tests::throttle::Proxy;
use serde_json::json;

/// The link to the new node, each way: a 1 MiB chunk takes about 250 ms,
/// more than the 200 ms stall bound below.
const LINK_BYTES_PER_SEC: u64 = 4 << 20;
/// Locks of a 1 KiB key and a 4 KiB value (1024 characters of 4 bytes,
/// the longest value): about 20 MiB of state.
const LOCKS: usize = 4000;

#[test]
fn a_large_snapshot_on_a_slow_link_completes() {
    // Alone: the snapshot's pace is the subject, and the writes before it
    // load the machine.
    let _alone = lockd_tests::turns::alone();
    let mut c = Cluster::empty(&["--keep-after-snapshot", "0"]);
    c.heartbeat_ms = 50;
    c.election_ms = 200;
    c.add_loopback_members(2);
    c.spawn(1);
    c.spawn(2);
    let leader = c.wait_leader(Duration::from_secs(20));
    fill(&c);
    let done = c.wait_converged(Duration::from_secs(60));
    // A snapshot of all of it, and the log before it gone: a node added
    // now can only be sent the snapshot.
    let r = c
        .post(leader, "/v1/admin/snapshot", json!({}))
        .expect("snapshot");
    assert!(r.ok(), "{r:?}");
    let index = r.body["index"].as_u64().expect("the snapshot's index");
    wait_for("the leader purged its log", Duration::from_secs(30), || {
        c.status(leader)
            .is_some_and(|s| s.purged_index.unwrap_or(0) >= index)
    });

    // Node 3 listens on its own port; every other node reaches it through
    // the slow link, the address it advertises.
    let own = format!("127.0.0.1:{}", free_port());
    let proxy = Proxy::start(free_port(), own.clone(), LINK_BYTES_PER_SEC);
    c.add_proc(3, proxy.addr.clone(), &["--join", "--listen", &own]);
    c.spawn(3);
    c.wait_up(3, Duration::from_secs(20));
    let started = Instant::now();
    let r = c
        .post(
            leader,
            "/v1/members/add",
            json!({ "id": 3, "addr": proxy.addr }),
        )
        .expect("add");
    assert!(r.ok(), "{r:?}");
    wait_for(
        "node 3 installed the snapshot",
        Duration::from_secs(60),
        || {
            c.status(3).is_some_and(|s| {
                s.snapshots_installed >= 1 && s.applied_index >= done.applied_index
            })
        },
    );
    let took = started.elapsed();
    let s = c.status(3).expect("status of node 3");
    assert_eq!(s.state_hash, done.state_hash);
    assert!(
        s.last_snapshot_bytes > 16 << 20,
        "a snapshot of tens of MiB: {s:?}"
    );
    let sends = |result: &str| {
        c.metric(
            leader,
            &format!("lockd_raft_snapshot_sends_total{{result=\"{result}\"}}"),
        )
    };
    // The leader counts the send once node 3's answer is back across the
    // slow link, which may be after node 3 reports the install.
    wait_for(
        "the leader counted the send",
        Duration::from_secs(30),
        || sends("installed") >= Some(1),
    );
    assert_eq!(sends("installed"), Some(1), "one send, installed");
    assert_eq!(sends("failed"), Some(0), "no chunk given up as stalled");
    eprintln!(
        "a {} MiB snapshot over {} MiB/s took {:.1} s",
        s.last_snapshot_bytes >> 20,
        LINK_BYTES_PER_SEC >> 20,
        took.as_secs_f64()
    );
}

/// Take [`LOCKS`] locks, each with a 1 KiB key and a 4 KiB value.
fn fill(c: &Cluster) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let client = Client::new(c.endpoints());
    rt.block_on(async {
        let value = "\u{1D11E}".repeat(1024);
        let mut left = (0..LOCKS).peekable();
        while left.peek().is_some() {
            let batch: Vec<usize> = left.by_ref().take(64).collect();
            let takes = batch.iter().map(|i| {
                let key = format!("{i:0>1024}");
                let opts =
                    AcquireOptions::exclusive(Duration::from_secs(3600)).value(value.clone());
                let client = &client;
                async move { client.acquire_with(&key, opts).await.map(|g| g.token()) }
            });
            for r in futures::future::join_all(takes).await {
                r.expect("a lock of the state");
            }
        }
    });
}
