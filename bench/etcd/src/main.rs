//! lockd against etcd, side by side in one run.
//!
//! ```text
//! scripts/bench-vs-etcd.sh            # installs etcd + protoc when missing, then runs this
//! cargo run --release -p etcd-bench --bin vs-etcd -- [--seconds 5] [--rounds 2] [--out docs]
//! ```
//!
//! Starts a 3-member etcd (Debian's 3.4) and a 3-node lockd on loopback,
//! both with fsync on and the same Raft timings (heartbeat 50 ms, election
//! timeout 250 ms: lockd's defaults), data in temporary directories, and runs
//! the same workloads against both, **interleaved**: every round runs each
//! workload on lockd and on etcd back to back (alternating which goes
//! first), so both see the same machine state. Workloads: 1 client, 64
//! clients on their own keys, 16 clients on one key. lockd is driven over
//! its native protocol (`lockd-client`), etcd over its v3 gRPC lock API
//! (`etcd-client`): one lease per client, Lock + Unlock per cycle, each
//! client connected to etcd's leader (its best case: no forwarding).
//!
//! Then: leader failover (the leader SIGKILLed under load from 8 clients;
//! time to the first acquire that starts after the kill and succeeds — here
//! etcd's clients know every endpoint), and the two benchmarks of lockd
//! alone that belong in the report: wasm vs native apply (`sm-bench`) and
//! the upgrade pause (`upgrade-bench`), run as the already built binaries.
//!
//! Writes `OUT/benchmarks.md` and `OUT/benchmarks.png`.

mod drive;
mod etcd;
mod report;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use drive::System;
use lock_tests::cluster::Cluster;

/// The Raft timings of both clusters: lockd's defaults.
pub const HEARTBEAT_MS: u64 = 50;
pub const ELECTION_MS: u64 = 250;

/// One workload's measurements on one system, over all rounds.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Measured {
    pub cycles_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub errors: u64,
    pub last_error: Option<String>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Workload {
    pub name: String,
    pub clients: usize,
    pub contended: bool,
    pub lockd: Measured,
    pub etcd: Measured,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Failover {
    pub system: String,
    /// Kill → first acquire that started after the kill and succeeded.
    pub first_acquire_ms: f64,
    pub errors: u64,
    /// The last error a client saw, for the report.
    pub sample_error: Option<String>,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn measure(runs: &[(Vec<drive::ClientRun>, Duration)]) -> Measured {
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
            lat.extend(c.latencies.iter().map(|d| d.as_secs_f64() * 1e3));
        }
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    Measured {
        cycles_per_sec: cycles as f64 / secs.max(1e-9),
        p50_ms: percentile(&lat, 0.50),
        p99_ms: percentile(&lat, 0.99),
        p999_ms: percentile(&lat, 0.999),
        errors,
        last_error,
    }
}

async fn one_run(
    system: System,
    endpoints: Vec<String>,
    clients: usize,
    contended: bool,
    seconds: f64,
) -> (Vec<drive::ClientRun>, Duration) {
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(seconds);
    let runs = drive::run(
        system,
        endpoints,
        clients,
        contended,
        until,
        Arc::new(AtomicBool::new(false)),
    )
    .await;
    (runs, start.elapsed())
}

/// SIGKILL the leader under load; time to the first fresh acquire.
async fn failover(system: System, kill: impl FnOnce(), endpoints: Vec<String>) -> Failover {
    let stop = Arc::new(AtomicBool::new(false));
    let until = Instant::now() + Duration::from_secs(60);
    let load = tokio::spawn(drive::run(system, endpoints, 8, false, until, stop.clone()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let killed = Instant::now();
    kill();
    // Long enough for etcd's own request timeout (5 s) to pass too.
    tokio::time::sleep(Duration::from_secs(10)).await;
    stop.store(true, Ordering::Relaxed);
    let runs = load.await.unwrap_or_default();
    if std::env::var_os("VS_ETCD_DEBUG").is_some() {
        for (i, r) in runs.iter().enumerate() {
            for (t, e) in &r.error_log {
                eprintln!("client {i} +{:?}: {e}", t.saturating_duration_since(killed));
            }
        }
    }
    let first = runs
        .iter()
        .flat_map(|r| r.acquired.iter())
        .filter(|(start, _)| *start >= killed)
        .map(|(_, held)| *held - killed)
        .min();
    Failover {
        system: system.name().into(),
        first_acquire_ms: first.map_or(f64::NAN, |d| d.as_secs_f64() * 1e3),
        errors: runs.iter().map(|r| r.errors).sum(),
        sample_error: runs.iter().find_map(|r| r.last_error.clone()),
    }
}

fn run_bin(name: &str, args: &[&str]) -> String {
    let exe = std::env::current_exe().expect("current exe");
    let bin = exe.with_file_name(name);
    let out = std::process::Command::new(&bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e} (build it with `cargo build --release -p lock-bench`)", bin.display()));
    assert!(out.status.success(), "{name} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn main() {
    let seconds: f64 = lock_bench::arg("--seconds", 5.0);
    let rounds: usize = lock_bench::arg("--rounds", 2);
    let out: String = lock_bench::arg("--out", "docs".to_string());
    let skip_extras = lock_bench::flag("--skip-extras");
    lock_bench::ensure_binaries_built();
    let rt = tokio::runtime::Runtime::new().expect("runtime");

    let mut lockd = Cluster::start_timed(3, &[], HEARTBEAT_MS, ELECTION_MS);
    let lockd_leader = lockd.wait_leader(Duration::from_secs(20));
    let mut etcd = etcd::EtcdCluster::start(3, HEARTBEAT_MS, ELECTION_MS);
    let etcd_leader = rt.block_on(etcd.wait_leader(Duration::from_secs(30)));
    let lockd_eps = lockd.endpoints();
    let etcd_leader_ep = vec![etcd.members[etcd_leader].client_url.clone()];
    eprintln!("lockd leader node {lockd_leader}; etcd leader {}", etcd.members[etcd_leader].name);

    let workloads = [("1 client", 1usize, false), ("64 clients, own keys", 64, false), ("16 clients, one key", 16, true)];
    let mut results = Vec::new();
    for (name, clients, contended) in workloads {
        let mut l = Vec::new();
        let mut e = Vec::new();
        for round in 0..rounds {
            let order = if round % 2 == 0 { [System::Lockd, System::Etcd] } else { [System::Etcd, System::Lockd] };
            for system in order {
                let eps = match system {
                    System::Lockd => lockd_eps.clone(),
                    System::Etcd => etcd_leader_ep.clone(),
                };
                let r = rt.block_on(one_run(system, eps, clients, contended, seconds));
                eprintln!("{name} round {round} {}: {} cycles", system.name(), r.0.iter().map(|c| c.cycles).sum::<u64>());
                match system {
                    System::Lockd => l.push(r),
                    System::Etcd => e.push(r),
                }
            }
        }
        results.push(Workload {
            name: name.into(),
            clients,
            contended,
            lockd: measure(&l),
            etcd: measure(&e),
        });
    }

    // Failover, lockd then etcd (each cluster loses its leader for good).
    let lockd_failover = rt.block_on(failover(System::Lockd, || lockd.kill(lockd_leader), lockd_eps.clone()));
    let etcd_all = etcd.endpoints();
    let etcd_failover = rt.block_on(failover(System::Etcd, || etcd.kill(etcd_leader), etcd_all));
    drop(lockd);
    drop(etcd);

    let (sm, upgrade) = if skip_extras {
        (String::new(), String::new())
    } else {
        (run_bin("sm-bench", &[]), run_bin("upgrade-bench", &[]))
    };
    let failovers = vec![lockd_failover, etcd_failover];
    report::write(&out, &results, &failovers, &sm, &upgrade, seconds, rounds);
    println!("{}", std::fs::read_to_string(format!("{out}/benchmarks.md")).unwrap_or_default());
}
