//! The unauthenticated connection budget, on a real node with TLS and
//! authentication (docs/security.md, "Connection slots"):
//!
//! * strangers from several addresses hold every unauthenticated place —
//!   native hellos without a credential, and HTTP connections kept alive
//!   on a public route — and the next stranger is refused by name, per
//!   address and in all; meanwhile clients with a token (native, and HTTP
//!   from a stranger's own address) and with a certificate connect and are
//!   served, and a stranger's request is refused (401); once the
//!   strangers leave, their places come back;
//! * a connection that never brings a valid credential is closed at its
//!   deadline, and one that did is kept.

use std::time::{Duration, Instant};

use lockd_client::tls::{host_name, Alpn};
use lockd_client::wire::{self, Envelope, Hello, HelloReply, Role};
use lockd_proto::{ClientRequest, ClientResponse, WireError};
use lockd_tests::cluster::Cluster;
use lockd_tests::secure::Who;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpSocket;

const WITHIN: Duration = Duration::from_secs(20);

type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A TLS connection to node 1 from loopback address `src`, as `who`
/// (its certificate, if any), speaking `alpn`.
async fn connect(c: &Cluster, src: &str, who: Who<'_>, alpn: Alpn) -> Tls {
    let addr = c.addr(1);
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{src}:0").parse().expect("source"))
        .expect("bind");
    let tcp = socket
        .connect(addr.parse().expect("addr"))
        .await
        .expect("connect");
    let tls = c.secure().credentials(who).tls.expect("tls");
    tls.connector(alpn)
        .connect(host_name(addr).expect("name"), tcp)
        .await
        .expect("handshake")
}

async fn send_frame<S: AsyncWrite + Unpin>(s: &mut S, body: &[u8]) {
    s.write_all(&(body.len() as u32).to_be_bytes())
        .await
        .expect("frame length");
    s.write_all(body).await.expect("frame body");
}

async fn read_frame<S: AsyncRead + Unpin>(s: &mut S) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).await.ok()?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).await.ok()?;
    Some(body)
}

/// A native hello from `src` (with `token`, if any); the connection and
/// the node's answer.
async fn hello(c: &Cluster, src: &str, token: Option<String>) -> (Tls, HelloReply) {
    let mut s = connect(c, src, Who::Nobody, Alpn::Native).await;
    s.write_all(&wire::PREFACE).await.expect("preface");
    let role = match token {
        Some(token) => Role::ClientToken { token },
        None => Role::Client,
    };
    send_frame(&mut s, &wire::encode(&Hello { role }).expect("encode")).await;
    let reply = tokio::time::timeout(WITHIN, read_frame(&mut s))
        .await
        .expect("an answer in time")
        .expect("a hello reply");
    (s, wire::decode(&reply).expect("decode"))
}

/// One HTTP request on `s`; the answer's head and body.
async fn http(s: &mut Tls, head: &str) -> String {
    let req = format!("{head}\r\nhost: 127.0.0.1\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let read_all = async {
        loop {
            let text = String::from_utf8_lossy(&out).into_owned();
            if let Some((headers, body)) = text.split_once("\r\n\r\n") {
                let len = headers
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length: ")
                            .map(str::to_string)
                    })
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if body.len() >= len {
                    return text;
                }
            }
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return text,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(WITHIN, read_all)
        .await
        .expect("an answer in time")
}

/// How long until the node closes `s` (reading and dropping what it
/// sends), or `None` if it is still open after `within`.
async fn closed_within(s: &mut Tls, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    let closed = async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(within, closed)
        .await
        .ok()
        .map(|()| started.elapsed())
}

fn welcomed(r: &HelloReply) -> bool {
    matches!(r, HelloReply::Welcome(_))
}

fn refused_by(r: &HelloReply, flag: &str) -> bool {
    matches!(r, HelloReply::Refused(x) if x.reason.contains(flag))
}

#[test]
fn strangers_holding_the_unauthenticated_budget_keep_no_client_out() {
    let c = Cluster::start_secure(
        1,
        &[
            "--max-unauthenticated",
            "6",
            "--max-unauthenticated-per-ip",
            "3",
            // Longer than the test: the strangers keep their places.
            "--unauthenticated-timeout-ms",
            "600000",
        ],
    );
    c.wait_leader(WITHIN);
    let rt = rt();
    let worker = format!("Bearer {}", c.secure().token("worker"));

    // Three native strangers from one address; the fourth is refused.
    let mut strangers = Vec::new();
    for _ in 0..3 {
        let (s, r) = rt.block_on(hello(&c, "127.0.0.2", None));
        assert!(welcomed(&r), "{r:?}");
        strangers.push(s);
    }
    let (_, r) = rt.block_on(hello(&c, "127.0.0.2", None));
    assert!(refused_by(&r, "--max-unauthenticated-per-ip"), "{r:?}");
    // Three HTTP strangers on a public route from another address.
    for _ in 0..3 {
        let mut s = rt.block_on(connect(&c, "127.0.0.3", Who::Nobody, Alpn::Http));
        let answer = rt.block_on(http(&mut s, "GET /healthz HTTP/1.1"));
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        strangers.push(s);
    }
    // The budget is full in all: strangers from a third address are
    // refused, on HTTP with 503 and Retry-After, with a wrong token too.
    let mut s = rt.block_on(connect(&c, "127.0.0.4", Who::Nobody, Alpn::Http));
    let answer = rt.block_on(http(&mut s, "GET /healthz HTTP/1.1"));
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 1"),
        "{answer}"
    );
    assert!(answer.contains("(--max-unauthenticated)"), "{answer}");
    let (_, r) = rt.block_on(hello(&c, "127.0.0.4", Some("lkd_not_a_token".into())));
    assert!(refused_by(&r, "(--max-unauthenticated)"), "{r:?}");

    // Clients with a credential are served: a native client with a token,
    // HTTP with a token from a stranger's own address, and a certificate.
    let (mut native, r) = rt.block_on(hello(&c, "127.0.0.2", Some(c.secure().token("worker"))));
    assert!(welcomed(&r), "{r:?}");
    let acquire = ClientRequest::Acquire {
        key: b"db/served".to_vec(),
        lease_ms: 60_000,
        wait_ms: 0,
    };
    let body = rt.block_on(async {
        send_frame(
            &mut native,
            &wire::encode(&Envelope {
                id: 1,
                body: acquire.clone(),
            })
            .expect("encode"),
        )
        .await;
        read_frame(&mut native).await.expect("an answer")
    });
    let env: Envelope<ClientResponse> = wire::decode(&body).expect("decode");
    assert!(
        matches!(env.body, ClientResponse::Acquired { .. }),
        "{:?}",
        env.body
    );
    let mut s = rt.block_on(connect(&c, "127.0.0.3", Who::Nobody, Alpn::Http));
    let answer = rt.block_on(http(
        &mut s,
        &format!("GET /v1/locks/db/served HTTP/1.1\r\nauthorization: {worker}"),
    ));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"held\":true"), "{answer}");
    let status = c
        .as_who(Who::Cert("admin"))
        .request(c.addr(1), "GET", "/v1/status", None)
        .expect("status");
    assert_eq!(status.status, 200, "{:?}", status.body);

    // A stranger is welcomed, but served nothing.
    let body = rt.block_on(async {
        let s = &mut strangers[0];
        send_frame(
            s,
            &wire::encode(&Envelope {
                id: 7,
                body: acquire,
            })
            .expect("encode"),
        )
        .await;
        read_frame(s).await.expect("an answer")
    });
    let env: Envelope<ClientResponse> = wire::decode(&body).expect("decode");
    assert!(
        matches!(
            env.body,
            ClientResponse::Error(WireError::Unauthenticated(_))
        ),
        "{:?}",
        env.body
    );

    // The strangers leave: their places come back.
    drop(strangers);
    let deadline = Instant::now() + WITHIN;
    loop {
        let (_, r) = rt.block_on(hello(&c, "127.0.0.2", None));
        if welcomed(&r) {
            break;
        }
        assert!(Instant::now() < deadline, "places never came back: {r:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_connection_without_a_credential_is_closed_at_its_deadline_and_one_with_is_kept() {
    let c = Cluster::start_secure(1, &["--unauthenticated-timeout-ms", "1500"]);
    c.wait_leader(WITHIN);
    let rt = rt();
    let worker = format!("Bearer {}", c.secure().token("worker"));

    // The node's deadline runs from its accept, after `opened`. The
    // connection with a token is opened first, so its deadline has passed
    // once the others are closed at theirs.
    let opened = Instant::now();
    let mut member = rt.block_on(connect(&c, "127.0.0.2", Who::Nobody, Alpn::Http));
    let status = format!("GET /v1/status HTTP/1.1\r\nauthorization: {worker}");
    let answer = rt.block_on(http(&mut member, &status));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let (mut native, r) = rt.block_on(hello(&c, "127.0.0.2", None));
    assert!(welcomed(&r), "{r:?}");
    let mut public = rt.block_on(connect(&c, "127.0.0.2", Who::Nobody, Alpn::Http));
    let answer = rt.block_on(http(&mut public, "GET /healthz HTTP/1.1"));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    for (what, s) in [("native", &mut native), ("HTTP", &mut public)] {
        rt.block_on(closed_within(s, Duration::from_secs(15)))
            .unwrap_or_else(|| panic!("{what}: still open 15 s on"));
        let t = opened.elapsed();
        assert!(
            t >= Duration::from_millis(1500),
            "{what}: closed early ({t:?})"
        );
    }
    // Past the deadline now, the connection with a token still serves.
    let answer = rt.block_on(http(&mut member, &status));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}
