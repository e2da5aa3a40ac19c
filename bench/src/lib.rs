//! Benchmarks of lockd. Each binary prints a markdown table (`--json` where
//! noted) and says in its doc how to reproduce it.
//!
//! # Layout
//!
//! * `sm-bench`: state-machine apply, native vs wasm.
//! * `cluster-bench`: commit throughput and latency over HTTP, fsyncs per entry.
//! * `lock-bench`: lock cycles over the native protocol (runs `lockctl bench`).
//! * `capacity-bench`: each guest call's fuel and memory on a full lock
//!   table, against the budgets (how the default capacity bounds were
//!   chosen).
//! * `scale-bench`: the cluster beside a big lock table (a million locks):
//!   cycles/s against an empty table, memory per lock, snapshot build,
//!   transfer and install, restart.
//! * `upgrade-bench`: the client-visible pause of a hot upgrade with 100k
//!   held locks, compile included and excluded; with `--isolate`, the cost
//!   of one failing command at 100k and 1M held locks ([`isolate`]).
//! * this library: what the binaries share.

pub mod isolate;

/// The value after `--name` on the command line, or `default`.
pub fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    match args
        .iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
    {
        Some(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}: cannot parse {v:?}")),
        None => default,
    }
}

/// Whether `--name` is on the command line.
pub fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

/// The flags that start a cluster on world 0.1's built-in module, as
/// before world 0.2 was built in: the benchmarks' rows and the figures in
/// docs/ were measured on it (the 0.2 rows upgrade to 0.2 themselves).
pub const ON_WORLD_0_1: &[&str] = &["--initial-module", "world-0.1"];

/// Connection bounds for thousands of clients from one address (a
/// benchmark's, on loopback): the per-address bounds raised to the totals,
/// and 8 192 connections in all (docs/configuration.md, "Many clients").
pub const ONE_HOST_BOUNDS: [&str; 6] = [
    "--max-connections",
    "8192",
    "--max-connections-per-ip",
    "8192",
    "--max-handshakes-per-ip",
    "1024",
];

/// Build the binaries the benchmark starts (`lockd`, and `lockctl` from its
/// own package), unless `LOCKD_BIN` points at a built `lockd` (with
/// `lockctl` beside it).
pub fn ensure_binaries_built() {
    if std::env::var_os("LOCKD_BIN").is_some() {
        return;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let ok = std::process::Command::new(cargo)
        .args([
            "build",
            "--release",
            "-p",
            "lockd",
            "-p",
            "lockctl",
            "--bins",
        ])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "building lockd and lockctl failed");
}

/// The `p` quantile (0..=1) of sorted values, nearest rank; `None` when
/// there are none.
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    Some(sorted[((sorted.len() as f64 - 1.0) * p).round() as usize])
}

/// [`percentile`] of sorted milliseconds, NaN when there are none.
pub fn percentile_ms(sorted: &[f64], p: f64) -> f64 {
    percentile(sorted, p).unwrap_or(f64::NAN)
}

/// Take `locks` locks with a one-hour lease, the `i`th on `key(i)`, with
/// `clients` native clients at once. The guards are dropped without a
/// release: the locks stay held.
pub async fn fill(
    endpoints: Vec<String>,
    locks: usize,
    clients: usize,
    key: impl Fn(usize) -> String + Send + Sync + 'static,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;
    let (next, key) = (Arc::new(AtomicUsize::new(0)), Arc::new(key));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let client = lockd_client::Client::new(endpoints.clone());
        let (next, key) = (next.clone(), key.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= locks {
                    return;
                }
                let k = key(i);
                if let Err(e) = client
                    .acquire_once(&k, Duration::from_secs(3600), Duration::ZERO)
                    .await
                {
                    panic!("filling: acquire {k}: {e}");
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("fill task");
    }
}

/// Raise the cluster's replicated capacity bounds (through `leader`) to
/// `holdings` holdings of keys up to `key_bytes` long: the defaults
/// (100 000 holdings) would refuse a benchmark's own operations.
pub fn raise_capacity(
    c: &lockd_tests::cluster::Cluster,
    leader: u64,
    holdings: u64,
    key_bytes: u64,
) {
    let r = c
        .put(
            leader,
            "/v1/admin/capacity",
            serde_json::json!({ "max_held": holdings, "max_key_bytes": holdings * key_bytes }),
        )
        .expect("capacity");
    assert!(r.ok(), "raising the capacity bounds: {r:?}");
}

/// `lockctl --json bench ARGS` against `c` (as its admin when it is
/// secure, by `cmd`'s credentials): the report, as JSON. Panics when the
/// run fails.
pub fn lockctl_bench(mut cmd: std::process::Command, args: &[&str]) -> serde_json::Value {
    cmd.args(["--json", "bench"]).args(args);
    json_report(cmd, "lockctl bench")
}

/// Run `cmd` (`what`, for the panic) and read the JSON it prints. Panics
/// when it fails.
pub fn json_report(mut cmd: std::process::Command, what: &str) -> serde_json::Value {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what}'s json: {e}"))
}
