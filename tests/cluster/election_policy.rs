//! The election policy as the module's (world 0.4's `pick`), on a real
//! 3-node cluster: started on the default module (world 0.3), waiting
//! candidates go in FIFO order whatever priority they ask for; upgraded
//! live to the built-in 0.4 module while a leader holds and a candidate
//! waits, the highest priority goes first, and a leader whose lease ran
//! out and who campaigned again leads again before the others (sticky);
//! a leader that resigns steps down.

use std::time::Duration;

use lockd_client::{AcquireOptions, Client, LockGuard};
use lockd_core::engine::ModuleHash;
use lockd_tests::cluster::{wait_for, Cluster};
use serde_json::json;
use tokio::task::JoinHandle;

const WITHIN: Duration = Duration::from_secs(30);

fn campaign(client: &Client, key: &str, owner: &str, priority: u32) -> JoinHandle<LockGuard> {
    let client = client.clone();
    let opts = AcquireOptions::exclusive(Duration::from_secs(30))
        .wait(Duration::from_secs(120))
        .owner(owner)
        .value(owner)
        .priority(priority);
    let key = key.to_string();
    tokio::spawn(async move {
        client
            .acquire_with(&key, opts)
            .await
            .expect("the candidate leads")
    })
}

/// Wait until `n` callers wait on the leader.
fn waiting(c: &Cluster, leader: u64, n: u64) {
    wait_for(&format!("{n} waiting"), WITHIN, || {
        c.metric(leader, "lockd_lock_waiters").unwrap_or(0) >= n
    });
}

async fn led(h: JoinHandle<LockGuard>) -> LockGuard {
    tokio::time::timeout(WITHIN, h)
        .await
        .expect("leads in time")
        .expect("the task")
}

#[test]
fn priorities_and_sticky_leadership_come_with_a_live_upgrade_to_world_0_4() {
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(WITHIN);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = Client::new(c.endpoints());
    rt.block_on(async {
        // World 0.3: the priority is carried, but FIFO holds.
        let a = led(campaign(&client, "db", "a", 0)).await;
        let b = campaign(&client, "db", "b", 0);
        waiting(&c, leader, 1);
        let cc = campaign(&client, "db", "c", 10);
        waiting(&c, leader, 2);
        a.release().await.expect("a resigns");
        let b = led(b).await;
        assert!(!cc.is_finished(), "c (priority 10) waits behind b on 0.3");

        // The live upgrade to world 0.4, b leading and c waiting.
        let r = c
            .post_bytes(
                leader,
                "/v1/admin/upgrade",
                lockd_core::builtin::LOCK_SM_0_4,
            )
            .expect("upgrade");
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["result"], "swapped");
        let st = c.wait_converged(WITHIN);
        assert_eq!(
            st.module_hash,
            ModuleHash::of(lockd_core::builtin::LOCK_SM_0_4).to_string()
        );

        // d asks for 20 after c asked for 10: d goes first.
        let d = campaign(&client, "db", "d", 20);
        waiting(&c, leader, 2);
        let b_epoch = b.token();
        b.release().await.expect("b resigns");
        let d = led(d).await;
        assert!(d.token() > b_epoch);
        assert!(!cc.is_finished(), "c (10) waits behind d (20)");
        let d_epoch = d.token();
        d.release().await.expect("d resigns");
        let cg = led(cc).await;
        assert!(cg.token() > d_epoch);
        cg.release().await.expect("c resigns");
    });

    // Sticky: e leads on a lease nobody renews (a paused process); f
    // waits; e campaigns again and waits behind f. When e's lease runs
    // out, e leads again.
    let r = c
        .post(
            leader,
            "/v1/locks/svc/acquire",
            json!({"lease_ms": 6000, "owner": "e"}),
        )
        .expect("e leads");
    assert_eq!(r.status, 200, "{r:?}");
    let first = r.body["token"].as_u64().expect("token");
    rt.block_on(async {
        let f = campaign(&client, "svc", "f", 0);
        waiting(&c, leader, 1);
        let e = campaign(&client, "svc", "e", 0);
        waiting(&c, leader, 2);
        let e = led(e).await;
        assert!(e.token() > first);
        assert!(!f.is_finished(), "f waits: e leads again");
        // Resigning is stepping down: f leads next.
        let e_epoch = e.token();
        e.release().await.expect("e resigns");
        let f = led(f).await;
        assert!(f.token() > e_epoch);
        f.release().await.expect("f resigns");
    });
    let picked = c.metric(leader, "lockd_lock_events_total{event=\"picked\"}");
    assert_eq!(picked, Some(2), "d before c, and e before f");
}
