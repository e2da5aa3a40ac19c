//! A 3-member etcd cluster on loopback (Debian's `etcd` 3.4), one process
//! per member, fsync on (etcd's default), data in a temporary directory.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lock_tests::cluster::free_port;

pub struct Member {
    pub name: String,
    pub client_url: String,
    pub child: Option<Child>,
}

pub struct EtcdCluster {
    pub _dir: tempfile::TempDir,
    pub members: Vec<Member>,
}

impl EtcdCluster {
    /// Start `n` members with the given Raft timings (ms).
    pub fn start(n: usize, heartbeat_ms: u64, election_ms: u64) -> EtcdCluster {
        let dir = tempfile::Builder::new()
            .prefix("etcd-bench-")
            .tempdir()
            .expect("tempdir");
        let peers: Vec<(String, u16, u16)> = (1..=n)
            .map(|i| (format!("e{i}"), free_port(), free_port()))
            .collect();
        let initial = peers
            .iter()
            .map(|(name, _, pp)| format!("{name}=http://127.0.0.1:{pp}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut members = Vec::new();
        for (name, cp, pp) in &peers {
            let client_url = format!("http://127.0.0.1:{cp}");
            let peer_url = format!("http://127.0.0.1:{pp}");
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
        EtcdCluster { _dir: dir, members }
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
                    let mut c = etcd_client::Client::connect([m.client_url.as_str()], None)
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
