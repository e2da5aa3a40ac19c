//! The cluster's processes: add, spawn, kill, pause and resume a node,
//! have it read its auth file again, run one to its exit, and cut or
//! heal the links between nodes.

use super::*;

impl Cluster {
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
            .env("LOCKD_MODULE_CACHE", super::shared_module_cache())
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

    /// SIGTERM node `id` (a graceful stop) and wait for it to exit, up to
    /// `within`; its exit status.
    pub fn stop(&mut self, id: u64, within: Duration) -> std::process::ExitStatus {
        self.signal(id, "-TERM");
        // The child stays registered while it is awaited: a node that
        // never exits is killed with the cluster.
        let node = self.nodes.get_mut(&id).expect("known node");
        let child = node.child.as_mut().expect("node is running");
        let mut exited = None;
        wait_for(&format!("node {id} to exit on SIGTERM"), within, || {
            exited = child.try_wait().expect("wait for lockd");
            exited.is_some()
        });
        node.child = None;
        exited.expect("it exited")
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

    /// Remove `principal`'s entry from the auth file (a secure cluster)
    /// and have nodes `ids` read the file again (SIGHUP); returns once
    /// each has logged that it did.
    pub fn revoke(&self, principal: &str, ids: &[u64], within: Duration) {
        const READ: &str = "SIGHUP: auth file read again";
        let reads = |id: u64| {
            std::fs::read_to_string(&self.nodes[&id].log)
                .unwrap_or_default()
                .matches(READ)
                .count()
        };
        let before: Vec<usize> = ids.iter().map(|id| reads(*id)).collect();
        let file = &self.secure().auth_file;
        let rules = std::fs::read_to_string(file).expect("rules");
        let head = format!("[principals.{principal}]");
        let start = rules.find(&head).expect("the principal's entry");
        let end = rules[start + 1..]
            .find("\n[")
            .map_or(rules.len(), |i| start + 1 + i);
        std::fs::write(file, format!("{}{}", &rules[..start], &rules[end..])).expect("write");
        for id in ids {
            self.signal(*id, "-HUP");
        }
        for (id, n) in ids.iter().zip(before) {
            wait_for(&format!("node {id} read the file"), within, || {
                reads(*id) > n
            });
        }
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
}
