//! A cluster of real `lockd` processes on loopback, for process-level tests.
//!
//! Each node is a separate `lockd serve` process with its own data dir under
//! one temporary directory, its own port, and its output in `nN.log` there
//! (kept when a test fails: the path is printed). Tests drive it through the
//! HTTP API like any user would, and kill, restart or corrupt it like the
//! real world does.
//!
//! A cluster made with [`Cluster::start_secure`] runs with TLS and
//! authentication on ([`crate::secure`]); the helpers below then act as
//! its admin, and [`Cluster::as_who`] gives a caller for any principal.
//!
//! The binaries are `target/<profile>/lockd` and `lockctl`, built by `cargo
//! test` at the workspace root (the `lockd` and `lockctl` packages have
//! integration tests, so cargo builds their binaries before any test runs);
//! `LOCKD_BIN` overrides `lockd`, and `lockctl` is taken from beside it.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, Hasher, RandomState};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use lockd::api::status::Status;
use serde_json::{json, Value};

pub use crate::secure::Reply;
use crate::secure::{Http, Secure, Who};

/// Timings short enough for tests, long enough for a loaded 2-core CI box.
pub const HEARTBEAT_MS: u64 = 50;
pub const ELECTION_MS: u64 = 400;

pub fn lockd_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("LOCKD_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/<test> or target/<profile>/<bench> → target/<profile>/lockd
    let mut dir = exe.parent().expect("exe dir");
    if dir.ends_with("deps") {
        dir = dir.parent().expect("profile dir");
    }
    let bin = dir.join("lockd");
    assert!(
        bin.exists(),
        "{} is missing: run the tests with `cargo test --release` at the workspace root",
        bin.display()
    );
    bin
}

/// `lockd-fault`: lockd with the test-only fault features (never in normal
/// builds; each fault acts only when its environment variable is set on the
/// node), built next to `lockd`: in the same target dir and
/// profile, with the same packages selected as the build that ran the tests
/// (`cargo test` at the workspace root), so every dependency is reused and
/// only the `lockd` crate is compiled again, with the fault; under its own
/// file name, so the `lockd` binary the other tests run is never replaced
/// (checked). Built once per test process, whoever asks first.
pub fn fault_binary() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(build_fault_binary).clone()
}

fn build_fault_binary() -> PathBuf {
    // Alone: the build keeps both cores busy for a while, which would stretch
    // the time windows of any cluster running beside it.
    let _alone = crate::turns::alone();
    let bin = lockd_bin().with_file_name("lockd-fault");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf();
    let profile_dir = lockd_bin().parent().expect("profile dir").to_path_buf();
    let target_dir = profile_dir.parent().expect("target dir").to_path_buf();
    let lockd_before = std::fs::read(lockd_bin()).expect("read lockd");
    // No `-p lockd`: cargo unifies dependency features over the selected
    // packages, and `-p lockd` alone would select fewer than the outer build
    // (the workspace's default members) and so compile many dependencies
    // again with other features. The fault features change the `lockd`
    // crate only; `--bin lockd-fault` builds nothing else.
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&workspace).args([
        "build",
        "--features",
        "lockd/fault-diverge lockd/fault-stale-done lockd/fault-early-expiry lockd/fault-double-grant lockd/fault-die-before-answer lockd/fault-implementation lockd/fault-builtin",
        "--bin",
        "lockd-fault",
        "--target-dir",
    ]);
    cmd.arg(&target_dir);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = cmd.status().expect("run cargo build for lockd-fault");
    assert!(status.success(), "building lockd-fault failed");
    assert!(bin.exists(), "{} was not built", bin.display());
    assert!(
        std::fs::read(lockd_bin()).expect("read lockd") == lockd_before,
        "building lockd-fault changed {}, which the other tests run",
        lockd_bin().display()
    );
    bin
}

/// A free port on 127.0.0.1 that nobody else in this process has been given.
///
/// Tests run side by side in one process, and a port is only bound once its
/// node starts (and unbound while the node is down between a kill and a
/// restart), so "bind :0 and release" alone could hand two tests the same
/// port. Hence: every port given out is remembered and never given again by
/// this process, and ports come from below the kernel's ephemeral range,
/// where the local ends of outgoing connections (every client's and every
/// node's) are allocated, so a down node's port cannot be taken by one of
/// them either. The start is random, so that test processes running at the
/// same time (other checkouts, benchmarks) rarely try the same ports; a port
/// someone else holds fails the bind test and is skipped.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(PoisonError::into_inner);
    let (lo, hi) = port_range();
    let span = u32::from(hi - lo);
    let start = (RandomState::new().build_hasher().finish() % u64::from(span)) as u32;
    for i in 0..span {
        let port = lo + ((start + i) % span) as u16;
        if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return port;
        }
    }
    panic!("no free port left in {lo}..{hi}");
}

/// Ports for nodes: from 20000 up to the start of the ephemeral range
/// (`/proc/sys/net/ipv4/ip_local_port_range`, 32768 by default), or, on a
/// machine whose ephemeral range leaves no room below it, above its end.
fn port_range() -> (u16, u16) {
    let ephemeral: Vec<u16> = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    match ephemeral[..] {
        [first, _] if first >= 21_000 => (20_000, first),
        [_, last] if last <= 64_000 => (last + 1, u16::MAX),
        _ => (20_000, 32_768),
    }
}

pub struct NodeProc {
    pub id: u64,
    pub addr: String,
    pub data_dir: PathBuf,
    pub log: PathBuf,
    pub args: Vec<String>,
    /// Extra environment for this node's process.
    pub env: Vec<(String, String)>,
    /// A binary other than [`lockd_bin`] for this node.
    pub bin: Option<PathBuf>,
    pub child: Option<Child>,
}

impl NodeProc {
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }
}

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub nodes: BTreeMap<u64, NodeProc>,
    /// Extra flags for every node (e.g. a small snapshot threshold).
    pub extra: Vec<String>,
    /// Set when every node runs in its own network namespace.
    pub net: Option<crate::netns::NetHosts>,
    /// Raft timings given to every node registered after they are set
    /// (tests use short ones; benchmarks may use the defaults).
    pub heartbeat_ms: u64,
    pub election_ms: u64,
    /// TLS and authentication, when on: nodes registered after it is set
    /// get its flags.
    pub secure: Option<Secure>,
    /// How the helpers below call the nodes (as admin when secure).
    http: Http,
    /// This cluster's turn on the machine (see [`crate::turns`]): clusters
    /// run side by side, but not beside a test that runs alone.
    _turn: crate::turns::Turn,
}

impl Cluster {
    /// Start `n` nodes that bootstrap one cluster.
    pub fn start(n: u64, extra: &[&str]) -> Cluster {
        let mut c = Cluster::configure(n, extra);
        for id in 1..=n {
            c.spawn(id);
        }
        c
    }

    /// Start `n` nodes with the given Raft timings instead of the tests'
    /// (benchmarks use lockd's defaults).
    pub fn start_timed(n: u64, extra: &[&str], heartbeat_ms: u64, election_ms: u64) -> Cluster {
        let mut c = Cluster::empty(extra);
        c.heartbeat_ms = heartbeat_ms;
        c.election_ms = election_ms;
        c.add_loopback_members(n);
        for id in 1..=n {
            c.spawn(id);
        }
        c
    }

    /// [`Cluster::start_timed`] with TLS and authentication on.
    pub fn start_secure_timed(
        n: u64,
        extra: &[&str],
        heartbeat_ms: u64,
        election_ms: u64,
    ) -> Cluster {
        let mut c = Cluster::empty(extra);
        c.heartbeat_ms = heartbeat_ms;
        c.election_ms = election_ms;
        let members: Vec<(u64, String)> = (1..=n)
            .map(|id| (id, format!("127.0.0.1:{}", free_port())))
            .collect();
        c.secure_for(&members);
        c.add_members(members);
        for id in 1..=n {
            c.spawn(id);
        }
        c
    }

    /// Start `n` nodes with TLS and authentication on.
    pub fn start_secure(n: u64, extra: &[&str]) -> Cluster {
        let mut c = Cluster::configure_secure(n, extra);
        for id in 1..=n {
            c.spawn(id);
        }
        c
    }

    /// Register (not start) `n` nodes with TLS and authentication on.
    pub fn configure_secure(n: u64, extra: &[&str]) -> Cluster {
        let mut c = Cluster::empty(extra);
        let members: Vec<(u64, String)> = (1..=n)
            .map(|id| (id, format!("127.0.0.1:{}", free_port())))
            .collect();
        c.secure_for(&members);
        c.add_members(members);
        c
    }

    /// Certificates for `members` (and for ids up to 9, for nodes added
    /// later), the auth file, and the admin as the helpers' caller.
    fn secure_for(&mut self, members: &[(u64, String)]) {
        let host = |addr: &str| addr.rsplit_once(':').map_or(addr, |(h, _)| h).to_string();
        let mut hosts: Vec<(u64, String)> = members.iter().map(|(i, a)| (*i, host(a))).collect();
        let first = hosts.first().map(|h| h.1.clone()).unwrap_or_default();
        for id in 1..=9 {
            if !hosts.iter().any(|h| h.0 == id) {
                hosts.push((id, first.clone()));
            }
        }
        let secure = Secure::create(&self.dir.path().join("certs"), &hosts);
        self.http = secure.http(Who::Cert("admin"));
        self.secure = Some(secure);
    }

    /// An HTTP caller presenting `who`'s credentials (a secure cluster).
    pub fn as_who(&self, who: Who) -> Http {
        self.secure().http(who)
    }

    /// The cluster's certificates and tokens (a secure cluster).
    pub fn secure(&self) -> &Secure {
        self.secure
            .as_ref()
            .expect("a cluster started with TLS and authentication")
    }

    /// Native client options presenting `who` (plaintext, anonymous when
    /// the cluster is not secure).
    pub fn client_options(&self, who: Who) -> lockd_client::ClientOptions {
        lockd_client::ClientOptions {
            credentials: self
                .secure
                .as_ref()
                .map(|s| s.credentials(who))
                .unwrap_or_default(),
            ..Default::default()
        }
    }

    /// Register (not start) `n` nodes of one cluster on loopback ports.
    pub fn configure(n: u64, extra: &[&str]) -> Cluster {
        let mut c = Cluster::empty(extra);
        c.add_loopback_members(n);
        c
    }

    /// Register nodes 1..=n on free loopback ports, bootstrapping together.
    fn add_loopback_members(&mut self, n: u64) {
        self.add_members(
            (1..=n)
                .map(|id| (id, format!("127.0.0.1:{}", free_port())))
                .collect(),
        );
    }

    /// Register nodes that bootstrap one cluster of exactly these members.
    pub fn add_members(&mut self, members: Vec<(u64, String)>) {
        let initial = members
            .iter()
            .map(|(i, a)| format!("{i}={a}"))
            .collect::<Vec<_>>()
            .join(",");
        for (id, addr) in members {
            self.add_proc(id, addr, &["--initial-cluster", &initial]);
        }
    }

    /// Start `n` nodes, each on its own host (network namespace), so links
    /// between them can be cut ([`Cluster::partition`]). Their addresses
    /// are not loopback ones, so they need TLS and authentication
    /// (`secure`) or `--insecure`.
    pub fn start_hosts(n: u64, extra: &[&str], secure: bool) -> Result<Cluster, String> {
        let ids: Vec<u64> = (1..=n).collect();
        let net = crate::netns::NetHosts::create(&ids)?;
        let mut extra = extra.to_vec();
        if !secure {
            extra.push("--insecure");
        }
        let mut c = Cluster::empty(&extra);
        let members: Vec<(u64, String)> = ids
            .iter()
            .map(|id| (*id, format!("{}:7400", net.host_ip(*id))))
            .collect();
        if secure {
            c.secure_for(&members);
        }
        c.add_members(members);
        c.net = Some(net);
        for id in ids {
            c.spawn(id);
        }
        Ok(c)
    }

    /// Cut the links between the groups (a node in two groups bridges them).
    pub fn partition(&mut self, groups: &[Vec<u64>]) {
        let net = self
            .net
            .as_mut()
            .expect("partitions need a cluster on separate hosts");
        net.partition(groups).expect("partition");
    }

    /// Restore every link.
    pub fn heal(&mut self) {
        if let Some(net) = self.net.as_mut() {
            net.heal().expect("heal");
        }
    }

    pub fn empty(extra: &[&str]) -> Cluster {
        let turn = crate::turns::shared();
        Cluster {
            dir: tempfile::Builder::new()
                .prefix("lockd-cluster-")
                .tempdir()
                .expect("tempdir"),
            nodes: BTreeMap::new(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            net: None,
            heartbeat_ms: HEARTBEAT_MS,
            election_ms: ELECTION_MS,
            secure: None,
            http: Http::new(None),
            _turn: turn,
        }
    }

    /// Register a node (not started) with its own flags.
    pub fn add_proc(&mut self, id: u64, addr: String, flags: &[&str]) {
        let data_dir = self.dir.path().join(format!("n{id}"));
        let log = self.dir.path().join(format!("n{id}.log"));
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--id".into(),
            id.to_string(),
            "--addr".into(),
            addr.clone(),
            "--data-dir".into(),
            data_dir.display().to_string(),
            "--heartbeat-ms".into(),
            self.heartbeat_ms.to_string(),
            "--election-timeout-ms".into(),
            self.election_ms.to_string(),
        ];
        args.extend(self.extra.iter().cloned());
        if let Some(s) = &self.secure {
            args.extend(s.node_args(id));
        }
        args.extend(flags.iter().map(|s| s.to_string()));
        self.nodes.insert(
            id,
            NodeProc {
                id,
                addr,
                data_dir,
                log,
                args,
                env: Vec::new(),
                bin: None,
                child: None,
            },
        );
    }

    /// Start (or restart) node `id` with its registered flags.
    pub fn spawn(&mut self, id: u64) {
        let node = self.nodes.get_mut(&id).expect("known node");
        assert!(node.child.is_none(), "node {id} is already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log)
            .expect("log file");
        // On separate hosts: `ip netns exec` enters the namespace and execs
        // lockd, so the child's pid is lockd's own (kill and pause reach it).
        let mut cmd = match &self.net {
            Some(net) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &net.ns(id)])
                    .arg(node.bin.clone().unwrap_or_else(lockd_bin));
                c
            }
            None => Command::new(node.bin.clone().unwrap_or_else(lockd_bin)),
        };
        let child = cmd
            .args(&node.args)
            .envs(node.env.iter().map(|(k, v)| (k, v)))
            .env(
                "RUST_LOG",
                std::env::var("LOCKD_TEST_LOG").unwrap_or_else(|_| "info,openraft=warn".into()),
            )
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn lockd");
        node.child = Some(child);
    }

    /// SIGKILL node `id` and reap it.
    pub fn kill(&mut self, id: u64) {
        let node = self.nodes.get_mut(&id).expect("known node");
        if let Some(mut child) = node.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP node `id`: it stops answering but keeps its state and
    /// sockets. Returns once the whole node has stopped: `kill` returns
    /// before that (one thread takes the signal and stops the others when
    /// it next runs, and until then they go on serving). The kernel reports
    /// the stop to the parent, this process, once every thread is stopped;
    /// `waitid` blocks until then (or returns at once, without reaping it,
    /// for a node that died instead).
    pub fn pause(&self, id: u64) {
        self.signal(id, "-STOP");
        let pid = self.nodes[&id]
            .child
            .as_ref()
            .expect("node is running")
            .id();
        // SAFETY: waitid writes only into `info`, which lives on this stack.
        let stopped = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(
                libc::P_PID,
                pid,
                &mut info,
                libc::WSTOPPED | libc::WEXITED | libc::WNOWAIT,
            )
        };
        assert_eq!(
            stopped,
            0,
            "waiting for node {id} (pid {pid}) to stop: {}",
            std::io::Error::last_os_error()
        );
    }

    /// SIGCONT node `id`.
    pub fn resume(&self, id: u64) {
        self.signal(id, "-CONT");
    }

    fn signal(&self, id: u64, sig: &str) {
        let pid = self.nodes[&id]
            .child
            .as_ref()
            .expect("node is running")
            .id();
        let ok = Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .expect("run kill")
            .success();
        assert!(ok, "kill {sig} {pid} failed");
    }

    /// Run `lockd` with these args to completion (for startup failures).
    pub fn run_to_exit(&self, id: u64, timeout: Duration) -> (Option<i32>, String) {
        let node = &self.nodes[&id];
        let mut child = Command::new(lockd_bin())
            .args(&node.args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn lockd");
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                return (status.code(), err);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return (None, "still running at the deadline".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every node's address.
    pub fn endpoints(&self) -> Vec<String> {
        self.nodes.values().map(|n| n.addr.clone()).collect()
    }

    /// A `lockctl` command pointed at every node of this cluster (as its
    /// admin when secure).
    pub fn lockctl(&self) -> Command {
        self.lockctl_as(Who::Cert("admin"))
    }

    /// A `lockctl` command presenting `who`'s credentials.
    pub fn lockctl_as(&self, who: Who) -> Command {
        let mut cmd = Command::new(lockd_bin().with_file_name("lockctl"));
        cmd.args(["--endpoints", &self.endpoints().join(",")]);
        if let Some(s) = &self.secure {
            cmd.args(s.lockctl_args(who));
        }
        cmd
    }

    pub fn addr(&self, id: u64) -> &str {
        &self.nodes[&id].addr
    }

    pub fn running(&self) -> Vec<u64> {
        self.nodes
            .values()
            .filter(|n| n.is_running())
            .map(|n| n.id)
            .collect()
    }

    fn request(
        &self,
        id: u64,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Reply, String> {
        self.http.request(self.addr(id), method, path, body)
    }

    pub fn get(&self, id: u64, path: &str) -> Result<Reply, String> {
        self.request(id, "GET", path, None)
    }

    pub fn post(&self, id: u64, path: &str, body: Value) -> Result<Reply, String> {
        self.request(id, "POST", path, Some(body))
    }

    pub fn put(&self, id: u64, path: &str, body: Value) -> Result<Reply, String> {
        self.request(id, "PUT", path, Some(body))
    }

    pub fn delete(&self, id: u64, path: &str) -> Result<Reply, String> {
        self.request(id, "DELETE", path, None)
    }

    /// POST raw bytes (a module) to node `id`.
    pub fn post_bytes(&self, id: u64, path: &str, body: &[u8]) -> Result<Reply, String> {
        self.http.post_bytes(self.addr(id), path, body)
    }

    /// Node `id`'s audit points.
    pub fn audit(&self, id: u64) -> Option<lockd_proto::AuditReport> {
        let r = self.get(id, "/v1/audit").ok()?;
        serde_json::from_value(r.body).ok()
    }

    pub fn status(&self, id: u64) -> Option<Status> {
        let r = self.get(id, "/v1/status").ok()?;
        serde_json::from_value(r.body).ok()
    }

    /// Wait until node `id` answers HTTP.
    pub fn wait_up(&self, id: u64, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.status(id).is_none() {
            assert!(
                Instant::now() < deadline,
                "node {id} did not come up within {timeout:?}: {}",
                self.describe()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait until every running node agrees on one leader; returns it.
    pub fn wait_leader(&self, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        loop {
            let statuses: Vec<Status> = self
                .running()
                .into_iter()
                .filter_map(|id| self.status(id))
                .collect();
            if statuses.len() == self.running().len() {
                if let Some(l) = statuses
                    .iter()
                    .find(|s| s.role == lockd_proto::Role::Leader)
                {
                    if statuses
                        .iter()
                        .all(|s| s.leader == Some(l.id) && s.term == l.term)
                    {
                        return l.id;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "no agreed leader within {timeout:?}: {}",
                self.describe()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait until every running node has applied the same index with the
    /// same state hash and the same module; returns that status.
    pub fn wait_converged(&self, timeout: Duration) -> Status {
        let deadline = Instant::now() + timeout;
        loop {
            let statuses: Vec<Status> = self
                .running()
                .into_iter()
                .filter_map(|id| self.status(id))
                .collect();
            if statuses.len() == self.running().len() && !statuses.is_empty() {
                let s0 = &statuses[0];
                let same = statuses.iter().all(|s| {
                    s.applied_index == s0.applied_index
                        && s.state_hash == s0.state_hash
                        && s.module_hash == s0.module_hash
                });
                if same && s0.applied_index > 0 {
                    return s0.clone();
                }
            }
            assert!(
                Instant::now() < deadline,
                "nodes did not converge within {timeout:?}: {}",
                self.describe()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Try once to take `key` on node `id`.
    pub fn acquire(&self, id: u64, key: &str, lease_ms: u64) -> Result<Reply, String> {
        self.post(
            id,
            &format!("/v1/locks/{key}/acquire"),
            json!({ "lease_ms": lease_ms }),
        )
    }

    pub fn release(&self, id: u64, key: &str, token: u64) -> Result<Reply, String> {
        self.post(
            id,
            &format!("/v1/locks/{key}/release"),
            json!({ "token": token }),
        )
    }

    pub fn keepalive(&self, id: u64, key: &str, token: u64) -> Result<Reply, String> {
        self.post(
            id,
            &format!("/v1/locks/{key}/keepalive"),
            json!({ "token": token }),
        )
    }

    /// A metric's value on node `id`: the first sample that `selector`
    /// matches, `name` or `name{label="value",…}` (the sample may carry
    /// more labels, such as `node`).
    pub fn metric(&self, id: u64, selector: &str) -> Option<u64> {
        let text = self.metrics_text(id)?;
        crate::metrics::value(&text, selector).map(|v| v as u64)
    }

    /// Node `id`'s `/metrics`, as text.
    pub fn metrics_text(&self, id: u64) -> Option<String> {
        self.http.text(self.addr(id), "/metrics")
    }

    pub fn lock(&self, id: u64, key: &str) -> Result<Reply, String> {
        self.get(id, &format!("/v1/locks/{key}"))
    }

    /// Acquire on whichever node is leader now, retrying through elections
    /// until `timeout`. Returns the token.
    pub fn acquire_on_leader(&self, key: &str, lease_ms: u64, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        loop {
            let leader = self.wait_leader(
                deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1)),
            );
            match self.acquire(leader, key, lease_ms) {
                Ok(r) if r.ok() => return r.body["token"].as_u64().expect("token"),
                Ok(r) if r.status == 409 => panic!("{key} is unexpectedly held: {r:?}"),
                other => assert!(
                    Instant::now() < deadline,
                    "acquire {key} failed until the deadline: {other:?}"
                ),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Release `token` on `key` on whichever node is leader now, retrying
    /// through elections. "Not held" is an answer only after an attempt
    /// whose outcome was unknown (that attempt may have released it).
    pub fn release_on_leader(&self, key: &str, token: u64, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut unknown = false;
        loop {
            let leader = self.wait_leader(
                deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1)),
            );
            match self.release(leader, key, token) {
                Ok(r) if r.ok() => return,
                Ok(r) if r.status == 404 && unknown => return,
                Ok(r) if r.status == 404 || r.status == 409 => {
                    panic!("release of {key} (token {token}) refused: {r:?}")
                }
                other => {
                    unknown |= other.as_ref().map_or(true, |r| r.status >= 500);
                    assert!(
                        Instant::now() < deadline,
                        "release {key} failed until the deadline: {other:?}"
                    );
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One line per node: role, term, indexes, hash; and where the logs are.
    pub fn describe(&self) -> String {
        let mut out = format!("(logs in {})", self.dir.path().display());
        for id in self.nodes.keys() {
            match self.status(*id) {
                Some(s) => out.push_str(&format!(
                    "\n  node {id}: {} term {} leader {:?} commit {} applied {} hash {}",
                    s.role,
                    s.term,
                    s.leader,
                    s.commit_index,
                    s.applied_index,
                    &s.state_hash[..12.min(s.state_hash.len())]
                )),
                None => out.push_str(&format!("\n  node {id}: down")),
            }
        }
        out
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("cluster state at failure: {}", self.describe());
            let kept = self.dir.path().to_path_buf();
            for id in self.nodes.keys().copied().collect::<Vec<_>>() {
                self.kill(id);
            }
            // Leak the temp dir so the logs survive for a look.
            let _ = std::mem::replace(&mut self.dir, tempfile::tempdir().expect("tempdir")).keep();
            eprintln!("node logs kept in {}", kept.display());
            return;
        }
        for id in self.nodes.keys().copied().collect::<Vec<_>>() {
            self.kill(id);
        }
    }
}
