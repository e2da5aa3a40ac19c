//! The long fault-injection run: one command, a report.
//!
//! ```text
//! cargo run --release -p lockd-tests --bin nemesis -- [--seconds 600] [--nodes 5] [--clients 10] [--keys 3] [--seed 7] [--no-faults | --partitions] [--exclusive | --upgrade-at SECS] [--broken early-expiry|double-grant] [--plaintext]
//! ```
//!
//! Prints operations done, faults injected and violations found; exits 1 on
//! any violation. The clients are mixed (mutexes, readers and writers,
//! semaphore slots, on the 0.2 module) unless `--exclusive` or
//! `--upgrade-at` (whose version 2 is of world 0.1) asks for mutexes only. `--broken` turns one of the test-only lease
//! faults on, to watch the checkers catch it. Nodes and
//! clients speak TLS with authentication on unless `--plaintext`.

use std::time::Duration;

use lockd_tests::jepsen::{run, RunConfig, Server, ALL_FAULTS, PARTITIONS};

fn value(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn arg(name: &str, default: u64) -> u64 {
    value(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

fn main() {
    let server = value("--broken").map(|b| {
        let var = match b.as_str() {
            "early-expiry" => ("LOCKD_FAULT_EARLY_EXPIRY", "1"),
            "double-grant" => ("LOCKD_FAULT_DOUBLE_GRANT", "25"),
            other => {
                eprintln!("nemesis: --broken takes early-expiry or double-grant, not {other}");
                std::process::exit(2);
            }
        };
        Server {
            bin: lockd_tests::cluster::fault_binary(),
            env: vec![(var.0.into(), var.1.into())],
        }
    });
    let upgrade_at = flag("--upgrade-at").then(|| Duration::from_secs(arg("--upgrade-at", 60)));
    let cfg = RunConfig {
        nodes: arg("--nodes", 5),
        clients: arg("--clients", 10) as usize,
        keys: arg("--keys", 3) as usize,
        duration: Duration::from_secs(arg("--seconds", 600)),
        seed: arg("--seed", 7),
        faults: if flag("--no-faults") {
            Vec::new()
        } else if flag("--partitions") {
            [ALL_FAULTS.as_slice(), PARTITIONS.as_slice()].concat()
        } else {
            RunConfig::default().faults
        },
        hosts: flag("--partitions"),
        upgrade_at,
        mixed: !flag("--exclusive") && upgrade_at.is_none(),
        server,
        secure: !flag("--plaintext"),
        ..RunConfig::default()
    };
    println!(
        "nemesis: {} nodes, {} clients ({}), {} keys, {:?}, seed {}, {}",
        cfg.nodes,
        cfg.clients,
        if cfg.mixed { "mixed" } else { "mutexes only" },
        cfg.keys,
        cfg.duration,
        cfg.seed,
        if cfg.secure {
            "TLS and authentication"
        } else {
            "plaintext"
        }
    );
    let r = run(cfg);
    println!(
        "operations: {} ({} grants), stale accesses refused by the register: {}",
        r.ops, r.granted, r.rejected_stale
    );
    println!(
        "leader changes seen: {}, keeper renewals: {}, ledger keys checked: {}",
        r.leader_changes, r.keeper_renewals, r.ledger_keys
    );
    println!(
        "most holders of one key at once: {} readers, {} semaphore slots",
        r.most_readers, r.most_slots
    );
    println!("faults injected: {}", r.faults.len());
    for e in &r.faults {
        println!(
            "  {:>8.0} ms {:?}: {} (term {} -> {})",
            e.from, e.fault, e.what, e.term_before, e.term_after
        );
    }
    println!("violations: {}", r.violations.len());
    for v in &r.violations {
        println!("  {v}");
    }
    if !r.violations.is_empty() {
        std::process::exit(1);
    }
}
