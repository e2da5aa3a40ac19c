//! The cost of TLS, for both systems side by side (`vs-etcd --tls`).
//!
//! Four 3-member clusters at once, all with fsync on and the same Raft
//! timings: lockd in the clear, lockd with TLS and authentication (mutual
//! TLS between nodes, the clients by client certificate, an auth file),
//! etcd in the clear, and etcd with client and peer TLS that both require
//! a certificate from the CA (`--client-cert-auth`,
//! `--peer-client-cert-auth`). Every certificate comes from one CA
//! (`lockd_tests::secure`, the code behind `lockd certs init`); etcd's
//! members use the node certificates, its clients the `admin` client
//! certificate. Each round runs every workload on the four, in an order
//! that rotates with the round, so each sees the same machine state. The
//! ratio TLS ÷ plaintext is the median over rounds of each round's ratio.

use std::time::Duration;

use lockd_tests::cluster::Cluster;
use lockd_tests::secure::Who;

use crate::drive::{Security, System};
use crate::etcd::{EtcdCerts, EtcdCluster};
use crate::{election_ms, measure, one_run, Measured, HEARTBEAT_MS};

/// One workload on one system, plaintext and TLS.
#[derive(serde::Serialize)]
struct Row {
    system: &'static str,
    workload: String,
    plaintext: Measured,
    tls: Measured,
    /// TLS ÷ plaintext cycles/s, one per round, and their median.
    ratios: Vec<f64>,
    median_ratio: f64,
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    lockd_bench::percentile(&v, 0.5).unwrap_or(f64::NAN)
}

fn cycles(r: &(Vec<crate::plan::ClientRun>, Duration)) -> f64 {
    r.0.iter().map(|c| c.cycles).sum::<u64>() as f64 / r.1.as_secs_f64().max(1e-9)
}

pub fn run(rt: &tokio::runtime::Runtime, seconds: f64, rounds: usize, out: &str) {
    let plain = Cluster::start_timed(3, &[], HEARTBEAT_MS, election_ms());
    let secure = Cluster::start_secure_timed(3, &[], HEARTBEAT_MS, election_ms());
    plain.wait_leader(Duration::from_secs(20));
    secure.wait_leader(Duration::from_secs(20));
    // etcd's clients present the admin certificate under the name it expects.
    let dir = secure.secure().dir.clone();
    for ext in ["pem", "key"] {
        std::fs::copy(
            dir.join(format!("admin.{ext}")),
            dir.join(format!("client.{ext}")),
        )
        .expect("copy the client certificate");
    }
    let certs = EtcdCerts { dir };
    let etcd_plain = EtcdCluster::start(3, HEARTBEAT_MS, election_ms());
    let etcd_tls = EtcdCluster::start_with(3, HEARTBEAT_MS, election_ms(), Some(&certs));
    let p_leader = rt.block_on(etcd_plain.wait_leader(Duration::from_secs(30)));
    let t_leader = rt.block_on(etcd_tls.wait_leader(Duration::from_secs(30)));
    // (system, tls, endpoints, security)
    let lockd_tls = Security {
        lockd: secure.client_options(Who::Cert("admin")).credentials,
        etcd: None,
    };
    let etcd_sec = Security {
        lockd: Default::default(),
        etcd: etcd_tls.tls.clone(),
    };
    let targets: Vec<(System, bool, Vec<String>, Security)> = vec![
        (System::Lockd, false, plain.endpoints(), Security::default()),
        (System::Lockd, true, secure.endpoints(), lockd_tls),
        (
            System::Etcd,
            false,
            vec![etcd_plain.members[p_leader].client_url.clone()],
            Security::default(),
        ),
        (
            System::Etcd,
            true,
            vec![etcd_tls.members[t_leader].client_url.clone()],
            etcd_sec,
        ),
    ];
    let workloads = [
        ("1 client", 1usize, false),
        ("64 clients, own keys", 64, false),
        ("16 clients, one key", 16, true),
    ];
    let mut rows = Vec::new();
    for (name, clients, contended) in workloads {
        let mut runs: Vec<Vec<(Vec<crate::plan::ClientRun>, Duration)>> =
            (0..targets.len()).map(|_| Vec::new()).collect();
        for round in 0..rounds {
            for k in 0..targets.len() {
                let t = (k + round) % targets.len();
                let (system, tls, eps, sec) = &targets[t];
                let r = rt.block_on(one_run(
                    *system,
                    eps.clone(),
                    sec.clone(),
                    clients,
                    contended,
                    seconds,
                ));
                eprintln!(
                    "{name} round {round} {} {}: {:.0} cycles/s",
                    system.name(),
                    if *tls { "TLS" } else { "plaintext" },
                    cycles(&r)
                );
                runs[t].push(r);
            }
        }
        for (system, p, t) in [(System::Lockd, 0, 1), (System::Etcd, 2, 3)] {
            let ratios: Vec<f64> = runs[t]
                .iter()
                .zip(&runs[p])
                .map(|(a, b)| cycles(a) / cycles(b).max(1e-9))
                .collect();
            rows.push(Row {
                system: system.name(),
                workload: name.into(),
                plaintext: measure(&runs[p]),
                tls: measure(&runs[t]),
                median_ratio: median(&ratios),
                ratios,
            });
        }
    }
    let mut md = format!(
        "# The cost of TLS: lockd and etcd\n\n`scripts/bench-vs-etcd.sh --tls --seconds {seconds} --rounds {rounds}`: four 3-member clusters on loopback at once (fsync on, heartbeat {HEARTBEAT_MS} ms, election timeout {} ms), each workload run on all four in every round, in an order that rotates. TLS: lockd with mutual TLS between nodes, clients by certificate and an auth file; etcd with client and peer TLS requiring certificates (`--client-cert-auth`, `--peer-client-cert-auth`). One CA for all.\n\n",
        election_ms()
    );
    md.push_str("| system | workload | plaintext cycles/s | TLS cycles/s | TLS ÷ plaintext (median of rounds) | per round | plaintext p50 / p99 ms | TLS p50 / p99 ms | errors (plain, TLS) |\n|---|---|---:|---:|---:|---|---|---|---|\n");
    for r in &rows {
        let each: Vec<String> = r.ratios.iter().map(|x| format!("{x:.2}")).collect();
        md.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} | {:.2} | {} | {:.2} / {:.2} | {:.2} / {:.2} | {}, {} |\n",
            r.system,
            r.workload,
            r.plaintext.cycles_per_sec,
            r.tls.cycles_per_sec,
            r.median_ratio,
            each.join(", "),
            r.plaintext.p50_ms,
            r.plaintext.p99_ms,
            r.tls.p50_ms,
            r.tls.p99_ms,
            r.plaintext.errors,
            r.tls.errors
        ));
    }
    std::fs::create_dir_all(out).expect("create the output directory");
    std::fs::write(format!("{out}/benchmarks-tls.md"), &md).expect("write the report");
    let json = serde_json::to_string_pretty(&rows).expect("json");
    std::fs::write(format!("{out}/benchmarks-tls.json"), json).expect("write the json");
    println!("{md}");
}
