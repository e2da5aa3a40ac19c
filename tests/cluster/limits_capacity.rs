//! The cluster's capacity bound, on real processes.
//!
//! * The reproduction scaled to CI: with the default bounds, a flood
//!   of long-lease grants with 1 KiB keys ends in refusals at the bound
//!   (native `Capacity`, HTTP 507), never in a poisoned node, and the
//!   replicas agree.
//! * A small bound set by an admin (`lockctl capacity`): refused at the
//!   bound, acquires on freed keys still served, the bounds and their use
//!   reported the same by every node.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lockd_client::{Client, ClientError};
use lockd_core::replica::capacity::DEFAULT_CAPACITY;
use lockd_proto::WireError;
use lockd_tests::cluster::Cluster;
use serde_json::json;

const HOUR: Duration = Duration::from_secs(3600);

/// Take `key` and keep it (no release when the guard drops). `Ok(false)`:
/// refused by the capacity bound.
async fn take(client: &Client, key: &str) -> Result<bool, String> {
    match client.acquire(key, HOUR, Duration::ZERO).await {
        Ok(g) => {
            drop(g.release_on_drop(false));
            Ok(true)
        }
        Err(ClientError::Rejected {
            error: WireError::Capacity(msg),
            code,
        }) => {
            assert!(msg.contains("cluster capacity"), "{msg}");
            assert_eq!(code, lockd_proto::ErrorCode::Capacity);
            Ok(false)
        }
        Err(e) => Err(format!("{key}: {e}")),
    }
}

/// Every node: not poisoned, the same state hash at the same index, and
/// the same use of the bounds.
fn assert_healthy_and_equal(c: &Cluster) -> lockd_proto::CapacityStatus {
    let s = c.wait_converged(Duration::from_secs(30));
    let mut seen = None;
    for id in c.running() {
        let st = c.status(id).expect("status");
        assert!(st.poisoned.is_none(), "node {id}: {:?}", st.poisoned);
        let cap = st.capacity.expect("capacity in status");
        assert_eq!(*seen.get_or_insert(cap), cap, "node {id}");
    }
    assert!(s.poisoned.is_none());
    seen.expect("a node")
}

#[test]
fn a_flood_of_long_keys_ends_at_the_default_bound_not_in_a_poisoned_node() {
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let fits = (DEFAULT_CAPACITY.max_key_bytes / 1024).min(DEFAULT_CAPACITY.max_held);
    let (granted, refused) = rt.block_on(async {
        let client = Arc::new(Client::new(c.endpoints()));
        let next = Arc::new(AtomicU64::new(0));
        let refused = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..32)
            .map(|_| {
                let (client, next, refused) = (client.clone(), next.clone(), refused.clone());
                tokio::spawn(async move {
                    let mut granted = 0u64;
                    // Until a few refusals each: the bound stands.
                    while refused.load(Ordering::Relaxed) < 64 {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let key = format!("flood/{i:08}/{}", "x".repeat(1024 - 15));
                        assert_eq!(key.len(), 1024);
                        match take(&client, &key).await {
                            Ok(true) => granted += 1,
                            Ok(false) => {
                                refused.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                    granted
                })
            })
            .collect();
        let mut granted = 0;
        for t in tasks {
            granted += t.await.expect("task");
        }
        (granted, refused.load(Ordering::Relaxed))
    });
    assert_eq!(granted, fits, "grants up to the key-byte bound, no more");
    assert!(refused >= 64);

    // HTTP says the same: 507 with the reason.
    let r = c
        .post(
            leader,
            &format!("/v1/locks/{}/acquire", "y".repeat(1024)),
            json!({"lease_ms": 60000}),
        )
        .expect("post");
    assert_eq!(r.status, 507, "{r:?}");
    assert!(r.error().contains("cluster capacity"), "{r:?}");

    let cap = assert_healthy_and_equal(&c);
    assert_eq!(cap.held, fits);
    assert_eq!(cap.key_bytes, fits * 1024);
    assert_eq!(cap.limits, DEFAULT_CAPACITY.into());
}

#[test]
fn a_small_bound_refuses_at_the_bound_and_serves_freed_keys() {
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let out = c
        .lockctl()
        .args(["--json", "capacity", "--max-held", "20"])
        .output()
        .expect("lockctl");
    assert!(out.status.success(), "{out:?}");
    let set: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(set["limits"]["max_held"], 20, "{set}");
    assert_eq!(
        set["limits"]["max_key_bytes"], DEFAULT_CAPACITY.max_key_bytes,
        "the other bound keeps its value: {set}"
    );

    // A bound of 0 is bad input and changes nothing.
    let r = c
        .put(
            leader,
            "/v1/admin/capacity",
            json!({"max_held": 0, "max_key_bytes": 10}),
        )
        .expect("put");
    assert_eq!(r.status, 400, "{r:?}");

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = Client::new(c.endpoints());
    let results: Vec<bool> = rt.block_on(async {
        let mut out = Vec::new();
        for i in 0..30 {
            out.push(take(&client, &format!("q/{i:02}")).await.expect("acquire"));
        }
        out
    });
    assert!(results[..20].iter().all(|g| *g), "{results:?}");
    assert!(results[20..].iter().all(|g| !*g), "{results:?}");

    // Freed keys make room again; other commands were served all along.
    for i in 0..5 {
        let key = format!("q/{i:02}");
        let holders = c.lock(leader, &key).expect("get");
        assert!(holders.ok(), "{holders:?}");
        let token = holders.body["token"].as_u64().expect("token");
        let r = c.release(leader, &key, token).expect("release");
        assert_eq!(r.status, 200, "{r:?}");
    }
    let again: Vec<bool> = rt.block_on(async {
        let mut out = Vec::new();
        for i in 0..6 {
            out.push(take(&client, &format!("r/{i}")).await.expect("acquire"));
        }
        out
    });
    assert_eq!(again, [true, true, true, true, true, false]);

    let cap = assert_healthy_and_equal(&c);
    assert_eq!((cap.held, cap.limits.max_held), (20, 20));

    // Raising the bound lets the refused grant in.
    let out = c
        .lockctl()
        .args(["capacity", "--max-held", "21"])
        .output()
        .expect("lockctl");
    assert!(out.status.success(), "{out:?}");
    assert!(rt.block_on(take(&client, "r/5")).expect("acquire"));
}
