//! The framed protocol's handshake gives a wrong peer a clear error: another
//! program, another protocol version; and a node never sends Raft RPC to
//! another node found at a peer's address.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use lockd::raft::peer_conn::FramedConn;
use lockd::raft::peer_conn::TransportError;
use lockd_client::wire::{self as frame, HelloReply, Role};
use lockd_proto::{Role as StatusRole, Status};
use lockd_tests::cluster::{free_port, Cluster};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn an_unknown_protocol_version_is_refused_with_a_reason() {
    let c = Cluster::start(1, &[]);
    c.wait_leader(Duration::from_secs(20));
    let mut s = std::net::TcpStream::connect(c.addr(1)).unwrap();
    s.write_all(b"LKD\x07").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    match frame::decode::<HelloReply>(&body).unwrap() {
        HelloReply::Refused(r) => {
            assert_eq!(
                r.reason,
                "protocol version 7 is not supported; this node speaks version 1"
            )
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_peer_that_is_not_lockd_is_named_as_such() {
    // An HTTP-only server answers our preface with HTTP.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            let mut buf = [0u8; 64];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
        }
    });
    let err = rt()
        .block_on(FramedConn::connect(
            &addr,
            0,
            Role::Client,
            Duration::from_secs(5),
            None,
        ))
        .err()
        .expect("must fail");
    assert!(matches!(err, TransportError::NotLockd { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("is not a lockd node speaking protocol version 1"),
        "{err}"
    );
}

/// Node `id`'s status once it leads and has committed all it has.
fn wait_settled_leader(c: &Cluster, id: u64, within: Duration) -> Status {
    let start = Instant::now();
    loop {
        if let Some(s) = c.status(id).filter(|s| {
            s.role == StatusRole::Leader
                && s.last_log_index > 0
                && s.commit_index == s.last_log_index
                // The first leader appends the cluster's first module
                // after its election: settled means that entry is in and
                // applied (the cluster record names the module before
                // its entry exists, and compiling it can take seconds
                // on a loaded machine).
                && s.first_module_hash.is_some()
                && s.module_since_index > 0
                && s.applied_index == s.last_log_index
        }) {
            return s;
        }
        assert!(
            start.elapsed() < within,
            "node {id} did not lead within {within:?}: {}",
            c.describe()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn raft_rpc_is_refused_to_another_node_at_a_peer_address() {
    // Nodes 1 and 2 are told node 3 is at an address where node 7, a
    // one-node cluster of its own, listens: an address that was reused.
    let mut c = Cluster::empty(&[]);
    let [a1, a2, a7] = [(); 3].map(|_| format!("127.0.0.1:{}", free_port()));
    c.add_proc(7, a7.clone(), &["--initial-cluster", &format!("7={a7}")]);
    let initial = format!("1={a1},2={a2},3={a7}");
    c.add_proc(1, a1, &["--initial-cluster", &initial]);
    c.add_proc(2, a2, &["--initial-cluster", &initial]);
    let patience = Duration::from_millis(50 * c.election_ms);
    c.spawn(7);
    let seven = wait_settled_leader(&c, 7, patience);
    c.spawn(1);
    c.spawn(2);

    // Nodes 1 and 2 are a quorum of three: they elect a leader and commit,
    // and every call to "node 3" is refused once the welcome names node 7.
    let start = Instant::now();
    // Node 7 refuses the hello that names node 3 (a node of a build
    // whose hello names no node would be refused by the caller, seeing
    // the welcome name node 7).
    let refusal = "it is node 7, not node 3";
    let mut committed = false;
    for round in 0.. {
        // A fresh key each round: an acquire cut short may still commit.
        let key = format!("k{round}");
        committed = committed
            || [1, 2].into_iter().any(|i| {
                c.status(i).is_some_and(|s| s.role == StatusRole::Leader)
                    && c.acquire(i, &key, 60_000).is_ok_and(|r| r.ok())
            });
        let refused = [1, 2]
            .into_iter()
            .any(|i| std::fs::read_to_string(&c.nodes[&i].log).is_ok_and(|l| l.contains(refusal)));
        if committed && refused {
            break;
        }
        assert!(
            start.elapsed() < patience,
            "committed: {committed}, refusal logged: {refused}: {}",
            c.describe()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // Node 7 never took part: no vote raised its term, no entry reached
    // its log, and it still leads its own cluster alone.
    let now = c.status(7).expect("node 7 status");
    assert_eq!(
        (now.term, now.leader, now.last_log_index, now.locks_held),
        (seven.term, Some(7), seven.last_log_index, 0),
        "node 7 was reached by the other cluster's Raft RPC: {now:?}"
    );
    assert_eq!(now.members, seven.members);
}
