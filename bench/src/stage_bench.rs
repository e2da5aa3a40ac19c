//! Where an acquire's time goes, and what a lock cycle costs, on a 3-node
//! cluster of real processes (docs/performance.md, "Stages" and "Cost").
//!
//! ```text
//! cargo run --release -p lockd-bench --bin stage-bench [-- --seconds 4] [--clients N] [--python PYTHON]
//! ```
//!
//! For 1 and 64 clients on their own keys (or `--clients N` only), over
//! the native protocol and over HTTP (`lockctl bench [--http]`: each client its own connection to
//! the leader), and with `--python` from the Python client too
//! (`bench/python/cycle_bench.py` run by that interpreter, one thread and
//! one kept-alive connection per client), one row each:
//!
//! * **Stages**: the leader's `lockd_stage_seconds` (sum and count) read
//!   before and after the row; the mean of each stage in microseconds.
//!   `receive` is per acquire; the entry's stages (`queue` … `answer`)
//!   are per log entry, which every request in it waits. `service` is the
//!   leader's whole acquire (`lockd_acquire_duration_seconds`, from the
//!   lock service's checks to its answer), so `service` less the entry's
//!   stages is the table's and the answer's own time.
//! * **Cost**: CPU time and context switches of the three processes (every
//!   thread's, from `/proc/PID/task/*/schedstat` and `…/status`), per lock
//!   cycle. Counted, not timed: a busier machine slows a cycle but hardly
//!   changes what it costs (threads that end during a row are not
//!   counted; the node's threads live as long as it does).

use std::path::{Path, PathBuf};
use std::time::Duration;

use lockd_tests::cluster::Cluster;
use lockd_tests::metrics;

const STAGES: [&str; 7] = [
    "receive",
    "queue",
    "append",
    "fsync",
    "replicate",
    "apply",
    "answer",
];

fn main() {
    let seconds: f64 = lockd_bench::arg("--seconds", 4.0);
    let only: usize = lockd_bench::arg("--clients", 0);
    let python: String = lockd_bench::arg("--python", String::new());
    lockd_bench::ensure_binaries_built();
    // Every client comes from loopback: the per-address bounds are raised
    // to the totals, as for any benchmark from one host (docs/configuration.md,
    // "Many clients").
    let c = Cluster::start(3, &lockd_bench::ONE_HOST_BOUNDS);
    let leader = c.wait_leader(Duration::from_secs(20));
    println!("3-node cluster (separate processes, fsync on), world 0.3, {seconds} s per row; means in µs\n");
    let mut head = String::from("| protocol | clients | cycles/s | acquire p50 ms | service |");
    for s in STAGES {
        head.push_str(&format!(" {s} |"));
    }
    head.push_str(" commands per entry | CPU µs per cycle (3 nodes) | leader's | context switches per cycle (3 nodes) | errors |");
    println!("{head}");
    println!("|---|{}", "---:|".repeat(STAGES.len() + 9));
    // 1 and 64 clients by default; `--clients N`: N only (256, 1 024:
    // where many clients' time goes).
    let rows: Vec<usize> = if only == 0 { vec![1, 64] } else { vec![only] };
    let mut drivers = vec![Driver::Native, Driver::Http];
    if !python.is_empty() {
        drivers.push(Driver::Python(PathBuf::from(python)));
    }
    for clients in rows {
        for d in &drivers {
            row(&c, leader, seconds, clients, d);
        }
    }
}

/// What drives a row's clients.
enum Driver {
    /// `lockctl bench`.
    Native,
    /// `lockctl bench --http`.
    Http,
    /// `bench/python/cycle_bench.py`, by this interpreter.
    Python(PathBuf),
}

impl Driver {
    fn name(&self) -> &'static str {
        match self {
            Driver::Native => "native",
            Driver::Http => "HTTP",
            Driver::Python(_) => "Python (HTTP)",
        }
    }

    /// Run `clients` for `seconds` against `c`'s leader; `lockctl --json
    /// bench`'s report.
    fn run(&self, c: &Cluster, leader: u64, clients: usize, seconds: f64) -> serde_json::Value {
        let (n, secs) = (clients.to_string(), seconds.to_string());
        let args = ["--clients", &n, "--seconds", &secs];
        match self {
            Driver::Native => lockd_bench::lockctl_bench(c.lockctl(), &args),
            Driver::Http => {
                lockd_bench::lockctl_bench(c.lockctl(), &[&args[..], &["--http"]].concat())
            }
            Driver::Python(python) => {
                let here = Path::new(env!("CARGO_MANIFEST_DIR"));
                let mut cmd = std::process::Command::new(python);
                cmd.arg(here.join("python/cycle_bench.py"))
                    .args(["--endpoint", &format!("http://{}", c.addr(leader))])
                    .args(args)
                    .env("PYTHONPATH", here.join("../clients/python/src"));
                lockd_bench::json_report(cmd, "the Python benchmark")
            }
        }
    }
}

/// What the leader's metrics and the processes' counters say at a moment.
struct Reading {
    /// (sum s, count) per stage, in [`STAGES`] order.
    stages: Vec<(f64, f64)>,
    /// The leader's granted acquires: (sum s, count).
    service: (f64, f64),
    /// Per node: (CPU ns, context switches).
    procs: Vec<(u64, u64)>,
}

fn read(c: &Cluster, leader: u64) -> Reading {
    let text = c.metrics_text(leader).expect("the leader's metrics");
    let sample = |sel: String| metrics::value(&text, &sel).unwrap_or(0.0);
    let stages = STAGES
        .iter()
        .map(|s| {
            (
                sample(format!("lockd_stage_seconds_sum{{stage=\"{s}\"}}")),
                sample(format!("lockd_stage_seconds_count{{stage=\"{s}\"}}")),
            )
        })
        .collect();
    let service = (
        sample("lockd_acquire_duration_seconds_sum{result=\"granted\"}".into()),
        sample("lockd_acquire_duration_seconds_count{result=\"granted\"}".into()),
    );
    let procs = (1..=3).map(|id| counters(c, id)).collect();
    Reading {
        stages,
        service,
        procs,
    }
}

/// (CPU ns, context switches) of every thread of node `id` now.
fn counters(c: &Cluster, id: u64) -> (u64, u64) {
    let pid = c.nodes[&id].child.as_ref().expect("running").id();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return (0, 0);
    };
    let (mut ns, mut switches) = (0, 0);
    for t in tasks.flatten() {
        let dir = t.path();
        let sched = std::fs::read_to_string(dir.join("schedstat")).unwrap_or_default();
        ns += sched
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        switches += status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>();
    }
    (ns, switches)
}

fn row(c: &Cluster, leader: u64, seconds: f64, clients: usize, driver: &Driver) {
    let before = read(c, leader);
    let r = driver.run(c, leader, clients, seconds);
    let after = read(c, leader);
    let cycles = r["cycles"].as_f64().unwrap_or(0.0).max(1.0);
    let mean = |b: (f64, f64), a: (f64, f64)| {
        let n = a.1 - b.1;
        if n > 0.0 {
            format!("{:.0}", (a.0 - b.0) / n * 1e6)
        } else {
            "–".into()
        }
    };
    let mut line = format!(
        "| {} | {clients} | {:.0} | {:.2} | {} |",
        driver.name(),
        r["cycles_per_sec"].as_f64().unwrap_or(0.0),
        r["acquire_p50_ms"].as_f64().unwrap_or(0.0),
        mean(before.service, after.service),
    );
    for (b, a) in before.stages.iter().zip(&after.stages) {
        line.push_str(&format!(" {} |", mean(*b, *a)));
    }
    // Two commands (acquire, release) per cycle; one `answer` per entry.
    let entries = after.stages[6].1 - before.stages[6].1;
    let per_entry = if entries > 0.0 {
        2.0 * cycles / entries
    } else {
        0.0
    };
    let cpu = |i: usize| (after.procs[i].0 - before.procs[i].0) as f64 / 1e3 / cycles;
    let total_cpu: f64 = (0..3).map(cpu).sum();
    let switches: u64 = (0..3).map(|i| after.procs[i].1 - before.procs[i].1).sum();
    line.push_str(&format!(
        " {per_entry:.1} | {total_cpu:.0} | {:.0} | {:.1} | {} |",
        cpu(leader as usize - 1),
        switches as f64 / cycles,
        r["errors"].as_u64().unwrap_or(0)
    ));
    println!("{line}");
}
