//! Lock cycles (acquire + release) on a 3-node cluster of real processes.
//!
//! ```text
//! cargo run --release -p lock-bench --bin lock-bench [-- --seconds 5]
//! ```
//!
//! Starts three `lockd` processes (fsync on) and runs `lockctl bench` against
//! them for each workload: 1 and 64 clients on their own keys, and 16
//! clients contending for one key (every cycle is a handoff). Each client has
//! its own connection over the native protocol.

use std::time::Duration;

use lock_tests::cluster::Cluster;

fn main() {
    let seconds: f64 = lock_bench::arg("--seconds", 5.0);
    lock_bench::ensure_binaries_built();
    let c = Cluster::start(3, &[]);
    c.wait_leader(Duration::from_secs(20));
    println!(
        "3-node cluster (separate processes, fsync on), native protocol, {seconds} s per row\n"
    );
    println!("| clients | keys | cycles/s | acquire p50 ms | p99 ms | p999 ms | errors |");
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for (clients, contended) in [(1, false), (64, false), (16, true)] {
        let mut cmd = c.lockctl();
        cmd.args([
            "--json",
            "bench",
            "--clients",
            &clients.to_string(),
            "--seconds",
            &seconds.to_string(),
        ]);
        if contended {
            cmd.arg("--contended");
        }
        let out = cmd.output().expect("run lockctl bench");
        assert!(
            out.status.success(),
            "lockctl bench failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("bench json");
        println!(
            "| {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {} |",
            clients,
            if contended { "one shared" } else { "own" },
            r["cycles_per_sec"].as_f64().unwrap_or(0.0),
            r["acquire_p50_ms"].as_f64().unwrap_or(0.0),
            r["acquire_p99_ms"].as_f64().unwrap_or(0.0),
            r["acquire_p999_ms"].as_f64().unwrap_or(0.0),
            r["errors"]
        );
    }
}
