//! The deterministic simulation from the command line: replay one seed,
//! run a range of seeds, or soak for a given time.
//!
//! ```sh
//! cargo run --release -p lockd-tests --bin simulate -- --seed 42            # replay one, print its history
//! cargo run --release -p lockd-tests --bin simulate -- --seeds 1..10001     # a range
//! cargo run --release -p lockd-tests --bin simulate -- --minutes 30         # a soak, from a time-derived first seed
//! cargo run --release -p lockd-tests --bin simulate -- --seed 3 --control early-expiry
//! cargo run --release -p lockd-tests --bin simulate -- --seed 42 --trim      # the shortest run that still fails
//! cargo run --release -p lockd-tests --bin simulate -- --seed 42 --duration 3000   # faults for 3 s only
//! cargo run --release -p lockd-tests --bin simulate -- --scenario snapshot-into-partition
//! cargo run --release -p lockd-tests --bin simulate -- --scenario refusal-from-a-cut-off-leader
//! cargo run --release -p lockd-tests --bin simulate -- --scenario leader-restarted-mid-sync
//! ```
//!
//! A scenario is a scripted run (`lockd_tests::sim::scenario`): one fault
//! placed on purpose, and what it measured, with its bound.
//!
//! Trimming: the nemesis draws its faults from the seed in time order,
//! and everything before a moment depends only on the seed, so a run whose
//! faults stop earlier is the same run up to there. `--trim` finds the
//! shortest fault time (in whole seconds) whose run still shows a
//! violation by one of the checkers the full run's did, and prints the
//! command that replays it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context};
use lockd_tests::sim::{self, Control, SimConfig, VIOLATION_LINE};

/// Log lines stamped with the simulation's time (ms), not the machine's.
struct SimTime;

impl tracing_subscriber::fmt::time::FormatTime for SimTime {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        let ms = turmoil::sim_elapsed().map_or(0, |d| d.as_millis());
        write!(w, "{ms:>7}ms")
    }
}

const USAGE: &str =
    "usage: simulate --seed N [--control NAME] [--duration MS]   replay one seed, print its history
       simulate --seed N --trim [--control NAME]  the shortest fault time that still fails
       simulate --seeds A..B [--control NAME]  run seeds A to B-1, a process each
       simulate --minutes N [--control NAME]   run seeds for N minutes
       simulate --scenario snapshot-into-partition|refusal-from-a-cut-off-leader|leader-restarted-mid-sync [--control NAME]   a scripted run";

fn control(name: &str) -> anyhow::Result<Control> {
    Control::named(name).with_context(|| {
        let names: Vec<&str> = Control::ALL.iter().map(|c| c.name()).collect();
        format!("unknown control {name:?}; one of {}", names.join(", "))
    })
}

fn main() -> anyhow::Result<()> {
    // The nodes' logs, on stderr, when asked for (`RUST_LOG=info`).
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_timer(SimTime)
            .with_ansi(false)
            .with_writer(std::io::stderr)
            .init();
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut seeds = None;
    let mut soak = None;
    let mut ctl = None;
    let mut one = None;
    let mut duration = None;
    let mut trim = false;
    let mut scenario = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--seed" => one = Some(value()?.parse::<u64>()?),
            "--seeds" => {
                let v = value()?;
                let (a, b) = v.split_once("..").context("--seeds A..B")?;
                seeds = Some(a.parse::<u64>()?..b.parse::<u64>()?);
            }
            "--minutes" => {
                soak = Some(std::time::Duration::from_secs(
                    60 * value()?.parse::<u64>()?,
                ))
            }
            "--control" => ctl = Some(control(value()?)?),
            "--duration" => duration = Some(std::time::Duration::from_millis(value()?.parse()?)),
            "--trim" => trim = true,
            "--scenario" => scenario = Some(value()?.clone()),
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    let cfg = |seed| {
        let base = SimConfig::seed(seed);
        SimConfig {
            control: ctl,
            duration: duration.unwrap_or(base.duration),
            ..base
        }
    };
    if let Some(name) = scenario {
        return run_scenario(&name, ctl);
    }
    if let (Some(seed), true) = (one, trim) {
        return trim_run(seed, ctl, cfg(seed).duration);
    }
    if let Some(seed) = one {
        let r = sim::run(&cfg(seed));
        print!("{}", r.history);
        for v in &r.violations {
            println!("{VIOLATION_LINE}{v}");
        }
        println!("{}", r.coverage.line());
        println!(
            "seed {seed}: {} ops, {} violations, {:?} simulated",
            r.ops,
            r.violations.len(),
            r.simulated
        );
        return Ok(());
    }
    let started = Instant::now();
    let (range, until) = match (seeds, soak) {
        (Some(r), None) => (r, None),
        (None, Some(d)) => {
            let first = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_secs()
                << 16;
            (first..u64::MAX, Some(started + d))
        }
        _ => bail!("give --seed N, --seeds A..B or --minutes N"),
    };
    let me = std::env::current_exe()?;
    // Every seed's process finds the modules compiled once, here.
    let cache = tempfile::tempdir()?;
    drop(sim::open_module_cache(cache.path()));
    let next = AtomicU64::new(range.start);
    let (done, found) = (AtomicU64::new(0), AtomicU64::new(0));
    // Over every run: how often each mark, and in how many runs.
    let covered = Mutex::new((sim::Coverage::default(), sim::Coverage::default()));
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= range.end || until.is_some_and(|u| Instant::now() >= u) {
                    return;
                }
                let out = match seed_process(&me, seed, ctl, cache.path()).output() {
                    Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
                    Ok(o) => format!(
                        "{VIOLATION_LINE}[Harness] seed {seed} ended with {}: {}",
                        o.status,
                        String::from_utf8_lossy(&o.stderr)
                            .lines()
                            .last()
                            .unwrap_or("")
                    ),
                    Err(e) => {
                        format!("{VIOLATION_LINE}[Harness] cannot run seed {seed}: {e}")
                    }
                };
                done.fetch_add(1, Ordering::Relaxed);
                if let Some(c) = sim::Coverage::read(&out) {
                    let mut all = covered.lock().unwrap_or_else(|p| p.into_inner());
                    all.0.merge(&c);
                    all.1.merge(&c.seen());
                }
                let violations = sim::violations_in(&out);
                if !violations.is_empty() {
                    found.fetch_add(1, Ordering::Relaxed);
                    println!(
                        "seed {seed}: {} violations; replay: {}",
                        violations.len(),
                        sim::replay_command(seed)
                    );
                    for v in violations.iter().take(4) {
                        println!("  {VIOLATION_LINE}{v}");
                    }
                }
            });
        }
    });
    let (all, seen) = covered.into_inner().unwrap_or_else(|p| p.into_inner());
    print!("{}", all.table(&seen, done.load(Ordering::Relaxed)));
    println!(
        "{} seeds in {:.0?}: {} found violations",
        done.load(Ordering::Relaxed),
        started.elapsed(),
        found.load(Ordering::Relaxed)
    );
    if found.load(Ordering::Relaxed) > 0 {
        std::process::exit(1);
    }
    Ok(())
}

/// The process that runs one seed (a process per seed: a run that is
/// not the first of its process may take another path, docs/testing.md,
/// and every seed found must replay with the command printed), finding
/// the modules compiled once in `cache`.
fn seed_process(
    me: &std::path::Path,
    seed: u64,
    ctl: Option<Control>,
    cache: &std::path::Path,
) -> std::process::Command {
    let mut child = std::process::Command::new(me);
    child.args(["--seed", &seed.to_string()]);
    child.env(sim::MODULE_CACHE_VAR, cache);
    if let Some(c) = ctl {
        child.args(["--control", c.name()]);
    }
    child
}

/// The checkers a run of `seed` (faults for `ms`) caught something with,
/// in a process of its own.
fn caught(
    seed: u64,
    ctl: Option<Control>,
    ms: u128,
    cache: &std::path::Path,
) -> anyhow::Result<Vec<String>> {
    let out = seed_process(&std::env::current_exe()?, seed, ctl, cache)
        .args(["--duration", &ms.to_string()])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut checkers: Vec<String> = sim::violations_in(&text)
        .into_iter()
        .filter_map(sim::checker_of)
        .map(str::to_string)
        .collect();
    if !out.status.success() {
        checkers.push("ended abnormally".into());
    }
    checkers.sort();
    checkers.dedup();
    Ok(checkers)
}

/// `--trim`: the shortest fault time, in whole seconds, whose run of
/// `seed` still shows one of the checkers the full run's did.
fn trim_run(seed: u64, ctl: Option<Control>, full: std::time::Duration) -> anyhow::Result<()> {
    let full_ms = full.as_millis();
    // Every run of the search finds the modules compiled once, here.
    let cache = tempfile::tempdir()?;
    drop(sim::open_module_cache(cache.path()));
    let want = caught(seed, ctl, full_ms, cache.path())?;
    if want.is_empty() {
        println!("seed {seed}: nothing found with faults for {full_ms} ms; nothing to trim");
        return Ok(());
    }
    println!("seed {seed}, faults for {full_ms} ms: {}", want.join(", "));
    // Runs are not monotonic in their length, so every second is tried,
    // shortest first; the first that fails is the answer.
    let mut found = full_ms;
    for s in 1..full.as_secs() {
        let ms = u128::from(s) * 1000;
        let got = caught(seed, ctl, ms, cache.path())?;
        let same: Vec<&String> = got.iter().filter(|c| want.contains(c)).collect();
        println!(
            "  faults for {ms} ms: {}",
            if got.is_empty() {
                "clean".to_string()
            } else {
                got.join(", ")
            }
        );
        if !same.is_empty() {
            found = ms;
            break;
        }
    }
    let control = ctl.map_or(String::new(), |c| format!(" --control {}", c.name()));
    println!(
        "trimmed to faults for {found} ms; replay: {} --duration {found}{control}",
        sim::replay_command(seed)
    );
    Ok(())
}

/// Run the scenario `name` and print what it measured; its last line says
/// whether the bound held (`scenario NAME: within` or `: beyond`).
fn run_scenario(name: &str, ctl: Option<Control>) -> anyhow::Result<()> {
    match name {
        "snapshot-into-partition" => snapshot_into_partition(name, ctl),
        "refusal-from-a-cut-off-leader" => refusal_from_a_cut_off_leader(name, ctl),
        "leader-restarted-mid-sync" => leader_restarted_mid_sync(name, ctl),
        _ => bail!(
            "unknown scenario {name:?}; one of snapshot-into-partition, refusal-from-a-cut-off-leader, leader-restarted-mid-sync"
        ),
    }
}

/// Its last line: `scenario NAME: kept`, `: lost (why)`, or `: stopped`
/// (the script could not set the moment up).
fn leader_restarted_mid_sync(name: &str, ctl: Option<Control>) -> anyhow::Result<()> {
    let r = sim::leader_bounce::leader_restarted_mid_sync(ctl);
    println!(
        "leader {} restarted after a grant (token {:?}) its disk had not written",
        r.leader, r.token
    );
    for (id, applied, hash) in &r.states {
        println!("node {id}: applied {applied}, state {hash}");
    }
    println!("a second acquire of the key: {:?}", r.again);
    if let Some(e) = &r.error {
        println!("the script stopped: {e}");
    }
    let verdict = match (&r.error, r.verdict()) {
        (Some(_), _) => "stopped".to_string(),
        (None, Ok(())) => "kept".to_string(),
        (None, Err(e)) => format!("lost ({e})"),
    };
    println!("scenario {name}: {verdict}");
    Ok(())
}

/// Its last line: `scenario NAME: linearizable` or `: not linearizable`.
fn refusal_from_a_cut_off_leader(name: &str, ctl: Option<Control>) -> anyhow::Result<()> {
    let r = sim::stale_leader::refusal_from_a_cut_off_leader(ctl);
    println!("leader {} cut off", r.leader);
    for op in &r.ops {
        println!("{op:?}");
    }
    if let Some(e) = &r.error {
        println!("the script stopped: {e}");
    }
    let verdict = match (&r.error, r.verdict()) {
        (Some(_), _) => "stopped".to_string(),
        (None, Ok(())) => "linearizable".to_string(),
        (None, Err(e)) => format!("not linearizable ({e:?})"),
    };
    println!("scenario {name}: {verdict}");
    Ok(())
}

fn snapshot_into_partition(name: &str, ctl: Option<Control>) -> anyhow::Result<()> {
    let bound = sim::scenario::CATCH_UP_BOUND_MS;
    let r = sim::scenario::snapshot_into_partition(ctl);
    let (l, f, o) = r.nodes;
    println!("leader {l}, follower {f} (sent the snapshot), node {o} cut off at the heal");
    println!("healed at {:.0} ms", r.healed_at);
    let after = |t: Option<f64>| {
        t.map_or("never".into(), |t| {
            format!("{:.0} ms after the heal", t - r.healed_at)
        })
    };
    println!("the follower caught up: {}", after(r.caught_up_at));
    println!("a write committed: {}", after(r.committed_at));
    if let Some(e) = &r.error {
        println!("the script stopped: {e}");
    }
    let within = r.error.is_none()
        && r.caught_up_ms().is_some_and(|ms| ms <= bound)
        && r.committed_at.is_some();
    println!(
        "scenario {name}: {} (bound {bound:.0} ms)",
        if within { "within" } else { "beyond" }
    );
    Ok(())
}
