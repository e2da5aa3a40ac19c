//! Raw sockets to a node, for tests that must say exactly what goes over
//! the wire: framed clients that stop after the hello, half-sent HTTP
//! heads, connections from other loopback addresses, and peer connections
//! that play a foreign or hostile node.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use lockd::raft::messages::{PeerRequest, PeerResponse, ServiceMessages};
use lockd_client::wire::{self, Envelope, Hello, HelloReply, Role};

/// A TCP connection to `addr` from the loopback address `src` (any of
/// 127.0.0.0/8 works on Linux), as a blocking socket.
pub fn connect_from(src: IpAddr, addr: &str) -> std::io::Result<TcpStream> {
    let to: SocketAddr = addr
        .parse()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(src, 0))?;
        let s = socket.connect(to).await?.into_std()?;
        s.set_nonblocking(false)?;
        Ok(s)
    })
}

/// Send one length-prefixed frame.
pub fn send_frame(s: &mut TcpStream, body: &[u8]) {
    try_send_frame(s, body).expect("frame");
}

/// Send one length-prefixed frame; the write's error, for a caller that
/// expects the node to close the connection.
pub fn try_send_frame(s: &mut TcpStream, body: &[u8]) -> std::io::Result<()> {
    s.write_all(&(body.len() as u32).to_be_bytes())?;
    s.write_all(body)
}

/// Read one length-prefixed frame; `None` if the connection ended or the
/// read timed out.
pub fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

/// Send the preface and a client hello on `s`; the node's answer.
pub fn client_hello(s: &mut TcpStream) -> HelloReply {
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(&wire::PREFACE).expect("preface");
    let hello = wire::encode(&Hello { role: Role::Client }).expect("encode");
    send_frame(s, &hello);
    wire::decode(&read_frame(s).expect("hello reply")).expect("decode")
}

/// A framed client connection to `addr`, past a welcomed hello.
pub fn framed_client(addr: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    let reply = client_hello(&mut s);
    assert!(matches!(reply, HelloReply::Welcome(_)), "{reply:?}");
    s
}

/// Wait up to `within` for the node to close `s` (end of stream or a
/// reset), reading and dropping whatever it sends; how long it took, or
/// `None` if it stayed open.
pub fn closed_within(s: &mut TcpStream, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        let left = within.checked_sub(started.elapsed())?;
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .ok()?;
        match s.read(&mut buf) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return None
            }
            Err(_) => return Some(started.elapsed()),
        }
    }
}

/// A peer hello naming node `from`, sent to node `to` at `addr` of
/// `cluster` with the default engine's fingerprint (each frame sent at
/// once, reads bounded by `timeout`): the node's answer, and the
/// connection.
pub fn peer_hello(
    (addr, to, cluster): (&str, u64, &str),
    from: u64,
    timeout: Duration,
) -> (HelloReply, TcpStream) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(timeout)).expect("timeout");
    s.set_nodelay(true).expect("nodelay");
    s.write_all(&wire::PREFACE).expect("preface");
    let fingerprint = lockd_core::engine::EngineSettings::default()
        .fingerprint()
        .text;
    let hello = wire::encode(&Hello {
        role: Role::PeerInCluster {
            from,
            to,
            fingerprint,
            cluster: cluster.to_string(),
        },
    })
    .expect("hello");
    send_frame(&mut s, &hello);
    let reply = wire::decode(&read_frame(&mut s).expect("hello reply")).expect("hello reply");
    (reply, s)
}

/// [`peer_hello`], welcomed.
pub fn peer_conn(to: (&str, u64, &str), from: u64, timeout: Duration) -> TcpStream {
    let (reply, s) = peer_hello(to, from, timeout);
    assert!(matches!(reply, HelloReply::Welcome(_)), "{reply:?}");
    s
}

/// Send `body` as request 1 on a peer connection; the answer.
/// `S` names the service's messages (`RaftOnly`, the default, for
/// consensus's own).
pub fn peer_call<S: ServiceMessages>(s: &mut TcpStream, body: PeerRequest<S>) -> PeerResponse<S> {
    let bytes = wire::encode(&Envelope { id: 1, body }).expect("encode");
    send_frame(s, &bytes);
    let reply: Envelope<PeerResponse<S>> =
        wire::decode(&read_frame(s).expect("an answer")).expect("an answer");
    reply.body
}
