//! Lock cycles (acquire + release) on a 3-node cluster of real processes.
//!
//! ```text
//! cargo run --release -p lockd-bench --bin lock-bench [-- --seconds 5] [--clients N]
//! ```
//!
//! `--clients N` keeps only the rows with N clients (for rounds short
//! enough that the machine does not drift within one).
//!
//! `--alternate N`: the two modules side by side on one cluster instead.
//! N rounds of the three exclusive rows on the 0.1 module, an upgrade to
//! the 0.2 module, the same rows, and a downgrade back (the 0.2 module's
//! downgrade snapshot: the state then holds only exclusive locks). The
//! modules take turns on the same processes, log and machine state, so
//! neither is measured only later in the run than the other.
//!
//! `--tls N`: the cost of TLS and authentication, side by side. Two
//! clusters run at once, one in the clear and one with TLS and an auth
//! file (`lockd_tests::secure`: `lockctl bench` as the admin, by client
//! certificate); N rounds of the three exclusive rows, each row on one
//! cluster then the other (which goes first alternates), then the ratio
//! TLS ÷ plaintext per row: the median of the rounds' ratios.
//!
//! `--pick N`: the cost of the election policy, side by side. Two
//! clusters run at once, one on the built-in module of world 0.3 (FIFO,
//! never asked) and one on world 0.4's (its `pick` asked at every
//! handoff); N rounds of 16 clients contending for one key (every cycle a
//! handoff, up to 15 waiting), each round on one cluster then the other
//! (which goes first alternates), then the ratio 0.4 ÷ 0.3: the median of
//! the rounds' ratios.
//!
//! Starts three `lockd` processes (fsync on) and runs `lockctl bench` against
//! them for each workload: 1 and 64 clients on their own keys, and 16
//! clients contending for one key (every cycle is a handoff), on the
//! built-in module (world 0.1). Then the same cluster is upgraded live to
//! the reference module of world 0.2 and measured again: the same three
//! exclusive rows, then 16 clients on one semaphore of 3 slots and on one
//! readers lock of 4 readers (every cycle a handoff of a slot). Each client
//! has its own connection over the native protocol.

use std::time::Duration;

use lockd_tests::cluster::Cluster;
use lockd_tests::fixtures::LOCK_SM_WORLD02;

fn main() {
    let seconds: f64 = lockd_bench::arg("--seconds", 5.0);
    let only: usize = lockd_bench::arg("--clients", 0);
    let kept = |clients: usize| only == 0 || only == clients;
    lockd_bench::ensure_binaries_built();
    let tls_rounds: usize = lockd_bench::arg("--tls", 0);
    if tls_rounds > 0 {
        return tls_against_plaintext(seconds, tls_rounds, &kept);
    }
    let pick_rounds: usize = lockd_bench::arg("--pick", 0);
    if pick_rounds > 0 {
        return pick_against_fifo(seconds, pick_rounds);
    }
    let c = Cluster::start(3, lockd_bench::ON_WORLD_0_1);
    c.wait_leader(Duration::from_secs(20));
    println!(
        "3-node cluster (separate processes, fsync on), native protocol, {seconds} s per row\n"
    );
    println!("| module | clients | keys | lock | cycles/s | acquire p50 ms | p99 ms | p999 ms | errors |");
    println!("|---|---:|---|---|---:|---:|---:|---:|---:|");
    let exclusive = [
        (1, false, "exclusive", 1),
        (64, false, "exclusive", 1),
        (16, true, "exclusive", 1),
    ];
    for (clients, contended, mode, limit) in exclusive {
        if kept(clients) {
            row(&c, "0.1", seconds, clients, contended, mode, limit);
        }
    }
    let rounds: usize = lockd_bench::arg("--alternate", 0);
    for _ in 0..rounds {
        swap(&c, LOCK_SM_WORLD02);
        for (clients, contended, mode, limit) in exclusive {
            if kept(clients) {
                row(&c, "0.2", seconds, clients, contended, mode, limit);
            }
        }
        swap(&c, lockd_core::builtin::LOCK_SM);
        for (clients, contended, mode, limit) in exclusive {
            if kept(clients) {
                row(&c, "0.1", seconds, clients, contended, mode, limit);
            }
        }
    }
    swap(&c, LOCK_SM_WORLD02);
    let kinds = [(16, true, "exclusive", 3), (16, true, "shared", 4)];
    for (clients, contended, mode, limit) in exclusive.into_iter().chain(kinds) {
        if kept(clients) {
            row(&c, "0.2", seconds, clients, contended, mode, limit);
        }
    }
}

/// The three exclusive rows on a plaintext and a secure cluster, taking
/// turns, and TLS ÷ plaintext per row.
fn tls_against_plaintext(seconds: f64, rounds: usize, kept: &dyn Fn(usize) -> bool) {
    let plain = Cluster::start(3, lockd_bench::ON_WORLD_0_1);
    let secure = Cluster::start_secure(3, lockd_bench::ON_WORLD_0_1);
    plain.wait_leader(Duration::from_secs(20));
    secure.wait_leader(Duration::from_secs(20));
    println!("two 3-node clusters (separate processes, fsync on), native protocol, {seconds} s per row; TLS: rustls, client certificate, auth file on\n");
    println!("| round | transport | clients | keys | cycles/s | acquire p50 ms | p99 ms | p999 ms | errors |");
    println!("|---:|---|---:|---|---:|---:|---:|---:|---:|");
    let rows = [(1, false), (64, false), (16, true)];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); rows.len()];
    for round in 1..=rounds {
        for (i, (clients, contended)) in rows.iter().copied().enumerate() {
            if !kept(clients) {
                continue;
            }
            let mut order = [("plaintext", &plain), ("TLS", &secure)];
            if round % 2 == 0 {
                order.reverse();
            }
            let mut got = [0.0f64; 2];
            for (name, c) in order {
                let r = measure(c, seconds, clients, contended, "exclusive", 1);
                let keys = if contended { "one shared" } else { "own" };
                println!("| {round} | {name} | {clients} | {keys} | {} |", r.cells());
                got[usize::from(name == "TLS")] = r.cycles;
            }
            if got[0] > 0.0 {
                ratios[i].push(got[1] / got[0]);
            }
        }
    }
    println!("\n| clients | keys | TLS ÷ plaintext (median of {rounds} rounds) | rounds |");
    println!("|---:|---|---:|---|");
    for ((clients, contended), mut r) in rows.into_iter().zip(ratios) {
        if r.is_empty() {
            continue;
        }
        r.sort_by(f64::total_cmp);
        let each: Vec<String> = r.iter().map(|x| format!("{x:.2}")).collect();
        println!(
            "| {clients} | {} | {:.2} | {} |",
            if contended { "one shared" } else { "own" },
            lockd_bench::percentile(&r, 0.5).unwrap_or(f64::NAN),
            each.join(", ")
        );
    }
}

/// The contended row on a 0.3 and a 0.4 cluster, taking turns, and
/// 0.4 ÷ 0.3.
fn pick_against_fifo(seconds: f64, rounds: usize) {
    let fifo = Cluster::start(3, &["--initial-module", "world-0.3"]);
    let pick = Cluster::start(3, &["--initial-module", "world-0.4"]);
    fifo.wait_leader(Duration::from_secs(20));
    pick.wait_leader(Duration::from_secs(20));
    println!("two 3-node clusters (separate processes, fsync on), native protocol, 16 clients on one key, {seconds} s per row\n");
    println!("| round | module | cycles/s | acquire p50 ms | p99 ms | p999 ms | errors |");
    println!("|---:|---|---:|---:|---:|---:|---:|");
    let mut ratios = Vec::new();
    for round in 1..=rounds {
        let mut order = [("0.3 (FIFO)", &fifo), ("0.4 (pick)", &pick)];
        if round % 2 == 0 {
            order.reverse();
        }
        let mut got = [0.0f64; 2];
        for (name, c) in order {
            let r = measure(c, seconds, 16, true, "exclusive", 1);
            println!("| {round} | {name} | {} |", r.cells());
            got[usize::from(c.dir.path() == pick.dir.path())] = r.cycles;
        }
        if got[0] > 0.0 {
            ratios.push(got[1] / got[0]);
        }
    }
    ratios.sort_by(f64::total_cmp);
    let each: Vec<String> = ratios.iter().map(|x| format!("{x:.2}")).collect();
    println!(
        "\n0.4 ÷ 0.3, cycles/s: {:.2} (median of {rounds} rounds: {})",
        lockd_bench::percentile(&ratios, 0.5).unwrap_or(f64::NAN),
        each.join(", ")
    );
    let leader = pick.wait_leader(Duration::from_secs(20));
    println!(
        "keys handed to another than the oldest on the 0.4 cluster: {:?} (all ask for priority 0)",
        pick.metric(leader, "lockd_lock_events_total{event=\"picked\"}")
    );
}

/// What one `lockctl bench` run measured.
struct Measured {
    cycles: f64,
    p50: f64,
    p99: f64,
    p999: f64,
    errors: serde_json::Value,
}

impl Measured {
    /// Cycles/s, the three latencies and the errors, as table cells.
    fn cells(&self) -> String {
        format!(
            "{:.0} | {:.2} | {:.2} | {:.2} | {}",
            self.cycles, self.p50, self.p99, self.p999, self.errors
        )
    }
}

/// Make `module` the active module of the running cluster.
fn swap(c: &Cluster, module: &[u8]) {
    let leader = c.wait_leader(Duration::from_secs(20));
    let r = c
        .post_bytes(leader, "/v1/admin/upgrade", module)
        .expect("upgrade");
    assert_eq!(r.body["result"], "swapped", "{r:?}");
}

/// One `lockctl bench` run, printed as a table row.
fn row(
    c: &Cluster,
    module: &str,
    seconds: f64,
    clients: usize,
    contended: bool,
    mode: &str,
    limit: u32,
) {
    let r = measure(c, seconds, clients, contended, mode, limit);
    let lock = match (mode, limit) {
        ("exclusive", 1) => "mutex".to_string(),
        ("exclusive", n) => format!("semaphore of {n}"),
        (_, n) => format!("{n} readers"),
    };
    let keys = if contended { "one shared" } else { "own" };
    println!("| {module} | {clients} | {keys} | {lock} | {} |", r.cells());
}

/// One `lockctl bench` run (as the cluster's admin when it is secure).
fn measure(
    c: &Cluster,
    seconds: f64,
    clients: usize,
    contended: bool,
    mode: &str,
    limit: u32,
) -> Measured {
    {
        let (clients, seconds, limit) =
            (clients.to_string(), seconds.to_string(), limit.to_string());
        let mut args = vec![
            "--clients",
            &clients,
            "--seconds",
            &seconds,
            "--mode",
            mode,
            "--limit",
            &limit,
        ];
        if contended {
            args.push("--contended");
        }
        let r = lockd_bench::lockctl_bench(c.lockctl(), &args);
        Measured {
            cycles: r["cycles_per_sec"].as_f64().unwrap_or(0.0),
            p50: r["acquire_p50_ms"].as_f64().unwrap_or(0.0),
            p99: r["acquire_p99_ms"].as_f64().unwrap_or(0.0),
            p999: r["acquire_p999_ms"].as_f64().unwrap_or(0.0),
            errors: r["errors"].clone(),
        }
    }
}
