//! Who may join and who may vouch: a node not named by its certificate,
//! a public address without TLS and authentication, a rogue node with a
//! cluster certificate.

use super::*;

/// Start node 4 and ask the leader to add it at `addr`.
fn start_and_add(c: &mut Cluster, leader: u64, addr: &str) -> lockd_tests::cluster::Reply {
    c.spawn(4);
    c.wait_up(4, Duration::from_secs(20));
    c.post(
        leader,
        "/v1/members/add",
        serde_json::json!({ "id": 4, "addr": addr }),
    )
    .expect("answer")
}

#[test]
fn a_node_that_is_not_the_one_its_certificate_names_cannot_join() {
    let mut c = Cluster::start_secure(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    // Node 4 started with node 5's certificate (which the CA issued, for
    // the right host): the leader's check names the mismatch.
    let addr = format!("127.0.0.1:{}", free_port());
    c.add_proc(4, addr.clone(), &["--join"]);
    let args = &mut c.nodes.get_mut(&4).expect("node 4").args;
    for a in args.iter_mut() {
        if a.ends_with("node-4.pem") {
            *a = a.replace("node-4.pem", "node-5.pem");
        } else if a.ends_with("node-4.key") {
            *a = a.replace("node-4.key", "node-5.key");
        }
    }
    let r = start_and_add(&mut c, leader, &addr);
    assert_ne!(r.status, 200, "{r:?}");
    assert!(r.error().contains("node 4"), "{r:?}");
    let members = c.status(leader).expect("status").members;
    assert!(!members.iter().any(|m| m.id == 4), "{members:?}");

    // The same node with its own certificate joins.
    c.kill(4);
    let args = &mut c.nodes.get_mut(&4).expect("node 4").args;
    for a in args.iter_mut() {
        *a = a.replace("node-5.", "node-4.");
    }
    let _ = std::fs::remove_dir_all(&c.nodes[&4].data_dir);
    let r = start_and_add(&mut c, leader, &addr);
    assert!(r.ok(), "{r:?}");
}

#[test]
fn a_public_address_needs_tls_and_authentication_or_insecure() {
    let port = free_port();
    let dir = tempfile::tempdir().expect("tempdir");
    let lockd = lockd_tests::cluster::lockd_bin();
    let serve = |extra: &[&str]| {
        let mut cmd = std::process::Command::new(&lockd);
        cmd.args(["serve", "--addr", &format!("0.0.0.0:{port}"), "--data-dir"])
            .arg(dir.path().join("d"))
            .args(extra)
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        cmd
    };
    // Without TLS and an auth file: refused at once, saying what is missing.
    let out = serve(&[]).output().expect("run lockd");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is not a loopback address") && err.contains("neither TLS nor authentication"),
        "{err}"
    );
    // With --insecure it starts, and warns.
    let mut child = serve(&["--insecure"]).spawn().expect("spawn lockd");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut log = String::new();
    let mut stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let http = lockd_tests::secure::Http::new(None);
    while http
        .request(&format!("127.0.0.1:{port}"), "GET", "/v1/status", None)
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "the --insecure node did not come up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    log.push_str(&reader.join().unwrap_or_default());
    assert!(
        log.contains("--insecure: this node may serve without TLS"),
        "{log}"
    );
}

/// One peer request on `framed`: the answer, or why there was none.
async fn ask(
    framed: &mut Framed<Stream, LengthDelimitedCodec>,
    req: PeerRequest,
) -> Result<PeerResponse, String> {
    use futures::{SinkExt, StreamExt};
    let bytes = wire::encode(&Envelope { id: 1, body: req }).map_err(|e| e.to_string())?;
    framed.send(bytes).await.map_err(|e| e.to_string())?;
    match framed.next().await {
        Some(Ok(b)) => wire::decode::<Envelope<PeerResponse>>(&b)
            .map(|env| env.body)
            .map_err(|e| e.to_string()),
        other => Err(format!("{other:?}")),
    }
}

#[test]
fn a_rogue_node_with_a_cluster_certificate_cannot_vouch_for_itself() {
    use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest};
    use openraft::{EntryPayload, Membership, SnapshotMeta, StoredMembership};
    let c = Cluster::start_secure(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    c.acquire_on_leader("jobs/before", 60_000, Duration::from_secs(10));
    let target = (1..=3).find(|i| *i != leader).expect("a follower");
    c.wait_converged(Duration::from_secs(20));
    // The target's own reading, its log and applied index agreeing: what
    // "nothing moved" is checked against.
    let before = c.wait_settled(target, Duration::from_secs(20));
    let cluster = before.cluster_id.clone().expect("a cluster id");
    let s = c.secure();
    // Node 9: a certificate from the cluster's CA (a node removed, or one
    // issued for later), never a member.
    let (pem, key) = s.issue("node-9", &[node_name(9), "127.0.0.1".into()], true, 30);
    let rogue_tls = client_tls(s, Some((&pem, &key)));
    let addr = c.addr(target).to_string();
    let rt = rt();
    let naming_9 = Membership::<u64, lockd::raft::Node>::new(
        vec![[1, 2, 3, 9].into_iter().collect()],
        [1, 2, 3, 9]
            .into_iter()
            .map(|id| (id, lockd::raft::Node::new(format!("127.0.0.1:{id}"))))
            .collect::<std::collections::BTreeMap<_, _>>(),
    );
    let term = before.term + 100;
    let append = PeerRequest::AppendEntries(AppendEntriesRequest {
        vote: Vote::new_committed(term, 9),
        prev_log_id: None,
        entries: vec![lockd::raft::Entry {
            log_id: openraft::LogId::new(openraft::CommittedLeaderId::new(term, 9), 1),
            payload: EntryPayload::Membership(naming_9.clone()),
        }],
        leader_commit: None,
    });
    let snapshot = PeerRequest::InstallSnapshot(InstallSnapshotRequest {
        vote: Vote::new_committed(term, 9),
        meta: SnapshotMeta {
            last_log_id: Some(openraft::LogId::new(
                openraft::CommittedLeaderId::new(term, 9),
                before.last_log_index + 10,
            )),
            last_membership: StoredMembership::new(None, naming_9),
            snapshot_id: "rogue".into(),
        },
        offset: 0,
        data: vec![0; 16],
        done: true,
    });
    let answers = rt.block_on(async {
        let mut framed = peer_hello_in(&addr, target, 9, &rogue_tls, &cluster)
            .await
            .expect("a valid certificate of the cluster's CA passes the hello");
        let a = ask(&mut framed, append).await;
        let b = ask(&mut framed, snapshot).await;
        (a, b)
    });
    for answer in [answers.0, answers.1] {
        match answer {
            Ok(PeerResponse::NotMember(e)) => assert!(e.contains("node 9 is not a member"), "{e}"),
            other => panic!("the rogue was served: {other:?}"),
        }
    }
    // Nothing moved: the same term, log and leader, and it still serves.
    let after = c.status(target).expect("status");
    assert_eq!(
        (after.term, after.last_log_index, after.leader),
        (before.term, before.last_log_index, Some(leader))
    );
    c.acquire_on_leader("jobs/after", 5_000, Duration::from_secs(10));
}
