//! A 3-server ZooKeeper ensemble on loopback (Debian's `zookeeper` 3.8),
//! one JVM per server, started as `java -cp zookeeper.jar
//! org.apache.zookeeper.server.quorum.QuorumPeerMain zoo.cfg`, with its
//! own ports and data in a temporary directory; fsync on (`forceSync=yes`,
//! ZooKeeper's default, written out anyway).
//!
//! The timings follow lockd's and etcd's (heartbeat 40 ms, election
//! timeout 200 ms) as closely as ZooKeeper's tick allows; see
//! [`ZkTimings::from_raft`]. The leader is found with the `srvr`
//! four-letter command ("Mode: leader").
//!
//! Every JVM runs in a process group of its own, which [`ZkEnsemble::kill`]
//! and the ensemble's `Drop` SIGKILL as a whole; a JVM also gets SIGKILL
//! from the kernel when the benchmark itself dies (`PR_SET_PDEATHSIG`), so
//! no java process outlives a run, however it ends.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lockd_tests::cluster::free_port;

/// Debian's ZooKeeper jar; its manifest's `Class-Path` names the jars it
/// needs (netty, jute, slf4j-api, …).
pub const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
/// An slf4j binding for the servers' warnings (Debian's `libslf4j-java`);
/// without it slf4j logs nothing, which is fine too.
const SLF4J_SIMPLE: &str = "/usr/share/java/slf4j-simple.jar";
/// Each server's heap: ample for a few thousand znodes.
const HEAP: &str = "-Xmx1g";

/// ZooKeeper's timings, all in whole ticks.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct ZkTimings {
    /// `tickTime`, ms. The leader pings every follower every half tick.
    pub tick_ms: u64,
    /// `syncLimit`, ticks: a follower that has heard nothing from its
    /// leader for `syncLimit × tickTime` drops it and starts an election
    /// (and the leader drops a follower that lags as long).
    pub sync_limit: u64,
    /// `initLimit`, ticks: how long a new leader waits for a quorum of
    /// followers to connect and sync.
    pub init_limit: u64,
}

impl ZkTimings {
    /// The closest to Raft's `heartbeat_ms` / `election_ms` that ZooKeeper
    /// has: a tick of twice the heartbeat (the leader pings every half
    /// tick, so every `heartbeat_ms`), and the fewest whole ticks that
    /// reach the election timeout (40 / 200 ms: tick 80 ms, syncLimit 3,
    /// i.e. 240 ms). `initLimit` is 2 s worth of ticks (25 at 80 ms): it
    /// bounds a new leader's sync, not how soon an election starts.
    ///
    /// The heartbeat is matched exactly and the timeout rounded up, rather
    /// than the other way round (tick 100 ms, syncLimit 2: 200 ms, but a
    /// ping every 50 ms), so that no ZooKeeper timer is shorter than its
    /// Raft counterpart. What cannot be matched: ZooKeeper's election
    /// waits a fixed 200 ms for late votes (`finalizeWait`), whatever the
    /// tick.
    pub fn from_raft(heartbeat_ms: u64, election_ms: u64) -> ZkTimings {
        let tick_ms = (2 * heartbeat_ms).max(1);
        ZkTimings {
            tick_ms,
            sync_limit: election_ms.div_ceil(tick_ms).max(1),
            init_limit: 2000u64.div_ceil(tick_ms).max(2),
        }
    }
}

pub struct Server {
    pub id: usize,
    pub client_port: u16,
    pub child: Option<Child>,
}

pub struct ZkEnsemble {
    pub dir: tempfile::TempDir,
    pub servers: Vec<Server>,
}

/// Ask `port` a four-letter command; its whole answer.
pub fn four_letter(port: u16, command: &str) -> std::io::Result<String> {
    let timeout = Duration::from_secs(1);
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.write_all(command.as_bytes())?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    Ok(answer)
}

/// The `Mode:` of a `srvr` answer ("leader", "follower", "standalone"),
/// or `None` when the server does not serve (yet).
fn mode(port: u16) -> Option<String> {
    let answer = four_letter(port, "srvr").ok()?;
    answer
        .lines()
        .find_map(|l| l.strip_prefix("Mode: "))
        .map(|m| m.trim().to_string())
}

impl ZkEnsemble {
    /// Start `n` servers with `timings`.
    pub fn start(n: usize, timings: ZkTimings) -> ZkEnsemble {
        let dir = tempfile::Builder::new()
            .prefix("zk-bench-")
            .tempdir()
            .expect("tempdir");
        // (client, quorum, election) ports per server.
        let ports: Vec<(u16, u16, u16)> = (0..n)
            .map(|_| (free_port(), free_port(), free_port()))
            .collect();
        let members: String = ports
            .iter()
            .enumerate()
            .map(|(i, (_, q, e))| format!("server.{}=127.0.0.1:{q}:{e}\n", i + 1))
            .collect();
        let mut servers = Vec::new();
        for (i, (client_port, _, _)) in ports.iter().enumerate() {
            let id = i + 1;
            let data = dir.path().join(format!("zk{id}"));
            std::fs::create_dir_all(&data).expect("create a ZooKeeper data directory");
            std::fs::write(data.join("myid"), format!("{id}\n")).expect("write myid");
            let cfg = dir.path().join(format!("zk{id}.cfg"));
            std::fs::write(&cfg, config(&timings, &data, *client_port, &members))
                .expect("write zoo.cfg");
            let log = std::fs::File::create(dir.path().join(format!("zk{id}.log"))).expect("log");
            servers.push(Server {
                id,
                client_port: *client_port,
                child: Some(spawn_server(&cfg, log)),
            });
        }
        ZkEnsemble { dir, servers }
    }

    /// `host:port` of every running server.
    pub fn endpoints(&self) -> Vec<String> {
        self.servers
            .iter()
            .filter(|s| s.child.is_some())
            .map(|s| format!("127.0.0.1:{}", s.client_port))
            .collect()
    }

    /// `host:port` of server `i`.
    pub fn endpoint(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.servers[i].client_port)
    }

    /// The index of the leader, once every running server serves: one
    /// says "Mode: leader", the others "Mode: follower".
    pub fn wait_leader(&self, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        loop {
            let modes: Vec<(usize, Option<String>)> = (0..self.servers.len())
                .filter(|i| self.servers[*i].child.is_some())
                .map(|i| (i, mode(self.servers[i].client_port)))
                .collect();
            let leaders: Vec<usize> = modes
                .iter()
                .filter(|(_, m)| m.as_deref() == Some("leader"))
                .map(|(i, _)| *i)
                .collect();
            let followers = modes
                .iter()
                .filter(|(_, m)| m.as_deref() == Some("follower"))
                .count();
            if leaders.len() == 1 && followers + 1 == modes.len() {
                return leaders[0];
            }
            assert!(
                Instant::now() < deadline,
                "ZooKeeper has no leader after {timeout:?} (modes {modes:?}; logs in {})",
                self.dir.path().display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL server `i` (its whole process group) and reap it.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.servers[i].child.take() {
            kill_group(&c);
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for ZkEnsemble {
    fn drop(&mut self) {
        for i in 0..self.servers.len() {
            self.kill(i);
        }
    }
}

/// One server's `zoo.cfg`.
fn config(t: &ZkTimings, data: &std::path::Path, client_port: u16, members: &str) -> String {
    format!(
        "tickTime={}\n\
         initLimit={}\n\
         syncLimit={}\n\
         dataDir={}\n\
         clientPort={client_port}\n\
         clientPortAddress=127.0.0.1\n\
         forceSync=yes\n\
         # Every benchmark client comes from 127.0.0.1: no per-address cap.\n\
         maxClientCnxns=0\n\
         # The listen backlog is 50 by default: 64 clients connecting at once\n\
         # overflow it, and a dropped SYN costs a client a second.\n\
         clientPortListenBacklog=1024\n\
         # The default cap is 20 ticks (1.6 s at 80 ms); the clients ask 10 s.\n\
         maxSessionTimeout=60000\n\
         # The admin server would take port 8080, once per server.\n\
         admin.enableServer=false\n\
         4lw.commands.whitelist=srvr\n\
         {members}",
        t.tick_ms,
        t.init_limit,
        t.sync_limit,
        data.display(),
    )
}

/// Start one server: the JVM itself (no wrapper script), in a process
/// group of its own, killed by the kernel if the benchmark dies.
fn spawn_server(cfg: &std::path::Path, log: std::fs::File) -> Child {
    let mut classpath = ZOOKEEPER_JAR.to_string();
    if std::path::Path::new(SLF4J_SIMPLE).exists() {
        classpath = format!("{classpath}:{SLF4J_SIMPLE}");
    }
    let mut cmd = Command::new("java");
    cmd.arg(HEAP)
        .args(["-cp", &classpath])
        .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
        .arg("-Dorg.slf4j.simpleLogger.showDateTime=true")
        .arg("-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS")
        .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
        .arg(cfg)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .process_group(0);
    // SAFETY: prctl(2) is async-signal-safe and touches no memory of ours;
    // it is all that runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().unwrap_or_else(|e| {
        panic!(
            "start ZooKeeper: {e} (is Debian's zookeeper installed, with a JRE? \
             scripts/bench-vs-etcd.sh installs it)"
        )
    })
}

/// SIGKILL the process group that `child` leads.
fn kill_group(child: &Child) {
    if let Ok(pgid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill(2) on a process group we created; no memory involved.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}
