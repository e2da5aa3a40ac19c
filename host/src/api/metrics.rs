//! `GET /metrics`: Prometheus text (OpenMetrics 1.0) through
//! `prometheus-client`, every series labelled `node`.
//!
//! Outcomes are labels of one family, not sibling metrics:
//! `lockd_lock_events_total{event=…}`, `lockd_upgrades_total{result=…}`,
//! `lockd_snapshots_total{kind=…}`, `lockd_shadow_diffs_total{kind=…}`,
//! `lockd_acquire_duration_seconds{result=…}`. Latency histograms
//! (seconds, see [`crate::telemetry`]): acquire, commit (proposal to
//! applied), fsync (one group-commit record written and synced), apply
//! (one batch of committed entries) and module swap (a batch that carried
//! an upgrade). `lockd_build_info{version,wasmtime,module_hash}` is 1.
//!
//! A scrape builds a registry afresh: gauges and counters are read from
//! the node's status at that moment, and the long-lived histograms are
//! registered as handles (no copy). So nothing here grows between scrapes.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::paths;
use super::services::Services;
use super::status::Role;
use lockd_core::engine::settings::WASMTIME_VERSION;

mod series;

use series::{counter, gauge, labelled, BuildLabels, Event, Kind, Outcome};

/// The content type of the OpenMetrics text format, which Prometheus
/// parses (and asks for first).
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The registry of `node` now.
fn registry(node: &Services) -> Registry {
    let (s, upgrades) = node.status_with(false);
    let mut reg = Registry::with_labels(std::iter::once((
        Cow::Borrowed("node"),
        Cow::Owned(s.id.to_string()),
    )));
    let r = &mut reg;
    let build = Family::<BuildLabels, Gauge>::default();
    build
        .get_or_create(&BuildLabels {
            version: env!("CARGO_PKG_VERSION"),
            wasmtime: WASMTIME_VERSION,
            module_hash: s.module_hash.clone(),
        })
        .set(1);
    r.register(
        "lockd_build_info",
        "The lockd version, its wasmtime, and the active lock module's hash.",
        build,
    );

    gauge(r, "lockd_raft_term", "Current Raft term.", s.term);
    gauge(
        r,
        "lockd_raft_is_leader",
        "1 when this node is the leader.",
        (s.role == Role::Leader) as u64,
    );
    gauge(
        r,
        "lockd_raft_has_leader",
        "1 when this node knows a leader.",
        s.leader.is_some() as u64,
    );
    counter(
        r,
        "lockd_raft_leader_changes",
        "Times the leader this node knows changed (to another node or to none).",
        node.leader_changes(),
    );
    let (installed, failed, abandoned) = node.snapshot_sends();
    labelled(
        r,
        "lockd_raft_snapshot_sends",
        "Snapshots this node sent to a follower as leader: installed, failed (unreachable or refused; retried after a heartbeat), or abandoned (it stopped replicating to that follower).",
        &[
            (Outcome { result: "installed" }, installed),
            (Outcome { result: "failed" }, failed),
            (Outcome { result: "abandoned" }, abandoned),
        ],
    );
    gauge(
        r,
        "lockd_raft_snapshot_sends_in_flight",
        "Snapshots this node is sending to followers now.",
        node.snapshot_sends_in_flight(),
    );
    let (won, lost) = node.prevote_rounds();
    labelled(
        r,
        "lockd_raft_prevotes",
        "Pre-vote rounds this node asked, wanting to stand: won (a quorum said yes; it stood), or lost.",
        &[
            (Outcome { result: "won" }, won),
            (Outcome { result: "lost" }, lost),
        ],
    );
    gauge(
        r,
        "lockd_raft_commit_index",
        "Last committed log index.",
        s.commit_index,
    );
    gauge(
        r,
        "lockd_raft_applied_index",
        "Last applied log index.",
        s.applied_index,
    );
    gauge(
        r,
        "lockd_raft_last_log_index",
        "Last log index.",
        s.last_log_index,
    );

    let log = node.wal_stats();
    counter(
        r,
        "lockd_wal_entries",
        "Log entries made durable.",
        s.wal_entries,
    );
    counter(
        r,
        "lockd_wal_batches",
        "Group-commit records written.",
        log.batches.load(Ordering::Relaxed),
    );
    counter(
        r,
        "lockd_wal_fsyncs",
        "fsyncs issued by the log.",
        s.wal_fsyncs,
    );

    labelled(
        r,
        "lockd_snapshots",
        "Snapshots built here, or installed from a leader.",
        &[
            (Kind { kind: "built" }, s.snapshots_built),
            (Kind { kind: "installed" }, s.snapshots_installed),
        ],
    );
    gauge(
        r,
        "lockd_snapshot_last_bytes",
        "Bytes of the last snapshot built or installed.",
        s.last_snapshot_bytes,
    );
    gauge(
        r,
        "lockd_snapshot_last_build_ms",
        "Milliseconds the last snapshot build took.",
        s.last_snapshot_build_ms,
    );
    gauge(
        r,
        "lockd_snapshot_last_install_ms",
        "Milliseconds the last install of a leader's snapshot took.",
        s.last_snapshot_install_ms,
    );

    gauge(
        r,
        "lockd_locks_held",
        "Locks held in the state machine.",
        s.locks_held,
    );
    let ls = &node.locks().stats;
    let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
    labelled(
        r,
        "lockd_lock_events",
        "Lock events committed by this node as leader: grants, releases for callers, expiries, grants pipelined behind a release or expiry (handoff), grants released because the caller left (phantom_release), leases extended (keepalive), keys handed to a waiter other than the oldest by the module's election policy (picked).",
        &[
            (Event { event: "grant" }, n(&ls.grants)),
            (Event { event: "release" }, n(&ls.releases)),
            (Event { event: "expire" }, n(&ls.expires)),
            (Event { event: "handoff" }, n(&ls.handoffs)),
            (Event { event: "phantom_release" }, n(&ls.phantom_releases)),
            (Event { event: "keepalive" }, n(&ls.keepalives)),
            (Event { event: "picked" }, n(&ls.picked)),
        ],
    );
    gauge(
        r,
        "lockd_lock_waiters",
        "Callers waiting for a lock.",
        n(&ls.waiting),
    );
    if let Some(hub) = node.watch_hub() {
        gauge(
            r,
            "lockd_watchers",
            "Watch streams open on this node.",
            hub.open() as u64,
        );
        counter(
            r,
            "lockd_watchers_cut",
            "Watch streams this node ended: left behind by the kept changes, behind an installed snapshot, or at shutdown.",
            hub.cut_count(),
        );
    }

    gauge(
        r,
        "lockd_guest_memory_bytes",
        "Linear memory of the active lock module.",
        s.guest_memory_bytes,
    );
    gauge(
        r,
        "lockd_state_machine_poisoned",
        "1 when the guest failed and applying stopped.",
        s.poisoned.is_some() as u64,
    );
    counter(
        r,
        "lockd_module_failures",
        "Commands the lock modules failed on, each refused with module_failed while the rest applied (replicated: every node counts the same).",
        s.module_failures_total.unwrap_or(0),
    );
    gauge(
        r,
        "lockd_module_out_of_service",
        "1 when the active lock module failed so often that the kinds of command it failed on are refused until another module is swapped in (replicated).",
        s.module_out_of_service.is_some() as u64,
    );
    counter(
        r,
        "lockd_guest_rebuilds",
        "Guest instances this node rebuilt from its checkpoint after a failed call.",
        upgrades.rebuilds,
    );
    labelled(
        r,
        "lockd_upgrades",
        "Upgrade entries applied: swapped the module, or rejected (the old module stayed).",
        &[
            (Outcome { result: "swapped" }, upgrades.swapped),
            (Outcome { result: "rejected" }, upgrades.rejected),
        ],
    );
    gauge(
        r,
        "lockd_module_since_index",
        "Log index at which the active module became active.",
        s.module_since_index,
    );
    counter(
        r,
        "lockd_audit_divergences",
        "State-hash divergences between nodes found by the determinism audit.",
        s.audit_divergences,
    );

    let sh = s.shadow.as_ref();
    gauge(
        r,
        "lockd_shadow_active",
        "1 when a shadow module runs (and has not failed).",
        sh.is_some_and(|x| x.failed.is_none()) as u64,
    );
    counter(
        r,
        "lockd_shadow_commands_compared",
        "Commands fed to both the active and the shadow module.",
        sh.map_or(0, |x| x.commands_compared),
    );
    labelled(
        r,
        "lockd_shadow_diffs",
        "Differences the shadow showed: command outcomes, or state hashes at audit points.",
        &[
            (Kind { kind: "outcome" }, sh.map_or(0, |x| x.outcome_diffs)),
            (Kind { kind: "hash" }, sh.map_or(0, |x| x.hash_diffs)),
        ],
    );

    let cap = s.capacity.unwrap_or_default();
    gauge(
        r,
        "lockd_capacity_held",
        "Holdings counted against the capacity bound.",
        cap.held,
    );
    gauge(
        r,
        "lockd_capacity_max_held",
        "The capacity bound on holdings.",
        cap.limits.max_held,
    );
    gauge(
        r,
        "lockd_capacity_key_bytes",
        "Key bytes of the holdings, counted against the capacity bound.",
        cap.key_bytes,
    );
    gauge(
        r,
        "lockd_capacity_max_key_bytes",
        "The capacity bound on key bytes.",
        cap.limits.max_key_bytes,
    );

    r.register(
        "lockd_acquire_duration_seconds",
        "Acquires on this node, from the request's checks to its answer (waiting included), by outcome.",
        ls.acquire_latency.family(),
    );
    r.register(
        "lockd_raft_commit_duration_seconds",
        "Lock entries from proposal to committed and applied.",
        node.locks().commit_latency().histogram(),
    );
    r.register(
        "lockd_wal_fsync_duration_seconds",
        "Group-commit records of the log, written and fsynced.",
        log.fsync_latency.histogram(),
    );
    let sm = node.apply_latency();
    r.register(
        "lockd_apply_duration_seconds",
        "Batches of committed entries applied to the state machine.",
        sm.apply.histogram(),
    );
    r.register(
        "lockd_stage_seconds",
        "Where writes' time goes on the leader, stage by stage (docs/performance.md, \"Stages\"): an acquire's receive (read, parse, authorise), and each lock entry's queue, append, replicate (to committed; the leader's own fsync runs beside it), apply and answer.",
        sm.stages.family(),
    );
    r.register(
        "lockd_module_swap_duration_seconds",
        "Batches that carried an upgrade entry, applied (validation, migration and swap).",
        sm.swap.histogram(),
    );
    reg
}

/// Prometheus metrics of this node (OpenMetrics text).
#[utoipa::path(get, path = paths::METRICS, tag = "cluster",
    responses((status = 200, description = "OpenMetrics text; the families are listed in deploy/grafana/metrics.txt", content_type = "application/openmetrics-text", body = String)))]
pub async fn metrics(State(node): State<Arc<Services>>) -> Response {
    let mut out = String::new();
    match prometheus_client::encoding::text::encode(&mut out, &registry(&node)) {
        Ok(()) => ([(axum::http::header::CONTENT_TYPE, CONTENT_TYPE)], out).into_response(),
        // Writing to a String fails only on a bug in an encoder.
        Err(e) => super::error::ApiError::new(
            lockd_proto::ErrorCode::Internal,
            format!("cannot encode the metrics: {e}"),
        )
        .into_response(),
    }
}
