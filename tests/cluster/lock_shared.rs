//! Shared means shared: on a new cluster (which runs the built-in 0.3
//! module from its first entry), readers that give no limit share the key (different owners, through HTTP, the native
//! protocol and lockctl), join readers that gave one at their limit, stop
//! at a prefix policy's `max-holders`, and keep a writer out; an explicit
//! limit of 0 stays a bad request.

use std::time::Duration;

use lockd_client::{AcquireOptions, Client};
use lockd_core::engine::ModuleHash;
use lockd_proto::DEFAULT_SHARED_LIMIT;
use lockd_tests::cluster::Cluster;
use serde_json::{json, Value};

fn acquire(c: &Cluster, id: u64, key: &str, body: Value) -> lockd_tests::cluster::Reply {
    c.post(id, &format!("/v1/locks/{key}/acquire"), body)
        .expect("acquire")
}

fn reader(owner: &str) -> Value {
    json!({"lease_ms": 30000, "mode": "shared", "owner": owner})
}

/// The limits the holders of `key` were granted with.
fn limits(c: &Cluster, id: u64, key: &str) -> Vec<u64> {
    let r = c.lock(id, key).expect("get");
    r.body["holders"]
        .as_array()
        .map(|hs| hs.iter().filter_map(|h| h["limit"].as_u64()).collect())
        .unwrap_or_default()
}

#[test]
fn readers_without_a_limit_share_the_key() {
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));

    // Two readers of different owners, the first request the cluster
    // gets (it may come before the first module is recorded: it waits for
    // it, never refused by the index-0 module): both in, at the default
    // bound; a writer is kept out.
    let a = acquire(&c, leader, "cfg", reader("a"));
    let b = acquire(&c, leader, "cfg", reader("b"));
    assert!(a.ok() && b.ok(), "{a:?} {b:?}");
    assert_eq!(
        limits(&c, leader, "cfg"),
        vec![u64::from(DEFAULT_SHARED_LIMIT); 2]
    );
    let w = acquire(&c, leader, "cfg", json!({"lease_ms": 30000}));
    assert_eq!(w.status, 409, "{w:?}");
    // Every node runs the built-in 0.3 module, recorded as the cluster's
    // first module in its log.
    let built_in = ModuleHash::of(lockd_core::builtin::LOCK_SM_0_3).to_string();
    c.wait_converged(Duration::from_secs(10));
    for id in 1..=3 {
        let st = c.status(id).expect("status");
        assert_eq!(st.module_hash, built_in, "node {id}");
        assert_eq!(st.first_module_hash.as_deref(), Some(built_in.as_str()));
        assert!(st.module_since_index > 0, "{st:?}");
    }

    // Readers that gave 2 hold the key: one without a limit joins them at
    // 2, so with two in it is busy (409), never a limit mismatch (422).
    let two = json!({"lease_ms": 30000, "mode": "shared", "limit": 2});
    assert!(acquire(&c, leader, "two", two).ok());
    assert!(acquire(&c, leader, "two", reader("c")).ok());
    assert_eq!(limits(&c, leader, "two"), vec![2, 2]);
    let r = acquire(&c, leader, "two", reader("d"));
    assert_eq!(r.status, 409, "{r:?}");

    // A prefix whose policy allows 2 holders: readers without a limit get
    // 2, and the third is busy rather than refused by the policy.
    let rules = json!({"rules": [{"prefix": "few/", "max_holders": 2}]});
    assert!(c.put(leader, "/v1/admin/policy", rules).expect("put").ok());
    assert!(acquire(&c, leader, "few/x", reader("a")).ok());
    assert!(acquire(&c, leader, "few/x", reader("b")).ok());
    assert_eq!(limits(&c, leader, "few/x"), vec![2, 2]);
    let r = acquire(&c, leader, "few/x", reader("c"));
    assert_eq!(r.status, 409, "{r:?}");

    // A limit of 0, given, is still the caller's mistake.
    let r = acquire(
        &c,
        leader,
        "zero",
        json!({"lease_ms": 1000, "mode": "shared", "limit": 0}),
    );
    assert_eq!(r.status, 400, "{r:?}");

    // lockctl without --limit, two readers of their own owners.
    for owner in ["cli-a", "cli-b"] {
        let out = c
            .lockctl()
            .args(["acquire", "cli/rw", "--lease", "30s", "--mode", "shared"])
            .args(["--owner", owner])
            .output()
            .expect("lockctl");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
    }
    assert_eq!(limits(&c, leader, "cli/rw").len(), 2);

    // The native protocol (the Rust client): `AcquireOptions::reader`.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let lease = Duration::from_secs(30);
        let one = Client::new(c.endpoints());
        let other = Client::new(c.endpoints());
        let r1 = one
            .acquire_with("rs/rw", AcquireOptions::reader(lease))
            .await
            .expect("a reader");
        let r2 = other
            .acquire_with("rs/rw", AcquireOptions::reader(lease))
            .await
            .expect("a second reader, another owner");
        assert!(r2.token() > r1.token());
        let holders = one.holders("rs/rw").await.expect("holders");
        assert_eq!(holders.len(), 2);
        assert!(holders.iter().all(|h| h.limit == DEFAULT_SHARED_LIMIT));
    });
}
