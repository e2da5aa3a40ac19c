//! Commit throughput and latency of a 3-node cluster on loopback, fsync on.
//!
//! ```text
//! cargo run --release -p lockd-bench --bin cluster-bench [-- --seconds 5 --json]
//! ```
//!
//! Starts three real `lockd` processes (data in a temp dir, every append
//! fsynced), then runs proposers against the leader over HTTP keep-alive
//! connections: each proposer takes its own key and releases it, again and
//! again, so every request is one committed entry. Reported per proposer
//! count (1 and 64): commits per second, commit latency p50/p99 as the
//! client sees it, fsyncs per log entry on the leader and on a follower
//! (a follower's group commit takes it well below 1 once requests overlap;
//! openraft 0.9 fsyncs each leader append on its own), and leader fsyncs per
//! committed command (the proposer puts many commands in one entry).

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use lockd_tests::cluster::Cluster;
use serde::Serialize;
use serde_json::json;

#[derive(Serialize)]
struct Row {
    proposers: usize,
    commits: u64,
    commits_per_sec: f64,
    p50_ms: f64,
    p99_ms: f64,
    leader_fsyncs_per_entry: f64,
    follower_fsyncs_per_entry: f64,
    /// Leader fsyncs per committed command: entries carry batches.
    leader_fsyncs_per_command: f64,
}

fn run(c: &Cluster, leader: u64, follower: u64, proposers: usize, dur: Duration) -> Row {
    let before_l = c.status(leader).expect("status");
    let before_f = c.status(follower).expect("status");
    let addr = c.addr(leader).to_string();
    let barrier = Arc::new(Barrier::new(proposers + 1));
    let handles: Vec<_> = (0..proposers)
        .map(|p| {
            let (addr, barrier) = (addr.clone(), barrier.clone());
            std::thread::spawn(move || {
                let agent = ureq::AgentBuilder::new()
                    .timeout(Duration::from_secs(10))
                    .build();
                let key = format!("bench/{proposers}/{p}");
                let acquire = format!("http://{addr}/v1/locks/{key}/acquire");
                let release = format!("http://{addr}/v1/locks/{key}/release");
                let mut lat = Vec::new();
                barrier.wait();
                let start = Instant::now();
                while start.elapsed() < dur {
                    let t = Instant::now();
                    let r: serde_json::Value = agent
                        .post(&acquire)
                        .send_json(json!({ "lease_ms": 60_000 }))
                        .expect("acquire")
                        .into_json()
                        .expect("json");
                    lat.push(t.elapsed());
                    let token = r["token"].as_u64().expect("token");
                    let t = Instant::now();
                    agent
                        .post(&release)
                        .send_json(json!({ "token": token }))
                        .expect("release");
                    lat.push(t.elapsed());
                }
                lat
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let mut lat: Vec<Duration> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("proposer"))
        .collect();
    let secs = start.elapsed().as_secs_f64();
    lat.sort();
    let after_l = c.status(leader).expect("status");
    let after_f = c.status(follower).expect("status");
    let per_entry = |b: &lockd::api::status::Status, a: &lockd::api::status::Status| {
        (a.wal_fsyncs - b.wal_fsyncs) as f64 / ((a.wal_entries - b.wal_entries).max(1)) as f64
    };
    Row {
        proposers,
        commits: lat.len() as u64,
        commits_per_sec: lat.len() as f64 / secs,
        p50_ms: lockd_bench::percentile(&lat, 0.50).map_or(0.0, |d| d.as_secs_f64() * 1e3),
        p99_ms: lockd_bench::percentile(&lat, 0.99).map_or(0.0, |d| d.as_secs_f64() * 1e3),
        leader_fsyncs_per_entry: per_entry(&before_l, &after_l),
        leader_fsyncs_per_command: (after_l.wal_fsyncs - before_l.wal_fsyncs) as f64
            / (lat.len().max(1)) as f64,
        follower_fsyncs_per_entry: per_entry(&before_f, &after_f),
    }
}

fn main() {
    let json = lockd_bench::flag("--json");
    let seconds: f64 = lockd_bench::arg("--seconds", 5.0);
    let nodes: u64 = lockd_bench::arg("--nodes", 3);
    lockd_bench::ensure_binaries_built();
    let c = Cluster::start(nodes, lockd_bench::ON_WORLD_0_1);
    let leader = c.wait_leader(Duration::from_secs(20));
    let follower = (1..=nodes).find(|i| *i != leader).unwrap_or(leader);
    let dur = Duration::from_secs_f64(seconds);
    // Warm up connections and the page cache.
    run(&c, leader, follower, 4, Duration::from_millis(500));
    let rows: Vec<Row> = [1, 64]
        .into_iter()
        .map(|p| run(&c, leader, follower, p, dur))
        .collect();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).expect("serialise")
        );
        return;
    }
    println!("{nodes}-node cluster on loopback, fsync on, HTTP proposers, {seconds} s per row\n");
    println!("| proposers | commits/s | p50 ms | p99 ms | fsyncs/entry (leader) | fsyncs/entry (follower) | leader fsyncs/command |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {:.0} | {:.2} | {:.2} | {:.3} | {:.3} | {:.3} |",
            r.proposers,
            r.commits_per_sec,
            r.p50_ms,
            r.p99_ms,
            r.leader_fsyncs_per_entry,
            r.follower_fsyncs_per_entry,
            r.leader_fsyncs_per_command
        );
    }
}
