//! TLS on the node's one address: the server side.
//!
//! A node presents its certificate (`node-ID.lockd` and its host, see
//! [`crate::certs`]) and asks every caller for one, without requiring it
//! at the TLS level: a client may come with a token instead. What a
//! certificate proves is decided after the handshake, by the protocol the
//! caller chose (ALPN):
//!
//! * a peer (`lockd-peer/1`) must present a certificate valid for
//!   `node-ID.lockd`, where ID is the node its hello claims to be
//!   ([`Identity::is_node`]);
//! * a client's principal is the first DNS name of its certificate
//!   ([`Identity::principal`]).
//!
//! The chain, the validity dates and the client-auth usage are checked by
//! rustls during the handshake: a certificate from another CA, or expired,
//! never gets this far. The listener ([`super::listener`]) accepts with
//! it; the framed and HTTP servers decide what a certificate proves.

use std::path::Path;
use std::sync::Arc;

use lockd_net::tls::{self, Alpn, TlsError, ALPN_HTTP, ALPN_NATIVE, ALPN_PEER};
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use tokio::io::{AsyncRead, AsyncWrite};

/// Accepts TLS connections with the node's certificate.
#[derive(Clone)]
pub struct TlsServer {
    acceptor: tokio_rustls::TlsAcceptor,
    verifier: Arc<dyn ClientCertVerifier>,
}

/// A caller's certificate, verified by the handshake, with what it takes
/// to verify it again later ([`Identity::valid_now`]).
#[derive(Clone)]
pub struct Identity {
    cert: CertificateDer<'static>,
    intermediates: Vec<CertificateDer<'static>>,
    verifier: Arc<dyn ClientCertVerifier>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Identity").field(&self.principal()).finish()
    }
}

/// A TLS connection just accepted: the protocol its caller chose and the
/// certificate it presented.
pub struct Accepted<S> {
    pub stream: tokio_rustls::server::TlsStream<S>,
    /// `None`: the caller offered no protocol we speak (HTTP is assumed).
    pub alpn: Option<Alpn>,
    pub identity: Option<Identity>,
}

impl TlsServer {
    /// The node's certificate chain `cert` with its `key`; callers'
    /// certificates are checked against the CA certificates in `ca`.
    pub fn from_files(cert: &Path, key: &Path, ca: &Path) -> Result<TlsServer, TlsError> {
        let roots = Arc::new(tls::read_roots(ca)?);
        let verifier = WebPkiClientVerifier::builder_with_provider(roots, tls::provider())
            .allow_unauthenticated()
            .build()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let mut config = rustls::ServerConfig::builder_with_provider(tls::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_client_cert_verifier(verifier.clone())
            .with_single_cert(tls::read_certs(cert)?, tls::read_key(key)?)
            .map_err(|e| TlsError::Config(format!("{}: {e}", cert.display())))?;
        config.alpn_protocols = vec![ALPN_PEER.to_vec(), ALPN_NATIVE.to_vec(), ALPN_HTTP.to_vec()];
        Ok(TlsServer {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
            verifier,
        })
    }

    /// Complete the handshake on `stream`.
    pub async fn accept<S>(&self, stream: S) -> std::io::Result<Accepted<S>>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let stream = self.acceptor.accept(stream).await?;
        let (_, conn) = stream.get_ref();
        let alpn = match conn.alpn_protocol() {
            Some(p) if p == ALPN_PEER => Some(Alpn::Peer),
            Some(p) if p == ALPN_NATIVE => Some(Alpn::Native),
            Some(p) if p == ALPN_HTTP => Some(Alpn::Http),
            _ => None,
        };
        let identity = conn.peer_certificates().and_then(|chain| {
            let (cert, intermediates) = chain.split_first()?;
            Some(Identity {
                cert: cert.clone().into_owned(),
                intermediates: intermediates
                    .iter()
                    .map(|c| c.clone().into_owned())
                    .collect(),
                verifier: self.verifier.clone(),
            })
        });
        Ok(Accepted {
            stream,
            alpn,
            identity,
        })
    }
}

impl Identity {
    /// Whether this certificate is node `id`'s: its first DNS name is
    /// exactly `node-ID.lockd`.
    pub(crate) fn is_node(&self, id: u64) -> bool {
        self.node_id() == Some(id)
    }

    /// The node this certificate names, if any: only by its first DNS
    /// name, and only in the exact form `node-ID.lockd` (ID in decimal,
    /// without sign or leading zeros), so one certificate is at most one
    /// node and never a node and a client at once.
    pub fn node_id(&self) -> Option<u64> {
        node_of_name(&self.principal()?)
    }

    /// Whether the certificate still passes the handshake's check now: a
    /// certificate that expires while its connection is open ends what it
    /// may do there (the callers close the connection).
    pub(crate) fn valid_now(&self) -> bool {
        self.valid_at(UnixTime::now())
    }

    pub(crate) fn valid_at(&self, at: UnixTime) -> bool {
        self.verifier
            .verify_client_cert(&self.cert, &self.intermediates, at)
            .is_ok()
    }

    /// The principal this certificate speaks for: its first DNS name.
    pub fn principal(&self) -> Option<String> {
        let cert = webpki::EndEntityCert::try_from(&self.cert).ok()?;
        let name = cert.valid_dns_names().next().map(str::to_string);
        name
    }
}

/// The node a DNS name names (`node-ID.lockd`, canonically), if any.
fn node_of_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("node-")?.strip_suffix(".lockd")?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    let id = digits.parse::<u64>().ok().filter(|_| canonical)?;
    (tls::node_name(id) == name).then_some(id)
}

#[cfg(test)]
mod tests {
    use lockd_net::tls::TlsClient;
    use rustls::pki_types::ServerName;

    use super::*;
    use crate::certs;

    /// A handshake with node 1 of `dir` over an in-memory pipe, as `client`
    /// speaking `alpn`: what the node learned of the caller.
    fn accept(dir: &Path, client: &TlsClient, alpn: Alpn) -> (Option<Alpn>, Option<Identity>) {
        let server = TlsServer::from_files(
            &dir.join("node-1.pem"),
            &dir.join("node-1.key"),
            &dir.join("ca.pem"),
        )
        .expect("server");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let (a, b) = tokio::io::duplex(1 << 16);
            let name = ServerName::try_from(tls::node_name(1)).expect("name");
            let (c, s) = tokio::join!(client.connector(alpn).connect(name, a), server.accept(b));
            c.expect("client side");
            let s = s.expect("server side");
            (s.alpn, s.identity)
        })
    }

    #[test]
    fn only_the_exact_node_name_is_a_node() {
        assert_eq!(node_of_name("node-2.lockd"), Some(2));
        assert_eq!(node_of_name("node-0.lockd"), Some(0));
        for n in [
            "node-02.lockd",
            "node-+2.lockd",
            "node-2.lockd.",
            "NODE-2.lockd",
            "node-2.Lockd",
            "node-.lockd",
            "node-18446744073709551616.lockd",
            "xnode-2.lockd",
        ] {
            assert_eq!(node_of_name(n), None, "{n}");
        }
    }

    #[test]
    fn the_caller_s_protocol_and_certificate_are_known_after_the_handshake() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let nodes = [
            "1=127.0.0.1".parse().expect("spec"),
            "2=127.0.0.2".parse().expect("spec"),
        ];
        certs::init(d, &nodes, &["alice".to_string()], 30).expect("init");
        let ca = d.join("ca.pem");
        let with = |name: &str| {
            TlsClient::from_files(
                &ca,
                Some((
                    &d.join(format!("{name}.pem")),
                    &d.join(format!("{name}.key")),
                )),
            )
            .expect("client")
        };
        // Node 2 calling as a peer: its certificate names node 2, not 3.
        let (alpn, who) = accept(d, &with("node-2"), Alpn::Peer);
        assert_eq!(alpn, Some(Alpn::Peer));
        let who = who.expect("a certificate");
        assert!(who.is_node(2));
        assert!(!who.is_node(3));
        assert_eq!(who.node_id(), Some(2));
        // A client: its principal, and it is no node.
        let (alpn, who) = accept(d, &with("alice"), Alpn::Native);
        assert_eq!(alpn, Some(Alpn::Native));
        let who = who.expect("a certificate");
        assert_eq!(who.principal().as_deref(), Some("alice"));
        assert!(!who.is_node(1) && !who.is_node(2));
        assert_eq!(who.node_id(), None);
        // Valid now; not once it has expired (certs::init made it for 30
        // days), which a connection open that long finds out.
        assert!(who.valid_now());
        let later = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
            UnixTime::now().as_secs() + 31 * 86_400,
        ));
        assert!(!who.valid_at(later));
        // No certificate (a client with a token, later): accepted, unnamed.
        let anonymous = TlsClient::from_files(&ca, None).expect("client");
        let (alpn, who) = accept(d, &anonymous, Alpn::Http);
        assert_eq!(alpn, Some(Alpn::Http));
        assert!(who.is_none());
    }
}
