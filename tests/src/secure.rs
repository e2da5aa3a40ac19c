//! What a cluster with TLS and authentication on needs in a test: its
//! certificates (made by the code behind `lockd certs init`, which keeps
//! the CA at hand to issue more: another node's, an expired one), an auth
//! file with a principal for every role, and callers that present one
//! principal's credentials — over HTTP ([`Http`]), the native client
//! ([`Secure::credentials`]) or `lockctl` ([`Secure::lockctl_args`]).
//!
//! The principals:
//!
//! | principal | credentials | roles |
//! |---|---|---|
//! | `admin` | certificate | `admin` |
//! | `alice`, `bob` | certificate | `jobs`: lock use under `jobs/` |
//! | `reader` | token | `read` |
//! | `worker` | token | `all`: lock use on every key, and reads |
//! | `stranger` | certificate | none |
//!
//! [`Http`] is also what a plaintext cluster uses, with no credentials.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use lockd::certs::{self, Ca};

use lockd_client::tls::{Alpn, TlsClient};
use lockd_client::{Credentials, Token};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Principals with a client certificate.
pub const CERT_PRINCIPALS: [&str; 4] = ["admin", "alice", "bob", "stranger"];
/// Principals with a bearer token.
pub const TOKEN_PRINCIPALS: [&str; 2] = ["reader", "worker"];

/// A random number (tokens need only be unguessable by other tests).
fn random() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::hash::RandomState::new().build_hasher().finish()
}

/// Who a test request comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who<'a> {
    /// TLS, no certificate, no token.
    Nobody,
    /// TLS with this principal's client certificate.
    Cert(&'a str),
    /// TLS with this principal's bearer token.
    Token(&'a str),
    /// TLS with a token the cluster does not know.
    BadToken,
}

/// A cluster's certificates, auth file and tokens.
pub struct Secure {
    pub dir: PathBuf,
    pub auth_file: PathBuf,
    tokens: BTreeMap<String, String>,
    ca: Ca,
}

/// The auth file every secure test cluster starts with; `{reader}` and
/// `{worker}` are the tokens' hashes.
const RULES: &str = r#"
[roles.jobs]
lock = ["jobs/"]

[roles.all]
lock = [""]
read = true

[principals.admin]
roles = ["admin"]

[principals.alice]
roles = ["jobs"]

[principals.bob]
roles = ["jobs"]

[principals.reader]
roles = ["read"]
tokens = ["sha256:{reader}"]

[principals.worker]
roles = ["all"]
tokens = ["sha256:{worker}"]
"#;

impl Secure {
    /// Certificates for nodes `hosts` (id → the IP clients dial) in
    /// `dir`, and the auth file.
    pub fn create(dir: &Path, hosts: &[(u64, String)]) -> Secure {
        std::fs::create_dir_all(dir).expect("certs dir");
        let ca = certs::new_ca("lockd test CA", 30).expect("CA");
        certs::write_pair(dir, "ca", &ca.cert, &ca.key).expect("write CA");
        for (id, host) in hosts {
            let names = [lockd_client::tls::node_name(*id), host.clone()];
            let (cert, key) = certs::issue(&ca, &names, true, 30).expect("node cert");
            certs::write_pair(dir, &format!("node-{id}"), &cert, &key).expect("write");
        }
        for c in CERT_PRINCIPALS {
            let (cert, key) = certs::issue(&ca, &[c.to_string()], false, 30).expect("client cert");
            certs::write_pair(dir, c, &cert, &key).expect("write");
        }
        let mut tokens = BTreeMap::new();
        let mut rules = RULES.to_string();
        for p in TOKEN_PRINCIPALS {
            let token = format!("lkd_test_{p}_{:016x}", random());
            let hash = hex::encode(Sha256::digest(token.as_bytes()));
            rules = rules.replace(&format!("{{{p}}}"), &hash);
            tokens.insert(p.to_string(), token);
        }
        let auth_file = dir.join("auth.toml");
        std::fs::write(&auth_file, rules).expect("write the auth file");
        Secure {
            dir: dir.to_path_buf(),
            auth_file,
            tokens,
            ca,
        }
    }

    /// Issue one more certificate from the cluster's CA, as `NAME.pem` and
    /// `NAME.key` in the certs dir: for `names`, valid for `days` (negative:
    /// expired that long ago).
    pub fn issue(
        &self,
        file: &str,
        names: &[String],
        server: bool,
        days: i64,
    ) -> (PathBuf, PathBuf) {
        let (cert, key) = certs::issue(&self.ca, names, server, days).expect("issue");
        certs::write_pair(&self.dir, file, &cert, &key).expect("write");
        (
            self.dir.join(format!("{file}.pem")),
            self.dir.join(format!("{file}.key")),
        )
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// `lockd serve`'s flags for node `id`.
    pub fn node_args(&self, id: u64) -> Vec<String> {
        let p = |f: String| self.dir.join(f).display().to_string();
        vec![
            "--tls-cert".into(),
            p(format!("node-{id}.pem")),
            "--tls-key".into(),
            p(format!("node-{id}.key")),
            "--tls-ca".into(),
            p("ca.pem".into()),
            "--auth-file".into(),
            self.auth_file.display().to_string(),
        ]
    }

    pub fn token(&self, principal: &str) -> String {
        self.tokens
            .get(principal)
            .cloned()
            .unwrap_or_else(|| panic!("{principal} has no token"))
    }

    /// The credentials of `who`, for the native client.
    pub fn credentials(&self, who: Who) -> Credentials {
        let ca = self.ca();
        let (cert, token) = match who {
            Who::Nobody => (None, None),
            Who::Cert(p) => (Some(p), None),
            Who::Token(p) => (None, Some(self.token(p))),
            Who::BadToken => (None, Some("lkd_not_a_token".to_string())),
        };
        let (pem, key) = match cert {
            Some(p) => (
                Some(self.dir.join(format!("{p}.pem"))),
                Some(self.dir.join(format!("{p}.key"))),
            ),
            None => (None, None),
        };
        let tls = TlsClient::from_files(&ca, pem.as_deref().zip(key.as_deref())).expect("tls");
        Credentials {
            tls: Some(tls),
            token: token.map(Token::new),
        }
    }

    /// `lockctl`'s flags for `who` (before the subcommand).
    pub fn lockctl_args(&self, who: Who) -> Vec<String> {
        let mut args = vec!["--cacert".into(), self.ca().display().to_string()];
        match who {
            Who::Cert(p) => {
                args.push("--cert".into());
                args.push(self.dir.join(format!("{p}.pem")).display().to_string());
                args.push("--key".into());
                args.push(self.dir.join(format!("{p}.key")).display().to_string());
            }
            Who::Token(p) => {
                args.push("--token".into());
                args.push(self.token(p));
            }
            Who::BadToken => {
                args.push("--token".into());
                args.push("lkd_not_a_token".into());
            }
            Who::Nobody => {}
        }
        args
    }

    /// An HTTP caller presenting `who`'s credentials.
    pub fn http(&self, who: Who) -> Http {
        Http::new(Some(self.credentials(who)))
    }
}

/// An HTTP answer: status code and JSON body.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
}

impl Reply {
    pub fn ok(&self) -> bool {
        self.status == 200
    }
    pub fn error(&self) -> &str {
        self.body["error"].as_str().unwrap_or("")
    }
}

/// An HTTP caller: plain, or TLS with one principal's credentials.
#[derive(Clone)]
pub struct Http {
    agent: ureq::Agent,
    scheme: &'static str,
    token: Option<String>,
}

/// An HTTP answer (any status) as a [`Reply`]; `Err` only when there was
/// no answer.
fn to_reply(res: Result<ureq::Response, ureq::Error>) -> Result<Reply, String> {
    match res {
        Ok(r) => Ok(Reply {
            status: r.status(),
            body: r.into_json().unwrap_or(Value::Null),
        }),
        Err(ureq::Error::Status(code, r)) => Ok(Reply {
            status: code,
            body: r.into_json().unwrap_or(Value::Null),
        }),
        Err(e) => Err(e.to_string()),
    }
}

impl Http {
    /// Plain HTTP without `credentials`, else HTTPS with them.
    pub fn new(credentials: Option<Credentials>) -> Http {
        let mut agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(10));
        let (mut scheme, mut token) = ("http", None);
        if let Some(c) = credentials {
            if let Some(tls) = &c.tls {
                agent = agent.tls_config(tls.config(Alpn::Http));
                scheme = "https";
            }
            token = c.token.map(|t| t.expose().to_string());
        }
        Http {
            agent: agent.build(),
            scheme,
            token,
        }
    }

    pub fn url(&self, addr: &str, path: &str) -> String {
        format!("{}://{addr}{path}", self.scheme)
    }

    fn with_token(&self, req: ureq::Request) -> ureq::Request {
        match &self.token {
            Some(t) => req.set("authorization", &format!("Bearer {t}")),
            None => req,
        }
    }

    pub fn request(
        &self,
        addr: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Reply, String> {
        let req = self.with_token(self.agent.request(method, &self.url(addr, path)));
        to_reply(match body {
            Some(b) => req.send_json(b),
            None => req.call(),
        })
    }

    /// POST raw bytes (a module). Answered once the upgrade entry (up to
    /// the module's size, megabytes) is written and synced on a quorum and
    /// applied, so it may take longer than other requests on a machine
    /// whose disk other clusters share: it waits up to a minute.
    pub fn post_bytes(&self, addr: &str, path: &str, body: &[u8]) -> Result<Reply, String> {
        let req = self
            .with_token(self.agent.post(&self.url(addr, path)))
            .timeout(Duration::from_secs(60))
            .set("content-type", "application/wasm");
        to_reply(req.send_bytes(body))
    }

    /// GET `path` as text (metrics).
    pub fn text(&self, addr: &str, path: &str) -> Option<String> {
        let req = self.with_token(self.agent.get(&self.url(addr, path)));
        req.call().ok()?.into_string().ok()
    }
}
