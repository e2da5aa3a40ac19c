//! `GET /metrics`: Prometheus text, one gauge or counter per row, labelled
//! by node.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::response::IntoResponse;

use super::services::Services;
use super::status::{status_with, Role};

pub async fn metrics(State(node): State<Arc<Services>>) -> impl IntoResponse {
    let (s, upgrades) = status_with(&node, false);
    let batches = node.log.stats().batches.load(Ordering::Relaxed);
    let ls = &node.locks.stats;
    let (swapped, rejected) = (upgrades.swapped, upgrades.rejected);
    let sh = s.shadow.as_ref();
    let cap = s.capacity.unwrap_or_default();
    // (name, type, help, value): one gauge or counter each, labelled by node.
    #[rustfmt::skip]
    let rows: [(&str, &str, &str, u64); 35] = [
        ("lockd_raft_term", "gauge", "Current Raft term.", s.term),
        ("lockd_raft_is_leader", "gauge", "1 when this node is the leader.", (s.role == Role::Leader) as u64),
        ("lockd_raft_commit_index", "gauge", "Last committed log index.", s.commit_index),
        ("lockd_raft_applied_index", "gauge", "Last applied log index.", s.applied_index),
        ("lockd_raft_last_log_index", "gauge", "Last log index.", s.last_log_index),
        ("lockd_locks_held", "gauge", "Locks held in the state machine.", s.locks_held),
        ("lockd_wal_entries_total", "counter", "Log entries made durable.", s.wal_entries),
        ("lockd_wal_batches_total", "counter", "Group-commit batches written.", batches),
        ("lockd_wal_fsyncs_total", "counter", "fsyncs issued by the log.", s.wal_fsyncs),
        ("lockd_snapshots_built_total", "counter", "Snapshots built.", s.snapshots_built),
        ("lockd_snapshots_installed_total", "counter", "Snapshots installed from a leader.", s.snapshots_installed),
        ("lockd_snapshot_last_bytes", "gauge", "Bytes of the last snapshot built or installed.", s.last_snapshot_bytes),
        ("lockd_snapshot_last_build_ms", "gauge", "Milliseconds the last snapshot build took.", s.last_snapshot_build_ms),
        ("lockd_snapshot_last_install_ms", "gauge", "Milliseconds the last install of a leader's snapshot took.", s.last_snapshot_install_ms),
        ("lockd_guest_memory_bytes", "gauge", "Linear memory of the active lock module.", s.guest_memory_bytes),
        ("lockd_lock_grants_total", "counter", "Grants committed by this node as leader.", ls.grants.load(Ordering::Relaxed)),
        ("lockd_lock_releases_total", "counter", "Releases committed for callers.", ls.releases.load(Ordering::Relaxed)),
        ("lockd_lock_expires_total", "counter", "Expire commands committed.", ls.expires.load(Ordering::Relaxed)),
        ("lockd_lock_handoffs_total", "counter", "Grants pipelined behind a release or expire.", ls.handoffs.load(Ordering::Relaxed)),
        ("lockd_lock_phantom_releases_total", "counter", "Grants released because the caller left.", ls.phantom_releases.load(Ordering::Relaxed)),
        ("lockd_lock_keepalives_total", "counter", "Leases extended.", ls.keepalives.load(Ordering::Relaxed)),
        ("lockd_lock_waiters", "gauge", "Callers waiting for a lock.", ls.waiting.load(Ordering::Relaxed)),
        ("lockd_state_machine_poisoned", "gauge", "1 when the guest failed and applying stopped.", s.poisoned.is_some() as u64),
        ("lockd_upgrades_swapped_total", "counter", "Upgrade entries applied that swapped the lock module.", swapped),
        ("lockd_upgrades_rejected_total", "counter", "Upgrade entries applied that were rejected (the old module stayed).", rejected),
        ("lockd_module_since_index", "gauge", "Log index at which the active module became active.", s.module_since_index),
        ("lockd_audit_divergences_total", "counter", "State-hash divergences between nodes found by the determinism audit.", s.audit_divergences),
        ("lockd_shadow_active", "gauge", "1 when a shadow module runs (and has not failed).", sh.is_some_and(|x| x.failed.is_none()) as u64),
        ("lockd_shadow_commands_compared_total", "counter", "Commands fed to both the active and the shadow module.", sh.map_or(0, |x| x.commands_compared)),
        ("lockd_shadow_outcome_diffs_total", "counter", "Commands whose shadow outcome differed from the active one.", sh.map_or(0, |x| x.outcome_diffs)),
        ("lockd_shadow_hash_diffs_total", "counter", "Audit points where the shadow's state hash differed.", sh.map_or(0, |x| x.hash_diffs)),
        ("lockd_capacity_held", "gauge", "Holdings counted against the capacity bound.", cap.held),
        ("lockd_capacity_max_held", "gauge", "The capacity bound on holdings.", cap.limits.max_held),
        ("lockd_capacity_key_bytes", "gauge", "Key bytes of the holdings, counted against the capacity bound.", cap.key_bytes),
        ("lockd_capacity_max_key_bytes", "gauge", "The capacity bound on key bytes.", cap.limits.max_key_bytes),
    ];
    let mut out = String::new();
    for (name, kind, help, value) in rows {
        let _ = write!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{node=\"{}\"}} {value}\n",
            s.id
        );
    }
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        out,
    )
}
