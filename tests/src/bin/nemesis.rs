//! The long fault-injection run: one command, a report.
//!
//! ```text
//! cargo run --release -p lock-tests --bin nemesis -- [--seconds 600] [--nodes 5] [--clients 10] [--keys 3] [--seed 7] [--no-faults | --partitions] [--upgrade-at SECS]
//! ```
//!
//! Prints operations done, faults injected and violations found; exits 1 on
//! any violation.

use std::time::Duration;

use lock_tests::jepsen::run::{run, RunConfig};

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let cfg = RunConfig {
        nodes: arg("--nodes", 5),
        clients: arg("--clients", 10) as usize,
        keys: arg("--keys", 3) as usize,
        duration: Duration::from_secs(arg("--seconds", 600)),
        seed: arg("--seed", 7),
        faults: if std::env::args().any(|a| a == "--no-faults") {
            Vec::new()
        } else if std::env::args().any(|a| a == "--partitions") {
            [
                lock_tests::jepsen::run::ALL_FAULTS.as_slice(),
                lock_tests::jepsen::run::PARTITIONS.as_slice(),
            ]
            .concat()
        } else {
            RunConfig::default().faults
        },
        hosts: std::env::args().any(|a| a == "--partitions"),
        upgrade_at: std::env::args()
            .any(|a| a == "--upgrade-at")
            .then(|| Duration::from_secs(arg("--upgrade-at", 60))),
        ..RunConfig::default()
    };
    println!(
        "nemesis: {} nodes, {} clients, {} keys, {:?}, seed {}",
        cfg.nodes, cfg.clients, cfg.keys, cfg.duration, cfg.seed
    );
    let r = run(cfg);
    println!(
        "operations: {} ({} grants), stale accesses refused by the register: {}",
        r.ops, r.granted, r.rejected_stale
    );
    println!("faults injected: {}", r.faults.len());
    for f in &r.faults {
        println!("  {f}");
    }
    println!("violations: {}", r.violations.len());
    for v in &r.violations {
        println!("  {v}");
    }
    if !r.violations.is_empty() {
        std::process::exit(1);
    }
}
