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
//!
//! Layout: this file finds the binaries and starts clusters; `process`
//! spawns, kills, pauses and partitions nodes; `api` talks to them (HTTP,
//! lockctl, status, metrics) and waits on conditions.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, Hasher, RandomState};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use lockd::api::status::Status;
use serde_json::{json, Value};

pub use crate::secure::Reply;
use crate::secure::{Http, Secure, Who};

/// Wait until `done` holds, looking every 20 ms; fail, naming `what`,
/// when it has not within `within` (a bound far above what it takes on a
/// loaded machine, so the wait never stands for a time).
pub fn wait_for(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

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

/// The compiled-module cache every node of the process tests shares
/// (`--module-cache`): the `test-module-cache` directory beside the node's
/// binary, unless `LOCKD_MODULE_CACHE` names another. A node then compiles
/// a module only when no node of any earlier test has (half a second of
/// CPU each, at every node start otherwise); the compile path itself is
/// tested by the module tests (`tests/sm/engine_cache.rs`).
pub fn shared_module_cache() -> PathBuf {
    match std::env::var_os("LOCKD_MODULE_CACHE") {
        Some(p) => PathBuf::from(p),
        None => lockd_bin().with_file_name("test-module-cache"),
    }
}

/// The binary the fault tests run: the suite's own `lockd`, which carries
/// the test-only faults (the `faults` feature, this package's default, so
/// `cargo test` builds it once, with everything else); each fault acts only when a test sets its environment variable on
/// a node (docs/testing.md, "Test-only faults"). Named apart so a test says
/// which of its nodes are meant to carry a fault.
pub fn fault_binary() -> PathBuf {
    lockd_bin()
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

mod api;
mod process;

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
    pub fn add_loopback_members(&mut self, n: u64) {
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
