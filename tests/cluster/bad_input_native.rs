//! Every bad input of the native protocol gets its precise error and
//! changes nothing; broken framing is answered and the connection closed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use lockd_client::conn::Conn;
use lockd_client::wire::{self, Envelope};
use lockd_proto::{ClientRequest, ClientResponse, WireError};
use lockd_tests::cluster::Cluster;
use lockd_tests::raw::{self, read_frame};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn raw_client(addr: &str) -> TcpStream {
    let s = raw::framed_client(addr);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

#[test]
fn bad_requests_get_precise_errors_and_change_nothing() {
    let c = Cluster::start(1, &["--max-lease-ms", "60000"]);
    c.wait_leader(Duration::from_secs(20));
    let held = c.acquire(1, "held", 60_000).expect("acquire");
    let token = held.body["token"].as_u64().unwrap();
    let before = c.wait_converged(Duration::from_secs(10));
    let rt = rt();
    let conn = rt
        .block_on(Conn::open(
            c.addr(1),
            Duration::from_secs(5),
            &Default::default(),
        ))
        .expect("connect");
    let call = |req: ClientRequest| {
        rt.block_on(conn.call(req, Duration::from_secs(5)))
            .expect("answer")
    };
    let bad = |msg: &str| ClientResponse::Error(WireError::BadRequest(msg.into()));
    let k = |s: &str| s.as_bytes().to_vec();
    assert_eq!(
        call(ClientRequest::Acquire {
            key: vec![],
            lease_ms: 10,
            wait_ms: 0
        }),
        bad("key must not be empty")
    );
    assert_eq!(
        call(ClientRequest::Acquire {
            key: vec![b'k'; 1025],
            lease_ms: 10,
            wait_ms: 0
        }),
        bad("key is 1025 bytes; at most 1024 are allowed")
    );
    assert_eq!(
        call(ClientRequest::Acquire {
            key: vec![0xff, 0xfe],
            lease_ms: 10,
            wait_ms: 0
        }),
        bad("key is not valid UTF-8")
    );
    assert_eq!(
        call(ClientRequest::Release {
            key: vec![0xc3],
            token: 1
        }),
        bad("key is not valid UTF-8")
    );
    assert_eq!(
        call(ClientRequest::Acquire {
            key: k("k"),
            lease_ms: 0,
            wait_ms: 0
        }),
        bad("lease_ms must be above 0")
    );
    assert_eq!(
        call(ClientRequest::Acquire {
            key: k("k"),
            lease_ms: 60_001,
            wait_ms: 0
        }),
        bad("lease_ms 60001 is above this cluster's maximum of 60000")
    );
    assert_eq!(
        call(ClientRequest::Release {
            key: k("held"),
            token: token + 1
        }),
        ClientResponse::Error(WireError::WrongToken(format!(
            "token {} does not hold lock \"held\"",
            token + 1
        )))
    );
    assert_eq!(
        call(ClientRequest::Keepalive {
            key: k("free"),
            token: 1
        }),
        ClientResponse::Error(WireError::NotHeld("lock \"free\" is not held".into()))
    );
    assert_eq!(
        call(ClientRequest::Acquire {
            key: k("held"),
            lease_ms: 10,
            wait_ms: 0
        }),
        ClientResponse::Error(WireError::Held(
            "lock \"held\" is held by another holder".into()
        ))
    );

    // A frame that is not a request: answered, and the connection goes on.
    let mut s = raw_client(c.addr(1));
    let junk = [0xde, 0xad, 0xbe, 0xef, 0x01];
    s.write_all(&(junk.len() as u32).to_be_bytes()).unwrap();
    s.write_all(&junk).unwrap();
    let env: Envelope<ClientResponse> = wire::decode(&read_frame(&mut s).expect("answer")).unwrap();
    match env.body {
        ClientResponse::Error(WireError::BadRequest(m)) => {
            assert!(m.starts_with("request frame does not decode"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    let get = wire::encode(&Envelope {
        id: 7,
        body: ClientRequest::Get { key: k("held") },
    })
    .unwrap();
    s.write_all(&(get.len() as u32).to_be_bytes()).unwrap();
    s.write_all(&get).unwrap();
    let env: Envelope<ClientResponse> = wire::decode(&read_frame(&mut s).expect("answer")).unwrap();
    assert_eq!(env.id, 7);
    assert!(matches!(env.body, ClientResponse::Lock(Some(v)) if v.token == token));

    // An oversized frame (a client's are small: 100 KiB is too big, though
    // a peer may send more): answered with the limit, then closed.
    let mut s = raw_client(c.addr(1));
    s.write_all(&(100u32 << 10).to_be_bytes()).unwrap();
    let env: Envelope<ClientResponse> = wire::decode(&read_frame(&mut s).expect("answer")).unwrap();
    match env.body {
        ClientResponse::Error(WireError::BadRequest(m)) => {
            assert!(
                m.contains("a client's frames are at most 65536 bytes"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
    // Closed means end of stream (or a reset), not a read that timed out.
    let mut byte = [0u8; 1];
    match s.read(&mut byte) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("the connection must be closed, got {other:?}"),
    }

    let after = c.wait_converged(Duration::from_secs(10));
    assert_eq!(
        after.applied_index, before.applied_index,
        "bad input reached the log"
    );
    assert_eq!(after.state_hash, before.state_hash);
}
