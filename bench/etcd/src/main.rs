//! lockd against etcd, side by side in one run.
//!
//! ```text
//! scripts/bench-vs-etcd.sh            # installs etcd + protoc when missing, then runs this
//! cargo run --release -p etcd-bench --bin vs-etcd -- [--seconds 5] [--rounds 2] [--out docs]
//! ```
//!
//! Starts a 3-member etcd (Debian's 3.4) and a 3-node lockd on loopback,
//! both with fsync on and the same Raft timings (heartbeat 40 ms, election
//! timeout 200 ms: lockd's defaults; etcd needs election ≥ 5 × heartbeat), data in temporary directories, and runs
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
//! there). `--only-failover` runs just the failover trials;
//! `VS_ETCD_KEEP=1` keeps each lockd trial's node logs (and prints where),
//! `VS_ETCD_DEBUG=1` prints the clients' errors around each kill.

mod drive;
mod etcd;
mod profile;
mod recipes;
mod report;
mod tls;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use drive::System;
use lock_tests::cluster::Cluster;

/// The Raft timings of both clusters: lockd's defaults.
pub const HEARTBEAT_MS: u64 = 40;
pub const ELECTION_MS: u64 = 200;

/// The election timeout this run uses (`--election-ms`, default lockd's).
pub fn election_ms() -> u64 {
    lock_bench::arg("--election-ms", ELECTION_MS)
}

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
    /// Kill → first acquire that started after the kill and succeeded, one
    /// per trial (NaN: none within the window).
    pub trials_ms: Vec<f64>,
    pub median_ms: f64,
    pub max_ms: f64,
    /// Failed client operations, over all trials.
    pub errors: u64,
    /// The last error a client saw, for the report.
    pub sample_error: Option<String>,
}

/// How long after the kill a failover trial waits for service to return.
const FAILOVER_WINDOW: Duration = Duration::from_secs(10);

pub fn measure(runs: &[(Vec<drive::ClientRun>, Duration)]) -> Measured {
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
        p50_ms: lock_bench::percentile_ms(&lat, 0.50),
        p99_ms: lock_bench::percentile_ms(&lat, 0.99),
        p999_ms: lock_bench::percentile_ms(&lat, 0.999),
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
) -> (Vec<drive::ClientRun>, Duration) {
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(seconds);
    let runs = drive::run(
        system,
        endpoints,
        security,
        clients,
        contended,
        until,
        Arc::new(AtomicBool::new(false)),
        drive::Progress::new(),
    )
    .await;
    (runs, start.elapsed())
}

/// One trial: SIGKILL the leader under load from 8 clients; the time to
/// the first acquire that started after the kill and succeeded.
async fn failover_once(
    system: System,
    kill: impl FnOnce(),
    endpoints: Vec<String>,
) -> (f64, u64, Option<String>) {
    let stop = Arc::new(AtomicBool::new(false));
    let progress = drive::Progress::new();
    let until = Instant::now() + Duration::from_secs(60);
    let load = tokio::spawn(drive::run(
        system,
        endpoints,
        drive::Security::default(),
        8,
        false,
        until,
        stop.clone(),
        progress.clone(),
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let killed = Instant::now();
    kill();
    while !progress.succeeded_since(killed) && killed.elapsed() < FAILOVER_WINDOW {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let runs = load.await.expect("the failover load task panicked");
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
    (
        first.map_or(f64::NAN, |d| d.as_secs_f64() * 1e3),
        runs.iter().map(|r| r.errors).sum(),
        runs.iter().find_map(|r| r.last_error.clone()),
    )
}

/// `trials` failovers, each on a fresh 3-member cluster.
fn failover(rt: &tokio::runtime::Runtime, system: System, trials: usize) -> Failover {
    let mut out = Failover {
        system: system.name().into(),
        trials_ms: Vec::new(),
        median_ms: f64::NAN,
        max_ms: f64::NAN,
        errors: 0,
        sample_error: None,
    };
    for _ in 0..trials {
        let (ms, errors, sample) = match system {
            System::Lockd => {
                let mut c =
                    Cluster::start_timed(3, lock_bench::ON_WORLD_0_1, HEARTBEAT_MS, election_ms());
                let leader = c.wait_leader(Duration::from_secs(20));
                let eps = c.endpoints();
                let r = rt.block_on(failover_once(system, || c.kill(leader), eps));
                if std::env::var_os("VS_ETCD_KEEP").is_some() {
                    let dir = std::mem::replace(&mut c.dir, tempfile::tempdir().expect("tempdir"));
                    eprintln!(
                        "trial {:.0} ms, leader {leader}, logs in {}",
                        r.0,
                        dir.keep().display()
                    );
                }
                r
            }
            System::Etcd => {
                let mut e = etcd::EtcdCluster::start(3, HEARTBEAT_MS, election_ms());
                let leader = rt.block_on(e.wait_leader(Duration::from_secs(30)));
                let eps = e.endpoints();
                rt.block_on(failover_once(system, || e.kill(leader), eps))
            }
        };
        eprintln!("failover {}: {ms:.0} ms", system.name());
        out.trials_ms.push(ms);
        out.errors += errors;
        if sample.is_some() {
            out.sample_error = sample;
        }
    }
    let mut sorted: Vec<f64> = out
        .trials_ms
        .iter()
        .map(|v| if v.is_nan() { f64::INFINITY } else { *v })
        .collect();
    sorted.sort_by(|a, b| a.total_cmp(b));
    if !sorted.is_empty() {
        out.median_ms = sorted[sorted.len() / 2];
        out.max_ms = sorted[sorted.len() - 1];
    }
    out
}

fn run_bin(name: &str, args: &[&str]) -> String {
    let exe = std::env::current_exe().expect("current exe");
    let bin = exe.with_file_name(name);
    let out = std::process::Command::new(&bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "run {}: {e} (build it with `cargo build --release -p lock-bench`)",
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

fn main() {
    let seconds: f64 = lock_bench::arg("--seconds", 5.0);
    let rounds: usize = lock_bench::arg("--rounds", 2);
    let out: String = lock_bench::arg("--out", "docs".to_string());
    let skip_extras = lock_bench::flag("--skip-extras");
    let trials: usize = lock_bench::arg("--failover-trials", 5);
    let only_failover = lock_bench::flag("--only-failover");
    lock_bench::ensure_binaries_built();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    if lock_bench::flag("--tls") {
        return tls::run(&rt, seconds, rounds, &out);
    }
    if lock_bench::flag("--recipes") {
        let keepalive_rounds = lock_bench::arg("--keepalive-rounds", 50);
        return recipes::run(&rt, keepalive_rounds, trials, &out);
    }

    if only_failover {
        for system in [System::Lockd, System::Etcd] {
            let f = failover(&rt, system, trials);
            println!(
                "{}: trials {:?} median {:.0} max {:.0}",
                f.system, f.trials_ms, f.median_ms, f.max_ms
            );
        }
        return;
    }
    let lockd = Cluster::start_timed(3, lock_bench::ON_WORLD_0_1, HEARTBEAT_MS, election_ms());
    let lockd_leader = lockd.wait_leader(Duration::from_secs(20));
    let etcd = etcd::EtcdCluster::start(3, HEARTBEAT_MS, election_ms());
    let etcd_leader = rt.block_on(etcd.wait_leader(Duration::from_secs(30)));
    let lockd_eps = lockd.endpoints();
    let etcd_leader_ep = vec![etcd.members[etcd_leader].client_url.clone()];
    eprintln!(
        "lockd leader node {lockd_leader}; etcd leader {}",
        etcd.members[etcd_leader].name
    );

    let workloads = [
        ("1 client", 1usize, false),
        ("64 clients, own keys", 64, false),
        ("16 clients, one key", 16, true),
    ];
    let mut results = Vec::new();
    for (name, clients, contended) in workloads {
        let mut l = Vec::new();
        let mut e = Vec::new();
        for round in 0..rounds {
            let order = if round % 2 == 0 {
                [System::Lockd, System::Etcd]
            } else {
                [System::Etcd, System::Lockd]
            };
            for system in order {
                let eps = match system {
                    System::Lockd => lockd_eps.clone(),
                    System::Etcd => etcd_leader_ep.clone(),
                };
                let plain = drive::Security::default();
                let r = rt.block_on(one_run(system, eps, plain, clients, contended, seconds));
                eprintln!(
                    "{name} round {round} {}: {} cycles",
                    system.name(),
                    r.0.iter().map(|c| c.cycles).sum::<u64>()
                );
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

    // Where lockd's time goes at 64 clients: perf on the machine while the
    // leader serves them (skipped when perf is missing).
    let have_perf = std::process::Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let profile = if have_perf && !lock_bench::flag("--no-profile") {
        let stop = Arc::new(AtomicBool::new(false));
        let load = rt.spawn(drive::run(
            System::Lockd,
            lockd_eps.clone(),
            drive::Security::default(),
            64,
            false,
            Instant::now() + Duration::from_secs(30),
            stop.clone(),
            drive::Progress::new(),
        ));
        std::thread::sleep(Duration::from_millis(1500));
        let pid = lockd.nodes[&lockd_leader]
            .child
            .as_ref()
            .map_or(0, |c| c.id());
        std::fs::create_dir_all(&out).expect("create the output directory");
        let p = profile::record(std::path::Path::new(&out), pid, 4);
        stop.store(true, Ordering::Relaxed);
        let _ = rt.block_on(load);
        match p {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("no profile: {e}");
                None
            }
        }
    } else {
        None
    };
    drop(lockd);
    drop(etcd);
    // Failover: fresh clusters, one trial at a time.
    let lockd_failover = failover(&rt, System::Lockd, trials);
    let etcd_failover = failover(&rt, System::Etcd, trials);

    let (sm, upgrade) = if skip_extras {
        (String::new(), String::new())
    } else {
        (run_bin("sm-bench", &[]), run_bin("upgrade-bench", &[]))
    };
    let failovers = vec![lockd_failover, etcd_failover];
    report::write(
        &out,
        &results,
        &failovers,
        profile.as_ref(),
        &sm,
        &upgrade,
        seconds,
        rounds,
    );
    println!(
        "{}",
        std::fs::read_to_string(format!("{out}/benchmarks.md")).unwrap_or_default()
    );
}
