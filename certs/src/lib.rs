//! `lockd certs init DIR`: a development CA and the certificates a secure
//! cluster needs, made with rcgen.
//!
//! | file | what |
//! |---|---|
//! | `ca.pem`, `ca.key` | the CA every node and client trusts (`--tls-ca`, `--cacert`) |
//! | `node-ID.pem`, `node-ID.key` | node `ID`: DNS name `node-ID.lockd` (what peers check) and the host it is reached at (what clients check); server and client use |
//! | `NAME.pem`, `NAME.key` | a client whose principal is `NAME` (its DNS name); client use |
//!
//! Keys are ECDSA P-256, written with mode 0600. For production, issue the
//! same names from your own CA: a node certificate must carry
//! `node-ID.lockd`; a client's principal is the first DNS name of its
//! certificate.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};

use lockd_net::tls::node_name;

#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    #[error("certificate generation: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("{path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

/// A node to issue a certificate for: its id and the host (IP address or
/// DNS name) clients reach it at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSpec {
    pub id: u64,
    pub host: String,
}

impl std::str::FromStr for NodeSpec {
    type Err = String;

    /// `ID=HOST`, e.g. `1=10.0.0.5` or `2=lockd-2.internal`.
    fn from_str(s: &str) -> Result<NodeSpec, String> {
        let (id, host) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?}: expected ID=HOST"))?;
        let id = id
            .parse()
            .map_err(|_| format!("{s:?}: {id:?} is not a node id"))?;
        if host.is_empty() {
            return Err(format!("{s:?}: empty host"));
        }
        Ok(NodeSpec {
            id,
            host: host.to_string(),
        })
    }
}

/// A CA: its certificate and key, to sign with.
pub struct Ca {
    pub cert: Certificate,
    pub key: KeyPair,
}

/// How long a certificate is valid, from a day ago (clock skew) to `days`
/// from now; a negative `days` makes an expired one (tests).
fn validity(params: &mut CertificateParams, days: i64) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(days);
}

/// A new self-signed CA named `name`.
pub fn new_ca(name: &str, days: i64) -> Result<Ca, CertsError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    validity(&mut params, days);
    let cert = params.self_signed(&key)?;
    Ok(Ca { cert, key })
}

/// A certificate signed by `ca` for `names` (DNS names or IP addresses),
/// for a server (nodes) and/or a client.
pub fn issue(
    ca: &Ca,
    names: &[String],
    server: bool,
    days: i64,
) -> Result<(Certificate, KeyPair), CertsError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    for n in names {
        params.subject_alt_names.push(match n.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(
                n.clone()
                    .try_into()
                    .map_err(|_| CertsError::Invalid(format!("{n:?} is not a DNS name")))?,
            ),
        });
    }
    let first = names.first().cloned().unwrap_or_default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, first);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    if server {
        params
            .extended_key_usages
            .push(ExtendedKeyUsagePurpose::ServerAuth);
    }
    validity(&mut params, days);
    let cert = params.signed_by(&key, &ca.cert, &ca.key)?;
    Ok((cert, key))
}

fn write(path: PathBuf, text: &str, secret: bool) -> Result<PathBuf, CertsError> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = secret;
    opts.open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|source| CertsError::Write {
            path: path.clone(),
            source,
        })?;
    Ok(path)
}

/// Write a certificate and its key as `DIR/NAME.pem` and `DIR/NAME.key`.
pub fn write_pair(
    dir: &Path,
    name: &str,
    cert: &Certificate,
    key: &KeyPair,
) -> Result<Vec<PathBuf>, CertsError> {
    Ok(vec![
        write(dir.join(format!("{name}.pem")), &cert.pem(), false)?,
        write(dir.join(format!("{name}.key")), &key.serialize_pem(), true)?,
    ])
}

/// `lockd certs init`: a new CA in `dir`, a certificate for each node and
/// for each client name. Refuses to overwrite an existing CA.
pub fn init(
    dir: &Path,
    nodes: &[NodeSpec],
    clients: &[String],
    days: i64,
) -> Result<Vec<PathBuf>, CertsError> {
    if dir.join("ca.key").exists() {
        return Err(CertsError::Invalid(format!(
            "{} already holds a CA (ca.key); choose another directory",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|source| CertsError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let ca = new_ca("lockd development CA", days)?;
    let mut written = write_pair(dir, "ca", &ca.cert, &ca.key)?;
    for n in nodes {
        let (cert, key) = issue(&ca, &[node_name(n.id), n.host.clone()], true, days)?;
        written.extend(write_pair(dir, &format!("node-{}", n.id), &cert, &key)?);
    }
    for c in clients {
        if c.starts_with("node-") || c == "ca" {
            return Err(CertsError::Invalid(format!(
                "{c:?}: client names may not start with node- or be ca"
            )));
        }
        let (cert, key) = issue(&ca, std::slice::from_ref(c), false, days)?;
        written.extend(write_pair(dir, c, &cert, &key)?);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use lockd_net::tls::{self, Alpn, TlsClient};
    use rustls::pki_types::ServerName;
    use rustls::server::WebPkiClientVerifier;

    use super::*;

    /// A server with `dir`'s node certificate `id`, asking clients for a
    /// certificate from `dir`'s CA.
    fn server(dir: &Path, id: u64) -> tokio_rustls::TlsAcceptor {
        let roots = Arc::new(tls::read_roots(&dir.join("ca.pem")).expect("roots"));
        let verifier = WebPkiClientVerifier::builder_with_provider(roots, tls::provider())
            .build()
            .expect("verifier");
        let config = rustls::ServerConfig::builder_with_provider(tls::provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                tls::read_certs(&dir.join(format!("node-{id}.pem"))).expect("cert"),
                tls::read_key(&dir.join(format!("node-{id}.key"))).expect("key"),
            )
            .expect("server config");
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    }

    /// A handshake over an in-memory pipe: Ok when both sides accept.
    fn handshake(
        server: tokio_rustls::TlsAcceptor,
        client: &TlsClient,
        name: &str,
    ) -> Result<(), String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let (a, b) = tokio::io::duplex(1 << 16);
            let name = ServerName::try_from(name.to_string()).expect("name");
            let connector = client.connector(Alpn::Native);
            let (c, s) = tokio::join!(connector.connect(name, a), server.accept(b));
            c.map_err(|e| format!("client: {e}"))?;
            s.map_err(|e| format!("server: {e}"))?;
            Ok(())
        })
    }

    #[test]
    fn init_makes_certificates_that_name_nodes_and_clients() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let nodes: Vec<NodeSpec> = vec![
            "1=127.0.0.1".parse().expect("spec"),
            "2=lockd-2.example".parse().expect("spec"),
        ];
        let written = init(d, &nodes, &["admin".to_string()], 30).expect("init");
        assert_eq!(written.len(), 8);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(d.join("node-1.key"))
                .expect("key")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let admin = TlsClient::from_files(
            &d.join("ca.pem"),
            Some((&d.join("admin.pem"), &d.join("admin.key"))),
        )
        .expect("client");
        // A node's certificate names its id and its host, and nothing else.
        assert_eq!(handshake(server(d, 1), &admin, "node-1.lockd"), Ok(()));
        assert_eq!(handshake(server(d, 1), &admin, "127.0.0.1"), Ok(()));
        assert_eq!(handshake(server(d, 2), &admin, "lockd-2.example"), Ok(()));
        let e = handshake(server(d, 1), &admin, "node-2.lockd").unwrap_err();
        assert!(
            e.contains("client") && e.contains("not valid for name"),
            "{e}"
        );
        // A client without a certificate, or with one from another CA, is
        // refused by a node that asks for one.
        let anonymous = TlsClient::from_files(&d.join("ca.pem"), None).expect("client");
        assert!(handshake(server(d, 1), &anonymous, "node-1.lockd").is_err());
        let other = tempfile::tempdir().expect("tempdir");
        init(other.path(), &[], &["mallory".to_string()], 30).expect("init");
        let mallory = TlsClient::from_files(
            &d.join("ca.pem"),
            Some((
                &other.path().join("mallory.pem"),
                &other.path().join("mallory.key"),
            )),
        )
        .expect("client");
        let e = handshake(server(d, 1), &mallory, "node-1.lockd").unwrap_err();
        assert!(e.contains("server"), "{e}");
        let again = init(d, &[], &[], 30).unwrap_err();
        assert!(again.to_string().contains("already holds a CA"), "{again}");
    }

    #[test]
    fn an_expired_certificate_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let ca = new_ca("test CA", 30).expect("ca");
        write_pair(d, "ca", &ca.cert, &ca.key).expect("write");
        let names = [node_name(1), "127.0.0.1".to_string()];
        let (cert, key) = issue(&ca, &names, true, 30).expect("issue");
        write_pair(d, "node-1", &cert, &key).expect("write");
        // A client certificate from the same CA that expired yesterday.
        let (cert, key) = issue(&ca, &["late".to_string()], false, -1).expect("issue");
        write_pair(d, "late", &cert, &key).expect("write");
        let late = TlsClient::from_files(
            &d.join("ca.pem"),
            Some((&d.join("late.pem"), &d.join("late.key"))),
        )
        .expect("client");
        let e = handshake(server(d, 1), &late, "node-1.lockd").unwrap_err();
        assert!(e.contains("server") && e.contains("expired"), "{e}");
    }
}
