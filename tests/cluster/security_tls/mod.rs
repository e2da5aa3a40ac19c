//! TLS on a real cluster (three `lockd` processes with certificates from
//! one CA and an auth file): peers are refused at the handshake unless
//! their certificate, from the cluster's CA and in date, names the node
//! they claim to be; a rogue that knows the engine fingerprint cannot vote;
//! a node that is not the one its certificate names cannot join; plaintext
//! callers get a clear error and the node is unharmed.

use std::time::{Duration, Instant};

use lockd::raft::messages::{PeerRequest, PeerResponse};
use lockd_client::security::{self, Stream};
use lockd_client::tls::{node_name, Alpn, TlsClient};
use lockd_client::wire::{self, Envelope, HandshakeError, Role};
use lockd_client::{Client, ClientError, ClientOptions};
use lockd_tests::cluster::{free_port, Cluster};
use lockd_tests::secure::Secure;
use openraft::raft::VoteRequest;
use openraft::Vote;
use rustls::pki_types::ServerName;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

mod joining;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn fingerprint() -> String {
    lockd_core::engine::EngineSettings::default()
        .fingerprint()
        .text
}

/// What a peer hello to node `target` at `addr` as node `from` gets, over
/// TLS with `tls`'s certificate: welcomed (the connection), or why not.
/// A peer hello from `from` to `target` (of the cluster `cluster`).
async fn peer_hello_in(
    addr: &str,
    target: u64,
    from: u64,
    tls: &TlsClient,
    cluster: &str,
) -> Result<Framed<Stream, LengthDelimitedCodec>, String> {
    let role = Role::PeerInCluster {
        from,
        to: target,
        fingerprint: fingerprint(),
        cluster: cluster.to_string(),
    };
    hello_as(addr, target, tls, role).await
}

/// A hello naming no cluster: refused by a node that has one, whatever
/// the certificate (it proves no membership).
async fn peer_hello(
    addr: &str,
    target: u64,
    from: u64,
    tls: &TlsClient,
) -> Result<Framed<Stream, LengthDelimitedCodec>, String> {
    let role = Role::Peer {
        from,
        fingerprint: fingerprint(),
    };
    hello_as(addr, target, tls, role).await
}

/// Dial `target` at `addr` over the peer protocol and say `role`.
async fn hello_as(
    addr: &str,
    target: u64,
    tls: &TlsClient,
    role: Role,
) -> Result<Framed<Stream, LengthDelimitedCodec>, String> {
    let name = ServerName::try_from(node_name(target)).expect("name");
    let stream = security::connect(addr, Some(tls), Alpn::Peer, Some(name))
        .await
        .map_err(|e| e.to_string())?;
    match wire::handshake(stream, role).await {
        Ok((framed, _)) => Ok(framed),
        Err(HandshakeError::Refused(r)) => Err(format!("refused: {r}")),
        Err(e) => Err(format!("failed: {e}")),
    }
}

fn client_tls(s: &Secure, cert: Option<(&std::path::Path, &std::path::Path)>) -> TlsClient {
    TlsClient::from_files(&s.ca(), cert).expect("tls")
}

fn log_of(c: &Cluster, id: u64) -> String {
    std::fs::read_to_string(&c.nodes[&id].log).unwrap_or_default()
}

#[test]
fn peers_must_prove_the_node_id_they_claim() {
    let c = Cluster::start_secure(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let before = c.status(leader).expect("status");
    let cluster = before.cluster_id.clone().expect("a cluster id");
    let target = (1..=3).find(|i| *i != leader).expect("a follower");
    let addr = c.addr(target).to_string();
    let s = c.secure();
    let dir = &s.dir;
    let rt = rt();

    // A member's own certificate, claiming to be that member: welcomed.
    let other = (1..=3).find(|i| *i != target).expect("another member");
    let own = client_tls(
        s,
        Some((
            &dir.join(format!("node-{other}.pem")),
            &dir.join(format!("node-{other}.key")),
        )),
    );
    rt.block_on(peer_hello_in(&addr, target, other, &own, &cluster))
        .expect("a member with its own certificate is welcomed");
    // The same member, in a hello that names no cluster: refused.
    let e = rt
        .block_on(peer_hello(&addr, target, other, &own))
        .err()
        .expect("refused");
    assert!(e.contains("names no cluster"), "{e}");

    // The same certificate claiming to be another node.
    let liar = (1..=3)
        .find(|i| *i != target && *i != other)
        .expect("third");
    let e = rt
        .block_on(peer_hello_in(&addr, target, liar, &own, &cluster))
        .err()
        .expect("refused");
    assert!(
        e.contains(&format!(
            "claims to be node {liar} but its certificate names"
        )),
        "{e}"
    );

    // No certificate at all.
    let e = rt
        .block_on(peer_hello_in(
            &addr,
            target,
            other,
            &client_tls(s, None),
            &cluster,
        ))
        .err()
        .expect("refused");
    assert!(e.contains("presented no certificate"), "{e}");

    // A certificate from another CA, for the right node id: refused in
    // the handshake, which the node logs with rustls's reason.
    let foreign_dir = c.dir.path().join("foreign");
    let foreign = Secure::create(&foreign_dir, &[(other, "127.0.0.1".into())]);
    let foreign_tls = TlsClient::from_files(
        &s.ca(),
        Some((
            &foreign.dir.join(format!("node-{other}.pem")),
            &foreign.dir.join(format!("node-{other}.key")),
        )),
    )
    .expect("tls");
    let e = rt
        .block_on(peer_hello_in(&addr, target, other, &foreign_tls, &cluster))
        .err()
        .expect("refused");
    assert!(!e.contains("refused: "), "not even a hello reply: {e}");

    // An expired certificate from the right CA, for the right node id.
    let (pem, key) = s.issue("expired", &[node_name(other), "127.0.0.1".into()], true, -1);
    let e = rt
        .block_on(peer_hello_in(
            &addr,
            target,
            other,
            &client_tls(s, Some((&pem, &key))),
            &cluster,
        ))
        .err()
        .expect("refused");
    assert!(!e.contains("refused: "), "not even a hello reply: {e}");

    // Each refusal left a clear line in the node's log.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let log = log_of(&c, target);
        // Both CAs are named alike, so rustls finds the issuer by name
        // and then the signature does not verify.
        let seen = [
            format!("claims to be node {liar}"),
            "presented no certificate".into(),
            "TLS handshake refused".into(),
            "invalid peer certificate: BadSignature".into(),
            "invalid peer certificate: certificate expired".into(),
        ]
        .map(|w| log.contains(&w));
        if seen.iter().all(|x| *x) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "log lines missing ({seen:?}):\n{log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // A rogue that knows the fingerprint but has no certificate of the
    // cluster's cannot vote: its high-term vote never reaches Raft.
    let rogue = rt.block_on(async {
        let stream = security::connect(
            &addr,
            Some(&foreign_tls),
            Alpn::Peer,
            ServerName::try_from(node_name(target)).ok(),
        )
        .await
        .map_err(|e| e.to_string())?;
        let role = Role::Peer {
            from: other,
            fingerprint: fingerprint(),
        };
        let (mut framed, _) = wire::handshake(stream, role)
            .await
            .map_err(|e| e.to_string())?;
        let vote: PeerRequest =
            PeerRequest::Vote(VoteRequest::new(Vote::new(before.term + 100, other), None));
        let bytes = wire::encode(&Envelope { id: 1, body: vote }).map_err(|e| e.to_string())?;
        use futures::{SinkExt, StreamExt};
        framed.send(bytes).await.map_err(|e| e.to_string())?;
        match framed.next().await {
            Some(Ok(b)) => match wire::decode::<Envelope<PeerResponse>>(&b) {
                Ok(env) => Ok(format!("{:?}", env.body)),
                Err(e) => Err(e.to_string()),
            },
            other => Err(format!("{other:?}")),
        }
    });
    assert!(rogue.is_err(), "the rogue was answered: {rogue:?}");
    std::thread::sleep(Duration::from_millis(500));
    let after = c.status(leader).expect("status");
    assert_eq!(after.term, before.term, "the rogue moved the term");
    assert_eq!(c.wait_leader(Duration::from_secs(10)), leader);
    // The cluster still serves.
    c.acquire_on_leader("jobs/after", 5_000, Duration::from_secs(10));
}

#[test]
fn plaintext_callers_get_a_clear_error_and_the_node_is_unharmed() {
    let c = Cluster::start_secure(3, &[]);
    c.wait_leader(Duration::from_secs(20));

    // The native client without TLS: the node answers its hello with why.
    let plain = Client::with_options(
        c.endpoints(),
        ClientOptions {
            retry_for: Duration::from_millis(500),
            ..Default::default()
        },
    );
    let e = rt()
        .block_on(plain.acquire("jobs/x", Duration::from_secs(5), Duration::ZERO))
        .err()
        .expect("refused");
    assert!(matches!(e, ClientError::Unreachable { .. }), "{e}");
    assert!(e.to_string().contains("requires TLS"), "{e}");

    // HTTP without TLS: 400 and the reason.
    let http = lockd_tests::secure::Http::new(None);
    let r = http
        .request(c.addr(1), "GET", "/v1/status", None)
        .expect("an answer");
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.error().contains("requires TLS"), "{r:?}");

    // lockctl without --cacert says so too.
    let lockctl = lockd_tests::cluster::lockd_bin().with_file_name("lockctl");
    let out = std::process::Command::new(lockctl)
        .env_remove("LOCKD_CACERT")
        .args(["--endpoints", c.addr(1), "get", "jobs/x"])
        .output()
        .expect("lockctl");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("requires TLS"), "{err}");

    // Unharmed: every node still answers over TLS and the cluster serves.
    let leader = c.wait_leader(Duration::from_secs(10));
    c.acquire_on_leader("jobs/y", 5_000, Duration::from_secs(10));
    c.wait_converged(Duration::from_secs(10));
    assert!(c.status(leader).is_some());
}
