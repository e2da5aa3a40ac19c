//! TLS on the calling side of every connection to a node: the native
//! protocol, HTTP, and (in `lockd`) peers.
//!
//! A node serves everything on one address; inside TLS, ALPN says which
//! protocol a connection speaks ([`ALPN_PEER`], [`ALPN_NATIVE`],
//! [`ALPN_HTTP`]). A client trusts the CA in `--cacert` and may present a
//! certificate (`--cert`, `--key`). It checks the node's certificate
//! against the host it dialled (an IP address or a DNS name), as any TLS
//! client does; a peer checks it against the node id it dialled
//! ([`node_name`]).
//!
//! rustls with the `ring` provider: no system OpenSSL, and the same code
//! on every platform the service builds for.
//!
//! This is the configuration (trust store, identity, one rustls config
//! per ALPN); [`crate::security`] opens the connections.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// ALPN of Raft traffic between nodes (mutual TLS).
pub const ALPN_PEER: &[u8] = b"lockd-peer/1";
/// ALPN of the native client protocol.
pub const ALPN_NATIVE: &[u8] = b"lockd/1";
/// ALPN of the HTTP API.
pub const ALPN_HTTP: &[u8] = b"http/1.1";

/// The DNS name a node's certificate carries for its node id. A peer is
/// checked against it in both directions: the dialling node checks the
/// node it dialled, the node dialled checks the id the caller's hello
/// claims.
pub fn node_name(id: u64) -> String {
    format!("node-{id}.lockd")
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path}: no PEM certificate in it")]
    NoCert { path: PathBuf },
    #[error("{path}: no PEM private key in it ({detail})")]
    NoKey { path: PathBuf, detail: String },
    #[error("{path}: {detail}")]
    BadCert { path: PathBuf, detail: String },
    #[error("TLS settings: {0}")]
    Config(String),
    #[error("{what}: {detail}")]
    Name { what: String, detail: String },
}

/// Every certificate in the PEM file at `path`, in order.
pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::BadCert {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCert {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

/// The private key in the PEM file at `path`.
pub fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| TlsError::NoKey {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })
}

/// The trust store made of the certificates at `path` (the cluster's CA).
pub fn read_roots(path: &Path) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in read_certs(path)? {
        roots.add(cert).map_err(|e| TlsError::BadCert {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
    }
    Ok(roots)
}

/// The rustls provider every config of the service uses.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// What a client trusts and how it identifies itself: one rustls config
/// per ALPN. Cheap to clone.
#[derive(Clone)]
pub struct TlsClient {
    peer: Arc<rustls::ClientConfig>,
    native: Arc<rustls::ClientConfig>,
    http: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsClient")
    }
}

/// Which protocol a connection will speak inside TLS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alpn {
    Peer,
    Native,
    Http,
}

impl TlsClient {
    /// Trust the CA certificates in `ca`; present `cert` with `key` when
    /// given (a peer must; a client may, as its identity).
    pub fn from_files(ca: &Path, identity: Option<(&Path, &Path)>) -> Result<TlsClient, TlsError> {
        let roots = read_roots(ca)?;
        let identity = match identity {
            Some((cert, key)) => Some((read_certs(cert)?, read_key(key)?)),
            None => None,
        };
        TlsClient::new(roots, identity)
    }

    pub fn new(
        roots: rustls::RootCertStore,
        identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    ) -> Result<TlsClient, TlsError> {
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_root_certificates(roots);
        let base = match identity {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| TlsError::Config(e.to_string()))?,
            None => builder.with_no_client_auth(),
        };
        let with = |alpn: &[u8]| {
            let mut c = base.clone();
            c.alpn_protocols = vec![alpn.to_vec()];
            Arc::new(c)
        };
        Ok(TlsClient {
            peer: with(ALPN_PEER),
            native: with(ALPN_NATIVE),
            http: with(ALPN_HTTP),
        })
    }

    /// The rustls config for connections that will speak `alpn`.
    pub fn config(&self, alpn: Alpn) -> Arc<rustls::ClientConfig> {
        match alpn {
            Alpn::Peer => self.peer.clone(),
            Alpn::Native => self.native.clone(),
            Alpn::Http => self.http.clone(),
        }
    }

    /// A connector for connections that will speak `alpn`.
    pub fn connector(&self, alpn: Alpn) -> tokio_rustls::TlsConnector {
        tokio_rustls::TlsConnector::from(self.config(alpn))
    }
}

/// A config that trusts nobody: what an HTTPS-capable connector holds when
/// no TLS is configured (it then only ever dials `http://`).
pub fn untrusting_config() -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map(|b| {
            b.with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
        })
        // The provider supports the default versions: cannot fail.
        .unwrap_or_else(|_| unreachable!("ring supports TLS 1.2 and 1.3"))
}

/// The name to check a node's certificate against: the host of `addr`
/// (`host:port`, `[v6]:port`).
pub fn host_name(addr: &str) -> Result<ServerName<'static>, TlsError> {
    let host = match addr.rsplit_once(':') {
        Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']'),
        None => addr,
    };
    ServerName::try_from(host.to_string()).map_err(|e| TlsError::Name {
        what: format!("host of {addr:?}"),
        detail: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_checked_against_the_host_it_was_dialled_at() {
        let ip = |s: &str| ServerName::IpAddress(s.parse::<std::net::IpAddr>().expect("ip").into());
        assert_eq!(host_name("127.0.0.1:7400").expect("name"), ip("127.0.0.1"));
        assert_eq!(host_name("[::1]:7400").expect("name"), ip("::1"));
        assert_eq!(
            host_name("lockd-2.internal:7400").expect("name"),
            ServerName::try_from("lockd-2.internal").expect("dns")
        );
        assert!(host_name("bad host:1").is_err());
        assert_eq!(node_name(3), "node-3.lockd");
    }

    #[test]
    fn missing_or_empty_files_are_precise_errors() {
        let dir = std::env::temp_dir().join(format!("lockd-tls-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "").expect("write");
        let e = read_certs(&empty).unwrap_err();
        assert!(e.to_string().contains("no PEM certificate"), "{e}");
        let e = read_key(&empty).unwrap_err();
        assert!(e.to_string().contains("no PEM private key"), "{e}");
        let e = TlsClient::from_files(&dir.join("absent.pem"), None).unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
