//! Brief fuzzing of every decoder that takes bytes from outside: frames
//! (client and peer), HTTP bodies and paths on a live node, and snapshots
//! into the guest. None may panic; a live node must keep serving with its
//! state unchanged.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use lock_tests::cluster::Cluster;
use lock_tests::machines::{LockMachine, WasmMachine};
use lockd::raft::network::{PeerRequest, PeerResponse};
use lockd_client::proto::{ClientRequest, ClientResponse};
use lockd_client::wire::{self, Envelope, Hello, HelloReply};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// Arbitrary bytes never panic a frame decoder.
    #[test]
    fn frame_decoders_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = wire::decode::<Hello>(&bytes);
        let _ = wire::decode::<HelloReply>(&bytes);
        let _ = wire::decode::<Envelope<ClientRequest>>(&bytes);
        let _ = wire::decode::<Envelope<ClientResponse>>(&bytes);
        let _ = wire::decode::<Envelope<PeerRequest>>(&bytes);
        let _ = wire::decode::<Envelope<PeerResponse>>(&bytes);
    }

    /// Mutated valid requests decode to something or fail cleanly.
    #[test]
    fn mutated_requests_never_panic(key in ".{0,40}", lease in any::<u64>(), flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let env = Envelope { id: 9, body: ClientRequest::Acquire { key: key.into_bytes(), lease_ms: lease, wait_ms: 3 } };
        let mut bytes = wire::encode(&env).unwrap().to_vec();
        for (at, x) in flips {
            let n = bytes.len();
            bytes[at % n] ^= x;
        }
        let _ = wire::decode::<Envelope<ClientRequest>>(&bytes);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Arbitrary bytes as a snapshot: the guest refuses them with an error
    /// value (never a trap) and keeps its state.
    #[test]
    fn guest_restore_refuses_garbage(mut bytes in prop::collection::vec(any::<u8>(), 0..256), magic in any::<bool>()) {
        if magic {
            bytes.splice(0..0, b"LKSM\x01".iter().copied());
        }
        let mut g = WasmMachine::new();
        g.apply(&[Some(guest_sm::Command::Grant { key: "kept".into(), lease_ms: 5 })]);
        let before = g.state_hash();
        if g.restore(&bytes).is_err() {
            prop_assert_eq!(g.state_hash(), before);
        }
    }
}

fn send_raw(addr: &str, bytes: &[u8]) {
    if let Ok(mut s) = TcpStream::connect(addr) {
        let _ = s.set_read_timeout(Some(Duration::from_millis(300)));
        let _ = s.write_all(bytes);
        let mut sink = [0u8; 4096];
        let _ = s.read(&mut sink);
    }
}

/// A live node fed random frames, random HTTP bodies and paths keeps
/// serving, and nothing reaches the log.
#[test]
fn a_live_node_survives_random_input() {
    let c = Cluster::start(1, &[]);
    c.wait_leader(Duration::from_secs(20));
    assert!(c.acquire(1, "kept", 60_000).expect("acquire").ok());
    let before = c.wait_converged(Duration::from_secs(10));
    let addr = c.addr(1).to_string();
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let bytes = prop::collection::vec(any::<u8>(), 0..300);
    let text = "[ -~]{0,80}";
    for _ in 0..150 {
        // Framed: the preface, then garbage (as hello or as requests).
        let junk = bytes.new_tree(&mut runner).unwrap().current();
        let mut framed = wire::PREFACE.to_vec();
        framed.extend_from_slice(&(junk.len() as u32).to_be_bytes());
        framed.extend_from_slice(&junk);
        send_raw(&addr, &framed);
        // HTTP: random JSON-ish bodies and random paths.
        let body = text.new_tree(&mut runner).unwrap().current();
        let path = text
            .new_tree(&mut runner)
            .unwrap()
            .current()
            .replace(' ', "%20");
        let req = format!(
            "POST /v1/locks/{path}/acquire HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        send_raw(&addr, req.as_bytes());
        // Raw garbage as the first bytes of a connection.
        send_raw(&addr, &junk);
    }
    let after = c.wait_converged(Duration::from_secs(10));
    assert_eq!(
        after.applied_index, before.applied_index,
        "random input reached the log"
    );
    assert_eq!(after.state_hash, before.state_hash);
    assert_eq!(c.lock(1, "kept").expect("still serving").body["held"], true);
}
