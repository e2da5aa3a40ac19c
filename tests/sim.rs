//! The deterministic simulation's tests (docs/testing.md, "The
//! simulation"): seeds of mixed faults that must find nothing, a seed that
//! must replay byte for byte, and the negative controls, each caught by
//! its own checker.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use lock_tests::sim::{self, Control, SimConfig, SimReport};

/// Seeds each CI run checks (`LOCKD_SIM_SEEDS` overrides, for a soak use
/// `cargo run --release -p lock-tests --bin simulate`).
const CI_SEEDS: u64 = 200;
/// Seeds a negative control may take to be caught.
const CONTROL_SEEDS: u64 = 20;

fn summary(r: &SimReport) -> String {
    format!(
        "seed {}: {} ops, {} grants, {} fault events, {} takeovers, {} keeper renewals, {:?} simulated",
        r.seed, r.ops, r.granted, r.faults, r.takeovers, r.keeper_renewals, r.simulated
    )
}

/// Run one seed; a panic inside it (the simulator's or the code's) is a
/// violation of that seed, not the end of the other seeds.
fn run_caught(cfg: &SimConfig) -> SimReport {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sim::run(cfg))).unwrap_or_else(|p| {
        let what = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        SimReport::panicked(cfg.seed, what)
    })
}

/// Run `seeds` on every core, and return the reports that found anything.
fn run_seeds(seeds: std::ops::Range<u64>, cfg: impl Fn(u64) -> SimConfig + Sync) -> Vec<SimReport> {
    let next = AtomicU64::new(seeds.start);
    let bad = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= seeds.end {
                    return;
                }
                let r = run_caught(&cfg(seed));
                eprintln!("{}", summary(&r));
                if !r.violations.is_empty() {
                    bad.lock().unwrap_or_else(|p| p.into_inner()).push(r);
                }
            });
        }
    });
    bad.into_inner().unwrap_or_else(|p| p.into_inner())
}

#[test]
fn seeds_of_mixed_faults_find_nothing() {
    let n = std::env::var("LOCKD_SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CI_SEEDS);
    let bad = run_seeds(1..n + 1, SimConfig::seed);
    for r in &bad {
        eprintln!("{}\n  replay: {}", summary(r), r.replay_command());
        for v in r.violations.iter().take(8) {
            eprintln!("  {v}");
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {n} seeds found violations",
        bad.len()
    );
}

#[test]
fn a_seed_replays_byte_for_byte() {
    // Seed 7 runs mutexes on the built-in module; seed 8 is mixed, with a
    // hot upgrade before its clients start.
    for seed in [7, 8] {
        let a = sim::run(&SimConfig::seed(seed));
        let b = sim::run(&SimConfig::seed(seed));
        assert!(a.ops > 50, "the run did something: {}", summary(&a));
        assert_eq!(a.history, b.history, "two runs of seed {seed} differ");
    }
    let (seven, eight) = (sim::run(&SimConfig::seed(7)), sim::run(&SimConfig::seed(8)));
    assert_ne!(seven.history, eight.history, "another seed, another run");
}

#[test]
fn each_negative_control_is_caught_by_its_own_checker() {
    for control in Control::ALL {
        let want = control.caught_by();
        let caught = (1..=CONTROL_SEEDS).find_map(|seed| {
            let r = sim::run(&SimConfig {
                control: Some(control),
                ..SimConfig::seed(seed)
            });
            eprintln!("{control:?}: {}", summary(&r));
            r.violations
                .iter()
                .find(|v| v.checker == want)
                .map(|v| (seed, v.to_string()))
        });
        let Some((seed, what)) = caught else {
            panic!("{control:?} was not caught by {want:?} in {CONTROL_SEEDS} seeds");
        };
        eprintln!("{control:?} caught by {want:?} at seed {seed}: {what}");
    }
}
