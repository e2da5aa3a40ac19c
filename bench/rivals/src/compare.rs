//! The side-by-side workloads: one cluster per chosen system, all running
//! at once, each workload run on every system back to back in each round
//! (the order rotating from round to round), then the profile of lockd's
//! leader at 64 clients.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lockd_tests::cluster::Cluster;

use crate::drive::{self, System};
use crate::plan::{ClientRun, Progress};
use crate::{election_ms, etcd, measure, one_run, profile, zk, Workload, HEARTBEAT_MS};

/// The workloads: (name, clients, on one key).
pub const WORKLOADS: [(&str, usize, bool); 5] = [
    ("1 client", 1, false),
    ("64 clients, own keys", 64, false),
    ("256 clients, own keys", 256, false),
    ("1 024 clients, own keys", 1024, false),
    ("16 clients, one key", 16, true),
];

pub struct Compared {
    pub workloads: Vec<Workload>,
    pub profile: Option<profile::Profile>,
}

/// The running clusters, one per chosen system.
struct Clusters {
    lockd: Option<(Cluster, u64)>,
    etcd: Option<etcd::EtcdCluster>,
    zookeeper: Option<zk::ZkEnsemble>,
    /// Where each system's clients connect.
    endpoints: Vec<(System, Vec<String>)>,
}

/// Start a cluster of every system in `systems` and wait for its leader.
/// On the main thread: ZooKeeper's JVMs die with the thread that started
/// them.
fn start(rt: &tokio::runtime::Runtime, systems: &[System]) -> Clusters {
    let mut c = Clusters {
        lockd: None,
        etcd: None,
        zookeeper: None,
        endpoints: Vec::new(),
    };
    for system in systems {
        match system {
            System::Lockd | System::LockdHttp => {
                // One cluster for both protocols.
                if c.lockd.is_none() {
                    let args: Vec<&str> = lockd_bench::ON_WORLD_0_1
                        .iter()
                        .chain(&lockd_bench::ONE_HOST_BOUNDS)
                        .copied()
                        .collect();
                    let l = Cluster::start_timed(3, &args, HEARTBEAT_MS, election_ms());
                    let leader = l.wait_leader(Duration::from_secs(20));
                    eprintln!("lockd leader node {leader}");
                    c.lockd = Some((l, leader));
                }
                if let Some((l, _)) = &c.lockd {
                    c.endpoints.push((*system, l.endpoints()));
                }
            }
            System::Etcd => {
                let e = etcd::EtcdCluster::start(3, HEARTBEAT_MS, election_ms());
                let leader = rt.block_on(e.wait_leader(Duration::from_secs(30)));
                eprintln!("etcd leader {}", e.members[leader].name);
                let ep = e.members[leader].client_url.clone();
                c.endpoints.push((*system, vec![ep]));
                c.etcd = Some(e);
            }
            System::Zookeeper => {
                let z = zk::ZkEnsemble::start(3, crate::zk_timings());
                let leader = z.wait_leader(Duration::from_secs(60));
                eprintln!("zookeeper leader server {}", z.servers[leader].id);
                c.endpoints.push((*system, vec![z.endpoint(leader)]));
                c.zookeeper = Some(z);
            }
        }
    }
    c
}

fn cycles(r: &(Vec<ClientRun>, Duration)) -> u64 {
    r.0.iter().map(|c| c.cycles).sum()
}

/// Warm up, run the workloads, profile lockd's leader; the clusters are
/// gone when this returns.
pub fn run(
    rt: &tokio::runtime::Runtime,
    systems: &[System],
    seconds: f64,
    rounds: usize,
    warmup: f64,
    out: &str,
) -> Compared {
    let clusters = start(rt, systems);
    let targets = &clusters.endpoints;
    let plain = drive::Security::default;
    if warmup > 0.0 {
        for (system, eps) in targets {
            let r = rt.block_on(one_run(*system, eps.clone(), plain(), 64, false, warmup));
            eprintln!("warm-up {}: {} cycles", system.name(), cycles(&r));
        }
    }
    let mut workloads = Vec::new();
    // `--workloads 1024,16`: only the workloads of those client counts.
    let only: String = lockd_bench::arg("--workloads", String::new());
    let chosen = |clients: usize| {
        only.is_empty() || only.split(',').any(|n| n.trim() == clients.to_string())
    };
    for (name, clients, contended) in WORKLOADS.into_iter().filter(|w| chosen(w.1)) {
        let mut runs: Vec<Vec<(Vec<ClientRun>, Duration)>> =
            targets.iter().map(|_| Vec::new()).collect();
        for round in 0..rounds {
            // Round r starts with the r-th system: with two systems, the
            // order alternates.
            for k in 0..targets.len() {
                let t = (k + round) % targets.len();
                let (system, eps) = &targets[t];
                let r = rt.block_on(one_run(
                    *system,
                    eps.clone(),
                    plain(),
                    clients,
                    contended,
                    seconds,
                ));
                eprintln!(
                    "{name} round {round} {}: {} cycles",
                    system.name(),
                    cycles(&r)
                );
                runs[t].push(r);
            }
        }
        let measured: BTreeMap<String, crate::Measured> = targets
            .iter()
            .zip(&runs)
            .map(|((system, _), r)| (system.name().to_string(), measure(r)))
            .collect();
        workloads.push(Workload {
            name: name.into(),
            clients,
            contended,
            measured,
        });
    }
    let profile = clusters
        .lockd
        .as_ref()
        .and_then(|(c, leader)| lockd_profile(rt, c, *leader, out));
    if let Some((c, leader)) = clusters.lockd {
        keep_lockd_logs(c, leader);
    }
    Compared { workloads, profile }
}

/// Say whether lockd's leader changed during the run (it should not: the
/// clients' errors would show it), and with `VS_ETCD_KEEP` keep its
/// nodes' logs.
fn keep_lockd_logs(mut c: Cluster, leader: u64) {
    let now = c.wait_leader(Duration::from_secs(20));
    if now != leader {
        eprintln!("lockd's leader changed during the run: node {leader}, then node {now}");
    }
    if std::env::var_os("VS_ETCD_KEEP").is_some() {
        let dir = std::mem::replace(&mut c.dir, tempfile::tempdir().expect("tempdir"));
        eprintln!("lockd's logs in {}", dir.keep().display());
    }
}

/// Where lockd's time goes at 64 clients: perf on the machine while the
/// leader serves them (skipped when perf is missing or `--no-profile`).
fn lockd_profile(
    rt: &tokio::runtime::Runtime,
    lockd: &Cluster,
    leader: u64,
    out: &str,
) -> Option<profile::Profile> {
    let have_perf = std::process::Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_perf || lockd_bench::flag("--no-profile") {
        return None;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let load = rt.spawn(drive::run(
        System::Lockd,
        lockd.endpoints(),
        drive::Security::default(),
        64,
        false,
        Instant::now() + Duration::from_secs(30),
        stop.clone(),
        Progress::new(),
    ));
    std::thread::sleep(Duration::from_millis(1500));
    let pid = lockd.nodes[&leader].child.as_ref().map_or(0, |c| c.id());
    std::fs::create_dir_all(out).expect("create the output directory");
    let p = profile::record(std::path::Path::new(out), pid, 4);
    stop.store(true, Ordering::Relaxed);
    let _ = rt.block_on(load);
    match p {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("no profile: {e}");
            None
        }
    }
}
