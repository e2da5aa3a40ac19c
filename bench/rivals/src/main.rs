//! lockd against etcd and ZooKeeper, side by side in one run.
//!
//! ```text
//! scripts/bench-vs-etcd.sh            # installs etcd, ZooKeeper, protoc when missing, then runs this
//! cargo run --release -p lockd-bench-rivals --bin vs-etcd -- [--seconds 5] [--rounds 2] [--out docs]
//!     [--systems lockd,etcd,zookeeper] [--warmup 5]
//! ```
//!
//! Starts a 3-member etcd (Debian's 3.4), a 3-server ZooKeeper ensemble
//! (Debian's 3.8, see [`zk`]) and a 3-node lockd on loopback, all with
//! fsync on and the same failure-detection timings (heartbeat 40 ms,
//! election timeout 200 ms: lockd's defaults; etcd needs election ≥ 5 ×
//! heartbeat; ZooKeeper counts in ticks, see [`zk::ZkTimings`]), data in
//! temporary directories, and runs the same workloads against each,
//! **interleaved**: every round runs each workload on every system back to
//! back (the order rotating from round to round), so all see the same
//! machine state. Before the first round each system gets `--warmup`
//! seconds of the 64-client workload, not measured (ZooKeeper's JIT).
//! Workloads: 1, 64, 256 and 1 024 clients on their own keys, 16 clients
//! on one key. lockd is driven over its native protocol (`lockd-client`)
//! and over HTTP/JSON (kept-alive connections to the leader), etcd
//! over its v3 gRPC lock API (`etcd-client`): one lease per client, Lock +
//! Unlock per cycle; ZooKeeper with the `zookeeper-client` crate's Curator
//! lock recipe, one session per client (see [`zk_drive`]). etcd's and
//! ZooKeeper's clients are connected to the leader (their best case: no
//! forwarding).
//!
//! Then: leader failover (see [`failover`]), and the two benchmarks of
//! lockd alone that belong in the report: wasm vs native apply
//! (`sm-bench`) and the upgrade pause (`upgrade-bench`), run as the
//! already built binaries.
//!
//! `--systems`: which of lockd, lockd-http, etcd and zookeeper to run
//! (default all four; `zk` names ZooKeeper too). `--workloads 1024,16`:
//! only the workloads with those numbers of clients. `--tls` and `--recipes` compare lockd
//! and etcd only.
//!
//! `--tls`: the cost of TLS instead (see [`tls`]): both systems in the
//! clear and with client and peer TLS, side by side, written to
//! `OUT/benchmarks-tls.md` and `.json`.
//!
//! `--recipes`: sessions and elections instead (see [`recipes`]): keeping
//! 100 holdings alive, and election handoff, written to
//! `OUT/benchmarks-recipes.md` and `.json`.
//!
//! Writes `OUT/benchmarks.md`, `OUT/benchmarks.png`, `OUT/benchmarks.json`
//! and the leader's flamegraph `OUT/leader-profile.svg` (when `perf` is
//! there). `--only-failover` runs just the failover trials; `--redraw`
//! draws `OUT/benchmarks.png` again from `OUT/benchmarks.json`;
//! `VS_ETCD_KEEP=1` keeps each lockd and ZooKeeper trial's logs (and
//! prints where), `VS_ETCD_DEBUG=1` prints the clients' errors around each
//! kill.

mod chart;
mod compare;
mod drive;
mod etcd;
mod failover;
mod plan;
mod profile;
mod recipes;
mod report;
mod tls;
mod zk;
mod zk_drive;

use std::collections::BTreeMap;
use std::time::Duration;

use drive::System;

/// The Raft timings of the clusters: lockd's defaults (ZooKeeper's
/// follow them: [`zk_timings`]).
pub const HEARTBEAT_MS: u64 = 40;
pub const ELECTION_MS: u64 = 200;

/// The election timeout this run uses (`--election-ms`, default lockd's).
pub fn election_ms() -> u64 {
    lockd_bench::arg("--election-ms", ELECTION_MS)
}

/// ZooKeeper's ticks for this run's heartbeat and election timeout.
pub fn zk_timings() -> zk::ZkTimings {
    zk::ZkTimings::from_raft(HEARTBEAT_MS, election_ms())
}

/// One workload's measurements on one system, over all rounds.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Measured {
    pub cycles_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub errors: u64,
    pub last_error: Option<String>,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Workload {
    pub name: String,
    pub clients: usize,
    pub contended: bool,
    /// By system name ("lockd", "etcd", "zookeeper"): in the JSON, one
    /// key per system beside `name`, as before ZooKeeper joined.
    #[serde(flatten)]
    pub measured: BTreeMap<String, Measured>,
}

impl Workload {
    /// What `system` measured, when it ran.
    pub fn get(&self, system: System) -> Option<&Measured> {
        self.measured.get(system.name())
    }
}

pub fn measure(runs: &[(Vec<plan::ClientRun>, Duration)]) -> Measured {
    let mut lat: Vec<f64> = Vec::new();
    let (mut cycles, mut errors, mut secs) = (0u64, 0u64, 0f64);
    let mut last_error = None;
    for (clients, took) in runs {
        secs += took.as_secs_f64();
        for c in clients {
            cycles += c.cycles;
            errors += c.errors;
            if c.last_error.is_some() {
                last_error = c.last_error.clone();
            }
            lat.extend(
                c.acquired
                    .iter()
                    .map(|(start, held)| (*held - *start).as_secs_f64() * 1e3),
            );
        }
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    Measured {
        cycles_per_sec: cycles as f64 / secs.max(1e-9),
        p50_ms: lockd_bench::percentile_ms(&lat, 0.50),
        p99_ms: lockd_bench::percentile_ms(&lat, 0.99),
        p999_ms: lockd_bench::percentile_ms(&lat, 0.999),
        errors,
        last_error,
    }
}

pub async fn one_run(
    system: System,
    endpoints: Vec<String>,
    security: drive::Security,
    clients: usize,
    contended: bool,
    seconds: f64,
) -> (Vec<plan::ClientRun>, Duration) {
    let length = Duration::from_secs_f64(seconds);
    drive::run_timed(system, endpoints, security, clients, contended, length).await
}

fn run_bin(name: &str, args: &[&str]) -> String {
    let exe = std::env::current_exe().expect("current exe");
    let bin = exe.with_file_name(name);
    let out = std::process::Command::new(&bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "run {}: {e} (build it with `cargo build --release -p lockd-bench`)",
                bin.display()
            )
        });
    assert!(
        out.status.success(),
        "{name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The systems named by `--systems` (default all), in the report's order.
fn systems() -> Vec<System> {
    let names: String =
        lockd_bench::arg("--systems", "lockd,lockd-http,etcd,zookeeper".to_string());
    let mut chosen = Vec::new();
    for name in names.split(',').filter(|n| !n.trim().is_empty()) {
        match System::parse(name) {
            Some(s) => chosen.push(s),
            None => {
                panic!("--systems: unknown system {name:?} (lockd, lockd-http, etcd, zookeeper)")
            }
        }
    }
    System::ALL
        .into_iter()
        .filter(|s| chosen.contains(s))
        .collect()
}

fn main() {
    let seconds: f64 = lockd_bench::arg("--seconds", 5.0);
    let rounds: usize = lockd_bench::arg("--rounds", 2);
    let out: String = lockd_bench::arg("--out", "docs".to_string());
    let skip_extras = lockd_bench::flag("--skip-extras");
    let trials: usize = lockd_bench::arg("--failover-trials", 5);
    let only_failover = lockd_bench::flag("--only-failover");
    let systems = systems();
    if lockd_bench::flag("--redraw") {
        // The chart again from the report's JSON, nothing run.
        return chart::redraw(std::path::Path::new(&out));
    }
    lockd_bench::ensure_binaries_built();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    if lockd_bench::flag("--tls") {
        return tls::run(&rt, seconds, rounds, &out);
    }
    if lockd_bench::flag("--recipes") {
        let keepalive_rounds = lockd_bench::arg("--keepalive-rounds", 50);
        return recipes::run(&rt, keepalive_rounds, trials, &out);
    }

    if only_failover {
        for system in systems.into_iter().filter(|s| *s != System::LockdHttp) {
            let f = failover::failover(&rt, system, trials);
            println!(
                "{}: trials {:?} median {:.0} max {:.0}",
                f.system, f.trials_ms, f.median_ms, f.max_ms
            );
        }
        return;
    }
    let warmup: f64 = lockd_bench::arg("--warmup", 5.0);
    let compared = compare::run(&rt, &systems, seconds, rounds, warmup, &out);
    // Failover: fresh clusters, one trial at a time.
    let failovers: Vec<failover::Failover> = systems
        .iter()
        .filter(|s| **s != System::LockdHttp)
        .map(|s| failover::failover(&rt, *s, trials))
        .collect();

    let (sm, upgrade) = if skip_extras || !systems.contains(&System::Lockd) {
        (String::new(), String::new())
    } else {
        (run_bin("sm-bench", &[]), run_bin("upgrade-bench", &[]))
    };
    let setup = report::Setup {
        systems: &systems,
        seconds,
        rounds,
        warmup,
        zk: zk_timings(),
    };
    report::write(
        &out,
        &setup,
        &compared.workloads,
        &failovers,
        compared.profile.as_ref(),
        &sm,
        &upgrade,
    );
    println!(
        "{}",
        std::fs::read_to_string(format!("{out}/benchmarks.md")).unwrap_or_default()
    );
}
