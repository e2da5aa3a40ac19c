//! A node refuses to start on, or join, a cluster whose wasm engine
//! fingerprint differs from its own.

use std::time::Duration;

use lockd_tests::cluster::{free_port, Cluster};
use serde_json::json;

#[test]
fn a_node_with_a_different_engine_cannot_join() {
    let mut c = Cluster::start(1, &[]);
    c.wait_leader(Duration::from_secs(20));
    let addr = format!("127.0.0.1:{}", free_port());
    c.add_proc(2, addr.clone(), &["--join", "--fuel-per-call", "1234567"]);
    c.spawn(2);
    c.wait_up(2, Duration::from_secs(20));
    let r = c
        .post(1, "/v1/members/add", json!({ "id": 2, "addr": addr }))
        .expect("add");
    assert_eq!(r.status, 422, "the node refused: {r:?}");
    assert!(
        r.error().contains("different wasm engine") && r.error().contains("fuel-per-call"),
        "{r:?}"
    );
    let st = c.status(1).expect("status");
    assert_eq!(st.members.len(), 1, "membership unchanged");
}

#[test]
fn a_data_dir_written_by_another_engine_is_refused_at_start() {
    let mut c = Cluster::start(1, &[]);
    c.wait_leader(Duration::from_secs(20));
    assert!(c.acquire(1, "kept", 1_000).expect("acquire").ok());
    c.kill(1);
    let node = c.nodes.get_mut(&1).expect("node");
    node.args
        .extend(["--memory-limit-bytes".to_string(), "12345678".to_string()]);
    let (code, stderr) = c.run_to_exit(1, Duration::from_secs(20));
    assert_ne!(code, Some(0));
    assert!(
        stderr.contains("different wasm engine") && stderr.contains("memory-limit"),
        "{stderr}"
    );
}
