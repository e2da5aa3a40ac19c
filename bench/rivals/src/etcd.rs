//! A 3-member etcd cluster on loopback (Debian's `etcd` 3.4), one process
//! per member, fsync on (etcd's default), data in a temporary directory;
//! optionally with client and peer TLS, both requiring certificates from
//! one CA (`--client-cert-auth`, `--peer-client-cert-auth`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lockd_tests::cluster::free_port;

pub struct Member {
    pub name: String,
    pub client_url: String,
    pub child: Option<Child>,
}

pub struct EtcdCluster {
    pub _dir: tempfile::TempDir,
    pub members: Vec<Member>,
    /// The client TLS options, when the cluster speaks TLS.
    pub tls: Option<etcd_client::TlsOptions>,
}

/// Certificates for a TLS cluster: member `i` (from 1) uses
/// `node-i.pem`/`.key`, and the benchmark's clients `client.pem`/`.key`,
/// all signed by `ca.pem`.
pub struct EtcdCerts {
    pub dir: PathBuf,
}

impl EtcdCerts {
    fn file(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// The client side: trust the CA, present the client certificate.
    pub fn client_options(&self) -> etcd_client::TlsOptions {
        let read = |n: &str| std::fs::read(self.dir.join(n)).expect("read a certificate file");
        etcd_client::TlsOptions::new()
            .ca_certificate(etcd_client::Certificate::from_pem(read("ca.pem")))
            .identity(etcd_client::Identity::from_pem(
                read("client.pem"),
                read("client.key"),
            ))
    }
}

fn tls_args(certs: &EtcdCerts, member: usize) -> Vec<String> {
    let node = |ext: &str| certs.file(&format!("node-{member}.{ext}"));
    vec![
        "--cert-file".into(),
        node("pem"),
        "--key-file".into(),
        node("key"),
        "--trusted-ca-file".into(),
        certs.file("ca.pem"),
        "--client-cert-auth".into(),
        "--peer-cert-file".into(),
        node("pem"),
        "--peer-key-file".into(),
        node("key"),
        "--peer-trusted-ca-file".into(),
        certs.file("ca.pem"),
        "--peer-client-cert-auth".into(),
    ]
}

/// Whether `path` exists, for a clear failure when certificates are missing.
fn exists(path: &Path) -> bool {
    path.exists()
}

impl EtcdCluster {
    /// Start `n` members with the given Raft timings (ms).
    pub fn start(n: usize, heartbeat_ms: u64, election_ms: u64) -> EtcdCluster {
        EtcdCluster::start_with(n, heartbeat_ms, election_ms, None)
    }

    /// The same, with client and peer TLS from `certs` when given.
    pub fn start_with(
        n: usize,
        heartbeat_ms: u64,
        election_ms: u64,
        certs: Option<&EtcdCerts>,
    ) -> EtcdCluster {
        if let Some(c) = certs {
            assert!(
                exists(&c.dir.join("ca.pem")),
                "no ca.pem in {}",
                c.dir.display()
            );
        }
        let scheme = if certs.is_some() { "https" } else { "http" };
        let dir = tempfile::Builder::new()
            .prefix("etcd-bench-")
            .tempdir()
            .expect("tempdir");
        let peers: Vec<(String, u16, u16)> = (1..=n)
            .map(|i| (format!("e{i}"), free_port(), free_port()))
            .collect();
        let initial = peers
            .iter()
            .map(|(name, _, pp)| format!("{name}={scheme}://127.0.0.1:{pp}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut members = Vec::new();
        for (i, (name, cp, pp)) in peers.iter().enumerate() {
            let client_url = format!("{scheme}://127.0.0.1:{cp}");
            let peer_url = format!("{scheme}://127.0.0.1:{pp}");
            let tls = certs.map(|c| tls_args(c, i + 1)).unwrap_or_default();
            let log = std::fs::File::create(dir.path().join(format!("{name}.log"))).expect("log");
            let child = Command::new("etcd")
                .args(["--name", name])
                .arg("--data-dir")
                .arg(dir.path().join(name))
                .args(["--listen-client-urls", &client_url])
                .args(["--advertise-client-urls", &client_url])
                .args(["--listen-peer-urls", &peer_url])
                .args(["--initial-advertise-peer-urls", &peer_url])
                .args(["--initial-cluster", &initial])
                .args(["--initial-cluster-state", "new"])
                .args(["--initial-cluster-token", "vs-lockd"])
                .args(["--heartbeat-interval", &heartbeat_ms.to_string()])
                .args(["--election-timeout", &election_ms.to_string()])
                .args(["--logger", "zap", "--log-level", "warn"])
                .args(&tls)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start etcd (is Debian's etcd-server installed?)");
            members.push(Member {
                name: name.clone(),
                client_url,
                child: Some(child),
            });
        }
        EtcdCluster {
            _dir: dir,
            members,
            tls: certs.map(EtcdCerts::client_options),
        }
    }

    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .filter(|m| m.child.is_some())
            .map(|m| m.client_url.clone())
            .collect()
    }

    /// The index of the leader's member, once every running member agrees.
    pub async fn wait_leader(&self, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        loop {
            let mut leaders = Vec::new();
            let mut ids = Vec::new();
            for m in self.members.iter().filter(|m| m.child.is_some()) {
                let status = async {
                    let options = self
                        .tls
                        .clone()
                        .map(|t| etcd_client::ConnectOptions::new().with_tls(t));
                    let mut c = etcd_client::Client::connect([m.client_url.as_str()], options)
                        .await
                        .ok()?;
                    c.status().await.ok()
                }
                .await;
                match status {
                    Some(s) => {
                        leaders.push(s.leader());
                        ids.push(s.header().map(|h| h.member_id()).unwrap_or(0));
                    }
                    None => leaders.push(0),
                }
            }
            if leaders.iter().all(|l| *l != 0 && *l == leaders[0]) {
                let running: Vec<usize> = (0..self.members.len())
                    .filter(|i| self.members[*i].child.is_some())
                    .collect();
                if let Some(pos) = ids.iter().position(|id| *id == leaders[0]) {
                    return running[pos];
                }
            }
            assert!(
                Instant::now() < deadline,
                "etcd has no leader after {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}
