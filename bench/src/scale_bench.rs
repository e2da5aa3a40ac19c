//! The scale report: a 3-node cluster serving beside a big lock table.
//!
//! ```text
//! cargo run --release -p lockd-bench --bin scale-bench [-- --locks 1000000 --key-bytes 64]
//!     [--seconds 5] [--rounds 3] [--fill-clients 64]
//! ```
//!
//! Starts three `lockd` processes (fsync on), with a state-call fuel
//! budget and capacity bounds raised to fit the table (the defaults stop
//! at 100 000 holdings and 8 MiB of keys), fills the table with `--locks`
//! one-hour grants of distinct keys of `--key-bytes` bytes, and measures
//! it against an empty table:
//!
//! * lock cycles/s: `lockctl bench` with 64 clients on their own keys,
//!   `--rounds` rounds on the full cluster taking turns with rounds on a
//!   twin cluster with an empty table (the full ÷ empty figure is the
//!   median of the rounds' ratios);
//! * the fill's grants/s (the commit and apply rate of grants into a
//!   growing table);
//! * a status read, which computes the state hash as every audit point
//!   does (median of 50);
//! * the leader's guest memory, and the resident memory of the leader and
//!   of a follower, per held lock;
//! * a snapshot built on request on the leader (`POST /v1/admin/snapshot`);
//! * a fourth node added as a learner: the time until it has caught up
//!   (snapshot transfer and install, then the log after it) and its install;
//! * a follower killed and restarted: the time until it serves its status
//!   and until it has replayed up to the leader's index at the kill.
//!
//! The guest calls themselves on a table this size are in
//! `capacity-bench --locks N --key-bytes L --fuel-per-state-call F`.

use std::time::{Duration, Instant};

use lockd_bench::arg;
use lockd_tests::cluster::{free_port, Cluster};
use serde_json::json;

/// Enough for `restore` of a few million locks (the default, 5e10, stops
/// near a million short keys: see `docs/capacity.md`).
const FLAGS: &[&str] = &[
    "--fuel-per-state-call",
    "1000000000000",
    // As the figures in docs/ were measured (lockd_bench::ON_WORLD_0_1).
    "--initial-module",
    "world-0.1",
];

fn key(i: usize, len: usize) -> String {
    let mut k = format!("held/{i:09}/");
    while k.len() < len {
        k.push('x');
    }
    k
}

/// Lock cycles/s of one `lockctl bench` run, 64 clients on their own keys.
fn cycles(c: &Cluster, seconds: f64) -> f64 {
    let out = c
        .lockctl()
        .args([
            "--json",
            "bench",
            "--clients",
            "64",
            "--seconds",
            &seconds.to_string(),
        ])
        .output()
        .expect("run lockctl bench");
    assert!(
        out.status.success(),
        "lockctl bench: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("bench json");
    assert_eq!(r["errors"], 0, "{r}");
    r["cycles_per_sec"].as_f64().expect("cycles_per_sec")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    lockd_bench::percentile_ms(&v, 0.5)
}

/// Median time of a full status read (state hash included), ms.
fn status_ms(c: &Cluster, id: u64) -> f64 {
    median(
        (0..50)
            .map(|_| {
                let t = Instant::now();
                c.status(id).expect("status");
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    )
}

/// The resident memory of node `id`'s process, bytes.
fn rss(c: &Cluster, id: u64) -> u64 {
    let pid = c.nodes[&id].child.as_ref().expect("running").id();
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Wait until node `id` has applied `index`; the time it took.
fn until_applied(c: &Cluster, id: u64, index: u64, since: Instant) -> Duration {
    loop {
        if c.status(id).is_some_and(|s| s.applied_index >= index) {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < Duration::from_secs(600),
            "node {id} did not reach {index}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn main() {
    let locks: usize = arg("--locks", 1_000_000);
    let key_bytes: usize = arg("--key-bytes", 64);
    let seconds: f64 = arg("--seconds", 5.0);
    let rounds: usize = arg("--rounds", 3);
    let fill_clients: usize = arg("--fill-clients", 64);
    lockd_bench::ensure_binaries_built();
    // `--snapshot-threshold N`: lockd's flag, for both clusters (default:
    // lockd's own).
    let threshold: String = arg("--snapshot-threshold", String::new());
    let mut flags = FLAGS.to_vec();
    if !threshold.is_empty() {
        flags.extend(["--snapshot-threshold", threshold.as_str()]);
    }
    let mut c = Cluster::start(3, &flags);
    let leader = c.wait_leader(Duration::from_secs(20));
    lockd_bench::raise_capacity(&c, leader, locks as u64 + 100_000, key_bytes as u64 + 64);

    let empty_mem = c.status(leader).expect("status").guest_memory_bytes;
    let empty_rss = rss(&c, leader);
    let other = (1..=3).find(|id| *id != leader).expect("follower");
    let empty_rss_follower = rss(&c, other);

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let t = Instant::now();
    rt.block_on(lockd_bench::fill(
        c.endpoints(),
        locks,
        fill_clients,
        move |i| key(i, key_bytes),
    ));
    let fill_secs = t.elapsed().as_secs_f64();
    c.wait_converged(Duration::from_secs(600));

    // The empty table is a twin cluster beside this one, its rounds taking
    // turns with the full one's: the machine's drift between rounds
    // (±10 % here) falls on both alike.
    let twin = Cluster::start(3, &flags);
    let twin_leader = twin.wait_leader(Duration::from_secs(20));
    let snaps = |c: &Cluster| -> Vec<(u64, u64)> {
        (1..=3)
            .map(|id| {
                let s = c.status(id).expect("status");
                (s.snapshots_built, s.snapshots_installed)
            })
            .collect()
    };
    let snaps_before = snaps(&c);
    let (mut empty, mut full) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        empty.push(cycles(&twin, seconds));
        full.push(cycles(&c, seconds));
    }
    let snaps_during: Vec<(u64, u64)> = snaps(&c)
        .iter()
        .zip(&snaps_before)
        .map(|(a, b)| (a.0 - b.0, a.1 - b.1))
        .collect();
    let (empty_status, full_status) = (status_ms(&twin, twin_leader), status_ms(&c, leader));
    drop(twin);
    let st = c.status(leader).expect("status");
    assert!(st.locks_held >= locks as u64, "{st:?}");
    let (full_mem, full_rss) = (st.guest_memory_bytes, rss(&c, leader));
    let full_rss_follower = rss(&c, other);

    let snap = c
        .post(leader, "/v1/admin/snapshot", json!({}))
        .expect("snapshot");
    assert!(snap.ok(), "{snap:?}");

    // A learner joins: the leader's snapshot, then the log after it.
    let target = c.status(leader).expect("status").applied_index;
    let addr = format!("127.0.0.1:{}", free_port());
    c.add_proc(4, addr.clone(), &["--join"]);
    c.spawn(4);
    c.wait_up(4, Duration::from_secs(20));
    let t = Instant::now();
    let r = c
        .post(leader, "/v1/members/add", json!({ "id": 4, "addr": addr }))
        .expect("add");
    assert!(r.ok(), "{r:?}");
    let join = until_applied(&c, 4, target, t);
    let learner = c.status(4).expect("status");

    // A follower restarts: its own snapshot, then its log.
    let follower = (1..=3).find(|id| *id != leader).expect("follower");
    let target = c.status(leader).expect("status").applied_index;
    until_applied(&c, follower, target, Instant::now());
    let own_snapshot = c.status(follower).expect("status").snapshot_index;
    c.kill(follower);
    let t = Instant::now();
    c.spawn(follower);
    c.wait_up(follower, Duration::from_secs(600));
    let up = t.elapsed();
    let replayed = until_applied(&c, follower, target, t);

    let per_lock = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / locks as f64;
    println!("## {locks} held locks, {key_bytes}-byte keys (3 nodes, fsync on)\n");
    println!("| measure | empty table | full table | full ÷ empty |");
    println!("|---|---:|---:|---:|");
    let (e, f) = (median(empty.clone()), median(full.clone()));
    let ratios: Vec<f64> = full.iter().zip(&empty).map(|(f, e)| f / e).collect();
    println!(
        "| lock cycles/s, 64 clients (median of {rounds} alternating rounds: {empty:.0?} / {full:.0?}; ratios {ratios:.2?}) | {e:.0} | {f:.0} | {:.2} |",
        median(ratios.clone())
    );
    println!(
        "| status read with the state hash, ms (median of 50) | {empty_status:.2} | {full_status:.2} | {:.2} |",
        full_status / empty_status
    );
    println!(
        "| leader guest memory (high-water mark), MiB | {:.1} | {:.1} | |",
        empty_mem as f64 / 1048576.0,
        full_mem as f64 / 1048576.0
    );
    println!(
        "| leader resident memory, MiB | {:.1} | {:.1} | |",
        empty_rss as f64 / 1048576.0,
        full_rss as f64 / 1048576.0
    );
    println!(
        "| a follower's resident memory, MiB | {:.1} | {:.1} | |",
        empty_rss_follower as f64 / 1048576.0,
        full_rss_follower as f64 / 1048576.0
    );
    println!();
    println!("| measure | value |");
    println!("|---|---:|");
    println!(
        "| fill: {locks} grants by {fill_clients} clients, grants/s | {:.0} |",
        locks as f64 / fill_secs
    );
    println!(
        "| guest memory per held lock (high-water mark: snapshot builds included), bytes | {:.0} |",
        per_lock(empty_mem, full_mem)
    );
    println!(
        "| resident memory per held lock (leader process), bytes | {:.0} |",
        per_lock(empty_rss, full_rss)
    );
    println!(
        "| resident memory per held lock (a follower), bytes | {:.0} |",
        per_lock(empty_rss_follower, full_rss_follower)
    );
    println!(
        "| snapshots built / installed during the full table's rounds, nodes 1–3 | {snaps_during:?} |"
    );
    println!(
        "| snapshot: size, MiB | {:.1} |",
        snap.body["bytes"].as_f64().unwrap_or(0.0) / 1048576.0
    );
    println!(
        "| snapshot build on the leader (guest call, encoding, fsync), ms | {} |",
        snap.body["build_ms"]
    );
    println!(
        "| learner added until caught up (snapshot transfer and install, then the log), ms | {} |",
        join.as_millis()
    );
    println!(
        "| of which the learner's install (decode, restore, fsync), ms | {} |",
        learner.last_snapshot_install_ms
    );
    println!(
        "| follower restart: process start until status answers, ms | {} |",
        up.as_millis()
    );
    println!(
        "| follower restart: until applied to index {target} (its snapshot at {}), ms | {} |",
        own_snapshot.unwrap_or(0),
        replayed.as_millis()
    );
}
