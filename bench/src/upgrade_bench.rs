//! The client-visible pause of a hot upgrade with many held locks.
//!
//! ```text
//! cargo run --release -p lockd-bench --bin upgrade-bench [-- --locks 100000 --clients 8 --seconds 4]
//! ```
//!
//! Starts three `lockd` processes (fsync on), takes `--locks` locks with a
//! long lease (they stay held through everything), then keeps `--clients`
//! clients doing acquire/release cycles on their own keys over the native
//! protocol while two upgrades happen:
//!
//! 1. **compile included**: to a module no node has compiled yet (the
//!    chaos fixture: version 1's logic built as another component), with
//!    the leader's dry run skipped — the entry reaches every node's apply
//!    while its compilation (started at append) is still running, so the
//!    swap waits for the compiler;
//! 2. **compile excluded**: to version 2 (snapshot format 2, so `restore`
//!    migrates every lock) through the normal route — the leader compiles
//!    and dry-runs before proposing, the followers compile at append (a
//!    rollback by the version order: the chaos fixture's is higher).
//!
//! For each, it prints acquire latency p50/p99/max over the steady second
//! before the upgrade and over the second from the moment it was
//! submitted, and the swap's duration as each node measured it at apply.
//!
//! First, in this process and without a cluster, it times the steps of the
//! same migration on a table of `--locks` locks: compiling version 2, the
//! old module's `snapshot`, the new one's `restore` (with the checks), and
//! the state hash recorded at the swap.
//!
//! `upgrade-bench --isolate` prints instead what one command the module
//! fails on costs with 100 000 and 1 000 000 locks held (trap isolation).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lockd_client::Client;
use lockd_tests::cluster::Cluster;
use lockd_tests::fixtures::{CHAOS_GUEST, LOCK_SM_WORLD01_V2};

#[derive(Clone, Copy)]
struct Sample {
    start: Instant,
    latency: Duration,
}

fn window(samples: &[Sample], from: Instant, to: Instant) -> (usize, f64, f64, f64) {
    let mut ms: Vec<f64> = samples
        .iter()
        .filter(|s| s.start >= from && s.start < to)
        .map(|s| s.latency.as_secs_f64() * 1e3)
        .collect();
    ms.sort_by(|a, b| a.total_cmp(b));
    (
        ms.len(),
        lockd_bench::percentile_ms(&ms, 0.5),
        lockd_bench::percentile_ms(&ms, 0.99),
        ms.last().copied().unwrap_or(f64::NAN),
    )
}

async fn cycles(
    endpoints: Vec<String>,
    id: usize,
    stop: Arc<AtomicBool>,
    out: Arc<Mutex<Vec<Sample>>>,
    errors: Arc<Mutex<Vec<String>>>,
) {
    let client = Client::new(endpoints);
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let key = format!("cycle/{id}/{}", n % 4);
        n += 1;
        let start = Instant::now();
        match client
            .acquire_once(&key, Duration::from_secs(30), Duration::ZERO)
            .await
        {
            Ok(g) => {
                out.lock().expect("samples").push(Sample {
                    start,
                    latency: start.elapsed(),
                });
                if let Err(e) = g.release().await {
                    errors
                        .lock()
                        .expect("errors")
                        .push(format!("release {key}: {e}"));
                }
            }
            Err(e) => errors
                .lock()
                .expect("errors")
                .push(format!("acquire {key}: {e}")),
        }
    }
}

/// The swap's steps in this process, median of five, in ms.
fn breakdown(locks: usize) {
    use lockd_core::command::Command;
    use lockd_core::engine::{EngineSettings, WasmEngine};
    let engine = WasmEngine::new(EngineSettings::default(), None).expect("engine");
    let v1 = engine.load(lockd_core::builtin::LOCK_SM).expect("v1");
    let mut old = engine.instantiate(&v1).expect("instance");
    for chunk in (0..locks).collect::<Vec<_>>().chunks(4096) {
        let batch: Vec<Command> = chunk
            .iter()
            .map(|i| Command::grant(format!("held/{i:06}"), 3_600_000))
            .collect();
        old.apply(&[batch]).expect("fill");
    }
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let mut rows: Vec<[f64; 4]> = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let v2 = engine.load(LOCK_SM_WORLD01_V2).expect("v2");
        let compile = ms(t);
        let t = Instant::now();
        let (state, stats) = lockd_core::upgrade::capture(&mut old, v2.world()).expect("capture");
        let snapshot = ms(t);
        let t = Instant::now();
        let mut m = lockd_core::upgrade::migrate(&engine, &v2, &state, &stats).expect("migrate");
        let restore = ms(t);
        let t = Instant::now();
        m.instance.state_hash().expect("hash");
        let hash = ms(t);
        rows.push([compile, snapshot, restore, hash]);
    }
    let median = |k: usize| {
        let mut v: Vec<f64> = rows.iter().map(|r| r[k]).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let (compile, snapshot, restore, hash) = (median(0), median(1), median(2), median(3));
    println!("Swap steps in one process, {locks} locks, version 1 → 2 (median of 5):\n");
    println!("| compile v2 ms | old snapshot ms | new restore + checks ms | state hash ms | swap, compile excluded ms | swap, compile included ms |");
    println!("|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {compile:.1} | {snapshot:.1} | {restore:.1} | {hash:.1} | {:.1} | {:.1} |\n",
        snapshot + restore + hash,
        compile + snapshot + restore + hash
    );
}

fn main() {
    if lockd_bench::flag("--isolate") {
        lockd_bench::isolate::table(&[100_000, 1_000_000]);
        return;
    }
    let locks: usize = lockd_bench::arg("--locks", 100_000);
    let clients: usize = lockd_bench::arg("--clients", 8);
    let seconds: f64 = lockd_bench::arg("--seconds", 4.0);
    breakdown(locks);
    lockd_bench::ensure_binaries_built();
    let c = Cluster::start(3, lockd_bench::ON_WORLD_0_1);
    let leader = c.wait_leader(Duration::from_secs(20));
    // Room for the held locks and the clients' own keys: the default
    // bound (100 000 holdings) would refuse the cycles of a 100 000-lock run.
    lockd_bench::raise_capacity(&c, leader, (locks + clients * 4) as u64 + 1_000, 64);
    let endpoints = c.endpoints();
    let rt = tokio::runtime::Runtime::new().expect("runtime");

    let t = Instant::now();
    rt.block_on(lockd_bench::fill(endpoints.clone(), locks, 64, |i| {
        format!("held/{i:06}")
    }));
    let fill_s = t.elapsed().as_secs_f64();
    let st = c.status(leader).expect("status");
    assert_eq!(st.locks_held as usize, locks, "locks held after filling");
    println!(
        "3-node cluster (separate processes, fsync on); {locks} locks held (taken in {fill_s:.1} s); {clients} clients cycling on their own keys\n"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(Mutex::new(Vec::new()));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let tasks: Vec<_> = (0..clients)
        .map(|i| {
            rt.spawn(cycles(
                endpoints.clone(),
                i,
                stop.clone(),
                samples.clone(),
                errors.clone(),
            ))
        })
        .collect();
    let settle = Duration::from_secs_f64(seconds);
    let mut marks = Vec::new();
    for (name, module, path) in [
        (
            "compile included",
            CHAOS_GUEST,
            "/v1/admin/upgrade?precheck=false",
        ),
        // The chaos fixture names a version above every real one (leaving
        // it is a rollback, which the version order requires to be said).
        (
            "compile excluded",
            LOCK_SM_WORLD01_V2,
            "/v1/admin/upgrade?rollback=true",
        ),
    ] {
        std::thread::sleep(settle);
        let submitted = Instant::now();
        let r = c.post_bytes(leader, path, module).expect("upgrade request");
        let answered = submitted.elapsed();
        assert_eq!(r.status, 200, "{name}: {r:?}");
        marks.push((name, submitted, answered, r.body));
    }
    std::thread::sleep(settle);
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        rt.block_on(t).expect("client task");
    }
    let errors = errors.lock().expect("errors").clone();
    let samples = samples.lock().expect("samples").clone();
    let statuses: Vec<_> = (1..=3).map(|id| c.status(id).expect("status")).collect();

    println!("| upgrade | window | acquires | p50 ms | p99 ms | max ms |");
    println!("|---|---|---:|---:|---:|---:|");
    let second = Duration::from_secs(1);
    for (name, submitted, _, _) in &marks {
        let steady = window(
            &samples,
            *submitted - second - Duration::from_millis(500),
            *submitted - Duration::from_millis(500),
        );
        let around = window(&samples, *submitted, *submitted + second);
        for (label, w) in [
            ("steady second before", steady),
            ("second from submit", around),
        ] {
            println!(
                "| {name} | {label} | {} | {:.2} | {:.2} | {:.2} |",
                w.0, w.1, w.2, w.3
            );
        }
    }
    println!();
    println!("| upgrade | answered after ms | leader compile ms (dry run) | leader migrate ms (dry run) | swap at apply ms, node 1 / 2 / 3 |");
    println!("|---|---:|---:|---:|---|");
    for (name, _, answered, body) in &marks {
        let index = body["index"].as_u64().unwrap_or(0);
        let swaps: Vec<String> = statuses
            .iter()
            .map(|s| {
                s.upgrades
                    .iter()
                    .find(|u| u.index == index)
                    .map_or("-".into(), |u| format!("{:.1}", u.swap_us as f64 / 1e3))
            })
            .collect();
        let us = |k: &str| {
            body[k]
                .as_u64()
                .map_or("-".into(), |v| format!("{:.1}", v as f64 / 1e3))
        };
        println!(
            "| {name} | {:.1} | {} | {} | {} |",
            answered.as_secs_f64() * 1e3,
            us("precheck_compile_us"),
            us("precheck_migrate_us"),
            swaps.join(" / ")
        );
    }
    println!("\nclient errors: {}", errors.len());
    for e in errors.iter().take(10) {
        println!("  {e}");
    }
    assert!(
        statuses.iter().all(|s| s.locks_held as usize >= locks),
        "the held locks survived both migrations"
    );
    // A pause measured over refused operations measures nothing.
    assert!(
        errors.is_empty(),
        "{} client operations failed (first: {:?}): the figures above do not measure a swap",
        errors.len(),
        errors.first()
    );
}
