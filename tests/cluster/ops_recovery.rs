//! Backup and disaster recovery (SPEC §13), with real processes: a backup
//! restored into a fresh 3-node cluster, and a cluster that lost two of
//! three nodes for good rebuilt from the survivor. Either way the locks
//! held are still held with their tokens, and the next token is above
//! every token the old cluster gave out, even after the backup.

use std::process::Command;
use std::time::Duration;

use lock_tests::cluster::{lockd_bin, Cluster};
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(20);

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn held(c: &Cluster, id: u64, key: &str) -> Option<u64> {
    let r = c.lock(id, key).expect("get");
    (r.body["held"] == true)
        .then(|| r.body["token"].as_u64())
        .flatten()
}

#[test]
fn a_backup_restores_into_a_new_cluster_with_its_locks_and_later_tokens() {
    let old = Cluster::start(3, &[]);
    old.wait_leader(WITHIN);
    let kept = old.acquire_on_leader("backup/kept", 600_000, WITHIN);
    let freed = old.acquire_on_leader("backup/freed", 600_000, WITHIN);
    old.release_on_leader("backup/freed", freed, WITHIN);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("cluster.snap");
    let said = run(old.lockctl().args(["snapshot", "save"]).arg(&file));
    assert!(
        said.starts_with("saved the cluster's state at index"),
        "{said}"
    );
    // Granted after the backup: the restored cluster never saw these.
    let mut last = 0;
    for i in 0..5 {
        last = old.acquire_on_leader(&format!("after/{i}"), 600_000, WITHIN);
    }
    assert!(last > kept);
    drop(old);

    // A bad file is refused with the reason, and nothing is written.
    let bad = dir.path().join("bad.snap");
    std::fs::write(&bad, b"not a snapshot").expect("write");
    let refused = Command::new(lockd_bin())
        .args(["restore", "--snapshot"])
        .arg(&bad)
        .args([
            "--id",
            "1",
            "--initial-cluster",
            "1=127.0.0.1:1",
            "--data-dir",
        ])
        .arg(dir.path().join("never"))
        .output()
        .expect("restore");
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("not a snapshot file"),
        "{refused:?}"
    );
    assert!(!dir.path().join("never").exists());

    let mut new = Cluster::configure(3, &[]);
    let initial = new
        .nodes
        .values()
        .map(|n| format!("{}={}", n.id, n.addr))
        .collect::<Vec<_>>()
        .join(",");
    for id in 1..=3 {
        let said = run(Command::new(lockd_bin())
            .args(["restore", "--snapshot"])
            .arg(&file)
            .args([
                "--id",
                &id.to_string(),
                "--initial-cluster",
                &initial,
                "--data-dir",
            ])
            .arg(&new.nodes[&id].data_dir));
        assert!(
            said.contains("tokens continue from 281474976710656"),
            "{said}"
        );
    }
    // A data dir that is not empty is refused.
    let again = Command::new(lockd_bin())
        .args(["restore", "--snapshot"])
        .arg(&file)
        .args(["--id", "1", "--initial-cluster", &initial, "--data-dir"])
        .arg(&new.nodes[&1].data_dir)
        .output()
        .expect("restore");
    assert!(!again.status.success(), "{again:?}");
    for id in 1..=3 {
        new.spawn(id);
    }
    let leader = new.wait_leader(WITHIN);
    assert_eq!(
        held(&new, leader, "backup/kept"),
        Some(kept),
        "the same lock, the same token"
    );
    assert_eq!(held(&new, leader, "backup/freed"), None);
    let next = new.acquire_on_leader("backup/new", 30_000, WITHIN);
    assert!(
        next > last,
        "token {next} is not above {last}, given out after the backup"
    );
    let s = new.wait_converged(WITHIN);
    assert_eq!(s.members.len(), 3);
    // The restored holder can still release its lock.
    new.release_on_leader("backup/kept", kept, WITHIN);
}

#[test]
fn a_survivor_of_a_lost_majority_rebuilds_the_cluster_and_clients_carry_on() {
    let mut c = Cluster::start(3, &[]);
    let leader = c.wait_leader(WITHIN);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = lockd_client::Client::new(c.endpoints());
    let guard = rt
        .block_on(client.acquire("dr/held", Duration::from_secs(600), Duration::ZERO))
        .expect("acquire");
    let held_token = guard.token();
    let mut last = held_token;
    for i in 0..10 {
        let g = rt
            .block_on(client.acquire(&format!("dr/{i}"), Duration::from_secs(600), Duration::ZERO))
            .expect("acquire");
        last = g.token();
        drop(g.release_on_drop(false));
    }
    c.wait_converged(WITHIN);
    // Two nodes are lost for good; the survivor is a follower.
    let survivor = (1..=3).find(|id| *id != leader).expect("a follower");
    for id in (1..=3).filter(|id| *id != survivor) {
        c.kill(id);
    }
    c.kill(survivor);
    let data_dir = c.nodes[&survivor].data_dir.clone();
    let addr = c.addr(survivor).to_string();
    // Without --force-new-cluster nothing happens.
    let refused = Command::new(lockd_bin())
        .args([
            "recover",
            "--id",
            &survivor.to_string(),
            "--addr",
            &addr,
            "--data-dir",
        ])
        .arg(&data_dir)
        .output()
        .expect("recover");
    assert!(!refused.status.success(), "{refused:?}");
    let said = run(Command::new(lockd_bin())
        .args([
            "recover",
            "--force-new-cluster",
            "--id",
            &survivor.to_string(),
            "--addr",
            &addr,
        ])
        .arg("--data-dir")
        .arg(&data_dir));
    assert!(said.contains("the old data dir is kept at"), "{said}");
    c.spawn(survivor);
    assert_eq!(c.wait_leader(WITHIN), survivor);
    assert_eq!(held(&c, survivor, "dr/held"), Some(held_token));
    // The same client, its endpoints unchanged, reconnects to what is left.
    let next = rt
        .block_on(client.acquire("dr/next", Duration::from_secs(30), Duration::ZERO))
        .expect("acquire after the recovery");
    assert!(
        next.token() > last,
        "token {} reused or below {last}",
        next.token()
    );
    rt.block_on(guard.release())
        .expect("the old holder releases");

    // It grows back: a new node joins as a learner and is promoted.
    let addr4 = format!("127.0.0.1:{}", lock_tests::cluster::free_port());
    c.add_proc(4, addr4.clone(), &["--join"]);
    c.spawn(4);
    c.wait_up(4, WITHIN);
    let r = c
        .post(survivor, "/v1/members/add", json!({"id": 4, "addr": addr4}))
        .expect("add");
    assert!(r.ok(), "{:?}", r.body);
    let r = c
        .post(survivor, "/v1/members/promote", json!({"id": 4}))
        .expect("promote");
    assert!(r.ok(), "{:?}", r.body);
    let s = c.status(4).expect("status");
    assert_eq!(s.members.len(), 2, "{s:?}");
    assert_eq!(held(&c, 4, "dr/next"), Some(next.token()));
}
