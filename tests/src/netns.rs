//! Separate network hosts for partition tests: one Linux network namespace
//! per node, joined by a bridge, with links cut by blackhole routes.
//!
//! ```text
//!   root namespace (test harness, clients)
//!        │ bridge lkbr<S>  10.77.<S>.1/24
//!   ┌────┴─────┬──────────┐
//!  veth       veth       veth
//!   │ lk<S>n1   │ lk<S>n2   │ lk<S>n3      one namespace per node,
//!   10.77.<S>.11 …12       …13             each lockd on its own host address
//! ```
//!
//! A partition adds a blackhole route in each namespace for every peer on
//! the other side, so packets between them are dropped in both directions
//! while the harness (in the root namespace) still reaches every node — the
//! classic "isolated leader that clients can still talk to". Everything is
//! created by the run itself and removed when it ends. Needs root (as CI
//! and the development machines run).

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Best effort: a machine without iptables has no FORWARD chain to pass.
fn iptables(args: &[&str]) {
    let _ = Command::new("iptables").args(args).output();
}

/// The namespaces, bridge and cut links of one cluster.
pub struct NetHosts {
    subnet: u64,
    nodes: Vec<u64>,
    cut: BTreeSet<(u64, u64)>,
}

impl NetHosts {
    /// Whether this machine lets us make namespaces (root, iproute2).
    pub fn available() -> bool {
        // One name per call: tests running at once in one process must not
        // add and delete each other's probe.
        static PROBE: AtomicU64 = AtomicU64::new(0);
        let probe = format!(
            "lkprobe{}-{}",
            std::process::id(),
            PROBE.fetch_add(1, Ordering::Relaxed)
        );
        ip(&["netns", "add", &probe]).is_ok() && ip(&["netns", "del", &probe]).is_ok()
    }

    pub fn create(nodes: &[u64]) -> Result<NetHosts, String> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let subnet =
            20 + (std::process::id() as u64 * 7 + NEXT.fetch_add(1, Ordering::Relaxed)) % 200;
        let mut hosts = NetHosts {
            subnet,
            nodes: Vec::new(),
            cut: BTreeSet::new(),
        };
        let bridge = hosts.bridge();
        let _ = ip(&["link", "del", &bridge]);
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&[
            "addr",
            "add",
            &format!("10.77.{subnet}.1/24"),
            "dev",
            &bridge,
        ])?;
        ip(&["link", "set", &bridge, "up"])?;
        // Bridged frames can pass through iptables' FORWARD chain (with
        // br_netfilter loaded, as Docker leaves it, with a DROP policy):
        // let our bridge's own traffic through.
        iptables(&[
            "-I", "FORWARD", "-i", &bridge, "-o", &bridge, "-j", "ACCEPT",
        ]);
        for &n in nodes {
            let ns = hosts.ns(n);
            let veth = format!("lk{subnet}v{n}");
            // Leftovers of a run that was killed before it could clean up.
            let _ = ip(&["netns", "del", &ns]);
            let _ = ip(&["link", "del", &veth]);
            ip(&["netns", "add", &ns])?;
            hosts.nodes.push(n);
            ip(&[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])?;
            ip(&["link", "set", &veth, "master", &bridge])?;
            ip(&["link", "set", &veth, "up"])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", hosts.host_ip(n)),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(hosts)
    }

    fn bridge(&self) -> String {
        format!("lkbr{}", self.subnet)
    }

    pub fn ns(&self, node: u64) -> String {
        format!("lk{}n{node}", self.subnet)
    }

    pub fn host_ip(&self, node: u64) -> String {
        format!("10.77.{}.{}", self.subnet, 10 + node)
    }

    /// Drop all traffic between `a` and `b`, both ways.
    pub fn cut(&mut self, a: u64, b: u64) -> Result<(), String> {
        let (x, y) = (a.min(b), a.max(b));
        if x == y || !self.cut.insert((x, y)) {
            return Ok(());
        }
        self.blackhole("add", x, y)
    }

    /// Add or delete (`op`) the blackhole routes between `x` and `y`, both
    /// ways.
    fn blackhole(&self, op: &str, x: u64, y: u64) -> Result<(), String> {
        for (from, to) in [(x, y), (y, x)] {
            ip(&[
                "-n",
                &self.ns(from),
                "route",
                op,
                "blackhole",
                &format!("{}/32", self.host_ip(to)),
            ])?;
        }
        Ok(())
    }

    /// Split into groups: every pair in different groups is cut. A node in
    /// two groups is a bridge between them.
    pub fn partition(&mut self, groups: &[Vec<u64>]) -> Result<(), String> {
        for (i, g) in groups.iter().enumerate() {
            for h in &groups[i + 1..] {
                for &a in g {
                    for &b in h {
                        if !g.contains(&b) && !h.contains(&a) {
                            self.cut(a, b)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Restore every link.
    pub fn heal(&mut self) -> Result<(), String> {
        for (x, y) in std::mem::take(&mut self.cut) {
            self.blackhole("del", x, y)?;
        }
        Ok(())
    }
}

impl Drop for NetHosts {
    fn drop(&mut self) {
        for n in &self.nodes {
            let _ = ip(&["netns", "del", &self.ns(*n)]);
        }
        let bridge = self.bridge();
        iptables(&[
            "-D", "FORWARD", "-i", &bridge, "-o", &bridge, "-j", "ACCEPT",
        ]);
        let _ = ip(&["link", "del", &bridge]);
    }
}
