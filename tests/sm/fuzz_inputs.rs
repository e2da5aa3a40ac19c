//! Brief fuzzing of every decoder that takes bytes from outside: frames
//! (client and peer), HTTP bodies and paths on a live node, and snapshots
//! into the guest. None may panic; a live node must keep serving with its
//! state unchanged; a snapshot the guest accepts must give the state it
//! encodes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lockd::raft::messages::{PeerRequest, PeerResponse};
use lockd_client::wire::{self, Envelope, Hello, HelloReply};
use lockd_proto::{ClientRequest, ClientResponse};
use lockd_tests::cluster::Cluster;
use lockd_tests::machines::{LockMachine, NativeMachine, WasmMachine};
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

/// Bytes offered to `restore`: anything, anything after the snapshot
/// magic, or the snapshot of a table built from `grants` (keys and leases;
/// a repeated key frees the lock instead), with `flips` applied (none: the
/// snapshot as written).
#[derive(Clone, Debug)]
enum RestoreInput {
    Garbage(Vec<u8>),
    AfterMagic(Vec<u8>),
    Snapshot {
        grants: Vec<(String, u64)>,
        flips: Vec<(usize, u8)>,
    },
}

fn restore_inputs() -> impl Strategy<Value = RestoreInput> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256).prop_map(RestoreInput::Garbage),
        prop::collection::vec(any::<u8>(), 0..256).prop_map(RestoreInput::AfterMagic),
        (
            prop::collection::vec(("[a-d]{1,3}", 1..u64::MAX), 0..12),
            prop::collection::vec((any::<usize>(), 1..=u8::MAX), 0..3),
        )
            .prop_map(|(grants, flips)| RestoreInput::Snapshot { grants, flips }),
    ]
}

/// The bytes of `input`, and for an unmutated snapshot the table it was
/// taken from.
fn restore_bytes(input: &RestoreInput) -> (Vec<u8>, Option<NativeMachine>) {
    match input {
        RestoreInput::Garbage(b) => (b.clone(), None),
        RestoreInput::AfterMagic(b) => ([b"LKSM\x01".as_slice(), b].concat(), None),
        RestoreInput::Snapshot { grants, flips } => {
            let mut table = NativeMachine::default();
            for (key, lease_ms) in grants {
                let cmd = if table.get(key).is_some() {
                    guest_sm::Command::Release { key: key.clone() }
                } else {
                    guest_sm::Command::Grant {
                        key: key.clone(),
                        lease_ms: *lease_ms,
                    }
                };
                table.apply(&[Some(cmd)]);
            }
            let mut bytes = table.snapshot();
            for (at, x) in flips {
                let n = bytes.len();
                bytes[at % n] ^= x;
            }
            (bytes, flips.is_empty().then_some(table))
        }
    }
}

/// Bytes as a snapshot into the guest. Refused: with an error value (never
/// a trap), keeping its state. Accepted: the state is the one the bytes
/// encode (as `guest-sm`'s own decoder reads them, and, for a snapshot as
/// written, exactly the table it was taken from), and its own snapshot
/// round-trips into a fresh guest. Both outcomes must occur.
#[test]
fn guest_restore_refuses_garbage_and_restores_what_the_bytes_encode() {
    let refused = AtomicUsize::new(0);
    let accepted = AtomicUsize::new(0);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let result = runner.run(&restore_inputs(), |input| {
        let (bytes, source) = restore_bytes(&input);
        let mut g = WasmMachine::new();
        g.apply(&[Some(guest_sm::Command::Grant {
            key: "kept".into(),
            lease_ms: 5,
        })]);
        let before = g.state_hash();
        let mut native = NativeMachine::default();
        let decoded = native.restore(&bytes);
        match g.restore(&bytes) {
            Err(why) => {
                refused.fetch_add(1, Ordering::Relaxed);
                prop_assert_eq!(g.state_hash(), before);
                // (The wording may differ: postcard reads lengths as
                // `usize`, 32 bits in the guest.)
                prop_assert!(
                    decoded.is_err(),
                    "guest-sm accepts what the guest refuses: {}",
                    why
                );
            }
            Ok(()) => {
                accepted.fetch_add(1, Ordering::Relaxed);
                prop_assert_eq!(decoded, Ok(()), "the guest accepted what guest-sm refuses");
                let snapshot = g.snapshot();
                prop_assert_eq!(&snapshot, &native.snapshot());
                prop_assert_eq!(g.state_hash(), native.state_hash());
                prop_assert_eq!(g.stats(), native.stats());
                prop_assert_eq!(g.locks(None, u32::MAX), native.locks(None, u32::MAX));
                if let Some(mut table) = source {
                    prop_assert_eq!(&snapshot, &bytes);
                    prop_assert_eq!(g.locks(None, u32::MAX), table.locks(None, u32::MAX));
                    prop_assert_eq!(g.stats(), table.stats());
                }
                let mut again = WasmMachine::new();
                prop_assert_eq!(again.restore(&snapshot), Ok(()));
                prop_assert_eq!(again.snapshot(), snapshot);
                prop_assert_eq!(again.state_hash(), g.state_hash());
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (refused, accepted) = (refused.into_inner(), accepted.into_inner());
    assert!(
        refused > 0 && accepted > 0,
        "only one outcome was tried: {refused} refused, {accepted} accepted"
    );
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
            "POST /v1/locks/{path}/acquire HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
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
