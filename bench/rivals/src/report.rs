//! The report: `benchmarks.md` (tables, targets, the machine), the chart
//! `benchmarks.png` (see [`crate::chart`]) and `benchmarks.json`.

use std::fmt::Write as _;
use std::path::Path;

use crate::drive::System;
use crate::failover::Failover;
use crate::zk::ZkTimings;
use crate::Workload;

/// How the run was set up, for the report's text.
pub struct Setup<'a> {
    pub systems: &'a [System],
    pub seconds: f64,
    pub rounds: usize,
    pub warmup: f64,
    pub zk: ZkTimings,
}

fn first_line(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .ok()
        // `java -version` answers on stderr.
        .map(|o| {
            if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            }
        })
        .and_then(|o| String::from_utf8(o).ok())
        .and_then(|s| s.lines().next().map(|l| l.trim().to_string()))
        .unwrap_or_else(|| "unknown".into())
}

/// CPU model, cores, memory and kernel of this machine.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines().find(|l| l.starts_with("MemTotal")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
            })
        })
        .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
    // Major.minor only: the rest of a kernel release names a build, not a
    // property of the machine worth reporting.
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().split('.').take(2).collect::<Vec<_>>().join("."))
        .unwrap_or_default();
    format!("{model}, {cores} cores, {mem_gib:.0} GiB, Linux {kernel}")
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

/// The versions of the systems that ran, for the report's first line.
fn versions(systems: &[System]) -> String {
    systems
        .iter()
        // lockd once, whichever of its protocols ran.
        .filter(|s| **s != System::LockdHttp || !systems.contains(&System::Lockd))
        .map(|s| match s {
            System::Lockd | System::LockdHttp => format!(
                "lockd `{}`",
                first_line("git", &["rev-parse", "--short", "HEAD"])
            ),
            System::Etcd => format!(
                "etcd {}",
                first_line("etcd", &["--version"]).trim_start_matches("etcd Version: ")
            ),
            System::Zookeeper => format!(
                "ZooKeeper {} on {}",
                first_line("dpkg-query", &["-W", "-f=${Version}", "zookeeper"]),
                first_line("java", &["-version"]).replace('"', "")
            ),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The paragraph on how the clusters run and how each is driven.
fn setup_text(md: &mut String, setup: &Setup<'_>) {
    let has = |s| setup.systems.contains(&s);
    let names: Vec<&str> = setup.systems.iter().map(|s| s.display()).collect();
    let (heartbeat, election) = (crate::HEARTBEAT_MS, crate::election_ms());
    let _ = writeln!(
        md,
        "All clusters: 3 members on loopback, one process each, fsync on, heartbeat {heartbeat} ms, election timeout {election} ms (lockd's defaults; ZooKeeper's nearest, below). Each workload runs {} × {} s per system, interleaved ({} back to back, the order rotating from round to round), after {} s of the 64-client workload per system as a warm-up, not measured. A cycle is acquire + release; only the acquire is timed; the clock starts once every client has connected (and, for etcd, taken its lease).\n",
        setup.rounds,
        setup.seconds,
        names.join(", "),
        setup.warmup
    );
    if has(System::Lockd) {
        let _ = writeln!(
            md,
            "- lockd: native protocol (`lockd-client`), one connection per client (the client finds the leader). Connection bounds raised for the run (`{}`): every client comes from one address, and the defaults bound one address to 1 024 connections and 128 still opening (configuration.md, \"Many clients\").",
            lockd_bench::ONE_HOST_BOUNDS.join(" ")
        );
    }
    if has(System::LockdHttp) {
        let _ = writeln!(
            md,
            "- lockd HTTP: the same cluster, `POST /v1/locks/{{key}}/acquire` and `…/release` with JSON bodies, one kept-alive HTTP/1.1 connection per client, connected to the leader."
        );
    }
    if has(System::Etcd) {
        let _ = writeln!(md, "- etcd: v3 gRPC lock API (`etcd-client`), one connection and one lease per client, Lock + Unlock per cycle, connected to the leader.");
    }
    if has(System::Zookeeper) {
        let z = setup.zk;
        let _ = writeln!(
            md,
            "- ZooKeeper: the `zookeeper-client` crate's Curator lock recipe (an ephemeral sequential znode under the key, held when lowest, else a watch on its predecessor: a create and a list per acquire, a delete per release), one session per client ({} s session timeout), connected to the leader. Ensemble: `tickTime={}` (the leader pings every half tick: {} ms), `syncLimit={}` (a follower drops a silent leader after {} ms, the whole ticks nearest above the election timeout), `initLimit={}` ({} ms for a new leader's sync), `forceSync=yes`; one JVM per server (`-Xmx1g`).",
            crate::zk_drive::SESSION_TIMEOUT.as_secs(),
            z.tick_ms,
            z.tick_ms / 2,
            z.sync_limit,
            z.sync_limit * z.tick_ms,
            z.init_limit,
            z.init_limit * z.tick_ms
        );
    }
    let _ = writeln!(md);
}

fn triple(m: Option<&crate::Measured>) -> String {
    m.map_or("–".into(), |m| {
        format!("{:.2} / {:.2} / {:.2}", m.p50_ms, m.p99_ms, m.p999_ms)
    })
}

/// The main table: cycles/s, lockd's ratio to each other system,
/// acquire latencies and errors, one column per system.
fn workload_table(md: &mut String, systems: &[System], results: &[Workload]) {
    // Each of lockd's protocols against each other system, and HTTP
    // against native when both ran.
    let lockds: Vec<System> = systems.iter().copied().filter(|s| s.is_lockd()).collect();
    let others: Vec<System> = systems.iter().copied().filter(|s| !s.is_lockd()).collect();
    let mut pairs: Vec<(System, System)> = lockds
        .iter()
        .flat_map(|l| others.iter().map(move |o| (*l, *o)))
        .collect();
    if lockds.len() == 2 {
        pairs.push((System::LockdHttp, System::Lockd));
    }
    let mut head = vec!["workload".to_string()];
    head.extend(systems.iter().map(|s| format!("{} cycles/s", s.display())));
    head.extend(
        pairs
            .iter()
            .map(|(a, b)| format!("{} ÷ {}", a.display(), b.display())),
    );
    head.extend(
        systems
            .iter()
            .map(|s| format!("{} acquire p50 / p99 / p999 ms", s.display())),
    );
    let names: Vec<&str> = systems.iter().map(|s| s.display()).collect();
    head.push(format!("errors {}", names.join(" / ")));
    let _ = writeln!(md, "| {} |", head.join(" | "));
    let _ = writeln!(md, "|---|{}", "---:|".repeat(head.len() - 1));
    for w in results {
        let mut row = vec![w.name.clone()];
        row.extend(systems.iter().map(|s| {
            w.get(*s)
                .map_or("–".into(), |m| format!("{:.0}", m.cycles_per_sec))
        }));
        let rate = |s: System| w.get(s).map_or(f64::NAN, |m| m.cycles_per_sec);
        row.extend(
            pairs
                .iter()
                .map(|(a, b)| format!("**{:.2}×**", ratio(rate(*a), rate(*b)))),
        );
        row.extend(systems.iter().map(|s| triple(w.get(*s))));
        let errors: Vec<String> = systems
            .iter()
            .map(|s| w.get(*s).map_or("–".into(), |m| m.errors.to_string()))
            .collect();
        row.push(errors.join(" / "));
        let _ = writeln!(md, "| {} |", row.join(" | "));
    }
}

fn ms(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.0}")
    } else {
        "∞".into()
    }
}

fn failover_table(md: &mut String, setup: &Setup<'_>, failovers: &[Failover]) {
    let _ = writeln!(md, "## Leader failover\n");
    let _ = write!(md, "Each trial: a fresh 3-member cluster, 8 clients cycling on their own keys, the leader SIGKILLed; the time from the kill to the first acquire that started after it and succeeded (etcd's and ZooKeeper's clients know every member for this one; `∞`: none within {} s).", crate::failover::FAILOVER_WINDOW.as_secs());
    if setup.systems.contains(&System::Zookeeper) {
        let _ = write!(md, " ZooKeeper's followers see a killed leader's connections close and start an election at once, without waiting `syncLimit`; the election itself waits at least 200 ms for late votes before it settles (a constant of ZooKeeper's), then the new leader syncs its followers. Its clients meanwhile try every server in turn (those without a leader turn them away) and, once they have tried all, wait 300 ms before the next round, doubling each further round (the `zookeeper-client` crate's reconnect policy), so the first acquire may come some hundreds of ms after the ensemble serves again.");
    }
    let _ = writeln!(md, "\n");
    let _ = writeln!(
        md,
        "| system | trials, ms | median ms | max ms | failed operations, all trials |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|");
    for f in failovers {
        let trials: Vec<String> = f.trials_ms.iter().map(|v| ms(*v)).collect();
        let name = System::parse(&f.system).map_or(f.system.clone(), |s| s.display().into());
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {} | {} |",
            trials.join(", "),
            ms(f.median_ms),
            ms(f.max_ms),
            f.errors
        );
    }
}

/// lockd's targets against etcd, and HTTP's against native (each only
/// when both of its systems ran).
fn targets(md: &mut String, results: &[Workload], failovers: &[Failover]) {
    let _ = writeln!(md, "\n## Targets\n");
    let _ = writeln!(md, "| target | measured | met |");
    let _ = writeln!(md, "|---|---|---|");
    let find = |c: usize, contended: bool, a: System, b: System| {
        results
            .iter()
            .find(|w| w.clients == c && w.contended == contended)
            .and_then(|w| Some((w.get(a)?, w.get(b)?)))
    };
    let verdict = |met: bool, short: String| {
        if met {
            "yes".to_string()
        } else {
            format!("**no**: {short}")
        }
    };
    let (native, http, etcd) = (System::Lockd, System::LockdHttp, System::Etcd);
    for (lockd, fraction) in [(native, 0.5), (http, 0.75)] {
        if let Some((l, e)) = find(1, false, lockd, etcd) {
            let bound = e.p50_ms * fraction;
            let _ = writeln!(
                md,
                "| 1 client, {}: acquire p50 ≤ {fraction} × etcd's | {:.2} ms vs {:.2} ms (≤ {bound:.2}) | {} |",
                lockd.display(),
                l.p50_ms,
                e.p50_ms,
                verdict(l.p50_ms <= bound, format!("{:.2} ms over", l.p50_ms - bound))
            );
        }
    }
    let rows = [
        (64, false, native, 6.0, "64 clients on their own keys"),
        (64, false, http, 5.0, "64 clients on their own keys"),
        (16, true, native, 10.0, "16 clients on one key"),
        (16, true, http, 8.0, "16 clients on one key"),
    ];
    for (clients, contended, lockd, times, what) in rows {
        if let Some((l, e)) = find(clients, contended, lockd, etcd) {
            let r = ratio(l.cycles_per_sec, e.cycles_per_sec);
            let _ = writeln!(
                md,
                "| {what}, {}: ≥ {times}× etcd's cycles/s | {r:.1}× | {} |",
                lockd.display(),
                verdict(r >= times, format!("{:.1}× short", times / r))
            );
        }
    }
    let at = |clients: usize| {
        results
            .iter()
            .find(|w| w.clients == clients && !w.contended)
            .and_then(|w| w.get(native))
    };
    if let (Some(many), Some(fewer)) = (at(1024), at(256)) {
        let r = ratio(many.cycles_per_sec, fewer.cycles_per_sec);
        let _ = writeln!(
            md,
            "| 1 024 native clients: ≥ the 256 clients' cycles/s | {:.0} vs {:.0} ({r:.2}×) | {} |",
            many.cycles_per_sec,
            fewer.cycles_per_sec,
            verdict(r >= 1.0, format!("{r:.2}×"))
        );
    }
    for w in results {
        if let (Some(h), Some(n)) = (w.get(http), w.get(native)) {
            let r = ratio(h.cycles_per_sec, n.cycles_per_sec);
            let _ = writeln!(
                md,
                "| {}: HTTP ≥ ¾ of native's cycles/s | {r:.2}× | {} |",
                w.name,
                verdict(r >= 0.75, format!("{r:.2}×"))
            );
        }
    }
    if let Some(f) = failovers.iter().find(|f| f.system == "lockd") {
        let _ = writeln!(
            md,
            "| leader failover: first successful acquire within 1 s | median {} ms, max {} ms | {} |",
            ms(f.median_ms),
            ms(f.max_ms),
            verdict(f.max_ms < 1000.0, format!("max {:.0} ms over", f.max_ms - 1000.0))
        );
    }
}

/// Write `OUT/benchmarks.md`, `.json` and `.png`: one argument per part
/// of the report, each measured on its own.
pub fn write(
    out: &str,
    setup: &Setup<'_>,
    results: &[Workload],
    failovers: &[Failover],
    profile: Option<&crate::profile::Profile>,
    sm: &str,
    upgrade: &str,
) {
    std::fs::create_dir_all(out).expect("create the output directory");
    let mut md = String::new();
    let names: Vec<&str> = setup.systems.iter().map(|s| s.display()).collect();
    let title = names.join(" vs ");
    let _ = writeln!(md, "# {title}\n");
    let _ = writeln!(
        md,
        "Generated by `scripts/bench-vs-etcd.sh` ({}).\n\nMachine: {}.\n",
        versions(setup.systems),
        machine()
    );
    setup_text(&mut md, setup);
    workload_table(&mut md, setup.systems, results);
    let _ = writeln!(md, "\n![{title}](benchmarks.png)\n");
    failover_table(&mut md, setup, failovers);
    if setup.systems.contains(&System::Lockd) && setup.systems.contains(&System::Etcd) {
        targets(&mut md, results, failovers);
    }
    if let Some(p) = profile {
        let _ = writeln!(md, "\n## Where lockd's time goes (64 clients, own keys)\n");
        let _ = writeln!(md, "`perf record -a -g` for 4 s while lockd's leader serves 64 clients (the same load as the table above).{}\n", p.flamegraph.as_ref().map(|f| format!(" Flamegraph of the leader: [{f}]({f})."), ).unwrap_or_default());
        let _ = writeln!(md, "CPU by thread name, whole machine (three lockd processes, the benchmark's clients, the kernel):\n\n```text\n{}\n```\n", p.by_process);
        let _ = writeln!(md, "The leader's own samples by binary (what is not listed is the kernel: TCP on loopback, wakeups, the disk):\n\n```text\n{}\n```\n", p.leader_by_dso);
        let _ = writeln!(md, "The leader's hottest functions (self time, share of the leader's samples):\n\n```text\n{}\n```", p.leader_symbols);
    }
    if !sm.is_empty() {
        let _ = writeln!(
            md,
            "\n## lockd alone: wasm vs native apply (`sm-bench`)\n\n{}",
            sm.trim()
        );
    }
    if !upgrade.is_empty() {
        let _ = writeln!(
            md,
            "\n## lockd alone: hot upgrade pause (`upgrade-bench`)\n\n{}",
            upgrade.trim()
        );
    }
    let systems: Vec<&str> = setup.systems.iter().map(|s| s.name()).collect();
    let mut json = serde_json::json!({
        "systems": systems,
        "workloads": results,
        "failover": failovers,
    });
    if setup.systems.contains(&System::Zookeeper) {
        json["zookeeper_settings"] = serde_json::json!(setup.zk);
    }
    std::fs::write(
        Path::new(out).join("benchmarks.json"),
        serde_json::to_string_pretty(&json).unwrap_or_default(),
    )
    .expect("write json");
    std::fs::write(Path::new(out).join("benchmarks.md"), md).expect("write report");
    let png = Path::new(out).join("benchmarks.png");
    if let Err(e) = crate::chart::draw(&png, setup.systems, results) {
        eprintln!("chart not drawn: {e}");
    }
}
