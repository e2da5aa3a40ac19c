//! The framed protocol's handshake gives a wrong peer a clear error: another
//! program, another protocol version, another node at the expected address.

use std::io::{Read, Write};
use std::time::Duration;

use lock_tests::cluster::Cluster;
use lockd::transport::frame::{self, HelloReply, Role};
use lockd::transport::peer::FramedConn;
use lockd::transport::TransportError;

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
            Role::Client,
            Duration::from_secs(5),
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

#[test]
fn the_wrong_node_at_an_address_is_detected() {
    let c = Cluster::start(1, &[]);
    c.wait_leader(Duration::from_secs(20));
    let fingerprint = lockd::engine::EngineSettings::default().fingerprint().text;
    let conn = rt()
        .block_on(FramedConn::connect(
            c.addr(1),
            Role::Peer {
                from: 9,
                fingerprint,
            },
            Duration::from_secs(5),
        ))
        .expect("same engine: welcome");
    // The welcome names the node, so a caller expecting node 2 here knows.
    assert_eq!(conn.welcome.node_id, 1);
}
