//! Backup and disaster recovery (docs/operations.md, "Backup and disaster
//! recovery"), with real processes: a backup restored into a fresh 3-node
//! cluster, and a cluster that lost two of three nodes for good rebuilt
//! from the survivor. Either way the locks held are still held with their
//! tokens, and the next token is above every token the old cluster gave
//! out, even after the backup. The new cluster has a new cluster id, and an
//! old node brought back with its data dir is refused by it.

use std::process::Command;
use std::time::Duration;

use lockd_tests::cluster::{lockd_bin, Cluster};
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

fn cluster_id(c: &Cluster, id: u64) -> String {
    let s = c.status(id).expect("status");
    s.cluster_id
        .clone()
        .unwrap_or_else(|| panic!("node {id} names no cluster: {s:?}"))
}

/// Wait until node `id`'s log says `what`.
fn wait_logged(c: &Cluster, id: u64, what: &str) {
    let deadline = std::time::Instant::now() + WITHIN;
    loop {
        let log = std::fs::read_to_string(&c.nodes[&id].log).unwrap_or_default();
        if log.contains(what) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "node {id} never logged {what:?}:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_backup_restores_into_a_new_cluster_with_its_locks_and_later_tokens() {
    let mut old = Cluster::start(3, &[]);
    old.wait_leader(WITHIN);
    old.wait_converged(WITHIN);
    let old_id = cluster_id(&old, 1);
    for id in 2..=3 {
        assert_eq!(cluster_id(&old, id), old_id, "one cluster, one id");
    }
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
    for id in 1..=3 {
        old.kill(id);
    }

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

    // Machines 1 and 2 are rebuilt with their old addresses; node 3 is a
    // new machine. Old node 3, brought back below, still names 1 and 2.
    let mut new = Cluster::empty(&[]);
    new.add_members(vec![
        (1, old.addr(1).to_string()),
        (2, old.addr(2).to_string()),
        (
            3,
            format!("127.0.0.1:{}", lockd_tests::cluster::free_port()),
        ),
    ]);
    let initial = new
        .nodes
        .values()
        .map(|n| format!("{}={}", n.id, n.addr))
        .collect::<Vec<_>>()
        .join(",");
    // The backup requires no module signature (its cluster trusted no
    // module key): restored only when the operator says so.
    let unvouched = Command::new(lockd_bin())
        .args(["restore", "--snapshot"])
        .arg(&file)
        .args(["--id", "1", "--initial-cluster", &initial, "--data-dir"])
        .arg(&new.nodes[&1].data_dir)
        .output()
        .expect("restore");
    assert!(!unvouched.status.success());
    assert!(
        String::from_utf8_lossy(&unvouched.stderr).contains("--allow-unsigned-backup"),
        "{unvouched:?}"
    );
    assert!(!new.nodes[&1].data_dir.join("snapshot").exists());
    for id in 1..=3 {
        let said = run(Command::new(lockd_bin())
            .args(["restore", "--allow-unsigned-backup", "--snapshot"])
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
        .args(["restore", "--allow-unsigned-backup", "--snapshot"])
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
    let new_id = cluster_id(&new, 1);
    assert_ne!(new_id, old_id, "a restored cluster is a new cluster");
    for id in 2..=3 {
        assert_eq!(cluster_id(&new, id), new_id);
    }

    // Old node 3 comes back with its data dir: a longer log than the
    // restored one, and votes to ask of nodes 1 and 2. They refuse it.
    let before = new.status(leader).expect("status");
    old.spawn(3);
    for id in [1, 2] {
        wait_logged(&new, id, &format!("it belongs to cluster {old_id}"));
    }
    // Several election timeouts later the new cluster has not noticed.
    std::thread::sleep(Duration::from_secs(2));
    let after = new.status(leader).expect("status");
    assert_eq!(
        (after.leader, after.term),
        (Some(leader), before.term),
        "the old node moved the new cluster"
    );
    let stale = old.status(3).expect("the old node's status");
    assert_eq!(stale.cluster_id.as_deref(), Some(old_id.as_str()));
    assert_eq!(stale.leader, None, "{stale:?}");
    assert_eq!(held(&new, leader, "backup/kept"), Some(kept));
    // The restored holder can still release its lock.
    new.release_on_leader("backup/kept", kept, WITHIN);
}

#[test]
fn a_survivor_of_a_lost_majority_rebuilds_the_cluster_and_clients_carry_on() {
    let mut c = Cluster::start(3, &[]);
    let leader = c.wait_leader(WITHIN);
    let old_id = cluster_id(&c, leader);
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
    let new_id = cluster_id(&c, survivor);
    assert_ne!(new_id, old_id, "a recovered cluster is a new cluster");
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
    let addr4 = format!("127.0.0.1:{}", lockd_tests::cluster::free_port());
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
    // The promotion is committed when the leader answers; node 4 applies
    // it a moment later.
    lockd_tests::cluster::wait_for("node 4 applies its promotion", WITHIN, || {
        c.status(4).is_some_and(|s| s.members.len() == 2)
    });
    let s = c.status(4).expect("status");
    assert!(s.members.iter().all(|m| m.voter), "{s:?}");
    assert_eq!(
        s.cluster_id.as_deref(),
        Some(new_id.as_str()),
        "a joiner takes its cluster's id"
    );
    assert_eq!(held(&c, 4, "dr/next"), Some(next.token()));
}
