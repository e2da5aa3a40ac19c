//! Leader failover, one system at a time: each trial starts a fresh
//! 3-member cluster, puts it under load from 8 clients on their own keys,
//! SIGKILLs its leader, and measures the time from the kill to the first
//! acquire that started after it and succeeded. Here every client knows
//! every member (etcd's endpoints, ZooKeeper's connect string).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lockd_tests::cluster::Cluster;

use crate::drive::{self, System};
use crate::{election_ms, etcd, zk, HEARTBEAT_MS};

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
pub const FAILOVER_WINDOW: Duration = Duration::from_secs(10);

/// One trial: SIGKILL the leader under load from 8 clients; the time to
/// the first acquire that started after the kill and succeeded.
async fn failover_once(
    system: System,
    kill: impl FnOnce(),
    endpoints: Vec<String>,
) -> (f64, u64, Option<String>) {
    let stop = Arc::new(AtomicBool::new(false));
    let progress = crate::plan::Progress::new();
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

/// One trial of `system` on a fresh cluster. The clusters start on the
/// calling (main) thread: ZooKeeper's JVMs die with the thread that
/// started them.
fn trial(rt: &tokio::runtime::Runtime, system: System) -> (f64, u64, Option<String>) {
    match system {
        // The HTTP clients find the leader once, so a failover of theirs
        // would measure that, not lockd: the native clients' trials stand
        // for both.
        System::Lockd | System::LockdHttp => {
            let mut c =
                Cluster::start_timed(3, lockd_bench::ON_WORLD_0_1, HEARTBEAT_MS, election_ms());
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
        System::Zookeeper => {
            let mut z = zk::ZkEnsemble::start(3, crate::zk_timings());
            let leader = z.wait_leader(Duration::from_secs(60));
            let eps = z.endpoints();
            let r = rt.block_on(failover_once(system, || z.kill(leader), eps));
            if std::env::var_os("VS_ETCD_KEEP").is_some() {
                let dir = std::mem::replace(&mut z.dir, tempfile::tempdir().expect("tempdir"));
                eprintln!(
                    "trial {:.0} ms, leader server {}, logs in {}",
                    r.0,
                    leader + 1,
                    dir.keep().display()
                );
            }
            r
        }
    }
}

/// `trials` failovers, each on a fresh 3-member cluster.
pub fn failover(rt: &tokio::runtime::Runtime, system: System, trials: usize) -> Failover {
    let mut out = Failover {
        system: system.name().into(),
        trials_ms: Vec::new(),
        median_ms: f64::NAN,
        max_ms: f64::NAN,
        errors: 0,
        sample_error: None,
    };
    for _ in 0..trials {
        let (ms, errors, sample) = trial(rt, system);
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
