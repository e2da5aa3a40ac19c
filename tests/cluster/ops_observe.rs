//! What an operator runs the cluster with (docs/operations.md, "Addresses"
//! to "Metrics"): a bind address apart from the advertised one, `/healthz`
//! and `/readyz`, `/metrics` as a Prometheus parser reads it, and JSON log
//! lines.

use std::time::{Duration, Instant};

use lockd_tests::cluster::{free_port, Cluster};
use lockd_tests::metrics;
use serde_json::Value;

const WITHIN: Duration = Duration::from_secs(20);

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < WITHIN, "{what}: not within {WITHIN:?}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

#[test]
fn nodes_bound_to_every_interface_advertise_their_own_loopback_address() {
    // 0.0.0.0 is not loopback: without TLS and authentication a node
    // needs --insecure to bind it.
    let mut c = Cluster::empty(&["--insecure"]);
    let members: Vec<(u64, String, u16)> = (1..=3)
        .map(|id| {
            let port = free_port();
            (id, format!("127.0.0.{}:{port}", id + 1), port)
        })
        .collect();
    let initial = members
        .iter()
        .map(|(id, a, _)| format!("{id}={a}"))
        .collect::<Vec<_>>()
        .join(",");
    for (id, addr, port) in &members {
        let listen = format!("0.0.0.0:{port}");
        c.add_proc(
            *id,
            addr.clone(),
            &[
                "--listen",
                &listen,
                "--advertise-addr",
                addr,
                "--initial-cluster",
                &initial,
            ],
        );
        c.spawn(*id);
    }
    let leader = c.wait_leader(WITHIN);
    let token = c.acquire_on_leader("bound/everywhere", 30_000, WITHIN);
    c.wait_converged(WITHIN);
    for (id, addr, _) in &members {
        let s = c.status(*id).expect("status");
        assert_eq!(&s.addr, addr, "node {id} reports what it advertises");
        assert_eq!(s.leader, Some(leader));
        let peers: Vec<&str> = s.members.iter().map(|m| m.addr.as_str()).collect();
        assert!(peers.contains(&addr.as_str()), "{peers:?}");
    }
    // A follower forwards to the leader's advertised address.
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    let r = c.lock(follower, "bound/everywhere").expect("get");
    assert_eq!(r.body["token"].as_u64(), Some(token));
    let log = std::fs::read_to_string(&c.nodes[&1].log).expect("log");
    assert!(
        log.contains(&format!("listen=0.0.0.0:{}", members[0].2)),
        "the start line names the bound address: {log}"
    );
}

fn readyz(c: &Cluster, id: u64) -> Option<(u16, Value)> {
    c.get(id, "/readyz").ok().map(|r| (r.status, r.body))
}

#[test]
fn a_node_is_ready_only_once_it_knows_a_leader_and_health_needs_no_credentials() {
    let mut c = Cluster::configure_secure(3, &[]);
    c.spawn(1);
    c.wait_up(1, WITHIN);
    // Alone of three it can elect no one: alive, but not ready.
    let anon = c.as_who(lockd_tests::secure::Who::Nobody);
    let health = anon
        .request(c.addr(1), "GET", "/healthz", None)
        .expect("healthz");
    assert_eq!(health.status, 200, "{:?}", health.body);
    assert_eq!(health.body["status"], "ok");
    let not_ready = anon
        .request(c.addr(1), "GET", "/readyz", None)
        .expect("readyz");
    assert_eq!(not_ready.status, 503, "{:?}", not_ready.body);
    assert_eq!(not_ready.body["ready"], false);
    let reasons = not_ready.body["reasons"].to_string();
    assert!(reasons.contains("no leader known"), "{reasons}");
    // It stays so while alone (a few election timeouts).
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        assert_eq!(readyz(&c, 1).map(|r| r.0), Some(503));
        std::thread::sleep(Duration::from_millis(100));
    }
    c.spawn(2);
    c.spawn(3);
    let leader = c.wait_leader(WITHIN);
    // Judge the ready answers themselves: a later probe may fall between
    // a commit and its apply, and rightly say "catching up".
    let mut ready = Vec::new();
    wait_for("every node ready", || {
        ready = (1..=3).filter_map(|id| readyz(&c, id)).collect();
        ready.len() == 3 && ready.iter().all(|r| r.0 == 200)
    });
    for (_, body) in &ready {
        assert_eq!(body["leader"].as_u64(), Some(leader), "{body}");
        assert!(
            body["applied_index"].as_u64() >= body["commit_index"].as_u64(),
            "{body}"
        );
    }
    // Metrics, unlike health, need credentials.
    let metrics = anon
        .request(c.addr(1), "GET", "/metrics", None)
        .expect("metrics");
    assert_eq!(metrics.status, 401);
}

/// `NAME TYPE` of every family a scrape declares, as queries name them
/// (a counter with its `_total`), sorted.
fn families(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(name, kind)| match kind {
            "counter" => format!("{name}_total {kind}"),
            _ => format!("{name} {kind}"),
        })
        .collect();
    out.sort();
    out
}

fn histogram_count(scrape: &metrics::Scrape, family: &str) -> u64 {
    let count = format!("{family}_count");
    metrics::matching(scrape, &count)
        .iter()
        .filter_map(|s| metrics::number(&s.value))
        .sum::<f64>() as u64
}

#[test]
fn metrics_parse_as_prometheus_text_and_the_histograms_move_under_load() {
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(WITHIN);
    let scrape = |id| {
        let text = c.metrics_text(id).expect("metrics");
        metrics::parse(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    };
    // The first leader appends the cluster's first module after its
    // election: scrape once it is swapped in, or the build labels and the
    // status read after them may name two modules. (Before that swap the
    // built-in module a node starts on counts as the first, so the hashes
    // alone would agree too early.)
    lockd_tests::cluster::wait_for(
        "the cluster's first module",
        Duration::from_secs(30),
        || {
            c.status(leader).is_some_and(|s| {
                s.module_since_index > 0
                    && s.first_module_hash.as_deref() == Some(s.module_hash.as_str())
            })
        },
    );
    let before = scrape(leader);
    for s in &before.samples {
        assert_eq!(
            s.labels.get("node"),
            Some(leader.to_string().as_str()),
            "{} has no node label",
            s.metric
        );
    }
    let build = metrics::matching(&before, "lockd_build_info");
    assert_eq!(build.len(), 1, "{build:?}");
    let status = c.status(leader).expect("status");
    assert_eq!(
        build[0].labels.get("module_hash"),
        Some(status.module_hash.as_str())
    );
    assert!(build[0]
        .labels
        .get("version")
        .is_some_and(|v| !v.is_empty()));
    assert!(build[0]
        .labels
        .get("wasmtime")
        .is_some_and(|v| !v.is_empty()));
    assert_eq!(
        metrics::value_of(&before, "lockd_raft_has_leader"),
        Some(1.0)
    );
    assert!(metrics::value_of(&before, "lockd_raft_leader_changes_total") >= Some(1.0));

    for i in 0..20 {
        let key = format!("observed/{i}");
        let token = c.acquire_on_leader(&key, 30_000, WITHIN);
        c.release_on_leader(&key, token, WITHIN);
    }
    let r = c.acquire(leader, "observed/0", 30_000).expect("acquire");
    assert!(r.ok(), "{:?}", r.body);
    // Held: a try-lock (no wait) is answered "held".
    let held = c.acquire(leader, "observed/0", 30_000).expect("acquire");
    assert_eq!(held.status, 409, "{:?}", held.body);
    let text = c.metrics_text(leader).expect("metrics");
    let after = scrape(leader);
    for family in [
        "lockd_acquire_duration_seconds",
        "lockd_raft_commit_duration_seconds",
        "lockd_wal_fsync_duration_seconds",
        "lockd_apply_duration_seconds",
    ] {
        let (b, a) = (
            histogram_count(&before, family),
            histogram_count(&after, family),
        );
        assert!(a >= b + 20, "{family}: {b} then {a}");
    }
    // Every stage of a write is timed: 20 acquires read over HTTP, and at
    // least 20 lock entries (an acquire and a release each, maybe batched
    // together) followed from the proposer to their answer.
    for stage in [
        "receive",
        "queue",
        "append",
        "fsync",
        "replicate",
        "apply",
        "answer",
    ] {
        let sel = format!("lockd_stage_seconds_count{{stage=\"{stage}\"}}");
        let (b, a) = (
            metrics::value_of(&before, &sel).unwrap_or(0.0),
            metrics::value_of(&after, &sel).unwrap_or(0.0),
        );
        assert!(a >= b + 20.0, "{sel}: {b} then {a}");
    }
    assert!(
        metrics::value_of(
            &after,
            "lockd_acquire_duration_seconds_count{result=\"held\"}"
        ) >= Some(1.0),
        "refusals are a label of the same family"
    );
    assert!(
        metrics::value_of(&after, "lockd_lock_events_total{event=\"grant\"}")
            > metrics::value_of(&before, "lockd_lock_events_total{event=\"grant\"}")
    );
    // The names the dashboard may use are exactly the ones served.
    let listed = include_str!("../../deploy/grafana/metrics.txt");
    let listed: Vec<String> = listed
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    let mut listed = listed;
    listed.sort();
    assert_eq!(
        listed,
        families(&text),
        "deploy/grafana/metrics.txt differs from what /metrics serves"
    );
}

#[test]
fn json_logs_are_one_object_per_line_with_the_fields_at_the_top() {
    let c = Cluster::start(1, &["--log-format", "json"]);
    c.wait_leader(WITHIN);
    let log = std::fs::read_to_string(&c.nodes[&1].log).expect("log");
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let started = lines
        .iter()
        .find(|l| l["message"] == "node started")
        .unwrap_or_else(|| panic!("no start line: {log}"));
    assert_eq!(started["level"], "INFO");
    assert_eq!(started["addr"].as_str(), Some(c.addr(1)));
    assert!(started["timestamp"].is_string());
}
