//! Recipes side by side on the same two clusters: the cost of keeping
//! 100 holdings alive, and election handoff.
//!
//! * **Keepalive of 100 holdings.** lockd: 100 keys each on a lease of its
//!   own (100 keepalives per renewal), against 100 keys in one session
//!   (one session keepalive). etcd: 100 leases with one key each, against
//!   one lease with 100 keys (etcd's way of sharing a lease). A round
//!   renews every holding once, the requests of a round in flight at
//!   once; the row is the median round's time and the requests per round.
//! * **Election handoff.** Two candidates; the leader either stops
//!   renewing (its process gone: the next leads once its lease ends) or
//!   resigns; the time from that moment to the next leader's first
//!   proclaim having committed. Both renew by hand every third of the
//!   TTL, the last renewal just before the kill, so a kill's handoff is
//!   the TTL plus what the service adds; a resignation's is the service
//!   alone. lockd: `campaign` (an acquire with a value and a wait),
//!   `proclaim`, release; etcd: its election API (`Campaign`, `Proclaim`,
//!   `Resign`) on a lease of the same TTL.

use std::time::{Duration, Instant};

use etcd_client::{LeaseKeepAliveStream, LeaseKeeper, ProclaimOptions, PutOptions, ResignOptions};
use lockd_client::{AcquireOptions, Client, ClientOptions};
use lockd_tests::cluster::Cluster;

/// Holdings kept alive per row.
pub const HOLDINGS: usize = 100;
/// The leadership lease of the handoff trials (etcd's least is 1 s here).
pub const ELECTION_TTL: Duration = Duration::from_secs(1);

#[derive(Clone, Debug, serde::Serialize)]
pub struct KeepaliveRow {
    pub system: String,
    /// "one lease each" or "shared" (a session, or one etcd lease).
    pub way: String,
    pub requests_per_round: usize,
    pub median_round_ms: f64,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct HandoffRow {
    pub system: String,
    /// "killed" or "resigned".
    pub how: String,
    pub trials_ms: Vec<f64>,
    pub median_ms: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn lockd_client(endpoints: &[String]) -> Client {
    Client::with_options(
        endpoints.to_vec(),
        ClientOptions {
            // Every renewal is the benchmark's own.
            keepalive: false,
            ..Default::default()
        },
    )
}

/// The four keepalive rows, `rounds` rounds each.
pub async fn keepalive_rows(
    lockd_eps: &[String],
    etcd_eps: &[String],
    rounds: usize,
) -> Vec<KeepaliveRow> {
    let lease = Duration::from_secs(60);
    let c = lockd_client(lockd_eps);
    let mut guards = Vec::new();
    for i in 0..HOLDINGS {
        let opts = AcquireOptions::exclusive(lease);
        guards.push(
            c.acquire_with(&format!("bench/ka/lease/{i}"), opts)
                .await
                .expect("acquire"),
        );
    }
    let mut each = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let renewals = guards.iter().map(|g| c.keepalive(g.key(), g.token()));
        for r in futures::future::join_all(renewals).await {
            r.expect("lease keepalive");
        }
        each.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let session = c.open_session(lease).await.expect("open session");
    for i in 0..HOLDINGS {
        let opts = AcquireOptions::exclusive(lease);
        std::mem::forget(
            session
                .acquire(&format!("bench/ka/session/{i}"), opts)
                .await
                .expect("acquire in session"),
        );
    }
    let mut shared = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        session.keepalive().await.expect("session keepalive");
        shared.push(t.elapsed().as_secs_f64() * 1e3);
    }
    session.close().await.expect("close");
    for g in guards {
        g.release().await.expect("release");
    }

    let mut e = etcd_client::Client::connect(etcd_eps, None)
        .await
        .expect("etcd connect");
    let mut leases = Vec::new();
    for i in 0..HOLDINGS {
        let id = e.lease_grant(60, None).await.expect("lease grant").id();
        let opts = PutOptions::new().with_lease(id);
        e.put(format!("bench/ka/lease/{i}"), "x", Some(opts))
            .await
            .expect("put");
        leases.push(e.lease_keep_alive(id).await.expect("keepalive stream"));
    }
    let mut etcd_each = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let renewals = leases
            .iter_mut()
            .map(|(keeper, stream)| etcd_renew(keeper, stream));
        futures::future::join_all(renewals).await;
        etcd_each.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let id = e.lease_grant(60, None).await.expect("lease grant").id();
    for i in 0..HOLDINGS {
        let opts = PutOptions::new().with_lease(id);
        e.put(format!("bench/ka/shared/{i}"), "x", Some(opts))
            .await
            .expect("put");
    }
    let (mut keeper, mut stream) = e.lease_keep_alive(id).await.expect("keepalive stream");
    let mut etcd_shared = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        etcd_renew(&mut keeper, &mut stream).await;
        etcd_shared.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let row = |system: &str, way: &str, requests_per_round, ms: Vec<f64>| KeepaliveRow {
        system: system.into(),
        way: way.into(),
        requests_per_round,
        median_round_ms: median(ms),
    };
    vec![
        row("lockd", "one lease each", HOLDINGS, each),
        row("lockd", "one session", 1, shared),
        row("etcd", "one lease each", HOLDINGS, etcd_each),
        row("etcd", "one shared lease", 1, etcd_shared),
    ]
}

/// lockd: one handoff trial on election `name`; returns the ms from the
/// leader's end (kill or resignation) to the next leader's first proclaim.
async fn lockd_handoff(c: &Cluster, name: &str, resign: bool) -> f64 {
    let eps = c.endpoints();
    let (a, b) = (lockd_client(&eps), lockd_client(&eps));
    let first = a
        .campaign(name, "a", ELECTION_TTL, Duration::from_secs(10))
        .await
        .expect("campaign a");
    let next = {
        let name = name.to_string();
        tokio::spawn(async move {
            let g = b
                .campaign(&name, "b", ELECTION_TTL, Duration::from_secs(30))
                .await
                .expect("campaign b");
            b.proclaim(&name, g.token(), "b leads")
                .await
                .expect("proclaim");
            let done = Instant::now();
            g.release().await.expect("resign b");
            done
        })
    };
    // The second candidate queues behind the first (the leader's gauge of
    // waiters; no other key is waited for here).
    until("the second lockd candidate queues", || async {
        tokio::task::block_in_place(|| {
            let leader = c.wait_leader(Duration::from_secs(10));
            c.metric(leader, "lockd_lock_waiters").unwrap_or(0) >= 1
        })
    })
    .await;
    a.keepalive(name, first.token()).await.expect("renew a");
    let ended = Instant::now();
    if resign {
        first.release().await.expect("resign a");
    } else {
        drop(first); // no more renewals: its lease runs out
    }
    let done = next.await.expect("candidate b");
    (done - ended).as_secs_f64() * 1e3
}

/// Campaign in etcd's election `name` on `lease`: its leader key, once
/// this candidate leads.
async fn etcd_campaign(
    c: &mut etcd_client::Client,
    name: &str,
    value: &str,
    lease: i64,
) -> etcd_client::LeaderKey {
    c.campaign(name, value, lease)
        .await
        .expect("campaign")
        .leader()
        .cloned()
        .expect("a leader key")
}

/// etcd: the same trial with its election API.
async fn etcd_handoff(eps: &[String], name: &str, resign: bool) -> f64 {
    let ttl = ELECTION_TTL.as_secs() as i64;
    let mut a = etcd_client::Client::connect(eps, None)
        .await
        .expect("etcd connect");
    let mut b = a.clone();
    let lease_a = a.lease_grant(ttl, None).await.expect("lease").id();
    let (mut keeper_a, mut answers_a) = a.lease_keep_alive(lease_a).await.expect("keepalive a");
    let leader_a = etcd_campaign(&mut a, name, "a", lease_a).await;
    let next = {
        let name = name.to_string();
        tokio::spawn(async move {
            let lease_b = b.lease_grant(60, None).await.expect("lease").id();
            let leader_b = etcd_campaign(&mut b, &name, "b", lease_b).await;
            let opts = ProclaimOptions::new().with_leader(leader_b.clone());
            b.proclaim("b leads", Some(opts)).await.expect("proclaim");
            let done = Instant::now();
            let _ = b
                .resign(Some(ResignOptions::new().with_leader(leader_b)))
                .await;
            let _ = b.lease_revoke(lease_b).await;
            done
        })
    };
    // The second candidate queues: its key is under the election's prefix.
    until("the second etcd candidate queues", || {
        let mut probe = a.clone();
        async move {
            let opts = etcd_client::GetOptions::new()
                .with_prefix()
                .with_count_only();
            probe.get(name, Some(opts)).await.expect("etcd get").count() >= 2
        }
    })
    .await;
    etcd_renew(&mut keeper_a, &mut answers_a).await;
    let ended = Instant::now();
    if resign {
        a.resign(Some(ResignOptions::new().with_leader(leader_a)))
            .await
            .expect("resign a");
    }
    drop((keeper_a, answers_a)); // no more renewals: the lease runs out
    let done = next.await.expect("candidate b");
    let _ = a.lease_revoke(lease_a).await;
    (done - ended).as_secs_f64() * 1e3
}

/// One etcd lease renewal, answered.
async fn etcd_renew(keeper: &mut LeaseKeeper, stream: &mut LeaseKeepAliveStream) {
    keeper.keep_alive().await.expect("etcd keepalive");
    stream
        .message()
        .await
        .expect("etcd keepalive answer")
        .expect("an answer");
}

/// Wait until `done` answers true, asking every 5 ms; a bench that never
/// gets there says what it waited for after 30 s.
async fn until<F: std::future::Future<Output = bool>>(what: &str, mut done: impl FnMut() -> F) {
    let start = Instant::now();
    while !done().await {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what}: not within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// `trials` handoffs of each kind on each system, alternating which goes
/// first.
pub async fn handoff_rows(lockd: &Cluster, etcd_eps: &[String], trials: usize) -> Vec<HandoffRow> {
    let mut rows = Vec::new();
    for resign in [false, true] {
        let how = if resign { "resigned" } else { "killed" };
        let (mut l, mut e) = (Vec::new(), Vec::new());
        for t in 0..trials {
            let name = format!("bench/election/{how}/{t}");
            for lockd_now in [t % 2 == 0, t % 2 == 1] {
                if lockd_now {
                    l.push(lockd_handoff(lockd, &name, resign).await);
                } else {
                    e.push(etcd_handoff(etcd_eps, &name, resign).await);
                }
            }
        }
        for (system, v) in [("lockd", l), ("etcd", e)] {
            rows.push(HandoffRow {
                system: system.into(),
                how: how.into(),
                median_ms: median(v.clone()),
                trials_ms: v,
            });
        }
    }
    rows
}

/// `--recipes`: both rows on fresh clusters (lockd on its built-in world
/// 0.3 module), written to `OUT/benchmarks-recipes.md` and `.json`.
pub fn run(rt: &tokio::runtime::Runtime, rounds: usize, trials: usize, out: &str) {
    use std::fmt::Write;
    let lockd = Cluster::start_timed(3, &[], crate::HEARTBEAT_MS, crate::election_ms());
    lockd.wait_leader(Duration::from_secs(20));
    let etcd = crate::etcd::EtcdCluster::start(3, crate::HEARTBEAT_MS, crate::election_ms());
    let leader = rt.block_on(etcd.wait_leader(Duration::from_secs(30)));
    let (lockd_eps, etcd_eps) = (
        lockd.endpoints(),
        vec![etcd.members[leader].client_url.clone()],
    );
    let keepalive = rt.block_on(keepalive_rows(&lockd_eps, &etcd_eps, rounds));
    let handoff = rt.block_on(handoff_rows(&lockd, &etcd_eps, trials));
    let mut md = String::new();
    let _ = writeln!(md, "# Recipes: lockd vs etcd\n");
    let _ = writeln!(
        md,
        "Generated by `scripts/bench-vs-etcd.sh --recipes` (see `bench/rivals/src/recipes.rs`). Both clusters: 3 members on loopback, fsync on, heartbeat {} ms, election timeout {} ms; lockd on its built-in world-0.3 module.\n",
        crate::HEARTBEAT_MS,
        crate::election_ms()
    );
    let _ = writeln!(
        md,
        "## Keeping {HOLDINGS} holdings alive ({rounds} rounds)\n"
    );
    let _ = writeln!(
        md,
        "| system | how | requests per round | median round ms |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|");
    for r in &keepalive {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.2} |",
            r.system, r.way, r.requests_per_round, r.median_round_ms
        );
    }
    let _ = writeln!(
        md,
        "\n## Election handoff ({trials} trials each, leadership TTL {} s)\n",
        ELECTION_TTL.as_secs()
    );
    let _ = writeln!(md, "| system | the leader | median ms | trials ms |");
    let _ = writeln!(md, "|---|---|---:|---|");
    for r in &handoff {
        let trials: Vec<String> = r.trials_ms.iter().map(|t| format!("{t:.0}")).collect();
        let _ = writeln!(
            md,
            "| {} | {} | {:.0} | {} |",
            r.system,
            r.how,
            r.median_ms,
            trials.join(", ")
        );
    }
    std::fs::create_dir_all(out).expect("create the output directory");
    std::fs::write(format!("{out}/benchmarks-recipes.md"), &md).expect("write the report");
    let json = serde_json::json!({ "keepalive": keepalive, "handoff": handoff });
    std::fs::write(
        format!("{out}/benchmarks-recipes.json"),
        serde_json::to_string_pretty(&json).expect("json"),
    )
    .expect("write the json");
    println!("{md}");
}
